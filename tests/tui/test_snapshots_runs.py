"""Snapshot tests of the Runs screen and of a repair's confirm dialog (SVGs in __snapshots__, reviewed like code).

Both run on a private copy of the demo where ``--demo`` puts it under the test's home (the header shows
``~/.cache/sessionscope/demo/sessions`` on every machine): the Runs screen in snapshot mode, the dialog read-write
(repairs are blocked in the read modes). Both use the demo's "now" as the app's clock, so every countdown reads the same on every run.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import settle_runs, wait_for
from tui.app import SessionscopeApp

SIZE = (120, 36)
def _orphan_index(app: SessionscopeApp) -> int:
    from tui.widgets.run_list import RunList

    lst = app.screen.query_one(RunList)
    return next(i for i, row in enumerate(lst.rows) if row.listing.state == "orphaned")


def test_runs_screen(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        from tui.screens.runs import RunsScreen
        from tui.widgets.run_list import RunList

        await settle(pilot)
        await pilot.press("colon")
        await pilot.pause(0.3)
        await pilot.press(*"Runs", "enter")
        await settle_runs(pilot)
        assert isinstance(pilot.app.screen, RunsScreen)
        pilot.app.screen.query_one(RunList).cursor = _orphan_index(pilot.app)
        await settle_runs(pilot)

    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=ready, terminal_size=SIZE)


def test_repair_dialog(snap_compare, demo_home: Path) -> None:
    async def dialog(pilot: Pilot[object]) -> None:
        from tui.screens.runs import RunsScreen
        from tui.widgets.confirm import ConfirmDialog
        from tui.widgets.run_list import RunList

        await settle(pilot)
        await pilot.app.push_screen(RunsScreen())
        await settle_runs(pilot)
        pilot.app.screen.query_one(RunList).cursor = _orphan_index(pilot.app)
        await settle_runs(pilot)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog), "the confirm dialog")
        await settle_runs(pilot)

    app = SessionscopeApp(demo_home, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=dialog, terminal_size=SIZE)
