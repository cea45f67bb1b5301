"""Time restore of large exports and check that its peak memory stays bounded.

restore reads an export one record at a time (a first pass checks, a second
writes), so its peak memory must not grow with the export.  This builds, in a
scratch folder:

    valid     an export of --records valid notes, as export writes it
    empty     an export of --empty-mib MiB of {} records (every one damaged)

then measures, each in a fresh interpreter:

    restore valid        into an empty folder
    restore valid again  into the folder it just filled (compared note by note, nothing added)
    restore empty        refused: exit 3, nothing written

    python3 bench/restore_bench.py                       # 1,000,000 notes and 16 MiB of {}
    python3 bench/restore_bench.py --records 200000 --empty-mib 4
    python3 bench/restore_bench.py --notes /path/to/another/notes.py --limit-mib 0

With --limit-mib (default 64) the run fails when a peak goes over it.
Standard library only; Linux or macOS (peak memory comes from wait4).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

from tail_bench import run_measured  # one way of timing a whole process, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
NOTES = os.path.join(os.path.dirname(HERE), "notes.py")
SESSION_ID = "00000000-0000-4000-8000-000000000000"
META = {"schema_version": "shaping-memory-session-meta.v0", "session_id": SESSION_ID,
        "created_at": "2026-01-01T00:00:00Z", "log_file": "/mnt/data/shaping/session_notes.jsonl"}


def checksummed(seq: int) -> dict:
    """A valid record, its checksum taken as the README describes (sorted keys, compact, first 16 hex)."""
    record = {"id": "n%05d" % seq, "ts": "2026-01-01T00:00:00Z", "session_id": SESSION_ID, "seq": seq,
              "type": "decision", "text": "Note %d stays." % seq}
    body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    record["checksum"] = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    return record


def write_export(path: str, records, count: int) -> None:
    """An export laid out as export writes it, its records streamed to the file."""
    head = {"schema_version": "shaping-memory-export.v0", "exported_at": "2026-01-01T00:00:00Z",
            "session": META, "record_count": count}
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(head, indent=2)[:-2] + ',\n  "records": [')
        for number, record in enumerate(records):
            handle.write(("," if number else "") + "\n    " + json.dumps(record, ensure_ascii=False))
        handle.write("\n  ]\n}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=1000000, help="notes in the valid export (default 1000000)")
    parser.add_argument("--empty-mib", type=int, default=16, help="MiB of {} records in the other (default 16)")
    parser.add_argument("--notes", default=NOTES, help="the notes.py to measure")
    parser.add_argument("--limit-mib", type=float, default=64, help="fail above this peak (0: never fail)")
    options = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="notes-restore-bench-")
    try:
        valid, empty = os.path.join(scratch, "valid.json"), os.path.join(scratch, "empty.json")
        write_export(valid, map(checksummed, range(1, options.records + 1)), options.records)
        empty_count = (options.empty_mib << 20) // len(",\n    {}")
        write_export(empty, ({} for _ in range(empty_count)), empty_count)
        folder = os.path.join(scratch, "restored")
        notes = [sys.executable, "-S", options.notes, "--dir", folder, "restore"]
        figures = [("restore valid (%d notes, %.0f MiB)" % (options.records, os.path.getsize(valid) / (1 << 20)),
                    run_measured(notes + [valid]))]
        figures.append(("restore valid again", run_measured(notes + [valid])))
        shutil.rmtree(folder)
        figures.append(("restore empty (%d {} records)" % empty_count, run_measured(notes + [empty])))
    finally:
        shutil.rmtree(scratch)
    print("notes.py restore benchmark: Python %s" % sys.version.split()[0])
    print()
    print("| run | seconds | peak MiB | exit code |")
    print("|---|---:|---:|---:|")
    for name, (seconds, peak, code) in figures:
        print("| %s | %.2f | %.1f | %d |" % (name, seconds, peak, code))
    over = [name for name, (_, peak, _) in figures if options.limit_mib and peak > options.limit_mib]
    if over:
        print("\npeak memory over %g MiB: %s" % (options.limit_mib, ", ".join(over)))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
