"""A sessions.db made with the reference DDL and raw SQL (no code of ours writes it) lists and replays
correctly in all three open modes, and every file of the directory is byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from tui.cli import main

REFERENCE_DDL = Path(__file__).resolve().parents[2] / "shared" / "reference" / "sessions-db-v43.sql"
BUNDLED_DDL = Path(__file__).resolve().parents[1] / "store" / "sql"

# Written out here on purpose (not imported from store.mothx.schema): this test stands for a foreign writer.
V43_MIGRATIONS = [
    (16, "add_channel_binding_columns"), (17, "create_session_channel_tools"), (18, "create_session_runs"),
    (19, "create_response_runtime_tables"), (20, "harden_response_runtime_identity"),
    (21, "cleanup_orphan_channel_tools"), (22, "create_channel_tool_generations"), (23, "create_esm_guidance"),
    (24, "index_entries_session_type"), (25, "create_projects_and_session_metadata"),
    (26, "add_session_display_mode"), (27, "add_run_retry_metadata"), (28, "add_run_context_usage"),
    (29, "add_session_fork_and_runtime_lease_state"), (30, "create_session_attachments_and_deliveries"),
    (31, "create_session_run_recoveries"), (32, "create_input_resources"), (33, "create_runtime_submissions"),
    (34, "create_delivery_intents_and_operations"), (35, "create_input_resource_events"),
    (41, "add_sessions_expert_id"), (42, "create_desktop_knowledge_base_graph"),
    (43, "add_delivery_operations_retry_window_started_at"),
]

S1, S2, S3 = "a1b2c3d4e5f60718", "0f1e2d3c4b5a6978", "77aa88bb99cc00dd"


def _ddl() -> str:
    if REFERENCE_DDL.is_file():
        return REFERENCE_DDL.read_text()
    return "\n".join(p.read_text() for p in sorted(BUNDLED_DDL.glob("sessions_v43_*.sql"), reverse=True))


def _entry(conn: sqlite3.Connection, session: str, eid: str, etype: str, parent: str | None, ts: str, **fields: object) -> None:
    data = {"type": etype, "id": eid, "parentId": parent, "timestamp": ts, **fields}
    conn.execute(
        "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
        (session, eid, etype, parent, ts, json.dumps(data)),
    )


def _build(folder: Path) -> Path:
    folder.mkdir(parents=True)
    conn = sqlite3.connect(folder / "sessions.db")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(_ddl())
    conn.executemany("INSERT INTO schema_migrations(version, name) VALUES (?, ?)", V43_MIGRATIONS)
    conn.execute(
        "INSERT INTO sessions (id, cwd, timestamp, version, channel_type, channel_id) VALUES (?,?,?,?,?,?)",
        (S1, "/srv/app", "2026-03-01T09:00:00Z", 3, "local", ""),
    )
    _entry(conn, S1, "e000000000000001", "session", None, "2026-03-01T09:00:00Z", version=3, cwd="/srv/app")
    _entry(conn, S1, "e000000000000002", "message", "e000000000000001", "2026-03-01T09:00:01Z",
           message={"role": "user", "content": "Why does the build fail on CI?"})
    _entry(conn, S1, "e000000000000003", "message", "e000000000000002", "2026-03-01T09:00:05Z",
           message={"role": "assistant", "contents": [
               {"type": "thinking", "thinking": "Check the log first."},
               {"type": "text", "text": "Let me read the CI log."},
               {"type": "toolCall", "toolCall": {"id": "call_1", "name": "read_file", "kind": "function",
                                                 "arguments": "{\"path\": \"ci.log\"}"}}]})
    _entry(conn, S1, "e000000000000004", "message", "e000000000000003", "2026-03-01T09:00:06Z",
           message={"role": "toolResult", "toolCallId": "call_1", "toolName": "read_file", "isError": True,
                    "content": "ENOENT: ci.log"})
    _entry(conn, S1, "e000000000000005", "message", "e000000000000004", "2026-03-01T09:00:09Z",
           message={"role": "assistant", "content": "The log is missing; the job never started."})
    _entry(conn, S1, "e000000000000006", "content_override", "e000000000000005", "2026-03-01T09:01:00Z",
           targetEntryId="e000000000000004", reason="provider refused content", code="content_refused",
           message={"role": "toolResult", "toolCallId": "call_1", "toolName": "read_file", "content": "[withheld]"})
    _entry(conn, S1, "e000000000000007", "compaction", "e000000000000006", "2026-03-01T09:02:00Z",
           summary="User asked about a CI failure; the log was missing.", firstKeptEntryId="e000000000000004",
           tokensBefore=1200, summaryVersion=1, lastSummarizedEntryId="e000000000000003")
    _entry(conn, S1, "e000000000000008", "session_info", "e000000000000007", "2026-03-01T09:02:01Z",
           name="CI failure", source="auto")
    _entry(conn, S1, "e000000000000009", "message", "e000000000000008", "2026-03-01T09:03:00Z",
           message={"role": "user", "content": "Thanks"})
    conn.execute(
        "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
        (S1, "e00000000000000a", "message", "e000000000000009", "2026-03-01T09:03:01Z", "{not json"),
    )
    conn.execute(
        "INSERT INTO sessions (id, cwd, timestamp, channel_type, channel_id) VALUES (?,?,?,?,?)",
        (S2, "/srv/bot", "2026-03-02T10:00:00Z", "wechat", "wx-room-1"),
    )
    _entry(conn, S2, "f000000000000001", "message", None, "2026-03-02T10:00:01Z",
           message={"role": "user", "content": "你好, what's the weather"})
    conn.execute(
        "INSERT INTO sessions (id, cwd, timestamp, parent_session, channel_type, channel_id, fork_boundary_seq, "
        "seed_length, fork_kind) VALUES (?,?,?,?,?,?,?,?,?)",
        (S3, "/srv/app", "2026-03-01T09:00:00Z", S1, "local", "", 5, 4, "message"),
    )
    conn.commit()
    conn.close()
    return folder


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


MODES = {"read-write": [], "read-only": ["--read-only"], "snapshot": ["--snapshot"]}


@pytest.mark.parametrize("mode", list(MODES))
def test_reference_db_lists_and_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    folder = _build(tmp_path / "sessions")
    before = _digest(folder)
    flags = ["--dir", str(folder), *MODES[mode]]

    assert main([*flags, "list", "--json", "--all"]) == 0
    listed = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(listed) == {S1, S2, S3}
    # Newest activity first: S2's last entry (03-02) beats S1's (03-01 09:03:01), S3 has no entries.
    assert list(listed) == [S2, S1, S3]
    s1 = listed[S1]
    assert s1["title"] == "CI failure"
    assert s1["preview"] == "Why does the build fail on CI?"
    assert s1["message_count"] == 6  # five parseable messages + the unparsable row typed 'message'
    assert s1["last_active_at"] == "2026-03-01T09:03:01Z"
    assert listed[S2]["channel_type"] == "wechat"
    assert listed[S3]["parent_session"] == S1 and listed[S3]["fork_kind"] == "message"
    assert listed[S3]["last_active_at"] == "2026-03-01T09:00:00Z"

    assert main([*flags, "list", "--json", "--all", "--search", "WEATHER"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [S2]

    assert main([*flags, "show", S1, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session"]["id"] == S1
    got = [(m["kind"], m["role"], m["entry_id"], m["overridden"]) for m in shown["messages"]]
    assert got == [
        ("compaction_summary", "user", "e000000000000007", False),
        ("message", "toolResult", "e000000000000004", True),
        ("message", "assistant", "e000000000000005", False),
        ("message", "user", "e000000000000009", False),
    ]
    assert shown["messages"][0]["text"] == "User asked about a CI failure; the log was missing."
    assert shown["messages"][1]["text"] == "[withheld]"

    assert main([*flags, "show", S1, "--raw", "--format", "json"]) == 0
    raw = json.loads(capsys.readouterr().out)
    rows = raw["rows"] if isinstance(raw, dict) else raw
    assert [r["id"] for r in rows][-1] == "e00000000000000a"
    assert rows[-1]["parse_error"]
    assert all(r["parse_error"] is None for r in rows[:-1])

    # The command line opens list/show read-only unless told otherwise; the store itself is checked in each mode.
    from store.mothx.db import OpenMode
    from store.mothx.entries import replay
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.sessions import SessionFilter, list_sessions

    with open_session_dir(folder, OpenMode(mode)) as sd:
        assert sd.mode is OpenMode(mode) and sd.writable == (mode == "read-write")
        assert [s.id for s in list_sessions(sd, SessionFilter()).rows] == [S2, S1, S3]
        assert [m.entry_id for m in replay(sd, S1)] == [g[2] for g in got]

    assert _digest(folder) == before
