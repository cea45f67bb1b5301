"""notes.py mcp: the MCP server over stdio, driven raw and through the official SDK; tools shaped for
MCP and bounded work per message."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import (LOG, NOTES, REPO, SESSION_ID, append, appended, assert_no_traceback, assert_refused, code_blocks,
                      copy_fixture, folder_digest, line_of, make_record, read_records, recap, recap_text,
                      run_main, run_notes, run_script, v0_checksum, write_session)


# ==========================================================================
# The server over stdio, raw and through the SDK

STATELESS = "2026-07-28"
HANDSHAKE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
TOOLS = ["append", "append_batch", "recap", "tail", "show", "summary", "verify", "export", "check", "sessions",
         "restore"]


# --------------------------------------------------------------------------
# Local helpers

def server_command(folder, python=None, script=None) -> list:
    return [python or sys.executable, "-S", str(script or NOTES), "--dir", str(folder), "mcp"]


def request(request_id, method, params=None, stateless=False) -> dict:
    """One JSON-RPC request; stateless ones carry the protocol version in _meta, as the SDK sends them."""
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if stateless:
        params = dict(params or {})
        params["_meta"] = {VERSION_KEY: STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
    if params is not None:
        message["params"] = params
    return message


def call(request_id, tool, arguments, stateless=False) -> dict:
    return request(request_id, "tools/call", {"name": tool, "arguments": arguments}, stateless)


def exchange(folder, *messages, python=None, script=None, timeout=60, extra=(), process=False):
    """Send each message (a dict, or raw bytes) as one line, close stdin; return (code, answers, stderr).

    The server runs in this process (notes.main), unless process is true or python= or script= is
    given: then it is `python -S notes.py ... mcp` in a subprocess.  extra: words after mcp
    (--session NAME, --restore-from DIR).  Every line the server printed must be a JSON-RPC
    response: stdout carries nothing else."""
    lines = [message if isinstance(message, bytes) else json.dumps(message).encode("utf-8")
             for message in messages]
    served = ["mcp"] + [str(word) for word in extra]
    data = b"".join(line + b"\n" for line in lines)
    if process or python is not None or script is not None:
        result = run_script(*served, folder=folder, python=python, script=script, input=data, timeout=timeout)
    else:
        result = run_main(["--dir", str(folder)] + served, input=data)
    answers = [assert_response(line) for line in result.stdout.splitlines()]
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, answers, result.stderr


def assert_response(line: str):
    """A line of the server's stdout: a JSON-RPC response (or a batch of them)."""
    value = json.loads(line)
    for response in value if isinstance(value, list) else [value]:
        assert response["jsonrpc"] == "2.0", line
        assert set(response) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), line
    return value


def only(folder, message, **options) -> dict:
    """The one answer to one message, from a server that then exits 0."""
    code, answers, _ = exchange(folder, message, **options)
    assert code == 0 and len(answers) == 1, answers
    return answers[0]


def error_of(answer, request_id, code) -> dict:
    assert answer["id"] == request_id and "result" not in answer, answer
    assert answer["error"]["code"] == code and answer["error"]["message"], answer
    return answer["error"]


def tool_result(answer, request_id=None) -> dict:
    result = answer["result"]
    if request_id is not None:
        assert answer["id"] == request_id
    assert result["content"][0]["type"] == "text", result
    # The text is the receipt the CLI prints; structuredContent is the same object.
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"], result
    return result


# SPEC section 5: a refusal over MCP is the CLI's text, naming the tool's
# argument where the CLI names its flag, and the tool's schema where the CLI
# points at its --help.  Written out here, flag by flag, rather than taken
# from notes.py.
TOOL_ARGUMENTS = {
    "append": {"--type": "type", "--text": "text", "--effect": "effect", "--ref": "ref", "--status": "status",
               "--provenance": "provenance", "--evidence": "evidence", "--about": "about", "--by": "by"},
    "tail": {"--limit": "limit", "--type": "types", "--since": "since", "--until": "until", "--grep": "grep",
             "--compact": "compact"},
    "recap": {"--limit": "limit", "--format": "format", "--max-bytes": "max_bytes"},
    "export": {"--output": "output", "--format": "format"},
}


def in_tool_words(receipt: dict, tool: str) -> dict:
    """The CLI's refusal receipt as the tool gives it."""
    if receipt.get("ok") is not False or "error" not in receipt:
        return receipt
    error = re.sub(r"\(see: .* %s --help\)" % tool, "(see the input schema of the %s tool in tools/list)" % tool,
                   receipt["error"])
    for flag, name in TOOL_ARGUMENTS.get(tool, {}).items():
        error = re.sub(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), name, error)
    return dict(receipt, error=error)


# --------------------------------------------------------------------------
# Framing: stdout carries only JSON-RPC; errors of the protocol

def test_end_of_input_exits_0_and_prints_nothing(tmp_path):
    code, answers, _ = exchange(tmp_path / "s")
    assert (code, answers) == (0, [])
    assert not os.path.lexists(str(tmp_path / "s"))  # a server that was asked nothing wrote nothing


def test_malformed_frame_then_good_request(tmp_path):
    folder = tmp_path / "s"
    code, answers, stderr = exchange(folder, b"this is not json", b'{"jsonrpc": "2.0", "id": 1,',
                                     b"\xff\xfe not utf-8", request(7, "ping"))
    assert code == 0
    for answer in answers[:3]:
        error_of(answer, None, -32700)
    assert answers[3] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert "-32700" in stderr  # said on stderr too, where a host keeps the server's log


@pytest.mark.parametrize("message, request_id", [
    (b"42", None), (b'"ping"', None), (b"[]", None),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', 1), (b'{"id": 1, "method": "ping"}', 1),
    (b'{"jsonrpc": "2.0", "id": 1, "method": 3}', 1), (b'{"jsonrpc": "2.0", "id": 1}', 1),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', None),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', None),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', None),
], ids=["number", "string", "empty-batch", "old-jsonrpc", "no-jsonrpc", "method-not-string", "no-method",
        "null-id", "bool-id", "float-id", "list-id"])
def test_invalid_request(tmp_path, message, request_id):
    error_of(only(tmp_path / "s", message), request_id, -32600)


def test_unknown_method(tmp_path):
    for stateless in (False, True):
        error = error_of(only(tmp_path / "s", request("a", "prompts/list", stateless=stateless)), "a", -32601)
        assert "prompts/list" in error["message"]


@pytest.mark.parametrize("params", [
    {"name": "delete_everything", "arguments": {}},
    {"name": None, "arguments": {}},
    {"arguments": {}},
    {"name": "append", "arguments": "type=decision"},
    {"name": "append", "arguments": ["decision", "text"]},
], ids=["unknown-tool", "null-name", "no-name", "arguments-string", "arguments-list"])
def test_unknown_tool_or_arguments_not_an_object(tmp_path, params):
    folder = tmp_path / "s"
    run_notes("init", folder=folder)
    before = folder_digest(folder)
    for stateless in (False, True):
        error_of(only(folder, request(3, "tools/call", params, stateless)), 3, -32602)
    assert folder_digest(folder) == before


def test_params_not_an_object(tmp_path):
    error_of(only(tmp_path / "s", request(1, "tools/list", ["x"])), 1, -32602)


def test_notifications_and_responses_get_no_answer(tmp_path):
    code, answers, _ = exchange(
        tmp_path / "s",
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "id": 9, "result": {}},
        {"jsonrpc": "2.0", "id": 9, "error": {"code": 1, "message": "x"}},
        b"", b"   ")
    assert (code, answers) == (0, [])


def test_a_batch_is_refused_whole_and_the_server_goes_on(tmp_path):
    # Batches are not served (2025-06-18 removed them; the SDK never sends one):
    # one error for the whole array, none of its requests run, the next line is answered.
    code, answers, _ = exchange(tmp_path / "s", json.dumps([
        request(1, "ping"), {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(2, "append", {"type": "decision", "text": "Not run."}),
    ]).encode(), request(3, "ping"))
    assert code == 0 and len(answers) == 2
    assert "one request per line" in error_of(answers[0], None, -32600)["message"]
    assert answers[1] == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert not os.path.lexists(str(tmp_path / "s"))


def test_ids_come_back_as_sent(tmp_path):
    _, answers, _ = exchange(tmp_path / "s", request("req-é", "ping"), request(2 ** 70, "ping"), request(0, "ping"))
    assert [answer["id"] for answer in answers] == ["req-é", 2 ** 70, 0]


# --------------------------------------------------------------------------
# The handshake revisions and the stateless one

@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS + ["2023-01-01", STATELESS, None])
def test_initialize_answers_the_version_or_the_newest(tmp_path, version):
    params = {"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    if version is not None:
        params["protocolVersion"] = version
    result = only(tmp_path / "s", request(1, "initialize", params))["result"]
    assert result["protocolVersion"] == (version if version in HANDSHAKE_VERSIONS else "2025-11-25")
    assert result["serverInfo"]["name"] == "shaping-notes" and result["serverInfo"]["version"]
    assert result["capabilities"] == {"tools": {}, "resources": {}}
    assert "append" in result["instructions"] and "note-io.md" in result["instructions"]
    assert len(result["instructions"].splitlines()) <= 6
    assert "resultType" not in result


def test_handshake_session(tmp_path):
    # The stdio server as a client starts it: python -S notes.py mcp, in a process of its own.
    folder = tmp_path / "s"
    code, answers, _ = exchange(
        folder,
        request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request(2, "ping"),
        request(3, "tools/list"),
        call(4, "append", {"type": "decision", "text": "Handshake era."}), process=True)
    assert code == 0 and [answer["id"] for answer in answers] == [1, 2, 3, 4]
    assert answers[1]["result"] == {}
    assert [tool["name"] for tool in answers[2]["result"]["tools"]] == TOOLS
    # Results of the handshake era carry none of the stateless revision's fields.
    for answer in answers[2:]:
        assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(answer["result"]), answer
    assert tool_result(answers[3])["structuredContent"]["note_id"] == "n00001"


def test_server_discover(tmp_path):
    for params in (request(1, "server/discover", stateless=True), request(1, "server/discover")):
        result = only(tmp_path / "s", params)["result"]
        assert result["supportedVersions"] == [STATELESS]
        assert result["capabilities"] == {"tools": {}, "resources": {}}
        assert "append" in result["instructions"]
        assert result["resultType"] == "complete"
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] > 0 and result["cacheScope"] == "public"
        assert result["_meta"][SERVER_INFO_KEY]["name"] == "shaping-notes"


def test_stateless_requests_need_no_handshake(tmp_path):
    folder = tmp_path / "s"
    code, answers, _ = exchange(folder, request(1, "tools/list", stateless=True),
                                call(2, "append", {"type": "gate", "text": "Host is open."}, stateless=True),
                                request(3, "resources/list", stateless=True))
    assert code == 0
    listing, appended, resources = (answer["result"] for answer in answers)
    for result in (listing, resources):  # cacheable results carry the cache hints
        assert result["resultType"] == "complete" and result["ttlMs"] > 0 and result["cacheScope"] == "public"
    assert appended["resultType"] == "complete" and "ttlMs" not in appended and "cacheScope" not in appended
    assert appended["_meta"][SERVER_INFO_KEY]["name"] == "shaping-notes"
    assert tool_result(answers[1])["structuredContent"]["seq"] == 1
    assert read_records(folder)[0]["text"] == "Host is open."


@pytest.mark.parametrize("version", ["2025-11-25", "2099-01-01", "draft"])
def test_unsupported_stateless_version(tmp_path, version):
    folder = tmp_path / "s"
    for method in ("server/discover", "tools/call"):
        message = request(5, method, {"name": "append", "arguments": {"type": "gate", "text": "x"},
                                      "_meta": {VERSION_KEY: version}})
        error = error_of(only(folder, message), 5, -32022)
        assert error["data"] == {"supported": [STATELESS], "requested": version}
    assert not os.path.lexists(str(folder))
    error_of(only(folder, request(5, "tools/list", {"_meta": {VERSION_KEY: 20260728}})), 5, -32602)


# --------------------------------------------------------------------------
# Tools: schemas, the same receipts and refusals as the CLI

def tools_by_name(folder) -> dict:
    return {tool["name"]: tool for tool in only(folder, request(1, "tools/list"))["result"]["tools"]}


def test_tool_schemas_and_annotations(tmp_path):
    tools = tools_by_name(tmp_path / "s")
    assert list(tools) == TOOLS
    types = ["mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"]
    append = tools["append"]["inputSchema"]
    assert append["type"] == "object" and append["required"] == ["type", "text"]
    assert append["additionalProperties"] is False
    assert append["properties"]["type"]["enum"] == types
    assert append["properties"]["status"]["enum"] == ["open", "deferred", "closed"]
    assert {"type", "text", "effect", "ref", "status"} <= set(append["properties"])
    tail = tools["tail"]["inputSchema"]["properties"]
    assert set(tail) == {"limit", "types", "since", "until", "grep", "compact", "session"}
    assert tail["types"] == {"type": "array", "items": {"type": "string", "enum": types},
                             "description": tail["types"]["description"]}
    assert tail["limit"]["type"] == "integer" and tail["limit"]["default"] == 5
    assert set(tools["recap"]["inputSchema"]["properties"]) == {"limit", "format", "max_bytes", "session"}
    assert set(tools["export"]["inputSchema"]["properties"]) == {"output", "format", "session"}
    assert tools["export"]["inputSchema"]["properties"]["format"]["enum"] == ["json", "md"]
    for name in ("summary", "verify"):
        assert set(tools[name]["inputSchema"]["properties"]) == {"session"}
    assert tools["sessions"]["inputSchema"]["properties"] == {}  # it lists them all
    restore = tools["restore"]["inputSchema"]
    assert set(restore["properties"]) == {"export_file", "accept_damaged", "set_aside", "session"}
    assert "required" not in restore  # without export_file: the export in the session folder, as the command
    assert restore["properties"]["accept_damaged"]["type"] == "boolean"
    for name, tool in tools.items():
        assert len(tool["description"].split()) >= 5, tool
        if name != "sessions":
            assert tool["inputSchema"]["properties"]["session"]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
        hints = tool["annotations"]
        assert hints["readOnlyHint"] is (name in ("recap", "tail", "show", "summary", "verify", "check",
                                                  "sessions")), tool
        assert hints["destructiveHint"] is (name == "export"), tool  # export may replace its output file
        assert hints["openWorldHint"] is False
    assert tools["append"]["annotations"]["idempotentHint"] is True  # a retry is answered as a duplicate


def test_provenance_and_evidence_in_the_schema(tmp_path):
    properties = tools_by_name(tmp_path / "s")["append"]["inputSchema"]["properties"]
    assert properties["provenance"]["enum"] == ["op", "model", "shared"]
    assert properties["evidence"]["enum"] == ["declared", "inferred", "observed", "validated"]


def test_provenance_and_evidence_pass_through(tmp_path):
    folder = tmp_path / "s"
    code, answers, _ = exchange(
        folder, call(1, "append", {"type": "decision", "text": "With provenance.", "provenance": "op",
                                   "evidence": "declared"}),
        call(2, "append", {"type": "decision", "text": "Without them."}),
        call(3, "append", {"type": "decision", "text": "Bad one.", "provenance": "someone"}))
    assert code == 0
    first, second = read_records(folder)
    assert (first["provenance"], first["evidence"]) == ("op", "declared")
    assert "provenance" not in second and "evidence" not in second
    refused = run_notes("append", "--type", "decision", "--text", "Bad one.", "--provenance", "someone",
                        folder=tmp_path / "cli")
    assert tool_result(answers[2])["structuredContent"] == in_tool_words(refused.receipt, "append")


def test_append_receipt_and_record_as_the_cli_writes_them(tmp_path):
    folder, cli = tmp_path / "mcp", tmp_path / "cli"
    arguments = {"type": "gate", "text": "  -Host runtime is undecided.  ", "effect": "Blocks the spec."}
    code, answers, _ = exchange(folder, call(1, "append", arguments), call(2, "append", arguments))
    cli_receipts = [run_notes("append", "--type", "gate", "--text=" + arguments["text"], "--effect",
                              arguments["effect"], folder=cli).receipt for _ in range(2)]
    assert code == 0
    for answer, cli_receipt in zip(answers, cli_receipts):
        result = tool_result(answer)
        assert result["isError"] is False
        assert result["structuredContent"] == dict(cli_receipt, path=str(folder.resolve() / "session_notes.jsonl"))
    assert answers[1]["result"]["structuredContent"]["duplicate"] is True  # the retry wrote nothing
    mine, theirs = read_records(folder), read_records(cli)
    assert len(mine) == 1 and mine[0]["text"] == "-Host runtime is undecided."
    strip = ("ts", "session_id", "checksum")
    assert [{k: v for k, v in r.items() if k not in strip} for r in mine] == \
        [{k: v for k, v in r.items() if k not in strip} for r in theirs]


SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"
REFUSALS = {
    "type-outside-eight": {"type": "idea", "text": "x"},
    "missing-text": {"type": "decision"},
    "missing-type": {"text": "No type."},
    "blank-text": {"type": "decision", "text": "   "},
    "credential": {"type": "decision", "text": "key " + SECRET},
    "text-too-long": {"type": "decision", "text": "x" * 2001},
    "effect-too-long": {"type": "decision", "text": "x", "effect": "y" * 1001},
    "control-character": {"type": "decision", "text": "bell \x07"},
    "malformed-ref": {"type": "decision", "text": "x", "ref": "12"},
    "ref-to-nothing": {"type": "decision", "text": "x", "ref": "n00099"},
    "gate-ref-without-status": {"type": "gate", "text": "x", "ref": "n00001"},
    "status-on-decision": {"type": "decision", "text": "x", "status": "open"},
    "unknown-status": {"type": "gate", "text": "x", "status": "maybe"},
    "new-gate-closed": {"type": "gate", "text": "x", "status": "closed"},
}


@pytest.mark.parametrize("arguments", list(REFUSALS.values()), ids=list(REFUSALS))
def test_refusal_is_a_tool_error_with_the_cli_text(tmp_path, arguments):
    folder, cli = tmp_path / "mcp", tmp_path / "cli"
    for place in (folder, cli):
        run_notes("append", "--type", "decision", "--text", "The first note.", folder=place)
    before = folder_digest(folder)
    flags = [word for name, value in arguments.items() for word in ("--" + name, value)]
    refused = run_notes("append", *flags, folder=cli)
    assert refused.code == 2
    for stateless in (False, True):
        code, answers, stderr = exchange(folder, call(1, "append", arguments, stateless))
        result = tool_result(answers[0], 1)
        assert code == 0 and result["isError"] is True
        assert result["structuredContent"] == in_tool_words(refused.receipt, "append")
        assert folder_digest(folder) == before
        assert SECRET not in json.dumps(answers) + stderr


@pytest.mark.parametrize("arguments, words", [
    ({"type": "decision", "text": 5}, ["'text'", "a string"]),
    ({"type": "decision", "text": ["a", "b"]}, ["'text'", "a string"]),
    # An unknown argument is named by its place, never by its name (a client wrote it).
    ({"type": "decision", "text": "x", "dir": "/tmp"}, ["argument 3 of this call", "type, text, effect"]),
    ({"type": "decision", "text": "x", "seq": 4}, ["argument 3 of this call"]),
], ids=["number-text", "list-text", "dir", "seq"])
def test_arguments_no_flag_could_carry_are_refused(tmp_path, arguments, words):
    folder = tmp_path / "s"
    result = tool_result(only(folder, call(1, "append", arguments)))
    assert result["isError"] is True and result["structuredContent"]["ok"] is False
    for word in words:
        assert word in result["structuredContent"]["error"]
    assert not os.path.lexists(str(folder))


def test_readers_give_the_cli_receipts(tmp_path):
    folder = tmp_path / "s"
    for arguments in (["--type", "gate", "--text", "Host is open."], ["--type", "decision", "--text", "SMS only."],
                      ["--type", "gate", "--ref", "n00001", "--status", "deferred", "--text", "Later."],
                      ["--type", "discard", "--text", "A bot."]):
        run_notes("append", *arguments, folder=folder)
    cases = [("recap", {"limit": 1}, ["recap", "--limit", "1"]), ("recap", {}, ["recap"]),
             ("summary", {}, ["summary"]), ("verify", {}, ["verify"]),
             ("tail", {"limit": 2, "types": ["gate", "discard"], "since": "2020-01-01"},
              ["tail", "--limit", "2", "--type", "gate", "--type", "discard", "--since", "2020-01-01"]),
             ("tail", {"types": "decision"}, ["tail", "--type", "decision"]),
             ("tail", {"limit": 0}, ["tail", "--limit", "0"]),
             ("tail", {"until": "yesterday"}, ["tail", "--until", "yesterday"]),
             ("tail", {"limit": "3"}, ["tail", "--limit", "3"])]
    before = folder_digest(folder)
    code, answers, _ = exchange(folder, *[call(number, tool, arguments)
                                          for number, (tool, arguments, _) in enumerate(cases)])
    assert code == 0 and folder_digest(folder) == before
    for answer, (tool, arguments, flags) in zip(answers, cases):
        expected = run_notes(*flags, folder=folder)
        result = tool_result(answer)
        assert result["structuredContent"] == in_tool_words(expected.receipt, tool), (tool, arguments)
        assert result["isError"] is (expected.code == 2), (tool, arguments)


def test_verify_of_a_damaged_log_is_a_result_not_an_error(tmp_path):
    folder = copy_fixture("tampered", tmp_path / "s")
    result = tool_result(only(folder, call(1, "verify", {})))
    expected = run_notes("verify", folder=folder)
    assert expected.code == 3 and result["structuredContent"] == expected.receipt
    assert result["isError"] is False and result["structuredContent"]["ok"] is False


def test_export_writes_what_the_cli_writes(tmp_path):
    folder = tmp_path / "s"
    run_notes("append", "--type", "decision", "--text", "Exported.", folder=folder)
    output = folder / "out" / "backup.json"  # over MCP, a relative output lands in the session folder
    code, answers, _ = exchange(folder, call(1, "export", {"output": "out/backup.json"}),
                                call(2, "export", {"format": "md"}), call(3, "export", {"format": "pdf"}))
    assert code == 0
    # Over MCP the host is mcp: the operator keeps the file where the server wrote it.
    assert tool_result(answers[0])["structuredContent"] == {
        "ok": True, "command": "export", "record_count": 1, "path": str(output),
        "keep": {"file": str(output), "host": "mcp",
                 "how": "Saved at this path on the computer that runs the MCP server."}}
    assert json.loads(output.read_text("utf-8"))["records"] == read_records(folder)
    assert tool_result(answers[1])["structuredContent"]["path"] == str(folder / "session_export.md")
    refused = run_notes("export", "--format", "pdf", folder=folder)
    assert tool_result(answers[2])["isError"] is True
    assert answers[2]["result"]["structuredContent"] == in_tool_words(refused.receipt, "export")


def test_no_session_is_a_tool_error(tmp_path):
    folder = tmp_path / "empty"
    result = tool_result(only(folder, call(1, "recap", {})))
    assert result["isError"] is True
    assert result["structuredContent"] == run_notes("recap", folder=folder).receipt
    assert not os.path.lexists(str(folder))


# --------------------------------------------------------------------------
# The contracts as resources

def test_contracts_as_resources(tmp_path):
    folder = tmp_path / "s"
    code, answers, _ = exchange(folder, request(1, "resources/list"))
    resources = answers[0]["result"]["resources"]
    assert [resource["name"] for resource in resources] == ["protocol.md", "note-io.md"]
    reads = [request(2 + number, "resources/read", {"uri": resource["uri"]}, stateless=bool(number))
             for number, resource in enumerate(resources)]
    code, answers, _ = exchange(folder, *reads, request(9, "resources/read", {"uri": "file:///etc/passwd"}))
    assert code == 0
    for answer, resource in zip(answers, resources):
        (content,) = answer["result"]["contents"]
        assert content["uri"] == resource["uri"] and content["mimeType"] == "text/markdown"
        assert content["text"] == (REPO / resource["name"]).read_text("utf-8")
    assert answers[1]["result"]["ttlMs"] > 0 and answers[1]["result"]["cacheScope"] == "public"
    error_of(answers[2], 9, -32602)


def test_no_resources_when_notes_py_stands_alone(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(str(NOTES), str(alone / "notes.py"))
    code, answers, _ = exchange(tmp_path / "s", request(1, "initialize", {"protocolVersion": "2025-11-25"}),
                                request(2, "resources/list"), call(3, "append", {"type": "gate", "text": "Alone."}),
                                script=alone / "notes.py")
    assert code == 0
    assert answers[0]["result"]["capabilities"] == {"tools": {}}
    assert answers[1]["result"]["resources"] == []
    assert tool_result(answers[2])["isError"] is False


# --------------------------------------------------------------------------
# Many writers; no lock between calls; every interpreter

def test_two_servers_and_the_cli_keep_seqs_gapless(tmp_path):
    folder = tmp_path / "s"
    run_notes("init", folder=folder)
    per_server, cli_runs = 20, 8
    servers = [subprocess.Popen(server_command(folder), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [None, None]

    def feed(number):
        lines = b"".join(json.dumps(call(index, "append", {"type": "decision", "text": "server %d note %d"
                                                                % (number, index)})).encode() + b"\n"
                         for index in range(per_server))
        outputs[number] = servers[number].communicate(lines, timeout=120)

    threads = [threading.Thread(target=feed, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    cli = [run_notes("append", "--type", "tension", "--text", "cli note %d" % index, folder=folder)
           for index in range(cli_runs)]
    for thread in threads:
        thread.join()
    seqs = [receipt.receipt["seq"] for receipt in cli]
    for number, server in enumerate(servers):
        assert server.returncode == 0
        answers = [assert_response(line) for line in outputs[number][0].decode().splitlines()]
        assert len(answers) == per_server
        seqs += [tool_result(answer)["structuredContent"]["seq"] for answer in answers]
    total = 2 * per_server + cli_runs
    assert sorted(seqs) == list(range(1, total + 1))
    assert [record["seq"] for record in read_records(folder)] == list(range(1, total + 1))
    assert run_notes("verify", folder=folder).code == 0


@pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")
def test_an_idle_server_holds_no_lock(tmp_path):
    import fcntl

    folder = tmp_path / "s"
    server = subprocess.Popen(server_command(folder), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        server.stdin.write(json.dumps(call(1, "append", {"type": "gate", "text": "Held?"})).encode() + b"\n")
        server.stdin.flush()
        assert tool_result(assert_response(server.stdout.readline().decode()))["isError"] is False
        # The server is alive and waiting for its next request: the lock is free.
        descriptor = os.open(str(folder / "session_notes.lock"), os.O_RDWR)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(descriptor)
        assert server.poll() is None
    finally:
        server.stdin.close()
        assert server.wait(timeout=30) == 0
        server.stdout.close()
        server.stderr.close()


def test_a_client_that_closes_its_end_costs_no_note(tmp_path):
    folder = tmp_path / "s"
    server = subprocess.Popen(server_command(folder), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    server.stdout.close()  # the host has gone before reading the answer
    _, stderr = server.communicate(json.dumps(call(1, "append", {"type": "gate", "text": "Kept."})).encode()
                                   + b"\n", timeout=60)
    assert server.returncode == 0 and b"Traceback" not in stderr and b"Exception ignored" not in stderr, stderr
    assert [record["text"] for record in read_records(folder)] == ["Kept."]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
def test_an_interrupted_server_prints_nothing_but_json_rpc(tmp_path):
    import signal

    server = subprocess.Popen(server_command(tmp_path / "s"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    server.stdin.write(json.dumps(request(1, "ping")).encode() + b"\n")
    server.stdin.flush()
    assert assert_response(server.stdout.readline().decode()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    server.send_signal(signal.SIGINT)  # while it waits for the next line
    rest, stderr = server.communicate(timeout=30)
    assert server.returncode == 0 and rest == b"", rest
    assert b"Traceback" not in stderr and b"interrupted" in stderr, stderr


def test_runs_under_each_python(tmp_path, python):
    folder = tmp_path / "s"
    code, answers, _ = exchange(
        folder, request(1, "initialize", {"protocolVersion": "2024-11-05"}), b"{oops",
        request(2, "tools/list", stateless=True),
        call(3, "append", {"type": "decision", "text": "Any interpreter."}),
        call(4, "append", {"type": "decision", "text": "x", "status": "open"}), python=python)
    assert code == 0 and len(answers) == 5
    assert answers[0]["result"]["protocolVersion"] == "2024-11-05"
    error_of(answers[1], None, -32700)
    assert [tool["name"] for tool in answers[2]["result"]["tools"]] == TOOLS
    assert tool_result(answers[3])["structuredContent"]["seq"] == 1
    assert tool_result(answers[4])["isError"] is True


def test_mcp_help(tmp_path):
    result = run_notes("mcp", "--help", folder=tmp_path / "untouched")
    assert result.code == 0 and "MCP" in result.stdout and "stdio" in result.stdout
    assert not os.path.lexists(str(tmp_path / "untouched"))


# --------------------------------------------------------------------------
# One folder per idea: the session argument; the restore tool (issue 30 points 4 and 5)

SESSION_REFUSAL = ("argument session takes 1 to 64 letters, digits, -, _ or ., the first a letter or digit (such as "
                   "pricing-page); the name given is not one")


def test_tools_take_a_session_defaulting_to_the_servers(tmp_path):
    base = tmp_path / "base"
    code, answers, _ = exchange(
        base, call(1, "append", {"type": "decision", "text": "In the server's session."}),
        call(2, "append", {"type": "gate", "text": "In another.", "session": "other"}),
        call(3, "summary", {"session": "other"}), call(4, "sessions", {}),
        call(5, "append", {"type": "decision", "text": "Never written.", "session": "../escape"}),
        call(6, "recap", {"session": 7}), call(7, "sessions", {"session": "other"}),
        call(8, "append_batch", {"batch": [{"type": "decision", "text": "Batched."}], "session": "other"}),
        extra=["--session", "mine"])
    assert code == 0
    mine, other = base / "sessions" / "mine", base / "sessions" / "other"
    assert tool_result(answers[0])["structuredContent"]["path"] == str(mine / "session_notes.jsonl")
    assert tool_result(answers[1])["structuredContent"]["path"] == str(other / "session_notes.jsonl")
    assert tool_result(answers[2])["structuredContent"]["total"] == 1
    listing = tool_result(answers[3])["structuredContent"]
    assert (listing["current"], [entry["name"] for entry in listing["sessions"]]) == ("mine", ["mine", "other"])
    for answer in answers[4:6]:
        assert tool_result(answer)["isError"] is True
        assert answer["result"]["structuredContent"] == {"ok": False, "error": SESSION_REFUSAL}
    assert tool_result(answers[6])["isError"] is True  # sessions lists them all: it names none
    assert "sessions takes no argument of the name given" in answers[6]["result"]["structuredContent"]["error"]
    assert tool_result(answers[7])["structuredContent"]["note_ids"] == ["n00002"]
    assert sorted(os.listdir(str(base / "sessions"))) == ["mine", "other"]
    assert [record["text"] for record in read_records(other)] == ["In another.", "Batched."]


def exported(tmp_path, name="source", notes_text=("Kept.", "Also kept.")) -> str:
    """A session of the given notes exported by the real script; the export's bytes."""
    folder = tmp_path / name
    for text in notes_text:
        run_notes("append", "--type", "decision", "--text", text, folder=folder)
    assert run_notes("export", folder=folder).code == 0
    return (folder / "session_export.json").read_bytes()


def test_restore_tool_gives_the_commands_receipt_and_fast_forwards(tmp_path):
    base = tmp_path / "base"
    early = exported(tmp_path, "early", ("Kept.",))
    (base / "sessions" / "there").mkdir(parents=True)
    (base / "sessions" / "there" / "early.json").write_bytes(early)
    code, answers, _ = exchange(base, call(1, "restore", {"export_file": "early.json", "session": "there"}))
    assert code == 0
    by_cli = run_notes("--session", "cli", "restore", base / "sessions" / "there" / "early.json", folder=base)
    receipt = tool_result(answers[0])["structuredContent"]
    assert receipt == json.loads(json.dumps(by_cli.receipt).replace("sessions/cli", "sessions/there"))
    assert receipt["restored"] == 1 and read_records(base / "sessions" / "there") == read_records(tmp_path / "early")
    # The same session, two notes further: the tool adds only what the folder lacks.
    run_notes("append", "--type", "decision", "--text", "Later.", folder=tmp_path / "early")
    run_notes("export", "--output", tmp_path / "later.json", folder=tmp_path / "early")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    shutil.copy(str(tmp_path / "later.json"), str(downloads / "session_export.json"))
    code, answers, _ = exchange(base, call(2, "restore", {"export_file": "session_export.json"}),
                                call(3, "restore", {"export_file": str(downloads / "session_export.json")}),
                                call(4, "restore", {}), extra=["--session", "there", "--restore-from", downloads])
    assert code == 0
    assert [tool_result(answer)["structuredContent"].get("restored") for answer in answers] == [1, 0, None]
    assert read_records(base / "sessions" / "there") == read_records(tmp_path / "early")
    # Without export_file, the command's own search of the session folder: early.json is older than the folder.
    assert answers[2]["result"]["isError"] is True
    assert "past this export's 1 up to n00001" in answers[2]["result"]["structuredContent"]["error"]


def test_restore_tool_sets_aside_a_session_a_reset_started(tmp_path):
    origin, base = tmp_path / "origin", tmp_path / "base"
    appended(origin, "decision", "Kept before the reset.")
    assert run_notes("export", "--output", base / "session_export.json", folder=origin).code == 0
    appended(base, "decision", "Sent after the reset.")
    started = (base / "session_notes.jsonl").read_bytes()

    code, answers, _ = exchange(base, call(1, "restore", {}), call(2, "restore", {"set_aside": True}))

    assert code == 0
    refused, receipt = (tool_result(answer) for answer in answers)
    assert refused["isError"] is True and "restore again with set_aside" in refused["content"][0]["text"]
    moved = Path(receipt["structuredContent"]["set_aside"])
    assert moved.parent == base and moved.read_bytes() == started
    assert read_records(base) == read_records(origin)


def test_restore_tool_reads_nothing_outside_its_folders_and_follows_no_link(tmp_path):
    base, outside = tmp_path / "base", tmp_path / "outside"
    outside.mkdir()
    (outside / "session_export.json").write_bytes(exported(tmp_path))
    base.mkdir()
    os.symlink(str(outside / "session_export.json"), str(base / "link.json"))
    os.symlink(str(outside), str(base / "linked"))
    (base / "folder.json").mkdir()
    names = [str(outside / "session_export.json"), "../outside/session_export.json", "link.json",
             "linked/session_export.json", "missing.json", "folder.json", "fifo.json", "", "/", "a//b"]
    before = folder_digest(tmp_path)
    os.mkfifo(str(base / "fifo.json"))  # made after the digest, which would wait on it for ever
    code, answers, _ = exchange(base, *[call(index, "restore", {"export_file": name})
                                        for index, name in enumerate(names)], call(99, "restore", {"export_file": 5}))
    assert code == 0 and len(answers) == len(names) + 1
    for name, answer in zip(names + [5], answers):
        result = tool_result(answer)
        assert result["isError"] is True, (name, result)
        error = result["structuredContent"]["error"]
        assert name in ("", "/") or str(name) not in error, (name, error)  # a client's path is never repeated
    os.unlink(str(base / "fifo.json"))
    assert folder_digest(tmp_path) == before


def test_restore_tool_without_dir_fd_checks_the_resolved_path(tmp_path, monkeypatch):
    """Where os.open takes no dir_fd (Windows), the resolved path must lie inside the folder (in-process)."""
    from conftest import notes

    monkeypatch.setattr(notes, "_CAN_WALK_INSIDE", False)
    base, outside = tmp_path / "base", tmp_path / "outside"
    outside.mkdir()
    (outside / "session_export.json").write_bytes(exported(tmp_path))
    base.mkdir()
    os.symlink(str(outside), str(base / "linked"))
    (base / "mine.json").write_bytes((outside / "session_export.json").read_bytes())
    server = notes._McpServer(str(base), None, notes._mcp_served_tools(False), None)
    refused = [notes._mcp_call_tool(server, {"name": "restore", "arguments": {"export_file": name}})
               for name in ("linked/session_export.json", "../outside/session_export.json")]
    assert [result["isError"] for result in refused] == [True, True]
    assert "passes through a link that leads out" in refused[0]["structuredContent"]["error"]
    restored = notes._mcp_call_tool(server, {"name": "restore", "arguments": {"export_file": "mine.json"}})
    assert restored["isError"] is False and restored["structuredContent"]["restored"] == 2


def test_export_tool_without_dir_fd_checks_the_resolved_path(tmp_path, monkeypatch):
    """Where os.open takes no dir_fd (Windows), export's output must resolve inside the folder (in-process)."""
    from conftest import notes

    monkeypatch.setattr(notes, "_CAN_WALK_INSIDE", False)
    base, outside = tmp_path / "base", tmp_path / "outside"
    outside.mkdir()
    notes.Session(base).append(type="decision", text="One.")
    os.symlink(str(outside), str(base / "linked"))
    server = notes._McpServer(str(base), None, notes._mcp_served_tools(False), None)
    refused = [notes._mcp_call_tool(server, {"name": "export", "arguments": {"output": name}})
               for name in ("linked/e.json", "../outside/e.json", "/abs.json")]
    assert [result["isError"] for result in refused] == [True, True, True]
    assert "passes through a link that leads out" in refused[0]["structuredContent"]["error"]
    assert os.listdir(str(outside)) == []
    written = notes._mcp_call_tool(server, {"name": "export", "arguments": {"output": "mine.json"}})
    assert written["isError"] is False and (base / "mine.json").exists()


def test_a_restore_from_that_is_no_folder_stops_the_server_before_it_starts(tmp_path):
    completed = subprocess.run(server_command(tmp_path / "s") + ["--restore-from", str(tmp_path / "nowhere")],
                               input=json.dumps(request(1, "ping")).encode() + b"\n", capture_output=True,
                               timeout=60)
    assert completed.returncode == 2 and completed.stdout == b"", completed
    refusal = json.loads(completed.stderr.decode())
    assert refusal["ok"] is False and "--restore-from names no folder" in refusal["error"]
    assert os.listdir(str(tmp_path)) == []


# --------------------------------------------------------------------------
# The official SDK client, in each of its modes

def sdk():
    """The official MCP SDK (a test dependency on Python 3.10 and later); missing or too old, the test fails."""
    try:
        import mcp as module
    except ImportError:
        pytest.fail("the MCP SDK is missing: pip install 'mcp>=2.3' (the README's test command does)")
    if "mode" not in getattr(getattr(module, "Client", None), "__dataclass_fields__", {}):
        pytest.fail("the installed MCP SDK is older than 2.3 (no Client(..., mode=)): pip install 'mcp>=2.3'")
    return module


async def sdk_session(parameters, mode):
    from mcp import Client

    async with Client(parameters, mode=mode) as client:
        listing = await client.list_tools()
        names = [tool.name for tool in listing.tools]
        appended = await client.call_tool("append", {"type": "decision", "text": "Chosen over MCP."})
        gate = await client.call_tool("append", {"type": "gate", "text": "Host runtime is open."})
        refused = await client.call_tool("append", {"type": "idea", "text": "Not a type."})
        secret = await client.call_tool("append", {"type": "decision", "text": "key " + SECRET})
        recap = await client.call_tool("recap", {"limit": 5})
        resources = await client.list_resources()
        contract = await client.read_resource(resources.resources[1].uri)
        return {"version": client.protocol_version, "instructions": client.instructions, "names": names,
                "appended": appended, "gate": gate, "refused": refused, "secret": secret, "recap": recap,
                "resources": [resource.name for resource in resources.resources],
                "contract": contract.contents[0].text}


@pytest.mark.mcp_sdk
@pytest.mark.parametrize("mode", ["legacy", "auto", STATELESS])
def test_sdk_client(tmp_path, mode):
    from_sdk = sdk()
    folder = tmp_path / "s"
    parameters = from_sdk.StdioServerParameters(command=sys.executable, args=server_command(folder)[1:])
    seen = asyncio.run(sdk_session(parameters, mode))
    assert seen["version"] == ("2025-11-25" if mode == "legacy" else STATELESS)
    if mode != STATELESS:  # a pinned client adopts the version without asking the server anything
        assert "append" in seen["instructions"]
    assert seen["names"] == TOOLS
    assert seen["appended"].is_error is False
    assert seen["appended"].structured_content == {"ok": True, "command": "append", "note_id": "n00001", "seq": 1,
                                                   "path": str(folder.resolve() / "session_notes.jsonl"),
                                                   "created": True}
    assert seen["gate"].structured_content["note_id"] == "n00002"
    cli = tmp_path / "cli"
    assert seen["refused"].is_error is True
    assert seen["refused"].structured_content == in_tool_words(
        run_notes("append", "--type", "idea", "--text", "Not a type.", folder=cli).receipt, "append")
    assert seen["secret"].is_error is True and "AWS access key id" in seen["secret"].content[0].text
    assert SECRET not in seen["secret"].content[0].text
    recap = seen["recap"].structured_content
    assert [item["id"] for item in recap["decisions"]] == ["n00001"]
    assert [gate["id"] for gate in recap["open_gates"]] == ["n00002"]
    assert seen["resources"] == ["protocol.md", "note-io.md"]
    assert seen["contract"] == (REPO / "note-io.md").read_text("utf-8")
    assert [record["seq"] for record in read_records(folder)] == [1, 2]


@pytest.mark.mcp_sdk
def test_sdk_client_moves_a_session_in_by_restore_and_out_by_export(tmp_path):
    """README "Move a session", an MCP host both ways: the operator's download folder is named at the start,
    the official client restores from it into a session of its own, goes on, and exports to a full path."""
    from_sdk = sdk()
    downloads, host = tmp_path / "Downloads", tmp_path / "host"
    downloads.mkdir()
    (downloads / "session_export.json").write_bytes(exported(tmp_path))
    parameters = from_sdk.StdioServerParameters(
        command=sys.executable, args=server_command(host)[1:] + ["--restore-from", str(downloads)])

    async def move():
        from mcp import Client

        async with Client(parameters, mode="auto") as client:
            return [await client.call_tool(name, arguments) for name, arguments in (
                ("restore", {"export_file": "session_export.json", "session": "moved"}),
                ("append", {"type": "decision", "text": "After the move.", "session": "moved"}),
                ("export", {"session": "moved"}), ("sessions", {}))]
    restored, appended, out, listing = asyncio.run(move())
    moved = host / "sessions" / "moved"
    by_cli = run_notes("restore", downloads / "session_export.json", folder=tmp_path / "cli")
    assert restored.is_error is False
    assert restored.structured_content == json.loads(json.dumps(by_cli.receipt).replace(str(tmp_path / "cli"),
                                                                                         str(moved)))
    assert appended.structured_content["note_id"] == "n00003"
    path = out.structured_content["path"]
    assert path == str(moved / "session_export.json") and os.path.isabs(path)
    assert json.loads((moved / "session_export.json").read_text("utf-8"))["records"] == read_records(moved)
    assert [entry["name"] for entry in listing.structured_content["sessions"]] == ["moved"]
    assert run_notes("restore", path, folder=tmp_path / "laptop").code == 0
    assert read_records(tmp_path / "laptop") == read_records(moved)


# --------------------------------------------------------------------------
# The README's section runs as shown

def readme_mcp_section() -> str:
    text = (REPO / "README.md").read_text("utf-8")
    start = text.index("## Use over MCP")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]




@pytest.mark.mcp_sdk
def test_readme_config_starts_a_working_server(tmp_path):
    from_sdk = sdk()
    (block,) = code_blocks(readme_mcp_section(), "json")
    server = json.loads(block)["mcpServers"]["shaping"]
    assert server["command"] == "python3" and server["args"][0] == "-S" and server["args"][-1] == "mcp"
    args = [str(NOTES) if arg.endswith("/notes.py") else arg for arg in server["args"]]
    args[args.index("--dir") + 1] = str(tmp_path / "shaping")
    parameters = from_sdk.StdioServerParameters(command=sys.executable, args=args)
    seen = asyncio.run(sdk_session(parameters, "auto"))
    assert seen["appended"].structured_content["seq"] == 1


def test_readme_commands_run(tmp_path):
    commands = [line for block in code_blocks(readme_mcp_section(), "") for line in block.splitlines()]
    assert commands
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    for command in commands:
        completed = subprocess.run(["bash", "-c", command.replace("python3 -S", shlex.quote(sys.executable) + " -S")],
                                   cwd=str(tmp_path), capture_output=True, timeout=60)
        assert completed.returncode == 0, completed
        answers = [assert_response(line) for line in completed.stdout.decode().splitlines()]
        assert answers and all("result" in answer for answer in answers), answers
        assert all(not answer["result"].get("isError") for answer in answers), answers



def test_a_message_over_the_line_limit_is_refused_and_the_server_goes_on(tmp_path):
    # A client that sends megabytes without a newline: the server reads and
    # drops them in bounded pieces, says so once, and answers the next request.
    huge = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (3 << 20) + b'"}}'
    code, answers, _ = exchange(tmp_path / "s", huge, request(2, "ping"))
    assert code == 0 and len(answers) == 2, answers
    assert answers[0]["error"]["code"] == -32600 and "over 1 MiB" in answers[0]["error"]["message"]
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


# ==========================================================================
# Tools shaped for MCP, and bounded work per message

TYPES = ["mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"]
# What only the command line has; no tool or argument description may say it.
CLI_WORDING = [re.compile(r"(?<![\w])--[a-z]"), re.compile(r"exit \d"), re.compile(r"standard input"),
               re.compile(r"python3"), re.compile(r"notes\.py"), re.compile(r"\bprint\b")]
def sdk_parameters(folder, script=NOTES):
    try:
        from mcp import StdioServerParameters
    except ImportError:
        pytest.fail("the MCP SDK is missing: pip install 'mcp>=2.3' (the README's test command does)")
    return StdioServerParameters(command=sys.executable, args=["-S", str(script), "--dir", str(folder), "mcp"])


def with_sdk(parameters, work):
    """Run work(client) inside one SDK client session (the handshake revision) and return what it returns."""
    from mcp import Client

    async def session():
        async with Client(parameters, mode="legacy") as client:
            return await work(client)
    return asyncio.run(session())


def call_line(request_id, tool, arguments) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments}})


PING = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping"})


def jsonrpc_lines(stdout: bytes) -> list:
    """Every line the server wrote, each a JSON-RPC response object (never an array, never a CLI receipt)."""
    answers = []
    for line in stdout.decode("utf-8").splitlines():
        answer = json.loads(line)
        assert isinstance(answer, dict) and answer["jsonrpc"] == "2.0", line
        assert set(answer) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), line
        answers.append(answer)
    return answers


# --------------------------------------------------------------------------
# 1. Schemas and descriptions

@pytest.mark.mcp_sdk
def test_schemas_say_what_each_argument_takes(tmp_path):
    async def listing(client):
        return {tool.name: (tool.description, tool.input_schema) for tool in (await client.list_tools()).tools}
    tools = with_sdk(sdk_parameters(tmp_path / "s"), listing)
    append = tools["append"][1]
    assert append["required"] == ["type", "text"]
    assert tools["show"][1]["required"] == ["note_id"]
    properties = append["properties"]
    assert properties["type"]["enum"] == TYPES
    assert properties["status"]["enum"] == ["open", "deferred", "closed"]
    assert properties["provenance"]["enum"] == ["op", "model", "shared"]
    assert properties["evidence"]["enum"] == ["declared", "inferred", "observed", "validated"]
    assert (properties["text"]["maxLength"], properties["effect"]["maxLength"]) == (2000, 1000)
    ids = [properties[name] for name in ("ref", "about", "by")] + [tools["show"][1]["properties"]["note_id"]]
    for schema in ids:
        assert re.search(schema["pattern"], "n00012") and re.search(schema["pattern"], " n00012 ")
        assert not re.search(schema["pattern"], "12") and not re.search(schema["pattern"], "n12")
    for tool in ("tail", "recap"):
        limit = tools[tool][1]["properties"]["limit"]
        assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 1000)
    assert tools["tail"][1]["properties"]["types"]["items"]["enum"] == TYPES
    for name, (description, schema) in tools.items():
        texts = [description] + [argument["description"] for argument in schema["properties"].values()]
        for text in texts:
            for wording in CLI_WORDING:
                assert not wording.search(text), (name, text)


@pytest.mark.parametrize("served", [[], ["--allow-redact"]], ids=["default", "with-redact"])
def test_raw_listing_has_no_command_line_wording(tmp_path, served):
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(tmp_path / "s"), "mcp"] + served,
                               input=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n', capture_output=True,
                               timeout=60)
    (answer,) = jsonrpc_lines(completed.stdout)
    assert ("redact" in [tool["name"] for tool in answer["result"]["tools"]]) == bool(served)
    listing = json.dumps(answer["result"]["tools"])
    for wording in CLI_WORDING:
        assert not wording.search(listing), wording.pattern
    assert not (tmp_path / "s").exists()


# --------------------------------------------------------------------------
# 1. Refusals name the tool's argument

REFUSED = {
    "text-too-long": ("append", {"type": "decision", "text": "x" * 2001}),
    "unknown-type": ("append", {"type": "idea", "text": "x"}),
    "missing-type": ("append", {"text": "No type."}),
    "status-on-decision": ("append", {"type": "decision", "text": "x", "status": "open"}),
    "bad-by": ("append", {"type": "decision", "text": "x", "by": "12"}),
    "tail-limit-0": ("tail", {"limit": 0}),
    "tail-limit-over": ("tail", {"limit": 1001}),
    "tail-bad-type": ("tail", {"types": ["idea"]}),
    "recap-max-bytes": ("recap", {"max_bytes": 0}),
    "recap-format": ("recap", {"format": "pdf"}),
}


def cli_flags(arguments: dict, tool: str) -> list:
    flags = {name: flag for flag, name in TOOL_ARGUMENTS[tool].items()}
    words = []
    for name, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            words += [flags[name], str(item)]
    return words


@pytest.mark.mcp_sdk
def test_refusals_name_the_argument_and_otherwise_are_the_cli_text(tmp_path):
    folder, cli = tmp_path / "s", tmp_path / "cli"
    for place in (folder, cli):
        run_notes("append", "--type", "decision", "--text", "The first note.", folder=place)
    before = folder_digest(folder)

    async def refusals(client):
        return {case: await client.call_tool(tool, arguments) for case, (tool, arguments) in REFUSED.items()}
    results = with_sdk(sdk_parameters(folder), refusals)
    assert folder_digest(folder) == before
    for case, (tool, arguments) in REFUSED.items():
        refused = run_notes(tool, *cli_flags(arguments, tool), folder=cli)
        assert refused.code == 2, case
        result = results[case]
        assert result.is_error is True, case
        assert result.structured_content == in_tool_words(refused.receipt, tool), case
        assert not re.search(r"(?<![\w])--[a-z]", result.structured_content["error"]), case
        assert "notes.py" not in result.structured_content["error"], case
    assert results["text-too-long"].structured_content["error"].startswith("text is 2001 characters")
    assert results["tail-limit-over"].structured_content["error"].startswith("limit is at most 1000")


# --------------------------------------------------------------------------
# 2. recap takes format and max_bytes

@pytest.mark.mcp_sdk
def test_recap_takes_format_and_max_bytes_as_the_command_does(tmp_path):
    folder = tmp_path / "s"
    for number in range(12):
        run_notes("append", "--type", "decision", "--text", "Decision number %d holds." % number, folder=folder)
    run_notes("append", "--type", "gate", "--text", "Hosting is open.", folder=folder)

    async def recaps(client):
        return [await client.call_tool("recap", arguments) for arguments in (
            {"format": "md"}, {"format": "md", "max_bytes": 600}, {"max_bytes": 1100, "limit": 3})]
    markdown, small_markdown, small = with_sdk(sdk_parameters(folder), recaps)
    for result, flags in ((markdown, ["--format", "md"]), (small_markdown, ["--format", "md", "--max-bytes", "600"])):
        printed = run_notes("recap", *flags, folder=folder)
        assert printed.code == 0 and printed.stdout.startswith("# Recap\n")
        assert result.is_error is False
        assert result.structured_content == {"ok": True, "command": "recap", "markdown": printed.stdout}
    assert len(small_markdown.structured_content["markdown"].encode("utf-8")) <= 600
    assert small_markdown.structured_content != markdown.structured_content  # the budget left entries out
    expected = run_notes("recap", "--max-bytes", "1100", "--limit", "3", folder=folder)
    assert small.is_error is False and small.structured_content == expected.receipt
    assert len(expected.stdout.encode("utf-8")) <= 1100


# --------------------------------------------------------------------------
# 4. Instructions name only the resources the server has

def initialize_result(script, folder) -> dict:
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "test", "version": "1"}}})
    completed = subprocess.run([sys.executable, "-S", str(script), "--dir", str(folder), "mcp"],
                               input=(message + "\n").encode(), capture_output=True, timeout=60)
    (answer,) = jsonrpc_lines(completed.stdout)
    return answer["result"]


def test_a_script_copy_alone_names_no_resources(tmp_path):
    (tmp_path / "bin").mkdir()
    alone = tmp_path / "bin" / "notes.py"
    shutil.copy(str(NOTES), str(alone))
    result = initialize_result(alone, tmp_path / "s")
    assert "resources" not in result["capabilities"]
    for word in ("resource", "note-io.md", "protocol.md"):
        assert word not in result["instructions"], word
    assert "append" in result["instructions"]
    beside = initialize_result(NOTES, tmp_path / "s")  # the repository's copy has both contracts beside it
    assert beside["capabilities"]["resources"] == {}
    assert "note-io.md" in beside["instructions"] and "protocol.md" in beside["instructions"]


@pytest.mark.mcp_sdk
def test_the_sdk_sees_no_resources_from_a_copy_alone(tmp_path):
    (tmp_path / "bin").mkdir()
    alone = tmp_path / "bin" / "notes.py"
    shutil.copy(str(NOTES), str(alone))

    async def seen(client):
        return client.instructions, client.server_capabilities
    instructions, capabilities = with_sdk(sdk_parameters(tmp_path / "s", alone), seen)
    assert "resource" not in instructions and capabilities.resources is None


# --------------------------------------------------------------------------
# 5. Bounded work per message

def test_a_batch_of_tails_is_refused_whole_and_the_server_goes_on(tmp_path):
    folder = tmp_path / "s"
    write_session(folder, [("decision", "Note %d stays." % number) for number in range(50)])
    before = folder_digest(folder)
    batch = "[" + ",".join(call_line(number, "tail", {"limit": 10 ** 9}) for number in range(40)) + "]"
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input=(batch + "\n" + PING + "\n").encode(), capture_output=True, timeout=60)
    first, second = jsonrpc_lines(completed.stdout)
    assert first["id"] is None and first["error"]["code"] == -32600
    assert "one request per line" in first["error"]["message"]
    assert second == {"jsonrpc": "2.0", "id": 99, "result": {}}
    assert completed.returncode == 0 and folder_digest(folder) == before


@pytest.mark.parametrize("command", ["tail", "recap"])
def test_the_cli_limit_is_at_most_1000(tmp_path, command):
    folder = tmp_path / "s"
    write_session(folder, [("decision", "Note %d stays." % number) for number in range(3)])
    refused = run_notes(command, "--limit", "1001", folder=folder)
    assert refused.code == 2 and refused.receipt == {
        "ok": False, "error": "--limit is at most 1000; to read the whole log, use export (or --since and --until "
                              "for a stretch of it)"}
    assert run_notes(command, "--limit", "1000", folder=folder).code == 0


def bounded_server(folder, megabytes, lines):
    """The server under an address-space limit of this many MiB, fed these lines; (code, answers)."""
    import resource

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=120,
                               preexec_fn=limit_memory)
    answers = jsonrpc_lines(completed.stdout)
    # Too little memory to start the interpreter: it says so on stderr, and nothing reaches stdout.
    assert not answers and completed.returncode != 0 or b"Traceback" not in completed.stderr, completed.stderr
    return completed.returncode, answers


def long_session(folder, count):
    """A session of count notes of about 3 KB each (text and effect near their limits)."""
    text, effect = " ".join(["word"] * 399), " ".join(["more"] * 199)
    write_session(folder, [("decision", "%s %d" % (text, number), {"effect": effect}) for number in range(count)])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS bounds the address space on Linux")
def test_under_300_mb_a_batch_and_a_huge_limit_get_json_rpc_answers(tmp_path):
    # 3,000 notes of 3 KB: a tail of all of them held whole, 40 times over for a
    # batch, is far above 300 MB; bounded, each line is one bounded reply.
    folder = tmp_path / "s"
    long_session(folder, 3000)
    batch = "[" + ",".join(call_line(number, "tail", {"limit": 10 ** 9}) for number in range(40)) + "]"
    code, answers = bounded_server(folder, 300, [batch, call_line(1, "tail", {"limit": 10 ** 9}),
                                                 call_line(2, "tail", {"limit": 1000}), PING])
    assert code == 0 and [answer["id"] for answer in answers] == [None, 1, 2, 99]
    assert answers[0]["error"]["code"] == -32600
    assert answers[1]["result"]["isError"] is True
    assert answers[1]["result"]["structuredContent"]["error"].startswith("limit is at most 1000")
    assert answers[2]["result"]["structuredContent"]["count"] == 1000
    assert answers[3]["result"] == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS bounds the address space on Linux")
def test_out_of_memory_in_a_call_is_a_json_rpc_answer_and_the_server_goes_on(tmp_path):
    # From the smallest limit the server answers a ping under, up to the first
    # where a tail of 300 notes of 3 KB fits: in between, the call runs out of
    # memory somewhere (reading, building or encoding its answer).  Each such
    # call is still answered, as JSON-RPC, and the ping after it too.
    folder = tmp_path / "s"
    long_session(folder, 300)
    starts = next(megabytes for megabytes in range(8, 512, 2) if bounded_server(folder, megabytes, [PING])[1])
    starved = 0
    for megabytes in range(starts, starts + 200, 3):
        code, answers = bounded_server(folder, megabytes, [call_line(1, "tail", {"limit": 1000}), PING])
        if code != 0 and not answers:
            # So starved that even the error answer could not be built (seen on 3.9): the server
            # ends, with nothing but JSON-RPC ever on its stdout (bounded_server parsed every line).
            continue
        assert code == 0 and [answer["id"] for answer in answers] == [1, 99], (megabytes, answers)
        assert answers[1]["result"] == {}
        tail = answers[0]
        if "result" in tail and not tail["result"]["isError"]:
            assert tail["result"]["structuredContent"]["count"] == 300
            break
        starved += 1
        said = tail["error"]["message"] if "error" in tail else tail["result"]["structuredContent"]["error"]
        assert "MemoryError" in said or "memory" in said, said
    else:
        pytest.fail("a tail of 300 notes never fitted in 200 MiB more than a ping needs")
    assert starved, "no limit made the call run out of memory: the test did not reach its case"
    assert len(read_records(folder)) == 300


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS bounds the address space on Linux")
def test_a_tail_of_outsize_records_is_cut_short_and_says_so(tmp_path):
    # A log edited by hand can hold usable records of 1 MiB (unknown fields are kept):
    # 1000 of them would make a reply of 1 GiB.  tail returns at most 8 MiB of them.
    folder = tmp_path / "s"
    pad = "y" * 900000
    write_session(folder, [make_record(SESSION_ID, seq, "decision", "Outsize %d." % seq, pad=pad)
                           for seq in range(1, 21)])
    code, answers = bounded_server(folder, 300, [call_line(1, "tail", {"limit": 20}), PING])
    assert code == 0 and [answer["id"] for answer in answers] == [1, 99]
    receipt = answers[0]["result"]["structuredContent"]
    assert answers[0]["result"]["isError"] is False
    assert [record["seq"] for record in receipt["records"]] == list(range(12, 21))  # the newest 9 fit in 8 MiB
    assert receipt["warnings"] == ["tail stopped at 9 records: they hold over 8 MiB of log, the most one reply "
                                   "carries; ask for fewer or a narrower time span"]
    cli = run_notes("tail", "--limit", "20", folder=folder)
    assert cli.code == 0 and cli.receipt == dict(receipt, path=cli.receipt["path"])


def test_a_server_that_cannot_start_writes_its_refusal_to_stderr_not_to_the_stream(tmp_path):
    # A host reads the server's stdout as JSON-RPC: a refusal before the loop
    # (a usage error here; memory running out is the same path) goes to stderr.
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(tmp_path / "s"), "mcp",
                                "--allow-redacted"], input=b"", capture_output=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stdout == b""
    refusal = json.loads(completed.stderr.decode("utf-8"))
    assert refusal["ok"] is False and "--allow-redacted" in refusal["error"]
    assert not (tmp_path / "s").exists()


# ==========================================================================
# Over MCP, standard input carries the protocol

# --------------------------------------------------------------------------
# Over MCP, standard input carries the protocol: "-" is never read from it

def test_a_dash_over_mcp_is_refused_and_the_server_goes_on(tmp_path):
    folder = tmp_path / "session"
    messages = [{"jsonrpc": "2.0", "id": number, "method": "tools/call",
                 "params": {"name": "append", "arguments": arguments}}
                for number, arguments in enumerate([{"type": "decision", "text": "-"},
                                                    {"type": "decision", "text": "Fine.", "effect": "-"},
                                                    {"type": "decision", "text": "Kept."}], 1)]
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input="".join(json.dumps(message) + "\n" for message in messages).encode("utf-8"),
                               capture_output=True, timeout=30)

    assert completed.returncode == 0, completed
    answers = [json.loads(line) for line in completed.stdout.decode("utf-8").splitlines()]
    assert [answer["id"] for answer in answers] == [1, 2, 3]
    for answer, name in zip(answers[:2], ("text", "effect")):
        assert answer["result"]["isError"] is True
        assert "standard input" in answer["result"]["structuredContent"]["error"]
        assert name in answer["result"]["structuredContent"]["error"]
    assert answers[2]["result"]["isError"] is False
    assert [record["text"] for record in read_records(folder)] == ["Kept."]


def test_recap_over_mcp_is_the_compact_line_the_cli_prints(tmp_path):
    folder = tmp_path / "session"
    append(folder, "decision", "SMS is the channel.", "--provenance", "op")
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recap", "arguments": {}}}
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input=(json.dumps(message) + "\n").encode("utf-8"), capture_output=True, timeout=30)

    result = json.loads(completed.stdout.decode("utf-8"))["result"]
    assert result["content"][0]["text"] == recap_text(folder)
