"""The cursor of a :class:`tui.widgets.row_list.RowList`: moving it, its keys, clicks, and ``Highlighted``.

The actions ``cursor_down``, ``cursor_up``, ``cursor_top``, ``cursor_bottom``, ``page_down``, ``page_up``,
``select`` and ``open`` (the same as ``select``); no bindings here (each list binds them from the registry).
``g`` / ``G`` past the window read the first / last page directly; moving near either end of the window reads on.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from textual import events

from tui.widgets.row_reads import Read
from tui.widgets.row_state import RowListState

T = TypeVar("T")


class RowCursor(RowListState[T]):
    """The cursor part of a row list (see the module doc)."""

    # --- cursor and keys ----------------------------------------------------------------------------------------

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


__all__ = ["RowCursor"]
