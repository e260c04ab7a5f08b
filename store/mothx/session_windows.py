"""The rows of a session list's view, and its first window remembered against the database files' identity."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.mothx.sessionindex import CACHE_FORMAT, SessionIndex

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir


class View:
    """The ids of one filtered, sorted list (a plain class: a dataclass costs ~0.3 ms to define at import)."""

    __slots__ = ("ids", "total", "complete", "_positions")

    def __init__(self, ids: list[str], total: int, complete: bool) -> None:
        self.ids = ids              # the first rows (all of them when complete)
        self.total = total
        self.complete = complete
        self._positions: dict[str, int] | None = None

    def positions(self) -> dict[str, int]:
        """Each id's place in :attr:`ids` (built on first use)."""
        if self._positions is None:
            self._positions = {sid: i for i, sid in enumerate(self.ids)}
        return self._positions


class RememberedWindow:
    """The first window of an unfiltered list, remembered against the database files' identity.

    Sorting every session for the first window grows with the directory (0.3 s at 100,000 sessions, against
    25 ms at 1,000): the sort keys join ``sessions.db`` with the aggregate cache, so no index serves them. The
    ids of that window (and the list's length) hold for as long as the files and the aggregate cache are
    unchanged, so an open of unchanged files reads them from the check records of
    :mod:`store.mothx.checkcache` (the same identity: device, inode, size, modification time of the database and
    its WAL) and the cache's own generation, which every change of the aggregates renews. Any change is a
    miss: the window is sorted again. Only unfiltered lists, so the records stay a handful; never for a
    private copy (its files are not the ones the identity names)."""

    __slots__ = ("sd", "index", "kind", "before", "mark")

    def __init__(self, sd: SessionDir, index: SessionIndex, kind: str) -> None:
        """``kind`` names the list and its window (e.g. ``list-window:last_active:desc:100``); "" for a list that
        is never remembered (a filtered one)."""
        from store.mothx import checkcache

        self.sd, self.index = sd, index
        meta = index.meta
        usable = bool(kind) and sd.db.private_copy is None and meta is not None and bool(meta.generation)
        self.kind = kind if usable else ""
        self.before = checkcache.identity(sd.db.path) if usable else None
        self.mark = [CACHE_FORMAT, meta.generation if meta is not None else "", str(index.cache_path or "")]

    def recall(self) -> View | None:
        from store.mothx import checkcache

        if not self.kind:
            return None
        value = checkcache.recall(self.kind, self.sd.db.path, self.before)
        if not (isinstance(value, dict) and value.get("mark") == self.mark):
            return None
        ids, total = value.get("ids"), value.get("total")
        if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids) and isinstance(total, int)):
            return None
        return View(ids, total, total == len(ids))

    def remember(self, view: View) -> None:
        from store.mothx import checkcache

        if self.kind and self.index.meta is not None and self.mark[1] == self.index.meta.generation:
            checkcache.remember(self.kind, self.sd.db.path, self.before,
                                {"mark": self.mark, "ids": view.ids, "total": view.total})
