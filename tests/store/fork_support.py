"""Build sessions with conversation turns for the fork tests (cold writes: no lease is involved)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from store.mothx.run_model import new_id
from store.mothx.sessiondir import SessionDir
from store.mothx.simulator import create_session
from store.mothx.turns import append_entry, close_turn, open_turn, turns_conn


def message(role: str, text: str = "", *, tool: bool = False) -> dict[str, object]:
    content: list[dict[str, object]] = []
    if text:
        content.append({"type": "text", "text": text})
    if tool:
        content.append({"type": "toolCall", "id": "call_" + new_id(), "name": "bash", "arguments": {"cmd": "ls"}})
    return {"role": role, "content": content}


@dataclass
class Built:
    session_id: str
    turn_ids: list[str]
    final_seqs: list[int]  # the last assistant message of each turn


def add_entry(conn: sqlite3.Connection, sid: str, entry_type: str, fields: dict[str, object]) -> tuple[int, str]:
    e = append_entry(conn, sid, entry_type, fields)
    return e.seq, e.id


def add_turn(conn: sqlite3.Connection, sid: str, user: str, answer: str, *, tool: bool = False,
             status: str = "completed", close: bool = True, meta_after: int = 0) -> tuple[str, int]:
    """One turn: turn_start, user message, (a tool call and its result,) the final answer, turn_end, metadata."""
    tid = new_id()
    open_turn(conn, sid, tid)
    add_entry(conn, sid, "message", {"message": message("user", user)})
    if tool:
        add_entry(conn, sid, "message", {"message": message("assistant", "let me look", tool=True)})
        add_entry(conn, sid, "message", {"message": {"role": "toolResult", "toolCallId": "c", "content": "ok"}})
    final, _ = add_entry(conn, sid, "message", {"message": message("assistant", answer)})
    if close:
        turn = next(t for t in turns_conn(conn, sid) if t.id == tid)
        close_turn(conn, turn, status)
        for i in range(meta_after):
            add_entry(conn, sid, "model_change", {"provider": "p", "modelId": f"m{i}"})
    return tid, final


def build(sd: SessionDir, turns: int = 3, *, title: str = "", session_id: str | None = None) -> Built:
    sid = create_session(sd, session_id)
    out = Built(sid, [], [])
    with sd.db.write() as conn:
        if title:
            add_entry(conn, sid, "session_info", {"name": title, "source": "manual"})
        for i in range(turns):
            tid, final = add_turn(conn, sid, f"question {i + 1}", f"answer {i + 1}", meta_after=1 if i == 0 else 0)
            out.turn_ids.append(tid)
            out.final_seqs.append(final)
    return out


def entry_ids(sd: SessionDir, sid: str) -> set[str]:
    with sd.db.read() as conn:
        ids = {str(r[0]) for r in conn.execute("SELECT id FROM entries WHERE session_id = ?", (sid,))}
        for (data,) in conn.execute("SELECT data FROM entries WHERE session_id = ?", (sid,)):
            ids.add(str(json.loads(data)["id"]))
    return ids
