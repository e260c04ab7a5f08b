"""The repair a health check names, built for a session directory (the Health screen's fix key uses this)."""

from __future__ import annotations

from store.errors import StoreError
from store.health.model import HealthCheck
from store.mothx.repair_kit import Repair
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


def repair_for(sd: SessionDir, check: HealthCheck) -> Repair:
    """The :class:`Repair` of ``check`` (raises :class:`StoreError` when it names none)."""
    kind = check.repair_kind
    targets = dict(check.repair_targets)
    if not kind:
        raise StoreError(f"No repair fixes {one_line(check.id)}" + (f": {one_line(check.advice)}" if check.advice else "."))
    if kind == "reconcile-events":
        from store.eventstore.repairs import ReconcileEventIntents

        return ReconcileEventIntents(sd, targets["session_id"])
    if kind == "rebuild-projection":
        from store.eventstore.repairs import RebuildEventProjection

        return RebuildEventProjection(sd, targets["session_id"])
    if kind == "reset-db":
        from store.health.reset import ResetDatabase

        return ResetDatabase(sd)
    from store.mothx.repairs import make_repair

    return make_repair(sd, kind, **targets)
