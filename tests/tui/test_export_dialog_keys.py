"""The export dialog's keys (issue 9, item 7): tab goes format → path → Export → Cancel, enter on the format
picks it (and never closes the dialog), Cancel says so; the Markdown export counts the messages the screen and
the JSON count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Button, Input, RadioSet

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.entry_export import export_json, export_markdown
from store.mothx.sessiondir import open_session_dir
from tests.tui.transcript_support import TranscriptHost, find_demo_sessions, settle
from tui.widgets.export_dialog import ExportDialog

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


def focused_id(app: object) -> str | None:
    node = app.focused  # type: ignore[attr-defined]
    return None if node is None else node.id


async def open_dialog(pilot: object) -> ExportDialog:
    await pilot.press("e")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    dialog = pilot.app.screen  # type: ignore[attr-defined]
    assert isinstance(dialog, ExportDialog)
    return dialog


async def test_tab_goes_path_redact_export_cancel_format(demo_master: Path) -> None:
    sid = find_demo_sessions(demo_master).tool_error
    with open_session_dir(demo_master, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            dialog = await open_dialog(pilot)
            assert focused_id(app) == "export-path"
            seen = []
            for _ in range(5):
                await pilot.press("tab")
                await pilot.pause()
                seen.append(focused_id(app))
            assert seen == ["export-redact", "export-ok", "export-cancel", "export-format", "export-path"]
            assert isinstance(dialog.query_one("#export-ok"), Button)


async def test_enter_on_the_format_picks_it_and_keeps_the_dialog(demo_master: Path) -> None:
    sid = find_demo_sessions(demo_master).tool_error
    with open_session_dir(demo_master, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            dialog = await open_dialog(pilot)
            dialog.query_one("#export-format", RadioSet).focus()
            await pilot.pause()
            await pilot.press("right", "enter")
            await pilot.pause()
            assert app.screen is dialog, "enter on the format picks it; the dialog stays"
            assert dialog.format == "json" and dialog.query_one("#export-path", Input).value.endswith(".json")
            assert focused_id(app) == "export-path"
            await pilot.press("tab")
            await pilot.pause()
            assert focused_id(app) == "export-redact"
            await pilot.press("tab")
            await pilot.pause()
            assert focused_id(app) == "export-ok", "tab after the pick lands on Export, not Cancel"
            await pilot.press("tab")
            await pilot.pause()
            assert focused_id(app) == "export-cancel"
            before = len(app._notifications)
            await pilot.press("enter")
            await settle(pilot)
            assert app.screen is not dialog
            said = [str(n.message) for n in list(app._notifications)[before:]]
            assert said == ["Export cancelled: no file was written."], "closing is never silent"


def test_markdown_counts_the_messages_the_screen_and_json_count(demo_master: Path) -> None:
    sid = find_demo_sessions(demo_master).long
    with open_session_dir(demo_master, OpenMode.READ_ONLY) as sd:
        plan = entries.replay_plan(sd, sid)
        shown = plan.message_rows + (1 if plan.summary is not None else 0)  # the screen's header
        in_json = len(json.loads(export_json(sd, sid))["messages"])
        markdown = export_markdown(sd, sid)
    assert plan.summary is not None, "the long session replays a compaction summary"
    assert shown == in_json
    assert f"{shown:,} messages" in markdown.splitlines()[2]


async def test_an_html_export_with_redaction_from_the_dialog(demo_master: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import pyperclip
    from textual.widgets import Checkbox

    copied: list[str] = []
    monkeypatch.setattr(pyperclip, "copy", copied.append)
    sid = find_demo_sessions(demo_master).tool_error
    target = tmp_path / "out.html"
    with open_session_dir(demo_master, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            dialog = await open_dialog(pilot)
            dialog.query_one("#export-format", RadioSet).focus()
            await pilot.pause()
            await pilot.press("right", "right", "enter")
            await pilot.pause()
            assert dialog.format == "html"
            dialog.query_one("#export-redact", Checkbox).value = True
            dialog.query_one("#export-path", Input).value = str(target)
            await pilot.pause()
            dialog.query_one("#export-path", Input).focus()
            await pilot.press("enter")
            for _ in range(60):
                await pilot.pause(0.05)
                if target.exists():
                    break
            await settle(pilot)
            page = target.read_text(encoding="utf-8")
            assert page.startswith("<!DOCTYPE html>") and "<script" not in page
            said = " ".join(str(n.message) for n in list(app._notifications))
            assert "redacted" in said and "the path is on the system clipboard" in said, said
            assert copied == [str(target)]
