"""Runtime leases on ``sessions.db`` (reference section 10): one import for the whole lease API.

A lease is one row of ``session_runtime_leases`` per session. Its identity is the triple
(``owner_instance_id``, ``lease_token_hash``, ``epoch``); every durable write made under a lease checks that
triple inside its own write transaction (:func:`check_fence`). Times are Unix seconds from the SQLite clock.

* :mod:`store.mothx.lease_model` — constants, errors, the clock (``now=`` / :func:`clock_override` for tests),
  :class:`LeaseSnapshot` (a row, with ``problems`` for foreign cells), :class:`Lease`, :class:`LeaseOwner`
  (one per process; tests make more to stand in for other processes) and the bus notices.
* :mod:`store.mothx.lease_store` — read, acquire (CAS takeover), renew, release, bind, fence.
* :mod:`store.mothx.lease_guard` — the heartbeat thread, :class:`LeaseGuard`, :class:`LeaseGroup`.
"""

from __future__ import annotations

from store.mothx.lease_guard import (
    LeaseGroup,
    LeaseGuard,
    acquire,
    acquire_admission,
    acquire_mutation,
    acquire_mutations,
    acquire_recovery,
    start_heartbeat,
)
from store.mothx.lease_model import (
    BINDABLE_PURPOSES,
    HEARTBEAT_INTERVAL_S,
    IDLE_ONLY_PURPOSES,
    LEASE_COLUMNS,
    LEASE_STATES,
    LEASE_TTL_S,
    OWNER_KIND,
    PURPOSES,
    RENEW_RETRY_SLEEP_S,
    Lease,
    LeaseEpochChanged,
    LeaseNotice,
    LeaseOwner,
    LeaseRowDamaged,
    LeaseRunMismatch,
    LeaseSnapshot,
    Publisher,
    RecoveryNotNeeded,
    SessionRecoveryRequired,
    SessionRunActive,
    clock_override,
    lock_key,
    new_instance_id,
    new_token_hash,
    publish,
    publish_state_changed,
    set_clock,
    set_publisher,
    snapshot_from_row,
    sqlite_now,
)
from store.mothx.lease_store import (
    acquire_lease,
    active_run_ids,
    bind_run,
    check_fence,
    database_identity,
    get_lease,
    list_leases,
    read_lease,
    release_lease,
    renew_all,
    renew_lease,
)

__all__ = [
    "BINDABLE_PURPOSES", "HEARTBEAT_INTERVAL_S", "IDLE_ONLY_PURPOSES", "LEASE_COLUMNS", "LEASE_STATES", "LEASE_TTL_S",
    "OWNER_KIND", "PURPOSES", "RENEW_RETRY_SLEEP_S", "Lease", "LeaseEpochChanged", "LeaseGroup", "LeaseGuard",
    "LeaseNotice", "LeaseOwner", "LeaseRowDamaged", "LeaseRunMismatch", "LeaseSnapshot", "Publisher",
    "RecoveryNotNeeded", "SessionRecoveryRequired", "SessionRunActive", "acquire", "acquire_admission",
    "acquire_lease", "acquire_mutation", "acquire_mutations", "acquire_recovery", "active_run_ids", "bind_run",
    "check_fence", "clock_override", "database_identity", "get_lease", "list_leases", "lock_key", "new_instance_id",
    "new_token_hash", "publish", "publish_state_changed", "read_lease", "release_lease", "renew_all", "renew_lease",
    "set_clock", "set_publisher", "snapshot_from_row", "sqlite_now", "start_heartbeat",
]
