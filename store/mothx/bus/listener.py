"""The receiving side of the lease bus: a loopback-only UDP listener that turns accepted datagrams into hints.

Binding (reference 16.1 says "the wildcard address"; this listener never binds ``0.0.0.0``)
-------------------------------------------------------------------------------------------
Senders send to the loopback directed broadcast address ``127.255.255.255``. On Linux a broadcast datagram is
delivered to the UDP sockets bound to the wildcard address *or to that broadcast address* on the port — not to a
socket bound to ``127.0.0.1`` (measured on Linux 6: bound to ``127.0.0.1`` nothing sent to ``127.255.255.255``
arrives, and with ``SO_REUSEPORT`` a unicast datagram to ``127.0.0.1`` reaches only one of the listeners). So the
listener binds ``127.255.255.255:<port>`` with address/port reuse: every listener on the port, in this process
or another, receives its own copy of every broadcast (measured: two sockets in one process and one in a child
process all receive each datagram), and no other interface can reach the socket at all. The source check
(loopback only) stays as a second fence.

Pieces: :class:`BusListener` (loopback-only, size cap, validation, own-origin skip, dedupe by ``messageId`` for
10 s / at most 4096 ids, per-origin sequence through :class:`~store.mothx.bus.ownership.OwnershipCache`),
:class:`BusHint` (what a consumer is told: "re-read this session"), :class:`BusStats` (counters for the Health
screen). The thread is a daemon and :meth:`BusListener.close` joins it for at most :data:`JOIN_TIMEOUT_S`.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from store.mothx.bus.message import (
    DEDUPE_MAX_IDS,
    DEDUPE_WINDOW_S,
    DROP_DUPLICATE,
    DROP_INTERNAL,
    DROP_NON_LOOPBACK,
    DROP_OVERSIZED,
    DROP_OWN_ORIGIN,
    DROP_STALE_SEQ,
    LISTEN_ADDR,
    MAX_DATAGRAM,
    RECEIVE_BUFFER_BYTES,
    InvalidBusMessage,
    bus_port,
    decode,
    is_loopback,
    os_reason,
    process_origin_id,
)
from store.mothx.bus.ownership import CacheStats, OwnershipCache

JOIN_TIMEOUT_S = 1.0
RECV_TIMEOUT_S = 0.25


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
            if not is_loopback(self.host):
                self.status = "lease bus unavailable: it listens on a loopback address only"
                return False
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            except OSError as exc:
                self.status = f"lease bus unavailable: {os_reason(exc)}"
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
                sock.settimeout(RECV_TIMEOUT_S)
            except OSError as exc:
                sock.close()
                self.status = f"lease bus unavailable: cannot bind UDP port {self.port} ({os_reason(exc)})"
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
            thread.join(timeout=JOIN_TIMEOUT_S)
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
            except TimeoutError:
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

    def _drop(self, reason: str) -> BusHint | None:
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
