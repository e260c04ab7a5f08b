"""Key-to-paint latency on the Sessions screen during a lease-bus flood, against the same without a flood.

    .venv/bin/python -m tests.benchmarks.bench_bus [--datagrams N] [--samples N] [--kind rebuilt|acquired|mixed]
                                                   [--sender thread|process] [--dir PATH]

The app runs headless on a private copy of the demo directory (or of ``--dir``) (``SessionscopeApp(demo_dir, READ_WRITE,
live=True)``, live updates on, the bus on a private UDP port). A sample presses ``j`` and measures the time until
the list draws a line with its cursor moved (``SessionList.render_line`` once the cursor left its row, on the
compositor's next refresh).

1. **quiet**: N samples with no datagram on the bus;
2. **flood**: a thread sends ``--datagrams`` (30,000) valid datagrams to ``127.255.255.255:<port>`` —
   ``database_rebuilt`` for this directory's ``sessions.db``, ``acquired`` for distinct sessions, or both —
   paced in bursts the kernel's receive buffer holds, while samples are taken until the sender is done. The
   sender is a thread of the app's process (``--sender process``: another process, so the listener's thread
   only competes with the UI and receives many more of them).

Prints the medians and 90th percentiles of both, their ratio, how many datagrams the listener received, and how
many batches (``LiveChanged``) and list reloads the UI processed during the flood.

Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BURST = 64          # datagrams sent back to back, then a short pause: the receive buffer never overflows much
PAUSE_S = 0.002


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _datagrams(count: int, kind: str, ident: str, db_path: str) -> list[bytes]:
    origin = f"pid-31337-{secrets.token_hex(16)}"
    out = []
    for n in range(1, count + 1):
        which = kind if kind != "mixed" else ("rebuilt" if n % 2 else "acquired")
        obj: dict[str, object] = {"version": 3, "messageId": f"{origin}-{n}", "originInstanceId": origin, "seq": n}
        if which == "rebuilt":
            obj.update(type="database_rebuilt", path=db_path, databaseIdentity=ident)
        else:
            obj.update(type="acquired", sessionId=f"{n:016x}", databaseIdentity=ident, epoch=1,
                       ownerInstanceId=origin, ownerPid=31337, expiresAt=2_000_000_000, origin="execution")
        out.append(json.dumps(obj, separators=(",", ":")).encode())
    return out


def _flood(port: int, datagrams: list[bytes], done: threading.Event) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sock.connect(("127.255.255.255", port))
    try:
        for i in range(0, len(datagrams), BURST):
            for data in datagrams[i:i + BURST]:
                try:
                    sock.send(data)
                except OSError:
                    pass
            time.sleep(PAUSE_S)
    finally:
        sock.close()
        done.set()


def _flood_from_child(port: int, args: argparse.Namespace, ident: str, folder: Path, done: threading.Event) -> None:
    try:
        subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_bus", "--send", str(port), str(args.datagrams),
                        args.kind, ident, str(folder / "sessions.db")], cwd=ROOT, check=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        done.set()


async def _run(folder: Path, args: argparse.Namespace) -> dict[str, object]:
    from textual import events

    from store.demo.model import DEMO_NOW_UNIX
    from store.mothx.bus import database_identity
    from store.mothx.db import OpenMode
    from tests.tui.appwait import settle
    from tui.app import SessionscopeApp
    from tui.screens.sessions import SessionsScreen
    from tui.widgets import session_list as sl

    port = _free_port()
    os.environ["MOTHX_RUNTIME_BUS_PORT"] = str(port)
    painted: dict[str, float] = {}
    real_render_line = sl.SessionList.render_line
    reloads = [0]
    real_reload = sl.SessionList.reload
    batches = [0]
    real_live = SessionsScreen.on_live_changed

    watch: dict[str, str | None] = {"from": None}

    def spy(self, y):
        # The first line drawn once the cursor has left the row it was on is in the frame that shows it moved
        # (the list's strips are cached by row and cursor state, so watch the drawing, not the strip making).
        row = self.selected
        if watch["from"] is not None and row is not None and row.id != watch["from"]:
            painted.setdefault(row.id, time.perf_counter())
        return real_render_line(self, y)

    def count_reload(self, *args, **kwargs):
        reloads[0] += 1
        return real_reload(self, *args, **kwargs)

    def count_batch(self, message):
        batches[0] += 1
        return real_live(self, message)

    sl.SessionList.render_line = spy  # type: ignore[method-assign]
    sl.SessionList.reload = count_reload  # type: ignore[method-assign]
    SessionsScreen.on_live_changed = count_batch  # type: ignore[method-assign]
    result: dict[str, object] = {}
    app = SessionscopeApp(folder, OpenMode.READ_WRITE, clock=lambda: DEMO_NOW_UNIX, live=True)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)  # type: ignore[arg-type]
            deadline = time.monotonic() + 10
            while (app.live is None or not app.live.ready) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            live = app.live
            assert live is not None and live.listener is not None and live.listener.available, "bus not listening"
            lst = app.screen.query_one(sl.SessionList)
            driver = app._driver
            assert driver is not None
            total = lst.total or 0
            assert total > 4, total

            async def sample() -> float:
                if lst.cursor >= total - 2:
                    lst.cursor = 0
                    await pilot.pause(0.05)
                before = lst.selected
                while before is None:
                    await asyncio.sleep(0.005)
                    before = lst.selected
                painted.clear()
                watch["from"] = before.id
                key = events.Key("j", "j")
                key.set_sender(app)
                t0 = time.perf_counter()
                driver.send_message(key)  # as the terminal driver does (pilot.press would wait for idle)
                limit = t0 + 30
                while not painted:
                    if time.perf_counter() > limit:
                        raise SystemExit("the moved cursor was not painted within 30 s")
                    await asyncio.sleep(0.0005)
                took = min(painted.values()) - t0
                watch["from"] = None
                await asyncio.sleep(0.02)  # a user does not type faster than 50 keys a second
                return took

            for _ in range(3):  # warm up
                await sample()
            quiet = [await sample() for _ in range(args.samples)]
            ident = database_identity(folder)
            datagrams = _datagrams(args.datagrams, args.kind, ident, str(folder / "sessions.db"))
            before = live.listener.stats()
            batches[0] = reloads[0] = 0
            flushes0 = live.stats().flushes
            done = threading.Event()
            if args.sender == "thread":
                sender = threading.Thread(target=_flood, args=(port, datagrams, done), daemon=True)
            else:  # another process floods: the listener then competes with the UI alone
                sender = threading.Thread(target=_flood_from_child, args=(port, args, ident, folder, done),
                                          daemon=True)
            t_flood = time.perf_counter()
            sender.start()
            flood: list[float] = []
            while not done.is_set() or len(flood) < 5:
                flood.append(await sample())
            flood_s = time.perf_counter() - t_flood
            sender.join()
            await pilot.pause(0.5)
            after = live.listener.stats()
            result = {
                "quiet": quiet, "flood": flood, "flood_s": flood_s,
                "received": after.received - before.received, "accepted": after.accepted - before.accepted,
                "batches": batches[0], "reloads": reloads[0], "flushes": live.stats().flushes - flushes0,
                "sessions": total,
            }
    finally:
        sl.SessionList.render_line = real_render_line  # type: ignore[method-assign]
        sl.SessionList.reload = real_reload  # type: ignore[method-assign]
        SessionsScreen.on_live_changed = real_live  # type: ignore[method-assign]
    return result


def _ms(values: list[float]) -> str:
    med = statistics.median(values)
    p90 = statistics.quantiles(values, n=10)[-1] if len(values) >= 2 else values[0]
    return f"median {med * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, max {max(values) * 1000:.1f} ms (n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--datagrams", type=int, default=30_000)
    parser.add_argument("--samples", type=int, default=30, help="quiet samples")
    parser.add_argument("--kind", choices=("rebuilt", "acquired", "mixed"), default="mixed")
    parser.add_argument("--sender", choices=("thread", "process"), default="thread",
                        help="flood from a thread of the app's process (default) or from another process")
    parser.add_argument("--dir", type=Path, default=None,
                        help="a session directory to copy and use instead of the demo (e.g. bench_runs' 10,000)")
    parser.add_argument("--send", nargs=5, metavar=("PORT", "N", "KIND", "IDENT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.send:  # the child of --sender process
        port, count, kind, ident, path = args.send
        _flood(int(port), _datagrams(int(count), kind, ident, path), threading.Event())
        return 0
    from store.demo.build import ensure_demo

    work = Path(tempfile.mkdtemp(prefix="sessionscope-bench-bus-"))
    try:
        master = args.dir or ensure_demo(Path(tempfile.gettempdir()) / "sessionscope-bench" / "demo" / "sessions")
        folder = work / "sessions"
        shutil.copytree(master, folder)
        r = asyncio.run(_run(folder, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    quiet, flood = r["quiet"], r["flood"]
    assert isinstance(quiet, list) and isinstance(flood, list)
    ratio = statistics.median(flood) / statistics.median(quiet)
    print(f"{'demo' if args.dir is None else 'copied'} directory, {r['sessions']} sessions; flood of {args.datagrams:,} {args.kind} datagrams "
          f"from a {args.sender} over {r['flood_s']:.2f} s (received {r['received']:,}, accepted {r['accepted']:,})")
    print(f"key → paint, quiet: {_ms(quiet)}")
    print(f"key → paint, flood: {_ms(flood)}")
    print(f"ratio of medians flood / quiet: {ratio:.2f}")
    print(f"UI work during the flood: {r['flushes']} flushes, {r['batches']} LiveChanged on the Sessions screen, "
          f"{r['reloads']} list reloads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
