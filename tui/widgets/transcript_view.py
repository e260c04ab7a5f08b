"""Line-API views over a keyset window of a session: the replay (``TranscriptView``) and the raw rows
(``RawEntriesView``).

Scroll model
------------
Blocks have variable height (wrapped text), and the session may hold 50,000 entries, so the view never
knows the height of the whole document. Instead it keeps:

* a **window**: a contiguous run of items (messages, markers, rows) ordered by ``(section, seq)``, covering
  every body item with ``lo <= seq <= hi`` (``lo is None``: from the very start, the head included;
  ``hi is None``: through the end). Pages are fetched by keyset (``after_seq=hi`` / ``before_seq=lo``) in
  thread workers, ahead of the viewport in both directions, and the window is trimmed on the far side so
  memory stays bounded however far one scrolls;
* an **anchor**: the item at the top of the viewport and the line offset inside its block. Scrolling moves
  the anchor line by line across block boundaries; prepending or trimming items never moves it, because it
  is a key, not an index;
* an LRU of rendered blocks keyed by (item, width), so a block is wrapped once.

The scrollbar (the last column) is drawn by the view: its thumb sits at rows-before-anchor / total rows,
where rows-before is counted once per fetched page (``row_count(before_seq=...)``) and interpolated by seq
inside the page. Clicking it jumps to that fraction of the session.

Workers only read and ``post_message`` a typed result; the handlers own all state. A result whose
generation is stale (the user jumped meanwhile) or whose edge no longer matches the window is dropped.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from store.errors import StoreError
from store.safetext import one_line, safe
from tui import actions
from tui.widgets.transcript_blocks import SECTION_BODY, Palette, ViewItem, render_item
from tui.widgets.transcript_sources import (
    BIG_SEQ,
    MESSAGE_PAGE,
    ROW_PAGE,
    Chunk,
    Direction,
    JumpTarget,
    RawSource,
    TranscriptSource,
    WindowSource,
)

PREFETCH_ITEMS = 30      # fetch ahead when fewer loaded items than this lie beyond the viewport
MAX_ITEMS = 600          # window cap: items beyond it, far from the anchor, are dropped
KEEP_BEHIND = 150        # items kept on the far side of the anchor when trimming
GUTTER = 2
SCROLLBAR = 1

Position = tuple[int, int]   # (item index, line inside its block)
START = JumpTarget("start")


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




# ---------------------------------------------------------------------------------------------- the view


class WindowedView(Widget, can_focus=True):
    """A Line-API view over a keyset window (see the module docstring for the scroll model)."""

    COMPONENT_CLASSES = {
        "windowed-view--user", "windowed-view--assistant", "windowed-view--tool", "windowed-view--error",
        "windowed-view--thinking", "windowed-view--marker", "windowed-view--warning", "windowed-view--muted",
        "windowed-view--override", "windowed-view--system", "windowed-view--turn", "windowed-view--cursor",
        "windowed-view--scrollbar", "windowed-view--scrollbar-thumb",
    }

    DEFAULT_CSS = """
    WindowedView {
        height: 1fr;
        background: $surface;
        color: $foreground;
    }
    WindowedView > .windowed-view--user { color: $accent; text-style: bold; }
    WindowedView > .windowed-view--assistant { color: $success; text-style: bold; }
    WindowedView > .windowed-view--tool { color: $secondary; }
    WindowedView > .windowed-view--error { color: $error; text-style: bold; }
    WindowedView > .windowed-view--thinking { color: $foreground-muted; text-style: italic; }
    WindowedView > .windowed-view--marker { color: $warning; }
    WindowedView > .windowed-view--warning { color: $warning; text-style: bold; }
    WindowedView > .windowed-view--muted { color: $foreground-muted; }
    WindowedView > .windowed-view--override { color: $primary; text-style: bold; }
    WindowedView > .windowed-view--system { color: $warning-darken-1; }
    WindowedView > .windowed-view--turn { color: $foreground-muted; text-style: dim; }
    WindowedView > .windowed-view--cursor { color: $accent; background: $boost; }
    WindowedView > .windowed-view--scrollbar { color: $scrollbar-background; background: $scrollbar-background; }
    WindowedView > .windowed-view--scrollbar-thumb { color: $scrollbar; background: $scrollbar; }
    WindowedView:focus > .windowed-view--scrollbar-thumb { color: $scrollbar-hover; background: $scrollbar-hover; }
    """

    EMPTY_TEXT: ClassVar[str] = "No entries."
    PREFETCH_SCREENS: ClassVar[int] = 0  # also keep this many screens of items loaded ahead (one-line rows)
    ACTION_SCOPE: ClassVar[str] = "transcript-view"
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings(ACTION_SCOPE)]
    HELP_TITLE: ClassVar[str] = "Transcript view"

    class ChunkLoaded(Message):
        """A worker read a page (posted to the view that asked for it)."""

        def __init__(self, generation: int, direction: Direction, edge: int | None,
                     target: JumpTarget | None, chunk: Chunk) -> None:
            super().__init__()
            self.generation = generation
            self.direction = direction
            self.edge = edge
            self.target = target
            self.chunk = chunk

    class FetchFailed(Message):
        """A worker could not read a page; ``text`` is one sentence."""

        def __init__(self, generation: int, direction: Direction, text: str) -> None:
            super().__init__()
            self.generation = generation
            self.direction = direction
            self.text = text

    class Moved(Message):
        """The view scrolled or its cursor moved (coalesced; read the view's properties for the state)."""

        def __init__(self, view: WindowedView) -> None:
            super().__init__()
            self.view = view

        @property
        def control(self) -> WindowedView:
            return self.view

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, WindowedView.Moved) and message.view is self.view

    class Failed(Message):
        """Bubbled to the screen when a page could not be read."""

        def __init__(self, view: WindowedView, text: str) -> None:
            super().__init__()
            self.view = view
            self.text = text

    class Grew(Message):
        """New items were added at the end by a live update (:meth:`grow` / :meth:`replace_all`).

        ``added``: blocks (rules not counted) that were not there before; ``stuck``: the view stayed at the bottom.
        """

        def __init__(self, view: WindowedView, added: int, stuck: bool) -> None:
            super().__init__()
            self.view = view
            self.added = added
            self.stuck = stuck

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

    # ------------------------------------------------------------------ loading

    def set_source(self, source: WindowSource, target: JumpTarget | None = None) -> None:
        """Show ``source`` from ``target`` (the start when None; drops whatever was loaded)."""
        target = target or START
        self._source = source
        self._text = "Loading…"
        self._replace(target)

    def show_text(self, text: str) -> None:
        """Drop the window and show one line instead (an error, or why there is nothing)."""
        self._generation += 1
        self._pending.clear()
        self._items, self._keys = [], []
        self._anchor = self._cursor = None
        self._text = one_line(text)  # an error may quote data
        self._changed()

    def swap_source(self, source: WindowSource) -> None:
        """Read from ``source`` from now on, keeping the window, the place and any read in flight: the markers
        the new source knows (turns read after the first page) are merged into the loaded window, and into
        every page that still arrives from the old source."""
        stick = self.at_bottom and bool(self._items)
        self._source = source
        self._merge_markers()
        if stick and self.at_end:
            self._layout = None
            self._set_anchor(self._end_position())  # markers added below kept the view at the bottom
        self._changed()

    def grow(self, source: WindowSource, *, stick: bool) -> None:
        """The source gained items after the window's end (a live session): read them, keeping the place.

        With ``stick`` the view moves to the new bottom once they are read; otherwise it stays where it is and
        :class:`Grew` says how many blocks were added (for an "N new" indicator)."""
        self._source = source
        self._stick = self._stick or stick
        if not self._items:
            self._grow_from = None
            self._replace(JumpTarget("end" if stick else "start"))
            return
        if self._hi is not None and self._grow_from is None and not self._stick:
            return  # the window ends before the old end: the new items are read when scrolled to
        if self._grow_from is None:
            self._grow_from = self._items[-1].key
            self._grow_added = 0
        if "after" in self._pending:
            self._regrow = True  # the page in flight may have been read before the new rows were written
            return
        if self._hi is None:
            self._hi = self._items[-1].seq
        self._request("after", self._hi)

    def replace_all(self, source: WindowSource, *, stick: bool) -> None:
        """Show a new version of an in-memory source (every item in one chunk) keeping anchor and cursor by key.

        Used for native transcripts, whose earlier blocks can change (a call's result arrived): every block is
        drawn again. With ``stick`` the view moves to the new bottom; :class:`Grew` reports new blocks."""
        old_last = self._items[-1].key if self._items else None
        self._source = source
        chunk = source.after(None)
        self._generation += 1
        self._pending.clear()
        self._items = list(chunk.items)
        self._lo, self._hi = chunk.lo, chunk.hi
        self._rekey()
        self._blocks.clear()
        if not self._items:
            self._anchor = self._cursor = None
            self._text = self.EMPTY_TEXT
        elif stick or self._anchor is None:
            self._place(JumpTarget("end" if stick else "start"))
        else:
            pos = self._anchor_pos()
            if pos is not None:
                self._set_anchor(self._clamp(pos))
            if self._cursor is not None and self._index(self._cursor) is None:
                i = min(bisect.bisect_left(self._keys, self._cursor), len(self._items) - 1)
                self._cursor = self._items[i].key
        added = sum(1 for it in self._items if (old_last is None or it.key > old_last) and not it.is_rule)
        self._changed()
        if old_last is not None:
            self.post_message(self.Grew(self, added, stick))

    def _after_grow(self, chunk: Chunk) -> None:
        """A page read for :meth:`grow` was added: count new blocks, read on, stick to the bottom when asked."""
        start = self._grow_from
        if start is None:
            return
        self._grow_added += sum(1 for it in chunk.items if it.key > start and not it.is_rule)
        if self._regrow:
            self._regrow = False
            if self._hi is None and self._items:
                self._hi = self._items[-1].seq
            self._request("after", self._hi)
            return
        if self._hi is not None and self._stick:
            self._request("after", self._hi)  # more than one page arrived: read through to the end
            return
        stuck = self._stick
        if stuck and self._hi is None:
            self._place(JumpTarget("end"))
        added, self._grow_added, self._grow_from, self._stick = self._grow_added, 0, None, False
        self.post_message(self.Grew(self, added, stuck))

    def _merge_markers(self) -> None:
        """Add the source's markers that fall inside the window's seq coverage and are not there yet."""
        if self._source is None or not self._items:
            return
        known = set(self._keys)
        extra = [m for m in self._source.markers_between(self._lo, self._hi) if m.key not in known]
        if not extra:
            return
        merged = sorted(self._items + extra, key=lambda it: it.key)
        rank = 0.0
        for i, it in enumerate(merged):
            if it.key in known:
                rank = it.rank
            else:
                merged[i] = ViewItem(it.key, it.kind, it.payload, rank)
        self._items = merged
        self._rekey()

    def _replace(self, target: JumpTarget) -> None:
        self._grow_from, self._grow_added, self._regrow = None, 0, False
        self._generation += 1
        self._pending.clear()
        self._pending_lines = self._pending_cursor = 0
        self._request("replace", None, target)

    def _request(self, direction: Direction, edge: int | None, target: JumpTarget | None = None) -> None:
        if self._source is None or direction in self._pending:
            return
        self._pending.add(direction)
        self.fetches += 1
        self._fetch(self._source, self._generation, direction, edge, target)

    @work(thread=True, exit_on_error=False, group="window-fetch", description="read a page of entries")
    def _fetch(self, source: WindowSource, generation: int, direction: Direction, edge: int | None,
               target: JumpTarget | None) -> None:
        try:
            chunk = source.fetch(direction, edge, target)
        except StoreError as exc:
            self.post_message(self.FetchFailed(generation, direction, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a screen shows one line, never a traceback
            self.post_message(self.FetchFailed(generation, direction, f"Could not read entries: {exc}"))
        else:
            self.post_message(self.ChunkLoaded(generation, direction, edge, target, chunk))

    @on(FetchFailed)
    def _on_fetch_failed(self, event: FetchFailed) -> None:
        event.stop()
        if event.generation != self._generation:
            return
        self._pending.discard(event.direction)
        if event.direction == "replace" or not self._items:
            self.show_text(f"✗ {event.text}")
        self.post_message(self.Failed(self, event.text))

    @on(ChunkLoaded)
    def _on_chunk_loaded(self, event: ChunkLoaded) -> None:
        event.stop()
        if event.generation != self._generation:
            return  # stale: the user jumped since this page was asked for
        self._pending.discard(event.direction)
        chunk = event.chunk
        self.rows_read += chunk.rows_read
        if event.direction == "replace":
            self._items = list(chunk.items)
            self._lo, self._hi = chunk.lo, chunk.hi
            self._rekey()
            self._place(event.target or JumpTarget("start"))
            if not self._items:
                self._text = self.EMPTY_TEXT
        elif event.direction == "after":
            if event.edge != self._hi or self._hi is None or not self._items:
                if self._grow_from is not None and self._items:
                    self._regrow = False
                    if self._hi is None:
                        self._hi = self._items[-1].seq
                    self._request("after", self._hi)
                self._changed()
                return  # the window moved since; this page no longer joins it
            self._items.extend(chunk.items)
            self._hi = chunk.hi
            self._rekey()
            self._trim_front()
            if self._grow_from is not None:
                self._merge_markers()
                self._after_grow(chunk)
        else:
            if event.edge != self._lo or self._lo is None or not self._items:
                self._changed()
                return
            self._items[:0] = chunk.items
            self._lo = chunk.lo
            self._rekey()
            self._trim_back()
        self._merge_markers()
        self._apply_pending()
        self._changed()

    def _rekey(self) -> None:
        self._keys = [it.key for it in self._items]
        self._layout = None

    def _trim_front(self) -> None:
        pos = self._anchor_pos()
        if len(self._items) <= MAX_ITEMS or pos is None:
            return
        cut = min(len(self._items) - MAX_ITEMS, pos[0] - KEEP_BEHIND)
        while 0 < cut < len(self._items) and self._items[cut].key[0] != SECTION_BODY:
            cut += 1
        if cut <= 0:
            return
        self._items = self._items[cut:]
        self._lo = self._items[0].seq
        self._rekey()
        if self._cursor is not None and self._index(self._cursor) is None:
            here = self._anchor_pos()
            self._cursor = self._items[here[0]].key if here is not None else None

    def _trim_back(self) -> None:
        pos = self._anchor_pos()
        if len(self._items) <= MAX_ITEMS or pos is None:
            return
        keep = max(MAX_ITEMS, pos[0] + KEEP_BEHIND)
        if keep >= len(self._items):
            return
        self._items = self._items[:keep]
        self._hi = self._items[-1].seq
        self._rekey()
        if self._cursor is not None and self._index(self._cursor) is None:
            self._cursor = self._items[pos[0]].key

    def _apply_pending(self) -> None:
        lines, self._pending_lines = self._pending_lines, 0
        if lines:
            self.scroll_lines(lines)
        moves, self._pending_cursor = self._pending_cursor, 0
        if moves:
            self.move_cursor(moves)

    # ------------------------------------------------------------------ geometry

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

    def _changed(self) -> None:
        self._layout = None
        self.refresh()
        if self.size.height and self._items:
            self._prefetch()
        self.post_message(self.Moved(self))

    def _prefetch(self) -> None:
        layout = self._get_layout()
        shown = [i for i, _ in layout if i >= 0]
        if not shown:
            if self._items and self._hi is not None:
                self._request("after", self._hi)
            return
        ahead = max(PREFETCH_ITEMS, self.PREFETCH_SCREENS * self.size.height)
        if self._hi is not None and len(self._items) - 1 - shown[-1] < ahead:
            self._request("after", self._hi)
        if self._lo is not None and shown[0] < ahead:
            self._request("before", self._lo)

    def on_resize(self, event: events.Resize) -> None:
        self._layout = None
        if self._anchor_pos() is not None:
            self._set_anchor(self._clamp(self._anchor_pos()))  # type: ignore[arg-type]
        self._changed()

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
            i = min(bisect.bisect_left(self._keys, (SECTION_BODY, target.seq)), len(self._items) - 1)
        self._set_anchor(self._clamp((i, 0)))
        j = i
        while j < len(self._items) - 1 and self._items[j].is_rule:
            j += 1
        self._cursor = self._items[j].key

    # ------------------------------------------------------------------ actions and input

    def action_scroll_lines(self, n: int) -> None:
        self.scroll_lines(n)

    def action_page(self, direction: int) -> None:
        self.scroll_lines(direction * max(1, self.size.height - 1))

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(delta)

    def action_first(self) -> None:
        if self._source is None:
            return
        if self._items and self._lo is None:
            self._go_to(0)
        else:
            self._replace(JumpTarget("start"))

    def action_last(self) -> None:
        if self._source is None:
            return
        if self._items and self._hi is None:
            self._place(JumpTarget("end"))
            self._changed()
        else:
            self._replace(JumpTarget("end"))

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        event.prevent_default()
        self.scroll_lines(3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        event.prevent_default()
        self.scroll_lines(-3)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        x, y = offset
        if x >= self.size.width - SCROLLBAR and self._source is not None and self.size.height:
            top, bottom = self._thumb
            self._jump_to_fraction(y / max(1, self.size.height - max(1, bottom - top)))
            return
        layout = self._get_layout()
        if 0 <= y < len(layout) and layout[y][0] >= 0:
            self._cursor = self._items[layout[y][0]].key
            self._changed()

    def _jump_to_fraction(self, fraction: float) -> None:
        if self._source is None:
            return
        if fraction <= 0:
            self.action_first()
        elif fraction >= 1:
            self.action_last()
        else:
            self._generation += 1
            self._pending.clear()
            self._seek(self._source, self._generation, int(fraction * self._source.total))

    @work(thread=True, exit_on_error=False, exclusive=True, group="window-seek", description="find a position")
    def _seek(self, source: WindowSource, generation: int, rank: int) -> None:
        try:
            seq = source.seq_at_rank(rank)
            chunk = source.around(seq) if seq is not None else source.after(None)
        except StoreError as exc:
            self.post_message(self.FetchFailed(generation, "replace", str(exc)))
        except Exception as exc:  # noqa: BLE001
            self.post_message(self.FetchFailed(generation, "replace", f"Could not read entries: {exc}"))
        else:
            target = JumpTarget("seq", seq) if seq is not None else JumpTarget("start")
            self.post_message(self.ChunkLoaded(generation, "replace", None, target, chunk))


class TranscriptView(WindowedView):
    """The replay of one session as message blocks, with compaction, override and turn markers."""

    EMPTY_TEXT: ClassVar[str] = "The replay holds no messages. R shows the session's raw entry rows."

    def markers_of(self, kinds: set[str]) -> list[int]:
        """Seqs of the source's markers of these kinds (for n/p and [/] navigation)."""
        src = self._source
        if not isinstance(src, TranscriptSource):
            return []
        return [m.seq for m in src.markers if m.kind in kinds]


class NativeBlocksView(WindowedView, inherit_bindings=False):
    """A native transcript's records as blocks (``b`` is left to the screen: it switches branches)."""

    EMPTY_TEXT: ClassVar[str] = "The transcript holds no records."
    ACTION_SCOPE: ClassVar[str] = "native-view"
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings(ACTION_SCOPE)]
    HELP_TITLE: ClassVar[str] = "Native transcript view"


class NativeRawView(WindowedView, inherit_bindings=False):
    """A native file's lines by line number; unreadable lines in red with their reason."""

    EMPTY_TEXT: ClassVar[str] = "The file has no lines."
    ACTION_SCOPE: ClassVar[str] = "native-view"
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings(ACTION_SCOPE)]
    HELP_TITLE: ClassVar[str] = "Native lines view"
    PREFETCH_SCREENS: ClassVar[int] = 3


class RawEntriesView(WindowedView):
    """Every entry row of the session in seq order; unparsable rows in red with their parse error."""

    EMPTY_TEXT: ClassVar[str] = "The session has no entry rows."
    PREFETCH_SCREENS: ClassVar[int] = 3


__all__ = [
    "BIG_SEQ", "MESSAGE_PAGE", "ROW_PAGE", "Chunk", "JumpTarget", "NativeBlocksView", "NativeRawView", "RawEntriesView",
    "RawSource", "TranscriptSource",
    "TranscriptView", "WindowSource", "WindowedView",
]
