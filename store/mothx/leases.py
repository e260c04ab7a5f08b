"""Runtime leases on ``sessions.db`` (reference section 10): acquire, renew, release, bind, fence.

A lease is one row of ``session_runtime_leases`` per session. Its identity is the triple
(``owner_instance_id``, ``lease_token_hash``, ``epoch``); every durable write made under a lease checks that
triple inside its own write transaction (:func:`check_fence`). Times are Unix seconds from the SQLite clock.

Processes are modelled by :class:`LeaseOwner`: the real process has one (``LeaseOwner.current()``), and tests
may make more to stand in for other processes (each with its own instance id and process-local locks).

Tests may replace the clock: pass ``now=`` to any function, or install a clock with :func:`clock_override`.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import LeaseBusy, LeaseLost, SessionNotFound, StoreError
from store.mothx.schema import RUN_ACTIVE_STATUSES

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

LEASE_TTL_S = 15
HEARTBEAT_INTERVAL_S = 3.0
RENEW_RETRY_SLEEP_S = 0.2
OWNER_KIND = "process"

PURPOSES = ("run", "admission", "execution", "recovery", "mutation", "fork", "legacy")
IDLE_ONLY_PURPOSES = ("admission", "mutation", "fork")
BINDABLE_PURPOSES = ("admission", "run", "execution", "recovery")


# ---------------------------------------------------------------------------------------------------------------
# Errors (all are LeaseBusy: the lease could not be acquired)


class SessionRunActive(LeaseBusy):
    """``mutation`` / ``fork``: the session has an active durable run."""


class SessionRecoveryRequired(LeaseBusy):
    """``admission``: the session has an active durable run that requires reconciliation."""


class RecoveryNotNeeded(LeaseBusy):
    """``recovery``: the session has no active durable run to recover."""


class LeaseRunMismatch(LeaseBusy):
    """``recovery``: the active durable run is not the expected one (or there is more than one)."""


class LeaseEpochChanged(LeaseBusy):
    """The lease row's epoch differs from the one the caller read earlier (its facts are stale)."""


# ---------------------------------------------------------------------------------------------------------------
# Clock


_clock: Callable[[], int] | None = None


def set_clock(clock: Callable[[], int] | None) -> None:
    """Install (or remove, with ``None``) a clock that replaces the SQLite clock in this process (tests only)."""
    global _clock
    _clock = clock


@contextmanager
def clock_override(clock: Callable[[], int] | int) -> Iterator[None]:
    """Within the block every lease time comes from ``clock`` (a function, or a fixed number of seconds)."""
    previous = _clock
    set_clock(clock if callable(clock) else (lambda value=int(clock): value))
    try:
        yield
    finally:
        set_clock(previous)


def sqlite_now(conn: sqlite3.Connection, now: int | None = None) -> int:
    """``now`` when given, else the installed test clock, else ``CAST(strftime('%s','now') AS INTEGER)``."""
    if now is not None:
        return int(now)
    if _clock is not None:
        return int(_clock())
    row = conn.execute("SELECT CAST(strftime('%s','now') AS INTEGER)").fetchone()
    return int(row[0])


def format_unix(seconds: int) -> str:
    """Unix seconds as RFC 3339 UTC text (for messages)."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------------------------
# Rows and held leases


@dataclass(frozen=True)
class LeaseSnapshot:
    """One ``session_runtime_leases`` row as read at ``now`` (``valid`` = active and not expired)."""

    session_id: str
    owner_instance_id: str
    owner_pid: int
    owner_kind: str
    token_hash: str
    epoch: int
    run_id: str
    purpose: str
    state: str
    acquired_at: int
    heartbeat_at: int
    expires_at: int
    updated_at: int
    now: int

    @property
    def valid(self) -> bool:
        return self.state == "active" and self.expires_at > self.now

    @property
    def expired(self) -> bool:
        """Still marked active but past its expiry (nobody took it over yet)."""
        return self.state == "active" and self.expires_at <= self.now

    @property
    def seconds_left(self) -> int:
        return max(0, self.expires_at - self.now) if self.state == "active" else 0

    def describe_holder(self) -> str:
        """The holder in words: ``pid-… (pid 123, purpose execution, run r1)``."""
        run = f", run {self.run_id}" if self.run_id else ""
        return f"{self.owner_instance_id} (pid {self.owner_pid}, purpose {self.purpose}{run})"

    def describe(self) -> str:
        """The holder and expiry in one clause, for refusals."""
        if self.state != "active":
            return f"released by {self.describe_holder()} at epoch {self.epoch}"
        when = format_unix(self.expires_at)
        if self.valid:
            return f"held by {self.describe_holder()} at epoch {self.epoch}, valid until {when} ({self.seconds_left} s left)"
        return f"held by {self.describe_holder()} at epoch {self.epoch}, expired at {when}"


@dataclass
class Lease:
    """A lease this process holds (its identity is owner + token + epoch)."""

    session_dir: Path
    database_identity: str
    session_id: str
    owner_instance_id: str
    owner_pid: int
    owner_kind: str
    token_hash: str
    epoch: int
    run_id: str
    purpose: str
    acquired_at: int
    expires_at: int
    ttl: int = LEASE_TTL_S
    status: str = "held"  # held | released | lost
    lost_signal: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @property
    def lock_key(self) -> str:
        return lock_key(self.session_dir, self.session_id)

    @property
    def held(self) -> bool:
        return self.status == "held"

    def matches(self, row: LeaseSnapshot | None) -> bool:
        """True when ``row`` carries exactly this lease's identity."""
        return (
            row is not None
            and row.owner_instance_id == self.owner_instance_id
            and row.token_hash == self.token_hash
            and row.epoch == self.epoch
        )


def lock_key(session_dir: Path | str, session_id: str) -> str:
    """The process-local mutex key: canonical absolute session directory + NUL + session id."""
    return os.path.realpath(os.path.abspath(str(session_dir))) + "\x00" + session_id


def new_token_hash() -> str:
    """``hex(SHA-256(32 random bytes))``: a random per-acquisition identifier."""
    return hashlib.sha256(secrets.token_bytes(32)).hexdigest()


def new_instance_id(pid: int | None = None) -> str:
    return f"pid-{os.getpid() if pid is None else pid}-{secrets.token_hex(16)}"


class LeaseOwner:
    """One lease-holding process: its instance id, its process-local locks and the leases it holds.

    ``LeaseOwner.current()`` is the real process (created once per process id). Tests create extra owners to
    stand in for other processes sharing the directory.
    """

    _current: LeaseOwner | None = None
    _current_lock = threading.Lock()

    def __init__(self, instance_id: str | None = None, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.instance_id = instance_id or new_instance_id(self.pid)
        self._mutex = threading.Lock()
        self._locks: set[str] = set()
        self._held: dict[str, Lease] = {}  # token hash -> lease
        self._schedulers: dict[str, _Heartbeat] = {}

    def __repr__(self) -> str:
        return f"LeaseOwner({self.instance_id!r})"

    @classmethod
    def current(cls) -> LeaseOwner:
        with cls._current_lock:
            if cls._current is None or cls._current.pid != os.getpid():
                cls._current = LeaseOwner()
            return cls._current

    # process-local mutex -------------------------------------------------------------------------------------
    def try_lock(self, key: str) -> bool:
        with self._mutex:
            if key in self._locks:
                return False
            self._locks.add(key)
            return True

    def unlock(self, key: str) -> None:
        with self._mutex:
            self._locks.discard(key)

    def is_locked(self, key: str) -> bool:
        with self._mutex:
            return key in self._locks

    # registry ------------------------------------------------------------------------------------------------
    def register(self, lease: Lease) -> None:
        with self._mutex:
            self._held[lease.token_hash] = lease

    def forget(self, lease: Lease) -> None:
        with self._mutex:
            self._held.pop(lease.token_hash, None)

    def held_leases(self, database_identity: str | None = None) -> list[Lease]:
        with self._mutex:
            return [
                lease
                for lease in self._held.values()
                if lease.held and (database_identity is None or lease.database_identity == database_identity)
            ]

    def holds(self, row: LeaseSnapshot | None) -> bool:
        """True when this owner holds the exact lease ``row`` describes."""
        if row is None or row.owner_instance_id != self.instance_id:
            return False
        with self._mutex:
            lease = self._held.get(row.token_hash)
        return lease is not None and lease.held and lease.matches(row)

    def crash(self) -> None:
        """Die without touching the database (tests): everything held is forgotten, and the owner comes back
        as a new process would, with a new instance id."""
        with self._mutex:
            self.instance_id = new_instance_id(self.pid)
            schedulers = list(self._schedulers.values())
            self._schedulers.clear()
            for lease in self._held.values():
                lease.status = "lost"
            self._held.clear()
            self._locks.clear()
        for sched in schedulers:
            sched.stop()


# ---------------------------------------------------------------------------------------------------------------
# Notifications (the bus module plugs in here)


@dataclass(frozen=True)
class LeaseNotice:
    """The fields of a lease-bus message (reference 16.2) that describe one lease change."""

    session_id: str
    database_identity: str
    origin: str
    owner_instance_id: str
    owner_pid: int
    run_id: str
    epoch: int
    expires_at: int
    run_status: str = ""
    phase: str = ""


Publisher = Callable[[str, LeaseNotice], None]


def _no_publish(kind: str, notice: LeaseNotice) -> None:
    return None


_publisher: Publisher = _no_publish


def set_publisher(publisher: Publisher | None) -> None:
    """Install the function called with ``(type, notice)`` on acquired / released / lost / state_changed."""
    global _publisher
    _publisher = publisher or _no_publish


def publish(kind: str, lease: Lease, *, run_status: str = "", phase: str = "") -> None:
    """Hand one notice to the installed publisher. A failing publisher never breaks a lease operation."""
    notice = LeaseNotice(
        session_id=lease.session_id,
        database_identity=lease.database_identity,
        origin=lease.purpose or "runtime",
        owner_instance_id=lease.owner_instance_id,
        owner_pid=lease.owner_pid,
        run_id=lease.run_id,
        epoch=lease.epoch,
        expires_at=lease.expires_at,
        run_status=run_status,
        phase=phase,
    )
    try:
        _publisher(kind, notice)
    except Exception:  # noqa: BLE001 - the bus is best-effort by design
        pass


def publish_state_changed(lease: Lease, run_status: str, phase: str = "") -> None:
    """Announce a durable run transition made under ``lease`` (after its transaction committed)."""
    publish("state_changed", lease, run_status=run_status, phase=phase)


# ---------------------------------------------------------------------------------------------------------------
# Reads

_LEASE_COLUMNS = (
    "session_id, owner_instance_id, owner_pid, owner_kind, lease_token_hash, epoch, run_id, purpose, state, "
    "acquired_at, heartbeat_at, expires_at, updated_at"
)


def snapshot_from_row(row: tuple, now: int) -> LeaseSnapshot:
    return LeaseSnapshot(
        session_id=str(row[0]),
        owner_instance_id=str(row[1] or ""),
        owner_pid=int(row[2] or 0),
        owner_kind=str(row[3] or ""),
        token_hash=str(row[4] or ""),
        epoch=int(row[5] or 0),
        run_id=str(row[6] or ""),
        purpose=str(row[7] or ""),
        state=str(row[8] or ""),
        acquired_at=int(row[9] or 0),
        heartbeat_at=int(row[10] or 0),
        expires_at=int(row[11] or 0),
        updated_at=int(row[12] or 0),
        now=now,
    )


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
            f"SELECT {_LEASE_COLUMNS} FROM session_runtime_leases WHERE session_id = ?", (session_id,)
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
        rows = conn.execute(f"SELECT {_LEASE_COLUMNS} FROM session_runtime_leases {where} ORDER BY session_id").fetchall()
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


def _database_identity(sd: SessionDir) -> str:
    return os.path.realpath(os.path.abspath(str(sd.db_path)))


def _check_mode(conn: sqlite3.Connection, session_id: str, purpose: str, expected_run_id: str) -> None:
    active = active_run_ids(conn, session_id)
    if purpose == "admission" and active:
        raise SessionRecoveryRequired(
            f"Session {session_id} has an active durable run ({active[0]}) that requires reconciliation."
        )
    if purpose in ("mutation", "fork") and active:
        raise SessionRunActive(f"Session {session_id} has an active durable run ({active[0]}).")
    if purpose == "recovery":
        if not active:
            raise RecoveryNotNeeded(f"Session {session_id} has no active durable run to recover.")
        if len(active) != 1 or active[0] != expected_run_id:
            raise LeaseRunMismatch(
                f"Session {session_id}'s active run ({', '.join(active)}) does not match the expected run "
                f"{expected_run_id or '(none)'}."
            )


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
        raise StoreError(f"Unknown lease purpose '{purpose}'.")
    if purpose == "recovery" and not expected_run_id:
        raise StoreError("A recovery lease needs the id of the run it recovers.")
    sd.require_writable()
    who = owner or LeaseOwner.current()
    key = lock_key(sd.root, session_id)
    if not who.try_lock(key):
        raise LeaseBusy(f"Session {session_id} is already held by this process ({who.instance_id}).")
    try:
        with sd.db.write() as conn:
            t = sqlite_now(conn, now)
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise SessionNotFound(f"Session {session_id} does not exist, so no runtime lease can be taken.")
            row = read_lease(conn, session_id, now=t)
            reclaim = False
            if row is not None and row.valid:
                # Same-owner reclaim: our own process wrote the row but no longer holds that identity.
                reclaim = row.owner_instance_id == who.instance_id and not who.holds(row)
                if not reclaim:
                    raise LeaseBusy(f"Session {session_id} is {row.describe()}.")
            seen_epoch = row.epoch if row is not None else 0
            if expected_epoch is not None and seen_epoch != expected_epoch:
                raise LeaseEpochChanged(
                    f"Session {session_id}'s lease moved from epoch {expected_epoch} to {seen_epoch} since it was read."
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
                    raise LeaseBusy(f"Session {session_id}'s lease changed while it was being taken over.")
    except BaseException:
        who.unlock(key)
        raise
    lease = Lease(
        session_dir=Path(os.path.realpath(sd.root)),
        database_identity=_database_identity(sd),
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
        raise LeaseLost(f"The lease on session {lease.session_id} (epoch {lease.epoch}) is no longer held.")
    with sd.db.write() as conn:
        t = sqlite_now(conn, now)
        ok = _renew_in(conn, lease, t)
    if not ok:
        _mark_lost(lease, owner or LeaseOwner.current())
        raise LeaseLost(f"The lease on session {lease.session_id} (epoch {lease.epoch}) was taken over or released.")
    lease.expires_at = t + lease.ttl


def renew_all(sd: SessionDir, owner: LeaseOwner | None = None, *, now: int | None = None) -> list[Lease]:
    """Renew every lease ``owner`` holds in this database in one transaction; return the leases found lost."""
    who = owner or LeaseOwner.current()
    leases = who.held_leases(_database_identity(sd))
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
        raise LeaseLost(f"The lease on session {lease.session_id} could not be bound to run {run_id}: it was lost.")
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
    if lease is None:
        raise LeaseLost(f"Session {sid} has a runtime lease row ({row.describe()}) and this write holds no lease.")
    if not lease.held:
        raise LeaseLost(f"The lease on session {sid} (epoch {lease.epoch}) is no longer held by this process.")
    if not lease.matches(row):
        raise LeaseLost(f"The lease on session {sid} was lost: the row is now {row.describe()}.")
    if row.state != "active":
        raise LeaseLost(f"The lease on session {sid} (epoch {lease.epoch}) was released.")
    if row.expires_at <= row.now:
        raise LeaseLost(f"The lease on session {sid} (epoch {lease.epoch}) expired at {format_unix(row.expires_at)}.")
    if purpose is not None and row.purpose != purpose:
        raise LeaseLost(f"The lease on session {sid} has purpose {row.purpose}, not {purpose}.")
    if run_id is not None and row.run_id != run_id:
        raise LeaseLost(f"The lease on session {sid} is bound to run '{row.run_id}', not '{run_id}'.")
    return row


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

    def _should_exit(self) -> bool:
        """Decide to stop under the owner's mutex, so :func:`start_heartbeat` never reuses a stopping thread."""
        ident = _database_identity(self.sd)
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
    ident = _database_identity(sd)
    with who._mutex:  # noqa: SLF001
        existing = who._schedulers.get(ident)  # noqa: SLF001
        if existing is not None and existing._thread.is_alive() and not existing._stop.is_set():  # noqa: SLF001
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


def acquire(
    sd: SessionDir,
    session_id: str,
    purpose: str,
    *,
    expected_run_id: str = "",
    expected_epoch: int | None = None,
    ttl: int = LEASE_TTL_S,
    owner: LeaseOwner | None = None,
    now: int | None = None,
    heartbeat: bool = False,
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
) -> LeaseGuard:
    """:func:`acquire_lease` wrapped in a :class:`LeaseGuard`; ``heartbeat`` starts the renewal thread."""
    who = owner or LeaseOwner.current()
    lease = acquire_lease(
        sd, session_id, purpose, expected_run_id=expected_run_id, expected_epoch=expected_epoch, ttl=ttl,
        owner=who, now=now,
    )
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
        raise StoreError(f"This lease group holds no lease on session {session_id}.")

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
