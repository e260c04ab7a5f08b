"""The Checkpoints list and the Sessions screen's captured-session list page the store by keyset: a deep page
(``G`` on 2,001 checkpoints, then ``k``) is one store query per page, never every row; ``V`` pages through the
listed checkpoints in its worker instead of holding them."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from store.agents import checkpoint_read, native_catalog
from store.mothx import db as dbmod
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.store.test_store_pages import AGENT, TEMPLATE, capture_template, claude_lines, clone
from tests.tui.appwait import settle
from tui.app import SessionscopeApp
from tui.screens.checkpoints import CheckpointsScreen
from tui.screens.sessions import SessionsScreen
from tui.widgets.checkpoint_list import CheckpointList
from tui.widgets.native_session_list import AgentSessionList
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
COUNT = 2000
DEADLINE_S = 30.0


def build(root: Path, count: int) -> Path:
    sd = open_session_dir(root, OpenMode.READ_WRITE, create=True)
    try:
        capture_template(sd, claude_lines(12))
        clone(sd, count)
    finally:
        sd.close()
    return root


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("list-pages") / "sessions", COUNT)


class Calls:
    """The store's page calls (by name) and every statement run on a connection the store opens."""

    def __init__(self) -> None:
        self.pages: list[str] = []
        self.statements: list[str] = []

    def clear(self) -> None:
        self.pages.clear()
        self.statements.clear()

    def data_queries(self) -> list[str]:
        return [s for s in self.statements if "agent_state_sessions" in s]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    got = Calls()
    real_connect = dbmod._connect

    def connect(target: str, *, uri: bool) -> sqlite3.Connection:
        conn = real_connect(target, uri=uri)
        conn.set_trace_callback(got.statements.append)
        return conn

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            got.pages.append(name)
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(dbmod, "_connect", connect)
    monkeypatch.setattr(checkpoint_read, "checkpoint_page",
                        counted("checkpoint_page", checkpoint_read.checkpoint_page))
    monkeypatch.setattr(checkpoint_read, "list_checkpoints",
                        counted("list_checkpoints", checkpoint_read.list_checkpoints))
    monkeypatch.setattr(native_catalog, "agent_session_page",
                        counted("agent_session_page", native_catalog.agent_session_page))
    monkeypatch.setattr(native_catalog, "list_agent_sessions",
                        counted("list_agent_sessions", native_catalog.list_agent_sessions))
    yield got


async def quiet(pilot: Any, ready: Callable[[], bool], what: str) -> None:
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        if ready() and not any(w.is_running for w in app.workers):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def idle(lst: RowList[Any]) -> Callable[[], bool]:
    return lambda: lst.loaded and not lst.busy


async def test_a_deep_checkpoint_page_is_one_query_per_page(many: Path, calls: Calls) -> None:
    app = SessionscopeApp(many, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        calls.clear()
        app.show_section_screen(CheckpointsScreen)
        await quiet(pilot, lambda: isinstance(app.screen, CheckpointsScreen)
                    and app.screen.query_one(CheckpointList).loaded, "the checkpoints")
        screen = app.screen
        assert isinstance(screen, CheckpointsScreen)
        cl = screen.query_one(CheckpointList)
        assert calls.pages == ["checkpoint_page"], "the first page is one page read"
        opened = calls.data_queries()
        assert len(opened) == 2, opened  # the grouped count and the first page
        assert screen.query_one(StatusBar).count == f"{COUNT + 1:,} checkpoints"
        assert len(cl.rows) == cl.page_size and cl.total == COUNT + 1

        calls.clear()
        cl.focus()
        await pilot.press("G")
        await quiet(pilot, idle(cl), "the last page")
        assert cl.selected is not None and cl.selected.agent_session_id == f"{COUNT:05d}-{TEMPLATE}"
        after_g = list(calls.pages)
        await pilot.press("k")
        await quiet(pilot, idle(cl), "the row above")
        assert cl.selected is not None and cl.selected.agent_session_id == f"{COUNT - 1:05d}-{TEMPLATE}"
        print(f"\nG: {after_g}; G+k: {calls.pages}; data statements: {len(calls.data_queries())}")
        assert "list_checkpoints" not in calls.pages
        assert 1 <= len(calls.pages) <= 2, calls.pages  # the last page (and at most one page before it)
        assert len(calls.data_queries()) == len(calls.pages), calls.data_queries()
        assert len(cl.rows) <= cl.WINDOW_PAGES * cl.page_size

        # The agent pane narrows by agent in the same way: one page, the agent's count from the grouped count.
        calls.clear()
        screen.query_one("#agents").focus()
        await pilot.press("down")
        await quiet(pilot, idle(cl), "the Claude Code checkpoints")
        assert calls.pages == ["checkpoint_page"]
        assert screen.query_one(StatusBar).count == f"{COUNT + 1:,} of {COUNT + 1:,} checkpoints"


async def test_a_deep_captured_session_page_is_one_query_per_page(many: Path, calls: Calls) -> None:
    app = SessionscopeApp(many, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        def listed() -> bool:
            screen = app.screen
            return (isinstance(screen, SessionsScreen) and screen.source == AGENT
                    and bool(screen.query(AgentSessionList)) and screen.query_one(AgentSessionList).loaded)

        await quiet(pilot, listed, "the captured sessions")  # no mothx session: it opens on the captured ones
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        al = screen.query_one(AgentSessionList)
        assert "list_agent_sessions" not in calls.pages
        assert calls.pages.count("agent_session_page") == 1
        assert screen.query_one(StatusBar).count == f"{COUNT + 1:,} Claude Code sessions"
        newest = al.rows[0].last_record_at

        calls.clear()
        al.focus()
        await pilot.press("G")
        await quiet(pilot, idle(al), "the last page")
        await pilot.press("k")
        await quiet(pilot, idle(al), "the row above")
        print(f"\nG+k: {calls.pages}; data statements: {len(calls.data_queries())}")
        assert 1 <= len(calls.pages) <= 2 and set(calls.pages) == {"agent_session_page"}, calls.pages
        assert len(calls.data_queries()) == len(calls.pages)
        assert al.selected is not None and al.selected.last_record_at <= newest
        assert len(al.rows) <= al.WINDOW_PAGES * al.page_size

        # "/" narrows the list: the matches are found by walking pages forward, never by listing every row.
        calls.clear()
        await pilot.press("slash", *f"01234-{TEMPLATE[:8]}", "enter")
        await quiet(pilot, lambda: idle(al)() and not screen.filter_pending, "the filter")
        assert [r.agent_session_id for r in al.rows] == [f"01234-{TEMPLATE}"]
        assert "list_agent_sessions" not in calls.pages
        assert "1 of 2,001 (filtered)" in screen.query_one(StatusBar).count


async def test_V_pages_through_the_listed_checkpoints(tmp_path: Path, calls: Calls) -> None:
    root = build(tmp_path / "sessions", 249)  # 250 checkpoints: three pages of 100
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.show_section_screen(CheckpointsScreen)
        await quiet(pilot, lambda: isinstance(app.screen, CheckpointsScreen)
                    and app.screen.query_one(CheckpointList).loaded, "the checkpoints")
        screen = app.screen
        assert isinstance(screen, CheckpointsScreen)
        cl = screen.query_one(CheckpointList)
        calls.clear()
        cl.focus()
        await pilot.press("V")
        await quiet(pilot, lambda: not any(p.status == "verifying" for p in cl.proofs.values()), "verify all")
        assert calls.pages.count("checkpoint_page") == 3 and "list_checkpoints" not in calls.pages
        assert len(cl.proofs) == 250, "every listed checkpoint has a proof, keyed by its row"
        assert any(str(n.message).startswith("Verified 250 checkpoints") for n in app._notifications)
        labels = {cl.proof_label(r) for r in cl.rows}
        assert "not verified yet" not in labels
        # The proofs survive a re-read of the list.
        await pilot.press("r")
        await quiet(pilot, idle(cl), "the re-read")
        assert {cl.proof_label(r) for r in cl.rows} == labels and len(cl.proofs) == 250
