"""Attacks on the storage guarantees that once broke them, kept so they stay fixed.

Each test runs the real script, as a user would, against a folder left the way a
crash or a stray file leaves it."""

from __future__ import annotations

import os

import pytest

from conftest import (SESSION_ID, assert_no_traceback, assert_refused, folder_digest, line_of, log_bytes,
                      make_record, run_notes, write_export, write_session)

LOG = "session_notes.jsonl"
# A restore into a session that holds the export's first notes appends the rest
# in one write.  Killed during that write (a large export: the kernel stops a
# write of many megabytes part way on SIGKILL), it leaves the log ending in a
# cut-off line.  Running the same restore again was refused ("the log has
# problems"), and an append to clear the tail would add a note the export lacks,
# so the restore could never complete.  Now restore mends that tail as append
# does, then adds the missing notes.

@pytest.mark.parametrize("cut", [1, 40, -1], ids=["one byte", "mid-record", "all but the newline"])
def test_a_restore_killed_while_adding_notes_completes_when_run_again(tmp_path, cut):
    records = [make_record(SESSION_ID, seq) for seq in range(1, 7)]
    export = write_export(tmp_path / "export.json", records)
    expected = b"".join(map(line_of, records))
    folder = tmp_path / "target"
    partial = line_of(records[3])[:cut]
    write_session(folder, records[:3], tail=partial)

    result = run_notes("restore", export, folder=folder)
    assert_no_traceback(result)
    assert result.code == 0, result
    assert log_bytes(folder) == expected
    side_files = sorted(name for name in os.listdir(str(folder)) if name.startswith(LOG + ".torn-"))
    if cut == -1:  # a complete record that lacks only its newline stays and is ended
        assert result.receipt["restored"] == 2, result
        assert result.receipt["recovered"] == {"kind": "missing_newline"}
        assert side_files == []
    else:
        assert result.receipt["restored"] == 3, result
        assert result.receipt["recovered"]["kind"] == "torn_tail"
        assert result.receipt["recovered"]["bytes"] == len(partial)
        assert side_files == [os.path.basename(result.receipt["recovered"]["side_file"])]
        assert (folder / side_files[0]).read_bytes() == partial
    verify = run_notes("verify", folder=folder)
    assert verify.code == 0 and verify.receipt["total"] == 6, verify


def test_a_restore_still_refuses_a_cut_off_log_with_other_damage_and_changes_nothing(tmp_path):
    records = [make_record(SESSION_ID, seq) for seq in range(1, 7)]
    export = write_export(tmp_path / "export.json", records)
    folder = tmp_path / "target"
    damaged = dict(records[1], text="Edited by hand.")  # its checksum no longer matches
    write_session(folder, [records[0], damaged, records[2]], tail=line_of(records[3])[:40])
    before = folder_digest(folder)
    assert_refused(run_notes("restore", export, folder=folder), 2, "problems")
    assert folder_digest(folder) == before


# A folder (or a link to one) where the log should be made every reader exit 1
# with "unexpected error: IsADirectoryError"; readers answer 0, 2 or 3, never 1.

@pytest.mark.parametrize("how", ["folder", "link to a folder"])
@pytest.mark.parametrize("command", [["tail"], ["summary"], ["recap"], ["verify"], ["export"],
                                     ["export", "--format", "md"], ["restore"]],
                         ids=lambda command: " ".join(command))
def test_a_folder_where_the_log_should_be_is_refused_by_every_reader(tmp_path, how, command):
    export = write_export(tmp_path / "export.json", [make_record(SESSION_ID, seq) for seq in (1, 2)])
    folder = tmp_path / "session"
    write_session(folder)
    os.unlink(str(folder / LOG))
    if how == "folder":
        (folder / LOG).mkdir()
    else:
        (tmp_path / "elsewhere").mkdir()
        os.symlink(str(tmp_path / "elsewhere"), str(folder / LOG))
    before = folder_digest(folder)
    arguments = command + [export] if command == ["restore"] else command
    message = assert_refused(run_notes(*arguments, folder=folder), 2)
    assert LOG in message
    assert folder_digest(folder) == before


# An append with --ref looked the note up by reading the log, which raised
# IsADirectoryError, unguarded, when a folder stood where the
# log should be: exit 1, "unexpected error", where the same append without a ref
# is refused with exit 2.

def test_an_append_with_a_ref_refuses_a_folder_where_the_log_should_be(tmp_path):
    folder = tmp_path / "session"
    write_session(folder, [make_record(SESSION_ID, 1, "gate", "The gate stays open.")])
    os.unlink(str(folder / LOG))
    (folder / LOG).mkdir()
    before = folder_digest(folder)
    result = run_notes("append", "--type", "gate", "--ref", "n00001", "--status", "closed",
                       "--text", "Closed.", folder=folder)
    message = assert_refused(result, 2)
    assert LOG in message
    assert folder_digest(folder) == before


# append checked a --ref against any line holding that id, even one readers
# skip (a field with a value no note can hold).  It stored a gate update of a
# gate no reader shows; verify then reported the very note append had just
# written (ref_target, exit 3), and restore refused the export holding it.

def test_an_append_refuses_a_ref_to_a_line_readers_skip(tmp_path):
    folder = tmp_path / "session"
    skipped = make_record(SESSION_ID, 1, "gate", "The gate stays open.", provenance="bogus")
    write_session(folder, [skipped])
    before = folder_digest(folder)
    result = run_notes("append", "--type", "gate", "--ref", "n00001", "--status", "closed",
                       "--text", "Closed.", folder=folder)
    assert_refused(result, 2, "n00001", "names no note")
    assert folder_digest(folder) == before
    verify = run_notes("verify", folder=folder)
    assert verify.code == 3 and [entry["kind"] for entry in verify.receipt["problems"]] == ["bad_field"], verify
