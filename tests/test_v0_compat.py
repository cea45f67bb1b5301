"""Golden tests against the files the public v0 tool wrote (tests/fixtures/v0/basic).

What is checked: replaying the v0 session gives the v0 receipts; the records we
write have v0's exact bytes; a v0 session folder is read and continued without
touching its earlier bytes; the export is v0's, byte for byte; what we write
stays readable by a v0-style reader; the meta file has v0's format.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
import uuid

import pytest

from conftest import V0_FIXTURES, copy_fixture, notes, read_records, run_notes, v0_checksum

BASIC = V0_FIXTURES / "basic"
V0_RECORD_KEYS = ["id", "ts", "session_id", "seq", "type", "text", "effect", "checksum"]
V0_TYPES = {"mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


# --------------------------------------------------------------------------
# Local helpers

def fixture_records() -> list:
    """The 11 records of the v0 basic log, parsed in file order."""
    return [json.loads(line) for line in (BASIC / "session_notes.jsonl").read_bytes().splitlines()]


def fixture_receipts() -> list:
    """The receipt of each command that built the basic session, in order."""
    return [json.loads(line) for line in (BASIC / "receipts.jsonl").read_text("utf-8").splitlines()]


def fixture_meta() -> dict:
    return json.loads((BASIC / "session_meta.json").read_text("utf-8"))


def append_arguments(record: dict) -> list:
    """The append command line that produces this record's signal."""
    arguments = ["append", "--type", record["type"], "--text", record["text"]]
    if "effect" in record:
        arguments += ["--effect", record["effect"]]
    return arguments


# Keys whose values differ between two runs: the checksum covers the session
# id and the time, so it differs too (it is checked against v0's algorithm instead).
VARYING = {"session_id": "<session>", "ts": "<time>", "path": "<path>", "checksum": "<checksum>"}


def normalised(value):
    """Replace what legitimately differs between two runs (ids, times, paths, checksums)."""
    if isinstance(value, dict):
        return {key: VARYING.get(key) or normalised(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalised(item) for item in value]
    return value


def ordered(value) -> str:
    """A dump that keeps key order, so equality of two dumps also checks the order."""
    return json.dumps(value, ensure_ascii=False)


def with_path(receipt: dict, path) -> dict:
    """The receipt with its path replaced, key order kept."""
    return {key: (str(path) if key == "path" else item) for key, item in receipt.items()}


def assert_printed_as_v0(result) -> None:
    """Receipts are printed as 2-space JSON, non-ASCII as is, with a trailing newline."""
    assert result.stdout == json.dumps(result.receipt, indent=2, ensure_ascii=False) + "\n", result


def assert_v0_log_bytes(log_bytes: bytes) -> list:
    """Every line is a v0 record in v0's exact serialisation; return the records."""
    assert log_bytes.endswith(b"\n"), "the last record lacks its newline"
    records = []
    for number, line in enumerate(log_bytes[:-1].split(b"\n"), 1):
        record = json.loads(line.decode("utf-8"))
        keys = list(record)
        expected_keys = [key for key in V0_RECORD_KEYS if key in record]
        assert keys == expected_keys, (number, keys)
        assert set(keys) >= set(V0_RECORD_KEYS) - {"effect"}, (number, keys)
        compact = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        assert line == compact, (number, line)
        assert record["checksum"] == v0_checksum(record), (number, record)
        assert record["seq"] == number and record["id"] == "n%05d" % number, record
        records.append(record)
    return records


# --------------------------------------------------------------------------
# (a) replaying the v0 session gives the v0 receipts and v0 bytes

def test_replay_of_basic_session_gives_v0_receipts_and_records(tmp_path):
    folder = tmp_path / "replay"
    log_path = os.path.join(os.path.realpath(str(tmp_path)), "replay", "session_notes.jsonl")
    expected_receipts = fixture_receipts()
    source_records = fixture_records()
    commands = [["init"]] + [append_arguments(record) for record in source_records] + [
        ["tail", "--limit", "3"], ["summary"]]
    assert len(commands) == len(expected_receipts) == 14

    session_ids = set()
    for arguments, expected in zip(commands, expected_receipts):
        result = run_notes(*arguments, folder=folder)
        assert result.code == 0, (arguments, result)
        assert result.stderr == "", result
        assert_printed_as_v0(result)
        assert ordered(normalised(result.receipt)) == ordered(normalised(expected)), arguments
        assert result.receipt["path"] == log_path
        if "session_id" in result.receipt:
            session_ids.add(result.receipt["session_id"])
        for record in result.receipt.get("records", []):
            session_ids.add(record["session_id"])
            assert record["checksum"] == v0_checksum(record)
            assert TIMESTAMP.match(record["ts"]), record

    # One session throughout, the one in the meta.
    meta = json.loads((folder / "session_meta.json").read_text("utf-8"))
    assert session_ids == {meta["session_id"]}

    # The records carry the fixture's signals, in v0's exact serialisation.
    log_bytes = (folder / "session_notes.jsonl").read_bytes()
    written = assert_v0_log_bytes(log_bytes)
    assert len(written) == 11
    for mine, theirs in zip(written, source_records):
        assert [mine.get(key) for key in ("id", "seq", "type", "text", "effect")] == \
               [theirs.get(key) for key in ("id", "seq", "type", "text", "effect")]
        assert mine["session_id"] == meta["session_id"]
        assert TIMESTAMP.match(mine["ts"]), mine

    # Non-ASCII is stored as UTF-8, not as \u escapes; the multi-line text stays on one line.
    assert "café, 東京, emoji 🧩".encode("utf-8") in log_bytes
    assert b"\\u" not in log_bytes
    assert b"Line one of a multi-line gate.\\nLine two, with a tab:\\there." in log_bytes
    assert log_bytes.count(b"\n") == 11


def test_replay_with_v0_clock_and_session_id_is_byte_identical(tmp_path, monkeypatch, capsys):
    """With v0's session id and times injected, every byte and every receipt is v0's (paths aside)."""
    source_records = fixture_records()
    source_meta = fixture_meta()
    clock = {"now": source_meta["created_at"]}
    monkeypatch.setattr(notes, "_utc_now", lambda: clock["now"])
    monkeypatch.setattr(notes, "_new_session_id", lambda: source_meta["session_id"])
    folder = tmp_path / "replay"
    log_path = os.path.join(os.path.realpath(str(folder)), "session_notes.jsonl")

    def run(*arguments) -> dict:
        code = notes.main(["--dir", str(folder)] + list(arguments))
        output = capsys.readouterr().out
        assert code == 0, output
        return json.loads(output)

    receipts = [run("init")]
    for record in source_records:
        clock["now"] = record["ts"]
        receipts.append(run(*append_arguments(record)))
    receipts.append(run("tail", "--limit", "3"))
    receipts.append(run("summary"))

    for mine, theirs in zip(receipts, fixture_receipts()):
        assert ordered(mine) == ordered(with_path(theirs, log_path))
    assert (folder / "session_notes.jsonl").read_bytes() == (BASIC / "session_notes.jsonl").read_bytes()
    expected_meta = dict(source_meta, log_file=log_path)
    assert (folder / "session_meta.json").read_bytes() == \
        (json.dumps(expected_meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    # The export, at v0's export time, matches v0's export but for the log_file of the meta.
    exported = json.loads((BASIC / "session_export.json").read_text("utf-8"))
    clock["now"] = exported["exported_at"]
    run("export")
    exported["session"]["log_file"] = log_path
    assert (folder / "session_export.json").read_bytes() == \
        (json.dumps(exported, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# --------------------------------------------------------------------------
# (b) a v0 session folder is read and continued

def test_v0_session_reads_as_v0(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    log_path = os.path.join(os.path.realpath(str(folder)), "session_notes.jsonl")
    receipts = fixture_receipts()
    before = {name: (folder / name).read_bytes() for name in ("session_meta.json", "session_notes.jsonl")}

    tail = run_notes("tail", "--limit", "3", folder=folder)
    assert tail.code == 0, tail
    assert_printed_as_v0(tail)
    assert ordered(tail.receipt) == ordered(with_path(receipts[12], log_path))

    summary = run_notes("summary", folder=folder)
    assert summary.code == 0, summary
    assert_printed_as_v0(summary)
    assert ordered(summary.receipt) == ordered(with_path(receipts[13], log_path))

    # init on a v0 folder reports the v0 session and changes nothing.
    init = run_notes("init", folder=folder)
    assert init.code == 0, init
    assert ordered(init.receipt) == ordered(with_path(receipts[0], log_path))
    after = {name: (folder / name).read_bytes() for name in before}
    assert after == before


def test_v0_session_is_continued_without_touching_earlier_bytes(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    log_path = os.path.join(os.path.realpath(str(folder)), "session_notes.jsonl")
    original_log = (folder / "session_notes.jsonl").read_bytes()
    original_meta = (folder / "session_meta.json").read_bytes()
    session_id = fixture_meta()["session_id"]

    result = run_notes("append", "--type", "decision", "--text", "Continued after v0: ça marche.",
                       "--effect", "Nothing before changes.", folder=folder)
    assert result.code == 0, result
    assert ordered(result.receipt) == ordered(
        {"ok": True, "command": "append", "note_id": "n00012", "seq": 12, "path": log_path})

    log_bytes = (folder / "session_notes.jsonl").read_bytes()
    assert log_bytes.startswith(original_log)
    assert (folder / "session_meta.json").read_bytes() == original_meta
    new_line = log_bytes[len(original_log):]
    assert new_line.endswith(b"\n") and new_line.count(b"\n") == 1
    record = json.loads(new_line)
    assert list(record) == V0_RECORD_KEYS
    assert record["id"] == "n00012" and record["seq"] == 12
    assert record["session_id"] == session_id
    assert record["text"] == "Continued after v0: ça marche."
    assert record["checksum"] == v0_checksum(record)
    assert TIMESTAMP.match(record["ts"])
    assert_v0_log_bytes(log_bytes)

    summary = run_notes("summary", folder=folder)
    assert summary.code == 0, summary
    assert summary.receipt["total"] == 12
    assert summary.receipt["by_type"]["decision"] == 3
    assert summary.receipt["last_note_id"] == "n00012"
    assert summary.receipt["last_type"] == "decision"


# --------------------------------------------------------------------------
# (c) the export of a v0 session is v0's export

EXPORTED_AT = re.compile(rb'\n  "exported_at": "([^"]*)",\n')


@pytest.mark.parametrize("target", ["default", "output"])
def test_export_of_v0_session_equals_v0_export(tmp_path, target):
    folder = copy_fixture("basic", tmp_path / "basic")
    if target == "default":
        arguments = ["export"]
        output = os.path.join(os.path.realpath(str(folder)), "session_export.json")
    else:
        output = str(tmp_path / "elsewhere" / "copy.json")
        arguments = ["export", "--output", output]

    result = run_notes(*arguments, folder=folder)
    assert result.code == 0, result
    # v0's keys, then keep (issue 30): which file the operator keeps, on this host.
    assert ordered(result.receipt) == ordered(
        {"ok": True, "command": "export", "record_count": 11, "path": output,
         "keep": {"file": output, "host": "local", "how": "Saved at this path on this computer."}})

    mine = open(output, "rb").read()
    theirs = (BASIC / "session_export.json").read_bytes()
    my_time = EXPORTED_AT.search(mine)
    assert my_time is not None, mine[:200]
    assert TIMESTAMP.match(my_time.group(1).decode())
    # Equal byte for byte once the export time is set aside; the meta's
    # log_file is copied as it stands in the v0 meta.
    assert EXPORTED_AT.sub(b"\n<time>\n", mine) == EXPORTED_AT.sub(b"\n<time>\n", theirs)
    assert b'"log_file": "/mnt/data/shaping/basic/session_notes.jsonl"' in mine


# --------------------------------------------------------------------------
# (d) a log we write stays readable by v0

def read_like_v0(log_bytes: bytes) -> list:
    """What a v0 reader needs: every line a JSON object with the v0 fields, of the v0 kinds."""
    records = []
    for line in log_bytes.split(b"\n")[:-1]:
        record = json.loads(line.decode("utf-8"))
        assert isinstance(record, dict), line
        for key, kind in (("id", str), ("ts", str), ("session_id", str), ("seq", int),
                          ("type", str), ("text", str), ("checksum", str)):
            assert isinstance(record.get(key), kind), (key, record)
        assert record["type"] in V0_TYPES, record
        if "effect" in record:
            assert isinstance(record["effect"], str) and record["effect"], record
        records.append(record)
    return records


def test_log_we_write_is_readable_by_v0(tmp_path):
    folder = tmp_path / "ours"
    signals = [
        ["--type", "mode", "--text", "READING_ALIGNMENT for a fresh idea."],
        ["--type", "gate", "--text", "Runtime is open.", "--effect", "Blocks the host section."],
        ["--type", "decision", "--text", "Zürich — 日本語 — 🧪 kept as is."],
        ["--type", "tension", "--text", "First line.\nSecond line\twith a tab."],
        ["--type", "artifact", "--text", 'Quotes "q", a back\\slash and U+2028 [\u2028] inside.'],
        ["--type", "discard", "--text", "  padded text  ", "--effect", "   "],
    ]
    for arguments in signals:
        result = run_notes("append", *arguments, folder=folder)
        assert result.code == 0, result

    log_bytes = (folder / "session_notes.jsonl").read_bytes()
    records = read_like_v0(log_bytes)
    assert [record["seq"] for record in records] == [1, 2, 3, 4, 5, 6]
    assert records[4]["text"] == 'Quotes "q", a back\\slash and U+2028 [\u2028] inside.'
    assert records[5]["text"] == "padded text" and "effect" not in records[5]
    assert_v0_log_bytes(log_bytes)
    assert read_records(folder) == records


def test_continued_v0_log_stays_readable_by_v0(tmp_path):
    folder = copy_fixture("basic", tmp_path / "basic")
    for text in ("One more.", "And another, ünïcödé."):
        assert run_notes("append", "--type", "source", "--text", text, folder=folder).code == 0
    records = read_like_v0((folder / "session_notes.jsonl").read_bytes())
    assert [record["seq"] for record in records] == list(range(1, 14))
    assert {record["session_id"] for record in records} == {fixture_meta()["session_id"]}


def test_ids_grow_past_five_digits_as_v0(tmp_path):
    """seq 99,999 is n99999; the next note is n100000, zero-padding stops at five digits."""
    folder = tmp_path / "big"
    assert run_notes("init", folder=folder).code == 0
    meta = json.loads((folder / "session_meta.json").read_text("utf-8"))
    last = {"id": "n99999", "ts": "2026-01-01T00:00:00Z", "session_id": meta["session_id"],
            "seq": 99999, "type": "shape", "text": "The last five-digit note."}
    last["checksum"] = v0_checksum(last)
    (folder / "session_notes.jsonl").write_bytes(
        (json.dumps(last, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8"))

    result = run_notes("append", "--type", "shape", "--text", "The first six-digit note.", folder=folder)
    assert result.code == 0, result
    assert result.receipt["note_id"] == "n100000" and result.receipt["seq"] == 100000
    new = read_records(folder)[-1]
    assert new["id"] == "n100000" and new["checksum"] == v0_checksum(new)


# --------------------------------------------------------------------------
# (e) the meta file has v0's format

def test_meta_format(tmp_path):
    folder = tmp_path / "meta"
    before = time.time()
    # Local time far from UTC: created_at must still be UTC.
    env = dict(os.environ, TZ="Pacific/Kiritimati")
    result = run_notes("init", folder=folder, env=env)
    after = time.time()
    assert result.code == 0, result

    raw = (folder / "session_meta.json").read_bytes()
    meta = json.loads(raw.decode("utf-8"))
    assert list(meta) == ["schema_version", "session_id", "created_at", "log_file"]
    assert raw == (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    assert meta["schema_version"] == "shaping-memory-session-meta.v0"

    parsed_id = uuid.UUID(meta["session_id"])
    assert parsed_id.version == 4 and str(parsed_id) == meta["session_id"]
    assert result.receipt["session_id"] == meta["session_id"]

    assert TIMESTAMP.match(meta["created_at"]), meta["created_at"]
    created = calendar.timegm(time.strptime(meta["created_at"], "%Y-%m-%dT%H:%M:%SZ"))
    # Seconds resolution: the stamp lies within the run, whatever the local zone.
    assert int(before) - 1 <= created <= after + 1, (meta["created_at"], before, after)

    log_path = os.path.join(os.path.realpath(str(folder)), "session_notes.jsonl")
    assert meta["log_file"] == log_path
    assert os.path.isabs(meta["log_file"]) and os.path.isfile(meta["log_file"])


def test_meta_log_file_is_absolute_with_relative_dir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    result = run_notes("init", folder="relative/session", cwd=work)
    assert result.code == 0, result
    meta = json.loads((work / "relative" / "session" / "session_meta.json").read_text("utf-8"))
    expected = os.path.join(os.path.realpath(str(work)), "relative", "session", "session_notes.jsonl")
    assert meta["log_file"] == expected
    assert result.receipt["path"] == expected


def test_two_sessions_get_different_uuid4s(tmp_path):
    first = run_notes("init", folder=tmp_path / "one")
    second = run_notes("init", folder=tmp_path / "two")
    assert first.code == second.code == 0
    assert first.receipt["session_id"] != second.receipt["session_id"]
    assert uuid.UUID(second.receipt["session_id"]).version == 4
