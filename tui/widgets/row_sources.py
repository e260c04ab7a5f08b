"""Row sources of a :class:`tui.widgets.row_list.RowList`: where a list's rows come from.

A source is a :class:`RowSource` that reads pages by keyset (:meth:`RowSource.first`, :meth:`RowSource.after`,
and for a *reversible* source :meth:`RowSource.before` / :meth:`RowSource.last`), one query per page, returning
frozen :class:`Page` values. Every read runs in the list's worker thread. Ready-made: :class:`ListSource` (a
small list held in memory), :class:`OffsetSource` (a store function that reads by position and knows its
total), :class:`ChainSource` (sources shown one after the other, e.g. active runs, then recent runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from textual.cache import LRUCache

T = TypeVar("T")
Key = Hashable


@dataclass(frozen=True)
class Page(Generic[T]):
    """One read: ``rows`` in the list's order, and whether more rows exist beyond them in the direction read
    (after the last row for ``first`` / ``after``; before the first row for ``before`` / ``last``)."""

    rows: tuple[T, ...]
    more: bool


class RowSource(Generic[T]):
    """Rows in one order, read by keyset a page at a time (each call is one query; it runs in a worker thread).

    ``key(row)`` is the row's keyset position (what :meth:`after` / :meth:`before` take); ``ident(row)`` the
    row's identity (what the cursor is kept on and what :meth:`RowList.mark_changed` takes), by default its key
    (differs when the sort key can change, e.g. ``(last_active_at, id)`` versus ``id``).

    A **reversible** source also implements :meth:`before` and :meth:`last`; the widget then keeps only a few
    pages around the cursor and ``G`` reads the last page directly. A forward-only source is read from the
    start, a page at a time, up to the widget's display cap.
    """

    reversible: bool = False

    def key(self, row: T) -> Key:
        raise NotImplementedError

    def ident(self, row: T) -> Key:
        return self.key(row)

    def first(self, limit: int) -> Page[T]:
        """The first ``limit`` rows. (Every read: a page whose ``more`` is true holds at least one row; a source
        that filters rows reads on until it has one or reaches the end.)"""
        raise NotImplementedError

    def after(self, key: Key, limit: int) -> Page[T]:
        """The ``limit`` rows strictly after ``key`` (which may no longer exist)."""
        raise NotImplementedError

    def before(self, key: Key, limit: int) -> Page[T]:
        """The ``limit`` rows strictly before ``key``, in list order (reversible sources)."""
        raise NotImplementedError

    def last(self, limit: int) -> Page[T]:
        """The last ``limit`` rows, in list order (reversible sources)."""
        raise NotImplementedError

    def total(self) -> int | None:
        """How many rows there are, or None when unknown or too dear to count (then "N of >N" is shown)."""
        return None

    def reread(self, idents: Sequence[Key]) -> Mapping[Key, T | None] | None:
        """The current version of the named rows (None for a row that is gone), or None when the source
        cannot read single rows (the widget then re-reads its window)."""
        return None


class ListSource(RowSource[T]):
    """A small list held in memory, paged like any source (keys looked up in a dict: O(1) per page)."""

    reversible = True

    def __init__(self, rows: Iterable[T], key: Callable[[T], Key]) -> None:
        self.rows: tuple[T, ...] = tuple(rows)
        self._key = key
        self._index: dict[Key, int] = {key(row): i for i, row in enumerate(self.rows)}

    def key(self, row: T) -> Key:
        return self._key(row)

    def first(self, limit: int) -> Page[T]:
        return Page(self.rows[:limit], len(self.rows) > limit)

    def after(self, key: Key, limit: int) -> Page[T]:
        i = self._index.get(key)
        start = 0 if i is None else i + 1
        return Page(self.rows[start:start + limit], len(self.rows) > start + limit)

    def before(self, key: Key, limit: int) -> Page[T]:
        i = self._index.get(key)
        end = 0 if i is None else i
        start = max(0, end - limit)
        return Page(self.rows[start:end], start > 0)

    def last(self, limit: int) -> Page[T]:
        start = max(0, len(self.rows) - limit)
        return Page(self.rows[start:], start > 0)

    def total(self) -> int:
        return len(self.rows)

    def reread(self, idents: Sequence[Key]) -> Mapping[Key, T | None]:
        return {ident: (self.rows[self._index[ident]] if ident in self._index else None) for ident in idents}


class OffsetSource(RowSource[T]):
    """A source over a store function that reads a window by position and knows the total, e.g.
    ``lambda offset, limit: (page.rows, page.total)`` over ``store.mothx.sessions.list_sessions``, until that
    function pages by keyset. A row's key is its ident; the position of every row served is remembered (up to
    ``remember`` rows, least recently used first out), so ``after`` / ``before`` are one read each, and
    ``total()`` is the total of the last read (no extra query)."""

    reversible = True

    def __init__(self, read: Callable[[int, int], tuple[Sequence[T], int]], ident: Callable[[T], Key], *,
                 remember: int = 20_000) -> None:
        self._read = read
        self._ident = ident
        self._offsets: LRUCache[Key, int] = LRUCache(remember)
        self._total: int | None = None
        self._lock = threading.Lock()  # a superseded read may still be running in another worker thread

    def key(self, row: T) -> Key:
        return self._ident(row)

    def _window(self, offset: int, limit: int) -> tuple[tuple[T, ...], int]:
        with self._lock:
            rows, total = self._read(max(0, offset), limit)
            return self._remember(rows, total, max(0, offset)), total

    def _remember(self, rows: Sequence[T], total: int, offset: int) -> tuple[T, ...]:
        self._total = total
        for i, row in enumerate(rows):
            self._offsets.set(self._ident(row), offset + i)
        return tuple(rows)

    def adopt(self, rows: Sequence[T], total: int) -> Page[T]:
        """The first page read ahead (by the caller, before the list was shown), as
        ``set_source(source, first_page=source.adopt(rows, total), total=total)`` takes it."""
        with self._lock:
            kept = self._remember(rows, total, 0)
        return Page(kept, len(kept) < total and bool(kept))

    def _offset(self, key: Key) -> int:
        with self._lock:
            offset = self._offsets.get(key)
        if offset is None:
            raise LookupError("the list moved on too far; read it again")
        return offset

    def first(self, limit: int) -> Page[T]:
        rows, total = self._window(0, limit)
        return Page(rows, len(rows) < total and bool(rows))

    def after(self, key: Key, limit: int) -> Page[T]:
        start = self._offset(key) + 1
        rows, total = self._window(start, limit)
        return Page(rows, start + len(rows) < total and bool(rows))

    def before(self, key: Key, limit: int) -> Page[T]:
        end = self._offset(key)
        start = max(0, end - limit)
        rows, _ = self._window(start, end - start)
        return Page(rows, start > 0 and bool(rows))

    def last(self, limit: int) -> Page[T]:
        total = self._total
        if total is None:
            _, total = self._window(0, 0)
        start = max(0, total - limit)
        rows, _ = self._window(start, limit)
        return Page(rows, start > 0 and bool(rows))

    def total(self) -> int | None:
        return self._total


class ChainSource(RowSource[T]):
    """Sources shown one after the other (the Runs list: its active runs, then its recent runs). ``part(row)``
    says which source a row belongs to; a row's key is ``(part, key in that source)``, its ident the part's
    ident (so a run that moves from one part to the other keeps the cursor). Reversible when every part is."""

    def __init__(self, parts: Sequence[RowSource[T]], part: Callable[[T], int]) -> None:
        if not parts:
            raise ValueError("ChainSource needs at least one source")
        self.parts = tuple(parts)
        self._part = part
        self.reversible = all(p.reversible for p in self.parts)

    def key(self, row: T) -> Key:
        i = self._part(row)
        return (i, self.parts[i].key(row))

    def ident(self, row: T) -> Key:
        return self.parts[self._part(row)].ident(row)

    def _forward(self, start: int, page: Page[T] | None, limit: int) -> Page[T]:
        last = len(self.parts) - 1
        i = start
        while True:
            if page is not None and page.rows:
                return Page(page.rows, page.more or i < last)
            if page is not None and page.more:  # a source broke the contract: do not loop
                return Page((), False)
            i += 1
            if i > last:
                return Page((), False)
            page = self.parts[i].first(limit)

    def _backward(self, start: int, page: Page[T] | None, limit: int) -> Page[T]:
        i = start
        while True:
            if page is not None and page.rows:
                return Page(page.rows, page.more or i > 0)
            if page is not None and page.more:
                return Page((), False)
            i -= 1
            if i < 0:
                return Page((), False)
            page = self.parts[i].last(limit)

    def first(self, limit: int) -> Page[T]:
        return self._forward(0, self.parts[0].first(limit), limit)

    @staticmethod
    def _split(key: Key) -> tuple[int, Key]:
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], int)):
            raise ValueError(f"not a ChainSource key: {key!r}")
        return key[0], key[1]

    def after(self, key: Key, limit: int) -> Page[T]:
        i, sub = self._split(key)
        return self._forward(i, self.parts[i].after(sub, limit), limit)

    def before(self, key: Key, limit: int) -> Page[T]:
        i, sub = self._split(key)
        return self._backward(i, self.parts[i].before(sub, limit), limit)

    def last(self, limit: int) -> Page[T]:
        end = len(self.parts) - 1
        return self._backward(end, self.parts[end].last(limit), limit)

    def total(self) -> int | None:
        totals = [p.total() for p in self.parts]
        return None if any(t is None for t in totals) else sum(t for t in totals if t is not None)

    def reread(self, idents: Sequence[Key]) -> Mapping[Key, T | None] | None:
        found: dict[Key, T | None] = dict.fromkeys(idents)
        for p in self.parts:
            got = p.reread(idents)
            if got is None:
                return None
            for ident, row in got.items():
                if row is not None:
                    found[ident] = row
        return found


__all__ = ["ChainSource", "Key", "ListSource", "OffsetSource", "Page", "RowSource"]
