"""Entries of one session and their replay (reference section 7), paged by ``seq``.

Three ways to read a session's entries:

* :func:`load_rows` / :func:`replay` read every row and run :func:`replay_state`, the pure, exact replay of
  reference 7.4/7.5 (the sequence-numbered variant). Export and the command line use them.
* :func:`replay_plan` + :func:`replay_page` let a screen open a 50,000-entry session by reading only what it
  shows: the plan reads the ``compaction`` and ``content_override`` rows (index ``(session_id, type)``), one
  row per compaction and index-only counts; a page reads ``limit`` message rows by keyset on ``seq``.
  Pages put together equal :func:`replay` exactly (the property tests check this). ``verify=True`` makes
  the plan's counts exact with one SQL pass over the session's data (for a background worker).
* :func:`rows_page` pages the raw rows of every type (the raw view), :func:`turn_markers` lists turns.

Decisions where the reference is silent (each is also what the tests' reference replay does):

* A row "parses" when its ``data`` is a JSON object by RFC 8259 (``NaN``/``Infinity`` are refused, as mothx's
  Go decoder refuses them). Other rows are skipped and counted as corrupt.
* An entry's identity and type come from its JSON ``id``/``type`` when they are strings, otherwise from the
  row's ``id``/``type`` columns.
* A ``content_override`` counts only when ``targetEntryId`` is a string and ``message`` a JSON object.
* ``firstKeptEntryId`` missing or ``null`` counts as ``""``; any other non-string value is never found, so
  such a compaction is skipped (the full history is kept rather than dropped on a malformed entry).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from store.errors import SchemaIncompatible, SessionNotFound

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

JsonObject = dict[str, Any]

NOT_LOADED_TYPES = frozenset({"label", "custom", "custom_message"})
ENTRY_TYPES: tuple[str, ...] = (
    "session", "message", "model_change", "mode_change", "thinking_level_change", "additional_directories",
    "compaction", "content_override", "branch_summary", "custom", "custom_message", "label", "session_info",
    "turn_start", "turn_end",
)
REPLAY_TYPES = frozenset({"message", "compaction", "content_override"})
END_SEQ = 2**63 - 1
"""Pass as ``before_seq`` to get the newest page."""

_BATCH_MIN = 64


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
            if isinstance(value, str):
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


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _kind(value: object) -> str:
    if value is None:
        return "null"
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
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


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
    if n is None and isinstance(img.get("data"), str):
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
    t = btype if isinstance(btype, str) and btype else "unknown"
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
        if self.parsed is not None and isinstance(self.parsed.get("id"), str):
            return self.parsed["id"]
        return self.id

    @property
    def entry_type(self) -> str:
        """The entry's type: the JSON ``type`` when it is a string, else the ``type`` column."""
        if self.parsed is not None and isinstance(self.parsed.get("type"), str):
            return self.parsed["type"]
        return self.type


class _RejectedConstant(ValueError):
    pass


def _reject_constant(name: str) -> object:
    raise _RejectedConstant(f"{name} is not JSON")


def parse_entry_data(data: str | None) -> tuple[JsonObject | None, str | None]:
    """``(object, None)`` when ``data`` is a JSON object, else ``(None, one-line reason)``."""
    if data is None:
        return None, "no data"
    try:
        obj = json.loads(data, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON at char {exc.pos}"
    except _RejectedConstant as exc:
        return None, f"invalid JSON: {exc}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    return obj, None


def make_row(seq: int, id: str | None, type: str | None, parent_id: str | None, timestamp: str | None,
             data: str | None) -> EntryRow:
    """An :class:`EntryRow` with its JSON parsed."""
    parsed, error = parse_entry_data(data)
    return EntryRow(seq=seq, id=id or "", type=type or "", parent_id=parent_id, timestamp=timestamp or "",
                    data=data or "", parsed=parsed, parse_error=error)


def describe_row(row: EntryRow) -> str:
    """One line saying what a row holds, for the raw view."""
    if row.parsed is None:
        return f"corrupt row: {row.parse_error}"
    p, t = row.parsed, row.entry_type

    def s(key: str) -> str:
        return _json_text(p.get(key)) if p.get(key) is not None else ""

    if t == "message":
        m = Message.from_json(p.get("message"))
        what = m.text or m.thinking or ", ".join(f"call {c.name}" for c in m.tool_calls) or "(no text)"
        return f"{m.role or '?'}: {_one_line(what)}"
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
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ----------------------------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class ReplayMessage:
    """One message of the sequence-numbered replay (reference 7.5)."""

    seq: int
    entry_id: str  # the compaction entry's id/seq for a summary
    kind: str  # "message" | "compaction_summary" ("content_override" inside ReplayPlan.overrides)
    message: Message
    overridden: bool = False
    original: Message | None = None
    override_reason: str = ""


@dataclass(frozen=True)
class CompactionInfo:
    seq: int
    entry_id: str
    summary: str
    first_kept_entry_id: str
    tokens_before: int | None
    summary_version: int | None
    applied: bool  # False when firstKeptEntryId was not found (skipped)
    summarized_count: int  # messages this compaction removed from the state (a previous summary included)


@dataclass(frozen=True)
class ReplayPlan:
    """Cheap facts that let a screen page through the replay without reading everything."""

    session_id: str
    window_start_seq: int  # replayed `message` rows have seq >= this (0 = from the start)
    summary: ReplayMessage | None
    compactions: tuple[CompactionInfo, ...]
    overrides: dict[str, ReplayMessage]  # target entry id -> the override (latest wins)
    message_rows: int  # `message` rows of the replay window (the summary not counted; see counts_verified)
    corrupt_rows: int  # rows whose JSON does not parse (whole session; see counts_verified)
    total_rows: int  # all entry rows of the session
    usage_cleared_before_seq: int = 0  # kept messages below this seq had their usage cleared by a compaction
    keyset: bool = True  # False: rows disagree with their JSON, so pages are cut from a full replay
    mismatched_rows: int = 0  # rows whose JSON id/type differ from the row's columns (verified plans)
    counts_verified: bool = True  # False: message_rows may include unparseable rows, corrupt_rows is a floor


@dataclass(frozen=True)
class ReplayDetails:
    """Everything one full replay finds (see :func:`replay_details`)."""

    messages: list[ReplayMessage]
    compactions: list[CompactionInfo]
    overrides: dict[str, ReplayMessage]
    corrupt_rows: int
    total_rows: int
    window_start_seq: int
    usage_cleared_before_seq: int
    summary: ReplayMessage | None
    leaf_id: str  # id of the last loaded entry ("" when none)
    title: str  # the newest session_info name ("" when none)


def _override_from(seq: int, entry_id: str, p: JsonObject) -> ReplayMessage | None:
    target, msg = p.get("targetEntryId"), p.get("message")
    if not isinstance(target, str) or not isinstance(msg, dict):
        return None
    reason = _str(p.get("reason")) or (_json_text(p.get("code")) if p.get("code") is not None else "")
    return ReplayMessage(seq=seq, entry_id=entry_id, kind="content_override", message=Message.from_json(msg),
                         override_reason=reason)


def _first_kept(p: JsonObject) -> str | None:
    """``""`` for missing/null/empty, the id when a string, None (never found) for other values."""
    value = p.get("firstKeptEntryId")
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def summary_message(seq: int, entry_id: str, summary: str) -> ReplayMessage:
    """The system-injected user message a compaction replays as."""
    raw = {"role": "user", "content": summary, "systemInjected": True}
    return ReplayMessage(seq=seq, entry_id=entry_id, kind="compaction_summary", message=Message.from_json(raw))


def _message_for(seq: int, entry_id: str, p: JsonObject, overrides: dict[str, ReplayMessage],
                 clear_before: int) -> ReplayMessage:
    original = Message.from_json(p.get("message"))
    ov = overrides.get(entry_id)
    if ov is None:
        rm = ReplayMessage(seq=seq, entry_id=entry_id, kind="message", message=original)
    else:
        rm = ReplayMessage(seq=seq, entry_id=entry_id, kind="message", message=ov.message, overridden=True,
                           original=original, override_reason=ov.override_reason)
    return _clear_usage(rm) if seq < clear_before else rm


def _clear_usage(rm: ReplayMessage) -> ReplayMessage:
    m = rm.message
    if m.usage_total is None and not (m.raw and "usage" in m.raw):
        return rm
    raw = {k: v for k, v in m.raw.items() if k != "usage"} if m.raw is not None else None
    return replace(rm, message=replace(m, usage_total=None, raw=raw))


def _compaction_info(row: EntryRow, applied: bool, removed: int) -> CompactionInfo:
    p = row.parsed or {}
    fk = p.get("firstKeptEntryId")
    return CompactionInfo(
        seq=row.seq, entry_id=row.entry_id, summary=_str(p.get("summary")),
        first_kept_entry_id=fk if isinstance(fk, str) else ("" if fk is None else _json_text(fk)),
        tokens_before=_int(p.get("tokensBefore")), summary_version=_int(p.get("summaryVersion")),
        applied=applied, summarized_count=removed,
    )


def replay_details(rows: Iterable[EntryRow]) -> ReplayDetails:
    """Reference 7.4/7.5 over ``rows`` (any order; sorted by seq here), with what the walk found.

    The walk keeps the *plain* state's entry-id list, in which a summary's id is ``""``, and looks
    ``firstKeptEntryId`` up there; the returned messages are the sequence-numbered variant (a summary carries
    its compaction's id and seq). Both variants therefore make the same decisions: a compaction naming an
    earlier compaction's id as ``firstKeptEntryId`` is not found, and is skipped.
    """
    ordered = sorted(rows, key=lambda r: r.seq)
    loaded: list[EntryRow] = []
    corrupt = 0
    title = ""
    for row in ordered:
        if row.parsed is None:
            corrupt += 1
        elif row.entry_type not in NOT_LOADED_TYPES:
            loaded.append(row)
    overrides: dict[str, ReplayMessage] = {}
    for row in loaded:
        if row.entry_type == "content_override":
            ov = _override_from(row.seq, row.entry_id, row.parsed or {})
            if ov is not None:
                overrides[_str((row.parsed or {}).get("targetEntryId"))] = ov
    state: list[ReplayMessage] = []
    ids: list[str] = []
    compactions: list[CompactionInfo] = []
    window_start = 0
    clear_before = 0
    summary: ReplayMessage | None = None
    for row in loaded:
        p = row.parsed or {}
        t = row.entry_type
        if t == "message":
            state.append(_message_for(row.seq, row.entry_id, p, overrides, 0))
            ids.append(row.entry_id)
        elif t == "compaction":
            fk = _first_kept(p)
            new_summary = summary_message(row.seq, row.entry_id, _str(p.get("summary")))
            if fk == "":
                compactions.append(_compaction_info(row, True, len(state)))
                state, ids = [new_summary], [""]
                window_start, summary = row.seq + 1, new_summary
                continue
            try:
                i = ids.index(fk) if fk is not None else -1
            except ValueError:
                i = -1
            if i < 0:
                compactions.append(_compaction_info(row, False, 0))
                continue
            compactions.append(_compaction_info(row, True, i))
            window_start = state[i].seq
            state = [new_summary] + [_clear_usage(m) for m in state[i:]]
            ids = [""] + ids[i:]
            clear_before, summary = row.seq, new_summary
        elif t == "session_info" and isinstance(p.get("name"), str):
            title = p["name"]
    return ReplayDetails(
        messages=state, compactions=compactions, overrides=overrides, corrupt_rows=corrupt,
        total_rows=len(ordered), window_start_seq=window_start, usage_cleared_before_seq=clear_before,
        summary=summary, leaf_id=loaded[-1].entry_id if loaded else "", title=title,
    )


def replay_state(rows: Iterable[EntryRow]) -> list[ReplayMessage]:
    """The sequence-numbered replay of reference 7.5 (pure; see :func:`replay_details`)."""
    return replay_details(rows).messages


# ----------------------------------------------------------------------------------------------- database

_COLS = ("seq, CAST(id AS BLOB), CAST(type AS BLOB), CAST(parent_id AS BLOB), CAST(timestamp AS BLOB), "
         "CAST(data AS BLOB)")
# One SQL pass classifies each row like parse_entry_data does: 0 = not a JSON object (a NUL byte included,
# since SQLite's JSON reader stops at one), 1 = an object, 2 = an object whose string id/type differ from the
# row's columns. Each JSON function runs once per row (SQLite caches the parse between them).
_ROW_STATUS = (
    "(CASE WHEN json_valid(CAST(data AS TEXT)) THEN"
    " CASE WHEN json_type(CAST(data AS TEXT)) <> 'object' OR instr(CAST(data AS BLOB), x'00') > 0 THEN 0"
    " WHEN (CASE WHEN json_type(CAST(data AS TEXT), '$.type') = 'text'"
    " THEN json_extract(CAST(data AS TEXT), '$.type') ELSE type END) IS NOT type"
    " OR (CASE WHEN json_type(CAST(data AS TEXT), '$.id') = 'text'"
    " THEN json_extract(CAST(data AS TEXT), '$.id') ELSE id END) IS NOT id THEN 2"
    " ELSE 1 END"
    " ELSE 0 END)"
)


def _verify_pass(conn: sqlite3.Connection, session_id: str, bounds: list[int]) -> tuple[int, int, int, list[int]]:
    """``(total rows, corrupt rows, mismatched rows, parseable message rows per bucket)`` in one scan; bucket
    ``i`` holds message rows with ``bounds[i-1] <= seq < bounds[i]`` (``bounds`` ascending)."""
    bucket = "CASE WHEN type <> 'message' THEN -1 " + "".join(
        f"WHEN seq < {int(b)} THEN {i} " for i, b in enumerate(bounds)) + f"ELSE {len(bounds)} END"
    total = corrupt = mismatched = 0
    per_bucket = [0] * (len(bounds) + 1)
    for status, b, n in conn.execute(
        f"SELECT status, bucket, COUNT(*) FROM (SELECT {_ROW_STATUS} AS status, {bucket} AS bucket "
        "FROM entries WHERE session_id = ?) GROUP BY status, bucket",
        (session_id,),
    ):
        total += n
        if status == 0:
            corrupt += n
        elif status == 2:
            mismatched += n
        if status != 0 and b >= 0:
            per_bucket[b] += n
    return total, corrupt, mismatched, per_bucket


def _txt(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _row(r: Sequence[object]) -> EntryRow:
    seq = r[0]
    return make_row(int(seq) if isinstance(seq, int) else 0, _txt(r[1]), _txt(r[2]), _txt(r[3]), _txt(r[4]),
                    _txt(r[5]))


def _require_entries(sd: SessionDir) -> None:
    if not sd.schema.has("entries"):
        raise SchemaIncompatible("This database has no entries table, so there are no transcripts to read.")


def load_rows(sd: SessionDir, session_id: str) -> list[EntryRow]:
    """Every row of the session (label/custom rows included), in seq order."""
    _require_entries(sd)
    with sd.db.read() as conn:
        cur = conn.execute(f"SELECT {_COLS} FROM entries WHERE session_id = ? ORDER BY seq", (session_id,))
        return [_row(r) for r in cur]


def replay(sd: SessionDir, session_id: str) -> list[ReplayMessage]:
    """The whole replay of one session (reads every row)."""
    return replay_state(load_rows(sd, session_id))


def _plan_from_details(session_id: str, d: ReplayDetails, *, keyset: bool, mismatched: int) -> ReplayPlan:
    return ReplayPlan(
        session_id=session_id, window_start_seq=d.window_start_seq, summary=d.summary,
        compactions=tuple(d.compactions), overrides=dict(d.overrides),
        message_rows=sum(1 for m in d.messages if m.kind == "message"), corrupt_rows=d.corrupt_rows,
        total_rows=d.total_rows, usage_cleared_before_seq=d.usage_cleared_before_seq, keyset=keyset,
        mismatched_rows=mismatched, counts_verified=True,
    )


def replay_plan(sd: SessionDir, session_id: str, *, verify: bool = False) -> ReplayPlan:
    """The facts :func:`replay_page` needs, read without loading the session's messages.

    Reads the ``compaction`` and ``content_override`` rows (``type IN (...)`` on index
    ``(session_id, type)``), looks each ``firstKeptEntryId`` up by the unique ``id`` column (one row read
    and parsed per compaction), and counts rows from the indexes alone. Each compaction is decided
    exactly as :func:`replay_details` decides it, so the window, summary and overrides are exact: the replay
    is the summary plus every parseable ``message`` row with seq >= ``window_start_seq``.

    Without ``verify`` no message data is read, so two numbers are not exact (``counts_verified`` False):
    ``message_rows`` (and ``summarized_count``) also count unparseable ``message`` rows of the window, which
    pages skip; ``corrupt_rows`` counts only the corrupt rows the plan read. Paging also trusts the reference
    rule that a row's ``id``/``type`` columns copy its JSON ``id``/``type``.

    ``verify=True`` adds one SQL pass over the session's data (SQLite checks each row's JSON: 0.3 s for
    50,000 rows of 15 MB, 0.7 s for 115 MB here; run it in a worker once the first page is shown): the counts
    become exact, and if any row's JSON ``id``/``type`` differs from its columns, the plan is built from a
    full replay with ``keyset`` False, and :func:`replay_page` then cuts pages from a full replay so they
    stay exact. Known limits of SQLite's JSON check (counts only): a duplicated key's first value is read
    where Python reads the last, and SQLite 3.42-3.44 accept JSON5.
    """
    _require_entries(sd)
    with sd.db.read() as conn:
        total = conn.execute("SELECT COUNT(*) FROM entries WHERE session_id = ?", (session_id,)).fetchone()[0]
        # No ORDER BY: with one, SQLite prefers the (session_id) index for its rowid order and reads every row.
        special = sorted((_row(r) for r in conn.execute(
            f"SELECT {_COLS} FROM entries WHERE session_id = ? AND type IN ('compaction', 'content_override')",
            (session_id,),
        )), key=lambda r: r.seq)
        overrides: dict[str, ReplayMessage] = {}
        for row in special:
            if row.parsed is not None and row.entry_type == "content_override":
                ov = _override_from(row.seq, row.entry_id, row.parsed)
                if ov is not None:
                    overrides[_str(row.parsed.get("targetEntryId"))] = ov

        def find_kept(target: str, lo: int, hi: int) -> int | None:
            for seq, data in conn.execute(
                "SELECT seq, CAST(data AS BLOB) FROM entries WHERE id = ? AND session_id = ? AND type = 'message' "
                "AND seq >= ? AND seq < ? ORDER BY seq",
                (target, session_id, lo, hi),
            ):
                parsed, _ = parse_entry_data(_txt(data))
                if parsed is not None:
                    return int(seq)
            return None

        # Decide each compaction; a removed range is [window start, end) of the messages it drops.
        window_start, clear_before = 0, 0
        summary: ReplayMessage | None = None
        decided: list[tuple[EntryRow, bool, int, int, int]] = []  # row, applied, previous summary?, lo, hi
        for row in special:
            if row.parsed is None or row.entry_type != "compaction":
                continue
            fk = _first_kept(row.parsed)
            new_summary = summary_message(row.seq, row.entry_id, _str(row.parsed.get("summary")))
            had_summary = 1 if summary is not None else 0
            if fk == "":
                decided.append((row, True, had_summary, window_start, row.seq))
                window_start, summary = row.seq + 1, new_summary
                continue
            kept = find_kept(fk, window_start, row.seq) if fk is not None else None
            if kept is None:
                decided.append((row, False, 0, 0, 0))
                continue
            decided.append((row, True, had_summary, window_start, kept))
            window_start, clear_before, summary = kept, row.seq, new_summary

        bounds = [hi for _row_, applied, _s, _lo, hi in decided if applied]
        if verify:
            total, corrupt, mismatched, per_bucket = _verify_pass(conn, session_id, bounds)
            if mismatched:
                rows = [_row(r) for r in conn.execute(
                    f"SELECT {_COLS} FROM entries WHERE session_id = ? ORDER BY seq", (session_id,))]
                return _plan_from_details(session_id, replay_details(rows), keyset=False, mismatched=mismatched)
        else:
            corrupt = sum(1 for r in special if r.parsed is None)
            edges = [0, *bounds, END_SEQ]
            per_bucket = [int(conn.execute(
                "SELECT COUNT(*) FROM entries WHERE session_id = ? AND type = 'message' AND seq >= ? AND seq < ?",
                (session_id, edges[i], edges[i + 1]),
            ).fetchone()[0]) for i in range(len(edges) - 1)]
        compactions: list[CompactionInfo] = []
        j = 0
        for row, applied, had_summary, _lo, _hi in decided:
            if applied:
                # the messages it removed: the window's messages below its first kept one (bucket j), and
                # a previous summary. Message rows between the bounds all belong to that window.
                compactions.append(_compaction_info(row, True, had_summary + per_bucket[j]))
                j += 1
            else:
                compactions.append(_compaction_info(row, False, 0))
        message_rows = per_bucket[len(bounds)]
    return ReplayPlan(
        session_id=session_id, window_start_seq=window_start, summary=summary, compactions=tuple(compactions),
        overrides=overrides, message_rows=message_rows, corrupt_rows=int(corrupt), total_rows=int(total),
        usage_cleared_before_seq=clear_before, keyset=True, mismatched_rows=0, counts_verified=verify,
    )


def _summary_in_range(plan: ReplayPlan, after_seq: int | None, before_seq: int | None) -> bool:
    """The summary sits just before the window's first message (between window_start-1 and window_start)."""
    if plan.summary is None:
        return False
    ws = plan.window_start_seq
    return (after_seq is None or after_seq < ws) and (before_seq is None or before_seq >= ws)


def _page_of_list(items: list[ReplayMessage], plan: ReplayPlan, after_seq: int | None, before_seq: int | None,
                  limit: int) -> list[ReplayMessage]:
    msgs = [m for m in items if m.kind == "message" and (after_seq is None or m.seq > after_seq)
            and (before_seq is None or m.seq < before_seq)]
    head = [m for m in items if m.kind == "compaction_summary"][:1]
    if before_seq is None:
        page = msgs[:limit]
        return (head if _summary_in_range(plan, after_seq, before_seq) else []) + page
    page = msgs[-limit:]
    reached_start = len(msgs) <= limit
    return (head if reached_start and _summary_in_range(plan, after_seq, before_seq) else []) + page


def replay_page(sd: SessionDir, plan: ReplayPlan, *, after_seq: int | None = None,
                before_seq: int | None = None, limit: int = 100) -> list[ReplayMessage]:
    """A keyset page of the replay, ascending by seq.

    Forward (``before_seq`` None): up to ``limit`` messages with seq > ``after_seq``; the compaction summary
    comes first when the page starts at or before the window (``after_seq`` None or below
    ``plan.window_start_seq``). Backward (``before_seq`` given, :data:`END_SEQ` for the newest page): the
    ``limit`` messages just below ``before_seq`` (and above ``after_seq`` if given), returned ascending,
    headed by the summary when no earlier message remains. The summary does not count against ``limit``.
    To continue, pass the seq of the last (forward) or first (backward) item of kind ``"message"``; stop
    on a page without messages (or, backward, on one that holds the summary). Unparseable rows are skipped
    (pages are filled past them), overrides and usage clearing are applied from ``plan``.
    """
    _require_entries(sd)
    limit = max(1, int(limit))
    if not plan.keyset:
        return _page_of_list(replay(sd, plan.session_id), plan, after_seq, before_seq, limit)
    lo = plan.window_start_seq - 1
    if after_seq is not None:
        lo = max(lo, after_seq)
    hi = END_SEQ if before_seq is None else before_seq
    backward = before_seq is not None
    want = limit + 1 if backward else limit
    found: list[ReplayMessage] = []
    with sd.db.read() as conn:
        cursor_lo, cursor_hi = lo, hi
        while len(found) < want and cursor_lo < cursor_hi - 1:
            batch = max(_BATCH_MIN, want - len(found))
            order = "DESC" if backward else "ASC"
            rows = conn.execute(
                f"SELECT {_COLS} FROM entries WHERE session_id = ? AND type = 'message' AND seq > ? AND seq < ? "
                f"ORDER BY seq {order} LIMIT ?",
                (plan.session_id, cursor_lo, cursor_hi, batch),
            ).fetchall()
            for r in rows:
                row = _row(r)
                if backward:
                    cursor_hi = row.seq
                else:
                    cursor_lo = row.seq
                if row.parsed is None or row.entry_type != "message":
                    continue
                found.append(_message_for(row.seq, row.entry_id, row.parsed, plan.overrides,
                                          plan.usage_cleared_before_seq))
                if len(found) >= want:
                    break
            if len(rows) < batch:
                break
    if not backward:
        head = [plan.summary] if plan.summary is not None and _summary_in_range(plan, after_seq, None) else []
        return head + found
    reached_start = len(found) <= limit
    page = list(reversed(found[:limit]))
    if reached_start and plan.summary is not None and _summary_in_range(plan, after_seq, before_seq):
        return [plan.summary] + page
    return page


def rows_page(sd: SessionDir, session_id: str, *, after_seq: int | None = None,
              before_seq: int | None = None, limit: int = 100) -> list[EntryRow]:
    """Raw rows of every type by keyset on seq, ascending: after ``after_seq``, or the last ``limit`` rows
    below ``before_seq`` (and above ``after_seq`` if given)."""
    _require_entries(sd)
    limit = max(1, int(limit))
    lo = -1 if after_seq is None else after_seq
    hi = END_SEQ if before_seq is None else before_seq
    order = "ASC" if before_seq is None else "DESC"
    with sd.db.read() as conn:
        rows = [_row(r) for r in conn.execute(
            f"SELECT {_COLS} FROM entries WHERE session_id = ? AND seq > ? AND seq < ? ORDER BY seq {order} LIMIT ?",
            (session_id, lo, hi, limit),
        )]
    return rows if before_seq is None else rows[::-1]


def row_count(sd: SessionDir, session_id: str, *, before_seq: int | None = None) -> int:
    """Rows of the session (with seq < ``before_seq`` when given): a raw row's position for a scrollbar."""
    _require_entries(sd)
    with sd.db.read() as conn:
        return int(conn.execute(
            "SELECT COUNT(*) FROM entries WHERE session_id = ? AND seq < ?",
            (session_id, END_SEQ if before_seq is None else before_seq),
        ).fetchone()[0])


_TURN_TYPES = ("turn_start", "turn_end")

# SQLite 3.42-3.44 accept JSON5 in json_valid(); Python's json does not: there every turn row is parsed in Python.
_SQLITE_JSON_STRICT = not ((3, 42, 0) <= sqlite3.sqlite_version_info < (3, 45, 0))

# SQLite reads each turn row's JSON (json_valid / json_type / json_extract, off the GIL); the data comes along
# so that Python can tell which rows SQLite reads exactly as Python's json does (see _sqlite_reads_as_python).
_TURN_SQL = (
    "SELECT seq, CAST(type AS BLOB), CAST(data AS BLOB),"
    " CASE WHEN json_valid(data) THEN json_type(data) END,"
    " CASE WHEN json_valid(data) AND json_type(data, '$.type') = 'text'"
    " THEN CAST(json_extract(data, '$.type') AS BLOB) END,"
    " CASE WHEN json_valid(data) AND json_type(data, '$.turnId') = 'text'"
    " THEN CAST(json_extract(data, '$.turnId') AS BLOB) END"
    " FROM entries WHERE session_id = ? AND type IN ('turn_start', 'turn_end')"
)


def _sqlite_reads_as_python(data: bytes, top: object) -> bool:
    """True when SQLite's reading of ``data`` (a JSON object to it: ``top``) is Python's: no NUL byte (SQLite
    stops at one), no backslash (so no escaped key, which SQLite's paths do not match), no second ``"type"`` or
    ``"turnId"`` (a duplicated key: SQLite takes the first value, Python the last), under 1,000 bytes (so less
    deeply nested than Python's recursion limit)."""
    return (top == "object" and _SQLITE_JSON_STRICT and len(data) < 1000 and b"\\" not in data
            and b"\x00" not in data and data.count(b'"type"') <= 1 and data.count(b'"turnId"') <= 1)


def turn_markers(sd: SessionDir, session_id: str) -> list[tuple[int, str, str]]:
    """``(seq, "turn_start" | "turn_end", turnId)`` of the session's turn entries, in seq order (corrupt
    rows skipped; a missing turnId is "").

    SQLite extracts each row's type and turnId (16,000 turns: ~60 ms in SQLite, beside the UI, and ~20 ms of
    Python, instead of ~200 ms of Python); a row it might read differently from Python's json is parsed in
    Python, as :func:`parse_entry_data` does.
    """
    _require_entries(sd)
    with sd.db.read() as conn:
        rows = conn.execute(_TURN_SQL, (session_id,)).fetchall()
    out: list[tuple[int, str, str]] = []
    for seq, ctype, data, top, jtype, jturn in rows:
        if data is not None and _sqlite_reads_as_python(data, top):
            kind = (jtype if jtype is not None else ctype).decode("utf-8", "replace")
            turn_id = jturn.decode("utf-8", "replace") if jturn is not None else ""
        else:
            parsed, _ = parse_entry_data(_txt(data))
            if parsed is None:
                continue
            declared = parsed.get("type")
            kind = declared if isinstance(declared, str) else (_txt(ctype) or "")
            turn_id = _str(parsed.get("turnId"))
        if kind in _TURN_TYPES:
            out.append((int(seq), kind, turn_id))
    out.sort(key=lambda m: m[0])
    return out


# ----------------------------------------------------------------------------------------------- export


def _require_session(sd: SessionDir, session_id: str, rows: list[EntryRow]) -> None:
    if rows:
        return
    if sd.schema.has("sessions"):
        with sd.db.read() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None:
                return
    raise SessionNotFound(f"No session has the id {session_id!r}.")


def _fence(text: str, lang: str = "") -> str:
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _pretty_args(arguments: str) -> tuple[str, str]:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except (ValueError, RecursionError):
        return arguments, ""


def export_markdown(sd: SessionDir, session_id: str) -> str:
    """The replay as readable Markdown: a heading per message, thinking as quotes, tool calls and results
    in code blocks, errors and compaction summaries marked. Raises SessionNotFound for an unknown id."""
    rows = load_rows(sd, session_id)
    _require_session(sd, session_id, rows)
    d = replay_details(rows)
    out = [f"# {d.title or 'Session ' + session_id}", ""]
    facts = [f"Session `{session_id}`", f"{sum(1 for m in d.messages if m.kind == 'message')} messages"]
    if d.compactions:
        facts.append(f"{sum(c.applied for c in d.compactions)} of {len(d.compactions)} compactions applied")
    if d.corrupt_rows:
        facts.append(f"{d.corrupt_rows} corrupt row{'' if d.corrupt_rows == 1 else 's'} skipped")
    out += [" · ".join(facts), ""]
    for rm in d.messages:
        m = rm.message
        if rm.kind == "compaction_summary":
            out += [f"## Compaction summary · seq {rm.seq}", "",
                    f"*Earlier messages were compacted into this summary (entry `{rm.entry_id}`).*", "",
                    m.text or "*(empty summary)*", ""]
            continue
        head = f"## {m.role or 'unknown role'} · seq {rm.seq}"
        if m.role == "toolResult":
            head += f" · result of `{m.tool_name or '?'}`" + (" · ✗ error" if m.is_error else "")
        out += [head, ""]
        if m.system_injected:
            out += ["*Injected by the runtime.*", ""]
        if rm.overridden:
            out += [f"*Content replaced by an override{': ' + rm.override_reason if rm.override_reason else ''}.*", ""]
        if m.role == "toolResult":
            if m.tool_call_id:
                out += [f"Call `{m.tool_call_id}`" + (" failed:" if m.is_error else ":"), ""]
            if m.text:
                out += [_fence(m.text), ""]
        for b in m.blocks:
            if b.type == "text":
                if m.role != "toolResult" and b.text:
                    out += [b.text, ""]
            elif b.type == "thinking":
                if b.text:
                    out += ["\n".join("> " + line for line in b.text.splitlines()), ""]
            elif b.tool_call is not None:
                tc = b.tool_call
                label = f"**Tool call** `{tc.name or '?'}`" + (f" (id `{tc.id}`)" if tc.id else "")
                args, lang = _pretty_args(tc.arguments)
                out += [label, ""] + ([_fence(args, lang), ""] if args else [])
            else:
                out += [f"*[{b.text}]*", ""]
    return "\n".join(out).rstrip() + "\n"


def _message_json(rm: ReplayMessage) -> dict[str, object]:
    m = rm.message
    return {
        "seq": rm.seq, "entry_id": rm.entry_id, "kind": rm.kind, "role": m.role, "text": m.text,
        "thinking": m.thinking, "overridden": rm.overridden, "override_reason": rm.override_reason,
        "system_injected": m.system_injected, "tool_call_id": m.tool_call_id, "tool_name": m.tool_name,
        "is_error": m.is_error, "usage_total": m.usage_total,
        "tool_calls": [{"id": c.id, "name": c.name, "kind": c.kind, "arguments": c.arguments} for c in m.tool_calls],
        "other_blocks": [{"type": b.type, "text": b.text} for b in m.blocks
                         if b.type not in ("text", "thinking", "toolCall")],
    }


def export_json(sd: SessionDir, session_id: str) -> str:
    """``{"session_id", "title", "corrupt_rows", "compactions", "messages"}`` of the replay, as JSON text."""
    rows = load_rows(sd, session_id)
    _require_session(sd, session_id, rows)
    d = replay_details(rows)
    doc = {
        "session_id": session_id,
        "title": d.title,
        "corrupt_rows": d.corrupt_rows,
        "compactions": [
            {"seq": c.seq, "entry_id": c.entry_id, "first_kept_entry_id": c.first_kept_entry_id,
             "applied": c.applied, "summarized_count": c.summarized_count, "summary_version": c.summary_version,
             "tokens_before": c.tokens_before}
            for c in d.compactions
        ],
        "messages": [_message_json(rm) for rm in d.messages],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
