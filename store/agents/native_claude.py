"""The Claude Code reader: one JSONL file (a session or a sub-agent file) into a :class:`NativeTranscript`.

Records form a graph by ``uuid`` / ``parentUuid``. A **real rewind** is a parent with two or more typed user
prompts written at different times; each prompt starts a :class:`Branch` of a :class:`ForkPoint`. Other parents
with several children (parallel tool results, progress and hook lines, a replayed copy of a prompt) are
recording artifacts, not branches. ``compact_boundary`` records continue their ``logicalParentUuid``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from store.agents.native_lines import (
    COMMAND_PREFIXES,
    SALVAGE_UUID,
    ParsedLine,
    compact_fields,
    context_label,
    dict_of,
    exit_code_in,
    int_of,
    json_text,
    lines_of,
    list_of,
    parse_line,
    preview,
    result_text,
    strip_ansi,
    text_of,
    tool_text,
    unreadable_item,
)
from store.agents.native_model import (
    AGENT_CLAUDE_CODE,
    K_ASSISTANT,
    K_COMPACT_BOUNDARY,
    K_COMPACT_SUMMARY,
    K_CONTEXT,
    K_FILE_SNAPSHOT,
    K_HOOK,
    K_LAST_PROMPT,
    K_OTHER,
    K_PROGRESS,
    K_QUEUE,
    K_SUMMARY,
    K_SYSTEM,
    K_TOOL_RESULT,
    K_TURN_DURATION,
    K_UNREADABLE,
    K_USER,
    TASK_TOOL_NAMES,
    Branch,
    Compaction,
    ForkPoint,
    NativeBlock,
    NativeItem,
    NativeTranscript,
    SummaryRef,
    ToolPair,
)
from store.times import duration

# ----------------------------------------------------------------------------------------------- Claude Code

# Fields every kind of record may carry: left out of the compact view of a record type not known here.
ENVELOPE = ("parentUuid", "logicalParentUuid", "isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch",
            "type", "subtype", "uuid", "timestamp", "slug", "agentId", "requestId", "isMeta", "level", "entrypoint")


def _text_block(text: str) -> NativeBlock:
    """A text block, or a ``context`` block (labelled in ``tool_name``) when the agent injected the text."""
    label = context_label(text)
    return NativeBlock("context", text, tool_name=label) if label else NativeBlock("text", text)


def _claude_blocks(content: object) -> tuple[NativeBlock, ...]:
    if isinstance(content, str):
        return (_text_block(strip_ansi(content)),)
    if not isinstance(content, list):
        return ()
    out: list[NativeBlock] = []
    for block in content:
        if isinstance(block, str):
            out.append(_text_block(block))
            continue
        if not isinstance(block, dict):
            continue
        kind = text_of(block.get("type"))
        if kind == "text":
            out.append(_text_block(strip_ansi(text_of(block.get("text")))))
        elif kind == "thinking":
            out.append(NativeBlock("thinking", text_of(block.get("thinking"))))
        elif kind == "redacted_thinking":
            out.append(NativeBlock("redacted_thinking", "(redacted thinking)"))
        elif kind in ("tool_use", "server_tool_use"):
            args = json_text(block.get("input"))
            name = text_of(block.get("name"))
            out.append(NativeBlock("tool_use", tool_text(name, args), text_of(block.get("id")), name, args))
        elif kind == "tool_result":
            text = strip_ansi(result_text(block.get("content")))
            is_error = block.get("is_error") is True
            out.append(
                NativeBlock(
                    "tool_result",
                    text,
                    text_of(block.get("tool_use_id")),
                    is_error=is_error,
                    exit_code=exit_code_in(text) if is_error else None,
                )
            )
        elif kind == "image":
            out.append(NativeBlock("image", "[image]"))
        elif kind == "document":
            out.append(NativeBlock("document", "[document]"))
        else:
            out.append(NativeBlock("other", f"[{kind or 'block'}]"))
    return tuple(out)


def _result_exit_code(tur: object) -> int | None:
    """The exit code a ``toolUseResult`` names (``exitCode`` / ``exit_code`` / ``returnCode``), if any."""
    d = dict_of(tur)
    for key in ("exitCode", "exit_code", "returnCode"):
        code = int_of(d.get(key))
        if code is not None:
            return code
    return None


def _claude_item(index: int, p: ParsedLine) -> NativeItem:
    obj = p.obj
    line = p.line.number
    if not isinstance(obj, dict):
        return NativeItem(index, line, K_OTHER, text=preview(p.text), raw=p.text, subtype=type(obj).__name__)
    rtype = text_of(obj.get("type"))
    flags: set[str] = set()
    if obj.get("isSidechain") is True:
        flags.add("sidechain")
    if obj.get("isMeta") is True:
        flags.add("meta")
    common: dict[str, Any] = dict(
        timestamp=text_of(obj.get("timestamp")),
        uuid=text_of(obj.get("uuid")),
        parent_uuid=text_of(obj.get("parentUuid")),
        agent_id=text_of(obj.get("agentId")),
        raw=p.text,
    )
    if rtype in ("user", "assistant"):
        message = dict_of(obj.get("message"))
        role = text_of(message.get("role")) or rtype
        blocks = _claude_blocks(message.get("content"))
        if rtype != "user":  # only user-role text can be injected context
            blocks = tuple(replace(b, kind="text", tool_name="") if b.kind == "context" else b for b in blocks)
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
            if isinstance(tur, dict) and text_of(tur.get("agentId")):
                common["agent_id"] = text_of(tur.get("agentId"))
            code = _result_exit_code(tur)
            if code is not None and len(blocks) == 1:
                blocks = (replace(blocks[0], exit_code=code, is_error=blocks[0].is_error or code != 0),)
        elif rtype == "user" and not text.strip() and any(b.kind == "context" for b in blocks):
            kind = K_CONTEXT
            context = [b for b in blocks if b.kind == "context"]
            common["subtype"] = context[0].tool_name
            text = "\n".join(b.text for b in context)
            if text.lstrip().startswith(COMMAND_PREFIXES):
                flags.add("command")
        else:
            kind = K_USER
            if text.lstrip().startswith(COMMAND_PREFIXES):
                flags.add("command")
        usage = dict_of(message.get("usage"))
        tokens = None
        if usage:
            tokens = sum(v for k, v in usage.items() if k.endswith("_tokens") and isinstance(v, int))
        return NativeItem(index, line, kind, role=role, text=text, blocks=blocks, tool_ids=tool_ids,
                          flags=frozenset(flags), tokens=tokens, **common)
    if rtype == "system":
        subtype = text_of(obj.get("subtype"))
        content = strip_ansi(text_of(obj.get("content")))
        if subtype == "compact_boundary":
            meta = dict_of(obj.get("compactMetadata"))
            if not common["parent_uuid"]:
                common["parent_uuid"] = text_of(obj.get("logicalParentUuid"))
            flags.add("logical_parent")
            return NativeItem(index, line, K_COMPACT_BOUNDARY, role="system", text=content or "Conversation compacted",
                              subtype=text_of(meta.get("trigger")), tokens=int_of(meta.get("preTokens")),
                              flags=frozenset(flags), **common)
        if subtype == "stop_hook_summary":
            infos = list_of(obj.get("hookInfos"))
            cmds = [strip_ansi(text_of(i.get("command"))) for i in infos if isinstance(i, dict)]
            errors = list_of(obj.get("hookErrors"))
            text = "Stop hooks: " + "; ".join(cmds) if cmds else "Stop hooks"
            if errors:
                text += f" ({len(errors)} errors)"
            return NativeItem(index, line, K_HOOK, role="system", text=text, subtype=subtype, flags=frozenset(flags),
                              **common)
        if subtype == "turn_duration":
            ms = obj.get("durationMs")
            seconds = ms / 1000 if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None
            text = ("Turn took " + (f"{seconds:.1f} s" if seconds < 120 else duration(int(seconds))) + f" ({ms:,} ms)"
                    if seconds is not None else "Turn duration (not recorded)")
            return NativeItem(index, line, K_TURN_DURATION, role="system", text=text, subtype=subtype,
                              flags=frozenset(flags), **common)
        if not content.strip():
            content = compact_fields(obj, ENVELOPE + ("content",))
        return NativeItem(index, line, K_SYSTEM, role="system", text=content, subtype=subtype, flags=frozenset(flags),
                          **common)
    if rtype == "summary":
        common["leaf_uuid"] = text_of(obj.get("leafUuid"))
        return NativeItem(index, line, K_SUMMARY, text=text_of(obj.get("summary")), flags=frozenset(flags), **common)
    if rtype == "progress":
        data = dict_of(obj.get("data"))
        sub = text_of(data.get("type"))
        detail = text_of(data.get("hookName")) or text_of(data.get("hookEvent")) or text_of(data.get("command"))
        return NativeItem(index, line, K_PROGRESS, text=f"{sub or 'progress'} {detail}".strip(), subtype=sub,
                          flags=frozenset(flags), **common)
    if rtype == "file-history-snapshot":
        common["leaf_uuid"] = text_of(obj.get("messageId"))
        return NativeItem(index, line, K_FILE_SNAPSHOT, text="File history snapshot", flags=frozenset(flags), **common)
    if rtype == "queue-operation":
        op = text_of(obj.get("operation"))
        what = {"enqueue": "prompt queued", "dequeue": "queued prompt sent", "remove": "queued prompt removed",
                "popAll": "queued prompts taken back"}.get(op, op or "operation")
        queued = preview(text_of(obj.get("content")))
        text = what + (f": {queued}" if queued else "")
        return NativeItem(index, line, K_QUEUE, text=text, subtype=op, flags=frozenset(flags), **common)
    if rtype == "last-prompt":
        last = text_of(obj.get("lastPrompt"))
        return NativeItem(index, line, K_LAST_PROMPT, text=f"Last prompt in the input box: {last}" if last else
                          "Last prompt: (empty)", subtype=rtype, flags=frozenset(flags), **common)
    text = f"{rtype or 'record'}: {compact_fields(obj, ENVELOPE)}" if isinstance(obj, dict) else preview(p.text)
    return NativeItem(index, line, K_OTHER, text=text, subtype=rtype, flags=frozenset(flags | {"unknown_type"}),
                      **common)


def _compactions(items: list[NativeItem]) -> tuple[Compaction, ...]:
    """One compaction per ``compact_boundary``, its ``isCompactSummary`` record (the next one, or the one under
    it) giving its summary; a summary without a boundary before it is a compaction of its own."""
    out: list[Compaction] = []
    open_boundary: tuple[int, str] | None = None  # (index in out, boundary uuid) still waiting for its summary
    for item in items:
        if item.kind == K_COMPACT_BOUNDARY:
            out.append(Compaction(item.line, item.kind, item.subtype, item.tokens, ""))
            open_boundary = (len(out) - 1, item.uuid)
        elif item.kind == K_COMPACT_SUMMARY:
            if open_boundary is not None:
                n, _ = open_boundary
                out[n] = replace(out[n], summary=item.text)
                open_boundary = None
            else:
                out.append(Compaction(item.line, item.kind, item.subtype, item.tokens, item.text))
        elif item.kind in (K_USER, K_ASSISTANT) and open_boundary is not None:
            open_boundary = None
    return tuple(out)


def _is_prompt(item: NativeItem) -> bool:
    return item.kind == K_USER and "meta" not in item.flags


def parse_claude_code(
    source: Iterable[bytes | str] | bytes, path: str = "", *, known_uuids: frozenset[str] = frozenset()
) -> NativeTranscript:
    """Read the lines of one Claude Code JSONL file (a session or a sub-agent file).

    Claude Code 1.0.x wrote a sub-agent's (Task's) records inline in the session file, each with
    ``isSidechain: true`` and the sub-agent's first prompt as a root (``parentUuid: null``). In a file that also
    holds the main conversation, each such chain becomes its own transcript in ``inline_subagents`` (its items
    keep their line numbers) and is left out of ``items``, so it is never read as the user's conversation; a file
    of sidechain records only (a sub-agent file) is read as it is."""
    items: list[NativeItem] = []
    session_id = cwd = version = ""
    for p in (parse_line(line) for line in lines_of(source)):
        items.append(unreadable_item(len(items), p) if p.error else _claude_item(len(items), p))
        if isinstance(p.obj, dict):
            session_id = session_id or text_of(p.obj.get("sessionId"))
            cwd = cwd or text_of(p.obj.get("cwd"))
            version = version or text_of(p.obj.get("version"))
    main, groups = _split_sidechains(items)
    if not groups:
        return _assemble(items, path, session_id, cwd, version, known_uuids)
    subs = tuple(
        replace(_assemble([replace(it, index=k) for k, it in enumerate(g)], path, session_id, cwd, version,
                          known_uuids), agent_id=inline_agent_id(g[0]))
        for g in groups
    )
    t = _assemble([replace(it, index=k) for k, it in enumerate(main)], path, session_id, cwd, version, known_uuids)
    return replace(t, inline_subagents=subs, uuids=t.uuids.union(*(x.uuids for x in subs)))


def inline_agent_id(root: NativeItem) -> str:
    """The id an inline sidechain is known by: its own ``agentId`` when it has one, else ``inline-`` and the
    first 8 characters of its root record's uuid (or its line)."""
    if root.agent_id:
        return root.agent_id
    return f"inline-{root.uuid[:8]}" if root.uuid else f"inline-line{root.line}"


def _split_sidechains(items: list[NativeItem]) -> tuple[list[NativeItem], list[list[NativeItem]]]:
    """The main conversation and the inline sidechain chains of a file (none when every record with a uuid is a
    sidechain: a sub-agent file)."""
    with_uuid = [i for i in items if i.uuid and i.kind != K_UNREADABLE]
    if not any("sidechain" in i.flags for i in with_uuid) or all("sidechain" in i.flags for i in with_uuid):
        return items, []
    group_of: dict[str, int] = {}
    groups: list[list[NativeItem]] = []
    main: list[NativeItem] = []
    for item in items:
        if "sidechain" not in item.flags or item.kind == K_UNREADABLE:
            main.append(item)
            continue
        g = group_of.get(item.parent_uuid) if item.parent_uuid else None
        if g is None and item.agent_id:
            g = next((n for n, grp in enumerate(groups) if grp[0].agent_id == item.agent_id), None)
        if g is None:
            g = len(groups)
            groups.append([])
        groups[g].append(item)
        if item.uuid:
            group_of.setdefault(item.uuid, g)
    return main, groups


def _assemble(items: list[NativeItem], path: str, session_id: str, cwd: str, version: str,
              known_uuids: frozenset[str]) -> NativeTranscript:
    """A transcript of read items: the uuid graph, forks, tool pairs, summaries and compactions."""

    # Graph: the first occurrence of a uuid is the node; a later copy of the same uuid is a replay.
    node: dict[str, int] = {}
    salvaged: dict[str, int] = {}
    flags: list[set[str]] = [set(i.flags) for i in items]
    for i, item in enumerate(items):
        if not item.uuid:
            continue
        if item.kind == K_UNREADABLE:
            for u in SALVAGE_UUID.findall(item.raw):
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
            for branch_no, k in enumerate(prompts):
                fork_of[k] = (items[j].uuid, branch_no)

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
                                  r_block.is_error, False, sub, r_block.exit_code))

    uuids = frozenset(node) | known_uuids
    summaries = tuple(
        SummaryRef(item.line, item.text, item.leaf_uuid, item.leaf_uuid not in uuids)
        for item in items
        if item.kind == K_SUMMARY
    )
    for s in summaries:
        if s.dangling:
            flags[next(i for i, it in enumerate(items) if it.line == s.line)].add("dangling_leaf")
    compactions = _compactions(items)

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
                    preview(items[k].text),
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
