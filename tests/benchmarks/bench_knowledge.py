"""Knowledge-base query and indexing, measured side by side in one run.

    .venv/bin/python -m tests.benchmarks.bench_knowledge [--samples N] [--rebuild]

(a) **query ÷ FTS5 statement**: on a generated base of 200,000 chunks (5 % of them with CJK text), 100,000
    nodes, 150,000 edges and 300,000 evidence rows (the reference DDL, no extra index; built once with raw SQL
    under ``tests/benchmarks/data/``, which git ignores), the median time of
    :func:`store.knowledge.query.query_graph` (read-only: opening the store, the FTS chunks, the seeds, the
    bounded graph, the evidence, the ordering; also :func:`~store.knowledge.query.run_query` on a store held open)
    ÷ the median time of the same FTS5 statement (:data:`~store.knowledge.query.CHUNK_SQL`, same MATCH text, limit
    8) run directly with ``sqlite3`` on an open connection. Target ≤ 1.3. One line per query (a common term, two
    mid terms, a rare term, a CJK term, FTS syntax), then the total.
(b) **kb index of this repository twice**: into a new session directory, a first run that reads every file, then
    a second run over the unchanged tree that reuses every file's subgraph; wall time of each, files reused.

Not part of the test run.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CHUNKS = 200_000
NODES = 100_000
EDGES = 150_000
FILES = 2_000
DATA = Path(__file__).resolve().parent / "data" / f"kb-{CHUNKS // 1000}k-{NODES // 1000}k" / "sessions"
DATA_INDEXED = DATA.parent / "sessions-indexed"
BASE = "bench"
SNAP = "snap_bench"
NOW = "2026-11-20T12:00:00Z"
QUERIES = ("connection", "retry backoff", "w04711", "部署", 'pool" AND NEAR( *')
CJK = "部署流程回滚数据库迁移灰度发布错误率实例版本确认通过执行观察全量"


def _words(rng: random.Random) -> list[str]:
    common = ["connection", "pool", "retry", "backoff", "booking", "berth", "schedule", "webhook", "outbox", "lease",
              "tide", "crane", "vessel", "confirm", "cancel", "migrate", "deploy", "rollback", "limit", "cursor"]
    return common + [f"w{i:05d}" for i in range(20_000)]


def build(folder: Path) -> None:
    from store.knowledge.base import create_base
    from store.knowledge.model import cjk_bigrams
    from store.mothx.db import OpenMode
    from store.mothx.sessiondir import open_session_dir

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    open_session_dir(folder, OpenMode.READ_WRITE, create=True).close()
    create_base(folder, BASE, name="Benchmark", root_dir="/bench", created_at=NOW).close()
    rng = random.Random(13)
    vocab = _words(rng)
    weights = [1.0 / (i + 1) ** 1.05 for i in range(len(vocab))]
    conn = sqlite3.connect(folder / "knowledge-bases" / f"{BASE}.db")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    with conn:
        conn.execute("INSERT INTO knowledge_index_snapshots (id,knowledge_base_id,status,schema_version,file_count,"
                     "chunk_count,node_count,edge_count,started_at,finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                     (SNAP, BASE, "completed", 2, FILES, CHUNKS, NODES, EDGES, NOW, NOW))
        conn.executemany("INSERT INTO knowledge_files (id,snapshot_id,relative_path,content_sha256,byte_size,media_type,"
                         "title,status) VALUES (?,?,?,?,?,?,?,?)",
                         [(f"f{i}", SNAP, f"src/pkg{i % 50}/file{i}.md", f"{i:064x}", 4096, "text/markdown", "", "indexed")
                          for i in range(FILES)])
        batch = []
        for c in range(CHUNKS):
            words = rng.choices(vocab, weights, k=rng.randint(30, 60))
            if c % 20 == 0:
                words.insert(rng.randrange(len(words)), "".join(rng.choice(CJK) for _ in range(rng.randint(2, 6))))
            text = " ".join(words)
            batch.append((f"c{c}", SNAP, f"f{c % FILES}", c // FILES, text, (c // FILES) * 10 + 1,
                          (c // FILES) * 10 + 10, f"{c:064x}"))
            if len(batch) == 20_000:
                conn.executemany("INSERT INTO knowledge_chunks VALUES (?,?,?,?,?,?,?,?)", batch)
                conn.executemany("INSERT INTO knowledge_chunk_fts (chunk_id,snapshot_id,text) VALUES (?,?,?)",
                                 [(b[0], SNAP, cjk_bigrams(b[4])) for b in batch])
                batch = []
        conn.executemany("INSERT INTO knowledge_nodes (id,snapshot_id,kind,label,normalized_label,status,confidence) "
                         "VALUES (?,?,?,?,?,?,?)",
                         [(f"n{i}", SNAP, "concept", f"{vocab[i % len(vocab)]} {i}", f"{vocab[i % len(vocab)]} {i}",
                           "candidate" if i % 17 == 0 else "fact", 0.4 if i % 17 == 0 else 1.0) for i in range(NODES)])
        ev = []
        for i in range(NODES):
            for k in range(1 + (i % 2)):
                ev.append((f"evn{i}-{k}", SNAP, f"n{i}", "", f"c{(i * 2 + k * 7919) % CHUNKS}", 1, 1, 1.0))
        edges: list[tuple[object, ...]] = []
        seen: set[tuple[int, int]] = set()
        while len(edges) < EDGES:
            a = int(rng.paretovariate(1.2)) % NODES if rng.random() < 0.3 else rng.randrange(NODES)
            b = rng.randrange(NODES)
            if a == b or (a, b) in seen:
                continue
            seen.add((a, b))
            eid = f"e{len(edges)}"
            edges.append((eid, SNAP, f"n{a}", f"n{b}", rng.choice(["uses", "defines", "co_mentions", "links"]),
                          rng.choice([1.0, 0.9, 0.4])))
            ev.append((f"eve{len(edges)}", SNAP, "", eid, f"c{rng.randrange(CHUNKS)}", 1, 1, 1.0))
        conn.executemany("INSERT INTO knowledge_edges VALUES (?,?,?,?,?,?)", edges)
        conn.executemany("INSERT INTO knowledge_evidence VALUES (?,?,?,?,?,?,?,?)", ev)
        conn.execute("UPDATE knowledge_bases SET active_snapshot_id = ?", (SNAP,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()


def indexed_copy(source: Path, target: Path) -> None:
    """``source`` with the helper indexes a base created by ``kb index`` carries (store.knowledge.base)."""
    from store.knowledge.base import HELPER_INDEXES

    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    conn = sqlite3.connect(target / "knowledge-bases" / f"{BASE}.db")
    with conn:
        for statement in HELPER_INDEXES:
            conn.execute(statement)
    conn.close()


def _median(fn: Callable[[], None], samples: int) -> float:
    fn()  # warm the page cache
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_query(folder: Path, samples: int) -> list[tuple[str, float, float, float, int, int, int, bool]]:
    from store.knowledge.base import open_store
    from store.knowledge.query import CHUNK_SQL, match_expression, query_graph, query_terms, run_query
    from store.mothx.db import OpenMode

    db = folder / "knowledge-bases" / f"{BASE}.db"
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    store = open_store(folder, BASE, OpenMode.READ_ONLY)
    rows = []
    for query in QUERIES:
        match = match_expression(query_terms(query))

        def direct(match: str = match) -> None:
            raw.execute(CHUNK_SQL, (SNAP, match, 8)).fetchall()

        def opened(query: str = query) -> None:
            with store.read() as conn:
                run_query(conn, store.layout, BASE, store.path, query)

        def full(query: str = query) -> None:
            query_graph(folder, BASE, query, OpenMode.READ_ONLY)

        t_direct = _median(direct, samples)
        t_open = _median(opened, samples)
        t_full = _median(full, samples)
        r = query_graph(folder, BASE, query, OpenMode.READ_ONLY)
        rows.append((query, t_direct, t_open, t_full, len(r.chunks), len(r.nodes), len(r.edges), r.truncated))
    store.close()
    raw.close()
    return rows


def bench_index() -> tuple[float, float, int, int, int]:
    from store.knowledge.indexer import index_folder
    from store.mothx.db import OpenMode
    from store.mothx.sessiondir import open_session_dir

    with tempfile.TemporaryDirectory(prefix="sessionscope-kb-bench-") as tmp:
        root = Path(tmp) / "sessions"
        root.mkdir()
        open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
        t = time.perf_counter()
        first = index_folder(root, ROOT, "repo", OpenMode.READ_WRITE)
        t_first = time.perf_counter() - t
        t = time.perf_counter()
        second = index_folder(root, ROOT, "repo", OpenMode.READ_WRITE)
        t_second = time.perf_counter() - t
        return t_first, t_second, first.snapshot.file_count, second.reused_files, second.extracted_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--rebuild", action="store_true", help="generate the base again")
    args = parser.parse_args(argv)
    if args.rebuild or not (DATA / "knowledge-bases" / f"{BASE}.db").is_file():
        t = time.perf_counter()
        build(DATA)
        print(f"generated {DATA} in {time.perf_counter() - t:.1f} s")
    if args.rebuild or not (DATA_INDEXED / "knowledge-bases" / f"{BASE}.db").is_file():
        indexed_copy(DATA, DATA_INDEXED)
    results = {"reference DDL only (a file mothx wrote)": bench_query(DATA, args.samples),
               "with the two evidence indexes kb index adds": bench_query(DATA_INDEXED, args.samples)}
    t_first, t_second, files, reused, extracted = bench_index()
    print(f"(a) query over {CHUNKS:,} chunks / {NODES:,} nodes / {EDGES:,} edges / 300,000 evidence rows "
          f"(median of {args.samples}):")
    for title, rows in results.items():
        print(f"  {title}")
        print(f"    {'query':<22} {'FTS5 stmt':>10} {'run_query':>10} {'query_graph':>12} {'ratio':>6} {'ratio(open)':>11}"
              f"  chunks nodes edges")
        total_direct = total_full = total_open = 0.0
        for query, t_direct, t_open, t_full, n_chunks, n_nodes, n_edges, truncated in rows:
            total_direct += t_direct
            total_open += t_open
            total_full += t_full
            print(f"    {query!r:<22} {t_direct * 1000:>8.2f}ms {t_open * 1000:>8.2f}ms {t_full * 1000:>10.2f}ms "
                  f"{t_full / t_direct:>6.2f} {t_open / t_direct:>11.2f}  {n_chunks:>6} {n_nodes:>5} {n_edges:>5}"
                  + (" truncated" if truncated else ""))
        print(f"    {'all queries':<22} {total_direct * 1000:>8.2f}ms {total_open * 1000:>8.2f}ms "
              f"{total_full * 1000:>10.2f}ms {total_full / total_direct:>6.2f} {total_open / total_direct:>11.2f}"
              "   (target ≤ 1.3)")
    print(f"(b) kb index of this repository ({files} files): first {t_first:.2f} s, second {t_second:.2f} s "
          f"({reused} reused, {extracted} read again)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
