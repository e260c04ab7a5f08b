"""Snapshot tests of the Sessions, filter, help and welcome screens (SVGs in __snapshots__, reviewed like code).

The app runs on a private copy of the demo at ``~/.cache/sessionscope/demo/sessions`` under the test's home, in snapshot mode (nothing is written), with the default
theme, no clock on screen, absolute UTC times, and blinking cursors frozen. ``settle`` waits for the rows and
the integrity check, so a screenshot never shows "Loading…".
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.mothx.db import OpenMode
from tests.tui.appwait import freeze_cursors, settle
from tui.app import SessionscopeApp

SIZE = (120, 36)


def test_sessions_screen(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await settle(pilot)

    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT), run_before=ready, terminal_size=SIZE)


def test_sessions_screen_filtered(snap_compare, demo_home: Path) -> None:
    async def filtered(pilot: Pilot[object]) -> None:
        await settle(pilot)
        await pilot.press("slash", *"harbor")
        freeze_cursors(pilot)
        await settle(pilot)

    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT), run_before=filtered, terminal_size=SIZE)


def test_help_screen(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await settle(pilot)

    assert snap_compare(
        SessionscopeApp(demo_home, OpenMode.SNAPSHOT), press=["question_mark"], run_before=ready, terminal_size=SIZE
    )


def test_welcome_screen(snap_compare) -> None:
    assert snap_compare(SessionscopeApp(None, OpenMode.READ_WRITE), terminal_size=SIZE)
