#!/usr/bin/env python3
"""notes.py: the persistence tool of Memory-Assisted Shaping.

Appends each signal as one checksummed JSON line to session_notes.jsonl and
reads the state back; docs/guarantees.md lists its promises. Standard library only.

Sections, each using only those above it: Constants; Errors; Record rules
(pure); Storage; Session (the Python API); Recap; Export and restore; Batches;
Redaction; Command line; MCP; Entry (main).
"""

from __future__ import annotations

if __name__ == "__main__":  # Ctrl-C before main can answer: JSON, no traceback.
    import signal
    import sys

    def _interrupted_at_start(signum, frame):
        # Over MCP stdout is JSON-RPC alone: answer on stderr.
        stream = sys.stderr if "mcp" in sys.argv else sys.stdout
        stream.write('{\n  "ok": false,\n  "error": "interrupted (Ctrl-C) before the command began; nothing was '
                     'written. Run it again"\n}\n')
        stream.flush()
        sys.exit(130)

    signal.signal(signal.SIGINT, _interrupted_at_start)

__all__ = ["Session", "NotesError", "main", "__version__", "NOTE_TYPES", "GATE_STATUSES", "PROVENANCES",
           "EVIDENCE_LEVELS"]

import collections
import errno
import hashlib
import json
import math
import os
import re
import shlex
import stat
import sys
import time

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

# --------------------
# Constants

_META_NAME = "session_meta.json"
_LOG_NAME = "session_notes.jsonl"
_TORN_PREFIX = _LOG_NAME + ".torn-"  # side files of torn tails
_LOCK_NAME = "session_notes.lock"
_EXPORT_NAME = "session_export.json"
_EXPORT_MARKDOWN_NAME = "session_export.md"

_META_SCHEMA = "shaping-memory-session-meta.v0"
_EXPORT_SCHEMA = "shaping-memory-export.v0"
# export replaces only a file that begins so
_EXPORT_JSON_START = b'{\n  "schema_version": "' + _EXPORT_SCHEMA.encode("ascii") + b'"'
_EXPORT_MARKDOWN_START = b"# Shaping session "

NOTE_TYPES = ("mode", "shape", "gate", "decision", "discard", "tension", "source", "artifact")
GATE_STATUSES = ("open", "deferred", "closed")
PROVENANCES = ("op", "model", "shared")
_FIRM_PROVENANCES = ("op", "shared")  # superseded only by a note so labelled
EVIDENCE_LEVELS = ("declared", "inferred", "observed", "validated")
_RECAP_LISTS = (("decision", "decisions"), ("discard", "discards"), ("tension", "tensions"),
               ("source", "sources"), ("artifact", "artifacts"))

_TEXT_LIMIT = 2000
_EFFECT_LIMIT = 1000
_TAIL_DEFAULT_LIMIT = 5
_RECAP_DEFAULT_LIMIT = 20
_LIMIT_MAX = 1000  # records per tail or recap list
_TAIL_BYTES_LIMIT = 8 << 20  # log bytes a tail returns
_RECAP_DEFAULT_MAX_BYTES = 12288  # printed UTF-8 bytes
_SYNTHESIS_WORD = "SYNTHESIS"  # a mode note beginning so starts synthesis
_STDIN_LIMIT = 65536  # bytes of --text - or --effect -
_BATCH_LINE_LIMIT = 100  # signals in one append --batch
_BATCH_BYTE_LIMIT = 262144  # bytes of append --batch's input
_EXPORT_HEAD_LIMIT = 65536  # bytes read to find record_count
_WARNINGS_LISTED = 20  # problems readers name, then count
_PROBLEMS_LISTED = 100  # problems verify names, then counts
_BACKWARD_BLOCK = 65536  # bytes per block read
_LINE_LIMIT = 1 << 20  # a longer line is no record: reported, never held
_EXPORT_SIZE_LIMIT = 16 << 20  # refused before it is read: restore parses it whole
_META_SIZE_LIMIT = 1 << 20
_SEQ_LIMIT = 999999999  # a seq past it is damage
_LOCK_WAIT_SECONDS = 30.0
_LOCK_WAIT_VARIABLE = "SHAPING_NOTES_LOCK_WAIT"
_LOCK_WAIT_LIMIT = 86400.0
_DUPLICATE_WINDOW_RECORDS = 20  # a repeat in the last N records and S seconds: a retry
_DUPLICATE_WINDOW_SECONDS = 600
# build_record's order; a retry repeats all
_SIGNAL_FIELDS = ("type", "text", "effect", "ref", "status", "provenance", "evidence", "about", "by")
_BATCH_LINK_FIELDS = ("ref", "about", "by")  # "@K" names batch line K
_STALE_TEMPORARY_SECONDS = 600  # a killed write's temporary this old goes

__version__ = "1.2.0"  # pyproject.toml reads it

_DIR_VARIABLE = "SHAPING_NOTES_DIR"
_SESSIONS_FOLDER = "sessions"  # --session NAME: sessions/NAME
_SESSION_NAME_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SESSIONS_LISTED = 100
# The host (the variable, else the folder) words the file to keep.
_HOST_VARIABLE = "SHAPING_NOTES_HOST"
_HOSTS = ("chatgpt", "claude-ai", "local", "mcp")
_HOST_DOWNLOAD_FOLDERS = {"chatgpt": "/mnt/data", "claude-ai": "/mnt/user-data/outputs"}
_RESTORE_CANDIDATES_LIMIT = 20  # exports restore compares
_PATH_LIMIT = 4096  # characters of a path argument (PATH_MAX)
_PATH_DEPTH_LIMIT = 256  # its folders: os.makedirs recurses per missing one
_INSTALLED_FOLDER_NAMES = ("site-packages", "dist-packages")
_SCRIPT_COMMAND = "python3 -S notes.py"
_CONSOLE_COMMAND = "shaping-notes"
_MODULE_COMMAND = "python3 -m notes"

_EXIT_OK = 0
_EXIT_UNEXPECTED = 1
_EXIT_USAGE = 2
_EXIT_INTEGRITY = 3
_EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT

_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_NON_BLOCKING = getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once, then is refused
_FOLDER_ONLY = getattr(os, "O_DIRECTORY", 0)
# chattr's immutable and append-only flags (FS_IOC_GETFLAGS).
_LINUX_PROTECTED_FLAGS = 0x10 | 0x20
_LINUX_GET_FLAGS = 0x80006601 | (8 if sys.maxsize > 2 ** 32 else 4) << 16
_LINUX_GET_FLAGS_MACHINES = (
    "x86_64", "i386", "i486", "i586", "i686", "aarch64", "arm64", "armv6l", "armv7l",
    "armv8l", "riscv64", "s390x", "loongarch64")
# A log replace failing so: it or its folder is protected.
_PROTECTED_ERRORS = (errno.EPERM, errno.EACCES, errno.EROFS)
# The log may hold personal details; exports get the umask's.
_PRIVATE_FILE_MODE = 0o600
_PRIVATE_FOLDER_MODE = 0o700
_UMASK_FILE_MODE = 0o666

# C0 (but tab, LF, CR), DEL, C1 and bidirectional controls.
_FORBIDDEN_CHARACTERS = frozenset(map(chr, [*range(0x20), *range(0x7f, 0xa0), *range(0x202a, 0x202f),
                                           *range(0x2066, 0x206a)])) - {"\t", "\n", "\r"}
# Invisible characters: kept in a note, dropped for the credential test.
_INVISIBLE_CHARACTERS = dict.fromkeys([
    0xad, 0x34f, 0x61c, 0x115f, 0x1160, 0x3164, 0xffa0, 0x17b4, 0x17b5, 0xfeff,
    *range(0x180b, 0x1810), *range(0x200b, 0x2010), *range(0x2060, 0x2065),
    *range(0x206a, 0x2070), *range(0xfe00, 0xfe10), *range(0xe0000, 0xe0080),
    *range(0xe0100, 0xe01f0)])
_INVISIBLE_SET = frozenset(map(chr, _INVISIBLE_CHARACTERS))

_SESSION_ID_LIMIT = 100
# [0-9], unlike \d, is ASCII digits only.
_TIMESTAMP_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_CHECKSUM_SHAPE = re.compile(r"[0-9a-f]{16}")

# (kind, markers, pattern): tried if the lowered text holds a marker (or has none); a named group
# says what _credential_match_is_real checks.
_UUID_SHAPE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_VENDOR_PATTERNS = (
    # A header alone, or with an elided body, is prose.
    ("private key block", ("private key",),
     r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?=[^-]*?[A-Za-z0-9+/])[\s\S]*?"
     r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("private key block", ("private key",),
     r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\n)*"
     r"(?:[A-Za-z-]+: [^\n\\]*(?:\n|\\n)(?:\s|\\n)*)*[A-Za-z0-9+/=]{40}"),
    ("PuTTY private key", ("putty-user-key-file",),
     r"PuTTY-User-Key-File-[0-9]+:[\s\S]{0,3000}?Private-Lines: *[0-9]+\s+(?P<value>[A-Za-z0-9+/]{16,})"),
    ("Google service account key", ("private_key_id",),
     r"\"private_key_id\"\s*:\s*\"(?P<value>[0-9a-f]{40})\""),
    ("AWS secret access key", ("access", "aws"),
     r"(?i:secret[ _-]?access[ _-]?key|aws\w{0,3}[ _-](?:[\w-]+ ){0,3}?secret(?:[ _-]?key)?)"
     r"(?:[ \t]+[\w-]+){0,5}?[\"']?\s*(?:[:=]|\bis\b)\s*[\"']?"
     r"(?P<value>(?=[A-Za-z0-9/+]*[0-9])(?=[A-Za-z0-9/+]*[A-Za-z])[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
    # A port (host:8080/...) or placeholder (${DB_PASSWORD}, <password>) is no password.
    ("URL with a password", ("://",),
     r"[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^\s:/?#@\[\]]*):"
     r"(?P<password>(?![$<{*%\[])(?![0-9]{1,5}(?:[/?#\s]|$))[^\s@]+)@[^\s/?#@]"),
    # curl -u user:password
    ("user and password on a command line", ("-u", "--user"),
     r"(?<!\S)(?:-u|--user)[ =]?[\"']?(?P<user>[^\s:\"']+):(?P<password>(?![$<{*%\[])[^\s\"']{4,})"),
    ("AWS access key id", ("akia", "asia", "abia", "acca"),
     r"(?:AKIA|ASIA|ABIA|ACCA)(?P<value>[A-Z0-9]{16})(?![A-Z0-9])"),
    ("GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_(?P<value>[A-Za-z0-9]{36,})"),
    ("GitHub token", ("github_pat_",), r"github_pat_(?P<value>[A-Za-z0-9_]{40,})"),
    ("Anthropic API key", ("sk-ant-",), r"sk-ant-[a-z]+[0-9]{2}-(?P<value>[A-Za-z0-9_-]{32,})"),
    # Mixed case and digits: sk-2024-fix-login-redirect is no key; hyphens may be joined away.
    ("OpenAI API key", ("sk",),
     r"(?<![A-Za-z0-9_-])sk-?(?:(?:proj|svcacct|admin|None)-?)?(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
     r"(?=[A-Za-z0-9_-]*?(?=[A-Za-z0-9]{20})[A-Za-z]*[0-9])(?P<value>[A-Za-z0-9_-]{32,})"),
    ("Slack token", ("xox",), r"xox[abposr]-(?P<value>[0-9]{8,}-[0-9A-Za-z-]{8,})"),
    ("Slack token", ("xapp-",), r"xapp-[0-9]-[A-Z0-9]+-[0-9]+-(?P<value>[a-z0-9]{16,})"),
    ("Slack webhook URL", ("hooks.slack.com",),
     r"hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/(?P<value>[A-Za-z0-9]{16,})"),
    ("Discord webhook URL", ("discord",),
     r"discord(?:app)?\.com/api/webhooks/[0-9]{15,20}/(?P<value>[A-Za-z0-9_-]{40,})"),
    ("Discord bot token", ("m", "n", "o"),
     r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\."
     r"(?P<random>[A-Za-z0-9_-]{27,40})(?![A-Za-z0-9_-])"),
    ("Microsoft Teams webhook URL", ("webhook.office.com",),
     r"webhook\.office\.com/webhookb2/[0-9a-fA-F-]{36}@[0-9a-fA-F-]{36}/IncomingWebhook/(?P<value>[A-Za-z0-9]{32})"),
    ("Google API key", ("aiza",), r"AIza(?P<value>[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])"),
    ("Google OAuth client secret", ("gocspx-",), r"GOCSPX-(?P<value>[A-Za-z0-9_-]{24,})"),
    ("Google OAuth access token", ("ya29.",), r"ya29\.(?P<value>[A-Za-z0-9_-]{30,})"),
    ("Firebase Cloud Messaging server key", ("apa91b",), r"AAAA[A-Za-z0-9_-]{7}:APA91b(?P<value>[A-Za-z0-9_-]{100,})"),
    ("Stripe secret key", ("_live_", "_test_", "_prod_"),
     r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test|prod)_(?P<value>[0-9A-Za-z]{20,})"),
    ("Stripe webhook secret", ("whsec_",), r"whsec_(?P<value>[A-Za-z0-9+/=]{24,})"),
    ("JSON Web Token", ("eyj",),
     r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.(?P<value>[A-Za-z0-9_-]{8,})"),
    ("GitLab token", ("glpat-", "glptt-", "gldt-", "glrt-"),
     r"gl(?:pat|ptt|dt|rt)-(?P<value>[A-Za-z0-9_-]{20,})"),
    ("Hugging Face token", ("hf_",),
     r"(?<![A-Za-z0-9_])hf_(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[a-z])(?P<value>[A-Za-z0-9]{30,})(?![A-Za-z0-9_])"),
    ("npm token", ("npm_",),
     r"npm_(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])(?P<value>[A-Za-z0-9]{36,})(?![A-Za-z0-9_])"),
    ("SendGrid API key", ("sg.",), r"SG\.(?P<value>[A-Za-z0-9_-]{20,24}\.[A-Za-z0-9_-]{39,50})"),
    ("Twilio API key", ("sk",), r"(?<![A-Za-z0-9])SK(?P<value>[0-9a-fA-F]{32})(?![0-9A-Za-z])"),
    # A SID alone only names an account.
    ("Twilio account SID with its token", ("ac",),
     r"(?<![A-Za-z0-9])AC[0-9a-f]{32}(?![0-9A-Za-z])[^\n]{1,80}?"
     r"(?<![0-9A-Za-z])(?P<value>[0-9a-f]{32})(?![0-9A-Za-z])"),
    ("Azure storage key", ("accountkey=", "sharedaccesskey="),
     r"(?:Account|SharedAccess)Key=(?P<value>[A-Za-z0-9+/]{40,}={0,2})"),
    ("Azure shared access signature", ("sig=",), r"(?<![A-Za-z0-9])sig=(?P<value>[A-Za-z0-9%+/]{30,}(?:%3D|=){0,2})"),
    ("Azure client secret", ("q~",),
     r"(?<![A-Za-z0-9_~.])[A-Za-z0-9_~.]{3}[0-9]Q~(?P<value>[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_~.-])"),
    ("Azure DevOps token", (),
     r"(?<![A-Za-z0-9])(?:(?=[a-z2-7]*[2-7])(?=[a-z2-7]*[a-z])(?P<value>[a-z2-7]{52})"
     r"|[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4})(?![A-Za-z0-9])"),
    ("Shopify token", ("shpat_", "shpca_", "shppa_", "shpss_"), r"shp(?:at|ca|pa|ss)_(?P<value>[a-fA-F0-9]{32})"),
    ("DigitalOcean token", ("_v1_",), r"do[opr]_v1_(?P<value>[a-f0-9]{64})"),
    ("Mailgun API key", ("key-",), r"(?<![A-Za-z0-9-])key-(?P<value>[0-9a-f]{32})(?![0-9A-Za-z])"),
    ("Mailchimp API key", ("-us",), r"(?<![0-9A-Za-z])(?P<value>[0-9a-f]{32})-us[0-9]{1,2}(?![0-9A-Za-z])"),
    ("Square token", ("sq0",), r"sq0(?:atp|csp)-(?P<value>[0-9A-Za-z_-]{22,})"),
    ("Square or Facebook access token", ("eaa",),
     r"(?<![A-Za-z0-9])EAA(?P<random>[A-Za-z0-9_-]{60,})(?![A-Za-z0-9_-])"),
    ("Braintree access token", ("access_token$",),
     r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$(?P<value>[0-9a-f]{32})"),
    ("PyPI token", ("pypi-ageichlwas5vcmc",), r"pypi-AgEIcHlwaS5vcmc(?P<value>[A-Za-z0-9_-]{50,})"),
    ("NuGet API key", ("oy2",), r"(?<![A-Za-z0-9])oy2(?P<value>[a-z0-9]{43})(?![A-Za-z0-9])"),
    ("Heroku token", ("hrku-",), r"HRKU-AA(?P<value>[0-9A-Za-z_-]{58})"),
    ("Docker Hub token", ("dckr_pat_",), r"dckr_pat_(?P<value>[A-Za-z0-9_-]{27,})"),
    ("HashiCorp Vault token", ("hvs.", "hvb."), r"(?<![A-Za-z0-9])hv[sb]\.(?P<value>[A-Za-z0-9_-]{24,})"),
    ("Terraform Cloud token", ("atlasv1",), r"[A-Za-z0-9]{14}\.atlasv1\.(?P<value>[A-Za-z0-9_=-]{60,70})"),
    ("Databricks token", ("dapi",), r"(?<![A-Za-z0-9])dapi(?P<value>[a-f0-9]{32})(?![0-9A-Za-z])"),
    ("Postman API key", ("pmak-",), r"PMAK-(?P<value>[a-f0-9]{24}-[a-f0-9]{34})"),
    ("Linear API key", ("lin_api_",), r"lin_api_(?P<value>[A-Za-z0-9]{40})"),
    ("Atlassian API token", ("atatt3",), r"ATATT3(?P<value>[A-Za-z0-9_=-]{100,})"),
    ("Doppler token", ("dp.",),
     r"(?<![A-Za-z0-9])dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{2,35}\.)?(?P<value>[A-Za-z0-9]{40,})"),
    ("Contentful token", ("cfpat-",), r"CFPAT-(?P<value>[A-Za-z0-9_-]{43})"),
    ("Asana token", (":",), r"(?<![0-9/])[12]/[0-9]{15,17}(?:/[0-9]{15,17})?:(?P<value>[0-9a-f]{32})(?![0-9A-Za-z])"),
    ("Tavily API key", ("tvly-",), r"tvly-(?:[a-z]{2,4}-)?(?P<value>[A-Za-z0-9]{30,})"),
    ("Grafana token", ("glsa_", "glc_"),
     r"(?:glsa_(?P<value>[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})|glc_[A-Za-z0-9+/]{32,}={0,2})"),
    ("New Relic key", ("nrak-",), r"NRAK-(?P<value>[A-Z0-9]{27})"),
    ("Telegram bot token", (":aa",), r"(?<![0-9])[0-9]{8,10}:AA(?P<value>[0-9A-Za-z_-]{33})(?![0-9A-Za-z_-])"),
    ("age secret key", ("age-secret-key-1",), r"AGE-SECRET-KEY-1(?P<value>[0-9A-Z]{58})"),
    ("Alibaba access key", ("ltai",), r"(?<![A-Za-z0-9])LTAI(?P<value>[A-Za-z0-9]{20})(?![A-Za-z0-9])"),
    ("RubyGems key", ("rubygems_",), r"rubygems_(?P<value>[a-f0-9]{48})"),
    ("Supabase token", ("sbp_",), r"sbp_(?P<value>[a-f0-9]{40})"),
    ("Groq API key", ("gsk_",), r"gsk_(?P<value>[A-Za-z0-9]{48,})"),
    ("Replicate token", ("r8_",), r"(?<![A-Za-z0-9_])r8_(?P<value>[A-Za-z0-9]{37})(?![A-Za-z0-9])"),
    ("Notion token", ("ntn_", "secret_"),
     r"(?:ntn_|(?<![A-Za-z0-9_])secret_)(?=[A-Za-z0-9]*[0-9])(?P<value>[A-Za-z0-9]{40,})(?![A-Za-z0-9_])"),
    ("Figma token", ("figd_",), r"figd_(?P<value>[A-Za-z0-9_-]{40,})"),
    ("Perplexity API key", ("pplx-",), r"pplx-(?P<value>[A-Za-z0-9]{48,})"),
    ("xAI API key", ("xai-",), r"(?<![A-Za-z0-9])xai-(?P<value>[A-Za-z0-9]{70,})"),
    ("Mapbox secret token", ("sk.eyj",), r"sk\.eyJ[A-Za-z0-9_-]{20,}\.(?P<value>[A-Za-z0-9_-]{20,})"),
    ("PlanetScale token", ("pscale_",), r"pscale_(?:tkn|pw|oauth)_(?P<value>[A-Za-z0-9_.-]{32,})"),
    ("Fly.io token", ("fo1_",), r"fo1_(?P<value>[A-Za-z0-9_-]{40,})"),
    ("Sentry token", ("sntrys_", "sntryu_"), r"sntry[su]_(?P<value>[A-Za-z0-9+/=_-]{40,})"),
    ("Pulumi token", ("pul-",), r"(?<![A-Za-z0-9])pul-(?P<value>[a-f0-9]{40})"),
    ("1Password service account token", ("ops_eyj",), r"ops_eyJ(?P<value>[A-Za-z0-9+/]{250,}={0,3})"),
    ("Airtable token", ("pat",), r"(?<![A-Za-z0-9])pat[A-Za-z0-9]{14}\.(?P<value>[a-f0-9]{64})"),
    ("Dynatrace token", ("dt0c01.",), r"dt0c01\.[A-Za-z0-9]{24}\.(?P<value>[A-Za-z0-9]{64})"),
    ("EasyPost key", ("ezak", "eztk"), r"EZ[AT]K(?P<value>[A-Za-z0-9]{54})"),
    ("Brevo key", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-(?P<value>[A-Za-z0-9]{16})"),
    ("Octopus Deploy key", ("api-",), r"(?<![A-Za-z0-9])API-(?P<value>[A-Z0-9]{26})(?![A-Za-z0-9])"),
    ("Clojars token", ("clojars_",), r"(?i:CLOJARS_)(?P<value>[a-z0-9]{60})"),
    ("Artifactory key", ("akcp",), r"(?<![A-Za-z0-9])AKCp(?P<value>[A-Za-z0-9]{69})"),
    ("Sourcegraph token", ("sgp_",), r"sgp_(?:[a-fA-F0-9]{16}_|local_)?(?P<value>[a-fA-F0-9]{40})"),
    ("Cloudflare origin CA key", ("v1.0-",), r"v1\.0-[a-f0-9]{24}-(?P<value>[a-f0-9]{146})"),
    ("Bitcoin private key", ("5h", "5j", "5k", "k", "l"),
     r"(?<![A-Za-z0-9])(?P<random>5[HJK][1-9A-HJ-NP-Za-km-z]{49}|[KL][1-9A-HJ-NP-Za-km-z]{51})(?![A-Za-z0-9])"),
    ("Shippo token", ("shippo_",), r"shippo_(?:live|test)_(?P<value>[a-fA-F0-9]{40})"),
    ("ReadMe key", ("rdme_",), r"rdme_(?P<value>[a-z0-9]{70})"),
    ("Frame.io token", ("fio-u-",), r"fio-u-(?P<value>[A-Za-z0-9_=-]{64})"),
    ("Duffel token", ("duffel_",), r"duffel_(?:test|live)_(?P<value>[A-Za-z0-9_=-]{43})"),
    ("Typeform token", ("tfp_",), r"tfp_(?P<value>[A-Za-z0-9_=.-]{59})"),
    ("Infracost key", ("ico-",), r"(?<![A-Za-z0-9])ico-(?P<value>[A-Za-z0-9]{32})"),
    ("Prefect key", ("pnu_",), r"pnu_(?P<value>[A-Za-z0-9]{36})"),
    ("CircleCI token", ("ccipat_",), r"CCIPAT_(?P<value>[A-Za-z0-9]{20,24}_[a-f0-9]{40})"),
    ("Bitbucket app password", ("atbb",), r"(?<![A-Za-z0-9])ATBB(?P<random>[A-Za-z0-9_=.-]{28,})"),
    ("Plaid access token", ("access-",),
     r"access-(?:sandbox|development|production)-(?P<value>" + _UUID_SHAPE + ")"),
    ("Google OAuth refresh token", ("1//0",), r"(?<![A-Za-z0-9/])1//0(?P<value>[A-Za-z0-9_-]{40,})"),
    ("Salesforce session token", ("00d",), r"(?<![A-Za-z0-9])00D[A-Za-z0-9]{12,15}!(?P<value>[A-Za-z0-9_.]{60,})"),
    ("Amazon MWS key", ("amzn.mws.",), r"amzn\.mws\.(?P<value>" + _UUID_SHAPE + ")"),
    ("LaunchDarkly SDK key", ("sdk-",),
     r"(?<![A-Za-z0-9-])sdk-(?P<value>" + _UUID_SHAPE + ")"),
    ("SMTP login", ("auth ",), r"\bAUTH[ \t]+(?:PLAIN|LOGIN)[ \t]+(?P<value>[A-Za-z0-9+/]{12,}={0,2})"),
    ("password hash of an htpasswd line", (":$",),
     r"(?<![\w$])[\w.@-]{1,64}:(?P<value>\$(?:apr1|2[abxy]?|1|5|6|argon2id?)\$[^\s:]{20,})"),
    ("TOTP secret", ("otpauth://",),
     r"otpauth://[th]otp/[^\s?]*\?(?:[^\s#]*&)?secret=(?P<value>[A-Za-z2-7]{16,})"),
    # pk_ and pub_ mark publishable keys.
    ("token with a vendor prefix", ("_",),
     r"(?<![A-Za-z0-9_.-])(?!pk_|pub_|pubkey_|public_)[A-Za-z][A-Za-z0-9]{1,7}_(?:[A-Za-z]{2,8}_)?"
     r"(?P<random>[A-Za-z0-9]{30,})(?![A-Za-z0-9_])"),
    ("token with a vendor prefix", ("-",),
     r"(?<![A-Za-z0-9_.-])[a-z]{2,8}-(?P<random>[A-Za-z0-9]{32,})(?![A-Za-z0-9_+/=-])"),
)
# Password, PIN, door-code words; short ones stand alone (not spin, pinned).
_PASSWORD_WORDS = (
    r"(?:passw(?:or)?d|passwort|kennwort|passphrase|pass ?code|contrase[ñn]a|mot de passe|"
    r"wachtwoord|lösenord|passord|adgangskode|salasana|jelszó|пароль|κωδικός|パスワード|暗証番号|"
    r"密码|密碼|비밀번호|암호|"
    r"(?<![^\W\d_])(?:pwd|pw|pass|pin(?:[ -]?code)?|clave|mdp|senha|has[łl]o|heslo|[şs]ifre|parol[aă]|"
    r"(?:door|gate|alarm|access|entry|unlock|lock|safe|security|keypad) ?code|(?:wi-?fi|wlan|network|wpa2?) key|psk)"
    r"(?![^\W\d_]))"
)
_PASSWORD_MARKERS = (
    "pass", "pw", "kennw", "contrase", "clave", "mdp", "senha", "wachtw", "parol", "hasło", "haslo",
    "heslo", "пароль", "lösenord", "adgangsk", "salasana", "jelsz", "şifre", "sifre", "κωδικ",
    "パスワード", "暗証", "密码", "密碼", "비밀번호", "암호", "pin", "code", " key", "psk")
# Between the word and its value: "is", a colon, "=", an arrow, a bar.
_PASSWORD_OPERATOR = (
    r"[ \t]*[\"'`\])*]{0,2}[ \t]*(?:=>|:=|->|→|[:=：|]|—|–|(?<=[ \t])-(?=[ \t])|は|是|为|為|"
    r"\b(?:(?:is|was)(?: now| still| set to| changed to)?|ist|lautet|es|est|é|è|jest|to|är|er|on)\b)[ \t]*\*{0,2}[ \t]*"
)
_CONTEXT_PATTERNS = (
    ("secret after a word naming it", _PASSWORD_MARKERS,
     r"(?i)(?P<keyword>" + _PASSWORD_WORDS + r")(?P<ident>[\w.-]{0,24}?)"
     r"(?P<operator>(?:[ \t]+(?:[\w'’-]{1,24}|\([^()\n]{1,30}\))){0,6}?" + _PASSWORD_OPERATOR + r")"
     r"[\"'`“„«]?(?P<secret>[^\s\"'`<>;()“”«»]{4,64})"),
    ("secret after a word naming it", _PASSWORD_MARKERS,
     r"(?i)(?P<keyword>" + _PASSWORD_WORDS + r")(?P<operator>[ \t]+)(?P<secret>[^\s\"'`<>;()]{4,64})"),
    # user / password; a path's slash is not spaced.
    ("user and secret pair", ("@",),
     r"(?<![\w.+/-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+[ \t]*[/:|,][ \t]*(?![0-9]{1,5}(?:/|\s|$))(?P<pair>[^\s,;]{6,64})"),
    # A .pgpass line: host:port:database:user:password.
    ("user and secret pair", (":",), r"(?<![\w.:-])[\w.-]+:[0-9]{2,5}:[\w*.-]+:[\w*.@-]+:(?P<pair>[^\s:]{6,64})"),
    ("user and secret pair", ("/", ":"),
     r"(?<![\w/.:-])(?:[A-Za-z][\w.-]{1,30}(?:[ \t]+/[ \t]*|[ \t]*/[ \t]+)"
     r"|(?i:admin|administrator|root|guest|sa|postgres|pi|ubuntu|operator|superuser)[/:])(?P<pair>[^\s/,;]{6,64})"),
    ("secret on a command line", ("mysql", "mariadb"),
     r"\b(?:mysql|mariadb)[\w-]*[^\n|;&]*?(?<!\S)-p(?P<secret>[^\s\"'-][^\s\"']{3,})"),
    ("secret on a command line", ("ldap",), r"\bldap\w+[^\n|;&]*?(?<!\S)-w[ \t]+[\"']?(?P<secret>[^\s\"']{4,})"),
    ("secret on a command line", ("sshpass",), r"\bsshpass[ \t]+-p[ \t]*[\"']?(?P<secret>[^\s\"']{4,})"),
    ("secret on a command line", ("redis-cli",),
     r"\bredis-cli\b[^\n|;&]*?(?<!\S)-a[ \t]+[\"']?(?P<secret>[^\s\"']{4,})"),
    ("secret on a command line", ("login",),
     r"\b(?:docker|podman|helm|buildah|skopeo|oras|nerdctl)\b[^\n|;&]*?\blogin\b[^\n|;&]*?"
     r"(?<!\S)(?:-p|--password)[ \t=]+[\"']?(?P<secret>[^\s\"']{4,})"),
    ("secret on a command line", ("--",),
     r"(?i)(?<!\S)--(?:password|passwd|pass|pwd|secret|token|api-?key|auth-token|access-token|client-secret)"
     r"[ \t=]+[\"']?(?P<secret>[^\s\"']{4,})"),
    ("HTTP basic authorization", ("basic",),
     r"(?i:authorization)[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+(?P<value>[A-Za-z0-9+/]{8,}={0,2})"),
    ("TOTP secret", ("totp", "2fa", "mfa", "otp", "authenticator"),
     r"(?i:totp|2fa|mfa|otp|authenticator)[\w -]{0,20}?(?i:seed|secret|key)\b[^\n:=]{0,40}?"
     r"(?:[:=]|\b(?i:is)\b)[ \t]*(?P<value>(?=[A-Za-z2-7 ]*[2-7])(?:[A-Z2-7]{16,}|[a-z2-7]{16,}"
     r"|(?:[A-Z2-7]{4} ){3,}[A-Z2-7]{4}))(?![A-Za-z0-9])"),
    ("recovery codes", ("code",),
     r"(?i:recovery|backup|2fa|mfa|one-time|scratch)[\w -]{0,20}?(?i:codes?)\b[^\n:=]{0,30}?(?:[:=]|\b(?i:are)\b)?"
     r"[ \t]*(?P<codes>(?=[A-Za-z-]*[0-9])[A-Za-z0-9]{4,10}(?:-[A-Za-z0-9]{4,10})?"
     r"(?:[ \t]*[,;]?[ \t]+[A-Za-z0-9]{4,10}(?:-[A-Za-z0-9]{4,10})?)+)"),
    # _generic_value_is_secret judges the value.
    ("secret after a secret-like word",
     ("key", "token", "secret", "pass", "pwd", "auth", "bearer", "credential", "ssws"),
     r"(?i)(?<!public[ _-])(?<!pub[ _-])(?<!public)(?<!publishable[ _-])(?<!site[ _-])(?<!site)"
     r"(?P<keyword>passw(?:or)?d|passphrase|pwd|secret|token|auth|bearer|credentials?|key|ssws)"
     r"(?P<ident>[\w.-]{0,24}?)"
     r"(?P<operator>(?:[ \t]+(?:[\w'’-]{1,24}|\([^()\n]{1,30}\))){0,5}?"
     r"[ \t]*[\"'`\])*]{0,2}[ \t]*(?:=>|:=|\?=|->|→|[:=|]|\bis\b)[ \t]*\*{0,2}[ \t]*"
     r"|[ \t]+)[\"'`]?(?P<generic>[^\s\"'`,;<>(){}\[\]]{8,})"),
)
_CREDENTIAL_PATTERNS = tuple((kind, markers, pattern, False) for kind, markers, pattern in _VENDOR_PATTERNS) + tuple(
    (kind, markers, pattern, True) for kind, markers, pattern in _CONTEXT_PATTERNS)
# The cheap first look: every secret above shows one; most notes none.
_FIRST_LOOK_SHAPES = re.compile(
    r"[0-9A-Z!#$%&*?@^~|](?:(?<=[^\W\d_][0-9])|(?<=[0-9])[^\W\d_]|(?<=[a-z][A-Z])"
    r"|(?<=[A-Z])[A-Z0-9]{15}|(?<=[^\W_][!#$%&*?@^~|])[^\W_])").search
# A whole prose word of such a shape: version or model (v2, EC2), rank or unit (70th, 10am, 16GB), B&B;
# bracketed, quoted, with 's or a stop.
_PROSE_WORD = re.compile(
    r"[(\"'‘“]{0,2}(?:[A-Za-z][0-9]{1,2}|[A-Za-z]{2}[0-9]|[0-9][A-Za-z]{1,2}|[0-9]{2}[A-Za-z]"
    r"|[0-9]{1,4}(?:st|nd|rd|th|am|pm|ms|min|kg|km|[kKMGT]B)|[A-Z]{1,2}&[A-Z]{1,2})"
    r"(?:['’]s)?[)\"'’”]{0,2}[.,;:]?").fullmatch
_WORD_END = re.compile(r"[^ \t\n]*").match
# Beside a word of capitals or digits it is a key's group ("ASI ARD O37 CJQ").
_GROUP_BEFORE = re.compile(r"(?<!\S)[A-Z0-9]{2,5}[ \t\n]+$").search
_GROUP_AFTER = re.compile(r"[ \t\n]+[A-Z0-9]{2,5}(?!\S)").match
# Not pin, code, key, psk: too common; commands as the command-line rules.
_FIRST_LOOK_WORDS = ("://", "mysql", "mariadb", "ldap", "sshpass", "redis-cli") + _PASSWORD_MARKERS[:-4]
_FIRST_LOOK_PIN = re.compile(r"(?:pin|code)\D{0,40}?[0-9]{4}").search
# A key in groups ("AKIA IOSF ODNN ..."), joined by _find_credential.
_GROUPED_RUN = r"(?<![A-Za-z0-9_])(?:[A-Za-z0-9_]{2,16}[ \t\u00a0\u2009\u202f-]){2,}[A-Za-z0-9_]{2,16}(?![A-Za-z0-9_])"
_SPACED_RUN = r"(?<!\S)(?:[A-Za-z0-9_+/=.-]{1,24}[ \t\u00a0\u2009\u202f]){2,}[A-Za-z0-9_+/=.-]{1,24}(?!\S)"
_GROUP_SEPARATOR = "[ \t\u00a0\u2009\u202f-]"
# Password stand-ins in docs (https://user:pass@host).
_PLACEHOLDER_PASSWORDS = frozenset(["pass", "password", "passwd", "pwd", "pw", "secret", "changeme", "guest"])
_PLACEHOLDER_WORDS = ("example", "sample", "dummy", "placeholder", "redacted", "changeme", "your", "xxxx")
# An SSH public key's base64 body starts so (a private key never does).
_SSH_PUBLIC_KEY_BODY = r"AAAA[A-Za-z0-9+/]{2}(?:NzaC|VjZHNh|NrLXNz)"
_EMAIL_ADDRESS = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
# Algorithm and protocol names that look like passwords.
_ALGORITHM_NAME = (
    r"(?i)(?<![a-z])(?:sha[0-9]*|md5|argon2(?:id|i|d)?|pbkdf2|bcrypt|scrypt|aes[0-9]*|rsa[0-9]*"
    r"|ed25519|base64|utf-?8|oauth2?|http[0-9s]?|tls[0-9.]*|ssl|x509|ipv[46])(?![a-z])")
# Keys opening nothing (cache key, page token); words naming one (key id).
_KEY_THAT_OPENS_NOTHING = (
    r"(?i)(?:cache|partition|primary|foreign|sort|row|object|lookup|dedup\w*|idempotency|"
    r"routing|composite|shard|map|translation|i18n|page|pagination|continuation|cursor|sync|"
    r"next|design|site)[ _-]?$")
_KEY_DESCRIPTION = (
    r"(?i)(?<![a-z])(?:ids?|identifier|name|fingerprint|length|size|type|version|count|rotation|"
    r"policy|expiry|ttl|format|prefix|header|field|file|path|url|hash)(?![a-z])")
_GENERIC_ENTROPY_THRESHOLD = 3.0  # bits per character


_NOTE_ID_LIMIT = 12  # characters: no seq up to SEQ_LIMIT needs more
_REDACTED_TEXT = "[redacted]"
_REDACTION_PREFIX = "Redacted "
_REDACT_REASON_LIMIT = _TEXT_LIMIT - len(_REDACTION_PREFIX) - _NOTE_ID_LIMIT - 2  # the source note's text fits
_REDACT_NOT_ERASED = (
    "redact rewrote the log only: an export made before it, side files of torn tails "
    "(session_notes.jsonl.torn-*), and any copy, backup or hard link of the log still hold the old text; "
    "delete them, and export again")


# --------------------
# Errors: the one exception, NotesError

class NotesError(Exception):
    """A refusal or failure, reported as ``{"ok": false, "error": ...}``."""

    def __init__(self, message: str, exit_code: int = _EXIT_USAGE, details: dict | None = None,
                 help_for: str | None = None):
        super().__init__(message)
        # help_for: the command whose --help to name
        self.message, self.exit_code, self.details, self.help_for = message, exit_code, details or {}, help_for


# --------------------
# Record rules (pure): JSON, checksum, build, validate a line

def _refuse_constant(name):
    raise ValueError("%s is not a JSON number" % name)


def _finite_float(text):
    value = float(text)
    if value - value != 0:  # 1e999 is infinity
        raise ValueError("%s... is too big for a float" % text[:20])
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def _parse_json(text):
    """One JSON document, or ValueError (NaN, huge floats, deep nesting too)."""
    body = text.strip(" \t\n\r")  # JSON's whitespace
    try:
        value, end = _DECODER.raw_decode(body)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if end != len(body):
        raise ValueError("more than one JSON document")
    return value


_COMPACT_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# The checksum's form; checksummed values are never circular.
_CANONICAL_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True, check_circular=False)


_compact_json = _COMPACT_ENCODER.encode


def _pretty_json(value):
    """JSON as v0 indents it."""
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


_TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # sorts as text in time order
_FILE_STAMP = "%Y%m%dT%H%M%SZ"


def _utc_now(form=_TIMESTAMP_FORMAT):
    return time.strftime(form, time.gmtime())


def _note_id_for(seq):
    return "n%05d" % seq


def _record_checksum(record):
    body = dict(record)
    body.pop("checksum", None)
    return hashlib.sha256(_CANONICAL_ENCODER.encode(body).encode("utf-8")).hexdigest()[:16]


def _build_record(session_id, seq, note_type, text, effect=None, ref=None, status=None, provenance=None,
                  evidence=None, about=None, by=None, timestamp=None, batch=None):
    """v0's keys in v0's order, optional fields after, checksum last."""
    record = {"id": _note_id_for(seq), "ts": timestamp or _utc_now(), "session_id": session_id, "seq": seq,
              "type": note_type, "text": text}
    record.update((key, value) for key, value in (("effect", effect), ("ref", ref), ("status", status),
                  ("provenance", provenance), ("evidence", evidence), ("about", about), ("by", by), ("batch", batch))
                  if value)
    record["checksum"] = _record_checksum(record)
    return record


def _record_line(record):
    return (_compact_json(record) + "\n").encode("utf-8")


def _may_hold_credential(text, seam=-1):
    """Whether a credential may be in the text; seam: where an effect joined to it starts."""
    shape, prose_words = _FIRST_LOOK_SHAPES(text), 0
    while shape:
        start = max(text.rfind(space, 0, shape.start()) for space in " \t\n") + 1
        end = _WORD_END(text, start).end()
        prose_words += 1  # a second is more likely a key's groups than prose
        # A word across the seam is neither field's: it counts as it stands.
        if (prose_words > 1 or start < seam < end or not _PROSE_WORD(text, start, end)
                or _GROUP_BEFORE(text, 0, start) or _GROUP_AFTER(text, end)):
            return True
        shape = _FIRST_LOOK_SHAPES(text, end)
    lowered = text.lower()
    return (any(word in lowered for word in _FIRST_LOOK_WORDS)
            or ("pin" in lowered or "code" in lowered) and _FIRST_LOOK_PIN(lowered) is not None)


def _shannon_entropy(value):
    """Bits per character."""
    length = len(value)
    return -sum(count / length * math.log2(count / length) for count in collections.Counter(value).values())


def _is_placeholder(value):
    """Whether the value names itself a stand-in, or hardly varies."""
    lowered = value.lower()
    repeated = re.search(r"(.)\1{5,}", value)  # a run of one character over a quarter of it
    return (any(word in lowered for word in _PLACEHOLDER_WORDS) or _shannon_entropy(value) < 2.0
            or repeated is not None and len(repeated.group()) * 4 >= len(value))


_ANY_CASE_UUID = r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"


def _is_date_or_uuid(value):
    return re.fullmatch(_ANY_CASE_UUID + r"|[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)?",
                        value) is not None


def _is_word_like(value):
    """Whether it is words, an identifier (DB_PASSWORD_FILE, v2.3.1), a UUID or a date."""
    if _is_date_or_uuid(value):
        return True
    pieces = [piece for piece in re.split(r"[-_./#:&=@+,]+", value) if piece]
    word = r"[A-Z]+[0-9]{0,3}|(?:[A-Z]?[a-z]+)+[0-9]{0,3}|(?:[A-Z][a-z]+[0-9]{0,3})+|[0-9]+[A-Za-z]{0,2}"
    return all(re.fullmatch(word, piece) for piece in pieces)


def _reads_as_words(value):
    """Whether its letter runs read as words (SecretsManager, hunter2; not KoVxv1FvrFdf)."""
    runs = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", value)
    return (all(re.search("[aeiouyAEIOUY]", run) for run in runs if len(run) >= 3)
            and sum(len(run) <= 2 for run in runs) * 2 <= len(runs))


def _looks_random(value):
    return (any(map(str.isupper, value)) and any(map(str.islower, value)) and any(map(str.isdigit, value))
            and _shannon_entropy(value) >= 3.5 and not _is_placeholder(value))


def _is_stand_in(value):
    return (not value or value[0] in "$%<{" or "://" in value or value.startswith(("/", "./", "~/", "../"))
            or value.lower() in _PLACEHOLDER_PASSWORDS or _is_placeholder(value))


def _generic_value_is_secret(keyword, operator, value, before=""):
    value = value.rstrip(".:!?")
    # A stand-in, a scheme (arn:aws:..., sha256:...), a publishable or SSH public key.
    if (_is_stand_in(value) or re.match(r"(?i)(?:[a-z]{2,10}|sha[0-9]*|md5):", value)
            or re.search(r"(?i)fingerprint|checksum|digest|(?:sha[0-9]*|md5)[:=]\s*$", operator)
            or value.startswith(("pk_", "pk.", "pub_")) or re.match(_SSH_PUBLIC_KEY_BODY, value)
            or re.fullmatch(r"6L[A-Za-z0-9_-]{38}", value) and "secret" not in before.lower()
            or re.fullmatch(r"0x(?:[0-9A-Fa-f]{8}){1,2}", value)):
        return False  # a reCAPTCHA key is public unless named secret; 0x and 8 or 16 hex: a key id
    if re.fullmatch(_ANY_CASE_UUID, value):
        return re.search(r"(?i)(?:token|secret|auth|passw\w*|api[ _-]?key)$", before) is not None
    if _is_word_like(value):
        return False
    # A digest named so (commit key: <40 hex>, the sha256 of the key is).
    if (re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}|[0-9a-f]{128}", value)
            and re.search(r"(?i)commit|sha|hash|digest|checksum|fingerprint|etag|revision", before)):
        return False
    kinds = sum(any(map(test, value)) for test in (str.islower, str.isupper, str.isdigit, lambda c: not c.isalnum()))
    if len(value) < 16:
        return (keyword.lower().startswith(("pass", "pwd")) and not operator.isspace() and kinds >= 2
                and not value.isalpha())
    if _shannon_entropy(value) < _GENERIC_ENTROPY_THRESHOLD:
        return False
    case_changes = sum(1 for left, right in zip(value, value[1:]) if left.isupper() != right.isupper()
                       and left.isalpha() and right.isalpha())
    return any(map(str.isdigit, value)) or case_changes * 3 >= len(value)


def _password_value_is_secret(keyword, value, explicit):
    """Whether the value after a password, PIN or code word is one; explicit: after an operator."""
    value = value.rstrip(".,:!?)]}")
    lowered = keyword.lower()
    if re.fullmatch(r"[0-9]{4,10}#?", value):  # a PIN; one digit repeated is a stand-in
        digits = value.rstrip("#")
        shortest = 4 if "pin" in lowered or "code" in lowered or not lowered.isascii() else 6
        return (len(digits) >= shortest and len(set(digits)) > 1
                and (explicit or not re.fullmatch(r"(?:19|20)[0-9]{2}", value)))
    if _is_stand_in(value) or re.fullmatch(_EMAIL_ADDRESS, value):
        return False
    if "phrase" in lowered and explicit and re.fullmatch(r"(?i)[a-z]{3,}(?:[-_. ][a-z0-9]+){2,}", value):
        return True
    if (len(value) < 6 or not any(map(str.isalpha, value)) or _is_date_or_uuid(value)
            or re.search(_ALGORITHM_NAME, value) or re.fullmatch(r"[0-9]+[a-z]{1,5}", value)):  # 90days, 16chars
        return False
    if _is_word_like(value) and _reads_as_words(value):  # hunter2 after "password:"
        return explicit and any(map(str.isdigit, value)) and not value.isupper() and value.count("_") < 2
    case_changes = sum(1 for left, right in zip(value, value[1:]) if left.isupper() != right.isupper())
    return not value.isalpha() or explicit and len(value) >= 8 and case_changes >= 3


def _pair_is_secret(value):
    """Whether the value after a user and a slash (or colon) looks a password."""
    value = value.rstrip(".,:!?)]}")
    return (6 <= len(value) and not _is_stand_in(value) and not re.fullmatch(_EMAIL_ADDRESS, value)
            and any(map(str.isalpha, value)) and not value.isalpha()
            and not (_is_word_like(value) and _reads_as_words(value)) and not re.search(_ALGORITHM_NAME, value))


def _codes_are_secret(codes):
    pieces = [piece for piece in re.split(r"[\s,;]+", codes) if piece]
    return (len(pieces) >= 2 and sum(any(map(str.isdigit, piece)) for piece in pieces) * 2 >= len(pieces)
            and not any(piece.isalpha() and piece.islower() for piece in pieces))


def _credential_match_is_real(match):
    groups = match.groupdict()
    following = match.string[match.end():match.end() + 1]
    if groups.get("password") is not None:
        user, password = groups["user"], groups["password"]
        return not (password.lower() in _PLACEHOLDER_PASSWORDS or password == user
                    or user.lower() == "anonymous" or _is_placeholder(password))
    if groups.get("generic") is not None:
        before = match.string[max(0, match.start() - 40):match.end("keyword")]
        if (re.search(_KEY_THAT_OPENS_NOTHING, match.string[max(0, match.start() - 24):match.start()])
                or re.search(_KEY_DESCRIPTION, groups["ident"] + groups["operator"])):
            return False
        return following != "(" and _generic_value_is_secret(
            groups["keyword"], groups["operator"], groups["generic"], before)
    if groups.get("secret") is not None:
        explicit = groups.get("operator") is None or not groups["operator"].isspace()
        return following != "(" and _password_value_is_secret(
            groups.get("keyword") or "password", groups["secret"], explicit)
    for name, judge in (("pair", _pair_is_secret), ("codes", _codes_are_secret), ("random", _looks_random)):
        if groups.get(name) is not None:
            return judge(groups[name])
    return groups.get("value") is None or not _is_placeholder(groups["value"])


# (index, marker) per marker of each rule; "" (in every text) for one without.
_PATTERN_MARKERS = tuple(
    (index, marker) for index, (_, markers, _, _) in enumerate(_CREDENTIAL_PATTERNS)
    for marker in markers or ("",))


def _credential_kind_in(text, context=True, across=None):
    """The first credential's kind (with across, one over that position), or None."""
    lowered = text.lower()
    for index in sorted({index for index, marker in _PATTERN_MARKERS if marker in lowered}):
        kind, _, pattern, is_context = _CREDENTIAL_PATTERNS[index]
        if is_context and not context:
            continue
        search = re.compile(pattern).search
        match = search(text)
        while match:
            if (across is None or match.start() < across < match.end()) and _credential_match_is_real(match):
                return kind
            match = search(text, match.start() + 1)
    return None


def _join_key_groups(run):
    """The run without its separators, unless half its pieces are words."""
    pieces = [piece for piece in re.split(_GROUP_SEPARATOR + "+", run.group()) if piece]
    words = sum(1 for piece in pieces if piece.isalpha() and piece.islower())
    return run.group() if words * 2 >= len(pieces) else re.sub(
        "[ \t\u00a0\u2009\u202f]" if run.re.pattern == _SPACED_RUN else _GROUP_SEPARATOR, "", run.group())


def _joined_kind_in(text):
    """The vendor key kind a run of groups holds once joined, or None."""
    for run in (_GROUPED_RUN, _SPACED_RUN):
        joined = re.sub(run, _join_key_groups, text)
        kind = joined != text and _credential_kind_in(joined, context=False)
        if kind:
            return kind
    return None


def _find_credential(text):
    return _may_hold_credential(text) and (_credential_kind_in(text) or _joined_kind_in(text)) or None


def _visible_text(value):
    # Plain form: value.translate(_INVISIBLE_CHARACTERS); the set test saves a copy.
    return value if value.isascii() or _INVISIBLE_SET.isdisjoint(value) else value.translate(_INVISIBLE_CHARACTERS)


def _split_credential_problem(text, effect):
    text, effect = _visible_text(text), _visible_text(effect or "")
    if not effect or not _may_hold_credential(text + effect, len(text)):
        return None
    # Only a match over the seam counts.
    kind = (_credential_kind_in(text + effect, context=False, across=len(text))
            or _credential_kind_in(text + " " + effect, across=len(text)) or _joined_kind_in(text + " " + effect))
    return kind and ("credential", "and effect together seem to hold a credential (%s) split between them" % kind)


def _signal_problem(value, limit, suspect=True):
    """What append refuses in a text or effect, (kind, detail without the value), or None."""
    if not value.isprintable():  # all below are unprintable: plain text skips them
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "invalid_unicode", "holds text that is not valid UTF-8 (a lone surrogate)"
        for position, character in enumerate(value):
            if character in _FORBIDDEN_CHARACTERS:
                code = ord(character)
                return "control_character", "holds the control character U+%04X (%s) at position %d" % (code, (
                    "C0 control" if code < 0x7f else "DEL" if code == 0x7f else "C1 control" if code < 0xa0
                    else "bidirectional override" if code < 0x2066 else "bidirectional isolate"), position)
    if len(value) > limit:
        return "too_long", "is %d characters; the limit is %d" % (len(value), limit)
    # A key split by invisible (printable) characters is a key.
    kind = suspect and _find_credential(_visible_text(value))
    return kind and ("credential", "seems to hold a credential (%s)" % kind)


_REFUSAL_ADVICE = {
    "invalid_unicode": "; re-send it as plain UTF-8 text",
    "control_character": "; remove it (tab, newline and carriage return are the only control characters kept)",
    "too_long": ": a memory signal is a pointer; keep the content in the conversation and record only the "
                "decision, gate or boundary",
    "credential": "; credentials never enter the log, which gets exported and shared: say where the secret "
                  "lives instead",
}


def _clean_field(name, value, limit):
    value = (value or "").strip()
    found = _signal_problem(value, limit)
    if found:
        raise NotesError("--%s %s%s" % (name, found[1], _REFUSAL_ADVICE[found[0]]))
    return value


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise NotesError("unknown --%s; use one of: %s" % (name, ", ".join(allowed)))


def _clean_signal(note_type, text, effect, ref, status, provenance=None, evidence=None, about=None, by=None):
    if note_type is None:
        raise NotesError("--type is required; use one of: %s" % ", ".join(NOTE_TYPES), help_for="append")
    if text is None:
        raise NotesError("--text is required: say what to keep", help_for="append")
    # The Python API bypasses the parser's checks.
    for name, value, allowed in (
        ("type", note_type, NOTE_TYPES), ("provenance", provenance, PROVENANCES),
        ("evidence", evidence, EVIDENCE_LEVELS), ("status", status, GATE_STATUSES)):
        if value is not None:
            _check_choice(name, value, allowed)
    text = _clean_field("text", text, _TEXT_LIMIT)
    if not text:
        raise NotesError("--text is empty; a memory signal needs a text that says what to keep")
    if text == _REDACTED_TEXT:  # verify would take it for a redaction nobody recorded
        raise NotesError("--text %s is the placeholder redact leaves; say what to keep" % _REDACTED_TEXT)
    effect = _clean_field("effect", effect, _EFFECT_LIMIT) or None
    split = _split_credential_problem(text, effect)
    if split:
        raise NotesError("--text %s%s" % (split[1], _REFUSAL_ADVICE["credential"]))
    rule = _gate_rule_broken(note_type, ref, status, by)
    if rule:
        raise NotesError(_GATE_RULES[rule][1])
    ref, about, by = _clean_link("ref", ref), _clean_link("about", about), _clean_link("by", by)
    return dict(zip(_SIGNAL_FIELDS, (note_type, text, effect, ref, status, provenance, evidence, about, by)))


def _clean_link(name, value):
    cleaned = _as_note_id(value)
    if value is not None and cleaned is None:  # not echoed: it may be a pasted secret
        raise NotesError("--%s is not a note id; ids look like n00012 (tail or recap lists them)" % name)
    return cleaned


def _is_note_id(value) -> bool:
    """n and five to eleven digits; a longer one is damage."""
    return (isinstance(value, str) and 6 <= len(value) <= _NOTE_ID_LIMIT and value[0] == "n"
            and value[1:].isdigit() and value.isascii())


def _as_note_id(value):
    value = value.strip() if isinstance(value, str) else value
    return value if _is_note_id(value) else None


def _is_seq(value):
    return type(value) is int and 1 <= value <= _SEQ_LIMIT


def _is_timestamp(value):
    return type(value) is str and _TIMESTAMP_SHAPE.fullmatch(value) is not None


def _is_session_id(value):
    return (isinstance(value, str) and 0 < len(value) <= _SESSION_ID_LIMIT and value.isprintable()
            and not value.isspace())


def _batch_place(place):
    """(K, N) from "K/N" (1 <= K <= N, no leading zero), else None."""
    match = type(place) is str and re.fullmatch(r"([1-9][0-9]{0,8})/([1-9][0-9]{0,8})", place)
    place = match and (int(match.group(1)), int(match.group(2)))
    return place if place and place[0] <= place[1] else None


def _batch_place_of(value):
    return _batch_place(value.get("batch")) if isinstance(value, dict) else None


def _parse_line(raw):
    """(object, None) or (None, problem kind) for one line."""
    try:
        value = _parse_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not_utf8"
    except ValueError:
        return None, "not_json"
    if not isinstance(value, dict):
        return None, "not_object"
    return value, None


_PROBLEM_DETAILS = {
    "not_utf8": "the line is not valid UTF-8",
    "not_json": "the line is not readable JSON",
    "not_object": "the line is JSON but not an object",
    "missing_field": "the record lacks a field",
    "bad_field": "a field holds a value of the wrong kind",
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
    "gate_rule": "the record breaks a rule append keeps for gates",
    "supersede_rule": "the record supersedes (ref) a note labelled op or shared without being so labelled, which "
                      "append now refuses: check the change with the operator",
    "seq_repeated": "the seq repeats or goes back",
    "seq_gap": "seq numbers are missing before this record",
    "torn_tail": "the last line is cut off (a crash mid-write); the next append moves it to a side file",
    "missing_newline": "the last record lacks its newline; the next append adds it",
    "line_too_long": "the line is over 1 MiB, longer than any record; it was passed over",
    "batch_broken": "a batch is not whole: its lines K/N must run 1/N to N/N in a row",
    "incomplete_batch": "the last lines are an incomplete batch, not notes; the next append moves them to a side file",
    "redaction_unexplained": "the note holds redact's placeholder, but no later source note says why: it was "
                             "edited by hand, or redact was cut short (run redact on it again)",
}
_UNUSABLE = frozenset(("missing_field", "bad_field", "invalid_unicode"))  # readers skip such a record

_REQUIRED_FIELDS = ("id", "ts", "session_id", "seq", "type", "text", "checksum")
_NOTE_ID_RULE = (_is_note_id, "a note id (n and five to eleven digits)")
_STRING_RULE = (lambda value: type(value) is str, "a string")
_FIELD_RULES = {
    "id": _NOTE_ID_RULE, "ts": (_is_timestamp, "a UTC time YYYY-MM-DDTHH:MM:SSZ"), "session_id": _STRING_RULE,
    "seq": (_is_seq, "a whole number from 1 to %d" % _SEQ_LIMIT), "type": _STRING_RULE, "text": _STRING_RULE,
    "effect": _STRING_RULE, "ref": _NOTE_ID_RULE, "about": _NOTE_ID_RULE, "by": _NOTE_ID_RULE,
    "status": (lambda value: value in GATE_STATUSES, "open, deferred or closed"),
    "provenance": (lambda value: value in PROVENANCES, "one of: " + ", ".join(PROVENANCES)),
    "evidence": (lambda value: value in EVIDENCE_LEVELS, "one of: " + ", ".join(EVIDENCE_LEVELS)),
    "batch": (lambda value: _batch_place(value) is not None, "K/N, line K of an N-line batch (1 <= K <= N)"),
    "checksum": (lambda value: type(value) is str and _CHECKSUM_SHAPE.fullmatch(value) is not None,
                 "16 lowercase hex digits"),
}
_PLAIN_RULE = (lambda value: value - value == 0 if isinstance(value, float) else  # not infinite, not NaN
               value is None or isinstance(value, (str, int)), "a string, a number, true, false or null")


def _field_problems(record):
    """[] or one (kind, detail) naming each field of a wrong kind."""
    for key in _REQUIRED_FIELDS:
        if key not in record:
            return [("missing_field", "the record lacks its %s field" % key)]
    wrong = [key for key, value in record.items() if not _FIELD_RULES.get(key, _PLAIN_RULE)[0](value)]
    if not wrong:
        return []
    # an unknown field's name is not echoed
    return [("bad_field", "; ".join(
        "the %s field is not %s" % (key, _FIELD_RULES[key][1]) if key in _FIELD_RULES
        else "another field holds a list, an object or a number too big" for key in wrong))]


def _check_record(record, session_id):
    problems = _field_problems(record)
    if problems:
        return problems
    problems = _record_text_problems(record["text"], record.get("effect"))
    if not record["text"] or record["text"].isspace():
        problems.append(("empty_text", None))
    try:
        checksum = _record_checksum(record)
    except UnicodeEncodeError:  # a lone surrogate anywhere
        return [problem for problem in problems if problem[0] != "invalid_unicode"] + [("invalid_unicode", None)]
    problems += [(kind, None) for kind, broken in (
        ("bad_checksum", checksum != record["checksum"]), ("id_mismatch", record["id"] != _note_id_for(record["seq"])),
        ("foreign_session", session_id is not None and record["session_id"] != session_id),
        ("unknown_type", record["type"] not in NOTE_TYPES)) if broken]
    rule = _gate_rule_broken(record["type"], record.get("ref"), record.get("status"), record.get("by"))
    if rule:
        problems.append(("gate_rule", _GATE_RULES[rule][0]))
    return problems


def _record_text_problems(text, effect):
    """What append would refuse in a stored text and effect: (kind, detail)."""
    # One first look for both, joined: a key may be split across them.
    seen = _visible_text(text)
    suspect = _may_hold_credential(seen + _visible_text(effect or ""), len(seen))
    problems = []
    for key, value, limit in (("text", text, _TEXT_LIMIT), ("effect", effect, _EFFECT_LIMIT)):
        found = _signal_problem(value, limit, suspect) if value is not None else None
        if found:
            problems.append((found[0], "the %s %s" % (key, found[1])))
    if suspect and not problems:
        split = _split_credential_problem(text, effect)
        if split:
            problems.append((split[0], "the text %s" % split[1]))
    return problems


# Rules append keeps: kind -> (a reader's word on a breach, the refusal).
_GATE_RULES = {
    "status": ("the record has a status, which only a gate has",
               "--status applies only to --type gate; drop it, or record a gate"),
    "no_status": ("the gate update has a ref but no status",
                  "a gate update (--ref) needs --status open, deferred or closed"),
    "closed": ("the new gate starts closed",
               "a new gate cannot start closed; open it, then close it with --ref <its id> --status closed"),
    "by": ("the record has a by, which only a gate update has",
           "--by names the note that settles a gate update (--type gate --ref <the gate> --status ...); to link "
           "any other note, use --about"),
}


def _gate_rule_broken(note_type, ref, status, by):
    """The gate rule these fields (None: absent) break."""
    if note_type != "gate" and status is not None:
        return "status"
    if note_type == "gate" and ref is not None and status is None:
        return "no_status"
    if note_type == "gate" and ref is None and status == "closed":
        return "closed"
    if by is not None and (note_type != "gate" or ref is None):
        return "by"
    return None


_LINK_RULES = {
    "missing": ("the %(name)s %(id)s names no earlier note", None),
    "ref_not_gate": ("the gate update's ref %(id)s is not a gate",
                     "--ref %(id)s is a %(type)s, not a gate; a gate update must name the gate it changes"),
    "ref_gate": ("the ref %(id)s names a gate, which changes only by gate updates",
                 "--ref %(id)s is a gate, which changes only by a gate update: --type gate --ref %(id)s --status ..."),
    "by_gate": ("the by %(id)s names a gate, not a note that settles one",
                "--by %(id)s is a gate; name the note that settles this gate (a decision, a source), appended first"),
    "supersede": (None, "--ref %(id)s would supersede a note labelled --provenance %(provenance)s, and this note is "
                        "not op or shared; nothing was written. To answer or refine it, use --about %(id)s (both "
                        "stay live); if the operator confirmed the change, add --provenance op (or shared)"),
}


def _link_rule_broken(name, note_type, target_type, target_firm, provenance):
    if name == "ref" and (note_type == "gate") != (target_type == "gate"):
        return "ref_not_gate" if note_type == "gate" else "ref_gate"
    if name == "by" and target_type == "gate":
        return "by_gate"
    if name == "ref" and note_type != "gate" and target_firm and provenance not in _FIRM_PROVENANCES:
        return "supersede"
    return None


class _SeqKinds:
    """Which seqs are gates or firm notes: a byte each; far seqs in a dict."""

    GATE, FIRM = 1, 2

    def __init__(self):
        self.dense, self.far, self.added = bytearray(), {}, 0

    def add(self, seq: int, kind: int):
        self.added += 1
        if seq < min(len(self.dense), 8 * self.added) + 4096:  # seqs stepping far apart (damage) go to far
            self.dense.extend(bytes(max(0, seq + 1 - len(self.dense))))
            self.dense[seq] |= kind
        else:
            self.far[seq] = self.far.get(seq, 0) | kind

    def get(self, seq: int) -> int:
        return (self.dense[seq] if seq < len(self.dense) else 0) | self.far.get(seq, 0)


class _LogOrder:

    def __init__(self):
        self.kinds = _SeqKinds()  # gates and non-gate notes labelled op or shared
        self.highest = self.damaged = self.line = 0  # highest seq; lines since it with none; lines so far
        self.batch_next, self.batch_line = None, 0  # (K, N) the next line must hold; where its batch started
        self.notices, self.notice_count = [], 0  # supersede notices, as verify's entries

    def place_problems(self, value, kinds):
        """Problems of a record (None: unreadable) from its place."""
        seq = value.get("seq") if value is not None else None
        order = _seq_order_problem(seq, self.highest, self.damaged)
        found = [(order, None)] if order else []
        self.highest, self.damaged = (max(self.highest, seq), 0) if _is_seq(seq) else (self.highest, self.damaged + 1)
        self.line += 1
        if self.batch_next is not None or (value is not None and "batch" in value):
            found.extend(self.batch_problems(value))
        if value is None or not _is_usable(kinds):
            return found
        if "ref" in value or "about" in value or "by" in value:
            found.extend(self.link_problems(value))
        if value["type"] == "gate":
            self.kinds.add(value["seq"], _SeqKinds.GATE)
        elif value.get("provenance") in _FIRM_PROVENANCES:
            self.kinds.add(value["seq"], _SeqKinds.FIRM)
        return found

    def link_problems(self, record):
        found = []
        for name in ("ref", "about", "by"):
            link = record.get(name)
            if link is None:
                continue
            target, provenance = int(link[1:]), record.get("provenance")
            target_kind = self.kinds.get(target)
            firm = bool(target_kind & _SeqKinds.FIRM)
            # A notice, beside what else is wrong.
            if _link_rule_broken(name, record["type"], "note", firm, provenance) == "supersede":
                self.notice_count += 1
                if len(self.notices) < _PROBLEMS_LISTED:
                    self.notices.append(_problem(self.line, record["id"], "supersede_rule"))
            kind = "missing" if not 1 <= target < record["seq"] else _link_rule_broken(
                name, record["type"], "gate" if target_kind & _SeqKinds.GATE else "note", firm, provenance)
            if kind and kind != "supersede":
                found.append(("ref_target" if name == "ref" else "link_target",
                              _LINK_RULES[kind][0] % {"name": name, "id": link}))
        return found

    def batch_problems(self, value):
        place, found = _batch_place_of(value), []
        if self.batch_next is not None:
            if value is None:
                place = self.batch_next  # a damaged line may have held the batch's next line
            elif place != self.batch_next:
                found.append(("batch_broken", self.unfinished_detail()))
                self.batch_next = None
        if place is None:
            return found
        if self.batch_next is None:  # this line must start a batch
            if place[0] != 1:
                found.append(("batch_broken", "line %d of a %d-line batch without its earlier lines right before it"
                              % place))
                return found
            self.batch_line = self.line
        self.batch_next = (place[0] + 1, place[1]) if place[0] < place[1] else None
        return found

    def unfinished_detail(self):
        return "the batch that starts at line %d stops after %d of its %d lines" % (
            self.batch_line, self.batch_next[0] - 1, self.batch_next[1])

    def unfinished_batch(self):
        return self.batch_next and _problem(self.batch_line, None, "batch_broken", self.unfinished_detail())


def _is_usable(problems):
    return not problems or not any(kind in _UNUSABLE for kind, _ in problems)


def _seq_order_problem(seq, highest, damaged):
    """seq_repeated, seq_gap or None; each damaged line may hold a seq."""
    if not _is_seq(seq) or highest < seq <= highest + 1 + damaged:
        return None
    return "seq_repeated" if seq <= highest else "seq_gap"


# tail names these by offset
_LINE_PROBLEMS = frozenset(
    ("not_utf8", "not_json", "not_object", "torn_tail", "missing_newline", "line_too_long", "incomplete_batch"))


def _problem(line, record_id, kind, detail=None):
    return {"line": line, "id": record_id, "kind": kind, "detail": detail or _PROBLEM_DETAILS[kind]}


class _ProblemTally:

    def __init__(self):
        self.problems, self.problem_count = [], 0

    def note_line_problems(self, number, value, kinds):
        # Only a note id is named: any other could be anything.
        record_id = value["id"] if value is not None and _is_note_id(value.get("id")) else None
        self.problem_count += len(kinds)
        for kind, detail in kinds[:_PROBLEMS_LISTED - len(self.problems)]:
            self.problems.append(_problem(number, record_id, kind, detail))

    def note_problems(self, found):
        self.problem_count += len(found)
        self.problems.extend(found[:_PROBLEMS_LISTED - len(self.problems)])


def _parse_time_filter(value, name):
    if value is None:
        return None
    stamp = value + "T00:00:00Z" if len(value) == 10 else value
    try:
        if not _is_timestamp(stamp):
            raise ValueError(value)  # strptime alone takes "2026-1-01" and other digits
        time.strptime(stamp, _TIMESTAMP_FORMAT)  # month 13, February 30, year 0
    except ValueError:
        raise NotesError("--%s is not a UTC time; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, with a year from 0001"
                         % name) from None
    return stamp


def _check_limit(value):
    if value < 1:
        raise NotesError("--limit must be 1 or more")
    if value > _LIMIT_MAX:
        raise NotesError("--limit is at most %d; to read the whole log, use export (or --since and --until "
                         "for a stretch of it)" % _LIMIT_MAX)
    return value


def _is_redacted(record):
    return record.get("text") == _REDACTED_TEXT


def _is_redaction_note(record, note_id=None):
    """Whether record is a redaction's source note (of note_id)."""
    return (record.get("type") == "source" and _is_note_id(record.get("about"))
            and isinstance(record.get("text"), str) and record["text"].startswith(_REDACTION_PREFIX)
            and (note_id is None or record["about"] == note_id))


def _redacted_record(record):
    redacted = {key: _REDACTED_TEXT if key in ("text", "effect") else value for key, value in record.items()}
    redacted["checksum"] = _record_checksum(redacted)
    return redacted


# --------------------
# Storage: folder, lock, reading either end, appending, atomic writes

def _log_path(folder):
    return os.path.join(folder, _LOG_NAME)


def _invoked_as():
    started = os.path.basename(sys.argv[0]) if sys.argv else ""
    if os.path.splitext(started)[0] == _CONSOLE_COMMAND:
        return _CONSOLE_COMMAND
    if __name__ == "__main__" and getattr(globals().get("__spec__"), "name", None) == "notes":
        return _MODULE_COMMAND
    return "python3 -S " + shlex.quote(sys.argv[0]) if __name__ == "__main__" and started else _SCRIPT_COMMAND


def _on_folder(folder):  # as given and quoted: a hint runs as shown
    return "%s --dir %s" % (_invoked_as(), shlex.quote(folder))


def _is_installed_package_folder(folder):
    """Whether an installer put notes.py in folder."""
    if os.path.basename(folder).lower() in _INSTALLED_FOLDER_NAMES:
        return True
    try:
        return any(n.lower().startswith("shaping_notes-") and n.lower().endswith(".dist-info")
                   for n in os.listdir(folder))
    except OSError:
        return False


def _check_dir_argument(folder):
    if folder is not None and not os.fspath(folder).strip():
        raise NotesError("--dir is empty; pass the session folder, for example --dir /mnt/data/shaping")
    _check_path_text("--dir", folder)


def _check_path_text(name, path):
    """Refuse a path no file system takes (os calls would raise)."""
    if path is None:
        return
    text = os.fsdecode(path)
    if "\0" in text:
        raise NotesError("%s holds a NUL character, which no file name can; pass the path without it" % name)
    if len(text) > _PATH_LIMIT or text.replace(os.sep, "/").count("/") > _PATH_DEPTH_LIMIT:
        raise NotesError("%s is over %d characters or %d folders deep, more than a file system takes; pass a "
                         "shorter path" % (name, _PATH_LIMIT, _PATH_DEPTH_LIMIT))


def _check_session_name(name, what="--session"):
    if name is not None and not (isinstance(name, str) and _SESSION_NAME_SHAPE.fullmatch(name)):
        raise NotesError("%s takes 1 to 64 letters, digits, -, _ or ., the first a letter or digit (such as "
                         "pricing-page); the name given is not one" % what)


def _user_data_folder():
    if os.name == "nt":
        base, usual = os.environ.get("LOCALAPPDATA", ""), ("AppData", "Local")
    elif sys.platform == "darwin":
        base, usual = "", ("Library", "Application Support")
    else:
        base, usual = os.environ.get("XDG_DATA_HOME", ""), (".local", "share")
    if not os.path.isabs(base):  # HOME empty: "~" stays (expanduser gives "/")
        home = os.environ.get("HOME")
        base = os.path.join("~" if os.name != "nt" and home is not None and not home.strip()
                            else os.path.expanduser("~"), *usual)
    return os.path.join(base, _CONSOLE_COMMAND)


def _default_folder(create=True):
    """This file's folder; installed, the user's data folder (made if create)."""
    here = os.path.dirname(os.path.realpath(__file__))
    if not _is_installed_package_folder(here):
        return here
    folder = _user_data_folder()
    if not os.path.isabs(folder):  # no home: "~" stayed
        raise NotesError(
            "notes.py is installed as a package and cannot tell your home folder; pass --dir "
            "(for example: %s --dir /absolute/path/to/shaping init) or set %s"
            % (_invoked_as(), _DIR_VARIABLE))
    try:  # Crash window: mkdirs left undone by a stop are done by the next run.
        if create:
            _make_private_folders(folder)  # 0700, as XDG asks
    except OSError as error:
        raise NotesError(
            "notes.py is installed as a package but cannot create its data folder %s (%s); pass "
            "--dir (for example: %s --dir ~/shaping init) or set %s"
            % (folder, error.strerror or error, _invoked_as(), _DIR_VARIABLE)) from None
    return os.path.realpath(folder)


def _resolve_folder(folder, session=None, create=True):
    """--dir, else $SHAPING_NOTES_DIR, else the default folder; with session, its sessions/NAME."""
    if folder is None:
        folder = os.environ.get(_DIR_VARIABLE)
        if folder is not None and not folder.strip():  # a mistake, not the default
            raise NotesError("%s is set but empty; set it to the session folder, unset it, or pass --dir"
                             % _DIR_VARIABLE)
    folder = _default_folder(create) if folder is None else os.path.realpath(os.path.expanduser(folder))
    _check_folder_is_private(folder)
    if session is None:
        return folder
    for path in (os.path.join(folder, _SESSIONS_FOLDER), os.path.join(folder, _SESSIONS_FOLDER, session)):
        _check_folder_is_private(os.path.realpath(path))
    return os.path.realpath(path)


def _check_folder_is_private(folder):
    """Refuse a session folder or file another user could read or swap."""
    for name, kind in (("", "folder"), (_META_NAME, "meta"), (_LOG_NAME, "log"), (_LOCK_NAME, "lock")):
        path = os.path.join(folder, name) if name else folder
        try:
            status = os.lstat(path)
        except OSError:  # missing (made later by this user) or refused when used
            continue
        _check_owner(path, status, "the session " + kind)


def _check_owner(path, status, kind):
    """Refuse what another user (not root) owns, or a folder all may write, not sticky."""
    if os.name == "nt" or not hasattr(os, "geteuid"):
        return
    if status.st_uid not in (0, os.geteuid()):
        raise NotesError(
            "%s %s belongs to another user (uid %d), who could read or swap the notes; nothing was "
            "read or written. %s --dir with a folder of your own" % (
                kind, path, status.st_uid, "Pass" if stat.S_ISDIR(status.st_mode) else
                "Move it aside, or pass"))
    if stat.S_ISDIR(status.st_mode) and status.st_mode & stat.S_IWOTH and not status.st_mode & stat.S_ISVTX:
        raise NotesError(
            "%s %s is writable by every user without the sticky bit, so anyone could swap its log; "
            "nothing was read or written. Run chmod 700 %s, or pass --dir with a folder of your own"
            % (kind, path, path))


def _folder_error(folder, error):
    return _write_error(folder, error, "pass --dir with a folder you can write")


def _write_error(path, error, way_out):
    """On a full disk another folder on it would not help: say so."""
    if error.errno in _NO_ROOM_ERRORS:
        return NotesError(
            "no room left on the disk holding %s (%s); nothing was written. Free some space, then "
            "run the command again" % (path, error.strerror or error))
    return NotesError("cannot create or write %s (%s); %s" % (path, error.strerror or error, way_out))


def _link_error(path):
    return NotesError(
        "%s is a symbolic link, which notes.py never writes through; replace it with the real "
        "file, or use another --dir" % path)


def _special_file_error(path, mode):
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file")
    return NotesError(
        "%s is %s, not a regular file, which could block for ever; move it aside, or pass "
        "another path" % (path, kind))


def _open_regular_file(path, flags=os.O_RDONLY, follow=True):
    """os.open, refusing all but a regular file (O_NONBLOCK: no FIFO blocks), and a link if not follow."""
    if not (follow or _NO_FOLLOW) and os.path.islink(path):
        raise _link_error(path)
    try:
        fd = os.open(path, flags | _NON_BLOCKING | _BINARY | (0 if follow else _NO_FOLLOW), _PRIVATE_FILE_MODE)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a socket cannot be opened at all
            raise _special_file_error(path, os.stat(path).st_mode) from None
        if not follow and error.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise _link_error(path) from None
        raise
    try:  # Ctrl-C or a failing fstat must not leak the descriptor
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            raise _special_file_error(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_meta(folder):
    """The meta, or None; refuse a damaged one."""
    path = os.path.join(folder, _META_NAME)
    try:
        with open(_open_regular_file(path), "rb") as handle:
            raw = handle.read(_META_SIZE_LIMIT + 1)  # not stat: it may grow meanwhile
        if len(raw) > _META_SIZE_LIMIT:
            raise NotesError("%s is over 1 MiB, far larger than a session meta; move it aside" % path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # --dir names a file
        raise NotesError("--dir %s is a file, not a folder; pass the session folder" % folder) from None
    except IsADirectoryError:
        raise NotesError("%s is a folder, not the session meta; move it aside" % path) from None
    except OSError as error:
        raise NotesError("cannot read %s (%s)" % (path, error.strerror)) from None
    meta = _parse_line(raw)[0]
    if meta is None or not isinstance(meta.get("session_id"), str) or not meta["session_id"]:
        raise NotesError("%s is damaged (not a JSON object with a session_id); nothing was changed. Restore an "
                         "export into a new --dir, or move the folder aside and run init" % path)
    return meta


def _starts_as_export(file, starts=(_EXPORT_JSON_START, _EXPORT_MARKDOWN_START)):
    """Whether a path or descriptor (at its start) begins as our or v0's export."""
    try:
        descriptor = file if isinstance(file, int) else _open_regular_file(file)
    except (OSError, NotesError):
        return False
    with open(descriptor, "rb", closefd=descriptor is not file) as handle:
        return handle.read(len(_EXPORT_JSON_START)).startswith(starts)


def _exports_in(folder):
    """Sorted paths of the folder's JSON exports, not hidden (in progress) or links."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise NotesError("cannot read %s (%s); pass the export's path: restore PATH" % (folder, error.strerror))
    return [e.path for e in entries if e.name[0] != "." and e.name not in (_META_NAME, _LOG_NAME, _LOCK_NAME)
            and e.is_file(follow_symlinks=False) and _starts_as_export(e.path, (_EXPORT_JSON_START,))]


def _require_session(folder):
    meta = _read_meta(folder)
    if meta is None:
        raise NotesError(_no_session(folder))
    return meta


def _no_session(folder):
    run = _on_folder(folder) + " "
    if found := _exports_in(folder):  # what restore with no path reads
        return "no session in %s, but %s is there: restore it with: %srestore, or start anew with: %sinit" % (
            folder, os.path.basename(found[-1]), run, run)
    return ("no session in %s (no %s there: none began, or its files are gone); start one with: %sinit, or restore "
            "an uploaded export with: %srestore PATH" % (folder, _META_NAME, run, run))


def _fsync_folder(folder):
    if os.name == "nt":  # Windows cannot open a folder
        return
    fd = folder if isinstance(folder, int) else os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
    finally:
        if fd is not folder:
            os.close(fd)


def _tighten(fd):
    """Make a session file this user owns private."""
    try:
        status = os.fstat(fd)  # a hard-linked file's other name is not ours
        if status.st_uid == os.geteuid() and status.st_mode & 0o077 and status.st_nlink == 1:
            os.fchmod(fd, stat.S_IMODE(status.st_mode) & 0o700)
    except OSError:  # no modes (FAT)
        pass


def _tighten_session_files(folder, lock_fd):
    """Make the session files this user owns private; the lock file by descriptor."""
    if os.name == "nt":
        return
    _tighten(lock_fd)
    for name in (_META_NAME, _LOG_NAME):
        try:
            fd = _open_regular_file(os.path.join(folder, name), follow=False)
        except (OSError, NotesError):
            continue
        try:
            _tighten(fd)
        finally:
            os.close(fd)


def _try_lock(fd, shared=False):
    """Lock without waiting; False if another process holds it."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        else:
            import msvcrt  # no shared lock on Windows

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK):
            return False
        raise
    return True


def _unlock(fd):
    if fcntl is not None:
        return fcntl.flock(fd, fcntl.LOCK_UN)
    import msvcrt

    try:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    except OSError:
        pass


class _SessionLock:
    """The writers' lock, read to fsync: on the folder, then on the lock file."""

    held = set()  # lock paths this process holds

    def __init__(self, folder):
        self.path = os.path.join(folder, _LOCK_NAME)
        value = os.environ.get(_LOCK_WAIT_VARIABLE, "").strip()  # refused before anything is created
        try:
            self.wait = float(value) if value else _LOCK_WAIT_SECONDS
        except ValueError:
            self.wait = -1.0
        if not 0 <= self.wait <= _LOCK_WAIT_LIMIT:  # NaN fails this too
            raise NotesError(
                "%s is not a number of seconds from 0 to %d; set it to how long a writer may wait for the lock, or "
                "unset it to wait %d s" % (_LOCK_WAIT_VARIABLE, _LOCK_WAIT_LIMIT, _LOCK_WAIT_SECONDS))
        self.fds = []  # the folder's (but on Windows), then the lock file's

    def __enter__(self):
        folder = os.path.dirname(self.path)
        try:
            try:
                _make_private_folders(folder)
                created = not os.path.exists(self.path)
                if fcntl is not None:
                    self.fds.append(os.open(folder, os.O_RDONLY | _FOLDER_ONLY))
                    # Again on the folder held: it may have been swapped.
                    _check_owner(folder, os.fstat(self.fds[0]), "the session folder")
                self.fds.append(_open_regular_file(self.path, os.O_RDWR | os.O_CREAT, False))
                if created:
                    _fsync_folder(folder)
            except OSError as error:
                raise _folder_error(folder, error) from None
            deadline = time.monotonic() + self.wait
            for fd in self.fds:
                self.wait_for_lock(fd, deadline)
            _tighten_session_files(folder, self.fds[-1])
            # Under the lock any temporary log or meta is a killed writer's.
            _remove_stale_temporary_files(folder, (_LOG_NAME, _META_NAME), older_than=0)
        except BaseException:  # a refusal: leave nothing open
            self.close_descriptors()
            raise
        _SessionLock.held.add(self.path)
        return self

    def wait_for_lock(self, fd, deadline):
        """Poll until the deadline (a dead holder's flock frees at once)."""
        pause = 0.001
        while not _try_lock(fd):
            left = deadline - time.monotonic()
            if left <= 0:  # readers hold it shared: a free shared lock says readers
                holder = "another notes.py command" if fcntl is None else "another writer"
                if fcntl is not None and _try_lock(fd, shared=True):
                    _unlock(fd)
                    holder = "a notes.py command reading the log"
                raise NotesError(
                    "%s holds the lock %s beyond %g s; nothing was written. Run the command again; if the lock stays "
                    "held, resume or end that stopped or hung command, or set %s to wait longer"
                    % (holder, self.path, self.wait, _LOCK_WAIT_VARIABLE), _EXIT_UNEXPECTED)
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.025)

    def close_descriptors(self):
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = []

    def __exit__(self, *exc_info):
        _SessionLock.held.discard(self.path)
        if fcntl is None:
            _unlock(self.fds[-1])
        self.close_descriptors()


def _open_log(path):
    """(read descriptor, size); (None, 0) when there is no log yet."""
    try:
        fd = _open_regular_file(path)
    except FileNotFoundError:
        return None, 0
    except IsADirectoryError:
        raise NotesError("%s is a folder, not the session log; move it aside" % path) from None
    return fd, os.fstat(fd).st_size


def _log_view(folder):
    """(descriptor, size, in_flight: a writer at work) of the log."""
    log_path, lock_path = _log_path(folder), os.path.join(folder, _LOCK_NAME)
    fd, size = _open_log(log_path)
    if lock_path in _SessionLock.held or fd is None or size == 0:  # the writer itself reads
        return fd, size, False
    with open(fd, "rb", closefd=False) as handle:
        handle.seek(size - 1)  # a whole end needs no probe: a reader never holds up a writer
        if handle.read(1) == b"\n" and _end_before_incomplete_batch(handle, size) == size:
            return fd, size, False
    os.close(fd)
    locks = []  # held shared while the size is taken again: the folder's, then the lock file's
    try:
        try:
            if fcntl is not None:
                locks.append(os.open(folder, os.O_RDONLY | _FOLDER_ONLY))
        except OSError:  # the lock file still tells
            pass
        if locks and not _try_lock(locks[0], shared=True):
            return (*_open_log(log_path), True)
        try:
            locks.append(_open_regular_file(lock_path))
        except FileNotFoundError:  # a lock made since: the size may cut a writer's line
            return (*_open_log(log_path), os.path.lexists(lock_path))
        except OSError:  # unreadable: no writer can be seen
            return (*_open_log(log_path), False)
        busy = not _try_lock(locks[-1], shared=True)
        try:
            return (*_open_log(log_path), busy)
        finally:
            if not busy:
                _unlock(locks[-1])
    finally:
        for lock in locks:
            os.close(lock)


def _create_new_file(stem, suffix="", mode=_PRIVATE_FILE_MODE, at=None):
    """Create stem + suffix, or stem-1 + suffix...: (path, descriptor)."""
    path, attempt = stem + suffix, 0
    while True:
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | _BINARY, mode, dir_fd=at)
        except FileExistsError:
            attempt += 1
            path = "%s-%d%s" % (stem, attempt, suffix)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _log_blocks(handle, start, end):
    handle.seek(start)
    left = end - start
    while left > 0:
        block = handle.read(min(_BACKWARD_BLOCK, left))
        if not block:
            raise OSError(errno.EIO, "the log is shorter than it was a moment ago")
        yield block
        left -= len(block)


def _write_file_atomically(path, chunks, refusal=None, mode=_PRIVATE_FILE_MODE, at=None):
    """Replace path (with at, a name in that folder) with chunks: a temporary renamed over it."""
    if at is None and os.path.islink(path):
        raise _link_error(path)
    folder, name = os.path.split(path) if at is None else (at, path)
    _remove_stale_temporary_files(folder, (name,))
    stem = ".%s.%s" % (name, os.urandom(6).hex())
    try:
        temporary, fd = _create_new_file(os.path.join(folder, stem) if at is None else stem, ".tmp", mode, at)
    except OSError as error:
        if refusal is None:
            raise
        raise NotesError(refusal % (path, error.strerror)) from None
    try:
        for chunk in chunks:
            _write_all(fd, chunk)
        os.fsync(fd)
        os.close(fd)
        fd = None
        # Crash window: before the replace the old file stays; its stale temporary goes later.
        if at is None:
            os.replace(temporary, path)
        else:
            os.replace(temporary, path, src_dir_fd=at, dst_dir_fd=at)
    except BaseException:
        if fd is not None:
            os.close(fd)
        _discard_temporary(temporary, at)
        raise
    _fsync_folder(folder)


def _discard_temporary(name, at=None):
    """Remove a temporary file, or empty one an append-only folder keeps."""
    try:
        os.unlink(name, dir_fd=at)
    except OSError:
        try:  # the name is still ours: an append-only folder lets none replace it
            os.close(os.open(name, os.O_WRONLY | os.O_TRUNC | _NO_FOLLOW | _BINARY, dir_fd=at))
        except OSError:
            pass


def _remove_stale_temporary_files(folder, names, older_than=_STALE_TEMPORARY_SECONDS):
    """Delete killed writes' temporary files older than older_than seconds."""
    shape = re.compile(r"\.(?:%s)\.[0-9a-f]{12}(?:-.*)?\.tmp" % "|".join(map(re.escape, names)), re.DOTALL)
    try:
        entries = [entry for entry in os.scandir(folder) if shape.fullmatch(entry.name)]
    except OSError:
        return
    for entry in entries:
        try:
            if (entry.is_file(follow_symlinks=False)
                    and time.time() - entry.stat(follow_symlinks=False).st_mtime >= older_than):
                os.unlink(entry.path, dir_fd=folder if isinstance(folder, int) else None)
        except OSError:
            pass  # only clutter


def _is_protected_inode(fd):
    """Whether the file or folder at descriptor is immutable or append-only."""
    flags = getattr(os.fstat(fd), "st_flags", None)
    if flags is not None:  # BSD and macOS give them with the status
        return bool(flags & (stat.UF_IMMUTABLE | stat.UF_APPEND | stat.SF_IMMUTABLE | stat.SF_APPEND))
    if fcntl is None or not sys.platform.startswith("linux") or os.uname().machine not in _LINUX_GET_FLAGS_MACHINES:
        return False  # not known here: a replace that fails says so instead
    try:
        answer = fcntl.ioctl(fd, _LINUX_GET_FLAGS, bytes(8))
    except OSError:  # a filesystem without these flags
        return False
    return bool(int.from_bytes(answer[:4], sys.byteorder) & _LINUX_PROTECTED_FLAGS)


def _protection(path, fd, named):
    """(what, way out) if the user protected the file or folder (by mode: root writes anyway)."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if not mode & stat.S_IWUSR:
        return "%s is read-only (mode %04o)" % (named, mode), "chmod u+w %s" % path
    if _is_protected_inode(fd):
        return "%s is immutable or append-only (chattr +i or +a)" % named, "chattr -ia %s" % path
    return None


def _refuse_a_protected_log(folder, fd=None):
    """Refuse to replace a log (at descriptor) or folder the user protected; else the copy's mode."""
    log_path = _log_path(folder)
    found = fd is not None and _protection(log_path, fd, log_path)
    # Windows: no folder opens; its read-only mark does not stop writes.
    if not found and os.name != "nt":
        try:
            at = os.open(folder, os.O_RDONLY | _FOLDER_ONLY)
        except OSError:  # unreadable to us: a replace that fails says what is wrong
            at = None
        if at is not None:
            try:
                found = _protection(folder, at, "the folder " + folder)
            finally:
                os.close(at)
    if found:
        raise NotesError("%s, so the log is not rewritten: nothing was changed, and the protection stays. To go "
                         "on, lift it (%s) and run the command again" % found)
    return stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 if fd is not None else _PRIVATE_FILE_MODE


def _replace_log(folder, chunks):
    """Under the lock: replace the log in one rename."""
    log_path = _log_path(folder)
    try:
        fd = _open_regular_file(log_path, follow=False)
    except FileNotFoundError:
        fd = None
    try:
        mode = _refuse_a_protected_log(folder, fd)
    finally:
        if fd is not None:
            os.close(fd)
    try:
        _write_file_atomically(log_path, chunks, mode=mode)
    except OSError as error:
        if error.errno not in _PROTECTED_ERRORS:
            raise
        raise NotesError("cannot replace %s (%s): the log or its folder is protected; nothing was changed: lift "
                         "the protection and run the command again" % (log_path, error.strerror)) from None


# Below a folder by dir_fd, following no link (Windows: resolved path checked).
_CAN_WALK_INSIDE = (
    bool(_NO_FOLLOW) and bool(_FOLDER_ONLY) and os.scandir in os.supports_fd
    and all(call in os.supports_dir_fd for call in (os.open, os.mkdir, os.rename, os.unlink)))
_INSIDE_WAY_OUT = "; give the path of a file inside the folder"
_INSIDE_PATH_LIMIT = 1024  # characters and components of a path below a folder
_INSIDE_DEPTH_LIMIT = 32


def _inside_parts(relative, what, way_out=_INSIDE_WAY_OUT):
    """A path's parts below a folder; refuse one that leads out or no disk takes."""
    text = os.fspath(relative)
    parts = [part for part in text.split("/") if part != "."]
    problem = (
        "holds a NUL character" if "\0" in text else
        "is an absolute path" if os.path.isabs(text) or text.startswith("~") or os.path.splitdrive(text)[0]
        else "climbs out with .." if ".." in text.replace("\\", "/").split("/")
        else "is empty, ends with / or holds an empty component (//)" if not parts or "" in parts
        else "is over %d characters or %d folders deep" % (_INSIDE_PATH_LIMIT, _INSIDE_DEPTH_LIMIT)
        if len(text) > _INSIDE_PATH_LIMIT or len(parts) > _INSIDE_DEPTH_LIMIT else None)
    if problem:
        raise NotesError("%s %s%s" % (what, problem, way_out))
    return parts


def _inside_error(error, what, way_out):
    """An OSError below a folder as a refusal, not naming the client's path."""
    problem = ("passes through a link or a file where a folder should be"
               if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) else
               "names a folder that does not exist" if error.errno == errno.ENOENT else
               "cannot be opened (%s)" % (error.strerror or error))
    return NotesError("%s %s%s" % (what, problem, way_out))


def _walk_inside(folder, parts, make_folder=None):
    """A descriptor on the folder of parts[-1], each part opened O_NOFOLLOW."""
    fd = os.open(folder, os.O_RDONLY | _FOLDER_ONLY)
    flags = os.O_RDONLY | _FOLDER_ONLY | _NO_FOLLOW
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if make_folder is None:
                    raise
                make_folder()
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)  # the umask decides, as for os.makedirs
                except FileExistsError:  # made meanwhile: opened below like any other
                    pass
                child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _resolved_inside(path, folder, what, way_out):
    """path resolved, refused if it leads out of folder (no dir_fd)."""
    resolved = os.path.realpath(path)
    if not resolved.startswith(os.path.realpath(folder).rstrip(os.sep) + os.sep):
        raise NotesError("%s passes through a link that leads out%s" % (what, way_out))
    return resolved


def _open_inside(folder, relative, what="path", way_out=_INSIDE_WAY_OUT):
    """A descriptor on the regular file at relative below folder, no link followed."""
    parts = _inside_parts(relative, what, way_out)
    if not _CAN_WALK_INSIDE:  # no dir_fd (Windows): the resolved path is checked
        return _open_regular_file(_resolved_inside(os.path.join(folder, *parts), folder, what, way_out))
    try:
        parent = _walk_inside(folder, parts)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _NO_FOLLOW | _NON_BLOCKING | _BINARY, dir_fd=parent)
        finally:
            os.close(parent)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise _inside_error(error, what, way_out) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _special_file_error(what, mode)  # what, not relative: a client wrote that
    return fd


def _write_inside(folder, relative, chunks, may_replace, make_new, what="path", way_out=_INSIDE_WAY_OUT):
    """Replace or create the file at relative below folder, no link followed."""
    parts = _inside_parts(relative, what, way_out)
    path = os.path.join(folder, *parts)
    try:
        parent = _walk_inside(folder, parts, make_new)
    except OSError as error:
        raise _inside_error(error, what, way_out) from None
    name = parts[-1]
    try:  # refuse a link, folder, special file, or what may_replace refuses
        try:
            fd = os.open(name, os.O_RDONLY | _NO_FOLLOW | _NON_BLOCKING | _BINARY, dir_fd=parent)
        except FileNotFoundError:
            fd = None
            make_new()
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EMLINK):
                raise _link_error(path) from None
            if error.errno == errno.ENXIO:  # a socket cannot be opened at all
                raise _special_file_error(path, os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode) from None
            raise
        if fd is not None:
            try:
                mode = os.fstat(fd).st_mode
                if stat.S_ISDIR(mode):
                    raise NotesError("%s is a folder; give a file path" % path)
                if not stat.S_ISREG(mode):
                    raise _special_file_error(path, mode)
                may_replace(fd)
            finally:
                os.close(fd)
        _write_file_atomically(name, chunks, mode=_UMASK_FILE_MODE, at=parent)
    finally:
        os.close(parent)
    return path


def _write_meta(folder, session_id, created_at):
    meta = {"schema_version": _META_SCHEMA, "session_id": session_id, "created_at": created_at,
            "log_file": _log_path(folder)}
    text = _pretty_json(meta) + "\n"  # surrogates of a non-UTF-8 folder name become \udcXX
    _write_file_atomically(os.path.join(folder, _META_NAME), [text.encode("utf-8", "backslashreplace")])
    return meta


def _new_session_id():
    import uuid

    return str(uuid.uuid4())


def _check_session_folder(folder):
    """Refuse a folder a writer must not touch; its meta."""
    for name in (_META_NAME, _LOG_NAME, _LOCK_NAME):
        if os.path.islink(os.path.join(folder, name)):
            raise _link_error(os.path.join(folder, name))
    meta = _read_meta(folder)
    _check_meta_session_id(folder, meta)
    log_path = _log_path(folder)
    try:  # before the lock too: a refusal changes nothing
        _refuse_a_hard_linked_log(log_path, os.lstat(log_path))
    except OSError:
        pass  # no log yet
    if meta is None and os.path.exists(log_path) and os.path.getsize(log_path) > 0:
        raise NotesError("%s holds notes but %s is missing; nothing was changed. Restore the session's export "
                         "into another --dir, or move the log aside to start a new session" % (log_path, _META_NAME))
    return meta


def _check_meta_session_id(folder, meta):
    """Refuse a meta whose session_id is no plain id: each record would carry it."""
    if meta is not None and not _is_session_id(meta["session_id"]):
        raise NotesError(
            "%s holds a session_id that is not a plain id (1 to %d printable characters); nothing was "
            "written. Restore an earlier export into a new --dir, or move the folder aside and run "
            "init" % (os.path.join(folder, _META_NAME), _SESSION_ID_LIMIT))


def _make_private_folders(folder):
    """Create folder and missing parents 0700 (os.makedirs takes the umask)."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, _PRIVATE_FOLDER_MODE)
        except FileExistsError:  # a concurrent writer made it, or a file is in the way
            if not os.path.isdir(path):
                raise


def _open_session_for_writing(folder):
    """Under the lock: (the meta, whether this call started it)."""
    meta = _check_session_folder(folder)  # again: an init or restore may have come first
    if meta is not None:
        return meta, False
    try:
        meta = _write_meta(folder, _new_session_id(), _utc_now())
        # Crash window: a meta without a log is a session with no notes yet.
        fd = _open_log_for_append(meta["log_file"])
        os.fsync(fd)
        os.close(fd)
        _fsync_folder(folder)
    except OSError as error:
        raise _folder_error(folder, error) from None
    return meta, True


def _open_log_for_append(path):
    fd = _open_regular_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, False)
    try:
        _refuse_a_hard_linked_log(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_a_hard_linked_log(path, status):
    if stat.S_ISREG(status.st_mode) and status.st_nlink > 1:
        raise NotesError(
            "%s has %d hard links: writing here would change the other file too. Nothing was "
            "written. Give the log a file of its own (in its folder: cp %s log.copy && mv log.copy "
            "%s), or delete the other name" % (path, status.st_nlink, _LOG_NAME, _LOG_NAME))


def _read_lines_backward(handle, size):
    """(offset, line) from size back; a line over _LINE_LIMIT is None."""
    pieces, length, position = [], 0, size  # pieces of the current line
    while position > 0:
        step = min(_BACKWARD_BLOCK, position)
        position -= step
        handle.seek(position)
        block = handle.read(step)
        end = len(block)
        newline = block.rfind(b"\n", 0, end)
        while newline >= 0:
            pieces.append(block[newline + 1:end])
            yield position + newline + 1, _joined_line(pieces, length + end - newline - 1)
            pieces, length, end = [], 0, newline
            newline = block.rfind(b"\n", 0, end)
        length += end
        if length <= _LINE_LIMIT:
            pieces.append(block[:end])
        else:
            pieces = []
    yield 0, _joined_line(pieces, length)


def _joined_line(pieces, length):
    return b"".join(reversed(pieces)) if length <= _LINE_LIMIT else None


def _read_lines_forward(handle, size):
    """(line, terminated) for the first size bytes; None: a line over _LINE_LIMIT."""
    remaining = size
    while remaining > 0:
        line = handle.readline(min(_LINE_LIMIT + 1, remaining))
        if not line:
            return  # cut meanwhile
        remaining -= len(line)
        if line.endswith(b"\n"):
            yield line[:-1], True
        elif len(line) <= _LINE_LIMIT:
            yield line, False
        else:
            while remaining > 0 and line and not line.endswith(b"\n"):
                line = handle.readline(min(_BACKWARD_BLOCK, remaining))
                remaining -= len(line)
            yield None, line.endswith(b"\n")


def _end_before_incomplete_batch(handle, size):
    """The offset of an incomplete --batch at the end, else size."""
    expected = None  # (K, N) the line before must hold; Crash window: a killed batch leaves 1/N to K/N
    for position, (offset, line) in enumerate(_read_lines_backward(handle, size)):
        value = _parse_line(line)[0] if line else None
        if position == 0 and value is None:
            continue  # a healthy end, or a cut-off line
        place = _batch_place_of(value)
        if place is None or (expected is None and place[0] == place[1]) or (
                expected is not None and place != expected):
            return size
        if place[0] == 1:
            return offset
        expected = (place[0] - 1, place[1])
    return size


class _BackwardScan:
    """A walk back from the end: (offset, record or None, problems); torn tail, next seq."""

    def __init__(self, handle, size, session_id=None, in_flight=False):
        self.keep_end = _end_before_incomplete_batch(handle, size)  # torn from here on
        self.incomplete_batch = self.keep_end < size
        self.needs_newline = False  # the last line is an object lacking its newline
        self.highest_seq = 0  # the highest the lines walked can have held
        self.certain = False  # no line left can hold a higher one
        self.lines = _read_lines_backward(handle, self.keep_end)
        self.session_id, self.in_flight = session_id, in_flight

    def __iter__(self):
        newer_seq, damaged = None, 0  # newer record's seq; seq-free lines since
        if self.incomplete_batch and not self.in_flight:
            yield self.keep_end, None, [("incomplete_batch", None)]
        for position, (offset, line) in enumerate(self.lines):
            if position == 0 and (line == b"" or self.in_flight):
                continue  # a healthy end, or a note in flight
            value, problems = _line_problems(line, position > 0, self.session_id)
            if position == 0:
                self.needs_newline = value is not None
                if value is None:
                    self.keep_end = offset  # cut off mid-write: it held no seq
                    yield offset, None, problems
                    continue
            seq = value.get("seq") if value is not None else None
            if not _is_seq(seq):
                damaged += 1
                yield offset, value, problems
                continue
            self.highest_seq = max(self.highest_seq, seq + damaged)
            self.certain = self.certain or (damaged == 0 and newer_seq == seq + 1)
            order = _seq_order_problem(newer_seq, seq, damaged)
            if order:
                problems.append((order, None))
            newer_seq, damaged = seq, 0
            yield offset, value, problems
        self.highest_seq = max(self.highest_seq, damaged)  # lines before the first record held 1, 2, ...
        self.certain = True


class _LogTail(_BackwardScan):
    """The log's end for a writer: torn tail, next seq, last records."""

    def __init__(self, handle, size, recent_since=None, window_records=_DUPLICATE_WINDOW_RECORDS):
        _BackwardScan.__init__(self, handle, size)
        self.size, self.recent = size, []
        window_left = window_records if recent_since is not None else 0
        for _, record, _ in self:
            if record is None or not _is_seq(record.get("seq")):
                continue
            if window_left:
                window_left -= 1
                timestamp = record.get("ts")
                if not isinstance(timestamp, str) or timestamp < recent_since:
                    window_left = 0  # in time order: the rest are older
                else:
                    self.recent.append(record)
            if self.certain and not window_left:
                break


def _set_aside_torn_tail(folder, fd, tail):
    side_path, side = _create_new_file(os.path.join(folder, "%s%s-%d" % (
        _TORN_PREFIX, _utc_now(_FILE_STAMP), os.getpid())))
    try:
        with open(fd, "rb", closefd=False) as handle:
            for block in _log_blocks(handle, tail.keep_end, tail.size):
                _write_all(side, block)
        os.fsync(side)
    except BaseException:  # the log still holds every torn byte
        os.close(side)
        _discard_temporary(side_path)
        raise
    os.close(side)
    _fsync_folder(folder)
    try:  # Crash window: the bytes are in both files; the next append copies them again.
        os.ftruncate(fd, tail.keep_end)
    except PermissionError:  # append-only: take the side file back, and refuse
        os.unlink(side_path)
        _fsync_folder(folder)
        log_path = _log_path(folder)
        raise NotesError(
            "%s is append-only, so its cut-off last line (%d bytes) cannot be set aside. Nothing was "
            "written. Run chattr -a %s and append again, or restore an export into a new --dir"
            % (log_path, tail.size - tail.keep_end, log_path)) from None
    os.fsync(fd)
    return {"kind": "torn_tail", "bytes": tail.size - tail.keep_end, "side_file": side_path}


_NO_ROOM_ERRORS = tuple(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, name))


def _keep_torn_tail_in_place(fd, tail, why):
    """End the torn tail with a newline: a damaged line holding a seq."""
    _append_line(fd, b"\n")  # Crash window: one write; until it, the tail waits for the next append.
    tail.highest_seq += 1
    return {"kind": "torn_tail_kept", "bytes": tail.size - tail.keep_end, "why": why}


def _find_note_line(handle, size, note_id):
    """(offset, line, record) of the note with this id, found from the end."""
    needle = ('"id":"%s"' % note_id).encode("ascii")
    for offset, line in _read_lines_backward(handle, size):
        if line and needle in line:
            value = _parse_line(line)[0]
            if value is not None and value.get("id") == note_id and _is_usable(_check_record(value, None)):
                return offset, line, value
    return None


class _ClosesHandle:
    handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.handle is not None:
            self.handle.close()


class _NotesById(_ClosesHandle):
    """Notes by id, each searched once from the log's end."""

    def __init__(self, log_path):
        self.log_path, self.size, self.found = log_path, 0, {}

    def __call__(self, note_id):
        if note_id not in self.found:
            if self.handle is None:
                fd, size = _open_log(self.log_path)
                if fd is None:
                    return None
                self.handle = open(fd, "rb")
                self.size = _end_before_incomplete_batch(self.handle, size)
            found = _find_note_line(self.handle, self.size, note_id)
            self.found[note_id] = found and found[2]
        return self.found[note_id]


def _append_line(fd, line):
    """Append line (one or more records), fsync; on any failure cut it off."""
    start = os.lseek(fd, 0, os.SEEK_END)
    try:
        _write_all(fd, line)  # Crash window: a kill leaves whole lines and a torn tail, set aside next time.
        os.fsync(fd)
    except BaseException:
        try:
            os.ftruncate(fd, start)
            os.fsync(fd)
        except OSError:
            pass
        raise


def _line_problems(raw, terminated, session_id):
    value, kind = _parse_line(raw) if raw is not None else (None, "line_too_long")
    if not terminated:
        kind = "torn_tail" if value is None else "missing_newline"
    if value is None:
        return None, [(kind, None)]
    problems = _check_record(value, session_id)
    return value, [(kind, None)] + problems if kind else problems


class _LogReader(_ProblemTally, _ClosesHandle):
    """Reads the log forward, checking each line; each pass reads the file first opened."""

    def __init__(self, folder, meta):
        _ProblemTally.__init__(self)  # of the last pass
        self.path, self.session_id = _log_path(folder), meta.get("session_id")
        self.total, self.last_record, self.unterminated_in_flight = 0, None, False
        self.order, self.redactions = _LogOrder(), _RedactionsSeen()
        fd, self.size_seen, self.in_flight = _log_view(folder)
        self.handle = open(fd, "rb") if fd is not None else None
        # not read: an incomplete batch at the end
        self.size = _end_before_incomplete_batch(self.handle, self.size_seen) if self.size_seen else 0

    def records(self):
        """Each usable record in log order, noting problems on the way."""
        self.problems, self.problem_count, self.total, self.last_record = [], 0, 0, None
        self.order = seen = _LogOrder()
        self.redactions = _RedactionsSeen()
        if self.size:
            self.handle.seek(0)
        for number, (raw, terminated) in enumerate(_read_lines_forward(self.handle, self.size), 1):
            if not terminated and self.in_flight:
                self.unterminated_in_flight = True
                break
            value, kinds = _line_problems(raw, terminated, self.session_id)
            kinds += seen.place_problems(value, kinds)
            if kinds:
                self.note_line_problems(number, value, kinds)
            if value is not None and _is_usable(kinds):
                self.total += 1
                self.last_record = value
                self.redactions.meet(value, number)
                yield value
        ends = [seen.unfinished_batch()]
        if self.size < self.size_seen and not self.in_flight:  # an incomplete batch at the end
            ends.append(_problem(seen.line + 1, None, "incomplete_batch"))
        self.note_problems(list(filter(None, ends)) + self.redactions.problems())

    def warnings(self):
        return _problem_messages(self.problems, self.problem_count)

    def notices(self):
        """What append refuses but an older log may hold, as sentences."""
        return _problem_messages(self.order.notices, self.order.notice_count)


def _bounded_warnings(messages, count):
    messages = messages[:_WARNINGS_LISTED]
    if count > len(messages):
        messages.append("%d more problems not listed; run verify for the full list" % (count - len(messages)))
    return messages


def _problem_messages(problems, count):
    messages = []
    for entry in problems[:_WARNINGS_LISTED]:
        where = "" if entry["line"] is None else "line %d" % entry["line"]
        where += " (%s)" % entry["id"] if entry["id"] else ""
        messages.append("%s: %s" % (where, entry["detail"]) if where else entry["detail"])
    return _bounded_warnings(messages, count)


class _RedactionsSeen:
    """Redacted notes met, and those no source note explains."""

    def __init__(self):
        self.count, self.pending = 0, {}

    def meet(self, record, line):
        if record["type"] != "source" and record["text"] != _REDACTED_TEXT:
            return
        if _is_redacted(record):
            self.count += 1
            self.pending[record["id"]] = line
        elif _is_redaction_note(record):
            self.pending.pop(record["about"], None)

    def problems(self):
        return [_problem(line, note_id, "redaction_unexplained") for note_id, line in self.pending.items()]


# --------------------
# Session: the Python API and its core commands

class Session:
    """The Python API: one session folder, one method per command, each returning the receipt as a dict.

    Arguments are keyword-only; a refusal raises NotesError with the command line's message.
    Session() uses the command line's default folder; session is --session."""

    def __init__(self, folder=None, *, session=None):
        _check_dir_argument(folder)
        _check_session_name(session)
        # resolved per method, after its checks
        self.folder, self.session, self._over_mcp = None if folder is None else os.fspath(folder), session, False

    def _folder_meta(self):
        folder = _resolve_folder(self.folder, self.session)
        return folder, _require_session(folder)

    def init(self) -> dict:
        """Start a session in the folder, or report the one already there."""
        folder = _resolve_folder(self.folder, self.session)
        _check_session_folder(folder)
        with _SessionLock(folder):
            session_id = _open_session_for_writing(folder)[0]["session_id"]
        return {"ok": True, "command": "init", "session_id": session_id, "path": _log_path(folder)}

    def tail(self, *, limit=_TAIL_DEFAULT_LIMIT, types=None, since=None, until=None, grep=None, compact=False) -> dict:
        """The last records, oldest first, filtered by types, since, until and grep (whole words, in order).

        superseded lists the ids a later note superseded; with grep, more (or more_at_least) counts the
        matches left out; compact drops each record's stamps."""
        limit = _check_limit(limit)
        since, until = _parse_time_filter(since, "since"), _parse_time_filter(until, "until")
        types = set([types] if isinstance(types, str) else types) if types else ()
        for kind in types:
            _check_choice("type", kind, NOTE_TYPES)
        words = None if grep is None else grep.casefold().split()
        if words == []:
            raise NotesError("--grep is empty; pass the words to look for, for example --grep 'email'")
        pattern = words and re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)")
        folder, meta = self._folder_meta()

        def keeps(r):
            return (not types or r["type"] in types) and (since or "") <= r["ts"] < (until or "~") and (
                pattern is None or any(pattern.search(r.get(key, "").casefold()) for key in ("text", "effect")))
        fd, size, in_flight = _log_view(folder)
        with _ClosesHandle() if fd is None else open(fd, "rb") as handle:
            records, extra = _tail_walk(
                iter(_BackwardScan(handle, size, meta["session_id"], in_flight)), size, limit, keeps, pattern)
        receipt = _with({"ok": True, "command": "tail", "count": len(records), "path": _log_path(folder),
                         "records": _compact_record(records) if compact else records}, **extra)
        return _CompactReceipt(receipt) if compact else receipt

    def show(self, *, note_id, compact=False) -> dict:
        """One note and its chain, or its gate's updates; the notes about it; compact: records compacted."""
        note_id = _command_note_id("show", note_id)
        with _LogReader(*self._folder_meta()) as reader:
            receipt = _show_chain(reader, note_id)
        return _CompactReceipt({key: _compact_record(value) if key in (
            "record", "gate", "updates", "settled_by", "replaces", "replaced_by", "about") else value
            for key, value in receipt.items()}) if compact else receipt

    def summary(self) -> dict:
        """The number of records by type and the last note."""
        with _LogReader(*self._folder_meta()) as reader:
            by_type = _count_by_type(reader)[0]
        last = reader.last_record or {}
        return _with({"ok": True, "command": "summary", "session_id": reader.session_id, "path": reader.path,
                      "total": reader.total, "by_type": by_type, "last_note_id": last.get("id"),
                      "last_type": last.get("type")}, warnings=reader.warnings())

    def verify(self) -> dict:
        """Check the meta and every line of the log; ok is false when problems are found."""
        folder, meta = self._folder_meta()
        bad = [("meta_field", "lacks " + key) for key in ("schema_version", "session_id", "created_at", "log_file")
               if not isinstance(meta.get(key), str)]
        if not _is_session_id(meta["session_id"]):
            bad.append(("meta_field", "has a session_id that is not a plain id (writers refuse it)"))
        if isinstance(meta.get("schema_version"), str) and meta["schema_version"] != _META_SCHEMA:
            bad.append(("meta_schema", "has an unknown schema_version"))
        with _LogReader(folder, meta) as reader:
            collections.deque(reader.records(), 0)
        problems = [_problem(None, None, kind, _META_NAME + " " + detail) for kind, detail in bad] + reader.problems
        count, problems = len(bad) + reader.problem_count, problems[:_PROBLEMS_LISTED]
        warnings = reader.notices()
        if reader.unterminated_in_flight:
            warnings.insert(0, "the last line is being written (no newline yet, a writer holds the lock), so it was "
                               "not checked; run verify again once that writer has finished")
        return _with({"ok": count == 0, "command": "verify", "path": reader.path, "total": reader.total,
                      "problems": problems}, problems_not_listed=count - len(problems),
                     redacted=reader.redactions.count, warnings=warnings)

    def sessions(self) -> dict:
        """The folder's session and each of sessions/, with its notes, gates and last export."""
        base = _resolve_folder(self.folder, create=False)
        try:
            with os.scandir(os.path.join(base, _SESSIONS_FOLDER)) as scan:
                found = sorted((e.name, e.path) for e in scan if _SESSION_NAME_SHAPE.fullmatch(e.name) and e.is_dir())
        except OSError:
            found = []
        found = [(name, folder) for name, folder in [(None, base)] + found
                 if any(os.path.lexists(os.path.join(folder, file)) for file in (_META_NAME, _LOG_NAME))]
        listed = [_session_entry(name, folder) for name, folder in found[:_SESSIONS_LISTED]]
        return _with({"ok": True, "command": "sessions", "path": base, "current": self.session,
                      "count": len(listed), "sessions": listed}, not_listed=len(found) - len(listed))


def _command(function):
    """Make function _NAME the Session method NAME."""
    name = function.__name__.lstrip("_")
    function.__name__, function.__qualname__ = name, "Session." + name
    setattr(Session, name, function)
    return function


def _with(receipt, **extra):
    """receipt plus extra's truthy values."""
    receipt.update((key, value) for key, value in extra.items() if value)
    return receipt


def _refuse_an_absurd_seq(tail):
    if tail.highest_seq >= _SEQ_LIMIT:
        raise NotesError("the log's last lines hold a seq past %d: the log was edited or damaged. Nothing was "
                         "written; run verify, and restore an intact export into a new --dir" % _SEQ_LIMIT)


def _recover_tail(folder, fd, tail):
    """Mend the end a crash left; return what was done, or None."""
    if tail.keep_end == tail.size:
        if tail.needs_newline:
            _append_line(fd, b"\n")
        return {"kind": "missing_newline"} if tail.needs_newline else None
    if tail.incomplete_batch:
        return dict(_set_aside_torn_tail(folder, fd, tail), kind="incomplete_batch")
    if tail.size - tail.keep_end > _LINE_LIMIT:
        return _keep_torn_tail_in_place(fd, tail, "longer than any record, so not a note cut off")
    try:
        return _set_aside_torn_tail(folder, fd, tail)
    except OSError as error:
        if error.errno not in _NO_ROOM_ERRORS:
            raise
        return _keep_torn_tail_in_place(fd, tail, "no room for a side file")


def _compact_record(record):
    """A record, or each of a list, with its id and signal fields only."""
    if isinstance(record, list):
        return [_compact_record(item) for item in record]
    return {key: record[key] for key in ("id",) + _SIGNAL_FIELDS if key in record}


def _tail_walk(scan, end, limit, keeps, grep):
    """tail's walk back: (records oldest first, the receipt's superseded, more, warnings)."""
    records, superseded, warnings, count, kept_bytes = [], set(), [], 0, 0
    for offset, value, problems in scan:
        line_bytes, end, count = end - offset, offset, count + len(problems)
        at = " (%s)" % value["id"] if value is not None and _is_note_id(value.get("id")) else " (no id)"
        warnings += ["byte %d%s: %s" % (offset, "" if kind in _LINE_PROBLEMS else at, detail or _PROBLEM_DETAILS[kind])
                     for kind, detail in problems[:_WARNINGS_LISTED - len(warnings)]]
        if value is None or not _is_usable(problems):
            continue
        ref = value.get("ref")  # a note filtered out still supersedes; a gate update does not
        if value["type"] != "gate" and _is_note_id(ref):
            superseded.add(int(ref[1:]))
        if not keeps(value):
            continue
        if records and kept_bytes + line_bytes > _TAIL_BYTES_LIMIT:
            warnings.insert(0, "tail stopped at %d records: they hold over %d MiB of log, the most one reply carries; "
                               "ask for fewer or a narrower time span" % (len(records), _TAIL_BYTES_LIMIT >> 20))
            grep = None
            break
        kept_bytes += line_bytes
        records.append(value)
        if len(records) >= limit:
            break
    more = 0
    for _, value, problems in scan if grep else ():
        more += value is not None and _is_usable(problems) and keeps(value)
        if more >= _LIMIT_MAX:
            break
    records.reverse()
    return records, {"superseded": [r["id"] for r in records if r["seq"] in superseded], "more" if more < _LIMIT_MAX
                     else "more_at_least": more, "warnings": _bounded_warnings(warnings, count)}


class _CompactReceipt(dict):
    """A receipt printed by _scannable_json."""


def _is_unconfirmed(labels):
    return labels.get("provenance") == "model" or labels.get("evidence") == "inferred"


# by: what settled all or part of it; update_index, effect_at (whose effect holds): places, or -1.
_GateState = collections.namedtuple("_GateState", "status changed_at unconfirmed update_index effect_at by")


class _GateStates(dict):
    """_GateState by gate id, held as rows of ints to save memory."""

    def __init__(self):
        import array  # append never pays for it

        self.ints = array.array("q")

    def __setitem__(self, gate_id, gate):
        status, *rest, by = gate
        row = 6 * self.setdefault(gate_id, len(self))
        by = by and int("1" + by[1:]) or -1  # "1" keeps leading zeros
        self.ints[row:row + 6] = type(self.ints)("q", (GATE_STATUSES.index(status), *rest, by))

    def __getitem__(self, gate_id):
        row = 6 * super().__getitem__(gate_id)
        status, *rest, by = self.ints[row:row + 6]
        return _GateState(GATE_STATUSES[status], *rest, None if by < 0 else "n" + str(by)[1:])

    def values(self):
        return map(self.__getitem__, self)

    def items(self):
        return zip(self, self.values())


def _recap_history(reader):
    """First pass: (superseded ids, _GateStates, counts by type, reopening note id by discard id)."""
    superseded, gates, root_of, discards, reopened, asked = set(), _GateStates(), {}, set(), {}, []
    counts = dict.fromkeys(NOTE_TYPES, 0)
    for index, record in enumerate(reader.records()):
        kind, ref = record["type"], record.get("ref")
        if kind in counts:
            counts[kind] += 1
        if kind == "gate":
            root = root_of.get(ref, ref) or record["id"]
            if ref is None or root in gates and record.get("status") in GATE_STATUSES:
                root_of[record["id"]] = root
                last = ref and gates[root]
                by = last and (record.get("by") or "closed" not in (record["status"], last.status) and last.by)
                gates[root] = _GateState(
                    record.get("status", "open"), record["seq"], _is_unconfirmed(record), index if ref else -1,
                    index if "effect" in record else last.effect_at if ref else -1, by)
            if ref is None and record.get("about") in discards:
                asked.append((root, record["about"]))
        elif ref:
            superseded.add(ref)
            if ref in discards and kind != "discard":
                reopened.setdefault(ref, record["id"])
        if kind == "discard":
            discards.add(record["id"])
    for gate_id, discard in asked:  # an open or deferred gate about a discard asks again
        if gates[gate_id].status != "closed":
            reopened.setdefault(discard, gate_id)
    return superseded, gates, counts, reopened


def _keep_newest(entries, limit, cut, name):
    """Keep the newest limit entries, counting the rest in cut[name]."""
    if len(entries) > limit:
        cut[name] = cut.get(name, 0) + len(entries) - limit
        del entries[:len(entries) - limit]


def _named_note(record):
    return {key: record[key] for key in ("id", "type", "text")}


def _reopening_key(record):  # a discard taken up again, or weighed by a gate while it holds
    return "questioned_by" if record["type"] == "gate" else "reopened"


_SHOW_LIST_LIMIT = 50  # per list of show, newest kept


def _command_note_id(command, value):
    if (cleaned := _as_note_id(value)) is None:
        raise NotesError("%s takes a note id such as n00012; tail or recap lists them" % command, help_for=command)
    return cleaned


def _show_chain(reader, note_id):
    back, back_skipped, end, wanted = [], 0, reader.size, note_id
    while reader.handle:
        if (found := _find_note_line(reader.handle, end, wanted)) is None:
            break
        end, _, value = found
        if back and (value["type"] == "gate") != (back[0]["type"] == "gate"):
            break  # a ref across kinds is damage
        if len(back) > _SHOW_LIST_LIMIT:
            back[-1], back_skipped = value, back_skipped + 1
        else:
            back.append(value)
        wanted = value.get("ref")
        if not (_is_note_id(wanted) and int(wanted[1:]) < value["seq"]):
            break
    if not back:
        raise NotesError("no note %s in this session (a damaged line is no note); tail or recap lists ids" % note_id)
    target, is_gate = back[0], back[0]["type"] == "gate"
    root = back[-1] if is_gate else target
    later, about, not_listed, settled, family = [], [], {}, set(), {root["id"]}
    for record in reader.records():
        if (record["type"] == "gate") == is_gate and record.get("ref") in family:
            family.add(record["id"])
            later.append(record)
            _keep_newest(later, _SHOW_LIST_LIMIT, not_listed, "updates" if is_gate else "replaced_by")
            if is_gate and record.get("by"):
                settled.add(record["by"])
        elif record.get("about") in (family if is_gate else (note_id,)):
            about.append(record)
            _keep_newest(about, _SHOW_LIST_LIMIT, not_listed, "about")
    receipt = {"ok": True, "command": "show", "note_id": note_id, "path": reader.path, "record": target}
    if is_gate:
        receipt["state"] = (later[-1] if later else root).get("status", "open")
        if root is not target:
            receipt["gate"] = root
        receipt.update(updates=later, settled_by=_notes_named(reader, settled, not_listed))
    else:
        receipt.update(state="superseded" if later else "live", replaces=back[1:], replaced_by=later)
        _with(not_listed, replaces=back_skipped)
        reopening = _recap_history(reader)[3].get(note_id) if target["type"] == "discard" else None
        if reopening is not None:
            again = _notes_named(reader, {reopening}, {})[0]
            receipt[_reopening_key(again)] = _named_note(again)
    receipt["about"] = about
    return _with(receipt, not_listed=not_listed, warnings=reader.warnings())


def _notes_named(reader, note_ids, not_listed):
    named = []
    for record in reader.records() if note_ids else ():
        if record["id"] in note_ids:
            named.append(record)
            _keep_newest(named, _SHOW_LIST_LIMIT, not_listed, "settled_by")
    return named


def _count_by_type(reader):
    """(notes by type, first ts, last ts), from the whole log."""
    by_type, first_ts, last_ts = dict.fromkeys(sorted(NOTE_TYPES), 0), None, None
    for record in reader.records():
        if record["type"] in by_type:
            by_type[record["type"]] += 1
        first_ts, last_ts = first_ts or record["ts"], record["ts"]
    return by_type, first_ts, last_ts


def _read_export_head(path, opener=None):
    """(head, problem) from the export's prefix before "records"; (None, None) if absent."""
    try:
        fd = (opener or _open_regular_file)(path)
    except FileNotFoundError:
        return None, None
    except (NotesError, IsADirectoryError):  # a folder, FIFO, socket or device is never read
        return None, "is not a regular file"
    except OSError as error:
        return None, "cannot be read (%s)" % error.strerror
    with open(fd, "rb") as handle:
        data = handle.read(_EXPORT_HEAD_LIMIT)
    for found in re.finditer(rb',\s*"records"', data):
        try:
            head = _parse_json(data[:found.start()].decode("utf-8") + "}")
        except ValueError:
            continue
        if isinstance(head, dict) and "record_count" in head:
            return head, None
    return None, "is not a session export with a record_count in its first %d bytes" % _EXPORT_HEAD_LIMIT


def _export_lag(folder, session_id, total):
    """How many of the log's notes the default export lacks."""
    lag = {"path": os.path.join(folder, _EXPORT_NAME), "record_count": None, "missing": total}
    head, problem = _read_export_head(lag["path"])
    if head is not None:
        count, session = head["record_count"], head.get("session")
        if head.get("schema_version") != _EXPORT_SCHEMA or type(count) is not int or count < 0:
            problem = "is not a session export (%s with a record_count)" % _EXPORT_SCHEMA
        elif not isinstance(session, dict) or session.get("session_id") != session_id:
            problem = "holds another session"
        else:
            lag.update(record_count=count, missing=max(total - count, 0))
            if count > total:
                problem = "holds %d notes, more than this log's %d: restore it to bring the newer notes in" % (
                    count, total)
    return _with(lag, problem=problem and "%s %s" % (_EXPORT_NAME, problem))


def _session_entry(name, folder):
    entry = {"name": name, "path": folder}
    try:
        with _LogReader(folder, _require_session(folder)) as reader:
            statuses = [gate.status for gate in _recap_history(reader)[1].values()]
    except (NotesError, OSError) as error:
        return dict(entry, error=getattr(error, "message", None) or "cannot read it (%s)" % error.strerror)
    entry.update(
        total=reader.total, last_note=reader.last_record and _named_note(reader.last_record),
        open_gates=statuses.count("open"), deferred_gates=statuses.count("deferred"),
        last_export=_export_lag(folder, reader.session_id, reader.total)
        if os.path.lexists(os.path.join(folder, _EXPORT_NAME)) else None)
    return _with(entry, problems=reader.problem_count)


# --------------------
# Recap: the idea's state in a byte budget; an artifact checked by it

def _counted(number, noun):
    return "%d %s%s" % (number, noun, "" if number == 1 else "s")


def _one_line(value):
    """Any JSON value (a damaged log may hold one) on one line."""
    return " ".join((value if isinstance(value, str) else _compact_json(value)).splitlines())


def _visible(value, one_line=False):
    """value with each forbidden character (and, for one_line, CR and LF) written as [U+XXXX]."""
    if value.isprintable():
        return value
    return "".join("[U+%04X]" % ord(c) if c in _FORBIDDEN_CHARACTERS or one_line and c in "\r\n" else c for c in value)


def _markdown_inline(text):
    return re.sub(r"([\\`*_\[\]<>&~|])", r"\\\1", text)


def _md(value):
    return _markdown_inline(_one_line(value))


def _markdown_split(text):
    return re.split(r"\r\n?|\n", text)


def _summarise_record(record):
    item = {key: record[key] for key in ("id", "text", "effect") if key in record}
    if record["type"] != "gate" and isinstance(record.get("ref"), str):
        item["replaces"] = record["ref"]
    item.update((key, record[key]) for key in ("about", "provenance", "evidence") if key in record)
    return item


def _recap_live_notes(reader, superseded, limit, cut, wanted, synthesis):
    """Pass two: (mode and shape, live lists, wanted records, first unconfirmed)."""
    latest, lists, found, first, settled = {"mode": None, "shape": None}, dict(_RECAP_LISTS), {}, None, None
    kept = {name: [] for name in [*lists.values(), "unconfirmed"]}
    gate_ids, update_places, note_ids, reopened = wanted
    for index, record in enumerate(reader.records()):
        delivered, kind, note_id = synthesis.meet(record), record["type"], record["id"]
        if index in update_places:
            found[index] = record
        if kind == "gate" and "ref" not in record and note_id in gate_ids or note_id in note_ids:
            found[note_id] = record  # a gate: the last with its id
        if kind == "shape" and not _is_unconfirmed(record):
            settled = record
        if note_id in superseded and note_id not in reopened:
            continue
        if kind in latest:
            latest[kind] = record
        if kind in lists or kind == "shape":
            item, name = _summarise_record(record), lists.get(kind)
            # A tension or a delivery holds nothing to confirm.
            if _is_unconfirmed(item) and kind != "tension" and not delivered and note_id not in superseded:
                first = first or (record["seq"], note_id)
                name, item = "unconfirmed", {"id": note_id, "type": kind, **item}
            if name:
                kept[name].append((record["seq"], item))
                _keep_newest(kept[name], limit, cut, name)
    if latest["mode"] and latest["mode"]["seq"] < (synthesis.delivered_at or 0):
        latest["mode"] = None  # a later delivery ended it
    if settled and settled["id"] not in superseded:
        latest["shape"] = settled  # it stands against later proposals
    for kind, record in latest.items():
        if record:
            latest[kind] = _summarise_record(record)
    for _, item in kept["discards"] + kept["unconfirmed"]:
        if reopened.get(item["id"]) in found:
            again = found[reopened[item["id"]]]
            item[_reopening_key(again)] = _named_note(again)
    return latest, kept, found, first


def _recap_gates(gates, reopened, limit, cut):
    """(seq, gate id) lists by name, the first pending, what pass two fetches."""
    lists = {name: [] for name in _PENDING_LISTS + ("closed_gates",)}
    for gate_id, gate in gates.items():
        if gate.status != "open" and gate.unconfirmed:  # an open gate is listed once, as open
            lists["unconfirmed"].append((gate.changed_at, gate_id))
        if gate.status != "closed" or not gate.unconfirmed:
            lists[gate.status + "_gates"].append((gate.changed_at, gate_id))
    for name in ("closed_gates", "unconfirmed"):
        lists[name].sort(key=lambda e: e[0])
    first = min(lists["open_gates"] + lists["unconfirmed"], default=None)
    for name, entries in lists.items():
        _keep_newest(entries, limit, cut, name)
    ids = {gate_id for entries in lists.values() for _, gate_id in entries}
    listed = [gates[gate_id] for gate_id in ids]
    note_ids = {gate.by for gate in listed if gate.status == "closed"} | set(reopened.values())
    places = {place for gate in listed for place in (gate.update_index, gate.effect_at)} - {-1}
    return lists, first, (ids, places, note_ids - {None}, reopened)


def _gate_item(gate_id, gates, found, name):
    """A gate as listed under name: with its latest update, or what closed it."""
    record, gate = found[gate_id], gates[gate_id]
    update = found.get(gate.update_index, {})
    item = {"id": gate_id, **({"type": "gate"} if name == "unconfirmed" else {}), "text": record["text"],
            "status": gate.status}
    item.update((key, record[key]) for key in ("effect", "provenance", "evidence") if key in record)
    item.update(("update_" + k, update[k]) for k in ("id", "text", "provenance", "evidence") if k in update)
    if "effect" in (in_force := found.get(gate.effect_at, {})):
        item["effect"] = in_force["effect"]
    if name != "closed_gates":
        return item
    if closer := found.get(gate.by, update):
        item["closed_by"] = _named_note(closer)
    return {key: item[key] for key in ("id", "text", "update_id", "closed_by", "update_provenance", "update_evidence")
            if key in item}


class _SynthesisSeen:
    """Where synthesis stands; the last delivery and live non-mode (seq, note)s after it."""

    def __init__(self, superseded, limit):
        self.superseded, self.limit, self.in_synthesis, self.after = superseded, limit, False, []
        self.synthesis = self.delivery = self.delivered_at = None

    def meet(self, record):
        """Take in any next record (a superseded one may begin or end synthesis); True for a delivery."""
        kind, note_id = record["type"], record["id"]
        if kind == "mode":
            if (entering := record["text"].startswith(_SYNTHESIS_WORD)) != self.in_synthesis:
                self.synthesis = dict(self.synthesis, state="ended", ended=note_id) if self.in_synthesis else {
                    "state": "entered", "entered": note_id}
            self.in_synthesis = entering
        if kind == "artifact" and self.in_synthesis and record.get("evidence") != "inferred":
            # A delivery ends synthesis; an inferred boundary is a proposal.
            self.in_synthesis, self.delivered_at, self.after = False, record["seq"], []
            self.synthesis = dict(self.synthesis, state="delivered", delivered=note_id)
            self.delivery = {"id": note_id, "after": [], "more": 0}
            return True
        if self.delivery and kind != "mode" and note_id not in self.superseded:
            self.after.append((record["seq"], _named_note(record)))
            _keep_newest(self.after, self.limit, self.delivery, "more")
        return False


def _recap_item_line(item, kind="note"):
    """An item as an escaped markdown line; kind: note, gate, closed or unconfirmed."""
    text, prefix, status = _md(item["text"]), "", item.get("status")
    if kind == "unconfirmed":
        prefix = item["type"].capitalize() + (" (%s): " % _md(status) if "status" in item else ": ")
        kind = status  # only "closed" reads differently here
    # At a line's start these open a list, heading, quote or rule.
    line = "- " + prefix + (text if prefix else re.sub(r"^(?:[0-9]{1,9}(?=[.)])|(?=[#>+=-]))", r"\g<0>\\", text))
    if "effect" in item:
        line += " Effect: " + _md(item["effect"])
    if "update_id" in item:  # a closed gate reads as its question, then its answer
        answer = item["closed_by"]["text"] if "closed_by" in item else item.get("update_text", "")
        line += (" - " if kind == "closed" else " Latest: ") + _md(answer)
    again = item.get("reopened") or item.get("questioned_by")
    if again:
        line += " %s: %s" % ("In question" if again["type"] == "gate" else "Reopened by a " + again["type"],
                              _md(again["text"]))
    marks = [_md(item["id"])]
    labels = item  # a gate's are those of the note that set its status
    if "update_id" in item:
        labels = {key[7:]: item[key] for key in ("update_provenance", "update_evidence") if key in item}
    if _is_unconfirmed(labels):
        why = ["proposed by the model"] * (labels.get("provenance") == "model") + ["inferred"] * (
            labels.get("evidence") == "inferred")
        marks.append(", ".join(why) if prefix else "not yet confirmed")
    elif "provenance" in labels:
        marks.append(_PROVENANCE_WORDS.get(labels["provenance"], "from " + _one_line(labels["provenance"])))
    return "%s [%s]" % (line, "; ".join(marks))


_PROVENANCE_WORDS = {
    "op": "from the operator", "model": "from the model", "shared": "shared by both",
    "delivered": "the last delivery"}
_RECAP_SECTIONS = (
    ("Mode", "mode", "note"), ("Shape", "shape", "note"), ("Open gates", "open_gates", "gate"),
    ("Deferred gates", "deferred_gates", "gate"), ("Not yet confirmed", "unconfirmed", "unconfirmed"),
    ("Closed gates", "closed_gates", "closed"), ("Decisions", "decisions", "note"),
    ("Discarded paths", "discards", "note"), ("Tensions", "tensions", "note"),
    ("Sources", "sources", "note"), ("Artifact boundaries", "artifacts", "note"))


def _recap_markdown_head(recap):
    lag, pending, redacted, delivery = (recap.get(key) for key in ("export_lag", "pending", "redacted", "delivery"))
    missing = lag["missing"]
    export = lag.get("problem") or (
        "no %s yet" if lag["record_count"] is None else "%s holds every note" if missing == 0 else
        "%%s lacks the %s; export again" % ("newest note" if missing == 1 else "%d newest notes" % missing)
    ) % _EXPORT_NAME
    lines = ["# Recap", "", "%s, %d superseded by later ones." % (
        _counted(recap["total"], "note"), recap["superseded_count"]), "Export: %s." % export]
    if redacted:
        not_erased = redacted["not_erased"]
        lines.append("Redacted notes: %d. %s%s." % (redacted["count"], not_erased[0].upper(), not_erased[1:]))
    progress = ["", "Pending: nothing."]
    if pending["open_gates"] or pending["unconfirmed"]:
        since = pending.get("since_delivery")
        progress[1] = ("Pending: %s, listed below%s." % (" and ".join(
            _counted(pending[key], noun) + tail for key, noun, tail in (
                ("open_gates", "open gate", ""), ("unconfirmed", "note", " not yet confirmed")) if pending[key]),
            "" if since is None else "; %s since the last delivery" % (
                "%d of them raised" % len(since) if since else "none of them")))
    progress += {"entered": ["Synthesis: approved; the artifact is being written."],
                 "ended": ["Synthesis: stopped before a delivery; shaping goes on."]}.get(
        (recap["synthesis"] or {}).get("state"), [])
    if delivery:
        named = next((_md(item["text"]) for item in recap["artifacts"] if item["id"] == delivery["id"]), "the artifact")
        count = len(delivery["after"]) + delivery["more"]
        since = ("%s since, listed under Since the delivery" % _counted(count, "note") if count else
                 "nothing changed since")
        progress.append("Delivered: %s [%s]; %s." % (named, delivery["id"], since))
    return lines + progress + [""]


def _recap_markdown(recap):
    lines, delivery = _recap_markdown_head(recap), recap.get("delivery")
    for title, key, kind in _RECAP_SECTIONS:
        items = recap[key] if isinstance(recap[key], list) else [recap[key]] * bool(recap[key])
        lines += ["## " + title, ""] + ([_recap_item_line(dict(item, provenance="delivered", evidence=None) if (
            delivery or {}).get("id") == item["id"] else item, kind) for item in items] or ["- none"])
        more = recap.get("truncated", {}).get(key, 0)
        lines += ["- (%d older not shown)" % more] * bool(more) + [""]
    if delivery:
        # A damaged log may hold any type: escaped as a text is.
        lines += ["## Since the delivery", ""] + (["- %s: %s [%s]" % (
            _md(item["type"]).capitalize(), _md(item["text"]), item["id"]) for item in delivery["after"]] or ["- none"])
        lines += ["- (%d older not shown)" % delivery["more"]] * bool(delivery["more"]) + [""]
    if recap.get("warnings"):
        lines += ["## Warnings", ""] + ["- " + warning for warning in recap["warnings"]] + [""]
    return "\n".join(lines)


def _scannable_json(receipt):
    """Compact JSON with a line per key and per item of a list."""
    return "{%s}" % ",\n".join(_compact_json(key) + ":" + (
        "[\n%s]" % ",\n".join(map(_compact_json, value)) if value and type(value) is list else _compact_json(value))
        for key, value in receipt.items())


def _printed_form(result):
    if isinstance(result, str):
        return result
    if "markdown" in result:
        return result["markdown"]
    return (_scannable_json if isinstance(result, _CompactReceipt) else _pretty_json)(result) + "\n"


def _printed_size(result):
    return len(_printed_form(result).encode("utf-8", "backslashreplace"))


_CUTTABLE_LISTS = ("closed_gates",) + tuple(name for _, name in _RECAP_LISTS)
_PENDING_LISTS = ("open_gates", "deferred_gates", "unconfirmed")


class _Recap(collections.namedtuple("_Recap", "receipt order cut counts gates")):
    """What recap found, lists whole; order: each droppable entry's list, in dropping order."""

    def rendered(self, count, markdown):
        """The printed form without the count oldest cuttable entries."""
        dropped, shown = collections.Counter(self.order[:count]), _CompactReceipt(self.receipt)
        for name, number in dropped.items():
            old = shown[name]  # the delivery counts them in its more
            shown[name] = old[number:] if name != "delivery" else dict(
                old, after=old["after"][number:], more=old["more"] + number)
        truncated = {name: number for name in _PENDING_LISTS + _CUTTABLE_LISTS
                     if (number := self.cut.get(name, 0) + dropped[name])}
        if truncated:
            types = [kind for kind in NOTE_TYPES if kind + "s" in truncated or kind == "gate"
                     and any(name.endswith("_gates") for name in truncated)]
            hints = ["tail %s --limit %d" % (" ".join("--type " + kind for kind in types), min(
                _LIMIT_MAX, sum(self.counts[kind] for kind in types)))] * bool(types)
            if "unconfirmed" in truncated:  # a hint names only a limit the command has
                hints.append("recap --limit %d" % min(_LIMIT_MAX, self.receipt["pending"]["unconfirmed"]))
            shown.update(truncated=truncated, see_truncated=hints)
        shown = _with(shown, warnings=shown.pop("warnings", None))
        shown["closed_gates"] = shown["closed_gates"][::-1]  # fitted oldest first, shown newest
        return _recap_markdown(shown) if markdown else shown

    def fitted(self, max_bytes, markdown=False):
        """By bisection, the printed form that fits max_bytes, leaving out the fewest entries."""
        fails, fits, best = 0, len(self.order), self.rendered(0, markdown)
        if _printed_size(best) <= max_bytes:
            return best
        if (needed := _printed_size(best := self.rendered(fits, markdown))) > max_bytes:
            raise NotesError("recap needs %d bytes for mode, shape, counts and warnings, more than --max-bytes %d; "
                             "run it again with --max-bytes %d" % (needed, max_bytes, needed))
        while fits - fails > 1:  # best: the form of fits entries left out, which fits
            mid = (fits + fails) // 2
            if _printed_size(shown := self.rendered(mid, markdown)) <= max_bytes:
                fits, best = mid, shown
            else:
                fails = mid
        return best


def _recap_of(folder, meta, limit):
    with _LogReader(folder, meta) as reader:
        superseded, gates, counts, reopened = _recap_history(reader)
        warnings, redacted, cut = reader.warnings(), reader.redactions.count, {}
        gate_lists, first_gate, wanted = _recap_gates(gates, reopened, limit, cut)
        synthesis = _SynthesisSeen(superseded, limit)
        latest, kept, found, first_note = _recap_live_notes(reader, superseded, limit, cut, wanted, synthesis)
    lists = {name: [(seq, _gate_item(gate_id, gates, found, name)) for seq, gate_id in entries]
             for name, entries in gate_lists.items()}
    lists["unconfirmed"] = unconfirmed = sorted(kept.pop("unconfirmed") + lists["unconfirmed"], key=lambda e: e[0])
    _keep_newest(unconfirmed, limit, cut, "unconfirmed")
    lists.update(kept)
    receipt = _CompactReceipt(
        ok=True, command="recap", session_id=meta["session_id"], path=reader.path, total=reader.total,
        **latest, **{name: [item for _, item in entries] for name, entries in lists.items()},
        superseded_count=len(superseded), export_lag=_export_lag(folder, meta["session_id"], reader.total))
    _with(receipt, redacted=redacted and {"count": redacted, "not_erased": _REDACT_NOT_ERASED})
    pending = receipt["pending"] = {  # zeros too
        name: len(lists[name]) + cut.get(name, 0) for name in ("open_gates", "unconfirmed")}
    if any(pending.values()):
        # An open gate counts from its last opening.
        pending["raised_since"] = min(filter(None, (first_gate, first_note)))[1]
    if synthesis.delivered_at is not None:
        pending["since_delivery"] = [item["id"] for seq, item in sorted(
            lists["open_gates"] + unconfirmed, key=lambda e: e[0]) if seq > synthesis.delivered_at]
    if synthesis.delivery:
        synthesis.delivery["after"] = [note for _, note in synthesis.after]
    receipt.update(synthesis=synthesis.synthesis, delivery=synthesis.delivery)
    lists["delivery"] = synthesis.after
    # Left out oldest first, pending entries last.
    order = [name for names in (_CUTTABLE_LISTS + ("delivery",), _PENDING_LISTS)
             for _, name in sorted((seq, name) for name in names for seq, _ in lists[name])]
    return _Recap(_with(receipt, warnings=warnings), order, cut, counts, gates)


@_command
def _recap(self, *, limit=_RECAP_DEFAULT_LIMIT, format="json", max_bytes=_RECAP_DEFAULT_MAX_BYTES) -> dict:
    """The state of the idea within max_bytes; format="md": the receipt holds it as markdown."""
    _check_choice("format", format, ("json", "md"))
    limit = _check_limit(limit)
    if max_bytes < 1:
        raise NotesError("--max-bytes must be 1 or more")
    fitted = _recap_of(*self._folder_meta(), limit).fitted(max_bytes, markdown=format == "md")
    return {"ok": True, "command": "recap", "markdown": fitted} if format == "md" else fitted


# check: a note is found in a passage by the share of its stems.

_CHECK_FILE_LIMIT = 1 << 18  # bytes of an artifact read at most
_CHECK_LISTED = 50  # findings listed, then counted
_CHECK_EXCERPT = 120  # characters shown
_CHECK_KINDS = ("residue", "revived_discard", "lost_decision", "unmarked_open")
_CHECK_STOP_WORDS = frozenset(
    "an the and or but if of to in on at by for with from as into per via is are was were be been being am do does "
    "did done has have had it its this that these those there here which who whom whose what when where why how than "
    "then so such not no nor only also just very more most less can could will would shall should may might must each "
    "every any all both either some other one we you they he she our your their his her my me us them".split())
# Irregular verbs a suffix cut misses; numbers and signs as words.
_CHECK_WORD_FORMS = dict(pair.split(":") for pair in (
    "paid:pay made:make kept:keep sold:sell bought:buy held:hold sent:send spent:spend chose:choose chosen:choose "
    "gave:give given:give took:take taken:take ran:run met:meet built:build brought:bring went:go gone:go "
    "two:2 three:3 four:4 five:5 six:6 seven:7 eight:8 nine:9 ten:10 twelve:12").split())
_CHECK_SIGNS = {"£": " pound ", "$": " dollar ", "€": " euro ", "%": " percent "}
_CHECK_SUFFIXES = (
    "ations", "ation", "ments", "ment", "ingly", "ings", "ing", "edly", "ness", "ies", "ied", "ers",
    "er", "ed", "es", "ly", "s")
# Marks a line unsettled, in its sentence or lead.
_CHECK_MARK = re.compile(
    r"(?i)\b(?:assum(?:ptions?|ed)|not (?:yet )?(?:decided|confirmed|agreed|settled)|to be "
    r"(?:decided|confirmed|agreed|settled)|undecided|proposed|open questions?|tbd|tbc)\b")
_CHECK_NEGATION = re.compile(r"(?i)\b(?:no|not|never|none|nothing|nobody|neither|without|cannot|instead of|rather than|"
                             r"out of scope|excluded?)\b|n[’']t\b")
# Residue: (pattern, what, confidence).
_CHECK_RESIDUE = (
    (re.compile(r"\bn[0-9]{5,11}\b"), "a note id", "high"),
    (re.compile(r"\b(?:READING_ALIGNMENT|SHAPING|SYNTHESIS)\b"), "a state name", "high"),
    (re.compile(r"(?im)\bnotes\.py\b|\bsession_(?:notes|meta|export)\b|\btell_operator\b|^\s*memory:"),
     "the tool's vocabulary", "high"),
    (re.compile(r"(?i)\b(?:memory (?:log|notes?|signals?)|provenance|evidence level|(?:op|model|shared)\s*[,/]\s*"
                r"(?:declared|inferred|observed|validated)|recap|superseded|unconfirmed|(?:open|deferred|closed) "
                r"gates?|gates? (?:is|are|was|were|stays?) (?:open|deferred|closed))\b"),
     "the protocol's vocabulary", "medium"),
    (re.compile(r"(?i)\b(?:the operator|as (?:we )?(?:discussed|agreed)|we (?:discussed|agreed|decided|dropped|chose)|"
                r"you (?:asked|said|wanted|chose)|i (?:proposed|suggested|recommended)|(?:earlier )?in (?:the|this|"
                r"our) (?:conversation|chat)|(?:was|were|been) (?:discarded|ruled out))\b"),
     "a rationale marker (the conversation's history)", "medium"),
)


def _check_stem(word):
    """A word without its commonest English suffix."""
    for suffix in _CHECK_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word[-2] in "sui"):
            word = word[:-len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def _check_stems(text, drop=frozenset()):
    """A text's content stems: no accents, case, stop words or one-letter words."""
    import unicodedata

    text = re.sub(r"\bsaid on [0-9]{4}-[0-9]{2}-[0-9]{2}", "", text)
    plain = "".join(_CHECK_SIGNS.get(c, c) for c in unicodedata.normalize("NFKD", text.lower())
                    if not unicodedata.combining(c))
    words = [word.replace(",", "") for word in re.findall(r"[0-9][0-9.,]*[0-9]|[^\W_]+", plain)]
    return {_check_stem(_CHECK_WORD_FORMS.get(word, word)) for word in words
            if (len(word) > 1 or word.isdigit()) and word not in _CHECK_STOP_WORDS} - drop


# Words on a note's place in the log or its author.
_CHECK_LOG_STEMS = _check_stems(
    "open deferred defer closed gate whether undecided decided question operator model until later propose proposal "
    "default assumption confirm drop dropped discard reject ruled out reopen again unless pending said words "
    "relayed artifact deliverable settled still")


def _note_stems(text):
    return _check_stems(text, _CHECK_LOG_STEMS)


# A note on the artifact's reader, length or form: it shapes it.
_CHECK_FRAME = re.compile(r"(?i)\b(?:written (?:for|as)|readers?|audience|pages?|length)\b")
_CHECK_FRAME_STEMS = _check_stems("write written read audience page length long short half fits")
_CHECK_LIST_ITEM = re.compile(r"\s*(?:[-*+]\s|[0-9]+[.)]\s|\|)")


def _check_short(text):
    text = " ".join(_visible(_one_line(text)).split())
    return text if len(text) <= _CHECK_EXCERPT else text[:_CHECK_EXCERPT - 3] + "..."


class _CheckedArtifact:
    """An artifact's passages (paragraph, list item, heading, table row), stems, leads."""

    def __init__(self, text):
        self.lines, self.passages, current = text.splitlines(), [], None  # [first, end, in a list], 0-based
        for n, line in enumerate(self.lines):
            single, listed = line.lstrip().startswith(("#", "|")), bool(_CHECK_LIST_ITEM.match(line))
            if not line.strip():
                current = None
            elif current is None or single or listed or alone:
                current, alone = [n, n + 1, listed], single
                self.passages.append(current)
            else:
                current[1] = n + 1
        lines, self.line_stems = self.lines, [_check_stems(line) for line in self.lines]
        self.holding = collections.defaultdict(set)
        # Lead: the ## heading, and the line above (or its list or table) if marked, bold or ending ":".
        self.leads, heading = [], ""
        for index, (first, end, in_list) in enumerate(self.passages):
            for stem in set().union(*self.line_stems[first:end]):
                self.holding[stem].add(index)
            above = index - 1
            while in_list and above >= 0 and self.passages[above][2]:
                above -= 1
            lead = lines[self.passages[above][1] - 1].strip() if above >= 0 else ""
            if not (lead.strip("*_ ").endswith(":") or _CHECK_MARK.match(lead.lstrip("*_ "))
                    or re.fullmatch(r"(\*\*|__).+(\*\*|__)", lead)):
                lead = ""
            self.leads.append(heading + "\n" + lead)
            if lines[first].lstrip().startswith("#"):  # a title (#) marks nothing
                heading = lines[first] if lines[first].lstrip().startswith("##") else ""

    def hits(self, stems, span=1):
        """Passage index -> how many of stems it holds (span 2: with the next one)."""
        return collections.Counter(index for stem in stems for index in {
            place - step for place in self.holding.get(stem, ()) for step in range(span)})

    def marked(self, index, n):
        """Whether line n of passage index is marked, in its sentence or by a lead."""
        while not _CHECK_MARK.search(self.lines[n]):
            if n == self.passages[index][0] or re.search(r"[.!?]\W*$", self.lines[n - 1]):
                return bool(_CHECK_MARK.search(self.leads[index]))
            n -= 1
        return True

    def best_line(self, stems, numbers):
        return max(numbers, key=lambda n: len(self.line_stems[n] & stems))

    def window(self, index, stems):
        """(stems found, the line with more) of the two lines in a row of passage index holding most."""
        first, end, _ = self.passages[index]
        found, n = max((((self.line_stems[n] | self.line_stems[min(n + 1, end - 1)]) & stems, n)
                        for n in range(first, end)), key=lambda pair: len(pair[0]))
        return found, self.best_line(stems, (n, min(n + 1, end - 1)))

    def finding(self, kind, n, note, confidence):
        """A finding on 0-based line n (None: the whole) about note (or None)."""
        return {"kind": kind, "line": None if n is None else n + 1, "note": note and note["id"],
                "note_text": note and _check_short(note.get("update_text") or note["text"]),
                "excerpt": None if n is None else _check_short(self.lines[n]), "confidence": confidence}


def _check_residue(doc, find):
    """Process residue, one finding a line, the surest pattern first."""
    findings = []
    for n, line in enumerate(doc.lines):
        for pattern, what, confidence in _CHECK_RESIDUE:
            if found := pattern.search(line):
                note = find(found.group()) if what == "a note id" else None
                if what == "a state name" and not re.search("[a-z]", line):
                    confidence = "low"  # a line in capitals: maybe a plain word
                findings.append(dict(doc.finding("residue", n, note, confidence), what=what))
                break
    return findings


def _check_discards(doc, recap, find):
    """Live discards restated unnegated in two lines in a row: two stems of it or what it replaced, or its name."""
    settled = _check_stems(" ".join(
        [note["text"] + " " + note.get("update_text", "") for name in _PENDING_LISTS + (
            "decisions", "artifacts", "sources", "closed_gates") for note in recap[name]]
        + [recap[name]["text"] for name in ("mode", "shape") if recap[name]]))
    findings = []
    for discard in recap["discards"]:
        replaced = find(discard["replaces"]) if isinstance(discard.get("replaces"), str) else None
        stems = _note_stems(discard["text"] + " " + (replaced or {}).get("text", "")) - settled
        lead = _note_stems(re.split(r"[:;,(]", discard["text"])[0])
        name = lead - settled if len(lead) <= 3 else set()  # its name, if short, less what is settled
        name = name if len(name) <= 2 else set()
        named = doc.hits(name)
        key = stems - _check_stems(discard["text"].partition(":")[2]) or stems  # a reason may follow, and stay
        windows = [doc.window(i, stems) for i, count in doc.hits(stems).items() if count >= 2 or named.get(i) == count]
        places = [(len(found), -n) for found, n in windows
                  if (len(found) >= 2 and found & key or found <= name) and not _CHECK_NEGATION.search(doc.lines[n])]
        if places:  # the most words, earliest first
            count, n = max(places)
            findings.append(doc.finding("revived_discard", -n, discard, ("low", "low", "medium", "high")[
                min(count, 3)]))
    return findings


def _check_lost(doc, recap):
    delivered = (recap["delivery"] or {}).get("id")
    boundaries = [note for note in recap["artifacts"] if note["id"] != delivered
                  and not re.match(r"(?i)\s*(?:delivered\b|the (?:artifact|deliverable|output)\b)", note["text"])
                  and not _CHECK_NEGATION.search(note["text"])]
    found = doc.holding.keys() | _check_stems((recap["mode"] or {}).get("text", ""))
    findings, framed = [], found | _CHECK_FRAME_STEMS
    for note in recap["decisions"] + boundaries:
        stems = _note_stems(note["text"])
        share = max(doc.hits(stems, 2).values(), default=0) / len(stems) if stems else 1.0
        in_it = framed if _CHECK_FRAME.search(note["text"]) else found
        if share < 0.45 and (present := len(stems & in_it) / len(stems)) < 0.75:
            lead = _note_stems(re.split(r"[:;]\s|,? because\b", note["text"])[0])
            claim = len(lead) > 2 and max(doc.hits(lead, 2).values(), default=0) >= 0.75 * len(lead)
            what = claim and "only its lead clause is in the artifact" or (
                present >= 0.6 and "most of its words are in the artifact, in no one passage")
            confidence = "low" if what or share >= 0.35 else "medium" if share >= 0.25 else "high"
            findings.append(_with(doc.finding("lost_decision", None, note, confidence), what=what))
    return findings


def _check_open(doc, recap, gates, find):
    """Open points stated unmarked; open or deferred gates not shown, if no marked line is left."""
    findings, unshown, claimed, seen = [], [], set(), set()
    firm = [(kept["id"], _note_stems(kept["text"]))
            for kept in recap["decisions"] + recap["sources"] if not _is_unconfirmed(kept)]
    marks = [n for n, line in enumerate(doc.lines) if _CHECK_MARK.search(line)]
    marking = {index for index, (first, end, _) in enumerate(doc.passages) if any(first <= n < end for n in marks)}
    for note in recap["open_gates"] + recap["deferred_gates"] + recap["unconfirmed"]:
        if note["id"] in seen or note.get("type") == "discard":
            continue
        seen.add(note["id"])
        # Closed: with its answer; narrowed: what is left.
        closed, by = note.get("status") == "closed", note["id"] in gates and gates[note["id"]].by
        settled = _check_stems((find(by) or {}).get("text", "")) if by and not closed else set()
        texts = [note["text"] + " " + note.get("update_text", "")] if closed else [note["update_text"]] if by and len(
            _note_stems(note["update_text"])) > 1 else [note["text"], note.get("update_text")]
        # One word left would match any line: then all of them.
        lines, stem_sets = [], [rest if len(rest := stems - settled) > 1 else stems for text in texts
                                if text and (stems := _note_stems(text))]
        if not stem_sets:
            continue
        for stems in stem_sets:
            lines += [(hits / len(stems), -index, doc.best_line(stems, range(*doc.passages[index][:2])))
                      for index, hits in doc.hits(stems).items()
                      if hits >= min(2, len(stems)) and hits / len(stems) >= 0.6]
        lines.sort(reverse=True)
        held = [(share, n) for share, index, n in lines if -index in marking]
        claimed.update(n for share, n in held if share == held[0][0])
        top = [line for line in lines if line[0] == lines[0][0]]
        if top and not any(doc.marked(-index, n) for _, index, n in top):
            share, _, n = top[0]
            near = doc.line_stems[n] & set().union(*stem_sets)
            same = [kept for kept, stems in firm
                    if near <= stems and len(doc.line_stems[n] & stems) >= 0.6 * len(stems)]
            findings.append(_with(doc.finding("unmarked_open", n, note, same and "low" or share >= 0.8 and "high"
                                              or "medium"), what=same and "it holds most of settled %s" % same[0]))
        if note.get("type") is None and not lines:  # an open or deferred gate
            unshown.append(note)
    if len(unshown) > len([n for n in marks if n not in claimed]):
        findings += [doc.finding("unmarked_open", None, note, "low") for note in unshown]
    return findings


def _check_read(folder, file):
    """(path, text) of a regular file in the session folder; refuse any other."""
    way_out = "; save the artifact in the session folder %s and give its name there, such as plan.md" % folder
    if not isinstance(file, str) or not file.strip() or "\0" in file:
        raise NotesError("check needs the artifact's file" + way_out, help_for="check")
    path = os.path.normpath(os.path.join(folder, os.path.expanduser(file)))
    relative = os.path.relpath(path, folder)
    if relative.split(os.sep)[0] == os.pardir:
        relative = os.path.relpath(os.path.realpath(path), os.path.realpath(folder))
    if relative.split(os.sep)[0] == os.pardir:
        raise NotesError("check reads only files inside the session folder" + way_out)
    try:
        if os.path.isdir(path):
            raise IsADirectoryError
        with open(_open_inside(folder, relative.replace(os.sep, "/"), "the artifact", way_out), "rb") as handle:
            data = handle.read(_CHECK_FILE_LIMIT + 1)
    except OSError as error:
        problem = {FileNotFoundError: "does not exist", IsADirectoryError: "is a folder; give the artifact's file"}.get(
            type(error), "cannot be read (%s)" % error.strerror)
        raise NotesError("%s %s%s" % (path, problem, way_out)) from None
    if len(data) > _CHECK_FILE_LIMIT:
        raise NotesError("%s is over %d KiB; check the text alone" % (path, _CHECK_FILE_LIMIT >> 10))
    return path, data.decode("utf-8", "replace")


@_command
def _check(self, *, file) -> dict:
    """Read an artifact in the session folder against the live log: findings, surest first."""
    folder, meta = self._folder_meta()
    path, text = _check_read(folder, file)
    state, doc = _recap_of(folder, meta, _LIMIT_MAX), _CheckedArtifact(text)
    recap = state.receipt
    with _NotesById(recap["path"]) as find:
        findings = (_check_residue(doc, find) + _check_discards(doc, recap, find)
                    + _check_lost(doc, recap) + _check_open(doc, recap, state.gates, find))
    findings.sort(key=lambda item: (("high", "medium", "low").index(item["confidence"]), item["line"] or math.inf))
    receipt = _with(_CompactReceipt(
        ok=True, command="check", path=path, findings=findings[:_CHECK_LISTED],
        counts={kind: sum(item["kind"] == kind for item in findings) for kind in _CHECK_KINDS}),
        warnings=recap.get("warnings"))
    while receipt["findings"] and _printed_size(receipt) > _RECAP_DEFAULT_MAX_BYTES:
        receipt["findings"].pop()
    return _with(receipt, not_listed=len(findings) - len(receipt["findings"]))


# --------------------
# Export and restore: the whole session to one file and back

def _gates_phrase(gates):
    n = collections.Counter(gate.status for gate in gates.values())
    return " and ".join("%s %s" % (_counted(n[status], "question"), words)
                        for status, words in (("open", "still open"), ("deferred", "deferred")) if n[status])


def _earlier_export(path, opener=_open_regular_file):
    """(session id, note count) of the JSON or markdown export at path, or None."""
    if (head := _read_export_head(path, opener)[0]) is not None:
        session, count = head.get("session"), head["record_count"]
        return (session.get("session_id") if isinstance(session, dict) else None, count if type(count) is int else None)
    try:
        with open(opener(path), "rb") as handle:
            found = re.match(r"# Shaping session (\S+)\n(?:.*\n)*?- Notes: (\d+) \(",
                             handle.read(_EXPORT_HEAD_LIMIT).decode("utf-8", "replace"))
    except (NotesError, OSError):  # nothing was downloaded from there
        return None
    return (found.group(1), int(found.group(2))) if found else None


def _session_host(folder, over_mcp=False):
    """SHAPING_NOTES_HOST, else mcp for the server, else by the session folder."""
    if (chosen := os.environ.get(_HOST_VARIABLE)) not in (None,) + _HOSTS:  # never echoed
        raise NotesError("%s names no known host; set it to one of %s, or unset it; nothing was changed"
                         % (_HOST_VARIABLE, ", ".join(_HOSTS)))
    return chosen or ("mcp" if over_mcp else next(
        (host for host, root in _HOST_DOWNLOAD_FOLDERS.items() if (folder + "/").startswith(root + "/")), "local"))


def _same_file(path, other):
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _json_export(reader, meta):
    """Yield the export as _pretty_json prints it."""
    head = {"schema_version": _EXPORT_SCHEMA, "exported_at": _utc_now(), "session": meta, "record_count": reader.total}
    # backslashreplace: a non-UTF-8 path keeps its \udcXX escapes.
    yield (_pretty_json(head)[:-2] + ',\n  "records": ').encode("utf-8", "backslashreplace")
    before = "[\n    "
    for record in reader.records():
        # JSON strings hold no raw newline: any newline is layout.
        yield (before + _pretty_json(record).replace("\n", "\n    ")).encode("utf-8")
        before = ",\n    "
    yield b"[]\n}\n" if before[0] == "[" else b"\n  ]\n}\n"


def _markdown_export(reader, meta, by_type, first_ts, last_ts, warnings, reopened, gates):
    """Yield the audit document; no note's text can forge its structure."""
    created = meta.get("created_at")
    yield ("\n".join([
        "# Shaping session " + _visible(meta["session_id"], True), "",
        "- Created: %s" % (_visible(created, True) if isinstance(created, str) else "unknown"),
        "- Exported: " + _utc_now(),
        "- Notes: %d (%s to %s)" % (reader.total, first_ts or "none", last_ts or "none"),
        "- By type: " + ", ".join("%s %d" % item for item in by_type.items()),
        "- Verify: %s" % ("%d problems" % reader.problem_count if reader.problem_count else "clean")]
        + ["  - " + m for m in warnings] + ["", "## Notes", ""]) + "\n").encode("utf-8")
    for record in reader.records():
        labels = [("      " if number else "- Effect: ") + _visible(_markdown_inline(line))
                  for number, line in enumerate(_markdown_split(record["effect"]))] if "effect" in record else []
        # Checked values: nothing to escape.
        labels += ["- %s: %s" % (k.capitalize(), record[k]) for k in ("ref", "status", "provenance", "evidence")
                   if k in record]
        if record["type"] == "discard" and record["id"] in reopened:
            again = reopened[record["id"]]
            labels.append("- %s by: %s" % ("Questioned" if again in gates else "Reopened", again))
        yield ("\n".join(
            ["### %s · %s · %s" % (record["id"], record["ts"], _visible(record["type"], True)), ""]
            + ["    " + _visible(line) for line in _markdown_split(record["text"])] + [""]
            + labels + [""] * bool(labels)) + "\n").encode("utf-8")


def _restorable_size(chunks, folder):
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > _EXPORT_SIZE_LIMIT:
            raise NotesError(
                "the export would be over %d MiB, more than restore reads; nothing was written. Copy "
                "%s and %s from %s together instead, or export --format md to read it"
                % (_EXPORT_SIZE_LIMIT >> 20, _META_NAME, _LOG_NAME, folder))
        yield chunk


def _export_session(folder, meta, markdown, earlier, write, host):
    """Export's passes over the log's same bytes; write(chunks) writes the file and returns its path."""
    with _LogReader(folder, meta) as reader:
        figures = _count_by_type(reader)
        by_type, count, warnings, news = figures[0], reader.total, reader.warnings(), []
        history = _recap_history(reader) if markdown else None
        output = write(_markdown_export(reader, meta, *figures, warnings, history[3], history[1]) if markdown
                       else _restorable_size(_json_export(reader, meta), folder))
        if host in _HOST_DOWNLOAD_FOLDERS:
            news.append("Download %s (%s) from %s and keep it%s" % (
                _visible(os.path.basename(output), True), _counted(count, "note"),
                "its link in the chat" if host == "chatgpt" else "the outputs folder",
                "" if markdown else ": it brings the session back in a new conversation"))
            if earlier not in (None, (meta["session_id"], count)):
                news.append("the copy it replaced held %s" % (
                    "another session" if earlier[0] != meta["session_id"] else
                    _counted(earlier[1], "note") if earlier[1] is not None else "no readable note count"))
        if by_type["gate"] and by_type["artifact"]:  # else no delivery leaves one open
            seen = _SynthesisSeen((), 0)
            for record in reader.records():
                seen.meet(record)
            gates = (history or _recap_history(reader))[1] if seen.delivery is not None else {}
            if any(gate.status == "open" for gate in gates.values()):
                news.append("%she artifact delivered last leaves %s" % ("t" if news else "T", _gates_phrase(gates)))
    shown = _visible(output, True)
    receipt = {"ok": True, "command": "export", "record_count": count, "path": output, "keep": {
        "file": "sandbox:" + output if host == "chatgpt" else output, "host": host,
        "how": {"mcp": "Saved at this path on the computer that runs the MCP server.",
                "local": "Saved at this path on this computer.",
                "chatgpt": "ChatGPT makes this sandbox link, shown in the chat, a download link."}.get(host) or (
            "Claude.ai offers its outputs folder (%s) for download: this is %s in %s."
            % (_HOST_DOWNLOAD_FOLDERS[host], os.path.basename(shown), os.path.dirname(shown)))}}
    return _with(receipt, tell_operator=news and "; ".join(news) + ".", warnings=warnings)


@_command
def _export(self, *, output=None, format="json") -> dict:
    """Write the whole session to one file: JSON or, with format="md", an audit document.

    output may replace an earlier export, never any other file."""
    _check_choice("format", format, ("json", "md"))
    folder, meta = self._folder_meta()
    _check_meta_session_id(folder, meta)
    host = _session_host(folder, self._over_mcp)
    _check_path_text("--output", output)
    output = (os.path.abspath(os.path.expanduser(output)) if output
              else os.path.join(folder, _EXPORT_MARKDOWN_NAME if format == "md" else _EXPORT_NAME))
    if os.path.isdir(output):
        raise NotesError("--output %s is a folder; give a file path, such as %s"
                         % (output, os.path.join(output, _EXPORT_NAME)))
    if os.path.isfile(os.path.dirname(output)):
        raise NotesError("--output %s is inside a file, not a folder" % output)
    inside, name = os.path.realpath(os.path.dirname(output)) == folder, os.path.basename(output)
    own = [n for n in (_META_NAME, _LOG_NAME, _LOCK_NAME)  # by name or inode (a link)
           if inside and name == n or _same_file(output, os.path.join(folder, n))]
    if own or inside and name.startswith(_TORN_PREFIX):
        raise NotesError("--output %s is the session's own %s; choose another path, such as %s"
                         % (output, (own or ["side file"])[0], os.path.join(folder, _EXPORT_NAME)))
    try:
        mode = os.lstat(output).st_mode
    except (OSError, ValueError):  # nothing there, as lexists says
        mode = 0
    if mode and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):  # a link is refused when written
        raise _special_file_error(output, mode)
    # All else there is the user's: a mistyped or injected path must not cost it.
    if stat.S_ISREG(mode) and not _starts_as_export(output):
        raise NotesError("--output %s is not an export of this tool, which export never replaces; choose another "
                         "--output, or remove it" % output)

    def write(chunks):
        # Refused: a place that cannot take it; unexpected: failing while writing.
        refusal = "cannot write %s (%s); choose another --output"
        try:
            os.makedirs(os.path.dirname(output), exist_ok=True)
        except OSError as error:
            raise NotesError(refusal % (output, error.strerror)) from None
        _write_file_atomically(output, chunks, refusal, _UMASK_FILE_MODE)  # for the host's download
        return output
    return _export_session(folder, meta, format == "md", _earlier_export(output), write, host)


def _not_an_export(path, why):  # why names no value the export holds
    return NotesError(
        "%s is not a session export: %s; nothing was written, with --accept-damaged or without"
        % (path, why), _EXIT_INTEGRITY)


# More objects than a 16 MiB export of real notes holds.
_EXPORT_OBJECT_LIMIT = 250000


def _read_export(source):
    """(path, export) of an export path or binary file: within the limit, a session and its records."""
    if hasattr(source, "read"):
        path, handle = getattr(source, "name", "the export"), source
    else:
        path = os.path.abspath(os.path.expanduser(source))
        try:
            handle = open(_open_regular_file(path), "rb")
        except OSError as error:
            raise NotesError("cannot read %s (%s); pass the path of a session_export.json"
                             % (path, error.strerror)) from None
    with handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise _special_file_error(path, status.st_mode)
        handle.seek(0)
        data = handle.read(_EXPORT_SIZE_LIMIT + 1) if status.st_size <= _EXPORT_SIZE_LIMIT else None
    if data is None or len(data) > _EXPORT_SIZE_LIMIT:
        raise NotesError("%s is over %d MiB, larger than any session export; nothing was written. Pass a "
                         "session_export.json" % (path, _EXPORT_SIZE_LIMIT >> 20))
    objects = [0]

    def one_value_per_key(pairs):
        objects[0] += 1
        if objects[0] > _EXPORT_OBJECT_LIMIT:
            raise _not_an_export(path, "it holds more JSON objects than any session export")
        found = dict(pairs)
        if len(found) < len(pairs):
            raise _not_an_export(path, "it is not a JSON object with one value per key")
        return found
    try:
        export = json.JSONDecoder(
            parse_constant=_refuse_constant, parse_float=_finite_float,
            object_pairs_hook=one_value_per_key).decode(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise _not_an_export(path, "it is not valid UTF-8") from None
    except (ValueError, RecursionError):
        raise _not_an_export(path, "it is not readable JSON (broken, a number too big for a float, or nested too "
                                "deeply)") from None
    if not isinstance(export, dict) or export.get("schema_version") != _EXPORT_SCHEMA:
        raise _not_an_export(path, "not JSON with schema_version %s" % _EXPORT_SCHEMA)
    session = export.get("session")
    if not isinstance(session, dict) or not _is_session_id(session.get("session_id")):
        raise _not_an_export(path, "its session has no usable session_id")
    if not isinstance(session.get("created_at", ""), str):
        raise _not_an_export(path, "its session's created_at is not a string")
    if not isinstance(export.get("records"), list):
        raise _not_an_export(path, "its records are not a list")
    return path, export


class _Export(_ProblemTally):
    """An export read whole and checked as verify checks a log."""

    def __init__(self, source, accept_damaged=False):
        _ProblemTally.__init__(self)
        self.path, export = _read_export(source)
        self.session, self.all = export["session"], export["records"]
        self.record_count, self.last_record = len(self.all), (self.all or [None])[-1]
        if export.get("record_count") != self.record_count:
            self.note_problems([_problem(
                None, None, "record_count", "record_count is not %d, the number of records" % self.record_count)])
        self.check_records(accept_damaged)
        self.exported_at = export["exported_at"] if _is_timestamp(export.get("exported_at")) else None
        if self.problem_count and not accept_damaged:
            raise NotesError(
                "%s is damaged (%d problems); nothing was written. Restore an intact export, or run "
                "restore --accept-damaged to bring back every record exactly as the export holds it"
                % (self.path, self.problem_count), _EXIT_INTEGRITY, {"problems": self.problems})

    def check_records(self, accept_damaged):
        seen, redactions = _LogOrder(), _RedactionsSeen()
        for number, record in enumerate(self.all, 1):
            if not isinstance(record, dict):
                raise _not_an_export(self.path, "record %d is not an object" % number)
            kinds = _check_record(record, self.session["session_id"])
            kinds += seen.place_problems(record, kinds)
            try:
                line = _record_line(record) if kinds or not _FIELD_RULES.keys() >= record.keys() else b""
            except (ValueError, TypeError, RecursionError):
                if accept_damaged:
                    raise NotesError("%s: record %d cannot be a line of JSON (nested too deeply, or not valid "
                                     "UTF-8); nothing was written" % (self.path, number), _EXIT_INTEGRITY) from None
                line = b""
            if len(line) > _LINE_LIMIT:
                raise _not_an_export(self.path, "it holds a value over %d characters, larger than any record"
                                     % _LINE_LIMIT)
            self.note_line_problems(number, record, kinds)
            if _is_usable(kinds):
                redactions.meet(record, number)
        self.note_problems([p for p in [seen.unfinished_batch()] if p] + redactions.problems())
        self.notices = _problem_messages(seen.notices, seen.notice_count)


def _last_note_id(record):
    return record["id"] if record is not None and _is_note_id(record.get("id")) else None


def _notes_kept_by_restore(folder, export, set_aside=False):
    """How many export records the folder holds (None: a fresh start); refuse all else."""
    log_path, session_id = _log_path(folder), export.session["session_id"]
    links = any(os.path.islink(os.path.join(folder, name)) for name in (_META_NAME, _LOG_NAME, _LOCK_NAME))
    descriptor, size = (None, 0) if links else _open_log(log_path)  # a link: refused later
    if descriptor is not None:
        os.close(descriptor)
    # Notes, no meta: a restore cut short if they begin the export; else refused.
    meta = export.session if size and _read_meta(folder) is None else _check_session_folder(folder)
    if meta is None or set_aside and meta is not export.session and meta["session_id"] != session_id:
        return None
    with _LogReader(folder, meta) as reader:
        existing = common = 0
        records = iter(export.all)
        for existing, record in enumerate(reader.records(), 1):
            common += common == existing - 1 and next(records, None) == record
        if meta is export.session:
            if reader.problem_count or common != existing:
                _check_session_folder(folder)
            return None
        # Under the lock a killed restore's torn end is mended; other problems refuse.
        mendable = sum(e["kind"] in ("torn_tail", "missing_newline", "incomplete_batch") for e in reader.problems)
        if reader.problem_count > mendable:
            raise NotesError("the log in %s has problems (run verify); restore only adds to a healthy log, "
                             "nothing was changed" % folder)
        if meta["session_id"] != session_id and existing:
            raise NotesError(
                "%s holds another session (%s) with %s; nothing was changed. If a reset started it "
                "after the export, restore again with --set-aside, else into an empty --dir"
                % (folder, meta["session_id"], _counted(existing, "note")))
        if meta["session_id"] == session_id and common != existing:
            if common == export.record_count:  # an older export: restoring it would fork the session
                raise NotesError(
                    "%s already holds session %s with %s up to %s, past this export's %d up to %s: nothing to "
                    "restore; nothing was changed. Carry on here, and run export to update the export"
                    % (folder, session_id, _counted(existing, "note"), _last_note_id(reader.last_record),
                       export.record_count, _last_note_id(export.last_record) or "none"))
            raise NotesError(
                "the log in %s and this export went different ways after %s in common; nothing was changed. To keep "
                "both, restore the export into an empty --dir and append only_in_folder's notes there"
                % (folder, _counted(common, "note")), _EXIT_USAGE,
                {"only_in_folder": [
                    {k: record[k] for k in ("id", "type", "text", "effect") if k in record}
                    for number, record in enumerate(reader.records(), 1)
                    if common < number <= common + _RECAP_DEFAULT_LIMIT],
                 "only_in_folder_count": existing - common})
    if size and not existing:
        raise NotesError("%s holds lines that are not notes of a session; move it aside first" % log_path)
    return existing or None


def _restore_keep(host, folder, export_path):
    ours, chat = os.path.join(folder, _EXPORT_NAME), host == "chatgpt"
    shown = _visible(ours, True)
    if host in _HOST_DOWNLOAD_FOLDERS:
        return "from now on keep the %s each export %s (%s%s)" % (
            _EXPORT_NAME, "links in the chat" if chat else "writes in the outputs folder", "sandbox:" * chat, shown)
    if _same_file(ours, export_path) or ours == export_path:
        return "keep %s from now on: export writes it" % shown
    return ("from now on keep %s, which export writes, in place of %s, which the next note makes out of date"
            % (shown, _visible(export_path, True)))


def _mend_log_tail(folder):
    """Under the lock: mend the log's end, as append does."""
    fd = _open_log_for_append(_log_path(folder))
    try:
        with open(fd, "rb", closefd=False) as handle:
            tail = _LogTail(handle, os.fstat(fd).st_size)
        return _recover_tail(folder, fd, tail)
    finally:
        os.close(fd)


def _log_then(log_path, pieces):
    """For each (start, end, more): the log's bytes from start to end (None: its end), and more."""
    descriptor, size = _open_log(log_path)
    with open(descriptor, "rb") as handle:  # closed before the rename
        for start, end, more in pieces:
            yield from _log_blocks(handle, start, size if end is None else end)
            yield more


def _export_in_folder(folder, accept_damaged):
    """(the folder's longest export, the others' names); refuse unless they are its parts."""
    found = _exports_in(folder)
    if len(found) > _RESTORE_CANDIDATES_LIMIT:
        raise NotesError("%s holds more than %d exports; nothing was changed. Pass the one to restore: restore PATH"
                         % (folder, _RESTORE_CANDIDATES_LIMIT))
    if not (exports := [_Export(path, accept_damaged) for path in found]):
        raise NotesError("no export of this tool in the session folder %s; nothing was changed. Upload %s there, "
                         "or pass its path: %s restore PATH" % (folder, _EXPORT_NAME, _on_folder(folder)))
    longest = max(exports, key=lambda e: (e.record_count, os.path.basename(e.path) == _EXPORT_NAME))
    if any(e.session["session_id"] != longest.session["session_id"] or e.all != longest.all[:len(e.all)]
           for e in exports):
        raise NotesError(
            "%s holds %d exports (listed in exports) that went different ways; nothing was changed. Pass the one "
            "to restore: %s restore PATH" % (folder, len(exports), _on_folder(folder)), _EXIT_USAGE,
            {"exports": [{"file": os.path.basename(e.path), "session_id": e.session["session_id"],
                          "record_count": e.record_count, "last_note_id": _last_note_id(e.last_record),
                          "exported_at": e.exported_at} for e in exports]})
    return longest, [os.path.basename(e.path) for e in exports if e is not longest]


@_command
def _restore(self, *, export_file=None, accept_damaged=False, set_aside=False) -> dict:
    """Bring a session back into the folder from an export (ours or v0's), a path or open binary file;
    default: the folder's. set_aside: move another session's log aside first."""
    folder = _resolve_folder(self.folder, self.session)
    host = _session_host(folder, self._over_mcp)
    if export_file is not None and not hasattr(export_file, "read"):
        _check_path_text("the export file's path", export_file)
    export, passed_over = (
        _export_in_folder(folder, accept_damaged) if export_file is None
        else (_Export(export_file, accept_damaged), []))
    session, recovered, moved, log_path = export.session, None, None, _log_path(folder)
    _notes_kept_by_restore(folder, export, set_aside)  # refused before the lock too
    with _SessionLock(folder):
        kept = _notes_kept_by_restore(folder, export, set_aside)
        if kept is None:
            meta, kept = _read_meta(folder), 0
            if meta and meta["session_id"] != session["session_id"]:
                if set_aside and os.path.lexists(log_path):  # Crash window: moved, the meta left: as below
                    moved, fd = _create_new_file("%s.set-aside-%s" % (log_path, _utc_now(_FILE_STAMP)))
                    os.close(fd)
                    os.rename(log_path, moved)  # over our empty file
                # Crash window: cut short here, no session; restoring again starts afresh.
                os.unlink(os.path.join(folder, _META_NAME))
                _fsync_folder(folder)
            # Crash window: a log without meta, which writers refuse (no fork); restoring again writes it.
            _write_file_atomically(log_path, [b"".join(map(_record_line, export.all))])
            _write_meta(folder, session["session_id"], session.get("created_at") or _utc_now())
        else:
            recovered = _mend_log_tail(folder)
            if kept < export.record_count:
                # Crash window: before the rename the log is as it was; after, it holds the rest too.
                _replace_log(folder, _log_then(log_path, [(0, None, b"".join(map(_record_line, export.all[kept:])))]))
    last = export.last_record  # text only if it verifies: echo no secret or damage
    receipt = {
        "ok": True, "command": "restore", "session_id": session["session_id"],
        "record_count": export.record_count, "restored": export.record_count - kept,
        "path": log_path, "export": {
            "file": export.path, "exported_at": export.exported_at, "last_note": None if last is None else {
                "id": _last_note_id(last), "type": last["type"] if last.get("type") in NOTE_TYPES else None,
                "text": None if _check_record(last, session["session_id"]) else last["text"]}}}
    _with(receipt, passed_over=passed_over, set_aside=moved)
    if host in _HOST_DOWNLOAD_FOLDERS and not os.path.lexists(os.path.join(folder, _EXPORT_NAME)):
        try:  # a copy where the operator downloads
            receipt["exported"] = self.export()["path"]
        except (NotesError, OSError):  # the restore stands: export says why
            receipt["exported"] = None
    with _LogReader(folder, _read_meta(folder)) as reader:
        gates = _recap_history(reader)[1]
    stamp = export.exported_at
    tell = "The session is back with %s%s; %s; %s, so restore that one instead if you have it; %s."
    receipt["tell_operator"] = tell % (
        _counted(export.record_count, "note"), ", with %s kept as the export held them (verify lists them)"
        % _counted(export.problem_count, "problem") if export.problem_count else "",
        _gates_phrase(gates) or "no gate is open or deferred",
        "this export was written at %s %s UTC: one downloaded later holds more notes" % (stamp[:10], stamp[11:16])
        if stamp else "this export has no time: one with more notes is later", _restore_keep(host, folder, export.path))
    return _with(receipt, warnings=_problem_messages(export.problems, export.problem_count) + export.notices,
                 recovered=recovered)


# --------------------
# Batches: append one signal or several, written all or none

def _refuse_a_long_batch(count):
    if count > _BATCH_LINE_LIMIT:
        raise NotesError("the batch holds %d lines; the limit is %d: split it into several batches"
                         % (count, _BATCH_LINE_LIMIT))


def _clean_batch_line(number, entry):
    """One line of a batch as a signal, "@K" links kept; refusals echo no value."""
    if not isinstance(entry, dict) or not set(entry).issubset(_SIGNAL_FIELDS):  # no key is echoed
        raise NotesError("the line is not a JSON object of signal fields only: %s (append's flags without dashes)"
                         % ", ".join(_SIGNAL_FIELDS))
    values, places = {name: entry.get(name) for name in _SIGNAL_FIELDS}, {}
    for name, value in values.items():
        if value is not None and not isinstance(value, str):
            raise NotesError("%s is not a string" % name)
        if name not in _BATCH_LINK_FIELDS or value is None:
            continue
        value = value.strip()
        place = re.fullmatch("@([0-9]{1,3})", value)
        if value[:1] == "@" and not (place and 0 < int(place[1]) < number):
            raise NotesError("%s names no earlier line of this batch; @K names line K (from 1) before this one" % name)
        if place:
            places[name], values[name] = "@%d" % int(place[1]), _note_id_for(1)
        elif not _is_note_id(value):
            raise NotesError("%s is not a note id (such as n00012) nor @K naming an earlier line" % name)
    return dict(_clean_signal(*values.values()), **places)


def _clean_batch(entries, flags_given):
    if flags_given:
        raise NotesError("--batch takes every field from its lines; drop %s, or append that signal on its own"
                         % ", ".join("--" + name for name in flags_given))
    if not isinstance(entries, list):
        raise NotesError("batch must be a list of dicts keyed as append's arguments")
    if not entries:
        raise NotesError("--batch got no signal; send one JSON object a line, such as {\"type\": "
                         "\"decision\", \"text\": \"...\"}", help_for="append")
    _refuse_a_long_batch(len(entries))
    signals = []
    for number, entry in enumerate(entries, 1):
        try:
            signals.append(_clean_batch_line(number, entry))
        except NotesError as error:
            raise NotesError("line %d: %s" % (number, error.message), help_for=error.help_for) from None
    return signals


def _check_batch_links(folder, signals, batch):
    """Refuse a link to no note of the right kind, or a forbidden supersede."""
    with _NotesById(_log_path(folder)) as in_log:
        for number, signal, name in [(n, s, k) for n, s in enumerate(signals, 1) for k in _BATCH_LINK_FIELDS if s[k]]:
            note_id = signal[name]
            target = signals[int(note_id[1:]) - 1] if note_id[0] == "@" else in_log(note_id)
            if target is None and _read_meta(folder) is None:
                raise NotesError("%s; --%s %s names no note; nothing was written" % (_no_session(folder), name, note_id))
            if target is None:
                message = "--%s %s names no note in this session; check the id with tail or recap" % (name, note_id)
                message += "; a line of this batch is @K" if batch else ""
            else:
                kind = _link_rule_broken(
                    name, signal["type"], target["type"], target.get("provenance") in _FIRM_PROVENANCES,
                    signal["provenance"])
                message = kind and _LINK_RULES[kind][1] % dict(target, id=note_id)
            if message:
                raise NotesError(("line %d: " % number if batch else "") + message)


def _gate_root(record, window, in_log):
    """The id of a gate note's gate; a loop (damage) ends the walk."""
    visited, ref = set(), record.get("ref")
    while isinstance(ref, str) and ref not in visited:
        visited.add(ref)
        if (target := window.get(ref) or in_log(ref)) is None or target.get("type") != "gate":
            return ref
        record, ref = target, target.get("ref")
    return record["id"] if "ref" not in record else ref


def _still_the_latest_word(record, later, in_log):
    """Whether no later record (newest first) superseded it or changed its gate."""
    if record["type"] != "gate":
        return not any(o.get("type") != "gate" and o.get("ref") == record["id"] for o in later)
    updates = [o for o in later if o.get("type") == "gate" and isinstance(o.get("ref"), str)]
    window = {o.get("id"): o for o in later}
    gate = updates and _gate_root(record, window, in_log)
    return not any(_gate_root(update, window, in_log) == gate for update in updates)


def _resolved_links(signal, ids):
    return {name: ids[int(value[1:]) - 1] if name in _BATCH_LINK_FIELDS and isinstance(value, str)
            and value.startswith("@") else value for name, value in signal.items()}


def _find_duplicate(tail, signals, session_id, log_path, batch):
    """The intact records of an earlier append this one repeats (a batch: line for line), or None."""
    count = len(signals)
    for place in range(len(tail.recent) - count + 1):
        earlier = tail.recent[place:place + count][::-1]
        ids = [other.get("id") for other in earlier]
        if all((not batch or other.get("batch") == "%d/%d" % (line, count)) and not _check_record(other, session_id)
               and all(other.get(name) == value for name, value in _resolved_links(signal, ids).items())
               for line, (other, signal) in enumerate(zip(earlier, signals), 1)):
            with _NotesById(log_path) as in_log:  # later: newest first
                return earlier if all(_still_the_latest_word(other, tail.recent[:place], in_log)
                                      for other in earlier) else None
    return None


@_command
def _append(self, *, type=None, text=None, effect=None, ref=None, status=None, provenance=None,
           evidence=None, about=None, by=None, batch=None) -> dict:
    """Append one memory signal; the receipt names its note (or the one a retry repeats).

    batch: a list of signals (dicts of these keywords; "@K" names the K-th), all written or none."""
    fields = (type, text, effect, ref, status, provenance, evidence, about, by)
    signals = [_clean_signal(*fields)] if batch is None else _clean_batch(
        batch, [name for name, value in zip(_SIGNAL_FIELDS, fields) if value is not None])
    folder, batch, count = _resolve_folder(self.folder, self.session), batch is not None, len(signals)
    log_path = _log_path(folder)
    _check_session_folder(folder)
    _check_batch_links(folder, signals, batch)  # the log only grows: found now, there under the lock
    with _SessionLock(folder):
        meta, created = _open_session_for_writing(folder)
        try:
            new_log = not os.path.lexists(log_path)
            fd = _open_log_for_append(log_path)
        except OSError as error:
            raise _folder_error(folder, error) from None
        try:
            with open(fd, "rb", closefd=False) as handle:  # the window holds an earlier batch whole
                tail = _LogTail(handle, os.fstat(fd).st_size, time.strftime(_TIMESTAMP_FORMAT, time.gmtime(
                    time.time() - _DUPLICATE_WINDOW_SECONDS)), _DUPLICATE_WINDOW_RECORDS + count - 1)
            _refuse_an_absurd_seq(tail)
            recovered = _recover_tail(folder, fd, tail)
            records = duplicate = _find_duplicate(tail, signals, meta["session_id"], log_path, batch)
            if duplicate is None:
                now, ids = _utc_now(), [_note_id_for(tail.highest_seq + place) for place in range(1, count + 1)]
                records = [_build_record(meta["session_id"], tail.highest_seq + place, *_resolved_links(
                    signal, ids).values(), timestamp=now, batch="%d/%d" % (place, count) if batch else None)
                    for place, signal in enumerate(signals, 1)]
                # Crash window: a kill mid-write leaves lines 1/N to K/N, taken as torn.
                _append_line(fd, b"".join(map(_record_line, records)))
            if new_log:
                _fsync_folder(folder)
        finally:
            os.close(fd)
    return _with({"ok": True, "command": "append", "note_id": records[-1]["id"], "seq": records[-1]["seq"],
                  "path": log_path}, note_ids=batch and [record["id"] for record in records],
                 types=batch and [record["type"] for record in records],
                 duplicate=duplicate is not None, recovered=recovered, created=created)


# --------------------
# Redaction: the one audited rewrite of a complete line

# A note's problems the placeholder ends: redact takes a note with these.
_REDACTABLE_PROBLEMS = frozenset(("control_character", "too_long", "credential", "empty_text"))


def _note_to_redact(handle, tail, note_id, session_id):
    """(offset, line, record) of the note to redact; refuse what redact cannot explain."""
    if (found := _find_note_line(handle, tail.keep_end, note_id)) is None:
        needle, torn = ('"id":"%s"' % note_id).encode("ascii"), False
        for offset, line in _read_lines_backward(handle, tail.size):  # the lines from keep_end on are torn
            if offset < tail.keep_end or torn:
                break
            torn = needle in (line or b"")
        raise NotesError(
            "%s is in the last lines of the log, which a crash cut short: no note to redact; nothing "
            "was changed. The next append moves them to a side file (%s*): delete it to remove their "
            "text" % (note_id, _TORN_PREFIX) if torn else
            "%s names no note in this session that can be read; check the id with tail or recap" % note_id)
    record = found[2]
    if damage := sorted({kind for kind, _ in _check_record(record, session_id)} - _REDACTABLE_PROBLEMS):
        raise NotesError(
            "%s does not verify (%s): redact leaves damage as it is; nothing was changed. Run verify, "
            "and restore the session from an intact export into a new --dir"
            % (note_id, ", ".join(damage)))
    if _is_redaction_note(record):
        raise NotesError("%s records a redaction, which stays for verify; nothing was changed" % note_id)
    for _, line in _read_lines_backward(handle, tail.keep_end) if _is_redacted(record) else ():
        value = _parse_line(line)[0] if line else None  # a source note after it that says why
        if value is not None and _is_seq(value.get("seq")) and value["seq"] <= record["seq"]:
            break
        if value is not None and _is_redaction_note(value, note_id) and _is_usable(_check_record(value, None)):
            raise NotesError("%s is redacted already (%s says why); nothing was changed" % (note_id, value["id"]))
    return found


@_command
def _redact(self, *, note_id, reason) -> dict:
    """Replace a note's text and effect with the placeholder; a source note records why.

    not_erased says what it cannot reach (exports, side files, copies)."""
    note_id = _command_note_id("redact", note_id)
    if not (reason or "").strip():
        raise NotesError("--reason is empty; say why the note is redacted (not what it held), for example "
                         "--reason 'It held a private phone number.'", help_for="redact")
    signal = _clean_signal("source", "%s%s: %s" % (_REDACTION_PREFIX, note_id, _clean_field(
        "reason", reason, _REDACT_REASON_LIMIT)), None, None, None, about=note_id)
    folder = self._folder_meta()[0]
    log_path = _log_path(folder)
    _check_session_folder(folder)
    with _SessionLock(folder):
        session_id = _open_session_for_writing(folder)[0]["session_id"]
        if (fd := _open_log(log_path)[0]) is None:
            raise NotesError("redact %s: this session has no notes yet" % note_id)
        # Crash window: before the rename the log is as it was (end mended); after, both are there.
        with open(fd, "rb") as handle:
            status = os.fstat(fd)
            _refuse_a_hard_linked_log(log_path, status)  # its other name would keep the old text
            _refuse_a_protected_log(folder, fd)
            tail = _LogTail(handle, status.st_size)
            _refuse_an_absurd_seq(tail)
            offset, line, record = _note_to_redact(handle, tail, note_id, session_id)
            new_line = line if _is_redacted(record) else _record_line(_redacted_record(record))[:-1]
            recovered = (tail.keep_end < tail.size or tail.needs_newline) and _mend_log_tail(folder)
            if recovered:
                tail = _LogTail(handle, os.fstat(fd).st_size)
            source = _build_record(session_id, tail.highest_seq + 1, *signal.values())
            _replace_log(folder, _log_then(
                log_path, ((0, offset, new_line), (offset + len(line), tail.size, _record_line(source)))))
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
    return _with({"ok": True, "command": "redact", "note_id": note_id, "seq": record["seq"],
                  "redaction_note_id": source["id"], "path": log_path, "not_erased": _REDACT_NOT_ERASED},
                 may_still_hold=[os.path.join(folder, name) for name in names
                                 if name in (_EXPORT_NAME, _EXPORT_MARKDOWN_NAME) or name.startswith(_TORN_PREFIX)],
                 recovered=recovered)


# --------------------
# Command line: one table of commands and options, and its parser

def _closest(word, choices):
    import difflib  # only a mistake needs it

    matches = difflib.get_close_matches(word.lower(), [choice.lower() for choice in choices], n=1)
    return next((choice for choice in choices if matches and choice.lower() == matches[0]), None)


def _did_you_mean(word, choices):
    guess = _closest(word, choices)
    return "did you mean %s? " % guess if guess else ""


def _one_of(name, allowed):
    """An argparse type taking only the allowed words; a typo gets the nearest, unechoed."""
    def check(value):
        if value in allowed:
            return value
        import argparse

        raise argparse.ArgumentTypeError("unknown %s; %suse one of: %s" % (
            name, _did_you_mean(value, allowed), ", ".join(allowed)))
    return check


class _Option:
    """A command's option: its flag, the Session keyword it fills, how argparse and MCP take it."""

    def __init__(self, flag, metavar, help_text, name=None, mcp_help=None, schema=None, from_stdin=False,
                 required=False, choices=None, **settings):
        self.flag, self.metavar, self.help_text, self.mcp_help, self.from_stdin = (
            flag, metavar, help_text, mcp_help, from_stdin)
        self.name, self.schema = name or flag.lstrip("-").replace("-", "_"), schema or {}
        self.required, self.choices = required, choices
        self.settings = dict(settings, type=_one_of(flag.lstrip("-"), choices)) if choices else settings
        self.kind = ("boolean" if settings.get("action") == "store_const" else
                     "integer" if settings.get("type") is int else "string")
        self.many = settings.get("action") == "append"


# A command runs the Session method of its name (mcp aside).
_Command = collections.namedtuple("_Command", "purpose options example")

_AT_K = "ref, about or by may name an earlier %s as \"@K\" (K from 1)"
_COMPACT_HELP = "each record without its time, session, seq and checksum"


def _flag(flag, help_text):
    return _Option(flag, None, help_text, action="store_const", const=True, default=False)


def _text(flag, metavar, help_text, limit, required=False):
    return _Option(flag, metavar, "%s, at most %d characters" % (help_text, limit), schema={"maxLength": limit},
                   from_stdin=True, required=required)


def _limit(what, default):
    return _Option("--limit", "N", "%s, at most %d (default %d)" % (what, _LIMIT_MAX, default), type=int,
                   default=default, schema={"minimum": 1, "maximum": _LIMIT_MAX})


def _format(mcp_help=None):
    return _Option("--format", "FORMAT", "json (default) or md", mcp_help=mcp_help, choices=("json", "md"),
                   default="json")


_COMMANDS = {
    "init": _Command("Start a session in the folder, or report the one already there.", [], "init"),
    "append": _Command(
        "Append one memory signal and print its receipt. A mode note whose text begins with the word SYNTHESIS enters "
        "synthesis; a later mode note that does not (a STOP appends one beginning SHAPING) ends it; an artifact note "
        "appended in synthesis is a delivery (unless inferred: a proposal), which ends it too.", [
        _Option("--type", "TYPE", "the signal type (required): " + ", ".join(NOTE_TYPES), choices=NOTE_TYPES,
                required=True),
        _text("--text", "TEXT", "what to keep (required)", _TEXT_LIMIT, required=True),
        _text("--effect", "EFFECT", "optional consequence", _EFFECT_LIMIT),
        _Option("--ref", "NOTE_ID", "an earlier note this one updates (a gate: its status, and effect if given) "
                "or supersedes (other types; superseding an op or shared note takes --provenance op or shared)"),
        _Option("--status", "STATUS", "gate status: open, deferred or closed (gates only; default open; an update "
                "needs it)", choices=GATE_STATUSES),
        _Option("--provenance", "WHO", "who the signal comes from: " + ", ".join(PROVENANCES), choices=PROVENANCES),
        _Option("--evidence", "LEVEL", "how well it is known: " + ", ".join(EVIDENCE_LEVELS), choices=EVIDENCE_LEVELS),
        _Option("--about", "NOTE_ID", "an earlier note this one answers, refines or comments on (a gate: any of its "
                "notes); both stay live (example: --about n00004)"),
        _Option("--by", "NOTE_ID", "on a gate update: the note that settles the gate or a part of it, not a gate "
                "(example: --by n00005 with --ref n00002, --status closed)"),
        _Option("--batch", "-", "read up to %d signals (at most %d KiB) from standard input, one JSON object a "
                "line with the keys above, no dashes; %s. All are checked, then all written or none"
                % (_BATCH_LINE_LIMIT, _BATCH_BYTE_LIMIT // 1024, _AT_K % "line")),
    ], "append --type decision --provenance op --evidence declared --text 'The log stays append-only.'\n"
       "  python3 -S notes.py append --batch - <<'EOF'\n"
       '  {"type": "decision", "text": "Reminders go by email.", "provenance": "op", "evidence": "declared"}\n'
       '  {"type": "gate", "ref": "n00002", "status": "closed", "by": "@1", "text": "Closed: email.", '
       '"provenance": "op", "evidence": "declared"}\n'
       "  EOF"),
    "tail": _Command("Print the last records, oldest first, optionally filtered.", [
        _limit("how many records to print", _TAIL_DEFAULT_LIMIT),
        _Option("--type", "TYPE", "keep only this type; repeat for several", name="types", action="append",
                mcp_help="keep only these types (a list, or one type as a string)", choices=NOTE_TYPES),
        _Option("--since", "TS", "keep records at or after this time (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, UTC)"),
        _Option("--until", "TS", "keep records before this time (same forms as --since)"),
        _Option("--grep", "TEXT", "keep records whose text or effect holds these words, whole and in order, "
                "whatever the case; more then counts the matches left out (example: --grep 'email')"),
        _flag("--compact", _COMPACT_HELP),
    ], "tail --limit 3 --type gate --compact"),
    "show": _Command(
        "Print one note and its chain: what it replaced, what replaced it, a gate's updates and the notes that "
        "settled them, the notes about it.", [
        _Option("note_id", "NOTE_ID", "the note to look up, such as n00003", required=True),
        _flag("--compact", _COMPACT_HELP),
    ], "show n00003 --compact"),
    "summary": _Command("Print the number of records by type and the last note.", [], "summary"),
    "recap": _Command(
        "Print the state of the idea within a size budget: gates, unconfirmed notes (labelled model or inferred; "
        "no mode, tension or delivery), live decisions, discards and more. pending: how many gates are open and "
        "notes unconfirmed, since when, and which came after the last delivery; synthesis: entered, delivered or "
        "ended, and by which notes; delivery: the last artifact note appended in synthesis and the live notes "
        "after it, mode notes aside; export_lag: how many notes the folder's export lacks.", [
        _limit("items kept per list, newest first", _RECAP_DEFAULT_LIMIT),
        _format(mcp_help="json (default), or md: the recap as markdown in the receipt's markdown"),
        _Option("--max-bytes", "N", "at most this many bytes of output, leaving out the oldest entries that can go "
                "(default %d)" % _RECAP_DEFAULT_MAX_BYTES, schema={"minimum": 1}, type=int,
                default=_RECAP_DEFAULT_MAX_BYTES),
    ], "recap --format md"),
    "verify": _Command(
        "Check the meta and every line of the log. Problems found are a result, not an error: ok is false, "
        "problems lists them, and the command line exits 3.", [], "verify"),
    "export": _Command(
        "Write the whole session to one file (JSON by default, or a markdown audit document). keep: which file the "
        "operator keeps, and how; tell_operator: what they have to do, if anything.", [
        _Option("--output", "PATH", "where to write (default %s, or %s with --format md, in the session folder)"
                % (_EXPORT_NAME, _EXPORT_MARKDOWN_NAME), mcp_help="a path inside the session folder, relative to "
                "it (default %s, or %s with format md)" % (_EXPORT_NAME, _EXPORT_MARKDOWN_NAME)),
        _format(),
    ], "export --output /mnt/data/session_export.json"),
    "restore": _Command(
        "Bring a session back into the folder from a session_export.json, and export it there; export: its "
        "time and last note; tell_operator: the gates left, how to tell a later export, the file to keep.", [
        _Option("export_file", "EXPORT_FILE", "the export to restore (ours or v0's); default: the one in the "
                "session folder", nargs="?"),
        _flag("--accept-damaged", "restore a damaged export anyway, every record as it holds it, nothing repaired "
              "(verify then reports the same problems)"),
        _flag("--set-aside", "first move another session's log to a side file (set_aside names it)"),
    ], "--dir /mnt/data/shaping restore /mnt/data/session_export.json"),
    "check": _Command(
        "Read an artifact file in the session folder against the live log; nothing is written. Findings, each with "
        "its line, note and confidence: process residue (note ids, state names, the tool's words), revived "
        "discards, lost decisions and boundaries, open points or unconfirmed proposals without a mark (Not "
        "decided: / Assumption to confirm:).", [
        _Option("file", "FILE", "the artifact, relative to the session folder (or an absolute path inside it), "
                "such as plan.md", required=True),
    ], "--dir /mnt/data check plan.md"),
    "redact": _Command(
        "Replace one note's text and effect with %s in place, and append a source note that says which note was "
        "redacted and why. Earlier exports and side files keep the old text." % _REDACTED_TEXT, [
        _Option("note_id", "NOTE_ID", "the note to redact, such as n00004", required=True),
        _text("--reason", "TEXT", "why it is redacted (required; never the secret itself)", _REDACT_REASON_LIMIT,
              required=True),
    ], "redact n00004 --reason 'It held a private phone number.'"),
    "sessions": _Command(
        "List the folder's own session (name null) and each named one: notes, last note, open and deferred gates, "
        "last export; current is the default.", [], "sessions"),
    "mcp": _Command("Serve the commands as MCP tools over stdio (append_batch is append --batch), until the end of "
                    "input.", [
        _flag("--allow-redact", "serve redact as a tool too (it rewrites a note)"),
        _Option("--restore-from", "DIR", "a folder the restore tool may also read exports from (repeatable)",
                action="append"),
    ], "--dir /home/you/shaping mcp"),
}
# %% doubled: argparse formats help texts.
_DIR_HELP = ("session folder (default: $%s, else the folder that holds notes.py, or %s when notes.py is "
             "installed as a package)" % (_DIR_VARIABLE, _user_data_folder().replace("%", "%%")))
_SESSION_HELP = "the session in sessions/NAME of that folder (example: --session pricing-page)"

_HABITUAL_OPTIONS = {
    "-n": "--limit", "--lines": "--limit", "--count": "--limit", "-t": "--type",
    "-m": "--text", "--message": "--text", "--note": "--text", "-o": "--output"}


def _see_help(command=None):
    return "(see: %s %s--help)" % (_invoked_as(), command + " " if command else "")


def _build_parser():
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # without the values argparse quotes: one may be a secret
            if (command := self.prog.partition(" ")[2] or None) is None and "invalid choice: " in message:
                word = message.split("invalid choice: ", 1)[1].split(" (choose", 1)[0].strip("'\"")
                message = "unknown command (the first word after the options); %scommands: %s" % (
                    _did_you_mean(word, _COMMANDS), ", ".join(_COMMANDS))
            message = re.sub(r"(ambiguous option: -[^\s=]*)\S* could match", r"\1 could be",
                             re.sub(r": '[^']*'|: \"[^\"]*\"", "", message))
            raise NotesError("%s %s" % (message, _see_help(command)))

    program, raw = _invoked_as().replace("%", "%%"), argparse.RawDescriptionHelpFormatter
    parser = Parser(
        prog=_CONSOLE_COMMAND if program == _CONSOLE_COMMAND else "notes.py",
        description="Append-only memory log for Memory-Assisted Shaping: stamps, numbers and "
        "checksums each memory signal, and reads the session back.", formatter_class=raw,
        epilog="example:\n  %s %s\n\nrun %s COMMAND --help for a command's options"
               % (program, _COMMANDS["append"].example.split("\n")[0], program))
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    parser.add_argument("--dir", help=_DIR_HELP)
    parser.add_argument("--session", metavar="NAME", help=_SESSION_HELP)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in _COMMANDS.items():
        sub = commands.add_parser(
            name, help=command.purpose, description=command.purpose, formatter_class=raw, epilog=
            "example:\n  %s %s" % (program, command.example.replace(_SCRIPT_COMMAND, program)))
        sub.add_argument("--dir", default=argparse.SUPPRESS, help=_DIR_HELP)
        sub.add_argument("--session", metavar="NAME", default=argparse.SUPPRESS, help=_SESSION_HELP)
        for opt in command.options:
            sub.add_argument(opt.flag, metavar=opt.metavar, **opt.settings,
                             **({"dest": opt.name} if opt.flag.startswith("-") else {}),
                             help=opt.help_text + ("; - reads it from standard input" if opt.from_stdin else ""))
    return parser


def _parse_arguments(argv):
    args, unknown = _build_parser().parse_known_args(argv)
    if unknown:
        word, command = unknown[0], args.command
        flag, start = word.split("=", 1)[0], argv.index(command) + 1 if command in argv else 0
        # Named by its place, not its value: an unquoted text may hold a secret.
        place = 1 + (argv.index(word, start) if word in argv[start:] else argv.index(word) if word in argv
                     else len(argv) - 1)
        if not word.startswith("-"):
            hint = ("a text goes after --text, in quotes: --text 'The text.'" if getattr(args, "text", 0) is None
                    else "put quotes around a text that holds spaces")
            raise NotesError("unexpected argument %d (a word after %s that no option takes); %s %s" % (
                place, command, hint, _see_help(command)))
        if not re.fullmatch(r"--?[a-z][a-z-]{0,30}", flag):  # not an option's name: maybe a pasted value
            raise NotesError("unexpected argument %d (it starts with a dash, but %s has no such option); pass a "
                             "value that starts with a dash as --text=VALUE %s" % (place, command, _see_help(command)))
        flags = ["--dir", "--session"] + [opt.flag for opt in _COMMANDS[command].options if opt.flag[0] == "-"]
        guess = _HABITUAL_OPTIONS.get(flag) if _HABITUAL_OPTIONS.get(flag) in flags else _closest(flag, flags)
        raise NotesError("%s has no option %s; %s%s" % (
            command, flag, "use %s instead " % guess if guess else "", _see_help(command)))
    return args  # --dir and --session: Session checks them


def _read_stdin(flag, byte_limit, too_much):
    if sys.stdin is None:  # started with standard input closed
        raise NotesError("%s - reads standard input, but there is none; pipe it in or use a quoted here-document "
                         "<<'EOF'" % flag)
    data = getattr(sys.stdin, "buffer", sys.stdin).read(byte_limit + 1)
    if len(data) > byte_limit:
        raise NotesError("standard input for %s holds more than %d bytes; %s" % (flag, byte_limit, too_much))
    try:
        return data if isinstance(data, str) else data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotesError("standard input for %s is not valid UTF-8 (byte %d); send it as UTF-8"
                         % (flag, error.start)) from None


def _cli_keywords(args):
    """The Session method's keyword arguments; "-" reads standard input (--batch: a JSON value a line, no blank)."""
    opts = _COMMANDS[args.command].options
    kwargs = {opt.name: getattr(args, opt.name) for opt in opts}
    if kwargs.get("batch") is not None:
        if kwargs["batch"] != "-":
            raise NotesError("--batch takes - and reads the signals from standard input, one JSON object a line",
                             help_for="append")
        data = _read_stdin("--batch", _BATCH_BYTE_LIMIT, "split the signals into several batches")
        lines = data.rstrip().split("\n") if data.strip() else []
        _refuse_a_long_batch(len(lines))
        for number, line in enumerate(lines, 1):
            if not line.strip():
                raise NotesError("line %d: the line is blank; send one JSON object a line" % number)
            try:
                lines[number - 1] = _parse_json(line)
            except ValueError:
                raise NotesError("line %d is not one JSON object (broken, or spread over several lines); put each "
                                 "signal on one line" % number) from None
        return dict(kwargs, batch=lines)
    asking = [opt for opt in opts if opt.from_stdin and kwargs[opt.name] == "-"]
    if len(asking) > 1:
        raise NotesError("%s - and %s - both ask for standard input, which carries one value; pass one as an "
                         "argument" % (asking[0].flag, asking[1].flag))
    for opt in asking:
        kwargs[opt.name] = _read_stdin(opt.flag, _STDIN_LIMIT, "%s at most %d characters" % (
            "say why in" if opt.name == "reason" else "a memory signal is a pointer of",
            opt.schema["maxLength"]))
    return kwargs


def _error_receipt(error, see=None):
    """The receipt of a command stopped by an exception; see: a refusal's help pointer."""
    if isinstance(error, PermissionError):  # wherever it was met: a refusal with the way out
        error = NotesError(
            "permission denied on %s; nothing was changed. Run the command as the user who owns the "
            "session, or pass --dir with a folder of your own" % (error.filename or "a session file"))
    if isinstance(error, NotesError):
        see = "" if error.help_for is None else " " + (see % error.help_for if see else _see_help(error.help_for))
        return {"ok": False, "error": error.message + see, **error.details}
    return {"ok": False, "error": "unexpected error: %s: %s" % (type(error).__name__, error)}


# --------------------
# MCP: the same Session methods as tools over stdio
# Newline-delimited JSON-RPC 2.0; arguments checked by the CLI table.

_MCP_HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_MCP_STATELESS_VERSIONS = ("2026-07-28",)  # no handshake: the version rides in each request's _meta
_MCP_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_MCP_SERVER_INFO = {"name": "shaping-notes", "title": "notes.py", "version": __version__}
# Cacheable: fixed while a server runs, and private to no user.
_MCP_CACHEABLE = ("server/discover", "tools/list", "resources/list", "resources/read")

_RPC_INVALID_PARAMS = -32602  # other codes sit beside their messages

_MCP_INSTRUCTIONS = (
    "This server keeps the memory log of a Memory-Assisted Shaping session.\nCall append when losing a fact would hurt "
    "continuity: a confirmed decision, a gate's change, a discarded path likely to return, a new source of truth, "
    "an artifact boundary, the move to synthesis; never for ordinary talk. Send a "
    "decision and the gate update it settles in one append_batch call.\nRead back (recap, then tail or show "
    "with compact true) only when the operator asks for the state, on re-entry, or before synthesis.\nA result "
    "with isError true saved nothing: fix the arguments if that keeps the meaning, else tell the operator the "
    "note was not saved.")
_MCP_CONTRACTS = (
    ("protocol.md", "The behaviour contract: states, gates, when a signal is due."),
    ("note-io.md", "The I/O contract: payload, receipt, readback, failure."))

# append_batch is a tool of its own: append keeps type and text required.
_MCP_TOOLS = ("append", "append_batch", "recap", "tail", "show", "summary", "verify", "export", "check",
              "sessions", "restore", "redact")


def _mcp_served_tools(allow_redact):
    return tuple(name for name in _MCP_TOOLS if allow_redact or name != "redact")


class _ProtocolError(Exception):
    """A JSON-RPC error (args: code, message, maybe data): the request is wrong, not the note."""


def _mcp_options(command):
    return {opt.name: opt for opt in _COMMANDS[command].options if opt.name != "batch"}


def _mcp_wording(command, text):
    """A command-line text in the tool's words: --flag as its argument, "print" as "return"."""
    for opt in _COMMANDS["append" if command == "append_batch" else command].options:
        text = re.sub(r"(?<![\w-])%s(?![\w-])" % re.escape(opt.flag), opt.name, text)
    return re.sub(r"\bPrint(s?)\b", r"Return\1", re.sub(r"\bprint(s?)\b", r"return\1", text))


def _mcp_input_schema(command):
    opts, props = _mcp_options(command), {}
    for name, opt in opts.items():
        schema = {"type": opt.kind, **opt.schema}
        if opt.choices:
            schema["enum"] = list(opt.choices)
        if opt.metavar == "NOTE_ID":
            schema["pattern"] = "^\\s*n[0-9]{5,11}\\s*$"
        default = opt.settings.get("default")
        props[name] = dict(
            {"type": "array", "items": schema} if opt.many else schema,
            description=opt.mcp_help or _mcp_wording(command, opt.help_text),
            **({} if default is None else {"default": default}))
    return _with({"type": "object", "properties": props, "additionalProperties": False},
                 required=[name for name, opt in opts.items() if opt.required])


def _mcp_listing(command):
    if command == "append_batch":
        schema = {"type": "object", "properties": {"batch": {
            "type": "array", "minItems": 1, "maxItems": _BATCH_LINE_LIMIT, "items": _mcp_input_schema("append"),
            "description": "the signals in order, each with append's arguments; %s, such as a decision and the gate "
                           "update it settles with \"by\": \"@1\"" % (_AT_K % "signal of the list")}},
            "required": ["batch"], "additionalProperties": False}
        description = ("Append several memory signals, all or none, each checked as append checks it; note_ids "
                       "and types list their ids and types.")
    else:
        schema, description = _mcp_input_schema(command), _mcp_wording(command, _COMMANDS[command].purpose)
    if command != "sessions":
        schema["properties"]["session"] = {
            "type": "string", "pattern": "^%s$" % _SESSION_NAME_SHAPE.pattern,
            "description": "the session (one idea) by name; default: the server's (sessions lists them)"}
    return {"name": command, "title": command.replace("_", " ").capitalize(), "description": description,
            "inputSchema": schema, "annotations": {  # an append retried is a duplicate: idempotent
                "readOnlyHint": command not in ("append", "append_batch", "export", "restore", "redact"),
                "destructiveHint": command in ("export", "redact"), "idempotentHint": command != "redact",
                "openWorldHint": False}}


def _mcp_keywords(command, args):
    """The Session method's keyword arguments, each read as argparse reads it."""
    import argparse

    opts = _mcp_options(command)
    kwargs = {name: opt.settings.get("default") for name, opt in opts.items()}
    for place, (name, value) in enumerate(args.items(), 1):
        if (opt := opts.get(name)) is None:  # named by its place, not its name: a client wrote it
            raise NotesError("%s takes no argument of the name given as argument %d of this call; its arguments "
                             "are: %s" % (command, place, ", ".join(opts) or "none"))
        if value == "-" and opt.from_stdin:  # here standard input carries the protocol
            raise NotesError("%s over MCP takes the %s itself; \"-\" (standard input) is for the command line "
                             "only" % (command, name))
        kind, many = opt.kind, opt.many
        items = value if many and isinstance(value, list) else [] if value is None else [value]
        if any(type(item) not in {"boolean": (bool,), "integer": (int, str)}.get(kind, (str,)) for item in items):
            raise NotesError("argument %r of %s must be %s%s" % (name, command, "a list of strings or " if many else "",
                             {"boolean": "true or false", "integer": "an integer"}.get(kind, "a string")))
        convert = opt.settings.get("type")
        try:
            items = [convert(str(item)) for item in items] if convert else items
        except (argparse.ArgumentTypeError, ValueError) as error:  # refused in the command line's words
            error = error if isinstance(error, argparse.ArgumentTypeError) else "invalid int value"
            raise NotesError("argument %s: %s" % (opt.flag, error), help_for=command) from None
        if value is not None:
            kwargs[name] = items if many else items[0]
    return kwargs


# What export may create over MCP per folder and run, lest injected text fill it.
_MCP_EXPORT_CREATE_LIMIT = 20
_mcp_export_created = collections.Counter()


def _mcp_export(session, output, format):
    """The export tool: written by descriptor below the session folder, bounded."""
    _check_choice("format", format, ("json", "md"))
    folder, meta = session._folder_meta()
    what, way_out = "export over MCP writes only inside the session folder: output", (
        "; give a file name inside it, such as %s (written to %s)" % (_EXPORT_NAME, os.path.join(folder, _EXPORT_NAME)))
    relative = output or (_EXPORT_MARKDOWN_NAME if format == "md" else _EXPORT_NAME)
    parts = _inside_parts(relative, what, way_out)
    if len(parts) == 1 and (parts[0] in (_META_NAME, _LOG_NAME, _LOCK_NAME) or parts[0].startswith(_TORN_PREFIX)):
        raise NotesError("export over MCP never writes over a session file, and output names one%s" % way_out)
    if not _CAN_WALK_INSIDE:
        output = os.path.join(folder, *parts)
        _resolved_inside(output, folder, what, way_out)
        if os.path.islink(output):
            raise NotesError("%s is a link%s" % (what, way_out))
        return session.export(output=output, format=format)
    _check_meta_session_id(folder, meta)

    def may_replace(descriptor):
        if not _starts_as_export(descriptor):
            raise NotesError("output names a file that is not an export of this tool, and an export replaces "
                             "only one; choose another output name")

    def make_new():
        if _mcp_export_created[folder] >= _MCP_EXPORT_CREATE_LIMIT:
            raise NotesError(
                "export over MCP creates at most %d new files and folders per server run, all made; nothing was "
                "written. Export to a name written before (such as %s), or run export on the command line"
                % (_MCP_EXPORT_CREATE_LIMIT, _EXPORT_NAME))
        _mcp_export_created[folder] += 1

    def write(chunks):
        try:
            return _write_inside(folder, relative, chunks, may_replace, make_new, what, way_out)
        except OSError as error:
            raise _write_error(os.path.join(folder, relative), error, "choose another output") from None
    return _export_session(folder, meta, format == "md", _earlier_export(
        relative, lambda path: _open_inside(folder, path, what, way_out)), write, _session_host(folder, True))


class _McpServer:

    def __init__(self, folder, session, tools, restore_from):
        self.home, self.tools, self.restore_from = Session(folder, session=session), tools, []
        for path in restore_from or ():
            if not path.strip() or not os.path.isdir(os.path.expanduser(path)):
                raise NotesError("--restore-from names no folder; give one that exists, or leave it out")
            self.restore_from.append(os.path.realpath(os.path.expanduser(path)))

    def session(self, name):
        if name is not None:
            _check_session_name(name, "argument session")
        session = Session(self.home.folder, session=self.home.session if name is None else name)
        session._over_mcp = True
        return session


def _mcp_restore(server, session, export_file, accept_damaged, set_aside):
    """The restore tool: the export opened inside an allowed folder."""
    if export_file is None:
        return session.restore(accept_damaged=accept_damaged, set_aside=set_aside)
    places = [_resolve_folder(session.folder, session.session)] + server.restore_from
    way_out = "; put the export in %s or a folder given with mcp --restore-from; give its name" % places[0]
    full = os.path.isabs(export_file)
    if full:
        if not (places := [place for place in places if export_file.startswith(place.rstrip(os.sep) + os.sep)]):
            raise NotesError("export_file is a full path outside the folders restore reads" + way_out)
    for place in places:
        relative = export_file[len(place.rstrip(os.sep)) + 1:] if full else export_file
        try:
            descriptor = _open_inside(place, relative, "export_file", way_out)
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            raise NotesError("export_file is a folder" + way_out) from None
        with open(os.path.join(place, relative), "rb", opener=lambda path, flags: descriptor) as handle:
            return session.restore(export_file=handle, accept_damaged=accept_damaged, set_aside=set_aside)
    raise NotesError("export_file names no file in the folders restore reads" + way_out)


def _mcp_call_tool(server, params):
    """Run one tool as the CLI runs its command; a refusal is a result with isError."""
    name, args = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or name not in server.tools:
        raise _ProtocolError(_RPC_INVALID_PARAMS, "Unknown tool: %s; the tools are: %s"
                             % (_compact_json(name), ", ".join(server.tools)))
    if not isinstance(args, (dict, type(None))):
        raise _ProtocolError(_RPC_INVALID_PARAMS, "arguments of tools/call must be an object")
    try:
        args = dict(args or {})  # sessions lists all: no session
        session = server.session(None if name == "sessions" else args.pop("session", None))
        if name == "append_batch":  # signal objects: no option carries them
            if set(args) != {"batch"} or not isinstance(args["batch"], list):
                raise NotesError("append_batch takes only the argument batch, which must be a list of signal objects "
                                 "such as [{\"type\": \"decision\", \"text\": \"...\"}]; call append for one signal")
            receipt = session.append(batch=args["batch"])
        else:  # export and restore stay inside their folders
            kwargs = _mcp_keywords(name, args)
            receipt = (_mcp_export(session, **kwargs) if name == "export" else _mcp_restore(
                server, session, **kwargs) if name == "restore" else getattr(session, name)(**kwargs))
        failed = False  # a verify finding problems ran fine: its ok is false
    except Exception as error:  # in the tool's words; the server goes on
        receipt, failed = _error_receipt(error, "(see the input schema of the %s tool in tools/list)"), True
        receipt["error"] = _mcp_wording(name, receipt["error"])
    return {"content": [{"type": "text", "text": _printed_form(receipt)}], "structuredContent": receipt,
            "isError": failed}


def _mcp_contracts():
    """(uri, path, file name, description) of each contract beside notes.py or installed."""
    import pathlib

    this = os.path.realpath(__file__)
    paths = {name: os.path.join(os.path.dirname(this), name) for name, _ in _MCP_CONTRACTS}
    if not all(map(os.path.isfile, paths.values())) and _is_installed_package_folder(os.path.dirname(this)):
        import importlib.metadata  # only a server without contracts beside it needs it

        try:
            files = importlib.metadata.distribution(_CONSOLE_COMMAND).files or []
        except importlib.metadata.PackageNotFoundError:
            files = []
        located = {file.name: os.path.realpath(str(file.locate())) for file in files
                   if str(file).replace("\\", "/").endswith("share/doc/shaping-notes/" + file.name)}
        if any(os.path.realpath(str(file.locate())) == this for file in files):
            paths = {name: path if os.path.isfile(path) else located.get(name, path) for name, path in paths.items()}
    return [(pathlib.Path(paths[name]).as_uri(), paths[name], name, description)
            for name, description in _MCP_CONTRACTS if os.path.isfile(paths[name])]


def _mcp_result(server, method, params):
    if method in ("initialize", "server/discover"):
        contracts = _mcp_contracts()
        result = {"capabilities": {"tools": {}, **({"resources": {}} if contracts else {})},
                  "instructions": _MCP_INSTRUCTIONS + (
                      "\nRead the note-io.md and protocol.md resources before the first append: they are the full "
                      "contract." if contracts else "")}
        if method == "server/discover":
            return dict(result, supportedVersions=list(_MCP_STATELESS_VERSIONS))
        requested = params.get("protocolVersion")
        return dict(result, serverInfo=_MCP_SERVER_INFO, protocolVersion=requested
                    if requested in _MCP_HANDSHAKE_VERSIONS else _MCP_HANDSHAKE_VERSIONS[-1])
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [_mcp_listing(name) for name in server.tools]}
    if method == "tools/call":
        return _mcp_call_tool(server, params)
    if method == "resources/list":
        return {"resources": [{
            "uri": uri, "name": name, "title": name, "description": description,
            "mimeType": "text/markdown"} for uri, _, name, description in _mcp_contracts()]}
    if method != "resources/read":
        raise _ProtocolError(-32601, "Method not found: %s" % method)
    uri = params.get("uri")
    if (path := next((path for known, path, _, _ in _mcp_contracts() if known == uri), None)) is None:
        raise _ProtocolError(_RPC_INVALID_PARAMS, "Unknown resource: %s" % _compact_json(uri))
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError as error:
        raise _ProtocolError(-32603, "Internal error: cannot read %s (%s)" % (path, error.strerror)) from None
    return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}


def _mcp_answer(server, line):
    """The response to one input line; None for a notification or a client's response."""
    try:
        message = _parse_json(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is a ValueError too
        return _mcp_error(None, -32700, "Parse error: the line is not JSON in UTF-8")
    if not isinstance(message, dict):  # a batch too: one line is one bounded reply
        return _mcp_error(None, -32600, "Invalid Request: send one JSON object, one request per line "
                          "(batches are not served)")
    request_id, method, params = message.get("id"), message.get("method"), message.get("params")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None  # MCP ids are strings or integers, never null
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response: we send no requests
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str) or ("id" in message and request_id is None):
        return _mcp_error(request_id, -32600, 'Invalid Request: expected "jsonrpc": "2.0", '
                          'a string "method" and a string or integer "id"')
    if "id" not in message:
        return None  # a notification: nothing to answer
    try:
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise _ProtocolError(_RPC_INVALID_PARAMS, "params must be an object")
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        stateless = method != "initialize" and (_MCP_VERSION_KEY in meta or method == "server/discover")
        version = meta.get(_MCP_VERSION_KEY, _MCP_STATELESS_VERSIONS[-1])
        if stateless and not isinstance(version, str):
            raise _ProtocolError(_RPC_INVALID_PARAMS, "the protocol version in _meta must be a string")
        if stateless and version not in _MCP_STATELESS_VERSIONS:  # only by initialize
            raise _ProtocolError(-32022, "Unsupported protocol version",
                                 {"supported": list(_MCP_STATELESS_VERSIONS), "requested": version})
        result = _mcp_result(server, method, params)
    except _ProtocolError as error:
        return _mcp_error(request_id, *error.args)
    except Exception as error:  # a fault in one answer must not end the server
        return _mcp_error(request_id, -32603, "Internal error: %s: %s" % (type(error).__name__, error))
    if stateless:
        result.update({"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": _MCP_SERVER_INFO}},
                      **({"ttlMs": 300000, "cacheScope": "public"} if method in _MCP_CACHEABLE else {}))
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _mcp_error(request_id, code, message, data=None):
    _to_stderr("notes.py mcp: error %d: %s" % (code, message))
    return {"jsonrpc": "2.0", "id": request_id,
            "error": _with({"code": code, "message": message}, data=data)}


def _to_stderr(line):
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr may be closed or failing
        pass


def _serve_mcp(server) -> None:
    """Serve MCP over stdio until the input ends; nothing but JSON-RPC goes to stdout."""
    import signal

    # Ctrl-C: a SystemExit, so main prints nothing
    signal.signal(signal.SIGINT, lambda *_: sys.exit(_to_stderr("notes.py mcp: interrupted; stopping")))
    if sys.stdin is None:  # standard input closed: at its end already
        return
    source = sys.stdin.buffer
    try:
        # A longer line is dropped in pieces, never held whole.
        for line in iter(lambda: source.readline(_LINE_LIMIT + 1), b""):
            if len(line) > _LINE_LIMIT and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):
                    line = source.readline(_LINE_LIMIT)
                answer = _mcp_error(None, -32600, "Invalid Request: a message over 1 MiB")
            elif not line.strip():
                continue
            else:
                try:
                    answer = _mcp_answer(server, line)
                except Exception as error:  # a MemoryError, say
                    answer = _mcp_error(None, -32603, "Internal error: %s" % type(error).__name__)
            if answer is None:
                continue
            try:
                data = (_compact_json(answer) + "\n").encode("utf-8", "backslashreplace")
            except MemoryError:
                data = None
            if data is None:  # outside except: the traceback's memory is freed first
                data = (_compact_json(_mcp_error(answer.get("id"), -32603, "Internal error: the answer "
                        "did not fit in the memory left; ask for less (a smaller limit or max_bytes)")) + "\n").encode()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
    except OSError:
        raise  # a failing stream: main says so on stderr
    except Exception as error:  # main would print a receipt to stdout: not JSON-RPC
        _to_stderr("notes.py mcp: stopped: %s" % type(error).__name__)
        raise SystemExit(_EXIT_UNEXPECTED) from None


# --------------------
# Entry: main, the one place that prints, and the dispatch

def _silence_stdout():
    """Point stdout at the null device, lest the flush at exit fail again (exit 120)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _print_result(result):
    """Print a receipt or text as UTF-8 whatever the locale; None (help, version, MCP): flush."""
    if sys.stdout is None:  # started with stdout closed: no one to tell
        return
    if result is not None:
        text, stream = _printed_form(result), getattr(sys.stdout, "buffer", None)
        sys.stdout.flush()
        if stream is None:  # a replaced stdout, such as a test's capture
            sys.stdout.write(text)
        else:
            stream.write(text.encode("utf-8", "backslashreplace"))
    sys.stdout.flush()


def _dispatch(args):
    if args.command == "mcp":
        return _serve_mcp(_McpServer(args.dir, args.session, _mcp_served_tools(args.allow_redact), args.restore_from))
    return getattr(Session(args.dir, session=args.session), args.command)(**_cli_keywords(args))


_INTERRUPTED = {"ok": False, "error": (
    "interrupted (Ctrl-C); a write may have finished: run the command again, and a saved note is answered as a "
    "duplicate (\"duplicate\": true), never stored twice")}


def _run_command(argv):
    """Parse and run one command: (what to print or None, exit code)."""
    try:
        result = _dispatch(_parse_arguments(argv))
        return result, _EXIT_INTEGRITY if isinstance(result, dict) and result.get("ok") is False else _EXIT_OK
    except SystemExit as request:  # --help, --version (printed), or the MCP server's end
        return None, request.code or 0
    except (NotesError, PermissionError) as error:
        return _error_receipt(error), getattr(error, "exit_code", _EXIT_USAGE)
    except KeyboardInterrupt:
        return _INTERRUPTED, _EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # help to a reader that has gone: main handles it
    except Exception as error:  # no traceback ever reaches the user
        return _error_receipt(error), _EXIT_UNEXPECTED


def _serves_mcp(argv):
    words = iter(argv)
    for word in words:
        if word in ("--dir", "--session"):
            next(words, None)
        elif not word.startswith("-"):
            return word == "mcp"
    return False


def main(argv=None) -> int:
    """Run one command; print its receipt or error as JSON; return the exit code."""
    argv, code = sys.argv[1:] if argv is None else argv, _EXIT_OK
    try:
        result, code = _run_command(argv)
        if result is not None and code != _EXIT_OK and _serves_mcp(argv):
            _to_stderr(_compact_json(result))  # the server is down: stdout is JSON-RPC
        else:
            _print_result(result)
        return code
    except KeyboardInterrupt:  # while printing: the command had run
        try:
            _print_result(_INTERRUPTED)
        except (OSError, KeyboardInterrupt):
            pass
        return _EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader has gone: no one is left to tell
        _silence_stdout()
        return code
    except OSError as error:  # stdout on a full disk, say
        _silence_stdout()
        _to_stderr(_compact_json({"ok": False, "error": "cannot print the result (%s)" % error.strerror}))
        return _EXIT_UNEXPECTED


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)  # start-up is over: main answers Ctrl-C
    sys.exit(main())
