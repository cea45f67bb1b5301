"""The benchmark runs end to end at a tiny size, its corpus is real and clean, and the start-up path stays lean
(no timing is judged here)."""

import json
import subprocess
import sys

import pytest

from conftest import REPO, notes, run_notes

sys.path.insert(0, str(REPO / "bench"))
import bench  # noqa: E402


def test_benchmark_prints_every_figure_at_a_tiny_size():
    completed = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench.py"), "--records", "40", "--runs", "1", "--bulk-runs", "1"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode in (0, 1), completed.stderr  # 1 means a goal was missed, not a crash
    assert "Traceback" not in completed.stderr
    output = completed.stdout
    for figure in ("bare interpreter", "import floor: json, hashlib, argparse", "append, empty log", "append, 40 records",
                   "tail --limit 5, 40 records", "parse loop, 40 records", "verify, 40 records",
                   "summary, 40 records", "compile notes.py, CPU per call"):
        assert "| %s |" % figure in output, figure
    assert "bench/corpus.jsonl (" in output.splitlines()[0]
    for command in ("summary", "tail", "verify", "recap", "export"):
        row = [line for line in output.splitlines() if line.startswith("| %s |" % command)]
        assert len(row) == 1, command
        mebibytes = float(row[0].split("|")[2])
        assert 1 < mebibytes < 1024, row


@pytest.fixture(scope="module")
def corpus():
    return bench.load_corpus(bench.CORPUS)


def test_the_corpus_holds_every_type_links_labels_and_non_ascii(corpus):
    assert len(corpus) >= 400
    assert {note["type"] for note in corpus} == set(notes.NOTE_TYPES)
    for place, note in enumerate(corpus):
        assert set(note) <= {"type", "text", "effect", "status", "provenance", "evidence", "ref", "about", "by"}, note
        assert note["provenance"] in ("op", "model", "shared") and note["evidence"] in (
            "declared", "inferred", "observed", "validated"), note
        for link in bench.LINKS:  # a link names an earlier note of the corpus itself
            assert link not in note or -place <= note[link] < 0, (place, note)
    assert {note["provenance"] for note in corpus} == {"op", "model", "shared"}
    assert {note["evidence"] for note in corpus} == {"declared", "inferred", "observed", "validated"}
    for link in bench.LINKS:
        assert sum(link in note for note in corpus) >= 20, link
    assert {note.get("status") for note in corpus if note["type"] == "gate"} >= {"open", "deferred", "closed"}
    assert all(note["text"].startswith("SYNTHESIS") for note in corpus if note["type"] == "mode")
    non_ascii = [note for note in corpus if any(ord(c) > 127 for c in note["text"] + note.get("effect", ""))]
    assert len(non_ascii) >= len(corpus) // 10
    assert 0.25 <= sum("effect" in note for note in corpus) / len(corpus) <= 0.6


def test_append_accepts_every_corpus_text(tmp_path, corpus):
    session = notes.Session(tmp_path / "session")
    seen = set()
    for note in corpus:
        key = (note["text"], note.get("effect"))
        if key in seen:
            continue
        seen.add(key)
        # no credential refusal, no other either
        receipt = session.append(type=note["type"], text=note["text"], effect=note.get("effect"),
                                 provenance=note["provenance"], evidence=note["evidence"])
        assert receipt["ok"] and not receipt.get("duplicate"), (note, receipt)
    assert notes.Session(tmp_path / "session").verify()["ok"]


@pytest.mark.parametrize("which", ["corpus", "plain"])
def test_a_built_log_verifies_clean(tmp_path, corpus, which):
    count = 2 * len(corpus) + 3 if which == "corpus" else 100  # the corpus over its end: links land again
    bench.build_session(str(tmp_path / "log"), count, corpus if which == "corpus" else None)
    receipt = notes.Session(tmp_path / "log").verify()
    assert receipt["ok"] and receipt["total"] == count and not receipt.get("warnings"), receipt
    with open(tmp_path / "log" / notes._LOG_NAME, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    assert [record["seq"] for record in records] == list(range(1, count + 1))
    assert all(a["ts"] < b["ts"] for a, b in zip(records, records[1:])) or which == "plain"
    if which == "corpus":
        second = records[len(corpus):2 * len(corpus)]
        assert [record["text"] for record in second] == [note["text"] for note in corpus]
        for record, note in zip(second, corpus):
            for link in bench.LINKS:
                assert (link in record) == (link in note)
                if link in note:
                    assert record[link] == notes._note_id_for(record["seq"] + note[link])


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
