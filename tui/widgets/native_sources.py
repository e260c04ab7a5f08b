"""Native agent transcripts (Claude Code, Codex) as items of the Transcript screen's views.

A native transcript is read whole (:mod:`store.agents.native` parses every line of a file, or of a checkpoint read back
with :func:`store.agents.capture.read_checkpoint_session`), so its sources hold every item in memory and hand the view
the whole list in one chunk; the view's anchor scroll model, cursor and block cache work as for the mothx replay.

:func:`build_blocks` turns one branch choice of a transcript into blocks:

* one block per record, in file order, with keys ``(SECTION_BODY, record index * 4 + 2)`` — stable when the file
  grows, so a live update keeps the place;
* a tool result is drawn under its call (the result record gets no block of its own when its call is shown);
  a call without result is flagged interrupted; a Task call names its sub-agent;
* a fork marker (``⑂ 2 branches — b to switch``) before the first record of a chosen branch, key ``index * 4``;
* quiet records (progress, hooks, file snapshots, token counts, Codex event mirrors) as one muted line each, and
  Codex turns as rules; neither takes the cursor;
* unreadable lines in place, with their reason; a record whose parent is an unreadable line says so.

:class:`NativeRawSource` lists the file's lines by line number for the raw view.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from store.agents.native import (
    AGENT_CODEX,
    K_COMPACT_BOUNDARY,
    K_COMPACTED,
    K_EVENT,
    K_FILE_SNAPSHOT,
    K_HOOK,
    K_PROGRESS,
    K_QUEUE,
    K_TOKEN_COUNT,
    K_TOOL_RESULT,
    K_TURN_ABORTED,
    K_TURN_CONTEXT,
    K_TURN_END,
    K_TURN_START,
    ForkPoint,
    NativeItem,
    NativeSession,
    NativeTranscript,
    SubAgentLink,
    ToolPair,
)
from tui.widgets.block_base import SECTION_BODY, ViewItem
from tui.widgets.transcript_sources import Chunk, WindowSource

QUIET_KINDS = frozenset({K_PROGRESS, K_HOOK, K_FILE_SNAPSHOT, K_QUEUE, K_TOKEN_COUNT, K_TURN_CONTEXT, K_EVENT})
"""Records drawn as one muted line (the cursor passes them by)."""
TURN_KINDS = frozenset({K_TURN_START, K_TURN_END, K_TURN_ABORTED})

# ViewItem kinds of native items
N_RECORD = "native_record"
N_QUIET = "native_quiet"
N_TURN = "native_turn"
N_FORK = "native_fork"
N_SUBAGENT = "native_subagent"  # a sub-agent no Task call of the shown transcript names
N_ROW = "native_row"
RULE_KINDS = frozenset({N_QUIET, N_TURN})

SLOT_FORK = 0
SLOT_RECORD = 2


@dataclass(frozen=True)
class CallResult:
    """A tool call of a record and what became of it."""

    call_id: str
    name: str
    arguments: str
    result_line: int  # 0: no result was recorded
    result_text: str
    is_error: bool
    interrupted: bool
    subagent: SubAgentLink | None = None
    exit_code: int | None = None

    @property
    def subagent_id(self) -> str:
        return self.subagent.agent_id if self.subagent is not None else ""


@dataclass(frozen=True)
class RecordView:
    """One native record as a block: the record, its calls with their results, and what the reader found."""

    item: NativeItem
    agent: str
    calls: tuple[CallResult, ...] = ()
    branch_label: str = ""  # "⑂ 2/2" when the record belongs to a chosen branch
    encrypted_bytes: tuple[int, ...] = ()  # Codex reasoning: the size of each encrypted part
    replacement: tuple[NativeItem, ...] = ()  # Codex compacted: the replacement history
    leaf_line: int = 0  # a summary whose leaf is in this file: that record's line
    results_elsewhere: tuple[str, ...] = ()  # tool_result blocks whose call is shown in its own block
    maybe_parent_line: int = 0  # parent in no readable record: the nearest unreadable line before it

    @property
    def subagents(self) -> tuple[SubAgentLink, ...]:
        return tuple(c.subagent for c in self.calls if c.subagent is not None)


@dataclass(frozen=True)
class ForkMark:
    """Where a rewind split the conversation, and which branch is shown."""

    fork: ForkPoint
    chosen: int

    @property
    def count(self) -> int:
        return len(self.fork.branches)


@dataclass(frozen=True)
class SubAgentNote:
    """A sub-agent of the session that no Task call of the shown transcript names (listed at the end)."""

    link: SubAgentLink


@dataclass(frozen=True)
class RawLine:
    """One line of a native file for the raw view."""

    item: NativeItem


def record_key(index: int, slot: int = SLOT_RECORD) -> tuple[int, int]:
    return (SECTION_BODY, index * 4 + slot)


def record_index(key: tuple[int, int]) -> int:
    return key[1] // 4


def encrypted_sizes(item: NativeItem) -> tuple[int, ...]:
    """Bytes of the encrypted reasoning of a Codex reasoning record (read from its JSON)."""
    if not any(b.kind == "encrypted_reasoning" for b in item.blocks):
        return ()
    try:
        obj = json.loads(item.raw)
    except ValueError:
        return ()
    payload = obj.get("payload", obj) if isinstance(obj, dict) else None
    enc = payload.get("encrypted_content") if isinstance(payload, dict) else None
    return (len(enc.encode("utf-8")),) if isinstance(enc, str) and enc else ()


@dataclass
class _Builder:
    t: NativeTranscript
    links: Mapping[str, SubAgentLink]
    out: list[ViewItem] = field(default_factory=list)

    def add(self, key: tuple[int, int], kind: str, payload: object) -> None:
        self.out.append(ViewItem(key, kind, payload, float(len(self.out))))


def build_blocks(
    t: NativeTranscript,
    selection: Mapping[str, int] | None = None,
    links: Mapping[str, SubAgentLink] | None = None,
    unlinked: Sequence[SubAgentLink] = (),
) -> list[ViewItem]:
    """The blocks of ``t`` for one branch per fork (``selection``: fork parent uuid → branch index; the latest
    branch where none is given). ``links`` maps Task call ids to their sub-agents; ``unlinked`` sub-agents are
    listed after the last record."""
    shown = t.view(selection)
    chosen = {f.parent_uuid: f.default for f in t.forks}
    for fork, idx in (selection or {}).items():
        if fork in chosen and 0 <= idx < len(next(f for f in t.forks if f.parent_uuid == fork).branches):
            chosen[fork] = idx
    forks = {f.parent_uuid: f for f in t.forks}
    pairs: dict[str, ToolPair] = {}
    for p in t.tool_pairs:
        pairs.setdefault(p.call_id, p)
    shown_calls = {b.tool_id for it in shown for b in it.blocks if b.kind == "tool_use" and b.tool_id}
    uuid_lines = {it.uuid: it.line for it in t.items if it.uuid and it.kind != "unreadable"}
    bad_lines = [it.line for it in t.items if it.kind == "unreadable"]
    b = _Builder(t, links or {})
    started: set[tuple[str, int]] = set()
    for item in shown:
        slot = SLOT_FORK
        for step in item.branch:
            if step in started or step[0] not in forks:
                continue
            started.add(step)
            if slot <= SLOT_FORK + 1:
                b.add(record_key(item.index, slot), N_FORK, ForkMark(forks[step[0]], chosen.get(step[0], step[1])))
                slot += 1
        if item.kind == K_TOOL_RESULT and item.tool_ids and all(
            cid in shown_calls and cid in pairs for cid in item.tool_ids
        ):
            continue  # drawn under its call
        if item.kind in QUIET_KINDS:
            b.add(record_key(item.index), N_QUIET, RecordView(item, t.agent))
            continue
        if item.kind in TURN_KINDS:
            b.add(record_key(item.index), N_TURN, RecordView(item, t.agent))
            continue
        calls: list[CallResult] = []
        for block in item.blocks:
            if block.kind != "tool_use":
                continue
            pair = pairs.get(block.tool_id) if block.tool_id else None
            link = b.links.get(block.tool_id) if block.tool_id else None
            if pair is None:
                calls.append(CallResult(block.tool_id, block.tool_name, block.arguments, 0, "", False, True, link))
            else:
                calls.append(CallResult(block.tool_id, block.tool_name, block.arguments, pair.result_line,
                                        pair.result_text, pair.is_error, pair.interrupted, link, pair.exit_code))
        elsewhere = tuple(
            blk.tool_id for blk in item.blocks
            if blk.kind == "tool_result" and blk.tool_id in shown_calls and item.kind != K_TOOL_RESULT
        )
        if item.kind == K_TOOL_RESULT:
            elsewhere = ()
        label = ""
        if item.branch:
            label = " ".join(f"⑂ {chosen.get(u, i) + 1}/{len(forks[u].branches)}" for u, i in item.branch if u in forks)
        replacement: tuple[NativeItem, ...] = ()
        if item.kind == K_COMPACTED:
            replacement = next((c.replacement for c in t.compactions if c.line == item.line), ())
        maybe = 0
        if item.parent_state == "missing" and bad_lines and bad_lines[0] < item.line:
            maybe = bad_lines[bisect.bisect_left(bad_lines, item.line) - 1]
        b.add(record_key(item.index), N_RECORD, RecordView(
            item, t.agent, tuple(calls), label, encrypted_sizes(item), replacement,
            uuid_lines.get(item.leaf_uuid, 0) if item.kind == "summary" else 0, elsewhere, maybe,
        ))
    base = len(t.items)
    for k, link in enumerate(unlinked):
        b.add(record_key(base + k), N_SUBAGENT, SubAgentNote(link))
    return b.out


def session_links(session: NativeSession) -> tuple[dict[str, SubAgentLink], list[SubAgentLink]]:
    """Task call id → sub-agent, and the sub-agents no Task call of the main transcript names."""
    links = {s.task_call_id: s for s in session.subagents if s.task_call_id}
    main_calls = set()
    if session.main is not None:
        main_calls = {b.tool_id for it in session.main.items for b in it.blocks if b.kind == "tool_use"}
    unlinked = [s for s in session.subagents if not s.task_call_id or s.task_call_id not in main_calls]
    return links, unlinked


def is_compaction(item: NativeItem) -> bool:
    return item.kind in (K_COMPACT_BOUNDARY, K_COMPACTED) or "compact_summary" in item.flags


def marker_keys(items: Sequence[ViewItem]) -> list[tuple[int, int]]:
    """Keys of the blocks ``[`` / ``]`` visit: forks, compactions, summaries, unreadable lines, interrupted calls,
    records under an unreadable parent and turns that never completed."""
    keys: list[tuple[int, int]] = []
    for it in items:
        p = it.payload
        if isinstance(p, ForkMark):
            keys.append(it.key)
        elif isinstance(p, RecordView):
            item = p.item
            if (is_compaction(item) or item.kind in ("summary", "unreadable") or item.parent_state == "unreadable"
                    or p.maybe_parent_line
                    or any(c.interrupted for c in p.calls)
                    or {"incomplete_turn", "aborted_turn", "interrupted"} & item.flags
                    or item.kind == K_TURN_ABORTED):
                keys.append(it.key)
    return keys


class MemorySource(WindowSource):
    """Every item of a native transcript in memory: one fetch returns the rest of the list."""

    def __init__(self, items: Sequence[ViewItem]) -> None:
        self.items = tuple(items)
        self._seqs = [it.seq for it in self.items]
        self.total = max(1, len(self.items))

    def after(self, hi: int | None) -> Chunk:
        i = 0 if hi is None else bisect.bisect_right(self._seqs, hi)
        return Chunk(self.items[i:], None if hi is None else hi + 1, None, len(self.items) - i)

    def before(self, lo: int | None) -> Chunk:
        j = len(self.items) if lo is None else bisect.bisect_left(self._seqs, lo)
        return Chunk(self.items[:j], None, None if lo is None else lo - 1, j)

    def around(self, seq: int) -> Chunk:
        return Chunk(self.items, None, None, len(self.items))

    def rank_of_seq(self, seq: int) -> int:
        return bisect.bisect_left(self._seqs, seq)

    def seq_at_rank(self, rank: int) -> int | None:
        if not self.items:
            return None
        return self._seqs[max(0, min(rank, len(self._seqs) - 1))]


class NativeBlockSource(MemorySource):
    """The blocks of one branch choice of a native transcript."""


class NativeRawSource(MemorySource):
    """The lines of a native file by line number; unreadable ones carry their reason."""

    def __init__(self, t: NativeTranscript) -> None:
        super().__init__([ViewItem((SECTION_BODY, it.line), N_ROW, RawLine(it), float(n))
                          for n, it in enumerate(t.items)])


def agent_title(agent: str) -> str:
    return "Codex" if agent == AGENT_CODEX else "Claude Code" if agent else "native"


__all__ = [
    "N_FORK", "N_QUIET", "N_RECORD", "N_ROW", "N_SUBAGENT", "N_TURN", "RULE_KINDS", "CallResult", "ForkMark",
    "MemorySource", "NativeBlockSource", "NativeRawSource", "RawLine", "RecordView", "SubAgentNote", "agent_title",
    "build_blocks", "encrypted_sizes", "marker_keys", "record_index", "record_key", "session_links",
]
