"""The UI half of the safe-text boundary: text from data becomes Rich ``Text`` (never markup) after
:mod:`store.safetext` has made its control characters visible.

* :func:`data_text` / :func:`data_line` build a ``Text`` from a data string (a block keeps newlines and tabs,
  a line collapses them), optionally styled. ``Text`` is never parsed as markup, so ``[/]``,
  ``[link=file:///etc/passwd]`` or ``[@click=app.quit]`` in a title are just characters.
* :func:`markup_escape` is for the few places that only take markup (a palette help string): the safe text,
  with every ``[`` escaped.
* :func:`notify` posts a notification whose message and title are data: made safe and never read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text

from store.safetext import one_line, safe

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel
    from textual.widget import Widget


def data_text(value: object, style: str | Style = "") -> Text:
    """A multi-line ``Text`` of ``value`` (newlines and tabs kept, every other control shown as an escape)."""
    return Text(safe(value, newlines=True, tabs=True), style=style)


def data_line(value: object, style: str | Style = "") -> Text:
    """A one-line ``Text`` of ``value`` (whitespace collapsed, controls shown as escapes)."""
    return Text(one_line(value), style=style)


def markup_escape(value: object) -> str:
    """``value`` as safe one-line text with markup escaped, for an API that only takes markup."""
    from textual.markup import escape

    return escape(one_line(value))


def notify(
    node: App[object] | Widget,
    message: object,
    *,
    title: object = "",
    severity: SeverityLevel = "information",
    timeout: float | None = None,
) -> None:
    """``node.notify`` with ``message`` and ``title`` made safe and never parsed as markup."""
    node.notify(
        safe(message, newlines=True),
        title=one_line(title),
        severity=severity,
        timeout=timeout,
        markup=False,
    )
