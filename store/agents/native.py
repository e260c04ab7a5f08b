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

Codex rollouts are linear: ``session_meta``, turns (``task_started`` … ``task_complete``), messages, reasoning,
tool calls paired with their outputs by ``call_id``, and ``compacted`` records with their replacement history.

Nothing here imports Textual; the Transcript screen renders these dataclasses.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

AGENT_CLAUDE_CODE = "claude-code"
AGENT_CODEX = "codex"

# Item kinds.
K_USER = "user"
K_ASSISTANT = "assistant"
K_DEVELOPER = "developer"
K_TOOL_RESULT = "tool_result"
K_TOOL_CALL = "tool_call"
K_SYSTEM = "system"
K_HOOK = "hook"
K_PROGRESS = "progress"
K_SUMMARY = "summary"
K_COMPACT_BOUNDARY = "compact_boundary"
K_COMPACT_SUMMARY = "compact_summary"
K_COMPACTED = "compacted"
K_FILE_SNAPSHOT = "file_snapshot"
K_QUEUE = "queue"
K_SESSION_META = "session_meta"
K_TURN_CONTEXT = "turn_context"
K_TURN_START = "turn_start"
K_TURN_END = "turn_end"
K_TURN_ABORTED = "turn_aborted"
K_REASONING = "reasoning"
K_TOKEN_COUNT = "token_count"
K_EVENT = "event"
K_OTHER = "other"
K_UNREADABLE = "unreadable"

TASK_TOOL_NAMES = frozenset({"Task", "Agent"})
PREVIEW_CHARS = 120

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_SALVAGE_UUID = re.compile(r'"uuid"\s*:\s*"([^"\\]{1,200})"')
_SALVAGE_PARENT = re.compile(r'"parentUuid"\s*:\s*"([^"\\]{1,200})"')
_COMMAND_PREFIXES = ("<command-name>", "<command-message>", "<local-command-", "<bash-input>", "<bash-stdout>",
                     "<bash-stderr>")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class NativeBlock:
    """One content block, normalised for display."""

    kind: str  # text | thinking | redacted_thinking | tool_use | tool_result | image | reasoning_summary
    #            | encrypted_reasoning | document | other
    text: str
    tool_id: str = ""
    tool_name: str = ""
    arguments: str = ""  # JSON text of the call's input / arguments
    is_error: bool = False


@dataclass(frozen=True)
class NativeItem:
    """One line of a native transcript (blank lines are not records and have no item)."""

    index: int  # position among the file's items (0-based)
    line: int  # physical line number in the file (1-based)
    kind: str
    role: str = ""
    text: str = ""  # display text, ANSI escapes removed
    blocks: tuple[NativeBlock, ...] = ()
    timestamp: str = ""
    uuid: str = ""
    parent_uuid: str = ""
    parent_state: str = "root"  # root | ok | unreadable | missing
    parent_line: int = 0  # line of the parent record (for "unreadable": the unreadable line)
    branch: tuple[tuple[str, int], ...] = ()  # (fork parent uuid, branch index) from the root down
    turn_id: str = ""
    subtype: str = ""
    flags: frozenset[str] = frozenset()
    tokens: int | None = None
    tool_ids: tuple[str, ...] = ()
    agent_id: str = ""  # a Task result: the sub-agent it ran; a sub-agent record: its own agent id
    leaf_uuid: str = ""
    error: str = ""  # unreadable: why
    raw: str = ""


@dataclass(frozen=True)
class ToolPair:
    call_id: str
    name: str
    arguments: str
    call_line: int
    result_line: int  # 0 when no result was recorded
    result_text: str
    is_error: bool
    interrupted: bool
    subagent_id: str = ""


@dataclass(frozen=True)
class Branch:
    index: int
    prompt_uuid: str
    prompt_line: int
    timestamp: str
    preview: str
    items: int  # items that belong to this branch (the prompt and everything under it)


@dataclass(frozen=True)
class ForkPoint:
    parent_uuid: str
    parent_line: int
    branches: tuple[Branch, ...]

    @property
    def default(self) -> int:
        return len(self.branches) - 1


@dataclass(frozen=True)
class Compaction:
    line: int
    kind: str  # compact_boundary | compact_summary | compacted
    trigger: str
    pre_tokens: int | None
    summary: str
    replacement_items: int = 0
    replacement: tuple[NativeItem, ...] = ()  # Codex: the replacement history, read like response items


@dataclass(frozen=True)
class SummaryRef:
    line: int
    summary: str
    leaf_uuid: str
    dangling: bool


@dataclass(frozen=True)
class Turn:
    turn_id: str
    start_line: int
    end_line: int  # 0 when the turn never ended
    complete: bool  # a task_complete closed it
    aborted: bool
    items: int


@dataclass(frozen=True)
class NativeTranscript:
    agent: str
    path: str
    session_id: str
    cwd: str
    version: str
    items: tuple[NativeItem, ...]
    tool_pairs: tuple[ToolPair, ...] = ()
    forks: tuple[ForkPoint, ...] = ()
    compactions: tuple[Compaction, ...] = ()
    summaries: tuple[SummaryRef, ...] = ()
    turns: tuple[Turn, ...] = ()
    agent_id: str = ""  # the sub-agent id when every record is a sidechain of one agent
    uuids: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def records(self) -> int:
        return len(self.items)

    @property
    def unreadable(self) -> tuple[NativeItem, ...]:
        return tuple(i for i in self.items if i.kind == K_UNREADABLE)

    @property
    def interrupted(self) -> tuple[ToolPair, ...]:
        return tuple(p for p in self.tool_pairs if p.interrupted)

    @property
    def incomplete_turns(self) -> tuple[Turn, ...]:
        return tuple(t for t in self.turns if not t.complete)

    def view(self, selection: Mapping[str, int] | None = None) -> list[NativeItem]:
        """The items shown for one choice of branch per fork (missing choices take the latest branch)."""
        if not self.forks:
            return list(self.items)
        chosen = {f.parent_uuid: f.default for f in self.forks}
        if selection:
            for fork, idx in selection.items():
                if fork in chosen:
                    chosen[fork] = idx
        return [i for i in self.items if all(chosen.get(f, b) == b for f, b in i.branch)]

    def item_at_line(self, line: int) -> NativeItem | None:
        for item in self.items:
            if item.line == line:
                return item
        return None


@dataclass(frozen=True)
class SubAgentLink:
    agent_id: str
    transcript: NativeTranscript
    layout: str  # "subagents" (<session>/subagents/agent-<id>.jsonl) | "project_root" (agent-<id>.jsonl)
    task_call_id: str  # "" when no Task call of the parent names it
    task_line: int
    prompt: str


@dataclass(frozen=True)
class NativeSession:
    """A Claude Code session with its sub-agents, or a Codex rollout (no sub-agents)."""

    agent: str
    session_id: str
    main: NativeTranscript | None
    subagents: tuple[SubAgentLink, ...] = ()

    def subagent_for_call(self, call_id: str) -> SubAgentLink | None:
        for link in self.subagents:
            if link.task_call_id == call_id:
                return link
        return None

    @property
    def transcripts(self) -> tuple[NativeTranscript, ...]:
        main = (self.main,) if self.main else ()
        return main + tuple(s.transcript for s in self.subagents)


# ------------------------------------------------------------------------------------------- line reading


@dataclass
class _Line:
    number: int
    raw: bytes
    complete: bool  # ended with "\n"


def _split_lines(data: bytes) -> list[_Line]:
    out: list[_Line] = []
    parts = data.split(b"\n")
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if i == last and not part:
            break
        if not part.strip(b" \t\r\n"):
            continue
        out.append(_Line(i + 1, part, i != last))
    return out


def _lines_of(source: Iterable[bytes | str] | bytes) -> list[_Line]:
    if isinstance(source, bytes):
        return _split_lines(source)
    chunks = [s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s for s in source]
    chunks = [c[:-1] if c.endswith(b"\n") else c for c in chunks]
    return _split_lines(b"\n".join(chunks) + b"\n") if chunks else []


@dataclass
class _Parsed:
    line: _Line
    obj: Any  # the decoded JSON value (None when unreadable)
    text: str  # the line decoded (replacement characters where not UTF-8)
    error: str


def _parse_line(line: _Line) -> _Parsed:
    raw = line.raw.strip(b" \t\r\n")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _Parsed(line, None, raw.decode("utf-8", "replace"), "the line is not valid UTF-8")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        error = _json_error(text, exc, line.complete)
        return _Parsed(line, None, text, error)
    return _Parsed(line, obj, text, "")


def _json_error(text: str, exc: Exception, complete: bool) -> str:
    if isinstance(exc, json.JSONDecodeError) and exc.msg == "Extra data":
        return f"two or more records are glued together on this line (the first ends at column {exc.pos})"
    if not complete:
        return "the line is cut off (the file ends in the middle of a record)"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at column {exc.pos + 1}"
    return "not valid JSON"


def _unreadable(index: int, p: _Parsed) -> NativeItem:
    flags = {"cut_off"} if not p.line.complete else set()
    if "glued" in p.error:
        flags.add("glued")
    uuids = _SALVAGE_UUID.findall(p.text)
    parents = _SALVAGE_PARENT.findall(p.text)
    return NativeItem(
        index=index,
        line=p.line.number,
        kind=K_UNREADABLE,
        text=f"Line {p.line.number} is unreadable: {p.error}.",
        uuid=uuids[0] if uuids else "",
        parent_uuid=parents[0] if parents else "",
        flags=frozenset(flags),
        error=p.error,
        raw=p.text,
    )


def _s(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(_s(block.get("text")))
                elif block.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(f"[{_s(block.get('type')) or 'block'}]")
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return _json_text(content)


def _tool_text(name: str, arguments: str) -> str:
    return f"{name}({_preview(arguments, 200)})" if arguments else f"{name}()"


# ----------------------------------------------------------------------------------------------- Claude Code


def _claude_blocks(content: object) -> tuple[NativeBlock, ...]:
    if isinstance(content, str):
        return (NativeBlock("text", strip_ansi(content)),)
    if not isinstance(content, list):
        return ()
    out: list[NativeBlock] = []
    for block in content:
        if isinstance(block, str):
            out.append(NativeBlock("text", block))
            continue
        if not isinstance(block, dict):
            continue
        kind = _s(block.get("type"))
        if kind == "text":
            out.append(NativeBlock("text", strip_ansi(_s(block.get("text")))))
        elif kind == "thinking":
            out.append(NativeBlock("thinking", _s(block.get("thinking"))))
        elif kind == "redacted_thinking":
            out.append(NativeBlock("redacted_thinking", "(redacted thinking)"))
        elif kind in ("tool_use", "server_tool_use"):
            args = _json_text(block.get("input"))
            name = _s(block.get("name"))
            out.append(NativeBlock("tool_use", _tool_text(name, args), _s(block.get("id")), name, args))
        elif kind == "tool_result":
            out.append(
                NativeBlock(
                    "tool_result",
                    strip_ansi(_result_text(block.get("content"))),
                    _s(block.get("tool_use_id")),
                    is_error=block.get("is_error") is True,
                )
            )
        elif kind == "image":
            out.append(NativeBlock("image", "[image]"))
        elif kind == "document":
            out.append(NativeBlock("document", "[document]"))
        else:
            out.append(NativeBlock("other", f"[{kind or 'block'}]"))
    return tuple(out)


def _claude_item(index: int, p: _Parsed) -> NativeItem:
    obj = p.obj
    line = p.line.number
    if not isinstance(obj, dict):
        return NativeItem(index, line, K_OTHER, text=_preview(p.text), raw=p.text, subtype=type(obj).__name__)
    rtype = _s(obj.get("type"))
    flags: set[str] = set()
    if obj.get("isSidechain") is True:
        flags.add("sidechain")
    if obj.get("isMeta") is True:
        flags.add("meta")
    common: dict[str, Any] = dict(
        timestamp=_s(obj.get("timestamp")),
        uuid=_s(obj.get("uuid")),
        parent_uuid=_s(obj.get("parentUuid")),
        agent_id=_s(obj.get("agentId")),
        raw=p.text,
    )
    if rtype in ("user", "assistant"):
        message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
        role = _s(message.get("role")) or rtype
        blocks = _claude_blocks(message.get("content"))
        tool_ids = tuple(b.tool_id for b in blocks if b.kind in ("tool_use", "tool_result") and b.tool_id)
        text = "\n".join(b.text for b in blocks if b.kind in ("text", "tool_result"))
        if rtype == "assistant":
            kind = K_ASSISTANT
            if obj.get("isApiErrorMessage") is True:
                flags.add("api_error")
            if not text:
                text = "\n".join(b.text for b in blocks)
        elif obj.get("isCompactSummary") is True:
            kind = K_COMPACT_SUMMARY
            flags.add("compact_summary")
        elif blocks and all(b.kind == "tool_result" for b in blocks):
            kind = K_TOOL_RESULT
            tur = obj.get("toolUseResult")
            if isinstance(tur, dict) and _s(tur.get("agentId")):
                common["agent_id"] = _s(tur.get("agentId"))
        else:
            kind = K_USER
            if text.lstrip().startswith(_COMMAND_PREFIXES):
                flags.add("command")
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
        tokens = None
        if usage:
            tokens = sum(v for k, v in usage.items() if k.endswith("_tokens") and isinstance(v, int))
        return NativeItem(index, line, kind, role=role, text=text, blocks=blocks, tool_ids=tool_ids,
                          flags=frozenset(flags), tokens=tokens, **common)
    if rtype == "system":
        subtype = _s(obj.get("subtype"))
        content = strip_ansi(_s(obj.get("content")))
        if subtype == "compact_boundary":
            meta = obj.get("compactMetadata") if isinstance(obj.get("compactMetadata"), dict) else {}
            if not common["parent_uuid"]:
                common["parent_uuid"] = _s(obj.get("logicalParentUuid"))
            flags.add("logical_parent")
            return NativeItem(index, line, K_COMPACT_BOUNDARY, role="system", text=content or "Conversation compacted",
                              subtype=_s(meta.get("trigger")), tokens=_int(meta.get("preTokens")),
                              flags=frozenset(flags), **common)
        if subtype == "stop_hook_summary":
            infos = obj.get("hookInfos") if isinstance(obj.get("hookInfos"), list) else []
            cmds = [strip_ansi(_s(i.get("command"))) for i in infos if isinstance(i, dict)]
            errors = obj.get("hookErrors") if isinstance(obj.get("hookErrors"), list) else []
            text = "Stop hooks: " + "; ".join(cmds) if cmds else "Stop hooks"
            if errors:
                text += f" ({len(errors)} errors)"
            return NativeItem(index, line, K_HOOK, role="system", text=text, subtype=subtype, flags=frozenset(flags),
                              **common)
        return NativeItem(index, line, K_SYSTEM, role="system", text=content, subtype=subtype, flags=frozenset(flags),
                          **common)
    if rtype == "summary":
        common["leaf_uuid"] = _s(obj.get("leafUuid"))
        return NativeItem(index, line, K_SUMMARY, text=_s(obj.get("summary")), flags=frozenset(flags), **common)
    if rtype == "progress":
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        sub = _s(data.get("type"))
        detail = _s(data.get("hookName")) or _s(data.get("hookEvent")) or _s(data.get("command"))
        return NativeItem(index, line, K_PROGRESS, text=f"{sub or 'progress'} {detail}".strip(), subtype=sub,
                          flags=frozenset(flags), **common)
    if rtype == "file-history-snapshot":
        common["leaf_uuid"] = _s(obj.get("messageId"))
        return NativeItem(index, line, K_FILE_SNAPSHOT, text="File history snapshot", flags=frozenset(flags), **common)
    if rtype == "queue-operation":
        text = f"Queue: {_s(obj.get('operation'))} {_preview(_s(obj.get('content')))}".strip()
        return NativeItem(index, line, K_QUEUE, text=text, subtype=_s(obj.get("operation")), flags=frozenset(flags),
                          **common)
    return NativeItem(index, line, K_OTHER, text=rtype or _preview(p.text), subtype=rtype, flags=frozenset(flags),
                      **common)


def _is_prompt(item: NativeItem) -> bool:
    return item.kind == K_USER and "meta" not in item.flags


def parse_claude_code(
    source: Iterable[bytes | str] | bytes, path: str = "", *, known_uuids: frozenset[str] = frozenset()
) -> NativeTranscript:
    """Read the lines of one Claude Code JSONL file (a session or a sub-agent file)."""
    items: list[NativeItem] = []
    session_id = cwd = version = ""
    for p in (_parse_line(line) for line in _lines_of(source)):
        items.append(_unreadable(len(items), p) if p.error else _claude_item(len(items), p))
        if isinstance(p.obj, dict):
            session_id = session_id or _s(p.obj.get("sessionId"))
            cwd = cwd or _s(p.obj.get("cwd"))
            version = version or _s(p.obj.get("version"))

    # Graph: the first occurrence of a uuid is the node; a later copy of the same uuid is a replay.
    node: dict[str, int] = {}
    salvaged: dict[str, int] = {}
    flags: list[set[str]] = [set(i.flags) for i in items]
    for i, item in enumerate(items):
        if not item.uuid:
            continue
        if item.kind == K_UNREADABLE:
            for u in _SALVAGE_UUID.findall(item.raw):
                salvaged.setdefault(u, i)
            continue
        if item.uuid in node:
            flags[i].add("replay")
        else:
            node[item.uuid] = i
    for u, i in salvaged.items():
        node.setdefault(u, i)

    parent: list[int | None] = [None] * len(items)
    parent_state = ["root"] * len(items)
    parent_line = [0] * len(items)
    for i, item in enumerate(items):
        if not item.parent_uuid:
            continue
        j = node.get(item.parent_uuid)
        if j is None or j == i:
            parent_state[i] = "missing"
            continue
        parent[i] = j
        parent_line[i] = items[j].line
        parent_state[i] = "unreadable" if items[j].kind == K_UNREADABLE else "ok"

    # Forks: typed prompts under one parent, written at different times (a replayed copy is not a branch).
    children: dict[int, list[int]] = {}
    for i, j in enumerate(parent):
        if j is not None and "replay" not in flags[i]:
            children.setdefault(j, []).append(i)
    fork_of: dict[int, tuple[str, int]] = {}  # prompt item -> (fork uuid, branch index)
    fork_prompts: dict[int, list[int]] = {}
    for j, kids in children.items():
        prompts: list[int] = []
        for k in kids:
            if not _is_prompt(items[k]):
                continue
            dup = any(
                items[m].timestamp == items[k].timestamp and items[m].text == items[k].text for m in prompts
            )
            if dup:
                flags[k].add("replay")
                continue
            prompts.append(k)
        stamps = {items[k].timestamp for k in prompts}
        if len(prompts) >= 2 and len(stamps) >= 2:
            prompts.sort(key=lambda k: (items[k].timestamp, items[k].line))
            fork_prompts[j] = prompts
            for b, k in enumerate(prompts):
                fork_of[k] = (items[j].uuid, b)

    # Branch path of every item: inherited from its parent; items outside the graph follow the previous item.
    bpath: list[tuple[tuple[str, int], ...] | None] = [None] * len(items)

    def resolve(i: int) -> tuple[tuple[str, int], ...]:
        chain: list[int] = []
        seen: set[int] = set()
        cur: int | None = i
        while cur is not None and bpath[cur] is None and cur not in seen:
            seen.add(cur)
            chain.append(cur)
            cur = parent[cur]
        found = bpath[cur] if cur is not None else None
        base: tuple[tuple[str, int], ...] = found if found is not None else ()
        for k in reversed(chain):
            if k in fork_of:
                base = base + (fork_of[k],)
            bpath[k] = base
        return bpath[i] or ()

    previous: tuple[tuple[str, int], ...] = ()
    for i, item in enumerate(items):
        if bpath[i] is None:
            if parent[i] is not None:
                resolve(i)
            elif item.kind == K_FILE_SNAPSHOT and item.leaf_uuid in node:
                bpath[i] = resolve(node[item.leaf_uuid])
            elif item.uuid and not item.parent_uuid and item.kind != K_UNREADABLE:
                bpath[i] = ()
            else:
                bpath[i] = previous
        previous = bpath[i] or ()

    # Tool pairs: each tool_use with the first tool_result naming it.
    results: dict[str, tuple[int, NativeBlock]] = {}
    for i, item in enumerate(items):
        for b in item.blocks:
            if b.kind == "tool_result" and b.tool_id and b.tool_id not in results:
                results[b.tool_id] = (i, b)
    pairs: list[ToolPair] = []
    for i, item in enumerate(items):
        for b in item.blocks:
            if b.kind != "tool_use" or not b.tool_id:
                continue
            got = results.get(b.tool_id)
            if got is None:
                flags[i].add("interrupted")
                pairs.append(ToolPair(b.tool_id, b.tool_name, b.arguments, item.line, 0, "", False, True))
                continue
            r_index, r_block = got
            sub = items[r_index].agent_id if b.tool_name in TASK_TOOL_NAMES else ""
            pairs.append(ToolPair(b.tool_id, b.tool_name, b.arguments, item.line, items[r_index].line, r_block.text,
                                  r_block.is_error, False, sub))

    uuids = frozenset(node) | known_uuids
    summaries = tuple(
        SummaryRef(item.line, item.text, item.leaf_uuid, item.leaf_uuid not in uuids)
        for item in items
        if item.kind == K_SUMMARY
    )
    for s in summaries:
        if s.dangling:
            flags[next(i for i, it in enumerate(items) if it.line == s.line)].add("dangling_leaf")
    compactions = tuple(
        Compaction(item.line, item.kind, item.subtype, item.tokens, item.text if item.kind == K_COMPACT_SUMMARY else "")
        for item in items
        if item.kind in (K_COMPACT_BOUNDARY, K_COMPACT_SUMMARY)
    )

    final = tuple(
        replace(
            item,
            parent_state=parent_state[i],
            parent_line=parent_line[i],
            branch=bpath[i] or (),
            flags=frozenset(flags[i]),
        )
        for i, item in enumerate(items)
    )
    forks = tuple(
        ForkPoint(
            items[j].uuid,
            items[j].line,
            tuple(
                Branch(
                    b,
                    items[k].uuid,
                    items[k].line,
                    items[k].timestamp,
                    _preview(items[k].text),
                    sum(1 for it in final if (items[j].uuid, b) in it.branch),
                )
                for b, k in enumerate(prompts)
            ),
        )
        for j, prompts in sorted(fork_prompts.items(), key=lambda kv: items[kv[0]].line)
    )
    readable = [i for i in items if i.kind != K_UNREADABLE]
    agent_ids = {i.agent_id for i in readable if "sidechain" in i.flags and i.agent_id}
    sidechain_only = bool(readable) and all("sidechain" in i.flags for i in readable if i.uuid)
    return NativeTranscript(
        agent=AGENT_CLAUDE_CODE,
        path=path,
        session_id=session_id,
        cwd=cwd,
        version=version,
        items=final,
        tool_pairs=tuple(pairs),
        forks=forks,
        compactions=compactions,
        summaries=summaries,
        agent_id=next(iter(agent_ids)) if sidechain_only and len(agent_ids) == 1 else "",
        uuids=frozenset(node),
    )


# ------------------------------------------------------------------------------------------------- Codex


def _codex_content(content: object) -> tuple[NativeBlock, ...]:
    if isinstance(content, str):
        return (NativeBlock("text", content),)
    if not isinstance(content, list):
        return ()
    out: list[NativeBlock] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = _s(block.get("type"))
        if kind in ("input_text", "output_text", "text"):
            out.append(NativeBlock("text", strip_ansi(_s(block.get("text")))))
        elif kind in ("input_image", "image"):
            out.append(NativeBlock("image", "[image]"))
        else:
            out.append(NativeBlock("other", f"[{kind or 'block'}]"))
    return tuple(out)


def _encrypted_label(value: str) -> str:
    return f"[encrypted reasoning, {len(value)} characters]"


def _codex_response(index: int, line: int, payload: dict[str, Any], common: dict[str, Any]) -> NativeItem:
    ptype = _s(payload.get("type"))
    if ptype == "message":
        role = _s(payload.get("role"))
        blocks = _codex_content(payload.get("content"))
        text = "\n".join(b.text for b in blocks)
        kind = {"user": K_USER, "assistant": K_ASSISTANT, "developer": K_DEVELOPER, "system": K_SYSTEM}.get(role, K_OTHER)
        return NativeItem(index, line, kind, role=role, text=text, blocks=blocks, subtype=_s(payload.get("phase")),
                          **common)
    if ptype == "reasoning":
        blocks: list[NativeBlock] = []
        for s in payload.get("summary") or []:
            if isinstance(s, dict):
                blocks.append(NativeBlock("reasoning_summary", _s(s.get("text"))))
        content = payload.get("content")
        if isinstance(content, list):
            for c in content:
                if isinstance(c, dict):
                    blocks.append(NativeBlock("thinking", _s(c.get("text"))))
        enc = payload.get("encrypted_content")
        if isinstance(enc, str) and enc:
            blocks.append(NativeBlock("encrypted_reasoning", _encrypted_label(enc)))
        text = "\n".join(b.text for b in blocks)
        return NativeItem(index, line, K_REASONING, role="assistant", text=text, blocks=tuple(blocks), **common)
    if ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        name = _s(payload.get("name")) or ("shell" if ptype == "local_shell_call" else "")
        if ptype == "function_call":
            args = _json_text(payload.get("arguments"))
        elif ptype == "custom_tool_call":
            args = _json_text(payload.get("input"))
        else:
            args = _json_text(payload.get("action"))
        call_id = _s(payload.get("call_id")) or _s(payload.get("id"))
        block = NativeBlock("tool_use", _tool_text(name, args), call_id, name, args)
        return NativeItem(index, line, K_TOOL_CALL, role="assistant", text=block.text, blocks=(block,),
                          tool_ids=(call_id,) if call_id else (), subtype=ptype, **common)
    if ptype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        out = payload.get("output")
        is_error = False
        if isinstance(out, dict):
            is_error = out.get("success") is False
            out = out.get("content", out)
        text = strip_ansi(_result_text(out))
        call_id = _s(payload.get("call_id"))
        block = NativeBlock("tool_result", text, call_id, is_error=is_error)
        return NativeItem(index, line, K_TOOL_RESULT, role="tool", text=text, blocks=(block,),
                          tool_ids=(call_id,) if call_id else (), subtype=ptype, **common)
    return NativeItem(index, line, K_OTHER, text=ptype or "response item", subtype=ptype, **common)


def _codex_item(index: int, p: _Parsed, turn_id: str) -> NativeItem:
    obj = p.obj
    line = p.line.number
    common: dict[str, Any] = dict(raw=p.text, turn_id=turn_id)
    if not isinstance(obj, dict):
        return NativeItem(index, line, K_OTHER, text=_preview(p.text), subtype=type(obj).__name__, **common)
    rtype = _s(obj.get("type"))
    payload = obj.get("payload")
    common["timestamp"] = _s(obj.get("timestamp"))
    if "payload" not in obj and rtype in ("message", "reasoning", "function_call", "function_call_output",
                                          "custom_tool_call", "custom_tool_call_output", "local_shell_call"):
        return _codex_response(index, line, obj, common)  # older rollouts: response items written bare
    if not rtype and "id" in obj and "instructions" in obj:
        return NativeItem(index, line, K_SESSION_META, text=f"Session {_s(obj.get('id'))}", **common)
    if not isinstance(payload, dict):
        return NativeItem(index, line, K_OTHER, text=rtype or _preview(p.text), subtype=rtype, **common)
    if rtype == "session_meta":
        parts = [f"Codex {_s(payload.get('cli_version'))}".strip(), _s(payload.get("originator")),
                 _s(payload.get("cwd"))]
        return NativeItem(index, line, K_SESSION_META, text=" · ".join(x for x in parts if x), **common)
    if rtype == "turn_context":
        parts = [f"model {_s(payload.get('model'))}" if payload.get("model") else "",
                 f"approval {_s(payload.get('approval_policy'))}" if payload.get("approval_policy") else "",
                 _s(payload.get("cwd"))]
        common["turn_id"] = _s(payload.get("turn_id")) or turn_id
        return NativeItem(index, line, K_TURN_CONTEXT, text=" · ".join(x for x in parts if x), **common)
    if rtype == "response_item":
        return _codex_response(index, line, payload, common)
    if rtype == "compacted":
        history = payload.get("replacement_history")
        n = len(history) if isinstance(history, list) else 0
        return NativeItem(index, line, K_COMPACTED, text=_s(payload.get("message")),
                          subtype=f"{n} replacement items", **common)
    if rtype == "event_msg":
        etype = _s(payload.get("type"))
        if etype == "task_started":
            common["turn_id"] = _s(payload.get("turn_id")) or turn_id
            return NativeItem(index, line, K_TURN_START, text="Turn started", subtype=etype, **common)
        if etype == "task_complete":
            common["turn_id"] = _s(payload.get("turn_id")) or turn_id
            return NativeItem(index, line, K_TURN_END, text="Turn complete", subtype=etype, **common)
        if etype == "turn_aborted":
            common["turn_id"] = _s(payload.get("turn_id")) or turn_id
            return NativeItem(index, line, K_TURN_ABORTED, text=f"Turn aborted: {_s(payload.get('reason'))}",
                              subtype=etype, **common)
        if etype == "token_count":
            info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
            total = info.get("total_token_usage") if isinstance(info.get("total_token_usage"), dict) else {}
            tokens = _int(total.get("total_tokens"))
            text = f"Tokens: {tokens}" if tokens is not None else "Rate limits"
            return NativeItem(index, line, K_TOKEN_COUNT, text=text, tokens=tokens, subtype=etype, **common)
        mirror = etype in ("user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content")
        text = _s(payload.get("message")) or _s(payload.get("text")) or etype
        return NativeItem(index, line, K_EVENT, text=strip_ansi(text), subtype=etype,
                          flags=frozenset({"mirror"}) if mirror else frozenset(), **common)
    return NativeItem(index, line, K_OTHER, text=rtype, subtype=rtype, **common)


def parse_codex(source: Iterable[bytes | str] | bytes, path: str = "") -> NativeTranscript:
    """Read the lines of one Codex rollout file."""
    items: list[NativeItem] = []
    turn_id = ""
    session_id = cwd = version = ""
    replacement_history: dict[int, tuple[NativeItem, ...]] = {}
    for p in (_parse_line(line) for line in _lines_of(source)):
        if p.error:
            item = replace(_unreadable(len(items), p), turn_id=turn_id)
        else:
            item = _codex_item(len(items), p, turn_id)
            obj = p.obj
            if isinstance(obj, dict):
                payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else None
                if obj.get("type") == "session_meta" and payload and not session_id:
                    session_id = _s(payload.get("id"))
                    cwd = _s(payload.get("cwd"))
                    version = _s(payload.get("cli_version"))
                elif item.kind == K_SESSION_META and not session_id:
                    session_id = _s(obj.get("id"))
            if item.kind in (K_TURN_START, K_TURN_CONTEXT):
                turn_id = item.turn_id
            if item.kind == K_COMPACTED and isinstance(obj, dict) and isinstance(obj.get("payload"), dict):
                history = obj["payload"].get("replacement_history")
                replacement_history[item.index] = tuple(
                    _codex_response(k, item.line, entry, {"raw": json.dumps(entry, ensure_ascii=False)})
                    if isinstance(entry, dict)
                    else NativeItem(k, item.line, K_OTHER, text=_preview(_json_text(entry)))
                    for k, entry in enumerate(history if isinstance(history, list) else [])
                )
        items.append(item)
        if item.kind in (K_TURN_END, K_TURN_ABORTED):
            turn_id = ""

    flags = [set(i.flags) for i in items]
    # Turns.
    turns: list[Turn] = []
    open_turn: dict[str, Any] | None = None
    per_turn = Counter(it.turn_id for it in items if it.turn_id)

    def close(end_line: int, complete: bool, aborted: bool) -> None:
        nonlocal open_turn
        if open_turn is None:
            return
        n = per_turn.get(open_turn["id"], 0) if open_turn["id"] else 0
        turns.append(Turn(open_turn["id"], open_turn["line"], end_line, complete, aborted, n))
        if not complete:
            flags[open_turn["index"]].add("aborted_turn" if aborted else "incomplete_turn")
        open_turn = None

    for i, item in enumerate(items):
        if item.kind == K_TURN_START:
            close(0, False, False)
            open_turn = {"id": item.turn_id, "line": item.line, "index": i}
        elif item.kind == K_TURN_END and open_turn is not None:
            close(item.line, True, False)
        elif item.kind == K_TURN_ABORTED and open_turn is not None:
            close(item.line, False, True)
    close(0, False, False)

    # Calls and outputs by call_id.
    outputs: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.kind == K_TOOL_RESULT:
            for cid in item.tool_ids:
                outputs.setdefault(cid, i)
    pairs: list[ToolPair] = []
    for i, item in enumerate(items):
        if item.kind != K_TOOL_CALL or not item.blocks:
            continue
        b = item.blocks[0]
        j = outputs.get(b.tool_id) if b.tool_id else None
        if j is None:
            flags[i].add("interrupted")
            pairs.append(ToolPair(b.tool_id, b.tool_name, b.arguments, item.line, 0, "", False, True))
        else:
            rb = items[j].blocks[0]
            pairs.append(ToolPair(b.tool_id, b.tool_name, b.arguments, item.line, items[j].line, rb.text,
                                  rb.is_error, False))
    compactions = tuple(
        Compaction(item.line, K_COMPACTED, "", None, item.text, len(replacement_history.get(item.index, ())),
                   replacement_history.get(item.index, ()))
        for item in items
        if item.kind == K_COMPACTED
    )
    final = tuple(replace(item, flags=frozenset(flags[i])) for i, item in enumerate(items))
    return NativeTranscript(
        agent=AGENT_CODEX,
        path=path,
        session_id=session_id,
        cwd=cwd,
        version=version,
        items=final,
        tool_pairs=tuple(pairs),
        compactions=compactions,
        turns=tuple(turns),
    )


# ------------------------------------------------------------------------------------------ files, sessions


def detect_agent(source: Iterable[bytes | str] | bytes) -> str:
    """``claude-code``, ``codex`` or "" from the first readable records."""
    for p in (_parse_line(line) for line in _lines_of(source)):
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
    return parse_claude_code(Path(path).read_bytes(), str(path), known_uuids=known_uuids)


def read_codex_file(path: str | Path) -> NativeTranscript:
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


def link_claude_code_session(
    main: NativeTranscript | None, subagents: Sequence[tuple[NativeTranscript, str]]
) -> NativeSession:
    """Link sub-agent transcripts (each with its layout) to the ``Task`` calls of ``main``.

    A Task result names its sub-agent in ``toolUseResult.agentId``; where it does not (older versions), the
    sub-agent whose first prompt equals the Task's ``prompt`` argument is taken.
    """
    all_uuids = frozenset().union(*(t.uuids for t, _ in subagents)) | (main.uuids if main else frozenset())
    if main is not None and main.summaries:
        main = _redo_dangling(main, all_uuids)
    tasks = [p for p in (main.tool_pairs if main else ()) if p.name in TASK_TOOL_NAMES]
    links: list[SubAgentLink] = []
    used: set[str] = set()
    for t, layout in subagents:
        t = _redo_dangling(t, all_uuids) if t.summaries else t
        agent_id = t.agent_id or _agent_id_from_name(t.path)
        prompt = _first_user_text(t)
        task = next((p for p in tasks if p.subagent_id and p.subagent_id == agent_id), None)
        if task is None:
            task = next((p for p in tasks if p.call_id not in used and not p.subagent_id and prompt
                         and _task_prompt(p) == prompt), None)
        if task is not None:
            used.add(task.call_id)
        links.append(SubAgentLink(agent_id, t, layout, task.call_id if task else "", task.call_line if task else 0,
                                  prompt))
    session_id = main.session_id if main else next((t.session_id for t, _ in subagents if t.session_id), "")
    return NativeSession(AGENT_CLAUDE_CODE, session_id, main, tuple(links))


def _task_prompt(pair: ToolPair) -> str:
    try:
        args = json.loads(pair.arguments)
    except ValueError:
        return ""
    return _s(args.get("prompt")) if isinstance(args, dict) else ""


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
