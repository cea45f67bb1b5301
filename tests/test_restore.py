"""restore EXPORT_FILE (issue 5, point 5): bring a session back from its export, ours or v0's."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import (V0_FIXTURES, assert_no_traceback, assert_refused, copy_fixture, folder_digest, notes,
                      read_records, run_here, run_notes, write_export)

RESTORE_KEYS = ["ok", "command", "session_id", "record_count", "restored", "path", "export", "tell_operator"]
V0_EXPORT = V0_FIXTURES / "basic" / "session_export.json"
V0_SESSION_ID = "0f3c2b1c-3c66-49ee-8557-e323c0678aaf"


# --------------------------------------------------------------------------
# Local helpers

def restore(folder, export_path, python=None):
    return run_notes("restore", export_path, folder=folder, python=python)


def assert_restore_refused(target, export_path) -> None:
    """Restore is refused with exit 2 and leaves the target folder as it was."""
    before = folder_digest(target)
    assert_refused(restore(target, export_path), 2)
    assert folder_digest(target) == before


def restored_ok(folder, export_path, record_count, restored, session_id) -> dict:
    result = restore(folder, export_path)
    assert result.code == 0, result
    assert_no_traceback(result)
    assert list(result.receipt) == RESTORE_KEYS
    # The sentence for the operator is pinned word for word in tests/test_tell_operator.py;
    # here it is one line that names what came back and the file to keep.
    receipt = dict(result.receipt)
    tell = receipt.pop("tell_operator")
    assert "\n" not in tell and tell.startswith("The session is back with %d note" % record_count), tell
    assert "session_export.json" in tell, tell
    export = receipt.pop("export")
    assert list(export) == ["file", "exported_at", "last_note"] and export["file"] == str(export_path)
    assert receipt == {"ok": True, "command": "restore", "session_id": session_id,
                       "record_count": record_count, "restored": restored,
                       "path": str(folder / "session_notes.jsonl")}
    return result.receipt


def checksum(record: dict) -> str:
    body = {key: value for key, value in record.items() if key != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def log_bytes_of(records: list) -> bytes:
    """The log a correct restore writes: each export record as one compact line, in order."""
    return b"".join((json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
                    for record in records)


def load(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def build_linked_session(folder) -> str:
    """A session of ours with links and unicode, built quickly in-process; return its session id."""
    assert notes.main(["--dir", str(folder), "init"]) == 0
    for arguments in (
            ["--type", "mode", "--text", "SHAPING entered."],
            ["--type", "gate", "--text", "Host runtime is undecided.", "--effect", "Blocks the install notes."],
            ["--type", "decision", "--text", "Reminders by email."],
            ["--type", "gate", "--text", "Host deferred.", "--ref", "n00002", "--status", "deferred"],
            ["--type", "decision", "--text", "Reminders by SMS, café and 東京 included.", "--ref", "n00003"],
            ["--type", "discard", "--text", "A vector store was ruled out."],
            ["--type", "artifact", "--text", "The runbook excludes\nraw notes."]):
        assert notes.main(["--dir", str(folder), "append"] + arguments) == 0
    return load(folder / "session_meta.json")["session_id"]


def export_through_cli(folder) -> tuple:
    """Export the folder's session through the CLI; return (path, parsed export)."""
    result = run_notes("export", folder=folder)
    assert result.code == 0, result
    path = folder / "session_export.json"
    return path, load(path)


def without_path(receipt: dict, *others: str) -> dict:
    return {key: value for key, value in receipt.items() if key != "path" and key not in others}


# --------------------------------------------------------------------------
# Into a folder with no session

def test_restore_the_v0_export_into_a_new_folder(tmp_path):
    target = tmp_path / "sandbox" / "shaping"

    restored_ok(target, V0_EXPORT, 11, 11, V0_SESSION_ID)

    meta_text = (target / "session_meta.json").read_text(encoding="utf-8")
    assert json.loads(meta_text) == {"schema_version": "shaping-memory-session-meta.v0",
                                     "session_id": V0_SESSION_ID, "created_at": "2026-11-29T15:10:48Z",
                                     "log_file": str(target / "session_notes.jsonl")}
    assert list(json.loads(meta_text)) == ["schema_version", "session_id", "created_at", "log_file"]
    assert meta_text == json.dumps(json.loads(meta_text), indent=2, ensure_ascii=False) + "\n"
    # The log comes back byte for byte as v0 wrote it.
    log = (target / "session_notes.jsonl").read_bytes()
    assert log == (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    assert read_records(target) == load(V0_EXPORT)["records"]

    verified = run_notes("verify", folder=target)
    assert verified.code == 0, verified
    assert verified.receipt["problems"] == [] and verified.receipt["total"] == 11
    # The restored session goes on where the export stopped.
    appended = run_notes("append", "--type", "decision", "--text", "Restored and continued.", folder=target)
    assert appended.code == 0, appended
    assert appended.receipt["note_id"] == "n00012"
    assert (target / "session_notes.jsonl").read_bytes().startswith(log)


def test_restore_our_export_into_an_empty_folder_gives_back_the_same_state(tmp_path):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, export = export_through_cli(origin)
    target = tmp_path / "target"
    target.mkdir()

    restored_ok(target, export_path, 7, 7, session_id)

    meta = load(target / "session_meta.json")
    assert meta == dict(export["session"], log_file=str(target / "session_notes.jsonl"))
    assert meta["created_at"] == load(origin / "session_meta.json")["created_at"]
    assert (target / "session_notes.jsonl").read_bytes() == log_bytes_of(export["records"])
    assert (target / "session_notes.jsonl").read_bytes() == (origin / "session_notes.jsonl").read_bytes()
    assert run_notes("verify", folder=target).code == 0
    # Re-entry: restore then recap gives back the same gates, decisions and boundaries
    # (the export, written in the origin folder only, lags in the target).
    assert without_path(run_notes("recap", folder=target).receipt, "export_lag") == \
        without_path(run_notes("recap", folder=origin).receipt, "export_lag")


def test_restore_at_re_entry_from_an_export_uploaded_into_the_same_folder(tmp_path):
    # A fresh sandbox: the operator uploads notes.py and the export into one folder.
    sandbox = tmp_path / "mnt" / "data"
    sandbox.mkdir(parents=True)
    uploaded = sandbox / "session_export.json"
    uploaded.write_bytes(V0_EXPORT.read_bytes())

    restored_ok(sandbox, uploaded, 11, 11, V0_SESSION_ID)

    assert uploaded.read_bytes() == V0_EXPORT.read_bytes()
    assert (sandbox / "session_notes.jsonl").read_bytes() == \
        (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    assert run_notes("verify", folder=sandbox).code == 0


def test_restore_an_empty_export(tmp_path):
    origin = tmp_path / "origin"
    assert run_notes("init", folder=origin).code == 0
    export_path, export = export_through_cli(origin)
    target = tmp_path / "target"

    restored_ok(target, export_path, 0, 0, export["session"]["session_id"])

    assert (target / "session_notes.jsonl").read_bytes() == b""
    assert load(target / "session_meta.json")["session_id"] == export["session"]["session_id"]


def test_restore_into_a_fresh_init_replaces_the_empty_session(session):
    before_id = load(session / "session_meta.json")["session_id"]
    assert before_id != V0_SESSION_ID

    restored_ok(session, V0_EXPORT, 11, 11, V0_SESSION_ID)

    assert load(session / "session_meta.json") == {
        "schema_version": "shaping-memory-session-meta.v0", "session_id": V0_SESSION_ID,
        "created_at": "2026-11-29T15:10:48Z", "log_file": str(session / "session_notes.jsonl")}
    assert (session / "session_notes.jsonl").read_bytes() == \
        (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    summary = run_notes("summary", folder=session)
    assert (summary.receipt["session_id"], summary.receipt["total"]) == (V0_SESSION_ID, 11)


# --------------------------------------------------------------------------
# Into the same session

@pytest.mark.parametrize("kept", [1, 4, 6])
def test_restore_appends_what_a_prefix_log_lacks(tmp_path, kept):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, export = export_through_cli(origin)
    # The sandbox's copy stopped after `kept` notes: same session, shorter log.
    target = tmp_path / "target"
    restored_ok(target, export_path, 7, 7, session_id)
    full_log = (target / "session_notes.jsonl").read_bytes()
    prefix = b"".join(full_log.splitlines(keepends=True)[:kept])
    (target / "session_notes.jsonl").write_bytes(prefix)
    meta_before = (target / "session_meta.json").read_bytes()

    restored_ok(target, export_path, 7, 7 - kept, session_id)

    log = (target / "session_notes.jsonl").read_bytes()
    assert log.startswith(prefix)
    assert log == full_log
    assert read_records(target) == export["records"]
    assert (target / "session_meta.json").read_bytes() == meta_before
    assert run_notes("verify", folder=target).code == 0


def test_restore_of_the_same_full_session_restores_nothing(tmp_path):
    target = copy_fixture("basic", tmp_path / "basic")
    first = restore(target, V0_EXPORT)  # the first run may create the lock file
    assert first.code == 0, first
    before = folder_digest(target)

    restored_ok(target, V0_EXPORT, 11, 0, V0_SESSION_ID)

    assert folder_digest(target) == before


# --------------------------------------------------------------------------
# Refusals: exit 2, nothing changed

def test_restore_refuses_another_session_with_notes(tmp_path):
    target = tmp_path / "target"
    build_linked_session(target)
    before = folder_digest(target)

    result = restore(target, V0_EXPORT)

    assert_refused(result, 2)
    assert list(result.receipt) == ["ok", "error"]
    assert folder_digest(target) == before


def test_restore_refuses_a_log_that_has_gone_past_the_export(tmp_path):
    target = copy_fixture("basic", tmp_path / "basic")
    appended = run_notes("append", "--type", "decision", "--text", "A note the export lacks.", folder=target)
    assert appended.code == 0, appended
    assert_restore_refused(target, V0_EXPORT)


def test_restore_refuses_the_same_session_when_the_logs_differ(tmp_path):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, _ = export_through_cli(origin)
    target = tmp_path / "target"
    restored_ok(target, export_path, 7, 7, session_id)
    # Same session, same length, but its last note is another one (still a valid log).
    records = read_records(target)
    replacement = notes._build_record(session_id, 7, "artifact", "Another boundary.", timestamp=records[6]["ts"])
    with open(str(target / "session_notes.jsonl"), "wb") as handle:
        handle.write(log_bytes_of(records[:6]) + notes._record_line(replacement))
    assert run_notes("verify", folder=target).code == 0
    assert_restore_refused(target, export_path)


def test_restore_refuses_a_missing_export_file(tmp_path):
    target = tmp_path / "target"
    result = restore(target, tmp_path / "no_such_export.json")
    assert_refused(result, 2)
    assert not target.exists()


# --------------------------------------------------------------------------
# A damaged export: exit 3, nothing written

def corrupt_checksum(export):
    export["records"][3]["text"] += " (edited by hand)"


def corrupt_gap(export):
    del export["records"][4]
    export["record_count"] -= 1


def corrupt_repeat(export):
    export["records"][5] = copy.deepcopy(export["records"][4])


def corrupt_start(export):
    del export["records"][0]
    export["record_count"] -= 1


def corrupt_mixed_sessions(export):
    record = export["records"][2]
    record["session_id"] = "11111111-2222-4333-8444-555555555555"
    record["checksum"] = checksum(record)


def corrupt_id(export):
    record = export["records"][0]
    record["id"] = "n00009"
    record["checksum"] = checksum(record)


def corrupt_unknown_type(export):
    record = export["records"][6]
    record["type"] = "idea"
    record["checksum"] = checksum(record)


def corrupt_count_high(export):
    export["record_count"] += 1


def corrupt_count_low(export):
    export["record_count"] -= 1


def corrupt_count_text(export):
    export["record_count"] = str(export["record_count"])


def corrupt_schema(export):
    export["schema_version"] = "shaping-memory-export.v9"


def corrupt_records_not_list(export):
    export["records"] = {"n00001": export["records"][0]}


def corrupt_record_not_object(export):
    export["records"][1] = "n00002"


def corrupt_record_missing_field(export):
    del export["records"][1]["ts"]


def corrupt_no_session_id(export):
    del export["session"]["session_id"]


def corrupt_no_session(export):
    del export["session"]


DAMAGES = {name[len("corrupt_"):]: function for name, function in globals().items() if name.startswith("corrupt_")}
RAW_DAMAGES = {
    "not-json": b"this is not an export {",
    "empty-file": b"",
    "cut-in-half": V0_EXPORT.read_bytes()[:len(V0_EXPORT.read_bytes()) // 2],
    "json-list": b"[]\n",
    "not-utf8": b'{"schema_version": "\xff\xfe"}',
}


def write_damaged(tmp_path, name) -> object:
    path = tmp_path / "damaged_export.json"
    if name in RAW_DAMAGES:
        path.write_bytes(RAW_DAMAGES[name])
    else:
        export = load(V0_EXPORT)
        DAMAGES[name](export)
        path.write_text(json.dumps(export, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("damage", sorted(DAMAGES) + sorted(RAW_DAMAGES))
def test_damaged_export_exits_3_and_writes_nothing(tmp_path, damage):
    export_path = write_damaged(tmp_path, damage)
    export_before = export_path.read_bytes()
    target = tmp_path / "new"

    result = restore(target, export_path)

    assert_refused(result, 3)
    assert not target.exists()
    assert export_path.read_bytes() == export_before


def test_damaged_exports_leave_an_existing_session_untouched(tmp_path):
    target = tmp_path / "target"
    assert run_notes("init", folder=target).code == 0
    before = folder_digest(target)
    for damage in ("checksum", "gap", "mixed_sessions", "count_high", "schema"):
        result = restore(target, write_damaged(tmp_path, damage))
        assert_refused(result, 3)
        assert folder_digest(target) == before, damage


def test_the_undamaged_copy_restores(tmp_path):
    # The damage helpers start from a sound export: re-serialised untouched, it restores.
    export = load(V0_EXPORT)
    path = tmp_path / "sound.json"
    path.write_text(json.dumps(export, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    restored_ok(tmp_path / "target", path, 11, 11, V0_SESSION_ID)


# --------------------------------------------------------------------------
# A small core on every interpreter found

def test_restore_on_each_python(tmp_path, python):
    target = tmp_path / "target"
    result = restore(target, V0_EXPORT, python=python)
    assert result.code == 0, result
    assert list(result.receipt) == RESTORE_KEYS
    assert (target / "session_notes.jsonl").read_bytes() == \
        (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    damaged = restore(tmp_path / "other", write_damaged(tmp_path, "gap"), python=python)
    assert_refused(damaged, 3)
    assert not (tmp_path / "other").exists()


# --------------------------------------------------------------------------
# Issue 30, point 3: a restore that knows what it restores

def exported_session(folder, texts) -> tuple:
    """A session of decisions built in-process, exported; return (session id, export path)."""
    session = notes.Session(folder)
    for text in texts:
        session.append(type="decision", text=text)
    return load(folder / "session_meta.json")["session_id"], Path(session.export()["path"])


def test_the_receipt_names_the_exports_time_and_last_note(tmp_path):
    session_id, export_path = exported_session(tmp_path / "origin", ["SMS first.", "Email second."])
    exported_at = load(export_path)["exported_at"]

    receipt = notes.Session(tmp_path / "target").restore(export_file=str(export_path))

    assert receipt["export"] == {"file": str(export_path), "exported_at": exported_at,
                                 "last_note": {"id": "n00002", "type": "decision", "text": "Email second."}}
    assert ("this export was written at %s %s UTC: one downloaded later holds more notes, so restore that "
            "one instead if you have it" % (exported_at[:10], exported_at[11:16])) in receipt["tell_operator"]


def test_an_export_without_a_time_or_notes_says_so(tmp_path):
    path = write_export(tmp_path / "hand.json", [])
    export = load(path)
    del export["exported_at"]
    path.write_text(json.dumps(export, indent=2) + "\n", encoding="utf-8")

    receipt = notes.Session(tmp_path / "target").restore(export_file=str(path))

    assert receipt["export"] == {"file": str(path), "exported_at": None, "last_note": None}
    assert "; this export has no time: one with more notes is later, so restore that one instead if you have it; " \
        in receipt["tell_operator"]


def test_restore_without_a_path_takes_the_export_in_the_session_folder(tmp_path, capsys):
    session_id, export_path = exported_session(tmp_path / "origin", ["SMS first."])
    target = tmp_path / "target"
    target.mkdir()
    shutil.copy(str(export_path), str(target / "session_export.json"))

    code, receipt = run_here(capsys, target, "restore")

    assert code == 0 and receipt["restored"] == 1 and "passed_over" not in receipt
    assert receipt["export"]["file"] == str(target / "session_export.json")
    assert read_records(target) == load(export_path)["records"]


def test_restore_without_a_path_takes_the_longest_of_copies_that_are_earlier_parts(tmp_path, capsys):
    origin = tmp_path / "origin"
    target = tmp_path / "target"
    target.mkdir()
    session_id, export_path = exported_session(origin, ["One."])
    shutil.copy(str(export_path), str(target / "session_export.json"))
    _, export_path = exported_session(origin, ["Two.", "Three."])
    shutil.copy(str(export_path), str(target / "session_export (1).json"))  # a browser's name for a copy
    shutil.copy(str(export_path), str(target / "kept.json"))  # the same copy again, any name

    code, receipt = run_here(capsys, target, "restore")

    assert code == 0, receipt
    assert receipt["export"]["file"] == str(target / "kept.json")  # of equal copies, the first by name
    assert receipt["passed_over"] == ["session_export (1).json", "session_export.json"]
    assert list(receipt)[:9] == ["ok", "command", "session_id", "record_count", "restored", "path", "export",
                                 "passed_over", "tell_operator"]
    assert [record["text"] for record in read_records(target)] == ["One.", "Two.", "Three."]


def test_restore_without_a_path_refuses_copies_that_went_different_ways(tmp_path, capsys):
    target = tmp_path / "target"
    target.mkdir()
    _, first = exported_session(tmp_path / "a", ["One.", "Two in a."])
    shutil.copy(str(first), str(target / "session_export.json"))
    _, second = exported_session(tmp_path / "a", ["Three in a."])
    shutil.copy(str(second), str(target / "session_export (1).json"))
    other_id, idea = exported_session(tmp_path / "c", ["Another idea."])
    shutil.copy(str(idea), str(target / "other.json"))
    (target / "notes.md").write_text("# Shaping session, not JSON\n", encoding="utf-8")  # not an export
    before = folder_digest(target)

    code, receipt = run_here(capsys, target, "restore")

    assert code == 2 and receipt["ok"] is False
    session_id = load(first)["session"]["session_id"]
    assert receipt["exports"] == [
        {"file": "other.json", "session_id": other_id, "record_count": 1, "last_note_id": "n00001",
         "exported_at": load(idea)["exported_at"]},
        {"file": "session_export (1).json", "session_id": session_id, "record_count": 3, "last_note_id": "n00003",
         "exported_at": load(second)["exported_at"]},
        {"file": "session_export.json", "session_id": session_id, "record_count": 2, "last_note_id": "n00002",
         "exported_at": load(first)["exported_at"]}]
    assert receipt["error"] == (
        "%s holds 3 exports (listed in exports), not all earlier parts of the longest: two ideas, or copies that "
        "went different ways; nothing was changed. Pass the one to restore: python3 -S notes.py --dir %s restore "
        "PATH" % (target, target))
    assert folder_digest(target) == before


def test_restore_without_a_path_refuses_a_folder_with_no_export(tmp_path, capsys):
    for target in (tmp_path / "missing", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir()
            (target / ".session_export.json.0123456789ab.tmp").write_bytes(
                b'{\n  "schema_version": "shaping-memory-export.v0"')  # a write in progress is no export
        before = folder_digest(target)
        code, receipt = run_here(capsys, target, "restore")
        assert (code, receipt) == (2, {"ok": False, "error": (
            "no export of this tool in the session folder %s; nothing was changed. Upload session_export.json "
            "there, or pass its path: python3 -S notes.py --dir %s restore PATH" % (target, target))})
        assert folder_digest(target) == before


def test_restore_without_a_path_compares_a_bounded_number_of_exports(tmp_path):
    _, export_path = exported_session(tmp_path / "origin", ["One."])
    target = tmp_path / "target"
    target.mkdir()
    for number in range(21):
        shutil.copy(str(export_path), str(target / ("copy-%02d.json" % number)))
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(target).restore()
    assert refused.value.message == ("%s holds more than 20 exports, more than restore compares; nothing was "
                                     "changed. Pass the one to restore: restore PATH" % target)
    assert sorted(os.listdir(str(target))) == ["copy-%02d.json" % number for number in range(21)]


def test_an_export_older_than_the_folder_is_refused_naming_both_last_notes(tmp_path):
    session_id, export_path = exported_session(tmp_path / "origin", ["One.", "Two."])
    notes.Session(tmp_path / "origin").append(type="decision", text="Three.")
    before = folder_digest(tmp_path / "origin")

    with pytest.raises(notes.NotesError) as refused:
        notes.Session(tmp_path / "origin").restore(export_file=str(export_path))

    assert refused.value.exit_code == 2
    assert refused.value.message == (
        "%s already holds session %s with 3 notes up to n00003, past this export's 2 up to n00002: it is an older "
        "copy, so there is nothing to restore, and nothing was changed. Carry on in this folder (recap shows its "
        "state), and run export to bring the export up to date" % (tmp_path / "origin", session_id))
    assert folder_digest(tmp_path / "origin") == before


def test_copies_that_went_different_ways_are_refused_listing_the_notes_only_in_the_folder(tmp_path, capsys):
    origin = tmp_path / "origin"
    session_id, _ = exported_session(origin, ["One.", "Two."])
    shutil.copytree(str(origin), str(tmp_path / "fork"))
    _, export_path = exported_session(origin, ["Three in origin."])
    fork = notes.Session(tmp_path / "fork")
    fork.append(type="gate", text="Hosting is undecided?", effect="Blocks the install notes.")
    for number in range(24):
        fork.append(type="decision", text="Fork note %d." % number)
    before = folder_digest(tmp_path / "fork")

    code, receipt = run_here(capsys, tmp_path / "fork", "restore", export_path)

    assert code == 2
    assert receipt["error"] == (
        "the log in %s and this export went different ways after 2 notes in common: the folder holds 25 notes "
        "the export lacks (only_in_folder); nothing was changed. To keep both, restore the export into an empty "
        "--dir, then append the notes of only_in_folder there again" % (tmp_path / "fork"))
    assert receipt["only_in_folder_count"] == 25
    assert receipt["only_in_folder"][0] == {"id": "n00003", "type": "gate", "text": "Hosting is undecided?",
                                            "effect": "Blocks the install notes."}
    assert receipt["only_in_folder"][1:] == [{"id": "n%05d" % (number + 4), "type": "decision",
                                              "text": "Fork note %d." % number} for number in range(19)]
    assert folder_digest(tmp_path / "fork") == before
    # The way out, as said: restore into an empty folder, then append the listed notes again.
    empty = notes.Session(tmp_path / "joined")
    assert empty.restore(export_file=str(export_path))["restored"] == 3
    assert empty.append(type="gate", text="Hosting is undecided?")["note_id"] == "n00004"


def test_a_fast_forward_cut_off_at_the_rename_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, _ = export_through_cli(origin)
    target = tmp_path / "target"
    notes.Session(target).restore(export_file=str(export_path))
    lines = (target / "session_notes.jsonl").read_bytes().splitlines(keepends=True)
    (target / "session_notes.jsonl").write_bytes(b"".join(lines[:3]))
    before = folder_digest(target)

    def cut_off(source, destination):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(notes.os, "replace", cut_off)
    with pytest.raises(OSError):
        notes.Session(target).restore(export_file=str(export_path))

    assert folder_digest(target) == before  # no part-way append, no temporary file left
    monkeypatch.undo()
    assert notes.Session(target).restore(export_file=str(export_path))["restored"] == 4
    assert (target / "session_notes.jsonl").read_bytes() == b"".join(lines)


def test_a_fast_forward_is_one_rewrite_of_the_log(tmp_path, monkeypatch):
    origin = tmp_path / "origin"
    build_linked_session(origin)
    export_path, _ = export_through_cli(origin)
    target = tmp_path / "target"
    notes.Session(target).restore(export_file=str(export_path))
    full = (target / "session_notes.jsonl").read_bytes()
    (target / "session_notes.jsonl").write_bytes(b"".join(full.splitlines(keepends=True)[:2]))
    replaced = []
    real_replace = notes._replace_log
    monkeypatch.setattr(notes, "_replace_log", lambda folder, chunks: replaced.append(folder) or
                        real_replace(folder, chunks))

    assert notes.Session(target).restore(export_file=str(export_path))["restored"] == 5

    assert replaced == [str(target)] and (target / "session_notes.jsonl").read_bytes() == full


def test_export_here_restore_there_with_the_real_script(tmp_path):
    # The operator exports in one sandbox and uploads the file into the next one's session folder.
    first = tmp_path / "first"
    assert run_notes("append", "--type", "decision", "--text", "SMS is the channel.", folder=first).code == 0
    exported = run_notes("export", folder=first)
    assert exported.code == 0 and exported.receipt["keep"]["file"] == str(first / "session_export.json")
    second = tmp_path / "second"
    second.mkdir()
    shutil.copy(exported.receipt["path"], str(second / "session_export.json"))

    result = run_notes("restore", folder=second)

    assert result.code == 0, result
    assert_no_traceback(result)
    assert result.receipt["export"] == {
        "file": str(second / "session_export.json"), "exported_at": load(second / "session_export.json")["exported_at"],
        "last_note": {"id": "n00001", "type": "decision", "text": "SMS is the channel."}}
    assert (second / "session_notes.jsonl").read_bytes() == (first / "session_notes.jsonl").read_bytes()
    again = run_notes("restore", folder=second)  # the same export again: nothing to add
    assert again.code == 0 and again.receipt["restored"] == 0, again
