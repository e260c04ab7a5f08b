"""Runtime leases (reference section 10): constants, errors, the clock, rows, held leases, owners and notices.

The operations on the table live in :mod:`store.mothx.lease_store` (acquire, renew, release, bind, fence) and
:mod:`store.mothx.lease_guard` (heartbeat, guards); :mod:`store.mothx.leases` gathers all three.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from store.errors import LeaseBusy
from store.mothx.cells import INT64_MAX, Cells, joined
from store.safetext import one_line
from store.times import FAR_FUTURE_S, from_unix, time_left


class Scheduler(Protocol):
    """A per-directory heartbeat thread (see :mod:`store.mothx.lease_guard`)."""

    def stop(self) -> None: ...

    def alive(self) -> bool: ...


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


class LeaseRowDamaged(LeaseBusy):
    """The session's lease row holds values no runtime writes (a foreign row): nobody may take it over."""


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
    if callable(clock):
        set_clock(clock)
    else:
        fixed = int(clock)
        set_clock(lambda: fixed)
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
    problems: tuple[str, ...] = ()  # one per damaged cell ("session_runtime_leases.epoch holds TEXT 'x'")

    @property
    def damaged(self) -> str:
        """The damaged cells in one clause, ``''`` for a sound row."""
        return joined(self.problems)

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
        run = f", run {one_line(self.run_id)}" if self.run_id else ""
        return f"{one_line(self.owner_instance_id)} (pid {self.owner_pid}, purpose {one_line(self.purpose)}{run})"

    def describe(self) -> str:
        """The holder and expiry in one clause, for refusals (safe for one line)."""
        if self.problems:
            return f"a damaged lease row ({self.damaged})"
        if self.state != "active":
            return f"released by {self.describe_holder()} at epoch {self.epoch}"
        when = from_unix(self.expires_at)
        if self.valid:
            return f"held by {self.describe_holder()} at epoch {self.epoch}, valid until {when} ({'expires ' + time_left(self.seconds_left) if self.seconds_left <= FAR_FUTURE_S else 'far in the future'})"
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
        self._schedulers: dict[str, Scheduler] = {}

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
# Rows

LEASE_COLUMNS = (
    "session_id, owner_instance_id, owner_pid, owner_kind, lease_token_hash, epoch, run_id, purpose, state, "
    "acquired_at, heartbeat_at, expires_at, updated_at"
)
LEASE_STATES = ("active", "released")


def snapshot_from_row(row: Sequence[object], now: int) -> LeaseSnapshot:
    """A lease row read at ``now``; a foreign cell is recorded in ``problems``, never raised."""
    c = Cells("session_runtime_leases", row)
    snap = LeaseSnapshot(
        session_id=c.text(0, "session_id"),
        owner_instance_id=c.text(1, "owner_instance_id"),
        owner_pid=c.integer(2, "owner_pid"),
        owner_kind=c.text(3, "owner_kind"),
        token_hash=c.text(4, "lease_token_hash"),
        epoch=c.integer(5, "epoch", upper=INT64_MAX - 1),  # a takeover writes epoch + 1
        run_id=c.text(6, "run_id"),
        purpose=c.text(7, "purpose"),
        state=c.text(8, "state"),
        acquired_at=c.integer(9, "acquired_at"),
        heartbeat_at=c.integer(10, "heartbeat_at"),
        expires_at=c.integer(11, "expires_at"),
        updated_at=c.integer(12, "updated_at"),
        now=now,
    )
    problems = list(c.problems)
    if snap.state and snap.state not in LEASE_STATES and not any(".state " in p for p in problems):
        problems.append(f"session_runtime_leases.state holds TEXT '{one_line(snap.state)[:40]}', not a lease state")
    return replace(snap, problems=tuple(problems)) if problems else snap
