"""The query of the Sessions screen: the filter box (``/``, mounted the first time it is opened), the facet picker
(one work dir, project or channel, chosen in the command palette), the sort keys, and the line that says what is
shown (:func:`query_state`). :func:`query_for` turns the screen's choices into the list's query.

:func:`read_facets` runs in the screen's worker (it reads the store); :func:`facet_commands` builds the palette's
commands on the app's thread. Every label from data is escaped for the palette, which reads names as markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from tui.formatting import tildify
from tui.messages import FacetChoice
from tui.safe import markup_escape

if TYPE_CHECKING:
    from textual.command import SimpleCommand

    from store.mothx.sessiondir import SessionDir
    from tui.widgets.session_list import ListQuery

FILTER_DEBOUNCE_S = 0.25
"""Typing in the filter box re-queries after this pause."""

SORT_TITLES = {
    "last_active": "last active",
    "title": "title",
    "messages": "messages",
    "cwd": "work dir",
    "created": "created",
}

NATURAL_DESCENDING = {"last_active": True, "title": False, "messages": True, "cwd": False, "created": True}
"""The direction each sort key starts in (newest / biggest first; names A to Z)."""

FACET_TITLES = {"cwd": "work dir", "project_id": "project", "channel_type": "channel"}

Facet = tuple[str, str, str]
"""A facet filter: (field, value, label)."""


class FilterBar(Horizontal):
    """``/`` and the filter box; mounted the first time the filter is opened (Input is not on the start path)."""

    def compose(self) -> ComposeResult:
        from textual.widgets import Input

        yield Static("/", id="filter-prompt")
        yield Input(placeholder="filter: id, work dir, channel or any text of the session", id="filter")


def query_for(search: str, facet: Facet | None, sort_index: int, descending: bool) -> ListQuery:
    """The list's query: the search text, the facet, and the sort key at ``sort_index`` (cycling)."""
    from store.mothx.sessions import SessionFilter, SortKey
    from tui.widgets.session_list import ListQuery

    keys = list(SortKey)
    flt = SessionFilter(search=search.strip())
    if facet is not None:
        field, value, _label = facet
        changes: dict[str, Any] = {field: value}
        flt = replace(flt, **changes)
    return ListQuery(flt=flt, sort=keys[sort_index % len(keys)], descending=descending)


def query_state(query: ListQuery, facet: Facet | None, search: str, source: str = "") -> str:
    """The status line's account of the query: sort key and direction, facet, filter text (and, when other
    sources are offered, the ``source`` shown)."""
    arrow = "↓" if query.descending else "↑"
    parts = [f"sort: {SORT_TITLES.get(query.sort.value, query.sort.value)} {arrow}"]
    if facet is not None:
        parts.append(f"{FACET_TITLES.get(facet[0], facet[0])}: {facet[2]}")
    if search.strip():
        parts.append(f"/{search.strip()}")
    if source:
        parts.insert(0, f"source: {source} (a: next)")
    return "  ·  ".join(parts)


def read_facets(sd: SessionDir) -> list[FacetChoice]:
    """Every work dir, project and channel of the sessions, with counts where the store gives them (any thread)."""
    from store.mothx.sessions import facets

    found = facets(sd)
    choices: list[FacetChoice] = []
    for field, items in (
        ("cwd", getattr(found, "cwds", ())),
        ("project_id", getattr(found, "projects", ())),
        ("channel_type", getattr(found, "channel_types", ())),
    ):
        for item in items or ():
            value, label, count = facet_item(item)
            if not value:
                continue
            choices.append(FacetChoice(field, value, tildify(label) if field == "cwd" else label, count))
    return choices


def facet_commands(choices: list[FacetChoice], current: Facet | None,
                   set_facet: Callable[[Facet | None], None]) -> list[SimpleCommand]:
    """The palette's commands: "All sessions" while a facet is set, then one command per choice."""
    from textual.command import SimpleCommand

    commands: list[SimpleCommand] = []
    if current is not None:
        commands.append(SimpleCommand("All sessions", lambda: set_facet(None), "Remove the facet filter."))
    for choice in choices:
        noun = FACET_TITLES.get(choice.field, choice.field)
        name = f"{noun.capitalize()}: {choice.label}"
        if choice.count is not None:
            name += f"  ({choice.count:,})"
        commands.append(
            SimpleCommand(
                markup_escape(name),  # the palette reads names as markup; a path may hold brackets
                lambda c=choice: set_facet((c.field, c.value, c.label)),
                f"Show only sessions with this {noun}.",
            )
        )
    return commands


def facet_item(item: object) -> tuple[str, str, int | None]:
    """(value, label, count) of one facet entry (a ``FacetValue``, a ``(value, label)`` pair or a string)."""
    if isinstance(item, str):
        return item, item, None
    if isinstance(item, tuple):
        value = str(item[0]) if item else ""
        label = str(item[1]) if len(item) > 1 and item[1] else value
        return value, label, None
    value = str(getattr(item, "value", "") or "")
    label = str(getattr(item, "label", "") or value)
    count = getattr(item, "count", None)
    return value, label, count if isinstance(count, int) else None


__all__ = ["FACET_TITLES", "FILTER_DEBOUNCE_S", "NATURAL_DESCENDING", "SORT_TITLES", "Facet", "FilterBar",
           "facet_commands", "facet_item", "query_for", "query_state", "read_facets"]
