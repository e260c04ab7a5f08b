"""Pilot tests of the Sessions screen and its Line-API list: filter, sort, open, refresh, windows, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tui.app import SessionscopeApp
from tui.formatting import tildify, utc_minutes
from tui.screens.sessions import SessionsScreen
from tui.widgets.row_list import GAP, GUTTER, Page, PageLoaded, Read, fit
from tui.widgets.session_list import WINDOW, SessionList, session_columns
from tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.anyio  # async tests run on asyncio through the anyio plugin (anyio comes with watchfiles)

SIZE = (120, 36)


def make_session_dir(folder: Path, count: int) -> Path:
    """A session directory with ``count`` sessions of one user message each, written by raw SQL."""
    from store.mothx.sessiondir import open_session_dir

    folder.mkdir(parents=True, exist_ok=True)
    with open_session_dir(folder, OpenMode.READ_WRITE, create=True) as sd, sd.db.write() as conn:
        for i in range(count):
            sid = f"{i:016x}"
            stamp = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"
            conn.execute(
                "INSERT INTO sessions (id, cwd, timestamp, channel_type) VALUES (?, ?, ?, 'local')",
                (sid, f"/work/project-{i % 5}", stamp),
            )
            data = {
                "type": "message",
                "id": f"{i:08x}{0:08x}",
                "parentId": None,
                "timestamp": stamp,
                "message": {"role": "user", "content": f"question number {i}"},
            }
            conn.execute(
                "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, 'message', NULL, ?, ?)",
                (sid, data["id"], stamp, json.dumps(data)),
            )
    return folder


@pytest.fixture(scope="module")
def big_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_session_dir(tmp_path_factory.mktemp("big") / "sessions", 1000)


def _status(app: SessionscopeApp) -> str:
    return app.screen.query_one(StatusBar).count


# --- filter, sort, open -------------------------------------------------------------------------------------------


async def test_filter_narrows_the_list_live(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        everything = session_list.total
        assert everything and everything > 1
        assert _status(app) == f"{everything:,} sessions"
        target = session_list.visible_rows()[-1]
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        assert app.focused.region.height == 1 and app.focused.region.width > 60, "the filter box is one wide line"
        await pilot.press(*target.id[:10])
        await settle(pilot)
        assert session_list.total is not None and 1 <= session_list.total < everything
        assert target.id in {row.id for row in session_list.visible_rows()}
        assert _status(app) == f"{session_list.total:,} of {everything:,} (filtered)"
        await pilot.press("escape")
        await settle(pilot)
        assert session_list.total == everything
        screen = app.screen
        assert isinstance(screen, SessionsScreen) and not screen.filter_visible


async def test_filter_with_no_match_says_so(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zz-no-such-text-zz", "enter")
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        assert session_list.total == 0
        assert session_list.render_line(1).text.strip() == "No session matches the filter."
        assert app.focused is session_list


async def test_sort_cycles_and_reverses(demo_master: Path) -> None:
    from store.mothx.sessions import SortKey, list_sessions

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        session_list = screen.query_one(SessionList)
        assert screen.current_query().sort is SortKey.LAST_ACTIVE
        await pilot.press("s")
        await settle(pilot)
        query = screen.current_query()
        assert query.sort is SortKey.TITLE and query.descending is False
        shown = [row.id for row in session_list.visible_rows()]
        assert app.sd is not None
        expected = list_sessions(app.sd, query.flt, SortKey.TITLE, False, offset=0, limit=len(shown))
        assert shown == [row.id for row in expected.rows]
        assert "sort: title ↑" in screen.query_one(StatusBar).query_text
        await pilot.press("S")
        await settle(pilot)
        assert screen.current_query().descending is True
        shown = [row.id for row in session_list.visible_rows()]
        expected = list_sessions(app.sd, query.flt, SortKey.TITLE, True, offset=0, limit=len(shown))
        assert shown == [row.id for row in expected.rows]
        for _ in range(len(SortKey) - 1):
            await pilot.press("s")
        await settle(pilot)
        assert screen.current_query().sort is SortKey.LAST_ACTIVE


async def test_enter_opens_the_transcript_of_the_cursor_row(demo_master: Path) -> None:
    screen_type = _transcript_screen_type()
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        await pilot.press("j")
        chosen = session_list.selected
        assert chosen is not None
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, screen_type)
        assert getattr(app.screen, "session_id", chosen.id) == chosen.id


def _transcript_screen_type() -> type:
    transcript = pytest.importorskip("tui.screens.transcript")
    screen_type = getattr(transcript, "TranscriptScreen", None)
    if screen_type is None:
        pytest.skip("TranscriptScreen is not there yet")
    return screen_type


async def test_escape_and_jump_come_back_from_a_transcript(demo_master: Path) -> None:
    from textual.command import CommandPalette

    screen_type = _transcript_screen_type()
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        sessions = app.screen
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, screen_type)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is sessions
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, screen_type)
        await pilot.press("colon")
        await pilot.pause(0.3)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Sessions", "enter")
        await pilot.pause(0.3)
        assert app.screen is sessions


async def test_open_session_by_id_prefix(demo_master: Path) -> None:
    from tui.palette import OpenSessionDialog

    screen_type = _transcript_screen_type()
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        target = app.screen.query_one(SessionList).visible_rows()[2]
        app.action_open_session_prompt()
        await pilot.pause()
        assert isinstance(app.screen, OpenSessionDialog)
        await pilot.press(*"ffffffffffff", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, OpenSessionDialog), "an unknown id keeps the dialog open"
        assert str(app.screen.query_one("#open-error", Static).render()) not in ("", "Looking…")
        app.screen.query_one(Input).value = target.id[:12]
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, screen_type)
        assert getattr(app.screen, "session_id", target.id) == target.id


async def test_facet_picker_filters_by_one_value(demo_master: Path) -> None:
    from textual.command import CommandPalette

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        everything = screen.query_one(SessionList).total
        await pilot.press("f")
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.screen is screen
        assert screen.facet is not None
        field, value, _label = screen.facet
        session_list = screen.query_one(SessionList)
        assert session_list.total is not None and session_list.total <= (everything or 0)
        attribute = {"cwd": "cwd", "project_id": "project_id", "channel_type": "channel_type"}[field]
        assert all(getattr(row, attribute) == value for row in session_list.visible_rows())
        assert "(filtered)" in _status(app)


# --- windows ----------------------------------------------------------------------------------------------------


async def test_only_the_visible_windows_are_read(big_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.mothx.sessions

    calls: list[tuple[int, int]] = []
    real = store.mothx.sessions.list_sessions

    def counting(sd, flt, sort, descending=True, *, offset=0, limit=100):
        calls.append((offset, limit))
        return real(sd, flt, sort, descending, offset=offset, limit=limit)

    monkeypatch.setattr(store.mothx.sessions, "list_sessions", counting)
    app = SessionscopeApp(big_dir, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        assert session_list.total == 1000
        assert calls == [(0, WINDOW)]
        await pilot.press("G")
        await settle(pilot)
        assert session_list.selected is not None and session_list.selected is session_list.rows[-1]
        assert sum(limit for _offset, limit in calls) <= 3 * WINDOW, calls
        assert all(offset in (0, 900) for offset, _limit in calls), calls
        screen = app.screen
        assert app.sd is not None and isinstance(screen, SessionsScreen)
        last = real(app.sd, screen.current_query().flt, screen.current_query().sort, True, offset=999, limit=1)
        assert session_list.selected is not None and session_list.selected.id == last.rows[0].id
        assert last.rows[0].id[:8] in session_list.render_line(session_list.cursor - int(session_list.scroll_offset.y) + 1).text


async def test_refresh_keeps_cursor_and_scroll(big_dir: Path) -> None:
    app = SessionscopeApp(big_dir, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        await pilot.press("pagedown", "pagedown", "pagedown", "pagedown", "j", "j")
        await settle(pilot)
        line, generation = session_list.cursor - int(session_list.scroll_offset.y), session_list.generation
        selected = session_list.selected
        assert session_list.cursor > 100 and session_list.scroll_offset.y > 0
        await pilot.press("r")
        await settle(pilot)
        assert session_list.generation == generation + 1
        assert session_list.cursor - int(session_list.scroll_offset.y) == line, "the cursor stays on its screen line"
        assert session_list.selected == selected


async def test_a_stale_window_is_dropped(big_dir: Path) -> None:
    app = SessionscopeApp(big_dir, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        first = session_list.row_at(0)
        assert first is not None
        await pilot.press("s")  # a new query: generation + 1
        await settle(pilot)
        now_first = session_list.row_at(0)
        stale = Read(session_list.generation - 1, 1, "first", WINDOW, replace=True, count=True)
        session_list.post_message(PageLoaded(stale, Page((first,) * WINDOW, False), 5))
        await pilot.pause()
        assert session_list.row_at(0) == now_first
        assert session_list.total == 1000


async def test_cursor_keys_move_and_scroll(big_dir: Path) -> None:
    app = SessionscopeApp(big_dir, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        await pilot.press("j", "down", "down")
        assert session_list.cursor == 3
        await pilot.press("k")
        assert session_list.cursor == 2
        await pilot.press("end")
        await settle(pilot)
        assert session_list.selected is session_list.rows[-1] and not session_list.has_after
        assert session_list.scroll_offset.y == len(session_list.rows) + 1 - session_list.scrollable_content_region.height
        await pilot.press("g")
        await settle(pilot)
        assert session_list.cursor == 0 and session_list.scroll_offset.y == 0 and not session_list.has_before
        await pilot.press("pagedown")
        assert session_list.cursor == session_list.scrollable_content_region.height - 1


# --- drawing ----------------------------------------------------------------------------------------------------


def _summary(**overrides: object):
    from store.mothx.sessions import SessionSummary

    fields: dict[str, object] = dict(
        id="0123456789abcdef", title="", preview="what does this error mean", cwd=str(Path.home() / "src" / "app"),
        channel_type="local", channel_id="", message_count=12, last_active_at="2026-03-01T23:30:00.123+02:00",
        timestamp="2026-03-01T20:00:00Z", parent_session="", fork_kind="", fork_boundary_seq=0, seed_length=0,
        project_id="", project_name="", pinned=False, run_status="",
    )
    fields.update(overrides)
    return SessionSummary(**fields)  # type: ignore[arg-type]


async def test_row_shows_preview_dimmed_utc_time_fork_and_run(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        width = session_list.scrollable_content_region.width
        row = _summary(parent_session="fedcba9876543210", fork_kind="message", run_status="running")
        strip = session_list._row_strip(row, width, False, False)
        text = strip.text
        assert "what does this error mean" in text
        assert " 0123456789a… " in text, "the id is cut to its column (12 cells at 120)"
        assert "~/src/app" in text
        assert "2026-03-01 21:30" in text
        assert "⑂ message" in text
        assert "● running" in text
        orphan = session_list._row_strip(_summary(run_status="running", run_state="orphaned"), width, False, False)
        assert "✗ orphaned" in orphan.text and "● running" not in orphan.text
        preview_segment = next(seg for seg in strip if "what does" in seg.text)
        assert preview_segment.style is not None and preview_segment.style.italic
        titled = session_list._row_strip(_summary(title="Fix the parser"), width, False, False)
        assert "Fix the parser" in titled.text and "what does" not in titled.text
        assert strip.cell_length == width


def test_utc_minutes_converts_offsets_and_never_says_ago() -> None:
    assert utc_minutes("2026-03-01T23:30:00.123456789+02:00") == "2026-03-01 21:30"
    assert utc_minutes("2026-03-01T23:30:00Z") == "2026-03-01 23:30"
    assert utc_minutes("2026-12-31T23:30:00-01:00") == "2027-01-01 00:30"
    assert utc_minutes("") == ""
    assert utc_minutes("yesterday") == "(unreadable)", "a stored text that is no time is never shown as one"


def test_tildify() -> None:
    assert tildify("/home/ann/src", home="/home/ann") == "~/src"
    assert tildify("/home/anna/src", home="/home/ann") == "/home/anna/src"


@pytest.mark.parametrize("width", [20, 40, 60, 80, 100, 120, 200, 240])
def test_columns_fit_the_width(width: int) -> None:
    columns = session_columns()
    widths = fit(columns, width - GUTTER)
    kept = [w for w in widths if w is not None]
    assert widths[1] is not None, "the title is never dropped"
    assert sum(kept) + GAP * (len(kept) - 1) <= width - GUTTER


async def test_a_damaged_row_is_styled_damaged(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        assert session_list.row_style(_summary()) is None
        assert session_list.row_style(_summary(problems=("message_count: not an integer",))) == "damaged"


HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe", "\ud83d", "pid-4242-[/]",
           "[bold]x[/bold]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]


async def test_hostile_cells_are_drawn_as_text(demo_master: Path) -> None:
    import re

    raw = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=(240, 40)) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        width = session_list.scrollable_content_region.width
        for value in HOSTILE:
            for row in (_summary(title=value, cwd=value, channel_type=value), _summary(preview=value, id=value[:16]),
                        _summary(fork_kind=value, run_status=value, problems=(value,))):
                strip = session_list._row_strip(row, width, True, True)
                assert not any(raw.search(seg.text) for seg in strip), (value, strip.text)
                assert strip.cell_length == width
        shown = session_list._row_strip(_summary(title="[bold]x[/bold]", cwd="/home/u/[archive]/repo"), width,
                                        False, False).text
        assert "[bold]x[/bold]" in shown and "/home/u/[archive]/repo" in shown


@pytest.mark.parametrize(("size", "expected"), [
    ((80, 24), ["TITLE", "ID", "WORK DIR", "MSGS", "LAST ACTIVE UTC"]),
    ((240, 50), ["TITLE", "ID", "WORK DIR", "CHANNEL", "MSGS", "LAST ACTIVE UTC", "FORK", "RUN"]),
])
async def test_session_list_header_at_80_and_240(big_dir: Path, size: tuple[int, int], expected: list[str]) -> None:
    app = SessionscopeApp(big_dir, OpenMode.SNAPSHOT)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        header = session_list.render_line(0).text
        shown = [c.title for c in session_list.columns if c.title and f" {c.title} " in f"{header} "]
        assert shown == expected
        assert header.startswith(" " * (GUTTER + 1 + GAP) + "TITLE"), "the pin column comes first"
        assert len(header) == session_list.scrollable_content_region.width
        assert session_list.selected is not None
        row = session_list.render_line(1).text
        sid = session_list.selected.id
        if size[0] >= 240:
            assert f" {sid} " in row, "the id is shown whole"
        else:
            assert sid[:8] in row and sid not in row


# --- the captured-session list ("a") at 80 and 240 cells -------------------------------------------------------------


@pytest.fixture(scope="module")
def claude_captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session directory holding only captured Claude Code sessions (the list opens on them)."""
    import shutil

    from store.agents.capture import capture_claude_code
    from store.mothx.sessiondir import open_session_dir
    from tests.conftest import SHARED_FIXTURES

    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures/real is not present")
    real_fixtures = SHARED_FIXTURES

    base = tmp_path_factory.mktemp("captured")
    cc = base / "claude-code"
    shutil.copytree(real_fixtures / "claude-code", cc)
    for p in cc.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    root = base / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        capture_claude_code(sd, cc)
    return root


@pytest.mark.parametrize(("size", "expected"), [
    ((80, 24), ["FIRST PROMPT", "ID", "WORK DIR", "RECORDS", "FILES", "LAST RECORD UTC"]),
    ((240, 50), ["FIRST PROMPT", "ID", "WORK DIR", "RECORDS", "FILES", "LAST RECORD UTC", "HOST"]),
])
async def test_captured_list_keeps_its_telling_columns(claude_captured: Path, size: tuple[int, int],
                                                       expected: list[str]) -> None:
    from tests.tui.test_native_transcript import settle_sessions
    from tui.widgets.native_session_list import AgentSessionList

    app = SessionscopeApp(claude_captured, OpenMode.READ_ONLY)
    async with app.run_test(size=size) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen) and screen.source == "claude-code"
        agent_list = screen.query_one(AgentSessionList)
        header = agent_list.render_line(0).text
        shown = [c.title for c in agent_list.columns if f" {c.title} " in f"{header} "]
        assert shown == expected
        assert agent_list.selected is not None
        row = agent_list.render_line(1).text
        sid = agent_list.selected.agent_session_id
        assert (sid if size[0] >= 240 else sid[:8]) in row
