"""Readers of native agent transcripts (Claude Code and Codex JSONL) into display-ready dataclasses.

Every non-blank line of a file becomes exactly one :class:`NativeItem`, in file order, so record counts are
exact. A line that is not valid JSON (cut off, glued ``}{``, not UTF-8) becomes an ``unreadable`` item with its
line number; it is never dropped, and records after it stay attached: a record whose parent sits in an
unreadable line is shown with ``parent_state == "unreadable"`` and ``parent_line`` pointing at it.

Claude Code records form a graph by ``uuid`` / ``parentUuid``. A **real rewind** is a parent with two or more
typed user prompts written at different times; each prompt starts a :class:`Branch` of a :class:`ForkPoint`,
and :meth:`NativeTranscript.view` shows one branch per fork (the latest by default). Other parents with several
children (parallel tool results, progress and hook lines, a replayed copy of a prompt) are recording artifacts,
not branches. ``compact_boundary`` records continue their ``logicalParentUuid``.

Claude Code 1.0.x wrote a sub-agent's records inline in the session file (``isSidechain: true``): each such
chain is its own transcript (``NativeTranscript.inline_subagents``, linked as layout ``inline``), never part of
the main conversation, its first prompt or its title (:func:`typed_prompt`). User-role text the agent injected
(environment context, AGENTS.md / CLAUDE.md contents, IDE context, system reminders, command wrappers) is a
``context`` record or block, not a typed prompt. A line a checkpoint stored as an unreadable stand-in reads
back as the ``unreadable`` item it was.

Codex rollouts are linear: ``session_meta``, turns (``task_started`` … ``task_complete``), messages, reasoning,
tool calls paired with their outputs by ``call_id``, and ``compacted`` records with their replacement history.

Nothing here imports Textual; the Transcript screen renders these dataclasses.

The parts: :mod:`store.agents.native_model` (kinds and dataclasses), :mod:`store.agents.native_lines` (lines and
fields), :mod:`store.agents.native_claude` and :mod:`store.agents.native_codex` (the two readers). This module
reads files and links sessions, and keeps every name of those parts importable from here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from store.agents.native_claude import parse_claude_code
from store.agents.native_codex import parse_codex
from store.agents.native_lines import lines_of, parse_line, strip_ansi, text_of
from store.agents.native_model import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
    K_ASSISTANT,
    K_COMPACT_BOUNDARY,
    K_COMPACT_SUMMARY,
    K_COMPACTED,
    K_CONTEXT,
    K_DEVELOPER,
    K_EVENT,
    K_FILE_SNAPSHOT,
    K_HOOK,
    K_LAST_PROMPT,
    K_OTHER,
    K_PROGRESS,
    K_QUEUE,
    K_REASONING,
    K_SESSION_META,
    K_SUMMARY,
    K_SYSTEM,
    K_TOKEN_COUNT,
    K_TOOL_CALL,
    K_TOOL_RESULT,
    K_TURN_ABORTED,
    K_TURN_CONTEXT,
    K_TURN_DURATION,
    K_TURN_END,
    K_TURN_START,
    K_UNREADABLE,
    K_USER,
    K_WEB_SEARCH,
    PREVIEW_CHARS,
    TASK_TOOL_NAMES,
    Branch,
    Compaction,
    ForkPoint,
    NativeBlock,
    NativeItem,
    NativeSession,
    NativeTranscript,
    SubAgentLink,
    SummaryRef,
    ToolPair,
    Turn,
)

# ------------------------------------------------------------------------------------------ files, sessions


def detect_agent(source: Iterable[bytes | str] | bytes) -> str:
    """``claude-code``, ``codex`` or "" from the first readable records."""
    for p in (parse_line(line) for line in lines_of(source)):
        obj = p.obj
        if not isinstance(obj, dict):
            continue
        if obj.get("type") in ("session_meta", "response_item", "event_msg", "turn_context", "compacted"):
            return AGENT_CODEX
        if "payload" in obj and "timestamp" in obj:
            return AGENT_CODEX
        if "instructions" in obj and "id" in obj and "type" not in obj:
            return AGENT_CODEX
        if any(k in obj for k in ("parentUuid", "uuid", "sessionId", "leafUuid", "isSidechain")):
            return AGENT_CLAUDE_CODE
        if obj.get("type") in ("summary", "file-history-snapshot", "queue-operation", "user", "assistant"):
            return AGENT_CLAUDE_CODE
    return ""


def read_claude_code_file(path: str | Path, *, known_uuids: frozenset[str] = frozenset()) -> NativeTranscript:
    """One Claude Code file read whole (see :func:`parse_claude_code`)."""
    return parse_claude_code(Path(path).read_bytes(), str(path), known_uuids=known_uuids)


def read_codex_file(path: str | Path) -> NativeTranscript:
    """One Codex rollout read whole (see :func:`parse_codex`)."""
    return parse_codex(Path(path).read_bytes(), str(path))


def read_native_file(path: str | Path) -> NativeTranscript:
    """Either reader, chosen from the records (an unrecognised file is read as Claude Code)."""
    data = Path(path).read_bytes()
    if detect_agent(data) == AGENT_CODEX:
        return parse_codex(data, str(path))
    return parse_claude_code(data, str(path))


def _first_user_text(t: NativeTranscript) -> str:
    for item in t.items:
        if item.kind == K_USER:
            return item.text
    return ""


def typed_prompt(t: NativeTranscript) -> str:
    """The first prompt a user typed in ``t``: never injected context (``context`` records and blocks, meta and
    command records), never a sidechain (a sub-agent's prompt), never Codex IDE context (only the request
    under it). "" when there is none. This is what a session's title and first prompt are."""
    if t.agent == AGENT_CODEX:
        for item in t.items:
            if item.kind == K_EVENT and item.subtype == "user_message" and "context" not in item.flags \
                    and item.text.strip():
                return item.text
    for item in t.items:
        if item.kind == K_USER and item.text.strip() and not ({"meta", "command", "sidechain"} & item.flags):
            if t.agent == AGENT_CODEX and item.text.lstrip().startswith("<"):
                continue
            return item.text
    return ""


def link_claude_code_session(
    main: NativeTranscript | None, subagents: Sequence[tuple[NativeTranscript, str]]
) -> NativeSession:
    """Link sub-agent transcripts (each with its layout) to the ``Task`` calls of ``main``.

    A Task result names its sub-agent in ``toolUseResult.agentId``; where it does not (older versions), the
    sub-agent whose first prompt equals the Task's ``prompt`` argument is taken. The inline sidechains of
    ``main`` (Claude Code 1.0.x) are linked the same way (layout ``inline``), or to the Task call they were
    written under (after the call, before its result). A Task result naming a sub-agent whose file is not
    present gets a link with layout ``absent`` and an empty transcript, so the call can say so.
    """
    all_uuids = frozenset().union(*(t.uuids for t, _ in subagents)) | (main.uuids if main else frozenset())
    if main is not None and main.summaries:
        main = _redo_dangling(main, all_uuids)
    tasks = [p for p in (main.tool_pairs if main else ()) if p.name in TASK_TOOL_NAMES]
    links: list[SubAgentLink] = []
    used: set[str] = set()
    inline = [(t, "inline") for t in (main.inline_subagents if main else ())]
    for t, layout in [*inline, *subagents]:
        t = _redo_dangling(t, all_uuids) if t.summaries else t
        agent_id = t.agent_id or _agent_id_from_name(t.path)
        prompt = _first_user_text(t)
        task = next((p for p in tasks if p.subagent_id and p.subagent_id == agent_id), None)
        if task is None:
            task = next((p for p in tasks if p.call_id not in used and not p.subagent_id and prompt
                         and _task_prompt(p) == prompt), None)
        if task is None and layout == "inline" and t.items:
            start = t.items[0].line  # written between its Task call and that call's result
            task = next((p for p in tasks if p.call_id not in used and not p.subagent_id
                         and p.call_line < start and (p.result_line == 0 or p.result_line > start)), None)
        if task is not None:
            used.add(task.call_id)
        links.append(SubAgentLink(agent_id, t, layout, task.call_id if task else "", task.call_line if task else 0,
                                  prompt))
    session_id = main.session_id if main else next((t.session_id for t, _ in subagents if t.session_id), "")
    known = {link.agent_id for link in links}
    for p in tasks:
        if p.subagent_id and p.subagent_id not in known and p.call_id not in used:
            empty = NativeTranscript(AGENT_CLAUDE_CODE, "", session_id, main.cwd if main else "",
                                     main.version if main else "", ())
            links.append(SubAgentLink(p.subagent_id, empty, "absent", p.call_id, p.call_line, _task_prompt(p)))
            known.add(p.subagent_id)
    return NativeSession(AGENT_CLAUDE_CODE, session_id, main, tuple(links))


def _task_prompt(pair: ToolPair) -> str:
    try:
        args = json.loads(pair.arguments)
    except ValueError:
        return ""
    return text_of(args.get("prompt")) if isinstance(args, dict) else ""


def _agent_id_from_name(path: str) -> str:
    name = Path(path).name
    return name[len("agent-"): -len(".jsonl")] if name.startswith("agent-") and name.endswith(".jsonl") else ""


def _redo_dangling(t: NativeTranscript, uuids: frozenset[str]) -> NativeTranscript:
    summaries = tuple(replace(s, dangling=s.leaf_uuid not in uuids) for s in t.summaries)
    dangling_lines = {s.line for s in summaries if s.dangling}
    items = tuple(
        replace(i, flags=(i.flags | {"dangling_leaf"}) if i.line in dangling_lines else (i.flags - {"dangling_leaf"}))
        if i.kind == K_SUMMARY
        else i
        for i in t.items
    )
    return replace(t, summaries=summaries, items=items)


def read_claude_code_session(project_dir: str | Path, session_id: str) -> NativeSession:
    """A session of one Claude Code project folder: ``<session>.jsonl``, ``<session>/subagents/*.jsonl`` and
    old-layout ``agent-*.jsonl`` files at the project root whose records name the session."""
    project = Path(project_dir)
    main_path = project / f"{session_id}.jsonl"
    main = read_claude_code_file(main_path) if main_path.is_file() else None
    subs: list[tuple[NativeTranscript, str]] = []
    sub_dir = project / session_id / "subagents"
    if sub_dir.is_dir():
        for f in sorted(sub_dir.glob("*.jsonl")):
            subs.append((read_claude_code_file(f), "subagents"))
    for f in sorted(project.glob("agent-*.jsonl")):
        t = read_claude_code_file(f)
        if t.session_id == session_id:
            subs.append((t, "project_root"))
    return link_claude_code_session(main, subs)


__all__ = [
    "AGENT_CLAUDE_CODE",
    "AGENT_CODEX",
    "Branch",
    "Compaction",
    "ForkPoint",
    "K_ASSISTANT",
    "K_COMPACTED",
    "K_COMPACT_BOUNDARY",
    "K_COMPACT_SUMMARY",
    "K_CONTEXT",
    "K_DEVELOPER",
    "K_EVENT",
    "K_FILE_SNAPSHOT",
    "K_HOOK",
    "K_LAST_PROMPT",
    "K_OTHER",
    "K_PROGRESS",
    "K_QUEUE",
    "K_REASONING",
    "K_SESSION_META",
    "K_SUMMARY",
    "K_SYSTEM",
    "K_TOKEN_COUNT",
    "K_TOOL_CALL",
    "K_TOOL_RESULT",
    "K_TURN_ABORTED",
    "K_TURN_CONTEXT",
    "K_TURN_DURATION",
    "K_TURN_END",
    "K_TURN_START",
    "K_UNREADABLE",
    "K_USER",
    "K_WEB_SEARCH",
    "NativeBlock",
    "NativeItem",
    "NativeSession",
    "NativeTranscript",
    "PREVIEW_CHARS",
    "SubAgentLink",
    "SummaryRef",
    "TASK_TOOL_NAMES",
    "ToolPair",
    "Turn",
    "detect_agent",
    "link_claude_code_session",
    "parse_claude_code",
    "parse_codex",
    "read_claude_code_file",
    "read_claude_code_session",
    "read_codex_file",
    "read_native_file",
    "strip_ansi",
    "typed_prompt",
]
