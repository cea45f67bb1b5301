"""Issue 20, point 6: the credential guard measured on two corpora.

tests/fixtures/credentials/secrets.txt holds templates of fake credentials of many kinds, and
near_misses.txt texts that only look like them.  The templates are filled here with seeded
random characters, so that no file of the project holds a key a secret scanner could take for a
real one.  Every case goes through the real script's append, as a model would send it; the test
prints the figures (python -m pytest -s shows them).
"""

from __future__ import annotations

import json
import re

from conftest import assert_no_traceback, load_corpus, folder_digest, notes, read_records, run_notes

CORPUS_SECRETS = load_corpus("secrets.txt")
CORPUS_NEAR_MISSES = load_corpus("near_misses.txt")


def append_with_effect(folder, text, effect):
    command = ["append", "--type", "decision", "--text", text]
    if effect is not None:
        command += ["--effect", effect]
    return run_notes(*command, folder=folder)


def test_the_corpora_are_as_large_and_varied_as_promised():
    assert len(CORPUS_SECRETS) >= 150 and len({kind for kind, _, _ in CORPUS_SECRETS}) >= 40
    assert len(CORPUS_NEAR_MISSES) >= 150
    # No near-miss holds a whole fake secret, and the fillings differ from line to line.
    texts = [text + (effect or "") for _, text, effect in CORPUS_NEAR_MISSES]
    for _, text, effect in CORPUS_SECRETS:
        assert not any(text + (effect or "") in other for other in texts)
    assert len({text for _, text, _ in CORPUS_SECRETS}) == len(CORPUS_SECRETS)


def test_at_least_95_percent_of_the_secrets_are_refused_and_none_echoed(session):
    before = folder_digest(session)
    missed, named = [], set()
    for kind, text, effect in CORPUS_SECRETS:
        result = append_with_effect(session, text, effect)
        assert_no_traceback(result)
        if result.code == 0:
            missed.append(kind)
            continue
        assert result.code == 2 and result.receipt["ok"] is False, (kind, result)
        assert "credential" in result.receipt["error"], (kind, result.receipt)
        named.update(re.findall(r"credential \(([^)]*)\)", result.receipt["error"]))
        for secret in re.findall(r"[A-Za-z0-9+/_.=-]{8,}", text + " " + (effect or ""))[-1:]:
            assert secret not in result.stdout and secret not in result.stderr, kind
    refused = len(CORPUS_SECRETS) - len(missed)
    print("\ncredential corpus: %d of %d secrets refused (%.1f%%), %d corpus kinds, %d kinds named in the "
          "refusals; missed: %s" % (refused, len(CORPUS_SECRETS), 100.0 * refused / len(CORPUS_SECRETS),
                                    len({k for k, _, _ in CORPUS_SECRETS}), len(named), ", ".join(missed) or "none"))
    assert len(named) >= 40, sorted(named)
    assert refused >= 0.95 * len(CORPUS_SECRETS), missed
    if missed:  # what slipped through was stored: the folder changed only by those notes
        assert len(read_records(session)) == len(missed)
    else:
        assert folder_digest(session) == before


def test_no_near_miss_is_refused_and_each_is_stored_as_is(session):
    refused = []
    for name, text, effect in CORPUS_NEAR_MISSES:
        result = append_with_effect(session, text, effect)
        assert_no_traceback(result)
        if result.code != 0:
            refused.append((name, result.receipt and result.receipt.get("error")))
    print("\nnear-miss corpus: %d of %d refused" % (len(refused), len(CORPUS_NEAR_MISSES)))
    assert refused == []
    records = read_records(session)
    assert [(record["text"], record.get("effect")) for record in records] == [
        (text.strip(), effect.strip() if effect else None) for _, text, effect in CORPUS_NEAR_MISSES]


def log_holding_a_split_key(session) -> tuple:
    """A log edited by hand to hold a key split between text and effect, which append refuses: (text, effect)."""
    kind, text, effect = next(case for case in CORPUS_SECRETS if case[0] == "aws_key_split_fields")
    assert append_with_effect(session, "Plain note.", None).code == 0
    [record] = read_records(session)
    record.update(text=text, effect=effect)
    del record["checksum"]
    record["checksum"] = notes._record_checksum(record)
    (session / "session_notes.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return text, effect


def test_verify_reports_a_key_split_between_text_and_effect(session):
    # append refuses the split key; a log edited by hand holds it, and verify says so with the same check.
    text, effect = log_holding_a_split_key(session)
    result = run_notes("verify", folder=session)
    assert result.code == 3, result
    assert "split between them" in json.dumps(result.receipt) and "credential" in json.dumps(result.receipt)
    for fragment in (text, effect):
        assert fragment not in result.stdout


def test_restore_refuses_a_key_split_between_text_and_effect(session, tmp_path):
    text, effect = log_holding_a_split_key(session)
    export = run_notes("export", folder=session)
    assert export.receipt is not None and "path" in export.receipt, export
    target = tmp_path / "restored"
    result = run_notes("restore", export.receipt["path"], folder=target)
    assert result.code == 3, result
    assert "credential" in result.stdout and text not in result.stdout and effect not in result.stdout
    assert not (target / "session_notes.jsonl").exists()
