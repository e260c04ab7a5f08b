"""What a user types, as an FTS5 MATCH expression that cannot fail to parse.

The syntax a user gets is small and forgiving:

* words are ANDed: ``parser error`` finds entries holding both;
* ``"a b"`` is a phrase (the words next to each other, in that order); an unbalanced ``"`` runs to the end;
* ``abc*`` is a prefix (words starting with ``abc``); ``"a b*"`` a phrase whose last word is a prefix.

Everything else is literal: ``AND``, ``OR``, ``NOT``, ``NEAR(``, ``-x``, ``col:x``, ``^``, parentheses are
words or punctuation, never FTS5 operators. Every term is passed to FTS5 as a quoted string (``"`` doubled), so
no input is an FTS5 syntax error; a term with no letter or digit (``-``, ``*``, ``"``) is dropped, and a query
left with no term matches nothing.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]      # one word, or the words of a phrase
    prefix: bool = False        # the last word is a prefix

    def fts(self) -> str:
        quoted = '"' + " ".join(self.words).replace('"', '""') + '"'
        return quoted + ("*" if self.prefix else "")


@dataclass(frozen=True)
class Query:
    text: str
    terms: tuple[Term, ...]

    @property
    def empty(self) -> bool:
        return not self.terms

    def fts(self) -> str:
        """The MATCH expression (``""`` when the query has no term)."""
        return " AND ".join(t.fts() for t in self.terms)


def _has_token(text: str) -> bool:
    """True when FTS5's unicode61 tokenizer finds a token in ``text`` (a letter, a digit or a private-use char)."""
    return any(unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) == "Co" for ch in text)


def _clean(word: str) -> str:
    # Lone surrogates cannot be bound as SQLite text; they are no token characters anyway.
    return "".join(ch for ch in word if not 0xD800 <= ord(ch) <= 0xDFFF)


def _term(body: str, phrase: bool) -> Term | None:
    body = _clean(body)
    prefix = body.rstrip().endswith("*")
    if prefix:
        body = body.rstrip().rstrip("*")
    words = tuple(w for w in body.split() if _has_token(w)) if phrase else ((body,) if _has_token(body) else ())
    if not words:
        return None
    return Term(words, prefix)


def parse(text: str) -> Query:
    """The :class:`Query` of what the user typed (never raises)."""
    terms: list[Term] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            end = text.find('"', i + 1)
            end = n if end < 0 else end
            body = text[i + 1:end]
            i = end + 1
            if i < n and text[i] == "*":    # "a b"* : the phrase's last word as a prefix
                body += "*"
                i += 1
            term = _term(body, phrase=True)
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] != '"':
                j += 1
            term = _term(text[i:j], phrase=False)
            i = j
        if term is not None and term not in terms:
            terms.append(term)
    return Query(text, tuple(terms))


def words_of(query: Query) -> list[tuple[str, bool]]:
    """Every word of the query with whether it is a prefix (for marking matches in a LIKE fallback snippet)."""
    out: list[tuple[str, bool]] = []
    for term in query.terms:
        for k, word in enumerate(term.words):
            out.append((word, term.prefix and k == len(term.words) - 1))
    return out
