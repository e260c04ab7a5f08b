"""Release an expired lease: take it over as a ``mutation`` lease (fenced on the previewed epoch) and release it,
leaving a tombstone row (reference 10.5, 10.8). Only for an idle session; a damaged lease row is refused."""

from __future__ import annotations

from store.errors import LeaseBusy, RepairRefused, SessionNotFound
from store.mothx.execution import ExecutionFacts, read_facts_conn
from store.mothx.lease_guard import acquire
from store.mothx.lease_model import LEASE_TTL_S, LeaseOwner
from store.mothx.repair_kit import (
    PlannedChange,
    RepairPreview,
    RepairResult,
    damage_refusal,
    fingerprint,
    lease_changes,
    lease_fact,
    map_acquire_error,
    refuse_foreign,
    step,
)
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


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
        sid = one_line(self.session_id)
        lease = facts.lease
        if not facts.session_exists:
            return f"session {sid} does not exist."
        if lease is None:
            return f"session {sid} has no lease row."
        foreign = refuse_foreign(self.session_id, lease)
        if foreign:
            return foreign
        if lease.state != "active":
            return f"session {sid}'s lease is already released (epoch {lease.epoch} is a tombstone)."
        if facts.active_runs:
            run = facts.active_runs[0]
            rid = one_line(run.id)
            return (f"session {sid} has an active run {rid} ({one_line(run.status)}); recover the run instead "
                    f"(recover-run {rid}).")
        return damage_refusal(f"session {sid}", facts.problems)

    @staticmethod
    def _facts(facts: ExecutionFacts) -> object:
        lease = facts.lease
        return [lease_fact(lease), lease.expires_at if lease else None, [r.id for r in facts.active_runs],
                facts.session_exists]

    def preview(self) -> RepairPreview:
        facts = self._read()
        refusal = self._refusal(facts)
        changes: tuple[PlannedChange, ...] = ()
        notes: tuple[str, ...] = ()
        if not refusal:
            assert facts.lease is not None
            changes = tuple(lease_changes(self.session_id, facts.lease, "mutation"))
            notes = (f"the lease was {facts.lease.describe()}.",)
        fp = fingerprint(self._facts(facts))
        preview = RepairPreview(self.id, self.title, self.session_id, f"lease of session {one_line(self.session_id)}",
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
                f"Refused: the lease of session {one_line(self.session_id)} changed since the preview; preview it again.")
        assert facts.lease is not None
        old = facts.lease
        step("release.acquire")
        try:
            # The takeover is the fenced re-read: CAS on the previewed epoch inside its write transaction.
            guard = acquire(self.sd, self.session_id, "mutation", expected_epoch=old.epoch, ttl=self.ttl,
                            owner=self.owner)
        except (LeaseBusy, SessionNotFound) as exc:
            raise map_acquire_error(exc, f"the lease of session {one_line(self.session_id)}") from exc
        step("release.release")
        guard.release()
        changes = (
            PlannedChange("lease", "session_runtime_leases", one_line(self.session_id), "update",
                          f"took over epoch {old.epoch} → {guard.lease.epoch} (mutation)"),
            PlannedChange("lease", "session_runtime_leases", one_line(self.session_id), "update",
                          f"released epoch {guard.lease.epoch} (tombstone)"),
        )
        return RepairResult(self.id, self.session_id, f"lease of session {one_line(self.session_id)}", changes,
                            f"Released the expired lease of session {one_line(self.session_id)} (held by "
                            f"{one_line(old.owner_instance_id)}); the tombstone is at epoch {guard.lease.epoch}.",
                            guard.lease.epoch)
