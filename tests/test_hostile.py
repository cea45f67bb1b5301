"""Issue 11: hostile content.  Readers answer whatever a line holds; one set of checks for
append, verify, the readers and restore; restore --accept-damaged; C1 and bidirectional
controls refused; a markdown export that note text cannot forge; dates before year 1000.

The credential kinds and their near-misses (point 6) are in test_guard.py.
Fake credentials are assembled from pieces so that this file holds none.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from conftest import (SESSION_ID, assert_no_traceback, assert_refused, code_point_cases, folder_digest,
                      line_of, log_bytes, make_record, notes, read_records, run_notes, write_export,
                      write_log, write_session)

META = "session_meta.json"
LOG = "session_notes.jsonl"
FAKE_AWS_KEY = "AK" + "IA" + "Z7Q4M2X9C3V8B1N5"
READERS = (("tail", "--limit", "100"), ("summary",), ("recap",), ("recap", "--format", "md"),
           ("export", "--output", "OUT.json"), ("export", "--format", "md", "--output", "OUT.md"))


# --------------------------------------------------------------------------
# Local helpers

def record(seq: int, note_type: str = "decision", **fields) -> dict:
    """A signed record of this file's session."""
    return make_record(SESSION_ID, seq, note_type, **fields)


def raw_line(number: int = 2, **raw) -> bytes:
    """Record number's line, its fields holding raw JSON text (such as 1e999, which json.dumps cannot write).

    A field given as None is left out."""
    fields = {"id": '"n%05d"' % number, "ts": '"2026-03-14T09:%02d:00Z"' % number,
              "session_id": json.dumps(SESSION_ID), "seq": str(number), "type": '"decision"',
              "text": '"Signal %d."' % number, "checksum": '"0123456789abcdef"'}
    checksum = fields.pop("checksum")
    fields.update(raw)
    fields.setdefault("checksum", checksum)
    return ("{" + ",".join('"%s":%s' % (key, value) for key, value in fields.items() if value is not None)
            + "}\n").encode("utf-8")


def run_reader(folder, tmp_path, *args):
    """Run one reader; an --output placeholder becomes a path under tmp_path."""
    args = [str(tmp_path / arg) if arg.startswith("OUT.") else arg for arg in args]
    return run_notes(*args, folder=folder)


def assert_answers(result, code: int = 0) -> None:
    """A reader answered: the expected exit code, never 1, never a traceback."""
    assert_no_traceback(result)
    assert result.code == code, result


def verify_problems(folder) -> list:
    result = run_notes("verify", folder=folder)
    assert_answers(result, 3)
    return [(entry["line"], entry["id"], entry["kind"]) for entry in result.receipt["problems"]]


# --------------------------------------------------------------------------
# 1. Every reader answers whatever a line holds

def test_a_number_too_big_for_a_float_is_a_problem_not_a_crash(tmp_path):
    folder = tmp_path / "session"
    good = [record(1), record(3)]
    write_session(folder, [line_of(good[0]), raw_line(2, weight="1e999"), line_of(good[1])])
    before = folder_digest(folder)
    for args in READERS:
        result = run_reader(folder, tmp_path, *args)
        assert_answers(result)
        if args[:3] != ("recap", "--format", "md"):
            assert result.receipt["warnings"], (args, result)
    assert run_notes("tail", "--limit", "10", folder=folder).receipt["records"] == good
    assert any(message.startswith("line 2:") for message in run_notes("summary", folder=folder).receipt["warnings"])
    assert [problem for problem in verify_problems(folder) if problem[0] == 2] == [(2, None, "not_json")]
    assert folder_digest(folder) == before


def test_a_gate_update_whose_ref_is_a_list_is_skipped_with_a_warning(tmp_path):
    folder = tmp_path / "session"
    gate = record(1, "gate", text="Hosting is undecided.")
    update = record(2, "gate", text="Closed.", ref=["n00001"], status="closed")
    write_session(folder, [line_of(gate), line_of(update)])
    for extra in ((), ("--format", "md")):
        result = run_notes("recap", *extra, folder=folder)
        assert_answers(result)
    recap = run_notes("recap", folder=folder).receipt
    assert [(gate["id"], gate["status"]) for gate in recap["open_gates"]] == [("n00001", "open")]
    assert not recap["closed_gates"] and recap["total"] == 1  # no gate closed (a count, or a list)
    assert any(message.startswith("line 2 (n00002):") and "ref" in message for message in recap["warnings"])
    assert verify_problems(folder) == [(2, "n00002", "bad_field")]


def test_a_numeric_effect_does_not_take_down_the_markdown_recap(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [line_of(record(1, effect=5)), line_of(record(2, text="A sound decision."))])
    result = run_notes("recap", "--format", "md", folder=folder)
    assert_answers(result)
    assert "A sound decision." in result.stdout and "n00001" not in result.stdout.split("## Warnings")[0]
    assert "line 1 (n00001)" in result.stdout
    assert verify_problems(folder) == [(1, "n00001", "bad_field")]


def test_a_gate_whose_update_has_an_object_status_stays_in_the_recap(tmp_path):
    folder = tmp_path / "session"
    gate = record(1, "gate", text="Retention period is open.")
    write_session(folder, [line_of(gate), line_of(record(2, "gate", text="?", ref="n00001", status={"a": 1}))])
    recap = run_notes("recap", folder=folder)
    assert_answers(recap)
    assert [item["id"] for item in recap.receipt["open_gates"]] == ["n00001"]
    assert recap.receipt["warnings"]


@pytest.mark.parametrize("depth", [600, 5000, 100000])
def test_deep_nesting_is_a_problem_not_a_traceback(tmp_path, depth):
    folder = tmp_path / "session"
    nested = "[" * depth + "]" * depth
    write_session(folder, [line_of(record(1)), raw_line(2, extra=nested), (nested + "\n").encode("ascii"),
                           line_of(record(3))])
    for args in READERS:
        assert_answers(run_reader(folder, tmp_path, *args))
    tail = run_notes("tail", folder=folder)
    assert [item["id"] for item in tail.receipt["records"]] == ["n00001", "n00003"]
    assert len(tail.receipt["warnings"]) >= 2
    # Parsed or not, depending on the interpreter's stack: either way a problem of its line.
    problems = verify_problems(folder)
    assert [(line, kind in ("bad_field", "not_json")) for line, _, kind in problems if line == 2] == [(2, True)]
    assert [(line, kind in ("not_object", "not_json")) for line, _, kind in problems if line == 3] == [(3, True)]


# (name, raw fields of a record line whose values are of the wrong kind or out of range)
BAD_FIELDS = {
    "seq_zero": {"seq": "0"}, "seq_negative": {"seq": "-2"}, "seq_float": {"seq": "2.0"},
    "seq_string": {"seq": '"2"'}, "seq_bool": {"seq": "true"}, "seq_huge": {"seq": "1" + "0" * 30},
    "seq_past_2_53": {"seq": str(2 ** 53)},
    "id_number": {"id": "2"}, "id_with_newline": {"id": '"n00002\\n# Verify: clean"'},
    "ts_number": {"ts": "20260314"}, "ts_word": {"ts": '"yesterday"'},
    "ts_newline": {"ts": '"2026-03-14T09:02:00Z\\n# x"'},
    "session_number": {"session_id": "7"}, "type_list": {"type": '["decision"]'},
    "text_number": {"text": "12"}, "text_null": {"text": "null"}, "text_object": {"text": '{"a": 1}'},
    "effect_number": {"effect": "5"}, "effect_list": {"effect": '["x"]'}, "effect_null": {"effect": "null"},
    "ref_list": {"ref": '["n00001"]'}, "ref_word": {"ref": '"abc"'}, "ref_number": {"ref": "1"},
    "status_object": {"type": '"gate"', "ref": '"n00001"', "status": '{"a": 1}'},
    "status_unknown": {"type": '"gate"', "ref": '"n00001"', "status": '"pending"'},
    "status_number": {"type": '"gate"', "ref": '"n00001"', "status": "3"},
    "checksum_number": {"checksum": "12345"}, "checksum_upper": {"checksum": '"0123456789ABCDEF"'},
    "checksum_short": {"checksum": '"0123456789abcde"'}, "extra_list": {"weight": "[1, 2]"},
    "extra_object": {"weight": '{"a": {"b": 1}}'},
    "missing_text": {"text": None},
}


@pytest.mark.parametrize("fields", list(BAD_FIELDS.values()), ids=list(BAD_FIELDS))
def test_a_field_of_the_wrong_kind_makes_the_line_a_problem(tmp_path, fields):
    folder = tmp_path / "session"
    write_session(folder, [line_of(record(1, "gate")), raw_line(2, **fields), line_of(record(3))])
    summary = run_notes("summary", folder=folder)
    assert_answers(summary)
    assert summary.receipt["total"] == 2
    assert any(message.startswith("line 2") for message in summary.receipt["warnings"])
    problems = [problem for problem in verify_problems(folder) if problem[0] == 2]
    kind = "missing_field" if None in fields.values() else "bad_field"
    # The id is named only when it is a note id: a hostile id is never echoed.
    assert problems == [(2, "n00002" if "id" not in fields else None, kind)]


# --------------------------------------------------------------------------
# 2. One set of checks: what append refuses, verify reports and restore refuses

# (name, text, kind verify names); the text goes through append, a log line and an export.
REFUSED_CONTENT = {
    "aws_key": ("the staging key is " + FAKE_AWS_KEY, "credential"),
    "escape": ("colour \x1b[31mred\x1b[0m", "control_character"),
    "bell": ("ring \x07 ring", "control_character"),
    "nul": ("before \x00 after", "control_character"),
    "c1_next_line": ("before \x85 after", "control_character"),
    "c1_csi": ("before \x9b31m after", "control_character"),
    "bidi_override": ("invoice \u202egnp.exe", "control_character"),
    "bidi_isolate": ("left \u2067right\u2069 done", "control_character"),
    "fifty_thousand": ("x" * 50000, "too_long"),
    "blank": ("   ", "empty_text"),
}


@pytest.mark.parametrize("text, kind", list(REFUSED_CONTENT.values()), ids=list(REFUSED_CONTENT))
def test_append_refuses_and_verify_reports_the_same_content(session, capsys, text, kind):
    before = folder_digest(session)
    code = notes.main(["--dir", str(session), "append", "--type", "decision", "--text", text])
    refusal = json.loads(capsys.readouterr().out)
    assert code == 2 and refusal["ok"] is False and folder_digest(session) == before
    session_id = json.loads((session / META).read_text("utf-8"))["session_id"]
    write_log(session, line_of(make_record(session_id, 1, text=text)))
    result = run_notes("verify", folder=session)
    assert_answers(result, 3)
    assert [(entry["line"], entry["id"], entry["kind"]) for entry in result.receipt["problems"]] == \
        [(1, "n00001", kind)]
    assert FAKE_AWS_KEY not in result.stdout
    for args in (("tail",), ("summary",)):
        reader = run_notes(*args, folder=session)
        assert_answers(reader)
        assert reader.receipt["warnings"] and FAKE_AWS_KEY not in json.dumps(reader.receipt["warnings"])


# A blank effect is dropped by append, not refused: it has no case here.
RESTORE_CASES = [(field, text, kind) for field in ("text", "effect") for text, kind in REFUSED_CONTENT.values()
                 if (field, kind) != ("effect", "empty_text")]


@pytest.mark.parametrize("field, text, kind", RESTORE_CASES,
                         ids=["%s-%s" % (field, name) for field in ("text", "effect") for name in REFUSED_CONTENT
                              if (field, REFUSED_CONTENT[name][1]) != ("effect", "empty_text")])
def test_restore_refuses_what_append_refuses(tmp_path, field, text, kind):
    records = [record(1), record(2, **{field: text}), record(3)]
    export_path = tmp_path / "export.json"
    write_export(export_path, records)
    target = tmp_path / "target"

    result = run_notes("restore", export_path, folder=target)

    assert_refused(result, 3, "--accept-damaged")
    assert [(entry["line"], entry["id"], entry["kind"]) for entry in result.receipt["problems"]] == \
        [(2, "n00002", kind)]
    assert FAKE_AWS_KEY not in result.stdout
    assert not target.exists()


def test_effect_over_its_limit_is_too_long_for_verify(session):
    session_id = json.loads((session / META).read_text("utf-8"))["session_id"]
    write_log(session, line_of(make_record(session_id, 1, effect="e" * 1001)))
    result = run_notes("verify", folder=session)
    assert_answers(result, 3)
    [entry] = result.receipt["problems"]
    assert entry["kind"] == "too_long" and "effect" in entry["detail"] and "1001" in entry["detail"]


# --------------------------------------------------------------------------
# 3. restore --accept-damaged: a way back from a damaged export

def damaged_export_records() -> list:
    """Seven records with six kinds of damage, as a hand-edited export holds them."""
    tampered = record(2)
    tampered["text"] = "Edited by hand after the checksum was taken."
    return [record(1, "gate", text="Host runtime is undecided."), tampered,
            record(3, text="the staging key is " + FAKE_AWS_KEY),
            record(4, text="colour \x1b[31mred"),
            record(6, "tension", text="A gap before this one."),
            make_record("11111111-2222-4333-8444-555555555555", 7),
            record(8, effect=5)]


def test_default_refusal_names_the_flag_and_writes_nothing(tmp_path):
    export_path = tmp_path / "export.json"
    write_export(export_path, damaged_export_records())
    target = tmp_path / "target"
    result = run_notes("restore", export_path, folder=target)
    error = assert_refused(result, 3, "--accept-damaged", "exactly as the export holds")
    assert "nothing was written" in error
    assert [(entry["line"], entry["kind"]) for entry in result.receipt["problems"]] == [
        (2, "bad_checksum"), (3, "credential"), (4, "control_character"), (5, "seq_gap"),
        (6, "foreign_session"), (7, "bad_field")]
    assert not target.exists()


def test_accept_damaged_restores_every_record_exactly_and_verify_reports_the_same(tmp_path):
    records = damaged_export_records()
    export_path = tmp_path / "export.json"
    write_export(export_path, records)
    export_before = export_path.read_bytes()
    refused = run_notes("restore", export_path, folder=tmp_path / "refused")
    target = tmp_path / "target"

    result = run_notes("restore", "--accept-damaged", export_path, folder=target)

    assert_answers(result)
    assert result.receipt["ok"] is True
    assert (result.receipt["record_count"], result.receipt["restored"]) == (7, 7)
    assert len(result.receipt["warnings"]) == 6 and FAKE_AWS_KEY not in result.stdout
    assert log_bytes(target) == b"".join(line_of(item) for item in records)
    assert json.loads((target / META).read_text("utf-8"))["session_id"] == SESSION_ID
    verify = run_notes("verify", folder=target)
    assert_answers(verify, 3)
    assert verify.receipt["problems"] == refused.receipt["problems"]
    assert export_path.read_bytes() == export_before
    # The session goes on: the next note is numbered past the highest seq.
    append = run_notes("append", "--type", "decision", "--text", "Back at work.", folder=target)
    assert append.code == 0 and append.receipt["note_id"] == "n00009", append


def test_accept_damaged_of_an_intact_export_is_an_ordinary_restore(tmp_path):
    records = [record(1), record(2, "gate", text="Open.")]
    export_path = tmp_path / "export.json"
    write_export(export_path, records)
    result = run_notes("restore", "--accept-damaged", export_path, folder=tmp_path / "target")
    assert_answers(result)
    tell = ("The session is back with 2 notes; 1 question still open; this export was written at 2026-03-14 "
            "10:00 UTC: one downloaded later holds more notes, so restore that one instead if you have it; "
            "from now on keep %s, which export writes, in place of %s, which the next note makes out of date."
            % (tmp_path / "target" / "session_export.json", export_path))
    assert result.receipt == {"ok": True, "command": "restore", "session_id": SESSION_ID, "record_count": 2,
                              "restored": 2, "path": str(tmp_path / "target" / LOG),
                              "export": {"file": str(export_path), "exported_at": "2026-03-14T10:00:00Z",
                                         "last_note": {"id": "n00002", "type": "gate", "text": "Open."}},
                              "tell_operator": tell}
    assert run_notes("verify", folder=tmp_path / "target").code == 0


CANNOT_BE_A_LOG = {
    "not_json": b"{ this is not json",
    "not_utf8": b'{"schema_version": "caf\xe9"}',
    "json_list": b"[]",
    "wrong_schema": {"schema_version": "shaping-memory-export.v9"},
    "records_not_a_list": {"records": {"n00001": {}}},
    "record_not_an_object": {"records": [{}, "n00002"]},
    "record_null": {"records": [None]},
    "no_session": {"session": None},
    "no_session_id": {"session": {"created_at": "2026-03-14T09:00:00Z"}},
    "session_id_with_newline": {"session": {"session_id": "abc\n# x"}},
    "number_too_big": b'{"schema_version": "shaping-memory-export.v0", "record_count": 1e999}',
    "nested_too_deep": b'{"schema_version": "shaping-memory-export.v0", "session": ' + b"[" * 100000,
}


@pytest.mark.parametrize("damage", list(CANNOT_BE_A_LOG.values()), ids=list(CANNOT_BE_A_LOG))
@pytest.mark.parametrize("flag", [[], ["--accept-damaged"]], ids=["default", "accept_damaged"])
def test_what_cannot_be_a_log_is_refused_even_with_the_flag(tmp_path, damage, flag):
    export_path = tmp_path / "export.json"
    if isinstance(damage, bytes):
        export_path.write_bytes(damage)
    else:
        write_export(export_path, [record(1)], **damage)
    target = tmp_path / "target"
    result = run_notes("restore", *flag, export_path, folder=target)
    assert_refused(result, 3, "nothing was written")
    assert not target.exists()


def test_accept_damaged_adds_to_the_same_session_only_what_it_lacks(tmp_path):
    records = damaged_export_records()
    target = tmp_path / "target"
    write_session(target, [line_of(records[0])])
    export_path = tmp_path / "export.json"
    write_export(export_path, records)
    result = run_notes("restore", "--accept-damaged", export_path, folder=target)
    assert_answers(result)
    assert result.receipt["restored"] == 6
    assert log_bytes(target) == b"".join(line_of(item) for item in records)


def test_restore_help_names_the_flag():
    result = run_notes("restore", "--help")
    assert result.code == 0 and "--accept-damaged" in result.stdout


# --------------------------------------------------------------------------
# 4. Control characters that fool the eye

# The set, as inclusive ranges: C1 controls, bidirectional embeddings and overrides, isolates.
C1_AND_BIDI_RANGES = [(0x80, 0x9F), (0x202A, 0x202E), (0x2066, 0x2069)]
C1_AND_BIDI = code_point_cases(C1_AND_BIDI_RANGES, seed=1)


@pytest.mark.parametrize("field", ["text", "effect"])
@pytest.mark.parametrize("code", C1_AND_BIDI, ids=lambda code: "U+%04X" % code)
def test_c1_and_bidirectional_controls_are_refused(session, capsys, field, code):
    before = folder_digest(session)
    value = "before%safter" % chr(code)
    argv = ["--dir", str(session), "append", "--type", "decision", "--text", value if field == "text" else "plain"]
    if field == "effect":
        argv += ["--effect", value]
    assert notes.main(argv) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "--" + field in error and "U+%04X" % code in error and "control character" in error
    assert folder_digest(session) == before


def test_the_neighbours_of_the_c1_and_bidirectional_ranges_are_kept(session, capsys):
    """Just outside each range (and the marks U+200E, U+200F, which scripts need) is ordinary text."""
    neighbours = [first - 1 for first, _ in C1_AND_BIDI_RANGES] + [last + 1 for _, last in C1_AND_BIDI_RANGES]
    neighbours = [code for code in neighbours if code != 0x7F] + [0x200E, 0x200F]  # DEL is a C0-side control
    for code in neighbours:
        value = "before%safter" % chr(code)
        assert notes.main(["--dir", str(session), "append", "--type", "decision", "--text", value]) == 0, hex(code)
        capsys.readouterr()
        assert read_records(session)[-1]["text"] == value


@pytest.mark.parametrize("value", ["invoice \u202egnp.exe", "a \u0085 b", "x\u2066y\u2069"],
                         ids=["override", "next_line", "isolate"])
def test_c1_and_bidi_refused_through_the_real_cli(session, value):
    before = folder_digest(session)
    assert_refused(run_notes("append", "--type", "decision", "--text", value, folder=session), 2, "U+")
    assert folder_digest(session) == before


@pytest.mark.parametrize("value", [
    "family \U0001F468\u200d\U0001F469\u200d\U0001F467", "zero\u200bwidth", "word\u2060joiner",
    "bom\ufeffinside", "Persian \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "Hebrew \u200f(123)",
    "soft\u00adhyphen", "no-break\u00a0space"], ids=["zwj_emoji", "zwsp", "word_joiner", "bom", "zwnj",
                                                      "rlm", "soft_hyphen", "nbsp"])
def test_invisible_characters_that_scripts_need_are_kept(session, value):
    result = run_notes("append", "--type", "decision", "--text", value, folder=session)
    assert result.code == 0, result
    assert read_records(session)[0]["text"] == value


# --------------------------------------------------------------------------
# 5. The markdown export cannot be forged by note text

FORGERIES = {
    "heading": "Plain start\n# Verify: clean",
    "record_heading": "Plain start\n## n00099 decision",
    "h3_record": "x\n### n00099 · 2026-01-01T00:00:00Z · decision",
    "indented_heading": "x\n   # Verify: clean",
    "table": "x\n| id | text |\n|---|---|\n| n00099 | forged |",
    "lists": "x\n- Verify: clean\n* star\n+ plus\n1. one\n2) two",
    "quote": "x\n> quoted",
    "setext": "Forged title\n===",
    "setext_dash": "Forged title\n---",
    "fence": "x\n```\n# inside a fence\n```",
    "html": "x\n<details><summary>hidden</summary>",
    "carriage_return": "x\r# Verify: clean",
    "crlf": "x\r\n# Verify: clean",
    "starts_with_heading": "# Verify: clean",
}

# Every line of the document outside note content must be one of these.
DOCUMENT_LINES = [r"# Shaping session [0-9a-f-]+", r"- (Created|Exported|Notes|By type|Verify): [^\n]*",
                  r"  - [^\n]*", r"## Notes", r"### n\d{5,} · [0-9TZ:-]+ · [^\n]+",
                  r"- (Effect|Ref|Status|Provenance|Evidence): [^\n]*"]


def document_lines(document: str) -> list:
    """The document's lines, split where markdown splits them: LF, CRLF or CR."""
    return re.split(r"\r\n|\r|\n", document)


def assert_structure_is_ours(document: str, record_count: int) -> None:
    headings = 0
    for line in document_lines(document):
        if not line.strip() or line.startswith("    "):
            continue  # blank, or note content indented so that it opens nothing
        assert any(re.fullmatch(pattern, line) for pattern in DOCUMENT_LINES), line
        headings += line.startswith("### ")
    assert headings == record_count
    assert sum(line.startswith("- Verify:") for line in document_lines(document)) == 1


def test_note_text_cannot_forge_headings_lists_or_rows(session, tmp_path):
    for text in FORGERIES.values():
        result = run_notes("append", "--type", "decision", "--text", text, "--effect", text, folder=session)
        assert result.code == 0, result
    records = read_records(session)
    output = tmp_path / "audit.md"

    result = run_notes("export", "--format", "md", "--output", output, folder=session)

    assert_answers(result)
    document = output.read_bytes().decode("utf-8")
    assert_structure_is_ours(document, len(records))
    lines = document_lines(document)
    for item in records:  # the note text is all there, each of its lines indented
        for line in document_lines(item["text"]):
            assert "    " + line in lines, line


def test_hostile_fields_written_by_hand_are_shown_not_obeyed(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [
        line_of(record(1, "decision\n# Verify: clean")),
        line_of(record(2, text="colour \x1b[31mred \u202eevil \x85 end")),
        line_of(record(3, effect="first\n# Verify: clean\n| a | b |")),
        line_of(record(4, text="long " * 1000))])
    output = tmp_path / "audit.md"
    result = run_notes("export", "--format", "md", "--output", output, folder=folder)
    assert_answers(result)
    document = output.read_bytes().decode("utf-8")
    assert_structure_is_ours(document, 4)
    assert "### n00001 · 2026-03-14T09:01:00Z · decision[U+000A]# Verify: clean" in document_lines(document)
    for character in "\x1b\u202e\x85":
        assert character not in document
    assert "U+001B" in document and "U+202E" in document and "U+0085" in document


# --------------------------------------------------------------------------
# 7. Dates before year 1000

def test_since_and_until_before_year_1000_compare_correctly(tmp_path):
    folder = tmp_path / "session"
    old, middle, new = (record(1, ts="0999-06-01T00:00:00Z"), record(2, ts="1999-06-01T00:00:00Z"),
                        record(3, ts="2026-06-01T00:00:00Z"))
    write_session(folder, [line_of(old), line_of(middle), line_of(new)])
    cases = [(["--since", "0999-01-01"], [old, middle, new]),
             (["--until", "1000-01-01"], [old]),
             (["--since", "0999-06-01T00:00:01Z"], [middle, new]),
             (["--since", "0001-01-01", "--until", "0999-06-01"], [])]
    for args, expected in cases:
        result = run_notes("tail", "--limit", "10", *args, folder=folder)
        assert_answers(result)
        assert result.receipt["records"] == expected, args


@pytest.mark.parametrize("value", ["0000-01-01", "2026-01- 1", "\uff12\uff10\uff12\uff16-01-01", "999-01-01",
                                   "2026-01-01T10:00:00z", "2026-01-01t10:00:00Z", "+2026-01-01"])
def test_dates_that_cannot_be_compared_are_refused(tmp_path, value):
    folder = tmp_path / "session"
    write_session(folder, [line_of(record(1))])
    assert_refused(run_notes("tail", "--since", value, folder=folder), 2, "--since")


# --------------------------------------------------------------------------
# Done when: a corpus of hostile lines through every reader and verify

def hostile_corpus() -> dict:
    """name -> the bytes of one hostile line (without its newline)."""
    nested = "[" * 600 + "]" * 600
    corpus = {
        "float_too_big_field": raw_line(weight="1e999"), "float_too_big_seq": raw_line(seq="-1e999"),
        "float_too_big_text": raw_line(text="1e999"), "nan": raw_line(seq="NaN"),
        "infinity": raw_line(effect="Infinity"), "int_5000_digits": raw_line(weight="9" * 5000),
        "deep_600_field": raw_line(weight=nested), "deep_600_line": nested.encode(),
        "deep_100000_line": b"[" * 100000, "deep_object": b'{"a":' * 3000 + b"1" + b"}" * 3000,
        "surrogate_text": raw_line(text='"\\ud800"'), "surrogate_key": raw_line(**{"\\udc00": "1"}),
        "surrogate_session": raw_line(session_id='"\\udfff"'),
        "escape_text": raw_line(text='"a\\u001b[31mred"'), "nul_text": raw_line(text='"a\\u0000b"'),
        "c1_text": raw_line(text='"a\\u0085b"'), "bidi_text": raw_line(text='"a\\u202eb"'),
        "credential_text": raw_line(text=json.dumps("key " + FAKE_AWS_KEY)),
        "too_long_text": raw_line(text='"' + "x" * 50000 + '"'), "empty_text": raw_line(text='""'),
        "type_newline": raw_line(type='"decision\\n# Verify: clean"'),
        "id_newline": raw_line(id='"n00002\\n# Verify: clean"'),
        "string": b'"hello"', "number": b"7", "null": b"null", "array": b"[1, 2]", "true": b"true",
        "empty_object": b"{}", "empty_line": b"", "spaces": b"   ", "not_utf8": b'{"id":"n00002","text":"caf\xe9"}',
        "bom": b"\xef\xbb\xbf" + line_of(record(2))[:-1], "cut_off": line_of(record(2))[:40],
        "duplicate_keys": raw_line()[:-2] + b',"seq":9,"text":[1]}',
        "huge_line": raw_line(text='"' + "y" * 1000000 + '"'),
    }
    for key, fields in BAD_FIELDS.items():
        corpus["field_" + key] = raw_line(**fields)
    generator = random.Random(11)
    for number in range(20):
        corpus["random_bytes_%02d" % number] = bytes(generator.getrandbits(8)
                                                     for _ in range(generator.randrange(1, 400)))
    return {name: line.rstrip(b"\n") for name, line in corpus.items()}


HOSTILE = hostile_corpus()


def run_in_process(capsys, folder, *args) -> tuple:
    code = notes.main(["--dir", str(folder)] + [str(arg) for arg in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out and "Traceback" not in err
    return code, out


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_reader_answers_a_hostile_line(tmp_path, capsys, name):
    folder = tmp_path / "session"
    write_session(folder, [line_of(record(1)), HOSTILE[name] + b"\n", line_of(record(3))])
    before = folder_digest(folder)
    for args in READERS:
        code, out = run_in_process(capsys, folder, *[str(tmp_path / arg) if arg.startswith("OUT.") else arg
                                                     for arg in args])
        assert code == 0, (args, out[:2000])
        if "md" not in args or args[0] == "export":
            receipt = json.loads(out)
            assert receipt["ok"] is True and receipt["warnings"], (args, receipt)
    code, out = run_in_process(capsys, folder, "verify")
    assert code == 3, out[:2000]
    assert json.loads(out)["problems"]
    assert folder_digest(folder) == before
    # The export of it restores, and what it holds verifies as it did.
    code, out = run_in_process(capsys, tmp_path / "restored", "restore", "--accept-damaged", tmp_path / "OUT.json")
    assert code == 0, out


def test_the_whole_corpus_through_the_real_script_on_each_python(tmp_path, python):
    folder = tmp_path / "session"
    lines = [line_of(record(1))] + [HOSTILE[name] + b"\n" for name in sorted(HOSTILE)]
    write_session(folder, lines + [line_of(record(len(lines) + 1))])
    for args in READERS + (("verify",),):
        args = [str(tmp_path / arg) if arg.startswith("OUT.") else arg for arg in args]
        result = run_notes(*args, folder=folder, python=python)
        assert_no_traceback(result)
        assert result.code == (3 if args == ["verify"] else 0), (args, result)
    append = run_notes("append", "--type", "decision", "--text", "After the corpus.", folder=folder, python=python)
    assert append.code == 0, append


# --------------------------------------------------------------------------
# Limits agree: what export writes, restore takes; a meta whose session id
# restore would refuse is refused by every writer, never an unexpected error.

@pytest.mark.parametrize("session_id", ["x" * 101, "a\tb", "a\nb", "a\x00b", "\ud800", " "])
def test_a_meta_whose_session_id_is_no_plain_id_is_refused_by_every_writer(tmp_path, capsys, session_id):
    import os

    import notes
    from conftest import META, write_export, write_session

    folder = tmp_path / "session"
    write_session(folder, [("decision", "Kept.")])
    meta = json.loads((folder / META).read_text("utf-8"))
    meta["session_id"] = session_id
    (folder / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    export = write_export(tmp_path / "carried.json", [])
    before = folder_digest(folder)
    message = ("%s holds a session_id that is not a plain id (1 to 100 printable characters); nothing was written. "
               "Restore an earlier export into a new --dir, or move the folder aside and run init"
               % os.path.join(str(folder), META))
    for words in (["init"], ["append", "--type", "decision", "--text", "Later."], ["export"],
                  ["export", "--format", "md"], ["redact", "n00001", "--reason", "A test."],
                  ["restore", str(export)]):
        code = notes.main(["--dir", str(folder)] + words)
        out, err = capsys.readouterr()
        assert (code, err, json.loads(out)) == (2, "", {"ok": False, "error": message}), words
    with pytest.raises(notes.NotesError) as refusal:
        notes.Session(folder).append(batch=[{"type": "decision", "text": "Later."}])
    assert refusal.value.message == message
    server = notes._McpServer(str(folder), None, notes._mcp_served_tools(False), None)
    result = notes._mcp_call_tool(server, {"name": "export", "arguments": {}})
    assert result["structuredContent"] == {"ok": False, "error": message}
    assert folder_digest(folder) == before
    assert notes.main(["--dir", str(folder), "verify"]) == 3
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert {"line": None, "id": None, "kind": "meta_field",
            "detail": "session_meta.json has a session_id that is not a plain id (writers refuse it)"} in problems


def test_export_refuses_what_restore_would_refuse_for_its_size(tmp_path, capsys, monkeypatch):
    import notes

    folder = tmp_path / "session"
    for number in range(20):
        notes.Session(folder).append(type="decision", text="Decision %d stays as written." % number)
    notes.Session(folder).export()
    before = folder_digest(folder)
    monkeypatch.setattr(notes, "_EXPORT_SIZE_LIMIT", 4096)  # restore and export share the one limit
    message = ("the export would be over 0 MiB, more than restore reads; nothing was written. Copy session_meta.json "
               "and session_notes.jsonl from %s together instead, or export --format md to read it" % folder)
    assert notes.main(["--dir", str(folder), "export"]) == 2
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": message}
    server = notes._McpServer(str(folder), None, notes._mcp_served_tools(False), None)
    result = notes._mcp_call_tool(server, {"name": "export", "arguments": {"output": "big.json"}})
    assert result["structuredContent"] == {"ok": False, "error": message.replace("--format", "format")}
    assert folder_digest(folder) == before
    assert notes.main(["--dir", str(folder), "export", "--format", "md"]) == 0  # restore never reads it


# --------------------------------------------------------------------------
# Gate and supersede shapes append never writes, each once made exit 1

HAND_MADE_SHAPES = {
    "a gate closed by its first note": [("gate", "Pricing model for launch tiers?", {"status": "closed"})],
    "the same, proposed": [("gate", "Pricing model for launch tiers?", {"status": "closed", "provenance": "model"})],
    "a gate update with no status": [("gate", "Pricing model for launch tiers?"),
                                     ("gate", "Pricing is for later.", {"ref": "n00001"})],
    "an unconfirmed shape replacing a discard of its own id": [
        ("discard", "Drop the launch tiers."),
        record(1, "shape", text="Tiers by seat.", ref="n00001", evidence="inferred")],
}


@pytest.mark.parametrize("shape", sorted(HAND_MADE_SHAPES))
@pytest.mark.parametrize("reader", [("recap",), ("recap", "--format", "md"), ("show", "n00001"),
                                    ("check", "plan.md"), ("export", "--format", "md", "--output", "OUT.md")])
def test_a_reader_answers_a_gate_or_supersede_that_append_refuses(tmp_path, shape, reader):
    folder = tmp_path / "s"
    write_session(folder, HAND_MADE_SHAPES[shape])
    (folder / "plan.md").write_text("# Plan\n\nPricing model for launch tiers: to be settled.\n", encoding="utf-8")
    result = run_reader(folder, tmp_path, *reader)
    assert_no_traceback(result)
    assert result.code in (0, 3), result

