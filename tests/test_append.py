"""append and its input rules: what a note may hold (characters, sizes, labels, standard input),
where it may be written (unwritable folders, links), and refusals that name the way out without echoing
what was typed."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import (LOG, NOTES, REPO, SESSION_ID, append, assert_no_traceback, assert_refused,
                      code_point_cases, copy_fixture, folder_digest, line_of, log_bytes, notes, read_records,
                      recap, recap_text, refused_unchanged, run_notes, run_script, v0_checksum, write_session)


# ==========================================================================
# Bad input and unsafe paths: a clean refusal, and the session as it was

META = "session_meta.json"
LOCK = "session_notes.lock"

TEXT_LIMIT = 2000
EFFECT_LIMIT = 1000


# --------------------------------------------------------------------------
# Local helpers

def run_in_process(capsys, argv) -> tuple:
    """notes.main(argv) in this process: (exit code, parsed output)."""
    code = notes.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out and "Traceback" not in captured.err
    return code, json.loads(captured.out)


# --------------------------------------------------------------------------
# Control characters

# C0 controls other than tab, newline and carriage return, and DEL.  NUL cannot travel in
# argv, so it is checked in-process below.
FORBIDDEN_RANGES = [(0x01, 0x08), (0x0B, 0x0C), (0x0E, 0x1F), (0x7F, 0x7F)]
FORBIDDEN_CODES = code_point_cases(FORBIDDEN_RANGES, seed=1, size=4)


@pytest.mark.parametrize("field", ["text", "effect"])
@pytest.mark.parametrize("code", FORBIDDEN_CODES, ids=lambda code: "U+%04X" % code)
def test_control_character_is_refused(session, field, code):
    # In the middle of the value: at the edges some of them (0x0B, 0x0C, 0x1C-0x1F) are
    # white space that stripping would remove before any check.
    value = "before%safter" % chr(code)
    args = {"text": "a plain decision", "effect": None}
    args[field] = value
    command = ["append", "--type", "decision", "--text", args["text"]]
    if args["effect"] is not None:
        command += ["--effect", args["effect"]]
    error = refused_unchanged(session, *command, words=("--" + field, "U+%04X" % code))
    assert "control character" in error


@pytest.mark.parametrize("field", ["text", "effect"])
def test_nul_is_refused_in_process(session, capsys, field):
    before = folder_digest(session)
    argv = ["--dir", str(session), "append", "--type", "decision", "--text", "plain"]
    if field == "text":
        argv[-1] = "before\x00after"
    else:
        argv += ["--effect", "before\x00after"]
    code, output = run_in_process(capsys, argv)
    assert code == 2
    assert set(output) == {"ok", "error"} and output["ok"] is False
    assert "--" + field in output["error"] and "U+0000" in output["error"]
    assert folder_digest(session) == before


def test_control_character_refused_under_every_python(session, python):
    refused_unchanged(session, "append", "--type", "gate", "--text", "escape \x1b[31m red",
                      words=("U+001B",), python=python)


# --------------------------------------------------------------------------
# Undecodable bytes (they reach Python as lone surrogates)

UNDECODABLE = {
    "latin1_e_acute": b"caf\xe9 au lait",
    "lone_ff": b"\xff\xfe start",
    "bad_continuation": b"ok \xc3\x28 broken",
    "encoded_surrogate": b"a \xed\xa0\x80 b",
}


@pytest.mark.parametrize("field", ["text", "effect"])
@pytest.mark.parametrize("raw", list(UNDECODABLE.values()), ids=list(UNDECODABLE))
def test_undecodable_bytes_are_refused(session, field, raw):
    command = ["append", "--type", "decision", "--text", raw if field == "text" else "plain"]
    if field == "effect":
        command += ["--effect", raw]
    error = refused_unchanged(session, *command, words=("--" + field, "UTF-8"))
    assert "unexpected" not in error


def test_undecodable_bytes_refused_under_every_python(session, python):
    # v0 crashed here with an unexpected error (exit 1).
    refused_unchanged(session, "append", "--type", "decision", "--text", b"caf\xe9",
                      words=("UTF-8",), python=python)


def test_undecodable_type_is_a_usage_error(session):
    refused_unchanged(session, "append", "--type", b"deci\xffsion", "--text", "plain",
                      words=("--type",))


# --------------------------------------------------------------------------
# Sizes

@pytest.mark.parametrize("field, limit", [("text", TEXT_LIMIT), ("effect", EFFECT_LIMIT)])
def test_value_over_the_limit_is_refused(session, field, limit):
    value = "x" * (limit + 1)
    command = ["append", "--type", "decision", "--text", value if field == "text" else "plain"]
    if field == "effect":
        command += ["--effect", value]
    error = refused_unchanged(session, *command, words=("--" + field, str(limit), str(limit + 1)))
    # The refusal says why there is a limit at all.
    assert "conversation" in error


@pytest.mark.parametrize("field, limit", [("text", TEXT_LIMIT), ("effect", EFFECT_LIMIT)])
def test_value_at_the_limit_is_kept_and_limit_counts_after_stripping(session, field, limit):
    value = "y" * limit
    padded = "  \t" + value + " \n "
    if field == "text":
        append(session, "decision", padded)
    else:
        append(session, "decision", "plain", "--effect", padded)
    [record] = read_records(session)
    assert record[field] == value


@pytest.mark.parametrize("field, limit", [("text", TEXT_LIMIT), ("effect", EFFECT_LIMIT)])
def test_limit_counts_characters_not_bytes(session, field, limit):
    # Four UTF-8 bytes each: the limit is on characters.
    value = "\U0001F600" * limit
    if field == "text":
        append(session, "decision", value)
    else:
        append(session, "decision", "plain", "--effect", value)
    assert read_records(session)[0][field] == value
    over = value + "\U0001F600"
    command = ["append", "--type", "decision", "--text", over if field == "text" else "other"]
    if field == "effect":
        command += ["--effect", over]
    refused_unchanged(session, *command, words=(str(limit),))


# --------------------------------------------------------------------------
# The rest of the bad-input table: one row per refusal of a session that exists

BAD_APPEND = [
    ("empty_text", ["--type", "decision", "--text", ""], ("--text", "empty")),
    ("blank_text", ["--type", "decision", "--text", "   "], ("--text", "empty")),
    ("whitespace_text", ["--type", "decision", "--text", "\n\t \r\n"], ("--text", "empty")),
    ("unknown_type", ["--type", "thought", "--text", "plain"], ("--type", "use one of")),
    ("type_wrong_case", ["--type", "Decision", "--text", "plain"], ("--type", "did you mean decision?")),
    ("empty_type", ["--type", "", "--text", "plain"], ("--type",)),
    ("status_on_decision", ["--type", "decision", "--text", "plain", "--status", "open"], ("--status",)),
    ("status_on_source", ["--type", "source", "--text", "plain", "--status", "closed"], ("--status",)),
    ("status_unknown", ["--type", "gate", "--text", "plain", "--status", "pending"], ("--status",)),
    ("ref_word", ["--type", "decision", "--text", "plain", "--ref", "abc"], ("--ref", "is not a note id")),
    ("ref_too_short", ["--type", "decision", "--text", "plain", "--ref", "n1"], ("--ref", "is not a note id")),
    ("ref_capital", ["--type", "decision", "--text", "plain", "--ref", "N00001"], ("--ref", "is not a note id")),
    ("ref_trailing_letter", ["--type", "decision", "--text", "plain", "--ref", "n0001x"], ("--ref",)),
    ("ref_fullwidth_digits", ["--type", "decision", "--text", "plain", "--ref", "n\uff10\uff10\uff10\uff10\uff11"],
     ("--ref",)),
    ("ref_missing_note", ["--type", "decision", "--text", "plain", "--ref", "n00042"], ("--ref", "n00042")),
    ("missing_text", ["--type", "decision"], ("--text",)),
    ("missing_type", ["--text", "plain"], ("--type",)),
]


@pytest.mark.parametrize("args, words", [(row[1], row[2]) for row in BAD_APPEND],
                         ids=[row[0] for row in BAD_APPEND])
def test_bad_append_is_refused(session, args, words):
    refused_unchanged(session, "append", *args, words=words)


@pytest.mark.parametrize("limit", ["0", "-3", "abc", "1.5", "", "--5"])
def test_bad_tail_limit_is_refused(session, limit):
    append(session, "decision", "one note to read")
    refused_unchanged(session, "tail", "--limit", limit, words=("--limit",))


def test_huge_tail_limit_is_refused_with_the_way_out(session):
    # A limit past 1000 would hold that many records in memory for one reply (issue 20.3).
    append(session, "decision", "first")
    before = folder_digest(session)
    result = run_notes("tail", "--limit", str(10 ** 30), folder=session)
    assert_refused(result, 2, "--limit is at most 1000", "export")
    assert folder_digest(session) == before
    assert run_notes("tail", "--limit", "1000", folder=session).receipt["count"] == 1


# --------------------------------------------------------------------------
# A damaged meta: append (and init) refuse and touch nothing

DAMAGED_META = {
    "not_json": b"this is not json\n",
    "empty_file": b"",
    "json_list": b"[]\n",
    "json_string": b'"0f3c2b1c-3c66-49ee-8557-e323c0678aaf"\n',
    "no_session_id": b'{\n  "schema_version": "shaping-memory-session-meta.v0",\n  "created_at": "2026-01-01T00:00:00Z"\n}\n',
    "empty_session_id": b'{"schema_version": "shaping-memory-session-meta.v0", "session_id": ""}\n',
    "numeric_session_id": b'{"schema_version": "shaping-memory-session-meta.v0", "session_id": 7}\n',
    "cut_off": b'{\n  "schema_version": "shaping-memory-session-meta.v0",\n  "session_id": "0f3c',
    "not_utf8": b'{"session_id": "caf\xe9"}\n',
}


@pytest.mark.parametrize("command", ["append", "init"])
@pytest.mark.parametrize("content", list(DAMAGED_META.values()), ids=list(DAMAGED_META))
def test_damaged_meta_is_refused(session, command, content):
    append(session, "decision", "a note written before the meta broke")
    with open(os.path.join(str(session), META), "wb") as handle:
        handle.write(content)
    args = ["append", "--type", "decision", "--text", "plain"] if command == "append" else ["init"]
    error = refused_unchanged(session, *args, words=(META,))
    assert "session_id" in error


def test_damaged_meta_of_a_v0_session_is_refused(tmp_path):
    # A v0 folder has no lock file yet: the refusal must not even create one.
    folder = copy_fixture("basic", tmp_path / "basic")
    with open(str(folder / META), "wb") as handle:
        handle.write(b"{ broken\n")
    before = folder_digest(folder)
    result = run_notes("append", "--type", "decision", "--text", "plain", folder=folder)
    assert_refused(result, 2, META)
    assert set(result.receipt) == {"ok", "error"}
    assert folder_digest(folder) == before


# --------------------------------------------------------------------------
# Accepted characters: kept as is, one record per line, read back intact by every reader

ACCEPTED = {
    "tab": "column one\tcolumn two",
    "newline": "line one\nline two",
    "carriage_return": "old mac\rline",
    "crlf": "windows\r\nline",
    "line_separator": "before\u2028after",
    "paragraph_separator": "before\u2029after",
    "emoji": "ship it \U0001F680 \U0001F44D\U0001F3FD family \U0001F468\u200d\U0001F469\u200d\U0001F467",
    "hebrew": "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "arabic_with_rlm": "\u0645\u0631\u062d\u0628\u0627 \u200f(123)",
    "left_to_right_mark": "abc \u200edcba end",
    "combining": "cafe\u0301 na\u0308ive",
    "zero_width": "zero\u200bwidth\ufeffbom",
    "nbsp_inside": "ten\u00a0km",
    "quotes_and_backslash": 'say "hi" \\ and \\n literally',
}


@pytest.mark.parametrize("value", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_accepted_characters_are_kept_as_is(session, value):
    append(session, "decision", value, "--effect", "effect: " + value)
    raw = log_bytes(session)
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n"), "a record must be exactly one line"
    record = json.loads(raw[:-1].decode("utf-8"))
    assert record["text"] == value
    assert record["effect"] == "effect: " + value
    tail = run_notes("tail", folder=session)
    assert tail.code == 0, tail
    assert tail.receipt["records"][0]["text"] == value


def test_separators_inside_records_do_not_split_them_for_readers(session, tmp_path):
    # U+2028, U+2029 and CR are line breaks to str.splitlines; the log's lines end at
    # b"\n" only, so every reader must see three records.  (U+0085, another, is a C1
    # control that append refuses: tests/test_hostile.py.)
    tricky = ["first\u2028half \r second\u2029half",
              "plain middle",
              "separators\r\u2028inside\u2028x"]
    for text in tricky:
        append(session, "decision", text, "--effect", "e\u2028f")
    raw = log_bytes(session)
    assert raw.count(b"\n") == 3
    assert "\u2028".encode("utf-8") in raw and "\u2029".encode("utf-8") in raw

    tail = run_notes("tail", "--limit", "10", folder=session)
    assert tail.code == 0 and "warnings" not in tail.receipt, tail
    assert [record["text"] for record in tail.receipt["records"]] == tricky

    summary = run_notes("summary", folder=session)
    assert summary.code == 0 and "warnings" not in summary.receipt, summary
    assert summary.receipt["total"] == 3
    assert summary.receipt["last_note_id"] == "n00003"

    verify = run_notes("verify", folder=session)
    assert verify.code == 0, verify
    assert verify.receipt["ok"] is True and verify.receipt["total"] == 3 and verify.receipt["problems"] == []

    output = tmp_path / "export.json"
    export = run_notes("export", "--output", output, folder=session)
    assert export.code == 0 and "warnings" not in export.receipt, export
    with open(str(output), encoding="utf-8") as handle:
        exported = json.load(handle)
    assert [record["text"] for record in exported["records"]] == tricky
    assert all(record["effect"] == "e\u2028f" for record in exported["records"])

    # The next append still counts lines correctly.
    assert append(session, "decision", "after the separators").receipt["note_id"] == "n00004"


def test_blank_effect_is_dropped_not_refused(session):
    append(session, "decision", "a decision", "--effect", "   ")
    [record] = read_records(session)
    assert "effect" not in record


# --------------------------------------------------------------------------
# --dir naming a file

READER_AND_WRITER_COMMANDS = [
    ["init"],
    ["append", "--type", "decision", "--text", "plain"],
    ["tail"],
    ["summary"],
    ["export"],
    ["verify"],
    ["recap"],
]


@pytest.mark.parametrize("command", READER_AND_WRITER_COMMANDS, ids=lambda command: command[0])
def test_dir_naming_a_file_is_refused(tmp_path, command):
    a_file = tmp_path / "not_a_folder.txt"
    a_file.write_bytes(b"someone's file\n")
    before = folder_digest(tmp_path)
    result = run_notes(*command, folder=a_file)
    error = assert_refused(result, 2, os.path.realpath(str(a_file)), "file")
    assert "--dir" in error
    assert folder_digest(tmp_path) == before


@pytest.mark.parametrize("command", [["init"], ["append", "--type", "decision", "--text", "x"], ["tail"]],
                         ids=lambda command: command[0])
def test_dir_below_a_file_is_refused(tmp_path, command):
    a_file = tmp_path / "not_a_folder.txt"
    a_file.write_bytes(b"someone's file\n")
    before = folder_digest(tmp_path)
    result = run_notes(*command, folder=a_file / "shaping")
    assert_refused(result, 2, "--dir")
    assert folder_digest(tmp_path) == before


# --------------------------------------------------------------------------
# A folder where files cannot be created

# Root ignores a folder's mode bits.  setpriv with an empty bounding set starts the child
# with no capabilities at all, so root then obeys chmod 0o555 like any user.
NO_CAPABILITIES = ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--"]


def cannot_create_in(folder: str, prefix=()) -> bool:
    """Whether a process started with prefix is unable to create a file in folder (tried for real)."""
    probe = (
        "import os, sys\n"
        "path = os.path.join(sys.argv[1], '.notes-write-probe-%d' % os.getpid())\n"
        "try:\n"
        "    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))\n"
        "except OSError:\n"
        "    sys.exit(7)\n"
        "os.unlink(path)\n")
    try:
        completed = subprocess.run(list(prefix) + [sys.executable, "-S", "-c", probe, folder],
                                   capture_output=True, timeout=60)
    except OSError:  # the prefix command is not installed
        return False
    return completed.returncode == 7


def read_only_runner(folder: str):
    """A way to run notes.py for which folder (chmod 0o555) is read-only, or None."""
    if cannot_create_in(folder):
        return run_notes
    if shutil.which(NO_CAPABILITIES[0]) and cannot_create_in(folder, NO_CAPABILITIES):
        return lambda *args, **options: run_script(*args, prefix=NO_CAPABILITIES, **options)
    return None


@pytest.fixture(params=["chmod_555", "kernel_filesystem"])
def unwritable(request, tmp_path):
    """(folder, runner): a folder where the runner's notes.py cannot create files.

    chmod_555: a folder of ours made read-only (run without capabilities when we are root);
    kernel_filesystem: /proc or /sys, where no one creates files.
    """
    if request.param == "kernel_filesystem":
        for candidate in ("/proc", "/sys"):
            if os.path.isdir(candidate) and cannot_create_in(candidate):
                yield candidate, run_notes
                return
        pytest.skip("neither /proc nor /sys refuses new files here")
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        runner = read_only_runner(str(read_only))
        if runner is None:
            pytest.skip("a chmod 0o555 folder stays writable for this user")
        yield str(read_only), runner
    finally:
        read_only.chmod(0o755)


def assert_no_session_files(folder: str) -> None:
    for name in (META, LOG, LOCK):
        assert not os.path.lexists(os.path.join(folder, name)), name


@pytest.mark.parametrize("command", [["init"], ["append", "--type", "decision", "--text", "plain"]],
                         ids=lambda command: command[0])
def test_unwritable_folder_is_a_clean_refusal(unwritable, command):
    folder, runner = unwritable
    result = runner(*command, folder=folder)
    error = assert_refused(result, 2, os.path.realpath(folder), "--dir")
    assert set(result.receipt) == {"ok", "error"}
    assert "unexpected" not in error
    assert_no_session_files(folder)


@pytest.mark.parametrize("command", [["init"], ["append", "--type", "decision", "--text", "plain"]],
                         ids=lambda command: command[0])
def test_folder_that_cannot_be_made_is_a_clean_refusal(unwritable, command):
    folder, runner = unwritable
    target = os.path.join(folder, "shaping")
    result = runner(*command, folder=target)
    error = assert_refused(result, 2, os.path.realpath(folder), "--dir")
    assert "unexpected" not in error
    assert not os.path.lexists(target)


def test_export_into_an_unwritable_folder_is_a_clean_refusal(session, unwritable):
    folder, runner = unwritable
    append(session, "decision", "plain")
    output = os.path.join(folder, "session_export.json")
    before = folder_digest(session)
    result = runner("export", "--output", output, folder=session)
    error = assert_refused(result, 2, "--output")
    assert output in error and "unexpected" not in error
    assert not os.path.lexists(output)
    assert folder_digest(session) == before


def test_default_folder_that_is_read_only_is_a_clean_refusal(tmp_path):
    # Like the project folder Claude mounts read-only: notes.py sits in a folder it cannot
    # write, and no --dir is given.
    app = tmp_path / "project"
    app.mkdir()
    shutil.copy(str(NOTES), str(app / "notes.py"))
    app.chmod(0o555)
    try:
        runner = read_only_runner(str(app))
        if runner is None:
            pytest.skip("a chmod 0o555 folder stays writable for this user")
        result = runner("append", "--type", "decision", "--text", "plain", script=app / "notes.py")
        error = assert_refused(result, 2, os.path.realpath(str(app)), "--dir")
        assert "unexpected" not in error
        assert sorted(os.listdir(str(app))) == ["notes.py"]
    finally:
        app.chmod(0o755)


# --------------------------------------------------------------------------
# Symbolic links: never written through

def replace_with_link(path, target) -> None:
    if os.path.lexists(str(path)):
        os.unlink(str(path))
    os.symlink(str(target), str(path))


def test_log_link_in_a_live_session_is_refused(session, tmp_path):
    append(session, "decision", "a real note")
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(b"precious bytes that are not ours\n")
    replace_with_link(session / LOG, target)
    error = refused_unchanged(session, "append", "--type", "decision", "--text", "plain",
                              words=(str(session / LOG),))
    assert "link" in error
    assert target.read_bytes() == b"precious bytes that are not ours\n"


def test_dangling_log_link_in_a_live_session_is_refused(session, tmp_path):
    target = tmp_path / "nowhere" / "planted.jsonl"
    (tmp_path / "nowhere").mkdir()
    replace_with_link(session / LOG, target)
    refused_unchanged(session, "append", "--type", "decision", "--text", "plain", words=("link",))
    assert not os.path.lexists(str(target))


@pytest.mark.parametrize("command", [["init"], ["append", "--type", "decision", "--text", "plain"]],
                         ids=lambda command: command[0])
@pytest.mark.parametrize("target_state", ["empty_file", "missing"])
def test_log_link_without_meta_is_refused(tmp_path, command, target_state):
    # No session yet, but the log name is already a planted link: creating the session
    # must not write through it, nor leave a half-made session behind.
    folder = tmp_path / "session"
    folder.mkdir()
    target = tmp_path / "planted.jsonl"
    if target_state == "empty_file":
        target.write_bytes(b"")
    os.symlink(str(target), str(folder / LOG))
    before = folder_digest(folder)
    result = run_notes(*command, folder=folder)
    assert_refused(result, 2, "link")
    assert folder_digest(folder) == before
    if target_state == "empty_file":
        assert target.read_bytes() == b""
    else:
        assert not os.path.lexists(str(target))


@pytest.mark.parametrize("command", [["init"], ["append", "--type", "decision", "--text", "plain"]],
                         ids=lambda command: command[0])
def test_dangling_meta_link_is_refused(tmp_path, command):
    folder = tmp_path / "session"
    folder.mkdir()
    target = tmp_path / "planted_meta.json"
    os.symlink(str(target), str(folder / META))
    before = folder_digest(folder)
    result = run_notes(*command, folder=folder)
    assert_refused(result, 2, str(folder / META), "link")
    assert folder_digest(folder) == before
    assert not os.path.lexists(str(target))


def test_meta_link_is_refused_and_its_target_never_written(session, tmp_path):
    # Even a link to a good meta is refused by every writer, so nothing can be written
    # through it; restore is the writer that would rewrite a meta in a session folder.
    exported = tmp_path / "export.json"
    other = tmp_path / "other"
    run_notes("init", folder=other)
    append(other, "decision", "a note to restore")
    assert run_notes("export", "--output", exported, folder=other).code == 0

    target = tmp_path / "real_meta.json"
    shutil.move(str(session / META), str(target))
    os.symlink(str(target), str(session / META))
    meta_before = target.read_bytes()
    for command in (["init"], ["append", "--type", "decision", "--text", "plain"], ["restore", exported]):
        refused_unchanged(session, *command, words=(str(session / META), "link"))
        assert target.read_bytes() == meta_before


def test_lock_link_is_refused(session, tmp_path):
    target = tmp_path / "planted.lock"
    replace_with_link(session / LOCK, target)
    refused_unchanged(session, "append", "--type", "decision", "--text", "plain", words=("link",))
    assert not os.path.lexists(str(target))


# --------------------------------------------------------------------------
# export --output

def test_export_output_naming_a_folder_is_refused(session, tmp_path):
    append(session, "decision", "plain")
    destination = tmp_path / "exports"
    destination.mkdir()
    (destination / "keep.txt").write_bytes(b"keep me\n")
    before_destination = folder_digest(destination)
    error = refused_unchanged(session, "export", "--output", destination, words=("--output", str(destination)))
    assert "folder" in error
    assert folder_digest(destination) == before_destination


def test_export_output_naming_the_session_folder_is_refused(session):
    append(session, "decision", "plain")
    refused_unchanged(session, "export", "--output", session, words=("--output",))


def test_export_output_below_a_file_is_refused(session, tmp_path):
    append(session, "decision", "plain")
    a_file = tmp_path / "a_file"
    a_file.write_bytes(b"x\n")
    refused_unchanged(session, "export", "--output", a_file / "export.json", words=("--output",))
    assert a_file.read_bytes() == b"x\n"


def test_export_output_link_is_refused(session, tmp_path):
    append(session, "decision", "plain")
    target = tmp_path / "planted_target.json"
    link = tmp_path / "export.json"
    os.symlink(str(target), str(link))
    refused_unchanged(session, "export", "--output", link, words=("link",))
    assert not os.path.lexists(str(target))
    assert os.readlink(str(link)) == str(target)


def test_export_output_in_a_missing_folder_creates_it(session, tmp_path):
    # export makes the missing parent folders (os.makedirs) and writes the export there.
    append(session, "decision", "plain", "--effect", "an effect")
    output = tmp_path / "new" / "deeper" / "export.json"
    result = run_notes("export", "--output", output, folder=session)
    assert result.code == 0, result
    assert result.receipt == {"ok": True, "command": "export", "record_count": 1, "path": str(output),
                              "keep": {"file": str(output), "host": "local",
                                       "how": "Saved at this path on this computer."}}
    with open(str(output), encoding="utf-8") as handle:
        exported = json.load(handle)
    assert exported["record_count"] == 1
    assert exported["records"] == read_records(session)
    assert sorted(os.listdir(str(output.parent))) == ["export.json"]


# --------------------------------------------------------------------------
# What a new user or an adversary met as "unexpected error" is a guided
# refusal, exit 2, naming the problem and the way out, never the value.

def main_here(capsys, *words):
    import notes

    code = notes.main([str(word) for word in words])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, json.loads(out)


@pytest.mark.parametrize("words", [["append", "--type", "decision", "A quoted text."],
                                   ["append", "--type", "decision", "Unquoted", "text."]])
def test_a_text_given_without_text_is_told_where_it_goes(tmp_path, capsys, words):
    folder = tmp_path / "session"
    code, receipt = main_here(capsys, "--dir", folder, *words)
    assert (code, receipt) == (2, {"ok": False, "error": (
        "unexpected argument %d (a word after append that no option takes); a text goes after --text, in quotes: "
        "--text 'The text.' (see: python3 -S notes.py append --help)" % 6)})
    assert not folder.exists()


@pytest.mark.parametrize("words, name", [
    (["--dir", "a\0b", "tail"], "--dir"),
    (["--dir", "{folder}", "export", "--output", "x\0y.json"], "--output"),
    (["--dir", "{folder}", "restore", "x\0y.json"], "the export file's path"),
])
def test_a_path_with_a_nul_is_refused_not_an_unexpected_error(tmp_path, capsys, words, name):
    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Kept.")
    before = folder_digest(folder)
    code, receipt = main_here(capsys, *[word.replace("{folder}", str(folder)) for word in words])
    assert (code, receipt) == (2, {"ok": False, "error": (
        "%s holds a NUL character, which no file name can; pass the path without it" % name)})
    assert folder_digest(folder) == before


@pytest.mark.parametrize("output", ["a/" * 2100 + "x.json", "a/" * 300 + "x.json", "a" * 4097])
def test_an_export_path_too_long_or_deep_is_refused_not_an_unexpected_error(tmp_path, capsys, output):
    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Kept.")
    before = folder_digest(tmp_path)
    code, receipt = main_here(capsys, "--dir", folder, "export", "--output", tmp_path / output)
    assert (code, receipt) == (2, {"ok": False, "error": (
        "--output is over 4096 characters or 256 folders deep, more than a file system takes; pass a shorter path")})
    assert folder_digest(tmp_path) == before


def test_a_permission_error_is_a_refusal_with_the_way_out(tmp_path, capsys, monkeypatch):
    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Kept.")
    log = str(folder.resolve() / "session_notes.jsonl")
    real_open = notes._open_regular_file

    def denied(path, flags=os.O_RDONLY):  # root reads any file: the refusal a user meets, made by hand
        if path == log:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags)
    monkeypatch.setattr(notes, "_open_regular_file", denied)
    for command in ("tail", "summary", "verify"):
        code, receipt = main_here(capsys, "--dir", folder, command)
        assert (code, receipt) == (2, {"ok": False, "error": (
            "permission denied on %s; nothing was changed. Run the command as the user who owns the session, or "
            "pass --dir with a folder of your own" % log)}), command


def test_a_full_disk_says_to_free_space_not_to_pick_another_folder(tmp_path, capsys, monkeypatch):
    import errno

    import notes

    def full(folder):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(notes, "_make_private_folders", full)
    folder = tmp_path / "session"
    code, receipt = main_here(capsys, "--dir", folder, "init")
    assert (code, receipt) == (2, {"ok": False, "error": (
        "no room left on the disk holding %s (No space left on device); nothing was written. Free some space, "
        "then run the command again" % folder)})


def test_an_empty_home_is_refused_never_read_as_the_root_folder(tmp_path, capsys, monkeypatch):
    import notes

    monkeypatch.setenv("HOME", "")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setattr(notes, "_is_installed_package_folder", lambda folder: True)
    existed = os.path.lexists("/.local")
    code, receipt = main_here(capsys, "append", "--type", "decision", "--text", "Where?")
    assert (code, receipt) == (2, {"ok": False, "error": (
        "notes.py is installed as a package and cannot tell your home folder; pass --dir (for example: "
        "python3 -S notes.py --dir /absolute/path/to/shaping init) or set SHAPING_NOTES_DIR")})
    assert os.path.lexists("/.local") == existed


def test_an_unknown_mcp_argument_is_named_by_its_place_never_by_its_name(tmp_path):
    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Kept.")
    server = notes._McpServer(str(folder), None, notes._mcp_served_tools(False), None)
    result = notes._mcp_call_tool(server, {"name": "tail", "arguments": {"limit": 2, "sk-secret-name": 1}})
    assert result["isError"] and result["structuredContent"] == {"ok": False, "error": (
        "tail takes no argument of the name given as argument 2 of this call; its arguments are: limit, types, "
        "since, until, grep, compact")}


# ==========================================================================
# No usage error repeats what was typed

# Assembled here so that no file holds a whole fake key.
SECRET = "AK" + "IA" + "QWERTY2345ZXCV67"
SECRET_PIECES = [SECRET, SECRET[4:], SECRET[-10:]]

USAGE_ERRORS = {
    "unquoted text": ["append", "--type", "decision", "--text", "the", SECRET],
    "unknown command": [SECRET],
    "unknown command with options": [SECRET, "--type", "decision"],
    "type choice": ["append", "--type", SECRET, "--text", "x"],
    "status choice": ["append", "--type", "gate", "--status", SECRET, "--text", "x"],
    "provenance choice": ["append", "--type", "decision", "--text", "x", "--provenance", SECRET],
    "evidence choice": ["append", "--type", "decision", "--text", "x", "--evidence", SECRET],
    "format choice": ["recap", "--format", SECRET],
    "ref not a note id": ["append", "--type", "decision", "--text", "x", "--ref", SECRET],
    "limit not an integer": ["tail", "--limit", SECRET],
    "since not a time": ["tail", "--since", SECRET],
    "until not a time": ["tail", "--until", SECRET],
    "ambiguous option with a value": ["append", "--t=" + SECRET],
    "value starting with a dash": ["append", "--type", "decision", "--text", "x", "-" + SECRET],
    "option glued to a value": ["append", "--type", "decision", "--text", "x", "--" + SECRET.lower()],
}


@pytest.mark.parametrize("arguments", list(USAGE_ERRORS.values()), ids=list(USAGE_ERRORS))
def test_a_usage_error_never_echoes_the_value(session, arguments):
    before = folder_digest(session)
    result = run_notes(*arguments, folder=session)
    error = assert_refused(result, 2)
    for piece in SECRET_PIECES + [SECRET.lower(), SECRET.lower()[4:]]:
        assert piece not in result.stdout and piece not in result.stderr, (piece, result)
    assert "--help" in error or "note id" in error or "UTC time" in error, error  # the way out
    assert folder_digest(session) == before


def test_a_stray_word_is_named_by_its_place(session):
    result = run_notes("append", "--type", "decision", "--text", "the", SECRET, folder=session)
    # --dir and its folder are arguments 1 and 2: the stray word is the 8th.
    assert "unexpected argument 8 (a word after append" in assert_refused(result, 2, "put quotes around")


def test_a_typo_is_answered_with_the_suggestion_only(session):
    error = assert_refused(run_notes("append", "--type", "decison", "--text", "x", folder=session), 2)
    assert "did you mean decision?" in error and "decison" not in error
    error = assert_refused(run_notes("apend", "--type", "decision", folder=session), 2)
    assert "did you mean append?" in error and "apend" not in error.replace("append", "")


def test_a_refused_option_value_is_named_by_its_option(session):
    # The option names the argument; its place is left out, so that an MCP call gets the same
    # refusal, with the tool's argument (status) named where this names --status.
    result = run_notes("append", "--type", "gate", "--status", SECRET, "--text", "x", folder=session)
    assert assert_refused(result, 2).startswith("argument --status: unknown status; use one of")
    result = run_notes("tail", "--limit=" + SECRET, folder=session)
    assert assert_refused(result, 2).startswith("argument --limit: invalid int value")


# ==========================================================================
# --provenance and --evidence; --text - and --effect -

FULL_RECORD_KEYS = ["id", "ts", "session_id", "seq", "type", "text", "effect", "ref", "status", "provenance",
                    "evidence", "checksum"]


# --------------------------------------------------------------------------
# 1. --provenance and --evidence

def test_labels_are_stored_after_status_and_before_the_checksum(session):
    append(session, "gate", "Hosting is undecided.")
    receipt = append(session, "gate", "Deferred until the clinic's IT contact answers.", "--ref", "n00001",
                     "--status", "deferred", "--effect", "The runbook leaves hosting open.",
                     "--provenance", "op", "--evidence", "declared").receipt

    assert list(receipt) == ["ok", "command", "note_id", "seq", "path"]
    record = read_records(session)[1]
    assert list(record) == FULL_RECORD_KEYS
    assert (record["provenance"], record["evidence"]) == ("op", "declared")
    assert record["checksum"] == v0_checksum(record)
    assert run_notes("verify", folder=session).code == 0


@pytest.mark.parametrize("flag, value", [("--provenance", value) for value in ("op", "model", "shared")]
                         + [("--evidence", value) for value in ("declared", "inferred", "observed", "validated")])
def test_each_label_alone_is_stored_with_its_checksum(session, flag, value):
    append(session, "decision", "Reminders go out 48 hours ahead.", flag, value)

    record = read_records(session)[0]
    assert list(record) == ["id", "ts", "session_id", "seq", "type", "text", flag[2:], "checksum"]
    assert record[flag[2:]] == value
    assert record["checksum"] == v0_checksum(record)


def test_a_log_with_labels_stays_readable_by_a_v0_reader(session):
    append(session, "decision", "SMS is the channel.", "--provenance", "op", "--evidence", "declared")
    append(session, "source", "About 400 appointments a month.", "--evidence", "inferred")
    append(session, "gate", "Consent wording is open.", "--provenance", "model")

    lines = (session / LOG).read_bytes().split(b"\n")
    assert lines[-1] == b""
    for line in lines[:-1]:
        record = json.loads(line.decode("utf-8"))  # what v0 does with every line
        assert isinstance(record, dict)
        for key, kind in (("id", str), ("ts", str), ("session_id", str), ("seq", int), ("type", str),
                          ("text", str), ("checksum", str)):
            assert isinstance(record[key], kind)


@pytest.mark.parametrize("flag, value", [("--provenance", "operator"), ("--provenance", "Model"),
                                         ("--provenance", ""), ("--evidence", "guessed"),
                                         ("--evidence", "INFERRED"), ("--evidence", " inferred")])
def test_other_label_values_are_refused(session, flag, value):
    append(session, "decision", "SMS is the channel.")
    before = folder_digest(session)

    result = run_notes("append", "--type", "decision", "--text", "Email is the fallback.", flag, value,
                       folder=session)

    # The error names the values that are allowed.
    assert_refused(result, 2, flag, *(["model", "shared"] if flag == "--provenance" else ["inferred", "validated"]))
    assert folder_digest(session) == before


def test_the_same_words_from_another_source_are_a_new_note(session):
    first = append(session, "decision", "Reminders go out 48 hours ahead.", "--provenance", "model").receipt
    confirmed = append(session, "decision", "Reminders go out 48 hours ahead.", "--provenance", "op").receipt
    retried = append(session, "decision", "Reminders go out 48 hours ahead.", "--provenance", "op").receipt

    assert (first["note_id"], confirmed["note_id"]) == ("n00001", "n00002")
    assert "duplicate" not in confirmed
    assert retried["note_id"] == "n00002" and retried["duplicate"] is True
    assert len(read_records(session)) == 2


# --------------------------------------------------------------------------
# 4. --text - and --effect -

AWKWARD_TEXT = 'Deposit is $500; run `rm -rf /tmp/x` never. "Quoted", \'single\', \\n, café 東京 🧩\ttab\r\nline two'


def test_text_from_standard_input_is_kept_byte_for_byte(session):
    append(session, "decision", "-", "--effect", "Checked by hand.", input=(AWKWARD_TEXT + "\n").encode("utf-8"))

    record = read_records(session)[0]
    assert record["text"] == AWKWARD_TEXT
    assert record["effect"] == "Checked by hand."


def test_effect_from_standard_input(session):
    append(session, "tension", "Cost against volume.", "--effect", "-", input=AWKWARD_TEXT.encode("utf-8"))

    assert read_records(session)[0]["effect"] == AWKWARD_TEXT


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_a_quoted_here_document_reaches_the_log_untouched(session):
    text = 'The fee is $25 for "late" cancellations; `fee --waive` and $(whoami) stay as written.'
    script = "%s -S %s --dir %s append --type decision --text - <<'EOF'\n%s\nEOF\n" % (
        shlex.quote(sys.executable), shlex.quote(str(NOTES)), shlex.quote(str(session)), text)

    completed = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60)

    assert completed.returncode == 0, completed
    assert read_records(session)[0]["text"] == text


@pytest.mark.parametrize("arguments, stdin, words", [
    (["--text", "-", "--effect", "-"], b"Both at once.", ["--text -", "--effect -"]),
    (["--text", "-"], "Café".encode("latin-1"), ["UTF-8"]),
    (["--text", "-"], b"ok \xff\xfe", ["UTF-8"]),
    (["--effect", "-", "--text", "Fine."], b"\xc3", ["--effect", "UTF-8"]),
    (["--text", "-"], b"", ["empty"]),
    (["--text", "-"], b" \n\t\n", ["empty"]),
    (["--text", "-"], b"x" * 70000, ["standard input", "65536"]),
    (["--text", "-"], b"The key is AKIAABCDEFGHIJKLMNOP.\n", ["credential"]),
], ids=["both", "latin-1", "invalid bytes", "cut sequence in effect", "empty", "blank", "too long", "credential"])
def test_bad_standard_input_is_refused_and_nothing_is_written(session, arguments, stdin, words):
    append(session, "decision", "SMS is the channel.")
    before = folder_digest(session)

    result = run_notes("append", "--type", "decision", *arguments, folder=session, input=stdin)

    assert_refused(result, 2, *words)
    assert folder_digest(session) == before
