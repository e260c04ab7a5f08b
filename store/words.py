"""Counted nouns for the store's sentences (the UI has :func:`tui.formatting.plural`, the same rule)."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 record``, ``2,048 records`` (``many`` for irregular plurals: ``plural(2, "entry", "entries")``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters: cut at the last word boundary that keeps more than half of it,
    with ``…`` (never in the middle of a word unless one word is longer than half the room)."""
    if limit <= 1 or len(text) <= limit:
        return text if len(text) <= limit else "…"[:limit]
    head = text[: limit - 1]
    space = head.rstrip().rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:·-") + "…"
