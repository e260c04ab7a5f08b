"""The clock of a list that shows countdowns (lease expiries, next attempts): one timer repaints them every
second without reading the database, drops the rows' change marks after one refresh cycle, and one more timer
wakes the screen when the earliest deadline shown passes, so it reads again (a run may be orphaned now, a
worker may act on a delivery).

The countdowns follow the app's clock (:func:`clock_now`); a test host without one uses the wall clock.
:class:`ListTimers` is owned by a screen (the Runs and the Deliveries screens); it touches only the list and
the facts widget the screen hands it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.timer import Timer
    from textual.widget import Widget

    from tui.widgets.row_list import RowList

TICK_S = 1.0
"""The countdowns repaint this often (no database read)."""

MARK_HOLD_S = 2.0
"""A row marked as changed by a live refresh stays marked until the next refresh, or this long at most."""


def clock_now(node: DOMNode) -> float:
    """The app's clock (Unix seconds), or the wall clock on a test host."""
    from tui.context import services

    app = services(node)
    return float(app.clock()) if app is not None else time.time()


@dataclass(eq=False)
class ListTimers:
    """The repaint tick and the deadline wake-up of one list with countdowns.

    ``rows()`` and ``facts()`` give the list and the widget showing the selected row's facts (both repainted
    each tick). ``grace_s``: how long after a deadline the wake-up comes (the database's clock agrees then);
    ``horizon_s``: deadlines further away are not waited for (a re-read happens on the next hint or refresh).
    """

    node: Widget
    rows: Callable[[], RowList[Any]]
    facts: Callable[[], Widget]
    grace_s: float
    horizon_s: float
    tick_s: float = TICK_S
    hold_s: float = MARK_HOLD_S
    _tick: Timer | None = field(default=None, init=False)
    _wake: Timer | None = field(default=None, init=False)
    _wake_at: float | None = field(default=None, init=False)
    _marked_at: float = field(default=0.0, init=False)

    def start(self) -> None:
        """Start the repaint tick (on mount)."""
        self._tick = self.node.set_interval(self.tick_s, self.tick)

    def loaded(self, changed: bool) -> None:
        """The list was read again; ``changed``: it marked rows that changed (they stay marked one cycle)."""
        if changed:
            self._marked_at = time.monotonic()

    def tick(self) -> None:
        """Repaint the countdowns (no read); drop change marks after one refresh cycle."""
        lst = self.rows()
        if lst.changed and time.monotonic() - self._marked_at >= self.hold_s:
            lst.clear_marks()
        lst.refresh_cells()
        self.facts().refresh()

    def plan(self, deadline: float | None, woken: Callable[[], None]) -> None:
        """Call ``woken`` once the earliest ``deadline`` shown (Unix seconds; ``None``: none) has passed; a
        deadline planned already is kept, another one replaces it."""
        if deadline == self._wake_at and self._wake is not None:
            return
        if self._wake is not None:
            self._wake.stop()
            self._wake = None
        self._wake_at = deadline
        if deadline is None:
            return
        delay = deadline - clock_now(self.node) + self.grace_s
        if 0 < delay <= self.horizon_s:
            self._wake = self.node.set_timer(delay, partial(self._woken, woken))

    def _woken(self, woken: Callable[[], None]) -> None:
        self._wake = None
        self._wake_at = None
        woken()


__all__ = ["MARK_HOLD_S", "TICK_S", "ListTimers", "clock_now"]
