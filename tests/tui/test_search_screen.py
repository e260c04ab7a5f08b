"""Pilot tests of the Search screen: ranked hits as you type, enter opens the transcript at the matching message,
captured records, the LIKE scan reported, hostile data drawn as text, hostile queries never failing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.mothx.db import OpenMode
from tests.store.test_search import FTS_SYNTAX, HOSTILE, _capture_small
from tests.store.test_sessions import new_dir
from tests.tui.appwait import settle
from tests.tui.rendered import assert_clean
from tests.tui.transcript_support import settle as settle_transcript
from tui.app import SessionscopeApp
from tui.screens.search import SearchScreen
from tui.screens.transcript import TranscriptScreen
from tui.widgets.search_list import SearchList
from tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.anyio

SIZE = (120, 34)
DEADLINE_S = 30.0


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    w = new_dir(tmp_path / "sessions")
    w.session("s-many", cwd="/w/a", t=1)
    w.session("s-once", cwd="/w/b", t=2)
    w.session("h" + HOSTILE[0] + "[/]", cwd="/w/[archive]" + HOSTILE[4], t=3)
    for i in range(30):
        w.user("s-many", f"filler message {i}")
    w.user("s-many", "the parser fails again: parser parser")
    w.assistant("s-many", "more filler afterwards")
    w.user("s-once", "a long message that mentions the parser once among many other words here")
    for bad in HOSTILE:
        w.user("h" + HOSTILE[0] + "[/]", f"hostile {bad} marker")
    w.close()
    return w.root


async def settle_search(pilot: Pilot[object]) -> SearchScreen:
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        if isinstance(screen, SearchScreen):
            hits = screen.query_one(SearchList)
            if screen._timer is None and hits.loaded and not hits.busy and not any(w.is_running for w in app.workers):
                return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"the search screen did not settle: {screen!r}")
        await asyncio.sleep(0.02)


def status(screen: SearchScreen) -> str:
    bar = screen.query_one(StatusBar)
    return f"{bar.count} | {bar.query_text}"


async def open_search(pilot: Pilot[object], query: str) -> SearchScreen:
    await settle(pilot)
    await pilot.press("ctrl+f")
    await settle_search(pilot)
    await pilot.press(*query)
    return await settle_search(pilot)


async def test_ranked_hits_and_enter_opens_the_matching_message(sdir: Path) -> None:
    app = SessionscopeApp(sdir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_search(pilot, "parser")
        hits = screen.query_one(SearchList)
        assert [h.session_id for h in hits.rows] == ["s-many", "s-once"]
        assert "2 sessions · ranked by the search index" in status(screen)
        text = assert_clean(app, "hits")
        assert "the parser fails again" in text
        await pilot.press("enter")                 # the query box: to the list
        await pilot.pause()
        assert hits.has_focus
        await pilot.press("enter")
        await settle_transcript(pilot)
        transcript = app.screen
        assert isinstance(transcript, TranscriptScreen) and transcript.session_id == "s-many"
        item = transcript.transcript_view.cursor_item or transcript.transcript_view.anchor_item
        assert item is not None and item.seq == hits.rows[0].seq
        assert "parser fails again" in assert_clean(app, "transcript")


async def test_a_match_before_the_last_compaction_opens_among_the_raw_entries(tmp_path: Path) -> None:
    w = new_dir(tmp_path / "sessions")
    w.session("s-cmp", t=1)
    early = w.user("s-cmp", "an early walrus sighting")
    first_kept = w.user("s-cmp", "kept by the first compaction")
    first_kept_id = w.conn.execute("SELECT id FROM entries WHERE seq = ?", (first_kept,)).fetchone()[0]
    first = w.entry("s-cmp", "compaction", {"summary": "an otters summary", "firstKeptEntryId": first_kept_id,
                                            "tokensBefore": 500})
    for i in range(40):
        w.assistant("s-cmp", f"filler reply {i}")
    kept = w.user("s-cmp", "the message the compaction keeps")
    kept_id = w.conn.execute("SELECT id FROM entries WHERE seq = ?", (kept,)).fetchone()[0]
    w.entry("s-cmp", "compaction", {"summary": "talked about sightings", "firstKeptEntryId": kept_id,
                                    "tokensBefore": 900})
    w.user("s-cmp", "after the compaction")
    w.close()
    app = SessionscopeApp(w.root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_search(pilot, "walrus")
        hits = screen.query_one(SearchList)
        assert [(h.session_id, h.seq) for h in hits.rows] == [("s-cmp", early)]
        await pilot.press("enter", "enter")
        await settle_transcript(pilot)
        transcript = app.screen
        assert isinstance(transcript, TranscriptScreen) and transcript.raw_mode
        assert transcript.facts is not None and transcript.facts.plan.window_start_seq == kept
        item = transcript.raw_view.cursor_item or transcript.raw_view.anchor_item
        assert item is not None and item.seq == early
        text = assert_clean(app, "compacted")
        assert f"Seq {early:,} is before the session's last compaction" in text and "walrus" in text
        await pilot.press("tab")                   # the replay, from the kept message
        await settle_transcript(pilot)
        assert not transcript.raw_mode
        item = transcript.transcript_view.cursor_item or transcript.transcript_view.anchor_item
        assert item is not None and item.seq >= kept
        # An earlier compaction's summary is shown above the replay: that hit stays in the replay.
        await pilot.press("escape")
        screen = await settle_search(pilot)
        await pilot.press("slash", "ctrl+u", *"otters")
        screen = await settle_search(pilot)
        assert [(h.session_id, h.seq) for h in screen.query_one(SearchList).rows] == [("s-cmp", first)]
        app.clear_notifications()
        await pilot.press("enter", "enter")
        await settle_transcript(pilot)
        transcript = app.screen
        assert isinstance(transcript, TranscriptScreen) and not transcript.raw_mode
        assert "Compacted away" not in assert_clean(app, "earlier compaction")
        assert "an otters summary" in assert_clean(app, "earlier compaction")


async def test_filter_text_carries_over_and_c_switches_to_captured(sdir: Path, tmp_path: Path) -> None:
    _capture_small(tmp_path, sdir)
    app = SessionscopeApp(sdir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"walrus", "enter")
        await settle(pilot)
        await pilot.press("ctrl+f")
        screen = await settle_search(pilot)
        assert screen.query_text == "walrus"
        assert screen.query_one(SearchList).rows == [] or "mothx" in status(screen)
        screen.query_one(SearchList).focus()
        await pilot.press("c")
        screen = await settle_search(pilot)
        rows = screen.query_one(SearchList).rows
        assert [(h.agent_id, h.session_id) for h in rows] == [("codex", "abc")]
        assert "captured records" in status(screen) and "agent session" in status(screen)
        assert_clean(app, "captured")


async def test_like_scan_is_reported(sdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    app = SessionscopeApp(sdir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_search(pilot, "parser")
        assert "LIKE scan" in status(screen)
        assert {h.session_id for h in screen.query_one(SearchList).rows} == {"s-many", "s-once"}


async def test_hostile_data_and_queries(sdir: Path) -> None:
    app = SessionscopeApp(sdir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_search(pilot, "marker")
        text = assert_clean(app, "hostile hits")
        assert "hostile ␛[2J marker" in text and "[…" in text
        query = screen.query_one("#search-query")
        for word, shown in (("bold", "[bold]x[/bold]"), ("link", "[link=file:///etc/passwd]x[/link]"),
                            ("click", "[@click=app.quit]x[/]"), ("pid", "pid-4242-[/]")):
            query.value = word  # type: ignore[attr-defined]
            screen = await settle_search(pilot)
            assert shown in assert_clean(app, word), word
        for bad in [*FTS_SYNTAX[:20], *HOSTILE]:
            query.value = bad  # type: ignore[attr-defined]
            screen = await settle_search(pilot)
            assert_clean(app, repr(bad))
            assert "Traceback" not in status(screen)
