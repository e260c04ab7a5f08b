"""`sessionscope --section NAME [--session ID]`: the app's first screen is that section, with its rows in the first
frame the store's opening read for it; wrong combinations are one usage line, and nothing starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tui.app import SessionscopeApp
from tui.cli.core import main
from tui.screens.forks import ForksScreen
from tui.screens.runs import RunsScreen
from tui.start import Start
from tui.widgets.fork_lists import BoundaryList, FamilyList
from tui.widgets.run_list import RunList

pytestmark = pytest.mark.anyio


async def test_the_app_starts_on_the_runs_screen_with_the_runs_the_opening_read(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY, live=False, start=Start("runs"))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)
        runs = app.screen.query_one(RunList)
        assert runs.loaded and len(runs.visible_rows()) > 3
        assert app.sd is not None and app.take_first_read(app.sd) is None, "the first read is taken once"


async def test_the_app_starts_on_a_sessions_fork_family(demo_dir: Path) -> None:
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.sessions import SessionFilter, list_sessions

    sd = open_session_dir(demo_dir, OpenMode.READ_ONLY)
    try:
        sid = list_sessions(sd, SessionFilter(), limit=1).rows[0].id
    finally:
        sd.close()
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY, live=False, start=Start("forks", sid))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ForksScreen) and app.screen.session_id == sid
        family, turns = app.screen.query_one(FamilyList), app.screen.query_one(BoundaryList)
        assert family.loaded and turns.loaded
        assert sid in {row.session_id for row in family.rows}


@pytest.mark.parametrize(("argv", "says"), [
    (["--section", "nope"], "there is no section 'nope'"),
    (["--section", "forks"], "--section forks needs --session ID"),
    (["--session", "abcd"], "--session goes with --section forks"),
    (["--section", "runs", "--session", "abcd"], "--session goes with --section forks"),
    (["--section", "runs", "list"], "give them without a command"),
])
def test_a_wrong_section_is_one_usage_line_and_nothing_starts(
        argv: list[str], says: str, demo_dir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    monkeypatch.setattr(SessionscopeApp, "run", lambda self, *a, **k: started.append(self))
    assert main(["--dir", str(demo_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert started == []


def test_section_runs_starts_the_app_on_runs(demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Start] = []
    monkeypatch.setattr(SessionscopeApp, "run", lambda self, *a, **k: started.append(self.start))
    assert main(["--dir", str(demo_dir), "--read-only", "--section", "runs"]) == 0
    assert started == [Start("runs")]
