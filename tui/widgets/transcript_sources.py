"""The Transcript screen's views read their pages here: the store's windows turned into view items.

The domain sequencing (which store calls, in which order, the markers merged in at their seq, the head of
compactions and summary, the rank estimates) is :mod:`store.mothx.transcript_window`; this module only turns its
:class:`~store.mothx.transcript_window.WindowPage` into a :class:`Chunk` of :class:`ViewItem` (the markers into
the block renderers' :class:`TurnMark` / :class:`OverrideMark`). A source is immutable once built and is called
only from worker threads.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from store.mothx.entries import ReplayPlan
from store.mothx.sessiondir import SessionDir
from store.mothx.transcript_window import (
    BIG_SEQ,
    MESSAGE_PAGE,
    ROW_PAGE,
    OverrideMarker,
    RawWindow,
    ReplayWindow,
    Turn,
    TurnMarker,
    WindowItem,
    WindowPage,
)
from tui.widgets.block_base import OverrideMark, Payload, TurnMark, ViewItem

Direction = Literal["replace", "after", "before"]


@dataclass(frozen=True)
class Chunk:
    """Items read by one fetch, in key order, and the seq interval they cover."""

    items: tuple[ViewItem, ...]
    lo: int | None       # lowest covered body seq; None: from the very start (head included)
    hi: int | None       # highest covered body seq; None: through the end
    rows_read: int       # rows returned by the store for this chunk


@dataclass(frozen=True)
class JumpTarget:
    """Where the anchor goes when a replacing chunk arrives."""

    kind: Literal["start", "end", "seq"]
    seq: int = 0
    section: int = 2  # with "seq": the item key (section, seq) to land on; a head item (section < 2) is read from the start


class WindowSource(ABC):
    """Reads pages for a view. Called from worker threads only; holds immutable facts."""

    total: int = 0

    @abstractmethod
    def after(self, hi: int | None) -> Chunk:
        """Items with seq > ``hi`` (from the very start when ``hi`` is None)."""

    @abstractmethod
    def before(self, lo: int | None) -> Chunk:
        """Items with seq < ``lo`` (through the end when ``lo`` is None)."""

    @abstractmethod
    def rank_of_seq(self, seq: int) -> int:
        """Rows of the view before ``seq`` (for the scrollbar)."""

    @abstractmethod
    def seq_at_rank(self, rank: int) -> int | None:
        """The seq of the row at position ``rank``, or None when there are no rows."""

    def markers_between(self, lo: int | None, hi: int | None) -> list[ViewItem]:
        """Body markers with ``lo <= seq <= hi`` (None: unbounded); none by default."""
        return []

    def around(self, seq: int) -> Chunk:
        back = self.before(seq)
        ahead = self.after(seq - 1)
        return Chunk(back.items + ahead.items, back.lo, ahead.hi, back.rows_read + ahead.rows_read)

    def fetch(self, direction: Direction, edge: int | None, target: JumpTarget | None) -> Chunk:
        if direction == "after":
            return self.after(edge)
        if direction == "before":
            return self.before(edge)
        assert target is not None
        if target.kind == "start" or (target.kind == "seq" and target.section < 2):
            return self.after(None)
        if target.kind == "end":
            return self.before(None)
        return self.around(target.seq)


def view_payload(payload: object) -> Payload:
    """A window payload as the block renderers take it (the markers become their view marks)."""
    if isinstance(payload, TurnMarker):
        return TurnMark(payload.seq, payload.kind, payload.turn_id)
    if isinstance(payload, OverrideMarker):
        return OverrideMark(payload.seq, payload.target_entry_id, payload.replacement)
    return payload


def view_item(item: WindowItem) -> ViewItem:
    """One window item as a view item."""
    return ViewItem((item.section, item.seq), item.kind, view_payload(item.payload), item.rank)


def view_chunk(page: WindowPage) -> Chunk:
    """One window page as a chunk of view items."""
    return Chunk(tuple(view_item(it) for it in page.items), page.lo, page.hi, page.rows_read)


class TranscriptSource(WindowSource):
    """The replay (:class:`~store.mothx.transcript_window.ReplayWindow`) as view items."""

    def __init__(self, sd: SessionDir, plan: ReplayPlan, turns: list[Turn], *,
                 base_rows: int = 0, page: int = MESSAGE_PAGE) -> None:
        self.window = ReplayWindow(sd, plan, turns, base_rows=base_rows, page=page)
        self.sd = sd
        self.plan = plan
        self.session_id = plan.session_id
        self.page = page
        self.base_rows = base_rows
        self.total = self.window.total
        self.head = tuple(view_item(it) for it in self.window.head)
        self.markers = tuple(view_item(it) for it in self.window.markers)
        self._marker_seqs = [m.seq for m in self.markers]

    def markers_between(self, lo: int | None, hi: int | None) -> list[ViewItem]:
        """Markers with ``lo <= seq <= hi`` (None: unbounded)."""
        i = 0 if lo is None else bisect.bisect_left(self._marker_seqs, lo)
        j = len(self.markers) if hi is None else bisect.bisect_right(self._marker_seqs, hi)
        return list(self.markers[i:j])

    def rank_of_seq(self, seq: int) -> int:
        return self.window.rank_of_seq(seq)

    def seq_at_rank(self, rank: int) -> int | None:
        return self.window.seq_at_rank(rank)

    def after(self, hi: int | None) -> Chunk:
        return view_chunk(self.window.after(hi))

    def before(self, lo: int | None) -> Chunk:
        return view_chunk(self.window.before(lo))


class RawSource(WindowSource):
    """Every entry row in seq order (:class:`~store.mothx.transcript_window.RawWindow`), one item per row."""

    def __init__(self, sd: SessionDir, session_id: str, total_rows: int, *, page: int = ROW_PAGE) -> None:
        self.window = RawWindow(sd, session_id, total_rows, page=page)
        self.sd = sd
        self.session_id = session_id
        self.base_rows = 0
        self.total = self.window.total
        self.page = page

    def rank_of_seq(self, seq: int) -> int:
        return self.window.rank_of_seq(seq)

    def seq_at_rank(self, rank: int) -> int | None:
        return self.window.seq_at_rank(rank)

    def after(self, hi: int | None) -> Chunk:
        return view_chunk(self.window.after(hi))

    def before(self, lo: int | None) -> Chunk:
        return view_chunk(self.window.before(lo))


__all__ = [
    "BIG_SEQ",
    "MESSAGE_PAGE",
    "ROW_PAGE",
    "Chunk",
    "Direction",
    "JumpTarget",
    "RawSource",
    "TranscriptSource",
    "WindowSource",
    "view_chunk",
    "view_item",
    "view_payload",
]
