"""Benchmark: ranked full-text search on the large directory, side by side with the sqlite3 LIKE scan, in one run.

    .venv/bin/python tests/benchmarks/bench_search.py [--repeat N] [--skip-incremental]

On the generated directory (20,000 sessions, 1,000,000 entries; ``generate.ensure_large_dir``) it prints:

* the full build of the search index (a fresh process, an empty cache folder), its time and peak RSS;
* a common word with all results (``search(limit=None, snippets=False)``: every matching session ranked, with
  its best hit's seq, score and match count) against the LIKE scan run directly with sqlite3 (``SELECT DISTINCT
  session_id FROM entries WHERE data LIKE '%word%'``), in-process, median of N, alternated; also a rare word, a
  phrase, a prefix and the first page of 20 with snippets (what the Search screen reads);
* memory: peak RSS of a fresh process answering the common word with all results, against a fresh process
  reading the session list's first window (the list's own) and one running ``list --search`` for the same word;
* incremental refresh after 1,000 appended entries (on a copy of the database) against a full build of that copy.

Targets (issue 15): all results ÷ LIKE scan ≤ 0.05 once indexed; memory ≤ 1.5× the list's own; incremental
refresh ≤ 2% of a full build. The OS page cache is warm; the numbers are CPU, not disk.
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

from tests.benchmarks.generate import ensure_large_dir, read_facts  # noqa: E402

PY = sys.executable

BUILD = """
import json, resource, sys, time
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.search import index_info, refresh
sd = open_session_dir(sys.argv[1], OpenMode.READ_ONLY)
t = time.perf_counter()
info = refresh(sd, captured=False)
took = time.perf_counter() - t
print(json.dumps({"seconds": took, "kind": info.last_sync, "entries": info.entries,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "size_mb": info.path.stat().st_size / 2**20}))
"""

SEARCH_RSS = """
import json, resource, sys, time
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.search import search
sd = open_session_dir(sys.argv[1], OpenMode.READ_ONLY)
t = time.perf_counter()
r = search(sd, sys.argv[2], limit=None, snippets=False)
took = time.perf_counter() - t
print(json.dumps({"seconds": took, "total": r.total, "source": r.source,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

LIST_RSS = """
import json, resource, sys, time
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.mothx.sessions import SessionFilter, list_sessions
sd = open_session_dir(sys.argv[1], OpenMode.READ_ONLY)
t = time.perf_counter()
page = list_sessions(sd, SessionFilter(search=sys.argv[2]), limit=100)
took = time.perf_counter() - t
print(json.dumps({"seconds": took, "total": page.total,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

INCREMENTAL = """
import json, sys, time
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.search import index_info, search
sd = open_session_dir(sys.argv[1], OpenMode.READ_ONLY)
t = time.perf_counter()
r = search(sd, "appendedmarker", limit=None, snippets=False)
took = time.perf_counter() - t
info = index_info(sd)
print(json.dumps({"seconds": took, "kind": info.last_sync, "sync_s": info.last_sync_seconds, "total": r.total}))
"""


def fresh(code: str, *args: str, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.1f} ms"


def like_scan(conn: sqlite3.Connection, word: str) -> int:
    esc = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return len(conn.execute("SELECT DISTINCT session_id FROM entries WHERE data LIKE ? ESCAPE '\\'",
                            (f"%{esc}%",)).fetchall())


def bench_queries(path: Path, words: list[tuple[str, str]], repeat: int) -> float:
    from store.mothx.db import OpenMode
    from store.mothx.sessiondir import open_session_dir
    from store.search import search

    print(f"\n== search vs the sqlite3 LIKE scan, in-process, median of {repeat} (fresh SessionDir each) ==")
    print(f"{'query':<26} {'search':>12} {'LIKE scan':>12} {'ratio':>7} {'sessions':>9} {'scan rows':>9}")
    conn = sqlite3.connect(f"file:{path}/sessions.db?immutable=1", uri=True)
    with open_session_dir(path, OpenMode.READ_ONLY) as sd:     # untimed: the OS has just seen the index written
        for _, word in words:
            search(sd, word, limit=None, snippets=False)
        like_scan(conn, words[0][1])
    common_ratio = 0.0
    for label, word in words:
        ours, theirs = [], []
        total = scanned = 0
        page = label.endswith("page 20")
        for _ in range(repeat):
            with open_session_dir(path, OpenMode.READ_ONLY) as sd:
                t = time.perf_counter()
                r = search(sd, word, limit=20 if page else None, snippets=page)
                ours.append(time.perf_counter() - t)
                total = r.total
                assert r.source == "index", r.reason
            t = time.perf_counter()
            scanned = like_scan(conn, word.strip('"').rstrip("*"))
            theirs.append(time.perf_counter() - t)
        a, b = statistics.median(ours), statistics.median(theirs)
        if label == "common, all results":
            common_ratio = a / b
        print(f"{label:<26} {ms(a)}  {ms(b)}  {a / b:6.3f} {total:>9,} {scanned:>9,}")
    # As typing does: one open directory, the same index connection for every query.
    label, word = words[0]
    ours, theirs = [], []
    with open_session_dir(path, OpenMode.READ_ONLY) as sd:
        for _ in range(repeat):
            t = time.perf_counter()
            search(sd, word, limit=None, snippets=False)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            like_scan(conn, word)
            theirs.append(time.perf_counter() - t)
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{label + ', one open dir':<26} {ms(a)}  {ms(b)}  {a / b:6.3f}")
    conn.close()
    return common_ratio


def bench_incremental(path: Path, env: dict[str, str]) -> tuple[float, float]:
    print("\n== incremental refresh after 1,000 appended entries vs a full build (a copy of the database) ==")
    work = Path(tempfile.mkdtemp(prefix="ssbench-search-"))
    try:
        copy = work / "sessions"
        copy.mkdir()
        shutil.copy2(path / "sessions.db", copy / "sessions.db")
        full = fresh(BUILD, str(copy), env=env)
        conn = sqlite3.connect(copy / "sessions.db", isolation_level=None)
        sids = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY random() LIMIT 50")]
        conn.execute("BEGIN")
        for i in range(1_000):
            sid = sids[i % len(sids)]
            body = {"type": "message", "id": f"srch{i:012d}", "parentId": None, "timestamp": "2026-11-19T10:00:00Z",
                    "message": {"role": "user", "content": f"appended message {i} appendedmarker"}}
            conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                         (sid, body["id"], "message", None, body["timestamp"], json.dumps(body)))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        inc = fresh(INCREMENTAL, str(copy), env=env)
        f_s, i_s = float(full["seconds"]), float(inc["sync_s"])  # type: ignore[arg-type]
        print(f"full build     {ms(f_s)}   ({full['entries']:,} entries with text, index {full['size_mb']:.0f} MB, "
              f"peak RSS {full['rss_mb']:.0f} MB)")
        print(f"incremental    {ms(i_s)}   (sync {inc['kind']}; the whole first search {ms(float(inc['seconds']))}; "  # type: ignore[arg-type]
              f"{inc['total']} sessions found the appended word)")
        print(f"ratio          {i_s / f_s:9.4f}   (target <= 0.02)")
        return f_s, i_s
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--skip-incremental", action="store_true", help="leave out the copy, build and append")
    args = parser.parse_args()
    path = ensure_large_dir()
    facts = read_facts(path)
    assert facts is not None
    print(f"directory {path} ({facts.spec.sessions:,} sessions, {facts.spec.entries:,} entries); "
          f"{os.cpu_count()} CPUs")
    cache = Path(tempfile.mkdtemp(prefix="ssbench-search-cache-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT)}
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        print("\n== full build of the search index (fresh process, empty cache folder) ==")
        built = fresh(BUILD, str(path), env=env)
        print(f"full build     {ms(float(built['seconds']))}   ({built['entries']:,} entries with text; "  # type: ignore[arg-type]
              f"index {built['size_mb']:.0f} MB; peak RSS {built['rss_mb']:.0f} MB)")
        common, rare = facts.common_term, facts.rare_term
        ratio = bench_queries(path, [("common, all results", common), ("rare, all results", rare),
                                     ("phrase, all results", f'"please {common}"'),
                                     ("prefix, all results", f"{common[:5]}*"),
                                     ("common, page 20", common)], args.repeat)
        print("\n== memory: peak RSS of a fresh process ==")
        ours = fresh(SEARCH_RSS, str(path), common, env=env)
        own = fresh(LIST_RSS, str(path), "", env=env)
        listed = fresh(LIST_RSS, str(path), common, env=env)
        o, w, s = (float(x["rss_mb"]) for x in (ours, own, listed))  # type: ignore[arg-type]
        print(f"search '{common}', all results  {o:7.1f} MB   ({ours['total']:,} sessions in {ms(float(ours['seconds']))})")  # type: ignore[arg-type]
        print(f"session list, first window     {w:7.1f} MB   (the list's own)")
        print(f"list --search '{common}'     {s:7.1f} MB   ({listed['total']:,} sessions in {ms(float(listed['seconds']))})")  # type: ignore[arg-type]
        print(f"ratio to the list's own        {o / w:7.2f}    (target <= 1.5); to list --search {o / s:.2f}")
        inc = (0.0, 0.0) if args.skip_incremental else bench_incremental(path, env)
        print("\n== summary ==")
        print(f"common word, all results ÷ LIKE scan   {ratio:.3f}  (target <= 0.05)")
        print(f"peak RSS ÷ the session list's own      {o / w:.2f}  (target <= 1.5)")
        if inc[0]:
            print(f"incremental (1,000 entries) ÷ full     {inc[1] / inc[0]:.4f}  (target <= 0.02)")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
