"""MCP tools shaped for MCP (issue 17 point 3) and bounded work per message (issue 20 point 3).

The schemas say what each argument takes (enum, maxLength, pattern,
required); no description speaks of flags, exit codes, standard input or
the command line's help; a refusal is the command line's text with each
flag named as the tool's argument; recap takes format and max_bytes; the
instructions name resources only when the server has them; a JSON-RPC
batch is refused whole; tail and recap take a limit of at most 1000; and
under a tight address-space limit the server writes only JSON-RPC and goes
on.  Each test drives the real server: the official SDK client where it
can, raw JSON-RPC lines where a client would never send such a frame.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import NOTES, SESSION_ID, folder_digest, make_record, read_records, run_notes, write_session

TYPES = ["mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"]
# What only the command line has; no tool or argument description may say it.
CLI_WORDING = [re.compile(r"(?<![\w])--[a-z]"), re.compile(r"exit \d"), re.compile(r"standard input"),
               re.compile(r"python3"), re.compile(r"notes\.py"), re.compile(r"\bprint\b")]
# The tool's argument for each flag the CLI's refusals name, written out flag by flag.
ARGUMENTS = {
    "append": {"--type": "type", "--text": "text", "--effect": "effect", "--ref": "ref", "--status": "status",
               "--provenance": "provenance", "--evidence": "evidence", "--about": "about", "--by": "by"},
    "tail": {"--limit": "limit", "--type": "types", "--since": "since", "--until": "until", "--grep": "grep",
             "--compact": "compact"},
    "recap": {"--limit": "limit", "--format": "format", "--max-bytes": "max_bytes"},
}


def in_tool_words(receipt: dict, tool: str) -> dict:
    """SPEC section 5: the CLI's refusal with each flag named as the argument, the --help pointer as the schema."""
    error = re.sub(r"\(see: .* %s --help\)" % tool, "(see the input schema of the %s tool in tools/list)" % tool,
                   receipt["error"])
    for flag, name in ARGUMENTS[tool].items():
        error = re.sub(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), name, error)
    return dict(receipt, error=error)


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
    flags = {name: flag for flag, name in ARGUMENTS[tool].items()}
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
    assert receipt["warnings"] == ["tail stopped at 9 records: the ones asked for hold more than 8 MiB of log, "
                                   "the most one reply carries; ask for fewer records or a narrower time span"]
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
