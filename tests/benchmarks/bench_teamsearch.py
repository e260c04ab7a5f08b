"""Search over captured records on both stores, side by side (not part of the default test run).

Captures N Claude Code transcripts (default 1,000, generated as ``bench_teamstore`` generates them; one in a
hundred also gets a record with a rare word) into the SQLite store and into PostgreSQL, builds each engine's
index (SQLite: the FTS5 side file; PostgreSQL: the store's tsvector/GIN table), and prints for a common and a
rare word, all results with snippets: each engine's search time, its exact scan's (SQLite ``LIKE`` /
PostgreSQL ``ILIKE``) and their ratio; and each index build's time ÷ its capture's. Both engines must find the
same agent sessions with the same match counts (checked).

Then, on PostgreSQL, the index left behind: 1,000 more records (appended to a hundred transcripts) are captured
without indexing them, and a read mode searches (the index for what it holds, those 1,000 records ranked
exactly), side by side with the exact scan of the whole store and with the same read-mode search once the
index is up to date; then 50,000 more (past the cap a read mode ranks itself: the exact scan searches them in
the statement that reads the index), beside the same search with no cap (every one ranked in Python). The
behind answer must be the up-to-date one (checked: sessions, match counts; below the cap also best records and
scores, past it the uncapped answer in full).

Run:  ``.venv/bin/python -m tests.benchmarks.bench_teamsearch [--files 1000] [--pg postgresql://…]
[--behind 1000,50000]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from store.agents.capture import capture_claude_code  # noqa: E402
from store.agents.checkpoint_engine import dispose_engines, use_store  # noqa: E402
from store.mothx.db import OpenMode  # noqa: E402
from store.mothx.sessiondir import open_session_dir  # noqa: E402
from store.search import SearchResult, refresh, search  # noqa: E402
from store.search.team import refresh_team  # noqa: E402
from tests.benchmarks.bench_teamstore import build_tree, postgres  # noqa: E402

COMMON = "standard"
RARE = "quokka"
BEHIND = (1_000, 50_000)


def add_rare_records(root: Path, every: int = 100) -> int:
    """A user record holding the rare word appended to one transcript in ``every``."""
    files = sorted(root.rglob("*.jsonl"))
    for path in files[::every]:
        sid = path.stem
        rec = {"parentUuid": None, "isSidechain": False, "type": "user", "sessionId": sid,
               "message": {"role": "user", "content": f"did anyone see the {RARE} in {sid[:8]}?"},
               "uuid": str(uuid.uuid4()), "timestamp": "2026-11-20T12:00:00.000Z"}
        with path.open("ab") as fh:
            fh.write(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    return len(files[::every])


def add_behind_records(root: Path, count: int, tag: str) -> None:
    """``count`` user records appended to (at most) a hundred transcripts: every other one holds the common
    word, one in a hundred the rare one."""
    files = sorted(root.rglob("*.jsonl"))
    spread = min(100, len(files))
    by_path: dict[Path, list[bytes]] = {}
    for k in range(count):
        path = files[k % spread * (len(files) // spread)]
        sid = path.stem
        text = f"note {tag}{k}: the {COMMON} answer, once more" if k % 2 == 0 else f"note {tag}{k}: nothing new here"
        if k % 100 == 1:
            text += f" (a {RARE} again)"
        rec = {"parentUuid": None, "isSidechain": False, "type": "user", "sessionId": sid,
               "message": {"role": "user", "content": text},
               "uuid": str(uuid.uuid4()), "timestamp": "2026-11-21T12:00:00.000Z"}
        by_path.setdefault(path, []).append(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    for path, lines in by_path.items():
        with path.open("ab") as fh:
            fh.write(b"".join(lines))


@dataclass(frozen=True)
class Behind:
    behind: int             # records captured since the index was brought up to date
    ranked_s: float         # read mode, index behind: every hit with its snippet
    ranked: SearchResult
    bare_s: float           # ... rank only
    first_s: float          # ... first 20
    uncapped_s: float       # ... every backlog record ranked in Python whatever the backlog (no cap; 0: not run)
    current_s: float        # read mode, index up to date: every hit with its snippet
    scan_s: float           # the exact scan (every hit with its snippet)
    same: bool              # the behind answer = the up-to-date one (sessions, match counts; below the cap
                            # also best records and scores; past it, the uncapped answer = the up-to-date one)


def hit_view(result: SearchResult) -> list[tuple[object, ...]]:
    return [(h.agent_id, h.session_id, h.matches, h.line_number, h.score) for h in result.hits]


def session_view(result: SearchResult) -> list[tuple[object, ...]]:
    return sorted((h.agent_id, h.session_id, h.matches) for h in result.hits)


def run_behind(url: str, root: Path, work: Path, counts: tuple[int, ...]) -> list[dict[str, Behind]]:
    """The index behind by each of ``counts`` records in turn, searched in a read mode (PostgreSQL), beside
    the exact scan and the same search once the index is up to date (refreshed before the next count)."""
    from store.search import pg_index

    use_store(url)
    out: list[dict[str, Behind]] = []
    try:
        folder = work / "sessions-postgresql"
        for n, count in enumerate(counts):
            add_behind_records(root, count, f"b{n}-")
            with open_session_dir(folder, OpenMode.READ_WRITE) as sd:
                capture_claude_code(sd, root)
            timed: dict[str, tuple[float, SearchResult, float, float, float, SearchResult | None, float]] = {}
            with open_session_dir(folder, OpenMode.READ_ONLY) as sd:
                for word in (COMMON, RARE):
                    ranked_s, ranked = best_of(lambda w=word: search(sd, w, captured=True, limit=None))
                    assert (ranked.source, ranked.exact) == ("index", count), (ranked.source, ranked.exact)
                    assert ranked.scanned == (count > pg_index.NEWER_CAP)
                    bare_s = best_of(lambda w=word: search(sd, w, captured=True, limit=None, snippets=False))[0]
                    first_s = best_of(lambda w=word: search(sd, w, captured=True, limit=20))[0]
                    scan_s = best_of(lambda w=word: search(sd, w, captured=True, limit=None, use_index=False))[0]
                    uncapped_s, uncapped = 0.0, None
                    if count > pg_index.NEWER_CAP:
                        cap = pg_index.NEWER_CAP
                        pg_index.NEWER_CAP = count
                        try:
                            uncapped_s, uncapped = best_of(lambda w=word: search(sd, w, captured=True, limit=None),
                                                           runs=2)
                        finally:
                            pg_index.NEWER_CAP = cap
                    timed[word] = (ranked_s, ranked, bare_s, first_s, scan_s, uncapped, uncapped_s)
            with open_session_dir(folder, OpenMode.READ_WRITE) as sd:
                refresh_team(sd)
            row = {}
            with open_session_dir(folder, OpenMode.READ_ONLY) as sd:
                for word, (ranked_s, ranked, bare_s, first_s, scan_s, uncapped, uncapped_s) in timed.items():
                    current_s, current = best_of(lambda w=word: search(sd, w, captured=True, limit=None))
                    assert current.exact == 0, word
                    if uncapped is None:
                        same = hit_view(current) == hit_view(ranked)
                    else:
                        same = hit_view(current) == hit_view(uncapped) and \
                            session_view(current) == session_view(ranked)
                    row[word] = Behind(count, ranked_s, ranked, bare_s, first_s, uncapped_s, current_s, scan_s, same)
            out.append(row)
    finally:
        use_store(None)
        dispose_engines()
    return out


@dataclass(frozen=True)
class Timed:
    ranked_s: float
    ranked: SearchResult
    bare_s: float
    first_s: float
    scan_s: float
    scan: SearchResult


def best_of(fn: Callable[[], SearchResult], runs: int = 3) -> tuple[float, SearchResult]:
    best = float("inf")
    out = fn()
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def never_built(url: str, folder: Path) -> dict[str, tuple[float, float, float, float, str]]:
    """PostgreSQL, the index never built, read mode: the search (the ILIKE scan, more records than a read mode
    ranks itself), the bare ILIKE grouping, that grouping ranked on the fly by ``ts_rank_cd`` over PostgreSQL's
    own ``to_tsvector`` of each matching record, and ``to_tsvector`` of every record matched against the query
    (what "ranked without an index" would cost; it also finds other records, its parser's words)."""
    from store.agents.checkpoint_engine import PgStore

    grouping = ("SELECT DISTINCT ON (session_id) session_id, line_number FROM ({rows}) x "
                "ORDER BY session_id, r DESC, file_path, line_number")
    like = "SELECT session_id, file_path, line_number, 0 AS r FROM agent_state_lines WHERE content ILIKE ?"
    ranked = ("SELECT session_id, file_path, line_number, ts_rank_cd(to_tsvector('simple', content), "
              "plainto_tsquery('simple', ?), 1) AS r FROM agent_state_lines WHERE content ILIKE ?")
    every = ("SELECT session_id, file_path, line_number, ts_rank_cd(v, q, 1) AS r FROM (SELECT session_id, file_path, "
             "line_number, to_tsvector('simple', content) AS v, plainto_tsquery('simple', ?) AS q "
             "FROM agent_state_lines) y WHERE v @@ q")
    out = {}
    store = PgStore(url, OpenMode.READ_ONLY)
    try:
        with open_session_dir(folder, OpenMode.READ_ONLY) as sd:
            for word in (COMMON, RARE):
                search_s, result = best_of(lambda w=word: search(sd, w, captured=True, limit=None))
                with store.read() as conn:
                    times = []
                    for sql, params, runs in ((like, (f"%{word}%",), 3), (ranked, (word, f"%{word}%"), 3),
                                              (every, (word,), 1)):
                        best = float("inf")
                        for _ in range(runs):
                            t0 = time.perf_counter()
                            conn.execute(grouping.format(rows=sql), params).fetchall()
                            best = min(best, time.perf_counter() - t0)
                        times.append(best)
                out[word] = (search_s, times[0], times[1], times[2], result.source)
    finally:
        store.close()
    return out


def run_engine(name: str, url: str | None, root: Path, work: Path) -> dict[str, object]:
    use_store(url)
    try:
        folder = work / f"sessions-{name}"
        with open_session_dir(folder, create=True) as sd:
            t0 = time.perf_counter()
            capture_claude_code(sd, root)
            capture_s = time.perf_counter() - t0
        unbuilt = never_built(url, folder) if url is not None else {}
        with open_session_dir(folder) as sd:
            t0 = time.perf_counter()
            if url is None:
                refresh(sd, captured=True)
            else:
                refresh_team(sd)
            build_s = time.perf_counter() - t0
        out: dict[str, object] = {"capture": capture_s, "build": build_s, "unbuilt": unbuilt}
        with open_session_dir(folder, OpenMode.READ_WRITE) as sd:
            for word in (COMMON, RARE):
                def ranked(w: str = word) -> SearchResult:
                    return search(sd, w, captured=True, limit=None)

                def bare(w: str = word) -> SearchResult:
                    return search(sd, w, captured=True, limit=None, snippets=False)

                def first(w: str = word) -> SearchResult:
                    return search(sd, w, captured=True, limit=20)

                def scan(w: str = word) -> SearchResult:
                    return search(sd, w, captured=True, limit=None, use_index=False)

                out[word] = Timed(*best_of(ranked), best_of(bare)[0], best_of(first)[0], *best_of(scan))
    finally:
        use_store(None)
        dispose_engines()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--pg", default=os.environ.get("SESSIONSCOPE_BENCH_PG"))
    parser.add_argument("--behind", default=",".join(str(n) for n in BEHIND),
                        help="records the index is left behind by, in turn (comma-separated)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-teamsearch-") as tmp:
        work = Path(tmp)
        root = work / "projects"
        files, size = build_tree(root, args.files)
        rare = add_rare_records(root)
        print(f"tree: {files} Claude Code transcripts, {size / 1e6:.1f} MB; '{RARE}' in {rare} of them")
        results = {"sqlite": run_engine("sqlite", None, root, work)}
        behind: list[dict[str, Behind]] = []
        with postgres(args.pg) as url:
            if url is not None:
                results["postgresql"] = run_engine("postgresql", url, root, work)
                behind = run_behind(url, root, work, tuple(int(n) for n in args.behind.split(",") if n))
        print(f"{'engine':<12}{'capture':>10}{'index build':>13}{'build / capture':>17}")
        for name, r in results.items():
            cap_s, build_s = float(r["capture"]), float(r["build"])  # type: ignore[arg-type]
            print(f"{name:<12}{cap_s:>8.2f} s{build_s:>11.2f} s{build_s / cap_s:>17.2f}")
        print("times: best of 3 in one open directory, each search bringing its index up to date first; 'all' is "
              "every hit with its snippet, 'rank only' without snippets; ratio = all / the exact scan (all, with "
              "snippets)")
        print(f"{'engine':<12}{'query':<10}{'sessions':>9}{'matches':>9}{'all':>11}{'rank only':>11}{'first 20':>11}"
              f"{'exact scan':>12}{'ratio':>7}{'rank only':>10}")
        same = True
        for word in (COMMON, RARE):
            views = []
            for name, r in results.items():
                t: Timed = r[word]  # type: ignore[assignment]
                matches = sum(h.matches for h in t.ranked.hits)
                print(f"{name:<12}{word:<10}{t.ranked.total:>9}{matches:>9}{t.ranked_s * 1000:>8.1f} ms"
                      f"{t.bare_s * 1000:>8.1f} ms{t.first_s * 1000:>8.1f} ms{t.scan_s * 1000:>9.1f} ms"
                      f"{t.ranked_s / t.scan_s:>7.3f}{t.bare_s / t.scan_s:>10.3f}")
                views.append(sorted((h.agent_id, h.session_id, h.matches) for h in t.ranked.hits))
                assert t.ranked.source == "index" and t.scan.source == "like", (t.ranked.source, t.scan.source)
            same = same and all(v == views[0] for v in views)
        for word, (search_s, like_s, ranked_s, every_s, source) in \
                results.get("postgresql", {}).get("unbuilt", {}).items():  # type: ignore[union-attr]
            print(f"postgresql, index never built, read mode, '{word}': search {search_s * 1000:.1f} ms ({source}); "
                  f"ILIKE grouping {like_s * 1000:.1f} ms; ranked by ts_rank_cd(to_tsvector) over its hits "
                  f"{ranked_s * 1000:.1f} ms = {ranked_s / like_s:.2f}× the ILIKE; to_tsvector of every record "
                  f"{every_s * 1000:.1f} ms = {every_s / like_s:.2f}×")
        if "postgresql" not in results:
            print("postgresql: skipped (no server: pass --pg URL or install the PostgreSQL server binaries)")
        else:
            print(f"same sessions and match counts on both engines: {'yes' if same else 'NO'}")
            from store.search.pg_index import NEWER_CAP

            print(f"postgresql, the index behind, read mode, side by side with the exact scan and with the up-to-date "
                  f"index (read mode); best of 3; a read mode ranks up to {NEWER_CAP:,} records past the index "
                  "itself, past that the exact scan searches them (unranked hits); 'uncapped' ranks them all in "
                  "Python anyway (best of 2)")
            print(f"{'behind':>7} {'query':<10}{'sessions':>9}{'behind: all':>13}{'rank only':>11}{'first 20':>11}"
                  f"{'uncapped':>11}{'up to date':>12}{'exact scan':>12}{'÷ scan':>8}{'÷ up to date':>13}"
                  f"{'uncapped ÷':>11}{'unranked':>9}")
            for row in behind:
                for word, b in row.items():
                    unc = f"{b.uncapped_s * 1000:>8.1f} ms" if b.uncapped_s else f"{'-':>11}"
                    unc_ratio = f"{b.uncapped_s / b.ranked_s:>11.2f}" if b.uncapped_s else f"{'-':>11}"
                    print(f"{b.behind:>7,} {word:<10}{b.ranked.total:>9}{b.ranked_s * 1000:>10.1f} ms"
                          f"{b.bare_s * 1000:>8.1f} ms{b.first_s * 1000:>8.1f} ms{unc}{b.current_s * 1000:>9.1f} ms"
                          f"{b.scan_s * 1000:>9.1f} ms{b.ranked_s / b.scan_s:>8.3f}{b.ranked_s / b.current_s:>13.2f}"
                          f"{unc_ratio}{b.ranked.unranked:>9}")
                    same = same and b.same
            print("behind answers = up-to-date answers (up to the cap: sessions, match counts, best records, scores; "
                  f"past it: sessions and match counts, and the uncapped answer in full): "
                  f"{'yes' if all(b.same for row in behind for b in row.values()) else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
