"""Runs, run events, conversation turns and the derived execution state (reference sections 8, 9 and 12):
one import for the whole run API.

Reads take a :class:`SessionDir` and tolerate older layouts (a missing table or column reads as empty/default)
and foreign rows (a damaged cell is listed in the row's ``problems``, never raised). Writes take the connection
of the caller's write transaction plus the :class:`Lease` they are made under and check the fence first
(reference 10.9), so one transaction can hold a whole lifecycle step.

* :mod:`store.mothx.run_model` — statuses, the transition table, the row dataclasses and their readers;
* :mod:`store.mothx.run_store` — reading runs, admitting them, transitions;
* :mod:`store.mothx.run_events` — run events and pending decisions;
* :mod:`store.mothx.turns` — entry appends with the leaf check, conversation turns;
* :mod:`store.mothx.execution` — recovery rows, linked response runs, execution facts, the derived state;
* :mod:`store.mothx.run_listing` — the Runs screen's keyset listing.
"""

from __future__ import annotations

from store.mothx.execution import (
    ExecutionFacts,
    ExecutionState,
    derive_execution_state,
    get_recovery,
    inspect_execution,
    read_execution_facts,
    read_facts_conn,
    recovery_conn,
    remote_retainable,
    response_run_conn,
)
from store.mothx.run_events import (
    NewRunEvent,
    append_run_event,
    decision_id_of,
    insert_run_event,
    latest_run_event_seq,
    list_run_events,
    normalise_json,
    pending_decisions_conn,
    recovery_decision_event_id,
    recovery_event_id,
    run_event_id,
    run_events_conn,
)
from store.mothx.run_listing import (
    RunCursor,
    RunListing,
    RunPage,
    RunScope,
    active_runs,
    is_orphan,
    list_orphaned,
    list_runs,
    recent_runs,
    runs_page,
)
from store.mothx.run_model import (
    ALLOWED_FROM,
    DECISION_EVENT_TYPES,
    EXECUTION_STATES,
    NON_TERMINAL_STATUSES,
    TERMINAL_STATUSES,
    AppendedEntry,
    ConversationTurn,
    InvalidRunTransition,
    PendingDecision,
    RecoveryRecord,
    ResponseRun,
    Run,
    RunEvent,
    is_non_terminal,
    is_terminal,
    new_id,
)
from store.mothx.run_store import (
    NewRun,
    active_runs_conn,
    create_run,
    fence_run,
    get_run,
    get_run_conn,
    session_runs,
    transition_run,
)
from store.mothx.turns import (
    SessionModified,
    append_entry,
    close_turn,
    leaf_id,
    list_turns,
    open_turn,
    open_turns_of_run,
    turns_conn,
)

__all__ = [
    "ALLOWED_FROM", "DECISION_EVENT_TYPES", "EXECUTION_STATES", "NON_TERMINAL_STATUSES", "TERMINAL_STATUSES",
    "AppendedEntry", "ConversationTurn", "ExecutionFacts", "ExecutionState", "InvalidRunTransition", "NewRun",
    "NewRunEvent", "PendingDecision", "RecoveryRecord", "ResponseRun", "Run", "RunCursor", "RunEvent", "RunListing",
    "RunPage", "RunScope", "active_runs", "is_orphan", "recent_runs", "runs_page",
    "SessionModified", "active_runs_conn", "append_entry", "append_run_event", "close_turn", "create_run",
    "decision_id_of", "derive_execution_state", "fence_run", "get_recovery", "get_run", "get_run_conn",
    "insert_run_event", "inspect_execution", "is_non_terminal", "is_terminal", "latest_run_event_seq", "leaf_id",
    "list_orphaned", "list_run_events", "list_runs", "list_turns", "new_id", "normalise_json", "open_turn",
    "open_turns_of_run", "pending_decisions_conn", "read_execution_facts", "read_facts_conn", "recovery_conn",
    "recovery_decision_event_id", "recovery_event_id", "remote_retainable", "response_run_conn", "run_event_id",
    "run_events_conn", "session_runs", "transition_run", "turns_conn",
]
