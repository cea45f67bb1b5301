"""Every host setup the README shows: each configuration parses, names the documented
server, and works when started as the host would start it; each sandbox recipe
(ChatGPT, Claude.ai) and the CLAUDE.md / AGENTS.md snippet runs as written."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import NOTES, REPO, fenced_blocks, folder_digest, notes

README = (REPO / "README.md").read_text("utf-8")
NOTES_PLACEHOLDER = "/absolute/path/to/notes.py"
FOLDER_PLACEHOLDER = "/absolute/path/to/shaping"
# The host, the README section that sets it up, and the kind of block its configuration is in.
HOSTS = {
    "Claude Desktop": "json",
    "Claude Code": "sh",
    "Cursor": "json",
    "VS Code": "json",
    "Codex": "toml",
}
# The key each JSON host keeps its servers under.
SERVER_KEYS = {"Claude Desktop": "mcpServers", "Cursor": "mcpServers", "VS Code": "servers"}


# --------------------------------------------------------------------------
# Reading the README: sections, fenced blocks, inline commands



def section(title: str) -> str:
    """The README's text under a heading (## or ###) up to the next heading outside a fence."""
    lines, inside, fenced = [], False, False
    for line in README.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{2,3} ", line):
            if inside:
                break
            inside = line.split(" ", 1)[1].strip() == title
            continue
        if inside:
            lines.append(line)
    assert lines, "README.md has no section %r" % title
    return "\n".join(lines)


def inline_commands(text: str, prefix: str) -> list:
    """Commands in `backticks` that start with prefix and name a notes.py command."""
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        if span.startswith(prefix) and set(shlex.split(span)) & set(notes._COMMANDS):
            found.append(span)
    return found


def parse_toml(body: str) -> dict:
    """TOML through the standard library (3.11 and later), else through tomli, which pytest itself
    depends on before 3.11: the Codex configuration is checked on every Python, never skipped."""
    try:
        import tomllib
    except ImportError:
        import tomli as tomllib
    return tomllib.loads(body)


def host_servers(host: str) -> list:
    """(command, args, settings) of each server the host's section configures."""
    kind, text = HOSTS[host], section(host)
    if kind == "sh":
        servers = []
        for line in text.splitlines():
            if line.startswith("claude mcp add "):
                words = shlex.split(line)
                assert words[3] == "shaping" and "--" in words, line
                rest = words[words.index("--") + 1:]
                servers.append((rest[0], rest[1:], {}))
        return servers
    bodies = [body for language, body in fenced_blocks(text) if language == kind]
    if kind == "toml":
        tables = [parse_toml(body)["mcp_servers"] for body in bodies]
    else:
        tables = [json.loads(body)[SERVER_KEYS[host]] for body in bodies]
    return [(table["shaping"]["command"], table["shaping"]["args"], table["shaping"])
            for table in tables if list(table) == ["shaping"]]


def assert_documented_server(command, args) -> None:
    """The server the README documents: python3 -S notes.py --dir FOLDER mcp, nothing else."""
    assert command == "python3", command
    assert args[:3] == ["-S", NOTES_PLACEHOLDER, "--dir"] and args[4:] == ["mcp"], args
    assert re.match(r"(/|\$\{workspaceFolder\}/|\$PWD/)", args[3]), "the folder must be absolute: %r" % args[3]


# --------------------------------------------------------------------------
# Each configuration block says what the README says

@pytest.mark.parametrize("host", list(HOSTS))
def test_each_host_section_configures_the_documented_server(host):
    servers = host_servers(host)
    assert len(servers) == 1, "%s: expected one configuration, found %r" % (host, servers)
    command, args, settings = servers[0]
    assert_documented_server(command, args)
    if host == "VS Code":
        assert settings["type"] == "stdio"
    text = section(host)
    assert "--dir" in text and "notes" in text.lower()


def test_every_server_config_block_in_the_readme_is_the_documented_one():
    """Any JSON or TOML block holding MCP servers, wherever it is in the README."""
    seen = 0
    for language, body in fenced_blocks(README):
        if language == "json":
            value = json.loads(body)
            tables = [value[key] for key in ("mcpServers", "servers") if isinstance(value, dict) and key in value]
        elif language == "toml":
            tables = [parse_toml(body).get("mcp_servers", {})]
        else:
            continue
        for table in tables:
            for name, server in table.items():
                assert name == "shaping", name
                assert_documented_server(server["command"], server["args"])
                seen += 1
    assert seen >= 4  # Claude Desktop, Cursor, VS Code, Codex


def test_quick_start_keeps_exactly_two_commands():
    text = section("Quick start")
    commands = [line for language, body in fenced_blocks(text) if language != "json"
                for line in body.splitlines() if line.strip()]
    assert len(commands) == 2, commands


# --------------------------------------------------------------------------
# Each configuration starts a server that takes a note where the README says

def talk_raw(command: list, cwd) -> dict:
    """Speak the stdio handshake as a host does; the answers by request id."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test_hosts", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "append", "arguments": {"type": "decision", "text": "Set up as the README says."}}},
    ]
    completed = subprocess.run(command, input="".join(json.dumps(r) + "\n" for r in requests).encode(),
                               cwd=str(cwd), capture_output=True, timeout=60)
    assert completed.returncode == 0, completed
    answers = {}
    for line in completed.stdout.decode("utf-8").splitlines():
        answer = json.loads(line)
        answers[answer["id"]] = answer["result"]
    return answers


def append_through_sdk(command: list, cwd):
    """An append through the official SDK client (a test dependency on Python 3.10 and later)."""
    from mcp import Client, StdioServerParameters

    async def session():
        parameters = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd))
        async with Client(parameters, mode="auto") as client:
            return await client.call_tool("append", {"type": "gate", "text": "Host runtime is open."})
    return asyncio.run(session())


def host_server(host: str, tmp_path) -> tuple:
    """The server the host's configuration starts, as the host would start it: (app, command, folder, cwd).

    app holds notes.py and the contracts; cwd is the folder of the host's own choosing."""
    app = tmp_path / "app"
    app.mkdir()
    for name in ("notes.py", "protocol.md", "note-io.md"):
        shutil.copy(str(REPO / name), str(app / name))
    places = {NOTES_PLACEHOLDER: str(app / "notes.py"), FOLDER_PLACEHOLDER: str(tmp_path / "shaping"),
              "${workspaceFolder}": str(tmp_path / "workspace"), "$PWD": str(tmp_path / "project")}
    ((_, args, _),) = host_servers(host)
    filled = [sys.executable] + list(args)
    for placeholder, real in places.items():
        filled = [arg.replace(placeholder, real) for arg in filled]
    elsewhere = tmp_path / "host-cwd"  # a host starts its servers from a folder of its own
    elsewhere.mkdir()
    return app, filled, filled[filled.index("--dir") + 1], elsewhere


@pytest.mark.parametrize("host", list(HOSTS))
def test_each_host_config_starts_a_server_that_keeps_the_note_in_its_folder(host, tmp_path):
    app, command, folder, elsewhere = host_server(host, tmp_path)
    before = folder_digest(app)
    answers = talk_raw(command, elsewhere)
    assert answers[1]["protocolVersion"] == "2025-06-18"
    assert {"append", "recap", "tail", "summary", "verify", "export"} <= {t["name"] for t in answers[2]["tools"]}
    assert answers[3]["isError"] is False
    # The first note starts the session, and the receipt says so (issue 30, point 2).
    assert answers[3]["structuredContent"] == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1,
                                              "path": folder + "/session_notes.jsonl", "created": True}
    assert folder_digest(app) == before and list(elsewhere.iterdir()) == []


@pytest.mark.mcp_sdk
@pytest.mark.parametrize("host", list(HOSTS))
def test_each_host_config_serves_the_official_sdk_client(host, tmp_path):
    app, command, folder, elsewhere = host_server(host, tmp_path)
    before = folder_digest(app)
    via_sdk = append_through_sdk(command, elsewhere)
    assert via_sdk.is_error is False
    assert via_sdk.structured_content == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1,
                                          "path": folder + "/session_notes.jsonl", "created": True}
    assert folder_digest(app) == before and list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------
# The sandbox recipes run as written, a restore in a new sandbox included

def run_mapped(command: str, mounts: dict, cwd) -> dict:
    for virtual, real in mounts.items():
        command = command.replace(virtual, str(real))
    words = shlex.split(command)
    assert words[:2] == ["python3", "-S"], command
    completed = subprocess.run([sys.executable] + words[1:], cwd=str(cwd), capture_output=True, timeout=60)
    assert completed.returncode == 0, (command, completed)
    return json.loads(completed.stdout)


def sandbox(root, mounts: dict, notes_home: str) -> dict:
    """A fresh sandbox: each mount a folder under root, the tool and its contracts in notes_home."""
    real = {virtual: root / virtual.strip("/").replace("/", "_") for virtual in mounts}
    for virtual, folder in real.items():
        folder.mkdir(parents=True)
        for sub in mounts[virtual]:
            (folder / sub).mkdir()
    home = real[notes_home]
    for name in ("notes.py", "protocol.md", "note-io.md"):
        shutil.copy(str(REPO / name), str(home / name))
    return real


def replay_recipe(tmp_path, title, prefix, mounts, notes_home):
    """Run the section's commands in one sandbox, then its restore in a new one; return both sandboxes."""
    commands = inline_commands(section(title), prefix)
    restores = [command for command in commands if "restore" in shlex.split(command)]
    assert len(restores) == 1 and len(commands) >= 3, commands
    first = sandbox(tmp_path / "first", mounts, notes_home)
    home_before = folder_digest(first[notes_home])
    export = None
    for command in commands:
        if command not in restores:
            receipt = run_mapped(command, first, tmp_path)
            export = receipt["path"] if receipt["command"] == "export" else export
    assert export is not None, "the recipe never exports"
    second = sandbox(tmp_path / "second", mounts, notes_home)
    source = shlex.split(restores[0])[-1]
    if source == "restore":  # no path: restore takes the export uploaded into the session folder (ChatGPT's)
        source = notes_home + "/session_export.json"
    for virtual, real in second.items():
        source = source.replace(virtual, str(real))
    shutil.copy(export, source)  # the operator downloads the export and uploads it again
    receipt = run_mapped(restores[0], second, tmp_path)
    assert receipt["restored"] == len([command for command in commands if " append " in command])
    return first, second, home_before, export


def test_claude_ai_recipe_keeps_notes_in_outputs_and_restores_from_uploads(tmp_path):
    mounts = {"/mnt/project": [], "/mnt/user-data": ["uploads", "outputs"]}
    commands = inline_commands(section("Use with Claude.ai"), "python3 -S /mnt/project/notes.py")
    for command in commands:
        words = shlex.split(command)
        assert words[3:5] == ["--dir", "/mnt/user-data/outputs/shaping"], command
        if "restore" in words:
            assert words[-1].startswith("/mnt/user-data/uploads/"), command
    assert "/tmp" not in " ".join(commands)
    first, second, project_before, export = replay_recipe(
        tmp_path, "Use with Claude.ai", "python3 -S /mnt/project/notes.py", mounts, "/mnt/project")
    outputs = first["/mnt/user-data"] / "outputs"
    assert export.startswith(str(outputs) + "/"), "the export must be downloadable: %s" % export
    assert folder_digest(first["/mnt/project"]) == project_before  # read-only there: nothing written
    assert list((first["/mnt/user-data"] / "uploads").iterdir()) == []
    log = "shaping/session_notes.jsonl"
    assert (second["/mnt/user-data"] / "outputs" / log).read_bytes() == (outputs / log).read_bytes()


def test_chatgpt_recipe_keeps_notes_beside_notes_py_and_restores(tmp_path):
    first, second, _, export = replay_recipe(
        tmp_path, "Use with ChatGPT Projects", "python3 -S /mnt/data/notes.py", {"/mnt/data": []}, "/mnt/data")
    data = first["/mnt/data"]
    assert export == str(data / "session_export.json")
    assert (second["/mnt/data"] / "session_notes.jsonl").read_bytes() == (data / "session_notes.jsonl").read_bytes()


def test_agent_snippet_runs_from_the_project_folder(tmp_path):
    text = section("Agent hosts that run commands")
    (snippet,) = [body for language, body in fenced_blocks(text) if language == "markdown"]
    assert "protocol.md" in snippet and "note-io.md" in snippet
    commands = inline_commands(snippet, "python3 -S " + NOTES_PLACEHOLDER)
    assert [shlex.split(c)[5] for c in commands] == ["append", "recap", "export"]
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    for command in commands:
        run_mapped(command, {NOTES_PLACEHOLDER: tmp_path / "notes.py"}, project)
    assert sorted(path.name for path in (project / ".shaping").iterdir()) == [
        "session_export.json", "session_meta.json", "session_notes.jsonl", "session_notes.lock"]
