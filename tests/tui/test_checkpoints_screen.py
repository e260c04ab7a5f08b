"""Pilot tests of the Checkpoints screen on real captured transcripts: the list, verify (v / V), reset through
the confirm dialog, read modes blocking the reset, and reading a checkpoint back as native records."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import OptionList, Static

from store.agents import agentstate as ast
from store.agents.capture import capture_claude_code, capture_codex
from store.errors import ReadOnlyStore
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.appwait import settle
from tui.app import SessionscopeApp
from tui.screens.checkpoints import CheckpointsScreen
from tui.screens.native_transcript import NativeTranscriptScreen
from tui.widgets.checkpoint_list import NOT_VERIFIED, CheckpointList
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.keybar import KeyBar
from tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REWIND = "03eb5929-52b3-4b13-ada3-b93ae35806b8"
WITH_SUBAGENT = "29ccd257-68b1-427f-ae5f-6524b7cb6f20"
INTERRUPTED = "019c8a70-dda7-7f33-98ea-f30553347322"
LONG_RUN = "019c8a4d-8f45-7010-8b5d-7fad920aa6f9"
ROLLOUT_13 = "2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
ROLLOUT_12 = "2026/02/23/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
DEADLINE_S = 20.0


@pytest.fixture
def codex_copy(real_fixtures: Path, tmp_path: Path) -> Path:
    target = tmp_path / "codex-sessions"
    shutil.copytree(real_fixtures / "codex" / "sessions", target)
    for p in target.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return target


@pytest.fixture
def captured(real_fixtures: Path, codex_copy: Path, tmp_path: Path) -> Path:
    """A new session directory with every real transcript captured (Codex from a writable copy)."""
    root = tmp_path / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        capture_claude_code(sd, real_fixtures / "claude-code")
        capture_codex(sd, codex_copy)
    return root


async def settle_checkpoints(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until the list has its rows and no worker runs (verifications and resets included)."""
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        ready = True
        if isinstance(screen, CheckpointsScreen):
            ready = screen.query_one(CheckpointList).loaded
        elif isinstance(screen, NativeTranscriptScreen):
            ready = screen.loaded and not screen.active_view.fetching
        if ready and not any(w.is_running for w in app.workers):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the checkpoints screen did not settle: {screen!r}")
        await asyncio.sleep(0.02)


async def open_checkpoints(pilot) -> CheckpointsScreen:  # type: ignore[no-untyped-def]
    await settle(pilot)
    pilot.app.show_section_screen(CheckpointsScreen)
    await settle_checkpoints(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, CheckpointsScreen)
    return screen


def proofs(screen: CheckpointsScreen) -> dict[str, str]:
    cl = screen.query_one(CheckpointList)
    return {info.agent_session_id: cl.proof_label(info) for info in cl.rows}


async def move_to(pilot, screen: CheckpointsScreen, agent_session_id: str) -> None:  # type: ignore[no-untyped-def]
    cl = screen.query_one(CheckpointList)
    cl.focus()
    index = next(i for i, r in enumerate(cl.rows) if r.agent_session_id == agent_session_id)
    await pilot.press("g", *(["j"] * index))
    await pilot.pause()
    assert cl.selected is not None and cl.selected.agent_session_id == agent_session_id


def details_text(screen: CheckpointsScreen) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - recorded, not shown
    console.print(screen.query_one("#details-body", Static).content)
    return console.export_text()


# --- the list ---------------------------------------------------------------------------------------------------


async def test_jump_lists_captured_checkpoints_by_agent(captured: Path) -> None:
    app = SessionscopeApp(captured, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("colon")
        await pilot.pause(0.3)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Checkpoints", "enter")
        await pilot.pause(0.3)
        await settle_checkpoints(pilot)
        screen = app.screen
        assert isinstance(screen, CheckpointsScreen)
        cl = screen.query_one(CheckpointList)
        assert cl.has_focus
        assert [(r.agent_id, r.agent_session_id) for r in cl.rows] == sorted(
            (i.agent_id, i.agent_session_id) for i in cl.rows)
        assert len(cl.rows) == 7
        assert set(proofs(screen).values()) == {NOT_VERIFIED}, "nothing is read from disk before v"
        assert screen.query_one(StatusBar).count == "7 checkpoints"
        rows = {r.agent_session_id: r for r in cl.rows}
        assert rows[WITH_SUBAGENT].state is not None and rows[WITH_SUBAGENT].state.file_count == 2
        assert rows[LONG_RUN].state is not None and rows[LONG_RUN].state.record_count == 417

        await move_to(pilot, screen, WITH_SUBAGENT)
        text = details_text(screen)
        shapes = rows[WITH_SUBAGENT].state.files  # type: ignore[union-attr]
        assert "subagents/agent-a2271d1.jsonl" in text
        for shape in shapes:
            assert shape.digest[:16] in text
        assert "65 in 2 files" in text and "not verified yet" in text

        agents = screen.query_one("#agents", OptionList)
        assert agents.option_count == 3  # all, Claude Code, Codex
        agents.focus()
        await pilot.press("down", "down")  # Codex
        await pilot.pause()
        assert {r.agent_id for r in cl.rows} == {"codex"} and len(cl.rows) == 3
        assert screen.query_one(StatusBar).count == "3 of 7 checkpoints"
        await pilot.press("enter")
        await pilot.pause()
        assert cl.has_focus
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CheckpointsScreen), "escape goes back"


async def test_empty_directory_says_how_to_capture(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        cl = screen.query_one(CheckpointList)
        assert cl.rows == []
        assert "sessionscope capture claude-code" in cl.render_line(1).text
        assert screen.query_one(StatusBar).count == "0 checkpoints"
    assert not (root / "sessionscope").exists(), "a read mode creates no checkpoint file"


# --- verify -----------------------------------------------------------------------------------------------------


async def test_v_verifies_one_and_V_every_checkpoint(captured: Path, codex_copy: Path) -> None:
    # One rollout grows on disk (verified, 1 new record), another is rewritten (divergent).
    with (codex_copy / ROLLOUT_12).open("ab") as fh:
        fh.write(json.dumps({"timestamp": "2026-02-23T13:00:00.000Z", "type": "event_msg",
                             "payload": {"type": "agent_message", "message": "later"}}).encode() + b"\n")
    rewritten = codex_copy / ROLLOUT_13
    lines = rewritten.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"role":"developer"', b'"role":"user"')
    rewritten.write_bytes(b"\n".join(lines))

    app = SessionscopeApp(captured, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("v")
        await settle_checkpoints(pilot)
        got = proofs(screen)
        assert got[INTERRUPTED] == "divergent"
        assert all(v == NOT_VERIFIED for k, v in got.items() if k != INTERRUPTED), "v verifies only the selected one"
        assert "line 3 differs from the checkpoint" in details_text(screen)
        assert any(n.title == "Verify" and "divergent" in str(n.message) for n in app._notifications)

        await pilot.press("V")
        await settle_checkpoints(pilot)
        got = proofs(screen)
        assert got[INTERRUPTED] == "divergent"
        assert got[LONG_RUN] == "verified +1 new"
        assert {v for k, v in got.items() if k not in (INTERRUPTED, LONG_RUN)} == {"verified"}
        status = screen.query_one(StatusBar).query_text
        assert "6 verified" in status and "1 divergent" in status
        assert any("Verified 7 checkpoints: 6 verified, 1 divergent." == str(n.message) for n in app._notifications)
        cl = screen.query_one(CheckpointList)
        row = cl.rows.index(next(r for r in cl.rows if r.agent_session_id == LONG_RUN))
        cl.cursor = row
        await pilot.pause()
        assert "1 more on disk, not captured yet" in details_text(screen)


# --- reset ------------------------------------------------------------------------------------------------------


async def test_R_publishes_a_reset_through_the_dialog(captured: Path) -> None:
    app = SessionscopeApp(captured, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("v")
        await settle_checkpoints(pilot)
        assert proofs(screen)[INTERRUPTED] == "verified"

        await pilot.press("ctrl+r")
        await settle_checkpoints(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmDialog)
        assert INTERRUPTED in dialog.request.preview and "19 records stops being loadable" in dialog.request.preview
        await pilot.press("enter")  # Cancel has the focus: nothing changes
        await settle_checkpoints(pilot)
        assert app.screen is screen
        assert ast.head(app.sd, "codex", INTERRUPTED).kind == "checkpoint"  # type: ignore[arg-type,union-attr]

        await pilot.press("ctrl+r")
        await settle_checkpoints(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle_checkpoints(pilot)
        assert app.screen is screen
        assert ast.head(app.sd, "codex", INTERRUPTED).kind == "reset"  # type: ignore[arg-type,union-attr]
        cl = screen.query_one(CheckpointList)
        row = next(r for r in cl.rows if r.agent_session_id == INTERRUPTED)
        assert row.head is not None and row.head.kind == "reset" and row.state is None
        assert proofs(screen)[INTERRUPTED] == NOT_VERIFIED, "the old proof no longer applies"
        assert any(n.title == "Reset published" for n in app._notifications)

        await pilot.press("ctrl+r")  # a reset head cannot be reset again: a warning, no dialog
        await settle_checkpoints(pilot)
        assert app.screen is screen
        assert any("already a reset" in str(n.message) for n in app._notifications)
        await pilot.press("v")
        await settle_checkpoints(pilot)
        assert proofs(screen)[INTERRUPTED] == "out of sync"


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT])
async def test_read_modes_block_R(captured: Path, mode: OpenMode) -> None:
    state = captured / "sessionscope" / "agent-state.db"
    before = hashlib.sha256(state.read_bytes()).hexdigest()
    app = SessionscopeApp(captured, mode)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        assert screen.active_bindings["ctrl+r"].enabled is False
        assert screen.active_bindings["v"].enabled is True
        bar = screen.query_one(KeyBar).render()
        start = bar.plain.index("Reset")
        assert any(s.start <= start < s.end and getattr(s.style, "dim", False) for s in bar.spans), "R is dimmed"
        await pilot.press("ctrl+r")
        await settle_checkpoints(pilot)
        assert app.screen is screen, "no dialog opens"
        await pilot.press("V")  # verifying only reads
        await settle_checkpoints(pilot)
        assert set(proofs(screen).values()) == {"verified"}
        with pytest.raises(ReadOnlyStore):  # the store refuses on its own as well
            ast.publish_reset(app.sd, "codex", INTERRUPTED)  # type: ignore[arg-type]
    assert hashlib.sha256(state.read_bytes()).hexdigest() == before


# --- reading a checkpoint ---------------------------------------------------------------------------------------


def view_text(screen: NativeTranscriptScreen) -> str:
    view = screen.active_view
    return "\n".join(view.render_line(y).text for y in range(view.size.height))


async def test_enter_opens_the_checkpoint_in_the_native_transcript_screen(captured: Path) -> None:
    """The full reading of native records is tested in test_native_transcript; here: enter opens it, esc is back."""
    app = SessionscopeApp(captured, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)

        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("enter")
        await settle_checkpoints(pilot)
        native = app.screen
        assert isinstance(native, NativeTranscriptScreen) and native.error == ""
        assert native.transcript is not None and native.transcript.records == 19
        await pilot.press("G")
        await settle_checkpoints(pilot)
        text = view_text(native)
        assert "→ exec_command" in text and "⚠ interrupted: no result was recorded" in text
        assert "1 interrupted" in str(native.query_one("#transcript-title", Static).content)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_enter_on_a_reset_head_explains_instead_of_opening(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_WRITE) as sd:
        ast.publish_reset(sd, "codex", INTERRUPTED)
    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("enter")
        await settle_checkpoints(pilot)
        assert app.screen is screen
        assert any("its head is a reset" in str(n.message) for n in app._notifications)


def test_every_binding_is_registered_with_a_tooltip() -> None:
    from tui import actions

    for owner in (CheckpointsScreen, CheckpointList):
        for binding in owner.BINDINGS:
            spec = actions.find(binding.id)
            assert spec is not None and spec.tooltip, f"{owner.__name__}: {binding.key}"
    assert actions.get("checkpoints.reset").writes is True
    assert not actions.get("checkpoints.verify").writes and not actions.get("checkpoints.verify-all").writes
    assert "ctrl+r" not in actions.get("confirm.apply").key.split(","), "the key that opens the reset cannot confirm it"


# --- repaired copy ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [OpenMode.READ_WRITE, OpenMode.SNAPSHOT])
async def test_x_writes_a_repaired_copy_of_the_interrupted_rollout(captured: Path, codex_copy: Path,
                                                                    mode: OpenMode) -> None:
    source = codex_copy / ROLLOUT_13
    before = source.read_bytes()
    db_before = (captured / "sessions.db").read_bytes() if mode.is_read else b""
    app = SessionscopeApp(captured, mode)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_checkpoints(pilot)
        await move_to(pilot, screen, INTERRUPTED)
        await pilot.press("x")
        await settle_checkpoints(pilot)
        await pilot.press("x")  # a second copy never replaces the first
        await settle_checkpoints(pilot)
    first = Path.home() / f"{source.stem}.repaired.jsonl"
    second = Path.home() / f"{source.stem}.repaired-1.jsonl"
    assert first.is_file() and second.is_file()
    lines = first.read_text().splitlines()
    assert len(lines) == len(before.splitlines()) + 1  # one synthetic result for the one interrupted call
    assert "interrupted" in lines[18]
    assert source.read_bytes() == before
    if mode.is_read:
        assert (captured / "sessions.db").read_bytes() == db_before


# --- columns at 80 and 240 cells -----------------------------------------------------------------------------------


def header_titles(cl: CheckpointList) -> list[str]:
    line = cl.render_line(0).text
    return [c.title for c in cl.columns if c.title in line]


@pytest.mark.parametrize(("size", "expected"), [
    ((80, 24), ["SESSION ID", "WORK DIR", "RECORDS", "PROOF"]),
    ((240, 50), ["AGENT", "SESSION ID", "WORK DIR", "FILES", "RECORDS", "HEAD", "PROOF", "HOST"]),
])
async def test_list_keeps_its_telling_columns(captured: Path, size: tuple[int, int], expected: list[str]) -> None:
    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=size) as pilot:
        screen = await open_checkpoints(pilot)
        cl = screen.query_one(CheckpointList)
        assert header_titles(cl) == expected
        assert cl.selected is not None
        row = cl.render_line(1).text
        if size[0] >= 240:
            assert cl.selected.agent_session_id in row, "the session id is shown whole"
        else:
            assert cl.selected.agent_session_id[:8] in row and "not verified yet" in row
