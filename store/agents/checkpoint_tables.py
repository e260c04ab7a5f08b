"""The checkpoint store's tables as SQLModel classes: the one definition of the current layout
(:data:`~store.agents.checkpoint_model.SCHEMA_VERSION`) on SQLite and on PostgreSQL.

Every column is written out as a SQLAlchemy ``Column`` (type, nullability, server default, inline CHECK), every
key, named constraint and index is in the table's ``__table_args__``, so the DDL SQLAlchemy compiles from
:data:`METADATA` is the layout the first releases created by hand, statement for statement. What differs by
engine is said here, not rewritten afterwards:

* text columns are :data:`TEXT`: ``TEXT`` on SQLite (byte order: BINARY), ``TEXT COLLATE "C"`` on PostgreSQL
  (``with_variant``), so lists come out in the same order on both;
* blobs are ``LargeBinary`` (``BLOB`` / ``BYTEA``);
* the fencing token sequence :data:`FENCING_SEQUENCE` exists on PostgreSQL only (SQLite has no sequences and
  draws tokens from the ``agent_state_counters`` row);
* the full-text parts exist on PostgreSQL only: ``agent_state_lines.search_xid`` (the writing transaction, a
  column default, a BRIN index: ``postgresql_using``) and the table ``agent_state_search`` (a ``tsvector`` per
  line, a GIN index). They carry ``info={"dialects": ("postgresql",)}``; :func:`ddl` leaves them out on SQLite
  (its index is the FTS5 side file in the cache folder), where the column's ``CREATE TABLE`` entry is dropped
  by the :func:`_create_column` hook.

The models are typed (``AgentStateMigration.version`` is an ``int``) and are what the small metadata reads return
(:func:`store.agents.checkpoint_schema.migrations`). The hot paths — capture writes, loads and keyset pages —
stay raw SQL on the store's DB-API connection (SQLAlchemy's own advice for bulk work; an ORM unit of work per
record would cost more than the write itself), and the version read at every open stays raw SQL too: this
module imports SQLModel (about a quarter of a second), which only creating or upgrading a store, or listing its
migrations, pays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Sequence,
    Text,
    UniqueConstraint,
    create_mock_engine,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import registry
from sqlalchemy.schema import CreateColumn, CreateIndex, ExecutableDDLElement, SchemaItem, Table
from sqlalchemy.sql.compiler import DDLCompiler
from sqlmodel import Field, SQLModel

from store.agents.checkpoint_model import PG_SEQUENCE

DIALECT_SQLITE = "sqlite"
DIALECT_POSTGRESQL = "postgresql"
PG_ONLY = {"dialects": (DIALECT_POSTGRESQL,)}
"""The ``info`` of a column, index or table that exists on PostgreSQL only."""

TEXT = Text().with_variant(Text(collation="C"), DIALECT_POSTGRESQL)
"""A text column: byte order on both engines (SQLite's BINARY, PostgreSQL's ``COLLATE "C"``)."""


class CheckpointTable(SQLModel, registry=registry()):
    """The base of the checkpoint tables: their own registry and :data:`METADATA` (nothing else in it)."""


METADATA: MetaData = CheckpointTable.metadata

FENCING_SEQUENCE = Sequence(PG_SEQUENCE, minvalue=1, metadata=METADATA)
"""The reference's ``session_runtime_fencing_token_seq`` (PostgreSQL only: concurrent captures never queue on a
counter row)."""


def _col(type_: Any, *args: Any, nullable: bool = False, default: str | None = None, **kw: Any) -> Any:
    """A model field backed by one explicit column (``default`` is the server default, as SQL text)."""
    server_default = text(default) if default is not None else None
    return Field(sa_column=Column(type_, *args, nullable=nullable, server_default=server_default, **kw))


def _non_negative(column: str) -> CheckConstraint:
    return CheckConstraint(f"{column} >= 0")


def _cascade(column: str) -> ForeignKey:
    return ForeignKey(column, ondelete="CASCADE")


def _text_id_check(column: str, table: str, limit: int) -> CheckConstraint:
    return CheckConstraint(f"trim({column}) <> '' AND length({column}) <= {limit}", name=f"{table}_{column}_check")


def _relative_jsonl_check(column: str, table: str) -> CheckConstraint:
    """A relative ``.jsonl`` path with no backslash (the reference's file path rule)."""
    return CheckConstraint(
        f"{column} <> '' AND length({column}) <= 4096 AND substr({column}, 1, 1) <> '/' "
        f"AND substr({column}, length({column}) - 5, 6) = '.jsonl' AND replace({column}, '\\', '') = {column}",
        name=f"{table}_{column}_check",
    )


def _session_fkey(table: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["session_id"], ["agent_state_sessions.session_id"], ondelete="CASCADE",
                                name=f"{table}_session_fkey")


def _run_fkey(table: str, column: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["session_id", column], ["agent_state_runs.session_id", "agent_state_runs.run_id"],
                                ondelete="CASCADE", name=f"{table}_run_fkey")


# ------------------------------------------------------------------------------------ layout version 1


class AgentStateMeta(CheckpointTable, table=True):
    """Named values of the store itself; ``schema_version`` is the layout version."""

    __tablename__ = "agent_state_meta"
    name: str = _col(TEXT, primary_key=True)
    value: str = _col(TEXT)


class AgentStateCounter(CheckpointTable, table=True):
    """Counters; ``runtime_fencing_token`` hands out the fencing tokens on SQLite."""

    __tablename__ = "agent_state_counters"
    name: str = _col(TEXT, primary_key=True)
    value: int = _col(BigInteger, _non_negative("value"))


class AgentStateAgent(CheckpointTable, table=True):
    """An agent (the reference's bots): the runtime configuration guard."""

    __tablename__ = "agent_state_agents"
    __table_args__ = (
        _text_id_check("agent_id", "agent_state_agents", 256),
        CheckConstraint("(runtime_reset_token IS NULL) = (runtime_reset_expires_at IS NULL)",
                        name="agent_state_agents_reset_pair_check"),
    )
    agent_id: str = _col(TEXT, primary_key=True)
    runtime_config_epoch: int = _col(BigInteger, _non_negative("runtime_config_epoch"), default="0")
    runtime_reset_token: str | None = _col(TEXT, nullable=True)
    runtime_reset_expires_at: str | None = _col(TEXT, nullable=True)
    created_at: str = _col(TEXT)


class AgentStateSession(CheckpointTable, table=True):
    """One agent session (the reference's bot_sessions), carrying the runtime fencing token."""

    __tablename__ = "agent_state_sessions"
    __table_args__ = (
        UniqueConstraint("agent_id", "agent_session_id", name="agent_state_sessions_agent_session_key"),
        _text_id_check("agent_session_id", "agent_state_sessions", 1024),
    )
    session_id: str = _col(TEXT, primary_key=True)
    agent_id: str = _col(TEXT, _cascade("agent_state_agents.agent_id"))
    agent_session_id: str = _col(TEXT)
    source_root: str = _col(TEXT, default="''")
    runtime_fencing_token: int = _col(BigInteger, _non_negative("runtime_fencing_token"), default="0")
    runtime_config_epoch: int = _col(BigInteger, _non_negative("runtime_config_epoch"), default="0")
    created_at: str = _col(TEXT)
    updated_at: str = _col(TEXT)


class AgentStateRun(CheckpointTable, table=True):
    """A fenced run of a session (a capture), which stages at most one version."""

    __tablename__ = "agent_state_runs"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'waiting_decision', 'completed', 'failed')",
                        name="agent_state_runs_status_check"),
        Index("agent_state_runs_status_idx", "session_id", "status"),
    )
    session_id: str = _col(TEXT, _cascade("agent_state_sessions.session_id"), primary_key=True)
    run_id: str = _col(TEXT, primary_key=True)
    fencing_token: int = _col(BigInteger, CheckConstraint("fencing_token > 0"))
    status: str = _col(TEXT)
    created_at: str = _col(TEXT)
    finished_at: str | None = _col(TEXT, nullable=True)


class AgentStateVersion(CheckpointTable, table=True):
    """A state header (version): one staged checkpoint per run it is valid through; ``file_shapes`` is its
    membership in the session's line set."""

    __tablename__ = "agent_state_versions"
    __table_args__ = (
        _session_fkey("agent_state_versions"),
        _run_fkey("agent_state_versions", "through_run_id"),
        _text_id_check("agent_id", "agent_state_versions", 256),
        _text_id_check("agent_session_id", "agent_state_versions", 1024),
        _text_id_check("cwd", "agent_state_versions", 16384),
        _relative_jsonl_check("transcript_path", "agent_state_versions"),
        CheckConstraint("runtime_fencing_token > 0", name="agent_state_versions_runtime_fencing_token_check"),
        CheckConstraint("file_count > 0 AND file_count <= 1024", name="agent_state_versions_file_count_check"),
        CheckConstraint("record_count > 0 AND record_count <= 2000000 AND file_count <= record_count",
                        name="agent_state_versions_record_count_check"),
        CheckConstraint("substr(file_shapes, 1, 1) = '['", name="agent_state_versions_file_shapes_check"),
    )
    session_id: str = _col(TEXT, primary_key=True)
    through_run_id: str = _col(TEXT, primary_key=True)
    agent_id: str = _col(TEXT)
    agent_session_id: str = _col(TEXT)
    cwd: str = _col(TEXT)
    transcript_path: str = _col(TEXT)
    runtime_fencing_token: int = _col(BigInteger)
    file_count: int = _col(Integer)
    record_count: int = _col(BigInteger)
    file_shapes: str = _col(TEXT, default="'[]'")
    created_at: str = _col(TEXT)
    updated_at: str = _col(TEXT)


class AgentStateLine(CheckpointTable, table=True):
    """The shared line set of a session. ``content`` is the verbatim compacted record (text, never a JSON type:
    digests need byte fidelity). ``search_xid`` (PostgreSQL only) is the transaction that wrote the line."""

    __tablename__ = "agent_state_lines"
    __table_args__ = (
        _session_fkey("agent_state_lines"),
        _relative_jsonl_check("file_path", "agent_state_lines"),
        CheckConstraint("content_bytes > 0 AND content_bytes <= 8388608", name="agent_state_lines_content_size_check"),
        CheckConstraint("line_number > 0", name="agent_state_lines_line_number_check"),
        Index("agent_state_lines_search_xid_idx", "search_xid", postgresql_using="brin", info=PG_ONLY),
    )
    session_id: str = _col(TEXT, primary_key=True)
    file_path: str = _col(TEXT, primary_key=True)
    line_number: int = _col(BigInteger, primary_key=True, autoincrement=False)
    content: str = _col(TEXT)
    content_bytes: int = _col(Integer)
    search_xid: int | None = _col(BigInteger, nullable=True, default="txid_current()", info=PG_ONLY)


class AgentStatePublication(CheckpointTable, table=True):
    """The publication head: at most one per session; ``checkpoint_reset`` marks a reset head."""

    __tablename__ = "agent_state_publications"
    __table_args__ = (
        _session_fkey("agent_state_publications"),
        _run_fkey("agent_state_publications", "run_id"),
    )
    session_id: str = _col(TEXT, primary_key=True)
    run_id: str = _col(TEXT)
    checkpoint_reset: bool = _col(Boolean, default="FALSE")
    updated_at: str = _col(TEXT)


class AgentStateFileMark(CheckpointTable, table=True):
    """The restored JSONL bytes of each file of a version: a capture hint (the prefix proof is still the digest)."""

    __tablename__ = "agent_state_file_marks"
    __table_args__ = (
        ForeignKeyConstraint(["session_id", "through_run_id"],
                             ["agent_state_versions.session_id", "agent_state_versions.through_run_id"],
                             ondelete="CASCADE", name="agent_state_file_marks_version_fkey"),
    )
    session_id: str = _col(TEXT, primary_key=True)
    through_run_id: str = _col(TEXT, primary_key=True)
    file_path: str = _col(TEXT, primary_key=True)
    restored_bytes: int = _col(BigInteger, CheckConstraint("restored_bytes > 0"))


# ------------------------------------------------------------------------------------ layout version 2


class AgentStateSessionHost(CheckpointTable, table=True):
    """The host that last captured a session."""

    __tablename__ = "agent_state_session_hosts"
    __table_args__ = (_session_fkey("agent_state_session_hosts"),)
    session_id: str = _col(TEXT, primary_key=True)
    host: str = _col(TEXT)
    updated_at: str = _col(TEXT)


class AgentStateRunHost(CheckpointTable, table=True):
    """The host that made a run."""

    __tablename__ = "agent_state_run_hosts"
    __table_args__ = (_run_fkey("agent_state_run_hosts", "run_id"),)
    session_id: str = _col(TEXT, primary_key=True)
    run_id: str = _col(TEXT, primary_key=True)
    host: str = _col(TEXT)


class AgentStateMigration(CheckpointTable, table=True):
    """One migration applied to the store (the version table)."""

    __tablename__ = "agent_state_migrations"
    version: int = _col(Integer, primary_key=True, autoincrement=False)
    description: str = _col(TEXT)
    applied_at: str = _col(TEXT)


class AgentStateBlob(CheckpointTable, table=True):
    """A compare-and-swap blob of the session log (:class:`~store.agents.sessionlog_sql.SqlBlobStore`)."""

    __tablename__ = "agent_state_blobs"
    blob_key: str = _col(TEXT, primary_key=True)
    value: bytes = _col(LargeBinary)
    revision: int = _col(BigInteger, CheckConstraint("revision > 0"))
    updated_at: str = _col(TEXT)


# ------------------------------------------------------------------------------------ layout version 3


class AgentStateSearch(CheckpointTable, table=True):
    """PostgreSQL only: the words of one captured line with text (:mod:`store.search.pg_index`), removed with
    its line."""

    __tablename__ = "agent_state_search"
    __table_args__ = (
        ForeignKeyConstraint(["session_id", "file_path", "line_number"],
                             ["agent_state_lines.session_id", "agent_state_lines.file_path",
                              "agent_state_lines.line_number"],
                             ondelete="CASCADE", name="agent_state_search_line_fkey"),
        Index("agent_state_search_words_idx", "words", postgresql_using="gin"),
        {"info": PG_ONLY},
    )
    session_id: str = _col(TEXT, primary_key=True)
    file_path: str = _col(TEXT, primary_key=True)
    line_number: int = _col(BigInteger, primary_key=True, autoincrement=False)
    line_xid: int | None = _col(BigInteger, nullable=True)
    words: str = _col(TSVECTOR)


@dataclass(frozen=True)
class LayoutStep:
    """What one layout version added to the one before: tables, columns of existing tables, indexes."""

    tables: tuple[type[CheckpointTable], ...] = ()
    columns: tuple[tuple[type[CheckpointTable], str], ...] = ()
    indexes: tuple[str, ...] = ()


LAYOUT_STEPS: dict[int, LayoutStep] = {
    2: LayoutStep(tables=(AgentStateSessionHost, AgentStateRunHost, AgentStateMigration, AgentStateBlob)),
    3: LayoutStep(tables=(AgentStateSearch,), columns=((AgentStateLine, "search_xid"),),
                  indexes=("agent_state_lines_search_xid_idx",)),
}
"""What migrations 2 and 3 add (version 1 is every other part of :data:`METADATA`). A migration creates
exactly these parts from the classes above, so an upgraded store and a new one cannot differ
(``tests/store/test_checkpoint_tables.py`` compares the two on both engines)."""


def table_of(model: type[CheckpointTable]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


def exists_on(item: SchemaItem, dialect: str) -> bool:
    """Whether a table, column or index of :data:`METADATA` exists on the engine ``dialect``."""
    dialects = item.info.get("dialects") if hasattr(item, "info") else None
    if dialects is not None and dialect not in dialects:
        return False
    table = getattr(item, "table", None)
    return table is None or table is item or exists_on(table, dialect)


@compiles(CreateColumn, DIALECT_SQLITE)
def _create_column(element: CreateColumn, compiler: DDLCompiler, **kw: Any) -> str | None:
    """A column that does not exist on SQLite is left out of its ``CREATE TABLE`` (SQLAlchemy skips a column
    whose entry compiles to None)."""
    if not exists_on(element.element, DIALECT_SQLITE):
        return None
    return compiler.visit_create_column(element, **kw)


def _mock(dialect: str, executor: Any = None) -> Any:
    """A SQLAlchemy mock engine of ``dialect``: it compiles, ``executor`` receives each DDL element."""
    url = "sqlite://" if dialect == DIALECT_SQLITE else "postgresql+psycopg://"
    return create_mock_engine(url, executor or (lambda *_a, **_k: None))


def ddl(dialect: str, models: tuple[type[CheckpointTable], ...] | None = None) -> list[str]:
    """The ``CREATE … IF NOT EXISTS`` statements, in dependency order, that create ``models`` (default: the
    whole layout, with the sequence on PostgreSQL) on the engine ``dialect``, compiled by SQLAlchemy from
    :data:`METADATA`. Parts that do not exist on that engine are left out."""
    out: list[str] = []

    def collect(element: ExecutableDDLElement, *_: object, **__: object) -> None:
        target = getattr(element, "element", None)
        if isinstance(target, SchemaItem) and not exists_on(target, dialect):
            return
        if models is not None and isinstance(target, Sequence):
            return  # the sequence is part of the whole layout (version 1), never of a later migration
        if hasattr(element, "if_not_exists"):
            element.if_not_exists = True
        out.append(str(element.compile(dialect=engine.dialect)).strip())

    engine = _mock(dialect, collect)
    tables = None if models is None else [table_of(m) for m in models]
    METADATA.create_all(engine, tables=tables, checkfirst=False)
    return out


M = TypeVar("M", bound=CheckpointTable)
_SELECTS: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}


def select_models(conn: Any, model: type[M], dialect: str, *, problem: Exception) -> list[M]:
    """Every row of ``model``'s table in key order, as validated models, read with one query on the store's
    own DB-API connection ``conn`` (a small table: the version table). The SQL is compiled once per engine.
    ``problem`` is raised when a stored value does not fit the model (a row written by someone else)."""
    table = table_of(model)
    cached = _SELECTS.get((table.name, dialect))
    if cached is None:
        columns = [c for c in table.c if exists_on(c, dialect)]
        statement = select(*columns).order_by(*table.primary_key.columns)
        cached = (str(statement.compile(dialect=_mock(dialect).dialect)), tuple(c.name for c in columns))
        _SELECTS[(table.name, dialect)] = cached
    sql, names = cached
    try:
        return [model.model_validate(dict(zip(names, row, strict=True))) for row in conn.execute(sql)]
    except (ValidationError, ValueError) as exc:
        raise problem from exc


def step_ddl(version: int, dialect: str) -> list[str]:
    """The statements of migration ``version`` on the engine ``dialect``: each added column as ``ALTER TABLE
    … ADD COLUMN IF NOT EXISTS`` and, apart, its default (a volatile default given with the column would
    rewrite every existing row with it; set apart it applies to new rows only, old ones stay NULL), then the
    added indexes and tables. Parts that do not exist on that engine are left out."""
    step = LAYOUT_STEPS[version]
    engine = _mock(dialect)
    out: list[str] = []
    for model, name in step.columns:
        column = table_of(model).c[name]
        if not exists_on(column, dialect):
            continue
        table = table_of(model).name
        guard = " IF NOT EXISTS" if dialect == DIALECT_POSTGRESQL else ""  # SQLite's ADD COLUMN has no guard
        out.append(f"ALTER TABLE {table} ADD COLUMN{guard} {name} {column.type.compile(dialect=engine.dialect)}")
        if column.server_default is not None:
            default = getattr(column.server_default, "arg", None)
            out.append(f"ALTER TABLE {table} ALTER COLUMN {name} SET DEFAULT {default}")
    for index in (i for t in METADATA.tables.values() for i in t.indexes if i.name in step.indexes):
        if exists_on(index, dialect):
            out.append(str(CreateIndex(index, if_not_exists=True).compile(dialect=engine.dialect)).strip())
    return (out + ddl(dialect, step.tables)) if step.tables else out


__all__ = [
    "AgentStateAgent",
    "AgentStateBlob",
    "AgentStateCounter",
    "AgentStateFileMark",
    "AgentStateLine",
    "AgentStateMeta",
    "AgentStateMigration",
    "AgentStatePublication",
    "AgentStateRun",
    "AgentStateRunHost",
    "AgentStateSearch",
    "AgentStateSession",
    "AgentStateSessionHost",
    "AgentStateVersion",
    "CheckpointTable",
    "FENCING_SEQUENCE",
    "LAYOUT_STEPS",
    "METADATA",
    "TEXT",
    "LayoutStep",
    "ddl",
    "select_models",
    "exists_on",
    "step_ddl",
    "table_of",
]
