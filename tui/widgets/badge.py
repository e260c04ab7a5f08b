"""The open-mode badge (``RW`` / ``READ-ONLY`` / ``SNAPSHOT``) shown in the header of every screen."""

from __future__ import annotations

from textual.widgets import Static

BADGE_CLASSES = {"RW": "-rw", "READ-ONLY": "-read-only", "SNAPSHOT": "-snapshot"}
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


class ModeBadge(Static):
    """A coloured label with the open mode. ``set_mode`` changes it."""

    DEFAULT_CSS = """
    ModeBadge {
        width: auto;
        height: 1;
        padding: 0 1;
        text-style: bold;
        background: $success;
        color: $background;
    }
    ModeBadge.-read-only { background: $warning; }
    ModeBadge.-snapshot { background: $secondary; }
    """

    def __init__(self, text: str = "RW", *, id: str | None = None) -> None:
        super().__init__(text, id=id, markup=False, classes=BADGE_CLASSES.get(text, "-read-only"))
        self._text = text
        self.tooltip = BADGE_TOOLTIPS.get(text, "")

    @property
    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        if text == self._text:
            return  # no restyle when nothing changed
        self._text = text
        self.update(text)
        wanted = BADGE_CLASSES.get(text, "-read-only")
        for cls in BADGE_CLASSES.values():
            self.set_class(cls == wanted, cls)
        self.tooltip = BADGE_TOOLTIPS.get(text, "")
