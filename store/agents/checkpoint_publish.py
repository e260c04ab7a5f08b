"""Publication heads and the end of runs in an open checkpoint store.

* :func:`publish_head` makes a run the session's publication head (a ``checkpoint`` or a ``reset``), guarded by
  the run still holding the session's fencing token (reference section 8);
* :func:`mark_run_failed` ends a run that staged nothing usable;
* finished runs that no version and no head names are pruned as heads move.

Staging (:mod:`store.agents.checkpoint_write`) publishes through :func:`publish_in` inside its own transaction,
so a capture never leaves a staged version without its head.
"""

from __future__ import annotations

from store.agents.checkpoint_db import CheckpointStore, StoreConn
from store.agents.checkpoint_engine import lock_suffix
from store.agents.checkpoint_model import (
    KIND_CHECKPOINT,
    KIND_RESET,
    InvalidSessionState,
    PublicationHead,
    RunFence,
    StaleFence,
    now_text,
)

clock = now_text
"""The clock of every checkpoint write (one patch of it pins the time of every write: the snapshot tests do)."""


def write_time() -> str:
    """The time a write records: :data:`clock`'s, looked up at each write."""
    return clock()


def publish_head(db: CheckpointStore, fence: RunFence, kind: str) -> PublicationHead:
    """Make ``fence``'s run the session's publication head (``kind`` is a checkpoint or a reset) in an open
    checkpoint file; :class:`StaleFence` when the run no longer holds the session's fence."""
    if kind not in (KIND_CHECKPOINT, KIND_RESET):
        raise InvalidSessionState(f"Unknown publication kind {kind!r}.")
    now = write_time()
    with db.write() as conn:
        if lock_suffix(conn):
            conn.execute(
                "SELECT session_id FROM agent_state_sessions WHERE session_id = ?" + lock_suffix(conn),
                (fence.session_id,),
            )
        publish_in(conn, fence, kind, now)
    return PublicationHead(run_id=fence.run_id, kind=kind)


def publish_in(conn: StoreConn, fence: RunFence, kind: str, now: str, *, prune: bool = True) -> None:
    """:func:`publish_head` inside an open write transaction. ``prune``: drop the session's finished runs that
    nothing names any more (False for a session created in this very transaction: it has no other run)."""
    row = conn.execute(
        "INSERT INTO agent_state_publications (session_id, run_id, checkpoint_reset, updated_at) "
        "SELECT r.session_id, r.run_id, ?, ? FROM agent_state_runs r JOIN agent_state_sessions s "
        "ON s.session_id = r.session_id WHERE r.session_id = ? AND r.run_id = ? AND r.fencing_token = ? "
        "AND r.fencing_token = s.runtime_fencing_token AND r.status IN ('running', 'waiting_decision') "
        "ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id, "
        "checkpoint_reset = excluded.checkpoint_reset, updated_at = excluded.updated_at RETURNING run_id",
        (kind == KIND_RESET, now, fence.session_id, fence.run_id, fence.fencing_token),
    ).fetchone()
    if row is None:
        raise StaleFence(f"The run {fence.run_id} no longer holds the session's fence; nothing was published.")
    conn.execute(
        "UPDATE agent_state_runs SET status = 'completed', finished_at = ? WHERE session_id = ? AND run_id = ?",
        (now, fence.session_id, fence.run_id),
    )
    if prune:
        prune_runs(conn, fence.session_id)


def prune_runs(conn: StoreConn, session_id: str) -> None:
    """Delete the session's completed and failed runs that no version and no head names."""
    conn.execute(
        "DELETE FROM agent_state_runs WHERE session_id = ? AND status IN ('completed', 'failed') "
        "AND run_id NOT IN (SELECT through_run_id FROM agent_state_versions WHERE session_id = ?) "
        "AND run_id NOT IN (SELECT run_id FROM agent_state_publications WHERE session_id = ?)",
        (session_id, session_id, session_id),
    )


def mark_run_failed(db: CheckpointStore, fence: RunFence) -> None:
    """Mark a run that staged nothing usable as failed (it keeps no lock; later runs supersede it anyway)."""
    with db.write() as conn:
        conn.execute(
            "UPDATE agent_state_runs SET status = 'failed', finished_at = ? WHERE session_id = ? AND run_id = ? "
            "AND status IN ('running', 'waiting_decision')",
            (write_time(), fence.session_id, fence.run_id),
        )
        prune_runs(conn, fence.session_id)


__all__ = ["mark_run_failed", "prune_runs", "publish_head", "publish_in", "write_time"]
