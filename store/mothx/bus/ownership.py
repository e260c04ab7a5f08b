"""The ownership cache of reference 16.5: who holds which session's lease, as far as the bus has said.

Keyed by ``(databaseIdentity, sessionId)``. :meth:`OwnershipCache.lookup` answers ``known`` / ``uncertain`` /
``unknown`` (never "idle"): only ``known`` may be shown without a database read, and nothing is ever authorized by
it.

Per-origin sequence numbers (16.5, hardened against forgery)
------------------------------------------------------------
The bus is unauthenticated, so ``seq`` is a hint about ordering, not a fact. For each ``originInstanceId`` the
cache keeps a high-water mark ``last`` (the highest *plausible* seq seen); ``seq = 0`` means unnumbered and is
not tracked. With ``ahead = seq - last``:

* the first numbered message of an origin sets ``last``;
* ``ahead == 1``: in order;
* ``1 < ahead <= SEQ_JUMP_LIMIT`` (2**20): a gap (messages were lost) — every entry of that origin is marked
  uncertain, ``last`` advances;
* ``ahead > SEQ_JUMP_LIMIT``: an implausible jump (e.g. a forged ``seq = 2**64 - 1``). The message is taken
  like a gap (its origin's entries become uncertain, the hint is delivered) but ``last`` does **not** advance, so
  the real sender's next messages (``last + 1``, ``last + 2`` …) are still delivered;
* ``-SEQ_REORDER_WINDOW <= ahead <= 0`` (``seq <= last``, at most 64 below): stale — the message is dropped,
  as the reference says (exact replays are already dropped by ``messageId`` in the listener);
* ``ahead < -SEQ_REORDER_WINDOW``: far below the mark. No sender re-orders that much on loopback, so this is a
  restart of that origin's numbering — or a forged high mark that slipped in, e.g. as an origin's first message
  before we heard the real one. The window is reset (``last = seq``), the origin's entries become uncertain and
  the message is delivered.

So one forged datagram cannot mute an origin: a forged jump never moves the mark, and a forged mark that did get
in (a first message, or a jump of at most 2**20) silences the real sender for at most ``SEQ_REORDER_WINDOW``
messages before its numbering is taken as a restart. The cost of the deviation from 16.5 is only on the safe
side: a restart or a jump marks the origin's entries uncertain, which means "re-read SQLite".
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from store.mothx.bus.message import (
    LIVENESS_WINDOW_S,
    MAX_CACHE_ENTRIES,
    MAX_TRACKED_ORIGINS,
    BusMessage,
)

if TYPE_CHECKING:
    from store.mothx.leases import LeaseSnapshot

SEQ_JUMP_LIMIT = 1 << 20
"""A seq more than this far above an origin's mark is implausible: delivered, but the mark does not move."""

SEQ_REORDER_WINDOW = 64
"""A seq at most this far below an origin's mark is stale (dropped); further below, the origin restarted."""


class OwnershipState(str, Enum):
    KNOWN = "known"          # a fresh entry: the lease is held by entry.owner_instance_id
    UNCERTAIN = "uncertain"  # stale, expired, gap- or conflict-marked: re-read SQLite
    UNKNOWN = "unknown"      # no entry: re-read SQLite (absence never means "idle")


@dataclass(frozen=True)
class OwnershipEntry:
    """One process's hint of who holds a session's lease (never an authorization)."""

    database_identity: str
    session_id: str
    owner_instance_id: str
    owner_pid: int
    epoch: int
    purpose: str
    run_id: str
    run_status: str
    phase: str
    expires_at: int          # Unix seconds (0 = not announced)
    seq: int
    origin_instance_id: str
    applied_at: float        # cache clock
    from_database: bool = False
    uncertain_reason: str = ""  # "" | "conflict" | "marked" | "epoch" | "jump" | "restart" (see lookup())
    tick: int = 0               # write stamp: origin and database marks made after it apply to the entry


@dataclass(frozen=True)
class OwnershipLookup:
    """Answer of :meth:`OwnershipCache.lookup`. Only ``known`` may be projected without a database read."""

    state: OwnershipState
    entry: OwnershipEntry | None = None
    reason: str = ""  # why uncertain: gap | jump | restart | conflict | marked | epoch | stale | expired;
    #                   "absent" when unknown

    @property
    def known(self) -> bool:
        return self.state is OwnershipState.KNOWN

    @property
    def needs_read(self) -> bool:
        return self.state is not OwnershipState.KNOWN


@dataclass(frozen=True)
class ApplyResult:
    """What :meth:`OwnershipCache.apply` did with one message."""

    dropped: bool = False     # a stale seq for its origin: the message must be ignored entirely
    applied: bool = False     # the cache changed
    gap: bool = False         # a sequence gap (or a jump or restart) was seen for the origin
    uncertain: bool = False   # the message's session is now uncertain (or unknown) in the cache
    stale: bool = False       # ignored because its epoch is older than the entry's
    jump: bool = False        # an implausible seq jump: delivered, the origin's mark kept (see the module doc)
    restart: bool = False     # a seq far below the origin's mark: its numbering restarted (mark reset)


@dataclass(frozen=True)
class CacheStats:
    applied: int
    gaps: int
    seq_jumps: int
    seq_restarts: int
    conflicts: int
    stale_seq: int
    stale_epoch: int
    uncertain_lookups: int
    entries: int
    origins: int


Key = tuple[str, str]


class OwnershipCache:
    """Ownership hints keyed by ``(databaseIdentity, sessionId)`` with the rules of reference 16.5.

    Thread-safe. ``clock`` returns seconds (wall time: ``expires_at`` is compared with it); tests inject one.

    Every operation on one message is O(1), so a flood cannot make the listener's thread spin: the dict of
    entries is kept in write order (the oldest write is forgotten first), and marking every entry of an origin
    (a gap) or of a database (``database_rebuilt``) is lazy — a mark is a stamp, and an entry written before the
    stamp reads as uncertain. Marks are bounded too: a forgotten one raises a floor below which every entry is
    uncertain (the safe side). :meth:`lookup` is the truth; ``entry.uncertain_reason`` holds only the per-entry
    reasons.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, liveness_s: float = LIVENESS_WINDOW_S,
                 max_entries: int = MAX_CACHE_ENTRIES, max_origins: int = MAX_TRACKED_ORIGINS) -> None:
        self._clock = clock
        self.liveness_s = liveness_s
        self._max_entries = max_entries
        self._max_origins = max_origins
        self._lock = threading.Lock()
        self._entries: dict[Key, OwnershipEntry] = {}
        self._last_seq: OrderedDict[str, int] = OrderedDict()
        self._tick = 0
        self._floor = 0  # entries stamped below it are uncertain (a mark was forgotten)
        self._origin_marks: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._db_marks: OrderedDict[str, int] = OrderedDict()
        self._db_counts: dict[str, int] = {}
        self._applied = 0
        self._gaps = 0
        self._jumps = 0
        self._restarts = 0
        self._conflicts = 0
        self._stale_seq = 0
        self._stale_epoch = 0
        self._uncertain_lookups = 0

    # messages --------------------------------------------------------------------------------------------------
    def apply(self, msg: BusMessage) -> ApplyResult:
        """Fold one validated message into the cache."""
        with self._lock:
            now = self._clock()
            gap = False
            origin = msg.origin_instance_id
            jump = restart = False
            if msg.seq > 0:
                verdict = self._sequence(origin, msg.seq)
                if verdict == "stale":
                    self._stale_seq += 1
                    return ApplyResult(dropped=True)
                gap = verdict in ("gap", "jump", "restart")
                jump, restart = verdict == "jump", verdict == "restart"
                if gap:
                    self._mark_origin(origin, "gap" if verdict == "gap" else verdict)
            if msg.type == "database_rebuilt":
                ident = msg.database_identity or msg.path
                changed = self._mark_database(ident)
                if changed:
                    self._applied += 1
                return ApplyResult(applied=changed, gap=gap, uncertain=True, jump=jump, restart=restart)
            key = (msg.database_identity, msg.session_id)
            existing = self._entries.get(key)
            applied = False
            stale = False
            if msg.type in ("released", "lost"):
                if existing is not None:
                    if msg.epoch < existing.epoch:
                        stale = True
                    else:
                        self._pop(key)
                        applied = True
            elif msg.type in ("acquired", "ownership_snapshot"):
                if existing is not None and msg.epoch < existing.epoch:
                    stale = True
                elif (existing is not None and msg.epoch == existing.epoch
                      and existing.origin_instance_id != origin and not existing.from_database):
                    self._conflicts += 1
                    self._entries[key] = replace(existing, uncertain_reason="conflict")
                    applied = True
                else:
                    self._put(key, OwnershipEntry(
                        database_identity=msg.database_identity, session_id=msg.session_id,
                        owner_instance_id=msg.owner_instance_id, owner_pid=msg.owner_pid, epoch=msg.epoch,
                        purpose=msg.origin, run_id=msg.run_id,
                        run_status=msg.run_status or (existing.run_status if existing is not None
                                                      and existing.epoch == msg.epoch else ""),
                        phase=msg.phase, expires_at=msg.expires_at, seq=msg.seq, origin_instance_id=origin,
                        applied_at=now,
                    ))
                    applied = True
            elif msg.type == "state_changed":
                if existing is not None:
                    if msg.epoch and msg.epoch < existing.epoch:
                        stale = True
                    else:
                        reason = existing.uncertain_reason
                        if msg.epoch > existing.epoch:
                            reason = "epoch"  # a newer lease than the one we know: our entry is outdated
                        self._entries[key] = replace(
                            existing, run_status=msg.run_status or existing.run_status,
                            phase=msg.phase or existing.phase, run_id=msg.run_id or existing.run_id,
                            applied_at=now, seq=msg.seq or existing.seq, uncertain_reason=reason,
                        )
                        applied = True
            if stale:
                self._stale_epoch += 1
            if applied:
                self._applied += 1
            entry = self._entries.get(key)
            if entry is not None and (jump or restart) and not entry.uncertain_reason:
                # what a suspicious seq announced is a hint to re-read, never a known owner
                entry = self._entries[key] = replace(entry, uncertain_reason="jump" if jump else "restart")
            state = self._state_of(entry, now)
            return ApplyResult(applied=applied, gap=gap, stale=stale, jump=jump, restart=restart,
                               uncertain=state.state is not OwnershipState.KNOWN)

    def _sequence(self, origin: str, seq: int) -> str:
        """Classify ``seq`` against the origin's mark (see the module docstring) and move the mark.

        Returns ``"first"``, ``"next"``, ``"gap"``, ``"jump"`` (mark kept), ``"stale"`` or ``"restart"``.
        """
        marks = self._last_seq
        last = marks.get(origin)
        if last is None:
            verdict = "first"
        else:
            ahead = seq - last
            if ahead == 1:
                verdict = "next"
            elif ahead > SEQ_JUMP_LIMIT:
                self._jumps += 1
                return "jump"
            elif ahead > 1:
                verdict = "gap"
                self._gaps += 1
            elif ahead >= -SEQ_REORDER_WINDOW:
                return "stale"
            else:
                verdict = "restart"
                self._restarts += 1
        marks[origin] = seq
        marks.move_to_end(origin)
        while len(marks) > self._max_origins:
            marks.popitem(last=False)
        return verdict

    # database views --------------------------------------------------------------------------------------------
    def prime(self, database_identity: str, session_id: str, lease: LeaseSnapshot | None, *,
              run_status: str = "", phase: str = "") -> None:
        """Record the authoritative SQLite view of one session and clear its uncertainty.

        A missing, released or expired lease removes the entry (a later lookup says "unknown": the safe side).
        """
        with self._lock:
            key = (database_identity, session_id)
            if lease is None or lease.state != "active" or lease.expired:
                self._pop(key)
                return
            self._put(key, OwnershipEntry(
                database_identity=database_identity, session_id=session_id,
                owner_instance_id=lease.owner_instance_id, owner_pid=lease.owner_pid, epoch=lease.epoch,
                purpose=lease.purpose, run_id=lease.run_id, run_status=run_status, phase=phase,
                expires_at=lease.expires_at, seq=0, origin_instance_id="", applied_at=self._clock(),
                from_database=True,
            ))

    def mark_uncertain(self, database_identity: str, session_id: str) -> None:
        """Force the next lookup of one session to say "re-read SQLite"."""
        with self._lock:
            key = (database_identity, session_id)
            entry = self._entries.get(key)
            if entry is not None:
                self._entries[key] = replace(entry, uncertain_reason="marked")

    def forget(self, database_identity: str | None = None) -> None:
        """Drop every entry (of one database, or all)."""
        with self._lock:
            if database_identity is None:
                self._entries.clear()
                self._db_counts.clear()
            else:
                for key in [k for k in self._entries if k[0] == database_identity]:
                    self._pop(key)

    def lookup(self, database_identity: str, session_id: str) -> OwnershipLookup:
        with self._lock:
            result = self._state_of(self._entries.get((database_identity, session_id)), self._clock())
            if result.state is not OwnershipState.KNOWN:
                self._uncertain_lookups += 1
            return result

    def entries(self) -> list[OwnershipEntry]:
        with self._lock:
            return list(self._entries.values())

    def last_seq(self, origin_instance_id: str) -> int | None:
        with self._lock:
            return self._last_seq.get(origin_instance_id)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(applied=self._applied, gaps=self._gaps, seq_jumps=self._jumps,
                              seq_restarts=self._restarts, conflicts=self._conflicts,
                              stale_seq=self._stale_seq, stale_epoch=self._stale_epoch,
                              uncertain_lookups=self._uncertain_lookups, entries=len(self._entries),
                              origins=len(self._last_seq))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # internals -------------------------------------------------------------------------------------------------
    def _state_of(self, entry: OwnershipEntry | None, now: float) -> OwnershipLookup:
        if entry is None:
            return OwnershipLookup(OwnershipState.UNKNOWN, None, "absent")
        reason = entry.uncertain_reason or self._mark_of(entry)
        if reason:
            return OwnershipLookup(OwnershipState.UNCERTAIN, entry, reason)
        if now - entry.applied_at > self.liveness_s:
            return OwnershipLookup(OwnershipState.UNCERTAIN, entry, "stale")
        if entry.expires_at and entry.expires_at <= now:
            return OwnershipLookup(OwnershipState.UNCERTAIN, entry, "expired")
        return OwnershipLookup(OwnershipState.KNOWN, entry, "")

    def _mark_of(self, entry: OwnershipEntry) -> str:
        """The reason of a lazy mark made after ``entry`` was written ("" when there is none)."""
        if entry.tick < self._floor:
            return "marked"
        mark = self._origin_marks.get(entry.origin_instance_id)
        if mark is not None and mark[0] > entry.tick:
            return mark[1]
        db_mark = self._db_marks.get(entry.database_identity)
        if db_mark is not None and db_mark > entry.tick:
            return "marked"
        return ""

    def _stamp(self) -> int:
        self._tick += 1
        return self._tick

    def _mark_origin(self, origin: str, reason: str) -> None:
        marks = self._origin_marks
        marks[origin] = (self._stamp(), reason)
        marks.move_to_end(origin)
        while len(marks) > self._max_origins:
            _, (tick, _) = marks.popitem(last=False)
            self._floor = max(self._floor, tick)

    def _mark_database(self, ident: str) -> bool:
        """Mark every entry of one database uncertain; True when it has any."""
        marks = self._db_marks
        marks[ident] = self._stamp()
        marks.move_to_end(ident)
        while len(marks) > self._max_origins:
            _, tick = marks.popitem(last=False)
            self._floor = max(self._floor, tick)
        return self._db_counts.get(ident, 0) > 0

    def _put(self, key: Key, entry: OwnershipEntry) -> None:
        """Write a fresh entry (stamped now, so no earlier mark applies) as the newest; forget the oldest."""
        entries = self._entries
        if entries.pop(key, None) is None:
            self._db_counts[key[0]] = self._db_counts.get(key[0], 0) + 1
        entries[key] = replace(entry, tick=self._stamp())
        while len(entries) > self._max_entries:
            self._pop(next(iter(entries)))

    def _pop(self, key: Key) -> None:
        if self._entries.pop(key, None) is not None:
            left = self._db_counts.get(key[0], 0) - 1
            if left > 0:
                self._db_counts[key[0]] = left
            else:
                self._db_counts.pop(key[0], None)
