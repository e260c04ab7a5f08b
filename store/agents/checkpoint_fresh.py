"""A capture batch's new sessions written together: a handful of statements per batch, not a dozen per session.

:func:`write_fresh` is the common case of :func:`~store.agents.checkpoint_write.capture_batch` (a first
capture): sessions whose row the batch's own transaction creates have no lines, versions, head or other runs,
so their runs, versions, lines, file marks and heads go in as multi-row statements (``executemany``; the
lines as one ``executemany`` or ``COPY``) under ONE savepoint. Every check the per-session path makes is
made first, in Python: header, record order, counts and sizes (:class:`StreamValidator`). Anything unusual
(a session that already exists, a record that is not a trusted tail, a check or a statement that fails)
rolls the savepoint back and leaves those sessions to the per-session path, so the outcome of every session
is what the per-session path gives. Fencing holds as there: the fence is drawn in this transaction, which
holds the file's write lock (SQLite) or the session rows' locks taken by the insert (PostgreSQL).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat

from store.agents.checkpoint_db import StoreConn
from store.agents.checkpoint_engine import PgConnection
from store.agents.checkpoint_model import (
    INSERT_BATCH_BYTES,
    InvalidSessionState,
    PersistedSessionState,
    ReplaceResult,
    RunFence,
    SessionStateRecord,
    StaleFence,
    TrustedTail,
    stored_int,
)
from store.agents.checkpoint_records import StreamValidator, header_problem
from store.agents.checkpoint_schema import PG_SEQUENCE
from store.errors import StoreError

StagedRecord = SessionStateRecord | TrustedTail
"""What a record stream of staging holds: single records, and whole tails of trusted files."""


@dataclass(frozen=True)
class CaptureItem:
    """One session of :func:`capture_batch`: what :func:`capture_version` takes."""

    agent_id: str
    agent_session_id: str
    source_root: str
    make_state: Callable[[RunFence], PersistedSessionState]
    records: Iterable[StagedRecord]
    trusted: frozenset[str] = frozenset()

_ROWS_PER_INSERT = 256  # sessions per multi-row session insert (7 parameters each)
LINE_COLUMNS = ("session_id", "file_path", "line_number", "content", "content_bytes")
SQLITE_PARAMS_PER_STATEMENT = 10_240
"""Parameters bound to one multi-row statement on SQLite (:func:`execute_rows`), within the 32,766 that SQLite
allows since 3.32. One statement step inserts all its rows: the driver lets go of Python's lock once per
statement, not once per row, so the capture's writer thread does not queue for that lock behind the scanning
thread at every row (with ``executemany`` it waited up to a switch interval per row)."""
LINE_ROWS_PER_STATEMENT = SQLITE_PARAMS_PER_STATEMENT // len(LINE_COLUMNS)
_INSERT_LINES = "INSERT INTO agent_state_lines (session_id, file_path, line_number, content, content_bytes) VALUES "
# A trusted tail's records are UTF-8 bytes: bound as they are and stored as the text they spell (no decoding
# in Python, no encoding again in the driver; the column still holds TEXT).
_LINE_ROW = {True: "(?, ?, ?, CAST(? AS TEXT), ?)", False: "(?, ?, ?, ?, ?)"}


def execute_rows(conn: StoreConn, head: str, row: str, rows: Sequence[Sequence[object]], tail: str = "") -> int:
    """``head`` + ``row`` + ``tail`` for every row: on PostgreSQL one ``executemany`` (the driver pipelines it);
    on SQLite multi-row statements (``head row, row, … tail``) of up to :data:`SQLITE_PARAMS_PER_STATEMENT`
    parameters, so a batch of sessions costs a few driver calls per table, not one per row. Returns the rows
    the statements changed, as the driver counts them."""
    if not rows:
        return 0
    if isinstance(conn, PgConnection):
        return int(conn.executemany(head + row + tail, rows).rowcount)
    per = max(1, SQLITE_PARAMS_PER_STATEMENT // max(1, len(rows[0])))
    changed = 0
    for start in range(0, len(rows), per):
        part = rows[start:start + per]
        changed += conn.execute(f"{head}{', '.join([row] * len(part))}{tail}", list(chain.from_iterable(part))).rowcount
    return changed


def insert_lines(conn: sqlite3.Connection, rows: Sequence[Sequence[object]], *, raw: bool) -> int:
    """Line rows (:data:`LINE_COLUMNS`) inserted by :func:`execute_rows`; ``raw``: the contents are UTF-8 bytes.
    The rows written."""
    return execute_rows(conn, _INSERT_LINES, _LINE_ROW[raw], rows)


class LineInserts:
    """Line rows (:data:`LINE_COLUMNS`) inserted on SQLite by multi-row statements of at most
    :data:`LINE_ROWS_PER_STATEMENT` rows and about ``INSERT_BATCH_BYTES`` of content (the driver copies every
    bound value: a statement's parameters are bounded like one ``executemany`` batch's rows). ``raw``: the
    contents are UTF-8 bytes, stored as the text they spell. Call :meth:`flush` at the end."""

    def __init__(self, conn: sqlite3.Connection, *, raw: bool) -> None:
        self.conn = conn
        self.raw = raw
        self.rows: list[Sequence[object]] = []
        self.size = 0
        self.written = 0

    def add(self, row: Sequence[object], size: int) -> None:
        self.rows.append(row)
        self.size += size + 1
        if len(self.rows) >= LINE_ROWS_PER_STATEMENT or self.size >= INSERT_BATCH_BYTES:
            self.flush()

    def add_tail(self, session_id: str, tail: TrustedTail) -> None:
        """A trusted tail's lines, taken a statement's worth at a time (a few Python steps per statement, not a
        call per row); where the byte bound falls inside that piece, row by row up to it."""
        contents, sizes, n = tail.contents, tail.sizes, len(tail.contents)
        start = 0
        while start < n:
            stop = min(n, start + LINE_ROWS_PER_STATEMENT - len(self.rows))
            size = sum(sizes[start:stop]) + (stop - start)
            if self.size + size >= INSERT_BATCH_BYTES:
                for k in range(start, stop):
                    self.add((session_id, tail.file_path, tail.first_line + k, contents[k], sizes[k]), sizes[k])
            else:
                count = stop - start
                self.rows.extend(zip(repeat(session_id, count), repeat(tail.file_path, count),
                                     range(tail.first_line + start, tail.first_line + stop), contents[start:stop],
                                     sizes[start:stop], strict=True))
                self.size += size
                if len(self.rows) >= LINE_ROWS_PER_STATEMENT:
                    self.flush()
            start = stop

    def flush(self) -> int:
        """Insert what is held; the rows written so far."""
        if self.rows:
            part, self.rows, self.size = self.rows, [], 0
            self.written += insert_lines(self.conn, part, raw=self.raw)
        return self.written


def peek_trusted(records: Iterable[StagedRecord]) -> tuple[list[StagedRecord], Iterable[StagedRecord], bool]:
    """(the records read, the whole stream again, True when every record is a trusted tail). Reading stops at
    the first record that is not one, so a tail too big to keep is never read here."""
    it = iter(records)
    seen: list[StagedRecord] = []
    for rec in it:
        seen.append(rec)
        if not isinstance(rec, TrustedTail):
            return seen, chain(seen, it), False
    return seen, seen, True


def _tokens(conn: StoreConn, count: int) -> list[int]:
    """``count`` new fencing tokens, ascending (as ``count`` draws of one token each would give)."""
    if isinstance(conn, PgConnection):
        rows = conn.execute(f"SELECT nextval('{PG_SEQUENCE}') FROM generate_series(1, ?)", (count,)).fetchall()
        got = sorted(stored_int(r[0], "the fencing token sequence") for r in rows)
    else:
        row = conn.execute(
            "UPDATE agent_state_counters SET value = value + ? WHERE name = 'runtime_fencing_token' RETURNING value",
            (count,),
        ).fetchone()
        if row is None:
            raise StoreError("the fencing token counter is missing")
        last = stored_int(row[0], "the fencing token counter")
        got = list(range(last - count + 1, last + 1))
    if len(got) != count:
        raise StoreError("the fencing tokens could not be drawn")
    return got


def _created(conn: StoreConn, items: list[CaptureItem], now: str) -> tuple[list[str | None], list[str]]:
    """Insert the sessions' rows (an existing row is left as it is, and locked on PostgreSQL); per item, its
    session id when this statement created the row, else None, and a run id (ids drawn in the order the
    per-session path draws them: a session id, then its run's)."""
    drawn = [(secrets.token_hex(8), str(uuid.uuid4())) for _ in items]
    fresh = [sid for sid, _ in drawn]
    found: dict[tuple[str, str], str] = {}
    for start in range(0, len(items), _ROWS_PER_INSERT):
        part = items[start:start + _ROWS_PER_INSERT]
        params: list[object] = []
        for item, sid in zip(part, fresh[start:start + _ROWS_PER_INSERT], strict=True):
            params += (sid, item.agent_id, item.agent_session_id, item.source_root or "", now, now)
        rows = conn.execute(
            "INSERT INTO agent_state_sessions (session_id, agent_id, agent_session_id, source_root, created_at, "
            "updated_at) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(part))
            + " ON CONFLICT (agent_id, agent_session_id) DO UPDATE SET agent_id = excluded.agent_id "
            "RETURNING session_id, agent_id, agent_session_id",
            params,
        ).fetchall()
        for r in rows:
            found[(str(r[1]), str(r[2]))] = str(r[0])
    return ([sid if found.get((i.agent_id, i.agent_session_id)) == sid else None
             for i, sid in zip(items, fresh, strict=True)], [run for _, run in drawn])


TailWriter = Callable[[StoreConn, list[tuple[str, list[TrustedTail]]]], int]
"""Writes the trusted tails of sessions (session id, its tails) in bounded batches; returns the rows written."""


def write_fresh(
    conn: StoreConn, items: list[CaptureItem], records: list[list[StagedRecord]], host: str, now: str,
    write_tails: TailWriter,
) -> dict[int, ReplaceResult]:
    """Write every item whose session is new (its row created here) with multi-row statements, inside the open
    write transaction ``conn``; ``records[i]``: item i's records, all trusted tails. Returns the results by
    item index (``write_tails``: the lines' writer, batches bounded as for one session); an item left out (its session existed, or the batch fell back) is for the per-session path."""
    conn.execute("SAVEPOINT capture_fresh")
    try:
        out = _write(conn, items, records, host, now, write_tails)
    except (StoreError, OSError, ValueError) as exc:
        return _back(conn, exc)
    except Exception as exc:
        if not driver_error(exc):
            raise
        return _back(conn, exc)
    conn.execute("RELEASE SAVEPOINT capture_fresh")
    return out


def _back(conn: StoreConn, exc: BaseException) -> dict[int, ReplaceResult]:
    del exc  # the per-session path meets it again, and reports it for its session alone
    conn.execute("ROLLBACK TO SAVEPOINT capture_fresh")
    conn.execute("RELEASE SAVEPOINT capture_fresh")
    return {}


def driver_error(exc: BaseException) -> bool:
    """True for an error of the database driver (sqlite3 or psycopg)."""
    return isinstance(exc, sqlite3.Error) or type(exc).__module__.startswith("psycopg")


def _write(
    conn: StoreConn, items: list[CaptureItem], records: list[list[StagedRecord]], host: str, now: str,
    write_tails: TailWriter,
) -> dict[int, ReplaceResult]:
    created, run_ids = _created(conn, items, now)
    chosen = [i for i, sid in enumerate(created) if sid is not None]
    if not chosen:
        return {}
    tokens = _tokens(conn, len(chosen))
    fences: list[RunFence] = []
    tails: list[list[TrustedTail]] = []
    marks: list[tuple[str, str, str, int]] = []
    versions: list[tuple[object, ...]] = []
    results: dict[int, ReplaceResult] = {}
    for i, token in zip(chosen, tokens, strict=True):
        item, session_id = items[i], created[i]
        assert session_id is not None
        fence = RunFence(session_id, item.agent_id, item.agent_session_id, run_ids[i], token)
        state = item.make_state(fence)
        problem = header_problem(state)
        if problem:
            raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
        if (state.through_run_id, state.runtime_fencing_token, state.agent_id, state.agent_session_id) != (
            fence.run_id, fence.fencing_token, fence.agent_id, fence.agent_session_id
        ):
            raise StaleFence("The state being staged does not belong to the run that holds the fence.")
        validator = StreamValidator(state, {f.path: 0 for f in state.files}, InvalidSessionState, item.trusted)
        mine = [rec for rec in records[i] if isinstance(rec, TrustedTail)]
        restored = sum(validator.accept_tail(t) for t in mine)
        validator.finish()
        written = sum(len(t.contents) for t in mine)
        if written != state.record_count:
            raise InvalidSessionState(f"The capture holds {written} records where {state.record_count} were expected.")
        fences.append(fence)
        tails.append(mine)
        marks += [(session_id, fence.run_id, p, n) for p, n in validator.restored.items() if n > 0]
        versions.append((session_id, fence.run_id, state.agent_id, state.agent_session_id, state.cwd.strip(),
                         state.transcript_path, token, state.file_count, state.record_count,
                         json.dumps([f.shape.to_json() for f in state.files], separators=(",", ":")), now, now))
        results[i] = ReplaceResult(records_written=written, bytes_written=restored, files_trimmed=0)
    hosted = [(f, items[i]) for f, i in zip(fences, chosen, strict=True) if items[i].source_root is not None]
    rest = [f for f, i in zip(fences, chosen, strict=True) if items[i].source_root is None]
    _set_tokens(conn, [(f.session_id, f.fencing_token, item.source_root) for f, item in hosted], now)
    _set_tokens(conn, [(f.session_id, f.fencing_token, None) for f in rest], now)
    execute_rows(conn, "INSERT INTO agent_state_session_hosts (session_id, host, updated_at) VALUES ", "(?, ?, ?)",
                 [(f.session_id, host, now) for f, _ in hosted],
                 " ON CONFLICT (session_id) DO UPDATE SET host = excluded.host, updated_at = excluded.updated_at")
    # Staged and published in this very transaction: nobody ever sees the run running.
    execute_rows(conn, "INSERT INTO agent_state_runs (session_id, run_id, fencing_token, status, created_at, "
                 "finished_at) VALUES ", "(?, ?, ?, 'completed', ?, ?)",
                 [(f.session_id, f.run_id, f.fencing_token, now, now) for f in fences])
    execute_rows(conn, "INSERT INTO agent_state_run_hosts (session_id, run_id, host) VALUES ", "(?, ?, ?)",
                 [(f.session_id, f.run_id, host) for f in fences])
    execute_rows(conn, "INSERT INTO agent_state_versions (session_id, through_run_id, agent_id, agent_session_id, "
                 "cwd, transcript_path, runtime_fencing_token, file_count, record_count, file_shapes, created_at, "
                 "updated_at) VALUES ", "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", versions)
    expected = sum(r.records_written for r in results.values())
    got = write_tails(conn, [(fence.session_id, mine) for fence, mine in zip(fences, tails, strict=True)])
    if got != expected:
        raise InvalidSessionState(f"The capture inserted {got} records where {expected} were expected.")
    execute_rows(conn, "INSERT INTO agent_state_file_marks (session_id, through_run_id, file_path, restored_bytes) "
                 "VALUES ", "(?, ?, ?, ?)", marks)
    execute_rows(conn, "INSERT INTO agent_state_publications (session_id, run_id, checkpoint_reset, updated_at) "
                 "VALUES ", "(?, ?, ?, ?)", [(f.session_id, f.run_id, False, now) for f in fences])
    return results


def _set_tokens(conn: StoreConn, rows: list[tuple[str, int, str | None]], now: str) -> None:
    """Give new sessions their fencing token (and source root, where not None): rows of (session id, token,
    root). On SQLite ``UPDATE … FROM`` a list of values (:func:`execute_rows`); on PostgreSQL an
    ``executemany``."""
    if not rows:
        return
    hosted = rows[0][2] is not None
    if isinstance(conn, PgConnection):
        if hosted:
            conn.executemany("UPDATE agent_state_sessions SET runtime_fencing_token = ?, source_root = ?, "
                             "updated_at = ? WHERE session_id = ?", [(t, r, now, s) for s, t, r in rows])
        else:
            conn.executemany("UPDATE agent_state_sessions SET runtime_fencing_token = ?, updated_at = ? "
                             "WHERE session_id = ?", [(t, now, s) for s, t, _ in rows])
        return
    execute_rows(conn, "WITH v(session_id, token, root, at) AS (VALUES ", "(?, ?, ?, ?)",
                 [(sid, token, root, now) for sid, token, root in rows],
                 ") UPDATE agent_state_sessions SET runtime_fencing_token = v.token, "
                 + ("source_root = v.root, " if hosted else "")
                 + "updated_at = v.at FROM v WHERE agent_state_sessions.session_id = v.session_id")
