"""``q`` always quits, at once: right after the first paint, many times, on a large directory, and as a real
process in a pseudo-terminal while the list cache of a fresh directory is still being built.

Nothing may keep the process alive after ``q``: thread workers run on daemon threads (their executor waits a
bounded time), the store's SQLite calls are interrupted, the store is closed with a bound, and a thread that is
not a daemon (the store's parallel scans) is joined with a bound before the process ends anyway.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import sqlite3
import struct
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from tests.benchmarks.generate import LargeDirSpec, build_large_dir
from tui.app import Interrupts, SessionscopeApp, close_bounded

pytestmark = pytest.mark.anyio

SPEC = LargeDirSpec(sessions=3000, entries=60_000, big_session_entries=5_000, medium_session_entries=500)
RUNS = 30
QUIT_BOUND_S = 5.0
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def large_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("quit") / "sessions"
    build_large_dir(path, SPEC)
    return path


def _threads_left() -> list[threading.Thread]:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


async def test_q_right_after_the_first_paint_quits_at_once_every_time(
    large_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.sessions import list_sessions

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with open_session_dir(large_dir, OpenMode.READ_ONLY) as sd:
        list_sessions(sd, limit=10)  # the list cache is built once: the runs below start as a user's would
    slowest = 0.0
    for run in range(RUNS):
        app = SessionscopeApp(large_dir, OpenMode.READ_ONLY if run % 2 else OpenMode.READ_WRITE)
        async with app.run_test(size=(120, 36)) as pilot:
            started = time.monotonic()
            await pilot.press("q")
            while app.is_running and time.monotonic() - started < QUIT_BOUND_S:
                await pilot.pause(0.01)
        took = time.monotonic() - started
        slowest = max(slowest, took)
        assert took < QUIT_BOUND_S, f"run {run}: quitting took {took:.1f} s"
        assert app.return_code == 0, f"run {run}: return code {app.return_code}"
        assert app._exception is None, f"run {run}: {app._exception!r}"  # noqa: SLF001
    assert not _threads_left(), f"threads keep running after quit: {_threads_left()}"
    assert slowest < QUIT_BOUND_S


def test_closing_interrupts_a_query_that_holds_the_store(large_dir: Path, tmp_path: Path) -> None:
    """A worker inside a long query holds the store's lock: closing interrupts it instead of waiting."""
    from store.mothx.sessiondir import open_session_dir

    sd = open_session_dir(large_dir, OpenMode.READ_ONLY)
    interrupts = Interrupts()
    interrupts.add(sd.db.conn)
    failed: list[BaseException] = []
    entered = threading.Event()

    def long_query() -> None:
        try:
            with sd.db.read() as conn:
                entered.set()
                conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                             "SELECT count(*) FROM c").fetchone()  # endless: only an interrupt ends it
        except BaseException as exc:  # noqa: BLE001 - the interrupt, as the store reports it
            failed.append(exc)

    worker = threading.Thread(target=long_query, daemon=True)
    worker.start()
    assert entered.wait(5)
    time.sleep(0.1)
    started = time.monotonic()
    interrupts.stop()
    assert close_bounded([sd], interrupts, wait_s=3.0), "the store was closed"
    worker.join(3.0)
    assert not worker.is_alive() and failed, "the query was interrupted"
    assert time.monotonic() - started < 3.0
    with pytest.raises(sqlite3.ProgrammingError):
        sd.db.conn.execute("SELECT 1")  # closed


def _run_in_pty(args: list[str], env: dict[str, str], *, first_paint: bytes, timeout: float) -> tuple[float, bytes]:
    """Start ``args`` in a pseudo-terminal, wait for ``first_paint`` in its output, press ``q``; return how long
    the process took to end after that, and its output. Kills it (and fails) when it outlives ``timeout``."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.execve(args[0], args, env)
    fcntl_size = struct.pack("HHHH", 36, 120, 0, 0)
    import fcntl

    fcntl.ioctl(fd, termios.TIOCSWINSZ, fcntl_size)
    output = b""
    reaped = False
    pressed_at: float | None = None
    deadline = time.monotonic() + 60
    try:
        while True:
            now = time.monotonic()
            if pressed_at is None and first_paint in output:
                os.write(fd, b"q")
                pressed_at = now
            if pressed_at is not None and now - pressed_at > timeout:
                raise AssertionError(f"the process was still alive {timeout} s after q")
            if now > deadline:
                raise AssertionError(f"no first paint within 60 s: {output[-400:]!r}")
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                output += chunk
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                reaped = True
                assert pressed_at is not None, f"the app ended before q: {output[-400:]!r}"
                assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"exit status {status}"
                return time.monotonic() - pressed_at, output
    finally:
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TERM": "xterm-256color",
        "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config"), "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
    }


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal test")
def test_q_ends_the_process_while_a_fresh_directory_is_being_indexed(large_dir: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "copy" / "sessions"
    shutil.copytree(large_dir, fresh)
    took, _output = _run_in_pty([sys.executable, "-m", "tui", "--dir", str(fresh)], _env(tmp_path / "home"),
                                first_paint=b"Sessionscope", timeout=QUIT_BOUND_S + 5)
    assert took < QUIT_BOUND_S, f"the process ended {took:.1f} s after q"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal test")
def test_q_ends_the_process_while_the_store_is_stuck_in_sqlite(large_dir: Path, tmp_path: Path) -> None:
    """The store never finishes listing (an endless query on its connection, a pool thread scanning): the first
    paint says "Opening…", and q still ends the process within the bound."""
    took, _output = _run_in_pty([sys.executable, "-m", "tests.tui.slowstore", "--dir", str(large_dir)],
                                _env(tmp_path / "home"), first_paint=b"Sessionscope", timeout=QUIT_BOUND_S + 5)
    assert took < QUIT_BOUND_S, f"the process ended {took:.1f} s after q"


def test_worker_threads_are_daemons_and_shutdown_is_bounded() -> None:
    from tui.app import DaemonExecutor

    pool = DaemonExecutor(wait_s=0.2)
    release = threading.Event()
    future = pool.submit(release.wait, 30)
    done = pool.submit(lambda: 42)
    assert done.result(5) == 42
    workers = [t for t in threading.enumerate() if t.name.startswith("sessionscope-worker")]
    assert workers and all(t.daemon for t in workers)
    started = time.monotonic()
    pool.shutdown(wait=True)
    assert time.monotonic() - started < 1.0, "shutdown waits a bounded time for a job still running"
    assert not future.done()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    release.set()
    assert future.result(5) is True
