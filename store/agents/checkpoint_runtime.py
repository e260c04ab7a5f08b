"""The runtime configuration guard of agent checkpoints: configuration generations and agent-wide reset leases.

A runtime process is created from one configuration generation (epoch) of its agent; :func:`guard_runtime_sync`
runs a write only while that generation is current and no agent-wide reset holds the publication lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from store.agents.checkpoint_db import StoreConn
from store.agents.checkpoint_engine import lock_suffix
from store.agents.checkpoint_model import (
    InvalidSessionState,
    RuntimeConfigEpoch,
    RuntimeConfigResetInProgress,
    RuntimeConfigStale,
    now_text,
    stored_int,
)
from store.agents.checkpoint_read import (
    has_tables,
    require_state_writable,
    state_db,
)
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line

T = TypeVar("T")

def ensure_agent(conn: StoreConn, agent_id: str, now: str = "") -> None:
    """Add the agent's row (configuration epoch 0) unless it exists; ``now`` is its creation time."""
    conn.execute(
        "INSERT INTO agent_state_agents (agent_id, created_at) VALUES (?, ?) ON CONFLICT (agent_id) DO NOTHING",
        (agent_id, now or now_text()),
    )

# ------------------------------------------------------------------------------ runtime configuration guard


def runtime_config_epoch(sd: SessionDir, agent_id: str, agent_session_id: str | None = None) -> RuntimeConfigEpoch:
    """The agent's (and optionally the agent session's) runtime configuration generation; 0 when unknown."""
    with state_db(sd) as db:
        if db is None:
            return RuntimeConfigEpoch(0, 0)
        with db.read() as conn:
            if not has_tables(conn):
                return RuntimeConfigEpoch(0, 0)
            row = conn.execute(
                "SELECT runtime_config_epoch FROM agent_state_agents WHERE agent_id = ?", (agent_id,)
            ).fetchone()
            session = 0
            if agent_session_id is not None:
                srow = conn.execute(
                    "SELECT runtime_config_epoch FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
                    (agent_id, agent_session_id),
                ).fetchone()
                session = stored_int(srow[0], "the session's configuration epoch") if srow else 0
    return RuntimeConfigEpoch(stored_int(row[0], "the agent's configuration epoch") if row else 0, session)


def advance_runtime_config_epoch(sd: SessionDir, agent_id: str) -> int:
    """Start a new configuration generation for an agent (processes created earlier become stale)."""
    require_state_writable(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        with db.write() as conn:
            ensure_agent(conn, agent_id)
            row = conn.execute(
                "UPDATE agent_state_agents SET runtime_config_epoch = runtime_config_epoch + 1 WHERE agent_id = ? "
                "RETURNING runtime_config_epoch",
                (agent_id,),
            ).fetchone()
            return stored_int(row[0] if row else None, "the agent's configuration epoch")


def set_runtime_reset_lease(sd: SessionDir, agent_id: str, token: str | None, expires_at: str | None) -> None:
    """Hold (token and expiry, RFC 3339) or clear (both None) an agent-wide reset lease."""
    if (token is None) != (expires_at is None):
        raise InvalidSessionState("A reset lease needs both a token and an expiry, or neither.")
    require_state_writable(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        with db.write() as conn:
            ensure_agent(conn, agent_id)
            conn.execute(
                "UPDATE agent_state_agents SET runtime_reset_token = ?, runtime_reset_expires_at = ? WHERE agent_id = ?",
                (token, expires_at, agent_id),
            )


def guard_runtime_sync(sd: SessionDir, agent_id: str, expected_epoch: int, action: Callable[[], T]) -> T:
    """Run ``action`` while holding the agent's configuration lock, if its epoch is still ``expected_epoch``.

    No agent row → :class:`RuntimeConfigStale`; a live reset lease → :class:`RuntimeConfigResetInProgress`;
    another epoch → :class:`RuntimeConfigStale`.
    """
    require_state_writable(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        with db.write() as conn:
            row = conn.execute(
                "SELECT runtime_config_epoch, runtime_reset_token, runtime_reset_expires_at FROM agent_state_agents "
                "WHERE agent_id = ?" + lock_suffix(conn),
                (agent_id,),
            ).fetchone()
            if row is None:
                raise RuntimeConfigStale(f"The runtime configuration generation of {one_line(agent_id)} is stale (no agent row).")
            epoch, token, expires = stored_int(row[0], "the agent's configuration epoch"), row[1], row[2]
            if token is not None and str(expires) > now_text():
                raise RuntimeConfigResetInProgress(f"An agent runtime reset of {one_line(agent_id)} is in progress.")
            if epoch != expected_epoch:
                raise RuntimeConfigStale(
                    f"The runtime configuration generation of {one_line(agent_id)} is stale: expected epoch "
                    f"{expected_epoch}, found {epoch}."
                )
            return action()
