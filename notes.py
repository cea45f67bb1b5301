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
  * rewrite, reorder or drop a note already in the log;
  * write through a symbolic link, or into a folder it was not pointed at;
  * store credentials, control characters, or text beyond the size of a
    minimal signal: the log is plain text that gets uploaded and shared;
  * write anything at all when only asked to read.

The formats are those of the public v0 tool, byte for byte; a log written
here stays readable by v0.  Standard library only; runs under ``python3 -S``
on CPython 3.9 to 3.13.
"""

from __future__ import annotations

import errno
import os
import sys
import time

# The C halves of the json module.  Importing ``json`` itself pulls in ``re``
# and ``enum``, which costs more than everything else append does; these are
# the very functions json.loads and json.dumps end up calling.
from _json import encode_basestring, make_encoder, make_scanner

try:  # the built-in SHA-256 loads faster than OpenSSL's through hashlib
    from _sha2 import sha256  # CPython 3.12 and later
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.9 to 3.11
    except ImportError:
        from hashlib import sha256

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

NOTE_TYPES = ("mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact")
GATE_STATUSES = ("open", "deferred", "closed")
# Lists of the recap, by the note type each one gathers.
RECAP_LISTS = (("decision", "decisions"), ("discard", "discards"), ("tension", "tensions"),
               ("source", "sources"), ("artifact", "artifacts"))

TEXT_LIMIT = 2000
EFFECT_LIMIT = 1000
TAIL_DEFAULT_LIMIT = 5
RECAP_DEFAULT_LIMIT = 20
WARNINGS_LISTED = 20      # readers name this many problems, then count the rest
PROBLEMS_LISTED = 100     # verify names this many problems, then counts the rest
BACKWARD_BLOCK = 65536    # bytes read at a time when reading the log from its end
LOCK_WAIT_SECONDS = 30.0  # only used where there is no blocking lock (Windows)

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_INTEGRITY = 3

# O_NOFOLLOW makes open() fail on a symbolic link instead of following it.
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
BINARY = getattr(os, "O_BINARY", 0)

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

# The highest seq: the largest integer every JSON reader holds exactly.  A seq
# above it is damage, not a count of notes.
SEQ_LIMIT = 2 ** 53 - 1
SESSION_ID_LIMIT = 100    # characters of a session id (v0 writes a 36-character UUID)
DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")  # ASCII digits only
HEX_DIGITS = frozenset("0123456789abcdef")

# (kind of credential, substrings one of which it must contain, pattern).
# The substrings are a cheap first look so that ``re`` is only imported when
# a text could hold a credential at all; they are few and shared (verify looks
# at every record), and "_" is rare in prose.
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

def finite_float(text: str) -> float:
    """A JSON number as a float; refuse one too big for a float (1e999), which would become infinity."""
    value = float(text)
    if value - value != 0:  # inf - inf is nan, and nan differs from everything
        raise ValueError("a number too big for a float")
    return value


class _DecoderSettings:
    """The attributes _json.make_scanner reads, as json.JSONDecoder has them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = staticmethod(finite_float)
    parse_int = int
    # NaN, Infinity and -Infinity are not JSON: int() refuses each with ValueError.
    parse_constant = int


def _refuse_unserialisable(value):
    raise TypeError("cannot store a %s as JSON" % type(value).__name__)


_scan_value = make_scanner(_DecoderSettings())
_encode_compact = make_encoder(None, _refuse_unserialisable, encode_basestring, None,
                               ":", ",", False, False, False)
_encode_canonical = make_encoder(None, _refuse_unserialisable, encode_basestring, None,
                                 ":", ",", True, False, False)
_JSON_SPACE = " \t\n\r"


def parse_json(text: str):
    """Parse one JSON document, as json.loads does; raise ValueError if it is not one.

    Stricter than json.loads: NaN and Infinity are refused, so is a number too
    big for a float (1e999 would become infinity, which no JSON writer may
    write back), and nesting too deep to parse is a ValueError, not a
    RecursionError."""
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        value, end = _scan_value(text, start)
    except (StopIteration, SystemError):
        # On 3.10 and 3.11 the C scanner reports some errors as SystemError
        # unless json.decoder happens to be imported already: all mean "not JSON".
        raise ValueError("not JSON") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if text[end:].strip(_JSON_SPACE):
        raise ValueError("extra data after the JSON value")
    return value


def compact_json(value) -> str:
    """Serialise as json.dumps(value, separators=(",", ":"), ensure_ascii=False)."""
    return "".join(_encode_compact(value, 0))


def canonical_json(value) -> str:
    """Serialise compactly with sorted keys: the form the checksum is taken of."""
    return "".join(_encode_canonical(value, 0))


def pretty_json(value, depth: int = 0) -> str:
    """Serialise as json.dumps(value, indent=2, ensure_ascii=False)."""
    if isinstance(value, dict) and value:
        brackets, items = "{}", [encode_basestring(key) + ": " + pretty_json(item, depth + 1)
                                 for key, item in value.items()]
    elif isinstance(value, (list, tuple)) and value:
        brackets, items = "[]", [pretty_json(item, depth + 1) for item in value]
    else:
        return compact_json(value)
    inner = "\n" + "  " * (depth + 1)
    return brackets[0] + inner + ("," + inner).join(items) + "\n" + "  " * depth + brackets[1]


def utc_now() -> str:
    """The current UTC time as YYYY-MM-DDTHH:MM:SSZ."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def note_id_for(seq: int) -> str:
    """The id of the note numbered seq: n00001, ..., n99999, n100000."""
    return "n%05d" % seq


def record_checksum(record: dict) -> str:
    """First 16 hex digits of SHA-256 over the canonical JSON of the record without its checksum."""
    body = dict(record)
    body.pop("checksum", None)
    return sha256(canonical_json(body).encode("utf-8")).hexdigest()[:16]


def build_record(session_id: str, seq: int, note_type: str, text: str, effect: str | None = None,
                 ref: str | None = None, status: str | None = None, timestamp: str | None = None) -> dict:
    """A record with v0's keys in v0's order, the optional links after effect, checksum last."""
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
    record["checksum"] = record_checksum(record)
    return record


def record_line(record: dict) -> bytes:
    """One record as the bytes of one log line, newline included."""
    return (compact_json(record) + "\n").encode("utf-8")


def may_hold_credential(text: str) -> bool:
    """Whether the text holds one of CREDENTIAL_MARKERS; most texts hold none, and stop here.

    The plain form is any(marker in text for marker in CREDENTIAL_MARKERS).
    Written out it costs a sixth as much, which verify, looking at every
    record, needs; test_credentials.py checks that it answers yes to each marker."""
    return ("_" in text or "sk-" in text or "://" in text or "PRIVATE KEY" in text or "ccessKey" in text
            or "AKIA" in text or "ASIA" in text or "xox" in text or "xapp-" in text or "AIza" in text
            or "eyJ" in text or "glpat-" in text)


def find_credential(text: str) -> str | None:
    """The kind of credential the text seems to hold, or None.

    signal_problem removes invisible characters first, so that a key split by
    them is still found."""
    if not may_hold_credential(text):
        return None
    import re  # only when a marker is present: re costs more than an append

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
                 ref: str | None, status: str | None) -> tuple:
    """Validate a signal before anything is touched; return (text, effect, ref, status)."""
    if note_type not in NOTE_TYPES:
        raise NotesError("unknown --type %r; use one of: %s" % (note_type, ", ".join(NOTE_TYPES)))
    text = clean_field("text", text, TEXT_LIMIT)
    if not text:
        raise NotesError("--text is empty; a memory signal needs a text that says what to keep")
    effect = clean_field("effect", effect, EFFECT_LIMIT) or None
    if status is not None and status not in GATE_STATUSES:
        raise NotesError("unknown --status %r; use one of: %s" % (status, ", ".join(GATE_STATUSES)))
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
    return text, effect, ref, status


def is_note_id(value) -> bool:
    """Whether value has the shape of a note id (n followed by at least five digits)."""
    return (isinstance(value, str) and len(value) >= 6 and value[0] == "n"
            and value[1:].isdigit() and value[1:].isascii())


def is_seq(value) -> bool:
    """Whether value is a usable seq: a positive int (not a bool) up to SEQ_LIMIT."""
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
    except (ValueError, RecursionError):  # parse_json turns RecursionError into ValueError; both mean the same
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
    "seq_repeated": "the seq repeats or goes back: it is not above every seq before it",
    "seq_gap": "seq numbers are missing before this record",
    "torn_tail": "the last line is cut off (a crash during a write); the next append moves it to a side file",
    "missing_newline": "the last record lacks its newline; the next append adds it",
}
# A record with one of these is skipped by every reader (with a warning): its
# fields are not what they claim to be, and code that trusts them would fail.
# A record with any other problem is still read, and the problem reported.
UNUSABLE = frozenset(("missing_field", "bad_field", "invalid_unicode"))

REQUIRED_FIELDS = ("id", "ts", "session_id", "seq", "type", "text", "checksum")
# What each field of a record must hold: (test, what it is).  A field not named
# here must hold a plain value (is_plain_value).
FIELD_RULES = {
    "id": (is_note_id, "a note id (n and five or more digits)"),
    "ts": (is_timestamp, "a UTC time YYYY-MM-DDTHH:MM:SSZ"),
    "session_id": (is_string, "a string"),  # one not the session's own is a foreign_session
    "seq": (is_seq, "a whole number from 1 to %d" % SEQ_LIMIT),
    "type": (is_string, "a string"),
    "text": (is_string, "a string"),
    "effect": (is_string, "a string"),
    "ref": (is_note_id, "a note id (n and five or more digits)"),
    "status": (lambda value: value in GATE_STATUSES, "open, deferred or closed"),
    "checksum": (is_checksum, "16 lowercase hex digits"),
}
PLAIN_RULE = (is_plain_value, "a string, a number, true, false or null")


def field_problems(record: dict) -> list:
    """The record's fields checked for kind and range: [] or one (kind, detail) naming every bad field."""
    # Speed: verify and every reader pass each record through here.  The
    # common record (v0's seven fields, maybe an effect) is vouched for by
    # this one expression, the rules below written out (an id equal to the
    # one its seq gives is a note id); it costs half what the rules do.
    # Anything it does not vouch for goes through the rules, which decide.
    seq, ts, checksum = record.get("seq"), record.get("ts"), record.get("checksum")
    if (type(seq) is int and 1 <= seq <= SEQ_LIMIT and record.get("id") == "n%05d" % seq
            and type(record.get("session_id")) is str and type(record.get("type")) is str
            and type(record.get("text")) is str
            and type(ts) is str and ts.translate(DIGITS_AS_ZERO) == "0000-00-00T00:00:00Z"
            and type(checksum) is str and len(checksum) == 16 and HEX_DIGITS.issuperset(checksum)
            and (len(record) == 7 or len(record) == 8 and type(record.get("effect")) is str)):
        return []
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
    return problems


def is_usable(problems: list) -> bool:
    """Whether readers read a record with these (kind, detail) problems."""
    return not any(kind in UNUSABLE for kind, _ in problems)


def seq_order_problem(seq, highest: int) -> str | None:
    """The problem of a seq that follows highest, the highest seq before it: repeated, gap, or None."""
    if not is_seq(seq) or seq == highest + 1:
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
        time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")  # the ranges: month 13, February 30, year 0
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

def resolve_folder(folder):
    """The session folder: --dir, or the folder that holds this file."""
    if folder is None:
        return os.path.dirname(os.path.realpath(__file__))
    return os.path.realpath(os.path.expanduser(folder))


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


def read_meta(folder):
    """The session's meta object, None when the folder has none; refuse a damaged one."""
    path = os.path.join(folder, META_NAME)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
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
            "no session in %s (no %s there); start one with: python3 -S notes.py --dir %s init, "
            "or bring one back from an export with: python3 -S notes.py --dir %s restore "
            "session_export.json" % (folder, META_NAME, folder, folder))
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
    """os.open that refuses a symbolic link at path: O_NOFOLLOW, or a look first where it is missing."""
    if not NO_FOLLOW and os.path.islink(path):
        raise link_error(path)
    try:
        return os.open(path, flags | NO_FOLLOW | BINARY, 0o644)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise link_error(path) from None
        raise


class SessionLock:
    """Exclusive lock on session_notes.lock, held by every writer from read to fsync."""

    def __init__(self, folder):
        self.path = os.path.join(folder, LOCK_NAME)
        self.descriptor = None

    def __enter__(self):
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
            if fcntl is not None:
                # flock is released by the kernel when the holder dies, so a
                # writer killed mid-append never blocks the next one.
                fcntl.flock(self.descriptor, fcntl.LOCK_EX)
            else:
                import msvcrt

                # A poll every 10 ms: LK_LOCK would retry only once a second.
                deadline = time.monotonic() + LOCK_WAIT_SECONDS
                while True:
                    try:
                        msvcrt.locking(self.descriptor, msvcrt.LK_NBLCK, 1)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise NotesError("another writer has held %s for %d s; try again"
                                             % (self.path, LOCK_WAIT_SECONDS), EXIT_UNEXPECTED) from None
                        time.sleep(0.01)
        except BaseException:
            os.close(self.descriptor)
            raise
        return self

    def __exit__(self, *exc_info):
        if fcntl is None:
            import msvcrt

            try:
                msvcrt.locking(self.descriptor, msvcrt.LK_UNLCK, 1)
            except OSError:
                pass
        os.close(self.descriptor)  # closing releases a flock


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
        # the temporary file is left behind under a dot-name; after it, the
        # rename is made durable by the folder fsync.
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


def write_meta(folder, session_id, created_at):
    """Write the meta file of a session and return it."""
    meta = {"schema_version": META_SCHEMA, "session_id": session_id, "created_at": created_at,
            "log_file": os.path.join(folder, LOG_NAME)}
    # As v0 writes it: 2-space JSON, non-ASCII as is, a trailing newline.
    write_file_atomically(os.path.join(folder, META_NAME), [(pretty_json(meta) + "\n").encode("utf-8")])
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


def read_lines_backward(handle, size):
    """Yield (offset, line) from the end of the log; the first is the unterminated tail (maybe b"")."""
    if size == 0:
        yield 0, b""
        return
    position = size
    carry = b""
    while position > 0:
        step = min(BACKWARD_BLOCK, position)
        position -= step
        handle.seek(position)
        data = handle.read(step) + carry
        pieces = data.split(b"\n")
        carry = pieces[0]
        offset = position + len(data)
        for piece in reversed(pieces[1:]):
            offset -= len(piece)
            yield offset, piece
            offset -= 1
    yield 0, carry


class LogTail:
    """What a writer needs from the end of the log, found without reading the rest."""

    def __init__(self, handle, size):
        self.size = size
        self.keep_end = size        # bytes before this offset stay in the log
        self.needs_newline = False  # the last kept record lacks its newline
        self.last_record = None     # the last line that is a JSON object
        self.highest_seq = 0
        # The first line met is the one after the last newline: b"" in a
        # healthy log.  Lines that are not JSON objects, after the last one
        # that is, form the torn tail.  The scan goes on until two records in
        # a row have consecutive seqs (two records in a healthy log), so that
        # a late or repeated seq at the end cannot hide a higher one.
        newer_seq = None
        for position, (offset, line) in enumerate(read_lines_backward(handle, size)):
            if position == 0 and not line:
                continue
            value, _ = parse_line(line)
            if value is None:
                if self.last_record is None:
                    self.keep_end = offset
                continue
            if self.last_record is None:
                self.last_record = value
                self.needs_newline = position == 0
            if is_seq(value.get("seq")):
                seq = value["seq"]
                self.highest_seq = max(self.highest_seq, seq)
                if newer_seq == seq + 1:
                    break
                newer_seq = seq


def set_aside_torn_tail(folder, descriptor, tail):
    """Move the bytes past the last JSON object to a side file, then cut them from the log."""
    with open(descriptor, "rb", closefd=False) as handle:
        handle.seek(tail.keep_end)
        torn = handle.read(tail.size - tail.keep_end)
    side_path, side = create_new_file(os.path.join(folder, "%s.torn-%s-%d" % (
        LOG_NAME, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.getpid())), "")
    try:
        write_all(side, torn)
        os.fsync(side)
    finally:
        os.close(side)
    fsync_folder(folder)
    # Crash window: the bytes are now in the side file and still in the log;
    # a crash here makes the next append copy them once more, losing nothing.
    os.ftruncate(descriptor, tail.keep_end)
    os.fsync(descriptor)
    return {"kind": "torn_tail", "bytes": len(torn), "side_file": side_path}


def find_note(handle, size, note_id):
    """The record with this id, searched from the end of the log (recent notes come first)."""
    needle = ('"id":"%s"' % note_id).encode("ascii")
    for _, line in read_lines_backward(handle, size):
        if needle in line:
            value, _ = parse_line(line)
            if value is not None and value.get("id") == note_id:
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


class LogReader:
    """Reads the whole log forward, checking each line, without holding it in memory."""

    def __init__(self, folder, meta):
        self.path = os.path.join(folder, LOG_NAME)
        self.session_id = meta.get("session_id")
        self.problems = []          # the first ones, as verify lists them
        self.problem_count = 0
        self.total = 0
        self.last_record = None
        try:
            self.size = os.path.getsize(self.path)
        except FileNotFoundError:
            self.size = 0

    def records(self, listed=PROBLEMS_LISTED):
        """Yield every record that can be read; count and keep the problems met."""
        self.problems, self.problem_count, self.total, self.last_record = [], 0, 0, None
        highest, remaining = 0, self.size
        if not remaining:
            return
        with open(self.path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                raw = raw[:remaining]
                remaining -= len(raw)
                terminated = raw.endswith(b"\n")
                value, kind = parse_line(raw[:-1] if terminated else raw)
                kinds, record_id = [], None
                if value is None:
                    kinds.append((kind if terminated else "torn_tail", None))
                else:
                    if not terminated:
                        kinds.append(("missing_newline", None))
                    kinds += check_record(value, self.session_id)
                    seq = value.get("seq")
                    if seq_order_problem(seq, highest):
                        kinds.append((seq_order_problem(seq, highest), None))
                    if is_seq(seq):
                        highest = max(highest, seq)
                    if kinds and is_note_id(value.get("id")):  # any other id could be anything: never echoed
                        record_id = value["id"]
                self.problem_count += len(kinds)
                for kind, detail in kinds[:listed - len(self.problems)]:
                    self.problems.append(problem(number, record_id, kind, detail))
                if value is not None and is_usable(kinds):
                    self.total += 1
                    self.last_record = value
                    yield value
                if not remaining:  # lines appended after the size was taken wait for the next read
                    break

    def warnings(self):
        """The problems met, as sentences, bounded."""
        return problem_messages(self.problems, self.problem_count)


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
    prepare_folder(folder)
    with SessionLock(folder):
        meta = open_session_for_writing(folder)
    return {"ok": True, "command": "init", "session_id": meta["session_id"],
            "path": os.path.join(folder, LOG_NAME)}


def command_append(args) -> dict:
    # Validate everything the signal alone can tell before touching any file.
    text, effect, ref, status = clean_signal(args.type, args.text, args.effect, args.ref, args.status)
    folder = resolve_folder(args.dir)
    log_path = os.path.join(folder, LOG_NAME)
    check_session_folder(folder)
    if ref is not None:
        # The log only grows, so a note found now is still there under the lock.
        check_ref(log_path, args.type, ref)
    prepare_folder(folder)
    with SessionLock(folder):
        meta = open_session_for_writing(folder)
        try:
            created = not os.path.lexists(log_path)
            descriptor = open_log_for_append(log_path)
        except OSError as error:
            raise folder_error(folder, error) from None
        try:
            with open(descriptor, "rb", closefd=False) as handle:
                size = os.fstat(descriptor).st_size
                tail = LogTail(handle, size)
            receipt = {"ok": True, "command": "append"}
            recovered = None
            if tail.keep_end < size:
                recovered = set_aside_torn_tail(folder, descriptor, tail)
            if tail.needs_newline:
                append_line(descriptor, b"\n")
                recovered = recovered or {"kind": "missing_newline"}
            last = tail.last_record
            signal = (args.type, text, effect, ref, status)
            if last is not None and is_seq(last.get("seq")) and signal == (
                    last.get("type"), last.get("text"), last.get("effect"), last.get("ref"), last.get("status")):
                # A retry of the last append (its receipt was lost): nothing new.
                receipt.update(note_id=last.get("id"), seq=last["seq"], path=log_path, duplicate=True)
            else:
                record = build_record(meta["session_id"], tail.highest_seq + 1, args.type,
                                      text, effect, ref, status)
                append_line(descriptor, record_line(record))
                receipt.update(note_id=record["id"], seq=record["seq"], path=log_path)
            if created:
                fsync_folder(folder)
        finally:
            os.close(descriptor)
    if recovered:
        receipt["recovered"] = recovered
    return receipt


def check_ref(log_path, note_type, ref):
    """Refuse a --ref that names no note of this log, or a note of the wrong kind."""
    try:
        with open(log_path, "rb") as handle:
            target = find_note(handle, os.fstat(handle.fileno()).st_size, ref)
    except FileNotFoundError:
        target = None
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


def command_tail(args) -> dict:
    limit = check_limit(args.limit)
    since, until = parse_time_filter(args.since, "since"), parse_time_filter(args.until, "until")
    types = set(args.types) if args.types else None
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    log_path = os.path.join(folder, LOG_NAME)
    session_id = meta["session_id"]
    records, warnings = [], []
    try:
        handle = open(log_path, "rb")
    except FileNotFoundError:
        import io  # already loaded by the interpreter itself

        handle = io.BytesIO()  # no log yet: an empty one to tail
    with handle:
        newer_seq = None
        for position, (offset, line) in enumerate(read_lines_backward(handle, handle.seek(0, os.SEEK_END))):
            if len(records) >= limit:
                break
            if position == 0 and not line:
                continue  # the log ends with a newline, as it should
            value, kind = parse_line(line)
            if position == 0:  # the last line lacks its newline
                kind = "torn_tail" if value is None else "missing_newline"
            if kind:
                warnings.append("byte %d: %s" % (offset, PROBLEM_DETAILS[kind]))
            if value is None:
                continue
            kinds = check_record(value, session_id)
            seq = value.get("seq")
            if is_seq(seq):
                if newer_seq is not None and seq != newer_seq - 1:
                    kinds.append(("seq_repeated" if seq >= newer_seq else "seq_gap", None))
                newer_seq = seq
            for kind, detail in kinds:
                record_id = value["id"] if is_note_id(value.get("id")) else "no id"  # never echo another
                warnings.append("byte %d (%s): %s" % (offset, record_id, detail or PROBLEM_DETAILS[kind]))
            if is_usable(kinds) and (types is None or value["type"] in types) and (
                    since is None or value["ts"] >= since) and (until is None or value["ts"] < until):
                records.append(value)
    records.reverse()
    receipt = {"ok": True, "command": "tail", "count": len(records), "path": log_path, "records": records}
    return with_warnings(receipt, bounded_warnings(warnings, len(warnings)))


def count_by_type(reader, listed):
    """Read the whole log: (notes by type, first ts, last ts)."""
    by_type = dict.fromkeys(sorted(NOTE_TYPES), 0)
    first_ts = last_ts = None
    for record in reader.records(listed):
        if record["type"] in by_type:
            by_type[record["type"]] += 1
        first_ts = first_ts or record["ts"]
        last_ts = record["ts"]
    return by_type, first_ts, last_ts


def command_summary(args) -> dict:
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    reader = LogReader(folder, meta)
    by_type = count_by_type(reader, WARNINGS_LISTED)[0]
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
    for _ in reader.records(PROBLEMS_LISTED):
        pass
    problems = (meta_problems + reader.problems)[:PROBLEMS_LISTED]
    count = len(meta_problems) + reader.problem_count
    receipt = {"ok": count == 0, "command": "verify", "path": reader.path, "total": reader.total,
               "problems": problems}
    if count > len(problems):
        receipt["problems_not_listed"] = count - len(problems)
    return receipt


def command_export(args) -> dict:
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    markdown = args.format == "md"
    if args.output:
        output = os.path.abspath(os.path.expanduser(args.output))
    else:
        output = os.path.join(folder, EXPORT_MARKDOWN_NAME if markdown else EXPORT_NAME)
    if os.path.isdir(output):
        raise NotesError("--output %s is a folder; give a file path, such as %s"
                         % (output, os.path.join(output, EXPORT_NAME)))
    output_folder = os.path.dirname(output)
    if os.path.isfile(output_folder):
        raise NotesError("--output %s is inside a file, not a folder" % output)
    # Both passes read the same bytes: the size is fixed before the first one,
    # so notes appended meanwhile wait for the next export.
    reader = LogReader(folder, meta)
    by_type, first_ts, last_ts = count_by_type(reader, PROBLEMS_LISTED)
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


def json_export(reader, meta, count):
    """Yield the export as json.dumps(export, indent=2) would print it, record by record."""
    head = {"schema_version": EXPORT_SCHEMA, "exported_at": utc_now(), "session": meta,
            "record_count": count}
    yield (pretty_json(head)[:-2] + ',\n  "records": ').encode("utf-8")
    written = 0
    for record in reader.records():
        if written == count:
            break
        yield (("[\n    " if written == 0 else ",\n    ") + pretty_json(record, 2)).encode("utf-8")
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
    parts = ["### %s · %s · %s" % (record["id"], record["ts"], visible(record["type"], True)), ""]
    parts += ["    " + visible(line) for line in markdown_split(record["text"])]
    parts.append("")
    if "effect" in record:
        first, *rest = markdown_split(record["effect"])
        parts.append("- Effect: " + visible(first))
        parts += ["      " + visible(line) for line in rest]
    for key in ("ref", "status"):  # a note id, and one of three words: checked before any reader sees them
        if key in record:
            parts.append("- %s: %s" % (key.capitalize(), record[key]))
    if len(parts) > len(markdown_split(record["text"])) + 3:
        parts.append("")
    return parts


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
    """A record as a recap item: id, text, and effect when it has one."""
    item = {"id": record["id"], "text": record["text"]}
    if "effect" in record:
        item["effect"] = record["effect"]
    return item


def command_recap(args) -> dict:
    limit = check_limit(args.limit)
    folder = resolve_folder(args.dir)
    meta = require_session(folder)
    reader = LogReader(folder, meta)
    # First pass: which notes are superseded, and the story of every gate.
    # Only these are held in memory; the lists are gathered in the second pass.
    superseded, gates, gate_of_update = set(), {}, {}
    for record in reader.records(WARNINGS_LISTED):
        ref = record.get("ref")
        if record["type"] == "gate":
            if ref is None:
                gates[record["id"]] = {"id": record["id"], "text": record["text"],
                                       "status": record.get("status", "open")}
                if "effect" in record:
                    gates[record["id"]]["effect"] = record["effect"]
            else:
                root = gate_of_update.get(ref, ref)
                if root in gates and record.get("status") in GATE_STATUSES:
                    gate_of_update[record["id"]] = root
                    gates[root].update(status=record["status"], update_id=record["id"],
                                       update_text=record["text"])
        elif isinstance(ref, str):
            superseded.add(ref)
    warnings = reader.warnings()
    latest = {"mode": None, "shape": None}
    kept = {name: [] for _, name in RECAP_LISTS}
    cut = dict.fromkeys(kept, 0)
    list_of_type = dict(RECAP_LISTS)
    for record in reader.records(0):
        if record["id"] in superseded:
            continue
        if record["type"] in latest:
            latest[record["type"]] = record
        elif record["type"] in list_of_type:
            items = kept[list_of_type[record["type"]]]
            items.append(record)
            if len(items) > limit:
                del items[0]
                cut[list_of_type[record["type"]]] += 1
    gates_by_status = {"open": [], "deferred": [], "closed": []}
    for gate in gates.values():
        if gate["status"] in GATE_STATUSES:  # a tuple: a stray unhashable status is just skipped
            gates_by_status[gate["status"]].append(gate)
    for status in ("open", "deferred"):
        cut[status + "_gates"] = max(0, len(gates_by_status[status]) - limit)
    receipt = {
        "ok": True,
        "command": "recap",
        "session_id": meta["session_id"],
        "path": reader.path,
        "total": reader.total,
        "mode": summarise_record(latest["mode"]) if latest["mode"] else None,
        "shape": summarise_record(latest["shape"]) if latest["shape"] else None,
        "open_gates": gates_by_status["open"][-limit:],
        "deferred_gates": gates_by_status["deferred"][-limit:],
        "closed_gates": len(gates_by_status["closed"]),
    }
    for name, items in kept.items():
        receipt[name] = [summarise_record(record) for record in items]
    receipt["superseded_count"] = len(superseded)
    truncated = {name: number for name, number in cut.items() if number}
    if truncated:
        receipt["truncated"] = truncated
    with_warnings(receipt, warnings)
    if args.format == "md":
        return recap_markdown(receipt)
    return receipt


def recap_item_line(item):
    """One recap item (a gate with its status and latest update) as a markdown list line."""
    line = "- %s: %s" % (item["id"], item["text"].replace("\n", " "))
    if item.get("effect"):
        line += " (effect: %s)" % item["effect"].replace("\n", " ")
    if "status" in item:
        line += " [%s]" % item["status"]
    if item.get("update_id"):
        line += " (latest update %s: %s)" % (item["update_id"], item["update_text"].replace("\n", " "))
    return line


def recap_markdown(recap):
    """The recap as markdown, for a person or to paste into the conversation."""
    lines = ["# Recap of session %s" % recap["session_id"], "",
             "%d notes; %d superseded; %d gates closed." % (
                 recap["total"], recap["superseded_count"], recap["closed_gates"]), ""]
    for title, key in (("Mode", "mode"), ("Shape", "shape")):
        lines += ["## " + title, "", recap_item_line(recap[key]) if recap[key] else "- none", ""]
    for title, key in (("Open gates", "open_gates"), ("Deferred gates", "deferred_gates"),
                       ("Decisions", "decisions"), ("Discarded paths", "discards"), ("Tensions", "tensions"),
                       ("Sources", "sources"), ("Artifact boundaries", "artifacts")):
        lines += ["## " + title, ""]
        lines += [recap_item_line(item) for item in recap[key]] or ["- none"]
        if recap.get("truncated", {}).get(key):
            lines.append("- (%d older not shown)" % recap["truncated"][key])
        lines.append("")
    if recap.get("warnings"):
        lines += ["## Warnings", ""] + ["- " + message for message in recap["warnings"]] + [""]
    return "\n".join(lines)


def load_export(path, accept_damaged=False):
    """Read and check a whole export: (session, records, problems).

    What cannot be a log at all is always refused; any other problem refuses
    the restore, unless accept_damaged: then the problems are returned."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise NotesError("no export at %s; pass the path of a session_export.json" % path) from None
    except IsADirectoryError:
        raise NotesError("%s is a folder; pass the path of a session_export.json" % path) from None
    except OSError as error:
        raise NotesError("cannot read %s (%s)" % (path, error.strerror)) from None
    try:
        export = parse_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        export = None
    reason = export_shape_problem(export)
    if reason:
        raise NotesError("%s is not a session export: %s; nothing was written, with --accept-damaged or "
                         "without" % (path, reason), EXIT_INTEGRITY)
    session, records = export["session"], export["records"]
    problems = []
    if export.get("record_count") != len(records):
        problems.append(problem(None, None, "record_count", "record_count is not %d, the number of "
                                                              "records the export holds" % len(records)))
    highest = 0
    for number, record in enumerate(records, 1):
        kinds = check_record(record, session["session_id"])
        seq = record.get("seq")
        if seq_order_problem(seq, highest):
            kinds.append((seq_order_problem(seq, highest), None))
        if is_seq(seq):
            highest = max(highest, seq)
        if accept_damaged and not is_usable(kinds):
            try:
                record_line(record)
            except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
                raise NotesError("%s: record %d cannot be written as a line of JSON (nested too deeply, "
                                 "or text that is not valid UTF-8); nothing was written" % (path, number),
                                 EXIT_INTEGRITY) from None
        record_id = record["id"] if is_note_id(record.get("id")) else None
        problems.extend(problem(number, record_id, kind, detail) for kind, detail in kinds)
    if problems and not accept_damaged:
        raise NotesError(
            "%s is damaged (%d problems); nothing was written. Restore from an intact export, or run "
            "restore --accept-damaged on this one to bring back every record exactly as the export holds "
            "it, repairing and dropping nothing, so that verify then reports the same problems"
            % (path, len(problems)), EXIT_INTEGRITY, {"problems": problems[:PROBLEMS_LISTED]})
    return session, records, problems


def export_shape_problem(export) -> str | None:
    """Why a parsed export cannot be a session log at all, even a damaged one; None when it can."""
    if not isinstance(export, dict) or export.get("schema_version") != EXPORT_SCHEMA:
        return "not JSON with schema_version %s" % EXPORT_SCHEMA
    session, records = export.get("session"), export.get("records")
    if not isinstance(session, dict) or not is_session_id(session.get("session_id")):
        return "its session has no usable session_id"
    if not isinstance(session.get("created_at", ""), str):
        return "its session's created_at is not a string"
    if not isinstance(records, list):
        return "its records are not a list"
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict):
            return "record %d is not an object" % number
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


def notes_kept_by_restore(folder, session, records):
    """How many export records the folder already holds (None: a fresh start); refuse the rest."""
    meta = check_session_folder(folder)
    log_path = os.path.join(folder, LOG_NAME)
    existing = []
    if meta is not None:
        reader = LogReader(folder, meta)
        existing = list(reader.records())
        if reader.problem_count:
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
    if existing != records[:len(existing)]:
        raise NotesError(
            "the log in %s has notes the export lacks, or differs from it; nothing was "
            "changed. Restore into an empty --dir instead" % folder)
    return len(existing)


def command_restore(args) -> dict:
    export_path = os.path.abspath(os.path.expanduser(args.export_file))
    session, records, problems = load_export(export_path, getattr(args, "accept_damaged", False))
    folder = resolve_folder(args.dir)
    log_path = os.path.join(folder, LOG_NAME)
    # Refusals come before the lock, so that they leave the folder untouched;
    # the same check runs again under the lock, where it counts.
    notes_kept_by_restore(folder, session, records)
    prepare_folder(folder)
    with SessionLock(folder):
        kept = notes_kept_by_restore(folder, session, records)
        if kept is None:
            # Crash window: meta is written first; if the log write is lost,
            # the folder holds the same session with no notes, and the same
            # restore run again fills it in.
            write_meta(folder, session["session_id"], session.get("created_at") or utc_now())
            write_file_atomically(log_path, map(record_line, records))
            restored = len(records)
        else:
            missing = records[kept:]
            if missing:
                descriptor = open_log_for_append(log_path)
                try:
                    append_line(descriptor, b"".join(map(record_line, missing)))
                finally:
                    os.close(descriptor)
            restored = len(missing)
    receipt = {"ok": True, "command": "restore", "session_id": session["session_id"],
               "record_count": len(records), "restored": restored, "path": log_path}
    # With --accept-damaged: what was restored as it is, record by record.
    return with_warnings(receipt, problem_messages(problems, len(problems)))


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
        ("--type", "type", "TYPE", "the signal type: " + ", ".join(NOTE_TYPES),
         {"required": True, "choices": NOTE_TYPES}),
        ("--text", "text", "TEXT", "what to keep, at most %d characters" % TEXT_LIMIT, {"required": True}),
        ("--effect", "effect", "EFFECT", "optional consequence, at most %d characters" % EFFECT_LIMIT, {}),
        ("--ref", "ref", "NOTE_ID", "an earlier note this one updates (a gate) or supersedes (any other type)", {}),
        ("--status", "status", "STATUS", "gate status: open, deferred or closed (gates only)",
         {"choices": GATE_STATUSES}),
    ], 'python3 -S notes.py append --type decision --text "The log stays append-only."'),
    "tail": ("Print the last records, oldest first, optionally filtered.", [
        ("--limit", "limit", "N", "how many records to print (default %d)" % TAIL_DEFAULT_LIMIT,
         {"type": int, "default": TAIL_DEFAULT_LIMIT}),
        ("--type", "types", "TYPE", "keep only this type; repeat for several",
         {"action": "append", "choices": NOTE_TYPES}),
        ("--since", "since", "TS", "keep records at or after TS (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, UTC)", {}),
        ("--until", "until", "TS", "keep records before TS (same forms)", {}),
    ], "python3 -S notes.py tail --limit 3 --type gate"),
    "summary": ("Print the number of records by type and the last note.", [],
                "python3 -S notes.py summary"),
    "recap": ("Print the state of the idea: open and deferred gates, live decisions, discards and more.", [
        ("--limit", "limit", "N", "items kept per list, newest first (default %d)" % RECAP_DEFAULT_LIMIT,
         {"type": int, "default": RECAP_DEFAULT_LIMIT}),
        ("--format", "format", "FORMAT", "json (default) or md", {"choices": ("json", "md"), "default": "json"}),
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
}
DIR_HELP = "session folder (default: the folder that holds notes.py)"


class Arguments:
    """Parsed arguments: every destination present, as argparse would leave them."""


def parse_quickly(argv):
    """Parse the plain forms without argparse (which costs more than an append); None for anything else.

    The plain form is [--dir DIR] COMMAND, then options as two words each.
    Anything else (--option=value, --dir after the command, a positional,
    help, any mistake) goes to argparse, which gives the same result or the
    full error message."""
    values = {"dir": None}
    if argv[:1] == ["--dir"] and len(argv) > 1 and not argv[1].startswith("-"):
        values["dir"], argv = argv[1], argv[2:]
    if not argv or argv[0] not in COMMANDS or len(argv) % 2 == 0:
        return None
    values["command"], flags = argv[0], {}
    for flag, destination, _, _, extra in COMMANDS[argv[0]][1]:
        flags[flag] = destination, extra
        values[destination] = extra.get("default")
    for flag, value in zip(argv[1::2], argv[2::2]):
        if flag not in flags or not flag.startswith("--") or value.startswith("-"):
            return None
        destination, extra = flags[flag]
        if value not in extra.get("choices", (value,)):
            return None
        if extra.get("type") is int:
            try:
                value = int(value)
            except ValueError:
                return None
        if extra.get("action") == "append":
            value = (values[destination] or []) + [value]
        values[destination] = value
    for flag, (destination, extra) in flags.items():
        # argparse requires positionals too; here they never get a value.
        if (extra.get("required") or not flag.startswith("-")) and values[destination] is None:
            return None
    arguments = Arguments()
    arguments.__dict__.update(values)
    return arguments


def build_parser():
    """The full argparse parser: help texts and usage errors."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise NotesError("%s (see: python3 -S notes.py %s--help)" % (
                message, "" if self.prog == "notes.py" else self.prog.split(" ", 1)[1] + " "))

    parser = Parser(prog="notes.py", description=PROGRAM_DESCRIPTION,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog="example:\n  python3 -S notes.py append --type gate --text "
                           "\"Host runtime is undecided.\"\n\nrun 'notes.py COMMAND --help' for a command's options")
    parser.add_argument("--dir", help=DIR_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, (purpose, options, example) in COMMANDS.items():
        sub = commands.add_parser(name, help=purpose, description=purpose,
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="example:\n  " + example)
        sub.add_argument("--dir", default=argparse.SUPPRESS, help=DIR_HELP)
        for flag, destination, metavar, help_text, extra in options:
            settings = dict(extra)
            if "choices" in settings:
                settings["choices"] = list(settings["choices"])
            if flag.startswith("-"):
                sub.add_argument(flag, dest=destination, metavar=metavar, help=help_text, **settings)
            else:
                sub.add_argument(destination, metavar=metavar, help=help_text, **settings)
    return parser


# --------------------------------------------------------------------------
# The entry point: the only place that prints

def main(argv=None) -> int:
    """Run one command; print its receipt or error as JSON; return the exit code."""
    if argv is None:
        argv = sys.argv[1:]
    try:
        # The quick path for plain forms; argparse for help and mistakes.
        arguments = parse_quickly(argv) or build_parser().parse_args(argv)
        result = globals()["command_" + arguments.command](arguments)
        code = EXIT_INTEGRITY if isinstance(result, dict) and result.get("ok") is False else EXIT_OK
    except SystemExit as exit_request:  # --help, printed by argparse
        result, code = None, exit_request.code or 0
    except NotesError as error:
        result = {"ok": False, "error": error.message}
        result.update(error.details)
        code = error.exit_code
    except KeyboardInterrupt:
        result, code = {"ok": False, "error": "interrupted"}, EXIT_UNEXPECTED
    except Exception as error:  # noqa: BLE001 - no traceback ever reaches the user
        result = {"ok": False, "error": "unexpected error: %s: %s" % (type(error).__name__, error)}
        code = EXIT_UNEXPECTED
    try:  # as UTF-8 whatever the locale, and flushed, since the script leaves with os._exit
        if result is not None:
            text = result if isinstance(result, str) else pretty_json(result) + "\n"
            stream = getattr(sys.stdout, "buffer", None)
            if stream is None:
                sys.stdout.write(text)
            else:
                sys.stdout.flush()
                stream.write(text.encode("utf-8", "backslashreplace"))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader has gone: there is no one left to tell
        pass
    except OSError as error:  # a full disk, say: the result is lost, so say that where we can
        try:
            sys.stderr.write(compact_json({"ok": False, "error": "cannot print the result (%s)"
                                                                 % error.strerror}) + "\n")
            sys.stderr.flush()
        except OSError:
            pass
        return EXIT_UNEXPECTED
    return code


if __name__ == "__main__":
    # main has printed and flushed its result; every file is fsynced and
    # closed, and the lock released.  What is left is the interpreter's
    # teardown, which only frees memory the kernel reclaims anyway (about
    # 3 ms, a tenth of a run): leave without it.
    os._exit(main())
