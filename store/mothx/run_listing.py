"""The Runs screen's listing: runs newest first by keyset, each with its session's lease, derived state and
recovery record, all read in one transaction.

A damaged row is listed like any other, with its problems (:attr:`RunListing.problems`); an active damaged run
derives the state ``unknown``. The keyset cursor keeps the raw stored values, so a run whose ``started_at`` or
``id`` is a ``BLOB`` or ``NULL`` pages like the rest (SQLite orders ``NULL`` lowest, then numbers, text, blobs).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from store.mothx.cells import joined
from store.mothx.execution import (
    ExecutionFacts,
    ExecutionState,
    LocalOwner,
    derive_execution_state,
    keeps_remote,
)
from store.mothx.lease_model import LEASE_COLUMNS, LeaseSnapshot, snapshot_from_row, sqlite_now
from store.mothx.run_model import (
    NON_TERMINAL_STATUSES,
    RECOVERY_COLUMNS,
    RESPONSE_COLUMNS,
    RUN_COLUMNS,
    RecoveryRecord,
    ResponseRun,
    Run,
    recovery_from_row,
    response_from_row,
    run_from_row,
    select_columns,
)
from store.mothx.schema import SchemaInfo

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

ACTIVE_CAP = 1000
"""Active runs read at once (a directory with more is inconsistent anyway: one active run per session)."""

PAGE = 200
"""Recent runs per keyset read."""

ORPHAN_STATES = frozenset({"orphaned", "recovery_failed"})


@dataclass(frozen=True)
class RunCursor:
    """Keyset position in the newest-first run list (``started_at``, ``id``, then the row's rowid)."""

    started_at: str
    run_id: str
    raw_started_at: object = field(default=None, compare=False)
    raw_id: object = field(default=None, compare=False)
    rowid: int | None = None


@dataclass(frozen=True)
class RunListing:
    """One row of the Runs screen: the run, its session's lease, the derived state, the recovery record."""

    run: Run
    lease: LeaseSnapshot | None
    execution: ExecutionState | None  # the session's derived state when this run is its active run
    recovery: RecoveryRecord | None
    key: RunCursor | None = None

    @property
    def cursor(self) -> RunCursor:
        return self.key if self.key is not None else RunCursor(self.run.started_at, self.run.id,
                                                              self.run.started_at, self.run.id)

    @property
    def problems(self) -> tuple[str, ...]:
        """The damaged cells of the run row and its recovery row."""
        return self.run.problems + (self.recovery.problems if self.recovery is not None else ())

    @property
    def damaged(self) -> str:
        return joined(self.problems)

    @property
    def holder(self) -> str:
        return self.lease.owner_instance_id if self.lease is not None else ""

    @property
    def epoch(self) -> int:
        return self.lease.epoch if self.lease is not None else 0

    @property
    def expires_at(self) -> int | None:
        return self.lease.expires_at if self.lease is not None else None

    @property
    def state(self) -> str:
        """The derived execution state for an active run; the run's own status once it is terminal."""
        return self.execution.state if self.execution is not None else self.run.status


def _in_marks(values: list[str] | list[object]) -> str:
    return ",".join("?" * len(values))


def _after(c: RunCursor) -> tuple[str, list[object]]:
    """Rows strictly after ``c`` in ``ORDER BY started_at DESC, id DESC, rowid DESC`` (NULLs sort lowest)."""
    args: list[object] = []

    def below(col: str, value: object) -> str:
        if value is None:
            return "0"
        args.append(value)
        return f"({col} < ? OR {col} IS NULL)"

    def same(col: str, value: object) -> str:
        if value is None:
            return f"{col} IS NULL"
        args.append(value)
        return f"{col} = ?"

    raw_started = c.raw_started_at if c.rowid is not None else c.started_at
    raw_id = c.raw_id if c.rowid is not None else c.run_id
    sql = f"({below('started_at', raw_started)} OR ({same('started_at', raw_started)} AND ({below('id', raw_id)}"
    if c.rowid is not None:
        sql += f" OR ({same('id', raw_id)} AND rowid < ?)"
        args.append(c.rowid)
    return sql + ")))", args


def list_runs(
    sd: SessionDir,
    *,
    session_id: str | None = None,
    active_only: bool = False,
    terminal_only: bool = False,
    limit: int = 200,
    after: RunCursor | None = None,
    now: int | None = None,
    local_instance_id: LocalOwner = None,
) -> list[RunListing]:
    """Runs newest first (``started_at``, then id), a keyset page after ``after``, all read in one transaction.

    ``active_only``: the non-terminal runs alone; ``terminal_only``: every other run (a status that is not a
    known non-terminal one, ``NULL`` included), filtered in the query, so a page never skips rows."""
    schema = sd.schema
    if not schema.has("session_runs"):
        return []
    where: list[str] = []
    args: list[object] = []
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    if active_only:
        where.append(f"status IN ({_in_marks(list(NON_TERMINAL_STATUSES))})")
        args.extend(NON_TERMINAL_STATUSES)
    if terminal_only:
        where.append(f"(status IS NULL OR status NOT IN ({_in_marks(list(NON_TERMINAL_STATUSES))}))")
        args.extend(NON_TERMINAL_STATUSES)
    if after is not None:
        sql, more = _after(after)
        where.append(sql)
        args.extend(more)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    with sd.db.read() as conn:
        t = sqlite_now(conn, now)
        rows = conn.execute(
            f"SELECT {select_columns(schema, 'session_runs', RUN_COLUMNS)}, started_at, id, rowid "
            f"FROM session_runs {clause} ORDER BY started_at DESC, id DESC, rowid DESC LIMIT ?",
            (*args, limit),
        ).fetchall()
        if not rows:
            return []
        n = len(RUN_COLUMNS)
        runs = [(run_from_row(r[:n]), RunCursor("", "", r[n], r[n + 1], r[n + 2])) for r in rows]
        sessions = sorted({run.session_id for run, _ in runs})
        facts = _facts_for_sessions(conn, sessions, t, schema)
        recoveries: dict[str, RecoveryRecord] = {}
        if schema.has("session_run_recoveries"):
            ids = [run.id for run, _ in runs]
            for row in conn.execute(
                f"SELECT {RECOVERY_COLUMNS} FROM session_run_recoveries WHERE run_id IN ({_in_marks(ids)})", ids
            ).fetchall():
                rec = recovery_from_row(row)
                recoveries.setdefault(rec.run_id, rec)
    out = []
    for run, key in runs:
        f = facts[run.session_id]
        execution = None
        if run.active:
            if run.problems or run.id not in {r.id for r in f.active_runs}:
                execution = derive_execution_state(
                    ExecutionFacts(f.session_id, f.now, f.session_exists, (run,), f.lease,
                                   recoveries.get(run.id), None), local_instance_id)
            else:
                execution = derive_execution_state(f, local_instance_id)
        cursor = RunCursor(run.started_at, run.id, key.raw_started_at, key.raw_id, key.rowid)
        out.append(RunListing(run=run, lease=f.lease, execution=execution, recovery=recoveries.get(run.id),
                              key=cursor))
    return out


def _facts_for_sessions(conn: sqlite3.Connection, sessions: list[str], t: int,
                        schema: SchemaInfo) -> dict[str, ExecutionFacts]:
    """ExecutionFacts for many sessions with one query per table (inside the caller's read transaction)."""
    marks = _in_marks(sessions)
    existing = {r[0] for r in conn.execute(f"SELECT id FROM sessions WHERE id IN ({marks})", sessions)}
    active: dict[str, list[Run]] = {s: [] for s in sessions}
    for row in conn.execute(
        f"SELECT {select_columns(schema, 'session_runs', RUN_COLUMNS)} FROM session_runs WHERE session_id IN ({marks}) "
        f"AND status IN ({_in_marks(list(NON_TERMINAL_STATUSES))}) ORDER BY started_at DESC",
        (*sessions, *NON_TERMINAL_STATUSES),
    ):
        run = run_from_row(row)
        active.setdefault(run.session_id, []).append(run)
    leases: dict[str, LeaseSnapshot] = {}
    if schema.has("session_runtime_leases"):
        for row in conn.execute(
            f"SELECT {LEASE_COLUMNS} FROM session_runtime_leases WHERE session_id IN ({marks})", sessions,
        ):
            snap = snapshot_from_row(row, t)
            leases.setdefault(snap.session_id, snap)
    firsts = {sid: runs[0].id for sid, runs in active.items() if runs}
    recoveries = _recoveries_of(conn, list(firsts.values()), schema)
    responses = _responses_of(conn, firsts, schema)
    out = {}
    for sid in sessions:
        runs = tuple(active[sid])
        first = runs[0] if runs else None
        out[sid] = ExecutionFacts(
            session_id=sid, now=t, session_exists=sid in existing, active_runs=runs, lease=leases.get(sid),
            recovery=recoveries.get(first.id) if first else None,
            response_run=responses.get(sid) if first else None,
        )
    return out


_CHUNK = 400
"""Values bound in one ``IN (...)`` list at most (well below every SQLite build's variable limit)."""


def _chunks(values: list[str]) -> list[list[str]]:
    return [values[i:i + _CHUNK] for i in range(0, len(values), _CHUNK)]


def _recoveries_of(conn: sqlite3.Connection, run_ids: list[str], schema: SchemaInfo) -> dict[str, RecoveryRecord]:
    """The recovery row of each run (what :func:`~store.mothx.execution.recovery_conn` reads for one), in one
    query per :data:`_CHUNK` runs."""
    if not run_ids or not schema.has("session_run_recoveries"):
        return {}
    found: dict[str, RecoveryRecord] = {}
    for part in _chunks(run_ids):
        for row in conn.execute(
            f"SELECT {RECOVERY_COLUMNS}, run_id FROM session_run_recoveries WHERE run_id IN ({_in_marks(part)})", part
        ):
            raw = row[-1]
            if isinstance(raw, str):
                found.setdefault(raw, recovery_from_row(row[:-1]))
    return found


def _responses_of(conn: sqlite3.Connection, firsts: dict[str, str], schema: SchemaInfo) -> dict[str, ResponseRun]:
    """For each session, the ``response_runs`` row linked to its newest active run (``firsts``: session id → run
    id), picked as :func:`~store.mothx.execution.response_run_conn` picks it, in one query per :data:`_CHUNK`
    sessions (the ``(session_id, local_turn_id)`` index answers it)."""
    if not firsts or not schema.has("response_runs"):
        return {}
    linked: dict[str, list[ResponseRun]] = {}
    sessions = list(firsts)
    for part in _chunks(sessions):
        runs = [firsts[sid] for sid in part]
        for row in conn.execute(
            f"SELECT {RESPONSE_COLUMNS}, session_id, local_turn_id FROM response_runs "
            f"WHERE session_id IN ({_in_marks(part)}) AND local_turn_id IN ({_in_marks(runs)}) ORDER BY id DESC",
            (*part, *runs),
        ):
            sid, turn = row[-2], row[-1]
            if isinstance(sid, str) and isinstance(turn, str) and firsts.get(sid) == turn:
                rows = linked.setdefault(sid, [])
                if len(rows) < 50:  # as response_run_conn: the newest 50 linked rows
                    rows.append(response_from_row(row[:-2]))
    return {sid: picked for sid, rows in linked.items() if (picked := _pick_response(rows)) is not None}


def _pick_response(rows: list[ResponseRun]) -> ResponseRun | None:
    """Of the linked rows (newest first): the newest that keeps the run remote, else the newest damaged one,
    else the newest (:func:`~store.mothx.execution.response_run_conn`'s rule)."""
    for resp in rows:
        if keeps_remote(resp):
            return resp
    for resp in rows:
        if resp.problems:
            return resp
    return rows[0] if rows else None


def is_orphan(listing: RunListing) -> bool:
    """An active run whose owner is gone: derived state ``orphaned`` or ``recovery_failed``."""
    return listing.execution is not None and listing.execution.state in ORPHAN_STATES


def list_orphaned(sd: SessionDir, *, now: int | None = None, local_instance_id: LocalOwner = None,
                  limit: int = ACTIVE_CAP) -> list[RunListing]:
    """Active runs whose owner is gone: derived state ``orphaned`` or ``recovery_failed``."""
    return [listing for listing in list_runs(sd, active_only=True, limit=limit, now=now,
                                             local_instance_id=local_instance_id) if is_orphan(listing)]


# --- the Runs list's sequence (the screen and the ``runs`` command read it through these) ---------------------


@dataclass(frozen=True)
class RunScope:
    """Which runs the list shows: every session's or one session's; with ``orphaned_only``, the orphaned active
    runs alone (no recent runs)."""

    session_id: str | None = None  # None: every session
    orphaned_only: bool = False


@dataclass(frozen=True)
class RunPage:
    """One read of the list: the active runs (the first read only, else ``None``), then one keyset page of
    recent (terminal) runs newest first. ``after`` is the key the next page starts after (the last recent
    row's, else the one given); ``more``: recent runs go on past this page."""

    active: tuple[RunListing, ...] | None
    recent: tuple[RunListing, ...]
    after: RunCursor | None
    more: bool

    @property
    def rows(self) -> tuple[RunListing, ...]:
        return (*(self.active or ()), *self.recent)


def active_runs(sd: SessionDir, scope: RunScope, *, now: int | None = None, local_instance_id: LocalOwner = None,
                limit: int = ACTIVE_CAP) -> tuple[RunListing, ...]:
    """The active runs of ``scope`` (the orphaned ones alone with ``orphaned_only``): one :func:`list_runs` read."""
    rows = list_runs(sd, session_id=scope.session_id, active_only=True, limit=limit, now=now,
                     local_instance_id=local_instance_id)
    return tuple(ls for ls in rows if is_orphan(ls)) if scope.orphaned_only else tuple(rows)


def recent_runs(sd: SessionDir, scope: RunScope, *, after: RunCursor | None = None, limit: int = PAGE,
                now: int | None = None, local_instance_id: LocalOwner = None) -> RunPage:
    """The next ``limit`` terminal runs of ``scope`` after ``after``: one :func:`list_runs` read (``limit + 1``
    rows, to know whether more follow) at any depth. Nothing with ``orphaned_only``."""
    if scope.orphaned_only or limit <= 0:
        return RunPage(None, (), after, False)
    rows = list_runs(sd, session_id=scope.session_id, terminal_only=True, limit=limit + 1, after=after, now=now,
                     local_instance_id=local_instance_id)
    page = tuple(rows[:limit])
    return RunPage(None, page, page[-1].cursor if page else after, len(rows) > limit)


def runs_page(sd: SessionDir, scope: RunScope, *, after: RunCursor | None = None, limit: int = PAGE,
              now: int | None = None, local_instance_id: LocalOwner = None, with_active: bool | None = None,
              active_limit: int = ACTIVE_CAP) -> RunPage:
    """A page of the Runs list: without ``after`` (the first page) the active runs of ``scope`` and its first
    ``limit`` recent runs; with ``after`` the next ``limit`` recent runs alone (one query). ``with_active`` says
    whether the active runs are read too (default: for the first page only)."""
    page = recent_runs(sd, scope, after=after, limit=limit, now=now, local_instance_id=local_instance_id)
    if not (after is None if with_active is None else with_active):
        return page
    active = active_runs(sd, scope, now=now, local_instance_id=local_instance_id, limit=active_limit)
    return RunPage(active, page.recent, page.after, page.more)
