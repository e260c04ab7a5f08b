"""The captured agent sessions as a list: one row per Claude Code or Codex checkpoint, for the Sessions screen.

:func:`list_agent_sessions` reads the published checkpoints of one agent (:func:`store.agents.agentstate.list_checkpoints`)
and, for each, only a few stored records by primary key: the first records of its transcript file (for the
title, the first prompt the user typed) and the last one (for the time of the last record). A session whose
head is a reset or names no staged version is listed too, with why it cannot be opened.

Nothing here writes, and nothing imports Textual.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from store.agents import agentstate
from store.agents.native import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
    K_ASSISTANT,
    K_EVENT,
    K_SUMMARY,
    K_USER,
    parse_claude_code,
    parse_codex,
)
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line

TITLE_RECORDS = 60
"""Records of a transcript read, at most, to find its first typed prompt."""
TITLE_BYTES = 512 * 1024
"""…and at most this many bytes of them (a first record can be a large pasted file)."""
LAST_RECORDS = 8
"""Records read back from the end, at most, to find the last one with a timestamp."""
AGENT_TITLES = {AGENT_CLAUDE_CODE: "Claude Code", AGENT_CODEX: "Codex"}


@dataclass(frozen=True)
class AgentSessionSummary:
    """One captured agent session as the Sessions screen lists it (``title``, ``preview``, ``cwd`` and
    ``problem`` are one safe line each: :func:`store.safetext.one_line`)."""

    agent: str
    agent_session_id: str
    title: str  # the first prompt the user typed ("" when none was found)
    preview: str  # the first text of any message (for a session without a typed prompt)
    cwd: str
    records: int  # records of every file of the checkpoint
    files: int
    last_record_at: str  # RFC 3339 time of the transcript's last timestamped record ("" when none)
    transcript_path: str  # relative to source_root
    source_root: str
    openable: bool  # a published checkpoint exists (the head is not a reset and its version is staged)
    problem: str = ""  # why it cannot be opened ("" when it can)

    def to_json(self) -> dict[str, object]:
        return {
            "agent": self.agent, "agent_session_id": self.agent_session_id, "title": self.title, "preview": self.preview, "cwd": self.cwd,
            "records": self.records, "files": self.files, "last_record_at": self.last_record_at,
            "transcript_path": self.transcript_path, "openable": self.openable, "problem": self.problem,
        }


def agent_session_counts(sd: SessionDir) -> dict[str, int]:
    """How many captured sessions each agent has (agents without any are absent)."""
    counts: dict[str, int] = {}
    for info in agentstate.list_checkpoints(sd):
        counts[info.agent_id] = counts.get(info.agent_id, 0) + 1
    return counts


def first_prompt(agent: str, lines: list[str]) -> tuple[str, str]:
    """``(prompt, preview)``: the first prompt a user typed among the first records of a transcript, and the
    first text of any message (either "" when there is none)."""
    if agent == AGENT_CODEX:
        t = parse_codex(lines)
        typed = next((i.text for i in t.items if i.kind == K_EVENT and i.subtype == "user_message" and i.text), "")
        if not typed:
            typed = next((i.text for i in t.items
                          if i.kind == K_USER and i.text and not i.text.lstrip().startswith("<")), "")
    else:
        t = parse_claude_code(lines)
        typed = next((i.text for i in t.items
                      if i.kind == K_USER and i.text.strip() and not ({"meta", "command"} & i.flags)), "")
    preview = next((i.text for i in t.items if i.kind in (K_USER, K_ASSISTANT, K_SUMMARY) and i.text.strip()), "")
    return typed, preview


def _timestamp(content: str) -> str:
    try:
        obj = json.loads(content)
    except (ValueError, RecursionError):
        return ""
    stamp = obj.get("timestamp") if isinstance(obj, dict) else None
    return stamp if isinstance(stamp, str) else ""


def list_agent_sessions(sd: SessionDir, agent: str) -> list[AgentSessionSummary]:
    """Every captured session of ``agent``, the most recent last record first."""
    infos = agentstate.list_checkpoints(sd, agent)
    out: list[AgentSessionSummary] = []
    with agentstate.state_db(sd) as db:
        for info in infos:
            state = info.state
            if state is None or db is None:
                if info.head is not None and info.head.kind == agentstate.KIND_RESET:
                    why = "its head is a reset: nothing is loadable until the next capture"
                else:
                    why = one_line(info.head_problem) or "nothing is published for it"
                out.append(AgentSessionSummary(agent, info.agent_session_id, "", "", "", 0, 0, info.updated_at, "",
                                               info.source_root, False, why))
                continue
            shape = next((f for f in state.files if f.path == state.transcript_path), state.files[0])
            title = preview = ""
            last = ""
            with db.read() as conn:  # one short read per session: a capture may write between them
                rows = conn.execute(
                    "SELECT content FROM agent_state_lines WHERE session_id = ? AND file_path = ? "
                    "AND line_number >= 1 AND line_number <= ? ORDER BY line_number",
                    (info.session_id, shape.path, min(shape.records, TITLE_RECORDS)),
                ).fetchall()
                lines: list[str] = []
                size = 0
                for (content,) in rows:
                    if not isinstance(content, str):
                        continue  # a foreign row: loading the checkpoint reports it
                    lines.append(content)
                    size += len(content)
                    if size >= TITLE_BYTES:
                        break
                title, preview = first_prompt(agent, lines)
                tail = conn.execute(
                    "SELECT content FROM agent_state_lines WHERE session_id = ? AND file_path = ? "
                    "AND line_number > ? AND line_number <= ? ORDER BY line_number DESC",
                    (info.session_id, shape.path, max(0, shape.records - LAST_RECORDS), shape.records),
                ).fetchall()
                for (content,) in tail:
                    last = one_line(_timestamp(content)) if isinstance(content, str) else ""
                    if last:
                        break
            out.append(AgentSessionSummary(
                agent=agent, agent_session_id=info.agent_session_id, title=one_line(title),
                preview=one_line(preview)[:300],
                cwd=one_line(state.cwd), records=state.record_count, files=state.file_count,
                last_record_at=last or info.updated_at, transcript_path=state.transcript_path,
                source_root=info.source_root, openable=True,
            ))
    out.sort(key=lambda s: (s.last_record_at, s.agent_session_id), reverse=True)
    return out


__all__ = ["AGENT_TITLES", "AgentSessionSummary", "agent_session_counts", "first_prompt", "list_agent_sessions"]
