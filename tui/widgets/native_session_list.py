"""The list of captured Claude Code or Codex sessions on the Sessions screen (its "a" source switch).

One row per session (:class:`store.agents.native_catalog.AgentSessionSummary`) on a
:class:`~tui.widgets.row_list.RowList`: the first prompt the user typed, the agent session id, the work dir,
records, files and the time of the last record (UTC, never relative). The rows are read by keyset a page at a
time, newest last record first (:class:`AgentSessionSource` over
:func:`store.agents.native_catalog.agent_session_page`, one query per page, both ways: ``G`` reads the last page
directly), so the list holds a few pages however many sessions were captured.

The ``/`` filter is on content, as the mothx list's: the store's page query keeps the sessions whose id or any
stored record holds the text (``/bash`` finds the sessions that called Bash), one query per page both ways
(:func:`matches` is the same test on a row's shown text, for callers that hold rows). The keys the cursor keeps
are the agent session ids (``j``/``k``, ``g``/``G``, pages and ``enter`` work the same on either source).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, ClassVar

from textual.cache import LRUCache

from store import times
from tui import actions
from tui.formatting import list_time, one_line, shown_path, time_title
from tui.widgets.row_list import Column, Key, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.agents.native_catalog import AgentSessionKey, AgentSessionPage, AgentSessionSummary
    from store.mothx.sessiondir import SessionDir

LOADING_TEXT = "Reading captured sessions…"

END_KEY: tuple[float, str] = (float("-inf"), "")
"""A keyset position past the oldest captured session (every sort time is above minus infinity): the rows
``before`` it are the last page of the newest-first list."""



NO_PROMPT = "(no prompt)"
"""A captured session whose first records hold no text a user typed (only the agent's own, or tool output)."""


def title_cell(row: AgentSessionSummary) -> str:
    if not row.openable:
        return f"⚠ {one_line(row.problem)}"
    return row.title or row.preview or NO_PROMPT


def title_style(row: AgentSessionSummary) -> str | None:
    if not row.openable:
        return "warn"
    return None if row.title else "dim"


def agent_columns() -> list[Column[AgentSessionSummary]]:
    return [
        Column("title", "FIRST PROMPT", title_cell, min_width=16, grow=3, priority=0, style=title_style),
        Column("id", "ID", lambda r: r.agent_session_id, min_width=9, max_width=36, grow=1, priority=3),
        Column("cwd", "WORK DIR", lambda r: shown_path(r.cwd), min_width=10, grow=2, priority=2, overflow="start"),
        Column("records", "RECORDS", lambda r: f"{r.records:,}" if r.openable else "", min_width=7, align="right",
               priority=4),
        Column("files", "FILES", lambda r: str(r.files) if r.openable else "", min_width=5, align="right",
               priority=5),
        Column("last", time_title("LAST RECORD"), lambda r: list_time(r.last_record_at),
               min_width=max(times.display_width(), len(time_title("LAST RECORD"))), priority=1),
    ]


def matches(row: AgentSessionSummary, needle: str) -> bool:
    return not needle or needle in f"{row.title} {row.preview} {row.agent_session_id} {row.cwd}".lower()


class AgentSessionSource(RowSource["AgentSessionSummary"]):
    """The captured sessions of ``agent``, newest last record first, read by keyset: every call is ONE
    :func:`~store.agents.native_catalog.agent_session_page` query (reversible). With a ``needle`` the store keeps only the sessions whose id or stored records hold it.

    A row's key is its stored ``(sort time, agent session id)`` as the page names it (remembered for the rows
    served, up to ``remember``); its ident is the agent session id. ``total``: the caller's count (the grouped
    count of the source switch), shown while no filter narrows the list; else None."""

    def __init__(self, sd: SessionDir, agent: str, *, needle: str = "", total: int | None = None,
                 remember: int = 20_000) -> None:
        self.sd = sd
        self.agent = agent
        self.needle = needle.strip().lower()
        self.reversible = True
        self._total = None if self.needle else total
        self._keys: LRUCache[str, AgentSessionKey] = LRUCache(remember)
        self._lock = threading.Lock()

    def key(self, row: AgentSessionSummary) -> Key:
        with self._lock:
            stored = self._keys.get(row.agent_session_id)
        # A row this source did not serve (a re-read through a new source): its shown time is its sort time
        # unless the stored one was not printable as it is.
        return stored if stored is not None else (row.last_record_at, row.agent_session_id)

    def ident(self, row: AgentSessionSummary) -> Key:
        return row.agent_session_id

    def _page(self, *, after: AgentSessionKey | None = None, before: AgentSessionKey | None = None,
              limit: int) -> AgentSessionPage:
        from store.agents import native_catalog

        page = native_catalog.agent_session_page(self.sd, self.agent, after=after, before=before, limit=limit,
                                                 needle=self.needle)
        with self._lock:
            for row, stored in zip(page.rows, page.keys, strict=True):
                self._keys.set(row.agent_session_id, stored)
        return page

    def _forward(self, after: AgentSessionKey | None, limit: int) -> Page[AgentSessionSummary]:
        page = self._page(after=after, limit=limit)
        return Page(page.rows, page.more and bool(page.rows))

    def first(self, limit: int) -> Page[AgentSessionSummary]:
        return self._forward(None, limit)

    def after(self, key: Key, limit: int) -> Page[AgentSessionSummary]:
        return self._forward(_as_key(key), limit)

    def before(self, key: Key, limit: int) -> Page[AgentSessionSummary]:
        page = self._page(before=_as_key(key), limit=limit)
        return Page(page.rows, page.more and bool(page.rows))

    def last(self, limit: int) -> Page[AgentSessionSummary]:
        return self.before(END_KEY, limit)

    def total(self) -> int | None:
        return self._total

    def set_total(self, total: int | None) -> None:
        self._total = None if self.needle else total


def _as_key(key: Key) -> AgentSessionKey:
    if not (isinstance(key, tuple) and len(key) == 2):
        raise ValueError(f"not a captured-session key: {key!r}")
    return (key[0], key[1])


class AgentSessionList(RowList["AgentSessionSummary"]):
    """Captured sessions of one agent, one line each, paged from the store; ``enter`` posts
    :class:`RowList.Selected`."""

    ACTION_SCOPE: ClassVar[str] = "session-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Captured session list"
    DEFAULT_CSS = """
    AgentSessionList { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, columns=agent_columns(), empty_text="No captured sessions.",
                         loading_text=LOADING_TEXT)
        self.agent = ""
        self.search = ""
        self.agent_total: int | None = None  # every captured session of the agent (the grouped count)
        self._sd: SessionDir | None = None

    # --- data -------------------------------------------------------------------------------------------------

    @property
    def fetched(self) -> bool:
        """The first page (or an error) arrived for this agent and filter."""
        return self.loaded

    def begin(self, agent: str) -> None:
        """The rows of ``agent`` are about to be read: nothing is shown but the loading line."""
        self.agent = agent
        self.set_source(None)

    def show_agent(self, sd: SessionDir, agent: str, *, total: int | None = None, keep_cursor: bool = False) -> None:
        """Page the captured sessions of ``agent`` (narrowed by :attr:`search`); ``total``: how many it has."""
        same = keep_cursor and agent == self.agent and self._sd is sd
        self._sd = sd
        self.agent = agent
        self.agent_total = total
        current = self.source
        if same and isinstance(current, AgentSessionSource) and current.needle == self.search.lower():
            current.set_total(total)
            self.reload(keep_cursor=True)  # the same list read again: its keys are known
            return
        self._show(keep_cursor=same)

    def set_search(self, text: str) -> None:
        self.search = text.strip()
        if self._sd is not None and self.agent:
            self._show(keep_cursor=False)

    def _show(self, keep_cursor: bool) -> None:
        if self._sd is None:
            return
        self.empty_text = "No captured session matches the filter." if self.search else "No captured sessions."
        self.set_source(AgentSessionSource(self._sd, self.agent, needle=self.search, total=self.agent_total),
                        keep_cursor=keep_cursor)


__all__ = ["AgentSessionList", "AgentSessionSource", "agent_columns", "matches"]
