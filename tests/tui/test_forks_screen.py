"""Pilot tests of the Forks screen on the demo: the family, the boundaries, forking through the dialog."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.demo.forks import SOURCE_TITLE
from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import db_rows, wait_for
from tui.app import SessionscopeApp
from tui.screens.forks import ForksScreen
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.fork_lists import BoundaryList, FamilyList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
RAW = "".join(chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7F, 0xA0)]) + "\u202a\u202b\u202c\u202d\u202e"


def source_id(path: Path) -> str:
    return str(db_rows(path, "SELECT session_id FROM entries WHERE type = 'session_info' AND "
                             "json_extract(data, '$.name') = ? ORDER BY seq LIMIT 1", (SOURCE_TITLE,))[0][0])


async def settle_forks(pilot: Pilot[object]) -> ForksScreen:
    app = pilot.app
    deadline = time.monotonic() + 20
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screens = [s for s in app.screen_stack if isinstance(s, ForksScreen)]
        if screens:
            fam, bnd = screens[-1].query_one(FamilyList), screens[-1].query_one(BoundaryList)
            if (fam.loaded or fam.message) and (bnd.loaded or bnd.message) and not fam.busy and not bnd.busy:
                return screens[-1]
        if time.monotonic() > deadline:
            raise AssertionError("the Forks screen did not settle")


async def open_forks(pilot: Pilot[object], session_id: str | None) -> ForksScreen:
    await settle(pilot)
    await pilot.app.push_screen(ForksScreen(session_id))
    return await settle_forks(pilot)


def notices(app: SessionscopeApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_family_and_boundaries(demo_master: Path) -> None:
    src = source_id(demo_master)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_forks(pilot, src)
        fam = screen.query_one(FamilyList)
        assert [m.depth for m in fam.rows] == [0, 1, 2, 1]
        assert fam.rows[0].selected and fam.rows[0].session_id == src
        assert {m.fork_kind for m in fam.rows[1:]} == {"message", "session"}
        bnd = screen.query_one(BoundaryList)
        assert [c.valid for c in bnd.rows] == [True, True, True]
        assert all(c.boundary_seq >= c.at_seq for c in bnd.rows)
        assert app.focused is bnd
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is fam
        # moving the family cursor lists that member's turns
        fam.cursor = 2
        await settle_forks(pilot)
        assert screen.shown == fam.rows[2].session_id
        assert len(screen.query_one(BoundaryList).rows) == 1


async def test_F_on_sessions_opens_the_forks_of_the_session_under_the_cursor(demo_master: Path) -> None:
    src = source_id(demo_master)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        from tui.widgets.session_list import SessionList

        session_list = app.screen.query_one(SessionList)
        await wait_for(pilot, lambda: any(r.id == src for r in session_list.rows) or not session_list.has_after,
                       "the source row")
        while not any(r.id == src for r in session_list.rows):
            session_list.action_page_down()
            await settle(pilot)
        session_list.cursor = next(i for i, r in enumerate(session_list.rows) if r.id == src)
        await pilot.press("F")
        screen = await settle_forks(pilot)
        assert isinstance(app.screen, ForksScreen) and screen.session_id == src
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "SessionsScreen"


async def test_the_jump_opens_forks_for_the_sessions_selection(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        from tui import actions
        from tui.widgets.session_list import SessionList

        first = app.screen.query_one(SessionList).selected
        assert first is not None
        app.open_section(next(s for s in actions.sections() if s.id == "forks"))
        screen = await settle_forks(pilot)
        assert screen.session_id == first.id


async def test_fork_at_the_second_turn_through_the_dialog_and_repeat(demo_dir: Path) -> None:
    src = source_id(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_forks(pilot, src)
        bnd = screen.query_one(BoundaryList)
        bnd.focus()
        bnd.cursor = 1
        second = bnd.rows[1]
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert app.focused is not None and app.focused.id == "confirm-cancel"
        assert f"'{SOURCE_TITLE} (3)'" in dialog.request.preview and "entries copied" in dialog.request.preview
        await pilot.press("X")  # the opening key does not confirm
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TranscriptScreen", "the child's transcript")
        assert screen.last_result is not None
        child = screen.last_result.fork.session_id
        assert screen.last_result.fork.boundary_seq == second.boundary_seq
        # repeating the same request returns the same child (and opens it)
        await pilot.press("escape")
        await settle_forks(pilot)
        screen.query_one(BoundaryList).cursor = 1
        await pilot.press("X")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "TranscriptScreen", "the same child again")
        assert any("forked already" in n and child in n for n in notices(app))
    rows = db_rows(demo_dir, "SELECT id, parent_session, fork_kind, fork_boundary_seq FROM sessions "
                             "WHERE parent_session = ? ORDER BY id", (src,))
    assert [r for r in rows if r[0] == child] == [(child, src, "message", second.boundary_seq)]
    assert len(rows) == 3


async def test_invalid_boundaries_say_why_and_read_modes_block_the_fork(demo_master: Path) -> None:
    active = str(db_rows(demo_master, "SELECT session_id FROM session_runs WHERE status = 'running' LIMIT 1")[0][0])
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_forks(pilot, active)
        bnd = screen.query_one(BoundaryList)
        assert bnd.rows and not any(c.valid for c in bnd.rows)
        assert any("active" in c.reason for c in bnd.rows) or any("open" in c.reason for c in bnd.rows)
        assert screen.check_action("fork", ()) is None  # a read mode: shown dimmed, blocked


async def test_an_invalid_boundary_is_refused_with_its_rule(demo_dir: Path) -> None:
    active = str(db_rows(demo_dir, "SELECT session_id FROM session_runs WHERE status = 'running' LIMIT 1")[0][0])
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_forks(pilot, active)
        screen.query_one(BoundaryList).focus()
        await pilot.press("X")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)
        assert any("Cannot fork at turn" in n for n in notices(app))


async def test_hostile_titles_are_drawn_as_text(demo_dir: Path) -> None:
    src = source_id(demo_dir)
    conn = sqlite3.connect(demo_dir / "sessions.db")
    with conn:
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES "
                     "(?, 'hostile-info', 'session_info', NULL, '2026-01-01T00:00:00Z', ?)",
                     (src, '{"type":"session_info","id":"hostile-info","name":"\\u001b]52;c;aGFja2Vk\\u0007 '
                           '[@click=app.quit]x[/] \\u202etxt \\ud83d pid-4242-[/]","source":"manual"}'))
    conn.close()
    app = SessionscopeApp(demo_dir, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_forks(pilot, src)
        fam = screen.query_one(FamilyList)
        assert "[@click=app.quit]" in fam.rows[0].title
        await pilot.pause()
        lines = [fam.render_line(y).text for y in range(4)]
        text = "\n".join(lines)
        assert "[@click=app.quit]x[/]" in text or "[@click=app.quit]" in text
        assert not any(ch in text for ch in RAW)
        assert app.is_running


async def test_a_fork_says_where_it_was_seeded_from_and_o_opens_the_parent_there(demo_master: Path) -> None:
    import sqlite3

    from tests.tui.transcript_support import settle as settle_transcript
    from tui.screens.transcript import TranscriptScreen

    conn = sqlite3.connect(f"file:{demo_master / 'sessions.db'}?immutable=1", uri=True)
    child, parent, boundary = conn.execute(
        "SELECT id, parent_session, fork_boundary_seq FROM sessions WHERE parent_session <> '' "
        "AND fork_boundary_seq > 0 ORDER BY id LIMIT 1").fetchone()
    conn.close()
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(160, 36)) as pilot:
        await pilot.pause()
        app.open_transcript(child)
        await settle_transcript(pilot)
        screen = app.screen
        assert isinstance(screen, TranscriptScreen) and screen.facts is not None
        title = str(screen.query_one("#transcript-title").render())
        assert f"seeded from {parent} up to seq {boundary:,}" in title, title
        await pilot.press("o")
        await settle_transcript(pilot)
        opened = app.screen
        assert isinstance(opened, TranscriptScreen) and opened is not screen
        assert opened.session_id == parent
        view = opened.transcript_view
        item = view.cursor_item or view.anchor_item
        assert item is not None and 0 < item.seq <= boundary, item
        assert item.seq > 1, "opened at the boundary, not at the start"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
