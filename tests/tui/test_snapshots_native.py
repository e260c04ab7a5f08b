"""Snapshot tests of captured agent sessions: the Sessions screen on the Claude Code source, and the branched
Claude Code transcript (03eb5929) at its fork marker.

The real transcripts are copied to, and captured at, a fixed path with a fixed clock and counters (as the
Checkpoints snapshots do), so every run shows the same text; the directory is built once and reused (rebuilt
when absent). Its sessions.db holds no mothx session, so the app opens on the captured sessions by itself.
The branched transcript's accepted snapshot is copied to screenshots/native-branches.svg for the README.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.test_snapshots_checkpoints import build
from tui.app import SessionscopeApp

SIZE = (120, 36)
DEADLINE_S = 20.0


@pytest.fixture
def native_dir(real_fixtures: Path) -> Path:
    """The captured session directory, built under the test's home folder (shown as ``~/native/…``)."""
    base = Path(os.environ["HOME"]) / "native"
    build(base, real_fixtures)
    return base / "sessions"


async def settle_all(pilot: Pilot[object]) -> None:
    """Wait for the Sessions screen's captured list, or the native transcript, and for every worker."""
    from tui.screens.native_transcript import NativeTranscriptScreen
    from tui.screens.sessions import SessionsScreen
    from tui.widgets.native_session_list import AgentSessionList

    await settle(pilot)
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        ready = True
        if isinstance(screen, SessionsScreen):
            lists = screen.query(AgentSessionList)
            ready = screen.source != "mothx" and bool(lists) and lists.first().loaded
        elif isinstance(screen, NativeTranscriptScreen):
            ready = screen.loaded and not screen.active_view.fetching and bool(screen.active_view.items)
        if ready and not any(w.is_running for w in app.workers):
            app.clear_notifications()
            await pilot.pause()
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen did not settle: {screen!r}")
        await asyncio.sleep(0.02)


def keys(*pressed: str):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[object]) -> None:
        await settle_all(pilot)
        for key in pressed:
            await pilot.press(key)
            await settle_all(pilot)

    return run_before


def test_sessions_screen_on_the_claude_code_source(snap_compare, native_dir: Path) -> None:
    assert snap_compare(SessionscopeApp(native_dir, OpenMode.SNAPSHOT), run_before=keys(), terminal_size=SIZE)


def test_branched_claude_code_transcript(snap_compare, native_dir: Path) -> None:
    """enter opens the newest session (03eb5929, the first row); ] goes to its fork marker."""
    assert snap_compare(SessionscopeApp(native_dir, OpenMode.SNAPSHOT), run_before=keys("enter", "right_square_bracket"),
                        terminal_size=SIZE)
