"""Snapshot tests of the Usage screen (SVGs in __snapshots__): the demo's request_stats by day (the sparkline, a
bar per day) and by session, on a private copy of the demo where ``--demo`` puts it, with the demo's "now" as the
app's clock, and no price table."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tui.app import SessionscopeApp

SIZE = (140, 36)


@pytest.fixture(autouse=True)
def _no_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("store.usage.prices.prices_path", lambda: tmp_path / "no-prices.toml")


async def _open(pilot: Pilot[object], *keys: str) -> None:
    from tests.tui.test_usage_screen import settle_usage

    await settle(pilot)
    await pilot.press("colon")
    await pilot.pause(0.3)
    await pilot.press(*"Usage", "enter")
    await settle_usage(pilot)
    for key in keys:
        await pilot.press(key)
        await settle_usage(pilot)
    await pilot.pause(0.3)  # the key notification's text is part of the picture; let it be drawn


def test_usage_by_day(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, terminal_size=SIZE, run_before=_open)


def test_usage_by_session(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await _open(pilot, "2", "j")

    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, terminal_size=SIZE, run_before=ready)
