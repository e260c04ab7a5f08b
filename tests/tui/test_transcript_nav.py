"""Marker and turn navigation (issue 9, item 4) and position indicators that tell the truth (item 5), on the
long demo session: six earlier compactions head its replay, and its first kept entry sits inside a turn that
started before it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.transcript_support import DemoSessions, TranscriptHost, find_demo_sessions, settle
from tui.screens.transcript import TranscriptScreen

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


@pytest.fixture(scope="module")
def demo_sessions(demo_master: Path) -> DemoSessions:
    return find_demo_sessions(demo_master)


def notices(app: Any) -> list[str]:
    return [str(n.message) for n in app._notifications]


def cursor_key(screen: TranscriptScreen) -> tuple[int, int]:
    item = screen.active_view.cursor_item
    assert item is not None
    return item.key


def status(screen: TranscriptScreen) -> str:
    return str(screen.query_one("#transcript-status").render())


async def test_markers_start_with_the_earlier_compactions(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        plan = entries.replay_plan(sd, demo_sessions.long)
        earlier = sorted(c.seq for c in plan.compactions if c.seq < plan.window_start_seq)
        assert len(earlier) == 6
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            await pilot.press("g")
            await settle(pilot)
            assert cursor_key(screen) == (0, earlier[0]), "the top row is the first earlier compaction"
            seen = [cursor_key(screen)]
            for _ in earlier[1:]:
                await pilot.press("right_square_bracket")
                await settle(pilot)
                seen.append(cursor_key(screen))
            assert seen == [(0, seq) for seq in earlier], "] visits every earlier compaction row, in order"
            await pilot.press("right_square_bracket")
            await settle(pilot)
            later = min(c.seq for c in plan.compactions if c.seq >= plan.window_start_seq)
            assert cursor_key(screen) == (2, later), "then the compaction inside the replay window"
            await pilot.press("left_square_bracket")
            await settle(pilot)
            assert cursor_key(screen) == (0, earlier[-1])
            for seq in reversed(earlier[:-1]):
                await pilot.press("left_square_bracket")
                await settle(pilot)
                assert cursor_key(screen) == (0, seq)
            before = len(notices(app))
            await pilot.press("left_square_bracket")
            await settle(pilot)
            assert cursor_key(screen) == (0, earlier[0])
            assert notices(app)[before:] == ["No earlier compaction or override."]


async def test_n_from_the_top_lands_on_the_first_kept_turn(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        plan = entries.replay_plan(sd, demo_sessions.long)
        turns = entries.turn_markers(sd, demo_sessions.long)
        start = plan.window_start_seq
        open_at_start = [t for t in turns if t[0] < start][-1]
        assert open_at_start[1] == "turn_start", "the first kept entry sits inside a turn begun before it"
        next_turn = next(t[0] for t in turns if t[0] >= start and t[1] == "turn_start")
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            await pilot.press("g")
            await settle(pilot)
            await pilot.press("n")
            await settle(pilot)
            assert cursor_key(screen) == (2, start), "the first kept turn, at its first kept entry"
            await pilot.press("n")
            await settle(pilot)
            assert cursor_key(screen)[1] > next_turn
            assert screen.active_view.first_block_after(next_turn) == cursor_key(screen)
            await pilot.press("p")
            await settle(pilot)
            assert cursor_key(screen) == (2, start)
