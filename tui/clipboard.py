"""The one way the app copies: :func:`copy` puts text on the system clipboard (pyperclip), or, where there is
none (over SSH, no xclip / wl-copy), on the terminal's clipboard with OSC 52, and says in one line which.

The text is made safe first (newlines and tabs kept; every other control, bidi and surrogate character as a
visible escape): what is pasted into a terminal can hold no escape sequence, and a lone surrogate cannot make
the copy fail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.safetext import safe
from tui.formatting import describe_error, plural
from tui.safe import notify

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget

SYSTEM = "system clipboard"
TERMINAL = "terminal clipboard (OSC 52)"


def _system_copy(text: str) -> bool:
    try:
        import pyperclip

        pyperclip.copy(text)
    except Exception:  # noqa: BLE001 - pyperclip has no backend here: the caller falls back to OSC 52
        return False
    return True


def copy_quietly(node: App[object] | Widget, text: str) -> str | None:
    """Copy ``text`` without a notification of its own (the caller says it in its line); where it went, or None."""
    shown = safe(text, newlines=True, tabs=True)
    if _system_copy(shown):
        return SYSTEM
    try:
        node.app.copy_to_clipboard(shown)
    except Exception:  # noqa: BLE001 - the caller's line then says nothing was copied
        return None
    return TERMINAL


def copy(node: App[object] | Widget, text: str, what: str) -> str | None:
    """Copy ``text`` (described as ``what``, e.g. "the session id"), notify where it went, and return that
    ("system clipboard" or "terminal clipboard (OSC 52)"); ``None`` when it could not be copied (said too)."""
    shown = safe(text, newlines=True, tabs=True)
    if _system_copy(shown):
        via = SYSTEM
    else:
        via = TERMINAL
        try:
            node.app.copy_to_clipboard(shown)
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            notify(node, f"Could not copy {what}: {describe_error(exc)}", title="Copy failed", severity="error")
            return None
    notify(node, f"Copied {what} to the {via}: {plural(len(shown), 'character')}.", timeout=3)
    return via


__all__ = ["SYSTEM", "TERMINAL", "copy", "copy_quietly"]
