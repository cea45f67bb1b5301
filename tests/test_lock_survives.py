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

from conftest import HALF_WRITER_SCRIPT, NOTES, read_records, run_notes, run_script

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
