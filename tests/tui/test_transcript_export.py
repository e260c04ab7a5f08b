"""The export dialog writes only where the user said.

* the default path is ``~/<store.exports.default_name(id)>``: an id like ``../../../../etc/x`` (a mothx session
  id or a Claude Code ``sessionId``) becomes ``~/etc-x.md``, inside the home folder;
* a symbolic link at the target is refused in one line naming where it points, live (its target is untouched)
  or dangling (nothing is created), in the dialog and again when the file is written;
* a lone surrogate in a message never makes an empty file or a silent failure;
* a failing exporter says why (an ``ExportFinished`` with the error, a notification).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from textual.widgets import Input

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.transcript_support import TranscriptHost, settle
from tui.widgets.export_dialog import (
    ExportDialog,
    check_export_path,
    default_export_path,
    safe_json,
    safe_markdown,
    write_export,
)

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
TRAVERSAL = "../../../../etc/x"
SURROGATE_SID = "5e55d83d5e55d83d"


def make_session(root: Path, session_id: str, text: str) -> None:
    """A session with one user message (JSON written with ``ensure_ascii``, so a lone surrogate is stored as an
    escape and read back as the raw character, as a runtime's JSON would be)."""
    with open_session_dir(root, OpenMode.READ_WRITE, create=True):
        pass
    conn = sqlite3.connect(root / "sessions.db")
    with conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, '/w', '2026-11-20T10:00:00Z')", (session_id,))
        body = {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-11-20T10:00:01Z",
                "message": {"role": "user", "content": text}}
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
                     "VALUES (?, 'm1', 'message', NULL, '2026-11-20T10:00:01Z', ?)", (session_id, json.dumps(body)))
    conn.close()


# --- the pieces -------------------------------------------------------------------------------------------------


def test_the_default_path_stays_in_the_home_folder() -> None:
    assert default_export_path(TRAVERSAL) == "~/etc-x.md"
    assert default_export_path(TRAVERSAL, "json") == "~/etc-x.json"
    assert default_export_path("\x1b]0;pwned\x07/../..") == "~/0-pwned.md"
    path, problem = check_export_path(default_export_path(TRAVERSAL), None)
    assert problem == "" and path is not None and path.parent == Path.home()


def test_odd_typed_paths_are_refused_in_one_line(tmp_path: Path) -> None:
    for typed in ("", "   ", str(tmp_path / "a\x00b.md"), "~no-such-user-here/x.md", str(tmp_path),
                  str(tmp_path / "missing" / "x.md")):
        path, problem = check_export_path(typed, None)
        assert path is None and problem and "\n" not in problem and "\x00" not in problem, typed


def test_a_live_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me", encoding="utf-8")
    link = tmp_path / "export.md"
    link.symlink_to(target)
    path, problem = check_export_path(str(link), tmp_path / "sessions")
    assert path is None and "symbolic link" in problem and str(target) in problem and "\n" not in problem
    done = write_export(link, tmp_path / "sessions", lambda: "# exported\n", replace=True)
    assert done.error and "symbolic link" in done.error
    assert target.read_text(encoding="utf-8") == "keep me" and link.is_symlink()


def test_a_dangling_link_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "created.md"
    (tmp_path / "nowhere").mkdir()
    link = tmp_path / "export.md"
    link.symlink_to(target)
    path, problem = check_export_path(str(link), None)
    assert path is None and "symbolic link" in problem and str(target) in problem
    for replace in (False, True):
        done = write_export(link, tmp_path / "sessions", lambda: "# exported\n", replace=replace)
        assert done.error and "symbolic link" in done.error
    assert not target.exists() and not os.path.lexists(target)


def test_a_failing_exporter_says_why(tmp_path: Path) -> None:
    def broken() -> str:
        raise ValueError("no luck")

    done = write_export(tmp_path / "out.md", tmp_path / "sessions", broken)
    assert done.error and "no luck" in done.error and done.chars == 0
    assert not (tmp_path / "out.md").exists(), "nothing half-written"


def test_exported_text_is_made_safe_but_keeps_its_data() -> None:
    md = safe_markdown("a\x1b]52;c;aGFja2Vk\x07\tb\n\u202e\ud83d")
    assert md == "a␛]52;c;aGFja2Vk␇\tb\n\\u202e\\ud83d"
    assert safe_json('{"a": 1}\n') == '{\n  "a": 1\n}\n' and safe_json('{"a": 1}') == '{\n  "a": 1\n}'
    text = safe_json(json.dumps({"k": "\x1b\x9b\u202e\ud83d"}, ensure_ascii=False))
    assert json.loads(text) == {"k": "\x1b\x9b\u202e\ud83d"}
    assert all(ch not in text for ch in "\x1b\x9b\u202e\ud83d")


# --- through the screen -------------------------------------------------------------------------------------


async def test_a_traversal_session_id_exports_inside_home(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    make_session(root, TRAVERSAL, "hello")
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, TRAVERSAL)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ExportDialog)
            assert dialog.query_one("#export-path", Input).value == "~/etc-x.md"
            await pilot.press("enter")
            await settle(pilot)
    out = Path.home() / "etc-x.md"
    assert "hello" in out.read_text(encoding="utf-8")
    assert not (Path.home().parent / "etc").exists()


async def test_the_dialog_refuses_links_and_says_where_they_point(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    make_session(root, "5e55111e5e55111e", "hello")
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me", encoding="utf-8")
    live, dangling = Path.home() / "live.md", Path.home() / "dangling.md"
    live.symlink_to(precious)
    dangling.symlink_to(tmp_path / "made-by-export.md")
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, "5e55111e5e55111e")
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ExportDialog)
            field = dialog.query_one("#export-path", Input)
            for link, target in ((live, precious), (dangling, tmp_path / "made-by-export.md")):
                field.value = str(link)
                for _ in range(2):  # a second press does not arm a replace either
                    await pilot.press("enter")
                    await pilot.pause()
                    assert app.screen is dialog
                note = str(dialog.query_one("#export-note").render())
                assert "symbolic link" in note and str(target) in note
            await pilot.press("escape")
            await settle(pilot)
    assert precious.read_text(encoding="utf-8") == "keep me"
    assert not (tmp_path / "made-by-export.md").exists()


@pytest.mark.parametrize("fmt", ["markdown", "json"])
async def test_a_lone_surrogate_is_exported_not_dropped(tmp_path: Path, fmt: str) -> None:
    root = tmp_path / "sessions"
    make_session(root, SURROGATE_SID, "before \ud83d after \x1b[2J")
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, SURROGATE_SID)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            if fmt == "json":
                await pilot.click("#export-json")
                await pilot.pause()
            await pilot.press("enter")
            await settle(pilot)
            messages = [str(n.message) for n in app._notifications]
            assert any("Exported to" in m for m in messages), messages
        out = Path.home() / f"{SURROGATE_SID}.{'json' if fmt == 'json' else 'md'}"
        data = out.read_bytes()
        assert data, "never an empty file"
        text = data.decode("utf-8")  # valid UTF-8
        assert "\x1b" not in text
        if fmt == "json":
            content = json.dumps(json.loads(text))
            assert "before \\ud83d after \\u001b[2J" in content, "the JSON still holds the data"
            assert "\\ud83d" in text
        else:
            assert "before \\ud83d after ␛[2J" in text
        assert entries.replay_plan(sd, SURROGATE_SID).message_rows == 1


async def test_a_traversal_claude_code_session_id_exports_inside_home(tmp_path: Path) -> None:
    from tests.tui.test_transcript_hostile import NativeHost, settle_native
    from tui.screens.native_transcript import NativeRef

    record = {"sessionId": TRAVERSAL, "cwd": "/w", "version": "2.1.42", "isSidechain": False, "type": "user",
              "uuid": "u1", "parentUuid": None, "timestamp": "2026-03-01T10:00:00Z",
              "message": {"role": "user", "content": "hello \ud83d"}}
    path = tmp_path / "claude.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    root = tmp_path / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        app = NativeHost(sd, NativeRef("claude-code", path=str(path)))
        async with app.run_test(size=SIZE) as pilot:
            await settle_native(pilot)
            await pilot.press("e")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ExportDialog)
            assert dialog.query_one("#export-path", Input).value == "~/etc-x.md"
            await pilot.press("enter")
            await settle_native(pilot)
    text = (Path.home() / "etc-x.md").read_text(encoding="utf-8")
    assert "hello \\ud83d" in text
