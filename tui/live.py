"""Live updates: the lease bus and the file watcher turned into "re-read these sessions" for the screens.

:class:`LiveUpdates` is started by the app once the store is open and stopped when it exits. Two sources feed it:

* the lease bus (:class:`store.mothx.bus.BusListener`): each accepted datagram that concerns this directory's
  ``sessions.db`` names one session (a ``database_rebuilt`` names them all);
* the file watcher (:class:`store.mothx.watch.SessionDirWatcher`) for writers that do not announce themselves:
  a change of ``sessions.db`` or its ``-wal`` runs :func:`store.mothx.watch.change_probe`, which says which sessions'
  entries, run events, runs or leases changed (or that something it cannot attribute did: refresh everything
  shown).

Both run on their own threads. They only add session ids to one pending set; the first addition posts one
:class:`LiveFlush` to the app, whose handler calls :meth:`LiveUpdates.flush` on the UI thread, which hands the
whole set to every screen of the stack as one :class:`LiveChanged`. Batches are paced: the first change after a
quiet spell is handed over at once, later ones at most once per flush interval (a timer on the UI side flushes
what gathered meanwhile). The interval is :data:`FLUSH_INTERVAL_S` (50 ms) and doubles, up to
:data:`MAX_FLUSH_INTERVAL_S` (250 ms), for as long as every batch had to wait for it — a sustained flood costs
at most four batches a second, a runtime's occasional announcement is shown at once. The pending set is bounded: an "everything changed" hint (``database_rebuilt``,
an unexplained file change) absorbs the ids, and more than :data:`MAX_PENDING` distinct ids become "everything".
A flood of 30,000 datagrams therefore costs the UI O(1) messages and at most one batch per flush interval, and
each screen re-reads at most one batch at a time (the next batch waits for the last read to finish).

A notification is only a hint. Nothing a datagram carries is ever shown: the screens re-read the named
sessions from SQLite and show what the database says.

With ``publish=True`` (read-write mode) the lease engine's publish hook is connected to a
:class:`store.mothx.bus.BusPublisher`, so Sessionscope's own repairs announce ``acquired`` / ``released`` /
``state_changed`` as a runtime would; our own datagrams are skipped by our listener (same origin id).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from textual.app import App

    from store.mothx.bus import BusHint, BusListener, BusPublisher
    from store.mothx.sessiondir import SessionDir
    from store.mothx.watch import SessionDirWatcher, WatchHint


FLUSH_INTERVAL_S = 0.05
"""The shortest time between two batches of live changes handed to the screens."""

MAX_FLUSH_INTERVAL_S = 0.25
"""The longest: while changes keep coming (every batch had to wait), the interval doubles up to this."""

MAX_PENDING = 256
"""More distinct pending session ids than this are handed over as "everything changed"."""

JOIN_TIMEOUT_S = 1.0


class LiveFlush(Message):
    """Posted to the app from a listener thread: pending changes are waiting (see :meth:`LiveUpdates.flush`)."""


class LiveReady(Message, bubble=False):
    """Live updates finished starting (what :meth:`LiveUpdates.describe` says changed): posted to the app, which
    hands it to every screen of the stack."""


@dataclass
class LiveChanged(Message, bubble=False):
    """Sessions changed in the database (a hint: re-read them). ``everything``: refresh all that is shown.

    Posted to each screen of the stack (:func:`deliver`); it does not bubble on to the app."""

    sessions: frozenset[str]
    everything: bool = False
    source: str = ""  # "bus", "watch", "bus+watch"

    def concerns(self, session_id: str) -> bool:
        return self.everything or session_id in self.sessions


@dataclass(frozen=True)
class LiveStats:
    bus: str
    watch: str
    hints: int  # bus hints about this directory
    probes: int  # file-change probes run
    flushes: int  # batches handed to the screens


class LiveUpdates:
    """Listens on the lease bus and watches the session directory; tells the app's screens what to re-read."""

    def __init__(self, app: App[Any], sd: SessionDir, *, bus: bool = True, watch: bool = True,
                 port: int | None = None, publish: bool = False) -> None:
        self.app = app
        self.sd = sd
        self.want_bus = bus
        self.want_watch = watch
        self.port = port
        self.publish = publish
        self.listener: BusListener | None = None
        self.watcher: SessionDirWatcher | None = None
        self.publisher: BusPublisher | None = None
        self._identity = ""
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._everything = False
        self._sources: set[str] = set()
        self._posted = False
        self._stopped = False
        self._started = threading.Event()
        self._hints = 0
        self._probes = 0
        self._flushes = 0
        self._reopen_noted = False
        self._last_flush = float("-inf")
        self._timer_armed = False
        self._streak = 0  # consecutive batches that had to wait for the interval
        self._start_thread: threading.Thread | None = None
        self.flush_interval = FLUSH_INTERVAL_S
        self.clock: Callable[[], float] = time.monotonic

    # --- lifecycle --------------------------------------------------------------------------------------------

    def start(self, *, wait: bool = False) -> None:
        """Bind the bus, start watching and take the change probe's baseline (on a thread; ``wait`` blocks)."""
        thread = threading.Thread(target=self._start, name="sessionscope-live-start", daemon=True)
        self._start_thread = thread
        thread.start()
        if wait:
            self._started.wait(10.0)

    def _start(self) -> None:
        try:
            from store.mothx.bus import BusListener, database_identity, install_publisher

            self._identity = database_identity(self.sd.db_path)
            if self.publish and self.sd.writable and not self._stopped:
                self.publisher = install_publisher(port=self.port)
            if self.want_bus and not self._stopped:
                listener = BusListener(self._on_hint, port=self.port)
                listener.start()
                self.listener = listener
            if self.want_watch and not self._stopped:
                from store.mothx.watch import SessionDirWatcher, change_probe

                change_probe(self.sd)  # the baseline: the first change after this is attributed
                watcher = SessionDirWatcher(self.sd.root, self._on_file_change)
                watcher.start()
                self.watcher = watcher
        except Exception:  # noqa: BLE001 - live updates are optional; manual refresh still works
            pass
        finally:
            self._started.set()
            if self._stopped:
                self._close()
            else:
                self.app.post_message(LiveReady())

    def stop(self) -> None:
        """Stop listening and watching, and disconnect the publisher. Safe to call more than once.

        Every thread involved is a daemon; the start-up thread is joined for at most a second (it closes what it
        opened itself when it finishes after this), the listener's and the watcher's by their ``close``/``stop``.
        """
        self._stopped = True
        thread = self._start_thread
        if thread is not None and thread is not threading.current_thread() and not self._started.is_set():
            thread.join(timeout=JOIN_TIMEOUT_S)
        if self._started.is_set():
            self._close()

    def _close(self) -> None:
        listener, self.listener = self.listener, None
        watcher, self.watcher = self.watcher, None
        publisher, self.publisher = self.publisher, None
        if listener is not None:
            listener.close()
        if watcher is not None:
            watcher.stop()
        if publisher is not None:
            from store.mothx.bus import installed_publisher, uninstall_publisher

            if installed_publisher() is publisher:
                uninstall_publisher()
            else:
                publisher.close()

    @property
    def ready(self) -> bool:
        return self._started.is_set()

    def wait_ready(self, timeout: float = 10.0) -> bool:
        return self._started.wait(timeout)

    # --- sources (called on their threads) --------------------------------------------------------------------

    def _on_hint(self, hint: BusHint) -> None:
        if self._stopped or not hint.concerns(self._identity):
            return
        self._hints += 1
        if hint.type == "database_rebuilt" or not hint.session_id:
            self._add((), everything=True, source="bus")
        else:
            self._add((hint.session_id,), source="bus")

    def _on_file_change(self, hint: WatchHint) -> None:
        if self._stopped or not (hint.content_changed or hint.writer_started):
            return
        from store.mothx.watch import change_probe

        self._probes += 1
        try:
            changes = change_probe(self.sd)
        except Exception:  # noqa: BLE001 - e.g. the directory closed while quitting
            return
        if changes.reopen_needed and not self._reopen_noted:
            self._reopen_noted = True
            self.app.call_from_thread(
                self.app.notify,
                "Another process is writing to this directory, which was opened as a snapshot of it; "
                "reopen it to see live changes.",
                title="Live updates", severity="warning",
            )
        if changes.first or not changes.changed:
            return
        self._add(changes.sessions, everything=changes.unexplained or changes.membership_changed, source="watch")

    def _add(self, sessions: tuple[str, ...] | frozenset[str], *, everything: bool = False, source: str) -> None:
        with self._lock:
            self._sources.add(source)
            if everything or self._everything:
                self._everything = True  # absorbs every id: the screens re-read all they show
                self._pending.clear()
            else:
                self._pending.update(sessions)
                if len(self._pending) > MAX_PENDING:
                    self._everything = True
                    self._pending.clear()
            if self._posted:
                return
            self._posted = True
        self.app.post_message(LiveFlush())

    # --- the UI side ------------------------------------------------------------------------------------------

    def take(self) -> LiveChanged | None:
        """The pending changes as one message (and forget them); None when nothing is pending."""
        with self._lock:
            sessions, everything, sources = self._pending, self._everything, self._sources
            self._pending, self._everything, self._sources, self._posted = set(), False, set(), False
        if not sessions and not everything:
            return None
        return LiveChanged(frozenset(sessions), everything, "+".join(sorted(sources)))

    def flush(self) -> None:
        """On the UI thread: hand the pending changes to every screen of the stack.

        Paced: called sooner than :attr:`interval` after the previous batch, it arms one timer for the rest
        of the interval instead (until then the sources post nothing more: the pending set just grows).
        """
        if self._stopped:
            return
        now = self.clock()
        wait = self._last_flush + self.interval - now
        if wait > 0:
            if not self._timer_armed:
                self._timer_armed = True
                self.app.set_timer(wait, self._timer_flush, name="live-flush")
            return
        self._streak = 0
        self._hand_over(now)

    @property
    def interval(self) -> float:
        """The current flush interval: :attr:`flush_interval`, doubled for each batch in a row that waited."""
        return min(MAX_FLUSH_INTERVAL_S, self.flush_interval * (1 << self._streak))

    def _timer_flush(self) -> None:
        self._timer_armed = False
        if self._stopped:
            return
        self._streak = min(self._streak + 1, 8)
        self._hand_over(self.clock())

    def _hand_over(self, now: float) -> None:
        self._last_flush = now
        changed = self.take()
        if changed is None:
            return
        self._flushes += 1
        deliver(self.app, changed)

    def stats(self) -> LiveStats:
        listener, watcher = self.listener, self.watcher
        bus = listener.status if listener is not None else ("lease bus off" if not self.want_bus else "starting")
        watch = watcher.status if watcher is not None else ("file watching off" if not self.want_watch else "starting")
        return LiveStats(bus=bus, watch=watch, hints=self._hints, probes=self._probes, flushes=self._flushes)

    def describe(self) -> str:
        """One short phrase for a status line: ``live: bus :49371 + file watch``."""
        if not self.ready:
            return "live: starting"
        parts = []
        listener, watcher = self.listener, self.watcher
        if listener is not None and listener.available:
            parts.append(f"bus :{listener.port}")
        if watcher is not None and watcher.available:
            parts.append("file watch")
        return "live: " + " + ".join(parts) if parts else "live: off"


def deliver(app: App[Any], changed: LiveChanged) -> None:
    """Hand ``changed`` to every screen of the stack (each re-reads what it shows; hidden ones too)."""
    for screen in list(app.screen_stack):
        screen.post_message(LiveChanged(changed.sessions, changed.everything, changed.source))


def live_wanted(app: App[Any], asked: bool | None) -> bool:
    """Live updates run when asked, and by default only outside tests (a headless app keeps snapshots still)."""
    if asked is not None:
        return asked
    return not app.is_headless


__all__ = ["LiveChanged", "LiveFlush", "LiveReady", "LiveStats", "LiveUpdates", "deliver", "live_wanted"]
