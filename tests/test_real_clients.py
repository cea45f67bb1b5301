"""The MCP server driven by clients nobody here wrote, beside the official SDK: the MCP
Inspector's CLI lists and calls every tool and reads both contracts; Claude Code's CLI adds
the server from the README's own command and reports it connected.

These are the long set: `.ci/run` installs the clients from npm into .ci/node_modules
(gitignored) and runs `pytest -m long tests/test_real_clients.py`. A missing client fails
the test, with the way to install it: a skip would pass without testing anything."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import NOTES, REPO, fenced_blocks, read_records

pytestmark = pytest.mark.long

# The node_modules folder that holds the clients; the variable points elsewhere
# (a copy installed outside the checkout).
CLIENTS_VARIABLE = "SHAPING_NOTES_TEST_CLIENTS"
CLIENTS = Path(os.environ.get(CLIENTS_VARIABLE) or REPO / ".ci" / "node_modules")
INSTALL_HINT = ("install the MCP clients first: run .ci/run, or npm install --prefix .ci "
                "@modelcontextprotocol/inspector @anthropic-ai/claude-code (or set %s to a node_modules "
                "folder that has them)" % CLIENTS_VARIABLE)
NOTES_PLACEHOLDER = "/absolute/path/to/notes.py"
CONTRACTS = ("protocol.md", "note-io.md")


def client(name: str) -> str:
    """The path of a client's command; fail, saying how to install it, when it is missing."""
    path = CLIENTS / ".bin" / name
    if not path.is_file():
        pytest.fail("%s is missing from %s; %s" % (name, CLIENTS, INSTALL_HINT))
    return str(path)


def own_home(tmp_path: Path) -> dict:
    """An environment whose HOME is a fresh folder: a client's settings and caches stay in tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "SHAPING_NOTES_DIR"}
    # No telemetry, update checks or other traffic a test has no use for.
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"),
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", NO_UPDATE_NOTIFIER="1")
    return env


# --------------------------------------------------------------------------
# The MCP Inspector CLI

class Inspector:
    """One `mcp-inspector --cli` run per request, against `python3 -S notes.py --dir FOLDER mcp`."""

    def __init__(self, tmp_path: Path):
        self.command = client("mcp-inspector")
        self.folder = tmp_path / "shaping"
        self.env = own_home(tmp_path)
        self.cwd = tmp_path

    def run(self, method: str, *options: str) -> dict:
        # The server's command comes first and the inspector's options after
        # it, as the inspector's usage shows (its variadic --tool-arg would
        # swallow anything after it).
        argv = [self.command, "--cli", "python3", "-S", str(NOTES), "--dir", str(self.folder), "mcp",
                "--method", method] + list(options)
        completed = subprocess.run(argv, capture_output=True, text=True, cwd=str(self.cwd), env=self.env,
                                   timeout=120)
        assert completed.returncode == 0, (argv, completed.stdout, completed.stderr)
        return json.loads(completed.stdout)


# Arguments for each tool, in the order they are called: append first, so the
# readers have a note to read.  A tool not named here is called with none.
TOOL_ARGUMENTS = {
    "append": ("type=decision", "text=The Inspector appends through the real server."),
    "tail": ("limit=2",),
    "show": ("note_id=n00001",),  # the one argument show requires
    "export": ("format=json",),
    "check": ("file=session_export.json",),  # the file check requires: the export just written
}
# Called after every other tool, so that the counts above see one note.
LAST_TOOL_ARGUMENTS = {
    "append_batch": ('batch=[{"type": "gate", "text": "A gate the Inspector opens."}, '
                     '{"type": "gate", "ref": "@1", "status": "closed", "text": "Closed at once."}]',),
}


def test_inspector_lists_and_calls_every_tool(tmp_path):
    inspector = Inspector(tmp_path)
    listed = [tool["name"] for tool in inspector.run("tools/list")["tools"]]
    assert {"append", "recap", "tail", "summary", "verify", "export"} <= set(listed), listed
    arguments = dict(TOOL_ARGUMENTS, **LAST_TOOL_ARGUMENTS)
    order = ([name for name in TOOL_ARGUMENTS if name in listed]
             + [name for name in listed if name not in arguments]
             + [name for name in LAST_TOOL_ARGUMENTS if name in listed])
    receipts = {}
    for name in order:
        options = ["--tool-name", name]
        for pair in arguments.get(name, ()):
            options += ["--tool-arg", pair]
        result = inspector.run("tools/call", *options)
        assert result["isError"] is False, (name, result)
        receipts[name] = result["structuredContent"]
        assert receipts[name]["ok"] is True, (name, receipts[name])
        assert json.loads(result["content"][0]["text"]) == receipts[name], name
    assert receipts["append"]["note_id"] == "n00001"
    assert receipts["tail"]["count"] == 1 and receipts["summary"]["total"] == 1
    assert receipts["export"]["path"] == str(inspector.folder / "session_export.json")
    assert receipts["show"]["record"]["id"] == "n00001"
    assert [record["text"] for record in read_records(inspector.folder)] == [
        "The Inspector appends through the real server.", "A gate the Inspector opens.", "Closed at once."]


def test_inspector_reads_both_contracts(tmp_path):
    inspector = Inspector(tmp_path)
    listed = {resource["name"]: resource["uri"] for resource in inspector.run("resources/list")["resources"]}
    assert sorted(listed) == sorted(CONTRACTS), listed
    for name, uri in listed.items():
        (content,) = inspector.run("resources/read", "--uri", uri)["contents"]
        assert content["uri"] == uri and content["mimeType"] == "text/markdown"
        assert content["text"] == (REPO / name).read_text("utf-8"), name
    assert not inspector.folder.exists()  # reading the contracts starts no session


# --------------------------------------------------------------------------
# Claude Code's CLI, with the README's command

def readme_claude_code_command() -> str:
    """The `claude mcp add` line of the README's Claude Code section, as written there."""
    readme = (REPO / "README.md").read_text("utf-8")
    section = readme.split("\n### Claude Code\n", 1)[1].split("\n### ", 1)[0]
    lines = [line for language, body in fenced_blocks(section) if language == "sh"
             for line in body.splitlines() if line.startswith("claude mcp add ")]
    assert len(lines) == 1, "the Claude Code section should show one `claude mcp add` command: %r" % lines
    return lines[0]


def test_claude_code_adds_the_server_from_the_readme_and_reports_it_connected(tmp_path):
    claude = client("claude")
    command = readme_claude_code_command()
    assert NOTES_PLACEHOLDER in command, command
    project = tmp_path / "project"
    project.mkdir()
    env = own_home(tmp_path)
    env["PATH"] = os.pathsep.join([os.path.dirname(claude), env.get("PATH", "")])
    # The command runs in a shell, as a user pastes it: the shell expands $PWD.
    added = subprocess.run(["sh", "-c", command.replace(NOTES_PLACEHOLDER, shlex.quote(str(NOTES)))],
                           capture_output=True, text=True, cwd=str(project), env=env, timeout=120)
    assert added.returncode == 0, added
    listed = subprocess.run([claude, "mcp", "list"], capture_output=True, text=True, cwd=str(project), env=env,
                            timeout=120)
    assert listed.returncode == 0, listed
    shown = "shaping: python3 -S %s --dir %s mcp" % (NOTES, project / ".shaping")
    lines = [line for line in listed.stdout.splitlines() if line.startswith("shaping:")]
    assert len(lines) == 1 and lines[0].startswith(shown), listed.stdout
    assert re.search(r"\bConnected\b", lines[0]) and "Failed" not in lines[0], lines[0]
