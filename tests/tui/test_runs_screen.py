"""Pilot tests of the Runs screen on the demo: rows, countdowns, filters, and repairs through the dialog.

The demo holds an orphaned run (its execution lease expired at 09:00:17 on the demo day, with an open turn and a
pending approval), a run under a live lease (valid until 2100), and a run whose recovery failed twice. Tests
that write use a private copy (``demo_dir``); the app's clock is fixed at the demo's "now" unless a test moves it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.demo.model import DEMO_NOW_UNIX, LIVE_LEASE_EXPIRES_AT
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import db_rows, settle_runs, wait_for
from tui.app import SessionscopeApp
from tui.screens.runs import RunsScreen, ToolPickDialog
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.row_list import GAP, GUTTER, Page, fit
from tui.widgets.run_list import RunList, RunRow, duration_text, expiry_text, holder_cell, holder_text, recovery_text
from tui.widgets.run_timeline import RunFacts, RunTimeline

pytestmark = pytest.mark.anyio

SIZE = (120, 36)


def demo_runs(path: Path) -> dict[str, str]:
    """The demo's three active runs by role, found from the data (not from hard-coded ids)."""
    rows = db_rows(path, """
        SELECT r.id, r.session_id, l.state, l.expires_at, COALESCE(rec.state, '')
        FROM session_runs r JOIN session_runtime_leases l ON l.session_id = r.session_id
        LEFT JOIN session_run_recoveries rec ON rec.run_id = r.id
        WHERE r.status NOT IN ('completed','incomplete','expired','failed','cancelled','canceled','timed_out')""")
    found: dict[str, str] = {}
    for run_id, session_id, state, expires_at, rec_state in rows:
        if rec_state == "failed":
            found["failed"] = run_id
        elif state == "active" and expires_at > DEMO_NOW_UNIX:
            found["live"] = run_id
        elif state == "active":
            found["orphan"] = run_id
        found[run_id] = session_id
    assert {"failed", "live", "orphan"} <= found.keys(), rows
    return found


def row_index(lst: RunList, run_id: str) -> int:
    for i, row in enumerate(lst.rows):
        if row.run_id == run_id:
            return i
    raise AssertionError(f"{run_id} is not in the list")


def notices(app: SessionscopeApp) -> list[str]:
    return [n.message for n in app._notifications]


async def open_runs(pilot, **kw: object) -> RunsScreen:  # type: ignore[no-untyped-def]
    await settle(pilot)
    screen = RunsScreen(**kw)  # type: ignore[arg-type]
    await pilot.app.push_screen(screen)
    await settle_runs(pilot)
    return screen


async def select(pilot, screen: RunsScreen, run_id: str) -> None:  # type: ignore[no-untyped-def]
    lst = screen.query_one(RunList)
    lst.focus()
    lst.cursor = row_index(lst, run_id)
    await settle_runs(pilot)
    assert lst.selected is not None and lst.selected.run_id == run_id


# --- what the screen shows ----------------------------------------------------------------------------------------


async def test_active_runs_come_first_with_lease_state_and_recovery(demo_master: Path) -> None:
    ids = demo_runs(demo_master)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("colon")
        await pilot.pause(0.3)
        await pilot.press(*"Runs", "enter")
        await settle_runs(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen), "':' jump → Runs opens the Runs screen"
        lst = screen.query_one(RunList)
        first = lst.rows[:3]
        assert {r.run_id for r in first} == {ids["orphan"], ids["live"], ids["failed"]}, "active runs first"
        assert all(not r.listing.run.active for r in lst.rows[3:])
        by_id = {r.run_id: r for r in first}
        orphan, live, failed = by_id[ids["orphan"]], by_id[ids["live"]], by_id[ids["failed"]]
        assert orphan.listing.state == "orphaned"
        assert live.listing.state == "external"
        assert failed.listing.state == "recovery_failed"
        # the countdown follows the app's clock: the demo's orphaned lease expired 2 h 59 min before "now"
        assert expiry_text(orphan.listing.lease, DEMO_NOW_UNIX) == "expired 2 h ago"
        assert expiry_text(live.listing.lease, DEMO_NOW_UNIX) == "until 2100-01-01"
        assert recovery_text(failed.listing.recovery, DEMO_NOW_UNIX) == "failed #2 due"
        text = "\n".join(lst.render_line(y).text for y in range(0, 5))
        assert "expired 2 h ago" in text and "until 2100-01-01" in text and "orphaned" in text
        assert "failed #2 due" in text and f"pid-{live.listing.lease.owner_pid}" in text
        assert screen.query_one("#status").count.startswith("3 active · 2 orphaned · ")
        # the detail pane shows the selected run's facts and its event timeline
        await select(pilot, screen, ids["orphan"])
        facts = "\n".join(line.plain for line in screen.query_one(RunFacts).render().split())
        assert ids["orphan"] in facts and "orphaned" in facts and "action recover_orphan" in facts
        assert "epoch 3" in facts and "no recovery record" in facts
        timeline = screen.query_one(RunTimeline)
        assert timeline.run_id == ids["orphan"] and timeline.events
        assert [e.seq for e in timeline.events] == sorted(e.seq for e in timeline.events)
        assert any(e.event_type == "approval_resolved" and e.status == "pending" for e in timeline.events)


async def test_orphaned_only_filter_and_session_scope(demo_master: Path) -> None:
    ids = demo_runs(demo_master)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        lst = screen.query_one(RunList)
        everything = len(lst.rows)
        await pilot.press("o")
        await settle_runs(pilot)
        assert {r.run_id for r in lst.rows} == {ids["orphan"], ids["failed"]}
        assert "orphaned only" in screen.query_one("#status").query_text
        await pilot.press("o")
        await settle_runs(pilot)
        assert len(lst.rows) == everything
        await select(pilot, screen, ids["orphan"])
        await pilot.press("a")  # only this run's session
        await settle_runs(pilot)
        session = ids[ids["orphan"]]
        assert lst.rows and {r.session_id for r in lst.rows} == {session}
        assert lst.selected is not None and lst.selected.run_id == ids["orphan"], "the cursor stays on the run"
        await pilot.press("a")
        await settle_runs(pilot)
        assert len(lst.rows) == everything


async def test_R_on_sessions_opens_that_sessions_runs(demo_master: Path) -> None:
    ids = demo_runs(demo_master)
    session = ids[ids["live"]]
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        from tui.widgets.session_list import SessionList

        session_list = app.screen.query_one(SessionList)
        session_list.cursor = next(i for i, r in enumerate(session_list.visible_rows()) if r.id == session)
        await pilot.press("R")
        await settle_runs(pilot)
        assert isinstance(app.screen, RunsScreen) and app.screen.scope.session_id == session
        lst = app.screen.query_one(RunList)
        assert lst.rows[0].run_id == ids["live"] and {r.session_id for r in lst.rows} == {session}
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "SessionsScreen"


async def test_countdown_ticks_on_the_clock_without_reading(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.mothx.run_listing

    now = [LIVE_LEASE_EXPIRES_AT - 9.0]
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: now[0])
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        lst = screen.query_one(RunList)
        ids = demo_runs(demo_master)
        index = row_index(lst, ids["live"])
        assert "expires in 9 s" in lst.render_line(index + 1).text
        reads: list[object] = []
        real = store.mothx.run_listing.list_runs  # every read of the Runs list goes through it
        monkeypatch.setattr(store.mothx.run_listing, "list_runs", lambda *a, **k: reads.append(a) or real(*a, **k))
        now[0] += 5
        await wait_for(pilot, lambda: "expires in 4 s" in lst.render_line(index + 1).text, "the countdown to tick")
        now[0] += 5
        await wait_for(pilot, lambda: "expired 1 s ago" in lst.render_line(index + 1).text, "the lease to show expired")
        assert reads == [], "a countdown tick repaints only; it never reads the database"
        assert lst.rows[index].listing.state == "external", "the state changes only with a re-read"


def test_cell_texts() -> None:
    # store.times.duration: seconds up to two minutes, minutes up to two hours, hours up to two days
    assert [duration_text(s) for s in (0, 9, 61, 130, 3 * 3600 + 5, 2 * 86400, 800 * 86400)] == [
        "0 s", "9 s", "61 s", "2 min", "3 h", "2 d", "2 y"]
    cols = RunList().columns
    widths = fit(cols, 118 - GUTTER)
    assert [c.key for c, w in zip(cols, widths, strict=True) if w is not None] == [
        "session", "run", "status", "state", "holder", "expiry", "recovery"], "a 120-cell terminal drops EP only"
    kept = [w for w in widths if w is not None]
    assert sum(kept) + GAP * (len(kept) - 1) == 118 - GUTTER, "every cell is used"
    narrow = [c.key for c, w in zip(cols, fit(cols, 70 - GUTTER), strict=True) if w is not None]
    assert narrow[:3] == ["session", "run", "status"], "narrow terminals keep session, run and status"
    assert holder_text(None) == "" and holder_cell(None) == ""


# --- repairs -------------------------------------------------------------------------------------------------------


async def test_recover_the_orphan_through_the_dialog(demo_dir: Path) -> None:
    ids = demo_runs(demo_dir)
    run_id, session = ids["orphan"], ids[ids["orphan"]]
    (epoch_before,) = db_rows(demo_dir, "SELECT epoch FROM session_runtime_leases WHERE session_id = ?", (session,))[0]
    open_turns = db_rows(demo_dir, "SELECT id FROM conversation_turns WHERE session_id = ? AND status = 'open'",
                         (session,))
    assert len(open_turns) == 1
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        await select(pilot, screen, run_id)
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        dialog = app.screen
        assert app.focused is not None and app.focused.id == "confirm-cancel", "Cancel has the focus"
        preview = dialog.request.preview
        assert preview.startswith(f"Recover an orphaned run: run {run_id}")
        assert f"recovery_{run_id}_failed" in preview and "turn_end" in preview
        await pilot.press("X")  # the opening key does not confirm
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        assert db_rows(demo_dir, "SELECT status FROM session_runs WHERE id = ?", (run_id,)) == [("running",)]
        await pilot.press("y")
        await settle_runs(pilot)
        assert screen.last_error == "" and screen.last_result is not None
        assert any("recovered" in n for n in notices(app))
        # the screen shows what it read back
        lst = screen.query_one(RunList)
        row = lst.rows[row_index(lst, run_id)]
        assert row.listing.run.status == "failed" and row.listing.recovery is not None
        assert row.listing.recovery.state == "completed"

    # the rows the reference's recovery writes (11.2)
    status, error, finished = db_rows(demo_dir, "SELECT status, error, finished_at FROM session_runs WHERE id = ?",
                                      (run_id,))[0]
    assert status == "failed" and error == "execution owner lease expired while run was active" and finished
    event = db_rows(demo_dir, "SELECT event_type, source, status, data FROM session_run_events WHERE id = ?",
                    (f"recovery_{run_id}_failed",))
    assert len(event) == 1
    etype, source, estatus, data = event[0]
    assert (etype, source, estatus) == ("recovered", "agentruntime", "failed")
    assert json.loads(data) == {"reason": "execution owner lease expired while run was active", "code": "owner_lost"}
    decisions = db_rows(demo_dir, "SELECT id, status, data FROM session_run_events WHERE run_id = ? "
                                  "AND id LIKE 'recovery_decision_%'", (run_id,))
    assert len(decisions) == 1 and decisions[0][1] == "cancelled"
    assert json.loads(decisions[0][2])["value"] == "deny_once"
    assert decisions[0][0] == f"recovery_decision_{run_id}_{json.loads(decisions[0][2])['decisionId']}"
    rec = db_rows(demo_dir, "SELECT state, attempt, previous_lease_epoch, trigger_source, reason_code, completed_at "
                            "FROM session_run_recoveries WHERE run_id = ?", (run_id,))
    assert rec == [("completed", 1, epoch_before, "operator", "owner_lost", rec[0][5])] and rec[0][5] is not None
    turn_status, end_seq = db_rows(demo_dir, "SELECT status, end_seq FROM conversation_turns WHERE id = ?",
                                   (open_turns[0][0],))[0]
    assert turn_status == "failed" and end_seq is not None
    entry_type, entry_data = db_rows(demo_dir, "SELECT type, data FROM entries WHERE seq = ?", (end_seq,))[0]
    assert entry_type == "turn_end" and json.loads(entry_data)["turnId"] == open_turns[0][0]
    lease = db_rows(demo_dir, "SELECT epoch, state, purpose FROM session_runtime_leases WHERE session_id = ?",
                    (session,))
    assert lease == [(epoch_before + 1, "released", "recovery")], "a recovery lease took over (epoch + 1), released"


async def test_a_run_under_a_live_lease_is_refused_naming_the_holder(demo_dir: Path) -> None:
    ids = demo_runs(demo_dir)
    run_id, session = ids["live"], ids[ids["live"]]
    owner, pid = db_rows(demo_dir, "SELECT owner_instance_id, owner_pid FROM session_runtime_leases "
                                   "WHERE session_id = ?", (session,))[0]
    events_before = db_rows(demo_dir, "SELECT count(*) FROM session_run_events WHERE session_id = ?", (session,))
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        await select(pilot, screen, run_id)
        for key in ("X", "L", "T"):
            await pilot.press(key)
            await settle_runs(pilot)
            assert not isinstance(app.screen, (ConfirmDialog, ToolPickDialog)), f"{key}: no dialog for a refusal"
            if key != "T":
                assert owner in screen.last_error and f"pid {pid}" in screen.last_error, screen.last_error
        assert any(owner in n for n in notices(app))
        assert db_rows(demo_dir, "SELECT status FROM session_runs WHERE id = ?", (run_id,)) == [("running",)]
    after = db_rows(demo_dir, "SELECT epoch, state, owner_instance_id FROM session_runtime_leases WHERE session_id = ?",
                    (session,))
    assert after[0][2] == owner and after[0][1] == "active", "the holder keeps its lease"
    events_after = db_rows(demo_dir, "SELECT count(*) FROM session_run_events WHERE session_id = ?", (session,))
    assert events_after == events_before
    assert db_rows(demo_dir, "SELECT count(*) FROM session_run_recoveries WHERE run_id = ?", (run_id,)) == [(0,)]


async def test_abandon_picked_tool_calls_and_release_an_expired_lease(demo_dir: Path) -> None:
    import sqlite3

    ids = demo_runs(demo_dir)
    run_id, session = ids["orphan"], ids[ids["orphan"]]
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        await select(pilot, screen, run_id)
        await pilot.press("T")
        await settle_runs(pilot)
        assert "active run" in screen.last_error or "no interrupted" in " ".join(notices(app))
        # recover first: the session becomes idle
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the recovery dialog")
        await pilot.press("y")
        await settle_runs(pilot)
        assert screen.last_result is not None
        # a foreign writer leaves two interrupted tool records in the closed turn
        turn = db_rows(demo_dir, "SELECT id FROM conversation_turns WHERE session_id = ? ORDER BY start_seq DESC "
                                 "LIMIT 1", (session,))[0][0]
        conn = sqlite3.connect(demo_dir / "sessions.db")
        with conn:
            for call in ("call_a", "call_b"):
                conn.execute(
                    "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                    "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
                    "VALUES (?, ?, ?, 'p', 'a', ?, 'function', 'shell', 'h', 'running', 1, '2026-11-20T09:00:00Z')",
                    (session, turn, f"{turn}:{call}", call))
        conn.close()
        await pilot.press("T")
        await wait_for(pilot, lambda: isinstance(app.screen, ToolPickDialog), "the tool picker")
        picker = app.screen
        from textual.widgets import SelectionList

        pick = picker.query_one("#pick-list", SelectionList)
        assert sorted(pick.selected) == ["call_a", "call_b"], "every interrupted call is chosen at first"
        pick.highlighted = 1
        await pilot.press("space")  # keep call_b out
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the abandon dialog")
        assert "call_a" in app.screen.request.preview and "call_b" not in app.screen.request.preview.split("note")[0]
        await pilot.press("y")
        await settle_runs(pilot)
        assert screen.last_result is not None, screen.last_error
        states = dict(db_rows(demo_dir, "SELECT provider_call_id, execution_state FROM tool_execution_records "
                                        "WHERE session_id = ? AND provider_call_id IN ('call_a','call_b')", (session,)))
        assert states == {"call_a": "abandoned", "call_b": "running"}
        # the abandon took over and released a mutation lease; a foreign writer now leaves the idle session's
        # lease marked active but expired: release it
        conn = sqlite3.connect(demo_dir / "sessions.db")
        with conn:
            conn.execute("UPDATE session_runtime_leases SET state = 'active', expires_at = ? WHERE session_id = ?",
                         (DEMO_NOW_UNIX - 60, session))
        conn.close()
        (epoch,) = db_rows(demo_dir, "SELECT epoch FROM session_runtime_leases WHERE session_id = ?", (session,))[0]
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the release dialog")
        await pilot.press("escape")  # cancel changes nothing
        await settle_runs(pilot)
        assert db_rows(demo_dir, "SELECT epoch, state FROM session_runtime_leases WHERE session_id = ?",
                       (session,)) == [(epoch, "active")]
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the release dialog")
        await pilot.press("y")
        await settle_runs(pilot)
        assert screen.last_result is not None, screen.last_error
    assert db_rows(demo_dir, "SELECT epoch, state, purpose FROM session_runtime_leases WHERE session_id = ?",
                   (session,)) == [(epoch + 1, "released", "mutation")]


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT])
async def test_read_modes_dim_and_block_every_repair(demo_dir: Path, mode: OpenMode) -> None:
    ids = demo_runs(demo_dir)
    before = (demo_dir / "sessions.db").read_bytes()
    app = SessionscopeApp(demo_dir, mode, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        await select(pilot, screen, ids["orphan"])
        for key in ("X", "T", "L"):
            assert screen.active_bindings[key].enabled is False, f"{key} is dimmed and blocked"
            await pilot.press(key)
            await settle_runs(pilot)
            assert not isinstance(app.screen, (ConfirmDialog, ToolPickDialog))
        assert screen.last_result is None and screen.last_error == ""
        from tui.widgets.keybar import KeyBar

        bar = screen.query_one(KeyBar).render()
        start = bar.plain.index("Recover")
        assert any(s.start <= start < s.end and getattr(s.style, "dim", False) for s in bar.spans)
    assert (demo_dir / "sessions.db").read_bytes() == before, "nothing was written"


def test_run_row_facts_ignore_heartbeats() -> None:
    from dataclasses import replace

    from store.mothx.leases import LeaseSnapshot
    from store.mothx.runs import Run, RunListing

    run = Run("r1", "s1", "", "", 1, "", "", "", "", "running", "t", "t", None, "")
    lease = LeaseSnapshot("s1", "pid-1-a", 1, "process", "h", 3, "r1", "execution", "active", 0, 10, 25, 10, 20)
    row = RunRow(RunListing(run, lease, None, None))
    renewed = RunRow(RunListing(run, replace(lease, heartbeat_at=13, expires_at=28, updated_at=13), None, None))
    taken = RunRow(RunListing(run, replace(lease, epoch=4, owner_instance_id="pid-2-b"), None, None))
    assert row.facts() == renewed.facts(), "a heartbeat is not a change to mark"
    assert row.facts() != taken.facts()


# --- the operator's story, against a real runtime process ---------------------------------------------------------


class Simulator:
    """``python -m store.mothx.simulator`` as its own OS process; its JSON lines are collected on a thread."""

    def __init__(self, folder: Path, session_id: str, *, ttl: int) -> None:
        import os
        import subprocess
        import sys
        import threading

        repo = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "store.mothx.simulator", "--dir", str(folder), "--session", session_id, "--create",
             "--ttl", str(ttl), "--heartbeat", "0.4", "--steps", "100000", "--append-interval", "0.3"],
            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": str(repo)},
        )
        self.events: list[dict[str, object]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.events.append({"event": "text", "line": line})

    def first(self, name: str) -> dict[str, object] | None:
        return next((e for e in self.events if e.get("event") == name), None)

    def kill(self) -> None:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


async def test_operator_story_kill_the_runtime_then_recover(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    from store.mothx.sessiondir import open_session_dir

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(s.getsockname()[1]))
    folder = tmp_path / "sessions"
    folder.mkdir()
    open_session_dir(folder, OpenMode.READ_WRITE, create=True).close()
    session = "5e55101100000001"
    ttl = 2
    sim = Simulator(folder, session, ttl=ttl)
    try:
        deadline = time.monotonic() + 30
        while sim.first("run_created") is None:
            assert sim.proc.poll() is None and time.monotonic() < deadline, sim.events
            time.sleep(0.05)
        created = sim.first("run_created")
        run_id, pid = str(created["run"]), int(created["pid"])  # type: ignore[index]
        app = SessionscopeApp(folder, OpenMode.READ_WRITE, live=True)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_runs(pilot)
            lst = screen.query_one(RunList)
            await wait_for(pilot, lambda: lst.row_of(run_id) is not None
                           and lst.row_of(run_id).listing.state == "external", "the live run, owned by the simulator")
            await select(pilot, screen, run_id)
            # while the runtime lives, recovery is refused and the holder is named
            await pilot.press("X")
            await settle_runs(pilot)
            assert not isinstance(app.screen, ConfirmDialog)
            assert f"pid-{pid}-" in screen.last_error and f"pid {pid}" in screen.last_error, screen.last_error
            assert db_rows(folder, "SELECT count(*) FROM session_run_recoveries") == [(0,)]
            (epoch,) = db_rows(folder, "SELECT epoch FROM session_runtime_leases WHERE session_id = ?", (session,))[0]
            # kill -9 mid-run: nothing is announced, the lease just stops being renewed
            sim.kill()
            killed = time.monotonic()
            await wait_for(pilot, lambda: lst.row_of(run_id).listing.state == "orphaned",
                           "the run to turn orphaned", deadline_s=ttl + 10)
            assert time.monotonic() - killed < ttl + 10
            await select(pilot, screen, run_id)
            await pilot.press("X")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the recovery dialog")
            await pilot.press("y")
            await settle_runs(pilot)
            assert screen.last_result is not None, screen.last_error
            await wait_for(pilot, lambda: lst.row_of(run_id).listing.run.status == "failed", "the run to read failed")
    finally:
        sim.kill()

    # the same rows the runtime's own recovery writes (reference 11.2)
    assert db_rows(folder, "SELECT status, error FROM session_runs WHERE id = ?", (run_id,)) == [
        ("failed", "execution owner lease expired while run was active")]
    assert db_rows(folder, "SELECT event_type, source, status FROM session_run_events WHERE id = ?",
                   (f"recovery_{run_id}_failed",)) == [("recovered", "agentruntime", "failed")]
    assert db_rows(folder, "SELECT state, attempt, previous_lease_epoch, reason_code FROM session_run_recoveries "
                           "WHERE run_id = ?", (run_id,)) == [("completed", 1, epoch, "owner_lost")]
    turns = db_rows(folder, "SELECT status, end_seq FROM conversation_turns WHERE session_id = ?", (session,))
    assert len(turns) == 1 and turns[0][0] == "failed"
    assert db_rows(folder, "SELECT type FROM entries WHERE seq = ?", (turns[0][1],)) == [("turn_end",)]
    assert db_rows(folder, "SELECT epoch, state, purpose FROM session_runtime_leases WHERE session_id = ?",
                   (session,)) == [(epoch + 1, "released", "recovery")]
    last: dict[str, str] = {}
    for status, data in db_rows(folder, "SELECT status, data FROM session_run_events WHERE run_id = ? "
                                        "AND event_type = 'approval_resolved' ORDER BY seq", (run_id,)):
        last[json.loads(data)["decisionId"]] = status
    assert "pending" not in last.values(), "an approval pending at the kill was cancelled by the recovery"


# --- keys ------------------------------------------------------------------------------------------------------------


def test_every_runs_binding_has_an_id_a_tooltip_and_repairs_never_confirm() -> None:
    from tui import actions
    from tui.screens.runs import WRITE_ACTIONS
    from tui.widgets.confirm import confirm_keys

    for owner in (RunsScreen, RunList, RunTimeline, ToolPickDialog):
        for binding in owner.BINDINGS:
            assert binding.id and binding.tooltip, f"{owner.__name__}: {binding.key}"
    repairs = [spec for spec in actions.in_scope("runs") if spec.writes]
    assert {spec.action for spec in repairs} == set(WRITE_ACTIONS) == {"recover_run", "abandon_tools", "release_lease"}
    for spec in repairs:
        assert not set(spec.key.split(",")) & set(confirm_keys()), f"{spec.id} opens with the confirm key"


async def test_help_on_the_runs_screen_lists_its_repairs(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        from tui.screens.help import HelpScreen, collect_help

        groups = collect_help(app.screen)
        ids = {row.action_id for group in groups for row in group.rows}
        assert {"runs.recover", "runs.abandon-tools", "runs.release-lease", "runs.orphaned", "runs-list.open"} <= ids
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


# --- columns at 80 and 240 cells -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "expected"), [
    ((80, 24), ["SESSION", "RUN", "STATUS", "LEASE EXPIRY"]),
    ((240, 50), ["SESSION", "RUN", "STATUS", "STATE", "LEASE HOLDER", "EP", "LEASE EXPIRY", "RECOVERY"]),
])
async def test_list_keeps_its_telling_columns(demo_master: Path, size: tuple[int, int], expected: list[str]) -> None:
    app = SessionscopeApp(demo_master, OpenMode.READ_ONLY, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await app.push_screen(RunsScreen())
        await settle_runs(pilot)
        lst = app.screen.query_one(RunList)
        header = lst.render_line(0).text
        assert [c.title for c in lst.columns if f" {c.title} " in f"{header} "] == expected
        assert lst.selected is not None
        assert lst.selected.run_id in lst.render_line(1).text, "the run id is shown whole"


# --- the sources, on a fake store --------------------------------------------------------------------------------


class FakeReader:
    """The store's reads over runs held in a list (newest first), counting the queries: ``active`` the active
    runs, ``recent`` a keyset page of the others (the store leaves the active runs out in the query)."""

    def __init__(self, active: set[int], n: int) -> None:
        from types import SimpleNamespace

        self.listings = [SimpleNamespace(run=SimpleNamespace(id=f"run_{i:016d}", session_id="s", active=i in active),
                                         cursor=("c", i)) for i in range(n)]
        self.queries = 0
        self.scope = SimpleNamespace(orphaned_only=False, session_id=None)

    def active(self) -> list[RunRow]:
        self.queries += 1
        return [RunRow(ls) for ls in self.listings if ls.run.active]  # type: ignore[arg-type]

    def recent(self, after: object, limit: int) -> Page[RunRow]:
        self.queries += 1
        rows = [ls for ls in self.listings if not ls.run.active]
        start = 0 if after is None else next(i for i, ls in enumerate(rows) if ls.cursor == after) + 1
        chunk = rows[start:start + limit]
        return Page(tuple(RunRow(ls) for ls in chunk), start + limit < len(rows))  # type: ignore[arg-type]


def test_recent_runs_are_one_read_per_page_and_the_source_chains_active_then_recent() -> None:
    from tui.widgets.run_list import PAGE, RecentRuns, RunSource

    active = set(range(0, 3 * PAGE, 1))  # the first three pages of the store are all active runs
    reader = FakeReader(active, 3 * PAGE + 5)
    page = RecentRuns(reader).first(10)  # type: ignore[arg-type]
    assert [r.run_id for r in page.rows] == [f"run_{i:016d}" for i in range(3 * PAGE, 3 * PAGE + 5)]
    assert not page.more and reader.queries == 1

    reader = FakeReader({1, 4}, 12)
    source = RunSource(reader)  # type: ignore[arg-type]
    first = source.first(5)
    assert [r.run_id[-2:] for r in first.rows] == ["01", "04", "00", "02", "03"], "active runs, then recent ones"
    assert first.more
    rest = source.after(source.key(first.rows[-1]), 100)
    assert [r.run_id[-2:] for r in rest.rows] == ["05", "06", "07", "08", "09", "10", "11"] and not rest.more


def test_a_damaged_run_is_drawn_as_damaged() -> None:
    from dataclasses import replace

    from store.mothx.runs import Run, RunListing

    run = Run("r1", "s1", "", "", 1, "", "", "", "", "running", "t", "t", None, "")
    lst = RunList()
    assert lst.row_style(RunRow(RunListing(run, None, None, None))) is None
    damaged = replace(run, problems=("session_runs.attempt holds TEXT 'x'",))
    assert lst.row_style(RunRow(RunListing(damaged, None, None, None))) == "damaged"
