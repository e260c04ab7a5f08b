"""Opening the knowledge bases of a session directory (``knowledge-bases/<kbID>.db``, reference 15.1).

Every base opens in the session directory's own mode through :func:`store.mothx.db.open_database` (foreign
keys ON): a read mode writes not a byte and creates no file. Store versions 1-4 are read as they stand: a column
a version lacks takes its default (the row readers below ask SQLite which columns exist). A store is migrated
to version 4 only before a write of ours, in read-write mode; a newer version is refused.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from store.errors import SchemaIncompatible, StoreError
from store.knowledge.model import (
    CURRENT_STORE_VERSION,
    SUPPORTED_STORE_VERSIONS,
    DiffSummary,
    DiscoverySummary,
    KnowledgeBase,
    Snapshot,
    cjk_bigrams,
)
from store.mothx.db import Database, OpenMode, open_database
from store.mothx.schema import split_statements
from store.paths import knowledge_base_files, knowledge_dir

BASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class KnowledgeBaseNotFound(StoreError):
    """No knowledge base has the given id."""


class KnowledgeBaseUnindexed(StoreError):
    """The base has no active snapshot with status ``completed`` (15.4 step 1)."""


@dataclass(frozen=True)
class Layout:
    """What one store file holds: its store version and the columns of the tables whose columns vary."""

    version: int
    columns: dict[str, frozenset[str]]
    has_aliases: bool
    evidence_indexed: bool = False  # the helper indexes of HELPER_INDEXES are there

    def has(self, table: str, column: str) -> bool:
        return column in self.columns.get(table, frozenset())


@dataclass
class KnowledgeStore:
    """One open knowledge-base file."""

    base_id: str
    path: Path
    db: Database
    layout: Layout

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> KnowledgeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self.db.read() as conn:
            yield conn

    def base(self, conn: sqlite3.Connection) -> KnowledgeBase:
        return read_base(conn, self.layout, self.base_id, self.path)


def base_path(root: Path, base_id: str) -> Path:
    if not BASE_ID.match(base_id):
        raise KnowledgeBaseNotFound(f"'{base_id}' is not a knowledge base id (letters, digits, '.', '_', '-').")
    return knowledge_dir(root) / f"{base_id}.db"


def inspect_layout(conn: sqlite3.Connection, path: Path) -> Layout:
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}
    if "knowledge_bases" not in tables or "knowledge_chunk_fts" not in tables:
        raise SchemaIncompatible(f"{path} is not a knowledge base (it has no knowledge_bases / FTS tables).")
    version = 1
    if "knowledge_store_schema" in tables:
        row = conn.execute("SELECT max(version) FROM knowledge_store_schema").fetchone()
        if row is not None and isinstance(row[0], int):
            version = row[0]
    if version > CURRENT_STORE_VERSION:
        raise SchemaIncompatible(
            f"{path.name} has knowledge store version {version}, newer than this Sessionscope reads "
            f"(versions {SUPPORTED_STORE_VERSIONS[0]}-{SUPPORTED_STORE_VERSIONS[-1]}); update Sessionscope to open it.")
    columns = {}
    for table in ("knowledge_bases", "knowledge_index_snapshots", "knowledge_nodes"):
        columns[table] = frozenset(str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})"))
    indexes = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    return Layout(version=max(version, 1), columns=columns, has_aliases="knowledge_entity_aliases" in tables,
                  evidence_indexed={"idx_sessionscope_evidence_node", "idx_sessionscope_evidence_edge"} <= indexes)


def open_store(root: Path, base_id: str, mode: OpenMode) -> KnowledgeStore:
    """Open ``knowledge-bases/<base_id>.db`` of the session directory ``root`` in ``mode``."""
    path = base_path(root, base_id)
    if not path.is_file():
        raise KnowledgeBaseNotFound(f"There is no knowledge base '{base_id}' in {knowledge_dir(root)}.")
    db = open_database(path, mode, foreign_keys=True)
    try:
        with db.read() as conn:
            layout = inspect_layout(conn, path)
    except BaseException:
        db.close()
        raise
    return KnowledgeStore(base_id=base_id, path=path, db=db, layout=layout)


def base_ids(root: Path) -> list[str]:
    return [p.stem for p in knowledge_base_files(root) if BASE_ID.match(p.stem)]


# ------------------------------------------------------------------------------------------------- row readers


def _col(layout: Layout, table: str, column: str, default: str, alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return f"{prefix}{column}" if layout.has(table, column) else f"{default} AS {column}"


BASE_COLUMNS = "id,name,root_dir,preprocess_profile,provider,model,mode,schedule,enabled,active_snapshot_id,created_at,updated_at"
SNAPSHOT_COLUMNS = ("id,knowledge_base_id,run_id,status,schema_version,file_count,chunk_count,node_count,edge_count,"
                    "started_at,finished_at,error_summary")


def read_base(conn: sqlite3.Connection, layout: Layout, base_id: str, path: Path) -> KnowledgeBase:
    sql = (f"SELECT {BASE_COLUMNS}, {_col(layout, 'knowledge_bases', 'config_revision', '1')}, "
           f"{_col(layout, 'knowledge_bases', 'ignore_globs', chr(39) * 2)} FROM knowledge_bases WHERE id = ?")
    row = conn.execute(sql, (base_id,)).fetchone()
    if row is None:
        row = conn.execute(sql.replace("WHERE id = ?", "ORDER BY id LIMIT 1")).fetchone()
        if row is None:
            raise KnowledgeBaseNotFound(f"{path.name} holds no knowledge base row.")
    return KnowledgeBase(id=str(row[0]), name=str(row[1]), root_dir=str(row[2]), preprocess_profile=str(row[3]),
                         provider=str(row[4]), model=str(row[5]), mode=str(row[6]), schedule=str(row[7]),
                         enabled=bool(row[8]), active_snapshot_id=str(row[9] or ""), created_at=str(row[10]),
                         updated_at=str(row[11]), config_revision=int(row[12] or 1), ignore_globs=str(row[13] or ""),
                         store_version=layout.version)


def read_snapshot(conn: sqlite3.Connection, layout: Layout, snapshot_id: str) -> Snapshot | None:
    t = "knowledge_index_snapshots"
    sql = (f"SELECT {SNAPSHOT_COLUMNS}, {_col(layout, t, 'diff_summary', chr(39) * 2)}, "
           f"{_col(layout, t, 'discovery_summary', chr(39) * 2)} FROM {t} WHERE id = ?")
    row = conn.execute(sql, (snapshot_id,)).fetchone()
    if row is None:
        return None
    return Snapshot(id=str(row[0]), knowledge_base_id=str(row[1]), run_id=str(row[2]), status=str(row[3]),
                    schema_version=int(row[4]), file_count=int(row[5]), chunk_count=int(row[6]),
                    node_count=int(row[7]), edge_count=int(row[8]), started_at=str(row[9]), finished_at=str(row[10]),
                    error_summary=str(row[11]), diff=DiffSummary.from_text(str(row[12] or "")),
                    discovery=DiscoverySummary.from_text(str(row[13] or "")))


def latest_snapshot(conn: sqlite3.Connection, layout: Layout, base_id: str) -> Snapshot | None:
    row = conn.execute("SELECT id FROM knowledge_index_snapshots WHERE knowledge_base_id = ? "
                       "ORDER BY started_at DESC, id DESC LIMIT 1", (base_id,)).fetchone()
    return read_snapshot(conn, layout, str(row[0])) if row else None


def active_snapshot(conn: sqlite3.Connection, layout: Layout, base: KnowledgeBase) -> Snapshot:
    """The usable snapshot (15.2), else :class:`KnowledgeBaseUnindexed`."""
    snap = read_snapshot(conn, layout, base.active_snapshot_id) if base.active_snapshot_id else None
    if snap is None or snap.status != "completed":
        raise KnowledgeBaseUnindexed(f"knowledge base {base.id} is unindexed (it has no completed active snapshot).")
    return snap


# ------------------------------------------------------------------------------------------------- migrations


def _v1_ddl() -> list[str]:
    text = resources.files("store").joinpath("sql", "knowledge_base_v1.sql").read_text(encoding="utf-8")
    return split_statements(text)


V4_STATEMENTS = (
    "ALTER TABLE knowledge_bases ADD COLUMN ignore_globs TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE knowledge_index_snapshots ADD COLUMN diff_summary TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE knowledge_index_snapshots ADD COLUMN discovery_summary TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE knowledge_nodes ADD COLUMN status TEXT NOT NULL DEFAULT 'fact'",
    "ALTER TABLE knowledge_nodes ADD COLUMN confidence REAL NOT NULL DEFAULT 1",
    "CREATE TABLE IF NOT EXISTS knowledge_entity_aliases (id TEXT PRIMARY KEY, snapshot_id TEXT NOT NULL REFERENCES "
    "knowledge_index_snapshots(id) ON DELETE CASCADE, normalized_alias TEXT NOT NULL, node_id TEXT NOT NULL "
    "REFERENCES knowledge_nodes(id) ON DELETE CASCADE, UNIQUE(snapshot_id, normalized_alias))",
    "CREATE INDEX IF NOT EXISTS idx_knowledge_entity_aliases_node ON knowledge_entity_aliases(snapshot_id, node_id)",
)


HELPER_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_sessionscope_evidence_node ON knowledge_evidence(snapshot_id, node_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessionscope_evidence_edge ON knowledge_evidence(snapshot_id, edge_id)",
)
"""Indexes a base created here (``kb index``) carries beyond the reference DDL: step 6 of a query reads the
evidence of nodes and edges by id, which the reference's one evidence index (snapshot, chunk, ...) cannot
find without reading all of it. Never added to a file mothx wrote; a query works without them, slower."""


def migrate(conn: sqlite3.Connection, path: Path, applied_at: str) -> Layout:
    """Bring the store (inside the caller's write transaction) to version 4; return its new layout."""
    layout = inspect_layout(conn, path)
    conn.execute("CREATE TABLE IF NOT EXISTS knowledge_store_schema (version INTEGER PRIMARY KEY, "
                 "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
    done = {int(r[0]) for r in conn.execute("SELECT version FROM knowledge_store_schema")}
    if not done:
        conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (1, ?)", (applied_at,))
        done = {1}
    if 2 not in done:  # re-index the FTS mirror with CJK bigrams (15.3)
        rows = conn.execute("SELECT c.id, c.snapshot_id, c.text FROM knowledge_chunks c").fetchall()
        conn.execute("DELETE FROM knowledge_chunk_fts")
        conn.executemany("INSERT INTO knowledge_chunk_fts (chunk_id, snapshot_id, text) VALUES (?,?,?)",
                         [(r[0], r[1], cjk_bigrams(str(r[2]))) for r in rows])
        conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (2, ?)", (applied_at,))
    if 3 not in done:
        if not layout.has("knowledge_bases", "config_revision"):
            conn.execute("ALTER TABLE knowledge_bases ADD COLUMN config_revision INTEGER NOT NULL DEFAULT 1")
        conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (3, ?)", (applied_at,))
    if 4 not in done:
        for statement in V4_STATEMENTS:
            if statement.startswith("ALTER"):
                table, column = statement.split()[2], statement.split()[5]
                if layout.has(table, column):
                    continue
            conn.execute(statement)
        conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (4, ?)", (applied_at,))
    return inspect_layout(conn, path)


def open_for_write(root: Path, base_id: str, applied_at: str) -> KnowledgeStore:
    """Open a base read-write and migrate it to version 4 (one write transaction)."""
    store = open_store(root, base_id, OpenMode.READ_WRITE)
    try:
        if store.layout.version < CURRENT_STORE_VERSION or not store.layout.has_aliases:
            with store.db.write() as conn:
                store.layout = migrate(conn, store.path, applied_at)
    except BaseException:
        store.close()
        raise
    return store


def create_base(root: Path, base_id: str, *, name: str, root_dir: str, preprocess_profile: str = "mixed",
                provider: str = "", model: str = "", created_at: str) -> KnowledgeStore:
    """Create ``knowledge-bases/<base_id>.db`` at store version 4 with its base row; the file must not exist."""
    path = base_path(root, base_id)
    if path.exists():
        raise StoreError(f"{path} exists already.")
    if preprocess_profile not in ("documents", "code", "notes", "mixed"):
        raise StoreError(f"'{preprocess_profile}' is not a preprocess profile (documents, code, notes, mixed).")
    path.parent.mkdir(parents=True, exist_ok=True)
    db = open_database(path, OpenMode.READ_WRITE, create=True, foreign_keys=True)
    try:
        with db.write() as conn:
            for statement in _v1_ddl():
                conn.execute(statement)
            layout = migrate(conn, path, created_at)
            for statement in HELPER_INDEXES:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO knowledge_bases (id,name,root_dir,preprocess_profile,provider,model,mode,thinking_level,"
                "schedule,enabled,active_snapshot_id,created_at,updated_at) VALUES (?,?,?,?,?,?,'yolo','','manual',1,'',?,?)",
                (base_id, name, root_dir, preprocess_profile, provider, model, created_at, created_at))
    except BaseException:
        db.close()
        raise
    return KnowledgeStore(base_id=base_id, path=path, db=db, layout=layout)


def mode_of(mode: OpenMode, writable: bool) -> OpenMode:
    """The mode a knowledge base opens in for a session directory open in ``mode`` (``writable``: whether its
    store may be written): read-write only where the directory may be written."""
    if mode.is_read:
        return mode
    return OpenMode.READ_WRITE if writable else OpenMode.READ_ONLY
