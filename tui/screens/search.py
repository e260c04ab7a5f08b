"""The Search screen: ranked full-text search as you type, over every mothx session or every captured record.

Top: the query box. Below: :class:`~tui.widgets.search_list.SearchList`, the sessions matching it best first
(bm25 over the search index, :mod:`store.search`), each with its best hit's snippet, the matched words
highlighted. ``enter`` opens the transcript of the hit's session at the matching message (a captured hit opens
its native transcript). ``c`` switches between mothx sessions and captured Claude Code / Codex records. The
status line says which engine answered: the index, or the exact LIKE scan where no index may be kept.

Typing re-runs the query after a short pause; the first search of a large directory builds the index (in the
list's worker thread, never writing to the session directory), later ones only add what was appended.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input

from tui import actions
from tui.context import store
from tui.formatting import one_line, plural
from tui.lifecycle import ReportsWorkerFailures
from tui.safe import notify
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.search_list import SearchList, SearchSource
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.search import SearchHit

DEBOUNCE_S = 0.25
"""A query is run this long after the last key typed."""


_UNTYPEABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def typed_text(value: str) -> str:
    """``value`` without the characters a query box must not draw raw (controls, bidi, lone surrogates)."""
    return _UNTYPEABLE.sub("", value)


class SearchScreen(ReportsWorkerFailures, Screen[None]):
    """Ranked search over the open session directory's entries (or its captured records)."""

    CSS_PATH = Path(__file__).with_name("search.tcss")
    ACTION_SCOPE: ClassVar[str] = "search"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Search screen"
    AUTO_FOCUS = "#search-query"

    def __init__(self, query: str = "", *, captured: bool = False) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.query_text = typed_text(query)
        self.captured = captured
        self.source: SearchSource | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Search")
        yield Input(value=self.query_text, placeholder='Search: words, "a phrase", prefix*', id="search-query")
        yield SearchList(id="search-hits")
        yield StatusBar(id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        self.sd = store(self)
        if self.sd is None:
            self.hits.show_message("No session directory is open.")
        self._run()

    @property
    def hits(self) -> SearchList:
        return self.query_one(SearchList)

    # --- querying ---------------------------------------------------------------------------------------------

    @on(Input.Changed, "#search-query")
    def _typed(self, event: Input.Changed) -> None:
        clean = typed_text(event.value)
        if clean != event.value:        # a pasted control or bidi character is never drawn (nor searched)
            event.input.value = clean
            return
        self.query_text = event.value
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(DEBOUNCE_S, self._run)

    @on(Input.Submitted, "#search-query")
    def _submitted(self, event: Input.Submitted) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.source is None or self.source.query != self.query_text.strip():
            self._run()
        self.hits.focus()

    def _run(self) -> None:
        self._timer = None
        text = self.query_text.strip()
        self._show_status()
        if self.sd is None:
            return
        if not text:
            self.source = None
            self.hits.show_message("Type a query above: words, \"a phrase\", prefix*.")
            return
        self.hits.empty_text = f"Nothing matches '{one_line(text)}'."
        self.source = self.hits.show_query(self.sd, text, captured=self.captured)

    @on(RowList.Loaded, "#search-hits")
    def _loaded(self, message: RowList.Loaded) -> None:
        self._show_status()

    @on(RowList.Failed, "#search-hits")
    def _failed(self, message: RowList.Failed) -> None:
        self.query_one(StatusBar).count = message.error

    def _show_status(self) -> None:
        bar = self.query_one(StatusBar)
        what = "captured records" if self.captured else "mothx sessions"
        bar.query_text = f"searching {what} (c: switch)"
        result = self.source.result if self.source is not None else None
        if result is None:
            bar.count = "" if not self.query_text.strip() else self._searching()
            return
        unit = "agent session" if result.captured else "session"
        how = result.how()
        bar.count = f"{plural(result.total, unit)} · {how}"

    def _searching(self) -> str:
        from store.search import index_path_for
        from store.search.team import is_team_store

        if self.captured and is_team_store():
            return "Searching the team store (a first search in a write mode builds its index)…"
        if self.sd is not None and not index_path_for(self.sd.db.path).exists():
            return "Building the search index (once: about a minute per million entries)…"
        return "Searching…"

    # --- actions ----------------------------------------------------------------------------------------------

    def action_focus_query(self) -> None:
        self.query_one("#search-query", Input).focus()

    def action_toggle_captured(self) -> None:
        self.captured = not self.captured
        self._run()

    @on(RowList.Selected, "#search-hits")
    def _open(self, message: RowList.Selected) -> None:
        hit: SearchHit = message.row
        if self.sd is None:
            return
        if hit.agent_id:
            from tui.screens.native_transcript import NativeRef, NativeTranscriptScreen

            self.app.push_screen(NativeTranscriptScreen(self.sd, NativeRef(hit.agent_id, hit.session_id)))
            if hit.line_number:
                notify(self, f"The match is on line {hit.line_number} of {one_line(hit.file_path)}.",
                       title="Captured record")
            return
        from tui.screens.transcript import TranscriptScreen

        self.app.push_screen(TranscriptScreen(self.sd, hit.session_id, at_seq=hit.seq or None))


__all__ = ["SearchScreen"]
