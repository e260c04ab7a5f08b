"""The Sessionscope app: opens a session directory off the UI thread and shows its screens.

Start-up is kept light and uses Textual's public API only: the Sessions screen is the default screen (no blank
screen first). One thread worker (``_open_store``, group ``store-open``), started when the app loads, opens the
store and reads the first window of the list while Textual composes and mounts the screen, then posts
:class:`~tui.messages.StoreOpened`; its one handler (``_store_opened``) takes the store (a Sessions screen that mounts
later attaches itself to it, with the first window read). The
screen's mount awaits it for at most :data:`FIRST_PAINT_HOLD_S` (the loop runs on), then says "Opening…".
On a first open (no list cache yet) the worker reads a provisional window instead (newest sessions by creation,
no counts) and ``_build_list`` builds the cache in the background with a status line, then every screen
re-reads. Work that can wait runs after the first paint (the list cache's check for deleted entries, the
integrity check, both remembered against the database file's identity so an unchanged file is not checked
again); everything the first screen does not need (SQLModel, the transcript screen, the palette's provider,
help, the filter box) is imported only when used.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App
from textual.reactive import reactive

from store import config, times
from store.mothx.db import OpenMode
from tui import actions, end_startup_gc
from tui.app_keys import AppKeys
from tui.background import BackgroundWork
from tui.context import OpensWithStore, ShowsSessionList
from tui.formatting import tildify
from tui.lifecycle import (
    QUIT_WAIT_S,
    DaemonExecutor,
    Interrupts,
    ReportsWorkerFailures,
    close_bounded,
    join_stragglers,
)
from tui.live import LiveFlush, LiveReady, LiveUpdates, live_wanted
from tui.messages import (
    StoreFailed,
    StoreOpened,
    WorkerFailed,
)
from tui.opening import (
    LIST_BUILDING,
    ListBuilt,
    ListVerified,
    Opened,
    integrity_line,
    open_and_read,
    quick_check_aside,
)
from tui.safe import notify
from tui.start import Start, first_read, first_screen
from tui.theming import DEFAULT_THEME, THEMES_DIR, load_themes
from tui.widgets.badge import badge_text

if TYPE_CHECKING:
    from textual.command import Provider
    from textual.screen import Screen
    from textual.theme import Theme

    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionPage

__all__ = [
    "FIRST_PAINT_HOLD_S",
    "LIST_BUILDING",
    "QUIT_WAIT_S",
    "DaemonExecutor",
    "Interrupts",
    "ListBuilt",
    "ListVerified",
    "Opened",
    "ReportsWorkerFailures",
    "SessionscopeApp",
    "close_bounded",
    "integrity_line",
    "join_stragglers",
    "open_and_read",
    "quick_check_aside",
]
"""What other modules and tests import from here (the opening and the life-cycle helpers live in
:mod:`tui.opening` and :mod:`tui.lifecycle`)."""


FIRST_PAINT_HOLD_S = 0.3
"""The longest the first Sessions screen's mount awaits the opening (:meth:`SessionscopeApp.wait_opened`, an
``await``: the event loop, the app's messages and the worker run on), so that its first layout and frame have
the rows instead of "Opening…" drawn moments before them; a slower opening (the first open of a large directory
builds the list cache) shows "Opening…" first."""


_heap_frozen = False


def freeze_startup_heap() -> None:
    """Put what start-up has built so far (modules, classes, functions, kept for the life of the process) out of
    the cyclic garbage collector's reach, once per process (:func:`gc.freeze`). Otherwise the first full collection
    comes during the first frame and walks all of it: tens of milliseconds, most of the time a screen's first paint
    spends in Python beyond a minimal Textual app's."""
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.freeze()


def first_run_marker() -> Path:
    """A file in the user data folder whose presence says the app has run before for this user."""
    from store.paths import data_dir

    return data_dir() / "first-run-done"


def _commands_provider() -> type[Provider]:
    from tui.palette import SessionscopeCommands

    return SessionscopeCommands


class SessionscopeApp(BackgroundWork, AppKeys, App[object]):
    """Browse and repair a mothx session directory (its keys and screen changes: :class:`tui.app_keys.AppKeys`;
    the work after opening: :class:`tui.background.BackgroundWork`)."""

    TITLE = "Sessionscope"
    # Absolute paths (subclasses in other folders keep them). The Sessions screen's file is listed here too:
    # Textual does not load CSS_PATH of the default screen, which the Sessions screen is.
    CSS_PATH: ClassVar = [
        Path(__file__).with_name("app.tcss"),
        Path(__file__).parent / "screens" / "sessions.tcss",
    ]
    BINDINGS: ClassVar = actions.bindings("app")
    COMMANDS: ClassVar = {_commands_provider}
    HELP_TITLE: ClassVar[str] = "Everywhere"

    location: reactive[str] = reactive("")
    """The session directory shown in the header (home as ``~``)."""
    badge: reactive[str] = reactive("RW")
    """The header badge: ``RW``, ``READ-ONLY`` or ``SNAPSHOT``."""
    integrity: reactive[str] = reactive("")
    """The integrity line of the status bar (``integrity ok`` or the failure)."""

    def __init__(
        self,
        session_dir: Path | None,
        mode: OpenMode = OpenMode.READ_WRITE,
        *,
        clock: Callable[[], float] | None = None,
        themes_dir: Path | None = None,
        live: bool | None = None,
        start: Start | None = None,
    ) -> None:
        freeze_startup_heap()
        super().__init__()
        self.start = start or Start()
        """The first screen's section (``--section``); the Sessions screen by default."""
        self.interrupts = Interrupts()
        self._quitting = False
        self._quit_deadline: float | None = None
        self._executor: DaemonExecutor | None = None
        self.live: LiveUpdates | None = None
        self._live_asked = live  # None: live updates outside tests only (see tui.live.live_wanted)
        self.session_dir: Path | None = None if session_dir is None else Path(session_dir)
        self.mode = mode
        self.clock: Callable[[], float] = clock or time.time
        self.sd: SessionDir | None = None
        self.open_error: str = ""
        self.user_keymap: dict[str, str] = {}
        self.startup_problems: list[str] = []
        self._integrity_started = False
        loaded = load_themes(themes_dir or THEMES_DIR)
        self.startup_problems.extend(loaded.problems)
        self.theme_names: list[str] = []
        for theme in loaded.themes:
            self.register_theme(theme)
            self.theme_names.append(theme.name)
        self.settings = config.load()
        self.first_run = not first_run_marker().exists()
        """The first time the app runs for this user: the status bar shows where the keys are."""
        """config.toml as read at start (theme, keymap, …; see :mod:`store.config`)."""
        self.startup_problems.extend(self.settings.problems)
        if self.settings.migrated:
            self.startup_problems.append(
                f"{' and '.join(self.settings.migrated)} moved into {tildify(str(self.settings.path))} "
                "(the old files were renamed *.migrated).")
        times.set_display(self.settings.text("time_zone") or "UTC", self.settings.text("date_format"))
        wanted = self.settings.text("theme")
        if wanted and wanted in self.available_themes:
            self.theme = wanted
        elif DEFAULT_THEME in self.available_themes:
            if wanted and wanted != DEFAULT_THEME:
                self.startup_problems.append(f"{tildify(str(self.settings.path))}: there is no theme '{wanted}'; "
                                             f"using {DEFAULT_THEME}.")
            self.theme = DEFAULT_THEME
        # A store opened by a worker but not yet taken by _store_opened (a quit closes it); guarded by the lock.
        self._open_lock = threading.Lock()
        self._pending_sd: SessionDir | None = None
        self.first_page: tuple[SessionDir, SessionPage | None] | None = None
        """The first window read with the store, for a Sessions screen that mounts after it opened."""
        self._first_read: tuple[SessionDir, object] | None = None
        """Another first screen's first page read with the store (:func:`tui.start.first_read`), until taken."""
        self._first_screen: Screen[Any] | None = None
        self._opened = asyncio.Event()
        """Set once the first opening ended (StoreOpened or StoreFailed handled, or the app quit)."""
        self._building_for: SessionDir | None = None
        """The store whose list cache is being built (its rows on screen are provisional), or None."""
        if self.session_dir is not None:
            self.location = tildify(self.session_dir)
        self.badge = mode.badge

    @property
    def quitting(self) -> bool:
        """True once a quit began (a worker interrupted by it is not reported as failed)."""
        return self._quitting

    # --- start-up ---------------------------------------------------------------------------------------------

    async def on_load(self) -> None:
        # Thread workers run on the loop's default executor: make it one whose threads never keep the process
        # alive (see DaemonExecutor).
        self._executor = DaemonExecutor()
        if self._quit_deadline is not None:
            self._executor.deadline = self._quit_deadline
        asyncio.get_running_loop().set_default_executor(self._executor)
        if self.session_dir is None:
            self._opened.set()
            return
        # The store opens while Textual starts the driver, composes and mounts the first screen (Load comes
        # before all three). One turn of the loop lets the worker's task start its thread now.
        self._open_store(self.session_dir, self.mode, prefetch=True)
        await asyncio.sleep(0)

    def take_first_page(self, sd: SessionDir) -> SessionPage | None:
        """The first window read with ``sd`` when it opened, once (later reads are fresh); None otherwise."""
        taken, self.first_page = self.first_page, None
        return taken[1] if taken is not None and taken[0] is sd else None

    def take_first_read(self, sd: SessionDir) -> object | None:
        """The first page of another first screen (``--section``) read with ``sd`` when it opened, once."""
        taken, self._first_read = self._first_read, None
        return taken[1] if taken is not None and taken[0] is sd else None

    async def wait_opened(self, timeout: float = FIRST_PAINT_HOLD_S) -> None:
        """Wait (asynchronously: the event loop runs on) until the opening worker's StoreOpened or StoreFailed
        was handled, for at most ``timeout`` seconds. The first screen's mount does this (see
        :data:`FIRST_PAINT_HOLD_S`)."""
        if self._opened.is_set():
            return
        try:
            await asyncio.wait_for(self._opened.wait(), timeout)
        except TimeoutError:
            pass

    def on_mount(self) -> None:
        if self.first_run:
            try:  # best effort: the hint shows again next time when the data folder cannot be written
                marker = first_run_marker()
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            except OSError:
                pass
        self._apply_user_keymap()
        if self.session_dir is None:
            self.call_after_refresh(end_startup_gc)  # the welcome screen opens no store
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        for problem in self.startup_problems:
            notify(self, problem, title="Settings", severity="warning")

    def get_default_screen(self) -> Screen[Any]:
        """The first screen is the real one (no blank default screen to compose and paint first)."""
        if self.session_dir is None:
            from store.config import default_root
            from tui.screens.welcome import WelcomeScreen

            return WelcomeScreen(default_root(self.settings))
        if not self.start.is_default:
            self._first_screen = first_screen(self.start)
            return self._first_screen
        from tui.screens.sessions import SessionsScreen

        return SessionsScreen()

    def _apply_user_keymap(self) -> None:
        """config.toml's [keymap] (its problems were notified with the other settings')."""
        path = self.settings.path
        keymap = self.settings.keymap
        self.user_keymap = dict(keymap)
        if keymap:
            self.set_keymap(keymap)
        # The action table is static: every id is known now, before any screen module is imported.
        for action_id in actions.unknown_ids(keymap):
            notify(self, f"{tildify(str(path))}: unknown action id '{action_id}'.", title="Keymap",
                   severity="warning")

    @work(thread=True, exclusive=True, group="store-open", exit_on_error=False, description="Open the session directory")
    def _open_store(self, path: Path, mode: OpenMode, *, prefetch: bool = False) -> None:
        """The one opening worker: open ``path`` (and read the first window), then post StoreOpened or
        StoreFailed. A store opened after a quit, or by a worker a newer opening replaced, is closed here."""
        from textual.worker import get_current_worker

        worker = get_current_worker()
        start = self.start
        reader = None if start.is_default else (lambda sd: first_read(start, sd, self.clock()))
        opened = open_and_read(path, mode, prefetch=prefetch, interrupts=self.interrupts, reader=reader)
        with self._open_lock:
            stale = self._quitting or worker.is_cancelled
            if not stale and opened.sd is not None:
                self._pending_sd = opened.sd
        if stale:
            if opened.sd is not None:
                opened.sd.close()
            return
        if opened.sd is None:
            self.post_message(StoreFailed(path, opened.error))
            return
        if opened.provisional:
            self._building_for = opened.sd  # read by _store_opened, on the UI thread, after this message
        self.post_message(StoreOpened(opened.sd, opened.first_page, opened.first_read))

    @on(StoreOpened)
    def _store_opened(self, message: StoreOpened) -> None:
        with self._open_lock:
            if self._pending_sd is message.sd:
                self._pending_sd = None
            if self._quitting:
                return  # on_unmount closes it
        old = self.sd
        self.sd = message.sd
        self.open_error = ""
        if old is not None and old is not message.sd:
            old.close()
        self.location = tildify(message.sd.root)
        self.badge = badge_text(message.sd.mode.badge, message.sd.writable)
        first_page = message.first_page
        for screen in self.screen_stack:
            # A screen not mounted yet attaches itself when it mounts (it takes app.sd and app.first_page).
            if isinstance(screen, ShowsSessionList) and screen.is_mounted:
                screen.attach(message.sd, first_page=first_page)
                first_page = None
        self.first_page = None if first_page is None else (message.sd, first_page)
        self._first_read = None if message.first_read is None else (message.sd, message.first_read)
        first = self._first_screen
        if isinstance(first, OpensWithStore) and first.is_mounted and first.sd is None:
            # Another section's first screen that mounted before the store opened (a slow opening).
            first.attach_opened(message.sd, self.take_first_read(message.sd))
        self.refresh_bindings()
        self._opened.set()
        if self._building_for is not message.sd:
            self._building_for = None  # (a build of a store opened before this one is of no interest now)
        else:
            self.integrity = LIST_BUILDING
            self._build_list(message.sd)
        self._start_live(message.sd)
        self.call_after_refresh(end_startup_gc)  # the first rows are painted by then (see tui/__init__.py)
        # The integrity check waits for the first window of rows (SessionsScreen asks for it); a fallback
        # starts it anyway a little later when no list asked.
        self.set_timer(1.0, self.start_integrity_check)

    @on(StoreFailed)
    def _store_failed(self, message: StoreFailed) -> None:
        from tui.screens.welcome import OpenFailedScreen

        end_startup_gc()
        self.open_error = message.error
        self._opened.set()
        notify(self, message.error, title="Cannot open the session directory", severity="error", timeout=10)
        screen = OpenFailedScreen(message.path, message.error)
        if isinstance(self.screen, OpenFailedScreen) and len(self.screen_stack) > 1:
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    # --- live updates -----------------------------------------------------------------------------------------

    def _start_live(self, sd: SessionDir) -> None:
        """Listen on the lease bus and watch the directory (not for a snapshot: nothing writes to a copy)."""
        if self.live is not None:
            self.live.stop()
            self.live = None
        if not live_wanted(self, self._live_asked) or sd.mode is OpenMode.SNAPSHOT:
            return
        self.live = LiveUpdates(self, sd, publish=sd.writable)
        self.live.start()

    @on(LiveFlush)
    def _live_flush(self, message: LiveFlush) -> None:
        if self.live is not None:
            self.live.flush()

    @on(LiveReady)
    def _live_ready(self, message: LiveReady) -> None:
        for screen in list(self.screen_stack):  # a status line that says "live: starting" says what it is now
            screen.post_message(LiveReady())
    # --- themes -----------------------------------------------------------------------------------------------

    def ordered_theme_names(self) -> list[str]:
        """Our TOML themes first, then Textual's built-in ones."""
        rest = sorted(name for name in self.available_themes if name not in self.theme_names and name != "textual-ansi")
        return [*self.theme_names, *rest]

    def refresh_css(self, animate: bool = True) -> None:
        """Textual's refresh, except before the first screen: the theme chosen in ``__init__`` asks for one, and
        nothing is styled yet, so the new variables are all it needs (the first parse, when the first screen is
        styled, uses them). Without this the whole CSS is parsed twice before the first paint."""
        if not self.screen_stack:
            self.stylesheet.set_variables(self.get_css_variables())
            return
        super().refresh_css(animate)

    def _theme_changed(self, theme: Theme) -> None:
        try:
            config.remember("theme", theme.name)
        except OSError as exc:
            notify(self, f"The theme could not be remembered: {exc.strerror or exc}.", severity="warning")

    # --- failed workers -----------------------------------------------------------------------------------------

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        """Every worker that ended in an exception it did not catch: one notification with the reason."""
        worker = message.worker
        what = worker.description if worker.description and not worker.description.startswith("<") else ""
        title = f"{what} failed" if what else "A background task failed"
        group = message.group
        # what the app's own workers left "…ing" ends here; opening failures have their own screen and notice
        if group == "store-open" and self.sd is None:
            self.post_message(StoreFailed(self.session_dir, message.reason))  # not "Opening…" for ever
            return
        if group == "demo":
            self.post_message(StoreFailed(None, f"The demo directory could not be built: {message.reason}"))
            return
        notify(self, message.reason, title=title, severity="error", timeout=10)
        if group == "integrity":
            self.integrity = integrity_line(message.reason)
        elif group == "resolve-session":
            from tui.palette import OpenSessionDialog

            if isinstance(self.screen, OpenSessionDialog):
                self.screen.show_error(message.reason)

    # --- quitting ---------------------------------------------------------------------------------------------

    def exit(self, result: object | None = None, return_code: int = 0, message: Any = None) -> None:
        """Quit, and stop every SQLite call in flight first: nothing a worker does keeps the app waiting."""
        self._begin_quit()
        super().exit(result, return_code, message)

    def _begin_quit(self) -> None:
        if self._quit_deadline is None:
            # One deadline for the whole quit: closing the stores, the thread workers and the threads the
            # interpreter joins share QUIT_WAIT_S (each waited up to its own second before).
            self._quit_deadline = time.monotonic() + QUIT_WAIT_S
            if self._executor is not None:
                self._executor.deadline = self._quit_deadline
        self._quitting = True
        self.interrupts.stop()

    def _quit_left(self) -> float:
        """What is left of the quit's :data:`QUIT_WAIT_S` (all of it before a quit)."""
        if self._quit_deadline is None:
            return QUIT_WAIT_S
        return max(0.0, self._quit_deadline - time.monotonic())

    def on_unmount(self) -> None:
        end_startup_gc()
        self._begin_quit()
        self._opened.set()
        if self.live is not None:
            self.live.stop()
            self.live = None
        stores: list[SessionDir] = [] if self.sd is None else [self.sd]
        with self._open_lock:  # opened but never taken (the app quit first); one still opening closes itself
            pending, self._pending_sd = self._pending_sd, None
        if pending is not None and pending is not self.sd:
            stores.append(pending)
        self.first_page = None
        if stores:
            close_bounded(stores, self.interrupts, wait_s=self._quit_left())

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`App.run`, then a bounded wait for the threads the interpreter's exit would join (see
        :func:`join_stragglers`: the store's parallel scans run on a pool of their own); when some still run
        after :data:`QUIT_WAIT_S`, the process ends now, the terminal already restored, instead of waiting."""
        result = super().run(*args, **kwargs)
        if not join_stragglers(self._quit_left()):
            code = self.return_code
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code if isinstance(code, int) else 0)
        return result
