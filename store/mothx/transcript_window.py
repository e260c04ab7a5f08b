"""The pages a transcript view draws: keyset windows over a session's replay and over its raw entry rows.

A window is immutable once built and safe to call from a worker thread. Each read returns a :class:`WindowPage`:
the items of one page in ``(section, seq)`` order and the seq interval they cover, so a view can join pages
into one contiguous run. :class:`ReplayWindow` reads :func:`store.mothx.entries.replay_page` pages, merges the
compaction, override and turn markers in at their seq, puts the compactions before the replay window and the
summary heading it in front (its ``head``); :class:`RawWindow` reads :func:`store.mothx.entries.rows_page`.

Every item carries an estimated rank (entry rows of the session before it) for a scrollbar: one
``row_count(before_seq=...)`` at each end of a page, interpolated by seq inside it.

The store functions are called through the :mod:`store.mothx.entries` module (tests count them there). Nothing
here writes, and nothing imports the UI.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from store.mothx import entries
from store.mothx.entries import CompactionInfo, EntryRow, ReplayMessage, ReplayPlan
from store.mothx.sessiondir import SessionDir

# Section of an item's sort key: compactions before the replay window, the summary heading it, then the body.
SECTION_PREAMBLE = 0
SECTION_SUMMARY = 1
SECTION_BODY = 2

BIG_SEQ = 2**62
MESSAGE_PAGE = 60        # replay messages per keyset fetch
ROW_PAGE = 200           # raw rows per keyset fetch

Turn = tuple[int, str, str]
"""``(seq, "turn_start" | "turn_end", turnId)``, as :func:`store.mothx.entries.turn_markers` reads them."""


@dataclass(frozen=True)
class TurnMarker:
    """A ``turn_start`` / ``turn_end`` entry."""

    seq: int
    kind: str
    turn_id: str


@dataclass(frozen=True)
class OverrideMarker:
    """A ``content_override`` entry at its own seq: which entry it replaces, and with what."""

    seq: int
    target_entry_id: str
    replacement: ReplayMessage


WindowPayload = ReplayMessage | CompactionInfo | TurnMarker | OverrideMarker | EntryRow


@dataclass(frozen=True)
class WindowItem:
    """One item of a page: a message, a marker or a raw row, ordered by ``(section, seq)``.

    ``kind``: "message" | "summary" | "compaction" | "earlier_compaction" | "override" | "turn_start" |
    "turn_end" | "row"."""

    section: int
    seq: int
    kind: str
    payload: WindowPayload
    rank: float = 0.0       # estimated entry rows of the session before this item

    @property
    def key(self) -> tuple[int, int]:
        return (self.section, self.seq)


@dataclass(frozen=True)
class WindowPage:
    """Items read by one fetch, in key order, and the seq interval they cover."""

    items: tuple[WindowItem, ...]
    lo: int | None       # lowest covered body seq; None: from the very start (head included)
    hi: int | None       # highest covered body seq; None: through the end
    rows_read: int       # rows returned by the store for this page


def interpolate(items: list[WindowItem], first_rank: int, last_rank: int) -> list[WindowItem]:
    """Give body items a rank between ``first_rank`` (their lowest seq) and ``last_rank`` (their highest)."""
    body = [it.seq for it in items if it.section == SECTION_BODY]
    if not body:
        return items
    s0, s1 = min(body), max(body)
    span = max(1, s1 - s0)
    return [
        it if it.section != SECTION_BODY else replace(it, rank=first_rank + (last_rank - first_rank) * (it.seq - s0) / span)
        for it in items
    ]


class _Ranked:
    """Scrollbar positions by row counts of the session's entries."""

    sd: SessionDir
    session_id: str
    base_rows: int
    total: int

    def rank_of_seq(self, seq: int) -> int:
        """Rows of the window before ``seq``."""
        return max(0, entries.row_count(self.sd, self.session_id, before_seq=seq) - self.base_rows)

    def seq_at_rank(self, rank: int) -> int | None:
        """The seq of the row at position ``rank``, or None when there are no rows."""
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


class ReplayWindow(_Ranked):
    """The replay: ``replay_page`` windows, with compaction, override and turn markers merged in at their seq."""

    def __init__(self, sd: SessionDir, plan: ReplayPlan, turns: list[Turn] | tuple[Turn, ...], *,
                 base_rows: int = 0, page: int = MESSAGE_PAGE) -> None:
        self.sd = sd
        self.plan = plan
        self.session_id = plan.session_id
        self.page = page
        self.base_rows = base_rows                       # rows before the replay window
        self.total = max(1, plan.total_rows - base_rows)
        start = plan.window_start_seq
        summary_id = plan.summary.entry_id if plan.summary is not None else None
        head = [
            WindowItem(SECTION_PREAMBLE, c.seq, "compaction" if c.entry_id == summary_id else "earlier_compaction", c)
            for c in plan.compactions if c.seq < start
        ]
        if plan.summary is not None:
            head.append(WindowItem(SECTION_SUMMARY, plan.summary.seq, "summary", plan.summary))
        self.head: tuple[WindowItem, ...] = tuple(head)
        markers = [WindowItem(SECTION_BODY, c.seq, "compaction", c) for c in plan.compactions if c.seq >= start]
        markers += [
            WindowItem(SECTION_BODY, ov.seq, "override", OverrideMarker(ov.seq, target, ov))
            for target, ov in plan.overrides.items() if ov.seq >= start
        ]
        markers += [
            WindowItem(SECTION_BODY, seq, kind, TurnMarker(seq, kind, turn_id))
            for seq, kind, turn_id in turns if seq >= start and kind in ("turn_start", "turn_end")
        ]
        markers.sort(key=lambda it: it.key)
        self.markers: tuple[WindowItem, ...] = tuple(markers)
        self._marker_seqs = [m.seq for m in markers]

    def markers_between(self, lo: int | None, hi: int | None) -> list[WindowItem]:
        """Markers with ``lo <= seq <= hi`` (None: unbounded)."""
        i = 0 if lo is None else bisect.bisect_left(self._marker_seqs, lo)
        j = len(self.markers) if hi is None else bisect.bisect_right(self._marker_seqs, hi)
        return list(self.markers[i:j])

    def _read(self, *, after: int | None = None, before: int | None = None) -> tuple[list[ReplayMessage], bool, int]:
        got = entries.replay_page(self.sd, self.plan, after_seq=after, before_seq=before, limit=self.page)
        msgs = [m for m in got if m.kind != "compaction_summary"]
        # A backward page carries the summary only once no earlier message remains.
        short = len(msgs) < self.page or (before is not None and len(msgs) != len(got))
        return msgs, short, len(got)

    def _items(self, msgs: list[ReplayMessage], lo: int | None, hi: int | None) -> tuple[WindowItem, ...]:
        body = [WindowItem(SECTION_BODY, m.seq, "message", m) for m in msgs]
        body += self.markers_between(lo, hi)
        body.sort(key=lambda it: it.key)
        if body:
            body = interpolate(body, self.rank_of_seq(body[0].seq), self.rank_of_seq(body[-1].seq))
        return (self.head if lo is None else ()) + tuple(body)

    def after(self, hi: int | None) -> WindowPage:
        """Items with seq > ``hi`` (from the very start, head included, when ``hi`` is None)."""
        msgs, short, n = self._read(after=hi)
        new_hi = None if short or not msgs else msgs[-1].seq
        lo = None if hi is None else hi + 1
        return WindowPage(self._items(msgs, lo, new_hi), lo, new_hi, n)

    def before(self, lo: int | None) -> WindowPage:
        """Items with seq < ``lo`` (through the end when ``lo`` is None)."""
        msgs, short, n = self._read(before=BIG_SEQ if lo is None else lo)
        new_lo = None if short or not msgs else msgs[0].seq
        hi = None if lo is None else lo - 1
        return WindowPage(self._items(msgs, new_lo, hi), new_lo, hi, n)

    def around(self, seq: int) -> WindowPage:
        """The page before ``seq`` joined to the page from it on."""
        back, ahead = self.before(seq), self.after(seq - 1)
        return WindowPage(back.items + ahead.items, back.lo, ahead.hi, back.rows_read + ahead.rows_read)


class RawWindow(_Ranked):
    """Every entry row in seq order (``rows_page``), one item per row."""

    def __init__(self, sd: SessionDir, session_id: str, total_rows: int, *, page: int = ROW_PAGE) -> None:
        self.sd = sd
        self.session_id = session_id
        self.base_rows = 0
        self.total = max(1, total_rows)
        self.page = page

    def _items(self, rows: list[EntryRow]) -> tuple[WindowItem, ...]:
        base = self.rank_of_seq(rows[0].seq) if rows else 0
        return tuple(WindowItem(SECTION_BODY, r.seq, "row", r, float(base + i)) for i, r in enumerate(rows))

    def after(self, hi: int | None) -> WindowPage:
        """Rows with seq > ``hi`` (from the first row when ``hi`` is None)."""
        rows = entries.rows_page(self.sd, self.session_id, after_seq=hi, limit=self.page)
        new_hi = None if len(rows) < self.page else rows[-1].seq
        return WindowPage(self._items(rows), None if hi is None else hi + 1, new_hi, len(rows))

    def before(self, lo: int | None) -> WindowPage:
        """Rows with seq < ``lo`` (the last rows when ``lo`` is None)."""
        rows = entries.rows_page(self.sd, self.session_id, before_seq=BIG_SEQ if lo is None else lo, limit=self.page)
        new_lo = None if len(rows) < self.page else rows[0].seq
        return WindowPage(self._items(rows), new_lo, None if lo is None else lo - 1, len(rows))

    def around(self, seq: int) -> WindowPage:
        """The page before ``seq`` joined to the page from it on."""
        back, ahead = self.before(seq), self.after(seq - 1)
        return WindowPage(back.items + ahead.items, back.lo, ahead.hi, back.rows_read + ahead.rows_read)


def appended_turns(events: tuple[object, ...] | list[object]) -> list[Turn]:
    """The turn markers among rows a follow step appended (rows whose JSON parsed)."""
    out: list[Turn] = []
    for r in events:
        parsed = getattr(r, "parsed", None)
        kind = getattr(r, "entry_type", "")
        if parsed is not None and kind in ("turn_start", "turn_end"):
            out.append((int(getattr(r, "seq", 0)), kind, str((parsed or {}).get("turnId", ""))))
    return out


def merge_turns(known: list[Turn] | tuple[Turn, ...], new: list[Turn]) -> list[Turn]:
    """``known`` turn markers with ``new`` ones added, in seq order, each once."""
    return sorted(set(known) | set(new))


__all__ = [
    "BIG_SEQ",
    "MESSAGE_PAGE",
    "ROW_PAGE",
    "SECTION_BODY",
    "SECTION_PREAMBLE",
    "SECTION_SUMMARY",
    "OverrideMarker",
    "RawWindow",
    "ReplayWindow",
    "Turn",
    "TurnMarker",
    "WindowItem",
    "WindowPage",
    "WindowPayload",
    "appended_turns",
    "interpolate",
    "merge_turns",
]
