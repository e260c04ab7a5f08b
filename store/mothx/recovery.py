"""Fenced repairs: orphan recovery (reference 11.2), interrupted tool executions, expired-lease release — one
import for all of them.

Every repair calls ``sd.require_writable()`` first and works under a lease taken through :mod:`store.mothx.leases`
(``recovery`` for a run, ``mutation`` for the others), so a live runtime always wins: a valid foreign lease
refuses the repair and names its holder. A damaged row (a cell no runtime writes) refuses it as well.

* :mod:`store.mothx.recover_run` — :class:`RecoverRun` (``keep_remote`` / ``fail_local``), the reasons of 11.4;
* :mod:`store.mothx.lease_repair` — :class:`ReleaseExpiredLease`;
* :mod:`store.mothx.tool_repairs` — :func:`list_interrupted_tools`, :class:`AbandonToolExecutions`,
  :class:`RequestToolRecovery`;
* :mod:`store.mothx.repairs` — the catalogue and :func:`suggest` (= :func:`~store.mothx.repairs.suggest_repairs`).
"""

from __future__ import annotations

from store.mothx.lease_repair import ReleaseExpiredLease
from store.mothx.recover_run import (
    BACKOFF_CAP_S,
    BACKOFF_START_S,
    REASONS,
    RECOVERY_SOURCE,
    TRIGGER_OPERATOR,
    RecoverRun,
    RecoveryFailed,
    recovery_backoff,
)
from store.mothx.repairs import suggest_repairs as suggest
from store.mothx.tool_repairs import (
    TOOL_DONE_STATES,
    AbandonToolExecutions,
    DanglingToolCall,
    InterruptedTools,
    RequestToolRecovery,
    ToolExecution,
    list_interrupted_tools,
)

__all__ = [
    "BACKOFF_CAP_S", "BACKOFF_START_S", "REASONS", "RECOVERY_SOURCE", "TOOL_DONE_STATES", "TRIGGER_OPERATOR",
    "AbandonToolExecutions", "DanglingToolCall", "InterruptedTools", "RecoverRun", "RecoveryFailed",
    "ReleaseExpiredLease", "RequestToolRecovery", "ToolExecution", "list_interrupted_tools", "recovery_backoff",
    "suggest",
]
