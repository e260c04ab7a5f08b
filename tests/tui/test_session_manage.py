"""Pilot tests of session management on the Sessions screen: marks, delete (bulk with a typed phrase), pin,
project, rename — each through the preview dialog, on a private copy of the demo."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import db_rows, wait_for
from tui.app import SessionscopeApp
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.session_list import SessionList
from tui.widgets.text_prompt import TextPrompt

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


def idle_rows(lst: SessionList) -> list[int]:
    """Indexes of rows whose session has no run going (a mutation lease is refused while a run is active)."""
    return [i for i, r in enumerate(lst.rows) if not r.run_status and not r.run_state]


async def settle_manage(pilot: Pilot[object]) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: not getattr(app.screen, "_manage_busy", False) or isinstance(app.screen, ConfirmDialog),
                   "the change to be prepared")
    await settle(pilot)


def notices(app: SessionscopeApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_bulk_delete_asks_for_the_phrase_and_says_how_many(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lst = app.screen.query_one(SessionList)
        picks = idle_rows(lst)[:2]
        ids = [lst.rows[i].id for i in picks]
        for i in picks:
            lst.cursor = i
            await pilot.press("space")
        assert list(lst.marked) == ids
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.request.affected == 2 and dialog.request.phrase == "delete 2 sessions"
        assert "request_stats rows are kept" in dialog.request.preview
        await pilot.press("y")  # no phrase typed: refused by the dialog
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        dialog.query_one("#confirm-phrase").value = "delete 2 sessions"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle_manage(pilot)
        await wait_for(pilot, lambda: any("Deleted 2 sessions" in n for n in notices(app)), "the result")
        assert not lst.marked
    for sid in ids:
        assert db_rows(demo_dir, "SELECT COUNT(*) FROM sessions WHERE id = ?", (sid,)) == [(0,)]
        assert db_rows(demo_dir, "SELECT COUNT(*) FROM entries WHERE session_id = ?", (sid,)) == [(0,)]


async def test_marked_sessions_hidden_by_the_filter_are_not_included(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        lst = screen.query_one(SessionList)
        picks = idle_rows(lst)[:2]
        first, second = lst.rows[picks[0]], lst.rows[picks[1]]
        for i in picks:
            lst.cursor = i
            await pilot.press("space")
        screen._apply_filter(first.id)  # type: ignore[attr-defined]
        await settle(pilot)
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert dialog.request.affected == 1 and dialog.request.hidden_by_filter == 1
        assert "hidden by the filter are not included" in dialog.query_one("#confirm-counts").render().plain  # type: ignore[attr-defined]
        await pilot.press("y")
        await settle_manage(pilot)
        await wait_for(pilot, lambda: any("Pinned" in n for n in notices(app)), "the result")
    assert db_rows(demo_dir, "SELECT pinned FROM session_metadata WHERE session_id = ?", (first.id,)) == [(1,)]
    assert db_rows(demo_dir, "SELECT pinned FROM session_metadata WHERE session_id = ?", (second.id,)) in ([], [(0,)])


async def test_rename_and_project_ask_for_the_text(demo_dir: Path) -> None:
    hostile = "[@click=app.quit]x[/] \x1b]0;pwned\x07"
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lst = app.screen.query_one(SessionList)
        lst.cursor = idle_rows(lst)[0]
        sid = lst.rows[lst.cursor].id
        await pilot.press("N")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the prompt")
        app.screen.query_one("#prompt-input").value = hostile  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.press("y")
        await settle_manage(pilot)
        await wait_for(pilot, lambda: any("Renamed" in n for n in notices(app)), "the rename")
        assert app.is_running
        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the prompt")
        app.screen.query_one("#prompt-input").value = "Harbor"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.press("y")
        await settle_manage(pilot)
        await wait_for(pilot, lambda: any("Assigned" in n for n in notices(app)), "the project")
    names = db_rows(demo_dir, "SELECT json_extract(data, '$.name') FROM entries WHERE session_id = ? AND "
                              "type = 'session_info' ORDER BY seq DESC LIMIT 1", (sid,))
    assert names == [(hostile,)]
    project = db_rows(demo_dir, "SELECT p.name FROM session_metadata m JOIN projects p ON p.id = m.project_id "
                                "WHERE m.session_id = ?", (sid,))
    assert project == [("Harbor",)]


async def test_delete_of_a_session_with_a_live_lease_is_refused(demo_dir: Path) -> None:
    live = db_rows(demo_dir, "SELECT session_id FROM session_runtime_leases WHERE state = 'active' "
                             "AND expires_at > ?", (DEMO_NOW_UNIX,))
    assert live
    sid = str(live[0][0])
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lst = app.screen.query_one(SessionList)
        lst.cursor = next(i for i, r in enumerate(lst.rows) if r.id == sid)
        await pilot.press("D")
        await settle_manage(pilot)
        await wait_for(pilot, lambda: any(n.startswith("Refused") for n in notices(app)), "the refusal")
        assert not isinstance(app.screen, ConfirmDialog)
    assert db_rows(demo_dir, "SELECT COUNT(*) FROM sessions WHERE id = ?", (sid,)) == [(1,)]


async def test_read_modes_block_the_management_keys(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for action in ("delete_sessions", "toggle_pin", "set_project", "rename_session"):
            assert app.screen.check_action(action, ()) is None
