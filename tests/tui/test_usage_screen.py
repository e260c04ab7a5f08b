"""Pilot tests of the Usage screen: the demo's request_stats per day / session / model / work dir, bars and the
sparkline, the keys that switch grouping and source, enter opening a transcript (mothx and captured), hostile
values drawn as text, and the read modes writing nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Sparkline

from store.agents import capture as cap
from store.demo.model import DEMO_NOW_UNIX
from store.mothx.cells import bind
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.usage import usage
from tests.tui.appwait import settle
from tests.tui.rendered import assert_clean, drawn_text, notification_texts
from tui.app import SessionscopeApp
from tui.screens.usage import UsageScreen
from tui.widgets.usage_list import UsageList

pytestmark = pytest.mark.anyio

SIZE = (140, 40)
DEADLINE_S = 30.0
HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
           "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d", "pid-4242-[/]", "[bold]x[/bold]",
           "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]
CLAUDE_SID = "0d3c5e2a-1111-4222-8333-444455556666"


@pytest.fixture(autouse=True)
def _no_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("store.usage.prices.prices_path", lambda: tmp_path / "no-prices.toml")


async def settle_usage(pilot: Pilot[object]) -> UsageScreen:
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screens = [s for s in app.screen_stack if isinstance(s, UsageScreen)]
        if screens:
            lst = screens[-1].query_one(UsageList)
            if lst.loaded and not lst.busy and not any(w.is_running for w in app.workers):
                return screens[-1]
        if time.monotonic() > deadline:
            raise AssertionError("the Usage screen did not settle")
        await asyncio.sleep(0.02)


async def open_usage(pilot: Pilot[object]) -> UsageScreen:
    await settle(pilot)
    await pilot.press("colon")
    await pilot.pause(0.3)
    await pilot.press(*"Usage", "enter")
    return await settle_usage(pilot)


async def press(pilot: Pilot[object], *keys: str) -> UsageScreen:
    await pilot.press(*keys)
    return await settle_usage(pilot)


def keys_of(screen: UsageScreen) -> list[str]:
    return [line.row.key for line in screen.query_one(UsageList).rows]


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


async def test_days_bars_sparkline_and_groupings(demo_master: Path) -> None:
    with open_session_dir(demo_master, OpenMode.SNAPSHOT) as sd:
        expected = {by: usage(sd, by, source="mothx") for by in ("day", "session", "model", "cwd")}
    before = digest(demo_master)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_usage(pilot)
        day = expected["day"]
        assert keys_of(screen) == [r.key for r in day.rows] and len(day.rows) > 20
        spark = screen.query_one("#usage-spark", Sparkline)
        first, last = day.rows[0].key, day.rows[-1].key
        from datetime import date

        span = (date.fromisoformat(last) - date.fromisoformat(first)).days + 1
        assert spark.data is not None and len(spark.data) == span and max(spark.data) == max(
            r.total_tokens for r in day.rows)
        text = drawn_text(app)
        assert "Tokens per day (UTC)" in text and f"{first} … {last}" in text
        assert f"{len(day.rows)} days" in text and f"{day.totals.requests:,} requests" in text
        assert "█" * 40 in text  # the largest day's bar fills its column
        for key, by in (("b", "session"), ("b", "model"), ("b", "cwd"), ("b", "day"), ("2", "session"),
                        ("4", "cwd"), ("3", "model"), ("1", "day")):
            screen = await press(pilot, key)
            assert screen.by == by
            assert keys_of(screen) == [r.key for r in expected[by].rows], by
        screen = await press(pilot, "2")
        assert "AGENT" in drawn_text(app) and "WORK DIR" in drawn_text(app)
        assert [s for s in ("all", "mothx", "captured")][0] == screen.source
        screen = await press(pilot, "a")
        assert screen.source == "mothx" and keys_of(screen) == [r.key for r in expected["session"].rows]
        screen = await press(pilot, "a")
        assert screen.source == "captured" and keys_of(screen) == []
        assert "No usage recorded." in drawn_text(app)
        screen = await press(pilot, "a")
        assert screen.source == "all"
        screen = await press(pilot, "r")
        assert keys_of(screen) == [r.key for r in expected["session"].rows]
    assert digest(demo_master) == before


async def test_enter_opens_the_session_and_says_why_not_elsewhere(demo_master: Path) -> None:
    from tui.screens.transcript import TranscriptScreen

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_usage(pilot)
        await pilot.press("enter")  # a day row
        await pilot.pause()
        assert app.screen is screen
        assert any("A day row has no transcript: press b to group by session." in n for n in notification_texts(app))
        screen = await press(pilot, "2")
        top = screen.query_one(UsageList).selected
        assert top is not None and top.row.session_exists
        await pilot.press("enter")
        deadline = time.monotonic() + DEADLINE_S
        while not isinstance(app.screen, TranscriptScreen):
            assert time.monotonic() < deadline, "no transcript opened"
            await pilot.pause(0.05)
        assert app.screen.session_id == top.row.key
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


def claude_transcript(path: Path) -> None:
    usage_ = {"input_tokens": 7, "output_tokens": 70, "cache_creation_input_tokens": 700,
              "cache_read_input_tokens": 7000}
    recs = [
        {"parentUuid": None, "uuid": "00000000-0000-4000-8000-000000000001", "sessionId": CLAUDE_SID,
         "cwd": "/home/demo/src/claude", "type": "user", "timestamp": "2026-11-19T10:00:00Z",
         "message": {"role": "user", "content": "hello"}},
        {"parentUuid": "00000000-0000-4000-8000-000000000001", "uuid": "00000000-0000-4000-8000-000000000002",
         "sessionId": CLAUDE_SID, "cwd": "/home/demo/src/claude", "type": "assistant", "requestId": "req_1",
         "timestamp": "2026-11-19T10:00:01Z",
         "message": {"model": "claude-opus-4-6", "id": "msg_1", "role": "assistant",
                     "content": [{"type": "text", "text": "hi"}], "usage": usage_}},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


async def test_captured_rows_and_their_transcript(demo_dir: Path, tmp_path: Path) -> None:
    from tui.screens.native_transcript import NativeTranscriptScreen

    root = tmp_path / "claude"
    claude_transcript(root / "-home-demo-src-claude" / f"{CLAUDE_SID}.jsonl")
    with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd:
        assert cap.capture_claude_code(sd, root).counts["new"] == 1
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_usage(pilot)
        screen = await press(pilot, "3", "a", "a")
        assert screen.source == "captured" and keys_of(screen) == ["claude-opus-4-6"]
        assert "7,777" in drawn_text(app)  # 7 + 70 + 700 + 7000 tokens
        screen = await press(pilot, "2")
        line = screen.query_one(UsageList).selected
        assert line is not None and (line.row.agent, line.row.key) == ("claude-code", CLAUDE_SID)
        assert "claude" in drawn_text(app) and "/home/demo/src/claude" in drawn_text(app)
        await pilot.press("enter")
        deadline = time.monotonic() + DEADLINE_S
        while not isinstance(app.screen, NativeTranscriptScreen):
            assert time.monotonic() < deadline, "no native transcript opened"
            await pilot.pause(0.05)
        assert app.screen.ref.agent_session_id == CLAUDE_SID


async def test_hostile_values_are_drawn_as_text(demo_dir: Path) -> None:
    with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd, sd.db.write() as conn:
        conn.executemany("INSERT INTO sessions (id, cwd) VALUES (?,?)",
                         [(bind(f"evil-{h}"), bind(h)) for h in HOSTILE])
        conn.executemany(
            "INSERT INTO request_stats (timestamp, session_id, provider, model, input_tokens, output_tokens, "
            "total_tokens) VALUES (?,?,?,?,?,?,?)",
            [("2026-11-20T08:00:00Z", bind(f"evil-{h}"), bind(h), bind(h), 10**9, "abc", 0) for h in HOSTILE]
            + [("2026-11-20T08:00:00Z", "deleted-session", "p", "m", 1, 1, 2), (b"\xff", None, "p", "m", 1, 1, 2)])
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_usage(pilot)
        assert_clean(app, "by day")
        for key, by in (("2", "session"), ("3", "model"), ("4", "cwd")):
            screen = await press(pilot, key)
            lst = screen.query_one(UsageList)
            seen: set[str] = set()
            for index, line in enumerate(lst.rows):
                if line.row.key in HOSTILE or line.row.key.startswith("evil-") or not line.row.key:
                    lst.cursor = index
                    await pilot.pause()
                    text = assert_clean(app, f"{by} {line.row.key!r}")
                    for literal in ("pid-4242-[/]", "[bold]x[/bold]", "[@click=app.quit]x[/]"):
                        if literal in line.row.key:
                            assert literal in text, (by, literal)  # drawn literally (the detail shows it whole)
                            seen.add(literal)
            assert len(seen) == 3, (by, seen)
        screen = await press(pilot, "2")
        lst = screen.query_one(UsageList)
        lst.cursor = next(i for i, line in enumerate(lst.rows) if line.row.key == "deleted-session")
        await pilot.pause()
        assert "session deleted" in drawn_text(app)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        assert any("This session was deleted" in n for n in notification_texts(app))
        await pilot.press("y")
        await pilot.pause()
        assert_clean(app, "after copy")
        assert app.is_running  # [@click=app.quit] did not quit


async def test_copy_says_what_it_copied(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_usage(pilot)
        first = keys_of(screen)[0]
        await pilot.press("y")
        await pilot.pause()
        assert any(f"Copied '{first}' to the" in n for n in notification_texts(app))


async def test_a_price_table_adds_cost(demo_master: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('"claude-sonnet-4-5" = { input = 3.0, output = 15.0 }\n"bad" = 1\n')
    monkeypatch.setattr("store.usage.prices.prices_path", lambda: prices)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_usage(pilot)
        await press(pilot, "3")
        text = drawn_text(app)
        assert "COST" in text and "$" in text
        assert any("bad is not a table" in n for n in notification_texts(app))
        top = screen.query_one(UsageList).rows[0].row
        assert top.key == "claude-sonnet-4-5" and top.cost is not None and top.cost > 0
        assert top.cost == pytest.approx((top.input_tokens * 3 + top.output_tokens * 15) / 1e6)
