"""Lease bus: message encoding and validation, the ownership cache, and real UDP round trips on loopback."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.mothx import bus
from store.mothx.bus import (
    BusHint,
    BusListener,
    BusMessage,
    BusPublisher,
    InvalidBusMessage,
    OwnershipCache,
    OwnershipState,
    decode,
    encode,
    from_json,
)

if TYPE_CHECKING:
    from store.mothx.leases import LeaseSnapshot

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = ("127.0.0.1", 40000)
SID = "0123456789abcdef"
DB = "/tmp/sessions-a/sessions.db"


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def msg(kind: str = "acquired", *, src: str = "pid-1-aaaa", seq: int = 0, mid: str | None = None,
        **fields: object) -> BusMessage:
    values: dict[str, object] = {"session_id": SID, "database_identity": DB}
    if kind == "database_rebuilt":
        values = {"path": DB}
    values.update(fields)
    return BusMessage(type=kind, message_id=mid or f"{src}-1-{seq}-{kind}-{values.get('session_id', '')}",
                      origin_instance_id=src, seq=seq, **values)  # type: ignore[arg-type]


def raw(obj: dict[str, object]) -> bytes:
    return json.dumps(obj).encode()


BASE: dict[str, object] = {"version": 3, "messageId": "m-1", "type": "acquired", "sessionId": SID,
                           "originInstanceId": "pid-1-aaaa"}


def with_(**changes: object) -> dict[str, object]:
    obj = dict(BASE)
    for key, value in changes.items():
        if value is _DEL:
            obj.pop(key, None)
        else:
            obj[key] = value
    return obj


_DEL = object()


# ---------------------------------------------------------------------------------------------------------------
# encode / decode


def test_round_trip_with_every_field() -> None:
    m = BusMessage(type="state_changed", message_id="pid-7-ab-123-4", origin_instance_id="pid-7-ab",
                   session_id=SID, database_identity=DB, path="", origin="recovery", owner_instance_id="pid-7-ab",
                   owner_pid=7, run_id="r1", epoch=9, expires_at=1767225600, seq=4, run_status="running",
                   phase="tool")
    data = encode(m)
    assert decode(data, LOOPBACK) == m
    obj = json.loads(data)
    assert obj == {"version": 3, "messageId": "pid-7-ab-123-4", "type": "state_changed", "sessionId": SID,
                   "databaseIdentity": DB, "origin": "recovery", "originInstanceId": "pid-7-ab",
                   "ownerInstanceId": "pid-7-ab", "ownerPid": 7, "runId": "r1", "epoch": 9,
                   "expiresAt": 1767225600, "seq": 4, "runStatus": "running", "phase": "tool"}


def test_encode_omits_empty_fields_but_keeps_the_required_four() -> None:
    obj = json.loads(encode(BusMessage(type="released", message_id="x", origin_instance_id="o", session_id=SID)))
    assert obj == {"version": 3, "messageId": "x", "type": "released", "originInstanceId": "o", "sessionId": SID}


def test_encode_refuses_over_4096_bytes_and_invalid_messages() -> None:
    with pytest.raises(InvalidBusMessage) as err:
        encode(msg(run_status="x" * 4100))
    assert err.value.reason == "oversized"
    with pytest.raises(InvalidBusMessage) as err:
        encode(msg("lease_acquired"))
    assert err.value.reason == "type"
    # without the check only the size limit applies
    assert json.loads(encode(msg("lease_acquired"), check=False))["type"] == "lease_acquired"


def test_database_rebuilt_round_trip() -> None:
    m = msg("database_rebuilt")
    assert decode(encode(m)) == m


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (with_(version=2), "version"),
        (with_(version="3"), "version"),
        (with_(version=3.0), "version"),
        (with_(version=True), "version"),
        (with_(version=_DEL), "version"),
        (with_(messageId=""), "message_id"),
        (with_(messageId=_DEL), "message_id"),
        (with_(messageId="m" * 257), "message_id"),
        (with_(messageId="é" * 129), "message_id"),  # 258 UTF-8 bytes
        (with_(originInstanceId=""), "origin_instance_id"),
        (with_(originInstanceId="o" * 257), "origin_instance_id"),
        (with_(origin="p" * 129), "origin"),
        (with_(sessionId=""), "session_id"),
        (with_(sessionId=_DEL), "session_id"),
        (with_(sessionId="s" * 257), "session_id"),
        (with_(type="lease_acquired"), "type"),
        (with_(type="renewed"), "type"),
        (with_(type=""), "type"),
        (with_(type=7), "field_type"),
        (with_(sessionId=5), "field_type"),
        (with_(databaseIdentity=["a"]), "field_type"),
        (with_(epoch="7"), "field_type"),
        (with_(epoch=7.0), "field_type"),
        (with_(epoch=True), "field_type"),
        (with_(ownerPid={"a": 1}), "field_type"),
        (with_(seq=1.5), "field_type"),
        (with_(epoch=-1), "integer_range"),
        (with_(ownerPid=-5), "integer_range"),
        (with_(ownerPid=2**31), "integer_range"),
        (with_(epoch=2**63), "integer_range"),
        (with_(expiresAt=2**63), "integer_range"),
        (with_(seq=2**64), "integer_range"),
        (with_(type="database_rebuilt", path="/x/sessions.db"), "session_id"),
        (with_(type="database_rebuilt", sessionId=_DEL), "path"),
        (with_(type="database_rebuilt", sessionId=_DEL, path=""), "path"),
    ],
)
def test_decode_rejects(obj: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidBusMessage) as err:
        decode(raw(obj), LOOPBACK)
    assert err.value.reason == reason
    assert bus.check_datagram(raw(obj), LOOPBACK) == reason
    assert str(err.value).endswith(".")


def test_limits_are_inclusive() -> None:
    ok = decode(raw(with_(messageId="m" * 256, originInstanceId="o" * 256, origin="p" * 128, sessionId="s" * 256)))
    assert len(ok.message_id) == 256 and len(ok.origin) == 128
    assert decode(raw(with_(seq=2**64 - 1, epoch=2**63 - 1))).seq == 2**64 - 1
    # a 4096-character path fits the rule (checked on the object: with the other fields it cannot fit a datagram)
    rebuilt = from_json(with_(type="database_rebuilt", sessionId=_DEL, path="p" * 4096))
    assert len(rebuilt.path) == 4096
    with pytest.raises(InvalidBusMessage) as err:
        from_json(with_(type="database_rebuilt", sessionId=_DEL, path="p" * 4097))
    assert err.value.reason == "path"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not_json"),
        (b"not json", "not_json"),
        (b"\xff\xfe{}", "not_json"),
        (b'{"version":3,', "not_json"),
        (b'{"version":NaN}', "not_json"),
        (b'{"version":3,"epoch":Infinity}', "not_json"),
        (b"[" * 3000 + b"]" * 3000, "oversized"),
        (b"[" * 2000 + b"]" * 2000, "not_json"),  # nesting too deep for the decoder
        (b"[1,2]", "not_object"),
        (b'"text"', "not_object"),
        (b"null", "not_object"),
        (b"3", "not_object"),
        (b" " * 4097, "oversized"),
    ],
)
def test_decode_rejects_malformed_datagrams(data: bytes, reason: str) -> None:
    assert bus.check_datagram(data, LOOPBACK) == reason


def test_null_means_omitted_and_unknown_keys_are_ignored() -> None:
    m = decode(raw(with_(epoch=None, runId=None, future="x", nested={"a": [1]})))
    assert m.epoch == 0 and m.run_id == "" and m.session_id == SID


@pytest.mark.parametrize("addr", [("10.0.0.5", 1), ("192.168.1.2", 5), ("::1", 5, 0, 0), ("8.8.8.8", 53), "", None, 5])
def test_non_loopback_sources_are_rejected(addr: object) -> None:
    if addr is None:
        # decode() without an address skips the source check; the listener always passes one
        assert isinstance(decode(raw(BASE), None), BusMessage)
        assert not bus.is_loopback(None)
        return
    assert bus.check_datagram(raw(BASE), addr) == "non_loopback"


@pytest.mark.parametrize("addr", [("127.0.0.1", 1), ("127.255.255.254", 9), ("::ffff:127.0.0.1", 1, 0, 0)])
def test_loopback_sources_are_accepted(addr: object) -> None:
    assert isinstance(decode(raw(BASE), addr), BusMessage)


_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(bus.LEASE_TYPES),
    mid=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=60),
    origin_id=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=60),
    session=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=60),
    ident=_text, origin=st.text(st.characters(blacklist_categories=["Cs"]), max_size=30),
    owner=_text, pid=st.integers(0, 2**31 - 1), run_id=_text, epoch=st.integers(0, 2**63 - 1),
    expires=st.integers(0, 2**63 - 1), seq=st.integers(0, 2**64 - 1), status=_text, phase=_text,
)
def test_property_round_trip(kind: str, mid: str, origin_id: str, session: str, ident: str, origin: str,
                             owner: str, pid: int, run_id: str, epoch: int, expires: int, seq: int, status: str,
                             phase: str) -> None:
    m = BusMessage(type=kind, message_id=mid, origin_instance_id=origin_id, session_id=session,
                   database_identity=ident, origin=origin, owner_instance_id=owner, owner_pid=pid, run_id=run_id,
                   epoch=epoch, expires_at=expires, seq=seq, run_status=status, phase=phase)
    assert decode(encode(m), LOOPBACK) == m


# ---------------------------------------------------------------------------------------------------------------
# Ownership cache


def test_absence_is_unknown_never_idle() -> None:
    cache = OwnershipCache(clock=FakeClock())
    look = cache.lookup(DB, SID)
    assert look.state is OwnershipState.UNKNOWN and look.entry is None and look.needs_read
    assert {s.value for s in OwnershipState} == {"known", "uncertain", "unknown"}


def test_acquired_then_released() -> None:
    clock = FakeClock()
    cache = OwnershipCache(clock=clock)
    r = cache.apply(msg(seq=1, epoch=3, owner_instance_id="pid-9-x", owner_pid=9, origin="execution", run_id="r"))
    assert r.applied and not r.uncertain
    look = cache.lookup(DB, SID)
    assert look.known and look.entry is not None
    assert (look.entry.owner_instance_id, look.entry.owner_pid, look.entry.epoch, look.entry.purpose,
            look.entry.run_id) == ("pid-9-x", 9, 3, "execution", "r")
    # the key includes the database identity
    assert cache.lookup("/other/sessions.db", SID).state is OwnershipState.UNKNOWN
    r = cache.apply(msg("released", seq=2, epoch=3))
    assert r.applied and r.uncertain
    assert cache.lookup(DB, SID).state is OwnershipState.UNKNOWN


@pytest.mark.parametrize("kind", ["released", "lost"])
def test_release_with_older_epoch_is_stale(kind: str) -> None:
    cache = OwnershipCache(clock=FakeClock())
    cache.apply(msg(seq=1, epoch=5))
    r = cache.apply(msg(kind, src="pid-2-bbbb", seq=1, epoch=4))
    assert r.stale and not r.applied
    assert cache.lookup(DB, SID).known
    r = cache.apply(msg(kind, src="pid-2-bbbb", seq=2, epoch=6))
    assert r.applied and cache.lookup(DB, SID).state is OwnershipState.UNKNOWN


def test_seq_not_above_last_is_dropped() -> None:
    cache = OwnershipCache(clock=FakeClock())
    assert not cache.apply(msg(seq=5, epoch=1)).dropped
    for seq in (5, 4, 1):
        r = cache.apply(msg("released", seq=seq, epoch=1))
        assert r.dropped and not r.applied
    assert cache.lookup(DB, SID).known
    assert cache.stats().stale_seq == 3
    # seq is per origin: another origin starts its own count
    assert not cache.apply(msg("state_changed", src="pid-2-bbbb", seq=1, epoch=1)).dropped


def test_gap_marks_every_entry_of_that_origin_uncertain() -> None:
    cache = OwnershipCache(clock=FakeClock())
    cache.apply(msg(seq=1, epoch=1, session_id="s1"))
    cache.apply(msg(seq=2, epoch=1, session_id="s2"))
    cache.apply(msg(src="pid-2-bbbb", seq=1, epoch=1, session_id="s3"))
    r = cache.apply(msg("state_changed", seq=5, epoch=1, session_id="s1", run_status="running"))
    assert r.gap and r.uncertain
    assert cache.lookup(DB, "s1").reason == "gap" and cache.lookup(DB, "s2").reason == "gap"
    assert cache.lookup(DB, "s3").known  # another origin is untouched
    # a fresh announcement of one session makes that one known again; the other stays uncertain
    cache.apply(msg(seq=6, epoch=1, session_id="s2"))
    assert cache.lookup(DB, "s2").known and cache.lookup(DB, "s1").state is OwnershipState.UNCERTAIN
    assert cache.stats().gaps == 1


def test_acquired_stale_epoch_and_conflicts() -> None:
    cache = OwnershipCache(clock=FakeClock())
    cache.apply(msg(seq=1, epoch=4, owner_instance_id="A"))
    r = cache.apply(msg(src="pid-2-bbbb", seq=1, epoch=3, owner_instance_id="B"))
    assert r.stale and cache.lookup(DB, SID).entry.owner_instance_id == "A"  # type: ignore[union-attr]
    r = cache.apply(msg("ownership_snapshot", src="pid-2-bbbb", seq=2, epoch=4, owner_instance_id="B"))
    assert r.uncertain
    look = cache.lookup(DB, SID)
    assert look.state is OwnershipState.UNCERTAIN and look.reason == "conflict"
    # the same origin re-announcing the same epoch is not a conflict
    cache2 = OwnershipCache(clock=FakeClock())
    cache2.apply(msg(seq=1, epoch=4))
    assert not cache2.apply(msg("ownership_snapshot", seq=2, epoch=4)).uncertain
    # a newer epoch from anyone replaces the entry
    r = cache.apply(msg(src="pid-3-cccc", seq=1, epoch=5, owner_instance_id="C"))
    assert r.applied and cache.lookup(DB, SID).known
    assert cache.lookup(DB, SID).entry.owner_instance_id == "C"  # type: ignore[union-attr]


def test_state_changed_only_refreshes_an_existing_entry() -> None:
    clock = FakeClock()
    cache = OwnershipCache(clock=clock)
    r = cache.apply(msg("state_changed", seq=1, epoch=1, run_status="running"))
    assert not r.applied and cache.lookup(DB, SID).state is OwnershipState.UNKNOWN
    cache.apply(msg(seq=2, epoch=1))
    clock.advance(25)
    cache.apply(msg("state_changed", seq=3, epoch=1, run_status="waiting_for_approval", phase="approval"))
    clock.advance(25)  # 50 s after acquired, 25 s after the refresh
    look = cache.lookup(DB, SID)
    assert look.known and look.entry is not None
    assert (look.entry.run_status, look.entry.phase) == ("waiting_for_approval", "approval")
    # a state change announced under a newer epoch means our entry is outdated
    cache.apply(msg("state_changed", seq=4, epoch=2))
    assert cache.lookup(DB, SID).reason == "epoch"


def test_liveness_window_and_expiry() -> None:
    clock = FakeClock()
    cache = OwnershipCache(clock=clock)
    cache.apply(msg(seq=1, epoch=1, expires_at=int(clock.now) + 100))
    clock.advance(30)
    assert cache.lookup(DB, SID).known
    clock.advance(0.5)
    look = cache.lookup(DB, SID)
    assert look.state is OwnershipState.UNCERTAIN and look.reason == "stale"
    cache.apply(msg(seq=2, epoch=1, expires_at=int(clock.now) + 5))
    assert cache.lookup(DB, SID).known
    clock.advance(5)
    assert cache.lookup(DB, SID).reason == "expired"
    assert cache.stats().uncertain_lookups == 2


def test_database_rebuilt_marks_that_database_uncertain() -> None:
    cache = OwnershipCache(clock=FakeClock())
    cache.apply(msg(seq=1, epoch=1))
    cache.apply(msg(seq=2, epoch=1, database_identity="/other/sessions.db"))
    r = cache.apply(msg("database_rebuilt", seq=3))
    assert r.applied and r.uncertain
    assert cache.lookup(DB, SID).reason == "marked"
    assert cache.lookup("/other/sessions.db", SID).known


def test_prime_and_mark_uncertain() -> None:
    clock = FakeClock()
    cache = OwnershipCache(clock=clock)
    lease = _snapshot(state="active", expires_at=int(clock.now) + 15, now=int(clock.now))
    cache.prime(DB, SID, lease, run_status="running")
    look = cache.lookup(DB, SID)
    assert look.known and look.entry is not None and look.entry.from_database and look.entry.run_status == "running"
    cache.mark_uncertain(DB, SID)
    assert cache.lookup(DB, SID).reason == "marked"
    cache.prime(DB, SID, _snapshot(state="released", expires_at=int(clock.now), now=int(clock.now)))
    assert cache.lookup(DB, SID).state is OwnershipState.UNKNOWN
    cache.prime(DB, SID, lease)
    cache.prime(DB, SID, None)
    assert cache.lookup(DB, SID).state is OwnershipState.UNKNOWN


def _snapshot(*, state: str, expires_at: int, now: int) -> LeaseSnapshot:
    from store.mothx.leases import snapshot_from_row

    row = (SID, "pid-4-dddd", 4, "process", "h" * 64, 2, "run1", "execution", state, now - 1, now, expires_at, now)
    return snapshot_from_row(row, now)


_ops = st.lists(
    st.tuples(
        st.integers(0, 2),                      # origin
        st.integers(-2, 3),                     # seq delta from that origin's last
        st.sampled_from(bus.LEASE_TYPES),
        st.integers(0, 3),                      # session
        st.integers(0, 4),                      # epoch
        st.floats(0, 20),                       # clock advance
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops)
def test_property_cache_rules(ops: list[tuple[int, int, str, int, int, float]]) -> None:
    clock = FakeClock()
    cache = OwnershipCache(clock=clock)
    last: dict[str, int] = {}
    for origin_no, delta, kind, session_no, epoch, advance in ops:
        clock.advance(advance)
        origin = f"pid-{origin_no}-o"
        seq = max(1, last.get(origin, 0) + delta)
        sid = f"s{session_no}"
        before = {(e.database_identity, e.session_id): e for e in cache.entries()}
        r = cache.apply(msg(kind, src=origin, seq=seq, epoch=epoch, session_id=sid))
        after = {(e.database_identity, e.session_id): e for e in cache.entries()}
        key = (DB, sid)
        if origin in last and seq <= last[origin]:
            assert r.dropped and after == before, "a message with seq <= last must change nothing"
            continue
        gap = origin in last and seq > last[origin] + 1
        assert r.gap == gap
        last[origin] = seq
        # an entry's epoch never goes down
        if key in before and key in after:
            assert after[key].epoch >= before[key].epoch
        if gap:
            for k, e in after.items():
                if k != key and e.origin_instance_id == origin:
                    assert cache.lookup(*k).state is OwnershipState.UNCERTAIN
        if kind in ("released", "lost") and (key not in before or epoch >= before[key].epoch):
            assert cache.lookup(DB, sid).state is OwnershipState.UNKNOWN
        if kind == "state_changed" and key not in before:
            assert key not in after
        look = cache.lookup(DB, sid)
        assert (look.entry is None) == (look.state is OwnershipState.UNKNOWN)
        assert r.uncertain == (look.state is not OwnershipState.KNOWN)


# ---------------------------------------------------------------------------------------------------------------
# Listener and publisher over real UDP


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> int:
    p = free_port()
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(p))
    return p


def _listener(hints: queue.Queue[BusHint], **kw: object) -> BusListener:
    lst = BusListener(hints.put, own_origin=kw.pop("own_origin", "pid-0-listener"), **kw)  # type: ignore[arg-type]
    assert lst.start(), lst.status
    return lst


def _get(hints: queue.Queue[BusHint]) -> BusHint:
    return hints.get(timeout=3)


def test_port_comes_from_the_environment(port: int) -> None:
    assert bus.bus_port() == port
    assert bus.bus_port({}) == 49371
    assert bus.bus_port({"MOTHX_RUNTIME_BUS_PORT": "nope"}) == 49371
    assert bus.bus_port({"MOTHX_RUNTIME_BUS_PORT": "70000"}) == 49371
    assert BusPublisher(origin_instance_id="o").port == port


def test_udp_round_trip_through_loopback_broadcast(port: int) -> None:
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints)
    pub = BusPublisher(origin_instance_id="pid-1-sender")
    try:
        assert lst.port == port and lst.status == f"lease bus listening on UDP port {port}"
        assert pub.publish("acquired", session_id=SID, database_identity=DB, origin="mutation",
                           owner_instance_id="pid-1-sender", owner_pid=1, epoch=2, expires_at=2_000_000_000)
        hint = _get(hints)
        assert (hint.type, hint.session_id, hint.database_identity, hint.uncertain) == ("acquired", SID, DB, False)
        assert re.fullmatch(r"pid-1-sender-\d+-1", hint.message_id)
        assert lst.cache.lookup(DB, SID).known
        assert pub.publish("released", session_id=SID, database_identity=DB, epoch=2)
        hint = _get(hints)
        assert hint.type == "released" and hint.uncertain
        stats = lst.stats()
        assert (stats.received, stats.accepted, stats.dropped_total, stats.hints) == (2, 2, 0, 2)
        assert stats.last_message_at is not None and stats.available
        assert pub.stats().published == 2 and pub.stats().seq == 2
    finally:
        pub.close()
        lst.close()


def test_every_listener_on_the_port_receives_a_copy(port: int) -> None:
    a: queue.Queue[BusHint] = queue.Queue()
    b: queue.Queue[BusHint] = queue.Queue()
    la, lb = _listener(a), _listener(b)
    pub = BusPublisher(origin_instance_id="pid-1-sender")
    try:
        pub.publish("state_changed", session_id=SID, database_identity=DB, run_status="running")
        assert _get(a).message_id == _get(b).message_id
    finally:
        pub.close()
        la.close()
        lb.close()


def test_datagram_from_another_process(port: int) -> None:
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints)
    code = (
        "from store.mothx.bus import BusPublisher\n"
        "p = BusPublisher(origin_instance_id='pid-77-child')\n"
        "assert p.publish('acquired', session_id='abcdefabcdefabcd', database_identity='/d/sessions.db', epoch=1)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=20)
        assert proc.returncode == 0, proc.stderr
        hint = _get(hints)
        assert (hint.session_id, hint.origin_instance_id) == ("abcdefabcdefabcd", "pid-77-child")
    finally:
        lst.close()


def _sentinel(pub: BusPublisher, n: int) -> bytes:
    return encode(msg("state_changed", src="pid-5-sentinel", mid=f"sentinel-{n}", session_id=f"sent{n}"))


def test_own_origin_and_duplicates_are_dropped(port: int) -> None:
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints, own_origin="pid-3-me")
    pub = BusPublisher(origin_instance_id="pid-3-me")
    try:
        pub.publish("acquired", session_id=SID, epoch=1)           # our own announcement: skipped
        dup = encode(msg(src="pid-4-other", mid="dup-1", seq=0, epoch=1))
        pub.send_bytes(dup)
        pub.send_bytes(dup)                                         # replay: dropped
        pub.send_bytes(_sentinel(pub, 1))                           # one socket: arrives after the others
        first = _get(hints)
        assert first.message_id == "dup-1"
        assert _get(hints).message_id == "sentinel-1"
        stats = lst.stats()
        assert stats.dropped == {"own_origin": 1, "duplicate": 1}
        assert (stats.received, stats.accepted) == (4, 2)
        assert hints.empty()
    finally:
        pub.close()
        lst.close()


def test_dedupe_window_and_capacity() -> None:
    clock = FakeClock(0)
    hints: list[BusHint] = []
    lst = BusListener(hints.append, own_origin="me", clock=clock)
    data = encode(msg(mid="again", seq=0))
    assert lst.handle_datagram(data, LOOPBACK) is not None
    clock.advance(9.9)
    assert lst.handle_datagram(data, LOOPBACK) is None
    clock.advance(0.2)  # 10.1 s after first seen: forgotten
    assert lst.handle_datagram(data, LOOPBACK) is not None
    # at most 4096 ids are remembered: the oldest is forgotten first
    first = encode(msg(mid="first", seq=0))
    lst.handle_datagram(first, LOOPBACK)
    for i in range(4096):
        lst.handle_datagram(encode(msg("state_changed", mid=f"fill-{i}", seq=0)), LOOPBACK)
    assert lst.handle_datagram(first, LOOPBACK) is not None
    stats = lst.stats()
    assert stats.dropped == {"duplicate": 1} and stats.received == stats.accepted + 1
    assert len(hints) == stats.hints == stats.accepted


def test_stale_seq_is_dropped_without_a_hint() -> None:
    hints: list[BusHint] = []
    lst = BusListener(hints.append, own_origin="me")
    lst.handle_datagram(encode(msg(seq=3, mid="a")), LOOPBACK)
    assert lst.handle_datagram(encode(msg("released", seq=2, mid="b")), LOOPBACK) is None
    gap = lst.handle_datagram(encode(msg("state_changed", seq=9, mid="c", session_id="zz")), LOOPBACK)
    assert gap is not None and gap.gap
    assert lst.stats().dropped == {"stale_seq": 1} and len(hints) == 2


def test_bind_failure_is_a_status_line_not_an_exception(port: int) -> None:
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    blocker.bind(("0.0.0.0", port))  # no address/port reuse: nobody else may bind
    try:
        lst = BusListener(lambda h: None, own_origin="me")
        assert lst.start() is False
        assert lst.status.startswith("lease bus unavailable: ") and "\n" not in lst.status
        assert not lst.available and not lst.stats().available
        lst.close()
        lst.close()
    finally:
        blocker.close()


def test_close_is_idempotent_and_final(port: int) -> None:
    lst = BusListener(lambda h: None, own_origin="me")
    assert lst.start()
    thread = lst._thread
    lst.close()
    lst.close()
    assert thread is not None and not thread.is_alive()
    assert lst.start() is False and lst.closed


def test_a_failing_callback_does_not_stop_the_listener(port: int) -> None:
    got: queue.Queue[BusHint] = queue.Queue()

    def callback(hint: BusHint) -> None:
        if hint.session_id == "boom":
            raise RuntimeError("consumer bug")
        got.put(hint)

    lst = BusListener(callback, own_origin="me")
    assert lst.start()
    pub = BusPublisher(origin_instance_id="pid-8-x")
    try:
        pub.publish("acquired", session_id="boom", epoch=1)
        pub.publish("acquired", session_id="fine", epoch=1)
        assert _get(got).session_id == "fine"
        assert lst.stats().callback_errors == 1
    finally:
        pub.close()
        lst.close()


def test_publisher_backs_off_after_a_failure() -> None:
    clock = FakeClock(0)
    pub = BusPublisher(port=free_port(), origin_instance_id="pid-1-x", host="no-such-host.invalid", clock=clock)
    assert not pub.publish("acquired", session_id=SID)
    assert pub.last_error and pub.stats().backing_off
    pub.host = bus.BROADCAST_ADDR
    assert not pub.publish("acquired", session_id=SID)  # still inside the 5 s back-off: not even tried
    clock.advance(5.01)
    assert pub.publish("acquired", session_id=SID)
    stats = pub.stats()
    assert (stats.published, stats.send_failures, stats.seq) == (1, 2, 3)
    pub.close()
    pub.close()
    assert not pub.publish("acquired", session_id=SID)


def test_publisher_refuses_oversized_and_invalid_messages_but_numbers_them() -> None:
    pub = BusPublisher(port=free_port(), origin_instance_id="pid-1-x")
    assert not pub.publish("acquired", session_id=SID, run_status="x" * 5000)
    assert not pub.publish("lease_acquired", session_id=SID)
    assert pub.publish("acquired", session_id=SID)
    stats = pub.stats()
    assert (stats.refused, stats.published, stats.seq) == (2, 1, 3)
    pub.close()


def test_message_ids_and_seq_are_unique_and_increasing() -> None:
    pub = BusPublisher(port=free_port(), origin_instance_id="pid-9-abc")
    out: list[tuple[str, int]] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(200):
            ids = pub.next_ids()
            with lock:
                out.append(ids)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s for _, s in out) == list(range(1, 801))
    assert len({m for m, _ in out}) == 800
    assert all(re.fullmatch(r"pid-9-abc-\d+-(\d+)", m) and m.endswith(f"-{s}") for m, s in out)


def test_default_origin_is_the_lease_engine_instance_id() -> None:
    from store.mothx.leases import LeaseOwner

    assert BusPublisher(port=1).origin_instance_id == LeaseOwner.current().instance_id
    assert re.fullmatch(r"pid-\d+-[0-9a-f]{32}", bus.process_origin_id())


def test_install_publisher_announces_lease_changes(port: int, tmp_path: Path) -> None:
    from store.mothx import leases
    from store.mothx.sessiondir import open_session_dir

    sd = open_session_dir(tmp_path, create=True)
    with sd.db.write() as conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, '/w', '2026-01-01T00:00:00Z', 3)",
                     (SID,))
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints)
    pub = bus.install_publisher()
    try:
        assert bus.installed_publisher() is pub and pub.port == port
        guard = leases.acquire(sd, SID, "mutation")
        hint = _get(hints)
        ident = bus.database_identity(tmp_path)
        assert (hint.type, hint.session_id, hint.database_identity) == ("acquired", SID, ident)
        assert hint.concerns(ident) and not hint.concerns("/elsewhere/sessions.db")
        entry = lst.cache.lookup(ident, SID).entry
        assert entry is not None and entry.epoch == guard.lease.epoch and entry.purpose == "mutation"
        assert entry.owner_instance_id == guard.lease.owner_instance_id and entry.owner_pid == os.getpid()
        leases.publish_state_changed(guard.lease, "running", "tool")
        assert _get(hints).type == "state_changed"
        assert lst.cache.lookup(ident, SID).entry.run_status == "running"  # type: ignore[union-attr]
        guard.release()
        assert _get(hints).type == "released"
        assert lst.cache.lookup(ident, SID).state is OwnershipState.UNKNOWN
        assert pub.publish_snapshot() == 0
    finally:
        bus.uninstall_publisher()
        lst.close()
        sd.close()
    assert bus.installed_publisher() is None


def test_snapshot_announces_held_leases(port: int, tmp_path: Path) -> None:
    from store.mothx import leases
    from store.mothx.sessiondir import open_session_dir

    sd = open_session_dir(tmp_path, create=True)
    with sd.db.write() as conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, '/w', '2026-01-01T00:00:00Z', 3)",
                     (SID,))
    owner = leases.LeaseOwner()
    guard = leases.acquire(sd, SID, "mutation", owner=owner)
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints)
    pub = BusPublisher(origin_instance_id=owner.instance_id)
    try:
        pub.start_snapshots(owner, interval=0.05)
        first, second = _get(hints), _get(hints)
        assert first.type == second.type == "ownership_snapshot" and first.session_id == SID
        assert lst.cache.lookup(bus.database_identity(tmp_path), SID).known
    finally:
        pub.close()
        guard.release()
        lst.close()
        sd.close()


# ---------------------------------------------------------------------------------------------------------------
# A forged sequence number cannot mute an origin


REAL = "pid-42-realruntime"


def _feed(lst: BusListener, seq: int, mid: str, kind: str = "state_changed", **fields: object) -> BusHint | None:
    return lst.handle_datagram(encode(msg(kind, src=REAL, seq=seq, mid=mid, **fields)), LOOPBACK)


def test_forged_max_seq_does_not_mute_the_real_runtime() -> None:
    hints: list[BusHint] = []
    lst = BusListener(hints.append, own_origin="me", clock=FakeClock(0))
    assert _feed(lst, 42, "real-42", "acquired", epoch=1) is not None
    forged = _feed(lst, 2**64 - 1, "forged-1", "released", epoch=1)
    assert forged is not None and forged.gap  # delivered as a hint (re-read SQLite), never as a fact
    assert lst.cache.last_seq(REAL) == 42, "an implausible jump does not move the mark"
    got43, got44 = _feed(lst, 43, "real-43"), _feed(lst, 44, "real-44")
    assert got43 is not None and got44 is not None and not got44.gap
    # the real runtime's replayed datagrams are still dropped (by messageId), and a stale seq too
    assert _feed(lst, 44, "real-44") is None
    assert _feed(lst, 43, "real-43b") is None
    stats = lst.stats()
    assert stats.dropped == {"duplicate": 1, "stale_seq": 1}
    assert stats.cache.seq_jumps == 1 and stats.cache.seq_restarts == 0
    assert [h.message_id for h in hints] == ["real-42", "forged-1", "real-43", "real-44"]


def test_a_forged_first_message_is_undone_by_the_real_numbering() -> None:
    """The forger speaks first (we just started listening): its huge seq is the origin's first, so it is the
    mark; the real runtime's next seq is far below it, which is a restart: delivered, and the window reset."""
    hints: list[BusHint] = []
    lst = BusListener(hints.append, own_origin="me", clock=FakeClock(0))
    cache = lst.cache
    assert _feed(lst, 2**64 - 1, "forged-first", "acquired", epoch=1) is not None
    for seq in (43, 44, 45):
        assert _feed(lst, seq, f"real-{seq}", "acquired", epoch=1) is not None, seq
    assert cache.last_seq(REAL) == 45 and cache.stats().seq_restarts == 1
    assert cache.lookup(DB, SID).known  # 44 and 45 came in order after the restart


def test_a_plausible_forged_jump_mutes_at_most_the_reorder_window() -> None:
    lst = BusListener(None, own_origin="me", clock=FakeClock(0))
    _feed(lst, 10, "real-10")
    jump = bus.SEQ_REORDER_WINDOW * 4
    assert _feed(lst, 10 + jump, "forged-near") is not None  # a plausible gap: the mark moves
    delivered = [seq for seq in range(11, 11 + jump) if _feed(lst, seq, f"real-{seq}") is not None]
    assert delivered and delivered[0] <= 10 + jump - bus.SEQ_REORDER_WINDOW - 1
    assert delivered == list(range(delivered[0], 11 + jump)), "once restarted, everything is delivered"


def test_sequence_rules_at_their_edges() -> None:
    cache = OwnershipCache(clock=FakeClock())
    o = "pid-3-edges"
    assert not cache.apply(msg(src=o, seq=1000, epoch=1)).gap               # first
    r = cache.apply(msg(src=o, seq=1000 + bus.SEQ_JUMP_LIMIT, epoch=1))     # the largest plausible jump
    assert r.gap and not r.jump and cache.last_seq(o) == 1000 + bus.SEQ_JUMP_LIMIT
    top = cache.last_seq(o)
    assert top is not None
    r = cache.apply(msg(src=o, seq=top + bus.SEQ_JUMP_LIMIT + 1, epoch=1))  # one more: implausible
    assert r.jump and r.gap and cache.last_seq(o) == top
    assert cache.lookup(DB, SID).reason == "jump"
    assert cache.apply(msg(src=o, seq=top - bus.SEQ_REORDER_WINDOW, epoch=1)).dropped   # stale, at the edge
    r = cache.apply(msg(src=o, seq=top - bus.SEQ_REORDER_WINDOW - 1, epoch=1))          # one further: restart
    assert r.restart and not r.dropped and cache.last_seq(o) == top - bus.SEQ_REORDER_WINDOW - 1
    assert cache.stats().seq_restarts == 1 and cache.stats().seq_jumps == 1


def test_a_full_cache_forgets_the_oldest_write_cheaply() -> None:
    cache = OwnershipCache(clock=FakeClock(), max_entries=100)
    for i in range(250):
        cache.apply(msg(src="pid-5-many", seq=i + 1, epoch=1, session_id=f"s{i:04d}"))
    assert len(cache) == 100
    assert {e.session_id for e in cache.entries()} == {f"s{i:04d}" for i in range(150, 250)}
    cache.apply(msg(src="pid-5-many", seq=251, epoch=2, session_id="s0150"))  # rewritten: now the newest
    cache.apply(msg(src="pid-5-many", seq=252, epoch=1, session_id="fresh"))
    ids = {e.session_id for e in cache.entries()}
    assert "s0150" in ids and "s0151" not in ids and "fresh" in ids


# ---------------------------------------------------------------------------------------------------------------
# The listener binds the loopback broadcast address, and threads never keep the process alive

_CHILD_LISTENER = """
import sys, threading
from store.mothx.bus import BusListener
got = threading.Event()
lst = BusListener(lambda h: got.set() if h.session_id == "fromparent000000" else None, port=int(sys.argv[1]),
                  own_origin="pid-0-child")
assert lst.start(), lst.status
print("ready", lst._sock.getsockname()[0], flush=True)
print("got" if got.wait(10) else "timeout", flush=True)
"""


def test_listener_binds_loopback_and_another_process_still_receives(port: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", _CHILD_LISTENER, str(port)], cwd=REPO, text=True,
                             stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(REPO)))
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints)
    pub = BusPublisher(origin_instance_id="pid-1-sender")
    try:
        assert child.stdout is not None
        assert child.stdout.readline().split() == ["ready", "127.255.255.255"]
        sock = lst._sock
        assert sock is not None and sock.getsockname() == ("127.255.255.255", port)
        assert lst.host == bus.LISTEN_ADDR == bus.BROADCAST_ADDR != "0.0.0.0"
        assert pub.publish("acquired", session_id="fromparent000000", epoch=1)
        assert _get(hints).session_id == "fromparent000000"
        assert child.stdout.readline().strip() == "got"
    finally:
        pub.close()
        lst.close()
        child.wait(timeout=20)
        if child.stdout is not None:
            child.stdout.close()
    # the wildcard (or any non-loopback) address is refused outright
    wild = BusListener(None, port=port, own_origin="me", host="0.0.0.0")
    assert wild.start() is False and "loopback" in wild.status and wild._sock is None


def test_listener_is_not_reachable_by_unicast_to_another_interface(port: int) -> None:
    """Bound to 127.255.255.255, the socket only ever sees loopback broadcasts (a datagram to 127.0.0.1 does not
    arrive either: senders always use the broadcast address)."""
    hints: queue.Queue[BusHint] = queue.Queue()
    lst = _listener(hints)
    try:
        uni = BusPublisher(origin_instance_id="pid-1-uni", host="127.0.0.1")
        assert uni.publish("acquired", session_id="unicast000000000", epoch=1)
        uni.close()
        bcast = BusPublisher(origin_instance_id="pid-1-bcast")
        assert bcast.publish("acquired", session_id="broadcast0000000", epoch=1)
        bcast.close()
        assert _get(hints).session_id == "broadcast0000000"
        assert lst.stats().received == 1
    finally:
        lst.close()


def test_bus_threads_are_daemons_and_stop_within_a_second(port: int, tmp_path: Path) -> None:
    from store.mothx import leases
    from store.mothx.watch import SessionDirWatcher

    before = set(threading.enumerate())
    lst = BusListener(lambda h: None, own_origin="me")
    assert lst.start()
    watcher = SessionDirWatcher(tmp_path, lambda h: None)
    assert watcher.start()
    pub = BusPublisher(origin_instance_id="pid-1-snap")
    pub.start_snapshots(leases.LeaseOwner(), interval=30)
    started = [t for t in threading.enumerate() if t not in before]
    assert len(started) >= 3 and all(t.daemon for t in started), [(t.name, t.daemon) for t in started]
    t0 = time.monotonic()
    lst.close()
    watcher.stop()
    pub.close()
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0, f"stopping took {elapsed:.2f} s"
    assert not [t for t in started if t.is_alive()]


def test_marks_are_lazy_and_a_forgotten_mark_errs_on_the_safe_side() -> None:
    cache = OwnershipCache(clock=FakeClock(), max_origins=2)
    cache.apply(msg(src="pid-1-a", seq=1, epoch=1, session_id="s1"))
    cache.apply(msg(src="pid-2-b", seq=1, epoch=1, session_id="s2"))
    cache.apply(msg("state_changed", src="pid-1-a", seq=5, epoch=1, session_id="s1"))   # gap: s1 uncertain
    assert cache.lookup(DB, "s1").reason == "gap" and cache.lookup(DB, "s2").known
    cache.apply(msg(src="pid-3-c", seq=1, epoch=1, session_id="s3"))
    # two more origins with gaps push pid-1-a's mark out: a floor keeps s1 (and older entries) uncertain
    for origin in ("pid-4-d", "pid-5-e"):
        cache.apply(msg("state_changed", src=origin, seq=1, epoch=1, session_id="zz"))
        cache.apply(msg("state_changed", src=origin, seq=3, epoch=1, session_id="zz"))
    assert cache.lookup(DB, "s1").state is OwnershipState.UNCERTAIN
    cache.apply(msg(src="pid-2-b", seq=2, epoch=1, session_id="s9"))
    assert cache.lookup(DB, "s9").known  # written after every mark


def test_a_flood_with_gaps_and_rebuilds_stays_linear() -> None:
    lst = BusListener(None, own_origin="me", clock=FakeClock(0))
    data = []
    for n in range(1, 20_001):
        if n % 2:
            data.append(encode(msg(src="pid-6-flood", seq=2 * n, mid=f"f-{n}", epoch=1, session_id=f"{n:016x}")))
        else:
            data.append(encode(msg("database_rebuilt", src="pid-6-flood", seq=2 * n, mid=f"f-{n}")))
    t0 = time.monotonic()
    for d in data:
        lst.handle_datagram(d, LOOPBACK)
    elapsed = time.monotonic() - t0
    stats = lst.stats()
    assert stats.accepted == 20_000 and stats.cache.gaps == 19_999 and stats.cache.entries == 10_000
    assert elapsed < 15, f"{elapsed:.1f} s for 20,000 datagrams"  # quadratic marking took minutes
    assert lst.cache.lookup(DB, f"{1:016x}").reason in ("gap", "marked")
