"""The delivery outbox (reference section 13): statuses, rows, intent aggregation, the backoff and the retry rule.

An **intent** is one run × platform × target; its **operations** are ordered by ``sequence`` and may depend on
an earlier operation of the same intent. This module holds what needs no database: the value sets, the frozen
row dataclasses, :func:`aggregate_intent_status` (13.3), :func:`backoff_seconds` and the retry window (13.6),
and :func:`retry_refusal` (the retryable rule of 13.8, with the reason when an operation is not retryable).

Opaque ``transport_context`` (intent) and ``provider_state`` (operation) are never read into these rows: only
their size in bytes (``length(CAST(… AS BLOB))``), so nothing here can show or export them.

Times: ``next_attempt_at`` and ``lease_expires_at`` are Unix milliseconds; ``created_at``, ``updated_at`` and
``retry_window_started_at`` are RFC 3339 text.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from store.errors import StoreError
from store.mothx.cells import Cells, joined
from store.safetext import one_line
from store.times import from_unix_ms, parse_rfc3339

# --- value sets (13.2) ------------------------------------------------------------------------------------------

OPERATION_STATUSES = ("pending", "uploading", "uploaded", "sending", "retry_wait", "delivered", "unsupported",
                      "failed", "uncertain")
SUCCESS_TERMINAL = frozenset({"uploaded", "delivered", "unsupported"})
RESOLVED = SUCCESS_TERMINAL | {"failed", "uncertain"}
TERMINAL_RESULTS = RESOLVED  # the results a fenced update may repeat idempotently (13.5)
CLAIMABLE = ("pending", "uploading", "sending", "retry_wait")
PROGRESS = frozenset({"uploading", "sending"})
NEW_STATUSES = frozenset({"pending", "unsupported"})
ATTENTION = ("failed", "uncertain")  # the operator view (13.8)
INTENT_STATUSES = ("pending", "delivered", "failed", "uncertain", "cancelled")

# --- failure codes ------------------------------------------------------------------------------------------------

TRANSPORT_ERROR = "transport_error"
RETRIES_EXHAUSTED = "delivery_retries_exhausted"
DEPENDENCY_FAILED = "dependency_failed"
DEPENDENCY_UNCERTAIN = "dependency_uncertain"
OUTCOME_UNKNOWN = "provider_outcome_unknown"  # what the worker records for a call with no trustworthy result
RETRYABLE_CODES = frozenset({RETRIES_EXHAUSTED, TRANSPORT_ERROR})
DEPENDENCY_CODES = frozenset({DEPENDENCY_FAILED, DEPENDENCY_UNCERTAIN})

# --- times --------------------------------------------------------------------------------------------------------

LEASE_MS = 30_000
"""Default operation lease (13.4)."""
RETRY_WINDOW_MS = 10 * 60 * 1000
"""The wall-clock retry window (13.6)."""
BACKOFF_CAP_EXPONENT = 6


class DeliveryLeaseLost(StoreError):
    """A fenced update found another owner or epoch: "delivery operation lease was lost"."""


class DeliveryOperationBusy(StoreError):
    """A claim found the operation leased or not ready: "delivery operation is leased or not ready"."""


class DeliveryOperationAbsent(StoreError):
    """No operation has that id: "delivery operation was not found"."""


class DeliveryPlanInvalid(StoreError):
    """A plan breaks a creation rule of 13.1 (sequence, key, dependency, status, conflicting re-insert)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def backoff_seconds(attempt: int) -> int:
    """Seconds to the next attempt after a transport error on attempt ``attempt``: 1, 2, 4, 8, 16, 32 (13.6)."""
    return int(2 ** (min(max(attempt, 1), BACKOFF_CAP_EXPONENT) - 1))


def aggregate_intent_status(statuses: Iterable[str]) -> str:
    """13.3: ``delivered`` when every operation is success-terminal; else ``failed`` when one is failed and all
    are resolved; else ``uncertain`` when one is uncertain and all are resolved; else ``pending``."""
    values = list(statuses)
    if all(s in SUCCESS_TERMINAL for s in values):
        return "delivered"
    if all(s in RESOLVED for s in values):
        if "failed" in values:
            return "failed"
        if "uncertain" in values:
            return "uncertain"
    return "pending"


def failure_class(status: str, failure_code: str) -> str:
    """How the screen labels a failure: ``transient`` (a transport failure: retryable), ``permanent`` (any other
    failure code of a failed operation), ``dependency`` (failed or uncertain only because of an earlier
    operation), ``uncertain`` (the provider may have received it), or ``""`` for an operation not in trouble."""
    if failure_code in DEPENDENCY_CODES and status in ("failed", "uncertain"):
        return "dependency"
    if status == "uncertain":
        return "uncertain"
    if status == "failed":
        return "transient" if failure_code in RETRYABLE_CODES else "permanent"
    if status == "retry_wait":
        return "transient"
    return ""


def is_retryable(status: str, failure_code: str) -> bool:
    """13.8: only a ``failed`` operation whose code is ``delivery_retries_exhausted`` or ``transport_error``."""
    return status == "failed" and failure_code in RETRYABLE_CODES


def retry_refusal(op_id: str, status: str, failure_code: str, depends_on: str = "") -> str:
    """The one-sentence reason an operation cannot be retried (``''``: it can, by the rule of 13.8)."""
    oid = one_line(op_id)
    code = one_line(failure_code) or "none"
    if is_retryable(status, failure_code):
        return ""
    if status == "uncertain":
        return (f"operation {oid} is uncertain (failure code {code}): the provider may have received it, so it is "
                "never re-sent blindly; check the channel by hand.")
    if status == "failed" and failure_code == DEPENDENCY_FAILED:
        dep = f" {one_line(depends_on)}" if depends_on else ""
        return (f"operation {oid} failed only because the operation it depends on{dep} failed; retry that one "
                "(its dependents reopen with it).")
    if status == "failed":
        return (f"operation {oid} failed permanently (failure code {code}); only a transport failure "
                f"({TRANSPORT_ERROR} or {RETRIES_EXHAUSTED}) is retried.")
    return f"operation {oid} is {one_line(status) or 'without a status'}, not failed; only a failed operation is retried."


def lease_refusal(op_id: str, lease_owner: str, lease_epoch: int, lease_expires_at: int | None, now: int) -> str:
    """The reason to leave an operation alone while a worker holds its unexpired lease (``''``: no such lease)."""
    if not lease_owner or lease_expires_at is None or lease_expires_at <= now:
        return ""
    left = max(0, (lease_expires_at - now + 999) // 1000)
    return (f"operation {one_line(op_id)} is leased by {one_line(lease_owner)} (epoch {lease_epoch}) for {left} s "
            f"more (until {from_unix_ms(lease_expires_at)}): a worker is delivering it now.")


def window_start_ms(retry_window_started_at: str | None, created_at: str) -> int | None:
    """Where the retry window starts (Unix ms): ``retry_window_started_at`` when set, else ``created_at``."""
    for text in (retry_window_started_at, created_at):
        if text:
            moment = parse_rfc3339(text)
            if moment is not None:
                return int(moment.timestamp() * 1000)
    return None


# --- rows ---------------------------------------------------------------------------------------------------------

INTENT_SELECT = ("{a}id, {a}session_id, {a}run_id, {a}platform, {a}target_id, {a}reply_message_id, "
                 "length(CAST({a}transport_context AS BLOB)), {a}status, {a}created_at, {a}updated_at")
OPERATION_SELECT = ("{a}id, {a}intent_id, {a}operation_key, {a}artifact_id, {a}operation_kind, {a}sequence, "
                    "{a}depends_on, {a}idempotency_key, {a}payload_digest, {a}status, {a}provider_asset_id, "
                    "{a}provider_message_id, length(CAST({a}provider_state AS BLOB)), {a}attempt_count, "
                    "{a}next_attempt_at, {a}failure_code, {rw}, {a}lease_owner, {a}lease_epoch, "
                    "{a}lease_expires_at, {a}created_at, {a}updated_at")


def intent_select(alias: str = "") -> str:
    return INTENT_SELECT.format(a=f"{alias}." if alias else "")


def operation_select(alias: str = "", *, has_window: bool = True) -> str:
    a = f"{alias}." if alias else ""
    return OPERATION_SELECT.format(a=a, rw=f"{a}retry_window_started_at" if has_window else "NULL")


INTENT_WIDTH = 10
OPERATION_WIDTH = 22


@dataclass(frozen=True)
class DeliveryIntent:
    """One intent row, without its transport context (only its size)."""

    id: str
    session_id: str
    run_id: str
    platform: str
    target_id: str
    reply_message_id: str
    transport_context_bytes: int
    status: str
    created_at: str
    updated_at: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeliveryOperation:
    """One operation row, without its provider state (only its size)."""

    id: str
    intent_id: str
    operation_key: str
    artifact_id: str
    operation_kind: str
    sequence: int
    depends_on: str
    idempotency_key: str
    payload_digest: str
    status: str
    provider_asset_id: str
    provider_message_id: str
    provider_state_bytes: int
    attempt_count: int
    next_attempt_at: int | None
    failure_code: str
    retry_window_started_at: str | None
    lease_owner: str
    lease_epoch: int
    lease_expires_at: int | None
    created_at: str
    updated_at: str
    problems: tuple[str, ...] = ()

    @property
    def damaged(self) -> str:
        return joined(self.problems)

    def leased(self, now: int) -> bool:
        return bool(self.lease_owner) and self.lease_expires_at is not None and self.lease_expires_at > now


def intent_from_row(row: Sequence[object], offset: int = 0) -> DeliveryIntent:
    c = Cells("delivery_intents", row[offset:offset + INTENT_WIDTH])
    return DeliveryIntent(
        id=c.text(0, "id"), session_id=c.text(1, "session_id"), run_id=c.text(2, "run_id"),
        platform=c.text(3, "platform"), target_id=c.text(4, "target_id"),
        reply_message_id=c.text(5, "reply_message_id"), transport_context_bytes=_size(row[offset + 6]),
        status=c.text(7, "status"), created_at=c.text(8, "created_at"), updated_at=c.text(9, "updated_at"),
        problems=c.problems,
    )


def operation_from_row(row: Sequence[object], offset: int = 0) -> DeliveryOperation:
    c = Cells("delivery_operations", row[offset:offset + OPERATION_WIDTH])
    return DeliveryOperation(
        id=c.text(0, "id"), intent_id=c.text(1, "intent_id"), operation_key=c.text(2, "operation_key"),
        artifact_id=c.text_or_none(3, "artifact_id") or "", operation_kind=c.text(4, "operation_kind"),
        sequence=c.integer(5, "sequence"), depends_on=c.text_or_none(6, "depends_on") or "",
        idempotency_key=c.text(7, "idempotency_key"), payload_digest=c.text(8, "payload_digest"),
        status=c.text(9, "status"), provider_asset_id=c.text(10, "provider_asset_id"),
        provider_message_id=c.text(11, "provider_message_id"), provider_state_bytes=_size(row[offset + 12]),
        attempt_count=c.integer(13, "attempt_count"), next_attempt_at=c.integer_or_none(14, "next_attempt_at"),
        failure_code=c.text(15, "failure_code"), retry_window_started_at=c.text_or_none(16, "retry_window_started_at"),
        lease_owner=c.text(17, "lease_owner"), lease_epoch=c.integer(18, "lease_epoch"),
        lease_expires_at=c.integer_or_none(19, "lease_expires_at"), created_at=c.text(20, "created_at"),
        updated_at=c.text(21, "updated_at"), problems=c.problems,
    )


def _size(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- the operator view ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainLink:
    """One operation of an intent's dependency chain, as the operator view draws it."""

    operation_id: str
    sequence: int
    operation_kind: str
    status: str
    failure_code: str
    depends_on: str


@dataclass(frozen=True)
class DeliveryCursor:
    """Keyset position in the operator view: the sort values of the last row (with its rowid)."""

    values: tuple[object, ...]


@dataclass(frozen=True)
class DeliveryFailure:
    """The reference's DeliveryFailure (13.8) plus what the screen draws: the operation's place in its intent's
    dependency chain, its wait, its lease and the intent status. Never a payload, provider state or transport
    context."""

    operation_id: str
    intent_id: str
    session_id: str
    run_id: str
    platform: str
    target_id: str
    operation_kind: str
    status: str
    failure_code: str
    attempt_count: int
    updated_at: str
    sequence: int = 0
    depends_on: str = ""
    next_attempt_at: int | None = None
    lease_owner: str = ""
    lease_epoch: int = 0
    lease_expires_at: int | None = None
    intent_status: str = ""
    chain: tuple[ChainLink, ...] = ()  # this operation's chain: what it depends on, itself, what depends on it
    problems: tuple[str, ...] = ()
    key: DeliveryCursor | None = None

    @property
    def retryable(self) -> bool:
        return is_retryable(self.status, self.failure_code) and not self.problems

    @property
    def label(self) -> str:
        return failure_class(self.status, self.failure_code)

    @property
    def refusal(self) -> str:
        """Why a retry is refused, by the facts on this row (``''``: it may be retried; apply re-checks)."""
        if self.problems:
            return (f"operation {one_line(self.operation_id)} holds damaged values ({joined(self.problems)}); "
                    "a repair leaves damaged rows as they are.")
        return retry_refusal(self.operation_id, self.status, self.failure_code, self.depends_on)

    @property
    def dependents(self) -> tuple[ChainLink, ...]:
        """The operations after this one in its chain (they wait for it, directly or not)."""
        ids = {self.operation_id}
        out = []
        for link in self.chain:
            if link.depends_on in ids and link.operation_id not in ids:
                ids.add(link.operation_id)
                out.append(link)
        return tuple(out)

    def to_json(self) -> dict[str, object]:
        """The management interface's object (13.8): camelCase reference fields plus ``retryable``."""
        return {
            "operationId": self.operation_id, "intentId": self.intent_id, "sessionId": self.session_id,
            "runId": self.run_id, "platform": self.platform, "targetId": self.target_id,
            "operationKind": self.operation_kind, "status": self.status, "failureCode": self.failure_code,
            "attemptCount": self.attempt_count, "updatedAt": self.updated_at, "retryable": self.retryable,
        }


def chain_of(op_id: str, links: Sequence[ChainLink]) -> tuple[ChainLink, ...]:
    """The chain through ``op_id`` among one intent's operations (in sequence order): its dependencies back to
    the first, itself, then every operation that depends on it directly or through another."""
    by_id = {link.operation_id: link for link in links}
    if op_id not in by_id:
        return ()
    keep = {op_id}
    cur = by_id[op_id]
    seen = {op_id}
    while cur.depends_on and cur.depends_on in by_id and cur.depends_on not in seen:
        seen.add(cur.depends_on)
        keep.add(cur.depends_on)
        cur = by_id[cur.depends_on]
    down = {op_id}
    changed = True
    while changed:
        changed = False
        for link in links:
            if link.depends_on in down and link.operation_id not in down:
                down.add(link.operation_id)
                changed = True
    keep |= down
    return tuple(link for link in links if link.operation_id in keep)
