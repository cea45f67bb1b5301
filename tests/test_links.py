"""Links between notes: --ref and --status, --about and --by, looking one note up, the gate and
supersede rules, and one set of checks for append, verify, the readers and restore."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from conftest import (NOTES, SESSION_ID, append, appended, assert_no_traceback, assert_refused, copy_fixture,
                      folder_digest, line_of, log_bytes, make_record, mcp_answers, notes, read_records, recap,
                      refused_unchanged, run_notes, session_id_of, v0_checksum, write_export, write_log,
                      run_here, write_session)


# ==========================================================================
# --ref and --status: how they are stored, what is refused

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


def test_a_link_into_a_folder_with_no_notes_says_there_is_no_session(tmp_path, capsys):
    # A sandbox reset mid-conversation: the model links to a note it remembers; the folder is empty.
    folder = tmp_path / "session"
    for options in (["--about", "n00009"], ["--ref", "n00009"]):
        code = notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Kept.",
                           "--provenance", "op", "--evidence", "declared"] + options)
        out, _ = capsys.readouterr()
        assert code == 2
        assert json.loads(out) == {"ok": False, "error": (
            "no session in %s (no session_meta.json there: none began, or its files are gone); start one with: "
            "python3 -S notes.py --dir %s init, or restore an uploaded export with: python3 -S notes.py --dir %s "
            "restore PATH; %s n00009 names no note; nothing was written" % ((folder,) * 3 + (options[0],)))}
        assert not folder.exists()
    with pytest.raises(notes.NotesError) as refused:  # a batch says it too
        notes.Session(folder).append(batch=[{"type": "decision", "text": "Kept.", "about": "n00009"}])
    assert str(refused.value) == (
        "no session in %s (no session_meta.json there: none began, or its files are gone); start one with: "
        "python3 -S notes.py --dir %s init, or restore an uploaded export with: python3 -S notes.py --dir %s "
        "restore PATH; --about n00009 names no note; nothing was written" % ((folder,) * 3))
    assert not folder.exists()
    notes.Session(folder).init()  # a session with no notes yet
    code = notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Kept.", "--about", "n00009"])
    assert code == 2 and json.loads(capsys.readouterr()[0])["error"] == (
        "--about n00009 names no note in this session; check the id with tail or recap")
    notes.Session(folder).append(type="decision", text="First.")
    code = notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Kept.", "--about", "n00009"])
    assert code == 2 and json.loads(capsys.readouterr()[0])["error"] == (
        "--about n00009 names no note in this session; check the id with tail or recap")


# ==========================================================================
# Links that mean one thing, looking one note up, no retry swallowing a state change

FULL_ORDER = ["id", "ts", "session_id", "seq", "type", "text", "effect", "ref", "status", "provenance", "evidence",
              "about", "by", "checksum"]
V0_TYPES = {"mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"}


# --------------------------------------------------------------------------
# Local helpers

# --------------------------------------------------------------------------
# 19.1: --about and --by, stored and checked

def test_by_on_an_update_that_leaves_the_gate_open_names_the_part_settled(tmp_path):
    # note-io: --by names, on an update, the note that settles the gate or the part it says is settled.
    folder = tmp_path / "session"
    api = notes.Session(folder)
    api.append(type="gate", text="Deposit rules are open.", provenance="op", evidence="declared")
    api.append(type="decision", text="Whole-house bookings pay 30%.", about="n00001", provenance="op",
               evidence="declared")

    receipt = api.append(type="gate", ref="n00001", status="open", by="n00002", provenance="op", evidence="declared",
                         text="Deposit: whole-house settled; single rooms still open.")

    assert receipt == {"ok": True, "command": "append", "note_id": "n00003", "seq": 3,
                       "path": str(folder / "session_notes.jsonl")}
    assert read_records(folder)[2]["by"] == "n00002"
    assert [(gate["id"], gate["status"], gate["update_id"]) for gate in api.recap()["open_gates"]] == [
        ("n00001", "open", "n00003")]
    assert api.verify()["problems"] == []


def test_about_and_by_are_stored_in_order_before_the_checksum_and_covered_by_it(session):
    appended(session, "gate", "Channel is undecided.", "--provenance", "op")
    appended(session, "decision", "Reminders go by email.", "--provenance", "op", "--evidence", "declared")
    appended(session, "tension", "Email may land in spam.", "--about", "n00002")
    appended(session, "gate", "Closed: email.", "--effect", "Spec can name the channel.", "--ref", "n00001",
           "--status", "closed", "--provenance", "op", "--evidence", "declared", "--about", "n00003",
           "--by", "n00002")

    records = read_records(session)
    assert records[2]["about"] == "n00002" and "by" not in records[2]
    assert list(records[3]) == FULL_ORDER
    assert (records[3]["about"], records[3]["by"]) == ("n00003", "n00002")
    for record in records:
        assert record["checksum"] == v0_checksum(record)
        # What v0 needs of every line: an object with its fields of its kinds.
        assert isinstance(record["seq"], int) and record["type"] in V0_TYPES and isinstance(record["text"], str)
    verified = run_notes("verify", folder=session)
    assert verified.code == 0 and verified.receipt["problems"] == [] and "warnings" not in verified.receipt


def test_about_does_not_supersede_both_stay_live(session):
    appended(session, "decision", "Reminders go by email.", "--provenance", "op")
    appended(session, "decision", "Send them the day before.", "--about", "n00001", "--provenance", "model")

    state = recap(session)
    assert [item["id"] for item in state["decisions"]] == ["n00001"]
    assert [item["id"] for item in state["unconfirmed"]] == ["n00002"]
    assert state["superseded_count"] == 0
    tail = run_notes("tail", folder=session)
    assert tail.code == 0 and "superseded" not in tail.receipt


def test_links_that_name_no_note_of_the_right_kind_are_refused(session):
    appended(session, "gate", "Channel is undecided.")
    appended(session, "decision", "Reminders go by email.")
    refused_unchanged(session, "append", "--type", "decision", "--text", "x", "--about", "n00009",
                      words=("--about n00009 names no note",))
    refused_unchanged(session, "append", "--type", "gate", "--text", "Closed.", "--ref", "n00001", "--status", "closed",
                      "--by", "n00009", words=("--by n00009 names no note",))
    refused_unchanged(session, "append", "--type", "gate", "--text", "Closed.", "--ref", "n00001", "--status", "closed",
                      "--by", "n00001", words=("--by n00001 is a gate",))
    # --by only on a gate update: not on a new gate, not on any other type.
    for arguments in (["--type", "gate", "--text", "New."], ["--type", "decision", "--text", "Done."]):
        refused_unchanged(session, "append", *arguments, "--by", "n00002", words=("--by", "gate update", "--about"))


def test_a_link_that_is_not_a_note_id_is_refused_without_echoing_it(session):
    appended(session, "decision", "Reminders go by email.")
    for flag in ("--about", "--by"):
        message = refused_unchanged(session, "append", "--type", "gate", "--text", "x", "--ref", "n00001", "--status",
                                    "open", flag, "AKIAIOSFODNN7SECRETX", words=(flag, "not a note id"))
        assert "AKIA" not in message


def test_superseding_an_operator_note_takes_an_op_or_shared_note(session):
    appended(session, "decision", "Reminders go by email.", "--provenance", "op")
    appended(session, "decision", "We agreed on weekly digests.", "--provenance", "shared")
    for target in ("n00001", "n00002"):
        for labels in ([], ["--provenance", "model"]):
            message = refused_unchanged(session, "append", "--type", "decision", "--text", "SMS instead.", "--ref", target,
                                        *labels, words=("--ref %s" % target, "--about %s" % target, "operator"))
            assert "nothing was written" in message
    appended(session, "decision", "SMS instead, the operator said.", "--ref", "n00001", "--provenance", "op")
    appended(session, "decision", "Monthly digests, agreed.", "--ref", "n00002", "--provenance", "shared")
    # A model's note supersedes a model's note, and one without labels, as before.
    appended(session, "decision", "Texts under 160 characters.", "--provenance", "model")
    appended(session, "decision", "Texts under 140 characters.", "--ref", "n00005")
    # A gate update supersedes nothing: an operator's gate is closed by whoever records it.
    appended(session, "gate", "Host is undecided.", "--provenance", "op")
    appended(session, "gate", "Host: local.", "--ref", "n00007", "--status", "closed", "--provenance", "model")
    assert run_notes("verify", folder=session).receipt["ok"] is True


def test_a_log_of_1_1_0_that_breaks_the_supersede_rule_verifies_with_a_warning(tmp_path):
    folder = tmp_path / "old"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    # What a 1.1.0 writer stored: a model's note superseding the operator's.
    write_log(folder, line_of(make_record(session_id, 1, text="Reminders go by email.", provenance="op"))
              + line_of(make_record(session_id, 2, text="SMS instead.", ref="n00001", provenance="model")))

    verified = run_notes("verify", folder=folder)
    assert verified.code == 0, verified
    assert verified.receipt["ok"] is True and verified.receipt["problems"] == []
    assert len(verified.receipt["warnings"]) == 1
    assert verified.receipt["warnings"][0].startswith("line 2 (n00002): the record supersedes (ref) a note "
                                                      "labelled op or shared")
    # Restore brings the export back, saying the same.
    assert run_notes("export", folder=folder).code == 0
    restored = run_notes("--dir", tmp_path / "back", "restore", folder / "session_export.json")
    assert restored.code == 0, restored
    assert restored.receipt["restored"] == 2 and restored.receipt["warnings"] == verified.receipt["warnings"]
    assert log_bytes(tmp_path / "back") == log_bytes(folder)


def test_the_supersede_notice_stands_beside_whatever_else_is_wrong_with_the_ref(tmp_path):
    folder = tmp_path / "damaged"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    # Seqs out of order: the operator's note comes first with seq 2, and a
    # model's note (seq 1) supersedes it.  Its ref names no earlier note, and it
    # still supersedes a note labelled op; a gate update is never held to that.
    write_log(folder, line_of(make_record(session_id, 2, text="Reminders go by email.", provenance="op"))
              + line_of(make_record(session_id, 1, text="SMS instead.", ref="n00002"))
              + line_of(make_record(session_id, 3, "gate", "Host?", provenance="op"))
              + line_of(make_record(session_id, 4, "gate", "Host: local.", ref="n00003", status="closed")))

    verified = run_notes("verify", folder=folder)
    assert verified.code == 3, verified
    assert [(entry["line"], entry["kind"]) for entry in verified.receipt["problems"]] == [
        (1, "seq_gap"), (2, "seq_repeated"), (2, "ref_target")]
    assert len(verified.receipt["warnings"]) == 1
    assert verified.receipt["warnings"][0].startswith("line 2 (n00001): the record supersedes (ref) a note "
                                                      "labelled op or shared")


def test_links_to_notes_far_past_a_gap_in_the_seqs_are_checked_as_any_others(tmp_path, capsys):
    # A damaged log jumps from seq 2 to 999,900,000: the gate and the operator's
    # note there are still known by their seqs when later notes link to them,
    # and the reader holds no more for the jump (256 MiB of address space do).
    folder = tmp_path / "gap"
    write_session(folder, [("decision", "Start.")])
    write_log(folder, log_bytes(folder) + b"".join(map(line_of, [
        make_record(SESSION_ID, 999900000, "gate", "Host?"),
        make_record(SESSION_ID, 999900001, text="Reminders by email.", provenance="op"),
        make_record(SESSION_ID, 999900002, text="Local host.", ref="n999900000"),
        make_record(SESSION_ID, 999900003, text="SMS instead.", ref="n999900001"),
        make_record(SESSION_ID, 999900004, "gate", "Host: local.", ref="n999900000", status="closed")])))

    code, receipt = run_here(capsys, folder, "verify")
    assert code == 3
    assert [(entry["line"], entry["kind"]) for entry in receipt["problems"]] == [(2, "seq_gap"), (4, "ref_target")]
    assert receipt["problems"][1]["detail"] == "the ref n999900000 names a gate, which changes only by gate updates"
    assert len(receipt["warnings"]) == 1
    assert receipt["warnings"][0].startswith("line 5 (n999900003): the record supersedes (ref) a note labelled op")
    limit = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (256 << 20,) * 2); "
             "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    limited = subprocess.run([sys.executable, "-S", "-c", limit, NOTES, "--dir", str(folder), "verify"],
                             capture_output=True, text=True)
    assert (limited.returncode, json.loads(limited.stdout)) == (3, receipt), limited.stderr


def test_seqs_stepping_far_apart_take_no_memory_for_the_gaps(tmp_path):
    # 60,000 gates 4,000 seqs apart: a byte a seq would be 240 MB; 256 MiB of address space hold the reader.
    folder = tmp_path / "steps"
    write_session(folder, [("decision", "Start.")])
    write_log(folder, log_bytes(folder) + b"".join(
        line_of(make_record(SESSION_ID, 4000 * step, "gate", "Host %d?" % step)) for step in range(1, 60001)))
    limit = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (256 << 20,) * 2); "
             "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    limited = subprocess.run([sys.executable, "-S", "-c", limit, NOTES, "--dir", str(folder), "verify"],
                             capture_output=True, text=True)
    receipt = json.loads(limited.stdout)
    assert (limited.returncode, receipt["total"], receipt["problems_not_listed"]) == (3, 60001, 59900), limited.stderr


def test_verify_and_restore_check_the_links_as_append_does(tmp_path):
    folder = tmp_path / "bad"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    records = [make_record(session_id, 1, "gate", "Channel is undecided."),
               make_record(session_id, 2, text="Email.", about="n00003"),          # names a later note
               make_record(session_id, 3, "gate", "Closed.", ref="n00001", status="closed", by="n00001"),  # a gate
               make_record(session_id, 4, text="Done.", by="n00002"),             # by on no gate update
               make_record(session_id, 5, text="Later.", about="N12")]            # not a note id
    write_log(folder, b"".join(map(line_of, records)))

    verified = run_notes("verify", folder=folder)
    assert verified.code == 3, verified
    found = [(entry["line"], entry["kind"]) for entry in verified.receipt["problems"]]
    assert found == [(2, "link_target"), (3, "link_target"), (4, "gate_rule"), (5, "bad_field")]
    details = [entry["detail"] for entry in verified.receipt["problems"]]
    assert details[0] == "the about n00003 names no earlier note"
    assert details[1].startswith("the by n00001 names a gate")
    assert details[2] == "the record has a by, which only a gate update has"
    assert "N12" not in details[3]

    export = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-03-14T10:00:00Z",
              "session": json.loads((folder / "session_meta.json").read_text()), "record_count": 5,
              "records": records}
    (tmp_path / "export.json").write_text(json.dumps(export))
    refused = run_notes("--dir", tmp_path / "back", "restore", tmp_path / "export.json")
    assert_refused(refused, 3, "damaged (4 problems)")
    assert [entry["kind"] for entry in refused.receipt["problems"]] == [
        "link_target", "link_target", "gate_rule", "bad_field"]
    assert not (tmp_path / "back").exists() or folder_digest(tmp_path / "back") == {}


def test_the_duplicate_window_compares_the_new_fields(session):
    appended(session, "decision", "Reminders go by email.")
    appended(session, "decision", "Send them the day before.")
    first = appended(session, "tension", "Spam filters.", "--about", "n00001")
    again = appended(session, "tension", "Spam filters.", "--about", "n00001")
    other = appended(session, "tension", "Spam filters.", "--about", "n00002")
    assert again["duplicate"] is True and again["note_id"] == first["note_id"]
    assert "duplicate" not in other and other["note_id"] == "n00004"


def test_mcp_append_takes_about_and_by_with_the_same_checks(tmp_path):
    folder, cli = tmp_path / "mcp", tmp_path / "cli"
    answers = mcp_answers(folder,
                          ("append", {"type": "gate", "text": "Channel is undecided."}),
                          ("append", {"type": "decision", "text": "Email.", "provenance": "op"}),
                          ("append", {"type": "gate", "text": "Closed.", "ref": "n00001", "status": "closed",
                                      "by": "n00002"}),
                          ("append", {"type": "decision", "text": "Send it early.", "about": "n00002"}),
                          ("append", {"type": "decision", "text": "SMS.", "ref": "n00002"}),
                          ("show", {"note_id": "n00001"}))
    properties = {tool["name"]: tool["inputSchema"] for tool in answers[0]["tools"]}
    assert {"about", "by"} <= set(properties["append"]["properties"])
    assert properties["show"]["required"] == ["note_id"] and "grep" in properties["tail"]["properties"]
    assert [answer["isError"] for answer in answers[1:]] == [False, False, False, False, True, False]
    records = read_records(folder)
    assert (records[2]["by"], records[3]["about"]) == ("n00002", "n00002")
    # The refusal is the CLI's, word for word, but for the tool's arguments named where it names flags.
    for note_type, text, extra in (("gate", "Channel is undecided.", []), ("decision", "Email.",
                                                                         ["--provenance", "op"])):
        appended(cli, note_type, text, *extra)
    refused = run_notes("append", "--type", "decision", "--text", "SMS.", "--ref", "n00002", folder=cli)
    in_tool_words = refused.receipt["error"]
    for flag in ("--ref", "--provenance", "--about"):
        in_tool_words = in_tool_words.replace(flag, flag[2:])
    assert "--" in refused.receipt["error"] and answers[5]["structuredContent"] == dict(refused.receipt,
                                                                                         error=in_tool_words)
    shown = answers[6]["structuredContent"]
    assert shown["record"] == records[0] and shown["updates"] == [records[2]]
    assert shown["settled_by"] == [records[1]] and shown["state"] == "closed"


def test_help_shows_each_new_option_with_an_example():
    append_help = " ".join(run_notes("append", "--help").stdout.split())  # help wraps its lines
    assert "--about NOTE_ID" in append_help and "--about n00004" in append_help
    assert "--by NOTE_ID" in append_help and "--by n00005" in append_help
    tail_help = " ".join(run_notes("tail", "--help").stdout.split())
    assert "--grep TEXT" in tail_help and "--grep 'email'" in tail_help
    show_help = run_notes("show", "--help").stdout
    assert "NOTE_ID" in show_help and "notes.py show n00003" in show_help
    assert "show" in run_notes("--help").stdout


# --------------------------------------------------------------------------
# 19.3: show NOTE_ID, tail --grep, tail's superseded

def show(folder, note_id) -> dict:
    result = run_notes("show", note_id, folder=folder)
    assert result.code == 0, result
    assert_no_traceback(result)
    return result.receipt


def test_show_gives_a_note_what_it_replaced_what_replaced_it_and_the_notes_about_it(session):
    appended(session, "decision", "Reminders go by email.")
    appended(session, "decision", "Reminders go by SMS.", "--ref", "n00001")
    appended(session, "tension", "SMS costs money.", "--about", "n00002")
    appended(session, "decision", "Reminders go by SMS, under 160 characters.", "--ref", "n00002")
    appended(session, "decision", "SMS and email both.", "--ref", "n00004")
    appended(session, "source", "Unrelated report.")
    records = read_records(session)
    before = folder_digest(session)

    receipt = show(session, "n00002")
    assert receipt == {"ok": True, "command": "show", "note_id": "n00002", "path": str(session / "session_notes.jsonl"),
                       "record": records[1], "state": "superseded", "replaces": [records[0]],
                       "replaced_by": [records[3], records[4]], "about": [records[2]]}
    assert show(session, "n00005")["replaces"] == [records[3], records[1], records[0]]
    live = show(session, "n00005")
    assert live["state"] == "live" and live["replaced_by"] == [] and live["about"] == []
    assert folder_digest(session) == before


def test_show_gives_a_gate_its_updates_and_the_notes_that_settled_them(session):
    appended(session, "gate", "Channel is undecided.")
    appended(session, "decision", "Email first.", "--provenance", "op")
    appended(session, "gate", "Closed: email.", "--ref", "n00001", "--status", "closed", "--by", "n00002")
    appended(session, "gate", "Reopened: cost.", "--ref", "n00001", "--status", "open")
    appended(session, "decision", "SMS after all.", "--provenance", "op")
    appended(session, "gate", "Closed: SMS.", "--ref", "n00004", "--status", "closed", "--by", "n00005")
    appended(session, "tension", "The channel keeps coming back.", "--about", "n00001")
    appended(session, "decision", "Cost is weighed per message.", "--about", "n00004")  # about an update
    appended(session, "decision", "SMS is sent from the office.", "--about", "n00005")  # about a settling note
    records = read_records(session)

    gate = show(session, "n00001")
    assert gate == {"ok": True, "command": "show", "note_id": "n00001", "path": str(session / "session_notes.jsonl"),
                    "record": records[0], "state": "closed", "updates": [records[2], records[3], records[5]],
                    "settled_by": [records[1], records[4]], "about": [records[6], records[7]]}
    # Shown by any of its notes, a gate is the same gate: its updates and the notes about it.
    update = show(session, "n00004")
    assert update["record"] == records[3] and update["gate"] == records[0]
    assert update["updates"] == gate["updates"] and update["state"] == "closed" and update["about"] == gate["about"]


def test_show_lists_no_update_of_a_gate_as_a_note_about_it(session):
    appended(session, "gate", "Channel is undecided.")
    appended(session, "gate", "Channel: deferred.", "--ref", "n00001", "--status", "deferred")
    appended(session, "gate", "Channel: open again.", "--ref", "n00002", "--status", "open", "--about", "n00001")
    records = read_records(session)
    gate = show(session, "n00001")
    assert gate["updates"] == [records[1], records[2]] and gate["about"] == []
    assert show(session, "n00003")["about"] == []


def test_show_refuses_an_id_it_cannot_find_without_echoing_a_value(session):
    appended(session, "decision", "Reminders go by email.")
    before = folder_digest(session)
    message = assert_refused(run_notes("show", "AKIAIOSFODNN7SECRETX", folder=session), 2, "note id such as n00012")
    assert "AKIA" not in message
    assert_refused(run_notes("show", "n00009", folder=session), 2, "no note n00009")
    assert_refused(run_notes("show", "n00001", folder=session.parent / "none"), 2)
    assert folder_digest(session) == before


def test_show_holds_only_the_chain_and_counts_what_it_leaves_out(tmp_path):
    folder = tmp_path / "long"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    records = [make_record(session_id, 1, "gate", "Channel is undecided.")]
    for seq in range(2, 62):
        records.append(make_record(session_id, seq, "gate", "Update %d." % seq, ref="n00001",
                                   status="open" if seq % 2 else "deferred"))
    records.append(make_record(session_id, 62, text="Unrelated."))
    write_log(folder, b"".join(map(line_of, records)))

    receipt = show(folder, "n00001")
    assert receipt["updates"] == records[11:61] and receipt["not_listed"] == {"updates": 10}
    assert receipt["state"] == "open"  # seq 61's status


def test_tail_grep_matches_text_and_effect_whatever_the_case(session):
    appended(session, "decision", "Reminders go by EMAIL.")
    appended(session, "gate", "Channel is undecided.", "--effect", "Blocks the e-mail section and the Email copy.")
    appended(session, "source", "Clinic report.")
    appended(session, "decision", "Texts are short.", "--effect", "fits an email preview")
    records = read_records(session)

    result = run_notes("tail", "--grep", "eMail", "--limit", "10", folder=session)
    assert result.code == 0, result
    assert result.receipt == {"ok": True, "command": "tail", "count": 3, "path": str(session / "session_notes.jsonl"),
                              "records": [records[0], records[1], records[3]]}
    latest = run_notes("tail", "--grep", "email", "--limit", "1", "--type", "gate", folder=session)
    assert latest.receipt["records"] == [records[1]]
    none = run_notes("tail", "--grep", "fax", folder=session)
    assert none.code == 0 and none.receipt["count"] == 0 and none.receipt["records"] == []
    assert_refused(run_notes("tail", "--grep", "  ", folder=session), 2, "--grep is empty")


def test_tail_grep_reads_back_only_until_it_has_its_matches(tmp_path):
    folder = tmp_path / "s"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    lines = [b"not json at all\n"] + [line_of(make_record(session_id, seq, text="Match %d." % seq))
                                      for seq in range(2, 6)]
    write_log(folder, b"".join(lines))
    near = run_notes("tail", "--grep", "match", "--limit", "2", folder=folder)
    assert near.code == 0 and [record["seq"] for record in near.receipt["records"]] == [4, 5]
    assert "warnings" not in near.receipt  # the damaged first line was never reached
    far = run_notes("tail", "--grep", "match", "--limit", "9", folder=folder)
    assert far.code == 0 and len(far.receipt["records"]) == 4 and len(far.receipt["warnings"]) == 1


def test_tail_names_its_superseded_records_and_keeps_them_as_the_log_holds_them(session):
    appended(session, "decision", "Use SMS.")
    appended(session, "gate", "Channel is undecided.")
    appended(session, "gate", "Closed.", "--ref", "n00002", "--status", "closed")
    appended(session, "decision", "Use email instead.", "--ref", "n00001")
    records = read_records(session)

    # The superseding note is filtered out, and still counts; a gate update supersedes nothing.
    result = run_notes("tail", "--limit", "10", "--type", "decision", "--type", "gate", folder=session)
    assert result.receipt["records"] == records and result.receipt["superseded"] == ["n00001"]
    only_gates = run_notes("tail", "--type", "gate", folder=session)
    assert only_gates.receipt["records"] == records[1:3] and "superseded" not in only_gates.receipt
    first = run_notes("tail", "--grep", "sms", folder=session)
    assert first.receipt["records"] == [records[0]] and first.receipt["superseded"] == ["n00001"]


def test_mcp_tail_takes_grep(tmp_path):
    folder = tmp_path / "mcp"
    answers = mcp_answers(folder, ("append", {"type": "decision", "text": "Use SMS."}),
                          ("append", {"type": "decision", "text": "Use email.", "ref": "n00001"}),
                          ("tail", {"grep": "SMS"}), ("show", {"note_id": "-n00001"}))
    records = read_records(folder)
    assert answers[3]["structuredContent"]["records"] == [records[0]]
    assert answers[3]["structuredContent"]["superseded"] == ["n00001"]
    assert answers[4]["isError"] is True and "note id such as" in answers[4]["structuredContent"]["error"]


# --------------------------------------------------------------------------
# 20.1: a repeat after a later note undid it is a new note, not a duplicate

def test_a_gate_closed_reopened_and_closed_again_with_the_same_text_ends_closed(session):
    appended(session, "gate", "Channel is undecided.")
    closing = ["--ref", "n00001", "--status", "closed"]
    appended(session, "gate", "Closed: email.", *closing)
    appended(session, "gate", "Reopened: cost.", "--ref", "n00001", "--status", "open")

    again = appended(session, "gate", "Closed: email.", *closing)
    assert "duplicate" not in again and again["note_id"] == "n00004"
    assert len(read_records(session)) == 4
    state = recap(session)
    assert state["open_gates"] == [] and [gate["update_id"] for gate in state["closed_gates"]] == ["n00004"]
    # An immediate retry of that closing is still answered with it.
    retry = appended(session, "gate", "Closed: email.", *closing)
    assert retry["duplicate"] is True and retry["note_id"] == "n00004"


def test_a_decision_reverted_to_its_earlier_wording_is_live_again(session):
    appended(session, "decision", "Use SMS.")
    appended(session, "decision", "Use email instead.", "--ref", "n00001")

    again = appended(session, "decision", "Use SMS.")
    assert "duplicate" not in again and again["note_id"] == "n00003"
    # The SMS decision is live again (as the new note); the email one too, since nothing superseded it.
    assert [item["id"] for item in recap(session)["decisions"]] == ["n00002", "n00003"]
    assert appended(session, "decision", "Use SMS.")["duplicate"] is True


def test_another_gates_update_does_not_stop_a_retry_being_a_duplicate(session):
    appended(session, "gate", "Channel is undecided.")
    appended(session, "gate", "Host is undecided.")
    appended(session, "gate", "Closed: email.", "--ref", "n00001", "--status", "closed")
    appended(session, "gate", "Host: local.", "--ref", "n00002", "--status", "closed")
    retry = appended(session, "gate", "Closed: email.", "--ref", "n00001", "--status", "closed")
    assert retry["duplicate"] is True and retry["note_id"] == "n00003"
    # An update naming an update of the same gate (outside or inside the window) is the same gate.
    appended(session, "gate", "Reopened.", "--ref", "n00003", "--status", "open")
    again = appended(session, "gate", "Closed: email.", "--ref", "n00001", "--status", "closed")
    assert "duplicate" not in again and again["note_id"] == "n00006"


def test_an_id_far_too_long_is_refused_and_never_echoed(session):
    appended(session, "decision", "Reminders go by email.")
    long_id = "n" + "7" * 5000
    for arguments in (["append", "--type", "decision", "--text", "x", "--about", long_id],
                      ["append", "--type", "gate", "--text", "x", "--ref", "n00001", "--status", "open", "--by",
                       long_id], ["show", long_id]):
        result = run_notes(*arguments, folder=session)
        assert "7777777" not in assert_refused(result, 2, "note id"), arguments
    session_id = session_id_of(session)
    write_log(session, log_bytes(session) + line_of(make_record(session_id, 2, text="Later.", about=long_id)))
    verified = run_notes("verify", folder=session)
    assert verified.code == 3 and "7777777" not in verified.stdout
    # No note id is that long: the field's form is wrong before its target is looked for.
    assert verified.receipt["problems"][0]["kind"] == "bad_field"


# ==========================================================================
# One set of checks: what append refuses of the gate and ref rules, verify reports and restore refuses

# Each rule append enforces for gates and refs, after a gate n00001 and a decision n00002:
# (the append arguments, the third record's fields, the problem kind verify reports, a
# phrase of its detail).
RULES = {
    "status on a decision": (["--type", "decision", "--text", "Kept.", "--status", "open"],
                             {"note_type": "decision", "status": "open"}, "gate_rule", "only a gate"),
    "gate update without status": (["--type", "gate", "--text", "Moved.", "--ref", "n00001"],
                                   {"note_type": "gate", "ref": "n00001"}, "gate_rule", "no status"),
    "new gate closed": (["--type", "gate", "--text", "Done.", "--status", "closed"],
                        {"note_type": "gate", "status": "closed"}, "gate_rule", "starts closed"),
    "decision naming a gate": (["--type", "decision", "--text", "Kept.", "--ref", "n00001"],
                               {"note_type": "decision", "ref": "n00001"}, "ref_target", "names a gate"),
    "gate update naming a decision": (["--type", "gate", "--text", "Done.", "--ref", "n00002", "--status", "closed"],
                                      {"note_type": "gate", "ref": "n00002", "status": "closed"},
                                      "ref_target", "not a gate"),
    "ref to no earlier note": (["--type", "decision", "--text", "Kept.", "--ref", "n00009"],
                               {"note_type": "decision", "ref": "n00009"}, "ref_target", "names no earlier note"),
    # The links of issue 19: --by only on a gate update, naming an earlier note that is not a gate;
    # --about naming an earlier note.
    "by on a decision": (["--type", "decision", "--text", "Kept.", "--by", "n00002"],
                         {"note_type": "decision", "by": "n00002"}, "gate_rule", "only a gate update"),
    "by naming a gate": (["--type", "gate", "--text", "Done.", "--ref", "n00001", "--status", "closed", "--by",
                          "n00001"], {"note_type": "gate", "ref": "n00001", "status": "closed", "by": "n00001"},
                         "link_target", "names a gate"),
    "by to no earlier note": (["--type", "gate", "--text", "Done.", "--ref", "n00001", "--status", "closed",
                               "--by", "n00009"],
                              {"note_type": "gate", "ref": "n00001", "status": "closed", "by": "n00009"},
                              "link_target", "names no earlier note"),
    "about to no earlier note": (["--type", "decision", "--text", "Kept.", "--about", "n00009"],
                                 {"note_type": "decision", "about": "n00009"}, "link_target",
                                 "names no earlier note"),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_what_append_refuses_verify_reports_readers_read_and_restore_refuses(tmp_path, rule):
    arguments, fields, kind, detail = RULES[rule]
    gate = make_record(SESSION_ID, 1, "gate", text="Host runtime is open.")
    second = make_record(SESSION_ID, 2, text="Plain decision.")
    third = make_record(SESSION_ID, 3, text="Broken rule.", **fields)
    folder = tmp_path / "session"
    write_session(folder, [gate, second])
    refused = run_notes("append", *arguments, folder=folder)
    assert refused.code == 2 and refused.receipt["ok"] is False, refused
    assert log_bytes(folder) == line_of(gate) + line_of(second)

    write_session(folder, [gate, second, third])
    verified = run_notes("verify", folder=folder)
    assert_no_traceback(verified)
    assert verified.code == 3, verified
    [entry] = verified.receipt["problems"]
    assert (entry["line"], entry["id"], entry["kind"]) == (3, "n00003", kind) and detail in entry["detail"], entry
    tail = run_notes("tail", folder=folder)
    assert tail.code == 0 and [record["id"] for record in tail.receipt["records"]] == ["n00001", "n00002", "n00003"]
    summary = run_notes("summary", folder=folder)
    assert summary.code == 0 and summary.receipt["total"] == 3 and summary.receipt["warnings"], summary

    export = tmp_path / "export.json"
    write_export(export, [gate, second, third])
    target = tmp_path / "restored"
    restored = run_notes("restore", export, folder=target)
    assert restored.code == 3 and [entry["kind"] for entry in restored.receipt["problems"]] == [kind], restored
    assert not target.exists() or not list(target.iterdir())
    damaged = run_notes("restore", "--accept-damaged", export, folder=target)
    assert damaged.code == 0, damaged
    assert log_bytes(target) == line_of(gate) + line_of(second) + line_of(third)
