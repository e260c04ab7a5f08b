"""Where the Transcript screen's views get their items: keyset pages of the replay and of the raw rows.

A source is immutable once built and is called only from worker threads. Each fetch returns a :class:`Chunk`:
the items of one page in ``(section, seq)`` order and the seq interval they cover, so the view can join pages
into one contiguous window. The replay source merges compaction, override and turn markers in at their seq
and puts the compactions before the replay window and the summary heading it in front (the "head").

Every item carries an estimated rank (entry rows of the session before it) for the scrollbar: one
``row_count(before_seq=...)`` at each end of a page, interpolated by seq inside it.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from store.mothx import entries
from store.mothx.entries import EntryRow, ReplayMessage, ReplayPlan
from store.mothx.sessiondir import SessionDir
from tui.widgets.block_base import (
    SECTION_BODY,
    SECTION_PREAMBLE,
    SECTION_SUMMARY,
    OverrideMark,
    TurnMark,
    ViewItem,
)

BIG_SEQ = 2**62
MESSAGE_PAGE = 60        # replay messages per keyset fetch
ROW_PAGE = 200           # raw rows per keyset fetch

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
        if target.kind == "start":
            return self.after(None)
        if target.kind == "end":
            return self.before(None)
        return self.around(target.seq)


def _interpolate(items: list[ViewItem], first_rank: int, last_rank: int) -> list[ViewItem]:
    """Give body items a rank between ``first_rank`` (their lowest seq) and ``last_rank`` (their highest)."""
    body = [it.seq for it in items if it.key[0] == SECTION_BODY]
    if not body:
        return items
    s0, s1 = min(body), max(body)
    span = max(1, s1 - s0)
    out: list[ViewItem] = []
    for it in items:
        if it.key[0] != SECTION_BODY:
            out.append(it)
            continue
        rank = first_rank + (last_rank - first_rank) * (it.seq - s0) / span
        out.append(ViewItem(it.key, it.kind, it.payload, rank))
    return out


class _RankMixin:
    sd: SessionDir
    session_id: str
    base_rows: int
    total: int

    def rank_of_seq(self, seq: int) -> int:
        return max(0, entries.row_count(self.sd, self.session_id, before_seq=seq) - self.base_rows)

    def seq_at_rank(self, rank: int) -> int | None:
        first = entries.rows_page(self.sd, self.session_id, limit=1)
        last = entries.rows_page(self.sd, self.session_id, before_seq=BIG_SEQ, limit=1)
        if not first or not last:
            return None
        want = self.base_rows + max(0, rank)
        lo, hi = first[0].seq, last[0].seq
        while lo < hi:  # smallest seq whose row has at least `want` rows before it
            mid = (lo + hi) // 2
            if entries.row_count(self.sd, self.session_id, before_seq=mid + 1) > want:
                hi = mid
            else:
                lo = mid + 1
        return lo


class TranscriptSource(_RankMixin, WindowSource):
    """The replay: ``replay_page`` windows, with compaction and turn markers merged in at their seq."""

    def __init__(self, sd: SessionDir, plan: ReplayPlan, turns: list[tuple[int, str, str]], *,
                 base_rows: int = 0, page: int = MESSAGE_PAGE) -> None:
        self.sd = sd
        self.plan = plan
        self.session_id = plan.session_id
        self.page = page
        self.base_rows = base_rows                       # rows before the replay window
        self.total = max(1, plan.total_rows - base_rows)
        start = plan.window_start_seq
        summary_id = plan.summary.entry_id if plan.summary is not None else None
        head: list[ViewItem] = [
            ViewItem((SECTION_PREAMBLE, c.seq), "compaction" if c.entry_id == summary_id else "earlier_compaction", c)
            for c in plan.compactions if c.seq < start
        ]
        if plan.summary is not None:
            head.append(ViewItem((SECTION_SUMMARY, plan.summary.seq), "summary", plan.summary))
        self.head = tuple(head)
        markers: list[ViewItem] = [
            ViewItem((SECTION_BODY, c.seq), "compaction", c) for c in plan.compactions if c.seq >= start
        ]
        markers += [
            ViewItem((SECTION_BODY, ov.seq), "override", OverrideMark(ov.seq, target, ov))
            for target, ov in plan.overrides.items() if ov.seq >= start
        ]
        markers += [
            ViewItem((SECTION_BODY, seq), kind, TurnMark(seq, kind, turn_id))
            for seq, kind, turn_id in turns if seq >= start and kind in ("turn_start", "turn_end")
        ]
        markers.sort(key=lambda it: it.key)
        self.markers = tuple(markers)
        self._marker_seqs = [m.seq for m in markers]

    def markers_between(self, lo: int | None, hi: int | None) -> list[ViewItem]:
        """Markers with ``lo <= seq <= hi`` (None: unbounded)."""
        i = 0 if lo is None else bisect.bisect_left(self._marker_seqs, lo)
        j = len(self.markers) if hi is None else bisect.bisect_right(self._marker_seqs, hi)
        return list(self.markers[i:j])

    def _page(self, *, after: int | None = None, before: int | None = None) -> tuple[list[ReplayMessage], bool, int]:
        got = entries.replay_page(self.sd, self.plan, after_seq=after, before_seq=before, limit=self.page)
        msgs = [m for m in got if m.kind != "compaction_summary"]
        # A backward page carries the summary only once no earlier message remains.
        short = len(msgs) < self.page or (before is not None and len(msgs) != len(got))
        return msgs, short, len(got)

    def _chunk(self, msgs: list[ReplayMessage], lo: int | None, hi: int | None, n: int) -> Chunk:
        body = [ViewItem((SECTION_BODY, m.seq), "message", m) for m in msgs]
        body += self.markers_between(lo, hi)
        body.sort(key=lambda it: it.key)
        if body:
            s0, s1 = body[0].seq, body[-1].seq
            body = _interpolate(body, self.rank_of_seq(s0), self.rank_of_seq(s1))
        items = (list(self.head) if lo is None else []) + body
        return Chunk(tuple(items), lo, hi, n)

    def after(self, hi: int | None) -> Chunk:
        msgs, short, n = self._page(after=hi)
        new_hi = None if short or not msgs else msgs[-1].seq
        lo_bound = None if hi is None else hi + 1
        chunk = self._chunk(msgs, lo_bound, new_hi, n)
        return Chunk(chunk.items, None if hi is None else chunk.lo, new_hi, n)

    def before(self, lo: int | None) -> Chunk:
        msgs, short, n = self._page(before=BIG_SEQ if lo is None else lo)
        new_lo = None if short or not msgs else msgs[0].seq
        hi_bound = None if lo is None else lo - 1
        chunk = self._chunk(msgs, new_lo, hi_bound, n)
        return Chunk(chunk.items, new_lo, None if lo is None else hi_bound, n)


class RawSource(_RankMixin, WindowSource):
    """Every entry row in seq order (``rows_page``), one item per row."""

    def __init__(self, sd: SessionDir, session_id: str, total_rows: int, *, page: int = ROW_PAGE) -> None:
        self.sd = sd
        self.session_id = session_id
        self.base_rows = 0
        self.total = max(1, total_rows)
        self.page = page

    def _chunk(self, rows: list[EntryRow], lo: int | None, hi: int | None) -> Chunk:
        base = self.rank_of_seq(rows[0].seq) if rows else 0
        items = tuple(ViewItem((SECTION_BODY, r.seq), "row", r, float(base + i)) for i, r in enumerate(rows))
        return Chunk(items, lo, hi, len(rows))

    def after(self, hi: int | None) -> Chunk:
        rows = entries.rows_page(self.sd, self.session_id, after_seq=hi, limit=self.page)
        new_hi = None if len(rows) < self.page else rows[-1].seq
        return Chunk(self._chunk(rows, hi, new_hi).items, None if hi is None else hi + 1, new_hi, len(rows))

    def before(self, lo: int | None) -> Chunk:
        rows = entries.rows_page(self.sd, self.session_id, before_seq=BIG_SEQ if lo is None else lo, limit=self.page)
        new_lo = None if len(rows) < self.page else rows[0].seq
        return Chunk(self._chunk(rows, new_lo, lo).items, new_lo, None if lo is None else lo - 1, len(rows))
