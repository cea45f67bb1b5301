"""The two contracts carry the rules a model needs (issue 14, points 9 to 16; issue 12's hosts).

Each check finds a section by its heading and looks for the key terms of one rule, so that
deleting the section or the rule fails, while rewording around those terms does not. What a
model copies from the contracts is also run: the host notes as a two-sandbox round trip, and
the three safe ways to pass a text holding quotes, `$` or backticks.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import NOTES, REPO, code_blocks, folder_digest

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




# Point 9: when a state change takes effect; what changes the scope.
def test_state_changes_take_effect_at_the_start_of_the_turn():
    text = section("protocol.md", r"when a state changes")
    says(text, "start of the turn", "first holds", "whole turn")
    says(text, "channel", "user group", "host", "data owner", "deliverable", "not a scope change")


# Point 10: operator facts and constraints; what may close a gate.
def test_operator_statements_are_recorded_as_operator_declared():
    says(section("protocol.md", r"what the operator states"),
         "`decision`", "`source`", "--provenance op --evidence declared")


def test_a_gate_closes_after_the_decision_or_source_that_settles_it():
    text = section("protocol.md", r"^4\.3 gate signals")
    says(text, "settles", "`decision`", "`source`", "closing update", "first")


# Point 11: synthesis with a gate still open; approval while a question is pending.
def test_an_open_gate_can_be_deferred_explicitly_before_synthesis():
    says(section("protocol.md", r"open gates and unconfirmed"),
         "--status deferred", "explicitly", "stays valid", "changes the scope")
    says(section("protocol.md", r"^10\.2 writing"), "deferred", "mark", "not decided")


def test_approval_given_while_a_question_is_pending_stays_valid():
    says(section("protocol.md", r"what counts as approval"),
         "pending", "stays valid", "changes the scope", "lapses")


# Point 12: the model's own proposals.
def test_model_proposals_stay_unconfirmed_until_confirmed_or_dropped():
    text = section("protocol.md", r"your proposals")
    says(text, "--provenance model", "`unconfirmed`", "before synthesis", "--ref",
         ("--provenance shared", "--provenance op"), "`discard`", "silence confirms nothing")


# Point 13: readback in SHAPING; several appends in one turn.
def test_shaping_reads_back_in_the_readback_cases():
    text = section("protocol.md", r"^SHAPING$")
    says(text, "except", "readback", "recap", "re-entry", "synthesis needs")
    assert "Do not read the log (section 9)." not in text


def test_several_appends_in_one_turn_get_one_marker_line_each():
    says(section("protocol.md", r"operator-facing output"), "one marker line per append")


# Point 14: checkpoints in a hosted sandbox.
@pytest.mark.parametrize("name, title", [("protocol.md", r"checkpoints and re-entry"),
                                         ("note-io.md", r"checkpoints in a hosted sandbox")])
def test_checkpoints_export_and_name_the_file_to_keep(name, title):
    says(section(name, title), "each checkpoint", "after a restore", "leav", "which file", "keep",
         "lacks", "not zero", "export")


# Point 15: after delivery.
def test_delivery_leads_to_shaping_an_artifact_note_and_two_files_to_keep():
    text = section("protocol.md", r"after delivery")
    says(text, "ends synthesis", "next turn starts in shaping", "`artifact` note", "beside the export",
         "keep both", "not the artifact", "fresh sandbox", "out of date")


# Point 16: reopening a path rejected before the log existed.
def test_a_path_rejected_before_the_log_existed_is_reopened_by_a_decision():
    says(section("protocol.md", r"superseding and reopening"),
         "before the log existed", "no `discard`", "`decision` without `--ref`", "--provenance op")


# Issue 12, section 2: the host facts the contracts rest on.
def test_host_notes_name_where_notes_live_and_how_to_export_and_restore():
    text = section("note-io.md", r"where the notes live")
    says(text, "/mnt/data", "/mnt/project", "read-only", "/mnt/user-data/uploads", "/mnt/user-data/outputs",
         "--dir /mnt/user-data/outputs/shaping", "export", "restore")
    for name in ("protocol.md", "note-io.md"):
        assert "--dir /tmp" not in (REPO / name).read_text("utf-8"), name


HOSTS = {
    # notes.py's path, the folder the operator can download from, where uploads land.
    "ChatGPT Projects": ("/mnt/data/notes.py", "/mnt/data/", "/mnt/data/"),
    "Claude.ai": ("/mnt/project/notes.py", "/mnt/user-data/outputs/", "/mnt/user-data/uploads/"),
}


def host_commands(script: str) -> dict:
    """The host notes' inline commands that run `script`, by command name (init, export, restore)."""
    found = {}
    for span in re.findall(r"`(python3 -S [^`]+)`", section("note-io.md", r"where the notes live")):
        words = shlex.split(span)
        if words[2] == script:
            rest = words[3:]
            name = rest[2] if rest[:1] == ["--dir"] else rest[0]
            found.setdefault(name, words)
    return found


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
def test_host_notes_carry_a_session_from_one_sandbox_to_the_next(host, tmp_path):
    script, downloadable, uploads = HOSTS[host]
    commands = host_commands(script)
    assert {"init", "export", "restore"} <= set(commands), commands
    first = sandbox_with_notes(tmp_path / "first", script)
    project_before = folder_digest(first / "mnt/project")
    run_in(first, commands["init"])
    append = commands["init"][:-1] + ["append", "--type", "decision", "--text", "Bookings open 8:00 to 18:00."]
    assert run_in(first, append)["note_id"] == "n00001"
    exported = run_in(first, commands["export"])["path"]
    assert exported.startswith(str(first) + downloadable), exported
    # Claude.ai's Project files are read-only copies: the session must live elsewhere.
    assert folder_digest(first / "mnt/project") == project_before
    # The operator downloads the export and uploads it into a new conversation.
    second = sandbox_with_notes(tmp_path / "second", script)
    upload = commands["restore"][-1]
    assert upload.startswith(uploads), upload
    (second / upload.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(exported, str(second / upload.lstrip("/")))
    assert run_in(second, commands["restore"])["record_count"] == 1
    recap = run_in(second, commands["init"][:-1] + ["recap"])
    assert [item["text"] for item in recap["decisions"]] == ["Bookings open 8:00 to 18:00."]


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
                if line.startswith("python3 -S ") and "<<" not in line)
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
