"""Schema detection on the layouts a user may meet: current, newer, older, legacy bookkeeping, incompatible."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

import store.mothx.schema as schema_module
from store.errors import ReadOnlyStore
from store.mothx.db import OpenMode
from store.mothx.schema import (
    CURRENT_VERSION,
    EXPECTED_LAYOUT,
    MIGRATIONS,
    create_v43,
    expected_layout,
    inspect_schema,
    layout_from_ddl,
    layout_source,
)
from store.mothx.sessiondir import open_session_dir

SESSION_ID = "0123456789abcdef"

# Objects created by the migrations after version 29 (reference 4.3).
TABLES_AFTER_29 = (
    "session_attachments",       # 30
    "attachment_deliveries",     # 30
    "session_run_recoveries",    # 31
    "input_resources",           # 32
    "runtime_submissions",       # 33
    "delivery_intents",          # 34
    "delivery_operations",       # 34 (+ retry_window_started_at, 43)
    "input_resource_events",     # 35
)

# sessions as it was before v41 add_sessions_expert_id.
SESSIONS_V29 = """
CREATE TABLE sessions (
	id TEXT PRIMARY KEY,
	cwd TEXT,
	timestamp TEXT,
	parent_session TEXT,
	version INTEGER,
	channel_type TEXT NOT NULL DEFAULT 'local',
	channel_id TEXT NOT NULL DEFAULT '',
	fork_boundary_seq INTEGER NOT NULL DEFAULT 0,
	seed_length INTEGER NOT NULL DEFAULT 0,
	fork_kind TEXT NOT NULL DEFAULT ''
)
"""
SESSIONS_INDEXES = (
    "CREATE INDEX idx_sessions_cwd ON sessions(cwd)",
    "CREATE UNIQUE INDEX idx_sessions_wechat_binding ON sessions(channel_type, channel_id) "
    "WHERE channel_type = 'wechat' AND channel_id <> ''",
    "CREATE UNIQUE INDEX idx_sessions_feishu_binding ON sessions(channel_type, channel_id) "
    "WHERE channel_type = 'feishu' AND channel_id <> ''",
)


def build(path: Path, *steps: str) -> Path:
    """A v43 database made by the store's own create_v43, one session and entry, then ``steps`` applied raw."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN")
        create_v43(conn)
        conn.execute(
            "INSERT INTO sessions(id, cwd, timestamp) VALUES (?, '/work', '2026-01-02T03:04:05Z')", (SESSION_ID,)
        )
        conn.execute(
            "INSERT INTO entries(session_id, id, type, timestamp, data) "
            "VALUES (?, '00000000000000aa', 'message', '2026-01-02T03:04:05Z', '{}')",
            (SESSION_ID,),
        )
        for step in steps:
            conn.execute(step)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path.parent


def v29_steps() -> list[str]:
    """Turn a fresh v43 database into what mothx had written by version 29."""
    steps = [f"DROP TABLE {t}" for t in TABLES_AFTER_29]
    steps += [
        "ALTER TABLE sessions RENAME TO sessions_v43",
        SESSIONS_V29,
        "INSERT INTO sessions SELECT id, cwd, timestamp, parent_session, version, channel_type, channel_id, "
        "fork_boundary_seq, seed_length, fork_kind FROM sessions_v43",
        "DROP TABLE sessions_v43",
        *SESSIONS_INDEXES,
        "ALTER TABLE sub_session DROP COLUMN expert_id",
        "DELETE FROM schema_migrations WHERE version > 29",
    ]
    return steps


def legacy_bookkeeping_steps(versions: list[int]) -> list[str]:
    """Replace schema_migrations by the legacy shape (name + applied_at, no version) holding ``versions``."""
    names = ["001_create_sessions_table", "002_create_entries_table"]  # historical records of released builds
    names += [name for v, name in MIGRATIONS if v in versions]
    return [
        "DROP TABLE schema_migrations",
        "CREATE TABLE schema_migrations (name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
        *(f"INSERT INTO schema_migrations(name) VALUES ('{n}')" for n in names),
    ]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(text: str) -> bool:
    return bool(text) and "\n" not in text


# ---------------------------------------------------------------------------------------------------------


def test_fresh_layout_is_current(tmp_path: Path) -> None:
    root = build(tmp_path / "s" / "sessions.db")
    with open_session_dir(root) as sd:
        info = sd.schema
        assert info.status == "current" and info.version == CURRENT_VERSION
        assert info.recorded_versions == frozenset(v for v, _ in MIGRATIONS)
        assert info.notice == "" and sd.writable
        assert info.has("sessions", "expert_id") and info.has("delivery_operations", "retry_window_started_at")
        assert not info.has("worktrees") and not info.has("sessions", "no_such_column")
        assert info.columns == dict(expected_layout())
        sd.require_writable()


def test_expected_layout_constant_matches_the_reference_ddl() -> None:
    """EXPECTED_LAYOUT is generated from store/sql/; regenerate it with ``python -m store.mothx.schema``."""
    built = layout_from_ddl()
    assert list(EXPECTED_LAYOUT.items()) == list(built.items()), "run: python -m store.mothx.schema"
    assert layout_source(built) in Path(schema_module.__file__).read_text(encoding="utf-8")  # as generated
    copy = expected_layout()
    copy["sessions"] = ()
    assert EXPECTED_LAYOUT["sessions"] and expected_layout() == dict(EXPECTED_LAYOUT)


def test_layout_is_read_in_column_order_including_odd_table_names(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute('CREATE TABLE "we""ird name" (b TEXT, a INTEGER, "c d" BLOB)')
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT)")
    conn.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, session_id TEXT)")
    conn.execute("CREATE INDEX x ON sessions(cwd)")
    info = inspect_schema(conn)
    assert info.columns == {"entries": ("seq", "session_id"), "sessions": ("id", "cwd"),
                            'we"ird name': ("b", "a", "c d")}
    assert list(info.columns) == sorted(info.columns)


def test_historical_numbered_records_do_not_change_the_version(tmp_path: Path) -> None:
    root = build(
        tmp_path / "s" / "sessions.db",
        "INSERT INTO schema_migrations(version, name) VALUES (1, '001_create_sessions_table')",
        "INSERT INTO schema_migrations(version, name) VALUES (37, 'some_reserved_historical_record')",
    )
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert sd.schema.status == "current" and sd.schema.version == 43


@pytest.mark.parametrize("mode", tuple(OpenMode), ids=lambda m: m.value)
def test_newer_version_is_shown_read_only(tmp_path: Path, mode: OpenMode) -> None:
    root = build(
        tmp_path / "s" / "sessions.db",
        "INSERT INTO schema_migrations(version, name) VALUES (47, 'add_something_later')",
        "ALTER TABLE sessions ADD COLUMN color TEXT NOT NULL DEFAULT ''",
        "CREATE TABLE worktrees (id TEXT PRIMARY KEY, repository_root TEXT NOT NULL DEFAULT '')",
    )
    with open_session_dir(root, mode) as sd:
        info = sd.schema
        assert info.status == "newer"
        assert info.newer_versions == (47,)
        assert not info.writable and not sd.writable
        assert one_line(info.notice) and "47" in info.notice
        assert info.notice in sd.notices
        with pytest.raises(ReadOnlyStore):
            sd.require_writable()
        # What it can show, it shows.
        with sd.db.read() as conn:
            assert conn.execute("SELECT id, color FROM sessions").fetchall() == [(SESSION_ID, "")]
        assert info.has("worktrees", "repository_root")


def test_newer_version_is_never_migrated_by_a_read_write_open(tmp_path: Path) -> None:
    root = build(tmp_path / "s" / "sessions.db", "INSERT INTO schema_migrations(version, name) VALUES (47, 'x')")
    with open_session_dir(root) as sd:
        assert sd.mode is OpenMode.READ_WRITE and not sd.writable
        with sd.db.read() as conn:
            assert max(r[0] for r in conn.execute("SELECT version FROM schema_migrations")) == 47


@pytest.mark.parametrize("mode", tuple(OpenMode), ids=lambda m: m.value)
def test_older_layout_version_29(tmp_path: Path, mode: OpenMode) -> None:
    root = build(tmp_path / "s" / "sessions.db", *v29_steps())
    before = file_digest(root / "sessions.db")
    with open_session_dir(root, mode) as sd:
        info = sd.schema
        assert info.status == "older"
        assert info.version == 29
        assert max(info.recorded_versions) == 29
        assert not info.writable and not sd.writable
        assert one_line(info.notice) and "29" in info.notice
        assert info.notice in sd.notices
        with pytest.raises(ReadOnlyStore):
            sd.require_writable()
        assert set(info.missing_tables) == set(TABLES_AFTER_29)
        assert info.missing_columns == {"sessions": ("expert_id",), "sub_session": ("expert_id",)}
        assert not info.has("sessions", "expert_id") and info.has("sessions", "fork_kind")
        assert not info.has("delivery_operations") and info.has("session_runtime_leases", "epoch")
        with sd.db.read() as conn:
            assert conn.execute("SELECT count(*) FROM entries WHERE session_id = ?", (SESSION_ID,)).fetchone() == (1,)
    assert file_digest(root / "sessions.db") == before  # nothing was migrated, even read-write


def test_legacy_bookkeeping_table_is_read_by_names(tmp_path: Path) -> None:
    root = build(
        tmp_path / "s" / "sessions.db",
        *v29_steps(),
        *legacy_bookkeeping_steps([v for v, _ in MIGRATIONS if v <= 29]),
    )
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        info = sd.schema
        assert info.status == "older"
        assert info.version == 29
        assert info.recorded_versions == frozenset(v for v, _ in MIGRATIONS if v <= 29)
        assert one_line(info.notice) and "29" in info.notice


def test_legacy_bookkeeping_table_with_every_name_is_current(tmp_path: Path) -> None:
    """mothx adds the version column to such a table and back-fills it; the layout itself is complete."""
    root = build(tmp_path / "s" / "sessions.db", *legacy_bookkeeping_steps([v for v, _ in MIGRATIONS]))
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert sd.schema.status == "current"
        assert sd.schema.version == 43
        assert not sd.schema.missing_columns


def test_all_migrations_recorded_but_a_required_column_missing_is_incompatible(tmp_path: Path) -> None:
    root = build(tmp_path / "s" / "sessions.db", "ALTER TABLE session_runs DROP COLUMN context_usage_json")
    with open_session_dir(root) as sd:
        info = sd.schema
        assert info.status == "incompatible"
        assert info.version == 43
        assert info.missing_columns == {"session_runs": ("context_usage_json",)}
        assert not sd.writable
        assert one_line(info.notice) and info.notice in sd.notices
        with pytest.raises(ReadOnlyStore):
            sd.require_writable()


def test_all_migrations_recorded_but_a_table_missing_is_incompatible(tmp_path: Path) -> None:
    root = build(tmp_path / "s" / "sessions.db", "DROP TABLE cron_jobs")
    with open_session_dir(root, OpenMode.SNAPSHOT) as sd:
        assert sd.schema.status == "incompatible"
        assert sd.schema.missing_tables == ("cron_jobs",)
        assert one_line(sd.schema.notice)


def test_a_database_without_any_bookkeeping_is_older_and_unversioned(tmp_path: Path) -> None:
    root = build(tmp_path / "s" / "sessions.db", "DROP TABLE schema_migrations")
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert sd.schema.status == "older"
        assert sd.schema.version is None
        assert one_line(sd.schema.notice) and "unversioned" in sd.schema.notice


def test_inspect_schema_on_an_empty_database() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        info = inspect_schema(conn)
        assert info.status == "empty" and info.version is None and not info.writable
    finally:
        conn.close()
