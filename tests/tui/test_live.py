"""Live updates: another process changes sessions.db (and announces it on the lease bus, or not), and the screens
re-read only the affected rows, in place, keeping the cursor and the scroll position.

Every test uses its own UDP port for the bus (never the default one other processes on the machine use).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from store.demo.model import DEMO_NOW_UNIX
from store.mothx.db import OpenMode
from tests.tui import appwait, runswait
from tests.tui.runswait import db_rows
from tui.app import SessionscopeApp
from tui.live import LiveChanged, LiveFlush, LiveUpdates
from tui.widgets.session_list import SessionList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REPO = Path(__file__).resolve().parents[2]


async def settle(pilot: Pilot[Any]) -> None:
    await appwait.settle(pilot)


async def settle_runs(pilot: Pilot[Any]) -> None:
    await runswait.settle_runs(pilot)


async def wait_for(pilot: Pilot[Any], condition: Callable[[], bool], what: str,
                   deadline_s: float = runswait.DEADLINE_S) -> None:
    await runswait.wait_for(pilot, condition, what, deadline_s)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def foreign_write(folder: Path, sql: str, params: list[object], *, port: int | None = None,
                  announce: dict[str, object] | None = None) -> None:
    """In another OS process: run one write transaction on sessions.db, then (optionally) send one bus datagram
    as a runtime would (a new process: a new origin id, seq 1)."""
    script = textwrap.dedent("""
        import json, secrets, sqlite3, sys
        folder, sql, port, announce = sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[5]
        params = json.loads(sys.argv[3])
        conn = sqlite3.connect(folder + "/sessions.db", timeout=10)
        with conn:
            conn.execute(sql, params)
        conn.close()
        if announce != "null":
            from store.mothx.bus import BusPublisher, database_identity
            fields = json.loads(announce)
            kind = fields.pop("type")
            pub = BusPublisher(port=int(port), origin_instance_id="pid-4242-" + secrets.token_hex(16))
            assert pub.publish(kind, database_identity=database_identity(folder), **fields)
            pub.close()
    """)
    subprocess.run(
        [sys.executable, "-c", script, str(folder), sql, json.dumps(params), str(port or 0),
         json.dumps(announce) if announce is not None else "null"],
        check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60,
    )


async def replace_live(app: SessionscopeApp, *, bus: bool, watch: bool, port: int) -> LiveUpdates:
    """Swap the app's live updates for ones with only the chosen source (to prove each source on its own)."""
    if app.live is not None:
        app.live.stop()
    assert app.sd is not None
    live = LiveUpdates(app, app.sd, bus=bus, watch=watch, port=port)
    live.start(wait=True)
    app.live = live
    return live


def idle_visible_session(session_list: SessionList, avoid: int) -> tuple[int, str]:
    """A visible session without an active run, not the cursor row."""
    for i, row in enumerate(session_list.visible_rows()):
        if i != avoid and not row.run_status and i > 2:
            return i, row.id
    raise AssertionError("no idle session on screen")


def insert_running_run(session_id: str) -> tuple[str, list[object]]:
    return ("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) VALUES (?, ?, 'running', ?, ?)",
            [f"run_live_{secrets.token_hex(4)}", session_id, "2026-11-20T12:00:00Z", "2026-11-20T12:00:00Z"])


# --- the Sessions screen -------------------------------------------------------------------------------------------


async def test_bus_datagram_refreshes_only_the_affected_row_in_place(demo_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_udp_port()
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(port))
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=True)
    async with app.run_test(size=(120, 20)) as pilot:
        await settle(pilot)
        await replace_live(app, bus=True, watch=False, port=port)
        session_list = app.screen.query_one(SessionList)
        session_list.cursor = 20  # the list scrolls: 20 is below the first page of a 20-line terminal
        await settle(pilot)
        top, cursor = int(session_list.scroll_offset.y), session_list.cursor
        assert top > 0
        index, target = idle_visible_session(session_list, cursor - top)
        before = {row.id: row for row in session_list.visible_rows()}
        sql, params = insert_running_run(target)
        foreign_write(demo_dir, sql, params, port=port,
                      announce={"type": "state_changed", "session_id": target, "run_id": str(params[0]),
                                "run_status": "running"})
        await wait_for(pilot, lambda: getattr(session_list.row_at(top + index), "run_status", "") == "running",
                       "the announced session's row to show its run")
        assert session_list.cursor == cursor and int(session_list.scroll_offset.y) == top, "cursor and scroll kept"
        assert session_list.changed == {target}, "only the changed row is marked"
        after = {row.id: row for row in session_list.visible_rows()}
        assert [r for r in after if after[r] is not before[r]] == [target], "the other rows were not re-read"
        line = session_list.render_line(index + 1).text
        assert "✗ orphaned" in line  # a running run with no lease: its derived state needs an operator
        # the mark lasts one refresh cycle, then clears by itself
        await wait_for(pilot, lambda: not session_list.changed, "the mark to clear", deadline_s=10)
        assert app.live is not None and app.live.stats().hints >= 1


async def test_a_live_change_re_sorts_the_list_and_keeps_the_cursor_on_its_row(demo_dir: Path) -> None:
    """Under "last active ↓" a session that gets a new entry moves to the top at once (not only after ``r``);
    the cursor stays on the session it was on."""
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        rows = session_list.visible_rows()
        assert len(rows) > 8
        session_list.cursor = 3
        await settle(pilot)
        kept = rows[3].id
        mover = rows[7].id
        data = json.dumps({"type": "message", "id": "e_live_resort", "parentId": None,
                           "timestamp": "2026-12-31T23:59:00Z", "message": {"role": "user", "content": "later"}})
        foreign_write(demo_dir, "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
                      "VALUES (?, 'e_live_resort', 'message', NULL, '2026-12-31T23:59:00Z', ?)", [mover, data])
        app.screen.post_message(LiveChanged(frozenset({mover}), source="bus"))
        await wait_for(pilot, lambda: session_list.row_at(0) is not None and session_list.row_at(0).id == mover,
                       "the changed session to move to the top")
        selected = session_list.selected
        assert selected is not None and selected.id == kept, "the cursor stayed on its session"
        assert [r.id for r in session_list.rows][1:8] == [r.id for r in rows if r.id != mover][:7]
        assert mover in session_list.changed


async def test_datagrams_without_a_database_change_change_nothing(demo_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import store.mothx.sessions
    from store.mothx.bus import BusPublisher, database_identity

    port = free_udp_port()
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        live = await replace_live(app, bus=True, watch=False, port=port)
        session_list = app.screen.query_one(SessionList)
        rows = session_list.visible_rows()
        target = rows[5].id
        reads: list[str] = []
        real = store.mothx.sessions.get_session

        def spy(sd: object, sid: str) -> object:
            reads.append(sid)
            return real(sd, sid)  # type: ignore[arg-type]

        monkeypatch.setattr(store.mothx.sessions, "get_session", spy)
        pub = BusPublisher(port=port, origin_instance_id="pid-4243-" + "cd" * 16)
        try:
            # a claim about another database: ignored, nothing is re-read
            pub.publish("acquired", session_id=target, database_identity="/elsewhere/sessions.db",
                        owner_instance_id="pid-1-" + "0" * 32, owner_pid=1, epoch=9, expires_at=DEMO_NOW_UNIX + 99)
            # garbage and a wrong protocol version: dropped by the listener
            pub.send_bytes(b"\xff not json")
            pub.send_bytes(json.dumps({"version": 2, "messageId": "x", "type": "acquired",
                                       "originInstanceId": "y", "sessionId": target}).encode())
            # a valid claim about this database that the database does not back: re-read, nothing changes
            pub.publish("acquired", session_id=target, database_identity=database_identity(demo_dir),
                        owner_instance_id="pid-666-" + "e" * 32, owner_pid=666, epoch=99, expires_at=DEMO_NOW_UNIX + 99,
                        run_status="running")
        finally:
            pub.close()
        await wait_for(pilot, lambda: reads == [target], "the re-read of the announced session")
        await settle(pilot)
        assert session_list.changed == set(), "a datagram alone never changes a row"
        assert [(r.id, r.run_status) for r in session_list.visible_rows()] == [(r.id, r.run_status) for r in rows]
        stats = live.listener.stats() if live.listener is not None else None
        assert stats is not None and stats.accepted == 2 and stats.dropped_total == 2


async def test_file_change_from_another_process_refreshes_the_row(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await replace_live(app, bus=False, watch=True, port=free_udp_port())
        session_list = app.screen.query_one(SessionList)
        session_list.cursor = 3
        await settle(pilot)
        index, target = idle_visible_session(session_list, 3)
        sql, params = insert_running_run(target)
        foreign_write(demo_dir, sql, params)  # no announcement: only the file watcher can tell
        await wait_for(pilot, lambda: getattr(session_list.row_at(index), "run_status", "") == "running",
                       "the silently written session's row to show its run")
        assert session_list.cursor == 3 and session_list.changed == {target}


async def test_a_flood_of_hints_is_one_flush_per_turn() -> None:
    class FakeApp:
        def __init__(self) -> None:
            self.posted: list[object] = []
            self.screen_stack: list[object] = []

        def post_message(self, message: object) -> bool:
            self.posted.append(message)
            return True

    app = FakeApp()
    live = LiveUpdates(app, None, bus=False, watch=False)  # type: ignore[arg-type]
    for i in range(1000):
        live._add((f"s{i % 50}",), source="bus")
    assert len(app.posted) == 1 and isinstance(app.posted[0], LiveFlush), "one flush waits for the UI, not 1000"
    changed = live.take()
    assert changed is not None and changed.sessions == frozenset(f"s{i}" for i in range(50))
    assert live.take() is None
    live._add(("s1",), source="watch")
    live._add((), everything=True, source="bus")
    assert len(app.posted) == 2
    changed = live.take()
    assert changed is not None and changed.everything and changed.source == "bus+watch"
    assert isinstance(changed, LiveChanged) and changed.concerns("anything")


async def test_everything_absorbs_ids_and_the_pending_set_is_bounded() -> None:
    from tui.live import MAX_PENDING

    class FakeApp:
        def __init__(self) -> None:
            self.posted: list[object] = []
            self.screen_stack: list[object] = []

        def post_message(self, message: object) -> bool:
            self.posted.append(message)
            return True

    live = LiveUpdates(FakeApp(), None, bus=False, watch=False)  # type: ignore[arg-type]
    live._add(("a", "b"), source="bus")
    live._add((), everything=True, source="bus")
    live._add(("c",), source="bus")  # absorbed: everything is re-read anyway
    changed = live.take()
    assert changed is not None and changed.everything and changed.sessions == frozenset()
    for i in range(MAX_PENDING):
        live._add((f"s{i}",), source="bus")
    changed = live.take()
    assert changed is not None and not changed.everything and len(changed.sessions) == MAX_PENDING
    for i in range(MAX_PENDING + 1):
        live._add((f"s{i}",), source="bus")
    assert len(live._pending) == 0 and live._everything, "one id too many: the set is dropped for everything"


async def test_batches_are_paced_while_changes_keep_coming() -> None:
    """The first change after a quiet spell is handed over at once; while changes keep coming, at most one batch
    per interval (50 ms, doubling up to 250 ms) reaches the screens, flushed by one timer."""
    from tui.live import FLUSH_INTERVAL_S, MAX_FLUSH_INTERVAL_S

    class FakeApp:
        def __init__(self) -> None:
            self.posted: list[object] = []
            self.timers: list[tuple[float, object]] = []
            self.screen_stack: list[object] = []

        def post_message(self, message: object) -> bool:
            self.posted.append(message)
            return True

        def set_timer(self, delay: float, callback: object, name: str = "") -> None:
            self.timers.append((delay, callback))

    app = FakeApp()
    now = [100.0]
    delivered: list[LiveChanged] = []
    live = LiveUpdates(app, None, bus=False, watch=False)  # type: ignore[arg-type]
    live.clock = lambda: now[0]
    import tui.live

    real = tui.live.deliver
    tui.live.deliver = lambda _app, changed: delivered.append(changed)  # type: ignore[assignment]
    try:
        live._add(("a",), source="bus")
        live.flush()
        assert len(delivered) == 1 and not app.timers, "the first change is shown at once"
        intervals = []
        for step in range(8):  # a flood: changes arrive all the time
            live._add((f"x{step}",), source="bus")
            live._add((f"y{step}",), source="bus")
            assert len(app.posted) == 2 + step, "one LiveFlush per batch, however many changes"
            now[0] += 0.001
            live.flush()
            assert len(app.timers) == 1, "too early: one timer for the rest of the interval"
            delay, callback = app.timers.pop()
            intervals.append(round(delay + 0.001, 6))
            now[0] += delay
            callback()  # type: ignore[operator]
            assert delivered[-1].sessions == {f"x{step}", f"y{step}"}
        assert intervals[:4] == [FLUSH_INTERVAL_S, 2 * FLUSH_INTERVAL_S, 4 * FLUSH_INTERVAL_S, MAX_FLUSH_INTERVAL_S]
        assert set(intervals[4:]) == {MAX_FLUSH_INTERVAL_S}
        now[0] += 1.0  # quiet: the next change is shown at once again
        live._add(("z",), source="bus")
        live.flush()
        assert delivered[-1].sessions == {"z"} and not app.timers and live.interval == FLUSH_INTERVAL_S
    finally:
        tui.live.deliver = real


async def test_a_flood_of_5000_datagrams_is_a_few_refreshes(demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from store.mothx.bus import database_identity
    from tui.screens.sessions import SessionsScreen

    port = free_udp_port()
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    reloads: list[float] = []
    batches: list[LiveChanged] = []
    real_reload = SessionList.reload
    real_changed = SessionsScreen.on_live_changed

    def count_reload(self: SessionList, *args: Any, **kwargs: Any) -> None:
        reloads.append(time.monotonic())
        real_reload(self, *args, **kwargs)

    def count_batch(self: SessionsScreen, message: LiveChanged) -> None:
        batches.append(message)
        real_changed(self, message)

    monkeypatch.setattr(SessionList, "reload", count_reload)
    monkeypatch.setattr(SessionsScreen, "on_live_changed", count_batch)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        live = await replace_live(app, bus=True, watch=False, port=port)
        assert live.listener is not None and live.listener.available
        batches.clear()  # the first open's own re-read (after the list cache is built) is not the flood's
        reloads.clear()
        ident = database_identity(demo_dir)
        origin = "pid-4244-" + "ab" * 16
        datagrams = []
        for n in range(1, 5001):
            obj: dict[str, object] = {"version": 3, "messageId": f"{origin}-{n}", "originInstanceId": origin,
                                      "seq": n, "databaseIdentity": ident}
            if n % 2:
                obj.update(type="database_rebuilt", path=str(demo_dir / "sessions.db"))
            else:
                obj.update(type="acquired", sessionId=f"{n:016x}", epoch=1)
            datagrams.append(json.dumps(obj).encode())

        def flood() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
                sock.connect(("127.255.255.255", port))
                for i in range(0, len(datagrams), 50):
                    for data in datagrams[i:i + 50]:
                        sock.send(data)
                    time.sleep(0.002)

        sender = threading.Thread(target=flood, daemon=True)
        t0 = time.monotonic()
        sender.start()
        while sender.is_alive():
            await pilot.pause(0.02)
        elapsed = time.monotonic() - t0
        last = -1
        while live.listener.stats().received != last:  # until the listener drained the socket
            last = live.listener.stats().received
            await pilot.pause(0.3)
        await settle(pilot)
        received = live.listener.stats().received
        assert received >= 1000, f"only {received} datagrams arrived: the test proves nothing"
        bound = 6 + int((elapsed + 1.0) / 0.25)  # at most four batches a second once the flood is on
        assert 1 <= len(batches) <= bound, f"{len(batches)} batches for {received} datagrams in {elapsed:.2f} s"
        assert len(reloads) <= len(batches)
        assert live.stats().flushes == len(batches)
        assert session_list_ok(app)


def session_list_ok(app: SessionscopeApp) -> bool:
    lst = app.screen.query_one(SessionList)
    return lst.loaded and bool(lst.visible_rows())


# --- the Runs screen -----------------------------------------------------------------------------------------------


async def test_runs_screen_follows_another_process(demo_dir: Path) -> None:
    from tui.screens.runs import RunsScreen
    from tui.widgets.run_list import RunList

    port = free_udp_port()
    orphan = db_rows(demo_dir, "SELECT r.id, r.session_id FROM session_runs r JOIN session_runtime_leases l "
                               "ON l.session_id = r.session_id WHERE r.status = 'running' AND l.state = 'active' "
                               "AND l.expires_at < ?", (DEMO_NOW_UNIX,))[0]
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await replace_live(app, bus=True, watch=False, port=port)
        screen = RunsScreen()
        await app.push_screen(screen)
        await settle_runs(pilot)
        lst = screen.query_one(RunList)
        lst.cursor = 5
        await settle_runs(pilot)
        kept = lst.selected
        assert kept is not None
        # another process moves the orphaned run on and announces it
        foreign_write(demo_dir, "UPDATE session_runs SET status = 'waiting_for_question' WHERE id = ?", [orphan[0]],
                      port=port, announce={"type": "state_changed", "session_id": orphan[1], "run_id": orphan[0],
                                           "run_status": "waiting_for_question"})
        def status_of(run_id: str) -> str:
            row = lst.row_of(run_id)
            return row.listing.run.status if row is not None else ""

        await wait_for(pilot, lambda: status_of(orphan[0]) == "waiting_for_question", "the run's new status")
        assert orphan[0] in lst.changed
        assert lst.selected is not None and lst.selected.run_id == kept.run_id
        # a new active run of an idle session appears at the top; the cursor stays on the same run
        idle = next(r.session_id for r in lst.rows if not r.listing.run.active
                    and r.session_id not in {x.session_id for x in lst.active_rows})
        sql, params = insert_running_run(idle)
        foreign_write(demo_dir, sql, params, port=port,
                      announce={"type": "state_changed", "session_id": idle})
        await wait_for(pilot, lambda: lst.rows[0].run_id == params[0], "the new run at the top")
        assert lst.selected is not None and lst.selected.run_id == kept.run_id, "the cursor stays on its run"
        assert params[0] in lst.changed


async def test_stopping_live_updates_leaves_no_thread_behind(demo_dir: Path) -> None:
    """Quitting always quits: every thread live updates start is a daemon, and stop() ends them within 1 s."""
    import threading
    import time

    from store.mothx.sessiondir import open_session_dir

    class FakeApp:
        def post_message(self, message: object) -> bool:
            return True

        def call_from_thread(self, *args: object, **kwargs: object) -> None:
            pass

    before = set(threading.enumerate())
    with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd:
        live = LiveUpdates(FakeApp(), sd, bus=True, watch=True, port=free_udp_port(), publish=True)  # type: ignore[arg-type]
        live.start(wait=True)
        assert live.listener is not None and live.listener.available
        assert live.watcher is not None and live.watcher.available
        started = [t for t in threading.enumerate() if t not in before]
        assert len(started) >= 2 and all(t.daemon for t in started), [(t.name, t.daemon) for t in started]
        t0 = time.monotonic()
        live.stop()
        elapsed = time.monotonic() - t0
        assert elapsed < 1.0, f"stop took {elapsed:.2f} s"
        assert not [t.name for t in started if t.is_alive()]
