"""Export of a native (Claude Code / Codex) transcript as Markdown or JSON: the records of one branch choice,
tool calls with their results, interrupted calls, compactions, summaries and unreadable lines, in file order.

:func:`native_markdown` and :func:`native_json` are pure functions of :mod:`store.agents.native` dataclasses.
Their text is safe to show and to write: Markdown passes :func:`store.safetext.safe` (newlines and tabs kept,
every control, bidi and surrogate character a visible escape; one-line fields such as ids, names and the work
dir through :func:`store.safetext.one_line`), JSON is :func:`store.safetext.json_dumps` (those characters as
``\\uXXXX`` escapes, the same data when parsed). A lone surrogate in a transcript is therefore exported as an
escape, never a failure and never an empty file. :func:`write_native_export` writes either one through
:func:`store.exports.write_file` (never through a link, never over a file unless asked), and
:func:`export_file_name` is the default file name (the sanitized session id).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from store.agents.native import (
    AGENT_CODEX,
    K_COMPACT_BOUNDARY,
    K_COMPACT_SUMMARY,
    K_COMPACTED,
    K_CONTEXT,
    K_EVENT,
    K_FILE_SNAPSHOT,
    K_HOOK,
    K_PROGRESS,
    K_QUEUE,
    K_SUMMARY,
    K_TOKEN_COUNT,
    K_TOOL_RESULT,
    K_TURN_CONTEXT,
    K_UNREADABLE,
    NativeItem,
    NativeSession,
    NativeTranscript,
    ToolPair,
)
from store.exports import default_name, write_file
from store.safetext import json_dumps, one_line, safe
from store.words import plural

ExportFormat = Literal["markdown", "json"]
EXTENSIONS: dict[str, str] = {"markdown": ".md", "json": ".json"}

QUIET = frozenset({K_PROGRESS, K_HOOK, K_FILE_SNAPSHOT, K_QUEUE, K_TOKEN_COUNT, K_TURN_CONTEXT, K_EVENT})


def _fence(text: str, lang: str = "") -> str:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _pretty(arguments: str) -> tuple[str, str]:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except (ValueError, RecursionError):
        return arguments, ""


def _pairs(t: NativeTranscript) -> dict[str, ToolPair]:
    out: dict[str, ToolPair] = {}
    for p in t.tool_pairs:
        out.setdefault(p.call_id, p)
    return out


def _hidden_result(item: NativeItem, pairs: Mapping[str, ToolPair], calls: set[str]) -> bool:
    return item.kind == K_TOOL_RESULT and bool(item.tool_ids) and all(c in pairs and c in calls for c in item.tool_ids)


def native_markdown(t: NativeTranscript, selection: Mapping[str, int] | None = None, *, title: str = "") -> str:
    """The shown branch of ``t`` as readable Markdown (quiet records such as progress lines left out)."""
    agent = "Codex" if t.agent == AGENT_CODEX else "Claude Code"
    shown = t.view(selection)
    pairs = _pairs(t)
    calls = {b.tool_id for it in shown for b in it.blocks if b.kind == "tool_use" and b.tool_id}
    out = [f"# {one_line(title or agent + ' session ' + (t.session_id or t.path))}", ""]
    facts = [f"{agent} `{one_line(t.session_id) or '?'}`", f"{len(shown):,} of {plural(t.records, 'record')} shown"]
    if t.cwd:
        facts.append(f"work dir `{one_line(t.cwd)}`")
    if t.forks:
        chosen = {f.parent_uuid: f.default for f in t.forks} | dict(selection or {})
        facts.append("branches " + ", ".join(f"{chosen.get(f.parent_uuid, f.default) + 1} of {len(f.branches)} "
                                             f"at line {f.parent_line}" for f in t.forks))
    if t.interrupted:
        facts.append(f"{len(t.interrupted)} interrupted call{'s' if len(t.interrupted) != 1 else ''}")
    if t.unreadable:
        facts.append(f"{len(t.unreadable)} unreadable line{'s' if len(t.unreadable) != 1 else ''}")
    out += [" · ".join(facts), ""]
    for item in shown:
        if item.kind in QUIET or _hidden_result(item, pairs, calls):
            continue
        stamp = f" · {one_line(item.timestamp)}" if item.timestamp else ""
        if item.kind == K_UNREADABLE:
            out += [f"## Unreadable line {item.line}", "", f"*{one_line(item.error)}*", "", _fence(item.raw[:2000]), ""]
            continue
        if item.kind in (K_COMPACT_BOUNDARY, K_COMPACTED):
            facts_c = [one_line(item.subtype)] if item.subtype else []
            if item.tokens is not None:
                facts_c.append(f"{item.tokens:,} tokens before")
            out += [f"## Compaction · line {item.line}{stamp}", "", f"*{' · '.join(facts_c) or 'compacted'}*", ""]
            if item.text:
                out += [item.text, ""]
            continue
        if item.kind == K_SUMMARY:
            dangling = " (its leafUuid is in no record here)" if "dangling_leaf" in item.flags else ""
            out += [f"## Summary · line {item.line}", "", f"{item.text}", "", f"*leaf `{one_line(item.leaf_uuid)}`{dangling}*", ""]
            continue
        role = "compact summary" if item.kind == K_COMPACT_SUMMARY else one_line(item.role or item.kind)
        if item.kind == K_CONTEXT:
            role = f"context ({one_line(item.subtype) or 'injected'})"
        out += [f"## {role} · line {item.line}{stamp}", ""]
        if item.parent_state == "unreadable":
            out += [f"*Its parent is the unreadable line {item.parent_line}.*", ""]
        if "incomplete_turn" in item.flags:
            out += ["*⚠ This turn never completed (no task_complete).*", ""]
        for b in item.blocks:
            if b.kind == "text" and b.text.strip():
                out += [b.text, ""]
            elif b.kind in ("thinking", "reasoning_summary") and b.text:
                out += ["\n".join("> " + line for line in b.text.splitlines()), ""]
            elif b.kind == "encrypted_reasoning":
                out += [f"*{b.text.strip('[]')}*", ""]
            elif b.kind == "tool_use":
                args, lang = _pretty(b.arguments)
                out += [f"**Tool call** `{one_line(b.tool_name) or '?'}`" + (f" (id `{one_line(b.tool_id)}`)" if b.tool_id else ""), ""]
                if args:
                    out += [_fence(args, lang), ""]
                pair = pairs.get(b.tool_id)
                if pair is None or pair.interrupted:
                    out += ["⚠ **interrupted**: no result was recorded.", ""]
                else:
                    out += [f"Result (line {pair.result_line})" + (" — error:" if pair.is_error else ":"), "",
                            _fence(pair.result_text), ""]
            elif b.kind == "tool_result":
                if b.tool_id not in calls:
                    out += [f"Result of `{one_line(b.tool_id) or '?'}`" + (" — error:" if b.is_error else ":"), "",
                            _fence(b.text), ""]
            elif b.kind == "context":
                n = len(b.text.splitlines()) or 1
                out += [f"*Context: {one_line(b.tool_name)} ({n} line{'' if n == 1 else 's'}, injected, not typed)*", ""]
            elif b.kind not in ("text", "thinking", "reasoning_summary"):
                out += [f"*{b.text}*", ""]
        if not item.blocks and item.text:
            out += [item.text, ""]
    return safe("\n".join(out).rstrip() + "\n", newlines=True, tabs=True)


def native_json(t: NativeTranscript, selection: Mapping[str, int] | None = None) -> str:
    """The shown branch of ``t`` as JSON: one object per record (every record, quiet ones included)."""
    pairs = _pairs(t)
    records: list[dict[str, object]] = []
    for item in t.view(selection):
        rec: dict[str, object] = {"line": item.line, "kind": item.kind, "role": item.role, "text": item.text,
                                  "timestamp": item.timestamp, "flags": sorted(item.flags)}
        if item.kind == K_UNREADABLE:
            rec["error"] = item.error
            rec["raw"] = item.raw
        calls = []
        for b in item.blocks:
            if b.kind == "tool_use":
                pair = pairs.get(b.tool_id)
                calls.append({"id": b.tool_id, "name": b.tool_name, "arguments": b.arguments,
                              "result_line": pair.result_line if pair else 0,
                              "interrupted": pair is None or pair.interrupted,
                              "is_error": bool(pair and pair.is_error)})
        if calls:
            rec["tool_calls"] = calls
        records.append(rec)
    doc = {"agent": t.agent, "session_id": t.session_id, "path": t.path, "cwd": t.cwd, "version": t.version,
           "records": records}
    return json_dumps(doc, indent=2) + "\n"


def session_messages(session: NativeSession) -> list[dict[str, object]]:
    """Every record of a session in file order, as ``show --format json`` gives them: the main transcript with
    its inline sidechains in their lines, then each sub-agent file. Each message has ``file``, ``line``,
    ``kind``, ``role``, ``text``, ``timestamp``, ``sidechain``, ``agent_id`` (the sub-agent, or null),
    ``is_error`` and ``exit_code`` (tool results; false / null otherwise), ``interrupted`` (calls), ``tool_calls``
    where the record makes calls, and ``reason`` for an unreadable line."""
    out: list[dict[str, object]] = []
    inline = {link.transcript.path + "\0" + str(link.transcript.items[0].line): link
              for link in session.subagents if link.layout == "inline" and link.transcript.items}
    if session.main is not None:
        rows: list[tuple[int, NativeItem, NativeTranscript, str]] = [(i.line, i, session.main, "") for i in session.main.items]
        for link in inline.values():
            rows.extend((i.line, i, link.transcript, link.agent_id) for i in link.transcript.items)
        rows.sort(key=lambda r: r[0])
        out.extend(_message(item, t, agent) for _, item, t, agent in rows)
    for link in session.subagents:
        if link.layout in ("inline", "absent"):
            continue
        out.extend(_message(item, link.transcript, link.agent_id) for item in link.transcript.items)
    return out


def _message(item: NativeItem, t: NativeTranscript, agent_id: str) -> dict[str, object]:
    pairs = _pairs(t)
    calls = []
    for b in item.blocks:
        if b.kind == "tool_use":
            pair = pairs.get(b.tool_id)
            calls.append({"id": b.tool_id, "name": b.tool_name, "arguments": b.arguments,
                          "result_line": pair.result_line if pair else 0,
                          "interrupted": pair is None or pair.interrupted,
                          "is_error": bool(pair and pair.is_error),
                          "exit_code": pair.exit_code if pair else None})
    results = [b for b in item.blocks if b.kind == "tool_result"]
    sidechain = bool(agent_id) or "sidechain" in item.flags
    msg: dict[str, object] = {
        "file": t.path, "line": item.line, "kind": item.kind, "role": item.role, "text": item.text,
        "timestamp": item.timestamp, "sidechain": sidechain,
        "agent_id": (agent_id or item.agent_id or t.agent_id or None) if sidechain else None,
        "is_error": any(b.is_error for b in results) or "error" in item.flags,
        "exit_code": next((b.exit_code for b in results if b.exit_code is not None), None),
        "interrupted": any(bool(c["interrupted"]) for c in calls),
        "flags": sorted(item.flags),
    }
    if item.subtype:
        msg["subtype"] = item.subtype
    if calls:
        msg["tool_calls"] = calls
    if item.kind == K_UNREADABLE:
        msg["reason"] = item.error
        msg["raw"] = item.raw
    return msg


def session_markdown(session: NativeSession, *, title: str = "") -> str:
    """A session as Markdown: the main transcript, then each sub-agent under a heading naming its Task call."""
    parts: list[str] = []
    if session.main is not None:
        parts.append(native_markdown(session.main, title=title))
    for link in session.subagents:
        where = f"Task call `{one_line(link.task_call_id)}` at line {link.task_line}" if link.task_call_id else \
            "no Task call names it"
        head = f"Sub-agent {one_line(link.agent_id) or '?'} ({one_line(link.layout)} layout; {where})"
        if link.layout == "absent":
            parts.append(f"# {head}\n\nsub-agent {one_line(link.agent_id)}: file not present\n")
            continue
        parts.append(native_markdown(link.transcript, title=head))
    return "\n".join(parts) if parts else safe("(no records)\n")


def export_file_name(t: NativeTranscript, fmt: ExportFormat = "markdown", agent_id: str = "") -> str:
    """The default file name of an export of ``t``: its session id (or file stem), with ``-<agent id>`` for a
    sub-agent, sanitized by :func:`store.exports.default_name` so it never leaves the folder it is joined to."""
    base = t.session_id or Path(t.path).stem
    return default_name(base + (f"-{agent_id}" if agent_id else ""), EXTENSIONS[fmt])


def native_export_text(t: NativeTranscript, fmt: ExportFormat, selection: Mapping[str, int] | None = None) -> str:
    """The export of ``t`` in ``fmt`` (``markdown`` or ``json``)."""
    return native_json(t, selection) if fmt == "json" else native_markdown(t, selection)


def write_native_export(t: NativeTranscript, path: str | os.PathLike[str], fmt: ExportFormat = "markdown",
                        selection: Mapping[str, int] | None = None, *, replace: bool = False) -> int:
    """Write the export of ``t`` to ``path`` through :func:`store.exports.write_file`; the number of bytes
    written. :class:`~store.exports.ExportRefused` (nothing written) for a link, a folder, or an existing
    file unless ``replace``."""
    return write_file(path, native_export_text(t, fmt, selection), replace=replace)


__all__ = ["EXTENSIONS", "ExportFormat", "export_file_name", "native_export_text", "native_json", "native_markdown",
           "session_markdown", "session_messages", "write_native_export"]
