"""The scroll model of a windowed view, without the reading: :class:`WindowLayout` keeps the loaded window of
items, the anchor (the item at the top of the viewport and the line inside its block) and the cursor, wraps
blocks (an LRU keyed by item and width), lays out the viewport and the scrollbar, draws its lines, and moves
the anchor and the cursor (scrolling, paging, jumping inside the window). Reading pages, merging and trimming
them is :class:`tui.widgets.transcript_view.WindowedView`'s job: it supplies the hooks at the end of this class
(see the scroll model in :mod:`tui.widgets.transcript_view`)."""

from __future__ import annotations

import bisect

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget

from store.safetext import safe
from tui.widgets.transcript_blocks import SECTION_BODY, Palette, ViewItem, render_item
from tui.widgets.transcript_sources import Direction, JumpTarget, WindowSource

GUTTER = 2
SCROLLBAR = 1

Position = tuple[int, int]   # (item index, line inside its block)


def text_strip(line: Text, console: Console, width: int, base: Style) -> Strip:
    """One wrapped line as a ``width``-cell strip in which every segment has a style.

    Rich renders a ``Text`` without spans as bare segments (style ``None``), dropping the text's own style;
    Textual's monochrome and no-colour filters (``NO_COLOR``) read ``segment.style.color`` and fail on ``None``.
    So a segment without a style gets the line's style over ``base``.

    The blocks made every data string safe before wrapping it (:func:`tui.widgets.transcript_blocks.clean`);
    each segment passes :func:`store.safetext.safe` once more here, so no control, bidi or surrogate character
    can reach the terminal from this view whatever a block forgot."""
    own = console.get_style(line.style, default=None) if isinstance(line.style, str) else line.style
    fallback = base + own if own is not None else base
    segments = [
        Segment(safe(text), style if style is not None else fallback)
        for text, style, control in line.render(console, end="")
        if not control
    ]
    return Strip(segments).adjust_cell_length(width, base)


class WindowLayout(Widget):
    """The window, its anchor and cursor, the layout and drawing of the viewport, and moving inside the window
    (the base of :class:`tui.widgets.transcript_view.WindowedView`, which reads the pages)."""

    def __init__(self, *, empty_text: str = "Loading…", name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._source: WindowSource | None = None
        self._items: list[ViewItem] = []
        self._keys: list[tuple[int, int]] = []
        self._lo: int | None = None
        self._hi: int | None = None
        self._anchor: tuple[tuple[int, int], int] | None = None    # (item key, line offset)
        self._cursor: tuple[int, int] | None = None
        self._generation = 0
        self._pending: set[str] = set()
        self._pending_lines = 0
        self._pending_cursor = 0
        self._blocks: LRUCache[tuple[tuple[int, int], int], list[Strip]] = LRUCache(512)
        self._layout: list[Position] | None = None
        self._thumb: tuple[int, int] = (0, 0)
        self._palette: Palette | None = None
        self._text = empty_text
        self.rows_read = 0          # rows the store returned to this view (diagnostics and tests)
        self.fetches = 0
        self._grow_from: tuple[int, int] | None = None   # last key before a live update asked for more
        self._grow_added = 0
        self._stick = False         # a live update keeps the view at the bottom
        self._regrow = False        # a live update came while a page was read: read past the end again

    # ------------------------------------------------------------------ public state

    @property
    def source(self) -> WindowSource | None:
        return self._source

    @property
    def items(self) -> list[ViewItem]:
        """The loaded window (a copy)."""
        return list(self._items)

    @property
    def at_start(self) -> bool:
        return bool(self._items) and self._lo is None

    @property
    def at_end(self) -> bool:
        return bool(self._items) and self._hi is None

    @property
    def at_bottom(self) -> bool:
        """The window reaches the end and the last line of its last item is on screen (nothing is below)."""
        if not self._items or self._hi is not None:
            return not self._items and self._source is not None and not self._pending
        layout = self._get_layout()
        last = len(self._items) - 1
        return any(i == last and line == self._height(last) - 1 for i, line in layout)

    @property
    def fetching(self) -> bool:
        return bool(self._pending)

    @property
    def cursor_item(self) -> ViewItem | None:
        if self._cursor is None:
            return None
        i = self._index(self._cursor)
        return self._items[i] if i is not None else None

    @property
    def anchor_item(self) -> ViewItem | None:
        pos = self._anchor_pos()
        return self._items[pos[0]] if pos else None

    def visible_items(self) -> list[ViewItem]:
        """Items with at least one line on screen, in order."""
        seen: list[int] = []
        for i, _ in self._get_layout():
            if i >= 0 and (not seen or seen[-1] != i):
                seen.append(i)
        return [self._items[i] for i in seen]

    def first_block_after(self, seq: int) -> tuple[int, int] | None:
        """Key of the first loaded block (not a rule) with a seq above ``seq``; None when not loaded."""
        i = bisect.bisect_right(self._keys, (SECTION_BODY, seq))
        while i < len(self._items) and self._items[i].is_rule:
            i += 1
        return self._items[i].key if i < len(self._items) else None

    def position(self) -> tuple[float, int]:
        """(rows before the top of the view, total rows) as the scrollbar shows them."""
        item = self.anchor_item
        total = self._source.total if self._source else 0
        if item is None:
            return 0.0, total
        return (0.0 if item.key[0] != SECTION_BODY else item.rank), total

    def cursor_position(self) -> tuple[int, int, bool] | None:
        """Where the cursor is, for a status line: ``(row, total, last)``: the 1-based row of the cursor's block
        among the source's ``total`` rows (0 for a head item above the body: an earlier compaction, the
        summary), and whether it is the last block of the source. None when nothing is shown."""
        item = self.cursor_item or self.anchor_item
        total = self._source.total if self._source else 0
        if item is None or not total or not self._items:
            return None
        if item.key[0] != SECTION_BODY:
            return 0, total, False
        last_index = len(self._items) - 1
        while last_index > 0 and self._items[last_index].is_rule:
            last_index -= 1
        last = self._hi is None and item.key == self._items[last_index].key
        return max(1, min(total, int(item.rank) + 1)), total, last

    # ------------------------------------------------------------------ lookups and layout

    def _index(self, key: tuple[int, int]) -> int | None:
        i = bisect.bisect_left(self._keys, key)
        return i if i < len(self._keys) and self._keys[i] == key else None

    def _anchor_pos(self) -> Position | None:
        if self._anchor is None or not self._items:
            return None
        key, offset = self._anchor
        i = self._index(key)
        if i is None:
            i = min(bisect.bisect_left(self._keys, key), len(self._items) - 1)
            offset = 0
        return i, min(offset, self._height(i) - 1)

    def _set_anchor(self, pos: Position) -> None:
        self._anchor = (self._items[pos[0]].key, pos[1])
        self._layout = None

    @property
    def _content_width(self) -> int:
        return max(20, self.size.width - GUTTER - SCROLLBAR)

    def _get_palette(self) -> Palette:
        if self._palette is None:
            base = self.rich_style

            def st(name: str) -> Style:
                return self.get_component_rich_style(f"windowed-view--{name}", partial=True)

            self._palette = Palette(
                base=base, user=st("user"), assistant=st("assistant"), tool=st("tool"), error=st("error"),
                thinking=st("thinking"), marker=st("marker"), warning=st("warning"), muted=st("muted"),
                override=st("override"), system=st("system"), turn=st("turn"),
            )
        return self._palette

    def _block(self, i: int) -> list[Strip]:
        item = self._items[i]
        width = self._content_width
        cache_key = (item.key, width)
        strips = self._blocks.get(cache_key)
        if strips is None:
            pal = self._get_palette()
            console = self.app.console
            strips = [
                text_strip(line, console, width, pal.base) for line in render_item(item, width, pal, console)
            ] or [Strip.blank(width, pal.base)]
            self._blocks[cache_key] = strips
        return strips

    def _height(self, i: int) -> int:
        return len(self._block(i))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette = None
        self._blocks.clear()
        self._layout = None

    def _end_position(self) -> Position:
        """The anchor that puts the last line of the window at the bottom of the viewport."""
        height = max(1, self.size.height)
        total = 0
        for i in range(len(self._items) - 1, -1, -1):
            total += self._height(i)
            if total >= height:
                return i, total - height
        return 0, 0

    def _clamp(self, pos: Position) -> Position:
        if self._hi is None and self._items:
            end = self._end_position()
            if pos > end:
                return end
        return pos

    def _get_layout(self) -> list[Position]:
        """For each line of the viewport: (item index, line in block); (-1, 0) blank, (-2, 0) loading."""
        if self._layout is not None and len(self._layout) == self.size.height:
            return self._layout
        height = self.size.height
        layout: list[Position] = []
        pos = self._anchor_pos()
        if pos is not None:
            i, o = pos
            while len(layout) < height and i < len(self._items):
                h = self._height(i)
                layout.extend((i, line) for line in range(o, min(h, o + height - len(layout))))
                i, o = i + 1, 0
        if len(layout) < height and (not self._items or self._hi is not None):
            layout.append((-2, 0))
        layout.extend([(-1, 0)] * (height - len(layout)))
        self._layout = layout
        self._thumb = self._compute_thumb(layout)
        return layout

    def _compute_thumb(self, layout: list[Position]) -> tuple[int, int]:
        """Scrollbar thumb rows: top at rows-before-anchor / total, length the share of rows on screen."""
        height = len(layout)
        shown = [(i, line) for i, line in layout if i >= 0]
        if self._source is None or not shown:
            return 0, 0
        total = max(1, self._source.total)
        first, last = self._items[shown[0][0]], self._items[shown[-1][0]]
        r0 = first.rank if first.key[0] == SECTION_BODY else 0.0
        r1 = (last.rank if last.key[0] == SECTION_BODY else 0.0) + 1
        if self._lo is None and self._anchor_pos() == (0, 0):
            r0 = 0.0
        last_i = len(self._items) - 1
        if self._hi is None and shown[-1] == (last_i, self._height(last_i) - 1):
            r1 = float(total)
        size = max(1, min(height, round(height * max(0.0, r1 - r0) / total)))
        top = height - size if r1 >= total else min(height - size, max(0, round((height - size) * r0 / total)))
        return top, top + size

    # ------------------------------------------------------------------ drawing

    def render_line(self, y: int) -> Strip:
        layout = self._get_layout()
        pal = self._get_palette()
        width = self._content_width
        if y >= len(layout):
            return Strip.blank(self.size.width, pal.base)
        i, line = layout[y]
        cursor_style = self.get_component_rich_style("windowed-view--cursor")
        if i >= 0:
            content = self._block(i)[line]
            mark = "▌ " if self._items[i].key == self._cursor else "  "
            gutter = Strip([Segment(mark, cursor_style if mark.strip() else pal.base)])
        else:
            text = ""
            if i == -2:
                text = self._text if not self._items else ("… loading" if self._pending else "…")
            content = Strip([Segment(text[:width], Style.combine([pal.base, pal.muted]))]).adjust_cell_length(
                width, pal.base)
            gutter = Strip([Segment("  ", pal.base)])
        top, bottom = self._thumb
        bar_style = self.get_component_rich_style(
            "windowed-view--scrollbar-thumb" if top <= y < bottom else "windowed-view--scrollbar")
        bar = Strip([Segment(" ", bar_style)])
        return Strip.join([gutter, content, bar]).adjust_cell_length(self.size.width, pal.base)

    # ------------------------------------------------------------------ moving

    def scroll_lines(self, n: int) -> None:
        """Move the view ``n`` lines (negative: up), across block boundaries and page fetches."""
        pos = self._anchor_pos()
        if pos is None or n == 0:
            return
        i, o = pos
        left = n
        while left > 0:
            room = self._height(i) - 1 - o
            if left <= room:
                o, left = o + left, 0
            elif i + 1 < len(self._items):
                left -= room + 1
                i, o = i + 1, 0
            else:
                o, left = o + room, left - room
                break
        while left < 0:
            if -left <= o:
                o, left = o + left, 0
            elif i > 0:
                left += o + 1
                i = i - 1
                o = self._height(i) - 1
            else:
                left, o = left + o, 0
                break
        self._set_anchor(self._clamp((i, o)))
        if left > 0 and self._hi is not None:
            self._pending_lines += left  # keys pressed while the page is read add up
            self._request("after", self._hi)
        elif left < 0 and self._lo is not None:
            self._pending_lines += left  # keys pressed while the page is read add up
            self._request("before", self._lo)
        self._follow_cursor()
        self._changed()

    def _follow_cursor(self) -> None:
        """Keep the cursor on screen after a scroll: onto the first (or last) block whose top is visible."""
        shown = [(i, line) for i, line in self._get_layout() if i >= 0]
        if not shown:
            return
        cur = self._index(self._cursor) if self._cursor is not None else None
        if cur is not None and shown[0][0] <= cur <= shown[-1][0]:
            return
        blocks = [i for i, line in shown if not self._items[i].is_rule]
        tops = [i for i, line in shown if line == 0 and not self._items[i].is_rule]
        candidates = tops or blocks or [shown[0][0]]
        pick = candidates[-1] if cur is not None and cur > shown[-1][0] else candidates[0]
        self._cursor = self._items[pick].key

    def move_cursor(self, delta: int) -> None:
        """Move the cursor ``delta`` blocks (turn rules are skipped) and scroll it into view."""
        if not self._items:
            return
        cur = self._index(self._cursor) if self._cursor is not None else None
        if cur is None:
            pos = self._anchor_pos()
            cur = pos[0] if pos else 0
        step = 1 if delta > 0 else -1
        for _ in range(abs(delta)):
            j = cur + step
            while 0 <= j < len(self._items) and self._items[j].is_rule:
                j += step
            if 0 <= j < len(self._items):
                cur = j
                continue
            if step > 0 and self._hi is not None:
                self._pending_cursor += step
                self._request("after", self._hi)
            elif step < 0 and self._lo is not None:
                self._pending_cursor += step
                self._request("before", self._lo)
            break
        self._cursor = self._items[cur].key
        self._scroll_into_view(cur)
        self._changed()

    def _scroll_into_view(self, idx: int) -> None:
        pos = self._anchor_pos()
        if pos is None:
            return
        height = max(1, self.size.height)
        ai, ao = pos
        if idx < ai or (idx == ai and ao > 0):
            self._set_anchor(self._clamp((idx, 0)))
            return
        top = -ao + sum(self._height(k) for k in range(ai, idx))
        bottom = top + self._height(idx)
        if bottom <= height:
            return
        if self._height(idx) >= height:
            self._set_anchor(self._clamp((idx, 0)))
        else:
            self.scroll_lines(bottom - height)

    def jump_to_seq(self, seq: int) -> None:
        """Put the first item with seq >= ``seq`` at the top (reading a window around it when needed)."""
        inside = (self._lo is None or seq >= self._lo) and (self._hi is None or seq <= self._hi)
        if self._items and inside:
            i = bisect.bisect_left(self._keys, (SECTION_BODY, seq))
            if i < len(self._items):
                self._go_to(i)
                return
            if self._hi is None:
                self.action_last()
                return
        self._replace(JumpTarget("seq", seq))

    def jump_to_key(self, key: tuple[int, int]) -> None:
        """Put the item ``key`` (section, seq) at the top: a body key as :meth:`jump_to_seq`, a head item (an
        earlier compaction, the summary) from the start of the source."""
        section, seq = key
        if section >= SECTION_BODY:
            self.jump_to_seq(seq)
            return
        if self._items and self._lo is None:
            i = bisect.bisect_left(self._keys, key)
            if i < len(self._items):
                self._go_to(i)
                return
        self._replace(JumpTarget("seq", seq, section))

    def _go_to(self, i: int) -> None:
        self._set_anchor(self._clamp((i, 0)))
        j = i
        while j < len(self._items) - 1 and self._items[j].is_rule:
            j += 1
        self._cursor = self._items[j].key
        self._changed()

    def _place(self, target: JumpTarget) -> None:
        """Anchor a freshly replaced window at ``target``."""
        self._layout = None
        if not self._items:
            self._anchor = self._cursor = None
            return
        if target.kind == "end":
            self._set_anchor(self._end_position())
            j = len(self._items) - 1
            while j > 0 and self._items[j].is_rule:
                j -= 1
            self._cursor = self._items[j].key
            return
        i = 0
        if target.kind == "seq":
            i = min(bisect.bisect_left(self._keys, (target.section, target.seq)), len(self._items) - 1)
        self._set_anchor(self._clamp((i, 0)))
        j = i
        while j < len(self._items) - 1 and self._items[j].is_rule:
            j += 1
        self._cursor = self._items[j].key

    # ------------------------------------------------------------------ supplied by the reading view

    def _request(self, direction: Direction, edge: int | None, target: JumpTarget | None = None) -> None:
        """Read the page beyond ``edge`` in ``direction`` (in a worker)."""
        raise NotImplementedError

    def _replace(self, target: JumpTarget) -> None:
        """Drop the window and read one around ``target``."""
        raise NotImplementedError

    def _changed(self) -> None:
        """The anchor, the cursor or the window changed: redraw, read ahead, tell the screen."""
        raise NotImplementedError

    def action_last(self) -> None:
        """Show the end of the source."""
        raise NotImplementedError
