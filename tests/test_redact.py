"""redact: the one audited rewrite (issue 20, point 7), through the real script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import (NOTES, assert_no_traceback, assert_refused, folder_digest, line_of, log_bytes, make_record,
                      run_notes, v0_checksum, write_log)

SECRET = "Call Ann on 555-0100 at home."
REASON = "It held a private phone number."
NOT_ERASED = (
    "redact rewrote the log only: an export made before it, side files of torn tails "
    "(session_notes.jsonl.torn-*), and any copy, backup or hard link of the log still hold the old text; "
    "delete them, and export again")


def append(folder, *args):
    result = run_notes("append", *args, folder=folder)
    assert result.code == 0, result
    return result.receipt


def seeded(tmp_path):
    """A session of three notes, the second holding what must go; return (folder, its records)."""
    folder = tmp_path / "session"
    append(folder, "--type", "gate", "--text", "Host runtime is undecided.")
    append(folder, "--type", "decision", "--text", SECRET, "--effect", "Ann is the contact.", "--provenance", "op")
    append(folder, "--type", "decision", "--text", "Use email.")
    return folder, [json.loads(line) for line in log_bytes(folder).splitlines()]


def placeholder_of(record: dict) -> dict:
    """The record as redact leaves it, built independently: text and effect replaced, checksum anew."""
    redacted = dict(record, text="[redacted]")
    if "effect" in record:
        redacted["effect"] = "[redacted]"
    redacted["checksum"] = v0_checksum(redacted)
    return redacted


def test_redact_rewrites_only_that_line_and_appends_the_source_note_that_says_why(tmp_path):
    folder, records = seeded(tmp_path)
    lines = log_bytes(folder).splitlines(keepends=True)

    result = run_notes("redact", "n00002", "--reason", REASON, folder=folder)
    assert result.code == 0, result
    log_path = str(folder / "session_notes.jsonl")
    assert result.receipt == {"ok": True, "command": "redact", "note_id": "n00002", "seq": 2,
                              "redaction_note_id": "n00004", "path": log_path, "not_erased": NOT_ERASED}
    after = log_bytes(folder).splitlines(keepends=True)
    assert after[0] == lines[0] and after[2] == lines[2]  # every other byte as it was
    assert after[1] == line_of(placeholder_of(records[1]))  # same id, seq, ts, fields, order; new checksum
    source = json.loads(after[3])
    assert (source["seq"], source["type"], source["about"], source["text"]) == (
        4, "source", "n00002", "Redacted n00002: " + REASON)
    assert source["checksum"] == v0_checksum({key: value for key, value in source.items() if key != "checksum"})
    assert len(after) == 4
    assert "555-0100" not in log_bytes(folder).decode("utf-8") and "555-0100" not in result.stdout
    assert sorted(os.listdir(str(folder))) == ["session_meta.json", "session_notes.jsonl", "session_notes.lock"]

    verify = run_notes("verify", folder=folder)
    assert verify.code == 0, verify
    assert verify.receipt == {"ok": True, "command": "verify", "path": log_path, "total": 4, "problems": [],
                              "redacted": 1}
    # v0 reads the log: every line an object with v0's fields and kinds.
    for line in log_bytes(folder).splitlines():
        record = json.loads(line)
        assert all(isinstance(record[key], kind) for key, kind in (
            ("id", str), ("ts", str), ("session_id", str), ("seq", int), ("type", str), ("text", str),
            ("checksum", str)))
    # The next note is numbered after the source note.
    assert append(folder, "--type", "mode", "--text", "Shaping.")["seq"] == 5


def test_recap_says_what_redact_cannot_erase_only_when_the_log_holds_a_redaction(tmp_path):
    folder, _ = seeded(tmp_path)
    assert "redacted" not in run_notes("recap", folder=folder).receipt
    assert "Redacted" not in run_notes("recap", "--format", "md", folder=folder).stdout
    assert run_notes("export", folder=folder).code == 0  # an export made before: it keeps the old text

    result = run_notes("redact", "n00002", "--reason", REASON, folder=folder)
    assert result.code == 0, result
    assert result.receipt["may_still_hold"] == [str(folder / "session_export.json")]
    recap = run_notes("recap", folder=folder)
    assert recap.code == 0 and recap.receipt["redacted"] == {"count": 1, "not_erased": NOT_ERASED}
    markdown = run_notes("recap", "--format", "md", folder=folder).stdout
    assert "Redacted notes: 1. Redact rewrote the log only: an export made before it" in markdown
    assert "555-0100" not in recap.stdout and "555-0100" not in markdown


def test_reason_from_standard_input(tmp_path):
    folder, _ = seeded(tmp_path)
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "redact", "n00002",
                                "--reason", "-"], input="It held a $HOME path and `backticks`.\n".encode(),
                               capture_output=True)
    assert completed.returncode == 0, completed
    source = json.loads(log_bytes(folder).splitlines()[-1])
    assert source["text"] == "Redacted n00002: It held a $HOME path and `backticks`."


def test_a_reason_from_standard_input_too_long_to_read_names_the_reasons_own_limit(tmp_path):
    folder, _ = seeded(tmp_path)
    before = folder_digest(folder)
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "redact", "n00002",
                                "--reason", "-"], input=b"x" * 70000, capture_output=True)
    assert completed.returncode == 2, completed
    assert json.loads(completed.stdout)["error"] == (
        "standard input for --reason holds more than 65536 bytes; say why in at most 1977 characters")
    assert folder_digest(folder) == before


def test_refusals_leave_every_file_as_it_was_and_never_echo_the_value(tmp_path):
    folder, _ = seeded(tmp_path)
    secret_reason = "the key was " + "gh" + "p_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    before = folder_digest(folder)
    cases = [
        (["n00002", "--reason", secret_reason], "--reason seems to hold a credential"),
        (["n00002", "--reason", "  "], "--reason is empty"),
        (["n00002"], "--reason is empty"),
        (["n00002", "--reason", "Bad \x1b[31m colour."], "--reason holds the control character"),
        (["n00009", "--reason", REASON], "n00009 names no note in this session"),
        (["n" + "7" * 40, "--reason", REASON], "redact takes a note id such as n00012"),
    ]
    for args, words in cases:
        result = run_notes("redact", *args, folder=folder)
        error = assert_refused(result, 2, words)
        assert "aB3dE6" not in error and "7777777" not in error
        assert folder_digest(folder) == before, args
    assert run_notes("redact", "n00002", "--reason", REASON, folder=folder).code == 0
    after = folder_digest(folder)
    for note_id, words in (("n00002", "n00002 is redacted already (n00004 says why)"),
                           ("n00004", "n00004 records a redaction")):
        assert_refused(run_notes("redact", note_id, "--reason", REASON, folder=folder), 2, words)
        assert folder_digest(folder) == after


def test_append_refuses_the_placeholder_as_a_text(tmp_path):
    folder, _ = seeded(tmp_path)
    before = folder_digest(folder)
    result = run_notes("append", "--type", "decision", "--text", "[redacted]", folder=folder)
    assert_refused(result, 2, "the placeholder redact leaves")
    assert folder_digest(folder) == before


def test_an_unexplained_placeholder_is_a_problem_that_redact_run_again_explains(tmp_path):
    # A placeholder put in by hand (or by a redact killed before its source note): verify
    # reports it; redact on that note appends the missing source note and nothing else.
    folder = tmp_path / "session"
    append(folder, "--type", "mode", "--text", "Shaping.")
    session_id = json.loads((folder / "session_meta.json").read_text())["session_id"]
    first = log_bytes(folder)
    hand_made = placeholder_of(make_record(session_id, 2, text="Something private."))
    write_log(folder, first + line_of(hand_made))
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3, verify
    assert [(entry["line"], entry["id"], entry["kind"]) for entry in verify.receipt["problems"]] == [
        (2, "n00002", "redaction_unexplained")]
    assert verify.receipt["redacted"] == 1
    recap = run_notes("recap", folder=folder)
    assert recap.code == 0 and recap.receipt["warnings"] == [
        "line 2 (n00002): the note holds the placeholder redact leaves, but no later source note says it was "
        "redacted: it was edited by hand, or redact was cut short (run redact on it again to record why)"], recap

    result = run_notes("redact", "n00002", "--reason", REASON, folder=folder)
    assert result.code == 0 and result.receipt["redaction_note_id"] == "n00003", result
    assert log_bytes(folder).startswith(first + line_of(hand_made))
    verify = run_notes("verify", folder=folder)
    assert verify.code == 0 and verify.receipt["redacted"] == 1, verify


def test_a_source_note_before_the_placeholder_does_not_explain_it(tmp_path):
    folder = tmp_path / "session"
    append(folder, "--type", "mode", "--text", "Shaping.")
    session_id = json.loads((folder / "session_meta.json").read_text())["session_id"]
    early = make_record(session_id, 2, "source", text="Redacted n00003: it held a name.", about="n00001")
    write_log(folder, log_bytes(folder) + line_of(early) + line_of(placeholder_of(make_record(session_id, 3))))
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["redaction_unexplained"]


def test_restore_refuses_an_export_with_an_unexplained_placeholder_and_takes_an_explained_one(tmp_path):
    folder, _ = seeded(tmp_path)
    assert run_notes("redact", "n00002", "--reason", REASON, folder=folder).code == 0
    assert run_notes("export", folder=folder).code == 0
    export = json.loads((folder / "session_export.json").read_text())
    result = run_notes("restore", folder / "session_export.json", folder=tmp_path / "good")
    assert result.code == 0 and result.receipt["restored"] == 4, result
    export["records"] = export["records"][:3]
    export["record_count"] = 3
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(export, indent=2))
    result = run_notes("restore", cut, folder=tmp_path / "bad")
    assert result.code == 3 and [entry["kind"] for entry in result.receipt["problems"]] == [
        "redaction_unexplained"], result
    assert not (tmp_path / "bad").exists()


def mcp_answers(folder, *extra):
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "redact", "arguments": {"note_id": "n00002", "reason": REASON}}}]
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp", *extra],
                               input="".join(json.dumps(message) + "\n" for message in messages).encode(),
                               capture_output=True, timeout=60)
    assert completed.returncode == 0 and b"Traceback" not in completed.stderr, completed
    return [json.loads(line) for line in completed.stdout.splitlines()]


def test_mcp_serves_redact_only_when_started_with_allow_redact(tmp_path):
    folder, _ = seeded(tmp_path)
    before = folder_digest(folder)
    listing, call = mcp_answers(folder)
    assert "redact" not in [tool["name"] for tool in listing["result"]["tools"]]
    assert call["error"]["code"] == -32602 and "Unknown tool" in call["error"]["message"]
    assert folder_digest(folder) == before

    listing, call = mcp_answers(folder, "--allow-redact")
    tool = [tool for tool in listing["result"]["tools"] if tool["name"] == "redact"]
    assert tool and tool[0]["inputSchema"]["required"] == ["note_id", "reason"]
    assert tool[0]["annotations"]["destructiveHint"] is True
    assert call["result"]["isError"] is False, call
    assert call["result"]["structuredContent"]["redaction_note_id"] == "n00004"
    assert "555-0100" not in log_bytes(folder).decode("utf-8")


def test_help_shows_redact_with_a_safe_example():
    result = run_notes("redact", "--help")
    assert_no_traceback(result)
    assert result.code == 0
    assert "redact n00004 --reason 'It held a private phone number.'" in result.stdout
    assert "--allow-redact" in run_notes("mcp", "--help").stdout


def test_redact_refuses_a_hard_linked_log_whose_other_name_would_keep_the_text(tmp_path):
    folder, _ = seeded(tmp_path)
    other = tmp_path / "other-name.jsonl"
    os.link(str(folder / "session_notes.jsonl"), str(other))
    before = folder_digest(folder)
    assert_refused(run_notes("redact", "n00002", "--reason", REASON, folder=folder), 2, "hard links")
    assert folder_digest(folder) == before
    assert "555-0100" in other.read_text()  # nothing was changed through either name
