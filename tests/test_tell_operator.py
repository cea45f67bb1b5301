"""Receipts that carry the operator's sentence (issue 19, point 5).

restore always says, in tell_operator, what came back, which gates are open or
deferred and which file to keep from now on.  export says it only when there
is news beyond v0's receipt: an earlier copy at the same path that this export
replaced with other content, or gates still open after a delivery (an artifact
note appended in synthesis).  Open gates alone are not news: the v0 session has
two, and its export receipt stays v0's byte for byte.
"""

from __future__ import annotations

import json
import os

from conftest import V0_FIXTURES, assert_no_traceback, copy_fixture, run_notes, write_signals

SESSION_ID = "6e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
OTHER_SESSION_ID = "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
V0_SESSION_ID = "0f3c2b1c-3c66-49ee-8557-e323c0678aaf"


# --------------------------------------------------------------------------
# Local helpers

def write_session(folder, signals, session_id=SESSION_ID) -> None:
    write_signals(folder, session_id, signals)


def succeeded(result):
    assert result.code == 0, result
    assert_no_traceback(result)
    # Every receipt here is v0's form: 2-space JSON and a newline.
    assert result.stdout == json.dumps(result.receipt, indent=2, ensure_ascii=False) + "\n"
    return result.receipt


def append(folder, note_type, text, *extra):
    succeeded(run_notes("append", "--type", note_type, "--text", text, *extra, folder=folder))


GATED = [
    ("gate", "Hosting is undecided."),  # n00001, open
    ("gate", "Payment links.", {"status": "deferred"}),  # n00002, deferred
    ("gate", "Channel is undecided."),  # n00003, closed by n00005
    ("decision", "SMS is the channel."),  # n00004
    ("gate", "Channel closed: SMS.", {"ref": "n00003", "status": "closed"}),  # n00005
    ("gate", "Consent wording is undecided."),  # n00006, open
]


# --------------------------------------------------------------------------
# restore

def test_restore_into_a_fresh_folder_names_the_gates_and_the_file_to_keep(tmp_path):
    source = tmp_path / "source"
    write_session(source, GATED)
    export_path = str(source / "session_export.json")
    succeeded(run_notes("export", folder=source))
    target = tmp_path / "target"

    receipt = succeeded(run_notes("restore", export_path, folder=target))

    assert receipt == {
        "ok": True, "command": "restore", "session_id": SESSION_ID, "record_count": 6, "restored": 6,
        "path": str(target / "session_notes.jsonl"),
        "tell_operator": "The session is back with 6 notes; 2 questions still open and 1 question deferred; "
                         "from now on keep %s, which export writes, in place of %s, which the next note "
                         "makes out of date." % (target / "session_export.json", export_path)}


def test_restore_of_the_export_uploaded_into_the_folder_says_to_keep_that_file(tmp_path):
    target = tmp_path / "sandbox"
    target.mkdir()
    uploaded = target / "session_export.json"
    uploaded.write_bytes((V0_FIXTURES / "basic" / "session_export.json").read_bytes())

    receipt = succeeded(run_notes("restore", uploaded, folder=target))

    assert list(receipt) == ["ok", "command", "session_id", "record_count", "restored", "path", "tell_operator"]
    assert receipt["tell_operator"] == (
        "The session is back with 11 notes; 2 questions still open; keep session_export.json from now on, and "
        "download it again after each export.")


def test_restore_without_gates_and_with_many(tmp_path):
    quiet = tmp_path / "quiet"
    write_session(quiet, [("decision", "SMS is the channel.")])
    succeeded(run_notes("export", folder=quiet))
    receipt = succeeded(run_notes("restore", quiet / "session_export.json", folder=tmp_path / "quiet-back"))
    assert receipt["tell_operator"].startswith("The session is back with 1 note; no gate is open or deferred; ")

    busy = tmp_path / "busy"
    write_session(busy, [("gate", "Gate %d." % number) for number in range(1, 9)])
    succeeded(run_notes("export", folder=busy))
    receipt = succeeded(run_notes("restore", busy / "session_export.json", folder=tmp_path / "busy-back"))
    # A count, never ids (the operator does not see them): the sentence stays one short line.
    assert receipt["tell_operator"].startswith("The session is back with 8 notes; 8 questions still open; ")


def test_restore_accept_damaged_says_the_problems_came_along(tmp_path):
    source = tmp_path / "source"
    write_session(source, [("gate", "Hosting is undecided."), ("decision", "SMS is the channel.")])
    succeeded(run_notes("export", folder=source))
    export = json.loads((source / "session_export.json").read_text("utf-8"))
    export["records"][1]["text"] = "Edited by hand after its checksum was taken."
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(export, indent=2) + "\n", encoding="utf-8")
    target = tmp_path / "target"

    result = run_notes("restore", "--accept-damaged", damaged, folder=target)

    receipt = succeeded(result)
    assert list(receipt) == ["ok", "command", "session_id", "record_count", "restored", "path", "tell_operator",
                             "warnings"]
    assert receipt["tell_operator"] == (
        "The session is back with 2 notes, with 1 problem kept as the export held them (verify lists them); "
        "1 question still open; from now on keep %s, which export writes, in place of %s, which the next note "
        "makes out of date." % (target / "session_export.json", damaged))


# --------------------------------------------------------------------------
# export: v0's receipt when there is no news

def test_export_of_the_v0_session_has_no_news_however_it_is_written(tmp_path):
    # Two open gates and SYNTHESIS, but no delivery; the folder's export already holds the same 11 notes.
    folder = copy_fixture("basic", tmp_path / "basic")
    outside = tmp_path / "elsewhere" / "copy.json"
    for arguments, path in ((["export"], folder / "session_export.json"),
                            (["export", "--output", outside], outside),
                            (["export", "--output", outside], outside)):  # the same copy again
        result = run_notes(*arguments, folder=folder)
        assert succeeded(result) == {"ok": True, "command": "export", "record_count": 11, "path": str(path)}


def test_open_gates_without_a_delivery_are_no_news(tmp_path):
    plain = tmp_path / "plain"
    write_session(plain, GATED + [("artifact", "The runbook excludes raw notes.")])  # a boundary, no synthesis
    result = run_notes("export", folder=plain)
    assert succeeded(result) == {"ok": True, "command": "export", "record_count": 7,
                                 "path": str(plain / "session_export.json")}


# --------------------------------------------------------------------------
# export: news

def test_an_export_that_replaces_an_older_copy_says_the_download_is_out_of_date(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, GATED)
    path = str(folder / "session_export.json")
    first = succeeded(run_notes("export", folder=folder))
    assert first == {"ok": True, "command": "export", "record_count": 6, "path": path}
    append(folder, "decision", "Reminders go out 48 hours ahead.")

    receipt = succeeded(run_notes("export", folder=folder))

    assert receipt == {
        "ok": True, "command": "export", "record_count": 7, "path": path,
        "tell_operator": "This export replaced %s, which held 6 notes; this one holds 7 notes, so a copy "
                         "downloaded before is out of date: download this one; 2 questions still open and "
                         "1 question deferred." % path}
    # Exported again with nothing new: no news.
    assert succeeded(run_notes("export", folder=folder)) == {"ok": True, "command": "export", "record_count": 7,
                                                            "path": path}


def test_a_markdown_export_that_replaces_an_older_one_says_so(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("decision", "SMS is the channel.")])
    path = str(folder / "session_export.md")
    assert "tell_operator" not in succeeded(run_notes("export", "--format", "md", folder=folder))
    append(folder, "decision", "Reminders go out 48 hours ahead.")

    receipt = succeeded(run_notes("export", "--format", "md", folder=folder))

    assert receipt["tell_operator"] == (
        "This export replaced %s, which held 1 note; this one holds 2 notes, so a copy downloaded before is out "
        "of date: download this one." % path)


def test_an_export_over_another_sessions_export_says_so(tmp_path):
    other = tmp_path / "other"
    write_session(other, [("decision", "Another idea.")], session_id=OTHER_SESSION_ID)
    shared = tmp_path / "shared" / "export.json"
    succeeded(run_notes("export", "--output", shared, folder=other))
    folder = tmp_path / "session"
    write_session(folder, [("decision", "SMS is the channel.")])

    receipt = succeeded(run_notes("export", "--output", shared, folder=folder))

    assert receipt["tell_operator"] == (
        "This export replaced %s, which held another session; this one holds 1 note, so a copy downloaded "
        "before is out of date: download this one." % shared)


def test_open_gates_after_a_delivery_are_news(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, GATED + [("mode", "SYNTHESIS approved."),  # n00007
                                   ("artifact", "Runbook v1 delivered.")])  # n00008
    output = tmp_path / "out.json"

    receipt = succeeded(run_notes("export", "--output", output, folder=folder))

    assert receipt == {"ok": True, "command": "export", "record_count": 8, "path": str(output),
                       "tell_operator": "The artifact delivered last leaves 2 questions still open "
                                        "and 1 question deferred."}


def test_only_deferred_gates_after_a_delivery_are_no_news(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("gate", "Payment links.", {"status": "deferred"}), ("mode", "SYNTHESIS approved."),
                           ("artifact", "Runbook v1 delivered.")])
    receipt = succeeded(run_notes("export", "--output", tmp_path / "out.json", folder=folder))
    assert list(receipt) == ["ok", "command", "record_count", "path"]


def test_the_sentence_stays_on_one_line_whatever_the_path_holds(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("decision", "SMS is the channel.")])
    odd = tmp_path / "line\nbreak" / "export.json"
    succeeded(run_notes("export", "--output", odd, folder=folder))
    append(folder, "decision", "Reminders go out 48 hours ahead.")

    receipt = succeeded(run_notes("export", "--output", odd, folder=folder))

    assert "\n" not in receipt["tell_operator"]
    assert receipt["path"] == str(odd) and os.path.isfile(str(odd))
    assert "line[U+000A]break" in receipt["tell_operator"]
