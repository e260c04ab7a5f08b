"""Following a live session: another OS process appends to a mothx session (raw SQL) or to an agent's JSONL file,
and the open transcript shows the new records without being reopened.

mothx sessions: the app's file watcher (its own live updates, no bus) names the session; the Transcript screen
reads what follows its cursor. At the bottom the view follows; scrolled up, "N new" appears and nothing moves; a
gap reloads ("partial"); F stops and resumes following. Native files: the screen looks at the file itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.appwait import settle as settle_app
from tests.tui.runswait import wait_for as wait_for_runs
from tests.tui.test_live import free_udp_port, replace_live
from tests.tui.test_native_transcript import (
    REWIND,
    REWIND_FILE,
    NativeHost,
    all_blocks_text,
    copy_fixtures,
)
from tests.tui.test_native_transcript import settle as settle_native
from tests.tui.test_native_transcript import visible as native_visible
from tests.tui.transcript_support import DemoSessions, find_demo_sessions, screen_text
from tests.tui.transcript_support import settle as settle_transcript
from tui.app import SessionscopeApp
from tui.screens.native_transcript import NativeRef, NativeTranscriptScreen
from tui.screens.transcript import TranscriptScreen

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REPO = Path(__file__).resolve().parents[2]
ROLLOUT_13 = "2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
INTERRUPTED_CALL = "call_UtYwHmwWekzvq83m8Rb9K8jJ"


@pytest.fixture(scope="module")
def demo_sessions(demo_master: Path) -> DemoSessions:
    return find_demo_sessions(demo_master)


def append_messages(folder: Path, session_id: str, texts: list[str]) -> None:
    """In another OS process: append user messages to a session with raw SQL, as a runtime would."""
    script = textwrap.dedent("""
        import json, secrets, sqlite3, sys
        folder, sid, texts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
        conn = sqlite3.connect(folder + "/sessions.db", timeout=10)
        with conn:
            row = conn.execute("SELECT id FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (sid,)).fetchone()
            parent = row[0] if row else None
            for n, text in enumerate(texts):
                eid = secrets.token_hex(8)
                stamp = f"2026-11-20T12:30:{n:02d}Z"
                data = {"type": "message", "id": eid, "parentId": parent, "timestamp": stamp,
                        "message": {"role": "user", "content": text, "timestamp": stamp}}
                conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
                             "VALUES (?, ?, 'message', ?, ?, ?)", (sid, eid, parent, stamp, json.dumps(data)))
                parent = eid
        conn.close()
    """)
    subprocess.run([sys.executable, "-c", script, str(folder), session_id, json.dumps(texts)], check=True,
                   cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)


async def wait_for(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    await wait_for_runs(pilot, condition, what)


async def open_followed(pilot: Pilot[Any], app: SessionscopeApp, session_id: str) -> TranscriptScreen:
    await settle_app(pilot)
    await replace_live(app, bus=False, watch=True, port=free_udp_port())
    app.open_transcript(session_id)
    await settle_transcript(pilot)
    screen = app.screen
    assert isinstance(screen, TranscriptScreen) and screen.follow
    return screen


def status(screen: TranscriptScreen | NativeTranscriptScreen) -> str:
    return str(screen.query_one("#transcript-status", Static).content)


# --- mothx sessions ---------------------------------------------------------------------------------------------


async def test_at_the_bottom_new_entries_appear_and_the_view_follows(demo_dir: Path,
                                                                     demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.tool_error
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_followed(pilot, app, sid)
        rows_before = screen.facts.plan.total_rows  # type: ignore[union-attr]
        await pilot.press("G")
        await settle_transcript(pilot)
        assert screen.transcript_view.at_bottom

        append_messages(demo_dir, sid, ["follow one: first appended prompt", "follow two: the last one"])
        await wait_for(pilot, lambda: "follow two: the last one" in screen_text(app), "the appended entries to show")
        await settle_transcript(pilot)
        assert screen.transcript_view.at_bottom, "the view followed the new entries"
        assert "follow one: first appended prompt" in screen_text(app)
        assert screen.new_count == 0 and screen.reloads == 0, "appended without reloading"
        assert screen.facts is not None and screen.facts.plan.total_rows == rows_before + 2
        assert "▼" not in status(screen)

        # a second write is seen too (the integrity check's own connection must not have dropped our locks)
        append_messages(demo_dir, sid, ["follow three: a later write"])
        await wait_for(pilot, lambda: "follow three: a later write" in screen_text(app), "the second write to show")
        assert screen.facts.plan.total_rows == rows_before + 3


def test_a_second_connection_of_ours_keeps_the_first_one_live(demo_dir: Path, demo_sessions: DemoSessions) -> None:
    """Closing any file descriptor of sessions.db drops this process's POSIX locks on it; the store must never
    read the header of a file it holds open, or a foreign writer deletes the WAL under our connection."""
    from tui.app import quick_check_aside

    sid = demo_sessions.tool_error
    with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd:
        def top() -> int:
            with sd.db.read() as conn:
                return int(conn.execute("SELECT max(seq) FROM entries").fetchone()[0])

        start = top()
        assert quick_check_aside(sd) == "ok"  # opens and closes a second connection to the same file
        for n in range(3):
            append_messages(demo_dir, sid, [f"write {n}"])
            assert top() == start + n + 1
            assert (demo_dir / "sessions.db-wal").exists(), "our connection still counts as a user of the WAL"


async def test_scrolled_up_it_says_n_new_and_does_not_move(demo_dir: Path, demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.long  # many pages: the window does not reach the end from the top
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_followed(pilot, app, sid)
        view = screen.transcript_view
        top = view.anchor_item
        shown = screen_text(app)
        assert top is not None and not view.at_bottom

        append_messages(demo_dir, sid, ["new while scrolled up: one", "new while scrolled up: two",
                                        "new while scrolled up: three"])
        await wait_for(pilot, lambda: screen.new_count == 3, "the 'N new' count")
        await settle_transcript(pilot)
        assert "▼ 3 new — G to see them" in status(screen)
        assert view.anchor_item is not None and view.anchor_item.key == top.key, "nothing jumped"
        assert screen_text(app) == shown

        await pilot.press("G")
        await settle_transcript(pilot)
        assert "new while scrolled up: three" in screen_text(app)
        assert screen.new_count == 0 and "▼" not in status(screen)


async def test_a_gap_says_partial_and_reloads(demo_dir: Path, demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.tool_error
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_followed(pilot, app, sid)
        screen.FOLLOW_LIMIT = 2  # type: ignore[misc]  # one follow step reads at most two rows: five new ones are a gap
        await pilot.press("G")
        await settle_transcript(pilot)

        append_messages(demo_dir, sid, [f"gap row {n}" for n in range(1, 6)])
        await wait_for(pilot, lambda: screen.reloads == 1 and "gap row 5" in screen_text(app),
                       "the reload after the gap")
        await settle_transcript(pilot)
        assert screen.follow_note.startswith("partial"), screen.follow_note
        assert "partial, reloaded" in status(screen)
        assert screen.transcript_view.at_bottom, "the reload kept the view at the bottom"


async def test_a_replaced_session_reloads_from_scratch(demo_dir: Path, demo_sessions: DemoSessions) -> None:
    """The follow generation is the session id with its creation time: a session written anew is another one."""
    from tests.tui.test_live import foreign_write

    sid = demo_sessions.tool_error
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_followed(pilot, app, sid)
        await pilot.press("G")
        await settle_transcript(pilot)
        old = screen.facts.cursor  # type: ignore[union-attr]
        foreign_write(demo_dir, "UPDATE sessions SET timestamp = ? WHERE id = ?", ["2026-11-20T12:45:00Z", sid])
        append_messages(demo_dir, sid, ["the first entry of the new generation"])
        await wait_for(pilot, lambda: screen.reloads >= 1 and "the first entry of the new generation" in
                       screen_text(app), "the reload from scratch")
        await settle_transcript(pilot)
        assert "reloaded from scratch" in screen.follow_note
        assert screen.facts is not None and screen.facts.cursor is not None and old is not None
        assert screen.facts.cursor.generation != old.generation


async def test_F_stops_following_and_catches_up_when_turned_on(demo_dir: Path, demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.tool_error
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_followed(pilot, app, sid)
        await pilot.press("G", "F")
        await settle_transcript(pilot)
        assert not screen.follow and "follow off" in status(screen)
        live = app.live
        assert live is not None
        flushes = live.stats().flushes
        append_messages(demo_dir, sid, ["written while not following"])
        await wait_for(pilot, lambda: live.stats().flushes > flushes, "the live hint to reach the screens")
        await settle_transcript(pilot)
        assert "written while not following" not in screen_text(app)

        await pilot.press("F")
        await wait_for(pilot, lambda: "written while not following" in screen_text(app), "the catch-up")
        assert screen.follow and "follow on" in status(screen)


# --- native files -----------------------------------------------------------------------------------------------


def _append_line(path: Path, obj: dict[str, object]) -> None:
    """Another OS process appends one JSON line, as the agent does."""
    subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')",
                    str(path), json.dumps(obj)], check=True, timeout=60)


async def test_a_line_appended_to_a_codex_file_appears(real_fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    shutil.copyfile(real_fixtures / "codex" / "sessions" / ROLLOUT_13, path)
    path.chmod(0o644)
    root = tmp_path / "sessions"
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        app = NativeHost(sd, NativeRef("codex", path=str(path)))
        async with app.run_test(size=SIZE) as pilot:
            screen = await settle_native(pilot)
            assert screen.transcript is not None and len(screen.transcript.interrupted) == 1
            await pilot.press("G")
            await settle_native(pilot)

            _append_line(path, {"timestamp": "2026-02-23T12:20:30.000Z", "type": "response_item",
                                "payload": {"type": "function_call_output", "call_id": INTERRUPTED_CALL,
                                            "output": "finished after all"}})
            await wait_for(pilot, lambda: screen.transcript is not None and screen.transcript.records == 20,
                           "the appended line to be read")
            screen = await settle_native(pilot)
            text = all_blocks_text(screen)
            assert "⚠ interrupted" not in text and "◂ result  line 20" in text, "the call now has its result"
            assert "finished after all" in native_visible(screen), "at the bottom: the view follows"
            assert screen.block_view.at_bottom and screen.new_count == 0

            await pilot.press("g")
            await settle_native(pilot)
            _append_line(path, {"timestamp": "2026-02-23T12:20:31.000Z", "type": "event_msg",
                                "payload": {"type": "task_complete", "turn_id": "019c8a70-ebe7-7e83-92b2-f77ddd49c5f9"}})
            await wait_for(pilot, lambda: screen.transcript is not None and screen.transcript.records == 21,
                           "the second appended line")
            await settle_native(pilot)
            assert screen.transcript is not None and not screen.transcript.incomplete_turns, "the turn is complete now"
            assert "line 1 ·" in native_visible(screen), "scrolled up: the view did not move"

            path.write_bytes(b"\n".join(path.read_bytes().split(b"\n")[:5]) + b"\n")  # the file is rewritten
            await wait_for(pilot, lambda: screen.transcript is not None and screen.transcript.records == 5,
                           "the rewritten file to be read from scratch")
            assert "rewritten" in screen.follow_note


async def test_a_line_appended_to_a_captured_claude_code_file_is_captured_and_shown(real_fixtures: Path,
                                                                                     tmp_path: Path) -> None:
    from store.agents.agentstate import checkpoint_info
    from store.agents.capture import capture_claude_code

    cc, _cx = copy_fixtures(real_fixtures, tmp_path / "sources")
    root = tmp_path / "sessions"
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        capture_claude_code(sd, cc)
        app = NativeHost(sd, NativeRef("claude-code", REWIND))
        async with app.run_test(size=SIZE) as pilot:
            screen = await settle_native(pilot)
            assert screen.disk_path == cc / REWIND_FILE and "appended records are captured" in str(
                screen.query_one("#transcript-title", Static).content)
            await pilot.press("g")
            await settle_native(pilot)
            last = json.loads((cc / REWIND_FILE).read_bytes().split(b"\n")[-2])
            _append_line(cc / REWIND_FILE, {
                "parentUuid": last["uuid"], "isSidechain": False, "type": "user", "sessionId": REWIND,
                "uuid": "0f0f0f0f-0000-4000-8000-000000000001", "timestamp": "2026-02-17T00:20:00.000Z",
                "cwd": "/home/user/project", "version": "2.1.42",
                "message": {"role": "user", "content": "a prompt typed after the capture"}})
            await wait_for(pilot, lambda: screen.transcript is not None and screen.transcript.records == 62,
                           "the appended record")
            screen = await settle_native(pilot)
            info = checkpoint_info(sd, "claude-code", REWIND)
            assert info is not None and info.state is not None and info.state.record_count == 62, "captured again"
            assert "a prompt typed after the capture" in all_blocks_text(screen)
            assert screen.new_count == 1 and "▼ 1 new — G to see them" in str(
                screen.query_one("#transcript-status", Static).content)
            await pilot.press("G")
            await settle_native(pilot)
            assert "a prompt typed after the capture" in native_visible(screen) and screen.new_count == 0
