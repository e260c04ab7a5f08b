"""The one-line header every screen shows: app name, session directory (home as ``~``), section, open-mode badge.

It follows the app's ``location`` and ``badge`` reactives, so a screen only has to yield it. No clock. It is one
widget drawing one line of text (not a row of child widgets): it is on the start path of every screen.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual import events
from textual.reactive import reactive
from textual.widget import Widget

from store.safetext import one_line
from tui.context import services
from tui.widgets.badge import BADGE_TOOLTIPS

BADGE_COMPONENTS = {"RW": "app-header--rw", "READ-ONLY": "app-header--read-only", "SNAPSHOT": "app-header--snapshot"}
TITLE = "Sessionscope"


class AppHeader(Widget):
    """`` Sessionscope  ~/path/to/sessions ··· Section  RW ``"""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "app-header--title",
        "app-header--location",
        "app-header--section",
        *BADGE_COMPONENTS.values(),
    }

    DEFAULT_CSS = """
    AppHeader {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    AppHeader > .app-header--title { color: $primary; text-style: bold; }
    AppHeader > .app-header--location { color: $foreground-muted; }
    AppHeader > .app-header--section { color: $foreground; }
    AppHeader > .app-header--rw { background: $success; color: $background; text-style: bold; }
    AppHeader > .app-header--read-only { background: $warning; color: $background; text-style: bold; }
    AppHeader > .app-header--snapshot { background: $secondary; color: $background; text-style: bold; }
    """

    location: reactive[str] = reactive("")
    badge: reactive[str] = reactive("RW")

    def __init__(self, section: str = "", *, show_badge: bool = True) -> None:
        super().__init__()
        self.section = section
        self.show_badge = show_badge  # False where nothing is open (the Welcome and "Cannot open" screens)
        self._badge_start = 0

    def on_mount(self) -> None:
        if services(self) is not None:  # a test host has no location or badge to show
            self.watch(self.app, "location", self._set_location)
            self.watch(self.app, "badge", self._set_badge)

    def _set_location(self, location: str) -> None:
        self.location = location

    def _set_badge(self, badge: str) -> None:
        self.badge = badge

    def render(self) -> Text:
        width = self.size.width
        badge = f" {one_line(self.badge)} " if self.show_badge else ""
        section = f" {one_line(self.section)} " if self.section else ""
        title = f" {TITLE}  "
        room = width - cell_len(title) - cell_len(section) - cell_len(badge) - 1
        location = one_line(self.location)  # a path from the command line or the data
        if room <= 0:
            location = ""
        elif cell_len(location) > room:
            location = "…" + set_cell_size(location[::-1], room - 1)[::-1].lstrip()
        line = Text(no_wrap=True, overflow="crop")
        line.append(title, self.get_component_rich_style("app-header--title", partial=True))
        line.append(location, self.get_component_rich_style("app-header--location", partial=True))
        pad = width - cell_len(line.plain) - cell_len(section) - cell_len(badge)
        line.append(" " * max(0, pad))
        line.append(section, self.get_component_rich_style("app-header--section", partial=True))
        self._badge_start = cell_len(line.plain)
        component = BADGE_COMPONENTS.get(self.badge, "app-header--read-only")
        line.append(badge, self.get_component_rich_style(component, partial=True))
        return line

    def on_mouse_move(self, event: events.MouseMove) -> None:
        shown = self.show_badge and event.x >= self._badge_start
        self.tooltip = BADGE_TOOLTIPS.get(self.badge) if shown else None
