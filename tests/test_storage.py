"""Storage: torn tails and damage, locks and their waits, writers killed or side by side, durability,
bounded work, private files, and the attacks on files that once broke a guarantee."""

from __future__ import annotations

import builtins
import errno
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from conftest import (HALF_WRITER_SCRIPT, HOLDER_SCRIPT, LOG, NOTES, REPO, SESSION_ID, append,
                      assert_no_traceback, assert_refused, copy_fixture, folder_digest, line_of, log_bytes,
                      make_record, new_session, notes, read_records, run_here, run_notes, run_script,
                      session_id_of, v0_checksum, write_export, write_log, write_session)

# Killing with SIGKILL and locking with flock, file modes: POSIX only.
POSIX_PROCESSES = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and flock are POSIX")
POSIX_MODES = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


# ==========================================================================
# Storage integrity: torn tails, export beside the session's files, lock waits, retries, readers
# beside writers, special files, failed restores, odd values, Ctrl-C

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
        handle.truncate(17 << 20)  # sparse: costs no disk
    folder = tmp_path / "target"
    result = run_notes("restore", export, folder=folder, timeout=60)
    assert_refused(result, 2, str(export), "16 MiB")
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
        "a notes.py command reading the log holds the lock %s beyond 0.2 s; nothing was written. Run the command "
        "again; if the lock stays held, resume or end that stopped or hung command, or set SHAPING_NOTES_LOCK_WAIT "
        "to wait longer" % (folder / LOCK))}
    assert folder_digest(folder) == before


# A reader that stops itself (SIGSTOP) the moment it holds any lock: the worst moment to be stopped.
STOPPING_READER_SCRIPT = r"""
import fcntl, os, runpy, signal, sys
plain_flock = fcntl.flock
def flock(descriptor, operation):
    plain_flock(descriptor, operation)
    if not operation & fcntl.LOCK_UN:
        os.kill(os.getpid(), signal.SIGSTOP)
fcntl.flock = flock
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def stopped_or_gone(process, seconds=20):
    """Wait until the process has stopped itself (True) or ended (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with open("/proc/%d/stat" % process.pid) as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "T":
                return True
        time.sleep(0.01)
    raise AssertionError("the reader neither stopped nor ended")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads a process's state from /proc")
@pytest.mark.parametrize("command", [("verify",), ("recap",), ("tail",), ("summary",), ("show", "n00001")])
def test_a_reader_stopped_at_any_moment_does_not_hold_up_a_writer_on_a_whole_log(tmp_path, command):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Before the reader.").code == 0
    reader = subprocess.Popen([sys.executable, "-S", "-c", STOPPING_READER_SCRIPT, str(NOTES), "--dir",
                               str(folder)] + list(command), stdout=subprocess.DEVNULL)
    try:
        stopped_or_gone(reader)
        result = run_notes("append", "--type", "gate", "--text", "Written beside the reader.", folder=folder,
                           env=with_env(SHAPING_NOTES_LOCK_WAIT="2"), timeout=30)
        assert result.code == 0 and result.receipt["seq"] == 2, result
    finally:
        reader.send_signal(signal.SIGCONT)
        reader.wait(timeout=60)
    assert reader.returncode == 0


@pytest.mark.parametrize("value", ["hunter2", "-1", "nan", "1e9"])
def test_the_lock_wait_setting_is_refused_without_echoing_it(tmp_path, capsys, monkeypatch, value):
    import notes

    monkeypatch.setenv("SHAPING_NOTES_LOCK_WAIT", value)
    assert notes.main(["--dir", str(tmp_path / "fresh"), "append", "--type", "decision", "--text", "No."]) == 2
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": (
        "SHAPING_NOTES_LOCK_WAIT is not a number of seconds from 0 to 86400; set it to how long a writer may wait "
        "for the lock, or unset it to wait 30 s")}
    assert not (tmp_path / "fresh").exists()


INTERRUPTED = ("interrupted (Ctrl-C); a write may have finished: run the command again, and a saved note is answered "
               "as a duplicate (\"duplicate\": true), never stored twice")


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


# ==========================================================================
# Constant-time append, damage in the middle, verify, retry-safe append, durability, readers that never write

OTHER_SESSION = "9b1f3c2e-4d5a-4e6f-8a7b-0c1d2e3f4a5b"


# --------------------------------------------------------------------------
# Local helpers

def five_records(session_id: str) -> list:
    return [make_record(session_id, seq, note_type) for seq, note_type in
            ((1, "mode"), (2, "shape"), (3, "gate"), (4, "decision"), (5, "artifact"))]


# --------------------------------------------------------------------------
# 2. Constant-time append: the last seq comes from the end of the file

class CountingFile:
    """A file object that counts the bytes read through it."""

    def __init__(self, real, counter: dict):
        self._real = real
        self._counter = counter

    def _count(self, data):
        self._counter["bytes"] += len(data)
        return data

    def read(self, *args):
        return self._count(self._real.read(*args))

    def read1(self, *args):
        return self._count(self._real.read1(*args))

    def readline(self, *args):
        return self._count(self._real.readline(*args))

    def readlines(self, *args):
        lines = self._real.readlines(*args)
        self._counter["bytes"] += sum(len(line) for line in lines)
        return lines

    def readinto(self, buffer):
        number = self._real.readinto(buffer)
        self._counter["bytes"] += number or 0
        return number

    def __iter__(self):
        for line in self._real:
            yield self._count(line)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._real.close()

    def __getattr__(self, name):
        return getattr(self._real, name)


def count_reads(monkeypatch) -> dict:
    """Count every byte notes.py reads from a file, through open() or os.read/os.pread."""
    counter = {"bytes": 0}
    real_open, real_read, real_pread = builtins.open, os.read, getattr(os, "pread", None)

    def counting_open(*args, **kwargs):
        return CountingFile(real_open(*args, **kwargs), counter)

    def counting_read(descriptor, size):
        data = real_read(descriptor, size)
        counter["bytes"] += len(data)
        return data

    def counting_pread(descriptor, size, offset):
        data = real_pread(descriptor, size, offset)
        counter["bytes"] += len(data)
        return data

    monkeypatch.setattr(notes, "open", counting_open, raising=False)
    monkeypatch.setattr(os, "read", counting_read)
    if real_pread is not None:
        monkeypatch.setattr(os, "pread", counting_pread)
    return counter


@pytest.mark.parametrize("junk_size", [4 << 20, 64 << 20])
def test_append_reads_only_the_end_of_a_huge_log(tmp_path, capsys, monkeypatch, junk_size):
    folder = tmp_path / "session"
    assert run_here(capsys, folder, "init")[0] == 0
    session_id = session_id_of(folder)
    records = b"".join(line_of(make_record(session_id, seq)) for seq in (1, 2, 3))
    # A huge first region of zero bytes (sparse, so cheap on disk), far from the end.
    path = os.path.join(str(folder), LOG)
    with open(path, "wb") as handle:
        handle.truncate(junk_size)
        handle.seek(junk_size)
        handle.write(b"\n" + records)
    size = os.path.getsize(path)

    counter = count_reads(monkeypatch)
    code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "Fourth.")
    monkeypatch.undo()
    assert code == 0 and (receipt["note_id"], receipt["seq"]) == ("n00004", 4), receipt
    assert "recovered" not in receipt
    # The same small bound for a 4 MiB and a 64 MiB log: the cost does not grow with the log.
    assert counter["bytes"] <= 256 * 1024, (counter, size)
    assert log_bytes(folder)[:size] == b"\x00" * junk_size + b"\n" + records


def test_append_to_a_long_healthy_log_reads_a_bounded_amount(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "session"
    assert run_here(capsys, folder, "init")[0] == 0
    session_id = session_id_of(folder)
    count = 20000
    write_log(folder, b"".join(line_of(make_record(session_id, seq)) for seq in range(1, count + 1)))
    size = os.path.getsize(os.path.join(str(folder), LOG))
    assert size > 3 << 20

    counter = count_reads(monkeypatch)
    code, receipt = run_here(capsys, folder, "append", "--type", "gate", "--text", "One more.")
    monkeypatch.undo()
    assert code == 0 and receipt["seq"] == count + 1
    assert counter["bytes"] <= 256 * 1024 and counter["bytes"] < size // 10, (counter, size)


# --------------------------------------------------------------------------
# 4. Damage in the middle: never repaired by a writer, skipped or flagged by readers

def insert_after(lines: list, index: int, extra: bytes) -> list:
    return lines[:index] + [extra] + lines[index:]


DAMAGE = {
    # kind: (transform of (records, lines) -> lines, verify kinds expected, a word of the warning)
    "not_utf8": (lambda records, lines: insert_after(lines, 2, b'{"id":"n00099","text":"caf\xe9 cr\xe8me"}\n'),
                 {"not_utf8"}, "UTF-8"),
    "not_json": (lambda records, lines: insert_after(lines, 2, line_of(records[2])[:50] + b"\n"),
                 {"not_json"}, "JSON"),
    "not_object": (lambda records, lines: insert_after(lines, 2, b'["n00003", 3, "gate"]\n'),
                   {"not_object"}, "object"),
    "bad_checksum": (None, {"bad_checksum"}, "checksum"),
    "repeated_seq": (lambda records, lines: insert_after(lines, 3, lines[1]), {"seq_repeated"}, "seq"),
    "out_of_order_seq": (lambda records, lines: lines[:2] + [lines[3], lines[2]] + lines[4:],
                         {"seq_repeated", "seq_gap"}, "seq"),
    "id_not_matching_seq": (None, {"id_mismatch"}, "id"),
    "foreign_session": (None, {"foreign_session"}, "session"),
    "unknown_type": (None, {"unknown_type"}, "type"),
}


def damaged_lines(kind: str, session_id: str, records: list) -> list:
    lines = [line_of(record) for record in records]
    transform = DAMAGE[kind][0]
    if transform is not None:
        return transform(records, lines)
    damaged = dict(records[2])
    if kind == "bad_checksum":
        damaged["text"] = "Edited by hand after the checksum was taken."  # checksum kept
    else:
        damaged.update({"id_not_matching_seq": {"id": "n00030"},
                        "foreign_session": {"session_id": OTHER_SESSION},
                        "unknown_type": {"type": "musing"}}[kind])
        damaged["checksum"] = v0_checksum(damaged)  # signed, so only the named problem remains
    return lines[:2] + [line_of(damaged)] + lines[3:]


def parsed_objects(lines: list) -> list:
    """What a reader must return: every line that is a JSON object, in file order."""
    objects = []
    for line in lines:
        try:
            value = json.loads(line.decode("utf-8"))
        except ValueError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damage_in_the_middle_is_reported_never_repaired(tmp_path, kind):
    folder = tmp_path / "session"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    records = five_records(session_id)
    lines = damaged_lines(kind, session_id, records)
    damaged = b"".join(lines)
    write_log(folder, damaged)
    expected = parsed_objects(lines)
    _, expected_kinds, word = DAMAGE[kind]

    # Readers: skip what cannot be parsed, return the rest, warn; write nothing.
    before = folder_digest(folder)
    tail = run_notes("tail", "--limit", 100, folder=folder)
    assert tail.code == 0, tail
    assert tail.receipt["records"] == expected
    assert tail.receipt["warnings"] and any(word in message for message in tail.receipt["warnings"])
    summary = run_notes("summary", folder=folder)
    assert summary.code == 0 and summary.receipt["total"] == len(expected)
    assert any(word in message for message in summary.receipt["warnings"])
    export = run_notes("export", "--output", tmp_path / "export.json", folder=folder)
    assert export.code == 0 and export.receipt["record_count"] == len(expected)
    assert export.receipt["warnings"]
    assert json.loads((tmp_path / "export.json").read_text("utf-8"))["records"] == expected
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and verify.receipt["ok"] is False
    assert {entry["kind"] for entry in verify.receipt["problems"]} == expected_kinds
    assert folder_digest(folder) == before

    # The writer leaves every earlier byte alone and never reuses a seq.
    append = run_notes("append", "--type", "decision", "--text", "Written past the damage.", folder=folder)
    assert append.code == 0, append
    assert list(append.receipt) == ["ok", "command", "note_id", "seq", "path"]
    assert (append.receipt["note_id"], append.receipt["seq"]) == ("n00006", 6)
    after = log_bytes(folder)
    assert after.startswith(damaged)
    new = json.loads(after[len(damaged):].decode("utf-8"))
    assert new["seq"] == 6 and new["text"] == "Written past the damage." and new["session_id"] == session_id
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3  # still reported: the damage was not repaired
    assert {entry["kind"] for entry in verify.receipt["problems"]} == expected_kinds


def test_bad_checksum_is_flagged_with_its_id_by_readers(tmp_path):
    folder = copy_fixture("tampered", tmp_path / "tampered")
    lines = log_bytes(folder).splitlines()
    tampered = [(number, json.loads(line)) for number, line in enumerate(lines, 1)
                if v0_checksum(json.loads(line)) != json.loads(line)["checksum"]]
    assert len(tampered) == 1
    number, record = tampered[0]
    for command in ("tail", "summary"):
        result = run_notes(command, *(("--limit", 50) if command == "tail" else ()), folder=folder)
        assert result.code == 0
        assert any(record["id"] in message and "checksum" in message for message in result.receipt["warnings"])


@pytest.mark.parametrize("last_line", ["repeats_an_earlier_seq", "goes_back_after_a_jump"])
def test_append_never_reuses_a_seq_when_the_last_line_is_out_of_order(tmp_path, last_line):
    # v0's concurrent writers leave logs like these: a slow writer adds a seq already taken.
    folder = tmp_path / "session"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    if last_line == "repeats_an_earlier_seq":
        records = five_records(session_id) + [make_record(session_id, 3, "tension", "A late writer.")]
    else:
        records = five_records(session_id)[:4] + [make_record(session_id, 9), make_record(session_id, 5)]
    highest = max(record["seq"] for record in records)
    write_log(folder, b"".join(line_of(record) for record in records))

    taken = {record["seq"] for record in records}
    for number in range(1, 6):
        append = run_notes("append", "--type", "decision", "--text", "New %d." % number, folder=folder)
        assert append.code == 0, append
        assert append.receipt["seq"] not in taken, (append.receipt, sorted(taken))
        taken.add(append.receipt["seq"])
    assert min(taken - {record["seq"] for record in records}) == highest + 1


def test_v0_dupseq_fixture_continues_past_the_highest_seq(tmp_path):
    folder = copy_fixture("dupseq", tmp_path / "dupseq")
    before = log_bytes(folder)
    highest = max(json.loads(line)["seq"] for line in before.splitlines())
    append = run_notes("append", "--type", "decision", "--text", "After the race.", folder=folder)
    assert append.code == 0 and append.receipt["seq"] == highest + 1
    assert log_bytes(folder).startswith(before)


def test_healthy_log_answers_without_warnings(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    expected_keys = {
        "tail": ["ok", "command", "count", "path", "records"],
        "summary": ["ok", "command", "session_id", "path", "total", "by_type", "last_note_id", "last_type"],
        "export": ["ok", "command", "record_count", "path", "keep"],
    }
    for command, keys in expected_keys.items():
        result = run_notes(command, folder=folder)
        assert result.code == 0, result
        assert list(result.receipt) == keys
    recap = run_notes("recap", folder=folder)
    assert recap.code == 0 and "warnings" not in recap.receipt
    append = run_notes("append", "--type", "decision", "--text", "Healthy.", folder=folder)
    assert list(append.receipt) == ["ok", "command", "note_id", "seq", "path"]


# --------------------------------------------------------------------------
# 5. verify

def test_verify_on_a_clean_log(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    before = folder_digest(folder)
    result = run_notes("verify", folder=folder)
    assert_no_traceback(result)
    assert result.code == 0
    assert list(result.receipt) == ["ok", "command", "path", "total", "problems"]
    assert result.receipt == {"ok": True, "command": "verify",
                              "path": os.path.join(os.path.realpath(str(folder)), LOG),
                              "total": 11, "problems": []}
    assert folder_digest(folder) == before


def test_verify_on_a_fresh_session(session):
    result = run_notes("verify", folder=session)
    assert result.code == 0 and result.receipt["total"] == 0 and result.receipt["problems"] == []


def test_a_problem_names_the_record_id_only_when_it_is_a_string(session):
    # The last line lacks its newline and its id is a number: every problem of
    # that line, missing_newline included, carries "id": null.
    session_id = json.loads((session / META).read_text("utf-8"))["session_id"]
    write_log(session, line_of(make_record(session_id, 1)) + b'{"id": 5, "seq": 2}')
    result = run_notes("verify", folder=session)
    assert result.code == 3, result
    assert [(p["line"], p["id"], p["kind"]) for p in result.receipt["problems"]] == [
        (2, None, "missing_newline"), (2, None, "missing_field")]


def test_verify_v0_fixtures_give_the_expected_kinds(tmp_path):
    # tampered: the one line whose checksum does not match, computed here.
    folder = copy_fixture("tampered", tmp_path / "tampered")
    lines = log_bytes(folder).splitlines()
    bad = [(number, json.loads(line)["id"]) for number, line in enumerate(lines, 1)
           if v0_checksum(json.loads(line)) != json.loads(line)["checksum"]]
    result = run_notes("verify", folder=folder)
    assert result.code == 3 and result.receipt["ok"] is False
    assert [(p["line"], p["id"], p["kind"]) for p in result.receipt["problems"]] == \
        [(number, record_id, "bad_checksum") for number, record_id in bad]

    # torn: the cut-off last line, and the 11 complete records.
    folder = copy_fixture("torn", tmp_path / "torn")
    line_count = len(log_bytes(folder).split(b"\n"))
    result = run_notes("verify", folder=folder)
    assert result.code == 3 and result.receipt["total"] == 11
    assert [(p["line"], p["kind"]) for p in result.receipt["problems"]] == [(line_count, "torn_tail")]

    # dupseq: every line whose seq is not above all before it is a repeat.
    folder = copy_fixture("dupseq", tmp_path / "dupseq")
    seqs = [json.loads(line)["seq"] for line in log_bytes(folder).splitlines()]
    repeats = [number for number, seq in enumerate(seqs, 1) if seq <= max(seqs[:number - 1] or [0])]
    assert repeats
    result = run_notes("verify", folder=folder)
    assert result.code == 3
    flagged = [p["line"] for p in result.receipt["problems"] if p["kind"] == "seq_repeated"]
    assert flagged == repeats
    for entry in result.receipt["problems"]:
        assert list(entry) == ["line", "id", "kind", "detail"]
        assert isinstance(entry["detail"], str) and entry["detail"]


def test_verify_lists_a_bounded_number_of_problems_and_counts_the_rest(tmp_path):
    folder = tmp_path / "session"
    assert run_notes("init", folder=folder).code == 0
    session_id = session_id_of(folder)
    junk_count = 1000
    lines = [line_of(make_record(session_id, 1))] + [b"not json %d\n" % n for n in range(junk_count)] + \
        [line_of(make_record(session_id, 2))]
    write_log(folder, b"".join(lines))
    result = run_notes("verify", folder=folder)
    assert result.code == 3
    assert list(result.receipt) == ["ok", "command", "path", "total", "problems", "problems_not_listed"]
    listed = result.receipt["problems"]
    assert 0 < len(listed) < junk_count
    assert len(listed) + result.receipt["problems_not_listed"] == junk_count
    assert [entry["line"] for entry in listed] == list(range(2, 2 + len(listed)))
    assert all(entry["kind"] == "not_json" and entry["id"] is None for entry in listed)
    assert result.receipt["total"] == 2
    # The readers' warnings are bounded too.
    summary = run_notes("summary", folder=folder)
    assert summary.code == 0 and len(summary.receipt["warnings"]) < junk_count


def test_verify_checks_the_meta(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    meta_path = folder / META
    meta = json.loads(meta_path.read_text("utf-8"))
    meta["schema_version"] = "something-else.v9"
    del meta["created_at"]
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", "utf-8")
    result = run_notes("verify", folder=folder)
    assert result.code == 3 and result.receipt["ok"] is False
    assert len(result.receipt["problems"]) == 2
    assert all(entry["line"] is None for entry in result.receipt["problems"])


# --------------------------------------------------------------------------
# 6. Retry-safe append

def test_identical_retry_writes_nothing_and_returns_the_same_note(tmp_path, python):
    folder = tmp_path / "session"
    first = run_notes("append", "--type", "decision", "--text", "Use flock.", "--effect", "One writer at a time.",
                      folder=folder, python=python)
    assert first.code == 0 and first.receipt["seq"] == 1
    assert first.receipt.pop("created") is True  # this append started the session; the retry starts nothing
    before = folder_digest(folder)
    retry = run_notes("append", "--type", "decision", "--text", "  Use flock. ", "--effect", "One writer at a time.",
                      folder=folder, python=python)
    assert retry.code == 0
    assert list(retry.receipt) == ["ok", "command", "note_id", "seq", "path", "duplicate"]
    assert retry.receipt == dict(first.receipt, duplicate=True)
    assert folder_digest(folder) == before


def test_only_an_exact_repeat_is_a_duplicate(tmp_path):
    folder = tmp_path / "session"

    def append(*args):
        result = run_notes("append", *args, folder=folder)
        assert result.code == 0, result
        return result.receipt

    first = append("--type", "decision", "--text", "A.")
    assert first["seq"] == 1 and first.pop("created") is True
    assert append("--type", "decision", "--text", "B.")["seq"] == 2
    # The same signal after a different one is still a retry (issue 13: the last 20 records count).
    assert append("--type", "decision", "--text", "A.") == dict(first, duplicate=True)
    # A differing effect, or type, is a new note.
    with_effect = append("--type", "decision", "--text", "A.", "--effect", "Changes the lock.")
    assert with_effect["seq"] == 3 and "duplicate" not in with_effect
    other_type = append("--type", "tension", "--text", "A.", "--effect", "Changes the lock.")
    assert other_type["seq"] == 4 and "duplicate" not in other_type
    repeat = append("--type", "tension", "--text", "A.", "--effect", "Changes the lock.")
    assert repeat == dict(other_type, duplicate=True)
    without_effect = append("--type", "tension", "--text", "A.")
    assert without_effect["seq"] == 5 and "duplicate" not in without_effect
    assert [record["seq"] for record in read_records(folder)] == [1, 2, 3, 4, 5]
    assert run_notes("verify", folder=folder).code == 0


# --------------------------------------------------------------------------
# 7. Durability: fsync of log and folder, unique temporary files, no link followed

def fd_path(descriptor: int) -> str:
    try:
        return os.readlink("/proc/self/fd/%d" % descriptor)
    except OSError:
        return "?"


def record_events(monkeypatch) -> list:
    """Log each write, fsync, rename and file creation notes.py makes, in order, by path."""
    events = []
    real_write, real_fsync, real_replace, real_rename, real_open = os.write, os.fsync, os.replace, os.rename, os.open
    real_truncate = os.ftruncate

    def write(descriptor, data):
        events.append(("write", fd_path(descriptor)))
        return real_write(descriptor, data)

    def fsync(descriptor):
        events.append(("fsync", fd_path(descriptor)))
        return real_fsync(descriptor)

    def replace(source, target, *args, **kwargs):
        result = real_replace(source, target, *args, **kwargs)
        events.append(("rename", os.path.realpath(str(target))))
        return result

    def rename(source, target, *args, **kwargs):
        result = real_rename(source, target, *args, **kwargs)
        events.append(("rename", os.path.realpath(str(target))))
        return result

    def ftruncate(descriptor, length):
        events.append(("truncate", fd_path(descriptor)))
        return real_truncate(descriptor, length)

    def open_(path, flags, *args, **kwargs):
        existed = os.path.lexists(path)
        descriptor = real_open(path, flags, *args, **kwargs)
        if flags & os.O_CREAT and not existed:
            events.append(("create", fd_path(descriptor)))
        return descriptor

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "ftruncate", ftruncate)
    return events


def assert_folder_synced_after_each_change(events: list, folder: str) -> None:
    """Every creation and rename in the folder is followed, later, by an fsync of the folder."""
    for index, (action, path) in enumerate(events):
        if action in ("create", "rename") and os.path.dirname(path) == folder:
            assert ("fsync", folder) in events[index + 1:], (action, path, events)


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to name the synced files")
def test_init_append_export_fsync_files_and_folder(tmp_path, capsys, monkeypatch):
    folder = os.path.realpath(str(tmp_path)) + "/session"
    log = os.path.join(folder, LOG)
    events = record_events(monkeypatch)
    assert run_here(capsys, folder, "init")[0] == 0
    init_events = list(events)
    # The meta went through a temporary file, fsynced before it was renamed into place.
    renames = [index for index, event in enumerate(init_events) if event == ("rename", os.path.join(folder, META))]
    assert renames, init_events
    temporary_writes = [path for action, path in init_events[:renames[0]]
                        if action == "write" and path != os.path.join(folder, META)]
    assert temporary_writes and ("fsync", temporary_writes[-1]) in init_events[:renames[0]]
    assert_folder_synced_after_each_change(init_events, folder)
    assert ("create", log) in init_events and ("fsync", log) in init_events

    for number in range(1, 4):
        del events[:]
        code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "Durable %d." % number)
        assert code == 0 and receipt["seq"] == number
        log_writes = [index for index, event in enumerate(events) if event == ("write", log)]
        assert log_writes, events
        assert ("fsync", log) in events[log_writes[-1] + 1:], events  # fsynced after the write
        assert_folder_synced_after_each_change(events, folder)

    del events[:]
    assert run_here(capsys, folder, "export")[0] == 0
    export = os.path.join(folder, EXPORT)
    rename_index = events.index(("rename", export))
    temporary_writes = [path for action, path in events[:rename_index] if action == "write"]
    assert temporary_writes and all(path != export for path in temporary_writes)
    assert ("fsync", temporary_writes[-1]) in events[:rename_index]
    assert ("fsync", folder) in events[rename_index + 1:]


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to name the synced files")
def test_recovery_fsyncs_the_side_file_the_folder_and_the_log(tmp_path, capsys, monkeypatch):
    folder = os.path.realpath(str(tmp_path)) + "/session"
    assert run_here(capsys, folder, "append", "--type", "mode", "--text", "First.")[0] == 0
    log = os.path.join(folder, LOG)
    with open(log, "ab") as handle:
        handle.write(b'{"id":"n00002","ts":"20')
    events = record_events(monkeypatch)
    code, receipt = run_here(capsys, folder, "append", "--type", "mode", "--text", "Second.")
    monkeypatch.undo()
    assert code == 0 and receipt["recovered"]["kind"] == "torn_tail"
    side = receipt["recovered"]["side_file"]
    side_write = events.index(("write", side))
    assert ("fsync", side) in events[side_write + 1:]
    assert ("fsync", folder) in events[events.index(("create", side)) + 1:]
    # The cut bytes leave the log only once they are safe in the side file, and the cut is synced.
    truncate = events.index(("truncate", log))
    assert truncate > events.index(("fsync", side))
    assert ("fsync", log) in events[truncate + 1:events.index(("write", log))]
    assert ("fsync", log) in events[events.index(("write", log)) + 1:]


def plant_link(link, target) -> None:
    os.symlink(str(target), str(link))


def test_links_at_guessable_temporary_names_are_not_followed(tmp_path):
    folder = tmp_path / "session"
    folder.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_bytes(b"precious\n")
    names = ["session_meta.json.tmp", ".session_meta.json.tmp", "session_export.json.tmp",
             ".session_export.json.tmp", "session_notes.jsonl.tmp", "session_export.json~"]
    for name in names:
        plant_link(folder / name, victim)
    missing_target = outside / "created-through-a-link"
    plant_link(folder / "session_meta.tmp", missing_target)

    assert run_notes("init", folder=folder).code == 0
    assert run_notes("append", "--type", "decision", "--text", "Links stay links.", folder=folder).code == 0
    export = run_notes("export", folder=folder)
    assert export.code == 0
    assert victim.read_bytes() == b"precious\n"
    assert not missing_target.exists()
    for name in names:
        assert os.readlink(str(folder / name)) == str(victim)
    assert json.loads((folder / EXPORT).read_text("utf-8"))["record_count"] == 1


@pytest.mark.parametrize("command", ["init", "export"])
def test_link_planted_at_the_exact_temporary_name_is_not_followed(tmp_path, capsys, monkeypatch, command):
    # Fix the randomness once to learn the temporary name, then plant a link at that very name.
    folder = os.path.realpath(str(tmp_path)) + "/session"
    if command == "export":
        assert run_here(capsys, folder, "append", "--type", "artifact", "--text", "Ship one file.")[0] == 0
    else:
        os.makedirs(folder)
    real_open = os.open

    def repeatable_urandom():
        """The same sequence of "random" bytes on every run, each call different."""
        calls = {"count": 0}

        def urandom(size):
            calls["count"] += 1
            stream = b"".join(hashlib.sha256(b"%d/%d" % (calls["count"], block)).digest()
                              for block in range(size // 32 + 1))
            return stream[:size]
        return urandom

    attempted = []

    def spying_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and flags & os.O_EXCL:
            attempted.append(str(path))
        return real_open(path, flags, *args, **kwargs)

    scratch = os.path.realpath(str(tmp_path)) + "/scratch"
    if command == "export":
        shutil.copytree(folder, scratch)
    else:
        os.makedirs(scratch)
    monkeypatch.setattr(os, "urandom", repeatable_urandom())
    monkeypatch.setattr(os, "open", spying_open)
    assert run_here(capsys, scratch, command)[0] == 0
    monkeypatch.undo()
    guessed = [os.path.basename(path) for path in attempted if os.path.dirname(path) == scratch]
    assert guessed, attempted

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    for name in guessed:
        plant_link(os.path.join(folder, name), victim)
    attempted.clear()
    monkeypatch.setattr(os, "urandom", repeatable_urandom())
    monkeypatch.setattr(os, "open", spying_open)
    code, receipt = run_here(capsys, folder, command)
    monkeypatch.undo()
    assert os.path.join(folder, guessed[0]) in attempted  # the planted name really was tried
    assert code == 0, receipt
    assert victim.read_bytes() == b"precious\n"
    for name in guessed:
        assert os.readlink(os.path.join(folder, name)) == str(victim)
    target = META if command == "init" else EXPORT
    assert not os.path.islink(os.path.join(folder, target))
    with open(os.path.join(folder, target), "rb") as handle:
        assert json.loads(handle.read().decode("utf-8"))


def test_export_to_a_path_that_is_a_link_does_not_write_through_it(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    link = tmp_path / "export-link.json"
    plant_link(link, victim)
    result = run_notes("export", "--output", link, folder=folder)
    assert_no_traceback(result)
    assert victim.read_bytes() == b"precious\n"
    if result.code == 0:  # the link itself may be replaced by the file, never written through
        assert not os.path.islink(str(link))
    else:
        assert_refused(result, 2)
        assert os.readlink(str(link)) == str(victim)


@pytest.mark.parametrize("dangling", [False, True])
def test_a_log_that_is_a_link_is_refused(tmp_path, dangling):
    folder = copy_fixture("basic", tmp_path / "basic")
    outside = tmp_path / "outside.jsonl"
    if dangling:
        os.unlink(str(folder / LOG))
    else:
        os.replace(str(folder / LOG), str(outside))
    plant_link(folder / LOG, outside)
    before_outside = outside.read_bytes() if outside.exists() else None
    before = folder_digest(folder)
    result = run_notes("append", "--type", "decision", "--text", "Through a link?", folder=folder)
    assert_refused(result, 2, "link")
    assert folder_digest(folder) == before
    assert (outside.read_bytes() if outside.exists() else None) == before_outside


@pytest.mark.parametrize("dangling", [False, True])
def test_a_meta_that_is_a_link_is_refused(tmp_path, dangling):
    folder = tmp_path / "session"
    outside = tmp_path / "elsewhere" / "meta.json"
    outside.parent.mkdir()
    if dangling:
        folder.mkdir()
    else:
        copy_fixture("basic", folder)
        os.replace(str(folder / META), str(outside))
    plant_link(folder / META, outside)
    before_outside = outside.read_bytes() if outside.exists() else None
    before = folder_digest(folder)
    for args in (("init",), ("append", "--type", "mode", "--text", "Where does it go?")):
        result = run_notes(*args, folder=folder)
        assert_refused(result, 2, "link")
        assert (outside.read_bytes() if outside.exists() else None) == before_outside
        assert folder_digest(folder) == before


# --------------------------------------------------------------------------
# 8. Readers never write

READERS = [("tail",), ("summary",), ("export",), ("verify",), ("recap",)]


@pytest.mark.parametrize("reader", READERS, ids=lambda args: args[0])
@pytest.mark.parametrize("place", ["empty", "missing"])
def test_readers_on_a_folder_without_a_session_create_nothing(tmp_path, reader, place):
    folder = tmp_path / "nothing-here"
    if place == "empty":
        folder.mkdir()
    before = folder_digest(tmp_path)
    result = run_notes(*reader, folder=folder)
    message = assert_refused(result, 2, "init", "restore")
    assert "no session" in message
    assert folder_digest(tmp_path) == before
    assert folder.exists() == (place == "empty")


def test_lines_appended_after_a_reader_took_the_size_are_left_for_the_next_read(tmp_path):
    # The reader fixes the size first; a line ending with a record that lacks a
    # field, then a concurrent append, must not show up as a phantom torn tail.
    folder = tmp_path / "session"
    folder.mkdir()
    session_id = "0f3c2b1c-3c66-49ee-8557-e323c0678aaf"
    meta = {"schema_version": "shaping-memory-session-meta.v0", "session_id": session_id,
            "created_at": "2026-03-14T09:00:00Z", "log_file": str(folder / LOG)}
    (folder / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    write_log(folder, line_of(make_record(session_id, 1)) + b'{"id":"n00002","seq":2}\n')
    reader = notes._LogReader(str(folder), meta)
    with open(folder / LOG, "ab") as handle:
        handle.write(line_of(make_record(session_id, 3)))
    records = list(reader.records())
    assert [record["seq"] for record in records] == [1]
    assert [entry["kind"] for entry in reader.problems] == ["missing_field"]


# ==========================================================================
# Cut-off and junk tails, and injected write and fsync faults

# --------------------------------------------------------------------------
# Local helpers: records built independently of notes.py, in-process runs

def init_here(capsys, folder) -> str:
    code, receipt = run_here(capsys, folder, "init")
    assert code == 0, receipt
    return receipt["session_id"]


def side_files(folder) -> list:
    """Files the recovery set aside: every file of the folder that is not a known session file."""
    known = {META, LOG, "session_notes.lock"}
    return sorted(name for name in os.listdir(str(folder)) if name not in known)


def every_line_is_an_object(folder) -> None:
    assert all(isinstance(record, dict) for record in read_records(folder))


def check_readers_on_damaged_tail(capsys, folder, complete: list, export_path) -> None:
    """tail, summary, export and verify answer with the complete records, warn, and write nothing."""
    before = folder_digest(folder)

    code, tail = run_here(capsys, folder, "tail", "--limit", 1000)
    assert code == 0
    assert tail["records"] == complete and tail["count"] == len(complete)
    assert tail["warnings"]

    code, summary = run_here(capsys, folder, "summary")
    assert code == 0
    assert summary["total"] == len(complete)
    assert summary["last_note_id"] == (complete[-1]["id"] if complete else None)
    assert summary["warnings"]

    code, export = run_here(capsys, folder, "export", "--output", export_path)
    assert code == 0
    assert export["record_count"] == len(complete) and export["warnings"]
    with open(str(export_path), "rb") as handle:
        assert json.loads(handle.read().decode("utf-8"))["records"] == complete

    code, verify = run_here(capsys, folder, "verify")
    assert code == 3 and verify["ok"] is False and verify["total"] == len(complete)
    assert verify["problems"]

    # Readers report the damage; they never repair it.
    assert folder_digest(folder) == before


# --------------------------------------------------------------------------
# Cut-off last line: every offset

@pytest.mark.long  # every offset in turn: the long set
def test_every_cut_offset_of_the_last_record_is_set_aside_and_numbering_continues(tmp_path, capsys):
    # Multi-byte characters put some cuts inside a character (not UTF-8), others inside JSON.
    last_text = "Hôte décidé: 日本語 ✓ — the log stays append-only"
    probe = line_of(make_record("00000000-0000-4000-8000-000000000000", 4, "gate", last_text, effect="ñ effect"))
    record_length = len(probe) - 1  # without its newline
    assert record_length > 100

    for cut in range(1, record_length):
        folder = tmp_path / ("cut%03d" % cut)
        session_id = init_here(capsys, folder)
        complete = [make_record(session_id, seq, note_type) for seq, note_type in
                    ((1, "mode"), (2, "shape"), (3, "decision"))]
        healthy = b"".join(line_of(record) for record in complete)
        last_line = line_of(make_record(session_id, 4, "gate", last_text, effect="ñ effect"))
        assert len(last_line) - 1 == record_length
        cut_bytes = last_line[:cut]
        write_log(folder, healthy + cut_bytes)

        check_readers_on_damaged_tail(capsys, folder, complete, tmp_path / ("export%03d.json" % cut))
        code, verify = run_here(capsys, folder, "verify")
        assert [entry["kind"] for entry in verify["problems"]] == ["torn_tail"], (cut, verify)
        assert verify["problems"][0]["line"] == 4

        code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "After the crash.")
        assert code == 0, (cut, receipt)
        assert list(receipt) == ["ok", "command", "note_id", "seq", "path", "recovered"]
        assert (receipt["note_id"], receipt["seq"]) == ("n00004", 4), cut
        recovered = receipt["recovered"]
        assert recovered["kind"] == "torn_tail" and recovered["bytes"] == cut, (cut, recovered)
        side_file = recovered["side_file"]
        assert os.path.dirname(side_file) == os.path.realpath(str(folder))
        assert side_files(folder) == [os.path.basename(side_file)]
        with open(side_file, "rb") as handle:
            assert handle.read() == cut_bytes, cut  # nothing thrown away

        after = log_bytes(folder)
        assert after.startswith(healthy) and after.endswith(b"\n")
        records = read_records(folder)
        assert records[:3] == complete and len(records) == 4
        assert records[3]["seq"] == 4 and records[3]["text"] == "After the crash."
        code, verify = run_here(capsys, folder, "verify")
        assert code == 0 and verify["problems"] == [], (cut, verify)
        shutil.rmtree(str(folder))


def test_complete_last_record_without_its_newline_is_kept(tmp_path, capsys):
    folder = tmp_path / "session"
    session_id = init_here(capsys, folder)
    complete = [make_record(session_id, seq) for seq in (1, 2, 3)]
    healthy = b"".join(line_of(record) for record in complete)
    write_log(folder, healthy[:-1])

    before = folder_digest(folder)
    code, tail = run_here(capsys, folder, "tail", "--limit", 10)
    assert code == 0 and tail["records"] == complete and tail["warnings"]
    code, summary = run_here(capsys, folder, "summary")
    assert code == 0 and summary["total"] == 3 and summary["last_note_id"] == "n00003"
    code, verify = run_here(capsys, folder, "verify")
    assert code == 3 and [entry["kind"] for entry in verify["problems"]] == ["missing_newline"]
    assert folder_digest(folder) == before

    code, receipt = run_here(capsys, folder, "append", "--type", "tension", "--text", "Next one.")
    assert code == 0, receipt
    assert (receipt["note_id"], receipt["seq"]) == ("n00004", 4)
    assert receipt["recovered"] == {"kind": "missing_newline"}
    assert side_files(folder) == []
    assert log_bytes(folder).startswith(healthy)  # the record stays, its newline comes back
    assert read_records(folder)[:3] == complete
    code, verify = run_here(capsys, folder, "verify")
    assert code == 0, verify


def test_cut_off_first_and_only_record_restarts_at_seq_one(tmp_path, capsys):
    folder = tmp_path / "session"
    session_id = init_here(capsys, folder)
    cut_bytes = line_of(make_record(session_id, 1))[:40]
    write_log(folder, cut_bytes)
    check_readers_on_damaged_tail(capsys, folder, [], tmp_path / "export.json")

    code, receipt = run_here(capsys, folder, "append", "--type", "mode", "--text", "Start again.")
    assert code == 0 and receipt["seq"] == 1 and receipt["recovered"]["bytes"] == 40
    with open(receipt["recovered"]["side_file"], "rb") as handle:
        assert handle.read() == cut_bytes
    assert run_here(capsys, folder, "verify")[0] == 0


# --------------------------------------------------------------------------
# Random junk tails

def junk_cases():
    """Seeded random junk: raw bytes, bytes with newlines inside, bytes ending with a newline."""
    rng = random.Random(20260314)
    cases = []
    for index in range(36):
        junk = bytearray(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        style = index % 3
        if style >= 1:  # put newlines inside
            for _ in range(rng.randint(1, 4)):
                junk.insert(rng.randint(0, len(junk)), 0x0A)
        if style == 2:
            junk.append(0x0A)
        cases.append(bytes(junk))
    # A few junk shapes a real crash leaves: zero bytes from a pre-allocated block, blank lines.
    cases += [b"\x00" * 512, b"\n\n\n", b"\x00" * 64 + b"\n", b"   "]
    return cases


def parses_as_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except ValueError:
        return False


@pytest.mark.long  # a loop over random tails: the long set
def test_random_junk_tails_keep_their_complete_lines_and_set_aside_the_rest(tmp_path, capsys):
    for index, junk in enumerate(junk_cases()):
        # The case is only meaningful if no junk line happens to be a JSON object.
        assert not any(parses_as_object(piece) for piece in junk.split(b"\n")), index
        folder = tmp_path / ("junk%02d" % index)
        session_id = init_here(capsys, folder)
        complete = [make_record(session_id, seq, note_type) for seq, note_type in
                    ((1, "source"), (2, "artifact"), (3, "discard"), (4, "decision"))]
        healthy = b"".join(line_of(record) for record in complete)
        write_log(folder, healthy + junk)
        # Only the bytes after the last newline can be torn; complete junk lines stay.
        kept_junk, torn = junk[:junk.rfind(b"\n") + 1], junk[junk.rfind(b"\n") + 1:]
        junk_lines = kept_junk.count(b"\n")

        check_readers_on_damaged_tail(capsys, folder, complete, tmp_path / ("export%02d.json" % index))
        code, verify = run_here(capsys, folder, "verify")
        assert all(entry["line"] > 4 for entry in verify["problems"]), (index, verify)

        code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "Past the junk.")
        assert code == 0, (index, receipt)
        # Each complete junk line counts as having held a seq: none is issued twice.
        seq = 4 + junk_lines + 1
        assert (receipt["note_id"], receipt["seq"]) == ("n%05d" % seq, seq), index
        if torn:
            assert receipt["recovered"]["kind"] == "torn_tail"
            assert receipt["recovered"]["bytes"] == len(torn)
            with open(receipt["recovered"]["side_file"], "rb") as handle:
                assert handle.read() == torn, index
        else:
            assert "recovered" not in receipt and side_files(folder) == []
        assert log_bytes(folder).startswith(healthy + kept_junk)
        assert json.loads(log_bytes(folder).splitlines()[-1])["text"] == "Past the junk."
        code, verify = run_here(capsys, folder, "verify")
        assert code == (3 if junk_lines else 0), (index, verify)
        assert {entry["line"] for entry in verify["problems"]} == set(range(5, 5 + junk_lines)), (index, verify)
        shutil.rmtree(str(folder))


# --------------------------------------------------------------------------
# The same, through the real script (subprocess), on v0's torn fixture

def test_v0_torn_fixture_readers_then_recovering_append(tmp_path, python):
    folder = copy_fixture("torn", tmp_path / "torn")
    original = log_bytes(folder)
    healthy, _, cut_bytes = original.rpartition(b"\n")
    healthy += b"\n"
    complete = [json.loads(line) for line in healthy.splitlines()]
    assert len(complete) == 11 and cut_bytes
    before = folder_digest(folder)

    tail = run_notes("tail", "--limit", 50, folder=folder, python=python)
    assert tail.code == 0 and tail.receipt["records"] == complete and tail.receipt["warnings"]
    summary = run_notes("summary", folder=folder, python=python)
    assert summary.code == 0 and summary.receipt["total"] == 11 and summary.receipt["warnings"]
    export = run_notes("export", "--output", tmp_path / "out.json", folder=folder, python=python)
    assert export.code == 0 and export.receipt["record_count"] == 11 and export.receipt["warnings"]
    verify = run_notes("verify", folder=folder, python=python)
    assert verify.code == 3 and [p["kind"] for p in verify.receipt["problems"]] == ["torn_tail"]
    assert folder_digest(folder) == before

    append = run_notes("append", "--type", "decision", "--text", "Continue after v0's crash.",
                       folder=folder, python=python)
    assert_no_traceback(append)
    assert append.code == 0, append
    assert (append.receipt["note_id"], append.receipt["seq"]) == ("n00012", 12)
    assert append.receipt["recovered"]["kind"] == "torn_tail"
    assert append.receipt["recovered"]["bytes"] == len(cut_bytes)
    with open(append.receipt["recovered"]["side_file"], "rb") as handle:
        assert handle.read() == cut_bytes
    assert log_bytes(folder).startswith(healthy)
    every_line_is_an_object(folder)
    verify = run_notes("verify", folder=folder, python=python)
    assert verify.code == 0 and verify.receipt["ok"] is True, verify


def test_missing_newline_through_the_script(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    original = log_bytes(folder)
    write_log(folder, original[:-1])
    append = run_notes("append", "--type", "source", "--text", "A new source.", folder=folder)
    assert append.code == 0, append
    assert append.receipt["recovered"] == {"kind": "missing_newline"}
    assert append.receipt["seq"] == 12
    assert log_bytes(folder).startswith(original)
    assert run_notes("verify", folder=folder).code == 0


def test_junk_tail_with_newlines_through_the_script(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    original = log_bytes(folder)
    complete_junk, torn = b"\x00\x00\x00\n\xff\xfegarbage\n", b"{\"id\":\"n000"
    write_log(folder, original + complete_junk + torn)
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and verify.receipt["total"] == 11
    append = run_notes("append", "--type", "shape", "--text", "Shape holds.", folder=folder)
    assert append.code == 0, append
    # The two complete junk lines stay and held seqs 12 and 13; only the cut bytes move.
    assert append.receipt["seq"] == 14 and append.receipt["recovered"]["bytes"] == len(torn)
    with open(append.receipt["recovered"]["side_file"], "rb") as handle:
        assert handle.read() == torn
    assert log_bytes(folder).startswith(original + complete_junk)
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [p["line"] for p in verify.receipt["problems"]] == [12, 13]


# --------------------------------------------------------------------------
# Injected failures of writes and fsyncs (in-process)

def fd_target(descriptor: int) -> str:
    try:
        return os.readlink("/proc/self/fd/%d" % descriptor)
    except OSError:
        return ""


def half_write_then_fail(error_number: int):
    """A stand-in for os.write that writes half of a log write, then fails with error_number."""
    real_write = os.write

    def write(descriptor, data):
        if fd_target(descriptor).endswith(LOG):
            real_write(descriptor, bytes(data)[:len(data) // 2])
            raise OSError(error_number, os.strerror(error_number))
        return real_write(descriptor, data)

    return write


def seeded_session(capsys, folder, count: int = 3) -> list:
    """A session with count notes appended through notes.py; return the records."""
    init_here(capsys, folder)
    for number in range(1, count + 1):
        code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "Kept %d." % number)
        assert code == 0 and receipt["seq"] == number
    return read_records(folder)


def assert_failure_reported(capsys, folder, *args):
    code = notes.main(["--dir", str(folder)] + list(args))
    out, err = capsys.readouterr()
    assert code != 0
    assert "Traceback" not in out and "Traceback" not in err
    receipt = json.loads(out)
    assert receipt["ok"] is False and isinstance(receipt["error"], str) and receipt["error"]
    return receipt


def assert_log_verifies_or_recovers(capsys, folder, kept: list) -> dict:
    """After a failed append: verify is clean, or the next append recovers; numbering continues."""
    code, verify = run_here(capsys, folder, "verify")
    code_next, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "After the fault.")
    assert code_next == 0, receipt
    if code != 0:
        assert "recovered" in receipt, (verify, receipt)
    assert receipt["seq"] == len(kept) + 1
    records = read_records(folder)
    assert records[:len(kept)] == kept
    assert [record["seq"] for record in records] == list(range(1, len(kept) + 2))
    code, verify = run_here(capsys, folder, "verify")
    assert code == 0, verify
    return receipt


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file a write goes to")
def test_half_written_record_then_error_leaves_a_clean_log(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "session"
    kept = seeded_session(capsys, folder)
    before = log_bytes(folder)
    monkeypatch.setattr(os, "write", half_write_then_fail(errno.ENOSPC))
    assert_failure_reported(capsys, folder, "append", "--type", "decision", "--text", "Lost to a full disk.")
    monkeypatch.undo()
    assert log_bytes(folder).startswith(before)
    assert_log_verifies_or_recovers(capsys, folder, kept)


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file a write goes to")
def test_half_written_record_that_cannot_be_cut_back_is_recovered_next_time(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "session"
    kept = seeded_session(capsys, folder)
    before = log_bytes(folder)

    def refuse_truncate(*args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", half_write_then_fail(errno.EIO))
    monkeypatch.setattr(os, "ftruncate", refuse_truncate)
    assert_failure_reported(capsys, folder, "append", "--type", "decision", "--text", "Half of me lands.")
    monkeypatch.undo()
    partial = log_bytes(folder)[len(before):]
    assert log_bytes(folder).startswith(before) and partial  # the half line is really there
    receipt = assert_log_verifies_or_recovers(capsys, folder, kept)
    with open(receipt["recovered"]["side_file"], "rb") as handle:
        assert handle.read() == partial


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file is synced")
def test_failing_fsync_of_the_log_is_reported_and_leaves_a_clean_log(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "session"
    kept = seeded_session(capsys, folder)
    real_fsync = os.fsync

    def failing_fsync(descriptor):
        if fd_target(descriptor).endswith(LOG):
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    receipt = assert_failure_reported(capsys, folder, "append", "--type", "gate", "--text", "Not durable.")
    assert "note_id" not in receipt  # never claim a persistence that did not happen
    monkeypatch.undo()
    assert_log_verifies_or_recovers(capsys, folder, kept)


def read_records_after(data: bytes, prefix: bytes) -> list:
    return [json.loads(line) for line in data[len(prefix):].splitlines()]


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file is written")
def test_no_room_for_a_side_file_keeps_the_torn_bytes_in_place_and_appends(tmp_path, capsys, monkeypatch):
    # A disk with no room for the side file must not block every append: the torn
    # bytes stay where they are, ended by a newline (a damaged line that held seq 4).
    folder = tmp_path / "session"
    kept = seeded_session(capsys, folder)
    healthy = log_bytes(folder)
    cut_bytes = b'{"id":"n00004","ts":"2026-'
    write_log(folder, healthy + cut_bytes)
    real_write = os.write

    def failing_side_write(descriptor, data):
        if ".torn" in os.path.basename(fd_target(descriptor)):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", failing_side_write)
    code, receipt = run_here(capsys, folder, "append", "--type", "decision", "--text", "Not blocked by the disk.")
    monkeypatch.undo()
    assert code == 0 and receipt["seq"] == len(kept) + 2, receipt
    assert receipt["recovered"] == {"kind": "torn_tail_kept", "bytes": len(cut_bytes),
                                    "why": "no room for a side file"}
    assert sorted(os.listdir(str(folder))) == sorted([LOG, "session_meta.json", "session_notes.lock"])
    assert log_bytes(folder).startswith(healthy + cut_bytes + b"\n")  # the cut bytes are still in the log
    assert read_records_after(log_bytes(folder), healthy + cut_bytes + b"\n")[0]["text"] == "Not blocked by the disk."


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file is written")
@pytest.mark.parametrize("fault", ["write", "fsync"])
def test_failing_export_keeps_the_previous_export_and_leaves_no_temporary_file(tmp_path, capsys,
                                                                             monkeypatch, fault):
    folder = tmp_path / "session"
    seeded_session(capsys, folder)
    code, receipt = run_here(capsys, folder, "export")
    assert code == 0
    export_path = receipt["path"]
    with open(export_path, "rb") as handle:
        previous = handle.read()
    run_here(capsys, folder, "append", "--type", "artifact", "--text", "Newer than the export.")
    names_before = sorted(os.listdir(str(folder)))
    real_write, real_fsync = os.write, os.fsync

    def is_temporary(descriptor):
        name = os.path.basename(fd_target(descriptor))
        return name not in (META, LOG, "session_export.json") and "session_export" in name

    def failing_write(descriptor, data):
        if is_temporary(descriptor):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    def failing_fsync(descriptor):
        if is_temporary(descriptor):
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(descriptor)

    monkeypatch.setattr(os, fault, failing_write if fault == "write" else failing_fsync)
    receipt = assert_failure_reported(capsys, folder, "export")
    monkeypatch.undo()
    # A failure while writing is no refusal of --output: it is reported as unexpected (exit 1).
    assert receipt["error"].startswith("unexpected error: OSError"), receipt
    with open(export_path, "rb") as handle:
        assert handle.read() == previous
    assert sorted(os.listdir(str(folder))) == names_before
    assert run_here(capsys, folder, "verify")[0] == 0


@pytest.mark.skipif(not HAVE_PROC_FDS, reason="needs /proc/self/fd to tell which file is synced")
def test_failing_fsync_during_init_leaves_no_half_session(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "fresh"
    real_fsync = os.fsync

    def failing_fsync(descriptor):
        if "session_meta" in os.path.basename(fd_target(descriptor)):
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    assert_failure_reported(capsys, folder, "init")
    monkeypatch.undo()
    # Either no meta at all or a complete one: never a half-written meta.
    meta_path = folder / META
    if meta_path.exists():
        assert json.loads(meta_path.read_text("utf-8"))["session_id"]
    assert not [name for name in os.listdir(str(folder)) if name.endswith(".tmp")]
    code, receipt = run_here(capsys, folder, "init")
    assert code == 0
    code, receipt = run_here(capsys, folder, "append", "--type", "mode", "--text", "Fresh start.")
    assert code == 0 and receipt["seq"] == 1
    assert run_here(capsys, folder, "verify")[0] == 0


# ==========================================================================
# Concurrent writers and inits, writers killed at random moments, a lock holder that dies

def start_together(count: int, work) -> list:
    """Run work(index) in count threads released at the same moment; return their results."""
    barrier = threading.Barrier(count)
    results = [None] * count
    errors = []

    def runner(index):
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # surfaced below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=runner, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


# --------------------------------------------------------------------------
# Concurrent writers and concurrent init

@POSIX_PROCESSES
@pytest.mark.long  # a storm of writers: the long set
def test_concurrent_writers_get_unique_gapless_seqs(tmp_path, session):
    writers, appends = 8, 25

    def writer(index):
        receipts = []
        for number in range(appends):
            result = run_script("append", "--type", "decision", "--text", "writer %d note %d" % (index, number),
                                folder=session)
            assert_no_traceback(result)
            assert result.code == 0, result
            receipts.append(result.receipt)
        return receipts

    receipts = [receipt for batch in start_together(writers, writer) for receipt in batch]
    total = writers * appends
    assert len(receipts) == total
    assert not any(receipt.get("duplicate") for receipt in receipts)
    assert len({receipt["note_id"] for receipt in receipts}) == total
    assert sorted(receipt["seq"] for receipt in receipts) == list(range(1, total + 1))

    records = read_records(session)
    assert [record["seq"] for record in records] == list(range(1, total + 1))
    assert len({record["text"] for record in records}) == total
    by_id = {record["id"]: record for record in records}
    for receipt in receipts:
        assert by_id[receipt["note_id"]]["seq"] == receipt["seq"]
    verify = run_notes("verify", folder=session)
    assert verify.code == 0 and verify.receipt["total"] == total, verify


@POSIX_PROCESSES
def test_concurrent_first_appends_in_an_empty_folder_share_one_session(tmp_path):
    folder = tmp_path / "fresh"
    writers, appends = 6, 4

    def writer(index):
        return [run_script("append", "--type", "source", "--text", "w%d n%d" % (index, number), folder=folder)
                for number in range(appends)]

    results = [result for batch in start_together(writers, writer) for result in batch]
    assert all(result.code == 0 for result in results), [r for r in results if r.code]
    meta = json.loads((folder / META).read_text("utf-8"))
    records = read_records(folder)
    assert [record["seq"] for record in records] == list(range(1, writers * appends + 1))
    assert {record["session_id"] for record in records} == {meta["session_id"]}
    assert run_notes("verify", folder=folder).code == 0


@POSIX_PROCESSES
@pytest.mark.long  # a storm of init calls: the long set
@pytest.mark.parametrize("round_number", range(3))
def test_concurrent_init_yields_one_session_that_every_caller_reports(tmp_path, round_number):
    folder = tmp_path / "empty"
    folder.mkdir()
    callers = 8
    command = [sys.executable, "-S", str(NOTES), "--dir", str(folder), "init"]
    processes = start_together(callers, lambda index: subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [process.communicate(timeout=60) for process in processes]
    receipts = []
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, (out, err)
        assert b"Traceback" not in err
        receipts.append(json.loads(out.decode("utf-8")))
    meta = json.loads((folder / META).read_text("utf-8"))
    assert {receipt["session_id"] for receipt in receipts} == {meta["session_id"]}
    assert sorted(os.listdir(str(folder))) == sorted([META, LOG, LOCK])
    assert (folder / LOG).read_bytes() == b""


# --------------------------------------------------------------------------
# Writers killed with SIGKILL at random moments

WRITER_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import notes
folder, name = sys.argv[2], sys.argv[3]
number = 0
while True:
    number += 1
    notes.main(["--dir", folder, "append", "--type", "decision", "--text", "%s note %d" % (name, number)])
"""


def complete_receipts(data: bytes) -> list:
    """The receipts a writer printed in full before it was killed (a cut-off last one is dropped)."""
    decoder = json.JSONDecoder()
    text = data.decode("utf-8", "replace")
    receipts, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return receipts
        try:
            receipt, position = decoder.raw_decode(text, position)
        except ValueError:
            return receipts
        receipts.append(receipt)


@POSIX_PROCESSES
@pytest.mark.long  # a kill loop: the long set
def test_writers_killed_at_random_moments_lose_nothing_they_confirmed(tmp_path, session):
    rng = random.Random(3141)
    writers, rounds = 3, 5
    confirmed = {}  # note_id -> text, from every receipt printed before a kill
    for round_number in range(rounds):
        outputs, processes = [], []
        for index in range(writers):
            name = "r%dw%d" % (round_number, index)
            output = open(str(tmp_path / ("%s.out" % name)), "wb")
            outputs.append((name, output))
            processes.append(subprocess.Popen(
                [sys.executable, "-S", "-c", WRITER_SCRIPT, str(REPO), str(session), name],
                stdout=output, stderr=subprocess.DEVNULL))
        # Kill each writer at its own seeded random moment.
        start = time.monotonic()
        for delay, process in sorted(zip((rng.uniform(0.05, 0.6) for _ in processes), processes),
                                     key=lambda pair: pair[0]):
            time.sleep(max(0.0, delay - (time.monotonic() - start)))
            process.send_signal(signal.SIGKILL)
        for process in processes:
            process.wait(timeout=60)
            assert process.returncode == -signal.SIGKILL
        for name, output in outputs:
            output.close()
            with open(output.name, "rb") as handle:
                for number, receipt in enumerate(complete_receipts(handle.read()), 1):
                    assert receipt["ok"] is True, receipt
                    confirmed[receipt["note_id"]] = "%s note %d" % (name, number)

        # The next append works, and then the log verifies clean.
        after = run_notes("append", "--type", "mode", "--text", "after round %d" % round_number, folder=session)
        assert after.code == 0, after
        verify = run_notes("verify", folder=session)
        assert verify.code == 0, verify
        records = read_records(session)
        assert [record["seq"] for record in records] == list(range(1, len(records) + 1))
        texts = [record["text"] for record in records]
        assert len(texts) == len(set(texts))  # nothing written twice
        by_id = {record["id"]: record["text"] for record in records}
        for note_id, text in confirmed.items():
            assert by_id.get(note_id) == text, (note_id, text)
    assert len(confirmed) >= rounds  # the writers did get work done before dying


# --------------------------------------------------------------------------
# A lock holder that dies



@POSIX_PROCESSES
def test_append_proceeds_after_a_killed_lock_holder(session):
    holder = subprocess.Popen([sys.executable, "-S", "-c", HOLDER_SCRIPT, str(session / LOCK)],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        waiting = subprocess.Popen([sys.executable, "-S", str(NOTES), "--dir", str(session), "append",
                                    "--type", "gate", "--text", "Waits for the lock."],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # While the lock is held the writer must wait, not write around it.
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait(timeout=1.0)
        assert (session / LOG).read_bytes() == b""
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, (out, err)
    assert json.loads(out.decode("utf-8"))["seq"] == 1
    again = run_notes("append", "--type", "gate", "--text", "Right after.", folder=session, timeout=60)
    assert again.code == 0 and again.receipt["seq"] == 2
    assert run_notes("verify", folder=session).code == 0


# --------------------------------------------------------------------------
# A reader of several passes while the log is replaced

def gates_with_updates(count: int, stride: int, word: str) -> list:
    """count signals: a gate every stride notes, the note after it a decision, the one after that
    closing the gate; other notes are decisions.  word tells one log's texts from another's."""
    signals = []
    for seq in range(1, count + 1):
        if seq % stride == 1:
            signals.append(("gate", "%s question %d?" % (word, seq)))
        elif seq % stride == 3:
            signals.append(("gate", "%s answered %d." % (word, seq), {"ref": "n%05d" % (seq - 2),
                                                                      "status": "closed"}))
        else:
            signals.append(("decision", "%s decision %d." % (word, seq)))
    return signals


def exported_notes(path) -> dict:
    """An export as JSON, without the moment it was made."""
    export = json.loads(path.read_text(encoding="utf-8"))
    del export["exported_at"]
    return export


# Writes first.log and second.log (of the folder given) over the log by os.replace, in turn,
# until a file "stop" appears.
REPLACER_SCRIPT = r"""
import os, sys, time
folder, log = sys.argv[1], sys.argv[2]
data = [open(os.path.join(folder, name), "rb").read() for name in ("first.log", "second.log")]
swap, stop, which = os.path.join(folder, "swap"), os.path.join(folder, "stop"), 0
sys.stdout.write("replacing\n")
sys.stdout.flush()
while not os.path.exists(stop):
    with open(swap, "wb") as handle:
        handle.write(data[which])
    os.replace(swap, log)
    which = 1 - which
    time.sleep(0.002)  # hundreds of swaps during each read, and a core left for the reader
"""


@POSIX_PROCESSES
def test_recap_and_export_read_one_log_while_another_replaces_it(tmp_path):
    # A restore or redact replaces the log with a new file at any moment.  A
    # reader that reads the log several times must read one file throughout:
    # its answer is the answer for the log before, or for the log after.
    folder = tmp_path / "session"
    write_session(folder, gates_with_updates(4000, 4, "First"))
    first = log_bytes(folder)
    write_session(folder, gates_with_updates(3000, 7, "Second"))
    second = log_bytes(folder)
    answers = {}
    for name, data in (("first", first), ("second", second)):
        write_log(folder, data)
        answers[name] = (run_notes("recap", folder=folder).stdout,
                         run_notes("export", "--output", str(tmp_path / name), folder=folder).code)
        answers[name] += (exported_notes(tmp_path / name),)
    assert answers["first"][0] != answers["second"][0]

    # The replacer is a process of its own, as a restore or redact is: it never waits for the readers.
    stop = tmp_path / "stop"
    (tmp_path / "first.log").write_bytes(first)
    (tmp_path / "second.log").write_bytes(second)
    replacer = subprocess.Popen([sys.executable, "-S", "-c", REPLACER_SCRIPT, str(tmp_path), str(folder / LOG)],
                                stdout=subprocess.PIPE)
    try:
        assert replacer.stdout.readline() == b"replacing\n"
        results = []
        for number in range(6):
            recap = run_notes("recap", folder=folder)
            output = tmp_path / ("export-%d" % number)
            export = run_notes("export", "--output", str(output), folder=folder)
            results.append((recap, export, exported_notes(output) if export.code == 0 else None))
    finally:
        stop.touch()
        replacer.communicate(timeout=60)
    for recap, export, exported in results:
        assert_no_traceback(recap)
        assert_no_traceback(export)
        assert recap.code == 0 and recap.stdout in (answers["first"][0], answers["second"][0]), recap
        assert export.code == 0 and exported in (answers["first"][2], answers["second"][2]), export


# ==========================================================================
# The lock holds while its file is deleted; a long-lived MCP server sees other writers

WRITERS = 8
APPENDS_EACH = 30


def append_in_turn(folder, writer, count, failures):
    """One writer: count appends, each a run of the real script."""
    for number in range(count):
        result = run_script("append", "--type", "decision", "--text", "Writer %d note %d." % (writer, number),
                            folder=folder)
        if result.code != 0:
            failures.append(result)


def delete_in_a_loop(path, stop):
    """A cleaner that takes the empty lock for litter, again and again."""
    while not stop.is_set():
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        time.sleep(0.0005)


@pytest.mark.long
def test_deleting_the_lock_file_lets_no_two_writers_in(session):
    stop, failures = threading.Event(), []
    cleaner = threading.Thread(target=delete_in_a_loop, args=(session / "session_notes.lock", stop))
    writers = [threading.Thread(target=append_in_turn, args=(session, writer, APPENDS_EACH, failures))
               for writer in range(WRITERS)]
    cleaner.start()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    stop.set()
    cleaner.join()
    assert failures == []
    records = read_records(session)
    repeated = {seq: times for seq, times in Counter(record["seq"] for record in records).items() if times > 1}
    assert repeated == {}
    assert sorted(record["seq"] for record in records) == list(range(1, WRITERS * APPENDS_EACH + 1))


def half_written_line(folder, seq):
    """The line a writer of seq would append to this session."""
    from conftest import line_of, make_record

    with open(os.path.join(str(folder), "session_meta.json"), encoding="utf-8") as handle:
        session_id = json.load(handle)["session_id"]
    return line_of(make_record(session_id, seq, text="Written in two halves."))


def ask(server, request_id, tool, arguments):
    """One tools/call to a running server; its receipt."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}
    server.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    assert answer["id"] == request_id and answer["result"]["isError"] is False, answer
    return answer["result"]["structuredContent"]


@pytest.mark.parametrize("version", ["this", "1.1.0"])
def test_a_long_lived_server_sees_another_writers_line_in_flight(session, version):
    # The server appends first, taking and releasing the lock: what it holds
    # must end with the append, or its later reads take another writer's
    # half-written line for its own finished work and call it torn.
    server = subprocess.Popen([sys.executable, "-S", str(NOTES), "--dir", str(session), "mcp"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = None
    try:
        assert ask(server, 1, "append", {"type": "decision", "text": "From the server."})["seq"] == 1
        line = half_written_line(session, 2)
        writer = subprocess.Popen([sys.executable, "-S", "-c", HALF_WRITER_SCRIPT, str(session), line.hex(), version],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert writer.stdout.readline() == b"half\n"
        for request_id, tool in enumerate(("tail", "summary", "recap", "verify"), 2):
            receipt = ask(server, request_id, tool, {})
            assert receipt["ok"] is True, receipt
            assert not any("cut off" in warning for warning in receipt.get("warnings", [])), receipt
            assert "problems" not in receipt or receipt["problems"] == [], receipt
        writer.communicate(b"go\n", timeout=60)
        assert writer.returncode == 0
        assert ask(server, 9, "append", {"type": "decision", "text": "After the other writer."})["seq"] == 3
        server.stdin.close()
        assert server.wait(timeout=60) == 0
        assert b"Traceback" not in server.stderr.read()
    finally:
        for process in (writer, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=60)
    assert [record["seq"] for record in read_records(session)] == [1, 2, 3]
    assert sorted(os.listdir(session)) == ["session_meta.json", "session_notes.jsonl", "session_notes.lock"]


# ==========================================================================
# Memory and work stay bounded whatever the log or the export holds

LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")


def run_measured(*args, folder=None, timeout=300) -> tuple:
    """Run notes.py in a child of a fresh interpreter: (exit code, stdout, peak RSS of notes.py in MiB)."""
    probe = ("import json, resource, subprocess, sys\n"
             "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
             "print(json.dumps([done.returncode, done.stdout.decode('utf-8', 'replace'),"
             " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n")
    command = [sys.executable, "-S", str(NOTES)]
    if folder is not None:
        command += ["--dir", str(folder)]
    command += [str(arg) for arg in args]
    completed = subprocess.run([sys.executable, "-c", probe] + command, capture_output=True, timeout=timeout)
    code, out, peak_kib = json.loads(completed.stdout)
    return code, out, peak_kib / 1024


# --------------------------------------------------------------------------
# An id or ref far too long for any seq is damage, not a reason to refuse a readback

def test_an_id_or_ref_of_100000_digits_is_damage_that_readers_skip_without_echoing_it(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    digits = "0" * 99999 + "1"
    long_ref = make_record(session_id, 2, text="Use email instead.", ref="n" + digits)
    long_id = make_record(session_id, 3, text="A third note.")
    long_id["id"] = "n" + "0" * 99999 + "3"
    long_id.pop("checksum")
    long_id["checksum"] = make_record(session_id, 3)["checksum"]  # any: the id alone makes it damage
    write_log(folder, line_of(make_record(session_id, 1, text="Use SMS.")) + line_of(long_ref) + line_of(long_id))
    before = log_bytes(folder)

    recap = run_notes("recap", folder=folder)
    assert recap.code == 0, recap
    assert len(recap.stdout.encode("utf-8")) <= 12288
    assert [note["id"] for note in recap.receipt["decisions"]] == ["n00001"]
    assert recap.receipt["warnings"] == [
        "line 2 (n00002): the ref field is not a note id (n and five to eleven digits)",
        "line 3: the id field is not a note id (n and five to eleven digits)"]
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3
    assert [(entry["line"], entry["kind"]) for entry in verify.receipt["problems"]] == [
        (2, "bad_field"), (3, "bad_field")]
    for result in (recap, verify, run_notes("tail", folder=folder), run_notes("summary", folder=folder)):
        assert result.code in (0, 3), result
        assert not re.search("[0-9]{100}", result.stdout), result  # the long value is never echoed
    # Both lines held a seq: the next note is 4.
    result = run_notes("append", "--type", "decision", "--text", "Use post.", folder=folder)
    assert result.code == 0 and result.receipt["seq"] == 4, result
    assert log_bytes(folder).startswith(before)


# --------------------------------------------------------------------------
# A log ending in a long run of damaged lines

def test_junk_lines_that_spell_seq_with_an_escape_are_still_read_one_by_one(tmp_path):
    # A line that may hold a seq is parsed, never counted blindly: here the junk hides
    # a record whose keys are escaped, so the next note must come after its seq.
    folder = tmp_path / "session"
    session_id = new_session(folder)
    hidden = make_record(session_id, 700)
    hidden_line = json.dumps(hidden, separators=(",", ":")).replace('"seq"', '"\\u0073eq"').encode() + b"\n"
    write_log(folder, line_of(make_record(session_id, 1)) + b"{}\n" * 300 + hidden_line + b"{}\n" * 300)
    result = run_notes("append", "--type", "decision", "--text", "After the hidden one.", folder=folder)
    assert result.code == 0 and result.receipt["seq"] == 1001, result


# --------------------------------------------------------------------------
# A torn tail too long to be a note is never copied: appends cannot be blocked by it

def test_a_torn_tail_over_1_mib_is_ended_in_place_and_append_goes_on(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = line_of(make_record(session_id, 1)) + line_of(make_record(session_id, 2))
    junk = b"x" * ((1 << 20) + 1)
    write_log(folder, healthy + junk)

    result = run_notes("append", "--type", "decision", "--text", "After the junk tail.", folder=folder)
    assert result.code == 0, result
    assert result.receipt["seq"] == 4  # the junk, now a damaged line, held seq 3
    assert result.receipt["recovered"] == {"kind": "torn_tail_kept", "bytes": len(junk),
                                           "why": "longer than any record, so not a note cut off"}
    assert sorted(os.listdir(str(folder))) == ["session_meta.json", "session_notes.jsonl", "session_notes.lock"]
    data = log_bytes(folder)
    assert data.startswith(healthy + junk + b"\n")
    assert json.loads(data[len(healthy + junk + b"\n"):])["text"] == "After the junk tail."
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [(entry["line"], entry["kind"]) for entry in verify.receipt["problems"]] == [
        (3, "line_too_long")]


def test_a_torn_tail_of_a_cut_off_note_is_still_set_aside(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    healthy = line_of(make_record(session_id, 1))
    write_log(folder, healthy + line_of(make_record(session_id, 2))[:40])
    result = run_notes("append", "--type", "decision", "--text", "After the cut.", folder=folder)
    assert result.code == 0 and result.receipt["seq"] == 2, result
    assert result.receipt["recovered"]["kind"] == "torn_tail"
    assert os.path.exists(result.receipt["recovered"]["side_file"])
    assert log_bytes(folder).startswith(healthy)
    assert LOG in os.listdir(str(folder))


# --------------------------------------------------------------------------
# restore parses an export of up to 16 MiB whole, and checks it record by record

BOUNDED_SESSION_ID = "11111111-2222-4333-8444-555555555555"
BOUNDED_META = {"schema_version": "shaping-memory-session-meta.v0", "session_id": BOUNDED_SESSION_ID,
        "created_at": "2026-01-01T00:00:00Z", "log_file": "/mnt/data/shaping/session_notes.jsonl"}


def export_text(records, count=None, indent=2) -> str:
    """An export as export writes it: the head keys, then records."""
    export = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-01-01T00:00:00Z",
              "session": BOUNDED_META, "record_count": len(records) if count is None else count, "records": records}
    return json.dumps(export, indent=indent, ensure_ascii=False) + "\n"


def many_records(count: int) -> list:
    return [make_record(BOUNDED_SESSION_ID, seq, text="Note %d." % seq) for seq in range(1, count + 1)]


@LINUX_ONLY
@pytest.mark.long
def test_restore_of_40000_records_and_then_again_stays_under_128_mib(tmp_path):
    # About 12 MiB of export, below the 16 MiB restore reads: it is parsed whole.
    records = many_records(40000)
    export = tmp_path / "session_export.json"
    export.write_text(export_text(records), encoding="utf-8")
    folder = tmp_path / "restored"
    code, out, peak = run_measured("restore", export, folder=folder)
    assert code == 0 and json.loads(out)["restored"] == 40000, out
    assert peak < 128, peak
    assert log_bytes(folder) == b"".join(map(line_of, records))
    code, out, peak = run_measured("restore", export, folder=folder)  # the same export again: nothing to add
    assert code == 0 and json.loads(out)["restored"] == 0, out
    assert peak < 128, peak


@LINUX_ONLY
def test_refusing_an_export_of_200000_empty_records_stays_under_64_mib(tmp_path):
    export = tmp_path / "session_export.json"
    export.write_text(export_text([{}] * 200000), encoding="utf-8")
    folder = tmp_path / "restored"
    code, out, peak = run_measured("restore", export, folder=folder)
    receipt = json.loads(out)
    assert code == 3 and receipt["ok"] is False, receipt
    assert "(200000 problems)" in receipt["error"]
    assert len(receipt["problems"]) == 100
    assert peak < 64, peak  # parsed whole: about 50 MiB
    assert not folder.exists()


@LINUX_ONLY
def test_an_export_of_millions_of_empty_objects_is_refused_in_bounded_memory(tmp_path):
    export = tmp_path / "session_export.json"
    export.write_bytes(b'{"schema_version": "shaping-memory-export.v0", "records": [' + b",".join([b"{}"] * 5000000)
                       + b"]}")
    folder = tmp_path / "restored"
    code, out, peak = run_measured("restore", export, folder=folder)
    assert code == 3 and json.loads(out) == {"ok": False, "error": (
        "%s is not a session export: it holds more JSON objects than any session export; nothing was written, "
        "with --accept-damaged or without" % export)}
    assert peak < 128, peak  # a plain parse of it takes gigabytes
    assert not folder.exists()


@pytest.mark.parametrize("layout", ["compact", "tabs and CRLF", "records first"])
def test_restore_reads_any_json_layout_of_an_export(tmp_path, layout):
    records = many_records(5)
    export = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-01-01T00:00:00Z",
              "session": BOUNDED_META, "record_count": 5, "records": records}
    if layout == "compact":
        text = json.dumps(export, separators=(",", ":"), ensure_ascii=False)
    elif layout == "tabs and CRLF":
        text = json.dumps(export, indent="\t", ensure_ascii=False).replace("\n", "\r\n") + "\r\n\t "
    else:
        text = json.dumps(export, sort_keys=True, indent=1)  # records, then schema_version, then session
    path = tmp_path / "export.json"
    path.write_bytes(text.encode("utf-8"))
    folder = tmp_path / "restored"
    result = run_notes("restore", path, folder=folder)
    assert result.code == 0 and result.receipt["restored"] == 5, result
    assert [json.loads(line) for line in log_bytes(folder).splitlines()] == records


@pytest.mark.parametrize("damage", ["trailing data", "repeated key", "cut off", "record over 1 MiB"])
def test_restore_refuses_what_is_not_one_export_and_writes_nothing(tmp_path, damage):
    text = export_text(many_records(3))
    if damage == "trailing data":
        text += "{}\n"
    elif damage == "repeated key":
        text = text.replace('"records": [', '"records": [],\n  "records": [', 1)
    elif damage == "cut off":
        text = text[:len(text) // 2]
    else:
        text = export_text(many_records(2) + [make_record(BOUNDED_SESSION_ID, 3, text="x" * (1 << 20))])
    path = tmp_path / "export.json"
    path.write_text(text, encoding="utf-8")
    folder = tmp_path / "restored"
    for extra in ([], ["--accept-damaged"]):
        result = run_notes("restore", path, *extra, folder=folder)
        assert result.code == 3 and result.receipt["ok"] is False, result
        assert "is not a session export" in result.receipt["error"], result
        assert not folder.exists()


# ==========================================================================
# The session's files are private to their user

def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


@pytest.fixture
def umask_022():
    """Run the children under the usual umask, whatever the test runner's is."""
    earlier = os.umask(0o022)
    yield
    os.umask(earlier)


@POSIX_MODES
def test_a_new_session_is_private(tmp_path, umask_022):
    folder = tmp_path / "made" / "by" / "notes"
    assert run_notes("init", folder=folder).code == 0
    assert run_notes("append", "--type", "decision", "--text", "Private.", folder=folder).code == 0
    modes = {name: mode_of(folder / name) for name in os.listdir(folder)}
    assert modes == {"session_meta.json": 0o600, "session_notes.jsonl": 0o600, "session_notes.lock": 0o600}
    # Every folder the tool created is the user's alone; the one that was there keeps its mode.
    assert [mode_of(path) for path in (folder, folder.parent, folder.parent.parent)] == [0o700, 0o700, 0o700]
    assert mode_of(tmp_path) == stat.S_IMODE(tmp_path.stat().st_mode)


@POSIX_MODES
def test_a_folder_the_tool_did_not_create_keeps_its_mode(tmp_path, umask_022):
    folder = tmp_path / "host"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert run_notes("init", folder=folder).code == 0
    assert mode_of(folder) == 0o755
    assert mode_of(folder / "session_notes.jsonl") == 0o600


@POSIX_MODES
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


@POSIX_MODES
def test_a_side_file_is_private(tmp_path, umask_022):
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Whole.", folder=folder).code == 0
    write_log(folder, log_bytes(folder) + b'{"id":"n0000')
    assert run_notes("append", "--type", "decision", "--text", "After.", folder=folder).code == 0
    side = [name for name in os.listdir(folder) if ".torn-" in name]
    assert len(side) == 1 and mode_of(folder / side[0]) == 0o600


@POSIX_MODES
def test_a_restored_session_is_private(tmp_path, umask_022):
    folder = copy_fixture("basic", tmp_path / "v0")
    restored = tmp_path / "restored"
    assert run_notes("restore", folder / "session_export.json", folder=restored).code == 0
    assert mode_of(restored) == 0o700
    for name in ("session_meta.json", "session_notes.jsonl", "session_notes.lock"):
        assert mode_of(restored / name) == 0o600, name


@POSIX_MODES
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


@POSIX_MODES
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


@POSIX_MODES
@as_root
def test_a_folder_of_another_user_is_refused_by_every_entry_point_even_to_root(tmp_path, capsys):
    folder, export = kept_session(tmp_path)
    os.chown(folder, OTHER_USER, -1)
    refused_everywhere(capsys, folder, export, (
        "the session folder %s belongs to another user (uid %d), who could read or swap the notes; nothing was "
        "read or written. Pass --dir with a folder of your own" % (folder, OTHER_USER)))


@POSIX_MODES
@as_root
@pytest.mark.parametrize("name, kind", [("session_meta.json", "meta"), ("session_notes.jsonl", "log"),
                                        ("session_notes.lock", "lock")])
def test_a_session_file_of_another_user_is_refused(tmp_path, capsys, name, kind):
    folder, export = kept_session(tmp_path)
    os.chown(folder / name, OTHER_USER, -1)
    refused_everywhere(capsys, folder, export, (
        "the session %s %s belongs to another user (uid %d), who could read or swap the notes; nothing was "
        "read or written. Move it aside, or pass --dir with a folder of your own" % (kind, folder / name, OTHER_USER)))


@POSIX_MODES
def test_a_folder_everyone_may_write_without_the_sticky_bit_is_refused(tmp_path, capsys):
    folder, export = kept_session(tmp_path)
    os.chmod(folder, 0o777)
    refused_everywhere(capsys, folder, export, (
        "the session folder %s is writable by every user without the sticky bit, so anyone could swap its log; "
        "nothing was read or written. Run chmod 700 %s, or pass --dir with a folder of your own" % (folder, folder)))


@POSIX_MODES
@pytest.mark.parametrize("mode", [0o770, 0o775, 0o1777, 0o755])
def test_group_writable_and_sticky_shared_folders_keep_working(tmp_path, capsys, mode):
    import notes

    folder, _ = kept_session(tmp_path)
    os.chmod(folder, mode)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(folder, 0, -1)  # a sandbox folder owned by root (/mnt/data) is as good as one's own
    assert notes.Session(folder).append(type="decision", text="Still kept.")["seq"] == 2
    assert notes.Session(folder).verify()["ok"] is True


@POSIX_MODES
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


# ==========================================================================
# Attacks on the storage guarantees that once broke them

# A restore into a session that holds the export's first notes appends the rest
# in one write.  Killed during that write (a large export: the kernel stops a
# write of many megabytes part way on SIGKILL), it leaves the log ending in a
# cut-off line.  Running the same restore again was refused ("the log has
# problems"), and an append to clear the tail would add a note the export lacks,
# so the restore could never complete.  Now restore mends that tail as append
# does, then adds the missing notes.

@pytest.mark.parametrize("cut", [1, 40, -1], ids=["one byte", "mid-record", "all but the newline"])
def test_a_restore_killed_while_adding_notes_completes_when_run_again(tmp_path, cut):
    records = [make_record(SESSION_ID, seq) for seq in range(1, 7)]
    export = write_export(tmp_path / "export.json", records)
    expected = b"".join(map(line_of, records))
    folder = tmp_path / "target"
    partial = line_of(records[3])[:cut]
    write_session(folder, records[:3], tail=partial)

    result = run_notes("restore", export, folder=folder)
    assert_no_traceback(result)
    assert result.code == 0, result
    assert log_bytes(folder) == expected
    side_files = sorted(name for name in os.listdir(str(folder)) if name.startswith(LOG + ".torn-"))
    if cut == -1:  # a complete record that lacks only its newline stays and is ended
        assert result.receipt["restored"] == 2, result
        assert result.receipt["recovered"] == {"kind": "missing_newline"}
        assert side_files == []
    else:
        assert result.receipt["restored"] == 3, result
        assert result.receipt["recovered"]["kind"] == "torn_tail"
        assert result.receipt["recovered"]["bytes"] == len(partial)
        assert side_files == [os.path.basename(result.receipt["recovered"]["side_file"])]
        assert (folder / side_files[0]).read_bytes() == partial
    verify = run_notes("verify", folder=folder)
    assert verify.code == 0 and verify.receipt["total"] == 6, verify


def test_a_restore_still_refuses_a_cut_off_log_with_other_damage_and_changes_nothing(tmp_path):
    records = [make_record(SESSION_ID, seq) for seq in range(1, 7)]
    export = write_export(tmp_path / "export.json", records)
    folder = tmp_path / "target"
    damaged = dict(records[1], text="Edited by hand.")  # its checksum no longer matches
    write_session(folder, [records[0], damaged, records[2]], tail=line_of(records[3])[:40])
    before = folder_digest(folder)
    assert_refused(run_notes("restore", export, folder=folder), 2, "problems")
    assert folder_digest(folder) == before


# A folder (or a link to one) where the log should be made every reader exit 1
# with "unexpected error: IsADirectoryError"; readers answer 0, 2 or 3, never 1.

@pytest.mark.parametrize("how", ["folder", "link to a folder"])
@pytest.mark.parametrize("command", [["tail"], ["summary"], ["recap"], ["verify"], ["export"],
                                     ["export", "--format", "md"], ["restore"]],
                         ids=lambda command: " ".join(command))
def test_a_folder_where_the_log_should_be_is_refused_by_every_reader(tmp_path, how, command):
    export = write_export(tmp_path / "export.json", [make_record(SESSION_ID, seq) for seq in (1, 2)])
    folder = tmp_path / "session"
    write_session(folder)
    os.unlink(str(folder / LOG))
    if how == "folder":
        (folder / LOG).mkdir()
    else:
        (tmp_path / "elsewhere").mkdir()
        os.symlink(str(tmp_path / "elsewhere"), str(folder / LOG))
    before = folder_digest(folder)
    arguments = command + [export] if command == ["restore"] else command
    message = assert_refused(run_notes(*arguments, folder=folder), 2)
    assert LOG in message
    assert folder_digest(folder) == before


# An append with --ref looked the note up by reading the log, which raised
# IsADirectoryError, unguarded, when a folder stood where the
# log should be: exit 1, "unexpected error", where the same append without a ref
# is refused with exit 2.

def test_an_append_with_a_ref_refuses_a_folder_where_the_log_should_be(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [make_record(SESSION_ID, 1, "gate", "The gate stays open.")])
    os.unlink(str(folder / LOG))
    (folder / LOG).mkdir()
    before = folder_digest(folder)
    result = run_notes("append", "--type", "gate", "--ref", "n00001", "--status", "closed",
                       "--text", "Closed.", folder=folder)
    message = assert_refused(result, 2)
    assert LOG in message
    assert folder_digest(folder) == before


# append checked a --ref against any line holding that id, even one readers
# skip (a field with a value no note can hold).  It stored a gate update of a
# gate no reader shows; verify then reported the very note append had just
# written (ref_target, exit 3), and restore refused the export holding it.

def test_an_append_refuses_a_ref_to_a_line_readers_skip(tmp_path):
    folder = tmp_path / "session"
    skipped = make_record(SESSION_ID, 1, "gate", "The gate stays open.", provenance="bogus")
    write_session(folder, [skipped])
    before = folder_digest(folder)
    result = run_notes("append", "--type", "gate", "--ref", "n00001", "--status", "closed",
                       "--text", "Closed.", folder=folder)
    assert_refused(result, 2, "n00001", "names no note")
    assert folder_digest(folder) == before
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["bad_field"], verify


# ==========================================================================
# What an attack found and reproduced: each one, tried for real

NOT_WINDOWS = sys.platform != "win32"


# --------------------------------------------------------------------------
# A hard-linked log

@pytest.mark.skipif(not NOT_WINDOWS, reason="hard links as NOT_WINDOWS makes them")
@pytest.mark.parametrize("tail", [b"", b'{"id":"n0000'], ids=["whole", "torn"])
def test_a_hard_linked_log_is_refused_and_left_as_it_was(tmp_path, tail):
    folder = tmp_path / "session"
    assert append(folder, "decision", "Before the link.", code=None).code == 0
    export = tmp_path / "export.json"
    assert run_notes("export", "--output", export, folder=folder).code == 0
    write_log(folder, log_bytes(folder) + tail)
    other = tmp_path / "elsewhere.jsonl"
    os.link(str(folder / "session_notes.jsonl"), str(other))
    before, other_before = folder_digest(folder), other.read_bytes()
    message = assert_refused(append(folder, "decision", "Through the link?", code=None), 2, "hard links", "Nothing was written")
    assert "cp " in message and "mv " in message, message  # the way out: give the log a file of its own
    assert folder_digest(folder) == before and other.read_bytes() == other_before
    # restore, which adds an export's missing notes to the log (and mends its tail), refuses it as well.
    assert_refused(run_notes("restore", export, folder=folder), 2, "hard links")
    assert folder_digest(folder) == before and other.read_bytes() == other_before
    # The way out the refusal names works.
    log = str(folder / "session_notes.jsonl")
    shutil.copyfile(log, log + ".copy")
    os.replace(log + ".copy", log)
    assert append(folder, "decision", "After the way out.", code=None).code == 0
    assert other.read_bytes() == other_before


@pytest.mark.parametrize("arguments", [["--help"], ["--version"]])
def test_help_and_version_still_print(arguments):
    result = run_notes(*arguments)
    assert result.code == 0 and result.stderr == "", result
    assert result.stdout.startswith("usage: notes.py") or re.fullmatch(r"notes\.py \S+\n", result.stdout), result


# --------------------------------------------------------------------------
# An append-only log (chattr +a) with a cut-off last line

def chattr(flag, path) -> bool:
    try:
        return subprocess.run(["chattr", flag, str(path)], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


@pytest.fixture
def append_only_log(tmp_path):
    """A session whose log has a cut-off last line and the append-only attribute."""
    folder = tmp_path / "session"
    assert append(folder, "decision", "Whole.", code=None).code == 0
    write_log(folder, log_bytes(folder) + b'{"id":"n0000')
    log = folder / "session_notes.jsonl"
    if not chattr("+a", log):
        pytest.skip("chattr +a is refused here (not root, or a filesystem without attributes)")
    yield folder
    chattr("-a", log)


def test_an_append_only_log_leaves_no_pile_of_side_files(append_only_log):
    folder = append_only_log
    before = log_bytes(folder)
    for attempt in range(3):
        result = append(folder, "decision", "Attempt %d." % attempt, code=None)
        assert_refused(result, 2, "append-only", "Nothing was written", "chattr -a")
        assert [name for name in os.listdir(folder) if ".torn-" in name] == [], attempt
    assert log_bytes(folder) == before
    chattr("-a", folder / "session_notes.jsonl")
    result = append(folder, "decision", "Once the attribute is gone.", code=None)
    assert result.code == 0 and result.receipt["recovered"]["kind"] == "torn_tail", result
    assert len([name for name in os.listdir(folder) if ".torn-" in name]) == 1


# --------------------------------------------------------------------------
# What a killed restore or init leaves behind

def plant_partial_copy(folder, name) -> str:
    """The hidden partial copy a write of name killed before its rename leaves (a fresh one)."""
    path = os.path.join(str(folder), ".%s.%s.tmp" % (name, "a1b2c3d4e5f6"))
    with open(path, "wb") as handle:
        handle.write(b'{"id":"n00001","ts":"2026-')
    return path


@pytest.mark.parametrize("name", ["session_notes.jsonl", "session_meta.json"])
@pytest.mark.parametrize("writer", ["append", "restore"])
def test_a_later_writer_removes_a_killed_restores_partial_copy(session, tmp_path, name, writer):
    assert append(session, "decision", "Kept.", code=None).code == 0
    assert run_notes("export", "--output", tmp_path / "export.json", folder=session).code == 0
    partial = plant_partial_copy(session, name)
    export_partial = plant_partial_copy(session, "session_export.json")  # not a writer's: an export may be live
    if writer == "append":
        result = append(session, "decision", "Later.", code=None)
    else:
        result = run_notes("restore", tmp_path / "export.json", folder=session)
    assert result.code == 0, result
    assert not os.path.exists(partial)
    assert os.path.exists(export_partial)


# --------------------------------------------------------------------------
# Markdown that a renderer would obey

STYLE = "<style>body{display:none}</style> and *bold* [link](http://x) `code` &amp; ~~gone~~ a|b"


def markup_outside_code_blocks(document: str) -> list:
    """The lines a renderer reads as markdown (not an indented code block) that hold live markup.

    A recap line's own mark at its end ([n00001; ...]) is the tool's, not a note's."""
    lines = [re.sub(r" \[[^\[\]]*\]$", "", line) for line in document.splitlines() if not line.startswith("    ")]
    return [line for line in lines if re.search(r"(?<!\\)[<&*`\[\]~|]", line)]


def test_the_markdown_export_shows_an_effect_as_typed(session, tmp_path):
    assert append(session, "decision", "Styled.", "--effect", STYLE + "\nsecond line " + STYLE, code=None).code == 0
    assert append(session, "decision", "After the style.", code=None).code == 0
    output = tmp_path / "audit.md"
    assert run_notes("export", "--format", "md", "--output", output, folder=session).code == 0
    document = output.read_text(encoding="utf-8")
    assert "<style>" not in document
    effect_lines = [line for line in document.splitlines() if line.startswith("- Effect: ")]
    assert effect_lines == ["- Effect: " + re.sub(r"([\\`*_\[\]<>&~|])", r"\\\1", STYLE)]
    assert "      second line " + re.sub(r"([\\`*_\[\]<>&~|])", r"\\\1", STYLE) in document.splitlines()
    assert markup_outside_code_blocks(document) == []


@pytest.mark.parametrize("text", ["<style>hide</style> the rest", "# Not a heading", "> not a quote",
                                  "1. not a list", "+ not a list", "--- not a rule", "*not bold*"])
def test_the_markdown_recap_shows_text_and_effect_as_typed(session, text):
    assert append(session, "decision", text, "--effect", STYLE, code=None).code == 0
    result = run_notes("recap", "--format", "md", folder=session)
    assert result.code == 0, result
    assert "<style>" not in result.stdout
    line = next(line for line in result.stdout.splitlines() if "n00001" in line)
    assert re.match(r"- ([0-9]+)?\\", line), line  # the text's start opens nothing: its mark is escaped
    assert markup_outside_code_blocks(result.stdout) == [], result.stdout


def test_plain_recap_lines_are_unchanged(session):
    assert append(session, "decision", "The log is JSONL: café.", "--effect", "Append-only, v0-readable.", code=None).code == 0
    result = run_notes("recap", "--format", "md", folder=session)
    assert "- The log is JSONL: café. Effect: Append-only, v0-readable. [n00001]" in result.stdout.splitlines()


# --------------------------------------------------------------------------
# verify beside a writer holding the lock over a cut-off last line

HOLDING_WRITER = r"""
import fcntl, os, sys
folder = sys.argv[1]
folder_lock = os.open(folder, os.O_RDONLY)
fcntl.flock(folder_lock, fcntl.LOCK_EX)
lock = os.open(os.path.join(folder, "session_notes.lock"), os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
sys.stdout.write("held\n")
sys.stdout.flush()
sys.stdin.readline()
"""


@pytest.mark.skipif(not NOT_WINDOWS, reason="the writer stand-in locks with flock")
def test_verify_says_the_last_line_is_being_written(session):
    assert append(session, "decision", "Whole.", code=None).code == 0
    write_log(session, log_bytes(session) + b'{"id":"n00002","ts":"2026-')
    writer = subprocess.Popen([sys.executable, "-S", "-c", HOLDING_WRITER, str(session)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline() == b"held\n"
        verify = run_notes("verify", folder=session)
        assert verify.code == 0 and verify.receipt["ok"] is True and verify.receipt["total"] == 1, verify
        assert verify.receipt["warnings"] == [
            "the last line is being written (no newline yet, a writer holds the lock), so it was not checked; "
            "run verify again once that writer has finished"], verify
    finally:
        writer.communicate(b"go\n", timeout=60)
    verify = run_notes("verify", folder=session)  # the writer is gone: now the cut-off line is damage
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["torn_tail"], verify
    assert "warnings" not in verify.receipt


def test_verify_of_a_whole_log_beside_a_holder_has_no_warning(session):
    assert append(session, "decision", "Whole.", code=None).code == 0
    writer = subprocess.Popen([sys.executable, "-S", "-c", HOLDING_WRITER, str(session)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout.readline() == b"held\n"
        verify = run_notes("verify", folder=session)
        assert verify.code == 0 and "warnings" not in verify.receipt, verify
    finally:
        writer.communicate(b"go\n", timeout=60)


# --------------------------------------------------------------------------
# mcp with standard input closed

@pytest.mark.skipif(not NOT_WINDOWS, reason="closing a descriptor before exec is NOT_WINDOWS")
def test_mcp_with_standard_input_closed_ends_quietly(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-S", str(NOTES), "--dir", str(tmp_path / "s"), "mcp"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=lambda: os.close(0), timeout=60)
    assert completed.returncode == 0 and completed.stdout == b"" and completed.stderr == b"", completed
    assert not (tmp_path / "s").exists()
