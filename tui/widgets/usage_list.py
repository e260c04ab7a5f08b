"""The group list of the Usage screen: a :class:`~tui.widgets.row_list.RowList` over one view of
:func:`store.usage.usage` (per day, session, model or work dir), a bar of tokens per row.

:class:`UsageSource` reads the view in the list's worker thread: one call of :func:`store.usage.usage` (one
``GROUP BY`` query over ``request_stats``, one over the captured usage records), plus the per-day view the
screen's sparkline draws when the list shows another grouping. The captured records are read once per
:class:`UsageData` (the screen's; a refresh makes a new one) and shared by every view, so switching the grouping
or the source does not read the checkpoints again. The rows are then held (a :class:`ListSource`): a view has at
most a few thousand groups.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on

from store.usage import NO_PRICES, CapturedRecords, Group, PriceTable, Source, UsageReport, UsageRow
from tui import actions
from tui import usage_text as ut
from tui.safe import notify
from tui.widgets.row_list import Column, Key, ListSource, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

BAR_WIDTH = 24
"""Cells of the widest bar (the group with the most tokens) where keys are long (sessions, work dirs)."""

WIDE_BAR = 40
"""... where keys are short (days, models)."""


def bar_width(by: Group) -> int:
    return WIDE_BAR if by in ("day", "model") else BAR_WIDTH


@dataclass(frozen=True)
class UsageLine:
    """One line of the list: a group, the view it belongs to and the largest total of that view (the bar's
    full width)."""

    row: UsageRow
    by: Group
    largest: int
    title: str = ""  # a mothx session row: the session's title (else its first user text), when it still exists

    @property
    def ident(self) -> Key:
        return self.row.ident


class UsageData:
    """What every view of one screen shares: the directory, the price table and the captured records (read on
    first need, in a worker thread, once)."""

    def __init__(self, sd: SessionDir, prices: PriceTable = NO_PRICES) -> None:
        self.sd = sd
        self.prices = prices
        self._captured: CapturedRecords | None = None
        self._lock = threading.Lock()

    def captured(self) -> CapturedRecords:
        from store.usage import captured_usage

        with self._lock:
            if self._captured is None:
                self._captured = captured_usage(self.sd)
            return self._captured


class UsageSource(RowSource[UsageLine]):
    """One view, read once per :meth:`first`, then held; :attr:`report` and :attr:`daily` are what it read."""

    reversible = True

    def __init__(self, data: UsageData, by: Group, source: Source) -> None:
        self.data = data
        self.by: Group = by
        self.source: Source = source
        self.report: UsageReport | None = None
        self.daily: UsageReport | None = None
        self._rows: ListSource[UsageLine] | None = None
        self._lock = threading.Lock()

    def read(self) -> ListSource[UsageLine]:
        from store.usage import usage

        captured = self.data.captured() if self.source != "mothx" else None
        report = usage(self.data.sd, self.by, source=self.source, prices=self.data.prices, captured=captured)
        daily = report if self.by == "day" else usage(self.data.sd, "day", source=self.source,
                                                        prices=self.data.prices, captured=captured)
        largest = max((r.total_tokens for r in report.rows), default=0)
        titles = self.titles(report) if self.by == "session" else {}
        self.report, self.daily = report, daily
        return ListSource([UsageLine(r, self.by, largest, titles.get(r.key, "") if not r.agent else "")
                           for r in report.rows], key=lambda line: line.ident)

    def titles(self, report: UsageReport) -> dict[str, str]:
        """The titles of the report's mothx sessions that still exist (index lookups, one batch)."""
        ids = [r.key for r in report.rows if not r.agent and r.key and r.session_exists]
        if not ids or not self.data.sd.schema.has("entries"):
            return {}
        from store.mothx.aggregates import read_layout, session_texts

        sd = self.data.sd
        return {sid: title or preview for sid, (title, preview) in session_texts(sd, read_layout(sd), ids).items()}

    def _held(self) -> ListSource[UsageLine]:
        with self._lock:
            if self._rows is None:
                self._rows = self.read()
            return self._rows

    def key(self, row: UsageLine) -> Key:
        return row.ident

    def first(self, limit: int) -> Page[UsageLine]:
        with self._lock:
            self._rows = None
        return self._held().first(limit)

    def after(self, key: Key, limit: int) -> Page[UsageLine]:
        return self._held().after(key, limit)

    def before(self, key: Key, limit: int) -> Page[UsageLine]:
        return self._held().before(key, limit)

    def last(self, limit: int) -> Page[UsageLine]:
        return self._held().last(limit)

    def total(self) -> int:
        return self._held().total()


def bar_cell(line: UsageLine) -> Text:
    """The row's bar: block characters, as wide as its share of the view's largest group."""
    return Text(ut.bar(line.row.total_tokens, line.largest, bar_width(line.by)))


def key_cell(line: UsageLine) -> str:
    return ut.label(line.by, line.row)


def _number(key: str, title: str, value: Callable[[UsageRow], int], priority: int) -> Column[UsageLine]:
    """A kind of token, short (``79.8M``); the detail below the list and the command line give exact counts."""
    return Column(key, title, lambda line: ut.short_tokens(value(line.row)), min_width=7, align="right",
                  priority=priority)


def columns_for(by: Group, priced: bool) -> list[Column[UsageLine]]:
    """The list's columns for one grouping (a session row also names its agent and work dir; cost only with a
    price table)."""
    cols: list[Column[UsageLine]] = [
        Column("key", ut.KEY_TITLES[by], key_cell, min_width=10 if by == "day" else 14,
               max_width=10 if by == "day" else None, grow=0 if by == "day" else 3, priority=0,
               overflow="start" if by == "cwd" else "end",
               style=lambda line: None if line.row.key else "dim"),
    ]
    if by == "session":
        cols[0] = Column("key", "SESSION", key_cell, min_width=16, max_width=36, grow=1, priority=0,
                         style=lambda line: None if line.row.key else "dim")
        cols += [
            Column("title", "TITLE", lambda line: line.title, min_width=12, grow=3, priority=5),
            Column("agent", "AGENT", lambda line: ut.agent_label(line.row), min_width=6, max_width=6, priority=3),
            Column("cwd", "WORK DIR", lambda line: line.row.cwd or ("(deleted)" if not line.row.session_exists else ""),
                   min_width=10, grow=2, priority=4, overflow="start",
                   style=lambda line: "muted" if line.row.session_exists else "warn"),
        ]
    cols += [
        Column("bar", "TOKENS", bar_cell, min_width=bar_width(by), max_width=bar_width(by), priority=1,
               style=lambda line: "accent"),
        Column("total", "TOTAL", lambda line: ut.short_tokens(line.row.total_tokens), min_width=7, align="right",
               priority=0),
        Column("requests", "REQS", lambda line: ut.tokens(line.row.requests), min_width=6, align="right",
               priority=5),
        _number("input", "INPUT", lambda r: r.input_tokens, 2),
        _number("output", "OUTPUT", lambda r: r.output_tokens, 2),
        _number("cache-write", "CACHE W", lambda r: r.cache_write_tokens, 6),
        _number("cache-read", "CACHE R", lambda r: r.cache_read_tokens, 6),
    ]
    if priced:
        cols.append(Column("cost", "COST", lambda line: ut.cost(line.row.cost, partial=line.row.unpriced > 0),
                           min_width=9, align="right", priority=1))
    return cols


class UsageList(RowList[UsageLine]):
    """One group per line: its key, a bar of its tokens, the totals and the token kinds."""

    ACTION_SCOPE: ClassVar[str] = "usage-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Usage groups"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, empty_text="No usage recorded.", loading_text="Adding up the tokens…")

    def make_columns(self) -> list[Column[UsageLine]]:
        return columns_for("day", False)

    def row_style(self, row: UsageLine) -> str | None:
        return "damaged" if row.row.damaged else None

    def show(self, data: UsageData, by: Group, source: Source, *, keep_cursor: bool = False) -> None:
        self.set_columns(columns_for(by, data.prices.configured))
        self.set_source(UsageSource(data, by, source), keep_cursor=keep_cursor)

    @property
    def usage_source(self) -> UsageSource | None:
        return self.source if isinstance(self.source, UsageSource) else None

    @on(RowList.Failed)
    def _notify_failure(self, message: RowList.Failed) -> None:
        notify(self, message.error, title="Cannot read usage", severity="error")


__all__ = ["BAR_WIDTH", "WIDE_BAR", "bar_width", "UsageData", "UsageLine", "UsageList", "UsageSource", "bar_cell", "columns_for"]
