"""Snapshot tests of the Transcript screen (SVGs in __snapshots__, reviewed like code).

Each test opens the app on the demo directory in snapshot mode, types the session id into the Sessions
screen's filter, opens it with enter, and then moves with the screen's own keys. ``settle`` waits until every
page is read, so a screenshot never shows "Loading…". Sessions are picked by what they hold, not by id.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.transcript_support import DemoSessions, find_demo_sessions, open_from_sessions_list, settle
from tui.app import SessionscopeApp

SIZE = (120, 36)


@pytest.fixture(scope="module")
def demo_sessions(demo_master: Path) -> DemoSessions:
    return find_demo_sessions(demo_master)


def _opened(session_id: str, *keys: str):  # noqa: ANN202 - a run_before callback
    async def run_before(pilot: Pilot[object]) -> None:
        await open_from_sessions_list(pilot, session_id)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


def test_transcript_tool_calls_and_error(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:
    """The cursor moves block by block (down) onto the first failed tool result."""
    sid = demo_sessions.tool_error
    with open_session_dir(demo_home, OpenMode.SNAPSHOT) as sd:
        replay = entries.replay(sd, sid)
    blocks_before = next(i for i, m in enumerate(replay) if m.message.is_error)  # no markers in this session
    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT),
                        run_before=_opened(sid, *["down"] * blocks_before), terminal_size=SIZE)


def test_transcript_compaction_marker(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:
    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT),
                        run_before=_opened(demo_sessions.long, "right_square_bracket"), terminal_size=SIZE)


def test_transcript_skipped_compaction(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:
    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT),
                        run_before=_opened(demo_sessions.skipped, "right_square_bracket"), terminal_size=SIZE)


def test_transcript_override_marker(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:
    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT),
                        run_before=_opened(demo_sessions.override, "right_square_bracket", "up"), terminal_size=SIZE)


def test_transcript_raw_view(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:
    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT),
                        run_before=_opened(demo_sessions.long, "R"), terminal_size=SIZE)


def test_transcript_start_of_long_session(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:
    assert snap_compare(SessionscopeApp(demo_home, OpenMode.SNAPSHOT),
                        run_before=_opened(demo_sessions.long), terminal_size=SIZE)
