"""What recap says is pending and where synthesis stands (issue 19, point 2).

pending counts the open gates and the unconfirmed notes; synthesis names the
mode note that entered synthesis and the latest one beginning with SYNTHESIS;
delivery names the last artifact note appended in synthesis and the live
notes appended after it.  All of it inside recap's byte budget.
"""

from __future__ import annotations

import pytest

from conftest import assert_no_traceback, assert_refused, run_notes, write_signals

SESSION_ID = "3a7d9c1e-5b2f-4d8a-9e6c-1f0b2a3c4d5e"
NEXT_BOTH = ("put each to the operator before synthesis (close or defer each gate; confirm, correct or drop "
             "each note).")
NEXT_NOTES = "put each to the operator before synthesis (confirm, correct or drop each note)."


# --------------------------------------------------------------------------
# Local helpers

def write_session(folder, signals) -> None:
    write_signals(folder, SESSION_ID, signals)


def recap(folder, *extra, form="json"):
    """recap's receipt (json) or its text (md), after checking that it answered."""
    result = run_notes("recap", "--format", form, *extra, folder=folder)
    assert result.code == 0, result
    assert_no_traceback(result)
    return result.receipt if form == "json" else result.stdout


def recap_md(folder, *extra) -> str:
    return recap(folder, *extra, form="md")


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
    write_session(folder, PENDING_SESSION)

    receipt = recap(folder)

    # The model's open gate n00003 counts once: it is pending as open, not also as unconfirmed.
    assert [item["id"] for item in receipt["open_gates"]] == ["n00002", "n00003"]
    assert [item["id"] for item in receipt["unconfirmed"]] == ["n00006", "n00007"]
    assert receipt["pending"] == {"open_gates": 2, "unconfirmed": 2, "next": "2 open gates, 2 unconfirmed notes: "
                                  + NEXT_BOTH}
    assert list(receipt)[-1] == "pending"  # no synthesis, no delivery: no key for them


@pytest.mark.parametrize("signals, pending", [
    ([("gate", "Hosting is undecided.")],
     {"open_gates": 1, "unconfirmed": 0, "next": "1 open gate: put it to the operator before synthesis (close or "
                                                "defer each gate)."}),
    # A tension names a pull between lenses: nothing in it to confirm, whoever noted it.
    ([("decision", "SMS.", {"provenance": "model"}), ("tension", "Cost.", {"evidence": "inferred"}),
      ("source", "About 400 a month.", {"evidence": "inferred"})],
     {"open_gates": 0, "unconfirmed": 2, "next": "2 unconfirmed notes: " + NEXT_NOTES}),
    # Deferred and closed gates and confirmed notes leave nothing pending: no key at all.
    ([("gate", "Payment links.", {"status": "deferred"}), ("gate", "Hosting."),
      ("gate", "Hosting closed.", {"ref": "n00002", "status": "closed"}),
      ("decision", "SMS.", {"provenance": "op"})], None),
], ids=["one-gate", "unconfirmed-only", "nothing"])
def test_pending_only_when_something_is(tmp_path, signals, pending):
    folder = tmp_path / "session"
    write_session(folder, signals)
    assert recap(folder).get("pending") == pending


def test_pending_counts_what_the_limit_leaves_out(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("gate", "Gate %d." % number) for number in range(1, 5)]
                  + [("decision", "Proposal %d." % number, {"provenance": "model"}) for number in range(1, 4)])

    receipt = recap(folder, "--limit", "1")

    assert [item["id"] for item in receipt["open_gates"]] == ["n00004"]
    assert len(receipt["unconfirmed"]) == 1
    assert receipt["truncated"] == {"open_gates": 3, "unconfirmed": 2}
    assert receipt["pending"] == {"open_gates": 4, "unconfirmed": 3,
                                  "next": "4 open gates, 3 unconfirmed notes: " + NEXT_BOTH}


# --------------------------------------------------------------------------
# synthesis

@pytest.mark.parametrize("modes, synthesis", [
    (["SHAPING begins."], None),
    # Case matters: the protocol's state is written SYNTHESIS.
    (["synthesis, maybe later."], None),
    (["SHAPING begins.", "SYNTHESIS approved."], {"entered": "n00002", "latest": "n00002"}),
    (["SYNTHESIS approved.", "SYNTHESIS: second part."], {"entered": "n00001", "latest": "n00002"}),
    # A mode note that leaves synthesis changes neither id; recap's mode shows it.
    (["SYNTHESIS approved.", "SYNTHESIS: second part.", "SHAPING again: the operator reopened scope."],
     {"entered": "n00001", "latest": "n00002"}),
    # Entering again starts a new stretch: entered moves to it.
    (["SYNTHESIS approved.", "SHAPING again.", "SYNTHESIS approved again."], {"entered": "n00003", "latest": "n00003"}),
], ids=["never", "lowercase", "entered", "stays", "left", "entered-again"])
def test_synthesis_names_the_note_that_entered_it_and_the_latest(tmp_path, modes, synthesis):
    folder = tmp_path / "session"
    write_session(folder, [("mode", text) for text in modes])

    receipt = recap(folder)

    assert receipt.get("synthesis") == synthesis
    assert receipt["mode"]["id"] == "n%05d" % len(modes)
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
    ("mode", "SHAPING again: the operator reopened the channel."),  # n00008, leaves synthesis: no content
    ("artifact", "Pricing stays out of the runbook."),  # n00009: outside synthesis, a boundary, not a delivery
]


def test_delivery_names_the_last_artifact_in_synthesis_and_the_live_notes_after_it(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, DELIVERY_SESSION)

    receipt = recap(folder)

    assert receipt["delivery"] == {"id": "n00004", "after": ["n00006", "n00007", "n00009"], "more": 0}
    # Delivering ends synthesis: the artifact note that did it is named.
    assert receipt["synthesis"] == {"entered": "n00003", "latest": "n00003", "ended": "n00004"}
    assert "pending" not in receipt  # the one gate was deferred
    assert list(receipt)[-3:] == ["export_lag", "synthesis", "delivery"]


def test_the_mode_note_that_ends_synthesis_leaves_the_delivery_current(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("mode", "SHAPING: synthesis ended with the delivery of v1.")])

    receipt = recap(folder)

    assert receipt["delivery"] == {"id": "n00002", "after": [], "more": 0}
    assert receipt["synthesis"] == {"entered": "n00001", "latest": "n00001", "ended": "n00002"}
    assert receipt["mode"]["id"] == "n00003"


def test_a_later_delivery_replaces_the_earlier_one(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, DELIVERY_SESSION + [("mode", "SYNTHESIS approved again."),  # n00010
                                              ("artifact", "Runbook v2 delivered.")])  # n00011

    receipt = recap(folder)

    assert receipt["delivery"] == {"id": "n00011", "after": [], "more": 0}
    assert receipt["synthesis"] == {"entered": "n00010", "latest": "n00010", "ended": "n00011"}


def test_an_artifact_note_after_a_delivery_is_a_boundary_until_synthesis_is_entered_again(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook v1 delivered."),
                           ("artifact", "Pricing stays out of the runbook.")])

    receipt = recap(folder)

    # The first artifact note delivered and ended synthesis; the second one sets a boundary.
    assert receipt["delivery"] == {"id": "n00002", "after": ["n00003"], "more": 0}
    assert receipt["synthesis"] == {"entered": "n00001", "latest": "n00001", "ended": "n00002"}


def test_delivery_lists_the_newest_limit_ids_and_counts_the_rest(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Delivered.")]
                  + [("tension", "Tension %d." % number) for number in range(1, 31)])  # n00003-n00032

    assert recap(folder, "--limit", "5")["delivery"] == {
        "id": "n00002", "after": ["n00028", "n00029", "n00030", "n00031", "n00032"], "more": 25}
    assert recap(folder)["delivery"] == {"id": "n00002", "after": ["n%05d" % seq for seq in range(13, 33)],
                                         "more": 10}


def test_the_markdown_recap_says_what_is_pending_delivered_and_who_settled_it(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [
        ("gate", "Hosting is undecided."),  # n00001
        ("decision", "SMS is the channel.", {"provenance": "op"}),  # n00002
        ("tension", "Cost grows with volume.", {"provenance": "shared", "evidence": "observed"}),  # n00003
        ("mode", "SYNTHESIS approved."),  # n00004
        ("artifact", "Runbook delivered."),  # n00005
        ("decision", "Email too.", {"provenance": "model"}),  # n00006
        ("gate", "Hosting closed: the reception PC.", {"ref": "n00001", "status": "closed",
                                                       "provenance": "op"}),  # n00007
    ])

    lines = recap_md(folder).splitlines()

    assert lines[:9] == [
        "# Recap", "", "7 notes, 0 superseded by later ones.", "Export: no session_export.json yet.", "",
        "Pending: 1 unconfirmed note: put it to the operator before synthesis (confirm, correct or drop each "
        "note).",
        "Synthesis: entered by n00004; latest SYNTHESIS note n00004; ended by the delivery n00005.",
        "Delivered: n00005, out of date: 2 live notes after it (n00006, n00007).",
        "",
    ]
    assert "- SMS is the channel. [n00002; from the operator]" in lines
    assert "- Cost grows with volume. [n00003; shared by both]" in lines
    assert "- Hosting is undecided. Closed: Hosting closed: the reception PC. [n00001, closed by n00007; " \
           "from the operator]" in lines
    # An unconfirmed note keeps its own mark, which already says who proposed it.
    assert "- Decision: Email too. [n00006; proposed by the model]" in lines
    # A note without provenance has no mark for it.
    assert "- Runbook delivered. [n00005]" in lines


def test_markdown_delivery_with_nothing_after_it(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [("mode", "SYNTHESIS approved."), ("artifact", "Runbook delivered.")])
    assert "Delivered: n00002, with no live note after it." in recap_md(folder).splitlines()


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
    write_session(folder, budget_session())

    result = run_notes("recap", "--format", form, folder=folder)

    assert result.code == 0, result
    assert_no_traceback(result)
    assert len(result.stdout.encode("utf-8")) <= 12288
    everything = recap(folder, "--max-bytes", "100000000")
    assert everything["delivery"] == {"id": "n00041", "after": ["n%05d" % seq for seq in range(281, 301)],
                                      "more": 239}
    if form == "json":
        assert result.receipt["delivery"] == everything["delivery"]
        assert result.receipt["pending"]["open_gates"] == 3
        assert result.receipt["synthesis"] == {"entered": "n00040", "latest": "n00040", "ended": "n00041"}
    else:
        assert "Delivered: n00041, out of date: 259 live notes after it (n00281, " in result.stdout
        assert ("Synthesis: entered by n00040; latest SYNTHESIS note n00040; ended by the delivery n00041."
                in result.stdout)


@pytest.mark.parametrize("form", ["json", "md"])
def test_delivery_ids_go_before_the_budget_is_exceeded(tmp_path, form):
    # Open gates are never left out: with long ones, only the delivery's ids can make room.
    folder = tmp_path / "session"
    write_session(folder, [("gate", "Open gate %d. %s" % (number, LONG)) for number in range(1, 6)]
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
    # At the smallest budget every delivery id is gone, and counted.
    if form == "json":
        assert smallest.receipt["delivery"] == {"id": "n00007", "after": [], "more": 20}
        assert everything.receipt["delivery"]["after"] == ["n%05d" % seq for seq in range(8, 28)]
    else:
        assert "Delivered: n00007, out of date: 20 live notes after it (20 more)." in smallest.stdout
    # Each budget in between is kept, listing as many ids as fit.
    for budget in range(fits, full + 1, max(1, (full - fits) // 7)):
        result = size(budget)
        assert result.code == 0 and len(result.stdout.encode("utf-8")) <= budget, (budget, result)


# --------------------------------------------------------------------------
# --help states the rule

def test_help_says_what_enters_synthesis_and_what_is_a_delivery():
    append_help = " ".join(run_notes("append", "--help").stdout.split())
    assert "A mode note whose text begins with SYNTHESIS enters synthesis" in append_help
    assert "an artifact note appended in synthesis is a delivery" in append_help
    recap_help = " ".join(run_notes("recap", "--help").stdout.split())
    for words in ("pending: what to put to the operator before synthesis",
                  "the latest one beginning with SYNTHESIS (a later mode note that leaves synthesis changes neither)",
                  "delivery: the last artifact note appended in synthesis and the live notes after it"):
        assert words in recap_help, words
