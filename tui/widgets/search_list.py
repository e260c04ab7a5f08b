"""The search hits: one line per session, best first, a :class:`~tui.widgets.row_list.RowList`.

Rows are :class:`store.search.SearchHit` values read a page at a time by keyset (:class:`SearchSource` over
:func:`store.search.search`: ``after`` is the last hit's ``key``). The snippet cell is safe text built piece by
piece from the hit's snippet, the matched words in bold and underlined (spans, never markup).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text

from store.safetext import safe
from tui import actions
from tui.widgets.row_list import Column, Key, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.search import SearchHit, SearchResult, Snippet

MATCH_STYLE = Style(bold=True, underline=True)


def snippet_text(snippet: Snippet) -> Text:
    """The snippet as one line of safe text, its matched words styled."""
    out = Text()
    for piece, hot in snippet.parts():
        flat = safe(piece.replace("\r\n", " ").replace("\n", " ").replace("\t", " ").replace("\r", " "))
        out.append(flat, MATCH_STYLE if hot else None)
    return out


def score_label(hit: SearchHit) -> str:
    return "–" if hit.score is None else f"{-hit.score:.2f}"


def where_label(hit: SearchHit) -> str:
    if hit.agent_id:
        return f"line {hit.line_number}" if hit.line_number else ""
    if not hit.seq:
        return "id/cwd"
    return f"#{hit.seq} {hit.role or hit.entry_type}"


class SearchSource(RowSource["SearchHit"]):
    """The hits of one query, read by keyset a page at a time (one :func:`store.search.search` call per page);
    after the first read ``result`` is its answer (which engine answered, how many sessions match)."""

    def __init__(self, sd: SessionDir, query: str, *, captured: bool = False) -> None:
        self.sd = sd
        self.query = query
        self.captured = captured
        self.result: SearchResult | None = None
        self._lock = threading.Lock()

    def key(self, row: SearchHit) -> Key:
        return row.key

    def ident(self, row: SearchHit) -> Key:
        return (row.agent_id, row.session_id)

    def _read(self, after: tuple[float, str] | None, limit: int) -> Page[SearchHit]:
        from store.search import search

        result = search(self.sd, self.query, limit=limit, after=after, captured=self.captured)
        with self._lock:
            if self.result is None or after is None:
                self.result = result
        return Page(result.hits, result.has_more and bool(result.hits))

    def first(self, limit: int) -> Page[SearchHit]:
        return self._read(None, limit)

    def after(self, key: Key, limit: int) -> Page[SearchHit]:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"not a search key: {key!r}")
        return self._read((float(key[0]), str(key[1])), limit)

    def total(self) -> int | None:
        with self._lock:
            return self.result.total if self.result is not None else None


class SearchList(RowList["SearchHit"]):
    """Sessions (or captured agent sessions) matching the query, best first; ``enter`` posts
    :class:`RowList.Selected`."""

    ACTION_SCOPE: ClassVar[str] = "search-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Search hits"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, empty_text="Type a query above.", loading_text="Searching…")

    def make_columns(self) -> list[Column[SearchHit]]:
        return [
            Column("score", "SCORE", score_label, min_width=6, align="right", priority=3),
            Column("agent", "AGENT", lambda h: h.agent_id or "mothx", min_width=5, max_width=11, priority=5),
            Column("id", "SESSION", lambda h: h.session_id, min_width=9, max_width=36, grow=1, priority=1),
            Column("where", "MATCH", where_label, min_width=12, max_width=22, priority=4),
            Column("hits", "HITS", lambda h: f"{h.matches:,}" if h.matches else "–", min_width=4, align="right",
                   priority=6),
            Column("snippet", "SNIPPET", lambda h: snippet_text(h.snippet), min_width=16, grow=5, priority=0),
        ]

    def show_query(self, sd: SessionDir, query: str, *, captured: bool) -> SearchSource:
        source = SearchSource(sd, query, captured=captured)
        self.set_source(source, keep_cursor=False)
        return source


__all__ = ["MATCH_STYLE", "SearchList", "SearchSource", "score_label", "snippet_text", "where_label"]
