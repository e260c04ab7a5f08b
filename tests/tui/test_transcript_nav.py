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
from tests.tui.test_native_transcript import captured  # noqa: F401 - a fixture
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


# --- position indicators (item 5) -------------------------------------------------------------------------------


def test_position_text_tells_the_truth() -> None:
    from tui.screens.transcript_facts import position_text

    assert position_text("entry row", 1, 12, False, estimated=True) == "entry row 1 of 12 (8%)"
    assert position_text("row", 5204, 5204, True) == "row 5,204 of 5,204 (100%)"
    assert position_text("row", 5203, 5204, False) == "row 5,203 of 5,204 (99%)"
    assert position_text("entry row", 141, 149, True, estimated=True) == "entry row ~141 of 149 (end)"
    assert position_text("entry row", 0, 149, False) == "above entry row 1 of 149"


async def test_the_replay_and_raw_positions_follow_the_cursor(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        plan = entries.replay_plan(sd, demo_sessions.tool_error)
        app = TranscriptHost(sd, demo_sessions.tool_error)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            await pilot.press("g")
            await settle(pilot)
            total = plan.total_rows
            import re

            first = screen.active_view.cursor_item
            assert first is not None
            shown = re.search(r"entry row ~?([\d,]+) of ([\d,]+) \((\d+)%\)", status(screen))
            assert shown is not None, status(screen)
            assert int(shown[1].replace(",", "")) == int(first.rank) + 1 >= 1, "the rows of the log before it count"
            assert int(shown[2].replace(",", "")) == total and int(shown[3]) < 100
            assert "~0" not in status(screen)
            await pilot.press("G")
            await settle(pilot)
            assert "(100%)" in status(screen) or "(end)" in status(screen)
            await pilot.press("tab")  # raw: every row, exact
            await settle(pilot)
            await pilot.press("G")
            await settle(pilot)
            assert f"row {total:,} of {total:,} (100%)" in status(screen)
            await pilot.press("up")
            await settle(pilot)
            assert f"row {total - 1:,} of {total:,} (" in status(screen) and "(100%)" not in status(screen)


async def test_the_long_raw_view_says_100_percent_on_its_last_row_only(demo_master: Path,
                                                                       demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        total = entries.replay_plan(sd, demo_sessions.long).total_rows
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            await pilot.press("tab", "G")
            await settle(pilot)
            assert f"row {total:,} of {total:,} (100%)" in status(screen), status(screen)
            await pilot.press("g")
            await settle(pilot)
            assert f"row 1 of {total:,} (0%)" in status(screen), status(screen)


async def test_the_native_block_count_follows_the_cursor_and_G_reaches_the_last(captured: Path) -> None:  # noqa: F811
    from tests.tui.test_native_transcript import INTERRUPTED, NativeHost
    from tests.tui.test_native_transcript import settle as settle_native
    from tui.screens.native_transcript import NativeRef

    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("codex", INTERRUPTED))
        async with app.run_test(size=SIZE) as pilot:
            screen = await settle_native(pilot)
            blocks = [it for it in screen.active_view.items if not it.is_rule]
            n = len(blocks)
            await pilot.press("g")
            await settle_native(pilot)
            text = str(screen.query_one("#transcript-status").render())
            assert f"block 1 of {n:,}" in text
            await pilot.press("down", "down")
            await settle_native(pilot)
            assert f"block 3 of {n:,}" in str(screen.query_one("#transcript-status").render())
            await pilot.press("G")
            await settle_native(pilot)
            assert f"block {n:,} of {n:,}" in str(screen.query_one("#transcript-status").render())
            assert screen.active_view.cursor_item is not None and screen.active_view.cursor_item.key == blocks[-1].key
