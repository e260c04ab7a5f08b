"""Snapshot tests of the Knowledge screen on the demo (SVGs in __snapshots__, reviewed like code).

They run on a private copy of the demo where ``--demo`` puts it under the test's home, in snapshot mode (nothing
is written), with the demo's "now" as the app's clock: the bases, a query with its panes and the graph tree,
the dropped candidates shown with ``c`` (none in the indexed demo: the pane says so), and an evidence row's
lines.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import freeze_cursors, settle
from tests.tui.test_knowledge_screen import settled
from tui.app import SessionscopeApp

SIZE = (120, 36)


def open_screen(query: str = "", *keys: str):
    async def run_before(pilot: Pilot[object]) -> None:
        from tui.screens.knowledge import KnowledgeScreen, QueryInput
        from tui.widgets.knowledge_lists import BaseList

        await settle(pilot)
        await pilot.press("colon")
        await pilot.pause(0.3)
        await pilot.press(*"Knowledge", "enter")
        screen = await settled(pilot)
        assert isinstance(screen, KnowledgeScreen)
        lst = screen.query_one(BaseList)
        lst.cursor = next(i for i, row in enumerate(lst.rows) if row.base_id == "harbor-docs")
        await settled(pilot)
        if query:
            await pilot.press("slash")
            screen.query_one(QueryInput).value = query
            await pilot.press("enter")
            await settled(pilot)
        for key in keys:
            await pilot.press(key)
            await settled(pilot)
        freeze_cursors(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


def test_knowledge_bases(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=open_screen(), terminal_size=SIZE)


def test_knowledge_query(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=open_screen("pgxpool migrate"), terminal_size=SIZE)


def test_knowledge_cjk_query_node_focus(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=open_screen("部署", "tab", "tab", "j"), terminal_size=SIZE)


def test_knowledge_evidence_lines(snap_compare, demo_home: Path) -> None:
    app = SessionscopeApp(demo_home, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    assert snap_compare(app, run_before=open_screen("database_url", "tab", "tab", "tab", "tab", "enter"),
                        terminal_size=SIZE)
