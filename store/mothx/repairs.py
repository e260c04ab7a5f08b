"""The catalogue of repairs: each has ``preview()`` (what would change) and a fenced ``apply()``.

A repair never acts on a session whose lease is valid and held by someone else, nor on a damaged row.
``preview()`` reads the current facts and lists every row, run event, entry and lease change it would make,
with a fingerprint of the facts it read; ``apply()`` re-reads them (inside its own write transactions), refuses
with :class:`~store.errors.RepairRefused` when the fence, the expected status or the fingerprint no longer holds,
and otherwise commits the whole change.

The shared data and the step hook live in :mod:`store.mothx.repair_kit` (re-exported here); the repairs in
:mod:`store.mothx.recover_run`, :mod:`store.mothx.lease_repair` and :mod:`store.mothx.tool_repairs`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.mothx.lease_repair import ReleaseExpiredLease
from store.mothx.lease_store import list_leases
from store.mothx.recover_run import RecoverRun
from store.mothx.repair_kit import (
    STEP_ENV,
    PlannedChange,
    Repair,
    RepairPreview,
    RepairResult,
    fingerprint,
    set_step_hook,
    step,
)
from store.mothx.run_listing import list_orphaned
from store.mothx.run_model import NON_TERMINAL_STATUSES
from store.mothx.tool_repairs import TOOL_DONE_STATES, AbandonToolExecutions, RequestToolRecovery
from store.safetext import one_line
from store.words import plural

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

_FACTORIES: dict[str, Callable[..., Repair]] = {
    "RecoverRun": RecoverRun,
    "ReleaseExpiredLease": ReleaseExpiredLease,
    "AbandonToolExecutions": AbandonToolExecutions,
    "RequestToolRecovery": RequestToolRecovery,
}


# ---------------------------------------------------------------------------------------------------------------
# Registry


@dataclass(frozen=True)
class RepairSpec:
    """One kind of repair: how the command line and the screens name it and what it needs."""

    id: str
    title: str
    description: str
    targets: tuple[str, ...]  # names of the factory's required arguments
    options: tuple[str, ...] = ()
    factory_name: str = ""  # the repair's class name

    def make(self, sd: SessionDir, **kwargs: object) -> Repair:
        missing = [t for t in self.targets if t not in kwargs]
        if missing:
            raise StoreError(f"Repair {self.id} needs {', '.join(missing)}.")
        cls = _FACTORIES[self.factory_name]
        try:
            return cls(sd, **kwargs)
        except TypeError as exc:
            raise StoreError(f"Repair {self.id} does not take these arguments ({one_line(exc)}).") from exc


REPAIRS: tuple[RepairSpec, ...] = (
    RepairSpec(
        id="recover-run",
        title="Recover an orphaned run",
        description=(
            "Take a recovery lease. A background Responses run with a linked remote response is kept running "
            "(recovery record detached_remote); any other run has its pending approvals and questions cancelled, "
            "is marked failed with a 'recovered' event, gets its open turns closed with turn_end entries, and "
            "its recovery record completed."
        ),
        targets=("run_id",),
        options=("user_stop",),
        factory_name="RecoverRun",
    ),
    RepairSpec(
        id="release-lease",
        title="Release an expired lease",
        description="Take over a session's expired lease and leave a released tombstone row.",
        targets=("session_id",),
        factory_name="ReleaseExpiredLease",
    ),
    RepairSpec(
        id="abandon-tools",
        title="Abandon interrupted tool executions",
        description=(
            "Mark interrupted tool execution records of a turn 'abandoned'. No tool is run again and no tool "
            "output is written."
        ),
        targets=("session_id", "turn_id"),
        options=("call_ids",),
        factory_name="AbandonToolExecutions",
    ),
    RepairSpec(
        id="request-tool-recovery",
        title="Request recovery of interrupted tool calls",
        description=(
            "Mark chosen interrupted tool execution records 'retry_requested' (an explicit confirmation a "
            "runtime needs before it re-executes a side-effecting call). Nothing is executed here."
        ),
        targets=("session_id", "turn_id", "call_ids"),
        factory_name="RequestToolRecovery",
    ),
)


def list_repairs() -> list[RepairSpec]:
    return list(REPAIRS)


def get_repair_spec(repair_id: str) -> RepairSpec:
    for spec in REPAIRS:
        if spec.id == repair_id:
            return spec
    raise StoreError(f"There is no repair called '{one_line(repair_id)}'.")


def make_repair(sd: SessionDir, repair_id: str, **kwargs: object) -> Repair:
    """Build the repair ``repair_id`` for its targets (e.g. ``make_repair(sd, "recover-run", run_id=...)``)."""
    return get_repair_spec(repair_id).make(sd, **kwargs)


@dataclass(frozen=True)
class SuggestedRepair:
    """A repair that applies to the current state, with its targets (for screens that offer actions)."""

    repair_id: str
    title: str
    targets: tuple[tuple[str, str], ...]
    reason: str

    def make(self, sd: SessionDir) -> Repair:
        return make_repair(sd, self.repair_id, **dict(self.targets))


def suggest_repairs(sd: SessionDir, *, session_id: str | None = None, limit: int = 200) -> list[SuggestedRepair]:
    """The repairs that apply now: orphans, expired leases of idle sessions, interrupted tools of idle sessions."""
    out: list[SuggestedRepair] = []
    for listing in list_orphaned(sd, limit=limit):
        if session_id is not None and listing.run.session_id != session_id:
            continue
        assert listing.execution is not None
        out.append(SuggestedRepair("recover-run", RecoverRun.title, (("run_id", listing.run.id),),
                                   one_line(listing.execution.reason)))
    busy: set[str] = set()
    if sd.schema.has("session_runs"):
        with sd.db.read() as conn:
            marks = ",".join("?" * len(NON_TERMINAL_STATUSES))
            busy = {r[0] for r in conn.execute(
                f"SELECT DISTINCT session_id FROM session_runs WHERE status IN ({marks})", NON_TERMINAL_STATUSES)}
    for lease in list_leases(sd, active_only=True):
        if lease.problems:
            continue
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
            if not isinstance(sid, str) or not isinstance(turn, str):
                continue  # a damaged record: nothing to suggest for it
            if sid in busy or (session_id is not None and sid != session_id):
                continue
            out.append(SuggestedRepair("abandon-tools", AbandonToolExecutions.title,
                                       (("session_id", sid), ("turn_id", turn)),
                                       plural(count, "interrupted tool execution record")))
    return out[:limit]


__all__: Sequence[str] = (
    "PlannedChange", "RepairPreview", "RepairResult", "Repair", "RepairSpec", "REPAIRS", "SuggestedRepair",
    "fingerprint", "step", "set_step_hook", "list_repairs", "get_repair_spec", "make_repair", "suggest_repairs",
    "STEP_ENV",
)
