"""Readback sized for a model (issue 26, point 4): compact tail and show, tail --grep by whole words.

The rules are tried in process through notes.Session and notes.main; each new
option also runs once through the real script, and once over MCP.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import NOTES, folder_digest, notes, run_notes, write_session

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


def test_tail_compact_prints_one_line_and_plain_tail_is_unchanged(written, capsys):
    folder, records = written

    assert notes.main(["--dir", str(folder), "tail", "--limit", "1", "--compact"]) == 0
    printed = capsys.readouterr().out
    assert printed == json.dumps({"ok": True, "command": "tail", "count": 1,
                                  "path": str(folder / "session_notes.jsonl"),
                                  "records": [compact(records[5])]},
                                 separators=(",", ":"), ensure_ascii=False) + "\n"
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


def test_show_says_which_note_reopened_a_discard(tmp_path):
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
    assert asked["reopened"] == {"id": "n00004", "type": "gate", "text": "SMS for the elderly?"}
    assert "reopened" not in session.show(note_id="n00003")


def test_tail_and_show_compact_through_the_real_script(written):
    folder, records = written
    before = folder_digest(folder)

    tail = run_notes("tail", "--limit", "2", "--compact", folder=folder)
    show = run_notes("show", "n00001", "--compact", folder=folder)

    assert tail.code == 0 and tail.stdout.count("\n") == 1, tail
    assert tail.receipt["records"] == [compact(records[4]), compact(records[5])]
    assert show.code == 0 and show.stdout.count("\n") == 1, show
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
    assert "then tail or show, with compact true" in started["instructions"]
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
