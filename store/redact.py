"""Optional redaction of exports: values that look like secrets become ``[REDACTED:kind]``, counted per kind.

An export (a transcript as Markdown, JSON or HTML, a list as CSV or JSON) is redacted when the user asks
(``--redact`` on the command line). A :class:`Redactor` is handed every data string before it is laid out
(:meth:`Redactor.text`), or a whole JSON value (:meth:`Redactor.value`: every string in it, keys kept), and
counts what it replaced; :meth:`Redactor.summary` says it in one line for the user.

What is recognised (:data:`KINDS`, in the order they are tried):

``private-key``   a PEM block ``-----BEGIN … PRIVATE KEY-----`` … ``-----END … PRIVATE KEY-----`` (a block cut
                  short: its base64 lines)
``jwt``           a JSON Web Token: ``eyJ…`` ``.`` ``eyJ…`` ``.`` signature (base64url parts)
``bearer-token``  the token after ``Bearer`` (20+ token characters, at least one digit): ``Bearer [REDACTED:…]``
``api-key``       ``sk-…`` keys (OpenAI, Anthropic ``sk-ant-…``; 20+ characters, at least one digit)
``github-token``  ``ghp_`` / ``gho_`` / ``ghu_`` / ``ghs_`` / ``ghr_`` tokens and ``github_pat_…``
``aws-key``       AWS access key ids ``AKIA`` / ``ASIA`` + 16 capitals or digits
``slack-token``   ``xoxb-`` / ``xoxp-`` / ``xoxa-`` / ``xoxr-`` / ``xoxs-`` tokens
``url-password``  the password of ``scheme://user:password@host`` (the user and host are kept)

There is deliberately no "high-entropy string" rule: this project's data is full of SHA-256 digests, uuids and
ids, and none of the patterns above matches plain hex or a uuid. Redaction is best effort, for sharing an
export: a secret in a shape not listed here is not found.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping

from store.safetext import json_dumps

MARK = "[REDACTED:{kind}]"

_TOKEN_START = r"(?<![A-Za-z0-9_-])"

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private-key", re.compile(
        r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
        r"(?:.*?-----END \1-----|(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/=]{4,})*)", re.DOTALL)),
    ("jwt", re.compile(_TOKEN_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer-token", re.compile(r"(?i:\b(bearer)\s+)(?=[A-Za-z0-9._~+/-]*[0-9])([A-Za-z0-9._~+/-]{20,}=*)")),
    ("api-key", re.compile(_TOKEN_START + r"sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}")),
    ("github-token", re.compile(_TOKEN_START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("aws-key", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("slack-token", re.compile(_TOKEN_START + r"xox[baprs]-[A-Za-z0-9-]{10,}")),
    ("url-password", re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s:/@?#\[\]]*):([^\s/@?#\[\]]+)@")),
)
KINDS: tuple[str, ...] = tuple(kind for kind, _ in PATTERNS)


def _mark(kind: str) -> str:
    return MARK.format(kind=kind)


class Redactor:
    """Replaces secret-looking values and counts them; one per export."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def text(self, text: str) -> str:
        """``text`` with every secret-looking value replaced by ``[REDACTED:kind]`` (counted)."""
        if not text:
            return text
        for kind, pattern in PATTERNS:
            if kind == "bearer-token":
                text, n = pattern.subn(lambda m: f"{m.group(1)} {_mark('bearer-token')}", text)
            elif kind == "url-password":
                text, n = pattern.subn(lambda m: f"{m.group(1)}{m.group(2)}:{_mark('url-password')}@", text)
            else:
                text, n = pattern.subn(_mark(kind), text)
            if n:
                self.counts[kind] += n
        return text

    def value(self, value: object) -> object:
        """A JSON value with every string in it (not the keys) passed through :meth:`text`."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report(self) -> dict[str, int]:
        """The counts per kind that were found, in :data:`KINDS` order (the ``redactions`` of JSON output)."""
        return {kind: self.counts[kind] for kind in KINDS if self.counts[kind]}

    def summary(self) -> str:
        """One line for the user: ``redacted 3 values: 2 api-key, 1 jwt`` (or ``redacted nothing``)."""
        if not self.total:
            return "redacted nothing (no value looked like a secret)"
        parts = ", ".join(f"{n} {kind}" for kind, n in self.report().items())
        return f"redacted {self.total} value{'' if self.total == 1 else 's'}: {parts}"


def redact_export(text: str, fmt: str, red: Redactor) -> str:
    """A finished Markdown or JSON export redacted with ``red`` (for a caller that already has the text, such
    as the export dialog). JSON (``fmt == "json"``) is parsed, every string in it redacted, and an object gets
    ``"redactions": {kind: n}``; it is written back with :func:`store.safetext.json_dumps`. Anything else is
    text. An HTML page is redacted while it is built instead (``redactor=`` of :mod:`store.export_html`)."""
    if fmt != "json":
        return red.text(text)
    doc = red.value(json.loads(text))
    if isinstance(doc, dict):
        doc = {**doc, "redactions": red.report()}
    return json_dumps(doc) + "\n"


def redact_text(text: str) -> tuple[str, dict[str, int]]:
    """``text`` redacted, and the counts per kind."""
    r = Redactor()
    return r.text(text), r.report()


__all__ = ["KINDS", "MARK", "PATTERNS", "Redactor", "redact_export", "redact_text"]
