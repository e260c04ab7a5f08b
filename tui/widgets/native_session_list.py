"""The list of captured Claude Code or Codex sessions on the Sessions screen (its "a" source switch).

One row per session (:class:`store.agents.native_catalog.AgentSessionSummary`) on a
:class:`~tui.widgets.row_list.RowList`: the first prompt the user typed, the agent session id, the work dir,
records, files, the time of the last record (UTC, never relative) and the host that last captured it (HOST, the
first column to drop when the terminal is narrow). The rows are read by keyset a page at a time, newest last
record first (:class:`AgentSessionSource` over :func:`store.agents.native_catalog.agent_session_page`, one query
per page, both ways: ``G`` reads the last page directly; the SQLite file or a PostgreSQL team store), so the list
holds a few pages however many sessions were captured.

The ``/`` filter is on content, as the mothx list's: the store's page query keeps the sessions whose id or any
stored record holds the text (``/bash`` finds the sessions that called Bash), one query per page both ways
(:func:`matches` is the same test on a row's shown text, for callers that hold rows). The keys the cursor keeps
are the agent session ids (``j``/``k``, ``g``/``G``, pages and ``enter`` work the same on either source).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from store import times
from tui import actions
from tui.formatting import list_time, one_line, shown_path, time_title
from tui.widgets.checkpoint_list import host_column
from tui.widgets.keyset_source import PageAsk, StoredKey, StoredKeySource
from tui.widgets.row_list import Column, Key, RowList

if TYPE_CHECKING:
    from store.agents.native_catalog import AgentSessionSummary
    from store.mothx.sessiondir import SessionDir

LOADING_TEXT = "Reading captured sessions…"

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
        Column("id", "ID", lambda r: r.agent_session_id, min_width=9, max_width=36, grow=2, priority=3),
        Column("cwd", "WORK DIR", lambda r: shown_path(r.cwd), min_width=10, grow=2, priority=2, overflow="start"),
        Column("records", "RECORDS", lambda r: f"{r.records:,}" if r.openable else "", min_width=7, align="right",
               priority=4),
        Column("files", "FILES", lambda r: str(r.files) if r.openable else "", min_width=5, align="right",
               priority=5),
        Column("last", time_title("LAST RECORD"), lambda r: list_time(r.last_record_at),
               min_width=max(times.display_width(), len(time_title("LAST RECORD"))), priority=1),
        host_column(),
    ]


def matches(row: AgentSessionSummary, needle: str) -> bool:
    return not needle or needle in f"{row.title} {row.preview} {row.agent_session_id} {row.cwd}".lower()


class AgentSessionSource(StoredKeySource["AgentSessionSummary"]):
    """The captured sessions of ``agent``, newest last record first, read by keyset: every call is ONE
    :func:`~store.agents.native_catalog.agent_session_page` query (reversible; ``G`` reads its ``last`` page),
    from the SQLite file or a PostgreSQL team store. With a ``needle`` the store keeps only the sessions whose
    id or stored records hold it.

    A row's key is its stored ``(sort time, agent session id)`` as the page names it (:class:`StoredKeySource`);
    its ident is the agent session id. ``total``: the caller's count (the grouped count of the source switch),
    shown while no filter narrows the list; else None."""

    KEY_NAME = "captured-session"

    def __init__(self, sd: SessionDir, agent: str, *, needle: str = "", total: int | None = None,
                 remember: int = 20_000) -> None:
        super().__init__(remember=remember)
        self.sd = sd
        self.agent = agent
        self.needle = needle.strip().lower()
        self._total = None if self.needle else total

    def ident(self, row: AgentSessionSummary) -> Key:
        return row.agent_session_id

    def shown_key(self, row: AgentSessionSummary) -> Key:
        # its shown time is its sort time unless the stored one was not printable as it is
        return (row.last_record_at, row.agent_session_id)

    def read(self, ask: PageAsk) -> tuple[Sequence[AgentSessionSummary], Sequence[StoredKey], bool]:
        from store.agents import native_catalog

        page = native_catalog.agent_session_page(self.sd, self.agent, after=ask.after, before=ask.before,
                                                 last=ask.last, limit=ask.limit, needle=self.needle)
        return page.rows, page.keys, page.more

    def total(self) -> int | None:
        return self._total

    def set_total(self, total: int | None) -> None:
        self._total = None if self.needle else total


class AgentSessionList(RowList["AgentSessionSummary"]):
    """Captured sessions of one agent (each with the host that last captured it), one line each, paged from
    the store."""

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
