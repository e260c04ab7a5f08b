"""The demo's tool execution records: interrupted tool executions for ``t`` (abandon tools) on the Runs screen.

One idle session (every run of it ended, its lease released) gets, in its last turn, the records a runtime
writes while it runs tools (``tool_execution_records``, reference DDL in store/sql): two executions left
interrupted (``running`` and ``started``: the runtime stopped before their results) and one ``completed``.
Their call ids are the turn's own ``toolCall`` blocks where it has them, so the picker, the preview and the
transcript agree. Rows are deterministic: the session is the idle one whose last run ended latest (then by
id), the times are the turn's own start time.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from store.paths import SESSIONS_DB

TERMINAL_RUN_STATES = ("completed", "incomplete", "expired", "failed", "cancelled", "canceled", "timed_out")
INTERRUPTED_STATES = ("running", "started")
"""The states of the demo's interrupted records (any state but completed/failed/abandoned is interrupted)."""
FALLBACK_CALLS = (("call_demo_1", "bash"), ("call_demo_2", "read_file"), ("call_demo_3", "bash"))


def _idle_session(conn: sqlite3.Connection) -> str | None:
    marks = ", ".join("?" for _ in TERMINAL_RUN_STATES)
    row = conn.execute(
        "SELECT s.id FROM sessions s WHERE EXISTS (SELECT 1 FROM conversation_turns t WHERE t.session_id = s.id) "
        "AND EXISTS (SELECT 1 FROM session_runs r WHERE r.session_id = s.id) "
        f"AND NOT EXISTS (SELECT 1 FROM session_runs r WHERE r.session_id = s.id AND r.status NOT IN ({marks})) "
        "AND NOT EXISTS (SELECT 1 FROM session_runtime_leases l WHERE l.session_id = s.id AND l.state = 'active') "
        "ORDER BY (SELECT max(r.updated_at) FROM session_runs r WHERE r.session_id = s.id) DESC, s.id LIMIT 1",
        TERMINAL_RUN_STATES,
    ).fetchone()
    return None if row is None else str(row[0])


def _tool_calls(conn: sqlite3.Connection, session_id: str, start: int, end: int | None) -> list[tuple[str, str]]:
    sql = "SELECT data FROM entries WHERE session_id = ? AND type = 'message' AND seq >= ?"
    args: list[object] = [session_id, start]
    if end is not None:
        sql += " AND seq <= ?"
        args.append(end)
    calls: list[tuple[str, str]] = []
    for (data,) in conn.execute(sql + " ORDER BY seq", args):
        try:
            message = json.loads(data).get("message") or {}
        except (ValueError, TypeError, AttributeError):
            continue
        for block in message.get("contents") or [] if isinstance(message, dict) else []:
            call = block.get("toolCall") if isinstance(block, dict) and block.get("type") == "toolCall" else None
            if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
                calls.append((call["id"], str(call.get("name") or "tool")))
    return calls


def add_to_demo(root: Path) -> None:
    conn = sqlite3.connect(root / SESSIONS_DB)
    try:
        with conn:
            session_id = _idle_session(conn)
            if session_id is None:  # pragma: no cover - the demo always has idle sessions with runs
                return
            turn_id, start, end, started_at = conn.execute(
                "SELECT id, start_seq, end_seq, started_at FROM conversation_turns WHERE session_id = ? "
                "ORDER BY start_seq DESC, id DESC LIMIT 1", (session_id,)).fetchone()
            calls = (_tool_calls(conn, session_id, start, end) + list(FALLBACK_CALLS))[:3]
            states = (*INTERRUPTED_STATES, "completed")
            for (call_id, name), state in zip(calls, states, strict=True):
                args_hash = hashlib.sha256(f"{session_id}:{call_id}".encode()).hexdigest()
                conn.execute(
                    "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                    "response_id, provider_call_id, tool_kind, tool_name, args_hash, execution_state, "
                    "result_summary_json, side_effecting, created_at, completed_at) "
                    "VALUES (?, ?, ?, 'anthropic', 'messages', NULL, ?, 'function', ?, ?, ?, ?, ?, ?, ?)",
                    (session_id, turn_id, f"{turn_id}:{call_id}", call_id, name, args_hash, state,
                     '{"ok":true}' if state == "completed" else None, 1 if name in ("bash", "write_file") else 0,
                     started_at, started_at if state == "completed" else None),
                )
    finally:
        conn.close()
