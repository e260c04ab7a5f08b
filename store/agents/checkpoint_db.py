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
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from store.agents import checkpoint_schema
from store.agents.checkpoint_engine import (
    DIALECT_POSTGRESQL,
    DIALECT_SQLITE,
    PgConnection,
    PgStore,
    has_table,
    selected_store,
    shown_url,
    sqlite_path,
    store_kind,
)
from store.agents.checkpoint_model import (
    KIND_CHECKPOINT,
    KIND_RESET,
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
from store.errors import ReadOnlyStore
from store.mothx.db import Database, open_database
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


def state_db_path(sd: SessionDir) -> Path:
    """``<session dir>/sessionscope/agent-state.db``: the checkpoint file of a session directory."""
    return sd.root / STATE_DIR / STATE_DB


def schema_sql() -> str:
    """The checkpoint file's layout as the SQLModel table classes of :mod:`store.agents.checkpoint_tables` (the
    layout's one definition) compile it; a new file is created from the same DDL, kept in
    ``store/sql/agentstate_v<version>.sqlite.sql``."""
    return checkpoint_schema.schema_sql()


CheckpointStore = Database | PgStore
"""An open checkpoint store: the SQLite file (a :class:`~store.mothx.db.Database`) or a PostgreSQL database."""

StoreConn = sqlite3.Connection | PgConnection
"""A connection inside one transaction of a :data:`CheckpointStore`."""


def store_label(sd: SessionDir) -> str:
    """Which checkpoint store the session directory reads, in one line: "PostgreSQL postgresql://u:***@h/db",
    "SQLite <path>" (a ``sqlite:///`` URL) or the default file."""
    url = selected_store()
    if url is None:
        return f"SQLite {one_line(str(state_db_path(sd)))}"
    if store_kind(url) == DIALECT_POSTGRESQL:
        return f"PostgreSQL {shown_url(url)}"
    return f"SQLite {one_line(sqlite_path(url))}"


def store_brief(sd: SessionDir) -> str:
    """:func:`store_label` in a few words for a narrow pane: "PostgreSQL team@db.example", "SQLite team.db"."""
    url = selected_store()
    if url is None:
        return "SQLite " + STATE_DB
    if store_kind(url) == DIALECT_SQLITE:
        return "SQLite " + one_line(Path(sqlite_path(url)).name)
    try:
        parts = urlsplit(url)
        where = parts.hostname or "local socket"
        return one_line(f"PostgreSQL {parts.path.lstrip('/') or '?'}@{where}")
    except ValueError:
        return "PostgreSQL"


PAGE_SIZE = 16384
"""The page size of a checkpoint file this store creates. Records are JSON lines of about a kilobyte to many;
16 KiB pages hold more of them per page than SQLite's default 4 KiB, so a capture writes (and checkpoints from
the WAL) a quarter of the pages and its lines need fewer overflow pages. An existing file keeps its own."""

WRITE_CACHE_KIB = 32 * 1024
"""The page cache of a write-mode connection to the checkpoint file (SQLite's default is 2 MiB): a capture's
batch of sessions is written in one transaction, and a cache that holds it writes each page to the WAL once
at commit instead of spilling and rewriting pages half-way."""


WAL_CHECKPOINT_PAGES = 4096
"""A write-mode connection copies the WAL into the file once it holds this many pages (SQLite's default is
1,000): 64 MiB with 16 KiB pages, so the 16 MiB batches of a capture are checkpointed every few transactions,
not after each one (fewer fsyncs, and the pages every batch touches are copied once). Durability is SQLite's
WAL with ``synchronous = NORMAL`` as for every file of the session directory: a committed head survives any
crash of the process; the checkpoint frequency changes nothing there."""

WAL_KEEP_BYTES = 16 * 1024 * 1024
"""The ``-wal`` file is cut back to this size after a checkpoint (it would otherwise keep its largest size)."""


def _create_sqlite(path: Path) -> None:
    """Make a new, empty checkpoint file with :data:`PAGE_SIZE` pages in WAL mode (a file another process made
    first is left as it is: both settings only apply to an empty database)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=30)
    try:
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()


def _open_sqlite(path: Path, sd: SessionDir, create: bool) -> Database | None:
    if not path.exists():
        if sd.mode.is_read or not create:
            return None
        _create_sqlite(path)
    db = open_database(path, sd.mode, create=create and not sd.mode.is_read, foreign_keys=True)
    if not sd.mode.is_read:
        db.conn.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")
        db.conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        db.conn.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
    try:
        checkpoint_schema.ensure_sqlite(db)
    except BaseException:
        db.close()
        raise
    return db


def open_state_db(sd: SessionDir, *, create: bool = False) -> CheckpointStore | None:
    """Open the checkpoint store in the directory's mode: the store URL in effect
    (:func:`~store.agents.checkpoint_engine.selected_store`) or the directory's own file. None when the file
    does not exist and may not be created. A PostgreSQL store always opens (its tables are created by the
    first open in a write mode; a read mode finds none until then)."""
    url = selected_store()
    if url is None:
        return _open_sqlite(state_db_path(sd), sd, create)
    if store_kind(url) == DIALECT_SQLITE:
        return _open_sqlite(Path(sqlite_path(url)).expanduser(), sd, create)
    store = PgStore(url, sd.mode)
    try:
        checkpoint_schema.ensure_pg(store)
    except BaseException:
        store.close()
        raise
    return store


@contextmanager
def state_db(sd: SessionDir, *, create: bool = False) -> Iterator[CheckpointStore | None]:
    """The checkpoint store opened as :func:`open_state_db` does, closed on leaving (None when absent)."""
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


def has_tables(conn: StoreConn) -> bool:
    """True when the checkpoint tables exist in ``conn`` (a file opened read-only may predate them)."""
    return has_table(conn, "agent_state_publications")


SESSION_COLUMNS = (
    "session_id", "agent_id", "agent_session_id", "source_root", "runtime_fencing_token", "runtime_config_epoch",
    "updated_at",
)


def session_row(conn: StoreConn, agent_id: str, agent_session_id: str) -> dict[str, Any] | None:
    """The ``agent_state_sessions`` row of an agent session (by column name), or None."""
    if not has_tables(conn):
        return None
    row = conn.execute(
        f"SELECT {', '.join(SESSION_COLUMNS)} FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
        (agent_id, agent_session_id),
    ).fetchone()
    return dict(zip(SESSION_COLUMNS, row, strict=True)) if row is not None else None


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


def read_head_row(conn: StoreConn, session_id: str) -> tuple[str, object] | None:
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


def version_row(conn: StoreConn, session_id: str, run_id: str) -> tuple[Any, ...] | None:
    """The header columns of the version staged under ``run_id``, or None."""
    return conn.execute(
        f"SELECT {STATE_COLUMNS} FROM agent_state_versions WHERE session_id = ? AND through_run_id = ?",
        (session_id, run_id),
    ).fetchone()


def canonical_shapes_of(conn: StoreConn, session_id: str) -> dict[str, FileShape]:
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


def read_canonical(db: CheckpointStore, agent_id: str, agent_session_id: str) -> CanonicalShape | None:
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


def checkpointed_sessions(db: CheckpointStore, agent_id: str) -> frozenset[str]:
    """The agent session ids of ``agent_id`` that have a checkpoint head, in one query (advisory, read before
    a capture of many sessions): :func:`read_canonical` is None for every other one, so a capture asks it
    only for these."""
    with db.read() as conn:
        if not has_tables(conn):
            return frozenset()
        rows = conn.execute(
            "SELECT s.agent_session_id FROM agent_state_sessions s JOIN agent_state_publications p "
            "ON p.session_id = s.session_id WHERE s.agent_id = ? AND p.checkpoint_reset = FALSE",
            (agent_id,),
        ).fetchall()
    return frozenset(r[0] for r in rows if isinstance(r[0], str))
