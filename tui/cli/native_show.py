"""``sessionscope show`` for captured Claude Code and Codex sessions (their published checkpoints).

:func:`show_captured` is what ``show`` falls back to when no mothx session has the id: the checkpoint whose
agent session id is the argument, or uniquely starts with it (4+ characters), of either agent.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from store.errors import AmbiguousSessionId, SessionNotFound
from store.safetext import one_line
from tui.cli import show_export

if TYPE_CHECKING:
    from store.agents.agentstate import CheckpointInfo
    from store.mothx.sessiondir import SessionDir

AGENT_TITLES = {"claude-code": "Claude Code", "codex": "Codex"}
MIN_PREFIX = 4
SHOWN_MATCHES = 8  # ids an "ambiguous prefix" error lists


def checkpoint_json(info: CheckpointInfo) -> dict[str, object]:
    """A checkpoint as JSON: ``checkpoints --json`` rows and the ``session`` object of ``show --format json``."""
    state = info.state
    return {
        "agent": info.agent_id,
        "agent_session_id": info.agent_session_id,
        "head_kind": info.head.kind if info.head else "",
        "head_run_id": info.head.run_id if info.head else "",
        "head_problem": info.head_problem,
        "cwd": state.cwd if state else "",
        "transcript_path": state.transcript_path if state else "",
        "files": state.file_count if state else 0,
        "records": state.record_count if state else 0,
        "shapes": [s.to_json() for s in state.shapes] if state else [],
        "source_root": info.source_root,
        "versions": info.versions,
        "updated_at": info.updated_at,
    }


def find_captured(sd: SessionDir, text: str) -> CheckpointInfo | None:
    """The checkpoint of either agent whose session id is ``text`` or uniquely starts with it (4+ characters);
    None when none matches. :class:`AmbiguousSessionId` when a prefix names several."""
    from store.agents.agentstate import list_checkpoints

    wanted = text.strip()
    infos = [i for agent in ("claude-code", "codex") for i in list_checkpoints(sd, agent)]
    exact = [i for i in infos if i.agent_session_id == wanted]
    if exact:
        return exact[0]
    if len(wanted) < MIN_PREFIX:
        return None
    found = [i for i in infos if i.agent_session_id.startswith(wanted)]
    if len(found) > 1:
        ids = [f"{i.agent_id} {i.agent_session_id}" for i in found]
        listed = ", ".join(ids[:SHOWN_MATCHES]) + (", …" if len(ids) > SHOWN_MATCHES else "")
        raise AmbiguousSessionId(f"ambiguous prefix {wanted}: matches {len(found)} captured sessions: {listed}")
    return found[0] if found else None


def show_captured(sd: SessionDir, args: argparse.Namespace) -> bool:
    """``show`` for a captured Claude Code or Codex session: False when no checkpoint has that id (or prefix).

    Markdown: the main transcript then each sub-agent; ``--format html``: the same as one HTML page
    (:func:`store.export_html.session_html`); ``--format json``: ``{"session": {...}, "messages":
    [...]}`` (see :func:`store.agents.native_export.session_messages`); ``--raw``: the stored records as they
    are (JSON: ``{"session": {...}, "rows": [{"file", "line", "content"}]}``). ``--output``, ``--replace`` and
    ``--redact`` as :mod:`tui.cli.show_export` says."""
    from store.agents import agentstate
    from store.agents.capture import read_checkpoint_session
    from store.agents.native_export import session_markdown, session_messages

    info = find_captured(sd, args.session_id)
    if info is None:
        return False
    agent, sid = info.agent_id, info.agent_session_id
    if info.head is None or info.head.kind == agentstate.KIND_RESET or info.state is None:
        raise SessionNotFound(f"The {agent} session {one_line(sid)} has no published checkpoint (its head is a reset "
                              "or missing); capture it again to show it.")
    head = checkpoint_json(info)
    red = show_export.redactor(args)
    if args.raw:
        cp = agentstate.load_checkpoint(sd, agent, sid)
        records = cp.records if cp is not None else ()
        if args.format == "json":
            show_export.emit_json(args, {"session": head, "rows": [
                {"file": r.file_path, "line": r.line_number, "content": str(r.content)} for r in records]}, red)
        else:
            show_export.emit_text(args, "".join(f"{one_line(r.file_path)}:{r.line_number}  "
                                                f"{one_line(str(r.content))}\n" for r in records), red)
        return True
    session = read_checkpoint_session(sd, agent, sid)
    if session is None:
        raise SessionNotFound(f"The {agent} session {one_line(sid)} has no published checkpoint.")
    messages = session_messages(session)
    if args.format == "json":
        head = {**head, "messages": len(messages),
                "unreadable": sum(1 for m in messages if m["kind"] == "unreadable"),
                "sidechain_messages": sum(1 for m in messages if m["sidechain"]),
                "subagents": [{"agent_id": s.agent_id, "layout": s.layout, "task_call_id": s.task_call_id,
                               "task_line": s.task_line, "records": s.transcript.records} for s in session.subagents]}
        show_export.emit_json(args, {"session": head, "messages": messages}, red)
        return True
    title = f"{AGENT_TITLES.get(agent, agent)} session {sid}"
    if args.format == "html":
        from store.export_html import session_html

        show_export.emit_text(args, session_html(session, title=title, redactor=red), red, redacted=True)
        return True
    show_export.emit_text(args, session_markdown(session, title=title), red)
    return True
