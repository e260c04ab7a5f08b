"""The demo's event stores: four sessions' entries copied into event stores, two of them left in doubt.

* two sessions are healthy: every batch committed, their projection rows current;
* one (the **torn** one) ends in a torn tail: its last batch was being written when the writer died — a
  ``prepared`` intent whose event lines are there but whose footer was cut halfway;
* one (the **missing** one) has an intent left ``appended`` whose bytes are missing (the log ends at the batch
  before it, as after restoring an older copy of the folder).

``reconcile-events`` cuts the first one's tail and aborts its intent (healthy again), and marks the second's
intent ``recovery_required`` (blocked: its commit cannot be inferred). Everything is written with raw SQL and
plain file writes, deterministically (fixed ids, the demo's clock).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store.demo.model import DEMO_NOW_UNIX
from store.eventstore.intents import (
    APPENDED,
    COMMITTED,
    INTENTS_TABLE,
    PREPARED,
    ensure_tables,
    write_projection,
)
from store.eventstore.protocol import projection_of
from store.eventstore.records import ENTRY_COLUMNS, EventBatch, encode_batch, record_from_entry
from store.eventstore.segments import EVENTS_DIR, store_dir_name
from store.paths import SESSIONS_DB

BATCH = 6
SESSIONS = 4
ROLES = ("healthy", "healthy", "torn", "missing")


def demo_event_sessions(conn: sqlite3.Connection) -> list[str]:
    """The sessions the demo gives event stores: idle ones (no active lease, no active run), with 18 to 200
    entries, by id."""
    active = "'created', 'queued', 'running', 'waiting_for_approval', 'waiting_for_question', 'cancelling', 'terminalizing'"
    rows = conn.execute(
        "SELECT s.id FROM sessions s WHERE NOT EXISTS (SELECT 1 FROM session_runtime_leases l WHERE l.session_id = s.id "
        f"AND l.state = 'active') AND NOT EXISTS (SELECT 1 FROM session_runs r WHERE r.session_id = s.id AND r.status IN "
        f"({active})) AND (SELECT count(*) FROM entries e WHERE e.session_id = s.id) BETWEEN ? AND ? ORDER BY s.id LIMIT ?",
        (BATCH * 3, 200, SESSIONS)).fetchall()
    return [str(r[0]) for r in rows]


def _intent(conn: sqlite3.Connection, sid: str, batch_id: str, seq_from: int, count: int, digest: str,
            state: str, t: int) -> None:
    conn.execute(
        f"INSERT INTO {INTENTS_TABLE} (id, session_id, run_id, turn_id, seq_from, seq_to, event_count, digest, state, "
        "owner_instance_id, lease_epoch, lease_token_hash, reason, created_at, updated_at) "
        "VALUES (?, ?, '', '', ?, ?, ?, ?, ?, 'pid-4101-demo0000000000000000000000000', 1, ?, '', ?, ?)",
        (batch_id, sid, seq_from, seq_from + count - 1, count, digest, state, "0" * 64, t, t))


def add_to_demo(root: Path) -> None:
    conn = sqlite3.connect(root / SESSIONS_DB)
    try:
        with conn:
            ensure_tables(conn)
            sessions = demo_event_sessions(conn)
            for n, (sid, role) in enumerate(zip(sessions, ROLES, strict=False)):
                cols = ", ".join(ENTRY_COLUMNS)
                rows = [dict(zip(ENTRY_COLUMNS, r, strict=True)) for r in conn.execute(
                    f"SELECT {cols} FROM entries WHERE session_id = ? ORDER BY seq", (sid,))]
                records = [record_from_entry(r) for r in rows]
                chunks = [records[i:i + BATCH] for i in range(0, len(records), BATCH)]
                folder = root / EVENTS_DIR / store_dir_name(sid)
                folder.mkdir(parents=True, exist_ok=True)
                data = b""
                committed: list[EventBatch] = []
                seq = 1
                for k, chunk in enumerate(chunks):
                    batch_id = f"demo_{n + 1}_{k + 1:04d}"
                    lines, footer, digest = encode_batch(batch_id, seq, chunk)
                    t = DEMO_NOW_UNIX - 3600 + 60 * k
                    last = k == len(chunks) - 1
                    if last and role == "torn":
                        _intent(conn, sid, batch_id, seq, len(chunk), digest, PREPARED, t)
                        data += lines + footer[: len(footer) // 2]
                    elif last and role == "missing":
                        _intent(conn, sid, batch_id, seq, len(chunk), digest, APPENDED, t)
                    else:
                        _intent(conn, sid, batch_id, seq, len(chunk), digest, COMMITTED, t)
                        committed.append(EventBatch(batch_id, seq, seq + len(chunk) - 1, tuple(chunk), digest,
                                                    "seg-00000001.jsonl", len(data), len(lines) + len(footer)))
                        data += lines + footer
                    seq += len(chunk)
                (folder / "seg-00000001.jsonl").write_bytes(data)
                write_projection(conn, projection_of(sid, committed), DEMO_NOW_UNIX - 60)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
