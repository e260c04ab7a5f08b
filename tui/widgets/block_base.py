"""The pieces every transcript block renderer shares: the view item, the palette, text helpers, limits.

Both :mod:`tui.widgets.transcript_blocks` (mothx entries) and :mod:`tui.widgets.native_blocks` (Claude Code and
Codex records) import this module; neither imports the other's internals, so the two do not form a cycle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rich.console import Console
from rich.highlighter import JSONHighlighter
from rich.style import Style
from rich.text import Text

from store import times
from store.mothx.entries import CompactionInfo, EntryRow, ReplayMessage
from store.safetext import one_line, safe

# Section of an item's sort key: compactions before the replay window, the summary heading it, then the body.
SECTION_PREAMBLE = 0
SECTION_SUMMARY = 1
SECTION_BODY = 2

MAX_TEXT_LINES = 400        # source lines of one text part drawn before "… N more lines"
MAX_TEXT_CHARS = 40_000     # characters of one text part drawn before "… N more characters"
MAX_ARGUMENT_LINES = 14     # pretty-printed tool-call argument lines
MAX_MARKER_SUMMARY_LINES = 4
MAX_OVERRIDE_ORIGINAL_LINES = 6

_JSON_HIGHLIGHTER = JSONHighlighter()


@dataclass(frozen=True)
class TurnMark:
    """A ``turn_start`` / ``turn_end`` entry, drawn as a rule."""

    seq: int
    kind: str
    turn_id: str


@dataclass(frozen=True)
class OverrideMark:
    """A ``content_override`` entry, drawn at its own seq: which entry it replaces, why, and with what."""

    seq: int
    target_entry_id: str
    replacement: ReplayMessage


Payload = ReplayMessage | CompactionInfo | TurnMark | OverrideMark | EntryRow | object
"""Native transcripts add their own payloads (see :mod:`tui.widgets.native_sources`)."""

RULE_KINDS = frozenset({"turn_start", "turn_end", "native_quiet", "native_turn"})
"""Items drawn as one rule line that the cursor passes by."""


@dataclass(frozen=True)
class ViewItem:
    """One block of the view: a message, a marker or a raw row, ordered by ``key``."""

    key: tuple[int, int]    # (section, seq)
    kind: str  # "message" | "summary" | "compaction" | "earlier_compaction" | "override" | "turn_start" | "turn_end"
    #            | "row" | "native_…" (see tui.widgets.native_sources)
    payload: Payload
    rank: float = 0.0       # estimated entry rows of the session before this item (for the scrollbar)

    @property
    def seq(self) -> int:
        return self.key[1]

    @property
    def is_rule(self) -> bool:
        return self.kind in RULE_KINDS


@dataclass(frozen=True)
class Palette:
    """Rich styles for each part of a block (resolved from the view's component classes)."""

    base: Style
    user: Style
    assistant: Style
    tool: Style
    error: Style
    thinking: Style
    marker: Style
    warning: Style
    muted: Style
    override: Style
    system: Style
    turn: Style

    @classmethod
    def plain(cls) -> Palette:
        """Styles for tests and for a console without a theme."""
        n = Style()
        return cls(
            base=n, user=Style(bold=True, color="cyan"), assistant=Style(bold=True, color="green"),
            tool=Style(color="magenta"), error=Style(bold=True, color="red"), thinking=Style(dim=True, italic=True),
            marker=Style(color="yellow"), warning=Style(bold=True, color="yellow"), muted=Style(dim=True),
            override=Style(color="blue"), system=Style(color="yellow"), turn=Style(dim=True),
        )


# ---------------------------------------------------------------------------------------------- text helpers


def clean(text: object) -> str:
    """Data text safe to draw as a block (:func:`store.safetext.safe`): every control, bidi, separator and
    lone-surrogate character shown as a visible escape (``ESC`` → ``␛``, ``0x9b`` → ``\\x9b``), newlines kept
    (``\\r\\n`` and a lone ``\\r`` become one), tabs expanded. ``None`` is ``""``."""
    if text is None:
        return ""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    return safe(text, newlines=True, tabs=True).expandtabs(4)


def clean_line(text: object) -> str:
    """Data text safe to draw on one line: :func:`clean`, then newlines shown as spaces."""
    return clean(text).replace("\n", " ")


def clip(text: str, max_lines: int = MAX_TEXT_LINES, max_chars: int = MAX_TEXT_CHARS) -> tuple[str, str]:
    """``(shown, note)``: the text cut to at most ``max_lines`` lines / ``max_chars`` characters, and a note
    saying how much was left out ("" when nothing was)."""
    note = ""
    lines = text.split("\n")
    if len(lines) > max_lines:
        rest = len(lines) - max_lines
        text = "\n".join(lines[:max_lines])
        note = f"… {rest:,} more line{'s' if rest != 1 else ''}"
    if len(text) > max_chars:
        rest_chars = len(text) - max_chars
        text = text[:max_chars]
        note = note or f"… {rest_chars:,} more characters"
    return text, note


def short_id(entry_id: object) -> str:
    """An id made safe for one line (:func:`store.safetext.one_line`), cut to 16 characters."""
    shown = one_line(entry_id)
    return shown if len(shown) <= 16 else shown[:16] + "…"


def short_time(stamp: object) -> str:
    """An RFC 3339 time as ``2026-11-20 10:03:12`` UTC (:func:`store.times.show`); a time that does not parse
    is shown as itself, made safe for one line."""
    return one_line(times.show(stamp, times.SECONDS))


def pretty_arguments(arguments: str) -> str:
    """Tool-call arguments as indented JSON (the stored text when it is not JSON)."""
    if not arguments.strip():
        return "{}"
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def wrap(text: Text, width: int, console: Console, prefix: Text | str = "") -> list[Text]:
    """``text`` wrapped to ``width`` cells, every line starting with ``prefix`` (a hanging indent)."""
    head = prefix if isinstance(prefix, Text) else Text(prefix, style=text.style)
    avail = max(8, width - head.cell_len)
    out: list[Text] = []
    for line in text.wrap(console, avail, overflow="fold"):
        row = head.copy()
        row.append_text(line)
        out.append(row)
    return out or [head.copy()]


def _text(s: str, style: Style, base: Style) -> Text:
    t = Text(style=base, no_wrap=False, end="")
    t.append(s, style)
    return t


def _right_aligned(left: Text, right: Text, width: int, base: Style) -> Text:
    gap = width - left.cell_len - right.cell_len
    if gap < 2:
        row = left.copy()
        row.append("  ")
        row.append_text(right)
        row.truncate(width, overflow="ellipsis")
        return row
    row = left.copy()
    row.append(" " * gap, base)
    row.append_text(right)
    return row
