"""The app's background work after a directory opened: building the list cache on a first open, checking it
for deleted entries, ``PRAGMA quick_check`` (the status bar's integrity line), and building the demo.

A mixin of :class:`tui.app.SessionscopeApp` (its state lives there); each piece is a thread worker that posts a
message the app handles by the naming convention. Nothing here blocks the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from store.mothx.db import OpenMode
from tui.formatting import describe_error, tildify
from tui.lifecycle import ReportsWorkerFailures
from tui.live import LiveChanged, deliver
from tui.messages import DemoReady, IntegrityChecked, StoreFailed
from tui.opening import ListBuilt, ListVerified, integrity_line, quick_check_aside
from tui.safe import notify

if TYPE_CHECKING:
    from pathlib import Path

    from textual.app import App

    from store.mothx.sessiondir import SessionDir
    from tui.lifecycle import Interrupts

    _Base = App[object]
else:
    _Base = object


class BackgroundWork(ReportsWorkerFailures, _Base):
    """The list cache build and check, the quick check, and the demo build (mixed into the app)."""

    if TYPE_CHECKING:  # the app's state this work reads and sets
        sd: SessionDir | None
        integrity: str
        interrupts: Interrupts
        session_dir: Path | None
        mode: OpenMode
        location: str
        badge: str
        _integrity_started: bool
        _building_for: SessionDir | None
        _quitting: bool

        def _open_store(self, path: Path, mode: OpenMode, *, prefetch: bool = False) -> object: ...

    # --- integrity --------------------------------------------------------------------------------------------

    def start_integrity_check(self) -> None:
        """After the first paint, once: the list cache's deferred check for deleted entries, then ``PRAGMA
        quick_check``, in workers."""
        if self._integrity_started or self.sd is None or self._building_for is not None:
            return  # (while the list cache is built, the checks wait for it: on_list_built starts them)
        self._integrity_started = True
        self._verify_list(self.sd)
        self.integrity = "checking integrity…"
        self._quick_check(self.sd)

    @work(thread=True, exclusive=True, group="list-build", exit_on_error=False, description="Build the list cache")
    def _build_list(self, sd: SessionDir) -> None:
        """The first open of a directory: build the list cache (the screens re-read their rows after), then say
        so."""
        error = ""
        try:
            from store.mothx.sessions import refresh

            refresh(sd)
        except Exception as exc:  # noqa: BLE001 - shown in the status line; the list reports its own reads
            error = describe_error(exc)
        if not self._quitting:
            self.post_message(ListBuilt(sd, error))

    def on_list_built(self, message: ListBuilt) -> None:
        """The list cache exists now: every screen re-reads (real order and counts), then the checks start."""
        if message.sd is not self.sd:
            return
        self._building_for = None
        if message.error:
            self.integrity = f"list cache not built: {message.error}"
            notify(self, message.error, title="The list cache could not be built", severity="error", timeout=10)
        else:
            self.integrity = ""
        deliver(self, LiveChanged(frozenset(), everything=True, source="build"))
        self.start_integrity_check()

    @work(thread=True, exclusive=True, group="list-verify", exit_on_error=False, description="Check the list cache")
    def _verify_list(self, sd: SessionDir) -> None:
        from store.mothx.sessions import verify_list

        # A failure is notified by the app (ReportsWorkerFailures); the next read checks again itself.
        if verify_list(sd):
            self.post_message(ListVerified(sd))

    def on_list_verified(self, message: ListVerified) -> None:
        """Entries were deleted since the list cache was written: every screen re-reads what it shows."""
        if message.sd is self.sd:
            deliver(self, LiveChanged(frozenset(), everything=True, source="verify"))

    @work(thread=True, exclusive=True, group="integrity", exit_on_error=False, description="Integrity check")
    def _quick_check(self, sd: SessionDir) -> None:
        try:
            result = quick_check_aside(sd, self.interrupts)
        except Exception as exc:  # noqa: BLE001 - a failed check is a result to show
            self.post_message(IntegrityChecked(False, describe_error(exc)))
            return
        self.post_message(IntegrityChecked(result.strip().lower() == "ok", result))

    def on_integrity_checked(self, message: IntegrityChecked) -> None:
        if message.ok:
            self.integrity = "integrity ok"
            return
        self.integrity = integrity_line(message.text)
        notify(self, message.text[:2000], title="Integrity check failed", severity="error", timeout=10)

    # --- the demo ---------------------------------------------------------------------------------------------

    def open_demo(self) -> None:
        """Build (or reuse) the demo directory in a worker, then open it read-write."""
        self._build_demo()

    @work(thread=True, exclusive=True, group="demo", exit_on_error=False, description="Build the demo directory")
    def _build_demo(self) -> None:
        try:
            from store.demo.build import ensure_demo

            path = ensure_demo()
        except ImportError:
            self.post_message(StoreFailed(None, "The demo builder (store.demo.build) is not available in this build."))
            return
        except Exception as exc:  # noqa: BLE001 - shown on the error screen as one line
            self.post_message(StoreFailed(None, f"The demo directory could not be built: {describe_error(exc)}"))
            return
        self.post_message(DemoReady(path))

    def on_demo_ready(self, message: DemoReady) -> None:
        from tui.screens.sessions import SessionsScreen

        self.session_dir = message.path
        self.mode = OpenMode.READ_WRITE
        self.location = tildify(message.path)
        self.badge = self.mode.badge
        self._integrity_started = False
        self.integrity = ""
        while len(self.screen_stack) > 1:
            self.pop_screen()
        base = self.screen_stack[0]
        if isinstance(base, SessionsScreen):
            base.reset()
        else:
            self.push_screen(SessionsScreen())
        self._open_store(message.path, self.mode)


__all__ = ["BackgroundWork"]
