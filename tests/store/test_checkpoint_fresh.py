"""A first capture's batched path (:mod:`store.agents.checkpoint_fresh`) and the per-session path it falls back
to store the same thing, on both engines.

The batched path writes the new sessions of a batch with multi-row statements under one savepoint. It is left
for the per-session path (a savepoint per session) when it cannot be used: a statement or check of it fails
(its savepoint is rolled back, whatever it wrote with it), a session's row already exists, or a tail was too
big to keep (its records are read again while they are written). Each way, the store must end up holding the
same rows: the same sessions, versions, lines, file marks, heads, runs and hosts, the fencing tokens in the
same order, and the same capture results; ``verify`` is clean, and a re-capture finds every session unchanged.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from store.agents import agentstate, checkpoint_fresh, checkpoint_write
from store.agents import capture as cap
from store.agents.checkpoint_engine import PgConnection, use_store
from store.agents.native import AGENT_CLAUDE_CODE
from store.errors import StoreError
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.pg import ENGINES, pg_cluster  # noqa: F401 - fixtures

MODES = ("batched", "rolled back", "not used", "tails re-read")


@pytest.fixture
def tree(real_fixtures: Path, tmp_path: Path) -> Path:
    """The real Claude Code tree plus sessions with an unreadable line, a non-compact record, a cut-off last
    line and a subagent file, so both paths meet stand-ins, re-compacted records and pending lines."""
    root = tmp_path / "projects"
    shutil.copytree(real_fixtures / "claude-code", root)
    for f in root.rglob("*.jsonl"):
        f.chmod(0o644)
    for n in range(3):
        sid = f"5b1f0c8e-0000-4000-8000-00000000f{n:03d}"
        lines = [json.dumps({"type": "user", "sessionId": sid, "uuid": f"u-{n}-{k}", "version": "2.1.0",
                             "message": {"role": "user", "content": f"line {k} of {n}, with spaces"}},
                            separators=(",", ":")).encode() for k in range(5)]
        if n == 0:
            lines.insert(2, b"this line is not json")
        if n == 1:
            lines.insert(1, b'{"type": "user", "sessionId": "%s", "uuid": "spaced"}' % sid.encode())
        body = b"".join(line + b"\n" for line in lines)
        if n == 2:
            body += b'{"type":"user","uuid":"cut-'  # still being written: left for the next capture
        path = root / "-home-u-fresh" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        if n == 1:
            sub = root / "-home-u-fresh" / sid / "subagents" / "agent-f1.jsonl"
            sub.parent.mkdir(parents=True)
            sub.write_bytes(json.dumps({"type": "assistant", "sessionId": sid, "uuid": "sub-1", "isSidechain": True},
                                       separators=(",", ":")).encode() + b"\n")
    return root


NewStore = Callable[[], "str | None"]


@pytest.fixture(params=ENGINES)
def new_store(request: pytest.FixtureRequest) -> Iterator[NewStore]:
    """Makes a new, empty store for each capture compared: None (the session directory's own SQLite file)
    or the URL of a new database on the test's PostgreSQL server."""
    made: list[str] = []

    def make() -> str | None:
        if request.param == "sqlite":
            return None
        cluster = request.getfixturevalue("pg_cluster")
        name = "t_" + uuid.uuid4().hex[:16]
        cluster.admin(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
        made.append(name)
        return str(cluster.url(name))

    yield make
    use_store(None)
    if made:
        from store.agents.checkpoint_engine import dispose_engines

        dispose_engines()
        cluster = request.getfixturevalue("pg_cluster")
        for name in made:
            cluster.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables(conn: Any) -> list[str]:
    if isinstance(conn, PgConnection):
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    else:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return sorted(str(r[0]) for r in rows if str(r[0]).startswith("agent_state_"))


def normalized(sd: SessionDir) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the store with what is drawn at random or from the clock put aside: a session id as its
    (agent, agent session id), a run id and a fencing token as the token's rank among the runs (PostgreSQL
    draws tokens from a sequence, which a rolled-back savepoint does not give back), times and the writing
    transaction left out."""
    db = agentstate.open_state_db(sd)
    assert db is not None
    try:
        with db.read() as conn:
            sessions = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT session_id, agent_id, agent_session_id FROM agent_state_sessions")}
            tokens = sorted(int(r[1]) for r in conn.execute("SELECT run_id, fencing_token FROM agent_state_runs"))
            rank = {token: i for i, token in enumerate(tokens)}
            runs = {r[0]: ("run", rank[int(r[1])]) for r in conn.execute(
                "SELECT run_id, fencing_token FROM agent_state_runs")}
            out: dict[str, list[tuple[object, ...]]] = {}
            for table in _tables(conn):
                cur = conn.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cur.description]
                rows = []
                for row in cur.fetchall():
                    kept: list[object] = []
                    for name, value in zip(names, row, strict=True):
                        if name.endswith("_at") or name == "search_xid":
                            continue
                        if name == "session_id":
                            value = sessions[value]
                        elif name in ("run_id", "through_run_id"):
                            value = runs[value]
                        elif "fencing_token" in name and value is not None and table != "agent_state_counters":
                            value = ("token", rank.get(int(value), int(value)))
                        elif isinstance(value, memoryview):
                            value = bytes(value)
                        kept.append((name, value))
                    rows.append(tuple(kept))
                out[table] = sorted(rows, key=repr)
            return out
    finally:
        db.close()


def capture(tmp_path: Path, tree: Path, url: str | None, mode: str, monkeypatch: pytest.MonkeyPatch,
            name: str) -> tuple[list[tuple[object, ...]], dict[str, list[tuple[object, ...]]], int]:
    """Capture ``tree`` into a new store the ``mode`` way; (results, normalized rows, batches the batched
    path wrote)."""
    use_store(url)
    written = 0
    real_write = checkpoint_fresh._write

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal written
        out = real_write(*args, **kwargs)
        if mode == "rolled back":  # everything written, then a failure: the savepoint takes it all back
            raise StoreError("a statement of the batch failed")
        written += bool(out)
        return out

    with monkeypatch.context() as mp:
        mp.setattr(checkpoint_fresh, "_write", counted)
        if mode == "not used":
            mp.setattr(checkpoint_write, "write_fresh", lambda *a, **k: {})
        if mode == "tails re-read":
            mp.setattr(cap, "TAIL_MEMORY_BUDGET", 0)
        with open_session_dir(tmp_path / f"sessions-{name}", create=True) as sd:
            summary = cap.capture_claude_code(sd, tree)
            results = [(r.agent_session_id, r.status, r.files, r.records, r.records_written, r.detail, r.paths,
                        r.pending_lines, tuple(r.drift.report()) if r.drift else ()) for r in summary.sessions]
            rows = normalized(sd)
            for r in summary.sessions:
                if r.status == "new":
                    assert cap.verify(sd, AGENT_CLAUDE_CODE, r.agent_session_id).status == "verified"
            again = cap.capture_claude_code(sd, tree)
            assert {r.status for r in again.sessions} <= {"unchanged", "unreadable"}
            assert normalized(sd) == rows  # the re-capture wrote nothing
    return sorted(results, key=repr), rows, written


@pytest.mark.parametrize("mode", MODES[1:])
def test_the_fallback_stores_what_the_batched_path_stores(mode: str, tree: Path, tmp_path: Path,
                                                          new_store: NewStore, monkeypatch: pytest.MonkeyPatch) -> None:
    batched, batched_rows, batches = capture(tmp_path, tree, new_store(), "batched", monkeypatch, "batched")
    fallback, fallback_rows, fallback_batches = capture(tmp_path, tree, new_store(), mode, monkeypatch, "fallback")
    assert batches >= 1 and fallback_batches == 0  # each capture really took its own path
    assert [r[1] for r in batched].count("new") == 7  # (and two files that name no session: unreadable)
    assert any(r[5] for r in batched) and any(r[7] for r in batched)  # an unreadable line, a pending line
    assert fallback == batched
    assert sorted(fallback_rows) == sorted(batched_rows)
    for table, rows in batched_rows.items():
        assert fallback_rows[table] == rows, table
    lines = batched_rows["agent_state_lines"]
    assert len(lines) == sum(r[4] for r in batched)  # every record stored once
    assert len(batched_rows["agent_state_publications"]) == 7
