"""Benchmark: the session list on a large directory, measured side by side in one run.

    .venv/bin/python tests/benchmarks/bench_sessions_list.py [--with-100k] [--repeat N]

On the generated directory (20,000 sessions, 1,000,000 entries; ``generate.ensure_large_dir``) it prints:

* the first window of ``list_sessions`` (100 rows, newest first) in a fresh process, with a cold cache (no
  cache file yet: one grouped pass over ``entries``), a warm cache, and a warm cache after 2,000 appended
  entries (on a copy of the directory);
* windows at several offsets and the first window of each sort key;
* ``sessionscope list --search Q`` against the same ``LIKE`` query run directly with sqlite3 (the reference
  form: ``EXISTS`` over ``entries.data`` per session), both as whole processes and in-process, as ratios.

Every timing runs in a fresh Python process unless it says "in-process", so no state of this process leaks in.
The OS page cache is warm (the directory was just generated or read); the numbers are CPU, not disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

from tests.benchmarks.generate import LargeDirSpec, ensure_large_dir, read_facts  # noqa: E402

PY = sys.executable

FIRST_WINDOW = """
import json, sys, time
t0 = time.perf_counter()
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.mothx.sessions import index_info, list_sessions
t1 = time.perf_counter()
sd = open_session_dir(sys.argv[1], OpenMode(sys.argv[2]))
t2 = time.perf_counter()
page = list_sessions(sd, offset=0, limit=100)
t3 = time.perf_counter()
info = index_info(sd)
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "window": t3 - t2, "total": t3 - t0, "rows": len(page.rows),
                  "sync": info.last_sync, "sync_s": info.last_sync_seconds, "persistent": info.persistent}))
"""

WINDOWS = """
import json, sys, time
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.mothx.sessions import SortKey, list_sessions
sd = open_session_dir(sys.argv[1], OpenMode.READ_ONLY)
out = {}
t = time.perf_counter(); page = list_sessions(sd, limit=100); out["first"] = time.perf_counter() - t
total = page.total
for frac in (0.1, 0.5, 0.999):
    off = int(total * frac)
    t = time.perf_counter(); list_sessions(sd, offset=off, limit=100); out[f"offset {off}"] = time.perf_counter() - t
t = time.perf_counter(); list_sessions(sd, offset=int(total * 0.7), limit=100)
out["another offset"] = time.perf_counter() - t
for key in SortKey:
    t = time.perf_counter(); list_sessions(sd, sort=key, limit=100); out[f"sort {key.value}"] = time.perf_counter() - t
print(json.dumps(out))
"""

# The reference listing with a search (reference 5.2), as one statement: messages-only, newest first, 20 rows.
DIRECT_SQL = (
    "SELECT s.id, COALESCE((SELECT MAX(e.timestamp) FROM entries e WHERE e.session_id = s.id), s.timestamp) AS last "
    "FROM sessions s WHERE (s.id LIKE :q ESCAPE '\\' OR s.cwd LIKE :q ESCAPE '\\' "
    "OR s.channel_type LIKE :q ESCAPE '\\' OR s.channel_id LIKE :q ESCAPE '\\' "
    "OR EXISTS (SELECT 1 FROM entries e WHERE e.session_id = s.id AND e.data LIKE :q ESCAPE '\\')) "
    "AND EXISTS (SELECT 1 FROM entries e WHERE e.session_id = s.id AND e.type = 'message') "
    "ORDER BY last DESC LIMIT 20"
)

DIRECT_SEARCH = (
    "import sqlite3, sys\n"
    "q = sys.argv[2].replace('\\\\', '\\\\\\\\').replace('%', '\\\\%').replace('_', '\\\\_')\n"
    "conn = sqlite3.connect(f'file:{sys.argv[1]}/sessions.db?immutable=1', uri=True)\n"
    f"print(len(conn.execute({DIRECT_SQL!r}, {{'q': f'%{{q}}%'}}).fetchall()))\n"
)


def fresh(code: str, *args: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout)


def wall(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return time.perf_counter() - t


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def bench_open(path: Path, env: dict[str, str], cache: Path, repeat: int) -> None:
    print(f"\n== first window (100 rows) of {path.name}, fresh process each ==")
    shutil.rmtree(cache, ignore_errors=True)
    cold = fresh(FIRST_WINDOW, str(path), "read-only", env=env)
    print(f"cold cache   window {ms(cold['window'])}   (sync {cold['sync']} {ms(cold['sync_s'])}; "
          f"import {ms(cold['import'])}, open {ms(cold['open'])}, whole script {ms(cold['total'])})")
    for mode in ("read-only", "snapshot", "read-write"):
        runs = [fresh(FIRST_WINDOW, str(path), mode, env=env) for _ in range(repeat)]
        best = min(runs, key=lambda r: r["window"])
        med = statistics.median(r["window"] for r in runs)
        print(f"warm {mode:<10} window {ms(med)} median, {ms(best['window'])} best   (sync {best['sync']}; "
              f"import {ms(best['import'])}, open {ms(best['open'])}, whole script {ms(best['total'])})")


def bench_incremental(path: Path, env: dict[str, str], cache: Path) -> None:
    print("\n== warm cache after 2,000 appended entries (a copy of the directory) ==")
    work = Path(tempfile.mkdtemp(prefix="ssbench-"))
    try:
        copy = work / "sessions"
        copy.mkdir()
        shutil.copy2(path / "sessions.db", copy / "sessions.db")
        fresh(FIRST_WINDOW, str(copy), "read-only", env=env)            # build its cache
        conn = sqlite3.connect(copy / "sessions.db", isolation_level=None)
        sids = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY random() LIMIT 50")]
        conn.execute("BEGIN")
        for i in range(2_000):
            sid = sids[i % len(sids)]
            body = {"type": "message", "id": f"bench{i:011d}", "parentId": None, "timestamp": "2026-11-19T10:00:00Z",
                    "message": {"role": "user", "content": f"appended message {i}"}}
            conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                         (sid, body["id"], "message", None, body["timestamp"], json.dumps(body)))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        inc = fresh(FIRST_WINDOW, str(copy), "read-only", env=env)
        print(f"incremental  window {ms(inc['window'])}   (sync {inc['sync']} {ms(inc['sync_s'])})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_windows(path: Path, env: dict[str, str]) -> None:
    print(f"\n== windows of 100 rows, warm cache, one process ({path.name}) ==")
    out = fresh(WINDOWS, str(path), env=env)
    for label, value in out.items():
        print(f"{label:<22} {ms(value)}")


def bench_search(path: Path, env: dict[str, str], queries: list[str], repeat: int) -> None:
    print(f"\n== list --search Q vs the same LIKE query run directly with sqlite3 ({path.name}) ==")
    cli = [PY, "-m", "tui", "--dir", str(path), "list", "--json", "--search"]
    direct = [PY, "-c", DIRECT_SEARCH, str(path)]
    fresh(FIRST_WINDOW, str(path), "read-only", env=env)    # the cache is warm for both
    print(f"{'query':<16} {'sessionscope':>12} {'direct':>12} {'ratio':>7}   (median of {repeat}, whole processes)")
    for q in queries:
        ours, theirs = [], []
        for _ in range(repeat):                               # alternate, so load changes hit both alike
            ours.append(wall([*cli, q], env))
            theirs.append(wall([*direct, q], env))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{q:<16} {ms(a)}  {ms(b)}  {a / b:6.2f}")
    # In-process: the store call against the bare query (no interpreter start on either side).
    from store.mothx.db import OpenMode
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.sessions import SessionFilter, list_sessions

    print(f"{'query':<16} {'list_sessions':>12} {'direct':>12} {'ratio':>7}   (median of {repeat}, in-process, "
          "fresh SessionDir each)")
    conn = sqlite3.connect(f"file:{path}/sessions.db?immutable=1", uri=True)
    for q in queries:
        ours, theirs = [], []
        for _ in range(repeat):
            with open_session_dir(path, OpenMode.READ_ONLY) as sd:
                t = time.perf_counter()
                list_sessions(sd, SessionFilter(search=q, messages_only=True), limit=20)
                ours.append(time.perf_counter() - t)
            esc = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            t = time.perf_counter()
            conn.execute(DIRECT_SQL, {"q": f"%{esc}%"}).fetchall()
            theirs.append(time.perf_counter() - t)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{q:<16} {ms(a)}  {ms(b)}  {a / b:6.2f}")
    conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-100k", action="store_true", help="also run on 100,000 sessions / 1,000,000 entries")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    path = ensure_large_dir()
    facts = read_facts(path)
    assert facts is not None
    print(f"directory {path} ({facts.spec.sessions:,} sessions, {facts.spec.entries:,} entries; ready in "
          f"{time.perf_counter() - started:.1f} s); {os.cpu_count()} CPUs")
    cache = Path(tempfile.mkdtemp(prefix="ssbench-cache-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT)}
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        bench_open(path, env, cache / "sessionscope", args.repeat)
        bench_incremental(path, env, cache / "sessionscope")
        bench_windows(path, env)
        bench_search(path, env, [facts.rare_term, facts.common_term, "no-such-text"], args.repeat)
        if args.with_100k:
            big = ensure_large_dir(spec=LargeDirSpec(sessions=100_000))
            bench_open(big, env, cache / "sessionscope", args.repeat)
            bench_windows(big, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
