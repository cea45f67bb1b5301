"""Memory and work stay bounded whatever the log or the export holds (issue 20, point 3).

Each test runs the real script.  Peak memory is taken from the child's rusage
(Linux reports it in KiB); timing is left to bench/."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import (LOG, NOTES, line_of, log_bytes, make_record, new_session, run_notes, write_log)

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

@LINUX_ONLY
def test_a_million_junk_lines_are_counted_not_read_one_by_one(tmp_path):
    folder = tmp_path / "session"
    session_id = new_session(folder)
    junk_lines = 1000000
    write_log(folder, line_of(make_record(session_id, 1)) + b"{}\n" * junk_lines)

    code, out, peak = run_measured("tail", "--limit", "3", folder=folder)
    tail = json.loads(out)
    assert code == 0 and [record["seq"] for record in tail["records"]] == [1], tail
    assert peak < 40, peak  # not one warning per line held in memory
    assert len(tail["warnings"]) <= 21
    # Every junk line counts as having held a seq (SPEC section 5): no seq is issued twice.
    code, out, peak = run_measured("append", "--type", "decision", "--text", "After the junk.", folder=folder)
    assert code == 0 and json.loads(out)["seq"] == junk_lines + 2, out
    assert peak < 40, peak
    code, out, _ = run_measured("append", "--type", "decision", "--text", "And one more.", folder=folder)
    assert code == 0 and json.loads(out)["seq"] == junk_lines + 3, out


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
# restore streams the export: one record at a time, whatever the export's size

SESSION_ID = "11111111-2222-4333-8444-555555555555"
META = {"schema_version": "shaping-memory-session-meta.v0", "session_id": SESSION_ID,
        "created_at": "2026-01-01T00:00:00Z", "log_file": "/mnt/data/shaping/session_notes.jsonl"}


def export_text(records, count=None, indent=2) -> str:
    """An export as export writes it: the head keys, then records."""
    export = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-01-01T00:00:00Z",
              "session": META, "record_count": len(records) if count is None else count, "records": records}
    return json.dumps(export, indent=indent, ensure_ascii=False) + "\n"


def many_records(count: int) -> list:
    return [make_record(SESSION_ID, seq, text="Note %d." % seq) for seq in range(1, count + 1)]


@LINUX_ONLY
@pytest.mark.long
def test_restore_of_200000_records_and_then_again_stays_under_64_mib(tmp_path):
    records = many_records(200000)
    export = tmp_path / "session_export.json"
    export.write_text(export_text(records), encoding="utf-8")
    folder = tmp_path / "restored"
    code, out, peak = run_measured("restore", export, folder=folder)
    assert code == 0 and json.loads(out)["restored"] == 200000, out
    assert peak < 64, peak
    assert log_bytes(folder) == b"".join(map(line_of, records))
    code, out, peak = run_measured("restore", export, folder=folder)  # the same export again: nothing to add
    assert code == 0 and json.loads(out)["restored"] == 0, out
    assert peak < 64, peak


@LINUX_ONLY
def test_refusing_an_export_of_200000_empty_records_stays_under_40_mib(tmp_path):
    export = tmp_path / "session_export.json"
    export.write_text(export_text([{}] * 200000), encoding="utf-8")
    folder = tmp_path / "restored"
    code, out, peak = run_measured("restore", export, folder=folder)
    receipt = json.loads(out)
    assert code == 3 and receipt["ok"] is False, receipt
    assert "(200000 problems)" in receipt["error"]
    assert len(receipt["problems"]) == 100
    assert peak < 40, peak
    assert not folder.exists()


@pytest.mark.parametrize("layout", ["compact", "tabs and CRLF", "records first"])
def test_restore_reads_any_json_layout_of_an_export(tmp_path, layout):
    records = many_records(5)
    export = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-01-01T00:00:00Z",
              "session": META, "record_count": 5, "records": records}
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
        text = export_text(many_records(2) + [make_record(SESSION_ID, 3, text="x" * (1 << 20))])
    path = tmp_path / "export.json"
    path.write_text(text, encoding="utf-8")
    folder = tmp_path / "restored"
    for extra in ([], ["--accept-damaged"]):
        result = run_notes("restore", path, *extra, folder=folder)
        assert result.code == 3 and result.receipt["ok"] is False, result
        assert "is not a session export" in result.receipt["error"], result
        assert not folder.exists()
