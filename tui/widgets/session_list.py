"""The session list: every session of a query, one line each, a :class:`~tui.widgets.row_list.RowList`.

Rows are :class:`~store.mothx.sessions.SessionSummary` values read by keyset with
``store.mothx.session_pages.sessions_page(..., after= | before=, limit=)`` through a :class:`SessionSource`
(one statement per page, at any depth); the widget reads pages in its worker, keeps a window of them around
the cursor and draws only what is on screen. The app's read-ahead first page (or a provisional one, on the first
open of a directory) is handed over with :meth:`SessionList.show` and drawn at once.

Live updates (:meth:`RowList.refresh_rows`) re-read the named sessions with ``get_session`` and replace their
rows in place (cursor and scroll kept); rows whose summary changed are marked for :data:`MARK_HOLD_S`. A session
that went away makes the list read its window again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from store import times
from tui import actions
from tui.formatting import list_time, one_line, shown_path, time_title
from tui.widgets.row_list import Column, Key, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionFilter, SessionPage, SessionSummary, SortKey

WINDOW = 100
"""Rows per read (the app reads its first page ahead with this limit)."""

MARK_HOLD_S = 2.0
"""A row a live update changed stays marked until the next refresh, or this long at most."""

LIVE_BATCH_CAP = 200
"""A live update naming more shown sessions than this reads the window again instead of each row."""

LOADING_TEXT = "Loading sessions…"
OPENING_TEXT = "Opening…"


@dataclass(frozen=True)
class ListQuery:
    """What the list shows: a filter and an order."""

    flt: SessionFilter
    sort: SortKey
    descending: bool = True


def default_query() -> ListQuery:
    """What the Sessions screen shows first: everything, most recently active first."""
    from store.mothx.sessions import SessionFilter, SortKey

    return ListQuery(SessionFilter(), SortKey.LAST_ACTIVE, True)


class SessionSource(RowSource["SessionSummary"]):
    """The sessions of ``query`` over ``sd``, read by keyset (after / before a session id: one statement per page,
    :func:`store.mothx.session_pages.sessions_page`); named rows are re-read with ``get_session``."""

    reversible = True

    def __init__(self, sd: SessionDir, query: ListQuery) -> None:
        self.sd = sd
        self.query = query
        self._total: int | None = None

    def key(self, row: SessionSummary) -> Key:
        return row.id

    def adopt(self, rows: Sequence[SessionSummary], total: int) -> Page[SessionSummary]:
        """The first page read ahead (by the app, before the list was shown), as ``set_source`` takes it."""
        self._total = total
        return Page(tuple(rows), len(rows) < total and bool(rows))

    def first(self, limit: int) -> Page[SessionSummary]:
        # The first window as the app reads it ahead: a bounded sort, and the total with it.
        from store.mothx.sessions import list_sessions

        q = self.query
        page = list_sessions(self.sd, q.flt, q.sort, q.descending, offset=0, limit=limit)
        return self.adopt(page.rows, page.total)

    def _page(self, limit: int, *, after: str | None = None, before: str | None = None,
              last: bool = False) -> Page[SessionSummary]:
        from store.mothx.session_pages import AnchorGone, sessions_page

        q = self.query
        try:
            page = sessions_page(self.sd, q.flt, q.sort, q.descending, after=after, before=before, last=last,
                                 limit=limit)
        except AnchorGone as exc:
            raise LookupError(str(exc)) from exc  # the list reads its window again
        return Page(page.rows, page.more)

    def after(self, key: Key, limit: int) -> Page[SessionSummary]:
        return self._page(limit, after=str(key))

    def before(self, key: Key, limit: int) -> Page[SessionSummary]:
        return self._page(limit, before=str(key))

    def last(self, limit: int) -> Page[SessionSummary]:
        return self._page(limit, last=True)

    def total(self) -> int | None:
        if self._total is None:
            from store.mothx.sessions import count_sessions

            self._total = count_sessions(self.sd, self.query.flt)
        return self._total

    def reread(self, idents: Sequence[Key]) -> Mapping[Key, SessionSummary | None]:
        """The rows of ``idents`` as they are now (None: the session is gone). Runs in the worker thread."""
        from store.errors import SessionNotFound
        from store.mothx.sessions import get_session

        out: dict[Key, SessionSummary | None] = {}
        for ident in idents:
            try:
                out[ident] = get_session(self.sd, str(ident))
            except SessionNotFound:
                out[ident] = None
        return out


def sort_fields(row: SessionSummary, sort: SortKey) -> tuple[object, ...]:
    """What the place of ``row`` under ``sort`` depends on (the store's ORDER BY reads these fields)."""
    from store.mothx.sessions import SortKey

    last = row.last_active_at or row.timestamp
    if sort is SortKey.TITLE:
        return (row.title, row.preview, last)
    if sort is SortKey.MESSAGES:
        return (row.message_count, last)
    if sort is SortKey.CWD:
        return (row.cwd, last)
    if sort is SortKey.CREATED:
        return (row.timestamp,)
    return (last,)


# --- cells ------------------------------------------------------------------------------------------------------


def title_cell(row: SessionSummary) -> str:
    return row.title or row.preview or "(no messages)"


def fork_label(row: SessionSummary) -> str:
    if not row.parent_session and not row.fork_kind:
        return ""
    return f"⑂ {one_line(row.fork_kind) or 'fork'}"


# Derived execution states that need an operator (store.mothx.runs.derive_execution_state): shown instead of the status.
PROBLEM_RUN_STATES = {"orphaned": "✗ orphaned", "recovery_failed": "✗ recov failed", "inconsistent": "✗ inconsistent"}


def run_label(row: SessionSummary) -> str:
    if row.run_state in PROBLEM_RUN_STATES:
        return PROBLEM_RUN_STATES[row.run_state]
    return f"● {one_line(row.run_status)}" if row.run_status else ""


def run_style(row: SessionSummary) -> str:
    """``good`` (a run going), ``warn`` (waiting for someone) or ``bad`` (a run that needs an operator)."""
    if row.run_state in PROBLEM_RUN_STATES:
        return "bad"
    return "warn" if row.run_status.startswith("waiting") else "good"


def session_columns() -> list[Column[SessionSummary]]:
    return [
        Column("pin", "", lambda r: "*" if r.pinned else "", min_width=1, style=lambda r: "accent"),
        Column("title", "TITLE", title_cell, min_width=16, grow=4, priority=0,
               style=lambda r: None if r.title else "dim"),
        Column("id", "ID", lambda r: r.id, min_width=9, max_width=16, grow=1, priority=3),
        Column("cwd", "WORK DIR", lambda r: shown_path(r.cwd), min_width=10, grow=2, priority=2, overflow="start"),
        Column("channel", "CHANNEL", lambda r: r.channel_type, min_width=8, priority=6),
        Column("messages", "MSGS", lambda r: f"{r.message_count:,}", min_width=5, align="right", priority=4),
        Column("last_active", time_title("LAST ACTIVE"), lambda r: list_time(r.last_active_at or r.timestamp),
               min_width=max(times.display_width(), len(time_title("LAST ACTIVE"))), priority=1),
        Column("fork", "FORK", fork_label, min_width=9, priority=7, style=lambda r: "secondary"),
        Column("run", "RUN", run_label, min_width=14, priority=5, style=run_style),
    ]


# --- the widget -------------------------------------------------------------------------------------------------


class SessionList(RowList["SessionSummary"]):
    """Every session of the query, one line each; the cursor row is highlighted, ``enter`` posts
    :class:`RowList.Selected`."""

    ACTION_SCOPE: ClassVar[str] = "session-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Session list"
    MARK_HOLD_S: ClassVar[float | None] = MARK_HOLD_S
    PAGE_SIZE: ClassVar[int] = WINDOW

    def __init__(self, *, id: str | None = None) -> None:
        self.marked: dict[str, None] = {}  # sessions marked with space for a bulk action, in marking order
        columns = session_columns()
        columns[0] = Column("pin", "", self._mark_cell, min_width=1, style=lambda r: "accent")
        super().__init__(id=id, columns=columns, empty_text="No sessions.", loading_text=OPENING_TEXT)

    def _mark_cell(self, row: SessionSummary) -> str:
        return "✓" if row.id in self.marked else ("*" if row.pinned else "")

    def row_style(self, row: SessionSummary) -> str | None:
        if row.problems:
            return "damaged"
        return "mark" if row.id in self.marked else None

    def action_toggle_mark(self) -> None:
        """Mark (or unmark) the session under the cursor for a bulk action, and move down one row."""
        row = self.selected
        if row is None:
            return
        if row.id in self.marked:
            del self.marked[row.id]
        else:
            self.marked[row.id] = None
        self.refresh_cells()
        self.action_cursor_down()

    # --- data -------------------------------------------------------------------------------------------------

    @property
    def session_source(self) -> SessionSource | None:
        source = self.source
        return source if isinstance(source, SessionSource) else None

    def show(
        self, sd: SessionDir, query: ListQuery, *, keep_position: bool = False, first_page: SessionPage | None = None
    ) -> None:
        """Show ``query`` over ``sd``. ``keep_position``: the same query read again (a refresh): the cursor stays
        on its row. ``first_page``: rows ``[0, WINDOW)`` already read (by the app); shown at once."""
        self.loading_text = LOADING_TEXT
        current = self.session_source
        if keep_position and first_page is None and current is not None and current.sd is sd \
                and current.query == query:
            self.reload()  # the same source: it knows where the shown rows are
            return
        source = SessionSource(sd, query)
        if first_page is not None:
            self.set_source(source, first_page=source.adopt(first_page.rows, first_page.total),
                            total=first_page.total)
        else:
            self.set_source(source, keep_cursor=keep_position)

    def detach(self) -> None:
        """Show nothing but "Opening…" (the store is being replaced); reads still on their way are dropped."""
        self.loading_text = OPENING_TEXT
        self.set_source(None)

    def refresh_rows(self, idents: Iterable[Key]) -> None:
        """Follow a live change of the sessions ``idents`` in the current order.

        Shown rows are re-read in place (see :meth:`RowList.refresh_rows`) and marked; when a re-read row's place
        in the sort changed (:meth:`apply_rows`), or a session outside the window changed (it may now sort into
        it, e.g. under "last active ↓"), the window is read again in order instead, the cursor kept on its row.
        More than :data:`LIVE_BATCH_CAP` shown rows: the window is read again too (one query, not one per row)."""
        named = set(idents)
        if not named or not self.loaded or self.session_source is None:
            return
        shown = self.loaded_ids()
        if named - shown or len(named) > LIVE_BATCH_CAP:
            self.reload(keep_cursor=True, marks=named)
            return
        super().refresh_rows(named)

    def apply_rows(self, fresh: Mapping[Key, SessionSummary | None]) -> frozenset[Key]:
        source = self.session_source
        if source is not None:
            sort = source.query.sort
            for ident, row in fresh.items():
                old = self.row_of(ident)
                if row is not None and old is not None and sort_fields(old, sort) != sort_fields(row, sort):
                    self.reload(keep_cursor=True, marks=fresh.keys())  # it moves: read the window in order
                    return frozenset(fresh.keys())
        return super().apply_rows(fresh)

    def loaded_ids(self) -> set[str]:
        """Ids of every session row in the window."""
        return {row.id for row in self.rows}

    def row_at(self, index: int) -> SessionSummary | None:
        """The row at ``index`` of the window, or None."""
        return self.rows[index] if 0 <= index < len(self.rows) else None


__all__ = [
    "WINDOW",
    "ListQuery",
    "SessionList",
    "SessionSource",
    "default_query",
    "fork_label",
    "run_label",
    "session_columns",
]
