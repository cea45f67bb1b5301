"""Shared helpers: run notes.py as a user would, copy golden files, digest folders."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTES = REPO / "notes.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
V0_FIXTURES = FIXTURES / "v0"

sys.path.insert(0, str(REPO))
import notes  # noqa: E402  (the module under test, for in-process tests)


def find_pythons() -> list:
    """Every CPython 3.9 to 3.13 this machine has under pyenv, PyPy 3 if installed, and the running one."""
    found = {sys.executable: None}
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for minor in range(9, 14):
        candidates = sorted(glob.glob(os.path.join(root, "versions", "3.%d.*" % minor, "bin", "python3")))
        candidates = [path for path in candidates if not path.split(os.sep)[-3].endswith("t")]
        if candidates:
            found.setdefault(candidates[-1], None)
    pypy = shutil.which("pypy3")
    if pypy:
        found.setdefault(pypy, None)
    return list(found)


PYTHONS = find_pythons()


def python_id(path: str) -> str:
    version = subprocess.run([path, "-S", "-c", "import sys; print('%s%d.%d' % ("
                              "'pypy' if sys.implementation.name == 'pypy' else 'py', *sys.version_info[:2]))"],
                             capture_output=True, text=True).stdout.strip()
    return version


class Result:
    """What one run of notes.py left: exit code, output, parsed receipt."""

    def __init__(self, completed: subprocess.CompletedProcess):
        self.code = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        try:
            self.receipt = json.loads(completed.stdout)
        except ValueError:
            self.receipt = None

    def __repr__(self):
        return "Result(code=%r, stdout=%r, stderr=%r)" % (self.code, self.stdout[:500], self.stderr[:500])


def run_notes(*args, folder=None, python=None, script=None, cwd=None, env=None, input=None,
              timeout=60) -> Result:
    """Run `python -S notes.py [--dir folder] args...` in a subprocess."""
    command = [python or sys.executable, "-S", str(script or NOTES)]
    if folder is not None:
        command += ["--dir", str(folder)]
    command += [str(arg) if not isinstance(arg, bytes) else arg for arg in args]
    completed = subprocess.run(command, capture_output=True, cwd=cwd, env=env, input=input,
                               timeout=timeout)
    completed.stdout = completed.stdout.decode("utf-8", "replace")
    completed.stderr = completed.stderr.decode("utf-8", "replace")
    return Result(completed)


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr, result


def assert_refused(result: Result, code: int = 2, *words: str) -> str:
    """The run failed cleanly with a JSON error holding each word; return the message."""
    assert_no_traceback(result)
    assert result.code == code, result
    assert result.receipt is not None and result.receipt["ok"] is False, result
    assert isinstance(result.receipt.get("error"), str) and result.receipt["error"], result
    for word in words:
        assert word in result.receipt["error"], (word, result.receipt["error"])
    return result.receipt["error"]


def folder_digest(folder) -> dict:
    """Every entry under folder: relative name -> sha256 of its bytes (or link target, or 'dir')."""
    digest = {}
    folder = str(folder)
    if not os.path.lexists(folder):
        return digest
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder)
            if os.path.islink(path):
                digest[relative] = "link:" + os.readlink(path)
            elif os.path.isdir(path):
                digest[relative] = "dir"
            else:
                with open(path, "rb") as handle:
                    digest[relative] = hashlib.sha256(handle.read()).hexdigest()
    return digest


def copy_fixture(name: str, destination) -> Path:
    """Copy a v0 fixture folder (basic, torn, dupseq, tampered) to destination; return it."""
    destination = Path(destination)
    shutil.copytree(V0_FIXTURES / name, destination)
    for path in destination.iterdir():
        path.chmod(0o644)
    return destination


def read_records(folder) -> list:
    """The log's lines parsed as JSON (every line must be an object)."""
    with open(os.path.join(str(folder), "session_notes.jsonl"), "rb") as handle:
        return [json.loads(line) for line in handle.read().splitlines()]


@pytest.fixture
def session(tmp_path) -> Path:
    """A fresh folder with an initialised session."""
    folder = tmp_path / "session"
    result = run_notes("init", folder=folder)
    assert result.code == 0, result
    return folder


@pytest.fixture(params=PYTHONS, ids=python_id)
def python(request) -> str:
    """Each CPython 3.9 to 3.13, and PyPy, found on this machine."""
    return request.param


# --------------------------------------------------------------------------
# Records and logs built independently of notes.py, and in-process runs

LOG = "session_notes.jsonl"


def v0_checksum(record: dict) -> str:
    """The v0 checksum, recomputed with the json module so tests do not trust notes.py."""
    body = {key: value for key, value in record.items() if key != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def make_record(session_id: str, seq: int, note_type: str = "decision", text=None, ts=None,
                **fields) -> dict:
    """A checksummed v0 record; extra fields (such as effect) go after text."""
    record = {"id": "n%05d" % seq, "ts": ts or "2026-03-14T09:%02d:00Z" % (seq % 60),
              "session_id": session_id, "seq": seq, "type": note_type,
              "text": text if text is not None else "Signal %d stays." % seq}
    record.update(fields)
    record["checksum"] = v0_checksum(record)
    return record


def write_signals(folder, session_id: str, signals) -> None:
    """A session written directly, meta and log; each signal is (type, text) or (type, text, {field: value})."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    meta = {"schema_version": "shaping-memory-session-meta.v0", "session_id": session_id,
            "created_at": "2026-03-14T09:00:00Z", "log_file": str(folder / LOG)}
    (folder / "session_meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    with open(str(folder / LOG), "wb") as handle:
        for seq, signal in enumerate(signals, 1):
            fields = signal[2] if len(signal) > 2 else {}
            handle.write(line_of(make_record(session_id, seq, signal[0], signal[1], **fields)))


def line_of(record: dict) -> bytes:
    """The record as one compact UTF-8 log line."""
    return (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def log_bytes(folder) -> bytes:
    with open(os.path.join(str(folder), LOG), "rb") as handle:
        return handle.read()


def write_log(folder, data: bytes) -> None:
    with open(os.path.join(str(folder), LOG), "wb") as handle:
        handle.write(data)


def run_here(capsys, folder, *args):
    """notes.main in this process: (exit code, parsed receipt); never a traceback."""
    code = notes.main(["--dir", str(folder)] + [str(arg) for arg in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out and "Traceback" not in err, (out, err)
    return code, json.loads(out)


# --------------------------------------------------------------------------
# The session folder a run picks without --dir depends on SHAPING_NOTES_DIR:
# a developer's own setting must not steer the tests.

@pytest.fixture(autouse=True)
def no_shaping_notes_dir(monkeypatch):
    monkeypatch.delenv("SHAPING_NOTES_DIR", raising=False)


# A process that takes the session lock and keeps it until it is killed or
# stopped: a writer stuck mid-append, as the lock tests need one.
HOLDER_SCRIPT = r"""
import fcntl, os, sys, time
descriptor = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(descriptor, fcntl.LOCK_EX)
sys.stdout.write("locked\n")
sys.stdout.flush()
time.sleep(600)
"""


def fenced_blocks(text: str) -> list:
    """(language, body) of each fenced code block of a document, in order; a body keeps its last newline."""
    blocks, language, body = [], None, []
    for line in text.splitlines():
        if not line.startswith("```"):
            body.append(line + "\n")
        elif language is None:
            language, body = line[3:].strip(), []
        else:
            blocks.append((language, "".join(body)))
            language = None
    return blocks


def code_blocks(text: str, language: str) -> list:
    """The bodies of the fenced blocks opened with ```language, in order."""
    return [body for opened, body in fenced_blocks(text) if opened == language]
