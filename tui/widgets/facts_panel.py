"""The four lines under a list that show its selected row in full (the Runs and Deliveries screens' facts).

A subclass says what the lines are (:meth:`FactsPanel.lines`, ``Text`` objects built from safe strings); the
panel keeps the row, reads the app's clock (``app.clock``, or the one given, else the wall clock) and joins the
lines into one no-wrap ``Text``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from rich.text import Text
from textual.widget import Widget

from tui.context import services

R = TypeVar("R")


class FactsPanel(Widget, Generic[R]):
    """Four no-wrap lines about ``row`` (``None``: nothing selected); :meth:`show` sets the row and repaints."""

    DEFAULT_CSS = """
    FactsPanel {
        height: 4;
        padding: 0 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, clock: Callable[[], float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.row: R | None = None
        self.clock = clock

    def now(self) -> float:
        """Seconds since the epoch by the given clock, the app's, else the wall clock (a test host)."""
        app = services(self)
        clock = self.clock or (app.clock if app is not None else None)
        return float(clock()) if clock is not None else time.time()

    def show(self, row: R | None) -> None:
        if row is not None and row is self.row:
            return  # the same row object: nothing to draw again
        self.row = row
        self.refresh()

    def lines(self) -> list[Text]:
        """The lines for :attr:`row` (a subclass draws them)."""
        raise NotImplementedError

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(self.lines()):
            if i:
                text.append("\n")
            text.append_text(line)
        return text


__all__ = ["FactsPanel"]
