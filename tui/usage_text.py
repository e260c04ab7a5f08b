"""How usage figures read on screen and on the command line: token counts, cost, the label of a group, and a bar
drawn with block characters (eighths of a cell), shared by ``sessionscope usage`` and the Usage screen.

Pure functions of the store's :class:`store.usage.UsageRow` values; nothing here imports Textual. Labels are raw
data (a model name, a work dir): callers show them through the safe-text boundary (a ``str`` cell of a list, or
:func:`store.safetext.one_line`).
"""

from __future__ import annotations

from store.usage import Group, UsageRow

BLOCKS = " ▏▎▍▌▋▊▉█"
"""A cell filled by 0/8 … 8/8, left to right."""

KEY_TITLES: dict[str, str] = {"day": "DAY (UTC)", "session": "SESSION", "model": "MODEL", "cwd": "WORK DIR"}

UNKNOWN: dict[str, str] = {"day": "(no valid time)", "session": "(no session)", "model": "(no model)",
                           "cwd": "(session deleted)"}
"""The label of the group whose key is unknown (``""``), per view."""

AGENT_LABELS = {"": "mothx", "claude-code": "claude", "codex": "codex"}


def bar(value: int, largest: int, width: int) -> str:
    """``value`` of ``largest`` as a bar ``width`` cells wide at most (``""`` for nothing; a non-zero value shows
    at least a sliver)."""
    if width <= 0 or largest <= 0 or value <= 0:
        return ""
    eighths = max(1, round(min(value, largest) * width * 8 / largest))
    full, part = divmod(eighths, 8)
    return "█" * full + (BLOCKS[part] if part else "")


def tokens(n: int) -> str:
    """A token count with thousands separators: ``1,234,567``."""
    return f"{n:,}"


def short_tokens(n: int) -> str:
    """A token count in three digits or so: ``987``, ``12.3k``, ``4.56M``, ``1.2B``."""
    for scale, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if n >= scale:
            value = n / scale
            return f"{value:.3g}{suffix}" if value < 1000 else f"{value:,.0f}{suffix}"
    return str(n)


def cost(value: float | None, *, partial: bool = False) -> str:
    """USD: ``$0.0036``, ``$12.40``; ``""`` when there is no price; ``+`` after it when some tokens had none."""
    if value is None:
        return ""
    text = f"${value:,.4f}" if value < 1 else f"${value:,.2f}"
    return text + ("+" if partial else "")


def label(by: Group, row: UsageRow) -> str:
    """The group's key as shown: the key itself, or what an unknown one means in this view."""
    return row.key if row.key else UNKNOWN[by]


def agent_label(row: UsageRow) -> str:
    return AGENT_LABELS.get(row.agent, row.agent)


__all__ = ["AGENT_LABELS", "BLOCKS", "KEY_TITLES", "UNKNOWN", "agent_label", "bar", "cost", "label",
           "short_tokens", "tokens"]
