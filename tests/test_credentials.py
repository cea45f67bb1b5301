"""Issue 4: credentials never enter the log; prose that only mentions them does.

Every fake credential is assembled at import time from short pieces and a seeded random
generator, so this file holds no string that a secret scanner would take for a real key.
"""

from __future__ import annotations

import base64
import json
import random
import string

import pytest

from conftest import assert_no_traceback, assert_refused, folder_digest, notes, read_records, run_notes

RANDOM = random.Random(4_2024)

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def draw(alphabet: str, length: int) -> str:
    return "".join(RANDOM.choice(alphabet) for _ in range(length))


def draw_mixed(alphabet: str, length: int) -> str:
    """A random string that holds at least one letter and one digit, as real keys do."""
    while True:
        value = draw(alphabet, length)
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def pem_block(label: str, body_bytes: int = 180) -> str:
    """A PEM block with a random body, its label assembled so the file holds no header."""
    body = base64.b64encode(bytes(RANDOM.getrandbits(8) for _ in range(body_bytes))).decode("ascii")
    lines = [body[index:index + 64] for index in range(0, len(body), 64)]
    dashes = "-" * 5
    return "\n".join([dashes + "BEGIN " + label + dashes] + lines + [dashes + "END " + label + dashes])


PRIVATE = "PRIVATE" + " KEY"


def pgp_block(label: str) -> str:
    """An ASCII-armoured PGP block: a header line, a blank line, then the body."""
    dashes = "-" * 5
    body = base64.b64encode(bytes(RANDOM.getrandbits(8) for _ in range(200))).decode("ascii")
    lines = [body[index:index + 64] for index in range(0, len(body), 64)]
    return "\n".join([dashes + "BEGIN PGP " + label + dashes, "Version: GnuPG v2", ""] + lines
                     + ["=" + draw(ALNUM, 4), dashes + "END PGP " + label + dashes])


def split_by(secret: str, invisible: str) -> str:
    """The secret with an invisible character every five characters, as a paste can carry them."""
    return invisible.join(secret[index:index + 5] for index in range(0, len(secret), 5))


def jwt() -> str:
    header = base64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": "user-" + draw(HEX, 12), "iat": 1700000000 + RANDOM.randrange(10 ** 7), "scope": "read"}
    payload = base64url(json.dumps(claims, separators=(",", ":")).encode())
    return header + "." + payload + "." + base64url(bytes(RANDOM.getrandbits(8) for _ in range(32)))


# (case id, fake credential, words one of which the error must hold to name the kind)
CREDENTIALS = [
    ("pem_rsa", pem_block("RSA " + PRIVATE), ("private key",)),
    ("pem_ec", pem_block("EC " + PRIVATE, 90), ("private key",)),
    ("pem_generic", pem_block(PRIVATE), ("private key",)),
    ("pem_encrypted", pem_block("ENCRYPTED " + PRIVATE), ("private key",)),
    ("openssh", pem_block("OPENSSH " + PRIVATE, 300), ("private key",)),
    ("aws_akia", "AK" + "IA" + draw(UPPER_DIGITS, 16), ("AWS",)),
    ("aws_asia", "AS" + "IA" + draw(UPPER_DIGITS, 16), ("AWS",)),
    ("github_ghp", "gh" + "p_" + draw_mixed(ALNUM, 36), ("GitHub",)),
    ("github_gho", "gh" + "o_" + draw_mixed(ALNUM, 36), ("GitHub",)),
    ("github_ghs", "gh" + "s_" + draw_mixed(ALNUM, 36), ("GitHub",)),
    ("github_fine_grained", "github" + "_pat_" + draw_mixed(ALNUM, 22) + "_" + draw_mixed(ALNUM, 59), ("GitHub",)),
    ("openai_legacy", "sk" + "-" + draw_mixed(ALNUM, 20) + "T3Blbk" + "FJ" + draw_mixed(ALNUM, 20), ("OpenAI",)),
    ("openai_project", "sk" + "-proj-" + draw_mixed(URLSAFE, 74) + "T3Blbk" + "FJ" + draw_mixed(URLSAFE, 74),
     ("OpenAI",)),
    ("anthropic", "sk" + "-ant-" + "api03-" + draw_mixed(URLSAFE, 93) + "AA", ("Anthropic",)),
    ("slack_bot", "xo" + "xb-" + draw(string.digits, 11) + "-" + draw(string.digits, 13) + "-" + draw_mixed(ALNUM, 24),
     ("Slack",)),
    ("slack_user", "xo" + "xp-" + draw(string.digits, 11) + "-" + draw(string.digits, 11) + "-"
     + draw(string.digits, 13) + "-" + draw_mixed(HEX, 32), ("Slack",)),
    ("google", "AI" + "za" + draw_mixed(URLSAFE, 35), ("Google",)),
    ("stripe_secret", "sk" + "_live_" + draw_mixed(ALNUM, 24), ("Stripe",)),
    ("stripe_restricted", "rk" + "_live_" + draw_mixed(ALNUM, 24), ("Stripe",)),
    ("jwt", jwt(), ("JWT", "JSON Web Token")),
    # Issue 11: more kinds, and keys split by invisible characters.
    ("aws_secret_snake", "aws_secret_access_key = " + draw_mixed(ALNUM + "/+", 40), ("AWS",)),
    ("aws_secret_env", "AWS_SECRET" + "_ACCESS_KEY=" + draw_mixed(ALNUM + "/+", 40), ("AWS",)),
    ("aws_secret_json", '"Secret' + 'AccessKey": "' + draw_mixed(ALNUM + "/+", 40) + '"', ("AWS",)),
    ("url_postgres", "postgres://app_user:" + draw_mixed(ALNUM, 16) + "@db.internal:5432/app", ("password",)),
    ("url_https", "https://deploy:" + draw_mixed(URLSAFE, 20) + "@git.example.com/team/repo.git", ("password",)),
    ("url_redis_no_user", "redis://:" + draw_mixed(ALNUM, 12) + "@cache.internal:6379/0", ("password",)),
    ("gitlab", "gl" + "pat-" + draw_mixed(URLSAFE, 20), ("GitLab",)),
    ("hugging_face", "h" + "f_" + draw("abcdefghij", 17) + draw("ABCDEFGHIJ", 17), ("Hugging Face",)),
    ("npm", "np" + "m_" + draw_mixed(ALNUM, 36), ("npm",)),
    ("pgp_private", pgp_block(PRIVATE + " BLOCK"), ("private key",)),
    ("aws_split_zero_width_space", split_by("AK" + "IA" + draw(UPPER_DIGITS, 16), "\u200b"), ("AWS",)),
    ("github_split_word_joiner", split_by("gh" + "p_" + draw_mixed(ALNUM, 36), "\u2060"), ("GitHub",)),
    ("anthropic_split_bom", split_by("sk" + "-ant-" + "api03-" + draw_mixed(URLSAFE, 93) + "AA", "\ufeff"),
     ("Anthropic",)),
    ("stripe_split_joiners", split_by("sk" + "_live_" + draw_mixed(ALNUM, 24), "\u200c\u200d"), ("Stripe",)),
]
CREDENTIAL_IDS = [case[0] for case in CREDENTIALS]

# The same secrets as people paste them: in a sentence, after "=", in quotes.
CONTEXTS = [
    "{}",
    "the staging key is {} and it rotates monthly",
    "export API_TOKEN={}",
    'config: {{"token": "{}"}}',
    "see below\n{}\n(do not share)",
]


def secret_fragments(secret: str) -> list:
    """The value itself and a long piece of its random part: neither may be echoed."""
    longest_line = max(secret.splitlines(), key=len)
    middle = longest_line[len(longest_line) // 3:][:16]
    return [secret, longest_line, middle]


def assert_not_echoed(result, secret: str) -> None:
    for fragment in secret_fragments(secret):
        assert fragment not in result.stdout and fragment not in result.stderr, "the error echoed the secret"


def assert_names_kind(error: str, kinds: tuple) -> None:
    assert any(kind.lower() in error.lower() for kind in kinds), (kinds, error)
    assert "credential" in error


@pytest.mark.parametrize("field", ["text", "effect"])
@pytest.mark.parametrize("secret, kinds", [case[1:] for case in CREDENTIALS], ids=CREDENTIAL_IDS)
def test_credential_is_refused_and_not_echoed(session, field, secret, kinds):
    value = CONTEXTS[1].format(secret) if field == "text" else secret
    command = ["append", "--type", "source", "--text", value if field == "text" else "where the key lives"]
    if field == "effect":
        command += ["--effect", value]
    before = folder_digest(session)
    result = run_notes(*command, folder=session)
    error = assert_refused(result, 2, "--" + field)
    assert set(result.receipt) == {"ok", "error"}
    assert_names_kind(error, kinds)
    assert_not_echoed(result, secret)
    assert folder_digest(session) == before


@pytest.mark.parametrize("context", CONTEXTS, ids=["bare", "sentence", "assignment", "json", "own_line"])
@pytest.mark.parametrize("secret, kinds", [case[1:] for case in CREDENTIALS], ids=CREDENTIAL_IDS)
def test_credential_in_any_context_is_refused_in_process(session, capsys, context, secret, kinds):
    # In-process for speed: every kind in every way of pasting it.
    before = folder_digest(session)
    code = notes.main(["--dir", str(session), "append", "--type", "decision", "--text", "plain",
                       "--effect", context.format(secret)])
    captured = capsys.readouterr()
    assert code == 2
    output = json.loads(captured.out)
    assert output["ok"] is False
    assert_names_kind(output["error"], kinds)
    for fragment in secret_fragments(secret):
        assert fragment not in captured.out and fragment not in captured.err
    assert folder_digest(session) == before


def test_credential_refused_under_every_python(session, python):
    secret = CREDENTIALS[CREDENTIAL_IDS.index("aws_akia")][1]
    result = run_notes("append", "--type", "source", "--text", "key " + secret, folder=session, python=python)
    assert_names_kind(assert_refused(result, 2), ("AWS",))
    assert_not_echoed(result, secret)


# --------------------------------------------------------------------------
# Near-misses: prose about credentials, public material and look-alikes are kept

NEAR_MISSES = {
    "sk_prefix": "an sk- prefix marks an OpenAI key",
    "akia_alone": "AKIA",
    "akia_asia_prose": "AKIA and ASIA prefixes mark AWS access key ids",
    "private_key_prose": "the private key stays in the vault",
    "begin_without_dashes": "a line like BEGIN " + PRIVATE + " opens the block; never paste one",
    "password_handling": "password handling moves to the secrets manager",
    "sklearn": "sk-learn-is-a-python-library-for-machine-learning",
    "risk_slug": "risk-assessment-matrix-version-2-for-the-quarterly-review",
    "public_key_block": pem_block("PUBLIC" + " KEY", 160),
    "rsa_public_key_block": pem_block("RSA PUBLIC" + " KEY", 140),
    "certificate_block": pem_block("CERTIFICATE", 200),
    "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + draw(ALNUM, 43) + " dev@laptop",
    "slack_prose": "xoxb- tokens are for bots, xoxp- tokens for users",
    "ghp_prefix": "ghp_ prefix",
    "github_pat_prose": "github_pat_ tokens are the fine-grained kind",
    "eyj_prose": 'eyJ is base64 for {"',
    "jwt_header_only": "the header eyJhbGciOiJIUzI1NiJ9 means HS256",
    "anthropic_prose": "sk-ant- keys belong to Anthropic",
    "google_prose": "AIza starts every Google API key",
    "stripe_prose": "sk" + "_live_ and rk" + "_live_ keys are Stripe live keys; use test keys here",
    "short_akia": "AK" + "IA" + draw(UPPER_DIGITS, 8),
    "short_sk": "sk-" + draw(ALNUM, 10),
    "short_ghp": "ghp_" + draw(ALNUM, 10),
    "short_random_8": draw(ALNUM, 8),
    "short_random_16": draw(ALNUM, 16),
    "short_random_24": draw(URLSAFE, 24),
    "git_sha": "fixed in " + draw(HEX, 40),
    "sha256": "artifact digest " + draw(HEX, 64),
    "uuid": "session 0f3c2b1c-3c66-49ee-8557-e323c0678aaf",
    "url": "https://github.com/example/notes/pull/1234#issuecomment-5678",
    "env_var_names": "read OPENAI_API_KEY and AWS_ACCESS_KEY_ID from the environment",
    # Issue 11: prose the guard refused before, and look-alikes of the new kinds.
    "branch_slug": "sk-2024-fix-login-redirect-after-timeout",
    "branch_slug_in_sentence": "merged sk-2024-fix-login-redirect-after-timeout and sk-2025-q1-billing-page-cleanup",
    "pem_header_quoted": "the key file starts with " + "-" * 5 + "BEGIN RSA " + PRIVATE + "-" * 5
                         + " and must never be pasted",
    "pem_header_and_footer": "-" * 5 + "BEGIN " + PRIVATE + "-" * 5 + " ... " + "-" * 5 + "END " + PRIVATE + "-" * 5,
    "pgp_header_quoted": "an exported secret key opens with " + "-" * 5 + "BEGIN PGP " + PRIVATE + " BLOCK"
                         + "-" * 5,
    "pgp_public_block": pgp_block("PUBLIC" + " KEY BLOCK"),
    "url_user_without_password": "clone https://deploy@git.example.com/team/repo.git",
    "url_with_port": "postgres://db.internal:5432/app is the staging database",
    "url_placeholder_password": "postgres://app:${DB_PASSWORD}@db.internal/app",
    "url_masked_password": "postgres://app:****@db.internal/app",
    "url_angle_placeholder": "redis://:<password>@cache.internal:6379",
    "url_at_in_query": "https://example.com/search?q=user:name@example",
    "url_ipv6": "http://[::1]:8080/health answers ok",
    "ssh_scp_form": "git@github.com:example/notes.git",
    "sha256_prefixed": "image sha256:" + draw(HEX, 64),
    "sha256_assignment": "checksum=" + draw(HEX, 64),
    "sha512": "sha512 " + draw(HEX, 128),
    "uuid_upper": "session 0F3C2B1C-3C66-49EE-8557-E323C0678AAF",
    "uuids": "0f3c2b1c-3c66-49ee-8557-e323c0678aaf replaces 9b1f3c2e-4d5a-4e6f-8a7b-0c1d2e3f4a5b",
    "aws_secret_name_only": "AWS_SECRET" + "_ACCESS_KEY is read from the environment, never from a file",
    "aws_secret_placeholder": "aws_secret" + "_access_key = <from the vault>",
    "aws_secret_short_value": "aws_secret" + "_access_key = " + draw(ALNUM, 12),
    "hf_function": "call hf_hub_download to fetch the weights",
    "hf_prose": "hf_ tokens come from the Hugging Face settings page",
    "npm_env": "npm_config_registry points at the internal mirror",
    "npm_prose": "npm_ tokens publish packages",
    "glpat_prose": "glpat- tokens are GitLab personal access tokens",
    "zero_width_prose": "zero\u200bwidth and word\u2060joiner text stays as it is",
}


@pytest.mark.parametrize("text", list(NEAR_MISSES.values()), ids=list(NEAR_MISSES))
def test_near_miss_is_accepted_as_is(session, text):
    result = run_notes("append", "--type", "decision", "--text", text, "--effect", text, folder=session)
    assert_no_traceback(result)
    assert result.code == 0, result
    [record] = read_records(session)
    assert record["text"] == text and record["effect"] == text


def test_the_first_look_lets_every_credential_through_and_stops_plain_prose():
    # may_hold_credential is a cheap test run before any pattern: it must let
    # every credential through, alone or inside prose, and stop ordinary notes.
    for _, secret, _ in CREDENTIALS:
        assert notes._may_hold_credential(secret) and notes._may_hold_credential("a %s b" % secret), secret
    assert not notes._may_hold_credential("The reminder goes out by SMS 48 hours ahead.")
    assert not notes._may_hold_credential("The booking page shows each clinic's next free slot; "
                                          "we keep the access rules in one place.")


def test_fake_credentials_are_distinct_from_near_misses():
    # Guard the corpus itself: a near-miss must never contain a whole fake credential.
    for text in NEAR_MISSES.values():
        for _, secret, _ in CREDENTIALS:
            assert secret not in text
