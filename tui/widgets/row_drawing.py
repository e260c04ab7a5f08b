"""Drawing a :class:`tui.widgets.row_list.RowList`: its resolved styles, its geometry, and ``render_line``.

Only the lines on screen are drawn (the Line API); each row's strip is kept in an LRU cache keyed by the row's
ident, cursor, mark and width, dropped on focus, theme and data changes. The column layout is fitted once
per width. The strips themselves are made by :mod:`tui.widgets.row_strips`.
"""

from __future__ import annotations

from typing import TypeVar

from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.strip import Strip

from tui.widgets.row_columns import GUTTER, fit
from tui.widgets.row_state import RowListState
from tui.widgets.row_strips import ListStyles, header_strip, message_strip, row_strip

T = TypeVar("T")


class RowDrawing(RowListState[T]):
    """The drawing part of a row list (see the module doc)."""

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
        # The column layout and the strips are keyed by width: nothing drawn goes stale with the size (the first
        # resize, from no size to the first one, then does not draw the first frame's rows again).
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


__all__ = ["RowDrawing"]
