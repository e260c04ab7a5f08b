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
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

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

    def take_first_read(self, sd: SessionDir) -> object | None:
        """Another first screen's first page (``--section``) read with ``sd`` when it opened, once."""

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


# Whether an app class implements the protocol, checked once per class: a runtime protocol's ``isinstance`` walks
# every member each time (about 0.3 ms, and the lists ask on every drawn row), and each member is the class's own.
_implements: dict[type, bool] = {}


def services(node: DOMNode) -> AppServices | None:
    """The app of ``node`` as :class:`AppServices`; ``None`` when it is not Sessionscope's app (a test host)."""
    app = node.app
    known = _implements.get(type(app))
    if known is None:
        known = _implements[type(app)] = isinstance(app, AppServices)
    return cast("AppServices", app) if known else None


def store(node: DOMNode) -> SessionDir | None:
    """The app's open session directory, or ``None`` (none open yet, or a test host without one)."""
    app = services(node)
    return app.sd if app is not None else None


class OpensWithStore:
    """A section screen that may be the app's first screen: its mount awaits the opening with
    :func:`opened_store`, and the app calls :meth:`attach_opened` when the store opened after it mounted."""

    sd: SessionDir | None

    def attach_opened(self, sd: SessionDir, first: object | None) -> None:
        """Show ``sd``; ``first`` is this screen's first page read by the opening worker (or None)."""
        raise NotImplementedError


class ShowsSessionList:
    """The Sessions screen, as the app sees it when the store opens (the app need not import the screen for that:
    another section's first screen paints without it)."""

    def attach(self, sd: SessionDir, first_page: SessionPage | None = None) -> None:
        """Show the sessions of ``sd``; ``first_page`` is the first window of the default query, if read already."""
        raise NotImplementedError


async def opened_store(screen: Screen[Any]) -> tuple[SessionDir | None, object | None]:
    """For a screen's mount: the open store (awaiting the first opening a moment, so that the first frame has the
    rows) and the first page the opening worker read for it, if any."""
    app = services(screen)
    if app is None:
        return None, None
    if app.sd is None:
        await app.wait_opened()
    sd = app.sd
    return sd, (app.take_first_read(sd) if sd is not None else None)
