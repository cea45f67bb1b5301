"""Links on append (issue 5, point 1): --ref and --status, how they are stored, what is refused.

Also point 6: the v0 commands keep their v0 receipts when links are in the log.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import (append, assert_refused, copy_fixture, folder_digest, notes, read_records, recap, run_notes)

V0_RECORD_KEYS = ["id", "ts", "session_id", "seq", "type", "text", "checksum"]
V0_RECORD_KEYS_WITH_EFFECT = ["id", "ts", "session_id", "seq", "type", "text", "effect", "checksum"]


# --------------------------------------------------------------------------
# Local helpers

def independent_checksum(record: dict) -> str:
    """The SPEC's checksum, computed here without notes.py: sorted compact JSON, SHA-256, 16 hex."""
    body = {key: value for key, value in record.items() if key != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def raw_lines(folder) -> list:
    with open(str(folder / "session_notes.jsonl"), "rb") as handle:
        return handle.read().splitlines()


def build_in_process(folder, signals) -> None:
    """Create a session and append signals quickly (the subject of the test is elsewhere)."""
    assert notes.main(["--dir", str(folder), "init"]) == 0
    for arguments in signals:
        assert notes.main(["--dir", str(folder), "append"] + list(arguments)) == 0, arguments


# --------------------------------------------------------------------------
# Storage

def test_records_without_links_are_exactly_v0(session):
    append(session, "gate", "Host runtime is undecided.")
    append(session, "decision", "The log stays append-only.", "--effect", "No rewrite of earlier lines.")
    append(session, "mode", "SHAPING entered.")

    records = read_records(session)
    assert [list(record) for record in records] == [V0_RECORD_KEYS, V0_RECORD_KEYS_WITH_EFFECT, V0_RECORD_KEYS]
    for line, record in zip(raw_lines(session), records):
        assert "ref" not in record and "status" not in record
        assert record["checksum"] == independent_checksum(record)
        # Compact JSON, non-ASCII as is: the v0 line format.
        assert line == json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def test_links_are_stored_after_effect_before_checksum_and_covered_by_it(session):
    append(session, "gate", "Persistence model is undecided.", "--effect", "Do not write the artifact yet.")
    append(session, "gate", "JSONL chosen; the gate is closed.", "--effect", "Artifact can proceed.",
           "--ref", "n00001", "--status", "closed")
    append(session, "decision", "Reminders go by email.")
    append(session, "decision", "Reminders go by SMS.", "--ref", "n00003")

    records = read_records(session)
    update, supersession = records[1], records[3]
    assert list(update) == ["id", "ts", "session_id", "seq", "type", "text", "effect", "ref", "status", "checksum"]
    assert (update["ref"], update["status"]) == ("n00001", "closed")
    assert list(supersession) == ["id", "ts", "session_id", "seq", "type", "text", "ref", "checksum"]
    assert supersession["ref"] == "n00003"

    for line, record in zip(raw_lines(session), records):
        assert record["checksum"] == independent_checksum(record)
        assert line == json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    # The link fields are inside the checksum: dropping or changing one breaks it.
    for record in (update, supersession):
        without_ref = {key: value for key, value in record.items() if key != "ref"}
        assert independent_checksum(without_ref) != record["checksum"]
    changed_status = dict(update, status="deferred")
    assert independent_checksum(changed_status) != update["checksum"]

    verified = run_notes("verify", folder=session)
    assert verified.code == 0, verified
    assert verified.receipt["problems"] == []


def test_new_gate_without_status_has_no_status_field_and_counts_as_open(session):
    append(session, "gate", "Scope of the pilot is undecided.")

    record = read_records(session)[0]
    assert list(record) == V0_RECORD_KEYS
    state = recap(session)
    assert state["open_gates"] == [{"id": "n00001", "text": "Scope of the pilot is undecided.", "status": "open"}]
    assert state["deferred_gates"] == [] and state["closed_gates"] == []


@pytest.mark.parametrize("status, recap_list", [("open", "open_gates"), ("deferred", "deferred_gates")])
def test_new_gate_with_explicit_status_stores_it(session, status, recap_list):
    append(session, "gate", "Second language is out of the pilot.", "--status", status)

    record = read_records(session)[0]
    assert record["status"] == status
    assert "ref" not in record
    assert list(record) == ["id", "ts", "session_id", "seq", "type", "text", "status", "checksum"]
    assert record["checksum"] == independent_checksum(record)
    state = recap(session)
    assert state[recap_list] == [{"id": "n00001", "text": "Second language is out of the pilot.",
                                  "status": status}]


def test_gate_update_may_name_an_earlier_update_of_the_gate(session):
    append(session, "gate", "Hosting model is undecided.")
    append(session, "gate", "Hosting deferred until IT answers.", "--ref", "n00001", "--status", "deferred")
    # The chain: this update names the update, not the opening gate.
    append(session, "gate", "Hosting closed: reception PC.", "--ref", "n00002", "--status", "closed")

    records = read_records(session)
    assert [(record.get("ref"), record.get("status")) for record in records] == [
        (None, None), ("n00001", "deferred"), ("n00002", "closed")]
    state = recap(session)
    assert (state["open_gates"], state["deferred_gates"]) == ([], [])
    assert state["closed_gates"] == [{"id": "n00001", "text": "Hosting model is undecided.", "update_id": "n00003",
                                      "closed_by": {"id": "n00003", "type": "gate",
                                                    "text": "Hosting closed: reception PC."}}]

    # Reopening through the last link of the chain brings the opening gate back.
    append(session, "gate", "Hosting reopened: the PC is being replaced.", "--ref", "n00003", "--status", "open")
    state = recap(session)
    assert state["open_gates"] == [{"id": "n00001", "text": "Hosting model is undecided.", "status": "open",
                                    "update_id": "n00004",
                                    "update_text": "Hosting reopened: the PC is being replaced."}]
    assert state["closed_gates"] == []


def test_same_text_with_another_status_is_a_new_note(session):
    append(session, "gate", "Channel is undecided.")
    first = append(session, "gate", "Channel update.", "--ref", "n00001", "--status", "deferred").receipt
    second = append(session, "gate", "Channel update.", "--ref", "n00001", "--status", "closed").receipt

    assert (first["note_id"], second["note_id"]) == ("n00002", "n00003")
    assert "duplicate" not in second
    assert [record.get("status") for record in read_records(session)] == [None, "deferred", "closed"]


# --------------------------------------------------------------------------
# Refusals: exit 2, a JSON error, nothing written

# The session every refusal runs against: n00001 a gate, n00002 a decision,
# n00003 an update of the gate, n00004 a discard.
REFUSAL_BASE = [
    ["--type", "gate", "--text", "Hosting model is undecided."],
    ["--type", "decision", "--text", "Reminders go by email."],
    ["--type", "gate", "--text", "Hosting deferred.", "--ref", "n00001", "--status", "deferred"],
    ["--type", "discard", "--text", "WhatsApp ruled out."],
]

REFUSALS = [
    # (case id, append arguments, a word the error must hold)
    ("ref-to-missing-note", ["--type", "decision", "--text", "x", "--ref", "n00099"], "n00099"),
    ("ref-to-future-note", ["--type", "decision", "--text", "x", "--ref", "n00005"], "n00005"),
    ("ref-malformed-short", ["--type", "decision", "--text", "x", "--ref", "n1"], "--ref"),
    ("ref-malformed-no-letter", ["--type", "decision", "--text", "x", "--ref", "00001"], "--ref"),
    ("ref-malformed-capital", ["--type", "decision", "--text", "x", "--ref", "N00001"], "--ref"),
    ("ref-malformed-letters", ["--type", "decision", "--text", "x", "--ref", "n0000a"], "--ref"),
    ("ref-malformed-word", ["--type", "decision", "--text", "x", "--ref", "gate-one"], "--ref"),
    ("ref-empty", ["--type", "decision", "--text", "x", "--ref", ""], "--ref"),
    ("status-on-decision", ["--type", "decision", "--text", "x", "--status", "open"], "--status"),
    ("status-on-mode", ["--type", "mode", "--text", "x", "--status", "closed"], "--status"),
    ("status-on-artifact-with-ref", ["--type", "artifact", "--text", "x", "--ref", "n00002",
                                     "--status", "deferred"], "--status"),
    ("gate-update-without-status", ["--type", "gate", "--text", "x", "--ref", "n00001"], "--status"),
    ("gate-ref-to-decision", ["--type", "gate", "--text", "x", "--ref", "n00002", "--status", "closed"], "n00002"),
    ("gate-ref-to-discard", ["--type", "gate", "--text", "x", "--ref", "n00004", "--status", "open"], "n00004"),
    ("decision-ref-to-gate", ["--type", "decision", "--text", "x", "--ref", "n00001"], "n00001"),
    ("discard-ref-to-gate-update", ["--type", "discard", "--text", "x", "--ref", "n00003"], "n00003"),
    ("status-unknown", ["--type", "gate", "--text", "x", "--status", "closing"], "status"),
    ("status-capitalised", ["--type", "gate", "--text", "x", "--ref", "n00001", "--status", "Open"], "status"),
    ("status-empty", ["--type", "gate", "--text", "x", "--status", ""], "status"),
    ("new-gate-starts-closed", ["--type", "gate", "--text", "x", "--status", "closed"], "closed"),
]


@pytest.mark.parametrize("arguments, word", [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS])
def test_bad_links_are_refused_and_change_nothing(tmp_path, arguments, word):
    folder = tmp_path / "session"
    build_in_process(folder, REFUSAL_BASE)
    before = folder_digest(folder)

    result = run_notes("append", *arguments, folder=folder)

    assert_refused(result, 2, word)
    assert list(result.receipt) == ["ok", "error"]
    assert folder_digest(folder) == before


def test_ref_refusal_on_a_v0_session_leaves_its_log_untouched(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    log_before = (folder / "session_notes.jsonl").read_bytes()
    meta_before = (folder / "session_meta.json").read_bytes()

    # n00004 is a decision of the v0 session: a gate update cannot name it.
    result = run_notes("append", "--type", "gate", "--text", "x", "--ref", "n00004", "--status", "closed",
                       folder=folder)

    assert_refused(result, 2, "n00004")
    assert (folder / "session_notes.jsonl").read_bytes() == log_before
    assert (folder / "session_meta.json").read_bytes() == meta_before


# --------------------------------------------------------------------------
# Point 6: v0 receipts stay v0 with links in the log

def test_v0_receipts_keep_their_keys_with_links_present(session):
    receipt = append(session, "gate", "Channel is undecided.").receipt
    assert list(receipt) == ["ok", "command", "note_id", "seq", "path"]
    receipt = append(session, "gate", "Channel closed.", "--ref", "n00001", "--status", "closed").receipt
    assert list(receipt) == ["ok", "command", "note_id", "seq", "path"]
    append(session, "decision", "Email only.")
    append(session, "decision", "SMS first.", "--ref", "n00003", "--effect", "Needs a provider.")
    log_path = str(session / "session_notes.jsonl")

    summary = run_notes("summary", folder=session)
    assert summary.code == 0, summary
    session_id = read_records(session)[0]["session_id"]
    # Exactly v0: the update counts as a gate, the superseding note as a decision.
    assert summary.receipt == {
        "ok": True, "command": "summary", "session_id": session_id, "path": log_path, "total": 4,
        "by_type": {"artifact": 0, "decision": 2, "discard": 0, "gate": 2, "mode": 0, "shape": 0,
                    "source": 0, "tension": 0},
        "last_note_id": "n00004", "last_type": "decision"}
    assert list(summary.receipt) == ["ok", "command", "session_id", "path", "total", "by_type",
                                     "last_note_id", "last_type"]

    tail = run_notes("tail", "--limit", "2", folder=session)
    assert tail.code == 0, tail
    # v0's keys in v0's order; then (issue 19) the ids among the records that a later note superseded.
    assert list(tail.receipt) == ["ok", "command", "count", "path", "records", "superseded"]
    assert tail.receipt["records"] == read_records(session)[2:]
    assert tail.receipt["superseded"] == ["n00003"]

    exported = run_notes("export", folder=session)
    assert exported.code == 0, exported
    assert exported.receipt == {"ok": True, "command": "export", "record_count": 4,
                                "path": str(session / "session_export.json"),
                                "keep": {"file": str(session / "session_export.json"), "host": "local",
                                         "how": "Saved at this path on this computer."}}
    assert list(exported.receipt) == ["ok", "command", "record_count", "path", "keep"]


# --------------------------------------------------------------------------
# A small core on every interpreter found

def test_links_on_each_python(tmp_path, python):
    folder = tmp_path / "session"
    assert run_notes("init", folder=folder, python=python).code == 0
    for arguments in (["--type", "gate", "--text", "Host is undecided."],
                      ["--type", "gate", "--text", "Host deferred.", "--ref", "n00001", "--status", "deferred"],
                      ["--type", "decision", "--text", "Café first, 東京 later."],
                      ["--type", "decision", "--text", "東京 first.", "--ref", "n00003"]):
        result = run_notes("append", *arguments, folder=folder, python=python)
        assert result.code == 0, result
    refused = run_notes("append", "--type", "decision", "--text", "x", "--ref", "n00001",
                        folder=folder, python=python)
    assert_refused(refused, 2)

    records = read_records(folder)
    assert [(record.get("ref"), record.get("status")) for record in records] == [
        (None, None), ("n00001", "deferred"), (None, None), ("n00003", None)]
    assert all(record["checksum"] == independent_checksum(record) for record in records)
    assert run_notes("verify", folder=folder, python=python).code == 0


def test_a_link_into_a_folder_with_no_notes_says_the_folder_holds_none(tmp_path, capsys):
    # A sandbox reset mid-conversation: the model links to a note it remembers; the folder is empty.
    folder = tmp_path / "session"
    for options in (["--about", "n00009"], ["--ref", "n00009"]):
        code = notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Kept.",
                           "--provenance", "op", "--evidence", "declared"] + options)
        out, _ = capsys.readouterr()
        assert code == 2
        assert json.loads(out) == {"ok": False, "error": "%s n00009 names no note: this session folder holds no "
                                   "notes yet (a new session, or one whose files are gone); nothing was written"
                                   % options[0]}
        assert not folder.exists()
    notes.Session(folder).init()
    code = notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Kept.", "--about", "n00009"])
    assert code == 2 and "holds no notes yet" in json.loads(capsys.readouterr()[0])["error"]
    notes.Session(folder).append(type="decision", text="First.")
    code = notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Kept.", "--about", "n00009"])
    assert code == 2 and json.loads(capsys.readouterr()[0])["error"] == (
        "--about n00009 names no note in this session; check the id with tail or recap")
