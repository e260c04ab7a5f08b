"""Reading runs and moving them through the reference's transition table (8.2), fenced by a lease (10.9)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.mothx.lease_model import Lease
from store.mothx.lease_store import check_fence
from store.mothx.run_model import (
    ALLOWED_FROM,
    NON_TERMINAL_STATUSES,
    RUN_COLUMNS,
    InvalidRunTransition,
    Run,
    has_table,
    is_terminal,
    run_from_row,
    select_columns,
)
from store.mothx.schema import SchemaInfo
from store.safetext import one_line
from store.times import format_rfc3339

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir


def get_run_conn(conn: sqlite3.Connection, run_id: str, schema: SchemaInfo | None = None) -> Run | None:
    if not has_table(conn, schema, "session_runs"):
        return None
    row = conn.execute(
        f"SELECT {select_columns(schema, 'session_runs', RUN_COLUMNS)} FROM session_runs WHERE id = ?", (run_id,)
    ).fetchone()
    return run_from_row(row) if row else None


def get_run(sd: SessionDir, run_id: str) -> Run | None:
    with sd.db.read() as conn:
        return get_run_conn(conn, run_id, sd.schema)


def active_runs_conn(conn: sqlite3.Connection, session_id: str, schema: SchemaInfo | None = None) -> list[Run]:
    """The session's non-terminal runs, newest first (reference 8.2's query)."""
    if not has_table(conn, schema, "session_runs"):
        return []
    marks = ",".join("?" * len(NON_TERMINAL_STATUSES))
    rows = conn.execute(
        f"SELECT {select_columns(schema, 'session_runs', RUN_COLUMNS)} FROM session_runs "
        f"WHERE session_id = ? AND status IN ({marks}) ORDER BY started_at DESC",
        (session_id, *NON_TERMINAL_STATUSES),
    ).fetchall()
    return [run_from_row(r) for r in rows]


def session_runs(sd: SessionDir, session_id: str, *, limit: int = 100) -> list[Run]:
    """The session's runs, newest first."""
    if not sd.schema.has("session_runs"):
        return []
    with sd.db.read() as conn:
        rows = conn.execute(
            f"SELECT {select_columns(sd.schema, 'session_runs', RUN_COLUMNS)} FROM session_runs WHERE session_id = ? "
            "ORDER BY started_at DESC, id DESC LIMIT ?",
            (session_id, limit),
        ).fetchall()
    return [run_from_row(r) for r in rows]


@dataclass(frozen=True)
class NewRun:
    """What a runtime admits (the simulator's admission transaction writes one)."""

    id: str
    session_id: str
    status: str = "created"
    intent_id: str = ""
    attempt: int = 1
    work_dir: str = ""
    source: str = ""
    model: str = ""
    mode: str = ""


def create_run(conn: sqlite3.Connection, run: NewRun, lease: Lease | None, *, timestamp: str | None = None,
               now: int | None = None) -> None:
    """Insert a new run row (fenced). A duplicate id or a second active run in the session fails."""
    check_fence(conn, lease, session_id=run.session_id, now=now)
    if run.status not in ("created", "queued", "running"):
        raise InvalidRunTransition(f"A new run cannot start in status '{one_line(run.status)}'.")
    ts = timestamp or format_rfc3339()
    try:
        conn.execute(
            "INSERT INTO session_runs (id, session_id, intent_id, attempt, work_dir, source, model, mode, status, "
            "started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run.id, run.session_id, run.intent_id, run.attempt, run.work_dir, run.source, run.model, run.mode,
             run.status, ts, ts),
        )
    except sqlite3.IntegrityError as exc:
        raise StoreError(
            f"Run {one_line(run.id)} cannot be admitted in session {one_line(run.session_id)}: {exc}."
        ) from exc


def transition_run(
    conn: sqlite3.Connection,
    run_id: str,
    to: str,
    lease: Lease | None,
    *,
    error: str | None = None,
    timestamp: str | None = None,
    now: int | None = None,
) -> bool:
    """Move a run to ``to`` (reference 8.2), fenced by ``lease``. Returns False when it already had that status.

    Raises :class:`InvalidRunTransition` for a transition the table forbids (``"<from>" -> "<to>"``), and
    :class:`~store.errors.StoreError` for a damaged run row.
    """
    if to not in ALLOWED_FROM:
        raise InvalidRunTransition(f"'{one_line(to)}' is not a run status.")
    run = get_run_conn(conn, run_id)
    if run is None:
        raise StoreError(f"Run {one_line(run_id)} does not exist.")
    if run.problems:
        raise StoreError(f"Run {one_line(run_id)} is damaged ({run.damaged}): its status is not changed.")
    if lease is not None and lease.session_id != run.session_id:
        raise StoreError(f"Run {one_line(run_id)} belongs to session {one_line(run.session_id)}, not to the "
                         f"lease's {one_line(lease.session_id)}.")
    check_fence(conn, lease, session_id=run.session_id, now=now)
    terminal = is_terminal(to)
    allowed = tuple(s for s in ALLOWED_FROM[to] if not (terminal and s == to))
    ts = timestamp or format_rfc3339()
    marks = ",".join("?" * len(allowed))
    cur = conn.execute(
        "UPDATE session_runs SET status = ?, updated_at = ?, "
        "finished_at = CASE WHEN ? THEN ? ELSE finished_at END, "
        "error = CASE WHEN ? IS NULL THEN error ELSE ? END "
        f"WHERE id = ? AND status IN ({marks})",
        (to, ts, 1 if terminal else 0, ts, error, error, run_id, *allowed),
    )
    if cur.rowcount == 1:
        return True
    if run.status == to:
        return False
    raise InvalidRunTransition(f'invalid session run transition "{one_line(run.status)}" -> "{to}"')


def fence_run(conn: sqlite3.Connection, lease: Lease, run_id: str, *, now: int | None = None) -> Run:
    """Context-level validation: the binding fence plus "the run is not terminal"."""
    check_fence(conn, lease, now=now, run_id=run_id)
    run = get_run_conn(conn, run_id)
    if run is None or not run.active:
        status = one_line(run.status) if run else "missing"
        raise StoreError(f"Run {one_line(run_id)} is no longer active (status {status}).")
    return run
