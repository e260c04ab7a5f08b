"""The run list of the Runs screen: a Line-API ``ScrollView`` over runs read from the store page by page.

What it shows, top to bottom: every **active** run of the scope (one session, or all; at most
:data:`ACTIVE_CAP`), then **recent** runs newest first, read by keyset (``store.mothx.runs.list_runs(after=...)``)
:data:`PAGE` at a time while the user scrolls towards the end (at most :data:`RECENT_CAP`, shown as
"2,000 of >2,000"). Only the rows drawn on screen are rendered; the cost of a paint does not grow with the
database.

Reads happen in thread workers that only post messages (:class:`RunsLoaded`, :class:`RunsRefreshed`); the
handlers own the rows. Each full read has a generation number and a stale answer is dropped.

Times on screen come from the app's clock (``app.clock``), never from the terminal's: the lease countdown
("expires in 9 s", "expired 3 h ago") is recomputed on each paint, so the screen's one-second timer only
repaints; what the database says (state, lease, recovery) changes only with a re-read.

Live refresh (:meth:`RunList.refresh_sessions`) re-reads only the named sessions' runs and updates the rows in
place: the cursor stays on the same run, the scroll position is kept, and the rows that changed are marked
until the next refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events, on, work
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from store import times
from store.safetext import safe
from tui import actions
from tui.context import services
from tui.formatting import describe_error, one_line
from tui.messages import WorkerFailed
from tui.safe import notify
from tui.widgets.cursor_rows import CursorRows

if TYPE_CHECKING:
    from store.mothx.leases import LeaseSnapshot
    from store.mothx.runs import RecoveryRecord, RunCursor, RunListing
    from store.mothx.sessiondir import SessionDir

ACTIVE_CAP = 1000
"""Active runs read at once (a directory with more is inconsistent anyway: one active run per session)."""

PAGE = 200
"""Recent runs per keyset read."""

FIRST_PAGE = 80
"""Recent runs in the first read (a few screens' worth: the first paint waits for it; the rest follows in PAGEs)."""

RECENT_CAP = 2000
"""Recent runs kept on screen at most; beyond it the status line says "2,000 of >2,000"."""

LIVE_PER_SESSION = 50
"""Runs re-read per changed session on a live refresh (the newest; older ones are terminal and do not change)."""

ORPHAN_STATES = frozenset({"orphaned", "recovery_failed"})



# --- text of the cells (pure functions, tested on their own) ---------------------------------------------------


def duration_text(seconds: int) -> str:
    """A span in its largest sensible unit (``9 s``, ``4 min``, ``3 h``, ``12 d``, ``73 y``): :func:`store.times.duration`."""
    return times.duration(seconds)


def expiry_text(lease: LeaseSnapshot | None, now: float) -> str:
    """The lease countdown at ``now``: ``expires in 9 s``, ``expired 3 h ago``, ``released``, or ``""``."""
    if lease is None:
        return ""
    if lease.state != "active":
        return "released"
    left = lease.expires_at - int(now)
    if left > 0:
        return f"expires in {duration_text(left)}"
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


def is_orphan(listing: RunListing) -> bool:
    return listing.execution is not None and listing.execution.state in ORPHAN_STATES


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
class RunScope:
    """Which runs the list shows."""

    session_id: str | None = None  # None: every session
    orphaned_only: bool = False


@dataclass(frozen=True)
class RunsPage:
    """One read: the active runs (first read only) and one page of recent terminal runs."""

    active: list[RunRow] | None
    recent: list[RunRow]
    after: RunCursor | None  # where the next page starts
    done: bool  # no more recent runs


def local_instance_id() -> str:
    from store.mothx.leases import LeaseOwner

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
    """The active runs (when ``first``) and the next ``page`` recent terminal runs after ``after`` (default
    :data:`FIRST_PAGE` for the first read, else :data:`PAGE`)."""
    from store.mothx.runs import list_runs

    if page is None:
        page = FIRST_PAGE if first else PAGE

    me = local_instance_id()
    active: list[RunListing] | None = None
    if first:
        active = list_runs(sd, session_id=scope.session_id, active_only=True, limit=ACTIVE_CAP, now=now,
                           local_instance_id=me)
    recent: list[RunListing] = []
    cursor = after
    done = True
    if not scope.orphaned_only:
        chunk = list_runs(sd, session_id=scope.session_id, limit=page, after=after, now=now, local_instance_id=me)
        done = len(chunk) < page
        if chunk:
            cursor = chunk[-1].cursor
        recent = [ls for ls in chunk if not ls.run.active]
    known = known_titles or {}
    wanted = {ls.run.session_id for ls in (*(active or ()), *recent)} - known.keys()
    titles = {**known, **session_titles(sd, wanted)} if wanted else known
    rows_active = None if active is None else [RunRow(ls, titles.get(ls.run.session_id, "")) for ls in active]
    rows_recent = [RunRow(ls, titles.get(ls.run.session_id, "")) for ls in recent]
    return RunsPage(rows_active, rows_recent, cursor, done)


def read_sessions_runs(sd: SessionDir, session_ids: Iterable[str], *, now: int,
                       known_titles: dict[str, str] | None = None) -> dict[str, list[RunRow]]:
    """The newest runs of each named session (a live refresh re-reads only these)."""
    from store.mothx.runs import list_runs

    me = local_instance_id()
    out: dict[str, list[RunListing]] = {}
    for sid in sorted(set(session_ids)):
        out[sid] = list_runs(sd, session_id=sid, limit=LIVE_PER_SESSION, now=now, local_instance_id=me)
    known = known_titles or {}
    wanted = {sid for sid, rows in out.items() if rows} - known.keys()
    titles = {**known, **session_titles(sd, wanted)} if wanted else known
    return {sid: [RunRow(ls, titles.get(sid, "")) for ls in rows] for sid, rows in out.items()}


# --- layout ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    align: str = "left"


GUTTER = 2  # cursor mark + change mark


def run_columns(width: int) -> list[Column]:
    """Columns that fit ``width``; SESSION and RECOVERY share what the fixed ones leave, less important ones go
    first on narrow terminals (the detail pane shows every fact in full)."""
    fixed = [
        Column("run", "RUN", 12),
        Column("status", "STATUS", 13),
        Column("state", "STATE", 15),
        Column("holder", "LEASE HOLDER", 20),
        Column("epoch", "EP", 3, "right"),
        Column("expiry", "LEASE EXPIRY", 16),
    ]
    drop_order = ["epoch", "holder", "status", "expiry"]
    usable = max(0, width - GUTTER)
    session_min, recovery_min = 14, 13

    def room(cols: list[Column], extra: int) -> int:
        return usable - sum(c.width for c in cols) - (len(cols) + extra)

    cols = list(fixed)
    while drop_order and room(cols, 2) < session_min + recovery_min:
        victim = drop_order.pop(0)
        cols = [c for c in cols if c.key != victim]
    left = room(cols, 2)
    if left >= session_min + recovery_min:
        recovery_w = max(recovery_min, min(20, left - session_min))
        session_w = left - recovery_w
        tail = [Column("recovery", "RECOVERY", recovery_w)]
    else:
        session_w = max(1, room(cols, 1))
        tail = []
    return [Column("session", "SESSION", session_w), *cols, *tail]


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


# --- messages ---------------------------------------------------------------------------------------------------


class RunsLoaded(Message):
    """A page of runs arrived for read ``generation`` (``first``: it replaces the list)."""

    def __init__(self, generation: int, page: RunsPage, first: bool, titles: dict[str, str]) -> None:
        super().__init__()
        self.generation = generation
        self.page = page
        self.first = first
        self.titles = titles


class RunsFailed(Message):
    def __init__(self, generation: int, error: str) -> None:
        super().__init__()
        self.generation = generation
        self.error = error


class RunsRefreshed(Message):
    """Named sessions' runs were re-read (a live refresh)."""

    def __init__(self, generation: int, sessions: dict[str, list[RunRow]]) -> None:
        super().__init__()
        self.generation = generation
        self.sessions = sessions


@dataclass(frozen=True)
class _Styles:
    base: Style
    header: Style
    cursor: Style
    changed: Style
    dim: Style
    group: Style
    good: Style
    warn: Style
    bad: Style
    accent: Style
    muted: Style


STATE_STYLE = {
    "orphaned": "bad", "recovery_failed": "bad", "inconsistent": "bad", "unknown": "warn",
    "external": "warn", "local": "good", "reserved": "accent", "detached_remote": "accent", "idle": "muted",
}


def status_style(status: str) -> str:
    from store.mothx.runs import is_terminal

    if status.startswith("waiting"):
        return "warn"
    if status in ("failed", "timed_out", "expired"):
        return "bad"
    if is_terminal(status):
        return "muted"
    return "good"


class RunList(CursorRows, ScrollView, can_focus=True, inherit_bindings=False):
    """Active runs first, then recent runs; one line each, the cursor row highlighted."""

    ACTION_SCOPE: ClassVar[str] = "run-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Run list"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "run-list--header", "run-list--cursor", "run-list--cursor-blurred", "run-list--changed", "run-list--dim",
        "run-list--group", "run-list--good", "run-list--warn", "run-list--bad", "run-list--accent",
        "run-list--muted",
    }

    DEFAULT_CSS = """
    RunList {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-gutter: stable;
    }
    RunList > .run-list--header { text-style: bold; color: $primary; background: $panel; }
    RunList > .run-list--cursor { background: $primary 40%; text-style: bold; }
    RunList > .run-list--cursor-blurred { background: $primary 15%; }
    RunList > .run-list--changed { background: $warning 20%; }
    RunList > .run-list--dim { color: $foreground-muted; text-style: italic; }
    RunList > .run-list--group { color: $foreground-muted; text-style: bold; }
    RunList > .run-list--good { color: $success; }
    RunList > .run-list--warn { color: $warning; }
    RunList > .run-list--bad { color: $error; text-style: bold; }
    RunList > .run-list--accent { color: $accent; }
    RunList > .run-list--muted { color: $foreground-muted; }
    """

    cursor: reactive[int] = reactive(0, always_update=True)

    class Selected(Message):
        """The run under the cursor changed (``row`` is None when the list is empty)."""

        def __init__(self, row: RunRow | None) -> None:
            super().__init__()
            self.row = row

    class Opened(Message):
        def __init__(self, row: RunRow) -> None:
            super().__init__()
            self.row = row

    class Changed(Message):
        """The rows changed (a read or a live refresh arrived); the screen updates its counts."""

        def __init__(self, refreshed: frozenset[str] = frozenset()) -> None:
            super().__init__()
            self.refreshed = refreshed  # run ids whose facts changed in a live refresh

    def __init__(self, *, clock: Callable[[], float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock: Callable[[], float] | None = clock
        self.sd: SessionDir | None = None
        self.scope = RunScope()
        self.generation = 0
        self.loaded = False
        self.error = ""
        self.active_rows: list[RunRow] = []
        self.recent_rows: list[RunRow] = []
        self.rows: list[RunRow] = []  # what is drawn (after the orphaned-only filter)
        self.changed: set[str] = set()  # run ids marked until the next refresh
        self.titles: dict[str, str] = {}
        self._after: RunCursor | None = None
        self._done = True
        self._reading_more = False
        self._live_pending: set[str] = set()
        self._live_running = False
        self._styles: _Styles | None = None
        self._layout: tuple[int, list[Column]] | None = None
        self._keep_run: str | None = None
        self._selected_id: str | None = None

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

        ``first_page`` is the first read of ``scope`` done already (while the app started): it is applied as if
        it had just arrived, and nothing is read now."""
        self.sd = sd
        self.scope = scope
        self.generation += 1
        self._reading_more = False
        self._live_pending.clear()
        self._keep_run = self.selected.run_id if keep_position and self.selected is not None else None
        if not keep_position:
            self.loaded = False
            self.cursor = 0
            self.scroll_to(y=0, animate=False, immediate=True)
        if first_page is not None:
            titles = {row.session_id: row.title for row in (*(first_page.active or ()), *first_page.recent)}
            self._loaded(RunsLoaded(self.generation, first_page, True, titles))
            return
        self._read(sd, scope, self.generation, None, True, dict(self.titles))
        self.refresh()

    def reload(self) -> None:
        if self.sd is not None:
            self.show(self.sd, self.scope, keep_position=True)

    @property
    def selected(self) -> RunRow | None:
        if not self.rows:
            return None
        return self.rows[max(0, min(self.cursor, len(self.rows) - 1))]

    @property
    def has_more(self) -> bool:
        return not self._done

    @property
    def capped(self) -> bool:
        return len(self.recent_rows) >= RECENT_CAP and not self._done

    def row_of(self, run_id: str) -> RunRow | None:
        for row in self.rows:
            if row.run_id == run_id:
                return row
        return None

    def session_ids(self) -> set[str]:
        return {row.session_id for row in (*self.active_rows, *self.recent_rows)}

    def visible_rows(self) -> list[RunRow]:
        first = int(self.scroll_offset.y)
        return self.rows[first:first + self._page_rows]

    def next_expiry(self) -> int | None:
        """The earliest expiry of a lease that is valid now on a shown active run (to re-read when it passes)."""
        now = self.now()
        found = [row.listing.lease.expires_at for row in self.active_rows
                 if row.listing.lease is not None and lease_valid_at(row.listing.lease, now)]
        return min(found) if found else None

    # --- reading ----------------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="run-list-read", exit_on_error=False, description="Read runs")
    def _read(self, sd: SessionDir, scope: RunScope, generation: int, after: RunCursor | None, first: bool,
              titles: dict[str, str]) -> None:
        try:
            page = read_runs_page(sd, scope, now=int(self.now()), after=after, first=first, known_titles=titles)
        except Exception as exc:  # noqa: BLE001 - one line on screen, never a traceback
            self.post_message(RunsFailed(generation, describe_error(exc)))
            return
        found = {row.session_id: row.title for row in (*(page.active or ()), *page.recent)}
        self.post_message(RunsLoaded(generation, page, first, found))

    @on(RunsLoaded)
    def _loaded(self, message: RunsLoaded) -> None:
        message.stop()
        if message.generation != self.generation:
            return
        page = message.page
        self.titles.update(message.titles)
        if message.first:
            previous = self.selected.run_id if self.selected is not None else None
            self.active_rows = list(page.active or [])
            self.recent_rows = []
            self.changed = set()
            keep = (self._keep_run or previous) if self.loaded else None
        else:
            keep = self.selected.run_id if self.selected is not None else None
        active_ids = {row.run_id for row in self.active_rows}
        self.recent_rows.extend(row for row in page.recent if row.run_id not in active_ids)
        if len(self.recent_rows) >= RECENT_CAP:
            del self.recent_rows[RECENT_CAP:]
        self._after = page.after
        self._done = page.done
        self._reading_more = False
        self.loaded = True
        self.error = ""
        self._rebuild(keep)
        self.post_message(self.Changed())
        self.call_after_refresh(self._read_more_if_near_end)

    @on(RunsFailed)
    def _failed(self, message: RunsFailed) -> None:
        message.stop()
        if message.generation == -1:  # a live re-read (RunsRefreshed follows): the rows keep what they showed
            notify(self, message.error, title="Cannot re-read runs", severity="error")
            return
        if message.generation != self.generation:
            return
        notify(self, message.error, title="Cannot read runs", severity="error")
        self._end_read(message.error)

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        """A read failed outside its own error path (the app notifies it): "Reading runs…" ends here too."""
        if message.group == "run-list-read":
            self._end_read(message.reason)
        elif message.group == "run-list-live":
            self._live_running = False

    def _end_read(self, error: str) -> None:
        self._reading_more = False
        self.loaded = True
        self.error = error
        self.refresh()
        self.post_message(self.Changed())

    def _read_more_if_near_end(self) -> None:
        if self._done or self._reading_more or self.sd is None or self.scope.orphaned_only:
            return
        if len(self.recent_rows) >= RECENT_CAP:
            return
        first = int(self.scroll_offset.y)
        if first + 2 * self._page_rows < len(self.rows):
            return
        self._reading_more = True
        self._read(self.sd, self.scope, self.generation, self._after, False, dict(self.titles))

    def _rebuild(self, keep_run: str | None) -> None:
        """Recompute the drawn rows (filter) and keep the cursor on ``keep_run`` when it is still there."""
        rows = [*self.active_rows, *self.recent_rows]
        if self.scope.orphaned_only:
            rows = [row for row in rows if is_orphan(row.listing)]
        old_cursor = self.cursor
        old_top = int(self.scroll_offset.y)
        self.rows = rows
        self._set_total_rows()
        if keep_run is not None:
            for index, row in enumerate(rows):
                if row.run_id == keep_run:
                    shift = index - old_cursor
                    if shift:
                        self.scroll_to(y=max(0, old_top + shift), animate=False, immediate=True)
                    self.cursor = index
                    break
            else:
                self.cursor = min(old_cursor, max(0, len(rows) - 1))
        else:
            self.cursor = min(self.cursor, max(0, len(rows) - 1))
        self.refresh()

    # --- live refresh -----------------------------------------------------------------------------------------

    def refresh_sessions(self, session_ids: Iterable[str]) -> None:
        """Re-read the runs of ``session_ids`` and update their rows in place (coalesced: one read at a time)."""
        if self.sd is None or not self.loaded:
            return
        wanted = set(session_ids)
        if self.scope.session_id is not None:
            wanted &= {self.scope.session_id}
        if not wanted:
            return
        self._live_pending |= wanted
        if not self._live_running:
            self._start_live()

    def _start_live(self) -> None:
        if self.sd is None or not self._live_pending:
            return
        batch, self._live_pending = self._live_pending, set()
        self._live_running = True
        self._read_sessions(self.sd, frozenset(batch), self.generation, dict(self.titles))

    @work(thread=True, exclusive=False, group="run-list-live", exit_on_error=False, description="Re-read runs")
    def _read_sessions(self, sd: SessionDir, sessions: frozenset[str], generation: int, titles: dict[str, str]) -> None:
        try:
            found = read_sessions_runs(sd, sessions, now=int(self.now()), known_titles=titles)
        except Exception as exc:  # noqa: BLE001 - a failed live read is retried by the next hint or refresh
            self.post_message(RunsFailed(-1, describe_error(exc)))
            found = {}
        self.post_message(RunsRefreshed(generation, found))

    @on(RunsRefreshed)
    def _refreshed(self, message: RunsRefreshed) -> None:
        message.stop()
        self._live_running = False
        if message.generation == self.generation:
            self.apply_refresh(message.sessions)
        if self._live_pending:
            self._start_live()

    def apply_refresh(self, sessions: dict[str, list[RunRow]]) -> frozenset[str]:
        """Merge re-read rows in place: update known runs, add new active runs at the top; mark what changed."""
        keep = self.selected.run_id if self.selected is not None else None
        changed: set[str] = set()
        fresh: dict[str, RunRow] = {}
        for rows in sessions.values():
            for row in rows:
                fresh[row.run_id] = row
                self.titles.setdefault(row.session_id, row.title)

        def merge(rows: list[RunRow]) -> list[RunRow]:
            out = []
            for row in rows:
                new = fresh.get(row.run_id)
                if new is None and row.session_id in sessions:
                    # not among the newest runs re-read: only its lease and state can have changed; keep the
                    # row, with the session's re-read lease when another of its runs carried one
                    out.append(row)
                    continue
                if new is not None and new.facts() != row.facts():
                    changed.add(row.run_id)
                out.append(new or row)
            return out

        self.active_rows = merge(self.active_rows)
        self.recent_rows = merge(self.recent_rows)
        shown = {row.run_id for row in (*self.active_rows, *self.recent_rows)}
        added = [row for row in fresh.values() if row.run_id not in shown and row.listing.run.active]
        if added:
            added.sort(key=lambda r: (r.listing.run.started_at, r.run_id), reverse=True)
            self.active_rows = [*added, *self.active_rows]
            changed.update(row.run_id for row in added)
        self.changed = changed
        self._rebuild(keep)
        self.post_message(self.Changed(frozenset(changed)))
        return frozenset(changed)

    def clear_marks(self) -> None:
        if self.changed:
            self.changed = set()
            self.refresh()

    # --- geometry ---------------------------------------------------------------------------------------------

    def _set_total_rows(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        self.virtual_size = Size(width, len(self.rows) + 1)

    def on_resize(self, event: events.Resize) -> None:
        self._layout = None
        self._set_total_rows()

    # --- cursor -----------------------------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        top = int(self.scroll_offset.y)
        rows = self._page_rows
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + rows:
            self.scroll_to(y=new - rows + 1, animate=False, immediate=True)
        self.refresh()
        selected = self.selected
        run_id = selected.run_id if selected is not None else None
        if run_id != self._selected_id or selected is None:
            self._selected_id = run_id
            self.post_message(self.Selected(selected))
        elif selected is not None:
            # same run, maybe re-read: the detail pane decides whether its facts changed
            self.post_message(self.Selected(selected))

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if round(old) != round(new):
            self._read_more_if_near_end()

    # --- drawing ----------------------------------------------------------------------------------------------

    def _get_styles(self) -> _Styles:
        if self._styles is None:
            base = self.rich_style
            part = self.get_component_rich_style
            self._styles = _Styles(
                base=base,
                header=base + part("run-list--header"),
                cursor=base + part("run-list--cursor" if self.has_focus else "run-list--cursor-blurred"),
                changed=base + part("run-list--changed"),
                dim=part("run-list--dim", partial=True),
                group=part("run-list--group", partial=True),
                good=part("run-list--good", partial=True),
                warn=part("run-list--warn", partial=True),
                bad=part("run-list--bad", partial=True),
                accent=part("run-list--accent", partial=True),
                muted=part("run-list--muted", partial=True),
            )
        return self._styles

    def _columns(self, width: int) -> list[Column]:
        if self._layout is None or self._layout[0] != width:
            self._layout = (width, run_columns(width))
        return self._layout[1]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        styles = self._get_styles()
        base = styles.base
        if y == 0:
            parts = [" " * GUTTER]
            for col in self._columns(width):
                parts.append(fit(col.title, col.width, col.align))
                parts.append(" ")
            return Strip([Segment(fit("".join(parts), width), styles.header)])
        placeholder = base + styles.dim
        if not self.loaded:
            text = "  Opening…" if self.sd is None else "  Reading runs…"
            return Strip([Segment(fit(text, width), placeholder)]) if y == 1 else Strip.blank(width, base)
        index = int(self.scroll_offset.y) + y - 1
        if not self.rows:
            if y == 1:
                if self.error:
                    text = "  " + self.error
                elif self.scope.orphaned_only:
                    text = "  No orphaned run: every active run has a live owner."
                else:
                    text = "  No runs." if self.scope.session_id is None else "  This session has no runs."
                return Strip([Segment(fit(text, width), placeholder)])
            return Strip.blank(width, base)
        if index >= len(self.rows):
            if index == len(self.rows) and not self._done and not self.scope.orphaned_only:
                text = "  … reading more runs" if len(self.recent_rows) < RECENT_CAP else (
                    f"  … {RECENT_CAP:,} recent runs shown; older ones are not read")
                return Strip([Segment(fit(text, width), placeholder)])
            return Strip.blank(width, base)
        return self._row_strip(self.rows[index], width, index == self.cursor)

    def _row_strip(self, row: RunRow, width: int, is_cursor: bool) -> Strip:
        styles = self._get_styles()
        now = self.now()
        marked = row.run_id in self.changed
        line = styles.cursor if is_cursor else (styles.changed if marked else styles.base)
        ls = row.listing
        lease = ls.lease if lease_applies(ls) else None
        segments: list[Segment] = [
            Segment("▌" if is_cursor else " ", line),
            Segment("•" if marked else " ", line + styles.warn),
        ]
        for col in self._columns(width):
            style = line
            text = ""
            if col.key == "session":
                text = row.session_label
                if not row.title:
                    style = line + styles.dim
            elif col.key == "run":
                text = one_line(row.run_id)
            elif col.key == "status":
                text = one_line(ls.run.status)
                style = line + getattr(styles, status_style(ls.run.status))
            elif col.key == "state":
                if ls.execution is not None:
                    text = one_line(ls.execution.state)
                    style = line + getattr(styles, STATE_STYLE.get(ls.execution.state, "muted"))
            elif col.key == "holder":
                text = holder_text(lease, col.width)
                if lease is not None and lease.state != "active":
                    style = line + styles.muted
            elif col.key == "epoch":
                text = str(lease.epoch) if lease is not None else ""
            elif col.key == "expiry":
                text = expiry_text(lease, now)
                if lease is not None:
                    if lease.state != "active":
                        style = line + styles.muted
                    elif lease_valid_at(lease, now):
                        style = line + styles.good
                    elif ls.run.active:
                        style = line + styles.bad
                    else:
                        style = line + styles.muted
            elif col.key == "recovery":
                text = recovery_text(ls.recovery, now)
                if ls.recovery is not None:
                    style = line + (styles.bad if ls.recovery.state == "failed" else styles.muted)
            segments.append(Segment(fit(text, col.width, col.align), style))
            segments.append(Segment(" ", line))
        return Strip(segments).crop_extend(0, width, line)


__all__ = [
    "ACTIVE_CAP", "PAGE", "RECENT_CAP", "RunList", "RunRow", "RunScope", "RunsPage", "duration_text",
    "expiry_text", "holder_text", "recovery_text", "read_runs_page", "read_sessions_runs", "run_columns",
    "session_titles", "is_orphan", "lease_applies",
]
