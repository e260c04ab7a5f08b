"""Keyset pages of the checkpoint list and of the captured-session catalog: one query per page at any depth."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import agentstate
from store.agents.checkpoint_model import CheckpointInfo
from store.agents.checkpoint_read import checkpoint_page
from store.agents.native_catalog import (
    AgentSessionSummary,
    agent_session_counts,
    agent_session_page,
    list_agent_sessions,
)
from store.mothx import db as dbmod
from store.mothx.sessiondir import SessionDir, open_session_dir

AGENT = "claude-code"
TEMPLATE = "00000000-0000-4000-8000-000000000000"
COUNT = 2000


def claude_lines(n: int) -> list[str]:
    out = []
    for i in range(1, n + 1):
        rec = {
            "uuid": f"00000000-0000-4000-8000-{i:012d}", "sessionId": TEMPLATE, "cwd": "/home/u/repo",
            "type": "user" if i % 2 else "assistant", "timestamp": f"2026-02-23T12:00:{i:02d}Z",
            "message": {"role": "user", "content": f"prompt {i}"} if i % 2 else
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]},
        }
        out.append(json.dumps(rec, separators=(",", ":")))
    return out


def capture_template(sd: SessionDir, lines: list[str]) -> None:
    import hashlib

    fence = agentstate.begin_run(sd, AGENT, TEMPLATE)
    h = hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()
    path = "projects/repo/session.jsonl"
    state = agentstate.PersistedSessionState(
        agent_id=AGENT, agent_session_id=TEMPLATE, through_run_id=fence.run_id, cwd="/home/u/repo",
        transcript_path=path, runtime_fencing_token=fence.fencing_token, file_count=1, record_count=len(lines),
        files=(agentstate.PersistedSessionStateFile(path, len(lines), h),),
    )
    stream = [agentstate.SessionStateRecord(path, n, line) for n, line in enumerate(lines, start=1)]
    agentstate.replace(sd, fence, state, stream)
    agentstate.publish(sd, fence)


def clone(sd: SessionDir, count: int) -> None:
    """``count`` copies of the template checkpoint by raw SQL (agent session ids ``<n>-<template>``), each
    with its own last record time (minutes and seconds vary, so that some times repeat)."""
    conn = sqlite3.connect(agentstate.state_db_path(sd))
    try:
        with conn:
            conn.execute("CREATE TEMP TABLE n AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
                         f"WHERE i < {count}) SELECT i FROM r")
            t = conn.execute("SELECT session_id FROM agent_state_sessions WHERE agent_session_id = ?",
                             (TEMPLATE,)).fetchone()[0]
            new_sid = "printf('%s-%05d', s.session_id, n.i)"
            new_asid = "printf('%05d-%s', n.i, s.agent_session_id)"
            conn.execute(
                f"INSERT INTO agent_state_sessions SELECT {new_sid}, s.agent_id, {new_asid}, s.source_root, "
                "s.runtime_fencing_token, s.runtime_config_epoch, s.created_at, s.updated_at "
                "FROM agent_state_sessions s, n WHERE s.session_id = ?", (t,))
            for table, cols in (
                ("agent_state_runs", "run_id, fencing_token, status, created_at, finished_at"),
                ("agent_state_publications", "run_id, checkpoint_reset, updated_at"),
            ):
                conn.execute(f"INSERT INTO {table} SELECT {new_sid}, {cols} FROM {table} s, n WHERE s.session_id = ?",
                             (t,))
            conn.execute(
                f"INSERT INTO agent_state_versions SELECT {new_sid}, s.through_run_id, s.agent_id, {new_asid}, "
                "s.cwd, s.transcript_path, s.runtime_fencing_token, s.file_count, s.record_count, s.file_shapes, "
                "s.created_at, s.updated_at FROM agent_state_versions s, n WHERE s.session_id = ?", (t,))
            conn.execute(
                f"INSERT INTO agent_state_lines SELECT {new_sid}, s.file_path, s.line_number, "
                "replace(s.content, 'T12:00:', printf('T12:%02d:', n.i % 47)), s.content_bytes "
                "FROM agent_state_lines s, n WHERE s.session_id = ?", (t,))
    finally:
        conn.close()


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionDir]:
    sd = open_session_dir(tmp_path_factory.mktemp("pages") / "sessions", create=True)
    capture_template(sd, claude_lines(12))
    clone(sd, COUNT)
    yield sd
    sd.close()


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the store runs on a connection it opens from now on."""
    statements: list[str] = []
    real = dbmod._connect

    def connect(target: str, *, uri: bool) -> sqlite3.Connection:
        conn = real(target, uri=uri)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(dbmod, "_connect", connect)
    return statements


def data_queries(statements: list[str]) -> list[str]:
    """The statements that read checkpoint rows (not the schema checks, pragmas or transaction control)."""
    return [s for s in statements if "agent_state_sessions" in s]


def test_checkpoint_pages_walk_both_ways_and_match_the_list(many: SessionDir) -> None:
    every = agentstate.list_checkpoints(many)
    assert len(every) == COUNT + 1
    keys = [(i.agent_id, i.agent_session_id) for i in every]
    assert keys == sorted(keys)
    walked: list[CheckpointInfo] = []
    page = checkpoint_page(many, limit=333)
    while True:
        walked.extend(page.rows)
        assert [(r.agent_id, r.agent_session_id) for r in page.rows] == list(page.keys)
        if not page.more:
            break
        page = checkpoint_page(many, after=page.last_key, limit=333)
    assert walked == every
    back: list[CheckpointInfo] = []
    page = checkpoint_page(many, before=(AGENT + "~", ""), limit=400)
    while True:
        back[:0] = page.rows
        if not page.more:
            break
        page = checkpoint_page(many, before=page.first_key, limit=400)
    assert back == every
    assert every[5].state is not None and every[5].state.record_count == 12 and every[5].versions == 1
    assert checkpoint_page(many, "codex").rows == ()
    assert agentstate.checkpoint_info(many, AGENT, every[77].agent_session_id) == every[77]
    with pytest.raises(ValueError):
        checkpoint_page(many, after=keys[0], before=keys[1])


def test_a_deep_checkpoint_page_is_one_query(many: SessionDir, traced: list[str]) -> None:
    keys = [(i.agent_id, i.agent_session_id) for i in agentstate.list_checkpoints(many)]
    counts = []
    for after in (None, keys[10], keys[1960]):
        traced.clear()
        page = checkpoint_page(many, after=after, limit=50)
        assert len(page.rows) == (50 if after != keys[1960] else COUNT - 1960)
        assert len(data_queries(traced)) == 1, data_queries(traced)
        counts.append(len(traced))
    assert len(set(counts)) == 1, counts  # every statement, schema checks included: the same at any depth
    traced.clear()
    page = checkpoint_page(many, before=keys[1990], limit=50)
    assert page.rows[-1].agent_session_id == keys[1989][1] and len(data_queries(traced)) == 1
    traced.clear()
    agentstate.checkpoint_info(many, AGENT, keys[1500][1])
    assert len(data_queries(traced)) == 1


def test_catalog_pages_are_newest_first_and_match_the_list(many: SessionDir) -> None:
    every = list_agent_sessions(many, AGENT)
    assert len(every) == COUNT + 1
    order = [(s.last_record_at, s.agent_session_id) for s in every]
    assert order == sorted(order, reverse=True)
    assert all(s.openable and s.title == "prompt 1" and s.records == 12 for s in every)
    walked: list[AgentSessionSummary] = []
    page = agent_session_page(many, AGENT, limit=301)
    while True:
        walked.extend(page.rows)
        if not page.more:
            break
        page = agent_session_page(many, AGENT, after=page.last_key, limit=301)
    assert walked == every
    tail = agent_session_page(many, AGENT, after=page.first_key, limit=5)
    assert list(tail.rows) == every[len(walked) - len(page.rows) + 1:][:5]
    back = agent_session_page(many, AGENT, before=page.first_key, limit=10)
    assert list(back.rows) == every[len(walked) - len(page.rows) - 10:len(walked) - len(page.rows)] and back.more
    assert agent_session_counts(many) == {AGENT: COUNT + 1}


def test_a_deep_catalog_page_is_one_query(many: SessionDir, traced: list[str]) -> None:
    first = agent_session_page(many, AGENT, limit=1000)
    counts = []
    for after in (None, first.keys[20], first.keys[990]):
        traced.clear()
        page = agent_session_page(many, AGENT, after=after, limit=40)
        assert len(page.rows) == 40 and all(r.title for r in page.rows)
        assert len(data_queries(traced)) == 1, data_queries(traced)
        counts.append(len(traced))
    assert len(set(counts)) == 1, counts
    traced.clear()
    agent_session_counts(many)
    assert len(data_queries(traced)) == 1


def test_catalog_rows_that_cannot_open_and_foreign_values(tmp_path: Path) -> None:
    sd = open_session_dir(tmp_path / "sessions", create=True)
    try:
        capture_template(sd, claude_lines(4))
        clone(sd, 3)
        conn = sqlite3.connect(agentstate.state_db_path(sd))
        with conn:
            sids = [r[0] for r in conn.execute("SELECT session_id FROM agent_state_sessions ORDER BY session_id")]
            conn.execute("UPDATE agent_state_publications SET checkpoint_reset = 1 WHERE session_id = ?", (sids[1],))
            conn.execute("UPDATE agent_state_versions SET file_shapes = '[not json' WHERE session_id = ?", (sids[2],))
            conn.execute("UPDATE agent_state_lines SET content = x'ff00' WHERE session_id = ? AND line_number = 4",
                         (sids[3],))
        conn.close()
        rows = {r.agent_session_id: r for r in list_agent_sessions(sd, AGENT)}
        assert len(rows) == 4
        assert not rows["00001-" + TEMPLATE].openable and "reset" in rows["00001-" + TEMPLATE].problem
        assert not rows["00002-" + TEMPLATE].openable and rows["00002-" + TEMPLATE].problem
        assert rows["00003-" + TEMPLATE].openable and rows["00003-" + TEMPLATE].last_record_at.endswith(":03Z")
        assert rows[TEMPLATE].last_record_at == "2026-02-23T12:00:04Z"
    finally:
        sd.close()


def test_find_checkpoints_by_prefix_is_one_query(many: SessionDir, traced: list[str]) -> None:
    from store.agents.checkpoint_read import _prefix_end, find_checkpoints

    found = find_checkpoints(many, AGENT, "0199", limit=3)
    assert found.total == 10 and [r.agent_session_id[:5] for r in found.rows] == ["01990", "01991", "01992"]
    assert len(data_queries(traced)) == 1
    exact = find_checkpoints(many, AGENT, TEMPLATE)
    assert exact.total == 1 and exact.exact(TEMPLATE) is not None
    assert find_checkpoints(many, AGENT, "01990-" + TEMPLATE).exact("01990-" + TEMPLATE) is not None
    assert find_checkpoints(many, AGENT, "zz").total == 0 and find_checkpoints(many, "codex", "0").rows == ()
    assert _prefix_end("ab") == "ac" and _prefix_end("a\U0010ffff") == "b" and _prefix_end("\ud7ff") == "\ue000"
    assert _prefix_end("") is None
