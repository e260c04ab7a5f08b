"""``retry-delivery``: an operator's retry of a failed delivery operation (reference 13.8's reopen) as a Repair.

``preview()`` reads the operation, its intent's other operations and their leases, and says what the reopen
would change: the operation → ``retry_wait`` (no failure code, no next attempt: due at once) with its retry
window restarted now; each sibling failed with ``dependency_failed`` because of it → ``retry_wait`` too; the
intent's status recomputed. ``apply(preview)`` re-reads the same facts inside its one write transaction and
refuses (:class:`~store.errors.RepairRefused`) when they changed, then writes it all there.

Refused, with the reason: an unknown operation; a damaged row; an operation whose lease a worker holds and has not
let expire (it is being delivered now); anything but ``failed`` with ``transport_error`` or
``delivery_retries_exhausted`` — an ``uncertain`` operation (the provider may have received it) is never re-sent
blindly, a permanent failure would fail the same way again, and one failed only by a dependency is retried
through that dependency.

A sibling failed with ``dependency_failed`` because of *another* failed operation of the intent stays failed:
reopened, it would wait forever on a failed operation (and propagation fails it again in the same transaction).

The operation's lease is its own (13.4): the session's runtime lease is not taken, as the runtime's own
``mothx/manage/deliveries/retry`` does not take it either.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store.errors import RepairRefused
from store.mothx.delivery_model import (
    DeliveryIntent,
    DeliveryOperation,
    aggregate_intent_status,
    lease_refusal,
    now_ms,
    retry_refusal,
)
from store.mothx.delivery_store import (
    get_intent_conn,
    get_operation_conn,
    intent_operations_conn,
    reopen_conn,
    reopen_targets,
)
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, damage_refusal, fingerprint, step
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line
from store.words import plural


@dataclass(frozen=True)
class _Facts:
    op: DeliveryOperation | None
    intent: DeliveryIntent | None
    siblings: tuple[DeliveryOperation, ...]

    def content(self) -> object:
        def fact(o: DeliveryOperation) -> object:
            return [o.id, o.status, o.failure_code, o.depends_on, o.attempt_count, o.lease_owner, o.lease_epoch,
                    o.lease_expires_at, o.next_attempt_at, o.updated_at, list(o.problems)]

        return {
            "op": fact(self.op) if self.op else None,
            "intent": [self.intent.id, self.intent.status, list(self.intent.problems)] if self.intent else None,
            "siblings": [fact(o) for o in self.siblings],
        }


def _read(conn: sqlite3.Connection, operation_id: str) -> _Facts:
    op = get_operation_conn(conn, operation_id)
    if op is None:
        return _Facts(None, None, ())
    return _Facts(op, get_intent_conn(conn, op.intent_id), tuple(intent_operations_conn(conn, op.intent_id)))


class RetryDelivery:
    """Reopen a failed delivery operation for another attempt (a manual retry)."""

    id = "retry-delivery"
    title = "Retry a failed delivery operation"

    def __init__(self, sd: SessionDir, operation_id: str, *, now: int | None = None) -> None:
        self.sd = sd
        self.operation_id = operation_id
        self.now = now
        self._last: RepairPreview | None = None

    def _now(self) -> int:
        return now_ms() if self.now is None else self.now

    def _refusal(self, f: _Facts, now: int) -> str:
        op = f.op
        if op is None:
            return f"delivery operation {one_line(self.operation_id)} does not exist."
        damage = damage_refusal(f"delivery operation {one_line(op.id)}",
                                op.problems + (f.intent.problems if f.intent else ()))
        if damage:
            return damage
        if f.intent is None:
            return f"the intent {one_line(op.intent_id)} of operation {one_line(op.id)} does not exist."
        if f.intent.status == "cancelled":
            return f"the intent {one_line(f.intent.id)} of operation {one_line(op.id)} is cancelled."
        leased = lease_refusal(op.id, op.lease_owner, op.lease_epoch, op.lease_expires_at, now)
        if leased:
            return leased + " A retry waits until the lease is released or expires."
        return retry_refusal(op.id, op.status, op.failure_code, op.depends_on)

    def _plan(self, f: _Facts) -> tuple[list[PlannedChange], list[str]]:
        op, intent = f.op, f.intent
        assert op is not None and intent is not None
        changes = [PlannedChange("row", "delivery_operations", one_line(op.id), "update",
                                 f"status failed ({one_line(op.failure_code)}) → retry_wait, due now, retry window "
                                 "restarted now (10 min)")]
        reopened = reopen_targets(op, f.siblings)
        for sib in reopened:
            changes.append(PlannedChange("row", "delivery_operations", one_line(sib.id), "update",
                                         f"status failed (dependency_failed) → retry_wait: sequence {sib.sequence} "
                                         f"{one_line(sib.operation_kind)} waits for it again"))
        ids = {op.id} | {s.id for s in reopened}
        status = aggregate_intent_status("retry_wait" if o.id in ids else o.status for o in f.siblings)
        notes = [f"{one_line(intent.platform)} target {one_line(intent.target_id)}; attempts so far "
                 f"{op.attempt_count}; a delivery worker claims it next (nothing is sent by this repair)."]
        if status != intent.status:
            changes.append(PlannedChange("row", "delivery_intents", one_line(intent.id), "update",
                                         f"status {one_line(intent.status)} → {status}"))
        left = [s for s in f.siblings if s.id not in ids and s.status == "failed"]
        if left:
            notes.append(f"{plural(len(left), 'other failed operation')} of the intent stay failed.")
        return changes, notes

    def preview(self) -> RepairPreview:
        with self.sd.db.read() as conn:
            f = _read(conn, self.operation_id)
        refusal = self._refusal(f, self._now())
        changes, notes = self._plan(f) if not refusal else ([], [])
        preview = RepairPreview(
            repair_id=self.id, title=self.title, session_id=f.intent.session_id if f.intent else "",
            target=f"delivery operation {one_line(self.operation_id)}", changes=tuple(changes),
            notes=tuple(notes), refusal=refusal, fingerprint=fingerprint(f.content()),
        )
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        self.sd.require_writable()
        expected = expected or self._last or self.preview()
        if expected.refusal:
            raise RepairRefused(f"Refused: {expected.refusal}")
        step("retry_delivery.begin")
        with self.sd.db.write() as conn:
            f = _read(conn, self.operation_id)
            now = self._now()
            refusal = self._refusal(f, now)
            if refusal:
                raise RepairRefused(f"Refused: {refusal}")
            if fingerprint(f.content()) != expected.fingerprint:
                raise RepairRefused(f"Refused: the facts of delivery operation {one_line(self.operation_id)} "
                                    "changed since the preview; preview it again.")
            assert f.op is not None and f.intent is not None
            changes, _ = self._plan(f)
            step("retry_delivery.reopen")
            ids, status = reopen_conn(conn, f.op, f.siblings, now)
            if f.op.id not in ids:
                raise RepairRefused(f"Refused: delivery operation {one_line(f.op.id)} changed while it was reopened.")
            step("retry_delivery.commit")
        more = len(ids) - 1
        return RepairResult(
            self.id, f.intent.session_id, expected.target, tuple(changes),
            f"Delivery operation {one_line(f.op.id)} reopened: retry_wait, due now"
            + (f", with {plural(more, 'dependent operation')}" if more else "") + f"; intent {one_line(f.intent.id)} is {status}.")


def make_retry_delivery(sd: SessionDir, operation_id: str, *, now: int | None = None) -> RetryDelivery:
    return RetryDelivery(sd, operation_id, now=now)
