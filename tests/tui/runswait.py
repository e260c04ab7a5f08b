"""Waiting for the Runs screen in Pilot and snapshot tests: rows read, timeline read, no worker running.

Every wait polls the app's own state and gives up after a deadline with what it was waiting for.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

DEADLINE_S = 20.0


async def settle_runs(pilot: Pilot[object], *, deadline_s: float = DEADLINE_S) -> None:
    """Wait until the Runs screen (the top screen, or the one under a dialog) has read its rows and timeline."""
    from tui.screens.runs import RunsScreen
    from tui.widgets.run_list import RunList
    from tui.widgets.run_timeline import RunTimeline

    app = pilot.app
    deadline = time.monotonic() + deadline_s
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screens = [s for s in app.screen_stack if isinstance(s, RunsScreen)]
        ready = bool(screens)
        if screens:
            screen = screens[-1]
            lst = screen.query_one(RunList)
            timeline = screen.query_one(RunTimeline)
            ready = lst.loaded and timeline.loaded and not lst.busy
        if ready and not any(w.is_running for w in app.workers):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the Runs screen did not settle: stack={app.screen_stack!r}")
        await asyncio.sleep(0.02)


async def wait_for(pilot: Pilot[object], condition: Callable[[], bool], what: str,
                   deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` (letting the app run) until it holds; fail with ``what`` after the deadline."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def db_rows(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple]:
    """Rows of ``sql`` read from ``path``/sessions.db on a read-only connection of the test's own."""
    conn = sqlite3.connect(f"file:{path / 'sessions.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
