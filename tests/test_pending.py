"""What recap says is pending and where synthesis stands (issue 19, point 2; issue 26).

pending counts the open gates and the unconfirmed notes and says since when
they were raised (facts, no orders); synthesis says whether it was entered,
delivered or ended, and by which notes; delivery names the last artifact note
appended in synthesis and the live notes appended after it, with their type
and text.  All of it inside recap's byte budget.
"""

from __future__ import annotations

import pytest

from conftest import assert_no_traceback, assert_refused, notes, run_notes, write_signals

SESSION_ID = "3a7d9c1e-5b2f-4d8a-9e6c-1f0b2a3c4d5e"


# --------------------------------------------------------------------------
# Local helpers

def write_signal_session(folder, signals) -> None:
    write_signals(folder, SESSION_ID, signals)


def session_recap(folder, **options) -> dict:
    """recap's receipt, in process."""
    return dict(notes.Session(folder).recap(**options))


def recap_md(folder, **options) -> str:
    return notes.Session(folder).recap(format="md", **options)["markdown"]


# --------------------------------------------------------------------------
# pending

PENDING_SESSION = [
    ("mode", "SHAPING: the operator set the scope."),  # n00001
    ("gate", "Hosting is undecided."),  # n00002, open
    ("gate", "Consent wording is undecided.", {"provenance": "model"}),  # n00003, open and unconfirmed
    ("gate", "Payment links.", {"status": "deferred"}),  # n00004, deferred: not pending
    ("decision", "SMS is the channel.", {"provenance": "op", "evidence": "declared"}),  # n00005, settled
    ("decision", "Reminders go out 48 hours ahead.", {"provenance": "model"}),  # n00006, unconfirmed
    ("source", "About 400 appointments a month.", {"evidence": "inferred"}),  # n00007, unconfirmed
    ("gate", "Hosting still open: the IT contact is away.",
     {"ref": "n00002", "status": "open", "provenance": "op"}),  # n00008
]


def test_pending_counts_open_gates_and_the_unconfirmed_list(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, PENDING_SESSION)

    receipt = session_recap(folder)

    # The model's open gate n00003 counts once: it is pending as open, not also as unconfirmed.
    assert [item["id"] for item in receipt["open_gates"]] == ["n00002", "n00003"]
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00006", "n00007"]
    # Facts only: the counts, and the item raised first (n00003: n00002 was set open again by n00008).
    assert receipt["pending"] == {"open_gates": 2, "unconfirmed": 2, "raised_since": "n00003"}
    assert list(receipt)[-1] == "pending"  # no synthesis, no delivery: no key for them


@pytest.mark.parametrize("signals, pending", [
    ([("gate", "Hosting is undecided.")], {"open_gates": 1, "unconfirmed": 0, "raised_since": "n00001"}),
    # A tension names a pull between lenses: nothing in it to confirm, whoever noted it.
    ([("decision", "SMS.", {"provenance": "model"}), ("tension", "Cost.", {"evidence": "inferred"}),
      ("source", "About 400 a month.", {"evidence": "inferred"})],
     {"open_gates": 0, "unconfirmed": 2, "raised_since": "n00001"}),
    # The shape, listed after the loop, is still the earliest raised.
    ([("shape", "A nightly job.", {"provenance": "model"}), ("decision", "SMS.", {"provenance": "model"})],
     {"open_gates": 0, "unconfirmed": 2, "raised_since": "n00001"}),
    # Deferred and closed gates and confirmed notes leave nothing pending: no key at all.
    ([("gate", "Payment links.", {"status": "deferred"}), ("gate", "Hosting."),
      ("gate", "Hosting closed.", {"ref": "n00002", "status": "closed"}),
      ("decision", "SMS.", {"provenance": "op"})], None),
], ids=["one-gate", "unconfirmed-only", "shape-first", "nothing"])
def test_pending_only_when_something_is(tmp_path, signals, pending):
    folder = tmp_path / "session"
    write_signal_session(folder, signals)
    assert session_recap(folder).get("pending") == pending


def test_pending_counts_what_the_limit_leaves_out(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Gate %d." % number) for number in range(1, 5)]
                  + [("decision", "Proposal %d." % number, {"provenance": "model"}) for number in range(1, 4)])

    receipt = session_recap(folder, limit=1)

    assert [item["id"] for item in receipt["open_gates"]] == ["n00004"]
    assert len(receipt["unconfirmed"]) == 1
    assert receipt["truncated"] == {"open_gates": 3, "unconfirmed": 2}
    # raised_since names the first one raised, listed or not.
    assert receipt["pending"] == {"open_gates": 4, "unconfirmed": 3, "raised_since": "n00001"}


def test_no_receipt_field_gives_an_order():
    # Receipts state facts; what to do with them is the contracts' part (issue 26, point 2).
    source = open(notes.__file__, encoding="utf-8").read()
    assert "put each to the operator" not in source and "put it to the operator" not in source


def test_pending_says_which_items_came_after_the_last_delivery(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("gate", "Hosting is undecided."),  # n00001: open before the delivery, carried by it
        ("decision", "SMS.", {"provenance": "model"}),  # n00002: unconfirmed before it
        ("mode", "SYNTHESIS approved.", {"provenance": "op"}),  # n00003
        ("artifact", "Delivered v1 as spec.md.", {"provenance": "model", "evidence": "observed"}),  # n00004
        ("decision", "Email too.", {"provenance": "model"}),  # n00005
        ("gate", "Consent wording?"),  # n00006
        ("gate", "Hosting still open: the PC is old.", {"ref": "n00001", "status": "open"}),  # n00007
    ])

    receipt = session_recap(folder)

    # The delivery is no proposal to confirm: it is neither unconfirmed nor pending.
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00002", "n00005"]
    assert receipt["pending"] == {"open_gates": 2, "unconfirmed": 2, "raised_since": "n00002",
                                  "since_delivery": ["n00005", "n00006", "n00001"]}
    assert [item["id"] for item in receipt["artifacts"]] == ["n00004"]
    assert receipt["mode"] is None  # the SYNTHESIS note is no longer in force


def test_pending_after_a_delivery_with_nothing_new(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Hosting is undecided."), ("mode", "SYNTHESIS approved."),
                           ("artifact", "Delivered v1.")])
    assert session_recap(folder)["pending"] == {"open_gates": 1, "unconfirmed": 0, "raised_since": "n00001",
                                        "since_delivery": []}


# --------------------------------------------------------------------------
# synthesis

@pytest.mark.parametrize("modes, synthesis, mode", [
    (["SHAPING begins."], None, "n00001"),
    # Case matters: the protocol's state is written SYNTHESIS.
    (["synthesis, maybe later."], None, "n00001"),
    (["SHAPING begins.", "SYNTHESIS approved."], {"state": "entered", "entered": "n00002"}, "n00002"),
    (["SYNTHESIS approved.", "SYNTHESIS: second part."], {"state": "entered", "entered": "n00001"}, "n00002"),
    # A STOP appends a mode note beginning SHAPING: it ends synthesis, and is the mode in force.
    (["SYNTHESIS approved.", "SYNTHESIS: second part.", "SHAPING again: the operator reopened scope."],
     {"state": "ended", "entered": "n00001", "ended": "n00003"}, "n00003"),
    # Entering again starts a new stretch: entered moves to it.
    (["SYNTHESIS approved.", "SHAPING again.", "SYNTHESIS approved again."],
     {"state": "entered", "entered": "n00003"}, "n00003"),
], ids=["never", "lowercase", "entered", "stays", "ended", "entered-again"])
def test_synthesis_says_whether_it_was_entered_or_ended(tmp_path, modes, synthesis, mode):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", text) for text in modes])

    receipt = session_recap(folder)

    assert receipt.get("synthesis") == synthesis
    assert receipt["mode"]["id"] == mode
    assert "delivery" not in receipt


# --------------------------------------------------------------------------
# delivery

DELIVERY_SESSION = [
    ("artifact", "The runbook excludes raw notes."),  # n00001: a boundary, before synthesis: no delivery
    ("gate", "Hosting is undecided."),  # n00002
    ("mode", "SYNTHESIS approved for the runbook."),  # n00003
    ("artifact", "Runbook v1 delivered.", {"effect": "The operator has it."}),  # n00004: the delivery
    ("decision", "SMS is the channel."),  # n00005, superseded by n00006: not live
    ("decision", "SMS, and email when no phone is on file.", {"ref": "n00005"}),  # n00006
    ("gate", "Hosting deferred.", {"ref": "n00002", "status": "deferred"}),  # n00007
    ("mode", "SHAPING again: the operator reopened the channel."),  # n00008, a mode note: not listed
    ("artifact", "Pricing stays out of the runbook."),  # n00009: outside synthesis, a boundary, not a delivery
]


def test_delivery_names_the_last_artifact_in_synthesis_and_the_live_notes_after_it(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, DELIVERY_SESSION)

    receipt = session_recap(folder)

    assert receipt["delivery"] == {"id": "n00004", "after": [
        {"id": "n00006", "type": "decision", "text": "SMS, and email when no phone is on file."},
        {"id": "n00007", "type": "gate", "text": "Hosting deferred."},
        {"id": "n00009", "type": "artifact", "text": "Pricing stays out of the runbook."}], "more": 0}
    # Delivering ends synthesis: the artifact note that did it is named; the later mode note is in force.
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00003", "delivered": "n00004"}
    assert receipt["mode"]["id"] == "n00008"
    assert "pending" not in receipt  # the one gate was deferred
    assert list(receipt)[-3:] == ["export_lag", "synthesis", "delivery"]


def test_after_a_delivery_the_synthesis_note_is_no_longer_the_mode(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SHAPING."), ("mode", "SYNTHESIS approved.", {"provenance": "model"}),
                           ("artifact", "Runbook v1 delivered.", {"provenance": "model"})])

    receipt = session_recap(folder)

    assert receipt["mode"] is None
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00002", "delivered": "n00003"}
    # Neither the ended SYNTHESIS note nor the delivery waits for a confirmation.
    assert receipt["unconfirmed"] == [] and "pending" not in receipt


def test_the_mode_note_after_a_delivery_leaves_it_delivered(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("mode", "SHAPING: synthesis ended with the delivery of v1.")])

    receipt = session_recap(folder)

    assert receipt["delivery"] == {"id": "n00002", "after": [], "more": 0}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00001", "delivered": "n00002"}
    assert receipt["mode"]["id"] == "n00003"


def test_a_later_delivery_replaces_the_earlier_one(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, DELIVERY_SESSION + [("mode", "SYNTHESIS approved again."),  # n00010
                                              ("artifact", "Runbook v2 delivered.")])  # n00011

    receipt = session_recap(folder)

    assert receipt["delivery"] == {"id": "n00011", "after": [], "more": 0}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00010", "delivered": "n00011"}


def test_synthesis_entered_again_after_a_delivery_and_stopped(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("mode", "SYNTHESIS approved for v2."), ("mode", "SHAPING: STOP, a gap in v2.")])

    receipt = session_recap(folder)

    assert receipt["synthesis"] == {"state": "ended", "entered": "n00003", "ended": "n00004"}
    assert receipt["delivery"] == {"id": "n00002", "after": [], "more": 0}
    assert receipt["mode"]["id"] == "n00004"


def test_an_artifact_note_after_a_delivery_is_a_boundary_until_synthesis_is_entered_again(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("artifact", "Pricing stays out of the runbook.", {"provenance": "model"})])

    receipt = session_recap(folder)

    # The first artifact note delivered and ended synthesis; the second one sets a boundary, unconfirmed.
    assert receipt["delivery"] == {"id": "n00002", "after": [
        {"id": "n00003", "type": "artifact", "text": "Pricing stays out of the runbook."}], "more": 0}
    assert receipt["synthesis"] == {"state": "delivered", "entered": "n00001", "delivered": "n00002"}
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00003"]


def test_delivery_lists_the_newest_limit_notes_and_counts_the_rest(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Delivered.")]
                  + [("tension", "Tension %d." % number) for number in range(1, 31)])  # n00003-n00032

    assert session_recap(folder, limit=5)["delivery"] == {
        "id": "n00002", "after": [{"id": "n%05d" % (number + 2), "type": "tension", "text": "Tension %d." % number}
                                  for number in range(26, 31)], "more": 25}
    delivery = session_recap(folder)["delivery"]
    assert [item["id"] for item in delivery["after"]] == ["n%05d" % seq for seq in range(13, 33)]
    assert delivery["more"] == 10


def test_the_markdown_recap_reads_as_prose_for_the_operator(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [
        ("gate", "Hosting is undecided."),  # n00001
        ("decision", "SMS is the channel.", {"provenance": "op"}),  # n00002
        ("tension", "Cost grows with volume.", {"provenance": "shared", "evidence": "observed"}),  # n00003
        ("mode", "SYNTHESIS approved."),  # n00004
        ("artifact", "Runbook v1, saved as runbook.md.", {"provenance": "model", "evidence": "observed"}),  # n00005
        ("decision", "Email too.", {"provenance": "model"}),  # n00006
        ("gate", "Closed: the reception PC.", {"ref": "n00001", "status": "closed",
                                               "provenance": "op"}),  # n00007
        ("discard", "Paper reminders ruled out."),  # n00008
        ("decision", "Paper reminders for patients without a phone.", {"ref": "n00008", "provenance": "op"}),
    ])

    lines = recap_md(folder).splitlines()

    assert lines[:8] == [
        "# Recap", "", "9 notes, 1 superseded by later ones.", "Export: no session_export.json yet.", "",
        "Pending: 1 note not yet confirmed, listed below; 1 of them raised since the last delivery.",
        "Delivered: Runbook v1, saved as runbook.md. [n00005]; 3 notes since, listed under Since the delivery.",
        "",
    ]
    assert "- SMS is the channel. [n00002; from the operator]" in lines
    assert "- Cost grows with volume. [n00003; shared by both]" in lines
    # A closed gate reads as its question, then its answer, once.
    assert "- Hosting is undecided. - Closed: the reception PC. [n00001; from the operator]" in lines
    assert not any("Closed: Closed:" in line for line in lines)
    # An unconfirmed note keeps its own mark, which already says who proposed it.
    assert "- Decision: Email too. [n00006; proposed by the model]" in lines
    # The delivery is marked as such, not as waiting for a confirmation.
    assert "- Runbook v1, saved as runbook.md. [n00005; the last delivery]" in lines
    assert ("- Paper reminders ruled out. Reopened by a decision: Paper reminders for patients without a phone. "
            "[n00008]") in lines
    since = lines.index("## Since the delivery")
    assert lines[since:] == [
        "## Since the delivery", "", "- Decision: Email too. [n00006]", "- Gate: Closed: the reception PC. [n00007]",
        "- Decision: Paper reminders for patients without a phone. [n00009]"]


@pytest.mark.parametrize("modes, line", [
    (["SYNTHESIS approved."], "Synthesis: approved; the artifact is being written."),
    (["SYNTHESIS approved.", "SHAPING: STOP."], "Synthesis: stopped before a delivery; shaping goes on."),
], ids=["entered", "ended"])
def test_markdown_synthesis_line(tmp_path, modes, line):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", text) for text in modes])
    assert line in recap_md(folder).splitlines()


def test_markdown_delivery_with_nothing_after_it(tmp_path):
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook delivered.")])
    lines = recap_md(folder).splitlines()
    assert "Delivered: Runbook delivered. [n00002]; nothing changed since." in lines
    assert lines[lines.index("## Since the delivery") + 2] == "- none"


# --------------------------------------------------------------------------
# The byte budget holds with the new keys

LONG = "x" * 1900


def budget_session():
    """300 notes: open gates and decisions early, SYNTHESIS at n00040, the delivery at n00041, 259 live notes after."""
    signals = [("mode", "SHAPING: long notes on purpose.")]
    signals += [("gate", "Open gate %d. %s" % (number, LONG[:300])) for number in range(1, 4)]
    signals += [("decision", "Decision %d. %s" % (number, LONG)) for number in range(1, 36)]
    signals += [("mode", "SYNTHESIS approved."), ("artifact", "Runbook delivered. " + LONG)]
    kinds = ("decision", "tension", "source", "discard")  # an artifact here would be a new delivery
    signals += [(kinds[number % len(kinds)], "After %d. %s" % (number, LONG)) for number in range(259)]
    assert len(signals) == 300
    return signals


@pytest.mark.parametrize("form", ["json", "md"])
def test_a_300_note_session_with_a_delivery_fits_the_default_budget(tmp_path, form):
    folder = tmp_path / "session"
    write_signal_session(folder, budget_session())

    result = run_notes("recap", "--format", form, folder=folder)

    assert result.code == 0, result
    assert_no_traceback(result)
    assert len(result.stdout.encode("utf-8")) <= 12288
    everything = session_recap(folder, max_bytes=100000000)
    assert [item["id"] for item in everything["delivery"]["after"]] == ["n%05d" % seq for seq in range(281, 301)]
    assert everything["delivery"]["more"] == 239
    if form == "json":
        # The notes after the delivery go oldest first, like the other lists; the newest stay.
        delivery = result.receipt["delivery"]
        assert delivery["after"] == everything["delivery"]["after"][-len(delivery["after"]):]
        assert 0 < len(delivery["after"]) < 20 and delivery["more"] == 259 - len(delivery["after"])
        assert result.receipt["pending"]["open_gates"] == 3
        assert result.receipt["synthesis"] == {"state": "delivered", "entered": "n00040", "delivered": "n00041"}
    else:
        assert "- Source: After 258. " in result.stdout
        assert "older not shown)" in result.stdout.split("## Since the delivery")[1]


@pytest.mark.parametrize("form", ["json", "md"])
def test_notes_after_the_delivery_go_before_the_budget_is_exceeded(tmp_path, form):
    # Open gates are never left out: with long ones, only the delivery's ids can make room.
    folder = tmp_path / "session"
    write_signal_session(folder, [("gate", "Open gate %d. %s" % (number, LONG)) for number in range(1, 6)]
                  + [("mode", "SYNTHESIS approved."), ("artifact", "Delivered.")]
                  + [("gate", "Closing %d." % number, {"ref": "n%05d" % number, "status": "open"})
                     for number in (1, 2, 3, 4, 5)] * 4)  # n00008-n00027, live, none superseded

    def size(budget):
        result = run_notes("recap", "--format", form, "--max-bytes", str(budget), folder=folder)
        assert_no_traceback(result)
        return result

    everything = size(100000000)
    full = len(everything.stdout.encode("utf-8"))
    # Find the smallest budget recap answers within.
    fits, fails = full, 1
    while fits - fails > 1:
        middle = (fits + fails) // 2
        if size(middle).code == 0:
            fits = middle
        else:
            fails = middle
    smallest = size(fits)
    assert len(smallest.stdout.encode("utf-8")) <= fits
    # One byte less is refused, naming a budget that does fit (not always the smallest one).
    message = assert_refused(size(fits - 1), 2, "--max-bytes %d;" % (fits - 1))
    named = int(message.split("run it again with --max-bytes ")[1].split(",")[0])
    assert named >= fits and size(named).code == 0
    # At the smallest budget every note after the delivery is gone, and counted.
    if form == "json":
        assert smallest.receipt["delivery"] == {"id": "n00007", "after": [], "more": 20}
        assert [item["id"] for item in everything.receipt["delivery"]["after"]] == ["n%05d" % seq
                                                                                    for seq in range(8, 28)]
    else:
        assert "- (20 older not shown)" in smallest.stdout.split("## Since the delivery")[1]
    # Each budget in between is kept, listing as many ids as fit.
    for budget in range(fits, full + 1, max(1, (full - fits) // 7)):
        result = size(budget)
        assert result.code == 0 and len(result.stdout.encode("utf-8")) <= budget, (budget, result)


# --------------------------------------------------------------------------
# --help states the rule

def test_help_says_what_enters_and_ends_synthesis_and_what_is_a_delivery():
    append_help = " ".join(run_notes("append", "--help").stdout.split())
    for words in ("A mode note whose text begins with the word SYNTHESIS enters synthesis",
                  "a later mode note that does not (a STOP appends one beginning SHAPING) ends it",
                  "an artifact note appended in synthesis is a delivery, which ends it too"):
        assert words in append_help, words
    recap_help = " ".join(run_notes("recap", "--help").stdout.split())
    for words in ("pending: how many gates are open and notes unconfirmed, since when",
                  "synthesis: entered, delivered or ended, and by which notes",
                  "delivery: the last artifact note appended in synthesis and the live notes after it"):
        assert words in recap_help, words
    assert "put" not in recap_help.split("pending:")[1].split(";")[0]


def test_markdown_notes_after_a_delivery_cannot_forge_structure(tmp_path):
    # A damaged log may hold a note of an unknown type: its type and text stay inside their line.
    folder = tmp_path / "session"
    write_signal_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Delivered."),
                           ("x\n# Forged*", "Line one\n## Forged heading")])
    lines = recap_md(folder).splitlines()
    assert lines[lines.index("## Since the delivery") + 2] == "- X # forged\\*: Line one ## Forged heading [n00003]"
    assert "## Forged heading" not in lines and "# Forged*" not in lines
