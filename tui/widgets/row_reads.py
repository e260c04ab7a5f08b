"""The reads a :class:`tui.widgets.row_list.RowList` asks of its source, and the messages its worker posts back
(only the widget itself handles them: none bubbles)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from textual.message import Message

from store.safetext import one_line
from tui.widgets.row_sources import Key, Page

ReadKind = Literal["first", "last", "after", "before"]


@dataclass(frozen=True)
class Read:
    """One page read the widget asked for. ``replace``: the page becomes the window (a jump or a reload);
    else it extends the window at the end (``after``) or the start (``before``)."""

    generation: int
    seq: int
    kind: ReadKind
    limit: int
    key: Key = None
    replace: bool = False
    count: bool = False  # also ask the source for its total
    cursor_to: Literal["first", "last"] | None = None
    keep: Key = None  # ident to put the cursor back on
    keep_line: int = 0  # the screen line the kept row was on
    keep_index: int = 0  # where the cursor goes when the kept row is gone
    marks: frozenset[Key] = frozenset()  # idents to compare with what was shown, and mark when changed


@dataclass
class PageLoaded(Message, bubble=False):
    """A page arrived (posted by the read worker; only the widget handles it)."""

    read: Read
    page: Page[Any]
    total: int | None


@dataclass
class PageFailed(Message, bubble=False):
    """A page read failed: ``error`` is one safe line (posted by the read worker; only the widget handles it)."""

    read: Read
    error: str


@dataclass
class RowsReread(Message, bubble=False):
    """Named rows re-read (``rows`` None: the source cannot read single rows), or the error of that read."""

    generation: int
    rows: Mapping[Key, Any] | None
    idents: tuple[Key, ...]
    error: str = ""


def describe(exc: BaseException) -> str:
    """One safe line for an exception a read raised."""
    try:
        from tui.formatting import describe_error

        return one_line(describe_error(exc))
    except Exception:  # noqa: BLE001 - describing must never fail
        return one_line(f"Unexpected {type(exc).__name__}: {exc}")



__all__ = ["PageFailed", "PageLoaded", "Read", "ReadKind", "RowsReread", "describe"]
