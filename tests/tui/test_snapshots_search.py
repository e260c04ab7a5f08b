"""Snapshot tests of the Search screen (SVGs in __snapshots__, reviewed like code): ranked hits of the demo with
their snippets, the matched words highlighted, and the transcript opened at a hit's message."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.mothx.db import OpenMode
from tests.tui.appwait import freeze_cursors, settle
from tests.tui.test_search_screen import settle_search
from tests.tui.transcript_support import settle as settle_transcript
from tui.app import SessionscopeApp

SIZE = (120, 34)


async def _search(pilot: Pilot[object], query: str) -> None:
    await settle(pilot)
    await pilot.press("ctrl+f")
    await settle_search(pilot)
    await pilot.press(*query)
    await settle_search(pilot)
    freeze_cursors(pilot)


def test_search_screen(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await _search(pilot, "cache")

    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT)
    assert snap_compare(app, run_before=ready, terminal_size=SIZE)


def test_search_opens_the_matching_message(snap_compare, demo_home: Path) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await _search(pilot, "bash")
        await pilot.press("enter", "j", "enter")
        await settle_transcript(pilot)

    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT)
    assert snap_compare(app, run_before=ready, terminal_size=SIZE)
