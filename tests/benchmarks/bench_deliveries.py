"""The delivery outbox's operator view on a large outbox, measured side by side in one run.

    .venv/bin/python -m tests.benchmarks.bench_deliveries [--samples N] [--dir PATH]

On a generated directory of 100,000 delivery operations (40,000 intents of 2 or 3 chained operations, on 20,000
runs of 2,000 sessions; 5% of the operations failed or uncertain, the rest delivered, uploaded or unsupported),
built once with raw SQL and reused, it prints, each against the bare SQL of the reference's operator view (13.8:
failed and uncertain operations joined with their intent, ``updated_at DESC``, at most 200 rows) run with the
``sqlite3`` module:

(a) **the Deliveries screen's first page** (in-process: the list's row source, ``DeliverySource.first(100)``:
    grouped by platform and target, the waiting retries included, each row's chain read in the same read
    transaction, on an open directory) ÷ the reference's operator view on an open connection (plain ``sqlite3``:
    its default page cache and text decoding); then ÷ the page's own two statements run bare (its page query
    and the query over the page's intents). Both plans use the same index (``idx_delivery_operations_claim``
    for the status, the intents' primary key for the join); the grouped order needs each candidate's intent
    row (platform, target) while the reference's ``updated_at DESC`` reads it only for the rows that enter its
    bounded sorter, and no index of the v43 schema holds an intent's platform and target by its id;
(a') the same page newest first (``DeliveryScope(waiting=True)``: the reference's order, chains included) ÷ the
    reference's view, and ÷ its own statements;
(b) **``sessionscope deliveries --json``** in-process (``tui.cli.main``: parsing the arguments with the parser of
    that command alone, opening the directory, the listing, the JSON written to a buffer) ÷ the bare SQL with
    its connection opened and its rows dumped as JSON the same way; also the command alone once its arguments
    are parsed;
(c) the same as **whole processes**, their bytecode cached as installed (``python -m tui … deliveries --json``
    ÷ ``python -c`` running the bare SQL and printing its JSON), so the interpreter's start-up and imports are
    counted on both sides; then ÷ the ``sqlite3`` command printing the view as JSON (``-readonly -json``).

Each side's rows are checked to be the same (the page's operation ids; the JSON records field by field). Target
≤ 1.3 for (a) and (b). Medians of N alternating samples, and the best of each. Not part of the test run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SESSIONS = 2_000
RUNS = 20_000
OPERATIONS = 100_000
ATTENTION_SHARE = 0.05
DEFAULT_DIR = Path(tempfile.gettempdir()) / "sessionscope-bench" / f"deliveries-{OPERATIONS}" / "sessions"
NOW_MS = 1_795_000_000_000

BARE_SQL = (
    "SELECT o.id, o.intent_id, i.session_id, i.run_id, i.platform, i.target_id, o.operation_kind, o.status, "
    "o.failure_code, o.attempt_count, o.updated_at FROM delivery_operations o "
    "JOIN delivery_intents i ON i.id = o.intent_id WHERE o.status IN ('failed', 'uncertain') "
    "ORDER BY o.updated_at DESC LIMIT 200"
)
# The two statements of the screen's first page, as the store runs them (deliveries_page, DeliveryScope(waiting=True,
# grouped=True)), to be run bare: the page query (each row in full) and the chain links of the page's intents.
_SCREEN_COLUMNS = (
    "o.id, o.intent_id, i.session_id, i.run_id, i.platform, i.target_id, o.operation_kind, o.status, "
    "o.failure_code, o.attempt_count, o.updated_at, o.rowid, o.sequence, o.depends_on, o.next_attempt_at, "
    "o.lease_owner, o.lease_epoch, o.lease_expires_at, i.status")
_SCREEN_WHERE = ("(o.status IN ('failed','uncertain','retry_wait') "
                 "AND (o.status != 'retry_wait' OR (o.attempt_count > 0 AND o.failure_code != '')))")
SCREEN_SQL = (
    f"SELECT {_SCREEN_COLUMNS} FROM delivery_operations o LEFT JOIN delivery_intents i ON i.id = o.intent_id "
    f"WHERE {_SCREEN_WHERE} "
    "ORDER BY i.platform ASC, i.target_id ASC, o.updated_at DESC, o.id DESC, o.rowid DESC LIMIT 101"
)
# The same page newest first (DeliveryScope(waiting=True)): the operations sorted alone, then the page's intents.
RECENT_SQL = (
    f"SELECT {_SCREEN_COLUMNS} FROM (SELECT o.rowid AS rid FROM delivery_operations o WHERE {_SCREEN_WHERE} "
    "ORDER BY o.updated_at DESC, o.id DESC, o.rowid DESC LIMIT 101) k JOIN delivery_operations o ON o.rowid = k.rid "
    "LEFT JOIN delivery_intents i ON i.id = o.intent_id ORDER BY o.updated_at DESC, o.id DESC, o.rowid DESC"
)
SCREEN_DETAILS_SQL = (
    "SELECT o.intent_id, o.id, o.sequence, o.operation_kind, o.status, o.failure_code, o.depends_on "
    "FROM delivery_operations o WHERE o.intent_id IN ({marks}) ORDER BY o.intent_id, o.sequence"
)
FIELDS = ("operationId", "intentId", "sessionId", "runId", "platform", "targetId", "operationKind", "status",
          "failureCode", "attemptCount", "updatedAt")

SQLITE3_CLI = ["sqlite3", "-readonly", "-json"]  # the sqlite3 command: the reference's view as JSON rows
BARE_PROCESS = (
    "import json, sqlite3, sys\n"
    "conn = sqlite3.connect(f'file:{sys.argv[1]}/sessions.db?mode=ro', uri=True)\n"
    f"rows = conn.execute({BARE_SQL!r}).fetchall()\n"
    f"fields = {FIELDS!r}\n"
    "print(json.dumps({'deliveries': [dict(zip(fields, r)) for r in rows], 'count': len(rows)}, indent=2))\n"
)


def _stamp(ms: int) -> str:
    sec, frac = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{frac:03d}Z"


def build(folder: Path) -> None:
    """2,000 sessions, 20,000 finished runs, 40,000 intents and 100,000 operations, with raw SQL."""
    from store.mothx.db import OpenMode
    from store.mothx.sessiondir import open_session_dir

    folder.mkdir(parents=True, exist_ok=True)
    open_session_dir(folder, OpenMode.READ_WRITE, create=True).close()
    rng = random.Random(12)
    conn = sqlite3.connect(folder / "sessions.db")
    with conn:
        conn.executemany("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, ?, ?)",
                         [(f"s{i:015x}", f"/work/p{i % 30}", _stamp(NOW_MS - i * 60_000)) for i in range(SESSIONS)])
        conn.executemany(
            "INSERT INTO session_runs (id, session_id, status, started_at, updated_at, finished_at) "
            "VALUES (?, ?, 'completed', ?, ?, ?)",
            [(f"run{r:013x}", f"s{r % SESSIONS:015x}", _stamp(NOW_MS - r * 9_000), _stamp(NOW_MS - r * 9_000),
              _stamp(NOW_MS - r * 9_000 + 5_000)) for r in range(RUNS)])
        intents, ops = [], []
        n_ops = 0
        platforms = ("feishu", "wechat", "slack", "telegram")
        i = 0
        while n_ops < OPERATIONS:
            run = i // 2
            platform = platforms[i % len(platforms)]
            target = f"{platform[:2]}_{rng.randrange(400):04d}"
            created = NOW_MS - run * 9_000 + 5_000
            intent = f"dlv{i:013x}"
            kinds = ("send_text", "upload_file", "send_file") if i % 2 == 0 else ("upload_image", "send_image")
            kinds = kinds[:OPERATIONS - n_ops]  # type: ignore[assignment]
            statuses = []
            for n, kind in enumerate(kinds):
                if rng.random() < ATTENTION_SHARE:
                    status, code = rng.choice((("failed", "transport_error"), ("failed", "delivery_retries_exhausted"),
                                               ("failed", "provider_rejected"), ("failed", "dependency_failed"),
                                               ("uncertain", "provider_outcome_unknown")))
                else:
                    status, code = ("uploaded" if kind.startswith("upload") else "delivered"), ""
                statuses.append(status)
                op_id = f"dop{n_ops:013x}"
                dep = f"dop{n_ops - 1:013x}" if n else None
                ops.append((op_id, intent, f"k{n}", kind, n + 1, dep, f"{intent}:k{n}", f"d{n_ops}", status,
                            rng.randrange(1, 12) if status in ("failed", "uncertain") else 1, code,
                            _stamp(created), _stamp(created + rng.randrange(1, 600_000))))
                n_ops += 1
            from store.mothx.delivery_model import aggregate_intent_status

            intents.append((intent, f"s{run % SESSIONS:015x}", f"run{run:013x}", platform, target,
                            aggregate_intent_status(statuses), _stamp(created), _stamp(created)))
            i += 1
        conn.executemany("INSERT INTO delivery_intents (id, session_id, run_id, platform, target_id, status, "
                         "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", intents)
        conn.executemany(
            "INSERT INTO delivery_operations (id, intent_id, operation_key, operation_kind, sequence, depends_on, "
            "idempotency_key, payload_digest, status, attempt_count, failure_code, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", ops)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def ensure(folder: Path) -> Path:
    db = folder / "sessions.db"
    if db.exists():
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            count = conn.execute("SELECT count(*) FROM delivery_operations").fetchone()[0]
        finally:
            conn.close()
        if count == OPERATIONS:
            return folder
        db.unlink()
    print(f"building {folder} …", flush=True)
    build(folder)
    return folder


def stats(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), min(values)


def row(label: str, ours: list[float], theirs: list[float], target: float | None) -> str:
    (ma, ba), (mb, bb) = stats(ours), stats(theirs)
    ratio = ma / mb
    verdict = "" if target is None else (f"  meets ≤ {target}" if ratio <= target else f"  MISSES ≤ {target}")
    return (f"{label:<54} {ma * 1000:7.2f} ms {mb * 1000:7.2f} ms {ratio:5.2f}{verdict}\n"
            f"{'':<54} {ba * 1000:7.2f} ms {bb * 1000:7.2f} ms {ba / bb:5.2f}  (best of each)")


def bare_screen(conn: sqlite3.Connection, sql: str = SCREEN_SQL) -> list[tuple[object, ...]]:
    rows = conn.execute(sql).fetchall()
    intents = sorted({str(r[1]) for r in rows[:100]})
    conn.execute(SCREEN_DETAILS_SQL.format(marks=",".join("?" * len(intents))), intents).fetchall()
    return rows[:100]


def timed(samples: int, *runs: Callable[[], object]) -> list[list[float]]:
    """Each of ``runs`` ``samples`` times, alternating: their times."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(samples):
        for run, into in zip(runs, times, strict=True):
            t = time.perf_counter()
            run()
            into.append(time.perf_counter() - t)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--processes", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    folder = ensure(args.dir)

    from store.mothx.db import OpenMode
    from store.mothx.delivery_listing import DeliveryScope
    from store.mothx.sessiondir import open_session_dir
    from tui.cli import main as cli_main
    from tui.widgets.delivery_list import FIRST_PAGE, DeliverySource

    conn = sqlite3.connect(f"file:{folder}/sessions.db?mode=ro", uri=True)
    (attention,) = conn.execute("SELECT count(*) FROM delivery_operations WHERE status IN ('failed','uncertain')"
                                ).fetchone()
    print(f"directory: {folder} ({OPERATIONS:,} operations, {attention:,} failed or uncertain)")
    print(f"{'':<54} {'ours':>10} {'bare SQL':>10} {'ratio':>5}   (median of {args.samples}, alternating)")

    # (a) in-process, open directory vs open connection (plain sqlite3: its own text decoding, not the store's
    # lossless one)
    with open_session_dir(folder, OpenMode.READ_ONLY) as sd:
        grouped = DeliverySource(sd, DeliveryScope(waiting=True, grouped=True))
        recent = DeliverySource(sd, DeliveryScope(waiting=True))
        page, newest = grouped.first(FIRST_PAGE), recent.first(FIRST_PAGE)
        assert len(page.rows) == FIRST_PAGE, len(page.rows)
        # the same result rows: ours and the bare statements', and newest first the reference view's
        assert [r.operation_id for r in page.rows] == [r[0] for r in bare_screen(conn)]
        assert [r.operation_id for r in newest.rows] == [r[0] for r in bare_screen(conn, RECENT_SQL)]
        assert [r.operation_id for r in newest.rows] == [r[0] for r in conn.execute(BARE_SQL).fetchall()[:FIRST_PAGE]]
        ours_a, ours_r, bare_same, bare_recent, bare_ref = timed(
            args.samples, lambda: grouped.first(FIRST_PAGE), lambda: recent.first(FIRST_PAGE),
            lambda: bare_screen(conn), lambda: bare_screen(conn, RECENT_SQL), lambda: conn.execute(BARE_SQL).fetchall())
    print(row(f"(a) screen's first page ({FIRST_PAGE} rows + chains) ÷ the reference's view", ours_a, bare_ref, 1.3))
    print(row("    the same page ÷ its own two statements, bare", ours_a, bare_same, None))
    print(row("    (its statements ÷ the reference's: the grouped order's cost)", bare_same, bare_ref, None))
    print(row("(a') the page newest first (the reference's order) ÷ its view", ours_r, bare_ref, 1.3))
    print(row("    the same page ÷ its own two statements, bare", ours_r, bare_recent, None))

    # (b) deliveries --json in-process vs the bare SQL with its connection and JSON
    ours_b, bare_b = [], []
    argv = ["--dir", str(folder), "deliveries", "--json"]
    for _ in range(args.samples):
        buf = io.StringIO()
        t = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            code = cli_main(argv)
        ours_b.append(time.perf_counter() - t)
        listed = json.loads(buf.getvalue())
        assert code == 0 and listed["count"] == 200
        t = time.perf_counter()
        c = sqlite3.connect(f"file:{folder}/sessions.db?mode=ro", uri=True)
        rows = c.execute(BARE_SQL).fetchall()
        text = json.dumps({"deliveries": [dict(zip(FIELDS, r, strict=True)) for r in rows], "count": len(rows)},
                          indent=2)
        c.close()
        bare_b.append(time.perf_counter() - t)
        # the same result rows, field by field (ours adds `retryable`)
        assert [{k: v for k, v in r.items() if k != "retryable"} for r in listed["deliveries"]] == \
            json.loads(text)["deliveries"]
    print(row("(b) deliveries --json, in-process (parse, open, list, JSON)", ours_b, bare_b, 1.3))
    # the same without building the argument parser (every command's parsers are built on each main() call)
    from tui.cli.core import build_parser
    from tui.cli.deliveries import cmd_deliveries

    parsed = build_parser().parse_args(argv)
    ours_b2, bare_b2 = [], []
    for _ in range(args.samples):
        buf = io.StringIO()
        t = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            cmd_deliveries(parsed)
        ours_b2.append(time.perf_counter() - t)
        t = time.perf_counter()
        c = sqlite3.connect(f"file:{folder}/sessions.db?mode=ro", uri=True)
        rows = c.execute(BARE_SQL).fetchall()
        json.dumps({"deliveries": [dict(zip(FIELDS, r, strict=True)) for r in rows], "count": len(rows)}, indent=2)
        c.close()
        bare_b2.append(time.perf_counter() - t)
    print(row("    the command once its arguments are parsed (open, list, JSON)", ours_b2, bare_b2, None))

    # (c) whole processes, with the bytecode cached as an installed package has it (in a folder of this benchmark:
    # PYTHONDONTWRITEBYTECODE, if set, would make every run compile every module again); one run of each first
    cli = [sys.executable, "-m", "tui", "--dir", str(folder), "deliveries", "--json"]
    bare = [sys.executable, "-c", BARE_PROCESS, str(folder)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(folder.parent / "pycache")

    def process(argv: list[str]) -> Callable[[], object]:
        return lambda: subprocess.run(argv, capture_output=True, check=True, cwd=ROOT, env=env)

    sqlite_cli = [*SQLITE3_CLI, str(folder / "sessions.db"), BARE_SQL]
    runs = [process(cli), process(bare)] + ([process(sqlite_cli)] if shutil.which(SQLITE3_CLI[0]) else [])
    for run in runs:
        run()
    ours_c, bare_c, *sqlite_c = timed(args.processes, *runs)
    print(row(f"(c) deliveries --json, whole processes ({args.processes} runs)", ours_c, bare_c, None))
    if sqlite_c:
        print(row("    the same ÷ the sqlite3 command printing the view as JSON", ours_c, sqlite_c[0], None))
    conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
