"""The session list: a Line-API ``ScrollView`` over windows of rows read from the store on demand.

Only the rows on screen are ever read. The list is cut into windows of :data:`WINDOW` rows (by position in the
current order); a missing window is read with ``store.mothx.sessions.list_sessions(..., offset=, limit=)`` in a thread
worker that only posts a :class:`~tui.messages.SessionWindowLoaded`; one handler caches it (LRU of
:data:`CACHE_WINDOWS` windows) and repaints. Each query (filter / sort / refresh) has a generation number; a
result for an older generation is dropped.

Row 0 of the widget is the column header and never scrolls; data row ``r`` is drawn at line ``r - scroll_y + 1``.

Live updates (:meth:`SessionList.refresh_sessions`) re-read only the named sessions that are loaded, one batch
at a time, and replace their rows in place (cursor and scroll position kept); rows whose summary changed are
marked until the next refresh (or :data:`MARK_HOLD_S`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
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
from textual.worker import get_current_worker

from store.safetext import safe
from tui import actions
from tui.formatting import describe_error, one_line, shown_path, utc_minutes
from tui.messages import SessionWindowFailed, SessionWindowLoaded, WindowRequest, WorkerFailed
from tui.widgets.cursor_rows import CursorRows

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionFilter, SessionPage, SessionSummary, SortKey

WINDOW = 100
"""Rows per read: one ``list_sessions`` call fetches whole windows."""

CACHE_WINDOWS = 40
"""Windows kept in memory (least recently used are dropped): at most 4,000 summaries."""

STRIP_CACHE = 400
"""Drawn rows kept (a repaint or a scroll back draws from here)."""

MARK_HOLD_S = 2.0
"""A row a live update changed stays marked until the next refresh, or this long at most."""

LIVE_BATCH_CAP = 200
"""A live update naming more loaded sessions than this re-reads the visible windows instead."""


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


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    align: str = "left"  # "left" | "right"


@dataclass(frozen=True)
class _Styles:
    """The Rich styles of one paint, read once from the CSS (reading them per cell is the slow part)."""

    base: Style
    header: Style
    cursor: Style
    dim: Style
    fork: Style
    run: Style
    run_waiting: Style
    run_problem: Style
    pinned: Style
    placeholder: Style
    changed: Style


@dataclass
class _Layout:
    width: int
    columns: list[Column] = field(default_factory=list)


GUTTER = 2  # cursor mark + pin mark


def layout_columns(width: int) -> list[Column]:
    """Columns that fit in ``width`` cells; less important ones are dropped on narrow terminals.

    Title and work dir share what the fixed columns leave (title 60 %); each column is followed by one space.
    """
    fixed = [
        Column("id", "ID", 8),
        Column("channel", "CHANNEL", 8),
        Column("messages", "MSGS", 5, "right"),
        Column("last_active", "LAST ACTIVE UTC", 16),
        Column("fork", "FORK", 9),
        Column("run", "RUN", 14),
    ]
    drop_order = ["fork", "channel", "run", "messages", "id", "last_active"]
    usable = max(0, width - GUTTER)
    title_min, cwd_min = 16, 10

    def flexible(cols: list[Column], with_cwd: bool) -> int:
        separators = len(cols) + 1 + (1 if with_cwd else 0)
        return usable - sum(c.width for c in cols) - separators

    cols = list(fixed)
    while drop_order and flexible(cols, True) < title_min + cwd_min:
        victim = drop_order.pop(0)
        cols = [c for c in cols if c.key != victim]
    room = flexible(cols, True)
    if room >= title_min + cwd_min:
        title_w = (room * 6) // 10
        middle = [Column("cwd", "WORK DIR", room - title_w)]
    else:
        title_w = max(1, flexible(cols, False))
        middle = []
    ordered = [c for c in cols if c.key == "id"] + middle + [c for c in cols if c.key != "id"]
    return [Column("title", "TITLE", title_w), *ordered]


def fit(text: str, width: int, align: str = "left") -> str:
    """``text`` in exactly ``width`` cells: padded, or cut with an ellipsis. Every control or bidi character
    is shown as an escape first (a cell is drawn from data: nothing of it may reach the terminal raw)."""
    if width <= 0:
        return ""
    text = safe(text)
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…"
    if align == "right":
        return " " * (width - cell_len(text)) + text
    return set_cell_size(text, width)


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


def run_style_key(row: SessionSummary) -> str:
    if row.run_state in PROBLEM_RUN_STATES:
        return "run_problem"
    return "run_waiting" if row.run_status.startswith("waiting") else "run"


class SessionList(CursorRows, ScrollView, can_focus=True, inherit_bindings=False):
    """Every session of the query, one line each; the cursor row is highlighted."""

    ACTION_SCOPE: ClassVar[str] = "session-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Session list"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "session-list--header",
        "session-list--cursor",
        "session-list--cursor-blurred",
        "session-list--dim",
        "session-list--fork",
        "session-list--run",
        "session-list--run-waiting",
        "session-list--run-problem",
        "session-list--pinned",
        "session-list--placeholder",
        "session-list--changed",
    }

    DEFAULT_CSS = """
    SessionList {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-gutter: stable;
    }
    SessionList > .session-list--header { text-style: bold; color: $primary; background: $panel; }
    SessionList > .session-list--cursor { background: $primary 40%; text-style: bold; }
    SessionList > .session-list--cursor-blurred { background: $primary 15%; }
    SessionList > .session-list--dim { color: $foreground-muted; text-style: italic; }
    SessionList > .session-list--fork { color: $secondary; }
    SessionList > .session-list--run { color: $success; }
    SessionList > .session-list--run-waiting { color: $warning; }
    SessionList > .session-list--run-problem { color: $error; text-style: bold; }
    SessionList > .session-list--pinned { color: $accent; }
    SessionList > .session-list--placeholder { color: $foreground-muted; }
    SessionList > .session-list--changed { background: $warning 20%; }
    """

    cursor: reactive[int] = reactive(0, always_update=True)

    class Opened(Message):
        """Enter was pressed on a session."""

        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    class Counted(Message):
        """The number of rows of the current query is known (or changed)."""

        def __init__(self, total: int, generation: int) -> None:
            super().__init__()
            self.total = total
            self.generation = generation

    class Failed(Message):
        """A window could not be read; ``error`` is one sentence."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class RowsRead(Message):
        """Named sessions were re-read for a live update (``gone``: no longer in the database)."""

        def __init__(self, generation: int, rows: list[SessionSummary], gone: set[str]) -> None:
            super().__init__()
            self.generation = generation
            self.rows = rows
            self.gone = gone

    class RowsUpdated(Message):
        """A live update was applied: ``changed`` are the ids whose rows changed (and are marked)."""

        def __init__(self, changed: frozenset[str]) -> None:
            super().__init__()
            self.changed = changed

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sd: SessionDir | None = None
        self.query_spec: ListQuery | None = None
        self.generation = 0
        self.total: int | None = None  # None until the first window of the query arrived
        self.empty_text = "No sessions."
        self.error: str = ""
        self._windows: OrderedDict[int, list[SessionSummary]] = OrderedDict()
        self._pending: WindowRequest | None = None
        self._layout: _Layout | None = None
        self._styles: _Styles | None = None
        self._strips: OrderedDict[tuple[str, str, bool, int], Strip] = OrderedDict()
        self._strip_rows: dict[tuple[str, str, bool, int], SessionSummary] = {}
        self._keep_position = False
        self.changed: set[str] = set()  # ids marked by the last live update
        self._live_pending: set[str] = set()
        self._live_running = False
        self._mark_timer: object | None = None

    # --- public -----------------------------------------------------------------------------------------------

    def show(
        self, sd: SessionDir, query: ListQuery, *, keep_position: bool = False, first_page: SessionPage | None = None
    ) -> None:
        """Show ``query`` over ``sd``. ``keep_position`` keeps cursor and scroll (a refresh); else go to the top.

        ``first_page`` is rows ``[0, WINDOW)`` of ``query`` already read (by the app, while the screen was being
        composed); it is applied like any window that arrived."""
        self.sd = sd
        self.query_spec = query
        self.generation += 1
        self._windows.clear()
        self._pending = None
        self.error = ""
        self._keep_position = keep_position
        self.changed = set()
        self._live_pending.clear()
        if not keep_position:
            self.total = None
            self.cursor = 0
            self.scroll_to(y=0, animate=False, immediate=True)
            self._set_total_rows(0)
        if first_page is not None:
            request = WindowRequest(self.generation, 0, WINDOW)
            self._window_loaded(SessionWindowLoaded(request, list(first_page.rows), first_page.total))
            return
        self._request_visible()
        self.refresh()

    def detach(self) -> None:
        """Show nothing (the store is being replaced); results still on their way are dropped."""
        self.sd = None
        self.query_spec = None
        self.generation += 1
        self._windows.clear()
        self._strips.clear()
        self._strip_rows.clear()
        self._pending = None
        self.total = None
        self.error = ""
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self._set_total_rows(0)
        self.refresh()

    def reload(self) -> None:
        """Re-read the current query, keeping cursor and scroll position."""
        if self.sd is not None and self.query_spec is not None:
            self.show(self.sd, self.query_spec, keep_position=True)

    @property
    def loaded(self) -> bool:
        """True when the current query's first window has arrived and nothing visible is missing."""
        return self.total is not None and not self._missing_windows()

    def row_at(self, index: int) -> SessionSummary | None:
        window = self._windows.get(index // WINDOW)
        if window is None:
            return None
        offset = index % WINDOW
        return window[offset] if offset < len(window) else None

    @property
    def selected(self) -> SessionSummary | None:
        if not self.total:
            return None
        return self.row_at(self.cursor)

    def visible_rows(self) -> list[SessionSummary]:
        """The loaded rows currently on screen, top to bottom."""
        first, last = self._visible_range()
        out: list[SessionSummary] = []
        for index in range(first, last + 1):
            row = self.row_at(index)
            if row is not None:
                out.append(row)
        return out

    # --- live updates -------------------------------------------------------------------------------------------

    def loaded_ids(self) -> set[str]:
        """Ids of every session row held in the cached windows."""
        return {row.id for window in self._windows.values() for row in window}

    def refresh_sessions(self, session_ids: set[str] | frozenset[str]) -> None:
        """Re-read the loaded rows of ``session_ids`` and update them in place (one read at a time)."""
        if self.sd is None or self.query_spec is None or self.total is None:
            return
        wanted = set(session_ids) & self.loaded_ids()
        if not wanted:
            return
        self._live_pending |= wanted
        if not self._live_running:
            self._start_live_read()

    def _start_live_read(self) -> None:
        if self.sd is None or not self._live_pending:
            return
        batch, self._live_pending = self._live_pending, set()
        if len(batch) > LIVE_BATCH_CAP:
            self.reload()
            return
        self._live_running = True
        self._read_rows(self.sd, sorted(batch), self.generation)

    @work(thread=True, exclusive=False, group="session-rows", exit_on_error=False, description="Re-read sessions")
    def _read_rows(self, sd: SessionDir, ids: list[str], generation: int) -> None:
        from store.errors import SessionNotFound
        from store.mothx.sessions import get_session

        rows: list[SessionSummary] = []
        gone: set[str] = set()
        failure: Exception | None = None
        for sid in ids:
            try:
                rows.append(get_session(sd, sid))
            except SessionNotFound:
                gone.add(sid)
            except Exception as exc:  # noqa: BLE001 - the row keeps what it showed; the next refresh reads it again
                failure = failure or exc
        self.post_message(self.RowsRead(generation, rows, gone))
        if failure is not None:
            raise failure  # not silent: the app notifies it (ReportingWorkers)

    @on(RowsRead)
    def _rows_read(self, message: RowsRead) -> None:
        message.stop()
        self._live_running = False
        if message.generation == self.generation:
            self.apply_rows(message.rows)
            if message.gone:
                self.reload()  # a session went away: positions shift, read the windows again
                return
        if self._live_pending:
            self._start_live_read()

    def apply_rows(self, rows: list[SessionSummary]) -> frozenset[str]:
        """Replace loaded rows by id (same position); mark those whose summary changed. Returns the marked ids."""
        fresh = {row.id: row for row in rows}
        changed: set[str] = set()
        for window in self._windows.values():
            for i, old in enumerate(window):
                new = fresh.get(old.id)
                if new is not None and new != old:
                    window[i] = new
                    changed.add(old.id)
        self.changed = changed
        self._strips.clear()
        self._strip_rows.clear()
        if changed:
            timer = self._mark_timer
            if timer is not None:
                timer.stop()  # type: ignore[attr-defined]
            self._mark_timer = self.set_timer(MARK_HOLD_S, self.clear_marks)
        self.refresh()
        self.post_message(self.RowsUpdated(frozenset(changed)))
        return frozenset(changed)

    def clear_marks(self) -> None:
        self._mark_timer = None
        if self.changed:
            self.changed = set()
            self._strips.clear()
            self._strip_rows.clear()
            self.refresh()

    # --- geometry ---------------------------------------------------------------------------------------------

    def _visible_range(self) -> tuple[int, int]:
        total = self.total or 0
        first = int(self.scroll_offset.y)
        last = min(total - 1, first + self._page_rows - 1) if total else first + self._page_rows - 1
        return first, max(first, last)

    def _set_total_rows(self, total: int) -> None:
        width = self.scrollable_content_region.width or self.size.width
        self.virtual_size = Size(width, total + 1)

    def on_resize(self, event: events.Resize) -> None:
        self._layout = None
        self._set_total_rows(self.total or 0)
        self._request_visible()

    # --- reading windows --------------------------------------------------------------------------------------

    def _missing_windows(self) -> list[int]:
        if self.sd is None or self.query_spec is None:
            return []
        first, last = self._visible_range()
        if self.total is not None:
            if self.total == 0:
                return []
            last = min(last, self.total - 1)
        windows = range(first // WINDOW, last // WINDOW + 1)
        return [w for w in windows if w not in self._windows]

    def _request_visible(self) -> None:
        missing = self._missing_windows()
        for w in range(int(self.scroll_offset.y) // WINDOW, self._visible_range()[1] // WINDOW + 1):
            if w in self._windows:
                self._windows.move_to_end(w)
        if not missing or self.sd is None or self.query_spec is None:
            return
        request = WindowRequest(self.generation, missing[0] * WINDOW, (missing[-1] - missing[0] + 1) * WINDOW)
        pending = self._pending
        if (
            pending is not None
            and pending.generation == request.generation
            and pending.offset <= request.offset
            and pending.offset + pending.limit >= request.offset + request.limit
        ):
            return
        self._pending = request
        self._read_window(self.sd, self.query_spec, request)

    @work(thread=True, exclusive=True, group="session-window", exit_on_error=False, description="Read sessions")
    def _read_window(self, sd: SessionDir, query: ListQuery, request: WindowRequest) -> None:
        if get_current_worker().is_cancelled:
            return
        try:
            from store.mothx.sessions import list_sessions

            page = list_sessions(sd, query.flt, query.sort, query.descending, offset=request.offset, limit=request.limit)
        except Exception as exc:  # noqa: BLE001 - any failure becomes one line on screen, never a stuck list
            self.post_message(SessionWindowFailed(request, describe_error(exc)))
            return
        self.post_message(SessionWindowLoaded(request, list(page.rows), page.total))

    @on(SessionWindowLoaded)
    def _window_loaded(self, message: SessionWindowLoaded) -> None:
        message.stop()
        request = message.request
        if request.generation != self.generation:
            return  # a stale answer to an older query
        if self._pending == request:
            self._pending = None
        rows = message.rows
        for i in range(0, max(len(rows), 1), WINDOW):
            index = (request.offset + i) // WINDOW
            chunk = rows[i : i + WINDOW]
            if chunk or i == 0:
                self._windows[index] = chunk
                self._windows.move_to_end(index)
        while len(self._windows) > CACHE_WINDOWS:
            self._windows.popitem(last=False)
        if message.total != self.total:
            self.total = message.total
            self._set_total_rows(message.total)
            if self.cursor >= message.total:
                self.cursor = max(0, message.total - 1)
            self.post_message(self.Counted(message.total, self.generation))
        self.refresh()
        self.call_after_refresh(self._request_visible)

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        """A read failed outside its own error path (the app notifies it): "Loading sessions…" ends here too."""
        if message.group == "session-window":
            self._pending = None
            self.error = message.reason
            if self.total is None:
                self.total = 0
                self._set_total_rows(0)
            self.refresh()
        elif message.group == "session-rows":
            self._live_running = False

    @on(SessionWindowFailed)
    def _window_failed(self, message: SessionWindowFailed) -> None:
        message.stop()
        if message.request.generation != self.generation:
            return
        if self._pending == message.request:
            self._pending = None
        self.error = message.error
        if self.total is None:
            self.total = 0
            self._set_total_rows(0)
        self.refresh()
        self.post_message(self.Failed(message.error))

    # --- cursor -----------------------------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()

    def validate_cursor(self, value: int) -> int:
        total = self.total or 0
        return max(0, min(value, total - 1)) if total else 0

    def _scroll_cursor_into_view(self) -> None:
        top = int(self.scroll_offset.y)
        rows = self._page_rows
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if round(old) != round(new):
            self._request_visible()

    def _row_count(self) -> int:
        return self.total or 0

    def _opened(self, row: SessionSummary) -> SessionList.Opened:
        return self.Opened(row.id)

    def _forget_styles(self) -> None:
        self._styles = None
        self._strips.clear()
        self._strip_rows.clear()

    def _get_styles(self) -> _Styles:
        if self._styles is None:
            base = self.rich_style
            part = self.get_component_rich_style
            self._styles = _Styles(
                base=base,
                header=base + part("session-list--header"),
                cursor=base + part("session-list--cursor" if self.has_focus else "session-list--cursor-blurred"),
                dim=part("session-list--dim", partial=True),
                fork=part("session-list--fork", partial=True),
                run=part("session-list--run", partial=True),
                run_waiting=part("session-list--run-waiting", partial=True),
                run_problem=part("session-list--run-problem", partial=True),
                pinned=part("session-list--pinned", partial=True),
                placeholder=part("session-list--placeholder", partial=True),
                changed=base + part("session-list--changed"),
            )
        return self._styles

    # --- drawing ----------------------------------------------------------------------------------------------

    def _columns(self, width: int) -> list[Column]:
        if self._layout is None or self._layout.width != width:
            self._layout = _Layout(width, layout_columns(width))
        return self._layout.columns

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        styles = self._get_styles()
        base = styles.base
        if y == 0:
            return self._header_strip(width, styles.header)
        total = self.total
        index = int(self.scroll_offset.y) + y - 1
        placeholder = base + styles.placeholder
        if total is None:
            text = "  Opening…" if self.sd is None else "  Loading sessions…"
            return Strip([Segment(fit(text, width), placeholder)]) if y == 1 else Strip.blank(width, base)
        if total == 0:
            if y == 1:
                return Strip([Segment(fit("  " + (self.error or self.empty_text), width), placeholder)])
            return Strip.blank(width, base)
        if index >= total:
            return Strip.blank(width, base)
        row = self.row_at(index)
        is_cursor = index == self.cursor
        line_style = styles.cursor if is_cursor else base
        if not is_cursor and row is not None and row.id in self.changed:
            line_style = styles.changed
        if row is None:
            return Strip([Segment(fit("  …", width), line_style + styles.placeholder)])
        key = (row.id, row.last_active_at, is_cursor, width)
        strip = self._strips.get(key)
        if strip is None or self._strip_rows.get(key) is not row:
            strip = self._row_strip(row, width, line_style, is_cursor)
            self._strips[key] = strip
            self._strip_rows[key] = row
            if len(self._strips) > STRIP_CACHE:
                old, _ = self._strips.popitem(last=False)
                self._strip_rows.pop(old, None)
        else:
            self._strips.move_to_end(key)
        return strip

    def _header_strip(self, width: int, style: Style) -> Strip:
        parts = [" " * GUTTER]
        for col in self._columns(width):
            parts.append(fit(col.title, col.width, col.align))
            parts.append(" ")
        return Strip([Segment(fit("".join(parts), width), style)])

    def _row_strip(self, row: SessionSummary, width: int, line_style: Style, is_cursor: bool) -> Strip:
        styles = self._get_styles()
        segments: list[Segment] = [
            Segment("▌" if is_cursor else " ", line_style),
            Segment("*" if row.pinned else " ", line_style + styles.pinned),
        ]
        for col in self._columns(width):
            style = line_style
            if col.key == "title":
                if row.title:
                    text = one_line(row.title)
                else:
                    text = one_line(row.preview) or "(no messages)"
                    style = line_style + styles.dim
            elif col.key == "id":
                text = one_line(row.id[:8])
            elif col.key == "cwd":
                text = shown_path(row.cwd)
                if cell_len(text) > col.width:  # keep the end of a long path: it names the project
                    text = "…" + text[-(col.width - 1) :]
            elif col.key == "channel":
                text = one_line(row.channel_type)
            elif col.key == "messages":
                text = str(row.message_count)
            elif col.key == "last_active":
                text = utc_minutes(row.last_active_at or row.timestamp)
            elif col.key == "fork":
                text = fork_label(row)
                style = line_style + styles.fork
            elif col.key == "run":
                text = run_label(row)
                style = line_style + getattr(styles, run_style_key(row))
            else:
                text = ""
            segments.append(Segment(fit(text, col.width, col.align), style))
            segments.append(Segment(" ", line_style))
        strip = Strip(segments)
        return strip.crop_extend(0, width, line_style)
