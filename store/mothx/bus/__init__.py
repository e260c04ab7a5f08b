"""The runtime lease bus (reference section 16): a best-effort, host-local UDP notification channel.

mothx processes sharing a session directory announce lease changes as small JSON datagrams sent to the loopback
directed broadcast address ``127.255.255.255:<port>`` (port 49371, or ``MOTHX_RUNTIME_BUS_PORT``). Every process
listening on that address and port (with address/port reuse) receives a copy; the listener binds the loopback
broadcast address, never the wildcard address (see :mod:`store.mothx.bus.listener` for what was measured).

Nothing here authorizes anything. The bus is unauthenticated: any local process can send a datagram. A
message accepted by :class:`BusListener` only updates a process-local :class:`OwnershipCache` and produces a
:class:`BusHint` telling the application *which* session to re-read from SQLite; the screen never shows data
carried by a datagram without that re-read, and text from a datagram is never printed raw (error and status
lines pass :mod:`store.safetext`).

Modules, by responsibility (no cycles: each imports only the ones above it):

* :mod:`~store.mothx.bus.message` — :class:`BusMessage` (also ``Message``), :func:`encode`, :func:`decode` /
  :func:`check_datagram` (protocol version 3, the validation of 16.4), the port and identity helpers;
* :mod:`~store.mothx.bus.ownership` — :class:`OwnershipCache` (16.5): ``known`` / ``uncertain`` / ``unknown``
  (never "idle"), and the per-origin sequence rules hardened so a forged ``seq`` cannot mute an origin;
* :mod:`~store.mothx.bus.listener` — :class:`BusListener`: loopback-only, size cap, validation, own-origin skip,
  dedupe by ``messageId`` (10 s, at most 4096 ids); counters for the Health screen;
* :mod:`~store.mothx.bus.publisher` — :class:`BusPublisher` and :func:`install_publisher`, plugged into
  :mod:`store.mothx.leases`.

Every thread started here is a daemon, and every ``close()`` joins its thread for at most one second.
"""

from __future__ import annotations

from store.mothx.bus.listener import BusHint, BusListener, BusStats, HintCallback
from store.mothx.bus.message import (
    BROADCAST_ADDR,
    DEFAULT_PORT,
    LEASE_TYPES,
    LISTEN_ADDR,
    MAX_DATAGRAM,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    BusMessage,
    InvalidBusMessage,
    Message,
    bus_port,
    check_datagram,
    database_identity,
    decode,
    encode,
    from_json,
    is_loopback,
    process_origin_id,
    snapshot_interval,
    validate,
)
from store.mothx.bus.ownership import (
    SEQ_JUMP_LIMIT,
    SEQ_REORDER_WINDOW,
    ApplyResult,
    CacheStats,
    OwnershipCache,
    OwnershipEntry,
    OwnershipLookup,
    OwnershipState,
)
from store.mothx.bus.publisher import (
    BusPublisher,
    PublisherStats,
    install_publisher,
    installed_publisher,
    uninstall_publisher,
)

__all__ = [
    "ApplyResult", "BROADCAST_ADDR", "BusHint", "BusListener", "BusMessage", "BusPublisher", "BusStats",
    "CacheStats", "DEFAULT_PORT", "HintCallback", "InvalidBusMessage", "LEASE_TYPES", "LISTEN_ADDR",
    "MAX_DATAGRAM", "MESSAGE_TYPES", "Message", "OwnershipCache", "OwnershipEntry", "OwnershipLookup",
    "OwnershipState", "PROTOCOL_VERSION", "PublisherStats", "SEQ_JUMP_LIMIT", "SEQ_REORDER_WINDOW", "bus_port",
    "check_datagram", "database_identity", "decode", "encode", "from_json", "install_publisher",
    "installed_publisher", "is_loopback", "process_origin_id", "snapshot_interval", "uninstall_publisher",
    "validate",
]
