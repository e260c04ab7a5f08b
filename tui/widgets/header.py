"""The one-line header every screen shows: app name, session directory (home as ``~``), open-mode badge.

It follows the app's ``location`` and ``badge`` reactives, so a screen only has to yield it. No clock.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from tui.widgets.badge import ModeBadge


class AppHeader(Horizontal):
    DEFAULT_CSS = """
    AppHeader {
        height: 1;
        dock: top;
        background: $panel;
        color: $foreground;
    }
    AppHeader > #header-title {
        width: auto;
        padding: 0 1;
        text-style: bold;
        color: $primary;
    }
    AppHeader > #header-location {
        width: 1fr;
        height: 1;
        color: $foreground-muted;
        text-overflow: ellipsis;
        text-wrap: nowrap;
    }
    AppHeader > #header-section {
        width: auto;
        padding: 0 1;
        color: $foreground;
    }
    """

    def __init__(self, section: str = "") -> None:
        super().__init__()
        self._section = section

    def compose(self) -> ComposeResult:
        yield Static("Sessionscope", id="header-title", markup=False)
        yield Static("", id="header-location", markup=False)
        if self._section:
            yield Static(self._section, id="header-section", markup=False)
        yield ModeBadge(getattr(self.app, "badge", "RW"), id="header-badge")

    def on_mount(self) -> None:
        if hasattr(self.app, "location"):
            self.watch(self.app, "location", self._show_location)
        if hasattr(self.app, "badge"):
            self.watch(self.app, "badge", self._show_badge)

    def _show_location(self, location: str) -> None:
        self.query_one("#header-location", Static).update(location)

    def _show_badge(self, badge: str) -> None:
        self.query_one(ModeBadge).set_text(badge)
