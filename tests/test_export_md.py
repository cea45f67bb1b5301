"""export --format md (issue 5, point 4), and the JSON export staying the default and unchanged."""

from __future__ import annotations

import json
import re

import pytest

from conftest import (V0_FIXTURES, assert_no_traceback, assert_refused, copy_fixture, folder_digest, notes,
                      read_records, run_notes, write_session)

SESSION_ID = "3e9a5c1d-8b2f-4d6e-a0c7-5f1b9d2e4a68"
CREATED_AT = "2026-04-02T07:45:00Z"

# (type, text, effect, ref, status, ts): links, effects, unicode and a multi-line text.
AUDITED_SESSION = [
    ("mode", "READING_ALIGNMENT entered.", None, None, None, "2026-04-02T08:00:00Z"),
    ("gate", "Host runtime is undecided.", "Blocks the install section.", None, None, "2026-04-02T08:05:00Z"),
    ("decision", "The log is JSONL.", None, None, None, "2026-04-02T08:10:00Z"),
    ("gate", "Host runtime deferred to the operator.", None, "n00002", "deferred", "2026-04-02T09:00:00Z"),
    ("decision", "The log is JSONL with checksums: café, 東京.", "Readers can verify.", "n00003", None,
     "2026-04-03T10:00:00Z"),
    ("gate", "Licence question.", None, None, "deferred", "2026-04-03T10:30:00Z"),
    ("artifact", "The artifact excludes\nraw notes and discarded paths.", None, None, None, "2026-04-04T16:20:00Z"),
]


# --------------------------------------------------------------------------
# Local helpers

def write_audited_session(folder) -> list:
    """The audited session written by hand (write_session), so that every date in the document is known."""
    signals = [(note_type, text, {name: value for name, value in zip(("effect", "ref", "status", "ts"), rest)
                                  if value is not None})
               for note_type, text, *rest in AUDITED_SESSION]
    return write_session(folder, signals, session_id=SESSION_ID, created_at=CREATED_AT)


def export_markdown(folder, *extra) -> tuple:
    result = run_notes("export", "--format", "md", *extra, folder=folder)
    assert result.code == 0, result
    assert_no_traceback(result)
    return result, result.receipt["path"]


def split_document(document: str, records: list) -> tuple:
    """(header, one block per record): each block runs from its record's id to the next record's id."""
    starts = []
    search_from = 0
    for record in records:
        position = document.find(record["id"], search_from)
        assert position >= 0, "%s missing, or out of order" % record["id"]
        starts.append(position)
        search_from = position + len(record["id"])
    # Each block starts at the beginning of the line that names the record.
    starts = [document.rfind("\n", 0, start) + 1 for start in starts]
    blocks = [document[start:end] for start, end in zip(starts, starts[1:] + [len(document)])]
    return document[:starts[0]] if starts else document, blocks


# --------------------------------------------------------------------------
# The markdown document

def test_markdown_export_goes_next_to_the_session_by_default(tmp_path):
    folder = tmp_path / "session"
    write_audited_session(folder)
    log_before = (folder / "session_notes.jsonl").read_bytes()
    meta_before = (folder / "session_meta.json").read_bytes()

    result, path = export_markdown(folder)

    assert result.receipt == {"ok": True, "command": "export", "record_count": 7,
                              "path": str(folder / "session_export.md"),
                              "keep": {"file": str(folder / "session_export.md"), "host": "local",
                                       "how": "Saved at this path on this computer."}}
    assert list(result.receipt) == ["ok", "command", "record_count", "path", "keep"]
    assert (folder / "session_export.md").is_file()
    assert not (folder / "session_export.json").exists()
    assert (folder / "session_notes.jsonl").read_bytes() == log_before
    assert (folder / "session_meta.json").read_bytes() == meta_before


def test_markdown_header_names_the_session_dates_counts_and_verify_result(tmp_path):
    folder = tmp_path / "session"
    write_audited_session(folder)

    _, path = export_markdown(folder)

    document = open(path, encoding="utf-8").read()
    records = read_records(folder)
    header, _ = split_document(document, records)
    assert header.startswith("#")
    for fact in (SESSION_ID, CREATED_AT, "2026-04-02T08:00:00Z", "2026-04-04T16:20:00Z"):
        assert fact in header, fact
    count_lines = [line for line in header.splitlines() if re.search(r"\b7\b", line)]
    assert count_lines, header
    verify_lines = [line for line in header.splitlines() if "verif" in line.lower()]
    assert len(verify_lines) == 1 and "clean" in verify_lines[0].lower(), header


def test_markdown_lists_every_record_in_order_with_all_its_fields(tmp_path):
    folder = tmp_path / "session"
    records = write_audited_session(folder)

    _, path = export_markdown(folder)

    document = open(path, encoding="utf-8").read()
    _, blocks = split_document(document, records)
    assert len(blocks) == len(records)
    for record, block in zip(records, blocks):
        first_line = block.splitlines()[0]
        assert first_line.startswith("#"), first_line
        for value in (record["id"], record["ts"], record["type"]):
            assert value in first_line, (value, first_line)
        for line in record["text"].split("\n"):  # note text is an indented block: each line four spaces in
            assert "\n    " + line + "\n" in block, (line, block)
        for key in ("effect", "ref", "status"):
            if key in record:
                labelled = [line for line in block.splitlines()
                            if key in line.lower() and record[key] in line]
                assert labelled, (key, block)
    # The superseded and the superseding notes are both in the audit: nothing is hidden.
    assert "The log is JSONL." in document


def test_markdown_export_to_a_chosen_path(tmp_path):
    folder = tmp_path / "session"
    write_audited_session(folder)
    output = tmp_path / "downloads" / "audit.md"

    result, path = export_markdown(folder, "--output", str(output))

    assert path == str(output)
    assert result.receipt["record_count"] == 7
    assert "n00007" in output.read_text(encoding="utf-8")
    assert not (folder / "session_export.md").exists()


def test_markdown_export_refuses_a_folder_as_output(tmp_path):
    folder = tmp_path / "session"
    write_audited_session(folder)
    before = folder_digest(tmp_path)

    result = run_notes("export", "--format", "md", "--output", str(tmp_path), folder=folder)

    assert_refused(result, 2)
    assert folder_digest(tmp_path) == before


def test_markdown_export_of_a_damaged_log_says_so(tmp_path):
    folder = copy_fixture("tampered", tmp_path / "tampered")
    log_before = (folder / "session_notes.jsonl").read_bytes()

    result, path = export_markdown(folder)

    assert result.receipt["warnings"], result.receipt
    document = open(path, encoding="utf-8").read()
    verify_lines = [line for line in document.splitlines() if "verif" in line.lower()]
    assert verify_lines and "clean" not in verify_lines[0].lower() and "1" in verify_lines[0], verify_lines
    assert "n00004" in document
    _, blocks = split_document(document, read_records(folder))
    assert len(blocks) == 11
    assert (folder / "session_notes.jsonl").read_bytes() == log_before


def test_markdown_export_of_an_empty_session(session):
    _, path = export_markdown(session)
    document = open(path, encoding="utf-8").read()
    assert document.startswith("#")
    assert "n00001" not in document
    verify_lines = [line for line in document.splitlines() if "verif" in line.lower()]
    assert verify_lines and "clean" in verify_lines[0].lower()


@pytest.mark.parametrize("form", ["rtf", "MD", ""])
def test_unknown_export_format_is_refused(session, form):
    before = folder_digest(session)
    assert_refused(run_notes("export", "--format", form, folder=session), 2)
    assert folder_digest(session) == before


# --------------------------------------------------------------------------
# JSON stays the default, unchanged

def normalised_export(path) -> str:
    """The export's text with the one value that depends on when it ran blanked out."""
    text = path.read_text(encoding="utf-8")
    text, replaced = re.subn(r'"exported_at": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"exported_at": "-"', text)
    assert replaced == 1, text[:300]
    return text


@pytest.mark.parametrize("extra", [[], ["--format", "json"]], ids=["default", "format-json"])
def test_json_export_of_the_v0_session_is_v0_byte_for_byte(tmp_path, extra):
    folder = copy_fixture("basic", tmp_path / "basic")
    (folder / "session_export.json").unlink()

    result = run_notes("export", *extra, folder=folder)

    assert result.code == 0, result
    assert result.receipt == {"ok": True, "command": "export", "record_count": 11,
                              "path": str(folder / "session_export.json"),
                              "keep": {"file": str(folder / "session_export.json"), "host": "local",
                                       "how": "Saved at this path on this computer."}}
    assert normalised_export(folder / "session_export.json") == \
        normalised_export(V0_FIXTURES / "basic" / "session_export.json")


def test_json_export_carries_the_links_in_the_v0_layout(tmp_path):
    folder = tmp_path / "session"
    records = write_audited_session(folder)

    result = run_notes("export", folder=folder)

    assert result.code == 0, result
    text = (folder / "session_export.json").read_text(encoding="utf-8")
    export = json.loads(text)
    assert list(export) == ["schema_version", "exported_at", "session", "record_count", "records"]
    assert export["schema_version"] == "shaping-memory-export.v0"
    assert export["record_count"] == 7 and export["records"] == records
    assert export["session"] == json.loads((folder / "session_meta.json").read_text(encoding="utf-8"))
    assert [list(record) for record in export["records"]] == [list(record) for record in records]
    assert text == json.dumps(export, indent=2, ensure_ascii=False) + "\n"


def test_markdown_export_names_the_note_that_reopened_a_discard(tmp_path):
    # Issue 26: the audit document agrees with recap and show on a discarded path taken up again.
    folder = tmp_path / "session"
    write_session(folder, [("discard", "Live chat ruled out."), ("discard", "SMS ruled out."),
                           ("discard", "Fax ruled out."),
                           ("decision", "Live chat after all.", {"ref": "n00001", "provenance": "op"}),
                           ("gate", "SMS for the elderly?", {"about": "n00002"})])

    notes.Session(folder).export(format="md")

    document = (folder / "session_export.md").read_text(encoding="utf-8")
    blocks = {block.split(" ")[0]: block for block in document.split("### ")[1:]}
    assert blocks["n00001"].rstrip("\n").endswith("- Reopened by: n00004")
    assert blocks["n00002"].rstrip("\n").endswith("- Reopened by: n00005")
    assert "Reopened" not in blocks["n00003"] + blocks["n00004"] + blocks["n00005"]
