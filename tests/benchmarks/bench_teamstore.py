"""Team store benchmark (not part of the default test run): capture into SQLite and into PostgreSQL, side by
side, against the floor of merely reading the files.

* floor: read every file of a tree of 1,000 Claude Code transcripts (about 53 MB) and ``json.loads`` every line;
* a first capture of the tree and an unchanged re-capture, into the default SQLite file and into PostgreSQL;
* the checkpoint list read by keyset pages (every page of 100 rows) from each store.

Prints each time and its ratio to the floor (target: a first capture into SQLite <= 3x the floor).
PostgreSQL: ``--pg URL`` names a database to use (its checkpoint tables must not exist yet); otherwise a
throwaway server is started as the tests do (tests/pg.py), or that column is skipped when none is installed.

Run:  ``.venv/bin/python -m tests.benchmarks.bench_teamstore [--files 1000] [--pg postgresql://…] [--no-pg]
[--rounds N]`` (``--no-pg``: SQLite only; ``--rounds``: N first captures per store, default 3, the best
shown, each SQLite round just after a floor measurement; the ratio is best ÷ best).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from store.agents.capture import capture_claude_code  # noqa: E402
from store.agents.checkpoint_engine import dispose_engines, use_store  # noqa: E402
from store.agents.checkpoint_read import checkpoint_page  # noqa: E402
from store.mothx.sessiondir import open_session_dir  # noqa: E402
from tests.benchmarks.bench_capture import _seed_records, write_transcript  # noqa: E402


def build_tree(root: Path, files: int) -> tuple[int, int]:
    seeds = _seed_records()
    total = 0
    for i in range(files):
        sid = str(uuid.UUID(int=i + 1))
        path = root / f"-home-user-project-{i % 25:02d}" / f"{sid}.jsonl"
        write_transcript(path, sid, 37_000 + (i % 17) * 2_000, seeds)
        total += path.stat().st_size
    return files, total


def floor(root: Path) -> float:
    """Read every file and json.loads every line: the least a capture must do."""
    t0 = time.perf_counter()
    n = 0
    for path in sorted(root.rglob("*.jsonl")):
        with path.open("rb") as fh:
            for line in fh.read().splitlines():
                json.loads(line)
                n += 1
    return time.perf_counter() - t0


def pages(sd: object) -> tuple[float, int]:
    t0 = time.perf_counter()
    after = None
    count = 0
    while True:
        page = checkpoint_page(sd, after=after, limit=100)  # type: ignore[arg-type]
        count += 1
        if not page.more:
            break
        after = page.last_key
    return time.perf_counter() - t0, count


def run_store(name: str, url: str | None, root: Path, work: Path) -> dict[str, float]:
    use_store(url)
    try:
        with open_session_dir(work / f"sessions-{name}", create=True) as sd:
            t0 = time.perf_counter()
            first = capture_claude_code(sd, root)
            first_s = time.perf_counter() - t0
            assert first.counts["new"] == len(first.sessions), first.counts
            t0 = time.perf_counter()
            again = capture_claude_code(sd, root)
            again_s = time.perf_counter() - t0
            assert again.counts["unchanged"] == len(again.sessions), again.counts
            best = min(pages(sd)[0] for _ in range(3))
            _, n_pages = pages(sd)
    finally:
        use_store(None)
        dispose_engines()
    return {"first": first_s, "again": again_s, "pages": best, "n_pages": n_pages}


def best_of(rounds: int, name: str, url: str | None, root: Path, work: Path,
            floors: list[float] | None = None) -> dict[str, float]:
    """:func:`run_store` ``rounds`` times (each into a fresh directory or database), the fastest first capture's
    figures (a shared machine's noise only ever adds time). ``floors``: a floor is measured just before each
    round and appended there (side by side, so that load hits both alike)."""
    runs = []
    for i in range(max(1, rounds)):
        if floors is not None:
            floors.append(floor(root))
        if url is not None and i > 0:
            with postgres_database(url, f"bench{i}") as fresh:
                runs.append(run_store(f"{name}-{i}", fresh, root, work))
        else:
            runs.append(run_store(f"{name}-{i}", url, root, work))
    return min(runs, key=lambda r: r["first"])


@contextmanager
def postgres_database(url: str, name: str) -> Iterator[str]:
    """A new empty database beside the one ``url`` names (its checkpoint tables are made by the capture)."""
    import psycopg

    base, sep, query = url.partition("?")  # the query may name a socket folder: split before it
    head, _, _ = base.rpartition("/")
    admin = f"{head}/postgres{sep}{query}".replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
    yield f"{head}/{name}{sep}{query}"


@contextmanager
def postgres(url: str | None) -> Iterator[str | None]:
    if url:
        yield url
        return
    try:
        from tests.pg import PgCluster, pg_bin_dir, start_cluster
    except ImportError:
        yield None
        return
    if pg_bin_dir() is None:
        yield None
        return
    gen = start_cluster()
    cluster: PgCluster = next(gen)
    cluster.admin("CREATE DATABASE bench TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
    try:
        yield cluster.url("bench")
    finally:
        dispose_engines()
        gen.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--pg", default=os.environ.get("SESSIONSCOPE_BENCH_PG"))
    parser.add_argument("--no-pg", action="store_true", help="SQLite only (no PostgreSQL column)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="first captures per store (fresh directories each); the best is shown")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-teamstore-") as tmp:
        work = Path(tmp)
        root = work / "projects"
        files, size = build_tree(root, args.files)
        floor(root)  # warm the page cache: every run below reads warm files
        floors = [floor(root)]
        results: dict[str, dict[str, float]] = {"sqlite": best_of(args.rounds, "sqlite", None, root, work, floors)}
        floor_s = min(floors)
        print(f"tree: {files} Claude Code transcripts, {size / 1e6:.1f} MB")
        print(f"floor (read + json.loads every line): {floor_s:.3f} s (the best of {len(floors)}, one measured "
              "just before each SQLite round)")
        if not args.no_pg:
            with postgres(args.pg) as url:
                if url is not None:
                    results["postgresql"] = best_of(args.rounds, "postgresql", url, root, work)
        print(f"{'store':<12}{'first capture':>22}{'unchanged re-capture':>28}{'all list pages':>22}")
        for name, r in results.items():
            print(f"{name:<12}{r['first']:>9.2f} s = {r['first'] / floor_s:>5.2f}x floor"
                  f"{r['again']:>13.2f} s = {r['again'] / floor_s:>5.2f}x floor"
                  f"{r['pages'] * 1000:>10.1f} ms / {r['n_pages']:.0f} pages")
        if args.no_pg:
            print("postgresql: skipped (--no-pg)")
        elif "postgresql" not in results:
            print("postgresql: skipped (no server: pass --pg URL or install the PostgreSQL server binaries)")
        ok = results["sqlite"]["first"] <= 3 * floor_s
        print(f"first capture into SQLite / floor = {results['sqlite']['first'] / floor_s:.2f} (target <= 3): "
              f"{'ok' if ok else 'ABOVE TARGET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
