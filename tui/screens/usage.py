"""The Usage screen: tokens (and cost, where a price table is configured) per day, session, model or work dir.

Top: a sparkline of total tokens per UTC day (every day from the first to the last, at most
:data:`SPARK_DAYS`, a day without requests at zero) with its span and peak. Then
:class:`~tui.widgets.usage_list.UsageList`: one group per line with a bar of its tokens (block characters, as
wide as its share of the largest group), the totals and the kinds of tokens. Below: the selected group in full.
Nothing here runs SQL: the list's source calls :func:`store.usage.usage` in the list's worker (one ``GROUP BY``
per view); the captured transcripts' records are read once per screen (``r`` reads them again).

Keys (the registry's ``usage`` scope): ``b`` switches the grouping (day → session → model → work dir; ``1``–``4``
pick one), ``a`` the source (all → mothx ``request_stats`` → captured transcripts), ``r`` re-reads, ``c`` copies
the selected key; ``enter`` on a session row opens its transcript (a mothx session, or a captured Claude Code /
Codex one); on any other row it says why it cannot.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Sparkline, Static

from store import times
from store.usage import GROUPS, SOURCES, Group, Source, UsageReport, daily_series
from tui import actions
from tui import usage_text as ut
from tui.clipboard import copy
from tui.context import services, store
from tui.safe import data_line, notify
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar
from tui.widgets.usage_list import UsageData, UsageLine, UsageList

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

SPARK_DAYS = 90
"""Days the sparkline spans at most (the latest ones)."""

GROUP_NAMES: dict[str, str] = {"day": "day", "session": "session", "model": "model", "cwd": "work dir"}
SOURCE_NAMES: dict[str, str] = {"all": "all sources", "mothx": "mothx request_stats",
                                "captured": "captured transcripts"}


def caption_text(daily: UsageReport | None, series: list[int]) -> Text:
    """Two lines: ``Tokens per day (UTC)`` and ``2026-10-06 … 2026-11-20 · peak 30.1M``: what the sparkline
    spans."""
    out = Text()
    out.append("Tokens per day (UTC)\n", style="bold")
    days = [r.key for r in daily.rows if r.key] if daily is not None else []
    if not days or not series:
        out.append("no requests", style="dim")
        return out
    last = date.fromisoformat(days[-1]) if _is_day(days[-1]) else None
    first = (last - timedelta(days=len(series) - 1)).isoformat() if last is not None else days[0]
    out.append(f"{first} … {days[-1]} · peak {ut.short_tokens(max(series))}", style="dim")
    return out


def _is_day(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def detail_text(line: UsageLine | None, priced: bool) -> Text:
    """The selected group in full: every data string drawn as plain text (never markup)."""
    if line is None:
        return Text("No group is selected.", style="dim")
    r = line.row
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append_text(data_line(ut.label(line.by, r), "bold"))
    if line.title:
        out.append("  ")
        out.append_text(data_line(line.title))
    if line.by == "session":
        out.append(f"  {ut.agent_label(r)}", style="dim")
        if r.cwd:
            out.append("  ")
            out.append_text(data_line(r.cwd))
        if not r.session_exists:
            out.append("  session deleted (its request_stats rows remain)", style="yellow")
    out.append("\n")
    out.append(f"{ut.tokens(r.requests)} requests · {ut.tokens(r.total_tokens)} tokens: "
               f"{ut.tokens(r.input_tokens)} input, {ut.tokens(r.output_tokens)} output, "
               f"{ut.tokens(r.cache_write_tokens)} cache write, {ut.tokens(r.cache_read_tokens)} cache read")
    if priced:
        out.append(f" · {ut.cost(r.cost) or 'no price'}")
        if r.unpriced:
            out.append(f" ({ut.tokens(r.unpriced)} tokens without a price)", style="dim")
    out.append("\n")
    out.append("from ", style="dim")
    out.append_text(data_line(times.show(r.first_at, unset="?")))
    out.append(" to ", style="dim")
    out.append_text(data_line(times.show(r.last_at, unset="?")))
    out.append(" UTC", style="dim")
    out.append(f"  ({', '.join(r.sources)})", style="dim")
    if r.damaged:
        out.append(f"  {r.damaged} damaged cell{'' if r.damaged == 1 else 's'} read as 0", style="red")
    return out


class UsageScreen(Screen[None]):
    """Tokens per day, session, model or work dir, with bars and a sparkline of the days."""

    ACTION_SCOPE: ClassVar[str] = "usage"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Usage screen"
    AUTO_FOCUS = "UsageList"

    DEFAULT_CSS = """
    UsageScreen { layout: vertical; }
    UsageScreen #usage-chart { height: 3; padding: 0 1; background: $surface; border-bottom: solid $panel; }
    UsageScreen #usage-caption { width: 44; height: 2; }
    UsageScreen #usage-spark { width: 1fr; height: 2; }
    UsageScreen #usage { height: 1fr; min-height: 5; }
    UsageScreen #usage-detail { height: 4; padding: 0 1; background: $surface; border-top: solid $panel;
                                text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, by: Group = "day", source: Source = "all") -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.data: UsageData | None = None
        self.by: Group = by
        self.source: Source = source

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Usage")
        with Horizontal(id="usage-chart"):
            yield Static(caption_text(None, []), id="usage-caption")
            yield Sparkline([], id="usage-spark")
        yield UsageList(id="usage")
        yield Static(detail_text(None, False), id="usage-detail")
        yield StatusBar(id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        sd = store(self)
        self.query_one(StatusBar).count = "Opening the session directory…" if sd is None else "Adding up…"
        if sd is not None:
            self.attach(sd)

    def attach(self, sd: SessionDir) -> None:
        from store.usage import load_prices

        self.sd = sd
        prices = load_prices()
        for problem in prices.problems:
            notify(self, problem, title="Price table", severity="warning", timeout=8)
        self.data = UsageData(sd, prices)
        self._show()

    @property
    def usage_list(self) -> UsageList:
        return self.query_one(UsageList)

    def _show(self, *, keep_cursor: bool = False) -> None:
        if self.data is None:
            return
        self.query_one(StatusBar).query_text = f"by {GROUP_NAMES[self.by]} · {SOURCE_NAMES[self.source]}"
        self.usage_list.show(self.data, self.by, self.source, keep_cursor=keep_cursor)

    # --- list events ------------------------------------------------------------------------------------------

    @on(RowList.Loaded, "#usage")
    @on(RowList.Failed, "#usage")
    def _loaded(self, message: RowList.Loaded | RowList.Failed) -> None:
        lst = self.usage_list
        src = lst.usage_source
        bar = self.query_one(StatusBar)
        report = src.report if src is not None else None
        daily = src.daily if src is not None else None
        series = daily_series(daily, days=SPARK_DAYS) if daily is not None else []
        self.query_one("#usage-spark", Sparkline).data = series or [0]
        self.query_one("#usage-caption", Static).update(caption_text(daily, series))
        if lst.error and not lst.rows:
            bar.count = lst.error
        elif report is not None:
            groups = len(report.rows)
            noun = {"day": "day", "session": "session", "model": "model", "cwd": "work dir"}[self.by]
            text = (f"{groups} {noun}{'' if groups == 1 else 's'} · {ut.short_tokens(report.totals.total_tokens)} "
                    f"tokens · {ut.tokens(report.totals.requests)} requests")
            if report.priced:
                text += f" · {ut.cost(report.totals.cost, partial=report.totals.unpriced > 0) or 'no price'}"
            bar.count = text
            problems = len(report.problems)
            where = f"by {GROUP_NAMES[self.by]} · {SOURCE_NAMES[self.source]}"
            bar.query_text = where + (f" · {problems} problem{'' if problems == 1 else 's'}" if problems else "")
        self._detail(lst.selected)

    @on(RowList.Highlighted, "#usage")
    def _highlighted(self, message: RowList.Highlighted) -> None:
        self._detail(message.row)

    def _detail(self, line: UsageLine | None) -> None:
        priced = self.data is not None and self.data.prices.configured
        self.query_one("#usage-detail", Static).update(detail_text(line, priced))

    @on(RowList.Selected, "#usage")
    def _opened(self, message: RowList.Selected) -> None:
        line: UsageLine = message.row
        self.open_line(line)

    def open_line(self, line: UsageLine) -> None:
        """Open the transcript of a session row; say why not for any other row."""
        if line.by != "session":
            notify(self, f"A {GROUP_NAMES[line.by]} row has no transcript: press b to group by session.",
                   severity="warning")
            return
        row = line.row
        if not row.key:
            notify(self, "These requests name no session.", severity="warning")
            return
        if row.agent:
            if self.sd is None:
                return
            from store.agents.native_open import NativeRef
            from tui.screens.native_transcript import NativeTranscriptScreen

            self.app.push_screen(NativeTranscriptScreen(self.sd, NativeRef(row.agent, row.key)))
            return
        if not row.session_exists:
            notify(self, "This session was deleted: only its request_stats rows remain.", severity="warning")
            return
        app = services(self)
        if app is None:
            raise RuntimeError("the Usage screen opens transcripts through the Sessionscope app")
        app.open_transcript(row.key)

    # --- actions ----------------------------------------------------------------------------------------------

    def action_cycle_group(self) -> None:
        self.group_by(GROUPS[(GROUPS.index(self.by) + 1) % len(GROUPS)])

    def action_group(self, by: str) -> None:
        if by not in GROUPS:
            notify(self, f"Unknown grouping: {by}.", severity="error")
            return
        self.group_by(by)

    def group_by(self, by: Group) -> None:
        if self.data is None:
            notify(self, "No session directory is open.", severity="warning")
            return
        self.by = by
        self._show()

    def action_cycle_source(self) -> None:
        if self.data is None:
            notify(self, "No session directory is open.", severity="warning")
            return
        self.source = SOURCES[(SOURCES.index(self.source) + 1) % len(SOURCES)]
        self._show()

    def action_refresh(self) -> None:
        if self.sd is None:
            notify(self, "No session directory is open.", severity="warning")
            return
        from store.usage import load_prices

        self.data = UsageData(self.sd, load_prices())
        self._show(keep_cursor=True)

    def action_copy_key(self) -> None:
        line = self.usage_list.selected
        if line is None or not line.row.key:
            notify(self, "The selected row has no key to copy.", severity="warning")
            return
        copy(self, line.row.key, f"'{line.row.key}'")


__all__ = ["UsageScreen", "caption_text", "detail_text"]
