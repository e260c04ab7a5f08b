"""The state every part of :class:`tui.widgets.row_list.RowList` shares, and what it shows.

:class:`RowListState` holds the window of rows and what is known around it, the cursor, the reads on their way,
the caches' slots, the list's messages (``RowList.Highlighted`` / ``Selected`` / ``Loaded`` / ``Failed``: their
handlers are named ``on_row_list_*``) and the read-only views of that state (:attr:`~RowListState.selected`,
:meth:`~RowListState.visible_rows`, :meth:`~RowListState.count_text`, …).

The widget is written in parts, each a class over this one, composed by :class:`tui.widgets.row_list.RowList`:

* :mod:`tui.widgets.row_paging` — reading pages in a worker, the window around the cursor, re-reading rows;
* :mod:`tui.widgets.row_cursor` — the cursor, its keys, clicks and the ``Highlighted`` message;
* :mod:`tui.widgets.row_drawing` — styles, geometry, the strip cache and the lines drawn;
* :mod:`tui.widgets.row_list` — the public API (sources, reload, live re-reads, marks), the styles' CSS.

A part calls another part's methods through the stubs at the end of :class:`RowListState`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from textual.cache import LRUCache
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from tui.lifecycle import ReportsWorkerFailures
from tui.widgets.row_columns import Column
from tui.widgets.row_reads import Read
from tui.widgets.row_sources import Key, Page, RowSource
from tui.widgets.row_strips import ListStyles

T = TypeVar("T")


@dataclass
class ListMessage(Message):
    """What every message of a :class:`~tui.widgets.row_list.RowList` carries: the list, as the message's
    ``control`` (so ``@on(RowList.Selected, "#id")`` matches)."""

    row_list: RowListState[Any]

    @property
    def control(self) -> RowListState[Any]:
        return self.row_list


class RowListState(ReportsWorkerFailures, ScrollView, Generic[T]):
    """The shared state of a row list (see the module doc); not a widget to use on its own."""

    PAGE_SIZE: ClassVar[int] = 100
    """Rows per read."""
    WINDOW_PAGES: ClassVar[int] = 5
    """A reversible source's window is trimmed to this many pages."""
    DISPLAY_CAP: ClassVar[int] = 2000
    """A forward-only source stops being read after this many rows ("2,000 of >2,000")."""
    STRIP_CACHE: ClassVar[int] = 400
    MARK_HOLD_S: ClassVar[float | None] = None
    """Marks of changed rows are cleared after this many seconds (None: they stay until the next marks)."""

    # --- public messages --------------------------------------------------------------------------------------

    @dataclass
    class Highlighted(ListMessage, namespace="row_list"):
        """The cursor's row changed (another row, or the same row re-read); ``row`` is None when empty."""

        row: Any

    @dataclass
    class Selected(ListMessage, namespace="row_list"):
        """``enter`` or a double click on ``row``."""

        row: Any

    @dataclass
    class Loaded(ListMessage, namespace="row_list"):
        """Rows arrived (a page, a reload or a re-read): counts shown elsewhere may change. ``changed``: the
        idents marked by this update."""

        changed: frozenset[Key] = frozenset()

    @dataclass
    class Failed(ListMessage, namespace="row_list"):
        """A read failed; ``error`` is one safe line (also shown in the list)."""

        error: str

    # --- the state --------------------------------------------------------------------------------------------------

    def __init__(
        self,
        source: RowSource[T] | None = None,
        *,
        columns: Sequence[Column[T]] | None = None,
        empty_text: str = "No rows.",
        loading_text: str = "Loading…",
        page_size: int | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.columns: tuple[Column[T], ...] = tuple(columns if columns is not None else self.make_columns())
        self.empty_text = empty_text
        self.loading_text = loading_text
        self.page_size = max(1, page_size or self.PAGE_SIZE)
        self.source: RowSource[T] | None = None
        self.generation = 0
        self.rows: list[T] = []  # the window
        self.has_before = False  # the source has rows before the window
        self.has_after = False  # ... after it
        self.loaded = False  # a page (or an error) arrived for this generation
        self.error = ""
        self.message = ""  # shown instead of rows (show_message)
        self.total: int | None = None
        self.changed: frozenset[Key] = frozenset()
        self._cursor = 0
        self._seq = 0
        self._pending: Read | None = None
        self._reread_pending: set[Key] = set()
        self._reread_running = False
        self._highlighted: tuple[Key, Any] | None = None
        self._styles: ListStyles | None = None
        self._layout: tuple[int, list[int | None]] | None = None
        self._strips: LRUCache[tuple[Key, bool, bool, int], Strip] = LRUCache(self.STRIP_CACHE)
        self._mark_timer: Timer | None = None
        self._idents: dict[Key, int] | None = None
        self._ready = False
        self._initial: tuple[RowSource[T] | None, Page[T] | None, int | None] | None = (source, None, None)

    # --- what is shown ----------------------------------------------------------------------------------------

    @property
    def cursor(self) -> int:
        """The cursor's index in the window (:attr:`rows`)."""
        return self._cursor

    @cursor.setter
    def cursor(self, value: int) -> None:
        self._move_to(value)

    @property
    def selected(self) -> T | None:
        return self.rows[self._cursor] if 0 <= self._cursor < len(self.rows) else None

    def row_of(self, ident: Key) -> T | None:
        index = self._ident_index().get(ident)
        return None if index is None else self.rows[index]

    def visible_rows(self) -> list[T]:
        top = int(self.scroll_offset.y)
        return self.rows[top:top + self._page_rows]

    @property
    def capped(self) -> bool:
        """A forward-only source has more rows than the display cap."""
        return self.has_after and not self._reversible and len(self.rows) >= self.DISPLAY_CAP

    def count_text(self) -> str:
        """How many rows: ``"10,000"`` when known; ``"2,000 of >2,000"`` when only a lower bound is."""
        if self.total is not None:
            return f"{self.total:,}"
        n = len(self.rows)
        if self.has_before or self.has_after:
            return f"{n:,} of >{n:,}"
        return f"{n:,}"

    @property
    def _reversible(self) -> bool:
        return self.source is not None and self.source.reversible

    @property
    def _page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # the header line is not a row

    @property
    def _margin(self) -> int:
        """Rows left beyond the screen before the next page is read."""
        return max(self._page_rows, 10)

    # --- what the other parts provide (stubs; the parts override them) -------------------------------------------

    def make_columns(self) -> Sequence[Column[T]]:
        """The columns, when none are passed to the constructor (override in a list)."""
        return ()

    def row_style(self, row: T) -> str | None:
        """A component class for the whole row (``"damaged"``: ``row-list--damaged``), or None."""
        return None

    def set_source(self, source: RowSource[T] | None, *, keep_cursor: bool = False, first_page: Page[T] | None = None,
                   total: int | None = None) -> None:
        raise NotImplementedError  # tui.widgets.row_list

    def reload(self, keep_cursor: bool = True, *, marks: Iterable[Key] = ()) -> None:
        raise NotImplementedError  # tui.widgets.row_list

    def mark_changed(self, idents: Iterable[Key]) -> None:
        raise NotImplementedError  # tui.widgets.row_list

    def _bump(self) -> None:
        raise NotImplementedError  # tui.widgets.row_paging

    def _next_seq(self) -> int:
        raise NotImplementedError  # tui.widgets.row_paging

    def _start(self, read: Read) -> None:
        raise NotImplementedError  # tui.widgets.row_paging

    def _read_edges(self) -> None:
        raise NotImplementedError  # tui.widgets.row_paging

    def _ident_index(self) -> dict[Key, int]:
        raise NotImplementedError  # tui.widgets.row_paging

    def _move_to(self, index: int) -> None:
        raise NotImplementedError  # tui.widgets.row_cursor

    def _scroll_cursor_into_view(self) -> None:
        raise NotImplementedError  # tui.widgets.row_cursor

    def _post_highlight(self) -> None:
        raise NotImplementedError  # tui.widgets.row_cursor

    def _set_virtual_size(self) -> None:
        raise NotImplementedError  # tui.widgets.row_drawing


__all__ = ["ListMessage", "RowListState"]
