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
