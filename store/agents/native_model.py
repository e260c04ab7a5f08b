"""What a native agent transcript reads into: record kinds and the display-ready dataclasses.

Kinds (``K_*``) name what one line of a Claude Code or Codex file is; :class:`NativeItem` is one line,
:class:`NativeTranscript` one file and :class:`NativeSession` a session with its sub-agents. The readers are
:mod:`store.agents.native_claude` and :mod:`store.agents.native_codex`; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

AGENT_CLAUDE_CODE = "claude-code"
AGENT_CODEX = "codex"

# Item kinds.
K_USER = "user"
K_CONTEXT = "context"  # a user-role message the agent injected (environment, AGENTS.md, IDE, reminders, commands)
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
K_LAST_PROMPT = "last_prompt"  # Claude Code 2.1: the prompt left in the input box (``last-prompt``)
K_TURN_DURATION = "turn_duration"  # Claude Code 2.1: ``system`` / ``turn_duration`` with ``durationMs``
K_WEB_SEARCH = "web_search"  # Codex: a ``web_search_call`` response item (no call id, no output)
K_OTHER = "other"
K_UNREADABLE = "unreadable"

TASK_TOOL_NAMES = frozenset({"Task", "Agent"})

# The record a checkpoint stores in place of a line it cannot hold (not JSON, not UTF-8, longer than a record
# may be): valid JSON naming the line, why it is unreadable, its size and SHA-256, a preview of its text and,
# when small enough, its bytes (``raw_b64``). Read back, it is an ``unreadable`` item like the line itself.
UNREADABLE_RECORD = "sessionscope-unreadable-line"
PREVIEW_CHARS = 120

# ---------------------------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class NativeBlock:
    """One content block, normalised for display."""

    kind: str  # text | thinking | redacted_thinking | tool_use | tool_result | image | reasoning_summary
    #            | encrypted_reasoning | document | context (injected text; tool_name holds its label) | other
    text: str
    tool_id: str = ""
    tool_name: str = ""
    arguments: str = ""  # JSON text of the call's input / arguments
    is_error: bool = False
    exit_code: int | None = None  # a tool result: the command's exit code, where the record gives one


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
    exit_code: int | None = None


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
    # Claude Code 1.0.x: sub-agent chains written inline in this file (``isSidechain``), not in ``items``.
    inline_subagents: tuple[NativeTranscript, ...] = ()

    @property
    def file_records(self) -> int:
        """Records of the file: these items and those of the inline sub-agents."""
        return len(self.items) + sum(t.file_records for t in self.inline_subagents)

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
    #              | "inline" (Claude Code 1.0.x: sidechain records in the session file itself)
    #              | "absent" (a Task result names it, but its file is not present: an empty transcript)
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
