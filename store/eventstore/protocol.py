"""The cross-storage protocol: SQLite intents decide which physical batches are canonical.

Append, in order (each a step of :func:`store.mothx.repair_kit.step`, so a test can kill the writer there):

1. ``append.prepare``  — one write transaction: the lease fence, the write gate (no intent in doubt, the log's
   tail is the last committed batch), the intent row ``prepared`` with its sequence range and digest;
2. ``append.prepared`` — the event lines are written (``append.events_written``), then the footer
   (``append.footer_written``), then the file is fsynced (``append.fsynced``);
3. one write transaction: fence, ``prepared`` → ``appended`` (``append.appended``);
4. one write transaction: fence, ``appended`` → ``committed``, the projection row, and the caller's
   ``finalize(conn)`` (``append.finalize``, inside the open transaction), then ``append.committed``.

The hot path reads only the log's last line and indexed intent rows: it never re-reads the log
(:func:`store.eventstore.segments.write_stats` counts the full scans).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from store.eventstore.intents import (
    ABORTED,
    APPENDED,
    COMMITTED,
    INTENT_STATES,
    PREPARED,
    RECOVERY_REQUIRED,
    EventIntent,
    EventIntentFenced,
    EventIntentSpec,
    EventStoreNotHealthy,
    EventStoreUnreadable,
    Projection,
    ensure_tables,
    insert_prepared,
    last_committed,
    open_intents,
    read_intents,
    read_projection,
    transition,
    write_projection,
)
from store.eventstore.records import EventBatch, EventRecord, digest_event_batch
from store.eventstore.segments import EventStore, ScanResult
from store.mothx.lease_guard import LeaseGuard
from store.mothx.lease_model import sqlite_now
from store.mothx.lease_store import check_fence
from store.mothx.repair_kit import step
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line
from store.words import plural

HEALTHY = "healthy"
RECONCILING = "reconciling"
BLOCKED = "blocked"
INCONSISTENT = "inconsistent"
CORRUPT = "corrupt"
STORE_STATES = (HEALTHY, RECONCILING, BLOCKED, INCONSISTENT, CORRUPT)
READABLE_STATES = (HEALTHY, RECONCILING, BLOCKED)

Finalize = Callable[[sqlite3.Connection], None]


def event_store(sd: SessionDir, session_id: str) -> EventStore:
    return EventStore(sd.root, session_id)


# ---------------------------------------------------------------------------------------------------------------
# Inspection


@dataclass(frozen=True)
class EventStoreInspection:
    """The physical batches beside their intents, and the state they make together (fails closed)."""

    session_id: str
    state: str
    reason: str
    scan: ScanResult
    intents: tuple[EventIntent, ...]
    projection: Projection | None = None

    @property
    def batches(self) -> tuple[EventBatch, ...]:
        return self.scan.batches

    def committed(self) -> list[EventBatch]:
        ids = {i.id for i in self.intents if i.state == COMMITTED}
        return [b for b in self.scan.batches if b.batch_id in ids]

    def counts(self) -> dict[str, int]:
        return dict(Counter(i.state for i in self.intents))


def _matches(intent: EventIntent, batch: EventBatch) -> bool:
    return (intent.seq_from, intent.seq_to, intent.count, intent.digest) == (
        batch.seq_from, batch.seq_to, batch.count, batch.digest)


def judge(scan: ScanResult, intents: Iterable[EventIntent]) -> tuple[str, str]:
    """(state, reason) of a log and its intents. Every doubt makes it worse than ``healthy``, never better."""
    intents = list(intents)
    if scan.status == CORRUPT:
        return CORRUPT, f"corruption at {scan.where}: {scan.reason}"
    by_id = {i.id: i for i in intents}
    problems: list[str] = []
    for intent in intents:
        iid = one_line(intent.id)
        if intent.state not in INTENT_STATES:
            problems.append(f"intent {iid} has the unknown state {one_line(intent.state)}")
            continue
        batch = scan.batch(intent.id)
        if intent.state == COMMITTED and batch is None:
            problems.append(f"committed batch {iid} (seq {intent.seq_from}..{intent.seq_to}) has no bytes")
        elif batch is not None and not _matches(intent, batch):
            problems.append(f"batch {iid} disagrees with its intent (sequence range or digest)")
        elif batch is not None and intent.state == ABORTED:
            problems.append(f"aborted batch {iid} has bytes in the log")
    for batch in scan.batches:
        if batch.batch_id not in by_id:
            problems.append(f"batch {one_line(batch.batch_id)} (seq {batch.seq_from}..{batch.seq_to}) has no intent")
    if problems:
        return INCONSISTENT, "; ".join(problems)
    blocked = [i for i in intents if i.state == RECOVERY_REQUIRED]
    if blocked:
        return BLOCKED, f"{plural(len(blocked), 'intent')} need recovery: " + ", ".join(
            f"{one_line(i.id)} (seq {i.seq_from}..{i.seq_to}{': ' + one_line(i.reason) if i.reason else ''})"
            for i in blocked)
    doubt = [i for i in intents if i.state in (PREPARED, APPENDED)]
    reasons = []
    if scan.status == "torn":
        reasons.append(f"a torn tail of {scan.torn_bytes} bytes at {scan.where}")
    if doubt:
        reasons.append(", ".join(_doubt_text(i, scan.batch(i.id) is not None) for i in doubt))
    if reasons:
        return RECONCILING, "; ".join(reasons)
    return HEALTHY, ""


def _doubt_text(intent: EventIntent, has_bytes: bool) -> str:
    what = f"intent {one_line(intent.id)} (seq {intent.seq_from}..{intent.seq_to}) is {intent.state}"
    if has_bytes:
        return what + " with complete bytes (reconcile adopts them)"
    if intent.state == APPENDED:
        return what + " but its bytes are missing (reconcile marks it recovery_required)"
    return what + " and has no complete bytes (reconcile aborts it)"


def inspect_event_store(sd: SessionDir, session_id: str) -> EventStoreInspection:
    """The inspection of one session's event store. Read-only: writes no byte, creates no table or folder."""
    try:
        with sd.db.read() as conn:
            intents = tuple(read_intents(conn, session_id))
            projection = read_projection(conn, session_id)
        scan = event_store(sd, session_id).inspect()
    except OSError as exc:
        empty = ScanResult("corrupt", (), f"the event store cannot be read ({exc.strerror})", "")
        return EventStoreInspection(session_id, CORRUPT, empty.reason, empty, ())
    state, reason = judge(scan, intents)
    if state == INCONSISTENT:
        # A writer may have committed a batch between the two reads (bytes seen, intent read before it): the
        # intents are read once more; what still disagrees then is reported.
        with sd.db.read() as conn:
            intents = tuple(read_intents(conn, session_id))
            projection = read_projection(conn, session_id)
        state, reason = judge(scan, intents)
    return EventStoreInspection(session_id, state, reason, scan, intents, projection)


def scan_event_store(sd: SessionDir, session_id: str, guard: LeaseGuard) -> ScanResult:
    """:meth:`EventStore.scan` (cut a torn tail, rewrite the manifest) under the caller's lease: the lease is
    checked by its fence just before, and a lost lease writes nothing (:class:`~store.errors.LeaseLost`)."""
    sd.require_writable()
    with sd.db.write() as conn:
        check_fence(conn, guard.lease)
    return event_store(sd, session_id).scan()


def read_committed_event_batches(sd: SessionDir, session_id: str) -> list[EventBatch]:
    """Only the batches whose intent is committed; in-doubt bytes are never given out. Refuses a corrupt or
    inconsistent store (:class:`EventStoreUnreadable`)."""
    inspection = inspect_event_store(sd, session_id)
    if inspection.state not in READABLE_STATES:
        raise EventStoreUnreadable(
            f"The event store of session {one_line(session_id)} is {inspection.state}: {inspection.reason}")
    return inspection.committed()


def next_sequence(sd: SessionDir, session_id: str) -> int:
    """The next sequence after the last physically complete batch, from the log's last line (a hint: the intent
    reserves it). Raises :class:`EventStoreNotHealthy` when the log does not end at a footer."""
    tail = event_store(sd, session_id).tail()
    if not tail.clean:
        raise EventStoreNotHealthy(f"The event log of session {one_line(session_id)} ends in a torn tail; "
                                   "reconcile it first.")
    return tail.next_seq


def projection_of(session_id: str, batches: Iterable[EventBatch]) -> Projection:
    """The projection row the committed batches imply."""
    kinds: Counter[str] = Counter()
    n_batches = events = size = 0
    last = ""
    next_seq = 1
    for b in batches:
        n_batches += 1
        events += b.count
        size += b.length
        last = b.batch_id
        next_seq = b.seq_to + 1
        kinds.update(e.kind for e in b.events)
    return Projection(session_id, next_seq, n_batches, events, size, last, json.dumps(dict(sorted(kinds.items()))))


# ---------------------------------------------------------------------------------------------------------------
# Append


def _fence(conn: sqlite3.Connection, guard: LeaseGuard | None, session_id: str) -> None:
    check_fence(conn, guard.lease if guard is not None else None, session_id=session_id)


def spec_for(session_id: str, events: list[EventRecord] | tuple[EventRecord, ...], seq_from: int,
             guard: LeaseGuard | None, *, batch_id: str = "", run_id: str = "", turn_id: str = "") -> EventIntentSpec:
    """The intent of a batch, its owner taken from the caller's own lease."""
    lease = guard.lease if guard is not None else None
    return EventIntentSpec(
        batch_id or f"evb_{uuid.uuid4().hex}", session_id, run_id, turn_id, seq_from, seq_from + len(events) - 1,
        digest_event_batch(events), lease.owner_instance_id if lease else "", lease.epoch if lease else 0,
        lease.token_hash if lease else "")


def prepare_event_intent(sd: SessionDir, spec: EventIntentSpec, guard: LeaseGuard | None,
                         tail_batch_id: str, tail_next_seq: int) -> None:
    """Reserve the batch: fence, write gate, ``prepared`` row — one transaction."""
    sd.require_writable()
    sid = one_line(spec.session_id)
    with sd.db.write() as conn:
        ensure_tables(conn)
        _fence(conn, guard, spec.session_id)
        doubt = open_intents(conn, spec.session_id)
        if doubt:
            raise EventStoreNotHealthy(f"The event store of session {sid} is not healthy: intent "
                                       f"{one_line(doubt[0].id)} is {one_line(doubt[0].state)}; reconcile it first.")
        last = last_committed(conn, spec.session_id)
        want_id, want_next = (last.id, last.seq_to + 1) if last else ("", 1)
        if (tail_batch_id, tail_next_seq) != (want_id, want_next) or spec.seq_from != want_next:
            raise EventStoreNotHealthy(f"The event log of session {sid} does not end at its last committed batch; "
                                       "reconcile it first.")
        insert_prepared(conn, spec, sqlite_now(conn))


def append_prepared_event_batch(sd: SessionDir, spec: EventIntentSpec, events: list[EventRecord] | tuple[EventRecord, ...],
                                guard: LeaseGuard | None) -> EventBatch:
    """The first half: reserve in SQLite, append and fsync the bytes, mark the intent ``appended``. A failed file
    operation leaves the ``prepared`` row for reconciliation (never guessed into ``aborted``)."""
    store = event_store(sd, spec.session_id)
    tail = store.tail()
    if not tail.clean:
        raise EventStoreNotHealthy(f"The event log of session {one_line(spec.session_id)} ends in a torn tail; "
                                   "reconcile it first.")
    step("append.prepare")
    prepare_event_intent(sd, spec, guard, tail.last_batch_id, tail.next_seq)
    step("append.prepared")
    batch = store.append(spec.id, spec.seq_from, events)
    step("append.fsynced")
    with sd.db.write() as conn:
        _fence(conn, guard, spec.session_id)
        if not transition(conn, spec.id, PREPARED, APPENDED, sqlite_now(conn), spec=spec):
            raise EventIntentFenced(f"Event intent {one_line(spec.id)} is no longer prepared by this owner.")
    step("append.appended")
    return batch


def commit_event_intent(sd: SessionDir, spec: EventIntentSpec, verified: EventBatch | None,
                        finalize: Finalize | None, guard: LeaseGuard | None) -> None:
    """The second half: fenced ``appended`` → ``committed`` with the projection and ``finalize`` in the same
    transaction. Without ``verified`` the log is scanned to find and check the bytes (recovery's path)."""
    batch = verified
    if batch is None:
        batch = event_store(sd, spec.session_id).inspect().batch(spec.id)
    if batch is None or (batch.seq_from, batch.seq_to, batch.digest) != (spec.seq_from, spec.seq_to, spec.digest):
        raise EventStoreNotHealthy(f"Batch {one_line(spec.id)} has no complete matching bytes; it stays uncommitted.")
    with sd.db.write() as conn:
        _fence(conn, guard, spec.session_id)
        now = sqlite_now(conn)
        if not transition(conn, spec.id, APPENDED, COMMITTED, now, spec=spec):
            raise EventIntentFenced(f"Event intent {one_line(spec.id)} is no longer appended by this owner.")
        _advance_projection(conn, spec.session_id, batch, now)
        step("append.finalize")
        if finalize is not None:
            finalize(conn)
    step("append.committed")


def _advance_projection(conn: sqlite3.Connection, session_id: str, batch: EventBatch, now: int) -> None:
    """The projection after one more committed batch (O(kinds), not O(log))."""
    old = read_projection(conn, session_id)
    if old is None and batch.seq_from != 1:
        return  # no projection to advance: a rebuild creates it from the whole log
    if old is not None and (old.next_seq != batch.seq_from or old.batches < 0):
        return  # stale already: the health check reports it and rebuild-projection mends it
    try:
        kinds: Counter[str] = Counter(json.loads(old.kinds_json)) if old else Counter()
    except (ValueError, TypeError):
        return
    kinds.update(e.kind for e in batch.events)
    base = old or Projection(session_id, 1, 0, 0, 0, "", "{}")
    write_projection(conn, Projection(session_id, batch.seq_to + 1, base.batches + 1, base.events + batch.count,
                                      base.bytes + batch.length, batch.batch_id,
                                      json.dumps(dict(sorted(kinds.items())))), now)


def append_event_batch(sd: SessionDir, session_id: str, events: list[EventRecord] | tuple[EventRecord, ...],
                       guard: LeaseGuard | None, *, batch_id: str = "", run_id: str = "", turn_id: str = "",
                       finalize: Finalize | None = None) -> EventBatch:
    """Append one batch through the whole protocol and commit it (the hot path: no full scan)."""
    sd.require_writable()
    if not events:
        raise ValueError("an event batch holds at least one event")
    seq_from = next_sequence(sd, session_id)
    spec = spec_for(session_id, events, seq_from, guard, batch_id=batch_id, run_id=run_id, turn_id=turn_id)
    batch = append_prepared_event_batch(sd, spec, events, guard)
    commit_event_intent(sd, spec, batch, finalize, guard)
    return batch
