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
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.demo.model import DEMO_NOW_UNIX
from tests.tui.appwait import settle
from tests.tui.runswait import db_rows, settle_runs, wait_for
from tui.app import SessionscopeApp
from tui.live import LiveChanged, LiveFlush, LiveUpdates
from tui.widgets.session_list import SessionList

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REPO = Path(__file__).resolve().parents[2]


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
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
        await wait_for(pilot, lambda: session_list.row_at(top + index).run_status == "running",
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
        monkeypatch.setattr(store.mothx.sessions, "get_session", lambda sd, sid: reads.append(sid) or real(sd, sid))
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
        await wait_for(pilot, lambda: session_list.row_at(index).run_status == "running",
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
        await wait_for(pilot, lambda: lst.row_of(orphan[0]) is not None
                       and lst.row_of(orphan[0]).listing.run.status == "waiting_for_question", "the run's new status")
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
