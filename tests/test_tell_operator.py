"""Receipts that carry the operator's sentence (issue 19, point 5; issue 30, points 1 and 3).

restore always says, in tell_operator, what came back, which gates are open or
deferred, how to tell a later export, and which file to keep from now on, in
the host's words.  export's keep says, every time, which file to keep and how;
its tell_operator speaks only when the operator has something to do: download
the file where the host has them download it (ChatGPT, Claude.ai), or answer
the gates a delivery (an artifact note appended in synthesis) left open.  Open
gates alone are nothing to do: the v0 session has two, and on a local host its
export receipt is v0's with keep added.
"""

from __future__ import annotations

import json
import os

from conftest import (V0_FIXTURES, appended, assert_no_traceback, copy_fixture, run_notes, write_signals)

SESSION_ID = "6e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
OTHER_SESSION_ID = "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
V0_SESSION_ID = "0f3c2b1c-3c66-49ee-8557-e323c0678aaf"
LOCAL_HOW = "Saved at this path on this computer."
CHATGPT_HOW = "ChatGPT makes this sandbox link, shown in the chat, a download link."


# --------------------------------------------------------------------------
# Local helpers

def write_signal_session(folder, signals, session_id=SESSION_ID) -> None:
    write_signals(folder, session_id, signals)


def on_host(host) -> dict:
    """The environment of a run that SHAPING_NOTES_HOST tells which host it is on."""
    return dict(os.environ, SHAPING_NOTES_HOST=host)


def succeeded(result):
    assert result.code == 0, result
    assert_no_traceback(result)
    # Every receipt here is v0's form: 2-space JSON and a newline.
    assert result.stdout == json.dumps(result.receipt, indent=2, ensure_ascii=False) + "\n"
    return result.receipt


def local_keep(path) -> dict:
    return {"file": str(path), "host": "local", "how": LOCAL_HOW}


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

def written_at(export_path) -> str:
    """The export's exported_at as the sentence shows it: 2026-03-14 10:00 UTC."""
    stamp = json.loads(open(str(export_path), encoding="utf-8").read())["exported_at"]
    return "%s %s UTC" % (stamp[:10], stamp[11:16])


def later_clue(export_path) -> str:
    return ("this export was written at %s: one downloaded later holds more notes, so restore that one "
            "instead if you have it" % written_at(export_path))


def test_restore_into_a_fresh_folder_names_the_gates_and_the_file_to_keep(tmp_path):
    source = tmp_path / "source"
    write_signal_session(source, GATED)
    export_path = str(source / "session_export.json")
    succeeded(run_notes("export", folder=source))
    target = tmp_path / "target"

    receipt = succeeded(run_notes("restore", export_path, folder=target))

    last = json.loads(open(export_path, encoding="utf-8").read())["records"][-1]
    assert receipt == {
        "ok": True, "command": "restore", "session_id": SESSION_ID, "record_count": 6, "restored": 6,
        "path": str(target / "session_notes.jsonl"),
        "export": {"file": export_path, "exported_at": json.loads(open(export_path).read())["exported_at"],
                   "last_note": {"id": "n00006", "type": "gate", "text": last["text"]}},
        "tell_operator": "The session is back with 6 notes; 2 questions still open and 1 question deferred; %s; "
                         "from now on keep %s, which export writes, in place of %s, which the next note "
                         "makes out of date." % (later_clue(export_path), target / "session_export.json",
                                                 export_path)}


def test_restore_of_the_export_uploaded_into_the_folder_says_to_keep_that_file(tmp_path):
    target = tmp_path / "sandbox"
    target.mkdir()
    uploaded = target / "session_export.json"
    uploaded.write_bytes((V0_FIXTURES / "basic" / "session_export.json").read_bytes())

    receipt = succeeded(run_notes("restore", uploaded, folder=target))

    assert list(receipt) == ["ok", "command", "session_id", "record_count", "restored", "path", "export",
                             "tell_operator"]
    assert receipt["tell_operator"] == (
        "The session is back with 11 notes; 2 questions still open; %s; keep %s from now on: export writes it."
        % (later_clue(uploaded), uploaded))


def test_restore_on_chatgpt_and_claude_ai_names_the_file_to_keep_in_the_hosts_words(tmp_path):
    # Exports now come only at checkpoints: the sentence no longer asks for a download after each one.
    for host, words in (("chatgpt", "from now on keep the session_export.json that export links in the chat "
                                    "(sandbox:%s)"),
                        ("claude-ai", "from now on keep the session_export.json that export writes in the "
                                      "outputs folder (%s)")):
        target = tmp_path / host
        target.mkdir()
        uploaded = target / "session_export.json"
        uploaded.write_bytes((V0_FIXTURES / "basic" / "session_export.json").read_bytes())

        receipt = succeeded(run_notes("restore", folder=target, env=on_host(host)))

        assert receipt["tell_operator"] == (
            "The session is back with 11 notes; 2 questions still open; %s; %s." % (later_clue(uploaded),
                                                                                   words % uploaded))


def test_restore_without_gates_and_with_many(tmp_path):
    quiet = tmp_path / "quiet"
    write_signal_session(quiet, [("decision", "SMS is the channel.")])
    succeeded(run_notes("export", folder=quiet))
    receipt = succeeded(run_notes("restore", quiet / "session_export.json", folder=tmp_path / "quiet-back"))
    assert receipt["tell_operator"].startswith("The session is back with 1 note; no gate is open or deferred; ")

    busy = tmp_path / "busy"
    write_signal_session(busy, [("gate", "Gate %d." % number) for number in range(1, 9)])
    succeeded(run_notes("export", folder=busy))
    receipt = succeeded(run_notes("restore", busy / "session_export.json", folder=tmp_path / "busy-back"))
    # A count, never ids (the operator does not see them): the sentence stays one short line.
    assert receipt["tell_operator"].startswith("The session is back with 8 notes; 8 questions still open; ")


def test_restore_accept_damaged_says_the_problems_came_along(tmp_path):
    source = tmp_path / "source"
    write_signal_session(source, [("gate", "Hosting is undecided."), ("decision", "SMS is the channel.")])
    succeeded(run_notes("export", folder=source))
    export = json.loads((source / "session_export.json").read_text("utf-8"))
    export["records"][1]["text"] = "Edited by hand after its checksum was taken."
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(export, indent=2) + "\n", encoding="utf-8")
    target = tmp_path / "target"

    result = run_notes("restore", "--accept-damaged", damaged, folder=target)

    receipt = succeeded(result)
    assert list(receipt) == ["ok", "command", "session_id", "record_count", "restored", "path", "export",
                             "tell_operator", "warnings"]
    # The last note does not verify: its text is not repeated.
    assert receipt["export"]["last_note"] == {"id": "n00002", "type": "decision", "text": None}
    assert receipt["tell_operator"] == (
        "The session is back with 2 notes, with 1 problem kept as the export held them (verify lists them); "
        "1 question still open; %s; from now on keep %s, which export writes, in place of %s, which the next "
        "note makes out of date." % (later_clue(damaged), target / "session_export.json", damaged))


# --------------------------------------------------------------------------
# export on a local host: keep every time, tell_operator only for a delivery with gates open

def test_export_of_the_v0_session_has_no_news_however_it_is_written(tmp_path):
    # Two open gates and SYNTHESIS, but no delivery; the folder's export already holds the same 11 notes.
    folder = copy_fixture("basic", tmp_path / "basic")
    outside = tmp_path / "elsewhere" / "copy.json"
    for arguments, path in ((["export"], folder / "session_export.json"),
                            (["export", "--output", outside], outside),
                            (["export", "--output", outside], outside)):  # the same copy again
        result = run_notes(*arguments, folder=folder)
        assert succeeded(result) == {"ok": True, "command": "export", "record_count": 11, "path": str(path),
                                     "keep": local_keep(path)}


def test_open_gates_without_a_delivery_are_no_news(tmp_path):
    plain = tmp_path / "plain"
    write_signal_session(plain, GATED + [("artifact", "The runbook excludes raw notes.")])  # a boundary, no synthesis
    result = run_notes("export", folder=plain)
    assert succeeded(result) == {"ok": True, "command": "export", "record_count": 7,
                                 "path": str(plain / "session_export.json"),
                                 "keep": local_keep(plain / "session_export.json")}


def test_a_local_export_that_replaces_an_older_copy_gives_the_operator_nothing_to_do(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, GATED)
    path = folder / "session_export.json"
    succeeded(run_notes("export", folder=folder))
    appended(folder, "decision", "Reminders go out 48 hours ahead.")
    for host in ("local", "mcp"):
        receipt = succeeded(run_notes("export", folder=folder, env=on_host(host)))
        assert receipt == {"ok": True, "command": "export", "record_count": 7, "path": str(path),
                           "keep": {"file": str(path), "host": host, "how": LOCAL_HOW if host == "local" else
                                    "Saved at this path on the computer that runs the MCP server."}}


def test_open_gates_after_a_delivery_are_news(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, GATED + [("mode", "SYNTHESIS approved."),  # n00007
                                   ("artifact", "Runbook v1 delivered.")])  # n00008
    output = tmp_path / "out.json"

    receipt = succeeded(run_notes("export", "--output", output, folder=folder))

    assert receipt == {"ok": True, "command": "export", "record_count": 8, "path": str(output),
                       "keep": local_keep(output),
                       "tell_operator": "The artifact delivered last leaves 2 questions still open "
                                        "and 1 question deferred."}


def test_only_deferred_gates_after_a_delivery_are_no_news(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Payment links.", {"status": "deferred"}), ("mode", "SYNTHESIS approved."),
                           ("artifact", "Runbook v1 delivered.")])
    receipt = succeeded(run_notes("export", "--output", tmp_path / "out.json", folder=folder))
    assert list(receipt) == ["ok", "command", "record_count", "path", "keep"]


# --------------------------------------------------------------------------
# export where the operator downloads: every time, in the host's words

def test_a_chatgpt_export_asks_for_the_download_every_time(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, GATED)
    path = str(folder / "session_export.json")
    keep = {"file": "sandbox:" + path, "host": "chatgpt", "how": CHATGPT_HOW}
    download = ("Download session_export.json (%s) from its link in the chat and keep it: it brings the session "
                "back in a new conversation")
    first = succeeded(run_notes("export", folder=folder, env=on_host("chatgpt")))
    assert first == {"ok": True, "command": "export", "record_count": 6, "path": path, "keep": keep,
                     "tell_operator": download % "6 notes" + "."}
    appended(folder, "decision", "Reminders go out 48 hours ahead.")

    receipt = succeeded(run_notes("export", folder=folder, env=on_host("chatgpt")))

    assert receipt == {"ok": True, "command": "export", "record_count": 7, "path": path, "keep": keep,
                       "tell_operator": download % "7 notes" + "; the copy it replaced held 6 notes."}
    # Exported again with nothing new: still which file to keep, and the download.
    assert succeeded(run_notes("export", folder=folder, env=on_host("chatgpt"))) == dict(
        receipt, tell_operator=download % "7 notes" + ".")


def test_a_claude_ai_markdown_export_names_the_outputs_folder(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("decision", "SMS is the channel.")])
    path = folder / "session_export.md"
    assert "tell_operator" in succeeded(run_notes("export", "--format", "md", folder=folder,
                                                  env=on_host("claude-ai")))
    appended(folder, "decision", "Reminders go out 48 hours ahead.")

    receipt = succeeded(run_notes("export", "--format", "md", folder=folder, env=on_host("claude-ai")))

    assert receipt["keep"] == {
        "file": str(path), "host": "claude-ai",
        "how": "Claude.ai offers its outputs folder (/mnt/user-data/outputs) for download: this is "
               "session_export.md in %s." % folder}
    assert receipt["tell_operator"] == (
        "Download session_export.md (2 notes) from the outputs folder and keep it; the copy it replaced held "
        "1 note.")


def test_an_export_over_another_sessions_export_says_so(tmp_path):
    other = tmp_path / "other"
    write_signal_session(other, [("decision", "Another idea.")], session_id=OTHER_SESSION_ID)
    shared = tmp_path / "shared" / "export.json"
    succeeded(run_notes("export", "--output", shared, folder=other))
    folder = tmp_path / "session"
    write_signal_session(folder, [("decision", "SMS is the channel.")])

    receipt = succeeded(run_notes("export", "--output", shared, folder=folder, env=on_host("chatgpt")))

    assert receipt["tell_operator"] == (
        "Download export.json (1 note) from its link in the chat and keep it: it brings the session back in a "
        "new conversation; the copy it replaced held another session.")


def test_a_delivery_with_gates_open_joins_the_download(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, GATED + [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered.")])

    receipt = succeeded(run_notes("export", "--format", "md", folder=folder, env=on_host("chatgpt")))

    assert receipt["tell_operator"] == (
        "Download session_export.md (8 notes) from its link in the chat and keep it; the artifact delivered "
        "last leaves 2 questions still open and 1 question deferred.")


def test_the_host_comes_from_the_session_folder_unless_the_variable_says_otherwise(tmp_path, monkeypatch):
    import notes

    monkeypatch.delenv("SHAPING_NOTES_HOST", raising=False)
    assert [notes._session_host(folder) for folder in (
        "/mnt/data", "/mnt/data/shaping", "/mnt/user-data/outputs/shaping", "/mnt/user-data/uploads",
        "/mnt/database", str(tmp_path))] == ["chatgpt", "chatgpt", "claude-ai", "local", "local", "local"]
    assert notes._session_host(str(tmp_path), over_mcp=True) == "mcp"
    monkeypatch.setenv("SHAPING_NOTES_HOST", "claude-ai")
    assert notes._session_host("/mnt/data", over_mcp=True) == "claude-ai"


def test_an_unknown_host_is_refused_without_echoing_it(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("decision", "SMS is the channel.")])
    (folder / "session_export.json").write_bytes(b"")  # not an export: refused before any write anyway
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    for value in ("ChatGPT", "", "sk-live-4f9Qz81mXcV0pLr2TyBn"):
        for arguments in (["export", "--output", tmp_path / "out.json"], ["restore", folder / "x.json"],
                          ["restore"]):
            result = run_notes(*arguments, folder=folder, env=on_host(value))
            assert result.code == 2 and result.receipt["ok"] is False, (value, arguments, result)
            error = result.receipt["error"]
            if arguments[0] == "export" or arguments == ["restore"]:
                assert error == ("SHAPING_NOTES_HOST names no host this tool knows; set it to one of chatgpt, "
                                 "claude-ai, local, mcp, or unset it; nothing was changed"), error
            assert (not value or value not in error), error
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert not (tmp_path / "out.json").exists()


def test_the_sentence_stays_on_one_line_whatever_the_path_holds(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("decision", "SMS is the channel.")])
    odd = tmp_path / "line\nbreak" / "export.json"
    succeeded(run_notes("export", "--output", odd, folder=folder, env=on_host("claude-ai")))
    appended(folder, "decision", "Reminders go out 48 hours ahead.")

    receipt = succeeded(run_notes("export", "--output", odd, folder=folder, env=on_host("claude-ai")))

    assert "\n" not in receipt["tell_operator"] and "\n" not in receipt["keep"]["how"]
    assert receipt["path"] == str(odd) and os.path.isfile(str(odd))
    assert receipt["keep"]["file"] == str(odd)
    assert "line[U+000A]break" in receipt["keep"]["how"]
