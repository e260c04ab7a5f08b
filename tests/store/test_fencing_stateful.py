"""Stateful property test: runtimes, crashes, clock moves and Sessionscope's repairs interleaved at random.

Several simulated runtime processes (each a :class:`LeaseOwner` with its own identity and local locks) admit
runs, step, heartbeat, finish, take leases and crash; the clock jumps; Sessionscope previews and applies
repairs (sometimes with a stale preview). After every step the database must satisfy:

* never two active runs in a session; never an open turn without an active run, never two open turns;
* a run that became terminal never changes status again and has exactly one terminal event;
* lease epochs never go down;
and every repair that commits must have found no valid foreign lease, and must leave the rows the reference
requires (run failed, ``recovered`` event, recovery row completed with the previous epoch, turn closed with a
``turn_end`` entry, epoch bumped, lease released). A runtime write that commits must have held a valid lease.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store.errors import LeaseBusy, LeaseLost, RepairRefused, StoreError
from store.mothx import leases
from store.mothx.leases import LeaseOwner, LeaseSnapshot, acquire, get_lease, renew_all
from store.mothx.recovery import AbandonToolExecutions, RecoverRun, ReleaseExpiredLease
from store.mothx.repairs import RepairPreview
from store.mothx.runs import TERMINAL_STATUSES, list_turns, pending_decisions_conn, read_execution_facts
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import STEP_KINDS, RuntimeSimulator, create_session

T0 = 1_900_000_000
TTL = 15
RUNTIMES = 3
SESSIONS = 2
PERIODIC_TEXT = "execution owner lease expired while run was active"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class FencingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="fencing-"))
        self.sd = open_session_dir(self.tmp / "sessions", create=True)
        self.clock = Clock()
        leases.set_clock(self.clock)
        self.sessions = [create_session(self.sd) for _ in range(SESSIONS)]
        self.owners = [LeaseOwner(pid=10_000 + i) for i in range(RUNTIMES)]
        self.tool = LeaseOwner(pid=1)  # Sessionscope's own process
        self.sims: dict[tuple[int, int], RuntimeSimulator] = {}
        self.terminal: dict[str, str] = {}  # run id -> the terminal status first seen
        self.max_epoch: dict[str, int] = {}
        self.pending: tuple[str, RecoverRun, RepairPreview] | None = None
        self.commits = 0
        self.active: dict[int, str] = {}  # session index -> its active run id (refreshed after every step)
        self.holds: dict[tuple[int, int], leases.LeaseGuard] = {}  # mutation leases runtimes keep for a while

    def teardown(self) -> None:
        try:
            assert self.sd.db.quick_check() == "ok"
        finally:
            leases.set_clock(None)
            self.sd.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # helpers -------------------------------------------------------------------------------------------------------
    def lease_row(self, s: int) -> LeaseSnapshot | None:
        return get_lease(self.sd, self.sessions[s])

    def drop(self, key: tuple[int, int]) -> None:
        sim = self.sims.pop(key, None)
        if sim is not None and sim.guard is not None:
            sim.guard.release()  # frees the local lock; the stale identity writes nothing

    def runtime_write(self, r: int, s: int, action: str) -> None:
        key = (r, s)
        sim = self.sims.get(key)
        if sim is None:
            return
        assert sim.guard is not None
        before = self.lease_row(s)
        held_validly = before is not None and sim.guard.lease.matches(before) and before.valid
        try:
            if action == "step":
                sim.step()
            else:
                sim.finish()
                self.sims.pop(key, None)
        except (LeaseLost, StoreError) as exc:
            assert not held_validly, f"a runtime holding a valid lease was refused: {exc}"
            self.drop(key)
            return
        assert held_validly, "a runtime write committed without a valid lease of its own"

    # runtime rules ---------------------------------------------------------------------------------------------------
    @rule(r=st.integers(0, RUNTIMES - 1), s=st.integers(0, SESSIONS - 1))
    def admit(self, r: int, s: int) -> None:
        if (r, s) in self.sims:
            return
        sim = RuntimeSimulator(self.sd, self.sessions[s], owner=self.owners[r], ttl=TTL)
        try:
            sim.admit()
        except (LeaseBusy, LeaseLost, StoreError):
            return
        self.sims[(r, s)] = sim

    @precondition(lambda self: bool(self.sims))
    @rule(data=st.data(), until=st.sampled_from(STEP_KINDS))
    def step(self, data: st.DataObject, until: str) -> None:
        """Step one runtime until it has done a step of kind ``until`` (a tool call, a pending approval, …)."""
        r, s = data.draw(st.sampled_from(sorted(self.sims)))
        for _ in range(len(STEP_KINDS)):
            sim = self.sims.get((r, s))
            if sim is None:
                return
            self.runtime_write(r, s, "step")
            if STEP_KINDS[(sim.step_no - 1) % len(STEP_KINDS)] == until:
                return

    @precondition(lambda self: bool(self.sims))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        r, s = data.draw(st.sampled_from(sorted(self.sims)))
        self.runtime_write(r, s, "finish")

    @rule(r=st.integers(0, RUNTIMES - 1))
    def heartbeat(self, r: int) -> None:
        lost = renew_all(self.sd, self.owners[r])
        for key in [k for k, sim in self.sims.items() if k[0] == r and sim.guard and any(sim.guard.lease is x for x in lost)]:
            self.drop(key)
        for key in [k for k, g in self.holds.items() if k[0] == r and any(g.lease is x for x in lost)]:
            self.holds.pop(key).release()

    @rule(r=st.integers(0, RUNTIMES - 1))
    def crash(self, r: int) -> None:
        self.owners[r].crash()
        for key in [k for k in self.sims if k[0] == r]:
            self.sims.pop(key)
        for key in [k for k in self.holds if k[0] == r]:
            self.holds.pop(key)

    @rule(r=st.integers(0, RUNTIMES - 1), s=st.integers(0, SESSIONS - 1),
          purpose=st.sampled_from(["mutation", "fork"]))
    def takeover_attempt(self, r: int, s: int, purpose: str) -> None:
        before = self.lease_row(s)
        try:
            guard = acquire(self.sd, self.sessions[s], purpose, owner=self.owners[r], ttl=TTL)
        except (LeaseBusy, StoreError):
            return
        assert before is None or not before.valid or before.owner_instance_id == self.owners[r].instance_id, \
            "took over another owner's valid lease"
        guard.release()

    @rule(r=st.integers(0, RUNTIMES - 1), s=st.integers(0, SESSIONS - 1))
    def hold_mutation(self, r: int, s: int) -> None:
        """A runtime reserves an idle session and keeps the lease across steps (heartbeats may renew it)."""
        if (r, s) in self.holds:
            return
        before = self.lease_row(s)
        try:
            guard = acquire(self.sd, self.sessions[s], "mutation", owner=self.owners[r], ttl=TTL)
        except (LeaseBusy, StoreError):
            return
        assert before is None or not before.valid or before.owner_instance_id == self.owners[r].instance_id, \
            "took over another owner's valid lease"
        self.holds[(r, s)] = guard

    @precondition(lambda self: bool(self.holds))
    @rule(data=st.data())
    def end_hold(self, data: st.DataObject) -> None:
        self.holds.pop(data.draw(st.sampled_from(sorted(self.holds)))).release()

    @rule(seconds=st.sampled_from([1, 3, 7, 14, 15, 16, 40]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.now += seconds

    @precondition(lambda self: bool(self.sims))
    @rule()
    def stall_past_ttl(self) -> None:
        """Runtimes pause (a long GC, a suspended laptop) past their TTL and then carry on writing."""
        self.clock.now += TTL

    @precondition(lambda self: bool(self.sims))
    @rule(data=st.data())
    def crash_and_expire(self, data: st.DataObject) -> None:
        """The common real case: a runtime dies mid-run and its lease runs out."""
        r, _ = data.draw(st.sampled_from(sorted(self.sims)))
        self.crash(r)
        self.clock.now += TTL

    # Sessionscope's repairs --------------------------------------------------------------------------------------------
    def active_run(self, s: int) -> str | None:
        facts = read_execution_facts(self.sd, self.sessions[s])
        return facts.active_runs[0].id if facts.active_runs else None

    def apply_recover(self, s: int, repair: RecoverRun, preview: RepairPreview | None) -> None:
        sid = self.sessions[s]
        before = self.lease_row(s)
        facts = read_execution_facts(self.sd, sid)
        open_turns = [t.id for t in list_turns(self.sd, sid) if t.status == "open"]
        try:
            repair.apply(preview)
        except RepairRefused:
            return
        self.commits += 1
        foreign_valid = before is not None and before.valid and before.owner_instance_id != self.tool.instance_id
        assert not foreign_valid, f"a repair committed under a valid foreign lease: {before}"
        self.check_recovered(s, repair.run_id, before, open_turns)
        assert facts.active_runs and facts.active_runs[0].id == repair.run_id

    def check_recovered(self, s: int, run_id: str, before: LeaseSnapshot | None, open_turns: list[str]) -> None:
        sid = self.sessions[s]
        with self.sd.db.read() as conn:
            status, error = conn.execute("SELECT status, error FROM session_runs WHERE id = ?", (run_id,)).fetchone()
            ev = conn.execute("SELECT event_type, source, data FROM session_run_events WHERE id = ?",
                              (f"recovery_{run_id}_failed",)).fetchone()
            rec = conn.execute("SELECT state, previous_lease_epoch, completed_at FROM session_run_recoveries "
                               "WHERE run_id = ?", (run_id,)).fetchone()
            pending = pending_decisions_conn(conn, run_id)
            ends = {json.loads(d)["turnId"]: seq for seq, d in conn.execute(
                "SELECT seq, data FROM entries WHERE session_id = ? AND type = 'turn_end'", (sid,))}
        assert (status, error) == ("failed", PERIODIC_TEXT)
        assert ev is not None and ev[0] == "recovered" and ev[1] == "agentruntime"
        assert json.loads(ev[2]) == {"reason": PERIODIC_TEXT, "code": "owner_lost"}
        prev = before.epoch if before is not None else 0
        assert rec is not None and rec[0] == "completed" and rec[1] == prev and rec[2] is not None
        assert pending == []
        lease = self.lease_row(s)
        assert lease is not None and (lease.epoch, lease.state, lease.purpose, lease.run_id) == (
            prev + 1, "released", "recovery", run_id)
        turns = {t.id: t for t in list_turns(self.sd, sid)}
        for tid in open_turns:
            assert turns[tid].status == "failed" and turns[tid].end_seq == ends[tid]

    @precondition(lambda self: bool(self.active))
    @rule(data=st.data())
    def recover_now(self, data: st.DataObject) -> None:
        s = data.draw(st.sampled_from(sorted(self.active)))
        repair = RecoverRun(self.sd, self.active[s], owner=self.tool, ttl=TTL)
        self.apply_recover(s, repair, repair.preview())

    @precondition(lambda self: bool(self.active))
    @rule(data=st.data())
    def preview_recover(self, data: st.DataObject) -> None:
        s = data.draw(st.sampled_from(sorted(self.active)))
        repair = RecoverRun(self.sd, self.active[s], owner=self.tool, ttl=TTL)
        self.pending = (self.sessions[s], repair, repair.preview())

    @precondition(lambda self: self.pending is not None)
    @rule()
    def apply_stale_preview(self) -> None:
        assert self.pending is not None
        sid, repair, preview = self.pending
        self.pending = None
        self.apply_recover(self.sessions.index(sid), repair, preview)

    @rule(s=st.integers(0, SESSIONS - 1))
    def release_expired(self, s: int) -> None:
        before = self.lease_row(s)
        active = self.active_run(s)
        try:
            ReleaseExpiredLease(self.sd, self.sessions[s], owner=self.tool, ttl=TTL).apply()
        except RepairRefused:
            return
        self.commits += 1
        assert before is not None and before.state == "active" and not before.valid and active is None
        after = self.lease_row(s)
        assert after is not None and (after.epoch, after.state) == (before.epoch + 1, "released")

    @rule(s=st.integers(0, SESSIONS - 1))
    def abandon_tools(self, s: int) -> None:
        turns = list_turns(self.sd, self.sessions[s])
        if not turns:
            return
        before = self.lease_row(s)
        active = self.active_run(s)
        try:
            AbandonToolExecutions(self.sd, self.sessions[s], turns[-1].id, owner=self.tool, ttl=TTL).apply()
        except RepairRefused:
            return
        self.commits += 1
        assert before is None or not before.valid
        assert active is None

    # invariants ------------------------------------------------------------------------------------------------------
    @invariant()
    def database_invariants(self) -> None:
        with self.sd.db.read() as conn:
            runs = conn.execute("SELECT id, session_id, status FROM session_runs").fetchall()
            terminal_events = dict(conn.execute(
                "SELECT run_id, count(*) FROM session_run_events WHERE event_type IN ('recovered', 'run_finished') "
                "GROUP BY run_id").fetchall())
            open_turns = conn.execute("SELECT session_id, count(*) FROM conversation_turns WHERE status = 'open' "
                                      "GROUP BY session_id").fetchall()
            epochs = conn.execute("SELECT session_id, epoch FROM session_runtime_leases").fetchall()
        active_by_session: dict[str, int] = {}
        for run_id, session_id, status in runs:
            if status in TERMINAL_STATUSES:
                first = self.terminal.setdefault(run_id, status)
                assert status == first, f"run {run_id} terminalized twice: {first} then {status}"
                assert terminal_events.get(run_id) == 1, f"run {run_id} has {terminal_events.get(run_id)} terminal events"
            else:
                assert run_id not in self.terminal, f"run {run_id} left its terminal status"
                active_by_session[session_id] = active_by_session.get(session_id, 0) + 1
                assert terminal_events.get(run_id) is None
        assert all(n == 1 for n in active_by_session.values()), "two active runs in one session"
        self.active = {i: rid for rid, sid, status in runs if status not in TERMINAL_STATUSES
                       for i, s in enumerate(self.sessions) if s == sid}
        for session_id, n in open_turns:
            assert n == 1 and session_id in active_by_session, "an open turn without its active run"
        for session_id, epoch in epochs:
            assert epoch >= self.max_epoch.get(session_id, 0), "a lease epoch went down"
            self.max_epoch[session_id] = epoch


FencingMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestFencing = FencingMachine.TestCase
