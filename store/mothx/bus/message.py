"""Lease-bus messages (reference 16.2–16.4): the wire format, its validation, and the bus's configuration.

Protocol version 3. :func:`decode` / :func:`check_datagram` apply every rule of 16.4 to a datagram; :func:`encode`
refuses what a receiver would reject. Lengths of ``messageId``, ``originInstanceId``, ``origin``, ``sessionId`` and
``path`` are counted in UTF-8 bytes (what the reference implementation's ``len`` counts), so a limit is never
exceeded by multi-byte text.

Error messages never carry raw datagram text: what they quote passes :func:`store.safetext.one_line` first.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from store.errors import StoreError
from store.safetext import one_line

PROTOCOL_VERSION = 3
DEFAULT_PORT = 49371
PORT_ENV = "MOTHX_RUNTIME_BUS_PORT"
SNAPSHOT_INTERVAL_ENV = "MOTHX_RUNTIME_SNAPSHOT_INTERVAL"
BROADCAST_ADDR = "127.255.255.255"
LISTEN_ADDR = BROADCAST_ADDR  # see store.mothx.bus.listener: loopback only, never the wildcard address
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

INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
PID_MAX = 2**31 - 1

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
    ("owner_pid", "ownerPid", PID_MAX),
    ("epoch", "epoch", INT64_MAX),
    ("expires_at", "expiresAt", INT64_MAX),
    ("seq", "seq", UINT64_MAX),
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
        shown = one_line(repr(msg.version))[:40]
        raise InvalidBusMessage(DROP_VERSION, f"Lease bus message version {shown} is not {PROTOCOL_VERSION}.")
    for attr, key in _STRING_FIELDS:
        if not isinstance(getattr(msg, attr), str):
            raise InvalidBusMessage(DROP_FIELD_TYPE, f"Lease bus field {key} is not a string.")
    for attr, key, maximum in _INT_FIELDS:
        value = getattr(msg, attr)
        if type(value) is not int:
            raise InvalidBusMessage(DROP_FIELD_TYPE, f"Lease bus field {key} is not an integer.")
        if value < 0 or value > maximum:
            raise InvalidBusMessage(DROP_INTEGER_RANGE, f"Lease bus field {key} is out of range.")
    _check_rules(msg)


def _check_rules(msg: BusMessage) -> None:
    """The rules of 16.4 past the field types (which :func:`from_json` has checked already)."""
    if not msg.message_id or _blen(msg.message_id) > MAX_ID_LEN:
        raise InvalidBusMessage(DROP_MESSAGE_ID, "Lease bus messageId is empty or longer than 256 bytes.")
    if not msg.origin_instance_id or _blen(msg.origin_instance_id) > MAX_ID_LEN:
        raise InvalidBusMessage(DROP_ORIGIN_INSTANCE_ID,
                                "Lease bus originInstanceId is empty or longer than 256 bytes.")
    if _blen(msg.origin) > MAX_ORIGIN_LEN:
        raise InvalidBusMessage(DROP_ORIGIN, "Lease bus origin is longer than 128 bytes.")
    if msg.type not in MESSAGE_TYPES:
        raise InvalidBusMessage(DROP_TYPE, f"Lease bus message type {one_line(repr(msg.type[:40]))} is unknown.")
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


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def is_loopback(addr: object) -> bool:
    """True when ``addr`` (an address string or a ``(host, port)`` tuple) is an IPv4 loopback address."""
    host = addr[0] if isinstance(addr, tuple) and addr else addr
    if not isinstance(host, str):
        return False
    return _host_is_loopback(host)


@functools.lru_cache(maxsize=256)
def _host_is_loopback(host: str) -> bool:
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
        obj = _DECODER.decode(bytes(data).decode("utf-8"))
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
    _check_rules(msg)
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



def os_reason(exc: OSError) -> str:
    """A one-line reason for a socket error (never raw text: the OS message passes ``one_line``)."""
    return one_line(exc.strerror or str(exc) or type(exc).__name__)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (never inside a character)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")
