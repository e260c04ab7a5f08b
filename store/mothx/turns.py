"""Entries appended by runs and conversation turns (reference 7.3, 9): the leaf check, ``turn_start`` /
``turn_end`` entries and the ``conversation_turns`` rows they mirror."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.mothx.cells import as_text
from store.mothx.run_model import (
    TURN_COLUMNS,
    AppendedEntry,
    ConversationTurn,
    Run,
    has_table,
    new_id,
    turn_from_row,
)
from store.safetext import one_line
from store.times import format_rfc3339

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir


class SessionModified(StoreError):
    """An entry append whose ``parentId`` is no longer the session's leaf (reference 7.3)."""


def leaf_id(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The id the next append must carry as ``parentId`` (reference 7.3's check statement)."""
    row = conn.execute(
        "SELECT id FROM entries WHERE session_id = ? AND type != 'session' ORDER BY seq DESC LIMIT 1", (session_id,)
    ).fetchone()
    return None if row is None else as_text(row[0])


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
            f"Session {one_line(session_id)} was modified (its leaf is {one_line(leaf)}, not "
            f"{one_line(expected_parent)}): reopen it before writing."
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


def _turn_run_ids(conn: sqlite3.Connection, session_id: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT data FROM entries WHERE session_id = ? AND type = 'turn_start' ORDER BY seq", (session_id,)
    ).fetchall()
    found: dict[str, str] = {}
    for (data,) in rows:
        try:
            obj = json.loads(data)
        except (ValueError, TypeError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("turnId"), str):
            run_id = obj.get("runId")
            found[obj["turnId"]] = run_id if isinstance(run_id, str) else ""
    return found


def turns_conn(conn: sqlite3.Connection, session_id: str, *, open_only: bool = False) -> list[ConversationTurn]:
    if not has_table(conn, None, "conversation_turns"):
        return []
    where = "session_id = ?" + (" AND status = 'open'" if open_only else "")
    rows = conn.execute(
        f"SELECT {TURN_COLUMNS} FROM conversation_turns WHERE {where} ORDER BY start_seq, id", (session_id,)
    ).fetchall()
    run_ids = _turn_run_ids(conn, session_id) if rows else {}
    return [turn_from_row(r, run_ids.get(as_text(r[0]), "")) for r in rows]


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
        raise StoreError(f"Turn {one_line(turn.id)} was closed by someone else.")
    return entry
