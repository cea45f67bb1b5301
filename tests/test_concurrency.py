"""Issue 3, point 1 and the crash tests: concurrent writers and inits, writers killed with
SIGKILL at random moments, and the next append after a killed lock holder.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import (HOLDER_SCRIPT, NOTES, REPO, assert_no_traceback, log_bytes, read_records, run_notes, run_script,
                      write_log, write_session)

LOG = "session_notes.jsonl"
META = "session_meta.json"
LOCK = "session_notes.lock"

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and flock are POSIX")


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


# Writes first.log and second.log (of the folder given) over the log by os.replace, in turn, until a file "stop" appears.
REPLACER_SCRIPT = r"""
import os, sys
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
"""


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
