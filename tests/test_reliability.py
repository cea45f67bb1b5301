"""Issue 3: constant-time append, damage in the middle, verify, retry-safe append,
durability (fsync and unique temporary files), and readers that never write.

Concurrency and killed writers are in test_concurrency.py; cut-off tails and injected
faults in test_recovery.py.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import shutil

import pytest

from conftest import (assert_no_traceback, assert_refused, copy_fixture, folder_digest, line_of, log_bytes, make_record, notes, read_records, run_here, run_notes, session_id_of, v0_checksum, write_log)

LOG = "session_notes.jsonl"
META = "session_meta.json"
EXPORT = "session_export.json"
OTHER_SESSION = "9b1f3c2e-4d5a-4e6f-8a7b-0c1d2e3f4a5b"
HAVE_PROC_FDS = os.path.isdir("/proc/self/fd")


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
