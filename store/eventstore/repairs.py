"""The event store's repairs: reconcile intents with the log, and rebuild the SQLite projection.

Both follow :mod:`store.mothx.repair_kit`: ``preview()`` reads (the log's inspection, the intents, the lease)
and lists every change with a fingerprint of those facts; ``apply(preview)`` takes the session's lease (a
``mutation`` lease, or a ``recovery`` lease for the one active run), re-reads the facts under it and refuses
with :class:`RepairRefused` when they moved; every row it writes is written in one fenced transaction.

Reconcile (the seed's ReconcileEventIntents): a torn tail is cut (an incomplete batch was never canonical);
an intent ``prepared`` or ``appended`` whose complete bytes match it is adopted (``committed``); a ``prepared``
intent with no bytes is ``aborted``; an ``appended`` intent with no bytes, or one whose bytes disagree with it,
becomes ``recovery_required`` (its earlier commit cannot be inferred). Corruption and bytes without an intent
are never repaired: the preview names them and nothing is promoted.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from store.errors import RepairRefused
from store.eventstore.intents import (
    APPENDED,
    COMMITTED,
    INTENTS_TABLE,
    PREPARED,
    PROJECTION_TABLE,
    RECOVERY_REQUIRED,
    EventIntent,
    ensure_tables,
    read_intents,
    read_projection,
    transition,
    write_projection,
)
from store.eventstore.protocol import (
    CORRUPT,
    READABLE_STATES,
    EventStoreInspection,
    event_store,
    inspect_event_store,
    judge,
    projection_of,
    scan_event_store,
)
from store.eventstore.segments import ScanResult
from store.mothx import repair_kit as kit
from store.mothx.execution import ExecutionFacts, read_facts_conn
from store.mothx.lease_guard import LeaseGuard
from store.mothx.lease_model import sqlite_now
from store.mothx.lease_store import check_fence
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


@dataclass(frozen=True)
class Settle:
    """One intent's planned transition."""

    intent: EventIntent
    new_state: str
    why: str


def plan_settlements(inspection: EventStoreInspection) -> list[Settle]:
    """What reconcile does to each intent still in doubt (pure: the same inspection gives the same plan)."""
    out: list[Settle] = []
    for intent in inspection.intents:
        if intent.state not in (PREPARED, APPENDED):
            continue
        batch = inspection.scan.batch(intent.id)
        if batch is not None:
            if (batch.seq_from, batch.seq_to, batch.count, batch.digest) == (
                    intent.seq_from, intent.seq_to, intent.count, intent.digest):
                out.append(Settle(intent, COMMITTED, f"complete bytes of seq {intent.seq_from}..{intent.seq_to} "
                                                     "match the intent: adopted"))
            else:
                out.append(Settle(intent, RECOVERY_REQUIRED, "its bytes disagree with the intent"))
        elif intent.state == PREPARED:
            out.append(Settle(intent, "aborted", "prepared, and no bytes were written: safely aborted"))
        else:
            out.append(Settle(intent, RECOVERY_REQUIRED, "appended, but its bytes are missing: its commit cannot "
                                                         "be inferred"))
    return out


def _facts(sd: SessionDir, session_id: str) -> tuple[ExecutionFacts, EventStoreInspection]:
    with sd.db.read() as conn:
        facts = read_facts_conn(conn, session_id)
    return facts, inspect_event_store(sd, session_id)


def _scan_fact(scan: ScanResult) -> object:
    return [scan.status, scan.where, scan.torn_offset, scan.torn_bytes,
            [[b.batch_id, b.seq_from, b.seq_to, b.digest] for b in scan.batches]]


def _lease_refusal(facts: ExecutionFacts) -> str:
    sid = one_line(facts.session_id)
    if not facts.session_exists:
        return f"session {sid} does not exist."
    foreign = kit.refuse_foreign(facts.session_id, facts.lease)
    if foreign:
        return foreign
    if len(facts.active_runs) > 1:
        return f"session {sid} has {len(facts.active_runs)} active runs; recover them first."
    return ""


def _purpose(facts: ExecutionFacts) -> str:
    return "recovery" if facts.active_run is not None else "mutation"


class _EventRepair(kit.SessionRepair):
    def _acquire(self, facts: ExecutionFacts) -> LeaseGuard:
        """A ``recovery`` lease for the one active run, else a ``mutation`` lease; fenced on the epoch read."""
        run = facts.active_run
        return self.acquire_lease(facts.session_id, _purpose(facts), self.target,
                                  expected_epoch=facts.lease.epoch if facts.lease is not None else None,
                                  expected_run_id=run.id if run is not None else "")

    @property
    def target(self) -> str:
        return f"event store of session {one_line(self.session_id)}"

    def _content(self, inspection: EventStoreInspection) -> object:
        return [_scan_fact(inspection.scan), [i.fact() for i in inspection.intents],
                inspection.projection.fact() if inspection.projection else None]

    def _fp(self, facts: ExecutionFacts, inspection: EventStoreInspection) -> tuple[str, str]:
        content = fingerprint(self._content(inspection))
        control = [kit.lease_fact(facts.lease), [r.id for r in facts.active_runs], facts.session_exists]
        return fingerprint(content, control), content

    def _plan(self, inspection: EventStoreInspection) -> tuple[list[PlannedChange], list[str], str]:
        raise NotImplementedError

    def preview(self) -> RepairPreview:
        facts, inspection = _facts(self.sd, self.session_id)
        refusal = _lease_refusal(facts)
        changes, notes, plan_refusal = self._plan(inspection)
        refusal = refusal or plan_refusal
        if not refusal:
            changes = kit.lease_changes(self.session_id, facts.lease, _purpose(facts))[:1] + changes + \
                kit.lease_changes(self.session_id, facts.lease, _purpose(facts))[1:]
        fp, content = self._fp(facts, inspection)
        preview = RepairPreview(self.id, self.title, self.session_id, self.target, tuple(changes), tuple(notes),
                                refusal, fp, content)
        self._last = preview
        return preview

    def _check(self, expected: RepairPreview | None) -> tuple[RepairPreview, ExecutionFacts]:
        expected = self.expected_preview(expected)
        facts, inspection = _facts(self.sd, self.session_id)
        kit.refuse_if_moved(_lease_refusal(facts) or self._plan(inspection)[2], expected,
                            self._fp(facts, inspection)[0], f"the {self.target}")
        return expected, facts

    def _recheck(self, expected: RepairPreview) -> EventStoreInspection:
        """Under the lease: the content facts must still be the previewed ones."""
        inspection = inspect_event_store(self.sd, self.session_id)
        if fingerprint(self._content(inspection)) != expected.content_fingerprint:
            raise RepairRefused(f"Refused: the {self.target} changed since the preview; preview it again.")
        return inspection


class ReconcileEventIntents(_EventRepair):
    """Settle a session's event intents with its log (see the module docstring)."""

    id = "reconcile-events"
    title = "Reconcile event intents"

    def _plan(self, inspection: EventStoreInspection) -> tuple[list[PlannedChange], list[str], str]:
        scan = inspection.scan
        notes: list[str] = []
        changes: list[PlannedChange] = []
        if scan.status == CORRUPT:
            return [], [], (f"the event log is corrupt at {one_line(scan.where)} ({one_line(scan.reason)}); "
                            "corruption is never repaired or skipped.")
        if scan.status == "torn":
            changes.append(PlannedChange("file", f"events/{event_store(self.sd, self.session_id).path.name}/"
                                         f"{scan.torn_segment}", f"offset {scan.torn_offset}", "truncate",
                                         f"cut the torn tail ({scan.torn_bytes} bytes of an incomplete batch, never "
                                         "canonical)"))
        for s in plan_settlements(inspection):
            changes.append(PlannedChange("row", INTENTS_TABLE, one_line(s.intent.id), "update",
                                         f"{s.intent.state} → {s.new_state}: {s.why}"))
        committed_after = [c for c in changes if "→ committed" in c.summary]
        if committed_after:
            changes.append(PlannedChange("row", PROJECTION_TABLE, one_line(self.session_id), "upsert",
                                         "rebuilt from the committed batches"))
        state, _ = judge(scan, inspection.intents)
        if state == "inconsistent":
            notes.append(f"left as it is: {inspection.reason}")
        for i in inspection.intents:
            if i.state == RECOVERY_REQUIRED:
                notes.append(f"intent {one_line(i.id)} stays recovery_required (seq {i.seq_from}..{i.seq_to}).")
        if not changes:
            return [], notes, f"the {self.target} has nothing to reconcile ({inspection.state})."
        return changes, notes, ""

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        expected, facts = self._check(expected)
        step("reconcile.acquire")
        guard = self._acquire(facts)
        try:
            inspection = self._recheck(expected)
            if inspection.scan.status == "torn":
                step("reconcile.truncate")
                scan_event_store(self.sd, self.session_id, guard)
                inspection = inspect_event_store(self.sd, self.session_id)
            step("reconcile.settle")
            plan = plan_settlements(inspection)
            with self.sd.db.write() as conn:
                check_fence(conn, guard.lease)
                ensure_tables(conn)
                now = sqlite_now(conn)
                for s in plan:
                    if not transition(conn, s.intent.id, s.intent.state, s.new_state, now,
                                      reason=s.why if s.new_state == RECOVERY_REQUIRED else ""):
                        raise RepairRefused(f"Refused: intent {one_line(s.intent.id)} moved since the preview.")
                if any(s.new_state == COMMITTED for s in plan):
                    _write_projection_conn(conn, self.session_id, inspection.scan, now)
        finally:
            step("reconcile.release")
            guard.release()
        return RepairResult(self.id, self.session_id, self.target, expected.changes,
                            f"Reconciled the {self.target}: " + (", ".join(
                                f"{one_line(s.intent.id)} → {s.new_state}" for s in plan) or "tail cut") + ".",
                            guard.lease.epoch)


def _write_projection_conn(conn: sqlite3.Connection, session_id: str, scan: ScanResult, now: int) -> None:
    ids = {i.id for i in read_intents(conn, session_id) if i.state == COMMITTED}
    write_projection(conn, projection_of(session_id, [b for b in scan.batches if b.batch_id in ids]), now)


class RebuildEventProjection(_EventRepair):
    """Rebuild a session's projection row from its committed batches (the seed's RebuildEventProjection)."""

    id = "rebuild-projection"
    title = "Rebuild the event projection"

    def _plan(self, inspection: EventStoreInspection) -> tuple[list[PlannedChange], list[str], str]:
        if inspection.state not in READABLE_STATES:
            return [], [], (f"the {self.target} is {inspection.state} ({inspection.reason}); a projection is built "
                            "only from a log that agrees with its intents.")
        if not inspection.intents and not inspection.scan.batches:
            return [], [], f"session {one_line(self.session_id)} has no event store."
        new = projection_of(self.session_id, inspection.committed())
        old = inspection.projection
        if old is not None and old.fact() == new.fact():
            return [], [], f"the projection of session {one_line(self.session_id)} is current."
        kinds = json.loads(new.kinds_json)
        summary = (f"next_seq {new.next_seq}, {new.batches} batches, {new.events} events, {new.bytes} bytes, "
                   f"{len(kinds)} kinds")
        was = f" (was next_seq {old.next_seq}, {old.batches} batches, {old.events} events)" if old else ""
        return [PlannedChange("row", PROJECTION_TABLE, one_line(self.session_id), "upsert", summary + was)], [], ""

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        expected, facts = self._check(expected)
        step("rebuild.acquire")
        guard = self._acquire(facts)
        try:
            inspection = self._recheck(expected)
            step("rebuild.write")
            with self.sd.db.write() as conn:
                check_fence(conn, guard.lease)
                ensure_tables(conn)
                _write_projection_conn(conn, self.session_id, inspection.scan, sqlite_now(conn))
                new = read_projection(conn, self.session_id)
        finally:
            guard.release()
        assert new is not None
        return RepairResult(self.id, self.session_id, self.target, expected.changes,
                            f"Rebuilt the projection of session {one_line(self.session_id)}: next_seq {new.next_seq}, "
                            f"{new.batches} batches, {new.events} events.", guard.lease.epoch)


def projection_problem(inspection: EventStoreInspection) -> str:
    """Why the projection row disagrees with the committed batches (``''``: it agrees)."""
    if inspection.state not in READABLE_STATES or not (inspection.intents or inspection.scan.batches):
        return ""
    new = projection_of(inspection.session_id, inspection.committed())
    old = inspection.projection
    if old is None:
        return "no projection row" if new.batches else ""
    if old.fact() != new.fact():
        return (f"the projection says next_seq {old.next_seq}, {old.batches} batches; the committed log says "
                f"next_seq {new.next_seq}, {new.batches} batches")
    return ""
