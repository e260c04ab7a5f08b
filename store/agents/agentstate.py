"""External-agent checkpoints: native JSONL session files kept as verified versions in SQLite or PostgreSQL.

The contract is the reference's (``agent-state-checkpoints.md``) moved into a store of ours: by default a file
inside the session directory, ``<session dir>/sessionscope/agent-state.db``, or a PostgreSQL database named by
a URL (the team store). Its layout is defined once, by the SQLModel table classes of
:mod:`store.agents.checkpoint_tables`, and created or upgraded by :mod:`store.agents.checkpoint_schema` (a new
file from the DDL the classes compile to, kept in ``store/sql/agentstate_v3.<engine>.sql`` and checked equal
by a test; ``store/sql/agentstate_v1.sql`` is only the frozen version-1 layout the upgrade tests start from):

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
(loading, listing, pages), :mod:`store.agents.checkpoint_write` (runs, fencing tokens, staging, a capture's
batched writes), :mod:`store.agents.checkpoint_publish` (publication heads, the end of runs) and
:mod:`store.agents.checkpoint_runtime` (the runtime configuration guard). This module holds the functions
that take a session directory and keeps every public name of those parts importable from here.

The functions named by a :class:`~store.mothx.db.Database` (:func:`start_run`, :func:`stage_version`,
:func:`publish_head`, :func:`mark_run_failed`, :func:`~store.agents.checkpoint_read.read_canonical`,
:func:`~store.agents.checkpoint_read.load_from`) work on a checkpoint file already open, so a capture of many
sessions opens it once. Every other function takes the :class:`~store.mothx.sessiondir.SessionDir` first and opens the checkpoint file in the
directory's open mode. In a read mode a missing file simply means "no checkpoints", and nothing is written.
"""

from __future__ import annotations

import secrets  # noqa: F401 - the modules a capture draws ids from, reachable here (tests pin them)
import uuid  # noqa: F401
from collections.abc import Iterable

from store.agents.checkpoint_db import CheckpointStore, store_brief, store_label
from store.agents.checkpoint_engine import selected_store, use_store
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
    TrustedTail,
    now_text,
    stored_int,
    stored_text,
)
from store.agents.checkpoint_publish import mark_run_failed, publish_head
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
from store.agents.checkpoint_write import (
    HOST_ENV,
    CaptureItem,
    StagedRecord,
    capture_batch,
    capture_version,
    divergence,
    stage_version,
    start_run,
    this_host,
)
from store.mothx.sessiondir import SessionDir

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
    "StagedRecord",
    "TrustedTail",
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
