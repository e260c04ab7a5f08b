"""Waiting for the app to settle in Pilot and snapshot tests: workers done, rows painted, no debounce pending.

Waits poll the app's own state (never sleep for a fixed time and hope); each gives up after a deadline and then
fails with what it was waiting for.
"""

from __future__ import annotations

import asyncio
import time

from textual.pilot import Pilot

DEADLINE_S = 20.0


async def settle(pilot: Pilot[object], *, integrity: bool = True) -> None:
    """Wait until the store is open (or failed), the visible rows are loaded and the integrity check ended."""
    from tui.screens.sessions import SessionsScreen
    from tui.widgets.session_list import SessionList

    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        ready = True
        if isinstance(screen, SessionsScreen):
            lists = screen.query(SessionList)
            session_list = lists.first() if lists else None
            ready = (
                getattr(app, "sd", None) is not None
                and session_list is not None
                and session_list.loaded
                and not session_list.busy
                and not screen.filter_pending
                and (not integrity or getattr(app, "integrity", "") not in ("", "checking integrity…"))
            )
        if ready and not any(w.is_running for w in app.workers):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the app did not settle: screen={screen!r} integrity={getattr(app, 'integrity', '')!r}")
        await asyncio.sleep(0.02)


def freeze_cursors(pilot: Pilot[object]) -> None:
    """Stop blinking text cursors, so a screenshot does not depend on when it was taken."""
    from textual.widgets import Input

    for screen in pilot.app.screen_stack:
        for widget in screen.query(Input):
            widget.cursor_blink = False
