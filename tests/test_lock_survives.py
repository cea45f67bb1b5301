"""The session lock holds while its file is deleted, and a long-lived MCP server sees other writers at work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from conftest import NOTES, read_records, run_notes

WRITERS = 8
APPENDS_EACH = 30


def append_in_turn(folder, writer, count, failures):
    """One writer: count appends, each a run of the real script."""
    for number in range(count):
        result = run_notes("append", "--type", "decision", "--text", "Writer %d note %d." % (writer, number),
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
