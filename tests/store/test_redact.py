"""Redaction: each kind of secret is found and counted; ordinary prose, hex digests, uuids and ids are not."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from store.redact import KINDS, Redactor, redact_text

PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
       "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----")
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")

CASES = [
    ("api-key", "export OPENAI_API_KEY=sk-proj-4f9aB2cD8eF1gH7iJ3kL0mN5oP", "export OPENAI_API_KEY=[REDACTED:api-key]"),
    ("api-key", "key: sk-ant-api03-AbCdEf0123456789_xyzXYZ-abc", "key: [REDACTED:api-key]"),
    ("github-token", "token ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12 ok", "token [REDACTED:github-token] ok"),
    ("github-token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
     "[REDACTED:github-token]"),
    ("aws-key", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n", "aws_access_key_id = [REDACTED:aws-key]\n"),
    ("slack-token", "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "SLACK=[REDACTED:slack-token]"),
    ("bearer-token", "Authorization: Bearer abc123DEF456ghi789JKL0mno", "Authorization: Bearer [REDACTED:bearer-token]"),
    ("jwt", f"cookie={JWT};", "cookie=[REDACTED:jwt];"),
    ("jwt", f"Authorization: Bearer {JWT}", "Authorization: Bearer [REDACTED:jwt]"),
    ("private-key", f"key:\n{PEM}\nend", "key:\n[REDACTED:private-key]\nend"),
    ("private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
     "[REDACTED:private-key]"),
    ("url-password", "git clone https://alice:s3cr3t!@git.example.com/repo.git",
     "git clone https://alice:[REDACTED:url-password]@git.example.com/repo.git"),
    ("url-password", "DATABASE_URL=postgres://app:hunter2@db:5432/app", "DATABASE_URL=postgres://app:[REDACTED:url-password]@db:5432/app"),
]


@pytest.mark.parametrize(("kind", "text", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_kind(kind: str, text: str, expected: str) -> None:
    assert kind in KINDS
    redacted, counts = redact_text(text)
    assert redacted == expected
    assert counts == {kind: 1}


PROSE = [
    "The bearer of this letter is a friend; please help them find the ask-desk.",
    "Use sk-learn or scikit-learn; run `git diff HEAD~1` and check task-runner output.",
    "Bearer tokens are described in RFC 6750.",
    "ssh git@github.com:org/repo.git and https://example.com/path?q=a:b@c are fine",
    "https://user@example.com/ has no password; http://localhost:8080/api too.",
    "-----BEGIN PUBLIC KEY----- is not a private key",
    "AKIA is a prefix; AKIAshort is not a key; the word TASKIAIOSFODNN7EXAMPLE1 neither.",
    "eyJ alone, or a.b.c, is not a JWT. Version 1.2.3, commit 4f9ab2c.",
    "Files: foo.py, bar_test.py — 42 passed, 0 failed in 3.21s.",
]


@pytest.mark.parametrize("text", PROSE)
def test_no_false_positive_on_prose(text: str) -> None:
    assert redact_text(text) == (text, {})


def test_no_false_positive_on_digests_and_ids() -> None:
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(200)]
    digests += [hashlib.sha1(str(i).encode()).hexdigest() for i in range(50)]
    digests += [hashlib.sha512(str(i).encode()).hexdigest() for i in range(50)]
    digests += [str(uuid.UUID(int=i * 7919 + 1)) for i in range(50)]
    digests += ["sha256:" + d for d in digests[:20]] + ["call_a0e78eb5a1c8001de93ea05e", "toolu_01ABCdef23GHij45KLmn",
                                                          "run-hostile-0001", "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000"]
    text = "\n".join(digests)
    assert redact_text(text) == (text, {})


def test_counts_per_kind_and_summary() -> None:
    r = Redactor()
    r.text("sk-aaaaaaaaaaaaaaaaaaaa1 and sk-bbbbbbbbbbbbbbbbbbbb2")
    r.text(f"{JWT} https://u:p@h")
    assert r.report() == {"jwt": 1, "api-key": 2, "url-password": 1}
    assert r.total == 4
    assert r.summary() == "redacted 4 values: 1 jwt, 2 api-key, 1 url-password"
    assert Redactor().summary().startswith("redacted nothing")


def test_value_redacts_every_string_not_keys() -> None:
    r = Redactor()
    doc = {"sk-aaaaaaaaaaaaaaaaaaaa1": ["AKIAIOSFODNN7EXAMPLE", {"n": 3, "t": None, "s": "ok"}], "b": True}
    assert r.value(doc) == {"sk-aaaaaaaaaaaaaaaaaaaa1": ["[REDACTED:aws-key]", {"n": 3, "t": None, "s": "ok"}],
                            "b": True}
    assert r.report() == {"aws-key": 1}


def test_redaction_is_idempotent() -> None:
    text = " ".join(c[1] for c in CASES)
    once, counts = redact_text(text)
    assert sum(counts.values()) == len(CASES)
    assert redact_text(once) == (once, {})


def test_real_transcripts_have_nothing_redacted(real_fixtures: Path) -> None:
    """Real Claude Code and Codex transcripts (full of digests, ids, paths and code) hold no false positive."""
    files = [f for f in sorted(real_fixtures.rglob("*.jsonl")) if f.is_file()]
    assert files
    r = Redactor()
    for f in files:
        r.text(f.read_text(encoding="utf-8", errors="replace"))
    assert r.report() == {}


def test_redact_export_of_markdown_and_json() -> None:
    from store.redact import redact_export

    r = Redactor()
    assert redact_export("# t\nAKIAIOSFODNN7EXAMPLE\n", "markdown", r) == "# t\n[REDACTED:aws-key]\n"
    r = Redactor()
    out = redact_export('{"a": ["sk-aaaaaaaaaaaaaaaaaaaa1", "\\u202e"], "n": 1}\n', "json", r)
    assert json.loads(out) == {"a": ["[REDACTED:api-key]", "\u202e"], "n": 1, "redactions": {"api-key": 1}}
    assert "\u202e" not in out  # still written as an escape
