"""One copy for the whole app (:func:`tui.clipboard.copy`): the system clipboard when there is one, else OSC 52
written to the terminal, and one line that says which; what is copied holds no escape sequence."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from textual.drivers.headless_driver import HeadlessDriver

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.rendered import notification_texts
from tui import clipboard
from tui.app import SessionscopeApp

pytestmark = pytest.mark.anyio


def _no_system_clipboard(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyperclip

    def fail(_text: str) -> None:
        raise pyperclip.PyperclipException("no clipboard mechanism")

    monkeypatch.setattr(pyperclip, "copy", fail)


async def test_without_a_system_clipboard_the_copy_is_osc_52(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_system_clipboard(monkeypatch)
    written: list[str] = []
    original = HeadlessDriver.write

    def spy(self: HeadlessDriver, data: str) -> None:
        written.append(data)
        original(self, data)

    monkeypatch.setattr(HeadlessDriver, "write", spy)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        via = clipboard.copy(app.screen, "id-1\x1b]52;c;aGFja2Vk\x07", "the id")
        await pilot.pause()
        assert via == clipboard.TERMINAL
        safe_text = "id-1␛]52;c;aGFja2Vk␇"
        assert app.clipboard == safe_text
        payload = base64.b64encode(safe_text.encode()).decode()
        assert any(f"\x1b]52;c;{payload}\a" in chunk for chunk in written), written[-3:]
        assert any("Copied the id to the terminal clipboard (OSC 52)" in t for t in notification_texts(app))


async def test_with_a_system_clipboard_the_copy_goes_there(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyperclip

    got: list[str] = []
    monkeypatch.setattr(pyperclip, "copy", got.append)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert clipboard.copy(app.screen, "abc", "the id") == clipboard.SYSTEM
        await pilot.pause()
        assert got == ["abc"]
        assert any("Copied the id to the system clipboard: 3 characters." in t for t in notification_texts(app))


async def test_y_on_sessions_copies_the_session_id(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyperclip

    from tui.widgets.session_list import SessionList

    got: list[str] = []
    monkeypatch.setattr(pyperclip, "copy", got.append)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        row = app.screen.query_one(SessionList).selected
        assert row is not None
        await pilot.press("y")
        await pilot.pause()
        assert got == [row.id]


def test_the_resume_command_is_the_agents_own_and_quoted() -> None:
    from store.agents.native_catalog import resume_command

    assert resume_command("claude-code", "5e55a000-1", "/home/u/repo") == "cd /home/u/repo && claude --resume 5e55a000-1"
    assert resume_command("codex", "019c8a70", "") == "codex resume 019c8a70"
    hostile = resume_command("claude-code", "x; rm -rf ~", "/tmp/a b;$(reboot)")
    assert hostile == "cd '/tmp/a b;$(reboot)' && claude --resume 'x; rm -rf ~'"
    assert resume_command("other-agent", "x", "/w") == ""
