"""Reading the session back: recap (its lists, pending work, size budget and markdown form), tail
(filtered, compact, --grep), show and summary."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import (LOG, NOTES, REPO, SESSION_ID, append, assert_no_traceback, assert_refused, copy_fixture,
                      folder_digest, line_of, notes, read_records, recap, recap_text, run_notes, scannable,
                      signal_record, v0_checksum, write_session, write_signals)


# ==========================================================================
# recap and the filtered tail

RECAP_KEYS = ["ok", "command", "session_id", "path", "total", "mode", "shape", "open_gates", "deferred_gates",
              "unconfirmed", "closed_gates", "decisions", "discards", "tensions", "sources", "artifacts",
              "superseded_count", "export_lag", "pending"]

# --------------------------------------------------------------------------
# Local helpers

def recap_of(folder, *extra) -> dict:
    result = run_notes("recap", *extra, folder=folder)
    assert result.code == 0, result
    assert_no_traceback(result)
    return result.receipt


# --------------------------------------------------------------------------
# The scenario: a realistic shaping session through the real CLI

# (type, text, extra arguments).  The comments give the seq each signal gets.
SHAPING_SESSION = [
    ("mode", "READING_ALIGNMENT: the operator wants appointment reminders for a small dental clinic.", []),  # 1
    ("source", "The booking tool's nightly CSV export is the source of truth for appointments.", []),  # 2
    ("gate", "Delivery channel is undecided: SMS, email or WhatsApp.",
     ["--effect", "Message templates wait for the channel."]),  # 3
    ("gate", "Hosting is undecided: the reception PC or a small cloud VM.", []),  # 4
    ("mode", "SHAPING: the operator confirmed the problem statement.", []),  # 5
    ("shape", "A nightly job reads the CSV and sends reminders 48 hours ahead.", []),  # 6
    ("discard", "WhatsApp Business API ruled out for the pilot: approval takes weeks.", []),  # 7
    ("decision", "Reminders go out by email only.", []),  # 8
    ("gate", "Channel closed: email for the pilot.", ["--ref", "n00003", "--status", "closed"]),  # 9
    ("tension", "Patients rarely read email, and the clinic needs fewer no-shows.",
     ["--effect", "Measure the no-show rate during the pilot."]),  # 10
    ("gate", "Reminders in Spanish as well as English?", []),  # 11
    ("gate", "Spanish reminders deferred until after the pilot.", ["--ref", "n00011", "--status", "deferred"]),  # 12
    ("gate", "Hosting deferred: the operator asks the clinic's IT contact.",
     ["--ref", "n00004", "--status", "deferred"]),  # 13
    ("decision", "Reminders go out by SMS, by email only when no phone number is on file.",
     ["--ref", "n00008", "--effect", "The clinic needs an SMS provider account."]),  # 14
    ("decision", "WhatsApp comes back as an opt-in second channel once approved.", ["--ref", "n00007"]),  # 15
    ("shape", "A nightly job reads the CSV, sends SMS 48 hours ahead and logs delivery.", []),  # 16
    ("source", "Operator's estimate: about 400 appointments a month.", []),  # 17
    ("source", "The clinic's booking report: 650 appointments a month.", ["--ref", "n00017"]),  # 18
    ("artifact", "The deliverable is a runbook plus one Python script; no patient data in the repository.", []),  # 19
    ("gate", "Hosting reopened: the IT contact has no budget for a VM.", ["--ref", "n00013", "--status", "open"]),  # 20
    ("tension", "SMS cost grows with volume against a fixed monthly budget.", []),  # 21
    ("gate", "Patient consent for SMS: is the intake form enough?",
     ["--status", "open", "--effect", "No SMS is sent before consent is confirmed."]),  # 22
    ("gate", "Online payment links in reminders.", ["--status", "deferred"]),  # 23
    ("decision", "Reminder text stays under 160 characters.", []),  # 24
    ("artifact", "Discarded channels and pricing notes stay out of the runbook.", []),  # 25
    ("discard", "A patient-facing mobile app ruled out: no budget for app stores.", []),  # 26
    ("decision", "Reminders go out by SMS; the email fallback is dropped.", ["--ref", "n00014"]),  # 27
    ("mode", "SYNTHESIS approved by the operator for the runbook draft.",
     ["--effect", "Write the runbook next."]),  # 28
]


def test_recap_of_a_realistic_shaping_session_is_exact(tmp_path):
    folder = tmp_path / "clinic"
    started = run_notes("init", folder=folder)
    assert started.code == 0, started
    for seq, (note_type, text, extra) in enumerate(SHAPING_SESSION, 1):
        result = run_notes("append", "--type", note_type, "--text", text, *extra, folder=folder)
        assert result.code == 0, (seq, result)
        assert result.receipt["note_id"] == "n%05d" % seq

    result = run_notes("recap", folder=folder)

    assert result.code == 0, result
    assert_no_traceback(result)
    receipt = result.receipt
    assert receipt["session_id"] == started.receipt["session_id"]
    assert receipt["path"] == str(folder / "session_notes.jsonl")
    receipt["session_id"] = receipt["path"] = "normalised"
    assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery"]
    assert receipt == {
        "ok": True,
        "command": "recap",
        "session_id": "normalised",
        "path": "normalised",
        "total": 28,
        "mode": {"id": "n00028", "text": "SYNTHESIS approved by the operator for the runbook draft.",
                 "effect": "Write the runbook next."},
        "shape": {"id": "n00016", "text": "A nightly job reads the CSV, sends SMS 48 hours ahead and logs delivery."},
        "open_gates": [
            # Deferred by n00013, then reopened by an update of that update.
            {"id": "n00004", "text": "Hosting is undecided: the reception PC or a small cloud VM.", "status": "open",
             "update_id": "n00020", "update_text": "Hosting reopened: the IT contact has no budget for a VM."},
            {"id": "n00022", "text": "Patient consent for SMS: is the intake form enough?", "status": "open",
             "effect": "No SMS is sent before consent is confirmed."},
        ],
        "deferred_gates": [
            {"id": "n00011", "text": "Reminders in Spanish as well as English?", "status": "deferred",
             "update_id": "n00012", "update_text": "Spanish reminders deferred until after the pilot."},
            {"id": "n00023", "text": "Online payment links in reminders.", "status": "deferred"},
        ],
        "unconfirmed": [],
        # A closed gate with what closed it: here the update itself, which names no other note (--by).
        "closed_gates": [
            {"id": "n00003", "text": "Delivery channel is undecided: SMS, email or WhatsApp.",
             "update_id": "n00009",
             "closed_by": {"id": "n00009", "type": "gate", "text": "Channel closed: email for the pilot."}},
        ],
        # n00008 and n00014 were superseded; n00015 brought the discarded WhatsApp path back.
        "decisions": [
            {"id": "n00015", "text": "WhatsApp comes back as an opt-in second channel once approved.",
             "replaces": "n00007"},
            {"id": "n00024", "text": "Reminder text stays under 160 characters."},
            {"id": "n00027", "text": "Reminders go out by SMS; the email fallback is dropped.", "replaces": "n00014"},
        ],
        # The WhatsApp path n00007 was taken up again by n00015: it stays listed, as reopened.
        "discards": [
            {"id": "n00007", "text": "WhatsApp Business API ruled out for the pilot: approval takes weeks.",
             "reopened": {"id": "n00015", "type": "decision",
                          "text": "WhatsApp comes back as an opt-in second channel once approved."}},
            {"id": "n00026", "text": "A patient-facing mobile app ruled out: no budget for app stores."},
        ],
        "tensions": [
            {"id": "n00010", "text": "Patients rarely read email, and the clinic needs fewer no-shows.",
             "effect": "Measure the no-show rate during the pilot."},
            {"id": "n00021", "text": "SMS cost grows with volume against a fixed monthly budget."},
        ],
        "sources": [
            {"id": "n00002", "text": "The booking tool's nightly CSV export is the source of truth for appointments."},
            {"id": "n00018", "text": "The clinic's booking report: 650 appointments a month.", "replaces": "n00017"},
        ],
        "artifacts": [
            {"id": "n00019",
             "text": "The deliverable is a runbook plus one Python script; no patient data in the repository."},
            {"id": "n00025", "text": "Discarded channels and pricing notes stay out of the runbook."},
        ],
        "superseded_count": 4,
        "export_lag": {"path": str(folder / "session_export.json"), "record_count": None, "missing": 28},
        # n00004 was set open again by n00020, n00022 opened later.
        "pending": {"open_gates": 2, "unconfirmed": 0, "raised_since": "n00004"},
        # Synthesis began at n00028; no artifact note came after it, so nothing was delivered yet.
        "synthesis": {"state": "entered", "entered": "n00028"},
        "delivery": None,
    }
    # Reading never writes: a second recap answers the same from the same bytes.
    before = folder_digest(folder)
    again = run_notes("recap", folder=folder)
    assert folder_digest(folder) == before
    assert again.stdout == result.stdout


def test_recap_of_the_v0_session_is_exact(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    before = folder_digest(folder)

    receipt = recap_of(folder)

    assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery"]
    assert receipt == {
        "ok": True, "command": "recap", "session_id": "0f3c2b1c-3c66-49ee-8557-e323c0678aaf",
        "path": str(folder / "session_notes.jsonl"), "total": 11,
        "mode": {"id": "n00011", "text": "SYNTHESIS approved by OP.", "effect": "Produce the artifact next."},
        "shape": {"id": "n00002", "text": "Candidate form: a protocol plus a tiny persistence helper."},
        "open_gates": [
            {"id": "n00003", "text": "Persistence model is undecided.", "status": "open",
             "effect": "Do not finalize the artifact until this is resolved."},
            {"id": "n00010", "text": "Line one of a multi-line gate.\nLine two, with a tab:\there.", "status": "open"},
        ],
        "deferred_gates": [],
        "unconfirmed": [],
        "closed_gates": [],
        "decisions": [
            {"id": "n00004", "text": "Persistence is an append-only JSONL log owned by Python."},
            {"id": "n00009",
             "text": "Unicode is kept as is: café, 東京, emoji 🧩, quotes \"x\" and a back\\slash."},
        ],
        "discards": [{"id": "n00005", "text": "A vector database was ruled out: too heavy for a sandbox."}],
        "tensions": [{"id": "n00006",
                      "text": "Auditability pulls toward verbose records; minimal signals pull the other way.",
                      "effect": "Keep records small; audit via export."}],
        "sources": [{"id": "n00007",
                     "text": "protocol.md is the source of truth for behaviour; note-io.md for I/O."}],
        "artifacts": [{"id": "n00008", "text": "The final artifact excludes raw notes and discarded paths."}],
        "superseded_count": 0,
        # The fixture's own export holds all 11 notes.
        "export_lag": {"path": str(folder / "session_export.json"), "record_count": 11, "missing": 0},
        "pending": {"open_gates": 2, "unconfirmed": 0, "raised_since": "n00003"},
        # n00011 entered synthesis; the artifact note n00008 came before it, so it is no delivery.
        "synthesis": {"state": "entered", "entered": "n00011"},
        "delivery": None,
    }
    assert folder_digest(folder) == before


def test_recap_help_says_what_unconfirmed_means(tmp_path, capsys):
    # A note labelled op but inferred is listed as unconfirmed too: the help names both labels.
    assert notes.main(["--dir", str(tmp_path / "untouched"), "recap", "--help"]) == 0
    assert "unconfirmed notes (labelled model or inferred; no mode, tension or delivery)" in " ".join(
        capsys.readouterr().out.split())
    assert not (tmp_path / "untouched").exists()


def test_recap_rows_name_the_note_each_is_about(session):
    # After a restore the model knows a proposal's gate only from recap, and its leftover goes --about that gate.
    api = notes.Session(session)
    api.append(type="gate", text="How often the backup runs is open.", provenance="model", evidence="inferred")
    api.append(type="decision", text="The backup runs daily.", about="n00001", provenance="model", evidence="inferred")
    api.append(type="discard", text="A weekly run ruled out.", about="n00001", provenance="op", evidence="declared")
    api.append(type="decision", text="Old versions are kept 90 days.", provenance="op", evidence="declared")

    receipt = api.recap()

    assert receipt["unconfirmed"] == [{"id": "n00002", "type": "decision", "text": "The backup runs daily.",
                                       "about": "n00001", "provenance": "model", "evidence": "inferred"}]
    assert receipt["discards"] == [{"id": "n00003", "text": "A weekly run ruled out.", "about": "n00001",
                                    "provenance": "op", "evidence": "declared"}]
    assert receipt["decisions"] == [{"id": "n00004", "text": "Old versions are kept 90 days.", "provenance": "op",
                                     "evidence": "declared"}]


def test_recap_of_an_empty_session(session):
    session_id = json.loads((session / "session_meta.json").read_text(encoding="utf-8"))["session_id"]

    receipt = recap_of(session)

    assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery"]
    assert receipt == {
        "ok": True, "command": "recap", "session_id": session_id, "path": str(session / "session_notes.jsonl"),
        "total": 0, "mode": None, "shape": None, "open_gates": [], "deferred_gates": [], "unconfirmed": [],
        "closed_gates": [], "decisions": [], "discards": [], "tensions": [], "sources": [], "artifacts": [],
        "superseded_count": 0,
        "export_lag": {"path": str(session / "session_export.json"), "record_count": None, "missing": 0},
        "pending": {"open_gates": 0, "unconfirmed": 0}, "synthesis": None, "delivery": None}


def test_recap_without_a_session_creates_nothing(tmp_path):
    missing = tmp_path / "nothing-here"
    assert_refused(run_notes("recap", folder=missing), 2, "init")
    assert not missing.exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert_refused(run_notes("recap", folder=empty), 2, "init")
    assert folder_digest(empty) == {}


# --------------------------------------------------------------------------
# --limit per list and the truncated map

# n00001-n00004 open gates, n00005-n00006 deferred from the start,
# n00007-n00011 decisions, n00012-n00014 discards, n00015 a tension,
# n00016 a decision that supersedes n00007.
LIMIT_SESSION = (
    [("gate", "Open gate %d." % number) for number in range(1, 5)]
    + [("gate", "Deferred gate %d." % number, {"status": "deferred"}) for number in range(1, 3)]
    + [("decision", "Decision %d." % number) for number in range(1, 6)]
    + [("discard", "Discard %d." % number) for number in range(1, 4)]
    + [("tension", "Tension 1.")]
    + [("decision", "Decision 1, revised.", {"ref": "n00007"})]
)


@pytest.mark.parametrize("limit, decisions, open_gates, truncated", [
    # The superseded n00007 is neither listed nor counted as cut.
    (3, ["n00010", "n00011", "n00016"], ["n00002", "n00003", "n00004"], {"decisions": 2, "open_gates": 1}),
    (4, ["n00009", "n00010", "n00011", "n00016"], ["n00001", "n00002", "n00003", "n00004"], {"decisions": 1}),
    (5, ["n00008", "n00009", "n00010", "n00011", "n00016"], ["n00001", "n00002", "n00003", "n00004"], None),
    (None, ["n00008", "n00009", "n00010", "n00011", "n00016"], ["n00001", "n00002", "n00003", "n00004"], None),
])
def test_limit_keeps_the_newest_per_list_and_reports_what_was_cut(tmp_path, limit, decisions, open_gates,
                                                                   truncated):
    folder = tmp_path / "session"
    write_session(folder, LIMIT_SESSION)

    receipt = recap_of(folder, *(["--limit", str(limit)] if limit else []))

    assert [item["id"] for item in receipt["decisions"]] == decisions
    assert [item["id"] for item in receipt["open_gates"]] == open_gates
    assert [item["id"] for item in receipt["deferred_gates"]] == ["n00005", "n00006"]
    assert [item["id"] for item in receipt["discards"]] == ["n00012", "n00013", "n00014"]
    assert [item["id"] for item in receipt["tensions"]] == ["n00015"]
    assert receipt["superseded_count"] == 1
    # pending counts every open gate, also those the limit left out of the list.
    assert receipt["pending"]["open_gates"] == 4 and receipt["pending"]["unconfirmed"] == 0
    if truncated is None:
        assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery"]
    else:
        assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery", "truncated", "see_truncated"]
        assert receipt["truncated"] == truncated


def test_default_limit_is_twenty_per_list(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("decision", "Decision %d." % number) for number in range(1, 23)]
                  + [("discard", "Discard %d." % number) for number in range(1, 21)])

    receipt = recap_of(folder)

    assert [item["id"] for item in receipt["decisions"]] == ["n%05d" % seq for seq in range(3, 23)]
    assert len(receipt["discards"]) == 20
    assert receipt["truncated"] == {"decisions": 2}


@pytest.mark.parametrize("limit", ["0", "-1", "abc", "2.5"])
def test_bad_recap_limit_is_refused(session, limit):
    before = folder_digest(session)
    assert_refused(run_notes("recap", "--limit", limit, folder=session), 2)
    assert folder_digest(session) == before


# --------------------------------------------------------------------------
# warnings only when the log has problems

@pytest.mark.parametrize("fixture, words", [("tampered", ["n00004", "checksum"]), ("torn", ["cut off"])])
def test_recap_warns_about_a_damaged_log_and_still_answers(tmp_path, fixture, words):
    folder = copy_fixture(fixture, tmp_path / fixture)
    before = folder_digest(folder)

    receipt = recap_of(folder)

    # The fixtures are the v0 session's log: its open gates are pending, n00011 entered synthesis.
    assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery", "warnings"]
    assert receipt["warnings"] and all(isinstance(message, str) for message in receipt["warnings"])
    joined = " ".join(receipt["warnings"])
    for word in words:
        assert word in joined
    assert receipt["total"] >= 10
    assert folder_digest(folder) == before


def test_recap_of_a_healthy_log_has_no_warnings_key(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, LIMIT_SESSION)
    assert "warnings" not in recap_of(folder)


# --------------------------------------------------------------------------
# recap --format md

MARKDOWN_SESSION = [
    ("mode", "SHAPING entered."),
    ("shape", "A CLI plus two contracts.", {"effect": "No server."}),
    ("gate", "Host runtime is undecided.", {"effect": "Blocks the install section."}),
    ("gate", "Host runtime deferred to the operator.", {"ref": "n00003", "status": "deferred"}),
    ("gate", "Licence is undecided."),
    ("decision", "The log is JSONL.", {"effect": "Append-only."}),
    ("decision", "The log is JSONL with checksums.", {"ref": "n00006"}),
    ("discard", "A SQLite store was ruled out:\nit needs more than one file."),
    ("tension", "Verbose records against minimal signals."),
    ("source", "protocol.md is the source of truth."),
    ("artifact", "The artifact excludes raw notes."),
]


def test_recap_markdown_has_headings_and_one_line_per_item(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, MARKDOWN_SESSION)
    state = recap_of(folder)

    result = run_notes("recap", "--format", "md", folder=folder)

    assert result.code == 0, result
    assert_no_traceback(result)
    assert result.receipt is None, "markdown, not JSON"
    lines = result.stdout.splitlines()
    headings = [line.lstrip("#").strip().lower() for line in lines if line.startswith("#")]
    for section in ("mode", "shape", "open gates", "deferred gates", "decisions", "discard", "tension",
                    "source", "artifact"):
        assert any(section in heading for heading in headings), (section, headings)
    assert SESSION_ID not in result.stdout, "the markdown recap is for the operator: no session id"

    items = [state["mode"], state["shape"]] + [item for key in ("open_gates", "deferred_gates", "decisions",
                                                                  "discards", "tensions", "sources", "artifacts")
                                               for item in state[key]]
    assert len(items) == 9
    for item in items:
        # One line names the item and carries its whole text (on one line) and its effect.
        text = " ".join(item["text"].split("\n"))
        matching = [line for line in lines if item["id"] in line and text in line]
        assert len(matching) == 1, (item, matching)
        if "effect" in item:
            assert item["effect"] in matching[0]
    deferred_line = next(line for line in lines if "n00003" in line)
    assert "deferred" in deferred_line
    # Superseded notes and gate updates are not items of their own.
    assert not any(line.lstrip("- ").startswith("n00006") for line in lines)
    assert not any(line.lstrip("- ").startswith("n00004") for line in lines)


def test_recap_markdown_shows_only_what_the_limit_keeps(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, LIMIT_SESSION)

    result = run_notes("recap", "--format", "md", "--limit", "2", folder=folder)

    assert result.code == 0, result
    for kept in ("n00011", "n00016", "n00003", "n00004"):
        assert kept in result.stdout
    for cut in ("n00008", "n00009", "n00010", "n00001", "n00002"):
        assert cut not in result.stdout


def test_recap_markdown_of_an_empty_session(session):
    result = run_notes("recap", "--format", "md", folder=session)
    assert result.code == 0, result
    assert result.stdout.startswith("#")
    assert "n0000" not in result.stdout
    assert "\nPending: nothing.\n" in result.stdout


# --------------------------------------------------------------------------
# Filtered tail (point 2), on a log whose times the test chooses

TIMED_SESSION = [
    ("mode", "SHAPING entered.", {"ts": "2026-03-01T09:00:00Z"}),  # n00001
    ("gate", "Channel is undecided.", {"ts": "2026-03-01T23:59:59Z"}),  # n00002
    ("decision", "Email first.", {"ts": "2026-03-02T00:00:00Z"}),  # n00003
    ("discard", "WhatsApp ruled out.", {"ts": "2026-03-02T12:30:00Z"}),  # n00004
    ("decision", "SMS first.", {"ts": "2026-03-03T08:00:00Z", "ref": "n00003"}),  # n00005
    ("gate", "Channel closed.", {"ts": "2026-03-03T08:00:00Z", "ref": "n00002", "status": "closed"}),  # n00006
    ("source", "Clinic booking report.", {"ts": "2026-03-04T00:00:00Z"}),  # n00007
    ("decision", "Texts under 160 characters.", {"ts": "2026-03-05T10:00:00Z"}),  # n00008
]

TAIL_CASES = [
    (["--type", "decision", "--limit", "100"], [3, 5, 8]),
    (["--type", "decision", "--type", "gate", "--limit", "100"], [2, 3, 5, 6, 8]),
    (["--since", "2026-03-02", "--limit", "100"], [3, 4, 5, 6, 7, 8]),  # midnight is included
    (["--until", "2026-03-02", "--limit", "100"], [1, 2]),  # midnight is excluded
    (["--since", "2026-03-03T08:00:00Z", "--until", "2026-03-04T00:00:00Z"], [5, 6]),
    (["--since", "2026-03-03T08:00:01Z", "--limit", "100"], [7, 8]),
    (["--until", "2026-03-03T08:00:00Z", "--limit", "100"], [1, 2, 3, 4]),
    (["--since", "2026-03-02", "--until", "2026-03-02"], []),
    (["--since", "2026-03-06"], []),
    # Filters first, then the last N matches.
    (["--type", "decision", "--limit", "2"], [5, 8]),
    (["--type", "gate", "--limit", "1"], [6]),
    (["--since", "2026-03-02", "--limit", "2"], [7, 8]),
    (["--type", "decision"], [3, 5, 8]),  # the default limit of 5 is not reached
    (["--type", "decision", "--since", "2026-03-02T12:00:00Z", "--until", "2026-03-05", "--limit", "1"], [5]),
    (["--type", "artifact"], []),
    ([], [4, 5, 6, 7, 8]),
]


@pytest.mark.parametrize("arguments, seqs", TAIL_CASES, ids=[" ".join(case[0]) or "plain" for case in TAIL_CASES])
def test_filtered_tail(tmp_path, arguments, seqs):
    folder = tmp_path / "session"
    records = write_session(folder, TIMED_SESSION)
    before = folder_digest(folder)

    result = run_notes("tail", *arguments, folder=folder)

    assert result.code == 0, result
    expected = {"ok": True, "command": "tail", "count": len(seqs), "path": str(folder / "session_notes.jsonl"),
                "records": [records[seq - 1] for seq in seqs]}
    if 3 in seqs:  # n00005 supersedes n00003 (issue 19: tail names the superseded among its records)
        expected["superseded"] = ["n00003"]
    assert result.receipt == expected
    assert list(result.receipt) == list(expected)
    assert folder_digest(folder) == before


def test_filtered_tail_on_the_v0_session(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    result = run_notes("tail", "--type", "gate", "--type", "mode", "--limit", "3", folder=folder)
    assert result.code == 0, result
    assert [record["id"] for record in result.receipt["records"]] == ["n00003", "n00010", "n00011"]
    assert result.receipt["records"] == [read_records(folder)[index] for index in (2, 9, 10)]


MALFORMED_TIMES = ["yesterday", "2026-13-01", "2026-02-30", "2026-03-01T10:00:00", "2026-03-01 10:00:00Z",
                   "2026/03/01", "20260301", "2026-03-01T25:00:00Z", "2026-03-01T10:00Z",
                   "2026-03-01T10:00:00+00:00", "2026-3-1", ""]


@pytest.mark.parametrize("flag", ["--since", "--until"])
@pytest.mark.parametrize("value", MALFORMED_TIMES, ids=[repr(value) for value in MALFORMED_TIMES])
def test_malformed_time_is_refused(tmp_path, flag, value):
    folder = tmp_path / "session"
    write_session(folder, TIMED_SESSION)
    before = folder_digest(folder)

    result = run_notes("tail", flag, value, folder=folder)

    assert_refused(result, 2)
    assert list(result.receipt) == ["ok", "error"]
    assert folder_digest(folder) == before


def test_unknown_type_filter_is_refused(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, TIMED_SESSION)
    before = folder_digest(folder)
    assert_refused(run_notes("tail", "--type", "idea", folder=folder), 2)
    assert folder_digest(folder) == before


# --------------------------------------------------------------------------
# A small core on every interpreter found

def test_recap_and_filtered_tail_on_each_python(tmp_path, python):
    folder = tmp_path / "session"
    records = write_session(folder, TIMED_SESSION)

    tail = run_notes("tail", "--type", "decision", "--since", "2026-03-02", "--until", "2026-03-05", folder=folder,
                     python=python)
    assert tail.code == 0, tail
    assert tail.receipt["records"] == [records[2], records[4]]

    receipt = run_notes("recap", folder=folder, python=python).receipt
    assert list(receipt) == RECAP_KEYS + ["synthesis", "delivery"]
    assert [item["id"] for item in receipt["decisions"]] == ["n00005", "n00008"]
    assert (receipt["open_gates"], receipt["superseded_count"]) == ([], 1)
    assert [(gate["id"], gate["update_id"]) for gate in receipt["closed_gates"]] == [("n00002", "n00006")]


# --------------------------------------------------------------------------
# Issue 28: a deferral labelled model or inferred keeps its gate among the deferred

@pytest.mark.parametrize("signals", [
    [("gate", "Payment links?"), ("gate", "Deferred.", {"ref": "n00001", "status": "deferred",
                                                         "provenance": "model"})],
    [("gate", "Payment links?"), ("gate", "Deferred.", {"ref": "n00001", "status": "deferred",
                                                         "evidence": "inferred"})],
    [("gate", "Payment links?", {"status": "deferred", "provenance": "model", "evidence": "inferred"})],
], ids=["update-model", "update-inferred", "born-deferred"])
def test_an_unconfirmed_deferral_keeps_the_gate_deferred(tmp_path, signals):
    folder = tmp_path / "session"
    write_session(folder, signals + [("decision", "Decision %d." % number) for number in range(1, 4)])
    session = notes.Session(folder)

    for receipt in (session.recap(), session.recap(limit=1), session.recap(max_bytes=1200)):
        # Deferred, and waiting for the operator's word on that deferral: in both lists.
        assert [item["id"] for item in receipt["deferred_gates"]] == ["n00001"]
        assert [item["id"] for item in receipt["unconfirmed"]] == ["n00001"]
        assert receipt["pending"]["unconfirmed"] == 1 and receipt["pending"]["open_gates"] == 0
    markdown = session.recap(format="md")["markdown"]
    deferred = markdown.split("## Deferred gates\n\n")[1].split("\n\n")[0]
    assert deferred.startswith("- Payment links?") and "[n00001; not yet confirmed]" in deferred


# --------------------------------------------------------------------------
# Issue 26: readback shows the answer, not only the question

def test_a_closed_gate_shows_the_note_that_settled_it(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [
        ("gate", "Channel is undecided."),  # n00001
        ("decision", "Reminders go by email.", {"provenance": "op"}),  # n00002
        ("gate", "Closed: see the decision.", {"ref": "n00001", "status": "closed", "by": "n00002",
                                                "provenance": "op", "evidence": "declared"}),  # n00003
    ])

    receipt = notes.Session(folder).recap()

    assert receipt["closed_gates"] == [{
        "id": "n00001", "text": "Channel is undecided.", "update_id": "n00003",
        "closed_by": {"id": "n00002", "type": "decision", "text": "Reminders go by email."},
        "update_provenance": "op", "update_evidence": "declared"}]
    markdown = notes.Session(folder).recap(format="md")["markdown"]
    assert "- Channel is undecided. - Reminders go by email. [n00001; from the operator]" in markdown.splitlines()


def test_a_gate_shows_the_effect_in_force_its_latest_update_gives(tmp_path):
    # Both effects side by side left models unsure which held (rounds 14 and 31): an update's effect replaces the
    # first one, and an update without one keeps it, even after one that gave it (round 70, recipe c1).
    folder = tmp_path / "session"
    write_session(folder, [
        ("gate", "Which schools?", {"effect": "The rental area follows from it."}),  # n00001
        ("gate", "Which schools: still open.", {"ref": "n00001", "status": "open",
                                                 "effect": "The plan names no school yet."}),  # n00002
        ("gate", "Storage is open.", {"effect": "No storage unit is booked."}),  # n00003
        ("gate", "Storage deferred.", {"ref": "n00003", "status": "deferred"}),  # n00004
        ("gate", "Budget is open.", {"effect": "The printer waits for it."}),  # n00005
        ("gate", "Budget: the brother decides.", {"ref": "n00005", "status": "open",
                                                   "effect": "The printer waits for the brother."}),  # n00006
        ("gate", "Budget deferred.", {"ref": "n00006", "status": "deferred"}),  # n00007
    ])

    receipt = notes.Session(folder).recap()

    assert receipt["open_gates"] == [{
        "id": "n00001", "text": "Which schools?", "status": "open", "effect": "The plan names no school yet.",
        "update_id": "n00002", "update_text": "Which schools: still open."}]
    assert receipt["deferred_gates"] == [{
        "id": "n00003", "text": "Storage is open.", "status": "deferred", "effect": "No storage unit is booked.",
        "update_id": "n00004", "update_text": "Storage deferred."}, {
        "id": "n00005", "text": "Budget is open.", "status": "deferred", "effect": "The printer waits for the brother.",
        "update_id": "n00007", "update_text": "Budget deferred."}]
    markdown = notes.Session(folder).recap(format="md")["markdown"].splitlines()
    assert ("- Which schools? Effect: The plan names no school yet. Latest: Which schools: still open. [n00001]"
            in markdown), markdown


def test_gate_states_come_back_exact_from_a_damaged_log(tmp_path):
    # Recap keeps each gate's state as numbers: a by under an id with an extra zero, or
    # one of eleven digits naming no note, must come back as written.
    folder = tmp_path / "session"
    odd = signal_record(SESSION_ID, 2, ("decision", "Email, by the operator.", {"provenance": "op"}))
    odd["id"] = "n000002"
    odd["checksum"] = v0_checksum(odd)
    write_session(folder, [
        ("gate", "Channel?"),  # n00001
        odd,  # seq 2, under an id with an extra zero
        ("gate", "Channel: email.", {"ref": "n00001", "status": "closed", "by": "n000002"}),  # n00003
        ("gate", "Host?"),  # n00004
        ("gate", "Host: local.", {"ref": "n00004", "status": "closed", "by": "n99999999999"}),  # n00005
        ("gate", "Reminders?", {"provenance": "model"}),  # n00006
        ("gate", "Reminders: deferred.", {"ref": "n00006", "status": "deferred", "evidence": "inferred"}),  # n00007
        ("gate", "Budget?"),  # n00008
    ])

    receipt = notes.Session(folder).recap()

    assert receipt["closed_gates"] == [
        {"id": "n00004", "text": "Host?", "update_id": "n00005",
         "closed_by": {"id": "n00005", "type": "gate", "text": "Host: local."}},
        {"id": "n00001", "text": "Channel?", "update_id": "n00003",
         "closed_by": {"id": "n000002", "type": "decision", "text": "Email, by the operator."}}]
    deferred = {"id": "n00006", "text": "Reminders?", "status": "deferred", "provenance": "model",
                "update_id": "n00007", "update_text": "Reminders: deferred.", "update_evidence": "inferred"}
    assert receipt["deferred_gates"] == [deferred] and receipt["unconfirmed"] == [dict(deferred, type="gate")]
    assert receipt["open_gates"] == [{"id": "n00008", "text": "Budget?", "status": "open"}]
    assert receipt["pending"] == {"open_gates": 1, "unconfirmed": 1, "raised_since": "n00006"}
    assert receipt["warnings"] == ["line 2 (n000002): the id does not match the seq",
                                   "line 5 (n00005): the by n99999999999 names no earlier note"]
    entry = notes.Session(folder).sessions()["sessions"][0]
    assert (entry["open_gates"], entry["deferred_gates"]) == (1, 1)


REOPENED_SESSION = [
    ("discard", "WhatsApp ruled out."),  # n00001
    ("discard", "Paper reminders ruled out."),  # n00002
    ("discard", "A mobile app ruled out."),  # n00003
    ("discard", "A mobile app ruled out: no budget.", {"ref": "n00003"}),  # n00004: a rewording, no reopening
    ("decision", "WhatsApp as an opt-in channel.", {"ref": "n00001", "provenance": "op"}),  # n00005
    ("gate", "Paper reminders after all?", {"about": "n00002"}),  # n00006: open, asks again
    ("gate", "Email first?", {"about": "n00004"}),  # n00007
    ("gate", "Email first: yes.", {"ref": "n00007", "status": "closed"}),  # n00008: closed, asks no longer
]


def test_a_reopened_discard_stays_listed_as_reopened(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, REOPENED_SESSION)

    receipt = notes.Session(folder).recap()

    assert receipt["discards"] == [
        {"id": "n00001", "text": "WhatsApp ruled out.",
         "reopened": {"id": "n00005", "type": "decision", "text": "WhatsApp as an opt-in channel."}},
        {"id": "n00002", "text": "Paper reminders ruled out.",  # it holds while a gate weighs it
         "questioned_by": {"id": "n00006", "type": "gate", "text": "Paper reminders after all?"}},
        {"id": "n00004", "text": "A mobile app ruled out: no budget.", "replaces": "n00003"},
    ]
    assert receipt["superseded_count"] == 2
    lines = notes.Session(folder).recap(format="md")["markdown"].splitlines()
    assert "- WhatsApp ruled out. Reopened by a decision: WhatsApp as an opt-in channel. [n00001]" in lines
    assert "- Paper reminders ruled out. In question: Paper reminders after all? [n00002]" in lines


def test_a_discard_asked_about_by_a_deferred_gate_is_in_question_until_the_gate_closes(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("discard", "A cancellation fee ruled out."),
                           ("gate", "A fee for late cancellations, for the co-owner to weigh.",
                            {"about": "n00001", "status": "deferred", "provenance": "op"})])
    questioned = {"id": "n00001", "text": "A cancellation fee ruled out.",
                  "questioned_by": {"id": "n00002", "type": "gate",
                                    "text": "A fee for late cancellations, for the co-owner to weigh."}}

    assert notes.Session(folder).recap()["discards"] == [questioned]
    shown = notes.Session(folder).show(note_id="n00001", compact=True)
    assert shown["questioned_by"] == questioned["questioned_by"] and "reopened" not in shown
    notes.Session(folder).append(type="gate", ref="n00002", status="closed", provenance="op",
                                 text="Closed: no fee after all.")
    assert notes.Session(folder).recap()["discards"] == [{"id": "n00001", "text": "A cancellation fee ruled out."}]


def test_recap_of_the_real_script_shows_answers_and_synthesis_state(tmp_path):
    folder = tmp_path / "session"
    for note_type, text, *extra in [
        ("gate", "Channel is undecided."),
        ("decision", "Email.", "--provenance", "op"),
        ("gate", "Closed: email.", "--ref", "n00001", "--status", "closed", "--by", "n00002"),
        ("discard", "SMS ruled out."),
        ("decision", "SMS after all.", "--ref", "n00004", "--provenance", "op"),
        ("mode", "SYNTHESIS approved by the operator.", "--provenance", "op"),
        ("artifact", "Delivered v1, saved as spec.md.", "--provenance", "model", "--evidence", "observed"),
        ("gate", "Hosting is undecided.", "--provenance", "model"),
    ]:
        assert run_notes("append", "--type", note_type, "--text", text, *extra, folder=folder).code == 0

    result = run_notes("recap", folder=folder)

    assert result.code == 0, result
    receipt = result.receipt
    assert receipt["mode"] is None and receipt["unconfirmed"] == []
    assert receipt["closed_gates"][0]["closed_by"] == {"id": "n00002", "type": "decision", "text": "Email."}
    assert receipt["discards"][0]["reopened"] == {"id": "n00005", "type": "decision", "text": "SMS after all."}
    assert receipt["pending"] == {"open_gates": 1, "unconfirmed": 0, "raised_since": "n00008",
                                  "since_delivery": ["n00008"]}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00006", "delivered": "n00007"}
    assert receipt["delivery"] == {"id": "n00007", "after": [
        {"id": "n00008", "type": "gate", "text": "Hosting is undecided."}], "more": 0}
    markdown = run_notes("recap", "--format", "md", folder=folder)
    assert markdown.code == 0 and "Closed: Closed:" not in markdown.stdout
    assert "- Channel is undecided. - Email. [n00001]" in markdown.stdout.splitlines()


# ==========================================================================
# Readback sized for a model: compact tail and show, tail --grep by whole words

# (type, text, fields): the comments give each note's id.
SESSION = [
    ("gate", "Channel is undecided.", {"effect": "Templates wait for it.", "provenance": "op"}),  # n00001
    ("decision", "Reminders go by email.", {"provenance": "op", "evidence": "declared"}),  # n00002
    ("gate", "Closed: email.", {"ref": "n00001", "status": "closed", "provenance": "op", "by": "n00002"}),  # n00003
    ("discard", "Live chat ruled out."),  # n00004
    ("tension", "Email may land in spam.", {"about": "n00002", "evidence": "inferred"}),  # n00005
    ("artifact", "Delivered v1 of the spec.", {"batch": "1/1"}),  # n00006
]


def compact(record) -> dict:
    """A record's compact form, built here from the log's record."""
    keys = ("id", "type", "text", "effect", "ref", "status", "provenance", "evidence", "about", "by")
    return {key: record[key] for key in keys if key in record}


@pytest.fixture
def written(tmp_path):
    folder = tmp_path / "session"
    return folder, write_session(folder, SESSION)


# --------------------------------------------------------------------------
# tail --compact and show --compact

def test_tail_compact_gives_what_a_note_says_and_links_without_its_stamps(written):
    folder, records = written

    receipt = notes.Session(folder).tail(limit=3, compact=True)

    assert receipt == {"ok": True, "command": "tail", "count": 3, "path": str(folder / "session_notes.jsonl"),
                       "records": [
                           {"id": "n00004", "type": "discard", "text": "Live chat ruled out."},
                           {"id": "n00005", "type": "tension", "text": "Email may land in spam.",
                            "evidence": "inferred", "about": "n00002"},
                           {"id": "n00006", "type": "artifact", "text": "Delivered v1 of the spec."}]}
    # Without the option, the records as the log holds them, as v0's tail gives them.
    assert notes.Session(folder).tail(limit=3)["records"] == records[3:]


def test_tail_compact_keeps_every_link_and_label_in_record_order(written):
    folder, records = written
    receipt = notes.Session(folder).tail(limit=10, types=["gate"], compact=True)
    assert receipt["records"] == [compact(records[0]), compact(records[2])]
    assert list(receipt["records"][1]) == ["id", "type", "text", "ref", "status", "provenance", "by"]


def test_tail_compact_prints_a_line_per_record_and_plain_tail_is_unchanged(written, capsys):
    folder, records = written

    assert notes.main(["--dir", str(folder), "tail", "--limit", "2", "--compact"]) == 0
    printed = capsys.readouterr().out
    assert printed == scannable({"ok": True, "command": "tail", "count": 2, "path": str(folder / "session_notes.jsonl"),
                                 "records": [compact(records[4]), compact(records[5])]})
    lines = [json.dumps(compact(record), separators=(",", ":"), ensure_ascii=False) for record in records[4:6]]
    assert printed.splitlines()[-2:] == [lines[0] + ",", lines[1] + "]}"]
    assert notes.main(["--dir", str(folder), "tail", "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == [records[5]]


def test_show_compact_compacts_every_record_of_the_chain(written):
    folder, records = written

    gate = notes.Session(folder).show(note_id="n00003", compact=True)

    assert gate == {"ok": True, "command": "show", "note_id": "n00003", "path": str(folder / "session_notes.jsonl"),
                    "record": compact(records[2]), "state": "closed", "gate": compact(records[0]),
                    "updates": [compact(records[2])], "settled_by": [compact(records[1])], "about": []}
    decision = notes.Session(folder).show(note_id="n00002", compact=True)
    assert decision["record"] == {"id": "n00002", "type": "decision", "text": "Reminders go by email.",
                                  "provenance": "op", "evidence": "declared"}
    assert decision["about"] == [compact(records[4])] and decision["replaces"] == []
    assert notes.Session(folder).show(note_id="n00002")["record"] == records[1]


def test_show_says_which_note_reopened_a_discard_or_questions_it(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("discard", "Live chat ruled out."), ("discard", "SMS ruled out."),
                           ("decision", "Live chat after all.", {"ref": "n00001", "provenance": "op"}),
                           ("gate", "SMS for the elderly?", {"about": "n00002"})])
    session = notes.Session(folder)

    adopted = session.show(note_id="n00001", compact=True)
    asked = session.show(note_id="n00002", compact=True)

    assert adopted["state"] == "superseded"
    assert adopted["reopened"] == {"id": "n00003", "type": "decision", "text": "Live chat after all."}
    assert asked["state"] == "live"
    assert asked["questioned_by"] == {"id": "n00004", "type": "gate", "text": "SMS for the elderly?"}
    assert "reopened" not in asked and "questioned_by" not in adopted
    assert "reopened" not in session.show(note_id="n00003")


def test_tail_and_show_compact_through_the_real_script(written):
    folder, records = written
    before = folder_digest(folder)

    tail = run_notes("tail", "--limit", "2", "--compact", folder=folder)
    show = run_notes("show", "n00001", "--compact", folder=folder)

    assert tail.code == 0 and tail.stdout == scannable(tail.receipt), tail
    assert tail.receipt["records"] == [compact(records[4]), compact(records[5])]
    assert show.code == 0 and show.stdout == scannable(show.receipt), show
    assert show.receipt["record"] == compact(records[0]) and show.receipt["updates"] == [compact(records[2])]
    assert "checksum" not in tail.stdout + show.stdout and "ts" not in tail.stdout + show.stdout
    assert folder_digest(folder) == before


def test_mcp_tail_and_show_take_compact_as_a_boolean(written):
    folder, records = written
    calls = [("tail", {"limit": 1, "compact": True}), ("show", {"note_id": "n00004", "compact": True}),
             ("tail", {"compact": "yes"})]
    lines = [json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments}})
             for number, (name, arguments) in enumerate(calls, 1)]
    lines[:0] = [json.dumps({"jsonrpc": "2.0", "id": "start", "method": "initialize",
                             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "test", "version": "1"}}}),
                 json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list"})]
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input=("\n".join(lines) + "\n").encode("utf-8"), capture_output=True, timeout=60)

    assert completed.returncode == 0, completed
    started, listing, tail, show, wrong = [json.loads(line)["result"]
                                           for line in completed.stdout.decode().splitlines()]
    assert "then tail or show with compact true" in started["instructions"]
    schemas = {tool["name"]: tool["inputSchema"]["properties"] for tool in listing["tools"]}
    assert schemas["tail"]["compact"]["type"] == schemas["show"]["compact"]["type"] == "boolean"
    assert tail["structuredContent"]["records"] == [compact(records[5])]
    assert show["structuredContent"]["record"] == compact(records[3])
    assert wrong["isError"] is True
    assert wrong["structuredContent"]["error"] == "argument 'compact' of tail must be true or false"


# --------------------------------------------------------------------------
# tail --grep: whole words, in order, and what was left out

GREP_SESSION = [
    ("decision", "The reminder is delivered by SMS."),  # n00001
    ("decision", "Go live in May.", {"effect": "The LIVE date sets the pilot."}),  # n00002
    ("decision", "Live-chat is out; e-mail stays."),  # n00003
    ("tension", "Alive and well is no plan."),  # n00004
    ("source", "Ruled  out, twice: the app."),  # n00005
    ("source", "Out ruled by the board."),  # n00006
]


@pytest.mark.parametrize("words, ids", [
    ("live", ["n00002", "n00003"]),  # not "delivered", not "Alive"
    ("LIVE", ["n00002", "n00003"]),
    ("ruled out", ["n00005"]),  # in order, across any spaces and punctuation between them
    ("e-mail", ["n00003"]),
    ("mail", ["n00003"]),  # a hyphen ends a word
    ("deliver", []),  # part of a word is no match
    ("by sms", ["n00001"]),  # the full stop after it ends the word
    ("sms by", []),
    ("pilot", ["n00002"]),  # the effect counts
], ids=["word", "case", "phrase", "hyphen", "after-hyphen", "part", "punctuation", "order", "effect"])
def test_tail_grep_matches_whole_words_in_order(tmp_path, words, ids):
    folder = tmp_path / "session"
    write_session(folder, GREP_SESSION)
    receipt = notes.Session(folder).tail(limit=10, grep=words)
    assert [record["id"] for record in receipt["records"]] == ids
    assert "more" not in receipt and "more_at_least" not in receipt


def test_tail_grep_counts_the_matches_it_left_out(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("decision", "Email %d." % number) if number % 2 else ("source", "Other %d." % number)
                           for number in range(1, 21)])  # ten matches: n00001, n00003 ... n00019
    session = notes.Session(folder)

    receipt = session.tail(limit=3, grep="email", compact=True)

    assert [record["id"] for record in receipt["records"]] == ["n00015", "n00017", "n00019"]
    assert list(receipt) == ["ok", "command", "count", "path", "records", "more"] and receipt["more"] == 7
    assert "more" not in session.tail(limit=10, grep="email")
    # Only grep counts: a tail without it stays as v0 gives it.
    assert list(session.tail(limit=3)) == ["ok", "command", "count", "path", "records"]


def test_tail_grep_counts_at_most_a_thousand_more(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("decision", "Email %d." % number) for number in range(1, 1012)])

    receipt = notes.Session(folder).tail(limit=10, grep="email")

    assert receipt["count"] == 10 and receipt["more_at_least"] == 1000 and "more" not in receipt
    exact = notes.Session(folder).tail(limit=12, grep="email")
    assert exact["more"] == 999 and "more_at_least" not in exact


def test_tail_grep_through_the_real_script_says_more(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, GREP_SESSION)
    result = run_notes("tail", "--grep", "live", "--limit", "1", folder=folder)
    assert result.code == 0, result
    assert [record["id"] for record in result.receipt["records"]] == ["n00003"] and result.receipt["more"] == 1


# ==========================================================================
# What recap says is pending and where synthesis stands

PENDING_SESSION_ID = "3a7d9c1e-5b2f-4d8a-9e6c-1f0b2a3c4d5e"


# --------------------------------------------------------------------------
# Local helpers

def write_signal_session(folder, signals) -> None:
    write_signals(folder, PENDING_SESSION_ID, signals)


def session_recap(folder, **options) -> dict:
    """recap's receipt, in process."""
    return dict(notes.Session(folder).recap(**options))


def recap_md(folder, **options) -> str:
    return notes.Session(folder).recap(format="md", **options)["markdown"]


# --------------------------------------------------------------------------
# pending

PENDING_SESSION = [
    ("mode", "SHAPING: the operator set the scope."),  # n00001
    ("gate", "Hosting is undecided."),  # n00002, open
    ("gate", "Consent wording is undecided.", {"provenance": "model"}),  # n00003, open and unconfirmed
    ("gate", "Payment links.", {"status": "deferred"}),  # n00004, deferred: not pending
    ("decision", "SMS is the channel.", {"provenance": "op", "evidence": "declared"}),  # n00005, settled
    ("decision", "Reminders go out 48 hours ahead.", {"provenance": "model"}),  # n00006, unconfirmed
    ("source", "About 400 appointments a month.", {"evidence": "inferred"}),  # n00007, unconfirmed
    ("gate", "Hosting still open: the IT contact is away.",
     {"ref": "n00002", "status": "open", "provenance": "op"}),  # n00008
]


def test_pending_counts_open_gates_and_the_unconfirmed_list(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, PENDING_SESSION)

    receipt = session_recap(folder)

    # The model's open gate n00003 counts once: it is pending as open, not also as unconfirmed.
    assert [item["id"] for item in receipt["open_gates"]] == ["n00002", "n00003"]
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00006", "n00007"]
    # Facts only: the counts, and the item raised first (n00003: n00002 was set open again by n00008).
    assert receipt["pending"] == {"open_gates": 2, "unconfirmed": 2, "raised_since": "n00003"}
    assert list(receipt)[-3:] == ["pending", "synthesis", "delivery"]  # null: neither happened
    assert receipt["synthesis"] is None and receipt["delivery"] is None


@pytest.mark.parametrize("signals, pending", [
    ([("gate", "Hosting is undecided.")], {"open_gates": 1, "unconfirmed": 0, "raised_since": "n00001"}),
    # A tension names a pull between lenses: nothing in it to confirm, whoever noted it.
    ([("decision", "SMS.", {"provenance": "model"}), ("tension", "Cost.", {"evidence": "inferred"}),
      ("source", "About 400 a month.", {"evidence": "inferred"})],
     {"open_gates": 0, "unconfirmed": 2, "raised_since": "n00001"}),
    # A shape proposal raised first is the earliest raised.
    ([("shape", "A nightly job.", {"provenance": "model"}), ("decision", "SMS.", {"provenance": "model"})],
     {"open_gates": 0, "unconfirmed": 2, "raised_since": "n00001"}),
    # Deferred and closed gates and confirmed notes leave nothing pending: zeros, never a missing key.
    ([("gate", "Payment links.", {"status": "deferred"}), ("gate", "Hosting."),
      ("gate", "Hosting closed.", {"ref": "n00002", "status": "closed"}),
      ("decision", "SMS.", {"provenance": "op"})], {"open_gates": 0, "unconfirmed": 0}),
    # A mode note holds nothing to confirm, even the model's STOP.
    ([("mode", "SHAPING: stopped, the plan has a gap.", {"provenance": "model"})], {"open_gates": 0, "unconfirmed": 0}),
], ids=["one-gate", "unconfirmed-only", "shape-first", "nothing", "mode"])
def test_pending_counts_what_holds_synthesis_back_zeros_included(tmp_path, signals, pending):
    folder = tmp_path / "session"
    write_signal_session(folder, signals)
    assert session_recap(folder)["pending"] == pending


def test_a_shape_proposal_stays_to_confirm_after_a_later_shape(tmp_path):
    # Round 16 (family c1): the operator's later shape note hid the model's earlier proposal.
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("shape", "A schedule counted back from the first school day.", {"provenance": "model"}),
        ("shape", "A printable checklist.", {"provenance": "op"}),
        ("shape", "Tasks grouped by room.", {"provenance": "model"}),
    ])
    receipt = session_recap(folder)
    # Rounds 25 and 26 (record-shop c1): a later proposal hid the settled shape; it stays the shape in force.
    assert receipt["shape"] == {"id": "n00002", "text": "A printable checklist.", "provenance": "op"}
    assert receipt["unconfirmed"] == [
        {"id": "n00001", "type": "shape", "text": "A schedule counted back from the first school day.",
         "provenance": "model"},
        {"id": "n00003", "type": "shape", "text": "Tasks grouped by room.", "provenance": "model"}]
    assert receipt["pending"] == {"open_gates": 0, "unconfirmed": 2, "raised_since": "n00001"}
    # Taken up by the operator (--ref), it is settled.
    write_signal_session(folder / "taken", [
        ("shape", "A schedule counted back from the first school day.", {"provenance": "model"}),
        ("shape", "A schedule counted back from the first school day.", {"provenance": "shared", "ref": "n00001"}),
    ])
    assert session_recap(folder / "taken")["pending"] == {"open_gates": 0, "unconfirmed": 0}


def test_a_proposal_replacing_the_settled_shape_is_the_shape(tmp_path):
    """A review's case: an earlier settled shape, overtaken by a later one, never comes back."""
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("shape", "A paper wall calendar.", {"provenance": "op"}),
        ("shape", "A shared phone app.", {"provenance": "op"}),
        ("shape", "A shared phone app with offline lists.", {"provenance": "op", "evidence": "inferred",
                                                              "ref": "n00002"}),
    ])
    receipt = session_recap(folder)
    assert receipt["shape"] == {"id": "n00003", "text": "A shared phone app with offline lists.", "replaces": "n00002",
                                "provenance": "op", "evidence": "inferred"}
    # A second review's case: a proposal revised with --ref still leaves the settled shape in force.
    write_signal_session(folder / "revised", [
        ("shape", "A printable checklist.", {"provenance": "op"}),
        ("shape", "Proposal: a phone app.", {"provenance": "model"}),
        ("shape", "Proposal revised: a phone app with offline lists.", {"provenance": "model", "ref": "n00002"}),
    ])
    receipt = session_recap(folder / "revised")
    assert receipt["shape"] == {"id": "n00001", "text": "A printable checklist.", "provenance": "op"}
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00003"]


def test_pending_counts_what_the_limit_leaves_out(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Gate %d." % number) for number in range(1, 5)]
                  + [("decision", "Proposal %d." % number, {"provenance": "model"}) for number in range(1, 4)])

    receipt = session_recap(folder, limit=1)

    assert [item["id"] for item in receipt["open_gates"]] == ["n00004"]
    assert len(receipt["unconfirmed"]) == 1
    assert receipt["truncated"] == {"open_gates": 3, "unconfirmed": 2}
    # raised_since names the first one raised, listed or not.
    assert receipt["pending"] == {"open_gates": 4, "unconfirmed": 3, "raised_since": "n00001"}


def test_no_receipt_field_gives_an_order():
    # Receipts state facts; what to do with them is the contracts' part (issue 26, point 2).
    source = open(notes.__file__, encoding="utf-8").read()
    assert "put each to the operator" not in source and "put it to the operator" not in source


def test_pending_says_which_items_came_after_the_last_delivery(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("gate", "Hosting is undecided."),  # n00001: open before the delivery, carried by it
        ("decision", "SMS.", {"provenance": "model"}),  # n00002: unconfirmed before it
        ("mode", "SYNTHESIS approved.", {"provenance": "op"}),  # n00003
        ("artifact", "Delivered v1 as spec.md.", {"provenance": "model", "evidence": "observed"}),  # n00004
        ("decision", "Email too.", {"provenance": "model"}),  # n00005
        ("gate", "Consent wording?"),  # n00006
        ("gate", "Hosting still open: the PC is old.", {"ref": "n00001", "status": "open"}),  # n00007
    ])

    receipt = session_recap(folder)

    # The delivery is no proposal to confirm: it is neither unconfirmed nor pending.
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00002", "n00005"]
    assert receipt["pending"] == {"open_gates": 2, "unconfirmed": 2, "raised_since": "n00002",
                                  "since_delivery": ["n00005", "n00006", "n00001"]}
    assert [item["id"] for item in receipt["artifacts"]] == ["n00004"]
    assert receipt["mode"] is None  # the SYNTHESIS note is no longer in force


def test_pending_after_a_delivery_with_nothing_new(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Hosting is undecided."), ("mode", "SYNTHESIS approved."),
                           ("artifact", "Delivered v1.")])
    assert session_recap(folder)["pending"] == {"open_gates": 1, "unconfirmed": 0, "raised_since": "n00001",
                                        "since_delivery": []}


# --------------------------------------------------------------------------
# synthesis

@pytest.mark.parametrize("modes, synthesis, mode", [
    (["SHAPING begins."], None, "n00001"),
    # Case matters: the protocol's state is written SYNTHESIS.
    (["synthesis, maybe later."], None, "n00001"),
    (["SHAPING begins.", "SYNTHESIS approved."], {"state": "entered", "entered": "n00002"}, "n00002"),
    (["SYNTHESIS approved.", "SYNTHESIS: second part."], {"state": "entered", "entered": "n00001"}, "n00002"),
    # A STOP appends a mode note beginning SHAPING: it ends synthesis, and is the mode in force.
    (["SYNTHESIS approved.", "SYNTHESIS: second part.", "SHAPING again: the operator reopened scope."],
     {"state": "ended", "entered": "n00001", "ended": "n00003"}, "n00003"),
    # Entering again starts a new stretch: entered moves to it.
    (["SYNTHESIS approved.", "SHAPING again.", "SYNTHESIS approved again."],
     {"state": "entered", "entered": "n00003"}, "n00003"),
], ids=["never", "lowercase", "entered", "stays", "ended", "entered-again"])
def test_synthesis_says_whether_it_was_entered_or_ended(tmp_path, modes, synthesis, mode):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", text) for text in modes])

    receipt = session_recap(folder)

    assert receipt["synthesis"] == synthesis
    assert receipt["mode"]["id"] == mode
    assert receipt["delivery"] is None


# --------------------------------------------------------------------------
# delivery

DELIVERY_SESSION = [
    ("artifact", "The runbook excludes raw notes."),  # n00001: a boundary, before synthesis: no delivery
    ("gate", "Hosting is undecided."),  # n00002
    ("mode", "SYNTHESIS approved for the runbook."),  # n00003
    ("artifact", "Runbook v1 delivered.", {"effect": "The operator has it."}),  # n00004: the delivery
    ("decision", "SMS is the channel."),  # n00005, superseded by n00006: not live
    ("decision", "SMS, and email when no phone is on file.", {"ref": "n00005"}),  # n00006
    ("gate", "Hosting deferred.", {"ref": "n00002", "status": "deferred"}),  # n00007
    ("mode", "SHAPING again: the operator reopened the channel."),  # n00008, a mode note: not listed
    ("artifact", "Pricing stays out of the runbook."),  # n00009: outside synthesis, a boundary, not a delivery
]


def test_delivery_names_the_last_artifact_in_synthesis_and_the_live_notes_after_it(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, DELIVERY_SESSION)

    receipt = session_recap(folder)

    assert receipt["delivery"] == {"id": "n00004", "after": [
        {"id": "n00006", "type": "decision", "text": "SMS, and email when no phone is on file."},
        {"id": "n00007", "type": "gate", "text": "Hosting deferred."},
        {"id": "n00009", "type": "artifact", "text": "Pricing stays out of the runbook."}], "more": 0}
    # Delivering ends synthesis: the artifact note that did it is named; the later mode note is in force.
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00003", "delivered": "n00004"}
    assert receipt["mode"]["id"] == "n00008"
    # Round 59 (bakery c2): with nothing pending the key was missing, and a model had to guess what that meant.
    assert receipt["pending"] == {"open_gates": 0, "unconfirmed": 0, "since_delivery": []}  # the gate was deferred
    assert list(receipt)[-4:] == ["export_lag", "pending", "synthesis", "delivery"]


def test_after_a_delivery_the_synthesis_note_is_no_longer_the_mode(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SHAPING."), ("mode", "SYNTHESIS approved.", {"provenance": "model"}),
                           ("artifact", "Runbook v1 delivered.", {"provenance": "model"})])

    receipt = session_recap(folder)

    assert receipt["mode"] is None
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00002", "delivered": "n00003"}
    # Neither the ended SYNTHESIS note nor the delivery waits for a confirmation.
    assert receipt["unconfirmed"] == [] and receipt["pending"] == {"open_gates": 0, "unconfirmed": 0, "since_delivery": []}


def test_the_mode_note_after_a_delivery_leaves_it_delivered(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("mode", "SHAPING: synthesis ended with the delivery of v1.")])

    receipt = session_recap(folder)

    assert receipt["delivery"] == {"id": "n00002", "after": [], "more": 0}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00001", "delivered": "n00002"}
    assert receipt["mode"]["id"] == "n00003"


def test_a_later_delivery_replaces_the_earlier_one(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, DELIVERY_SESSION + [("mode", "SYNTHESIS approved again."),  # n00010
                                              ("artifact", "Runbook v2 delivered.")])  # n00011

    receipt = session_recap(folder)

    assert receipt["delivery"] == {"id": "n00011", "after": [], "more": 0}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00010", "delivered": "n00011"}


def test_synthesis_entered_again_after_a_delivery_and_stopped(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("mode", "SYNTHESIS approved for v2."), ("mode", "SHAPING: STOP, a gap in v2.")])

    receipt = session_recap(folder)

    assert receipt["synthesis"] == {"state": "ended", "entered": "n00003", "ended": "n00004"}
    assert receipt["delivery"] == {"id": "n00002", "after": [], "more": 0}
    assert receipt["mode"]["id"] == "n00004"


def test_an_artifact_note_after_a_delivery_is_a_boundary_until_synthesis_is_entered_again(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("artifact", "Pricing stays out of the runbook.", {"provenance": "model"})])

    receipt = session_recap(folder)

    # The first artifact note delivered and ended synthesis; the second one sets a boundary, unconfirmed.
    assert receipt["delivery"] == {"id": "n00002", "after": [
        {"id": "n00003", "type": "artifact", "text": "Pricing stays out of the runbook."}], "more": 0}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00001", "delivered": "n00002"}
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00003"]


def test_a_boundary_proposed_in_synthesis_is_no_delivery(tmp_path):
    # protocol.md: a choice the artifact needs is a proposal, appended even in SYNTHESIS; one on the
    # artifact's boundary is an artifact note labelled inferred, and synthesis goes on until the delivery.
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("mode", "SYNTHESIS approved."),
        ("artifact", "The runbook leaves out the laptops.", {"provenance": "model", "evidence": "inferred"}),
        ("artifact", "Runbook v1 delivered.", {"provenance": "model", "evidence": "observed"})])

    receipt = session_recap(folder)
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00001", "delivered": "n00003"}
    assert receipt["delivery"] == {"id": "n00003", "after": [], "more": 0}
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00002"]
    write_signal_session(tmp_path / "before", [
        ("mode", "SYNTHESIS approved."),
        ("artifact", "The runbook leaves out the laptops.", {"provenance": "model", "evidence": "inferred"})])
    receipt = session_recap(tmp_path / "before")
    assert receipt["synthesis"] == {"state": "entered", "entered": "n00001"} and receipt["delivery"] is None


def test_delivery_lists_the_newest_limit_notes_and_counts_the_rest(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Delivered.")]
                  + [("tension", "Tension %d." % number) for number in range(1, 31)])  # n00003-n00032

    assert session_recap(folder, limit=5)["delivery"] == {
        "id": "n00002", "after": [{"id": "n%05d" % (number + 2), "type": "tension", "text": "Tension %d." % number}
                                  for number in range(26, 31)], "more": 25}
    delivery = session_recap(folder)["delivery"]
    assert [item["id"] for item in delivery["after"]] == ["n%05d" % seq for seq in range(13, 33)]
    assert delivery["more"] == 10


def test_the_markdown_recap_reads_as_prose_for_the_operator(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("gate", "Hosting is undecided."),  # n00001
        ("decision", "SMS is the channel.", {"provenance": "op"}),  # n00002
        ("tension", "Cost grows with volume.", {"provenance": "shared", "evidence": "observed"}),  # n00003
        ("mode", "SYNTHESIS approved."),  # n00004
        ("artifact", "Runbook v1, saved as runbook.md.", {"provenance": "model", "evidence": "observed"}),  # n00005
        ("decision", "Email too.", {"provenance": "model"}),  # n00006
        ("gate", "Closed: the reception PC.", {"ref": "n00001", "status": "closed",
                                               "provenance": "op"}),  # n00007
        ("discard", "Paper reminders ruled out."),  # n00008
        ("decision", "Paper reminders for patients without a phone.", {"ref": "n00008", "provenance": "op"}),
    ])

    lines = recap_md(folder).splitlines()

    assert lines[:8] == [
        "# Recap", "", "9 notes, 1 superseded by later ones.", "Export: no session_export.json yet.", "",
        "Pending: 1 note not yet confirmed, listed below; 1 of them raised since the last delivery.",
        "Delivered: Runbook v1, saved as runbook.md. [n00005]; 3 notes since, listed under Since the delivery.",
        "",
    ]
    assert "- SMS is the channel. [n00002; from the operator]" in lines
    assert "- Cost grows with volume. [n00003; shared by both]" in lines
    # A closed gate reads as its question, then its answer, once.
    assert "- Hosting is undecided. - Closed: the reception PC. [n00001; from the operator]" in lines
    assert not any("Closed: Closed:" in line for line in lines)
    # An unconfirmed note keeps its own mark, which already says who proposed it.
    assert "- Decision: Email too. [n00006; proposed by the model]" in lines
    # The delivery is marked as such, not as waiting for a confirmation.
    assert "- Runbook v1, saved as runbook.md. [n00005; the last delivery]" in lines
    assert ("- Paper reminders ruled out. Reopened by a decision: Paper reminders for patients without a phone. "
            "[n00008]") in lines
    since = lines.index("## Since the delivery")
    assert lines[since:] == [
        "## Since the delivery", "", "- Decision: Email too. [n00006]", "- Gate: Closed: the reception PC. [n00007]",
        "- Decision: Paper reminders for patients without a phone. [n00009]"]


@pytest.mark.parametrize("modes, line", [
    (["SYNTHESIS approved."], "Synthesis: approved; the artifact is being written."),
    (["SYNTHESIS approved.", "SHAPING: STOP."], "Synthesis: stopped before a delivery; shaping goes on."),
], ids=["entered", "ended"])
def test_markdown_synthesis_line(tmp_path, modes, line):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", text) for text in modes])
    assert line in recap_md(folder).splitlines()


def test_markdown_delivery_with_nothing_after_it(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook delivered.")])
    lines = recap_md(folder).splitlines()
    assert "Delivered: Runbook delivered. [n00002]; nothing changed since." in lines
    assert lines[lines.index("## Since the delivery") + 2] == "- none"
    # With nothing pending the markdown says so, as the JSON's zeros do (review of 37c278e).
    assert "Pending: nothing." in lines


# --------------------------------------------------------------------------
# The byte budget holds with the new keys

LONG = "x" * 1900


def budget_session():
    """300 notes: open gates and decisions early, SYNTHESIS at n00040, the delivery at n00041, 259 live notes after."""
    signals = [("mode", "SHAPING: long notes on purpose.")]
    signals += [("gate", "Open gate %d. %s" % (number, LONG[:300])) for number in range(1, 4)]
    signals += [("decision", "Decision %d. %s" % (number, LONG)) for number in range(1, 36)]
    signals += [("mode", "SYNTHESIS approved."), ("artifact", "Runbook delivered. " + LONG)]
    kinds = ("decision", "tension", "source", "discard")  # an artifact here would be a new delivery
    signals += [(kinds[number % len(kinds)], "After %d. %s" % (number, LONG)) for number in range(259)]
    assert len(signals) == 300
    return signals


@pytest.mark.parametrize("form", ["json", "md"])
def test_a_300_note_session_with_a_delivery_fits_the_default_budget(tmp_path, form):
    folder = tmp_path / "session"
    write_signal_session(folder, budget_session())

    result = run_notes("recap", "--format", form, folder=folder)

    assert result.code == 0, result
    assert_no_traceback(result)
    assert len(result.stdout.encode("utf-8")) <= 12288
    everything = session_recap(folder, max_bytes=100000000)
    assert [item["id"] for item in everything["delivery"]["after"]] == ["n%05d" % seq for seq in range(281, 301)]
    assert everything["delivery"]["more"] == 239
    if form == "json":
        # The notes after the delivery go oldest first, like the other lists; the newest stay.
        delivery = result.receipt["delivery"]
        assert delivery["after"] == everything["delivery"]["after"][-len(delivery["after"]):]
        assert 0 < len(delivery["after"]) < 20 and delivery["more"] == 259 - len(delivery["after"])
        assert result.receipt["pending"]["open_gates"] == 3
        assert result.receipt["synthesis"] == {"state": "delivered", "entered": "n00040", "delivered": "n00041"}
    else:
        assert "- Source: After 258. " in result.stdout
        assert "older not shown)" in result.stdout.split("## Since the delivery")[1]


@pytest.mark.parametrize("form", ["json", "md"])
def test_notes_after_the_delivery_go_before_the_budget_is_exceeded(tmp_path, form):
    # Open gates are never left out: with long ones, only the delivery's ids can make room.
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Open gate %d. %s" % (number, LONG)) for number in range(1, 6)]
                  + [("mode", "SYNTHESIS approved."), ("artifact", "Delivered.")]
                  + [("gate", "Closing %d." % number, {"ref": "n%05d" % number, "status": "open"})
                     for number in (1, 2, 3, 4, 5)] * 4)  # n00008-n00027, live, none superseded

    def size(budget):
        result = run_notes("recap", "--format", form, "--max-bytes", str(budget), folder=folder)
        assert_no_traceback(result)
        return result

    everything = size(100000000)
    full = len(everything.stdout.encode("utf-8"))
    # Find the smallest budget recap answers within.
    fits, fails = full, 1
    while fits - fails > 1:
        middle = (fits + fails) // 2
        if size(middle).code == 0:
            fits = middle
        else:
            fails = middle
    smallest = size(fits)
    assert len(smallest.stdout.encode("utf-8")) <= fits
    # One byte less is refused, naming a budget that does fit (not always the smallest one).
    message = assert_refused(size(fits - 1), 2, "--max-bytes %d;" % (fits - 1))
    named = int(message.split("run it again with --max-bytes ")[1].split(",")[0])
    assert named >= fits and size(named).code == 0
    # At the smallest budget every note after the delivery is gone, and counted.
    if form == "json":
        assert smallest.receipt["delivery"] == {"id": "n00007", "after": [], "more": 20}
        assert [item["id"] for item in everything.receipt["delivery"]["after"]] == ["n%05d" % seq
                                                                                    for seq in range(8, 28)]
    else:
        assert "- (20 older not shown)" in smallest.stdout.split("## Since the delivery")[1]
    # Each budget in between is kept, listing as many ids as fit.
    for budget in range(fits, full + 1, max(1, (full - fits) // 7)):
        result = size(budget)
        assert result.code == 0 and len(result.stdout.encode("utf-8")) <= budget, (budget, result)


# --------------------------------------------------------------------------
# --help states the rule

def test_help_says_what_enters_and_ends_synthesis_and_what_is_a_delivery():
    append_help = " ".join(run_notes("append", "--help").stdout.split())
    for words in ("A mode note whose text begins with the word SYNTHESIS enters synthesis",
                  "a later mode note that does not (a STOP appends one beginning SHAPING) ends it",
                  "an artifact note appended in synthesis is a delivery (unless inferred: a proposal), which ends "
                  "it too"):
        assert words in append_help, words
    recap_help = " ".join(run_notes("recap", "--help").stdout.split())
    for words in ("pending: how many gates are open and notes unconfirmed, since when",
                  "synthesis: entered, delivered or ended, and by which notes",
                  "delivery: the last artifact note appended in synthesis and the live notes after it",
                  "export_lag: how many notes the folder's export lacks"):
        assert words in recap_help, words
    assert "put" not in recap_help.split("pending:")[1].split(";")[0]


def test_markdown_notes_after_a_delivery_cannot_forge_structure(tmp_path):
    # A damaged log may hold a note of an unknown type: its type and text stay inside their line.
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Delivered."),
                           ("x\n# Forged*", "Line one\n## Forged heading")])
    lines = recap_md(folder).splitlines()
    assert lines[lines.index("## Since the delivery") + 2] == "- X # forged\\*: Line one ## Forged heading [n00003]"
    assert "## Forged heading" not in lines and "# Forged*" not in lines


# ==========================================================================
# recap: unconfirmed notes, closed gates, replacements, the operator's markdown, the size budget

# --------------------------------------------------------------------------
# 2 and 3. unconfirmed, closed gates, replaces; 6. the operator's markdown

# (type, text, extra arguments); the comments give each note's id.
LABELLED_SESSION = [
    ("gate", "Hosting is undecided.", []),  # n00001
    ("decision", "Reminders go out 48 hours ahead.", ["--provenance", "model"]),  # n00002
    ("source", "About 400 appointments a month.", ["--evidence", "inferred"]),  # n00003
    ("decision", "SMS is the channel.", ["--provenance", "op", "--evidence", "declared"]),  # n00004
    ("decision", "The operator confirms: reminders go out 48 hours ahead.",
     ["--ref", "n00002", "--provenance", "op", "--evidence", "declared"]),  # n00005
    ("gate", "Consent wording is undecided.", ["--provenance", "model", "--evidence", "inferred"]),  # n00006
    ("gate", "Hosting closed: the reception PC.",
     ["--ref", "n00001", "--status", "closed", "--provenance", "model", "--evidence", "inferred"]),  # n00007
    ("tension", "SMS cost grows with volume.", ["--provenance", "shared", "--evidence", "observed"]),  # n00008
    ("gate", "Payment links in reminders.", []),  # n00009
    ("gate", "Payment links deferred by the operator.",
     ["--ref", "n00009", "--status", "deferred", "--provenance", "op", "--evidence", "declared"]),  # n00010
    ("shape", "A nightly job sends SMS.", ["--provenance", "model", "--effect", "No patient app."]),  # n00011
    ("gate", "Retention period is undecided.", []),  # n00012
    ("gate", "Retention: 12 months after the last visit.", ["--ref", "n00012", "--status", "closed"]),  # n00013
]


@pytest.fixture
def labelled(tmp_path):
    folder = tmp_path / "clinic"
    for note_type, text, extra in LABELLED_SESSION:
        append(folder, note_type, text, *extra)
    return folder


def test_recap_lists_unconfirmed_notes_closed_gates_and_replacements(labelled):
    receipt = recap(labelled)

    del receipt["session_id"], receipt["path"]
    assert receipt == {
        "ok": True, "command": "recap", "total": 13, "mode": None,
        "shape": {"id": "n00011", "text": "A nightly job sends SMS.", "effect": "No patient app.",
                  "provenance": "model"},
        # A gate raised by the model is open all the same; pending counts it once, as open.
        "open_gates": [{"id": "n00006", "text": "Consent wording is undecided.", "status": "open",
                        "provenance": "model", "evidence": "inferred"}],
        "deferred_gates": [{"id": "n00009", "text": "Payment links in reminders.", "status": "deferred",
                            "update_id": "n00010", "update_text": "Payment links deferred by the operator.",
                            "update_provenance": "op", "update_evidence": "declared"}],
        # In log order of the note that makes each unconfirmed; n00002 left once the operator confirmed it.
        "unconfirmed": [
            {"id": "n00003", "type": "source", "text": "About 400 appointments a month.", "evidence": "inferred"},
            {"id": "n00001", "type": "gate", "text": "Hosting is undecided.", "status": "closed",
             "update_id": "n00007", "update_text": "Hosting closed: the reception PC.",
             "update_provenance": "model", "update_evidence": "inferred"},
            {"id": "n00011", "type": "shape", "text": "A nightly job sends SMS.", "effect": "No patient app.",
             "provenance": "model"},
        ],
        # A gate closed on the model's inference is not settled: it is only in unconfirmed.
        "closed_gates": [{"id": "n00012", "text": "Retention period is undecided.", "update_id": "n00013",
                          "closed_by": {"id": "n00013", "type": "gate",
                                        "text": "Retention: 12 months after the last visit."}}],
        "decisions": [
            {"id": "n00004", "text": "SMS is the channel.", "provenance": "op", "evidence": "declared"},
            {"id": "n00005", "text": "The operator confirms: reminders go out 48 hours ahead.", "replaces": "n00002",
             "provenance": "op", "evidence": "declared"},
        ],
        "discards": [],
        "tensions": [{"id": "n00008", "text": "SMS cost grows with volume.", "provenance": "shared",
                      "evidence": "observed"}],
        "sources": [],
        "artifacts": [],
        "superseded_count": 1,
        "export_lag": {"path": str(labelled / "session_export.json"), "record_count": None, "missing": 13},
        # The model's open gate n00006 counts once, as open.
        "pending": {"open_gates": 1, "unconfirmed": 3, "raised_since": "n00003"},
        "synthesis": None, "delivery": None,
    }


def test_markdown_recap_is_for_the_operator(labelled):
    text = recap_text(labelled, "--format", "md")

    assert text == "\n".join([
        "# Recap",
        "",
        "13 notes, 1 superseded by later ones.",
        "Export: no session_export.json yet.",
        "",
        "Pending: 1 open gate and 3 notes not yet confirmed, listed below.",
        "",
        "## Mode", "", "- none", "",
        "## Shape", "", "- A nightly job sends SMS. Effect: No patient app. [n00011; not yet confirmed]", "",
        "## Open gates", "", "- Consent wording is undecided. [n00006; not yet confirmed]", "",
        "## Deferred gates", "",
        # A settled point says who it came from: here the operator's update that deferred the gate.
        "- Payment links in reminders. Latest: Payment links deferred by the operator. "
        "[n00009; from the operator]",
        "",
        "## Not yet confirmed", "",
        "- Source: About 400 appointments a month. [n00003; inferred]",
        "- Gate (closed): Hosting is undecided. - Hosting closed: the reception PC. "
        "[n00001; proposed by the model, inferred]",
        "- Shape: A nightly job sends SMS. Effect: No patient app. [n00011; proposed by the model]",
        "",
        "## Closed gates", "",
        "- Retention period is undecided. - Retention: 12 months after the last visit. [n00012]",
        "",
        "## Decisions", "",
        "- SMS is the channel. [n00004; from the operator]",
        "- The operator confirms: reminders go out 48 hours ahead. [n00005; from the operator]",
        "",
        "## Discarded paths", "", "- none", "",
        "## Tensions", "", "- SMS cost grows with volume. [n00008; shared by both]", "",
        "## Sources", "", "- none", "",
        "## Artifact boundaries", "", "- none", "",
    ])


def test_closed_gates_keep_the_newest_closings_within_the_limit(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("gate", "Gate %d is open." % number) for number in range(1, 5)] + [
        ("gate", "Gate 3 closed.", {"ref": "n00003", "status": "closed"}),  # n00005
        ("gate", "Gate 1 closed.", {"ref": "n00001", "status": "closed"}),  # n00006
        ("gate", "Gate 4 closed.", {"ref": "n00004", "status": "closed"}),  # n00007
        ("gate", "Gate 2 closed.", {"ref": "n00002", "status": "closed"}),  # n00008
    ])

    everything = recap(folder)
    limited = recap(folder, "--limit", "2")

    # Newest closing first.
    assert [(gate["id"], gate["update_id"]) for gate in everything["closed_gates"]] == [
        ("n00002", "n00008"), ("n00004", "n00007"), ("n00001", "n00006"), ("n00003", "n00005")]
    assert "truncated" not in everything
    assert limited["closed_gates"] == [
        {"id": "n00002", "text": "Gate 2 is open.", "update_id": "n00008",
         "closed_by": {"id": "n00008", "type": "gate", "text": "Gate 2 closed."}},
        {"id": "n00004", "text": "Gate 4 is open.", "update_id": "n00007",
         "closed_by": {"id": "n00007", "type": "gate", "text": "Gate 4 closed."}}]
    assert limited["truncated"] == {"closed_gates": 2}
    assert limited["see_truncated"] == ["tail --type gate --limit 8"]


def test_a_gate_is_reopened_by_its_own_id_and_closed_again(session):
    append(session, "gate", "Hosting is undecided.")
    append(session, "gate", "Hosting closed: the reception PC.", "--ref", "n00001", "--status", "closed")
    assert recap(session)["closed_gates"][0]["update_id"] == "n00002"

    append(session, "gate", "Reopened: the reception PC is being replaced.", "--ref", "n00001", "--status", "open")
    state = recap(session)
    assert state["open_gates"] == [{"id": "n00001", "text": "Hosting is undecided.", "status": "open",
                                    "update_id": "n00003",
                                    "update_text": "Reopened: the reception PC is being replaced."}]
    assert state["closed_gates"] == []

    append(session, "gate", "Closed again: a small cloud VM.", "--ref", "n00001", "--status", "closed")
    state = recap(session)
    assert state["open_gates"] == []
    assert state["closed_gates"] == [{"id": "n00001", "text": "Hosting is undecided.", "update_id": "n00004",
                                      "closed_by": {"id": "n00004", "type": "gate",
                                                    "text": "Closed again: a small cloud VM."}}]


DEFAULT_BUDGET = 12288


# --------------------------------------------------------------------------
# 7. the size budget, on a realistic 300-note session

FILLER = ("the clinic's reception desk books most appointments by phone, and the nightly CSV export from the "
          "booking tool carries names, phone numbers, times and the dentist for every visit of the next days")


def sentence(label: str, length: int) -> str:
    """A sentence of exactly `length` characters that starts with label."""
    body = (label + ": " + FILLER * 2)[:length - 1].rstrip()
    return body + "." + "." * (length - len(body) - 1)


def realistic_session() -> list:
    """300 signals in blocks of ten: texts of about 150 characters, most with an effect."""
    signals = []
    for block in range(30):
        first, gate = "n%05d" % (10 * block + 1), "n%05d" % (10 * block + 2)
        signals.append(("decision", sentence("Decision %d" % block, 150),
                        {"effect": sentence("Consequence %d" % block, 95)}))
        signals.append(("gate", sentence("Gate %d" % block, 140), {"effect": sentence("Blocks %d" % block, 80)}))
        signals.append(("source", sentence("Source %d" % block, 145)))
        labels = {"provenance": "model"} if block % 6 == 3 else {"provenance": "op", "evidence": "declared"}
        signals.append(("decision", sentence("Default %d" % block, 155), dict(labels)))
        signals.append(("discard", sentence("Discarded %d" % block, 150), {"effect": sentence("Never %d" % block, 90)}))
        if block == 0:
            signals.append(("tension", sentence("Tension %d" % block, 140)))
        elif block - 1 in (3, 10, 17, 24):  # the gate of the block before stays open
            signals.append(("mode", sentence("Mode %d" % block, 120)))
        else:
            status = "deferred" if block - 1 in (5, 16) else "closed"
            signals.append(("gate", sentence("Gate %d %s" % (block - 1, status), 150),
                            {"ref": "n%05d" % (10 * block - 8), "status": status}))
        signals.append(("tension", sentence("Tension %d" % block, 150), {"effect": sentence("Watch %d" % block, 100)}))
        signals.append(("decision", sentence("Revised %d" % block, 150), {"ref": first} if block % 4 == 0 else {}))
        signals.append(("source" if block % 3 else "artifact", sentence("Boundary %d" % block, 150),
                        {"evidence": "inferred"} if block % 10 == 5 else {"effect": sentence("Keep %d" % block, 85)}))
        signals.append(("shape" if block % 2 else "mode", sentence("State %d" % block, 140)))
        assert len(signals) == 10 * (block + 1), gate
    return signals


@pytest.fixture(scope="module")
def big_session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("budget") / "clinic"
    write_session(folder, realistic_session())
    return folder


CUT_LISTS = ["closed_gates", "decisions", "discards", "tensions", "sources", "artifacts"]


def age(name, item) -> int:
    """The seq of the note that put an entry on its list: a closed gate's closing update, else the note."""
    return int((item["update_id"] if name == "closed_gates" else item["id"])[1:])


@pytest.mark.parametrize("form", ["json", "md"])
def test_recap_of_a_300_note_session_fits_the_default_budget(big_session, form):
    everything = recap(big_session, "--max-bytes", "100000000")
    unbounded = recap_text(big_session, "--format", form, "--max-bytes", "100000000")
    assert len(unbounded.encode("utf-8")) > 2 * DEFAULT_BUDGET  # without the budget it would not fit

    output = recap_text(big_session, "--format", form)

    assert len(output.encode("utf-8")) <= DEFAULT_BUDGET
    assert len(output.encode("utf-8")) > DEFAULT_BUDGET - 1000, "the budget is used, not wasted"
    # What recap never leaves out.
    assert len(everything["open_gates"]) == 5 and len(everything["deferred_gates"]) == 2
    assert len(everything["unconfirmed"]) == 8
    kept_ids = ([gate["id"] for gate in everything["open_gates"] + everything["deferred_gates"]]
                + [item["id"] for item in everything["unconfirmed"]]
                + [everything["mode"]["id"], everything["shape"]["id"]])
    for note_id in kept_ids:
        assert note_id in output, note_id
    if form == "md":
        assert output.count("\n") == len(output.splitlines())
        return
    state = json.loads(output)
    assert output == scannable(state), "compact, a line per key and per item of a list"
    for key in ("mode", "shape", "open_gates", "deferred_gates", "unconfirmed", "superseded_count", "export_lag"):
        assert state[key] == everything[key], key
    # The oldest entries went first, whatever their list, and each cut is counted.
    cut_ages, kept_ages = [], []
    for name in CUT_LISTS:
        full, kept = everything[name], state[name]
        if name == "closed_gates":  # shown newest first: compare in the order of the other lists
            full, kept = full[::-1], kept[::-1]
        assert kept == full[len(full) - len(kept):], name
        cut_ages += [age(name, item) for item in full[:len(full) - len(kept)]]
        kept_ages += [age(name, item) for item in kept]
        assert state["truncated"].get(name, 0) == everything.get("truncated", {}).get(name, 0) + \
            len(full) - len(kept), name
    assert cut_ages and max(cut_ages) < min(kept_ages)


def test_what_recap_left_out_can_be_seen_with_the_commands_it_gives(big_session):
    everything = recap(big_session, "--max-bytes", "100000000")
    state = recap(big_session)
    left_out = {item["id"] for name in ("decisions", "discards", "tensions", "sources", "artifacts")
                for item in everything[name] if item not in state[name]}
    assert left_out

    shown = set()
    for command in state["see_truncated"]:
        result = run_notes(*command.split(), folder=big_session)
        assert result.code == 0, (command, result)
        shown |= {record["id"] for record in result.receipt["records"]}
    assert left_out <= shown


@pytest.mark.parametrize("form", ["json", "md"])
def test_max_bytes_is_never_exceeded_and_only_a_budget_below_the_counts_is_refused(big_session, form):
    for budget in (200000, 40000, 20000, 16000, 12288, 11000, 10000, 9000, 8000, 7000, 5000, 4000, 3000, 2000):
        result = run_notes("recap", "--format", form, "--max-bytes", budget, folder=big_session)
        assert result.code == 0, (budget, result)
        assert len(result.stdout.encode("utf-8")) <= budget, budget
    # Below what mode, shape, counts and warnings need, recap refuses and names the size that fits.
    error = assert_refused(run_notes("recap", "--format", form, "--max-bytes", 300, folder=big_session), 2,
                           "--max-bytes 300")
    needed = int(re.search(r"--max-bytes (\d+)$", error).group(1))
    assert needed > 300
    fitted = recap_text(big_session, "--format", form, "--max-bytes", needed)
    assert len(fitted.encode("utf-8")) <= needed


def test_recap_leaves_out_the_oldest_gates_last_and_only_when_nothing_else_fits(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("gate", sentence("Long gate %d" % number, 1900)) for number in range(1, 4)]
                  + [("decision", "Small decision.")])
    before = folder_digest(folder)

    output = recap_text(folder, "--max-bytes", "3000")

    receipt = json.loads(output)
    assert len(output.encode("utf-8")) <= 3000
    assert [gate["id"] for gate in receipt["open_gates"]] == ["n00003"]
    assert receipt["decisions"] == []  # the other lists go first
    assert receipt["truncated"] == {"open_gates": 2, "decisions": 1}
    assert receipt["pending"]["open_gates"] == 3
    assert folder_digest(folder) == before


def test_recap_prints_a_line_per_item_and_other_receipts_keep_their_indent(big_session):
    output = recap_text(big_session)
    assert output == scannable(json.loads(output)) and output.startswith('{"ok":true,\n"command":"recap",\n')
    assert '\n"open_gates":[\n{"id":"' in output

    summary = run_notes("summary", folder=big_session)
    assert summary.stdout.startswith('{\n  "ok": true,\n  "command": "summary",')


@pytest.mark.parametrize("value, words", [("0", ["1 or more"]), ("-1", ["1 or more"]), ("abc", ["int"]),
                                          ("1.5", ["int"])])
def test_bad_max_bytes_is_refused(session, value, words):
    assert_refused(run_notes("recap", "--max-bytes", value, folder=session), 2, "--max-bytes", *words)


def test_markdown_recap_carries_no_receipt_keys_and_one_line_per_item(big_session):
    everything = recap(big_session, "--max-bytes", "100000000")
    text = recap_text(big_session, "--format", "md", "--max-bytes", "100000000")

    assert SESSION_ID not in text and str(big_session) not in text
    for key in ("session_id", "superseded_count", "export_lag", "truncated", '"ok"', "update_id", "{"):
        assert key not in text, key
    for line in text.splitlines():
        assert line == "" or line.startswith("# ") or line.startswith("## ") or line.startswith("- ") \
            or line[0].isdigit() or line.startswith(("Export: ", "Pending: ", "Synthesis: ", "Delivered: ")), line
    for name in ("open_gates", "deferred_gates", "closed_gates", "decisions", "discards", "tensions", "sources",
                 "artifacts"):
        for item in everything[name]:
            assert len([line for line in text.splitlines() if "[%s" % item["id"] in line]) == 1, item


def test_markdown_recap_counts_one_note_in_the_singular(session):
    append(session, "decision", "The log stays append-only.")
    assert recap_text(session, "--format", "md").splitlines()[2] == "1 note, 0 superseded by later ones."
