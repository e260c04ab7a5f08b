"""The lease heartbeat (reference 10.6's scheduler) and guards that own a held lease until released."""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.mothx.lease_model import (
    HEARTBEAT_INTERVAL_S,
    LEASE_TTL_S,
    RENEW_RETRY_SLEEP_S,
    Lease,
    LeaseOwner,
    LeaseSnapshot,
)
from store.mothx.lease_store import (
    AcquireFence,
    acquire_lease,
    bind_run,
    check_fence,
    database_identity,
    release_lease,
    renew_all,
    renew_lease,
)
from store.safetext import one_line

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from store.mothx.sessiondir import SessionDir


# ---------------------------------------------------------------------------------------------------------------
# Heartbeat scheduler


class _Heartbeat:
    """One thread per (owner, database) renewing all the owner's leases there in one transaction per tick."""

    def __init__(self, sd: SessionDir, owner: LeaseOwner, interval: float) -> None:
        self.sd = sd
        self.owner = owner
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def _should_exit(self) -> bool:
        """Decide to stop under the owner's mutex, so :func:`start_heartbeat` never reuses a stopping thread."""
        ident = database_identity(self.sd)
        with self.owner._mutex:  # noqa: SLF001
            idle = not any(
                lease.held and lease.database_identity == ident for lease in self.owner._held.values()  # noqa: SLF001
            )
            if idle or getattr(self.sd.db, "_closed", False) or self._stop.is_set():
                self._stop.set()
                if self.owner._schedulers.get(ident) is self:  # noqa: SLF001
                    del self.owner._schedulers[ident]  # noqa: SLF001
                return True
        return False

    def _run(self) -> None:
        while True:
            self._stop.wait(self.interval)
            if self._should_exit():
                return
            deadline = time.monotonic() + self.interval * 2
            while not self._stop.is_set():
                try:
                    renew_all(self.sd, self.owner)
                    break
                except StoreError:
                    # Busy or a transient failure: not a loss (newer builds). Retry briefly, then next tick.
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(RENEW_RETRY_SLEEP_S)


def start_heartbeat(sd: SessionDir, owner: LeaseOwner | None = None, interval: float = HEARTBEAT_INTERVAL_S) -> None:
    """Start (or reuse) the owner's heartbeat thread for this database."""
    who = owner or LeaseOwner.current()
    ident = database_identity(sd)
    with who._mutex:  # noqa: SLF001
        existing = who._schedulers.get(ident)  # noqa: SLF001
        if existing is not None and existing.alive():
            return
        who._schedulers[ident] = _Heartbeat(sd, who, interval)  # noqa: SLF001


# ---------------------------------------------------------------------------------------------------------------
# Guard


@dataclass
class LeaseGuard:
    """Owns the process-local lock and the durable lease; ``release()`` is idempotent."""

    sd: SessionDir
    lease: Lease
    owner: LeaseOwner

    @property
    def lost(self) -> threading.Event:
        """Set when a renewal found the lease taken over or released."""
        return self.lease.lost_signal

    @property
    def session_id(self) -> str:
        return self.lease.session_id

    @property
    def epoch(self) -> int:
        return self.lease.epoch

    def renew(self, *, now: int | None = None) -> None:
        renew_lease(self.sd, self.lease, owner=self.owner, now=now)

    def bind(self, conn: sqlite3.Connection, run_id: str, *, now: int | None = None) -> None:
        bind_run(conn, self.lease, run_id, now=now)

    def fence(self, conn: sqlite3.Connection, *, now: int | None = None, purpose: str | None = None,
              run_id: str | None = None) -> LeaseSnapshot | None:
        return check_fence(conn, self.lease, now=now, purpose=purpose, run_id=run_id)

    def release(self, *, now: int | None = None) -> bool:
        if self.lease.status == "released":
            return False
        return release_lease(self.sd, self.lease, owner=self.owner, now=now)

    def snapshot(self) -> Lease:
        return replace(self.lease)

    def __enter__(self) -> LeaseGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(sd: SessionDir, session_id: str, purpose: str, *, owner: LeaseOwner | None = None,
            heartbeat: bool = False, heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
            **fence: Unpack[AcquireFence]) -> LeaseGuard:
    """:func:`acquire_lease` (``fence``: its ``expected_run_id``, ``expected_epoch``, ``ttl``, ``now``) wrapped in a
    :class:`LeaseGuard`; ``heartbeat`` starts the renewal thread."""
    who = owner or LeaseOwner.current()
    lease = acquire_lease(sd, session_id, purpose, owner=who, **fence)
    guard = LeaseGuard(sd=sd, lease=lease, owner=who)
    if heartbeat:
        start_heartbeat(sd, who, heartbeat_interval)
    return guard


def acquire_mutation(sd: SessionDir, session_id: str, **kw: object) -> LeaseGuard:
    return acquire(sd, session_id, "mutation", **kw)  # type: ignore[arg-type]


def acquire_recovery(sd: SessionDir, session_id: str, expected_run_id: str, **kw: object) -> LeaseGuard:
    return acquire(sd, session_id, "recovery", expected_run_id=expected_run_id, **kw)  # type: ignore[arg-type]


def acquire_admission(sd: SessionDir, session_id: str, **kw: object) -> LeaseGuard:
    return acquire(sd, session_id, "admission", **kw)  # type: ignore[arg-type]


@dataclass
class LeaseGroup:
    """``mutation`` leases of several sessions for one multi-session change (reference 10.8)."""

    guards: list[LeaseGuard]

    def guard(self, session_id: str) -> LeaseGuard:
        for g in self.guards:
            if g.session_id == session_id:
                return g
        raise StoreError(f"This lease group holds no lease on session {one_line(session_id)}.")

    def release(self) -> None:
        """Release in reverse acquisition order; safe to call twice."""
        for g in reversed(self.guards):
            g.release()

    def __enter__(self) -> LeaseGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire_mutations(
    sd: SessionDir,
    session_ids: list[str] | tuple[str, ...],
    *,
    owner: LeaseOwner | None = None,
    ttl: int = LEASE_TTL_S,
    now: int | None = None,
) -> LeaseGroup:
    """``mutation`` leases on every session, taken in sorted id order; all or none."""
    who = owner or LeaseOwner.current()
    taken: list[LeaseGuard] = []
    try:
        for sid in sorted(set(session_ids)):
            taken.append(acquire(sd, sid, "mutation", owner=who, ttl=ttl, now=now))
    except BaseException:
        for g in reversed(taken):
            g.release(now=now)
        raise
    return LeaseGroup(taken)

