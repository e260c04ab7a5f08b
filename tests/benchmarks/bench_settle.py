"""Whole-process time to "painted and every worker done", small directory against large ones.

    .venv/bin/python -m tests.benchmarks.bench_settle [--runs N] [--dir PATH ...]

The work after the first paint (the list cache's deletion check, ``PRAGMA quick_check``, the count of captured
sessions) must not grow with the database: with the checks remembered against the file's identity, a re-open
of unchanged files settles about as fast at 20,000 or 100,000 sessions as at 1,000 — target ≤ 1.3× from the
smallest directory to each larger one. Each sample is a fresh process (list cache and check records warm: one
warm-up run per directory first); the sizes alternate run by run. Wall time is taken by the parent, from
spawning the process to the child's report that the Sessions screen painted rows, the integrity check ended
and no worker is running. Directories are generated under tests/benchmarks/data/ (not committed); by default
1,000 sessions / 100,000 entries, 20,000 / 1,000,000, and 100,000 / 2,000,000 when it was generated
(``python -m tests.benchmarks.generate --sessions 100000 --entries 2000000``). Not part of the test run.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from tests.benchmarks.bench_startup import _spawn
from tests.benchmarks.generate import DATA_DIR, LargeDirSpec, default_path, ensure_large_dir, read_facts

SETTLE = """
import sys, time
from pathlib import Path
from store.mothx.db import OpenMode
from tui.app import SessionscopeApp
from tui.widgets.session_list import SessionList
class Bench(SessionscopeApp):
    def on_mount(self) -> None:
        self.poll = self.set_interval(0.01, self.check)
    def check(self) -> None:
        lists = self.screen.query(SessionList)
        if not (lists and lists.first().visible_rows()):
            return
        if not self._integrity_started or self.integrity.startswith("checking"):
            return
        if any(not worker.is_finished for worker in self.workers):
            return
        self.poll.stop()
        print(f"settled {self.integrity}", flush=True)
        self.exit()
Bench(Path(sys.argv[1]), OpenMode.READ_ONLY).run(headless=True, size=(120, 36))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dir", type=Path, action="append", default=None,
                        help="a generated directory (repeat; the first is the baseline)")
    args = parser.parse_args(argv)
    folders: list[Path] = args.dir or [
        ensure_large_dir(default_path(LargeDirSpec(sessions=1_000, entries=100_000)),
                         LargeDirSpec(sessions=1_000, entries=100_000)),
        ensure_large_dir(),
    ]
    if args.dir is None:
        big = DATA_DIR / "sessions-100k-2000k"
        if read_facts(big) is not None:
            folders.append(big)
    times: dict[Path, list[float]] = {folder: [] for folder in folders}
    for folder in folders:
        facts = read_facts(folder)
        size = f"{facts.spec.sessions:,} sessions, {facts.spec.entries:,} entries" if facts else "?"
        print(f"directory: {folder} ({size})")
        _spawn(SETTLE, str(folder))  # list cache and check records warm; OS page cache too
    for _ in range(args.runs):
        for folder in folders:
            times[folder].append(_spawn(SETTLE, str(folder))[0])
    base = statistics.median(times[folders[0]])
    print(f"runs: {args.runs} of each, alternating (list cache and check records warm)")
    for folder in folders:
        median = statistics.median(times[folder])
        ratio = median / base
        verdict = "" if folder == folders[0] else f"  (target ≤ 1.3; {'meets' if ratio <= 1.3 else 'MISSES'})"
        print(f"{folder.name}: painted and settled in {median * 1000:7.1f} ms = {ratio:.2f}× the first{verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
