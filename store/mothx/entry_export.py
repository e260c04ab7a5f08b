"""A session's replay exported as Markdown or JSON text.

Both are safe by construction: the Markdown goes through ``store.safetext.safe(text, newlines=True,
tabs=True)`` (no raw control, bidi or surrogate character: each is a visible escape) and the JSON through
``store.safetext.json_dumps`` (such characters as ``\\uXXXX`` escapes), so the text can always be encoded
and written, whatever the session holds (a lone surrogate, terminal escapes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.errors import SessionNotFound
from store.mothx.cells import bind
from store.mothx.entry_model import EntryRow
from store.mothx.entry_reads import load_rows
from store.mothx.entry_replay import ReplayMessage, replay_details
from store.mothx.jsonvalue import loads, pretty
from store.safetext import json_dumps, one_line, safe

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

__all__ = ["export_markdown", "export_json"]

def _require_session(sd: SessionDir, session_id: str, rows: list[EntryRow]) -> None:
    if rows:
        return
    if sd.schema.has("sessions"):
        with sd.db.read() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = CAST(? AS TEXT)",
                            (bind(session_id),)).fetchone() is not None:
                return
    raise SessionNotFound(f"No session has the id '{one_line(session_id)}'.")


def _fence(text: str, lang: str = "") -> str:
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _pretty_args(arguments: str) -> tuple[str, str]:
    try:
        return pretty(loads(arguments)), "json"
    except (ValueError, RecursionError):
        return arguments, ""


def export_markdown(sd: SessionDir, session_id: str) -> str:
    """The replay as readable Markdown: a heading per message, thinking as quotes, tool calls and results
    in code blocks, errors and compaction summaries marked. Raises SessionNotFound for an unknown id."""
    rows = load_rows(sd, session_id)
    _require_session(sd, session_id, rows)
    d = replay_details(rows)
    out = [f"# {one_line(d.title) or 'Session ' + one_line(session_id)}", ""]
    # every replayed message, the compaction summary included: the count the screen's header and the JSON give
    count = len(d.messages)
    facts = [f"Session `{one_line(session_id)}`", f"{count:,} message{'' if count == 1 else 's'}"]
    if d.compactions:
        facts.append(f"{sum(c.applied for c in d.compactions)} of {len(d.compactions)} compactions applied")
    if d.corrupt_rows:
        facts.append(f"{d.corrupt_rows} corrupt row{'' if d.corrupt_rows == 1 else 's'} skipped")
    out += [" · ".join(facts), ""]
    for rm in d.messages:
        m = rm.message
        if rm.kind == "compaction_summary":
            out += [f"## Compaction summary · seq {rm.seq}", "",
                    f"*Earlier messages were compacted into this summary (entry `{one_line(rm.entry_id)}`).*", "",
                    m.text or "*(empty summary)*", ""]
            continue
        head = f"## {one_line(m.role) or 'unknown role'} · seq {rm.seq}"
        if m.role == "toolResult":
            head += f" · result of `{one_line(m.tool_name) or '?'}`" + (" · ✗ error" if m.is_error else "")
        out += [head, ""]
        if m.system_injected:
            out += ["*Injected by the runtime.*", ""]
        if rm.overridden:
            out += [f"*Content replaced by an override{': ' + one_line(rm.override_reason) if rm.override_reason else ''}.*", ""]
        if m.role == "toolResult":
            if m.tool_call_id:
                out += [f"Call `{one_line(m.tool_call_id)}`" + (" failed:" if m.is_error else ":"), ""]
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
                label = f"**Tool call** `{one_line(tc.name) or '?'}`" + (f" (id `{one_line(tc.id)}`)" if tc.id else "")
                args, lang = _pretty_args(tc.arguments)
                out += [label, ""] + ([_fence(args, lang), ""] if args else [])
            else:
                out += [f"*[{one_line(b.text)}]*", ""]
    return safe("\n".join(out).rstrip() + "\n", newlines=True, tabs=True)


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
    return json_dumps(doc) + "\n"
