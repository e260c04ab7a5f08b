"""NO_COLOR (set to anything, even empty) and a monochrome terminal: every screen opens and reads.

Textual reads NO_COLOR when the app is created (the conftest clears it, so each test sets it first) and then
draws through its monochrome filter: nothing of ours may depend on a colour being there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.rendered import assert_clean
from tests.tui.runswait import settle_runs, wait_for
from tests.tui.test_runs_screen import demo_runs, open_runs, select
from tui.app import SessionscopeApp
from tui.screens.checkpoints import CheckpointsScreen
from tui.screens.help import HelpScreen
from tui.screens.welcome import OpenFailedScreen, WelcomeScreen
from tui.widgets.confirm import ConfirmDialog

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


@pytest.fixture(params=["1", ""], ids=["NO_COLOR=1", "NO_COLOR-empty"])
def no_color(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("NO_COLOR", request.param)
    return str(request.param)


def _reads(app: SessionscopeApp, where: str, *words: str) -> None:
    text = assert_clean(app, where)
    for word in words:
        assert word in text, f"{where}: {word!r} is not on screen"


async def test_sessions_runs_dialog_checkpoints_help_and_palette(no_color: str, demo_dir: Path) -> None:
    ids = demo_runs(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    assert app.no_color
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        _reads(app, "sessions", "Sessionscope", "TITLE", "sessions")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        _reads(app, "help", "Keys")
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause(0.3)
        _reads(app, "palette", "Filter")
        await pilot.press("escape")
        await pilot.pause()

        screen = await open_runs(pilot)
        _reads(app, "runs", "RUN", "LEASE HOLDER")
        await select(pilot, screen, ids["orphan"])
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the repair dialog")
        await pilot.pause()
        _reads(app, "repair dialog", "Recover an orphaned run", "Cancel")
        await pilot.press("escape")
        await settle_runs(pilot)

        app.show_section_screen(CheckpointsScreen)
        await wait_for(pilot, lambda: isinstance(app.screen, CheckpointsScreen) and not any(
            w.is_running for w in app.workers), "the checkpoints")
        await pilot.pause()
        _reads(app, "checkpoints", "AGENTS")
    assert app._exception is None  # noqa: SLF001


async def test_welcome_and_open_failed(no_color: str, tmp_path: Path) -> None:
    app = SessionscopeApp(None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, WelcomeScreen)
        _reads(app, "welcome", "open the demo")
    failed = SessionscopeApp(tmp_path / "missing")
    async with failed.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(failed.screen, OpenFailedScreen), "the error screen")
        await pilot.pause()
        _reads(failed, "open failed", "Cannot open")
    assert app._exception is None and failed._exception is None  # noqa: SLF001
