"""The open-mode badge (``RW`` / ``READ-ONLY`` / ``SNAPSHOT``) that the header of every screen shows.

The header draws it (see :mod:`tui.widgets.header`); this module says what it reads and means.
"""

from __future__ import annotations

BADGE_TOOLTIPS = {
    "RW": "Read-write: repairs may write, each one previewed and confirmed.",
    "READ-ONLY": "Read-only: nothing is written; repair actions are disabled.",
    "SNAPSHOT": "Snapshot of a copy: nothing is written, no lock is taken, no -wal/-shm is created.",
}


def badge_text(mode_badge: str, writable: bool | None) -> str:
    """The text of the badge: the open mode's badge, or ``READ-ONLY`` where the store refuses writes.

    ``writable`` is ``None`` before the store is open (the requested mode is shown).
    """
    if mode_badge == "RW" and writable is False:
        return "READ-ONLY"
    return mode_badge
