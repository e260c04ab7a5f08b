"""Fuzzing the lease bus listener: malformed, oversized, spoofed and replayed datagrams.

The listener must never crash, must count every datagram exactly once, and must emit no hint — and leave the
ownership cache untouched — for any datagram it rejects. A hint is the only thing that makes a screen re-read
the database, so nothing on screen can change because of a rejected datagram.
"""

from __future__ import annotations

import json
import queue
import random
import socket
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.mothx import bus
from store.mothx.bus import BusHint, BusListener, BusMessage, BusPublisher, encode

OWN = "pid-1-ownprocess"
ORIGINS = [f"pid-{100 + i}-{'%032x' % (i * 7919)}" for i in range(6)]
LOOPBACK = ("127.0.0.1", 50000)
FOREIGN = [("10.0.0.7", 49371), ("192.168.1.20", 1234), ("0.0.0.0", 1), ("172.16.0.1", 5), ("8.8.8.8", 53),
           ("::1", 5, 0, 0), ("fe80::1", 1, 0, 0), ("", 0), ("128.0.0.1", 9), ("localhost", 1)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Datagram:
    data: bytes
    addr: tuple[object, ...]
    category: str
    expect: str  # "hint" or the exact drop reason, or "reject" (some validation reason)


class Generator:
    """Deterministic mix of valid and hostile datagrams; tracks what a correct listener must do with each."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seq: dict[str, int] = {}
        self.accepted: list[bytes] = []
        self.n = 0

    def _id(self, origin: str) -> str:
        self.n += 1
        return f"{origin}-{1_700_000_000_000_000_000 + self.n}-{self.n}"

    def _session(self) -> str:
        return f"{self.rng.randrange(40):016x}"

    def valid_obj(self, origin: str | None = None, *, seq: int | None = None) -> dict[str, object]:
        rng = self.rng
        origin = origin or rng.choice(ORIGINS)
        kind = rng.choice(bus.MESSAGE_TYPES)
        if seq is None:
            if rng.random() < 0.15:
                seq = 0  # unnumbered
            else:
                seq = self.seq.get(origin, 0) + (1 if rng.random() < 0.9 else rng.randint(2, 4))
                self.seq[origin] = seq
        obj: dict[str, object] = {"version": 3, "messageId": self._id(origin), "type": kind,
                                  "originInstanceId": origin}
        if kind == "database_rebuilt":
            obj["path"] = rng.choice(["/s/a/sessions.db", "/s/b/sessions.db"])
        else:
            obj["sessionId"] = self._session()
            obj["databaseIdentity"] = rng.choice(["/s/a/sessions.db", "/s/b/sessions.db", ""])
            obj["ownerInstanceId"] = rng.choice(ORIGINS)
            obj["ownerPid"] = rng.randint(1, 99999)
            obj["epoch"] = rng.randint(0, 6)
            obj["expiresAt"] = rng.randint(0, 2_000_000_000)
            obj["origin"] = rng.choice(["execution", "mutation", "recovery", "runtime", ""])
            if kind == "state_changed":
                obj["runStatus"] = rng.choice(["running", "completed", ""])
        if seq:
            obj["seq"] = seq
        return {k: v for k, v in obj.items() if v not in ("", 0) or k in ("version", "messageId", "type",
                                                                             "originInstanceId")}

    @staticmethod
    def dump(obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def one(self, *, hostile_only: bool = False, loopback_only: bool = False) -> Datagram:
        rng = self.rng
        roll = rng.random()
        if not hostile_only and roll < 0.10:
            data = self.dump(self.valid_obj())
            self.accepted.append(data)
            return Datagram(data, LOOPBACK, "valid", "hint")
        cats = ["random_bytes", "oversized", "version", "bad_type", "huge_field", "unknown_type", "not_json",
                "not_object", "rebuilt_rules", "own_origin", "stale_seq"]
        if not loopback_only:
            cats.append("non_loopback")
        if not hostile_only:  # accepted on purpose: a forged seq may not mute an origin (see bus.ownership)
            cats += ["seq_jump", "seq_restart"]
        if self.accepted:
            cats.append("replay")
        cat = rng.choice(cats)
        if cat == "random_bytes":
            data = rng.randbytes(rng.randint(0, 300))
            if data[:1] in (b"{",):  # keep it certainly not a valid message
                data = b"\x00" + data
            return Datagram(data, LOOPBACK, cat, "reject")
        if cat == "oversized":
            obj = self.valid_obj(seq=0)
            obj["runStatus"] = "x" * rng.randint(4097, 9000)
            data = self.dump(obj) if rng.random() < 0.7 else rng.randbytes(rng.randint(4097, 9000))
            return Datagram(data, LOOPBACK, cat, "oversized")
        if cat == "version":
            obj = self.valid_obj(seq=0)
            obj["version"] = rng.choice([0, 1, 2, 4, 33, -3, "3", 3.0, None, True, [3], {"v": 3}])
            if obj["version"] is None:
                del obj["version"]
            return Datagram(self.dump(obj), LOOPBACK, cat, "version")
        if cat == "bad_type":
            obj = self.valid_obj(seq=0)
            key = rng.choice(["messageId", "type", "sessionId", "databaseIdentity", "originInstanceId",
                              "ownerPid", "epoch", "expiresAt", "seq", "runId", "origin", "path", "phase"])
            ints = key in ("ownerPid", "epoch", "expiresAt", "seq")
            obj[key] = rng.choice(["7", 7.5, 1.0, True, [1], {"a": 1}, -1, 2**64] if ints
                                  else [7, 1.5, True, False, ["x"], {"a": "b"}])
            if obj["type"] == "database_rebuilt" and key == "sessionId":
                obj["type"] = "acquired"
            return Datagram(self.dump(obj), LOOPBACK, cat, "reject")
        if cat == "huge_field":
            obj = self.valid_obj(seq=0)
            key, limit = rng.choice([("messageId", 256), ("originInstanceId", 256), ("origin", 128),
                                     ("sessionId", 256)])
            if key == "sessionId":
                obj["type"] = rng.choice(bus.LEASE_TYPES)
                obj.pop("path", None)
            obj[key] = rng.choice(["a", "é", "漢"]) * rng.randint(limit + 1, 3000)
            return Datagram(self.dump(obj), LOOPBACK, cat, "reject")
        if cat == "unknown_type":
            obj = self.valid_obj(seq=0)
            obj["type"] = rng.choice(["lease_acquired", "renewed", "ACQUIRED", "acquired ", "heartbeat", "",
                                      "database-rebuilt", "x" * 50])
            return Datagram(self.dump(obj), LOOPBACK, cat, "reject")
        if cat == "not_json":
            good = self.dump(self.valid_obj(seq=0))
            data = rng.choice([good[: rng.randint(0, len(good) - 1)], good + b"}", good.replace(b'"', b"'"),
                               b'{"version":3,"epoch":NaN}', good[:-1] + b',}', b"\xc3\x28" + good])
            return Datagram(data, LOOPBACK, cat, "reject")
        if cat == "not_object":
            data = rng.choice([b"[]", b"null", b"true", b"42", b'"acquired"', self.dump([self.valid_obj(seq=0)])])
            return Datagram(data, LOOPBACK, cat, "reject")
        if cat == "rebuilt_rules":
            obj = self.valid_obj(seq=0)
            obj["type"] = "database_rebuilt"
            if rng.random() < 0.5:
                obj["sessionId"] = "abcdabcdabcdabcd"
                obj["path"] = "/s/a/sessions.db"
            else:
                obj.pop("sessionId", None)
                obj["path"] = rng.choice(["", None])
            return Datagram(self.dump(obj), LOOPBACK, cat, "reject")
        if cat == "own_origin":
            return Datagram(self.dump(self.valid_obj(OWN, seq=rng.randint(0, 50))), LOOPBACK, cat, "own_origin")
        if cat == "stale_seq":
            origin = rng.choice([o for o in ORIGINS if self.seq.get(o, 0) >= 1] or [""])
            if not origin:
                return Datagram(b"", LOOPBACK, "random_bytes", "reject")
            # at most SEQ_REORDER_WINDOW below the mark: stale, dropped (further below is a restart)
            low = max(1, self.seq[origin] - bus.SEQ_REORDER_WINDOW)
            obj = self.valid_obj(origin, seq=rng.randint(low, self.seq[origin]))
            return Datagram(self.dump(obj), LOOPBACK, cat, "stale_seq")
        if cat == "seq_jump":
            # an implausible jump (a forged seq): delivered, but the origin's mark stays where it was
            origin = rng.choice(ORIGINS)
            last = self.seq.get(origin)
            if last is None:
                return Datagram(b"", LOOPBACK, "random_bytes", "reject")
            seq = rng.choice([2**64 - 1, last + bus.SEQ_JUMP_LIMIT + rng.randint(1, 10**6)])
            data = self.dump(self.valid_obj(origin, seq=seq))
            self.accepted.append(data)
            return Datagram(data, LOOPBACK, cat, "hint")
        if cat == "seq_restart":
            # far below the mark: the origin restarted its numbering; delivered, the mark is reset
            far = [o for o in ORIGINS if self.seq.get(o, 0) > bus.SEQ_REORDER_WINDOW + 1]
            if not far:  # first a plausible gap (lost messages) that lifts an origin's mark high enough
                origin = rng.choice(ORIGINS)
                seq = self.seq.get(origin, 0) + rng.randint(bus.SEQ_REORDER_WINDOW + 2, 5000)
                self.seq[origin] = seq
                data = self.dump(self.valid_obj(origin, seq=seq))
                self.accepted.append(data)
                return Datagram(data, LOOPBACK, "valid", "hint")
            origin = rng.choice(far)
            seq = rng.randint(1, self.seq[origin] - bus.SEQ_REORDER_WINDOW - 1)
            self.seq[origin] = seq
            data = self.dump(self.valid_obj(origin, seq=seq))
            self.accepted.append(data)
            return Datagram(data, LOOPBACK, cat, "hint")
        if cat == "non_loopback":
            obj = self.valid_obj(seq=0)  # otherwise perfectly valid, fresh id
            return Datagram(self.dump(obj), rng.choice(FOREIGN), cat, "non_loopback")
        # replay of an accepted datagram (same messageId)
        return Datagram(rng.choice(self.accepted), LOOPBACK, "replay", "duplicate")

    def stream(self, count: int, **kw: bool) -> Iterator[Datagram]:
        for _ in range(count):
            yield self.one(**kw)


VALIDATION_REASONS = {"not_json", "not_object", "version", "field_type", "integer_range", "message_id",
                      "origin_instance_id", "origin", "type", "session_id", "path", "oversized"}


def test_fuzz_10000_datagrams_through_the_handler() -> None:
    hints: list[BusHint] = []
    # never bound: the handler is called directly, so a source address can be faked
    listener = BusListener(hints.append, own_origin=OWN, clock=FakeClock())
    gen = Generator(seed=20261120)
    categories: Counter[str] = Counter()
    expected_drops: Counter[str] = Counter()
    valid = 0
    for d in gen.stream(10_000):
        categories[d.category] += 1
        before_hints = len(hints)
        before_cache = listener.cache.entries()
        before_stats = listener.stats()
        result = listener.handle_datagram(d.data, d.addr)
        after = listener.stats()
        assert after.received == before_stats.received + 1
        if d.expect == "hint":
            valid += 1
            assert result is not None, d
            assert len(hints) == before_hints + 1 and hints[-1] is result
            sent = json.loads(d.data)
            assert (result.message_id, result.type) == (sent["messageId"], sent["type"])
            continue
        # a rejected datagram: no hint, no cache change, counted under a drop reason
        assert result is None, d
        assert len(hints) == before_hints, d
        assert listener.cache.entries() == before_cache, d
        assert after.accepted == before_stats.accepted
        (reason,) = [r for r in after.dropped if after.dropped[r] != before_stats.dropped.get(r, 0)]
        if d.expect == "reject":
            assert reason in VALIDATION_REASONS, (reason, d)
        else:
            assert reason == d.expect, (reason, d)
        expected_drops[reason] += 1
    stats = listener.stats()
    assert stats.received == 10_000
    assert stats.received == stats.accepted + stats.dropped_total
    assert stats.accepted == valid == len(hints) == stats.hints
    assert stats.dropped == dict(expected_drops)
    assert len({h.message_id for h in hints}) == len(hints)  # never two hints for one message id
    assert all(h.origin_instance_id != OWN for h in hints)
    # the mix really covered every category
    assert min(categories.values()) > 100, categories
    assert set(categories) >= {"valid", "random_bytes", "oversized", "version", "bad_type", "huge_field",
                               "unknown_type", "not_json", "not_object", "rebuilt_rules", "own_origin",
                               "stale_seq", "non_loopback", "replay", "seq_jump", "seq_restart"}
    cache = listener.cache.stats()
    assert cache.seq_jumps == categories["seq_jump"] and cache.seq_restarts == categories["seq_restart"]
    listener.close()


BATCHES, BATCH = 30, 50  # a batch fits the listener's receive buffer, so the kernel drops nothing


def test_fuzz_over_real_udp(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(port))
    hints: queue.Queue[BusHint] = queue.Queue()
    listener = BusListener(hints.put, own_origin=OWN)
    assert listener.start(), listener.status
    sender = BusPublisher(origin_instance_id="pid-2-fuzzer")
    gen = Generator(seed=7)
    sent = 0
    try:
        for batch in range(BATCHES):
            for d in gen.stream(BATCH, hostile_only=True, loopback_only=True):
                assert sender.send_bytes(d.data)
                sent += 1
            # a valid sentinel through the same socket arrives after the batch (loopback keeps the order)
            sentinel = BusMessage(type="state_changed", message_id=f"sentinel-{batch}",
                                  origin_instance_id="pid-3-sentinel", session_id=f"sentinel{batch:08d}")
            assert sender.send_bytes(encode(sentinel))
            sent += 1
            try:
                hint = hints.get(timeout=5)
            except queue.Empty:
                raise AssertionError(f"batch {batch}: {listener.stats()}") from None
            assert hint.message_id == f"sentinel-{batch}", "a rejected datagram produced a hint"
        deadline = time.monotonic() + 2
        while listener.stats().received < sent and time.monotonic() < deadline:
            time.sleep(0.01)
        stats = listener.stats()
        assert stats.received == sent
        assert stats.accepted == BATCHES == stats.hints
        assert stats.received == stats.accepted + stats.dropped_total
        assert hints.empty()
        assert listener._thread is not None and listener._thread.is_alive()
    finally:
        sender.close()
        listener.close()


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600) | st.text(max_size=300).map(str.encode))
def test_arbitrary_bytes_never_raise_anything_but_a_reason(data: bytes) -> None:
    listener = BusListener(None, own_origin=OWN)
    result = bus.check_datagram(data, LOOPBACK)
    hint = listener.handle_datagram(data, LOOPBACK)
    if isinstance(result, str):
        assert hint is None and listener.stats().dropped == {result: 1}
    else:
        assert hint is not None and hint.message_id == result.message_id


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(
    st.sampled_from(["version", "messageId", "type", "sessionId", "originInstanceId", "epoch", "seq", "ownerPid",
                     "path", "databaseIdentity", "origin", "expiresAt", "x"]),
    st.none() | st.booleans() | st.integers(-2**65, 2**65) | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.sampled_from([3, "acquired", "database_rebuilt", "released"]),
    max_size=13,
))
def test_arbitrary_json_objects_are_accepted_only_when_valid(obj: dict[str, object]) -> None:
    result = bus.check_datagram(json.dumps(obj).encode(), LOOPBACK)
    if isinstance(result, BusMessage):
        assert obj.get("version") == 3 and type(obj["version"]) is int
        assert result.type in bus.MESSAGE_TYPES
        assert result.message_id and result.origin_instance_id
        assert (result.type == "database_rebuilt") == (not result.session_id)
        for key in ("epoch", "seq", "ownerPid", "expiresAt"):
            value = obj.get(key)
            assert value is None or (isinstance(value, int) and type(value) is int and value >= 0)
