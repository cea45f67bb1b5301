"""One set of checks: what append refuses of the gate and ref rules, verify reports and restore refuses."""

from __future__ import annotations

import pytest

from conftest import (SESSION_ID, assert_no_traceback, line_of, log_bytes, make_record, run_notes, write_export,
                      write_session)

# Each rule append enforces for gates and refs, after a gate n00001 and a decision n00002:
# (the append arguments, the third record's fields, the problem kind verify reports, a
# phrase of its detail).
RULES = {
    "status on a decision": (["--type", "decision", "--text", "Kept.", "--status", "open"],
                             {"note_type": "decision", "status": "open"}, "gate_rule", "only a gate"),
    "gate update without status": (["--type", "gate", "--text", "Moved.", "--ref", "n00001"],
                                   {"note_type": "gate", "ref": "n00001"}, "gate_rule", "no status"),
    "new gate closed": (["--type", "gate", "--text", "Done.", "--status", "closed"],
                        {"note_type": "gate", "status": "closed"}, "gate_rule", "starts closed"),
    "decision naming a gate": (["--type", "decision", "--text", "Kept.", "--ref", "n00001"],
                               {"note_type": "decision", "ref": "n00001"}, "ref_target", "names a gate"),
    "gate update naming a decision": (["--type", "gate", "--text", "Done.", "--ref", "n00002", "--status", "closed"],
                                      {"note_type": "gate", "ref": "n00002", "status": "closed"},
                                      "ref_target", "not a gate"),
    "ref to no earlier note": (["--type", "decision", "--text", "Kept.", "--ref", "n00009"],
                               {"note_type": "decision", "ref": "n00009"}, "ref_target", "names no earlier note"),
    # The links of issue 19: --by only on a gate update, naming an earlier note that is not a gate;
    # --about naming an earlier note.
    "by on a decision": (["--type", "decision", "--text", "Kept.", "--by", "n00002"],
                         {"note_type": "decision", "by": "n00002"}, "gate_rule", "only a gate update"),
    "by naming a gate": (["--type", "gate", "--text", "Done.", "--ref", "n00001", "--status", "closed", "--by",
                          "n00001"], {"note_type": "gate", "ref": "n00001", "status": "closed", "by": "n00001"},
                         "link_target", "names a gate"),
    "by to no earlier note": (["--type", "gate", "--text", "Done.", "--ref", "n00001", "--status", "closed",
                               "--by", "n00009"],
                              {"note_type": "gate", "ref": "n00001", "status": "closed", "by": "n00009"},
                              "link_target", "names no earlier note"),
    "about to no earlier note": (["--type", "decision", "--text", "Kept.", "--about", "n00009"],
                                 {"note_type": "decision", "about": "n00009"}, "link_target",
                                 "names no earlier note"),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_what_append_refuses_verify_reports_readers_read_and_restore_refuses(tmp_path, rule):
    arguments, fields, kind, detail = RULES[rule]
    gate = make_record(SESSION_ID, 1, "gate", text="Host runtime is open.")
    second = make_record(SESSION_ID, 2, text="Plain decision.")
    third = make_record(SESSION_ID, 3, text="Broken rule.", **fields)
    folder = tmp_path / "session"
    write_session(folder, [gate, second])
    refused = run_notes("append", *arguments, folder=folder)
    assert refused.code == 2 and refused.receipt["ok"] is False, refused
    assert log_bytes(folder) == line_of(gate) + line_of(second)

    write_session(folder, [gate, second, third])
    verified = run_notes("verify", folder=folder)
    assert_no_traceback(verified)
    assert verified.code == 3, verified
    [entry] = verified.receipt["problems"]
    assert (entry["line"], entry["id"], entry["kind"]) == (3, "n00003", kind) and detail in entry["detail"], entry
    tail = run_notes("tail", folder=folder)
    assert tail.code == 0 and [record["id"] for record in tail.receipt["records"]] == ["n00001", "n00002", "n00003"]
    summary = run_notes("summary", folder=folder)
    assert summary.code == 0 and summary.receipt["total"] == 3 and summary.receipt["warnings"], summary

    export = tmp_path / "export.json"
    write_export(export, [gate, second, third])
    target = tmp_path / "restored"
    restored = run_notes("restore", export, folder=target)
    assert restored.code == 3 and [entry["kind"] for entry in restored.receipt["problems"]] == [kind], restored
    assert not target.exists() or not list(target.iterdir())
    damaged = run_notes("restore", "--accept-damaged", export, folder=target)
    assert damaged.code == 0, damaged
    assert log_bytes(target) == line_of(gate) + line_of(second) + line_of(third)
