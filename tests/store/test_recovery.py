"""Repairs: orphan recovery against a real killed runtime process, refusals, tool records, expired leases."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import ReadOnlyStore, RepairRefused, StoreError
from store.mothx import repairs
from store.mothx.db import OpenMode
from store.mothx.leases import LeaseOwner, acquire_lease, clock_override, get_lease, renew_lease, sqlite_now
from store.mothx.recovery import (
    AbandonToolExecutions,
    RecoverRun,
    RecoveryFailed,
    ReleaseExpiredLease,
    RequestToolRecovery,
    list_interrupted_tools,
    recovery_backoff,
)
from store.mothx.runs import get_recovery, get_run, inspect_execution, list_run_events, list_turns, read_execution_facts
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import RuntimeSimulator, create_session

REPO = Path(__file__).resolve().parents[2]
PERIODIC_TEXT = "execution owner lease expired while run was active"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


@pytest.fixture
def sid(sd: SessionDir) -> str:
    return create_session(sd)


# --- a real runtime process -------------------------------------------------------------------------------------------


class SimProcess:
    """``python -m store.mothx.simulator`` as a child process whose JSON lines are read by a thread."""

    def __init__(self, root: Path, session_id: str, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "store.mothx.simulator", "--dir", str(root), "--session", session_id, *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[dict[str, object]] = queue.Queue()
        self.seen: list[dict[str, object]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def wait_for(self, event: str, timeout: float = 30.0) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                obj = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    err = self.proc.stderr.read() if self.proc.stderr else ""
                    raise AssertionError(f"simulator exited {self.proc.returncode} before '{event}': {err}") from None
                continue
            self.seen.append(obj)
            if obj["event"] == event:
                return obj
        raise AssertionError(f"simulator did not report '{event}' in time; saw {self.seen}")

    def first(self, event: str) -> dict[str, object]:
        return next(o for o in self.seen if o["event"] == event)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def spawn(sd: SessionDir) -> Iterator[object]:
    procs: list[SimProcess] = []

    def start(session_id: str, *args: str) -> SimProcess:
        p = SimProcess(sd.root, session_id, *args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()


def _wait_until(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _entries(sd: SessionDir, sid: str) -> list[dict[str, object]]:
    with sd.db.read() as conn:
        return [json.loads(d) | {"_seq": s} for s, d in
                conn.execute("SELECT seq, data FROM entries WHERE session_id = ? ORDER BY seq", (sid,))]


def test_recover_a_killed_runtime_exactly_as_the_reference(sd: SessionDir, sid: str, spawn: object) -> None:
    sim = spawn(sid, "--ttl", "3", "--heartbeat", "0.2", "--append-interval", "0.01", "--steps", "50",  # type: ignore[operator]
                "--hang-at", "4")
    started = sim.wait_for("started")
    hang = sim.wait_for("hang")
    run_id = str(hang["run"])
    epoch = int(str(sim.first("acquired")["epoch"]))
    owner_id, pid = str(started["owner"]), sim.proc.pid

    acquired_at = get_lease(sd, sid).acquired_at  # type: ignore[union-attr]
    _wait_until(lambda: get_lease(sd, sid).heartbeat_at > acquired_at)  # type: ignore[union-attr]  # it heartbeats

    # While the runtime lives, the repair is refused and names the holder; nothing is written.
    repair = RecoverRun(sd, run_id)
    preview = repair.preview()
    assert not preview.allowed and owner_id in preview.refusal and f"pid {pid}" in preview.refusal
    with pytest.raises(RepairRefused) as refused:
        repair.apply(preview)
    assert owner_id in str(refused.value) and "purpose execution" in str(refused.value)
    assert get_recovery(sd, run_id) is None
    assert get_run(sd, run_id).status == "waiting_for_approval"  # type: ignore[union-attr]
    assert get_lease(sd, sid).epoch == epoch  # type: ignore[union-attr]

    sim.kill()
    _wait_until(lambda: inspect_execution(sd, sid).state == "orphaned")  # the lease TTL runs out for real
    leaf_before = _entries(sd, sid)[-1]["id"]
    turn_id = str(sim.first("run_created")["turn"])

    preview = repair.preview()
    assert preview.allowed, preview.refusal
    assert (preview.rows, preview.run_events, preview.entries, preview.lease_changes) == (4, 2, 1, 2)
    result = repair.apply(preview)
    assert result.lease_epoch == epoch + 1

    run = get_run(sd, run_id)
    assert run is not None and run.status == "failed" and run.error == PERIODIC_TEXT and run.finished_at
    events = {e.id: e for e in list_run_events(sd, run_id=run_id)}
    terminal = events[f"recovery_{run_id}_failed"]
    assert (terminal.event_type, terminal.source) == ("recovered", "agentruntime")
    assert json.loads(terminal.data) == {"reason": PERIODIC_TEXT, "code": "owner_lost"}
    decision = events[f"recovery_decision_{run_id}_approval3"]
    assert (decision.event_type, decision.status) == ("approval_resolved", "cancelled")
    assert json.loads(decision.data)["value"] == "deny_once"
    rec = get_recovery(sd, run_id)
    assert rec is not None
    assert (rec.state, rec.attempt, rec.previous_lease_epoch, rec.trigger_source, rec.reason_code) == (
        "completed", 1, epoch, "operator", "owner_lost")
    assert rec.completed_at is not None and rec.next_retry_at is None
    turn = next(t for t in list_turns(sd, sid) if t.id == turn_id)
    entries = _entries(sd, sid)
    turn_end = entries[-1]
    assert turn_end["type"] == "turn_end" and turn_end["parentId"] == leaf_before
    assert (turn_end["turnId"], turn_end["runId"], turn_end["status"]) == (turn_id, run_id, "failed")
    assert (turn.status, turn.end_seq) == ("failed", turn_end["_seq"])
    lease = get_lease(sd, sid)
    assert lease is not None
    assert (lease.epoch, lease.state, lease.purpose, lease.run_id) == (epoch + 1, "released", "recovery", run_id)
    assert inspect_execution(sd, sid).state == "idle"
    assert sd.db.quick_check() == "ok"


def test_recovery_then_interrupted_tools_after_kill(sd: SessionDir, sid: str, spawn: object) -> None:
    sim = spawn(sid, "--ttl", "2", "--heartbeat", "0.2", "--append-interval", "0.01", "--steps", "50",  # type: ignore[operator]
                "--hang-at", "2")
    hang = sim.wait_for("hang")
    run_id, turn_id = str(hang["run"]), str(sim.first("run_created")["turn"])
    sim.kill()
    with sd.db.read() as conn:
        later = sqlite_now(conn) + 60
    with clock_override(later):  # advance past the TTL instead of waiting for it
        tools = list_interrupted_tools(sd, sid)
        assert [(r.provider_call_id, r.execution_state) for r in tools.records] == [(f"call_{run_id}_1", "running")]
        assert [c.call_id for c in tools.dangling_calls] == [f"call_{run_id}_1"] and tools.turn_id == turn_id
        abandon = AbandonToolExecutions(sd, sid, turn_id)
        assert "recover it first" in abandon.preview().refusal
        RecoverRun(sd, run_id).apply()
        assert get_run(sd, run_id).status == "failed"  # type: ignore[union-attr]

        before = _entries(sd, sid)
        preview = abandon.preview()
        assert preview.allowed and preview.rows == 1
        assert not any("nothing is written" in n for n in preview.notes)  # the call has a record
        abandon.apply(preview)
        assert _entries(sd, sid) == before  # no fake tool output, no entry at all
        assert list_interrupted_tools(sd, sid, turn_id).records == ()
        with sd.db.read() as conn:
            states = conn.execute("SELECT execution_state FROM tool_execution_records ORDER BY id").fetchall()
        assert [s[0] for s in states] == ["abandoned"]
        assert "no interrupted tool execution record" in abandon.preview().refusal


def test_simulator_completes_runs_and_leaves_a_tombstone(sd: SessionDir, sid: str, spawn: object) -> None:
    sim = spawn(sid, "--runs", "2", "--steps", "7", "--append-interval", "0")  # type: ignore[operator]
    sim.wait_for("done")
    assert sim.proc.wait(timeout=10) == 0
    runs = [o for o in sim.seen if o["event"] == "run_finished"]
    assert [o["status"] for o in runs] == ["completed", "completed"]
    for o in runs:
        run = get_run(sd, str(o["run"]))
        assert run is not None and run.status == "completed"
        assert f"run_{o['run']}_completed" in {e.id for e in list_run_events(sd, run_id=str(o["run"]))}
    lease = get_lease(sd, sid)
    assert lease is not None and (lease.epoch, lease.state, lease.purpose) == (2, "released", "execution")
    assert [t.status for t in list_turns(sd, sid)] == ["completed", "completed"]
    assert inspect_execution(sd, sid).state == "idle"


# --- in-process scenarios --------------------------------------------------------------------------------------------

T0 = 1_900_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Iterator[Clock]:
    c = Clock()
    with clock_override(c):
        yield c


def _orphan(sd: SessionDir, sid: str, steps: int = 4) -> tuple[RuntimeSimulator, LeaseOwner]:
    owner = LeaseOwner(pid=999_999)
    sim = RuntimeSimulator(sd, sid, owner=owner)
    sim.admit()
    for _ in range(steps):
        sim.step()
    owner.crash()
    return sim, owner


def _state(sd: SessionDir, sid: str) -> tuple[tuple[tuple[object, ...], ...], ...]:
    with sd.db.read() as conn:
        return tuple(
            tuple(conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
            for t in ("session_runs", "session_run_events", "session_run_recoveries", "entries",
                      "conversation_turns", "session_runtime_leases", "tool_execution_records")
        )


def test_refused_when_facts_changed_since_preview(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, _ = _orphan(sd, sid)
    clock.now += 60
    repair = RecoverRun(sd, sim.run_id)
    preview = repair.preview()
    assert preview.allowed
    with sd.db.write() as conn:  # a foreign writer appends after the preview
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES "
                     "(?, 'feedfeedfeedfeed', 'message', NULL, 'x', '{}')", (sid,))
    snapshot = _state(sd, sid)
    with pytest.raises(RepairRefused, match="changed since the preview"):
        repair.apply(preview)
    assert _state(sd, sid) == snapshot


def test_refused_when_run_no_longer_active(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    sim = RuntimeSimulator(sd, sid, owner=owner)
    sim.admit()
    clock.now += 20  # expired: the preview allows
    preview = RecoverRun(sd, sim.run_id).preview()
    assert preview.allowed
    renew_lease(sd, sim.guard.lease, owner=owner)  # type: ignore[union-attr]  # the runtime was alive after all
    with pytest.raises(RepairRefused, match=owner.instance_id):
        RecoverRun(sd, sim.run_id).apply(preview)
    sim.finish()
    with pytest.raises(RepairRefused, match="no longer active"):
        RecoverRun(sd, sim.run_id).apply(preview)
    assert get_recovery(sd, sim.run_id) is None


def test_failed_convergence_marks_the_row_failed_with_backoff_then_retry(sd: SessionDir, sid: str,
                                                                         clock: Clock) -> None:
    sim, _ = _orphan(sd, sid)
    clock.now += 60

    def foreign_append(name: str) -> None:
        if name == "recover.begun":
            with sd.db.write() as conn:
                conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES "
                             "(?, lower(hex(randomblob(8))), 'message', NULL, 'x', '{}')", (sid,))

    repairs.set_step_hook(foreign_append)
    try:
        with pytest.raises(RecoveryFailed, match="retried after 1 s"):
            RecoverRun(sd, sim.run_id).apply()
    finally:
        repairs.set_step_hook(None)
    rec = get_recovery(sd, sim.run_id)
    assert rec is not None and (rec.state, rec.attempt, rec.next_retry_at) == ("failed", 1, clock.now + 1)
    assert "changed" in rec.last_error
    assert get_run(sd, sim.run_id).status == "waiting_for_approval"  # type: ignore[union-attr]
    lease = get_lease(sd, sid)
    assert lease is not None and (lease.epoch, lease.state) == (2, "released")
    state = inspect_execution(sd, sid)
    assert (state.state, state.recovery_action) == ("recovery_failed", "retry_recovery")

    RecoverRun(sd, sim.run_id).apply()  # an operator retries at once
    rec = get_recovery(sd, sim.run_id)
    assert rec is not None and (rec.state, rec.attempt, rec.previous_lease_epoch) == ("completed", 2, 2)


def test_backoff_doubles_and_caps() -> None:
    assert [recovery_backoff(a) for a in range(1, 10)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_user_stop_variant_cancels(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, _ = _orphan(sd, sid, steps=1)
    clock.now += 60
    RecoverRun(sd, sim.run_id, user_stop=True).apply()
    run = get_run(sd, sim.run_id)
    assert run is not None and run.status == "cancelled"
    ev = {e.id: e for e in list_run_events(sd, run_id=sim.run_id)}[f"recovery_{sim.run_id}_cancelled"]
    assert json.loads(ev.data) == {"reason": "run cancelled by user after its execution owner was lost",
                                   "code": "cancelled_by_user_after_owner_loss"}
    assert get_recovery(sd, sim.run_id).reason_code == "cancelled_by_user_after_owner_loss"  # type: ignore[union-attr]


def test_remote_retainable_run_is_detached_not_failed(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, _ = _orphan(sd, sid, steps=0)
    with sd.db.write() as conn:
        conn.execute("UPDATE session_runs SET source = 'responses_background' WHERE id = ?", (sim.run_id,))
        conn.execute("INSERT INTO response_runs (session_id, local_run_id, local_turn_id, response_id, provider, api, "
                     "state, created_at, updated_at) VALUES (?, 'prov_run_1', ?, 'resp_1', 'openai', "
                     "'openai-responses', 'in_progress', 'x', 'x')", (sid, sim.run_id))
    clock.now += 60
    assert inspect_execution(sd, sid).state == "detached_remote"
    RecoverRun(sd, sim.run_id).apply()
    assert get_run(sd, sim.run_id).status == "running"  # type: ignore[union-attr]
    assert get_recovery(sd, sim.run_id).state == "detached_remote"  # type: ignore[union-attr]


def test_preview_lists_exactly_what_apply_writes(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, _ = _orphan(sd, sid)
    clock.now += 60
    repair = RecoverRun(sd, sim.run_id)
    preview = repair.preview()
    before = _state(sd, sid)
    result = repair.apply()
    after = _state(sd, sid)
    new_events = set(after[1]) - set(before[1])
    new_entries = set(after[3]) - set(before[3])
    assert len(new_events) == preview.run_events and len(new_entries) == preview.entries
    planned_events = {c.key for c in preview.changes if c.kind == "run_event"}
    assert {e[1] for e in new_events} == planned_events
    assert {c.key for c in result.changes if c.kind == "run_event"} == planned_events


# --- tool records -----------------------------------------------------------------------------------------------------


def _tool_orphan(sd: SessionDir, sid: str, clock: Clock) -> tuple[RuntimeSimulator, str]:
    sim, _ = _orphan(sd, sid, steps=2)  # stops right after a toolCall with a running record
    turn = sim.turn.id  # type: ignore[union-attr]
    with sd.db.write() as conn:  # a second, already completed record of the same turn
        conn.execute("INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                     "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
                     "VALUES (?, ?, 'k-done', 'p', 'a', 'call_done', 'function', 'read', 'h', 'completed', 0, 'x')",
                     (sid, turn))
    clock.now += 60
    RecoverRun(sd, sim.run_id).apply()
    return sim, turn


def test_request_tool_recovery_marks_chosen_calls_only(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, turn = _tool_orphan(sd, sid, clock)
    call = f"call_{sim.run_id}_1"
    with pytest.raises(StoreError):
        RequestToolRecovery(sd, sid, turn, [])
    refused = RequestToolRecovery(sd, sid, turn, ["call_done"]).preview()
    assert "no interrupted tool execution record" in refused.refusal
    RequestToolRecovery(sd, sid, turn, [call]).apply()
    with sd.db.read() as conn:
        rows = dict(conn.execute("SELECT provider_call_id, execution_state FROM tool_execution_records"))
    assert rows == {call: "retry_requested", "call_done": "completed"}
    # still interrupted (not completed): it can be abandoned later instead
    assert [r.execution_state for r in list_interrupted_tools(sd, sid, turn).records] == ["retry_requested"]


def test_abandon_refused_under_a_valid_foreign_lease(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, turn = _tool_orphan(sd, sid, clock)
    holder = LeaseOwner()
    acquire_lease(sd, sid, "mutation", owner=holder)
    preview = AbandonToolExecutions(sd, sid, turn).preview()
    assert holder.instance_id in preview.refusal
    with pytest.raises(RepairRefused, match=holder.instance_id):
        AbandonToolExecutions(sd, sid, turn).apply()


# --- expired lease release ------------------------------------------------------------------------------------------


def test_release_expired_lease(sd: SessionDir, sid: str, clock: Clock) -> None:
    crashed = LeaseOwner()
    acquire_lease(sd, sid, "admission", owner=crashed)
    holder = crashed.instance_id
    crashed.crash()
    repair = ReleaseExpiredLease(sd, sid)
    assert "valid until" in repair.preview().refusal and holder in repair.preview().refusal
    clock.now += 15
    preview = repair.preview()
    assert preview.allowed and preview.lease_changes == 2
    result = repair.apply(preview)
    lease = get_lease(sd, sid)
    assert lease is not None and (lease.state, lease.epoch, lease.purpose) == ("released", 2, "mutation")
    assert result.lease_epoch == 2
    assert "already released" in ReleaseExpiredLease(sd, sid).preview().refusal


def test_release_refused_when_epoch_moved_since_preview(sd: SessionDir, sid: str, clock: Clock) -> None:
    crashed = LeaseOwner()
    acquire_lease(sd, sid, "mutation", owner=crashed)
    crashed.crash()
    clock.now += 15
    preview = ReleaseExpiredLease(sd, sid).preview()
    other = LeaseOwner()
    acquire_lease(sd, sid, "fork", owner=other)  # someone took it over meanwhile
    clock.now += 15
    with pytest.raises(RepairRefused, match="changed since the preview"):
        ReleaseExpiredLease(sd, sid).apply(preview)
    assert get_lease(sd, sid).owner_instance_id == other.instance_id  # type: ignore[union-attr]


def test_release_refused_for_an_active_run_and_without_a_row(sd: SessionDir, sid: str, clock: Clock) -> None:
    assert "no lease row" in ReleaseExpiredLease(sd, sid).preview().refusal
    sim, _ = _orphan(sd, sid, steps=0)
    clock.now += 60
    assert f"recover-run {sim.run_id}" in ReleaseExpiredLease(sd, sid).preview().refusal


# --- modes and catalogue ----------------------------------------------------------------------------------------------


def test_every_repair_refuses_in_read_modes(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim, _ = _orphan(sd, sid, steps=2)
    clock.now += 60
    ro = open_session_dir(sd.root, OpenMode.READ_ONLY)
    try:
        for repair in (RecoverRun(ro, sim.run_id), ReleaseExpiredLease(ro, sid),
                       AbandonToolExecutions(ro, sid, sim.turn.id)):  # type: ignore[union-attr]
            repair.preview()  # reading is fine
            with pytest.raises(ReadOnlyStore, match="read-only"):
                repair.apply()
    finally:
        ro.close()
    assert get_recovery(sd, sim.run_id) is None


def test_catalogue_and_suggestions(sd: SessionDir, sid: str, clock: Clock) -> None:
    assert [s.id for s in repairs.list_repairs()] == ["recover-run", "release-lease", "abandon-tools",
                                                       "request-tool-recovery"]
    sim, _ = _orphan(sd, sid, steps=2)
    repair = repairs.make_repair(sd, "recover-run", run_id=sim.run_id)
    assert isinstance(repair, repairs.Repair) and isinstance(repair, RecoverRun)
    with pytest.raises(StoreError, match="needs turn_id"):
        repairs.make_repair(sd, "abandon-tools", session_id=sid)
    assert repairs.suggest_repairs(sd) == []  # the runtime's lease is still valid
    clock.now += 60
    suggested = repairs.suggest_repairs(sd)
    assert [(s.repair_id, s.targets) for s in suggested] == [("recover-run", (("run_id", sim.run_id),))]
    suggested[0].make(sd).apply()
    after = repairs.suggest_repairs(sd)
    assert [(s.repair_id, dict(s.targets)["turn_id"]) for s in after] == [("abandon-tools", sim.turn.id)]  # type: ignore[union-attr]
    as_json = repairs.make_repair(sd, "abandon-tools", session_id=sid, turn_id=sim.turn.id).preview().to_json()  # type: ignore[union-attr]
    assert as_json["allowed"] is True and as_json["counts"] == {"rows": 1, "run_events": 0, "entries": 0,
                                                                "lease_changes": 2}
    assert read_execution_facts(sd, sid).active_runs == ()
