"""The Transcript screens on hostile data, with and without ``NO_COLOR``.

A mothx session and a Claude Code transcript hold terminal escapes (OSC 52, OSC 0, OSC 8, CSI 2J, C1 CSI,
BEL), bidi overrides, a lone surrogate and Rich/Textual markup in every field the screens draw: message text,
thinking, tool names, arguments and results, the title, the work dir, ids, timestamps, branch prompts. Every
key of the screens is pressed; after each, the rendered segments of the whole screen (notifications included)
must hold no raw control, bidi or surrogate character, the markup must show as typed, and nothing may crash
or run an action (``[@click=app.quit]`` is clicked on and the app keeps running).
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import sys
import time
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest
from textual.app import App
from textual.binding import Binding
from textual.pilot import Pilot

from store.agents.capture import capture_claude_code
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.tui.transcript_support import TranscriptHost, settle
from tui.screens.native_transcript import NativeRef, NativeTranscriptScreen
from tui.screens.transcript import TranscriptScreen
from tui.screens.transcript_facts import title_text
from tui.widgets.export_dialog import ExportDialog
from tui.widgets.native_sources import ForkMark, RecordView
from tui.widgets.transcript_blocks import render_item

pytestmark = pytest.mark.anyio

SIZE = (160, 50)
HOSTILE_PARTS = [
    "\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\", "\x1b[2J",
    "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d", "pid-4242-[/]", "[bold]x[/bold]",
    "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo",
]
HOSTILE = " ".join(HOSTILE_PARTS)
NO_SURROGATE = HOSTILE.replace("\ud83d", "")  # for SQL columns (SQLite text must encode as UTF-8)
LITERALS = ["[/]", "[bold]x[/bold]", "[link=file:///etc/passwd]", "[@click=app.quit]", "/home/u/[archive]/repo"]
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
SID = "5e55a0de5e55a0de"
CC_SID = "0badc0de-0000-4000-8000-00000000b0de"


# --- helpers ------------------------------------------------------------------------------------------------


def screen_segments(app: App[Any]) -> list[str]:
    """The text of every segment the screen renders now (the whole screen, toasts included), one str a row."""
    from textual._compositor import LayoutUpdate

    update = app.screen._compositor.render_update(full=True)
    assert isinstance(update, LayoutUpdate)
    return ["".join(seg.text for strip in line for seg in strip if not seg.control) for line in update.strips]


def assert_clean(app: App[Any], where: str) -> str:
    rows = screen_segments(app)
    text = "\n".join(rows)
    bad = UNSAFE.search(text)
    assert bad is None, f"{where}: raw {bad.group(0)!r} on screen near {text[max(0, bad.start() - 40):bad.end() + 40]!r}"
    assert text.strip(), f"{where}: the screen is empty"
    assert app.is_running, f"{where}: the app stopped"
    return text


def assert_literals(text: str, where: str, literals: list[str] = LITERALS) -> None:
    flat = text.replace("\n", "")
    for lit in literals:
        assert lit in flat, f"{where}: {lit!r} is not shown as typed"


@pytest.fixture
def clipboard(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``pyperclip.copy`` stubbed: what ``y`` copies lands here."""
    copied: list[str] = []
    fake = types.ModuleType("pyperclip")
    fake.copy = copied.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyperclip", fake)
    return copied


def build_mothx_session(root: Path) -> None:
    """A session whose every drawn field is hostile (written with plain SQL in the reference format)."""
    with open_session_dir(root, OpenMode.READ_WRITE, create=True):
        pass
    conn = sqlite3.connect(root / "sessions.db")
    n = 0

    def add(type_: str, eid: str, stamp: str = "", **fields: object) -> None:
        nonlocal n
        n += 1
        stamp = stamp or f"2026-11-20T10:00:{n:02d}Z"
        body = {"type": type_, "id": eid, "parentId": None, "timestamp": stamp, **fields}
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, NULL, ?, ?)",
                     (SID, eid, type_, stamp, json.dumps(body)))  # ensure_ascii: the surrogate is an escape

    with conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, ?, '2026-11-20T10:00:00Z')",
                     (SID, "/home/u/[archive]/repo " + NO_SURROGATE))
        add("session_info", "info0001", name=HOSTILE, source="manual")
        add("turn_start", "turn0001", turnId=HOSTILE)
        add("message", "user0001", message={"role": "user", "content": HOSTILE, "timestamp": HOSTILE})
        add("message", "asst0001", message={"role": "assistant", "contents": [
            {"type": "thinking", "thinking": HOSTILE},
            {"type": "text", "text": HOSTILE},
            {"type": "toolCall", "toolCall": {"id": HOSTILE, "name": HOSTILE, "kind": HOSTILE,
                                              "arguments": json.dumps({"cmd": HOSTILE, HOSTILE: [HOSTILE]})}},
            {"type": HOSTILE, "text": HOSTILE},
        ]})
        add("message", "tres0001", message={"role": "toolResult", "toolName": HOSTILE, "toolCallId": HOSTILE,
                                            "content": HOSTILE, "isError": True})
        add("content_override", "ovr00001", targetEntryId="user0001", reason=HOSTILE,
            message={"role": "user", "content": "replaced: " + HOSTILE})
        add("compaction", "cmp00001", summary=HOSTILE, firstKeptEntryId="asst0001", tokensBefore=1234)
        add("message", "user0002", message={"role": "user", "content": "after " + HOSTILE})
        add("turn_end", "turn0002", turnId=HOSTILE, status="ok")
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, ?, ?, ?)",
                     (SID, "bad" + NO_SURROGATE[:20], NO_SURROGATE[:30], NO_SURROGATE, NO_SURROGATE,
                      "{not json " + NO_SURROGATE))
    conn.close()


def write_claude_code(base: Path) -> Path:
    """A Claude Code project folder: hostile prompts (two under one parent: a rewind), tool names, arguments,
    results, cwd and a sub-agent run by a Task call."""
    project = base / "claude-code" / "-home-u-repo"
    (project / CC_SID / "subagents").mkdir(parents=True)
    # the cwd without the lone surrogate: capture stores it in a SQL column (a store limit, reported apart)
    env = {"sessionId": CC_SID, "cwd": NO_SURROGATE, "version": "2.1.42", "isSidechain": False, "userType": "external"}
    task_prompt = "explore " + HOSTILE
    records = [
        {**env, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-03-01T10:00:00Z",
         "message": {"role": "user", "content": HOSTILE}},
        {**env, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-03-01T10:00:05Z",
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": HOSTILE},
             {"type": "text", "text": HOSTILE},
             {"type": "tool_use", "id": "toolu_task", "name": "Task",
              "input": {"description": HOSTILE, "prompt": task_prompt, "subagent_type": HOSTILE}},
             {"type": "tool_use", "id": "toolu_evil", "name": HOSTILE, "input": {"cmd": HOSTILE}},
         ]}},
        {**env, "type": "user", "uuid": "r1", "parentUuid": "a1", "timestamp": "2026-03-01T10:00:09Z",
         "toolUseResult": {"status": "completed", "agentId": "a1b2c3d", "prompt": task_prompt},
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_task", "content": HOSTILE}]}},
        {**env, "type": "user", "uuid": "r2", "parentUuid": "r1", "timestamp": "2026-03-01T10:00:10Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_evil", "content": HOSTILE, "is_error": True}]}},
        {**env, "type": "user", "uuid": "p1", "parentUuid": "r2", "timestamp": "2026-03-01T10:01:00Z",
         "message": {"role": "user", "content": "first branch " + HOSTILE}},
        {**env, "type": "assistant", "uuid": "a2", "parentUuid": "p1", "timestamp": "2026-03-01T10:01:05Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "one " + HOSTILE}]}},
        {**env, "type": "user", "uuid": "p2", "parentUuid": "r2", "timestamp": HOSTILE,
         "message": {"role": "user", "content": "second branch " + HOSTILE}},
        {**env, "type": "assistant", "uuid": "a3", "parentUuid": "p2", "timestamp": "2026-03-01T10:02:05Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "two " + HOSTILE}]}},
    ]
    sub = [
        {**env, "isSidechain": True, "agentId": "a1b2c3d", "type": "user", "uuid": "s1", "parentUuid": None,
         "timestamp": "2026-03-01T10:00:06Z", "message": {"role": "user", "content": task_prompt}},
        {**env, "isSidechain": True, "agentId": "a1b2c3d", "type": "assistant", "uuid": "s2", "parentUuid": "s1",
         "timestamp": "2026-03-01T10:00:07Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "sub " + HOSTILE}]}},
    ]
    (project / f"{CC_SID}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (project / CC_SID / "subagents" / "agent-a1b2c3d.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in sub), encoding="utf-8")
    return base / "claude-code"


class NativeHost(App[None]):
    BINDINGS: ClassVar = [Binding("escape", "app.pop_screen", "Back", id="test.back", tooltip="Go back.")]

    def __init__(self, sd: SessionDir, ref: NativeRef) -> None:
        super().__init__()
        self.sd = sd
        self.ref = ref

    def on_mount(self) -> None:
        self.push_screen(NativeTranscriptScreen(self.sd, self.ref))


async def settle_native(pilot: Pilot[None]) -> NativeTranscriptScreen:
    app = pilot.app
    deadline = time.monotonic() + 20
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        if isinstance(screen, NativeTranscriptScreen) and (screen.error or (
                screen.loaded and not screen.active_view.fetching and not any(w.is_running for w in app.workers)
                and screen.active_view.items)):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"the native transcript did not settle: {screen!r}")
        await asyncio.sleep(0.02)


async def click_text(pilot: Pilot[None], needle: str) -> bool:
    """Click on the first place the screen shows ``needle``; False when it is not on screen."""
    for y, row in enumerate(screen_segments(pilot.app)):
        x = row.find(needle)
        if x >= 0:
            await pilot.click(offset=(x + 2, y))
            await pilot.pause()
            return True
    return False


@pytest.fixture(params=[False, True], ids=["colour", "NO_COLOR"])
def no_color(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test runs with colour and with ``NO_COLOR`` set (before the app is created)."""
    if request.param:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    return bool(request.param)


# --- the mothx transcript -------------------------------------------------------------------------------------


async def test_mothx_transcript_on_hostile_data(tmp_path: Path, no_color: bool, clipboard: list[str]) -> None:
    root = tmp_path / "sessions"
    build_mothx_session(root)
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, SID)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            assert screen.error == "", screen.error
            text = assert_clean(app, "opened")
            assert_literals(text, "opened")
            assert screen.facts is not None
            title = title_text(screen.facts).plain
            assert "/home/u/[archive]/repo" in title and "[@click=app.quit]x[/]" in title
            assert UNSAFE.search(title) is None
            # every block drawn, not only the ones on screen
            view = screen.transcript_view
            pal = view._get_palette()
            blocks = "\n".join(t.plain for it in view.items for t in render_item(it, 150, pal, app.console))
            assert UNSAFE.search(blocks) is None
            assert "␛]52;c;aGFja2Vk␇" in blocks and "\\x9b31m" in blocks and "\\u202etxt.exe" in blocks
            assert "\\ud83d" in blocks
            assert await click_text(pilot, "[@click=app.quit]"), "the click text is on screen"
            assert app.is_running, "clicking on [@click=app.quit] ran no action"

            for key in ("n", "p", "right_square_bracket", "left_square_bracket", "G", "g", "down", "down",
                        "tab", "G", "g", "down", "tab"):
                await pilot.press(key)
                await settle(pilot)
                assert_clean(app, f"after {key}")
            await pilot.press("tab")
            await settle(pilot)
            raw = assert_clean(app, "raw view")
            assert "{not json" in raw and "✗ parse error" in raw
            await pilot.press("tab")
            await settle(pilot)

            await pilot.press("down")
            await settle(pilot)
            await pilot.press("y")
            await settle(pilot)
            assert clipboard, "y copied something"
            assert all(UNSAFE.search(c) is None for c in clipboard), "what is pasted holds no escape"
            assert_clean(app, "after y")

            await pilot.press("e")
            await pilot.pause()
            assert isinstance(app.screen, ExportDialog)
            assert_clean(app, "export dialog")
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, TranscriptScreen)
            assert_clean(app, "export cancelled")
            assert app.is_running


# --- the Claude Code transcript -------------------------------------------------------------------------------


async def test_native_transcript_on_hostile_data(tmp_path: Path, no_color: bool, clipboard: list[str]) -> None:
    cc = write_claude_code(tmp_path / "sources")
    root = tmp_path / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        capture_claude_code(sd, cc)
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = NativeHost(sd, NativeRef("claude-code", CC_SID))
        async with app.run_test(size=SIZE) as pilot:
            screen = await settle_native(pilot)
            assert screen.error == "", screen.error
            forks = [b for b in screen.blocks if isinstance(b.payload, ForkMark)]
            assert forks, "two prompts under one parent are a rewind"
            text = assert_clean(app, "opened")
            assert_literals(text, "opened", ["[/]", "[bold]x[/bold]", "[@click=app.quit]"])
            pal = screen.block_view._get_palette()
            blocks = "\n".join(t.plain for it in screen.blocks for t in render_item(it, 150, pal, app.console))
            assert UNSAFE.search(blocks) is None
            assert "␛]0;pwned␇" in blocks and "[link=file:///etc/passwd]x[/link]" in blocks

            await pilot.press("b")
            screen = await settle_native(pilot)
            said = [str(n.message) for n in app._notifications if str(n.message).startswith("Branch ")]
            assert said and "[/]" in said[-1] and UNSAFE.search(said[-1]) is None, said
            assert_clean(app, "after b")
            for key in ("b", "G", "g", "right_square_bracket", "left_square_bracket", "down", "b",
                        "tab", "G", "g", "down", "tab"):
                await pilot.press(key)
                screen = await settle_native(pilot)
                assert_clean(app, f"after {key}")

            # enter on the Task call opens the sub-agent
            task = next(b for b in screen.blocks if isinstance(b.payload, RecordView) and b.payload.subagents)
            while screen.block_view.cursor_item is None or screen.block_view.cursor_item.key > task.key:
                await pilot.press("up")
                await pilot.pause()
            while screen.block_view.cursor_item.key != task.key:
                await pilot.press("down")
                await pilot.pause()
            parent = screen
            await pilot.press("enter")
            sub = await settle_native(pilot)
            assert sub is not parent and sub.link is not None, "the sub-agent is shown"
            assert_clean(app, "sub-agent")
            await pilot.press("tab")
            await settle_native(pilot)
            assert_clean(app, "sub-agent raw")
            await pilot.press("escape")
            screen = await settle_native(pilot)
            assert screen is parent

            await pilot.press("y")
            await settle_native(pilot)
            assert clipboard and all(UNSAFE.search(c) is None for c in clipboard)
            assert_clean(app, "after y")
            await pilot.press("e")
            await pilot.pause()
            assert isinstance(app.screen, ExportDialog)
            assert_clean(app, "export dialog")
            await pilot.press("escape")
            await pilot.pause()
            assert_clean(app, "export cancelled")
            await click_text(pilot, "[@click=app.quit]")  # where the title shows, a click on it must not quit
            assert app.is_running
