"""Time tail and append after a long unterminated tail, and report their peak memory.

A crash, or a hostile write, can leave a last line of many MiB with no newline.
Reading back from the end must stay linear in the bytes read and bounded in memory,
and append must mend it without copying it (a tail over 1 MiB is no note: it is ended with
a newline where it is, as a damaged line).  This builds a
session of a few records followed by such a tail, then runs, each in a fresh copy:

    tail      (reads back over the tail, warns about it)
    append    (finds where the tail starts, ends it with a newline, appends)

    python3 bench/tail_bench.py                   # a 64 MiB tail
    python3 bench/tail_bench.py --mib 16 --runs 1
    python3 bench/tail_bench.py --junk-lines 3000000   # instead: 3,000,000 complete '{}' lines

With --junk-lines the log ends with that many complete lines that hold no seq:
each counts as having held one, and readers count such a run by its newlines
instead of parsing each line.
    python3 bench/tail_bench.py --notes /path/to/another/notes.py

Standard library only; Linux or macOS (peak memory comes from wait4).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NOTES = os.path.join(os.path.dirname(HERE), "notes.py")
SESSION_ID = "00000000-0000-4000-8000-000000000000"


def build_session(folder: str, tail_bytes: int, junk_lines: int = 0) -> None:
    """Three records (checksums need not match: only the tail is measured), then the tail."""
    os.makedirs(folder)
    meta = {"schema_version": "shaping-memory-session-meta.v0", "session_id": SESSION_ID,
            "created_at": "2026-01-01T00:00:00Z", "log_file": os.path.join(folder, "session_notes.jsonl")}
    with open(os.path.join(folder, "session_meta.json"), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(meta, indent=2) + "\n")
    with open(os.path.join(folder, "session_notes.jsonl"), "wb") as handle:
        for seq in (1, 2, 3):
            record = {"id": "n%05d" % seq, "ts": "2026-01-01T00:00:00Z", "session_id": SESSION_ID,
                      "seq": seq, "type": "decision", "text": "Record %d." % seq, "checksum": "0" * 16}
            handle.write((json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8"))
        if junk_lines:
            for written in range(0, junk_lines, 100000):
                handle.write(b"{}\n" * min(100000, junk_lines - written))
            return
        start = b'{"id":"n00004","text":"'
        handle.write(start)
        block = b"x" * (1 << 20)
        left = tail_bytes - len(start)
        while left > 0:  # real bytes, not a sparse hole: the reads are what is measured
            handle.write(block[:left])
            left -= len(block)


def run_measured(command: list) -> tuple:
    """Run command; return (seconds, peak RSS in MiB, exit code)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return seconds, usage.ru_maxrss * scale / (1 << 20), os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mib", type=int, default=64, help="size of the unterminated tail (default 64)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is shown")
    parser.add_argument("--notes", default=NOTES, help="the notes.py to measure")
    parser.add_argument("--junk-lines", type=int, default=0, help="end the log with this many '{}' lines "
                        "instead of an unterminated tail")
    options = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="notes-tail-bench-")
    try:
        pristine = os.path.join(scratch, "pristine")
        build_session(pristine, options.mib << 20, options.junk_lines)
        figures = {}
        for name, arguments in (("tail", ["tail"]),
                                ("append", ["append", "--type", "decision", "--text", "After the tail."])):
            runs = []
            for number in range(options.runs):
                folder = os.path.join(scratch, "%s-%d" % (name, number))
                shutil.copytree(pristine, folder)
                runs.append(run_measured([sys.executable, "-S", options.notes, "--dir", folder] + arguments))
                shutil.rmtree(folder)
            codes = {code for _, _, code in runs}
            figures[name] = (statistics.median(s for s, _, _ in runs), max(m for _, m, _ in runs), codes)
    finally:
        shutil.rmtree(scratch)
    ending = ("%d junk lines" % options.junk_lines if options.junk_lines
              else "%d MiB unterminated tail" % options.mib)
    print("notes.py tail benchmark: Python %s, %s, %d runs (median time, highest peak)"
          % (sys.version.split()[0], ending, options.runs))
    print()
    print("| command | seconds | peak MiB | exit codes |")
    print("|---|---:|---:|---|")
    for name, (seconds, peak, codes) in figures.items():
        print("| %s | %.2f | %.1f | %s |" % (name, seconds, peak, ", ".join(map(str, sorted(codes)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
