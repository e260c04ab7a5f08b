"""What search reads from an entry or a captured record: its searchable text (one definition, every path).

A mothx entry (``entries.data``, reference 7.1):

* ``message``: the message's text (``content`` string and ``text`` blocks), its thinking, the names and
  arguments of its tool calls, and for a tool result (``role`` ``toolResult``) its tool name and its text: what
  :meth:`store.mothx.entry_model.Message.from_json` parses, so search sees what the transcript shows;
* ``session_info``: the title (``name``); ``compaction`` and ``branch_summary``: the ``summary``;
* every other type (headers, turn markers, model changes, labels, ...) has no searchable text and no row.

A captured record (one JSONL line of a Claude Code or Codex transcript, ``agent_state_lines.content``): every
string value in it except those under keys that hold identifiers, hashes, timestamps, paths of the record
itself, signatures or encrypted blobs (:data:`SKIP_KEYS`), in document order. That covers both formats' prompt
and reply text, thinking, tool inputs and outputs without a parser per format.

The text is raw data (the UI shows it through the safe-text boundary). Entries whose JSON does not parse have
no text (the LIKE fallback still finds them by their raw bytes).
"""

from __future__ import annotations

import json
from typing import Any

from store.mothx.entry_model import Message
from store.mothx.jsonvalue import is_json_str, parse_object

MAX_TEXT_CHARS = 200_000
"""A text longer than this is cut (a huge tool output is searchable by its first 200,000 characters)."""

SKIP_KEYS = frozenset({
    "uuid", "parentUuid", "leafUuid", "logicalParentUuid", "sessionId", "session_id", "requestId", "id",
    "tool_use_id", "toolUseID", "call_id", "callId", "timestamp", "signature", "encrypted_content",
    "cwd", "version", "gitBranch", "userType", "type", "role", "model", "stop_reason", "isSidechain",
    "parentToolUseID", "messageId", "turn_id", "sourceToolAssistantUUID", "mimeType", "media_type", "data",
})
"""Keys of a captured record whose string values are not searchable text (ids, times, blobs, enums)."""


def entry_text(entry_type: str, data: object) -> tuple[str, str]:
    """``(text, role)`` of one ``entries`` row; text ``""`` when the entry has nothing to search."""
    if entry_type not in ("message", "session_info", "compaction", "branch_summary"):
        return "", ""
    obj = _loads(data)
    if obj is None:
        return "", ""
    kind = obj.get("type") if is_json_str(obj.get("type")) else entry_type
    if kind == "message":
        msg = Message.from_json(obj.get("message"))
        parts: list[str] = []
        if msg.tool_name:
            parts.append(msg.tool_name)
        for block in msg.blocks:
            if block.type in ("text", "thinking") and block.text:
                parts.append(block.text)
            elif block.tool_call is not None:
                parts.append(block.tool_call.name)
                if block.tool_call.arguments:
                    parts.append(block.tool_call.arguments)
        return _cut("\n".join(p for p in parts if p)), msg.role
    key = "name" if kind == "session_info" else "summary"
    value = obj.get(key)
    return (_cut(value), "") if is_json_str(value) else ("", "")


def record_text(content: object) -> str:
    """The searchable text of one captured record (a JSONL line), ``""`` when it has none or is no JSON."""
    if isinstance(content, bytes):
        content = content.decode("utf-8", "surrogateescape")
    if not isinstance(content, str):
        return ""
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return ""
    parts: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size < MAX_TEXT_CHARS:
        item = stack.pop()
        if isinstance(item, str):
            if item:
                parts.append(item)
                size += len(item)
        elif isinstance(item, dict):
            stack.extend(v for k, v in reversed(item.items()) if k not in SKIP_KEYS)
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return _cut("\n".join(parts))


def _loads(data: object) -> dict[str, Any] | None:
    """The entry's JSON object: the C decoder first (fast), the lossless one when it refuses (huge numbers)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "surrogateescape")
    if not isinstance(data, str):
        return None
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        obj, _ = parse_object(data)
    return obj if isinstance(obj, dict) else None


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS]
