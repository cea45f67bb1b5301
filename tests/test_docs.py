"""The documents: every command they show runs as shown; the README is for users and the maintainers'
pages keep their promises; the two contracts carry the rules a model needs within their budget."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import (NOTES, REPO, Result, assert_no_traceback, code_blocks, folder_digest, notes, recap, run_notes)


# ==========================================================================
# Every command the documents show runs as shown

DOCUMENTS = ["README.md", "protocol.md", "note-io.md"]
SANDBOX = "/mnt/data"


def fenced_lines(text: str) -> list:
    """The lines inside fenced code blocks (``` or ~~~), continuation lines joined."""
    lines, fence, pending = [], None, ""
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None:
            if stripped.startswith("```") or stripped.startswith("~~~"):
                fence = stripped[:3]
            continue
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            fence, pending = None, ""
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    return lines


def without_comment(line: str) -> str:
    """The line up to an unquoted '#' that starts a word, as a shell reads it."""
    quote, escaped = None, False
    for position, character in enumerate(line):
        if escaped:
            escaped = False
        elif character == "\\" and quote != "'":
            escaped = True
        elif quote:
            if character == quote:
                quote = None
        elif character in "'\"":
            quote = character
        elif character == "#" and (position == 0 or line[position - 1].isspace()):
            return line[:position].rstrip()
    return line


HEREDOC = re.compile(r"\s<<-?\s*(\S+)$")


def document_commands(name: str) -> list:
    """The commands of a document, each as (command, the here-document it reads or None)."""
    lines = fenced_lines((REPO / name).read_text("utf-8"))
    commands, index = [], 0
    while index < len(lines):
        line, index = lines[index], index + 1
        if not line.startswith("python3 -S "):
            continue
        command, stdin = without_comment(line), None
        match = HEREDOC.search(command)
        if match:
            # Only a quoted delimiter keeps the shell off $ and backticks in the body.
            assert re.fullmatch(r"'\w+'", match.group(1)), "%s: unquoted here-document: %s" % (name, line)
            end = lines.index(match.group(1).strip("'"), index)
            command, stdin = command[:match.start()], "".join(body + "\n" for body in lines[index:end])
            index = end + 1
        commands.append((command, stdin))
    return commands


def test_fenced_line_parsing():
    """The extraction itself: fences, continuations, comments, quoted hashes."""
    text = "\n".join([
        "python3 -S notes.py outside",
        "```bash",
        "python3 -S notes.py init  # start",
        "  python3 -S notes.py append --type gate \\",
        "    --text \"issue #3 stays\"",
        "echo not a command",
        "```",
        "python3 -S notes.py after",
        "~~~",
        "python3 -S notes.py tail",
        "~~~",
    ])
    commands = [without_comment(line) for line in fenced_lines(text) if line.startswith("python3 -S ")]
    assert commands == ["python3 -S notes.py init",
                        'python3 -S notes.py append --type gate --text "issue #3 stays"',
                        "python3 -S notes.py tail"]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_document_shows_commands(name):
    assert document_commands(name), "%s shows no `python3 -S ...` command in a code block" % name


@pytest.mark.parametrize("name", DOCUMENTS)
def test_document_commands_run(name, tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(str(NOTES), str(folder / "notes.py"))
    for number, (command, stdin) in enumerate(document_commands(name), 1):
        filled = command.replace(SANDBOX, str(folder))
        words = shlex.split(filled)
        assert words[0] == "python3", command
        completed = subprocess.run([sys.executable] + words[1:], cwd=str(folder), capture_output=True,
                                   input=stdin or "", text=True, encoding="utf-8", errors="replace",
                                   timeout=60)
        result = Result(completed.returncode, completed.stdout, completed.stderr)
        assert_no_traceback(result)
        assert result.code == 0, "%s, command %d failed: %s\n%r" % (name, number, command, result)


# ==========================================================================
# The README is for users first; docs/ keeps its promises

README = (REPO / "README.md").read_text("utf-8")
DOCS = sorted((REPO / "docs").glob("*.md"))
USER_PART_LIMIT = 15 * 1000  # bytes of the README before its command reference
# A --text or --effect whose value opens with a double quote, as a shell line would show it.
DOUBLE_QUOTED_TEXT = re.compile(r"--(?:text|effect)(?:\s+|=)\\?\"")


def test_the_users_part_of_the_readme_fits_in_15_kb():
    user_part = README[:README.index("\n## Command reference\n")]
    assert len(user_part.encode("utf-8")) <= USER_PART_LIMIT, len(user_part.encode("utf-8"))


def test_the_readme_links_every_docs_page_and_every_link_resolves():
    for name in ("guarantees.md", "performance.md", "layout.md"):
        assert "](docs/%s" % name in README, name
        assert (REPO / "docs" / name).is_file(), name
    for document in [REPO / "README.md"] + DOCS:
        text = document.read_text("utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target:
                assert (document.parent / target).exists(), (document.name, target)


# --------------------------------------------------------------------------
# docs/guarantees.md: each guarantee names tests that exist

def named_tests(text: str) -> list:
    """(file, test or None) for each test the table's "shown by" column names.

    A cell names `test_x.py::test_y`, `::test_z` (in the file named last), or a whole `test_x.py`."""
    named, current = [], None
    for row in text.splitlines():
        if not row.startswith("| ") or row.startswith("| guarantee "):
            continue
        shown_by = row.rstrip(" |").rsplit(" | ", 1)[1]
        for span in re.findall(r"`([^`]+)`", shown_by):
            file_name, _, test = span.partition("::")
            current = file_name or current
            named.append((current, test or None))
    return named


def test_named_tests_reads_each_form():
    table = ("| guarantee | shown by |\n|---|---|\n"
             "| One. | `test_a.py::test_one`, `::test_two`, `test_b.py` |\n"
             "| Two. | `test_c.py::test_three` |\n")
    assert named_tests(table) == [("test_a.py", "test_one"), ("test_a.py", "test_two"), ("test_b.py", None),
                                  ("test_c.py", "test_three")]


def test_every_test_the_guarantees_name_exists():
    named = named_tests((REPO / "docs" / "guarantees.md").read_text("utf-8"))
    assert len(named) > 50, named
    defined = {}
    for file_name, test in named:
        path = REPO / "tests" / file_name
        assert path.is_file(), file_name
        if file_name not in defined:
            tree = ast.parse(path.read_text("utf-8"))
            defined[file_name] = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert test is None or test in defined[file_name], "%s::%s" % (file_name, test)


# --------------------------------------------------------------------------
# User text is never shown in double quotes

def test_the_double_quote_check_sees_each_form():
    for shown in ['--text "x"', "--effect  \"x\"", '--text="x"', 'epilog --text \\"x\\"']:
        assert DOUBLE_QUOTED_TEXT.search(shown), shown
    for safe in ["--text 'x'", "--text -", '"--text is empty"', "--text '\"quoted\" inside'"]:
        assert not DOUBLE_QUOTED_TEXT.search(safe), safe


@pytest.mark.parametrize("path", [REPO / "README.md"] + DOCS, ids=lambda path: path.name)
def test_no_document_double_quotes_user_text(path):
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        assert not DOUBLE_QUOTED_TEXT.search(line), "%s:%d: %s" % (path.name, number, line)


def test_no_help_text_double_quotes_user_text(tmp_path):
    assert not DOUBLE_QUOTED_TEXT.search(notes.__doc__)
    for command in [[]] + [[name] for name in notes._COMMANDS]:
        result = run_notes(*command, "--help", folder=tmp_path / "unused")
        assert result.code == 0 and "usage:" in result.stdout, result
        assert not DOUBLE_QUOTED_TEXT.search(result.stdout), (command, result.stdout)


# --------------------------------------------------------------------------
# The README's test command: what CI runs, and what pyproject's test extra holds

def readme_test_command() -> str:
    (command,) = [line for line in README.splitlines() if line.startswith("python3 -m venv .venv && ")]
    return command


def test_ci_runs_the_readme_test_command_then_the_long_set():
    lines = (REPO / ".ci" / "run").read_text("utf-8").splitlines()
    command = readme_test_command()
    assert command in lines
    after = [line for line in lines[lines.index(command) + 1:] if line and not line.startswith("#")]
    # What the long set needs that pip does not bring (the real MCP clients), then the long set itself.
    assert after[0].startswith("npm install --prefix .ci ")
    assert after[-1] == ".venv/bin/python -m pytest -q -m long"


def test_the_readme_test_command_installs_the_test_extra():
    pyproject = (REPO / "pyproject.toml").read_text("utf-8")
    extra = ast.literal_eval(re.search(r"^test = (\[.*\])$", pyproject, re.M).group(1))
    words = shlex.split(readme_test_command().split(" && ")[1])
    assert words[:4] == [".venv/bin/python", "-m", "pip", "install"]
    requirements = [word for word in words[4:] if not word.startswith("-")]
    normal = [re.sub(r"\s+", "", requirement).replace('"', "'") for requirement in requirements]
    assert normal == [re.sub(r"\s+", "", requirement) for requirement in extra]
    assert any("python_version>='3.10'" in requirement for requirement in normal), normal


# ==========================================================================
# The two contracts carry the rules a model needs, within their budget

FENCE = re.compile(r"\s*(```|~~~)")
HEADING = re.compile(r"(#+)\s+(.*)")


def section(name: str, title: str) -> str:
    """The body of the first section of `name` whose heading matches the regex `title`
    (case-insensitive), up to the next heading of the same or a higher level."""
    body, level, fenced = None, 0, False
    for line in (REPO / name).read_text("utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else HEADING.match(line)
        if body is None:
            if heading and re.search(title, heading.group(2), re.IGNORECASE):
                body, level = [], len(heading.group(1))
            continue
        if heading and len(heading.group(1)) <= level:
            break
        body.append(line)
    assert body is not None, "%s has no section titled like %r" % (name, title)
    return "\n".join(body)


def says(text: str, *terms) -> None:
    """Each term (or one of a tuple of alternatives) occurs in text, ignoring case and line breaks."""
    flat = " ".join(text.split()).lower()
    for term in terms:
        options = term if isinstance(term, tuple) else (term,)
        assert any(option.lower() in flat for option in options), "missing %r in:\n%s" % (term, text)




CONTRACTS = ("protocol.md", "note-io.md")


def contract(name: str) -> str:
    return (REPO / name).read_text("utf-8")


def occurrences(phrase: str) -> int:
    """How often a phrase occurs in both contracts together, ignoring case and line breaks."""
    return sum(" ".join(contract(name).split()).lower().count(phrase.lower()) for name in CONTRACTS)


# Issue 21, point 1: a model reads both files at every session start.
def test_the_contracts_fit_their_budget():
    sizes = {name: len((REPO / name).read_bytes()) for name in CONTRACTS}
    assert sum(sizes.values()) <= 24000, sizes
    assert sizes["note-io.md"] <= 9000, sizes


# Issue 21, point 2: a rule's meaning does not hang on text far away.
POINTER = re.compile(r"`(?:protocol|note-io)\.md`(?:, \*[^*]+\*)?|(?<!\*)\*[A-Z][^*]*\*(?!\*)"
                     r"|\bsections? \d|§")


def test_the_contracts_point_at_each_other_at_most_ten_times():
    pointers = [match for name in CONTRACTS for match in POINTER.findall(contract(name))]
    assert len(pointers) <= 10, pointers


def test_every_italic_pointer_names_a_heading():
    headings = {re.sub(r"^[\d.]+\s+", "", match.group(2)).lower()
                for name in CONTRACTS for match in HEADING.finditer(contract(name))}
    for name in CONTRACTS:
        for pointer in re.findall(r"(?<!\*)\*([A-Z][^*]*)\*(?!\*)", contract(name)):
            assert pointer.lower() in headings, (name, pointer)


# Issue 21, point 2: each contradiction the first edition carried is settled once.
@pytest.mark.parametrize("phrase", [
    "synthesis starts in that turn",                   # when SYNTHESIS may start
    "`shared` for your proposal they took",             # how a confirmed proposal is labelled
    "read back only when",                             # the readback cases, a past point among them
    "a text holds no note id",                         # ids go in links, never in a text
    "a checkpoint is",                                 # when to export again
    "naming who or what owns",                         # a new owner is a source note, not a scope change
    "go ahead without its answer or puts it off",      # open or deferred: whether the artifact waits
    "one note for the set",                            # content the operator asks for is a proposal
    "text beginning `SYNTHESIS`",                      # SYNTHESIS starts with a mode note so worded
    "a conversation is one chat",                      # conversation, session, session folder
    "after a receipt that warns",                      # verify after a warning is a readback case
])
def test_each_settled_rule_is_stated_once(phrase):
    assert occurrences(phrase) == 1, phrase


def test_synthesis_starts_once_nothing_is_pending_or_the_operator_goes_on():
    says(section("protocol.md", r"^approval$"), "`recap`", "nothing pending", "settle the last one",
         "go on anyway", "deferring each gate still open", "assumption to confirm", "list each pending item",
         "reversible default", "lapses", "written again", "earlier conversation")


def test_readback_covers_a_past_point_and_the_checkpoint_rule():
    text = section("protocol.md", r"^7\. readback")
    says(text, "write-only", "past point", "re-entry", "before synthesis", "`recap`", "tail --grep", "show")
    says(text, "a checkpoint is", "leaving", "deliver", "export", "only there", "which file to keep", "`keep`",
         "`tell_operator`", "only copy")
    # How to spot a later export is restore's tell_operator to say (test_export pins it); passing it on is the duty.
    says(text, "restore", "as the refusal shows", "pass on `tell_operator`", "readING_ALIGNMENT",
         "whatever the last `mode` note says", "say so in one line")
    says(text, "--compact")


def test_no_example_text_names_a_note_id():
    for name in CONTRACTS:
        for text in example_texts(name):
            assert not re.search(r"\bn\d{5}\b", text), (name, text)


def test_a_new_owner_is_a_source_note_and_scope_is_said_as_a_principle():
    text = section("protocol.md", r"^1\. states")
    says(text, "start of the turn", "whole turn", "a deliverable", "a kind of user", "a place it runs",
         "never does", "is a `source` note", "replacing an owner", "own answer does not")


# Issue 21, point 3: principles, not one scenario's patches.
@pytest.mark.parametrize("noun", ["SMS", "phone line", "holiday", "clinic", "patient", "therapist", "payment",
                                  "Workspace", "receptionist"])
def test_no_rule_names_a_trial_scenarios_nouns(noun):
    for name in CONTRACTS:
        assert not re.search(r"\b%s" % re.escape(noun), contract(name), re.IGNORECASE), (name, noun)


# Issue 21, point 3: every example obeys the labelling rule it sits beside.
def example_appends(name: str) -> list:
    """Each note a document's examples append, as a dict of its options (batch lines included)."""
    notes = []
    text = contract(name)
    for block in code_blocks(text, "bash"):
        lines = block.splitlines()
        for index, line in enumerate(lines):
            words = shlex.split(line) if line.startswith("python3 -S ") else []
            if "append" not in words:
                continue
            options = words[words.index("append") + 1:]
            if options[:2] == ["--batch", "-"]:
                end = lines.index("EOF", index + 1)
                notes.extend(json.loads(body) for body in lines[index + 1:end])
            else:
                notes.append(dict(zip([option.lstrip("-") for option in options[::2]], options[1::2])))
    for snippet in code_blocks(text, "python"):
        listed = next(node for node in ast.walk(ast.parse(snippet)) if isinstance(node, ast.List))
        words = [element.value if isinstance(element, ast.Constant) else "?" for element in listed.elts]
        options = words[words.index("append") + 1:]
        notes.append(dict(zip([option.lstrip("-") for option in options[::2]], options[1::2])))
    return notes


def example_texts(name: str) -> list:
    return [note["text"] for note in example_appends(name) if note.get("text") not in (None, "-")]


@pytest.mark.parametrize("name", CONTRACTS)
def test_every_example_note_carries_both_labels(name):
    notes = example_appends(name)
    assert len(notes) >= 4, notes  # the examples are there to check
    for note in notes:
        assert note.get("provenance") in ("op", "model", "shared"), note
        assert note.get("evidence") in ("declared", "inferred", "observed", "validated"), note


def test_the_worked_turn_leaves_the_state_its_rules_say(tmp_path):
    """protocol.md's example turn: the changed proposal replaced by the operator's note, the rest a
    proposal of its own, the owner a source note, the gate still open with what is left, by that note."""
    for command, stdin in document_commands("protocol.md"):
        words = shlex.split(command)
        assert words[:3] == ["python3", "-S", SANDBOX + "/notes.py"], command
        result = run_notes(*words[3:], folder=tmp_path, input=(stdin or "").encode("utf-8"))
        assert result.code == 0, (command, result)
    state = recap(tmp_path)
    assert [note["id"] for note in state["unconfirmed"]] == ["n00004"]
    assert [(note["id"], note.get("replaces"), note["provenance"]) for note in state["decisions"]] == [
        ("n00003", "n00002", "op")]
    assert [(gate["id"], gate["status"], gate["update_id"], gate["update_provenance"])
            for gate in state["open_gates"]] == [("n00001", "open", "n00006", "op")]
    assert [note["id"] for note in state["sources"]] == ["n00005"]


def test_the_labelling_rule_says_every_note_carries_both():
    text = section("protocol.md", r"lenses, tension, labels")
    says(text, "every note carries two labels", "`op` for what the operator stated", "`model` for what you proposed",
         "`shared` for your proposal they took", "pasted", "observed", "never by repetition",
         "whoever raised its question", "whoever settled or changed it", "takes nothing specific", "is `model`",
         "not of whoever words its effect", "even where you word it", "assent too",
         "words alone is theirs (`op`, `declared`)")


# Issue 21, point 4: the shaping method is back.
def test_the_shaping_method_is_restored():
    text = section("protocol.md", r"shaping method")
    says(text, "brainstorm", "fewer layers, parts and assumptions", "only if it changes behaviour",
         "work back from the outcome", "constraints", "mechanism", "split a structure that mixes",
         "apart", "one source of truth", "artifact family", "smallest output shape", "local to its purpose")
    assert 100 <= len(text.split()) <= 200, len(text.split())
    says(section("protocol.md", r"lenses, tension"), "without evidence", "not a pattern", "independent signals",
         "same inference")


def test_the_other_first_edition_rules_are_kept():
    says(section("protocol.md", r"^2\. authority"), "current explicit instruction", "memory notes",
         "never authority", "fail closed", "one bounded question")
    gates = section("protocol.md", r"^5\. gates")
    says(gates, "scope", "hard constraints", "runtime", "persistence", "lifecycle", "source of truth",
         "success criteria", "naming", "ASK", "PROPOSE", "DEFER", "STOP", "answers part", "decision", "source",
         "until the operator lets the work go ahead", "supersedes the note that closed")
    signals = section("protocol.md", r"^6\. signals")
    for kind in ("mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact"):
        assert "| `%s` |" % kind in signals, kind
    says(signals, "checklist", "--about", "no discard note exists", "reopen")
    says(section("protocol.md", r"^4\. lenses"), "unconfirmed", "--ref", "`discard`", "until a note replaces it")
    says(section("protocol.md", r"^8\. synthesis"), "stands alone", "audit document", "not decided",
         "redesign", "delivering ends synthesis", "`artifact` note", "keep that file",
         "out of date", "settled while a gate weighs it")
    says(section("note-io.md", r"^links$"), "--ref", "--about", "--by", "--batch -", "all of them or none",
         "@K", "one batch", "none if nothing does")
    says(section("note-io.md", r"^receipts$"), "Memory: <type> appended.", "one per note", "in order",
         "duplicate", "recovered", "warnings", "not saved", "never claim")
    says(section("note-io.md", r"^reading$"), "`pending`", "recap --help",
         "--compact", "--accept-damaged")
    says(section("note-io.md", r"^receipts$"), "`created`", "reset", "restore", "once each")
    says(section("note-io.md", r"^secrets$"), "rotate", "`source` note", "never its value", "redact")
    for name in CONTRACTS:
        says(section(name, r"failure and success"), "broken", ("holds when", "kept"))


# Issue 21, point 5: reference stays in the README and --help.
@pytest.mark.parametrize("detail", ["2,000", "AWS", "bad_checksum", "max-bytes", "U+", "256 MiB", "export_lag",
                                    "SHAPING_NOTES_LOCK_WAIT"])
def test_the_contracts_leave_reference_detail_to_the_tool(detail):
    for name in CONTRACTS:
        assert detail not in contract(name), (name, detail)


# Issue 21, point 6: the hosts, in one table.
def hosts_table() -> dict:
    """Host name -> its cells (session folder, command prefix, uploads, how the operator keeps the export)."""
    rows = {}
    for line in section("note-io.md", r"^hosts$").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 5 and not set(cells[0]) <= set("-") and cells[0] != "Host":
            rows[cells[0]] = dict(zip(("folder", "prefix", "uploads", "keeps"), cells[1:]))
    return rows


def test_the_hosts_table_names_four_hosts_and_how_the_export_is_kept():
    rows = hosts_table()
    assert list(rows) == ["ChatGPT", "Claude.ai", "Local, agent", "MCP"], rows
    assert "`sandbox:`" in rows["ChatGPT"]["keeps"] and "outputs" in rows["Claude.ai"]["keeps"]
    assert "--session" in rows["Local, agent"]["folder"] and "`session`" in rows["MCP"]["folder"]
    says(section("note-io.md", r"^hosts$"), "read-only", "/tmp", "isError", "exit 3", "retry once")
    for name in CONTRACTS:
        assert "--dir /tmp" not in contract(name), name


HOSTS = {
    # notes.py's path, the folder the operator can download from.
    "ChatGPT": ("/mnt/data/notes.py", "/mnt/data/"),
    "Claude.ai": ("/mnt/project/notes.py", "/mnt/user-data/outputs/"),
}


def run_in(sandbox, words, expect=0):
    """Run a documented command with the host's /mnt mapped into the sandbox folder."""
    mapped = [str(sandbox) + word if word.startswith("/mnt/") else word for word in words[1:]]
    completed = subprocess.run([sys.executable] + mapped, capture_output=True, text=True, timeout=60)
    assert completed.returncode == expect, (words, completed.stdout, completed.stderr)
    return json.loads(completed.stdout)


def sandbox_with_notes(root, script):
    """A fresh sandbox: only notes.py, where the host puts the Project files."""
    target = root / script.lstrip("/")
    target.parent.mkdir(parents=True)
    shutil.copy(str(NOTES), str(target))
    return root


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_the_hosts_table_carries_a_session_from_one_sandbox_to_the_next(host, tmp_path):
    script, downloadable = HOSTS[host]
    row = hosts_table()[host]
    prefix = shlex.split(row["prefix"].strip("`"))
    folder, uploads = row["folder"].strip("`"), row["uploads"].strip("`")
    assert prefix[2] == script and folder.startswith(downloadable.rstrip("/")), row
    first = sandbox_with_notes(tmp_path / "first", script)
    project_before = folder_digest(first / "mnt/project")
    run_in(first, prefix + ["init"])
    append = prefix + ["append", "--type", "decision", "--provenance", "op", "--evidence", "declared",
                       "--text", "Lending opens 9:00 to 17:00."]
    assert run_in(first, append)["note_id"] == "n00001"
    exported = run_in(first, prefix + ["export"])["path"]
    assert exported == str(first) + folder + "/session_export.json", exported
    # Claude.ai's Project files are read-only copies: the session must live elsewhere.
    assert folder_digest(first / "mnt/project") == project_before
    # The operator downloads the export and uploads it into a new conversation.
    second = sandbox_with_notes(tmp_path / "second", script)
    upload = uploads + "/session_export.json"
    (second / upload.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(exported, str(second / upload.lstrip("/")))
    assert run_in(second, prefix + ["restore", upload])["record_count"] == 1
    recap = run_in(second, prefix + ["recap"])
    assert [item["text"] for item in recap["decisions"]] == ["Lending opens 9:00 to 17:00."]


# Issue 14, point 4: texts with quotes, $ or backticks arrive byte for byte.
def safe_text_section() -> str:
    return section("note-io.md", r"text with quotes")


def last_text(folder) -> str:
    lines = (folder / "session_notes.jsonl").read_text("utf-8").splitlines()
    return json.loads(lines[-1])["text"]


def shell_run(script: str, folder):
    """Run shell lines as bash would, with the sandbox folder and this interpreter put in."""
    script = script.replace("/mnt/data", str(folder)).replace("python3 -S ", shlex.quote(sys.executable) + " -S ")
    completed = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, (script, completed.stdout, completed.stderr)


def sandbox(tmp_path):
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    return tmp_path


def test_safe_text_section_names_the_three_ways():
    says(safe_text_section(), "single quotes", "--text -", "<<'EOF'", "subprocess.run", "no shell",
         "shell=True")


def test_a_single_quoted_text_arrives_as_written(tmp_path):
    line = next(line for line in code_blocks(safe_text_section(), "bash")[0].splitlines()
                if line.startswith("python3 -S ") and "--text" in line and "<<" not in line)
    words = shlex.split(line)
    expected = words[words.index("--text") + 1]
    assert "$" in expected and "`" in expected and '"' in expected
    folder = sandbox(tmp_path)
    shell_run(line, folder)
    assert last_text(folder) == expected


def test_a_quoted_here_document_arrives_as_written(tmp_path):
    block = next(block for block in code_blocks(safe_text_section(), "bash") if "<<'EOF'" in block)
    body = block.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    assert "$" in body and "`" in body and "'" in body
    folder = sandbox(tmp_path)
    shell_run(block, folder)
    assert last_text(folder) == body.strip()


def test_an_argument_list_arrives_as_written(tmp_path):
    snippet = code_blocks(safe_text_section(), "python")[0]
    assigned = next(node for node in ast.parse(snippet).body
                    if isinstance(node, ast.Assign) and node.targets[0].id == "text")
    expected = ast.literal_eval(assigned.value)
    assert "$" in expected and "`" in expected and '"' in expected and "'" in expected
    assert "shell=True" not in snippet
    folder = sandbox(tmp_path)
    runnable = snippet.replace('"python3"', repr(sys.executable)).replace("/mnt/data", str(folder))
    completed = subprocess.run([sys.executable, "-c", runnable], capture_output=True, text=True, timeout=60)
    assert json.loads(completed.stdout)["ok"] is True, completed
    assert last_text(folder) == expected


@pytest.mark.parametrize("name", ["README.md", "protocol.md", "note-io.md"])
def test_no_shown_command_double_quotes_a_dollar_or_backtick(name):
    """A model copies these lines: a double-quoted $ or backtick would be rewritten by the shell."""
    text = (REPO / name).read_text("utf-8")
    for block in code_blocks(text, "bash"):
        for line in block.splitlines():
            if line.startswith("python3 -S "):
                for quoted in double_quoted(line):
                    live = re.sub(r"\\[$`]", "", quoted)  # an escaped $ or backtick stays as it is
                    assert "$" not in live and "`" not in live, (name, line)


def double_quoted(line: str) -> list:
    """The double-quoted parts of a shell line (single-quoted parts are left alone by the shell)."""
    parts, quote, escaped = [], None, False
    for character in line:
        if escaped:
            escaped = False
        elif character == "\\" and quote != "'":
            escaped = True
        elif quote is None and character in "'\"":
            quote = character
            if quote == '"':
                parts.append("")
            continue
        elif character == quote:
            quote = None
            continue
        if quote == '"':
            parts[-1] += character
    return parts
