"""What every repair shares: the preview and result data, the fingerprint, the step hook, the lease helpers and
:class:`LeasedRepair` (the state, the re-check and the lease acquisition of a repair under its own lease).

A repair never acts on a session whose lease is valid and held by someone else, nor on a damaged row (a cell
no runtime writes, see :mod:`store.mothx.cells`): ``preview()`` says why in ``refusal`` and ``apply()`` raises
:class:`~store.errors.RepairRefused` with that sentence before anything is written.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from store.errors import LeaseBusy, RepairRefused, SessionNotFound, StoreError
from store.mothx.lease_guard import LeaseGuard, acquire
from store.mothx.lease_model import LEASE_TTL_S, LeaseEpochChanged, LeaseOwner, LeaseSnapshot
from store.safetext import one_line

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
        out = [f"{self.title}: {one_line(self.target)}"]
        if self.refusal:
            out.append(f"Refused: {one_line(self.refusal)}")
        for change in self.changes:
            out.append(f"  {change.action:<7} {change.table} {one_line(change.key)}: {one_line(change.summary)}")
        out.extend(f"  note: {one_line(n)}" for n in self.notes)
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
# Lease helpers shared by the repairs


def lease_fact(lease: LeaseSnapshot | None) -> object:
    """The part of a lease row a repair's fingerprint covers."""
    if lease is None:
        return None
    return [lease.owner_instance_id, lease.token_hash, lease.epoch, lease.state, lease.valid, list(lease.problems)]


def refuse_foreign(session_id: str, lease: LeaseSnapshot | None) -> str:
    """The refusal for a valid lease held by someone else, or for a damaged lease row (``''``: neither)."""
    sid = one_line(session_id)
    if lease is not None and lease.problems:
        return f"the lease row of session {sid} is damaged ({lease.damaged}); a repair leaves it as it is."
    if lease is not None and lease.valid:
        return f"session {sid} is {lease.describe()}; a repair never acts under another owner's valid lease."
    return ""


def damage_refusal(what: str, problems: tuple[str, ...] | list[str]) -> str:
    """The refusal for damaged rows (``''`` when there are none)."""
    if not problems:
        return ""
    return f"{what} holds damaged values ({'; '.join(problems)}); a repair leaves damaged rows as they are."


def lease_changes(session_id: str, lease: LeaseSnapshot | None, purpose: str) -> list[PlannedChange]:
    """The takeover (or first insert) and the release a repair's lease makes."""
    old = lease.epoch if lease is not None else 0
    new = old + 1
    how = "insert epoch 1" if lease is None else f"take over epoch {old} → {new}"
    sid = one_line(session_id)
    return [
        PlannedChange("lease", "session_runtime_leases", sid, "insert" if lease is None else "update",
                      f"{how} as a {purpose} lease held by this process"),
        PlannedChange("lease", "session_runtime_leases", sid, "update",
                      f"release epoch {new} (state 'released', a tombstone row)"),
    ]


def map_acquire_error(exc: StoreError, what: str) -> RepairRefused:
    """A failed lease acquisition as the repair's refusal."""
    if isinstance(exc, LeaseEpochChanged):
        return RepairRefused(f"Refused: the facts of {what} changed since the preview ({exc}); preview it again.")
    text = str(exc)
    return RepairRefused(f"Refused: {text[:1].lower()}{text[1:]}")


ACQUIRE_REFUSALS: tuple[type[StoreError], ...] = (LeaseBusy, SessionNotFound)
"""The acquisition failures a repair reports as its refusal (others propagate as they are)."""


def refuse_if_moved(refusal: str, expected: RepairPreview, now_fingerprint: str, what: str) -> None:
    """The check ``apply()`` makes on the facts read again: the refusal they give now, else a preview that was
    refused or whose fingerprint differs (``what`` changed since the preview)."""
    if refusal:
        raise RepairRefused(f"Refused: {refusal}")
    if expected.refusal or now_fingerprint != expected.fingerprint:
        raise RepairRefused(f"Refused: {what} changed since the preview; preview it again.")


class LeasedRepair:
    """A repair that works under a lease of its own: the session directory, the lease's owner and TTL, the last
    preview, and the two steps every ``apply()`` starts with."""

    id = ""
    title = ""

    def __init__(self, sd: SessionDir, *, owner: LeaseOwner | None = None, ttl: int = LEASE_TTL_S) -> None:
        self.sd = sd
        self.owner = owner
        self.ttl = ttl
        self._last: RepairPreview | None = None

    def preview(self) -> RepairPreview:
        raise NotImplementedError

    def expected_preview(self, expected: RepairPreview | None) -> RepairPreview:
        """Refuse a read mode, then the preview ``apply()`` works from: the one given, else the last, else a new one."""
        self.sd.require_writable()
        return expected or self._last or self.preview()

    def acquire_lease(self, session_id: str, purpose: str, what: str, *, expected_epoch: int | None,
                      expected_run_id: str = "",
                      refused: tuple[type[StoreError], ...] = ACQUIRE_REFUSALS) -> LeaseGuard:
        """The repair's lease, fenced on the previewed epoch; a ``refused`` failure as the repair's refusal."""
        try:
            return acquire(self.sd, session_id, purpose, expected_run_id=expected_run_id,
                           expected_epoch=expected_epoch, ttl=self.ttl, owner=self.owner)
        except refused as exc:
            raise map_acquire_error(exc, what) from exc


class SessionRepair(LeasedRepair):
    """A :class:`LeasedRepair` of one session."""

    def __init__(self, sd: SessionDir, session_id: str, *, owner: LeaseOwner | None = None,
                 ttl: int = LEASE_TTL_S) -> None:
        super().__init__(sd, owner=owner, ttl=ttl)
        self.session_id = session_id
