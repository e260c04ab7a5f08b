"""The delivery outbox's writes as the runtime makes them (reference 13.1–13.7).

* :func:`create_plan` — an intent and its operations (13.1), ``INSERT … ON CONFLICT DO NOTHING`` for the intent.
* :func:`claim` — 13.4's claim statement, verbatim, plus the refusal for a ``cancelled`` intent; a new epoch on
  every claim. :func:`list_due` reads the due list with the same predicates (a read; claim each row).
* :func:`update_progress` / :func:`update_result` / :func:`requeue` — fenced by ``id AND lease_owner AND
  lease_epoch`` (13.5). A result clears the lease; repeating the identical terminal result is a no-op; any other
  mismatch raises :class:`DeliveryLeaseLost`. Each result runs :func:`propagate` (13.7, to a fixpoint) and
  :func:`refresh_intent` (13.3) in the same transaction.
* :func:`record_transport_error` — 13.6: ``retry_wait`` with the backoff, or ``failed`` with
  ``delivery_retries_exhausted`` once the 10-minute window (or the optional retry cap) is spent.
* :func:`reopen_conn` — 13.8's reopen inside the caller's write transaction (the ``retry-delivery`` repair,
  :mod:`store.mothx.delivery_repairs`, previews and fences it).

Every function taking ``now`` takes Unix milliseconds (default: the wall clock).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from store.mothx.delivery_model import (
    CLAIMABLE,
    DEPENDENCY_FAILED,
    DEPENDENCY_UNCERTAIN,
    LEASE_MS,
    NEW_STATUSES,
    PROGRESS,
    RETRIES_EXHAUSTED,
    RETRY_WINDOW_MS,
    TERMINAL_RESULTS,
    TRANSPORT_ERROR,
    DeliveryIntent,
    DeliveryLeaseLost,
    DeliveryOperation,
    DeliveryOperationAbsent,
    DeliveryOperationBusy,
    DeliveryPlanInvalid,
    aggregate_intent_status,
    backoff_seconds,
    intent_from_row,
    intent_select,
    now_ms,
    operation_from_row,
    operation_select,
    window_start_ms,
)
from store.safetext import one_line
from store.times import format_rfc3339

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

_MARKS = ",".join("?" * len(CLAIMABLE))
_SUCCESS = "('uploaded','delivered','unsupported')"


def rfc3339_ms(ms: int) -> str:
    return format_rfc3339(datetime.fromtimestamp(ms / 1000, tz=UTC))


def has_window(conn: sqlite3.Connection) -> bool:
    """True when ``delivery_operations`` has ``retry_window_started_at`` (schema v43)."""
    return any(r[1] == "retry_window_started_at" for r in conn.execute("PRAGMA table_info(delivery_operations)"))


# --- reads ----------------------------------------------------------------------------------------------------


def get_operation_conn(conn: sqlite3.Connection, operation_id: str) -> DeliveryOperation | None:
    row = conn.execute(f"SELECT {operation_select(has_window=has_window(conn))} FROM delivery_operations "
                       "WHERE id = ?", (operation_id,)).fetchone()
    return operation_from_row(row) if row is not None else None


def get_operation(sd: SessionDir, operation_id: str) -> DeliveryOperation | None:
    with sd.db.read() as conn:
        return get_operation_conn(conn, operation_id)


def intent_operations_conn(conn: sqlite3.Connection, intent_id: str) -> list[DeliveryOperation]:
    rows = conn.execute(f"SELECT {operation_select(has_window=has_window(conn))} FROM delivery_operations "
                        "WHERE intent_id = ? ORDER BY sequence, created_at", (intent_id,)).fetchall()
    return [operation_from_row(r) for r in rows]


def get_intent_conn(conn: sqlite3.Connection, intent_id: str) -> DeliveryIntent | None:
    row = conn.execute(f"SELECT {intent_select()} FROM delivery_intents WHERE id = ?", (intent_id,)).fetchone()
    return intent_from_row(row) if row is not None else None


@dataclass(frozen=True)
class DeliveryPlanRows:
    """One intent and its operations in execution order (GetDeliveryPlan)."""

    intent: DeliveryIntent
    operations: tuple[DeliveryOperation, ...]


def get_plan(sd: SessionDir, intent_id: str) -> DeliveryPlanRows | None:
    with sd.db.read() as conn:
        intent = get_intent_conn(conn, intent_id)
        if intent is None:
            return None
        return DeliveryPlanRows(intent, tuple(intent_operations_conn(conn, intent_id)))


_DUE = (f"status IN ({_MARKS}) AND (next_attempt_at IS NULL OR next_attempt_at <= ?) "
        "AND (lease_owner = '' OR lease_expires_at IS NULL OR lease_expires_at <= ?)")


def list_due(sd: SessionDir, now: int | None = None, *, limit: int = 100) -> list[DeliveryOperation]:
    """Operations whose retry time is due or whose worker's lease expired, ``sequence, created_at`` order (a read:
    claim each one before executing it)."""
    t = now_ms() if now is None else now
    with sd.db.read() as conn:
        rows = conn.execute(
            f"SELECT {operation_select(has_window=has_window(conn))} FROM delivery_operations WHERE {_DUE} "
            "ORDER BY sequence, created_at LIMIT ?", (*CLAIMABLE, t, t, limit)).fetchall()
    return [operation_from_row(r) for r in rows]


# --- creation (13.1) --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewOperation:
    operation_key: str
    operation_kind: str
    sequence: int
    depends_on_key: str = ""  # the operation_key of an earlier operation of the plan
    artifact_id: str | None = None
    status: str = "pending"
    payload_digest: str = ""
    id: str = field(default_factory=lambda: "dop_" + secrets.token_hex(8))


@dataclass(frozen=True)
class NewIntent:
    session_id: str
    run_id: str
    platform: str
    target_id: str = ""
    reply_message_id: str = ""
    transport_context: str = "{}"
    id: str = field(default_factory=lambda: "dlv_" + secrets.token_hex(8))


def create_plan(sd: SessionDir, intent: NewIntent, operations: Sequence[NewOperation],
                now: int | None = None) -> str:
    """Write one intent and its operations (CreateDeliveryPlan); returns the intent id. A conflicting re-insert
    of the same ``(run_id, platform, target_id)`` must match the existing intent; its operations are then kept."""
    sd.require_writable()
    with sd.db.write() as conn:
        return create_plan_conn(conn, intent, operations, now)


def create_plan_conn(conn: sqlite3.Connection, intent: NewIntent, operations: Sequence[NewOperation],
                     now: int | None = None) -> str:
    ts = rfc3339_ms(now_ms() if now is None else now)
    _validate(operations)
    conn.execute(
        "INSERT INTO delivery_intents (id, session_id, run_id, platform, target_id, reply_message_id, "
        "transport_context, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (intent.id, intent.session_id, intent.run_id, intent.platform, intent.target_id, intent.reply_message_id,
         intent.transport_context, aggregate_intent_status(o.status for o in operations), ts, ts))
    row = conn.execute("SELECT id, session_id, reply_message_id, transport_context FROM delivery_intents "
                       "WHERE run_id = ? AND platform = ? AND target_id = ?",
                       (intent.run_id, intent.platform, intent.target_id)).fetchone()
    if row is None or tuple(row) != (intent.id, intent.session_id, intent.reply_message_id,
                                     intent.transport_context):
        raise DeliveryPlanInvalid(f"a delivery intent for run {one_line(intent.run_id)}, platform "
                                  f"{one_line(intent.platform)} and target {one_line(intent.target_id)} exists "
                                  "with other values.")
    if conn.execute("SELECT 1 FROM delivery_operations WHERE intent_id = ? LIMIT 1", (intent.id,)).fetchone():
        return intent.id  # the identical re-insert of a plan already written
    ids = {o.operation_key: o.id for o in operations}
    for o in sorted(operations, key=lambda o: o.sequence):
        conn.execute(
            "INSERT INTO delivery_operations (id, intent_id, operation_key, artifact_id, operation_kind, sequence, "
            "depends_on, idempotency_key, payload_digest, status, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (o.id, intent.id, o.operation_key, o.artifact_id, o.operation_kind, o.sequence,
             ids[o.depends_on_key] if o.depends_on_key else None, f"{intent.id}:{o.operation_key}",
             o.payload_digest or o.operation_key, o.status, ts, ts))
    return intent.id


def _validate(operations: Sequence[NewOperation]) -> None:
    seqs: dict[str, int] = {}
    for o in operations:
        if o.sequence <= 0:
            raise DeliveryPlanInvalid(f"operation {one_line(o.operation_key)} has sequence {o.sequence} (must be > 0).")
        if o.operation_key in seqs:
            raise DeliveryPlanInvalid(f"operation key {one_line(o.operation_key)} appears twice.")
        if o.status not in NEW_STATUSES:
            raise DeliveryPlanInvalid(f"a new operation is pending or unsupported, not {one_line(o.status)}.")
        seqs[o.operation_key] = o.sequence
    if len(set(seqs.values())) != len(seqs):
        raise DeliveryPlanInvalid("two operations of the plan have the same sequence.")
    for o in operations:
        if o.depends_on_key and seqs.get(o.depends_on_key, o.sequence) >= o.sequence:
            raise DeliveryPlanInvalid(f"operation {one_line(o.operation_key)} must depend on an earlier operation.")


# --- claim (13.4) -----------------------------------------------------------------------------------------------

CLAIM_SQL = (
    "UPDATE delivery_operations "
    "SET lease_owner = ?, lease_epoch = lease_epoch + 1, lease_expires_at = ?, "
    "attempt_count = attempt_count + 1, updated_at = ? "
    f"WHERE id = ? AND status IN ({_MARKS}) "
    "AND (next_attempt_at IS NULL OR next_attempt_at <= ?) "
    "AND (lease_owner = '' OR lease_expires_at IS NULL OR lease_expires_at <= ?) "
    "AND (depends_on IS NULL OR depends_on = '' OR EXISTS ("
    "SELECT 1 FROM delivery_operations dependency WHERE dependency.id = delivery_operations.depends_on "
    "AND dependency.intent_id = delivery_operations.intent_id "
    f"AND dependency.status IN {_SUCCESS})) "
    "AND NOT EXISTS (SELECT 1 FROM delivery_intents i WHERE i.id = delivery_operations.intent_id "
    "AND i.status = 'cancelled')"
)


def claim(sd: SessionDir, operation_id: str, owner: str, now: int | None = None,
          lease_ms: int = LEASE_MS) -> DeliveryOperation:
    """Claim one due operation for ``owner`` (ClaimDeliveryOperation): a new epoch, an expiry ``now + lease``
    and one more attempt. Raises :class:`DeliveryOperationBusy` (leased or not ready) or
    :class:`DeliveryOperationAbsent`."""
    sd.require_writable()
    t = now_ms() if now is None else now
    with sd.db.write() as conn:
        cur = conn.execute(CLAIM_SQL, (owner, t + lease_ms, rfc3339_ms(t), operation_id, *CLAIMABLE, t, t))
        op = get_operation_conn(conn, operation_id)
        if op is None:
            raise DeliveryOperationAbsent(f"delivery operation {one_line(operation_id)} was not found.")
        if cur.rowcount != 1:
            raise DeliveryOperationBusy(f"delivery operation {one_line(operation_id)} is leased or not ready "
                                        f"(status {one_line(op.status)}).")
        return op


# --- fenced updates (13.5) --------------------------------------------------------------------------------------


def _fence_failed(conn: sqlite3.Connection, operation_id: str, owner: str, epoch: int) -> DeliveryLeaseLost:
    op = get_operation_conn(conn, operation_id)
    if op is None:
        return DeliveryLeaseLost(f"delivery operation {one_line(operation_id)} was not found.")
    return DeliveryLeaseLost(
        f"delivery operation lease was lost: {one_line(operation_id)} is held by "
        f"{one_line(op.lease_owner) or 'nobody'} at epoch {op.lease_epoch} (status {one_line(op.status)}), "
        f"not by {one_line(owner)} at epoch {epoch}.")


def update_progress(sd: SessionDir, operation_id: str, owner: str, epoch: int, status: str, *,
                    provider_asset_id: str = "", provider_message_id: str = "", provider_state: str | None = None,
                    failure_code: str = "", now: int | None = None) -> None:
    """An in-flight phase (``uploading``/``sending``) under the current lease, which it keeps."""
    if status not in PROGRESS:
        raise ValueError(f"a progress update is uploading or sending, not {status!r}")
    sd.require_writable()
    t = now_ms() if now is None else now
    with sd.db.write() as conn:
        cur = conn.execute(
            "UPDATE delivery_operations SET status = ?, provider_asset_id = ?, provider_message_id = ?, "
            "provider_state = COALESCE(?, provider_state), failure_code = ?, updated_at = ? "
            f"WHERE id = ? AND lease_owner = ? AND lease_epoch = ? AND status IN ({_MARKS})",
            (status, provider_asset_id, provider_message_id, provider_state, failure_code, rfc3339_ms(t),
             operation_id, owner, epoch, *CLAIMABLE))
        if cur.rowcount != 1:
            raise _fence_failed(conn, operation_id, owner, epoch)


def update_result(sd: SessionDir, operation_id: str, owner: str, epoch: int, status: str, *,
                  provider_asset_id: str = "", provider_message_id: str = "", provider_state: str | None = None,
                  failure_code: str = "", next_attempt_at: int | None = None, now: int | None = None) -> bool:
    """A provider result (UpdateDeliveryOperation), fenced; clears the lease, then propagates to dependents and
    refreshes the intent in the same transaction. Returns False for an idempotent repeat of the same terminal
    result (nothing written). Raises :class:`DeliveryLeaseLost` for any other mismatch."""
    if status not in TERMINAL_RESULTS and status != "retry_wait":
        raise ValueError(f"a result is a terminal status or retry_wait, not {status!r}")
    if status == "retry_wait" and next_attempt_at is None:
        raise ValueError("retry_wait requires next_attempt_at")
    sd.require_writable()
    t = now_ms() if now is None else now
    with sd.db.write() as conn:
        return update_result_conn(conn, operation_id, owner, epoch, status, provider_asset_id=provider_asset_id,
                                  provider_message_id=provider_message_id, provider_state=provider_state,
                                  failure_code=failure_code, next_attempt_at=next_attempt_at, now=t)


def update_result_conn(conn: sqlite3.Connection, operation_id: str, owner: str, epoch: int, status: str, *,
                       provider_asset_id: str, provider_message_id: str, provider_state: str | None,
                       failure_code: str, next_attempt_at: int | None, now: int) -> bool:
    cur = conn.execute(
        "UPDATE delivery_operations SET status = ?, provider_asset_id = CASE WHEN ? = '' THEN provider_asset_id "
        "ELSE ? END, provider_message_id = CASE WHEN ? = '' THEN provider_message_id ELSE ? END, "
        "provider_state = COALESCE(?, provider_state), failure_code = ?, next_attempt_at = ?, "
        "lease_owner = '', lease_expires_at = NULL, updated_at = ? "
        f"WHERE id = ? AND lease_owner = ? AND lease_epoch = ? AND status IN ({_MARKS})",
        (status, provider_asset_id, provider_asset_id, provider_message_id, provider_message_id, provider_state,
         failure_code, next_attempt_at if status == "retry_wait" else None, rfc3339_ms(now), operation_id, owner,
         epoch, *CLAIMABLE))
    if cur.rowcount != 1:
        op = get_operation_conn(conn, operation_id)
        if (op is not None and status in TERMINAL_RESULTS and op.status == status
                and op.failure_code == failure_code
                and (not provider_message_id or op.provider_message_id == provider_message_id)
                and (not provider_asset_id or op.provider_asset_id == provider_asset_id)):
            return False  # the identical terminal result again (a retry after an unknown commit)
        raise _fence_failed(conn, operation_id, owner, epoch)
    intent_id = conn.execute("SELECT intent_id FROM delivery_operations WHERE id = ?", (operation_id,)).fetchone()[0]
    propagate(conn, intent_id, now)
    refresh_intent(conn, intent_id, now)
    return True


def requeue(sd: SessionDir, operation_id: str, owner: str, epoch: int, next_attempt_at: int,
            failure_code: str = TRANSPORT_ERROR, *, now: int | None = None) -> None:
    """Release the current holder's lease for another attempt at ``next_attempt_at`` (RequeueDeliveryOperation):
    ``retry_wait`` with ``failure_code``, fenced by owner and epoch."""
    sd.require_writable()
    t = now_ms() if now is None else now
    with sd.db.write() as conn:
        cur = conn.execute(
            "UPDATE delivery_operations SET status = 'retry_wait', next_attempt_at = ?, failure_code = ?, "
            "lease_owner = '', lease_expires_at = NULL, updated_at = ? "
            f"WHERE id = ? AND lease_owner = ? AND lease_epoch = ? AND status IN ({_MARKS})",
            (next_attempt_at, failure_code, rfc3339_ms(t), operation_id, owner, epoch, *CLAIMABLE))
        if cur.rowcount != 1:
            raise _fence_failed(conn, operation_id, owner, epoch)
        intent_id = conn.execute("SELECT intent_id FROM delivery_operations WHERE id = ?",
                                 (operation_id,)).fetchone()[0]
        refresh_intent(conn, intent_id, t)


def record_transport_error(sd: SessionDir, op: DeliveryOperation, owner: str, epoch: int, *,
                           now: int | None = None, max_retries: int = 0,
                           window_ms: int = RETRY_WINDOW_MS) -> str:
    """An executor error on the claimed ``op`` (13.6): ``retry_wait`` with ``transport_error`` and the backoff,
    or ``failed`` with ``delivery_retries_exhausted`` once the window (or ``max_retries``, 0 = no cap) is spent.
    Returns the status written."""
    t = now_ms() if now is None else now
    start = window_start_ms(op.retry_window_started_at, op.created_at)
    spent = (start is not None and t - start >= window_ms) or (max_retries > 0 and op.attempt_count >= max_retries)
    if spent:
        update_result(sd, op.id, owner, epoch, "failed", failure_code=RETRIES_EXHAUSTED, now=t)
        return "failed"
    update_result(sd, op.id, owner, epoch, "retry_wait", failure_code=TRANSPORT_ERROR,
                  next_attempt_at=t + backoff_seconds(op.attempt_count) * 1000, now=t)
    return "retry_wait"


# --- propagation (13.7) and the intent aggregate (13.3) ---------------------------------------------------------


def propagate(conn: sqlite3.Connection, intent_id: str, now: int) -> int:
    """Fail (or make uncertain) every waiting dependent of a failed (uncertain) operation of the intent, repeated
    to a fixpoint inside the caller's transaction; returns how many operations changed."""
    ts = rfc3339_ms(now)
    changed = 0
    while True:
        step = 0
        for dep_status, new_status, code in (("failed", "failed", DEPENDENCY_FAILED),
                                             ("uncertain", "uncertain", DEPENDENCY_UNCERTAIN)):
            cur = conn.execute(
                "UPDATE delivery_operations SET status = ?, failure_code = ?, lease_owner = '', "
                "lease_expires_at = NULL, next_attempt_at = NULL, updated_at = ? "
                "WHERE intent_id = ? AND status IN ('pending', 'retry_wait') AND depends_on IN ("
                "SELECT d.id FROM delivery_operations d WHERE d.intent_id = ? AND d.status = ?)",
                (new_status, code, ts, intent_id, intent_id, dep_status))
            step += max(cur.rowcount, 0)
        changed += step
        if step == 0:
            return changed


AGGREGATE_SQL = (
    "SELECT COUNT(*) AS total, "
    f"SUM(CASE WHEN status IN {_SUCCESS} THEN 1 ELSE 0 END) AS terminal, "
    "SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed, "
    "SUM(CASE WHEN status = 'uncertain' THEN 1 ELSE 0 END) AS uncertain, "
    "SUM(CASE WHEN status IN ('uploaded','delivered','unsupported','failed','uncertain') THEN 1 ELSE 0 END) "
    "AS resolved FROM delivery_operations WHERE intent_id = ?"
)


def intent_status_conn(conn: sqlite3.Connection, intent_id: str) -> str:
    """13.3's aggregate from the counts query."""
    total, terminal, failed, uncertain, resolved = (int(v or 0) for v in
                                                    conn.execute(AGGREGATE_SQL, (intent_id,)).fetchone())
    if terminal == total:
        return "delivered"
    if failed and resolved == total:
        return "failed"
    if uncertain and resolved == total:
        return "uncertain"
    return "pending"


def refresh_intent(conn: sqlite3.Connection, intent_id: str, now: int) -> str:
    """Recompute and store the intent's status (RefreshDeliveryIntentStatus); a ``cancelled`` intent is left."""
    status = intent_status_conn(conn, intent_id)
    conn.execute("UPDATE delivery_intents SET status = ?, updated_at = ? WHERE id = ? AND status != 'cancelled' "
                 "AND status IS NOT ?", (status, rfc3339_ms(now), intent_id, status))
    return status


def refresh_intent_status(sd: SessionDir, intent_id: str, now: int | None = None) -> str:
    sd.require_writable()
    with sd.db.write() as conn:
        return refresh_intent(conn, intent_id, now_ms() if now is None else now)


# --- reopen (13.8) ------------------------------------------------------------------------------------------------


def reopen_targets(target: DeliveryOperation, siblings: Sequence[DeliveryOperation]) -> list[DeliveryOperation]:
    """The siblings a reopen of ``target`` reopens with it: those failed with ``dependency_failed`` whose
    dependency chain leads back to ``target`` through operations failed by dependency."""
    by_id = {o.id: o for o in siblings}
    out: list[DeliveryOperation] = []
    for o in siblings:
        if o.id == target.id or o.status != "failed" or o.failure_code != DEPENDENCY_FAILED:
            continue
        cur, seen = o, {o.id}
        while cur.depends_on and cur.depends_on not in seen:
            if cur.depends_on == target.id:
                out.append(o)
                break
            nxt = by_id.get(cur.depends_on)
            if nxt is None or nxt.status != "failed" or nxt.failure_code != DEPENDENCY_FAILED:
                break
            seen.add(nxt.id)
            cur = nxt
    return out


def reopen_conn(conn: sqlite3.Connection, target: DeliveryOperation, siblings: Sequence[DeliveryOperation],
                now: int) -> tuple[list[str], str]:
    """Reopen ``target`` and the siblings of :func:`reopen_targets` (status ``retry_wait``, no failure code, no
    next attempt, a new retry window from ``now``), then propagate and refresh the intent. Each update is
    guarded by the status and failure code it was read with. Returns the reopened ids and the intent status."""
    ts = rfc3339_ms(now)
    window = ", retry_window_started_at = ?" if has_window(conn) else ""
    ids = []
    for op in (target, *reopen_targets(target, siblings)):
        args: list[object] = [ts]
        if window:
            args.append(ts)
        cur = conn.execute(
            "UPDATE delivery_operations SET status = 'retry_wait', failure_code = '', next_attempt_at = NULL, "
            f"updated_at = ?{window} WHERE id = ? AND status = 'failed' AND failure_code = ?",
            (*args, op.id, op.failure_code))
        if cur.rowcount == 1:
            ids.append(op.id)
    propagate(conn, target.intent_id, now)
    return ids, refresh_intent(conn, target.intent_id, now)


# --- a platform reconnects (13.8) ---------------------------------------------------------------------------------


def list_failed_transient(sd: SessionDir, platform: str) -> list[str]:
    """ListFailedTransientDeliveryOperations: one platform's operations that failed on transport (retryable), in
    delivery order (``sequence, created_at``)."""
    with sd.db.read() as conn:
        rows = conn.execute(
            "SELECT o.id FROM delivery_operations o JOIN delivery_intents i ON i.id = o.intent_id "
            "WHERE i.platform = ? AND o.status = 'failed' AND o.failure_code IN (?, ?) "
            "ORDER BY o.sequence, o.created_at, o.id", (platform, RETRIES_EXHAUSTED, TRANSPORT_ERROR)).fetchall()
    return [r[0] for r in rows if isinstance(r[0], str)]


def reopen_platform(sd: SessionDir, platform: str, now: int | None = None) -> list[str]:
    """What the runtime does when a platform reconnects: reopen each of its transient failures (with the siblings
    failed by it), each in its own write transaction, re-checked there. Returns the operations reopened."""
    sd.require_writable()
    t = now_ms() if now is None else now
    done: list[str] = []
    for op_id in list_failed_transient(sd, platform):
        with sd.db.write() as conn:
            op = get_operation_conn(conn, op_id)
            if op is None or op.problems or op.status != "failed" or op.failure_code not in (RETRIES_EXHAUSTED,
                                                                                            TRANSPORT_ERROR):
                continue
            if op.lease_owner and op.lease_expires_at is not None and op.lease_expires_at > t:
                continue
            ids, _ = reopen_conn(conn, op, intent_operations_conn(conn, op.intent_id), t)
            done.extend(ids)
    return done
