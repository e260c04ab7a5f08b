"""The run list of the Runs screen: a :class:`~tui.widgets.row_list.RowList` over runs read from the store.

What it shows, top to bottom: every **active** run of the scope (one session, or all; at most
:data:`ACTIVE_CAP`, one read held in memory: :class:`ActiveRuns`), then **recent** runs newest first, read by
keyset a page at a time while the user scrolls towards the end (at most :attr:`RunList.DISPLAY_CAP`, shown as
"2,000 of >2,000"). What is read, and in which order, is the store's (:mod:`store.mothx.run_listing`:
:func:`~store.mothx.run_listing.active_runs`, :func:`~store.mothx.run_listing.recent_runs` — one query per
page — and :func:`~store.mothx.run_listing.runs_page`, which the ``runs`` command reads too); this module
adapts them to row sources: :class:`ActiveRuns`, :class:`RecentRuns`, chained in :class:`RunSource`, with the
session titles. The widget owns the cursor, paging, styles and the strip cache.

Times on screen come from the app's clock (``app.clock``), never from the terminal's: the lease countdown
("expires in 9 s", "expired 3 h ago") is computed when a row is drawn, so the screen's one-second timer only
calls :meth:`~tui.widgets.row_list.RowList.refresh_cells`; what the database says (state, lease, recovery)
changes only with a re-read.

Live refresh (:meth:`RunList.refresh_sessions`) re-reads what is shown (a reload keeping the cursor on the
same run and the scroll position); the runs of the named sessions whose facts changed (:meth:`RunRow.facts`:
a heartbeat is not a change), and new runs of those sessions, are marked until the screen clears the marks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len, set_cell_size
from textual import on

from store import times
from store.mothx.run_listing import ACTIVE_CAP, ORPHAN_STATES, PAGE, RunScope, is_orphan
from store.safetext import safe
from tui import actions
from tui.context import services
from tui.formatting import one_line
from tui.safe import notify
from tui.widgets.row_list import ChainSource, Column, Key, ListSource, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.leases import LeaseSnapshot
    from store.mothx.runs import RecoveryRecord, RunCursor, RunListing, RunPage
    from store.mothx.sessiondir import SessionDir

FIRST_PAGE = 80
"""Recent runs in the first read (a few screens' worth: the first paint waits for it; the rest follows in PAGEs)."""

DISPLAY_CAP = 2000
"""Runs kept on screen at most (:attr:`RunList.DISPLAY_CAP`); beyond it the status line says "2,000 of >2,000"."""

RECENT_CAP = DISPLAY_CAP  # the old name



# --- text of the cells (pure functions, tested on their own) ---------------------------------------------------


def duration_text(seconds: int) -> str:
    """A span in its largest sensible unit (``9 s``, ``4 min``, ``3 h``, ``12 d``, ``73 y``): :func:`store.times.duration`."""
    return times.duration(seconds)


def expiry_text(lease: LeaseSnapshot | None, now: float) -> str:
    """The lease countdown at ``now``: ``expires in 9 s``, ``expired 3 h ago``, ``until 2100-01-01`` (more than
    ten years ahead), ``released``, or ``""``."""
    if lease is None:
        return ""
    if lease.state != "active":
        return "released"
    left = lease.expires_at - int(now)
    if left > times.FAR_FUTURE_S:  # no countdown anyone can use: the date (it fits the column)
        return f"until {times.from_unix(lease.expires_at, '%Y-%m-%d')}"
    if left > 0:
        return f"expires {times.time_left(left)}"
    if left == 0:
        return "expired just now"
    return f"expired {duration_text(-left)} ago"


def lease_valid_at(lease: LeaseSnapshot | None, now: float) -> bool:
    return lease is not None and lease.state == "active" and lease.expires_at > int(now)


def short_owner(owner_instance_id: str, width: int) -> str:
    """``pid-71209-e1172d3f00897af7…`` cut to ``width`` characters (the pid stays whole), made safe first."""
    owner = one_line(owner_instance_id)
    return owner if len(owner) <= width else owner[:max(1, width)]


PURPOSE_SHORT = {"execution": "exec", "recovery": "recov", "admission": "admit", "mutation": "mutate"}


def holder_text(lease: LeaseSnapshot | None, width: int = 20) -> str:
    """``pid-71209-e1172 exec``: the owner instance id shortened to fit, then the purpose (shortened)."""
    if lease is None:
        return ""
    purpose = PURPOSE_SHORT.get(lease.purpose, one_line(lease.purpose)) or "?"
    room = width - len(purpose) - 1
    if room < 8:
        return short_owner(lease.owner_instance_id, width)
    return f"{short_owner(lease.owner_instance_id, room)} {purpose}"


def recovery_text(rec: RecoveryRecord | None, now: float) -> str:
    """``failed #2 in 5 s`` (next retry) / ``failed #2 due`` / ``completed #1`` / ``""``."""
    if rec is None:
        return ""
    text = f"{one_line(rec.state)} #{rec.attempt}"
    if rec.state == "failed" and rec.next_retry_at is not None:
        left = rec.next_retry_at - int(now)
        text += f" in {duration_text(left)}" if left > 0 else " due"
    return text


def lease_applies(listing: RunListing) -> bool:
    """The session's lease belongs on this run's row: the run is active, or the lease was bound to it."""
    lease = listing.lease
    return lease is not None and (listing.run.active or lease.run_id == listing.run.id)


@dataclass(frozen=True)
class RunRow:
    """One line of the list: the store's listing and the title of its session (``""`` when unknown)."""

    listing: RunListing
    title: str = ""

    @property
    def run_id(self) -> str:
        return self.listing.run.id

    @property
    def session_id(self) -> str:
        return self.listing.run.session_id

    @property
    def session_label(self) -> str:
        return one_line(self.title) if self.title else one_line(self.session_id[:8])

    def facts(self) -> tuple[object, ...]:
        """What the row shows from the database, to decide whether a re-read changed it. A heartbeat (a later
        ``expires_at`` of the same lease) is not a change: the countdown shows it without a mark."""
        ls = self.listing
        lease = ls.lease if lease_applies(ls) else None
        rec = ls.recovery
        ex = ls.execution
        return (
            ls.run.status, ls.run.error, ex.state if ex else "",
            (lease.owner_instance_id, lease.epoch, lease.state, lease.purpose, lease.run_id) if lease else None,
            (rec.state, rec.attempt, rec.next_retry_at) if rec else None,
            self.title,
        )


@dataclass(frozen=True)
class RunsPage:
    """One read: the active runs (first read only) and one page of recent terminal runs."""

    active: list[RunRow] | None
    recent: list[RunRow]
    after: RunCursor | None  # where the next page starts
    done: bool  # no more recent runs


def local_instance_id() -> str:
    from store.mothx.lease_model import LeaseOwner

    return LeaseOwner.current().instance_id


def session_titles(sd: SessionDir, session_ids: Iterable[str]) -> dict[str, str]:
    """Each session's title (its newest ``session_info`` name), else its first user text, read from the store."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    from store.mothx.aggregates import read_layout, session_texts

    # Index lookups (newest session_info, first user text): not a pass over every entry of each session.
    return {sid: title or preview for sid, (title, preview) in session_texts(sd, read_layout(sd), ids).items()}


def read_runs_page(
    sd: SessionDir,
    scope: RunScope,
    *,
    now: int,
    after: RunCursor | None = None,
    first: bool = True,
    known_titles: dict[str, str] | None = None,
    page: int | None = None,
) -> RunsPage:
    """The store's :func:`~store.mothx.run_listing.runs_page` of ``scope`` as rows with their session titles: the
    active runs (when ``first``) and the next ``page`` recent runs after ``after`` (default :data:`FIRST_PAGE`
    for the first read, else :data:`PAGE`)."""
    from store.mothx.run_listing import runs_page

    if page is None:
        page = FIRST_PAGE if first else PAGE
    read = runs_page(sd, scope, after=after, limit=page, now=now, local_instance_id=local_instance_id(),
                     with_active=first)
    return titled_page(sd, read, known_titles)


def titled_page(sd: SessionDir, read: RunPage, known_titles: dict[str, str] | None = None) -> RunsPage:
    """``read`` as rows with the titles of their sessions (``known_titles`` first, the rest read once)."""
    known = known_titles or {}
    wanted = {ls.run.session_id for ls in read.rows} - known.keys()
    titles = {**known, **session_titles(sd, wanted)} if wanted else known
    rows_active = None if read.active is None else [RunRow(ls, titles.get(ls.run.session_id, "")) for ls in read.active]
    rows_recent = [RunRow(ls, titles.get(ls.run.session_id, "")) for ls in read.recent]
    return RunsPage(rows_active, rows_recent, read.after, not read.more)


def fit(text: str, width: int, align: str = "left") -> str:
    """``text`` in exactly ``width`` cells (padded, or cut with an ellipsis), every control or bidi character
    shown as an escape first."""
    if width <= 0:
        return ""
    text = safe(text)
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…"
    if align == "right":
        return " " * (width - cell_len(text)) + text
    return set_cell_size(text, width)



# --- sources ----------------------------------------------------------------------------------------------------


class RunReader:
    """What every read of one scope shares: the session directory, the clock, the local owner and the titles of
    the sessions read so far (filled from the worker thread; a title is read once per session)."""

    def __init__(self, sd: SessionDir, scope: RunScope, now: Callable[[], float],
                 titles: dict[str, str] | None = None) -> None:
        self.sd = sd
        self.scope = scope
        self.now = now
        self.titles: dict[str, str] = dict(titles or {})
        self._me: str | None = None
        self._lock = threading.Lock()

    def _owner(self) -> str:
        if self._me is None:
            self._me = local_instance_id()
        return self._me

    def active(self) -> list[RunRow]:
        """The active runs of the scope (the orphaned ones alone with ``orphaned_only``): one store read."""
        from store.mothx.run_listing import active_runs

        return self.rows(active_runs(self.sd, self.scope, now=int(self.now()), local_instance_id=self._owner()))

    def recent(self, after: RunCursor | None, limit: int) -> Page[RunRow]:
        """The next ``limit`` recent runs of the scope after ``after``: one store read (one query) at any depth."""
        from store.mothx.run_listing import recent_runs

        read = recent_runs(self.sd, self.scope, after=after, limit=limit, now=int(self.now()),
                           local_instance_id=self._owner())
        return Page(tuple(self.rows(read.recent)), read.more)

    def rows(self, listings: Iterable[RunListing]) -> list[RunRow]:
        listings = list(listings)
        with self._lock:
            wanted = {ls.run.session_id for ls in listings} - self.titles.keys()
            if wanted:
                found = session_titles(self.sd, wanted)
                self.titles.update({sid: found.get(sid, "") for sid in wanted})
            titles = self.titles
            return [RunRow(ls, titles.get(ls.run.session_id, "")) for ls in listings]


class ActiveRuns(RowSource[RunRow]):
    """The active runs of the scope (:meth:`RunReader.active`): one read per :meth:`first`, held in memory
    (``keep``: only the rows it accepts as well). Key: the run id."""

    def __init__(self, reader: RunReader, keep: Callable[[RunRow], bool] | None = None) -> None:
        self.reader = reader
        self.keep = keep
        self._rows: ListSource[RunRow] | None = None

    def _read(self) -> ListSource[RunRow]:
        rows = self.reader.active()
        if self.keep is not None:
            rows = [row for row in rows if self.keep(row)]
        self._rows = ListSource(rows, key=lambda r: r.run_id)
        return self._rows

    def _held(self) -> ListSource[RunRow]:
        return self._rows if self._rows is not None else self._read()

    def key(self, row: RunRow) -> Key:
        return row.run_id

    def first(self, limit: int) -> Page[RunRow]:
        return self._read().first(limit)

    def after(self, key: Key, limit: int) -> Page[RunRow]:
        return self._held().after(key, limit)

    def total(self) -> int:
        return self._held().total()


class RecentRuns(RowSource[RunRow]):
    """Terminal runs newest first, by keyset on :attr:`RunListing.cursor` (forward only): each page is one store
    read (:meth:`RunReader.recent`), the active runs left out by the query itself (they are :class:`ActiveRuns`)."""

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader

    def key(self, row: RunRow) -> Key:
        return row.listing.cursor

    def ident(self, row: RunRow) -> Key:
        return row.run_id

    def first(self, limit: int) -> Page[RunRow]:
        return self.reader.recent(None, limit)

    def after(self, key: Key, limit: int) -> Page[RunRow]:
        return self.reader.recent(key, limit)  # type: ignore[arg-type]


class RunSource(ChainSource[RunRow]):
    """Active runs, then recent runs. A read fills its page from both (so a reload, which reads what was shown
    in one call, reads the recent runs that were shown too)."""

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader
        self.active = ActiveRuns(reader)
        self.recent = RecentRuns(reader)
        super().__init__([self.active, self.recent], part=lambda r: 0 if r.listing.run.active else 1)

    def _fill(self, page: Page[RunRow], limit: int) -> Page[RunRow]:
        rows = list(page.rows)
        more = page.more
        while more and rows and len(rows) < limit:
            nxt = super().after(self.key(rows[-1]), limit - len(rows))
            if not nxt.rows:
                break
            rows.extend(nxt.rows)
            more = nxt.more
        return Page(tuple(rows), more)

    def first(self, limit: int) -> Page[RunRow]:
        return self._fill(super().first(limit), limit)

    def after(self, key: Key, limit: int) -> Page[RunRow]:
        return self._fill(super().after(key, limit), limit)


def run_source(reader: RunReader) -> RowSource[RunRow]:
    """The source of ``reader``'s scope: active then recent runs, or the orphaned active runs alone."""
    if reader.scope.orphaned_only:
        return ActiveRuns(reader)  # the store keeps the orphaned runs alone
    return RunSource(reader)


# --- cells ------------------------------------------------------------------------------------------------------


STATE_STYLE = {
    "orphaned": "bad", "recovery_failed": "bad", "inconsistent": "bad", "unknown": "warn",
    "external": "warn", "local": "good", "reserved": "accent", "detached_remote": "accent", "idle": "muted",
}


def status_style(status: str) -> str:
    from store.mothx.run_model import is_terminal

    if status.startswith("waiting"):
        return "warn"
    if status in ("failed", "timed_out", "expired"):
        return "bad"
    if is_terminal(status):
        return "muted"
    return "good"




def holder_cell(lease: LeaseSnapshot | None) -> str:
    """``exec pid-71209-e1172d3f…``: the purpose (shortened) first, then the owner instance id (cut at the end)."""
    if lease is None:
        return ""
    purpose = PURPOSE_SHORT.get(lease.purpose, one_line(lease.purpose)) or "?"
    return f"{purpose} {one_line(lease.owner_instance_id)}"


def _row_lease(row: RunRow) -> LeaseSnapshot | None:
    return row.listing.lease if lease_applies(row.listing) else None


# --- the widget -------------------------------------------------------------------------------------------------


class RunList(RowList[RunRow]):
    """Active runs first, then recent runs; one line each, the cursor row highlighted. ``enter`` posts
    :class:`RowList.Selected`; the cursor's run is :class:`RowList.Highlighted`; reads post
    :class:`RowList.Loaded` / :class:`RowList.Failed`."""

    ACTION_SCOPE: ClassVar[str] = "run-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Run list"
    DISPLAY_CAP: ClassVar[int] = DISPLAY_CAP

    def __init__(self, *, clock: Callable[[], float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id, empty_text="No runs.", loading_text="Opening…")
        self.clock: Callable[[], float] | None = clock
        self.sd: SessionDir | None = None
        self.scope = RunScope()
        self.reader: RunReader | None = None
        self._live: tuple[int, frozenset[str], dict[Key, tuple[object, ...]]] | None = None
        self._live_pending: set[str] = set()

    def make_columns(self) -> list[Column[RunRow]]:
        return [
            Column("session", "SESSION", lambda r: r.session_label, min_width=14, grow=3, priority=2,
                   style=lambda r: None if r.title else "dim"),
            Column("run", "RUN", lambda r: r.run_id, min_width=20, max_width=20, priority=0),
            Column("status", "STATUS", lambda r: r.listing.run.status, min_width=13, priority=1,
                   style=lambda r: status_style(r.listing.run.status)),
            Column("state", "STATE", self._state_cell, min_width=15, priority=5, style=self._state_style),
            Column("holder", "LEASE HOLDER", lambda r: holder_cell(_row_lease(r)), min_width=19, max_width=44,
                   grow=1, priority=6, style=self._holder_style),
            Column("epoch", "EP", self._epoch_cell, min_width=3, align="right", priority=7),
            Column("expiry", "LEASE EXPIRY", lambda r: expiry_text(_row_lease(r), self.now()), min_width=16,
                   priority=3, style=self._expiry_style),
            Column("recovery", "RECOVERY", lambda r: recovery_text(r.listing.recovery, self.now()), min_width=13,
                   max_width=20, grow=1, priority=4, style=self._recovery_style),
        ]

    # --- cells --------------------------------------------------------------------------------------------------

    @staticmethod
    def _state_cell(row: RunRow) -> str:
        ex = row.listing.execution
        return ex.state if ex is not None else ""

    @staticmethod
    def _state_style(row: RunRow) -> str | None:
        ex = row.listing.execution
        return STATE_STYLE.get(ex.state, "muted") if ex is not None else None

    @staticmethod
    def _holder_style(row: RunRow) -> str | None:
        lease = _row_lease(row)
        return "muted" if lease is not None and lease.state != "active" else None

    @staticmethod
    def _epoch_cell(row: RunRow) -> str:
        lease = _row_lease(row)
        return str(lease.epoch) if lease is not None else ""

    def _expiry_style(self, row: RunRow) -> str | None:
        lease = _row_lease(row)
        if lease is None:
            return None
        if lease.state != "active":
            return "muted"
        if lease_valid_at(lease, self.now()):
            return "good"
        return "bad" if row.listing.run.active else "muted"

    @staticmethod
    def _recovery_style(row: RunRow) -> str | None:
        rec = row.listing.recovery
        if rec is None:
            return None
        return "bad" if rec.state == "failed" else "muted"

    def row_style(self, row: RunRow) -> str | None:
        return "damaged" if row.listing.problems else None

    # --- public -----------------------------------------------------------------------------------------------

    def now(self) -> float:
        app = services(self)
        clock = self.clock or (app.clock if app is not None else None)
        if clock is None:  # a test host and no clock given: the wall clock
            import time

            return time.time()
        return float(clock())

    def show(self, sd: SessionDir, scope: RunScope, *, keep_position: bool = False,
             first_page: RunsPage | None = None) -> None:
        """(Re)read the runs of ``scope``. ``keep_position`` keeps the cursor on the same run (a refresh).

        ``first_page`` is the first read of ``scope`` done already (:func:`read_runs_page`): it is shown at once
        and nothing is read now."""
        titles = self.reader.titles if self.reader is not None else {}
        self.sd = sd
        self.scope = scope
        self._live = None
        self._live_pending.clear()
        self.reader = RunReader(sd, scope, self.now, titles)
        self.loading_text = "Reading runs…"
        if scope.orphaned_only:
            self.empty_text = "No orphaned run: every active run has a live owner."
        else:
            self.empty_text = "No runs." if scope.session_id is None else "This session has no runs."
        source = run_source(self.reader)
        page = None
        if first_page is not None:
            rows = [*(first_page.active or ()), *first_page.recent]
            if scope.orphaned_only:
                rows = [row for row in rows if is_orphan(row.listing)]
            self.reader.titles.update({row.session_id: row.title for row in rows})
            page = Page(tuple(rows), not first_page.done and not scope.orphaned_only)
        self.set_source(source, keep_cursor=keep_position, first_page=page)

    @property
    def active_rows(self) -> list[RunRow]:
        """The active runs shown (the first part of the list)."""
        return [row for row in self.rows if row.listing.run.active]

    @property
    def has_more(self) -> bool:
        return self.has_after

    def session_ids(self) -> set[str]:
        return {row.session_id for row in self.rows}

    def next_expiry(self) -> int | None:
        """The earliest expiry of a lease that is valid now on a shown active run (to re-read when it passes)."""
        now = self.now()
        found = [row.listing.lease.expires_at for row in self.active_rows
                 if row.listing.lease is not None and lease_valid_at(row.listing.lease, now)]
        return min(found) if found else None

    # --- live refresh -------------------------------------------------------------------------------------------

    def refresh_sessions(self, session_ids: Iterable[str]) -> None:
        """Re-read what is shown (cursor and scroll kept) because ``session_ids`` changed; their runs whose facts
        changed, and their new runs, are marked."""
        source = self.source
        if source is None or not self.loaded or self.sd is None:
            return
        wanted = set(session_ids)
        if self.scope.session_id is not None:
            wanted &= {self.scope.session_id}
        if not wanted:
            return
        if self._live is not None and self._live[0] == self.generation and self.busy:
            self._live_pending |= wanted  # one re-read at a time: the next starts when this one arrives
            return
        before = {source.ident(row): row.facts() for row in self.rows}
        self.reload(keep_cursor=True)
        self._live = (self.generation, frozenset(wanted), before)

    @on(RowList.Loaded)
    def _marks_after_live(self, message: RowList.Loaded) -> None:
        """The re-read of :meth:`refresh_sessions` arrived: mark what changed in its sessions (the screen sees the
        marks in the same message, which goes on to it)."""
        live = self._live
        source = self.source
        if live is None or source is None or live[0] != self.generation:
            return
        self._live = None
        _, sessions, before = live
        changed = frozenset(
            ident for row in self.rows if row.session_id in sessions
            and before.get(ident := source.ident(row)) != row.facts()
        )
        if changed:
            self.mark_changed(changed)
        message.changed = changed
        if self._live_pending:
            pending, self._live_pending = self._live_pending, set()
            self.refresh_sessions(pending)

    @on(RowList.Failed)
    def _notify_failure(self, message: RowList.Failed) -> None:
        self._live = None
        self._live_pending.clear()
        notify(self, message.error, title="Cannot read runs", severity="error")


__all__ = [
    "ACTIVE_CAP", "DISPLAY_CAP", "ORPHAN_STATES", "PAGE", "RECENT_CAP", "ActiveRuns", "RecentRuns", "RunList", "RunReader", "RunRow",
    "RunScope", "RunSource", "RunsPage", "duration_text", "expiry_text", "fit", "holder_cell", "holder_text",
    "is_orphan", "lease_applies", "read_runs_page", "recovery_text", "run_source",
    "session_titles", "titled_page",
]
