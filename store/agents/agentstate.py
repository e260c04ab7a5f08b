"""External-agent checkpoints: native JSONL session files kept as verified versions in SQLite.

The contract is the reference's (``agent-state-checkpoints.md``) moved into a file of ours inside the session
directory, ``<session dir>/sessionscope/agent-state.db`` (layout: ``store/sql/agentstate_v1.sql``):

* a **version** (state header) is staged under the run it is valid through, with the per-file shapes
  ``{path, records, digest}``; all versions of a session share one **line set**;
* the **publication head** names the run the checkpoint is at, as a ``checkpoint`` or a ``reset``; only a
  checkpoint head makes a version loadable, so a staged version nobody published is never shown;
* the file digest is SHA-256 over the compacted records, each followed by ``"\\n"`` (the restored JSONL bytes);
* :func:`replace` appends only the tails that a **prefix proof** shows to extend the canonical version, trims
  candidate tails left by earlier crashed rounds, and declines a capture that no longer proves the canonical
  prefix with :class:`SessionStateDivergent`, writing nothing; the way forward is :func:`publish_reset`;
* :func:`load` reads the head's version in one transaction, bounded by its shapes, re-verifying every digest.

A "session" here is one agent session: the pair (agent id, agent session id), e.g. ``("claude-code",
<sessionId>)``. Each capture of it is a run with a fencing token drawn from a counter; only the newest run of
a session may stage or publish.

The module is split by responsibility: :mod:`store.agents.checkpoint_model` (limits, errors, dataclasses),
:mod:`store.agents.checkpoint_records` (compaction, digests, validation), :mod:`store.agents.checkpoint_db`
(finding and opening the state database, its schema, row decoding), :mod:`store.agents.checkpoint_read`
(loading, listing, pages) and :mod:`store.agents.checkpoint_runtime` (the runtime configuration guard).
This module holds the writes (runs, staging, publication) and keeps every public name of those parts
importable from here.

The functions named by a :class:`~store.mothx.db.Database` (:func:`start_run`, :func:`stage_version`,
:func:`publish_head`, :func:`mark_run_failed`, :func:`~store.agents.checkpoint_read.read_canonical`,
:func:`~store.agents.checkpoint_read.load_from`) work on a checkpoint file already open, so a capture of many
sessions opens it once. Every other function takes the :class:`~store.mothx.sessiondir.SessionDir` first and opens the checkpoint file in the
directory's open mode. In a read mode a missing file simply means "no checkpoints", and nothing is written.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from store.agents.checkpoint_db import CheckpointStore, StoreConn, store_brief, store_label
from store.agents.checkpoint_engine import PgConnection, lock_suffix, selected_store, use_store
from store.agents.checkpoint_model import (
    ACTIVE_RUN_STATUSES,
    INSERT_BATCH_BYTES,
    INSERT_BATCH_RECORDS,
    KIND_CHECKPOINT,
    KIND_RESET,
    LOAD_PAGE_BYTES,
    LOAD_PAGE_ROWS,
    MAX_AGENT_ID_BYTES,
    MAX_AGENT_SESSION_ID_BYTES,
    MAX_CWD_BYTES,
    MAX_FILES,
    MAX_LINE_BYTES,
    MAX_PATH_BYTES,
    MAX_RECORDS,
    MAX_RESTORED_BYTES,
    SCHEMA_VERSION,
    STATE_DB,
    STATE_DIR,
    CanonicalShape,
    CheckpointDamaged,
    CheckpointInfo,
    FileShape,
    InvalidSessionState,
    LoadedCheckpoint,
    PersistedSessionState,
    PersistedSessionStateFile,
    PublicationHead,
    RecordConsumer,
    RecordReader,
    ReplaceResult,
    ResetPreview,
    RunFence,
    RuntimeConfigEpoch,
    RuntimeConfigResetInProgress,
    RuntimeConfigStale,
    SessionStateDivergent,
    SessionStateOutOfSync,
    SessionStateRecord,
    StaleFence,
    now_text,
    stored_int,
    stored_text,
)
from store.agents.checkpoint_read import (
    PagedReader,
    canonical_shape,
    canonical_shapes_of,
    checkpoint_info,
    decode_head,
    decode_shapes,
    decode_state,
    has_tables,
    head,
    list_checkpoints,
    load,
    load_checkpoint,
    load_from,
    open_state_db,
    preview_reset,
    read_canonical,
    read_head_row,
    require_state_writable,
    schema_sql,
    session_row,
    state_db,
    state_db_path,
    version_row,
)
from store.agents.checkpoint_records import (
    StreamValidator,
    bounded_text,
    check_json,
    compact,
    file_digest,
    header_problem,
    is_uuid,
    path_problem,
    utf8_len,
)
from store.agents.checkpoint_runtime import (
    advance_runtime_config_epoch,
    ensure_agent,
    guard_runtime_sync,
    runtime_config_epoch,
    set_runtime_reset_lease,
)
from store.agents.checkpoint_schema import PG_SEQUENCE
from store.errors import StoreError
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


def _now() -> str:
    return now_text()


HOST_ENV = "SESSIONSCOPE_HOST"


def this_host() -> str:
    """The host a capture records: ``$SESSIONSCOPE_HOST`` when set, else the machine's host name."""
    name = os.environ.get(HOST_ENV, "").strip() or socket.gethostname()
    return name[:255]


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
    _check_ids(agent_id, agent_session_id)
    now = _now()
    host = this_host() if host is None else host
    with db.write() as conn:
        return _start_run_in(conn, agent_id, agent_session_id, source_root, host, now)


def _check_ids(agent_id: str, agent_session_id: str) -> None:
    for value, name, limit in (
        (agent_id, "the agent id", MAX_AGENT_ID_BYTES),
        (agent_session_id, "the agent session id", MAX_AGENT_SESSION_ID_BYTES),
    ):
        problem = bounded_text(value, name, limit)
        if problem or value != value.strip():
            raise InvalidSessionState(f"Cannot start a capture: {problem or name + ' has surrounding spaces'}.")


def _start_run_in(
    conn: StoreConn, agent_id: str, agent_session_id: str, source_root: str | None, host: str, now: str,
    agent_known: bool = False,
) -> RunFence:
    """:func:`start_run` inside an open write transaction (``agent_known``: the agent's row was ensured in
    this transaction already)."""
    if not agent_known:
        ensure_agent(conn, agent_id, now)
    # Two hosts may meet the session for the first time at once: the insert that loses does nothing.
    # (the no-op update returns the row that exists, and locks it on PostgreSQL)
    row = conn.execute(
        "INSERT INTO agent_state_sessions (session_id, agent_id, agent_session_id, source_root, "
        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, agent_session_id) "
        "DO UPDATE SET agent_id = excluded.agent_id RETURNING session_id",
        (secrets.token_hex(8), agent_id, agent_session_id, source_root or "", now, now),
    ).fetchone()
    if row is None:
        raise StaleFence("The agent session's row vanished while a capture started.")
    session_id = str(row[0])
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
    return RunFence(session_id, agent_id, agent_session_id, run_id, token)


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
    records: Iterable[SessionStateRecord],
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
    now = _now()
    with db.write() as conn:
        return _stage_in(conn, fence, state, records, publish, trusted, now, fenced=False)


@dataclass(frozen=True)
class CaptureItem:
    """One session of :func:`capture_batch`: what :func:`capture_version` takes."""

    agent_id: str
    agent_session_id: str
    source_root: str
    make_state: Callable[[RunFence], PersistedSessionState]
    records: Iterable[SessionStateRecord]
    trusted: frozenset[str] = frozenset()


def capture_batch(
    db: CheckpointStore, items: list[CaptureItem], *, host: str | None = None
) -> list[ReplaceResult | StoreError | OSError]:
    """:func:`capture_version` for many sessions in ONE transaction, each under its own savepoint: a session
    that cannot be written (divergent, superseded, invalid) is rolled back alone and its error is returned in
    its place; the others are committed together."""
    for item in items:
        _check_ids(item.agent_id, item.agent_session_id)
    now = _now()
    host = this_host() if host is None else host
    out: list[ReplaceResult | StoreError | OSError] = []
    with db.write() as conn:
        for agent in sorted({item.agent_id for item in items}):
            ensure_agent(conn, agent, now)
        for item in items:
            conn.execute("SAVEPOINT capture_item")
            try:
                fence = _start_run_in(conn, item.agent_id, item.agent_session_id, item.source_root, host, now,
                                      agent_known=True)
                state = item.make_state(fence)
                problem = header_problem(state)
                if problem:
                    raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
                result = _stage_in(conn, fence, state, item.records, KIND_CHECKPOINT, item.trusted, now, fenced=True)
            except (StoreError, OSError) as exc:
                conn.execute("ROLLBACK TO SAVEPOINT capture_item")
                conn.execute("RELEASE SAVEPOINT capture_item")
                out.append(exc)
                continue
            except Exception as exc:
                if not _driver_error(exc):
                    raise
                conn.execute("ROLLBACK TO SAVEPOINT capture_item")
                conn.execute("RELEASE SAVEPOINT capture_item")
                out.append(StoreError(f"The capture was not stored: {one_line(str(exc))[:300]}"))
                continue
            conn.execute("RELEASE SAVEPOINT capture_item")
            out.append(result)
    return out


def _driver_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) or type(exc).__module__.startswith("psycopg")


def capture_version(
    db: CheckpointStore,
    agent_id: str,
    agent_session_id: str,
    source_root: str,
    make_state: Callable[[RunFence], PersistedSessionState],
    records: Iterable[SessionStateRecord],
    *,
    trusted: frozenset[str] = frozenset(),
    host: str | None = None,
) -> tuple[RunFence, ReplaceResult]:
    """A capture's whole write in ONE transaction: start a run (:func:`start_run`), stage the state
    ``make_state(fence)`` builds for it and publish it as the checkpoint head (:func:`stage_version` with
    ``publish``). A divergent capture rolls everything back, the run included: nothing is written."""
    _check_ids(agent_id, agent_session_id)
    now = _now()
    host = this_host() if host is None else host
    with db.write() as conn:
        fence = _start_run_in(conn, agent_id, agent_session_id, source_root, host, now)
        state = make_state(fence)
        problem = header_problem(state)
        if problem:
            raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
        if (state.through_run_id, state.runtime_fencing_token) != (fence.run_id, fence.fencing_token):
            raise StaleFence("The state being staged does not belong to the run that holds the fence.")
        return fence, _stage_in(conn, fence, state, records, KIND_CHECKPOINT, trusted, now, fenced=True)


LINE_COLUMNS = ("session_id", "file_path", "line_number", "content", "content_bytes")


def _stage_in(
    conn: StoreConn,
    fence: RunFence,
    state: PersistedSessionState,
    records: Iterable[SessionStateRecord],
    publish: str | None,
    trusted: frozenset[str],
    now: str,
    *,
    fenced: bool,
) -> ReplaceResult:
    """:func:`stage_version` inside an open write transaction; ``fenced``: the run was started in this very
    transaction (its fence cannot have moved), so it is not read back."""
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
    canonical = canonical_shapes_of(conn, session_id)
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
    # Clean the line set in ONE statement: every line of a file not captured, and every line past the
    # canonical record count of a captured file (0 for a file that is not canonical), goes.
    kept = [(p, n) for p, n in skip.items() if n > 0]
    if kept:
        cur = conn.execute(
            "DELETE FROM agent_state_lines WHERE session_id = ? AND NOT ("
            + " OR ".join("(file_path = ? AND line_number <= ?)" for _ in kept) + ")",
            (session_id, *(v for pair in kept for v in pair)),
        )
    else:
        cur = conn.execute("DELETE FROM agent_state_lines WHERE session_id = ?", (session_id,))
    trimmed = max(cur.rowcount, 0)
    validator = StreamValidator(state, skip, InvalidSessionState, trusted)
    batch: list[tuple[str, str, int, str, int]] = []
    batch_bytes = 0
    written = 0
    bytes_written = 0

    def flush() -> None:
        nonlocal written, bytes_written, batch, batch_bytes
        if not batch:
            return
        if isinstance(conn, PgConnection):  # one COPY per batch: no round trip per record
            count = conn.copy_rows("agent_state_lines", LINE_COLUMNS, batch)
        else:
            count = conn.executemany(
                "INSERT INTO agent_state_lines (session_id, file_path, line_number, content, content_bytes) "
                "VALUES (?, ?, ?, ?, ?)",
                batch,
            ).rowcount
        if count != len(batch):
            raise InvalidSessionState(f"A batch of {len(batch)} records wrote {count} rows.")
        written += len(batch)
        bytes_written += batch_bytes
        batch = []
        batch_bytes = 0

    for rec in records:
        text, new = validator.accept(rec)
        if not new:
            continue
        content = rec.content
        size = len(content) if isinstance(content, bytes) and validator.trusting else len(text.encode("utf-8"))
        batch.append((session_id, rec.file_path, rec.line_number, text, size))
        batch_bytes += size + 1
        if len(batch) >= INSERT_BATCH_RECORDS or batch_bytes >= INSERT_BATCH_BYTES:
            flush()
    flush()
    validator.finish()
    expected = sum(f.records - skip[f.path] for f in state.files)
    if written != expected:
        raise InvalidSessionState(f"The capture inserted {written} records where {expected} were expected.")
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
    conn.execute(
        "DELETE FROM agent_state_versions WHERE session_id = ? AND through_run_id <> ? AND through_run_id NOT IN "
        "(SELECT run_id FROM agent_state_publications WHERE session_id = ? AND checkpoint_reset = FALSE)",
        (session_id, state.through_run_id, session_id),
    )
    if publish is not None:
        _publish(conn, fence, publish, now)
    return ReplaceResult(records_written=written, bytes_written=bytes_written, files_trimmed=trimmed)


def publish_head(db: CheckpointStore, fence: RunFence, kind: str) -> PublicationHead:
    """Make ``fence``'s run the session's publication head (``kind`` is a checkpoint or a reset) in an open
    checkpoint file; :class:`StaleFence` when the run no longer holds the session's fence."""
    if kind not in (KIND_CHECKPOINT, KIND_RESET):
        raise InvalidSessionState(f"Unknown publication kind {kind!r}.")
    now = _now()
    with db.write() as conn:
        if lock_suffix(conn):
            conn.execute(
                "SELECT session_id FROM agent_state_sessions WHERE session_id = ?" + lock_suffix(conn),
                (fence.session_id,),
            )
        _publish(conn, fence, kind, now)
    return PublicationHead(run_id=fence.run_id, kind=kind)


def _publish(conn: StoreConn, fence: RunFence, kind: str, now: str) -> None:
    row = conn.execute(
        "INSERT INTO agent_state_publications (session_id, run_id, checkpoint_reset, updated_at) "
        "SELECT r.session_id, r.run_id, ?, ? FROM agent_state_runs r JOIN agent_state_sessions s "
        "ON s.session_id = r.session_id WHERE r.session_id = ? AND r.run_id = ? AND r.fencing_token = ? "
        "AND r.fencing_token = s.runtime_fencing_token AND r.status IN ('running', 'waiting_decision') "
        "ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id, "
        "checkpoint_reset = excluded.checkpoint_reset, updated_at = excluded.updated_at RETURNING run_id",
        (kind == KIND_RESET, now, fence.session_id, fence.run_id, fence.fencing_token),
    ).fetchone()
    if row is None:
        raise StaleFence(f"The run {fence.run_id} no longer holds the session's fence; nothing was published.")
    conn.execute(
        "UPDATE agent_state_runs SET status = 'completed', finished_at = ? WHERE session_id = ? AND run_id = ?",
        (now, fence.session_id, fence.run_id),
    )
    _prune_runs(conn, fence.session_id)


def _prune_runs(conn: StoreConn, session_id: str) -> None:
    conn.execute(
        "DELETE FROM agent_state_runs WHERE session_id = ? AND status IN ('completed', 'failed') "
        "AND run_id NOT IN (SELECT through_run_id FROM agent_state_versions WHERE session_id = ?) "
        "AND run_id NOT IN (SELECT run_id FROM agent_state_publications WHERE session_id = ?)",
        (session_id, session_id, session_id),
    )


def mark_run_failed(db: CheckpointStore, fence: RunFence) -> None:
    """Mark a run that staged nothing usable as failed (it keeps no lock; later runs supersede it anyway)."""
    with db.write() as conn:
        conn.execute(
            "UPDATE agent_state_runs SET status = 'failed', finished_at = ? WHERE session_id = ? AND run_id = ? "
            "AND status IN ('running', 'waiting_decision')",
            (_now(), fence.session_id, fence.run_id),
        )
        _prune_runs(conn, fence.session_id)


# ------------------------------------------------------------------------------------ public, by SessionDir


def begin_run(sd: SessionDir, agent_id: str, agent_session_id: str, *, source_root: str | None = None) -> RunFence:
    """Start a run for an agent session: draw a new fencing token (superseding any older run) and return it."""
    require_state_writable(sd)
    db = open_state_db(sd, create=True)
    assert db is not None
    try:
        return start_run(db, agent_id, agent_session_id, source_root)
    finally:
        db.close()


def replace(
    sd: SessionDir, fence: RunFence, state: PersistedSessionState, records: Iterable[SessionStateRecord]
) -> ReplaceResult:
    """Stage ``state`` under its run in one fenced transaction, writing only the tails beyond the canonical
    version (reference section 7). Raises :class:`SessionStateDivergent` (nothing written), :class:`StaleFence`
    or :class:`InvalidSessionState` (rolled back)."""
    require_state_writable(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        return stage_version(db, fence, state, records)


def publish(sd: SessionDir, fence: RunFence, kind: str = KIND_CHECKPOINT) -> PublicationHead:
    """Make ``fence``'s run the session's publication head (a ``checkpoint`` or a ``reset``)."""
    require_state_writable(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        return publish_head(db, fence, kind)


def publish_reset(sd: SessionDir, agent_id: str, agent_session_id: str) -> PublicationHead:
    """Publish an explicit reset head: nothing is resumable, and the next capture may rewrite every file."""
    require_state_writable(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        fence = start_run(db, agent_id, agent_session_id)
        return publish_head(db, fence, KIND_RESET)


def fail_run(sd: SessionDir, fence: RunFence) -> None:
    """Mark ``fence``'s run failed (it staged nothing usable); a missing checkpoint file is left alone."""
    require_state_writable(sd)
    with state_db(sd) as db:
        if db is not None:
            mark_run_failed(db, fence)


def delete_checkpoints(sd: SessionDir, agent_id: str, agent_session_id: str) -> bool:
    """Forget an agent session entirely (versions, lines, head, runs). True when something was deleted."""
    require_state_writable(sd)
    with state_db(sd) as db:
        if db is None:
            return False
        with db.write() as conn:
            row = conn.execute(
                "SELECT session_id FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
                (agent_id, agent_session_id),
            ).fetchone()
            if row is None:
                return False
            for table in (
                "agent_state_file_marks",
                "agent_state_publications",
                "agent_state_versions",
                "agent_state_lines",
                "agent_state_run_hosts",
                "agent_state_session_hosts",
                "agent_state_runs",
                "agent_state_sessions",
            ):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (row[0],))
    return True


__all__ = [
    "HOST_ENV",
    "CheckpointStore",
    "selected_store",
    "store_brief",
    "store_label",
    "this_host",
    "use_store",
    "ACTIVE_RUN_STATUSES",
    "CanonicalShape",
    "CheckpointDamaged",
    "CheckpointInfo",
    "FileShape",
    "INSERT_BATCH_BYTES",
    "INSERT_BATCH_RECORDS",
    "InvalidSessionState",
    "KIND_CHECKPOINT",
    "KIND_RESET",
    "LOAD_PAGE_BYTES",
    "LOAD_PAGE_ROWS",
    "LoadedCheckpoint",
    "MAX_AGENT_ID_BYTES",
    "MAX_AGENT_SESSION_ID_BYTES",
    "MAX_CWD_BYTES",
    "MAX_FILES",
    "MAX_LINE_BYTES",
    "MAX_PATH_BYTES",
    "MAX_RECORDS",
    "MAX_RESTORED_BYTES",
    "PagedReader",
    "PersistedSessionState",
    "PersistedSessionStateFile",
    "PublicationHead",
    "RecordConsumer",
    "RecordReader",
    "ReplaceResult",
    "ResetPreview",
    "RunFence",
    "RuntimeConfigEpoch",
    "RuntimeConfigResetInProgress",
    "RuntimeConfigStale",
    "SCHEMA_VERSION",
    "STATE_DB",
    "STATE_DIR",
    "SessionStateDivergent",
    "SessionStateOutOfSync",
    "SessionStateRecord",
    "StaleFence",
    "StreamValidator",
    "advance_runtime_config_epoch",
    "begin_run",
    "bounded_text",
    "CaptureItem",
    "canonical_shape",
    "capture_batch",
    "capture_version",
    "canonical_shapes_of",
    "check_json",
    "checkpoint_info",
    "compact",
    "decode_head",
    "decode_shapes",
    "decode_state",
    "delete_checkpoints",
    "divergence",
    "ensure_agent",
    "fail_run",
    "file_digest",
    "guard_runtime_sync",
    "has_tables",
    "head",
    "header_problem",
    "is_uuid",
    "list_checkpoints",
    "load",
    "load_checkpoint",
    "load_from",
    "mark_run_failed",
    "now_text",
    "open_state_db",
    "path_problem",
    "preview_reset",
    "publish",
    "publish_head",
    "publish_reset",
    "read_canonical",
    "read_head_row",
    "replace",
    "require_state_writable",
    "runtime_config_epoch",
    "schema_sql",
    "session_row",
    "set_runtime_reset_lease",
    "stage_version",
    "start_run",
    "state_db",
    "state_db_path",
    "stored_int",
    "stored_text",
    "utf8_len",
    "version_row",
]
