"""Recover an orphaned run exactly as the runtime's recovery does (reference 11.2), as an operator's action.

* ``trigger_source`` is ``operator`` (the reference leaves the strings open). The reason follows the
  reference's table 11.4: by default the periodic scan's (``owner_lost``, "execution owner lease expired while
  run was active", run → ``failed``), since an operator recovers exactly what a periodic scan would once the
  lease expired; with ``user_stop=True`` the user-stop row (``cancelled_by_user_after_owner_loss``, run →
  ``cancelled``). An operator's retry does not wait for ``next_retry_at`` (like the admission trigger).
* Transactions, in order: (1) the ``recovery`` lease (CAS takeover fenced on the previewed epoch, epoch + 1);
  (2) re-read facts, verify the lease is exactly ours, and the ``session_run_recoveries`` upsert
  (``recovering``, attempt, ``previous_lease_epoch``); (3) the decision (step 6):
  * ``keep_remote`` for a remote-retainable run (``source = 'responses_background'`` and a linked
    ``response_runs`` row — same session, ``local_turn_id`` = the run id — with ``response_id``, ``provider``
    and ``api = 'openai-responses'``): the recovery row → ``detached_remote``; the run stays active, no event,
    no ``turn_end``;
  * ``fail_local`` otherwise, the converge transaction: one ``approval_resolved`` / ``question_resolved`` event
    per pending decision (id ``recovery_decision_<runID>_<decisionID>``, source ``agentruntime``, status
    ``cancelled``, data ``{"decisionId", "value": "deny_once" (approvals only), "reason", "code"}``), the run →
    terminal with ``error`` = the reason text, the ``recovered`` event (id ``recovery_<runID>_<status>``, data
    ``{"reason", "code"}``), a ``turn_end`` entry per open turn of the run (``parentId`` = the leaf, checked;
    ``status`` = the run's new status, ``stopReason`` = the reason code) with its ``conversation_turns`` row
    closed (``end_seq`` = that entry's seq), and the recovery row → ``completed``;
  (4) the recovery lease released (a tombstone), whichever the decision. A failure in (3) rolls it back whole
  and marks the row ``failed`` with ``last_error`` and ``next_retry_at = now + backoff`` (1 s doubling per
  attempt, capped at 60 s), fenced by the same lease.
* A decision's id is the first non-empty of ``decisionId``, ``approvalId``, ``questionId``, ``requestId``, ``id``
  in the event data (the reference does not name the field).
* A run, lease, recovery, linked response, decision-event or open-turn row holding damaged values refuses the
  repair before anything is written.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from store.errors import LeaseLost, RepairRefused, StoreError
from store.mothx import repair_kit as kit
from store.mothx.execution import ExecutionFacts, read_facts_conn, remote_retainable
from store.mothx.lease_guard import LeaseGuard
from store.mothx.lease_model import LEASE_TTL_S, LeaseOwner, publish_state_changed, sqlite_now
from store.mothx.lease_store import check_fence
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.mothx.run_events import (
    NewRunEvent,
    decision_events_conn,
    insert_run_event,
    pending_from_events,
    recovery_decision_event_id,
    recovery_event_id,
)
from store.mothx.run_model import ConversationTurn, PendingDecision, Run
from store.mothx.run_store import get_run_conn, transition_run
from store.mothx.sessiondir import SessionDir
from store.mothx.turns import close_turn, leaf_id, open_turns_of_run
from store.safetext import one_line
from store.words import plural

TRIGGER_OPERATOR = "operator"
RECOVERY_SOURCE = "agentruntime"
BACKOFF_START_S = 1
BACKOFF_CAP_S = 60

# trigger -> (reason code, reason text, terminal status), reference 11.4
REASONS: dict[str, tuple[str, str, str]] = {
    "startup": ("owner_lost", "server restarted while run was active", "failed"),
    "periodic": ("owner_lost", "execution owner lease expired while run was active", "failed"),
    "admission": ("owner_lost", "run remained active when the session became available for a new local execution",
                  "failed"),
    "user_stop": ("cancelled_by_user_after_owner_loss", "run cancelled by user after its execution owner was lost",
                  "cancelled"),
}


FAILURE_WRITE_BUDGET_S = 5.0
"""How long persisting a failed recovery may wait for the write lock (reference 11.2 step 8: its own 5 s)."""

class RecoveryFailed(StoreError):
    """Recovery began but could not converge; the recovery row was marked ``failed`` with a retry time."""


def recovery_backoff(attempt: int) -> int:
    """Seconds before the next retry after failed attempt ``attempt`` (1 s, doubling, capped at 60 s)."""
    if attempt > 8:  # 2 ** 7 is past the cap already; never raise 2 to a huge stored attempt
        return BACKOFF_CAP_S
    return min(BACKOFF_CAP_S, BACKOFF_START_S * 2 ** max(0, attempt - 1))


@dataclass(frozen=True)
class _RunFacts:
    run: Run | None
    facts: ExecutionFacts | None
    pending: tuple[PendingDecision, ...]
    turns: tuple[ConversationTurn, ...]
    leaf: str | None
    problems: tuple[str, ...] = ()  # damaged cells of every row the recovery would act on

    def content(self) -> object:
        run, facts = self.run, self.facts
        return {
            "run": [run.id, run.session_id, run.status, run.source] if run else None,
            "active": [r.id for r in facts.active_runs] if facts else [],
            "exists": facts.session_exists if facts else False,
            "pending": [[p.decision_id, p.last_event_id] for p in self.pending],
            "turns": [t.id for t in self.turns],
            "leaf": self.leaf,
            "response": ([facts.response_run.id, facts.response_run.state, facts.response_run.response_id]
                         if facts and facts.response_run else None),
            "problems": list(self.problems),
        }

    def control(self) -> object:
        facts = self.facts
        rec = facts.recovery if facts else None
        return {
            "lease": kit.lease_fact(facts.lease if facts else None),
            "recovery": [rec.state, rec.attempt, rec.updated_at] if rec else None,
        }


def _read_run_facts(conn: sqlite3.Connection, run_id: str) -> _RunFacts:
    run = get_run_conn(conn, run_id)
    if run is None:
        return _RunFacts(None, None, (), (), None)
    facts = read_facts_conn(conn, run.session_id)
    problems = list(run.problems) + [p for p in facts.problems if p not in run.problems]
    pending: tuple[PendingDecision, ...] = ()
    turns: tuple[ConversationTurn, ...] = ()
    if run.active:
        events = decision_events_conn(conn, run_id)
        pending = tuple(pending_from_events(events))
        turns = tuple(open_turns_of_run(conn, run))
        problems += [p for ev in events for p in ev.problems] + [p for t in turns for p in t.problems]
    return _RunFacts(run, facts, pending, turns, leaf_id(conn, run.session_id), tuple(problems))


class RecoverRun(kit.LeasedRepair):
    """Recover an orphaned run exactly as the runtime's recovery does (reference 11.2)."""

    id = "recover-run"
    title = "Recover an orphaned run"

    def __init__(self, sd: SessionDir, run_id: str, *, user_stop: bool = False, owner: LeaseOwner | None = None,
                 ttl: int = LEASE_TTL_S) -> None:
        super().__init__(sd, owner=owner, ttl=ttl)
        self.run_id = run_id
        self.user_stop = user_stop
        self.trigger_source = TRIGGER_OPERATOR
        self.reason_code, self.reason_text, self.target_status = REASONS["user_stop" if user_stop else "periodic"]

    # preview ---------------------------------------------------------------------------------------------------
    def _refusal(self, rf: _RunFacts) -> str:
        run, facts = rf.run, rf.facts
        if run is None or facts is None:
            return f"run {one_line(self.run_id)} does not exist."
        rid, sid = one_line(run.id), one_line(run.session_id)
        damage = kit.damage_refusal(f"run {rid}", rf.problems)
        if damage:
            return damage
        if not run.active:
            return f"run {rid} is no longer active (status {one_line(run.status)})."
        if not facts.session_exists:
            return f"session {sid} of run {rid} does not exist."
        ids = [r.id for r in facts.active_runs]
        if ids != [run.id]:
            return (f"session {sid} has {len(ids)} active runs ({one_line(', '.join(ids))}); recovery needs "
                    f"exactly run {rid}.")
        return kit.refuse_foreign(run.session_id, facts.lease)

    def _plan(self, rf: _RunFacts) -> tuple[list[PlannedChange], list[str]]:
        run, facts = rf.run, rf.facts
        assert run is not None and facts is not None
        sid = run.session_id
        lease = facts.lease
        rec = facts.recovery
        prev_epoch = lease.epoch if lease is not None else 0
        attempt = (rec.attempt + 1) if rec is not None else 1
        changes = kit.lease_changes(sid, lease, "recovery")[:1]
        notes: list[str] = []
        changes.append(PlannedChange(
            "row", "session_run_recoveries", run.id, "upsert",
            f"state recovering, attempt {attempt}, previous_lease_epoch {prev_epoch}, "
            f"trigger_source {self.trigger_source}, reason_code {self.reason_code}"))
        if remote_retainable(run, facts.response_run):
            changes.append(PlannedChange("row", "session_run_recoveries", one_line(run.id), "update",
                                         "state detached_remote (the run continues at the provider)"))
            notes.append(f"run {one_line(run.id)} is a background Responses run with a remote response: it stays "
                         f"{one_line(run.status)} and is left to reattach (keep_remote).")
        else:
            for p in rf.pending:
                value = ", value deny_once" if p.event_type == "approval_resolved" else ""
                changes.append(PlannedChange(
                    "run_event", "session_run_events", one_line(recovery_decision_event_id(run.id, p.decision_id)), "insert",
                    f"{p.event_type} status cancelled{value} for pending decision {one_line(p.decision_id)}"))
            changes.append(PlannedChange("row", "session_runs", one_line(run.id), "update",
                                         f"status {one_line(run.status)} → {self.target_status}, error '{self.reason_text}'"))
            changes.append(PlannedChange(
                "run_event", "session_run_events", recovery_event_id(run.id, self.target_status), "insert",
                f"recovered (source {RECOVERY_SOURCE}) data {{reason: '{self.reason_text}', code: '{self.reason_code}'}}"))
            parent = rf.leaf
            for turn in rf.turns:
                changes.append(PlannedChange(
                    "entry", "entries", "(new id)", "append",
                    f"turn_end for turn {one_line(turn.id)} (status {self.target_status}, parentId {one_line(parent)})"))
                changes.append(PlannedChange("row", "conversation_turns", one_line(turn.id), "update",
                                             f"status open → {self.target_status}, end_seq = the turn_end entry"))
                parent = "(the turn_end above)"
            changes.append(PlannedChange("row", "session_run_recoveries", one_line(run.id), "update", "state completed"))
            if not rf.turns:
                notes.append("the run has no open conversation turn.")
        changes.append(kit.lease_changes(sid, lease, "recovery")[1])
        if rec is not None and rec.state == "failed":
            notes.append(f"attempt {rec.attempt} failed: {one_line(rec.last_error) or 'no error recorded'}.")
        if lease is not None and lease.state == "active" and not lease.valid:
            notes.append(f"the owner's lease expired: {lease.describe()}.")
        return changes, notes

    def preview(self) -> RepairPreview:
        with self.sd.db.read() as conn:
            rf = _read_run_facts(conn, self.run_id)
        refusal = self._refusal(rf)
        changes: list[PlannedChange] = []
        notes: list[str] = []
        if rf.run is not None and rf.facts is not None and rf.run.active and rf.facts.session_exists:
            changes, notes = self._plan(rf)
        content = fingerprint(rf.content())
        preview = RepairPreview(
            repair_id=self.id, title=self.title, session_id=rf.run.session_id if rf.run else "",
            target=f"run {one_line(self.run_id)}", changes=tuple(changes) if not refusal else (), notes=tuple(notes),
            refusal=refusal, fingerprint=fingerprint(content, rf.control()), content_fingerprint=content,
        )
        self._last = preview
        return preview

    # apply -----------------------------------------------------------------------------------------------------
    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        expected = self.expected_preview(expected)
        step("recover.check")
        with self.sd.db.read() as conn:
            rf = _read_run_facts(conn, self.run_id)
        kit.refuse_if_moved(self._refusal(rf), expected, fingerprint(fingerprint(rf.content()), rf.control()),
                            f"the facts of run {one_line(self.run_id)}")
        assert rf.run is not None and rf.facts is not None
        run, sid = rf.run, rf.run.session_id
        prev_epoch = rf.facts.lease.epoch if rf.facts.lease is not None else 0
        step("recover.acquire")
        guard = self.acquire_lease(sid, "recovery", f"run {one_line(run.id)}", expected_epoch=prev_epoch,
                                   expected_run_id=run.id)
        try:
            return self._recover(guard, run, prev_epoch, expected)
        finally:
            step("recover.release")
            guard.release()

    def _recover(self, guard: LeaseGuard, run: Run, prev_epoch: int, expected: RepairPreview) -> RepairResult:
        sid = run.session_id
        lease = guard.lease
        done: list[PlannedChange] = [PlannedChange("lease", "session_runtime_leases", one_line(sid), "update",
                                                   f"recovery lease at epoch {lease.epoch}")]
        step("recover.begin")
        with self.sd.db.write() as conn:
            check_fence(conn, lease, purpose="recovery", run_id=run.id)
            rf = _read_run_facts(conn, run.id)
            if fingerprint(rf.content()) != expected.content_fingerprint:
                raise RepairRefused(f"Refused: the facts of run {one_line(run.id)} changed since the preview; preview it again.")
            assert rf.facts is not None
            now = sqlite_now(conn)
            step("recover.begin.upsert")
            conn.execute(
                "INSERT INTO session_run_recoveries (run_id, session_id, state, trigger_source, reason_code, attempt, "
                "previous_lease_epoch, last_error, next_retry_at, started_at, updated_at, completed_at) "
                "VALUES (?, ?, 'recovering', ?, ?, 1, ?, '', NULL, ?, ?, NULL) "
                "ON CONFLICT(run_id) DO UPDATE SET session_id = excluded.session_id, state = excluded.state, "
                "trigger_source = excluded.trigger_source, reason_code = excluded.reason_code, "
                "attempt = attempt + 1, previous_lease_epoch = excluded.previous_lease_epoch, last_error = '', "
                "next_retry_at = NULL, started_at = excluded.started_at, updated_at = excluded.updated_at, "
                "completed_at = NULL",
                (run.id, sid, self.trigger_source, self.reason_code, prev_epoch, now, now),
            )
            attempt = int(conn.execute("SELECT attempt FROM session_run_recoveries WHERE run_id = ?",
                                       (run.id,)).fetchone()[0])
            step("recover.begin.commit")
        done.append(PlannedChange("row", "session_run_recoveries", one_line(run.id), "upsert",
                                  f"recovering, attempt {attempt}, previous_lease_epoch {prev_epoch}"))
        step("recover.begun")
        keep_remote = remote_retainable(run, rf.facts.response_run)
        try:
            if keep_remote:
                done.append(self._keep_remote(guard, run))
                return RepairResult(self.id, sid, f"run {one_line(run.id)}", tuple(done),
                                    f"Run {one_line(run.id)} continues at the provider (keep_remote): it stays {one_line(run.status)}, "
                                    "and its recovery record is detached_remote.", lease.epoch)
            converged = self._converge(guard, run, rf)
        except (StoreError, sqlite3.Error) as exc:
            self._mark_failed(guard, run, attempt, exc)
            raise RecoveryFailed(
                f"Recovery of run {one_line(run.id)} failed ({one_line(exc)}); the recovery record is marked failed and may be retried "
                f"after {recovery_backoff(attempt)} s."
            ) from exc
        done.extend(converged)
        publish_state_changed(lease, self.target_status, "recovering")
        return RepairResult(self.id, sid, f"run {one_line(run.id)}", tuple(done),
                            f"Run {one_line(run.id)} recovered: {self.target_status} ({self.reason_code}), "
                            f"{plural(len(rf.turns), 'turn')} closed, {plural(len(rf.pending), 'decision')} cancelled.", lease.epoch)

    def _keep_remote(self, guard: LeaseGuard, run: Run) -> PlannedChange:
        """Step 6's ``keep_remote``: the recovery row → ``detached_remote``; the run, its turns and events stay."""
        step("recover.keep_remote")
        with self.sd.db.write() as conn:
            check_fence(conn, guard.lease, purpose="recovery", run_id=run.id)
            now = sqlite_now(conn)
            cur = conn.execute("UPDATE session_run_recoveries SET state = 'detached_remote', updated_at = ? "
                               "WHERE run_id = ? AND state = 'recovering'", (now, run.id))
            if cur.rowcount != 1:
                raise StoreError(f"the recovery record of run {one_line(run.id)} is no longer 'recovering'")
        step("recover.kept_remote")
        return PlannedChange("row", "session_run_recoveries", one_line(run.id), "update", "detached_remote")

    def _converge(self, guard: LeaseGuard, run: Run, begun: _RunFacts) -> list[PlannedChange]:
        lease = guard.lease
        sid = run.session_id
        done: list[PlannedChange] = []
        step("recover.converge")
        with self.sd.db.write() as conn:
            check_fence(conn, lease, purpose="recovery", run_id=run.id)
            rf = _read_run_facts(conn, run.id)
            if rf.content() != begun.content():
                raise StoreError(f"run {one_line(run.id)} changed while its recovery began")
            now = sqlite_now(conn)
            for p in rf.pending:
                data: dict[str, object] = {"decisionId": p.decision_id}
                if p.event_type == "approval_resolved":
                    data["value"] = "deny_once"
                data.update({"reason": self.reason_text, "code": self.reason_code})
                eid = recovery_decision_event_id(run.id, p.decision_id)
                insert_run_event(conn, NewRunEvent(id=eid, session_id=sid, run_id=run.id, event_type=p.event_type,
                                                   source=RECOVERY_SOURCE, status="cancelled",
                                                   data=json.dumps(data, separators=(",", ":"))))
                done.append(PlannedChange("run_event", "session_run_events", one_line(eid), "insert", f"{p.event_type} cancelled"))
                step("recover.converge.decision")
            transition_run(conn, run.id, self.target_status, lease, error=self.reason_text)
            done.append(PlannedChange("row", "session_runs", one_line(run.id), "update", f"{one_line(run.status)} → {self.target_status}"))
            step("recover.converge.run")
            eid = recovery_event_id(run.id, self.target_status)
            insert_run_event(conn, NewRunEvent(  # a deterministic id: re-writing it is a no-op
                id=eid, session_id=sid, run_id=run.id, event_type="recovered", source=RECOVERY_SOURCE,
                status=self.target_status,
                data=json.dumps({"reason": self.reason_text, "code": self.reason_code}, separators=(",", ":"))))
            done.append(PlannedChange("run_event", "session_run_events", one_line(eid), "insert", "recovered"))
            step("recover.converge.event")
            parent = rf.leaf
            for turn in rf.turns:
                entry = close_turn(conn, turn, self.target_status, run_id=run.id, stop_reason=self.reason_code,
                                   expected_parent=parent)
                parent = entry.id
                done.append(PlannedChange("entry", "entries", entry.id, "append", f"turn_end for turn {one_line(turn.id)}"))
                done.append(PlannedChange("row", "conversation_turns", turn.id, "update",
                                          f"closed {self.target_status} at seq {entry.seq}"))
                step("recover.converge.turn")
            cur = conn.execute(
                "UPDATE session_run_recoveries SET state = 'completed', completed_at = ?, updated_at = ?, "
                "last_error = '', next_retry_at = NULL WHERE run_id = ? AND state = 'recovering'",
                (now, now, run.id),
            )
            if cur.rowcount != 1:
                raise StoreError(f"the recovery record of run {one_line(run.id)} is no longer 'recovering'")
            done.append(PlannedChange("row", "session_run_recoveries", one_line(run.id), "update", "completed"))
            step("recover.converge.commit")
        step("recover.converged")
        return done

    def _mark_failed(self, guard: LeaseGuard, run: Run, attempt: int, exc: BaseException) -> None:
        """Persist the failure under the same fenced recovery owner (best effort: a lost lease writes nothing),
        with its own :data:`FAILURE_WRITE_BUDGET_S` (reference 11.2 step 8)."""
        message = str(exc)
        try:
            with self.sd.db.write(budget=FAILURE_WRITE_BUDGET_S) as conn:
                check_fence(conn, guard.lease, purpose="recovery", run_id=run.id)
                now = sqlite_now(conn)
                conn.execute(
                    "UPDATE session_run_recoveries SET state = 'failed', last_error = ?, next_retry_at = ?, "
                    "updated_at = ? WHERE run_id = ?",
                    (message, now + recovery_backoff(attempt), now, run.id),
                )
        except (StoreError, LeaseLost, sqlite3.Error):
            pass
