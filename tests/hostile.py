"""The hostile corpus: one session directory and one capture root whose every shown field holds terminal escapes
and markup, for the tests that run every command and every screen on it.

No code of ours writes the session database: it is built with the reference DDL and raw SQL, as a foreign
writer (or an attacker handing over a "copy of my session directory") would. The agent transcripts are written
as Claude Code and Codex write them, with the same hostile values in prompts, tool names, arguments, results,
cwd, and a file name.

:data:`PAYLOADS` holds every attack once; :func:`assert_clean` is the check: no raw C0 (but newline and tab),
DEL, C1, bidi override / isolate or lone surrogate in a text.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from tests.test_reference_db import V43_MIGRATIONS, _ddl

OSC52 = "\x1b]52;c;aGFja2VkIGNsaXBib2FyZA==\x07"  # writes "hacked clipboard" to the clipboard
OSC0 = "\x1b]0;pwned title\x07"  # retitles the terminal
OSC8 = "\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\"  # a hyperlink
CSI_CLEAR = "\x1b[2J\x1b[H"  # wipes the screen
C1_CSI = "\x9b31m"  # one-byte CSI
BEL = "\x07"
RLO = "\u202egnp.exe"  # reads backwards
SURROGATE = "\ud83d"  # a lone surrogate (Claude Code wrote these before 2.1.132)
MARKUP = "[bold]b[/bold] [/] [link=file:///etc/passwd]l[/link] [@click=app.quit]q[/]"
BRACKET_PATH = "/home/u/[archive]/repo"

PAYLOADS = (OSC52, OSC0, OSC8, CSI_CLEAR, C1_CSI, BEL, RLO, MARKUP)
EVIL = "".join(PAYLOADS)
"""Every attack in one string (no surrogate: SQLite text must be valid UTF-8 to be bound from Python)."""

RAW_FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def evil(label: str) -> str:
    """``label`` with every attack around it, so a test can still tell which field it sees."""
    return f"{label}{EVIL}{label}"


def assert_clean(text: str, where: str = "output") -> None:
    """Fail when ``text`` holds a raw control, DEL, C1, bidi or surrogate character (newline and tab allowed)."""
    found = RAW_FORBIDDEN.search(text)
    assert found is None, f"{where} holds a raw {found.group(0)!r} at {found.start()}: {text[max(0, found.start() - 40):found.start() + 40]!r}"


SESSION = "a1a1a1a1a1a1a1a1"
"""The hostile session: every shown field of it, its entries, its run and its lease hold :data:`EVIL`."""
QUIET = "b2b2b2b2b2b2b2b2"
"""A plain session beside it (the list must still show it)."""
RUN = "run-hostile-0001"
TURN = "turn-hostile-0001"
OWNER = "pid-4242-[/]" + OSC52 + CSI_CLEAR
CLAUDE_SESSION = "5e55a000-0000-4000-8000-00000000beef"
CODEX_SESSION = "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000"


@dataclass(frozen=True)
class HostileDir:
    """The hostile session directory (``sessions``) and the capture roots beside it."""

    root: Path
    sessions: Path
    claude_root: Path
    codex_root: Path


def _entry(conn: sqlite3.Connection, eid: str, etype: str, parent: str | None, ts: str, **fields: object) -> None:
    data = {"type": etype, "id": eid, "parentId": parent, "timestamp": ts, **fields}
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (SESSION, eid, etype, parent, ts, json.dumps(data)))


def _write_sessions_db(folder: Path) -> None:
    folder.mkdir(parents=True)
    conn = sqlite3.connect(folder / "sessions.db")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(_ddl())
    conn.executemany("INSERT INTO schema_migrations(version, name) VALUES (?, ?)", V43_MIGRATIONS)
    conn.execute("INSERT INTO sessions (id, cwd, timestamp, version, channel_type, channel_id) VALUES (?,?,?,?,?,?)",
                 (SESSION, BRACKET_PATH + evil("cwd"), "2026-03-01T09:00:00Z", 3, "local" + OSC0, evil("chan")))
    conn.execute("INSERT INTO sessions (id, cwd, timestamp, version, channel_type, channel_id) VALUES (?,?,?,?,?,?)",
                 (QUIET, "/srv/quiet", "2026-03-01T08:00:00Z", 3, "local", ""))
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (QUIET, "c000000000000001", "message", None, "2026-03-01T08:00:01Z",
                  json.dumps({"type": "message", "id": "c000000000000001", "parentId": None,
                              "timestamp": "2026-03-01T08:00:01Z", "message": {"role": "user", "content": "plain"}})))
    _entry(conn, "e000000000000001", "session", None, "2026-03-01T09:00:00Z", version=3, cwd=evil("cwd"))
    _entry(conn, "e000000000000002", "message", "e000000000000001", "2026-03-01T09:00:01Z",
           message={"role": "user", "content": evil("prompt") + SURROGATE})
    _entry(conn, "e000000000000003", "message", "e000000000000002", "2026-03-01T09:00:05Z",
           message={"role": "assistant", "contents": [
               {"type": "thinking", "thinking": evil("thinking")},
               {"type": "text", "text": evil("answer")},
               {"type": "toolCall", "toolCall": {"id": evil("call"), "name": evil("tool"), "kind": "function",
                                                 "arguments": json.dumps({"path": evil("arg")})}}]})
    _entry(conn, "e000000000000004", "message", "e000000000000003", "2026-03-01T09:00:06Z",
           message={"role": "toolResult", "toolCallId": evil("call"), "toolName": evil("tool"), "isError": True,
                    "content": evil("result")})
    _entry(conn, "e000000000000005", "content_override", "e000000000000004", "2026-03-01T09:01:00Z",
           targetEntryId="e000000000000004", reason=evil("reason"), code=evil("code"),
           message={"role": "toolResult", "toolCallId": evil("call"), "toolName": evil("tool"),
                    "content": evil("override")})
    _entry(conn, "e000000000000006", "compaction", "e000000000000005", "2026-03-01T09:02:00Z",
           summary=evil("summary"), firstKeptEntryId="e000000000000004", tokensBefore=1200, summaryVersion=1,
           lastSummarizedEntryId="e000000000000003")
    _entry(conn, "e000000000000007", "session_info", "e000000000000006", "2026-03-01T09:02:01Z",
           name=evil("title"), source="auto")
    _entry(conn, "e000000000000008", "turn_start", "e000000000000007", "2026-03-01T09:03:00Z", turnId=TURN)
    _entry(conn, "e000000000000009", "message", "e000000000000008", "2026-03-01T09:03:01Z",
           message={"role": "user", "content": evil("second prompt")})
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (SESSION, "e00000000000000a" + OSC0, evil("type"), "e000000000000009", evil("ts"), "{not json" + OSC52))
    # A run left active under an expired lease whose owner id is hostile: orphaned, so x / L / t all preview.
    conn.execute(
        "INSERT INTO session_runs (id, session_id, status, started_at, updated_at, work_dir, source, model, mode, error) "
        "VALUES (?,?,?,?,?,?,?,?,?,?)",
        (RUN, SESSION, "running", "2026-03-01T09:03:00Z", "2026-03-01T09:03:02Z", evil("workdir"), evil("source"),
         evil("model"), evil("mode"), evil("error")))
    conn.execute(
        "INSERT INTO conversation_turns (id, session_id, status, start_seq, started_at) VALUES (?,?,?,?,?)",
        (TURN, SESSION, "open", 8, "2026-03-01T09:03:00Z"))
    conn.execute(
        "INSERT INTO session_run_events (id, session_id, run_id, event_type, source, status, timestamp, data) "
        "VALUES (?,?,?,?,?,?,?,?)",
        ("ev-hostile-1", SESSION, RUN, evil("event"), evil("evsource"), evil("evstatus"), "2026-03-01T09:03:01Z",
         json.dumps({"text": evil("evdata")})))
    conn.execute(
        "INSERT INTO session_runtime_leases (session_id, owner_instance_id, owner_pid, owner_kind, lease_token_hash, "
        "epoch, run_id, purpose, state, acquired_at, heartbeat_at, expires_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (SESSION, OWNER, 4242, evil("kind"), "0" * 64, 3, RUN, "execution", "active", 1_700_000_000, 1_700_000_000,
         1_700_000_015, 1_700_000_000))
    conn.execute(
        "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, provider_call_id, "
        "tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (SESSION, TURN, "key-1", evil("provider"), "openai-responses", evil("call"), "function", evil("tool"),
         "ab" * 32, "started", 1, "2026-03-01 09:03:01"))
    conn.commit()
    conn.close()


def _claude_code(root: Path) -> None:
    project = root / ("-home-u-" + "evil")
    project.mkdir(parents=True)
    cwd = BRACKET_PATH + evil("cwd")
    base = {"sessionId": CLAUDE_SESSION, "cwd": cwd, "version": "2.1.42", "gitBranch": evil("branch"),
            "userType": "external", "isSidechain": False}
    lines = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-03-01T10:00:00Z",
         "message": {"role": "user", "content": evil("cc prompt") + SURROGATE}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-03-01T10:00:02Z",
         "message": {"role": "assistant", "model": evil("model"), "content": [
             {"type": "thinking", "thinking": evil("cc thinking")},
             {"type": "text", "text": evil("cc answer")},
             {"type": "tool_use", "id": "toolu_1", "name": evil("CcTool"), "input": {"command": evil("cc arg")}}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "a1", "timestamp": "2026-03-01T10:00:03Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1", "content": evil("cc result"), "is_error": True}]}},
        # Two prompts typed under one parent: a rewind, shown as two branches (``b``).
        {**base, "type": "user", "uuid": "u3", "parentUuid": "u2", "timestamp": "2026-03-01T10:01:00Z",
         "message": {"role": "user", "content": evil("branch one")}},
        {**base, "type": "user", "uuid": "u4", "parentUuid": "u2", "timestamp": "2026-03-01T10:30:00Z",
         "message": {"role": "user", "content": evil("branch two")}},
        {**base, "type": "assistant", "uuid": "a4", "parentUuid": "u4", "timestamp": "2026-03-01T10:30:02Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_2", "name": evil("Unanswered"), "input": {"x": evil("never")}}]}},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    (project / f"{CLAUDE_SESSION}.jsonl").write_text(text, encoding="utf-8", errors="surrogatepass")
    (project / ("notes" + OSC0 + ".jsonl")).write_text("not json " + OSC52 + "\n", encoding="utf-8")


def _codex(root: Path) -> None:
    day = root / "2026" / "03" / "01"
    day.mkdir(parents=True)
    lines = [
        {"timestamp": "2026-03-01T11:00:00Z", "type": "session_meta",
         "payload": {"id": CODEX_SESSION, "timestamp": "2026-03-01T11:00:00Z", "cwd": BRACKET_PATH + evil("cwd"),
                     "originator": evil("codex"), "cli_version": "0.104.0", "instructions": evil("instr")}},
        {"timestamp": "2026-03-01T11:00:01Z", "type": "event_msg", "payload": {"type": "task_started"}},
        {"timestamp": "2026-03-01T11:00:02Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": evil("codex prompt")}]}},
        {"timestamp": "2026-03-01T11:00:03Z", "type": "response_item",
         "payload": {"type": "function_call", "name": evil("shell"), "arguments": json.dumps({"cmd": evil("carg")}),
                     "call_id": "call_x1"}},
        {"timestamp": "2026-03-01T11:00:04Z", "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "call_x1", "output": evil("coutput")}},
        {"timestamp": "2026-03-01T11:00:05Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": evil("codex answer")}]}},
    ]
    name = f"rollout-2026-03-01T11-00-00-{CODEX_SESSION}.jsonl"
    (day / name).write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")


def build_hostile(folder: Path) -> HostileDir:
    """Write the hostile corpus under ``folder`` (which must not exist yet)."""
    sessions = folder / "sessions"
    _write_sessions_db(sessions)
    claude = folder / "claude-projects"
    codex = folder / "codex-sessions"
    _claude_code(claude)
    _codex(codex)
    return HostileDir(folder, sessions, claude, codex)
