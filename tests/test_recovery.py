"""Issue 3, points 3 and 7 (failures): cut-off and junk tails, and injected write/fsync faults.

A crash can leave the last line of the log cut short or followed by junk.  Readers must
answer with the complete records and a warning, without touching the folder; the next
append moves the bytes after the last newline to a side file (byte for byte), cuts them
from the log, continues the numbering and says so.  Complete junk lines stay where they
are and count as having held a seq (issue 13).  A complete record that only lacks its
newline is kept.  Failing writes and fsyncs leave a log that verifies clean or recovers on the next
append, and the failure is reported as JSON.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil

import pytest

from conftest import (assert_no_traceback, copy_fixture, folder_digest, line_of, log_bytes,
                      make_record, notes, read_records, run_here, run_notes, write_log)

LOG = "session_notes.jsonl"
META = "session_meta.json"
HAVE_PROC_FDS = os.path.isdir("/proc/self/fd")


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

def fd_path(descriptor: int) -> str:
    try:
        return os.readlink("/proc/self/fd/%d" % descriptor)
    except OSError:
        return ""


def half_write_then_fail(error_number: int):
    """A stand-in for os.write that writes half of a log write, then fails with error_number."""
    real_write = os.write

    def write(descriptor, data):
        if fd_path(descriptor).endswith(LOG):
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
        if fd_path(descriptor).endswith(LOG):
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
        if ".torn" in os.path.basename(fd_path(descriptor)):
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
        name = os.path.basename(fd_path(descriptor))
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
        if "session_meta" in os.path.basename(fd_path(descriptor)):
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

