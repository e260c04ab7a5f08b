"""Run events (reference 8.3): deterministic ids, appends, keyset reads and pending decisions."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.mothx.lease_model import Lease
from store.mothx.lease_store import check_fence
from store.mothx.run_model import (
    DECISION_EVENT_TYPES,
    EVENT_COLUMNS,
    PendingDecision,
    RunEvent,
    event_from_row,
)
from store.times import format_rfc3339

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

_DECISION_ID_KEYS = ("decisionId", "approvalId", "questionId", "requestId", "id")


def run_event_id(run_id: str, status: str) -> str:
    """Deterministic id of a run's terminal event written by a runtime (the general form is not specified)."""
    return f"run_{run_id}_{status}"


def recovery_event_id(run_id: str, state: str) -> str:
    """``recovery_<runID>_<state>`` (reference 11.2)."""
    return f"recovery_{run_id}_{state}"


def recovery_decision_event_id(run_id: str, decision_id: str) -> str:
    """``recovery_decision_<runID>_<decisionID>`` (reference 11.2)."""
    return f"recovery_decision_{run_id}_{decision_id}"


@dataclass(frozen=True)
class NewRunEvent:
    id: str
    session_id: str
    run_id: str
    event_type: str
    source: str = ""
    status: str = ""
    model: str = ""
    mode: str = ""
    data: str = "{}"
    timestamp: str = ""


def normalise_json(text: str) -> str:
    """Event ``data``: invalid JSON becomes ``{}`` (reference 8.3)."""
    try:
        json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return "{}"
    return text


def insert_run_event(conn: sqlite3.Connection, ev: NewRunEvent) -> bool:
    """Unfenced insert (the caller has fenced its transaction). An existing id is left as it is → False."""
    cur = conn.execute(
        "INSERT INTO session_run_events (id, session_id, run_id, event_type, source, status, model, mode, "
        "timestamp, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
        (ev.id, ev.session_id, ev.run_id, ev.event_type, ev.source, ev.status, ev.model, ev.mode,
         ev.timestamp or format_rfc3339(), normalise_json(ev.data)),
    )
    return cur.rowcount == 1


def append_run_event(conn: sqlite3.Connection, ev: NewRunEvent, lease: Lease | None, *, now: int | None = None) -> bool:
    """Fenced append of one run event; re-writing a deterministic id is a no-op (returns False)."""
    check_fence(conn, lease, session_id=ev.session_id, now=now)
    return insert_run_event(conn, ev)


def list_run_events(
    sd: SessionDir,
    *,
    run_id: str | None = None,
    session_id: str | None = None,
    after_seq: int = 0,
    limit: int = 500,
) -> list[RunEvent]:
    """Run events with ``seq > after_seq`` in seq order, at most ``limit`` (keyset paging)."""
    if not sd.schema.has("session_run_events"):
        return []
    where: list[str] = ["seq > ?"]
    args: list[object] = [after_seq]
    if run_id is not None:
        where.append("run_id = ?")
        args.append(run_id)
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    with sd.db.read() as conn:
        rows = conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM session_run_events WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
            (*args, limit),
        ).fetchall()
    return [event_from_row(r) for r in rows]


def run_events_conn(conn: sqlite3.Connection, run_id: str) -> list[RunEvent]:
    return [
        event_from_row(r)
        for r in conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM session_run_events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    ]


def latest_run_event_seq(sd: SessionDir, run_id: str) -> int:
    """``COALESCE(MAX(seq), 0)`` over the run's events (0 when that is no integer)."""
    if not sd.schema.has("session_run_events"):
        return 0
    with sd.db.read() as conn:
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM session_run_events WHERE run_id = ?", (run_id,)).fetchone()
    value = row[0] if row else 0
    return value if isinstance(value, int) else 0


def decision_id_of(ev: RunEvent) -> str:
    """The decision an approval/question event is about (first of decisionId, approvalId, questionId, …)."""
    data = ev.data_obj()
    for key in _DECISION_ID_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def decision_events_conn(conn: sqlite3.Connection, run_id: str) -> list[RunEvent]:
    """The run's ``approval_resolved`` / ``question_resolved`` events in seq order."""
    return [
        event_from_row(row)
        for row in conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM session_run_events WHERE run_id = ? AND event_type IN (?, ?) ORDER BY seq",
            (run_id, *DECISION_EVENT_TYPES),
        ).fetchall()
    ]


def pending_from_events(events: list[RunEvent]) -> list[PendingDecision]:
    """Decisions whose last event has status ``pending``, in order of their last appearance."""
    last: dict[str, RunEvent] = {}
    for ev in events:
        did = decision_id_of(ev)
        if did:
            last.pop(did, None)
            last[did] = ev
    return [
        PendingDecision(decision_id=did, event_type=ev.event_type, last_event_id=ev.id)
        for did, ev in last.items()
        if ev.status == "pending"
    ]


def pending_decisions_conn(conn: sqlite3.Connection, run_id: str) -> list[PendingDecision]:
    """Decisions of the run whose last event has status ``pending``."""
    return pending_from_events(decision_events_conn(conn, run_id))
