"""Execution facts and the derived execution state (reference 11.2 step 1, 12), with the recovery row and the
linked ``response_runs`` row they depend on.

"Linked" is the reference's definition (11.2 step 6): same ``session_id``, and ``local_turn_id`` equal to the
session run's id (the runtime writes the session run id into ``local_turn_id``; ``local_run_id`` holds the
provider-side run id). A run is *remote-retainable* when its ``source`` is ``responses_background`` and a linked
row has a non-empty ``response_id``, a non-empty ``provider`` and ``api = 'openai-responses'``; the source alone
never keeps a run.

Facts holding a damaged row (a foreign cell in the active run, the lease, the recovery row or, for a background
run, its linked response row) derive the state ``unknown``: nothing is classified from values no runtime wrote.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.errors import SessionNotFound
from store.mothx.cells import joined
from store.mothx.lease_model import LEASE_COLUMNS, LeaseOwner, LeaseSnapshot, snapshot_from_row, sqlite_now
from store.mothx.run_model import (
    RECOVERY_COLUMNS,
    RESPONSE_COLUMNS,
    RecoveryRecord,
    ResponseRun,
    Run,
    has_table,
    recovery_from_row,
    response_from_row,
)
from store.mothx.run_store import active_runs_conn
from store.mothx.schema import SchemaInfo
from store.safetext import one_line

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

REMOTE_SOURCE = "responses_background"
REMOTE_API = "openai-responses"
LocalOwner = str | LeaseOwner | None
"""Who "this process" is for the ``local`` state: the :class:`LeaseOwner` (exact: the lease is registered in it),
or just its instance id (the row names that instance), or nobody."""


# ---------------------------------------------------------------------------------------------------------------
# Recovery rows and linked response runs


def recovery_conn(conn: sqlite3.Connection, run_id: str, schema: SchemaInfo | None = None) -> RecoveryRecord | None:
    if not has_table(conn, schema, "session_run_recoveries"):
        return None
    row = conn.execute(
        f"SELECT {RECOVERY_COLUMNS} FROM session_run_recoveries WHERE run_id = ?", (run_id,)
    ).fetchone()
    return recovery_from_row(row) if row else None


def get_recovery(sd: SessionDir, run_id: str) -> RecoveryRecord | None:
    with sd.db.read() as conn:
        return recovery_conn(conn, run_id, sd.schema)


def keeps_remote(response: ResponseRun) -> bool:
    """Whether the response run names a remote response that can be continued (no problems, an id, a provider,
    the remote API)."""
    return (not response.problems and bool(response.response_id) and bool(response.provider)
            and response.api == REMOTE_API)


def response_run_conn(conn: sqlite3.Connection, session_id: str, run_id: str,
                      schema: SchemaInfo | None = None) -> ResponseRun | None:
    """The ``response_runs`` row linked to session run ``run_id`` (same session, ``local_turn_id`` = the run id).

    Of several linked rows: the newest one that keeps the run remote; else the newest damaged one (so the facts
    say what is damaged); else the newest; ``None`` when no row is linked.
    """
    if not has_table(conn, schema, "response_runs"):
        return None
    rows = [response_from_row(r) for r in conn.execute(
        f"SELECT {RESPONSE_COLUMNS} FROM response_runs WHERE session_id = ? AND local_turn_id = ? "
        "ORDER BY id DESC LIMIT 50",
        (session_id, run_id),
    ).fetchall()]
    for pick in (keeps_remote, lambda r: bool(r.problems), lambda r: True):
        for resp in rows:
            if pick(resp):
                return resp
    return None


def remote_retainable(run: Run, response: ResponseRun | None) -> bool:
    """Reference 11.2 step 6: ``source = 'responses_background'`` and a linked row with ``response_id``,
    ``provider`` and ``api = 'openai-responses'`` (a damaged row never keeps a run)."""
    return (
        run.source == REMOTE_SOURCE
        and not run.problems
        and response is not None
        and response.session_id == run.session_id
        and response.local_turn_id == run.id
        and keeps_remote(response)
    )


# ---------------------------------------------------------------------------------------------------------------
# Execution facts


@dataclass(frozen=True)
class ExecutionFacts:
    """Everything recovery and inspection decide on, read in ONE transaction (reference 11.2 step 1)."""

    session_id: str
    now: int
    session_exists: bool
    active_runs: tuple[Run, ...]
    lease: LeaseSnapshot | None
    recovery: RecoveryRecord | None  # the recovery row of the (newest) active run
    response_run: ResponseRun | None  # the response_runs row linked to the (newest) active run

    @property
    def active_run(self) -> Run | None:
        return self.active_runs[0] if len(self.active_runs) == 1 else None

    @property
    def lease_valid(self) -> bool:
        return self.lease is not None and self.lease.valid

    @property
    def problems(self) -> tuple[str, ...]:
        """The damaged cells among the rows the decision depends on."""
        out: list[str] = []
        for run in self.active_runs:
            out.extend(run.problems)
        if self.lease is not None:
            out.extend(self.lease.problems)
        if self.recovery is not None:
            out.extend(self.recovery.problems)
        first = self.active_runs[0] if self.active_runs else None
        if self.response_run is not None and first is not None and first.source == REMOTE_SOURCE:
            out.extend(self.response_run.problems)
        return tuple(out)

    @property
    def damaged(self) -> str:
        return joined(self.problems)


def read_lease_row(conn: sqlite3.Connection, session_id: str, now: int,
                   schema: SchemaInfo | None = None) -> LeaseSnapshot | None:
    if not has_table(conn, schema, "session_runtime_leases"):
        return None
    row = conn.execute(
        f"SELECT {LEASE_COLUMNS} FROM session_runtime_leases WHERE session_id = ?", (session_id,)
    ).fetchone()
    return snapshot_from_row(row, now) if row else None


def read_facts_conn(conn: sqlite3.Connection, session_id: str, *, now: int | None = None,
                    schema: SchemaInfo | None = None) -> ExecutionFacts:
    """:class:`ExecutionFacts` inside the caller's transaction (read or write)."""
    t = sqlite_now(conn, now)
    exists = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None
    active = tuple(active_runs_conn(conn, session_id, schema))
    lease = read_lease_row(conn, session_id, t, schema)
    recovery = recovery_conn(conn, active[0].id, schema) if active else None
    response = response_run_conn(conn, session_id, active[0].id, schema) if active else None
    return ExecutionFacts(session_id=session_id, now=t, session_exists=exists, active_runs=active, lease=lease,
                          recovery=recovery, response_run=response)


def read_execution_facts(sd: SessionDir, session_id: str, *, now: int | None = None) -> ExecutionFacts:
    with sd.db.read() as conn:
        return read_facts_conn(conn, session_id, now=now, schema=sd.schema)


# ---------------------------------------------------------------------------------------------------------------
# Derived state


@dataclass(frozen=True)
class ExecutionState:
    """The derived execution state of a session (reference 12), with the reason in words."""

    state: str
    phase: str
    recovery_action: str
    linkage_state: str
    owner_scope: str
    can_submit: bool
    can_cancel_local: bool
    can_cancel_remote: bool
    run_id: str
    reason: str


_REMOTE_FINISHED = frozenset({"completed", "failed", "cancelled", "canceled", "incomplete", "expired"})


def _linkage(facts: ExecutionFacts, run: Run | None) -> str:
    lease = facts.lease
    if run is None or lease is None or not lease.valid:
        return "none"
    if lease.run_id == run.id:
        return "bound"
    if lease.run_id == "":
        return "legacy_unbound"
    return "mismatched"


def is_local(lease: LeaseSnapshot | None, local: LocalOwner) -> bool:
    """Reference 12 rule 5: the lease is registered in this process."""
    if lease is None or local is None:
        return False
    if isinstance(local, LeaseOwner):
        return local.holds(lease)
    return lease.owner_instance_id == local


def derive_execution_state(facts: ExecutionFacts, local_instance_id: LocalOwner = None) -> ExecutionState:
    """Classify the facts as the reference's table 12 does.

    ``local_instance_id`` is who "this process" is: a :class:`LeaseOwner` (the lease must be registered in it),
    or an instance id (the lease row must name it).

    Beyond the reference (which leaves them open): ``unknown`` for a session that does not exist or whose facts
    hold a damaged row; ``phase`` is ``admitting``/``reserved``/``recovering`` from a reserving lease's purpose,
    ``executing`` while an owner (local, external or remote) runs the run, ``releasing`` while the run is
    ``cancelling``/``terminalizing``, ``missing`` when the owner is gone, and ``''`` when no run or lease is
    involved. ``recoveryAction`` is ``recover_orphan`` for an orphan, ``retry_recovery`` after a failed
    recovery, ``reattach_remote`` / ``finalize_remote`` for a detached remote run (finalize once its response
    run has a finished state). ``can_submit`` only when idle.
    """
    lease = facts.lease
    valid = lease is not None and lease.valid
    runs = facts.active_runs
    run = runs[0] if runs else None
    run_id = run.id if run else ""
    rid = one_line(run_id)

    def make(state: str, phase: str, reason: str, *, action: str = "none", scope: str = "none") -> ExecutionState:
        return ExecutionState(
            state=state, phase=phase, recovery_action=action, linkage_state=_linkage(facts, run),
            owner_scope=scope, can_submit=state == "idle", can_cancel_local=state == "local",
            can_cancel_remote=state == "detached_remote", run_id=run_id, reason=reason,
        )

    if not facts.session_exists:
        return make("unknown", "", f"session {one_line(facts.session_id)} does not exist", scope="unknown")
    if len(runs) > 1:  # rule 1
        return make("inconsistent", "", f"{len(runs)} active runs in one session", scope="unknown")
    if facts.problems:
        return make("unknown", "", f"damaged row: {facts.damaged}", scope="unknown")
    local = is_local(lease, local_instance_id)
    holder_scope = "local" if local else "external"
    if run is None:
        if valid:  # rule 2
            assert lease is not None
            phase = {"admission": "admitting", "recovery": "recovering"}.get(lease.purpose, "reserved")
            return make("reserved", phase, f"no active run; lease {lease.describe()}", scope=holder_scope)
        return make("idle", "", "no active run and no valid lease")  # rule 3
    releasing = run.status in ("cancelling", "terminalizing")
    status = one_line(run.status)
    if not valid:  # rule 4
        if remote_retainable(run, facts.response_run):
            response = facts.response_run
            finished = response is not None and response.state in _REMOTE_FINISHED
            return make("detached_remote", "executing", f"run {rid} continues at the provider",
                        action="finalize_remote" if finished else "reattach_remote", scope="remote")
        gone = "no lease" if lease is None else f"lease {lease.describe()}"
        if facts.recovery is not None and facts.recovery.state == "failed":
            return make("recovery_failed", "missing",
                        f"run {rid} is {status} with {gone}; last recovery failed: "
                        f"{one_line(facts.recovery.last_error)}",
                        action="retry_recovery")
        if facts.recovery is not None and facts.recovery.state == "recovering":
            return make("orphaned", "recovering",
                        f"run {rid} is {status} with {gone}; an earlier recovery did not finish",
                        action="recover_orphan")
        return make("orphaned", "missing", f"run {rid} is {status} with {gone}", action="recover_orphan")
    assert lease is not None  # rule 5
    if lease.purpose == "recovery":
        return make("reserved", "recovering", f"run {rid} is being recovered: lease {lease.describe()}",
                    scope=holder_scope)
    if lease.purpose in ("admission", "mutation", "fork"):
        return make("inconsistent", "", f"run {rid} is active under a {one_line(lease.purpose)} lease",
                    scope="unknown")
    if lease.purpose == "execution" and lease.run_id and lease.run_id != run.id:
        return make("inconsistent", "", f"the execution lease is bound to run {one_line(lease.run_id)}, not {rid}",
                    scope="unknown")
    phase = "releasing" if releasing else "executing"
    if local:
        return make("local", phase, f"run {rid} runs in this process", scope="local")
    return make("external", phase, f"run {rid} runs in {lease.describe_holder()}", scope="external")


def inspect_execution(sd: SessionDir, session_id: str, *, now: int | None = None,
                      local_instance_id: LocalOwner = None) -> ExecutionState:
    """Read the facts and derive the session's execution state."""
    facts = read_execution_facts(sd, session_id, now=now)
    if not facts.session_exists:
        raise SessionNotFound(f"Session {one_line(session_id)} does not exist.")
    return derive_execution_state(facts, local_instance_id)
