"""The catalogue of repairs: each has ``preview()`` (what would change) and a fenced ``apply()``.

A repair never acts on a session whose lease is valid and held by someone else. ``preview()`` reads the
current facts and lists every row, run event, entry and lease change it would make, with a fingerprint of the
facts it read; ``apply()`` re-reads them (inside its own write transactions), refuses with
:class:`~store.errors.RepairRefused` when the fence, the expected status or the fingerprint no longer holds,
and otherwise commits the whole change. The repairs themselves live in :mod:`store.mothx.recovery`.

Step hook (for kill tests): a repair calls :func:`step` between its statements. The environment variable
``SESSIONSCOPE_REPAIR_STEPS`` makes those points observable from outside the process:

* ``list``       print ``STEP <n> <name>`` on stderr at every step and continue;
* ``pause:<n>``  print ``PAUSED <n> <name>`` on stderr at step ``n`` and sleep until killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from store.errors import StoreError

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

STEP_ENV = "SESSIONSCOPE_REPAIR_STEPS"


# ---------------------------------------------------------------------------------------------------------------
# Preview / result data


@dataclass(frozen=True)
class PlannedChange:
    """One durable change a repair makes."""

    kind: str  # "lease" | "row" | "run_event" | "entry"
    table: str  # the table written
    key: str  # the row's key (run id, event id, entry id or "(new)", record id, session id)
    action: str  # "insert" | "update" | "upsert" | "append"
    summary: str  # one line for people


@dataclass(frozen=True)
class RepairPreview:
    """What ``apply()`` would change, computed from the facts read now.

    ``refusal`` is empty when the repair may be applied, else the one-sentence reason ``apply()`` would give.
    ``fingerprint`` digests every fact the plan depends on; ``apply()`` refuses when it differs.
    """

    repair_id: str
    title: str
    session_id: str
    target: str
    changes: tuple[PlannedChange, ...]
    notes: tuple[str, ...]
    refusal: str
    fingerprint: str
    content_fingerprint: str = ""  # the part of the facts the repair's own lease/recovery writes do not touch

    @property
    def allowed(self) -> bool:
        return not self.refusal

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    @property
    def rows(self) -> int:
        return self.count("row")

    @property
    def run_events(self) -> int:
        return self.count("run_event")

    @property
    def entries(self) -> int:
        return self.count("entry")

    @property
    def lease_changes(self) -> int:
        return self.count("lease")

    def lines(self) -> list[str]:
        """The preview as text lines (dialogs and ``--dry-run`` print these)."""
        out = [f"{self.title}: {self.target}"]
        if self.refusal:
            out.append(f"Refused: {self.refusal}")
        for change in self.changes:
            out.append(f"  {change.action:<7} {change.table} {change.key}: {change.summary}")
        out.extend(f"  note: {n}" for n in self.notes)
        out.append(
            f"  total: {self.rows} rows, {self.run_events} run events, {self.entries} entries, "
            f"{self.lease_changes} lease changes"
        )
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "repair": self.repair_id,
            "title": self.title,
            "session_id": self.session_id,
            "target": self.target,
            "allowed": self.allowed,
            "refusal": self.refusal,
            "changes": [
                {"kind": c.kind, "table": c.table, "key": c.key, "action": c.action, "summary": c.summary}
                for c in self.changes
            ],
            "notes": list(self.notes),
            "counts": {"rows": self.rows, "run_events": self.run_events, "entries": self.entries,
                       "lease_changes": self.lease_changes},
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True)
class RepairResult:
    """What ``apply()`` committed."""

    repair_id: str
    session_id: str
    target: str
    changes: tuple[PlannedChange, ...]
    message: str
    lease_epoch: int = 0  # the epoch of the lease the repair worked under

    def to_json(self) -> dict[str, object]:
        return {
            "repair": self.repair_id,
            "session_id": self.session_id,
            "target": self.target,
            "message": self.message,
            "lease_epoch": self.lease_epoch,
            "changes": [
                {"kind": c.kind, "table": c.table, "key": c.key, "action": c.action, "summary": c.summary}
                for c in self.changes
            ],
        }


@runtime_checkable
class Repair(Protocol):
    """A repair action: ``preview()`` reads, ``apply()`` writes under a fence (or raises RepairRefused)."""

    id: str
    title: str

    def preview(self) -> RepairPreview: ...

    def apply(self, expected: RepairPreview | None = None) -> RepairResult: ...


def fingerprint(*parts: object) -> str:
    """A stable digest of JSON-able facts."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------------------------
# Step hook

StepHook = Callable[[str], None]
_step_hook: StepHook | None = None
_step_counter = 0


def set_step_hook(hook: StepHook | None) -> None:
    """Install a function called with the step name at every step of every repair (tests)."""
    global _step_hook
    _step_hook = hook


def _env_hook(name: str) -> None:
    global _step_counter
    spec = os.environ.get(STEP_ENV, "")
    if not spec:
        return
    _step_counter += 1
    if spec == "list":
        sys.stderr.write(f"STEP {_step_counter} {name}\n")
        sys.stderr.flush()
    elif spec.startswith("pause:") and spec[6:].isdigit() and int(spec[6:]) == _step_counter:
        sys.stderr.write(f"PAUSED {_step_counter} {name}\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)


def step(name: str) -> None:
    """A named point between two statements of a repair."""
    if _step_hook is not None:
        _step_hook(name)
    _env_hook(name)


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
    factory_name: str = ""  # class name in store.mothx.recovery

    def make(self, sd: SessionDir, **kwargs: object) -> Repair:
        import store.mothx.recovery as recovery

        missing = [t for t in self.targets if t not in kwargs]
        if missing:
            raise StoreError(f"Repair {self.id} needs {', '.join(missing)}.")
        cls = getattr(recovery, self.factory_name)
        return cls(sd, **kwargs)  # type: ignore[no-any-return]


REPAIRS: tuple[RepairSpec, ...] = (
    RepairSpec(
        id="recover-run",
        title="Recover an orphaned run",
        description=(
            "Take a recovery lease, cancel pending approvals and questions, mark the run failed with a "
            "'recovered' event, close its open turns with turn_end entries and complete the recovery record."
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
    raise StoreError(f"There is no repair called '{repair_id}'.")


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
    """Orphaned runs to recover, expired leases of idle sessions to release, interrupted tools to abandon."""
    from store.mothx.recovery import suggest

    return suggest(sd, session_id=session_id, limit=limit)


__all__: Sequence[str] = (
    "PlannedChange", "RepairPreview", "RepairResult", "Repair", "RepairSpec", "REPAIRS", "SuggestedRepair",
    "fingerprint", "step", "set_step_hook", "list_repairs", "get_repair_spec", "make_repair", "suggest_repairs",
    "STEP_ENV",
)
