"""The list of captured Claude Code or Codex sessions on the Sessions screen (its "a" source switch).

One row per session (:class:`store.agents.native_catalog.AgentSessionSummary`) on a
:class:`~tui.widgets.row_list.RowList`: the first prompt the user typed, the agent session id, the work dir,
records, files and the time of the last record (UTC, never relative). The rows of one agent are read at once
by the screen (a checkpoint list is thousands of rows at most, each a few primary-key reads); a filter narrows
them in memory and the list shows them through a :class:`~tui.widgets.row_list.ListSource`. The keys are the
session list's (``list.*`` ids), so ``j``/``k``, ``g``/``G``, pages and ``enter`` work the same on either source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tui import actions
from tui.formatting import one_line, shown_path, utc_minutes
from tui.widgets.row_list import Column, ListSource, RowList

if TYPE_CHECKING:
    from store.agents.native_catalog import AgentSessionSummary

LOADING_TEXT = "Reading captured sessions…"


def title_cell(row: AgentSessionSummary) -> str:
    if not row.openable:
        return f"⚠ {one_line(row.problem)}"
    return row.title or row.preview or "(no messages)"


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
        Column("last", "LAST RECORD UTC", lambda r: utc_minutes(r.last_record_at), min_width=16, priority=1),
    ]


def matches(row: AgentSessionSummary, needle: str) -> bool:
    return not needle or needle in f"{row.title} {row.preview} {row.agent_session_id} {row.cwd}".lower()


class AgentSessionList(RowList["AgentSessionSummary"]):
    """Captured sessions of one agent, one line each (all rows in memory); ``enter`` posts
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
        self.all_rows: list[AgentSessionSummary] = []
        self.matching: list[AgentSessionSummary] = []  # all_rows narrowed by the search
        self.search = ""
        self.fetched = False  # the screen handed the rows (or an error) over for this agent

    # --- data -------------------------------------------------------------------------------------------------

    def begin(self, agent: str) -> None:
        """The rows of ``agent`` are being read: nothing is shown but the loading line."""
        self.agent = agent
        self.fetched = False
        self.all_rows = []
        self.matching = []
        self.set_source(None)

    def show_rows(self, agent: str, rows: list[AgentSessionSummary]) -> None:
        same = agent == self.agent
        self.agent = agent
        self.all_rows = list(rows)
        self.fetched = True
        self._filter(keep_cursor=same)

    def show_message(self, text: str) -> None:
        self.fetched = True
        self.all_rows = []
        self.matching = []
        super().show_message(text)

    def set_search(self, text: str) -> None:
        self.search = text.strip()
        if self.fetched and self.source is not None:
            self._filter(keep_cursor=False)

    def _filter(self, keep_cursor: bool) -> None:
        needle = self.search.lower()
        self.matching = [r for r in self.all_rows if matches(r, needle)]
        self.empty_text = "No captured session matches the filter." if needle else "No captured sessions."
        self.set_source(ListSource(self.matching, key=lambda r: r.agent_session_id), keep_cursor=keep_cursor)


__all__ = ["AgentSessionList", "agent_columns"]
