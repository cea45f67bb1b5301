"""Where notes live and the install: --dir, SHAPING_NOTES_DIR, the folder of notes.py or the user's data
folder; `pip install .` giving `shaping-notes` and `python -m notes`; an sdist with what the tests need;
notes.py where fcntl is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pytest

from conftest import (NOTES, REPO, assert_refused, folder_digest, notes, read_records, run_notes)


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
# An installer's folder is never the session folder: an installed copy keeps
# its notes in the user's data folder

INSTALLED_LAYOUTS = {
    "site-packages": ("lib", "python3.11", "site-packages"),
    "dist-packages": ("usr", "lib", "python3", "dist-packages"),
    "pip --target": ("vendor",),  # any name, with the install record beside the module
}


def user_home(tmp_path: Path, data_home=None) -> dict:
    """HOME (created) and XDG_DATA_HOME inside tmp_path, for an environment."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = {"HOME": str(home)}
    settings["XDG_DATA_HOME"] = "" if data_home is None else str(data_home)
    return settings


def private_folders(top: Path, folder: Path) -> list:
    """The permission bits of each folder from below top down to folder."""
    modes, path = [], folder
    while path != top:
        modes.append(stat.S_IMODE(os.stat(str(path)).st_mode))
        path = path.parent
    return modes


@pytest.mark.parametrize("layout", list(INSTALLED_LAYOUTS))
def test_a_copy_in_an_installed_package_folder_keeps_notes_in_the_user_data_folder(tmp_path, layout):
    folder = tmp_path.joinpath(*INSTALLED_LAYOUTS[layout])
    script = script_in(folder)
    if layout == "pip --target":
        (folder / ("shaping_notes-%s.dist-info" % VERSION)).mkdir()
    package = folder_digest(folder)
    env = without_variable(**user_home(tmp_path))
    data = tmp_path / "home" / ".local" / "share" / "shaping-notes"
    for command in (APPEND, ("tail",), ("recap",), ("export",)):
        result = run_notes(*command, script=script, cwd=tmp_path, env=env)
        assert result.code == 0, result
    assert result.receipt["path"] == str(data / "session_export.json")
    assert read_records(data)[0]["text"] == APPEND[-1]
    # Each folder made on the way gets 0700, as XDG asks; HOME was there already.
    assert private_folders(tmp_path / "home", data) == [0o700, 0o700, 0o700]
    assert folder_digest(folder) == package
    given = run_notes(*APPEND, script=script, env=without_variable(SHAPING_NOTES_DIR=str(tmp_path / "notes")))
    assert given.code == 0 and read_records(tmp_path / "notes")[0]["seq"] == 1, given


@pytest.mark.parametrize("data_home", ["absolute", "relative"])
def test_xdg_data_home_is_used_only_when_absolute(tmp_path, data_home):
    script = script_in(tmp_path.joinpath(*INSTALLED_LAYOUTS["site-packages"]))
    chosen = tmp_path / "data" if data_home == "absolute" else Path("data")  # relative: ignored, per XDG
    env = without_variable(**user_home(tmp_path, chosen))
    result = run_notes("init", script=script, cwd=tmp_path, env=env)
    expected = tmp_path / "data" if data_home == "absolute" else tmp_path / "home" / ".local" / "share"
    assert result.code == 0 and result.receipt["path"] == str(expected / "shaping-notes" / "session_notes.jsonl"), result
    assert (tmp_path / "data").exists() == (data_home == "absolute")
    # argparse wraps a long path at a hyphen too: compare without white space.
    help_text = "".join(run_notes("append", "--help", script=script, env=env).stdout.split())
    said = "or %s when notes.py is installed as a package" % (expected / "shaping-notes")
    assert "".join(said.split()) in help_text, help_text


# What each platform's rule gives, asked of notes.py itself with the platform
# switched after import: the rules are plain path arithmetic.
PLATFORM_PROBE = r"""
import ntpath, os, sys
sys.path.insert(0, sys.argv[1])
import notes
if sys.argv[2] == "darwin":
    sys.platform = "darwin"
elif sys.argv[2] == "windows":
    os.name, os.path = "nt", ntpath
print(notes._user_data_folder())
"""


@pytest.mark.parametrize("platform, variables, expected", [
    ("darwin", {"HOME": "/Users/you", "XDG_DATA_HOME": "/elsewhere"},
     "/Users/you/Library/Application Support/shaping-notes"),
    ("windows", {"USERPROFILE": "C:\\Users\\you", "LOCALAPPDATA": "D:\\Local"}, "D:\\Local\\shaping-notes"),
    ("windows", {"USERPROFILE": "C:\\Users\\you", "LOCALAPPDATA": "Local"},
     "C:\\Users\\you\\AppData\\Local\\shaping-notes"),
])
def test_each_platform_has_its_user_data_folder(platform, variables, expected):
    env = without_variable(**variables)
    completed = subprocess.run([sys.executable, "-S", "-c", PLATFORM_PROBE, str(REPO), platform],
                               capture_output=True, text=True, env=env, timeout=60)
    assert (completed.returncode, completed.stdout) == (0, expected + "\n"), completed


def test_an_unwritable_data_folder_is_refused_with_the_way_out(tmp_path):
    script = script_in(tmp_path.joinpath(*INSTALLED_LAYOUTS["site-packages"]))
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the data folder's parent should be")
    env = without_variable(**user_home(tmp_path, blocked))
    before = folder_digest(tmp_path)
    result = run_notes(*APPEND, script=script, cwd=tmp_path, env=env)
    assert_refused(result, 2, "cannot create its data folder %s" % (blocked / "shaping-notes"), "--dir", "SHAPING_NOTES_DIR")
    assert folder_digest(tmp_path) == before


def test_an_mcp_server_in_an_installed_package_folder_keeps_notes_in_the_user_data_folder(tmp_path):
    """The server a host starts with no --dir works from the first call."""
    folder = tmp_path.joinpath(*INSTALLED_LAYOUTS["site-packages"])
    script = script_in(folder)
    package = folder_digest(folder)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "append", "arguments": {"type": "decision", "text": "Kept for the user."}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "summary", "arguments": {}}},
    ]
    completed = subprocess.run([sys.executable, "-S", str(script), "mcp"], cwd=str(tmp_path),
                               env=without_variable(**user_home(tmp_path, tmp_path / "data")),
                               input="".join(json.dumps(request) + "\n" for request in requests).encode(),
                               capture_output=True, timeout=60)
    assert completed.returncode == 0, completed
    answers = {answer["id"]: answer["result"] for answer in map(json.loads, completed.stdout.decode().splitlines())}
    log = str(tmp_path / "data" / "shaping-notes" / "session_notes.jsonl")
    for call in (2, 3):
        assert answers[call]["isError"] is False, answers[call]
        assert answers[call]["structuredContent"]["path"] == log
    assert answers[3]["structuredContent"]["total"] == 1
    assert folder_digest(folder) == package


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
    # A script's hints name it by the path it was run by, so they run from any folder.
    runs = {
        "python3 -S notes.py": [sys.executable, "-S", "notes.py"],
        "python3 -S %s" % (folder / "notes.py"): [sys.executable, "-S", str(folder / "notes.py")],
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


def test_a_hint_runs_as_shown_from_another_folder_when_its_paths_hold_spaces(tmp_path):
    # The macOS data folder ("Application Support") holds a space; so may the folder of the script.
    script = script_in(tmp_path / "my tools")
    session = tmp_path / "Application Support" / "shaping"
    refused = subprocess.run([sys.executable, "-S", str(script), "--dir", str(session), "recap"], cwd=str(tmp_path),
                             capture_output=True, text=True, env=without_variable(), timeout=60)
    hint = re.search(r"start one with: (.+? init),", json.loads(refused.stdout)["error"]).group(1)
    assert refused.returncode == 2 and hint.startswith("python3 -S '%s' --dir '%s'" % (script, session))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    started = subprocess.run(["sh", "-c", hint], cwd=str(elsewhere), capture_output=True, text=True,
                             env=without_variable(), timeout=60)
    assert started.returncode == 0 and json.loads(started.stdout)["command"] == "init"
    assert (session / "session_meta.json").is_file() and os.listdir(str(elsewhere)) == []
    # A renamed copy is named as it was run; a "%" in its path reaches --help unformatted.
    renamed = tmp_path / "p%(prog)x" / "notes (1).py"
    renamed.parent.mkdir()
    shutil.copy(str(script), str(renamed))
    helped = subprocess.run([sys.executable, "-S", str(renamed), "--help"], capture_output=True, text=True,
                            env=without_variable(), timeout=60)
    assert helped.returncode == 0 and "run python3 -S '%s' COMMAND --help" % renamed in helped.stdout


# --------------------------------------------------------------------------
# Installed with pip into a fresh virtual environment (one, shared by these tests)

def copy_project(destination: Path) -> Path:
    destination.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(str(source), str(destination / name),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules"))
        else:
            shutil.copy(str(source), str(destination / name))
    return destination


class Installed:
    """A virtual environment with shaping-notes installed from a copy of the project (in root)."""

    def __init__(self, root: Path, built: bool = False):
        """Build it in root, or, built, find the one already there."""
        self.root, self.project = root, root / "project"
        bin_dir = root / "venv" / ("Scripts" if os.name == "nt" else "bin")
        self.python, self.command = str(bin_dir / "python"), str(bin_dir / "shaping-notes")
        if not built:
            copy_project(self.project)
            # No pip of its own (installing one into each new environment costs more than the rest):
            # the pip that runs these tests installs into it.
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True,
                           timeout=300)
            completed = self.pip_install(str(self.project))
            assert completed.returncode == 0, completed.stderr
        self.site = Path(subprocess.run([self.python, "-c", "import notes, os; print(os.path.dirname(notes.__file__))"],
                                        capture_output=True, text=True, check=True, cwd=str(root)).stdout.strip())

    def pip_install(self, *requirements):
        """`pip install requirements...` into this environment."""
        return subprocess.run([sys.executable, "-m", "pip", "--python", self.python, "install", "--quiet",
                               "--disable-pip-version-check"] + list(requirements),
                              capture_output=True, text=True, timeout=600)

    def command_line(self, argv: list, cwd, **env):
        return subprocess.run(argv, capture_output=True, text=True, cwd=str(cwd), env=without_variable(**env),
                              timeout=60)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    """One environment for the whole run: pytest-xdist's workers share it, the first to come builds it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no xdist: a run of its own
        return Installed(tmp_path_factory.mktemp("installed"))
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this run
    with open(str(shared / "installed.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = shared / "installed"
        if (root / "built").exists():
            return Installed(root, built=True)
        root.mkdir(exist_ok=True)
        environment = Installed(root)
        (root / "built").touch()
        return environment


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


def test_installed_command_without_a_folder_keeps_notes_in_the_user_data_folder(installed, tmp_path):
    """The first run of an installed copy works: notes go to the user's data folder, never the package's."""
    before = snapshot(installed.site)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    data = home / ".local" / "share" / "shaping-notes"
    second = ("append", "--type", "decision", "--text", "A second note, through the module.")
    for argv in ([installed.command] + list(APPEND), [installed.python, "-m", "notes"] + list(second)):
        completed = installed.command_line(argv, elsewhere, HOME=str(home), XDG_DATA_HOME="")
        assert completed.returncode == 0, completed
        assert json.loads(completed.stdout)["path"] == str(data / "session_notes.jsonl"), completed.stdout
    chosen = tmp_path / "xdg"
    moved = installed.command_line([installed.command, "init"], elsewhere, HOME=str(home), XDG_DATA_HOME=str(chosen))
    assert json.loads(moved.stdout)["path"] == str(chosen / "shaping-notes" / "session_notes.jsonl"), moved
    assert [record["seq"] for record in read_records(data)] == [1, 2]
    assert stat.S_IMODE(os.stat(str(data)).st_mode) == 0o700
    usage = installed.command_line([installed.command, "--help"], elsewhere, HOME=str(home), XDG_DATA_HOME="")
    said = "or %s when notes.py is installed as a package" % data
    assert "".join(said.split()) in "".join(usage.stdout.split()), usage.stdout
    assert snapshot(installed.site) == before
    assert list(elsewhere.iterdir()) == []


def mcp_session(installed, cwd, requests, **env) -> dict:
    """The result of each request, by id, from one run of `shaping-notes mcp`."""
    completed = subprocess.run([installed.command, "mcp"], cwd=str(cwd), env=without_variable(**env),
                               input="".join(json.dumps(request) + "\n" for request in requests),
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed
    return {answer["id"]: answer.get("result", answer) for answer in map(json.loads, completed.stdout.splitlines())}


def test_installed_mcp_server_serves_both_contracts(installed, tmp_path):
    """pip installs protocol.md and note-io.md with the module; the server offers their exact text."""
    home = tmp_path / "home"
    home.mkdir()
    handshake = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": 1, "method": "resources/list"}]
    answers = mcp_session(installed, tmp_path, handshake, HOME=str(home))
    assert "resources" in answers[0]["capabilities"], answers[0]
    listed = {resource["name"]: resource["uri"] for resource in answers[1]["resources"]}
    assert sorted(listed) == ["note-io.md", "protocol.md"], answers[1]
    reads = [{"jsonrpc": "2.0", "id": index, "method": "resources/read", "params": {"uri": listed[name]}}
             for index, name in enumerate(sorted(listed), 2)]
    answers = mcp_session(installed, tmp_path, handshake + reads, HOME=str(home))
    for index, name in enumerate(sorted(listed), 2):
        (content,) = answers[index]["contents"]
        assert content["uri"] == listed[name] and content["mimeType"] == "text/markdown"
        assert content["text"] == (REPO / name).read_text("utf-8"), name
    # Installed with the package, not in the package's folder, nor among the user's notes.
    for uri in listed.values():
        assert str(installed.site) not in uri and str(home) not in uri, uri
    assert not (home / ".local" / "share" / "shaping-notes" / "protocol.md").exists()


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
    built, backend = tmp_path / "dist", tmp_path / "backend"
    # setuptools goes to a folder of its own: the shared environment's files stay as other tests saw them.
    completed = installed.pip_install("--target", str(backend), "setuptools>=77")
    assert completed.returncode == 0, completed.stderr
    completed = subprocess.run(
        [installed.python, "-c", "import sys; sys.path.insert(0, sys.argv[2]); from setuptools import build_meta; "
                                 "print(build_meta.build_sdist(sys.argv[1]))", str(built), str(backend)],
        cwd=str(installed.project), capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    archive = built / completed.stdout.strip().splitlines()[-1]
    with tarfile.open(str(archive)) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    wanted = {"notes.py", "LICENSE", "README.md", "protocol.md", "note-io.md", "pyproject.toml", ".ci/run",
              "bench/bench.py", "bench/corpus.jsonl"} | {"docs/" + path.name for path in (REPO / "docs").glob("*.md")}
    for root, _, files in os.walk(str(REPO / "tests")):
        if "__pycache__" not in root:
            wanted.update(os.path.relpath(os.path.join(root, name), str(REPO)) for name in files
                          if not name.endswith(".pyc"))
    assert wanted <= names, sorted(wanted - names)
    assert not [name for name in names if re.match(r"session_|\.session_", name)]


# ==========================================================================
# notes.py imports and locks where fcntl is missing (Windows), using msvcrt instead

def load_notes_without_fcntl(monkeypatch, calls):
    """A fresh copy of notes.py imported as on Windows: no fcntl, a recording msvcrt."""
    fake_msvcrt = types.ModuleType("msvcrt")
    fake_msvcrt.LK_LOCK, fake_msvcrt.LK_NBLCK, fake_msvcrt.LK_UNLCK = 1, 2, 0
    fake_msvcrt.locking = lambda descriptor, mode, length: calls.append((mode, length))
    monkeypatch.setitem(sys.modules, "fcntl", None)  # makes `import fcntl` raise ImportError
    monkeypatch.setitem(sys.modules, "msvcrt", fake_msvcrt)
    spec = importlib.util.spec_from_file_location("notes_without_fcntl", str(NOTES))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_and_append_lock_through_msvcrt_when_fcntl_is_missing(tmp_path, monkeypatch, capsys):
    calls = []
    windows_notes = load_notes_without_fcntl(monkeypatch, calls)
    assert windows_notes.fcntl is None
    folder = tmp_path / "session"
    code = windows_notes.main(["--dir", str(folder), "append", "--type", "decision", "--text", "Locked on Windows."])
    receipt = json.loads(capsys.readouterr().out)
    assert code == 0 and receipt["note_id"] == "n00001", receipt
    assert [record["text"] for record in read_records(folder)] == ["Locked on Windows."]
    lock_modes = [mode for mode, _ in calls]
    assert lock_modes[0] in (1, 2) and lock_modes[-1] == 0, calls  # locked first, unlocked last
