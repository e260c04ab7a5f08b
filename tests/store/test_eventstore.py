"""The event store: format, torn tail vs corruption, the append protocol under kills, reconcile, rebuild,
migration, the O(1) append path, and read-only inspection."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import ReadOnlyStore, RepairRefused
from store.eventstore import (
    APPENDED,
    BLOCKED,
    COMMITTED,
    CORRUPT,
    HEALTHY,
    INCONSISTENT,
    PREPARED,
    RECONCILING,
    RECOVERY_REQUIRED,
    EventBatch,
    EventRecord,
    EventStoreNotHealthy,
    EventStoreUnreadable,
    append_event_batch,
    append_prepared_event_batch,
    classify,
    event_store,
    inspect_event_store,
    next_sequence,
    read_committed_event_batches,
    spec_for,
    write_stats,
)
from store.eventstore.intents import INTENTS_TABLE, PROJECTION_TABLE
from store.eventstore.migrate import MigrationRefused, migrate_legacy_entries
from store.eventstore.records import digest_event_batch, encode_batch
from store.eventstore.repairs import RebuildEventProjection, ReconcileEventIntents, projection_problem
from store.mothx.db import OpenMode
from store.mothx.lease_guard import acquire
from store.mothx.leases import LeaseOwner, clock_override, sqlite_now
from store.mothx.repairs import STEP_ENV
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import create_session

REPO = Path(__file__).resolve().parents[2]
HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe", "\ud83d", "pid-4242-[/]",
           "[@click=app.quit]x[/]", "/home/u/[archive]/repo", "é ü 漢字"]


def rec(sid: str, i: int, kind: str = "message", text: str = "hello") -> EventRecord:
    return EventRecord(f"ev{i}", sid, kind, {"text": text, "i": i}, "2026-03-01T10:00:00Z")


def app(sd: SessionDir, sid: str, events: list[EventRecord], **kw: object) -> EventBatch:
    """Append under a mutation lease of this process (a cold write is refused once a lease row exists)."""
    with acquire(sd, sid, "mutation") as guard:
        return append_event_batch(sd, sid, events, guard, **kw)  # type: ignore[arg-type]


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def _log(batches: list[int], sid: str = "s") -> tuple[bytes, list[int]]:
    """One segment of batches of the given sizes, and the byte offsets where each batch ends."""
    out = b""
    ends = []
    seq = 1
    for n, size in enumerate(batches):
        events = [rec(sid, seq + k, text=f"t{n}-{k}") for k in range(size)]
        lines, footer, _ = encode_batch(f"b{n}", seq, events)
        out += lines + footer
        ends.append(len(out))
        seq += size
    return out, ends


# ---------------------------------------------------------------------------------------------------------------
# Format


def test_round_trip_keeps_hostile_payloads(sd: SessionDir) -> None:
    sid = create_session(sd)
    events = [EventRecord(f"e{i}", sid, "message", {"text": h, "n": [1, 2.5, None, True]}, "2026-01-01T00:00:00Z",
                          run_id=h, turn_id="t") for i, h in enumerate(HOSTILE)]
    batch = app(sd, sid, events)
    assert (batch.seq_from, batch.seq_to, batch.count) == (1, len(HOSTILE), len(HOSTILE))
    assert batch.digest == digest_event_batch(events)
    read = read_committed_event_batches(sd, sid)
    assert [e for b in read for e in b.events] == events
    raw = (event_store(sd, sid).path / "seg-00000001.jsonl").read_bytes()
    assert raw.isascii() and b"\x1b" not in raw and raw.endswith(b"\n")


def test_hostile_session_id_gets_a_hashed_folder(sd: SessionDir) -> None:
    sid = create_session(sd, "../../[x]\x1b]0;t\x07")
    app(sd, sid, [rec(sid, 1)])
    path = event_store(sd, sid).path
    assert path.parent == sd.root / "events" and path.name.startswith("sid-")
    assert inspect_event_store(sd, sid).state == HEALTHY


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_every_truncation_point_is_clean_or_torn(sizes: list[int], data: st.DataObject) -> None:
    log, ends = _log(sizes)
    cut = data.draw(st.integers(0, len(log)))
    result = classify([("seg-00000001.jsonl", log[:cut])])
    complete = [e for e in ends if e <= cut]
    assert result.status != "corrupt", (cut, result.reason)
    assert len(result.batches) == len(complete)
    if cut in ends or cut == 0:
        assert result.status == "clean"
    else:
        assert result.status == "torn"
        assert result.torn_offset == (complete[-1] if complete else 0)
        assert result.torn_offset + result.torn_bytes == cut


def test_every_truncation_point_exhaustively() -> None:
    log, ends = _log([2, 1, 3])
    for cut in range(len(log) + 1):
        result = classify([("seg-00000001.jsonl", log[:cut])])
        assert result.status == ("clean" if cut in (0, *ends) else "torn"), cut
        assert len(result.batches) == sum(1 for e in ends if e <= cut)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_flipped_byte_in_the_middle_is_corruption(data: st.DataObject) -> None:
    log, ends = _log([2, 3, 1])
    pos = data.draw(st.integers(0, len(log) - 2))  # the last byte is the end, not the middle
    mask = data.draw(st.integers(1, 255))
    bad = bytearray(log)
    bad[pos] ^= mask
    result = classify([("seg-00000001.jsonl", bytes(bad))])
    assert result.status == "corrupt", (pos, mask, result)
    assert all(b.offset + b.length <= pos for b in result.batches)  # nothing at or after the damage is read


def test_corruption_in_a_sealed_segment_and_truncated_sealed_segment() -> None:
    log, ends = _log([1, 1])
    r = classify([("seg-00000001.jsonl", log[:ends[0] - 3]), ("seg-00000002.jsonl", b"")])
    assert r.status == "corrupt" and "sealed" in r.reason
    # a missing middle segment shows as a sequence gap
    a, _ = _log([1])
    later = encode_batch("b9", 5, [rec("s", 5)])
    r = classify([("seg-00000001.jsonl", a), ("seg-00000003.jsonl", later[0] + later[1])])
    assert r.status == "corrupt" and "seq" in r.reason


# ---------------------------------------------------------------------------------------------------------------
# States and repairs


def _torn(sd: SessionDir, sid: str) -> None:
    """A prepared intent whose bytes stop after its event lines (a crash mid-append)."""
    seq = next_sequence(sd, sid)
    events = [rec(sid, seq), rec(sid, seq + 1)]
    guard = acquire(sd, sid, "mutation")
    spec = spec_for(sid, events, seq, guard, batch_id="torn1")
    from store.eventstore.protocol import prepare_event_intent

    tail = event_store(sd, sid).tail()
    prepare_event_intent(sd, spec, guard, tail.last_batch_id, tail.next_seq)
    guard.release()
    lines, footer, _ = encode_batch(spec.id, seq, events)
    event_store(sd, sid).path.mkdir(parents=True, exist_ok=True)
    with open(event_store(sd, sid).path / "seg-00000001.jsonl", "ab") as fh:
        fh.write(lines + footer[:10])


def test_torn_tail_is_reconciling_and_reconcile_cuts_it_and_aborts(sd: SessionDir) -> None:
    sid = create_session(sd)
    app(sd, sid, [rec(sid, 1)])
    _torn(sd, sid)
    ins = inspect_event_store(sd, sid)
    assert ins.state == RECONCILING and "torn tail" in ins.reason
    with pytest.raises(EventStoreNotHealthy):
        app(sd, sid, [rec(sid, 9)])
    assert len(read_committed_event_batches(sd, sid)) == 1  # reads tolerate reconciling
    preview = ReconcileEventIntents(sd, sid).preview()
    assert preview.allowed
    assert [c.action for c in preview.changes if c.kind != "lease"] == ["truncate", "update"]
    ReconcileEventIntents(sd, sid).apply(preview)
    ins = inspect_event_store(sd, sid)
    assert ins.state == HEALTHY, ins.reason
    assert {i.id: i.state for i in ins.intents}["torn1"] == "aborted"
    assert app(sd, sid, [rec(sid, 2)]).seq_from == 2


def test_appended_with_missing_bytes_becomes_recovery_required(sd: SessionDir) -> None:
    sid = create_session(sd)
    app(sd, sid, [rec(sid, 1)])
    events = [rec(sid, 2)]
    with acquire(sd, sid, "mutation") as guard:
        spec = spec_for(sid, events, 2, guard, batch_id="lost1")
        append_prepared_event_batch(sd, spec, events, guard)
    store = event_store(sd, sid)
    seg = store.path / "seg-00000001.jsonl"
    data = seg.read_bytes()
    b = store.inspect().batch("lost1")
    assert b is not None
    seg.write_bytes(data[:b.offset])  # the bytes vanished (e.g. a restored backup)
    ins = inspect_event_store(sd, sid)
    assert ins.state == RECONCILING
    ReconcileEventIntents(sd, sid).apply()
    ins = inspect_event_store(sd, sid)
    assert ins.state == BLOCKED and "lost1" in ins.reason
    assert {i.id: i.state for i in ins.intents}["lost1"] == RECOVERY_REQUIRED
    with pytest.raises(EventStoreNotHealthy):
        app(sd, sid, [rec(sid, 3)])
    assert not ReconcileEventIntents(sd, sid).preview().allowed


def test_complete_bytes_of_a_prepared_intent_are_adopted(sd: SessionDir) -> None:
    sid = create_session(sd)
    events = [rec(sid, 1)]
    with acquire(sd, sid, "mutation") as guard:
        spec = spec_for(sid, events, 1, guard, batch_id="b1")
        append_prepared_event_batch(sd, spec, events, guard)
    with sd.db.write() as conn:
        conn.execute(f"UPDATE {INTENTS_TABLE} SET state = 'prepared'")
    assert read_committed_event_batches(sd, sid) == []  # in doubt: not canonical
    ReconcileEventIntents(sd, sid).apply()
    assert [b.batch_id for b in read_committed_event_batches(sd, sid)] == ["b1"]
    assert projection_problem(inspect_event_store(sd, sid)) == ""


def test_orphan_missing_committed_and_corrupt_fail_closed(sd: SessionDir) -> None:
    sid = create_session(sd)
    app(sd, sid, [rec(sid, 1)])
    seg = event_store(sd, sid).path / "seg-00000001.jsonl"
    good = seg.read_bytes()
    lines, footer, _ = encode_batch("orphan", 2, [rec(sid, 2)])
    seg.write_bytes(good + lines + footer)
    ins = inspect_event_store(sd, sid)
    assert ins.state == INCONSISTENT and "no intent" in ins.reason
    with pytest.raises(EventStoreUnreadable):
        read_committed_event_batches(sd, sid)
    seg.write_bytes(b"")
    assert inspect_event_store(sd, sid).state == INCONSISTENT
    bad = bytearray(good)
    bad[5] ^= 0x20
    seg.write_bytes(bytes(bad))
    ins = inspect_event_store(sd, sid)
    assert ins.state == CORRUPT and "seg-00000001.jsonl:0" in ins.reason
    assert not ReconcileEventIntents(sd, sid).preview().allowed
    assert not RebuildEventProjection(sd, sid).preview().allowed
    assert seg.read_bytes() == bytes(bad)  # never repaired


def test_rebuild_projection(sd: SessionDir) -> None:
    sid = create_session(sd)
    for i in range(3):
        app(sd, sid, [rec(sid, i, kind="tool_result" if i else "message")])
    with sd.db.write() as conn:
        conn.execute(f"DELETE FROM {PROJECTION_TABLE}")
    assert projection_problem(inspect_event_store(sd, sid)) == "no projection row"
    preview = RebuildEventProjection(sd, sid).preview()
    assert preview.allowed and "3 batches" in preview.changes[1].summary
    RebuildEventProjection(sd, sid).apply(preview)
    ins = inspect_event_store(sd, sid)
    assert projection_problem(ins) == "" and ins.projection is not None and ins.projection.events == 3
    assert not RebuildEventProjection(sd, sid).preview().allowed  # current now


def test_a_stale_preview_is_refused(sd: SessionDir) -> None:
    sid = create_session(sd)
    app(sd, sid, [rec(sid, 1)])
    _torn(sd, sid)
    preview = ReconcileEventIntents(sd, sid).preview()
    with open(event_store(sd, sid).path / "seg-00000001.jsonl", "ab") as fh:
        fh.write(b"x")
    with pytest.raises(RepairRefused):
        ReconcileEventIntents(sd, sid).apply(preview)


def test_reconcile_refuses_under_a_foreign_valid_lease(sd: SessionDir) -> None:
    sid = create_session(sd)
    _torn(sd, sid)
    other = LeaseOwner(pid=999999)
    guard = acquire(sd, sid, "mutation", owner=other)
    preview = ReconcileEventIntents(sd, sid).preview()
    assert not preview.allowed and "valid lease" in preview.refusal
    guard.release()


def test_inspection_in_a_read_mode_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with open_session_dir(root, create=True) as w:
        sid = create_session(w)
    before = sorted((p.name, p.stat().st_size) for p in root.iterdir())
    with open_session_dir(root, OpenMode.READ_ONLY) as ro:
        ins = inspect_event_store(ro, sid)
        assert ins.state == HEALTHY and not ins.intents
        assert read_committed_event_batches(ro, sid) == []
        with pytest.raises(ReadOnlyStore):
            append_event_batch(ro, sid, [rec(sid, 1)], None)
    assert not (root / "events").exists()
    assert sorted((p.name, p.stat().st_size) for p in root.iterdir()) == before
    with sqlite3.connect(f"file:{root / 'sessions.db'}?immutable=1", uri=True) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'sessionscope_%'").fetchone()[0] == 0


def test_migration_is_lossless(sd: SessionDir) -> None:
    sid = create_session(sd)
    with sd.db.write() as conn:
        for i, h in enumerate(HOSTILE):
            conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                         (sid, f"x{i}", "message", None, "2026-01-01T00:00:00Z", '{"t": "' + h + '",  "odd":1 }'))
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                     (sid, "blob", "custom", "x0", "t", b"\x00\xff"))
        rows = conn.execute("SELECT seq, session_id, id, type, parent_id, timestamp, data FROM entries "
                            "WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    report = migrate_legacy_entries(sd, sid, None, batch_size=4)
    assert report.entries == len(rows) and report.batches == 3 and report.verified
    from store.eventstore.records import entry_from_record

    got = [entry_from_record(e) for b in read_committed_event_batches(sd, sid) for e in b.events]
    assert [tuple(g.values()) for g in got] == [tuple(r) for r in rows]
    with pytest.raises(MigrationRefused):
        migrate_legacy_entries(sd, sid, None)


def test_append_path_does_not_scan_the_log(sd: SessionDir) -> None:
    sid = create_session(sd)
    app(sd, sid, [rec(sid, 0)])
    scans = write_stats().full_scans
    for i in range(1, 150):
        app(sd, sid, [rec(sid, i)])
    assert write_stats().full_scans == scans
    assert next_sequence(sd, sid) == 151
    inspect_event_store(sd, sid)
    assert write_stats().full_scans == scans + 1


def test_segments_roll_and_the_manifest_names_the_sealed_ones(sd: SessionDir, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.eventstore.segments as segments

    monkeypatch.setattr(segments, "SEGMENT_MAX_BYTES", 600)
    sid = create_session(sd)
    for i in range(6):
        app(sd, sid, [rec(sid, i)])
    store = event_store(sd, sid)
    names = store.segment_names()
    assert len(names) >= 2
    manifest, problem = store.read_manifest()
    assert manifest is not None and not problem and manifest["active"] == names[:-1]
    assert inspect_event_store(sd, sid).state == HEALTHY
    os.unlink(store.path / names[0])
    assert inspect_event_store(sd, sid).state == CORRUPT


# ---------------------------------------------------------------------------------------------------------------
# Kill the writer at every step of the append protocol

CHILD = """
import sys
from store.mothx.sessiondir import open_session_dir
from store.mothx.lease_guard import acquire
from store.eventstore import EventRecord, append_event_batch
sd = open_session_dir(sys.argv[1])
sid = sys.argv[2]
guard = acquire(sd, sid, "mutation")
events = [EventRecord(f"k{i}", sid, "message", {"text": "killed" * 40, "i": i}, "2026-03-01T10:00:00Z") for i in range(3)]
def finalize(conn):
    conn.execute("UPDATE sessions SET expert_id = 'finalized' WHERE id = ?", (sid,))
append_event_batch(sd, sid, events, guard, batch_id="killed", finalize=finalize)
guard.release()
sd.close()
print("DONE", flush=True)
"""


def _child(root: Path, sid: str, steps: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), STEP_ENV: steps}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), sid], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def kill_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("kill") / "sessions"
    with open_session_dir(root, create=True) as sd:
        sid = create_session(sd)
        for i in range(3):
            app(sd, sid, [rec(sid, i), rec(sid, i + 100)], batch_id=f"pre{i}")
    return root, sid


def test_append_survives_a_kill_at_every_step(kill_template: tuple[Path, str], tmp_path: Path) -> None:
    root, sid = kill_template
    listing = tmp_path / "listing"
    shutil.copytree(root, listing)
    proc = _child(listing, sid, "list")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "DONE" in out, err
    steps = [line.split(" ", 2)[2] for line in err.splitlines() if line.startswith("STEP ")]
    assert steps == ["append.prepare", "append.prepared", "append.events_written", "append.footer_written",
                     "append.fsynced", "append.appended", "append.finalize", "append.committed"]
    for k, name in enumerate(steps, start=1):
        copy = tmp_path / f"k{k}"
        shutil.copytree(root, copy)
        proc = _child(copy, sid, f"pause:{k}")
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if line.startswith("PAUSED ") or not line:
                break
        assert line.strip() == f"PAUSED {k} {name}", proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        with open_session_dir(copy) as sd:
            assert sd.db.quick_check() == "ok"
            before = inspect_event_store(sd, sid)
            committed_before = [b.batch_id for b in before.committed()]
            assert committed_before[:3] == ["pre0", "pre1", "pre2"], name
            killed = {i.id: i.state for i in before.intents}.get("killed")
            with sd.db.read() as conn:
                finalized = conn.execute("SELECT expert_id FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
                later = sqlite_now(conn) + 100
            assert (killed == COMMITTED) == (finalized == "finalized") == ("killed" in committed_before), name
            with clock_override(later):
                repair = ReconcileEventIntents(sd, sid)
                preview = repair.preview()
                if preview.allowed:
                    repair.apply(preview)
            after = inspect_event_store(sd, sid)
            assert after.state == HEALTHY, (name, after.reason)
            committed = [b.batch_id for b in after.committed()]
            assert committed[:3] == ["pre0", "pre1", "pre2"], name
            state = {i.id: i.state for i in after.intents}.get("killed")
            # complete bytes are adopted, missing bytes abort; nothing in doubt stays
            assert state in (None, COMMITTED, "aborted"), name
            assert ("killed" in committed) == (state == COMMITTED), name
            expected = COMMITTED if k >= steps.index("append.footer_written") + 1 else ("aborted" if k >= 2 else None)
            assert state == expected, (name, state)
            if state == COMMITTED:
                assert [e.event_id for e in after.committed()[-1].events] == ["k0", "k1", "k2"]
            assert projection_problem(after) == "", name
            with clock_override(later + 100):
                assert app(sd, sid, [rec(sid, 999)]).seq_from == (
                    10 if state == COMMITTED else 7), name


def test_states_are_the_seed_constants() -> None:
    assert (PREPARED, APPENDED, COMMITTED, RECOVERY_REQUIRED) == ("prepared", "appended", "committed",
                                                                  "recovery_required")


def test_scan_cuts_a_torn_tail_only_under_the_writers_lease(sd: SessionDir) -> None:
    from store.errors import LeaseLost
    from store.eventstore import scan_event_store

    sid = create_session(sd)
    app(sd, sid, [rec(sid, 1)])
    seg = event_store(sd, sid).path / "seg-00000001.jsonl"
    with open(seg, "ab") as fh:
        fh.write(b'{"batchId":"t","ev')
    torn = seg.read_bytes()
    stale = acquire(sd, sid, "mutation")
    stale.release()
    with pytest.raises(LeaseLost):
        scan_event_store(sd, sid, stale)
    assert seg.read_bytes() == torn  # nothing cut without the lease
    assert event_store(sd, sid).inspect().status == "torn"  # Inspect never cuts either
    other = acquire(sd, sid, "mutation")
    result = scan_event_store(sd, sid, other)
    assert result.status == "clean" and len(seg.read_bytes()) < len(torn)
    assert (event_store(sd, sid).path / "manifest.json").is_file()
    other.release()


RECONCILE_CHILD = """
import sys
from store.mothx.sessiondir import open_session_dir
from store.eventstore.repairs import ReconcileEventIntents
sd = open_session_dir(sys.argv[1])
repair = ReconcileEventIntents(sd, sys.argv[2])
repair.apply(repair.preview())
sd.close()
print("DONE", flush=True)
"""


def test_reconcile_survives_a_kill_at_every_step(tmp_path: Path) -> None:
    template = tmp_path / "template"
    with open_session_dir(template, create=True) as sd:
        sid = create_session(sd)
        app(sd, sid, [rec(sid, 1)], batch_id="kept")
        _torn(sd, sid)
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def child(root: Path, steps: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", RECONCILE_CHILD, str(root), sid], cwd=REPO,
                                env={**env, STEP_ENV: steps}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    listing = tmp_path / "listing"
    shutil.copytree(template, listing)
    out, err = child(listing, "list").communicate(timeout=60)
    steps = [line.split(" ", 2)[2] for line in err.splitlines() if line.startswith("STEP ")]
    assert steps == ["reconcile.acquire", "reconcile.truncate", "reconcile.settle", "reconcile.release"], err
    for k, name in enumerate(steps, start=1):
        copy = tmp_path / f"r{k}"
        shutil.copytree(template, copy)
        proc = child(copy, f"pause:{k}")
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.strip() == f"PAUSED {k} {name}", proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        with open_session_dir(copy) as sd:
            assert sd.db.quick_check() == "ok"
            mid = inspect_event_store(sd, sid)
            assert mid.state in (RECONCILING, HEALTHY), (name, mid.reason)
            assert [b.batch_id for b in mid.committed()] == ["kept"], name
            with sd.db.read() as conn:
                later = sqlite_now(conn) + 100
            with clock_override(later):
                repair = ReconcileEventIntents(sd, sid)
                preview = repair.preview()
                if preview.allowed:
                    repair.apply(preview)
            after = inspect_event_store(sd, sid)
            assert after.state == HEALTHY, (name, after.reason)
            assert [b.batch_id for b in after.committed()] == ["kept"], name
            assert {i.id: i.state for i in after.intents}["torn1"] == "aborted", name
