"""The two title lines of the native transcript screen (:mod:`tui.screens.native_transcript`): whose transcript
it is, and what it holds."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from store.agents.native import NativeSession, NativeTranscript, SubAgentLink
from store.safetext import one_line
from tui.formatting import plural, tildify
from tui.widgets.native_sources import agent_title


def native_title(session: NativeSession, t: NativeTranscript | None, link: SubAgentLink | None,
                 follow: str = "") -> Text:
    """Two lines: whose transcript this is, and what it holds."""
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    if t is None:
        out.append("(no transcript)", Style(bold=True))
        return out
    out.append(one_line(agent_title(session.agent)), Style(bold=True))
    if link is not None:
        out.append(f"  ·  sub-agent {one_line(link.agent_id) or '?'}", Style(bold=True))
        out.append(f" of {one_line(session.session_id) or '?'}", Style(dim=True))
        where = f"spawned by Task at line {link.task_line:,}" if link.task_call_id else "no Task call names it"
        out.append(f"  ·  {where}")
    else:
        out.append(f"  ·  {one_line(session.session_id or t.path)}", Style(dim=True))
    if t.cwd:
        out.append(f"  ·  {one_line(tildify(t.cwd))}")
    if t.version:
        out.append(f"  ·  version {one_line(t.version)}", Style(dim=True))
    out.append("\n")
    out.append(plural(t.records, "record"))
    out.append(f"  ·  {plural(len(t.tool_pairs), 'tool call')}")
    if t.interrupted:
        out.append(f"  ·  ⚠ {len(t.interrupted)} interrupted", Style(bold=True, color="yellow"))
    if t.forks:
        branches = sum(len(f.branches) for f in t.forks)
        out.append(f"  ·  ⑂ {plural(len(t.forks), 'rewind')} ({branches} branches)", Style(color="magenta"))
    if t.compactions:
        out.append(f"  ·  {plural(len(t.compactions), 'compaction')}")
    if t.summaries:
        dangling = sum(1 for s in t.summaries if s.dangling)
        n = len(t.summaries)
        out.append(f"  ·  {n:,} summar{'y' if n == 1 else 'ies'}" + (f" ({dangling} dangling)" if dangling else ""))
    if link is None and session.subagents:
        out.append(f"  ·  {plural(len(session.subagents), 'sub-agent')}")
    if t.incomplete_turns:
        out.append(f"  ·  ⚠ {plural(len(t.incomplete_turns), 'turn')} never completed",
                   Style(bold=True, color="yellow"))
    if t.unreadable:
        out.append(f"  ·  ✗ {len(t.unreadable)} unreadable", Style(bold=True, color="red"))
    if follow:
        out.append(f"  ·  {one_line(follow)}", Style(dim=True))
    return out
