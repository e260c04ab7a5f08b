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
set, so ``NO_COLOR`` works), a strip cache (:class:`textual.cache.LRUCache` keyed by width too, dropped on focus,
theme and data changes), rows marked as changed for one refresh (:meth:`RowList.mark_changed`), live re-reads of
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

The widget is written in parts, each a class over :class:`~tui.widgets.row_state.RowListState` (the shared state,
the messages and what is shown): :class:`~tui.widgets.row_paging.RowPaging` (reading pages, the window, re-reads),
:class:`~tui.widgets.row_cursor.RowCursor` (the cursor and its keys) and :class:`~tui.widgets.row_drawing.RowDrawing`
(styles, geometry, the strip cache, ``render_line``); this module composes them and holds the public API.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import ClassVar, TypeVar

from textual.binding import BindingType

from store.safetext import one_line
from tui.widgets.row_columns import GAP, GUTTER, Column, cell_text, fit, fit_text
from tui.widgets.row_cursor import RowCursor
from tui.widgets.row_drawing import RowDrawing
from tui.widgets.row_paging import RowPaging
from tui.widgets.row_reads import PageFailed, PageLoaded, Read, RowsReread
from tui.widgets.row_sources import ChainSource, Key, ListSource, OffsetSource, Page, RowSource
from tui.widgets.row_state import ListMessage

T = TypeVar("T")


class RowList(RowCursor[T], RowPaging[T], RowDrawing[T], can_focus=True, inherit_bindings=False):
    """Rows of a :class:`RowSource` under a header line; the cursor row is highlighted. See the module doc."""

    BINDINGS: ClassVar[list[BindingType]] = []

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

    # --- construction ----------------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._ready = True
        if self._initial is not None:
            source, first_page, total = self._initial
            self._initial = None
            if source is not None:
                self.set_source(source, first_page=first_page, total=total)

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


__all__ = [
    "GAP",
    "GUTTER",
    "ChainSource",
    "Column",
    "Key",
    "ListMessage",
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
