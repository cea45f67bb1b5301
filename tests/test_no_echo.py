"""Issue 20, point 5: no usage error repeats what was typed.

A value left unquoted, or sent to the wrong option, may be a pasted secret: every refusal names
the argument (its option or its place) and the way out, never its value.
"""

from __future__ import annotations

import pytest

from conftest import assert_refused, folder_digest, run_notes

# Assembled here so that no file holds a whole fake key.
SECRET = "AK" + "IA" + "QWERTY2345ZXCV67"
SECRET_PIECES = [SECRET, SECRET[4:], SECRET[-10:]]

USAGE_ERRORS = {
    "unquoted text": ["append", "--type", "decision", "--text", "the", SECRET],
    "unknown command": [SECRET],
    "unknown command with options": [SECRET, "--type", "decision"],
    "type choice": ["append", "--type", SECRET, "--text", "x"],
    "status choice": ["append", "--type", "gate", "--status", SECRET, "--text", "x"],
    "provenance choice": ["append", "--type", "decision", "--text", "x", "--provenance", SECRET],
    "evidence choice": ["append", "--type", "decision", "--text", "x", "--evidence", SECRET],
    "format choice": ["recap", "--format", SECRET],
    "ref not a note id": ["append", "--type", "decision", "--text", "x", "--ref", SECRET],
    "limit not an integer": ["tail", "--limit", SECRET],
    "since not a time": ["tail", "--since", SECRET],
    "until not a time": ["tail", "--until", SECRET],
    "ambiguous option with a value": ["append", "--t=" + SECRET],
    "value starting with a dash": ["append", "--type", "decision", "--text", "x", "-" + SECRET],
    "option glued to a value": ["append", "--type", "decision", "--text", "x", "--" + SECRET.lower()],
}


@pytest.mark.parametrize("arguments", list(USAGE_ERRORS.values()), ids=list(USAGE_ERRORS))
def test_a_usage_error_never_echoes_the_value(session, arguments):
    before = folder_digest(session)
    result = run_notes(*arguments, folder=session)
    error = assert_refused(result, 2)
    for piece in SECRET_PIECES + [SECRET.lower(), SECRET.lower()[4:]]:
        assert piece not in result.stdout and piece not in result.stderr, (piece, result)
    assert "--help" in error or "note id" in error or "UTC time" in error, error  # the way out
    assert folder_digest(session) == before


def test_a_stray_word_is_named_by_its_place(session):
    result = run_notes("append", "--type", "decision", "--text", "the", SECRET, folder=session)
    # --dir and its folder are arguments 1 and 2: the stray word is the 8th.
    assert "unexpected argument 8 (a word after append" in assert_refused(result, 2, "put quotes around")


def test_a_typo_is_answered_with_the_suggestion_only(session):
    error = assert_refused(run_notes("append", "--type", "decison", "--text", "x", folder=session), 2)
    assert "did you mean decision?" in error and "decison" not in error
    error = assert_refused(run_notes("apend", "--type", "decision", folder=session), 2)
    assert "did you mean append?" in error and "apend" not in error.replace("append", "")


def test_a_refused_option_value_is_named_by_its_option(session):
    # The option names the argument; its place is left out, so that an MCP call gets the same
    # refusal, with the tool's argument (status) named where this names --status.
    result = run_notes("append", "--type", "gate", "--status", SECRET, "--text", "x", folder=session)
    assert assert_refused(result, 2).startswith("argument --status: unknown status; use one of")
    result = run_notes("tail", "--limit=" + SECRET, folder=session)
    assert assert_refused(result, 2).startswith("argument --limit: invalid int value")
