"""The runtime lease bus (reference section 16): a best-effort, host-local UDP notification channel.

mothx processes sharing a session directory announce lease changes as small JSON datagrams sent to the loopback
directed broadcast address ``127.255.255.255:<port>`` (port 49371, or ``MOTHX_RUNTIME_BUS_PORT``). Every process
that binds the wildcard address on that port (with address/port reuse) receives a copy.

Nothing here authorizes anything. The bus is unauthenticated: any local process can send a datagram. A
message accepted by :class:`BusListener` only updates a process-local :class:`OwnershipCache` and produces a
:class:`BusHint` telling the application *which* session to re-read from SQLite; the screen never shows data
carried by a datagram without that re-read.

Pieces:

* :class:`BusMessage` (also exported as ``Message``), :func:`encode`, :func:`decode` / :func:`check_datagram` —
  protocol version 3 with the validation of 16.4.
* :class:`OwnershipCache` — the cache of 16.5 keyed by ``(databaseIdentity, sessionId)``; :meth:`~OwnershipCache.lookup`
  answers ``known`` / ``uncertain`` / ``unknown`` (never "idle").
* :class:`BusListener` — the receiving side: loopback-only, size cap, validation, own-origin skip, dedupe by
  ``messageId`` (10 s, at most 4096 ids), per-origin sequence; counters for the Health screen.
* :class:`BusPublisher` and :func:`install_publisher` — the sending side, plugged into :mod:`store.mothx.leases` so
  Sessionscope's own repairs announce ``acquired`` / ``released`` / ``lost`` / ``state_changed`` like a runtime.

Lengths of ``messageId``, ``originInstanceId``, ``origin``, ``sessionId`` and ``path`` are counted in UTF-8
bytes (what the reference implementation's ``len`` counts), so a limit is never exceeded by multi-byte text.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import StoreError

if TYPE_CHECKING:
    from store.mothx.leases import LeaseNotice, LeaseOwner, LeaseSnapshot

PROTOCOL_VERSION = 3
DEFAULT_PORT = 49371
PORT_ENV = "MOTHX_RUNTIME_BUS_PORT"
SNAPSHOT_INTERVAL_ENV = "MOTHX_RUNTIME_SNAPSHOT_INTERVAL"
BROADCAST_ADDR = "127.255.255.255"
LISTEN_ADDR = "0.0.0.0"
MAX_DATAGRAM = 4096
MAX_ID_LEN = 256
MAX_ORIGIN_LEN = 128
MAX_SESSION_ID_LEN = 256
MAX_PATH_LEN = 4096
DEDUPE_WINDOW_S = 10.0
DEDUPE_MAX_IDS = 4096
LIVENESS_WINDOW_S = 30.0
SNAPSHOT_INTERVAL_S = 10.0
SEND_DEADLINE_S = 0.2
SEND_BACKOFF_S = 5.0
MAX_CACHE_ENTRIES = 65536
RECEIVE_BUFFER_BYTES = 1 << 20
MAX_TRACKED_ORIGINS = 4096

LEASE_TYPES = ("acquired", "released", "lost", "state_changed", "ownership_snapshot")
MESSAGE_TYPES = (*LEASE_TYPES, "database_rebuilt")

_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_PID_MAX = 2**31 - 1

# Drop reasons (keys of BusStats.dropped). Validation reasons come from decode(); the rest from the listener.
DROP_NON_LOOPBACK = "non_loopback"
DROP_OVERSIZED = "oversized"
DROP_NOT_JSON = "not_json"
DROP_NOT_OBJECT = "not_object"
DROP_VERSION = "version"
DROP_FIELD_TYPE = "field_type"
DROP_INTEGER_RANGE = "integer_range"
DROP_MESSAGE_ID = "message_id"
DROP_ORIGIN_INSTANCE_ID = "origin_instance_id"
DROP_ORIGIN = "origin"
DROP_TYPE = "type"
DROP_SESSION_ID = "session_id"
DROP_PATH = "path"
DROP_OWN_ORIGIN = "own_origin"
DROP_DUPLICATE = "duplicate"
DROP_STALE_SEQ = "stale_seq"
DROP_INTERNAL = "internal_error"


class InvalidBusMessage(StoreError):
    """A datagram or message that the lease bus protocol does not accept. ``reason`` is a short drop code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# ---------------------------------------------------------------------------------------------------------------
# Message


@dataclass(frozen=True)
class BusMessage:
    """One lease-bus message (reference 16.2). Empty strings / zero numbers mean "omitted"."""

    type: str
    message_id: str
    origin_instance_id: str
    version: int = PROTOCOL_VERSION
    session_id: str = ""
    database_identity: str = ""
    path: str = ""
    origin: str = ""
    owner_instance_id: str = ""
    owner_pid: int = 0
    run_id: str = ""
    epoch: int = 0
    expires_at: int = 0
    seq: int = 0
    run_status: str = ""
    phase: str = ""

    def to_json(self) -> dict[str, object]:
        """The wire object: camelCase keys, empty fields omitted except the four required ones."""
        obj: dict[str, object] = {"version": self.version, "messageId": self.message_id, "type": self.type}
        for attr, key in _OPTIONAL_FIELDS:
            value = getattr(self, attr)
            if value:
                obj[key] = value
        obj["originInstanceId"] = self.origin_instance_id
        return obj


Message = BusMessage

# (attribute, JSON key, kind) — kind "s" string, "i" signed/non-negative integer with its maximum.
_STRING_FIELDS: tuple[tuple[str, str], ...] = (
    ("message_id", "messageId"),
    ("type", "type"),
    ("session_id", "sessionId"),
    ("database_identity", "databaseIdentity"),
    ("path", "path"),
    ("origin", "origin"),
    ("origin_instance_id", "originInstanceId"),
    ("owner_instance_id", "ownerInstanceId"),
    ("run_id", "runId"),
    ("run_status", "runStatus"),
    ("phase", "phase"),
)
_INT_FIELDS: tuple[tuple[str, str, int], ...] = (
    ("owner_pid", "ownerPid", _PID_MAX),
    ("epoch", "epoch", _INT64_MAX),
    ("expires_at", "expiresAt", _INT64_MAX),
    ("seq", "seq", _UINT64_MAX),
)
_OPTIONAL_FIELDS: tuple[tuple[str, str], ...] = (
    ("session_id", "sessionId"),
    ("database_identity", "databaseIdentity"),
    ("path", "path"),
    ("origin", "origin"),
    ("owner_instance_id", "ownerInstanceId"),
    ("owner_pid", "ownerPid"),
    ("run_id", "runId"),
    ("epoch", "epoch"),
    ("expires_at", "expiresAt"),
    ("seq", "seq"),
    ("run_status", "runStatus"),
    ("phase", "phase"),
)


def _blen(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def validate(msg: BusMessage) -> None:
    """Apply the rules of reference 16.4 to a message; raise :class:`InvalidBusMessage` on the first failure."""
    if type(msg.version) is not int or msg.version != PROTOCOL_VERSION:
        raise InvalidBusMessage(DROP_VERSION, f"Lease bus message version {msg.version!r} is not {PROTOCOL_VERSION}.")
    for attr, key in _STRING_FIELDS:
        if not isinstance(getattr(msg, attr), str):
            raise InvalidBusMessage(DROP_FIELD_TYPE, f"Lease bus field {key} is not a string.")
    for attr, key, maximum in _INT_FIELDS:
        value = getattr(msg, attr)
        if type(value) is not int:
            raise InvalidBusMessage(DROP_FIELD_TYPE, f"Lease bus field {key} is not an integer.")
        if value < 0 or value > maximum:
            raise InvalidBusMessage(DROP_INTEGER_RANGE, f"Lease bus field {key} is out of range.")
    if not msg.message_id or _blen(msg.message_id) > MAX_ID_LEN:
        raise InvalidBusMessage(DROP_MESSAGE_ID, "Lease bus messageId is empty or longer than 256 bytes.")
    if not msg.origin_instance_id or _blen(msg.origin_instance_id) > MAX_ID_LEN:
        raise InvalidBusMessage(DROP_ORIGIN_INSTANCE_ID,
                                "Lease bus originInstanceId is empty or longer than 256 bytes.")
    if _blen(msg.origin) > MAX_ORIGIN_LEN:
        raise InvalidBusMessage(DROP_ORIGIN, "Lease bus origin is longer than 128 bytes.")
    if msg.type not in MESSAGE_TYPES:
        raise InvalidBusMessage(DROP_TYPE, f"Lease bus message type {msg.type[:40]!r} is unknown.")
    if msg.type == "database_rebuilt":
        if msg.session_id:
            raise InvalidBusMessage(DROP_SESSION_ID, "A database_rebuilt message must not name a session.")
        if not msg.path or _blen(msg.path) > MAX_PATH_LEN:
            raise InvalidBusMessage(DROP_PATH, "A database_rebuilt message needs a path of at most 4096 bytes.")
    elif not msg.session_id or _blen(msg.session_id) > MAX_SESSION_ID_LEN:
        raise InvalidBusMessage(DROP_SESSION_ID, "Lease bus sessionId is empty or longer than 256 bytes.")


def encode(msg: BusMessage, *, check: bool = True) -> bytes:
    """Compact JSON bytes for ``msg``. Refuses (raises :class:`InvalidBusMessage`) a message over 4096 bytes,
    and, with ``check`` (the default), one that :func:`validate` rejects."""
    if check:
        validate(msg)
    data = json.dumps(msg.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(data) > MAX_DATAGRAM:
        raise InvalidBusMessage(DROP_OVERSIZED, f"Lease bus message is {len(data)} bytes, over the 4096-byte limit.")
    return data


def _reject_constant(name: str) -> object:
    raise ValueError(f"JSON constant {name} is not allowed")


def is_loopback(addr: object) -> bool:
    """True when ``addr`` (an address string or a ``(host, port)`` tuple) is an IPv4 loopback address."""
    host = addr[0] if isinstance(addr, tuple) and addr else addr
    if not isinstance(host, str):
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return isinstance(ip, ipaddress.IPv4Address) and ip.is_loopback


def decode(data: bytes, source_addr: object = None) -> BusMessage:
    """Parse and validate one datagram. ``source_addr`` (when given) must be a loopback address.

    Raises :class:`InvalidBusMessage` (with ``.reason``) for anything the protocol rejects.
    """
    if source_addr is not None and not is_loopback(source_addr):
        raise InvalidBusMessage(DROP_NON_LOOPBACK, "Lease bus datagram came from a non-loopback address.")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidBusMessage(DROP_NOT_JSON, "Lease bus datagram is not bytes.")
    if len(data) > MAX_DATAGRAM:
        raise InvalidBusMessage(DROP_OVERSIZED, f"Lease bus datagram is {len(data)} bytes, over the 4096-byte limit.")
    try:
        obj = json.loads(bytes(data).decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidBusMessage(DROP_NOT_JSON, "Lease bus datagram is not UTF-8 JSON.") from exc
    if not isinstance(obj, dict):
        raise InvalidBusMessage(DROP_NOT_OBJECT, "Lease bus datagram is not a JSON object.")
    return from_json(obj)


def from_json(obj: Mapping[str, object]) -> BusMessage:
    """A validated :class:`BusMessage` from a decoded JSON object (unknown keys are ignored, ``null`` = omitted)."""
    version = obj.get("version")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise InvalidBusMessage(DROP_VERSION, f"Lease bus message version is not {PROTOCOL_VERSION}.")
    values: dict[str, object] = {"version": version}
    for attr, key in _STRING_FIELDS:
        raw = obj.get(key)
        if raw is None:
            raw = ""
        if not isinstance(raw, str):
            raise InvalidBusMessage(DROP_FIELD_TYPE, f"Lease bus field {key} is not a string.")
        values[attr] = raw
    for attr, key, maximum in _INT_FIELDS:
        raw = obj.get(key)
        if raw is None:
            raw = 0
        if type(raw) is not int:  # bool, float, string: rejected (the reference decoder rejects them too)
            raise InvalidBusMessage(DROP_FIELD_TYPE, f"Lease bus field {key} is not an integer.")
        if raw < 0 or raw > maximum:
            raise InvalidBusMessage(DROP_INTEGER_RANGE, f"Lease bus field {key} is out of range.")
        values[attr] = raw
    msg = BusMessage(**values)  # type: ignore[arg-type]
    validate(msg)
    return msg


def check_datagram(data: bytes, source_addr: object = None) -> BusMessage | str:
    """:func:`decode` that returns the drop reason (a string) instead of raising."""
    try:
        return decode(data, source_addr)
    except InvalidBusMessage as exc:
        return exc.reason


# ---------------------------------------------------------------------------------------------------------------
# Configuration helpers


def bus_port(environ: Mapping[str, str] | None = None) -> int:
    """The bus port: ``MOTHX_RUNTIME_BUS_PORT`` when it is a valid port number (1–65535), else 49371."""
    env = os.environ if environ is None else environ
    raw = env.get(PORT_ENV, "").strip()
    if raw:
        try:
            port = int(raw, 10)
        except ValueError:
            return DEFAULT_PORT
        if 0 < port < 65536:
            return port
    return DEFAULT_PORT


def snapshot_interval(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between ``ownership_snapshot`` announcements (``MOTHX_RUNTIME_SNAPSHOT_INTERVAL``, default 10)."""
    env = os.environ if environ is None else environ
    raw = env.get(SNAPSHOT_INTERVAL_ENV, "").strip().lower()
    if raw:
        try:
            value = float(raw[:-1]) if raw.endswith("s") else float(raw)
        except ValueError:
            return SNAPSHOT_INTERVAL_S
        if math.isfinite(value) and value > 0:
            return value
    return SNAPSHOT_INTERVAL_S


def database_identity(path: str | os.PathLike[str]) -> str:
    """The identity a message scopes itself to: the canonical absolute path of ``sessions.db``.

    ``path`` may be the session directory or the database file (the same value the lease engine stamps).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "sessions.db"
    return os.path.realpath(os.path.abspath(str(p)))


def process_origin_id() -> str:
    """This process's ``originInstanceId``: the lease engine's instance id (``pid-<pid>-<32 hex>``)."""
    from store.mothx.leases import LeaseOwner

    return LeaseOwner.current().instance_id


# ---------------------------------------------------------------------------------------------------------------
# Ownership cache


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
    uncertain_reason: str = ""  # "" | "gap" | "conflict" | "marked" | "epoch"


@dataclass(frozen=True)
class OwnershipLookup:
    """Answer of :meth:`OwnershipCache.lookup`. Only ``known`` may be projected without a database read."""

    state: OwnershipState
    entry: OwnershipEntry | None = None
    reason: str = ""  # why uncertain: gap | conflict | marked | epoch | stale | expired; "absent" when unknown

    @property
    def known(self) -> bool:
        return self.state is OwnershipState.KNOWN

    @property
    def needs_read(self) -> bool:
        return self.state is not OwnershipState.KNOWN


@dataclass(frozen=True)
class ApplyResult:
    """What :meth:`OwnershipCache.apply` did with one message."""

    dropped: bool = False     # seq <= last for its origin: the message must be ignored entirely
    applied: bool = False     # the cache changed
    gap: bool = False         # a sequence gap was detected for the origin
    uncertain: bool = False   # the message's session is now uncertain (or unknown) in the cache
    stale: bool = False       # ignored because its epoch is older than the entry's


@dataclass(frozen=True)
class CacheStats:
    applied: int
    gaps: int
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
        self._applied = 0
        self._gaps = 0
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
            if msg.seq > 0:
                last = self._last_seq.get(origin)
                if last is not None and msg.seq <= last:
                    self._stale_seq += 1
                    return ApplyResult(dropped=True)
                if last is not None and msg.seq > last + 1:
                    gap = True
                    self._gaps += 1
                    self._mark_origin(origin, "gap")
                self._last_seq[origin] = msg.seq
                self._last_seq.move_to_end(origin)
                while len(self._last_seq) > self._max_origins:
                    self._last_seq.popitem(last=False)
            if msg.type == "database_rebuilt":
                ident = msg.database_identity or msg.path
                changed = self._mark_database(ident, "marked")
                if changed:
                    self._applied += 1
                return ApplyResult(applied=changed, gap=gap, uncertain=True)
            key = (msg.database_identity, msg.session_id)
            existing = self._entries.get(key)
            applied = False
            stale = False
            if msg.type in ("released", "lost"):
                if existing is not None:
                    if msg.epoch < existing.epoch:
                        stale = True
                    else:
                        del self._entries[key]
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
                    self._entries[key] = OwnershipEntry(
                        database_identity=msg.database_identity, session_id=msg.session_id,
                        owner_instance_id=msg.owner_instance_id, owner_pid=msg.owner_pid, epoch=msg.epoch,
                        purpose=msg.origin, run_id=msg.run_id,
                        run_status=msg.run_status or (existing.run_status if existing is not None
                                                      and existing.epoch == msg.epoch else ""),
                        phase=msg.phase, expires_at=msg.expires_at, seq=msg.seq, origin_instance_id=origin,
                        applied_at=now,
                    )
                    applied = True
                    self._trim()
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
            state = self._state_of(self._entries.get(key), now)
            return ApplyResult(applied=applied, gap=gap, stale=stale,
                               uncertain=state.state is not OwnershipState.KNOWN)

    # database views --------------------------------------------------------------------------------------------
    def prime(self, database_identity: str, session_id: str, lease: LeaseSnapshot | None, *,
              run_status: str = "", phase: str = "") -> None:
        """Record the authoritative SQLite view of one session and clear its uncertainty.

        A missing, released or expired lease removes the entry (a later lookup says "unknown": the safe side).
        """
        with self._lock:
            key = (database_identity, session_id)
            if lease is None or lease.state != "active" or lease.expired:
                self._entries.pop(key, None)
                return
            self._entries[key] = OwnershipEntry(
                database_identity=database_identity, session_id=session_id,
                owner_instance_id=lease.owner_instance_id, owner_pid=lease.owner_pid, epoch=lease.epoch,
                purpose=lease.purpose, run_id=lease.run_id, run_status=run_status, phase=phase,
                expires_at=lease.expires_at, seq=0, origin_instance_id="", applied_at=self._clock(),
                from_database=True,
            )
            self._trim()

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
            else:
                for key in [k for k in self._entries if k[0] == database_identity]:
                    del self._entries[key]

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
            return CacheStats(applied=self._applied, gaps=self._gaps, conflicts=self._conflicts,
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
        if entry.uncertain_reason:
            return OwnershipLookup(OwnershipState.UNCERTAIN, entry, entry.uncertain_reason)
        if now - entry.applied_at > self.liveness_s:
            return OwnershipLookup(OwnershipState.UNCERTAIN, entry, "stale")
        if entry.expires_at and entry.expires_at <= now:
            return OwnershipLookup(OwnershipState.UNCERTAIN, entry, "expired")
        return OwnershipLookup(OwnershipState.KNOWN, entry, "")

    def _mark_origin(self, origin: str, reason: str) -> None:
        for key, entry in self._entries.items():
            if entry.origin_instance_id == origin:
                self._entries[key] = replace(entry, uncertain_reason=reason)

    def _mark_database(self, ident: str, reason: str) -> bool:
        changed = False
        for key, entry in self._entries.items():
            if key[0] == ident:
                self._entries[key] = replace(entry, uncertain_reason=reason)
                changed = True
        return changed

    def _trim(self) -> None:
        if len(self._entries) <= self._max_entries:
            return
        excess = len(self._entries) - self._max_entries
        for key, _ in sorted(self._entries.items(), key=lambda kv: kv[1].applied_at)[:excess]:
            del self._entries[key]


# ---------------------------------------------------------------------------------------------------------------
# Listener


@dataclass(frozen=True)
class BusHint:
    """"Something changed for this session — re-read it." Carries no state to display."""

    type: str
    session_id: str          # "" for database_rebuilt
    database_identity: str   # "" when the sender did not scope the message
    path: str                # the rebuilt file for database_rebuilt, else ""
    uncertain: bool          # the cache has no fresh entry for the session after this message
    gap: bool                # a sequence gap was seen for the sender (some message was lost)
    message_id: str
    origin_instance_id: str
    received_at: float       # wall time

    def concerns(self, identity: str) -> bool:
        """True when the hint may be about the database ``identity`` (unscoped hints concern every database)."""
        if self.type == "database_rebuilt":
            return self.database_identity == identity or os.path.realpath(os.path.abspath(self.path)) == identity
        return not self.database_identity or self.database_identity == identity


@dataclass(frozen=True)
class BusStats:
    """Counters for the Health screen. ``received == accepted + sum(dropped.values())``."""

    available: bool
    status: str
    port: int
    received: int
    accepted: int
    dropped: dict[str, int]
    hints: int
    callback_errors: int
    last_message_at: float | None   # wall time of the last accepted message
    cache: CacheStats

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())


HintCallback = Callable[[BusHint], None]


class BusListener:
    """Receives lease-bus datagrams in a daemon thread and turns accepted ones into :class:`BusHint` calls.

    ``start()`` never raises: when the port cannot be bound it returns False and :attr:`status` says
    ``"lease bus unavailable: …"`` (the application then relies on file watching).
    """

    def __init__(self, on_hint: HintCallback | None = None, *, port: int | None = None,
                 cache: OwnershipCache | None = None, own_origin: str | None = None,
                 host: str = LISTEN_ADDR, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.on_hint = on_hint
        self.port = bus_port() if port is None else port
        self.host = host
        self.cache = cache if cache is not None else OwnershipCache()
        self.own_origin = process_origin_id() if own_origin is None else own_origin
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, float] = OrderedDict()  # messageId -> expiry (clock)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        self.available = False
        self.status = "lease bus not started"
        self._received = 0
        self._accepted = 0
        self._dropped: dict[str, int] = {}
        self._hints = 0
        self._callback_errors = 0
        self._last_message_at: float | None = None

    # lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> bool:
        """Bind and start the receiving thread. Returns False (with :attr:`status`) when the bus is unavailable."""
        with self._lock:
            if self._closed:
                self.status = "lease bus unavailable: the listener was closed"
                return False
            if self._sock is not None:
                return True
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            except OSError as exc:
                self.status = f"lease bus unavailable: {_os_reason(exc)}"
                return False
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if hasattr(socket, "SO_REUSEPORT"):
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                    except OSError:
                        pass
                try:  # room for a burst of announcements while the thread is busy (capped by the kernel)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
                except OSError:
                    pass
                sock.bind((self.host, self.port))
                sock.settimeout(0.25)
            except OSError as exc:
                sock.close()
                self.status = f"lease bus unavailable: cannot bind UDP port {self.port} ({_os_reason(exc)})"
                return False
            self._sock = sock
            self.port = sock.getsockname()[1]
            self.available = True
            self.status = f"lease bus listening on UDP port {self.port}"
            self._thread = threading.Thread(target=self._run, name=f"lease-bus-{self.port}", daemon=True)
            self._thread.start()
            return True

    def close(self) -> None:
        """Stop receiving and close the socket. Safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            sock, self._sock = self._sock, None
            thread, self._thread = self._thread, None
            self.available = False
            if sock is not None:
                self.status = "lease bus closed"
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        if sock is not None:
            sock.close()

    def __enter__(self) -> BusListener:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # receiving ------------------------------------------------------------------------------------------------
    def _run(self) -> None:
        sock = self._sock
        while not self._stop.is_set() and sock is not None:
            try:
                data, addr = sock.recvfrom(MAX_DATAGRAM + 1)
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)
                continue
            if self._stop.is_set():
                return
            self.handle_datagram(data, addr)

    def handle_datagram(self, data: bytes, addr: object) -> BusHint | None:
        """Process one datagram as if it had arrived from ``addr``; returns the hint emitted, if any.

        Every datagram is counted exactly once: as accepted or under one drop reason.
        """
        with self._lock:
            self._received += 1
            if not is_loopback(addr):
                return self._drop(DROP_NON_LOOPBACK)
            if len(data) > MAX_DATAGRAM:
                return self._drop(DROP_OVERSIZED)
            try:
                msg = decode(data)
            except InvalidBusMessage as exc:
                return self._drop(exc.reason)
            except Exception:  # noqa: BLE001 - never let a datagram stop the bus thread
                return self._drop(DROP_INTERNAL)
            if self.own_origin and msg.origin_instance_id == self.own_origin:
                return self._drop(DROP_OWN_ORIGIN)
            now = self._clock()
            self._expire_seen(now)
            if msg.message_id in self._seen:
                return self._drop(DROP_DUPLICATE)
            self._seen[msg.message_id] = now + DEDUPE_WINDOW_S
            while len(self._seen) > DEDUPE_MAX_IDS:
                self._seen.popitem(last=False)
            try:
                result = self.cache.apply(msg)
            except Exception:  # noqa: BLE001
                return self._drop(DROP_INTERNAL)
            if result.dropped:
                return self._drop(DROP_STALE_SEQ)
            self._accepted += 1
            wall = self._wall()
            self._last_message_at = wall
            hint = BusHint(type=msg.type, session_id=msg.session_id, database_identity=msg.database_identity,
                           path=msg.path, uncertain=result.uncertain, gap=result.gap, message_id=msg.message_id,
                           origin_instance_id=msg.origin_instance_id, received_at=wall)
            self._hints += 1
            callback = self.on_hint
        if callback is not None:
            try:
                callback(hint)
            except Exception:  # noqa: BLE001 - a consumer's bug must not stop the bus thread
                with self._lock:
                    self._callback_errors += 1
        return hint

    def _drop(self, reason: str) -> None:
        self._dropped[reason] = self._dropped.get(reason, 0) + 1
        return None

    def _expire_seen(self, now: float) -> None:
        seen = self._seen
        while seen:
            first = next(iter(seen))
            if seen[first] > now:
                break
            del seen[first]

    def stats(self) -> BusStats:
        with self._lock:
            return BusStats(available=self.available, status=self.status, port=self.port,
                            received=self._received, accepted=self._accepted, dropped=dict(self._dropped),
                            hints=self._hints, callback_errors=self._callback_errors,
                            last_message_at=self._last_message_at, cache=self.cache.stats())


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


# ---------------------------------------------------------------------------------------------------------------
# Publisher


@dataclass(frozen=True)
class PublisherStats:
    published: int
    send_failures: int
    refused: int
    seq: int
    backing_off: bool


class BusPublisher:
    """Sends lease-bus messages to the loopback directed broadcast address (reference 16.1 sender behaviour).

    A cached connected socket; 200 ms deadlines; after a failure no send is tried for 5 s. ``seq`` increases by
    one for every message this publisher numbers, sent or not, so receivers see a gap when one was lost.
    """

    def __init__(self, *, port: int | None = None, origin_instance_id: str | None = None,
                 host: str = BROADCAST_ADDR, clock: Callable[[], float] = time.monotonic,
                 time_ns: Callable[[], int] = time.time_ns) -> None:
        self.port = bus_port() if port is None else port
        self.host = host
        self.origin_instance_id = origin_instance_id or process_origin_id()
        self._clock = clock
        self._time_ns = time_ns
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._backoff_until = 0.0
        self._seq = 0
        self._published = 0
        self._failures = 0
        self._refused = 0
        self._closed = False
        self.last_error = ""
        self._snapshot_stop: threading.Event | None = None

    def next_ids(self) -> tuple[str, int]:
        """A fresh ``(messageId, seq)`` pair: ``<origin>-<unixnano>-<n>`` with ``n`` = the new seq."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        return f"{self.origin_instance_id}-{self._time_ns()}-{seq}", seq

    def message(self, kind: str, *, session_id: str = "", database_identity: str = "", path: str = "",
                origin: str = "", owner_instance_id: str = "", owner_pid: int = 0, run_id: str = "",
                epoch: int = 0, expires_at: int = 0, run_status: str = "", phase: str = "") -> BusMessage:
        """A new numbered message from this publisher."""
        message_id, seq = self.next_ids()
        return BusMessage(type=kind, message_id=message_id, origin_instance_id=self.origin_instance_id,
                          session_id=session_id, database_identity=database_identity, path=path,
                          origin=origin, owner_instance_id=owner_instance_id, owner_pid=owner_pid,
                          run_id=run_id, epoch=epoch, expires_at=expires_at, seq=seq, run_status=run_status,
                          phase=phase)

    def publish(self, kind: str, **fields: object) -> bool:
        """Build, number and send one message (see :meth:`message` for the fields). True when it was sent."""
        return self.send(self.message(kind, **fields))  # type: ignore[arg-type]

    def publish_notice(self, kind: str, notice: LeaseNotice) -> bool:
        """The :func:`store.mothx.leases.set_publisher` hook: announce one lease change."""
        return self.publish(
            kind, session_id=notice.session_id, database_identity=notice.database_identity,
            origin=_clip(notice.origin, MAX_ORIGIN_LEN), owner_instance_id=notice.owner_instance_id,
            owner_pid=notice.owner_pid if 0 <= notice.owner_pid <= _PID_MAX else 0, run_id=notice.run_id,
            epoch=max(0, notice.epoch), expires_at=max(0, notice.expires_at), run_status=notice.run_status,
            phase=notice.phase,
        )

    def hook(self, kind: str, notice: LeaseNotice) -> None:
        """:meth:`publish_notice` with the ``(type, notice) -> None`` shape :func:`store.mothx.leases.set_publisher` takes."""
        self.publish_notice(kind, notice)

    def publish_snapshot(self, owner: LeaseOwner | None = None) -> int:
        """Announce every lease ``owner`` (default: this process) holds as ``ownership_snapshot``; returns the count."""
        from store.mothx.leases import LeaseOwner

        who = owner or LeaseOwner.current()
        sent = 0
        for lease in who.held_leases():
            if self.publish("ownership_snapshot", session_id=lease.session_id,
                            database_identity=lease.database_identity, origin=_clip(lease.purpose, MAX_ORIGIN_LEN),
                            owner_instance_id=lease.owner_instance_id, owner_pid=lease.owner_pid,
                            run_id=lease.run_id, epoch=lease.epoch, expires_at=lease.expires_at):
                sent += 1
        return sent

    def start_snapshots(self, owner: LeaseOwner | None = None, interval: float | None = None) -> None:
        """Publish ``ownership_snapshot`` now and then every ``interval`` s (default 10 s or the environment's)."""
        if self._snapshot_stop is not None:
            return
        stop = threading.Event()
        self._snapshot_stop = stop
        period = snapshot_interval() if interval is None else interval

        def loop() -> None:
            while True:
                try:
                    self.publish_snapshot(owner)
                except Exception:  # noqa: BLE001 - best-effort announcements
                    pass
                if stop.wait(period):
                    return

        threading.Thread(target=loop, name="lease-bus-snapshots", daemon=True).start()

    def send(self, msg: BusMessage) -> bool:
        """Send one message. Never raises: False when it was refused (invalid or over 4096 bytes) or not sent."""
        try:
            data = encode(msg)
        except InvalidBusMessage as exc:
            with self._lock:
                self._refused += 1
                self.last_error = str(exc)
            return False
        return self.send_bytes(data)

    def send_bytes(self, data: bytes) -> bool:
        """Send raw bytes as one datagram (tests use this to send malformed datagrams)."""
        with self._lock:
            if self._closed:
                self._failures += 1
                return False
            now = self._clock()
            if now < self._backoff_until:
                self._failures += 1
                return False
            try:
                if self._sock is None:
                    self._sock = self._dial()
                self._sock.send(data)
            except OSError as exc:
                self._failures += 1
                self.last_error = _os_reason(exc)
                self._backoff_until = now + SEND_BACKOFF_S
                if self._sock is not None:
                    self._sock.close()
                    self._sock = None
                return False
            self._published += 1
            return True

    def _dial(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            sock.settimeout(SEND_DEADLINE_S)
            sock.connect((self.host, self.port))
        except OSError:
            sock.close()
            raise
        return sock

    def stats(self) -> PublisherStats:
        with self._lock:
            return PublisherStats(published=self._published, send_failures=self._failures, refused=self._refused,
                                  seq=self._seq, backing_off=self._clock() < self._backoff_until)

    def close(self) -> None:
        """Stop snapshot announcements and close the socket. Safe to call more than once."""
        with self._lock:
            self._closed = True
            sock, self._sock = self._sock, None
            stop, self._snapshot_stop = self._snapshot_stop, None
        if stop is not None:
            stop.set()
        if sock is not None:
            sock.close()


def _clip(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


_installed: BusPublisher | None = None
_installed_lock = threading.Lock()


def install_publisher(publisher: BusPublisher | None = None, *, port: int | None = None) -> BusPublisher:
    """Plug a publisher into :mod:`store.mothx.leases`, so every lease change of this process goes on the bus.

    Replaces (and closes) a publisher installed earlier by this function. Returns the installed publisher.
    """
    from store.mothx import leases

    global _installed
    pub = publisher or BusPublisher(port=port)
    with _installed_lock:
        previous, _installed = _installed, pub
        leases.set_publisher(pub.hook)
    if previous is not None and previous is not pub:
        previous.close()
    return pub


def uninstall_publisher() -> None:
    """Remove the publisher :func:`install_publisher` plugged in (lease changes are then not announced)."""
    from store.mothx import leases

    global _installed
    with _installed_lock:
        previous, _installed = _installed, None
        leases.set_publisher(None)
    if previous is not None:
        previous.close()


def installed_publisher() -> BusPublisher | None:
    return _installed


__all__ = [
    "ApplyResult", "BROADCAST_ADDR", "BusHint", "BusListener", "BusMessage", "BusPublisher", "BusStats",
    "CacheStats", "DEFAULT_PORT", "InvalidBusMessage", "MAX_DATAGRAM", "MESSAGE_TYPES", "Message",
    "OwnershipCache", "OwnershipEntry", "OwnershipLookup", "OwnershipState", "PROTOCOL_VERSION", "PublisherStats",
    "bus_port", "check_datagram", "database_identity", "decode", "encode", "from_json", "install_publisher",
    "installed_publisher", "is_loopback", "process_origin_id", "snapshot_interval", "uninstall_publisher",
    "validate",
]
