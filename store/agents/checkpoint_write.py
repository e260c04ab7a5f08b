"""Runs and staging in an open checkpoint store: fencing tokens, the divergence gate, the line set's appends.

* :func:`start_run` draws the next fencing token of an agent session (superseding every older run of it);
* :func:`stage_version` stages a version under a run in one fenced transaction, writing only the tails beyond
  the canonical version (reference section 7), optionally publishing it in that same transaction;
* :func:`capture_version` and :func:`capture_batch` are a capture's whole write (run, stage, publish) for one
  session or for many in ONE transaction, each session under its own savepoint.

Lines go in as batches of at most :data:`INSERT_BATCH_RECORDS` records and about :data:`INSERT_BATCH_BYTES`
bytes: one ``executemany`` (SQLite) or one ``COPY`` (PostgreSQL) per batch, never a round trip per record. A
trusted file's new records arrive as one :class:`~store.agents.checkpoint_model.TrustedTail` (the capture
compacted, validated and hashed them while reading the file) and are written from its lists as they are.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import uuid
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, repeat

from store.agents.checkpoint_db import CheckpointStore, StoreConn, canonical_shapes_of
from store.agents.checkpoint_engine import PgConnection, lock_suffix
from store.agents.checkpoint_fresh import (
    LINE_COLUMNS,
    CaptureItem,
    LineInserts,
    StagedRecord,
    driver_error,
    insert_lines,
    peek_trusted,
    write_fresh,
)
from store.agents.checkpoint_model import (
    ACTIVE_RUN_STATUSES,
    INSERT_BATCH_BYTES,
    INSERT_BATCH_RECORDS,
    KIND_CHECKPOINT,
    KIND_RESET,
    MAX_AGENT_ID_BYTES,
    MAX_AGENT_SESSION_ID_BYTES,
    CheckpointDamaged,
    FileShape,
    InvalidSessionState,
    PersistedSessionState,
    PersistedSessionStateFile,
    ReplaceResult,
    RunFence,
    SessionStateDivergent,
    StaleFence,
    TrustedTail,
    stored_int,
)
from store.agents.checkpoint_publish import publish_in, write_time
from store.agents.checkpoint_records import StreamValidator, bounded_text, header_problem
from store.agents.checkpoint_runtime import ensure_agent
from store.agents.checkpoint_schema import PG_SEQUENCE
from store.errors import StoreError
from store.safetext import one_line

HOST_ENV = "SESSIONSCOPE_HOST"


def this_host() -> str:
    """The host a capture records: ``$SESSIONSCOPE_HOST`` when set, else the machine's host name. Bytes that are
    not UTF-8 (an environment variable may hold any) become U+FFFD, so every engine can store the name."""
    name = os.environ.get(HOST_ENV, "").strip() or socket.gethostname()
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")[:255]


def _next_token(conn: StoreConn) -> int:
    """The next runtime fencing token: the sequence on PostgreSQL (no row lock shared by every capture), the
    counter row on SQLite (inside the file's write lock)."""
    if isinstance(conn, PgConnection):
        row = conn.execute(f"SELECT nextval('{PG_SEQUENCE}')").fetchone()
    else:
        row = conn.execute(
            "UPDATE agent_state_counters SET value = value + 1 WHERE name = 'runtime_fencing_token' RETURNING value"
        ).fetchone()
    if row is None:
        raise CheckpointDamaged(
            "Agent session checkpoint is out of sync with canonical history: the fencing token counter is missing."
        )
    return stored_int(row[0], "the fencing token counter")


def start_run(
    db: CheckpointStore, agent_id: str, agent_session_id: str, source_root: str | None = None, host: str | None = None
) -> RunFence:
    """Start a run of an agent session in an open checkpoint store: draw the next fencing token (superseding
    every older run of the session), record ``source_root`` when given and the capturing host (``host``, by
    default :func:`this_host`), and return the run's fence."""
    check_ids(agent_id, agent_session_id)
    now = write_time()
    host = this_host() if host is None else host
    with db.write() as conn:
        return start_run_in(conn, agent_id, agent_session_id, source_root, host, now)[0]


def check_ids(agent_id: str, agent_session_id: str) -> None:
    """:class:`InvalidSessionState` unless both ids are non-empty, bounded and without surrounding spaces."""
    for value, name, limit in (
        (agent_id, "the agent id", MAX_AGENT_ID_BYTES),
        (agent_session_id, "the agent session id", MAX_AGENT_SESSION_ID_BYTES),
    ):
        problem = bounded_text(value, name, limit)
        if problem or value != value.strip():
            raise InvalidSessionState(f"Cannot start a capture: {problem or name + ' has surrounding spaces'}.")


def start_run_in(
    conn: StoreConn, agent_id: str, agent_session_id: str, source_root: str | None, host: str, now: str,
    agent_known: bool = False,
) -> tuple[RunFence, bool]:
    """:func:`start_run` inside an open write transaction (``agent_known``: the agent's row was ensured in
    this transaction already). Returns the fence and whether the session's row was created by this very
    statement (then it has no lines, versions, head or other runs yet)."""
    if not agent_known:
        ensure_agent(conn, agent_id, now)
    # Two hosts may meet the session for the first time at once: the insert that loses does nothing.
    # (the no-op update returns the row that exists, and locks it on PostgreSQL)
    fresh_id = secrets.token_hex(8)
    row = conn.execute(
        "INSERT INTO agent_state_sessions (session_id, agent_id, agent_session_id, source_root, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, agent_session_id) "
        "DO UPDATE SET agent_id = excluded.agent_id RETURNING session_id",
        (fresh_id, agent_id, agent_session_id, source_root or "", now, now),
    ).fetchone()
    if row is None:
        raise StaleFence("The agent session's row vanished while a capture started.")
    session_id = str(row[0])
    created = session_id == fresh_id
    token = _next_token(conn)
    if source_root is None:
        conn.execute(
            "UPDATE agent_state_sessions SET runtime_fencing_token = ?, updated_at = ? WHERE session_id = ?",
            (token, now, session_id),
        )
    else:
        conn.execute(
            "UPDATE agent_state_sessions SET runtime_fencing_token = ?, source_root = ?, updated_at = ? "
            "WHERE session_id = ?",
            (token, source_root, now, session_id),
        )
        conn.execute(
            "INSERT INTO agent_state_session_hosts (session_id, host, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET host = excluded.host, updated_at = excluded.updated_at",
            (session_id, host, now),
        )
    run_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO agent_state_runs (session_id, run_id, fencing_token, status, created_at) "
        "VALUES (?, ?, ?, 'running', ?)",
        (session_id, run_id, token, now),
    )
    conn.execute(
        "INSERT INTO agent_state_run_hosts (session_id, run_id, host) VALUES (?, ?, ?)", (session_id, run_id, host)
    )
    return RunFence(session_id, agent_id, agent_session_id, run_id, token), created


def _divergent(detail: str) -> SessionStateDivergent:
    return SessionStateDivergent(f"Agent session state diverged from the canonical checkpoint: {detail}.")


def divergence(canonical: dict[str, FileShape], files: Iterable[PersistedSessionStateFile]) -> str | None:
    """The divergence gate (reference 7.2): None when every canonical file's prefix is proven, else why not."""
    by_path = {f.path: f for f in files}
    for path, c in sorted(canonical.items()):
        f = by_path.get(path)
        if f is None:
            return f"the canonical file {one_line(path)} is missing"
        if f.records < c.records:
            return f"{one_line(path)} has {f.records} records, fewer than the canonical {c.records}"
        if f.prefix_records != c.records or f.prefix_digest != c.digest:
            return f"{one_line(path)} no longer starts with the canonical {c.records} records"
    return None


def stage_version(
    db: CheckpointStore,
    fence: RunFence,
    state: PersistedSessionState,
    records: Iterable[StagedRecord],
    *,
    publish: str | None = None,
    trusted: frozenset[str] = frozenset(),
) -> ReplaceResult:
    """Stage ``state`` under ``fence``'s run in an open checkpoint file, in one fenced transaction, writing only
    the tails beyond the canonical version (reference section 7). Raises :class:`SessionStateDivergent` (nothing
    written), :class:`StaleFence` or :class:`InvalidSessionState` (rolled back).

    ``publish`` (a kind) also makes the run the publication head in that same transaction: what a capture
    does, so a capture superseded by another host's never leaves a staged version without its head.
    ``trusted`` names files whose records the caller compacted, validated and hashed itself
    (:class:`~store.agents.checkpoint_records.StreamValidator`): a capture's digests are computed once."""
    if publish is not None and publish not in (KIND_CHECKPOINT, KIND_RESET):
        raise InvalidSessionState(f"Unknown publication kind {publish!r}.")
    if fence.fencing_token != state.runtime_fencing_token:
        raise StaleFence(
            f"Agent session state runtime fencing token {state.runtime_fencing_token} does not match active "
            f"token {fence.fencing_token}."
        )
    if state.through_run_id != fence.run_id or (state.agent_id, state.agent_session_id) != (
        fence.agent_id,
        fence.agent_session_id,
    ):
        raise StaleFence("The state being staged does not belong to the run that holds the fence.")
    problem = header_problem(state)
    if problem:
        raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
    now = write_time()
    with db.write() as conn:
        return _stage_in(conn, fence, state, records, publish, trusted, now, fenced=False)


def capture_batch(
    db: CheckpointStore, items: list[CaptureItem], *, host: str | None = None
) -> list[ReplaceResult | StoreError | OSError]:
    """:func:`capture_version` for many sessions in ONE transaction, each under its own savepoint: a session
    that cannot be written (divergent, superseded, invalid) is rolled back alone and its error is returned in
    its place; the others are committed together."""
    for item in items:
        check_ids(item.agent_id, item.agent_session_id)
    now = write_time()
    host = this_host() if host is None else host
    out: list[ReplaceResult | StoreError | OSError] = []
    with db.write() as conn:
        for agent in sorted({item.agent_id for item in items}):
            ensure_agent(conn, agent, now)
        streams: list[Iterable[StagedRecord]] = []
        bulk: list[int] = []
        read: list[list[StagedRecord]] = []
        for i, item in enumerate(items):
            seen, stream, trusted_only = peek_trusted(item.records)
            streams.append(stream)
            if trusted_only:
                bulk.append(i)
            read.append(seen)
        done = write_fresh(conn, [items[i] for i in bulk], [read[i] for i in bulk], host, now,
                           _write_tails) if bulk else {}
        fast = {bulk[k]: result for k, result in done.items()}
        for index, item in enumerate(items):
            if index in fast:
                out.append(fast[index])
                continue
            conn.execute("SAVEPOINT capture_item")
            try:
                fence, created = start_run_in(conn, item.agent_id, item.agent_session_id, item.source_root, host,
                                              now, agent_known=True)
                state = item.make_state(fence)
                problem = header_problem(state)
                if problem:
                    raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
                result = _stage_in(conn, fence, state, streams[index], KIND_CHECKPOINT, item.trusted, now,
                                   fenced=True, created=created)
            except (StoreError, OSError) as exc:
                conn.execute("ROLLBACK TO SAVEPOINT capture_item")
                conn.execute("RELEASE SAVEPOINT capture_item")
                out.append(exc)
                continue
            except Exception as exc:
                if not driver_error(exc):
                    raise
                conn.execute("ROLLBACK TO SAVEPOINT capture_item")
                conn.execute("RELEASE SAVEPOINT capture_item")
                out.append(StoreError(f"The capture was not stored: {one_line(str(exc))[:300]}"))
                continue
            conn.execute("RELEASE SAVEPOINT capture_item")
            out.append(result)
    return out


def capture_version(
    db: CheckpointStore,
    agent_id: str,
    agent_session_id: str,
    source_root: str,
    make_state: Callable[[RunFence], PersistedSessionState],
    records: Iterable[StagedRecord],
    *,
    trusted: frozenset[str] = frozenset(),
    host: str | None = None,
) -> tuple[RunFence, ReplaceResult]:
    """A capture's whole write in ONE transaction: start a run (:func:`start_run`), stage the state
    ``make_state(fence)`` builds for it and publish it as the checkpoint head (:func:`stage_version` with
    ``publish``). A divergent capture rolls everything back, the run included: nothing is written."""
    check_ids(agent_id, agent_session_id)
    now = write_time()
    host = this_host() if host is None else host
    with db.write() as conn:
        fence, created = start_run_in(conn, agent_id, agent_session_id, source_root, host, now)
        state = make_state(fence)
        problem = header_problem(state)
        if problem:
            raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
        if (state.through_run_id, state.runtime_fencing_token) != (fence.run_id, fence.fencing_token):
            raise StaleFence("The state being staged does not belong to the run that holds the fence.")
        return fence, _stage_in(conn, fence, state, records, KIND_CHECKPOINT, trusted, now, fenced=True,
                                created=created)


class _LineWriter:
    """The line set's appends of one staging, in batches (one executemany or COPY each)."""

    def __init__(self, conn: StoreConn, session_id: str) -> None:
        self.conn = conn
        self.session_id = session_id
        self.rows: list[tuple[str, str, int, str, int]] = []
        self.rows_bytes = 0
        self.written = 0
        self.bytes_written = 0

    def add(self, path: str, line: int, text: str, size: int) -> None:
        self.rows.append((self.session_id, path, line, text, size))
        self.rows_bytes += size + 1
        if len(self.rows) >= INSERT_BATCH_RECORDS or self.rows_bytes >= INSERT_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self._write(self.rows, len(self.rows), self.rows_bytes)
            self.rows, self.rows_bytes = [], 0

    def add_tail(self, tail: TrustedTail, restored: int) -> None:
        """A trusted tail, cut into batches by record count and bytes (``restored``: Σ size + 1)."""
        self.flush()
        n = len(tail.contents)
        if n <= INSERT_BATCH_RECORDS and restored <= INSERT_BATCH_BYTES:
            self._write(self._rows(tail, 0, n), n, restored, raw=True)
            return
        ends = list(accumulate(size + 1 for size in tail.sizes))  # restored bytes through each record
        start = 0
        while start < n:
            before = ends[start - 1] if start else 0
            stop = min(n, start + INSERT_BATCH_RECORDS, bisect_left(ends, before + INSERT_BATCH_BYTES) + 1)
            self._write(self._rows(tail, start, stop), stop - start, ends[stop - 1] - before, raw=True)
            start = stop

    def _rows(self, tail: TrustedTail, start: int, stop: int) -> Iterable[tuple[str, str, int, bytes, int]]:
        count = stop - start
        return zip(repeat(self.session_id, count), repeat(tail.file_path, count),
                   range(tail.first_line + start, tail.first_line + stop),
                   tail.contents[start:stop], tail.sizes[start:stop], strict=True)

    def _write(self, rows: Iterable[Sequence[object]], count: int, size: int, *, raw: bool = False) -> None:
        """One batch; ``raw``: its contents are UTF-8 bytes (a trusted tail's)."""
        if isinstance(self.conn, PgConnection):  # one COPY per batch: no round trip per record
            if raw:  # COPY's text format would write bytes as bytea escapes: the text itself goes
                rows = [(a, b, c, d.decode("utf-8"), e) for a, b, c, d, e in rows]  # type: ignore[attr-defined]
            got = self.conn.copy_rows("agent_state_lines", LINE_COLUMNS, list(rows))
        else:
            got = insert_lines(self.conn, list(rows), raw=raw)  # a batch already bounded here
        if got != count:
            raise InvalidSessionState(f"A batch of {count} records wrote {got} rows.")
        self.written += count
        self.bytes_written += size


def _write_tails(conn: StoreConn, sessions: list[tuple[str, list[TrustedTail]]]) -> int:
    """New sessions' trusted tails: on PostgreSQL one COPY per batch of :class:`_LineWriter`; on SQLite the lines
    of all the sessions together in multi-row statements (:class:`LineInserts`). The rows written."""
    if isinstance(conn, PgConnection):
        total = 0
        for session_id, tails in sessions:
            writer = _LineWriter(conn, session_id)
            for tail in tails:
                writer.add_tail(tail, sum(tail.sizes) + len(tail.sizes))
            total += writer.written
        return total
    inserts = LineInserts(conn, raw=True)
    for session_id, tails in sessions:
        for tail in tails:
            inserts.add_tail(session_id, tail)
    return inserts.flush()


def _stage_in(
    conn: StoreConn,
    fence: RunFence,
    state: PersistedSessionState,
    records: Iterable[StagedRecord],
    publish: str | None,
    trusted: frozenset[str],
    now: str,
    *,
    fenced: bool,
    created: bool = False,
) -> ReplaceResult:
    """:func:`stage_version` inside an open write transaction; ``fenced``: the run was started in this very
    transaction (its fence cannot have moved), so it is not read back; ``created``: so was the session's row,
    so it has no lines, versions, head or other runs to read, trim or prune."""
    shapes_json = json.dumps([f.shape.to_json() for f in state.files], separators=(",", ":"))
    session_id = fence.session_id
    if not fenced:
        # The session row is locked (PostgreSQL) for the whole staging: a newer run cannot take the fence
        # half-way, and two captures of one session never write its line set at once.
        sess = conn.execute(
            "SELECT session_id FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?"
            + lock_suffix(conn),
            (state.agent_id, state.agent_session_id),
        ).fetchone()
        if sess is None or sess[0] != fence.session_id:
            raise StaleFence("The run's session no longer exists.")
        current = conn.execute(
            "SELECT s.runtime_fencing_token, r.status FROM agent_state_sessions s LEFT JOIN agent_state_runs r "
            "ON r.session_id = s.session_id AND r.run_id = ? WHERE s.session_id = ?",
            (fence.run_id, session_id),
        ).fetchone()
        if current is None or current[0] != fence.fencing_token or current[1] not in ACTIVE_RUN_STATUSES:
            # Checked before the divergence gate so a superseded capture is told so, not told "divergent".
            raise StaleFence(
                f"The run {fence.run_id} no longer holds the session's fence (token {fence.fencing_token}); "
                "another capture superseded it."
            )
    fresh = fenced and created
    canonical = {} if fresh else canonical_shapes_of(conn, session_id)
    why = divergence(canonical, state.files)
    if why:
        raise _divergent(why)
    row = conn.execute(
        "INSERT INTO agent_state_versions (session_id, through_run_id, agent_id, agent_session_id, cwd, "
        "transcript_path, runtime_fencing_token, file_count, record_count, file_shapes, created_at, updated_at) "
        "SELECT r.session_id, r.run_id, ?, ?, ?, ?, r.fencing_token, ?, ?, ?, ?, ? "
        "FROM agent_state_runs r JOIN agent_state_sessions s ON s.session_id = r.session_id "
        "WHERE r.session_id = ? AND r.run_id = ? AND r.fencing_token = ? "
        "AND r.fencing_token = s.runtime_fencing_token AND r.status IN ('running', 'waiting_decision') "
        "ON CONFLICT (session_id, through_run_id) DO UPDATE SET agent_id = excluded.agent_id, "
        "agent_session_id = excluded.agent_session_id, cwd = excluded.cwd, "
        "transcript_path = excluded.transcript_path, runtime_fencing_token = excluded.runtime_fencing_token, "
        "file_count = excluded.file_count, record_count = excluded.record_count, "
        "file_shapes = excluded.file_shapes, updated_at = excluded.updated_at "
        "WHERE agent_state_versions.runtime_fencing_token <= excluded.runtime_fencing_token "
        "RETURNING through_run_id, runtime_fencing_token",
        (
            state.agent_id,
            state.agent_session_id,
            state.cwd.strip(),
            state.transcript_path,
            state.file_count,
            state.record_count,
            shapes_json,
            now,
            now,
            session_id,
            state.through_run_id,
            state.runtime_fencing_token,
        ),
    ).fetchone()
    if row is None or (row[0], row[1]) != (state.through_run_id, state.runtime_fencing_token):
        raise StaleFence(
            f"The run {state.through_run_id} no longer holds the session's fence (token "
            f"{state.runtime_fencing_token}); another capture superseded it."
        )
    skip = {f.path: canonical[f.path].records if f.path in canonical else 0 for f in state.files}
    trimmed = 0 if fresh else _clean_lines(conn, session_id, skip)
    validator = StreamValidator(state, skip, InvalidSessionState, trusted)
    writer = _LineWriter(conn, session_id)
    for rec in records:
        if isinstance(rec, TrustedTail):
            writer.add_tail(rec, validator.accept_tail(rec))
            continue
        text, new = validator.accept(rec)
        if not new:
            continue
        content = rec.content
        size = len(content) if isinstance(content, bytes) and validator.trusting else len(text.encode("utf-8"))
        writer.add(rec.file_path, rec.line_number, text, size)
    writer.flush()
    validator.finish()
    expected = sum(f.records - skip[f.path] for f in state.files)
    if writer.written != expected:
        raise InvalidSessionState(f"The capture inserted {writer.written} records where {expected} were expected.")
    if not fenced:  # a run started in this transaction has no marks yet
        conn.execute(
            "DELETE FROM agent_state_file_marks WHERE session_id = ? AND through_run_id = ?",
            (session_id, state.through_run_id),
        )
    marks = [(session_id, state.through_run_id, p, n) for p, n in validator.restored.items() if n > 0]
    if marks:
        conn.executemany(
            "INSERT INTO agent_state_file_marks (session_id, through_run_id, file_path, restored_bytes) "
            "VALUES (?, ?, ?, ?)",
            marks,
        )
    if not fresh:  # a new session has no other version to prune
        conn.execute(
            "DELETE FROM agent_state_versions WHERE session_id = ? AND through_run_id <> ? AND through_run_id NOT "
            "IN (SELECT run_id FROM agent_state_publications WHERE session_id = ? AND checkpoint_reset = FALSE)",
            (session_id, state.through_run_id, session_id),
        )
    if publish is not None:
        publish_in(conn, fence, publish, now, prune=not fresh)
    return ReplaceResult(records_written=writer.written, bytes_written=writer.bytes_written, files_trimmed=trimmed)


def _clean_lines(conn: StoreConn, session_id: str, skip: dict[str, int]) -> int:
    """Clean the line set in ONE statement: every line of a file not captured, and every line past the
    canonical record count of a captured file (0 for a file that is not canonical), goes. Returns the number
    of lines deleted."""
    kept = [(p, n) for p, n in skip.items() if n > 0]
    if kept:
        cur = conn.execute(
            "DELETE FROM agent_state_lines WHERE session_id = ? AND NOT ("
            + " OR ".join("(file_path = ? AND line_number <= ?)" for _ in kept) + ")",
            (session_id, *(v for pair in kept for v in pair)),
        )
    else:
        cur = conn.execute("DELETE FROM agent_state_lines WHERE session_id = ?", (session_id,))
    return max(cur.rowcount, 0)


__all__ = [
    "HOST_ENV",
    "LINE_COLUMNS",
    "CaptureItem",
    "StagedRecord",
    "capture_batch",
    "capture_version",
    "check_ids",
    "divergence",
    "stage_version",
    "start_run",
    "start_run_in",
    "this_host",
]
