"""Where the app starts: the section its first screen shows (``sessionscope --section runs``, ``--section forks
--session ID``), and that screen's first read, done by the opening worker while Textual starts.

The Sessions screen is the default first screen; its first window is read by :func:`tui.opening.open_and_read`
itself. Another section's first screen reads its own first page with :func:`first_read` on the opening worker's
thread, and its mount awaits the opening (``SessionscopeApp.wait_opened``, at most a moment) so that its first frame
already has its rows, as the Sessions screen's has. This module imports no screen at import time.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.screen import Screen

    from store.mothx.sessiondir import SessionDir

DEFAULT_SECTION = "sessions"


@dataclass(frozen=True)
class Start:
    """The first screen: a section id of :data:`tui.actions.SECTIONS`, and the session it is about (Forks)."""

    section: str = DEFAULT_SECTION
    session_id: str | None = None

    @property
    def is_default(self) -> bool:
        return self.section == DEFAULT_SECTION


def section_ids() -> list[str]:
    """The ids ``--section`` accepts, in the ``:`` menu's order."""
    from tui.actions import SECTIONS

    return [section.id for section in SECTIONS]


def first_screen(start: Start) -> Screen[Any]:
    """The first screen of ``start`` (not the Sessions screen: the app builds that one itself)."""
    if start.section == "forks":
        from tui.screens.forks import ForksScreen

        return ForksScreen(start.session_id)
    if start.section == "runs":
        from tui.screens.runs import RunsScreen

        return RunsScreen()
    from tui.actions import SECTIONS

    section = next(s for s in SECTIONS if s.id == start.section)
    screen_type = getattr(importlib.import_module(section.module), section.class_name)
    screen: Screen[Any] = screen_type()
    return screen


def first_read(start: Start, sd: SessionDir, now: float | None = None) -> object | None:
    """The first page of ``start``'s screen, read on the opening worker's thread (None: the screen reads its own
    once mounted). A failure is left for the screen's own read to report."""
    try:
        if start.section == "runs":
            from tui.widgets.run_list import RunScope, read_runs_page

            return read_runs_page(sd, RunScope(), now=int(time.time() if now is None else now))
        if start.section == "forks" and start.session_id is not None:
            from tui.screens.forks import first_read as forks_first_read

            return forks_first_read(sd, start.session_id)
    except Exception:  # noqa: BLE001 - the screen reads (and reports) it again itself
        return None
    return None

