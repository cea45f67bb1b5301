"""Every command the documents show runs as shown against the current notes.py.

A command is a line inside a fenced code block that starts with ``python3 -S ``.
For each document, the commands run in order in a fresh folder holding a copy
of notes.py, with /mnt/data (the ChatGPT sandbox folder) pointing there.
A command that ends in a quoted here-document (``<<'EOF'``) gets the lines up
to the delimiter on its standard input.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import NOTES, REPO, Result, assert_no_traceback

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
