"""Forking a 50,000-entry session at its last turn ÷ SQLite copying the same rows, measured side by side.

    .venv/bin/python -m tests.benchmarks.bench_fork [--samples N] [--entries N]

A fresh v43 directory holds one session of N entries (default 50,000) in closed turns of 10 entries each
(turn_start, user message, 3 × assistant tool call + tool result, final answer, turn_end), written with raw SQL.
Alternating, in one process:

(a) **fork**: :func:`store.mothx.fork.fork_session` at the session's last completed turn: preview, the ``fork``
    lease, the fenced write transaction (every entry with a new id and its references remapped, the turns, the
    title entry, the request row) and the release;
(b) **copy**: one ``INSERT INTO entries … SELECT … FROM entries WHERE session_id = ? AND seq <= ?`` of the same
    rows into another session (ids suffixed), in its own write transaction.

Prints the medians and the ratio (a) ÷ (b); target ≤ 3.

Then, on a fork family of 1,000 sessions (a root with 30 turns, 999 descendants three to a parent, each with a
title), **Forks screen first paint ÷ minimal Textual app first paint**: fresh processes, alternating, wall time
from spawning to the child's report that both lists are painted. The Forks screen is the app's first screen in the
child, started as ``sessionscope --section forks --session ID --read-only`` starts it (the opening worker opens the
store and reads the screen's first pages while Textual starts; the screen's mount awaits the opening); "painted"
means a frame with rows of both lists was drawn. Target ≤ 1.5.

Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NOW = 1_795_000_000


def _stamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def build(folder: Path, entries: int) -> tuple[str, int]:
    """One session of ``entries`` entries in closed turns; returns its id and its last turn's end seq."""
    from store.mothx.sessiondir import open_session_dir

    open_session_dir(folder, create=True).close()
    sid = "bench0000000fork"
    conn = sqlite3.connect(folder / "sessions.db")
    rows: list[tuple[str, str, str, str | None, str, str]] = []
    turns: list[tuple[str, int, int, str]] = []
    parent: str | None = None

    def add(etype: str, body: dict[str, object], t: int) -> None:
        nonlocal parent
        eid = sid if etype == "session" else f"e{len(rows):015x}"
        data = {"type": etype, "id": eid, "parentId": parent, "timestamp": _stamp(t), **body}
        rows.append((sid, eid, etype, parent, _stamp(t), json.dumps(data, separators=(",", ":"))))
        if etype != "session":
            parent = eid

    add("session", {"version": 3, "cwd": "/work/bench"}, NOW)
    add("session_info", {"name": "Bench session", "source": "manual"}, NOW)
    n = 0
    while len(rows) + 10 <= entries:
        t = NOW + n * 60
        tid = f"t{n:015x}"
        start = len(rows) + 1
        add("turn_start", {"turnId": tid, "runId": f"r{n}"}, t)
        add("message", {"message": {"role": "user", "content": [{"type": "text", "text": f"question {n} " * 8}]}}, t)
        for k in range(3):
            add("message", {"message": {"role": "assistant", "content": [
                {"type": "text", "text": "let me look"},
                {"type": "toolCall", "id": f"c{n}-{k}", "name": "bash", "arguments": {"cmd": f"grep -n x file{k}"}}]}},
                t + 1 + k)
            add("message", {"message": {"role": "toolResult", "toolCallId": f"c{n}-{k}", "toolName": "bash",
                                        "content": [{"type": "text", "text": "line 1\nline 2\n" * 10}]}}, t + 1 + k)
        add("message", {"message": {"role": "assistant", "content": [{"type": "text", "text": f"answer {n} " * 20}]}},
            t + 5)
        add("turn_end", {"turnId": tid, "status": "completed"}, t + 6)
        turns.append((tid, start, len(rows), _stamp(t)))
        n += 1
    while len(rows) < entries:
        add("model_change", {"provider": "p", "modelId": "m"}, NOW + n * 60)
    with conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, '/work/bench', ?, 3)",
                     (sid, _stamp(NOW)))
        conn.executemany("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, ?, ?, ?)",
                         rows)
        conn.executemany("INSERT INTO conversation_turns (id, session_id, status, start_seq, end_seq, started_at, "
                         "ended_at) VALUES (?, ?, 'completed', ?, ?, ?, ?)",
                         [(tid, sid, s, e, ts, ts) for tid, s, e, ts in turns])
    conn.close()
    return sid, turns[-1][2]


def build_family(folder: Path, members: int = 1000) -> str:
    """A root session with 30 closed turns and ``members - 1`` descendants (three children per parent)."""
    sid, _ = build(folder, 302)
    conn = sqlite3.connect(folder / "sessions.db")
    with conn:
        for i in range(1, members):
            child = f"fam{i:013d}"
            parent = sid if i <= 3 else f"fam{(i - 1) // 3:013d}"
            conn.execute("INSERT INTO sessions (id, cwd, timestamp, parent_session, version, fork_boundary_seq, "
                         "seed_length, fork_kind) VALUES (?, '/work/bench', ?, ?, 3, ?, ?, 'message')",
                         (child, _stamp(NOW + i), parent, 10 * (i % 30) + 1, 10 * (i % 30) + 1))
            data = json.dumps({"type": "session_info", "id": f"i{child}", "parentId": None,
                               "timestamp": _stamp(NOW + i), "name": f"Fork {i} of the bench session"})
            conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES "
                         "(?, ?, 'session_info', NULL, ?, ?)", (child, f"i{child}", _stamp(NOW + i), data))
    conn.close()
    return sid


MINIMAL = """
from textual.app import App, ComposeResult
from textual.widgets import Static
class Minimal(App):
    def compose(self) -> ComposeResult:
        yield Static("hello")
    def on_mount(self) -> None:
        self.call_after_refresh(self.painted)
    def painted(self) -> None:
        print("painted", flush=True)
        self.exit()
Minimal().run(headless=True, size=(120, 36))
"""

FORKS_SCREEN = """
import sys
from pathlib import Path
from store.mothx.db import OpenMode
from tui.app import SessionscopeApp
from tui.start import Start
from tui.widgets.fork_lists import BoundaryList, FamilyList
from tui.widgets.row_drawing import RowDrawing
real_row_strip = RowDrawing._row_strip
drawn = set()
def spy(self, row, width, is_cursor, marked):
    # The first frame in which both lists draw rows: report once that frame is out.
    if isinstance(self, (FamilyList, BoundaryList)) and type(self) not in drawn:
        drawn.add(type(self))
        if len(drawn) == 2:
            self.app.call_after_refresh(self.app.painted)
    return real_row_strip(self, row, width, is_cursor, marked)
RowDrawing._row_strip = spy
class Bench(SessionscopeApp):
    # The app as `sessionscope --section forks --session ID --read-only` starts it: the opening worker opens the
    # store and reads the Forks screen's first pages while Textual starts; the screen's mount awaits it.
    def painted(self) -> None:
        fam, bnd = self.screen.query_one(FamilyList), self.screen.query_one(BoundaryList)
        assert fam.total == 1000 and len(bnd.rows) == 30, (fam.total, len(bnd.rows))
        print(f"painted {len(fam.visible_rows())} {len(bnd.visible_rows())}", flush=True)
        self.exit()
Bench(Path(sys.argv[1]), OpenMode.READ_ONLY, live=False, start=Start("forks", sys.argv[2])).run(
    headless=True, size=(120, 36))
"""


def _spawn(script: str, *args: str) -> float:
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**env, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    return wall


def first_paint(runs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-fork-family-")) / "sessions"
    root = build_family(folder)
    _spawn(FORKS_SCREEN, str(folder), root)  # warm the OS page cache once
    forks_t: list[float] = []
    min_t: list[float] = []
    for _ in range(runs):
        min_t.append(_spawn(MINIMAL))
        forks_t.append(_spawn(FORKS_SCREEN, str(folder), root))
    ma, mb = statistics.median(forks_t), statistics.median(min_t)
    print(f"Forks screen first paint (family of 1,000) ÷ minimal app first paint: {ma * 1000:.0f} ms ÷ "
          f"{mb * 1000:.0f} ms = {ma / mb:.2f} over {runs} alternating runs (target ≤ 1.5)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--paint-runs", type=int, default=7, help="first-paint processes of each kind (0: skip)")
    args = ap.parse_args(argv)

    from store.mothx.fork import fork_session
    from store.mothx.fork_copy import ForkOptions
    from store.mothx.sessiondir import open_session_dir

    folder = Path(tempfile.mkdtemp(prefix="bench-fork-")) / "sessions"
    sid, boundary = build(folder, args.entries)
    sd = open_session_dir(folder)
    forks: list[float] = []
    copies: list[float] = []
    seed = 0
    try:
        for i in range(args.samples):
            t0 = time.perf_counter()
            res = fork_session(sd, ForkOptions(sid, f"bench-{i}"))
            forks.append(time.perf_counter() - t0)
            seed = res.seed_length
            assert res.boundary_seq >= boundary, (res.boundary_seq, boundary)
            t0 = time.perf_counter()
            with sd.db.write() as conn:
                conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
                             "SELECT ?, id || ?, type, parent_id, timestamp, data FROM entries "
                             "WHERE session_id = ? AND seq <= ?", (f"copy{i}", f"-copy{i}", sid, res.boundary_seq))
            copies.append(time.perf_counter() - t0)
    finally:
        sd.close()
    fork_ms, copy_ms = statistics.median(forks) * 1000, statistics.median(copies) * 1000
    print(f"session of {args.entries} entries, {seed} copied per fork, {args.samples} samples each")
    print(f"fork (preview + lease + fenced copy + release): median {fork_ms:.0f} ms "
          f"(min {min(forks) * 1000:.0f}, max {max(forks) * 1000:.0f})")
    print(f"INSERT … SELECT of the same rows:               median {copy_ms:.0f} ms "
          f"(min {min(copies) * 1000:.0f}, max {max(copies) * 1000:.0f})")
    pairs = statistics.median(f / c for f, c in zip(forks, copies, strict=True))
    print(f"ratio fork ÷ copy: {fork_ms / copy_ms:.2f} (medians; median of the paired ratios {pairs:.2f}; target ≤ 3)")
    if args.paint_runs:
        first_paint(args.paint_runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
