"""Where notes live, and the install: --dir, then SHAPING_NOTES_DIR, then the folder that
holds notes.py unless an installer put it there; hints that name the command as it was
run; `pip install .` giving `shaping-notes` and `python -m notes`; an sdist that carries
what the tests need."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import NOTES, REPO, assert_refused, folder_digest, notes, read_records, run_notes

VERSION = notes.__version__
# What a copy of the project needs to be installed, built and tested from.
PROJECT_FILES = ("notes.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "protocol.md",
                 "note-io.md", ".ci", "bench", "docs", "tests")


def without_variable(**extra) -> dict:
    """The environment of this run, without SHAPING_NOTES_DIR unless given."""
    env = {key: value for key, value in os.environ.items() if key != "SHAPING_NOTES_DIR"}
    env.update(extra)
    return env


def script_in(folder: Path) -> Path:
    """A copy of notes.py in folder (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(str(NOTES), str(folder / "notes.py"))
    return folder / "notes.py"


APPEND = ("append", "--type", "decision", "--text", "Notes live where they are asked to.")


# --------------------------------------------------------------------------
# The order: --dir, then SHAPING_NOTES_DIR, then the folder holding notes.py

def test_shaping_notes_dir_is_the_session_folder_without_dir(tmp_path):
    script = script_in(tmp_path / "tool")
    result = run_notes(*APPEND, script=script, cwd=tmp_path, env=without_variable(SHAPING_NOTES_DIR="kept"))
    assert result.code == 0, result
    assert result.receipt["path"] == str(tmp_path / "kept" / "session_notes.jsonl")  # relative: from the cwd
    assert sorted(os.listdir(tmp_path / "tool")) == ["notes.py"]
    home = tmp_path / "home"
    home.mkdir()
    result = run_notes("tail", script=script, cwd=tmp_path,
                       env=without_variable(SHAPING_NOTES_DIR="~/../kept", HOME=str(home)))
    assert result.code == 0 and result.receipt["count"] == 1, result


def test_dir_beats_shaping_notes_dir(tmp_path):
    script = script_in(tmp_path / "tool")
    env = without_variable(SHAPING_NOTES_DIR=str(tmp_path / "from-variable"))
    result = run_notes(*APPEND, folder=tmp_path / "from-dir", script=script, env=env)
    assert result.code == 0 and result.receipt["path"] == str(tmp_path / "from-dir" / "session_notes.jsonl")
    assert not (tmp_path / "from-variable").exists()


def test_without_either_the_folder_holding_notes_py_is_used(tmp_path):
    script = script_in(tmp_path / "tool")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    result = run_notes(*APPEND, script=script, cwd=elsewhere, env=without_variable())
    assert result.code == 0 and result.receipt["path"] == str(tmp_path / "tool" / "session_notes.jsonl")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_shaping_notes_dir_is_refused(tmp_path, value):
    script = script_in(tmp_path / "tool")
    before = folder_digest(tmp_path)
    for command in (APPEND, ("tail",), ("init",)):
        result = run_notes(*command, script=script, cwd=tmp_path, env=without_variable(SHAPING_NOTES_DIR=value))
        assert_refused(result, 2, "SHAPING_NOTES_DIR is set but empty", "--dir")
    assert folder_digest(tmp_path) == before
    result = run_notes(*APPEND, folder=tmp_path / "given", script=script, env=without_variable(SHAPING_NOTES_DIR=value))
    assert result.code == 0, result  # --dir needs no variable at all


# --------------------------------------------------------------------------
# An installer's folder is never the session folder

INSTALLED_LAYOUTS = {
    "site-packages": ("lib", "python3.11", "site-packages"),
    "dist-packages": ("usr", "lib", "python3", "dist-packages"),
    "pip --target": ("vendor",),  # any name, with the install record beside the module
}


@pytest.mark.parametrize("layout", list(INSTALLED_LAYOUTS))
def test_a_copy_in_an_installed_package_folder_refuses_to_keep_notes_there(tmp_path, layout):
    folder = tmp_path.joinpath(*INSTALLED_LAYOUTS[layout])
    script = script_in(folder)
    if layout == "pip --target":
        (folder / ("shaping_notes-%s.dist-info" % VERSION)).mkdir()
    before = folder_digest(tmp_path)
    for command in (APPEND, ("init",), ("tail",), ("recap",), ("export",)):
        result = run_notes(*command, script=script, cwd=tmp_path, env=without_variable())
        error = assert_refused(result, 2, "installed as a package in %s" % folder, "--dir", "SHAPING_NOTES_DIR",
                               "python3 -S notes.py --dir")
        assert "export SHAPING_NOTES_DIR=" in error
    assert folder_digest(tmp_path) == before
    given = run_notes(*APPEND, script=script, env=without_variable(SHAPING_NOTES_DIR=str(tmp_path / "notes")))
    assert given.code == 0 and read_records(tmp_path / "notes")[0]["seq"] == 1, given


def test_an_mcp_server_in_an_installed_package_folder_refuses_each_note_and_says_why(tmp_path):
    """The server still starts (the host sees it), but every tool call is refused, with the way out."""
    folder = tmp_path.joinpath(*INSTALLED_LAYOUTS["site-packages"])
    script = script_in(folder)
    before = folder_digest(tmp_path)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "append", "arguments": {"type": "decision", "text": "Kept nowhere."}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recap", "arguments": {}}},
    ]
    completed = subprocess.run([sys.executable, "-S", str(script), "mcp"], cwd=str(tmp_path), env=without_variable(),
                               input="".join(json.dumps(request) + "\n" for request in requests).encode(),
                               capture_output=True, timeout=60)
    assert completed.returncode == 0, completed
    answers = {answer["id"]: answer["result"] for answer in map(json.loads, completed.stdout.decode().splitlines())}
    for call in (2, 3):
        assert answers[call]["isError"] is True
        error = answers[call]["structuredContent"]["error"]
        assert "installed as a package in %s" % folder in error and "SHAPING_NOTES_DIR" in error, error
    assert folder_digest(tmp_path) == before


def test_a_checkout_with_build_output_beside_notes_py_is_not_an_install(tmp_path):
    # `pip install .` and `python -m build` leave shaping_notes.egg-info in the
    # checkout: that folder stays a working folder for notes, as in v0.
    script = script_in(tmp_path / "checkout")
    (tmp_path / "checkout" / "shaping_notes.egg-info").mkdir()
    result = run_notes(*APPEND, script=script, cwd=tmp_path, env=without_variable())
    assert result.code == 0 and result.receipt["path"] == str(tmp_path / "checkout" / "session_notes.jsonl")


# --------------------------------------------------------------------------
# Hints name the command as it was run

def test_hints_name_the_command_as_it_was_run(tmp_path):
    folder = tmp_path / "tool"
    script_in(folder)
    # A stand-in for the script pip writes: same name, imports notes and calls main.
    console = folder / "shaping-notes"
    console.write_text("import sys\nsys.path.insert(0, %r)\nfrom notes import main\nsys.exit(main())\n" % str(folder))
    runs = {
        "python3 -S notes.py": [sys.executable, "-S", str(folder / "notes.py")],
        "python3 -m notes": [sys.executable, "-m", "notes"],
        "shaping-notes": [sys.executable, str(console)],
    }
    empty = tmp_path / "empty"
    for shown, command in runs.items():
        def run(*args):
            completed = subprocess.run(command + list(args), cwd=str(folder), capture_output=True, text=True,
                                       env=without_variable(), timeout=60)
            return completed.returncode, completed.stdout
        code, out = run("tail", "-n", "3")
        assert code == 2 and "(see: %s tail --help)" % shown in out, (shown, out)
        code, out = run("--dir", str(empty), "tail")
        assert code == 2 and "start one with: %s --dir %s init" % (shown, empty) in out, (shown, out)
        code, out = run("append", "--help")
        assert code == 0 and "example:\n  %s append --type" % shown in out, (shown, out)
    version = subprocess.run(runs["shaping-notes"] + ["--version"], capture_output=True, text=True, timeout=60)
    assert (version.returncode, version.stdout) == (0, "shaping-notes %s\n" % VERSION)


# --------------------------------------------------------------------------
# Installed with pip into a fresh virtual environment (one, shared by these tests)

def copy_project(destination: Path) -> Path:
    destination.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(str(source), str(destination / name),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(str(source), str(destination / name))
    return destination


class Installed:
    """A virtual environment with shaping-notes installed from a copy of the project."""

    def __init__(self, root: Path):
        self.project = copy_project(root / "project")
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
        bin_dir = root / "venv" / ("Scripts" if os.name == "nt" else "bin")
        self.python, self.command = str(bin_dir / "python"), str(bin_dir / "shaping-notes")
        completed = subprocess.run([self.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                    str(self.project)], capture_output=True, text=True, timeout=600)
        assert completed.returncode == 0, completed.stderr
        self.site = Path(subprocess.run([self.python, "-c", "import notes, os; print(os.path.dirname(notes.__file__))"],
                                        capture_output=True, text=True, check=True, cwd=str(root)).stdout.strip())
        self.root = root

    def command_line(self, argv: list, cwd, **env):
        return subprocess.run(argv, capture_output=True, text=True, cwd=str(cwd), env=without_variable(**env),
                              timeout=60)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    return Installed(tmp_path_factory.mktemp("installed"))


def snapshot(folder: Path) -> dict:
    """Every file under folder with its size and modification time: cheap, and enough to see a write."""
    seen = {}
    for root, dirs, files in os.walk(str(folder)):
        for name in dirs + files:
            path = os.path.join(root, name)
            status = os.lstat(path)
            seen[os.path.relpath(path, str(folder))] = (status.st_size, status.st_mtime_ns)
    return seen


def test_installed_command_and_module_print_the_version(installed, tmp_path):
    command = installed.command_line([installed.command, "--version"], tmp_path)
    assert (command.returncode, command.stdout) == (0, "shaping-notes %s\n" % VERSION), command
    module = installed.command_line([installed.python, "-m", "notes", "--version"], tmp_path)
    assert (module.returncode, module.stdout) == (0, "notes.py %s\n" % VERSION), module
    assert installed.site.name == "site-packages" and (installed.site / "notes.py").is_file()
    assert list(tmp_path.iterdir()) == []


def test_installed_command_without_a_folder_refuses_and_writes_nothing(installed, tmp_path):
    before = snapshot(installed.site)
    for argv in ([installed.command] + list(APPEND), [installed.command, "tail"],
                 [installed.python, "-m", "notes"] + list(APPEND)):
        completed = installed.command_line(argv, tmp_path)
        assert completed.returncode == 2, completed
        error = completed.stdout
        for words in ("installed as a package in %s" % installed.site, "--dir", "SHAPING_NOTES_DIR"):
            assert words in error, (words, error)
        shown = "shaping-notes" if argv[0] == installed.command else "python3 -m notes"
        assert "for example: %s --dir ~/shaping init" % shown in error, error
    assert snapshot(installed.site) == before
    assert not any(name.startswith("session_") for name in os.listdir(str(installed.site)))
    assert list(tmp_path.iterdir()) == []


def test_installed_command_keeps_notes_in_shaping_notes_dir(installed, tmp_path):
    folder = tmp_path / "notes"
    appended = installed.command_line([installed.command] + list(APPEND), tmp_path, SHAPING_NOTES_DIR=str(folder))
    assert appended.returncode == 0 and '"path": "%s/session_notes.jsonl"' % folder in appended.stdout, appended
    tail = installed.command_line([installed.python, "-m", "notes", "tail"], tmp_path, SHAPING_NOTES_DIR=str(folder))
    assert tail.returncode == 0 and '"count": 1' in tail.stdout, tail
    other = tmp_path / "other"
    given = installed.command_line([installed.command, "--dir", str(other)] + list(APPEND), tmp_path,
                                   SHAPING_NOTES_DIR=str(folder))
    assert given.returncode == 0 and len(read_records(other)) == 1 and len(read_records(folder)) == 1


def test_installed_hints_show_shaping_notes(installed, tmp_path):
    mistake = installed.command_line([installed.command, "tail", "-n", "3"], tmp_path, SHAPING_NOTES_DIR=str(tmp_path))
    assert mistake.returncode == 2 and "(see: shaping-notes tail --help)" in mistake.stdout, mistake
    empty = installed.command_line([installed.command, "summary"], tmp_path, SHAPING_NOTES_DIR=str(tmp_path))
    assert empty.returncode == 2 and "start one with: shaping-notes --dir %s init" % tmp_path in empty.stdout, empty
    usage = installed.command_line([installed.command, "append", "--help"], tmp_path)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: shaping-notes append")
    assert "example:\n  shaping-notes append --type decision" in usage.stdout


def test_sdist_carries_the_tests_fixtures_and_contracts(installed, tmp_path):
    """The source distribution holds what `pytest` needs to run from it, and no session file."""
    built = tmp_path / "dist"
    completed = subprocess.run(
        [installed.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "setuptools>=77"],
        capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    completed = subprocess.run(
        [installed.python, "-c", "import sys; from setuptools import build_meta; "
                                 "print(build_meta.build_sdist(sys.argv[1]))", str(built)],
        cwd=str(installed.project), capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    archive = built / completed.stdout.strip().splitlines()[-1]
    with tarfile.open(str(archive)) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    wanted = {"notes.py", "LICENSE", "README.md", "protocol.md", "note-io.md", "pyproject.toml", ".ci/run",
              "bench/bench.py"} | {"docs/" + path.name for path in (REPO / "docs").glob("*.md")}
    for root, _, files in os.walk(str(REPO / "tests")):
        if "__pycache__" not in root:
            wanted.update(os.path.relpath(os.path.join(root, name), str(REPO)) for name in files
                          if not name.endswith(".pyc"))
    assert wanted <= names, sorted(wanted - names)
    assert not [name for name in names if re.match(r"session_|\.session_", name)]
