"""Several signals in one call, all or nothing (issue 19, points 4 and 6): append --batch - and the
MCP tool append_batch.

Every test runs the real script. A batch killed while it is written is built two ways: by hand (its
first lines written into the log with valid checksums, as a kill leaves them) and by a real process
that dies in the middle of its one write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import (HOLDER_SCRIPT, REPO, appended, assert_no_traceback, assert_refused, folder_digest,
                      line_of, log_bytes, make_record, mcp_answers, notes, read_records, run_notes,
                      session_id_of, v0_checksum, write_log)

FULL_ORDER = ["id", "ts", "session_id", "seq", "type", "text", "effect", "ref", "status", "provenance", "evidence",
              "about", "by", "batch", "checksum"]
V0_TYPES = {"mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"}
SECRET_LOOKING = "zq7Kx93value"  # a value no refusal may repeat


# --------------------------------------------------------------------------
# Local helpers

def lines_of(*signals) -> bytes:
    """The standard input of append --batch -: one JSON object a line."""
    return "".join(json.dumps(signal) + "\n" for signal in signals).encode("utf-8")


def batch(folder, *signals, raw=None):
    """append --batch - through the real CLI, the signals (or raw bytes) on standard input."""
    return run_notes("append", "--batch", "-", folder=folder, input=lines_of(*signals) if raw is None else raw)


def log_path(folder) -> str:
    return str(folder / "session_notes.jsonl")


DECISION = {"type": "decision", "about": "n00001", "text": "Reminders go by email.", "provenance": "op",
            "evidence": "declared"}
CLOSING = {"type": "gate", "ref": "n00001", "status": "closed", "by": "@1", "text": "Closed: email.",
           "provenance": "op", "evidence": "declared"}


@pytest.fixture
def gated(session):
    """A session whose first note, n00001, is an open gate labelled op."""
    appended(session, "gate", "The reminder channel is open.", "--provenance", "op", "--evidence", "declared")
    return session


# --------------------------------------------------------------------------
# Writing a batch

def test_batch_writes_every_line_in_order_with_its_place_and_resolved_links(gated):
    result = batch(gated, DECISION, CLOSING)
    assert_no_traceback(result)
    assert result.code == 0, result
    assert result.receipt == {"ok": True, "command": "append", "note_id": "n00003", "seq": 3,
                              "path": log_path(gated), "note_ids": ["n00002", "n00003"],
                              "types": ["decision", "gate"]}  # one Memory line a note, from the receipt
    assert list(result.receipt) == ["ok", "command", "note_id", "seq", "path", "note_ids", "types"]
    first, decision, closing = read_records(gated)
    assert decision["batch"] == "1/2" and closing["batch"] == "2/2" and "batch" not in first
    assert closing["by"] == "n00002" and closing["ref"] == "n00001" and decision["about"] == "n00001"
    assert decision["ts"] == closing["ts"]
    for record in (decision, closing):
        assert list(record) == [key for key in FULL_ORDER if key in record]
        assert record["checksum"] == v0_checksum(record)  # the batch field is covered by the checksum
        # What v0 needs of every line: an object with its fields of their kinds.
        assert isinstance(record["seq"], int) and record["type"] in V0_TYPES and isinstance(record["text"], str)
    verified = run_notes("verify", folder=gated)
    assert verified.code == 0 and verified.receipt["problems"] == [] and verified.receipt["total"] == 3, verified
    shown = run_notes("show", "n00001", folder=gated).receipt
    assert shown["state"] == "closed" and [note["id"] for note in shown["settled_by"]] == ["n00002"]


def test_plain_append_keeps_v0_receipt_and_record(session):
    receipt = appended(session, "decision", "The log stays append-only.")
    assert list(receipt) == ["ok", "command", "note_id", "seq", "path"]
    record = read_records(session)[0]
    assert list(record) == ["id", "ts", "session_id", "seq", "type", "text", "checksum"]


def test_batch_starts_a_session_and_links_lines_among_themselves(tmp_path):
    folder = tmp_path / "fresh"
    result = batch(folder,
                   {"type": "gate", "text": "Host runtime is open.", "provenance": "op"},
                   {"type": "tension", "about": "@1", "text": "  Two hosts pull apart.  "},
                   {"type": "gate", "ref": "@1", "status": "deferred", "text": "Deferred until spring.",
                    "provenance": "op"},
                   {"type": "decision", "text": "Spec names no host yet.", "provenance": "op"},
                   {"type": "decision", "ref": "@4", "text": "Spec names the web host.", "provenance": "op",
                    "effect": "   "})
    assert result.code == 0, result
    assert result.receipt["note_ids"] == ["n00001", "n00002", "n00003", "n00004", "n00005"]
    records = read_records(folder)
    assert [record["batch"] for record in records] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    assert records[1]["about"] == "n00001" and records[1]["text"] == "Two hosts pull apart."
    assert records[2]["ref"] == "n00001" and records[4]["ref"] == "n00004" and "effect" not in records[4]
    recap = run_notes("recap", folder=folder).receipt
    assert [gate["id"] for gate in recap["deferred_gates"]] == ["n00001"]
    assert [note["id"] for note in recap["decisions"]] == ["n00005"]
    assert run_notes("verify", folder=folder).code == 0


def test_batch_help_shows_the_option_and_a_quoted_here_document(tmp_path):
    result = run_notes("append", "--help", cwd=tmp_path)
    assert result.code == 0, result
    assert "--batch -" in result.stdout and "<<'EOF'" in result.stdout and '"by": "@1"' in result.stdout
    words = " ".join(result.stdout.split())  # argparse wraps the help text
    assert "up to 100 signals" in words and "at most 256 KiB" in words and '"@K"' in words


def test_help_example_runs_as_shown(tmp_path):
    """The example of append --help, run as printed (its first gate update names n00002)."""
    folder = tmp_path / "example"
    appended(folder, "decision", "An earlier decision.")
    appended(folder, "gate", "How reminders go out is open.", "--provenance", "op")
    text = run_notes("append", "--help", cwd=tmp_path).stdout
    lines = [line.strip() for line in text.splitlines()]
    start = lines.index("python3 -S notes.py append --batch - <<'EOF'")
    body = lines[start + 1:lines.index("EOF", start)]
    result = batch(folder, raw="".join(line + "\n" for line in body).encode("utf-8"))
    assert result.code == 0 and result.receipt["note_ids"] == ["n00003", "n00004"], result


# --------------------------------------------------------------------------
# Refusals: nothing written, the line named, no value echoed

REFUSED_BATCHES = [
    ("bad type", [DECISION, dict(CLOSING, type=SECRET_LOOKING)], "line 2: unknown --type; use one of"),
    ("bad status", [DECISION, dict(CLOSING, status=SECRET_LOOKING)], "line 2: unknown --status; use one of"),
    ("bad provenance", [dict(DECISION, provenance=SECRET_LOOKING)], "line 1: unknown --provenance; use one of"),
    ("unknown key", [DECISION, dict(CLOSING, **{SECRET_LOOKING: "x"})], "line 2: the line is not a JSON object of"),
    ("not a string", [dict(DECISION, text=12345)], "line 1: text is not a string"),
    ("no type", [{"text": "Alone."}], "line 1: --type is required"),
    ("no text", [DECISION, {"type": "decision"}], "line 2: --text is required"),
    ("blank text", [dict(DECISION, text="   ")], "line 1: --text is empty"),
    ("long text", [DECISION, dict(CLOSING, text="x" * 2001)], "line 2: --text is 2001 characters"),
    ("control character", [dict(DECISION, text="Bell \x07 " + SECRET_LOOKING)], "line 1: --text holds the control"),
    ("credential", [DECISION, dict(CLOSING, text="key ghp_" + "a1B2" * 9)], "line 2: --text seems to hold"),
    ("ref not an id", [DECISION, dict(CLOSING, ref=SECRET_LOOKING)], "line 2: ref is not a note id"),
    ("about not an id", [dict(DECISION, about=SECRET_LOOKING)], "line 1: about is not a note id"),
    ("by ahead", [dict(CLOSING, by="@1")], "line 1: by names no earlier line"),
    ("by itself", [DECISION, dict(CLOSING, by="@2")], "line 2: by names no earlier line"),
    ("by zero", [DECISION, dict(CLOSING, by="@0")], "line 2: by names no earlier line"),
    ("by not a number", [DECISION, dict(CLOSING, by="@" + SECRET_LOOKING)], "line 2: by names no earlier line"),
    ("ref unknown", [DECISION, dict(CLOSING, ref="n00099")], "line 2: --ref n00099 names no note"),
    ("about unknown", [dict(DECISION, about="n00099")], "line 1: --about n00099 names no note"),
    ("by a gate line", [{"type": "gate", "text": "A second gate.", "provenance": "op"}, CLOSING],
     "line 2: --by @1 is a gate"),
    ("ref to a gate from a decision", [dict(DECISION, ref="n00001", about=None)], "line 1: --ref n00001 is a gate"),
    ("gate update of a decision line", [DECISION, dict(CLOSING, ref="@1", by=None)],
     "line 2: --ref @1 is a decision, not a gate"),
    ("status on a decision", [dict(DECISION, status="open")], "line 1: --status applies only to --type gate"),
    ("by without a gate update", [DECISION, {"type": "tension", "text": "Spam.", "by": "@1"}],
     "line 2: --by names the note that settles"),
    ("supersede an op line unlabelled", [DECISION, {"type": "decision", "ref": "@1", "text": "SMS instead."}],
     "line 2: --ref @1 would supersede a note labelled --provenance op"),
    ("blank line inside", None, "line 2: the line is blank"),
    ("broken JSON", None, "line 2 is not one JSON object"),
    ("not an object", None, "line 1: the line is not a JSON object"),
    ("null", None, "line 2: the line is not a JSON object"),
]


@pytest.mark.parametrize("name, signals, words", REFUSED_BATCHES, ids=[entry[0] for entry in REFUSED_BATCHES])
def test_refused_batch_writes_nothing_names_the_line_and_echoes_no_value(gated, name, signals, words):
    raw = {"blank line inside": lines_of(DECISION) + b"\n" + lines_of(CLOSING),
           "broken JSON": lines_of(DECISION) + b'{"type": "decision", "text": "' + SECRET_LOOKING.encode() + b'\n',
           "not an object": b'["' + SECRET_LOOKING.encode() + b'"]\n',
           "null": lines_of(DECISION) + b"null\n"}.get(name)
    before = folder_digest(gated)
    if signals is not None:
        signals = [{key: value for key, value in signal.items() if value is not None} for signal in signals]
    message = assert_refused(batch(gated, *(signals or []), raw=raw), 2, words)
    assert SECRET_LOOKING not in message and "ghp_" not in message
    assert folder_digest(gated) == before


def test_a_link_to_the_id_a_line_of_the_batch_would_get_points_to_at_k(gated):
    # The model names its own batch's first line by the id it expects (n00002) instead of @1.
    before = folder_digest(gated)
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(gated).append(batch=[dict(DECISION, about=None), dict(CLOSING, by="n00002")])
    assert str(refused.value) == ("line 2: --by n00002 names no note in this session; check the id with tail or "
                                  "recap; a line of this batch is @K")
    assert folder_digest(gated) == before


def test_supersede_rule_holds_against_the_log(gated):
    appended(gated, "decision", "Reminders go by email.", "--provenance", "op")
    before = folder_digest(gated)
    assert_refused(batch(gated, {"type": "tension", "text": "Spam risk."},
                         {"type": "decision", "ref": "n00002", "text": "SMS.", "provenance": "model"}),
                   2, "line 2: --ref n00002 would supersede", "--about n00002")
    assert folder_digest(gated) == before


@pytest.mark.parametrize("arguments, stdin, words", [
    (["--batch", "-", "--type", "decision"], lines_of(DECISION), "drop --type"),
    (["--batch", "-", "--text", "x", "--by", "n00001"], lines_of(DECISION), "drop --text, --by"),
    (["--batch", "signals.jsonl"], lines_of(DECISION), "--batch takes -"),
    (["--batch", "-"], b"", "--batch got no signal"),
    (["--batch", "-"], b"\n \n", "--batch got no signal"),
    (["--batch", "-"], lines_of(*[{"type": "shape", "text": "Line %d." % n} for n in range(101)]),
     "the batch holds 101 lines; the limit is 100"),
    (["--batch", "-"], b" " * (256 * 1024 + 1), "more than 262144 bytes"),
    (["--batch", "-"], b'{"type": "shape", "text": "caf\xe9"}\n', "not valid UTF-8 (byte 30)"),
], ids=["with-type", "with-text-and-by", "not-dash", "empty", "blank", "too-many-lines", "too-many-bytes",
        "not-utf8"])
def test_batch_input_refused_whole(gated, arguments, stdin, words):
    before = folder_digest(gated)
    assert_refused(run_notes("append", *arguments, folder=gated, input=stdin), 2, words)
    assert folder_digest(gated) == before


def test_batch_of_the_limit_is_taken_and_trailing_blank_lines_are_ignored(session):
    signals = [{"type": "shape", "text": "Line %d." % n} for n in range(1, 101)]
    result = batch(session, raw=lines_of(*signals).replace(b"\n", b"\r\n") + b"\n\n")
    assert result.code == 0, result
    assert len(result.receipt["note_ids"]) == 100 and result.receipt["note_id"] == "n00100"
    assert read_records(session)[-1]["batch"] == "100/100"


# --------------------------------------------------------------------------
# Retries: a duplicate only when every line matches

def test_retried_batch_is_answered_with_the_earlier_ids(gated):
    first = batch(gated, DECISION, CLOSING).receipt
    before = log_bytes(gated)
    retried = batch(gated, DECISION, CLOSING)
    assert retried.code == 0, retried
    assert retried.receipt == dict(first, duplicate=True)
    assert log_bytes(gated) == before


def test_partly_matching_batch_is_written_anew_whole(gated):
    batch(gated, {"type": "shape", "text": "Two parts."}, {"type": "tension", "text": "They overlap.", "about": "@1"})
    result = batch(gated, {"type": "shape", "text": "Two parts."},
                   {"type": "tension", "text": "They overlap a lot.", "about": "@1"})
    assert result.code == 0 and "duplicate" not in result.receipt, result
    assert result.receipt["note_ids"] == ["n00004", "n00005"]
    assert read_records(gated)[4]["about"] == "n00004"
    # Fewer lines than the earlier batch: no match either, although each line repeats one.
    shorter = batch(gated, {"type": "shape", "text": "Two parts."})
    assert shorter.receipt["note_ids"] == ["n00006"] and "duplicate" not in shorter.receipt


def test_lines_matching_single_notes_are_no_duplicate_batch(session):
    appended(session, "shape", "Two parts.")
    appended(session, "tension", "They overlap.")
    result = batch(session, {"type": "shape", "text": "Two parts."}, {"type": "tension", "text": "They overlap."})
    assert result.receipt["note_ids"] == ["n00003", "n00004"] and "duplicate" not in result.receipt


def test_retry_after_a_later_change_is_written_anew(gated):
    batch(gated, DECISION, CLOSING)
    appended(gated, "gate", "Reopened: email bounces.", "--ref", "n00001", "--status", "open", "--provenance", "op")
    result = batch(gated, DECISION, CLOSING)
    assert result.code == 0 and "duplicate" not in result.receipt, result
    assert result.receipt["note_ids"] == ["n00005", "n00006"]
    assert read_records(gated)[-1]["by"] == "n00005"


# --------------------------------------------------------------------------
# A batch cut short: its lines are a torn tail, set aside whole

def incomplete_log(folder, torn=b"", lines=2, of=3) -> bytes:
    """Two notes, then the first lines of an of-line batch as a kill leaves them (valid checksums), then torn."""
    session_id = session_id_of(folder)
    head = line_of(make_record(session_id, 1, "gate", "Channel is open.", provenance="op")) + line_of(
        make_record(session_id, 2, "shape", "Reminders, then reports."))
    cut = b"".join(line_of(make_record(session_id, 2 + place, "decision", "Batch line %d." % place,
                                       batch="%d/%d" % (place, of))) for place in range(1, lines + 1))
    write_log(folder, head + cut + torn)
    return head


TORN_ENDS = {"whole-lines": b"", "and-a-cut-off-line": b'{"id":"n00005","ts":"2026-03-14T09:05:00Z","sess',
             "and-its-last-line-without-newline": None}


def torn_end(folder, name) -> bytes:
    if TORN_ENDS[name] is not None:
        return TORN_ENDS[name]
    return line_of(make_record(session_id_of(folder), 5, "decision", "Batch line 3.", batch="3/4"))[:-1]


@pytest.mark.parametrize("end", list(TORN_ENDS))
def test_every_reader_treats_an_incomplete_batch_at_the_end_as_a_torn_tail(session, end):
    of = 4 if TORN_ENDS[end] is None else 3
    incomplete_log(session, torn_end(session, end), of=of)
    before = folder_digest(session)

    tail = run_notes("tail", "--limit", "10", folder=session)
    assert tail.code == 0 and [record["id"] for record in tail.receipt["records"]] == ["n00001", "n00002"], tail
    assert any("incomplete batch" in warning for warning in tail.receipt["warnings"]), tail
    summary = run_notes("summary", folder=session)
    assert summary.code == 0 and summary.receipt["total"] == 2 and summary.receipt["last_note_id"] == "n00002"
    assert any("incomplete batch" in warning for warning in summary.receipt["warnings"]), summary
    recap = run_notes("recap", folder=session)
    assert recap.code == 0 and "decisions" not in json.dumps(recap.receipt).replace('"decisions": []', ""), recap
    assert any("incomplete batch" in warning for warning in recap.receipt["warnings"]), recap
    verify = run_notes("verify", folder=session)
    assert verify.code == 3 and verify.receipt["total"] == 2, verify
    assert [(entry["line"], entry["kind"]) for entry in verify.receipt["problems"]] == [(3, "incomplete_batch")]
    shown = run_notes("show", "n00003", folder=session)
    assert_refused(shown, 2, "no note n00003")
    assert run_notes("show", "n00001", folder=session).code == 0
    assert folder_digest(session) == before  # readers never mend

    export = run_notes("export", folder=session)
    assert export.code == 0 and export.receipt["record_count"] == 2, export
    exported = json.loads((session / "session_export.json").read_text("utf-8"))
    assert [record["id"] for record in exported["records"]] == ["n00001", "n00002"]


@pytest.mark.parametrize("end", list(TORN_ENDS))
def test_next_append_sets_an_incomplete_batch_aside_whole(session, end):
    of = 4 if TORN_ENDS[end] is None else 3
    head = incomplete_log(session, torn_end(session, end), of=of)
    cut = log_bytes(session)[len(head):]

    # A link to a line of the cut batch is refused: it is no note.
    assert_refused(run_notes("append", "--type", "tension", "--text", "Spam.", "--about", "n00003",
                             folder=session), 2, "--about n00003 names no note")
    result = run_notes("append", "--type", "decision", "--text", "Email it is.", folder=session)
    assert result.code == 0, result
    recovered = result.receipt["recovered"]
    assert recovered["kind"] == "incomplete_batch" and recovered["bytes"] == len(cut)
    with open(recovered["side_file"], "rb") as handle:
        assert handle.read() == cut
    assert os.path.dirname(recovered["side_file"]) == str(session)
    assert result.receipt["note_id"] == "n00003"  # the cut batch's ids were never notes
    assert log_bytes(session)[:len(head)] == head
    assert [record["id"] for record in read_records(session)] == ["n00001", "n00002", "n00003"]
    verify = run_notes("verify", folder=session)
    assert verify.code == 0 and verify.receipt["problems"] == [], verify


def test_next_batch_sets_an_incomplete_batch_aside_and_links_past_it(session):
    head = incomplete_log(session)
    result = batch(session, {"type": "decision", "text": "Email.", "provenance": "op"},
                   {"type": "gate", "ref": "n00001", "status": "closed", "by": "@1", "text": "Closed."})
    assert result.code == 0 and result.receipt["recovered"]["kind"] == "incomplete_batch", result
    assert result.receipt["note_ids"] == ["n00003", "n00004"]
    assert log_bytes(session).startswith(head) and read_records(session)[-1]["by"] == "n00003"
    assert run_notes("verify", folder=session).code == 0


def test_restore_sets_an_incomplete_batch_aside_before_adding_notes(tmp_path):
    source = tmp_path / "source"
    appended(source, "gate", "Channel is open.", "--provenance", "op")
    appended(source, "shape", "Reminders, then reports.")
    appended(source, "decision", "Email.")
    assert run_notes("export", folder=source).code == 0
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "session_meta.json").write_bytes((source / "session_meta.json").read_bytes())
    records = log_bytes(source).splitlines(keepends=True)
    session_id = session_id_of(source)
    cut = line_of(make_record(session_id, 3, "decision", "Batch line 1.", batch="1/2"))
    write_log(folder, b"".join(records[:2]) + cut)

    result = run_notes("restore", str(source / "session_export.json"), folder=folder)
    assert result.code == 0, result
    assert result.receipt["restored"] == 1 and result.receipt["recovered"]["kind"] == "incomplete_batch"
    assert log_bytes(folder) == log_bytes(source)


def test_a_complete_batch_without_its_last_newline_is_kept(session):
    session_id = session_id_of(session)
    write_log(session, line_of(make_record(session_id, 1, "shape", "One.", batch="1/2"))
              + line_of(make_record(session_id, 2, "shape", "Two.", batch="2/2"))[:-1])
    summary = run_notes("summary", folder=session)
    assert summary.receipt["total"] == 2, summary
    result = appended(session, "shape", "Three.")
    assert result["recovered"] == {"kind": "missing_newline"} and result["note_id"] == "n00003"


def test_a_batch_cut_short_before_the_end_stays_notes_and_verify_names_it(session):
    """Only an incomplete batch at the very end is a torn tail; elsewhere complete lines are never moved."""
    session_id = session_id_of(session)
    data = (line_of(make_record(session_id, 1, "shape", "One.", batch="1/3"))
            + line_of(make_record(session_id, 2, "shape", "Two.", batch="2/3"))
            + line_of(make_record(session_id, 3, "shape", "Three."))
            + line_of(make_record(session_id, 4, "shape", "Four.", batch="2/2"))
            + line_of(make_record(session_id, 5, "shape", "Five.", batch="1/1")))
    write_log(session, data)
    verify = run_notes("verify", folder=session)
    assert verify.code == 3 and verify.receipt["total"] == 5, verify
    assert [(entry["line"], entry["kind"]) for entry in verify.receipt["problems"]] == [
        (3, "batch_broken"), (4, "batch_broken")]
    assert "starts at line 1 stops after 2 of its 3 lines" in verify.receipt["problems"][0]["detail"]
    result = appended(session, "shape", "Six.")
    assert result["note_id"] == "n00006" and "recovered" not in result
    assert log_bytes(session).startswith(data)


@pytest.mark.parametrize("place", ["0/2", "3/2", "01/2", "1/", "x/2", "1/2/3", 12])
def test_verify_checks_the_batch_field_form(session, place):
    session_id = session_id_of(session)
    write_log(session, line_of(make_record(session_id, 1, "shape", "One.", batch=place))
              + line_of(make_record(session_id, 2, "shape", "Two.")))
    verify = run_notes("verify", folder=session)
    assert verify.code == 3, verify
    assert verify.receipt["problems"][0]["kind"] == "bad_field"
    assert "the batch field is not K/N" in verify.receipt["problems"][0]["detail"]


def test_an_incomplete_batch_while_a_writer_holds_the_lock_is_in_flight_not_damage(session):
    """A writer at work may be in the middle of its batch: readers leave its lines unread and say nothing."""
    incomplete_log(session, b'{"id":"n00005"')
    holder = subprocess.Popen([sys.executable, "-S", "-c", HOLDER_SCRIPT, str(session / "session_notes.lock")],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"locked\n"
        verify = run_notes("verify", folder=session)
        assert verify.code == 0 and verify.receipt["total"] == 2 and verify.receipt["problems"] == [], verify
        for reader in (("tail",), ("summary",), ("recap",)):
            result = run_notes(*reader, folder=session)
            assert result.code == 0 and "warnings" not in result.receipt, result
        assert [record["id"] for record in run_notes("tail", folder=session).receipt["records"]] == [
            "n00001", "n00002"]
    finally:
        holder.kill()
        holder.wait(timeout=60)
    verify = run_notes("verify", folder=session)  # the holder is gone: now the cut batch is real damage
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["incomplete_batch"]


# --------------------------------------------------------------------------
# A real writer killed in the middle of its one write

KILLED_WRITER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import notes

real_write = os.write

def write_half_then_die(descriptor, data):
    if b'"batch":"' in bytes(data):
        real_write(descriptor, bytes(data)[:len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return real_write(descriptor, data)

os.write = write_half_then_die
sys.exit(notes.main(sys.argv[2:]))
"""


def test_writer_killed_mid_batch_leaves_nothing_a_reader_counts(session):
    appended(session, "gate", "Channel is open.", "--provenance", "op")
    before = log_bytes(session)
    signals = [{"type": "shape", "text": "Line %d of a long batch. " % n + "x" * 1500} for n in range(1, 41)]
    killed = subprocess.run([sys.executable, "-S", "-c", KILLED_WRITER, str(REPO), "--dir", str(session),
                             "append", "--batch", "-"], input=lines_of(*signals), capture_output=True, timeout=60)
    assert killed.returncode == -9, killed
    left = log_bytes(session)
    assert left.startswith(before) and left.count(b"\n") > before.count(b"\n") + 1  # whole lines were written

    summary = run_notes("summary", folder=session)
    assert summary.code == 0 and summary.receipt["total"] == 1, summary
    assert run_notes("verify", folder=session).receipt["problems"][0]["kind"] == "incomplete_batch"
    retried = batch(session, *signals)
    assert retried.code == 0 and retried.receipt["recovered"]["kind"] == "incomplete_batch", retried
    assert retried.receipt["note_ids"][0] == "n00002" and retried.receipt["note_id"] == "n00041"
    assert "duplicate" not in retried.receipt
    assert run_notes("verify", folder=session).code == 0


# --------------------------------------------------------------------------
# Over MCP: the append_batch tool

def test_mcp_append_batch_has_append_checks_and_receipt(gated):
    listing, written, retried, refused, wrong, extra = mcp_answers(
        gated, ("append_batch", {"batch": [DECISION, CLOSING]}), ("append_batch", {"batch": [DECISION, CLOSING]}),
        ("append_batch", {"batch": [DECISION, dict(CLOSING, text="key ghp_" + "a1B2" * 9)]}),
        ("append_batch", {"batch": json.dumps([DECISION])}),
        ("append_batch", {"batch": [DECISION], "type": "decision"}))
    tool = {tool["name"]: tool for tool in listing["tools"]}["append_batch"]
    schema = tool["inputSchema"]
    assert schema["required"] == ["batch"] and schema["additionalProperties"] is False
    items = schema["properties"]["batch"]["items"]
    assert items["required"] == ["type", "text"] and set(items["properties"]) == {
        "type", "text", "effect", "ref", "status", "provenance", "evidence", "about", "by"}
    assert schema["properties"]["batch"]["maxItems"] == 100
    assert tool["annotations"]["readOnlyHint"] is False and tool["annotations"]["idempotentHint"] is True

    assert written["isError"] is False and written["structuredContent"] == {
        "ok": True, "command": "append", "note_id": "n00003", "seq": 3, "path": log_path(gated),
        "note_ids": ["n00002", "n00003"], "types": ["decision", "gate"]}
    assert retried["structuredContent"]["duplicate"] is True and retried["structuredContent"]["note_ids"] == [
        "n00002", "n00003"] and retried["structuredContent"]["types"] == ["decision", "gate"]
    assert refused["isError"] is True and refused["structuredContent"]["error"].startswith("line 2: text seems")
    assert "ghp_" not in refused["content"][0]["text"]
    assert wrong["isError"] is True and "must be a list of signal objects" in wrong["structuredContent"]["error"]
    assert extra["isError"] is True and "takes only the argument batch" in extra["structuredContent"]["error"]
    assert len(read_records(gated)) == 3


def test_restore_refuses_an_export_that_ends_in_an_incomplete_batch(tmp_path):
    source = tmp_path / "source"
    batch(source, {"type": "shape", "text": "One."}, {"type": "shape", "text": "Two."})
    assert run_notes("export", folder=source).code == 0
    export = json.loads((source / "session_export.json").read_text("utf-8"))
    export["records"] = export["records"][:1]
    export["record_count"] = 1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(export, indent=2, ensure_ascii=False) + "\n", "utf-8")
    target = tmp_path / "target"
    refused = run_notes("restore", str(edited), folder=target)
    assert_refused(refused, 3, "is damaged (1 problems)")
    assert [(entry["line"], entry["kind"]) for entry in refused.receipt["problems"]] == [(1, "batch_broken")]
    assert not target.exists()
    whole = run_notes("restore", str(source / "session_export.json"), folder=target)
    assert whole.code == 0 and whole.receipt["restored"] == 2, whole


# --------------------------------------------------------------------------
# The Python API: Session.append(batch=...)

def test_session_append_batch_gives_the_cli_receipt(tmp_path):
    cli, api = tmp_path / "cli", tmp_path / "api"
    for folder in (cli, api):
        appended(folder, "gate", "The reminder channel is open.", "--provenance", "op", "--evidence", "declared")
    expected = batch(cli, DECISION, CLOSING)
    receipt = notes.Session(api).append(batch=[DECISION, CLOSING])
    assert receipt == json.loads(json.dumps(expected.receipt).replace(str(cli), str(api)))
    assert [record["batch"] for record in read_records(api)[1:]] == ["1/2", "2/2"]
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(api).append(type="decision", batch=[DECISION])
    assert refused.value.message.startswith("--batch takes every field from its lines; drop --type")
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(api).append(batch=[DECISION, dict(CLOSING, by="@3")])
    assert refused.value.message.startswith("line 2: by names no earlier line")
    assert len(read_records(api)) == 3
