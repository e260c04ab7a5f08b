"""What a search answers, shared by both engines' searches: hits, snippets, results and their paging.

:mod:`store.search.engine` (the SQLite side index and the LIKE scan) and :mod:`store.search.team` (a PostgreSQL
team store's ``tsvector`` index) both build these, so either answers in the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from store.mothx.cells import as_text
from store.safetext import one_line
from store.search.index import fts_text

SNIPPET_TOKENS = 16
SNIPPET_CHARS = 120            # the LIKE fallback's snippet window
SESSION_ONLY = 1e300           # the order key of a session matched by its own columns only (after every bm25)
INDEX = "index"
LIKE = "like"


@dataclass(frozen=True)
class Snippet:
    """Text around a match (raw data) and the ``[start, end)`` character spans of the matched words in it."""

    text: str
    spans: tuple[tuple[int, int], ...] = ()

    def parts(self) -> list[tuple[str, bool]]:
        """The text cut at the spans: ``(piece, matched)`` in order (for styling each piece of safe text)."""
        out: list[tuple[str, bool]] = []
        at = 0
        for start, end in self.spans:
            if start > at:
                out.append((self.text[at:start], False))
            out.append((self.text[start:end], True))
            at = end
        if at < len(self.text):
            out.append((self.text[at:], False))
        return out


class SearchHit(NamedTuple):
    """One session's best hit (a named tuple: a page of thousands is built without per-field Python calls)."""

    session_id: str            # the mothx session id (captured: the agent session id)
    score: float | None        # bm25 of the best hit (lower is better); None from the LIKE scan / session columns
    order: float               # the sort key within a result (score, or the LIKE scan's order)
    seq: int                   # the best entry's seq (captured: the line's rowid); 0: matched by session columns
    entry_id: str = ""
    role: str = ""
    entry_type: str = ""
    matches: int = 0           # entries (records) of the session that match
    snippet: Snippet = Snippet("")
    agent_id: str = ""         # captured records only
    file_path: str = ""
    line_number: int = 0

    @property
    def key(self) -> tuple[float, str]:
        """What ``search(after=...)`` takes to continue after this hit."""
        return (self.order, self.session_id)


@dataclass(frozen=True)
class SearchResult:
    query: str
    source: str                # "index" (FTS5, ranked) or "like" (the exact LIKE scan)
    reason: str                # why the LIKE scan answered ("" when the index did)
    hits: tuple[SearchHit, ...]
    total: int                 # sessions that match
    has_more: bool
    captured: bool = False
    exact: int = 0             # records newer than the index (all, with none) searched exactly: a team store's read mode
    scanned: bool = False      # ... by the exact scan, unranked (more than a read mode ranks itself)
    unranked: int = 0          # sessions only that scan found (after the ranked ones, score None)

    def how(self) -> str:
        """Which engine answered, for a status line (safe text): which hits are ranked, which exact."""
        if self.source != INDEX:
            return f"LIKE scan: {one_line(self.reason)}"
        every = f"{self.exact:,} record{'s' if self.exact != 1 else ''}"
        if self.reason:
            return (f"ranked without the search index: {one_line(self.reason)}; all {every} "
                    f"{'were' if self.exact != 1 else 'was'} searched exactly and ranked as the index would rank them")
        if not self.exact:
            return "ranked by the search index"
        newer = f"{every} newer than the index {'were' if self.exact != 1 else 'was'}"
        if self.scanned:
            only = f"{self.unranked:,} session{'s' if self.unranked != 1 else ''}"
            return (f"ranked by the search index; {newer} searched by the exact LIKE scan, too many to rank in a "
                    f"read mode: {only} found only there come after the ranked ones, unranked (score -); "
                    "a write mode brings the index up to date")
        return f"ranked by the search index; {newer} searched exactly (a read mode does not refresh it)"


def _page(hits: list[SearchHit], limit: int | None, after: tuple[float, str] | None) -> tuple[list[SearchHit], bool]:
    hits.sort(key=lambda h: h.key)
    if after is not None:
        hits = [h for h in hits if h.key > after]
    if limit is None or len(hits) <= limit:
        return hits, False
    return hits[:max(0, limit)], True


Raw = tuple[Any, ...]
"""A ranked hit as the grouping statement gives it: (order, session id, key (seq), score, matches, then the FTS
rowid (entries) / agent, file path, line number, rowid (captured))."""


def _raw_page(raw: list[Raw], limit: int | None, after: tuple[float, str] | None, *,
              ordered: bool = False) -> tuple[list[Raw], bool]:
    """The page of ``raw`` (sorted here unless it is ``ordered`` already) after ``after``; and whether more follow."""
    if not ordered:
        try:
            raw.sort()      # (order, session id) lead every tuple and are unique
        except TypeError:   # a session id read as bytes (not UTF-8) tied with a text one
            raw.sort(key=lambda r: (r[0], as_text(r[1])))
    if after is not None:
        raw = [r for r in raw if (r[0], r[1] if type(r[1]) is str else as_text(r[1])) > after]
    if limit is None or len(raw) <= limit:
        return raw, False
    return raw[:max(0, limit)], True


def _with(h: SearchHit, *, snippet: Snippet | None, **changes: object) -> SearchHit:
    fields: dict[str, object] = dict(changes)
    if snippet is not None:
        fields["snippet"] = snippet
    return h._replace(**fields)  # type: ignore[arg-type]


def _markers(texts: Iterable[str]) -> tuple[str, str]:
    """Two private-use characters that occur in none of ``texts`` (so they can only be snippet() marks)."""
    seen = set("".join(texts))
    free = [chr(c) for c in range(0xE000, 0xF900) if chr(c) not in seen]
    return free[0], free[1]


def _unmark(marked: str, opening: str, closing: str) -> Snippet:
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    start = -1
    for ch in marked:
        if ch == opening:
            start = at
        elif ch == closing:
            if start >= 0 and at > start:
                spans.append((start, at))
            start = -1
        else:
            text.append(ch)
            at += 1
    return Snippet("".join(text), tuple(spans))


def like_snippet(body: str, text: str, width: int = SNIPPET_CHARS) -> Snippet:
    """A window of ``body`` around the first occurrence of ``text`` (ASCII case-insensitive, as LIKE compares),
    every occurrence in it marked; the start of ``body`` when it does not hold ``text`` (it matched the JSON)."""
    body = fts_text(body)
    folded, needle = _ascii_fold(body), _ascii_fold(text)
    at = folded.find(needle) if needle else -1
    if at < 0:
        cut = body[:width]
        return Snippet(cut + ("…" if len(body) > width else ""))
    start = max(0, at - width // 3)
    end = min(len(body), start + width)
    window = body[start:end]
    spans = []
    k = folded.find(needle, start)
    while 0 <= k and k + len(needle) <= end:
        spans.append((k - start, k - start + len(needle)))
        k = folded.find(needle, k + len(needle))
    lead = "…" if start > 0 else ""
    shift = len(lead)
    return Snippet(lead + window + ("…" if end < len(body) else ""),
                   tuple((a + shift, b + shift) for a, b in spans))


def _ascii_fold(text: str) -> str:
    return text.translate(_FOLD)


_FOLD = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
