"""Keys and clicks shared by the Line-API lists (sessions, runs, checkpoints, captured sessions).

Each list draws one header line, then one row per line, and keeps a ``cursor`` reactive (clamped by its own
``validate_cursor``). The list supplies ``selected`` and an ``Opened`` message; :meth:`_row_count` and
:meth:`_opened` may be overridden where the rows are not a plain ``rows`` sequence.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.message import Message


class CursorRows:
    """Mixin for a ``ScrollView`` list: cursor movement, paging, ``enter`` and clicks (double-click opens)."""

    cursor: int
    _styles: Any
    rows: Any
    selected: Any
    scrollable_content_region: Any
    scroll_offset: Any

    def _forget_styles(self) -> None:
        """Drop what was drawn with the old styles (the cursor row looks different with and without focus)."""
        self._styles = None

    def on_focus(self) -> None:
        self._forget_styles()
        self.refresh()  # type: ignore[attr-defined]

    def on_blur(self) -> None:
        self._forget_styles()
        self.refresh()  # type: ignore[attr-defined]

    def notify_style_update(self) -> None:
        self._forget_styles()
        super().notify_style_update()  # type: ignore[misc]

    def _row_count(self) -> int:
        return len(self.rows)

    def _opened(self, row: Any) -> Message:
        return self.Opened(row)  # type: ignore[attr-defined]

    @property
    def _page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # the header line is not a row

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_top(self) -> None:
        self.cursor = 0

    def action_cursor_bottom(self) -> None:
        self.cursor = max(0, self._row_count() - 1)

    def action_page_down(self) -> None:
        self.cursor += self._page_rows

    def action_page_up(self) -> None:
        self.cursor -= self._page_rows

    def action_open(self) -> None:
        row = self.selected
        if row is not None:
            self.post_message(self._opened(row))  # type: ignore[attr-defined]

    def on_click(self, event: events.Click) -> None:
        count = self._row_count()
        if event.y < 1 or not count:
            return
        index = int(self.scroll_offset.y) + event.y - 1
        if index < count:
            if index == self.cursor and event.chain >= 2:
                self.action_open()
            self.cursor = index
