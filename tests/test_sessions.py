"""Sessions and hosts: one folder per idea, moving a session, the hand-off sentence receipts carry
for the operator on each host, and every host setup the README shows."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import (NOTES, REPO, SESSION_ID, V0_FIXTURES, appended, assert_no_traceback, assert_refused,
                      claude_upload, code_blocks, copy_fixture, fenced_blocks, folder_digest, notes, read_records,
                      run_here, run_notes, write_export, write_session, write_signals)


# ==========================================================================
# One folder per idea, and moving a session

SECRET = "AKIA" + "Q3EGRIWSXN5TNPFK"  # an AWS key id's shape, never a real one


def receipt_of(capsys, *argv):
    """notes.main(argv) in this process: (exit code, receipt)."""
    code = notes.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, (out, err)
    return code, json.loads(out)


# --------------------------------------------------------------------------
# --session NAME: a folder of its own below the session folder

def test_session_is_a_folder_of_its_own_below_the_dir(tmp_path, capsys):
    base = tmp_path / "base"
    code, first = receipt_of(capsys, "--dir", base, "--session", "pricing-page", "append", "--type", "decision",
                             "--text", "Monthly plans only.")
    code_after, second = receipt_of(capsys, "--dir", base, "append", "--session", "pricing-page", "--type", "gate",
                                    "--text", "Annual discount is open.")
    assert (code, code_after) == (0, 0)
    log = str(base / "sessions" / "pricing-page" / "session_notes.jsonl")
    assert first == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1, "path": log, "created": True}
    assert second == {"ok": True, "command": "append", "note_id": "n00002", "seq": 2, "path": log}
    # The folder's own session is another idea: untouched, not even started.
    assert sorted(os.listdir(str(base))) == ["sessions"]
    assert sorted(os.listdir(str(base / "sessions"))) == ["pricing-page"]
    assert oct(os.stat(str(base / "sessions" / "pricing-page")).st_mode & 0o777) == "0o700"


def test_the_python_api_takes_session_as_the_command_line_does(tmp_path):
    base = tmp_path / "base"
    receipt = notes.Session(base, session="idea.2").append(type="decision", text="Kept apart.")
    assert receipt["path"] == str(base / "sessions" / "idea.2" / "session_notes.jsonl")
    assert notes.Session(base, session="idea.2").summary()["total"] == 1
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(base).summary()
    assert "no session in %s" % base in refused.value.message


BAD_NAMES = ["", ".hidden", "-x", "_x", "a/b", "..", "a" * 65, "two words", "caf\u00e9", "x\n", "a\\b",
             SECRET + "/x", "sessions/" + SECRET]


@pytest.mark.parametrize("name", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_a_bad_session_name_is_refused_unrepeated_and_nothing_is_written(tmp_path, capsys, name):
    base = tmp_path / "base"
    write_session(base, [("decision", "Already here.")])
    before = folder_digest(tmp_path)
    code, receipt = receipt_of(capsys, "--dir", base, "--session=" + name, "append", "--type", "decision",
                               "--text", "Never written.")
    assert code == 2
    assert receipt == {"ok": False, "error": "--session takes 1 to 64 letters, digits, -, _ or ., the first a "
                                            "letter or digit (such as pricing-page); the name given is not one"}
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(base, session=name)
    assert refused.value.message == receipt["error"] and refused.value.exit_code == 2
    assert folder_digest(tmp_path) == before


def test_names_at_the_edges_are_taken(tmp_path):
    for name in ("a", "9", "A" * 64, "v1.2_final-cut", "x.."):
        receipt = notes.Session(tmp_path, session=name).init()
        assert receipt["path"] == str(tmp_path / "sessions" / name / "session_notes.jsonl")


def test_session_env_and_lone_script_bases(tmp_path):
    """SHAPING_NOTES_DIR, else a lone notes.py's own folder, is the base; without --session nothing changes."""
    tool = tmp_path / "tool"
    tool.mkdir()
    script = tool / "notes.py"
    shutil.copy(str(NOTES), str(script))
    env = {key: value for key, value in os.environ.items() if key != "SHAPING_NOTES_DIR"}
    alone = run_notes("append", "--type", "decision", "--text", "v0's folder.", script=script, cwd=tmp_path, env=env)
    named = run_notes("--session", "idea", "append", "--type", "decision", "--text", "Beside it.", script=script,
                      cwd=tmp_path, env=env)
    from_env = run_notes("--session", "idea", "init", script=script, cwd=tmp_path,
                         env=dict(env, SHAPING_NOTES_DIR=str(tmp_path / "env")))
    assert (alone.code, named.code, from_env.code) == (0, 0, 0), (alone, named, from_env)
    assert alone.receipt["path"] == str(tool / "session_notes.jsonl")
    assert named.receipt["path"] == str(tool / "sessions" / "idea" / "session_notes.jsonl")
    assert from_env.receipt["path"] == str(tmp_path / "env" / "sessions" / "idea" / "session_notes.jsonl")


def test_an_installed_copy_keeps_sessions_below_its_data_folder(tmp_path):
    package = tmp_path / "lib" / "python3.11" / "site-packages"
    package.mkdir(parents=True)
    shutil.copy(str(NOTES), str(package / "notes.py"))
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "SHAPING_NOTES_DIR"}
    env.update(HOME=str(home), XDG_DATA_HOME=str(tmp_path / "data"))
    listed = run_notes("sessions", script=package / "notes.py", cwd=tmp_path, env=env)
    assert listed.code == 0 and listed.receipt["sessions"] == [], listed
    assert not os.path.lexists(str(tmp_path / "data"))  # sessions reads only: no data folder made for it
    default = run_notes("append", "--type", "decision", "--text", "Where it always was.",
                        script=package / "notes.py", cwd=tmp_path, env=env)
    named = run_notes("--session", "second-idea", "append", "--type", "decision", "--text", "Apart.",
                      script=package / "notes.py", cwd=tmp_path, env=env)
    data = tmp_path / "data" / "shaping-notes"
    assert default.receipt["path"] == str(data / "session_notes.jsonl")
    assert named.receipt["path"] == str(data / "sessions" / "second-idea" / "session_notes.jsonl")


# --------------------------------------------------------------------------
# sessions: each session of the folder, read only

@pytest.fixture
def three(tmp_path):
    """The folder's own session (an export behind by one note), and two named ones."""
    base = tmp_path / "base"
    records = write_session(base, [("gate", "Host runtime is open."), ("decision", "Python only."),
                                   ("gate", "Pricing is deferred.", {"status": "deferred"})])
    write_export(base / "session_export.json", records[:2])
    write_session(base / "sessions" / "beta", [("gate", "Open one."), ("gate", "Closed: yes.",
                                                                         {"ref": "n00001", "status": "closed"})],
                  session_id="11111111-2222-4333-8444-555555555555")
    write_session(base / "sessions" / "alpha", [], session_id="66666666-7777-4888-8999-000000000000")
    return base


def test_sessions_lists_each_with_its_notes_last_note_gates_and_export(three, capsys):
    before = folder_digest(three)
    code, receipt = receipt_of(capsys, "--dir", three, "sessions")
    assert code == 0
    assert receipt == {
        "ok": True, "command": "sessions", "path": str(three), "current": None, "count": 3,
        "sessions": [
            {"name": None, "path": str(three), "total": 3,
             "last_note": {"id": "n00003", "type": "gate", "text": "Pricing is deferred."},
             "open_gates": 1, "deferred_gates": 1,
             "last_export": {"path": str(three / "session_export.json"), "record_count": 2, "missing": 1}},
            {"name": "alpha", "path": str(three / "sessions" / "alpha"), "total": 0, "last_note": None,
             "open_gates": 0, "deferred_gates": 0, "last_export": None},
            {"name": "beta", "path": str(three / "sessions" / "beta"), "total": 2,
             "last_note": {"id": "n00002", "type": "gate", "text": "Closed: yes."},
             "open_gates": 0, "deferred_gates": 0, "last_export": None},
        ]}
    assert folder_digest(three) == before  # read only: no lock file, no folder, nothing
    assert notes.Session(three, session="beta").sessions() == dict(receipt, current="beta")


def test_sessions_skips_what_is_no_session_and_reports_what_it_cannot_read(three, capsys):
    below = three / "sessions"
    (below / "empty").mkdir()  # no session started there
    (below / ".hidden").mkdir()
    write_session(below / ".hidden", [("decision", "A name --session never gives.")])
    (below / "a-file").write_text("not a folder")
    (below / "broken").mkdir()
    (below / "broken" / "session_meta.json").write_text("{not json")
    with open(str(below / "beta" / "session_notes.jsonl"), "ab") as handle:
        handle.write(b"{half a line\n")
    code, receipt = receipt_of(capsys, "--dir", three, "sessions")
    assert code == 0
    assert [entry["name"] for entry in receipt["sessions"]] == [None, "alpha", "beta", "broken"]
    broken = receipt["sessions"][3]
    assert set(broken) == {"name", "path", "error"} and "is damaged" in broken["error"]
    assert receipt["sessions"][2]["total"] == 2 and receipt["sessions"][2]["problems"] == 1
    assert "problems" not in receipt["sessions"][1] and "warnings" not in receipt


def test_sessions_is_bounded(three, capsys, monkeypatch):
    monkeypatch.setattr(notes, "_SESSIONS_LISTED", 2)
    code, receipt = receipt_of(capsys, "--dir", three, "sessions")
    assert code == 0
    assert [entry["name"] for entry in receipt["sessions"]] == [None, "alpha"]
    assert (receipt["count"], receipt["not_listed"]) == (2, 1)


def test_sessions_of_a_folder_that_does_not_exist_creates_nothing(tmp_path, capsys):
    code, receipt = receipt_of(capsys, "--dir", tmp_path / "nothing", "sessions")
    assert code == 0
    assert receipt == {"ok": True, "command": "sessions", "path": str(tmp_path / "nothing"), "current": None,
                       "count": 0, "sessions": []}
    assert os.listdir(str(tmp_path)) == []


def test_sessions_on_the_command_line(three):
    """The real script, as a user runs it: one receipt, exit 0, --session naming the current one."""
    result = run_notes("--session", "beta", "sessions", folder=three)
    assert result.code == 0, result
    assert result.receipt["current"] == "beta"
    assert [entry["name"] for entry in result.receipt["sessions"]] == [None, "alpha", "beta"]


# --------------------------------------------------------------------------
# Move a session: export where you are, restore where you go (README "Move a session")

def readme_move_section() -> str:
    text = (REPO / "README.md").read_text("utf-8")
    start = text.index("\n## Move a session\n")
    return text[start:text.index("\n## ", start + 1)]


def sandbox_with_script(folder):
    """A host's folder holding a copy of notes.py, as ChatGPT's /mnt/data does."""
    folder.mkdir(parents=True)
    shutil.copy(str(NOTES), str(folder / "notes.py"))
    return folder / "notes.py"


def shaped(folder, *extra, **options):
    """Two notes of one idea in folder (an open gate and a decision), through the real script."""
    for note_type, text in (("gate", "Is the log append-only?"), ("decision", "The log stays append-only.")):
        result = run_notes(*extra, "append", "--type", note_type, "--text", text, folder=folder, **options)
        assert result.code == 0, result


def test_chatgpt_to_a_laptop_folder(tmp_path):
    """ChatGPT keeps the session beside notes.py (/mnt/data); the operator downloads the export and
    restores it on a laptop, in a named session."""
    script = sandbox_with_script(tmp_path / "mnt-data")
    shaped(None, script=script)
    exported = run_notes("export", script=script)
    assert exported.receipt["path"] == str(tmp_path / "mnt-data" / "session_export.json")
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    shutil.copy(exported.receipt["path"], str(downloads / "session_export.json"))
    laptop = tmp_path / "laptop"
    restored = run_notes("--session", "shaping", "restore", downloads / "session_export.json", folder=laptop)
    assert restored.code == 0, restored
    assert restored.receipt["path"] == str(laptop / "sessions" / "shaping" / "session_notes.jsonl")
    assert read_records(laptop / "sessions" / "shaping") == read_records(tmp_path / "mnt-data")


def test_a_laptop_folder_to_claude_ai_and_back_by_fast_forward(tmp_path):
    """The laptop's export goes up to Claude.ai (uploads), work goes on under outputs, and its later
    export fast-forwards the laptop's folder, which held the first part of the same session."""
    laptop = tmp_path / "laptop"
    shaped(laptop)
    run_notes("export", folder=laptop)
    uploads, outputs = tmp_path / "user-data" / "uploads", tmp_path / "user-data" / "outputs" / "shaping"
    uploads.mkdir(parents=True)
    shutil.copy(str(laptop / "session_export.json"), str(uploads / "session_export.json"))
    assert run_notes("restore", uploads / "session_export.json", folder=outputs).code == 0
    assert run_notes("append", "--type", "gate", "--ref", "n00001", "--status", "closed", "--text",
                     "Closed: yes, append-only.", folder=outputs).code == 0
    assert run_notes("export", folder=outputs).code == 0
    downloaded = tmp_path / "session_export.json"
    shutil.copy(str(outputs / "session_export.json"), str(downloaded))
    forward = run_notes("restore", downloaded, folder=laptop)
    assert forward.code == 0, forward
    assert (forward.receipt["record_count"], forward.receipt["restored"]) == (3, 1)
    assert read_records(laptop) == read_records(outputs)


def test_claude_ai_to_chatgpt(tmp_path):
    """An export downloaded from Claude.ai's outputs is uploaded next to notes.py in ChatGPT and restored."""
    outputs = tmp_path / "outputs" / "shaping"
    shaped(outputs)
    assert run_notes("export", folder=outputs).code == 0
    script = sandbox_with_script(tmp_path / "mnt-data")
    upload = tmp_path / "mnt-data" / "session_export.json"
    shutil.copy(str(outputs / "session_export.json"), str(upload))
    restored = run_notes("restore", upload, script=script)
    assert restored.code == 0, restored
    assert restored.receipt["path"] == str(tmp_path / "mnt-data" / "session_notes.jsonl")
    assert read_records(tmp_path / "mnt-data") == read_records(outputs)


def test_an_mcp_host_to_a_laptop_folder(tmp_path):
    """The export tool writes in the session folder and names its full path; the CLI restores that file."""
    host = tmp_path / "host"
    shaped(host)
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "export", "arguments": {}}}]
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(host), "mcp"], cwd=str(tmp_path),
                               input="".join(json.dumps(message) + "\n" for message in messages).encode(),
                               capture_output=True, timeout=60)
    (answer,) = [json.loads(line) for line in completed.stdout.decode().splitlines()]
    path = answer["result"]["structuredContent"]["path"]
    assert os.path.isabs(path) and path == str(host / "session_export.json") and os.path.isfile(path)
    restored = run_notes("restore", path, folder=tmp_path / "laptop")
    assert restored.code == 0 and read_records(tmp_path / "laptop") == read_records(host), restored


def test_the_readme_section_shows_each_way_and_its_commands_run(tmp_path):
    section = readme_move_section()
    for host in ("ChatGPT", "Claude.ai", "laptop", "MCP"):
        assert host in section, host
    commands = [line for block in code_blocks(section, "") for line in block.splitlines()
                if line.startswith("python3 -S ")]
    assert len(commands) >= 3, section
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    write_session(tmp_path / "demo", [("gate", "Open."), ("decision", "Kept.")])
    write_export(tmp_path / "demo" / "session_export.json", read_records(tmp_path / "demo"))
    for command in commands:
        completed = subprocess.run(["bash", "-c", command.replace("python3 -S", sys.executable + " -S")],
                                   cwd=str(tmp_path), capture_output=True, timeout=60)
        assert completed.returncode == 0, (command, completed)


# ==========================================================================
# Receipts that carry the operator's sentence

OPERATOR_SESSION_ID = "6e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
OTHER_SESSION_ID = "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
V0_SESSION_ID = "0f3c2b1c-3c66-49ee-8557-e323c0678aaf"
LOCAL_HOW = "Saved at this path on this computer."
CHATGPT_HOW = "ChatGPT makes this sandbox link, shown in the chat, a download link."


# --------------------------------------------------------------------------
# Local helpers

def write_signal_session(folder, signals, session_id=OPERATOR_SESSION_ID) -> None:
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


def test_restore_help_says_it_writes_an_export_into_the_session_folder(tmp_path, capsys):
    assert notes.main(["--dir", str(tmp_path / "untouched"), "restore", "--help"]) == 0
    assert "and export it there" in " ".join(capsys.readouterr().out.split())
    assert not (tmp_path / "untouched").exists()


def test_restore_into_a_fresh_folder_names_the_gates_and_the_file_to_keep(tmp_path):
    source = tmp_path / "source"
    write_signal_session(source, GATED)
    export_path = str(source / "session_export.json")
    succeeded(run_notes("export", folder=source))
    target = tmp_path / "target"

    receipt = succeeded(run_notes("restore", export_path, folder=target))

    last = json.loads(open(export_path, encoding="utf-8").read())["records"][-1]
    assert receipt == {
        "ok": True, "command": "restore", "session_id": OPERATOR_SESSION_ID, "record_count": 6, "restored": 6,
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
    for host, words in (("chatgpt", "from now on keep the session_export.json each export links in the chat "
                                    "(sandbox:%s)"),
                        ("claude-ai", "from now on keep the session_export.json each export writes in the "
                                      "outputs folder (%s)")):
        target = tmp_path / host
        target.mkdir()
        uploaded = target / "session_export.json"
        uploaded.write_bytes((V0_FIXTURES / "basic" / "session_export.json").read_bytes())

        receipt = succeeded(run_notes("restore", folder=target, env=on_host(host)))

        assert receipt["tell_operator"] == (
            "The session is back with 11 notes; 2 questions still open; %s; %s." % (later_clue(uploaded),
                                                                                   words % uploaded))


def test_restore_of_an_upload_on_a_download_host_writes_the_folders_export(tmp_path, monkeypatch, capsys):
    # Rounds 16 to 19: on Claude.ai uploads land outside the session folder, so recap counted every restored note
    # as missing from an export there, and the outputs folder held nothing to download until a checkpoint.
    upload, folder = claude_upload(tmp_path, monkeypatch)
    uploaded = upload.read_bytes()

    def restore(into):
        code = notes.main(["--dir", str(into), "restore", str(upload)])
        return code, json.loads(capsys.readouterr().out)

    code, receipt = restore(folder)
    ours = folder / "session_export.json"
    assert code == 0 and receipt["exported"] == os.path.join(os.path.realpath(str(folder)), "session_export.json")
    assert list(receipt) == ["ok", "command", "session_id", "record_count", "restored", "path", "export",
                             "exported", "tell_operator"]
    assert json.loads(ours.read_text("utf-8"))["records"] == json.loads(uploaded)["records"]
    assert notes.Session(folder).recap()["export_lag"]["missing"] == 0 and upload.read_bytes() == uploaded
    written = ours.read_bytes()
    code, receipt = restore(folder)  # a folder that holds its export keeps it as it is
    assert code == 0 and "exported" not in receipt and ours.read_bytes() == written
    monkeypatch.setenv("SHAPING_NOTES_HOST", "local")  # the file restored from is on the user's own disk
    code, receipt = restore(tmp_path / "here")
    assert code == 0 and "exported" not in receipt and not (tmp_path / "here" / "session_export.json").exists()


def test_a_restore_whose_export_fails_still_stands(tmp_path, monkeypatch, capsys):
    # A reviewer's find: a full disk while writing the folder's export turned a finished restore into exit 1.
    upload, folder = claude_upload(tmp_path, monkeypatch)

    def full_disk(self, **options):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(notes.Session, "export", full_disk)
    code = notes.main(["--dir", str(folder), "restore", str(upload)])
    receipt = json.loads(capsys.readouterr().out)
    assert code == 0 and receipt["exported"] is None and receipt["restored"] == 11
    assert sorted(os.listdir(folder)) == ["session_meta.json", "session_notes.jsonl", "session_notes.lock"]
    monkeypatch.undo()
    assert notes.Session(folder).verify()["ok"] is True


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
                assert error == ("SHAPING_NOTES_HOST names no known host; set it to one of chatgpt, claude-ai, "
                                 "local, mcp, or unset it; nothing was changed"), error
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


# ==========================================================================
# Every host setup the README shows

README = (REPO / "README.md").read_text("utf-8")
NOTES_PLACEHOLDER = "/absolute/path/to/notes.py"
FOLDER_PLACEHOLDER = "/absolute/path/to/shaping"
# The host, the README section that sets it up, and the kind of block its configuration is in.
HOSTS = {
    "Claude Desktop": "json",
    "Claude Code": "sh",
    "Cursor": "json",
    "VS Code": "json",
    "Codex": "toml",
}
# The key each JSON host keeps its servers under.
SERVER_KEYS = {"Claude Desktop": "mcpServers", "Cursor": "mcpServers", "VS Code": "servers"}


# --------------------------------------------------------------------------
# Reading the README: sections, fenced blocks, inline commands



def section(title: str) -> str:
    """The README's text under a heading (## or ###) up to the next heading outside a fence."""
    lines, inside, fenced = [], False, False
    for line in README.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{2,3} ", line):
            if inside:
                break
            inside = line.split(" ", 1)[1].strip() == title
            continue
        if inside:
            lines.append(line)
    assert lines, "README.md has no section %r" % title
    return "\n".join(lines)


def inline_commands(text: str, prefix: str) -> list:
    """Commands in `backticks` that start with prefix and name a notes.py command."""
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.startswith(prefix) and set(shlex.split(span)) & set(notes._COMMANDS):
            found.append(span)
    return found


def parse_toml(body: str) -> dict:
    """TOML through the standard library (3.11 and later), else through tomli, which pytest itself
    depends on before 3.11: the Codex configuration is checked on every Python, never skipped."""
    try:
        import tomllib
    except ImportError:
        import tomli as tomllib
    return tomllib.loads(body)


def host_servers(host: str) -> list:
    """(command, args, settings) of each server the host's section configures."""
    kind, text = HOSTS[host], section(host)
    if kind == "sh":
        servers = []
        for line in text.splitlines():
            if line.startswith("claude mcp add "):
                words = shlex.split(line)
                assert words[3] == "shaping" and "--" in words, line
                rest = words[words.index("--") + 1:]
                servers.append((rest[0], rest[1:], {}))
        return servers
    bodies = [body for language, body in fenced_blocks(text) if language == kind]
    if kind == "toml":
        tables = [parse_toml(body)["mcp_servers"] for body in bodies]
    else:
        tables = [json.loads(body)[SERVER_KEYS[host]] for body in bodies]
    return [(table["shaping"]["command"], table["shaping"]["args"], table["shaping"])
            for table in tables if list(table) == ["shaping"]]


def assert_documented_server(command, args) -> None:
    """The server the README documents: python3 -S notes.py --dir FOLDER mcp, nothing else."""
    assert command == "python3", command
    assert args[:3] == ["-S", NOTES_PLACEHOLDER, "--dir"] and args[4:] == ["mcp"], args
    assert re.match(r"(/|\$\{workspaceFolder\}/|\$PWD/)", args[3]), "the folder must be absolute: %r" % args[3]


# --------------------------------------------------------------------------
# Each configuration block says what the README says

@pytest.mark.parametrize("host", list(HOSTS))
def test_each_host_section_configures_the_documented_server(host):
    servers = host_servers(host)
    assert len(servers) == 1, "%s: expected one configuration, found %r" % (host, servers)
    command, args, settings = servers[0]
    assert_documented_server(command, args)
    if host == "VS Code":
        assert settings["type"] == "stdio"
    text = section(host)
    assert "--dir" in text and "notes" in text.lower()


def test_every_server_config_block_in_the_readme_is_the_documented_one():
    """Any JSON or TOML block holding MCP servers, wherever it is in the README."""
    seen = 0
    for language, body in fenced_blocks(README):
        if language == "json":
            value = json.loads(body)
            tables = [value[key] for key in ("mcpServers", "servers") if isinstance(value, dict) and key in value]
        elif language == "toml":
            tables = [parse_toml(body).get("mcp_servers", {})]
        else:
            continue
        for table in tables:
            for name, server in table.items():
                assert name == "shaping", name
                assert_documented_server(server["command"], server["args"])
                seen += 1
    assert seen >= 4  # Claude Desktop, Cursor, VS Code, Codex


def test_quick_start_keeps_exactly_two_commands():
    text = section("Quick start")
    commands = [line for language, body in fenced_blocks(text) if language != "json"
                for line in body.splitlines() if line.strip()]
    assert len(commands) == 2, commands


# --------------------------------------------------------------------------
# Each configuration starts a server that takes a note where the README says

def talk_raw(command: list, cwd) -> dict:
    """Speak the stdio handshake as a host does; the answers by request id."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test_hosts", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "append", "arguments": {"type": "decision", "text": "Set up as the README says."}}},
    ]
    completed = subprocess.run(command, input="".join(json.dumps(r) + "\n" for r in requests).encode(),
                               cwd=str(cwd), capture_output=True, timeout=60)
    assert completed.returncode == 0, completed
    answers = {}
    for line in completed.stdout.decode("utf-8").splitlines():
        answer = json.loads(line)
        answers[answer["id"]] = answer["result"]
    return answers


def append_through_sdk(command: list, cwd):
    """An append through the official SDK client (a test dependency on Python 3.10 and later)."""
    from mcp import Client, StdioServerParameters

    async def session():
        parameters = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd))
        async with Client(parameters, mode="auto") as client:
            return await client.call_tool("append", {"type": "gate", "text": "Host runtime is open."})
    return asyncio.run(session())


def host_server(host: str, tmp_path) -> tuple:
    """The server the host's configuration starts, as the host would start it: (app, command, folder, cwd).

    app holds notes.py and the contracts; cwd is the folder of the host's own choosing."""
    app = tmp_path / "app"
    app.mkdir()
    for name in ("notes.py", "protocol.md", "note-io.md"):
        shutil.copy(str(REPO / name), str(app / name))
    places = {NOTES_PLACEHOLDER: str(app / "notes.py"), FOLDER_PLACEHOLDER: str(tmp_path / "shaping"),
              "${workspaceFolder}": str(tmp_path / "workspace"), "$PWD": str(tmp_path / "project")}
    ((_, args, _),) = host_servers(host)
    filled = [sys.executable] + list(args)
    for placeholder, real in places.items():
        filled = [arg.replace(placeholder, real) for arg in filled]
    elsewhere = tmp_path / "host-cwd"  # a host starts its servers from a folder of its own
    elsewhere.mkdir()
    return app, filled, filled[filled.index("--dir") + 1], elsewhere


@pytest.mark.parametrize("host", list(HOSTS))
def test_each_host_config_starts_a_server_that_keeps_the_note_in_its_folder(host, tmp_path):
    app, command, folder, elsewhere = host_server(host, tmp_path)
    before = folder_digest(app)
    answers = talk_raw(command, elsewhere)
    assert answers[1]["protocolVersion"] == "2025-06-18"
    assert {"append", "recap", "tail", "summary", "verify", "export"} <= {t["name"] for t in answers[2]["tools"]}
    assert answers[3]["isError"] is False
    # The first note starts the session, and the receipt says so (issue 30, point 2).
    assert answers[3]["structuredContent"] == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1,
                                              "path": folder + "/session_notes.jsonl", "created": True}
    assert folder_digest(app) == before and list(elsewhere.iterdir()) == []


@pytest.mark.mcp_sdk
@pytest.mark.parametrize("host", list(HOSTS))
def test_each_host_config_serves_the_official_sdk_client(host, tmp_path):
    app, command, folder, elsewhere = host_server(host, tmp_path)
    before = folder_digest(app)
    via_sdk = append_through_sdk(command, elsewhere)
    assert via_sdk.is_error is False
    assert via_sdk.structured_content == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1,
                                          "path": folder + "/session_notes.jsonl", "created": True}
    assert folder_digest(app) == before and list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------
# The sandbox recipes run as written, a restore in a new sandbox included

def run_mapped(command: str, mounts: dict, cwd) -> dict:
    for virtual, real in mounts.items():
        command = command.replace(virtual, str(real))
    words = shlex.split(command)
    assert words[:2] == ["python3", "-S"], command
    completed = subprocess.run([sys.executable] + words[1:], cwd=str(cwd), capture_output=True, timeout=60)
    assert completed.returncode == 0, (command, completed)
    return json.loads(completed.stdout)


def sandbox(root, mounts: dict, notes_home: str) -> dict:
    """A fresh sandbox: each mount a folder under root, the tool and its contracts in notes_home."""
    real = {virtual: root / virtual.strip("/").replace("/", "_") for virtual in mounts}
    for virtual, folder in real.items():
        folder.mkdir(parents=True)
        for sub in mounts[virtual]:
            (folder / sub).mkdir()
    home = real[notes_home]
    for name in ("notes.py", "protocol.md", "note-io.md"):
        shutil.copy(str(REPO / name), str(home / name))
    return real


def replay_recipe(tmp_path, title, prefix, mounts, notes_home):
    """Run the section's commands in one sandbox, then its restore in a new one; return both sandboxes."""
    commands = inline_commands(section(title), prefix)
    restores = [command for command in commands if "restore" in shlex.split(command)]
    assert len(restores) == 1 and len(commands) >= 3, commands
    first = sandbox(tmp_path / "first", mounts, notes_home)
    home_before = folder_digest(first[notes_home])
    export = None
    for command in commands:
        if command not in restores:
            receipt = run_mapped(command, first, tmp_path)
            export = receipt["path"] if receipt["command"] == "export" else export
    assert export is not None, "the recipe never exports"
    second = sandbox(tmp_path / "second", mounts, notes_home)
    source = shlex.split(restores[0])[-1]
    if source == "restore":  # no path: restore takes the export uploaded into the session folder (ChatGPT's)
        source = notes_home + "/session_export.json"
    for virtual, real in second.items():
        source = source.replace(virtual, str(real))
    shutil.copy(export, source)  # the operator downloads the export and uploads it again
    receipt = run_mapped(restores[0], second, tmp_path)
    assert receipt["restored"] == len([command for command in commands if " append " in command])
    return first, second, home_before, export


def test_claude_ai_recipe_keeps_notes_in_outputs_and_restores_from_uploads(tmp_path):
    mounts = {"/mnt/project": [], "/mnt/user-data": ["uploads", "outputs"]}
    commands = inline_commands(section("Use with Claude.ai"), "python3 -S /mnt/project/notes.py")
    for command in commands:
        words = shlex.split(command)
        assert words[3:5] == ["--dir", "/mnt/user-data/outputs/shaping"], command
        if "restore" in words:
            assert words[-1].startswith("/mnt/user-data/uploads/"), command
    assert "/tmp" not in " ".join(commands)
    first, second, project_before, export = replay_recipe(
        tmp_path, "Use with Claude.ai", "python3 -S /mnt/project/notes.py", mounts, "/mnt/project")
    outputs = first["/mnt/user-data"] / "outputs"
    assert export.startswith(str(outputs) + "/"), "the export must be downloadable: %s" % export
    assert folder_digest(first["/mnt/project"]) == project_before  # read-only there: nothing written
    assert list((first["/mnt/user-data"] / "uploads").iterdir()) == []
    log = "shaping/session_notes.jsonl"
    assert (second["/mnt/user-data"] / "outputs" / log).read_bytes() == (outputs / log).read_bytes()


def test_chatgpt_recipe_keeps_notes_beside_notes_py_and_restores(tmp_path):
    first, second, _, export = replay_recipe(
        tmp_path, "Use with ChatGPT Projects", "python3 -S /mnt/data/notes.py", {"/mnt/data": []}, "/mnt/data")
    data = first["/mnt/data"]
    assert export == str(data / "session_export.json")
    assert (second["/mnt/data"] / "session_notes.jsonl").read_bytes() == (data / "session_notes.jsonl").read_bytes()


def test_agent_snippet_runs_from_the_project_folder(tmp_path):
    text = section("Agent hosts that run commands")
    (snippet,) = [body for language, body in fenced_blocks(text) if language == "markdown"]
    assert "protocol.md" in snippet and "note-io.md" in snippet
    commands = inline_commands(snippet, "python3 -S " + NOTES_PLACEHOLDER)
    assert [shlex.split(c)[5] for c in commands] == ["append", "recap", "export"]
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    for command in commands:
        run_mapped(command, {NOTES_PLACEHOLDER: tmp_path / "notes.py"}, project)
    assert sorted(path.name for path in (project / ".shaping").iterdir()) == [
        "session_export.json", "session_meta.json", "session_notes.jsonl", "session_notes.lock"]
