"""The source switch of the Sessions screen: which lists it offers (the mothx sessions of ``sessions.db``, then
each agent with captured Claude Code or Codex sessions), what they are called, and the status line of a
captured agent's list. The screen holds the state; these are the plain rules it follows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from tui.widgets.native_session_list import AgentSessionList

SOURCE_MOTHX = "mothx"
AGENT_ORDER = ("claude-code", "codex")
SOURCE_TITLES = {SOURCE_MOTHX: "mothx sessions", "claude-code": "Claude Code", "codex": "Codex"}
MOTHX_ONLY_ACTIONS = frozenset({"cycle_sort", "reverse_sort", "pick_facet", "session_runs", "delete_sessions",
                                "toggle_pin", "set_project", "rename_session"})
"""Keys that act on mothx sessions only (dimmed while a captured agent's sessions are listed)."""


@dataclass
class AgentsCounted(Message):
    """How many captured sessions each agent has (``cycle``: the user asked for the next source)."""

    counts: dict[str, int]
    cycle: bool


def other_sources(counts: dict[str, int] | None) -> list[str]:
    """The agents that have captured sessions: Claude Code and Codex first, then any other by name."""
    counts = counts or {}
    return [a for a in AGENT_ORDER if counts.get(a)] + sorted(a for a in counts if a not in AGENT_ORDER and counts[a])


def agent_status(agent_list: AgentSessionList, source: str) -> tuple[str, str]:
    """The status line (count, query text) while the captured sessions of ``source`` are listed."""
    title = SOURCE_TITLES.get(source, source)
    every = agent_list.agent_total
    if not agent_list.fetched:
        count = f"Reading {title} sessions…"
    elif agent_list.error:
        count = f"{title} sessions unavailable"
    elif agent_list.search:
        shown = agent_list.count_text()
        count = f"{shown} of {every:,} (filtered)" if every is not None else f"{shown} (filtered)"
    else:
        n = agent_list.total if agent_list.total is not None else every
        count = (f"{n:,} {title} session{'' if n == 1 else 's'}" if n is not None
                 else f"{agent_list.count_text()} {title} sessions")
    parts = [f"source: {title} (a: next)", "captured checkpoints, newest last record first"]
    if agent_list.search:
        parts.append(f"/{agent_list.search}")
    return count, "  ·  ".join(parts)


__all__ = ["AGENT_ORDER", "MOTHX_ONLY_ACTIONS", "SOURCE_MOTHX", "SOURCE_TITLES", "AgentsCounted", "agent_status",
           "other_sources"]
