"""The Codex reader: one rollout file into a :class:`NativeTranscript`.

Rollouts are linear: ``session_meta``, turns (``task_started`` … ``task_complete``), messages, reasoning, tool
calls paired with their outputs by ``call_id``, and ``compacted`` records with their replacement history.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from store.agents.native_lines import (
    ParsedLine,
    codex_output,
    compact_fields,
    context_label,
    dict_of,
    int_of,
    json_text,
    lines_of,
    list_of,
    parse_line,
    preview,
    result_text,
    split_ide_request,
    strip_ansi,
    text_of,
    tool_text,
    unreadable_item,
)
from store.agents.native_model import (
    AGENT_CODEX,
    K_ASSISTANT,
    K_COMPACTED,
    K_CONTEXT,
    K_DEVELOPER,
    K_EVENT,
    K_OTHER,
    K_REASONING,
    K_SESSION_META,
    K_SYSTEM,
    K_TOKEN_COUNT,
    K_TOOL_CALL,
    K_TOOL_RESULT,
    K_TURN_ABORTED,
    K_TURN_CONTEXT,
    K_TURN_END,
    K_TURN_START,
    K_USER,
    K_WEB_SEARCH,
    Compaction,
    NativeBlock,
    NativeItem,
    NativeTranscript,
    ToolPair,
    Turn,
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
        kind = text_of(block.get("type"))
        if kind in ("input_text", "output_text", "text"):
            out.append(NativeBlock("text", strip_ansi(text_of(block.get("text")))))
        elif kind in ("input_image", "image"):
            out.append(NativeBlock("image", "[image]"))
        else:
            out.append(NativeBlock("other", f"[{kind or 'block'}]"))
    return tuple(out)


def _context_blocks(blocks: tuple[NativeBlock, ...]) -> tuple[NativeBlock, ...]:
    """User text blocks with injected context marked ``context`` (labelled in ``tool_name``); IDE context is
    split into its context and the request typed under ``## My request for Codex:``."""
    out: list[NativeBlock] = []
    for b in blocks:
        label = context_label(b.text) if b.kind == "text" else ""
        if not label:
            out.append(b)
            continue
        context, request = split_ide_request(b.text)
        if context:
            out.append(NativeBlock("context", context, tool_name=label))
            if request:
                out.append(NativeBlock("text", request))
        else:
            out.append(NativeBlock("context", b.text, tool_name=label))
    return tuple(out)


def _encrypted_label(value: str) -> str:
    return f"[encrypted reasoning, {len(value)} characters]"


def _codex_response(index: int, line: int, payload: dict[str, Any], common: dict[str, Any]) -> NativeItem:
    ptype = text_of(payload.get("type"))
    if ptype == "message":
        role = text_of(payload.get("role"))
        blocks = _codex_content(payload.get("content"))
        kind = {"user": K_USER, "assistant": K_ASSISTANT, "developer": K_DEVELOPER, "system": K_SYSTEM}.get(role, K_OTHER)
        subtype = text_of(payload.get("phase"))
        if role == "user":
            blocks = _context_blocks(blocks)
            typed = [b for b in blocks if b.kind != "context"]
            context = [b for b in blocks if b.kind == "context"]
            if context and not any(b.kind == "text" and b.text.strip() for b in typed):
                kind, subtype = K_CONTEXT, context[0].tool_name
                text = "\n".join(b.text for b in context)
            else:
                text = "\n".join(b.text for b in typed)
        else:
            text = "\n".join(b.text for b in blocks)
        return NativeItem(index, line, kind, role=role, text=text, blocks=blocks, subtype=subtype, **common)
    if ptype == "reasoning":
        parts: list[NativeBlock] = []
        for s in list_of(payload.get("summary")):
            if isinstance(s, dict):
                parts.append(NativeBlock("reasoning_summary", text_of(s.get("text"))))
        for c in list_of(payload.get("content")):
            if isinstance(c, dict):
                parts.append(NativeBlock("thinking", text_of(c.get("text"))))
        enc = payload.get("encrypted_content")
        if isinstance(enc, str) and enc:
            parts.append(NativeBlock("encrypted_reasoning", _encrypted_label(enc)))
        text = "\n".join(b.text for b in parts)
        return NativeItem(index, line, K_REASONING, role="assistant", text=text, blocks=tuple(parts), **common)
    if ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        name = text_of(payload.get("name")) or ("shell" if ptype == "local_shell_call" else "")
        if ptype == "function_call":
            args = json_text(payload.get("arguments"))
        elif ptype == "custom_tool_call":
            args = json_text(payload.get("input"))
        else:
            args = json_text(payload.get("action"))
        call_id = text_of(payload.get("call_id")) or text_of(payload.get("id"))
        block = NativeBlock("tool_use", tool_text(name, args), call_id, name, args)
        return NativeItem(index, line, K_TOOL_CALL, role="assistant", text=block.text, blocks=(block,),
                          tool_ids=(call_id,) if call_id else (), subtype=ptype, **common)
    if ptype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        out = payload.get("output")
        is_error = False
        exit_code: int | None = None
        if isinstance(out, dict):
            is_error = out.get("success") is False
            out = out.get("content", out)
        if isinstance(out, str):
            out, exit_code = codex_output(out)
            is_error = is_error or (exit_code is not None and exit_code != 0)
        text = strip_ansi(result_text(out))
        call_id = text_of(payload.get("call_id"))
        block = NativeBlock("tool_result", text, call_id, is_error=is_error, exit_code=exit_code)
        return NativeItem(index, line, K_TOOL_RESULT, role="tool", text=text, blocks=(block,),
                          tool_ids=(call_id,) if call_id else (), subtype=ptype, **common)
    if ptype == "web_search_call":
        action = dict_of(payload.get("action"))
        query = text_of(action.get("query")) or text_of(action.get("url")) or text_of(action.get("pattern"))
        what = text_of(action.get("type")) or "search"
        status = text_of(payload.get("status"))
        text = f"Web {what}" + (f": {query}" if query else "") + (f" · {status}" if status else "")
        return NativeItem(index, line, K_WEB_SEARCH, role="assistant", text=text, subtype=ptype,
                          flags=frozenset({"error"}) if status == "failed" else frozenset(), **common)
    return NativeItem(index, line, K_OTHER, text=f"{ptype or 'response item'}: {compact_fields(payload, ('type',))}",
                      subtype=ptype, flags=frozenset({"unknown_type"}), **common)


def _codex_item(index: int, p: ParsedLine, turn_id: str) -> NativeItem:
    obj = p.obj
    line = p.line.number
    common: dict[str, Any] = dict(raw=p.text, turn_id=turn_id)
    if not isinstance(obj, dict):
        return NativeItem(index, line, K_OTHER, text=preview(p.text), subtype=type(obj).__name__, **common)
    rtype = text_of(obj.get("type"))
    payload = obj.get("payload")
    common["timestamp"] = text_of(obj.get("timestamp"))
    if "payload" not in obj and rtype in ("message", "reasoning", "function_call", "function_call_output",
                                          "custom_tool_call", "custom_tool_call_output", "local_shell_call"):
        return _codex_response(index, line, obj, common)  # older rollouts: response items written bare
    if not rtype and "id" in obj and "instructions" in obj:
        return NativeItem(index, line, K_SESSION_META, text=f"Session {text_of(obj.get('id'))}", **common)
    if not isinstance(payload, dict):
        return NativeItem(index, line, K_OTHER, text=f"{rtype or 'record'}: {compact_fields(obj, ('type', 'timestamp'))}",
                          subtype=rtype, flags=frozenset({"unknown_type"}), **common)
    if rtype == "session_meta":
        parts = [f"Codex {text_of(payload.get('cli_version'))}".strip(), text_of(payload.get("originator")),
                 text_of(payload.get("cwd"))]
        return NativeItem(index, line, K_SESSION_META, text=" · ".join(x for x in parts if x), **common)
    if rtype == "turn_context":
        parts = [f"model {text_of(payload.get('model'))}" if payload.get("model") else "",
                 f"approval {text_of(payload.get('approval_policy'))}" if payload.get("approval_policy") else "",
                 text_of(payload.get("cwd"))]
        common["turn_id"] = text_of(payload.get("turn_id")) or turn_id
        return NativeItem(index, line, K_TURN_CONTEXT, text=" · ".join(x for x in parts if x), **common)
    if rtype == "response_item":
        return _codex_response(index, line, payload, common)
    if rtype == "compacted":
        history = payload.get("replacement_history")
        n = len(history) if isinstance(history, list) else 0
        return NativeItem(index, line, K_COMPACTED, text=text_of(payload.get("message")),
                          subtype=f"{n} replacement items", **common)
    if rtype == "event_msg":
        etype = text_of(payload.get("type"))
        if etype == "task_started":
            common["turn_id"] = text_of(payload.get("turn_id")) or turn_id
            return NativeItem(index, line, K_TURN_START, text="Turn started", subtype=etype, **common)
        if etype == "task_complete":
            common["turn_id"] = text_of(payload.get("turn_id")) or turn_id
            return NativeItem(index, line, K_TURN_END, text="Turn complete", subtype=etype, **common)
        if etype == "turn_aborted":
            common["turn_id"] = text_of(payload.get("turn_id")) or turn_id
            reason = text_of(payload.get("reason"))
            return NativeItem(index, line, K_TURN_ABORTED, text=f"Turn aborted: {reason}" if reason else "Turn aborted",
                              subtype=etype, **common)
        if etype == "token_count":
            info = dict_of(payload.get("info"))
            total = dict_of(info.get("total_token_usage"))
            tokens = int_of(total.get("total_tokens"))
            text = f"Tokens: {tokens:,}" if tokens is not None else "Rate limits"
            return NativeItem(index, line, K_TOKEN_COUNT, text=text, tokens=tokens, subtype=etype, **common)
        mirror = etype in ("user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content")
        text = text_of(payload.get("message")) or text_of(payload.get("text"))
        if not text:
            text = f"{etype or 'event'}: {compact_fields(payload, ('type',))}"
        if etype == "user_message":  # the prompt as typed: IDE context left out, injected text marked
            context, request = split_ide_request(text)
            if context:
                text = request
            elif context_label(text):
                return NativeItem(index, line, K_EVENT, text=strip_ansi(text), subtype=etype,
                                  flags=frozenset({"mirror", "context"}), **common)
        return NativeItem(index, line, K_EVENT, text=strip_ansi(text), subtype=etype,
                          flags=frozenset({"mirror"}) if mirror else frozenset(), **common)
    return NativeItem(index, line, K_OTHER, text=f"{rtype or 'record'}: {compact_fields(payload)}", subtype=rtype,
                      flags=frozenset({"unknown_type"}), **common)


def parse_codex(source: Iterable[bytes | str] | bytes, path: str = "") -> NativeTranscript:
    """Read the lines of one Codex rollout file."""
    items: list[NativeItem] = []
    turn_id = ""
    session_id = cwd = version = ""
    replacement_history: dict[int, tuple[NativeItem, ...]] = {}
    for p in (parse_line(line) for line in lines_of(source)):
        if p.error:
            item = replace(unreadable_item(len(items), p), turn_id=turn_id)
        else:
            item = _codex_item(len(items), p, turn_id)
            obj = p.obj
            if isinstance(obj, dict):
                payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else None
                if obj.get("type") == "session_meta" and payload and not session_id:
                    session_id = text_of(payload.get("id"))
                    cwd = text_of(payload.get("cwd"))
                    version = text_of(payload.get("cli_version"))
                elif item.kind == K_SESSION_META and not session_id:
                    session_id = text_of(obj.get("id"))
            if item.kind in (K_TURN_START, K_TURN_CONTEXT):
                turn_id = item.turn_id
            if item.kind == K_COMPACTED and isinstance(obj, dict) and isinstance(obj.get("payload"), dict):
                history = obj["payload"].get("replacement_history")
                replacement_history[item.index] = tuple(
                    _codex_response(k, item.line, entry, {"raw": json.dumps(entry, ensure_ascii=False)})
                    if isinstance(entry, dict)
                    else NativeItem(k, item.line, K_OTHER, text=preview(json_text(entry)))
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
        elif item.kind == K_TURN_ABORTED:  # Codex 0.4x recorded no task_started: the abort is the turn's only mark
            turns.append(Turn(item.turn_id, item.line, item.line, False, True, per_turn.get(item.turn_id, 0)
                              if item.turn_id else 0))
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
                                  rb.is_error, False, exit_code=rb.exit_code))
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
