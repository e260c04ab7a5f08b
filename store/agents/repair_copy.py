"""Repaired copies of a Claude Code or Codex transcript: every interrupted call closed by a synthetic result.

The copy is written through :func:`store.exports.write_file`: never through a symbolic link, never over an
existing file, never over the original.
"""

from __future__ import annotations

import json
import os
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
    detect_agent,
    parse_claude_code,
    parse_codex,
)
from store.errors import (
    RepairRefused,
    StoreError,
)

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


def _dump(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def export_repaired_copy(path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> ExportResult:
    """Write a copy of a Claude Code or Codex transcript in which every interrupted call (a call with no
    result) is closed by a synthetic ``"interrupted"`` error result placed right after it.

    The original is only read. ``out_path`` must not exist (:class:`RepairRefused` otherwise). Every other line
    is copied byte for byte; in a Claude Code copy the record that continued from the interrupted call is
    re-parented onto the synthetic result (only its ``parentUuid`` text changes), so the chain stays linear.
    """
    src = Path(path)
    dst = Path(out_path)
    if dst.exists() or dst.is_symlink():
        raise RepairRefused(f"Refused: {dst} already exists; the repaired copy must be a new file.")
    try:
        same = dst.absolute() == src.absolute()
    except OSError:
        same = False
    if same:
        raise RepairRefused("Refused: the repaired copy cannot replace the original transcript.")
    data = src.read_bytes()
    agent = detect_agent(data)
    if agent not in (AGENT_CLAUDE_CODE, AGENT_CODEX):
        raise RepairRefused(f"Refused: {src.name} is neither a Claude Code nor a Codex transcript.")
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
            old = item.parent_uuid
            new = reparent[old]
            needle = f'"parentUuid":"{old}"'.encode()
            if raw.count(needle) == 1:
                raw = raw.replace(needle, f'"parentUuid":"{new}"'.encode())
            else:
                obj = json.loads(raw)
                obj["parentUuid"] = new
                raw = _dump(obj)
        out.append(raw)
        calls = pending.get(number, [])
        if not calls:
            continue
        call_obj = json.loads(raw)
        original = str(call_obj.get("uuid") or "")
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
        with dst.open("xb") as fh:
            fh.write(body)
    except FileExistsError as exc:
        raise RepairRefused(f"Refused: {dst} already exists; the repaired copy must be a new file.") from exc
    except OSError as exc:
        raise StoreError(f"The repaired copy could not be written to {dst} ({exc.strerror or exc}).") from exc
    return ExportResult(str(src), str(dst), agent, tuple(closed), len(raw_lines), len(out))
