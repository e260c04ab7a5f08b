"""Snapshot tests of the Checkpoints screen, a checkpoint read back as native records, and the reset dialog.

The real transcripts are copied to, and captured under, the test's own home folder (so the header, the source
folder and the verification show the same ``~/…`` text on every machine, whatever ``TMPDIR`` is), afresh for every
test from the current code. Run ids, session keys and capture times come from a fixed clock and counters while it is
built, so the screen shows the same run id and time on every machine. The app opens it in snapshot mode (nothing
is written), except the reset dialog, which needs a writable directory.
"""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.test_checkpoints_screen import INTERRUPTED, WITH_SUBAGENT, move_to, settle_checkpoints
from tui.app import SessionscopeApp
from tui.screens.checkpoints import CheckpointsScreen

SIZE = (120, 36)
CAPTURED_AT = "2026-02-24T09:30:00Z"


def build(target: Path, fixtures: Path) -> None:
    """Copy the fixtures under ``target/sources`` and capture them into ``target/sessions``, deterministically."""
    from store.agents import agentstate, checkpoint_publish
    from store.agents.capture import capture_claude_code, capture_codex
    from store.mothx.sessiondir import open_session_dir

    shutil.copytree(fixtures / "claude-code", target / "sources" / "claude-code")
    shutil.copytree(fixtures / "codex" / "sessions", target / "sources" / "codex" / "sessions")
    for p in (target / "sources").rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    counter = itertools.count(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checkpoint_publish, "clock", lambda: CAPTURED_AT)
        mp.setenv("SESSIONSCOPE_HOST", "build-07")  # not this machine's name: the same snapshot everywhere
        mp.setattr(agentstate.uuid, "uuid4", lambda: uuid.UUID(int=0x5E55_0000_0000_4000_8000_0000_0000_0000 + next(counter)))
        mp.setattr(agentstate.secrets, "token_hex", lambda n=8: f"{next(counter):0{2 * n}x}")
        (target / "sessions").mkdir(parents=True)
        with open_session_dir(target / "sessions", OpenMode.READ_WRITE, create=True) as sd:
            capture_claude_code(sd, target / "sources" / "claude-code")
            capture_codex(sd, target / "sources" / "codex" / "sessions")


@pytest.fixture
def checkpoint_dir(real_fixtures: Path) -> Path:
    """The captured session directory, built under the test's home folder (shown as ``~/checkpoints/…``)."""
    base = Path(os.environ["HOME"]) / "checkpoints"
    build(base, real_fixtures)
    return base / "sessions"


def open_screen(*keys: str, session_id: str = ""):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[object]) -> None:
        await settle(pilot)
        pilot.app.show_section_screen(CheckpointsScreen)  # type: ignore[attr-defined]
        await settle_checkpoints(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, CheckpointsScreen)
        for key in keys:
            if key == "@":
                await move_to(pilot, screen, session_id)
            else:
                await pilot.press(key)
            await settle_checkpoints(pilot)
        pilot.app.clear_notifications()  # toasts would cover the details pane
        await pilot.pause()

    return run_before


def test_checkpoints_screen(snap_compare, checkpoint_dir: Path) -> None:
    assert snap_compare(SessionscopeApp(checkpoint_dir, OpenMode.SNAPSHOT),
                        run_before=open_screen("V", "@", session_id=WITH_SUBAGENT), terminal_size=SIZE)


def test_checkpoint_transcript_with_an_interrupted_call(snap_compare, checkpoint_dir: Path) -> None:
    assert snap_compare(SessionscopeApp(checkpoint_dir, OpenMode.SNAPSHOT),
                        run_before=open_screen("@", "enter", "G", session_id=INTERRUPTED), terminal_size=SIZE)


def test_checkpoint_reset_dialog(snap_compare, checkpoint_dir: Path) -> None:
    assert snap_compare(SessionscopeApp(checkpoint_dir, OpenMode.READ_WRITE),
                        run_before=open_screen("@", "R", session_id=INTERRUPTED), terminal_size=SIZE)
