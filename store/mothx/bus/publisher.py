"""The sending side of the lease bus (reference 16.1 sender behaviour), plugged into :mod:`store.mothx.leases`.

:class:`BusPublisher` sends to the loopback directed broadcast address ``127.255.255.255:<port>`` through a
cached connected socket with 200 ms deadlines and a 5 s back-off after a failure. :func:`install_publisher`
connects one to the lease engine so Sessionscope's own repairs announce ``acquired`` / ``released`` / ``lost`` /
``state_changed`` like a runtime. The snapshot thread (``ownership_snapshot`` every 10 s) is a daemon, and
:meth:`BusPublisher.close` joins it for at most :data:`JOIN_TIMEOUT_S`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.mothx.bus.message import (
    BROADCAST_ADDR,
    MAX_ORIGIN_LEN,
    PID_MAX,
    SEND_BACKOFF_S,
    SEND_DEADLINE_S,
    BusMessage,
    InvalidBusMessage,
    bus_port,
    clip,
    encode,
    os_reason,
    process_origin_id,
    snapshot_interval,
)

if TYPE_CHECKING:
    from store.mothx.leases import LeaseNotice, LeaseOwner

JOIN_TIMEOUT_S = 1.0


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
        self._snapshot_thread: threading.Thread | None = None

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
            origin=clip(notice.origin, MAX_ORIGIN_LEN), owner_instance_id=notice.owner_instance_id,
            owner_pid=notice.owner_pid if 0 <= notice.owner_pid <= PID_MAX else 0, run_id=notice.run_id,
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
                            database_identity=lease.database_identity, origin=clip(lease.purpose, MAX_ORIGIN_LEN),
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

        thread = threading.Thread(target=loop, name="lease-bus-snapshots", daemon=True)
        self._snapshot_thread = thread
        thread.start()

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
                self.last_error = os_reason(exc)
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
            thread, self._snapshot_thread = self._snapshot_thread, None
        if stop is not None:
            stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_TIMEOUT_S)
        if sock is not None:
            sock.close()


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
