"""Entry JSON and entry rows: messages and their blocks parsed for display, rows as read (reference 7.1/7.2).

* :class:`Message` (with :class:`Block` / :class:`ToolCall`) is one provider message, parsed from any shape
  without raising (odd values become descriptive blocks).
* :class:`EntryRow` is one ``entries`` row with its JSON parsed by :func:`parse_entry_data` (strict RFC 8259,
  lossless for huge numbers: :mod:`store.mothx.jsonvalue`). A row whose JSON does not parse, or whose ``seq``
  is not an integer, carries ``parse_error`` (a damaged row: shown, counted, never replayed).
* :func:`describe_row` says in one line what a row holds; its text is safe (``store.safetext.one_line``).

Message and block texts (``Message.text``, ``Block.text``, tool names, ids) are **raw data**: the UI and the
exports apply the safe-text boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from store.mothx import cells
from store.mothx.jsonvalue import BigNumber, JsonObject, dumps_compact, is_json_str, json_str, parse_object
from store.safetext import one_line

__all__ = [
    "NOT_LOADED_TYPES", "ENTRY_TYPES", "REPLAY_TYPES", "END_SEQ", "JsonObject", "ToolCall", "Block", "Message", "EntryRow", "parse_entry_data", "make_row", "row_from_cells",
    "describe_row",
]

NOT_LOADED_TYPES = frozenset({"label", "custom", "custom_message"})
ENTRY_TYPES: tuple[str, ...] = (
    "session", "message", "model_change", "mode_change", "thinking_level_change", "additional_directories",
    "compaction", "content_override", "branch_summary", "custom", "custom_message", "label", "session_info",
    "turn_start", "turn_end",
)
REPLAY_TYPES = frozenset({"message", "compaction", "content_override"})
END_SEQ = 2**63 - 1
"""Pass as ``before_seq`` to get the newest page."""

INT_LIMIT = 2**63
"""Integers a display computes with (sizes, token counts): Go's int64; larger ones are not shown as numbers."""

# ----------------------------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class ToolCall:
    """A ``toolCall`` content block."""

    id: str
    name: str
    kind: str
    arguments: str  # JSON text as stored ("" when none)


@dataclass(frozen=True)
class Block:
    """One content block, normalised for display."""

    type: str  # "text" | "thinking" | "image" | "file" | "toolCall" | other (kept as-is)
    text: str  # text / thinking text, or a one-line description for image/file/unknown
    tool_call: ToolCall | None = None


@dataclass(frozen=True)
class Message:
    """One provider message (see the message format reference). Build it with :meth:`from_json`."""

    role: str
    text: str  # `content` string + `text` blocks, "\n" between parts
    blocks: tuple[Block, ...]
    tool_call_id: str = ""
    tool_name: str = ""
    is_error: bool = False
    system_injected: bool = False
    usage_total: int | None = None
    raw: JsonObject | None = field(default=None, hash=False)  # the message JSON as parsed
    tool_kind: str = ""

    @property
    def thinking(self) -> str:
        return "\n".join(b.text for b in self.blocks if b.type == "thinking" and b.text)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b.tool_call for b in self.blocks if b.tool_call is not None)

    @classmethod
    def from_json(cls, obj: object) -> Message:
        """Parse a message object. Never raises: odd shapes become descriptive blocks."""
        if not isinstance(obj, dict):
            blocks = () if obj is None else (Block("unknown", f"unreadable message ({_kind(obj)})"),)
            return cls(role="", text="", blocks=blocks)
        blocks_l: list[Block] = []
        for key in ("content", "contents"):
            value = obj.get(key)
            if value is None:
                continue
            if is_json_str(value):
                if value:
                    blocks_l.append(Block("text", value))
            elif isinstance(value, list):
                blocks_l.extend(_block(b) for b in value)
            else:
                blocks_l.append(Block("unknown", f"`{key}` holds {_kind(value)}"))
        text = "\n".join(b.text for b in blocks_l if b.type == "text" and b.text)
        return cls(
            role=_str(obj.get("role")),
            text=text,
            blocks=tuple(blocks_l),
            tool_call_id=_str(obj.get("toolCallId")),
            tool_name=_str(obj.get("toolName")),
            is_error=obj.get("isError") is True,
            system_injected=obj.get("systemInjected") is True,
            usage_total=_usage_total(obj.get("usage")),
            raw=obj,
            tool_kind=_str(obj.get("toolKind")),
        )


_str = json_str


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -INT_LIMIT < value < INT_LIMIT else None
    if isinstance(value, float) and value.is_integer() and abs(value) < INT_LIMIT:
        return int(value)
    return None


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, BigNumber):
        return "a number"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return dumps_compact(value)


def _size(n: int | None) -> str:
    if n is None:
        return ""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _usage_total(usage: object) -> int | None:
    """``totalTokens``; else the sum of input, output, cacheRead and cacheWrite; None without usage."""
    if not isinstance(usage, dict):
        return None
    total = _int(usage.get("totalTokens"))
    if total is not None:
        return total
    parts = [_int(usage.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite")]
    present = [p for p in parts if p is not None]
    return sum(present) if present else None


def _describe_image(img: JsonObject) -> str:
    bits = [_str(img.get("mimeType")) or "image"]
    w, h = _int(img.get("width")), _int(img.get("height"))
    if w and h:
        bits.append(f"{w}×{h}")
    n = _int(img.get("bytes"))
    if n is None and is_json_str(img.get("data")):
        n = len(img["data"]) * 3 // 4
    if n is not None:
        bits.append(_size(n))
    return "image " + " ".join(bits)


def _describe_file(f: JsonObject) -> str:
    name = _str(f.get("filename")) or _str(f.get("title")) or _str(f.get("url")) or _str(f.get("id")) or "(unnamed)"
    extra = [x for x in (_str(f.get("mimeType")), _size(_int(f.get("size")))) if x]
    return f"file {name}" + (f" ({', '.join(extra)})" if extra else "")


def _block(b: object) -> Block:
    if not isinstance(b, dict):
        return Block("unknown", f"unreadable block ({_kind(b)})")
    btype = b.get("type")
    t = btype if is_json_str(btype) and btype else "unknown"
    if t == "text":
        return Block("text", _str(b.get("text")))
    if t == "thinking":
        return Block("thinking", _str(b.get("thinking")))
    if t in ("image", "file"):
        inner = b.get(t)
        body = inner if isinstance(inner, dict) else b
        return Block(t, _describe_image(body) if t == "image" else _describe_file(body))
    if t == "toolCall":
        inner = b.get("toolCall")
        tc = inner if isinstance(inner, dict) else b
        args: object = None
        for key in ("arguments", "invalidArguments", "input"):
            if tc.get(key) is not None:
                args = tc.get(key)
                break
        call = ToolCall(
            id=_str(tc.get("id")), name=_str(tc.get("name")), kind=_str(tc.get("kind")),
            arguments="" if args is None else _json_text(args),
        )
        return Block("toolCall", call.name or "(unnamed tool)", call)
    keys = ", ".join(sorted(k for k in b if k != "type"))[:80]
    return Block(t, f"{t} block" + (f" ({keys})" if keys else ""))


# ----------------------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class EntryRow:
    """One row of ``entries``, raw."""

    seq: int
    id: str
    type: str
    parent_id: str | None
    timestamp: str
    data: str
    parsed: JsonObject | None = field(hash=False)
    parse_error: str | None

    @property
    def entry_id(self) -> str:
        """The entry's identity: the JSON ``id`` when it is a string, else the ``id`` column."""
        if self.parsed is not None and is_json_str(self.parsed.get("id")):
            return self.parsed["id"]
        return self.id

    @property
    def entry_type(self) -> str:
        """The entry's type: the JSON ``type`` when it is a string, else the ``type`` column."""
        if self.parsed is not None and is_json_str(self.parsed.get("type")):
            return self.parsed["type"]
        return self.type


def parse_entry_data(data: str | bytes | None) -> tuple[JsonObject | None, str | None]:
    """``(object, None)`` when ``data`` is a JSON object, else ``(None, one-line reason)``.

    Integers past Python's int-string limit and numbers past a float's range are kept as
    :class:`~store.mothx.jsonvalue.BigNumber` text, so such an entry still parses.
    """
    return parse_object(data)


def make_row(seq: int, id: str | None, type: str | None, parent_id: str | None, timestamp: str | None,
             data: str | None) -> EntryRow:
    """An :class:`EntryRow` with its JSON parsed."""
    parsed, error = parse_entry_data(data)
    return EntryRow(seq=seq, id=id or "", type=type or "", parent_id=parent_id, timestamp=timestamp or "",
                    data=data or "", parsed=parsed, parse_error=error)


def row_from_cells(seq: object, id: object, type: object, parent_id: object, timestamp: object,
                   data: object) -> EntryRow:
    """An :class:`EntryRow` from the cells of an ``entries`` row as SQLite returned them (any types).

    A ``seq`` that is not an integer makes the row damaged (its order is unknown): ``parsed`` None, seq 0,
    and ``parse_error`` naming the cell. Text cells are decoded as :func:`store.mothx.cells.as_text` does.
    """
    text = cells.as_text(data) if data is not None else None
    if not isinstance(seq, int) or isinstance(seq, bool):
        return EntryRow(seq=0, id=cells.as_text(id), type=cells.as_text(type),
                        parent_id=None if parent_id is None else cells.as_text(parent_id),
                        timestamp=cells.as_text(timestamp), data=text or "", parsed=None,
                        parse_error=f"seq is {cells.kind(seq)}, not an integer")
    return make_row(seq, cells.as_text(id), cells.as_text(type), None if parent_id is None else cells.as_text(parent_id),
                    cells.as_text(timestamp), text)


def describe_row(row: EntryRow) -> str:
    """One line saying what a row holds, for the raw view (safe text: ``store.safetext.one_line``)."""
    if row.parsed is None:
        return _one_line(f"corrupt row: {row.parse_error}")
    p, t = row.parsed, row.entry_type

    def s(key: str) -> str:
        return _json_text(p.get(key)) if p.get(key) is not None else ""

    if t == "message":
        m = Message.from_json(p.get("message"))
        what = m.text or m.thinking or ", ".join(f"call {c.name}" for c in m.tool_calls) or "(no text)"
        return _one_line(f"{m.role or '?'}: {_one_line(what)}", 200)
    simple = {
        "session": lambda: f"session header cwd={s('cwd')} channel={s('channelType')}",
        "model_change": lambda: f"model {s('provider')}/{s('modelId')}",
        "mode_change": lambda: f"mode {s('mode')}",
        "thinking_level_change": lambda: f"thinking level {s('thinkingLevel')}",
        "additional_directories": lambda: f"directories {s('directories')}",
        "compaction": lambda: f"compaction v{s('summaryVersion') or '?'} first kept {s('firstKeptEntryId') or '(none)'}",
        "content_override": lambda: f"override of {s('targetEntryId')}" + (f": {s('reason')}" if s("reason") else ""),
        "branch_summary": lambda: f"branch summary from {s('fromId')}",
        "label": lambda: f"label {s('targetId')} = {s('label') or '(cleared)'}",
        "session_info": lambda: f"title {s('name')!r} ({s('source')})",
        "turn_start": lambda: f"turn {s('turnId')} starts",
        "turn_end": lambda: f"turn {s('turnId')} ends {s('status')}".rstrip(),
    }
    if t in simple:
        return _one_line(simple[t]())
    return _one_line(f"{t or '(no type)'} entry ({', '.join(sorted(p))[:80]})")


def _one_line(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    flat = flat if len(flat) <= width else flat[: width - 1] + "…"
    return one_line(flat)
