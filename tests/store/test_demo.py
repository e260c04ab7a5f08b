"""The demo session directory: deterministic, complete, and valid by the reference's rules."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from store.demo.build import (
    DEMO_MARKER,
    DEMO_NOW,
    DEMO_NOW_UNIX,
    DEMO_VERSION,
    LIVE_LEASE_EXPIRES_AT,
    build_demo,
    ensure_demo,
)
from store.errors import StoreError
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.paths import default_demo_dir, knowledge_base_files

HEX16 = re.compile(r"^[0-9a-f]{16}$")
OWNER = re.compile(r"^pid-(\d+)-[0-9a-f]{32}$")
ACTIVE = ("created", "queued", "running", "waiting_for_approval", "waiting_for_question", "cancelling", "terminalizing")
SUCCESS = {"uploaded", "delivered", "unsupported"}


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo(tmp_path_factory.mktemp("demo") / "sessions")


@pytest.fixture(scope="module")
def db(demo_dir: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{demo_dir / 'sessions.db'}?immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def rows(conn: sqlite3.Connection, sql: str, *args: object) -> list[sqlite3.Row]:
    return conn.execute(sql, args).fetchall()


def dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table (FTS shadow tables and sqlite_* excluded), sorted."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        shadow = tuple(f"knowledge_chunk_fts_{s}" for s in ("data", "idx", "content", "docsize", "config"))
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names if n not in shadow}
    finally:
        conn.close()


def entries_by_session(db: sqlite3.Connection) -> dict[str, list[sqlite3.Row]]:
    out: dict[str, list[sqlite3.Row]] = defaultdict(list)
    for r in rows(db, "SELECT * FROM entries ORDER BY seq"):
        out[r["session_id"]].append(r)
    return out


# --------------------------------------------------------------------------------------------------------------
# determinism, layout, integrity
# --------------------------------------------------------------------------------------------------------------


def test_two_builds_hold_identical_rows(tmp_path: Path, demo_dir: Path) -> None:
    """A second build, in another process with another hash seed and another path, holds the same rows."""
    other = tmp_path / "elsewhere" / "demo"
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from store.demo.build import build_demo; "
                    "build_demo(Path(sys.argv[1]))", str(other)], check=True, env=env, cwd=Path(__file__).parents[2])
    assert dump(other / "sessions.db") == dump(demo_dir / "sessions.db")
    mine = [p.name for p in knowledge_base_files(demo_dir)]
    assert mine == [p.name for p in knowledge_base_files(other)] and mine
    for name in mine:
        assert dump(other / "knowledge-bases" / name) == dump(demo_dir / "knowledge-bases" / name)
    assert (other / DEMO_MARKER).read_bytes() == (demo_dir / DEMO_MARKER).read_bytes()


def test_layout_is_v43_and_files_pass_quick_check(demo_dir: Path) -> None:
    assert sorted(p.name for p in demo_dir.iterdir()) == sorted(["sessions.db", "knowledge-bases", "events", DEMO_MARKER])
    assert sorted(p.name for p in (demo_dir / "knowledge-bases").iterdir()) == ["atlas-notes.db", "harbor-docs.db"]
    with open_session_dir(demo_dir, OpenMode.SNAPSHOT) as sd:
        assert sd.schema.status == "current" and sd.schema.version == 43
        assert sd.db.quick_check() == "ok"
    for kb in knowledge_base_files(demo_dir):
        conn = sqlite3.connect(f"file:{kb}?immutable=1", uri=True)
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        conn.close()
    assert json.loads((demo_dir / DEMO_MARKER).read_text())["demoVersion"] == DEMO_VERSION


def test_no_staging_folders_are_left_beside_the_target(demo_dir: Path) -> None:
    assert [p.name for p in demo_dir.parent.iterdir()] == [demo_dir.name]


def test_content_has_no_host_name_and_nothing_after_demo_now(db: sqlite3.Connection) -> None:
    host = socket.gethostname()
    if len(host) >= 4:
        assert not rows(db, "SELECT 1 FROM entries WHERE instr(data, ?) LIMIT 1", host)
    for table, column in (("entries", "timestamp"), ("sessions", "timestamp"), ("session_runs", "started_at"),
                          ("session_runs", "updated_at"), ("session_run_events", "timestamp"),
                          ("delivery_operations", "updated_at"), ("conversation_turns", "started_at")):
        latest = db.execute(f"SELECT max({column}) FROM {table}").fetchone()[0]
        assert latest < DEMO_NOW, (table, column, latest)


# --------------------------------------------------------------------------------------------------------------
# sessions, entries, titles
# --------------------------------------------------------------------------------------------------------------


def test_sessions_work_dirs_and_projects(db: sqlite3.Connection) -> None:
    sessions = rows(db, "SELECT * FROM sessions")
    assert len(sessions) >= 40
    assert all(HEX16.match(s["id"]) for s in sessions)
    assert len({s["cwd"] for s in sessions}) == 3
    projects = rows(db, "SELECT * FROM projects")
    assert len(projects) == 2
    linked = rows(db, "SELECT project_id, count(*) AS n FROM session_metadata WHERE project_id IS NOT NULL GROUP BY project_id")
    assert {r["project_id"] for r in linked} == {p["id"] for p in projects}
    assert db.execute("SELECT count(*) FROM session_metadata WHERE pinned = 1").fetchone()[0] >= 2
    ids = {s["id"] for s in sessions}
    assert all(r["session_id"] in ids for r in rows(db, "SELECT session_id FROM session_metadata"))


def test_entries_follow_the_envelope_and_parent_chain(db: sqlite3.Connection) -> None:
    for sid, entries in entries_by_session(db).items():
        header = entries[0]
        assert header["type"] == "session" and header["id"] == sid and header["parent_id"] is None
        previous: str | None = None
        for e in entries[1:]:
            assert e["type"] != "session"
            assert HEX16.match(e["id"]), e["id"]
            assert e["parent_id"] == previous, (sid, e["seq"])
            data = json.loads(e["data"])
            assert (data["type"], data["id"], data["parentId"], data["timestamp"]) == (
                e["type"], e["id"], e["parent_id"], e["timestamp"])
            previous = e["id"]


def test_messages_have_tool_calls_results_errors_thinking_and_usage(db: sqlite3.Connection) -> None:
    calls: dict[str, str] = {}
    results = []
    thinking = usage = 0
    for r in rows(db, "SELECT data FROM entries WHERE type = 'message'"):
        msg = json.loads(r["data"])["message"]
        if msg["role"] == "assistant":
            usage += "usage" in msg
            for block in msg["contents"]:
                if block["type"] == "thinking":
                    thinking += 1
                elif block["type"] == "toolCall":
                    json.loads(block["toolCall"]["arguments"])
                    calls[block["toolCall"]["id"]] = block["toolCall"]["name"]
        elif msg["role"] == "toolResult":
            results.append(msg)
    assert thinking > 100 and usage > 1000
    assert {"read_file", "bash", "edit", "grep", "write_file"} <= set(calls.values())
    assert all(calls[m["toolCallId"]] == m["toolName"] for m in results)
    assert sum(bool(m.get("isError")) for m in results) >= 20


def test_titles_newest_session_info_wins(db: sqlite3.Connection) -> None:
    infos = defaultdict(list)
    for r in rows(db, "SELECT session_id, data FROM entries WHERE type = 'session_info' ORDER BY seq"):
        infos[r["session_id"]].append(json.loads(r["data"]))
    retitled = [v for v in infos.values() if len(v) >= 2 and v[-1]["source"] == "manual"]
    assert len(retitled) >= 3
    assert len(infos) >= 38  # a few sessions are never titled (the list shows their preview)
    assert any(re.search(r"[\u4e00-\u9fff]", v[-1]["name"]) for v in infos.values())


def test_one_session_has_more_than_5000_entries_with_chained_compactions(db: sqlite3.Connection) -> None:
    sid, count = db.execute("SELECT session_id, count(*) AS n FROM entries GROUP BY session_id ORDER BY n DESC").fetchone()
    assert count >= 5000
    entries = entries_by_session(db)[sid]
    position = {e["id"]: i for i, e in enumerate(entries)}
    compactions = [json.loads(e["data"]) for e in entries if e["type"] == "compaction"]
    assert len(compactions) >= 3
    for n, c in enumerate(compactions):
        assert c["summaryVersion"] == n + 1 and c["tokensBefore"] > 0 and c["summary"]
        kept = c["firstKeptEntryId"]
        assert entries[position[kept]]["type"] == "message"
        assert entries[position[kept] - 1]["id"] == c["lastSummarizedEntryId"]
        if n:
            assert c["previousCompactionId"] == compactions[n - 1]["id"]
            assert position[kept] > position[compactions[n - 1]["firstKeptEntryId"]]
        else:
            assert "previousCompactionId" not in c
    assert db.execute("SELECT count(*) FROM conversation_turns WHERE session_id = ?", (sid,)).fetchone()[0] >= 150


def test_a_compaction_names_a_kept_entry_that_does_not_exist(db: sqlite3.Connection) -> None:
    ids = {r[0] for r in db.execute("SELECT id FROM entries")}
    missing = [json.loads(r[0]) for r in db.execute("SELECT data FROM entries WHERE type = 'compaction'")
               if json.loads(r[0])["firstKeptEntryId"] not in ids]
    assert len(missing) == 1 and missing[0]["firstKeptEntryId"]


def test_content_overrides_target_messages_of_their_session(db: sqlite3.Connection) -> None:
    overrides = rows(db, "SELECT session_id, data FROM entries WHERE type = 'content_override' ORDER BY seq")
    assert len(overrides) >= 3
    targets = Counter()
    roles = set()
    for r in overrides:
        data = json.loads(r["data"])
        assert data["reason"] and data["code"] and data["message"]["role"]
        target = db.execute("SELECT session_id, type, data FROM entries WHERE id = ?", (data["targetEntryId"],)).fetchone()
        assert target is not None and target[0] == r["session_id"] and target[1] == "message"
        roles.add(json.loads(target[2])["message"]["role"])
        targets[data["targetEntryId"]] += 1
    assert "toolResult" in roles and "user" in roles
    assert max(targets.values()) >= 2  # one target overridden twice: the later one wins
    refused = [json.loads(r["data"]) for r in overrides if json.loads(r["data"])["message"]["role"] == "toolResult"]
    assert any("refused" in d["reason"] for d in refused)


# --------------------------------------------------------------------------------------------------------------
# turns, runs, leases, recovery
# --------------------------------------------------------------------------------------------------------------


def test_turn_rows_match_their_entries(db: sqlite3.Connection) -> None:
    by_seq = {r["seq"]: r for r in rows(db, "SELECT seq, session_id, type, data FROM entries WHERE type IN ('turn_start','turn_end')")}
    turns = rows(db, "SELECT * FROM conversation_turns")
    assert len(turns) >= 300
    run_ids = {r[0] for r in db.execute("SELECT id FROM session_runs")}
    open_per_session = Counter()
    for t in turns:
        start = by_seq[t["start_seq"]]
        data = json.loads(start["data"])
        assert start["type"] == "turn_start" and start["session_id"] == t["session_id"] and data["turnId"] == t["id"]
        assert data["runId"] in run_ids
        if t["status"] == "open":
            open_per_session[t["session_id"]] += 1
            assert t["end_seq"] is None and t["ended_at"] is None
        else:
            end = by_seq[t["end_seq"]]
            end_data = json.loads(end["data"])
            assert end["type"] == "turn_end" and end_data["turnId"] == t["id"] and end_data["status"] == t["status"]
            assert t["end_seq"] > t["start_seq"]
    assert max(open_per_session.values()) == 1 and len(open_per_session) == 3
    statuses = {t["status"] for t in turns}
    assert {"completed", "failed", "cancelled", "open"} <= statuses


def test_runs_events_and_statuses(db: sqlite3.Connection) -> None:
    statuses = Counter(r[0] for r in db.execute("SELECT status FROM session_runs"))
    assert statuses["completed"] > 300 and statuses["failed"] >= 2 and statuses["cancelled"] >= 1
    per_session = Counter(r[0] for r in db.execute(
        f"SELECT session_id FROM session_runs WHERE status IN ({','.join('?' * len(ACTIVE))})", ACTIVE))
    assert per_session and max(per_session.values()) == 1
    events = Counter(r[0] for r in db.execute("SELECT event_type FROM session_run_events"))
    assert {"run_started", "model_request", "tool_call", "completed", "failed", "cancelled", "recovered"} <= set(events)
    no_events = db.execute("SELECT count(*) FROM session_runs r WHERE NOT EXISTS "
                           "(SELECT 1 FROM session_run_events e WHERE e.run_id = r.id)").fetchone()[0]
    assert no_events == 0
    retry = rows(db, "SELECT * FROM session_runs WHERE retry_of <> ''")
    assert retry and all(r["attempt"] == 2 for r in retry)
    original = db.execute("SELECT status, intent_id FROM session_runs WHERE id = ?", (retry[0]["retry_of"],)).fetchone()
    assert original[0] == "failed" and original[1] == retry[0]["intent_id"]


def test_leases_one_row_per_session_with_valid_owners(db: sqlite3.Connection) -> None:
    leases = rows(db, "SELECT * FROM session_runtime_leases")
    assert len(leases) >= 20
    for lease in leases:
        m = OWNER.match(lease["owner_instance_id"])
        assert m and int(m.group(1)) == lease["owner_pid"] and lease["owner_kind"] == "process"
        assert re.fullmatch(r"[0-9a-f]{64}", lease["lease_token_hash"]) and lease["epoch"] >= 1
        assert lease["state"] in ("active", "released")
        assert lease["purpose"] in ("run", "admission", "execution", "recovery", "mutation", "fork")


def test_orphaned_run_under_an_expired_lease_with_a_pending_approval(db: sqlite3.Connection) -> None:
    found = rows(db, """
        SELECT r.id AS run_id, r.session_id, l.* FROM session_runs r
        JOIN session_runtime_leases l ON l.session_id = r.session_id
        WHERE r.status = 'running' AND l.state = 'active' AND l.expires_at < ? AND l.run_id = r.id
          AND NOT EXISTS (SELECT 1 FROM session_run_recoveries x WHERE x.run_id = r.id)""", DEMO_NOW_UNIX)
    assert len(found) == 1
    orphan = found[0]
    assert orphan["purpose"] == "execution" and orphan["epoch"] == 3 and OWNER.match(orphan["owner_instance_id"])
    assert orphan["heartbeat_at"] <= orphan["expires_at"] and orphan["acquired_at"] <= orphan["heartbeat_at"]
    assert db.execute("SELECT count(*) FROM conversation_turns WHERE session_id = ? AND status = 'open'",
                      (orphan["session_id"],)).fetchone()[0] == 1
    last = db.execute("SELECT event_type, status, data FROM session_run_events WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                      (orphan["run_id"],)).fetchone()
    assert last[0] == "approval_resolved" and last[1] == "pending" and json.loads(last[2])["decisionId"]


def test_run_under_a_live_lease(db: sqlite3.Connection) -> None:
    live = rows(db, """SELECT r.status, l.* FROM session_runtime_leases l JOIN session_runs r ON r.id = l.run_id
                       WHERE l.state = 'active' AND l.expires_at >= ?""", LIVE_LEASE_EXPIRES_AT)
    assert len(live) == 1 and live[0]["status"] == "running" and live[0]["purpose"] == "execution"


def test_failed_recovery_waits_to_retry(db: sqlite3.Connection) -> None:
    failed = rows(db, "SELECT * FROM session_run_recoveries WHERE state = 'failed'")
    assert len(failed) == 1
    rec = failed[0]
    assert rec["attempt"] == 2 and rec["next_retry_at"] and rec["last_error"] and rec["reason_code"] == "owner_lost"
    run = db.execute("SELECT status, session_id FROM session_runs WHERE id = ?", (rec["run_id"],)).fetchone()
    assert run[0] in ACTIVE and run[1] == rec["session_id"]
    lease = db.execute("SELECT epoch, purpose FROM session_runtime_leases WHERE session_id = ?", (rec["session_id"],)).fetchone()
    assert lease[1] == "recovery" and lease[0] == rec["previous_lease_epoch"] + 1
    done = rows(db, "SELECT * FROM session_run_recoveries WHERE state = 'completed'")
    assert done and db.execute("SELECT count(*) FROM session_run_events WHERE id = ?",
                               (f"recovery_{done[0]['run_id']}_failed",)).fetchone()[0] == 1


# --------------------------------------------------------------------------------------------------------------
# forks
# --------------------------------------------------------------------------------------------------------------


def test_forks_copy_the_prefix_with_new_ids_and_remapped_references(db: sqlite3.Connection) -> None:
    by_session = entries_by_session(db)
    children = rows(db, "SELECT * FROM sessions WHERE parent_session <> ''")
    assert {c["fork_kind"] for c in children} == {"session", "message"}
    assert any(c["parent_session"] in {x["id"] for x in children} for c in children)  # a fork of a fork
    all_ids = {r[0] for r in db.execute("SELECT id FROM entries")}
    for child in children:
        source = [e for e in by_session[child["parent_session"]] if e["seq"] <= child["fork_boundary_seq"]]
        copied = by_session[child["id"]][: child["seed_length"]]
        assert child["seed_length"] == len(source) > 3
        assert source[-1]["seq"] == child["fork_boundary_seq"]
        assert [e["type"] for e in copied] == [e["type"] for e in source]
        assert [e["timestamp"] for e in copied] == [e["timestamp"] for e in source]
        assert not {e["id"] for e in copied[1:]} & {e["id"] for e in source}
        header = json.loads(copied[0]["data"])
        assert header["parentSession"] == child["parent_session"] and header["forkKind"] == child["fork_kind"]
        assert header["forkBoundarySeq"] == child["fork_boundary_seq"] and header["seedLength"] == child["seed_length"]
        own_ids = {e["id"] for e in by_session[child["id"]]}
        for e in by_session[child["id"]]:
            data = json.loads(e["data"])
            for key in ("firstKeptEntryId", "previousCompactionId", "lastSummarizedEntryId", "targetEntryId"):
                if data.get(key) in all_ids:
                    assert data[key] in own_ids
        titles = [json.loads(e["data"])["name"] for e in by_session[child["id"]] if e["type"] == "session_info"]
        parent_titles = [json.loads(e["data"])["name"] for e in by_session[child["parent_session"]]
                         if e["type"] == "session_info" and e["seq"] < copied[0]["seq"]]  # its title when forked
        assert re.fullmatch(re.escape(parent_titles[-1]) + r" \(\d+\)", titles[-1])
        turns = rows(db, "SELECT * FROM conversation_turns WHERE session_id = ?", child["id"])
        seqs = {e["seq"]: e for e in by_session[child["id"]]}
        assert turns and all(seqs[t["start_seq"]]["type"] == "turn_start" for t in turns)
        req = rows(db, "SELECT * FROM session_fork_requests WHERE child_session_id = ?", child["id"])
        assert len(req) == 1 and req[0]["source_session_id"] == child["parent_session"]
        assert re.fullmatch(r"[0-9a-f]{64}", req[0]["request_key_hash"])
        assert req[0]["request_fingerprint"].startswith(child["parent_session"] + "|")
    message_fork = next(c for c in children if c["fork_kind"] == "message")
    req = rows(db, "SELECT request_fingerprint FROM session_fork_requests WHERE child_session_id = ?", message_fork["id"])[0]
    at_seq = int(req[0].split("|")[1])
    at = db.execute("SELECT data FROM entries WHERE seq = ?", (at_seq,)).fetchone()
    assert json.loads(at[0])["message"]["role"] == "assistant" and at_seq < message_fork["fork_boundary_seq"]


# --------------------------------------------------------------------------------------------------------------
# channels and deliveries
# --------------------------------------------------------------------------------------------------------------


def test_channel_sessions_carry_their_binding(db: sqlite3.Connection) -> None:
    channel = rows(db, "SELECT * FROM sessions WHERE channel_type <> 'local'")
    assert {c["channel_type"] for c in channel} == {"wechat", "feishu"}
    for c in channel:
        assert c["channel_id"]
        header = json.loads(db.execute("SELECT data FROM entries WHERE id = ?", (c["id"],)).fetchone()[0])
        assert (header["channelType"], header["channelId"]) == (c["channel_type"], c["channel_id"])


def test_delivery_outbox_obeys_ordering_and_aggregation(db: sqlite3.Connection) -> None:
    intents = rows(db, "SELECT i.*, s.channel_type FROM delivery_intents i JOIN sessions s ON s.id = i.session_id")
    assert len(intents) >= 5
    ops = rows(db, "SELECT * FROM delivery_operations")
    by_id = {o["id"]: o for o in ops}
    for intent in intents:
        assert intent["platform"] == intent["channel_type"]
        mine = sorted((o for o in ops if o["intent_id"] == intent["id"]), key=lambda o: o["sequence"])
        assert [o["sequence"] for o in mine] == list(range(1, len(mine) + 1))
        assert len({o["operation_key"] for o in mine}) == len(mine)
        for o in mine:
            if o["depends_on"]:
                dep = by_id[o["depends_on"]]
                assert dep["intent_id"] == o["intent_id"] and dep["sequence"] < o["sequence"]
            if o["status"] == "retry_wait":
                assert o["next_attempt_at"] is not None
        statuses = [o["status"] for o in mine]
        resolved = all(s in SUCCESS | {"failed", "uncertain"} for s in statuses)
        if all(s in SUCCESS for s in statuses):
            expected = "delivered"
        elif resolved and "failed" in statuses:
            expected = "failed"
        elif resolved and "uncertain" in statuses:
            expected = "uncertain"
        else:
            expected = "pending"
        assert intent["status"] == expected, (intent["id"], statuses)
    seen = {(o["status"], o["failure_code"]) for o in ops}
    for pair in [("failed", "delivery_retries_exhausted"), ("failed", "transport_error"), ("failed", "dependency_failed"),
                 ("uncertain", "dependency_uncertain"), ("retry_wait", "transport_error"), ("delivered", "")]:
        assert pair in seen, pair
    assert {"delivered", "failed", "uncertain", "pending"} <= {i["status"] for i in intents}
    artifacts = [o for o in ops if o["artifact_id"]]
    assert artifacts
    for o in artifacts:
        att = db.execute("SELECT a.session_id, a.run_id FROM session_attachments a WHERE a.id = ?", (o["artifact_id"],)).fetchone()
        intent = next(i for i in intents if i["id"] == o["intent_id"])
        assert att is not None and (att[0], att[1]) == (intent["session_id"], intent["run_id"])


# --------------------------------------------------------------------------------------------------------------
# knowledge bases
# --------------------------------------------------------------------------------------------------------------


def test_knowledge_base_has_an_active_snapshot_and_working_fts(demo_dir: Path) -> None:
    files = knowledge_base_files(demo_dir)
    assert len(files) == 2
    indexed = 0
    for path in files:
        conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        conn.execute("PRAGMA foreign_keys = ON")
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert [r[0] for r in conn.execute("SELECT version FROM knowledge_store_schema")] in ([1], [1, 2, 3, 4])
        base_id, active = conn.execute("SELECT id, active_snapshot_id FROM knowledge_bases").fetchone()
        assert path.stem == base_id
        if not active:
            assert conn.execute("SELECT count(*) FROM knowledge_index_snapshots WHERE status = 'completed'").fetchone()[0] == 0
            conn.close()
            continue
        indexed += 1
        status, schema_version = conn.execute(
            "SELECT status, schema_version FROM knowledge_index_snapshots WHERE id = ?", (active,)).fetchone()
        assert (status, schema_version) == ("completed", 2)
        assert conn.execute("SELECT count(*) FROM knowledge_index_snapshots").fetchone()[0] == 1  # others pruned
        for table in ("knowledge_files", "knowledge_chunks", "knowledge_nodes", "knowledge_edges", "knowledge_evidence"):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE snapshot_id = ?", (active,)).fetchone()[0] > 3, table
        assert conn.execute("SELECT count(*) FROM knowledge_chunk_fts").fetchone()[0] == \
            conn.execute("SELECT count(*) FROM knowledge_chunks").fetchone()[0]
        query = ("SELECT c.text, kf.relative_path FROM knowledge_chunk_fts AS f JOIN knowledge_chunks AS c ON c.id = f.chunk_id "
                 "JOIN knowledge_files AS kf ON kf.id = c.file_id WHERE f.snapshot_id = ? AND knowledge_chunk_fts MATCH ? "
                 "ORDER BY bm25(knowledge_chunk_fts), c.ordinal LIMIT 8")
        hits = conn.execute(query, (active, '"pgx"')).fetchall()
        assert hits and any("pgx" in text for text, _ in hits)
        cjk = conn.execute(query, (active, '"部署"')).fetchall()  # a CJK bigram term (reference 15.3)
        assert cjk and all("部署" in text for text, _ in cjk)
        assert any(p.endswith(".zh.md") for _, p in cjk)
        fts_text = conn.execute("SELECT f.text FROM knowledge_chunk_fts f JOIN knowledge_chunks c ON c.id = f.chunk_id "
                                "WHERE c.text LIKE '%部署流程%' LIMIT 1").fetchone()[0]
        assert "部署 署流 流程" in fts_text
        canonical = conn.execute("SELECT text FROM knowledge_chunks WHERE text LIKE '%部署流程%' LIMIT 1").fetchone()[0]
        assert "部署流程" in canonical and "部署 署流" not in canonical
        for node_id, edge_id in conn.execute("SELECT node_id, edge_id FROM knowledge_evidence"):
            assert node_id or edge_id
            if node_id:
                assert conn.execute("SELECT 1 FROM knowledge_nodes WHERE id = ?", (node_id,)).fetchone()
            if edge_id:
                assert conn.execute("SELECT 1 FROM knowledge_edges WHERE id = ?", (edge_id,)).fetchone()
        conn.close()
    assert indexed == 1


# --------------------------------------------------------------------------------------------------------------
# building and reusing
# --------------------------------------------------------------------------------------------------------------


def test_ensure_demo_reuses_a_current_demo_and_rebuilds_an_outdated_one(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "demo"
    assert ensure_demo(target) == target
    db_file = target / "sessions.db"
    before = os.stat(db_file)
    assert ensure_demo(target) == target
    after = os.stat(db_file)
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert not (target / "sessions.db-wal").exists()

    marker = target / DEMO_MARKER
    marker.write_text(json.dumps({"demoVersion": DEMO_VERSION - 1}))
    ensure_demo(target)
    assert json.loads(marker.read_text())["demoVersion"] == DEMO_VERSION
    assert os.stat(db_file).st_ino != before.st_ino
    assert sorted(p.name for p in target.parent.iterdir()) == ["demo"]


def test_ensure_demo_defaults_to_the_cache_demo_dir() -> None:
    path = ensure_demo()
    assert path == default_demo_dir() and (path / "sessions.db").is_file()


def test_build_refuses_to_replace_a_directory_that_is_not_a_demo(tmp_path: Path) -> None:
    real = tmp_path / "sessions"
    real.mkdir()
    (real / "sessions.db").write_bytes(b"")
    with pytest.raises(StoreError):
        build_demo(real, force=True)
    assert (real / "sessions.db").read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["sessions"]


def test_build_without_force_refuses_an_existing_demo(tmp_path: Path) -> None:
    target = build_demo(tmp_path / "demo")
    before = os.stat(target / "sessions.db").st_ino
    with pytest.raises(StoreError):
        build_demo(target)
    build_demo(target, force=True)
    assert os.stat(target / "sessions.db").st_ino != before


def test_a_failed_build_leaves_no_half_built_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.demo.build as demo

    target = build_demo(tmp_path / "demo")
    marker = (target / DEMO_MARKER).read_bytes()
    inode = os.stat(target / "sessions.db").st_ino

    def broken(*args: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(demo, "_write_knowledge", broken)
    with pytest.raises(RuntimeError):
        build_demo(target, force=True)  # the old demo stays as it was
    assert os.stat(target / "sessions.db").st_ino == inode and (target / DEMO_MARKER).read_bytes() == marker
    with pytest.raises(RuntimeError):
        build_demo(tmp_path / "fresh")  # nothing appears at all
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
