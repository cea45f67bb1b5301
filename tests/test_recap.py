"""Readback of the state of the idea (issue 5): recap (point 3) and the filtered tail (point 2)."""

from __future__ import annotations

import json

import pytest

from conftest import (SESSION_ID, assert_no_traceback, assert_refused, copy_fixture, folder_digest, notes,
                      read_records, run_notes, write_session)

RECAP_KEYS = ["ok", "command", "session_id", "path", "total", "mode", "shape", "open_gates", "deferred_gates",
              "unconfirmed", "closed_gates", "decisions", "discards", "tensions", "sources", "artifacts",
              "superseded_count", "export_lag"]

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
    assert list(receipt) == RECAP_KEYS + ["pending", "synthesis"]
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

    assert list(receipt) == RECAP_KEYS + ["pending", "synthesis"]
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
    }
    assert folder_digest(folder) == before


def test_recap_of_an_empty_session(session):
    session_id = json.loads((session / "session_meta.json").read_text(encoding="utf-8"))["session_id"]

    receipt = recap_of(session)

    assert list(receipt) == RECAP_KEYS
    assert receipt == {
        "ok": True, "command": "recap", "session_id": session_id, "path": str(session / "session_notes.jsonl"),
        "total": 0, "mode": None, "shape": None, "open_gates": [], "deferred_gates": [], "unconfirmed": [],
        "closed_gates": [], "decisions": [], "discards": [], "tensions": [], "sources": [], "artifacts": [],
        "superseded_count": 0,
        "export_lag": {"path": str(session / "session_export.json"), "record_count": None, "missing": 0}}


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
        assert list(receipt) == RECAP_KEYS + ["pending"]
    else:
        assert list(receipt) == RECAP_KEYS + ["pending", "truncated", "see_truncated"]
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
    assert list(receipt) == RECAP_KEYS + ["pending", "synthesis", "warnings"]
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
    assert list(receipt) == RECAP_KEYS
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
        {"id": "n00002", "text": "Paper reminders ruled out.",
         "reopened": {"id": "n00006", "type": "gate", "text": "Paper reminders after all?"}},
        {"id": "n00004", "text": "A mobile app ruled out: no budget.", "replaces": "n00003"},
    ]
    assert receipt["superseded_count"] == 2
    lines = notes.Session(folder).recap(format="md")["markdown"].splitlines()
    assert "- WhatsApp ruled out. Reopened by a decision: WhatsApp as an opt-in channel. [n00001]" in lines
    assert "- Paper reminders ruled out. Reopened as a question: Paper reminders after all? [n00002]" in lines


def test_a_discard_asked_about_by_a_deferred_gate_is_reopened_until_the_gate_closes(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("discard", "A cancellation fee ruled out."),
                           ("gate", "A fee for late cancellations, for the co-owner to weigh.",
                            {"about": "n00001", "status": "deferred", "provenance": "op"})])
    reopened = {"id": "n00001", "text": "A cancellation fee ruled out.",
                "reopened": {"id": "n00002", "type": "gate",
                             "text": "A fee for late cancellations, for the co-owner to weigh."}}

    assert notes.Session(folder).recap()["discards"] == [reopened]
    assert notes.Session(folder).show(note_id="n00001", compact=True)["reopened"] == reopened["reopened"]
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
