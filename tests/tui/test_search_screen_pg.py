"""The Search screen over the captured records of a PostgreSQL team store (a real server, tests/pg.py): ranked
hits from the store's own index in a write mode, the exact ILIKE scan (said so) in a read mode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.checkpoint_engine import dispose_engines, use_store
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.pg import pg_cluster, pg_url  # noqa: F401 - fixtures
from tests.store.test_search_pg import TEXTS, _tree
from tests.tui.rendered import assert_clean
from tests.tui.test_search_screen import SIZE, open_search, settle_search, status
from tui.app import SessionscopeApp
from tui.widgets.search_list import SearchList

pytestmark = pytest.mark.anyio


@pytest.fixture
def team(tmp_path: Path, pg_url: str) -> Iterator[Path]:  # noqa: F811
    tree = tmp_path / "projects"
    _tree(tree, TEXTS)
    use_store(pg_url)
    try:
        with open_session_dir(tmp_path / "team", OpenMode.READ_WRITE, create=True) as sd:
            cap.capture_claude_code(sd, tree)
        yield tmp_path / "team"
    finally:
        use_store(None)
        dispose_engines()


@pytest.mark.parametrize("mode", [OpenMode.READ_WRITE, OpenMode.READ_ONLY])
async def test_captured_search_on_the_team_store(team: Path, mode: OpenMode) -> None:
    app = SessionscopeApp(team, mode)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_search(pilot, "walrus")
        screen.query_one(SearchList).focus()
        await pilot.press("c")
        screen = await settle_search(pilot)
        rows = screen.query_one(SearchList).rows
        assert len(rows) == 2 and {h.agent_id for h in rows} == {"claude-code"}
        if mode is OpenMode.READ_WRITE:
            assert "2 agent sessions · ranked by the search index" in status(screen)
            assert "walrus walrus walrus" in rows[0].snippet.text
        else:
            assert "LIKE scan" in status(screen) and "never built" in status(screen)
        text = assert_clean(app, "team store hits")
        assert "walrus" in text
        for bad in ('"unbalanced', " NEAR(", " a OR", " *", " [/]"):
            await pilot.press("slash", *bad)
            screen = await settle_search(pilot)
            assert_clean(app, "hostile query")
