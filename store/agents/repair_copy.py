"""Repaired copies of a Claude Code or Codex transcript: every interrupted call closed by a synthetic result.

The copy is written through :func:`store.exports.write_file`: never through a symbolic link, never over an
existing file, never over the original.
"""

from __future__ import annotations

import json
import os
import re
import uuid as uuidlib
from pathlib import Path
from typing import Any

from store.agents.capture_model import (
    ClosedCall,
    ExportResult,
)
from store.agents.native import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
    K_TOOL_CALL,
    K_UNREADABLE,
    detect_agent,
    parse_claude_code,
    parse_codex,
)
from store.errors import RepairRefused, StoreError
from store.exports import ExportRefused, check_target, default_name, write_file
from store.safetext import one_line

# ----------------------------------------------------------------------------------------- repaired copies

INTERRUPTED_TEXT = "interrupted"


def _claude_synthetic(call_obj: dict[str, Any], call_id: str, new_uuid: str) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "parentUuid": call_obj.get("uuid"),
        "isSidechain": call_obj.get("isSidechain", False),
        "userType": call_obj.get("userType", "external"),
    }
    for key in ("cwd", "sessionId", "version", "gitBranch", "agentId"):
        if key in call_obj:
            rec[key] = call_obj[key]
    rec.update(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": INTERRUPTED_TEXT, "is_error": True}
                ],
            },
            "uuid": new_uuid,
            "timestamp": call_obj.get("timestamp", ""),
            "toolUseResult": INTERRUPTED_TEXT,
        }
    )
    return rec


def _codex_synthetic(call_obj: dict[str, Any], call_id: str, kind: str) -> dict[str, Any]:
    out_type = "custom_tool_call_output" if kind == "custom_tool_call" else "function_call_output"
    payload = {"type": out_type, "call_id": call_id, "output": INTERRUPTED_TEXT}
    if "payload" not in call_obj:
        return payload
    return {"timestamp": call_obj.get("timestamp", ""), "type": "response_item", "payload": payload}


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dump(obj: object) -> bytes:
    """One compact JSONL record; a lone surrogate (which Claude Code wrote before 2.1.132) stays a ``\\udXXX``
    escape, so the record is the same data and encodes as UTF-8."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text).encode("utf-8")


class RepairCopyRefused(RepairRefused, ExportRefused):
    """The repaired copy may not be written where asked (an existing file, a link, the original itself)."""


def repaired_copy_name(transcript: str | os.PathLike[str], n: int = 0) -> str:
    """The default file name of a repaired copy of ``transcript``: ``<sanitized stem>.repaired.jsonl`` (with
    ``-<n>`` for ``n > 0``), one name that stays inside the folder it is joined to."""
    stem = Path(transcript).stem
    return default_name(stem, f".repaired-{n}.jsonl" if n > 0 else ".repaired.jsonl")


def _check_target(dst: Path) -> None:
    try:
        check_target(dst)
    except ExportRefused as exc:
        raise RepairCopyRefused(f"Refused: {exc}") from None


def _call_record(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _groups(transcript_items: list[Any], agent: str, objs: dict[int, dict[str, Any]]) -> dict[int, int]:
    """call line -> the last line of its parallel group: the run of consecutive records that make calls (Claude
    Code: of one assistant message, by ``message.id``), after which the agent writes the results."""
    anchor: dict[int, int] = {}
    run: list[int] = []
    run_message = ""

    def close() -> None:
        for line in run:
            anchor[line] = run[-1]

    for item in transcript_items:
        makes_call = any(b.kind == "tool_use" for b in item.blocks)
        message = ""
        if agent == AGENT_CLAUDE_CODE and makes_call:
            msg = objs.get(item.line, {}).get("message")
            message = str(msg["id"]) if isinstance(msg, dict) and isinstance(msg.get("id"), str) else ""
        if makes_call and run and (agent != AGENT_CLAUDE_CODE or not message or message == run_message):
            run.append(item.line)
            continue
        close()
        run, run_message = ([item.line], message) if makes_call else ([], "")
    close()
    return anchor


def export_repaired_copy(path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> ExportResult:
    """Write a copy of a Claude Code or Codex transcript in which every interrupted call (a call with no
    result) is closed by a synthetic ``"interrupted"`` error result.

    The synthetic results are placed after all the calls of their parallel group (the records of one assistant
    message that make calls, written one after another), as the agents lay out results; in a Claude Code copy
    they chain on from the group's last record. **No original line changes**: the copy minus the synthetic
    lines is the original byte for byte.

    The original is only read. The copy is written through :func:`store.exports.write_file`: ``out_path`` must
    be a new file in an existing folder, not a symbolic link (live or dangling) and not the original; otherwise
    :class:`RepairCopyRefused` (a :class:`RepairRefused` and an :class:`~store.exports.ExportRefused`) says
    why in one sentence naming the real target, and nothing is written.
    """
    src = Path(path)
    dst = Path(out_path)
    try:
        same = dst.absolute() == src.absolute() or (dst.exists() and os.path.samefile(dst, src))
    except OSError:
        same = False
    if same:
        raise RepairCopyRefused("Refused: the repaired copy cannot replace the original transcript.")
    _check_target(dst)
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise StoreError(f"{one_line(str(src))} cannot be read: {one_line(exc.strerror or exc)}.") from exc
    agent = detect_agent(data)
    if agent not in (AGENT_CLAUDE_CODE, AGENT_CODEX):
        raise RepairCopyRefused(f"Refused: {one_line(src.name)} is neither a Claude Code nor a Codex transcript.")
    transcript = parse_claude_code(data) if agent == AGENT_CLAUDE_CODE else parse_codex(data)
    items = list(transcript.items) + [i for t in transcript.inline_subagents for i in t.items]
    items.sort(key=lambda i: i.line)
    by_line = {item.line: item for item in items}
    raw_lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        raw_lines = raw_lines[:-1]
    objs = {i.line: _call_record(raw_lines[i.line - 1]) for i in items
            if i.kind != K_UNREADABLE and any(b.kind == "tool_use" for b in i.blocks) and i.line <= len(raw_lines)}
    anchor = _groups(items, agent, objs)
    interrupted = list(transcript.interrupted) + [p for t in transcript.inline_subagents for p in t.interrupted]
    pending: dict[int, list[tuple[str, str, int]]] = {}  # group's last line -> [(call id, name, call line)]
    for pair in sorted(interrupted, key=lambda p: p.call_line):
        if pair.call_id:
            pending.setdefault(anchor.get(pair.call_line, pair.call_line), []).append(
                (pair.call_id, pair.name, pair.call_line))
    out: list[bytes] = []
    closed: list[ClosedCall] = []
    for number, raw in enumerate(raw_lines, start=1):
        out.append(raw)
        calls = pending.get(number, [])
        if not calls:
            continue
        last = objs.get(number) or _call_record(raw)
        parent = last.get("uuid") if isinstance(last.get("uuid"), str) else None
        for call_id, name, call_line in calls:
            call_obj = objs.get(call_line, {})
            item = by_line.get(call_line)
            if agent == AGENT_CLAUDE_CODE:
                new_uuid = str(uuidlib.uuid4())
                synthetic = _claude_synthetic({**call_obj, "uuid": parent}, call_id, new_uuid)
                parent = new_uuid  # the next synthetic result chains on from this one
            else:
                kind = item.subtype if item is not None and item.kind == K_TOOL_CALL else "function_call"
                synthetic = _codex_synthetic(call_obj, call_id, kind)
            out.append(_dump(synthetic))
            closed.append(ClosedCall(call_id, name, call_line, len(out)))
    body = b"\n".join(out) + (b"\n" if ends_with_newline or closed else b"")
    try:
        write_file(dst, body)
    except ExportRefused as exc:
        raise RepairCopyRefused(f"Refused: {exc}") from None
    return ExportResult(str(src), str(dst), agent, tuple(closed), len(raw_lines), len(out))
