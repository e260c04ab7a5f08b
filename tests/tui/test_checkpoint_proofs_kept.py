"""Leaving and re-entering Checkpoints keeps the proofs (issue 9, item 8), while the checkpoint file is
unchanged; a capture in between (the file changed) shows them as not verified again."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.agents.capture import capture_codex
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.runswait import wait_for
from tests.tui.test_checkpoints_screen import (  # noqa: F401 - fixtures
    INTERRUPTED,
    ROLLOUT_13,
    captured,
    codex_copy,
    move_to,
    open_checkpoints,
    proofs,
    settle_checkpoints,
)
from tui.app import SessionscopeApp
from tui.screens.checkpoints import CheckpointsScreen
from tui.screens.sessions import SessionsScreen
from tui.widgets.checkpoint_list import NOT_VERIFIED

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


async def leave_and_come_back(pilot: object) -> CheckpointsScreen:
    app = pilot.app  # type: ignore[attr-defined]
    await pilot.press("escape")  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen), "the Sessions screen")  # type: ignore[arg-type]
    return await open_checkpoints(pilot)


async def test_proofs_survive_leaving_the_screen(captured: Path) -> None:  # noqa: F811
    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("v")
        await settle_checkpoints(pilot)
        assert proofs(screen)[INTERRUPTED] == "verified"
        again = await leave_and_come_back(pilot)
        assert again is not screen, "a new screen"
        assert proofs(again)[INTERRUPTED] == "verified", "the proof is kept"


async def test_a_capture_in_between_drops_the_proofs(captured: Path, codex_copy: Path) -> None:  # noqa: F811
    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("v")
        await settle_checkpoints(pilot)
        assert proofs(screen)[INTERRUPTED] == "verified"
        # another process captures meanwhile, after the agent appended a record
        rollout = codex_copy / ROLLOUT_13
        lines = rollout.read_text(encoding="utf-8").splitlines(keepends=True)
        with rollout.open("a", encoding="utf-8") as out:
            out.write(lines[-1] if lines[-1].endswith("\n") else "\n" + lines[-1] + "\n")
        with open_session_dir(captured, OpenMode.READ_WRITE) as sd:
            capture_codex(sd, codex_copy)
        again = await leave_and_come_back(pilot)
        assert proofs(again)[INTERRUPTED] == NOT_VERIFIED
