"""One folder per idea (issue 30 point 5) and moving a session (point 6).

--session NAME keeps an idea in the folder sessions/NAME inside the session folder (--dir,
SHAPING_NOTES_DIR, the folder of a lone notes.py, or an installed copy's data folder); without
it nothing changes.  The sessions command lists them, reading only.  Each way of moving a session
that README's "Move a session" shows is run here end to end: export in one folder, restore or
fast-forward in another (the MCP restore tool is tried in test_mcp.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import (NOTES, REPO, SESSION_ID, assert_refused, code_blocks, folder_digest, notes, read_records,
                      run_here, run_notes, write_export, write_session)

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
