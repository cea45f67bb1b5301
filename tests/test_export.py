"""export (JSON and markdown, where it may write) and restore (ours and v0's exports, damaged ones,
what it answers)."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (LOG, NOTES, REPO, SESSION_ID, V0_FIXTURES, append, appended, assert_no_traceback,
                      assert_refused, copy_fixture, folder_digest, line_of, notes, read_records, recap, recap_text,
                      run_here, run_notes, session_id_of, v0_checksum, write_export, write_session)


# ==========================================================================
# export --format md, and the JSON export staying the default and unchanged

MD_SESSION_ID = "3e9a5c1d-8b2f-4d6e-a0c7-5f1b9d2e4a68"
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
    return write_session(folder, signals, session_id=MD_SESSION_ID, created_at=CREATED_AT)


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
    for fact in (MD_SESSION_ID, CREATED_AT, "2026-04-02T08:00:00Z", "2026-04-04T16:20:00Z"):
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


def test_markdown_export_names_the_note_that_reopened_a_discard_or_questions_it(tmp_path):
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
    assert blocks["n00002"].rstrip("\n").endswith("- Questioned by: n00005")  # it holds, as recap says
    assert "Reopened" not in blocks["n00002"] + blocks["n00003"] + blocks["n00004"] + blocks["n00005"]
    assert "Questioned" not in blocks["n00001"] + blocks["n00003"]


# ==========================================================================
# export writes nowhere it was not meant to

def tree_digest(root) -> dict:
    """Every file under root (links as their target path, FIFOs by name) and its bytes."""
    seen = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                seen[path] = "link to " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    seen[path] = handle.read()
            elif not os.path.isdir(path):
                seen[path] = "special"
    return seen


def mcp_exports(folder, outputs) -> list:
    """Call the export tool once per output through the official SDK client; the results in order."""
    import mcp

    parameters = mcp.StdioServerParameters(command=sys.executable,
                                           args=["-S", str(NOTES), "--dir", str(folder), "mcp"])

    async def calls():
        async with mcp.Client(parameters, mode="legacy") as client:
            return [await client.call_tool("export", {"output": output}) for output in outputs]

    return asyncio.run(calls())


def outside_targets(tmp_path):
    """A session, a file standing for /etc/passwd beside it, and the ways a client could point at it."""
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Kept.", folder=folder).code == 0
    passwd = tmp_path / "etc" / "passwd"
    passwd.parent.mkdir()
    passwd.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    os.symlink(passwd.parent, folder / "etc-link")
    os.symlink(passwd, folder / "passwd-link.json")
    os.mkfifo(folder / "pipe.json")
    return folder, passwd, [
        str(passwd),                 # absolute
        "../etc/passwd",             # climbs out
        "sub/../../etc/passwd",      # climbs out past a folder of its own
        "../escape.json",            # a new file outside
        "etc-link/passwd",           # a linked folder that leads out
        "passwd-link.json",          # a link to the file itself
        "pipe.json",                 # a special file inside
        "~/escape.json",             # the home folder
    ]


@pytest.mark.mcp_sdk
def test_mcp_export_refuses_every_way_out_and_changes_nothing(tmp_path):
    folder, passwd, targets = outside_targets(tmp_path)
    before = tree_digest(tmp_path)
    results = mcp_exports(folder, targets)
    for target, result in zip(targets, results):
        assert result.is_error is True, target
        text = result.content[0].text
        assert '"ok": false' in text, target
        assert "session folder" in text or "FIFO" in text or "link" in text, (target, text)
    assert tree_digest(tmp_path) == before
    assert passwd.read_bytes() == b"root:x:0:0:root:/root:/bin/bash\n"
    assert not (tmp_path / "escape.json").exists()


@pytest.mark.mcp_sdk
def test_mcp_export_takes_a_relative_path_inside_the_session(tmp_path, monkeypatch):
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Kept.", folder=folder).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the server's working folder is not where a relative path lands
    first, again = mcp_exports(folder, ["exports/mine.json", "exports/mine.json"])
    assert first.is_error is False and again.is_error is False
    assert first.structured_content["path"] == str(folder.resolve() / "exports" / "mine.json")
    assert (folder / "exports" / "mine.json").read_bytes().startswith(b'{\n  "schema_version": ')
    assert os.listdir(elsewhere) == []


def test_cli_export_never_replaces_another_sessions_log(tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    for text in ("One.", "Two.", "Three."):
        assert run_notes("append", "--type", "decision", "--text", text, folder=other).code == 0
    assert run_notes("append", "--type", "decision", "--text", "Mine.", folder=mine).code == 0
    before = folder_digest(other)
    result = run_notes("export", "--output", other / "session_notes.jsonl", folder=mine)
    assert result.code == 2
    assert result.receipt == {"ok": False, "error": (
        "--output %s is not an export of this tool, which export never replaces; choose another --output, or "
        "remove it" % (other / "session_notes.jsonl"))}
    assert folder_digest(other) == before


@pytest.mark.parametrize("content", [b"", b"{}\n", b"# Notes\n", b'{"schema_version": "x"}\n',
                                     b"ssh-ed25519 AAAAC3Nza fake\n"])
def test_cli_export_refuses_to_replace_any_other_file(tmp_path, content):
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Kept.", folder=folder).code == 0
    target = tmp_path / "target"
    target.write_bytes(content)
    result = run_notes("export", "--output", target, folder=folder)
    assert result.code == 2 and "not an export of this tool" in result.receipt["error"]
    assert target.read_bytes() == content


@pytest.mark.parametrize("first, then", [("json", "json"), ("md", "md"), ("json", "md"), ("md", "json")])
def test_cli_export_replaces_an_earlier_export(tmp_path, first, then):
    folder = tmp_path / "session"
    assert run_notes("append", "--type", "decision", "--text", "Kept.", folder=folder).code == 0
    target = tmp_path / "copy"
    assert run_notes("export", "--format", first, "--output", target, folder=folder).code == 0
    assert run_notes("append", "--type", "decision", "--text", "Later.", folder=folder).code == 0
    result = run_notes("export", "--format", then, "--output", target, folder=folder)
    assert result.code == 0, result
    assert b"Later." in target.read_bytes()


def test_cli_export_replaces_a_v0_export(tmp_path):
    folder = copy_fixture("basic", tmp_path / "session")
    v0_export = folder / "session_export.json"
    assert v0_export.read_bytes().startswith(b'{\n  "schema_version": "shaping-memory-export.v0"')
    result = run_notes("export", folder=folder)
    assert result.code == 0, result


# --------------------------------------------------------------------------
# The folder check cannot be raced: each component is opened by descriptor,
# no link followed, and MCP export creates a bounded number of files.

def mcp_call(folder, tool, arguments) -> dict:
    """One tool call to the server's own handler, in this process: the receipt, and whether it is an error."""
    import notes

    server = notes._McpServer(str(folder), None, notes._mcp_served_tools(False), None)
    result = notes._mcp_call_tool(server, {"name": tool, "arguments": arguments})
    return result["structuredContent"], result["isError"]


def kept_session(tmp_path):
    import notes

    folder = tmp_path / "session"
    notes.Session(folder).append(type="decision", text="Kept.")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.json").write_bytes(b"the user's own file\n")
    (folder / "sub").mkdir()
    return folder.resolve(), outside


def test_mcp_export_never_follows_a_folder_swapped_for_a_link_after_the_check(tmp_path, monkeypatch):
    import notes

    folder, outside = kept_session(tmp_path)
    real_earlier = notes._earlier_export

    def swap_then_look(*args, **kwargs):  # runs after the output was judged, before it is written
        os.rename(folder / "sub", folder / "sub-moved")
        os.symlink(outside, folder / "sub")
        return real_earlier(*args, **kwargs)
    monkeypatch.setattr(notes, "_earlier_export", swap_then_look)
    before = tree_digest(outside)
    receipt, failed = mcp_call(folder, "export", {"output": "sub/mine.json"})
    assert tree_digest(outside) == before
    assert failed and receipt == {"ok": False, "error": (
        "export over MCP writes only inside the session folder: output passes through a link or a file where a "
        "folder should be; give a file name inside it, such as session_export.json (written to %s)"
        % (folder / "session_export.json"))}


def test_mcp_export_creates_at_most_20_files_and_folders_then_only_replaces(tmp_path, monkeypatch):
    import collections

    import notes

    monkeypatch.setattr(notes, "_mcp_export_created", collections.Counter())
    folder, _ = kept_session(tmp_path)
    for number in range(18):
        assert mcp_call(folder, "export", {"output": "e%d.json" % number})[1] is False
    assert mcp_call(folder, "export", {"output": "new/e.json"})[1] is False  # a folder and a file: 20
    before = folder_digest(folder)
    receipt, failed = mcp_call(folder, "export", {"output": "e18.json"})
    assert failed and receipt == {"ok": False, "error": (
        "export over MCP creates at most 20 new files and folders per server run, all made; nothing was "
        "written. Export to a name written before (such as session_export.json), or run export on the command "
        "line")}
    assert mcp_call(folder, "export", {"output": "deeper/e.json"})[1] is True
    assert folder_digest(folder) == before
    assert mcp_call(folder, "export", {"output": "e3.json"})[1] is False  # replacing creates nothing


@pytest.mark.parametrize("output, problem", [
    ("x\0y.json", "holds a NUL character"),
    ("a/" * 2100 + "x.json", "is over 1024 characters or 32 folders deep"),
    ("a/" * 40 + "x.json", "is over 1024 characters or 32 folders deep"),
    ("a//x.json", "is empty, ends with / or holds an empty component (//)"),
    ("a/", "is empty, ends with / or holds an empty component (//)"),
])
def test_mcp_export_refuses_a_path_no_folder_takes_with_the_way_out(tmp_path, output, problem):
    folder, _ = kept_session(tmp_path)
    before = folder_digest(folder)
    receipt, failed = mcp_call(folder, "export", {"output": output})
    assert failed and receipt == {"ok": False, "error": (
        "export over MCP writes only inside the session folder: output %s; give a file name inside it, such as "
        "session_export.json (written to %s)" % (problem, folder / "session_export.json"))}
    assert folder_digest(folder) == before


def test_open_inside_reads_below_the_folder_and_refuses_every_way_out(tmp_path):
    import notes

    folder, outside = kept_session(tmp_path)
    (folder / "sub" / "export.json").write_bytes(b"inside\n")
    os.symlink(outside, folder / "away")
    os.symlink(outside / "mine.json", folder / "sub" / "link.json")
    descriptor = notes._open_inside(str(folder), "sub/export.json")
    with open(descriptor, "rb") as handle:
        assert handle.read() == b"inside\n"
    for path in ("away/mine.json", "sub/link.json", "../outside/mine.json", str(outside / "mine.json")):
        with pytest.raises(notes.NotesError) as refusal:
            notes._open_inside(str(folder), path)
        assert "path " in refusal.value.message and "inside the folder" in refusal.value.message, path
    with pytest.raises(FileNotFoundError):
        notes._open_inside(str(folder), "sub/missing.json")


SWAPPER = r"""
import os, sys, time
folder, outside, stop = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
sub, moved = os.path.join(folder, "sub"), os.path.join(folder, "sub-real")
while time.monotonic() < stop:
    try:
        os.rename(sub, moved)
        os.symlink(outside, sub)
        os.unlink(sub)
        os.rename(moved, sub)
    except OSError:  # the server made a folder "sub" in the gap: move it aside, put the real one back
        try:
            if os.path.islink(sub):
                os.unlink(sub)
            elif os.path.isdir(sub) and os.path.isdir(moved):
                os.rename(sub, os.path.join(folder, "stray-%d" % time.monotonic_ns()))
            if os.path.isdir(moved) and not os.path.lexists(sub):
                os.rename(moved, sub)
        except OSError:
            pass
"""


@pytest.mark.long
def test_mcp_exports_beside_a_link_swapping_loop_land_nothing_outside(tmp_path):
    import json
    import subprocess

    folder, outside = kept_session(tmp_path)
    for number in range(50):
        (outside / ("e%d.json" % number)).write_bytes(b'{\n  "schema_version": "shaping-memory-export.v0"\n')
    before = tree_digest(outside)
    swapper = subprocess.Popen([sys.executable, "-S", "-c", SWAPPER, str(folder), str(outside), "20"])
    try:
        calls = b"".join(json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {
            "name": "export", "arguments": {"output": "sub/e%d.json" % (number % 50)}}}).encode() + b"\n"
            for number in range(2000))
        server = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"], input=calls,
                                capture_output=True, timeout=300)
    finally:
        swapper.kill()
        swapper.wait()
    answers = [json.loads(line) for line in server.stdout.splitlines()]
    assert len(answers) == 2000 and b"Traceback" not in server.stderr
    assert tree_digest(outside) == before


@pytest.mark.long
def test_a_storm_of_mcp_exports_to_new_names_creates_at_most_20_files(tmp_path):
    import json
    import subprocess

    folder, _ = kept_session(tmp_path)
    before = set(os.listdir(folder))
    calls = b"".join(json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {
        "name": "export", "arguments": {"output": "storm/%d/e.json" % number if number % 2 else "e%d.json" % number}}
    }).encode() + b"\n" for number in range(1000))
    server = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"], input=calls,
                            capture_output=True, timeout=300)
    answers = [json.loads(line) for line in server.stdout.splitlines()]
    assert len(answers) == 1000 and b"Traceback" not in server.stderr
    assert sum(not answer["result"]["isError"] for answer in answers) <= 20
    made = [os.path.join(root, name) for root, folders, files in os.walk(folder) for name in folders + files]
    assert 0 < len(made) - len(before) <= 20


# ==========================================================================
# export_lag: how far the export lags

# --------------------------------------------------------------------------
# 5. export_lag

def test_export_lag_counts_the_notes_the_export_lacks(session):
    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    path = str(session / "session_export.json")
    assert recap(session)["export_lag"] == {"path": path, "record_count": None, "missing": 3}

    assert run_notes("export", folder=session).code == 0
    assert recap(session)["export_lag"] == {"path": path, "record_count": 3, "missing": 0}
    assert "Export: session_export.json holds every note." in recap_text(session, "--format", "md")

    append(session, "decision", "Decision 4.")
    assert recap(session)["export_lag"] == {"path": path, "record_count": 3, "missing": 1}
    append(session, "decision", "Decision 5.")
    assert recap(session)["export_lag"] == {"path": path, "record_count": 3, "missing": 2}
    assert "Export: session_export.json lacks the 2 newest notes; export again." in \
        recap_text(session, "--format", "md").splitlines()


def test_export_lag_reads_only_the_head_of_the_export(session):
    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    assert run_notes("export", folder=session).code == 0
    append(session, "decision", "Decision 4.")
    # Beyond its head the file is no longer JSON at all: recap never reads that far.
    with open(str(session / "session_export.json"), "ab") as handle:
        handle.write(b"\x00not json" * 200000)

    assert recap(session)["export_lag"] == {"path": str(session / "session_export.json"), "record_count": 3,
                                            "missing": 1}


def make_unusable_export(kind, folder, tmp_path):
    """Put an export at folder/session_export.json that recap cannot count from."""
    target = folder / "session_export.json"
    if kind == "another session":
        shutil.copy(str(copy_fixture("basic", tmp_path / "v0") / "session_export.json"), str(target))
    elif kind == "not an export":
        target.write_bytes(b"Meeting notes, not an export.\n")
    elif kind == "a folder":
        target.mkdir()
    elif kind == "a FIFO":
        os.mkfifo(str(target))


@pytest.mark.parametrize("kind, words", [
    ("another session", ["another session"]),
    ("not an export", ["record_count"]),
    ("a folder", ["not a regular file"]),
    pytest.param("a FIFO", ["not a regular file"], marks=pytest.mark.skipif(not hasattr(os, "mkfifo"),
                                                                           reason="no FIFOs here")),
])
def test_an_export_that_cannot_be_counted_leaves_every_note_missing(session, tmp_path, kind, words):
    append(session, "decision", "Decision 1.")
    append(session, "decision", "Decision 2.")
    make_unusable_export(kind, session, tmp_path)

    result = run_notes("recap", folder=session, timeout=20)  # a FIFO is never opened for a blocking read

    assert result.code == 0, result
    lag = result.receipt["export_lag"]
    assert list(lag) == ["path", "record_count", "missing", "problem"]
    assert (lag["record_count"], lag["missing"]) == (None, 2)
    for word in words:
        assert word in lag["problem"]
    assert "Export: session_export.json " in recap_text(session, "--format", "md")


def test_an_export_newer_than_the_log_says_to_restore_it(tmp_path):
    folder = tmp_path / "session"
    records = write_session(folder, [("decision", "Decision %d." % number) for number in range(1, 6)])
    assert run_notes("export", folder=folder).code == 0
    (folder / LOG).write_bytes(b"".join(line_of(record) for record in records[:3]))

    lag = recap(folder)["export_lag"]

    assert (lag["record_count"], lag["missing"]) == (5, 0)
    assert "restore" in lag["problem"]


# ==========================================================================
# restore EXPORT_FILE: a session back from its export, ours or v0's

RESTORE_KEYS = ["ok", "command", "session_id", "record_count", "restored", "path", "export", "tell_operator"]
V0_EXPORT = V0_FIXTURES / "basic" / "session_export.json"
V0_SESSION_ID = "0f3c2b1c-3c66-49ee-8557-e323c0678aaf"


# --------------------------------------------------------------------------
# Local helpers

def restore(folder, export_path, python=None):
    return run_notes("restore", export_path, folder=folder, python=python)


def assert_restore_refused(target, export_path) -> None:
    """Restore is refused with exit 2 and leaves the target folder as it was."""
    before = folder_digest(target)
    assert_refused(restore(target, export_path), 2)
    assert folder_digest(target) == before


def restored_ok(folder, export_path, record_count, restored, session_id) -> dict:
    result = restore(folder, export_path)
    assert result.code == 0, result
    assert_no_traceback(result)
    assert list(result.receipt) == RESTORE_KEYS
    # The sentence for the operator is pinned word for word in tests/test_sessions.py;
    # here it is one line that names what came back and the file to keep.
    receipt = dict(result.receipt)
    tell = receipt.pop("tell_operator")
    assert "\n" not in tell and tell.startswith("The session is back with %d note" % record_count), tell
    assert "session_export.json" in tell, tell
    export = receipt.pop("export")
    assert list(export) == ["file", "exported_at", "last_note"] and export["file"] == str(export_path)
    assert receipt == {"ok": True, "command": "restore", "session_id": session_id,
                       "record_count": record_count, "restored": restored,
                       "path": str(folder / "session_notes.jsonl")}
    return result.receipt


def checksum(record: dict) -> str:
    body = {key: value for key, value in record.items() if key != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def log_bytes_of(records: list) -> bytes:
    """The log a correct restore writes: each export record as one compact line, in order."""
    return b"".join((json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
                    for record in records)


def load(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def build_linked_session(folder) -> str:
    """A session of ours with links and unicode, built quickly in-process; return its session id."""
    assert notes.main(["--dir", str(folder), "init"]) == 0
    for arguments in (
            ["--type", "mode", "--text", "SHAPING entered."],
            ["--type", "gate", "--text", "Host runtime is undecided.", "--effect", "Blocks the install notes."],
            ["--type", "decision", "--text", "Reminders by email."],
            ["--type", "gate", "--text", "Host deferred.", "--ref", "n00002", "--status", "deferred"],
            ["--type", "decision", "--text", "Reminders by SMS, café and 東京 included.", "--ref", "n00003"],
            ["--type", "discard", "--text", "A vector store was ruled out."],
            ["--type", "artifact", "--text", "The runbook excludes\nraw notes."]):
        assert notes.main(["--dir", str(folder), "append"] + arguments) == 0
    return load(folder / "session_meta.json")["session_id"]


def export_through_cli(folder) -> tuple:
    """Export the folder's session through the CLI; return (path, parsed export)."""
    result = run_notes("export", folder=folder)
    assert result.code == 0, result
    path = folder / "session_export.json"
    return path, load(path)


def without_path(receipt: dict, *others: str) -> dict:
    return {key: value for key, value in receipt.items() if key != "path" and key not in others}


# --------------------------------------------------------------------------
# Into a folder with no session

def test_restore_the_v0_export_into_a_new_folder(tmp_path):
    target = tmp_path / "sandbox" / "shaping"

    restored_ok(target, V0_EXPORT, 11, 11, V0_SESSION_ID)

    meta_text = (target / "session_meta.json").read_text(encoding="utf-8")
    assert json.loads(meta_text) == {"schema_version": "shaping-memory-session-meta.v0",
                                     "session_id": V0_SESSION_ID, "created_at": "2026-11-29T15:10:48Z",
                                     "log_file": str(target / "session_notes.jsonl")}
    assert list(json.loads(meta_text)) == ["schema_version", "session_id", "created_at", "log_file"]
    assert meta_text == json.dumps(json.loads(meta_text), indent=2, ensure_ascii=False) + "\n"
    # The log comes back byte for byte as v0 wrote it.
    log = (target / "session_notes.jsonl").read_bytes()
    assert log == (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    assert read_records(target) == load(V0_EXPORT)["records"]

    verified = run_notes("verify", folder=target)
    assert verified.code == 0, verified
    assert verified.receipt["problems"] == [] and verified.receipt["total"] == 11
    # The restored session goes on where the export stopped.
    appended = run_notes("append", "--type", "decision", "--text", "Restored and continued.", folder=target)
    assert appended.code == 0, appended
    assert appended.receipt["note_id"] == "n00012"
    assert (target / "session_notes.jsonl").read_bytes().startswith(log)


def test_restore_our_export_into_an_empty_folder_gives_back_the_same_state(tmp_path):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, export = export_through_cli(origin)
    target = tmp_path / "target"
    target.mkdir()

    restored_ok(target, export_path, 7, 7, session_id)

    meta = load(target / "session_meta.json")
    assert meta == dict(export["session"], log_file=str(target / "session_notes.jsonl"))
    assert meta["created_at"] == load(origin / "session_meta.json")["created_at"]
    assert (target / "session_notes.jsonl").read_bytes() == log_bytes_of(export["records"])
    assert (target / "session_notes.jsonl").read_bytes() == (origin / "session_notes.jsonl").read_bytes()
    assert run_notes("verify", folder=target).code == 0
    # Re-entry: restore then recap gives back the same gates, decisions and boundaries
    # (the export, written in the origin folder only, lags in the target).
    assert without_path(run_notes("recap", folder=target).receipt, "export_lag") == \
        without_path(run_notes("recap", folder=origin).receipt, "export_lag")


def test_restore_at_re_entry_from_an_export_uploaded_into_the_same_folder(tmp_path):
    # A fresh sandbox: the operator uploads notes.py and the export into one folder.
    sandbox = tmp_path / "mnt" / "data"
    sandbox.mkdir(parents=True)
    uploaded = sandbox / "session_export.json"
    uploaded.write_bytes(V0_EXPORT.read_bytes())

    restored_ok(sandbox, uploaded, 11, 11, V0_SESSION_ID)

    assert uploaded.read_bytes() == V0_EXPORT.read_bytes()
    assert (sandbox / "session_notes.jsonl").read_bytes() == \
        (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    assert run_notes("verify", folder=sandbox).code == 0


def test_restore_an_empty_export(tmp_path):
    origin = tmp_path / "origin"
    assert run_notes("init", folder=origin).code == 0
    export_path, export = export_through_cli(origin)
    target = tmp_path / "target"

    restored_ok(target, export_path, 0, 0, export["session"]["session_id"])

    assert (target / "session_notes.jsonl").read_bytes() == b""
    assert load(target / "session_meta.json")["session_id"] == export["session"]["session_id"]


def test_restore_into_a_fresh_init_replaces_the_empty_session(session):
    before_id = load(session / "session_meta.json")["session_id"]
    assert before_id != V0_SESSION_ID

    restored_ok(session, V0_EXPORT, 11, 11, V0_SESSION_ID)

    assert load(session / "session_meta.json") == {
        "schema_version": "shaping-memory-session-meta.v0", "session_id": V0_SESSION_ID,
        "created_at": "2026-11-29T15:10:48Z", "log_file": str(session / "session_notes.jsonl")}
    assert (session / "session_notes.jsonl").read_bytes() == \
        (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    summary = run_notes("summary", folder=session)
    assert (summary.receipt["session_id"], summary.receipt["total"]) == (V0_SESSION_ID, 11)


# --------------------------------------------------------------------------
# Into the same session

@pytest.mark.parametrize("kept", [1, 4, 6])
def test_restore_appends_what_a_prefix_log_lacks(tmp_path, kept):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, export = export_through_cli(origin)
    # The sandbox's copy stopped after `kept` notes: same session, shorter log.
    target = tmp_path / "target"
    restored_ok(target, export_path, 7, 7, session_id)
    full_log = (target / "session_notes.jsonl").read_bytes()
    prefix = b"".join(full_log.splitlines(keepends=True)[:kept])
    (target / "session_notes.jsonl").write_bytes(prefix)
    meta_before = (target / "session_meta.json").read_bytes()

    restored_ok(target, export_path, 7, 7 - kept, session_id)

    log = (target / "session_notes.jsonl").read_bytes()
    assert log.startswith(prefix)
    assert log == full_log
    assert read_records(target) == export["records"]
    assert (target / "session_meta.json").read_bytes() == meta_before
    assert run_notes("verify", folder=target).code == 0


def test_restore_of_the_same_full_session_restores_nothing(tmp_path):
    target = copy_fixture("basic", tmp_path / "basic")
    first = restore(target, V0_EXPORT)  # the first run may create the lock file
    assert first.code == 0, first
    before = folder_digest(target)

    restored_ok(target, V0_EXPORT, 11, 0, V0_SESSION_ID)

    assert folder_digest(target) == before


# --------------------------------------------------------------------------
# Refusals: exit 2, nothing changed

def test_restore_refuses_another_session_with_notes(tmp_path):
    target = tmp_path / "target"
    build_linked_session(target)
    before = folder_digest(target)

    result = restore(target, V0_EXPORT)

    assert_refused(result, 2)
    assert list(result.receipt) == ["ok", "error"]
    assert folder_digest(target) == before


def test_after_a_reset_restore_names_set_aside_and_then_moves_the_new_session_aside(tmp_path, capsys):
    # A reset emptied the folder; the next append started a new session; the operator then uploads the export.
    origin, target = tmp_path / "origin", tmp_path / "target"
    appended(origin, "decision", "Kept before the reset.")
    export_path, _ = export_through_cli(origin)
    appended(target, "decision", "Sent after the reset.")
    new_id = session_id_of(target)
    started, before = (target / "session_notes.jsonl").read_bytes(), folder_digest(target)

    code, refusal = run_here(capsys, target, "restore", export_path)

    assert (code, refusal) == (2, {"ok": False, "error": (
        "%s holds another session (%s) with 1 note; nothing was changed. If a reset started it after the export, "
        "restore again with --set-aside, else into an empty --dir" % (target, new_id))})
    assert folder_digest(target) == before

    code, receipt = run_here(capsys, target, "restore", "--set-aside", export_path)

    assert code == 0 and receipt["restored"] == 1, receipt
    moved = Path(receipt["set_aside"])
    assert moved.parent == target and moved.name.startswith("session_notes.jsonl.set-aside-")
    assert moved.read_bytes() == started
    assert (target / "session_notes.jsonl").read_bytes() == (origin / "session_notes.jsonl").read_bytes()
    assert load(target / "session_meta.json")["session_id"] == session_id_of(origin)
    assert sorted(p.name for p in target.iterdir()) == sorted(
        ["session_meta.json", "session_notes.jsonl", "session_notes.lock", moved.name])


def test_a_set_aside_cut_short_after_the_move_is_finished_by_the_same_restore(tmp_path, capsys):
    origin, target = tmp_path / "origin", tmp_path / "target"
    appended(origin, "decision", "Kept before the reset.")
    export_path, _ = export_through_cli(origin)
    appended(target, "decision", "Sent after the reset.")
    # The state a kill leaves between moving the log aside and removing the other session's meta.
    (target / "session_notes.jsonl").rename(target / "session_notes.jsonl.set-aside-20261204T000000Z")

    code, receipt = run_here(capsys, target, "restore", "--set-aside", export_path)

    assert code == 0 and receipt["restored"] == 1 and "set_aside" not in receipt, receipt
    assert (target / "session_notes.jsonl").read_bytes() == (origin / "session_notes.jsonl").read_bytes()
    assert session_id_of(target) == session_id_of(origin)


def test_two_set_asides_in_one_second_keep_both_logs(tmp_path, capsys, monkeypatch):
    # Side files are named to the second: a second one then takes a free name, never the first one's.
    monkeypatch.setattr(notes.time, "gmtime", lambda *args: notes.time.struct_time((2026, 12, 4, 9, 0, 0, 4, 338, 0)))
    first, second, target = tmp_path / "first", tmp_path / "second", tmp_path / "target"
    for folder in (first, second):
        appended(folder, "decision", "Kept in %s." % folder.name)
    appended(target, "decision", "Sent after the reset.")
    logs = [(target / "session_notes.jsonl").read_bytes(), (first / "session_notes.jsonl").read_bytes()]

    moved = [run_here(capsys, target, "restore", "--set-aside", export_through_cli(origin)[0])[1]["set_aside"]
             for origin in (first, second)]

    assert [Path(path).name for path in moved] == [
        "session_notes.jsonl.set-aside-20261204T090000Z", "session_notes.jsonl.set-aside-20261204T090000Z-1"]
    assert [Path(path).read_bytes() for path in moved] == logs


def test_set_aside_leaves_the_same_session_in_place(tmp_path, capsys):
    origin = tmp_path / "origin"
    appended(origin, "decision", "First.")
    export_path, _ = export_through_cli(origin)
    appended(origin, "decision", "Second.")
    before = folder_digest(origin)

    code, receipt = run_here(capsys, origin, "restore", "--set-aside", export_path)

    assert code == 2 and "nothing to restore" in receipt["error"], receipt
    assert folder_digest(origin) == before


def test_restore_refuses_a_log_that_has_gone_past_the_export(tmp_path):
    target = copy_fixture("basic", tmp_path / "basic")
    appended = run_notes("append", "--type", "decision", "--text", "A note the export lacks.", folder=target)
    assert appended.code == 0, appended
    assert_restore_refused(target, V0_EXPORT)


def test_restore_refuses_the_same_session_when_the_logs_differ(tmp_path):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, _ = export_through_cli(origin)
    target = tmp_path / "target"
    restored_ok(target, export_path, 7, 7, session_id)
    # Same session, same length, but its last note is another one (still a valid log).
    records = read_records(target)
    replacement = notes._build_record(session_id, 7, "artifact", "Another boundary.", timestamp=records[6]["ts"])
    with open(str(target / "session_notes.jsonl"), "wb") as handle:
        handle.write(log_bytes_of(records[:6]) + notes._record_line(replacement))
    assert run_notes("verify", folder=target).code == 0
    assert_restore_refused(target, export_path)


def test_restore_refuses_a_missing_export_file(tmp_path):
    target = tmp_path / "target"
    result = restore(target, tmp_path / "no_such_export.json")
    assert_refused(result, 2)
    assert not target.exists()


# --------------------------------------------------------------------------
# A damaged export: exit 3, nothing written

def corrupt_checksum(export):
    export["records"][3]["text"] += " (edited by hand)"


def corrupt_gap(export):
    del export["records"][4]
    export["record_count"] -= 1


def corrupt_repeat(export):
    export["records"][5] = copy.deepcopy(export["records"][4])


def corrupt_start(export):
    del export["records"][0]
    export["record_count"] -= 1


def corrupt_mixed_sessions(export):
    record = export["records"][2]
    record["session_id"] = "11111111-2222-4333-8444-555555555555"
    record["checksum"] = checksum(record)


def corrupt_id(export):
    record = export["records"][0]
    record["id"] = "n00009"
    record["checksum"] = checksum(record)


def corrupt_unknown_type(export):
    record = export["records"][6]
    record["type"] = "idea"
    record["checksum"] = checksum(record)


def corrupt_count_high(export):
    export["record_count"] += 1


def corrupt_count_low(export):
    export["record_count"] -= 1


def corrupt_count_text(export):
    export["record_count"] = str(export["record_count"])


def corrupt_schema(export):
    export["schema_version"] = "shaping-memory-export.v9"


def corrupt_records_not_list(export):
    export["records"] = {"n00001": export["records"][0]}


def corrupt_record_not_object(export):
    export["records"][1] = "n00002"


def corrupt_record_missing_field(export):
    del export["records"][1]["ts"]


def corrupt_no_session_id(export):
    del export["session"]["session_id"]


def corrupt_no_session(export):
    del export["session"]


DAMAGES = {name[len("corrupt_"):]: function for name, function in globals().items() if name.startswith("corrupt_")}
RAW_DAMAGES = {
    "not-json": b"this is not an export {",
    "empty-file": b"",
    "cut-in-half": V0_EXPORT.read_bytes()[:len(V0_EXPORT.read_bytes()) // 2],
    "json-list": b"[]\n",
    "not-utf8": b'{"schema_version": "\xff\xfe"}',
}


def write_damaged(tmp_path, name) -> object:
    path = tmp_path / "damaged_export.json"
    if name in RAW_DAMAGES:
        path.write_bytes(RAW_DAMAGES[name])
    else:
        export = load(V0_EXPORT)
        DAMAGES[name](export)
        path.write_text(json.dumps(export, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("damage", sorted(DAMAGES) + sorted(RAW_DAMAGES))
def test_damaged_export_exits_3_and_writes_nothing(tmp_path, damage):
    export_path = write_damaged(tmp_path, damage)
    export_before = export_path.read_bytes()
    target = tmp_path / "new"

    result = restore(target, export_path)

    assert_refused(result, 3)
    assert not target.exists()
    assert export_path.read_bytes() == export_before


def test_damaged_exports_leave_an_existing_session_untouched(tmp_path):
    target = tmp_path / "target"
    assert run_notes("init", folder=target).code == 0
    before = folder_digest(target)
    for damage in ("checksum", "gap", "mixed_sessions", "count_high", "schema"):
        result = restore(target, write_damaged(tmp_path, damage))
        assert_refused(result, 3)
        assert folder_digest(target) == before, damage


def test_the_undamaged_copy_restores(tmp_path):
    # The damage helpers start from a sound export: re-serialised untouched, it restores.
    export = load(V0_EXPORT)
    path = tmp_path / "sound.json"
    path.write_text(json.dumps(export, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    restored_ok(tmp_path / "target", path, 11, 11, V0_SESSION_ID)


# --------------------------------------------------------------------------
# A small core on every interpreter found

def test_restore_on_each_python(tmp_path, python):
    target = tmp_path / "target"
    result = restore(target, V0_EXPORT, python=python)
    assert result.code == 0, result
    assert list(result.receipt) == RESTORE_KEYS
    assert (target / "session_notes.jsonl").read_bytes() == \
        (V0_FIXTURES / "basic" / "session_notes.jsonl").read_bytes()
    damaged = restore(tmp_path / "other", write_damaged(tmp_path, "gap"), python=python)
    assert_refused(damaged, 3)
    assert not (tmp_path / "other").exists()


# --------------------------------------------------------------------------
# Issue 30, point 3: a restore that knows what it restores

def exported_session(folder, texts) -> tuple:
    """A session of decisions built in-process, exported; return (session id, export path)."""
    session = notes.Session(folder)
    for text in texts:
        session.append(type="decision", text=text)
    return load(folder / "session_meta.json")["session_id"], Path(session.export()["path"])


def test_the_receipt_names_the_exports_time_and_last_note(tmp_path):
    session_id, export_path = exported_session(tmp_path / "origin", ["SMS first.", "Email second."])
    exported_at = load(export_path)["exported_at"]

    receipt = notes.Session(tmp_path / "target").restore(export_file=str(export_path))

    assert receipt["export"] == {"file": str(export_path), "exported_at": exported_at,
                                 "last_note": {"id": "n00002", "type": "decision", "text": "Email second."}}
    assert ("this export was written at %s %s UTC: one downloaded later holds more notes, so restore that "
            "one instead if you have it" % (exported_at[:10], exported_at[11:16])) in receipt["tell_operator"]


def test_an_export_without_a_time_or_notes_says_so(tmp_path):
    path = write_export(tmp_path / "hand.json", [])
    export = load(path)
    del export["exported_at"]
    path.write_text(json.dumps(export, indent=2) + "\n", encoding="utf-8")

    receipt = notes.Session(tmp_path / "target").restore(export_file=str(path))

    assert receipt["export"] == {"file": str(path), "exported_at": None, "last_note": None}
    assert "; this export has no time: one with more notes is later, so restore that one instead if you have it; " \
        in receipt["tell_operator"]


def test_restore_without_a_path_takes_the_export_in_the_session_folder(tmp_path, capsys):
    session_id, export_path = exported_session(tmp_path / "origin", ["SMS first."])
    target = tmp_path / "target"
    target.mkdir()
    shutil.copy(str(export_path), str(target / "session_export.json"))

    code, receipt = run_here(capsys, target, "restore")

    assert code == 0 and receipt["restored"] == 1 and "passed_over" not in receipt
    assert receipt["export"]["file"] == str(target / "session_export.json")
    assert read_records(target) == load(export_path)["records"]


def refused_for_want_of_a_session(capsys, folder) -> dict:
    """recap's receipt in a folder with no session, which the refusal leaves as it was."""
    before = folder_digest(folder)
    code, receipt = run_here(capsys, folder, "recap")
    assert code == 2 and folder_digest(folder) == before
    return receipt


# A browser saves a second download as "session_export (1).json": restore with no path reads it too.
@pytest.mark.parametrize("name", ["session_export.json", "session_export (1).json"])
def test_a_folder_without_a_session_says_whether_an_export_there_can_be_restored(tmp_path, capsys, name):
    session_id, export_path = exported_session(tmp_path / "origin", ["SMS first."])
    target = tmp_path / "target"
    target.mkdir()
    run = "python3 -S notes.py --dir %s " % target

    assert refused_for_want_of_a_session(capsys, target) == {"ok": False, "error": (
        # Round 61 (home-backup c1): a reset sandbox reads as this too, so the refusal says files may be gone.
        "no session in %s (no session_meta.json there: none began, or its files are gone); start one with: "
        "%sinit, or restore an uploaded export with: %srestore PATH" % (target, run, run))}
    shutil.copy(str(export_path), str(target / name))
    (target / "notes.txt").write_text("not an export\n", encoding="utf-8")
    assert refused_for_want_of_a_session(capsys, target) == {"ok": False, "error": (
        "no session in %s, but %s is there: restore it with: %srestore, or start anew with: %sinit"
        % (target, name, run, run))}
    # the command it names brings the session back
    assert run_here(capsys, target, "restore")[0] == 0
    assert session_id_of(target) == session_id


def test_restore_without_a_path_takes_the_longest_of_copies_that_are_earlier_parts(tmp_path, capsys):
    origin = tmp_path / "origin"
    target = tmp_path / "target"
    target.mkdir()
    session_id, export_path = exported_session(origin, ["One."])
    shutil.copy(str(export_path), str(target / "session_export.json"))
    _, export_path = exported_session(origin, ["Two.", "Three."])
    shutil.copy(str(export_path), str(target / "session_export (1).json"))  # a browser's name for a copy
    shutil.copy(str(export_path), str(target / "kept.json"))  # the same copy again, any name

    code, receipt = run_here(capsys, target, "restore")

    assert code == 0, receipt
    assert receipt["export"]["file"] == str(target / "kept.json")  # of equal copies, the first by name
    assert receipt["passed_over"] == ["session_export (1).json", "session_export.json"]
    assert list(receipt)[:9] == ["ok", "command", "session_id", "record_count", "restored", "path", "export",
                                 "passed_over", "tell_operator"]
    assert [record["text"] for record in read_records(target)] == ["One.", "Two.", "Three."]


def test_restore_without_a_path_refuses_copies_that_went_different_ways(tmp_path, capsys):
    target = tmp_path / "target"
    target.mkdir()
    _, first = exported_session(tmp_path / "a", ["One.", "Two in a."])
    shutil.copy(str(first), str(target / "session_export.json"))
    first = target / "session_export.json"  # the second export rewrites the first's path
    _, second = exported_session(tmp_path / "a", ["Three in a."])
    shutil.copy(str(second), str(target / "session_export (1).json"))
    other_id, idea = exported_session(tmp_path / "c", ["Another idea."])
    shutil.copy(str(idea), str(target / "other.json"))
    (target / "notes.md").write_text("# Shaping session, not JSON\n", encoding="utf-8")  # not an export
    before = folder_digest(target)

    code, receipt = run_here(capsys, target, "restore")

    assert code == 2 and receipt["ok"] is False
    session_id = load(first)["session"]["session_id"]
    assert receipt["exports"] == [
        {"file": "other.json", "session_id": other_id, "record_count": 1, "last_note_id": "n00001",
         "exported_at": load(idea)["exported_at"]},
        {"file": "session_export (1).json", "session_id": session_id, "record_count": 3, "last_note_id": "n00003",
         "exported_at": load(second)["exported_at"]},
        {"file": "session_export.json", "session_id": session_id, "record_count": 2, "last_note_id": "n00002",
         "exported_at": load(first)["exported_at"]}]
    assert receipt["error"] == (
        "%s holds 3 exports (listed in exports) that went different ways; nothing was changed. Pass the one to "
        "restore: python3 -S notes.py --dir %s restore PATH" % (target, target))
    assert folder_digest(target) == before


def test_restore_without_a_path_refuses_a_folder_with_no_export(tmp_path, capsys):
    for target in (tmp_path / "missing", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir()
            (target / ".session_export.json.0123456789ab.tmp").write_bytes(
                b'{\n  "schema_version": "shaping-memory-export.v0"')  # a write in progress is no export
        before = folder_digest(target)
        code, receipt = run_here(capsys, target, "restore")
        assert (code, receipt) == (2, {"ok": False, "error": (
            "no export of this tool in the session folder %s; nothing was changed. Upload session_export.json "
            "there, or pass its path: python3 -S notes.py --dir %s restore PATH" % (target, target))})
        assert folder_digest(target) == before


def test_restore_without_a_path_compares_a_bounded_number_of_exports(tmp_path):
    _, export_path = exported_session(tmp_path / "origin", ["One."])
    target = tmp_path / "target"
    target.mkdir()
    for number in range(21):
        shutil.copy(str(export_path), str(target / ("copy-%02d.json" % number)))
    with pytest.raises(notes.NotesError) as refused:
        notes.Session(target).restore()
    assert refused.value.message == ("%s holds more than 20 exports; nothing was changed. Pass the one to "
                                     "restore: restore PATH" % target)
    assert sorted(os.listdir(str(target))) == ["copy-%02d.json" % number for number in range(21)]


def test_an_export_older_than_the_folder_is_refused_naming_both_last_notes(tmp_path):
    session_id, export_path = exported_session(tmp_path / "origin", ["One.", "Two."])
    notes.Session(tmp_path / "origin").append(type="decision", text="Three.")
    before = folder_digest(tmp_path / "origin")

    with pytest.raises(notes.NotesError) as refused:
        notes.Session(tmp_path / "origin").restore(export_file=str(export_path))

    assert refused.value.exit_code == 2
    assert refused.value.message == (
        "%s already holds session %s with 3 notes up to n00003, past this export's 2 up to n00002: nothing to "
        "restore; nothing was changed. Carry on here, and run export to update the export"
        % (tmp_path / "origin", session_id))
    assert folder_digest(tmp_path / "origin") == before


def test_copies_that_went_different_ways_are_refused_listing_the_notes_only_in_the_folder(tmp_path, capsys):
    origin = tmp_path / "origin"
    session_id, _ = exported_session(origin, ["One.", "Two."])
    shutil.copytree(str(origin), str(tmp_path / "fork"))
    _, export_path = exported_session(origin, ["Three in origin."])
    fork = notes.Session(tmp_path / "fork")
    fork.append(type="gate", text="Hosting is undecided?", effect="Blocks the install notes.")
    for number in range(24):
        fork.append(type="decision", text="Fork note %d." % number)
    before = folder_digest(tmp_path / "fork")

    code, receipt = run_here(capsys, tmp_path / "fork", "restore", export_path)

    assert code == 2
    assert receipt["error"] == (
        "the log in %s and this export went different ways after 2 notes in common; nothing was changed. To keep "
        "both, restore the export into an empty --dir and append only_in_folder's notes there"
        % (tmp_path / "fork"))
    assert receipt["only_in_folder_count"] == 25
    assert receipt["only_in_folder"][0] == {"id": "n00003", "type": "gate", "text": "Hosting is undecided?",
                                            "effect": "Blocks the install notes."}
    assert receipt["only_in_folder"][1:] == [{"id": "n%05d" % (number + 4), "type": "decision",
                                              "text": "Fork note %d." % number} for number in range(19)]
    assert folder_digest(tmp_path / "fork") == before
    # The way out, as said: restore into an empty folder, then append the listed notes again.
    empty = notes.Session(tmp_path / "joined")
    assert empty.restore(export_file=str(export_path))["restored"] == 3
    assert empty.append(type="gate", text="Hosting is undecided?")["note_id"] == "n00004"


def test_a_fast_forward_cut_off_at_the_rename_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    origin = tmp_path / "origin"
    session_id = build_linked_session(origin)
    export_path, _ = export_through_cli(origin)
    target = tmp_path / "target"
    notes.Session(target).restore(export_file=str(export_path))
    lines = (target / "session_notes.jsonl").read_bytes().splitlines(keepends=True)
    (target / "session_notes.jsonl").write_bytes(b"".join(lines[:3]))
    before = folder_digest(target)

    def cut_off(source, destination):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(notes.os, "replace", cut_off)
    with pytest.raises(OSError):
        notes.Session(target).restore(export_file=str(export_path))

    assert folder_digest(target) == before  # no part-way append, no temporary file left
    monkeypatch.undo()
    assert notes.Session(target).restore(export_file=str(export_path))["restored"] == 4
    assert (target / "session_notes.jsonl").read_bytes() == b"".join(lines)


def test_a_fast_forward_is_one_rewrite_of_the_log(tmp_path, monkeypatch):
    origin = tmp_path / "origin"
    build_linked_session(origin)
    export_path, _ = export_through_cli(origin)
    target = tmp_path / "target"
    notes.Session(target).restore(export_file=str(export_path))
    full = (target / "session_notes.jsonl").read_bytes()
    (target / "session_notes.jsonl").write_bytes(b"".join(full.splitlines(keepends=True)[:2]))
    replaced = []
    real_replace = notes._replace_log
    monkeypatch.setattr(notes, "_replace_log", lambda folder, chunks: replaced.append(folder) or
                        real_replace(folder, chunks))

    assert notes.Session(target).restore(export_file=str(export_path))["restored"] == 5

    assert replaced == [str(target)] and (target / "session_notes.jsonl").read_bytes() == full


def test_export_here_restore_there_with_the_real_script(tmp_path):
    # The operator exports in one sandbox and uploads the file into the next one's session folder.
    first = tmp_path / "first"
    assert run_notes("append", "--type", "decision", "--text", "SMS is the channel.", folder=first).code == 0
    exported = run_notes("export", folder=first)
    assert exported.code == 0 and exported.receipt["keep"]["file"] == str(first / "session_export.json")
    second = tmp_path / "second"
    second.mkdir()
    shutil.copy(exported.receipt["path"], str(second / "session_export.json"))

    result = run_notes("restore", folder=second)

    assert result.code == 0, result
    assert_no_traceback(result)
    assert result.receipt["export"] == {
        "file": str(second / "session_export.json"), "exported_at": load(second / "session_export.json")["exported_at"],
        "last_note": {"id": "n00001", "type": "decision", "text": "SMS is the channel."}}
    assert (second / "session_notes.jsonl").read_bytes() == (first / "session_notes.jsonl").read_bytes()
    again = run_notes("restore", folder=second)  # the same export again: nothing to add
    assert again.code == 0 and again.receipt["restored"] == 0, again


# ==========================================================================
# restore's answer to an older export of the same session

# --------------------------------------------------------------------------
# 8. restore answers

def test_restoring_an_older_export_of_the_same_session_says_there_is_nothing_to_restore(session, tmp_path):
    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    older = tmp_path / "kept" / "session_export.json"
    assert run_notes("export", "--output", older, folder=session).code == 0
    append(session, "decision", "Decision 4, made in this sandbox only.")
    append(session, "gate", "A new gate, in this sandbox only.")
    before = folder_digest(session)

    error = assert_refused(run_notes("restore", older, folder=session), 2, "already holds", "5 notes",
                           "nothing to restore")

    assert "--dir" not in error and "empty" not in error
    assert folder_digest(session) == before
