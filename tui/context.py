"""Typed access to what the app gives its screens and widgets: the store, the clock, live updates, navigation.

Screens and widgets never reach into the app with ``getattr(self.app, "…", None)`` (a typo there is a silent
no-op). They call :func:`services`, which returns the app typed as :class:`AppServices`. ``SessionscopeApp``
implements the protocol (a test checks it). The one case without it is a test host (a bare ``App`` showing a
single screen): :func:`services` returns ``None`` there, and each caller says what it does then.

This module imports neither the app nor any screen (the app module imports screens; a screen importing the
app would make a cycle), only the protocol's types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen

    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionPage
    from tui.live import LiveUpdates


@runtime_checkable
class AppServices(Protocol):
    """What screens and widgets may use of the app."""

    @property
    def sd(self) -> SessionDir | None:
        """The open session directory (``None`` while opening, or when none is open)."""

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds since the epoch (tests pass a fixed clock)."""

    @property
    def live(self) -> LiveUpdates | None:
        """The live-update listener (``None`` for a snapshot, or when live updates are off)."""

    @property
    def location(self) -> str:
        """The session directory the header shows (home as ``~``); a reactive the header watches."""

    @property
    def badge(self) -> str:
        """The header badge (``RW``, ``READ-ONLY``, ``SNAPSHOT``); a reactive the header watches."""

    @property
    def integrity(self) -> str:
        """The integrity line of the status bar; a reactive the status bar watches."""

    @property
    def first_run(self) -> bool:
        """True the first time the app runs for this user (the status bar then shows where the keys are)."""

    @property
    def quitting(self) -> bool:
        """True once a quit began."""

    @property
    def user_keymap(self) -> dict[str, str]:
        """The user's ``[keymap]`` (config.toml) as applied: action id → keys."""

    def open_transcript(self, session_id: str) -> None:
        """Push the transcript screen of ``session_id``."""

    async def wait_opened(self, timeout: float = ...) -> None:
        """Wait, the event loop running on, until the first opening ended (at most ``timeout`` seconds)."""

    def take_first_page(self, sd: SessionDir) -> SessionPage | None:
        """The first window of the session list read with ``sd`` when it opened, once; None otherwise."""

    def show_section_screen(self, screen_type: type[Screen[Any]]) -> None:
        """Make a screen of ``screen_type`` current (a top-level section)."""

    def start_integrity_check(self) -> None:
        """Start the deferred integrity checks (once, after the first rows are painted)."""

    def open_demo(self) -> None:
        """Build (or reuse) the demo directory and open it."""

    def resolve_and_open(self, text: str) -> None:
        """Find the session whose id is or starts with ``text`` and open its transcript."""

    def ordered_theme_names(self) -> list[str]:
        """Theme names in the order the palette offers them."""


def services(node: DOMNode) -> AppServices | None:
    """The app of ``node`` as :class:`AppServices`; ``None`` when it is not Sessionscope's app (a test host)."""
    app = node.app
    return app if isinstance(app, AppServices) else None


def store(node: DOMNode) -> SessionDir | None:
    """The app's open session directory, or ``None`` (none open yet, or a test host without one)."""
    app = services(node)
    return app.sd if app is not None else None
