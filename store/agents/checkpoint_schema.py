"""The checkpoint store's own schema: its version table, creating a new store and upgrading an older one, on
SQLite and on PostgreSQL alike. A mothx ``sessions.db`` is never opened here.

The layout is defined once, as SQLModel table classes (:mod:`store.agents.checkpoint_tables`). The layout
version is ``agent_state_meta.schema_version``; ``agent_state_migrations`` records each migration applied
(version, description, time). The versions:

1. the checkpoint layout: state headers, the shared line set, publication heads, runs, fencing tokens (on
   PostgreSQL from the sequence ``agent_state_fencing_token_seq`` so concurrent captures never queue on a
   counter row; text in byte order everywhere). ``store/sql/agentstate_v1.sql`` is that layout as the first
   release wrote it, kept for the upgrade tests only;
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

A new store is created at :data:`SCHEMA_VERSION` in one go from the whole metadata; a store of an earlier
version gets the parts each later version added (``LAYOUT_STEPS``, from the same classes), so the two paths
end in the same layout. Both happen in the first write-mode open, in one transaction of the store itself: on
SQLite the directory's own :class:`~store.mothx.db.Database` (``BEGIN IMMEDIATE`` with its busy handling), on
PostgreSQL a write transaction holding :data:`PG_SCHEMA_LOCK`. SQLAlchemy compiles the DDL (a mock engine:
:func:`~store.agents.checkpoint_tables.ddl`) and the store's connection runs it. SQLAlchemy is not handed that
connection as an engine (a ``creator`` returning it): its transaction handling would commit or roll back the
sqlite3 connection's ``BEGIN IMMEDIATE`` on its own, so the tables and their version rows would no longer be
written atomically, and a read mode's ``immutable`` / snapshot open would gain nothing from it.

A read mode never writes: it reads an older layout as it is. A version newer than :data:`SCHEMA_VERSION` is
refused. Reading the version at every open is one raw query. Creating a store runs the DDL compiled from the
classes and kept beside them, ``store/sql/agentstate_v<version>.<engine>.sql`` (:func:`frozen_ddl`; a test
keeps each file equal to what the classes compile to, and ``python -m store.agents.checkpoint_schema`` writes
them again): importing SQLModel costs more than half a second, more than reading a thousand transcripts, so
only upgrading a store, or :func:`migrations`, pays it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from store.agents.checkpoint_engine import DIALECT_POSTGRESQL, DIALECT_SQLITE, PgConnection, PgStore, has_table
from store.agents.checkpoint_model import PG_SEQUENCE, SCHEMA_VERSION, CheckpointDamaged, now_text
from store.errors import SchemaIncompatible
from store.mothx.db import Database

if TYPE_CHECKING:
    from store.agents.checkpoint_tables import AgentStateMigration

# An advisory lock key of the store's own (two PostgreSQL processes creating the schema at once queue on it).
PG_SCHEMA_LOCK = 0x5E55_10C0

DESCRIPTIONS = {
    1: "the checkpoint layout (versions, lines, publication heads, runs, fencing tokens)",
    2: "hosts of sessions and runs, the migrations table, the session log's compare-and-swap blobs",
    3: "the full-text index of captured records (PostgreSQL: tsvector per line, GIN; SQLite: its FTS5 side file)",
}


def schema_sql(dialect: str = DIALECT_SQLITE) -> str:
    """The script that creates a new, empty checkpoint store on ``dialect``, compiled from the table classes."""
    from store.agents.checkpoint_tables import ddl

    return "".join(f"{statement};\n\n" for statement in ddl(dialect))


def frozen_name(dialect: str) -> str:
    """The file of :func:`frozen_ddl` in ``store/sql``: ``agentstate_v3.sqlite.sql``."""
    return f"agentstate_v{SCHEMA_VERSION}.{dialect}.sql"


def frozen_ddl(dialect: str) -> list[str]:
    """The statements that create a new store on ``dialect``, as :func:`~store.agents.checkpoint_tables.ddl`
    compiles them, read from the file :func:`write_frozen_ddl` made (no SQLModel import)."""
    text = resources.files("store").joinpath("sql", frozen_name(dialect)).read_text(encoding="utf-8")
    body = text.split("\n", 1)[1] if text.startswith("--") else text  # the generated-file notice
    return [part for part in body.split(";\n\n") if part.strip()]


def write_frozen_ddl(folder: Path | None = None) -> list[Path]:
    """(Re)write the :func:`frozen_ddl` files of both engines from the table classes."""
    where = folder or Path(__file__).resolve().parents[1] / "sql"
    out = []
    for dialect in (DIALECT_SQLITE, DIALECT_POSTGRESQL):
        path = where / frozen_name(dialect)
        notice = "-- Generated by python -m store.agents.checkpoint_schema from store/agents/checkpoint_tables.py.\n"
        path.write_text(notice + schema_sql(dialect), encoding="utf-8")
        out.append(path)
    return out


def stored_version(conn: Any) -> int | None:
    """The layout version stored in the open store (None: no checkpoint tables; -1: unreadable)."""
    if not has_table(conn, "agent_state_meta"):
        return None
    row = conn.execute("SELECT value FROM agent_state_meta WHERE name = 'schema_version'").fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else -1


_RECORD = ("INSERT INTO agent_state_migrations (version, description, applied_at) VALUES (?, ?, ?) "
           "ON CONFLICT (version) DO NOTHING")
_SET_VERSION = "UPDATE agent_state_meta SET value = ? WHERE name = 'schema_version'"


def _create(conn: Any, dialect: str) -> None:
    """A new store at :data:`SCHEMA_VERSION` (``IF NOT EXISTS`` throughout: tables made by an earlier,
    unrecorded attempt are kept), with its counter row, version and the migrations it stands for."""
    for statement in frozen_ddl(dialect):
        conn.execute(statement)
    conn.execute("INSERT INTO agent_state_counters (name, value) VALUES ('runtime_fencing_token', 0) "
                 "ON CONFLICT (name) DO NOTHING")
    conn.execute("INSERT INTO agent_state_meta (name, value) VALUES ('schema_version', ?) "
                 "ON CONFLICT (name) DO NOTHING", (str(SCHEMA_VERSION),))
    conn.execute(_SET_VERSION, (str(SCHEMA_VERSION),))
    now = now_text()
    conn.executemany(_RECORD, [(v, DESCRIPTIONS[v], now) for v in range(1, SCHEMA_VERSION + 1)])
    if dialect == DIALECT_POSTGRESQL:
        # The sequence continues a counter row copied from elsewhere (never below a token already handed out).
        conn.execute(
            f"SELECT setval('{PG_SEQUENCE}', greatest(1, (SELECT value FROM agent_state_counters "
            "WHERE name = 'runtime_fencing_token')), (SELECT value FROM agent_state_counters "
            "WHERE name = 'runtime_fencing_token') > 0)"
        )


def upgrade(conn: Any, current: int, dialect: str, target: int = SCHEMA_VERSION) -> None:
    """Bring a store at layout version ``current`` (1 or more) to ``target`` inside the caller's write
    transaction: each later version's parts (:data:`~store.agents.checkpoint_tables.LAYOUT_STEPS`), its
    migration row and the version."""
    from store.agents.checkpoint_tables import step_ddl

    now = now_text()
    for version in range(current + 1, target + 1):
        for statement in step_ddl(version, dialect):
            conn.execute(statement)
        if version == 2:  # the table is new: record the migration that made the layout it extends
            conn.execute(_RECORD, (1, DESCRIPTIONS[1], now))
        conn.execute(_RECORD, (version, DESCRIPTIONS[version], now))
        conn.execute(_SET_VERSION, (str(version),))


def _migrate(conn: Any, current: int | None, dialect: str) -> None:
    if current is None or current < 1:
        _create(conn, dialect)
    else:
        upgrade(conn, current, dialect)


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
            _migrate(conn, version, DIALECT_SQLITE)
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
            _migrate(conn, version, DIALECT_POSTGRESQL)
    return SCHEMA_VERSION


def migrations(conn: Any) -> list[AgentStateMigration]:
    """The recorded migrations of an open store, oldest first (empty before version 2, which made the table).
    :class:`CheckpointDamaged` when a row does not hold what the table's model says."""
    from store.agents.checkpoint_tables import AgentStateMigration, select_models

    if not has_table(conn, "agent_state_migrations"):
        return []
    return select_models(conn, AgentStateMigration, dialect_name(conn),
                         problem=CheckpointDamaged("The store's migrations table cannot be read."))


def dialect_name(conn: object) -> str:
    return DIALECT_POSTGRESQL if isinstance(conn, PgConnection) else DIALECT_SQLITE


def is_pg(conn: object) -> bool:
    return isinstance(conn, PgConnection)


__all__ = ["DESCRIPTIONS", "PG_SCHEMA_LOCK", "PG_SEQUENCE", "ensure_pg", "ensure_sqlite", "frozen_ddl", "is_pg",
           "migrations", "schema_sql", "stored_version", "upgrade", "write_frozen_ddl"]


if __name__ == "__main__":
    for written in write_frozen_ddl():
        print(written)
