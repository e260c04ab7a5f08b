"""Reading the rows of a :class:`tui.widgets.row_list.RowList`: pages in a worker, the window, re-reads.

Pages are read in a thread worker (``exclusive`` in its group: a newer read cancels an older one) that only
posts a :class:`~tui.widgets.row_reads.PageLoaded` / :class:`~tui.widgets.row_reads.PageFailed` message; one
handler applies it. Every read carries the list's generation and its own sequence number, and any answer that is
not the one awaited is dropped. The window grows at the end (``after``) or the start (``before``) when the view
comes within a screen of it, and a reversible source's window is trimmed at the far end to
:attr:`~tui.widgets.row_state.RowListState.WINDOW_PAGES` pages. Named rows are re-read in place
(:class:`~tui.widgets.row_reads.RowsReread`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from textual import on, work

from tui.widgets.row_reads import PageFailed, PageLoaded, Read, RowsReread, describe
from tui.widgets.row_sources import Key, RowSource
from tui.widgets.row_state import RowListState

T = TypeVar("T")


class RowPaging(RowListState[T]):
    """The reading part of a row list (see the module doc)."""

    # --- reading pages ------------------------------------------------------------------------------------------

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


__all__ = ["RowPaging"]
