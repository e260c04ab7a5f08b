"""Every health check of a session directory, each a :class:`HealthCheck` row. Read-only: no check writes.

A check that cannot look fails closed: its row is an ``error`` that says why, never a silent ``ok``.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from store.errors import StoreError
from store.eventstore.intents import sessions_with_intents
from store.eventstore.protocol import BLOCKED, CORRUPT, HEALTHY, INCONSISTENT, RECONCILING, inspect_event_store
from store.eventstore.repairs import projection_problem
from store.eventstore.segments import EVENTS_DIR, store_dir_name
from store.health.integrity import Progress, integrity_check
from store.health.model import ERROR, OK, WARN, HealthCheck, human_bytes
from store.health.reset import COMPANIONS, _moves, _stamp, active_runtime_leases, left_behind, tree_bytes
from store.health.space import space_checks
from store.mothx.db import OpenMode, open_database
from store.mothx.lease_model import LeaseSnapshot
from store.mothx.lease_store import list_leases
from store.mothx.run_listing import list_orphaned
from store.mothx.schema import CURRENT_VERSION
from store.mothx.sessiondir import SessionDir
from store.paths import KNOWLEDGE_DIR
from store.safetext import one_line
from store.times import from_unix
from store.words import plural

WAL_WARN_BYTES = 64 * 1024 * 1024
MAX_ROWS = 20  # rows per kind of finding (the rest are counted in the last one)
KB_SUPPORTED = 4
KB_NAME = re.compile(r"^[A-Za-z0-9_-]+\.db$")
DELIVERY_TABLES = ("delivery_operations", "delivery_intents", "attachment_deliveries")


def _guard(check_id: str, title: str, fn: Callable[[], list[HealthCheck]]) -> list[HealthCheck]:
    try:
        return fn()
    except (StoreError, sqlite3.Error, OSError, ValueError) as exc:
        return [HealthCheck(check_id, title, ERROR, f"could not be checked: {one_line(str(exc))}")]


def run_checks(sd: SessionDir, *, full: bool = False, progress: Progress | None = None,
               cancel: threading.Event | None = None) -> list[HealthCheck]:
    """Every check, in a stable order. ``full`` adds the long integrity check (``progress``, ``cancel``)."""
    rows: list[HealthCheck] = []
    rows += _guard("db.quick_check", "Quick check", lambda: [quick_check(sd)])
    if full:
        rows += _guard("db.integrity_check", "Integrity check", lambda: [integrity_check(sd, progress, cancel)])
    else:
        rows.append(HealthCheck("db.integrity_check", "Integrity check", OK,
                                "not run: it reads every page (doctor --full, or key i on the Health screen)"))
    rows += _guard("schema", "Schema", lambda: schema_checks(sd))
    rows += _guard("db.size", "Database and WAL", lambda: [size_check(sd)])
    rows += _guard("db.rebuilt", "Database rebuilds", lambda: [rebuild_check(sd)])
    rows += _guard("leases", "Leases", lambda: lease_checks(sd))
    rows += _guard("runs.orphaned", "Orphaned runs", lambda: orphan_checks(sd))
    rows += _guard("recoveries.failed", "Failed recoveries", lambda: recovery_checks(sd))
    rows += _guard("deliveries.failed", "Failed deliveries", lambda: [delivery_check(sd)])
    rows += _guard("events", "Event stores", lambda: event_checks(sd))
    rows += _guard("kb", "Knowledge bases", lambda: kb_checks(sd))
    rows += _guard("reset", "What a reset leaves", lambda: [reset_check(sd)])
    rows += _guard("space", "Space", lambda: space_checks(sd))
    return rows


def summarize(checks: list[HealthCheck]) -> dict[str, int]:
    counts = Counter(c.status for c in checks)
    return {s: counts.get(s, 0) for s in (OK, WARN, ERROR)}


# ---------------------------------------------------------------------------------------------------------------
# Database


def quick_check(sd: SessionDir) -> HealthCheck:
    result = sd.db.quick_check()
    if result == "ok":
        return HealthCheck("db.quick_check", "Quick check", OK, "ok (PRAGMA quick_check)")
    return HealthCheck("db.quick_check", "Quick check", ERROR, one_line(result[:500]), "reset-db",
                       advice="restore sessions.db from a backup, or reset it (the old file is kept)")


def schema_checks(sd: SessionDir) -> list[HealthCheck]:
    info = sd.schema
    version = f"version {info.version}" if info.version is not None else "no recorded version"
    status = {"current": OK, "newer": WARN, "older": WARN}.get(info.status, ERROR)
    detail = f"{version} ({info.status}; this build knows {CURRENT_VERSION})"
    if info.notice:
        detail += f": {one_line(info.notice)}"
    rows = [HealthCheck("schema.version", "Schema version", status, detail,
                        advice="" if status == OK else "open the directory with mothx to migrate it")]
    missing = [f"table {one_line(t)}" for t in info.missing_tables]
    missing += [f"{one_line(t)}.{one_line(c)}" for t, cols in sorted(info.missing_columns.items()) for c in cols]
    if missing and info.status != "older":
        rows.append(HealthCheck("schema.columns", "Required columns", ERROR,
                                f"{len(missing)} missing: " + ", ".join(missing[:30]),
                                advice="the layout is shown read-only; mothx rebuilds an incompatible database"))
    elif missing:
        rows.append(HealthCheck("schema.columns", "Required columns", WARN,
                                f"{len(missing)} missing, as the older version implies: " + ", ".join(missing[:30])))
    else:
        rows.append(HealthCheck("schema.columns", "Required columns", OK, "every required table and column is present"))
    return rows


def _db_files(sd: SessionDir) -> dict[str, int]:
    out = {}
    for suffix in ("", *COMPANIONS):
        p = Path(str(sd.db_path) + suffix)
        if os.path.lexists(p):
            out[p.name] = p.lstat().st_size
    return out


def size_check(sd: SessionDir) -> HealthCheck:
    files = _db_files(sd)
    db = files.get(sd.db_path.name, 0)
    wal = files.get(sd.db_path.name + "-wal", 0)
    detail = ", ".join(f"{one_line(n)} {human_bytes(s)}" for n, s in files.items())
    if wal > WAL_WARN_BYTES and wal > db:
        return HealthCheck("db.size", "Database and WAL", WARN, detail + "; the WAL is larger than the database "
                           "(a reader may be holding back checkpoints)",
                           advice="close long-running readers; mothx checkpoints the WAL when it is free")
    return HealthCheck("db.size", "Database and WAL", OK, detail)


def rebuild_check(sd: SessionDir) -> HealthCheck:
    """Backups left by a database rebuild (reference 4.5; what TakeDatabaseRecoveries reports once)."""
    found = sorted(p.name for p in sd.root.iterdir() if ".migration-failed-" in p.name and p.name.endswith(".bak"))
    if not found:
        return HealthCheck("db.rebuilt", "Database rebuilds", OK, "no migration-failed backup in the directory")
    return HealthCheck("db.rebuilt", "Database rebuilds", WARN,
                       f"{plural(len(found), 'backup')} from a rebuilt incompatible database: " +
                       ", ".join(one_line(n) for n in found[:10]),
                       advice="the sessions before the rebuild are in these files; open one with --dir")


# ---------------------------------------------------------------------------------------------------------------
# Leases, runs, recoveries, deliveries


def lease_checks(sd: SessionDir) -> list[HealthCheck]:
    leases = list_leases(sd, active_only=True)
    valid = [x for x in leases if x.valid]
    expired = [x for x in leases if not x.valid]
    rows = []
    if valid:
        rows.append(HealthCheck("leases.active", "Active leases", OK,
                                f"{len(valid)} held: " + "; ".join(f"session {one_line(x.session_id)} {_held(x)}"
                                                                    for x in valid[:5]) +
                                ("" if len(valid) <= 5 else f" (and {len(valid) - 5} more)") +
                                "; a reset is refused while they are held"))
    else:
        rows.append(HealthCheck("leases.active", "Active leases", OK, "no process holds a lease"))
    for x in expired[:MAX_ROWS]:
        rows.append(HealthCheck(f"leases.expired.{x.session_id}", "Expired lease", WARN,
                                f"session {one_line(x.session_id)}: {_held(x)}", "release-lease",
                                (("session_id", x.session_id),), x.session_id))
    if len(expired) > MAX_ROWS:
        rows.append(HealthCheck("leases.expired.more", "Expired leases", WARN,
                                f"{len(expired) - MAX_ROWS} more expired leases (doctor --json lists the first {MAX_ROWS})"))
    return rows


def _held(lease: LeaseSnapshot) -> str:
    """The holder and the expiry as instants (no countdown: the row reads the same whenever it is drawn)."""
    if lease.problems:
        return lease.describe()
    state = "valid until" if lease.valid else "expired at"
    return f"held by {lease.describe_holder()} at epoch {lease.epoch}, {state} {from_unix(lease.expires_at)}"


def orphan_checks(sd: SessionDir) -> list[HealthCheck]:
    orphans = list_orphaned(sd)
    if not orphans:
        return [HealthCheck("runs.orphaned", "Orphaned runs", OK, "no active run has lost its owner")]
    rows = []
    for listing in orphans[:MAX_ROWS]:
        run = listing.run
        state = listing.execution.state if listing.execution else ""
        rows.append(HealthCheck(f"runs.orphaned.{run.id}", "Orphaned run", WARN,
                                f"run {one_line(run.id)} of session {one_line(run.session_id)} is {one_line(run.status)} "
                                f"({one_line(state)})", "recover-run", (("run_id", run.id),), run.session_id))
    return rows


def recovery_checks(sd: SessionDir) -> list[HealthCheck]:
    if not sd.schema.has("session_run_recoveries"):
        return [HealthCheck("recoveries.failed", "Failed recoveries", OK, "no recovery table in this layout")]
    with sd.db.read() as conn:
        rows = conn.execute(
            "SELECT r.run_id, r.session_id, r.attempt, r.last_error, coalesce(s.status, '') FROM session_run_recoveries r "
            "LEFT JOIN session_runs s ON s.id = r.run_id WHERE r.state = 'failed' ORDER BY r.updated_at DESC").fetchall()
    if not rows:
        return [HealthCheck("recoveries.failed", "Failed recoveries", OK, "no recovery record is failed")]
    out = []
    for run_id, sid, attempt, error, status in rows[:MAX_ROWS]:
        active = str(status) in ("created", "queued", "running", "waiting_for_approval", "waiting_for_question",
                                 "cancelling", "terminalizing")
        out.append(HealthCheck(f"recoveries.failed.{run_id}", "Failed recovery", WARN,
                               f"run {one_line(str(run_id))}: attempt {attempt} failed: {one_line(str(error))[:200]}",
                               "recover-run" if active else "", (("run_id", str(run_id)),) if active else (),
                               str(sid), "" if active else "the run is no longer active; nothing to recover"))
    return out


def delivery_check(sd: SessionDir) -> HealthCheck:
    """Rows of the delivery tables whose status is ``failed`` or ``uncertain`` (plain SQL, reference 13.2)."""
    parts = []
    total = 0
    with sd.db.read() as conn:
        for table in DELIVERY_TABLES:
            if not sd.schema.has(table, "status"):
                continue
            counts = dict(conn.execute(f"SELECT status, count(*) FROM {table} WHERE status IN ('failed', 'uncertain') "
                                       "GROUP BY status").fetchall())
            for status in ("failed", "uncertain"):
                n = int(counts.get(status, 0))
                if n:
                    parts.append(f"{table}: {n} {status}")
                    total += n
    if not total:
        return HealthCheck("deliveries.failed", "Failed deliveries", OK, "no delivery is failed or uncertain")
    return HealthCheck("deliveries.failed", "Failed deliveries", WARN, "; ".join(parts),
                       advice="see the delivery outbox; a failed operation can be reopened for retry")


# ---------------------------------------------------------------------------------------------------------------
# Event stores

_STATE_STATUS = {HEALTHY: OK, RECONCILING: WARN, BLOCKED: ERROR, INCONSISTENT: ERROR, CORRUPT: ERROR}


def event_store_sessions(sd: SessionDir) -> tuple[list[str], list[str]]:
    """(sessions that have an event store, folders under events/ that belong to no session)."""
    with sd.db.read() as conn:
        ids = [str(r[0]) for r in conn.execute("SELECT id FROM sessions ORDER BY id") if r[0] is not None]
        with_intents = set(sessions_with_intents(conn))
    folder = sd.root / EVENTS_DIR
    folders = set(os.listdir(folder)) if folder.is_dir() else set()
    by_dir = {store_dir_name(i): i for i in ids}
    have = sorted(with_intents | {by_dir[f] for f in folders if f in by_dir})
    strays = sorted(f for f in folders if f not in by_dir and f not in {store_dir_name(s) for s in with_intents})
    return have, strays


def event_checks(sd: SessionDir) -> list[HealthCheck]:
    sessions, strays = event_store_sessions(sd)
    rows = []
    for sid in sessions:
        rows.append(event_check(sd, sid))
    for name in strays[:MAX_ROWS]:
        rows.append(HealthCheck(f"events.stray.{name}", "Event folder", WARN,
                                f"events/{one_line(name)} belongs to no session in the database",
                                advice="left as it is; it may belong to a session of another database"))
    if not rows:
        rows.append(HealthCheck("events", "Event stores", OK, "no session has an event store"))
    return rows


def event_check(sd: SessionDir, sid: str) -> HealthCheck:
    ins = inspect_event_store(sd, sid)
    counts = ins.counts()
    summary = (f"{len(ins.scan.batches)} batches, {sum(b.count for b in ins.scan.batches)} events, "
               f"{human_bytes(ins.scan.total_bytes)}; intents " +
               (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"))
    status = _STATE_STATUS.get(ins.state, ERROR)
    cid = f"events.{sid}"
    title = "Event store"
    s = one_line(sid)
    if ins.state == RECONCILING:
        return HealthCheck(cid, title, WARN, f"session {s}: reconciling: {ins.reason} ({summary})", "reconcile-events",
                           (("session_id", sid),), sid)
    if ins.state != HEALTHY:
        advice = {BLOCKED: "the in-doubt batch cannot be decided from here: restore its bytes or the runtime decides",
                  INCONSISTENT: "the log and its intents disagree; nothing is promoted; restore the folder from a backup",
                  CORRUPT: "corruption is never skipped; restore the segment from a backup"}.get(ins.state, "")
        return HealthCheck(cid, title, status, f"session {s}: {ins.state}: {ins.reason} ({summary})", session_id=sid,
                           advice=advice)
    stale = projection_problem(ins)
    if stale:
        return HealthCheck(cid, title, WARN, f"session {s}: healthy, projection stale: {stale} ({summary})",
                           "rebuild-projection", (("session_id", sid),), sid)
    if ins.scan.manifest_problem:
        return HealthCheck(cid, title, OK, f"session {s}: healthy ({summary}); {ins.scan.manifest_problem}", session_id=sid)
    return HealthCheck(cid, title, OK, f"session {s}: healthy ({summary})", session_id=sid)


# ---------------------------------------------------------------------------------------------------------------
# Knowledge bases and the reset


def kb_checks(sd: SessionDir) -> list[HealthCheck]:
    folder = sd.root / KNOWLEDGE_DIR
    if not folder.is_dir():
        return [HealthCheck("kb", "Knowledge bases", OK, f"no {KNOWLEDGE_DIR}/ folder")]
    rows = []
    files = sorted(p for p in folder.iterdir() if p.name.endswith(".db"))
    for p in files:
        rows.append(kb_check(p))
    if not rows:
        rows.append(HealthCheck("kb", "Knowledge bases", OK, f"{KNOWLEDGE_DIR}/ holds no store"))
    return rows


def kb_check(path: Path) -> HealthCheck:
    name = one_line(path.name)
    cid = f"kb.{path.name}"
    size = human_bytes(tree_bytes(path))
    if not KB_NAME.match(path.name):
        return HealthCheck(cid, "Knowledge base", WARN, f"{name}: the name is not <kbID>.db ({size})")
    try:
        db = open_database(path, OpenMode.SNAPSHOT, foreign_keys=True)
    except StoreError as exc:
        return HealthCheck(cid, "Knowledge base", ERROR, f"{name}: cannot be opened: {one_line(str(exc))}")
    try:
        with db.read() as conn:
            has = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='knowledge_store_schema'").fetchone()
            version = conn.execute("SELECT max(version) FROM knowledge_store_schema").fetchone()[0] if has else None
            bases = conn.execute("SELECT count(*) FROM knowledge_bases").fetchone()[0] if conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='knowledge_bases'").fetchone() else 0
    except (sqlite3.Error, StoreError) as exc:
        return HealthCheck(cid, "Knowledge base", ERROR, f"{name}: cannot be read: {one_line(str(exc))}")
    finally:
        db.close()
    if version is None:
        return HealthCheck(cid, "Knowledge base", WARN, f"{name}: no store version recorded ({size})")
    if not isinstance(version, int) or version > KB_SUPPORTED:
        return HealthCheck(cid, "Knowledge base", WARN,
                           f"{name}: store version {one_line(str(version))} is newer than the {KB_SUPPORTED} known ({size})")
    older = "" if version == KB_SUPPORTED else f"; mothx migrates it to {KB_SUPPORTED} when it opens it"
    return HealthCheck(cid, "Knowledge base", OK, f"{name}: store version {version}, {plural(bases, 'base')}, {size}{older}")


def reset_check(sd: SessionDir) -> HealthCheck:
    moves = _moves(sd.root, _stamp())
    behind = left_behind(sd.root, [to for _, to in moves])
    leases = active_runtime_leases(sd)
    moved = ", ".join(one_line(f.name) for f, _ in moves) or "nothing"
    stayed = ", ".join(f"{one_line(b.name)}{'/' if b.directory else ''} {human_bytes(b.bytes)}" for b in behind) or "nothing"
    refused = f"; refused now: {plural(len(leases), 'lease')} still marked active" if leases else ""
    return HealthCheck("reset", "What a reset leaves", OK,
                       f"a reset moves {moved} aside and leaves {stayed}{refused}", "reset-db")
