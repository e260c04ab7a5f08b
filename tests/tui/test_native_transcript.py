"""The Transcript screen on native agent transcripts: every real fixture file captured into a session directory,
read back as a checkpoint and rendered, with the counts the fixture README states; branches switched with ``b``;
the sub-agent opened from its Task call; malformed copies (cut off, glued ``}{``) shown in place.

The fixture README (../shared/fixtures/README.md) is the source of every expected number here.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from textual.app import App
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import Static

from store.agents.capture import capture_claude_code, capture_codex
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from tui.screens.native_transcript import NativeRef, NativeTranscriptScreen
from tui.screens.sessions import SessionsScreen
from tui.widgets.export_dialog import ExportDialog
from tui.widgets.native_sources import CallResult, ForkMark, RecordView, SubAgentNote
from tui.widgets.transcript_blocks import render_item

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REWIND = "03eb5929-52b3-4b13-ada3-b93ae35806b8"
WITH_SUBAGENT = "29ccd257-68b1-427f-ae5f-6524b7cb6f20"
SUMMARIES = "326189cf-5676-4237-8cde-1ce80aae4a9f"
OLD_SUBAGENT_SESSION = "7acd37a8-2745-4b58-a8a9-46164b22ad9e"  # agent-8d27fe83.jsonl names it; no main file
INTERRUPTED = "019c8a70-dda7-7f33-98ea-f30553347322"  # the 13-19-38 rollout
ONE_TURN = "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"  # the 20-34-25 rollout
LONG_RUN = "019c8a4d-8f45-7010-8b5d-7fad920aa6f9"  # the 12-41-04 rollout
REWIND_FILE = "-experiments-ideas/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
DEADLINE_S = 20.0


def copy_fixtures(real: Path, target: Path) -> tuple[Path, Path]:
    """Writable copies of the real transcripts (the originals are read-only and never touched)."""
    cc, cx = target / "claude-code", target / "codex-sessions"
    shutil.copytree(real / "claude-code", cc)
    shutil.copytree(real / "codex" / "sessions", cx)
    for p in target.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return cc, cx


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session directory with every real transcript captured (from copies), shared by the reading tests."""
    from tests.conftest import SHARED_FIXTURES

    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures/real is not present")
    base = tmp_path_factory.mktemp("native")
    cc, cx = copy_fixtures(SHARED_FIXTURES, base / "sources")
    root = base / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        summary_cc = capture_claude_code(sd, cc)
        summary_cx = capture_codex(sd, cx)
    assert {r.agent_session_id for r in summary_cc.sessions if r.status == "new"} == {
        REWIND, WITH_SUBAGENT, SUMMARIES, OLD_SUBAGENT_SESSION}
    assert {r.agent_session_id for r in summary_cx.sessions if r.status == "new"} == {INTERRUPTED, ONE_TURN, LONG_RUN}
    return root


class NativeHost(App[None]):
    """A bare app that shows one native transcript screen (esc goes back, as in the real app)."""

    BINDINGS: ClassVar = [Binding("escape", "app.pop_screen", "Back", id="test.back", tooltip="Go back.")]

    def __init__(self, sd: SessionDir, ref: NativeRef) -> None:
        super().__init__()
        self.sd = sd
        self.ref = ref

    def on_mount(self) -> None:
        self.push_screen(NativeTranscriptScreen(self.sd, self.ref))


async def settle(pilot: Pilot[Any]) -> NativeTranscriptScreen:
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        if (isinstance(screen, NativeTranscriptScreen) and screen.loaded and not screen.active_view.fetching
                and not any(w.is_running for w in app.workers) and screen.active_view.items):
            return screen
        if isinstance(screen, NativeTranscriptScreen) and screen.error:
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"the native transcript did not settle: {screen!r}")
        await asyncio.sleep(0.02)


def visible(screen: NativeTranscriptScreen) -> str:
    view = screen.active_view
    return "\n".join(view.render_line(y).text for y in range(view.size.height))


def all_blocks_text(screen: NativeTranscriptScreen) -> str:
    """Every block of the shown branch drawn as the view draws it (not only the lines on screen)."""
    view = screen.block_view
    pal = view._get_palette()
    lines: list[str] = []
    for item in screen.blocks:
        lines.extend(t.plain for t in render_item(item, 110, pal, screen.app.console))
    return "\n".join(lines)


def calls(screen: NativeTranscriptScreen) -> list[CallResult]:
    return [c for b in screen.blocks if isinstance(b.payload, RecordView) for c in b.payload.calls]


def title(screen: NativeTranscriptScreen) -> str:
    return str(screen.query_one("#transcript-title", Static).content)


async def open_native(pilot: Pilot[Any]) -> NativeTranscriptScreen:
    screen = await settle(pilot)
    assert screen.error == "", screen.error
    return screen


# --- every fixture file ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("agent", "sid", "records", "pairs", "interrupted"), [
    ("claude-code", REWIND, 61, None, 0),
    ("claude-code", WITH_SUBAGENT, 6, 1, 0),
    ("claude-code", SUMMARIES, 54, None, 0),
    ("codex", INTERRUPTED, 19, 0, 1),
    ("codex", ONE_TURN, 63, 5, 0),
    ("codex", LONG_RUN, 417, 118, 0),
])
async def test_each_fixture_renders_with_its_counts(captured: Path, agent: str, sid: str, records: int,
                                                    pairs: int | None, interrupted: int) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef(agent, sid))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            t = screen.transcript
            assert t is not None and t.records == records, "one record per line of the file"
            assert f"{records:,} records" in title(screen)
            shown = calls(screen)
            if pairs is not None:
                assert sum(1 for c in shown if not c.interrupted) == pairs, "calls drawn with their result"
            assert sum(1 for c in shown if c.interrupted) == interrupted
            text = all_blocks_text(screen)
            assert text.count("⚠ interrupted: no result was recorded") == interrupted
            assert text.count("◂ result  line ") == sum(1 for c in shown if not c.interrupted)
            # every result record is drawn under its call, so no record shows twice and none is lost
            lines_drawn = {b.payload.item.line for b in screen.blocks if isinstance(b.payload, RecordView)}
            results_under_calls = {c.result_line for c in shown if c.result_line}
            assert lines_drawn | results_under_calls == {i.line for i in t.view(screen.selection)}
            await pilot.press("G")
            screen = await settle(pilot)
            assert screen.block_view.at_bottom, "G shows the end of the last block"
            last = screen.blocks[-1]
            assert render_item(last, screen.block_view._content_width, screen.block_view._get_palette(),
                               app.console)[-1].plain.rstrip() in visible(screen)


async def test_the_rewind_shows_one_branch_and_b_switches_to_the_other(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", REWIND))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            t = screen.transcript
            assert t is not None and len(t.forks) == 1 and len(t.forks[0].branches) == 2
            assert "⑂ 1 rewind (2 branches)" in title(screen)
            marks = [b for b in screen.blocks if isinstance(b.payload, ForkMark)]
            mark = marks[0].payload
            assert len(marks) == 1 and isinstance(mark, ForkMark) and mark.fork.parent_line == 16
            text = all_blocks_text(screen)
            assert "⑂ 2 branches — b to switch · showing 2 of 2" in text
            latest, earlier = "I actually don't like much this idea", "I very much like this idea"
            prompts = [b.payload.item.text for b in screen.blocks
                       if isinstance(b.payload, RecordView) and b.payload.item.kind == "user"]
            assert any(p.startswith(latest) for p in prompts) and not any(p.startswith(earlier) for p in prompts)
            assert text.count("I very much like this idea") == 1, "only in the fork marker's list of branches"

            await pilot.press("b")
            screen = await settle(pilot)
            assert screen.selection == {t.forks[0].parent_uuid: 0}
            view_now = visible(screen)
            assert "showing 1 of 2" in view_now, "the view is put on the fork marker"
            records = [b.payload.item for b in screen.blocks
                       if isinstance(b.payload, RecordView) and b.payload.item.kind == "user"]
            assert any(r.text.startswith(earlier) and r.line == 18 for r in records)
            assert not any(r.line == 38 for r in records), "the other branch's prompt is not shown"
            await pilot.press("down", "down")
            screen = await settle(pilot)
            assert earlier in visible(screen)

            await pilot.press("b")
            screen = await settle(pilot)
            assert screen.selection[t.forks[0].parent_uuid] == 1
            assert "showing 2 of 2" in visible(screen)


async def test_recording_artifacts_are_not_branches(captured: Path) -> None:
    """Parallel tool results, progress and hook lines share parents in every file: only the rewind is a fork."""
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        for sid in (WITH_SUBAGENT, SUMMARIES):
            app = NativeHost(sd, NativeRef("claude-code", sid))
            async with app.run_test(size=SIZE) as pilot:
                screen = await open_native(pilot)
                assert not [b for b in screen.blocks if isinstance(b.payload, ForkMark)]
                await pilot.press("b")
                await pilot.pause()
                assert any("no rewind" in str(n.message) for n in app._notifications)


async def test_the_sub_agent_shows_under_its_task_call_and_enter_opens_it(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", WITH_SUBAGENT))
        async with app.run_test(size=SIZE) as pilot:
            parent = await open_native(pilot)
            task = next(b for b in parent.blocks if isinstance(b.payload, RecordView) and b.payload.subagents)
            assert isinstance(task.payload, RecordView) and task.payload.item.line == 4
            call = task.payload.calls[0]
            assert call.name == "Task" and call.result_line == 5 and call.subagent_id == "a2271d1"
            assert "↳ sub-agent a2271d1: 59 records" in all_blocks_text(parent)
            assert not [b for b in parent.blocks if isinstance(b.payload, SubAgentNote)], "linked, not listed apart"

            await pilot.press("enter")  # the cursor is not on the Task call yet
            await pilot.pause()
            assert app.screen is parent
            while parent.block_view.cursor_item is None or parent.block_view.cursor_item.key != task.key:
                await pilot.press("down")
                await pilot.pause()
            assert "↳ sub-agent a2271d1" in visible(parent)
            await pilot.press("enter")
            sub = await open_native(pilot)
            assert sub is not parent and sub.link is not None and sub.link.agent_id == "a2271d1"
            assert sub.transcript is not None and sub.transcript.records == 59
            names = [c.name for c in calls(sub)]
            assert names.count("Bash") == 12 and names.count("Read") == 12
            assert all(not c.interrupted for c in calls(sub)), "each call has its result"
            assert "sub-agent a2271d1" in title(sub) and "spawned by Task at line 4" in title(sub)

            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is parent


async def test_an_old_layout_sub_agent_without_its_parent_is_shown_itself(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", OLD_SUBAGENT_SESSION))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            assert screen.link is not None and screen.link.agent_id == "8d27fe83"
            assert screen.transcript is not None and screen.transcript.records == 1
            assert "no Task call names it" in title(screen)


async def test_interrupted_call_incomplete_turn_and_encrypted_reasoning(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("codex", INTERRUPTED))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            await pilot.press("G")
            screen = await settle(pilot)
            text = visible(screen)
            lines = text.splitlines()
            call = next(i for i, line in enumerate(lines) if "→ exec_command" in line)
            assert "line 18" in lines[call - 1], "the call's block is the record of line 18"
            assert any("⚠ interrupted: no result was recorded" in line for line in lines[call:call + 4])
            assert "⚠ 1 interrupted" in title(screen) and "⚠ 1 turn never completed" in title(screen)
            whole = all_blocks_text(screen)
            assert "turn 019c8a70-ebe7-7e… started · ⚠ never completed (no task_complete)" in whole
            assert "encrypted reasoning (50 bytes)" in whole
            await pilot.press("g", "right_square_bracket")
            screen = await settle(pilot)
            cursor = screen.block_view.cursor_item
            assert "never completed" in visible(screen), "] jumps to the incomplete turn"
            assert cursor is not None and isinstance(cursor.payload, RecordView) and cursor.payload.item.line == 9, "the cursor lands on the turn's first record"


async def test_summaries_with_dangling_leaf_uuids_are_marked(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", SUMMARIES))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            assert screen.transcript is not None and [s.line for s in screen.transcript.summaries] == [1, 2, 3, 4]
            assert "◆ summary" in visible(screen).splitlines()[0], "the file starts with its summaries"
            whole = all_blocks_text(screen)
            assert whole.count("◆ summary") == 4
            assert whole.count("⚠ dangling leafUuid") == 4
            assert "Local Command Execution and Screen Clearing" in whole
            assert "4 summaries (4 dangling)" in title(screen)


async def test_raw_view_shows_numbered_lines(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", REWIND))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            await pilot.press("tab")
            screen = await settle(pilot)
            assert screen.raw_mode and screen.raw_view.display and not screen.block_view.display
            rows = [line[2:] for line in visible(screen).splitlines() if line.strip()]  # without the cursor gutter
            assert rows[0].split()[:2] == ["1", "file_snapshot"]
            assert [int(r.split()[0]) for r in rows[:10]] == list(range(1, 11))
            await pilot.press("G")
            screen = await settle(pilot)
            assert visible(screen).splitlines()[-1][2:].split()[0] == "61"
            await pilot.press("tab")
            screen = await settle(pilot)
            assert not screen.raw_mode


async def test_e_exports_the_shown_branch_as_markdown(captured: Path) -> None:
    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", REWIND))
        async with app.run_test(size=SIZE) as pilot:
            await open_native(pilot)
            await pilot.press("b")
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            assert isinstance(app.screen, ExportDialog)
            await pilot.press("enter")
            await settle(pilot)
            md = (Path.home() / f"{REWIND}.md").read_text(encoding="utf-8")
            assert "## user · line 18" in md and "I very much like this idea" in md
            assert "## user · line 38" not in md, "only the shown branch"
            assert "branches 1 of 2 at line 16" in md
            assert "**Tool call** `Bash`" in md and "Result (line 9):" in md

            await pilot.press("e")
            await pilot.pause()
            await pilot.click("#export-json")
            await pilot.pause()
            await pilot.press("enter")
            await settle(pilot)
            doc = json.loads((Path.home() / f"{REWIND}.json").read_text(encoding="utf-8"))
            assert [r["line"] for r in doc["records"]][:3] == [1, 2, 3] and len(doc["records"]) == 61 - 25


# --- malformed copies -----------------------------------------------------------------------------------------


def _lines(real: Path) -> list[bytes]:
    return (real / "claude-code" / REWIND_FILE).read_bytes().split(b"\n")[:-1]


async def _open_file(path: Path, tmp: Path) -> tuple[NativeHost, object]:
    root = tmp / "empty-sessions"
    root.mkdir(exist_ok=True)
    sd = open_session_dir(root, OpenMode.READ_WRITE, create=True)
    return NativeHost(sd, NativeRef("claude-code", path=str(path))), sd


async def test_a_cut_off_copy_shows_unreadable_lines_in_place(real_fixtures: Path, tmp_path: Path) -> None:
    lines = _lines(real_fixtures)
    assert len(lines) == 61
    cut = list(lines)
    cut[46] = cut[46][: len(cut[46]) // 2]  # line 47 cut in the middle (its newline kept; its uuid is lost)
    body = b"\n".join(cut[:60]) + b"\n" + cut[60][:40]  # and the last line cut off without its newline
    path = tmp_path / "project" / f"{REWIND}.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    app, sd = await _open_file(path, tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            t = screen.transcript
            assert t is not None and t.records == 61, "cut lines are still records"
            assert [u.line for u in t.unreadable] == [47, 61]
            text = all_blocks_text(screen)
            assert "✗ unreadable line 47" in text and "✗ unreadable line 61" in text
            assert "the line is cut off" in text and "not valid JSON" in text
            assert "✗ 2 unreadable" in title(screen)
            shown = {b.payload.item.line for b in screen.blocks if isinstance(b.payload, RecordView)}
            assert {48, 50, 52, 55, 60}.issubset(shown), "records after an unreadable line are kept"
            child = next(b.payload for b in screen.blocks
                         if isinstance(b.payload, RecordView) and b.payload.item.line == 48)
            assert child.item.parent_state == "missing" and child.maybe_parent_line == 47
            assert "╌╌ its parent is in no readable record: the unreadable line 47 may hold it" in text
            await pilot.press("g", "right_square_bracket")
            screen = await settle(pilot)
            assert "⑂ 2 branches" in visible(screen).splitlines()[0], "] stops at the fork first"
            await pilot.press("right_square_bracket")
            screen = await settle(pilot)
            assert "✗ unreadable line 47" in visible(screen).splitlines()[0], "then at the unreadable line"
            await pilot.press("right_square_bracket")
            screen = await settle(pilot)
            cursor = screen.block_view.cursor_item
            assert cursor is not None and isinstance(cursor.payload, RecordView) and cursor.payload.item.line == 48, "then at its child's marker"
    finally:
        sd.close()  # type: ignore[attr-defined]


async def test_a_glued_copy_keeps_the_records_after_it(real_fixtures: Path, tmp_path: Path) -> None:
    lines = _lines(real_fixtures)
    glued = lines[:19] + [lines[19] + lines[20]] + lines[21:]  # lines 20 and 21 glued: "}{"
    path = tmp_path / "project" / f"{REWIND}.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(glued) + b"\n")
    app, sd = await _open_file(path, tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_native(pilot)
            t = screen.transcript
            assert t is not None and t.records == 60 and [u.line for u in t.unreadable] == [20]
            await pilot.press("b")  # the glued line is in the first branch
            screen = await settle(pilot)
            text = all_blocks_text(screen)
            assert "✗ unreadable line 20" in text and "glued together" in text
            shown = {b.payload.item.line for b in screen.blocks if isinstance(b.payload, RecordView)}
            assert {21, 24, 31, 32}.issubset(shown), "records after the glued line still show"
            assert "╌╌ under the unreadable line 20 (its parent)" in text
            await pilot.press("tab")
            screen = await settle(pilot)
            raw = visible(screen)
            assert "✗ two or more records are glued together" in raw
    finally:
        sd.close()  # type: ignore[attr-defined]


def test_every_native_binding_is_registered_with_a_tooltip() -> None:
    from tui import actions
    from tui.widgets.transcript_view import NativeBlocksView, NativeRawView

    for owner in (NativeTranscriptScreen, NativeBlocksView, NativeRawView):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding)
            spec = actions.find(binding.id)
            assert spec is not None and spec.tooltip, f"{owner.__name__}: {binding.key}"
    view_keys = {k for b in NativeBlocksView.BINDINGS if isinstance(b, Binding) for k in b.key.split(",")}
    assert "b" not in view_keys, "b reaches the screen (switch branch), not page up"
    assert actions.get("native-transcript.branch").key == "b"
    assert actions.get("native-transcript.follow").key == "F" and actions.get("transcript.follow").key == "F"


# --- the Sessions screen's source switch -------------------------------------------------------------------------


async def settle_sessions(pilot: Pilot[Any]) -> None:
    from tests.tui.appwait import settle as settle_app
    from tui.widgets.native_session_list import AgentSessionList

    await settle_app(pilot)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        screen = pilot.app.screen
        ready = isinstance(screen, SessionsScreen) and screen.agent_counts is not None
        if ready and isinstance(screen, SessionsScreen) and screen.source != "mothx":
            found = screen.query(AgentSessionList)
            ready = bool(found) and found.first().loaded
        if ready and not any(w.is_running for w in pilot.app.workers):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the Sessions screen did not settle: {screen!r}")
        await asyncio.sleep(0.02)


def status_line(app: App[Any]) -> str:
    from tui.widgets.statusbar import StatusBar

    bar = app.screen.query_one(StatusBar)
    return f"{bar.count}  {bar.query_text}"


async def test_sessions_screen_lists_captured_sessions_and_a_switches_source(captured: Path) -> None:
    from tui.app import SessionscopeApp
    from tui.widgets.native_session_list import AgentSessionList

    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert screen.source == "claude-code", "no mothx session here: it opens on the captured ones"
        agent_list = screen.query_one(AgentSessionList)
        rows = agent_list.rows
        assert [r.agent_session_id for r in rows] == [REWIND, WITH_SUBAGENT, OLD_SUBAGENT_SESSION, SUMMARIES], \
            "newest last record first"
        first = rows[0]
        assert first.title.startswith("Ok, so there's isn't much to see here") and first.records == 61
        assert first.cwd == "/home/user/project" and first.last_record_at == "2026-02-17T00:13:55.281Z"
        assert rows[1].records == 59 + 6 and rows[1].files == 2, "the sub-agent file is part of the session"
        assert "4 Claude Code sessions" in status_line(app) and "source: Claude Code" in status_line(app)

        await pilot.press("a")
        await settle_sessions(pilot)
        assert screen.source == "codex" and len(agent_list.rows) == 3
        assert "3 Codex sessions" in status_line(app)
        await pilot.press("a")
        await settle_sessions(pilot)
        assert screen.source == "mothx" and status_line(app).startswith("0 sessions")
        assert "source: mothx sessions" in status_line(app)
        await pilot.press("a")
        await settle_sessions(pilot)
        assert screen.source == "claude-code"

        await pilot.press("slash", *"please", "enter")
        await settle_sessions(pilot)
        assert [r.agent_session_id for r in agent_list.rows] == [SUMMARIES]
        assert "1 of 4 (filtered)" in status_line(app)
        await pilot.press("escape")
        await settle_sessions(pilot)
        assert len(agent_list.rows) == 4

        await pilot.press("enter")
        native = await open_native(pilot)
        assert native.ref == NativeRef("claude-code", REWIND)
        await pilot.press("escape")
        await settle_sessions(pilot)
        assert screen.source == "claude-code" and app.screen is screen


async def test_the_mothx_list_is_unchanged_without_captures(demo_dir: Path,
                                                                            real_fixtures: Path) -> None:
    from tui.app import SessionscopeApp
    from tui.widgets.keybar import KeyBar

    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert screen.source == "mothx" and screen.agent_counts == {}
        # the source key stays on the bar (a capture made later shows up when it is pressed)
        assert screen.check_action("cycle_source", ()) is True
        assert "source:" not in status_line(app)

    with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd:
        capture_codex(sd, copy_fixtures(real_fixtures, demo_dir.parent / "sources")[1])
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert screen.source == "mothx", "mothx sessions exist: the list opens on them as before"
        assert screen.agent_counts == {"codex": 3} and screen.check_action("cycle_source", ()) is True
        assert "a Source" in app.screen.query_one(KeyBar).render().plain
        assert "source: mothx sessions (a: next)" in status_line(app)
        await pilot.press("a")
        await settle_sessions(pilot)
        assert screen.source == "codex"
        assert screen.check_action("cycle_sort", ()) is None, "sorting is for mothx sessions: dimmed here"
        await pilot.press("a")
        await settle_sessions(pilot)
        assert screen.source == "mothx"


# --- compaction markers (no real fixture has one: records written the way the agents write them) ---------------


async def test_compactions_show_as_markers_with_token_counts(tmp_path: Path) -> None:
    sid = "5e55c0de-0000-4000-8000-00000000c0de"
    base = {"sessionId": sid, "cwd": "/work", "version": "2.1.42", "isSidechain": False, "userType": "external"}
    claude = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-03-01T10:00:00Z",
         "message": {"role": "user", "content": "first prompt"}},
        {**base, "type": "system", "subtype": "compact_boundary", "uuid": "c1", "parentUuid": None,
         "logicalParentUuid": "u1", "timestamp": "2026-03-01T10:05:00Z", "content": "Conversation compacted",
         "compactMetadata": {"trigger": "auto", "preTokens": 155123}},
        {**base, "type": "user", "uuid": "s1", "parentUuid": "c1", "isCompactSummary": True,
         "timestamp": "2026-03-01T10:05:01Z",
         "message": {"role": "user", "content": "This session is being continued. Summary: the work so far."}},
    ]
    codex = [
        {"timestamp": "2026-03-01T10:00:00Z", "type": "session_meta", "payload": {"id": "c0dex", "cwd": "/work",
                                                                                  "cli_version": "0.104.0"}},
        {"timestamp": "2026-03-01T10:05:00Z", "type": "compacted", "payload": {
            "message": "the history so far, compacted",
            "replacement_history": [{"type": "message", "role": "user",
                                     "content": [{"type": "input_text", "text": "kept prompt"}]}]}},
    ]
    root = tmp_path / "sessions"
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        for name, records, agent in (("claude.jsonl", claude, "claude-code"), ("rollout.jsonl", codex, "codex")):
            path = tmp_path / name
            path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
            app = NativeHost(sd, NativeRef(agent, path=str(path)))
            async with app.run_test(size=SIZE) as pilot:
                screen = await open_native(pilot)
                text = all_blocks_text(screen)
                if agent == "claude-code":
                    assert "━━ compaction · auto · 155,123 tokens before" in text
                    assert "◆ compact summary" in text and "Summary: the work so far." in text
                    assert "1 compaction" in title(screen)  # a boundary and its summary are one compaction
                else:
                    assert "━━ compacted · 1 replacement item" in text and "the history so far, compacted" in text
                    assert "user: kept prompt" in text
                await pilot.press("g", "right_square_bracket")
                screen = await settle(pilot)
                assert "━━ compact" in visible(screen), "] visits the compaction"
