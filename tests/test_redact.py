"""redact: the one audited rewrite (issue 20, point 7), through the real script."""

from __future__ import annotations

import errno
import json
import os
import random
import stat
import subprocess
import sys
import threading
import time

import pytest

from conftest import (NOTES, REPO, SESSION_ID, appended, assert_no_traceback, assert_refused, folder_digest,
                      line_of, log_bytes, make_record, notes, run_here, run_notes, v0_checksum, write_log,
                      write_session)

SECRET = "Call Ann on 555-0100 at home."
REASON = "It held a private phone number."
NOT_ERASED = (
    "redact rewrote the log only: an export made before it, side files of torn tails "
    "(session_notes.jsonl.torn-*), and any copy, backup or hard link of the log still hold the old text; "
    "delete them, and export again")


def seeded(tmp_path):
    """A session of three notes, the second holding what must go; return (folder, its records)."""
    folder = tmp_path / "session"
    appended(folder, "gate", "Host runtime is undecided.")
    appended(folder, "decision", SECRET, "--effect", "Ann is the contact.", "--provenance", "op")
    appended(folder, "decision", "Use email.")
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
    assert appended(folder, "mode", "Shaping.")["seq"] == 5


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
    appended(folder, "mode", "Shaping.")
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
        "line 2 (n00002): the note holds redact's placeholder, but no later source note says why: it was "
        "edited by hand, or redact was cut short (run redact on it again)"], recap

    result = run_notes("redact", "n00002", "--reason", REASON, folder=folder)
    assert result.code == 0 and result.receipt["redaction_note_id"] == "n00003", result
    assert log_bytes(folder).startswith(first + line_of(hand_made))
    verify = run_notes("verify", folder=folder)
    assert verify.code == 0 and verify.receipt["redacted"] == 1, verify


def test_a_source_note_before_the_placeholder_does_not_explain_it(tmp_path):
    folder = tmp_path / "session"
    appended(folder, "mode", "Shaping.")
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


# --------------------------------------------------------------------------
# One step for every reader (issue 29, point 1): the placeholder and its source note come together

# Redacts the notes n00001, n00002, ... of a folder one after another, in one process, until told to stop
# (then says how many), waiting for that once every note is redacted.
REDACT_LOOP = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import notes
folder, stop, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
done = 0
while not os.path.exists(stop):
    if done == count:
        time.sleep(0.01)
        continue
    done += 1
    notes.Session(folder).redact(note_id="n%05d" % done, reason="It held a private detail.")
    if done == 1:
        print("under way", flush=True)
print(done)
"""


def readers_beside_a_redact_loop(tmp_path, seconds, notes_count, python=sys.executable):
    """verify, recap and export run again and again while another process redacts note after note, all on
    python; return (redacts done, reader runs, the exports taken)."""
    folder, exports = tmp_path / "session", tmp_path / "exports"
    write_session(folder, [("decision", "Private detail %d stays." % seq) for seq in range(1, notes_count + 1)])
    exports.mkdir()
    stop = tmp_path / "stop"
    redacter = subprocess.Popen([python, "-S", "-c", REDACT_LOOP, str(REPO), str(folder), str(stop),
                                 str(notes_count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The clock starts once the redacter is under way: a slow start must not eat the time readers have.
    assert redacter.stdout.readline() == b"under way\n", redacter.communicate()
    failures, runs = [], []

    def read(kind):
        number = 0
        while not stop.exists():
            number += 1
            if kind == "export":
                result = run_notes("export", "--output", exports / ("%d.json" % number), folder=folder,
                                   python=python)
            else:
                result = run_notes(kind, folder=folder, python=python)
            runs.append(kind)
            if result.code != 0 or result.receipt is None or result.receipt.get("warnings") or (
                    result.receipt.get("problems")):
                failures.append((kind, result))

    threads = [threading.Thread(target=read, args=(kind,)) for kind in ("verify", "recap", "export")]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.touch()
    for thread in threads:
        thread.join()
    out, err = redacter.communicate(timeout=120)
    assert redacter.returncode == 0 and b"Traceback" not in err, err
    assert failures == [], failures[:3]
    verify = run_notes("verify", folder=folder)
    done = int(out)
    assert verify.code == 0 and verify.receipt["redacted"] == done, verify
    return done, runs, sorted(exports.iterdir(), key=lambda path: int(path.stem))


def test_readers_beside_a_redact_loop_never_see_damage(tmp_path, python):
    # On this interpreter in the default set, on each other one in the long set.
    done, runs, exports = readers_beside_a_redact_loop(tmp_path, 3, 400, python)
    assert done >= 5 and len(runs) >= 3, (done, runs)
    restored = run_notes("restore", exports[-1], folder=tmp_path / "restored")  # an export taken mid-loop
    assert restored.code == 0, restored


@pytest.mark.long
def test_readers_beside_a_long_redact_loop_never_see_damage_and_every_export_restores(tmp_path):
    done, runs, exports = readers_beside_a_redact_loop(tmp_path, 60, 2000)
    assert done >= 100 and len(runs) >= 30, (done, len(runs))
    for number, export in enumerate(exports):
        restored = run_notes("restore", export, folder=tmp_path / ("restored-%d" % number))
        assert restored.code == 0, (export, restored)


# --------------------------------------------------------------------------
# What redact cannot explain, it refuses (issue 29, points 2 and 3), in process

def by_hand(tmp_path, entries, tail=b""):
    """A session written by hand, with the lock file a writer leaves; return its folder."""
    folder = tmp_path / "session"
    write_session(folder, entries, tail=tail)
    (folder / "session_notes.lock").touch()
    for path in folder.iterdir():
        path.chmod(0o600)  # as a writer leaves them (it tightens wider ones)
    return folder


def modes(folder) -> dict:
    return {name: stat.S_IMODE(os.lstat(str(folder / name)).st_mode) for name in os.listdir(str(folder))}


def refused_here(capsys, folder, note_id, *words) -> str:
    """redact note_id through notes.main: exit 2, only ok and error, every file (and mode) as it was."""
    before, modes_before = folder_digest(folder), modes(folder)
    code, receipt = run_here(capsys, folder, "redact", note_id, "--reason", REASON)
    assert code == 2 and set(receipt) == {"ok", "error"} and receipt["ok"] is False, receipt
    for word in words:
        assert word in receipt["error"], (word, receipt["error"])
    assert "555-0100" not in receipt["error"]
    assert folder_digest(folder) == before and modes(folder) == modes_before  # no temporary file either
    with pytest.raises(notes.NotesError) as raised:  # the Python API refuses with the same text
        notes.Session(str(folder)).redact(note_id=note_id, reason=REASON)
    assert raised.value.message == receipt["error"]
    assert folder_digest(folder) == before
    return receipt["error"]


HEAD = [("gate", "Channel is open.", {"provenance": "op"}), ("decision", SECRET)]


def batch_lines(first_seq, places, of) -> bytes:
    """Lines of an of-line batch as append --batch writes them, its lines at places (its seqs from first_seq)."""
    return b"".join(line_of(make_record(SESSION_ID, first_seq + place - 1, "decision", "%s (line %d)" % (
        SECRET, place), batch="%d/%d" % (place, of))) for place in places)


INCOMPLETE_ENDS = {
    "whole-lines": batch_lines(3, (1, 2), 3),
    "and-a-cut-off-line": batch_lines(3, (1, 2), 3) + batch_lines(3, (3,), 3)[:60],
    "last-line-without-newline": batch_lines(3, (1, 2, 3), 4)[:-1],
}


@pytest.mark.parametrize("end", list(INCOMPLETE_ENDS))
def test_a_note_of_an_incomplete_batch_is_refused_and_another_is_redacted_past_it(tmp_path, capsys, end):
    # A writer killed mid-batch leaves lines no reader counts as notes; their ids are issued again.
    cut = INCOMPLETE_ENDS[end]
    folder = by_hand(tmp_path, HEAD, tail=cut)
    head = log_bytes(folder)[:-len(cut)]
    for note_id in ("n00003", "n00004") + (("n00005",) if end != "whole-lines" else ()):
        refused_here(capsys, folder, note_id, "%s is in the last lines of the log, which a crash cut short" % note_id,
                     "no note to redact; nothing was changed", "session_notes.jsonl.torn-")

    code, receipt = run_here(capsys, folder, "redact", "n00002", "--reason", REASON)
    assert code == 0 and receipt["redaction_note_id"] == "n00003", receipt
    assert receipt["recovered"]["kind"] == "incomplete_batch" and receipt["recovered"]["bytes"] == len(cut)
    with open(receipt["recovered"]["side_file"], "rb") as handle:
        assert handle.read() == cut  # set aside whole, as append sets it aside
    lines = log_bytes(folder).splitlines(keepends=True)
    assert b"".join(lines[:2]) == head.splitlines(keepends=True)[0] + line_of(placeholder_of(
        json.loads(head.splitlines()[1])))
    source = json.loads(lines[2])
    assert len(lines) == 3 and (source["id"], source["about"]) == ("n00003", "n00002")
    assert run_here(capsys, folder, "verify") == (0, {"ok": True, "command": "verify", "path": str(
        folder / "session_notes.jsonl"), "total": 3, "problems": [], "redacted": 1})


def test_the_source_note_is_numbered_past_damaged_lines_and_a_cut_off_end(tmp_path, capsys):
    # A complete damaged line counts as having held a seq; a cut-off last line is set aside first.
    folder = by_hand(tmp_path, HEAD + [("decision", "Use email.")], tail=b"{}\n" + b'{"id":"n0000')
    code, receipt = run_here(capsys, folder, "redact", "n00002", "--reason", REASON)
    assert code == 0 and receipt["redaction_note_id"] == "n00005", receipt
    assert receipt["recovered"]["kind"] == "torn_tail"
    lines = log_bytes(folder).splitlines()
    assert lines[3] == b"{}" and json.loads(lines[4])["seq"] == 5 and len(lines) == 5
    code, verify = run_here(capsys, folder, "verify")
    assert code == 3 and [entry["kind"] for entry in verify["problems"]] == ["missing_field"], verify  # the {} alone


def test_a_record_edited_by_hand_is_damage_that_redact_leaves(tmp_path, capsys):
    # A gate update moved from deferred to closed by hand, its checksum kept: redact must not launder it.
    gate = make_record(SESSION_ID, 1, "gate", "Is the pilot funded?")
    update = make_record(SESSION_ID, 2, "gate", "Deferred until %s calls back." % SECRET, ref="n00001",
                         status="deferred")
    edited = line_of(update).replace(b'"status":"deferred"', b'"status":"closed"')
    folder = by_hand(tmp_path, [gate, edited])
    error = refused_here(capsys, folder, "n00002", "n00002 does not verify (bad_checksum)",
                         "redact leaves damage as it is", "restore the session from an intact export")
    assert "closed" not in error
    code, verify = run_here(capsys, folder, "verify")
    assert code == 3 and [(entry["id"], entry["kind"]) for entry in verify["problems"]] == [("n00002", "bad_checksum")]


def test_a_note_whose_only_problem_is_its_text_is_redacted(tmp_path, capsys):
    # What append now refuses in a text (here a credential written by an older version) is what redact is for.
    key = "gh" + "p_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    folder = by_hand(tmp_path, [("decision", "The deploy key is %s." % key)])
    code, receipt = run_here(capsys, folder, "redact", "n00001", "--reason", "It held a deploy key.")
    assert code == 0 and receipt["redaction_note_id"] == "n00002", receipt
    assert key.encode() not in log_bytes(folder)
    assert run_here(capsys, folder, "verify")[0] == 0


@pytest.mark.parametrize("what", ["log", "folder"])
def test_a_read_only_log_or_folder_is_refused_and_keeps_its_mode(tmp_path, capsys, what):
    # Tests run as root here, who writes past the mode bits: the check reads them.
    folder = by_hand(tmp_path, HEAD)
    target, mode = (folder / "session_notes.jsonl", 0o400) if what == "log" else (folder, 0o500)
    os.chmod(str(target), mode)
    try:
        named = str(target) if what == "log" else "the folder %s" % folder
        refused_here(capsys, folder, "n00002", "%s is read-only (mode 0%o)" % (named, mode),
                     "nothing was changed, and the protection stays", "chmod u+w %s" % target)
        assert stat.S_IMODE(os.stat(str(target)).st_mode) == mode
    finally:
        os.chmod(str(folder), 0o700)


def chattr(flag, path) -> bool:
    """Set or clear an attribute with chattr; whether it took."""
    try:
        return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.parametrize("flag", ["+i", "+a"])
@pytest.mark.parametrize("what", ["log", "folder"])
def test_an_immutable_or_append_only_log_or_folder_is_refused_with_no_temporary_file(tmp_path, capsys, monkeypatch,
                                                                                     what, flag):
    folder = by_hand(tmp_path, HEAD)
    target = folder / "session_notes.jsonl" if what == "log" else folder
    if chattr(flag, target):
        try:
            named = str(target) if what == "log" else "the folder %s" % folder
            refused_here(capsys, folder, "n00002", "%s is immutable or append-only (chattr +i or +a)" % named,
                         "lift it (chattr -ia %s)" % target)
        finally:
            chattr("-ia", target)
    else:  # no chattr here (or no right to use it): the system's refusal of the rename, as it comes
        def refused(*args):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
        monkeypatch.setattr(os, "replace", refused)
        refused_here(capsys, folder, "n00002", "the log or its folder is protected")


def test_a_rename_the_system_refuses_is_a_guided_refusal_and_the_copy_is_removed(tmp_path, capsys, monkeypatch):
    # Where the flags cannot be read up front, the failed rename says it.
    folder = by_hand(tmp_path, HEAD)
    log_path = str(folder / "session_notes.jsonl")
    monkeypatch.setattr(notes, "_is_protected_inode", lambda descriptor: False)
    monkeypatch.setattr(os, "replace", lambda *args: (_ for _ in ()).throw(PermissionError(errno.EPERM, "denied")))
    refused_here(capsys, folder, "n00002", "cannot replace %s (denied): the log or its folder is protected" % log_path,
                 "nothing was changed", "lift the protection and run the command again")

    # A folder that will not let the copy go either (chattr +a) is left with it emptied, never a copy of the log.
    unlink = os.unlink
    monkeypatch.setattr(os, "unlink", lambda path, *args, **kw: (_ for _ in ()).throw(
        PermissionError(errno.EPERM, "denied")) if str(path).endswith(".tmp") else unlink(path, *args, **kw))
    code, receipt = run_here(capsys, folder, "redact", "n00002", "--reason", REASON)
    assert code == 2 and "the log or its folder is protected" in receipt["error"]
    left = [name for name in os.listdir(str(folder)) if name.endswith(".tmp")]
    assert len(left) == 1 and os.path.getsize(str(folder / left[0])) == 0


# Redacts n00002 once it has said it is ready, so that a kill lands inside the redact, not the start-up.
REDACT_ONCE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import notes
print("ready", flush=True)
notes.Session(sys.argv[2]).redact(note_id="n00002", reason="It held a private detail.")
"""


def test_a_redact_killed_at_any_moment_leaves_the_log_before_or_after(tmp_path):
    # SIGKILL at a random moment: the log is the old one byte for byte, or the new one whole.
    folder = tmp_path / "session"
    write_session(folder, [("decision", "Private detail %d stays." % seq) for seq in range(1, 3001)])
    before = log_bytes(folder)
    lines = before.splitlines(keepends=True)
    after_head = lines[0] + line_of(placeholder_of(json.loads(lines[1]))) + b"".join(lines[2:])
    chance = random.Random(29)
    outcomes = []
    for _ in range(5):
        write_log(folder, before)
        killed = subprocess.Popen([sys.executable, "-S", "-c", REDACT_ONCE, str(REPO), str(folder)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert killed.stdout.readline() == b"ready\n"
        time.sleep(chance.uniform(0, 0.15))
        killed.kill()
        killed.wait()
        killed.stdout.close()
        log = log_bytes(folder)
        outcomes.append("before" if log == before else "after")
        if log != before:
            assert log.startswith(after_head) and len(log.splitlines()) == 3001, "a log part-way"
            source = json.loads(log.splitlines()[-1])
            assert (source["id"], source["about"]) == ("n03001", "n00002")
        assert notes.Session(str(folder)).verify()["problems"] == []
    assert outcomes  # which of the two each kill leaves depends on the machine's speed; both are whole
