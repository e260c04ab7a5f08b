"""Appending one small batch to a session whose event store holds 100,000 events, against an empty one.

    .venv/bin/python -m tests.benchmarks.bench_eventstore [--events N] [--batch N] [--samples N] [--dir PATH]

A fresh session directory (a temporary one, or ``--dir``) gets:

* **big**: a session with ``--events`` (100,000) events in batches of ``--batch`` (100), appended through the
  whole protocol (prepare, bytes + fsync, appended, fenced commit);
* **empty**: for each sample a new session with no event store at all (the first append creates its folder and
  segment), and **small**: one session that only holds the samples' own events (a store that stays tiny).

Each sample appends one batch of one small event to big, to a new empty session and to small, in turn, timed
with ``perf_counter`` around :func:`store.eventstore.append_event_batch`. Prints the medians and 90th
percentiles side by side, the ratios big ÷ empty (the target: ≤ 1.5) and big ÷ small, and the number of full
log scans the samples caused (the append path makes none). Not part of the test run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET = 1.5


def main(argv: list[str] | None = None) -> int:
    from store.eventstore import EventRecord, append_event_batch, write_stats
    from store.eventstore.protocol import next_sequence
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.simulator import create_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)

    root = (args.dir or Path(tempfile.mkdtemp(prefix="bench-eventstore-"))) / "sessions"
    sd = open_session_dir(root, create=True)
    try:
        big = create_session(sd, "b16b16b16b16b16b")
        small = create_session(sd, "5a115a115a115a11")

        def record(sid: str, i: int) -> EventRecord:
            return EventRecord(f"ev-{i}", sid, "message", {"role": "assistant", "text": f"event {i} " + "x" * 80},
                               "2026-11-20T12:00:00Z")

        t0 = time.perf_counter()
        n = 0
        while n < args.events:
            size = min(args.batch, args.events - n)
            append_event_batch(sd, big, [record(big, n + k) for k in range(size)], None)
            n += size
        fill = time.perf_counter() - t0
        assert next_sequence(sd, big) == args.events + 1
        seg_bytes = sum(p.stat().st_size for p in (root / "events" / big).iterdir())
        print(f"filled {args.events:,} events in {args.events // args.batch:,} batches ({seg_bytes / 2**20:.1f} MiB) "
              f"in {fill:.1f} s")

        times: dict[str, list[float]] = {"big": [], "empty": [], "small": []}
        scans = write_stats().full_scans
        for i in range(args.samples):
            empty = create_session(sd)
            for name, sid in (("big", big), ("empty", empty), ("small", small)):
                start = time.perf_counter()
                append_event_batch(sd, sid, [record(sid, 10**9 + i)], None)
                times[name].append(time.perf_counter() - start)
        scans = write_stats().full_scans - scans
    finally:
        sd.close()

    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(0.9 * (len(xs) - 1))]

    print(f"{'':8}{'median ms':>12}{'p90 ms':>10}")
    for name in ("big", "empty", "small"):
        print(f"{name:8}{statistics.median(times[name]) * 1000:12.2f}{p90(times[name]) * 1000:10.2f}")
    ratio = statistics.median(times["big"]) / statistics.median(times["empty"])
    ratio_small = statistics.median(times["big"]) / statistics.median(times["small"])
    print(f"big ÷ empty = {ratio:.2f} (target ≤ {TARGET})   big ÷ small = {ratio_small:.2f}")
    print(f"full scans during the samples: {scans}")
    return 0 if ratio <= TARGET and scans == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
