"""Benchmark: the Transcript screen on a long session, driven with Pilot (not part of the default test run).

    .venv/bin/python -m tests.benchmarks.bench_transcript [--entries 50000]

It builds (in a temporary folder) one session of ``--entries`` rows written by raw SQL the way a foreign writer
would (turns of user / assistant with thinking and a tool call / tool result / assistant, a compaction, a
skipped compaction, a content override), and also uses the demo's longest session. For each it prints, side by
side: the time to the first painted page, the rows the paging calls returned, a ``G`` jump, 50 page-downs
(Pilot wall time and the view's own handler + render time per page), and the raw view's first page.

Pilot's key presses wait for the app to go idle after each key, so "per press" includes that wait; "handler +
render" calls the action and renders every line of the viewport directly, which is the work a key costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from store.mothx import entries  # noqa: E402
from store.mothx.db import OpenMode  # noqa: E402
from store.mothx.sessiondir import open_session_dir  # noqa: E402
from tests.tui.transcript_support import TranscriptHost, settle  # noqa: E402

SESSION = "5e55101100000001"


def build_long_session(root: Path, n: int) -> str:
    """A session directory with one session of about ``n`` entry rows (raw SQL, like a foreign writer)."""
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    rows: list[tuple[str, str, str, str | None, str, str]] = []
    parent: str | None = None
    message_ids: list[str] = []

    def add(kind: str, extra: dict[str, object], ts: str) -> str:
        nonlocal parent
        eid = secrets.token_hex(8)
        rows.append((SESSION, eid, kind, parent, ts, json.dumps({"type": kind, "id": eid, "parentId": parent,
                                                                 "timestamp": ts, **extra})))
        parent = eid
        return eid

    add("session", {"cwd": "/home/dev/src/loader", "channelType": "local"}, "2026-11-01T09:00:00Z")
    add("session_info", {"name": "Long benchmark session", "source": "manual"}, "2026-11-01T09:00:00Z")
    turn = 0
    while len(rows) < n:
        turn += 1
        ts = f"2026-11-{1 + (turn // 1440) % 28:02d}T{(turn // 60) % 24:02d}:{turn % 60:02d}:00Z"
        tid = f"turn-{turn:05d}"
        add("turn_start", {"turnId": tid}, ts)
        message_ids.append(add("message", {"message": {"role": "user", "timestamp": ts,
                                                       "content": f"Turn {turn}: fix bug {turn} in file_{turn}.py."}}, ts))
        add("message", {"message": {"role": "assistant", "timestamp": ts, "contents": [
            {"type": "thinking", "thinking": f"Bug {turn}: read the file first."},
            {"type": "text", "text": f"Reading file_{turn}.py. " + "Some longer explanation that wraps. " * (turn % 5)},
            {"type": "toolCall", "toolCall": {"id": f"call_{turn}", "name": "read_file", "kind": "function",
                                              "arguments": json.dumps({"path": f"src/file_{turn}.py", "lines": [1, 200]})}},
        ]}}, ts)
        add("message", {"message": {"role": "toolResult", "toolCallId": f"call_{turn}", "toolName": "read_file",
                                    "isError": turn % 7 == 0, "timestamp": ts,
                                    "content": "\n".join(f"{k:4d}  line {k}" for k in range(1, 8))}}, ts)
        message_ids.append(add("message", {"message": {"role": "assistant", "timestamp": ts,
                                                       "content": f"Fixed bug {turn}."}}, ts))
        add("turn_end", {"turnId": tid, "status": "completed"}, ts)
        if turn == 300:
            add("compaction", {"summary": "Turns 1-250 refactored the loader.", "firstKeptEntryId": message_ids[500],
                               "tokensBefore": 85000, "summaryVersion": 1}, ts)
        if turn == 320:
            add("compaction", {"summary": "Names a missing entry.", "firstKeptEntryId": "ffffffffffffffff",
                               "tokensBefore": 90000, "summaryVersion": 2}, ts)
        if turn == 330:
            add("content_override", {"targetEntryId": message_ids[-1], "reason": "provider refused",
                                     "message": {"role": "assistant", "content": "[removed]"}}, ts)
    conn = sqlite3.connect(root / "sessions.db")
    with conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp, channel_type) VALUES (?, ?, ?, 'local')",
                     (SESSION, "/home/dev/src/loader", "2026-11-01T09:00:00Z"))
        conn.executemany("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)", rows)
    conn.close()
    return SESSION


async def measure(root: Path, session_id: str, label: str) -> None:
    counts = {"replay_page": 0, "rows_page": 0}
    real_replay_page, real_rows_page = entries.replay_page, entries.rows_page

    def replay_page(*a: object, **k: object) -> list[entries.ReplayMessage]:
        got = real_replay_page(*a, **k)  # type: ignore[arg-type]
        counts["replay_page"] += len(got)
        return got

    def rows_page(*a: object, **k: object) -> list[entries.EntryRow]:
        got = real_rows_page(*a, **k)  # type: ignore[arg-type]
        counts["rows_page"] += len(got)
        return got

    entries.replay_page, entries.rows_page = replay_page, rows_page  # type: ignore[assignment]
    try:
        with open_session_dir(root, OpenMode.SNAPSHOT) as sd:
            total = entries.row_count(sd, session_id)
            app = TranscriptHost(sd, session_id)
            t0 = time.perf_counter()
            async with app.run_test(size=(120, 36)) as pilot:
                while True:  # the first page is on screen (turns and the verify pass may still be reading)
                    await asyncio.sleep(0.002)  # not pilot.pause(): it waits for the CPU to go idle
                    screen = app.screen
                    view = getattr(screen, "transcript_view", None)
                    if view is not None and view.items:
                        break
                painted = time.perf_counter() - t0
                first_reads = dict(counts)
                await settle(pilot)
                opened = time.perf_counter() - t0

                t0 = time.perf_counter()
                await pilot.press("G")
                await settle(pilot)
                jump_pilot = time.perf_counter() - t0
                await pilot.press("g")
                await settle(pilot)
                t0 = time.perf_counter()
                view.action_last()  # what the G key runs; then wait for the page read and the repaint
                while not (view.at_end and not view.fetching):
                    await asyncio.sleep(0.001)
                view.visible_items()
                jump = time.perf_counter() - t0

                await pilot.press("g")
                await settle(pilot)
                t0 = time.perf_counter()
                for _ in range(50):
                    await pilot.press("pagedown")
                await settle(pilot)
                pages = time.perf_counter() - t0

                await pilot.press("g")
                await settle(pilot)
                costs = []
                for _ in range(50):
                    t1 = time.perf_counter()
                    view.action_page(1)
                    for y in range(view.size.height):
                        view.render_line(y)
                    costs.append(time.perf_counter() - t1)
                    if view.fetching:
                        await settle(pilot)
                costs.sort()

                before_raw = counts["rows_page"]
                t0 = time.perf_counter()
                screen.action_toggle_raw()  # what the R key runs
                while not (screen.raw_view.items and not screen.raw_view.fetching):
                    await asyncio.sleep(0.001)
                raw_open = time.perf_counter() - t0
                await settle(pilot)
                raw_rows = counts["rows_page"] - before_raw
    finally:
        entries.replay_page, entries.rows_page = real_replay_page, real_rows_page  # type: ignore[assignment]
    print(f"\n{label}: {total:,} entry rows")
    print(f"  start to first page on screen  {painted * 1000:8.1f} ms   replay rows read: {first_reads['replay_page']}")
    print(f"  ... all background reads done  {opened * 1000:8.1f} ms   (turn markers, corrupt-row count)")
    print(f"  G (jump to the last message)   {jump * 1000:8.1f} ms   ({jump_pilot * 1000:.0f} ms as a Pilot press + settle)")
    print(f"  50 page-downs with Pilot       {pages * 1000:8.1f} ms   ({pages / 50 * 1000:.1f} ms per press incl. Pilot's idle wait)")
    print(f"  page-down handler + render     median {costs[len(costs) // 2] * 1000:.2f} ms, max {costs[-1] * 1000:.2f} ms")
    print(f"  raw view first page            {raw_open * 1000:8.1f} ms   raw rows read: {raw_rows}")
    print(f"  rows read in all               replay {counts['replay_page']:,}, raw {counts['rows_page']:,} of {total:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50_000)
    args = parser.parse_args()
    from store.demo.build import ensure_demo

    with tempfile.TemporaryDirectory() as tmp:
        demo = ensure_demo(Path(tmp) / "demo")
        with open_session_dir(demo, OpenMode.SNAPSHOT) as sd, sd.db.read() as conn:
            longest = conn.execute("SELECT session_id FROM entries GROUP BY session_id ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]
        asyncio.run(measure(demo, longest, "demo's longest session"))
        big = Path(tmp) / "big"
        big.mkdir()
        t0 = time.perf_counter()
        sid = build_long_session(big, args.entries)
        print(f"\n(built the {args.entries:,}-entry session in {time.perf_counter() - t0:.1f} s)")
        asyncio.run(measure(big, sid, f"synthetic {args.entries:,}-entry session"))


if __name__ == "__main__":
    main()
