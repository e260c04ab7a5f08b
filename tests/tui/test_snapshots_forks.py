"""Snapshot tests of the Forks screen and of a fork's confirm dialog (SVGs in __snapshots__, reviewed like code).

Both run on a private copy of the demo where ``--demo`` puts it under the test's home (the header shows
``~/.cache/sessionscope/demo/sessions`` on every machine): the screen in snapshot mode on the demo's fork family
("Upgrade to shapely 2", two children, one forked again), the dialog read-write (forks are blocked in the read
modes), at the source's second turn.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import wait_for
from tests.tui.test_forks_screen import settle_forks, source_id
from tui.app import SessionscopeApp

SIZE = (120, 36)


def test_forks_screen(snap_compare, demo_home: Path) -> None:
    src = source_id(demo_home)

    async def ready(pilot: Pilot[object]) -> None:
        from tui.screens.forks import ForksScreen

        await settle(pilot)
        await pilot.app.push_screen(ForksScreen(src))
        await settle_forks(pilot)

    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=ready, terminal_size=SIZE)


def test_fork_dialog(snap_compare, demo_home: Path) -> None:
    src = source_id(demo_home)

    async def dialog(pilot: Pilot[object]) -> None:
        from tui.screens.forks import ForksScreen
        from tui.widgets.confirm import ConfirmDialog
        from tui.widgets.fork_lists import BoundaryList

        await settle(pilot)
        await pilot.app.push_screen(ForksScreen(src))
        screen = await settle_forks(pilot)
        screen.query_one(BoundaryList).cursor = 1
        await settle_forks(pilot)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.pause()

    app = SessionscopeApp(demo_home, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=dialog, terminal_size=SIZE)
