"""The README is for users first; the maintainers' pages in docs/ keep their promises.

- the README up to its command reference fits in 15 KB and links to each docs/ page;
- every test that docs/guarantees.md names exists;
- no example, in the README, in docs/ or in any command's --help, puts user text in
  double quotes (the shell would rewrite a $ or a backtick in it);
- the README's test command is the one CI runs, and installs what pyproject's test
  extra names, environment marker included.
"""

from __future__ import annotations

import ast
import re
import shlex

import pytest

from conftest import REPO, notes, run_notes

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
