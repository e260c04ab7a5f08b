"""Fenced repairs: orphan recovery (reference 11.2), interrupted tool executions, expired-lease release.

Every repair calls ``sd.require_writable()`` first and works under a lease taken through :mod:`store.mothx.leases`
(``recovery`` for a run, ``mutation`` for the others), so a live runtime always wins: a valid foreign lease
refuses the repair and names its holder.

Recovery as Sessionscope does it (an operator's explicit action):

* ``trigger_source`` is ``operator`` (the reference leaves the strings open). The reason follows the
  reference's table 11.4: by default the periodic scan's (``owner_lost``, "execution owner lease expired while
  run was active", run → ``failed``), since an operator recovers exactly what a periodic scan would once the
  lease expired; with ``user_stop=True`` the user-stop row (``cancelled_by_user_after_owner_loss``, run →
  ``cancelled``). An operator's retry does not wait for ``next_retry_at`` (like the admission trigger).
* Transactions, in order: (1) the ``recovery`` lease (CAS takeover fenced on the previewed epoch, epoch + 1);
  (2) re-read facts + the ``session_run_recoveries`` upsert (``recovering``, attempt, ``previous_lease_epoch``);
  (3) the converge transaction: one ``approval_resolved`` / ``question_resolved`` event per pending decision
  (id ``recovery_decision_<runID>_<decisionID>``, source ``agentruntime``, status ``cancelled``, data
  ``{"decisionId", "value": "deny_once" (approvals only), "reason", "code"}``), the run → terminal with
  ``error`` = the reason text, the ``recovered`` event (id ``recovery_<runID>_<status>``, data
  ``{"reason", "code"}``), a ``turn_end`` entry per open turn of the run (``parentId`` = the leaf, checked;
  ``status`` = the run's new status, ``stopReason`` = the reason code) with its ``conversation_turns`` row
  closed (``end_seq`` = that entry's seq), and the recovery row → ``completed``; (4) the lease released
  (tombstone). A failure in (3) rolls it back whole and marks the row ``failed`` with ``last_error`` and
  ``next_retry_at = now + backoff`` (1 s doubling per attempt, capped at 60 s), fenced by the same lease.
* A decision's id is the first non-empty of ``decisionId``, ``approvalId``, ``questionId``, ``requestId``, ``id``
  in the event data (the reference does not name the field).

Tool executions: the repairs only ever change ``tool_execution_records.execution_state`` (to ``abandoned`` or
``retry_requested``) of records that are not ``completed``/``failed``/``abandoned``. ``completed_at`` is left as
it is (its encoding is not specified), no tool is run and nothing is appended to the transcript: a ``toolCall``
without a ``toolResult`` stays so, and is only reported.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from store.errors import LeaseBusy, LeaseLost, RepairRefused, SessionNotFound, StoreError
from store.mothx.leases import (
    LEASE_TTL_S,
    LeaseEpochChanged,
    LeaseGuard,
    LeaseOwner,
    LeaseSnapshot,
    acquire,
    check_fence,
    list_leases,
    publish_state_changed,
    sqlite_now,
)
from store.mothx.repairs import PlannedChange, RepairPreview, RepairResult, SuggestedRepair, fingerprint, step
from store.mothx.runs import (
    NON_TERMINAL_STATUSES,
    ConversationTurn,
    ExecutionFacts,
    NewRunEvent,
    PendingDecision,
    Run,
    close_turn,
    get_run_conn,
    insert_run_event,
    leaf_id,
    list_orphaned,
    open_turns_of_run,
    pending_decisions_conn,
    read_facts_conn,
    recovery_decision_event_id,
    recovery_event_id,
    remote_retainable,
    transition_run,
    turns_conn,
)
from store.mothx.sessiondir import SessionDir

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

TOOL_DONE_STATES = ("completed", "failed", "abandoned")


class RecoveryFailed(StoreError):
    """Recovery began but could not converge; the recovery row was marked ``failed`` with a retry time."""


def recovery_backoff(attempt: int) -> int:
    """Seconds before the next retry after failed attempt ``attempt`` (1 s, doubling, capped at 60 s)."""
    return min(BACKOFF_CAP_S, BACKOFF_START_S * 2 ** max(0, attempt - 1))


def _lease_fact(lease: LeaseSnapshot | None) -> object:
    if lease is None:
        return None
    return [lease.owner_instance_id, lease.token_hash, lease.epoch, lease.state, lease.valid]


def _refuse_foreign(session_id: str, lease: LeaseSnapshot | None) -> str:
    if lease is not None and lease.valid:
        return f"session {session_id} is {lease.describe()}; a repair never acts under another owner's valid lease."
    return ""


def _lease_changes(session_id: str, lease: LeaseSnapshot | None, purpose: str) -> list[PlannedChange]:
    old = lease.epoch if lease is not None else 0
    new = old + 1
    how = "insert epoch 1" if lease is None else f"take over epoch {old} → {new}"
    return [
        PlannedChange("lease", "session_runtime_leases", session_id, "insert" if lease is None else "update",
                      f"{how} as a {purpose} lease held by this process"),
        PlannedChange("lease", "session_runtime_leases", session_id, "update",
                      f"release epoch {new} (state 'released', a tombstone row)"),
    ]


def _map_acquire_error(exc: StoreError, what: str) -> RepairRefused:
    if isinstance(exc, LeaseEpochChanged):
        return RepairRefused(f"Refused: the facts of {what} changed since the preview ({exc}); preview it again.")
    text = str(exc)
    return RepairRefused(f"Refused: {text[:1].lower()}{text[1:]}")


# ---------------------------------------------------------------------------------------------------------------
# Recover an orphaned run


@dataclass(frozen=True)
class _RunFacts:
    run: Run | None
    facts: ExecutionFacts | None
    pending: tuple[PendingDecision, ...]
    turns: tuple[ConversationTurn, ...]
    leaf: str | None

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
        }

    def control(self) -> object:
        facts = self.facts
        rec = facts.recovery if facts else None
        return {
            "lease": _lease_fact(facts.lease if facts else None),
            "recovery": [rec.state, rec.attempt, rec.updated_at] if rec else None,
        }


def _read_run_facts(conn: sqlite3.Connection, run_id: str) -> _RunFacts:
    run = get_run_conn(conn, run_id)
    if run is None:
        return _RunFacts(None, None, (), (), None)
    facts = read_facts_conn(conn, run.session_id)
    pending = tuple(pending_decisions_conn(conn, run_id)) if run.active else ()
    turns = tuple(open_turns_of_run(conn, run)) if run.active else ()
    return _RunFacts(run, facts, pending, turns, leaf_id(conn, run.session_id))


class RecoverRun:
    """Recover an orphaned run exactly as the runtime's recovery does (reference 11.2)."""

    id = "recover-run"
    title = "Recover an orphaned run"

    def __init__(self, sd: SessionDir, run_id: str, *, user_stop: bool = False, owner: LeaseOwner | None = None,
                 ttl: int = LEASE_TTL_S) -> None:
        self.sd = sd
        self.run_id = run_id
        self.user_stop = user_stop
        self.owner = owner
        self.ttl = ttl
        self.trigger_source = TRIGGER_OPERATOR
        self.reason_code, self.reason_text, self.target_status = REASONS["user_stop" if user_stop else "periodic"]
        self._last: RepairPreview | None = None

    # preview ---------------------------------------------------------------------------------------------------
    def _refusal(self, rf: _RunFacts) -> str:
        run, facts = rf.run, rf.facts
        if run is None or facts is None:
            return f"run {self.run_id} does not exist."
        if not run.active:
            return f"run {run.id} is no longer active (status {run.status})."
        if not facts.session_exists:
            return f"session {run.session_id} of run {run.id} does not exist."
        ids = [r.id for r in facts.active_runs]
        if ids != [run.id]:
            return (f"session {run.session_id} has {len(ids)} active runs ({', '.join(ids)}); recovery needs exactly "
                    f"run {run.id}.")
        return _refuse_foreign(run.session_id, facts.lease)

    def _plan(self, rf: _RunFacts) -> tuple[list[PlannedChange], list[str]]:
        run, facts = rf.run, rf.facts
        assert run is not None and facts is not None
        sid = run.session_id
        lease = facts.lease
        rec = facts.recovery
        prev_epoch = lease.epoch if lease is not None else 0
        attempt = (rec.attempt + 1) if rec is not None else 1
        changes = _lease_changes(sid, lease, "recovery")[:1]
        notes: list[str] = []
        changes.append(PlannedChange(
            "row", "session_run_recoveries", run.id, "upsert",
            f"state recovering, attempt {attempt}, previous_lease_epoch {prev_epoch}, "
            f"trigger_source {self.trigger_source}, reason_code {self.reason_code}"))
        if remote_retainable(run, facts.response_run):
            changes.append(PlannedChange("row", "session_run_recoveries", run.id, "update",
                                         "state detached_remote (the run continues at the provider)"))
            notes.append(f"run {run.id} is a background Responses run with a remote response: it stays "
                         f"{run.status} and is left to reattach (keep_remote).")
        else:
            for p in rf.pending:
                value = ", value deny_once" if p.event_type == "approval_resolved" else ""
                changes.append(PlannedChange(
                    "run_event", "session_run_events", recovery_decision_event_id(run.id, p.decision_id), "insert",
                    f"{p.event_type} status cancelled{value} for pending decision {p.decision_id}"))
            changes.append(PlannedChange("row", "session_runs", run.id, "update",
                                         f"status {run.status} → {self.target_status}, error '{self.reason_text}'"))
            changes.append(PlannedChange(
                "run_event", "session_run_events", recovery_event_id(run.id, self.target_status), "insert",
                f"recovered (source {RECOVERY_SOURCE}) data {{reason: '{self.reason_text}', code: '{self.reason_code}'}}"))
            parent = rf.leaf
            for turn in rf.turns:
                changes.append(PlannedChange(
                    "entry", "entries", "(new id)", "append",
                    f"turn_end for turn {turn.id} (status {self.target_status}, parentId {parent})"))
                changes.append(PlannedChange("row", "conversation_turns", turn.id, "update",
                                             f"status open → {self.target_status}, end_seq = the turn_end entry"))
                parent = "(the turn_end above)"
            changes.append(PlannedChange("row", "session_run_recoveries", run.id, "update", "state completed"))
            if not rf.turns:
                notes.append("the run has no open conversation turn.")
        changes.append(_lease_changes(sid, lease, "recovery")[1])
        if rec is not None and rec.state == "failed":
            notes.append(f"attempt {rec.attempt} failed: {rec.last_error or 'no error recorded'}.")
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
            target=f"run {self.run_id}", changes=tuple(changes) if not refusal else (), notes=tuple(notes),
            refusal=refusal, fingerprint=fingerprint(content, rf.control()), content_fingerprint=content,
        )
        self._last = preview
        return preview

    # apply -----------------------------------------------------------------------------------------------------
    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        self.sd.require_writable()
        expected = expected or self._last or self.preview()
        step("recover.check")
        with self.sd.db.read() as conn:
            rf = _read_run_facts(conn, self.run_id)
        refusal = self._refusal(rf)
        if refusal:
            raise RepairRefused(f"Refused: {refusal}")
        if expected.refusal or fingerprint(fingerprint(rf.content()), rf.control()) != expected.fingerprint:
            raise RepairRefused(f"Refused: the facts of run {self.run_id} changed since the preview; preview it again.")
        assert rf.run is not None and rf.facts is not None
        run, sid = rf.run, rf.run.session_id
        prev_epoch = rf.facts.lease.epoch if rf.facts.lease is not None else 0
        step("recover.acquire")
        try:
            guard = acquire(self.sd, sid, "recovery", expected_run_id=run.id, expected_epoch=prev_epoch,
                            ttl=self.ttl, owner=self.owner)
        except (LeaseBusy, SessionNotFound) as exc:
            raise _map_acquire_error(exc, f"run {run.id}") from exc
        try:
            return self._recover(guard, run, prev_epoch, expected)
        finally:
            step("recover.release")
            guard.release()

    def _recover(self, guard: LeaseGuard, run: Run, prev_epoch: int, expected: RepairPreview) -> RepairResult:
        sid = run.session_id
        lease = guard.lease
        done: list[PlannedChange] = [PlannedChange("lease", "session_runtime_leases", sid, "update",
                                                   f"recovery lease at epoch {lease.epoch}")]
        step("recover.begin")
        with self.sd.db.write() as conn:
            check_fence(conn, lease, purpose="recovery", run_id=run.id)
            rf = _read_run_facts(conn, run.id)
            if fingerprint(rf.content()) != expected.content_fingerprint:
                raise RepairRefused(f"Refused: the facts of run {run.id} changed since the preview; preview it again.")
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
        done.append(PlannedChange("row", "session_run_recoveries", run.id, "upsert",
                                  f"recovering, attempt {attempt}, previous_lease_epoch {prev_epoch}"))
        step("recover.begun")
        if remote_retainable(run, rf.facts.response_run):
            with self.sd.db.write() as conn:
                check_fence(conn, lease, purpose="recovery", run_id=run.id)
                now = sqlite_now(conn)
                conn.execute("UPDATE session_run_recoveries SET state = 'detached_remote', updated_at = ? "
                             "WHERE run_id = ?", (now, run.id))
            done.append(PlannedChange("row", "session_run_recoveries", run.id, "update", "detached_remote"))
            return RepairResult(self.id, sid, f"run {run.id}", tuple(done),
                                f"Run {run.id} continues at the provider; recovery record detached_remote.",
                                lease.epoch)
        try:
            converged = self._converge(guard, run, rf)
        except (StoreError, sqlite3.Error) as exc:
            self._mark_failed(guard, run, attempt, exc)
            raise RecoveryFailed(
                f"Recovery of run {run.id} failed ({exc}); the recovery record is marked failed and may be retried "
                f"after {recovery_backoff(attempt)} s."
            ) from exc
        done.extend(converged)
        publish_state_changed(lease, self.target_status, "recovering")
        return RepairResult(self.id, sid, f"run {run.id}", tuple(done),
                            f"Run {run.id} recovered: {self.target_status} ({self.reason_code}), "
                            f"{len(rf.turns)} turn(s) closed, {len(rf.pending)} decision(s) cancelled.", lease.epoch)

    def _converge(self, guard: LeaseGuard, run: Run, begun: _RunFacts) -> list[PlannedChange]:
        lease = guard.lease
        sid = run.session_id
        done: list[PlannedChange] = []
        step("recover.converge")
        with self.sd.db.write() as conn:
            check_fence(conn, lease, purpose="recovery", run_id=run.id)
            rf = _read_run_facts(conn, run.id)
            if rf.content() != begun.content():
                raise StoreError(f"run {run.id} changed while its recovery began")
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
                done.append(PlannedChange("run_event", "session_run_events", eid, "insert", f"{p.event_type} cancelled"))
                step("recover.converge.decision")
            transition_run(conn, run.id, self.target_status, lease, error=self.reason_text)
            done.append(PlannedChange("row", "session_runs", run.id, "update", f"{run.status} → {self.target_status}"))
            step("recover.converge.run")
            eid = recovery_event_id(run.id, self.target_status)
            insert_run_event(conn, NewRunEvent(  # a deterministic id: re-writing it is a no-op
                id=eid, session_id=sid, run_id=run.id, event_type="recovered", source=RECOVERY_SOURCE,
                status=self.target_status,
                data=json.dumps({"reason": self.reason_text, "code": self.reason_code}, separators=(",", ":"))))
            done.append(PlannedChange("run_event", "session_run_events", eid, "insert", "recovered"))
            step("recover.converge.event")
            parent = rf.leaf
            for turn in rf.turns:
                entry = close_turn(conn, turn, self.target_status, run_id=run.id, stop_reason=self.reason_code,
                                   expected_parent=parent)
                parent = entry.id
                done.append(PlannedChange("entry", "entries", entry.id, "append", f"turn_end for turn {turn.id}"))
                done.append(PlannedChange("row", "conversation_turns", turn.id, "update",
                                          f"closed {self.target_status} at seq {entry.seq}"))
                step("recover.converge.turn")
            cur = conn.execute(
                "UPDATE session_run_recoveries SET state = 'completed', completed_at = ?, updated_at = ?, "
                "last_error = '', next_retry_at = NULL WHERE run_id = ? AND state = 'recovering'",
                (now, now, run.id),
            )
            if cur.rowcount != 1:
                raise StoreError(f"the recovery record of run {run.id} is no longer 'recovering'")
            done.append(PlannedChange("row", "session_run_recoveries", run.id, "update", "completed"))
            step("recover.converge.commit")
        step("recover.converged")
        return done

    def _mark_failed(self, guard: LeaseGuard, run: Run, attempt: int, exc: BaseException) -> None:
        """Persist the failure under the same fenced recovery owner (best effort: a lost lease writes nothing)."""
        message = str(exc)
        try:
            with self.sd.db.write() as conn:
                check_fence(conn, guard.lease, purpose="recovery", run_id=run.id)
                now = sqlite_now(conn)
                conn.execute(
                    "UPDATE session_run_recoveries SET state = 'failed', last_error = ?, next_retry_at = ?, "
                    "updated_at = ? WHERE run_id = ?",
                    (message, now + recovery_backoff(attempt), now, run.id),
                )
        except (StoreError, LeaseLost, sqlite3.Error):
            pass


# ---------------------------------------------------------------------------------------------------------------
# Release an expired lease


class ReleaseExpiredLease:
    """Take over a session's expired lease (a ``mutation`` lease, fenced on the previewed epoch) and release it."""

    id = "release-lease"
    title = "Release an expired lease"

    def __init__(self, sd: SessionDir, session_id: str, *, owner: LeaseOwner | None = None,
                 ttl: int = LEASE_TTL_S) -> None:
        self.sd = sd
        self.session_id = session_id
        self.owner = owner
        self.ttl = ttl
        self._last: RepairPreview | None = None

    def _read(self) -> ExecutionFacts:
        with self.sd.db.read() as conn:
            return read_facts_conn(conn, self.session_id)

    def _refusal(self, facts: ExecutionFacts) -> str:
        sid = self.session_id
        lease = facts.lease
        if not facts.session_exists:
            return f"session {sid} does not exist."
        if lease is None:
            return f"session {sid} has no lease row."
        if lease.state != "active":
            return f"session {sid}'s lease is already released (epoch {lease.epoch} is a tombstone)."
        foreign = _refuse_foreign(sid, lease)
        if foreign:
            return foreign
        if facts.active_runs:
            run = facts.active_runs[0]
            return (f"session {sid} has an active run {run.id} ({run.status}); recover the run instead "
                    f"(recover-run {run.id}).")
        return ""

    @staticmethod
    def _facts(facts: ExecutionFacts) -> object:
        lease = facts.lease
        return [_lease_fact(lease), lease.expires_at if lease else None, [r.id for r in facts.active_runs],
                facts.session_exists]

    def preview(self) -> RepairPreview:
        facts = self._read()
        refusal = self._refusal(facts)
        changes: tuple[PlannedChange, ...] = ()
        notes: tuple[str, ...] = ()
        if not refusal:
            assert facts.lease is not None
            changes = tuple(_lease_changes(self.session_id, facts.lease, "mutation"))
            notes = (f"the lease was {facts.lease.describe()}.",)
        fp = fingerprint(self._facts(facts))
        preview = RepairPreview(self.id, self.title, self.session_id, f"lease of session {self.session_id}",
                                changes, notes, refusal, fp, fp)
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        self.sd.require_writable()
        expected = expected or self._last or self.preview()
        step("release.check")
        facts = self._read()
        refusal = self._refusal(facts)
        if refusal:
            raise RepairRefused(f"Refused: {refusal}")
        if expected.refusal or fingerprint(self._facts(facts)) != expected.fingerprint:
            raise RepairRefused(
                f"Refused: the lease of session {self.session_id} changed since the preview; preview it again.")
        assert facts.lease is not None
        old = facts.lease
        step("release.acquire")
        try:
            # The takeover is the fenced re-read: CAS on the previewed epoch inside its write transaction.
            guard = acquire(self.sd, self.session_id, "mutation", expected_epoch=old.epoch, ttl=self.ttl,
                            owner=self.owner)
        except (LeaseBusy, SessionNotFound) as exc:
            raise _map_acquire_error(exc, f"the lease of session {self.session_id}") from exc
        step("release.release")
        guard.release()
        changes = (
            PlannedChange("lease", "session_runtime_leases", self.session_id, "update",
                          f"took over epoch {old.epoch} → {guard.lease.epoch} (mutation)"),
            PlannedChange("lease", "session_runtime_leases", self.session_id, "update",
                          f"released epoch {guard.lease.epoch} (tombstone)"),
        )
        return RepairResult(self.id, self.session_id, f"lease of session {self.session_id}", changes,
                            f"Released the expired lease of session {self.session_id} (held by "
                            f"{old.owner_instance_id}); the tombstone is at epoch {guard.lease.epoch}.",
                            guard.lease.epoch)


# ---------------------------------------------------------------------------------------------------------------
# Interrupted tool executions


@dataclass(frozen=True)
class ToolExecution:
    """One ``tool_execution_records`` row."""

    id: int
    session_id: str
    local_turn_id: str
    execution_key: str
    provider: str
    api: str
    provider_call_id: str
    tool_kind: str
    tool_name: str
    execution_state: str
    side_effecting: bool
    created_at: str
    completed_at: str | None


@dataclass(frozen=True)
class DanglingToolCall:
    """A ``toolCall`` block of the turn with no ``toolResult`` answering it."""

    entry_id: str
    entry_seq: int
    call_id: str
    tool_name: str


@dataclass(frozen=True)
class InterruptedTools:
    session_id: str
    turn_id: str  # the turn the transcript was scanned in ('' = none found)
    records: tuple[ToolExecution, ...]  # interrupted records (of turn_id, or of the whole session)
    dangling_calls: tuple[DanglingToolCall, ...]


_TOOL_COLUMNS = (
    "id, session_id, local_turn_id, execution_key, provider, api, provider_call_id, tool_kind, tool_name, "
    "execution_state, side_effecting, created_at, completed_at"
)


def _tool(row: tuple) -> ToolExecution:
    return ToolExecution(
        id=int(row[0]), session_id=str(row[1]), local_turn_id=str(row[2] or ""), execution_key=str(row[3] or ""),
        provider=str(row[4] or ""), api=str(row[5] or ""), provider_call_id=str(row[6] or ""),
        tool_kind=str(row[7] or ""), tool_name=str(row[8] or ""), execution_state=str(row[9] or ""),
        side_effecting=bool(row[10]), created_at=str(row[11] or ""),
        completed_at=None if row[12] is None else str(row[12]),
    )


def _interrupted_records(conn: sqlite3.Connection, session_id: str, turn_id: str | None) -> list[ToolExecution]:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='tool_execution_records'").fetchone() is None:
        return []
    where = "session_id = ? AND execution_state NOT IN (?, ?, ?)"
    args: list[object] = [session_id, *TOOL_DONE_STATES]
    if turn_id is not None:
        where += " AND local_turn_id = ?"
        args.append(turn_id)
    return [_tool(r) for r in conn.execute(
        f"SELECT {_TOOL_COLUMNS} FROM tool_execution_records WHERE {where} ORDER BY id", args).fetchall()]


def _scan_turn(conn: sqlite3.Connection, session_id: str, turn_id: str | None) -> tuple[str, list[DanglingToolCall]]:
    turns = turns_conn(conn, session_id)
    turn: ConversationTurn | None = None
    if turn_id is not None:
        turn = next((t for t in turns if t.id == turn_id), None)
    else:
        open_ = [t for t in turns if t.status == "open"]
        turn = open_[-1] if open_ else (turns[-1] if turns else None)
    if turn is None:
        return (turn_id or ""), []
    sql = "SELECT seq, id, data FROM entries WHERE session_id = ? AND type = 'message' AND seq >= ?"
    args: list[object] = [session_id, turn.start_seq]
    if turn.end_seq is not None:
        sql += " AND seq <= ?"
        args.append(turn.end_seq)
    calls: dict[str, DanglingToolCall] = {}
    for seq, eid, data in conn.execute(sql + " ORDER BY seq", args):
        try:
            msg = json.loads(data).get("message")
        except (ValueError, TypeError, AttributeError):
            continue
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "toolResult" and isinstance(msg.get("toolCallId"), str):
            calls.pop(msg["toolCallId"], None)
            continue
        blocks = msg.get("contents")
        if not isinstance(blocks, list):
            continue
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("toolCall"), dict):
                call = block["toolCall"]
                if isinstance(call.get("id"), str) and call["id"]:
                    calls[call["id"]] = DanglingToolCall(str(eid), int(seq), call["id"], str(call.get("name") or ""))
    return turn.id, list(calls.values())


def list_interrupted_tools(sd: SessionDir, session_id: str, turn_id: str | None = None) -> InterruptedTools:
    """Interrupted tool execution records (not completed/failed/abandoned) and unanswered ``toolCall`` blocks.

    With ``turn_id`` both are read for that turn; without it the records of the whole session are listed and
    the transcript of the open turn (else the last turn) is scanned.
    """
    with sd.db.read() as conn:
        records = _interrupted_records(conn, session_id, turn_id)
        scanned, dangling = _scan_turn(conn, session_id, turn_id)
    return InterruptedTools(session_id, scanned, tuple(records), tuple(dangling))


class _ToolRecordRepair:
    """Shared preview/apply of the two record repairs: set ``execution_state`` of chosen interrupted records."""

    id = ""
    title = ""
    new_state = ""

    def __init__(self, sd: SessionDir, session_id: str, turn_id: str, call_ids: Sequence[str] | None = None, *,
                 owner: LeaseOwner | None = None, ttl: int = LEASE_TTL_S) -> None:
        self.sd = sd
        self.session_id = session_id
        self.turn_id = turn_id
        self.call_ids = tuple(call_ids) if call_ids else ()
        self.owner = owner
        self.ttl = ttl
        self._last: RepairPreview | None = None

    def _select(self, records: list[ToolExecution]) -> list[ToolExecution]:
        chosen = [r for r in records if r.execution_state != self.new_state]
        if self.call_ids:
            chosen = [r for r in chosen if r.provider_call_id in self.call_ids]
        return chosen

    def _read(self) -> tuple[ExecutionFacts, list[ToolExecution], list[DanglingToolCall]]:
        with self.sd.db.read() as conn:
            facts = read_facts_conn(conn, self.session_id)
            records = self._select(_interrupted_records(conn, self.session_id, self.turn_id))
            _, dangling = _scan_turn(conn, self.session_id, self.turn_id)
        return facts, records, dangling

    def _refusal(self, facts: ExecutionFacts, records: list[ToolExecution]) -> str:
        sid = self.session_id
        if not facts.session_exists:
            return f"session {sid} does not exist."
        foreign = _refuse_foreign(sid, facts.lease)
        if foreign:
            return foreign
        if facts.active_runs:
            run = facts.active_runs[0]
            return f"session {sid} has an active run {run.id} ({run.status}); recover it first (recover-run {run.id})."
        if not records:
            which = f" among {', '.join(self.call_ids)}" if self.call_ids else ""
            return f"turn {self.turn_id} of session {sid} has no interrupted tool execution record{which} to change."
        return ""

    @staticmethod
    def _facts(facts: ExecutionFacts, records: list[ToolExecution]) -> object:
        return [_lease_fact(facts.lease), [r.id for r in facts.active_runs], [[r.id, r.execution_state] for r in records]]

    def preview(self) -> RepairPreview:
        facts, records, dangling = self._read()
        refusal = self._refusal(facts, records)
        changes: list[PlannedChange] = []
        notes: list[str] = []
        if not refusal:
            lease_changes = _lease_changes(self.session_id, facts.lease, "mutation")
            changes.append(lease_changes[0])
            for r in records:
                side = "side-effecting" if r.side_effecting else "read-only"
                changes.append(PlannedChange(
                    "row", "tool_execution_records", str(r.id), "update",
                    f"{r.tool_name} call {r.provider_call_id} ({side}): execution_state {r.execution_state} → "
                    f"{self.new_state}"))
            changes.append(lease_changes[1])
        found = {r.provider_call_id for r in records}
        for call_id in self.call_ids:
            if call_id not in found:
                notes.append(f"call {call_id} has no interrupted record in turn {self.turn_id}: not changed.")
        for call in dangling:
            if call.call_id not in found:
                notes.append(f"toolCall {call.call_id} ({call.tool_name}) has no toolResult and no record to change: "
                             "nothing is written for it.")
        notes.append("no tool is run and no tool output is written to the transcript.")
        fp = fingerprint(self._facts(facts, records))
        preview = RepairPreview(self.id, self.title, self.session_id,
                                f"turn {self.turn_id} of session {self.session_id}", tuple(changes), tuple(notes),
                                refusal, fp, fp)
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        self.sd.require_writable()
        expected = expected or self._last or self.preview()
        step("tools.check")
        facts, records, _ = self._read()
        refusal = self._refusal(facts, records)
        if refusal:
            raise RepairRefused(f"Refused: {refusal}")
        if expected.refusal or fingerprint(self._facts(facts, records)) != expected.fingerprint:
            raise RepairRefused(f"Refused: the tool records of turn {self.turn_id} changed since the preview; "
                                "preview it again.")
        old_epoch = facts.lease.epoch if facts.lease is not None else 0
        step("tools.acquire")
        try:
            guard = acquire(self.sd, self.session_id, "mutation", expected_epoch=old_epoch, ttl=self.ttl,
                            owner=self.owner)
        except (LeaseBusy, SessionNotFound) as exc:
            raise _map_acquire_error(exc, f"turn {self.turn_id}") from exc
        done: list[PlannedChange] = []
        try:
            step("tools.write")
            with self.sd.db.write() as conn:
                check_fence(conn, guard.lease, purpose="mutation")
                again = self._select(_interrupted_records(conn, self.session_id, self.turn_id))
                if [[r.id, r.execution_state] for r in again] != [[r.id, r.execution_state] for r in records]:
                    raise RepairRefused(f"Refused: the tool records of turn {self.turn_id} changed since the preview; "
                                        "preview it again.")
                for r in records:
                    cur = conn.execute(
                        "UPDATE tool_execution_records SET execution_state = ? WHERE id = ? AND execution_state = ?",
                        (self.new_state, r.id, r.execution_state),
                    )
                    if cur.rowcount != 1:
                        raise RepairRefused(f"Refused: tool record {r.id} changed while it was being updated.")
                    done.append(PlannedChange("row", "tool_execution_records", str(r.id), "update",
                                              f"{r.execution_state} → {self.new_state}"))
                    step("tools.row")
                step("tools.commit")
        finally:
            step("tools.release")
            guard.release()
        return RepairResult(self.id, self.session_id, f"turn {self.turn_id} of session {self.session_id}",
                            tuple(done), f"{len(done)} tool execution record(s) of turn {self.turn_id} marked "
                            f"{self.new_state}.", guard.lease.epoch)


class AbandonToolExecutions(_ToolRecordRepair):
    """Mark interrupted records ``abandoned`` (all of the turn, or the chosen calls)."""

    id = "abandon-tools"
    title = "Abandon interrupted tool executions"
    new_state = "abandoned"


class RequestToolRecovery(_ToolRecordRepair):
    """Mark chosen interrupted records ``retry_requested`` (the user's explicit confirmation; nothing runs)."""

    id = "request-tool-recovery"
    title = "Request recovery of interrupted tool calls"
    new_state = "retry_requested"

    def __init__(self, sd: SessionDir, session_id: str, turn_id: str, call_ids: Sequence[str] | None = None,
                 **kw: object) -> None:
        if not call_ids:
            raise StoreError("Requesting tool recovery needs the ids of the chosen calls.")
        super().__init__(sd, session_id, turn_id, call_ids, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# Suggestions


def suggest(sd: SessionDir, *, session_id: str | None = None, limit: int = 200) -> list[SuggestedRepair]:
    """The repairs that apply now: orphans, expired leases of idle sessions, interrupted tools of idle sessions."""
    out: list[SuggestedRepair] = []
    for listing in list_orphaned(sd, limit=limit):
        if session_id is not None and listing.run.session_id != session_id:
            continue
        assert listing.execution is not None
        out.append(SuggestedRepair("recover-run", RecoverRun.title, (("run_id", listing.run.id),),
                                   listing.execution.reason))
    busy: set[str] = set()
    if sd.schema.has("session_runs"):
        with sd.db.read() as conn:
            marks = ",".join("?" * len(NON_TERMINAL_STATUSES))
            busy = {str(r[0]) for r in conn.execute(
                f"SELECT DISTINCT session_id FROM session_runs WHERE status IN ({marks})", NON_TERMINAL_STATUSES)}
    for lease in list_leases(sd, active_only=True):
        if lease.expired and lease.session_id not in busy and (session_id is None or lease.session_id == session_id):
            out.append(SuggestedRepair("release-lease", ReleaseExpiredLease.title,
                                       (("session_id", lease.session_id),), f"lease {lease.describe()}"))
    if sd.schema.has("tool_execution_records"):
        with sd.db.read() as conn:
            rows = conn.execute(
                "SELECT session_id, local_turn_id, count(*) FROM tool_execution_records "
                "WHERE execution_state NOT IN (?, ?, ?) GROUP BY session_id, local_turn_id ORDER BY session_id LIMIT ?",
                (*TOOL_DONE_STATES, limit),
            ).fetchall()
        for sid, turn, count in rows:
            if sid in busy or (session_id is not None and sid != session_id):
                continue
            out.append(SuggestedRepair("abandon-tools", AbandonToolExecutions.title,
                                       (("session_id", str(sid)), ("turn_id", str(turn))),
                                       f"{count} interrupted tool execution record(s)"))
    return out[:limit]
