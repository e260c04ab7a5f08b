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

The window, the anchor, the layout and the moves are :class:`tui.widgets.window_layout.WindowLayout`'s; this
module reads the pages (:class:`WindowedView`) and holds the concrete views.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from textual import events, on, work
from textual.binding import BindingType
from textual.message import Message

from store.errors import StoreError
from store.safetext import one_line
from tui import actions
from tui.lifecycle import ReportsWorkerFailures
from tui.widgets.transcript_blocks import SECTION_BODY, ViewItem
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
from tui.widgets.window_layout import GUTTER, SCROLLBAR, WindowLayout

PREFETCH_ITEMS = 30      # fetch ahead when fewer loaded items than this lie beyond the viewport
MAX_ITEMS = 600          # window cap: items beyond it, far from the anchor, are dropped
KEEP_BEHIND = 150        # items kept on the far side of the anchor when trimming
START = JumpTarget("start")


# ---------------------------------------------------------------------------------------------- the view


class WindowedView(ReportsWorkerFailures, WindowLayout, can_focus=True):
    """A Line-API view over a keyset window (see the module docstring for the scroll model): reads pages in
    workers, merges, trims and re-keys the window; the layout and the moves are :class:`WindowLayout`'s."""

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

    # ------------------------------------------------------------------ redrawing and reading ahead

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
    "BIG_SEQ", "GUTTER", "MESSAGE_PAGE", "ROW_PAGE", "Chunk", "JumpTarget", "NativeBlocksView", "NativeRawView", "RawEntriesView",
    "RawSource", "TranscriptSource",
    "TranscriptView", "WindowSource", "WindowedView",
]
