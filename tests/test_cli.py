"""Contract tests of the command line: receipts, exit codes, errors, defaults and help.

Every test runs the real script in a subprocess under ``-S``, as a user would,
except the JSON-writer equivalence and the unexpected-error path, which run
in-process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import (NOTES, append, assert_no_traceback, assert_refused, folder_digest, notes, read_records,
                      run_notes)

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
                        APPEND_KEYS + ["note_ids", "created"])
    assert receipt["created"] is True and receipt["note_ids"] == ["n00001", "n00002"]
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
