"""Runtime lease operations on ``session_runtime_leases`` (reference 10.4–10.9): read, acquire, renew, release,
bind and fence. Every function runs inside one transaction of its own or of the caller.

A lease row holding foreign values (:attr:`LeaseSnapshot.problems`) is never taken over, renewed into or
fenced through: :class:`LeaseRowDamaged` / :class:`~store.errors.LeaseLost` name the damaged cells.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from store.errors import LeaseBusy, LeaseLost, SessionNotFound, StoreError
from store.mothx.lease_model import (
    BINDABLE_PURPOSES,
    LEASE_COLUMNS,
    LEASE_TTL_S,
    OWNER_KIND,
    PURPOSES,
    Lease,
    LeaseEpochChanged,
    LeaseOwner,
    LeaseRowDamaged,
    LeaseRunMismatch,
    LeaseSnapshot,
    RecoveryNotNeeded,
    SessionRecoveryRequired,
    SessionRunActive,
    lock_key,
    new_token_hash,
    publish,
    snapshot_from_row,
    sqlite_now,
)
from store.mothx.schema import RUN_ACTIVE_STATUSES
from store.safetext import one_line
from store.times import from_unix

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir


def _has_lease_table(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='session_runtime_leases'"
        ).fetchone()
        is not None
    )


def read_lease(conn: sqlite3.Connection, session_id: str, *, now: int | None = None) -> LeaseSnapshot | None:
    """The session's lease row inside the caller's transaction (``None`` when there is none)."""
    t = sqlite_now(conn, now)
    try:
        row = conn.execute(
            f"SELECT {LEASE_COLUMNS} FROM session_runtime_leases WHERE session_id = ?", (session_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        if not _has_lease_table(conn):
            return None
        raise
    return snapshot_from_row(row, t) if row else None


def get_lease(sd: SessionDir, session_id: str, *, now: int | None = None) -> LeaseSnapshot | None:
    """The session's lease row, read in one read transaction."""
    if not sd.schema.has("session_runtime_leases"):
        return None
    with sd.db.read() as conn:
        return read_lease(conn, session_id, now=now)


def list_leases(sd: SessionDir, *, active_only: bool = False, now: int | None = None) -> list[LeaseSnapshot]:
    """Every lease row (``active_only``: rows still marked active, expired or not), by session id."""
    if not sd.schema.has("session_runtime_leases"):
        return []
    where = "WHERE state = 'active'" if active_only else ""
    with sd.db.read() as conn:
        t = sqlite_now(conn, now)
        rows = conn.execute(f"SELECT {LEASE_COLUMNS} FROM session_runtime_leases {where} ORDER BY session_id").fetchall()
    return [snapshot_from_row(r, t) for r in rows]


def active_run_ids(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """The session's non-terminal runs, newest first (reference 8.2)."""
    marks = ",".join("?" * len(RUN_ACTIVE_STATUSES))
    rows = conn.execute(
        f"SELECT id FROM session_runs WHERE session_id = ? AND status IN ({marks}) ORDER BY started_at DESC",
        (session_id, *RUN_ACTIVE_STATUSES),
    ).fetchall()
    return [str(r[0]) for r in rows]


# ---------------------------------------------------------------------------------------------------------------
# Acquire


def database_identity(sd: SessionDir) -> str:
    return os.path.realpath(os.path.abspath(str(sd.db_path)))


def _check_mode(conn: sqlite3.Connection, session_id: str, purpose: str, expected_run_id: str) -> None:
    active = active_run_ids(conn, session_id)
    if purpose == "admission" and active:
        raise SessionRecoveryRequired(
            f"Session {one_line(session_id)} has an active durable run ({one_line(active[0])}) that requires reconciliation."
        )
    if purpose in ("mutation", "fork") and active:
        raise SessionRunActive(f"Session {one_line(session_id)} has an active durable run ({one_line(active[0])}).")
    if purpose == "recovery":
        if not active:
            raise RecoveryNotNeeded(f"Session {one_line(session_id)} has no active durable run to recover.")
        if len(active) != 1 or active[0] != expected_run_id:
            raise LeaseRunMismatch(
                f"Session {one_line(session_id)}'s active run ({one_line(', '.join(active))}) does not match the expected run "
                f"{one_line(expected_run_id) or '(none)'}."
            )


class AcquireFence(TypedDict, total=False):
    """The keyword arguments of :func:`acquire_lease` a caller passes on unchanged (defaults there)."""

    expected_run_id: str
    expected_epoch: int | None
    ttl: int
    now: int | None


def acquire_lease(
    sd: SessionDir,
    session_id: str,
    purpose: str,
    *,
    expected_run_id: str = "",
    expected_epoch: int | None = None,
    ttl: int = LEASE_TTL_S,
    owner: LeaseOwner | None = None,
    now: int | None = None,
) -> Lease:
    """Acquire the session's lease for ``purpose`` in one ``BEGIN IMMEDIATE`` transaction (reference 10.4).

    ``expected_epoch`` (0 = no row) fences the acquisition on an epoch read earlier: a different epoch raises
    :class:`LeaseEpochChanged`. The process-local lock stays taken until :func:`release_lease` (or the guard's
    ``release()``); on any failure it is freed again.
    """
    if purpose not in PURPOSES:
        raise StoreError(f"Unknown lease purpose '{one_line(purpose)}'.")
    if purpose == "recovery" and not expected_run_id:
        raise StoreError("A recovery lease needs the id of the run it recovers.")
    sd.require_writable()
    who = owner or LeaseOwner.current()
    key = lock_key(sd.root, session_id)
    if not who.try_lock(key):
        raise LeaseBusy(f"Session {one_line(session_id)} is already held by this process ({one_line(who.instance_id)}).")
    try:
        with sd.db.write() as conn:
            t = sqlite_now(conn, now)
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise SessionNotFound(f"Session {one_line(session_id)} does not exist, so no runtime lease can be taken.")
            row = read_lease(conn, session_id, now=t)
            if row is not None and row.problems:
                raise LeaseRowDamaged(
                    f"Session {one_line(session_id)}'s lease row is damaged ({row.damaged}): it is left as it is."
                )
            reclaim = False
            if row is not None and row.valid:
                # Same-owner reclaim: our own process wrote the row but no longer holds that identity.
                reclaim = row.owner_instance_id == who.instance_id and not who.holds(row)
                if not reclaim:
                    raise LeaseBusy(f"Session {one_line(session_id)} is {row.describe()}.")
            seen_epoch = row.epoch if row is not None else 0
            if expected_epoch is not None and seen_epoch != expected_epoch:
                raise LeaseEpochChanged(
                    f"Session {one_line(session_id)}'s lease moved from epoch {expected_epoch} to {seen_epoch} since it was read."
                )
            _check_mode(conn, session_id, purpose, expected_run_id)
            token = new_token_hash()
            run_id = expected_run_id if purpose == "recovery" else ""
            expires = t + ttl
            if row is None:
                conn.execute(
                    "INSERT INTO session_runtime_leases (session_id, owner_instance_id, owner_pid, owner_kind, "
                    "lease_token_hash, epoch, run_id, purpose, state, acquired_at, heartbeat_at, expires_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?, 'active', ?, ?, ?, ?)",
                    (session_id, who.instance_id, who.pid, OWNER_KIND, token, run_id, purpose, t, t, expires, t),
                )
                epoch = 1
            else:
                epoch = row.epoch + 1
                guard_sql = "(state != 'active' OR expires_at <= ?)"
                guard_args: tuple[object, ...] = (t,)
                if reclaim:
                    guard_sql = "owner_instance_id = ? AND lease_token_hash = ?"
                    guard_args = (row.owner_instance_id, row.token_hash)
                cur = conn.execute(
                    "UPDATE session_runtime_leases SET owner_instance_id = ?, owner_pid = ?, owner_kind = ?, "
                    "lease_token_hash = ?, epoch = ?, run_id = ?, purpose = ?, state = 'active', acquired_at = ?, "
                    "heartbeat_at = ?, expires_at = ?, updated_at = ? "
                    f"WHERE session_id = ? AND epoch = ? AND {guard_sql}",
                    (who.instance_id, who.pid, OWNER_KIND, token, epoch, run_id, purpose, t, t, expires, t,
                     session_id, row.epoch, *guard_args),
                )
                if cur.rowcount != 1:
                    raise LeaseBusy(f"Session {one_line(session_id)}'s lease changed while it was being taken over.")
    except BaseException:
        who.unlock(key)
        raise
    lease = Lease(
        session_dir=Path(os.path.realpath(sd.root)),
        database_identity=database_identity(sd),
        session_id=session_id,
        owner_instance_id=who.instance_id,
        owner_pid=who.pid,
        owner_kind=OWNER_KIND,
        token_hash=token,
        epoch=epoch,
        run_id=run_id,
        purpose=purpose,
        acquired_at=t,
        expires_at=expires,
        ttl=ttl,
    )
    who.register(lease)
    publish("acquired", lease)
    return lease


# ---------------------------------------------------------------------------------------------------------------
# Renew, release, bind, fence


def _renew_in(conn: sqlite3.Connection, lease: Lease, t: int) -> bool:
    cur = conn.execute(
        "UPDATE session_runtime_leases SET heartbeat_at = ?, expires_at = ?, updated_at = ? "
        "WHERE session_id = ? AND owner_instance_id = ? AND epoch = ? AND lease_token_hash = ? AND state = 'active'",
        (t, t + lease.ttl, t, lease.session_id, lease.owner_instance_id, lease.epoch, lease.token_hash),
    )
    return cur.rowcount == 1


def _mark_lost(lease: Lease, owner: LeaseOwner | None) -> None:
    if lease.status != "held":
        return
    lease.status = "lost"
    lease.lost_signal.set()
    if owner is not None:
        owner.forget(lease)
    publish("lost", lease)


def renew_lease(sd: SessionDir, lease: Lease, *, owner: LeaseOwner | None = None, now: int | None = None) -> None:
    """One fenced heartbeat (reference 10.6). 0 rows changed → the lease is lost: :class:`LeaseLost`."""
    if not lease.held:
        raise LeaseLost(f"The lease on session {one_line(lease.session_id)} (epoch {lease.epoch}) is no longer held.")
    with sd.db.write() as conn:
        t = sqlite_now(conn, now)
        ok = _renew_in(conn, lease, t)
    if not ok:
        _mark_lost(lease, owner or LeaseOwner.current())
        raise LeaseLost(f"The lease on session {one_line(lease.session_id)} (epoch {lease.epoch}) was taken over or released.")
    lease.expires_at = t + lease.ttl


def renew_all(sd: SessionDir, owner: LeaseOwner | None = None, *, now: int | None = None) -> list[Lease]:
    """Renew every lease ``owner`` holds in this database in one transaction; return the leases found lost."""
    who = owner or LeaseOwner.current()
    leases = who.held_leases(database_identity(sd))
    if not leases:
        return []
    lost: list[Lease] = []
    renewed: list[tuple[Lease, int]] = []
    with sd.db.write() as conn:
        t = sqlite_now(conn, now)
        for lease in leases:
            if _renew_in(conn, lease, t):
                renewed.append((lease, t + lease.ttl))
            else:
                lost.append(lease)
    for lease, expires in renewed:
        lease.expires_at = expires
    for lease in lost:
        _mark_lost(lease, who)
    return lost


def release_lease(sd: SessionDir, lease: Lease, *, owner: LeaseOwner | None = None, now: int | None = None) -> bool:
    """Release ``lease`` and keep a tombstone row (reference 10.8). Safe to call twice.

    Returns True when this call changed the row (``released`` is then published). The process-local lock is
    freed whatever happens in the database; when the tombstone cannot be written (the database is closed or
    busy) the row simply expires after its TTL.
    """
    who = owner or LeaseOwner.current()
    changed = False
    try:
        if lease.status == "held":
            with sd.db.write() as conn:
                t = sqlite_now(conn, now)
                cur = conn.execute(
                    "UPDATE session_runtime_leases SET state = 'released', expires_at = ?, heartbeat_at = ?, "
                    "updated_at = ? WHERE session_id = ? AND owner_instance_id = ? AND epoch = ? "
                    "AND lease_token_hash = ? AND state = 'active'",
                    (t, t, t, lease.session_id, lease.owner_instance_id, lease.epoch, lease.token_hash),
                )
                changed = cur.rowcount == 1
            if changed:
                lease.expires_at = t
    except StoreError:
        changed = False
    finally:
        if lease.status == "held":
            lease.status = "released"
        who.forget(lease)
        who.unlock(lease.lock_key)
    if changed:
        publish("released", lease)
    return changed


def bind_run(conn: sqlite3.Connection, lease: Lease, run_id: str, *, now: int | None = None) -> None:
    """Bind the lease to a new run inside the admission transaction (reference 10.7); purpose → ``execution``.

    0 rows changed → :class:`LeaseLost`. The caller's transaction must commit for the binding to hold.
    """
    t = sqlite_now(conn, now)
    cur = conn.execute(
        "UPDATE session_runtime_leases SET run_id = ?, purpose = 'execution', updated_at = ? "
        "WHERE session_id = ? AND owner_instance_id = ? AND epoch = ? AND lease_token_hash = ? "
        "AND state = 'active' AND expires_at > ? AND purpose IN (?, ?, ?, ?) AND (run_id = '' OR run_id = ?)",
        (run_id, t, lease.session_id, lease.owner_instance_id, lease.epoch, lease.token_hash, t,
         *BINDABLE_PURPOSES, run_id),
    )
    if cur.rowcount != 1:
        raise LeaseLost(f"The lease on session {one_line(lease.session_id)} could not be bound to run {one_line(run_id)}: it was lost.")
    lease.run_id = run_id
    lease.purpose = "execution"


def check_fence(
    conn: sqlite3.Connection,
    lease: Lease | None,
    *,
    session_id: str | None = None,
    now: int | None = None,
    purpose: str | None = None,
    run_id: str | None = None,
) -> LeaseSnapshot | None:
    """The fence of every durable write (reference 10.9), inside the caller's write transaction.

    No row → allowed. A row → it must be active, unexpired and carry ``lease``'s owner, token and epoch
    (and, when given, ``purpose`` and ``run_id``); otherwise :class:`LeaseLost`. Returns the row read.
    """
    sid = lease.session_id if lease is not None else session_id
    if sid is None:
        raise StoreError("check_fence needs a lease or a session id.")
    row = read_lease(conn, sid, now=now)
    if row is None:
        return None
    if row.problems:
        raise LeaseLost(f"The lease row of session {one_line(sid)} is damaged ({row.damaged}): no write is fenced by it.")
    if lease is None:
        raise LeaseLost(f"Session {one_line(sid)} has a runtime lease row ({row.describe()}) and this write holds no lease.")
    if not lease.held:
        raise LeaseLost(f"The lease on session {one_line(sid)} (epoch {lease.epoch}) is no longer held by this process.")
    if not lease.matches(row):
        raise LeaseLost(f"The lease on session {one_line(sid)} was lost: the row is now {row.describe()}.")
    if row.state != "active":
        raise LeaseLost(f"The lease on session {one_line(sid)} (epoch {lease.epoch}) was released.")
    if row.expires_at <= row.now:
        raise LeaseLost(f"The lease on session {one_line(sid)} (epoch {lease.epoch}) expired at {from_unix(row.expires_at)}.")
    if purpose is not None and row.purpose != purpose:
        raise LeaseLost(f"The lease on session {one_line(sid)} has purpose {one_line(row.purpose)}, not {one_line(purpose)}.")
    if run_id is not None and row.run_id != run_id:
        raise LeaseLost(f"The lease on session {one_line(sid)} is bound to run '{one_line(row.run_id)}', not '{one_line(run_id)}'.")
    return row

