"""Kill the repairing process at every step of a repair; the database must stay whole and recoverable.

A repair runs in a child process with ``SESSIONSCOPE_REPAIR_STEPS=pause:<k>``: it stops at its k-th step
(between two statements, sometimes inside an open write transaction) and is SIGKILLed there. Afterwards
``PRAGMA quick_check`` must say ``ok``, the invariants must hold (one active run at most; a run is either
untouched or fully recovered — status, ``recovered`` event, cancelled decision, closed turn, completed record
together), and a later repair must finish the job with the rows the reference requires.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from store.mothx.leases import LeaseOwner, clock_override, get_lease, sqlite_now
from store.mothx.recovery import AbandonToolExecutions, RecoverRun, ReleaseExpiredLease
from store.mothx.repairs import STEP_ENV
from store.mothx.runs import get_recovery, get_run, list_run_events, list_turns
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import RuntimeSimulator, create_session

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import sys
from store.mothx.sessiondir import open_session_dir
from store.mothx.repairs import make_repair
sd = open_session_dir(sys.argv[1])
kind = sys.argv[2]
if kind == "recover-run":
    repair = make_repair(sd, kind, run_id=sys.argv[3])
else:
    repair = make_repair(sd, kind, session_id=sys.argv[3], turn_id=sys.argv[4])
repair.apply(repair.preview())
sd.close()
print("DONE", flush=True)
"""


@dataclass(frozen=True)
class Template:
    root: Path
    session_id: str
    run_id: str
    turn_id: str


def _orphan(root: Path, steps: int) -> Template:
    """A run whose runtime died 100 s ago (its lease long expired on the real clock)."""
    sd = open_session_dir(root, create=True)
    try:
        sid = create_session(sd)
        with sd.db.read() as conn:
            past = sqlite_now(conn) - 100
        sim = RuntimeSimulator(sd, sid, owner=LeaseOwner(pid=424242))
        sim.admit(now=past)
        for _ in range(steps):
            sim.step(now=past)
        assert sim.turn is not None
        return Template(root, sid, sim.run_id, sim.turn.id)
    finally:
        sd.close()


@pytest.fixture(scope="module")
def recover_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return _orphan(tmp_path_factory.mktemp("recover") / "sessions", steps=4)  # a pending approval, an open turn


@pytest.fixture(scope="module")
def tools_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    t = _orphan(tmp_path_factory.mktemp("tools") / "sessions", steps=2)  # a running tool record
    sd = open_session_dir(t.root)
    try:
        with sd.db.write() as conn:  # a second interrupted record of the same turn
            conn.execute(
                "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
                "VALUES (?, ?, 'k2', 'p', 'a', 'call_2', 'function', 'write', 'h', 'interrupted', 1, 'x')",
                (t.session_id, t.turn_id))
        RecoverRun(sd, t.run_id).apply()
    finally:
        sd.close()
    return t


def _copy(t: Template, dest: Path) -> Template:
    shutil.copytree(t.root, dest)
    return Template(dest, t.session_id, t.run_id, t.turn_id)


def _child(t: Template, kind: str, steps: str) -> subprocess.Popen[str]:
    args = [t.run_id] if kind == "recover-run" else [t.session_id, t.turn_id]
    env = {**os.environ, "PYTHONPATH": str(REPO), STEP_ENV: steps}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(t.root), kind, *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _list_steps(t: Template, kind: str) -> list[str]:
    proc = _child(t, kind, "list")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "DONE" in out, err
    return [line.split(" ", 2)[2] for line in err.splitlines() if line.startswith("STEP ")]


def _kill_at(t: Template, kind: str, k: int) -> str:
    proc = _child(t, kind, f"pause:{k}")
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line.startswith("PAUSED ") or not line:
            break
    assert line.startswith(f"PAUSED {k} "), f"child did not pause at step {k}: {line!r} {proc.communicate()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return line.split(" ", 2)[2].strip()


@pytest.fixture
def opened() -> Iterator[list[SessionDir]]:
    dirs: list[SessionDir] = []
    yield dirs
    for d in dirs:
        d.close()


def _common_invariants(sd: SessionDir) -> None:
    assert sd.db.quick_check() == "ok"
    with sd.db.read() as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        per_session = conn.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM session_runs WHERE status IN ('created', 'queued', "
            "'running', 'waiting_for_approval', 'waiting_for_question', 'cancelling', 'terminalizing') "
            "GROUP BY session_id)").fetchone()[0]
        assert (per_session or 0) <= 1


def _recovered_state(sd: SessionDir, t: Template) -> tuple[bool, bool, bool, bool, bool]:
    """(run failed, recovered event, decision cancelled, turn closed with turn_end, record completed)."""
    run = get_run(sd, t.run_id)
    events = {e.id: e for e in list_run_events(sd, run_id=t.run_id)}
    turn = next(x for x in list_turns(sd, t.session_id) if x.id == t.turn_id)
    with sd.db.read() as conn:
        ends = [json.loads(d) for (d,) in conn.execute(
            "SELECT data FROM entries WHERE session_id = ? AND type = 'turn_end'", (t.session_id,))]
    rec = get_recovery(sd, t.run_id)
    return (
        run is not None and run.status == "failed",
        f"recovery_{t.run_id}_failed" in events,
        f"recovery_decision_{t.run_id}_approval3" in events,
        turn.status == "failed" and any(e["turnId"] == t.turn_id for e in ends),
        rec is not None and rec.state == "completed",
    )


def test_recovery_survives_a_kill_at_every_step(recover_template: Template, tmp_path: Path,
                                               opened: list[SessionDir]) -> None:
    steps = _list_steps(_copy(recover_template, tmp_path / "listing"), "recover-run")
    assert {"recover.acquire", "recover.begin.upsert", "recover.converge.run", "recover.converge.turn",
            "recover.converge.commit", "recover.release"} <= set(steps)
    for k in range(1, len(steps) + 1):
        t = _copy(recover_template, tmp_path / f"k{k}")
        name = _kill_at(t, "recover-run", k)
        assert name == steps[k - 1]
        sd = open_session_dir(t.root)
        opened.append(sd)
        _common_invariants(sd)
        done = _recovered_state(sd, t)
        assert all(done) or not any(done), f"killed at {name}: a partial recovery {done}"
        rec_before = get_recovery(sd, t.run_id)
        assert rec_before is None or rec_before.state in ("recovering", "completed")
        lease = get_lease(sd, t.session_id)
        assert lease is not None and lease.epoch in (1, 2)
        with sd.db.read() as conn:
            later = sqlite_now(conn) + 100  # past the TTL of a recovery lease the killed process kept
        with clock_override(later):
            if not all(done):
                RecoverRun(sd, t.run_id).apply()
                rec = get_recovery(sd, t.run_id)
                assert rec is not None
                assert rec.attempt == (2 if rec_before is not None else 1), name
                assert rec.previous_lease_epoch == lease.epoch
                after = get_lease(sd, t.session_id)
                assert after is not None and (after.epoch, after.state) == (lease.epoch + 1, "released")
            elif lease.state == "active":  # converged, but killed before the tombstone
                ReleaseExpiredLease(sd, t.session_id).apply()
        assert all(_recovered_state(sd, t)), name
        assert get_lease(sd, t.session_id).state == "released"  # type: ignore[union-attr]
        _common_invariants(sd)


def test_abandoning_tools_survives_a_kill_at_every_step(tools_template: Template, tmp_path: Path,
                                                       opened: list[SessionDir]) -> None:
    steps = _list_steps(_copy(tools_template, tmp_path / "listing"), "abandon-tools")
    assert steps.count("tools.row") == 2
    for k in range(1, len(steps) + 1):
        t = _copy(tools_template, tmp_path / f"k{k}")
        name = _kill_at(t, "abandon-tools", k)
        sd = open_session_dir(t.root)
        opened.append(sd)
        _common_invariants(sd)
        with sd.db.read() as conn:
            states = sorted(s for (s,) in conn.execute("SELECT execution_state FROM tool_execution_records"))
        assert states in (["interrupted", "running"], ["abandoned", "abandoned"]), f"killed at {name}: {states}"
        with sd.db.read() as conn:
            later = sqlite_now(conn) + 100
        with clock_override(later):
            if states[0] != "abandoned":
                AbandonToolExecutions(sd, t.session_id, t.turn_id).apply()
            elif get_lease(sd, t.session_id).state == "active":  # type: ignore[union-attr]
                ReleaseExpiredLease(sd, t.session_id).apply()
        with sd.db.read() as conn:
            states = [s for (s,) in conn.execute("SELECT execution_state FROM tool_execution_records")]
        assert states == ["abandoned", "abandoned"]
        _common_invariants(sd)
