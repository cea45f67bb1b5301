"""The benchmark runs end to end at a tiny size, and the start-up path stays lean (no timing is judged here)."""

import subprocess
import sys

from conftest import REPO, run_notes


def test_benchmark_prints_every_figure_at_a_tiny_size():
    completed = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench.py"), "--records", "40", "--runs", "1", "--bulk-runs", "1"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode in (0, 1), completed.stderr  # 1 means a goal was missed, not a crash
    assert "Traceback" not in completed.stderr
    output = completed.stdout
    for figure in ("bare interpreter", "import floor: json, hashlib, argparse", "append, empty log", "append, 40 records",
                   "tail --limit 5, 40 records", "parse loop, 40 records", "verify, 40 records",
                   "summary, 40 records"):
        assert "| %s |" % figure in output, figure
    for command in ("summary", "tail", "verify", "recap", "export"):
        row = [line for line in output.splitlines() if line.startswith("| %s |" % command)]
        assert len(row) == 1, command
        mebibytes = float(row[0].split("|")[2])
        assert 1 < mebibytes < 1024, row


# What only some runs need is imported where it is needed: a new session's
# uuid, a mistake's difflib.  A plain append or tail must not pay for them.
LAZY_MODULES = {"uuid", "difflib"}


def modules_loaded(*arguments) -> set:
    """The modules a run of notes.py imports itself, as -X importtime reports them."""
    completed = subprocess.run([sys.executable, "-S", "-X", "importtime", str(REPO / "notes.py")]
                               + [str(argument) for argument in arguments],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed
    return {line.rsplit("|", 1)[1].strip() for line in completed.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2}


def test_append_and_tail_leave_the_lazy_imports_alone(tmp_path):
    folder = tmp_path / "session"
    # Starting a session loads uuid; the runs after it are the ones measured.
    assert run_notes("init", folder=folder).code == 0
    appended = modules_loaded("--dir", folder, "append", "--type", "decision", "--text", "A plain note.")
    tailed = modules_loaded("--dir", folder, "tail", "--limit", "5")
    assert "json" in appended and "argparse" in appended  # the parse above does read the report
    assert not appended & LAZY_MODULES, appended & LAZY_MODULES
    assert not tailed & LAZY_MODULES, tailed & LAZY_MODULES
