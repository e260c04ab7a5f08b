"""Drawing the lines of a :class:`tui.widgets.row_list.RowList`: the header, one row, a one-line message.

Pure functions of the columns, their fitted widths and the styles, so the widget keeps only what to draw where
(and its strip cache). Every cell passes :func:`tui.widgets.row_columns.cell_text` (data is never markup) and is
fitted to its width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from store.safetext import one_line
from tui.widgets.row_columns import GAP, GUTTER, Align, Column, Overflow, cell_text, fit_text
from tui.widgets.row_reads import describe

T = TypeVar("T")

CURSOR_MARK = "▌"
CHANGED_MARK = "•"


@dataclass
class ListStyles:
    """The list's resolved styles (its component classes), computed once per focus / theme change."""

    base: Style
    header: Style
    cursor: Style
    changed: Style
    placeholder: Style
    error: Style
    parts: dict[str, Style] = field(default_factory=dict)


def fit_plain(plain: str, width: int, align: Align = "left", overflow: Overflow = "end") -> str:
    """:func:`~tui.widgets.row_columns.fit_text` of ``Text(plain)``, as its plain text: a text that fits is padded
    here (no ``Text`` made), one that does not is cut there."""
    if width <= 0:
        return ""
    excess = width - cell_len(plain)
    if excess < 0:
        return fit_text(Text(plain), width, align, overflow).plain
    if align == "left":
        return plain + " " * excess
    if align == "right":
        return " " * excess + plain
    left = excess // 2
    return " " * left + plain + " " * (excess - left)


def message_strip(text: str, width: int, style: Style) -> Strip:
    """One line of text (a placeholder, an error) across the list."""
    fitted = fit_text(Text(one_line(text)), max(0, width - GUTTER))
    return Strip([Segment(" " * GUTTER, style), Segment(fitted.plain, style)]).crop_extend(0, width, style)


def header_strip(columns: Sequence[Column[T]], widths: Sequence[int | None], width: int, style: Style) -> Strip:
    """The column titles of the shown columns (a width of None: the column is dropped)."""
    segments = [Segment(" " * GUTTER, style)]
    first = True
    for column, w in zip(columns, widths, strict=True):
        if w is None:
            continue
        if not first:
            segments.append(Segment(" " * GAP, style))
        first = False
        segments.append(Segment(fit_plain(one_line(column.title), w, column.align), style))
    return Strip(segments).crop_extend(0, width, style)


def row_strip(row: T, columns: Sequence[Column[T]], widths: Sequence[int | None], width: int, *, line: Style,
              part: Callable[[str], Style], console: Console, is_cursor: bool, marked: bool) -> Strip:
    """One row: the cursor and changed marks, then each shown column's cell in ``line`` plus its own style
    (``part(name)`` resolves a component class). A cell that raises shows the reason, not a crash."""
    segments = [
        Segment(CURSOR_MARK if is_cursor else " ", line),
        Segment(CHANGED_MARK if marked else " ", line + part("mark")),
    ]
    first = True
    for column, w in zip(columns, widths, strict=True):
        if w is None:
            continue
        if not first:
            segments.append(Segment(" " * GAP, line))
        first = False
        cell_style = line
        if column.style is not None:
            name = column.style(row)
            if name:
                cell_style = line + part(name)
        try:
            value = column.cell(row)
        except Exception as exc:  # noqa: BLE001 - one bad cell must not take the list down
            value = Text(f"⚠ {describe(exc)}")
            cell_style = cell_style + part("bad")
        if isinstance(value, str):  # plain data: one segment in the cell's style (what rendering it would give)
            plain = fit_plain(one_line(value), w, column.align, column.overflow)
            if plain:
                segments.append(Segment(plain, cell_style))
            continue
        text = fit_text(cell_text(value), w, column.align, column.overflow)
        for segment in text.render(console):
            if segment.text:
                seg_style = segment.style
                segments.append(Segment(segment.text, cell_style + seg_style if seg_style else cell_style))
    return Strip(segments).crop_extend(0, width, line)


__all__ = ["CHANGED_MARK", "CURSOR_MARK", "ListStyles", "fit_plain", "header_strip", "message_strip", "row_strip"]
