"""Run statuses and transitions (reference 8.1, 8.2) and the rows of the run tables, read cell by cell.

Every row dataclass carries ``problems``: one entry per cell holding a value no runtime writes (see
:mod:`store.mothx.cells`); such a row is shown as damaged and never repaired.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from store.errors import StoreError
from store.mothx.cells import Cells, joined
from store.mothx.schema import RUN_ACTIVE_STATUSES, SchemaInfo
from store.safetext import one_line

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


def new_id() -> str:
    """16 lowercase hex characters (8 random bytes), the reference's id format."""
    return secrets.token_hex(8)


# ---------------------------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class Run:
    """One ``session_runs`` row."""

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
    problems: tuple[str, ...] = ()  # one per damaged cell ("session_runs.attempt holds TEXT 'x'")

    @property
    def active(self) -> bool:
        return is_non_terminal(self.status)

    @property
    def damaged(self) -> str:
        return joined(self.problems)


@dataclass(frozen=True)
class RunEvent:
    """One ``session_run_events`` row."""

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
    problems: tuple[str, ...] = ()

    @property
    def damaged(self) -> str:
        return joined(self.problems)

    def data_obj(self) -> dict[str, object]:
        try:
            value = json.loads(self.data or "{}")
        except (ValueError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ConversationTurn:
    """One ``conversation_turns`` row."""

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
    problems: tuple[str, ...] = ()

    @property
    def damaged(self) -> str:
        return joined(self.problems)


@dataclass(frozen=True)
class RecoveryRecord:
    """One ``session_run_recoveries`` row."""

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
    problems: tuple[str, ...] = ()

    @property
    def damaged(self) -> str:
        return joined(self.problems)


@dataclass(frozen=True)
class ResponseRun:
    """A ``response_runs`` row linked to a session run (same session, ``local_turn_id`` = the run's id)."""

    id: int
    session_id: str
    local_run_id: str  # the provider-side run id
    local_turn_id: str  # the session run's id (what links the row, reference 11.2 step 6)
    response_id: str
    provider: str
    api: str
    state: str
    problems: tuple[str, ...] = ()

    @property
    def damaged(self) -> str:
        return joined(self.problems)


@dataclass(frozen=True)
class PendingDecision:
    """An approval or question whose last event has status ``pending`` (reference 8.3)."""

    decision_id: str
    event_type: str  # approval_resolved | question_resolved
    last_event_id: str


@dataclass(frozen=True)
class AppendedEntry:
    """An entry a run appended: its seq, id, parent id and timestamp."""

    seq: int
    id: str
    parent_id: str | None
    timestamp: str


# ---------------------------------------------------------------------------------------------------------------
# Column lists that tolerate older layouts, and the row readers

RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "''"), ("session_id", "''"), ("intent_id", "''"), ("retry_of", "''"), ("attempt", "1"),
    ("work_dir", "''"), ("source", "''"), ("model", "''"), ("mode", "''"), ("status", "''"),
    ("started_at", "''"), ("updated_at", "''"), ("finished_at", "NULL"), ("error", "''"),
    ("error_info_json", "'{}'"), ("progress_json", "'{}'"), ("usage_json", "'{}'"), ("context_usage_json", "'{}'"),
)
RECOVERY_COLUMNS = (
    "run_id, session_id, state, trigger_source, reason_code, attempt, previous_lease_epoch, last_error, "
    "next_retry_at, started_at, updated_at, completed_at"
)
EVENT_COLUMNS = "seq, id, session_id, run_id, event_type, source, status, model, mode, timestamp, data"
TURN_COLUMNS = "id, session_id, intent_id, kind, status, start_seq, end_seq, started_at, ended_at"
RESPONSE_COLUMNS = "id, session_id, local_run_id, local_turn_id, response_id, provider, api, state"


def select_columns(schema: SchemaInfo | None, table: str, columns: tuple[tuple[str, str], ...],
                   alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    parts = []
    for name, default in columns:
        if schema is None or schema.has(table, name):
            parts.append(f"{prefix}{name}")
        else:
            parts.append(f"{default} AS {name}")
    return ", ".join(parts)


def has_table(conn: sqlite3.Connection, schema: SchemaInfo | None, table: str) -> bool:
    if schema is not None:
        return schema.has(table)
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None


def run_from_row(row: Sequence[object]) -> Run:
    c = Cells("session_runs", row)
    run = Run(
        id=c.text(0, "id"), session_id=c.text(1, "session_id"), intent_id=c.text(2, "intent_id"),
        retry_of=c.text(3, "retry_of"), attempt=c.integer(4, "attempt"), work_dir=c.text(5, "work_dir"),
        source=c.text(6, "source"), model=c.text(7, "model"), mode=c.text(8, "mode"), status=c.text(9, "status"),
        started_at=c.text(10, "started_at"), updated_at=c.text(11, "updated_at"),
        finished_at=c.text_or_none(12, "finished_at"), error=c.text(13, "error"),
        error_info_json=c.text(14, "error_info_json", "{}"), progress_json=c.text(15, "progress_json", "{}"),
        usage_json=c.text(16, "usage_json", "{}"), context_usage_json=c.text(17, "context_usage_json", "{}"),
    )
    if run.status and not is_terminal(run.status) and not is_non_terminal(run.status) and not c.problems:
        return Run(**{**run.__dict__, "problems": (f"session_runs.status holds TEXT '{_cut(run.status)}', "
                                                   "not a run status",)})
    return Run(**{**run.__dict__, "problems": c.problems}) if c.problems else run


def recovery_from_row(row: Sequence[object]) -> RecoveryRecord:
    c = Cells("session_run_recoveries", row)
    rec = RecoveryRecord(
        run_id=c.text(0, "run_id"), session_id=c.text(1, "session_id"), state=c.text(2, "state"),
        trigger_source=c.text(3, "trigger_source"), reason_code=c.text(4, "reason_code"),
        attempt=c.integer(5, "attempt"), previous_lease_epoch=c.integer(6, "previous_lease_epoch"),
        last_error=c.text(7, "last_error"), next_retry_at=c.integer_or_none(8, "next_retry_at"),
        started_at=c.integer(9, "started_at"), updated_at=c.integer(10, "updated_at"),
        completed_at=c.integer_or_none(11, "completed_at"),
    )
    return RecoveryRecord(**{**rec.__dict__, "problems": c.problems}) if c.problems else rec


def event_from_row(row: Sequence[object]) -> RunEvent:
    c = Cells("session_run_events", row)
    ev = RunEvent(
        seq=c.integer(0, "seq"), id=c.text(1, "id"), session_id=c.text_or_none(2, "session_id") or "",
        run_id=c.text(3, "run_id"), event_type=c.text(4, "event_type"), source=c.text(5, "source"),
        status=c.text(6, "status"), model=c.text(7, "model"), mode=c.text(8, "mode"),
        timestamp=c.text(9, "timestamp"), data=c.text(10, "data", "{}"),
    )
    return RunEvent(**{**ev.__dict__, "problems": c.problems}) if c.problems else ev


def turn_from_row(row: Sequence[object], run_id: str = "") -> ConversationTurn:
    c = Cells("conversation_turns", row)
    turn = ConversationTurn(
        id=c.text(0, "id"), session_id=c.text(1, "session_id"), intent_id=c.text(2, "intent_id"),
        kind=c.text(3, "kind"), status=c.text(4, "status"), start_seq=c.integer(5, "start_seq"),
        end_seq=c.integer_or_none(6, "end_seq"), started_at=c.text(7, "started_at"),
        ended_at=c.text_or_none(8, "ended_at"), run_id=run_id,
    )
    return ConversationTurn(**{**turn.__dict__, "problems": c.problems}) if c.problems else turn


def response_from_row(row: Sequence[object]) -> ResponseRun:
    c = Cells("response_runs", row)
    resp = ResponseRun(
        id=c.integer(0, "id"), session_id=c.text(1, "session_id"), local_run_id=c.text(2, "local_run_id"),
        local_turn_id=c.text(3, "local_turn_id"), response_id=c.text_or_none(4, "response_id") or "",
        provider=c.text(5, "provider"), api=c.text(6, "api"), state=c.text(7, "state"),
    )
    return ResponseRun(**{**resp.__dict__, "problems": c.problems}) if c.problems else resp


def _cut(text: str) -> str:
    value = one_line(text)
    return value if len(value) <= 40 else value[:40] + "…"
