"""The app's life cycle outside the App class: the SQLite connections a quit interrupts (:class:`Interrupts`),
the event loop's executor whose threads never keep the process alive (:class:`DaemonExecutor`), the mixin
that reports every failed worker (:class:`ReportsWorkerFailures`), and the bounded waits of a quit
(:func:`close_bounded`, :func:`join_stragglers`). :class:`tui.app.SessionscopeApp` uses them; nothing here
imports it."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from textual.worker import Worker, WorkerState

from tui.formatting import describe_error
from tui.messages import WorkerFailed

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from store.mothx.sessiondir import SessionDir


QUIT_WAIT_S = 1.0
"""How long a quit waits, in all, for work still running (thread workers, the store being closed) before the
process ends anyway."""


class Interrupts:
    """The SQLite connections a quit must interrupt (``sqlite3.Connection.interrupt`` is safe from any thread):
    the open store's, one still being opened, and the integrity check's own. Once :meth:`stop` was called,
    every connection added later is interrupted at once, and again each time :meth:`interrupt` runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[int, sqlite3.Connection] = {}
        self.stopping = False

    def add(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            self._conns[id(conn)] = conn
            stopping = self.stopping
        if stopping:
            _interrupt(conn)

    def discard(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            self._conns.pop(id(conn), None)

    def interrupt(self) -> None:
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            _interrupt(conn)

    def stop(self) -> None:
        with self._lock:
            self.stopping = True
        self.interrupt()


def _interrupt(conn: sqlite3.Connection) -> None:
    try:
        conn.interrupt()
    except sqlite3.Error:  # closed already (ProgrammingError is a sqlite3.Error)
        pass


class DaemonExecutor(ThreadPoolExecutor):
    """The event loop's default executor, so every thread worker runs here: one daemon thread per job.

    asyncio's own pool has non-daemon threads that ``asyncio.run`` and the interpreter's exit both join without
    a bound: one worker blocked in a long SQLite call kept the process alive after ``q``. Here :meth:`shutdown`
    waits at most :data:`QUIT_WAIT_S` and a job still running then does not keep the process alive.
    """

    def __init__(self, wait_s: float = QUIT_WAIT_S) -> None:
        super().__init__(max_workers=1, thread_name_prefix="sessionscope-worker")
        self.wait_s = wait_s
        self.deadline: float | None = None
        """The quit's own deadline (``time.monotonic``), when the app set one: the wait ends then at the latest."""
        self._jobs: set[threading.Thread] = set()
        self._jobs_lock = threading.Lock()
        self._closed = False
        self._count = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            try:
                if not future.set_running_or_notify_cancel():
                    return
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            finally:
                with self._jobs_lock:
                    self._jobs.discard(threading.current_thread())

        with self._jobs_lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._count += 1
            thread = threading.Thread(target=run, name=f"sessionscope-worker-{self._count}", daemon=True)
            self._jobs.add(thread)
        thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._jobs_lock:
            self._closed = True
            jobs = list(self._jobs)
        if wait:
            wait_s = self.wait_s if self.deadline is None else min(self.wait_s, self.deadline - time.monotonic())
            deadline = time.monotonic() + max(0.0, wait_s)
            for thread in jobs:
                thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def running(self) -> int:
        with self._jobs_lock:
            return sum(1 for thread in self._jobs if thread.is_alive())


class ReportsWorkerFailures:
    """Mixed into every app, screen and widget that starts workers: a worker that ends in ERROR (an exception it
    did not catch) posts :class:`~tui.messages.WorkerFailed` from the node that started it. The message bubbles
    up to the app, which notifies the reason; a screen or widget on the way may end its "…ing" state. One
    handler for every worker, never a traceback screen (the workers use ``exit_on_error=False``).

    Textual sends ``Worker.StateChanged`` to the worker's node only (it does not bubble), so each such node
    handles it here, by the public naming convention. A subclass that handles ``on_worker_state_changed``
    itself must call this one (a test checks that every class that starts workers has this mixin)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state is not WorkerState.ERROR or worker.error is None:
            return
        node = cast("DOMNode", self)
        from tui.context import services

        app = services(node)
        if app is not None and app.quitting:
            return  # an interrupted query at quit is not news
        # Sent "by the app": Textual stops a bubbling message after its sender's child, so the sender must not
        # be a screen on the way.
        message = WorkerFailed(worker, describe_error(worker.error)).set_sender(node.app)
        if node is node.app or not node.post_message(message):
            node.app.post_message(message)


def close_bounded(stores: list[SessionDir], interrupts: Interrupts, wait_s: float = QUIT_WAIT_S) -> bool:
    """Close ``stores`` on a daemon thread, interrupting their SQLite calls until they are closed (a worker may
    hold a store's lock in a long query), waiting at most ``wait_s``. True when every store was closed."""
    done = threading.Event()

    def close_all() -> None:
        try:
            for sd in stores:
                try:
                    sd.close()
                except Exception:  # noqa: BLE001 - the process is ending: the next open recovers the WAL
                    pass
        finally:
            done.set()

    threading.Thread(target=close_all, name="sessionscope-close", daemon=True).start()
    deadline = time.monotonic() + wait_s
    while not done.wait(0.02):
        interrupts.interrupt()
        if time.monotonic() > deadline:
            return False
    return True


def _exit_joined_threads() -> list[threading.Thread]:
    """The threads the interpreter joins, without a bound, when it exits: those that are not daemons, and every
    thread of a ``concurrent.futures`` pool (its exit hook joins them, daemon or not; the store's parallel scans
    run on such a pool, on a daemon thread's behalf)."""
    from concurrent.futures import thread as futures_thread

    me = threading.current_thread()
    found = {t for t in threading.enumerate() if not t.daemon}
    found.update(getattr(futures_thread, "_threads_queues", {}).keys())
    return [t for t in found if t is not me and t is not threading.main_thread() and t.is_alive()]


def join_stragglers(wait_s: float) -> bool:
    """Join the threads the interpreter's exit would wait for (:func:`_exit_joined_threads`), within ``wait_s``
    in all; True when none is left."""
    deadline = time.monotonic() + wait_s
    for thread in _exit_joined_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    return not _exit_joined_threads()
