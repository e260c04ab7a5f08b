"""What a headless app actually draws, for tests that look at the cells: the text of every segment of every
screen on the stack (bottom first), as the compositor renders it, and the notifications shown.

One helper for every test that asserts "no raw control or bidi character reaches the terminal".
"""

from __future__ import annotations

import re

from textual.app import App

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Characters that must never be drawn raw: C0 (but tab and newline), DEL, C1, bidi embeddings/overrides/isolates."""


def screen_lines(app: App[object]) -> list[str]:
    """Every line the compositor of each screen on the stack draws now (bottom screen first)."""
    lines: list[str] = []
    for screen in app.screen_stack:
        compositor = screen._compositor  # noqa: SLF001 - the cells as drawn, the only faithful source headless
        for strip in compositor.render_strips():
            lines.append("".join(segment.text for segment in strip))
    return lines


def segment_texts(app: App[object]) -> list[str]:
    """The text of every segment drawn on every screen of the stack (to find one raw character)."""
    texts: list[str] = []
    for screen in app.screen_stack:
        for strip in screen._compositor.render_strips():  # noqa: SLF001
            texts.extend(segment.text for segment in strip)
    return texts


def notification_texts(app: App[object]) -> list[str]:
    return [f"{n.title}\n{n.message}" for n in app._notifications]  # noqa: SLF001


def drawn_text(app: App[object]) -> str:
    """The screens' lines and the notifications, as one text."""
    return "\n".join([*screen_lines(app), *notification_texts(app)])


def assert_clean(app: App[object], where: str) -> str:
    """Fail when a drawn segment or a notification holds a raw control / bidi character; returns the text."""
    for text in (*segment_texts(app), *notification_texts(app)):
        found = UNSAFE.search(text)
        if found is not None:
            raise AssertionError(f"{where}: raw {found.group(0)!r} drawn in {text!r}")
    return drawn_text(app)
