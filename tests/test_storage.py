"""Issue 13: storage integrity, second pass.

No id issued twice (a complete line is never a torn tail; retries are found among the
last records), no session file overwritten (export --output; restore's write order), no
wait without bound (the lock; special files), no scan without bound (linear reading from
the end; a cap on a forward line), and odd but real values (a folder name that is not
UTF-8, an absurd seq, leftovers of failed writes).
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import (HALF_WRITER_SCRIPT, HOLDER_SCRIPT, NOTES, append, assert_no_traceback, assert_refused, folder_digest, line_of, log_bytes, make_record, new_session, notes, read_records, run_here, run_notes, run_script, session_id_of, write_log)

LOG = "session_notes.jsonl"
META = "session_meta.json"
LOCK = "session_notes.lock"
EXPORT = "session_export.json"
POSIX = os.name == "posix"
HAVE_PROC_FDS = os.path.isdir("/proc/self/fd")


# --------------------------------------------------------------------------
# Local helpers

def utc(seconds_ago: float = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def stray_files(folder) -> list:
    known = {META, LOG, LOCK}
    return sorted(name for name in os.listdir(str(folder)) if name not in known)


def problem_kinds(result) -> list:
    return [(entry["line"], entry["kind"]) for entry in result.receipt["problems"]]


def with_env(**values) -> dict:
    env = dict(os.environ)
    env.update(values)
    return env


# --------------------------------------------------------------------------
# 1. A complete line is never a torn tail

def damaged_last_line(kind: str, session_id: str) -> tuple:
    """(healthy lines, the damaged last line with its newline, the seq it held)."""
    records = [make_record(session_id, seq) for seq in (1, 2, 3)]
    if kind == "bom_before_the_only_record":
        return b"", b"\xef\xbb\xbf" + line_of(records[0]), 1
    healthy = b"".join(line_of(record) for record in records[:2])
    last = bytearray(line_of(records[2]))
    if kind == "flipped_byte":
        last[-2] ^= 0x01  # the closing brace becomes "|": no longer JSON
    elif kind == "invalid_utf8":
        last[last.index(b"Signal")] = 0xFF
    elif kind == "junk_line":
        healthy, last = healthy + bytes(last), bytearray(b"\x00\x00 not a record\n")
        return healthy, bytes(last), 4
    return healthy, bytes(last), 3


@pytest.mark.parametrize("kind", ["flipped_byte", "invalid_utf8", "bom_before_the_only_record", "junk_line"])
def test_a_complete_damaged_last_line_stays_and_its_seq_is_never_issued_again(tmp_path, kind):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy, damaged, held = damaged_last_line(kind, session_id)
    write_log(folder, healthy + damaged)
    damaged_line_number = healthy.count(b"\n") + 1

    tail = run_notes("tail", "--limit", 10, folder=folder)
    assert tail.code == 0 and tail.receipt["warnings"], tail
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [line for line, _ in problem_kinds(verify)] == [damaged_line_number], verify

    first = append(folder, "decision", "Past the damaged line.")
    assert first.code == 0, first
    # The damaged line held seq `held`: the next note is numbered past it, and nothing is set aside.
    assert list(first.receipt) == ["ok", "command", "note_id", "seq", "path"]
    assert (first.receipt["note_id"], first.receipt["seq"]) == ("n%05d" % (held + 1), held + 1)
    assert log_bytes(folder).startswith(healthy + damaged)
    assert stray_files(folder) == []
    second = append(folder, "decision", "And one more.")
    assert second.receipt["seq"] == held + 2

    # verify keeps reporting the damaged line, and nothing else: no gap, no repeat.
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3, verify
    assert [line for line, _ in problem_kinds(verify)] == [damaged_line_number], verify
    ids = [json.loads(line)["id"] for line in log_bytes(folder).splitlines() if line and line != damaged.rstrip(b"\n")]
    assert len(ids) == len(set(ids)) and "n%05d" % held not in ids[-2:]


def test_only_the_bytes_after_the_last_newline_are_set_aside(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = b"".join(line_of(make_record(session_id, seq)) for seq in (1, 2, 3, 4))
    complete_junk = b"\x00\x00\x00\n\xff\xfegarbage\n"
    cut = b'{"id":"n00007","ts":"2026-'
    write_log(folder, healthy + complete_junk + cut)

    result = append(folder, "shape", "Shape holds.")
    assert result.code == 0, result
    # Two complete junk lines held seqs 5 and 6; only the unterminated bytes are moved.
    assert result.receipt["seq"] == 7
    assert result.receipt["recovered"]["kind"] == "torn_tail"
    assert result.receipt["recovered"]["bytes"] == len(cut)
    with open(result.receipt["recovered"]["side_file"], "rb") as handle:
        assert handle.read() == cut
    assert log_bytes(folder).startswith(healthy + complete_junk)
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and problem_kinds(verify) == [(5, "not_json"), (6, "not_utf8")], verify


def test_a_record_without_its_newline_stays_and_counts(tmp_path):
    # An unterminated last line that is a JSON object is kept, whatever it lacks.
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = line_of(make_record(session_id, 1))
    write_log(folder, healthy + b'{"note": "no seq here"}')
    result = append(folder, "decision", "Next.")
    assert result.code == 0 and result.receipt["seq"] == 3, result
    assert result.receipt["recovered"] == {"kind": "missing_newline"}
    assert log_bytes(folder).startswith(healthy + b'{"note": "no seq here"}\n')


# --------------------------------------------------------------------------
# 2. export never writes onto the session's own files

def export_targets(folder, tmp_path) -> dict:
    linked_folder = tmp_path / "linked-folder"
    os.symlink(str(folder), str(linked_folder))
    os.link(str(folder / LOG), str(tmp_path / "hard-link-to-log"))
    os.link(str(folder / META), str(tmp_path / "hard-link-to-meta"))
    side_file = folder / (LOG + ".torn-20260314T093012Z-4121")
    side_file.write_bytes(b'{"id":"n0')
    return {"log": folder / LOG, "meta": folder / META, "lock": folder / LOCK,
            "log through a linked folder": linked_folder / LOG,
            "hard link to the log": tmp_path / "hard-link-to-log",
            "hard link to the meta": tmp_path / "hard-link-to-meta",
            "a side file": side_file}


@pytest.mark.parametrize("target", ["log", "meta", "lock", "log through a linked folder", "hard link to the log",
                                    "hard link to the meta", "a side file"])
@pytest.mark.parametrize("export_format", ["json", "md"])
def test_export_refuses_an_output_that_is_a_session_file(tmp_path, target, export_format):
    folder = tmp_path / "session"
    for number in (1, 2, 3):
        assert append(folder, "decision", "Kept %d." % number).code == 0
    output = export_targets(folder, tmp_path)[target]
    before = folder_digest(tmp_path)
    result = run_notes("export", "--output", output, "--format", export_format, folder=folder)
    assert_refused(result, 2, "session")
    assert folder_digest(tmp_path) == before
    os.unlink(str(tmp_path / "hard-link-to-log"))  # writers refuse a hard-linked log: the link was only a target
    assert append(folder, "decision", "Numbering goes on.").receipt["seq"] == 4
    assert run_notes("verify", folder=folder).code == 0


def test_export_refuses_a_relative_output_naming_the_log(tmp_path):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Kept.").code == 0
    before = folder_digest(folder)
    assert_refused(run_notes("export", "--output", LOG, folder=folder, cwd=str(folder)), 2)
    assert folder_digest(folder) == before


# --------------------------------------------------------------------------
# 3. A lock wait has a bound



class LockHolder:
    """A process that holds the session lock, then is stopped (SIGSTOP), as a hung writer would be."""

    def __init__(self, folder):
        self.process = subprocess.Popen([sys.executable, "-S", "-c", HOLDER_SCRIPT, str(folder / LOCK)],
                                        stdout=subprocess.PIPE)

    def __enter__(self):
        assert self.process.stdout.readline() == b"locked\n"
        self.process.send_signal(signal.SIGSTOP)
        return self

    def __exit__(self, *exc_info):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)
        self.process.stdout.close()


@pytest.mark.skipif(not POSIX, reason="a stopped flock holder needs POSIX signals")
@pytest.mark.parametrize("command", ["append", "init", "restore"])
def test_a_writer_gives_up_on_a_stopped_lock_holder_after_the_wait_bound(tmp_path, command):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Before the hang.").code == 0
    assert run_notes("export", "--output", tmp_path / "export.json", folder=folder).code == 0
    arguments = {"append": ("append", "--type", "gate", "--text", "Waits for the lock."),
                 "init": ("init",), "restore": ("restore", tmp_path / "export.json")}[command]
    with LockHolder(folder):
        before = folder_digest(folder)
        result = run_notes(*arguments, folder=folder, env=with_env(SHAPING_NOTES_LOCK_WAIT="1"), timeout=30)
        message = assert_refused(result, 1, str(folder / LOCK), "another writer")
        assert "nothing was written" in message
        assert folder_digest(folder) == before
    after = append(folder, "gate", "The lock is free again.")
    assert after.code == 0 and after.receipt["seq"] == 2
    assert run_notes("verify", folder=folder).code == 0


@pytest.mark.skipif(not POSIX, reason="a stopped flock holder needs POSIX signals")
def test_a_zero_lock_wait_gives_up_at_once_and_readers_never_wait(tmp_path):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Before the hang.").code == 0
    with LockHolder(folder):
        result = append(folder, "gate", "No wait at all.", code=None, env=with_env(SHAPING_NOTES_LOCK_WAIT="0"))
        assert_refused(result, 1, "another writer")
        # Readers take no lock: they answer while the holder is stopped.
        for reader in (("verify",), ("tail",), ("summary",), ("recap",)):
            result = run_notes(*reader, folder=folder, timeout=30)
            assert result.code == 0 and "warnings" not in result.receipt, result


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf", "1e9"])
def test_a_lock_wait_that_is_not_a_sane_number_of_seconds_is_refused(tmp_path, value):
    folder = tmp_path / "fresh"
    result = append(folder, "decision", "Never written.", code=None, env=with_env(SHAPING_NOTES_LOCK_WAIT=value))
    assert_refused(result, 2, "SHAPING_NOTES_LOCK_WAIT")
    assert not folder.exists()


# --------------------------------------------------------------------------
# 4. A retry is a duplicate even after other writers' notes

def test_a_retry_after_another_writers_note_is_a_duplicate(tmp_path):
    folder = tmp_path / "session"
    first = append(folder, "decision", "Use flock.", "--effect", "One writer at a time.")
    other = append(folder, "tension", "Another writer's note.")
    assert (first.receipt["seq"], other.receipt["seq"]) == (1, 2)
    assert first.receipt.pop("created") is True  # the first append started the session; the retry starts nothing
    before = folder_digest(folder)
    retry = append(folder, "decision", "Use flock.", "--effect", "One writer at a time.")
    assert retry.code == 0
    assert retry.receipt == dict(first.receipt, duplicate=True)
    assert folder_digest(folder) == before
    # A differing field is a new note, even inside the window.
    assert append(folder, "decision", "Use flock.").receipt["seq"] == 3


@pytest.mark.parametrize("notes_after, is_duplicate", [(19, True), (20, False)])
def test_the_duplicate_window_holds_the_last_20_records(tmp_path, notes_after, is_duplicate):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    records = [make_record(session_id, 1, "gate", "The retried gate.", ts=utc(60))]
    records += [make_record(session_id, seq, "source", "Other %d." % seq, ts=utc(30))
                for seq in range(2, notes_after + 2)]
    write_log(folder, b"".join(line_of(record) for record in records))
    result = append(folder, "gate", "The retried gate.")
    assert result.code == 0, result
    if is_duplicate:
        assert (result.receipt["note_id"], result.receipt.get("duplicate")) == ("n00001", True)
    else:
        assert result.receipt["seq"] == notes_after + 2 and "duplicate" not in result.receipt


@pytest.mark.parametrize("minutes_ago, is_duplicate", [(8, True), (12, False)])
def test_the_duplicate_window_holds_the_last_ten_minutes(tmp_path, minutes_ago, is_duplicate):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    records = [make_record(session_id, 1, "discard", "A vector store.", ts=utc(minutes_ago * 60)),
               make_record(session_id, 2, "source", "Something newer.", ts=utc(5))]
    write_log(folder, b"".join(line_of(record) for record in records))
    result = append(folder, "discard", "A vector store.")
    assert result.code == 0, result
    assert result.receipt.get("duplicate", False) is is_duplicate
    assert result.receipt["seq"] == (1 if is_duplicate else 3)


def test_a_damaged_record_is_never_answered_as_the_duplicate(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    tampered = make_record(session_id, 1, "decision", "Signed.", ts=utc(5))
    tampered["checksum"] = "0" * 16
    write_log(folder, line_of(tampered))
    result = append(folder, "decision", "Signed.")
    assert result.code == 0 and result.receipt["seq"] == 2 and "duplicate" not in result.receipt


# --------------------------------------------------------------------------
# 5. Readers beside writers see no false damage

@pytest.mark.skipif(not POSIX, reason="the writer stand-in locks with flock")
@pytest.mark.parametrize("ending", ["finished", "killed"])
def test_readers_beside_a_writer_mid_append_see_no_damage(tmp_path, ending):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = b"".join(line_of(make_record(session_id, seq)) for seq in (1, 2, 3))
    write_log(folder, healthy)
    fourth = line_of(make_record(session_id, 4))
    writer = subprocess.Popen([sys.executable, "-S", "-c", HALF_WRITER_SCRIPT, str(folder), fourth.hex(), "1.1.0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline() == b"half\n"
        assert log_bytes(folder) == healthy + fourth[:len(fourth) // 2]
        # The half line is a note in flight, not damage: readers leave it for their next read.
        verify = run_notes("verify", folder=folder)
        assert verify.code == 0 and verify.receipt["total"] == 3, verify
        for reader in (("tail",), ("summary",), ("recap",), ("export", "--output", tmp_path / "e.json")):
            result = run_notes(*reader, folder=folder)
            assert result.code == 0 and "warnings" not in result.receipt, result
        if ending == "finished":
            writer.communicate(b"go\n", timeout=60)
            assert writer.returncode == 0
    finally:
        writer.kill()
        writer.wait(timeout=60)
    verify = run_notes("verify", folder=folder)
    if ending == "finished":
        assert verify.code == 0 and verify.receipt["total"] == 4, verify
    else:  # the writer died mid-append and released the lock: now the cut-off line is real damage
        assert verify.code == 3 and problem_kinds(verify) == [(4, "torn_tail")], verify


@pytest.mark.long  # a storm of writers: the long set
@pytest.mark.skipif(not POSIX, reason="concurrency test of flock writers")
def test_verify_beside_concurrent_writers_never_reports_damage(tmp_path):
    folder = tmp_path / "session"
    new_session(folder)
    writers, appends = 3, 12
    finished = threading.Event()
    codes, errors = [], []

    def writer(index):
        for number in range(appends):
            # Long texts make each write take longer, widening the window a reader could fall into.
            result = append(folder, "decision", "writer %d note %d " % (index, number) + "é" * 1900, code=None,
                            run=run_script)
            if result.code != 0:
                errors.append(result)

    def reader():
        while not finished.is_set():
            result = run_script("verify", folder=folder)
            codes.append(result.code)
            if result.code != 0:
                errors.append(result)

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(writers)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads + readers:
        thread.start()
    for thread in threads:
        thread.join()
    finished.set()
    for thread in readers:
        thread.join()
    assert not errors, errors[:3]
    assert codes and set(codes) == {0}
    final = run_notes("verify", folder=folder)
    assert final.code == 0 and final.receipt["total"] == writers * appends


# --------------------------------------------------------------------------
# 6. Linear, bounded reading

def peak_memory_mib(*args, folder) -> tuple:
    """Run notes.py in a child of a fresh interpreter; return (its receipt, its peak RSS in MiB)."""
    probe = ("import json, resource, subprocess, sys\n"
             "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
             "print(json.dumps([done.returncode, done.stdout.decode(),"
             " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n")
    command = [sys.executable, "-S", str(NOTES), "--dir", str(folder)] + [str(arg) for arg in args]
    completed = subprocess.run([sys.executable, "-c", probe] + command, capture_output=True, timeout=120)
    code, out, peak_kib = json.loads(completed.stdout)
    return code, json.loads(out), peak_kib / 1024


def sparse_bytes(path, count: int) -> None:
    """Append count zero bytes (no newline among them) to path, cheaply."""
    with open(str(path), "r+b") as handle:
        handle.seek(0, os.SEEK_END)
        handle.truncate(handle.tell() + count)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak memory through ru_maxrss in KiB")
def test_a_torn_tail_longer_than_any_record_stays_in_place_in_bounded_memory(tmp_path):
    # No note is 16 MiB long: the tail is not a cut-off note, and copying it aside could
    # need more disk than is free.  Append ends it with a newline where it is (a damaged
    # line, which holds seq 4) and numbers past it; not one byte is moved or lost.
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = b"".join(line_of(make_record(session_id, seq)) for seq in (1, 2, 3))
    start = b'{"id":"n00004","text":"'
    write_log(folder, healthy + start)
    torn_size = 16 << 20
    sparse_bytes(folder / LOG, torn_size - len(start))

    code, tail, peak = peak_memory_mib("tail", folder=folder)
    assert code == 0 and tail["count"] == 3 and tail["warnings"], tail
    assert peak < 40, peak
    code, receipt, peak = peak_memory_mib("append", "--type", "decision", "--text", "After the long tail.",
                                          folder=folder)
    assert code == 0 and receipt["seq"] == 5, receipt
    assert receipt["recovered"] == {"kind": "torn_tail_kept", "bytes": torn_size,
                                    "why": "longer than any record, so not a note cut off"}
    assert peak < 40, peak
    assert stray_files(folder) == []
    with open(str(folder / LOG), "rb") as handle:
        assert handle.read(len(healthy) + len(start)) == healthy + start
        assert handle.read(torn_size - len(start)) == b"\x00" * (torn_size - len(start))  # byte for byte
        assert handle.read(1) == b"\n"
        assert json.loads(handle.read())["seq"] == 5
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["line_too_long"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak memory through ru_maxrss in KiB")
def test_a_line_longer_than_any_record_is_reported_without_being_held(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    write_log(folder, line_of(make_record(session_id, 1)))
    sparse_bytes(folder / LOG, 24 << 20)
    with open(str(folder / LOG), "ab") as handle:
        handle.write(b"\n" + line_of(make_record(session_id, 3)))

    code, verify, peak = peak_memory_mib("verify", folder=folder)
    assert code == 3 and verify["total"] == 2, verify
    assert [(entry["line"], entry["kind"]) for entry in verify["problems"]] == [(2, "line_too_long")]
    assert peak < 40, peak
    for reader in ("summary", "recap"):
        code, receipt, peak = peak_memory_mib(reader, folder=folder)
        assert code == 0 and receipt["total"] == 2 and receipt["warnings"], receipt
        assert peak < 40, (reader, peak)
    code, tail, _ = peak_memory_mib("tail", folder=folder)
    assert code == 0 and [record["seq"] for record in tail["records"]] == [1, 3], tail
    # The long line held seq 2: the next note is 4, whatever reading it took.
    result = append(folder, "decision", "Past the long line.")
    assert result.code == 0 and result.receipt["seq"] == 4, result


def test_reading_back_gives_every_line_across_block_edges():
    # Lines of every length around the block size and the line cap, read from the end of
    # the file, come back whole, in order, with their offsets; a line over the cap as None.
    block, cap = notes._BACKWARD_BLOCK, notes._LINE_LIMIT
    lengths = [0, 1, block - 1, block, block + 1, 2 * block + 7, 0, 10, cap, cap + 1, 3 * block, 3]
    lines = [bytes([65 + index % 26]) * length for index, length in enumerate(lengths)]
    for last in (b"", b"cut", b"x" * (cap + 5)):
        data = b"\n".join(lines) + b"\n" + last
        expected, offset = [], 0
        for line in lines + [last]:
            expected.append((offset, line if len(line) <= cap else None))
            offset += len(line) + 1
        assert list(notes._read_lines_backward(io.BytesIO(data), len(data))) == expected[::-1]
        # Read up to a size short of the end: the bytes past it are not seen.
        size = len(data) - len(last) - 1
        assert list(notes._read_lines_backward(io.BytesIO(data), size))[1:] == expected[-3::-1]


# --------------------------------------------------------------------------
# 7. Special files never hang or eat memory

EMPTY_EXPORT = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-03-14T09:00:00Z",
                "session": {"schema_version": "shaping-memory-session-meta.v0",
                            "session_id": "0f3c2b1c-3c66-49ee-8557-e323c0678aaf",
                            "created_at": "2026-03-14T09:00:00Z", "log_file": "/mnt/data/session_notes.jsonl"},
                "record_count": 0, "records": []}
ALL_COMMANDS = [("init",), ("append", "--type", "mode", "--text", "Here."), ("tail",), ("summary",),
                ("recap",), ("verify",), ("export",), ("restore", "export.json")]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("arguments", ALL_COMMANDS, ids=lambda arguments: arguments[0])
def test_a_fifo_where_the_meta_should_be_is_refused_at_once(tmp_path, arguments):
    folder = tmp_path / "session"
    folder.mkdir()
    os.mkfifo(str(folder / META))
    (tmp_path / "export.json").write_text(json.dumps(EMPTY_EXPORT))
    result = run_notes(*arguments, folder=folder, cwd=str(tmp_path), timeout=20)
    assert_refused(result, 2, str(folder / META), "FIFO")
    assert stray_files(folder) == [] and not (folder / LOG).exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("arguments", ALL_COMMANDS[1:7], ids=lambda arguments: arguments[0])
def test_a_fifo_where_the_log_should_be_is_refused_at_once(tmp_path, arguments):
    folder = tmp_path / "session"
    new_session(folder)
    os.unlink(str(folder / LOG))
    os.mkfifo(str(folder / LOG))
    meta = (folder / META).read_bytes()
    result = run_notes(*arguments, folder=folder, timeout=20)
    assert_refused(result, 2, str(folder / LOG), "FIFO")
    # (folder_digest would open the FIFO: look at each file instead.)
    assert stray_files(folder) == [] and (folder / META).read_bytes() == meta
    assert not os.path.isfile(str(folder / LOG))


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
def test_a_socket_where_the_meta_should_be_is_refused(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(folder / META))
        for arguments in ALL_COMMANDS[:6]:
            assert_refused(run_notes(*arguments, folder=folder, timeout=20), 2, str(folder / META))
    finally:
        server.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_restore_refuses_a_fifo_and_a_device_at_once(tmp_path):
    fifo = tmp_path / "export-fifo.json"
    os.mkfifo(str(fifo))
    for source, word in ((fifo, "FIFO"), ("/dev/zero", "device")):
        folder = tmp_path / "target"
        result = run_notes("restore", source, folder=folder, timeout=20)
        assert_refused(result, 2, str(source), word)
        assert not folder.exists()


def test_restore_refuses_an_export_larger_than_any_real_one_before_reading_it(tmp_path):
    export = tmp_path / "huge-export.json"
    with open(str(export), "wb") as handle:
        handle.truncate(257 << 20)  # sparse: costs no disk
    folder = tmp_path / "target"
    result = run_notes("restore", export, folder=folder, timeout=60)
    assert_refused(result, 2, str(export), "256 MiB")
    assert not folder.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_export_refuses_an_output_that_is_a_fifo(tmp_path):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Kept.").code == 0
    fifo = tmp_path / "out.json"
    os.mkfifo(str(fifo))
    result = run_notes("export", "--output", fifo, folder=folder, timeout=20)
    assert_refused(result, 2, str(fifo), "FIFO")
    assert os.path.exists(str(fifo)) and not os.path.isfile(str(fifo))


# --------------------------------------------------------------------------
# 8. A failed restore leaves nothing to fork

def exported_session(tmp_path) -> tuple:
    source = tmp_path / "source"
    for number in range(1, 6):
        assert append(source, "decision", "Restored %d." % number).code == 0
    export = tmp_path / "export.json"
    assert run_notes("export", "--output", export, folder=source).code == 0
    return export, json.loads(export.read_text("utf-8"))


def failing_write_to(name_part: str, error_number: int):
    real_write = os.write

    def write(descriptor, data):
        if name_part in os.path.basename(os.readlink("/proc/self/fd/%d" % descriptor)):
            raise OSError(error_number, os.strerror(error_number))
        return real_write(descriptor, data)
    return write


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file is written")
@pytest.mark.parametrize("target", ["empty folder", "fresh init"])
@pytest.mark.parametrize("fault", [("session_notes", errno.ENOSPC), ("session_meta", errno.EFBIG)],
                         ids=["log write fails", "meta write fails"])
def test_a_restore_cut_short_leaves_no_session_to_fork(tmp_path, capsys, monkeypatch, target, fault):
    export, content = exported_session(tmp_path)
    folder = tmp_path / "target"
    if target == "fresh init":
        new_session(folder)
    monkeypatch.setattr(os, "write", failing_write_to(*fault))
    code = notes.main(["--dir", str(folder), "restore", str(export)])
    monkeypatch.undo()
    out, err = capsys.readouterr()
    assert code == 1 and json.loads(out)["ok"] is False, (out, err)

    # Either no session, or the whole one: never the export's meta over a log that lacks its notes.
    meta = json.loads((folder / META).read_text("utf-8")) if (folder / META).exists() else None
    if meta is not None and meta["session_id"] == content["session"]["session_id"]:
        assert read_records(folder) == content["records"]
    # So the next append cannot start a fork of the exported session at n00001.
    code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "A fork?")
    if code == 0:
        assert session_id_of(folder) != content["session"]["session_id"], receipt
        os.unlink(str(folder / META))
        os.unlink(str(folder / LOG))
    else:
        assert code == 2, receipt
    # The same restore, run again, succeeds.
    code, receipt = run_here(capsys, folder, "restore", str(export))
    assert code == 0 and receipt["restored"] == 5, receipt
    assert read_records(folder) == content["records"]
    assert session_id_of(folder) == content["session"]["session_id"]
    assert run_here(capsys, folder, "verify")[0] == 0


@pytest.mark.long  # a kill loop: the long set
@pytest.mark.skipif(not POSIX, reason="SIGKILL")
def test_a_restore_killed_at_any_moment_leaves_no_session_or_a_whole_one(tmp_path):
    export, content = exported_session(tmp_path)
    expected = b"".join(line_of(record) for record in content["records"])
    for attempt in range(12):
        folder = tmp_path / ("target%02d" % attempt)
        process = subprocess.Popen([sys.executable, "-S", str(NOTES), "--dir", str(folder), "restore", str(export)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.005 * attempt)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        if (folder / META).exists():
            assert log_bytes(folder) == expected, attempt
        result = run_notes("restore", export, folder=folder)
        assert result.code == 0, (attempt, result)
        assert log_bytes(folder) == expected
        assert run_notes("verify", folder=folder).code == 0


# --------------------------------------------------------------------------
# 9. Odd but real values

@pytest.mark.skipif(not POSIX or sys.platform == "darwin", reason="needs a filesystem that takes any bytes")
def test_a_folder_whose_name_is_not_utf8_holds_a_session(tmp_path):
    folder = os.fsencode(str(tmp_path)) + b"/caf\xe9-\xff"
    target = os.fsencode(str(tmp_path)) + b"/restored-\xfe"

    def run(where, *arguments):
        result = run_notes("--dir", where, *arguments)
        assert_no_traceback(result)
        assert result.code == 0, result
        return result.receipt

    receipt = run(folder, "init")
    assert os.fsencode(receipt["path"]) == folder + b"/" + LOG.encode()
    for number in (1, 2):
        assert run(folder, "append", "--type", "decision", "--text", "Note %d." % number)["seq"] == number
    assert run(folder, "tail")["count"] == 2
    assert run(folder, "summary")["total"] == 2
    assert run(folder, "recap")["decisions"]
    assert run(folder, "verify")["ok"] is True
    export = run(folder, "export")
    assert os.fsencode(export["path"]) == folder + b"/" + EXPORT.encode()
    assert run(folder, "export", "--format", "md")["record_count"] == 2
    assert run(target, "restore", os.fsencode(export["path"]))["restored"] == 2
    assert run(target, "verify")["total"] == 2
    meta = json.loads(open(folder + b"/" + META.encode(), "rb").read().decode("utf-8"))
    assert os.fsencode(meta["log_file"]) == folder + b"/" + LOG.encode()


@pytest.mark.parametrize("seq", [10 ** 20, int("9" * 4300)], ids=["10**20", "4300 digits"])
def test_an_absurd_seq_on_the_last_line_is_refused_clearly(tmp_path, seq):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    write_log(folder, line_of(make_record(session_id, 1)) + line_of(make_record(session_id, seq)))
    before = folder_digest(folder)
    result = append(folder, "decision", "After the absurd seq.")
    if result.code == 0:  # the absurd seq taken as a damaged line, numbered past with a sane seq
        assert result.receipt["seq"] == 3, result
        write_log(folder, line_of(make_record(session_id, 1)) + line_of(make_record(session_id, seq)))
    else:
        message = assert_refused(result, 2, "seq")
        assert "verify" in message and len(message) < 1000
    assert folder_digest(folder) == before
    verify = run_notes("verify", folder=folder)
    assert_no_traceback(verify)
    assert verify.code == 3 and [line for line, _ in problem_kinds(verify)] == [2], verify
    for reader in ("tail", "summary", "recap"):
        result = run_notes(reader, folder=folder)
        assert_no_traceback(result)
        assert result.code == 0, result


def test_a_seq_too_long_to_convert_is_a_damaged_line(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    huge = b'{"id":"n1","seq":' + b"9" * 5000 + b"}\n"
    write_log(folder, line_of(make_record(session_id, 1)) + huge)
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and problem_kinds(verify) == [(2, "not_json")], verify
    result = append(folder, "decision", "Numbered past it.")
    assert result.code == 0 and result.receipt["seq"] == 3, result


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file is written")
def test_side_files_of_failed_recoveries_do_not_pile_up(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = line_of(make_record(session_id, 1))
    cut = b'{"id":"n00002","ts":"20'
    write_log(folder, healthy + cut)
    # EIO: a failure that is not a lack of room (no room keeps the tail in place instead).
    monkeypatch.setattr(os, "write", failing_write_to(".torn-", errno.EIO))
    for _ in range(3):
        assert notes.main(["--dir", str(folder), "append", "--type", "mode", "--text", "Blocked."]) == 1
        capsys.readouterr()
    monkeypatch.undo()
    assert stray_files(folder) == []
    assert log_bytes(folder) == healthy + cut
    code, receipt = run_here(capsys, folder, "append", "--type", "mode", "--text", "Through.")
    assert code == 0 and receipt["seq"] == 2, receipt
    assert stray_files(folder) == [os.path.basename(receipt["recovered"]["side_file"])]


def test_temporary_files_of_killed_exports_are_cleared_by_the_next_write(tmp_path):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Kept.").code == 0
    stale = folder / ".session_export.json.0123456789ab.tmp"
    live = folder / ".session_export.json.ba9876543210.tmp"
    unrelated = folder / ".session_export.json.not-ours.tmp"
    for path in (stale, live, unrelated):
        path.write_bytes(b'{"schema_version": "shaping-memory-export.v0", "ses')
    hour_ago = time.time() - 3600
    os.utime(str(stale), (hour_ago, hour_ago))
    os.utime(str(unrelated), (hour_ago, hour_ago))
    assert run_notes("export", folder=folder).code == 0
    # The stale one of a killed export goes; one that may still be written, and any other file, stay.
    assert stray_files(folder) == sorted([EXPORT, live.name, unrelated.name])


# --------------------------------------------------------------------------
# The lock's refusal names who holds it; Ctrl-C is answered in JSON

@pytest.mark.skipif(not POSIX, reason="flock's shared and exclusive locks")
def test_a_reader_holding_the_lock_is_named_as_a_reader_not_a_writer(tmp_path, capsys, monkeypatch):
    import fcntl

    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Before.")
    before = folder_digest(folder)
    descriptor = os.open(str(folder), os.O_RDONLY)
    fcntl.flock(descriptor, fcntl.LOCK_SH)  # as a reader stopped while it takes the log's size holds it
    monkeypatch.setenv("SHAPING_NOTES_LOCK_WAIT", "0.2")
    try:
        code = notes.main(["--dir", str(folder), "append", "--type", "gate", "--text", "Waits."])
    finally:
        os.close(descriptor)
    assert code == 1
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": (
        "a notes.py command reading the log holds the lock %s and did not release it within 0.2 s; nothing was "
        "written. Run the same command again; if the lock stays held, that command is stopped or hung (Ctrl-Z "
        "stops one): resume or end it, or set SHAPING_NOTES_LOCK_WAIT to wait longer" % (folder / LOCK))}
    assert folder_digest(folder) == before


@pytest.mark.parametrize("value", ["hunter2", "-1", "nan", "1e9"])
def test_the_lock_wait_setting_is_refused_without_echoing_it(tmp_path, capsys, monkeypatch, value):
    import notes

    monkeypatch.setenv("SHAPING_NOTES_LOCK_WAIT", value)
    assert notes.main(["--dir", str(tmp_path / "fresh"), "append", "--type", "decision", "--text", "No."]) == 2
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": (
        "SHAPING_NOTES_LOCK_WAIT is not a number of seconds from 0 to 86400; set it to how long a writer may wait "
        "for the lock, or unset it to wait 30 s")}
    assert not (tmp_path / "fresh").exists()


INTERRUPTED = ("interrupted (Ctrl-C); a command that writes may have saved its note before it stopped: run it "
               "again, and a note already saved is answered as a duplicate (\"duplicate\": true), never stored twice")


def test_ctrl_c_during_a_command_is_answered_in_json_with_exit_130(tmp_path, capsys, monkeypatch):
    import notes

    def interrupted(arguments):
        raise KeyboardInterrupt
    monkeypatch.setattr(notes, "_dispatch", interrupted)
    assert notes.main(["--dir", str(tmp_path), "tail"]) == 130
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": INTERRUPTED}


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="sees the waiting writer's descriptors in /proc")
def test_ctrl_c_while_a_writer_waits_for_the_lock_is_answered_in_json(tmp_path):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Before the hang.").code == 0
    with LockHolder(folder):
        waiting = subprocess.Popen([sys.executable, "-S", str(NOTES), "--dir", str(folder), "append", "--type",
                                    "gate", "--text", "Waits for the lock."], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not lock_waiter_started(waiting.pid):
            time.sleep(0.05)
        waiting.send_signal(signal.SIGINT)
        out, err = waiting.communicate(timeout=30)
    assert (waiting.returncode, err) == (130, b"")
    assert json.loads(out) == {"ok": False, "error": INTERRUPTED}


def lock_waiter_started(pid) -> bool:
    """Whether the process has opened the session lock (it then waits in the loop main answers Ctrl-C from)."""
    try:
        return any(os.readlink("/proc/%d/fd/%s" % (pid, fd)).endswith(LOCK) for fd in os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return False


# Ctrl-C while notes.py still loads (its imports), before main runs: sent by an import hook at that moment.
STARTUP_INTERRUPT = r"""
import os, runpy, signal, sys
class Trip:
    def find_spec(self, name, path=None, target=None):
        if name == "hashlib":  # imported by notes.py after its first lines, before main
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Trip())
sys.argv = [sys.argv[1], "--dir", sys.argv[2], "tail"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_ctrl_c_while_notes_py_loads_is_answered_in_json(tmp_path):
    completed = subprocess.run([sys.executable, "-S", "-c", STARTUP_INTERRUPT, str(NOTES), str(tmp_path)],
                               capture_output=True, timeout=60)
    assert (completed.returncode, completed.stderr) == (130, b"")
    assert json.loads(completed.stdout) == {"ok": False, "error": (
        "interrupted (Ctrl-C) before the command began; nothing was written. Run it again")}
