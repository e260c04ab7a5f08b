"""Lines of a native transcript file, decoded one by one, and the defensive readers of record fields.

Every non-blank line becomes one :class:`ParsedLine`: the decoded JSON value, or the reason it is unreadable
(cut off, glued ``}{``, not UTF-8, not JSON, numbers too long to read). The field helpers read a value of the
expected type or give an empty one, so a record with wrong types never raises.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from store.agents.native_model import K_UNREADABLE, PREVIEW_CHARS, UNREADABLE_RECORD, NativeItem
from store.safetext import one_line

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
SALVAGE_UUID = re.compile(r'"uuid"\s*:\s*"([^"\\]{1,200})"')
_SALVAGE_PARENT = re.compile(r'"parentUuid"\s*:\s*"([^"\\]{1,200})"')
COMMAND_PREFIXES = ("<command-name>", "<command-message>", "<local-command-", "<bash-input>", "<bash-stdout>",
                     "<bash-stderr>")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI CSI and OSC sequences (what a terminal tool printed into a transcript)."""
    return _ANSI.sub("", text)


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` as one safe line (:func:`store.safetext.one_line`), cut to ``limit`` characters with an ellipsis:
    branch previews and the text of records read only for a title."""
    one = one_line(text)
    return one if len(one) <= limit else one[: limit - 1] + "…"


# ------------------------------------------------------------------------------------------- line reading


@dataclass
class Line:
    number: int
    raw: bytes
    complete: bool  # ended with "\n"


def split_lines(data: bytes) -> list[Line]:
    """The non-blank lines of ``data`` with their line numbers and whether each ended with a newline."""
    out: list[Line] = []
    parts = data.split(b"\n")
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if i == last and not part:
            break
        if not part.strip(b" \t\r\n"):
            continue
        out.append(Line(i + 1, part, i != last))
    return out


def lines_of(source: Iterable[bytes | str] | bytes) -> list[Line]:
    """The lines of a file's bytes, or of an iterable of lines (bytes or text, with or without newlines)."""
    if isinstance(source, bytes):
        return split_lines(source)
    chunks = [s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s for s in source]
    chunks = [c[:-1] if c.endswith(b"\n") else c for c in chunks]
    return split_lines(b"\n".join(chunks) + b"\n") if chunks else []


MAX_RECORD_BYTES = 8 * 1024 * 1024  # a longer line is not read as a record (the checkpoint limit)
UNREADABLE_PREVIEW_CHARS = 4096  # of an unreadable line's text, kept in its stand-in record
UNREADABLE_RAW_BYTES = 4 * 1024 * 1024  # an unreadable line up to this size is kept whole (base64) as well


def unreadable_record(line: int, reason: str, raw: bytes, size: int | None = None, sha256: str = "") -> bytes:
    """The compact JSON record a checkpoint stores in place of an unreadable line (:data:`UNREADABLE_RECORD`).

    ``raw`` is the line (for an oversized line: only its first bytes, with ``size`` and ``sha256`` of the
    whole line). The record is a function of the line alone, so capture and verify build the same one."""
    whole = size is None or size == len(raw)
    record: dict[str, object] = {
        "type": UNREADABLE_RECORD,
        "line": line,
        "reason": reason,
        "bytes": len(raw) if size is None else size,
        "sha256": sha256 or hashlib.sha256(raw).hexdigest(),
        "text": raw[: UNREADABLE_PREVIEW_CHARS * 4].decode("utf-8", "replace")[:UNREADABLE_PREVIEW_CHARS],
    }
    if whole and len(raw) <= UNREADABLE_RAW_BYTES:
        record["raw_b64"] = base64.b64encode(raw).decode("ascii")
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def is_unreadable_record(obj: object) -> bool:
    """True for the stand-in record of an unreadable line (see :func:`unreadable_record`)."""
    return isinstance(obj, dict) and obj.get("type") == UNREADABLE_RECORD and isinstance(obj.get("reason"), str)


def unreadable_raw(obj: dict[str, Any]) -> bytes | None:
    """The original bytes kept in a stand-in record, or None when only a preview was kept."""
    raw = obj.get("raw_b64")
    if not isinstance(raw, str):
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError:
        return None


@dataclass
class ParsedLine:
    line: Line
    obj: Any  # the decoded JSON value (None when unreadable)
    text: str  # the line decoded (replacement characters where not UTF-8)
    error: str


def parse_line(line: Line) -> ParsedLine:
    """One line decoded: its JSON value, or the reason it cannot be read as a record (not UTF-8, not JSON, or
    JSON that is not an object); never an exception."""
    raw = line.raw.strip(b" \t\r\n")
    if len(raw) > MAX_RECORD_BYTES:
        head = raw[:UNREADABLE_PREVIEW_CHARS].decode("utf-8", "replace")
        return ParsedLine(line, None, head, f"the line is longer than {MAX_RECORD_BYTES} bytes ({len(raw)} bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ParsedLine(line, None, raw.decode("utf-8", "replace"), "the line is not valid UTF-8")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        error = _json_error(text, exc, line.complete)
        return ParsedLine(line, None, text, error)
    if is_unreadable_record(obj):  # read back from a checkpoint: the line it stands for was unreadable
        return ParsedLine(line, None, text_of(obj.get("text")), text_of(obj.get("reason")) or "not valid JSON")
    if not isinstance(obj, dict):
        return ParsedLine(line, obj, text, f"the line is JSON but not a record: {_json_kind(obj)} where an object belongs")
    return ParsedLine(line, obj, text, "")


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return f"{json.dumps(value)}"
    return "a number"


def _json_error(text: str, exc: Exception, complete: bool) -> str:
    if isinstance(exc, json.JSONDecodeError) and exc.msg == "Extra data":
        return f"two or more records are glued together on this line (the first ends at column {exc.pos})"
    if not complete:
        return "the line is cut off (the file ends in the middle of a record)"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at column {exc.pos + 1}"
    if isinstance(exc, RecursionError):
        return "not readable JSON: the record is nested too deeply"
    if "digits" in str(exc):
        return "not readable JSON: a number has more digits than can be read"
    return "not valid JSON"


def unreadable_item(index: int, p: ParsedLine) -> NativeItem:
    """The ``unreadable`` item of a line, with its reason and any uuid and parent uuid it still names."""
    flags = {"cut_off"} if not p.line.complete else set()
    if "glued" in p.error:
        flags.add("glued")
    uuids = SALVAGE_UUID.findall(p.text)
    parents = _SALVAGE_PARENT.findall(p.text)
    return NativeItem(
        index=index,
        line=p.line.number,
        kind=K_UNREADABLE,
        text=f"Line {p.line.number} is unreadable: {p.error}.",
        uuid=uuids[0] if uuids else "",
        parent_uuid=parents[0] if parents else "",
        flags=frozenset(flags),
        error=p.error,
        raw=p.text,
    )


def text_of(value: object) -> str:
    """``value`` when it is a string, else "" (a record field of the wrong type reads as absent)."""
    return value if isinstance(value, str) else ""


def dict_of(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a record field of the wrong type reads as absent)."""
    return value if isinstance(value, dict) else {}


def list_of(value: object) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def int_of(value: object) -> int | None:
    """``value`` when it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_text(value: object) -> str:
    """``value`` as text: a string as it is, anything else as JSON, None as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def result_text(content: object) -> str:
    """The text of a tool result's content (a string, or blocks of text, images and others)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(text_of(block.get("text")))
                elif block.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(f"[{text_of(block.get('type')) or 'block'}]")
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return json_text(content)


_EXIT_LINE = re.compile(r"\A(?:Error: )?Exit code:? (-?\d{1,9})\b|^Process exited with code (-?\d{1,9})\b", re.M)


def exit_code_in(text: str) -> int | None:
    """The exit code a tool result's text states: ``Exit code: 1`` / ``Exit code 1`` / ``Error: Exit code 1``
    on its first line (Codex shell output, Claude Code Bash errors) or a ``Process exited with code 1`` line
    (Codex exec_command); None when it states none."""
    m = _EXIT_LINE.search(text[:4096])
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def codex_output(output: str) -> tuple[str, int | None]:
    """A Codex tool output as (text, exit code): Codex 0.4x wrote a JSON string ``{"output": "…", "metadata":
    {"exit_code": 1, "duration_seconds": 0.1}}``; later versions write text that may state the exit code."""
    stripped = output.lstrip()
    if stripped.startswith("{") and '"output"' in stripped:
        try:
            obj = json.loads(output)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            meta = dict_of(obj.get("metadata"))
            return obj["output"], int_of(meta.get("exit_code"))
    return output, exit_code_in(output)


def tool_text(name: str, arguments: str) -> str:
    """``name(arguments…)``: a tool call on one line."""
    return f"{name}({preview(arguments, 200)})" if arguments else f"{name}()"
