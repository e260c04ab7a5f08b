"""The demo has interrupted tool executions, so ``abandon tools`` has something to act on (issue 9, item 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import db_rows, settle_runs, wait_for
from tui import actions
from tui.app import SessionscopeApp
from tui.screens.runs import RunsScreen, ToolPickDialog
from tui.widgets.run_list import RunList

pytestmark = pytest.mark.anyio


def interrupted(path: Path) -> list[tuple[str, str, str]]:
    return db_rows(path, "SELECT session_id, provider_call_id, execution_state FROM tool_execution_records "
                         "WHERE execution_state NOT IN ('completed', 'failed', 'abandoned') ORDER BY id")


def test_the_demo_holds_interrupted_tool_executions_of_an_idle_session(demo_master: Path) -> None:
    rows = interrupted(demo_master)
    assert len(rows) == 2 and len({r[0] for r in rows}) == 1
    session = rows[0][0]
    assert db_rows(demo_master, "SELECT count(*) FROM session_runs WHERE session_id = ? AND status NOT IN "
                                "('completed','incomplete','expired','failed','cancelled','canceled','timed_out')",
                   (session,)) == [(0,)], "its runs ended: the repair is not refused for an active run"
    assert db_rows(demo_master, "SELECT count(*) FROM tool_execution_records WHERE execution_state = 'completed'") \
        == [(1,)]


async def test_abandon_tools_on_the_demo_opens_the_picker_with_its_records(demo_dir: Path) -> None:
    session = interrupted(demo_dir)[0][0]
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = RunsScreen(session_id=session)
        await app.push_screen(screen)
        await settle_runs(pilot)
        lst = screen.query_one(RunList)
        assert lst.selected is not None and lst.selected.session_id == session
        await pilot.press(actions.get("runs.abandon-tools").key.split(",")[0])
        await wait_for(pilot, lambda: isinstance(app.screen, ToolPickDialog), "the tool picker")
        from textual.widgets import SelectionList

        picker = app.screen.query_one(SelectionList)
        assert picker.option_count == 2
        assert len(picker.selected) == 2, "every interrupted call is chosen at first"
