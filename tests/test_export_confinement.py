"""export writes nowhere it was not meant to: over MCP only inside the session folder, and on every
entry point never over a file that is not an earlier export of this tool."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from conftest import NOTES, copy_fixture, folder_digest, run_notes


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
        "--output %s exists and is not an export of this tool; an export replaces only an earlier "
        "export. Choose another --output, or remove that file first" % (other / "session_notes.jsonl"))}
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
        "folder should be; give a file name inside the session folder, such as session_export.json (it is "
        "written to %s)" % (folder / "session_export.json"))}


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
        "export over MCP creates at most 20 new files and folders per server run, and this server has made "
        "them; nothing was written. Export to a name written before (such as session_export.json, which is "
        "replaced), or run export on the command line")}
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
        "export over MCP writes only inside the session folder: output %s; give a file name inside the session "
        "folder, such as session_export.json (it is written to %s)" % (problem, folder / "session_export.json"))}
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
