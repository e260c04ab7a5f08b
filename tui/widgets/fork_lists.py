"""The Forks screen's two lists, both :class:`~tui.widgets.row_list.RowList` subclasses.

* :class:`FamilyList`: a session's fork family in tree order (root first, each child below its parent,
  indented), each row with its fork kind, boundary seq and seed length;
* :class:`BoundaryList`: the turns of one session as candidate fork boundaries, valid (with the boundary a fork
  there copies up to) or invalid with the rule that forbids it.

Both read their rows through :class:`StoreSource`: one store function (``store.mothx.fork_family.family`` /
``candidates``) called in the list's worker thread on the first page, its frozen rows then paged from memory
(a family or a turn list is read whole by a few indexed queries).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from rich.text import Text

from tui import actions
from tui.widgets.row_list import Column, Key, ListSource, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.fork_family import FamilyMember, TurnCandidate
    from store.mothx.sessiondir import SessionDir

T = TypeVar("T")


class StoreSource(RowSource[T], Generic[T]):
    """Rows of one store function, read once (in the worker) and then paged like a :class:`ListSource`."""

    reversible = True

    def __init__(self, load: Callable[[], Sequence[T]], key: Callable[[T], Key],
                 rows: Sequence[T] | None = None) -> None:
        self._load = load
        self._key = key
        self._rows: ListSource[T] | None = None if rows is None else ListSource(rows, key)  # read already
        self._lock = threading.Lock()

    def _list(self) -> ListSource[T]:
        with self._lock:
            if self._rows is None:
                self._rows = ListSource(self._load(), self._key)
            return self._rows

    def key(self, row: T) -> Key:
        return self._key(row)

    def first(self, limit: int) -> Page[T]:
        return self._list().first(limit)

    def after(self, key: Key, limit: int) -> Page[T]:
        return self._list().after(key, limit)

    def before(self, key: Key, limit: int) -> Page[T]:
        return self._list().before(key, limit)

    def last(self, limit: int) -> Page[T]:
        return self._list().last(limit)

    def total(self) -> int | None:
        return self._list().total()

    def reread(self, idents: Sequence[Key]) -> Mapping[Key, T | None] | None:
        return None


def _tree(row: FamilyMember) -> Text:
    text = Text("  " * row.depth)
    text.append("▸ " if row.selected else ("└ " if row.depth else ""), style="bold" if row.selected else "dim")
    text.append(row.session_id, style="bold" if row.selected else "")
    return text


class FamilyList(RowList["FamilyMember"]):
    """A session's fork family, root first."""

    ACTION_SCOPE: ClassVar[str] = "fork-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)

    def make_columns(self) -> list[Column[FamilyMember]]:
        return [
            Column("session", "SESSION", _tree, min_width=18, max_width=40, grow=1),
            Column("kind", "KIND", lambda r: r.fork_kind or ("missing" if r.missing else "root"), min_width=7,
                   style=lambda r: "dim" if not r.fork_kind else None),
            Column("boundary", "BOUNDARY", lambda r: str(r.boundary_seq) if r.fork_kind else "-", min_width=8,
                   align="right", priority=2),
            Column("seed", "SEED", lambda r: str(r.seed_length) if r.fork_kind else "-", min_width=5, align="right",
                   priority=2),
            Column("title", "TITLE", lambda r: r.title or "(no title)", min_width=12, grow=3,
                   style=lambda r: None if r.title else "dim"),
        ]

    def show_family(self, sd: SessionDir, session_id: str, rows: Sequence[FamilyMember] | None = None) -> None:
        """Read the family of ``session_id`` (``rows``: read already, e.g. while the app started)."""
        from store.mothx.fork_family import family

        self.set_source(StoreSource(lambda: family(sd, session_id).members, key=lambda m: m.session_id, rows=rows))


def _verdict(row: TurnCandidate) -> Text:
    if row.valid:
        return Text(f"valid → {row.boundary_seq}", style="bold")
    return Text("invalid", style="dim")


class BoundaryList(RowList["TurnCandidate"]):
    """One session's turns as fork boundaries."""

    ACTION_SCOPE: ClassVar[str] = "fork-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)

    def make_columns(self) -> list[Column[TurnCandidate]]:
        return [
            Column("n", "#", lambda r: str(r.index) if r.index else "-", min_width=3, align="right"),
            Column("status", "STATUS", lambda r: r.status or "-", min_width=9),
            Column("seqs", "SEQS", lambda r: f"{r.start_seq}..{r.end_seq if r.end_seq is not None else 'open'}"
                   if r.index else "-", min_width=13, priority=3),
            Column("at", "AT", lambda r: str(r.at_seq) if r.at_seq else "-", min_width=5, align="right", priority=2),
            Column("fork", "FORK", _verdict, min_width=12),
            Column("reason", "REASON", lambda r: r.reason or "", min_width=12, grow=3, style=lambda r: "dim"),
        ]

    def row_style(self, row: TurnCandidate) -> str | None:
        return None if row.valid else "dim"

    def show_session(self, sd: SessionDir, session_id: str, rows: Sequence[TurnCandidate] | None = None) -> None:
        """Read the turns of ``session_id`` as boundaries (``rows``: read already)."""
        from store.mothx.fork_family import candidates

        self.set_source(StoreSource(lambda: candidates(sd, session_id), key=lambda c: (c.index, c.turn_id),
                                    rows=rows))


__all__ = ["StoreSource", "FamilyList", "BoundaryList"]
