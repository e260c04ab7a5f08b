"""The v43 layout of ``sessions.db``: creation, version detection and validation.

The layout itself is the reference DDL (``store/sql/``), executed verbatim so a database we create is exactly
what mothx creates. The typed SQLModel classes of the same tables live in :mod:`store.tables` (imported only
where they are used: SQLModel costs ~360 ms to import, and the first screen does not need it).
"""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass, field
from importlib import resources
from typing import Literal

from store.errors import SchemaIncompatible

CURRENT_VERSION = 43

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (16, "add_channel_binding_columns"),
    (17, "create_session_channel_tools"),
    (18, "create_session_runs"),
    (19, "create_response_runtime_tables"),
    (20, "harden_response_runtime_identity"),
    (21, "cleanup_orphan_channel_tools"),
    (22, "create_channel_tool_generations"),
    (23, "create_esm_guidance"),
    (24, "index_entries_session_type"),
    (25, "create_projects_and_session_metadata"),
    (26, "add_session_display_mode"),
    (27, "add_run_retry_metadata"),
    (28, "add_run_context_usage"),
    (29, "add_session_fork_and_runtime_lease_state"),
    (30, "create_session_attachments_and_deliveries"),
    (31, "create_session_run_recoveries"),
    (32, "create_input_resources"),
    (33, "create_runtime_submissions"),
    (34, "create_delivery_intents_and_operations"),
    (35, "create_input_resource_events"),
    (41, "add_sessions_expert_id"),
    (42, "create_desktop_knowledge_base_graph"),
    (43, "add_delivery_operations_retry_window_started_at"),
)
RESERVED_VERSIONS = range(36, 41)
RUN_ACTIVE_STATUSES = ("created", "queued", "running", "waiting_for_approval", "waiting_for_question", "cancelling", "terminalizing")

SchemaStatus = Literal["current", "older", "newer", "incompatible", "empty"]


def _sql(name: str) -> str:
    return resources.files("store").joinpath("sql", name).read_text(encoding="utf-8")


def creation_template() -> str:
    return _sql("sessions_v43_template.sql")


def migration_statements() -> str:
    return _sql("sessions_v43_migrations.sql")


@functools.lru_cache(maxsize=1)
def expected_layout() -> dict[str, tuple[str, ...]]:
    """Columns of every table of a fresh v43 database, read back from SQLite itself."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(creation_template())
        conn.executescript(migration_statements())
        return _read_layout(conn)
    finally:
        conn.close()


@functools.lru_cache(maxsize=1)
def expected_indexes() -> dict[str, str]:
    """Index name → normalised ``CREATE INDEX`` text of a fresh v43 database."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(creation_template())
        conn.executescript(migration_statements())
        return _read_indexes(conn)
    finally:
        conn.close()


def _read_layout(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    layout: dict[str, tuple[str, ...]] = {}
    for table in tables:
        cols = tuple(r[1] for r in conn.execute(f'PRAGMA table_info("{table}")'))
        layout[table] = cols
    return layout


def _read_indexes(conn: sqlite3.Connection) -> dict[str, str]:
    return {
        name: " ".join(sql.split())
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='index' AND sql IS NOT NULL ORDER BY name"
        )
    }


@dataclass(frozen=True)
class SchemaInfo:
    """What a database's layout is, and what Sessionscope may do with it."""

    status: SchemaStatus
    version: int | None
    recorded_versions: frozenset[int]
    columns: dict[str, tuple[str, ...]]
    missing_tables: tuple[str, ...] = ()
    missing_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    newer_versions: tuple[int, ...] = ()

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        if cols is None:
            return False
        return column is None or column in cols

    @property
    def writable(self) -> bool:
        """Only a complete v43 layout is written by Sessionscope; everything else is shown read-only."""
        return self.status == "current"

    @property
    def notice(self) -> str:
        """One line for the user; empty for a current layout."""
        if self.status == "current":
            return ""
        if self.status == "empty":
            return "The database has no tables yet."
        if self.status == "newer":
            found = max(self.newer_versions)
            return (
                f"Schema version {found} is newer than the {CURRENT_VERSION} this build knows; "
                "shown read-only and never migrated."
            )
        missing = len(self.missing_tables) + sum(len(c) for c in self.missing_columns.values())
        if self.status == "older":
            label = f"version {self.version}" if self.version is not None else "an unversioned layout"
            return (
                f"Schema {label} is older than {CURRENT_VERSION} ({missing} tables/columns missing); "
                "shown as far as it goes, read-only. Open it with mothx to migrate it."
            )
        return (
            f"Schema records version {self.version} but {missing} required tables/columns are missing; "
            "shown read-only."
        )


def inspect_schema(conn: sqlite3.Connection) -> SchemaInfo:
    """Detect the layout of an open ``sessions.db``. Never writes."""
    columns = _read_layout(conn)
    user_tables = [t for t in columns if t != "schema_migrations"]
    if not user_tables:
        return SchemaInfo(status="empty", version=None, recorded_versions=frozenset(), columns=columns)
    if "sessions" not in columns or "entries" not in columns:
        raise SchemaIncompatible(
            "This database has no sessions/entries tables: it is not a mothx session database."
        )
    recorded = _recorded_versions(conn, columns)
    known = {v for v, _ in MIGRATIONS}
    newer = tuple(sorted(v for v in recorded if v > CURRENT_VERSION))
    expected = expected_layout()
    missing_tables = tuple(sorted(t for t in expected if t not in columns))
    # A legacy schema_migrations (name + applied_at, no version) is read by name and upgraded by mothx itself:
    # its shape is bookkeeping, not a missing part of the layout.
    missing_columns = {
        t: tuple(c for c in cols if c not in columns[t])
        for t, cols in expected.items()
        if t in columns and t != "schema_migrations" and any(c not in columns[t] for c in cols)
    }
    version = max((v for v in recorded if v <= CURRENT_VERSION), default=None)
    if newer:
        status: SchemaStatus = "newer"
    elif not known.issubset(recorded):
        status = "older"
        applied = [v for v, _ in MIGRATIONS if v in recorded]
        # The version is the last migration of the unbroken applied prefix, else the highest recorded one.
        version = max(applied) if applied else version
    elif missing_tables or missing_columns:
        status = "incompatible"
    else:
        status = "current"
    return SchemaInfo(
        status=status,
        version=version,
        recorded_versions=frozenset(recorded),
        columns=columns,
        missing_tables=missing_tables,
        missing_columns=missing_columns,
        newer_versions=newer,
    )


def _recorded_versions(conn: sqlite3.Connection, columns: dict[str, tuple[str, ...]]) -> set[int]:
    cols = columns.get("schema_migrations")
    if not cols:
        return set()
    by_name = {name: v for v, name in MIGRATIONS}
    recorded: set[int] = set()
    if "version" in cols:
        for version, name in conn.execute("SELECT version, name FROM schema_migrations"):
            if isinstance(version, int):
                recorded.add(version)
            elif name in by_name:
                recorded.add(by_name[name])
    elif "name" in cols:
        for (name,) in conn.execute("SELECT name FROM schema_migrations"):
            if name in by_name:
                recorded.add(by_name[name])
    return recorded


def create_v43(conn: sqlite3.Connection) -> None:
    """Create the v43 layout in an empty database, inside the caller's write transaction.

    Executes the creation template, then the migration-only statements, then records every migration
    in ``schema_migrations`` exactly as mothx does.
    """
    count = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
        "AND name != 'schema_migrations'"
    ).fetchone()[0]
    if count:
        raise SchemaIncompatible("Refusing to create the v43 layout: the database already has tables.")
    for statement in _split_statements(creation_template()):
        conn.execute(statement)
    for statement in _split_statements(migration_statements()):
        conn.execute(statement)
    conn.executemany(
        "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, CURRENT_TIMESTAMP)",
        MIGRATIONS,
    )


def _split_statements(script: str) -> list[str]:
    """Split a DDL script into complete statements (``sqlite3.complete_statement`` decides the ends)."""
    statements: list[str] = []
    buf: list[str] = []
    for line in script.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buf.append(line)
        text = "\n".join(buf)
        if sqlite3.complete_statement(text):
            statements.append(text.strip())
            buf = []
    return statements
