"""The SQLite control plane of the event store: intent rows and the projection row, in ``sessions.db``.

The v43 layout has no table for event intents, so Sessionscope keeps them in two side tables of its own,
``sessionscope_event_intents`` and ``sessionscope_event_projection``. They live in ``sessions.db`` (not in a
file of their own) because the fenced commit must share one transaction with the lease row it is fenced by and
with the caller's finalize (run / turn rows); SQLite does not make a transaction over two WAL files atomic. They
are created with ``CREATE TABLE IF NOT EXISTS`` only inside the first write that needs them (prepare, rebuild),
never by a read or an open; every reader first asks ``sqlite_master`` and treats an absent table as "no intents".
Nothing of the mothx layout is altered, and the schema check ignores tables it does not know.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store.errors import StoreError

INTENTS_TABLE = "sessionscope_event_intents"
PROJECTION_TABLE = "sessionscope_event_projection"

PREPARED = "prepared"
APPENDED = "appended"
COMMITTED = "committed"
ABORTED = "aborted"
RECOVERY_REQUIRED = "recovery_required"
INTENT_STATES = (PREPARED, APPENDED, COMMITTED, ABORTED, RECOVERY_REQUIRED)
OPEN_STATES = (PREPARED, APPENDED, RECOVERY_REQUIRED)

DDL = (
    f"""CREATE TABLE IF NOT EXISTS {INTENTS_TABLE} (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL DEFAULT '',
    turn_id TEXT NOT NULL DEFAULT '',
    seq_from INTEGER NOT NULL,
    seq_to INTEGER NOT NULL,
    event_count INTEGER NOT NULL,
    digest TEXT NOT NULL,
    state TEXT NOT NULL,
    owner_instance_id TEXT NOT NULL DEFAULT '',
    lease_epoch INTEGER NOT NULL DEFAULT 0,
    lease_token_hash TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)""",
    f"CREATE INDEX IF NOT EXISTS idx_{INTENTS_TABLE}_session ON {INTENTS_TABLE}(session_id, state, seq_to)",
    f"""CREATE TABLE IF NOT EXISTS {PROJECTION_TABLE} (
    session_id TEXT PRIMARY KEY,
    next_seq INTEGER NOT NULL,
    batches INTEGER NOT NULL,
    events INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    last_batch_id TEXT NOT NULL,
    kinds_json TEXT NOT NULL,
    updated_at INTEGER NOT NULL
)""",
)

INTENT_COLUMNS = ("id, session_id, run_id, turn_id, seq_from, seq_to, event_count, digest, state, owner_instance_id, "
                  "lease_epoch, lease_token_hash, reason, created_at, updated_at")


class EventStoreNotHealthy(StoreError):
    """The event store cannot accept bytes now (its inspection is not ``healthy``); nothing was written."""


class EventIntentFenced(StoreError):
    """An event intent lost its fenced owner (or its state moved) between two steps; nothing more was written."""


class EventStoreUnreadable(StoreError):
    """The event store is corrupt or disagrees with its intents: no content of it is given out."""


@dataclass(frozen=True)
class EventIntentSpec:
    """The reservation for one batch. The owner fields come from the caller's own lease, never from a peer."""

    id: str
    session_id: str
    run_id: str
    turn_id: str
    seq_from: int
    seq_to: int
    digest: str
    owner_instance_id: str = ""
    lease_epoch: int = 0
    lease_token_hash: str = ""

    @property
    def count(self) -> int:
        return self.seq_to - self.seq_from + 1


@dataclass(frozen=True)
class EventIntent:
    """One intent row as read."""

    id: str
    session_id: str
    run_id: str
    turn_id: str
    seq_from: int
    seq_to: int
    count: int
    digest: str
    state: str
    owner_instance_id: str
    lease_epoch: int
    lease_token_hash: str
    reason: str
    created_at: int
    updated_at: int

    def fact(self) -> list[object]:
        return [self.id, self.state, self.seq_from, self.seq_to, self.count, self.digest, self.reason]


@dataclass(frozen=True)
class Projection:
    session_id: str
    next_seq: int
    batches: int
    events: int
    bytes: int
    last_batch_id: str
    kinds_json: str
    updated_at: int = 0

    def fact(self) -> list[object]:
        return [self.next_seq, self.batches, self.events, self.bytes, self.last_batch_id, self.kinds_json]


def has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (INTENTS_TABLE,)).fetchone() is not None


def has_projection(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                        (PROJECTION_TABLE,)).fetchone() is not None


def ensure_tables(conn: sqlite3.Connection) -> None:
    """Create the side tables inside the caller's write transaction (a no-op once they exist)."""
    if has_tables(conn) and has_projection(conn):
        return
    for statement in DDL:
        conn.execute(statement)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _str(value: object) -> str:
    return value if isinstance(value, str) else repr(value)


def _intent(row: tuple[object, ...]) -> EventIntent:
    return EventIntent(_str(row[0]), _str(row[1]), _str(row[2]), _str(row[3]), _int(row[4]), _int(row[5]), _int(row[6]),
                       _str(row[7]), _str(row[8]), _str(row[9]), _int(row[10]), _str(row[11]), _str(row[12]),
                       _int(row[13]), _int(row[14]))


def read_intents(conn: sqlite3.Connection, session_id: str) -> list[EventIntent]:
    """Every intent of a session in sequence order (``[]`` when the table does not exist)."""
    if not has_tables(conn):
        return []
    rows = conn.execute(f"SELECT {INTENT_COLUMNS} FROM {INTENTS_TABLE} WHERE session_id = ? ORDER BY seq_from, created_at, id",
                        (session_id,)).fetchall()
    return [_intent(r) for r in rows]


def sessions_with_intents(conn: sqlite3.Connection) -> list[str]:
    if not has_tables(conn):
        return []
    return [str(r[0]) for r in conn.execute(f"SELECT DISTINCT session_id FROM {INTENTS_TABLE} ORDER BY session_id")]


def open_intents(conn: sqlite3.Connection, session_id: str) -> list[EventIntent]:
    """The intents still in doubt or blocked (an indexed read, independent of the log's length)."""
    if not has_tables(conn):
        return []
    marks = ",".join("?" * len(OPEN_STATES))
    rows = conn.execute(f"SELECT {INTENT_COLUMNS} FROM {INTENTS_TABLE} WHERE session_id = ? AND state IN ({marks})",
                        (session_id, *OPEN_STATES)).fetchall()
    unknown = conn.execute(
        f"SELECT {INTENT_COLUMNS} FROM {INTENTS_TABLE} WHERE session_id = ? AND state NOT IN "
        f"({','.join('?' * len(INTENT_STATES))}) LIMIT 1", (session_id, *INTENT_STATES)).fetchall()
    return [_intent(r) for r in rows + unknown]


def last_committed(conn: sqlite3.Connection, session_id: str) -> EventIntent | None:
    if not has_tables(conn):
        return None
    row = conn.execute(f"SELECT {INTENT_COLUMNS} FROM {INTENTS_TABLE} WHERE session_id = ? AND state = ? "
                       "ORDER BY seq_to DESC LIMIT 1", (session_id, COMMITTED)).fetchone()
    return _intent(row) if row else None


def insert_prepared(conn: sqlite3.Connection, spec: EventIntentSpec, now: int) -> None:
    conn.execute(
        f"INSERT INTO {INTENTS_TABLE} ({INTENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?)",
        (spec.id, spec.session_id, spec.run_id, spec.turn_id, spec.seq_from, spec.seq_to, spec.count, spec.digest,
         PREPARED, spec.owner_instance_id, spec.lease_epoch, spec.lease_token_hash, now, now))


def transition(conn: sqlite3.Connection, intent_id: str, old: str, new: str, now: int, *, reason: str = "",
               spec: EventIntentSpec | None = None) -> bool:
    """``old`` → ``new`` for one intent (and, with ``spec``, only while it carries the spec's owner)."""
    sql = f"UPDATE {INTENTS_TABLE} SET state = ?, reason = ?, updated_at = ? WHERE id = ? AND state = ?"
    args: list[object] = [new, reason, now, intent_id, old]
    if spec is not None:
        sql += " AND owner_instance_id = ? AND lease_epoch = ? AND lease_token_hash = ?"
        args += [spec.owner_instance_id, spec.lease_epoch, spec.lease_token_hash]
    return conn.execute(sql, args).rowcount == 1


def read_projection(conn: sqlite3.Connection, session_id: str) -> Projection | None:
    if not has_projection(conn):
        return None
    row = conn.execute(f"SELECT session_id, next_seq, batches, events, bytes, last_batch_id, kinds_json, updated_at "
                       f"FROM {PROJECTION_TABLE} WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    return Projection(_str(row[0]), _int(row[1]), _int(row[2]), _int(row[3]), _int(row[4]), _str(row[5]),
                      _str(row[6]), _int(row[7]))


def write_projection(conn: sqlite3.Connection, p: Projection, now: int) -> None:
    conn.execute(
        f"INSERT INTO {PROJECTION_TABLE} (session_id, next_seq, batches, events, bytes, last_batch_id, kinds_json, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET next_seq = excluded.next_seq, "
        "batches = excluded.batches, events = excluded.events, bytes = excluded.bytes, "
        "last_batch_id = excluded.last_batch_id, kinds_json = excluded.kinds_json, updated_at = excluded.updated_at",
        (p.session_id, p.next_seq, p.batches, p.events, p.bytes, p.last_batch_id, p.kinds_json, now))
