"""The delivery worker as its own process against the fake provider: success, transient failure (backoff, then
exhaustion), permanent failure, an unknown outcome (uncertain, never re-sent), and an operator's retry in this
process picked up by a second worker process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from store.mothx.db import OpenMode
from store.mothx.delivery_listing import list_delivery_failures
from store.mothx.delivery_repairs import RetryDelivery
from store.mothx.delivery_store import NewIntent, NewOperation, create_plan, get_operation, get_plan
from store.mothx.delivery_worker import FakeProvider
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import create_session
from store.times import format_rfc3339

ROOT = Path(__file__).resolve().parents[2]


def _seed(sd: SessionDir, run_id: str, kinds: tuple[str, ...], key: str) -> tuple[str, list[str]]:
    sid = create_session(sd)
    ts = format_rfc3339()
    with sd.db.write() as conn:
        conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at, finished_at) "
                     "VALUES (?, ?, 'completed', ?, ?, ?)", (run_id, sid, ts, ts, ts))
    ops = [NewOperation(f"{key}:{n}", kind, n + 1, depends_on_key=f"{key}:{n - 1}" if n else "",
                        id=f"{run_id}-{n + 1}") for n, kind in enumerate(kinds)]
    intent = create_plan(sd, NewIntent(sid, run_id, "feishu", "oc_" + key, id=f"{run_id}-intent"), ops)
    return intent, [o.id for o in ops]


def _worker(root: Path, *args: str, timeout: float = 60) -> list[dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-m", "store.mothx.delivery_worker", "--dir", str(root), "--call-seconds", "0",
         "--poll", "0.05", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _status(sd: SessionDir, op_id: str) -> tuple[str, str]:
    op = get_operation(sd, op_id)
    assert op is not None
    return op.status, op.failure_code


def test_fake_provider_follows_its_script() -> None:
    p = FakeProvider("ok", {"k": ["transient", "unknown"]})
    from dataclasses import replace

    from store.mothx.delivery_model import DeliveryOperation

    op = DeliveryOperation("id", "i", "k", "", "send_text", 1, "", "", "", "pending", "", "", 0, 1, None, "", None,
                           "", 1, None, "", "")
    assert [p.outcome(replace(op, attempt_count=n)) for n in (1, 2, 3)] == ["transient", "unknown", "unknown"]
    assert p.outcome(replace(op, operation_key="other")) == "ok"


def test_the_whole_flow_between_real_processes(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        ok_intent, ok_ops = _seed(sd, "run-ok", ("upload_file", "send_file"), "ok")
        tr_intent, tr_ops = _seed(sd, "run-tr", ("upload_image", "send_image"), "tr")
        _, perm_ops = _seed(sd, "run-perm", ("send_text",), "perm")
        unk_intent, unk_ops = _seed(sd, "run-unk", ("upload_file", "send_file"), "unk")

    events = _worker(root, "--exit-when-idle", "--max-retries", "2", "--script", "tr:0=transient",
                     "--script", "perm:0=permanent", "--script", "unk:0=unknown")
    # the transient one waits out its 1 s backoff before attempt 2: run until idle a second time
    time.sleep(1.1)
    events += _worker(root, "--exit-when-idle", "--max-retries", "2", "--script", "tr:0=transient")
    results = [e for e in events if e["event"] == "result"]
    assert any(e["operation"] == tr_ops[0] and e["status"] == "retry_wait" for e in results)

    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        assert [_status(sd, x) for x in ok_ops] == [("uploaded", ""), ("delivered", "")]
        assert _status(sd, tr_ops[0]) == ("failed", "delivery_retries_exhausted")
        assert _status(sd, tr_ops[1]) == ("failed", "dependency_failed")
        assert _status(sd, perm_ops[0]) == ("failed", "provider_rejected")
        assert _status(sd, unk_ops[0]) == ("uncertain", "provider_outcome_unknown")
        assert _status(sd, unk_ops[1]) == ("uncertain", "dependency_uncertain")
        plan_ok, plan_unk = get_plan(sd, ok_intent), get_plan(sd, unk_intent)
        assert plan_ok is not None and plan_ok.intent.status == "delivered"
        assert plan_unk is not None and plan_unk.intent.status == "uncertain"
        view = {r.operation_id: r for r in list_delivery_failures(sd)}
        assert set(view) == {tr_ops[0], tr_ops[1], perm_ops[0], unk_ops[0], unk_ops[1]}
        assert [x for x in view if view[x].retryable] == [tr_ops[0]]
        unk_attempts = get_operation(sd, unk_ops[0])
        assert unk_attempts is not None and unk_attempts.attempt_count == 1
        # the operator retries the transient failure (only that one is allowed)
        assert RetryDelivery(sd, unk_ops[0]).preview().refusal
        assert RetryDelivery(sd, perm_ops[0]).preview().refusal
        RetryDelivery(sd, tr_ops[0]).apply()

    events = _worker(root, "--exit-when-idle")  # a fresh worker process, the provider is back
    assert {e["operation"] for e in events if e["event"] == "claimed"} == set(tr_ops)  # the uncertain not re-sent
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert [_status(sd, x) for x in tr_ops] == [("uploaded", ""), ("delivered", "")]
        plan_tr = get_plan(sd, tr_intent)
        assert plan_tr is not None and plan_tr.intent.status == "delivered"
        again = get_operation(sd, unk_ops[0])
        assert again is not None and again.attempt_count == 1 and again.status == "uncertain"


def test_two_workers_never_run_one_operation_twice(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        ops = [_seed(sd, f"run-{n}", ("send_text",), f"k{n}")[1][0] for n in range(12)]
    cmd = [sys.executable, "-m", "store.mothx.delivery_worker", "--dir", str(root), "--call-seconds", "0.02",
           "--poll", "0.02", "--exit-when-idle"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    claims = [json.loads(line)["operation"] for out, _ in outs for line in out.splitlines()
              if json.loads(line)["event"] == "claimed"]
    assert sorted(claims) == sorted(ops)  # each claimed exactly once
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert {_status(sd, x) for x in ops} == {("delivered", "")}
