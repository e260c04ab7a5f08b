"""Release an expired lease: take it over as a ``mutation`` lease (fenced on the previewed epoch) and release it,
leaving a tombstone row (reference 10.5, 10.8). Only for an idle session; a damaged lease row is refused."""

from __future__ import annotations

from store.mothx import repair_kit as kit
from store.mothx.execution import ExecutionFacts, read_facts_conn
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.safetext import one_line


class ReleaseExpiredLease(kit.SessionRepair):
    """Take over a session's expired lease (a ``mutation`` lease, fenced on the previewed epoch) and release it."""

    id = "release-lease"
    title = "Release an expired lease"

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
        foreign = kit.refuse_foreign(self.session_id, lease)
        if foreign:
            return foreign
        if lease.state != "active":
            return f"session {sid}'s lease is already released (epoch {lease.epoch} is a tombstone)."
        if facts.active_runs:
            run = facts.active_runs[0]
            rid = one_line(run.id)
            return (f"session {sid} has an active run {rid} ({one_line(run.status)}); recover the run instead "
                    f"(recover-run {rid}).")
        return kit.damage_refusal(f"session {sid}", facts.problems)

    @staticmethod
    def _facts(facts: ExecutionFacts) -> object:
        lease = facts.lease
        return [kit.lease_fact(lease), lease.expires_at if lease else None, [r.id for r in facts.active_runs],
                facts.session_exists]

    def preview(self) -> RepairPreview:
        facts = self._read()
        refusal = self._refusal(facts)
        changes: tuple[PlannedChange, ...] = ()
        notes: tuple[str, ...] = ()
        if not refusal:
            assert facts.lease is not None
            changes = tuple(kit.lease_changes(self.session_id, facts.lease, "mutation"))
            notes = (f"the lease was {facts.lease.describe()}.",)
        fp = fingerprint(self._facts(facts))
        preview = RepairPreview(self.id, self.title, self.session_id, f"lease of session {one_line(self.session_id)}",
                                changes, notes, refusal, fp, fp)
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        expected = self.expected_preview(expected)
        step("release.check")
        facts = self._read()
        what = f"the lease of session {one_line(self.session_id)}"
        kit.refuse_if_moved(self._refusal(facts), expected, fingerprint(self._facts(facts)), what)
        assert facts.lease is not None
        old = facts.lease
        step("release.acquire")
        # The takeover is the fenced re-read: CAS on the previewed epoch inside its write transaction.
        guard = self.acquire_lease(self.session_id, "mutation", what, expected_epoch=old.epoch)
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
