"""Pilot tests of the Deliveries screen on the demo: groups, chains, countdowns, the retry key (refusals in one
line, a retry through the dialog), enter, the read modes, live refresh from a worker process, hostile strings."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.rendered import assert_clean, drawn_text
from tests.tui.runswait import db_rows, wait_for
from tui.app import SessionscopeApp
from tui.screens.deliveries import DeliveriesScreen
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.delivery_list import DeliveryFacts, DeliveryList, chain_text, wait_text

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe", "\ud83d",
           "pid-4242-[/]", "[bold]x[/bold]", "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]"]


async def settle_deliveries(pilot: Pilot[object], deadline_s: float = 20.0) -> None:
    app = pilot.app
    deadline = time.monotonic() + deadline_s
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screens = [s for s in app.screen_stack if isinstance(s, DeliveriesScreen)]
        if screens:
            lst = screens[-1].query_one(DeliveryList)
            if lst.loaded and not lst.busy and not any(w.is_running for w in app.workers):
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"the Deliveries screen did not settle: {app.screen_stack!r}")
        await asyncio.sleep(0.02)


async def open_deliveries(pilot: Pilot[object]) -> DeliveriesScreen:
    await settle(pilot)
    await pilot.press("colon")
    await pilot.pause(0.3)
    await pilot.press(*"Deliveries", "enter")
    await settle_deliveries(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, DeliveriesScreen), "':' jump → Deliveries opens the Deliveries screen"
    return screen


def index_of(lst: DeliveryList, *, status: str, code: str) -> int:
    for i, row in enumerate(lst.rows):
        if row.failure.status == status and row.failure.failure_code == code:
            return i
    raise AssertionError(f"no {status}/{code} row")


def status_of(lst: DeliveryList, op_id: str) -> str:
    row = lst.row_of(op_id)
    return row.failure.status if row is not None else ""


def operations(path: Path) -> dict[str, tuple[str, str]]:
    return {op_id: (status, code) for op_id, status, code in
            db_rows(path, "SELECT id, status, failure_code FROM delivery_operations")}


async def test_failures_are_grouped_with_chains_and_countdowns(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_deliveries(pilot)
        lst = screen.query_one(DeliveryList)
        rows = [r.failure for r in lst.rows]
        statuses = {f.status for f in rows}
        assert {"failed", "uncertain", "retry_wait"} <= statuses
        assert {f.label for f in rows} >= {"transient", "permanent", "dependency", "uncertain"}
        groups = [(f.platform, f.target_id) for f in rows]
        assert groups == sorted(groups), "grouped by platform and target"
        starts = [r.group_start for r in lst.rows]
        assert starts == [n == 0 or groups[n] != groups[n - 1] for n in range(len(groups))]
        # a chain: the failed upload, then its dependent send, drawn as a chain
        up = lst.rows[index_of(lst, status="failed", code="transport_error")].failure
        assert [link.operation_kind for link in up.chain] == ["upload_file", "send_file"]
        assert chain_text(up) == "[upload_file ✗] → send_file ✗" and up.retryable
        waiting = lst.rows[index_of(lst, status="retry_wait", code="transport_error")].failure
        assert wait_text(waiting, DEMO_NOW_UNIX * 1000) == "in 4 s"
        text = drawn_text(app)
        assert "PLATFORM · TARGET" in text and "[upload_file ✗] → send_file ✗" in text and "in 4 s" in text
        assert "permanent · bot_not" in text
        from tui.widgets.statusbar import StatusBar

        status = screen.query_one("#status", StatusBar)
        assert "failed" in status.count and "uncertain" in status.count and "retryable" in status.count
        lst.cursor = index_of(lst, status="failed", code="transport_error")
        await settle_deliveries(pilot)
        facts = "\n".join(line.plain for line in screen.query_one(DeliveryFacts).render().split())
        assert up.operation_id in facts and "X retries it" in facts and "reopens 1 operation" in facts
        assert_clean(app, "the Deliveries screen")


@pytest.mark.parametrize(("status", "code", "reason"), [
    ("uncertain", "provider_outcome_unknown", "never re-sent blindly"),
    ("failed", "bot_not_in_chat", "failed permanently"),
    ("failed", "dependency_failed", "depends on"),
    ("retry_wait", "transport_error", "nothing to retry"),
])
async def test_retry_where_not_retryable_says_why_in_one_line(demo_dir: Path, status: str, code: str,
                                                              reason: str) -> None:
    before = operations(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_deliveries(pilot)
        lst = screen.query_one(DeliveryList)
        lst.cursor = index_of(lst, status=status, code=code)
        await settle_deliveries(pilot)
        await pilot.press("X")
        await settle_deliveries(pilot)
        assert not isinstance(app.screen, ConfirmDialog)
        assert reason in screen.last_error and "\n" not in screen.last_error, screen.last_error
        assert any(reason in n.message for n in app._notifications)
    assert operations(demo_dir) == before


async def test_retry_through_the_dialog_reopens_the_chain(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_deliveries(pilot)
        lst = screen.query_one(DeliveryList)
        lst.cursor = index_of(lst, status="failed", code="delivery_retries_exhausted")
        await settle_deliveries(pilot)
        target = lst.selected
        assert target is not None
        chain = [link.operation_id for link in target.failure.chain]
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the retry dialog")
        await pilot.press("X")  # the key that opened it never confirms
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle_deliveries(pilot)
        assert screen.last_result is not None, screen.last_error
        ops = operations(demo_dir)
        assert all(ops[op] == ("retry_wait", "") for op in chain)
        # the retried operations stay on screen (followed by id) and read retry_wait, marked as changed
        await wait_for(pilot, lambda: status_of(lst, target.operation_id) == "retry_wait", "the retried row")
        assert all(lst.row_of(op) is not None for op in chain)


async def test_cancel_changes_nothing_and_read_modes_block_the_key(demo_dir: Path, demo_master: Path) -> None:
    before = operations(demo_dir)
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_deliveries(pilot)
        lst = screen.query_one(DeliveryList)
        lst.cursor = index_of(lst, status="failed", code="transport_error")
        await settle_deliveries(pilot)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the retry dialog")
        await pilot.press("escape")
        await settle_deliveries(pilot)
    assert operations(demo_dir) == before
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_deliveries(pilot)
        assert screen.check_action("retry_delivery", ()) is None  # dimmed and blocked
        lst = screen.query_one(DeliveryList)
        lst.cursor = index_of(lst, status="failed", code="transport_error")
        await settle_deliveries(pilot)
        await pilot.press("X")
        await settle_deliveries(pilot)
        assert not isinstance(app.screen, ConfirmDialog) and screen.last_result is None


async def test_enter_opens_the_sessions_transcript_and_a_toggles_scope(demo_master: Path) -> None:
    from tui.screens.transcript import TranscriptScreen

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_deliveries(pilot)
        lst = screen.query_one(DeliveryList)
        lst.cursor = index_of(lst, status="uncertain", code="provider_outcome_unknown")
        await settle_deliveries(pilot)
        session = lst.selected.session_id if lst.selected else ""
        total = len(lst.rows)
        await pilot.press("a")
        await settle_deliveries(pilot)
        assert {r.session_id for r in lst.rows} == {session} and len(lst.rows) < total
        await pilot.press("a")
        await settle_deliveries(pilot)
        assert len(lst.rows) == total
        lst.cursor = index_of(lst, status="uncertain", code="provider_outcome_unknown")
        await settle_deliveries(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen), "the transcript")
        assert isinstance(app.screen, TranscriptScreen) and app.screen.session_id == session


async def test_a_worker_process_delivers_a_retried_operation_on_screen(demo_dir: Path) -> None:
    """The 'done when' of the issue: retry a transient failure while a worker runs; the row reads delivered."""
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, live=True)
    worker = subprocess.Popen(
        [sys.executable, "-m", "store.mothx.delivery_worker", "--dir", str(demo_dir), "--poll", "0.1",
         "--call-seconds", "0.05", "--max-seconds", "60"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_deliveries(pilot)
            lst = screen.query_one(DeliveryList)
            lst.cursor = index_of(lst, status="failed", code="transport_error")
            await settle_deliveries(pilot)
            target = lst.selected
            assert target is not None
            dependent = target.failure.dependents[0].operation_id
            await pilot.press("X")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the retry dialog")
            await pilot.press("y")
            await wait_for(pilot, lambda: status_of(lst, dependent) == "delivered",
                           "the worker's delivery to show", deadline_s=40)
            assert status_of(lst, target.operation_id) == "uploaded"
    finally:
        worker.kill()
        worker.wait(10)
    assert operations(demo_dir)[dependent] == ("delivered", "")


async def test_hostile_strings_are_drawn_safely(tmp_path: Path) -> None:
    from store.mothx.delivery_store import NewIntent, NewOperation, claim, create_plan, update_result
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.simulator import create_session
    from store.times import format_rfc3339

    root = tmp_path / "sessions"
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        for n, value in enumerate(HOSTILE):
            sid = create_session(sd)
            ts = format_rfc3339()
            with sd.db.write() as conn:
                conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                             "VALUES (?, ?, 'completed', ?, ?)", (f"run-{n}", sid, ts, ts))
            ops = [NewOperation("a", value, 1, id=f"op-{n}-{value}"), NewOperation("b", "send_file", 2, "a",
                                                                                  id=f"op-{n}-b")]
            create_plan(sd, NewIntent(sid, f"run-{n}", value, value, id=f"intent-{n}"), ops)
            op = claim(sd, ops[0].id, "w")
            update_result(sd, ops[0].id, "w", op.lease_epoch, "failed", failure_code=value)
    app = SessionscopeApp(root, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_deliveries(pilot)
        lst = screen.query_one(DeliveryList)
        assert len(lst.rows) == 2 * len(HOSTILE)
        text = assert_clean(app, "hostile deliveries")
        assert "[bold]x[/bold]" in text and "pid-4242-[/]" in text
        for i in range(len(lst.rows)):
            lst.cursor = i
            await settle_deliveries(pilot)
            await pilot.press("X")
            await settle_deliveries(pilot)
            assert_clean(app, f"hostile deliveries, row {i}")
        assert app.is_running
