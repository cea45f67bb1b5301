"""Benchmark notes.py against the floors it is measured by.

Builds session logs of 0, 10,000 and 200,000 records in a temporary folder,
then times whole processes, the way a model pays for them: each figure is the
median of several runs, set beside its floor measured in the same run.

    python3 bench/bench.py                 # the full table (about a minute)
    python3 bench/bench.py --records 200 --runs 3   # a quick look

Floors:
  bare interpreter  python -S -c pass
  import floor      a bare interpreter that imports json, hashlib, argparse and os:
                    the public modules notes.py itself starts with
  v0                the public v0 tool doing the same append (only with --v0 PATH)
  parse loop        a bare loop that parses every line and recomputes its checksum
Start-up (append on an empty log) is reported against the first three; no goal
is set for it beyond "as low as plain code allows".
Goals (ratios):
  append and tail --limit 5 at the large log <= 1.1 x append on the empty log
  verify, summary, large log                 <= 1.3 x parse loop
  peak memory of summary, tail, verify, recap, export at the large log <= 32 MiB
Standard library only; Linux or macOS (peak memory comes from /proc or rusage).
    python3 bench/bench.py --python pypy3   # the same figures under another interpreter
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NOTES = os.path.join(os.path.dirname(HERE), "notes.py")
sys.path.insert(0, os.path.dirname(HERE))
import notes  # noqa: E402

IMPORT_FLOOR = "import json, hashlib, argparse, os"
PARSE_LOOP = """
import hashlib, json, sys
valid = 0
with open(sys.argv[1], "rb") as handle:
    for line in handle:
        record = json.loads(line)
        checksum = record.pop("checksum")
        body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        valid += hashlib.sha256(body.encode("utf-8")).hexdigest()[:16] == checksum
print(valid)
"""
MEMORY_LIMIT_MIB = 32


def build_session(folder: str, count: int) -> None:
    """A session of count records of every type, written directly (no CLI)."""
    os.makedirs(folder)
    session_id = "00000000-0000-4000-8000-000000000000"
    meta = {"schema_version": notes._META_SCHEMA, "session_id": session_id,
            "created_at": "2026-01-01T00:00:00Z", "log_file": os.path.join(folder, notes._LOG_NAME)}
    with open(os.path.join(folder, notes._META_NAME), "wb") as handle:
        handle.write((notes._pretty_json(meta) + "\n").encode("utf-8"))
    with open(os.path.join(folder, notes._LOG_NAME), "wb") as handle:
        for seq in range(1, count + 1):
            note_type = notes.NOTE_TYPES[seq % len(notes.NOTE_TYPES)]
            effect = "Keep the record small; audit via export." if seq % 3 == 0 else None
            record = notes._build_record(session_id, seq, note_type,
                                        "Signal %d: a decision about the persistence model, café." % seq,
                                        effect, timestamp="2026-01-01T00:00:00Z")
            handle.write(notes._record_line(record))


def run_once(command: list) -> float:
    """Run a command to its end; return the seconds it took."""
    start = time.perf_counter()
    completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if completed.returncode not in (0, 3):
        raise SystemExit("benchmark command failed: %s" % " ".join(command))
    return elapsed


def median_times(figures: dict, runs: int) -> dict:
    """Median milliseconds of each figure, run round-robin so that noise hits all alike.

    A figure is a command, or a function of the run number giving one."""
    times = {name: [] for name in figures}
    for run in range(runs):
        for name, commands in figures.items():
            command = commands(run) if callable(commands) else commands
            times[name].append(run_once(command))
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


PEAK_MEMORY = """
import sys
sys.argv = [sys.argv[1]] + sys.argv[2:]
sys.path.insert(0, __import__("os").path.dirname(sys.argv[0]))
import notes
code = notes.main(sys.argv[1:])
try:  # Linux: the high-water mark of this program's own memory, reset by exec
    with open("/proc/self/status") as status:
        peak = [line.split()[1] for line in status if line.startswith("VmHWM:")][0]
except OSError:  # elsewhere: the process's peak, which may count the parent's before exec
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // (1024 if sys.platform == "darwin" else 1)
sys.stderr.write("%s\\n" % peak)
"""


def peak_memory(args: list) -> float:
    """Peak resident memory (MiB) of one notes.py command, reported by its own process.

    (A child's rusage would count the pages of the forked parent before exec.)"""
    completed = subprocess.run([PYTHON, "-S", "-c", PEAK_MEMORY, NOTES] + args,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(completed.stderr.strip().splitlines()[-1]) / 1024


PYTHON = sys.executable  # the interpreter measured; --python changes it


def notes_command(folder: str, *args, script: str = NOTES) -> list:
    return [PYTHON, "-S", script, "--dir", folder] + list(args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark notes.py against its floors.")
    parser.add_argument("--records", type=int, default=200_000, help="size of the large log (default 200000)")
    parser.add_argument("--runs", type=int, default=15, help="runs per start-up figure (default 15)")
    parser.add_argument("--bulk-runs", type=int, default=5, help="runs per whole-log figure (default 5)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure (default: this one)")
    parser.add_argument("--v0", metavar="PATH", help="the public v0 notes.py, to time the same append beside it")
    options = parser.parse_args(argv)
    global PYTHON
    PYTHON = options.python
    large = options.records
    middle = min(10_000, large)
    with tempfile.TemporaryDirectory(prefix="notes-bench-") as workspace:
        empties = []
        for run in range(options.runs):
            for kind in ("empty", "v0-empty"):
                build_session(os.path.join(workspace, "%s-%d" % (kind, run)), 0)
            empties.append(os.path.join(workspace, "empty-%d" % run))
        for size in sorted({middle, large}):
            build_session(os.path.join(workspace, "log-%d" % size), size)
        large_folder = os.path.join(workspace, "log-%d" % large)
        middle_folder = os.path.join(workspace, "log-%d" % middle)
        large_log = os.path.join(large_folder, notes._LOG_NAME)

        def append_to(folder, script=NOTES):
            return lambda run: notes_command(folder, "append", "--type", "decision",
                                             "--text", "Benchmark note %d." % run, script=script)

        figures = {
            "bare": [PYTHON, "-S", "-c", "pass"],
            "floor": [PYTHON, "-S", "-c", IMPORT_FLOOR],
            "append_empty": lambda run: append_to(empties[run])(run),
            "append_middle": append_to(middle_folder),
            "append_large": append_to(large_folder),
            "tail_large": notes_command(large_folder, "tail", "--limit", "5"),
        }
        if options.v0:
            figures["v0_append_empty"] = lambda run: append_to(
                os.path.join(workspace, "v0-empty-%d" % run), os.path.abspath(options.v0))(run)
        quick = median_times(figures, options.runs)
        bulk = median_times({
            "loop": [PYTHON, "-S", "-c", PARSE_LOOP, large_log],
            "verify": notes_command(large_folder, "verify"),
            "summary": notes_command(large_folder, "summary"),
        }, options.bulk_runs)
        memory = {}
        for command in ("summary", "tail", "verify", "recap", "export"):
            extra = ["--output", os.path.join(workspace, "export.json")] if command == "export" else []
            memory[command] = peak_memory(["--dir", large_folder, command] + extra)
        bare, floor = quick["bare"], quick["floor"]
        append_empty, append_middle, append_large = (
            quick["append_empty"], quick["append_middle"], quick["append_large"])
        tail_large, loop = quick["tail_large"], bulk["loop"]
        verify_large, summary_large = bulk["verify"], bulk["summary"]

    rows = [
        ("bare interpreter", bare, None, None, None),
        ("import floor: json, hashlib, argparse", floor, bare, None, "bare interpreter"),
        ("append, empty log", append_empty, bare, None, "bare interpreter"),
        ("append, empty log ", append_empty, floor, None, "import floor"),
    ]
    if options.v0:
        rows += [("v0 append, empty log", quick["v0_append_empty"], bare, None, "bare interpreter"),
                 ("append, empty log  ", append_empty, quick["v0_append_empty"], None, "v0 append")]
    rows += [
        ("append, %d records" % large, append_large, append_empty, 1.1, "append empty"),
        ("tail --limit 5, %d records" % large, tail_large, append_empty, 1.1, "append empty"),
        ("parse loop, %d records" % large, loop, None, None, None),
        ("verify, %d records" % large, verify_large, loop, 1.3, "parse loop"),
        ("summary, %d records" % large, summary_large, loop, 1.3, "parse loop"),
    ]
    if middle != large:
        rows.insert(len(rows) - 5, ("append, %d records" % middle, append_middle, append_empty, None, "append empty"))
    version = subprocess.run([PYTHON, "-S", "-c", "import sys; print(sys.implementation.name, sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    print("notes.py benchmark: %s, %d runs (whole-log figures: %d), medians"
          % (version, options.runs, options.bulk_runs))
    print()
    print("| figure | ms | against | ratio | goal | met |")
    print("|---|---:|---|---:|---:|---|")
    failed = 0
    for name, value, floor_value, goal, against in rows:
        if floor_value is None:
            print("| %s | %.1f | | | | |" % (name, value))
            continue
        ratio = value / floor_value
        met = "yes" if goal is None or ratio <= goal else "NO"
        failed += met == "NO"
        print("| %s | %.1f | %s | %.2f | %s | %s |" % (
            name.strip(), value, against, ratio, "<= %.1f" % goal if goal else "", met if goal else ""))
    print()
    print("| peak memory, %d records | MiB | goal | met |" % large)
    print("|---|---:|---:|---|")
    for command, mebibytes in memory.items():
        met = "yes" if mebibytes <= MEMORY_LIMIT_MIB else "NO"
        failed += met == "NO"
        print("| %s | %.1f | <= %d | %s |" % (command, mebibytes, MEMORY_LIMIT_MIB, met))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
