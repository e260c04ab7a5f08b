"""Runs, run events, conversation turns and the derived execution state (reference sections 8, 9 and 12).

Reads take a :class:`SessionDir` and tolerate older layouts (a missing table or column reads as empty/default).
Writes take the connection of the caller's write transaction plus the :class:`Lease` they are made under and
check the fence first (reference 10.9), so one transaction can hold a whole lifecycle step.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from store.errors import SessionNotFound, StoreError
from store.mothx.leases import Lease, LeaseSnapshot, check_fence, snapshot_from_row, sqlite_now
from store.mothx.schema import RUN_ACTIVE_STATUSES, SchemaInfo

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

NON_TERMINAL_STATUSES: tuple[str, ...] = RUN_ACTIVE_STATUSES
TERMINAL_STATUSES: tuple[str, ...] = (
    "completed", "incomplete", "expired", "failed", "cancelled", "canceled", "timed_out",
)
_NON_TERMINAL_SET = frozenset(NON_TERMINAL_STATUSES)
_TERMINAL_SET = frozenset(TERMINAL_STATUSES)

# Target status -> the current statuses it may be reached from (reference 8.2). A terminal target T is also
# reachable from T itself; that case is handled as an idempotent no-op, never rewritten.
ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    "created": ("created",),
    "queued": ("created", "queued"),
    "running": ("created", "queued", "running", "waiting_for_approval", "waiting_for_question"),
    "waiting_for_approval": ("running", "waiting_for_approval"),
    "waiting_for_question": ("running", "waiting_for_question"),
    "cancelling": ("created", "queued", "running", "waiting_for_approval", "waiting_for_question", "cancelling"),
    "terminalizing": NON_TERMINAL_STATUSES,
    **{t: NON_TERMINAL_STATUSES for t in TERMINAL_STATUSES},
}

DECISION_EVENT_TYPES = ("approval_resolved", "question_resolved")
_DECISION_ID_KEYS = ("decisionId", "approvalId", "questionId", "requestId", "id")

EXECUTION_STATES = (
    "idle", "reserved", "local", "external", "detached_remote", "orphaned", "recovery_failed", "inconsistent",
    "unknown",
)


def is_terminal(status: str) -> bool:
    return status in _TERMINAL_SET


def is_non_terminal(status: str) -> bool:
    return status in _NON_TERMINAL_SET


class InvalidRunTransition(StoreError):
    """A run status change the reference's transition table does not allow."""


class SessionModified(StoreError):
    """An entry append whose ``parentId`` is no longer the session's leaf (reference 7.3)."""


def format_rfc3339(moment: datetime | None = None) -> str:
    """Go's RFC3339Nano in UTC: fraction with trailing zeros trimmed (none when zero), zone ``Z``."""
    dt = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        text += "." + f"{dt.microsecond:06d}".rstrip("0")
    return text + "Z"


def new_id() -> str:
    """16 lowercase hex characters (8 random bytes), the reference's id format."""
    return secrets.token_hex(8)


# ---------------------------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class Run:
    id: str
    session_id: str
    intent_id: str
    retry_of: str
    attempt: int
    work_dir: str
    source: str
    model: str
    mode: str
    status: str
    started_at: str
    updated_at: str
    finished_at: str | None
    error: str
    error_info_json: str = "{}"
    progress_json: str = "{}"
    usage_json: str = "{}"
    context_usage_json: str = "{}"

    @property
    def active(self) -> bool:
        return is_non_terminal(self.status)


@dataclass(frozen=True)
class RunEvent:
    seq: int
    id: str
    session_id: str
    run_id: str
    event_type: str
    source: str
    status: str
    model: str
    mode: str
    timestamp: str
    data: str

    def data_obj(self) -> dict[str, object]:
        try:
            value = json.loads(self.data or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ConversationTurn:
    id: str
    session_id: str
    intent_id: str
    kind: str
    status: str
    start_seq: int
    end_seq: int | None
    started_at: str
    ended_at: str | None
    run_id: str = ""  # from the turn's ``turn_start`` entry ('' when it names none)


@dataclass(frozen=True)
class RecoveryRecord:
    run_id: str
    session_id: str
    state: str
    trigger_source: str
    reason_code: str
    attempt: int
    previous_lease_epoch: int
    last_error: str
    next_retry_at: int | None
    started_at: int
    updated_at: int
    completed_at: int | None


@dataclass(frozen=True)
class ResponseRun:
    """The ``response_runs`` row linked to a run (``local_run_id``)."""

    id: int
    session_id: str
    local_run_id: str
    local_turn_id: str
    response_id: str
    provider: str
    api: str
    state: str


@dataclass(frozen=True)
class PendingDecision:
    """An approval or question whose last event has status ``pending`` (reference 8.3)."""

    decision_id: str
    event_type: str  # approval_resolved | question_resolved
    last_event_id: str


@dataclass(frozen=True)
class AppendedEntry:
    seq: int
    id: str
    parent_id: str | None
    timestamp: str


# ---------------------------------------------------------------------------------------------------------------
# Column lists that tolerate older layouts

_RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "''"), ("session_id", "''"), ("intent_id", "''"), ("retry_of", "''"), ("attempt", "1"),
    ("work_dir", "''"), ("source", "''"), ("model", "''"), ("mode", "''"), ("status", "''"),
    ("started_at", "''"), ("updated_at", "''"), ("finished_at", "NULL"), ("error", "''"),
    ("error_info_json", "'{}'"), ("progress_json", "'{}'"), ("usage_json", "'{}'"), ("context_usage_json", "'{}'"),
)
_RECOVERY_COLUMNS = (
    "run_id, session_id, state, trigger_source, reason_code, attempt, previous_lease_epoch, last_error, "
    "next_retry_at, started_at, updated_at, completed_at"
)


def _select(schema: SchemaInfo | None, table: str, columns: tuple[tuple[str, str], ...], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    parts = []
    for name, default in columns:
        if schema is None or schema.has(table, name):
            parts.append(f"{prefix}{name}")
        else:
            parts.append(f"{default} AS {name}")
    return ", ".join(parts)


def _run(row: tuple) -> Run:
    return Run(
        id=str(row[0]), session_id=str(row[1] or ""), intent_id=str(row[2] or ""), retry_of=str(row[3] or ""),
        attempt=int(row[4] or 0), work_dir=str(row[5] or ""), source=str(row[6] or ""), model=str(row[7] or ""),
        mode=str(row[8] or ""), status=str(row[9] or ""), started_at=str(row[10] or ""),
        updated_at=str(row[11] or ""), finished_at=None if row[12] is None else str(row[12]), error=str(row[13] or ""),
        error_info_json=str(row[14] or "{}"), progress_json=str(row[15] or "{}"), usage_json=str(row[16] or "{}"),
        context_usage_json=str(row[17] or "{}"),
    )


def _recovery(row: tuple) -> RecoveryRecord:
    return RecoveryRecord(
        run_id=str(row[0]), session_id=str(row[1] or ""), state=str(row[2] or ""), trigger_source=str(row[3] or ""),
        reason_code=str(row[4] or ""), attempt=int(row[5] or 0), previous_lease_epoch=int(row[6] or 0),
        last_error=str(row[7] or ""), next_retry_at=None if row[8] is None else int(row[8]),
        started_at=int(row[9] or 0), updated_at=int(row[10] or 0),
        completed_at=None if row[11] is None else int(row[11]),
    )


def _event(row: tuple) -> RunEvent:
    return RunEvent(
        seq=int(row[0]), id=str(row[1]), session_id=str(row[2] or ""), run_id=str(row[3] or ""),
        event_type=str(row[4] or ""), source=str(row[5] or ""), status=str(row[6] or ""), model=str(row[7] or ""),
        mode=str(row[8] or ""), timestamp=str(row[9] or ""), data=str(row[10] or "{}"),
    )


_EVENT_COLUMNS = "seq, id, session_id, run_id, event_type, source, status, model, mode, timestamp, data"
_TURN_COLUMNS = "id, session_id, intent_id, kind, status, start_seq, end_seq, started_at, ended_at"


def _has(conn: sqlite3.Connection, schema: SchemaInfo | None, table: str) -> bool:
    if schema is not None:
        return schema.has(table)
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None


# ---------------------------------------------------------------------------------------------------------------
# Runs


def get_run_conn(conn: sqlite3.Connection, run_id: str, schema: SchemaInfo | None = None) -> Run | None:
    if not _has(conn, schema, "session_runs"):
        return None
    row = conn.execute(
        f"SELECT {_select(schema, 'session_runs', _RUN_COLUMNS)} FROM session_runs WHERE id = ?", (run_id,)
    ).fetchone()
    return _run(row) if row else None


def get_run(sd: SessionDir, run_id: str) -> Run | None:
    with sd.db.read() as conn:
        return get_run_conn(conn, run_id, sd.schema)


def active_runs_conn(conn: sqlite3.Connection, session_id: str, schema: SchemaInfo | None = None) -> list[Run]:
    """The session's non-terminal runs, newest first (reference 8.2's query)."""
    if not _has(conn, schema, "session_runs"):
        return []
    marks = ",".join("?" * len(NON_TERMINAL_STATUSES))
    rows = conn.execute(
        f"SELECT {_select(schema, 'session_runs', _RUN_COLUMNS)} FROM session_runs "
        f"WHERE session_id = ? AND status IN ({marks}) ORDER BY started_at DESC",
        (session_id, *NON_TERMINAL_STATUSES),
    ).fetchall()
    return [_run(r) for r in rows]


def session_runs(sd: SessionDir, session_id: str, *, limit: int = 100) -> list[Run]:
    """The session's runs, newest first."""
    if not sd.schema.has("session_runs"):
        return []
    with sd.db.read() as conn:
        rows = conn.execute(
            f"SELECT {_select(sd.schema, 'session_runs', _RUN_COLUMNS)} FROM session_runs WHERE session_id = ? "
            "ORDER BY started_at DESC, id DESC LIMIT ?",
            (session_id, limit),
        ).fetchall()
    return [_run(r) for r in rows]


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
        raise InvalidRunTransition(f"A new run cannot start in status '{run.status}'.")
    ts = timestamp or format_rfc3339()
    try:
        conn.execute(
            "INSERT INTO session_runs (id, session_id, intent_id, attempt, work_dir, source, model, mode, status, "
            "started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run.id, run.session_id, run.intent_id, run.attempt, run.work_dir, run.source, run.model, run.mode,
             run.status, ts, ts),
        )
    except sqlite3.IntegrityError as exc:
        raise StoreError(f"Run {run.id} cannot be admitted in session {run.session_id}: {exc}.") from exc


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

    Raises :class:`InvalidRunTransition` for a transition the table forbids (``"<from>" -> "<to>"``).
    """
    if to not in ALLOWED_FROM:
        raise InvalidRunTransition(f"'{to}' is not a run status.")
    run = get_run_conn(conn, run_id)
    if run is None:
        raise StoreError(f"Run {run_id} does not exist.")
    if lease is not None and lease.session_id != run.session_id:
        raise StoreError(f"Run {run_id} belongs to session {run.session_id}, not to the lease's {lease.session_id}.")
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
    raise InvalidRunTransition(f'invalid session run transition "{run.status}" -> "{to}"')


def fence_run(conn: sqlite3.Connection, lease: Lease, run_id: str, *, now: int | None = None) -> Run:
    """Context-level validation: the binding fence plus "the run is not terminal"."""
    check_fence(conn, lease, now=now, run_id=run_id)
    run = get_run_conn(conn, run_id)
    if run is None or not run.active:
        status = run.status if run else "missing"
        raise StoreError(f"Run {run_id} is no longer active (status {status}).")
    return run


# ---------------------------------------------------------------------------------------------------------------
# Run events


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
    except (ValueError, TypeError):
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
    where, args = ["seq > ?"], [after_seq]
    if run_id is not None:
        where.append("run_id = ?")
        args.append(run_id)  # type: ignore[arg-type]
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)  # type: ignore[arg-type]
    with sd.db.read() as conn:
        rows = conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM session_run_events WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
            (*args, limit),
        ).fetchall()
    return [_event(r) for r in rows]


def run_events_conn(conn: sqlite3.Connection, run_id: str) -> list[RunEvent]:
    return [
        _event(r)
        for r in conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM session_run_events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    ]


def latest_run_event_seq(sd: SessionDir, run_id: str) -> int:
    if not sd.schema.has("session_run_events"):
        return 0
    with sd.db.read() as conn:
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM session_run_events WHERE run_id = ?", (run_id,)).fetchone()
    return int(row[0])


def decision_id_of(ev: RunEvent) -> str:
    """The decision an approval/question event is about (first of decisionId, approvalId, questionId, …)."""
    data = ev.data_obj()
    for key in _DECISION_ID_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def pending_decisions_conn(conn: sqlite3.Connection, run_id: str) -> list[PendingDecision]:
    """Decisions of the run whose last event has status ``pending``, in order of first appearance."""
    rows = conn.execute(
        f"SELECT {_EVENT_COLUMNS} FROM session_run_events WHERE run_id = ? AND event_type IN (?, ?) ORDER BY seq",
        (run_id, *DECISION_EVENT_TYPES),
    ).fetchall()
    last: dict[str, RunEvent] = {}
    for row in rows:
        ev = _event(row)
        did = decision_id_of(ev)
        if did:
            last.pop(did, None)
            last[did] = ev
    return [
        PendingDecision(decision_id=did, event_type=ev.event_type, last_event_id=ev.id)
        for did, ev in last.items()
        if ev.status == "pending"
    ]


# ---------------------------------------------------------------------------------------------------------------
# Entries and turns


def leaf_id(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The id the next append must carry as ``parentId`` (reference 7.3's check statement)."""
    row = conn.execute(
        "SELECT id FROM entries WHERE session_id = ? AND type != 'session' ORDER BY seq DESC LIMIT 1", (session_id,)
    ).fetchone()
    return None if row is None else str(row[0])


_NO_EXPECTATION = object()


def append_entry(
    conn: sqlite3.Connection,
    session_id: str,
    entry_type: str,
    fields: dict[str, object],
    *,
    expected_parent: object = _NO_EXPECTATION,
    entry_id: str | None = None,
    timestamp: str | None = None,
) -> AppendedEntry:
    """Append one entry with ``parentId`` = the current leaf, inside the caller's (fenced) write transaction.

    ``expected_parent`` (a leaf id read earlier, or ``None``) applies the leaf check: a different leaf raises
    :class:`SessionModified`.
    """
    leaf = leaf_id(conn, session_id)
    if expected_parent is not _NO_EXPECTATION and expected_parent != leaf:
        raise SessionModified(
            f"Session {session_id} was modified (its leaf is {leaf}, not {expected_parent}): reopen it before writing."
        )
    eid = entry_id or new_id()
    ts = timestamp or format_rfc3339()
    data: dict[str, object] = {"type": entry_type, "id": eid, "parentId": leaf, "timestamp": ts}
    data.update(fields)
    cur = conn.execute(
        "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, eid, entry_type, leaf, ts, json.dumps(data, separators=(",", ":"), ensure_ascii=False)),
    )
    return AppendedEntry(seq=int(cur.lastrowid or 0), id=eid, parent_id=leaf, timestamp=ts)


def _turn(row: tuple, run_id: str = "") -> ConversationTurn:
    return ConversationTurn(
        id=str(row[0]), session_id=str(row[1] or ""), intent_id=str(row[2] or ""), kind=str(row[3] or ""),
        status=str(row[4] or ""), start_seq=int(row[5] or 0), end_seq=None if row[6] is None else int(row[6]),
        started_at=str(row[7] or ""), ended_at=None if row[8] is None else str(row[8]), run_id=run_id,
    )


def _turn_run_ids(conn: sqlite3.Connection, session_id: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT data FROM entries WHERE session_id = ? AND type = 'turn_start' ORDER BY seq", (session_id,)
    ).fetchall()
    found: dict[str, str] = {}
    for (data,) in rows:
        try:
            obj = json.loads(data)
        except (ValueError, TypeError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("turnId"), str):
            run_id = obj.get("runId")
            found[obj["turnId"]] = run_id if isinstance(run_id, str) else ""
    return found


def turns_conn(conn: sqlite3.Connection, session_id: str, *, open_only: bool = False) -> list[ConversationTurn]:
    if not _has(conn, None, "conversation_turns"):
        return []
    where = "session_id = ?" + (" AND status = 'open'" if open_only else "")
    rows = conn.execute(
        f"SELECT {_TURN_COLUMNS} FROM conversation_turns WHERE {where} ORDER BY start_seq, id", (session_id,)
    ).fetchall()
    run_ids = _turn_run_ids(conn, session_id) if rows else {}
    return [_turn(r, run_ids.get(str(r[0]), "")) for r in rows]


def list_turns(sd: SessionDir, session_id: str) -> list[ConversationTurn]:
    """The session's conversation turns in transcript order, each with the run its ``turn_start`` names."""
    if not sd.schema.has("conversation_turns"):
        return []
    with sd.db.read() as conn:
        return turns_conn(conn, session_id)


def open_turns_of_run(conn: sqlite3.Connection, run: Run) -> list[ConversationTurn]:
    """Open turns belonging to ``run``.

    ``conversation_turns`` has no run column, so a turn belongs to the run when its ``turn_start`` entry names
    the run; when it names none, when its intent id equals the run's (non-empty) intent id, or when both are
    empty (the session's single active run owns an unattributed open turn).
    """
    owned = []
    for turn in turns_conn(conn, run.session_id, open_only=True):
        if turn.run_id:
            if turn.run_id == run.id:
                owned.append(turn)
        elif turn.intent_id == run.intent_id:
            owned.append(turn)
    return owned


def open_turn(
    conn: sqlite3.Connection,
    session_id: str,
    turn_id: str,
    *,
    run_id: str = "",
    intent_id: str = "",
    attempt: int = 1,
    kind: str = "conversation",
    timestamp: str | None = None,
) -> AppendedEntry:
    """Append a ``turn_start`` entry and insert the open ``conversation_turns`` row (caller fences)."""
    fields: dict[str, object] = {"turnId": turn_id}
    if intent_id:
        fields["intentId"] = intent_id
    if run_id:
        fields["runId"] = run_id
    if attempt:
        fields["attempt"] = attempt
    entry = append_entry(conn, session_id, "turn_start", fields, timestamp=timestamp)
    conn.execute(
        "INSERT INTO conversation_turns (id, session_id, intent_id, kind, status, start_seq, started_at) "
        "VALUES (?, ?, ?, ?, 'open', ?, ?)",
        (turn_id, session_id, intent_id, kind, entry.seq, entry.timestamp),
    )
    return entry


def close_turn(
    conn: sqlite3.Connection,
    turn: ConversationTurn,
    status: str,
    *,
    run_id: str = "",
    stop_reason: str = "",
    expected_parent: object = _NO_EXPECTATION,
    timestamp: str | None = None,
) -> AppendedEntry:
    """Append the ``turn_end`` entry and close the row (``end_seq`` = that entry's seq); caller fences."""
    fields: dict[str, object] = {"turnId": turn.id}
    if turn.intent_id:
        fields["intentId"] = turn.intent_id
    if run_id:
        fields["runId"] = run_id
    fields["status"] = status
    if stop_reason:
        fields["stopReason"] = stop_reason
    entry = append_entry(conn, turn.session_id, "turn_end", fields, expected_parent=expected_parent,
                         timestamp=timestamp)
    cur = conn.execute(
        "UPDATE conversation_turns SET status = ?, end_seq = ?, ended_at = ? WHERE id = ? AND status = 'open'",
        (status, entry.seq, entry.timestamp, turn.id),
    )
    if cur.rowcount != 1:
        raise StoreError(f"Turn {turn.id} was closed by someone else.")
    return entry


# ---------------------------------------------------------------------------------------------------------------
# Recovery rows and linked response runs


def recovery_conn(conn: sqlite3.Connection, run_id: str, schema: SchemaInfo | None = None) -> RecoveryRecord | None:
    if not _has(conn, schema, "session_run_recoveries"):
        return None
    row = conn.execute(
        f"SELECT {_RECOVERY_COLUMNS} FROM session_run_recoveries WHERE run_id = ?", (run_id,)
    ).fetchone()
    return _recovery(row) if row else None


def get_recovery(sd: SessionDir, run_id: str) -> RecoveryRecord | None:
    with sd.db.read() as conn:
        return recovery_conn(conn, run_id, sd.schema)


def response_run_conn(conn: sqlite3.Connection, session_id: str, run_id: str,
                      schema: SchemaInfo | None = None) -> ResponseRun | None:
    if not _has(conn, schema, "response_runs"):
        return None
    row = conn.execute(
        "SELECT id, session_id, local_run_id, local_turn_id, response_id, provider, api, state FROM response_runs "
        "WHERE session_id = ? AND local_run_id = ? ORDER BY id DESC LIMIT 1",
        (session_id, run_id),
    ).fetchone()
    if row is None:
        return None
    return ResponseRun(
        id=int(row[0]), session_id=str(row[1]), local_run_id=str(row[2]), local_turn_id=str(row[3] or ""),
        response_id=str(row[4] or ""), provider=str(row[5] or ""), api=str(row[6] or ""), state=str(row[7] or ""),
    )


def remote_retainable(run: Run, response: ResponseRun | None) -> bool:
    """Reference 11.2 step 6: a background Responses run with a linked, complete ``response_runs`` row."""
    return (
        run.source == "responses_background"
        and response is not None
        and bool(response.response_id)
        and bool(response.provider)
        and response.api == "openai-responses"
    )


# ---------------------------------------------------------------------------------------------------------------
# Execution facts and derived state


@dataclass(frozen=True)
class ExecutionFacts:
    """Everything recovery and inspection decide on, read in ONE transaction (reference 11.2 step 1)."""

    session_id: str
    now: int
    session_exists: bool
    active_runs: tuple[Run, ...]
    lease: LeaseSnapshot | None
    recovery: RecoveryRecord | None  # the recovery row of the (newest) active run
    response_run: ResponseRun | None  # the response_runs row linked to the (newest) active run

    @property
    def active_run(self) -> Run | None:
        return self.active_runs[0] if len(self.active_runs) == 1 else None

    @property
    def lease_valid(self) -> bool:
        return self.lease is not None and self.lease.valid


def read_facts_conn(conn: sqlite3.Connection, session_id: str, *, now: int | None = None,
                    schema: SchemaInfo | None = None) -> ExecutionFacts:
    """:class:`ExecutionFacts` inside the caller's transaction (read or write)."""
    t = sqlite_now(conn, now)
    exists = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None
    active = tuple(active_runs_conn(conn, session_id, schema))
    lease = None
    if _has(conn, schema, "session_runtime_leases"):
        row = conn.execute(
            "SELECT session_id, owner_instance_id, owner_pid, owner_kind, lease_token_hash, epoch, run_id, purpose, "
            "state, acquired_at, heartbeat_at, expires_at, updated_at FROM session_runtime_leases WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        lease = snapshot_from_row(row, t) if row else None
    recovery = recovery_conn(conn, active[0].id, schema) if active else None
    response = response_run_conn(conn, session_id, active[0].id, schema) if active else None
    return ExecutionFacts(session_id=session_id, now=t, session_exists=exists, active_runs=active, lease=lease,
                          recovery=recovery, response_run=response)


def read_execution_facts(sd: SessionDir, session_id: str, *, now: int | None = None) -> ExecutionFacts:
    with sd.db.read() as conn:
        return read_facts_conn(conn, session_id, now=now, schema=sd.schema)


@dataclass(frozen=True)
class ExecutionState:
    """The derived execution state of a session (reference 12), with the reason in words."""

    state: str
    phase: str
    recovery_action: str
    linkage_state: str
    owner_scope: str
    can_submit: bool
    can_cancel_local: bool
    can_cancel_remote: bool
    run_id: str
    reason: str


_REMOTE_FINISHED = frozenset({"completed", "failed", "cancelled", "canceled", "incomplete", "expired"})


def _linkage(facts: ExecutionFacts, run: Run | None) -> str:
    lease = facts.lease
    if run is None or lease is None or not lease.valid:
        return "none"
    if lease.run_id == run.id:
        return "bound"
    if lease.run_id == "":
        return "legacy_unbound"
    return "mismatched"


def derive_execution_state(facts: ExecutionFacts, local_instance_id: str | None = None) -> ExecutionState:
    """Classify the facts as the reference's table 12 does.

    Beyond the reference (which leaves them open): ``phase`` is ``admitting``/``reserved``/``recovering`` from
    a reserving lease's purpose, ``executing`` while an owner (local, external or remote) runs the run,
    ``releasing`` while the run is ``cancelling``/``terminalizing``, ``missing`` when the owner is gone, and
    ``''`` when no run or lease is involved. ``recoveryAction`` is ``recover_orphan`` for an orphan,
    ``retry_recovery`` after a failed recovery, ``reattach_remote`` / ``finalize_remote`` for a detached
    remote run (finalize once its response run has a finished state). ``can_submit`` only when idle.
    """
    lease = facts.lease
    valid = lease is not None and lease.valid
    runs = facts.active_runs
    run = runs[0] if runs else None
    run_id = run.id if run else ""

    def make(state: str, phase: str, reason: str, *, action: str = "none", scope: str = "none") -> ExecutionState:
        return ExecutionState(
            state=state, phase=phase, recovery_action=action, linkage_state=_linkage(facts, run),
            owner_scope=scope, can_submit=state == "idle", can_cancel_local=state == "local",
            can_cancel_remote=state == "detached_remote", run_id=run_id, reason=reason,
        )

    if not facts.session_exists:
        return make("unknown", "", f"session {facts.session_id} does not exist", scope="unknown")
    local = lease is not None and local_instance_id is not None and lease.owner_instance_id == local_instance_id
    holder_scope = "local" if local else "external"
    if len(runs) > 1:
        return make("inconsistent", "", f"{len(runs)} active runs in one session", scope="unknown")
    if run is None:
        if valid:
            assert lease is not None
            phase = {"admission": "admitting", "recovery": "recovering"}.get(lease.purpose, "reserved")
            return make("reserved", phase, f"no active run; lease {lease.describe()}", scope=holder_scope)
        return make("idle", "", "no active run and no valid lease")
    releasing = run.status in ("cancelling", "terminalizing")
    if not valid:
        if remote_retainable(run, facts.response_run):
            response = facts.response_run
            finished = response is not None and response.state in _REMOTE_FINISHED
            return make("detached_remote", "executing", f"run {run.id} continues at the provider",
                        action="finalize_remote" if finished else "reattach_remote", scope="remote")
        gone = "no lease" if lease is None else f"lease {lease.describe()}"
        if facts.recovery is not None and facts.recovery.state == "failed":
            return make("recovery_failed", "missing",
                        f"run {run.id} is {run.status} with {gone}; last recovery failed: {facts.recovery.last_error}",
                        action="retry_recovery")
        if facts.recovery is not None and facts.recovery.state == "recovering":
            return make("orphaned", "recovering",
                        f"run {run.id} is {run.status} with {gone}; an earlier recovery did not finish",
                        action="recover_orphan")
        return make("orphaned", "missing", f"run {run.id} is {run.status} with {gone}", action="recover_orphan")
    assert lease is not None
    if lease.purpose == "recovery":
        return make("reserved", "recovering", f"run {run.id} is being recovered: lease {lease.describe()}",
                    scope=holder_scope)
    if lease.purpose in ("admission", "mutation", "fork"):
        return make("inconsistent", "", f"run {run.id} is active under a {lease.purpose} lease", scope="unknown")
    if lease.purpose == "execution" and lease.run_id and lease.run_id != run.id:
        return make("inconsistent", "", f"the execution lease is bound to run {lease.run_id}, not {run.id}",
                    scope="unknown")
    phase = "releasing" if releasing else "executing"
    if local:
        return make("local", phase, f"run {run.id} runs in this process", scope="local")
    return make("external", phase, f"run {run.id} runs in {lease.describe_holder()}", scope="external")


def inspect_execution(sd: SessionDir, session_id: str, *, now: int | None = None,
                      local_instance_id: str | None = None) -> ExecutionState:
    """Read the facts and derive the session's execution state."""
    facts = read_execution_facts(sd, session_id, now=now)
    if not facts.session_exists:
        raise SessionNotFound(f"Session {session_id} does not exist.")
    return derive_execution_state(facts, local_instance_id)


# ---------------------------------------------------------------------------------------------------------------
# Listing for the Runs screen


@dataclass(frozen=True)
class RunCursor:
    """Keyset position in the newest-first run list."""

    started_at: str
    run_id: str


@dataclass(frozen=True)
class RunListing:
    """One row of the Runs screen: the run, its session's lease, the derived state, the recovery record."""

    run: Run
    lease: LeaseSnapshot | None
    execution: ExecutionState | None  # the session's derived state when this run is its active run
    recovery: RecoveryRecord | None

    @property
    def cursor(self) -> RunCursor:
        return RunCursor(self.run.started_at, self.run.id)

    @property
    def holder(self) -> str:
        return self.lease.owner_instance_id if self.lease is not None else ""

    @property
    def epoch(self) -> int:
        return self.lease.epoch if self.lease is not None else 0

    @property
    def expires_at(self) -> int | None:
        return self.lease.expires_at if self.lease is not None else None

    @property
    def state(self) -> str:
        """The derived execution state for an active run; the run's own status once it is terminal."""
        return self.execution.state if self.execution is not None else self.run.status


def _in_marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


def list_runs(
    sd: SessionDir,
    *,
    session_id: str | None = None,
    active_only: bool = False,
    limit: int = 200,
    after: RunCursor | None = None,
    now: int | None = None,
    local_instance_id: str | None = None,
) -> list[RunListing]:
    """Runs newest first (``started_at``, then id), a keyset page after ``after``, all read in one transaction."""
    schema = sd.schema
    if not schema.has("session_runs"):
        return []
    where: list[str] = []
    args: list[object] = []
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    if active_only:
        where.append(f"status IN ({_in_marks(list(NON_TERMINAL_STATUSES))})")
        args.extend(NON_TERMINAL_STATUSES)
    if after is not None:
        where.append("(started_at < ? OR (started_at = ? AND id < ?))")
        args.extend((after.started_at, after.started_at, after.run_id))
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    with sd.db.read() as conn:
        t = sqlite_now(conn, now)
        runs = [
            _run(r)
            for r in conn.execute(
                f"SELECT {_select(schema, 'session_runs', _RUN_COLUMNS)} FROM session_runs {clause} "
                "ORDER BY started_at DESC, id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        ]
        if not runs:
            return []
        sessions = sorted({r.session_id for r in runs})
        facts = _facts_for_sessions(conn, sessions, t, schema)
        recoveries: dict[str, RecoveryRecord] = {}
        if schema.has("session_run_recoveries"):
            ids = [r.id for r in runs]
            for row in conn.execute(
                f"SELECT {_RECOVERY_COLUMNS} FROM session_run_recoveries WHERE run_id IN ({_in_marks(ids)})", ids
            ).fetchall():
                rec = _recovery(row)
                recoveries[rec.run_id] = rec
    out = []
    for run in runs:
        f = facts[run.session_id]
        execution = None
        if run.active:
            execution = derive_execution_state(f, local_instance_id)
        out.append(RunListing(run=run, lease=f.lease, execution=execution, recovery=recoveries.get(run.id)))
    return out


def _facts_for_sessions(conn: sqlite3.Connection, sessions: list[str], t: int,
                        schema: SchemaInfo) -> dict[str, ExecutionFacts]:
    """ExecutionFacts for many sessions with one query per table (inside the caller's read transaction)."""
    marks = _in_marks(sessions)
    existing = {str(r[0]) for r in conn.execute(f"SELECT id FROM sessions WHERE id IN ({marks})", sessions)}
    active: dict[str, list[Run]] = {s: [] for s in sessions}
    for row in conn.execute(
        f"SELECT {_select(schema, 'session_runs', _RUN_COLUMNS)} FROM session_runs WHERE session_id IN ({marks}) "
        f"AND status IN ({_in_marks(list(NON_TERMINAL_STATUSES))}) ORDER BY started_at DESC",
        (*sessions, *NON_TERMINAL_STATUSES),
    ):
        run = _run(row)
        active[run.session_id].append(run)
    leases: dict[str, LeaseSnapshot] = {}
    if schema.has("session_runtime_leases"):
        for row in conn.execute(
            "SELECT session_id, owner_instance_id, owner_pid, owner_kind, lease_token_hash, epoch, run_id, purpose, "
            "state, acquired_at, heartbeat_at, expires_at, updated_at FROM session_runtime_leases "
            f"WHERE session_id IN ({marks})",
            sessions,
        ):
            snap = snapshot_from_row(row, t)
            leases[snap.session_id] = snap
    out = {}
    for sid in sessions:
        runs = tuple(active[sid])
        first = runs[0] if runs else None
        out[sid] = ExecutionFacts(
            session_id=sid, now=t, session_exists=sid in existing, active_runs=runs, lease=leases.get(sid),
            recovery=recovery_conn(conn, first.id, schema) if first else None,
            response_run=response_run_conn(conn, sid, first.id, schema) if first else None,
        )
    return out


def list_orphaned(sd: SessionDir, *, now: int | None = None, local_instance_id: str | None = None,
                  limit: int = 1000) -> list[RunListing]:
    """Active runs whose owner is gone: derived state ``orphaned`` or ``recovery_failed``."""
    return [
        listing
        for listing in list_runs(sd, active_only=True, limit=limit, now=now, local_instance_id=local_instance_id)
        if listing.execution is not None and listing.execution.state in ("orphaned", "recovery_failed")
    ]
