"""The model as client (issue 14, tool points 1 to 8).

Provenance and evidence on a signal, the unconfirmed list, closed gates with
their history, text from standard input, how far the export lags, the
operator's markdown recap, recap's size budget, and restore's answer to an
older export of the same session.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import (LOG, NOTES, REPO, SESSION_ID, append, assert_no_traceback, assert_refused, copy_fixture, folder_digest, line_of, read_records, recap, recap_text, run_notes, v0_checksum, write_session)

FULL_RECORD_KEYS = ["id", "ts", "session_id", "seq", "type", "text", "effect", "ref", "status", "provenance",
                    "evidence", "checksum"]
DEFAULT_BUDGET = 12288


# --------------------------------------------------------------------------
# Local helpers

# --------------------------------------------------------------------------
# 1. --provenance and --evidence

def test_labels_are_stored_after_status_and_before_the_checksum(session):
    append(session, "gate", "Hosting is undecided.")
    receipt = append(session, "gate", "Deferred until the clinic's IT contact answers.", "--ref", "n00001",
                     "--status", "deferred", "--effect", "The runbook leaves hosting open.",
                     "--provenance", "op", "--evidence", "declared").receipt

    assert list(receipt) == ["ok", "command", "note_id", "seq", "path"]
    record = read_records(session)[1]
    assert list(record) == FULL_RECORD_KEYS
    assert (record["provenance"], record["evidence"]) == ("op", "declared")
    assert record["checksum"] == v0_checksum(record)
    assert run_notes("verify", folder=session).code == 0


@pytest.mark.parametrize("flag, value", [("--provenance", value) for value in ("op", "model", "shared")]
                         + [("--evidence", value) for value in ("declared", "inferred", "observed", "validated")])
def test_each_label_alone_is_stored_with_its_checksum(session, flag, value):
    append(session, "decision", "Reminders go out 48 hours ahead.", flag, value)

    record = read_records(session)[0]
    assert list(record) == ["id", "ts", "session_id", "seq", "type", "text", flag[2:], "checksum"]
    assert record[flag[2:]] == value
    assert record["checksum"] == v0_checksum(record)


def test_a_log_with_labels_stays_readable_by_a_v0_reader(session):
    append(session, "decision", "SMS is the channel.", "--provenance", "op", "--evidence", "declared")
    append(session, "source", "About 400 appointments a month.", "--evidence", "inferred")
    append(session, "gate", "Consent wording is open.", "--provenance", "model")

    lines = (session / LOG).read_bytes().split(b"\n")
    assert lines[-1] == b""
    for line in lines[:-1]:
        record = json.loads(line.decode("utf-8"))  # what v0 does with every line
        assert isinstance(record, dict)
        for key, kind in (("id", str), ("ts", str), ("session_id", str), ("seq", int), ("type", str),
                          ("text", str), ("checksum", str)):
            assert isinstance(record[key], kind)


@pytest.mark.parametrize("flag, value", [("--provenance", "operator"), ("--provenance", "Model"),
                                         ("--provenance", ""), ("--evidence", "guessed"),
                                         ("--evidence", "INFERRED"), ("--evidence", " inferred")])
def test_other_label_values_are_refused(session, flag, value):
    append(session, "decision", "SMS is the channel.")
    before = folder_digest(session)

    result = run_notes("append", "--type", "decision", "--text", "Email is the fallback.", flag, value,
                       folder=session)

    # The error names the values that are allowed.
    assert_refused(result, 2, flag, *(["model", "shared"] if flag == "--provenance" else ["inferred", "validated"]))
    assert folder_digest(session) == before


def test_the_same_words_from_another_source_are_a_new_note(session):
    first = append(session, "decision", "Reminders go out 48 hours ahead.", "--provenance", "model").receipt
    confirmed = append(session, "decision", "Reminders go out 48 hours ahead.", "--provenance", "op").receipt
    retried = append(session, "decision", "Reminders go out 48 hours ahead.", "--provenance", "op").receipt

    assert (first["note_id"], confirmed["note_id"]) == ("n00001", "n00002")
    assert "duplicate" not in confirmed
    assert retried["note_id"] == "n00002" and retried["duplicate"] is True
    assert len(read_records(session)) == 2


# --------------------------------------------------------------------------
# 2 and 3. unconfirmed, closed gates, replaces; 6. the operator's markdown

# (type, text, extra arguments); the comments give each note's id.
LABELLED_SESSION = [
    ("gate", "Hosting is undecided.", []),  # n00001
    ("decision", "Reminders go out 48 hours ahead.", ["--provenance", "model"]),  # n00002
    ("source", "About 400 appointments a month.", ["--evidence", "inferred"]),  # n00003
    ("decision", "SMS is the channel.", ["--provenance", "op", "--evidence", "declared"]),  # n00004
    ("decision", "The operator confirms: reminders go out 48 hours ahead.",
     ["--ref", "n00002", "--provenance", "op", "--evidence", "declared"]),  # n00005
    ("gate", "Consent wording is undecided.", ["--provenance", "model", "--evidence", "inferred"]),  # n00006
    ("gate", "Hosting closed: the reception PC.",
     ["--ref", "n00001", "--status", "closed", "--provenance", "model", "--evidence", "inferred"]),  # n00007
    ("tension", "SMS cost grows with volume.", ["--provenance", "shared", "--evidence", "observed"]),  # n00008
    ("gate", "Payment links in reminders.", []),  # n00009
    ("gate", "Payment links deferred by the operator.",
     ["--ref", "n00009", "--status", "deferred", "--provenance", "op", "--evidence", "declared"]),  # n00010
    ("shape", "A nightly job sends SMS.", ["--provenance", "model", "--effect", "No patient app."]),  # n00011
    ("gate", "Retention period is undecided.", []),  # n00012
    ("gate", "Retention: 12 months after the last visit.", ["--ref", "n00012", "--status", "closed"]),  # n00013
]


@pytest.fixture
def labelled(tmp_path):
    folder = tmp_path / "clinic"
    for note_type, text, extra in LABELLED_SESSION:
        append(folder, note_type, text, *extra)
    return folder


def test_recap_lists_unconfirmed_notes_closed_gates_and_replacements(labelled):
    receipt = recap(labelled)

    del receipt["session_id"], receipt["path"]
    assert receipt == {
        "ok": True, "command": "recap", "total": 13, "mode": None,
        "shape": {"id": "n00011", "text": "A nightly job sends SMS.", "effect": "No patient app.",
                  "provenance": "model"},
        # A gate raised by the model is open all the same; pending counts it once, as open.
        "open_gates": [{"id": "n00006", "text": "Consent wording is undecided.", "status": "open",
                        "provenance": "model", "evidence": "inferred"}],
        "deferred_gates": [{"id": "n00009", "text": "Payment links in reminders.", "status": "deferred",
                            "update_id": "n00010", "update_text": "Payment links deferred by the operator.",
                            "update_provenance": "op", "update_evidence": "declared"}],
        # In log order of the note that makes each unconfirmed; n00002 left once the operator confirmed it.
        "unconfirmed": [
            {"id": "n00003", "type": "source", "text": "About 400 appointments a month.", "evidence": "inferred"},
            {"id": "n00001", "type": "gate", "text": "Hosting is undecided.", "status": "closed",
             "update_id": "n00007", "update_text": "Hosting closed: the reception PC.",
             "update_provenance": "model", "update_evidence": "inferred"},
            {"id": "n00011", "type": "shape", "text": "A nightly job sends SMS.", "effect": "No patient app.",
             "provenance": "model"},
        ],
        # A gate closed on the model's inference is not settled: it is only in unconfirmed.
        "closed_gates": [{"id": "n00012", "text": "Retention period is undecided.", "update_id": "n00013",
                          "closed_by": {"id": "n00013", "type": "gate",
                                        "text": "Retention: 12 months after the last visit."}}],
        "decisions": [
            {"id": "n00004", "text": "SMS is the channel.", "provenance": "op", "evidence": "declared"},
            {"id": "n00005", "text": "The operator confirms: reminders go out 48 hours ahead.", "replaces": "n00002",
             "provenance": "op", "evidence": "declared"},
        ],
        "discards": [],
        "tensions": [{"id": "n00008", "text": "SMS cost grows with volume.", "provenance": "shared",
                      "evidence": "observed"}],
        "sources": [],
        "artifacts": [],
        "superseded_count": 1,
        "export_lag": {"path": str(labelled / "session_export.json"), "record_count": None, "missing": 13},
        # The model's open gate n00006 counts once, as open.
        "pending": {"open_gates": 1, "unconfirmed": 3, "raised_since": "n00003"},
    }


def test_markdown_recap_is_for_the_operator(labelled):
    text = recap_text(labelled, "--format", "md")

    assert text == "\n".join([
        "# Recap",
        "",
        "13 notes, 1 superseded by later ones.",
        "Export: no session_export.json yet.",
        "",
        "Pending: 1 open gate and 3 notes not yet confirmed, listed below.",
        "",
        "## Mode", "", "- none", "",
        "## Shape", "", "- A nightly job sends SMS. Effect: No patient app. [n00011; not yet confirmed]", "",
        "## Open gates", "", "- Consent wording is undecided. [n00006; not yet confirmed]", "",
        "## Deferred gates", "",
        # A settled point says who it came from: here the operator's update that deferred the gate.
        "- Payment links in reminders. Latest: Payment links deferred by the operator. "
        "[n00009; from the operator]",
        "",
        "## Not yet confirmed", "",
        "- Source: About 400 appointments a month. [n00003; inferred]",
        "- Gate (closed): Hosting is undecided. - Hosting closed: the reception PC. "
        "[n00001; proposed by the model, inferred]",
        "- Shape: A nightly job sends SMS. Effect: No patient app. [n00011; proposed by the model]",
        "",
        "## Closed gates", "",
        "- Retention period is undecided. - Retention: 12 months after the last visit. [n00012]",
        "",
        "## Decisions", "",
        "- SMS is the channel. [n00004; from the operator]",
        "- The operator confirms: reminders go out 48 hours ahead. [n00005; from the operator]",
        "",
        "## Discarded paths", "", "- none", "",
        "## Tensions", "", "- SMS cost grows with volume. [n00008; shared by both]", "",
        "## Sources", "", "- none", "",
        "## Artifact boundaries", "", "- none", "",
    ])


def test_closed_gates_keep_the_newest_closings_within_the_limit(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("gate", "Gate %d is open." % number) for number in range(1, 5)] + [
        ("gate", "Gate 3 closed.", {"ref": "n00003", "status": "closed"}),  # n00005
        ("gate", "Gate 1 closed.", {"ref": "n00001", "status": "closed"}),  # n00006
        ("gate", "Gate 4 closed.", {"ref": "n00004", "status": "closed"}),  # n00007
        ("gate", "Gate 2 closed.", {"ref": "n00002", "status": "closed"}),  # n00008
    ])

    everything = recap(folder)
    limited = recap(folder, "--limit", "2")

    # Newest closing first.
    assert [(gate["id"], gate["update_id"]) for gate in everything["closed_gates"]] == [
        ("n00002", "n00008"), ("n00004", "n00007"), ("n00001", "n00006"), ("n00003", "n00005")]
    assert "truncated" not in everything
    assert limited["closed_gates"] == [
        {"id": "n00002", "text": "Gate 2 is open.", "update_id": "n00008",
         "closed_by": {"id": "n00008", "type": "gate", "text": "Gate 2 closed."}},
        {"id": "n00004", "text": "Gate 4 is open.", "update_id": "n00007",
         "closed_by": {"id": "n00007", "type": "gate", "text": "Gate 4 closed."}}]
    assert limited["truncated"] == {"closed_gates": 2}
    assert limited["see_truncated"] == ["tail --type gate --limit 8"]


def test_a_gate_is_reopened_by_its_own_id_and_closed_again(session):
    append(session, "gate", "Hosting is undecided.")
    append(session, "gate", "Hosting closed: the reception PC.", "--ref", "n00001", "--status", "closed")
    assert recap(session)["closed_gates"][0]["update_id"] == "n00002"

    append(session, "gate", "Reopened: the reception PC is being replaced.", "--ref", "n00001", "--status", "open")
    state = recap(session)
    assert state["open_gates"] == [{"id": "n00001", "text": "Hosting is undecided.", "status": "open",
                                    "update_id": "n00003",
                                    "update_text": "Reopened: the reception PC is being replaced."}]
    assert state["closed_gates"] == []

    append(session, "gate", "Closed again: a small cloud VM.", "--ref", "n00001", "--status", "closed")
    state = recap(session)
    assert state["open_gates"] == []
    assert state["closed_gates"] == [{"id": "n00001", "text": "Hosting is undecided.", "update_id": "n00004",
                                      "closed_by": {"id": "n00004", "type": "gate",
                                                    "text": "Closed again: a small cloud VM."}}]


# --------------------------------------------------------------------------
# 4. --text - and --effect -

AWKWARD_TEXT = 'Deposit is $500; run `rm -rf /tmp/x` never. "Quoted", \'single\', \\n, café 東京 🧩\ttab\r\nline two'


def test_text_from_standard_input_is_kept_byte_for_byte(session):
    append(session, "decision", "-", "--effect", "Checked by hand.", input=(AWKWARD_TEXT + "\n").encode("utf-8"))

    record = read_records(session)[0]
    assert record["text"] == AWKWARD_TEXT
    assert record["effect"] == "Checked by hand."


def test_effect_from_standard_input(session):
    append(session, "tension", "Cost against volume.", "--effect", "-", input=AWKWARD_TEXT.encode("utf-8"))

    assert read_records(session)[0]["effect"] == AWKWARD_TEXT


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_a_quoted_here_document_reaches_the_log_untouched(session):
    text = 'The fee is $25 for "late" cancellations; `fee --waive` and $(whoami) stay as written.'
    script = "%s -S %s --dir %s append --type decision --text - <<'EOF'\n%s\nEOF\n" % (
        shlex.quote(sys.executable), shlex.quote(str(NOTES)), shlex.quote(str(session)), text)

    completed = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60)

    assert completed.returncode == 0, completed
    assert read_records(session)[0]["text"] == text


@pytest.mark.parametrize("arguments, stdin, words", [
    (["--text", "-", "--effect", "-"], b"Both at once.", ["--text -", "--effect -"]),
    (["--text", "-"], "Café".encode("latin-1"), ["UTF-8"]),
    (["--text", "-"], b"ok \xff\xfe", ["UTF-8"]),
    (["--effect", "-", "--text", "Fine."], b"\xc3", ["--effect", "UTF-8"]),
    (["--text", "-"], b"", ["empty"]),
    (["--text", "-"], b" \n\t\n", ["empty"]),
    (["--text", "-"], b"x" * 70000, ["standard input", "65536"]),
    (["--text", "-"], b"The key is AKIAABCDEFGHIJKLMNOP.\n", ["credential"]),
], ids=["both", "latin-1", "invalid bytes", "cut sequence in effect", "empty", "blank", "too long", "credential"])
def test_bad_standard_input_is_refused_and_nothing_is_written(session, arguments, stdin, words):
    append(session, "decision", "SMS is the channel.")
    before = folder_digest(session)

    result = run_notes("append", "--type", "decision", *arguments, folder=session, input=stdin)

    assert_refused(result, 2, *words)
    assert folder_digest(session) == before


# --------------------------------------------------------------------------
# 5. export_lag

def test_export_lag_counts_the_notes_the_export_lacks(session):
    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    path = str(session / "session_export.json")
    assert recap(session)["export_lag"] == {"path": path, "record_count": None, "missing": 3}

    assert run_notes("export", folder=session).code == 0
    assert recap(session)["export_lag"] == {"path": path, "record_count": 3, "missing": 0}
    assert "Export: session_export.json holds every note." in recap_text(session, "--format", "md")

    append(session, "decision", "Decision 4.")
    assert recap(session)["export_lag"] == {"path": path, "record_count": 3, "missing": 1}
    append(session, "decision", "Decision 5.")
    assert recap(session)["export_lag"] == {"path": path, "record_count": 3, "missing": 2}
    assert "Export: session_export.json lacks the 2 newest notes; export again." in \
        recap_text(session, "--format", "md").splitlines()


def test_export_lag_reads_only_the_head_of_the_export(session):
    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    assert run_notes("export", folder=session).code == 0
    append(session, "decision", "Decision 4.")
    # Beyond its head the file is no longer JSON at all: recap never reads that far.
    with open(str(session / "session_export.json"), "ab") as handle:
        handle.write(b"\x00not json" * 200000)

    assert recap(session)["export_lag"] == {"path": str(session / "session_export.json"), "record_count": 3,
                                            "missing": 1}


def make_unusable_export(kind, folder, tmp_path):
    """Put an export at folder/session_export.json that recap cannot count from."""
    target = folder / "session_export.json"
    if kind == "another session":
        shutil.copy(str(copy_fixture("basic", tmp_path / "v0") / "session_export.json"), str(target))
    elif kind == "not an export":
        target.write_bytes(b"Meeting notes, not an export.\n")
    elif kind == "a folder":
        target.mkdir()
    elif kind == "a FIFO":
        os.mkfifo(str(target))


@pytest.mark.parametrize("kind, words", [
    ("another session", ["another session"]),
    ("not an export", ["record_count"]),
    ("a folder", ["not a regular file"]),
    pytest.param("a FIFO", ["not a regular file"], marks=pytest.mark.skipif(not hasattr(os, "mkfifo"),
                                                                           reason="no FIFOs here")),
])
def test_an_export_that_cannot_be_counted_leaves_every_note_missing(session, tmp_path, kind, words):
    append(session, "decision", "Decision 1.")
    append(session, "decision", "Decision 2.")
    make_unusable_export(kind, session, tmp_path)

    result = run_notes("recap", folder=session, timeout=20)  # a FIFO is never opened for a blocking read

    assert result.code == 0, result
    lag = result.receipt["export_lag"]
    assert list(lag) == ["path", "record_count", "missing", "problem"]
    assert (lag["record_count"], lag["missing"]) == (None, 2)
    for word in words:
        assert word in lag["problem"]
    assert "Export: session_export.json " in recap_text(session, "--format", "md")


def test_an_export_newer_than_the_log_says_to_restore_it(tmp_path):
    folder = tmp_path / "session"
    records = write_session(folder, [("decision", "Decision %d." % number) for number in range(1, 6)])
    assert run_notes("export", folder=folder).code == 0
    (folder / LOG).write_bytes(b"".join(line_of(record) for record in records[:3]))

    lag = recap(folder)["export_lag"]

    assert (lag["record_count"], lag["missing"]) == (5, 0)
    assert "restore" in lag["problem"]


# --------------------------------------------------------------------------
# 7. the size budget, on a realistic 300-note session

FILLER = ("the clinic's reception desk books most appointments by phone, and the nightly CSV export from the "
          "booking tool carries names, phone numbers, times and the dentist for every visit of the next days")


def sentence(label: str, length: int) -> str:
    """A sentence of exactly `length` characters that starts with label."""
    body = (label + ": " + FILLER * 2)[:length - 1].rstrip()
    return body + "." + "." * (length - len(body) - 1)


def realistic_session() -> list:
    """300 signals in blocks of ten: texts of about 150 characters, most with an effect."""
    signals = []
    for block in range(30):
        first, gate = "n%05d" % (10 * block + 1), "n%05d" % (10 * block + 2)
        signals.append(("decision", sentence("Decision %d" % block, 150),
                        {"effect": sentence("Consequence %d" % block, 95)}))
        signals.append(("gate", sentence("Gate %d" % block, 140), {"effect": sentence("Blocks %d" % block, 80)}))
        signals.append(("source", sentence("Source %d" % block, 145)))
        labels = {"provenance": "model"} if block % 6 == 3 else {"provenance": "op", "evidence": "declared"}
        signals.append(("decision", sentence("Default %d" % block, 155), dict(labels)))
        signals.append(("discard", sentence("Discarded %d" % block, 150), {"effect": sentence("Never %d" % block, 90)}))
        if block == 0:
            signals.append(("tension", sentence("Tension %d" % block, 140)))
        elif block - 1 in (3, 10, 17, 24):  # the gate of the block before stays open
            signals.append(("mode", sentence("Mode %d" % block, 120)))
        else:
            status = "deferred" if block - 1 in (5, 16) else "closed"
            signals.append(("gate", sentence("Gate %d %s" % (block - 1, status), 150),
                            {"ref": "n%05d" % (10 * block - 8), "status": status}))
        signals.append(("tension", sentence("Tension %d" % block, 150), {"effect": sentence("Watch %d" % block, 100)}))
        signals.append(("decision", sentence("Revised %d" % block, 150), {"ref": first} if block % 4 == 0 else {}))
        signals.append(("source" if block % 3 else "artifact", sentence("Boundary %d" % block, 150),
                        {"evidence": "inferred"} if block % 10 == 5 else {"effect": sentence("Keep %d" % block, 85)}))
        signals.append(("shape" if block % 2 else "mode", sentence("State %d" % block, 140)))
        assert len(signals) == 10 * (block + 1), gate
    return signals


@pytest.fixture(scope="module")
def big_session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("budget") / "clinic"
    write_session(folder, realistic_session())
    return folder


CUT_LISTS = ["closed_gates", "decisions", "discards", "tensions", "sources", "artifacts"]


def age(name, item) -> int:
    """The seq of the note that put an entry on its list: a closed gate's closing update, else the note."""
    return int((item["update_id"] if name == "closed_gates" else item["id"])[1:])


@pytest.mark.parametrize("form", ["json", "md"])
def test_recap_of_a_300_note_session_fits_the_default_budget(big_session, form):
    everything = recap(big_session, "--max-bytes", "100000000")
    unbounded = recap_text(big_session, "--format", form, "--max-bytes", "100000000")
    assert len(unbounded.encode("utf-8")) > 2 * DEFAULT_BUDGET  # without the budget it would not fit

    output = recap_text(big_session, "--format", form)

    assert len(output.encode("utf-8")) <= DEFAULT_BUDGET
    assert len(output.encode("utf-8")) > DEFAULT_BUDGET - 1000, "the budget is used, not wasted"
    # What recap never leaves out.
    assert len(everything["open_gates"]) == 5 and len(everything["deferred_gates"]) == 2
    assert len(everything["unconfirmed"]) == 8
    kept_ids = ([gate["id"] for gate in everything["open_gates"] + everything["deferred_gates"]]
                + [item["id"] for item in everything["unconfirmed"]]
                + [everything["mode"]["id"], everything["shape"]["id"]])
    for note_id in kept_ids:
        assert note_id in output, note_id
    if form == "md":
        assert output.count("\n") == len(output.splitlines())
        return
    state = json.loads(output)
    assert output == json.dumps(state, ensure_ascii=False, separators=(",", ":")) + "\n", "one compact line"
    for key in ("mode", "shape", "open_gates", "deferred_gates", "unconfirmed", "superseded_count", "export_lag"):
        assert state[key] == everything[key], key
    # The oldest entries went first, whatever their list, and each cut is counted.
    cut_ages, kept_ages = [], []
    for name in CUT_LISTS:
        full, kept = everything[name], state[name]
        if name == "closed_gates":  # shown newest first: compare in the order of the other lists
            full, kept = full[::-1], kept[::-1]
        assert kept == full[len(full) - len(kept):], name
        cut_ages += [age(name, item) for item in full[:len(full) - len(kept)]]
        kept_ages += [age(name, item) for item in kept]
        assert state["truncated"].get(name, 0) == everything.get("truncated", {}).get(name, 0) + \
            len(full) - len(kept), name
    assert cut_ages and max(cut_ages) < min(kept_ages)


def test_what_recap_left_out_can_be_seen_with_the_commands_it_gives(big_session):
    everything = recap(big_session, "--max-bytes", "100000000")
    state = recap(big_session)
    left_out = {item["id"] for name in ("decisions", "discards", "tensions", "sources", "artifacts")
                for item in everything[name] if item not in state[name]}
    assert left_out

    shown = set()
    for command in state["see_truncated"]:
        result = run_notes(*command.split(), folder=big_session)
        assert result.code == 0, (command, result)
        shown |= {record["id"] for record in result.receipt["records"]}
    assert left_out <= shown


@pytest.mark.parametrize("form", ["json", "md"])
def test_max_bytes_is_never_exceeded(big_session, form):
    smallest = None
    for budget in (200000, 40000, 20000, 16000, 12288, 11000, 10000, 9000, 8000, 7000, 5000, 4000, 3000):
        result = run_notes("recap", "--format", form, "--max-bytes", budget, folder=big_session)
        assert_no_traceback(result)
        if result.code == 0:
            assert len(result.stdout.encode("utf-8")) <= budget, budget
            continue
        # Below what it never leaves out, recap refuses and names the size that fits.
        error = assert_refused(result, 2, "--max-bytes")
        needed = int(re.search(r"--max-bytes (\d+)", error.split("; ")[-1]).group(1))
        assert needed > budget
        smallest = smallest or needed
    assert smallest is not None
    fitted = recap_text(big_session, "--format", form, "--max-bytes", smallest)
    assert len(fitted.encode("utf-8")) <= smallest


def test_recap_refuses_when_its_gates_alone_exceed_the_budget(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("gate", sentence("Long gate %d" % number, 1900)) for number in range(1, 4)]
                  + [("decision", "Small decision.")])
    before = folder_digest(folder)

    error = assert_refused(run_notes("recap", "--max-bytes", "3000", folder=folder), 2, "--max-bytes 3000",
                           "open and deferred gates")

    needed = int(re.search(r"with --max-bytes (\d+)", error).group(1))
    output = recap_text(folder, "--max-bytes", needed)
    assert len(output.encode("utf-8")) <= needed
    assert len(json.loads(output)["open_gates"]) == 3
    assert folder_digest(folder) == before


def test_recap_prints_one_compact_line_and_other_receipts_keep_their_indent(big_session):
    output = recap_text(big_session)
    assert output.count("\n") == 1 and output.startswith('{"ok":true,"command":"recap",')

    summary = run_notes("summary", folder=big_session)
    assert summary.stdout.startswith('{\n  "ok": true,\n  "command": "summary",')


@pytest.mark.parametrize("value, words", [("0", ["1 or more"]), ("-1", ["1 or more"]), ("abc", ["int"]),
                                          ("1.5", ["int"])])
def test_bad_max_bytes_is_refused(session, value, words):
    assert_refused(run_notes("recap", "--max-bytes", value, folder=session), 2, "--max-bytes", *words)


def test_markdown_recap_carries_no_receipt_keys_and_one_line_per_item(big_session):
    everything = recap(big_session, "--max-bytes", "100000000")
    text = recap_text(big_session, "--format", "md", "--max-bytes", "100000000")

    assert SESSION_ID not in text and str(big_session) not in text
    for key in ("session_id", "superseded_count", "export_lag", "truncated", '"ok"', "update_id", "{"):
        assert key not in text, key
    for line in text.splitlines():
        assert line == "" or line.startswith("# ") or line.startswith("## ") or line.startswith("- ") \
            or line[0].isdigit() or line.startswith(("Export: ", "Pending: ", "Synthesis: ", "Delivered: ")), line
    for name in ("open_gates", "deferred_gates", "closed_gates", "decisions", "discards", "tensions", "sources",
                 "artifacts"):
        for item in everything[name]:
            assert len([line for line in text.splitlines() if "[%s" % item["id"] in line]) == 1, item


# --------------------------------------------------------------------------
# 8. restore answers

def test_restoring_an_older_export_of_the_same_session_says_there_is_nothing_to_restore(session, tmp_path):
    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    older = tmp_path / "kept" / "session_export.json"
    assert run_notes("export", "--output", older, folder=session).code == 0
    append(session, "decision", "Decision 4, made in this sandbox only.")
    append(session, "gate", "A new gate, in this sandbox only.")
    before = folder_digest(session)

    error = assert_refused(run_notes("restore", older, folder=session), 2, "already holds", "5 notes",
                           "nothing to restore")

    assert "--dir" not in error and "empty" not in error
    assert folder_digest(session) == before


def test_the_documented_restore_receipt_is_a_fresh_restore(tmp_path, session):
    documented = [json.loads(line) for line in (REPO / "note-io.md").read_text("utf-8").splitlines()
                  if line.startswith('{"ok": true, "command": "restore"')]
    assert documented and all(receipt["restored"] == receipt["record_count"] for receipt in documented)

    for number in range(1, 4):
        append(session, "decision", "Decision %d." % number)
    assert run_notes("export", folder=session).code == 0
    result = run_notes("restore", session / "session_export.json", folder=tmp_path / "fresh")
    assert result.code == 0, result
    assert (result.receipt["record_count"], result.receipt["restored"]) == (3, 3)
    keys = list(result.receipt)
    if "export" not in documented[0]:  # issue 30's export key, which the contract's example may leave out
        keys.remove("export")
    assert keys == list(documented[0])


# --------------------------------------------------------------------------
# Over MCP, standard input carries the protocol: "-" is never read from it

def test_a_dash_over_mcp_is_refused_and_the_server_goes_on(tmp_path):
    folder = tmp_path / "session"
    messages = [{"jsonrpc": "2.0", "id": number, "method": "tools/call",
                 "params": {"name": "append", "arguments": arguments}}
                for number, arguments in enumerate([{"type": "decision", "text": "-"},
                                                    {"type": "decision", "text": "Fine.", "effect": "-"},
                                                    {"type": "decision", "text": "Kept."}], 1)]
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input="".join(json.dumps(message) + "\n" for message in messages).encode("utf-8"),
                               capture_output=True, timeout=30)

    assert completed.returncode == 0, completed
    answers = [json.loads(line) for line in completed.stdout.decode("utf-8").splitlines()]
    assert [answer["id"] for answer in answers] == [1, 2, 3]
    for answer, name in zip(answers[:2], ("text", "effect")):
        assert answer["result"]["isError"] is True
        assert "standard input" in answer["result"]["structuredContent"]["error"]
        assert name in answer["result"]["structuredContent"]["error"]
    assert answers[2]["result"]["isError"] is False
    assert [record["text"] for record in read_records(folder)] == ["Kept."]


def test_recap_over_mcp_is_the_compact_line_the_cli_prints(tmp_path):
    folder = tmp_path / "session"
    append(folder, "decision", "SMS is the channel.", "--provenance", "op")
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recap", "arguments": {}}}
    completed = subprocess.run([sys.executable, "-S", str(NOTES), "--dir", str(folder), "mcp"],
                               input=(json.dumps(message) + "\n").encode("utf-8"), capture_output=True, timeout=30)

    result = json.loads(completed.stdout.decode("utf-8"))["result"]
    assert result["content"][0]["text"] == recap_text(folder)


def test_markdown_recap_counts_one_note_in_the_singular(session):
    append(session, "decision", "The log stays append-only.")
    assert recap_text(session, "--format", "md").splitlines()[2] == "1 note, 0 superseded by later ones."
