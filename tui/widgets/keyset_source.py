"""A reversible :class:`~tui.widgets.row_sources.RowSource` over one keyset page function of the store.

The checkpoint list and the captured-session list read their rows the same way: every call is ONE page query
(``first``, ``after`` a key, ``before`` a key, or ``last``: the end of the list read directly), and each row's
key is the keyset position the page named for it *as stored* (remembered for the rows served, up to
``remember`` of them), so a value the listing had to make printable still pages exactly. A subclass names the
page function (:meth:`StoredKeySource.read`) and a row's identity; nothing here knows which list it is.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from textual.cache import LRUCache

from tui.widgets.row_sources import Key, Page, RowSource

T = TypeVar("T")
StoredKey = tuple[object, object]


@dataclass(frozen=True)
class PageAsk:
    """Which page to read: after a key, before one, or ``last`` (none of them: the first page)."""

    limit: int
    after: StoredKey | None = None
    before: StoredKey | None = None
    last: bool = False


class StoredKeySource(RowSource[T], Generic[T]):
    """Rows read by keyset through :meth:`read` (one query a call, both ways)."""

    reversible = True
    KEY_NAME: ClassVar[str] = "list"
    """Named by the error for a key that is not a pair."""

    def __init__(self, *, remember: int = 20_000) -> None:
        self._keys: LRUCache[Hashable, StoredKey] = LRUCache(remember)
        self._lock = threading.Lock()  # a superseded read may still be running in another worker thread

    def read(self, ask: PageAsk) -> tuple[Sequence[T], Sequence[StoredKey], bool]:
        """One page: its rows in list order, each row's stored key, and whether more lie beyond it."""
        raise NotImplementedError

    def ident(self, row: T) -> Key:
        raise NotImplementedError

    def shown_key(self, row: T) -> Key:
        """The key of a row this source did not serve (a re-read through a new source)."""
        return self.ident(row)

    def key(self, row: T) -> Key:
        with self._lock:
            stored = self._keys.get(self.ident(row))
        return stored if stored is not None else self.shown_key(row)

    def page(self, ask: PageAsk) -> tuple[Sequence[T], Sequence[StoredKey], bool]:
        """:meth:`read`, remembering each row's stored key."""
        rows, keys, more = self.read(ask)
        with self._lock:
            for row, stored in zip(rows, keys, strict=True):
                self._keys.set(self.ident(row), stored)
        return rows, keys, more

    def _served(self, ask: PageAsk) -> Page[T]:
        rows, _, more = self.page(ask)
        return Page(tuple(rows), more and bool(rows))

    def pair(self, key: Key) -> StoredKey:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"not a {self.KEY_NAME} key: {key!r}")
        return (key[0], key[1])

    def first(self, limit: int) -> Page[T]:
        return self._served(PageAsk(limit))

    def after(self, key: Key, limit: int) -> Page[T]:
        return self._served(PageAsk(limit, after=self.pair(key)))

    def before(self, key: Key, limit: int) -> Page[T]:
        return self._served(PageAsk(limit, before=self.pair(key)))

    def last(self, limit: int) -> Page[T]:
        return self._served(PageAsk(limit, last=True))


__all__ = ["PageAsk", "StoredKey", "StoredKeySource"]
