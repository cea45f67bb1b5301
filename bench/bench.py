"""Benchmark notes.py against the floors it is measured by.

Builds session logs of 0, 10,000 and 200,000 records in a temporary folder,
then times whole processes, the way a model pays for them: each figure is the
median of several runs, set beside its floor measured in the same run.

The logs are real notes: bench/corpus.jsonl holds 512 notes written as a model
following protocol.md writes them while shaping 32 ideas (every type, texts of
about 20 to 900 characters, effects, labels, links, non-ASCII), and a log of N
records cycles through it, numbered 1..N, 37 seconds apart, each link resolved
to the note it names.  `--corpus plain` builds the old log of one repeated sentence
instead, for comparison; `--corpus PATH` reads another corpus of that form.

    python3 bench/bench.py                 # the full table (about a minute)
    python3 bench/bench.py --records 2000 --runs 3   # a quick look

Floors:
  bare interpreter  python -S -c pass
  import floor      a bare interpreter that imports json, hashlib, argparse and os:
                    the public modules notes.py itself starts with
  v0                the public v0 tool doing the same append (only with --v0 PATH)
  parse loop        a bare loop that parses every line and recomputes its checksum
Start-up (append on an empty log) is reported against the first three; no goal
is set for it beyond "as low as plain code allows".  Part of it is compiling
notes.py, which a script run pays on every call (no .pyc is kept for it): the
CPU time of compile() on notes.py's source is reported beside it.
Goals (ratios, on the corpus):
  append and tail --limit 5 at the large log <= 1.10 x append on the empty log
  verify, summary, large log                 <= 2.0 x parse loop
  peak memory of summary, tail, verify, recap, export at the large log <= 32 MiB
Standard library only; Linux or macOS (peak memory comes from /proc or rusage).
    python3 bench/bench.py --python pypy3   # the same figures under another interpreter
"""

from __future__ import annotations

import argparse
import calendar
import json
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
APPEND_GOAL = 1.10  # append and tail at the large log, against append on the empty log
READER_GOAL = 2.0   # verify and summary at the large log, against the parse loop


CORPUS = os.path.join(HERE, "corpus.jsonl")
SESSION_ID = "00000000-0000-4000-8000-000000000000"
START = calendar.timegm((2026, 1, 1, 0, 0, 0))  # the first note's time; each next one SPACING seconds later
SPACING = 37
LINKS = ("ref", "about", "by")  # in a corpus note, a negative offset: -3 is the note 3 before it


def load_corpus(path: str) -> list:
    """The corpus's notes, one JSON object a line: type, text, and optionally effect, status, the
    labels provenance and evidence, and the links ref, about and by as negative offsets."""
    with open(path, encoding="utf-8") as handle:
        corpus = [json.loads(line) for line in handle if line.strip()]
    if not corpus:
        raise SystemExit("the corpus %s holds no notes" % path)
    return corpus


def plain_signal(seq: int) -> dict:
    """The old benchmark's note: one sentence, every type in turn, an effect on every third."""
    return {"type": notes.NOTE_TYPES[seq % len(notes.NOTE_TYPES)],
            "text": "Signal %d: a decision about the persistence model, café." % seq,
            "effect": "Keep the record small; audit via export." if seq % 3 == 0 else None}


def corpus_record(corpus: list, seq: int) -> dict:
    """The record numbered seq of a log that cycles through the corpus, its links resolved by offset."""
    note = corpus[(seq - 1) % len(corpus)]
    links = {}
    for name in LINKS:
        if name in note and seq + note[name] >= 1:  # a link before n00001 is left out
            links[name] = notes._note_id_for(seq + note[name])
    status = note.get("status")
    if note["type"] == "gate" and "ref" not in links:
        links.pop("by", None)  # a gate update that lost its gate is a new gate: no by, and never closed
        status = None if status == "closed" else status
    return notes._build_record(SESSION_ID, seq, note["type"], note["text"], note.get("effect"),
                               ref=links.get("ref"), status=status, provenance=note.get("provenance"),
                               evidence=note.get("evidence"), about=links.get("about"), by=links.get("by"),
                               timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + SPACING * seq)))


def build_session(folder: str, count: int, corpus=None) -> None:
    """A session of count records written directly (no CLI): the corpus's notes in turn, or, with
    corpus None, the plain sentence."""
    os.makedirs(folder)
    meta = {"schema_version": notes._META_SCHEMA, "session_id": SESSION_ID,
            "created_at": "2026-01-01T00:00:00Z", "log_file": os.path.join(folder, notes._LOG_NAME)}
    with open(os.path.join(folder, notes._META_NAME), "wb") as handle:
        handle.write((notes._pretty_json(meta) + "\n").encode("utf-8"))
    with open(os.path.join(folder, notes._LOG_NAME), "wb") as handle:
        for seq in range(1, count + 1):
            if corpus:
                record = corpus_record(corpus, seq)
            else:
                signal = plain_signal(seq)
                record = notes._build_record(SESSION_ID, seq, signal["type"], signal["text"], signal["effect"],
                                            timestamp="2026-01-01T00:00:00Z")
            handle.write(notes._record_line(record))


COMPILE_TIME = """
import sys, time
with open(sys.argv[1], encoding="utf-8") as handle:
    source = handle.read()
start = time.process_time()
compile(source, sys.argv[1], "exec")
print(time.process_time() - start)
"""


def compile_time(runs: int) -> float:
    """Median CPU milliseconds the interpreter spends compiling notes.py, which a script run pays each call."""
    times = []
    for _ in range(runs):
        completed = subprocess.run([PYTHON, "-S", "-c", COMPILE_TIME, NOTES], capture_output=True, text=True)
        if completed.returncode != 0:
            raise SystemExit("compile time: %s" % completed.stderr.strip())
        times.append(float(completed.stdout))
    return statistics.median(times) * 1000


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
sys.stderr.write("exit %d\\n" % code)
try:  # Linux: the high-water mark of this program's own memory, reset by exec
    with open("/proc/self/status") as status:
        peak = [line.split()[1] for line in status if line.startswith("VmHWM:")][0]
except OSError:  # elsewhere: the process's peak, which may count the parent's before exec
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // (1024 if sys.platform == "darwin" else 1)
sys.stderr.write("%s\\n" % peak)
"""


def peak_memory(args: list) -> tuple:
    """(peak resident memory in MiB, exit code) of one notes.py command, reported by its own process.

    (A child's rusage would count the pages of the forked parent before exec.)"""
    completed = subprocess.run([PYTHON, "-S", "-c", PEAK_MEMORY, NOTES] + args,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    *_, code, peak = completed.stderr.strip().splitlines()
    return int(peak) / 1024, int(code.split()[1])


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
    parser.add_argument("--corpus", default=CORPUS, metavar="PATH|plain",
                        help="the notes the logs cycle through (default bench/corpus.jsonl); "
                             "plain: the old log of one repeated sentence")
    options = parser.parse_args(argv)
    global PYTHON
    PYTHON = options.python
    corpus = None if options.corpus == "plain" else load_corpus(options.corpus)
    large = options.records
    middle = min(10_000, large)
    with tempfile.TemporaryDirectory(prefix="notes-bench-") as workspace:
        empties = []
        for run in range(options.runs):
            for kind in ("empty", "v0-empty"):
                build_session(os.path.join(workspace, "%s-%d" % (kind, run)), 0)
            empties.append(os.path.join(workspace, "empty-%d" % run))
        for size in sorted({middle, large}):
            build_session(os.path.join(workspace, "log-%d" % size), size, corpus)
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
        compiled = compile_time(options.runs)
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
        ("compile notes.py, CPU per call", compiled, append_empty, None, "append empty"),
    ]
    if options.v0:
        rows += [("v0 append, empty log", quick["v0_append_empty"], bare, None, "bare interpreter"),
                 ("append, empty log  ", append_empty, quick["v0_append_empty"], None, "v0 append")]
    rows += [
        ("append, %d records" % large, append_large, append_empty, APPEND_GOAL, "append empty"),
        ("tail --limit 5, %d records" % large, tail_large, append_empty, APPEND_GOAL, "append empty"),
        ("parse loop, %d records" % large, loop, None, None, None),
        ("verify, %d records" % large, verify_large, loop, READER_GOAL, "parse loop"),
        ("summary, %d records" % large, summary_large, loop, READER_GOAL, "parse loop"),
    ]
    if middle != large:
        rows.insert(len(rows) - 5, ("append, %d records" % middle, append_middle, append_empty, None, "append empty"))
    version = subprocess.run([PYTHON, "-S", "-c", "import sys; print(sys.implementation.name, sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    print("notes.py benchmark: %s, %d runs (whole-log figures: %d), medians; logs of %s"
          % (version, options.runs, options.bulk_runs,
             "one plain sentence" if corpus is None else "%s (%d notes, cycled)" % (
                 os.path.relpath(options.corpus), len(corpus))))
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
            name.strip(), value, against, ratio, "<= %.2f" % goal if goal else "", met if goal else ""))
    print()
    # A refusal (exit 2: recap's budget, export's size limit) is no answer: its memory says little.
    print("| peak memory, %d records | MiB | exit | goal | met |" % large)
    print("|---|---:|---:|---:|---|")
    for command, (mebibytes, code) in memory.items():
        met = "yes" if mebibytes <= MEMORY_LIMIT_MIB else "NO"
        failed += met == "NO"
        print("| %s | %.1f | %d%s | <= %d | %s |" % (command, mebibytes, code, " (refused)" if code == 2 else "",
                                                     MEMORY_LIMIT_MIB, met))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
