"""The Python API: notes.Session gives the receipts and refusals the command line prints."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import copy_fixture, folder_digest, notes, read_records, run_notes

SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"


def same_place(receipt, folder, other):
    """The receipt as it reads with folder's path written as other's."""
    return json.loads(json.dumps(receipt).replace(json.dumps(str(folder))[1:-1], json.dumps(str(other))[1:-1]))


def without_time(record) -> dict:
    """A record without its timestamp and the checksum that covers it."""
    return {key: value for key, value in record.items() if key not in ("ts", "checksum")}


def twin_sessions(tmp_path):
    """Two folders holding the same session, built by the command line: (for the CLI, for the API)."""
    cli = tmp_path / "cli"
    for flags in (["--type", "gate", "--text", "Host runtime is open."],
                  ["--type", "decision", "--text", "SMS only.", "--effect", "No e-mail."],
                  ["--type", "gate", "--ref", "n00001", "--status", "deferred", "--text", "Later."],
                  ["--type", "discard", "--text", "A chat bot.", "--provenance", "model"],
                  ["--type", "decision", "--text", "Replaced.", "--ref", "n00002", "--evidence", "inferred"]):
        assert run_notes("append", *flags, folder=cli).code == 0
    api = tmp_path / "api"
    shutil.copytree(str(cli), str(api))
    return cli, api


def test_the_readme_example_gives_the_cli_receipt(tmp_path):
    receipt = notes.Session(tmp_path / "api").append(type="decision", text="x")
    cli = run_notes("append", "--type", "decision", "--text", "x", folder=tmp_path / "cli")
    assert cli.code == 0
    assert receipt == same_place(cli.receipt, tmp_path / "cli", tmp_path / "api")
    assert list(receipt) == ["ok", "command", "note_id", "seq", "path", "created"]
    assert [record["text"] for record in read_records(tmp_path / "api")] == ["x"]


# (CLI arguments, Session method, keyword arguments); each runs on its own twin.
CASES = {
    "init": (["init"], "init", {}),
    "append": (["append", "--type", "gate", "--text", "Spec format?", "--provenance", "op"], "append",
               {"type": "gate", "text": "Spec format?", "provenance": "op"}),
    "append-duplicate": (["append", "--type", "discard", "--text", "A chat bot.", "--provenance", "model"],
                         "append", {"type": "discard", "text": "A chat bot.", "provenance": "model"}),
    "gate-update": (["append", "--type", "gate", "--ref", "n00001", "--status", "closed", "--text", "Linux."],
                    "append", {"type": "gate", "ref": "n00001", "status": "closed", "text": "Linux."}),
    "tail": (["tail"], "tail", {}),
    "tail-filtered": (["tail", "--limit", "2", "--type", "gate", "--type", "discard", "--since", "2020-01-01"],
                      "tail", {"limit": 2, "types": ["gate", "discard"], "since": "2020-01-01"}),
    "summary": (["summary"], "summary", {}),
    "recap": (["recap"], "recap", {}),
    "recap-small": (["recap", "--limit", "1", "--max-bytes", "1200"], "recap", {"limit": 1, "max_bytes": 1200}),
    "verify": (["verify"], "verify", {}),
    "export": (["export"], "export", {}),
    "export-md": (["export", "--format", "md"], "export", {"format": "md"}),
}


@pytest.mark.parametrize("flags, method, keywords", list(CASES.values()), ids=list(CASES))
def test_each_command_gives_the_cli_receipt_and_files(tmp_path, flags, method, keywords):
    cli, api = twin_sessions(tmp_path)
    expected = run_notes(*flags, folder=cli)
    assert expected.code == 0, expected
    receipt = getattr(notes.Session(api), method)(**keywords)
    assert receipt == same_place(expected.receipt, cli, api)
    # The same records, but for the clock: the two runs may fall in different seconds.
    assert [without_time(record) for record in read_records(api)] == [
        without_time(record) for record in read_records(cli)]
    assert sorted(folder_digest(api)) == sorted(folder_digest(cli))


def test_recap_markdown_is_a_key_of_the_receipt_and_the_cli_prints_its_text(tmp_path):
    cli, api = twin_sessions(tmp_path)
    expected = run_notes("recap", "--format", "md", folder=cli)
    receipt = notes.Session(api).recap(format="md")
    assert expected.code == 0 and expected.stdout.startswith("# Recap\n")
    assert receipt == {"ok": True, "command": "recap", "markdown": expected.stdout.replace(str(cli), str(api))}


def test_restore_gives_the_cli_receipt(tmp_path):
    source = copy_fixture("basic", tmp_path / "source")
    export = source / "session_export.json"
    expected = run_notes("restore", export, folder=tmp_path / "cli")
    receipt = notes.Session(tmp_path / "api").restore(export_file=str(export))
    assert expected.code == 0
    assert receipt == same_place(expected.receipt, tmp_path / "cli", tmp_path / "api")
    assert read_records(tmp_path / "api") == read_records(tmp_path / "cli")


def test_restore_without_a_path_and_created_give_the_cli_receipts(tmp_path):
    # Issue 30: the first append says created, on the API as on the command line; restore() looks in the folder.
    first = notes.Session(tmp_path / "api").append(type="decision", text="x")
    assert first["created"] is True and "created" not in notes.Session(tmp_path / "api").append(type="gate",
                                                                                                 text="y?")
    exported = notes.Session(tmp_path / "api").export()["path"]
    for name in ("cli", "api-restored"):  # one export, so that both hold the same time
        (tmp_path / name).mkdir()
        shutil.copy(exported, str(tmp_path / name / "session_export.json"))
    expected = run_notes("restore", folder=tmp_path / "cli")
    receipt = notes.Session(tmp_path / "api-restored").restore()
    assert expected.code == 0, expected
    assert receipt == same_place(expected.receipt, tmp_path / "cli", tmp_path / "api-restored")
    assert receipt["restored"] == 2


def test_verify_of_a_damaged_log_is_a_receipt_not_an_exception(tmp_path):
    folder = copy_fixture("tampered", tmp_path / "s")
    before = folder_digest(folder)
    expected = run_notes("verify", folder=folder)
    receipt = notes.Session(folder).verify()
    assert expected.code == 3 and receipt == expected.receipt and receipt["ok"] is False
    assert folder_digest(folder) == before


REFUSALS = {
    "blank-text": (["append", "--type", "decision", "--text", "  "], "append", {"type": "decision", "text": "  "}),
    "credential": (["append", "--type", "decision", "--text", "key " + SECRET], "append",
                   {"type": "decision", "text": "key " + SECRET}),
    "ref-to-nothing": (["append", "--type", "decision", "--text", "x", "--ref", "n00099"], "append",
                       {"type": "decision", "text": "x", "ref": "n00099"}),
    "status-on-decision": (["append", "--type", "decision", "--text", "x", "--status", "open"], "append",
                           {"type": "decision", "text": "x", "status": "open"}),
    "limit-zero": (["tail", "--limit", "0"], "tail", {"limit": 0}),
    "bad-since": (["tail", "--since", "yesterday"], "tail", {"since": "yesterday"}),
    "max-bytes-too-small": (["recap", "--max-bytes", "10"], "recap", {"max_bytes": 10}),
    "export-over-the-log": (["export", "--output", "{folder}/session_notes.jsonl"], "export",
                            {"output": "{folder}/session_notes.jsonl"}),
}


@pytest.mark.parametrize("flags, method, keywords", list(REFUSALS.values()), ids=list(REFUSALS))
def test_a_refusal_raises_notes_error_with_the_cli_text(tmp_path, flags, method, keywords):
    cli, api = twin_sessions(tmp_path)
    before = folder_digest(api)
    expected = run_notes(*[flag.format(folder=cli) for flag in flags], folder=cli)
    assert expected.code == 2
    keywords = {key: value.format(folder=api) if isinstance(value, str) else value
                for key, value in keywords.items()}
    with pytest.raises(notes.NotesError) as refusal:
        getattr(notes.Session(api), method)(**keywords)
    assert {"ok": False, "error": refusal.value.message} == same_place(expected.receipt, cli, api)
    assert refusal.value.exit_code == 2
    assert SECRET not in refusal.value.message
    assert folder_digest(api) == before


def test_a_missing_type_names_the_help_only_on_the_command_line(tmp_path):
    expected = run_notes("append", "--text", "No type.", folder=tmp_path / "cli")
    with pytest.raises(notes.NotesError) as refusal:
        notes.Session(tmp_path / "api").append(type=None, text="No type.")
    assert expected.receipt["error"] == refusal.value.message + " (see: python3 -S notes.py append --help)"
    assert not (tmp_path / "api").exists()


def test_the_api_checks_the_words_the_parser_checks(tmp_path):
    session = notes.Session(tmp_path / "s")
    for call in (lambda: session.append(type="idea", text="x"),
                 lambda: session.append(type="decision", text="x", evidence="certain"),
                 lambda: session.tail(types=["opinion"]),
                 lambda: session.recap(format="pdf"),
                 lambda: session.export(format="pdf")):
        with pytest.raises(notes.NotesError, match="unknown --"):
            call()
    assert not (tmp_path / "s").exists()


def test_a_note_id_that_is_not_a_string_is_a_refusal_not_a_crash(tmp_path):
    session = notes.Session(tmp_path / "s")
    for name in ("ref", "about", "by"):
        with pytest.raises(notes.NotesError, match="--%s is not a note id" % name):
            session.append(**dict({"type": "gate", "text": "x", "status": "closed", "ref": "n00001"}, **{name: 12}))
    for call in (lambda: session.show(note_id=12), lambda: session.redact(note_id=12, reason="x")):
        with pytest.raises(notes.NotesError, match="takes a note id such as n00012"):
            call()
    assert not (tmp_path / "s").exists()


def test_text_is_taken_as_given_never_read_from_stdin(tmp_path, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("from standard input"))
    notes.Session(tmp_path).append(type="decision", text="-")
    assert [record["text"] for record in read_records(tmp_path)] == ["-"]


def test_an_empty_folder_argument_is_refused():
    for folder in ("", "  "):
        with pytest.raises(notes.NotesError, match="--dir is empty"):
            notes.Session(folder)


def test_all_names_the_public_api():
    assert {"Session", "NotesError", "main", "__version__"} <= set(notes.__all__)
    assert all(hasattr(notes, name) for name in notes.__all__)


def test_the_readme_python_example_runs(tmp_path):
    import subprocess
    import sys

    from conftest import NOTES, REPO, code_blocks

    section = (REPO / "README.md").read_text("utf-8").split("## Python API", 1)[1].split("\n## ", 1)[0]
    (example,) = code_blocks(section, "python")
    shutil.copy(str(NOTES), str(tmp_path / "notes.py"))
    completed = subprocess.run([sys.executable, "-S", "-c", example], cwd=str(tmp_path), capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("# Recap\n")
    assert [record["text"] for record in read_records(tmp_path / "shaping")] == ["The log stays append-only."]
