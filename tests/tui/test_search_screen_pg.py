"""The Search screen over the captured records of a PostgreSQL team store (a real server, tests/pg.py): ranked
hits from the store's own index in a write mode, the exact ILIKE scan (said so) in a read mode
with no index, and the records newer than the index searched exactly beside it (said so)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.agents import capture as cap
from store.agents.checkpoint_engine import dispose_engines, use_store
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.search import SearchHit
from tests.pg import pg_cluster, pg_url  # noqa: F401 - fixtures
from tests.store.test_search_pg import TEXTS, _tree
from tests.tui.rendered import assert_clean
from tests.tui.test_search_screen import SIZE, open_search, settle_search, status
from tui.app import SessionscopeApp
from tui.screens.search import SearchScreen
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


async def captured_search(pilot: Pilot[object], query: str) -> tuple[SearchScreen, list[SearchHit]]:
    """Search ``query`` and switch to captured records: the screen and its hits."""
    screen = await open_search(pilot, query)
    screen.query_one(SearchList).focus()
    await pilot.press("c")
    screen = await settle_search(pilot)
    return screen, list(screen.query_one(SearchList).rows)


@pytest.mark.parametrize("mode", [OpenMode.READ_WRITE, OpenMode.READ_ONLY])
async def test_captured_search_on_the_team_store(team: Path, mode: OpenMode) -> None:
    app = SessionscopeApp(team, mode)
    async with app.run_test(size=SIZE) as pilot:
        screen, rows = await captured_search(pilot, "walrus")
        assert len(rows) == 2 and {h.agent_id for h in rows} == {"claude-code"}
        if mode is OpenMode.READ_WRITE:
            assert "2 agent sessions · ranked by the search index" in status(screen)
            assert "walrus walrus walrus" in rows[0].snippet.text
        else:
            assert "ranked without the search index" in status(screen) and "never built" in status(screen)
            assert "walrus walrus walrus" in rows[0].snippet.text     # ranked as the index would rank it
        text = assert_clean(app, "team store hits")
        assert "walrus" in text
        for bad in ('"unbalanced', " NEAR(", " a OR", " *", " [/]"):
            await pilot.press("slash", *bad)
            screen = await settle_search(pilot)
            assert_clean(app, "hostile query")


async def test_a_read_mode_with_the_index_behind_says_how_many_were_searched_exactly(team: Path) -> None:
    from store.search.team import refresh_team

    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "cold"
        tree = team.parent / "projects"
        _tree(tree, ["walrus walrus walrus walrus walrus"], start=300)
        cap.capture_claude_code(sd, tree)
    app = SessionscopeApp(team, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen, rows = await captured_search(pilot, "walrus")
        assert len(rows) == 3 and rows[0].snippet.text == "walrus walrus walrus walrus walrus"
        assert ("3 agent sessions · ranked by the search index; 3 records newer than the index were searched "
                "exactly (a read mode does not refresh it)") in status(screen)
        assert_clean(app, "team store hits, index behind")
