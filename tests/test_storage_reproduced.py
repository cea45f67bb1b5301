"""What the previous attack found and still reproduced (issue 20, point 8): each one, tried for real."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import (NOTES, append, assert_refused, folder_digest, log_bytes, run_notes, write_log)

POSIX = sys.platform != "win32"


# --------------------------------------------------------------------------
# A hard-linked log

@pytest.mark.skipif(not POSIX, reason="hard links as POSIX makes them")
@pytest.mark.parametrize("tail", [b"", b'{"id":"n0000'], ids=["whole", "torn"])
def test_a_hard_linked_log_is_refused_and_left_as_it_was(tmp_path, tail):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Before the link.", code=None).code == 0
    export = tmp_path / "export.json"
    assert run_notes("export", "--output", export, folder=folder).code == 0
    write_log(folder, log_bytes(folder) + tail)
    other = tmp_path / "elsewhere.jsonl"
    os.link(str(folder / "session_notes.jsonl"), str(other))
    before, other_before = folder_digest(folder), other.read_bytes()
    message = assert_refused(append(folder, "decision", "Through the link?", code=None), 2, "hard links", "Nothing was written")
    assert "cp " in message and "mv " in message, message  # the way out: give the log a file of its own
    assert folder_digest(folder) == before and other.read_bytes() == other_before
    # restore, which adds an export's missing notes to the log (and mends its tail), refuses it as well.
    assert_refused(run_notes("restore", export, folder=folder), 2, "hard links")
    assert folder_digest(folder) == before and other.read_bytes() == other_before
    # The way out the refusal names works.
    log = str(folder / "session_notes.jsonl")
    shutil.copyfile(log, log + ".copy")
    os.replace(log + ".copy", log)
    assert append(folder, "decision", "After the way out.", code=None).code == 0
    assert other.read_bytes() == other_before


# --------------------------------------------------------------------------
# --help and --version into a full disk, unbuffered

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device that is always full")
@pytest.mark.parametrize("arguments", [["--help"], ["--version"], ["append", "--help"]])
def test_help_into_a_full_disk_unbuffered_is_not_a_success(tmp_path, arguments):
    environment = dict(os.environ, PYTHONUNBUFFERED="1")
    with open("/dev/full", "wb") as full:
        completed = subprocess.run([sys.executable, "-S", str(NOTES)] + arguments, stdout=full,
                                   stderr=subprocess.PIPE, env=environment, timeout=60)
    assert completed.returncode == 1, completed
    assert json.loads(completed.stderr) == {"ok": False, "error": "cannot print the result (No space left on device)"}


@pytest.mark.parametrize("arguments", [["--help"], ["--version"]])
def test_help_and_version_still_print(arguments):
    result = run_notes(*arguments)
    assert result.code == 0 and result.stderr == "", result
    assert result.stdout.startswith("usage: notes.py") or re.fullmatch(r"notes\.py \S+\n", result.stdout), result


# --------------------------------------------------------------------------
# An append-only log (chattr +a) with a cut-off last line

def chattr(flag, path) -> bool:
    try:
        return subprocess.run(["chattr", flag, str(path)], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


@pytest.fixture
def append_only_log(tmp_path):
    """A session whose log has a cut-off last line and the append-only attribute."""
    folder = tmp_path / "session"
    assert append(folder, "decision", "Whole.", code=None).code == 0
    write_log(folder, log_bytes(folder) + b'{"id":"n0000')
    log = folder / "session_notes.jsonl"
    if not chattr("+a", log):
        pytest.skip("chattr +a is refused here (not root, or a filesystem without attributes)")
    yield folder
    chattr("-a", log)


def test_an_append_only_log_leaves_no_pile_of_side_files(append_only_log):
    folder = append_only_log
    before = log_bytes(folder)
    for attempt in range(3):
        result = append(folder, "decision", "Attempt %d." % attempt, code=None)
        assert_refused(result, 2, "append-only", "Nothing was written", "chattr -a")
        assert [name for name in os.listdir(folder) if ".torn-" in name] == [], attempt
    assert log_bytes(folder) == before
    chattr("-a", folder / "session_notes.jsonl")
    result = append(folder, "decision", "Once the attribute is gone.", code=None)
    assert result.code == 0 and result.receipt["recovered"]["kind"] == "torn_tail", result
    assert len([name for name in os.listdir(folder) if ".torn-" in name]) == 1


# --------------------------------------------------------------------------
# What a killed restore or init leaves behind

def plant_partial_copy(folder, name) -> str:
    """The hidden partial copy a write of name killed before its rename leaves (a fresh one)."""
    path = os.path.join(str(folder), ".%s.%s.tmp" % (name, "a1b2c3d4e5f6"))
    with open(path, "wb") as handle:
        handle.write(b'{"id":"n00001","ts":"2026-')
    return path


@pytest.mark.parametrize("name", ["session_notes.jsonl", "session_meta.json"])
@pytest.mark.parametrize("writer", ["append", "restore"])
def test_a_later_writer_removes_a_killed_restores_partial_copy(session, tmp_path, name, writer):
    assert append(session, "decision", "Kept.", code=None).code == 0
    assert run_notes("export", "--output", tmp_path / "export.json", folder=session).code == 0
    partial = plant_partial_copy(session, name)
    export_partial = plant_partial_copy(session, "session_export.json")  # not a writer's: an export may be live
    if writer == "append":
        result = append(session, "decision", "Later.", code=None)
    else:
        result = run_notes("restore", tmp_path / "export.json", folder=session)
    assert result.code == 0, result
    assert not os.path.exists(partial)
    assert os.path.exists(export_partial)


# --------------------------------------------------------------------------
# Markdown that a renderer would obey

STYLE = "<style>body{display:none}</style> and *bold* [link](http://x) `code` &amp; ~~gone~~ a|b"


def markup_outside_code_blocks(document: str) -> list:
    """The lines a renderer reads as markdown (not an indented code block) that hold live markup.

    A recap line's own mark at its end ([n00001; ...]) is the tool's, not a note's."""
    lines = [re.sub(r" \[[^\[\]]*\]$", "", line) for line in document.splitlines() if not line.startswith("    ")]
    return [line for line in lines if re.search(r"(?<!\\)[<&*`\[\]~|]", line)]


def test_the_markdown_export_shows_an_effect_as_typed(session, tmp_path):
    assert append(session, "decision", "Styled.", "--effect", STYLE + "\nsecond line " + STYLE, code=None).code == 0
    assert append(session, "decision", "After the style.", code=None).code == 0
    output = tmp_path / "audit.md"
    assert run_notes("export", "--format", "md", "--output", output, folder=session).code == 0
    document = output.read_text(encoding="utf-8")
    assert "<style>" not in document
    effect_lines = [line for line in document.splitlines() if line.startswith("- Effect: ")]
    assert effect_lines == ["- Effect: " + re.sub(r"([\\`*_\[\]<>&~|])", r"\\\1", STYLE)]
    assert "      second line " + re.sub(r"([\\`*_\[\]<>&~|])", r"\\\1", STYLE) in document.splitlines()
    assert markup_outside_code_blocks(document) == []


@pytest.mark.parametrize("text", ["<style>hide</style> the rest", "# Not a heading", "> not a quote",
                                  "1. not a list", "+ not a list", "--- not a rule", "*not bold*"])
def test_the_markdown_recap_shows_text_and_effect_as_typed(session, text):
    assert append(session, "decision", text, "--effect", STYLE, code=None).code == 0
    result = run_notes("recap", "--format", "md", folder=session)
    assert result.code == 0, result
    assert "<style>" not in result.stdout
    line = next(line for line in result.stdout.splitlines() if "n00001" in line)
    assert re.match(r"- ([0-9]+)?\\", line), line  # the text's start opens nothing: its mark is escaped
    assert markup_outside_code_blocks(result.stdout) == [], result.stdout


def test_plain_recap_lines_are_unchanged(session):
    assert append(session, "decision", "The log is JSONL: café.", "--effect", "Append-only, v0-readable.", code=None).code == 0
    result = run_notes("recap", "--format", "md", folder=session)
    assert "- The log is JSONL: café. Effect: Append-only, v0-readable. [n00001]" in result.stdout.splitlines()


# --------------------------------------------------------------------------
# verify beside a writer holding the lock over a cut-off last line

HOLDING_WRITER = r"""
import fcntl, os, sys
folder = sys.argv[1]
folder_lock = os.open(folder, os.O_RDONLY)
fcntl.flock(folder_lock, fcntl.LOCK_EX)
lock = os.open(os.path.join(folder, "session_notes.lock"), os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
sys.stdout.write("held\n")
sys.stdout.flush()
sys.stdin.readline()
"""


@pytest.mark.skipif(not POSIX, reason="the writer stand-in locks with flock")
def test_verify_says_the_last_line_is_being_written(session):
    assert append(session, "decision", "Whole.", code=None).code == 0
    write_log(session, log_bytes(session) + b'{"id":"n00002","ts":"2026-')
    writer = subprocess.Popen([sys.executable, "-S", "-c", HOLDING_WRITER, str(session)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline() == b"held\n"
        verify = run_notes("verify", folder=session)
        assert verify.code == 0 and verify.receipt["ok"] is True and verify.receipt["total"] == 1, verify
        assert verify.receipt["warnings"] == [
            "the last line has no newline yet and a writer holds the lock: it is being written, so it was "
            "not checked. Run verify again once that writer has finished"], verify
    finally:
        writer.communicate(b"go\n", timeout=60)
    verify = run_notes("verify", folder=session)  # the writer is gone: now the cut-off line is damage
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["torn_tail"], verify
    assert "warnings" not in verify.receipt


def test_verify_of_a_whole_log_beside_a_holder_has_no_warning(session):
    assert append(session, "decision", "Whole.", code=None).code == 0
    writer = subprocess.Popen([sys.executable, "-S", "-c", HOLDING_WRITER, str(session)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline() == b"held\n"
        verify = run_notes("verify", folder=session)
        assert verify.code == 0 and "warnings" not in verify.receipt, verify
    finally:
        writer.communicate(b"go\n", timeout=60)


# --------------------------------------------------------------------------
# mcp with standard input closed

@pytest.mark.skipif(not POSIX, reason="closing a descriptor before exec is POSIX")
def test_mcp_with_standard_input_closed_ends_quietly(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-S", str(NOTES), "--dir", str(tmp_path / "s"), "mcp"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=lambda: os.close(0), timeout=60)
    assert completed.returncode == 0 and completed.stdout == b"" and completed.stderr == b"", completed
    assert not (tmp_path / "s").exists()
