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


def _reparented(raw: bytes, old: str, new: str, readable: bool) -> bytes:
    """``raw`` with its ``parentUuid`` changed from ``old`` to ``new`` (only that text where it is unique)."""
    needle = _dump({"parentUuid": old})[1:-1]
    if raw.count(needle) == 1:
        return raw.replace(needle, _dump({"parentUuid": new})[1:-1])
    if not readable:
        return raw  # an unreadable line is copied as it is
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(obj, dict):
        return raw
    obj["parentUuid"] = new
    return _dump(obj)


def _call_record(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def export_repaired_copy(path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> ExportResult:
    """Write a copy of a Claude Code or Codex transcript in which every interrupted call (a call with no
    result) is closed by a synthetic ``"interrupted"`` error result placed right after it.

    The original is only read. The copy is written through :func:`store.exports.write_file`: ``out_path`` must
    be a new file in an existing folder, not a symbolic link (live or dangling) and not the original; otherwise
    :class:`RepairCopyRefused` (a :class:`RepairRefused` and an :class:`~store.exports.ExportRefused`) says
    why in one sentence naming the real target, and nothing is written. Every other line is copied byte for
    byte; in a Claude Code copy the record that continued from the interrupted call is re-parented onto the
    synthetic result (only its ``parentUuid`` text changes), so the chain stays linear.
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
    by_line = {item.line: item for item in transcript.items}
    pending: dict[int, list[tuple[str, str]]] = {}  # call line -> [(call id, name)]
    for pair in transcript.interrupted:
        if pair.call_id:
            pending.setdefault(pair.call_line, []).append((pair.call_id, pair.name))
    raw_lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        raw_lines = raw_lines[:-1]
    out: list[bytes] = []
    closed: list[ClosedCall] = []
    reparent: dict[str, str] = {}  # old parent uuid -> synthetic uuid
    for number, raw in enumerate(raw_lines, start=1):
        item = by_line.get(number)
        if agent == AGENT_CLAUDE_CODE and reparent and item is not None and item.parent_uuid in reparent:
            raw = _reparented(raw, item.parent_uuid, reparent[item.parent_uuid], item.kind != K_UNREADABLE)
        out.append(raw)
        calls = pending.get(number, [])
        if not calls:
            continue
        call_obj = _call_record(raw)
        original = call_obj.get("uuid") if isinstance(call_obj.get("uuid"), str) else ""
        for call_id, name in calls:
            if agent == AGENT_CLAUDE_CODE:
                new_uuid = str(uuidlib.uuid4())
                synthetic = _claude_synthetic(call_obj, call_id, new_uuid)
                call_obj = {**call_obj, "uuid": new_uuid}  # a second call of the same record chains after the first
            else:
                kind = item.subtype if item is not None and item.kind == K_TOOL_CALL else "function_call"
                synthetic = _codex_synthetic(call_obj, call_id, kind)
            out.append(_dump(synthetic))
            closed.append(ClosedCall(call_id, name, number, len(out)))
        if agent == AGENT_CLAUDE_CODE and original:
            reparent[original] = str(call_obj["uuid"])
    body = b"\n".join(out) + (b"\n" if ends_with_newline or closed else b"")
    try:
        write_file(dst, body)
    except ExportRefused as exc:
        raise RepairCopyRefused(f"Refused: {exc}") from None
    return ExportResult(str(src), str(dst), agent, tuple(closed), len(raw_lines), len(out))
