"""A store created fresh from the SQLModel metadata has exactly the layout of one created at version 1 (the
frozen ``store/sql/agentstate_v1.sql``, as the first release made it) and upgraded, and of one at version 2
(version 1 brought to 2 and opened as a store of its own) upgraded to the current version: on both engines."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from store.agents import agentstate, checkpoint_schema
from store.agents.checkpoint_engine import use_store
from store.agents.checkpoint_model import SCHEMA_VERSION
from store.mothx.schema import split_statements
from store.mothx.sessiondir import open_session_dir
from tests.pg import pg_cluster, pg_execute, pg_url, store_url  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
V1 = (ROOT / "store" / "sql" / "agentstate_v1.sql").read_text(encoding="utf-8")


def _checks(sql: str) -> list[str]:
    out, i = [], 0
    flat = re.sub(r"\( ", "(", re.sub(r" \)", ")", " ".join(sql.split())))
    while (i := flat.find("CHECK (", i)) >= 0:
        depth, j = 0, i + 6
        for j in range(i + 6, len(flat)):
            depth += {"(": 1, ")": -1}.get(flat[j], 0)
            if depth == 0:
                break
        out.append(flat[i:j + 1])
        i = j
    return sorted(out)


def sqlite_layout(path: Path) -> dict[str, object]:
    conn = sqlite3.connect(path)
    try:
        out: dict[str, object] = {}
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            indexes = [(i[1], i[2], i[3], i[4], conn.execute(f"PRAGMA index_xinfo('{i[1]}')").fetchall())
                       for i in conn.execute(f"PRAGMA index_list('{name}')")]
            out[name] = (conn.execute(f"PRAGMA table_info('{name}')").fetchall(),
                         sorted(r[2:] for r in conn.execute(f"PRAGMA foreign_key_list('{name}')")),
                         sorted(indexes), _checks(sql))
        return out
    finally:
        conn.close()


def pg_layout(url: str) -> dict[str, object]:
    q = {
        "columns": "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default, "
                   "collation_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
        "constraints": "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
                       "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2",
        "sequences": "SELECT sequencename, data_type::text, start_value, min_value, max_value, increment_by, cycle "
                     "FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1",
    }
    return {k: pg_execute(url, sql) for k, sql in q.items()}


def _old_store(path: Path, url: str | None, version: int) -> None:
    """A store at layout ``version`` (1 or 2): the frozen version-1 script, then the migrations up to it."""
    if url is None:
        path.parent.mkdir(parents=True)
        conn = sqlite3.connect(path)
        for statement in split_statements(V1):
            conn.execute(statement)
        checkpoint_schema.upgrade(conn, 1, "sqlite", target=version)
        conn.commit()
        conn.close()
        return
    from store.agents.checkpoint_engine import PgStore
    from store.mothx.db import OpenMode

    pg_execute(url, "DROP SCHEMA public CASCADE")
    pg_execute(url, "CREATE SCHEMA public")
    for statement in split_statements(V1):
        pg_execute(url, re.sub(r"^(\s+\w+\s+)TEXT\b", r'\1TEXT COLLATE "C"', statement, flags=re.M))
    pg_execute(url, "CREATE SEQUENCE IF NOT EXISTS agent_state_fencing_token_seq MINVALUE 1")
    store = PgStore(url, OpenMode.READ_WRITE)
    try:
        with store.write() as conn:
            checkpoint_schema.upgrade(conn, 1, "postgresql", target=version)
    finally:
        store.close()


def _read(path: Path, url: str | None, sql: str) -> list[object]:
    if url is not None:
        return pg_execute(url, sql)
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


_VERSION = "SELECT value FROM agent_state_meta WHERE name = 'schema_version'"


def _recorded(path: Path, url: str | None) -> tuple[list[object], list[object]]:
    """(the stored layout version, the migrations recorded)."""
    return _read(path, url, _VERSION), _read(path, url, "SELECT version FROM agent_state_migrations ORDER BY 1")


@pytest.mark.parametrize("start", [1, 2])
def test_fresh_store_equals_an_upgraded_one(tmp_path: Path, store_url: str | None, start: int) -> None:  # noqa: F811
    layouts: list[dict[str, object]] = []
    recorded = []
    for name, old in (("fresh", False), ("upgraded", True)):
        url = store_url
        root = tmp_path / name
        with open_session_dir(root / "s", create=True) as sd:
            path = agentstate.state_db_path(sd)
        if old:
            _old_store(path, url, start)
            assert _read(path, url, _VERSION) == [(str(start),)]
        use_store(url)
        try:
            with open_session_dir(root / "s") as sd:
                db = agentstate.open_state_db(sd, create=True)
                assert db is not None
                db.close()
        finally:
            use_store(None)
        layouts.append(sqlite_layout(path) if url is None else pg_layout(url))
        recorded.append(_recorded(path, url))
        if url is not None and not old:
            pg_execute(url, "DROP SCHEMA public CASCADE")  # the same database holds the upgraded store next
            pg_execute(url, "CREATE SCHEMA public")
    assert layouts[0] and layouts[0] == layouts[1]
    assert recorded[0] == recorded[1] == ([(str(SCHEMA_VERSION),)], [(v,) for v in range(1, SCHEMA_VERSION + 1)])


def test_frozen_ddl_is_what_the_classes_compile_to() -> None:
    """A new store is created from store/sql/agentstate_v<N>.<engine>.sql (no SQLModel import): each file must
    be the DDL the table classes compile to. Regenerate them with ``python -m store.agents.checkpoint_schema``."""
    from store.agents.checkpoint_schema import frozen_ddl
    from store.agents.checkpoint_tables import ddl

    for dialect in ("sqlite", "postgresql"):
        assert frozen_ddl(dialect) == ddl(dialect), f"regenerate the frozen {dialect} DDL"


def test_creating_a_store_does_not_import_sqlmodel(tmp_path: Path) -> None:
    """Creating the SQLite file (a first capture's open) runs the frozen DDL: SQLModel stays unimported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from store.agents import agentstate\n"
        "from store.mothx.sessiondir import open_session_dir\n"
        f"with open_session_dir(Path({str(tmp_path / 'sd')!r}), create=True) as sd:\n"
        "    db = agentstate.open_state_db(sd, create=True)\n"
        "    assert db is not None\n"
        "    db.close()\n"
        "print('sqlmodel' in sys.modules, 'sqlalchemy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert (tmp_path / "sd" / "sessionscope" / "agent-state.db").exists()
