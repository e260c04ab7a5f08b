"""Hostile data on the Sessions, Runs and Checkpoints screens, their dialogs, help and the palette.

A private copy of the demo gets terminal escapes, C1 controls, bidi overrides and Rich/Textual markup in its
titles, work dirs, channels, a lease owner id, run errors, event sources and interrupted tool names, and a
captured Claude Code checkpoint whose work dir is ``/home/u/[archive]/repo`` followed by a retitle escape.
Every screen is opened and every repair dialog looked at: nothing may crash (``[/]`` is a MarkupError when it
is parsed), no drawn segment or notification may hold a raw control or bidi character, and bracketed text is
shown as it is.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from textual.command import CommandPalette

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.rendered import assert_clean, notification_texts
from tests.tui.runswait import db_rows, settle_runs, wait_for
from tests.tui.test_runs_screen import demo_runs, open_runs, select
from tui.app import SessionscopeApp
from tui.screens.checkpoints import CheckpointsScreen
from tui.screens.help import HelpScreen
from tui.screens.runs import RunsScreen, ToolPickDialog
from tui.widgets.checkpoint_list import CheckpointList
from tui.widgets.confirm import ConfirmDialog

pytestmark = pytest.mark.anyio

SIZE = (160, 48)

HOSTILE = [
    "\x1b]52;c;aGFja2Vk\x07",
    "\x1b]0;pwned\x07",
    "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
    "\x1b[2J",
    "\x9b31m",
    "\x07",
    "\u202etxt.exe",
    "\ud83d",
    "pid-4242-[/]",
    "[bold]x[/bold]",
    "[link=file:///etc/passwd]x[/link]",
    "[@click=app.quit]x[/]",
    "/home/u/[archive]/repo",
]
OWNER = "pid-4242-[/]\x1b[2J"
TOOL = "[@click=app.quit]rm[/]\x1b]0;x\x07"
CWD = "/home/u/[archive]/repo\x1b]0;x\x07"
CHECKPOINT_SID = "0badc0de-0000-4000-8000-000000000001"


DB_HOSTILE = [value for value in HOSTILE if value != "\ud83d"]
"""What a database can hold (a lone surrogate has no UTF-8 form; the boundary's own tests cover it)."""


def poison(root: Path) -> None:
    """Hostile titles, work dirs, channels, a live lease's owner, run errors and event sources."""
    ids = demo_runs(root)
    live_session = ids[ids["live"]]
    conn = sqlite3.connect(root / "sessions.db")
    with conn:
        sessions = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]
        for i, sid in enumerate(sessions):
            bad = DB_HOSTILE[i % len(DB_HOSTILE)]
            conn.execute("UPDATE sessions SET cwd = ?, channel_type = ? WHERE id = ?",
                         (f"/home/u/[archive]/{bad}", f"ch{bad}", sid))
            conn.execute("UPDATE entries SET data = json_set(data, '$.name', ?) WHERE session_id = ? "
                         "AND type = 'session_info'", (f"title {bad} end", sid))
        conn.execute("UPDATE session_runtime_leases SET owner_instance_id = ? WHERE session_id = ?",
                     (OWNER, live_session))
        conn.execute("UPDATE session_runs SET error = ? WHERE status = 'failed'", ("boom [/] \x1b[2J \u202e",))
        conn.execute("UPDATE session_run_events SET source = ? WHERE rowid % 2 = 0", ("src[/]\x1b[2J",))
    conn.close()


def write_claude_transcript(base: Path) -> Path:
    """A tiny Claude Code project folder whose one session has a hostile work dir and text."""
    folder = base / "-home-u-archive-repo"
    folder.mkdir(parents=True)
    records = []
    parent = None
    for n, (role, text) in enumerate([("user", "hello [bold]x[/bold] \x1b[2J"), ("assistant", "[/] done")]):
        uuid = f"00000000-0000-4000-8000-{n:012d}"
        records.append({
            "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD,
            "sessionId": CHECKPOINT_SID, "version": "2.1.42", "gitBranch": "main", "type": role,
            "message": {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]},
            "uuid": uuid, "timestamp": f"2026-11-20T09:00:0{n}.000Z",
        })
        parent = uuid
    path = folder / f"{CHECKPOINT_SID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return base


@pytest.fixture
def hostile_dir(demo_dir: Path, tmp_path: Path) -> Path:
    from store.agents.capture import capture_claude_code
    from store.mothx.sessiondir import open_session_dir

    poison(demo_dir)
    with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd:
        capture_claude_code(sd, write_claude_transcript(tmp_path / "claude"))
    return demo_dir


def literal(text: str, *parts: str) -> None:
    for part in parts:
        assert part in text, f"{part!r} is not shown as it is"


async def test_sessions_help_and_palette_draw_hostile_text_as_text(hostile_dir: Path) -> None:
    app = SessionscopeApp(hostile_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = assert_clean(app, "sessions")
        literal(text, "[bold]x[/bold]", "pid-4242-[/]", "/home/u/[archive]/", "[@click=app.quit]x[/]", "␛[2J",
                "\\u202etxt.exe", "\\x9b31m")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        assert_clean(app, "help")
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause(0.3)
        text = assert_clean(app, "palette")
        literal(text, "Filter")
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("f")  # the facet picker names the hostile work dirs
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the facet picker")
        await pilot.pause(0.3)
        text = assert_clean(app, "facets")
        literal(text, "/home/u/[archive]/")
        await pilot.press("escape")
        await pilot.pause()
        assert app.return_code is None, "nothing quit the app ([@click=app.quit] is only text)"
    assert app._exception is None  # noqa: SLF001


async def test_runs_repairs_and_tool_picker_draw_hostile_text_as_text(hostile_dir: Path) -> None:
    ids = demo_runs(hostile_dir)
    app = SessionscopeApp(hostile_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        text = assert_clean(app, "runs")
        literal(text, "pid-4242-[/]␛")
        await select(pilot, screen, ids["live"])
        text = assert_clean(app, "runs, live run selected")
        literal(text, "pid-4242-[/]␛[2J")
        for key in ("X", "L"):  # refused: the notification names the hostile holder
            await pilot.press(key)
            await settle_runs(pilot)
            assert not isinstance(app.screen, ConfirmDialog), key
            assert "pid-4242-[/]␛[2J" in screen.last_error, screen.last_error
            assert_clean(app, f"refusal of {key}")
        assert any("pid-4242-[/]␛[2J" in n for n in notification_texts(app))

        # recover the orphan (its dialog first), then abandon hostile tool calls: the picker and its preview
        await select(pilot, screen, ids["orphan"])
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the recovery dialog")
        assert_clean(app, "recovery dialog")
        await pilot.press("y")
        await settle_runs(pilot)
        assert screen.last_result is not None, screen.last_error
        session = ids[ids["orphan"]]
        turn = db_rows(hostile_dir, "SELECT id FROM conversation_turns WHERE session_id = ? ORDER BY start_seq DESC "
                                    "LIMIT 1", (session,))[0][0]
        conn = sqlite3.connect(hostile_dir / "sessions.db")
        with conn:
            conn.execute(
                "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
                "VALUES (?, ?, ?, 'p', 'a', 'call_h', 'function', ?, 'h', 'running', 1, '2026-11-20T09:00:00Z')",
                (session, turn, f"{turn}:call_h", TOOL))
        conn.close()
        await pilot.press("T")
        await wait_for(pilot, lambda: isinstance(app.screen, ToolPickDialog), "the tool picker")
        await pilot.pause()
        text = assert_clean(app, "tool picker")
        literal(text, "[@click=app.quit]rm[/]␛]0;x␇")
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the abandon dialog")
        await pilot.pause()
        assert_clean(app, "abandon dialog")
        await pilot.press("escape")
        await settle_runs(pilot)
        assert isinstance(app.screen, RunsScreen)
        assert db_rows(hostile_dir, "SELECT execution_state FROM tool_execution_records WHERE provider_call_id = "
                                    "'call_h'") == [("running",)], "cancel changes nothing"
        assert_clean(app, "runs after the dialogs")
        assert app.return_code is None
    assert app._exception is None  # noqa: SLF001


async def test_checkpoints_show_a_bracketed_work_dir_as_it_is(hostile_dir: Path) -> None:
    app = SessionscopeApp(hostile_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.show_section_screen(CheckpointsScreen)

        def listed() -> bool:
            if not isinstance(app.screen, CheckpointsScreen) or not app.screen.query(CheckpointList):
                return False
            return app.screen.query_one(CheckpointList).loaded and not any(w.is_running for w in app.workers)

        await wait_for(pilot, listed, "the checkpoints")
        screen = app.screen
        assert isinstance(screen, CheckpointsScreen)
        cl = screen.query_one(CheckpointList)
        cl.focus()
        cl.cursor = next(i for i, r in enumerate(cl.rows) if r.agent_session_id == CHECKPOINT_SID)
        await pilot.pause()
        text = assert_clean(app, "checkpoints")
        literal(text, "/home/u/[archive]/repo␛]0;x␇")
        assert "/home/u//repo" not in text
        await pilot.press("v")
        await wait_for(pilot, lambda: cl.proof_label(cl.rows[cl.cursor]) not in ("verifying…", "not verified yet"),
                       "the verification")
        assert_clean(app, "after v")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the reset dialog")
        await pilot.pause()
        assert_clean(app, "reset dialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, "the dialog to close")
        assert_clean(app, "checkpoints after the dialog")
    assert app._exception is None  # noqa: SLF001


def test_errors_and_times_are_safe_text() -> None:
    from store.errors import StoreError
    from tui.formatting import describe_error, utc_minutes

    assert describe_error(StoreError("held by pid-4242-[/]\x1b[2J\u202e")) == "held by pid-4242-[/]␛[2J\\u202e"
    assert describe_error(ValueError("bad\x07\nvalue")) == "Unexpected ValueError: bad␇ value"
    assert utc_minutes("\x1b]0;x\x07") == "(unreadable)"
    assert utc_minutes("2026-03-01T23:30:00+02:00") == "2026-03-01 21:30"


async def test_a_hostile_directory_name_in_the_header_and_the_error_screen(demo_master: Path, tmp_path: Path) -> None:
    import shutil

    from tui.screens.welcome import OpenFailedScreen

    odd = tmp_path / "dir [x]\x1b]0;y\x07" / "sessions"
    shutil.copytree(demo_master, odd)
    app = SessionscopeApp(odd, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        literal(assert_clean(app, "header"), "dir [x]␛]0;y␇")
    missing = SessionscopeApp(tmp_path / "gone [/]\x1b[2J")
    async with missing.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(missing.screen, OpenFailedScreen), "the error screen")
        await pilot.pause()
        literal(assert_clean(missing, "open failed"), "gone [/]␛[2J")
    assert app._exception is None and missing._exception is None  # noqa: SLF001
