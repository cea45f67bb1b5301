"""Shared helpers: run notes.py as a user would, copy golden files, digest folders."""

from __future__ import annotations

import base64
import codecs
import glob
import hashlib
import json
import os
import random
import re
import shutil
import string
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTES = REPO / "notes.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
V0_FIXTURES = FIXTURES / "v0"

sys.path.insert(0, str(REPO))
import notes  # noqa: E402  (the module under test, for in-process tests)


def python_id(path: str) -> str:
    """The interpreter's name and version, such as py3.11 or pypy3.9."""
    version = subprocess.run([path, "-S", "-c", "import sys; print('%s%d.%d' % ("
                              "'pypy' if sys.implementation.name == 'pypy' else 'py', *sys.version_info[:2]))"],
                             capture_output=True, text=True).stdout.strip()
    return version


def find_pythons() -> list:
    """The interpreters the `python` fixture runs on, each version once, as pytest parameters.

    The running interpreter belongs to the default set.  Every other CPython 3.9 to 3.13
    found under pyenv, and PyPy 3, belong to the long set (`-m long`); PyPy is one of the
    interpreters notes.py promises, so where pypy3 is missing its parameter is kept and fails.
    """
    running = python_id(sys.executable)
    found = [pytest.param(sys.executable, id=running)]
    seen = {running}
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for minor in range(9, 14):
        candidates = sorted(glob.glob(os.path.join(root, "versions", "3.%d.*" % minor, "bin", "python3")))
        candidates = [path for path in candidates if not path.split(os.sep)[-3].endswith("t")]
        name = python_id(candidates[-1]) if candidates else running
        if name not in seen:
            seen.add(name)
            found.append(pytest.param(candidates[-1], id=name, marks=pytest.mark.long))
    pypy = shutil.which("pypy3")
    name = python_id(pypy) if pypy else "pypy3"
    if name not in seen:
        found.append(pytest.param(pypy, id=name, marks=pytest.mark.long))
    return found


PYTHONS = find_pythons()


class Result:
    """What one run of notes.py left: exit code, output, parsed receipt."""

    def __init__(self, code: int, stdout: str, stderr: str):
        self.code = code
        self.stdout = stdout
        self.stderr = stderr
        try:
            self.receipt = json.loads(stdout)
        except ValueError:
            self.receipt = None

    def __repr__(self):
        return "Result(code=%r, stdout=%r, stderr=%r)" % (self.code, self.stdout[:500], self.stderr[:500])


def notes_argv(args, folder=None) -> list:
    """The command line after the script's name: --dir folder (when given), then args (bytes kept)."""
    argv = ["--dir", str(folder)] if folder is not None else []
    return argv + [arg if isinstance(arg, bytes) else str(arg) for arg in args]


def run_script(*args, folder=None, python=None, script=None, cwd=None, env=None, input=None,
               timeout=60, prefix=()) -> Result:
    """Run `[prefix...] python -S notes.py [--dir folder] args...` in a subprocess: for what only a
    process shows (an entry point, another interpreter, processes side by side, kills, signals, its start-up)."""
    command = list(prefix) + [python or sys.executable, "-S", str(script or NOTES)] + notes_argv(args, folder)
    completed = subprocess.run(command, capture_output=True, cwd=cwd, env=env, input=input,
                               timeout=timeout)
    return Result(completed.returncode, completed.stdout.decode("utf-8", "replace"),
                  completed.stderr.decode("utf-8", "replace"))


def run_notes(*args, folder=None, python=None, script=None, cwd=None, env=None, input=None,
              timeout=60) -> Result:
    """Run notes.py [--dir folder] args... in this process, as the script would run (run_main).

    Given python= or script=, it runs that interpreter or that copy of the file in a subprocess
    instead (run_script); timeout bounds only a subprocess."""
    if python is not None or script is not None:
        return run_script(*args, folder=folder, python=python, script=script, cwd=cwd, env=env,
                          input=input, timeout=timeout)
    return run_main([os.fsdecode(arg) for arg in notes_argv(args, folder)], cwd=cwd, env=env, input=input)


def run_main(argv, cwd=None, env=None, input=None) -> Result:
    """notes.main(argv) in this process, with what a fresh script run would have, put back after:
    standard input holding input (bytes; empty when None), fresh stdout and stderr, sys.argv,
    os.environ replaced by env (when given), the working folder cwd (when given), SIGINT's handler.
    An exception that escapes main is a traceback on stderr and exit code 1, as the script shows it."""
    import io
    import signal
    import threading
    import traceback

    # Streams, environment and working folder are the process's: runs side by side need processes.
    assert threading.current_thread() is threading.main_thread(), "run_script runs notes.py beside other runs"
    stdin = io.TextIOWrapper(io.BytesIO(input or b""), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    saved = sys.stdin, sys.stdout, sys.stderr, sys.argv, dict(os.environ), os.getcwd()
    handler = signal.getsignal(signal.SIGINT)  # the MCP server sets its own
    # As "python3 -S notes.py" run beside it: the hints name the script as it was run.
    sys.stdin, sys.stdout, sys.stderr, sys.argv = stdin, stdout, stderr, ["notes.py"] + list(argv)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(str(cwd))
        try:
            code = notes.main(list(argv))
        except SystemExit as leaving:
            code = leaving.code if isinstance(leaving.code, int) else (0 if leaving.code is None else 1)
        except Exception:  # noqa: BLE001 - what the interpreter would print
            traceback.print_exc()
            code = 1
        stdout.flush()
        stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved[:4]
        if env is not None:
            os.environ.clear()
            os.environ.update(saved[4])
        os.chdir(saved[5])
        signal.signal(signal.SIGINT, handler)
    # The one state notes.py keeps between calls: the locks this process holds, none once a run is over.
    assert not getattr(getattr(notes, "_SessionLock", None), "held", ()), "a run left its session lock held"
    return Result(code, stdout.buffer.getvalue().decode("utf-8", "replace"),
                  stderr.buffer.getvalue().decode("utf-8", "replace"))


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


def claude_upload(tmp_path, monkeypatch) -> tuple:
    """On Claude.ai, the v0 basic export uploaded outside the session folder: (upload, session folder)."""
    monkeypatch.setenv("SHAPING_NOTES_HOST", "claude-ai")
    return copy_fixture("basic", tmp_path / "uploads") / "session_export.json", tmp_path / "outputs" / "shaping"


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


@pytest.fixture(params=PYTHONS)
def python(request) -> str:
    """The running interpreter; with -m long, each other CPython 3.9 to 3.13 here, and PyPy."""
    if request.param is None:
        pytest.fail("pypy3 is not installed: the long set runs these tests on PyPy (.ci/run installs it)")
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


# --------------------------------------------------------------------------
# The shared builders: a session, an export, an append.  A test that needs
# to know every byte writes its session and export by hand with these; one
# that needs notes.py's own writing appends through the real script.

SESSION_ID = "7e0c2b1a-4d3f-4a5b-9c6d-8e7f6a5b4c3d"
CREATED_AT = "2026-03-14T09:00:00Z"
META = "session_meta.json"
# The optional record fields, in the order a record holds them (after text, before checksum).
OPTIONAL_FIELDS = ("effect", "ref", "status", "provenance", "evidence", "about", "by", "batch")


def signal_record(session_id: str, seq: int, signal: tuple) -> dict:
    """A signal, (type, text) or (type, text, {fields}), as the checksummed record numbered seq.

    Its optional fields go in record order; a "ts" among them sets the record's time."""
    fields = dict(signal[2]) if len(signal) > 2 else {}
    ts = fields.pop("ts", None)
    ordered = {name: fields.pop(name) for name in OPTIONAL_FIELDS if name in fields}
    ordered.update(fields)
    return make_record(session_id, seq, signal[0], signal[1], ts=ts, **ordered)


def write_session(folder, entries=(), session_id: str = SESSION_ID, created_at: str = CREATED_AT,
                  tail: bytes = b"") -> list:
    """A session written by hand: its meta, and a log of entries in order; return the entries as written.

    An entry is a signal (a tuple, made into the record numbered by its place), a record (a dict)
    or a log line (bytes, its newline included), each written as given; tail comes after the
    last line (a cut-off write)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"schema_version": "shaping-memory-session-meta.v0", "session_id": session_id,
            "created_at": created_at, "log_file": str(folder / LOG)}
    (folder / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written = [signal_record(session_id, seq, entry) if isinstance(entry, tuple) else entry
               for seq, entry in enumerate(entries, 1)]
    write_log(folder, b"".join(entry if isinstance(entry, bytes) else line_of(entry) for entry in written) + tail)
    return written


def write_export(path, items: list, session_id: str = SESSION_ID, **changes) -> Path:
    """An export holding these records (items), laid out as export writes one; changes replace its keys,
    "records" included."""
    export = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-03-14T10:00:00Z",
              "session": {"schema_version": "shaping-memory-session-meta.v0", "session_id": session_id,
                          "created_at": CREATED_AT, "log_file": "/mnt/data/session_notes.jsonl"},
              "record_count": len(items), "records": items}
    export.update(changes)
    path = Path(path)
    path.write_text(json.dumps(export, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def append(folder, note_type: str, text, *extra, code=0, run=None, **options) -> Result:
    """`append --type note_type --text text extra...` run by run (run_notes, or run_script for a
    process of its own); never a traceback.

    The run must exit with code (None: any code; the test looks itself); options go to the runner."""
    result = (run or run_notes)("append", "--type", note_type, "--text", text, *extra, folder=folder, **options)
    assert_no_traceback(result)
    assert code is None or result.code == code, result
    return result


def appended(folder, note_type: str, text, *extra) -> dict:
    """`append --type note_type --text text extra...`, which must succeed: its receipt."""
    return append(folder, note_type, text, *extra).receipt


def recap(folder, *extra) -> dict:
    """`recap extra...`, which must exit 0: its receipt."""
    result = run_notes("recap", *extra, folder=folder)
    assert_no_traceback(result)
    assert result.code == 0, result
    return result.receipt


def scannable(receipt: dict) -> str:
    """How recap, check and --compact print: compact JSON, a line per key and per item of a list."""
    def one(value):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return "{%s}\n" % ",\n".join(one(key) + ":" + ("[\n%s]" % ",\n".join(map(one, value))
                                                   if isinstance(value, list) and value else one(value))
                                  for key, value in receipt.items())


def recap_text(folder, *extra) -> str:
    """`recap extra...`, which must exit 0: what it printed."""
    result = run_notes("recap", *extra, folder=folder)
    assert_no_traceback(result)
    assert result.code == 0, result
    return result.stdout


def new_session(folder) -> str:
    """`init` on folder, which must succeed: the new session's id."""
    result = run_notes("init", folder=folder)
    assert result.code == 0, result
    return result.receipt["session_id"]


def session_id_of(folder) -> str:
    """The session id its meta file holds."""
    with open(os.path.join(str(folder), META), "rb") as handle:
        return json.loads(handle.read().decode("utf-8"))["session_id"]


def mcp_answers(folder, *calls) -> list:
    """Each (tool, arguments) as one tools/call line to `notes.py mcp` (after a tools/list), in this process;
    the structured results, in order."""
    lines = [json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments}})
             for number, (name, arguments) in enumerate(calls, 1)]
    lines.insert(0, json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}))
    served = run_main(["--dir", str(folder), "mcp"], input=("\n".join(lines) + "\n").encode("utf-8"))
    assert served.code == 0, served
    return [json.loads(line)["result"] for line in served.stdout.splitlines()]


def refused_unchanged(folder, *args, words=(), python=None) -> str:
    """Run notes.py on folder; require a clean exit-2 refusal naming words, and no change on disk."""
    before = folder_digest(folder)
    result = run_notes(*args, folder=folder, python=python)
    error = assert_refused(result, 2, *words)
    assert set(result.receipt) == {"ok", "error"}, result.receipt
    assert folder_digest(folder) == before, "the refusal changed the session folder"
    return error


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


# A writer stopped mid-append (test_storage): it takes the lock as a writer of this version
# does (the folder, then the file) or as a 1.1.0 writer did (the file only),
# writes half its line, and finishes when told.
HALF_WRITER_SCRIPT = r"""
import fcntl, os, sys
folder, line, version = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
if version == "this":
    folder_lock = os.open(folder, os.O_RDONLY)
    fcntl.flock(folder_lock, fcntl.LOCK_EX)
lock = os.open(os.path.join(folder, "session_notes.lock"), os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
log = os.open(os.path.join(folder, "session_notes.jsonl"), os.O_WRONLY | os.O_APPEND)
os.write(log, line[:len(line) // 2])
sys.stdout.write("half\n")
sys.stdout.flush()
sys.stdin.readline()
os.write(log, line[len(line) // 2:])
os.fsync(log)
"""


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


def code_point_cases(ranges: list, seed: int, size: int = 6) -> list:
    """Code points to try from a set given as inclusive (first, last) ranges: the first and the
    last of each range, and a sample of size others drawn with a fixed seed (the same on every run)."""
    import random

    edges = sorted({point for first, last in ranges for point in (first, last)})
    inner = [point for first, last in ranges for point in range(first + 1, last) if point not in edges]
    return sorted(edges + random.Random(seed).sample(inner, min(size, len(inner))))


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


# --------------------------------------------------------------------------
# Fake credentials: the corpora of tests/fixtures/credentials hold templates whose fields are
# filled here with seeded random characters, so that no file of the project holds a key a
# secret scanner could take for a real one.

CREDENTIAL_CORPORA = FIXTURES / "credentials"
DASHES = "-" * 5
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
FIELD_CLASSES = {
    "A": string.ascii_letters + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "H": "0123456789abcdef",
    "X": "0123456789abcdefABCDEF",
    "D": string.digits,
    "B": string.ascii_letters + string.digits + "+/",
    "S": string.ascii_letters + string.digits + "-_",
    "L": string.ascii_lowercase + string.digits,
    "P": string.ascii_letters + string.digits + "!#%&*+-=?@^_~",
    "Z": string.ascii_uppercase + "234567",
    "z": string.ascii_lowercase + "234567",
    "W": BASE58,
    "N": string.ascii_lowercase,
}


class Filler:
    """Fills one template's fields ({A:20}, {PEM:label}, {JWT}...) with random characters drawn from a seed of its own."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)

    def draw(self, alphabet: str, length: int) -> str:
        # A key mixes letters and digits: draw again until the value does, where the class has both.
        while True:
            value = "".join(self.random.choice(alphabet) for _ in range(length))
            has_digit, has_letter = any(c.isdigit() for c in value), any(c.isalpha() for c in value)
            if (has_digit and has_letter) or length < 4 or not (set(alphabet) & set(string.digits)) \
                    or not (set(alphabet) & set(string.ascii_letters)):
                return value

    def lines(self, label: str, size: int, extra=()) -> list:
        """An armoured block of size random bytes: BEGIN label, extra lines, the base64 body, END label."""
        data = base64.b64encode(self.random.randbytes(size) if hasattr(self.random, "randbytes")
                                else bytes(self.random.getrandbits(8) for _ in range(size))).decode("ascii")
        body = [data[index:index + 64] for index in range(0, len(data), 64)]
        return [DASHES + "BEGIN " + label + DASHES, *extra] + body + [DASHES + "END " + label + DASHES]

    def jwt(self) -> str:
        def encode(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
        claims = {"sub": "user-" + self.draw(FIELD_CLASSES["H"], 10), "iat": 1760000000 + self.random.randrange(10 ** 6)}
        return ".".join([encode(b'{"alg":"HS256","typ":"JWT"}'), encode(json.dumps(claims).encode()),
                         encode(bytes(self.random.getrandbits(8) for _ in range(32)))])

    def putty(self) -> str:
        lines = ["PuTTY-User-Key-File-3: ssh-ed25519", "Encryption: none", "Comment: deploy@bastion",
                 "Public-Lines: 2", self.draw(FIELD_CLASSES["B"], 64), self.draw(FIELD_CLASSES["B"], 4) + "=",
                 "Private-Lines: 1", self.draw(FIELD_CLASSES["B"], 43) + "=",
                 "Private-MAC: " + self.draw(FIELD_CLASSES["H"], 64)]
        return "\n".join(lines)

    def field(self, match) -> str:
        name, _, argument = match.group(1).partition(":")
        pgp = ["Version: GnuPG v2", ""]
        built = {
            "G": lambda: str(uuid.UUID(int=self.random.getrandbits(128), version=4)),
            "PEM": lambda: "\n".join(self.lines(argument, 180)),
            "PEMSHORT": lambda: "\n".join(self.lines(argument, 12)),  # a block whose body is one short line
            # as a JSON string holds it: the line breaks written as \n
            "PEMLITERAL": lambda: "\\n".join(self.lines(argument, 600)) + "\\n",
            "PGP": lambda: "\n".join(self.lines("PGP PRIVATE" + " KEY BLOCK", 200, pgp)),
            "PGPPUBLIC": lambda: "\n".join(self.lines("PGP PUBLIC KEY BLOCK", 200, pgp)),
            "PUTTY": self.putty,
            "JWT": self.jwt,
            "AUTHPLAIN": lambda: base64.b64encode(("\0relay@example.com\0" + self.draw(FIELD_CLASSES["A"], 14))
                                                  .encode()).decode("ascii"),
            "B64P": lambda: base64.b64encode(("ops:" + self.draw(FIELD_CLASSES["P"], int(argument or 0)))
                                             .encode()).decode("ascii"),
            "B64": lambda: base64.b64encode(argument.encode()).decode("ascii"),
        }
        if name in FIELD_CLASSES:
            return self.draw(FIELD_CLASSES[name], int(argument))
        if name in built:
            return built[name]()
        raise ValueError(match.group(0))

    def fill(self, template: str) -> str:
        return re.sub(r"\{([A-Za-z0-9]+(?::[^{}]*)?)\}", self.field, template)


def load_corpus(name: str, first_seed: int = 0) -> list:
    """(kind or name, text, effect or None) for each line of a credential corpus, filled in: a line is the
    kind, then the text and, after another tab, the effect; line n is filled from seed first_seed + n."""
    cases = []
    for number, line in enumerate((CREDENTIAL_CORPORA / name).read_text(encoding="utf-8").splitlines()):
        if not line or line.startswith("#"):
            continue
        kind, *fields = line.split("\t")
        filler = Filler(first_seed + number)
        # The escapes first (\n, \uXXXX), on the ASCII-escaped line so that letters beyond ASCII survive;
        # a filled value holds no backslash.
        values = [filler.fill(codecs.decode(field.encode("ascii", "backslashreplace"), "unicode_escape"))
                  for field in fields]
        cases.append((kind, values[0], values[1] if len(values) > 1 else None))
    return cases


# --------------------------------------------------------------------------
# The mcp_sdk marker: tests that drive the server through the official MCP SDK
# client.  The SDK (mcp>=2.3) needs Python 3.10 or later, so on 3.9 these tests
# are deselected, and the run counts them at its end; on 3.10 and later a
# missing SDK makes them fail, as a missing dependency should.

SDK_NEEDS = (3, 10)
SDK_DESELECTED = pytest.StashKey()  # how many were left out, for the summary


def pytest_collection_modifyitems(config, items):
    if sys.version_info >= SDK_NEEDS:
        return
    needing = [item for item in items if item.get_closest_marker("mcp_sdk")]
    if needing:
        config.hook.pytest_deselected(items=needing)
        items[:] = [item for item in items if not item.get_closest_marker("mcp_sdk")]
        config.stash[SDK_DESELECTED] = len(needing)
        if hasattr(config, "workeroutput"):  # an xdist worker: its controller prints the summary
            config.workeroutput["mcp_sdk_deselected"] = len(needing)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Under xdist, the workers collect: the controller learns the count from them (each has the same)."""
    count = getattr(node, "workeroutput", {}).get("mcp_sdk_deselected", 0)
    if count:
        node.config.stash[SDK_DESELECTED] = count


def pytest_terminal_summary(terminalreporter, config):
    count = config.stash.get(SDK_DESELECTED, 0)
    if count:
        terminalreporter.write_line(
            "%d tests deselected (mcp_sdk): they drive the official MCP SDK client, which needs Python %d.%d "
            "or later; this is Python %d.%d" % ((count,) + SDK_NEEDS + tuple(sys.version_info[:2])))
