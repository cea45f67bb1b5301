"""The plain core: one parser that answers mistakes with the way out, a normal exit, any Python."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from conftest import NOTES, REPO, assert_refused, folder_digest, read_records, run_notes


# --------------------------------------------------------------------------
# The version, kept in one place

def test_version_prints_the_one_version_and_exits_0(tmp_path):
    result = run_notes("--version", cwd=tmp_path)
    assert result.code == 0 and result.stderr == ""
    printed = result.stdout.strip()
    assert re.fullmatch(r"notes\.py \d+\.\d+\.\d+", printed), printed
    # pyproject.toml takes the version from notes.py, so the two cannot drift apart.
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'attr = "notes.__version__"' in pyproject
    assert not re.search(r"^version\s*=\s*\"", pyproject, re.MULTILINE)  # no second copy
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------
# Mistakes answered with the way out: exit 2, nothing written, the help named

MISTAKES = [
    (["apend", "--type", "decision", "--text", "x"],
     "unknown command (the first word after the options); did you mean append?", "(see: python3 -S notes.py --help)"),
    (["append", "--type", "Decision", "--text", "x"],
     "unknown type; did you mean decision?", "(see: python3 -S notes.py append --help)"),
    (["append", "--type", "gate", "--status", "close", "--text", "x"],
     "unknown status; did you mean closed?", "(see: python3 -S notes.py append --help)"),
    (["tail", "-n", "3"], "tail has no option -n; use --limit instead", "(see: python3 -S notes.py tail --help)"),
    (["tail", "--limt", "3"], "tail has no option --limt; use --limit instead", "tail --help"),
    (["append", "--type", "decision", "--txt", "x"],
     "append has no option --txt; use --text instead", "(see: python3 -S notes.py append --help)"),
    (["append", "--type", "decision", "--text", "two", "words"],
     "unexpected argument 8 (a word after append", "append --help"),
    (["append", "--text", "x"], "--type is required", "append --help"),
    (["append", "--type", "decision"], "--text is required", "append --help"),
    (["recap", "--format", "markdown"], "unknown format; use one of", "recap --help"),
]


@pytest.mark.parametrize("arguments,mistake,way_out", MISTAKES, ids=[" ".join(m[0][:3]) for m in MISTAKES])
def test_a_mistake_is_named_with_the_way_out(session, arguments, mistake, way_out):
    before = folder_digest(session)
    error = assert_refused(run_notes(*arguments, folder=session), 2, mistake, way_out)
    assert "required" not in error or "is required" in mistake, error  # never hidden behind another error
    assert folder_digest(session) == before


def test_an_empty_dir_is_refused_before_anything_is_touched(tmp_path):
    for arguments in (["append", "--type", "decision", "--text", "x"], ["init"], ["summary"]):
        assert_refused(run_notes("--dir", "", *arguments, cwd=tmp_path), 2, "--dir is empty")
        assert_refused(run_notes("--dir", "  ", *arguments, cwd=tmp_path), 2, "--dir is empty")
    assert list(tmp_path.iterdir()) == []
    # The folder holding notes.py is not touched either.
    assert not (REPO / "session_notes.jsonl").exists() and not (REPO / "session_meta.json").exists()


# --------------------------------------------------------------------------
# A normal exit: profilers and closed outputs

def test_cprofile_runs_the_script_and_prints_its_statistics(session):
    completed = subprocess.run([sys.executable, "-S", "-m", "cProfile", "-s", "cumulative", str(NOTES),
                                "--dir", str(session), "summary"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert '"command": "summary"' in completed.stdout
    assert "function calls" in completed.stdout and "cumulative" in completed.stdout
    assert "Traceback" not in completed.stderr


def test_a_closed_stdout_costs_no_note_and_no_traceback(tmp_path):
    folder = tmp_path / "session"
    completed = subprocess.run(["sh", "-c", '"$@" >&-', "sh", sys.executable, "-S", str(NOTES),
                                "--dir", str(folder), "append", "--type", "decision", "--text", "Kept unprinted."],
                               capture_output=True, timeout=60)
    assert completed.returncode == 0 and completed.stderr == b"", completed
    assert [record["text"] for record in read_records(folder)] == ["Kept unprinted."]


# --------------------------------------------------------------------------
# Any Python: without the C accelerators, and across PyPy and CPython

BLOCKED_ACCELERATORS = """
import runpy, sys
for name in ("_json", "_sha2", "_sha256", "_md5", "_sha1", "_sha3", "_blake2"):
    sys.modules[name] = None  # as on an interpreter that has no such module
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_runs_where_the_private_accelerator_modules_are_missing(tmp_path):
    folder = tmp_path / "session"
    command = [sys.executable, "-S", "-c", BLOCKED_ACCELERATORS, str(NOTES), "--dir", str(folder)]
    appended = subprocess.run(command + ["append", "--type", "gate", "--text", "Café stays open."],
                              capture_output=True, text=True, timeout=60)
    assert appended.returncode == 0, appended.stderr
    verified = run_notes("verify", folder=folder)
    assert verified.code == 0 and verified.receipt["total"] == 1, verified


PYPY = shutil.which("pypy3")


@pytest.mark.long
@pytest.mark.parametrize("writer,checker", [("pypy", "cpython"), ("cpython", "pypy")])
def test_a_log_written_by_one_interpreter_verifies_under_the_other(tmp_path, writer, checker):
    assert PYPY is not None, "pypy3 is not installed: the long set needs it (.ci/run installs it)"
    interpreters = {"pypy": PYPY, "cpython": sys.executable}
    folder = tmp_path / "session"
    for number, text in enumerate(["Gate: host is undecided ✓", "Decision: JSONL, «append-only»"], 1):
        result = run_notes("append", "--type", "decision", "--text", text, "--effect", "Blocks %d." % number,
                           folder=folder, python=interpreters[writer])
        assert result.code == 0 and result.receipt["seq"] == number, result
    for command in ("verify", "summary", "recap", "export"):
        result = run_notes(command, folder=folder, python=interpreters[checker])
        assert result.code == 0 and "warnings" not in result.receipt, result
    # Both interpreters write the same export, but for the time it was taken.
    exports = []
    for name in (writer, checker):
        path = tmp_path / ("%s.json" % name)
        assert run_notes("export", "--output", path, folder=folder, python=interpreters[name]).code == 0
        exports.append(re.sub(rb'"exported_at": "[^"]*"', b"", path.read_bytes()))
    assert exports[0] == exports[1]
