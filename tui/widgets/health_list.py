"""The check list of the Health screen: a :class:`~tui.widgets.row_list.RowList` over health checks.

The rows come from one store function, :func:`store.health.run_checks`, called by :class:`HealthSource` in the
list's worker thread (the checks read the database and the files; the UI never waits for them). The long
integrity check is not run here: the screen runs it on request and hands its row in (``overrides``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import on

from store.health.model import HealthCheck
from tui import actions
from tui.safe import notify
from tui.widgets.row_list import Column, Key, ListSource, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

STATUS_STYLE = {"ok": "good", "warn": "warn", "error": "bad"}


class HealthSource(RowSource[HealthCheck]):
    """Every check, read once per :meth:`first` (one call of :func:`store.health.run_checks`), then held.

    ``overrides`` replaces rows by id (the integrity check's result, once it has run)."""

    reversible = True

    def __init__(self, sd: SessionDir, overrides: Callable[[], dict[str, HealthCheck]] | None = None) -> None:
        self.sd = sd
        self.overrides = overrides
        self._rows: ListSource[HealthCheck] | None = None
        self._lock = threading.Lock()

    def read(self) -> list[HealthCheck]:
        from store.health import run_checks

        rows = run_checks(self.sd)
        extra = self.overrides() if self.overrides is not None else {}
        return [extra.get(c.id, c) for c in rows]

    def _held(self) -> ListSource[HealthCheck]:
        with self._lock:
            if self._rows is None:
                self._rows = ListSource(self.read(), key=lambda c: c.id)
            return self._rows

    def key(self, row: HealthCheck) -> Key:
        return row.id

    def first(self, limit: int) -> Page[HealthCheck]:
        with self._lock:
            self._rows = None
        return self._held().first(limit)

    def after(self, key: Key, limit: int) -> Page[HealthCheck]:
        return self._held().after(key, limit)

    def before(self, key: Key, limit: int) -> Page[HealthCheck]:
        return self._held().before(key, limit)

    def last(self, limit: int) -> Page[HealthCheck]:
        return self._held().last(limit)

    def total(self) -> int:
        return self._held().total()

    @property
    def checks(self) -> list[HealthCheck]:
        return list(self._rows.rows) if self._rows is not None else []


class HealthList(RowList[HealthCheck]):
    """One check per line: status, check, detail, the repair that fixes it."""

    ACTION_SCOPE: ClassVar[str] = "health-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Health checks"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, empty_text="No checks.", loading_text="Checking the session directory…")

    def make_columns(self) -> list[Column[HealthCheck]]:
        return [
            Column("status", "STATUS", lambda c: c.status.upper(), min_width=6, max_width=6, priority=0,
                   style=lambda c: STATUS_STYLE.get(c.status)),
            Column("check", "CHECK", lambda c: c.id, min_width=18, max_width=34, grow=1, priority=1),
            Column("detail", "DETAIL", lambda c: c.detail, min_width=20, grow=4, priority=0),
            Column("repair", "REPAIR", lambda c: c.repair, min_width=10, max_width=36, grow=1, priority=2,
                   overflow="end", style=lambda c: "accent" if c.repair and c.status != "ok" else "muted"),
        ]

    def show(self, sd: SessionDir, overrides: Callable[[], dict[str, HealthCheck]] | None = None, *,
             keep_position: bool = False) -> None:
        self.set_source(HealthSource(sd, overrides), keep_cursor=keep_position)

    @property
    def checks(self) -> list[HealthCheck]:
        return list(self.rows)

    @on(RowList.Failed)
    def _notify_failure(self, message: RowList.Failed) -> None:
        notify(self, message.error, title="Cannot check", severity="error")


__all__ = ["HealthList", "HealthSource", "STATUS_STYLE"]
