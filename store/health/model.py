"""One health check's row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "error"]
OK: Status = "ok"
WARN: Status = "warn"
ERROR: Status = "error"
_RANK = {OK: 0, WARN: 1, ERROR: 2}


@dataclass(frozen=True)
class HealthCheck:
    """One check: what was looked at, how it stands, and the repair that fixes it (``repair_kind`` '' = none).

    ``detail`` and every target are data: they are shown through the safe-text boundary, never as markup.
    """

    id: str
    title: str
    status: Status
    detail: str
    repair_kind: str = ""
    repair_targets: tuple[tuple[str, str], ...] = ()
    session_id: str = ""
    advice: str = ""  # what to do when no repair fixes it

    @property
    def rank(self) -> int:
        return _RANK[self.status]

    @property
    def repair(self) -> str:
        """The repair as the command line names it: ``reconcile-events 0123abcd…`` (``''``: none)."""
        if not self.repair_kind:
            return ""
        return " ".join([self.repair_kind, *(v for _, v in self.repair_targets)])

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "status": self.status, "detail": self.detail,
                "repair": self.repair, "repair_kind": self.repair_kind,
                "repair_targets": dict(self.repair_targets), "session_id": self.session_id, "advice": self.advice}


def exit_code(checks: list[HealthCheck]) -> int:
    """0 healthy, 1 warnings, 2 errors."""
    return max((c.rank for c in checks), default=0)


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
