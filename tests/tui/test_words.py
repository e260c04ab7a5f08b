"""Words a new user reads (issue 9, item 10): the welcome command, countdowns, plurals, token counts, the verify
wording, one word for an empty session, no badge where nothing is open, the pinned mark explained, no stray
glyph on the key bar, unreadable times, "at at", and reasons cut at a word."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import Static

from store import times
from store.mothx.db import OpenMode
from store.words import cut, plural
from tests.tui.appwait import settle
from tui.app import SessionscopeApp

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
ROOT = Path(__file__).resolve().parents[2]


def header_text(app: SessionscopeApp) -> str:
    from tui.widgets.header import AppHeader

    return app.screen.query_one(AppHeader).render().plain


async def test_the_welcome_screen_names_the_real_option_and_shows_no_badge(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from store import paths
    from tui.screens.welcome import WelcomeScreen

    monkeypatch.setattr(paths, "default_session_dir", lambda: tmp_path / "none")
    app = SessionscopeApp(None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, WelcomeScreen)
        text = str(app.screen.query_one("#welcome-text", Static).render())
        assert "sessionscope --dir PATH" in text and "<dir>" not in text
        header = header_text(app)
        assert "RW" not in header and "READ-ONLY" not in header


async def test_the_cannot_open_screen_shows_no_badge(tmp_path: Path) -> None:
    from tui.screens.welcome import OpenFailedScreen

    app = SessionscopeApp(tmp_path / "nowhere", OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(50):
            await pilot.pause(0.05)
            if isinstance(app.screen, OpenFailedScreen):
                break
        assert isinstance(app.screen, OpenFailedScreen)
        assert "READ-ONLY" not in header_text(app) and " RW " not in header_text(app)


def test_countdowns_never_say_raw_seconds_or_absurd_years() -> None:
    from store.demo.model import DEMO_NOW_UNIX, LIVE_LEASE_EXPIRES_AT
    from store.mothx.lease_model import LeaseSnapshot

    assert times.time_left(9) == "in 9 s" and times.time_left(3 * 3600) == "in 3 h"
    assert times.time_left(LIVE_LEASE_EXPIRES_AT - DEMO_NOW_UNIX, LIVE_LEASE_EXPIRES_AT) == "on 2100-01-01"
    assert times.time_left(2306311701) == "far in the future"
    import inspect

    source = inspect.getsource(LeaseSnapshot.describe)
    assert "s left" not in source, "the refusal says the time left in words"


def test_no_word_is_counted_with_a_parenthesized_plural() -> None:
    found = []
    for folder in ("tui", "store"):
        for path in (ROOT / folder).rglob("*.py"):
            if "demo" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "(s)" in node.value \
                        and not node.value.lstrip().startswith(("\"", "The ", "For ", "An ", "A ")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}")
    assert found == [], "say '1 turn' / '2 turns' (store.words.plural): " + "; ".join(found)
    assert plural(1, "file") == "1 file" and plural(2, "entry", "entries") == "2 entries"


def test_codex_token_counts_have_thousands_separators() -> None:
    from store.agents.native import parse_codex

    line = json.dumps({"timestamp": "2026-02-23T13:19:38.000Z", "type": "event_msg",
                       "payload": {"type": "token_count", "info": {"total_token_usage": {"total_tokens": 1650970}}}})
    items = [i for i in parse_codex([line]).items if "Tokens" in i.text]
    assert [i.text for i in items] == ["Tokens: 1,650,970"]


def test_a_divergent_file_counts_all_its_lines(real_fixtures: Path, tmp_path: Path) -> None:
    from store.agents.capture import capture_codex, verify
    from store.mothx.sessiondir import open_session_dir

    source = tmp_path / "codex"
    shutil.copytree(real_fixtures / "codex" / "sessions", source)
    for p in source.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    root = tmp_path / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        capture_codex(sd, source)
    rollout = next(source.rglob("rollout-*019c8a70-dda7-7f33-98ea-f30553347322.jsonl"))
    lines = rollout.read_bytes().split(b"\n")
    obj = json.loads(lines[2])
    obj["timestamp"] = "2030-01-01T00:00:00.000Z"  # line 3 differs, the count stays
    lines[2] = json.dumps(obj).encode()
    rollout.write_bytes(b"\n".join(lines))
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        result = verify(sd, "codex", "019c8a70-dda7-7f33-98ea-f30553347322")
    assert result.status == "divergent"
    (f,) = [f for f in result.files if f.status == "divergent"]
    assert f.disk_records == f.stored_records, "a 20-line file with one changed line has 20 lines on disk"


def test_an_empty_session_has_one_word_in_the_list_header_and_cli() -> None:
    from tui.cli.core import print_sessions  # noqa: F401 - the CLI's word is NO_MESSAGES
    from tui.formatting import NO_MESSAGES, untitled_text

    assert untitled_text(0) == NO_MESSAGES == "(no messages)"
    assert untitled_text(3) == "(untitled)"
    source = (ROOT / "tui" / "cli" / "core.py").read_text(encoding="utf-8")
    assert '"(untitled)"' not in source


async def test_the_pinned_mark_is_explained_in_help(demo_master: Path) -> None:
    from tui.screens.help import collect_help

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        groups = collect_help(app.screen)
        marks = [g for g in groups if g.title == "Marks in the list"]
        assert marks and marks[0].rows[0].keys == ["*"] and "pinned" in marks[0].rows[0].tooltip


async def test_the_transcript_key_bar_has_no_stray_glyph(demo_master: Path) -> None:
    from tests.tui.transcript_support import settle as settle_transcript
    from tui.widgets.keybar import KeyBar

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle_transcript(pilot)
        bar = app.screen.query_one(KeyBar).render().plain
        assert "▏" not in bar, "one key bar, no separator glyph (Textual's Footer drew one before ^p Palette)"


def test_unreadable_times_are_said_so() -> None:
    from tui.cli.core import when
    from tui.formatting import utc_minutes

    assert utc_minutes("not-a-time") == "(unreadable)"
    assert when("not-a-time") == "unreadable (not-a-time)"
    assert when("2026-11-20T12:00:00Z") == "2026-11-20 12:00"


def test_json_errors_never_say_at_at() -> None:
    from store.agents.native_lines import _json_error

    try:
        json.loads('"abc')
    except json.JSONDecodeError as exc:
        text = _json_error('"abc', exc, True)
    assert "at at" not in text and "starting at column 1" in text


def test_reasons_are_cut_at_a_word() -> None:
    from tui.opening import integrity_line

    assert cut("database disk image is malformed in page 42", 30) == "database disk image is…"
    line = integrity_line("*** in database main ***\nOn tree page 4 cell 7: Rowid 12 out of order in the table")
    assert line.endswith("…") and not line[:-1].endswith(("Rowi", "ou", "orde"))
    first = line.removeprefix("integrity FAILED: ").removesuffix("…")
    assert "On tree page 4 cell 7: Rowid 12 out of order in the table".startswith(first)
    assert first.endswith(tuple("abcdefghijklmnopqrstuvwxyz0123456789")) and " " not in first[-1:]
