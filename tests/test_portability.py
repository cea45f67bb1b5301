"""notes.py imports and locks where fcntl is missing (Windows), using msvcrt instead."""

import importlib.util
import json
import sys
import types

from conftest import NOTES, read_records


def load_notes_without_fcntl(monkeypatch, calls):
    """A fresh copy of notes.py imported as on Windows: no fcntl, a recording msvcrt."""
    fake_msvcrt = types.ModuleType("msvcrt")
    fake_msvcrt.LK_LOCK, fake_msvcrt.LK_NBLCK, fake_msvcrt.LK_UNLCK = 1, 2, 0
    fake_msvcrt.locking = lambda descriptor, mode, length: calls.append((mode, length))
    monkeypatch.setitem(sys.modules, "fcntl", None)  # makes `import fcntl` raise ImportError
    monkeypatch.setitem(sys.modules, "msvcrt", fake_msvcrt)
    spec = importlib.util.spec_from_file_location("notes_without_fcntl", str(NOTES))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_and_append_lock_through_msvcrt_when_fcntl_is_missing(tmp_path, monkeypatch, capsys):
    calls = []
    windows_notes = load_notes_without_fcntl(monkeypatch, calls)
    assert windows_notes.fcntl is None
    folder = tmp_path / "session"
    code = windows_notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Locked on Windows."])
    receipt = json.loads(capsys.readouterr().out)
    assert code == 0 and receipt["note_id"] == "n00001", receipt
    assert [record["text"] for record in read_records(folder)] == ["Locked on Windows."]
    lock_modes = [mode for mode, _ in calls]
    assert lock_modes[0] in (1, 2) and lock_modes[-1] == 0, calls  # locked first, unlocked last
