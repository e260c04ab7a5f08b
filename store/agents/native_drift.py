"""Format drift: the record types and fields of captured records that the native readers do not know.

A capture feeds each new record to a :class:`DriftCounter`; what it did not recognise is counted by agent
version (``version`` of a Claude Code record, ``cli_version`` of a Codex ``session_meta``), so a new agent
release that writes a new record type or field is noticed the day it lands. Known here means read by
:mod:`store.agents.native_claude` / :mod:`store.agents.native_codex` for what it is (or a field those readers
knowingly pass over).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from store.agents.native_lines import UNREADABLE_RECORD
from store.agents.native_model import AGENT_CODEX

CLAUDE_TYPES = frozenset({
    "user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation", "last-prompt",
    UNREADABLE_RECORD,
})
CLAUDE_FIELDS = frozenset({
    # envelope
    "parentUuid", "logicalParentUuid", "isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch",
    "type", "subtype", "uuid", "timestamp", "slug", "agentId", "requestId", "isMeta", "level", "entrypoint",
    # messages and results
    "message", "toolUseResult", "isCompactSummary", "isVisibleInTranscriptOnly", "isApiErrorMessage",
    "thinkingMetadata", "todos", "sourceToolAssistantUUID", "sourceToolUseID", "toolUseID", "parentToolUseID",
    "imagePasteIds", "permissionMode", "error", "apiError", "isSnapshotUpdate", "mcpMeta",
    # system, summary, progress, snapshot, queue, last-prompt
    "content", "compactMetadata", "microcompactMetadata", "hookCount", "hookInfos", "hookErrors",
    "preventedContinuation", "stopReason", "hasOutput", "durationMs", "summary", "leafUuid", "data", "messageId",
    "snapshot", "operation", "lastPrompt", "cause", "retryInMs", "retryAttempt", "maxRetries",
    # the stand-in of an unreadable line
    "line", "reason", "bytes", "sha256", "text", "raw_b64",
})
CLAUDE_BLOCKS = frozenset({
    "text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "tool_result", "image", "document",
})
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted", UNREADABLE_RECORD})
CODEX_RESPONSE_TYPES = frozenset({
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "local_shell_call", "local_shell_call_output", "web_search_call",
})
CODEX_EVENT_TYPES = frozenset({
    "task_started", "task_complete", "turn_aborted", "token_count", "user_message", "agent_message",
    "agent_reasoning", "agent_reasoning_raw_content", "context_compacted",
})
_SHOWN_LIMIT = 5  # kinds of drift named per version in a report


@dataclass
class VersionDrift:
    records: int = 0
    types: Counter[str] = field(default_factory=Counter)  # "agent-setting", "event_msg/exec_command_end"
    fields: Counter[str] = field(default_factory=Counter)  # "user.newField"

    @property
    def empty(self) -> bool:
        return not self.types and not self.fields


@dataclass
class DriftCounter:
    """Counts, by agent version, the record types and fields of the records fed to it that are not known."""

    agent: str
    by_version: dict[str, VersionDrift] = field(default_factory=dict)
    version: str = ""  # the version of the file being fed (Codex: from its session_meta)
    _last_version: str = field(default="", repr=False, compare=False)
    _last: VersionDrift | None = field(default=None, repr=False, compare=False)

    def start_file(self) -> None:
        self.version = ""

    def feed(self, record: bytes) -> None:
        if len(record) > 1024 * 1024:  # a very long record is read for its type only by the readers as well
            return
        try:
            obj = json.loads(record)
        except (ValueError, RecursionError):
            return
        if not isinstance(obj, dict):
            return
        if self.agent == AGENT_CODEX:
            self._codex(obj)
        else:
            self._claude(obj)

    def feed_version(self, first_line: bytes) -> None:
        """Take the version of the file from its first record (a Codex ``session_meta``), counting nothing."""
        try:
            obj = json.loads(first_line)
        except (ValueError, RecursionError):
            return
        payload = obj.get("payload") if isinstance(obj, dict) else None
        if isinstance(payload, dict) and isinstance(payload.get("cli_version"), str):
            self.version = str(payload["cli_version"])

    def _at(self, version: str) -> VersionDrift:
        """The tally of ``version``, made when the version is first met (tallies are changed in place, never
        replaced, so the one of the last record's version can be kept at hand)."""
        key = version or "unknown version"
        found = self.by_version.get(key)
        if found is None:
            found = self.by_version[key] = VersionDrift()
        return found

    def _claude(self, obj: dict[str, object]) -> None:
        version = obj.get("version")
        if isinstance(version, str) and version:
            self.version = version  # records that name none (queue-operation, last-prompt) take the file's
        if self.version == self._last_version and self._last is not None:
            drift = self._last
        else:
            drift = self._last = self._at(self.version)
            self._last_version = self.version
        drift.records += 1
        rtype = obj.get("type")
        name = rtype if isinstance(rtype, str) else "(no type)"
        if name not in CLAUDE_TYPES:
            drift.types[name] += 1
            return
        if not CLAUDE_FIELDS.issuperset(obj):  # (one set operation for the usual record)
            for key in obj:
                if key not in CLAUDE_FIELDS:
                    drift.fields[f"{name}.{key}"] += 1
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                btype = block.get("type") if isinstance(block, dict) else None
                if isinstance(btype, str) and btype not in CLAUDE_BLOCKS:
                    drift.types[f"{name} block {btype}"] += 1

    def _codex(self, obj: dict[str, object]) -> None:
        rtype = obj.get("type")
        payload = obj.get("payload")
        if rtype == "session_meta" and isinstance(payload, dict) and isinstance(payload.get("cli_version"), str):
            self.version = str(payload["cli_version"])
        drift = self._at(self.version)
        drift.records += 1
        name = rtype if isinstance(rtype, str) else "(no type)"
        if "payload" not in obj and name in CODEX_RESPONSE_TYPES:
            return  # older rollouts: response items written bare
        if name not in CODEX_TYPES:
            drift.types[name] += 1
            return
        if not isinstance(payload, dict):
            return
        raw_type = payload.get("type")
        ptype = raw_type if isinstance(raw_type, str) else "?"  # a list or an object is no type (and unhashable)
        if name == "response_item" and ptype not in CODEX_RESPONSE_TYPES:
            drift.types[f"response_item/{ptype}"] += 1
        elif name == "event_msg" and ptype not in CODEX_EVENT_TYPES:
            drift.types[f"event_msg/{ptype}"] += 1

    def report(self) -> list[str]:
        """One line per agent version with drift: ``2.1.152 (40 records): types agent-setting ×1; fields
        user.newField ×3``; [] when every record was recognised."""
        lines: list[str] = []
        for version in sorted(self.by_version):
            d = self.by_version[version]
            if d.empty:
                continue
            parts = []
            if d.types:
                parts.append("types " + _named(d.types))
            if d.fields:
                parts.append("fields " + _named(d.fields))
            lines.append(f"{version} ({d.records:,} records): " + "; ".join(parts))
        return lines

    def merge(self, other: DriftCounter) -> None:
        for version, d in other.by_version.items():
            mine = self._at(version if version != "unknown version" else "")
            mine.records += d.records
            mine.types.update(d.types)
            mine.fields.update(d.fields)


def _named(counts: Counter[str]) -> str:
    shown = ", ".join(f"{name} ×{n:,}" for name, n in counts.most_common(_SHOWN_LIMIT))
    more = len(counts) - _SHOWN_LIMIT
    return shown + (f" and {more} more" if more > 0 else "")


__all__ = ["CLAUDE_BLOCKS", "CLAUDE_FIELDS", "CLAUDE_TYPES", "CODEX_EVENT_TYPES", "CODEX_RESPONSE_TYPES", "CODEX_TYPES",
           "DriftCounter", "VersionDrift"]
