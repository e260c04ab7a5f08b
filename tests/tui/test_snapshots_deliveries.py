"""Snapshot tests of the Deliveries screen and of its retry dialog (SVGs in __snapshots__, reviewed like code).

Both run on a private copy of the demo where ``--demo`` puts it (the header shows ``~/.cache/sessionscope/demo/
sessions`` on every machine) with the demo's "now" as the app's clock, so every countdown reads the same: the
screen in snapshot mode with the cursor on the failed upload whose send depends on it, the dialog read-write
(a retry is blocked in the read modes).
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import wait_for
from tests.tui.test_deliveries_screen import index_of, settle_deliveries
from tui.app import SessionscopeApp

SIZE = (120, 36)


async def _open(pilot: Pilot[object]) -> None:
    from tui.screens.deliveries import DeliveriesScreen
    from tui.widgets.delivery_list import DeliveryList

    await settle(pilot)
    await pilot.press("colon")
    await pilot.pause(0.3)
    await pilot.press(*"Deliveries", "enter")
    await settle_deliveries(pilot)
    assert isinstance(pilot.app.screen, DeliveriesScreen)
    lst = pilot.app.screen.query_one(DeliveryList)
    lst.cursor = index_of(lst, status="failed", code="transport_error")
    await settle_deliveries(pilot)


def test_deliveries_screen(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=_open, terminal_size=SIZE)


def test_retry_delivery_dialog(snap_compare, demo_home: Path) -> None:
    async def dialog(pilot: Pilot[object]) -> None:
        from tui.widgets.confirm import ConfirmDialog

        await _open(pilot)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog), "the retry dialog")
        await settle_deliveries(pilot)

    app = SessionscopeApp(demo_home, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=dialog, terminal_size=SIZE)
