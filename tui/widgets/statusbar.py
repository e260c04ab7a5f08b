"""The one-line status bar of a screen: a count on the left, the query in the middle, integrity on the right.

One widget drawing one line (it is on the start path); the parts are reactives set by the screen. The
integrity part follows the app's ``integrity`` reactive by itself.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from store.safetext import one_line
from tui.context import services

FIRST_RUN_HINT = "new here? ? lists the keys · : jumps between screens · ctrl+p finds any action"


class StatusBar(Widget):
    """`` 43 sessions  sort: last active ↓ · /harbor ·········· integrity ok ``"""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "status-bar--count",
        "status-bar--query",
        "status-bar--ok",
        "status-bar--bad",
    }

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $panel;
        color: $foreground-muted;
    }
    StatusBar > .status-bar--count { color: $foreground; text-style: bold; }
    StatusBar > .status-bar--query { color: $foreground-muted; }
    StatusBar > .status-bar--ok { color: $success; }
    StatusBar > .status-bar--bad { color: $error; text-style: bold; }
    """

    count: reactive[str] = reactive("")
    query_text: reactive[str] = reactive("")
    integrity: reactive[str] = reactive("")
    hint: reactive[str] = reactive("")
    """Shown in the middle while there is no query (the first-run hint)."""

    @property
    def integrity_bad(self) -> bool:
        return self.integrity.startswith("integrity") and self.integrity != "integrity ok"

    def on_mount(self) -> None:
        app = services(self)
        if app is not None:  # a test host has no integrity line to show
            self.watch(self.app, "integrity", self._set_integrity)
            if app.first_run:
                self.hint = FIRST_RUN_HINT

    def _set_integrity(self, text: str) -> None:
        self.integrity = text

    def render(self) -> Text:
        width = self.size.width
        # every part may hold data (a search typed, a facet's work dir, an error naming a lease holder)
        integrity = one_line(self.integrity)
        count = one_line(self.count)
        query = one_line(self.query_text)
        if self.hint:
            query = f"{query}  ·  {self.hint}" if query else self.hint
        right = f" {integrity} " if integrity else ""
        if cell_len(right) > (width * 2) // 3:
            right = set_cell_size(right, max(0, (width * 2) // 3 - 2)) + "… "
        left = f" {count} " if count else " "
        room = width - cell_len(left) - cell_len(right)
        middle = f" {query}" if query else ""
        if cell_len(middle) > room:
            middle = set_cell_size(middle, max(0, room - 1)) + "…" if room > 1 else ""
        line = Text(no_wrap=True, overflow="crop")
        line.append(left, self.get_component_rich_style("status-bar--count", partial=True))
        line.append(middle, self.get_component_rich_style("status-bar--query", partial=True))
        line.append(" " * max(0, width - cell_len(line.plain) - cell_len(right)))
        style = "status-bar--bad" if self.integrity_bad else "status-bar--ok"
        line.append(right, self.get_component_rich_style(style, partial=True))
        return line
