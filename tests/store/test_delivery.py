"""The delivery outbox (reference 13): claim, fenced updates, retry window, propagation, the operator view and the
retry-delivery repair."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import RepairRefused
from store.mothx.delivery_listing import (
    DeliveryScope,
    deliveries_page,
    get_delivery_failure,
    list_delivery_failures,
)
from store.mothx.delivery_model import (
    LEASE_MS,
    OPERATION_STATUSES,
    RETRY_WINDOW_MS,
    DeliveryLeaseLost,
    DeliveryOperationBusy,
    aggregate_intent_status,
    backoff_seconds,
    failure_class,
    is_retryable,
)
from store.mothx.delivery_repairs import RetryDelivery
from store.mothx.delivery_store import (
    NewIntent,
    NewOperation,
    claim,
    create_plan,
    get_operation,
    get_plan,
    intent_status_conn,
    list_due,
    list_failed_transient,
    propagate,
    record_transport_error,
    reopen_platform,
    requeue,
    update_progress,
    update_result,
)
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import create_session
from store.times import format_rfc3339

T0 = 1_900_000_000_000  # Unix ms
W1, W2 = "delivery-worker-aaaaaaaaaaaaaaaa", "delivery-worker-bbbbbbbbbbbbbbbb"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def finished_run(sd: SessionDir, session_id: str | None = None, run_id: str = "run-1") -> tuple[str, str]:
    sid = session_id or create_session(sd)
    ts = format_rfc3339()
    with sd.db.write() as conn:
        conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at, finished_at) "
                     "VALUES (?, ?, 'completed', ?, ?, ?)", (run_id, sid, ts, ts, ts))
    return sid, run_id


def plan(sd: SessionDir, *, platform: str = "feishu", target: str = "oc_1", run_id: str = "run-1",
         kinds: tuple[str, ...] = ("upload_file", "send_file"), chain: bool = True, now: int = T0,
         session_id: str | None = None) -> tuple[str, list[str]]:
    sid, rid = finished_run(sd, session_id, run_id)
    ops = [NewOperation(f"op:{n}", kind, n + 1, depends_on_key=f"op:{n - 1}" if chain and n else "",
                        id=f"{rid}-op{n + 1}") for n, kind in enumerate(kinds)]
    intent = create_plan(sd, NewIntent(sid, rid, platform, target, id=f"{rid}-intent"), ops, now=now)
    return intent, [o.id for o in ops]


def status(sd: SessionDir, op_id: str) -> tuple[str, str]:
    op = get_operation(sd, op_id)
    assert op is not None
    return op.status, op.failure_code


def intent_status(sd: SessionDir, intent_id: str) -> str:
    p = get_plan(sd, intent_id)
    assert p is not None
    return p.intent.status


def fail_exhausted(sd: SessionDir, op_id: str, owner: str = W1, now: int = T0) -> int:
    op = claim(sd, op_id, owner, now=now)
    update_result(sd, op_id, owner, op.lease_epoch, "failed", failure_code="delivery_retries_exhausted", now=now)
    return op.lease_epoch


# --- model ------------------------------------------------------------------------------------------------------


def test_backoff_follows_the_reference() -> None:
    assert [backoff_seconds(a) for a in range(0, 9)] == [1, 1, 2, 4, 8, 16, 32, 32, 32]


def test_retryable_rule() -> None:
    assert is_retryable("failed", "transport_error")
    assert is_retryable("failed", "delivery_retries_exhausted")
    assert not is_retryable("uncertain", "transport_error")  # the reference's listing gets this one wrong
    assert not is_retryable("failed", "dependency_failed")
    assert not is_retryable("failed", "target_not_found")
    assert failure_class("failed", "transport_error") == "transient"
    assert failure_class("failed", "target_not_found") == "permanent"
    assert failure_class("uncertain", "provider_outcome_unknown") == "uncertain"
    assert failure_class("failed", "dependency_failed") == "dependency"


def plain_aggregate(statuses: list[str]) -> str:
    """13.3 written the plain way: count, then decide."""
    total = len(statuses)
    terminal = sum(1 for s in statuses if s in ("uploaded", "delivered", "unsupported"))
    failed = statuses.count("failed")
    uncertain = statuses.count("uncertain")
    resolved = terminal + failed + uncertain
    if terminal == total:
        return "delivered"
    if failed >= 1 and resolved == total:
        return "failed"
    if uncertain >= 1 and resolved == total:
        return "uncertain"
    return "pending"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OPERATION_STATUSES), min_size=1, max_size=8))
def test_intent_aggregation_matches_a_plain_implementation(statuses: list[str]) -> None:
    assert aggregate_intent_status(statuses) == plain_aggregate(statuses)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE delivery_operations (intent_id TEXT, status TEXT)")
    conn.executemany("INSERT INTO delivery_operations VALUES ('i', ?)", [(s,) for s in statuses])
    assert intent_status_conn(conn, "i") == plain_aggregate(statuses)  # the SQL of 13.3 agrees too


# --- claim and fencing ---------------------------------------------------------------------------------------------


def test_claim_takes_a_new_epoch_and_respects_dependencies(sd: SessionDir) -> None:
    intent, (up, send) = plan(sd)
    with pytest.raises(DeliveryOperationBusy):
        claim(sd, send, W1, now=T0)  # its dependency is not uploaded yet
    op = claim(sd, up, W1, now=T0)
    assert (op.lease_owner, op.lease_epoch, op.attempt_count) == (W1, 1, 1)
    assert op.lease_expires_at == T0 + LEASE_MS
    with pytest.raises(DeliveryOperationBusy):
        claim(sd, up, W2, now=T0 + 1000)  # leased
    assert up not in [o.id for o in list_due(sd, T0 + 1000)]  # leased; the due list ignores dependencies
    again = claim(sd, up, W2, now=T0 + LEASE_MS + 1)  # the lease expired: a new epoch
    assert again.lease_epoch == 2
    with pytest.raises(DeliveryLeaseLost):
        update_progress(sd, up, W1, 1, "uploading", now=T0 + LEASE_MS + 2)
    update_progress(sd, up, W2, 2, "uploading", now=T0 + LEASE_MS + 2)
    assert update_result(sd, up, W2, 2, "uploaded", provider_asset_id="asset-1", now=T0 + LEASE_MS + 3)
    assert not update_result(sd, up, W2, 2, "uploaded", provider_asset_id="asset-1", now=T0 + LEASE_MS + 4)
    with pytest.raises(DeliveryLeaseLost):
        update_result(sd, up, W2, 2, "failed", failure_code="x", now=T0 + LEASE_MS + 5)  # not the same result
    assert status(sd, up) == ("uploaded", "")
    op2 = claim(sd, send, W1, now=T0 + LEASE_MS + 6)
    update_result(sd, send, W1, op2.lease_epoch, "delivered", provider_message_id="m-1", now=T0 + LEASE_MS + 7)
    assert intent_status(sd, intent) == "delivered"


def test_claim_is_refused_for_a_cancelled_intent(sd: SessionDir) -> None:
    intent, (up, _) = plan(sd)
    with sd.db.write() as conn:
        conn.execute("UPDATE delivery_intents SET status = 'cancelled' WHERE id = ?", (intent,))
    with pytest.raises(DeliveryOperationBusy):
        claim(sd, up, W1, now=T0)


def test_transport_errors_back_off_then_exhaust_the_window(sd: SessionDir) -> None:
    intent, (up, send) = plan(sd)
    t = T0
    for attempt in range(1, 4):
        op = claim(sd, up, W1, now=t)
        assert record_transport_error(sd, op, W1, op.lease_epoch, now=t) == "retry_wait"
        after = get_operation(sd, up)
        assert after is not None and after.next_attempt_at == t + backoff_seconds(attempt) * 1000
        assert after.failure_code == "transport_error" and after.lease_owner == ""
        with pytest.raises(DeliveryOperationBusy):
            claim(sd, up, W1, now=t + 1)  # not due yet (the backoff is at least 1 s)
        t = after.next_attempt_at
    assert status(sd, send) == ("pending", "")
    late = T0 + RETRY_WINDOW_MS
    op = claim(sd, up, W1, now=late)
    assert record_transport_error(sd, op, W1, op.lease_epoch, now=late) == "failed"
    assert status(sd, up) == ("failed", "delivery_retries_exhausted")
    assert status(sd, send) == ("failed", "dependency_failed")  # propagated in the same transaction
    assert intent_status(sd, intent) == "failed"


def test_uncertain_propagates_to_a_fixpoint(sd: SessionDir) -> None:
    intent, (a, b, c) = plan(sd, kinds=("upload_file", "send_file", "send_text"))
    op = claim(sd, a, W1, now=T0)
    update_result(sd, a, W1, op.lease_epoch, "uncertain", failure_code="provider_outcome_unknown", now=T0)
    assert status(sd, b) == ("uncertain", "dependency_uncertain")
    assert status(sd, c) == ("uncertain", "dependency_uncertain")
    assert intent_status(sd, intent) == "uncertain"


def test_requeue_by_the_current_holder_only(sd: SessionDir) -> None:
    _, (up, _) = plan(sd)
    op = claim(sd, up, W1, now=T0)
    with pytest.raises(DeliveryLeaseLost):
        requeue(sd, up, W2, op.lease_epoch, T0 + 5000, now=T0)
    requeue(sd, up, W1, op.lease_epoch, T0 + 5000, now=T0)
    after = get_operation(sd, up)
    assert after is not None and (after.status, after.next_attempt_at, after.lease_owner) == ("retry_wait", T0 + 5000, "")


# --- the operator view -------------------------------------------------------------------------------------------


def test_operator_view_lists_failed_and_uncertain_with_chains(sd: SessionDir) -> None:
    intent, (up, send) = plan(sd)
    fail_exhausted(sd, up)
    intent2, (t2,) = plan(sd, run_id="run-2", kinds=("send_text",), platform="wechat", target="wx_1",
                          session_id=None)
    op = claim(sd, t2, W1, now=T0 + 10)
    update_result(sd, t2, W1, op.lease_epoch, "uncertain", failure_code="provider_outcome_unknown", now=T0 + 10)
    rows = list_delivery_failures(sd)
    assert [r.operation_id for r in rows] == [t2, send, up] or {r.operation_id for r in rows} == {t2, send, up}
    by_id = {r.operation_id: r for r in rows}
    assert by_id[up].retryable and not by_id[send].retryable and not by_id[t2].retryable
    assert [link.operation_id for link in by_id[up].chain] == [up, send]
    assert [link.operation_id for link in by_id[up].dependents] == [send]
    js = by_id[up].to_json()
    assert set(js) == {"operationId", "intentId", "sessionId", "runId", "platform", "targetId", "operationKind",
                       "status", "failureCode", "attemptCount", "updatedAt", "retryable"}
    grouped = deliveries_page(sd, DeliveryScope(grouped=True)).rows
    assert [r.platform for r in grouped] == ["feishu", "feishu", "wechat"]
    assert list_delivery_failures(sd, session_id=by_id[t2].session_id) == [by_id[t2]]


def test_operator_view_pages_by_keyset(sd: SessionDir) -> None:
    sid = create_session(sd)
    ids = []
    for n in range(7):
        _, (op_id,) = plan(sd, run_id=f"run-{n}", kinds=("send_text",), target=f"t{n % 2}", session_id=sid)
        fail_exhausted(sd, op_id, now=T0 + n * 1000)
        ids.append(op_id)
    with sd.db.write() as conn:  # damaged sort values (a foreign writer): still listed, and paged like the rest
        conn.execute("UPDATE delivery_operations SET updated_at = X'00ff' WHERE id = ?", (ids[2],))
        conn.execute("UPDATE delivery_intents SET target_id = X'ff' WHERE id = (SELECT intent_id FROM "
                     "delivery_operations WHERE id = ?)", (ids[4],))
    damaged = get_delivery_failure(sd, ids[2])
    assert damaged is not None and damaged.problems and not damaged.retryable
    with sd.db.write() as conn:  # an operation whose intent row is gone (foreign keys are off): listed, damaged
        conn.execute("UPDATE delivery_operations SET intent_id = 'gone' WHERE id = ?", (ids[5],))
    orphan = get_delivery_failure(sd, ids[5])
    assert orphan is not None and orphan.problems and not orphan.retryable
    for grouped in (False, True):
        scope = DeliveryScope(grouped=grouped)
        whole = [r.operation_id for r in deliveries_page(sd, scope, limit=100).rows]
        seen, after, more = [], None, True
        while more:
            page = deliveries_page(sd, scope, after=after, limit=3)
            seen += [r.operation_id for r in page.rows]
            after, more = page.after, page.more
        assert seen == whole and sorted(seen) == sorted(ids)


def test_opaque_state_is_never_in_a_row(sd: SessionDir) -> None:
    _, (up, _) = plan(sd)
    secret = '{"token":"SECRET-TOKEN"}'
    op = claim(sd, up, W1, now=T0)
    update_result(sd, up, W1, op.lease_epoch, "failed", failure_code="transport_error", provider_state=secret, now=T0)
    with sd.db.write() as conn:
        conn.execute("UPDATE delivery_intents SET transport_context = ?", (secret,))
    row = get_delivery_failure(sd, up)
    stored = get_operation(sd, up)
    plan_rows = get_plan(sd, row.intent_id if row else "")
    assert row is not None and stored is not None and plan_rows is not None
    assert "SECRET" not in repr(row) + repr(stored) + repr(plan_rows)
    assert stored.provider_state_bytes == len(secret) and plan_rows.intent.transport_context_bytes == len(secret)


# --- retry-delivery ------------------------------------------------------------------------------------------------


def test_retry_is_refused_while_a_worker_holds_an_unexpired_lease(sd: SessionDir) -> None:
    _, (up, _) = plan(sd)
    fail_exhausted(sd, up)
    with sd.db.write() as conn:  # a worker's lease left on the failed row (a foreign writer, a slow clear)
        conn.execute("UPDATE delivery_operations SET lease_owner = ?, lease_epoch = 7, lease_expires_at = ? "
                     "WHERE id = ?", (W2, T0 + LEASE_MS, up))
    repair = RetryDelivery(sd, up, now=T0 + 1000)
    preview = repair.preview()
    assert "leased by" in preview.refusal and W2 in preview.refusal
    with pytest.raises(RepairRefused, match="leased by"):
        repair.apply(preview)
    assert status(sd, up) == ("failed", "delivery_retries_exhausted")
    # an operation claimed right now: the lease speaks first
    _, (x,) = plan(sd, run_id="run-9", kinds=("send_text",))
    claim(sd, x, W1, now=T0)
    assert "leased by" in RetryDelivery(sd, x, now=T0 + 5).preview().refusal
    # once the lease expired the retry goes ahead
    later = RetryDelivery(sd, up, now=T0 + LEASE_MS + 1)
    later.apply(later.preview())
    assert status(sd, up) == ("retry_wait", "")


@pytest.mark.parametrize(("result", "code", "reason"), [
    ("uncertain", "provider_outcome_unknown", "never re-sent blindly"),
    ("uncertain", "transport_error", "never re-sent blindly"),
    ("failed", "target_not_found", "failed permanently"),
])
def test_retry_of_uncertain_or_permanent_is_refused_with_the_reason(sd: SessionDir, result: str, code: str,
                                                                    reason: str) -> None:
    _, (up, send) = plan(sd)
    op = claim(sd, up, W1, now=T0)
    update_result(sd, up, W1, op.lease_epoch, result, failure_code=code, now=T0)
    for target in (up, send):
        preview = RetryDelivery(sd, target, now=T0 + 1).preview()
        assert preview.refusal and not preview.changes
        with pytest.raises(RepairRefused):
            RetryDelivery(sd, target, now=T0 + 1).apply(preview)
    assert reason in RetryDelivery(sd, up, now=T0 + 1).preview().refusal
    expect = "depends on" if result == "failed" else "never re-sent blindly"
    assert expect in RetryDelivery(sd, send, now=T0 + 1).preview().refusal
    assert status(sd, up) == (result, code)


def test_reopen_restores_dependents_failed_by_dependency(sd: SessionDir) -> None:
    intent, (a, b, c) = plan(sd, kinds=("upload_file", "send_file", "send_text"))
    fail_exhausted(sd, a)
    assert status(sd, b) == ("failed", "dependency_failed") and status(sd, c) == ("failed", "dependency_failed")
    assert intent_status(sd, intent) == "failed"
    now = T0 + RETRY_WINDOW_MS + 60_000
    repair = RetryDelivery(sd, a, now=now)
    preview = repair.preview()
    assert preview.allowed and {ch.key for ch in preview.changes} == {a, b, c, intent}
    result = repair.apply(preview)
    assert "2 dependent" in result.message
    assert [status(sd, x) for x in (a, b, c)] == [("retry_wait", "")] * 3
    assert intent_status(sd, intent) == "pending"
    op = get_operation(sd, a)
    assert op is not None and op.retry_window_started_at == format_rfc3339_ms(now) and op.next_attempt_at is None
    # the window restarted: a transport error now waits again instead of exhausting at once
    claimed = claim(sd, a, W1, now=now + 1)
    assert record_transport_error(sd, claimed, W1, claimed.lease_epoch, now=now + 1) == "retry_wait"
    assert status(sd, b) == ("retry_wait", "")


def test_reopen_fingerprint_refuses_changed_facts(sd: SessionDir) -> None:
    _, (up, _) = plan(sd)
    fail_exhausted(sd, up)
    repair = RetryDelivery(sd, up, now=T0 + 5)
    preview = repair.preview()
    RetryDelivery(sd, up, now=T0 + 5).apply()  # someone else retried it first
    with pytest.raises(RepairRefused):
        repair.apply(preview)


def test_a_stale_workers_late_result_after_a_reopen_is_fenced_out(sd: SessionDir) -> None:
    intent, (up, send) = plan(sd)
    stale = claim(sd, up, W1, now=T0)  # worker 1 hangs mid-call; its lease runs out
    later = T0 + LEASE_MS + 1
    op = claim(sd, up, W2, now=later)  # worker 2 takes over at a new epoch, and fails for good
    record_transport_error(sd, op, W2, op.lease_epoch, now=T0 + RETRY_WINDOW_MS)
    assert status(sd, up) == ("failed", "delivery_retries_exhausted")
    RetryDelivery(sd, up, now=T0 + RETRY_WINDOW_MS + 1).apply()
    for result, code in (("uploaded", ""), ("failed", "delivery_retries_exhausted")):
        with pytest.raises(DeliveryLeaseLost):
            update_result(sd, up, W1, stale.lease_epoch, result, failure_code=code, now=T0 + RETRY_WINDOW_MS + 2)
        with pytest.raises(DeliveryLeaseLost):  # worker 2's own late repeat too: the row was reopened since
            update_result(sd, up, W2, op.lease_epoch, result, failure_code=code, now=T0 + RETRY_WINDOW_MS + 2)
    assert status(sd, up) == ("retry_wait", "") and status(sd, send) == ("retry_wait", "")
    fresh = claim(sd, up, W1, now=T0 + RETRY_WINDOW_MS + 3)
    assert fresh.lease_epoch == op.lease_epoch + 1
    assert update_result(sd, up, W1, fresh.lease_epoch, "uploaded", now=T0 + RETRY_WINDOW_MS + 4)
    assert intent_status(sd, intent) == "pending"


def test_retry_of_an_unknown_or_delivered_operation_is_refused(sd: SessionDir) -> None:
    assert "does not exist" in RetryDelivery(sd, "nope").preview().refusal
    _, (x,) = plan(sd, kinds=("send_text",))
    op = claim(sd, x, W1, now=T0)
    update_result(sd, x, W1, op.lease_epoch, "delivered", now=T0)
    assert "not failed" in RetryDelivery(sd, x, now=T0).preview().refusal


def format_rfc3339_ms(ms: int) -> str:
    from datetime import UTC, datetime

    return format_rfc3339(datetime.fromtimestamp(ms / 1000, tz=UTC))


def test_a_platform_reconnect_reopens_its_transient_failures_only(sd: SessionDir) -> None:
    _, (a, b) = plan(sd)
    fail_exhausted(sd, a)
    _, (p,) = plan(sd, run_id="run-2", kinds=("send_text",))
    op = claim(sd, p, W1, now=T0)
    update_result(sd, p, W1, op.lease_epoch, "failed", failure_code="bot_not_in_chat", now=T0)
    _, (w,) = plan(sd, run_id="run-3", kinds=("send_text",), platform="wechat")
    fail_exhausted(sd, w)
    assert list_failed_transient(sd, "feishu") == [a]
    assert reopen_platform(sd, "feishu", now=T0 + 5) == [a, b]
    assert status(sd, a) == status(sd, b) == ("retry_wait", "")
    assert status(sd, p) == ("failed", "bot_not_in_chat") and status(sd, w)[0] == "failed"


def plain_propagation(statuses: list[str], deps: list[int | None]) -> list[tuple[str, str]]:
    """13.7 the plain way: sweep in order until nothing changes (dependencies always point backwards)."""
    out = [(s, "") for s in statuses]
    changed = True
    while changed:
        changed = False
        for n, dep in enumerate(deps):
            if dep is None or out[n][0] not in ("pending", "retry_wait"):
                continue
            if out[dep][0] == "failed":
                out[n], changed = ("failed", "dependency_failed"), True
            elif out[dep][0] == "uncertain":
                out[n], changed = ("uncertain", "dependency_uncertain"), True
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPERATION_STATUSES), st.integers(min_value=0, max_value=8)),
                min_size=1, max_size=8))
def test_dependency_propagation_reaches_the_plain_fixpoint(ops: list[tuple[str, int]]) -> None:
    statuses = [s for s, _ in ops]
    deps = [None if n == 0 or pick == 0 else (pick - 1) % n for n, (_, pick) in enumerate(ops)]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE delivery_operations (id TEXT, intent_id TEXT, status TEXT, failure_code TEXT, "
                 "depends_on TEXT, lease_owner TEXT, lease_expires_at INTEGER, next_attempt_at INTEGER, "
                 "updated_at TEXT)")
    conn.executemany("INSERT INTO delivery_operations VALUES (?, 'i', ?, '', ?, '', NULL, NULL, '')",
                     [(f"o{n}", s, f"o{d}" if d is not None else None) for n, (s, d) in enumerate(zip(statuses, deps,
                                                                                                    strict=True))])
    propagate(conn, "i", T0)
    got = conn.execute("SELECT status, failure_code FROM delivery_operations ORDER BY rowid").fetchall()
    assert got == plain_propagation(statuses, deps)
