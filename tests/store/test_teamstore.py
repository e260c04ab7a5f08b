"""The team store: the checkpoint store on PostgreSQL beside the SQLite default, its migrations, the store URL,
hosts, and capture from many processes at once (real processes, a real server, killed at random moments)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import agentstate
from store.agents import capture as cap
from store.agents.checkpoint_engine import StoreUnavailable, shown_url, store_kind, use_store
from store.agents.checkpoint_read import checkpoint_page, list_checkpoints
from store.agents.checkpoint_schema import PG_SEQUENCE, migrations, stored_version
from store.errors import ReadOnlyStore, SchemaIncompatible
from store.mothx.db import OpenMode
from store.mothx.schema import split_statements
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.pg import pg_cluster, pg_execute, pg_url, store_url  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
AGENT = "claude-code"


@pytest.fixture
def sd(tmp_path: Path, store_url: str | None) -> Iterator[SessionDir]:  # noqa: F811 - the fixture of tests.pg
    use_store(store_url)
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()
    use_store(None)


def line(sid: str, n: int, text: str = "") -> bytes:
    rec = {"parentUuid": None if n == 0 else str(uuid.uuid5(uuid.NAMESPACE_OID, f"{sid}/{n - 1}")),
           "isSidechain": False, "type": "user" if n % 2 == 0 else "assistant", "sessionId": sid,
           "uuid": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{sid}/{n}")), "timestamp": f"2026-11-20T12:{n % 60:02d}:00Z",
           "message": {"role": "user" if n % 2 == 0 else "assistant", "content": text or f"line {n} " + "x" * (n % 7)}}
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def make_tree(root: Path, sessions: int, lines: int) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for i in range(sessions):
        sid = str(uuid.UUID(int=0x5E55 << 64 | i))
        path = root / f"-home-u-project-{i % 3}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(line(sid, n) for n in range(lines)))
        out[sid] = path
    return out


def add_lines(path: Path, sid: str, count: int) -> None:
    have = len(path.read_bytes().splitlines())
    with path.open("ab") as fh:
        fh.write(b"".join(line(sid, n) for n in range(have, have + count)))


def fake_checkpoint(sd: SessionDir, sid: str, host: str | None = None) -> None:
    db = agentstate.open_state_db(sd, create=True)
    assert db is not None
    try:
        f = agentstate.start_run(db, AGENT, sid, "/root", host)
        body = b'{"a":1}'
        st = agentstate.PersistedSessionState(AGENT, sid, f.run_id, "/cwd", "p/x.jsonl", f.fencing_token, 1, 1, (
            agentstate.PersistedSessionStateFile("p/x.jsonl", 1, agentstate.file_digest([body])),))
        agentstate.stage_version(db, f, st, [agentstate.SessionStateRecord("p/x.jsonl", 1, body)],
                                 publish=agentstate.KIND_CHECKPOINT)
    finally:
        db.close()


# --------------------------------------------------------------------------------------- URLs and migrations


def test_store_urls() -> None:
    assert store_kind("postgresql://u@h/db") == store_kind("postgres://h/db") == "postgresql"
    assert store_kind("postgresql+psycopg://h/db") == "postgresql"
    assert store_kind("sqlite:////tmp/x.db") == "sqlite"
    for bad in ("mysql://h/db", "/tmp/x.db", "sqlite://", "\x1b]52;c;aGFja2Vk\x07"):
        with pytest.raises(StoreUnavailable):
            store_kind(bad)
    assert shown_url("postgresql://team:s3cret@db.example:5432/ss") == "postgresql://team:***@db.example:5432/ss"
    shown = shown_url("postgresql://u:p@h/\x1b[2J[bold]x")
    assert "\x1b" not in shown and "p@" not in shown


def test_env_chooses_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere" / "team.db"
    monkeypatch.setenv("SESSIONSCOPE_STORE", f"sqlite:///{other}")
    with open_session_dir(tmp_path / "s", create=True) as sd:
        fake_checkpoint(sd, "one")
        assert other.exists() and not agentstate.state_db_path(sd).exists()
        assert agentstate.store_label(sd) == f"SQLite {other}"
        assert [c.agent_session_id for c in list_checkpoints(sd)] == ["one"]
    monkeypatch.delenv("SESSIONSCOPE_STORE")
    with open_session_dir(tmp_path / "s") as sd:
        assert list_checkpoints(sd) == []
        assert agentstate.store_label(sd).startswith("SQLite ") and str(agentstate.state_db_path(sd)) in \
            agentstate.store_label(sd)


def test_version_1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "s", create=True) as sd:
        path = agentstate.state_db_path(sd)
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)  # today's layout, as the previous release wrote it
    for statement in split_statements((ROOT / "store" / "sql" / "agentstate_v1.sql").read_text(encoding="utf-8")):
        conn.execute(statement)
    conn.execute("INSERT INTO agent_state_agents (agent_id, created_at) VALUES ('claude-code', 'now')")
    conn.commit()
    conn.close()
    with open_session_dir(tmp_path / "s", OpenMode.READ_ONLY) as ro:  # a read mode reads v1 and writes nothing
        before = path.read_bytes()
        assert list_checkpoints(ro) == []
        assert path.read_bytes() == before
    with open_session_dir(tmp_path / "s") as sd:
        fake_checkpoint(sd, "after-upgrade", host="host-a")
        db = agentstate.open_state_db(sd)
        assert db is not None
        with db.read() as c:
            assert stored_version(c) == 3
            assert [m.version for m in migrations(c)] == [1, 2, 3]
            assert c.execute("SELECT host FROM agent_state_session_hosts").fetchall() == [("host-a",)]
        db.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE agent_state_meta SET value = '9' WHERE name = 'schema_version'")
    conn.commit()
    conn.close()
    with open_session_dir(tmp_path / "s") as sd, pytest.raises(SchemaIncompatible, match="version 9"):
        list_checkpoints(sd)


def test_postgresql_schema_version_hosts_and_byte_order(sd: SessionDir, store_url: str | None) -> None:  # noqa: F811
    if store_url is None:
        pytest.skip("PostgreSQL only")
    for sid in ("b", "B", "a-é", "a-z", "\u202e", "[bold]x[/bold]"):
        fake_checkpoint(sd, sid, host="host-" + str(len(sid)))
    assert pg_execute(store_url, "SELECT value FROM agent_state_meta") == [("3",)]
    assert [r[0] for r in pg_execute(store_url, "SELECT version FROM agent_state_migrations ORDER BY 1")] == [1, 2, 3]
    assert pg_execute(store_url, f"SELECT last_value >= 6 FROM {PG_SEQUENCE}") == [(True,)]
    listed = [c.agent_session_id for c in list_checkpoints(sd)]
    assert listed == sorted(listed, key=lambda s: s.encode())  # byte order, as SQLite lists them
    page = checkpoint_page(sd, limit=2)
    after = checkpoint_page(sd, after=page.last_key, limit=2)
    back = checkpoint_page(sd, before=after.first_key, limit=2)
    assert [r.agent_session_id for r in back.rows] == listed[:2]
    assert [r.agent_session_id for r in after.rows] == listed[2:4]
    hosts = pg_execute(store_url, "SELECT DISTINCT host FROM agent_state_run_hosts ORDER BY 1")
    assert hosts == [("host-1",), ("host-14",), ("host-3",)]


def test_postgresql_read_mode_never_writes(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    use_store(pg_url)
    try:
        with open_session_dir(tmp_path / "s", create=True):
            pass
        with open_session_dir(tmp_path / "s", OpenMode.READ_ONLY) as ro:
            assert list_checkpoints(ro) == []  # no tables yet: nothing is created
            with pytest.raises(ReadOnlyStore):
                agentstate.begin_run(ro, AGENT, "x")
        assert pg_execute(pg_url, "SELECT to_regclass('agent_state_meta') IS NULL") == [(True,)]
    finally:
        use_store(None)


def test_unreachable_server_is_one_clear_sentence(tmp_path: Path) -> None:
    use_store("postgresql://team:s3cret@127.0.0.1:1/nothing")
    try:
        with open_session_dir(tmp_path / "s", create=True) as sd, pytest.raises(StoreUnavailable) as err:
            list_checkpoints(sd)
        assert "s3cret" not in str(err.value) and "127.0.0.1:1" in str(err.value)
    finally:
        use_store(None)


# --------------------------------------------------------------------------------- capture on both engines


def test_capture_and_verify_on_both_engines(sd: SessionDir, tmp_path: Path) -> None:
    files = make_tree(tmp_path / "projects", 5, 30)
    first = cap.capture_claude_code(sd, tmp_path / "projects")
    assert first.counts["new"] == 5
    sid, path = next(iter(files.items()))
    add_lines(path, sid, 4)
    again = cap.capture_claude_code(sd, tmp_path / "projects")
    assert again.counts["appended"] == 1 and again.counts["unchanged"] == 4
    assert [s.records_written for s in again.sessions if s.status == "appended"] == [4]
    for s in files:
        assert cap.verify(sd, AGENT, s).status == "verified"


# ------------------------------------------------------------------------------ many capturing processes

WORKER = """
import sys, time
sys.path.insert(0, {root!r})
from store.agents.capture import capture_claude_code
from store.mothx.sessiondir import open_session_dir
with open_session_dir({sessions!r}, create=True) as sd:
    while True:
        summary = capture_claude_code(sd, {tree!r})
        print(summary.counts, flush=True)
        if {once!r}:
            break
"""


def _worker(tmp: Path, k: int, tree: Path, url: str | None, once: bool) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SESSIONSCOPE_HOST=f"host-{k}")
    if url:
        env["SESSIONSCOPE_STORE"] = url
    code = WORKER.format(root=str(ROOT), sessions=str(tmp / f"sessions-{k}"), tree=str(tree), once=once)
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
def test_four_processes_killed_at_random_store_every_line_once(tmp_path: Path, engine: str,
                                                               request: pytest.FixtureRequest) -> None:
    # Each process plays a host with its own session directory; the checkpoint store is the one shared thing.
    url = str(request.getfixturevalue("pg_url")) if engine == "postgresql" else f"sqlite:///{tmp_path / 'team.db'}"
    tree = tmp_path / "projects"
    files = make_tree(tree, 8, 40)
    rng = random.Random(15)
    procs = [_worker(tmp_path, k, tree, url, once=False) for k in range(4)]
    deadline = time.monotonic() + 25
    rounds = 0
    try:
        while time.monotonic() < deadline and rounds < 14:
            time.sleep(rng.uniform(0.05, 0.6))
            k = rng.randrange(4)
            procs[k].send_signal(signal.SIGKILL)
            procs[k].wait()
            if rng.random() < 0.6:  # the agents keep writing while the captures run and die
                sid = rng.choice(sorted(files))
                add_lines(files[sid], sid, rng.randint(1, 25))
            procs[k] = _worker(tmp_path, k, tree, url, once=False)
            rounds += 1
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
    finals = [_worker(tmp_path, k, tree, url, once=True) for k in range(4)]  # all four at once, to the end
    for p in finals:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode(errors="replace")[-3000:]
    use_store(url)
    try:
        with open_session_dir(tmp_path / "sessions-0") as sd:
            listed = {c.agent_session_id: c for c in list_checkpoints(sd)}
            assert set(listed) == set(files)
            total = 0
            for sid, path in files.items():
                on_disk = path.read_bytes().splitlines()
                info = listed[sid]
                assert info.head is not None and info.head.kind == "checkpoint" and info.state is not None, info
                assert info.head_problem == ""
                assert info.state.record_count == len(on_disk)
                cp = agentstate.load_checkpoint(sd, AGENT, sid)
                assert cp is not None and [str(r.content).encode() for r in cp.records] == on_disk
                assert cap.verify(sd, AGENT, sid).status == "verified"
                total += len(on_disk)
            db = agentstate.open_state_db(sd)
            assert db is not None
            with db.read() as conn:
                stored = conn.execute("SELECT count(*) FROM agent_state_lines").fetchone()[0]
                dupes = conn.execute("SELECT count(*) FROM (SELECT session_id, file_path, line_number FROM "
                                     "agent_state_lines GROUP BY 1, 2, 3 HAVING count(*) > 1) d").fetchone()[0]
                hosts = {r[0] for r in conn.execute("SELECT host FROM agent_state_session_hosts")}
                heads = conn.execute("SELECT count(*) FROM agent_state_publications").fetchone()[0]
            db.close()
            assert stored == total and dupes == 0  # every line once; no dangling tail of a killed capture
            assert heads == len(files) and hosts <= {f"host-{k}" for k in range(4)} and hosts
    finally:
        use_store(None)
