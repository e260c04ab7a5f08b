"""How native (Claude Code, Codex) items become wrapped lines, in the same block look as the mothx replay.

Pure functions of (item, width, palette), called through :func:`tui.widgets.transcript_blocks.render_item`.
"""

from __future__ import annotations

from rich.console import Console
from rich.style import Style
from rich.text import Text

from store.agents.native import (
    K_ASSISTANT,
    K_COMPACT_BOUNDARY,
    K_COMPACT_SUMMARY,
    K_COMPACTED,
    K_CONTEXT,
    K_DEVELOPER,
    K_LAST_PROMPT,
    K_OTHER,
    K_REASONING,
    K_SESSION_META,
    K_SUMMARY,
    K_SYSTEM,
    K_TOOL_CALL,
    K_TOOL_RESULT,
    K_TURN_ABORTED,
    K_TURN_DURATION,
    K_TURN_END,
    K_UNREADABLE,
    K_USER,
    K_WEB_SEARCH,
    NativeBlock,
    NativeItem,
)
from tui.widgets.block_base import _JSON_HIGHLIGHTER as JSON_HIGHLIGHTER
from tui.widgets.block_base import (
    MAX_ARGUMENT_LINES,
    MAX_MARKER_SUMMARY_LINES,
    Palette,
    ViewItem,
    _right_aligned,
    _text,
    clean,
    clean_line,
    clip,
    pretty_arguments,
    short_id,
    short_time,
    wrap,
)
from tui.widgets.native_sources import (
    N_FORK,
    N_QUIET,
    N_ROW,
    N_SUBAGENT,
    N_TURN,
    CallResult,
    ForkMark,
    RawLine,
    RecordView,
    SubAgentNote,
)

MAX_RESULT_LINES = 8        # lines of a tool result drawn under its call
MAX_UNREADABLE_RAW = 3      # lines of an unreadable line's text
QUIET_LABELS = {
    "progress": "progress", "hook": "hook", "file_snapshot": "file snapshot", "queue": "queue",
    "token_count": "tokens", "turn_context": "turn context", "event": "event",
}


def render_native(item: ViewItem, width: int, pal: Palette, console: Console) -> list[Text]:
    p = item.payload
    if item.kind == N_FORK and isinstance(p, ForkMark):
        return fork_lines(p, width, pal, console)
    if item.kind == N_QUIET and isinstance(p, RecordView):
        return [*_parent_marker(p, width, pal), quiet_line(p.item, width, pal)]
    if item.kind == N_TURN and isinstance(p, RecordView):
        return turn_rule(p.item, width, pal)
    if item.kind == N_SUBAGENT and isinstance(p, SubAgentNote):
        return subagent_note_lines(p, width, pal, console)
    if item.kind == N_ROW and isinstance(p, RawLine):
        return raw_line(p.item, width, pal)
    if isinstance(p, RecordView):
        return record_lines(p, width, pal, console)
    return [_text(f"(unknown item {clean_line(item.kind)})", pal.muted, pal.base)]


def _rule(left_text: str, right_text: str, char: str, style: Style, width: int, base: Style) -> Text:
    left = _text(left_text, style, base)
    right = _text(right_text, style, base)
    fill = width - left.cell_len - right.cell_len
    if fill > 0:
        left.append(char * fill, style)
    left.append_text(right)
    left.truncate(width, overflow="ellipsis")
    return left


def _where(item: NativeItem) -> str:
    meta = f"line {item.line:,}"
    if item.timestamp:
        meta += f" · {short_time(item.timestamp)}"
    return meta


def _header(view: RecordView, width: int, pal: Palette) -> Text:
    item = view.item
    left = Text(style=pal.base, end="")
    kind = item.kind
    if kind == K_USER:
        left.append("● user", pal.user)
    elif kind == K_ASSISTANT:
        left.append("● assistant", pal.assistant)
    elif kind == K_TOOL_CALL:
        left.append("● assistant", pal.assistant)
    elif kind == K_REASONING:
        left.append("● assistant", pal.assistant)
        left.append("  reasoning", pal.thinking)
    elif kind == K_TOOL_RESULT:
        left.append("◂ tool result", pal.tool)
    elif kind == K_DEVELOPER:
        left.append("● developer", pal.system)
    elif kind == K_SYSTEM:
        left.append("⚙ system", pal.system)
        if item.subtype:
            left.append(f" {clean_line(item.subtype)}", pal.muted)
    elif kind == K_SESSION_META:
        left.append("◇ session", pal.muted)
    elif kind == K_LAST_PROMPT:
        left.append("↺ last prompt", pal.system)
        left.append("  left in the input box, not sent", pal.muted)
    elif kind == K_TURN_DURATION:
        left.append("⏱ turn duration", pal.muted)
    elif kind == K_WEB_SEARCH:
        left.append("● assistant", pal.assistant)
        left.append("  ⌕ web search", pal.tool)
        if "error" in item.flags:
            left.append("  ✗ failed", pal.error)
    elif kind == K_OTHER and "unknown_type" in item.flags:
        left.append(f"? {clean_line(item.subtype) or 'record'}", pal.warning)
        left.append("  record type not known to this reader", pal.muted)
    elif kind == K_CONTEXT:
        left.append("▸ context", pal.system)
        left.append(f"  {clean_line(item.subtype) or 'injected'} · not typed", pal.muted)
    elif kind == K_COMPACT_SUMMARY:
        left.append("◆ compact summary", pal.marker)
        left.append("  user · system-injected", pal.system)
    elif kind == K_SUMMARY:
        left.append("◆ summary", pal.marker)
    else:
        left.append(f"● {clean_line(kind)}", pal.muted)
        if item.subtype:
            left.append(f" {clean_line(item.subtype)}", pal.muted)
    if "meta" in item.flags:
        left.append("  ⚙ meta", pal.system)
    elif "command" in item.flags:
        left.append("  ⌘ command", pal.system)
    if "api_error" in item.flags:
        left.append("  ✗ API error", pal.error)
    if "replay" in item.flags:
        left.append("  (replayed copy)", pal.muted)
    codes = [b.exit_code for b in item.blocks if b.exit_code is not None]
    if kind == K_TOOL_RESULT and codes:
        left.append(f"  exit {codes[0]}", pal.error if codes[0] else pal.muted)
    if kind == K_TOOL_RESULT and any(b.is_error for b in item.blocks):
        left.append("  ✗ error", pal.error)
    if item.subtype and kind in (K_ASSISTANT,) and item.subtype in ("commentary", "final_answer"):
        left.append(f"  {item.subtype.replace('_', ' ')}", pal.muted)
    if view.branch_label:
        left.append(f"  {view.branch_label}", pal.override)
    return _right_aligned(left, _text(_where(item), pal.muted, pal.base), width, pal.base)


def _add_text(out: list[Text], s: str, st: Style, width: int, pal: Palette, console: Console, *,
              prefix: str = "  ", prefix_style: Style | None = None, max_lines: int = 400) -> None:
    shown, note = clip(clean(s), max_lines=max_lines)
    out.extend(wrap(_text(shown, st, pal.base), width, console, _text(prefix, prefix_style or Style(), pal.base)))
    if note:
        out.append(_text(prefix + note, pal.muted, pal.base))


def _call_lines(call: CallResult, width: int, pal: Palette, console: Console) -> list[Text]:
    base = pal.base
    out: list[Text] = []
    head = Text(style=base, end="")
    head.append("  → ", pal.tool)
    head.append(clean_line(call.name) or "(unnamed tool)", Style.combine([pal.tool, Style(bold=True)]))
    if call.call_id:
        head.append(f"  {clean_line(call.call_id)}", pal.muted)
    out.extend(wrap(head, width, console))
    if call.subagent is not None and call.subagent.layout == "absent":
        note_text = Text(style=base, end="")
        note_text.append(f"    ↳ sub-agent {clean_line(call.subagent.agent_id) or '?'}: file not present", pal.warning)
        out.extend(wrap(note_text, width, console))
    elif call.subagent is not None:
        link = call.subagent
        note_text = Text(style=base, end="")
        note_text.append(f"    ↳ sub-agent {clean_line(link.agent_id) or '?'}: {link.transcript.records:,} records",
                         Style.combine([pal.override, Style(bold=True)]))
        note_text.append("  — enter opens it", pal.muted)
        out.extend(wrap(note_text, width, console))
    shown, note = clip(clean(pretty_arguments(call.arguments)), max_lines=MAX_ARGUMENT_LINES)
    out.extend(wrap(JSON_HIGHLIGHTER(_text(shown, Style(), base)), width, console, Text("      ", style=base)))
    if note:
        out.append(_text("      " + note, pal.muted, base))
    if call.interrupted:
        out.append(_text("    ⚠ interrupted: no result was recorded", pal.warning, base))
    else:
        res = Text(style=base, end="")
        res.append("    ◂ result", pal.tool)
        res.append(f"  line {call.result_line:,}", pal.muted)
        code = getattr(call, "exit_code", None)  # CallResult carries it once native_sources passes it on
        if isinstance(code, int):
            res.append(f"  exit {code}", pal.error if code else pal.muted)
        if call.is_error:
            res.append("  ✗ error", pal.error)
        out.append(res)
        if call.result_text.strip():
            _add_text(out, call.result_text, pal.error if call.is_error else Style(), width, pal, console,
                      prefix="    │ ", prefix_style=pal.tool, max_lines=MAX_RESULT_LINES)
    return out


def _parent_marker(view: RecordView, width: int, pal: Palette) -> list[Text]:
    """A rule above a record whose parent sits in an unreadable line (or may: its parent is in no readable
    record and an unreadable line comes before it)."""
    item = view.item
    if item.parent_state == "unreadable":
        return [_rule(f"╌╌ under the unreadable line {item.parent_line:,} (its parent) ", "", "╌", pal.error, width,
                      pal.base)]
    if view.maybe_parent_line:
        return [_rule(f"╌╌ its parent is in no readable record: the unreadable line {view.maybe_parent_line:,} "
                      "may hold it ", "", "╌", pal.error, width, pal.base)]
    return []


def record_lines(view: RecordView, width: int, pal: Palette, console: Console) -> list[Text]:
    item = view.item
    base = pal.base
    if item.kind == K_UNREADABLE:
        return unreadable_lines(item, width, pal, console)
    if item.kind in (K_COMPACT_BOUNDARY, K_COMPACTED):
        return compaction_lines(view, width, pal, console)
    out = _parent_marker(view, width, pal)
    out.append(_header(view, width, pal))
    if item.kind == K_SUMMARY:
        _add_text(out, item.text or "(empty summary)", Style(italic=True), width, pal, console)
        if "dangling_leaf" in item.flags:
            out.extend(wrap(_text(f"⚠ dangling leafUuid {short_id(item.leaf_uuid)}: no record here has it",
                                  pal.warning, base), width, console, Text("  ", style=base)))
        elif view.leaf_line:
            out.append(_text(f"  leaf {short_id(item.leaf_uuid)} at line {view.leaf_line:,}", pal.muted, base))
        out.append(Text(style=base, end=""))
        return out
    if item.kind == K_COMPACT_SUMMARY:
        shown, note = clip(clean(item.text or "(empty summary)"), max_lines=MAX_MARKER_SUMMARY_LINES * 3,
                           max_chars=6_000)
        out.extend(wrap(_text(shown, Style(italic=True), base), width, console, _text("  │ ", pal.marker, base)))
        if note:
            out.append(_text("  │ " + note, pal.muted, base))
        out.append(Text(style=base, end=""))
        return out
    if item.kind == K_CONTEXT:
        for block in item.blocks or (NativeBlock("context", item.text, tool_name=item.subtype),):
            out.extend(_context_lines(block, width, pal, console))
        out.append(Text(style=base, end=""))
        return out
    calls = iter(view.calls)
    encrypted = iter(view.encrypted_bytes)
    wrote = False
    for block in item.blocks:
        if block.kind == "text":
            if block.text.strip():
                _add_text(out, block.text, Style(), width, pal, console)
                wrote = True
        elif block.kind == "thinking":
            out.append(_text("  ┊ thinking", pal.thinking, base))
            _add_text(out, block.text or "(text not recorded)", pal.thinking, width, pal, console, prefix="  ┊ ",
                      prefix_style=pal.thinking)
            wrote = True
        elif block.kind == "redacted_thinking":
            out.append(_text("  ┊ thinking (redacted)", pal.thinking, base))
            wrote = True
        elif block.kind == "reasoning_summary":
            _add_text(out, block.text or "(empty)", pal.thinking, width, pal, console, prefix="  ┊ ",
                      prefix_style=pal.thinking)
            wrote = True
        elif block.kind == "encrypted_reasoning":
            size = next(encrypted, None)
            what = f"encrypted reasoning ({size:,} bytes)" if size is not None else "encrypted reasoning"
            out.append(_text(f"  ┊ {what}", pal.thinking, base))
            wrote = True
        elif block.kind == "context":
            out.extend(_context_lines(block, width, pal, console))
            wrote = True
        elif block.kind == "tool_use":
            call = next(calls, None)
            if call is not None:
                out.extend(_call_lines(call, width, pal, console))
                wrote = True
        elif block.kind == "tool_result":
            if block.tool_id in view.results_elsewhere:
                out.append(_text(f"  ◂ result of {clean_line(block.tool_id)} (shown under its call)", pal.muted, base))
            else:
                head = _text("  ◂ result", pal.tool, base)
                if block.tool_id:
                    head.append(f"  {clean_line(block.tool_id)}", pal.muted)
                if item.kind == K_TOOL_RESULT:
                    head.append("  (its call is not shown here)", pal.muted)
                if block.exit_code is not None:
                    head.append(f"  exit {block.exit_code}", pal.error if block.exit_code else pal.muted)
                if block.is_error:
                    head.append("  ✗ error", pal.error)
                out.append(head)
                _add_text(out, block.text or "(empty)", pal.error if block.is_error else Style(), width, pal,
                          console, prefix="    │ ", prefix_style=pal.tool, max_lines=MAX_RESULT_LINES)
            wrote = True
        else:
            label = {"image": "▣ image", "document": "▤ document"}.get(block.kind, f"▢ {clean_line(block.kind)}")
            desc = clean_line(block.text)
            out.extend(wrap(_text(f"{label}: {desc}" if desc and desc != f"[{block.kind}]" else label, pal.muted,
                                  base), width, console, Text("  ", style=base)))
            wrote = True
    if not item.blocks and item.text.strip():
        _add_text(out, item.text, pal.muted if item.kind in (K_SESSION_META, K_SYSTEM) else Style(), width, pal,
                  console)
        wrote = True
    if not wrote:
        out.append(_text("  (empty)", pal.muted, base))
    out.append(Text(style=base, end=""))
    return out


def _context_lines(block: NativeBlock, width: int, pal: Palette, console: Console) -> list[Text]:
    """Injected context, collapsed: its label, size and first line (the raw view shows it whole)."""
    base = pal.base
    lines = block.text.strip().splitlines() or [""]
    head = Text(style=base, end="")
    head.append("  ▸ ", pal.system)
    head.append(clean_line(block.tool_name) or "context", pal.system)
    head.append(f"  {len(lines):,} line{'' if len(lines) == 1 else 's'} · injected, collapsed", pal.muted)
    out = wrap(head, width, console)
    first = next((ln for ln in lines if ln.strip()), "")
    if first:
        shown, _ = clip(clean_line(first), max_lines=1, max_chars=200)
        line = _text("    " + shown, pal.muted, base)
        line.truncate(width, overflow="ellipsis")
        out.append(line)
    return out


def compaction_lines(view: RecordView, width: int, pal: Palette, console: Console) -> list[Text]:
    item = view.item
    base = pal.base
    out = _parent_marker(view, width, pal)
    if item.kind == K_COMPACT_BOUNDARY:
        facts = [clean_line(item.subtype) if item.subtype else "compaction"]
        if item.tokens is not None:
            facts.append(f"{item.tokens:,} tokens before")
        out.append(_rule(f"━━ compaction · {' · '.join(facts)} ", f" {_where(item)} ━━", "━", pal.marker, width, base))
        if item.text and item.text != "Conversation compacted":
            _add_text(out, item.text, pal.muted, width, pal, console)
    else:
        n = len(view.replacement)
        out.append(_rule(f"━━ compacted · {n:,} replacement item{'' if n == 1 else 's'} ", f" {_where(item)} ━━",
                         "━", pal.marker, width, base))
        shown, note = clip(clean(item.text or "(no message)"), max_lines=MAX_MARKER_SUMMARY_LINES, max_chars=2_000)
        out.extend(wrap(_text(shown, Style(italic=True), base), width, console, _text("  │ ", pal.marker, base)))
        if note:
            out.append(_text("  │ " + note, pal.muted, base))
        for r in view.replacement[:6]:
            role = clean_line(r.role or r.kind)
            out.extend(wrap(_text(f"{role}: {clean_line(r.text)}", pal.muted, base), width, console,
                            Text("    · ", style=base)))
            out[-1].truncate(width, overflow="ellipsis")
        if n > 6:
            out.append(_text(f"    … {n - 6:,} more replacement items", pal.muted, base))
    out.append(Text(style=base, end=""))
    return out


def unreadable_lines(item: NativeItem, width: int, pal: Palette, console: Console) -> list[Text]:
    base = pal.base
    out = [_right_aligned(_text(f"✗ unreadable line {item.line:,}", pal.error, base),
                          _text(f"line {item.line:,}", pal.muted, base), width, base)]
    out.extend(wrap(_text(clean(item.error or "not valid JSON"), pal.error, base), width, console,
                    Text("  ", style=base)))
    shown, note = clip(clean(item.raw), max_lines=MAX_UNREADABLE_RAW, max_chars=600)
    out.extend(wrap(_text(shown, pal.muted, base), width, console, _text("  │ ", pal.error, base)))
    if note:
        out.append(_text("  │ " + note, pal.muted, base))
    out.append(Text(style=base, end=""))
    return out


def fork_lines(mark: ForkMark, width: int, pal: Palette, console: Console) -> list[Text]:
    base = pal.base
    fork = mark.fork
    out = [_rule(f"⑂ {mark.count} branches — b to switch · showing {mark.chosen + 1} of {mark.count} ",
                 f" fork at line {fork.parent_line:,} ⑂", "┄", Style.combine([pal.override, Style(bold=True)]),
                 width, base)]
    for br in fork.branches:
        chosen = br.index == mark.chosen
        row = Text(style=base, end="")
        row.append("  ▸ " if chosen else "    ", pal.override)
        row.append(f"{br.index + 1}  {short_time(br.timestamp)}  {br.items:,} records  ",
                   pal.override if chosen else pal.muted)
        row.append(clean_line(br.preview), Style() if chosen else pal.muted)
        row.truncate(width, overflow="ellipsis")
        out.append(row)
    out.append(Text(style=base, end=""))
    return out


def quiet_line(item: NativeItem, width: int, pal: Palette) -> Text:
    label = QUIET_LABELS.get(item.kind) or clean_line(item.kind)
    if item.kind == "event" and item.subtype:
        label = f"event {clean_line(item.subtype)}"
    left = _text(f"  · {label}  ", pal.turn, pal.base)
    left.append(clean_line(item.text), pal.turn)
    return _right_aligned_cut(left, _text(f" line {item.line:,}", pal.turn, pal.base), width, pal.base)


def _right_aligned_cut(left: Text, right: Text, width: int, base: Style) -> Text:
    room = width - right.cell_len - 2  # _right_aligned keeps a gap of two cells before the line number
    if left.cell_len > room:
        left = left.copy()
        left.truncate(max(1, room), overflow="ellipsis")
    return _right_aligned(left, right, width, base)


def turn_rule(item: NativeItem, width: int, pal: Palette) -> list[Text]:
    tid = short_id(item.turn_id) or "?"
    if item.kind == K_TURN_ABORTED:
        reason = item.text.removeprefix("Turn aborted").lstrip(": ")
        what = f"⚠ turn {tid} aborted" if item.turn_id else "⚠ turn aborted"
        return [_rule(f"{what}{': ' + clean_line(reason) if reason else ''} ", f" line {item.line:,} ──", "─",
                      pal.warning, width, pal.base)]
    if item.kind == K_TURN_END:
        return [_rule(f"──── turn {tid} complete ", f" line {item.line:,} ──", "─", pal.turn, width, pal.base)]
    if "incomplete_turn" in item.flags or "aborted_turn" in item.flags:
        what = "never completed (no task_complete)" if "incomplete_turn" in item.flags else "aborted"
        return [_rule(f"──── turn {tid} started · ⚠ {what} ", f" line {item.line:,} ──", "─", pal.warning, width,
                      pal.base)]
    return [_rule(f"──── turn {tid} started ", f" line {item.line:,} ──", "─", pal.turn, width, pal.base)]


def subagent_note_lines(note: SubAgentNote, width: int, pal: Palette, console: Console) -> list[Text]:
    link = note.link
    base = pal.base
    head = Text(style=base, end="")
    head.append(f"↳ sub-agent {clean_line(link.agent_id) or '?'}: {link.transcript.records:,} records",
                Style.combine([pal.override, Style(bold=True)]))
    head.append(f"  ({clean_line(link.layout)} layout; no Task call here names it) — enter opens it", pal.muted)
    out = wrap(head, width, console)
    if link.prompt:
        shown, _ = clip(clean_line(link.prompt), max_lines=1, max_chars=300)
        out.extend(wrap(_text(shown, pal.muted, base), width, console, Text("  ", style=base)))
    out.append(Text(style=base, end=""))
    return out


NATIVE_RAW_COLUMNS = "  line kind          record"


def raw_line(item: NativeItem, width: int, pal: Palette) -> list[Text]:
    bad = item.kind == K_UNREADABLE
    prefix = f"{item.line:>6} {clean_line(item.kind)[:13]:<13} "
    line = _text(prefix, pal.error if bad else pal.base, pal.base)
    room = max(4, width - len(prefix))
    preview = clean_line(item.raw)
    if len(preview) > room:
        preview = preview[: room - 1] + "…"
    line.append(preview, pal.error if bad else pal.muted)
    line.truncate(width)
    if not bad:
        return [line]
    reason = _text(f"{' ' * 7}✗ {clean_line(item.error or 'not valid JSON')}", pal.error, pal.base)
    reason.truncate(width, overflow="ellipsis")
    return [line, reason]


def native_copy_text(item: ViewItem) -> tuple[str, str]:
    """What ``y`` copies for a native item, and a few words naming it."""
    p = item.payload
    if isinstance(p, RecordView):
        it = p.item
        parts = [it.text] if it.text else []
        for c in p.calls:
            parts.append(f"[tool call {c.name}]\n{pretty_arguments(c.arguments)}")
            if c.result_text:
                parts.append(f"[result]\n{c.result_text}")
        return "\n\n".join(parts) or it.raw, f"record at line {it.line:,}"
    if isinstance(p, RawLine):
        return p.item.raw, f"line {p.item.line:,}"
    if isinstance(p, ForkMark):
        return "\n".join(b.preview for b in p.fork.branches), f"branch prompts of the fork at line {p.fork.parent_line}"
    if isinstance(p, SubAgentNote):
        return p.link.prompt, f"prompt of sub-agent {p.link.agent_id}"
    return "", "nothing"


__all__ = ["NATIVE_RAW_COLUMNS", "native_copy_text", "render_native"]
