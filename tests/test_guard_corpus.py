"""Issue 29, point 8: the credential guard measured kind by kind on a corpus written for it.

tests/fixtures/credentials/kinds.txt holds templates of fake secrets, each labelled by kind, and
lookalikes.txt texts that only resemble them.  The templates are filled here with seeded random
characters, so that no file of the project holds a key.  Each kind is its own test case: a kind
the guard stops catching fails by name.  Everything runs in process, through Session.append.
"""

from __future__ import annotations

import re

import pytest

from conftest import load_corpus, notes

KIND_SECRETS = [(kind, text) for kind, text, _ in load_corpus("kinds.txt", 1000)]
LOOKALIKES = [(name, text) for name, text, _ in load_corpus("lookalikes.txt", 1000)]
KINDS = sorted({kind for kind, _ in KIND_SECRETS})


def refusal(folder, text: str):
    """The credential refusal append raises for the text, or None when the text is stored."""
    try:
        notes.Session(folder).append(type="source", text=text)
    except notes.NotesError as error:
        return str(error)
    return None


def test_the_kinds_corpus_is_as_large_and_varied_as_promised():
    assert len(KIND_SECRETS) >= 150 and len(KINDS) >= 100
    assert len(LOOKALIKES) >= 120
    assert len({text for _, text in KIND_SECRETS}) == len(KIND_SECRETS)
    for _, text in KIND_SECRETS:
        assert not any(text in other for _, other in LOOKALIKES)


@pytest.mark.parametrize("kind", KINDS)
def test_every_secret_of_the_kind_is_refused_without_being_echoed(tmp_path, kind):
    for _, text in [case for case in KIND_SECRETS if case[0] == kind]:
        error = refusal(tmp_path, text)
        assert error is not None, (kind, text)
        assert "credential" in error and "credentials never enter the log" in error, error
        for piece in re.findall(r"[^\s\"'=:/]{10,}", text):  # the random parts: the prose may be named
            assert piece not in error or not any(c.isdigit() for c in piece), (kind, piece)


@pytest.mark.parametrize("name, text", LOOKALIKES, ids=[name for name, _ in LOOKALIKES])
def test_every_lookalike_is_stored(tmp_path, name, text):
    assert refusal(tmp_path, text) is None, (name, text)


def test_totals_reach_95_percent_caught_and_at_most_1_percent_wrongly_refused(tmp_path):
    missed = [kind for kind, text in KIND_SECRETS if refusal(tmp_path / "secrets", text) is None]
    wrong = [name for name, text in LOOKALIKES if refusal(tmp_path / "lookalikes", text) is not None]
    print("\nguard corpus: %d of %d secrets refused (%d kinds), %d of %d look-alikes refused"
          % (len(KIND_SECRETS) - len(missed), len(KIND_SECRETS), len(KINDS), len(wrong), len(LOOKALIKES)))
    assert len(missed) <= 0.05 * len(KIND_SECRETS), missed
    assert len(wrong) <= 0.01 * len(LOOKALIKES), wrong
