"""The SQLModel classes of store/mothx/tables.py describe exactly the layout the reference DDL creates."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import Session, SQLModel, select

from store.mothx.db import OpenMode
from store.mothx.schema import create_v43
from store.mothx.sessiondir import open_session_dir
from store.mothx.tables import (
    KB_V1_FTS_DDL,
    KB_V1_FTS_TABLE,
    KB_V1_METADATA,
    KB_V1_TABLES,
    V43_METADATA,
    V43_TABLES,
    Entries,
    InputResources,
    ResponseTurns,
    SchemaMigrations,
    Sessions,
)

Column = tuple[int, str, str, int, str | None, int]
Index = tuple[str, int, str, int, tuple[tuple[str | None, int, str], ...], str]
ForeignKey = tuple[str, str, str, str, str, str]


@dataclass(frozen=True)
class TableLayout:
    columns: tuple[Column, ...]          # (cid, name, declared type, notnull, default text, pk position)
    indexes: dict[str, Index]             # name -> (name, unique, origin, partial, key columns, WHERE text)
    unique_constraints: frozenset[tuple[str, ...]]
    foreign_keys: tuple[ForeignKey, ...]  # (table, from, to, on_update, on_delete, match)
    autoincrement: bool
    checks: tuple[str, ...]


def _squash(text: str) -> str:
    """Whitespace-insensitive SQL text: runs of spaces collapsed, none next to brackets or commas."""
    text = " ".join(text.split())
    text = re.sub(r"\s*([(),])\s*", r"\1", text)
    return text.rstrip(";")


def _where(index_sql: str | None) -> str:
    if not index_sql:
        return ""
    match = re.search(r"\bWHERE\b(.*)$", index_sql, flags=re.IGNORECASE | re.DOTALL)
    return _squash(match.group(1)) if match else ""


def _checks(table_sql: str) -> tuple[str, ...]:
    found = []
    for match in re.finditer(r"\bCHECK\s*\(", table_sql, flags=re.IGNORECASE):
        depth, start = 1, match.end()
        pos = start
        while depth:
            depth += {"(": 1, ")": -1}.get(table_sql[pos], 0)
            pos += 1
        found.append(_squash(table_sql[start : pos - 1]))
    return tuple(sorted(found))


def describe(conn: sqlite3.Connection, skip: tuple[str, ...] = ()) -> dict[str, TableLayout]:
    """What SQLite itself reports about every table: PRAGMA table_xinfo, index_list, index_xinfo, FKs."""
    layouts: dict[str, TableLayout] = {}
    tables = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    for table, table_sql in tables:
        if table.startswith(skip):
            continue
        columns = tuple(
            (cid, name, str(decl).upper(), notnull, None if dflt is None else _squash(str(dflt)), pk)
            for cid, name, decl, notnull, dflt, pk, _hidden in conn.execute(f'PRAGMA table_xinfo("{table}")')
        )
        indexes: dict[str, Index] = {}
        uniques: set[tuple[str, ...]] = set()
        for _seq, name, unique, origin, partial in conn.execute(f'PRAGMA index_list("{table}")'):
            keys = tuple(
                (col, desc, coll)
                for _seqno, _cid, col, desc, coll, key in conn.execute(f'PRAGMA index_xinfo("{name}")')
                if key
            )
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE type='index' AND name=?", (name,)).fetchone()
            indexes[name] = (name, unique, origin, partial, keys, _where(sql[0] if sql else None))
            if origin == "u":
                uniques.add(tuple(str(k[0]) for k in keys))
        fks = tuple(
            sorted(
                (ref, frm, to, on_update, on_delete, match)
                for _id, _seq, ref, frm, to, on_update, on_delete, match in conn.execute(
                    f'PRAGMA foreign_key_list("{table}")'
                )
            )
        )
        layouts[table] = TableLayout(
            columns=columns,
            indexes=indexes,
            unique_constraints=frozenset(uniques),
            foreign_keys=fks,
            autoincrement="AUTOINCREMENT" in table_sql.upper(),
            checks=_checks(table_sql),
        )
    return layouts


def _reference_v43(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    create_v43(conn)
    conn.execute("COMMIT")
    return conn


def _from_metadata(path: Path, metadata: sa.MetaData) -> sqlite3.Connection:
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        metadata.create_all(engine)
    finally:
        engine.dispose()
    return sqlite3.connect(path)


def _reference_kb_v1(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.executescript(resources.files("store").joinpath("sql", "knowledge_base_v1.sql").read_text("utf-8"))
    return conn


def _assert_same(expected: dict[str, TableLayout], got: dict[str, TableLayout]) -> None:
    assert sorted(got) == sorted(expected)
    for table in expected:
        want, have = expected[table], got[table]
        assert have.columns == want.columns, table
        assert have.indexes == want.indexes, table
        assert have.unique_constraints == want.unique_constraints, table
        assert have.foreign_keys == want.foreign_keys, table
        assert have.autoincrement == want.autoincrement, table
        assert have.checks == want.checks, table


@pytest.fixture
def v43_pair(tmp_path: Path) -> tuple[dict[str, TableLayout], dict[str, TableLayout]]:
    ref = _reference_v43(tmp_path / "reference.db")
    made = _from_metadata(tmp_path / "metadata.db", V43_METADATA)
    try:
        return describe(ref), describe(made)
    finally:
        ref.close()
        made.close()


def test_v43_metadata_matches_reference_ddl(v43_pair: tuple[dict[str, TableLayout], dict[str, TableLayout]]) -> None:
    reference, from_metadata = v43_pair
    _assert_same(reference, from_metadata)


def test_v43_reference_description_is_the_full_layout(
    v43_pair: tuple[dict[str, TableLayout], dict[str, TableLayout]],
) -> None:
    reference, _ = v43_pair
    # 34 tables of our own; SQLite adds sqlite_sequence for the AUTOINCREMENT tables.
    assert len(reference) == 34
    assert sorted(reference) == sorted(V43_TABLES)
    active = reference["session_runs"].indexes["idx_session_runs_active_session"]
    assert active[1] == 1 and active[3] == 1
    assert active[5] == (
        "status IN('created','queued','running','waiting_for_approval','waiting_for_question',"
        "'cancelling','terminalizing')"
    )
    wechat = reference["sessions"].indexes["idx_sessions_wechat_binding"]
    assert (wechat[1], wechat[3], wechat[5]) == (1, 1, "channel_type = 'wechat' AND channel_id <> ''")
    assert ("session_id", "scope", "key_hash") in reference["runtime_submissions"].unique_constraints
    assert reference["entries"].autoincrement and not reference["sessions"].autoincrement
    assert reference["delivery_operations"].columns[-1][1] == "retry_window_started_at"
    assert reference["schema_migrations"].columns[2][4] == "CURRENT_TIMESTAMP"
    assert reference["response_runs"].columns[11][2:5] == ("BOOLEAN", 1, "FALSE")


def test_description_notices_a_missing_index_or_a_changed_default(tmp_path: Path) -> None:
    """The comparison above is not blind: dropping one index or changing one default shows up."""
    ref = _reference_v43(tmp_path / "reference.db")
    changed = _reference_v43(tmp_path / "changed.db")
    try:
        changed.execute("DROP INDEX idx_session_runs_active_session")
        changed.execute(
            "CREATE UNIQUE INDEX idx_session_runs_active_session ON session_runs(session_id) WHERE status = 'running'"
        )
        reference = describe(ref)
        got = describe(changed)
        assert got["session_runs"].indexes != reference["session_runs"].indexes
        changed.execute("ALTER TABLE cron_jobs RENAME TO cron_jobs_old")
        changed.execute("CREATE TABLE cron_jobs (id TEXT PRIMARY KEY, mode TEXT NOT NULL DEFAULT 'ask')")
        assert describe(changed)["cron_jobs"].columns != reference["cron_jobs"].columns
    finally:
        ref.close()
        changed.close()


def test_kb_v1_metadata_matches_reference_ddl_except_fts(tmp_path: Path) -> None:
    ref = _reference_kb_v1(tmp_path / "kb-reference.db")
    made = _from_metadata(tmp_path / "kb-metadata.db", KB_V1_METADATA)
    try:
        reference = describe(ref, skip=(KB_V1_FTS_TABLE,))
        from_metadata = describe(made)
        _assert_same(reference, from_metadata)
        assert sorted(reference) == sorted(KB_V1_TABLES)
        assert reference["knowledge_evidence"].checks == ("node_id <> '' OR edge_id <> ''",)
        assert reference["knowledge_edges"].columns[5][2:5] == ("REAL", 1, "1")
        # The FTS5 table is the one thing the metadata cannot create; its statement is kept verbatim.
        ref_sql = ref.execute("SELECT sql FROM sqlite_master WHERE name = ?", (KB_V1_FTS_TABLE,)).fetchone()[0]
        assert _squash(ref_sql) == _squash(KB_V1_FTS_DDL)
        made.execute(KB_V1_FTS_DDL)
        assert made.execute("SELECT count(*) FROM knowledge_chunk_fts").fetchone() == (0,)
    finally:
        ref.close()
        made.close()


def test_metadata_objects_are_separate() -> None:
    assert V43_METADATA is not KB_V1_METADATA
    assert V43_METADATA is not SQLModel.metadata
    assert KB_V1_METADATA is not SQLModel.metadata
    assert not set(V43_METADATA.tables) & set(KB_V1_METADATA.tables)
    assert "sessions" not in SQLModel.metadata.tables
    assert Sessions.metadata is V43_METADATA


def test_orm_rows_read_back_with_raw_sqlite(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    open_session_dir(root, create=True).close()
    engine = sa.create_engine(f"sqlite:///{root / 'sessions.db'}")
    try:
        with Session(engine) as orm:
            orm.add(Sessions(id="0123456789abcdef", cwd="/work", timestamp="2026-11-20T12:00:00Z", version=3))
            for n in range(3):
                orm.add(
                    Entries(
                        session_id="0123456789abcdef",
                        id=f"{n:016x}",
                        type="message",
                        parent_id=None if n == 0 else f"{n - 1:016x}",
                        timestamp=f"2026-11-20T12:00:0{n}Z",
                        data='{"role":"user","content":"hi %d"}' % n,
                    )
                )
            orm.add(
                InputResources(
                    id="r1",
                    session_id="0123456789abcdef",
                    kind="file",
                    relative_path="a.txt",
                    status="stored",
                    created_at="2026-11-20T12:00:00Z",
                    metadata_json='{"k":1}',
                )
            )
            orm.commit()
    finally:
        engine.dispose()

    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        with sd.db.read() as conn:
            session = conn.execute(
                "SELECT id, cwd, timestamp, version, channel_type, channel_id, fork_boundary_seq, fork_kind, expert_id "
                "FROM sessions"
            ).fetchall()
            entries = conn.execute(
                "SELECT seq, session_id, id, type, parent_id, timestamp, data FROM entries ORDER BY seq"
            ).fetchall()
            resource = conn.execute("SELECT metadata, run_id, byte_size FROM input_resources").fetchone()
    assert session == [("0123456789abcdef", "/work", "2026-11-20T12:00:00Z", 3, "local", "", 0, "", "")]
    assert [e[0] for e in entries] == [1, 2, 3]
    assert entries[1] == (
        2,
        "0123456789abcdef",
        "0000000000000001",
        "message",
        "0000000000000000",
        "2026-11-20T12:00:01Z",
        '{"role":"user","content":"hi 1"}',
    )
    assert resource == ('{"k":1}', "", 0)


def test_orm_reads_rows_written_by_a_foreign_writer(tmp_path: Path) -> None:
    """Values mothx wrote (Go-style DATETIME text, BLOBs, the CURRENT_TIMESTAMP default) read back unchanged."""
    path = tmp_path / "sessions.db"
    conn = _reference_v43(path)
    conn.execute(
        "INSERT INTO response_turns(session_id, local_turn_id, provider, api, model, state_mode, status, "
        "request_summary_json, created_at) VALUES ('s', 't1', 'p', 'responses', 'm', 'replay', 'completed', "
        "x'7b7d', '2026-11-20 12:00:00.123456789+00:00')"
    )
    conn.close()
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with Session(engine) as orm:
            turn = orm.exec(select(ResponseTurns)).one()
            assert turn.created_at == "2026-11-20 12:00:00.123456789+00:00"
            assert turn.request_summary_json == b"{}"
            assert turn.completed_at is None
            migrations = orm.exec(select(SchemaMigrations).order_by(SchemaMigrations.version)).all()
            assert [m.version for m in migrations][-1] == 43
            assert all(m.applied_at for m in migrations)
    finally:
        engine.dispose()
