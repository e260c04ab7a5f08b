"""The screens shown when there is no session directory to browse: welcome (none found) and open failure."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.containers import Center, Vertical
from textual.screen import Screen
from textual.widgets import Static

from store.paths import captures_dir
from tui import actions
from tui.context import services
from tui.formatting import shown_path
from tui.safe import data_line, data_text
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar

_CSS = """
WelcomeScreen, OpenFailedScreen {
    align: center middle;
}
WelcomeScreen #welcome-box, OpenFailedScreen #welcome-box {
    width: 84;
    max-width: 100%;
    height: auto;
    padding: 1 2;
    border: round $primary;
    background: $surface;
}
OpenFailedScreen #welcome-box {
    border: round $error;
}
#welcome-title {
    text-style: bold;
    margin-bottom: 1;
}
OpenFailedScreen #welcome-title {
    color: $error;
}
#welcome-error {
    margin-bottom: 1;
}
#welcome-keys {
    color: $foreground-muted;
}
#welcome-status {
    margin-top: 1;
    color: $accent;
}
"""


class WelcomeScreen(Screen[None]):
    """No session directory was found at the default place: offer the demo."""

    DEFAULT_CSS = _CSS
    ACTION_SCOPE: ClassVar[str] = "welcome"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Welcome screen"

    def __init__(self, default_dir: Path) -> None:
        super().__init__()
        self.default_dir = default_dir

    def compose(self) -> ComposeResult:
        yield AppHeader(show_badge=False)  # nothing is open: no mode to show
        with Center():
            with Vertical(id="welcome-box"):
                yield Static(data_line(f"No mothx session directory at {shown_path(self.default_dir)}"), id="welcome-title",
                             markup=False)
                yield Static(
                    "Sessionscope browses and repairs the sessions.db of a mothx session directory. "
                    "Point it at one with `sessionscope --dir PATH`, or open the demo directory to look around. "
                    f"Captured Claude Code and Codex sessions (`sessionscope capture claude-code`) go to "
                    f"{shown_path(captures_dir())} until a mothx session directory exists: `sessionscope` then opens them.",
                    id="welcome-text",
                    markup=False,
                )
                yield Static("", id="welcome-status", markup=False)
                yield Static("d  open the demo (built on first use, read-write)      q  quit", id="welcome-keys", markup=False)
        yield KeyBar()

    def action_open_demo(self) -> None:
        self.query_one("#welcome-status", Static).update("Preparing the demo directory…")
        app = services(self)
        if app is None:
            raise RuntimeError("the demo is opened by the Sessionscope app")
        app.open_demo()

    def show_status(self, text: str) -> None:
        self.query_one("#welcome-status", Static).update(data_line(text))


class OpenFailedScreen(Screen[None]):
    """The session directory could not be opened: the reason in one line, and what to do next."""

    DEFAULT_CSS = _CSS
    ACTION_SCOPE: ClassVar[str] = "welcome"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Open failed"

    def __init__(self, path: Path | None, error: str) -> None:
        super().__init__()
        self.path = path
        self.error = error

    def compose(self) -> ComposeResult:
        where = shown_path(self.path) if self.path is not None else "the session directory"
        yield AppHeader(show_badge=False)  # nothing is open: no mode to show
        with Center():
            with Vertical(id="welcome-box"):
                yield Static(data_line(f"Cannot open {where}"), id="welcome-title", markup=False)
                yield Static(data_text(self.error), id="welcome-error", markup=False)
                yield Static("", id="welcome-status", markup=False)
                yield Static("d  open the demo directory instead      q  quit", id="welcome-keys", markup=False)
        yield KeyBar()

    def action_open_demo(self) -> None:
        self.query_one("#welcome-status", Static).update("Preparing the demo directory…")
        app = services(self)
        if app is None:
            raise RuntimeError("the demo is opened by the Sessionscope app")
        app.open_demo()

    def show_status(self, text: str) -> None:
        self.query_one("#welcome-status", Static).update(data_line(text))
