"""Any list to a file: E writes the screen's list as CSV, J as JSON, every row of its source, to the home
folder under a name of its own (never replacing a file); the path is said and copied."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.rendered import notification_texts
from tui.app import SessionscopeApp
from tui.list_export import all_rows
from tui.widgets.row_sources import ListSource
from tui.widgets.session_list import SessionList

pytestmark = pytest.mark.anyio


async def _wait_file(pilot: object, path: Path) -> None:
    for _ in range(100):
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        if path.exists():
            await pilot.pause(0.1)  # type: ignore[attr-defined]
            return
    raise AssertionError(f"{path} was not written")


async def test_e_and_j_write_every_session_row(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyperclip

    copied: list[str] = []
    monkeypatch.setattr(pyperclip, "copy", copied.append)
    home = Path.home()
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        shown = app.screen.query_one(SessionList)
        await pilot.press("E")
        target = home / "sessions-sessions.csv"
        await _wait_file(pilot, target)
        rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
        assert len(rows) == 46 and rows[0]["ID"] == shown.rows[0].id
        assert "TITLE" in rows[0] and "LAST ACTIVE UTC" in rows[0]
        await pilot.press("E")  # again: a new file, the first one is kept
        await _wait_file(pilot, home / "sessions-sessions-2.csv")
        await pilot.press("J")
        await _wait_file(pilot, home / "sessions-sessions.json")
        records = json.loads((home / "sessions-sessions.json").read_text(encoding="utf-8"))
        assert len(records) == 46 and records[0]["ID"] == shown.rows[0].id
        texts = notification_texts(app)
        assert any("Exported 46 rows to ~/sessions-sessions.csv; the path is on the system clipboard" in t
                   for t in texts), texts
        assert copied[0] == str(target)


async def test_a_screen_without_a_list_says_so() -> None:
    app = SessionscopeApp(None, OpenMode.READ_ONLY)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("E")
        await pilot.pause()
        assert any("shows no list to export" in t for t in notification_texts(app))


def test_all_rows_pages_through_a_source() -> None:
    source = ListSource(list(range(1234)), key=lambda r: r)
    assert list(all_rows(source)) == list(range(1234))
    assert list(all_rows(source, limit=10)) == list(range(10))
