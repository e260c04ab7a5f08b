"""The checkpoint store's own schema: its version table and the migrations that create and upgrade it, on
SQLite and on PostgreSQL alike. A mothx ``sessions.db`` is never opened here.

The layout version is ``agent_state_meta.schema_version``; ``agent_state_migrations`` records each migration
applied (version, description, time). The migrations:

1. the layout of ``store/sql/agentstate_v1.sql`` (today's file). On PostgreSQL every text column is
   ``COLLATE "C"`` (byte order, as SQLite's BINARY compares), ``BLOB`` is ``BYTEA``, and the fencing tokens
   come from the sequence ``agent_state_fencing_token_seq`` (the reference's
   ``session_runtime_fencing_token_seq``) so concurrent captures never queue on a counter row;
2. hosts and the session log: each session records the host that last captured it
   (``agent_state_session_hosts``) and each run the host that made it (``agent_state_run_hosts``; tables of
   their own, so the version-1 tables keep their columns); the version table; ``agent_state_blobs``, the
   compare-and-swap blobs of the session log (:class:`~store.agents.sessionlog_sql.SqlBlobStore`);
3. the full-text index of captured records on PostgreSQL (:mod:`store.search.pg_index`): each line
   records the transaction that wrote it (``agent_state_lines.search_xid``, a column default, so every writer
   fills it without knowing; a BRIN index, nearly free to keep while capturing), and
   ``agent_state_search`` holds one ``tsvector`` per line with text (a GIN index), removed with its line
   (``ON DELETE CASCADE``). On SQLite nothing changes: its index is the FTS5 side file in the cache folder
   (:mod:`store.search.index`); the migration is recorded only.

A file or database at version 1 is upgraded in place by the first write-mode open (one transaction); a read
mode never writes and reads version 1 as it is. A version newer than :data:`SCHEMA_VERSION` is refused.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from store.agents.checkpoint_engine import PgConnection, PgStore, has_table
from store.agents.checkpoint_model import SCHEMA_VERSION, now_text
from store.errors import SchemaIncompatible
from store.mothx.db import Database
from store.mothx.schema import split_statements

PG_SEQUENCE = "agent_state_fencing_token_seq"
# An advisory lock key of the store's own (two PostgreSQL processes creating the schema at once queue on it).
PG_SCHEMA_LOCK = 0x5E55_10C0


def schema_sql() -> str:
    """The checkpoint layout, version 1 (``store/sql/agentstate_v1.sql``)."""
    return resources.files("store").joinpath("sql", "agentstate_v1.sql").read_text(encoding="utf-8")


_TEXT_COLUMN = re.compile(r"^(\s+\w+\s+)TEXT\b", re.M)
_BLOB_COLUMN = re.compile(r"^(\s+\w+\s+)BLOB\b", re.M)


def pg_statement(statement: str) -> str:
    """One statement of the shared DDL as PostgreSQL runs it: text columns in byte order, blobs as bytea."""
    statement = _TEXT_COLUMN.sub(r'\1TEXT COLLATE "C"', statement)
    return _BLOB_COLUMN.sub(r"\1BYTEA", statement)


MIGRATION_2 = (
    """CREATE TABLE IF NOT EXISTS agent_state_session_hosts (
    session_id TEXT NOT NULL PRIMARY KEY,
    host       TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CONSTRAINT agent_state_session_hosts_session_fkey
        FOREIGN KEY (session_id) REFERENCES agent_state_sessions (session_id) ON DELETE CASCADE
)""",
    """CREATE TABLE IF NOT EXISTS agent_state_run_hosts (
    session_id TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    host       TEXT NOT NULL,
    PRIMARY KEY (session_id, run_id),
    CONSTRAINT agent_state_run_hosts_run_fkey
        FOREIGN KEY (session_id, run_id) REFERENCES agent_state_runs (session_id, run_id) ON DELETE CASCADE
)""",
    """CREATE TABLE IF NOT EXISTS agent_state_migrations (
    version     INTEGER NOT NULL PRIMARY KEY,
    description TEXT    NOT NULL,
    applied_at  TEXT    NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS agent_state_blobs (
    blob_key   TEXT   NOT NULL PRIMARY KEY,
    value      BLOB   NOT NULL,
    revision   BIGINT NOT NULL CHECK (revision > 0),
    updated_at TEXT   NOT NULL
)""",
)
MIGRATION_3_PG = (
    "ALTER TABLE agent_state_lines ADD COLUMN IF NOT EXISTS search_xid BIGINT",
    "ALTER TABLE agent_state_lines ALTER COLUMN search_xid SET DEFAULT txid_current()",
    "CREATE INDEX IF NOT EXISTS agent_state_lines_search_xid_idx ON agent_state_lines USING BRIN (search_xid)",
    """CREATE TABLE IF NOT EXISTS agent_state_search (
    session_id  TEXT COLLATE "C" NOT NULL,
    file_path   TEXT COLLATE "C" NOT NULL,
    line_number BIGINT   NOT NULL,
    line_xid    BIGINT,
    words       TSVECTOR NOT NULL,
    PRIMARY KEY (session_id, file_path, line_number),
    CONSTRAINT agent_state_search_line_fkey
        FOREIGN KEY (session_id, file_path, line_number)
        REFERENCES agent_state_lines (session_id, file_path, line_number) ON DELETE CASCADE
)""",
    "CREATE INDEX IF NOT EXISTS agent_state_search_words_idx ON agent_state_search USING GIN (words)",
)
"""Migration 3 on PostgreSQL (no table rewrite: the new column has no stored default for existing rows, whose
``search_xid`` stays NULL; the first indexing reads every line)."""
DESCRIPTIONS = {
    1: "the checkpoint layout (versions, lines, publication heads, runs, fencing tokens)",
    2: "hosts of sessions and runs, the migrations table, the session log's compare-and-swap blobs",
    3: "the full-text index of captured records (PostgreSQL: tsvector per line, GIN; SQLite: its FTS5 side file)",
}


def _statements(version: int, pg: bool) -> list[str]:
    if version == 1:
        out = [pg_statement(s) if pg else s for s in split_statements(schema_sql())]
        if pg:
            out.append(f"CREATE SEQUENCE IF NOT EXISTS {PG_SEQUENCE} MINVALUE 1")
        return out
    if version == 2:
        return [pg_statement(s) if pg else s for s in MIGRATION_2]
    if version == 3:
        return list(MIGRATION_3_PG) if pg else []
    raise ValueError(version)


def stored_version(conn: Any) -> int | None:
    """The layout version stored in the open store (None: no checkpoint tables; -1: unreadable)."""
    if not has_table(conn, "agent_state_meta"):
        return None
    row = conn.execute("SELECT value FROM agent_state_meta WHERE name = 'schema_version'").fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else -1


def _migrate(conn: Any, current: int | None, pg: bool) -> None:
    start = 0 if current is None else current
    now = now_text()
    for version in range(start + 1, SCHEMA_VERSION + 1):
        for statement in _statements(version, pg):
            conn.execute(statement)
        if version >= 2:
            if version == 2:  # the table is new: record the migrations that made the layout it extends
                for earlier in range(1, 2):
                    conn.execute(
                        "INSERT INTO agent_state_migrations (version, description, applied_at) VALUES (?, ?, ?) "
                        "ON CONFLICT (version) DO NOTHING",
                        (earlier, DESCRIPTIONS[earlier], now),
                    )
            conn.execute(
                "INSERT INTO agent_state_migrations (version, description, applied_at) VALUES (?, ?, ?) "
                "ON CONFLICT (version) DO NOTHING",
                (version, DESCRIPTIONS[version], now),
            )
        conn.execute("UPDATE agent_state_meta SET value = ? WHERE name = 'schema_version'", (str(version),))
    if pg and start == 0:
        # The sequence continues a counter row copied from elsewhere (never below a token already handed out).
        conn.execute(
            f"SELECT setval('{PG_SEQUENCE}', greatest(1, (SELECT value FROM agent_state_counters "
            "WHERE name = 'runtime_fencing_token')), (SELECT value FROM agent_state_counters "
            "WHERE name = 'runtime_fencing_token') > 0)"
        )


def _incompatible(where: object, version: int) -> SchemaIncompatible:
    if version < 0:
        return SchemaIncompatible(f"{where} has no readable checkpoint layout version.")
    return SchemaIncompatible(
        f"{where} has checkpoint layout version {version}; this Sessionscope reads up to {SCHEMA_VERSION}."
    )


def ensure_sqlite(db: Database) -> int | None:
    """Bring a checkpoint file to :data:`SCHEMA_VERSION` (create or upgrade in place) unless it is open in a
    read mode; returns the version it is then at (None: no tables, in a read mode)."""
    with db.read() as conn:
        version = stored_version(conn)
    if version is not None and (version > SCHEMA_VERSION or version < 0):
        if version > SCHEMA_VERSION or db.mode.is_read:
            raise _incompatible(db.path, version)
    if version == SCHEMA_VERSION or db.mode.is_read:
        return version
    with db.write() as conn:
        version = stored_version(conn)  # again, under the write lock
        if version is not None and version > SCHEMA_VERSION:
            raise _incompatible(db.path, version)
        if version != SCHEMA_VERSION:
            _migrate(conn, None if version is None or version < 1 else version, pg=False)
    return SCHEMA_VERSION


def ensure_pg(store: PgStore) -> int | None:
    """The same for a PostgreSQL store; concurrent first opens queue on an advisory lock."""
    with store.read() as conn:
        version = stored_version(conn)
    if version is not None and (version > SCHEMA_VERSION or version < 0):
        raise _incompatible(store.path, version)
    if version == SCHEMA_VERSION or store.mode.is_read:
        return version
    with store.write() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (PG_SCHEMA_LOCK,))
        version = stored_version(conn)
        if version is not None and (version > SCHEMA_VERSION or version < 0):
            raise _incompatible(store.path, version)
        if version != SCHEMA_VERSION:
            _migrate(conn, version, pg=True)
    return SCHEMA_VERSION


def migrations(conn: Any) -> list[tuple[int, str, str]]:
    """The recorded migrations ``(version, description, applied_at)`` of an open store, oldest first."""
    if not has_table(conn, "agent_state_migrations"):
        return []
    return [(int(v), str(d), str(t)) for v, d, t in conn.execute(
        "SELECT version, description, applied_at FROM agent_state_migrations ORDER BY version")]


def is_pg(conn: object) -> bool:
    return isinstance(conn, PgConnection)
