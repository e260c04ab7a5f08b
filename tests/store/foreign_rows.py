"""A real-layout session directory with runs, leases, recoveries and tool records, for foreign-row tests.

:func:`build_template` writes one with the store itself (the simulator and a recovery), then relaxes the
``NOT NULL`` constraints of the run tables (as a foreign writer's layout may), so a test can put any value in
any cell: :func:`corrupt` does that by raw SQL.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from store.mothx.leases import LeaseOwner, clock_override
from store.mothx.recovery import RecoverRun
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import RuntimeSimulator, create_session

T0 = 1_900_000_000
TABLES: dict[str, tuple[str, ...]] = {
    "session_runs": ("id", "session_id", "intent_id", "retry_of", "attempt", "work_dir", "source", "model", "mode",
                     "status", "started_at", "updated_at", "finished_at", "error", "error_info_json"),
    "session_runtime_leases": ("session_id", "owner_instance_id", "owner_pid", "owner_kind", "lease_token_hash",
                               "epoch", "run_id", "purpose", "state", "acquired_at", "heartbeat_at", "expires_at",
                               "updated_at"),
    "session_run_recoveries": ("run_id", "session_id", "state", "trigger_source", "reason_code", "attempt",
                               "previous_lease_epoch", "last_error", "next_retry_at", "started_at", "updated_at",
                               "completed_at"),
    "tool_execution_records": ("session_id", "local_turn_id", "execution_key", "provider", "api", "provider_call_id",
                               "tool_kind", "tool_name", "execution_state", "side_effecting", "created_at",
                               "completed_at"),
    "session_run_events": ("seq", "id", "session_id", "run_id", "event_type", "status", "timestamp", "data"),
    "conversation_turns": ("id", "session_id", "intent_id", "status", "start_seq", "end_seq", "started_at"),
    "response_runs": ("session_id", "local_run_id", "local_turn_id", "response_id", "provider", "api", "state"),
}
HOSTILE = ("\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe", "\ud83d",
           "pid-4242-[/]", "[bold]x[/bold]", "[@click=app.quit]x[/]")


def build_template(folder: Path) -> Path:
    """A session directory (returns its sessions.db, a self-contained file) with, at clock ``T0 + 100``:

    * session A: two completed runs; a third orphaned with an open turn, a pending approval and two running tools;
    * session B: a run held by a live runtime (valid lease);
    * session C: idle, its last lease expired but still marked active;
    * session D: an orphaned run recovered (recovery row ``completed``);
    * session E: an orphaned ``responses_background`` run with a linked ``response_runs`` row.
    """
    work = folder / "work"
    sd = open_session_dir(work, create=True)
    try:
        with clock_override(T0):
            a, b, c, d, e = (create_session(sd) for _ in range(5))
            for _ in range(2):
                sim = RuntimeSimulator(sd, a, owner=LeaseOwner())
                sim.admit()
                sim.finish()
            crashed = LeaseOwner()
            sim = RuntimeSimulator(sd, a, owner=crashed)
            sim.admit()
            for _ in range(4):
                sim.step()  # user message, tool call (running record), tool result, approval pending
            for step_no in (7, 13):  # two more tool calls (n % 6 == 1), each with its own call id, left running
                sim.step_no = step_no
                sim.step()
            crashed.crash()
            live = RuntimeSimulator(sd, b, owner=LeaseOwner(), ttl=10_000)
            live.admit()
            idle = RuntimeSimulator(sd, c, owner=LeaseOwner())
            idle.admit()
            idle.finish()
            with sd.db.write() as conn:
                conn.execute("UPDATE session_runtime_leases SET state = 'active', expires_at = ? WHERE session_id = ?",
                             (T0 + 15, c))
            gone = LeaseOwner()
            RuntimeSimulator(sd, d, owner=gone).admit()
            gone.crash()
            remote_owner = LeaseOwner()
            remote = RuntimeSimulator(sd, e, owner=remote_owner)
            remote.admit()
            remote_owner.crash()
            with sd.db.write() as conn:
                conn.execute("UPDATE session_runs SET source = 'responses_background' WHERE id = ?", (remote.run_id,))
                conn.execute(
                    "INSERT INTO response_runs (session_id, local_run_id, local_turn_id, response_id, provider, api, "
                    "state, created_at, updated_at) VALUES (?, 'prov_1', ?, 'resp_1', 'openai', 'openai-responses', "
                    "'in_progress', 'x', 'x')", (e, remote.run_id))
        with clock_override(T0 + 100):
            RecoverRun(sd, sd_run(sd, d)).apply()
    finally:
        sd.close()
    template = folder / "template.db"
    src = sqlite3.connect(work / "sessions.db")
    try:
        src.execute("VACUUM INTO ?", (str(template),))
    finally:
        src.close()
    shutil.rmtree(work)
    relax_not_null(template)
    return template


def sd_run(sd: object, session_id: str) -> str:
    from store.mothx.runs import list_runs

    return next(r.run.id for r in list_runs(sd, session_id=session_id, active_only=True))  # type: ignore[arg-type]


def relax_not_null(db: Path) -> None:
    """Drop the ``NOT NULL`` constraints of the tables in :data:`TABLES` (a foreign layout)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA writable_schema = ON")
        marks = ",".join("?" * len(TABLES))
        conn.execute(f"UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table' AND name IN "
                     f"({marks})", tuple(TABLES))
        conn.commit()
        conn.execute("PRAGMA writable_schema = OFF")
    finally:
        conn.close()


def place(template: Path, folder: Path) -> Path:
    """A fresh copy of the template as ``folder/sessions.db``."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "sessions.db"
    shutil.copyfile(template, target)
    return target


BAD_UTF8 = object()  # a marker: write invalid UTF-8 as TEXT


def is_utf8(value: object) -> bool:
    """False for a value that is written as invalid UTF-8 text (the marker, or a str with a lone surrogate)."""
    if value is BAD_UTF8:
        return False
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def corrupt(db: Path, changes: list[tuple[str, str, int, object]]) -> int:
    """Set ``table.column`` of the ``k``-th row (by rowid, modulo the row count) to each value; returns how
    many cells were changed (a change SQLite refuses, e.g. a duplicate key, is skipped)."""
    conn = sqlite3.connect(db, isolation_level=None)
    done = 0
    try:
        for table, column, k, value in changes:
            rowids = [r[0] for r in conn.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
            if not rowids:
                continue
            rowid = rowids[k % len(rowids)]
            expr, param = ("CAST(? AS TEXT)", b"\xff\xfebad\xc3") if value is BAD_UTF8 else ("?", value)
            if isinstance(value, str) and not is_utf8(value):  # a lone surrogate: stored as invalid UTF-8 text
                expr, param = "CAST(? AS TEXT)", value.encode("utf-8", "surrogatepass")
            try:
                conn.execute(f"UPDATE {table} SET {column} = {expr} WHERE rowid = ?", (param, rowid))
                done += 1
            except (sqlite3.IntegrityError, sqlite3.OperationalError, OverflowError):
                continue
    finally:
        conn.close()
    return done


def dump(db: Path) -> list[object]:
    """Every row of every table, to compare a database before and after a refused repair."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        conn.text_factory = bytes
        return [(t, conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()) for t in tables]
    finally:
        conn.close()
