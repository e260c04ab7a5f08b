"""The session log's compare-and-swap blobs in the checkpoint store (SQLite or PostgreSQL): a
:class:`~store.agents.sessionlog.CASEventLog` whose state is shared by every machine that reaches the store,
so a follower on another machine resumes from its cursor.

Each key is one row of ``agent_state_blobs`` (``blob_key``, ``value``, ``revision``). ``create`` is an
insert that does nothing when the key exists; ``compare_and_swap`` is one ``UPDATE … WHERE blob_key = ? AND
value = ?`` that changes the row only while it still holds the expected bytes, and tells by the rows it
changed whether it won. Each call is its own short transaction, so a lost race costs one statement and the
log's own retry loop (re-read, re-apply, swap again) does the rest, exactly as with any other blob store.
"""

from __future__ import annotations

from collections.abc import Callable

from store.agents import checkpoint_db
from store.agents.checkpoint_db import CheckpointStore
from store.agents.checkpoint_model import now_text
from store.agents.cursors import DEFAULT_MAX_EVENTS
from store.agents.sessionlog import CASEventLog
from store.agents.sessionlog_state import DEFAULT_CAS_RETRIES
from store.errors import EventStoreCorrupt
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


class SqlBlobStore:
    """A compare-and-swap :class:`~store.agents.sessionlog.BlobStore` on an open checkpoint store."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self.writes = 0
        self.attempts = 0

    def get(self, key: str) -> bytes | None:
        with self.store.read() as conn:
            row = conn.execute("SELECT value FROM agent_state_blobs WHERE blob_key = ?", (key,)).fetchone()
        if row is None:
            return None
        value = row[0]
        if isinstance(value, memoryview):
            return value.tobytes()
        if not isinstance(value, bytes):
            raise EventStoreCorrupt(f"The session log {one_line(key)} is not stored as bytes.")
        return value

    def create(self, key: str, value: bytes) -> bool:
        self.attempts += 1
        with self.store.write() as conn:
            cur = conn.execute(
                "INSERT INTO agent_state_blobs (blob_key, value, revision, updated_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (blob_key) DO NOTHING",
                (key, value, now_text()),
            )
            won = cur.rowcount == 1
        self.writes += won
        return won

    def compare_and_swap(self, key: str, expected: bytes, value: bytes) -> bool:
        self.attempts += 1
        with self.store.write() as conn:
            cur = conn.execute(
                "UPDATE agent_state_blobs SET value = ?, revision = revision + 1, updated_at = ? "
                "WHERE blob_key = ? AND value = ?",
                (value, now_text(), key, expected),
            )
            won = cur.rowcount == 1
        self.writes += won
        return won

    def close(self) -> None:
        self.store.close()


def open_blob_store(sd: SessionDir) -> SqlBlobStore:
    """The blobs of the checkpoint store in effect for ``sd`` (created in a write mode)."""
    store = checkpoint_db.open_state_db(sd, create=True)
    if store is None:
        raise EventStoreCorrupt("The checkpoint store cannot be opened for the session log.")
    return SqlBlobStore(store)


class SqlEventLog(CASEventLog):
    """A :class:`CASEventLog` whose blobs are the checkpoint store's; :meth:`close` closes that store."""

    def __init__(self, blobs: SqlBlobStore, prefix: str = "", max_events: int = DEFAULT_MAX_EVENTS,
                 max_retries: int = DEFAULT_CAS_RETRIES, new_generation: Callable[[], str] | None = None) -> None:
        super().__init__(blobs, prefix, max_events, max_retries, new_generation)
        self.sql_blobs = blobs

    def close(self) -> None:
        self.sql_blobs.close()


def sql_event_log(sd: SessionDir, prefix: str = "", max_events: int = DEFAULT_MAX_EVENTS,
                  max_retries: int = DEFAULT_CAS_RETRIES,
                  new_generation: Callable[[], str] | None = None) -> SqlEventLog:
    """The session log of ``sd``'s checkpoint store (SQLite or PostgreSQL, :func:`open_blob_store`)."""
    return SqlEventLog(open_blob_store(sd), prefix, max_events, max_retries, new_generation)


__all__ = ["SqlBlobStore", "SqlEventLog", "open_blob_store", "sql_event_log"]
