#!/usr/bin/env python3
"""notes.py: the persistence tool of Memory-Assisted Shaping.

A model that shapes an idea over a long conversation runs

    python3 -S notes.py append --type decision --text "..."

whenever losing a decision, a gate, a discarded path or an artifact boundary
would hurt continuity.  This tool owns everything about that signal once it
arrives: it stamps it with a time, a session id, a sequence number and a
checksum, appends it as one line of JSON to session_notes.jsonl, and later
hands the state back (tail, summary, recap, export, verify, restore).

What it owns:
  * the files of one session folder: session_meta.json, session_notes.jsonl,
    session_notes.lock, and the exports it is asked to write;
  * the numbering: seq grows by one per note, with no repeat and no gap, even
    with many writers at once (they queue on an exclusive lock);
  * the integrity of every line: a crash can cut the last line short, and the
    next append sets the cut bytes aside in a side file, never deleting them.

What it refuses to do:
  * rewrite, reorder or drop a note already in the log, or move a complete
    line, whatever it holds (only bytes after the last newline are torn);
  * write through a symbolic link, or into a folder it was not pointed at;
  * store credentials, control characters, or text beyond the size of a
    minimal signal: the log is plain text that gets uploaded and shared;
  * write anything at all when only asked to read;
  * read or write a FIFO, socket or device (it could block or never end),
    or wait for another writer's lock without bound.

Architecture, top to bottom:
  * pure record functions: JSON, the checksum, building a record, checking a
    signal before it is stored and a line after it was read;
  * storage: the folder and its meta, the writers' lock, reading the log from
    its end (what an append needs) or from its start (what the readers need),
    appending one line, and writing whole files atomically;
  * one ``command_<name>(args) -> dict`` per command, returning the receipt;
  * the MCP adapter (``notes.py mcp``), which turns each tool call into the
    argument list a user would type and runs the same command function;
  * the parser, and ``main``, the one place that prints.

The formats are those of the public v0 tool, byte for byte; a log written
here stays readable by v0.  Standard library only, public API only; runs
under ``python3 -S`` on CPython 3.9 to 3.13 and on PyPy.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
import time

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

# --------------------------------------------------------------------------
# Constants

META_NAME = "session_meta.json"
LOG_NAME = "session_notes.jsonl"
LOCK_NAME = "session_notes.lock"
EXPORT_NAME = "session_export.json"
EXPORT_MARKDOWN_NAME = "session_export.md"

META_SCHEMA = "shaping-memory-session-meta.v0"
EXPORT_SCHEMA = "shaping-memory-export.v0"
# How every export this tool (or v0) writes begins: how export recognises a
# file it may replace.
EXPORT_JSON_START = b'{\n  "schema_version": "' + EXPORT_SCHEMA.encode("ascii") + b'"'
EXPORT_MARKDOWN_START = b"# Shaping session "

NOTE_TYPES = ("mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact")
GATE_STATUSES = ("open", "deferred", "closed")
# Who a signal comes from, and how well it is known (the protocol's own words).
PROVENANCES = ("op", "model", "shared")
FIRM_PROVENANCES = ("op", "shared")  # a note so labelled is superseded only by a note so labelled
EVIDENCE_LEVELS = ("declared", "inferred", "observed", "validated")
# Lists of the recap, by the note type each one gathers.
RECAP_LISTS = (("decision", "decisions"), ("discard", "discards"), ("tension", "tensions"),
               ("source", "sources"), ("artifact", "artifacts"))

TEXT_LIMIT = 2000
EFFECT_LIMIT = 1000
TAIL_DEFAULT_LIMIT = 5
RECAP_DEFAULT_LIMIT = 20
RECAP_DEFAULT_MAX_BYTES = 12288  # 12 KiB of printed UTF-8: about 3,000 tokens of a model's context
STDIN_LIMIT = 65536       # bytes read at most for --text - or --effect -, far above any allowed text
EXPORT_HEAD_LIMIT = 65536  # bytes of an export read to find its record_count, which sits near the top
WARNINGS_LISTED = 20      # readers name this many problems, then count the rest
PROBLEMS_LISTED = 100     # verify names this many problems, then counts the rest
BACKWARD_BLOCK = 65536    # bytes read at a time when the log is read in blocks
# A line longer than this is no record of ours (a full signal is a few KiB):
# readers report it as too long instead of holding it in memory.
LINE_LIMIT = 1 << 20
EXPORT_SIZE_LIMIT = 256 << 20   # an export larger than this is refused before it is read
META_SIZE_LIMIT = 1 << 20
SEQ_LIMIT = 999999999           # no real session reaches it; a seq past it is damage
# How long a writer waits for the lock before it gives up (a stopped or hung
# holder); the environment variable overrides it, up to a day.
LOCK_WAIT_SECONDS = 30.0
LOCK_WAIT_VARIABLE = "SHAPING_NOTES_LOCK_WAIT"
LOCK_WAIT_LIMIT = 86400.0
# A retry is an append identical to one of this many last records, written
# within this many seconds: it is answered with that note, not stored again.
DUPLICATE_WINDOW_RECORDS = 20
DUPLICATE_WINDOW_SECONDS = 600
# The fields of a signal, in build_record's order: what a retry must repeat.
SIGNAL_FIELDS = ("type", "text", "effect", "ref", "status", "provenance", "evidence", "about", "by")
# A temporary file of a killed whole-file write is removed by a later write of
# the same file once it is this old (no live write takes that long).
STALE_TEMPORARY_SECONDS = 600

__version__ = "1.1.0"  # the one place the version is kept; pyproject.toml reads it

# Where the session folder comes from when --dir is not given.
DIR_VARIABLE = "SHAPING_NOTES_DIR"
# Folder names an installer puts modules in (dist-packages is Debian's).
INSTALLED_FOLDER_NAMES = ("site-packages", "dist-packages")
# The ways to start this tool, as errors and hints repeat them: the script,
# the console command pip installs ([project.scripts] in pyproject.toml), and
# the module run with python -m.
SCRIPT_COMMAND = "python3 -S notes.py"
CONSOLE_COMMAND = "shaping-notes"
MODULE_COMMAND = "python3 -m notes"

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_INTEGRITY = 3

# O_NOFOLLOW makes open() fail on a symbolic link instead of following it.
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
BINARY = getattr(os, "O_BINARY", 0)
# O_NONBLOCK lets open() return at once on a FIFO, which is then refused.
NON_BLOCKING = getattr(os, "O_NONBLOCK", 0)

# Characters a signal may not hold: C0 controls other than tab, newline and
# carriage return; DEL and the C1 controls (U+0080-U+009F), which terminals
# obey; and the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069), which reorder what an operator reads.  The marks U+200E and
# U+200F stay: right-to-left scripts need them, and they reorder nothing.
FORBIDDEN_CHARACTERS = frozenset(map(chr, [*range(0x20), *range(0x7f, 0xa0), *range(0x202a, 0x202f),
                                           *range(0x2066, 0x206a)])) - {"\t", "\n", "\r"}
# Invisible characters removed before looking for a credential, so that a key
# split by them is still found.  They are kept in the note: U+200D joins emoji
# and U+200C shapes Persian and Indic words.
INVISIBLE_CHARACTERS = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))

SESSION_ID_LIMIT = 100    # characters of a session id (v0 writes a 36-character UUID)
DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")  # ASCII digits only
HEX_DIGITS = frozenset("0123456789abcdef")

# (kind of credential, substrings one of which it must contain, pattern).
# The substrings are a cheap first look, so that most texts skip the regular
# expressions; they are few and shared (verify looks at every record), and
# "_" is rare in prose.
CREDENTIAL_PATTERNS = (
    # A header alone is prose about keys; a header followed by a key body is a key.
    ("private key block", ("PRIVATE KEY",),
     r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----\s*(?:[A-Za-z-]+: [^\n]*\n\s*)*[A-Za-z0-9+/=]{40}"),
    ("AWS secret access key", ("_", "ccessKey"),
     r"(?i:secret_?access_?key)[\"']?\s*[:=]\s*[\"']?(?=[A-Za-z0-9/+]*[0-9])(?=[A-Za-z0-9/+]*[A-Za-z])"
     r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
    # scheme://user:password@host, any scheme, the user maybe empty (redis://:pw@host);
    # a placeholder such as ${DB_PASSWORD}, <password> or *** is not a password.
    ("URL with a password", ("://",),
     r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\[\]]*:(?![$<{*%\[])[^\s/?#@]+@[^\s/?#@]"),
    ("AWS access key id", ("AKIA", "ASIA"),
     r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("GitHub token", ("_",),
     r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("Anthropic API key", ("sk-",),
     r"(?<![A-Za-z0-9_-])sk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{32,}"),
    # A key's body holds a long run of letters and digits with a digit in it; a
    # branch slug such as sk-2024-fix-login-redirect-after-timeout does not.
    ("OpenAI API key", ("sk-",),
     r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z0-9_-]*[A-Za-z])"
     r"(?=[A-Za-z0-9_-]*?(?=[A-Za-z0-9]{20})[A-Za-z]*[0-9])[A-Za-z0-9_-]{32,}"),
    ("Slack token", ("xox", "xapp-"),
     r"(?<![A-Za-z0-9])(?:xox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{6,}|xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]{16,})"),
    ("Google API key", ("AIza",),
     r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
    ("Stripe live key", ("_",),
     r"(?<![A-Za-z0-9])(?:sk|rk)_live_[0-9A-Za-z]{20,}"),
    ("JSON Web Token", ("eyJ",),
     r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("GitLab token", ("glpat-",),
     r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}"),
    ("Hugging Face token", ("_",),
     r"(?<![A-Za-z0-9_])hf_(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[a-z])[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
    ("npm token", ("_",),
     r"(?<![A-Za-z0-9_])npm_(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{36,}(?![A-Za-z0-9_])"),
)
# Every marker once (may_hold_credential looks for each of them).
CREDENTIAL_MARKERS = tuple(dict.fromkeys(marker for _, markers, _ in CREDENTIAL_PATTERNS for marker in markers))


# --------------------------------------------------------------------------
# The error class

class NotesError(Exception):
    """A refusal or failure to report as ``{"ok": false, "error": ...}``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.details = details or {}


# --------------------------------------------------------------------------
# Pure record functions: JSON, checksum, build, validate, check a line

def refuse_constant(name: str):
    """json.loads calls this for NaN, Infinity and -Infinity, which are not JSON."""
    raise ValueError("%s is not a JSON number" % name)


def finite_float(text: str) -> float:
    """json.loads calls this for every number with a fraction or exponent: refuse
    one too big for a float (1e999), which would become infinity, a value no
    JSON writer may write back."""
    value = float(text)
    if value - value != 0:  # inf - inf is nan, and nan differs from everything
        raise ValueError("%s... is too big for a float" % text[:20])
    return value


# json.loads(text, parse_constant=..., parse_float=...) builds this same
# decoder on every call; readers parse every line, so it is built once.
DECODER = json.JSONDecoder(parse_constant=refuse_constant, parse_float=finite_float)


def parse_json(text: str):
    """Parse one JSON document; raise ValueError when it is not one.

    Stricter than json.loads alone: NaN and Infinity are refused, so is a
    number too big for a float, and a value nested too deeply to parse is an
    ordinary ValueError, not a RecursionError."""
    try:
        return DECODER.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def compact_json(value) -> str:
    """One line of JSON as the log holds it: no spaces, non-ASCII as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value) -> str:
    """Compact JSON with sorted keys: the form the checksum is taken of."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True)


def pretty_json(value) -> str:
    """JSON as v0 prints receipts and writes the meta and exports: 2-space indent, non-ASCII as is."""
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # the ts of a record; as text it sorts in time order


def utc_now() -> str:
    """The current UTC time as YYYY-MM-DDTHH:MM:SSZ."""
    return time.strftime(TIMESTAMP_FORMAT, time.gmtime())


def note_id_for(seq: int) -> str:
    """The id of the note numbered seq: n00001, ..., n99999, n100000."""
    return "n%05d" % seq


def record_checksum(record: dict) -> str:
    """First 16 hex digits of SHA-256 over the canonical JSON of the record without its checksum."""
    body = dict(record)
    body.pop("checksum", None)
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()[:16]


def build_record(session_id: str, seq: int, note_type: str, text: str, effect: str | None = None,
                 ref: str | None = None, status: str | None = None, provenance: str | None = None,
                 evidence: str | None = None, about: str | None = None, by: str | None = None,
                 timestamp: str | None = None) -> dict:
    """A record with v0's keys in v0's order, then the optional links and labels, checksum last."""
    record = {
        "id": note_id_for(seq),
        "ts": timestamp or utc_now(),
        "session_id": session_id,
        "seq": seq,
        "type": note_type,
        "text": text,
    }
    if effect:
        record["effect"] = effect
    if ref:
        record["ref"] = ref
    if status:
        record["status"] = status
    if provenance:
        record["provenance"] = provenance
    if evidence:
        record["evidence"] = evidence
    if about:
        record["about"] = about
    if by:
        record["by"] = by
    record["checksum"] = record_checksum(record)
    return record


def record_line(record: dict) -> bytes:
    """One record as the bytes of one log line, newline included."""
    return (compact_json(record) + "\n").encode("utf-8")


def may_hold_credential(text: str) -> bool:
    """Whether the text holds one of CREDENTIAL_MARKERS; most texts hold none, and stop here."""
    return any(marker in text for marker in CREDENTIAL_MARKERS)


def find_credential(text: str) -> str | None:
    """The kind of credential the text seems to hold, or None.

    signal_problem removes invisible characters first, so that a key split by
    them is still found."""
    if not may_hold_credential(text):
        return None
    for kind, markers, pattern in CREDENTIAL_PATTERNS:
        if any(marker in text for marker in markers) and re.search(pattern, text):
            return kind
    return None


def character_name(character: str) -> str:
    """A forbidden character as U+XXXX with its class, for a message."""
    code = ord(character)
    kind = ("C0 control" if code < 0x7f else "DEL" if code == 0x7f else "C1 control" if code < 0xa0
            else "bidirectional override" if code < 0x2066 else "bidirectional isolate")
    return "U+%04X (%s)" % (code, kind)


def signal_problem(value: str, limit: int) -> tuple | None:
    """What append refuses in a text or effect, as (kind, detail), or None.

    The one set of checks: append refuses with it, and verify, the readers and
    restore report with it.  The detail never holds the value itself."""
    visible_part = value
    if not value.isprintable():  # every character below is unprintable: plain text skips the search
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "invalid_unicode", "holds text that is not valid UTF-8 (a lone surrogate)"
        for position, character in enumerate(value):
            if character in FORBIDDEN_CHARACTERS:
                return "control_character", "holds the control character %s at position %d" % (
                    character_name(character), position)
        visible_part = value.translate(INVISIBLE_CHARACTERS)  # a key split by them is still a key
    if len(value) > limit:
        return "too_long", "is %d characters; the limit is %d" % (len(value), limit)
    kind = find_credential(visible_part)
    if kind:
        return "credential", "seems to hold a credential (%s)" % kind
    return None


# What append adds to a refusal of each kind: the way out.
REFUSAL_ADVICE = {
    "invalid_unicode": "; the shell passed undecodable bytes: re-send it as plain UTF-8 text",
    "control_character": "; remove it (tab, newline and carriage return are the only control characters "
                         "kept; C1 and bidirectional controls can change what a reader sees)",
    "too_long": ", because a memory signal is a minimal pointer, not content: keep the content in the "
                "conversation and record only the decision, gate or boundary",
    "credential": "; credentials never enter the log, which is plain text that gets uploaded, exported "
                  "and shared. Describe where the secret lives instead of pasting it",
}


def clean_field(name: str, value: str | None, limit: int) -> str:
    """Strip a signal field and refuse what must not enter the log."""
    value = (value or "").strip()
    found = signal_problem(value, limit)
    if found:
        kind, detail = found
        raise NotesError("--%s %s%s" % (name, detail, REFUSAL_ADVICE[kind]))
    return value


def clean_signal(note_type: str, text: str | None, effect: str | None,
                 ref: str | None, status: str | None,
                 provenance: str | None = None, evidence: str | None = None,
                 about: str | None = None, by: str | None = None) -> dict:
    """Validate a signal before anything is touched; return it as field name -> value, in SIGNAL_FIELDS order.

    provenance and evidence are stored as given, so they are only checked.
    What the links name is checked against the log later (check_links)."""
    if note_type is None:
        raise NotesError("--type is required; use one of: %s %s" % (", ".join(NOTE_TYPES), see_help("append")))
    if text is None:
        raise NotesError("--text is required: say what to keep, for example --text 'The log stays "
                         "append-only.' %s" % see_help("append"))
    # The parser already keeps these to their words; the checks stay here so
    # that the signal is whole whoever calls this.
    if note_type not in NOTE_TYPES:
        raise NotesError("unknown --type %r; use one of: %s" % (note_type, ", ".join(NOTE_TYPES)))
    for name, value, allowed in (("provenance", provenance, PROVENANCES),
                                 ("evidence", evidence, EVIDENCE_LEVELS), ("status", status, GATE_STATUSES)):
        if value is not None and value not in allowed:
            raise NotesError("unknown --%s %r; use one of: %s" % (name, value, ", ".join(allowed)))
    text = clean_field("text", text, TEXT_LIMIT)
    if not text:
        raise NotesError("--text is empty; a memory signal needs a text that says what to keep")
    if text == REDACTED_TEXT:  # verify would take it for a redaction nobody recorded
        raise NotesError("--text %s is the placeholder redact leaves; say what to keep" % REDACTED_TEXT)
    effect = clean_field("effect", effect, EFFECT_LIMIT) or None
    if status is not None and note_type != "gate":
        raise NotesError("--status applies only to --type gate; drop it, or record a gate")
    if ref is not None:
        ref = ref.strip()
        if not is_note_id(ref):
            raise NotesError("--ref %r is not a note id; ids look like n00012" % ref)
        if note_type == "gate" and status is None:
            raise NotesError(
                "a gate with --ref updates that gate, so it needs --status open, deferred or closed")
    elif note_type == "gate" and status == "closed":
        raise NotesError(
            "a new gate cannot start closed; open it first, then close it with "
            "--ref <its id> --status closed")
    about, by = clean_link("about", about), clean_link("by", by)
    if by is not None and (note_type != "gate" or ref is None):
        raise NotesError("--by names the note that settles a gate update, so it goes only with --type gate "
                         "--ref <the gate> --status ...; to link any other note, use --about")
    return dict(zip(SIGNAL_FIELDS, (note_type, text, effect, ref, status, provenance, evidence, about, by)))


def clean_link(name: str, value: str | None) -> str | None:
    """An --about or --by value stripped and checked to be a note id; its value is never echoed."""
    if value is None:
        return None
    value = value.strip()
    if not is_note_id(value) or len(value) > 12:  # no seq reaches 12 characters (SEQ_LIMIT)
        raise NotesError("--%s is not a note id; ids look like n00012 (tail or recap lists them)" % name)
    return value


def value_from_stdin(text, effect, names=("text", "effect")) -> tuple:
    """(text, effect), with the one given as "-" read from standard input as UTF-8, byte for byte.

    A shell expands $ and runs backticks inside double quotes; a quoted
    here-document or a pipe hands the bytes over untouched.  The stream holds
    one value, so only one of the two may ask for it.  names: the flags the
    two values came from (redact passes its --reason as the first)."""
    if text != "-" and effect != "-":
        return text, effect
    if text == "-" and effect == "-":
        raise NotesError("--text - and --effect - both ask for standard input, which carries one value; "
                         "read one of them from standard input and pass the other as an argument")
    name = names[0] if text == "-" else names[1]
    if sys.stdin is None:  # started with standard input closed
        raise NotesError("--%s - reads standard input, but there is none; pipe the value in or pass it "
                         "as an argument" % name)
    data = getattr(sys.stdin, "buffer", sys.stdin).read(STDIN_LIMIT + 1)
    if len(data) > STDIN_LIMIT:
        raise NotesError("standard input for --%s holds more than %d bytes; a memory signal is a minimal "
                         "pointer of at most %d characters" % (name, STDIN_LIMIT,
                                                               EFFECT_LIMIT if name == "effect" else TEXT_LIMIT))
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise NotesError("standard input for --%s is not valid UTF-8 (byte %d); send the text as "
                             "UTF-8" % (name, error.start)) from None
    return (data, effect) if name == names[0] else (text, data)


NOTE_ID_LIMIT = 12  # characters of a note id at most: no seq up to SEQ_LIMIT needs more


def is_note_id(value) -> bool:
    """Whether value has the shape of a note id (n followed by five to eleven digits).

    The bound makes an id or ref of thousands of digits damage, never a note:
    readers skip its record with a warning that does not echo it, so it cannot
    swell a readback past its budget."""
    return (isinstance(value, str) and 6 <= len(value) <= NOTE_ID_LIMIT and value[0] == "n"
            and value[1:].isdigit() and value[1:].isascii())


def is_seq(value) -> bool:
    """Whether value is a usable seq: a positive int (not a bool) up to SEQ_LIMIT.

    A line whose seq is past the limit holds no usable seq: readers skip it,
    and append counts it as a damaged line, numbering past it sanely."""
    return type(value) is int and 1 <= value <= SEQ_LIMIT  # type(True) is bool, not int


def is_timestamp(value) -> bool:
    """Whether value has the shape YYYY-MM-DDTHH:MM:SSZ, in ASCII digits."""
    return type(value) is str and value.translate(DIGITS_AS_ZERO) == "0000-00-00T00:00:00Z"


def is_session_id(value) -> bool:
    """Whether value can be a session id: a short printable string, not blank."""
    return (isinstance(value, str) and 0 < len(value) <= SESSION_ID_LIMIT and value.isprintable()
            and not value.isspace())


def is_checksum(value) -> bool:
    """Whether value has the shape of a checksum: 16 lowercase hex digits."""
    return type(value) is str and len(value) == 16 and HEX_DIGITS.issuperset(value)


def is_string(value) -> bool:
    """Whether value is a string."""
    return type(value) is str


def is_plain_value(value) -> bool:
    """Whether value is a string, a finite number, true, false or null: what a field beyond v0's may hold."""
    if isinstance(value, float):
        return value - value == 0  # not infinite, not NaN
    return value is None or isinstance(value, (str, int))


def parse_line(raw: bytes) -> tuple:
    """Decode one log line (without its newline): (object or None, problem kind or None)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not_utf8"
    try:
        value = parse_json(text)
    except ValueError:
        return None, "not_json"
    if not isinstance(value, dict):
        return None, "not_object"
    return value, None


# Kinds of problem, and what each means; verify and the readers' warnings use them.
PROBLEM_DETAILS = {
    "not_utf8": "the line is not valid UTF-8",
    "not_json": "the line is not JSON that can be read (broken, a number too big for a float, or nested "
                "too deeply)",
    "not_object": "the line is JSON but not an object",
    "missing_field": "the record lacks a field",
    "bad_field": "a field of the record holds a value of the wrong kind",
    "invalid_unicode": "the record holds text that is not valid UTF-8 (a lone surrogate)",
    "control_character": "the record holds a control character that append refuses",
    "too_long": "the text or effect is longer than append allows",
    "credential": "the record seems to hold a credential",
    "empty_text": "the text is empty or blank",
    "bad_checksum": "the checksum does not match: the record changed after it was written",
    "id_mismatch": "the id does not match the seq",
    "foreign_session": "the record belongs to another session",
    "unknown_type": "the record has an unknown type",
    "ref_target": "the ref does not name an earlier note of the right kind",
    "link_target": "the about or by field does not name an earlier note of the right kind",
    "gate_rule": "the record breaks a rule append keeps for gates: a status only on a gate, a gate update "
                 "with its status, a new gate not closed, by only on a gate update",
    "supersede_rule": "the record supersedes (ref) a note labelled op or shared without being labelled op or "
                      "shared itself, which append now refuses: check with the operator that the "
                      "change is theirs",
    "seq_repeated": "the seq repeats or goes back: it is not above every seq before it",
    "seq_gap": "seq numbers are missing before this record",
    "torn_tail": "the last line is cut off (a crash during a write); the next append moves it to a side file",
    "missing_newline": "the last record lacks its newline; the next append adds it",
    "line_too_long": "the line is longer than any record (over 1 MiB); it was passed over, not read",
    "redaction_unexplained": "the note holds the placeholder redact leaves, but no later source note says it "
                             "was redacted: it was edited by hand, or redact was cut short (run redact on it "
                             "again to record why)",
}
# A record with one of these is skipped by every reader (with a warning): its
# fields are not what they claim to be, and code that trusts them would fail.
# A record with any other problem is still read, and the problem reported.
UNUSABLE = frozenset(("missing_field", "bad_field", "invalid_unicode"))

REQUIRED_FIELDS = ("id", "ts", "session_id", "seq", "type", "text", "checksum")
# What each field of a record must hold: (test, what it is).  A field not named
# here must hold a plain value (is_plain_value).
FIELD_RULES = {
    "id": (is_note_id, "a note id (n and five to eleven digits)"),
    "ts": (is_timestamp, "a UTC time YYYY-MM-DDTHH:MM:SSZ"),
    "session_id": (is_string, "a string"),  # one not the session's own is a foreign_session
    "seq": (is_seq, "a whole number from 1 to %d" % SEQ_LIMIT),
    "type": (is_string, "a string"),
    "text": (is_string, "a string"),
    "effect": (is_string, "a string"),
    "ref": (is_note_id, "a note id (n and five to eleven digits)"),
    "status": (lambda value: value in GATE_STATUSES, "open, deferred or closed"),
    "provenance": (lambda value: value in PROVENANCES, "one of: " + ", ".join(PROVENANCES)),
    "evidence": (lambda value: value in EVIDENCE_LEVELS, "one of: " + ", ".join(EVIDENCE_LEVELS)),
    "about": (is_note_id, "a note id (n and five to eleven digits)"),
    "by": (is_note_id, "a note id (n and five to eleven digits)"),
    "checksum": (is_checksum, "16 lowercase hex digits"),
}
PLAIN_RULE = (is_plain_value, "a string, a number, true, false or null")


def field_problems(record: dict) -> list:
    """The record's fields checked for kind and range: [] or one (kind, detail) naming every bad field."""
    for key in REQUIRED_FIELDS:
        if key not in record:
            return [("missing_field", "the record lacks its %s field" % key)]
    wrong = [key for key, value in record.items() if not FIELD_RULES.get(key, PLAIN_RULE)[0](value)]
    if not wrong:
        return []
    # The name of a field beyond v0's is not echoed: it could be anything.
    return [("bad_field", "; ".join("the %s field is not %s" % (key, FIELD_RULES[key][1]) if key in FIELD_RULES
                                    else "another field holds a list, an object or a number too big"
                                    for key in wrong))]


def check_record(record: dict, session_id: str | None) -> list:
    """Problems of one parsed record taken alone (not its place in the sequence), as (kind, detail) pairs.

    The detail is None where PROBLEM_DETAILS says it all; it never holds a value of the record."""
    problems = field_problems(record)
    if problems:
        return problems
    for key, limit in (("text", TEXT_LIMIT), ("effect", EFFECT_LIMIT)):
        found = signal_problem(record[key], limit) if key in record else None
        if found:
            problems.append((found[0], "the %s %s" % (key, found[1])))
    if not record["text"] or record["text"].isspace():
        problems.append(("empty_text", None))
    try:
        checksum = record_checksum(record)
    except UnicodeEncodeError:  # a lone surrogate: in text, or in a field or key of its own
        return [(kind, detail) for kind, detail in problems if kind != "invalid_unicode"] + [
            ("invalid_unicode", None)]
    if checksum != record["checksum"]:
        problems.append(("bad_checksum", None))
    if record["id"] != note_id_for(record["seq"]):
        problems.append(("id_mismatch", None))
    if session_id is not None and record["session_id"] != session_id:
        problems.append(("foreign_session", None))
    if record["type"] not in NOTE_TYPES:
        problems.append(("unknown_type", None))
    rule = gate_rule_problem(record)
    if rule:
        problems.append(("gate_rule", rule))
    return problems


def gate_rule_problem(record: dict) -> str | None:
    """Which of append's rules for status and ref the record breaks (clean_signal refuses each), or None."""
    if "by" in record and (record["type"] != "gate" or "ref" not in record):
        return "the record has a by, which only a gate update has"
    if record["type"] != "gate":
        return "the record has a status, which only a gate has" if "status" in record else None
    if "ref" in record and "status" not in record:
        return "the gate update has a ref but no status"
    if "ref" not in record and record.get("status") == "closed":
        return "the new gate starts closed"
    return None


class LogOrder:
    """What a forward reader remembers of the lines before this one, to check its place in the log.

    The seq must follow the highest before it (damaged lines since may each
    have held one), and the ref must name an earlier note of the right kind,
    as append's check_ref asks.  A ref is checked by its seq (the id n00012 names seq 12): it must be below
    the note's own, and it names a gate exactly when the note is a gate update.
    about and by are checked the same way (check_links): earlier, and a by never a gate.
    Only the seqs of gates and of notes labelled op or shared are kept, so a
    whole log's worth costs two sets of ints.

    A note that supersedes an op or shared note without being labelled op or
    shared itself breaks a rule append now keeps; a log written by 1.1.0
    may hold such a note, so it is a notice (a warning), never damage."""

    def __init__(self):
        self.seqs = set()
        self.firm = set()                # seqs of non-gate notes labelled op or shared
        self.highest = self.damaged = 0  # highest seq so far; lines since it that hold no seq
        self.line = 0                    # lines (or export records) met so far
        self.notices, self.notice_count = [], 0  # the first notices, as verify's problem entries

    def place_problems(self, value, kinds: list) -> list:
        """The problems of a record (None: an unreadable line) from its place in the log: seq order, ref target."""
        seq = value.get("seq") if value is not None else None
        found = []
        order = seq_order_problem(seq, self.highest, self.damaged)
        if order:
            found.append((order, None))
        if is_seq(seq):
            self.highest, self.damaged = max(self.highest, seq), 0
        else:
            self.damaged += 1
        self.line += 1
        if value is None or not is_usable(kinds):
            return found
        wrong_ref = self.ref_problem(value)
        if wrong_ref:
            found.append(("ref_target", wrong_ref))
        found.extend(("link_target", detail) for detail in self.link_problems(value))
        self.note_supersede_rule(value)
        return found

    def link_problems(self, record: dict) -> list:
        """What is wrong with the record's about and by: each must name an earlier note; a by, no gate."""
        seq, found = record.get("seq"), []
        for name in ("about", "by"):
            link = record.get(name)
            if not is_seq(seq) or not is_note_id(link):
                continue
            if len(link) > 12:  # a longer id cannot name an earlier note, and is not echoed
                found.append("the %s field names no earlier note (an id far too long)" % name)
            elif not 1 <= int(link[1:]) < seq:
                found.append("the %s %s names no earlier note" % (name, link))
            elif name == "by" and int(link[1:]) in self.seqs:
                found.append("the by %s names a gate; a gate is settled by a decision or another note" % link)
        return found

    def note_supersede_rule(self, record: dict):
        """Remember an op or shared note; keep a notice when a note not so labelled supersedes one."""
        seq, ref, labelled = record.get("seq"), record.get("ref"), record.get("provenance") in FIRM_PROVENANCES
        if record.get("type") == "gate" or not is_seq(seq):
            return
        if labelled:
            self.firm.add(seq)
        if not labelled and is_note_id(ref) and len(ref) <= 12 and int(ref[1:]) in self.firm:
            self.notice_count += 1
            if len(self.notices) < PROBLEMS_LISTED:
                self.notices.append(problem(self.line, record.get("id"), "supersede_rule"))

    def ref_problem(self, record: dict) -> str | None:
        """What is wrong with the record's ref (None when nothing is); then remember a gate."""
        ref, seq, is_gate = record.get("ref"), record.get("seq"), record.get("type") == "gate"
        if not is_seq(seq):
            return None
        if is_gate:
            self.seqs.add(seq)
        if not is_note_id(ref):
            return None
        target = int(ref[1:]) if len(ref) <= 12 else seq  # a longer id cannot name an earlier note
        if not 1 <= target < seq:
            return "the ref %s names no earlier note" % ref
        if is_gate and target not in self.seqs:
            return "the gate update's ref %s names a note that is not a gate" % ref
        if not is_gate and target in self.seqs:
            return "the ref %s names a gate, which changes only through gate updates" % ref
        return None


def is_usable(problems: list) -> bool:
    """Whether readers read a record with these (kind, detail) problems."""
    return not any(kind in UNUSABLE for kind, _ in problems)


def seq_order_problem(seq, highest: int, damaged: int) -> str | None:
    """The problem of a seq read forward: repeated, gap, or None.

    highest is the highest seq before it; damaged, the lines since that one
    that hold no seq (each may have held one, so they leave no gap)."""
    if not is_seq(seq) or highest < seq <= highest + 1 + damaged:
        return None
    return "seq_repeated" if seq <= highest else "seq_gap"


def problem(line, record_id, kind: str, detail: str | None = None) -> dict:
    """One entry of verify's problem list."""
    return {"line": line, "id": record_id, "kind": kind, "detail": detail or PROBLEM_DETAILS[kind]}


def parse_time_filter(value: str | None, name: str) -> str | None:
    """Check a --since/--until time and return it as YYYY-MM-DDTHH:MM:SSZ (None when not given).

    The time is compared as a string with each record's ts, so it keeps its
    four-digit year: strftime would write the year 999 as "999", after "2026"."""
    if value is None:
        return None
    stamp = value + "T00:00:00Z" if len(value) == 10 else value
    try:
        if not is_timestamp(stamp):
            raise ValueError(value)  # strptime would also take "2026-1-01", a lower-case t, or other digits
        time.strptime(stamp, TIMESTAMP_FORMAT)  # the ranges: month 13, February 30, year 0
    except ValueError:
        raise NotesError(
            "--%s %r is not a UTC time; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, with a year from 0001"
            % (name, value)) from None
    return stamp


def check_limit(value: int) -> int:
    """Refuse a --limit below 1."""
    if value < 1:
        raise NotesError("--limit must be 1 or more (got %d)" % value)
    return value


# --------------------------------------------------------------------------
# Storage: folder, lock, reading from either end, appending, atomic writes

def invoked_as() -> str:
    """The command that started this run, for errors and hints to repeat."""
    started = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.splitext(started)[0] == CONSOLE_COMMAND:  # the script pip wrote (.exe on Windows)
        return CONSOLE_COMMAND
    # python -m notes runs this file as __main__ with a module spec; a script
    # run (even under python -m cProfile) has none.
    if __name__ == "__main__" and getattr(globals().get("__spec__"), "name", None) == "notes":
        return MODULE_COMMAND
    return SCRIPT_COMMAND


def is_installed_package_folder(folder) -> bool:
    """Whether folder is where an installer put notes.py, which a reinstall or upgrade replaces.

    Two marks, both cheap: the folder's name, whatever interpreter runs this
    file; and the record every installer writes beside the module it installs
    (shaping_notes-VERSION.dist-info), which also marks a pip --target or
    --prefix folder of any name.  Asking sysconfig instead would cost several
    milliseconds on every run that uses the default folder, and would only
    know the running interpreter's own folders."""
    if os.path.basename(folder).lower() in INSTALLED_FOLDER_NAMES:
        return True
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(name.lower().startswith("shaping_notes-") and name.lower().endswith(".dist-info")
               for name in names)


def user_data_folder() -> str:
    """Where an installed copy keeps its notes: this platform's folder for a user's application data.

    Standard library only, so the rules are written out: XDG on Linux and
    other Unix (an XDG_DATA_HOME that is not absolute is to be ignored, the
    XDG spec says), Application Support on macOS, LOCALAPPDATA on Windows."""
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA", "")
        if not os.path.isabs(base):
            base = os.path.join(os.path.expanduser("~"), "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Application Support")
    else:
        base = os.environ.get("XDG_DATA_HOME", "")
        if not os.path.isabs(base):
            base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, CONSOLE_COMMAND)


def create_private_folder(folder):
    """Create folder and each missing parent with mode 0700, as XDG asks of data folders.

    os.makedirs gives its mode to the last folder only (since Python 3.7), so
    the missing parents are made one by one, outermost first."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # a concurrent first run made it; a file there fails later, by name
            pass


def default_folder() -> str:
    """The session folder when neither --dir nor SHAPING_NOTES_DIR is given.

    A copy run as a file keeps v0's default, the folder that holds it.  An
    installed copy's folder is replaced by the next reinstall or upgrade, so
    it keeps its notes in the user's data folder instead, created on first use."""
    here = os.path.dirname(os.path.realpath(__file__))
    if not is_installed_package_folder(here):
        return here
    folder = user_data_folder()
    if not os.path.isabs(folder):  # no home folder to be found: "~" stayed as it was
        raise NotesError(
            "notes.py is installed as a package and cannot tell your home folder, so it has no data "
            "folder for the notes. Pass the session folder with --dir (for example: %s --dir "
            "/absolute/path/to/shaping init) or set %s" % (invoked_as(), DIR_VARIABLE))
    # A run stopped between two mkdir calls leaves some folders made: the next
    # run finds them and makes the rest.
    try:
        create_private_folder(folder)
    except OSError as error:
        raise NotesError(
            "notes.py is installed as a package, so it keeps its notes in %s, but cannot create that "
            "folder (%s). Pass the session folder with --dir (for example: %s --dir ~/shaping init) "
            "or set %s (for example: export %s=~/shaping)"
            % (folder, error.strerror or error, invoked_as(), DIR_VARIABLE, DIR_VARIABLE)) from None
    return os.path.realpath(folder)


def resolve_folder(folder):
    """The session folder: --dir, else $SHAPING_NOTES_DIR, else default_folder()."""
    if folder is None:
        folder = os.environ.get(DIR_VARIABLE)
        # Set but empty is a mistake (an unset variable expanded in a config),
        # not a request for the default: refuse rather than guess.
        if folder is not None and not folder.strip():
            raise NotesError(
                "%s is set but empty; set it to the session folder (for example %s=~/shaping), "
                "unset it, or pass --dir" % (DIR_VARIABLE, DIR_VARIABLE))
    if folder is not None:
        return os.path.realpath(os.path.expanduser(folder))
    return default_folder()


def folder_error(folder, error):
    """The refusal of a writer that cannot create its files in the folder."""
    return NotesError(
        "cannot create or write the session files in %s (%s); pass --dir with a writable "
        "folder, for example --dir /tmp/shaping or --dir /mnt/data/shaping"
        % (folder, error.strerror or error))


def link_error(path):
    """The refusal to write through a symbolic link."""
    return NotesError(
        "%s is a symbolic link; notes.py does not write through links, since a planted link "
        "could send the session anywhere. Replace it with the real file, or use another --dir" % path)


def special_file_error(path, mode):
    """The refusal of a FIFO, socket or device where a regular file should be."""
    if stat.S_ISFIFO(mode):
        kind = "a FIFO (named pipe)"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    else:
        kind = "a special file"
    return NotesError(
        "%s is %s, not a regular file; notes.py never reads or writes one, since it could block "
        "for ever or never end. Move it aside, or pass another path" % (path, kind))


def open_regular_file(path, flags=os.O_RDONLY):
    """os.open that refuses whatever is not a regular file, before a byte is read or written.

    O_NONBLOCK makes the open itself return at once on a FIFO (opening one
    normally waits for a writer); os.fstat then tells what was opened.  A
    folder raises IsADirectoryError, as open() does."""
    try:
        descriptor = os.open(path, flags | NON_BLOCKING | BINARY, 0o644)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a socket cannot be opened at all
            raise special_file_error(path, os.stat(path).st_mode) from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            raise special_file_error(path, mode)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def read_regular_file(path, limit, too_large):
    """The bytes of a regular file; refuse, with the message too_large, one over limit bytes before reading it."""
    descriptor = open_regular_file(path)
    with open(descriptor, "rb") as handle:
        if os.fstat(descriptor).st_size > limit:
            raise NotesError(too_large)
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise NotesError(too_large)
    return data


def read_meta(folder):
    """The session's meta object, None when the folder has none; refuse a damaged one."""
    path = os.path.join(folder, META_NAME)
    try:
        raw = read_regular_file(path, META_SIZE_LIMIT, "%s is over 1 MiB, far larger than a session meta; "
                                "move it aside" % path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # --dir names a file, or a path below one
        raise NotesError("--dir %s is a file, not a folder; pass the session folder" % folder) from None
    except IsADirectoryError:
        raise NotesError("%s is a folder, not the session meta; move it aside" % path) from None
    except OSError as error:
        raise NotesError("cannot read %s (%s)" % (path, error.strerror)) from None
    try:
        meta = parse_json(raw.decode("utf-8"))
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or not isinstance(meta.get("session_id"), str) or not meta["session_id"]:
        raise NotesError(
            "%s is damaged (not a JSON object with a session_id); nothing was changed. "
            "Restore the session from an export into a new --dir, or move the folder aside "
            "and run init" % path)
    return meta


def require_session(folder):
    """The meta of the session a reader was pointed at; refuse when there is none."""
    meta = read_meta(folder)
    if meta is None:
        raise NotesError(
            "no session in %s (no %s there); start one with: %s --dir %s init, "
            "or bring one back from an export with: %s --dir %s restore "
            "session_export.json" % (folder, META_NAME, invoked_as(), folder, invoked_as(), folder))
    return meta


def fsync_folder(folder):
    """Make a creation or rename in the folder durable."""
    if os.name == "nt":  # Windows cannot open a folder; NTFS journals names itself
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):  # the filesystem cannot sync folders
            raise
    finally:
        os.close(descriptor)


def open_refusing_links(path, flags):
    """open_regular_file that refuses a symbolic link at path: O_NOFOLLOW, or a look first where it is missing."""
    if not NO_FOLLOW and os.path.islink(path):
        raise link_error(path)
    try:
        return open_regular_file(path, flags | NO_FOLLOW)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise link_error(path) from None
        raise


def lock_wait_seconds():
    """How long a writer waits for the lock: LOCK_WAIT_SECONDS, or what the environment variable says."""
    value = os.environ.get(LOCK_WAIT_VARIABLE, "").strip()
    if not value:
        return LOCK_WAIT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= LOCK_WAIT_LIMIT:  # NaN fails this too
        raise NotesError(
            "%s=%r is not a number of seconds from 0 to %d; set it to how long a writer may wait "
            "for the lock, or unset it to wait %d s" % (LOCK_WAIT_VARIABLE, value, LOCK_WAIT_LIMIT,
                                                        LOCK_WAIT_SECONDS))
    return seconds


def try_lock(descriptor, shared=False):
    """Take the lock on descriptor without waiting; False when another process holds it."""
    try:
        if fcntl is not None:
            fcntl.flock(descriptor, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        else:
            import msvcrt  # no shared lock there: a reader holds the exclusive one for an instant

            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK):
            return False
        raise
    return True


def unlock(descriptor):
    """Release a lock taken by try_lock (closing the descriptor releases a flock as well)."""
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return
    import msvcrt

    try:
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)
    except OSError:
        pass


class SessionLock:
    """Exclusive lock on session_notes.lock, held by every writer from read to fsync."""

    held = set()  # paths of the locks this process holds: its own readers see no writer at work

    def __init__(self, folder):
        self.path = os.path.join(folder, LOCK_NAME)
        self.wait = lock_wait_seconds()  # a bad setting is refused before anything is created
        self.descriptor = None

    def __enter__(self):
        prepare_folder(os.path.dirname(self.path))
        created = not os.path.exists(self.path)
        try:
            self.descriptor = open_refusing_links(self.path, os.O_RDWR | os.O_CREAT)
            if created:
                fsync_folder(os.path.dirname(self.path))
        except OSError as error:
            if self.descriptor is not None:
                os.close(self.descriptor)
            raise folder_error(os.path.dirname(self.path), error) from None
        try:
            self.wait_for_lock()
        except BaseException:
            os.close(self.descriptor)
            raise
        SessionLock.held.add(self.path)
        return self

    def wait_for_lock(self):
        """Try the lock until the wait runs out, the same way on every platform.

        The kernel releases a flock when its holder dies, so a writer killed
        mid-append frees the lock at once; only a holder that lives on without
        finishing (stopped, hung) makes the wait run out.  Polling, with a
        pause that grows to 25 ms, is what gives the wait its bound."""
        deadline = time.monotonic() + self.wait
        pause = 0.001
        while not try_lock(self.descriptor):
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotesError(
                    "another writer holds the lock %s and did not release it within %g s; nothing was "
                    "written. Run the same command again; if the lock stays held, a writer is stopped "
                    "or hung: end it, or set %s to wait longer" % (self.path, self.wait, LOCK_WAIT_VARIABLE),
                    EXIT_UNEXPECTED)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.025)

    def __exit__(self, *exc_info):
        SessionLock.held.discard(self.path)
        if fcntl is None:
            unlock(self.descriptor)
        os.close(self.descriptor)  # closing releases a flock


def log_view(folder):
    """(size, in_flight): how far a reader reads the log, and whether a writer was at work then.

    A writer holds the lock from reading the end of the log to its fsync, so
    a size taken while no writer holds it ends after a whole line (or after
    real damage).  Taken while one does, an unterminated last line is that
    writer's note in flight, not damage, and readers leave it for their next
    read.  Readers never wait for the lock and never create it."""
    log_path, lock_path = os.path.join(folder, LOG_NAME), os.path.join(folder, LOCK_NAME)
    if lock_path in SessionLock.held:  # read by the writer at work itself: nothing is in flight
        return log_size(log_path), False
    try:
        lock = open_regular_file(lock_path)
    except FileNotFoundError:
        # No writer has locked this folder yet.  One that starts now creates
        # the lock before it writes: if the lock is there after the size was
        # taken, that size may cut its line.
        size = log_size(log_path)
        return size, os.path.lexists(lock_path)
    except OSError:  # the lock cannot be opened here (permissions): no writer can be seen
        return log_size(log_path), False
    try:
        if not try_lock(lock, shared=True):
            return log_size(log_path), True
        try:
            return log_size(log_path), False
        finally:
            unlock(lock)
    finally:
        os.close(lock)


def open_log_for_reading(path):
    """A read descriptor on the log, None when there is none yet; refuse a log that is not a regular file."""
    try:
        return open_regular_file(path)
    except FileNotFoundError:
        return None
    except IsADirectoryError:  # readers answer a refusal, never an unexpected error
        raise NotesError("%s is a folder, not the session log; move it aside" % path) from None


def log_size(path):
    """The size of the log (0 when there is none yet); refuse a log that is not a regular file."""
    descriptor = open_log_for_reading(path)
    if descriptor is None:
        return 0
    try:
        return os.fstat(descriptor).st_size
    finally:
        os.close(descriptor)


def create_new_file(stem, suffix):
    """Create stem + suffix, or stem-1 + suffix and so on if taken; return (path, descriptor).

    O_EXCL | O_NOFOLLOW: a link planted at any name can neither be followed
    nor be the name we pick."""
    path, attempt = stem + suffix, 0
    while True:
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_FOLLOW | BINARY, 0o644)
        except FileExistsError:
            attempt += 1
            path = "%s-%d%s" % (stem, attempt, suffix)


def write_all(descriptor, data):
    """Write every byte, however many calls it takes."""
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def write_file_atomically(path, chunks, refusal=None):
    """Replace path with the bytes chunks yields, so that a crash leaves either the old or the new file.

    refusal: a message (formatted with path and reason) to refuse with when the
    file cannot be created; without it the OSError itself is raised."""
    if os.path.islink(path):
        raise link_error(path)
    folder = os.path.dirname(path)
    remove_stale_temporary_files(folder, os.path.basename(path))
    try:  # a temporary file with a fresh random name, in the target's own folder
        temporary, descriptor = create_new_file(
            os.path.join(folder, ".%s.%s" % (os.path.basename(path), os.urandom(6).hex())), ".tmp")
    except OSError as error:
        if refusal is None:
            raise
        raise NotesError(refusal % (path, error.strerror)) from None
    try:
        for chunk in chunks:
            write_all(descriptor, chunk)
        os.fsync(descriptor)
        os.close(descriptor)
        descriptor = None
        # Crash window: until os.replace the target keeps its old content and
        # the temporary file is left behind under a dot-name (a later write of
        # the same file removes it once stale); after it, the rename is made
        # durable by the folder fsync.
        os.replace(temporary, path)
    except BaseException:
        if descriptor is not None:
            os.close(descriptor)
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    fsync_folder(folder)


def remove_stale_temporary_files(folder, name):
    """Delete what killed writes of name left: its temporary files (.NAME.<12 hex digits>.tmp) once stale.

    Only names of that exact shape, and only when older than any live write
    could be, so a concurrent write of the same file keeps its own."""
    prefix = "." + name + "."
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        middle = entry.name[len(prefix):-len(".tmp")].split("-")[0]
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp") and len(middle) == 12
                and HEX_DIGITS.issuperset(middle)):
            continue
        try:
            if (entry.is_file(follow_symlinks=False)
                    and time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMPORARY_SECONDS):
                os.unlink(entry.path)
        except OSError:
            pass  # gone already, or not ours to remove: it is only clutter


def write_meta(folder, session_id, created_at):
    """Write the meta file of a session and return it."""
    meta = {"schema_version": META_SCHEMA, "session_id": session_id, "created_at": created_at,
            "log_file": os.path.join(folder, LOG_NAME)}
    # As v0 writes it: 2-space JSON, non-ASCII as is, a trailing newline.  A
    # folder name that is not UTF-8 holds surrogate escapes (os.fsdecode):
    # they are written as JSON \udcXX escapes, which read back to the same path.
    text = pretty_json(meta) + "\n"
    write_file_atomically(os.path.join(folder, META_NAME), [text.encode("utf-8", "backslashreplace")])
    return meta


def new_session_id():
    """A random UUID4 string."""
    import uuid  # only a new session needs it

    return str(uuid.uuid4())


def check_session_folder(folder):
    """Refuse a folder a writer must not touch, before anything is written; return its meta."""
    for name in (META_NAME, LOG_NAME, LOCK_NAME):
        if os.path.islink(os.path.join(folder, name)):
            raise link_error(os.path.join(folder, name))
    meta = read_meta(folder)
    log_path = os.path.join(folder, LOG_NAME)
    if meta is None and os.path.exists(log_path) and os.path.getsize(log_path) > 0:
        raise NotesError(
            "%s holds notes but %s is missing, so the session id is unknown; nothing was "
            "changed. Bring the session back from its export with restore into another --dir, "
            "or move the log aside to start a new session" % (log_path, META_NAME))
    return meta


def prepare_folder(folder):
    """Create the session folder of a writer when it does not exist yet."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise folder_error(folder, error) from None


def open_session_for_writing(folder):
    """The meta of the folder's session; without one, start a session (meta and empty log). Hold the lock."""
    # A second look, under the lock: a concurrent init or restore may have
    # written the meta since the writer first checked the folder.
    meta = check_session_folder(folder)
    if meta is not None:
        return meta
    try:
        meta = write_meta(folder, new_session_id(), utc_now())
        # Crash window: meta without a log is a session with no notes yet; the
        # log is created by the first append as well.
        descriptor = open_log_for_append(meta["log_file"])
        os.fsync(descriptor)
        os.close(descriptor)
        fsync_folder(folder)
    except OSError as error:
        raise folder_error(folder, error) from None
    return meta


def open_log_for_append(path):
    """Open (or create) the log for appending, refusing a symbolic link."""
    return open_refusing_links(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)


def read_lines_backward(handle, size, limit=LINE_LIMIT, count_runs=False):
    """Yield (offset, line) from the end of the first size bytes back to the start.

    The first is the bytes after the last newline (b"" in a healthy log).  A
    line longer than limit comes as None: its bytes are passed over, never
    held.  Each block is read once and each line joined once, so the cost is
    linear in the bytes read and the memory bounded by limit.

    With count_runs, a run of complete lines inside one block that none can
    hold a seq (seq_free_run) comes as one (offset, count) pair, count an int:
    such lines are damage to every reader, and each counts as having held a
    seq, so the caller needs only how many there are (a log ending in millions
    of junk lines costs a count of newlines per block, not a parse per line)."""
    pieces, length, position = [], 0, size  # the line being gathered, its pieces from the end
    while position > 0:
        step = min(BACKWARD_BLOCK, position)
        position -= step
        handle.seek(position)
        block = handle.read(step)
        end = len(block)
        newline = block.rfind(b"\n", 0, end)
        run_checked = not count_runs
        while newline >= 0:
            pieces.append(block[newline + 1:end])
            yield position + newline + 1, joined_line(pieces, length + end - newline - 1, limit)
            pieces, length, end = [], 0, newline
            if not run_checked:  # once per block, after the line that ends in it
                run_checked, run = True, seq_free_run(block, end)
                if run is not None:
                    yield position + run[0], run[1]
                    end = run[0] - 1  # the newline before the run; the line before it starts earlier
            newline = block.rfind(b"\n", 0, end)
        length += end
        if length <= limit:
            pieces.append(block[:end])
        else:
            pieces = []
    yield 0, joined_line(pieces, length, limit)


COUNTED_RUN = 100  # lines at least in a run that a backward reader counts instead of reading one by one


def seq_free_run(block, end):
    """(start, count) of the complete lines of block[:end] (after its first newline) when none can hold a seq.

    A JSON key reads as "seq" only when its bytes are "seq" or use a \\u
    escape, so lines without either hold no seq whatever else they hold.
    None when there are fewer than COUNTED_RUN lines, or one may hold a seq."""
    first = block.find(b"\n", 0, end)
    if first < 0:
        return None
    count = block.count(b"\n", first + 1, end) + 1
    if count < COUNTED_RUN or any(block.find(marker, first + 1, end) >= 0 for marker in (b'"seq"', b"\\u")):
        return None
    return first + 1, count


def joined_line(pieces, length, limit):
    """A line from its pieces, gathered from its end; None when it is longer than limit."""
    return b"".join(reversed(pieces)) if length <= limit else None


def read_lines_forward(handle, size, limit=LINE_LIMIT):
    """Yield (line, terminated) for each line of the first size bytes, without its newline.

    A line longer than limit comes as None: it is read past in blocks, never
    held whole."""
    remaining = size
    while remaining > 0:
        line = handle.readline(min(limit + 1, remaining))
        if not line:
            return  # the file is shorter than size: it was cut meanwhile
        remaining -= len(line)
        if line.endswith(b"\n"):
            yield line[:-1], True
        elif len(line) <= limit:
            yield line, False  # the last line, without its newline
        else:
            while remaining > 0 and line and not line.endswith(b"\n"):
                line = handle.readline(min(BACKWARD_BLOCK, remaining))
                remaining -= len(line)
            yield None, line.endswith(b"\n")


class LogTail:
    """What a writer needs from the end of the log, found without reading the rest.

    Only the bytes after the last newline can be a torn tail: a complete line
    stays whatever it holds, and one that is not a record with a seq counts as
    having held the next seq, so that no seq is ever issued twice."""

    def __init__(self, handle, size, recent_since=None):
        self.size = size
        self.keep_end = size        # bytes from this offset on are the torn tail
        self.highest_seq = 0        # the next note gets highest_seq + 1
        self.recent = []            # records of the duplicate window, newest first
        self.window_left = DUPLICATE_WINDOW_RECORDS if recent_since is not None else 0
        self.recent_since = recent_since
        lines = read_lines_backward(handle, size, count_runs=True)
        offset, last = next(lines)
        value = parse_line(last)[0] if last else None
        if last is None or (last and value is None):
            self.keep_end = offset  # cut off by a crash mid-write
        self.needs_newline = value is not None  # the last line is a JSON object without its newline
        self.scan(self.kept_lines(value, lines))

    @staticmethod
    def kept_lines(last_value, lines):
        """The lines that stay in the log, newest first, as (parsed value or None, how many lines it stands for).

        A run of lines that cannot hold a seq comes as one (None, count)."""
        if last_value is not None:
            yield last_value, 1
        for _, line in lines:
            if type(line) is int:
                yield None, line
            else:
                yield (parse_line(line)[0] if line is not None else None), 1

    def scan(self, values):
        """Walk back over the complete lines until the highest seq is certain and the window is full.

        The highest seq is certain once two records in a row have consecutive
        seqs (two records in a healthy log), so that a late or repeated seq at
        the end cannot hide a higher one."""
        damaged = 0         # lines met since the last record that hold no seq of their own
        newer_seq = None    # seq of the line met just before, when it was a record
        certain = False
        for value, lines in values:
            seq = value.get("seq") if isinstance(value, dict) else None
            if not is_seq(seq):
                damaged, newer_seq = damaged + lines, None
                continue
            self.highest_seq = max(self.highest_seq, seq + damaged)
            certain = certain or newer_seq == seq + 1
            damaged, newer_seq = 0, seq
            if self.window_left:
                self.gather_recent(value)
            if certain and not self.window_left:
                return
        self.highest_seq = max(self.highest_seq, damaged)  # lines before the first record held 1, 2, ...

    def gather_recent(self, record):
        """Keep a record of the duplicate window; close the window at one written before it."""
        self.window_left -= 1
        timestamp = record.get("ts")
        if not isinstance(timestamp, str) or timestamp < self.recent_since:
            self.window_left = 0  # records are in time order: every earlier one is older still
        else:
            self.recent.append(record)


def set_aside_torn_tail(folder, descriptor, tail):
    """Move the bytes after the last newline to a side file, block by block, then cut them from the log."""
    side_path, side = create_new_file(os.path.join(folder, "%s.torn-%s-%d" % (
        LOG_NAME, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.getpid())), "")
    try:
        os.lseek(descriptor, tail.keep_end, os.SEEK_SET)
        left = tail.size - tail.keep_end
        while left > 0:
            block = os.read(descriptor, min(BACKWARD_BLOCK, left))
            if not block:
                raise OSError(errno.EIO, "the log is shorter than it was a moment ago")
            write_all(side, block)
            left -= len(block)
        os.fsync(side)
    except BaseException:
        # The torn bytes are all still in the log, and this side file holds
        # only part of them: remove it, so failed attempts leave nothing to
        # pile up, and the next append tries again.
        os.close(side)
        try:
            os.unlink(side_path)
        except OSError:
            pass
        raise
    os.close(side)
    fsync_folder(folder)
    # Crash window: the bytes are now in the side file and still in the log;
    # a crash here makes the next append copy them once more, losing nothing.
    os.ftruncate(descriptor, tail.keep_end)
    os.fsync(descriptor)
    return {"kind": "torn_tail", "bytes": tail.size - tail.keep_end, "side_file": side_path}


NO_ROOM_ERRORS = tuple(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, name))


def keep_torn_tail_in_place(descriptor, tail, why):
    """End the torn tail with a newline, where it is: it becomes a damaged line, which holds a seq.

    Used when the tail cannot be set aside: a tail over LINE_LIMIT (no note
    is that long, so the bytes are not a cut-off note but something appended
    by another hand, and copying them could need more disk than is free), or
    a disk with no room for the side file.  Torn bytes are never deleted, and
    the session must never be left unable to append, so they stay in the log
    as one complete damaged line: readers pass over it with a warning (verify
    names its line), and, as every damaged line, it counts as having held the
    next seq.  Cost: one byte, whatever the tail's size.
    Crash window: none beyond append's own; the newline is one write, and a
    crash before it leaves the torn tail for the next append."""
    append_line(descriptor, b"\n")
    tail.highest_seq += 1
    return {"kind": "torn_tail_kept", "bytes": tail.size - tail.keep_end, "why": why}


def find_note(handle, size, note_id):
    """The record with this id, searched from the end of the log (recent notes come first).

    A line readers skip (a missing or malformed field) is no note: a ref to it
    would name a note no reader shows, which verify reports and restore refuses."""
    needle = ('"id":"%s"' % note_id).encode("ascii")
    for _, line in read_lines_backward(handle, size, count_runs=True):
        if type(line) is bytes and needle in line:  # a counted run (an int) holds no note
            value, _ = parse_line(line)
            if value is not None and value.get("id") == note_id and is_usable(check_record(value, None)):
                return value
    return None


def append_line(descriptor, line):
    """Append one whole record and fsync; on failure cut the log back to where it was."""
    start = os.lseek(descriptor, 0, os.SEEK_END)
    try:
        write_all(descriptor, line)
        os.fsync(descriptor)
    except BaseException:
        # Crash window: a process killed during write_all leaves a cut-off
        # line, which the next append sets aside.  Here we are still alive:
        # take the partial bytes back so the log stays as it was.
        try:
            os.ftruncate(descriptor, start)
            os.fsync(descriptor)
        except OSError:
            pass
        raise


def append_chunks(descriptor, chunks):
    """Append every chunk, then fsync once; on any failure (or a refusal raised by chunks) cut the log back.

    Crash window: a process killed mid-way leaves some whole lines and maybe
    a cut-off one; restore run again finds the whole ones as its own first
    notes, and the cut-off one is set aside as any torn tail."""
    start = os.lseek(descriptor, 0, os.SEEK_END)
    try:
        for chunk in chunks:
            write_all(descriptor, chunk)
        os.fsync(descriptor)
    except BaseException:
        try:
            os.ftruncate(descriptor, start)
            os.fsync(descriptor)
        except OSError:
            pass
        raise


def line_problems(raw, terminated, session_id):
    """One line read forward: (its object or None, the problems of the line taken alone)."""
    if raw is None:
        return None, [("line_too_long" if terminated else "torn_tail", None)]
    value, kind = parse_line(raw)
    if value is None:
        return None, [(kind if terminated else "torn_tail", None)]
    return value, ([] if terminated else [("missing_newline", None)]) + check_record(value, session_id)


class LogReader:
    """Reads the whole log forward, checking each line, without holding it in memory."""

    def __init__(self, folder, meta):
        self.path = os.path.join(folder, LOG_NAME)
        self.session_id = meta.get("session_id")
        self.problems = []          # the first ones, as verify lists them
        self.problem_count = 0
        self.total = 0
        self.last_record = None
        self.order = LogOrder()     # of the last pass: its notices are warnings, not problems
        self.redactions = RedactionsSeen()  # of the last pass
        # Every pass reads the same bytes, up to a size taken while no writer
        # was mid-append; lines appended later wait for the next read.
        self.size, self.in_flight = log_view(folder)

    def records(self):
        """Yield every record that can be read; count and keep the problems met."""
        self.problems, self.problem_count, self.total, self.last_record = [], 0, 0, None
        self.order = seen = LogOrder()
        self.redactions = RedactionsSeen()
        if not self.size:
            return
        with open(open_regular_file(self.path), "rb") as handle:
            for number, (raw, terminated) in enumerate(read_lines_forward(handle, self.size), 1):
                if not terminated and self.in_flight:
                    break  # a writer's note, still being written
                value, kinds = line_problems(raw, terminated, self.session_id)
                kinds += seen.place_problems(value, kinds)
                # An id is named only when it is a note id: any other could be anything.
                record_id = value["id"] if kinds and value is not None and is_note_id(value.get("id")) else None
                self.problem_count += len(kinds)
                for kind, detail in kinds[:PROBLEMS_LISTED - len(self.problems)]:
                    self.problems.append(problem(number, record_id, kind, detail))
                if value is not None and is_usable(kinds):
                    self.total += 1
                    self.last_record = value
                    self.redactions.meet(value, number)
                    yield value
        self.note_problems(self.redactions.problems())

    def note_problems(self, found):
        """Count problems found after the lines were read (verify's entries), keeping the first ones."""
        self.problem_count += len(found)
        self.problems.extend(found[:PROBLEMS_LISTED - len(self.problems)])

    def warnings(self):
        """The problems met, as sentences, bounded."""
        return problem_messages(self.problems, self.problem_count)

    def notices(self):
        """What the last pass found that append refuses now but an older log may hold, as sentences, bounded."""
        return problem_messages(self.order.notices, self.order.notice_count)


def bounded_warnings(messages, count):
    """The first WARNINGS_LISTED of count problems, then how many more there are."""
    messages = messages[:WARNINGS_LISTED]
    if count > len(messages):
        messages.append("%d more problems not listed; run verify for the full list" % (count - len(messages)))
    return messages


def with_warnings(receipt, warnings):
    """Add a warnings key only when there is something to say."""
    if warnings:
        receipt["warnings"] = warnings
    return receipt


# --------------------------------------------------------------------------
# Commands: each takes the parsed arguments and returns the receipt

def command_init(args) -> dict:
    folder = resolve_folder(args.dir)
    check_session_folder(folder)
    with SessionLock(folder):
        meta = open_session_for_writing(folder)
    return {"ok": True, "command": "init", "session_id": meta["session_id"],
            "path": os.path.join(folder, LOG_NAME)}


def command_append(args) -> dict:
    # Validate everything the signal alone can tell before touching any file.
    text, effect = value_from_stdin(args.text, args.effect)
    signal = clean_signal(args.type, text, effect, args.ref, args.status, args.provenance, args.evidence,
                          args.about, args.by)
    folder = resolve_folder(args.dir)
    check_session_folder(folder)
    # The log only grows, so a note found now is still there under the lock.
    check_links(os.path.join(folder, LOG_NAME), signal)
    with SessionLock(folder):
        meta = open_session_for_writing(folder)
        return append_signal(folder, meta, signal)


def append_signal(folder, meta, signal):
    """Under the lock: recover the log's tail, then store the signal, or answer with its earlier note."""
    log_path = os.path.join(folder, LOG_NAME)
    try:
        created = not os.path.lexists(log_path)
        descriptor = open_log_for_append(log_path)
    except OSError as error:
        raise folder_error(folder, error) from None
    try:
        with open(descriptor, "rb", closefd=False) as handle:
            tail = LogTail(handle, os.fstat(descriptor).st_size, duplicate_window_start())
        refuse_an_absurd_seq(tail)
        recovered = recover_tail(folder, descriptor, tail)
        duplicate = find_duplicate(tail, signal, meta["session_id"], log_path)
        record = duplicate
        if duplicate is None:
            record = build_record(meta["session_id"], tail.highest_seq + 1, *signal.values())
            append_line(descriptor, record_line(record))
        if created:
            fsync_folder(folder)
    finally:
        os.close(descriptor)
    receipt = {"ok": True, "command": "append", "note_id": record["id"], "seq": record["seq"], "path": log_path}
    if duplicate is not None:
        receipt["duplicate"] = True  # a retry whose receipt was lost: nothing new was written
    return with_recovered(receipt, recovered)


def duplicate_window_start():
    """The time of the oldest record a retry can repeat, in the log's own format (which sorts as text)."""
    return time.strftime(TIMESTAMP_FORMAT, time.gmtime(time.time() - DUPLICATE_WINDOW_SECONDS))


def refuse_an_absurd_seq(tail):
    """Refuse, before writing anything, to number a note past SEQ_LIMIT: such a seq is damage."""
    if tail.highest_seq >= SEQ_LIMIT:
        raise NotesError(
            "the last lines of the log hold a seq past %d, beyond any real session: the log was "
            "edited or damaged, and numbering past it would make no sense. Nothing was written; run "
            "verify to find the line, then restore the session from an intact export into a new --dir"
            % SEQ_LIMIT)


def recover_tail(folder, descriptor, tail):
    """Mend the end of the log a crash left (never a complete line); return what was done, or None."""
    if tail.keep_end < tail.size:
        if tail.size - tail.keep_end > LINE_LIMIT:
            return keep_torn_tail_in_place(descriptor, tail, "longer than any record, so not a note cut off")
        try:
            return set_aside_torn_tail(folder, descriptor, tail)
        except OSError as error:
            if error.errno not in NO_ROOM_ERRORS:
                raise
            return keep_torn_tail_in_place(descriptor, tail, "no room for a side file")
    if tail.needs_newline:
        append_line(descriptor, b"\n")
        return {"kind": "missing_newline"}
    return None


def find_duplicate(tail, signal, session_id, log_path=None):
    """The record of the duplicate window that repeats the signal field for field, or None.

    A record with any problem of its own (a checksum that does not match,
    say) is never the answer: the signal is then stored anew.  Nor is one
    that is no longer the latest word on its subject (still_the_latest_word):
    a repeat after a later note undid it is a new change of state, not a retry."""
    for place, record in enumerate(tail.recent):
        if all(record.get(name) == value for name, value in signal.items()) and not check_record(
                record, session_id):
            later = tail.recent[:place]  # newest first; the window holds every record after this one
            return record if still_the_latest_word(record, later, log_path) else None
    return None


def still_the_latest_word(record, later, log_path):
    """Whether no later record superseded this one, nor, when it is a gate or gate update, changed its gate."""
    if record["type"] != "gate":
        return not any(other.get("type") != "gate" and other.get("ref") == record["id"] for other in later)
    updates = [other for other in later if other.get("type") == "gate" and isinstance(other.get("ref"), str)]
    if not updates:
        return True
    window = {other.get("id"): other for other in later}
    descriptor = open_log_for_reading(log_path) if log_path else None
    handle = open(descriptor, "rb") if descriptor is not None else None
    known = {}

    def lookup(note_id):
        # A note of the window, else one looked up from the end of the log (only here, on a repeat).
        if note_id not in window and note_id not in known:
            known[note_id] = find_note(handle, os.fstat(descriptor).st_size, note_id) if handle else None
        return window.get(note_id) or known[note_id]
    try:
        gate = gate_root(record, lookup)
        return not any(gate_root(update, lookup) == gate for update in updates)
    finally:
        if handle is not None:
            handle.close()


def gate_root(record, lookup):
    """The id of the gate a gate note belongs to: its own for a new gate, else the gate its refs lead back to.

    lookup(note_id) gives the record of an id, or None; a ref naming no gate
    ends the walk there, and a loop (only a damaged log holds one) ends it too."""
    visited = set()
    while isinstance(record.get("ref"), str) and record["ref"] not in visited:
        visited.add(record["ref"])
        target = lookup(record["ref"])
        if target is None or target.get("type") != "gate":
            return record["ref"]
        record = target
    return record["id"] if "ref" not in record else record["ref"]


def with_recovered(receipt, recovered):
    """Add a recovered key only when the tail of the log was mended."""
    if recovered:
        receipt["recovered"] = recovered
    return receipt


def check_links(log_path, signal):
    """Refuse a link (ref, about, by) that names no note of the right kind, or a supersede the labels forbid."""
    if signal["ref"] is not None:
        target = check_ref(log_path, signal["type"], signal["ref"])
        check_supersede_rule(signal, target)
    for name in ("about", "by"):
        if signal[name] is None:
            continue
        target = note_in_log(log_path, signal[name])
        if target is None:
            raise NotesError("--%s %s names no note in this session; check the id with tail or recap"
                             % (name, signal[name]))
        if name == "by" and target.get("type") == "gate":
            raise NotesError("--by %s is a gate; --by names the note that settles this gate (a decision, a "
                             "source): append that note first, then name it" % signal[name])


def check_supersede_rule(signal, target):
    """Refuse a note that supersedes an op or shared note without being labelled op or shared itself.

    Leaving the label out is no way around it: a model's guess must not hide
    what the operator stated.  A gate update supersedes nothing, so it is not
    held to this."""
    if signal["type"] == "gate" or target.get("provenance") not in FIRM_PROVENANCES:
        return
    if signal["provenance"] in FIRM_PROVENANCES:
        return
    raise NotesError(
        "--ref %s would supersede a note labelled --provenance %s, and this note is not labelled op or "
        "shared; nothing was written. If it answers, refines or comments on that note, link it with "
        "--about %s instead (both stay live); if the operator confirmed the change, say so with "
        "--provenance op (or shared)" % (signal["ref"], target["provenance"], signal["ref"]))


def note_in_log(log_path, note_id):
    """The usable record with this id in the log at log_path, or None (find_note, from the end)."""
    descriptor = open_log_for_reading(log_path)
    if descriptor is None:
        return None
    with open(descriptor, "rb") as handle:
        return find_note(handle, os.fstat(descriptor).st_size, note_id)


def check_ref(log_path, note_type, ref):
    """Refuse a --ref that names no note of this log, or a note of the wrong kind; return the note it names."""
    target = note_in_log(log_path, ref)
    if target is None:
        raise NotesError("--ref %s names no note in this session; check the id with tail or recap" % ref)
    if note_type == "gate" and target.get("type") != "gate":
        raise NotesError(
            "--ref %s is a %s, not a gate; a gate update must name the gate it changes"
            % (ref, target.get("type")))
    if note_type != "gate" and target.get("type") == "gate":
        raise NotesError(
            "--ref %s is a gate; gates change only through gate updates: "
            "append --type gate --ref %s --status open|deferred|closed" % (ref, ref))
    return target


def command_tail(args) -> dict:
    limit = check_limit(args.limit)
    since, until = parse_time_filter(args.since, "since"), parse_time_filter(args.until, "until")
    types = set(args.types) if args.types else None
    needle = grep_needle(args.grep)
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    log_path = os.path.join(folder, LOG_NAME)
    session_id = meta["session_id"]
    records, warnings, superseded = [], [], SupersededSeen()
    size, in_flight = log_view(folder)
    descriptor = open_log_for_reading(log_path)
    if descriptor is None:
        import io  # already loaded by the interpreter itself

        handle = io.BytesIO()  # no log yet: an empty one to tail
    else:
        handle = open(descriptor, "rb")
    with handle:
        newer_seq, damaged = None, 0  # damaged: lines since the newer record that hold no seq
        for position, (offset, line) in enumerate(read_lines_backward(handle, size, count_runs=True)):
            if len(records) >= limit:
                break
            if position == 0 and (line == b"" or in_flight):
                continue  # the log ends with a newline, as it should; or a writer's note is in flight
            if type(line) is int:  # a run of lines that cannot hold a seq: counted, not read one by one
                warnings.append("byte %d: %d lines in a row that hold no seq, so no note" % (offset, line))
                damaged += line
                continue
            value, kind = parse_line(line) if line is not None else (None, "line_too_long")
            if position == 0:  # the last line lacks its newline
                kind = "torn_tail" if value is None else "missing_newline"
            if kind:
                warnings.append("byte %d: %s" % (offset, PROBLEM_DETAILS[kind]))
            seq = value.get("seq") if value is not None else None
            if not is_seq(seq):
                damaged += position > 0 or value is not None  # a torn tail held no seq; a kept line may have
            if value is None:
                continue
            kinds = check_record(value, session_id)
            if is_seq(seq):
                order = seq_order_problem(newer_seq, seq, damaged)  # the newer one, as if read after this
                if order:
                    kinds.append((order, None))
                newer_seq, damaged = seq, 0
            for kind, detail in kinds:
                record_id = value["id"] if is_note_id(value.get("id")) else "no id"  # never echo another
                warnings.append("byte %d (%s): %s" % (offset, record_id, detail or PROBLEM_DETAILS[kind]))
            if not is_usable(kinds):
                continue
            superseded.meet(value)  # a note filtered out still supersedes the ones it names
            if (types is None or value["type"] in types) and (since is None or value["ts"] >= since) and (
                    until is None or value["ts"] < until) and (needle is None or holds_needle(value, needle)):
                records.append(value)
    records.reverse()
    receipt = {"ok": True, "command": "tail", "count": len(records), "path": log_path, "records": records}
    superseded_ids = [record["id"] for record in records if superseded.was_superseded(record)]
    if superseded_ids:
        receipt["superseded"] = superseded_ids
    return with_warnings(receipt, bounded_warnings(warnings, len(warnings)))


def grep_needle(text):
    """tail --grep's text, folded for a case-insensitive match (None when not given); a blank one is refused."""
    if text is None:
        return None
    if not text.strip():
        raise NotesError("--grep is empty; pass the words to look for in texts and effects, for example "
                         "--grep 'email'")
    return text.casefold()


def holds_needle(record, needle):
    """Whether the record's text or effect holds the folded needle, whatever the case."""
    return needle in record["text"].casefold() or needle in record.get("effect", "").casefold()


class SupersededSeen:
    """For a reader walking back from the end: the seqs that the notes met so far supersede.

    A note met later in the walk was written earlier, so every note that
    could supersede it has already been met.  Only ints are kept."""

    def __init__(self):
        self.seqs = set()

    def meet(self, record) -> None:
        """Remember what a usable record supersedes (a gate update supersedes nothing)."""
        ref = record.get("ref")
        if record["type"] != "gate" and is_note_id(ref) and len(ref) <= 12:
            self.seqs.add(int(ref[1:]))

    def was_superseded(self, record) -> bool:
        return record["seq"] in self.seqs

SHOW_LIST_LIMIT = 50  # records per list of show's receipt, the newest kept; the rest are counted in not_listed


def command_show(args) -> dict:
    note_id = show_note_id(args.note_id)
    folder = resolve_folder(args.dir)
    return show_note(folder, require_session(folder), note_id)


def show_note_id(value) -> str:
    """show's NOTE_ID, stripped and checked to be a note id (its value is never echoed)."""
    value = (value or "").strip()
    if not is_note_id(value) or len(value) > 12:  # no seq reaches 12 characters (SEQ_LIMIT)
        raise NotesError("show takes a note id such as n00012; tail or recap lists them %s" % see_help("show"))
    return value


def show_note(folder, meta, note_id) -> dict:
    """The note and its chain: what it replaced, what replaced it (or its gate and the gate's updates
    with the notes that settled them), and the notes about it.  Records are the log's, as parsed.

    Three reads, each holding only the chain: back from the end for the note
    and what its ref leads to, forward for what came after, forward again
    for the notes the updates name in by."""
    reader = LogReader(folder, meta)
    back, back_skipped = chain_back(reader, note_id)
    if not back:
        raise NotesError("no note %s in this session (a damaged line is no note); tail or recap lists "
                         "the ids" % note_id)
    target, is_gate = back[0], back[0]["type"] == "gate"
    root = back[-1] if is_gate else target
    found, not_listed, settled_ids = chain_forward(reader, target, root["id"])
    receipt = {"ok": True, "command": "show", "note_id": note_id, "path": reader.path, "record": target}
    if is_gate:
        receipt["state"] = found["updates"][-1]["status"] if found["updates"] else root.get("status", "open")
        if root is not target:
            receipt["gate"] = root
        receipt["updates"] = found["updates"]
        receipt["settled_by"] = notes_named(reader, settled_ids, not_listed)
    else:
        receipt["state"] = "superseded" if found["replaced_by"] else "live"
        receipt["replaces"] = back[1:]
        if back_skipped:
            not_listed["replaces"] = back_skipped
        receipt["replaced_by"] = found["replaced_by"]
    receipt["about"] = found["about"]
    if not_listed:
        receipt["not_listed"] = not_listed
    return with_warnings(receipt, reader.warnings())


def chain_back(reader, note_id):
    """The note with this id, then the notes its ref leads back to, nearest first: (records, how many left out).

    Refs name earlier notes, so one walk back from the end meets each in
    turn.  The walk follows gates from a gate, other notes from any other
    note.  At most SHOW_LIST_LIMIT + 1 records are held: the nearest, and the
    last (a gate update's gate)."""
    chain, skipped, wanted = [], 0, note_id
    descriptor = open_log_for_reading(reader.path)
    if descriptor is None:
        return chain, skipped
    with open(descriptor, "rb") as handle:
        for _, line in read_lines_backward(handle, reader.size):
            if line is None or ('"id":"%s"' % wanted).encode("ascii") not in line:
                continue
            value, _ = parse_line(line)
            if value is None or value.get("id") != wanted or not is_usable(check_record(value, None)):
                continue
            if chain and (value["type"] == "gate") != (chain[0]["type"] == "gate"):
                break  # a ref across kinds: damage verify reports; the chain ends here
            if len(chain) > SHOW_LIST_LIMIT:
                chain[-1], skipped = value, skipped + 1
            else:
                chain.append(value)
            ref = value.get("ref")
            if not (is_note_id(ref) and len(ref) <= 12 and int(ref[1:]) < value["seq"]):
                break
            wanted = ref
    return chain, skipped


def chain_forward(reader, target, root_id):
    """One forward read: a gate's updates (or the notes that replaced the target, transitively) and the notes
    about the target, newest SHOW_LIST_LIMIT each; with what was left out and the ids the updates name in by."""
    is_gate = target["type"] == "gate"
    replacing = "updates" if is_gate else "replaced_by"
    family = {root_id if is_gate else target["id"]}
    found, not_listed, settled_ids = {replacing: [], "about": []}, {}, set()
    for record in reader.records():
        ref = record.get("ref")
        if (record["type"] == "gate") == is_gate and isinstance(ref, str) and ref in family:
            family.add(record["id"])
            found[replacing].append(record)
            keep_newest(found[replacing], SHOW_LIST_LIMIT, not_listed, replacing)
            if is_gate and isinstance(record.get("by"), str):
                settled_ids.add(record["by"])
        if record.get("about") == target["id"]:
            found["about"].append(record)
            keep_newest(found["about"], SHOW_LIST_LIMIT, not_listed, "about")
    return found, not_listed, settled_ids


def notes_named(reader, note_ids, not_listed):
    """The records with these ids, in log order, newest SHOW_LIST_LIMIT kept (one more forward read)."""
    named = []
    if note_ids:
        for record in reader.records():
            if record["id"] in note_ids:
                named.append(record)
                keep_newest(named, SHOW_LIST_LIMIT, not_listed, "settled_by")
    return named



def count_by_type(reader):
    """Read the whole log: (notes by type, first ts, last ts)."""
    by_type = dict.fromkeys(sorted(NOTE_TYPES), 0)
    first_ts = last_ts = None
    for record in reader.records():
        if record["type"] in by_type:
            by_type[record["type"]] += 1
        first_ts = first_ts or record["ts"]
        last_ts = record["ts"]
    return by_type, first_ts, last_ts


def command_summary(args) -> dict:
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    reader = LogReader(folder, meta)
    by_type = count_by_type(reader)[0]
    last = reader.last_record
    receipt = {
        "ok": True,
        "command": "summary",
        "session_id": meta["session_id"],
        "path": reader.path,
        "total": reader.total,
        "by_type": by_type,
        "last_note_id": last["id"] if last else None,
        "last_type": last["type"] if last else None,
    }
    return with_warnings(receipt, reader.warnings())


def command_verify(args) -> dict:
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    reader = LogReader(folder, meta)
    meta_problems = []
    for key in ("schema_version", "session_id", "created_at", "log_file"):
        if not isinstance(meta.get(key), str):
            meta_problems.append(problem(None, None, "meta_field", "%s lacks %s" % (META_NAME, key)))
    if isinstance(meta.get("schema_version"), str) and meta["schema_version"] != META_SCHEMA:
        meta_problems.append(problem(None, None, "meta_schema",
                                     "%s has an unknown schema_version" % META_NAME))
    for _ in reader.records():
        pass
    problems = (meta_problems + reader.problems)[:PROBLEMS_LISTED]
    count = len(meta_problems) + reader.problem_count
    receipt = {"ok": count == 0, "command": "verify", "path": reader.path, "total": reader.total,
               "problems": problems}
    if count > len(problems):
        receipt["problems_not_listed"] = count - len(problems)
    if reader.redactions.count:
        receipt["redacted"] = reader.redactions.count
    # A note a 1.1.0 writer could store but append now refuses: said, not counted as damage.
    return with_warnings(receipt, reader.notices())


def command_export(args) -> dict:
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    markdown = args.format == "md"
    if args.output:
        output = os.path.abspath(os.path.expanduser(args.output))
    else:
        output = os.path.join(folder, EXPORT_MARKDOWN_NAME if markdown else EXPORT_NAME)
    check_export_output(folder, output)
    output_folder = os.path.dirname(output)
    # Both passes read the same bytes: the size is fixed before the first one,
    # so notes appended meanwhile wait for the next export.
    reader = LogReader(folder, meta)
    by_type, first_ts, last_ts = count_by_type(reader)
    count = reader.total
    warnings = reader.warnings()
    if markdown:
        chunks = markdown_export(reader, meta, count, by_type, first_ts, last_ts, reader.problem_count,
                                 warnings)
    else:
        chunks = json_export(reader, meta, count)
    # A place that cannot take the file is a refusal; a failure while writing
    # it (a full disk, say) is an unexpected error, as it is for append.
    refusal = "cannot write %s (%s); choose another --output"
    try:
        os.makedirs(output_folder, exist_ok=True)
    except OSError as error:
        raise NotesError(refusal % (output, error.strerror)) from None
    write_file_atomically(output, chunks, refusal)
    receipt = {"ok": True, "command": "export", "record_count": count, "path": output}
    return with_warnings(receipt, warnings)


def check_export_output(folder, output):
    """Refuse an --output that is a folder, a special file, or any of the session's own files."""
    if os.path.isdir(output):
        raise NotesError("--output %s is a folder; give a file path, such as %s"
                         % (output, os.path.join(output, EXPORT_NAME)))
    if os.path.isfile(os.path.dirname(output)):
        raise NotesError("--output %s is inside a file, not a folder" % output)
    # The same file by name (through any linked folder) or by inode (a hard
    # or symbolic link): writing there would replace the log, the meta or the
    # lock, or a side file holding torn bytes.
    real = os.path.join(os.path.realpath(os.path.dirname(output)), os.path.basename(output))
    for name in (META_NAME, LOG_NAME, LOCK_NAME):
        if real == os.path.join(folder, name) or same_file(output, os.path.join(folder, name)):
            raise NotesError(
                "--output %s is the session's own %s; an export never writes over a session file. "
                "Choose another path, such as %s" % (output, name, os.path.join(folder, EXPORT_NAME)))
    if os.path.dirname(real) == folder and os.path.basename(real).startswith(LOG_NAME + ".torn-"):
        raise NotesError("--output %s is a side file of the session, holding bytes set aside from its "
                         "log; choose another path" % output)
    try:
        mode = os.lstat(output).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):  # a link is refused when written
        raise special_file_error(output, mode)
    # Whatever else stands there (another session's log, a config, a key
    # file) is the user's, and a mistyped or injected path must not cost it.
    if stat.S_ISREG(mode) and not is_earlier_export(output):
        raise NotesError(
            "--output %s exists and is not an export of this tool; an export replaces only an earlier "
            "export. Choose another --output, or remove that file first" % output)


def is_earlier_export(path):
    """Whether the file at path was written by export, judged by its first bytes alone.

    A JSON export opens with its schema key, a markdown export with its
    heading; neither is loaded, so a large file costs one small read."""
    try:
        descriptor = open_regular_file(path)
    except (OSError, NotesError):
        return False
    with open(descriptor, "rb") as handle:
        head = handle.read(len(EXPORT_JSON_START))
    return head.startswith(EXPORT_JSON_START) or head.startswith(EXPORT_MARKDOWN_START)


def same_file(path, other):
    """Whether both paths name one existing file (os.path.samefile, False when either is missing)."""
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def json_export(reader, meta, count):
    """Yield the export as pretty_json(export) would print it, record by record."""
    head = {"schema_version": EXPORT_SCHEMA, "exported_at": utc_now(), "session": meta,
            "record_count": count}
    # backslashreplace: a log path that is not UTF-8 keeps its \udcXX escapes, as in the meta.
    yield (pretty_json(head)[:-2] + ',\n  "records": ').encode("utf-8", "backslashreplace")
    written = 0
    for record in reader.records():
        if written == count:
            break
        # Indent the record's own lines by one more level; JSON strings hold
        # no raw newline, so every newline here is a line of the layout.
        text = pretty_json(record).replace("\n", "\n    ")
        yield (("[\n    " if written == 0 else ",\n    ") + text).encode("utf-8")
        written += 1
    yield ("\n  ]\n}\n" if written else "[]\n}\n").encode("utf-8")


def markdown_export(reader, meta, count, by_type, first_ts, last_ts, problem_count, warnings):
    """Yield a readable audit document of the whole session; the figures come from the first pass."""
    created = meta.get("created_at")
    lines = [
        "# Shaping session %s" % visible(meta["session_id"], True),
        "",
        "- Created: %s" % (visible(created, True) if isinstance(created, str) else "unknown"),
        "- Exported: %s" % utc_now(),
        "- Notes: %d (%s to %s)" % (count, first_ts or "none", last_ts or "none"),
        "- By type: %s" % ", ".join("%s %d" % item for item in by_type.items()),
        "- Verify: %s" % ("clean" if problem_count == 0 else "%d problems" % problem_count),
    ]
    lines.extend("  - %s" % message for message in warnings)
    lines += ["", "## Notes", ""]
    yield ("\n".join(lines) + "\n").encode("utf-8")
    written = 0
    for record in reader.records():
        if written == count:
            break
        written += 1
        yield ("\n".join(markdown_record(record)) + "\n").encode("utf-8")


def markdown_record(record):
    """One record of the audit document, as lines; note text cannot forge any structure of the document.

    The text is an indented code block: every line of it starts with four
    spaces, so none can open a heading, list item, table row or quote.  An
    effect's later lines are indented six spaces, deep enough inside its list
    item to continue it and start nothing.  Markdown breaks lines at CR as well
    as LF, so both split here."""
    labels = []
    if "effect" in record:
        first, *rest = markdown_split(record["effect"])
        labels += ["- Effect: " + visible(first)] + ["      " + visible(line) for line in rest]
    # A note id and words from short lists: checked before any reader sees them.
    for key in ("ref", "status", "provenance", "evidence"):
        if key in record:
            labels.append("- %s: %s" % (key.capitalize(), record[key]))
    return (["### %s · %s · %s" % (record["id"], record["ts"], visible(record["type"], True)), ""]
            + ["    " + visible(line) for line in markdown_split(record["text"])] + [""]
            + (labels + [""] if labels else []))


def markdown_split(text):
    """Text split where markdown ends a line: at CR LF, CR or LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def visible(value, one_line=False):
    """value with each forbidden character (and, for one_line, CR and LF) written as [U+XXXX].

    A control character left in a document could steer the terminal that
    shows it, and a bidirectional one reorder the line an operator reads."""
    if value.isprintable():
        return value
    return "".join("[U+%04X]" % ord(character) if character in FORBIDDEN_CHARACTERS
                   or (one_line and character in "\r\n") else character for character in value)


def summarise_record(record):
    """A record as a recap item: id and text, then the effect, the note it replaced and its labels."""
    item = {"id": record["id"], "text": record["text"]}
    if "effect" in record:
        item["effect"] = record["effect"]
    if record["type"] != "gate" and isinstance(record.get("ref"), str):
        item["replaces"] = record["ref"]
    for key in ("provenance", "evidence"):
        if key in record:
            item[key] = record[key]
    return item


def is_unconfirmed(labels) -> bool:
    """Whether a note's labels say the model proposed it or only inferred it."""
    return labels.get("provenance") == "model" or labels.get("evidence") == "inferred"


def gate_labels(gate) -> dict:
    """The labels of the note that set a recap gate's status: its latest update, or the gate itself."""
    if "update_id" in gate:
        return {key: gate["update_" + key] for key in ("provenance", "evidence") if "update_" + key in gate}
    return gate


def recap_history(reader):
    """First pass: the notes later ones superseded, every gate with its latest update, notes by type.

    Only these are held in memory; the lists are gathered in the second pass.
    Returns (superseded ids, gates by id, seq of each gate's latest note, counts by type)."""
    superseded, gates, gate_of_update, changed_at = set(), {}, {}, {}
    counts = dict.fromkeys(NOTE_TYPES, 0)
    for record in reader.records():
        if record["type"] in counts:
            counts[record["type"]] += 1
        ref = record.get("ref")
        if record["type"] == "gate":
            if ref is None:
                gate = {"id": record["id"], "text": record["text"], "status": record.get("status", "open")}
                gate.update((key, record[key]) for key in ("effect", "provenance", "evidence") if key in record)
                gates[record["id"]], changed_at[record["id"]] = gate, record["seq"]
            else:
                root = gate_of_update.get(ref, ref)
                if root in gates and record.get("status") in GATE_STATUSES:
                    gate_of_update[record["id"]], changed_at[root] = root, record["seq"]
                    gate = gates[root]
                    gate.update(status=record["status"], update_id=record["id"], update_text=record["text"])
                    for key in ("provenance", "evidence"):  # the latest update's labels only
                        gate.pop("update_" + key, None)
                        if key in record:
                            gate["update_" + key] = record[key]
        elif isinstance(ref, str):
            superseded.add(ref)
    return superseded, gates, changed_at, counts


def keep_newest(entries, limit, cut, name):
    """Trim a list of (seq, item) to its newest `limit` entries, counting what goes in cut[name]."""
    if len(entries) > limit:
        cut[name] = cut.get(name, 0) + len(entries) - limit
        del entries[:len(entries) - limit]


def recap_live_notes(reader, superseded, limit, cut):
    """Second pass: latest mode and shape, and the live notes of each list as (seq, item), newest kept.

    An unconfirmed note is not settled until the operator confirms it, so it
    goes to the unconfirmed list (as (seq, item with its type)) instead of its
    own; the latest mode and shape stay in place and are listed there too."""
    latest = {"mode": None, "shape": None}
    list_of_type = dict(RECAP_LISTS)
    kept = {name: [] for _, name in RECAP_LISTS}
    unconfirmed = []
    for record in reader.records():
        if record["id"] in superseded:
            continue
        if record["type"] in latest:
            latest[record["type"]] = record
        elif record["type"] in list_of_type:
            name, item = list_of_type[record["type"]], summarise_record(record)
            if is_unconfirmed(item):
                unconfirmed.append((record["seq"], {"id": item["id"], "type": record["type"], **item}))
                keep_newest(unconfirmed, limit, cut, "unconfirmed")
            else:
                kept[name].append((record["seq"], item))
                keep_newest(kept[name], limit, cut, name)
    for note_type, record in latest.items():
        if record is not None:
            latest[note_type] = summarise_record(record)
            if is_unconfirmed(latest[note_type]):
                unconfirmed.append((record["seq"], {"id": record["id"], "type": note_type, **latest[note_type]}))
    return latest, kept, unconfirmed


# What a closed gate keeps in the recap: the gate, and the update that closed it.
CLOSED_GATE_KEYS = ("id", "text", "update_id", "update_text", "update_provenance", "update_evidence")


def recap_gates(gates, changed_at, limit, cut, unconfirmed):
    """Gates by status as lists of (seq, item), newest `limit` kept; unconfirmed gates join that list.

    Open and deferred gates keep the order they were opened in, and stay in
    their list when unconfirmed too (a gate is open whoever raised it); closed
    gates the order they were closed in, each with the update that closed it,
    unless that closing is unconfirmed: then the gate is only in unconfirmed."""
    by_status = {"open": [], "deferred": [], "closed": []}
    for gate_id, gate in gates.items():
        if gate["status"] not in GATE_STATUSES:  # a tuple: a stray unhashable status is just skipped
            continue
        if is_unconfirmed(gate_labels(gate)):
            unconfirmed.append((changed_at[gate_id], {"id": gate_id, "type": "gate", **gate}))
            if gate["status"] == "closed":
                continue
        if gate["status"] == "closed":
            item = {key: value for key, value in gate.items() if key in CLOSED_GATE_KEYS}
            by_status["closed"].append((changed_at[gate_id], item))
        else:
            by_status[gate["status"]].append((changed_at[gate_id], gate))
    by_status["closed"].sort(key=lambda entry: entry[0])
    for status, entries in by_status.items():
        keep_newest(entries, limit, cut, status + "_gates")
    unconfirmed.sort(key=lambda entry: entry[0])
    keep_newest(unconfirmed, limit, cut, "unconfirmed")
    return by_status


def read_export_head(path):
    """The top-level keys of an export before its records, from a bounded prefix: (head, problem).

    record_count sits before the records, so the whole file is never loaded.
    (None, None) when there is no export at path."""
    try:
        descriptor = open_regular_file(path)
    except FileNotFoundError:
        return None, None
    except (NotesError, IsADirectoryError):  # a folder, FIFO, socket or device is never read
        return None, "is not a regular file"
    except OSError as error:
        return None, "cannot be read (%s)" % error.strerror
    with open(descriptor, "rb") as handle:
        data = handle.read(EXPORT_HEAD_LIMIT)
    start = data.find(b'"records"')
    while start != -1:
        before = data[:start].rstrip()
        if before.endswith(b","):
            try:
                head = parse_json(before[:-1].decode("utf-8") + "}")
            except (UnicodeDecodeError, ValueError):
                head = None
            if isinstance(head, dict) and "record_count" in head:
                return head, None
        start = data.find(b'"records"', start + 1)
    return None, "is not a session export with a record_count in its first %d bytes" % EXPORT_HEAD_LIMIT


def export_lag(folder, session_id, total):
    """How many of the log's notes the folder's default export lacks, by its record count."""
    path = os.path.join(folder, EXPORT_NAME)
    lag = {"path": path, "record_count": None, "missing": total}  # no usable export: every note is missing
    head, problem = read_export_head(path)
    if head is not None:
        count, session = head["record_count"], head.get("session")
        if (head.get("schema_version") != EXPORT_SCHEMA or not isinstance(count, int)
                or isinstance(count, bool) or count < 0):
            problem = "is not a session export (%s with a record_count)" % EXPORT_SCHEMA
        elif not isinstance(session, dict) or session.get("session_id") != session_id:
            problem = "holds another session"
        elif count > total:
            problem = ("holds %d notes, more than this log's %d: restore it to bring the newer notes in"
                       % (count, total))
            lag.update(record_count=count, missing=0)
        else:
            lag.update(record_count=count, missing=total - count)
    if problem:
        lag["problem"] = "%s %s" % (EXPORT_NAME, problem)
    return lag


class CompactReceipt(dict):
    """A receipt that main prints as compact JSON on one line: readbacks sized to a byte budget.

    Every other receipt keeps v0's 2-space indentation."""


def printed_form(result) -> str:
    """The text main prints for a command's result: markdown as is, else JSON and a newline."""
    if isinstance(result, str):
        return result
    if isinstance(result, CompactReceipt):
        return compact_json(result) + "\n"
    return pretty_json(result) + "\n"


def printed_size(result) -> int:
    """The number of bytes main prints for a result."""
    return len(printed_form(result).encode("utf-8", "backslashreplace"))


CUTTABLE_RECAP_LISTS = ("closed_gates",) + tuple(name for _, name in RECAP_LISTS)


def recap_hints(cut, counts, unconfirmed_total):
    """How to see what recap left out: the tail of the types cut, and a wider recap for unconfirmed notes."""
    types = [note_type for note_type in NOTE_TYPES
             if any(cut.get(name) for list_type, name in RECAP_LISTS if list_type == note_type)
             or note_type == "gate" and any(cut.get(status + "_gates") for status in GATE_STATUSES)]
    hints = []
    if types:
        hints.append("tail %s --limit %d" % (" ".join("--type " + note_type for note_type in types),
                                             sum(counts[note_type] for note_type in types)))
    if cut.get("unconfirmed"):
        hints.append("recap --limit %d" % unconfirmed_total)
    return hints


def recap_cut_down(recap, dropped_order, count, limit_cut, counts, unconfirmed_total):
    """The recap without the `count` oldest entries of dropped_order, saying what was cut and how to see it."""
    dropped = {}
    for _, name, _ in dropped_order[:count]:
        dropped[name] = dropped.get(name, 0) + 1
    result = CompactReceipt(recap)
    for name, number in dropped.items():
        result[name] = recap[name][number:]
    cut = {name: limit_cut.get(name, 0) + dropped.get(name, 0)
           for name in ("open_gates", "deferred_gates", "unconfirmed") + CUTTABLE_RECAP_LISTS}
    truncated = {name: number for name, number in cut.items() if number}
    warnings = result.pop("warnings", None)
    if truncated:
        result["truncated"] = truncated
        result["see_truncated"] = recap_hints(truncated, counts, unconfirmed_total)
    return with_warnings(result, warnings)


def fit_recap(recap, ages, limit_cut, counts, unconfirmed_total, render, max_bytes):
    """The recap rendered for printing, with the fewest oldest entries left out that make it fit max_bytes.

    ages holds the seq of each entry of the lists that may lose entries.
    Open and deferred gates, unconfirmed notes, mode, shape and warnings are
    never left out: when they alone exceed the budget, recap refuses and says
    the size that would do."""
    dropped_order = sorted((age, name, index) for name in CUTTABLE_RECAP_LISTS
                           for index, age in enumerate(ages[name]))

    def rendered_without(count):
        return render(recap_cut_down(recap, dropped_order, count, limit_cut, counts, unconfirmed_total))

    whole = rendered_without(0)
    if printed_size(whole) <= max_bytes:
        return whole
    fits, fails = len(dropped_order), 0
    smallest = rendered_without(fits)
    needed = printed_size(smallest)
    if needed > max_bytes:
        raise NotesError(
            "recap needs %d bytes for what it never leaves out (open and deferred gates, unconfirmed notes, "
            "mode, shape, warnings), more than --max-bytes %d; run it again with --max-bytes %d, or with a "
            "smaller --limit" % (needed, max_bytes, needed))
    while fits - fails > 1:  # bisect: fewer entries left out means more of the state is shown
        middle = (fits + fails) // 2
        candidate = rendered_without(middle)
        if printed_size(candidate) <= max_bytes:
            fits, smallest = middle, candidate
        else:
            fails = middle
    return smallest


def command_recap(args) -> dict:
    limit = check_limit(args.limit)
    if args.max_bytes < 1:
        raise NotesError("--max-bytes must be 1 or more (got %d)" % args.max_bytes)
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    reader = LogReader(folder, meta)
    superseded, gates, changed_at, counts = recap_history(reader)
    warnings = reader.warnings()
    limit_cut = {}
    latest, kept, unconfirmed = recap_live_notes(reader, superseded, limit, limit_cut)
    by_status = recap_gates(gates, changed_at, limit, limit_cut, unconfirmed)
    unconfirmed_total = len(unconfirmed) + limit_cut.get("unconfirmed", 0)
    lists = dict(kept, closed_gates=by_status["closed"])
    recap = CompactReceipt(
        ok=True, command="recap", session_id=meta["session_id"], path=reader.path, total=reader.total,
        mode=latest["mode"], shape=latest["shape"],
        open_gates=[item for _, item in by_status["open"]],
        deferred_gates=[item for _, item in by_status["deferred"]],
        unconfirmed=[item for _, item in unconfirmed],
        closed_gates=[item for _, item in by_status["closed"]])
    for name, entries in kept.items():
        recap[name] = [item for _, item in entries]
    recap["superseded_count"] = len(superseded)
    recap["export_lag"] = export_lag(folder, meta["session_id"], reader.total)
    if reader.redactions.count:
        recap["redacted"] = {"count": reader.redactions.count, "not_erased": REDACT_NOT_ERASED}
    with_warnings(recap, warnings)
    ages = {name: [seq for seq, _ in entries] for name, entries in lists.items()}
    form = recap_markdown if args.format == "md" else CompactReceipt

    def render(fitted):
        # Lists are kept oldest first while fitting (the oldest go first);
        # closed gates are shown newest first, the closing a reader most needs.
        shown = CompactReceipt(fitted)
        shown["closed_gates"] = fitted["closed_gates"][::-1]
        return form(shown)
    return fit_recap(recap, ages, limit_cut, counts, unconfirmed_total, render, args.max_bytes)


def one_line(value) -> str:
    """A field's value on one line, whatever it holds (a damaged log may hold any JSON value)."""
    return " ".join((value if isinstance(value, str) else compact_json(value)).splitlines())


def why_unconfirmed(labels) -> str:
    """Why a note is not yet confirmed, in the operator's words."""
    reasons = []
    if labels.get("provenance") == "model":
        reasons.append("proposed by the model")
    if labels.get("evidence") == "inferred":
        reasons.append("inferred")
    return ", ".join(reasons)


def recap_item_line(item, kind="note", prefix=""):
    """One recap item as one markdown line: its text first, its ids and marks in brackets at the end.

    kind is "note", "gate" (open or deferred) or "closed" (a closed gate).  A
    prefix names the note's type in the "Not yet confirmed" section, where the
    mark says why the note is unconfirmed; elsewhere it only says that it is."""
    line = "- " + prefix + one_line(item["text"])
    if "effect" in item:
        line += " Effect: " + one_line(item["effect"])
    marks = [one_line(item["id"])]
    if "replaces" in item:
        marks[0] += ", replaces " + one_line(item["replaces"])
    if "update_id" in item:
        line += (" Closed: " if kind == "closed" else " Latest: ") + one_line(item.get("update_text", ""))
        marks[0] += (", closed by " if kind == "closed" else ", updated by ") + one_line(item["update_id"])
    labels = gate_labels(item) if kind != "note" else item
    if is_unconfirmed(labels):
        marks.append(why_unconfirmed(labels) if prefix else "not yet confirmed")
    return "%s [%s]" % (line, "; ".join(marks))


RECAP_SECTIONS = (("Open gates", "open_gates", "gate"), ("Deferred gates", "deferred_gates", "gate"),
                  ("Not yet confirmed", "unconfirmed", "unconfirmed"), ("Closed gates", "closed_gates", "closed"),
                  ("Decisions", "decisions", "note"), ("Discarded paths", "discards", "note"),
                  ("Tensions", "tensions", "note"), ("Sources", "sources", "note"),
                  ("Artifact boundaries", "artifacts", "note"))


def recap_markdown_head(recap):
    """The opening lines of the markdown recap: counts in words and how far the export lags."""
    lag = recap["export_lag"]
    if "problem" in lag:
        export = "Export: %s." % lag["problem"]
    elif lag["record_count"] is None:
        export = "Export: no %s yet." % EXPORT_NAME
    elif lag["missing"] == 0:
        export = "Export: %s holds every note." % EXPORT_NAME
    else:
        export = "Export: %s lacks the %s; export again." % (
            EXPORT_NAME, "newest note" if lag["missing"] == 1 else "%d newest notes" % lag["missing"])
    total = "1 note" if recap["total"] == 1 else "%d notes" % recap["total"]
    lines = ["# Recap", "", "%s, %d superseded by later ones." % (total, recap["superseded_count"]), export]
    if "redacted" in recap:
        not_erased = recap["redacted"]["not_erased"]
        lines.append("Redacted notes: %d. %s." % (recap["redacted"]["count"], not_erased[0].upper() + not_erased[1:]))
    return lines + [""]


def recap_markdown(recap):
    """The recap as markdown for the operator: plain headings, one line per item, no receipt keys."""
    lines = recap_markdown_head(recap)
    for title, key in (("Mode", "mode"), ("Shape", "shape")):
        lines += ["## " + title, "", recap_item_line(recap[key]) if recap[key] else "- none", ""]
    for title, key, kind in RECAP_SECTIONS:
        lines += ["## " + title, ""]
        for item in recap[key]:
            if kind == "unconfirmed":
                status = " (%s)" % one_line(item["status"]) if item["type"] == "gate" else ""
                item_kind = "note" if item["type"] != "gate" else "closed" if item["status"] == "closed" else "gate"
                lines.append(recap_item_line(item, item_kind, "%s%s: " % (item["type"].capitalize(), status)))
            else:
                lines.append(recap_item_line(item, kind))
        if not recap[key]:
            lines.append("- none")
        if recap.get("truncated", {}).get(key):
            lines.append("- (%d older not shown)" % recap["truncated"][key])
        lines.append("")
    if recap.get("warnings"):
        lines += ["## Warnings", ""] + ["- " + message for message in recap["warnings"]] + [""]
    return "\n".join(lines)


EXPORT_READ_BLOCK = 1 << 16  # characters read at a time from an export
EXPORT_VALUE_LIMIT = LINE_LIMIT  # characters of one export value at most: a longer record is no log line
JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")


class ExportShapeError(ValueError):
    """Why an export file cannot be a session log at all (its reason names no value it holds)."""


class JsonStream:
    """Reads one JSON document from a file a value at a time, never holding more than a value and a block.

    The standard library has no streaming JSON parser, but raw_decode parses
    one value at an offset of a string: values are parsed from a buffer that
    gains a block whenever the value in it is cut off at the buffer's end.
    The bytes read are hashed as they go, so that a second pass can tell
    whether the file changed in between (digest)."""

    def __init__(self, handle):
        import codecs  # only restore needs it

        self.handle, self.decoder = handle, codecs.getincrementaldecoder("utf-8")()
        self.hash = hashlib.sha256()
        self.text, self.position, self.ended, self.bytes_read = "", 0, False, 0

    def fill(self) -> bool:
        """Append one block to the buffer, dropping what was parsed; False at the end of the file."""
        if self.ended:
            return False
        data = self.handle.read(EXPORT_READ_BLOCK)
        self.hash.update(data)
        self.bytes_read += len(data)
        if self.bytes_read > EXPORT_SIZE_LIMIT:
            raise ExportShapeError("it grew past 256 MiB while it was read")
        try:
            more = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise ExportShapeError("it is not valid UTF-8") from None
        self.text, self.position, self.ended = self.text[self.position:] + more, 0, not data
        return True

    def peek(self) -> str:
        """The next character that is not JSON white space ("" at the end of the file)."""
        while True:
            self.position = JSON_WHITESPACE.match(self.text, self.position).end()
            if self.position < len(self.text) or not self.fill():
                return self.text[self.position:self.position + 1]

    def take(self, allowed: str) -> str:
        """The next character, which must be one of allowed."""
        character = self.peek()
        if not character or character not in allowed:
            raise ExportShapeError("it is not JSON of the shape of an export")
        self.position += 1
        return character

    def value(self, limit=EXPORT_VALUE_LIMIT):
        """The next JSON value; one still unparsed past limit characters is refused."""
        self.peek()
        while True:
            try:
                value, end = DECODER.raw_decode(self.text, self.position)
                # A value that ends with the buffer may go on (a number): read on to be sure.
                if end - self.position > limit:
                    break
                if end < len(self.text) or self.ended:
                    self.position = end
                    return value
            except (ValueError, RecursionError):
                if self.ended:
                    raise ExportShapeError("it is not JSON that can be read (broken, a number too big "
                                           "for a float, or nested too deeply)") from None
            if len(self.text) - self.position > limit:
                break
            self.fill()
        raise ExportShapeError("it holds a value over %d characters, larger than any record" % limit)

    def elements(self):
        """Yield the values of the array that comes next, one at a time."""
        self.take("[")
        if self.peek() == "]":
            self.position += 1
            return
        while True:
            yield self.value()
            if self.take(",]") == "]":
                return


def export_parts(stream):
    """Yield the export's top-level (key, value, elements) in file order, then check that nothing follows.

    When records holds an array, value is None and elements a generator of
    its values (else elements is None); what the caller leaves of it is read
    past before the next key."""
    stream.take("{")
    seen = set()
    if stream.peek() == "}":
        stream.position += 1
    else:
        while True:
            key = stream.value()
            if not isinstance(key, str) or key in seen:
                raise ExportShapeError("it is not a JSON object with one value per key")
            seen.add(key)
            stream.take(":")
            if key == "records" and stream.peek() == "[":
                elements = stream.elements()
                yield key, None, elements
                for _ in elements:
                    pass
            else:
                yield key, stream.value(), None
            if stream.take(",}") == "}":
                break
    if stream.peek():
        raise ExportShapeError("it holds more than one JSON value")


def open_export(path):
    """A binary handle on the export at path; refuse what is not a regular file, or is over EXPORT_SIZE_LIMIT."""
    try:
        descriptor = open_regular_file(path)
    except FileNotFoundError:
        raise NotesError("no export at %s; pass the path of a session_export.json" % path) from None
    except IsADirectoryError:
        raise NotesError("%s is a folder; pass the path of a session_export.json" % path) from None
    except OSError as error:
        raise NotesError("cannot read %s (%s)" % (path, error.strerror)) from None
    if os.fstat(descriptor).st_size > EXPORT_SIZE_LIMIT:
        os.close(descriptor)
        raise NotesError("%s is over 256 MiB, larger than any session export; nothing was written. Pass the "
                         "path of a session_export.json" % path)
    return open(descriptor, "rb")


class Export:
    """An export checked in one streaming pass, whose records later passes read again from the same open file.

    Memory stays bounded whatever the export's size: one record at a time,
    the first problems, and LogOrder's sets of ints.  The first pass keeps a
    digest of the bytes; a later pass that reads to the end refuses when they
    changed meanwhile, before its caller commits, so no record is written unchecked."""

    HEAD_KEYS = ("schema_version", "session", "record_count")  # the only top-level values kept

    def __init__(self, path, accept_damaged=False):
        self.path, self.accept_damaged = path, accept_damaged
        self.handle = open_export(path)
        self.session, self.record_count = None, 0
        self.problems, self.problem_count, self.notices = [], 0, []
        try:
            self.digest = self.check()
        except ExportShapeError as error:
            self.close()
            raise NotesError("%s is not a session export: %s; nothing was written, with --accept-damaged or "
                             "without" % (path, error), EXIT_INTEGRITY) from None
        except BaseException:
            self.close()
            raise

    def close(self):
        self.handle.close()

    def check(self) -> bytes:
        """The first pass: the head's shape, then every record (walked again when records come first)."""
        head, walked = {}, False
        stream = JsonStream(self.handle)
        for key, value, elements in export_parts(stream):
            if elements is not None:
                head["records"] = []  # an array: its records are checked one at a time
                if export_shape_problem(head) is None:  # the session came first, as export writes it
                    self.check_records(head["session"]["session_id"], elements)
                    walked = True
            elif key in self.HEAD_KEYS or key == "records":
                head[key] = value
        reason = export_shape_problem(head)
        if reason:
            raise ExportShapeError(reason)
        self.session = head["session"]
        if not walked:  # a hand-made export with its records before its session
            self.check_records(self.session["session_id"], self.records(verify=False))
        if head.get("record_count") != self.record_count:
            self.problem_count += 1
            self.problems.insert(0, problem(None, None, "record_count", "record_count is not %d, the number "
                                            "of records the export holds" % self.record_count))
            del self.problems[PROBLEMS_LISTED:]
        if self.problem_count and not self.accept_damaged:
            raise NotesError(
                "%s is damaged (%d problems); nothing was written. Restore from an intact export, or run "
                "restore --accept-damaged on this one to bring back every record exactly as the export holds "
                "it, repairing and dropping nothing, so that verify then reports the same problems"
                % (self.path, self.problem_count), EXIT_INTEGRITY, {"problems": self.problems})
        return stream.hash.digest()

    def check_records(self, session_id, records):
        """Check each record as verify would: keep the first problems, count the rest."""
        seen = LogOrder()  # as verify counts them, so that it reports the same problems after a restore
        redactions = RedactionsSeen()
        self.record_count = 0
        for number, record in enumerate(records, 1):
            if not isinstance(record, dict):
                raise ExportShapeError("record %d is not an object" % number)
            kinds = check_record(record, session_id)
            kinds += seen.place_problems(record, kinds)
            if self.accept_damaged and not is_usable(kinds):
                try:
                    record_line(record)
                except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
                    raise NotesError("%s: record %d cannot be written as a line of JSON (nested too deeply, "
                                     "or text that is not valid UTF-8); nothing was written" % (self.path, number),
                                     EXIT_INTEGRITY) from None
            record_id = record["id"] if is_note_id(record.get("id")) else None
            self.problem_count += len(kinds)
            for kind, detail in kinds[:PROBLEMS_LISTED - len(self.problems)]:
                self.problems.append(problem(number, record_id, kind, detail))
            if is_usable(kinds):
                redactions.meet(record, number)
            self.record_count = number
        unexplained = redactions.problems()
        self.problem_count += len(unexplained)
        self.problems.extend(unexplained[:PROBLEMS_LISTED - len(self.problems)])
        self.notices = problem_messages(seen.notices, seen.notice_count)

    def records(self, verify=True):
        """Yield the records again, read from the start of the same open file.

        With verify, a pass read to its end refuses when the bytes are not the
        first pass's: raised from the last step, before the caller commits."""
        self.handle.seek(0)
        stream = JsonStream(self.handle)
        try:
            for _, _, elements in export_parts(stream):
                if elements is not None:
                    yield from elements
            changed = verify and stream.hash.digest() != self.digest
        except ExportShapeError:
            changed = True
        if changed:
            raise NotesError("%s changed while it was being restored; nothing was written. Run restore "
                             "again once nothing writes to it" % self.path, EXIT_INTEGRITY)


def load_export(path, accept_damaged=False):
    """Open and check an export (Export): what cannot be a log at all is always refused; any other
    problem refuses the restore, unless accept_damaged: then the problems are kept in the Export.
    Notices (LogOrder's: what append now refuses but 1.1.0 stored) never refuse."""
    return Export(path, accept_damaged)


def export_shape_problem(export) -> str | None:
    """Why an export's head (its top-level values but the records' elements) cannot be a session log at all."""
    if not isinstance(export, dict) or export.get("schema_version") != EXPORT_SCHEMA:
        return "not JSON with schema_version %s" % EXPORT_SCHEMA
    session, records = export.get("session"), export.get("records")
    if not isinstance(session, dict) or not is_session_id(session.get("session_id")):
        return "its session has no usable session_id"
    if not isinstance(session.get("created_at", ""), str):
        return "its session's created_at is not a string"
    if not isinstance(records, list):
        return "its records are not a list"
    return None


def problem_messages(problems: list, count: int) -> list:
    """Problems (verify's entries) as bounded warnings: where, then what."""
    messages = []
    for entry in problems[:WARNINGS_LISTED]:
        where = "" if entry["line"] is None else "line %d" % entry["line"]
        if entry["id"]:
            where += " (%s)" % entry["id"]
        messages.append("%s: %s" % (where, entry["detail"]) if where else entry["detail"])
    return bounded_warnings(messages, count)


def notes_kept_by_restore(folder, session, export):
    """How many export records the folder already holds (None: a fresh start); refuse the rest.

    The log and the export are compared record by record (common_prefix), never held whole."""
    if restore_cut_short(folder, session, export):
        return None
    meta = check_session_folder(folder)
    log_path = os.path.join(folder, LOG_NAME)
    existing = common = 0
    if meta is not None:
        reader = LogReader(folder, meta)
        existing, common = common_prefix(reader.records(), export.records(verify=False))
        # A cut-off last line (a restore killed while adding notes leaves one)
        # is mended under the lock, as append mends it; any other problem refuses.
        mendable = [entry for entry in reader.problems if entry["kind"] in ("torn_tail", "missing_newline")]
        if reader.problem_count > len(mendable):
            raise NotesError(
                "the log in %s has problems (run verify); restore only adds to a healthy log, "
                "nothing was changed" % folder)
    if meta is None or not existing:
        if os.path.exists(log_path) and os.path.getsize(log_path) > 0:
            raise NotesError(
                "%s holds lines that are not notes of a session; move it aside first" % log_path)
        return None
    if meta["session_id"] != session["session_id"]:
        raise NotesError(
            "%s holds another session (%s) with notes; nothing was changed. Restore into an "
            "empty --dir instead" % (folder, meta["session_id"]))
    if existing > export.record_count and common == export.record_count:
        # An older export of this very log: restoring it elsewhere would fork the session.
        raise NotesError(
            "%s already holds session %s with %d notes, more than the %d of this export, which is an "
            "older copy of the same log: there is nothing to restore, and nothing was changed. Carry on "
            "in this folder (recap shows its state), and run export to bring the export up to date"
            % (folder, meta["session_id"], existing, export.record_count))
    if common != existing:
        raise NotesError(
            "the log in %s has notes the export lacks, or differs from it; nothing was "
            "changed. Restore into an empty --dir instead" % folder)
    return existing


def common_prefix(log_records, export_records):
    """(how many records the log holds, how many of its first ones equal the export's first ones, in order)."""
    count = common = 0
    matching = True
    for record in log_records:
        count += 1
        if matching:
            matching = next(export_records, None) == record
            common += matching
    return count, common


def restore_cut_short(folder, session, export):
    """Whether the folder holds what this restore leaves when cut short: a log of the export's first notes, no meta."""
    log_path = os.path.join(folder, LOG_NAME)
    for name in (META_NAME, LOG_NAME, LOCK_NAME):
        if os.path.islink(os.path.join(folder, name)):
            return False  # refused by check_session_folder
    if read_meta(folder) is not None or log_size(log_path) == 0:
        return False
    reader = LogReader(folder, {"session_id": session["session_id"]})
    existing, common = common_prefix(reader.records(), export.records(verify=False))
    return reader.problem_count == 0 and common == existing


def record_chunks(records):
    """The records as log lines, joined into chunks of about EXPORT_READ_BLOCK bytes.

    One write per chunk rather than per line (map(record_line, records) is
    the plain form): a million records are a million write calls otherwise."""
    lines, length = [], 0
    for record in records:
        lines.append(record_line(record))
        length += len(lines[-1])
        if length >= EXPORT_READ_BLOCK:
            yield b"".join(lines)
            lines, length = [], 0
    if lines:
        yield b"".join(lines)


def write_restored_session(folder, session, records):
    """Write the export's log, then its meta last, so that a restore cut short leaves no session to fork."""
    meta = read_meta(folder)
    if meta is not None and meta["session_id"] != session["session_id"]:
        # Crash window: the meta of a session without notes goes first; cut
        # short here, the folder holds no session, and the same restore run
        # again starts afresh.
        os.unlink(os.path.join(folder, META_NAME))
        fsync_folder(folder)
    # Crash window: the log holds the export's notes and the meta is not
    # written yet.  Writers refuse a log without its meta, so no append can
    # start a fork of the session; the same restore run again finds its own
    # notes there and writes the meta.  (records comes from Export.records,
    # which refuses at its end if the export changed: the temporary file is
    # then removed and the log left as it was.)
    write_file_atomically(os.path.join(folder, LOG_NAME), record_chunks(records))
    write_meta(folder, session["session_id"], session.get("created_at") or utc_now())


def command_restore(args) -> dict:
    export_path = os.path.abspath(os.path.expanduser(args.export_file))
    export = load_export(export_path, args.accept_damaged)
    try:
        return restore_export(resolve_folder(args.dir), export)
    finally:
        export.close()


def restore_export(folder, export):
    """Bring the checked export into folder: a whole new log, or the notes it lacks; return the receipt."""
    session, log_path = export.session, os.path.join(folder, LOG_NAME)
    # Refusals come before the lock, so that they leave the folder untouched;
    # the same check runs again under the lock, where it counts.
    notes_kept_by_restore(folder, session, export)
    recovered = None
    with SessionLock(folder):
        kept = notes_kept_by_restore(folder, session, export)
        if kept is None:
            write_restored_session(folder, session, export.records())
            restored = export.record_count
        else:
            recovered = mend_log_tail(folder)
            restored = export.record_count - kept
            if restored:
                records = export.records()
                for _ in range(kept):
                    next(records)
                descriptor = open_log_for_append(log_path)
                try:
                    append_chunks(descriptor, record_chunks(records))
                finally:
                    os.close(descriptor)
    receipt = {"ok": True, "command": "restore", "session_id": session["session_id"],
               "record_count": export.record_count, "restored": restored, "path": log_path}
    # With --accept-damaged: what was restored as it is, record by record; then the notices.
    with_warnings(receipt, problem_messages(export.problems, export.problem_count) + export.notices)
    return with_recovered(receipt, recovered)


def mend_log_tail(folder):
    """Under the lock, before restore adds notes: mend the end of the log a crash left, as append does."""
    descriptor = open_log_for_append(os.path.join(folder, LOG_NAME))
    try:
        with open(descriptor, "rb", closefd=False) as handle:
            tail = LogTail(handle, os.fstat(descriptor).st_size)
        return recover_tail(folder, descriptor, tail)
    finally:
        os.close(descriptor)


# --------------------------------------------------------------------------
# redact: the one audited rewrite of a complete line (SPEC section 5)
#
# A note's text and effect are replaced by REDACTED_TEXT; every other field
# stays, the checksum is taken anew, and a later source note records which
# note was redacted and why (about = its id, text "Redacted <id>: <reason>").
# verify accepts a placeholder only with such a note after it.

REDACTED_TEXT = "[redacted]"
REDACTION_PREFIX = "Redacted "
REDACT_REASON_LIMIT = TEXT_LIMIT - len(REDACTION_PREFIX) - NOTE_ID_LIMIT - 2  # the source note's text fits
REDACT_NOT_ERASED = (
    "redact rewrote the log only: an export made before it, side files of torn tails "
    "(session_notes.jsonl.torn-*), and any copy, backup or hard link of the log still hold the old text; "
    "delete them, and export again")


def redact_reason(reason) -> str:
    """The reason of a redaction, read from standard input for "-", with append's checks on a text."""
    reason = value_from_stdin(reason, None, names=("reason", "effect"))[0]
    if reason is None or not reason.strip():
        raise NotesError("--reason is empty; say why the note is redacted (not what it held), for example "
                         "--reason 'It held a private phone number.' %s" % see_help("redact"))
    return clean_field("reason", reason, REDACT_REASON_LIMIT)


def is_redacted(record) -> bool:
    """Whether a record holds redact's placeholder as its text."""
    return record.get("text") == REDACTED_TEXT


def is_redaction_note(record, note_id=None) -> bool:
    """Whether a record is the source note that records a redaction (of note_id, when given)."""
    return (record.get("type") == "source" and is_note_id(record.get("about"))
            and isinstance(record.get("text"), str) and record["text"].startswith(REDACTION_PREFIX)
            and (note_id is None or record["about"] == note_id))


def redacted_record(record) -> dict:
    """The record with its text and effect replaced by the placeholder, same fields in the same order."""
    redacted = dict(record)
    redacted["text"] = REDACTED_TEXT
    if "effect" in redacted:
        redacted["effect"] = REDACTED_TEXT
    redacted["checksum"] = record_checksum(redacted)
    return redacted


def find_note_line(handle, size, note_id):
    """(offset, line, record) of the usable note with this id, searched from the end; None when there is none."""
    needle = ('"id":"%s"' % note_id).encode("ascii")
    for offset, line in read_lines_backward(handle, size, count_runs=True):
        if type(line) is bytes and needle in line:  # a counted run (an int) holds no note
            value, _ = parse_line(line)
            if value is not None and value.get("id") == note_id and is_usable(check_record(value, None)):
                return offset, line, value
    return None


def redaction_after(handle, size, note_id, seq):
    """The id of a source note after seq that records the redaction of note_id, or None."""
    for _, line in read_lines_backward(handle, size, count_runs=True):
        value = parse_line(line)[0] if type(line) is bytes and line else None
        if value is None:
            continue
        if is_seq(value.get("seq")) and value["seq"] <= seq:
            return None
        if is_redaction_note(value, note_id) and is_usable(check_record(value, None)):
            return value["id"]
    return None


def rewritten_log(handle, size, offset, old_length, new_line):
    """Yield the log's bytes with the line at offset (old_length bytes, newline excluded) replaced."""
    for start, end in ((0, offset), (offset + old_length, size)):
        handle.seek(start)
        left = end - start
        while left > 0:
            block = handle.read(min(BACKWARD_BLOCK, left))
            if not block:
                raise OSError(errno.EIO, "the log is shorter than it was a moment ago")
            yield block
            left -= len(block)
        if start == 0:
            yield new_line


def command_redact(args) -> dict:
    note_id = redact_note_id(args.note_id)
    reason = redact_reason(args.reason)
    folder = resolve_folder(args.dir)
    require_session(folder)
    check_session_folder(folder)
    with SessionLock(folder):
        meta = open_session_for_writing(folder)
        return redact_note(folder, meta, note_id, reason)


def redact_note_id(value) -> str:
    """redact's NOTE_ID, stripped and checked to be a note id (its value is never echoed)."""
    value = (value or "").strip()
    if not is_note_id(value):
        raise NotesError("redact takes a note id such as n00012; tail or recap lists them %s" % see_help("redact"))
    return value


def redact_note(folder, meta, note_id, reason) -> dict:
    """Under the lock: rewrite the note's line with the placeholder, then append the source note that says why.

    The line is replaced through write_file_atomically: the whole log is
    copied, block by block, to a temporary file with the one line changed,
    fsynced and renamed over the log, so every other byte stays as it was.
    Crash windows: before the rename the log is untouched (the temporary file
    holds only the redacted copy and is removed once stale); after it and
    before the source note is appended, verify reports the placeholder as
    unexplained, and redact run again on the note appends the note only."""
    log_path = os.path.join(folder, LOG_NAME)
    signal = clean_signal("source", "%s%s: %s" % (REDACTION_PREFIX, note_id, reason), None, None, None, None,
                          None, note_id, None)
    descriptor = open_log_for_reading(log_path)
    if descriptor is None:
        raise NotesError("redact %s: this session has no notes yet" % note_id)
    with open(descriptor, "rb") as handle:
        size = os.fstat(descriptor).st_size
        found = find_note_line(handle, size, note_id)
        if found is None:
            raise NotesError("%s names no note in this session that can be read; check the id with tail or "
                             "recap (a damaged line is reported by verify, and stays as it is)" % note_id)
        offset, line, record = found
        if is_redaction_note(record):
            raise NotesError("%s records a redaction, which stays so that verify can account for it; nothing "
                             "was changed" % note_id)
        if is_redacted(record):
            earlier = redaction_after(handle, size, note_id, record["seq"])
            if earlier is not None:
                raise NotesError("%s is redacted already (%s says why); nothing was changed" % (note_id, earlier))
        else:
            new_line = record_line(redacted_record(record))[:-1]
            write_file_atomically(log_path, rewritten_log(handle, size, offset, len(line), new_line))
    appended = append_signal(folder, meta, signal)
    receipt = {"ok": True, "command": "redact", "note_id": note_id, "seq": record["seq"],
               "redaction_note_id": appended["note_id"], "path": log_path, "not_erased": REDACT_NOT_ERASED}
    still = files_that_may_hold_old_text(folder)
    if still:
        receipt["may_still_hold"] = still
    return with_recovered(receipt, appended.get("recovered"))


def files_that_may_hold_old_text(folder) -> list:
    """The files of the session folder that redact does not rewrite and that may hold a note's old text."""
    torn_prefix = LOG_NAME + ".torn-"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names
            if name in (EXPORT_NAME, EXPORT_MARKDOWN_NAME) or name.startswith(torn_prefix)]


class RedactionsSeen:
    """For a forward reader: how many redacted notes it met, and those no later source note explains yet.

    Only the ids and line numbers of redacted notes are kept: they are rare."""

    def __init__(self):
        self.count, self.pending = 0, {}

    def meet(self, record, line):
        if is_redacted(record):
            self.count += 1
            self.pending[record["id"]] = line
        elif is_redaction_note(record):
            self.pending.pop(record["about"], None)

    def problems(self) -> list:
        return [problem(line, note_id, "redaction_unexplained") for note_id, line in self.pending.items()]


# --------------------------------------------------------------------------
# The MCP adapter over those same functions
#
# `notes.py mcp` answers newline-delimited JSON-RPC 2.0 on stdin and stdout.
# A tool call is turned into the argument list a user would type, parsed as
# the command line parses it (parse_arguments) and run by the same command
# function, so every check, lock and receipt is the command line's.  Nothing
# is held between calls: each call takes and releases the session lock as
# one CLI run does.

MCP_HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# The stateless revision: no handshake, the version rides in each request's _meta.
MCP_STATELESS_VERSIONS = ("2026-07-28",)
MCP_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
MCP_SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
MCP_SERVER_INFO = {"name": "shaping-notes", "title": "notes.py", "version": __version__}
# Results a stateless client may cache: the tools and contracts do not change
# while a server runs, and hold nothing private to one user.
MCP_CACHEABLE = ("server/discover", "tools/list", "resources/list", "resources/read")
MCP_CACHE_TTL_MS = 300000

RPC_PARSE_ERROR, RPC_INVALID_REQUEST, RPC_METHOD_NOT_FOUND, RPC_INVALID_PARAMS, RPC_INTERNAL_ERROR = (
    -32700, -32600, -32601, -32602, -32603)
RPC_UNSUPPORTED_VERSION = -32022  # the stateless revision's answer to a version it does not know

MCP_INSTRUCTIONS = (
    "This server keeps the memory log of a Memory-Assisted Shaping session.\n"
    "Call append when losing a fact would hurt continuity: a decision the operator confirmed, a gate "
    "opened, deferred or closed, a discarded path likely to return, a change of source of truth, an "
    "artifact boundary, an approved move to synthesis. Never for cosmetics, naming or ordinary talk.\n"
    "Do not read the log every turn: call recap (then tail) only when the operator asks for a recap or "
    "an export, on re-entry, or before synthesis.\n"
    "Read the note-io.md and protocol.md resources before the first append: they are the full contract.\n"
    "A result with isError true saved nothing: read its error, fix the arguments if the fix keeps the "
    "meaning, else tell the operator the note was not saved.")

# The contracts offered as resources when they sit beside notes.py: (file, description).
MCP_CONTRACTS = (
    ("protocol.md", "The behaviour contract: operating states, gates, when a memory signal is due."),
    ("note-io.md", "The I/O contract: the payload, the receipt, readback, what to say on failure."))

MCP_READER_HINTS = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                    "openWorldHint": False}
# Each tool runs the command of its name, through COMMAND_FUNCTIONS as main
# does.  Here: the options of that command it takes (destinations in
# COMMANDS), those its schema marks required (append's are checked by
# clean_signal, not argparse, so COMMANDS does not say), and its annotations.
# An identical append retried at once is answered as a duplicate, hence
# idempotent; an export may replace the file at its output path, hence
# destructive.
MCP_TOOLS = {
    "append": (SIGNAL_FIELDS, ("type", "text"),
               {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                "openWorldHint": False}),
    "recap": (("limit", "max_bytes"), (), MCP_READER_HINTS),
    "tail": (("limit", "types", "since", "until", "grep"), (), MCP_READER_HINTS),
    "show": (("note_id",), ("note_id",), MCP_READER_HINTS),
    "summary": ((), (), MCP_READER_HINTS),
    "verify": ((), (), MCP_READER_HINTS),
    "export": (("output", "format"), (), {"readOnlyHint": False, "destructiveHint": True,
                                          "idempotentHint": True, "openWorldHint": False}),
}

# Served only by `mcp --allow-redact` (command_mcp adds it to MCP_TOOLS for the
# server's lifetime): a tool call may come from a prompt injected into a
# document, and redact rewrites the log, so the operator opts in.
MCP_REDACT_TOOL = (("note_id", "reason"), ("note_id", "reason"),
                   {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                    "openWorldHint": False})


class ProtocolError(Exception):
    """A JSON-RPC error: the request itself is wrong, not the note it carries."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def mcp_options(command):
    """The options of a command its tool takes: destination -> (flag, help, argparse settings)."""
    taken, _, _ = MCP_TOOLS[command]
    return {destination: (flag, help_text, extra) for flag, destination, _, help_text, extra
            in COMMANDS[command][1] if destination in taken}


def mcp_tool_listing(command):
    """A tool as tools/list shows it; the schema comes from the options COMMANDS declares.

    An option the command line does not declare is left out of the schema, so
    a tool never offers what the parser would refuse."""
    _, marked_required, hints = MCP_TOOLS[command]
    properties, required = {}, []
    for destination, (_, help_text, extra) in mcp_options(command).items():
        schema = {"type": "integer" if extra.get("type") is int else "string"}
        if "choices" in extra:
            schema["enum"] = list(extra["choices"])
        if extra.get("action") == "append":
            schema = {"type": "array", "items": schema}
        schema["description"] = help_text
        if extra.get("default") is not None:
            schema["default"] = extra["default"]
        properties[destination] = schema
        if extra.get("required") or destination in marked_required:
            required.append(destination)
    input_schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        input_schema["required"] = required
    return {"name": command, "title": command.capitalize(), "description": COMMANDS[command][0],
            "inputSchema": input_schema, "annotations": hints}


def mcp_command_line(folder, command, arguments):
    """The argument list a user would type for this tool call.

    Every value goes as --flag=value, so a text that starts with a dash stays
    a value.  Arguments no flag could carry are refused here, in the CLI's tone."""
    options = mcp_options(command)
    argv = ([] if folder is None else ["--dir=" + folder]) + [command]
    positional = []  # show's note_id: after "--", so that no value can pass for an option
    for name, value in arguments.items():
        if name not in options:
            raise NotesError("%s takes no argument %r; its arguments are: %s"
                             % (command, name, ", ".join(options) or "none"))
        if value is None:
            continue
        if value == "-" and name in ("text", "effect", "reason"):
            # On the command line "-" reads standard input, which here carries the protocol itself.
            raise NotesError("%s over MCP takes the %s itself: \"-\" (read it from standard input) is "
                             "for the command line only" % (command, name))
        flag, _, extra = options[name]
        many = extra.get("action") == "append"
        kind = "an integer" if extra.get("type") is int else "a string"
        for item in value if many and isinstance(value, list) else [value]:
            if kind == "an integer" and isinstance(item, int) and not isinstance(item, bool):
                item = str(item)
            if not isinstance(item, str):
                raise NotesError("argument %r of %s must be %s%s" % (
                    name, command, "a list of strings or " if many else "", kind))
            if flag.startswith("-"):
                argv.append(flag + "=" + item)
            else:
                positional.append(item)
    return argv + (["--"] + positional if positional else [])


def mcp_export_path(folder, output):
    """The file inside the session folder that an MCP client's export output names.

    Whoever writes the tool call may be a prompt injected into a document the
    model read, so the server writes nowhere the operator did not point it:
    the path is taken relative to the session folder, and one that is
    absolute, climbs with .., or passes through a link that leads out of the
    folder is refused.  The real parent folder is compared, not the string.
    (Between this check and the write, another process of the same user
    could swap a folder for a link; that user could write the file anyway.)"""
    way_out = ("; give a file name inside the session folder, such as %s (it is written to %s)"
               % (EXPORT_NAME, os.path.join(folder, EXPORT_NAME)))
    if os.path.isabs(output) or output.startswith("~") or os.path.splitdrive(output)[0]:
        raise NotesError("export over MCP writes only inside the session folder: output is an absolute "
                         "path" + way_out)
    if ".." in output.replace("\\", "/").split("/"):
        raise NotesError("export over MCP writes only inside the session folder: output climbs out "
                         "with .." + way_out)
    path = os.path.join(folder, output)
    real_folder = os.path.realpath(folder)
    real_parent = os.path.realpath(os.path.dirname(path))
    if real_parent != real_folder and not real_parent.startswith(real_folder.rstrip(os.sep) + os.sep):
        raise NotesError("export over MCP writes only inside the session folder: output passes through "
                         "a link that leads out of it" + way_out)
    if os.path.islink(path):
        raise NotesError("export over MCP writes only inside the session folder: output is a link"
                         + way_out)
    return path


def mcp_call_tool(folder, params):
    """Run one tool as the CLI would run its command; a refusal is a result with isError."""
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or name not in MCP_TOOLS:
        raise ProtocolError(RPC_INVALID_PARAMS, "Unknown tool: %s; the tools are: %s"
                            % (compact_json(name), ", ".join(MCP_TOOLS)))
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ProtocolError(RPC_INVALID_PARAMS, "arguments of tools/call must be an object")
    try:
        if name == "export" and isinstance(arguments.get("output"), str) and arguments["output"]:
            arguments = dict(arguments, output=mcp_export_path(resolve_folder(folder), arguments["output"]))
        args = parse_arguments(mcp_command_line(folder, name, arguments))
        receipt = COMMAND_FUNCTIONS[name](args)
        failed = False
    except Exception as error:  # noqa: BLE001 - a NotesError too: as main reports it, and the server goes on
        receipt, failed = error_receipt(error), True
    # A verify that finds problems ran fine: its receipt says ok false, as the CLI's does.
    return {"content": [{"type": "text", "text": printed_form(receipt)}], "structuredContent": receipt,
            "isError": failed}


# Where pip puts the contracts of an installed copy, below the install's prefix
# (data-files in pyproject.toml): a wheel of one module carries no package
# data.  Not share/shaping-notes: under pip --user that is ~/.local/share/
# shaping-notes, the user data folder that holds the notes themselves.
INSTALLED_CONTRACTS_FOLDER = "share/doc/shaping-notes/"


def installed_contract_paths() -> dict:
    """file name -> path of the contracts installed with this very copy of notes.py; {} when none.

    The installer's record lists every file it wrote: the contracts count
    only when the same record holds this notes.py, so another version
    installed elsewhere on sys.path is never served."""
    import importlib.metadata  # here, not at the top: only a server with no contracts beside it pays for it

    try:
        files = importlib.metadata.distribution(CONSOLE_COMMAND).files or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    this_file = os.path.realpath(__file__)
    if not any(file.name == "notes.py" and os.path.realpath(str(file.locate())) == this_file for file in files):
        return {}
    return {file.name: os.path.realpath(str(file.locate())) for file in files
            if str(file).replace("\\", "/").endswith(INSTALLED_CONTRACTS_FOLDER + file.name)}


def mcp_contracts():
    """(uri, path, file name, description) of each contract: beside notes.py, else installed with it."""
    import pathlib

    here = os.path.dirname(os.path.realpath(__file__))
    installed = None
    found = []
    for name, description in MCP_CONTRACTS:
        path = os.path.join(here, name)
        if not os.path.isfile(path) and is_installed_package_folder(here):
            if installed is None:
                installed = installed_contract_paths()
            path = installed.get(name, path)
        if os.path.isfile(path):
            found.append((pathlib.Path(path).as_uri(), path, name, description))
    return found


def mcp_read_resource(params):
    """The text of one contract, named by the uri resources/list gave."""
    for uri, path, _, _ in mcp_contracts():
        if uri == params.get("uri"):
            try:
                with open(path, "rb") as handle:
                    text = handle.read().decode("utf-8", "replace")
            except OSError as error:
                raise ProtocolError(RPC_INTERNAL_ERROR,
                                    "cannot read %s (%s)" % (path, error.strerror)) from None
            return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}
    raise ProtocolError(RPC_INVALID_PARAMS, "Unknown resource: %s" % compact_json(params.get("uri")))


def mcp_capabilities():
    capabilities = {"tools": {}}
    if mcp_contracts():
        capabilities["resources"] = {}
    return capabilities


def mcp_result(folder, method, params):
    """The result of one request, whatever the revision (the caller adds the stateless fields)."""
    if method == "initialize":
        requested = params.get("protocolVersion")
        if requested not in MCP_HANDSHAKE_VERSIONS:
            requested = MCP_HANDSHAKE_VERSIONS[-1]  # the newest we speak; the client may then leave
        return {"protocolVersion": requested,
                "capabilities": mcp_capabilities(), "serverInfo": MCP_SERVER_INFO,
                "instructions": MCP_INSTRUCTIONS}
    if method == "server/discover":
        return {"supportedVersions": list(MCP_STATELESS_VERSIONS), "capabilities": mcp_capabilities(),
                "instructions": MCP_INSTRUCTIONS}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [mcp_tool_listing(name) for name in MCP_TOOLS]}
    if method == "tools/call":
        return mcp_call_tool(folder, params)
    if method == "resources/list":
        return {"resources": [{"uri": uri, "name": name, "title": name, "description": description,
                               "mimeType": "text/markdown"} for uri, _, name, description in mcp_contracts()]}
    if method == "resources/read":
        return mcp_read_resource(params)
    raise ProtocolError(RPC_METHOD_NOT_FOUND, "Method not found: %s" % method)


def mcp_stateless_version(method, params):
    """The stateless revision a request speaks (None: the handshake's); refuse one we do not serve."""
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    # initialize belongs to the handshake even when a client stamps _meta on it.
    if method == "initialize" or (MCP_VERSION_KEY not in meta and method != "server/discover"):
        return None
    version = meta.get(MCP_VERSION_KEY, MCP_STATELESS_VERSIONS[-1])
    if not isinstance(version, str):
        raise ProtocolError(RPC_INVALID_PARAMS, "the protocol version in _meta must be a string")
    if version not in MCP_STATELESS_VERSIONS:
        # The handshake versions are reached through initialize, never through _meta.
        raise ProtocolError(RPC_UNSUPPORTED_VERSION, "Unsupported protocol version",
                            {"supported": list(MCP_STATELESS_VERSIONS), "requested": version})
    return version


def mcp_answer(folder, message):
    """The response to one JSON-RPC message; None for a notification or a client's response."""
    if not isinstance(message, dict):
        return mcp_error(None, RPC_INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    request_id = message.get("id")
    has_id = "id" in message
    if not (isinstance(request_id, (str, int)) and not isinstance(request_id, bool)):
        request_id = None  # MCP ids are strings or integers, never null
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response: this server sends no requests, so nothing waits for one
    method, params = message.get("method"), message.get("params")
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str) or (has_id and request_id is None):
        return mcp_error(request_id, RPC_INVALID_REQUEST, 'Invalid Request: expected "jsonrpc": "2.0", '
                         'a string "method" and a string or integer "id"')
    if not has_id:
        return None  # a notification (initialized, cancelled...): nothing to answer
    try:
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ProtocolError(RPC_INVALID_PARAMS, "params must be an object")
        stateless = mcp_stateless_version(method, params)
        result = mcp_result(folder, method, params)
    except ProtocolError as error:
        return mcp_error(request_id, error.code, error.message, error.data)
    except Exception as error:  # noqa: BLE001 - a fault in one answer must not end the server
        return mcp_error(request_id, RPC_INTERNAL_ERROR,
                         "Internal error: %s: %s" % (type(error).__name__, error))
    if stateless:
        result["resultType"] = "complete"
        if method in MCP_CACHEABLE:
            result.update(ttlMs=MCP_CACHE_TTL_MS, cacheScope="public")
        result["_meta"] = {MCP_SERVER_INFO_KEY: MCP_SERVER_INFO}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def mcp_error(request_id, code, message, data=None):
    """A JSON-RPC error response; also said on stderr, where a host keeps its server's log."""
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    mcp_log("error %d: %s" % (code, message))
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def mcp_log(message):
    try:
        sys.stderr.write("notes.py mcp: %s\n" % message)
        sys.stderr.flush()
    except (OSError, ValueError):  # no one reads stderr any more: the log is only a courtesy
        pass


def mcp_answer_line(folder, line):
    """The response to one line of input: a message, a batch, or bytes that are not JSON."""
    try:
        message = parse_json(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is a ValueError too
        return mcp_error(None, RPC_PARSE_ERROR, "Parse error: the line is not JSON in UTF-8")
    if not isinstance(message, list):
        return mcp_answer(folder, message)
    if not message:
        return mcp_error(None, RPC_INVALID_REQUEST, "Invalid Request: an empty batch")
    # A batch (the 2025-03-26 revision has them): one array of the answers.
    answers = [answer for answer in (mcp_answer(folder, item) for item in message) if answer is not None]
    return answers or None


def command_mcp(args) -> None:
    """Serve MCP over stdio until the end of input; write nothing but JSON-RPC to stdout.

    The server keeps only the --dir it was given: no lock, no open file, no
    parsed state between calls.  A client that closes its end raises
    BrokenPipeError, which main handles as for any command."""
    import signal

    def stop_quietly(signum, frame):
        # Ctrl-C from the host.  A KeyboardInterrupt can surface after the read
        # loop has already ended (a read cut short by the signal returns as if
        # at end of input), where main would print an error receipt; SystemExit(0)
        # is answered by main with nothing on stdout wherever it surfaces.
        mcp_log("interrupted; stopping")
        raise SystemExit(0)

    signal.signal(signal.SIGINT, stop_quietly)
    if args.allow_redact:
        MCP_TOOLS["redact"] = MCP_REDACT_TOOL
    try:
        serve_mcp(args)
    finally:
        MCP_TOOLS.pop("redact", None)
    return None  # main prints nothing: stdout carried only JSON-RPC


def serve_mcp(args):
    """Answer each line of standard input on standard output, until the end of input."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    # A message is read up to LINE_LIMIT bytes, far above any real request,
    # so a client that never sends a newline cannot make the server hold
    # more than that; the rest of such a line is read and dropped in pieces.
    for line in iter(lambda: source.readline(LINE_LIMIT + 1), b""):
        if len(line) > LINE_LIMIT and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = source.readline(LINE_LIMIT)
            answer = mcp_error(None, RPC_INVALID_REQUEST, "Invalid Request: a message over 1 MiB")
        elif not line.strip():
            continue
        else:
            answer = mcp_answer_line(args.dir, line)
        if answer is not None:
            sink.write((compact_json(answer) + "\n").encode("utf-8", "backslashreplace"))
            sink.flush()


# --------------------------------------------------------------------------
# The parser

PROGRAM_DESCRIPTION = (
    "Append-only memory log for Memory-Assisted Shaping: stamps, numbers and checksums each "
    "memory signal, and reads the session back.")

# One entry per command: purpose, options, example.  An option is
# (flag, destination, metavar, help, extra): extra holds argparse settings.
COMMANDS = {
    "init": ("Start a session in the folder, or report the one already there.", [],
             "python3 -S notes.py init"),
    "append": ("Append one memory signal to the log and print its receipt.", [
        # --type and --text are required, but checked by clean_signal rather
        # than argparse: a misspelt option is then named as the mistake,
        # instead of hidden behind "--text is required".
        ("--type", "type", "TYPE", "the signal type (required): " + ", ".join(NOTE_TYPES),
         {"choices": NOTE_TYPES}),
        ("--text", "text", "TEXT", "what to keep (required), at most %d characters; - reads it from "
         "standard input" % TEXT_LIMIT, {}),
        ("--effect", "effect", "EFFECT", "optional consequence, at most %d characters; - reads it from "
         "standard input" % EFFECT_LIMIT, {}),
        ("--ref", "ref", "NOTE_ID", "an earlier note this one updates (a gate) or supersedes (any other type; "
         "superseding an op or shared note takes --provenance op or shared)", {}),
        ("--status", "status", "STATUS", "gate status: open, deferred or closed (gates only)",
         {"choices": GATE_STATUSES}),
        ("--provenance", "provenance", "WHO", "who the signal comes from: " + ", ".join(PROVENANCES),
         {"choices": PROVENANCES}),
        ("--evidence", "evidence", "LEVEL", "how well it is known: " + ", ".join(EVIDENCE_LEVELS),
         {"choices": EVIDENCE_LEVELS}),
        ("--about", "about", "NOTE_ID", "an earlier note this one answers, refines or comments on; both stay "
         "live (example: --about n00004)", {}),
        ("--by", "by", "NOTE_ID", "on a gate update: the earlier note that settles the gate, not a gate "
         "(example: --ref n00002 --status closed --by n00005)", {}),
    ], 'python3 -S notes.py append --type decision --text "The log stays append-only."'),
    "tail": ("Print the last records, oldest first, optionally filtered.", [
        ("--limit", "limit", "N", "how many records to print (default %d)" % TAIL_DEFAULT_LIMIT,
         {"type": int, "default": TAIL_DEFAULT_LIMIT}),
        ("--type", "types", "TYPE", "keep only this type; repeat for several",
         {"action": "append", "choices": NOTE_TYPES}),
        ("--since", "since", "TS", "keep records at or after TS (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, UTC)", {}),
        ("--until", "until", "TS", "keep records before TS (same forms)", {}),
        ("--grep", "grep", "TEXT", "keep records whose text or effect holds TEXT, whatever the case "
         "(example: --grep 'email')", {}),
    ], "python3 -S notes.py tail --limit 3 --type gate"),
    "show": ("Print one note and its chain: what it replaced, what replaced it, a gate's updates and the notes "
             "that settled them, the notes about it.", [
        ("note_id", "note_id", "NOTE_ID", "the note to look up, such as n00003", {}),
    ], "python3 -S notes.py show n00003"),
    "summary": ("Print the number of records by type and the last note.", [],
                "python3 -S notes.py summary"),
    "recap": ("Print the state of the idea: open and deferred gates, unconfirmed notes, live decisions, "
              "discards and more, within a size budget.", [
        ("--limit", "limit", "N", "items kept per list, newest first (default %d)" % RECAP_DEFAULT_LIMIT,
         {"type": int, "default": RECAP_DEFAULT_LIMIT}),
        ("--format", "format", "FORMAT", "json (default) or md", {"choices": ("json", "md"), "default": "json"}),
        ("--max-bytes", "max_bytes", "N", "print at most N bytes, leaving out the oldest entries that can go "
         "(default %d)" % RECAP_DEFAULT_MAX_BYTES, {"type": int, "default": RECAP_DEFAULT_MAX_BYTES}),
    ], "python3 -S notes.py recap --format md"),
    "verify": ("Check the meta and every line of the log; exit 3 when problems are found.", [],
               "python3 -S notes.py verify"),
    "export": ("Write the whole session to one file (JSON by default, or a markdown audit document).", [
        ("--output", "output", "PATH", "where to write (default %s, or %s with --format md, in the session folder)"
         % (EXPORT_NAME, EXPORT_MARKDOWN_NAME), {}),
        ("--format", "format", "FORMAT", "json (default) or md", {"choices": ("json", "md"), "default": "json"}),
    ], "python3 -S notes.py export --output /mnt/data/session_export.json"),
    "restore": ("Bring a session back into the folder from a session_export.json.", [
        ("export_file", "export_file", "EXPORT_FILE", "the export to restore (ours or v0's)", {}),
        ("--accept-damaged", "accept_damaged", None,
         "restore a damaged export anyway: every record exactly as the export holds it, nothing "
         "repaired or dropped (verify then reports the same problems)",
         {"action": "store_const", "const": True, "default": False}),
    ], "python3 -S notes.py --dir /mnt/data/shaping restore /mnt/data/session_export.json"),
    "redact": ("Replace one note's text and effect with %s in place, and append a source note that says "
               "which note was redacted and why. Earlier exports and side files keep the old text." % REDACTED_TEXT, [
        ("note_id", "note_id", "NOTE_ID", "the note to redact, such as n00004", {}),
        ("--reason", "reason", "TEXT", "why it is redacted (required; never the secret itself), at most %d "
         "characters; - reads it from standard input" % REDACT_REASON_LIMIT, {}),
    ], "python3 -S notes.py redact n00004 --reason 'It held a private phone number.'"),
    "mcp": ("Serve append, recap, tail, show, summary, verify and export as MCP tools over stdio, until the end "
            "of input.", [
        ("--allow-redact", "allow_redact", None, "serve redact as a tool as well (it rewrites a note; off "
         "unless given)", {"action": "store_const", "const": True, "default": False}),
    ], "python3 -S notes.py --dir /home/you/shaping mcp"),
}
# The data folder is named as this user's, so the help says where an installed
# copy's notes are (%% doubled: argparse formats help texts).
DIR_HELP = ("session folder (default: $%s, else the folder that holds notes.py, or %s when notes.py is "
            "installed as a package)" % (DIR_VARIABLE, user_data_folder().replace("%", "%%")))


# Options people reach for by habit, and the option that does that job here.
HABITUAL_OPTIONS = {"-n": "--limit", "--lines": "--limit", "--count": "--limit", "-t": "--type",
                    "-m": "--text", "--message": "--text", "--note": "--text", "-o": "--output"}


def closest(word, choices):
    """The choice nearest to a misspelt word, or None."""
    import difflib  # only a mistake needs it

    matches = difflib.get_close_matches(word.lower(), [choice.lower() for choice in choices], n=1)
    return next((choice for choice in choices if matches and choice.lower() == matches[0]), None)


def see_help(command=None):
    """Where the help of the command that was used lives."""
    return "(see: %s %s--help)" % (invoked_as(), command + " " if command else "")


def one_of(name, allowed):
    """An argparse type that takes only the allowed words, and suggests the nearest for a typo."""
    import argparse

    def check(value):
        if value in allowed:
            return value
        guess = closest(value, allowed)
        raise argparse.ArgumentTypeError("unknown %s %r; %suse one of: %s" % (
            name, value, "did you mean %s? " % guess if guess else "", ", ".join(allowed)))
    return check


def build_parser():
    """The one argument parser: every command, its options, help texts and usage errors."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            command = self.prog.split(" ", 1)[1] if " " in self.prog else None
            if command is None and "invalid choice: " in message:
                word = message.split("invalid choice: ", 1)[1].split(" (choose", 1)[0].strip("'\"")
                guess = closest(word, list(COMMANDS))
                message = "unknown command %r; %scommands: %s" % (
                    word, "did you mean %s? " % guess if guess else "", ", ".join(COMMANDS))
            raise NotesError("%s %s" % (message, see_help(command)))

    program = invoked_as()
    parser = Parser(prog=CONSOLE_COMMAND if program == CONSOLE_COMMAND else "notes.py",
                    description=PROGRAM_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog="example:\n  %s append --type gate --text \"Host runtime is undecided.\"\n\n"
                           "run '%s COMMAND --help' for a command's options" % (program, program))
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    parser.add_argument("--dir", help=DIR_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, (purpose, options, example) in COMMANDS.items():
        sub = commands.add_parser(name, help=purpose, description=purpose,
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="example:\n  " + example.replace(SCRIPT_COMMAND, program, 1))
        sub.add_argument("--dir", default=argparse.SUPPRESS, help=DIR_HELP)
        for flag, destination, metavar, help_text, extra in options:
            settings = dict(extra)
            if "choices" in settings:
                settings["type"] = one_of(flag.lstrip("-"), settings.pop("choices"))
            if flag.startswith("-"):
                sub.add_argument(flag, dest=destination, metavar=metavar, help=help_text, **settings)
            else:
                sub.add_argument(destination, metavar=metavar, help=help_text, **settings)
    return parser




def parse_arguments(argv):
    """Parse argv with the one parser; name an unknown option as the mistake it is."""
    arguments, unknown = build_parser().parse_known_args(argv)
    if unknown:
        word = unknown[0]
        if not word.startswith("-"):
            raise NotesError("unexpected argument %r after %s; put quotes around a text that holds "
                             "spaces %s" % (word, arguments.command, see_help(arguments.command)))
        flag = word.split("=", 1)[0]
        flags = ["--dir"] + [option[0] for option in COMMANDS[arguments.command][1] if option[0].startswith("-")]
        guess = HABITUAL_OPTIONS.get(flag) if HABITUAL_OPTIONS.get(flag) in flags else closest(flag, flags)
        raise NotesError("%s has no option %s; %s%s" % (
            arguments.command, flag, "use %s instead " % guess if guess else "", see_help(arguments.command)))
    if arguments.dir is not None and not arguments.dir.strip():
        raise NotesError("--dir is empty; pass the session folder, for example --dir /mnt/data/shaping")
    return arguments


COMMAND_FUNCTIONS = {
    "init": command_init,
    "append": command_append,
    "tail": command_tail,
    "show": command_show,
    "summary": command_summary,
    "recap": command_recap,
    "verify": command_verify,
    "export": command_export,
    "restore": command_restore,
    "redact": command_redact,
    "mcp": command_mcp,
}


# --------------------------------------------------------------------------
# The entry point: the only place that prints

def silence_stdout():
    """Point stdout at the null device once it cannot be written to.

    Python flushes stdout again at exit; without this, that flush would fail
    a second time and print "Exception ignored" with exit code 120."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def print_result(result):
    """Print a receipt (a dict) or a text, as UTF-8 whatever the locale."""
    if sys.stdout is None:  # started with stdout closed (notes.py ... >&-): no one to tell
        return
    if result is None:  # argparse wrote help or the version, or mcp wrote JSON-RPC: make sure it got out
        sys.stdout.flush()
        return
    text = printed_form(result)
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a replaced stdout, such as a test's capture
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        stream.write(text.encode("utf-8", "backslashreplace"))
    sys.stdout.flush()


def error_receipt(error):
    """The receipt of a command stopped by an exception: a refusal's message and details, or the unexpected."""
    if isinstance(error, NotesError):
        return {"ok": False, "error": error.message, **error.details}
    return {"ok": False, "error": "unexpected error: %s: %s" % (type(error).__name__, error)}


def run_command(argv):
    """Parse and run one command: (what to print or None, exit code)."""
    try:
        arguments = parse_arguments(argv)
        result = COMMAND_FUNCTIONS[arguments.command](arguments)
        ok = not (isinstance(result, dict) and result.get("ok") is False)
        return result, EXIT_OK if ok else EXIT_INTEGRITY
    except SystemExit as request:  # --help or --version, printed by argparse
        return None, request.code or 0
    except NotesError as error:
        return error_receipt(error), error.exit_code
    except KeyboardInterrupt:
        return {"ok": False, "error": "interrupted"}, EXIT_UNEXPECTED
    except BrokenPipeError:
        raise  # argparse printing help to a reader that has gone: main handles it
    except Exception as error:  # noqa: BLE001 - no traceback ever reaches the user
        return error_receipt(error), EXIT_UNEXPECTED


def main(argv=None) -> int:
    """Run one command; print its receipt or error as JSON; return the exit code."""
    code = EXIT_OK
    try:
        result, code = run_command(sys.argv[1:] if argv is None else argv)
        print_result(result)
    except BrokenPipeError:
        # The reader has gone (notes.py ... | head -c 0): the command has run
        # and its files are safe; there is no one left to tell.
        silence_stdout()
    except OSError as error:  # stdout on a full disk, say: the result is lost, so say that where we can
        silence_stdout()
        try:
            sys.stderr.write(compact_json({"ok": False, "error": "cannot print the result (%s)"
                                                                 % error.strerror}) + "\n")
            sys.stderr.flush()
        except (OSError, AttributeError):
            pass
        return EXIT_UNEXPECTED
    return code


if __name__ == "__main__":
    sys.exit(main())
