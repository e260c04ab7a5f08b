"""Columns of a :class:`tui.widgets.row_list.RowList` and their layout.

A list's **columns** are :class:`Column` values (title, a cell function ``T -> str | Text``, min/max width, a
``priority`` deciding which columns drop first when the terminal is narrow, a ``grow`` weight deciding which
take the extra width when it is wide, alignment, and which end of a long value is cut); :func:`fit` gives
each column its width in a terminal of a given width.

**Cells** are what the cell functions return. A ``str`` cell is data and is always passed through
:func:`store.safetext.one_line` and drawn as plain text (never parsed as markup), so a list cannot forget the
safe-text boundary; a :class:`rich.text.Text` cell is trusted as already built from safe strings (it is
still checked, and rebuilt from its plain text if it holds a control character): :func:`cell_text`.
:func:`fit_text` pads or cuts a cell to its column's width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from rich.cells import cell_len
from rich.text import Text

from store.safetext import one_line, safe

T = TypeVar("T")
Align = Literal["left", "right"]
Overflow = Literal["end", "start"]

GAP = 1
"""Cells between two columns."""

GUTTER = 2
"""Cells left of the first column: the cursor mark and the change mark."""


@dataclass(frozen=True)
class Column(Generic[T]):
    """One column of a list.

    ``priority``: lower is kept longer; when the columns do not fit, the one with the highest priority value
    goes first (of equal ones, the rightmost). ``grow``: the column's share of the width left over once every
    kept column has its ``min_width`` (0: never wider than ``min_width``); ``max_width`` caps it (None: no cap).
    ``overflow``: ``"end"`` cuts the end of a long value (``"abcd…"``), ``"start"`` cuts its start
    (``"…/project"``), for paths and ids whose end tells most. ``style(row)``: a component class for the cell
    (``"warn"`` is ``row-list--warn``) or None.
    """

    key: str
    title: str
    cell: Callable[[T], str | Text]
    min_width: int = 4
    max_width: int | None = None
    priority: int = 0
    grow: int = 0
    align: Align = "left"
    overflow: Overflow = "end"
    style: Callable[[T], str | None] | None = None

    def __post_init__(self) -> None:
        if self.min_width < 1:
            raise ValueError(f"column {self.key!r}: min_width must be at least 1")
        if self.max_width is not None and self.max_width < self.min_width:
            raise ValueError(f"column {self.key!r}: max_width is below min_width")
        if self.grow < 0:
            raise ValueError(f"column {self.key!r}: grow must not be negative")


def fit(columns: Sequence[Column[Any]], width: int, gap: int = GAP) -> list[int | None]:
    """The width of each column in ``width`` cells (``gap`` cells between two kept columns); None: dropped.

    Columns are dropped, highest ``priority`` value first (of equal ones the rightmost), until every kept one
    has its ``min_width``. The width left over goes to the kept columns by ``grow`` weight (largest remainder;
    ties to the leftmost), none beyond its ``max_width``; what no column can take stays blank at the right.
    When not even the most important column fits, it alone gets all of ``width``.
    """
    n = len(columns)
    if n == 0 or width <= 0:
        return [None] * n
    kept = list(range(n))

    def need(indices: list[int]) -> int:
        return sum(columns[i].min_width for i in indices) + gap * (len(indices) - 1)

    while len(kept) > 1 and need(kept) > width:
        victim = max(kept, key=lambda i: (columns[i].priority, i))
        kept.remove(victim)
    out: list[int | None] = [None] * n
    if need(kept) > width:  # one column, wider than the screen
        out[kept[0]] = width
        return out
    widths = {i: columns[i].min_width for i in kept}
    extra = width - need(kept)
    while extra > 0:
        open_ = [i for i in kept if columns[i].grow > 0 and _room(columns[i], widths[i]) > 0]
        if not open_:
            break
        weight = sum(columns[i].grow for i in open_)
        shares = {i: extra * columns[i].grow // weight for i in open_}
        left = extra - sum(shares.values())
        by_remainder = sorted(open_, key=lambda i: (-(extra * columns[i].grow % weight), i))
        for i in by_remainder[:left]:
            shares[i] += 1
        given = 0
        for i in open_:
            take = min(shares[i], _room(columns[i], widths[i]))
            widths[i] += take
            given += take
        extra -= given
        if given == 0:
            break
    for i, w in widths.items():
        out[i] = w
    return out


def _room(column: Column[Any], width: int) -> int:
    return (1 << 30) if column.max_width is None else column.max_width - width


def cell_text(value: str | Text) -> Text:
    """A cell's value as safe one-line ``Text``: a ``str`` through :func:`one_line` (plain, never markup); a
    ``Text`` as it is, unless it holds a control, bidi or line-break character (then rebuilt from its plain
    text, keeping its base style)."""
    if isinstance(value, Text):
        plain = value.plain
        if safe(plain) == plain:
            return value
        return Text(one_line(plain), style=value.style)
    return Text(one_line(value))


def fit_text(text: Text, width: int, align: Align = "left", overflow: Overflow = "end") -> Text:
    """``text`` in exactly ``width`` cells: padded on the side ``align`` says, or cut with ``…`` at the end
    (``overflow="end"``) or at the start (``overflow="start"``)."""
    if width <= 0:
        return Text()
    length = text.cell_len
    if length > width:
        if overflow == "start" and width > 1:
            plain = text.plain
            used = 0
            start = len(plain)
            while start > 0:
                w = cell_len(plain[start - 1])
                if used + w > width - 1:
                    break
                used += w
                start -= 1
            text = Text("…", style=text.style) + text[start:]
        else:
            text = text.copy()
            text.truncate(width, overflow="ellipsis")
    else:
        text = text.copy()
    text.align(align, width)
    return text


__all__ = ["GAP", "GUTTER", "Align", "Column", "Overflow", "cell_text", "fit", "fit_text"]
