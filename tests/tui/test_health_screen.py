"""Pilot tests of the Health screen on the demo: the rows, the repairs through the dialog, the integrity check
with its progress bar and esc to cancel, the read modes, and hostile values drawn as text.

The demo holds four event stores: two healthy, one with a torn tail (a prepared intent, its footer cut halfway)
and one with an intent left appended whose bytes are missing (store/demo/events.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import ProgressBar

from store.demo.model import DEMO_NOW_UNIX
from store.eventstore import EventRecord, append_event_batch, event_store
from store.health.model import OK, HealthCheck
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import create_session
from tests.hostile import OWNER, evil
from tests.tui.appwait import settle
from tests.tui.rendered import UNSAFE, drawn_text, notification_texts, segment_texts
from tui.app import SessionscopeApp
from tui.screens.health import HealthScreen
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.health_list import HealthList

pytestmark = pytest.mark.anyio

SIZE = (140, 40)
DEADLINE_S = 30.0


async def wait_for(pilot: Pilot[object], what: object, label: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not what():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {label}")
        await pilot.pause(0.05)


async def settle_health(pilot: Pilot[object]) -> HealthScreen:
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screens = [s for s in app.screen_stack if isinstance(s, HealthScreen)]
        if screens:
            lst = screens[-1].query_one(HealthList)
            if lst.loaded and not lst.busy and not any(w.is_running for w in app.workers):
                return screens[-1]
        if time.monotonic() > deadline:
            raise AssertionError("the Health screen did not settle")
        await asyncio.sleep(0.02)


async def open_health(pilot: Pilot[object]) -> HealthScreen:
    await settle(pilot)
    await pilot.press("colon")
    await pilot.pause(0.3)
    await pilot.press(*"Health", "enter")
    return await settle_health(pilot)


def rows(screen: HealthScreen) -> dict[str, HealthCheck]:
    return {c.id: c for c in screen.query_one(HealthList).rows}


def event_rows(screen: HealthScreen) -> dict[str, HealthCheck]:
    return {k: v for k, v in rows(screen).items() if k.startswith("events.")}


async def select(pilot: Pilot[object], screen: HealthScreen, check_id: str) -> None:
    lst = screen.query_one(HealthList)
    lst.focus()
    lst.cursor = next(i for i, c in enumerate(lst.rows) if c.id == check_id)
    await pilot.pause()
    assert lst.selected is not None and lst.selected.id == check_id


def roles(screen: HealthScreen) -> tuple[str, str, list[str]]:
    ev = event_rows(screen)
    torn = next(k for k, c in ev.items() if "torn tail" in c.detail)
    missing = next(k for k, c in ev.items() if "bytes are missing" in c.detail)
    healthy = [k for k, c in ev.items() if c.status == OK]
    return torn, missing, healthy


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def table_dump(root: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(f"file:{root / 'sessions.db'}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    finally:
        conn.close()


async def test_rows_name_the_torn_tail_and_the_missing_bytes(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        torn, missing, healthy = roles(screen)
        assert len(healthy) == 2
        r = rows(screen)
        assert r[torn].status == "warn" and r[torn].repair.startswith("reconcile-events ")
        assert "prepared" in r[torn].detail and "1654 bytes" in r[torn].detail
        assert r[missing].status == "warn" and "appended" in r[missing].detail
        assert {"db.quick_check", "schema.version", "leases.active", "deliveries.failed", "reset",
                "space.total"} <= set(r)
        await select(pilot, screen, torn)
        text = drawn_text(app)
        assert "sessionscope repair reconcile-events" in text
        await pilot.press("X")  # a write: blocked in a read mode
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)


async def test_reconcile_mends_the_torn_one_and_blocks_the_missing_one_and_nothing_else(demo_dir: Path) -> None:
    before_files = digest(demo_dir)
    before_rows = table_dump(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        torn, missing, healthy = roles(screen)
        others = {k: v for k, v in rows(screen).items() if k not in (torn, missing)}
        for target in (torn, missing):
            await select(pilot, screen, target)
            await pilot.press("X")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the dialog")
            assert "Reconcile event intents" in drawn_text(app)
            await pilot.press("y")
            await settle_health(pilot)
            assert screen.last_result is not None, screen.last_error
        r = rows(screen)
        assert r[torn].status == "ok" and "1 aborted" in r[torn].detail
        assert r[missing].status == "error" and "recovery_required" in r[missing].detail
        assert r[missing].repair == ""
        for k, v in others.items():
            if k.startswith(("space.", "db.size", "reset", "leases.")):
                continue  # sizes and the lease epochs of the two sessions move
            assert r[k] == v, k
    torn_sid, missing_sid = torn.split(".", 1)[1], missing.split(".", 1)[1]
    after_files = digest(demo_dir)
    changed = {k for k in set(before_files) | set(after_files) if before_files.get(k) != after_files.get(k)}
    assert changed <= {"sessions.db", f"events/{torn_sid}/seg-00000001.jsonl", f"events/{torn_sid}/manifest.json"}
    after_rows = table_dump(demo_dir)
    for table, old in before_rows.items():
        new = after_rows[table]
        if table == "sessionscope_event_intents":
            diff = {r[0]: r[8] for r in new if r not in old}
            assert set(diff.values()) == {"aborted", "recovery_required"} and len(diff) == 2
        elif table == "session_runtime_leases":
            assert {r[0] for r in new if r not in old} == {torn_sid, missing_sid}
        elif table == "sessionscope_event_projection":
            assert [r for r in new if r not in old] == []
        else:
            assert new == old, table


async def test_a_row_without_a_repair_says_why(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        await select(pilot, screen, "deliveries.failed")
        await pilot.press("X")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)
        assert any("No repair fixes deliveries.failed" in n for n in notification_texts(app))


async def test_integrity_check_progress_and_cancel(demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.health as health
    from store.health import IntegrityCancelled

    started = threading.Event()

    def slow(sd, progress=None, cancel=None):
        for i in range(600):
            if cancel is not None and cancel.is_set():
                raise IntegrityCancelled("cancelled")
            if progress is not None:
                progress(min(0.5, i / 100), f"table{i}")
            started.set()
            time.sleep(0.05)
        raise AssertionError("not cancelled")

    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        monkeypatch.setattr(health, "integrity_check", slow)
        await pilot.press("i")
        await wait_for(pilot, started.is_set, "the check to start")
        bar = screen.query_one(ProgressBar)
        await wait_for(pilot, lambda: (bar.progress or 0) > 0, "progress")
        assert bar.has_class("running") and bar.display
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.integrity_running, "the cancel")
        assert isinstance(app.screen, HealthScreen)  # esc cancelled, it did not go back
        assert any("cancelled" in n for n in notification_texts(app))
        assert not bar.has_class("running")
        monkeypatch.undo()
        await pilot.press("i")
        await wait_for(pilot, lambda: rows(screen)["db.integrity_check"].detail.startswith("ok:"), "the real check")
        await pilot.press("escape")  # nothing runs: back
        await pilot.pause()
        assert not isinstance(app.screen, HealthScreen)


async def test_read_only_screen_writes_nothing(demo_dir: Path) -> None:
    before = digest(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        torn, _, _ = roles(screen)
        await select(pilot, screen, torn)
        await pilot.press("X")
        await pilot.press("i")
        await settle_health(pilot)
        await pilot.press("r")
        await settle_health(pilot)
    assert digest(demo_dir) == before


async def test_hostile_values_are_drawn_as_text(demo_dir: Path) -> None:
    bad = "[bold]x[/bold]\x1b]0;t\x07\u202e\ud83d\x9b31m"
    with open_session_dir(demo_dir) as sd:
        sid = create_session(sd, bad)
        append_event_batch(sd, sid, [EventRecord(evil("e"), sid, evil("k"), {"t": evil("p")}, "t")], None)
        with open(event_store(sd, sid).path / "seg-00000001.jsonl", "ab") as fh:
            fh.write(b'{"ba')
        with sd.db.write() as conn:
            conn.execute("INSERT INTO session_runtime_leases (session_id, owner_instance_id, owner_pid, owner_kind, "
                         "lease_token_hash, epoch, run_id, purpose, state, acquired_at, heartbeat_at, expires_at, "
                         "updated_at) VALUES (?, ?, 1, 'process', 'h', 1, '', 'mutation', 'active', 1, 1, 1, 1)",
                         (sid, OWNER))
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        row = next(c for c in rows(screen).values() if c.session_id == sid and c.id.startswith("events."))
        await select(pilot, screen, row.id)
        for text in segment_texts(app):
            assert not UNSAFE.search(text), repr(text)
        assert "[bold]x[/bold]" in drawn_text(app)
        await select(pilot, screen, f"leases.expired.{sid}")
        assert "pid-4242-[/]" in drawn_text(app)
        for text in segment_texts(app):
            assert not UNSAFE.search(text), repr(text)
        await select(pilot, screen, row.id)
        await pilot.press("X")  # refused: the lease expired, the preview is shown in the dialog
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog) or screen.last_error, "the preview")
        for text in segment_texts(app) + notification_texts(app):
            assert not UNSAFE.search(text), repr(text)
        await pilot.press("escape")
        await settle_health(pilot)
        assert app.return_code is None
    assert app._exception is None  # noqa: SLF001


async def test_reset_is_refused_while_leases_are_active(demo_dir: Path) -> None:
    before = digest(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_health(pilot)
        await select(pilot, screen, "reset")
        await pilot.press("X")
        await settle_health(pilot)
        assert not isinstance(app.screen, ConfirmDialog)
        assert "still marked active" in screen.last_error
    assert {k for k in digest(demo_dir)} == set(before)
