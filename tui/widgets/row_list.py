"""``RowList[T]``: the one Line-API list widget every list of the app is drawn with.

A list supplies three things and nothing more: **columns** (:class:`~tui.widgets.row_columns.Column` values,
laid out by :func:`~tui.widgets.row_columns.fit`), **cells** (the columns' cell functions; a ``str`` cell is
data, always drawn as plain one-line text, never markup: :func:`~tui.widgets.row_columns.cell_text`), and **a
source** (a :class:`~tui.widgets.row_sources.RowSource` read by keyset a page at a time; ready-made:
``ListSource``, ``OffsetSource``, ``ChainSource``). Columns and cells are described in
:mod:`tui.widgets.row_columns`, sources in :mod:`tui.widgets.row_sources`; every one of those names is also
importable from this module.

The widget owns the rest: the header line, the cursor and its keys, paging, clicks (a click moves the cursor,
a double click or ``enter`` posts :class:`RowList.Selected`), :class:`RowList.Highlighted` when the cursor's
row changes, the styles (component classes ``row-list--*`` using theme variables; nothing assumes a colour is
set, so ``NO_COLOR`` works), a strip cache (:class:`textual.cache.LRUCache`, dropped on resize, focus, theme
and data changes), rows marked as changed for one refresh (:meth:`RowList.mark_changed`), live re-reads of
named rows (:meth:`RowList.refresh_rows`) and :meth:`RowList.reload` keeping the cursor on the same row.

Reading. Pages are read in a thread worker (``exclusive`` in its group: a newer read cancels an older one)
that only posts a :class:`PageLoaded` / :class:`PageFailed` message; one handler applies it. Every read
carries the list's generation (bumped by :meth:`RowList.set_source` / :meth:`RowList.reload`) and its own
sequence number, and any answer that is not the one awaited is dropped. The widget holds a **window** of rows
around the cursor: when the view comes within a screen of either end of the window and the source has more,
the next page is read; a reversible source's window is trimmed at the far end to :attr:`RowList.WINDOW_PAGES`
pages, so memory and the cost of a read grow with the screen, never with the table. ``G`` on a reversible
source reads the last page directly (:meth:`RowSource.last`): a jump to the end of a million rows is one
query. A forward-only source keeps what it read, up to :attr:`RowList.DISPLAY_CAP` rows, and the count reads
"2,000 of >2,000" (:meth:`RowList.count_text`). A failed read is one line on screen (and a
:class:`RowList.Failed` message), never a spinner forever; "Loading…" shows only until the first page or an
error arrives; an empty list shows the caller's ``empty_text``.

Keys. The widget defines the actions ``cursor_down``, ``cursor_up``, ``cursor_top``, ``cursor_bottom``,
``page_down``, ``page_up``, ``select`` (and ``open``, the same as ``select``, the name the registry's
``enter`` bindings use); it has no bindings of its own. Each list sets ``BINDINGS`` from the app's one
registry: ``BINDINGS = actions.bindings("session-list")``.

Writing a list with it: subclass ``RowList[Row]``, set ``BINDINGS`` from the registry, return the columns from
``make_columns()`` (or pass ``columns=``), and give it a source with ``set_source(...)``.
:mod:`tui.widgets.session_list` (a keyset source over the store), :mod:`tui.widgets.run_list` (a chain of two
keyset sources) and :mod:`tui.widgets.health_list` (a small ``ListSource``) are complete examples.

The screen listens to ``RowList.Highlighted`` / ``RowList.Selected`` / ``RowList.Loaded`` /
``RowList.Failed`` (``@on(RowList.Selected, "#sessions")``: ``message.control`` is the list), reads
``lst.selected``, ``lst.count_text()``, and calls ``reload()`` (refresh, cursor kept), ``refresh_rows(ids)``
(live hint: re-read those rows, mark the changed ones), ``show_message(text)`` (nothing to show, and why).

``row_style(row)`` (override) names a component class for the whole row (``"damaged"`` is
``row-list--damaged``); a column's ``style(row)`` names one for its cell. A bare name ``"warn"`` means
``row-list--warn``; a name with ``--`` is used as it is (a subclass may add its own ``COMPONENT_CLASSES``).
A subclass whose cells read a clock calls :meth:`RowList.refresh_cells` on its timer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Literal, TypeVar

from rich.style import Style
from textual import events, on, work
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from store.safetext import one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.widgets.row_columns import GAP, GUTTER, Column, cell_text, fit, fit_text
from tui.widgets.row_reads import PageFailed, PageLoaded, Read, RowsReread, describe
from tui.widgets.row_sources import ChainSource, Key, ListSource, OffsetSource, Page, RowSource
from tui.widgets.row_strips import ListStyles, header_strip, message_strip, row_strip

T = TypeVar("T")

# --- the widget ------------------------------------------------------------------------------------------------



@dataclass
class ListMessage(Message):
    """What every message of a :class:`RowList` carries: the list, as the message's ``control`` (so
    ``@on(RowList.Selected, "#id")`` matches)."""

    row_list: RowList[Any]

    @property
    def control(self) -> RowList[Any]:
        return self.row_list

class RowList(ReportsWorkerFailures, ScrollView, Generic[T], can_focus=True, inherit_bindings=False):
    """Rows of a :class:`RowSource` under a header line; the cursor row is highlighted. See the module doc."""

    BINDINGS: ClassVar[list[BindingType]] = []

    PAGE_SIZE: ClassVar[int] = 100
    """Rows per read."""
    WINDOW_PAGES: ClassVar[int] = 5
    """A reversible source's window is trimmed to this many pages."""
    DISPLAY_CAP: ClassVar[int] = 2000
    """A forward-only source stops being read after this many rows ("2,000 of >2,000")."""
    STRIP_CACHE: ClassVar[int] = 400
    MARK_HOLD_S: ClassVar[float | None] = None
    """Marks of changed rows are cleared after this many seconds (None: they stay until the next marks)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "row-list--header",
        "row-list--cursor",
        "row-list--cursor-blurred",
        "row-list--changed",
        "row-list--damaged",
        "row-list--placeholder",
        "row-list--error",
        "row-list--mark",
        "row-list--dim",
        "row-list--muted",
        "row-list--good",
        "row-list--warn",
        "row-list--bad",
        "row-list--accent",
        "row-list--secondary",
    }

    DEFAULT_CSS = """
    RowList {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-gutter: stable;
    }
    RowList > .row-list--header { text-style: bold; color: $primary; background: $panel; }
    RowList > .row-list--cursor { background: $primary 40%; text-style: bold; }
    RowList > .row-list--cursor-blurred { background: $primary 15%; }
    RowList > .row-list--changed { background: $warning 20%; }
    RowList > .row-list--damaged { color: $error; }
    RowList > .row-list--placeholder { color: $foreground-muted; }
    RowList > .row-list--error { color: $error; text-style: bold; }
    RowList > .row-list--mark { color: $warning; }
    RowList > .row-list--dim { color: $foreground-muted; text-style: italic; }
    RowList > .row-list--muted { color: $foreground-muted; }
    RowList > .row-list--good { color: $success; }
    RowList > .row-list--warn { color: $warning; }
    RowList > .row-list--bad { color: $error; text-style: bold; }
    RowList > .row-list--accent { color: $accent; }
    RowList > .row-list--secondary { color: $secondary; }
    """

    # --- public messages --------------------------------------------------------------------------------------

    @dataclass
    class Highlighted(ListMessage):
        """The cursor's row changed (another row, or the same row re-read); ``row`` is None when empty."""

        row: Any

    @dataclass
    class Selected(ListMessage):
        """``enter`` or a double click on ``row``."""

        row: Any

    @dataclass
    class Loaded(ListMessage):
        """Rows arrived (a page, a reload or a re-read): counts shown elsewhere may change. ``changed``: the
        idents marked by this update."""

        changed: frozenset[Key] = frozenset()

    @dataclass
    class Failed(ListMessage):
        """A read failed; ``error`` is one safe line (also shown in the list)."""

        error: str

    # --- construction -----------------------------------------------------------------------------------------

    def __init__(
        self,
        source: RowSource[T] | None = None,
        *,
        columns: Sequence[Column[T]] | None = None,
        empty_text: str = "No rows.",
        loading_text: str = "Loading…",
        page_size: int | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.columns: tuple[Column[T], ...] = tuple(columns if columns is not None else self.make_columns())
        self.empty_text = empty_text
        self.loading_text = loading_text
        self.page_size = max(1, page_size or self.PAGE_SIZE)
        self.source: RowSource[T] | None = None
        self.generation = 0
        self.rows: list[T] = []  # the window
        self.has_before = False  # the source has rows before the window
        self.has_after = False  # ... after it
        self.loaded = False  # a page (or an error) arrived for this generation
        self.error = ""
        self.message = ""  # shown instead of rows (show_message)
        self.total: int | None = None
        self.changed: frozenset[Key] = frozenset()
        self._cursor = 0
        self._seq = 0
        self._pending: Read | None = None
        self._reread_pending: set[Key] = set()
        self._reread_running = False
        self._highlighted: tuple[Key, Any] | None = None
        self._styles: ListStyles | None = None
        self._layout: tuple[int, list[int | None]] | None = None
        self._strips: LRUCache[tuple[Key, bool, bool, int], Strip] = LRUCache(self.STRIP_CACHE)
        self._mark_timer: Timer | None = None
        self._idents: dict[Key, int] | None = None
        self._ready = False
        self._initial: tuple[RowSource[T] | None, Page[T] | None, int | None] | None = (source, None, None)

    def on_mount(self) -> None:
        self._ready = True
        if self._initial is not None:
            source, first_page, total = self._initial
            self._initial = None
            if source is not None:
                self.set_source(source, first_page=first_page, total=total)

    def make_columns(self) -> Sequence[Column[T]]:
        """The columns, when none are passed to the constructor (override in a list)."""
        return ()

    def set_columns(self, columns: Sequence[Column[T]]) -> None:
        self.columns = tuple(columns)
        self._layout = None
        self._strips.clear()
        self.refresh()

    # --- hooks ------------------------------------------------------------------------------------------------

    def row_style(self, row: T) -> str | None:
        """A component class for the whole row (``"damaged"``: ``row-list--damaged``), or None."""
        return None

    # --- data -------------------------------------------------------------------------------------------------

    def set_source(
        self,
        source: RowSource[T] | None,
        *,
        keep_cursor: bool = False,
        first_page: Page[T] | None = None,
        total: int | None = None,
    ) -> None:
        """Show ``source`` (None: nothing, ``loading_text``). ``keep_cursor`` keeps the cursor on the same row when
        the new source still has it (a refresh of the same query); else the list starts at its first row.

        ``first_page`` is ``source.first(page_size)`` read already (e.g. while the screen was composed), with its
        ``total`` when known: it is shown at once and nothing is read now."""
        if not self._ready:  # applied on mount (reads need the app)
            self._initial = (source, first_page, total)
            return
        self.source = source
        self.message = ""
        if keep_cursor and self.loaded and self.rows and first_page is None:
            self.reload(keep_cursor=True)
            return
        self._bump()
        self.rows = []
        self._idents = None
        self.has_before = self.has_after = False
        self.loaded = False
        self.error = ""
        self.total = None
        self.changed = frozenset()
        self._cursor = 0
        self._strips.clear()
        self._set_virtual_size()
        self.scroll_to(y=0, animate=False, immediate=True)
        if source is not None:
            read = Read(self.generation, self._next_seq(), "first", self.page_size, replace=True, count=True,
                        cursor_to="first")
            if first_page is not None:
                self._pending = read
                self._page_loaded(PageLoaded(read, first_page, total))
                return
            self._start(read)
        self.refresh()

    @property
    def busy(self) -> bool:
        """A page or a re-read is on its way."""
        return self._pending is not None or self._reread_running

    def show_message(self, text: str) -> None:
        """Show ``text`` (an error, or why there is nothing) instead of rows; reads still on their way are
        dropped."""
        self._initial = None
        self.source = None
        self._bump()
        self.rows = []
        self._idents = None
        self.has_before = self.has_after = False
        self.loaded = True
        self.error = ""
        self.message = one_line(text)
        self.total = 0
        self._cursor = 0
        self._strips.clear()
        self._set_virtual_size()
        self.refresh()
        self._post_highlight()

    def reload(self, keep_cursor: bool = True, *, marks: Iterable[Key] = ()) -> None:
        """Re-read the window. ``keep_cursor``: the cursor stays on the same row (on the same screen line) when it
        still exists, else at the same position; ``marks``: idents whose rows are marked when the re-read shows
        them changed.

        A reversible source reads one page from the row above the screen; a forward-only source reads what it
        showed again from its start, in one call of at most :attr:`DISPLAY_CAP` rows (it cannot read back)."""
        source = self.source
        if source is None:
            return
        if not keep_cursor or not self.rows:
            self.set_source(source)
            return
        self._bump()
        top = int(self.scroll_offset.y)
        cur = self._cursor
        keep = source.ident(self.rows[cur]) if cur < len(self.rows) else None
        read = Read(self.generation, self._next_seq(), "first", self.page_size, replace=True, count=True, keep=keep,
                    keep_line=cur - top, keep_index=cur, marks=frozenset(marks))
        if not source.reversible:
            pages = -(-len(self.rows) // self.page_size)
            read = replace(read, limit=max(self.page_size, min(self.DISPLAY_CAP, pages * self.page_size)))
        elif self.has_before or cur >= self.page_size - self._page_rows:
            anchor = max(0, min(top, cur) - 1)
            read = replace(read, kind="after", key=source.key(self.rows[anchor]), keep_index=cur - anchor - 1)
        self._start(read)

    def refresh_rows(self, idents: Iterable[Key]) -> None:
        """Re-read the named rows that are in the window and replace them in place (cursor and scroll kept);
        the ones that changed are marked. A source that cannot read single rows re-reads the window."""
        source = self.source
        if source is None or not self.loaded:
            return
        shown = self._ident_index()
        wanted = {ident for ident in idents if ident in shown}
        if not wanted:
            return
        self._reread_pending |= wanted
        if not self._reread_running:
            self._start_reread()

    def refresh_cells(self) -> None:
        """Draw the rows again (cells that depend on the time, or on state the list holds outside its rows)."""
        self._strips.clear()
        self.refresh()

    def mark_changed(self, idents: Iterable[Key]) -> None:
        """Mark the rows of ``idents`` as changed until the next marks (or :attr:`MARK_HOLD_S`)."""
        self.changed = frozenset(idents)
        self._strips.clear()
        if self._mark_timer is not None:
            self._mark_timer.stop()
            self._mark_timer = None
        if self.changed and self.MARK_HOLD_S is not None:
            self._mark_timer = self.set_timer(self.MARK_HOLD_S, self.clear_marks)
        self.refresh()

    def clear_marks(self) -> None:
        self._mark_timer = None
        if self.changed:
            self.changed = frozenset()
            self._strips.clear()
            self.refresh()

    # --- what is shown ----------------------------------------------------------------------------------------

    @property
    def cursor(self) -> int:
        """The cursor's index in the window (:attr:`rows`)."""
        return self._cursor

    @cursor.setter
    def cursor(self, value: int) -> None:
        self._move_to(value)

    @property
    def selected(self) -> T | None:
        return self.rows[self._cursor] if 0 <= self._cursor < len(self.rows) else None

    def row_of(self, ident: Key) -> T | None:
        index = self._ident_index().get(ident)
        return None if index is None else self.rows[index]

    def visible_rows(self) -> list[T]:
        top = int(self.scroll_offset.y)
        return self.rows[top:top + self._page_rows]

    @property
    def capped(self) -> bool:
        """A forward-only source has more rows than the display cap."""
        return self.has_after and not self._reversible and len(self.rows) >= self.DISPLAY_CAP

    def count_text(self) -> str:
        """How many rows: ``"10,000"`` when known; ``"2,000 of >2,000"`` when only a lower bound is."""
        if self.total is not None:
            return f"{self.total:,}"
        n = len(self.rows)
        if self.has_before or self.has_after:
            return f"{n:,} of >{n:,}"
        return f"{n:,}"

    # --- reading ----------------------------------------------------------------------------------------------

    @property
    def _reversible(self) -> bool:
        return self.source is not None and self.source.reversible

    def _bump(self) -> None:
        self.generation += 1
        self._pending = None
        self._reread_pending.clear()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _start(self, read: Read) -> None:
        source = self.source
        if source is None:
            return
        self._pending = read
        self._read_page(source, read)

    @work(thread=True, exclusive=True, group="row-list-page", exit_on_error=False, description="Read rows")
    def _read_page(self, source: RowSource[T], read: Read) -> None:
        try:
            if read.kind == "first":
                page = source.first(read.limit)
            elif read.kind == "last":
                page = source.last(read.limit)
            elif read.kind == "after":
                page = source.after(read.key, read.limit)
            else:
                page = source.before(read.key, read.limit)
            total = source.total() if read.count else None
        except Exception as exc:  # noqa: BLE001 - any failure becomes one line on screen, never a stuck list
            self.post_message(PageFailed(read, describe(exc)))
            return
        self.post_message(PageLoaded(read, page, total))

    @on(PageLoaded)
    def _page_loaded(self, message: PageLoaded) -> None:
        message.stop()
        read = message.read
        if read.generation != self.generation or self._pending != read or self.source is None:
            return  # stale: an older query, or a read that was superseded
        self._pending = None
        source = self.source
        rows: list[T] = list(message.page.rows)
        if read.count:
            self.total = message.total
        self.error = ""
        changed: frozenset[Key] = frozenset()
        if read.replace:
            old = {source.ident(row): row for row in self.rows} if read.marks else {}
            self.rows = rows
            self._idents = None
            if read.kind == "first":
                self.has_before, self.has_after = False, message.page.more
            elif read.kind == "last":
                self.has_before, self.has_after = message.page.more, False
            else:  # "after" an anchor row: the anchor is before the window
                self.has_before, self.has_after = True, message.page.more
            if read.marks:
                changed = frozenset(
                    ident for ident in read.marks if ident in old and (new := self.row_of(ident)) is not None
                    and new != old[ident]
                )
            self._strips.clear()
            self._set_virtual_size()
            self._place_cursor(read)
        elif read.kind == "after":
            self._extend_end(rows, message.page.more)
        else:
            self._extend_start(rows, message.page.more)
        self.loaded = True
        if changed:
            self.mark_changed(changed)
        self.refresh()
        self._post_highlight()
        self.post_message(self.Loaded(self, changed))
        self.call_after_refresh(self._read_edges)

    @on(PageFailed)
    def _page_failed(self, message: PageFailed) -> None:
        message.stop()
        read = message.read
        if read.generation != self.generation or self._pending != read:
            return
        self._pending = None
        self.loaded = True
        self.error = message.error
        if read.replace:
            self.has_after = self.has_before = False  # do not read on from a window that was not replaced
        elif read.kind == "after":
            self.has_after = False
        else:
            self.has_before = False
        self._strips.clear()
        self._set_virtual_size()
        self.refresh()
        self.post_message(self.Failed(self, message.error))

    def _place_cursor(self, read: Read) -> None:
        n = len(self.rows)
        if read.cursor_to == "last":
            index = n - 1
        elif read.cursor_to == "first":
            index = 0
        else:
            found = self._ident_index().get(read.keep) if read.keep is not None else None
            index = found if found is not None else read.keep_index
        index = max(0, min(index, n - 1)) if n else 0
        self._cursor = index
        if read.cursor_to == "last":
            top = max(0, n - self._page_rows)
        elif read.cursor_to == "first":
            top = 0
        else:
            top = max(0, index - max(0, min(read.keep_line, self._page_rows - 1)))
        self.scroll_to(y=top, animate=False, immediate=True)
        self._scroll_cursor_into_view()

    def _extend_end(self, rows: list[T], more: bool) -> None:
        source = self.source
        assert source is not None
        known = self._ident_index()
        rows = [row for row in rows if source.ident(row) not in known]
        self.rows.extend(rows)
        self.has_after = more and bool(rows)
        if self._reversible:
            limit = self.WINDOW_PAGES * self.page_size
            top = int(self.scroll_offset.y)
            drop = min(len(self.rows) - limit, top - self._margin)
            if drop > 0:  # (a cursor left above the screen by the mouse wheel moves to the first row kept)
                del self.rows[:drop]
                self.has_before = True
                self._cursor = max(0, self._cursor - drop)
                self._set_virtual_size()
                self.scroll_to(y=top - drop, animate=False, immediate=True)
        elif len(self.rows) >= self.DISPLAY_CAP:
            if len(self.rows) > self.DISPLAY_CAP:
                del self.rows[self.DISPLAY_CAP:]
                self.has_after = True
        self._idents = None
        self._set_virtual_size()

    def _extend_start(self, rows: list[T], more: bool) -> None:
        source = self.source
        assert source is not None
        known = self._ident_index()
        rows = [row for row in rows if source.ident(row) not in known]
        self.has_before = more and bool(rows)
        top = int(self.scroll_offset.y)
        self.rows[:0] = rows
        self._cursor += len(rows)
        top += len(rows)
        limit = self.WINDOW_PAGES * self.page_size
        bottom = top + self._page_rows
        drop = min(len(self.rows) - limit, len(self.rows) - bottom - self._margin)
        if drop > 0:
            del self.rows[len(self.rows) - drop:]
            self.has_after = True
            self._cursor = min(self._cursor, len(self.rows) - 1)
        self._idents = None
        self._set_virtual_size()
        self.scroll_to(y=top, animate=False, immediate=True)

    @property
    def _margin(self) -> int:
        """Rows left beyond the screen before the next page is read."""
        return max(self._page_rows, 10)

    def _read_edges(self) -> None:
        """Read the next page when the view is within a screen of either end of the window."""
        source = self.source
        if source is None or self._pending is not None or not self.rows or not self.loaded:
            return
        top = int(self.scroll_offset.y)
        bottom = top + self._page_rows
        if self.has_after and len(self.rows) - bottom < self._margin and not self.capped:
            self._start(Read(self.generation, self._next_seq(), "after", self.page_size,
                             key=source.key(self.rows[-1])))
        elif self.has_before and self._reversible and top < self._margin:
            self._start(Read(self.generation, self._next_seq(), "before", self.page_size,
                             key=source.key(self.rows[0])))

    # --- re-reading named rows ----------------------------------------------------------------------------------

    def _start_reread(self) -> None:
        source = self.source
        if source is None or not self._reread_pending:
            return
        batch = tuple(self._reread_pending)
        self._reread_pending = set()
        self._reread_running = True
        self._reread(source, self.generation, batch)

    @work(thread=True, exclusive=False, group="row-list-reread", exit_on_error=False, description="Re-read rows")
    def _reread(self, source: RowSource[T], generation: int, idents: tuple[Key, ...]) -> None:
        try:
            found = source.reread(idents)
        except Exception as exc:  # noqa: BLE001 - the rows keep what they showed; the next refresh reads again
            self.post_message(RowsReread(generation, None, idents, describe(exc)))
            return
        self.post_message(RowsReread(generation, found, idents))

    @on(RowsReread)
    def _rows_reread(self, message: RowsReread) -> None:
        message.stop()
        self._reread_running = False
        if message.generation == self.generation and self.source is not None and not message.error:
            found = message.rows
            if found is None:
                self.reload(keep_cursor=True, marks=message.idents)
            elif any(row is None for row in found.values()):
                self.reload(keep_cursor=True, marks=[k for k, v in found.items() if v is not None])
            else:
                self.apply_rows(found)
        if self._reread_pending:
            self._start_reread()

    def apply_rows(self, fresh: Mapping[Key, T | None]) -> frozenset[Key]:
        """Replace rows of the window by ident (same place) and mark those that changed; returns them."""
        index = self._ident_index()
        changed: set[Key] = set()
        for ident, row in fresh.items():
            i = index.get(ident)
            if i is not None and row is not None and row != self.rows[i]:
                self.rows[i] = row
                changed.add(ident)
        self.mark_changed(changed)
        self._post_highlight()
        self.post_message(self.Loaded(self, frozenset(changed)))
        return frozenset(changed)

    def _ident_index(self) -> dict[Key, int]:
        if self._idents is None:
            source = self.source
            self._idents = {} if source is None else {source.ident(row): i for i, row in enumerate(self.rows)}
        return self._idents

    # --- cursor and keys ----------------------------------------------------------------------------------------

    @property
    def _page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # the header line is not a row

    def _move_to(self, index: int) -> None:
        n = len(self.rows)
        index = max(0, min(index, n - 1)) if n else 0
        if index != self._cursor:
            self._cursor = index
            self.refresh()
        self._scroll_cursor_into_view()
        self._post_highlight()
        self._read_edges()

    def _scroll_cursor_into_view(self) -> None:
        top = int(self.scroll_offset.y)
        rows = self._page_rows
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True)
        elif self._cursor >= top + rows:
            self.scroll_to(y=self._cursor - rows + 1, animate=False, immediate=True)
        if self._cursor == len(self.rows) - 1 and self.capped:  # show the line that says the rest is not read
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    def _post_highlight(self) -> None:
        """Post :class:`Highlighted` when the cursor's row is another row, or the same row with other facts."""
        if not self.loaded:
            return
        row = self.selected
        source = self.source
        ident = source.ident(row) if row is not None and source is not None else None
        last = self._highlighted
        self._highlighted = (ident, row)
        if last is not None and last[0] == ident and (last[1] is row or last[1] == row):
            return
        self.post_message(self.Highlighted(self, row))

    def action_cursor_down(self) -> None:
        self._move_to(self._cursor + 1)

    def action_cursor_up(self) -> None:
        self._move_to(self._cursor - 1)

    def action_page_down(self) -> None:
        self._move_to(self._cursor + self._page_rows)

    def action_page_up(self) -> None:
        self._move_to(self._cursor - self._page_rows)

    def action_cursor_top(self) -> None:
        if self.has_before:
            self._jump("first")
        else:
            self._move_to(0)

    def action_cursor_bottom(self) -> None:
        if self.has_after and self._reversible:
            self._jump("last")
        else:
            self._move_to(len(self.rows) - 1)

    def _jump(self, where: Literal["first", "last"]) -> None:
        self._start(Read(self.generation, self._next_seq(), where, self.page_size, replace=True, cursor_to=where))

    def action_select(self) -> None:
        row = self.selected
        if row is not None:
            self.post_message(self.Selected(self, row))

    def action_open(self) -> None:
        """``enter`` in the registry's list scopes is bound to ``open``: the same as ``select``."""
        self.action_select()

    def on_click(self, event: events.Click) -> None:
        if event.y < 1 or not self.rows:
            return
        index = int(self.scroll_offset.y) + event.y - 1
        if index < len(self.rows):
            if index == self._cursor and event.chain >= 2:
                self.action_select()
            self._move_to(index)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self._read_edges()

    # --- styles, geometry -----------------------------------------------------------------------------------------

    def on_focus(self) -> None:
        self._forget_styles()
        self.refresh()

    def on_blur(self) -> None:
        self._forget_styles()
        self.refresh()

    def notify_style_update(self) -> None:
        self._forget_styles()
        super().notify_style_update()

    def _forget_styles(self) -> None:
        self._styles = None
        self._strips.clear()

    def on_resize(self, event: events.Resize) -> None:
        self._layout = None
        self._strips.clear()
        self._set_virtual_size()
        self.call_after_refresh(self._read_edges)

    def _set_virtual_size(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        self.virtual_size = Size(width, len(self.rows) + 1 + (1 if self.capped else 0))  # header, rows, cap line

    def _get_styles(self) -> ListStyles:
        if self._styles is None:
            base = self.rich_style
            part = self.get_component_rich_style
            self._styles = ListStyles(
                base=base,
                header=base + part("row-list--header"),
                cursor=base + part("row-list--cursor" if self.has_focus else "row-list--cursor-blurred"),
                changed=base + part("row-list--changed"),
                placeholder=base + part("row-list--placeholder", partial=True),
                error=base + part("row-list--error", partial=True),
            )
        return self._styles

    def _part(self, name: str) -> Style:
        styles = self._get_styles()
        style = styles.parts.get(name)
        if style is None:
            full = name if "--" in name else f"row-list--{name}"
            try:
                style = self.get_component_rich_style(full, partial=True)
            except KeyError:
                style = Style.null()
            styles.parts[name] = style
        return style

    def _widths(self, width: int) -> list[int | None]:
        if self._layout is None or self._layout[0] != width:
            self._layout = (width, fit(self.columns, max(0, width - GUTTER)))
        return self._layout[1]

    # --- drawing ----------------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        styles = self._get_styles()
        if y == 0:
            return self._header_strip(width, styles.header)
        rows = self.rows
        if not rows:
            if y != 1:
                return Strip.blank(width, styles.base)
            if self.error:
                return self._line(f"✗ {self.error}", width, styles.error)
            if self.message:
                return self._line(self.message, width, styles.placeholder)
            if not self.loaded:
                return self._line(self.loading_text, width, styles.placeholder)
            return self._line(self.empty_text, width, styles.placeholder)
        if self.error and y == self._page_rows:
            return self._line(f"✗ {self.error}", width, styles.error)
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(rows):
            if index == len(rows) and self.capped:
                return self._line(f"… {self.count_text()} rows shown; the rest are not read", width,
                                  styles.placeholder)
            return Strip.blank(width, styles.base)
        row = rows[index]
        source = self.source
        ident = source.ident(row) if source is not None else index
        is_cursor = index == self._cursor
        marked = ident in self.changed
        key = (ident, is_cursor, marked, width)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._row_strip(row, width, is_cursor, marked)
            self._strips.set(key, strip)
        return strip

    def _line(self, text: str, width: int, style: Style) -> Strip:
        return message_strip(text, width, style)

    def _header_strip(self, width: int, style: Style) -> Strip:
        return header_strip(self.columns, self._widths(width), width, style)

    def _row_strip(self, row: T, width: int, is_cursor: bool, marked: bool) -> Strip:
        styles = self._get_styles()
        line = styles.cursor if is_cursor else (styles.changed if marked else styles.base)
        row_class = self.row_style(row)
        if row_class:
            line = line + self._part(row_class)
        return row_strip(row, self.columns, self._widths(width), width, line=line, part=self._part,
                         console=self.app.console, is_cursor=is_cursor, marked=marked)

__all__ = [
    "GAP",
    "GUTTER",
    "ChainSource",
    "Column",
    "ListSource",
    "OffsetSource",
    "Page",
    "PageFailed",
    "PageLoaded",
    "Read",
    "RowList",
    "RowSource",
    "RowsReread",
    "cell_text",
    "fit",
    "fit_text",
]
