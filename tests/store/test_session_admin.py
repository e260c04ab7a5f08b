"""Session management repairs: delete (reference 6, table by table), pin / unpin, project, rename."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import RepairRefused
from store.mothx.fork import fork_session
from store.mothx.fork_copy import ForkOptions
from store.mothx.lease_guard import acquire
from store.mothx.lease_model import LeaseOwner
from store.mothx.repair_kit import Repair
from store.mothx.session_admin import (
    CHILD_TABLES,
    DeleteSessions,
    RenameSession,
    SetPinned,
    SetProject,
    delete_statements,
)
from store.mothx.session_titles import latest_title
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.turns import leaf_id
from tests.store.fork_support import build
from tests.store.test_recovery import SimProcess

HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "pid-4242-[/]", "[@click=app.quit]x[/]", "\u202etxt.exe", "\ud83d"]


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def _fill(conn: sqlite3.Connection, table: str, values: dict[str, object]) -> None:
    """Insert one row with every NOT NULL column without a default given a value."""
    cols = conn.execute(f"PRAGMA table_info({table})").fetchall()
    row: dict[str, object] = {}
    for _cid, name, typ, notnull, default, pk in cols:
        if name in values:
            row[name] = values[name]
        elif (notnull and default is None) or (pk and "INT" not in str(typ).upper()):
            row[name] = 1 if "INT" in str(typ).upper() else f"{table}-{name}-{values.get('session_id', '')}"
    names = ", ".join(row)
    conn.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def populate(sd: SessionDir, sid: str, other: str) -> None:
    """A row in every child table of ``sid``, delivery operations, attachment deliveries and fork requests."""
    with sd.db.write() as conn:
        for table in CHILD_TABLES:
            if table in ("entries", "session_runtime_leases", "conversation_turns"):
                continue  # entries/turns exist already; a lease row is written by the lease code
            if table == "session_runs":
                _fill(conn, table, {"session_id": sid, "id": f"run-{sid}", "status": "completed"})
            elif table == "delivery_intents":
                _fill(conn, table, {"session_id": sid, "id": f"intent-{sid}"})
            elif table == "session_attachments":
                _fill(conn, table, {"session_id": sid, "id": f"att-{sid}"})
            else:
                _fill(conn, table, {"session_id": sid})
        _fill(conn, "delivery_operations", {"intent_id": f"intent-{sid}", "id": f"op-{sid}", "artifact_id": None})
        _fill(conn, "attachment_deliveries", {"attachment_id": f"att-{sid}", "id": f"ad-{sid}"})
        conn.execute("INSERT INTO session_fork_requests (request_key_hash, request_fingerprint, source_session_id, "
                     "child_session_id, created_at) VALUES ('h1', 'f', ?, ?, 'x'), ('h2', 'f', ?, ?, 'x')",
                     (sid, other, other, sid))
        conn.execute("INSERT INTO request_stats (timestamp, session_id, provider, model) VALUES ('x', ?, 'p', 'm')",
                     (sid,))


def _rows_of(sd: SessionDir, sid: str) -> dict[str, int]:
    with sd.db.read() as conn:
        out = {t: n for t, w, k in delete_statements(conn)
               for n in [int(conn.execute(f"SELECT COUNT(*) FROM {t} WHERE {w}", (sid,) * int(k)).fetchone()[0])]}
        out["request_stats"] = int(conn.execute("SELECT COUNT(*) FROM request_stats WHERE session_id = ?",
                                                (sid,)).fetchone()[0])
    return out


def _all_counts(sd: SessionDir) -> dict[str, int]:
    with sd.db.read() as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in tables}


def test_delete_leaves_no_row_in_any_child_table_and_keeps_request_stats(sd: SessionDir) -> None:
    a, b = build(sd, 2), build(sd, 2)
    populate(sd, a.session_id, b.session_id)
    populate(sd, b.session_id, "someone-else")
    before_b = _rows_of(sd, b.session_id)
    repair = DeleteSessions(sd, a.session_id)
    assert isinstance(repair, Repair)
    pv = repair.preview()
    assert pv.allowed
    counted = {c.table: int(c.summary.split()[0]) for c in pv.changes if c.kind == "row"}
    expected = _rows_of(sd, a.session_id)
    for table, n in expected.items():
        if table not in ("request_stats", "session_runtime_leases") and n:
            assert counted[table] == n, table
    assert counted["session_runtime_leases"] == 1
    assert any("request_stats rows are kept (1" in n for n in pv.notes)
    repair.apply(pv)
    after = _rows_of(sd, a.session_id)
    for table in [*CHILD_TABLES, "session_fork_requests", "delivery_operations", "attachment_deliveries", "sessions"]:
        assert after[table] == 0, table  # table by table
    assert after["request_stats"] == 1
    # the other session keeps everything but the fork request that named the deleted one
    after_b = _rows_of(sd, b.session_id)
    assert after_b["session_fork_requests"] == before_b["session_fork_requests"] - 2
    assert {k: v for k, v in after_b.items() if k != "session_fork_requests"} == \
        {k: v for k, v in before_b.items() if k != "session_fork_requests"}


def test_bulk_delete_of_a_fork_family(sd: SessionDir) -> None:
    a = build(sd, 2)
    child = fork_session(sd, ForkOptions(a.session_id, "r"))
    res = DeleteSessions(sd, [a.session_id, child.session_id])
    res.apply(res.preview())
    counts = _all_counts(sd)
    assert counts["sessions"] == 0 and counts["entries"] == 0 and counts["session_fork_requests"] == 0
    assert counts["conversation_turns"] == 0 and counts["session_runtime_leases"] == 0


def test_delete_refused_under_another_holders_lease_changes_nothing(sd: SessionDir) -> None:
    a = build(sd, 1)
    other = acquire(sd, a.session_id, "mutation", owner=LeaseOwner(), ttl=600)
    try:
        before = _all_counts(sd)
        repair = DeleteSessions(sd, a.session_id)
        pv = repair.preview()
        assert "another owner's valid lease" in pv.refusal and not pv.changes
        with pytest.raises(RepairRefused):
            repair.apply(pv)
        assert _all_counts(sd) == before
    finally:
        other.release()


def test_delete_refused_while_a_simulated_runtime_holds_the_lease(sd: SessionDir) -> None:
    a = build(sd, 1)
    sim = SimProcess(sd.root, a.session_id, "--runs", "1", "--steps", "10000", "--append-interval", "0.5",
                     "--ttl", "30")
    try:
        sim.wait_for("run_created")
        before = _all_counts(sd)
        repair = DeleteSessions(sd, a.session_id)
        pv = repair.preview()
        assert pv.refusal and not pv.changes
        with pytest.raises(RepairRefused):
            repair.apply(pv)
        sim.proc.send_signal(19)  # SIGSTOP: the runtime stops writing, its lease stays valid
        before = _all_counts(sd)
        with pytest.raises(RepairRefused):
            DeleteSessions(sd, a.session_id).apply()
        assert _all_counts(sd) == before
    finally:
        sim.kill()


def test_delete_refused_while_a_run_is_active(sd: SessionDir) -> None:
    a = build(sd, 1)
    with sd.db.write() as conn:
        conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                     "VALUES ('r1', ?, 'queued', 'x', 'x')", (a.session_id,))
    before = _all_counts(sd)
    repair = DeleteSessions(sd, a.session_id)
    assert "active run (r1)" in repair.preview().refusal
    with pytest.raises(RepairRefused):
        repair.apply()
    assert _all_counts(sd) == before


def test_delete_refuses_a_changed_session(sd: SessionDir) -> None:
    a = build(sd, 1)
    repair = DeleteSessions(sd, a.session_id)
    pv = repair.preview()
    with sd.db.write() as conn:
        conn.execute("INSERT INTO request_stats (timestamp, session_id, provider, model) VALUES ('x', ?, 'p', 'm')",
                     (a.session_id,))
    with pytest.raises(RepairRefused, match="changed since the preview"):
        repair.apply(pv)
    assert _rows_of(sd, a.session_id)["sessions"] == 1


def test_pin_and_unpin(sd: SessionDir) -> None:
    a = build(sd, 1)
    pin = SetPinned(sd, a.session_id, True)
    pin.apply(pin.preview())
    with sd.db.read() as conn:
        assert conn.execute("SELECT pinned, project_id FROM session_metadata").fetchall() == [(1, None)]
    assert "already pinned" in SetPinned(sd, a.session_id, True).preview().refusal
    unpin = SetPinned(sd, a.session_id, False)
    assert unpin.id == "unpin"
    unpin.apply(unpin.preview())
    with sd.db.read() as conn:
        assert conn.execute("SELECT pinned FROM session_metadata").fetchall() == [(0,)]
        assert conn.execute("SELECT purpose, state FROM session_runtime_leases").fetchall() == [("mutation", "released")]


@pytest.mark.parametrize("name", ["Research", *HOSTILE])
def test_project_set_creates_reuses_and_clears(sd: SessionDir, name: str) -> None:
    a, b = build(sd, 1), build(sd, 1)
    for sid in (a.session_id, b.session_id):
        r = SetProject(sd, sid, name)
        r.apply(r.preview())
    with sd.db.read() as conn:
        projects = conn.execute("SELECT id, name FROM projects").fetchall()
        links = conn.execute("SELECT project_id FROM session_metadata ORDER BY session_id").fetchall()
    assert len(projects) == 1 and projects[0][1] == name
    assert links == [(projects[0][0],), (projects[0][0],)]
    assert "already in project" in SetProject(sd, a.session_id, name).preview().refusal
    clear = SetProject(sd, a.session_id, "")
    clear.apply(clear.preview())
    with sd.db.read() as conn:
        assert conn.execute("SELECT project_id FROM session_metadata WHERE session_id = ?",
                            (a.session_id,)).fetchone() == (None,)


@pytest.mark.parametrize("title", ["New name", *HOSTILE])
def test_rename_appends_a_session_info_entry(sd: SessionDir, title: str) -> None:
    a = build(sd, 1, title="Old")
    with sd.db.read() as conn:
        leaf = leaf_id(conn, a.session_id)
    r = RenameSession(sd, a.session_id, title)
    pv = r.preview()
    if title == "\ud83d":  # a lone surrogate cannot be stored as UTF-8 text: refused, nothing written
        assert "not valid UTF-8" in pv.refusal
        return
    assert pv.allowed and pv.entries == 1
    r.apply(pv)
    with sd.db.read() as conn:
        assert latest_title(conn, a.session_id) == title
        row = conn.execute("SELECT parent_id, data FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                           (a.session_id,)).fetchone()
    assert row[0] == leaf and '"source":"manual"' in row[1]


def test_rename_refuses_blank_and_a_moved_leaf(sd: SessionDir) -> None:
    a = build(sd, 1)
    assert "visible character" in RenameSession(sd, a.session_id, "   ").preview().refusal
    r = RenameSession(sd, a.session_id, "T")
    pv = r.preview()
    from tests.store.fork_support import add_entry, message

    with sd.db.write() as conn:
        add_entry(conn, a.session_id, "message", {"message": message("user", "more")})
    with pytest.raises(RepairRefused):
        r.apply(pv)


def test_unknown_session_is_refused(sd: SessionDir) -> None:
    assert "does not exist" in DeleteSessions(sd, "0000000000000000").preview().refusal
