"""Issue 29, point 8: the credential guard measured kind by kind on a corpus written for it.

tests/fixtures/credentials/kinds.txt holds templates of fake secrets, each labelled by kind, and
lookalikes.txt texts that only resemble them.  The templates are filled here with seeded random
characters, so that no file of the project holds a key.  Each kind is its own test case: a kind
the guard stops catching fails by name.  Everything runs in process, through Session.append.
"""

from __future__ import annotations

import base64
import codecs
import json
import random
import re
import string
import uuid

import pytest

from conftest import FIXTURES, notes

CORPORA = FIXTURES / "credentials"
DASHES = "-" * 5
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
CLASSES = {
    "A": string.ascii_letters + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "H": "0123456789abcdef",
    "X": "0123456789abcdefABCDEF",
    "D": string.digits,
    "B": string.ascii_letters + string.digits + "+/",
    "S": string.ascii_letters + string.digits + "-_",
    "L": string.ascii_lowercase + string.digits,
    "P": string.ascii_letters + string.digits + "!#%&*+-=?@^_~",
    "Z": string.ascii_uppercase + "234567",
    "z": string.ascii_lowercase + "234567",
    "W": BASE58,
    "N": string.ascii_lowercase,
}


class Filler:
    """Fills one template's fields with random characters drawn from a seed of its own."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)

    def draw(self, alphabet: str, length: int) -> str:
        # A key mixes letters and digits: draw again until the value does, where the class has both.
        while True:
            value = "".join(self.random.choice(alphabet) for _ in range(length))
            has_digit, has_letter = any(c.isdigit() for c in value), any(c.isalpha() for c in value)
            if (has_digit and has_letter) or length < 4 or not (set(alphabet) & set(string.digits)) \
                    or not (set(alphabet) & set(string.ascii_letters)):
                return value

    def block(self, label: str, size: int, extra: list = ()) -> str:
        data = base64.b64encode(self.random.randbytes(size) if hasattr(self.random, "randbytes")
                                else bytes(self.random.getrandbits(8) for _ in range(size))).decode("ascii")
        body = [data[index:index + 64] for index in range(0, len(data), 64)]
        return "\n".join([DASHES + "BEGIN " + label + DASHES, *extra] + body + [DASHES + "END " + label + DASHES])

    def jwt(self) -> str:
        def encode(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
        claims = {"sub": "user-" + self.draw(CLASSES["H"], 10), "iat": 1760000000 + self.random.randrange(10 ** 6)}
        return ".".join([encode(b'{"alg":"HS256","typ":"JWT"}'), encode(json.dumps(claims).encode()),
                         encode(bytes(self.random.getrandbits(8) for _ in range(32)))])

    def putty(self) -> str:
        lines = ["PuTTY-User-Key-File-3: ssh-ed25519", "Encryption: none", "Comment: deploy@bastion",
                 "Public-Lines: 2", self.draw(CLASSES["B"], 64), self.draw(CLASSES["B"], 4) + "=",
                 "Private-Lines: 1", self.draw(CLASSES["B"], 43) + "=",
                 "Private-MAC: " + self.draw(CLASSES["H"], 64)]
        return "\n".join(lines)

    def field(self, match) -> str:
        name, _, argument = match.group(1).partition(":")
        if name in CLASSES:
            return self.draw(CLASSES[name], int(argument))
        if name == "G":
            return str(uuid.UUID(int=self.random.getrandbits(128), version=4))
        if name == "PEM":
            return self.block(argument, 180)
        if name == "PGP":
            return self.block("PGP PRIVATE" + " KEY BLOCK", 200, ["Version: GnuPG v2", ""])
        if name == "PUTTY":
            return self.putty()
        if name == "JWT":
            return self.jwt()
        if name == "AUTHPLAIN":
            login = "\0relay@example.com\0" + self.draw(CLASSES["A"], 14)
            return base64.b64encode(login.encode()).decode("ascii")
        if name == "B64P":
            return base64.b64encode(("ops:" + self.draw(CLASSES["P"], int(argument))).encode()).decode("ascii")
        if name == "B64":
            return base64.b64encode(argument.encode()).decode("ascii")
        raise ValueError(match.group(0))

    def fill(self, template: str) -> str:
        return re.sub(r"\{([A-Za-z0-9]+(?::[^{}]*)?)\}", self.field, template)


def load(name: str) -> list:
    """(kind or name, text) for each line of a corpus file, filled in."""
    cases = []
    for number, line in enumerate((CORPORA / name).read_text(encoding="utf-8").splitlines()):
        if not line or line.startswith("#"):
            continue
        kind, template = line.split("\t")
        # The escapes first (\n, \uXXXX), on the ASCII-escaped line so that letters beyond ASCII survive.
        unescaped = codecs.decode(template.encode("ascii", "backslashreplace"), "unicode_escape")
        cases.append((kind, Filler(1000 + number).fill(unescaped)))
    return cases


SECRETS = load("kinds.txt")
LOOKALIKES = load("lookalikes.txt")
KINDS = sorted({kind for kind, _ in SECRETS})


def refusal(folder, text: str):
    """The credential refusal append raises for the text, or None when the text is stored."""
    try:
        notes.Session(folder).append(type="source", text=text)
    except notes.NotesError as error:
        return str(error)
    return None


def test_the_corpora_are_as_large_and_varied_as_promised():
    assert len(SECRETS) >= 150 and len(KINDS) >= 100
    assert len(LOOKALIKES) >= 120
    assert len({text for _, text in SECRETS}) == len(SECRETS)
    for _, text in SECRETS:
        assert not any(text in other for _, other in LOOKALIKES)


@pytest.mark.parametrize("kind", KINDS)
def test_every_secret_of_the_kind_is_refused_without_being_echoed(tmp_path, kind):
    for _, text in [case for case in SECRETS if case[0] == kind]:
        error = refusal(tmp_path, text)
        assert error is not None, (kind, text)
        assert "credential" in error and "credentials never enter the log" in error, error
        for piece in re.findall(r"[^\s\"'=:/]{10,}", text):  # the random parts: the prose may be named
            assert piece not in error or not any(c.isdigit() for c in piece), (kind, piece)


@pytest.mark.parametrize("name, text", LOOKALIKES, ids=[name for name, _ in LOOKALIKES])
def test_every_lookalike_is_stored(tmp_path, name, text):
    assert refusal(tmp_path, text) is None, (name, text)


def test_totals_reach_95_percent_caught_and_at_most_1_percent_wrongly_refused(tmp_path):
    missed = [kind for kind, text in SECRETS if refusal(tmp_path / "secrets", text) is None]
    wrong = [name for name, text in LOOKALIKES if refusal(tmp_path / "lookalikes", text) is not None]
    print("\nguard corpus: %d of %d secrets refused (%d kinds), %d of %d look-alikes refused"
          % (len(SECRETS) - len(missed), len(SECRETS), len(KINDS), len(wrong), len(LOOKALIKES)))
    assert len(missed) <= 0.05 * len(SECRETS), missed
    assert len(wrong) <= 0.01 * len(LOOKALIKES), wrong
