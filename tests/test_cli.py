"""The command line and the Python API: receipts, exit codes, errors, defaults and help; one parser that
answers mistakes with the way out; notes.Session giving what the command line prints."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import (NOTES, REPO, append, assert_no_traceback, assert_refused, copy_fixture, folder_digest,
                      notes, read_records, run_notes)


# ==========================================================================
# Receipts, exit codes, errors, defaults and help

NOTE_TYPES = ["mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"]
INIT_KEYS = ["ok", "command", "session_id", "path"]
APPEND_KEYS = ["ok", "command", "note_id", "seq", "path"]
TAIL_KEYS = ["ok", "command", "count", "path", "records"]
SUMMARY_KEYS = ["ok", "command", "session_id", "path", "total", "by_type", "last_note_id", "last_type"]
EXPORT_KEYS = ["ok", "command", "record_count", "path", "keep"]
ERROR_KEYS = ["ok", "error"]


# --------------------------------------------------------------------------
# Local helpers

def log_of(folder) -> str:
    return os.path.join(os.path.realpath(str(folder)), "session_notes.jsonl")


def succeeded(result, keys: list) -> dict:
    """The run exited 0 and printed exactly these receipt keys, in order, as 2-space JSON."""
    assert_no_traceback(result)
    assert result.code == 0, result
    assert result.stderr == "", result
    assert result.receipt is not None, result
    assert list(result.receipt) == keys, result
    assert result.receipt["ok"] is True
    assert result.stdout == json.dumps(result.receipt, indent=2, ensure_ascii=False) + "\n"
    return result.receipt


def refused_cleanly(result) -> str:
    """Exit 2 with exactly {"ok": false, "error": "..."} on stdout and nothing on stderr."""
    message = assert_refused(result, 2)
    assert list(result.receipt) == ERROR_KEYS, result
    assert result.stdout == json.dumps(result.receipt, indent=2, ensure_ascii=False) + "\n"
    assert result.stderr == "", result
    return message


# --------------------------------------------------------------------------
# init

def test_init_creates_the_session(tmp_path):
    folder = tmp_path / "new" / "session"
    receipt = succeeded(run_notes("init", folder=folder), INIT_KEYS)
    meta = json.loads((folder / "session_meta.json").read_text("utf-8"))
    assert receipt == {"ok": True, "command": "init", "session_id": meta["session_id"],
                       "path": log_of(folder)}
    assert (folder / "session_notes.jsonl").read_bytes() == b""


def test_init_is_idempotent(session):
    meta_before = (session / "session_meta.json").read_bytes()
    log_before = (session / "session_notes.jsonl").read_bytes()
    session_id = json.loads(meta_before)["session_id"]
    for _ in range(2):
        receipt = succeeded(run_notes("init", folder=session), INIT_KEYS)
        assert receipt["session_id"] == session_id
        assert receipt["path"] == log_of(session)
    assert (session / "session_meta.json").read_bytes() == meta_before
    assert (session / "session_notes.jsonl").read_bytes() == log_before


def test_init_after_appends_reports_the_same_session_and_keeps_notes(session):
    succeeded(append(session, "decision", "Kept."), APPEND_KEYS)
    log_before = (session / "session_notes.jsonl").read_bytes()
    receipt = succeeded(run_notes("init", folder=session), INIT_KEYS)
    assert receipt["session_id"] == read_records(session)[0]["session_id"]
    assert (session / "session_notes.jsonl").read_bytes() == log_before


# --------------------------------------------------------------------------
# append

def test_append_receipts_number_the_notes(session):
    for seq, note_type in enumerate(NOTE_TYPES, 1):
        receipt = succeeded(append(session, note_type, "Signal %d." % seq), APPEND_KEYS)
        assert receipt == {"ok": True, "command": "append", "note_id": "n%05d" % seq, "seq": seq,
                           "path": log_of(session)}
    records = read_records(session)
    assert [record["type"] for record in records] == NOTE_TYPES
    assert [record["seq"] for record in records] == list(range(1, 9))


def test_append_without_init_creates_the_session(tmp_path):
    folder = tmp_path / "fresh"
    # A new session is never silent: the receipt says this append created it (issue 30, point 2).
    receipt = succeeded(append(folder, "shape", "First note, no init."), APPEND_KEYS + ["created"])
    assert receipt == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1,
                       "path": str(folder / "session_notes.jsonl"), "created": True}
    meta = json.loads((folder / "session_meta.json").read_text("utf-8"))
    assert read_records(folder)[0]["session_id"] == meta["session_id"]
    init = succeeded(run_notes("init", folder=folder), INIT_KEYS)
    assert init["session_id"] == meta["session_id"]
    # The next append goes on in the same session: nothing was created.
    assert "created" not in succeeded(append(folder, "shape", "Second note."), APPEND_KEYS)


def test_a_batch_that_starts_the_session_says_created_and_init_stays_v0s(tmp_path):
    folder = tmp_path / "fresh"
    batch = '{"type": "decision", "text": "One."}\n{"type": "gate", "text": "Two?"}\n'
    receipt = succeeded(run_notes("append", "--batch", "-", folder=folder, input=batch.encode("utf-8")),
                        APPEND_KEYS + ["note_ids", "types", "created"])
    assert receipt["created"] is True and receipt["note_ids"] == ["n00001", "n00002"]
    assert receipt["types"] == ["decision", "gate"]
    init = succeeded(run_notes("init", folder=tmp_path / "other"), INIT_KEYS)  # init creates by design
    assert "created" not in init
    for reader in ("tail", "summary", "recap", "verify", "export"):  # readers never create
        result = run_notes(reader, folder=tmp_path / "none")
        assert result.code == 2 and not (tmp_path / "none").exists(), (reader, result)


def test_append_strips_text_and_effect(session):
    succeeded(append(session, "decision", " \t  Padded text.\n ", "--effect", "\n  Padded effect.  "),
              APPEND_KEYS)
    record = read_records(session)[0]
    assert record["text"] == "Padded text."
    assert record["effect"] == "Padded effect."
    assert list(record) == ["id", "ts", "session_id", "seq", "type", "text", "effect", "checksum"]


@pytest.mark.parametrize("effect", ["", "   ", " \n\t "])
def test_append_drops_a_blank_effect(session, effect):
    succeeded(append(session, "gate", "Open point.", "--effect", effect), APPEND_KEYS)
    record = read_records(session)[0]
    assert "effect" not in record
    assert list(record) == ["id", "ts", "session_id", "seq", "type", "text", "checksum"]


def test_append_keeps_inner_whitespace_and_unicode(session):
    text = "Two lines:\n  indented, tab\there, 東京 and ✓."
    succeeded(append(session, "source", text), APPEND_KEYS)
    assert read_records(session)[0]["text"] == text


# --------------------------------------------------------------------------
# tail

def test_tail_default_limit_is_five_oldest_first(session):
    for number in range(1, 8):
        succeeded(append(session, "decision", "Decision %d." % number), APPEND_KEYS)
    receipt = succeeded(run_notes("tail", folder=session), TAIL_KEYS)
    assert receipt["command"] == "tail" and receipt["count"] == 5
    assert receipt["path"] == log_of(session)
    assert [record["seq"] for record in receipt["records"]] == [3, 4, 5, 6, 7]
    assert receipt["records"] == read_records(session)[2:]


def test_tail_limit_and_short_log(session):
    for number in range(1, 4):
        succeeded(append(session, "discard", "Path %d." % number), APPEND_KEYS)
    one = succeeded(run_notes("tail", "--limit", "1", folder=session), TAIL_KEYS)
    assert one["count"] == 1 and one["records"][0]["id"] == "n00003"
    many = succeeded(run_notes("tail", "--limit", "1000", folder=session), TAIL_KEYS)  # the most it takes
    assert many["count"] == 3 and [record["id"] for record in many["records"]] == ["n00001", "n00002", "n00003"]


def test_tail_of_an_empty_session(session):
    receipt = succeeded(run_notes("tail", folder=session), TAIL_KEYS)
    assert receipt == {"ok": True, "command": "tail", "count": 0, "path": log_of(session), "records": []}


# --------------------------------------------------------------------------
# summary

def test_summary_of_an_empty_session(session):
    receipt = succeeded(run_notes("summary", folder=session), SUMMARY_KEYS)
    meta = json.loads((session / "session_meta.json").read_text("utf-8"))
    assert receipt == {"ok": True, "command": "summary", "session_id": meta["session_id"],
                       "path": log_of(session), "total": 0, "by_type": dict.fromkeys(sorted(NOTE_TYPES), 0),
                       "last_note_id": None, "last_type": None}
    assert list(receipt["by_type"]) == sorted(NOTE_TYPES)


def test_summary_counts_by_type(session):
    for number, note_type in enumerate(["gate", "decision", "gate", "tension"]):
        succeeded(append(session, note_type, "A %s, number %d." % (note_type, number)), APPEND_KEYS)
    receipt = succeeded(run_notes("summary", folder=session), SUMMARY_KEYS)
    assert receipt["total"] == 4
    assert list(receipt["by_type"]) == sorted(NOTE_TYPES)
    assert receipt["by_type"] == {"artifact": 0, "decision": 1, "discard": 0, "gate": 2, "mode": 0,
                                  "shape": 0, "source": 0, "tension": 1}
    assert receipt["last_note_id"] == "n00004" and receipt["last_type"] == "tension"


# --------------------------------------------------------------------------
# export

def test_export_default_and_output(session, tmp_path):
    for note_type in ["mode", "artifact"]:
        succeeded(append(session, note_type, "A %s note." % note_type), APPEND_KEYS)
    default = succeeded(run_notes("export", folder=session), EXPORT_KEYS)
    default_path = os.path.join(os.path.realpath(str(session)), "session_export.json")
    assert default == {"ok": True, "command": "export", "record_count": 2, "path": default_path,
                       "keep": {"file": default_path, "host": "local",
                                "how": "Saved at this path on this computer."}}

    raw = open(default_path, "rb").read()
    exported = json.loads(raw)
    assert raw == (json.dumps(exported, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    assert list(exported) == ["schema_version", "exported_at", "session", "record_count", "records"]
    assert exported["schema_version"] == "shaping-memory-export.v0"
    assert exported["session"] == json.loads((session / "session_meta.json").read_text("utf-8"))
    assert exported["record_count"] == 2 and exported["records"] == read_records(session)

    output = tmp_path / "out" / "backup.json"
    chosen = succeeded(run_notes("export", "--output", output, folder=session), EXPORT_KEYS)
    assert chosen["path"] == str(output) and chosen["record_count"] == 2
    assert json.loads(output.read_text("utf-8"))["records"] == exported["records"]


def test_export_of_an_empty_session(session):
    receipt = succeeded(run_notes("export", folder=session), EXPORT_KEYS)
    assert receipt["record_count"] == 0
    exported = json.loads(open(receipt["path"], encoding="utf-8").read())
    assert exported["records"] == [] and exported["record_count"] == 0


# --------------------------------------------------------------------------
# The commands added beyond v0 exist and answer

def test_recap_verify_and_restore_exist(session, tmp_path):
    succeeded(append(session, "decision", "Something to recap."), APPEND_KEYS)
    recap = run_notes("recap", folder=session)
    assert recap.code == 0, recap
    assert recap.receipt["ok"] is True and recap.receipt["command"] == "recap"

    verify = run_notes("verify", folder=session)
    assert verify.code == 0, verify
    assert list(verify.receipt) == ["ok", "command", "path", "total", "problems"]
    assert verify.receipt["ok"] is True and verify.receipt["problems"] == []

    export = succeeded(run_notes("export", folder=session), EXPORT_KEYS)
    target = tmp_path / "restored"
    restore = run_notes("restore", export["path"], folder=target)
    assert restore.code == 0, restore
    assert list(restore.receipt) == ["ok", "command", "session_id", "record_count", "restored", "path",
                                     "export", "tell_operator"]
    assert restore.receipt["restored"] == 1
    assert read_records(target) == read_records(session)


# --------------------------------------------------------------------------
# Usage and validation errors: exit 2, JSON error, nothing touched

BAD_INVOCATIONS = {
    "no command": [],
    "unknown command": ["frobnicate"],
    "unknown option": ["summary", "--verbose"],
    "missing --type": ["append", "--text", "No type."],
    "missing --text": ["append", "--type", "decision"],
    "bad --type choice": ["append", "--type", "opinion", "--text", "Not a type."],
    "type in capitals": ["append", "--type", "DECISION", "--text", "Types are lower case."],
    "empty text": ["append", "--type", "decision", "--text", ""],
    "blank text": ["append", "--type", "decision", "--text", "   "],
    "blank text with newlines": ["append", "--type", "decision", "--text", "\n\t \n", "--effect", "x"],
    "tail --limit 0": ["tail", "--limit", "0"],
    "tail --limit -1": ["tail", "--limit", "-1"],
    "tail --limit x": ["tail", "--limit", "x"],
    "tail --limit empty": ["tail", "--limit", ""],
    "tail --limit missing": ["tail", "--limit"],
    "export --output missing": ["export", "--output"],
}


@pytest.mark.parametrize("arguments", list(BAD_INVOCATIONS.values()), ids=list(BAD_INVOCATIONS))
def test_bad_invocation_is_refused_and_touches_nothing(session, arguments):
    succeeded(append(session, "decision", "Existing note."), APPEND_KEYS)
    before = folder_digest(session)
    refused_cleanly(run_notes(*arguments, folder=session))
    assert folder_digest(session) == before


@pytest.mark.parametrize("arguments", [BAD_INVOCATIONS[name] for name in (
    "missing --type", "bad --type choice", "empty text", "blank text")])
def test_bad_append_creates_no_folder(tmp_path, arguments):
    folder = tmp_path / "never"
    refused_cleanly(run_notes(*arguments, folder=folder))
    assert not os.path.lexists(str(folder))


def test_dir_whose_value_looks_like_an_option_is_refused(tmp_path):
    # argparse reads "--dir --typ" as --dir without its value; the quick parser must not differ.
    result = run_notes("--dir", "--typ", "init", cwd=tmp_path)
    assert "--dir" in refused_cleanly(result)
    assert os.listdir(str(tmp_path)) == []


def test_error_messages_name_the_problem(session):
    # The mistake is named by what it is and where, never by the value typed (issue 20.5).
    assert "unknown command" in refused_cleanly(run_notes("frobnicate", folder=session))
    assert "--type" in refused_cleanly(run_notes("append", "--text", "x", folder=session))
    assert "unknown type" in refused_cleanly(run_notes("append", "--type", "opinion", "--text", "x", folder=session))
    assert "text" in refused_cleanly(run_notes("append", "--type", "gate", "--text", " ", folder=session))
    assert "limit" in refused_cleanly(run_notes("tail", "--limit", "0", folder=session))


def test_unexpected_error_exits_1_without_traceback(monkeypatch, capsys, tmp_path):
    """An error nobody planned for is still a JSON error, with exit 1."""
    def broken(arguments):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(notes.Session, "summary", broken)
    code = notes.main(["--dir", str(tmp_path), "summary"])
    captured = capsys.readouterr()
    assert code == 1
    receipt = json.loads(captured.out)
    assert list(receipt) == ERROR_KEYS and receipt["ok"] is False
    assert "disk on fire" in receipt["error"]
    assert "Traceback" not in captured.out + captured.err


# --------------------------------------------------------------------------
# --dir defaults to the folder holding notes.py, not the working directory

def test_dir_defaults_to_the_script_folder(tmp_path):
    tool = tmp_path / "tool"
    elsewhere = tmp_path / "elsewhere"
    tool.mkdir()
    elsewhere.mkdir()
    script = tool / "notes.py"
    shutil.copy(str(NOTES), str(script))

    init = succeeded(run_notes("init", script=script, cwd=elsewhere), INIT_KEYS)
    assert init["path"] == log_of(tool)
    appended = succeeded(run_notes("append", "--type", "mode", "--text", "Here.", script=script, cwd=elsewhere),
                         APPEND_KEYS)
    assert appended["path"] == log_of(tool)
    assert os.listdir(str(elsewhere)) == []
    assert {"session_meta.json", "session_notes.jsonl"} <= set(os.listdir(str(tool)))
    assert read_records(tool)[0]["text"] == "Here."
    summary = succeeded(run_notes("summary", script=script, cwd=elsewhere), SUMMARY_KEYS)
    assert summary["session_id"] == init["session_id"] and summary["total"] == 1


def test_dir_default_follows_a_linked_script_to_its_real_folder(tmp_path):
    tool = tmp_path / "tool"
    links = tmp_path / "links"
    tool.mkdir()
    links.mkdir()
    shutil.copy(str(NOTES), str(tool / "notes.py"))
    os.symlink(str(tool / "notes.py"), str(links / "notes.py"))
    receipt = succeeded(run_notes("init", script=links / "notes.py", cwd=tmp_path), INIT_KEYS)
    assert receipt["path"] == log_of(tool)
    assert sorted(os.listdir(str(links))) == ["notes.py"]


def test_explicit_dir_wins_over_the_default(tmp_path):
    tool = tmp_path / "tool"
    tool.mkdir()
    shutil.copy(str(NOTES), str(tool / "notes.py"))
    chosen = tmp_path / "chosen"
    receipt = succeeded(run_notes("init", folder=chosen, script=tool / "notes.py", cwd=tmp_path), INIT_KEYS)
    assert receipt["path"] == log_of(chosen)
    assert os.listdir(str(tool)) == ["notes.py"]


# --------------------------------------------------------------------------
# --help

COMMAND_OPTIONS = {
    "init": [],
    "append": ["--type", "--text", "--effect"],
    "tail": ["--limit"],
    "summary": [],
    "export": ["--output"],
    "recap": [],
    "verify": [],
    "restore": ["EXPORT_FILE"],
}
# An option's metavar is a word in capitals, or "-" for one that reads standard input (append --batch -).
OPTION_LINE = re.compile(r"^\s+(?:-\w(?: [A-Z_]+)?, )?(--?[\w-]+|[A-Za-z_]+)(?: [A-Z_]+| -)?(?:\s{2,}(\S.*))?$")


def help_entries(text: str) -> dict:
    """Each option or positional of a help text, with the words that explain it (the usage block is skipped:
    a long usage wraps a positional onto a line of its own)."""
    lines = text.strip().split("\n\n", 1)[-1].splitlines()
    entries = {}
    for index, line in enumerate(lines):
        match = OPTION_LINE.match(line)
        if not match:
            continue
        meaning = match.group(2)
        if not meaning and index + 1 < len(lines) and lines[index + 1].startswith(" " * 8):
            meaning = lines[index + 1].strip()
        entries.setdefault(match.group(1), meaning or "")
    return entries


def purpose_paragraph(text: str) -> list:
    """The lines of the paragraph that follows the usage block."""
    paragraphs = [block.splitlines() for block in text.strip().split("\n\n")]
    assert paragraphs[0][0].startswith("usage:"), text
    return paragraphs[1]


def example_lines(text: str) -> list:
    lines = text.splitlines()
    return [lines[index + 1].strip() for index, line in enumerate(lines[:-1])
            if line.strip().lower().rstrip(":") == "example"]


def assert_help(result) -> str:
    assert_no_traceback(result)
    assert result.code == 0, result
    assert result.stderr == "", result
    return result.stdout


def test_tool_help(tmp_path):
    text = assert_help(run_notes("--help", cwd=tmp_path))
    purpose = purpose_paragraph(text)
    assert len(purpose) == 1 and len(purpose[0].split()) >= 4, purpose
    entries = help_entries(text)
    assert len(entries.get("--dir", "").split()) >= 3, entries
    for command in COMMAND_OPTIONS:
        assert len(entries.get(command, "").split()) >= 3, (command, entries)
    examples = example_lines(text)
    assert examples and all(example.startswith("python3 -S notes.py ") for example in examples), text
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("command", list(COMMAND_OPTIONS))
def test_command_help(tmp_path, command):
    folder = tmp_path / "untouched"
    text = assert_help(run_notes(command, "--help", folder=folder))
    purpose = purpose_paragraph(text)
    assert len(purpose) == 1 and len(purpose[0].split()) >= 4, purpose

    entries = help_entries(text)
    usage = text.strip().split("\n\n")[0]
    # Every option named in the usage line, and each option v0 has, is explained.
    named = set(re.findall(r"(--[\w-]+)", usage)) - {"--help"}
    for option in named | set(COMMAND_OPTIONS[command]) | {"--dir"}:
        assert len(entries.get(option, "").split()) >= 2, (command, option, text)

    examples = example_lines(text)
    assert examples, text
    assert all(re.match(r"python3 -S notes\.py (--dir \S+ )?%s\b" % command, line) for line in examples), examples
    assert not os.path.lexists(str(folder))


def test_verify_help_says_problems_exit_3(tmp_path, capsys):
    assert notes.main(["--dir", str(tmp_path / "untouched"), "verify", "--help"]) == 0
    assert "the command line exits 3" in " ".join(capsys.readouterr().out.split())
    assert not (tmp_path / "untouched").exists()


def test_short_help_flag_equals_long(tmp_path):
    """-h is the same as --help."""
    assert assert_help(run_notes("-h", cwd=tmp_path)) == assert_help(run_notes("--help", cwd=tmp_path))
    assert assert_help(run_notes("append", "-h")) == assert_help(run_notes("append", "--help"))


# --------------------------------------------------------------------------
# A core round trip under every interpreter found

def test_round_trip_under_each_python(tmp_path, python):
    folder = tmp_path / "round"
    init = succeeded(run_notes("init", folder=folder, python=python), INIT_KEYS)
    first = succeeded(run_notes("append", "--type", "gate", "--text", "Open: café ✓", "--effect", "Blocks X.",
                                folder=folder, python=python), APPEND_KEYS)
    second = succeeded(run_notes("append", "--type", "decision", "--text", "Closed it.",
                                 folder=folder, python=python), APPEND_KEYS)
    assert (first["note_id"], second["note_id"]) == ("n00001", "n00002")

    tail = succeeded(run_notes("tail", "--limit", "1", folder=folder, python=python), TAIL_KEYS)
    assert tail["count"] == 1 and tail["records"][0]["text"] == "Closed it."
    summary = succeeded(run_notes("summary", folder=folder, python=python), SUMMARY_KEYS)
    assert summary["session_id"] == init["session_id"] and summary["total"] == 2
    assert summary["by_type"]["gate"] == 1 and summary["last_note_id"] == "n00002"

    export = succeeded(run_notes("export", folder=folder, python=python), EXPORT_KEYS)
    exported = json.loads(open(export["path"], encoding="utf-8").read())
    assert exported["records"] == read_records(folder)
    assert exported["records"][0]["text"] == "Open: café ✓"
    assert exported["records"][0]["effect"] == "Blocks X."
    refused_cleanly(run_notes("tail", "--limit", "0", folder=folder, python=python))


# --------------------------------------------------------------------------
# Output: nothing printed may be lost, and a reader that has gone costs nothing

def run_printing_to(stdout, *args) -> subprocess.CompletedProcess:
    """Run notes.py with stdout sent to a file or descriptor, stderr captured.

    PYTHONUNBUFFERED is dropped, so that output waits in buffers as users have it."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-S", str(NOTES)] + [str(arg) for arg in args],
                          stdout=stdout, stderr=subprocess.PIPE, env=environment, timeout=60)


def run_into_file(tmp_path, *args) -> tuple:
    """Run notes.py with stdout sent to a file: (exit code, stdout, stderr)."""
    out_path = tmp_path / "stdout.txt"
    with open(str(out_path), "wb") as out:
        completed = run_printing_to(out, *args)
    return completed.returncode, out_path.read_text(encoding="utf-8"), completed.stderr.decode("utf-8")


def test_receipts_and_help_reach_a_file_whole(tmp_path):
    folder = tmp_path / "session"
    long_text = "x" * 1900
    for number in range(1, 6):
        code, out, err = run_into_file(tmp_path, "--dir", folder, "append", "--type", "decision",
                                       "--text", "%d %s" % (number, long_text))
        assert (code, err) == (0, "") and json.loads(out)["seq"] == number
    code, out, err = run_into_file(tmp_path, "--dir", folder, "tail")
    assert (code, err) == (0, "")
    assert [record["seq"] for record in json.loads(out)["records"]] == [1, 2, 3, 4, 5]
    code, out, err = run_into_file(tmp_path, "--help")
    assert (code, err) == (0, "") and out.rstrip().endswith("for a command's options")
    code, out, err = run_into_file(tmp_path, "--dir", folder, "append", "--type", "nope", "--text", "x")
    assert code == 2 and err == "" and json.loads(out)["ok"] is False


def test_a_reader_that_has_gone_costs_no_note_and_no_traceback(tmp_path):
    folder = tmp_path / "session"
    read_end, write_end = os.pipe()
    os.close(read_end)  # whatever notes.py prints meets a closed pipe
    try:
        completed = run_printing_to(write_end, "--dir", folder, "append", "--type", "decision",
                                    "--text", "Kept though unread.")
    finally:
        os.close(write_end)
    assert completed.returncode == 0 and completed.stderr == b"", completed
    assert [record["text"] for record in read_records(folder)] == ["Kept though unread."]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device that is always full")
@pytest.mark.parametrize("arguments", [["append", "--type", "decision", "--text", "Stored, not printed."],
                                       ["--help"]], ids=["append", "help"])
def test_output_that_cannot_be_written_is_reported_on_stderr(tmp_path, arguments):
    folder = tmp_path / "session"
    with open("/dev/full", "wb") as full:
        completed = run_printing_to(full, "--dir", folder, *arguments)
    assert completed.returncode == 1, completed
    assert json.loads(completed.stderr) == {"ok": False, "error": "cannot print the result (No space left on device)"}
    if arguments[0] == "append":
        assert [record["text"] for record in read_records(folder)] == ["Stored, not printed."]


# ==========================================================================
# One parser that answers mistakes with the way out, a normal exit, any Python

# --------------------------------------------------------------------------
# The version, kept in one place

def test_version_prints_the_one_version_and_exits_0(tmp_path):
    result = run_notes("--version", cwd=tmp_path)
    assert result.code == 0 and result.stderr == ""
    printed = result.stdout.strip()
    assert re.fullmatch(r"notes\.py \d+\.\d+\.\d+", printed), printed
    # pyproject.toml takes the version from notes.py, so the two cannot drift apart.
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'attr = "notes.__version__"' in pyproject
    assert not re.search(r"^version\s*=\s*\"", pyproject, re.MULTILINE)  # no second copy
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------
# Mistakes answered with the way out: exit 2, nothing written, the help named

MISTAKES = [
    (["apend", "--type", "decision", "--text", "x"],
     "unknown command (the first word after the options); did you mean append?", "(see: python3 -S notes.py --help)"),
    (["append", "--type", "Decision", "--text", "x"],
     "unknown type; did you mean decision?", "(see: python3 -S notes.py append --help)"),
    (["append", "--type", "gate", "--status", "close", "--text", "x"],
     "unknown status; did you mean closed?", "(see: python3 -S notes.py append --help)"),
    (["tail", "-n", "3"], "tail has no option -n; use --limit instead", "(see: python3 -S notes.py tail --help)"),
    (["tail", "--limt", "3"], "tail has no option --limt; use --limit instead", "tail --help"),
    (["append", "--type", "decision", "--txt", "x"],
     "append has no option --txt; use --text instead", "(see: python3 -S notes.py append --help)"),
    (["append", "--type", "decision", "--text", "two", "words"],
     "unexpected argument 8 (a word after append", "append --help"),
    (["append", "--text", "x"], "--type is required", "append --help"),
    (["append", "--type", "decision"], "--text is required", "append --help"),
    (["recap", "--format", "markdown"], "unknown format; use one of", "recap --help"),
]


@pytest.mark.parametrize("arguments,mistake,way_out", MISTAKES, ids=[" ".join(m[0][:3]) for m in MISTAKES])
def test_a_mistake_is_named_with_the_way_out(session, arguments, mistake, way_out):
    before = folder_digest(session)
    error = assert_refused(run_notes(*arguments, folder=session), 2, mistake, way_out)
    assert "required" not in error or "is required" in mistake, error  # never hidden behind another error
    assert folder_digest(session) == before


def test_an_empty_dir_is_refused_before_anything_is_touched(tmp_path):
    for arguments in (["append", "--type", "decision", "--text", "x"], ["init"], ["summary"]):
        assert_refused(run_notes("--dir", "", *arguments, cwd=tmp_path), 2, "--dir is empty")
        assert_refused(run_notes("--dir", "  ", *arguments, cwd=tmp_path), 2, "--dir is empty")
    assert list(tmp_path.iterdir()) == []
    # The folder holding notes.py is not touched either.
    assert not (REPO / "session_notes.jsonl").exists() and not (REPO / "session_meta.json").exists()


# --------------------------------------------------------------------------
# A normal exit: profilers and closed outputs

def test_cprofile_runs_the_script_and_prints_its_statistics(session):
    completed = subprocess.run([sys.executable, "-S", "-m", "cProfile", "-s", "cumulative", str(NOTES),
                                "--dir", str(session), "summary"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert '"command": "summary"' in completed.stdout
    assert "function calls" in completed.stdout and "cumulative" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_a_closed_stdout_costs_no_note_and_no_traceback(tmp_path):
    folder = tmp_path / "session"
    completed = subprocess.run(["sh", "-c", '"$@" >&-', "sh", sys.executable, "-S", str(NOTES),
                                "--dir", str(folder), "append", "--type", "decision", "--text", "Kept unprinted."],
                               capture_output=True, timeout=60)
    assert completed.returncode == 0 and completed.stderr == b"", completed
    assert [record["text"] for record in read_records(folder)] == ["Kept unprinted."]


# --------------------------------------------------------------------------
# Any Python: without the C accelerators, and across PyPy and CPython

BLOCKED_ACCELERATORS = """
import runpy, sys
for name in ("_json", "_sha2", "_sha256", "_md5", "_sha1", "_sha3", "_blake2"):
    sys.modules[name] = None  # as on an interpreter that has no such module
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_runs_where_the_private_accelerator_modules_are_missing(tmp_path):
    folder = tmp_path / "session"
    command = [sys.executable, "-S", "-c", BLOCKED_ACCELERATORS, str(NOTES), "--dir", str(folder)]
    appended = subprocess.run(command + ["append", "--type", "gate", "--text", "Café stays open."],
                              capture_output=True, text=True, timeout=60)
    assert appended.returncode == 0, appended.stderr
    verified = run_notes("verify", folder=folder)
    assert verified.code == 0 and verified.receipt["total"] == 1, verified


PYPY = shutil.which("pypy3")


@pytest.mark.long
@pytest.mark.parametrize("writer,checker", [("pypy", "cpython"), ("cpython", "pypy")])
def test_a_log_written_by_one_interpreter_verifies_under_the_other(tmp_path, writer, checker):
    assert PYPY is not None, "pypy3 is not installed: the long set needs it (.ci/run installs it)"
    interpreters = {"pypy": PYPY, "cpython": sys.executable}
    folder = tmp_path / "session"
    for number, text in enumerate(["Gate: host is undecided ✓", "Decision: JSONL, «append-only»"], 1):
        result = run_notes("append", "--type", "decision", "--text", text, "--effect", "Blocks %d." % number,
                           folder=folder, python=interpreters[writer])
        assert result.code == 0 and result.receipt["seq"] == number, result
    for command in ("verify", "summary", "recap", "export"):
        result = run_notes(command, folder=folder, python=interpreters[checker])
        assert result.code == 0 and "warnings" not in result.receipt, result
    # Both interpreters write the same export, but for the time it was taken.
    exports = []
    for name in (writer, checker):
        path = tmp_path / ("%s.json" % name)
        assert run_notes("export", "--output", path, folder=folder, python=interpreters[name]).code == 0
        exports.append(re.sub(rb'"exported_at": "[^"]*"', b"", path.read_bytes()))
    assert exports[0] == exports[1]


# ==========================================================================
# The Python API: notes.Session gives the receipts and refusals the command line prints

SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"


def same_place(receipt, folder, other):
    """The receipt as it reads with folder's path written as other's."""
    return json.loads(json.dumps(receipt).replace(json.dumps(str(folder))[1:-1], json.dumps(str(other))[1:-1]))


def without_time(record) -> dict:
    """A record without its timestamp and the checksum that covers it."""
    return {key: value for key, value in record.items() if key not in ("ts", "checksum")}


def twin_sessions(tmp_path):
    """Two folders holding the same session, built by the command line: (for the CLI, for the API)."""
    cli = tmp_path / "cli"
    for flags in (["--type", "gate", "--text", "Host runtime is open."],
                  ["--type", "decision", "--text", "SMS only.", "--effect", "No e-mail."],
                  ["--type", "gate", "--ref", "n00001", "--status", "deferred", "--text", "Later."],
                  ["--type", "discard", "--text", "A chat bot.", "--provenance", "model"],
                  ["--type", "decision", "--text", "Replaced.", "--ref", "n00002", "--evidence", "inferred"]):
        assert run_notes("append", *flags, folder=cli).code == 0
    api = tmp_path / "api"
    shutil.copytree(str(cli), str(api))
    return cli, api


def test_the_readme_example_gives_the_cli_receipt(tmp_path):
    receipt = notes.Session(tmp_path / "api").append(type="decision", text="x")
    cli = run_notes("append", "--type", "decision", "--text", "x", folder=tmp_path / "cli")
    assert cli.code == 0
    assert receipt == same_place(cli.receipt, tmp_path / "cli", tmp_path / "api")
    assert list(receipt) == ["ok", "command", "note_id", "seq", "path", "created"]
    assert [record["text"] for record in read_records(tmp_path / "api")] == ["x"]


# (CLI arguments, Session method, keyword arguments); each runs on its own twin.
CASES = {
    "init": (["init"], "init", {}),
    "append": (["append", "--type", "gate", "--text", "Spec format?", "--provenance", "op"], "append",
               {"type": "gate", "text": "Spec format?", "provenance": "op"}),
    "append-duplicate": (["append", "--type", "discard", "--text", "A chat bot.", "--provenance", "model"],
                         "append", {"type": "discard", "text": "A chat bot.", "provenance": "model"}),
    "gate-update": (["append", "--type", "gate", "--ref", "n00001", "--status", "closed", "--text", "Linux."],
                    "append", {"type": "gate", "ref": "n00001", "status": "closed", "text": "Linux."}),
    "tail": (["tail"], "tail", {}),
    "tail-filtered": (["tail", "--limit", "2", "--type", "gate", "--type", "discard", "--since", "2020-01-01"],
                      "tail", {"limit": 2, "types": ["gate", "discard"], "since": "2020-01-01"}),
    "summary": (["summary"], "summary", {}),
    "recap": (["recap"], "recap", {}),
    "recap-small": (["recap", "--limit", "1", "--max-bytes", "1200"], "recap", {"limit": 1, "max_bytes": 1200}),
    "verify": (["verify"], "verify", {}),
    "export": (["export"], "export", {}),
    "export-md": (["export", "--format", "md"], "export", {"format": "md"}),
}


@pytest.mark.parametrize("flags, method, keywords", list(CASES.values()), ids=list(CASES))
def test_each_command_gives_the_cli_receipt_and_files(tmp_path, flags, method, keywords):
    cli, api = twin_sessions(tmp_path)
    expected = run_notes(*flags, folder=cli)
    assert expected.code == 0, expected
    receipt = getattr(notes.Session(api), method)(**keywords)
    assert receipt == same_place(expected.receipt, cli, api)
    # The same records, but for the clock: the two runs may fall in different seconds.
    assert [without_time(record) for record in read_records(api)] == [
        without_time(record) for record in read_records(cli)]
    assert sorted(folder_digest(api)) == sorted(folder_digest(cli))


def test_recap_markdown_is_a_key_of_the_receipt_and_the_cli_prints_its_text(tmp_path):
    cli, api = twin_sessions(tmp_path)
    expected = run_notes("recap", "--format", "md", folder=cli)
    receipt = notes.Session(api).recap(format="md")
    assert expected.code == 0 and expected.stdout.startswith("# Recap\n")
    assert receipt == {"ok": True, "command": "recap", "markdown": expected.stdout.replace(str(cli), str(api))}


def test_restore_gives_the_cli_receipt(tmp_path):
    source = copy_fixture("basic", tmp_path / "source")
    export = source / "session_export.json"
    expected = run_notes("restore", export, folder=tmp_path / "cli")
    receipt = notes.Session(tmp_path / "api").restore(export_file=str(export))
    assert expected.code == 0
    assert receipt == same_place(expected.receipt, tmp_path / "cli", tmp_path / "api")
    assert read_records(tmp_path / "api") == read_records(tmp_path / "cli")


def test_restore_without_a_path_and_created_give_the_cli_receipts(tmp_path):
    # Issue 30: the first append says created, on the API as on the command line; restore() looks in the folder.
    first = notes.Session(tmp_path / "api").append(type="decision", text="x")
    assert first["created"] is True and "created" not in notes.Session(tmp_path / "api").append(type="gate",
                                                                                                 text="y?")
    exported = notes.Session(tmp_path / "api").export()["path"]
    for name in ("cli", "api-restored"):  # one export, so that both hold the same time
        (tmp_path / name).mkdir()
        shutil.copy(exported, str(tmp_path / name / "session_export.json"))
    expected = run_notes("restore", folder=tmp_path / "cli")
    receipt = notes.Session(tmp_path / "api-restored").restore()
    assert expected.code == 0, expected
    assert receipt == same_place(expected.receipt, tmp_path / "cli", tmp_path / "api-restored")
    assert receipt["restored"] == 2


def test_verify_of_a_damaged_log_is_a_receipt_not_an_exception(tmp_path):
    folder = copy_fixture("tampered", tmp_path / "s")
    before = folder_digest(folder)
    expected = run_notes("verify", folder=folder)
    receipt = notes.Session(folder).verify()
    assert expected.code == 3 and receipt == expected.receipt and receipt["ok"] is False
    assert folder_digest(folder) == before


REFUSALS = {
    "blank-text": (["append", "--type", "decision", "--text", "  "], "append", {"type": "decision", "text": "  "}),
    "credential": (["append", "--type", "decision", "--text", "key " + SECRET], "append",
                   {"type": "decision", "text": "key " + SECRET}),
    "ref-to-nothing": (["append", "--type", "decision", "--text", "x", "--ref", "n00099"], "append",
                       {"type": "decision", "text": "x", "ref": "n00099"}),
    "status-on-decision": (["append", "--type", "decision", "--text", "x", "--status", "open"], "append",
                           {"type": "decision", "text": "x", "status": "open"}),
    "limit-zero": (["tail", "--limit", "0"], "tail", {"limit": 0}),
    "bad-since": (["tail", "--since", "yesterday"], "tail", {"since": "yesterday"}),
    "max-bytes-too-small": (["recap", "--max-bytes", "10"], "recap", {"max_bytes": 10}),
    "export-over-the-log": (["export", "--output", "{folder}/session_notes.jsonl"], "export",
                            {"output": "{folder}/session_notes.jsonl"}),
}


@pytest.mark.parametrize("flags, method, keywords", list(REFUSALS.values()), ids=list(REFUSALS))
def test_a_refusal_raises_notes_error_with_the_cli_text(tmp_path, flags, method, keywords):
    cli, api = twin_sessions(tmp_path)
    before = folder_digest(api)
    expected = run_notes(*[flag.format(folder=cli) for flag in flags], folder=cli)
    assert expected.code == 2
    keywords = {key: value.format(folder=api) if isinstance(value, str) else value
                for key, value in keywords.items()}
    with pytest.raises(notes.NotesError) as refusal:
        getattr(notes.Session(api), method)(**keywords)
    assert {"ok": False, "error": refusal.value.message} == same_place(expected.receipt, cli, api)
    assert refusal.value.exit_code == 2
    assert SECRET not in refusal.value.message
    assert folder_digest(api) == before


def test_a_missing_type_names_the_help_only_on_the_command_line(tmp_path):
    expected = run_notes("append", "--text", "No type.", folder=tmp_path / "cli")
    with pytest.raises(notes.NotesError) as refusal:
        notes.Session(tmp_path / "api").append(type=None, text="No type.")
    assert expected.receipt["error"] == refusal.value.message + " (see: python3 -S notes.py append --help)"
    assert not (tmp_path / "api").exists()


def test_the_api_checks_the_words_the_parser_checks(tmp_path):
    session = notes.Session(tmp_path / "s")
    for call in (lambda: session.append(type="idea", text="x"),
                 lambda: session.append(type="decision", text="x", evidence="certain"),
                 lambda: session.tail(types=["opinion"]),
                 lambda: session.recap(format="pdf"),
                 lambda: session.export(format="pdf")):
        with pytest.raises(notes.NotesError, match="unknown --"):
            call()
    assert not (tmp_path / "s").exists()


def test_a_note_id_that_is_not_a_string_is_a_refusal_not_a_crash(tmp_path):
    session = notes.Session(tmp_path / "s")
    for name in ("ref", "about", "by"):
        with pytest.raises(notes.NotesError, match="--%s is not a note id" % name):
            session.append(**dict({"type": "gate", "text": "x", "status": "closed", "ref": "n00001"}, **{name: 12}))
    for call in (lambda: session.show(note_id=12), lambda: session.redact(note_id=12, reason="x")):
        with pytest.raises(notes.NotesError, match="takes a note id such as n00012"):
            call()
    assert not (tmp_path / "s").exists()


def test_text_is_taken_as_given_never_read_from_stdin(tmp_path, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("from standard input"))
    notes.Session(tmp_path).append(type="decision", text="-")
    assert [record["text"] for record in read_records(tmp_path)] == ["-"]


def test_an_empty_folder_argument_is_refused():
    for folder in ("", "  "):
        with pytest.raises(notes.NotesError, match="--dir is empty"):
            notes.Session(folder)


def test_all_names_the_public_api():
    assert {"Session", "NotesError", "main", "__version__"} <= set(notes.__all__)
    assert all(hasattr(notes, name) for name in notes.__all__)


def test_the_readme_python_example_runs(tmp_path):
    import subprocess
    import sys

    from conftest import NOTES, REPO, code_blocks

    section = (REPO / "README.md").read_text("utf-8").split("## Python API", 1)[1].split("\n## ", 1)[0]
    (example,) = code_blocks(section, "python")
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    completed = subprocess.run([sys.executable, "-S", "-c", example], cwd=str(tmp_path), capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("# Recap\n")
    assert [record["text"] for record in read_records(tmp_path / "shaping")] == ["The log stays append-only."]
