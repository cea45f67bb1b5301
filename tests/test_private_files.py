"""The session's files are private to their user; an export keeps the umask's mode for the host to download."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from conftest import assert_refused, copy_fixture, run_notes, write_log, log_bytes

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


@pytest.fixture
def umask_022():
    """Run the children under the usual umask, whatever the test runner's is."""
    earlier = os.umask(0o022)
    yield
    os.umask(earlier)


def test_a_new_session_is_private(tmp_path, umask_022):
    folder = tmp_path / "made" / "by" / "notes"
    assert run_notes("init", folder=folder).code == 0
    assert run_notes("append", "--type", "decision", "--text", "Private.", folder=folder).code == 0
    modes = {name: mode_of(folder / name) for name in os.listdir(folder)}
    assert modes == {"session_meta.json": 0o600, "session_notes.jsonl": 0o600, "session_notes.lock": 0o600}
    # Every folder the tool created is the user's alone; the one that was there keeps its mode.
    assert [mode_of(path) for path in (folder, folder.parent, folder.parent.parent)] == [0o700, 0o700, 0o700]
    assert mode_of(tmp_path) == stat.S_IMODE(tmp_path.stat().st_mode)


def test_a_folder_the_tool_did_not_create_keeps_its_mode(tmp_path, umask_022):
    folder = tmp_path / "host"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert run_notes("init", folder=folder).code == 0
    assert mode_of(folder) == 0o755
    assert mode_of(folder / "session_notes.jsonl") == 0o600


def test_a_v0_session_is_tightened_by_the_next_write(tmp_path, umask_022):
    folder = copy_fixture("basic", tmp_path / "v0")
    (folder / "session_notes.lock").write_bytes(b"")
    (folder / "session_notes.lock").chmod(0o644)
    before = {name: mode_of(folder / name) for name in ("session_meta.json", "session_notes.jsonl")}
    assert before == {"session_meta.json": 0o644, "session_notes.jsonl": 0o644}
    assert run_notes("tail", folder=folder).code == 0  # a reader changes nothing
    assert mode_of(folder / "session_notes.jsonl") == 0o644
    assert run_notes("append", "--type", "decision", "--text", "Now private.", folder=folder).code == 0
    for name in ("session_meta.json", "session_notes.jsonl", "session_notes.lock"):
        assert mode_of(folder / name) == 0o600, name


def test_a_side_file_is_private(tmp_path, umask_022):
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Whole.", folder=folder).code == 0
    write_log(folder, log_bytes(folder) + b'{"id":"n0000')
    assert run_notes("append", "--type", "decision", "--text", "After.", folder=folder).code == 0
    side = [name for name in os.listdir(folder) if ".torn-" in name]
    assert len(side) == 1 and mode_of(folder / side[0]) == 0o600


def test_a_restored_session_is_private(tmp_path, umask_022):
    folder = copy_fixture("basic", tmp_path / "v0")
    restored = tmp_path / "restored"
    assert run_notes("restore", folder / "session_export.json", folder=restored).code == 0
    assert mode_of(restored) == 0o700
    for name in ("session_meta.json", "session_notes.jsonl", "session_notes.lock"):
        assert mode_of(restored / name) == 0o600, name


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o027, 0o640)])
@pytest.mark.parametrize("export_format", ["json", "md"])
def test_an_export_keeps_the_umask_mode(tmp_path, umask, expected, export_format):
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Exported.", folder=folder).code == 0
    earlier = os.umask(umask)
    try:
        result = run_notes("export", "--format", export_format, folder=folder)
    finally:
        os.umask(earlier)
    assert result.code == 0, result
    assert mode_of(result.receipt["path"]) == expected


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc, where no folder can be made")
def test_a_refusal_never_suggests_a_shared_folder(tmp_path):
    # A folder nobody can create, even root: the refusal names a way out
    # that keeps the notes private, never a folder every user can read.
    message = assert_refused(run_notes("init", folder="/proc/self/notes-session"), 2, "cannot create")
    assert "/tmp" not in message, message


# --------------------------------------------------------------------------
# A folder or session file another user could read or swap is refused, on
# every entry point, naming the risk and the way out; nothing is written.

OTHER_USER = 65534  # nobody: any user that is neither root nor the one running the tests
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="giving a file to another user takes root")
COMMANDS = [["init"], ["append", "--type", "decision", "--text", "Later."], ["tail"], ["show", "n00001"],
            ["summary"], ["recap"], ["verify"], ["export"], ["redact", "n00001", "--reason", "A test."]]


def kept_session(tmp_path):
    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Kept.")
    export = tmp_path / "carried.json"
    notes.Session(folder).export(output=str(export))
    return folder, export


def refused_everywhere(capsys, folder, export, message):
    """Every command, the MCP export tool and the Python API refuse with message; no file changes."""
    import notes
    from conftest import folder_digest, run_here

    before = folder_digest(folder)
    for words in COMMANDS + [["restore", str(export)]]:
        code = notes.main(["--dir", str(folder)] + words)
        out, err = capsys.readouterr()
        assert (code, err) == (2, ""), (words, out)
        import json
        assert json.loads(out) == {"ok": False, "error": message}, words
    server = notes._McpServer(str(folder), None, notes._mcp_served_tools(True), None)
    result = notes._mcp_call_tool(server, {"name": "tail", "arguments": {}})
    assert result["isError"] and result["structuredContent"] == {"ok": False, "error": message}
    with pytest.raises(notes.NotesError) as refusal:
        notes.Session(folder).summary()
    assert refusal.value.message == message
    assert folder_digest(folder) == before


@as_root
def test_a_folder_of_another_user_is_refused_by_every_entry_point_even_to_root(tmp_path, capsys):
    folder, export = kept_session(tmp_path)
    os.chown(folder, OTHER_USER, -1)
    refused_everywhere(capsys, folder, export, (
        "the session folder %s belongs to another user (uid %d), who could read the notes or swap the log for "
        "their own; nothing was read or written. Pass --dir with a folder of your own, for example --dir "
        "~/shaping" % (folder, OTHER_USER)))


@as_root
@pytest.mark.parametrize("name, kind", [("session_meta.json", "meta"), ("session_notes.jsonl", "log"),
                                        ("session_notes.lock", "lock")])
def test_a_session_file_of_another_user_is_refused(tmp_path, capsys, name, kind):
    folder, export = kept_session(tmp_path)
    os.chown(folder / name, OTHER_USER, -1)
    refused_everywhere(capsys, folder, export, (
        "the session %s %s belongs to another user (uid %d), who could read the notes or swap the log for "
        "their own; nothing was read or written. Move it aside, or pass --dir with a folder of your own, for "
        "example --dir ~/shaping" % (kind, folder / name, OTHER_USER)))


def test_a_folder_everyone_may_write_without_the_sticky_bit_is_refused(tmp_path, capsys):
    folder, export = kept_session(tmp_path)
    os.chmod(folder, 0o777)
    refused_everywhere(capsys, folder, export, (
        "the session folder %s is writable by every user without the sticky bit, so anyone could swap its log "
        "for their own; nothing was read or written. Make it private (chmod 700 %s), or pass --dir with a "
        "folder of your own, for example --dir ~/shaping" % (folder, folder)))


@pytest.mark.parametrize("mode", [0o770, 0o775, 0o1777, 0o755])
def test_group_writable_and_sticky_shared_folders_keep_working(tmp_path, capsys, mode):
    import notes

    folder, _ = kept_session(tmp_path)
    os.chmod(folder, mode)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(folder, 0, -1)  # a sandbox folder owned by root (/mnt/data) is as good as one's own
    assert notes.Session(folder).append(type="decision", text="Still kept.")["seq"] == 2
    assert notes.Session(folder).verify()["ok"] is True


@as_root
def test_the_data_folder_of_another_user_is_refused(tmp_path, capsys, monkeypatch):
    import json

    import notes

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(notes, "_is_installed_package_folder", lambda folder: True)
    data = tmp_path / "data" / "shaping-notes"
    data.mkdir(parents=True)
    os.chown(data, OTHER_USER, -1)
    assert notes.main(["append", "--type", "decision", "--text", "Mine."]) == 2
    assert json.loads(capsys.readouterr().out)["error"].startswith(
        "the session folder %s belongs to another user (uid %d)" % (data, OTHER_USER))
    assert os.listdir(data) == []
