"""The benchmark runs end to end at a tiny size (figures are not judged here)."""

import subprocess
import sys

from conftest import REPO


def test_benchmark_prints_every_figure_at_a_tiny_size():
    completed = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench.py"), "--records", "40", "--runs", "1", "--bulk-runs", "1"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode in (0, 1), completed.stderr  # 1 means a goal was missed, not a crash
    assert "Traceback" not in completed.stderr
    output = completed.stdout
    for figure in ("import floor: json, hashlib, os", "append, empty log", "append, 40 records",
                   "tail --limit 5, 40 records", "parse loop, 40 records", "verify, 40 records",
                   "summary, 40 records"):
        assert "| %s |" % figure in output, figure
    for command in ("summary", "tail", "verify", "recap", "export"):
        row = [line for line in output.splitlines() if line.startswith("| %s |" % command)]
        assert len(row) == 1, command
        mebibytes = float(row[0].split("|")[2])
        assert 1 < mebibytes < 1024, row
