"""The checkpoint file itself: where it lives, opening it (creating its tables in a write mode), and decoding
its rows (heads, versions, file shapes, canonical shapes).

Every value read from a row is checked for its type: a row written by someone else (text in an integer column,
a NULL) raises :class:`CheckpointDamaged` or :class:`SessionStateOutOfSync`, never a traceback. The loads,
pages and listings built on these are :mod:`store.agents.checkpoint_read`'s.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from store.agents.checkpoint_model import (
    KIND_CHECKPOINT,
    KIND_RESET,
    SCHEMA_VERSION,
    STATE_DB,
    STATE_DIR,
    CanonicalShape,
    CheckpointDamaged,
    FileShape,
    PersistedSessionState,
    PersistedSessionStateFile,
    PublicationHead,
    SessionStateOutOfSync,
    stored_int,
)
from store.agents.checkpoint_records import (
    header_problem,
    is_uuid,
)
from store.errors import ReadOnlyStore, SchemaIncompatible
from store.mothx.db import Database, open_database
from store.mothx.schema import split_statements
from store.mothx.sessiondir import SessionDir


def state_db_path(sd: SessionDir) -> Path:
    """``<session dir>/sessionscope/agent-state.db``: the checkpoint file of a session directory."""
    return sd.root / STATE_DIR / STATE_DB


def schema_sql() -> str:
    """The checkpoint file's layout (``store/sql/agentstate_v1.sql``)."""
    return resources.files("store").joinpath("sql", "agentstate_v1.sql").read_text(encoding="utf-8")


def _ensure_schema(db: Database) -> None:
    with db.read() as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = None
        if "agent_state_meta" in tables:
            row = conn.execute("SELECT value FROM agent_state_meta WHERE name = 'schema_version'").fetchone()
            version = int(row[0]) if row and str(row[0]).isdigit() else None
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaIncompatible(
            f"{db.path} has checkpoint layout version {version}; this Sessionscope reads up to {SCHEMA_VERSION}."
        )
    if version == SCHEMA_VERSION:
        return
    if db.mode.is_read:
        if "agent_state_meta" in tables:
            raise SchemaIncompatible(f"{db.path} has no readable checkpoint layout version.")
        return
    with db.write() as conn:
        for statement in split_statements(schema_sql()):
            conn.execute(statement)


def open_state_db(sd: SessionDir, *, create: bool = False) -> Database | None:
    """Open the checkpoint file in the directory's mode; None when it does not exist and may not be created."""
    path = state_db_path(sd)
    if not path.exists():
        if sd.mode.is_read or not create:
            return None
    db = open_database(path, sd.mode, create=create and not sd.mode.is_read, foreign_keys=True)
    try:
        _ensure_schema(db)
    except BaseException:
        db.close()
        raise
    return db


@contextmanager
def state_db(sd: SessionDir, *, create: bool = False) -> Iterator[Database | None]:
    """The checkpoint file opened as :func:`open_state_db` does, closed on leaving (None when absent)."""
    db = open_state_db(sd, create=create)
    try:
        yield db
    finally:
        if db is not None:
            db.close()


def require_state_writable(sd: SessionDir) -> None:
    """Checkpoints live in a file of ours, so only the open mode decides: a read mode refuses every write.

    (The ``sessions.db`` layout does not matter here: an older or newer mothx database that Sessionscope will
    not write still lets its user capture agent checkpoints beside it.)
    """
    if sd.mode.is_read:
        raise ReadOnlyStore(f"Refused: the session directory is open {sd.mode.value} (read-only).")


require_state_writable = require_state_writable


def has_tables(conn: sqlite3.Connection) -> bool:
    """True when the checkpoint tables exist in ``conn`` (a file opened read-only may predate them)."""
    row = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'agent_state_publications'"
    ).fetchone()
    return bool(row and row[0])


def session_row(conn: sqlite3.Connection, agent_id: str, agent_session_id: str) -> sqlite3.Row | None:
    """The ``agent_state_sessions`` row of an agent session (by column name), or None."""
    if not has_tables(conn):
        return None
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(
            "SELECT session_id, agent_id, agent_session_id, source_root, runtime_fencing_token, "
            "runtime_config_epoch, updated_at FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
            (agent_id, agent_session_id),
        ).fetchone()
    finally:
        conn.row_factory = None


def decode_head(run_id: object, reset: object) -> PublicationHead:
    """A publication row → head; a run id that is not a UUID or a reset flag that is not 0/1 is
    :class:`SessionStateOutOfSync`."""
    if not isinstance(run_id, str) or not is_uuid(run_id):
        raise SessionStateOutOfSync(
            "Agent session checkpoint is out of sync with canonical history: the head's run id is not a UUID."
        )
    if reset not in (0, 1):
        raise CheckpointDamaged(
            "Agent session checkpoint is out of sync with canonical history: the head's reset flag is not 0 or 1."
        )
    return PublicationHead(run_id=run_id, kind=KIND_RESET if reset else KIND_CHECKPOINT)


def read_head_row(conn: sqlite3.Connection, session_id: str) -> tuple[str, object] | None:
    """``(run_id, checkpoint_reset)`` of a session's publication head as stored, or None."""
    row = conn.execute(
        "SELECT run_id, checkpoint_reset FROM agent_state_publications WHERE session_id = ?", (session_id,)
    ).fetchone()
    return (row[0], row[1]) if row else None


def _damaged(what: str) -> CheckpointDamaged:
    return CheckpointDamaged(
        f"Agent session checkpoint is out of sync with canonical history: its header cannot be read ({what})."
    )


def _text_column(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _damaged(f"{what} is not stored as text")
    return value


def decode_shapes(text: object) -> tuple[PersistedSessionStateFile, ...]:
    """The ``file_shapes`` JSON of a version row; :class:`CheckpointDamaged` unless it is an array of
    ``{"path": text, "records": integer, "digest": text}`` objects."""
    if not isinstance(text, str):
        raise _damaged("the file shapes are not stored as text")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _damaged("the file shapes are not valid JSON") from exc
    if not isinstance(raw, list):
        raise _damaged("the file shapes are not a JSON array")
    files: list[PersistedSessionStateFile] = []
    for s in raw:
        path = s.get("path") if isinstance(s, dict) else None
        records = s.get("records") if isinstance(s, dict) else None
        digest = s.get("digest") if isinstance(s, dict) else None
        if not isinstance(path, str) or not isinstance(digest, str) or not isinstance(records, int) or isinstance(
            records, bool
        ):
            raise _damaged("a file shape is not a {path, records, digest} object")
        files.append(PersistedSessionStateFile(path=path, records=records, digest=digest))
    return tuple(files)


def decode_state(row: tuple[Any, ...]) -> PersistedSessionState:
    """A version row → state. A value of the wrong type is :class:`CheckpointDamaged`, a header that breaks
    the checkpoint rules :class:`SessionStateOutOfSync`: never another exception."""
    (through_run_id, agent_id, agent_session_id, cwd, transcript_path, token, file_count, record_count, shapes) = row
    state = PersistedSessionState(
        agent_id=_text_column(agent_id, "the agent id"),
        agent_session_id=_text_column(agent_session_id, "the agent session id"),
        through_run_id=_text_column(through_run_id, "the run id"),
        cwd=_text_column(cwd, "the working directory"),
        transcript_path=_text_column(transcript_path, "the transcript path"),
        runtime_fencing_token=stored_int(token, "the header's runtime fencing token"),
        file_count=stored_int(file_count, "the header's file count"),
        record_count=stored_int(record_count, "the header's record count"),
        files=decode_shapes(shapes),
    )
    problem = header_problem(state)
    if problem:
        raise SessionStateOutOfSync(
            f"Agent session checkpoint is out of sync with canonical history: {problem}."
        )
    return state


STATE_COLUMNS = (
    "through_run_id, agent_id, agent_session_id, cwd, transcript_path, runtime_fencing_token, "
    "file_count, record_count, file_shapes"
)


def version_row(conn: sqlite3.Connection, session_id: str, run_id: str) -> tuple[Any, ...] | None:
    """The header columns of the version staged under ``run_id``, or None."""
    return conn.execute(
        f"SELECT {STATE_COLUMNS} FROM agent_state_versions WHERE session_id = ? AND through_run_id = ?",
        (session_id, run_id),
    ).fetchone()


def canonical_shapes_of(conn: sqlite3.Connection, session_id: str) -> dict[str, FileShape]:
    """The shapes of the version a checkpoint head names, by path; empty for no head or a reset."""
    row = conn.execute(
        "SELECT v.file_shapes FROM agent_state_publications p JOIN agent_state_versions v "
        "ON v.session_id = p.session_id AND v.through_run_id = p.run_id "
        "WHERE p.session_id = ? AND p.checkpoint_reset = FALSE",
        (session_id,),
    ).fetchone()
    if row is None:
        return {}
    return {f.path: f.shape for f in decode_shapes(row[0])}


def read_canonical(db: Database, agent_id: str, agent_session_id: str) -> CanonicalShape | None:
    """The head version's shapes and restored byte marks in an open checkpoint file (advisory, read
    before a capture); None for no session, no head or a reset head. :class:`SessionStateOutOfSync` when the
    stored shapes cannot be read."""
    with db.read() as conn:
        sess = session_row(conn, agent_id, agent_session_id)
        if sess is None:
            return None
        head = read_head_row(conn, sess["session_id"])
        if head is None or bool(head[1]):
            return None
        shapes = canonical_shapes_of(conn, sess["session_id"])
        if not shapes:
            return None
        marks = {  # hints for the next capture: a mark of the wrong type is left out
            p: n
            for p, n in conn.execute(
                "SELECT file_path, restored_bytes FROM agent_state_file_marks WHERE session_id = ? AND through_run_id = ?",
                (sess["session_id"], head[0]),
            )
            if isinstance(p, str) and isinstance(n, int) and n > 0
        }
        return CanonicalShape(sess["session_id"], str(head[0]), shapes, marks)
