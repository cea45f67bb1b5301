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
