"""Pilot tests of the Transcript screen on the demo directory."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.transcript_support import (
    DemoSessions,
    TranscriptHost,
    find_demo_sessions,
    open_from_sessions_list,
    screen_text,
    settle,
)
from tui.screens.transcript import TranscriptScreen
from tui.widgets.export_dialog import ExportDialog
from tui.widgets.transcript_blocks import message_plain_text
from tui.widgets.transcript_view import MESSAGE_PAGE, ROW_PAGE

pytestmark = pytest.mark.anyio  # async tests run on asyncio through the anyio plugin

SIZE = (120, 36)


@pytest.fixture(scope="module")
def demo_sessions(demo_master: Path) -> DemoSessions:
    return find_demo_sessions(demo_master)


@pytest.fixture
def count_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the rows the store hands out through the paging calls; the whole-session reads must not run."""
    counts = {"replay_page": 0, "rows_page": 0, "calls": 0}
    real_replay_page, real_rows_page = entries.replay_page, entries.rows_page

    def replay_page(*args: object, **kwargs: object) -> list[entries.ReplayMessage]:
        got = real_replay_page(*args, **kwargs)  # type: ignore[arg-type]
        counts["replay_page"] += len(got)
        counts["calls"] += 1
        return got

    def rows_page(*args: object, **kwargs: object) -> list[entries.EntryRow]:
        got = real_rows_page(*args, **kwargs)  # type: ignore[arg-type]
        counts["rows_page"] += len(got)
        counts["calls"] += 1
        return got

    def whole_session(*args: object, **kwargs: object) -> None:
        raise AssertionError("the screen read the whole session")

    monkeypatch.setattr(entries, "replay_page", replay_page)
    monkeypatch.setattr(entries, "rows_page", rows_page)
    monkeypatch.setattr(entries, "load_rows", whole_session)
    monkeypatch.setattr(entries, "replay", whole_session)
    return counts


def _screen(app: TranscriptHost) -> TranscriptScreen:
    screen = app.screen
    assert isinstance(screen, TranscriptScreen)
    return screen


async def test_long_session_opens_reading_only_a_window(demo_master: Path, demo_sessions: DemoSessions,
                                                         count_reads: dict[str, int]) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        plan = entries.replay_plan(sd, demo_sessions.long)
        assert plan.total_rows > 5_000
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = _screen(app)
            assert screen.facts is not None and not screen.error
            # one forward page of the replay (plus the summary heading it), nothing of the raw rows
            assert 0 < count_reads["replay_page"] <= MESSAGE_PAGE + 1
            assert count_reads["replay_page"] < plan.message_rows + 1
            assert count_reads["rows_page"] == 0
            text = screen_text(app)
            assert "compaction summary" in text
            title = str(screen.query_one("#transcript-title").render())
            assert f"replay: {plan.message_rows + 1:,} messages from seq {plan.window_start_seq:,}" in title
            assert demo_sessions.long in title

            await pilot.press("tab")
            await settle(pilot)
            assert 0 < count_reads["rows_page"] <= ROW_PAGE
            assert count_reads["rows_page"] < plan.total_rows // 10


async def test_G_jumps_to_the_end_and_shows_the_last_message(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        last = entries.replay(sd, demo_sessions.long)[-1]
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            view = _screen(app).transcript_view
            assert last.seq not in {it.seq for it in view.visible_items()}
            await pilot.press("G")
            await settle(pilot)
            shown = view.visible_items()
            assert shown[-1].key == view.items[-1].key and view.at_end
            assert last.seq in {it.seq for it in shown if it.kind == "message"}
            assert f"seq {last.seq:,}" in screen_text(app)
            assert view.cursor_item is not None and view.cursor_item.seq == last.seq
            await pilot.press("g")
            await settle(pilot)
            assert view.visible_items()[0].key == view.items[0].key and view.at_start


async def test_n_and_p_jump_between_turns(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        plan = entries.replay_plan(sd, demo_sessions.long)
        starts = [seq for seq, kind, _ in entries.turn_markers(sd, demo_sessions.long)
                  if kind == "turn_start" and seq >= plan.window_start_seq]
        assert len(starts) >= 3
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            view = _screen(app).transcript_view
            await pilot.press("n")  # the turn open at the first kept entry first (tests/tui/test_transcript_nav.py)
            await settle(pilot)
            assert view.cursor_item is not None and view.cursor_item.seq == plan.window_start_seq
            await pilot.press("n")
            await settle(pilot)
            assert view.anchor_item is not None
            assert (view.anchor_item.kind, view.anchor_item.seq) == ("turn_start", starts[0])
            assert f"seq {starts[0]:,}" in screen_text(app).splitlines()[0]
            await pilot.press("n", "n")
            await settle(pilot)
            assert view.anchor_item.seq == starts[2]
            await pilot.press("p")
            await settle(pilot)
            assert view.anchor_item.seq == starts[1]
            # the cursor lands on the turn's first block, not on the rule
            assert view.cursor_item is not None and view.cursor_item.kind == "message"


async def test_lines_wheel_and_pages_scroll_by_whole_lines(demo_master: Path, demo_sessions: DemoSessions) -> None:
    """j/k move one line, the wheel three, a page the view's height less one: the text shifts exactly so."""
    from textual import events

    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            view = _screen(app).transcript_view
            height = view.size.height

            async def shifted_by(action: object, lines: int) -> None:
                before = screen_text(app).splitlines()
                if isinstance(action, str):
                    await pilot.press(action)
                else:
                    view.post_message(action)  # type: ignore[arg-type]
                await settle(pilot)
                after = screen_text(app).splitlines()
                strip = [line[2:] for line in before]  # the gutter shows the cursor, which may move
                assert [line[2:] for line in after][: height - lines] == strip[lines:] if lines > 0 else \
                    [line[2:] for line in after][-lines:] == strip[: height + lines]

            await shifted_by("j", 1)
            await shifted_by("j", 1)
            await shifted_by("k", -1)
            await shifted_by(events.MouseScrollDown(view, 5, 5, 0, 1, 0, False, False, False), 3)
            await shifted_by(events.MouseScrollUp(view, 5, 5, 0, -1, 0, False, False, False), -3)
            await shifted_by("space", height - 1)
            await shifted_by("pagedown", height - 1)
            await shifted_by("b", -(height - 1))


async def test_clicking_the_scrollbar_jumps_to_that_fraction(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        total = entries.row_count(sd, demo_sessions.long)
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("tab")
            await settle(pilot)
            screen = _screen(app)
            view = screen.raw_view
            assert app.focused is view
            await pilot.click(view, offset=(view.size.width - 1, view.size.height // 2))
            await settle(pilot)
            top = view.anchor_item
            assert top is not None
            rank = entries.row_count(sd, demo_sessions.long, before_seq=top.seq)
            assert abs(rank / total - 0.5) < 0.05
            thumb_top, thumb_bottom = view._thumb
            assert thumb_top <= view.size.height // 2 <= thumb_bottom + 1


async def test_paging_through_every_window_shows_each_row_once(demo_master: Path, demo_sessions: DemoSessions) -> None:
    """Page down to the end and back up in the raw view (the window is trimmed on the way): every row of the
    session appears, in order, and the window never holds a duplicate."""
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        want = [r.seq for r in entries.load_rows(sd, demo_sessions.long)]
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("tab")
            await settle(pilot)
            view = _screen(app).raw_view
            for direction in (1, -1):
                seen: set[int] = set()
                for _ in range(2 * len(want)):
                    keys = [it.key for it in view.items]
                    assert keys == sorted(set(keys))
                    seen.update(it.seq for it in view.visible_items())
                    edge = view.items[-1] if direction > 0 else view.items[0]
                    if edge.key in {it.key for it in view.visible_items()} and (view.at_end if direction > 0 else view.at_start):
                        break
                    view.action_page(direction)
                    if view.fetching:
                        await settle(pilot)
                assert sorted(seen) == want
                assert len(view.items) <= 600


async def test_replay_blocks_match_the_replay(demo_master: Path, demo_sessions: DemoSessions) -> None:
    """Scrolling the replay line by line from top to bottom passes every replayed message exactly in order."""
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        want = [m.seq for m in entries.replay(sd, demo_sessions.long) if m.kind == "message"]
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            view = _screen(app).transcript_view
            seen: list[int] = []
            for _ in range(20_000):
                for it in view.visible_items():
                    if it.kind == "message" and (not seen or it.seq > seen[-1]):
                        seen.append(it.seq)
                if view.at_end and view.visible_items()[-1].key == view.items[-1].key:
                    break
                view.scroll_lines(7)
                if view.fetching:
                    await settle(pilot)
            assert seen == want


async def test_raw_view_shows_an_unparsable_row_with_its_parse_error(demo_dir: Path, demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.tool_error
    conn = sqlite3.connect(demo_dir / "sessions.db")
    with conn:
        conn.execute(
            "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, ?, ?, ?)",
            (sid, "badbadbadbadbad0", "message", None, "2026-11-20T11:00:00Z", '{"type": "message", "id": oops'),
        )
    conn.close()
    with open_session_dir(demo_dir, OpenMode.READ_ONLY) as sd:
        bad = [r for r in entries.load_rows(sd, sid) if r.parsed is None]
        assert len(bad) == 1 and bad[0].parse_error
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = _screen(app)
            assert "✗ 1 corrupt row" in str(screen.query_one("#transcript-title").render())
            await pilot.press("tab")
            await settle(pilot)
            assert screen.raw_mode and app.focused is screen.raw_view
            await pilot.press("G")
            await settle(pilot)
            text = screen_text(app)
            assert "badbadbadbadbad0" in text
            assert f"✗ parse error: {bad[0].parse_error}"[:100] in text
            await pilot.press("tab")
            await settle(pilot)
            assert not screen.raw_mode


async def test_y_copies_the_block_under_the_cursor(demo_master: Path, demo_sessions: DemoSessions,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import pyperclip

    copied: list[str] = []
    monkeypatch.setattr(pyperclip, "copy", copied.append)
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        app = TranscriptHost(sd, demo_sessions.tool_error)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            view = _screen(app).transcript_view
            await pilot.press("down", "down")
            item = view.cursor_item
            assert item is not None and item.kind == "message"
            await pilot.press("y")
            await pilot.pause()
            assert copied == [message_plain_text(item.payload.message)]  # type: ignore[union-attr]
            assert copied[0]
            assert any(f"message seq {item.seq:,}" in str(n.message) for n in app._notifications)

            def no_backend(text: str) -> None:
                raise pyperclip.PyperclipException("no copy/paste mechanism")

            osc52: list[str] = []
            monkeypatch.setattr(pyperclip, "copy", no_backend)
            monkeypatch.setattr(app, "copy_to_clipboard", osc52.append)
            await pilot.press("y")
            await pilot.pause()
            assert osc52 == copied


async def test_e_exports_markdown_and_json(demo_master: Path, demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.override
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            assert isinstance(app.screen, ExportDialog)
            field = app.screen.query_one("#export-path")
            assert field.value == f"~/{sid}.md"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await settle(pilot)
            md = Path.home() / f"{sid}.md"
            assert md.read_text(encoding="utf-8") == entries.export_markdown(sd, sid)
            assert any(f"~/{sid}.md" in str(n.message) for n in app._notifications)

            await pilot.press("e")
            await pilot.pause()
            await pilot.click("#export-json")
            await pilot.pause()
            field = app.screen.query_one("#export-path")
            assert field.value == f"~/{sid}.json"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await settle(pilot)
            out = Path.home() / f"{sid}.json"
            assert out.read_text(encoding="utf-8") == entries.export_json(sd, sid)
            json.loads(out.read_text(encoding="utf-8"))


async def test_export_refuses_the_session_directory_and_asks_before_replacing(
        demo_dir: Path, demo_sessions: DemoSessions) -> None:
    sid = demo_sessions.override
    with open_session_dir(demo_dir, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ExportDialog)
            field = dialog.query_one("#export-path")
            field.value = str(demo_dir / "export.md")  # type: ignore[attr-defined]
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is dialog
            assert "never written inside the session directory" in str(dialog.query_one("#export-note").render())
            assert not (demo_dir / "export.md").exists()

            target = Path.home() / "taken.md"
            target.write_text("keep me", encoding="utf-8")
            field.value = str(target)  # type: ignore[attr-defined]
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is dialog and target.read_text(encoding="utf-8") == "keep me"
            await pilot.press("enter")
            await settle(pilot)
            assert target.read_text(encoding="utf-8") == entries.export_markdown(sd, sid)


async def test_markers_override_and_skipped_compaction(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        app = TranscriptHost(sd, demo_sessions.override)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            view = _screen(app).transcript_view
            await pilot.press("right_square_bracket")
            await settle(pilot)
            assert view.anchor_item is not None and view.anchor_item.kind == "override"
            text = screen_text(app)
            assert "⟲ content override" in text and "replacement:" in text
            await pilot.press("up")
            await settle(pilot)
            text = screen_text(app)
            assert "⟲ overridden" in text and "original (replaced; kept for audit):" in text

        plan = entries.replay_plan(sd, demo_sessions.skipped)
        skipped = next(c for c in plan.compactions if not c.applied)
        app = TranscriptHost(sd, demo_sessions.skipped)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("right_square_bracket")
            await settle(pilot)
            first = screen_text(app).splitlines()[0]
            assert f"⚠ compaction skipped: first kept entry {skipped.first_kept_entry_id[:16]}" in first
            assert "not found; full history kept" in first


async def test_an_unknown_session_is_one_line_and_a_notification(demo_master: Path) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        app = TranscriptHost(sd, "ffffffffffffffff")
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = _screen(app)
            assert screen.error
            assert "ffffffffffffffff" in screen.error
            assert screen_text(app).splitlines()[0].strip().startswith("✗")
            assert any(n.severity == "error" for n in app._notifications)
            await pilot.press("G", "n", "y", "e", "tab")  # nothing to act on: no crash
            await settle(pilot)


def _fingerprint(folder: Path) -> dict[str, tuple[int, int, str]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT, OpenMode.READ_WRITE])
async def test_every_open_mode_shows_the_same_and_read_modes_write_nothing(
        demo_master: Path, demo_dir: Path, demo_sessions: DemoSessions, mode: OpenMode) -> None:
    sid = demo_sessions.override
    before = _fingerprint(demo_dir)
    with open_session_dir(demo_dir, mode) as sd:
        app = TranscriptHost(sd, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            first_screen = screen_text(app)
            await pilot.press("G", "tab", "G", "g", "tab", "n", "y", "e")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
    if mode.is_read:
        assert _fingerprint(demo_dir) == before
    assert (Path.home() / f"{sid}.md").read_text(encoding="utf-8").strip()
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as ref:
        app = TranscriptHost(ref, sid)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert screen_text(app) == first_screen


async def test_opened_from_the_sessions_list_and_esc_goes_back(demo_master: Path, demo_sessions: DemoSessions) -> None:
    from tui.app import SessionscopeApp
    from tui.screens.sessions import SessionsScreen

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await open_from_sessions_list(pilot, demo_sessions.override)
        screen = _screen(app)  # type: ignore[arg-type]
        assert screen.facts is not None and screen.facts.session_id == demo_sessions.override
        assert app.focused is screen.transcript_view
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)


async def test_an_empty_replay_says_so(demo_master: Path, demo_sessions: DemoSessions) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        empty = next(sid for sid in demo_sessions.all_ids
                     if entries.replay_plan(sd, sid).message_rows == 0 and entries.replay_plan(sd, sid).summary is None)
        app = TranscriptHost(sd, empty)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert "The replay holds no messages" in screen_text(app).splitlines()[0]
            await pilot.press("tab")
            await settle(pilot)
            assert _screen(app).raw_view.items


async def test_keys_are_remapped_by_id(demo_master: Path, demo_sessions: DemoSessions,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The screen's and the view's bindings carry registry ids, so a user keymap can move them."""
    import pyperclip

    from tui import actions

    loaded = actions.parse_keymap('[keymap]\n"transcript.copy" = "c"\n"transcript-view.last" = "L"\n')
    assert loaded.problems == () and loaded.keymap == {"transcript.copy": "c", "transcript-view.last": "L"}
    copied: list[str] = []
    monkeypatch.setattr(pyperclip, "copy", copied.append)
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            app.set_keymap(loaded.keymap)
            await settle(pilot)
            view = _screen(app).transcript_view
            await pilot.press("L")
            await settle(pilot)
            assert view.at_end and view.visible_items()[-1].key == view.items[-1].key
            await pilot.press("c")
            await pilot.pause()
            assert len(copied) == 1


async def test_pages_pressed_faster_than_reads_are_not_lost(demo_master: Path, demo_sessions: DemoSessions) -> None:
    """Twenty page-downs in a row, before any page read lands, move the raw view exactly twenty pages."""
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        seqs = [r.seq for r in entries.load_rows(sd, demo_sessions.long)]
        app = TranscriptHost(sd, demo_sessions.long)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("tab")
            await settle(pilot)
            view = _screen(app).raw_view
            step = view.size.height - 1
            for _ in range(20):
                view.action_page(1)  # no await: the keys outrun the worker
            await settle(pilot)
            assert view.anchor_item is not None and view.anchor_item.seq == seqs[20 * step]
            for _ in range(20):
                view.action_page(-1)
            await settle(pilot)
            assert view.anchor_item.seq == seqs[0]
