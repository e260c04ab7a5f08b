"""Snapshot tests of the Health screen and of a reconcile's confirm dialog (SVGs in __snapshots__).

Both run on a private copy of the demo where ``--demo`` puts it under the test's home, with the demo's "now" as
the app's clock: the screen in snapshot mode (the torn event store selected), the dialog read-write.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tui.app import SessionscopeApp

SIZE = (140, 36)


async def _open(pilot: Pilot[object]) -> None:
    from tests.tui.test_health_screen import settle_health
    from tui.widgets.health_list import HealthList

    await settle(pilot)
    await pilot.press("colon")
    await pilot.pause(0.3)
    await pilot.press(*"Health", "enter")
    await settle_health(pilot)
    lst = pilot.app.screen.query_one(HealthList)
    lst.cursor = next(i for i, c in enumerate(lst.rows) if "torn tail" in c.detail)
    await settle_health(pilot)


def test_health_screen(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, terminal_size=SIZE, run_before=_open)


def test_health_reconcile_dialog(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        from tests.tui.test_health_screen import wait_for
        from tui.widgets.confirm import ConfirmDialog

        await _open(pilot)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog), "the dialog")
        await pilot.pause(0.3)

    app = SessionscopeApp(demo_home, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, terminal_size=SIZE, run_before=ready)
