"""What the Transcript screen draws: the items of a replay window and how each becomes wrapped lines.

Pure functions of (item, width, palette): no widget state, no database. The view caches their output per
item and width, so a block is wrapped once however often it is scrolled past.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.style import Style
from rich.text import Text

from store.mothx.entries import CompactionInfo, EntryRow, Message, ReplayMessage
from tui.widgets.block_base import (  # noqa: F401 - re-exported: the screens and views import them from here
    _JSON_HIGHLIGHTER,
    MAX_ARGUMENT_LINES,
    MAX_MARKER_SUMMARY_LINES,
    MAX_OVERRIDE_ORIGINAL_LINES,
    MAX_TEXT_CHARS,
    MAX_TEXT_LINES,
    RULE_KINDS,
    SECTION_BODY,
    SECTION_PREAMBLE,
    SECTION_SUMMARY,
    OverrideMark,
    Palette,
    TurnMark,
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

# ---------------------------------------------------------------------------------------------- blocks


def render_item(item: ViewItem, width: int, pal: Palette, console: Console) -> list[Text]:
    """The lines of one block, each at most ``width`` cells (the view adds the gutter and scrollbar)."""
    width = max(20, width)
    if item.kind.startswith("native_"):
        from tui.widgets.native_blocks import render_native

        return render_native(item, width, pal, console)
    if item.kind in ("message", "summary") and isinstance(item.payload, ReplayMessage):
        return message_lines(item.payload, width, pal, console, summary=item.kind == "summary")
    if item.kind in ("compaction", "earlier_compaction") and isinstance(item.payload, CompactionInfo):
        return compaction_lines(item.payload, width, pal, console, earlier=item.kind == "earlier_compaction")
    if item.kind == "override" and isinstance(item.payload, OverrideMark):
        return override_lines(item.payload, width, pal, console)
    if item.is_rule and isinstance(item.payload, TurnMark):
        return [turn_line(item.payload, width, pal)]
    if item.kind == "row" and isinstance(item.payload, EntryRow):
        return row_lines(item.payload, width, pal)
    return [_text(f"(unknown item {item.kind} at seq {item.seq})", pal.muted, pal.base)]


def _role_header(rm: ReplayMessage, width: int, pal: Palette, summary: bool) -> Text:
    m = rm.message
    left = Text(style=pal.base, end="")
    if summary:
        left.append("◆ compaction summary", pal.marker)
        left.append("  user · system-injected", pal.system)
    elif m.role == "toolResult":
        left.append("◂ tool result", pal.tool)
        if m.tool_name:
            left.append(f": {clean_line(m.tool_name)}", Style.combine([pal.tool, Style(bold=True)]))
        if m.is_error:
            left.append("  ✗ error", pal.error)
    elif m.role == "assistant":
        left.append("● assistant", pal.assistant)
    elif m.role == "user":
        left.append("● user", pal.user)
    else:
        left.append(f"● {clean_line(m.role) or '(no role)'}", pal.muted)
    if m.system_injected and not summary:
        left.append("  ⚙ system-injected", pal.system)
    if rm.overridden:
        left.append("  ⟲ overridden", pal.override)
    meta = f"seq {rm.seq:,}"
    stamp = m.raw.get("timestamp") if isinstance(m.raw, dict) else None
    if not stamp and rm.original is not None and isinstance(rm.original.raw, dict):
        stamp = rm.original.raw.get("timestamp")
    if isinstance(stamp, str) and stamp:
        meta += f" · {short_time(stamp)}"
    return _right_aligned(left, _text(meta, pal.muted, pal.base), width, pal.base)


def _content_lines(m: Message, width: int, pal: Palette, console: Console, *, style: Style | None = None,
                   max_lines: int = MAX_TEXT_LINES) -> list[Text]:
    """The body of one message: its text, thinking, tool calls, images and files, in block order."""
    base = pal.base
    text_style = style or Style()
    out: list[Text] = []

    def add_text(s: str, st: Style, prefix: str = "  ", limit: int = max_lines, prefix_style: Style | None = None) -> None:
        shown, note = clip(clean(s), max_lines=limit)
        out.extend(wrap(_text(shown, st, base), width, console, _text(prefix, prefix_style or Style(), base)))
        if note:
            out.append(_text(prefix + note, pal.muted, base))

    for block in m.blocks:  # the `content` string is the first text block
        if block.type == "text":
            if block.text:
                add_text(block.text, text_style)
        elif block.type == "thinking":
            out.append(_text("  ┊ thinking", pal.thinking, base))
            add_text(block.text or "(empty)", pal.thinking, prefix="  ┊ ", prefix_style=pal.thinking)
        elif block.type == "toolCall" and block.tool_call is not None:
            call = block.tool_call
            head = Text(style=base, end="")
            head.append("  → ", pal.tool)
            head.append(clean_line(call.name) or "(unnamed tool)", Style.combine([pal.tool, Style(bold=True)]))
            if call.kind and call.kind != "function":
                head.append(f" [{clean_line(call.kind)}]", pal.muted)
            if call.id:
                head.append(f"  {clean_line(call.id)}", pal.muted)
            out.extend(wrap(head, width, console))
            shown, note = clip(clean(pretty_arguments(call.arguments)), max_lines=MAX_ARGUMENT_LINES)
            args = _JSON_HIGHLIGHTER(_text(shown, text_style, base))
            out.extend(wrap(args, width, console, Text("      ", style=base)))
            if note:
                out.append(_text("      " + note, pal.muted, base))
        else:
            label = {"image": "▣ image", "file": "▤ file"}.get(block.type, f"▢ {clean_line(block.type) or 'block'}")
            desc = clean_line(block.text)
            out.extend(wrap(_text(f"{label}: {desc}" if desc else label, pal.muted, base), width, console,
                            Text("  ", style=base)))
    if not out:
        out.append(_text("  (empty message)", pal.muted, base))
    return out


def message_lines(rm: ReplayMessage, width: int, pal: Palette, console: Console, *, summary: bool = False) -> list[Text]:
    lines = [_role_header(rm, width, pal, summary)]
    if rm.overridden:
        why = clean(rm.override_reason) if rm.override_reason else "no reason given"
        lines.extend(wrap(_text(f"reason: {why}", pal.override, pal.base), width, console, Text("  ", style=pal.base)))
        if rm.original is not None:
            lines.append(_text("  original (replaced; kept for audit):", pal.override, pal.base))
            lines.extend(_content_lines(rm.original, width, pal, console,
                                        style=Style(dim=True, strike=True), max_lines=MAX_OVERRIDE_ORIGINAL_LINES))
        lines.append(_text("  replacement (what the replay sends):", pal.override, pal.base))
    lines.extend(_content_lines(rm.message, width, pal, console))
    lines.append(Text(style=pal.base, end=""))
    return lines


def compaction_lines(c: CompactionInfo, width: int, pal: Palette, console: Console, *, earlier: bool = False) -> list[Text]:
    base = pal.base
    out: list[Text] = []
    if earlier and c.applied:  # superseded: one rule line; y still copies its summary
        said = f"summarized {c.summarized_count:,} messages"
        if c.tokens_before is not None:
            said += f" · {c.tokens_before:,} tokens before"
        left = _text(f"━━ earlier compaction · {said} ", pal.marker, base)
        right = _text(f" seq {c.seq:,} ━━", pal.marker, base)
        fill = width - left.cell_len - right.cell_len
        if fill > 0:
            left.append("━" * fill, pal.marker)
        left.append_text(right)
        left.truncate(width, overflow="ellipsis")
        return [left]
    if not c.applied:
        title = (f"⚠ compaction skipped: first kept entry {short_id(c.first_kept_entry_id)} not found; "
                 f"full history kept")
        out.extend(wrap(_text(title, pal.warning, base), width - 12, console))
        out[0] = _right_aligned(out[0], _text(f"seq {c.seq:,}", pal.muted, base), width, base)
    else:
        left = _text("━━ compaction ", pal.marker, base)
        right = _text(f" seq {c.seq:,} ━━", pal.marker, base)
        fill = width - left.cell_len - right.cell_len
        if fill > 0:
            left.append("━" * fill, pal.marker)
        left.append_text(right)
        left.truncate(width)
        out.append(left)
    facts = [f"summarized {c.summarized_count:,} message{'s' if c.summarized_count != 1 else ''}"] if c.applied else []
    if c.tokens_before is not None:
        facts.append(f"{c.tokens_before:,} tokens before")
    if c.summary_version is not None:
        facts.append(f"summary v{c.summary_version}")
    if c.first_kept_entry_id:
        facts.append(f"first kept entry {short_id(c.first_kept_entry_id)}{'' if c.applied else ' (missing)'}")
    else:
        facts.append("nothing kept before it")
    out.extend(wrap(_text(" · ".join(facts), pal.muted if c.applied else pal.warning, base), width, console,
                    Text("  ", style=base)))
    shown, note = clip(clean(c.summary or "(empty summary)"), max_lines=MAX_MARKER_SUMMARY_LINES, max_chars=2_000)
    out.extend(wrap(_text(shown, Style(italic=True), base), width, console, _text("  │ ", pal.marker, base)))
    if note:
        out.append(_text("  │ " + note, pal.muted, base))
    out.append(Text(style=base, end=""))
    return out


def override_lines(o: OverrideMark, width: int, pal: Palette, console: Console) -> list[Text]:
    base = pal.base
    left = _text("⟲ content override ", pal.override, base)
    right = _text(f" seq {o.seq:,} ──", pal.override, base)
    fill = width - left.cell_len - right.cell_len
    if fill > 0:
        left.append("─" * fill, pal.override)
    left.append_text(right)
    left.truncate(width)
    why = clean(o.replacement.override_reason) if o.replacement.override_reason else "no reason given"
    out = [left]
    out.extend(wrap(_text(f"replaces entry {short_id(o.target_entry_id)} (the original stays for audit)",
                          pal.muted, base), width, console, Text("  ", style=base)))
    out.extend(wrap(_text(f"reason: {why}", pal.muted, base), width, console, Text("  ", style=base)))
    out.extend(wrap(_text("replacement:", pal.override, base), width, console, Text("  ", style=base)))
    shown, note = clip(clean(message_plain_text(o.replacement.message) or "(empty message)"),
                       max_lines=MAX_MARKER_SUMMARY_LINES, max_chars=2_000)
    out.extend(wrap(_text(shown, Style(), base), width, console, _text("  │ ", pal.override, base)))
    if note:
        out.append(_text("  │ " + note, pal.muted, base))
    out.append(Text(style=base, end=""))
    return out


def turn_line(t: TurnMark, width: int, pal: Palette) -> Text:
    verb = "started" if t.kind == "turn_start" else "ended"
    left = _text(f"──── turn {short_id(t.turn_id) or '?'} {verb} ", pal.turn, pal.base)
    right = _text(f" seq {t.seq:,} ──", pal.turn, pal.base)
    fill = width - left.cell_len - right.cell_len
    if fill > 0:
        left.append("─" * fill, pal.turn)
    left.append_text(right)
    left.truncate(width)
    return left


# ---------------------------------------------------------------------------------------------- raw rows

RAW_COLUMNS = ((8, "seq"), (16, "id"), (21, "type"), (16, "parent"), (19, "timestamp"))


def _cell(value: str, size: int, right: bool = False) -> str:
    value = clean_line(value)
    if len(value) > size:
        value = value[: size - 1] + "…"
    return value.rjust(size) if right else value.ljust(size)


def raw_header(width: int) -> str:
    """The column titles above the raw-entries view."""
    head = " ".join(_cell(name, size, right=(name == "seq")) for size, name in RAW_COLUMNS) + " data"
    return head[:width]


ENVELOPE_KEYS = ("type", "id", "parentId", "timestamp")


def compact_json(row: EntryRow) -> str:
    """The row's JSON on one line, without the envelope fields the columns already show (the raw text when it
    does not parse)."""
    if row.parsed is not None:
        rest = {k: v for k, v in row.parsed.items() if k not in ENVELOPE_KEYS}
        return json.dumps(rest, ensure_ascii=False, separators=(",", ":"))
    return row.data


def row_lines(row: EntryRow, width: int, pal: Palette) -> list[Text]:
    cells = [
        _cell(f"{row.seq:,}", 8, right=True), _cell(row.id, 16), _cell(row.type, 21),
        _cell(row.parent_id or "—", 16), _cell(short_time(row.timestamp) if row.timestamp else "—", 19),
    ]
    prefix = " ".join(cells) + " "
    room = max(4, width - len(prefix))
    preview = clean_line(compact_json(row))
    if len(preview) > room:
        preview = preview[: room - 1] + "…"
    bad = row.parsed is None
    line = _text(prefix, pal.error if bad else pal.base, pal.base)
    line.append(preview, pal.error if bad else pal.muted)
    line.truncate(width)
    if not bad:
        return [line]
    reason = _text(f"{' ' * 9}✗ parse error: {clean_line(row.parse_error or 'not a JSON object')}", pal.error, pal.base)
    reason.truncate(width, overflow="ellipsis")
    return [line, reason]


# ---------------------------------------------------------------------------------------------- copy


def message_plain_text(m: Message) -> str:
    """A message as plain text: its text, thinking and tool calls (what ``y`` copies)."""
    parts: list[str] = []
    for block in m.blocks:
        if block.type == "text" and block.text:
            parts.append(block.text)
        elif block.type == "thinking" and block.text:
            parts.append(f"[thinking]\n{block.text}")
        elif block.type == "toolCall" and block.tool_call is not None:
            parts.append(f"[tool call {block.tool_call.name}]\n{pretty_arguments(block.tool_call.arguments)}")
        elif block.text:
            parts.append(f"[{block.type}] {block.text}")
    return "\n\n".join(parts)


def item_copy_text(item: ViewItem) -> tuple[str, str]:
    """``(text, what)``: what ``y`` puts on the clipboard for this item, and a few words naming it."""
    p = item.payload
    if item.kind.startswith("native_"):
        from tui.widgets.native_blocks import native_copy_text

        return native_copy_text(item)
    if isinstance(p, ReplayMessage):
        what = "compaction summary" if item.kind == "summary" else f"message seq {p.seq:,}"
        return message_plain_text(p.message), what
    if isinstance(p, CompactionInfo):
        return p.summary, f"compaction summary (seq {p.seq:,})"
    if isinstance(p, TurnMark):
        return p.turn_id, f"turn id (seq {p.seq:,})"
    if isinstance(p, OverrideMark):
        return message_plain_text(p.replacement.message), f"override replacement (seq {p.seq:,})"
    if isinstance(p, EntryRow):
        return p.data, f"entry row seq {p.seq:,}"
    return "", "nothing"
