"""The Sessions screen: every session of the directory, filtered, sorted, opened as a transcript.

Its source switch (``a``) cycles the mothx sessions of ``sessions.db`` and the captured Claude Code and Codex
sessions (checkpoints, :mod:`store.agents.native_catalog`); only sources that have sessions are offered, and the key is
hidden while there are none. The captured lists are read only when shown (after the mothx list's first rows),
so the mothx list starts as fast as before. A directory with no mothx sessions but captured ones opens on them.

Beside it: :mod:`tui.screens.session_query` (the filter box, facets, sort keys and the query line),
:mod:`tui.screens.session_sources` (which sources are offered, and a captured list's status line) and
:mod:`tui.screens.session_manage` (delete, pin, project and rename, on :class:`tui.repair_flow.RepairFlow`'s path).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from tui import actions
from tui.clipboard import copy
from tui.context import ShowsSessionList, services
from tui.formatting import describe_error
from tui.lifecycle import ReportsWorkerFailures
from tui.live import LiveChanged
from tui.messages import FacetsLoaded, UnfilteredCounted, WorkerFailed
from tui.repair_flow import EVERY_ERROR, FlowWords, RepairFlow
from tui.safe import data_line, notify
from tui.screens import session_manage
from tui.screens.session_query import (
    FILTER_DEBOUNCE_S,
    NATURAL_DESCENDING,
    Facet,
    FilterBar,
    facet_commands,
    query_for,
    query_state,
    read_facets,
)
from tui.screens.session_sources import (
    MOTHX_ONLY_ACTIONS,
    SOURCE_MOTHX,
    SOURCE_TITLES,
    AgentsCounted,
    agent_status,
    other_sources,
)
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.session_list import ListQuery, SessionList, default_query
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from textual.widgets import Input

    from store.agents.native_catalog import AgentSessionSummary
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionPage, SessionSummary
    from tui.widgets.native_session_list import AgentSessionList


class SessionsScreen(ShowsSessionList, RepairFlow, ReportsWorkerFailures, Screen[None]):
    """Sessions: a Line-API list of every session, with a live filter, sort keys and facets."""

    CSS_PATH = Path(__file__).with_name("sessions.tcss")  # absolute: subclasses in other folders keep it
    ACTION_SCOPE: ClassVar[str] = "sessions"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Sessions screen"
    HELP_LEGEND: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("*", "Pinned", "The session is pinned in mothx (session_metadata.pinned); the mark only shows it, nothing here pins."),
    )
    AUTO_FOCUS = "SessionList"
    REPAIR_GROUP: ClassVar[str] = "sessions-manage"  # delete, pin, project, rename: tui.screens.session_manage
    REPAIR_WORDS: ClassVar[FlowWords] = session_manage.WORDS
    REPAIR_REFUSALS: ClassVar[tuple[str, ...]] = EVERY_ERROR

    def __init__(self) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.search = ""
        self.facet: Facet | None = None
        self.sort_index = 0
        self.descending = True
        self.total: int | None = None
        self.unfiltered_total: int | None = None
        self._debounce: Timer | None = None
        self.source = SOURCE_MOTHX
        self.agent_counts: dict[str, int] | None = None  # None until counted (after the first mothx rows)
        self._counting = False
        self._auto_source = True  # open on captured sessions once, when the directory has no mothx sessions

    # --- layout -----------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # Four one-line-drawing widgets: the notice and the filter box are mounted only when needed.
        yield AppHeader(section="Sessions")
        yield SessionList(id="sessions")
        yield StatusBar(id="status")
        yield KeyBar()

    async def on_mount(self) -> None:
        app = services(self)
        if app is not None and app.sd is None:
            await app.wait_opened()  # the store opening: the first frame then has its rows
        sd = app.sd if app is not None else None
        if app is not None and sd is not None:
            # The store opened before this screen mounted: take the first window read with it, if it is its.
            self.attach(sd, first_page=app.take_first_page(sd))
        else:
            self._set_count("Opening the session directory…")

    # --- store ------------------------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the store and the query (another directory is being opened)."""
        self.sd = None
        self.search = ""
        self.facet = None
        self.sort_index = 0
        self.descending = True
        self.total = None
        self.unfiltered_total = None
        for bar in self.query("#filter-bar"):
            bar.display = False
        filter_input = self._filter_input()
        if filter_input is not None:
            with filter_input.prevent(filter_input.Changed):
                filter_input.value = ""
        self.query_one(SessionList).detach()
        self.agent_counts = None
        self._auto_source = True
        if self.source != SOURCE_MOTHX:
            self._show_source(SOURCE_MOTHX)
        self._set_count("Opening the session directory…")
        self.query_one(StatusBar).query_text = ""

    def attach(self, sd: SessionDir, first_page: SessionPage | None = None) -> None:
        """Show the sessions of ``sd`` (called once the store is open). ``first_page`` is the first window of
        the default query, already read by the app; it is used only if this screen shows that query."""
        self.sd = sd
        text = " ⚠ " + "  ·  ".join(sd.notices) if sd.notices else ""
        existing = self.query("#notice")
        if existing:
            existing.first(Static).update(data_line(text))
            existing.first().display = bool(text)
        elif text:
            self.mount(Static(data_line(text), id="notice", markup=False), after=self.query_one(AppHeader))
        self._run_query(keep_position=False, first_page=first_page)

    def current_query(self) -> ListQuery:
        return query_for(self.search, self.facet, self.sort_index, self.descending)

    def _is_filtered(self) -> bool:
        return bool(self.search.strip()) or self.facet is not None

    def _run_query(self, *, keep_position: bool, first_page: SessionPage | None = None) -> None:
        if self.sd is None:
            return
        query = self.current_query()
        if query != default_query():
            first_page = None
        session_list = self.query_one(SessionList)
        session_list.empty_text = "No session matches the filter." if self._is_filtered() else "This directory has no sessions."
        session_list.show(self.sd, query, keep_position=keep_position, first_page=first_page)
        self._show_query_state(query)
        if self._is_filtered() and (self.unfiltered_total is None or not keep_position):
            self._count_all(self.sd)

    @work(thread=True, exclusive=True, group="sessions-count", exit_on_error=False, description="Count sessions")
    def _count_all(self, sd: SessionDir) -> None:
        # A failure is notified by the app (ReportsWorkerFailures); the status line then omits "of M".
        from store.mothx.sessions import count_sessions

        self.post_message(UnfilteredCounted(count_sessions(sd)))

    @on(UnfilteredCounted)
    def _unfiltered_counted(self, message: UnfilteredCounted) -> None:
        self.unfiltered_total = message.total
        self._show_count()

    @on(RowList.Loaded, "#sessions")
    def _counted(self, message: RowList.Loaded) -> None:
        total = message.control.total
        if total is None:
            return
        self.total = total
        app = services(self)
        if app is not None:  # a test host has no integrity check
            self.call_after_refresh(app.start_integrity_check)  # after the first rows are painted
        if not self._is_filtered():
            self.unfiltered_total = total
        if self.agent_counts is None and self.sd is not None:
            self.call_after_refresh(self._count_sources)  # after the first rows: the mothx list stays as fast
        if self.source == SOURCE_MOTHX:
            self._show_count()

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        """A worker failed outside its own error path (the app notifies it): what it left "…ing" ends here."""
        if message.group == "sessions-sources":
            self._counting = False
        elif message.group == "sessions-agent-list" and self.source != SOURCE_MOTHX:
            self._agent_list().show_message(f"✗ {message.reason}")
            self._show_agent_status()
        elif message.group == "row-list-page" and self.source == SOURCE_MOTHX and self.total is None:
            self._set_count(message.reason)

    @on(RowList.Failed, "#sessions")
    def _list_failed(self, message: RowList.Failed) -> None:
        self._set_count(message.error)
        notify(self, message.error, title="Cannot read sessions", severity="error")

    def _show_count(self) -> None:
        if self.source != SOURCE_MOTHX:
            return
        total = self.total
        if total is None:
            return
        noun = "session" if total == 1 else "sessions"
        if self._is_filtered():
            of = f" of {self.unfiltered_total:,}" if self.unfiltered_total is not None else ""
            self._set_count(f"{total:,}{of} (filtered)")
        else:
            self._set_count(f"{total:,} {noun}")

    def _set_count(self, text: str) -> None:
        self.query_one(StatusBar).count = text

    def _show_query_state(self, query: ListQuery) -> None:
        if self.source != SOURCE_MOTHX:
            return
        source = SOURCE_TITLES[SOURCE_MOTHX] if self._other_sources() else ""
        self.query_one(StatusBar).query_text = query_state(query, self.facet, self.search, source)

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # cycle_source is always offered: a capture made while the app is open shows up when it is pressed
        # (it counts the captured sessions again, and says so when there are none).
        if action in MOTHX_ONLY_ACTIONS and self.source != SOURCE_MOTHX:
            return None
        sd = self.sd
        return actions.check_write(action, sd is not None and sd.writable)

    def why_disabled(self, action: str) -> str:
        """The one line a dimmed key of this screen says when pressed."""
        if action in MOTHX_ONLY_ACTIONS and self.source != SOURCE_MOTHX:
            spec = actions.spec_for_action(action, "sessions")
            what = spec.description if spec is not None else action
            agent = SOURCE_TITLES.get(self.source, self.source)
            return f"{what} works on mothx sessions only: the {agent} list is sorted by its last record (a switches the list)."
        return ""

    def _filter_input(self) -> Input | None:
        found = self.query("#filter")
        return found.first() if found else None  # type: ignore[return-value]

    async def action_filter(self) -> None:
        bar = self.query("#filter-bar")
        if not bar:
            await self.mount(FilterBar(id="filter-bar"), before=self.query_one(SessionList))
        else:
            bar.first().display = True
        filter_input = self._filter_input()
        if filter_input is not None:
            filter_input.focus()

    def action_clear_filter(self) -> None:
        had_filter = self._is_filtered()
        for bar in self.query("#filter-bar"):
            bar.display = False
        self._active_list().focus()
        if had_filter:
            self.facet = None
            self.search = ""
            filter_input = self._filter_input()
            if filter_input is not None:
                with filter_input.prevent(filter_input.Changed):
                    filter_input.value = ""
            self._run_query(keep_position=False)
            if self.source != SOURCE_MOTHX:
                self._agent_list().set_search("")
                self._show_agent_status()

    @property
    def filter_visible(self) -> bool:
        bar = self.query("#filter-bar")
        return bool(bar) and bool(bar.first().display)

    def action_cycle_sort(self) -> None:
        from store.mothx.sessions import SortKey

        self.sort_index += 1
        key = list(SortKey)[self.sort_index % len(SortKey)]
        self.descending = NATURAL_DESCENDING.get(key.value, True)
        self._run_query(keep_position=False)

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self._run_query(keep_position=False)

    def action_refresh(self) -> None:
        self.unfiltered_total = None if self._is_filtered() else self.unfiltered_total
        self._run_query(keep_position=True)
        if self.source != SOURCE_MOTHX and self.sd is not None:
            self._read_agent_sessions(self.sd, self.source)
        if self.sd is not None:
            self._count_sources()

    def action_pick_facet(self) -> None:
        if self.sd is not None:
            self._load_facets(self.sd)

    @work(thread=True, exclusive=True, group="sessions-facets", exit_on_error=False, description="Read facets")
    def _load_facets(self, sd: SessionDir) -> None:
        try:
            choices = read_facets(sd)
        except Exception as exc:  # noqa: BLE001 - shown as one line, never a traceback
            self.app.call_from_thread(notify, self, describe_error(exc), title="Cannot read facets", severity="error")
            return
        self.post_message(FacetsLoaded(choices))

    @on(FacetsLoaded)
    def _facets_loaded(self, message: FacetsLoaded) -> None:
        commands = facet_commands(message.choices, self.facet, self.set_facet)
        if not commands:
            notify(self, "There is nothing to filter by: no work dirs, projects or channels.")
            return
        self.app.search_commands(commands, placeholder="Show only one work dir, project or channel…")

    def set_facet(self, facet: Facet | None) -> None:
        self.facet = facet
        self._run_query(keep_position=False)

    # --- filter box -------------------------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(FILTER_DEBOUNCE_S, lambda: self._apply_filter(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "filter":
            return
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        self._apply_filter(event.value)
        self._active_list().focus()

    def _apply_filter(self, value: str) -> None:
        self._debounce = None
        if value.strip() == self.search.strip():
            return
        self.search = value
        self._run_query(keep_position=False)
        if self.source != SOURCE_MOTHX:
            self._agent_list().set_search(value)
            self._show_agent_status()

    @property
    def filter_pending(self) -> bool:
        """True while a typed filter waits for its debounce pause."""
        return self._debounce is not None

    # --- runs and live updates --------------------------------------------------------------------------------

    def action_copy(self) -> None:
        """``y``: the mothx session's id, or the captured session's resume command (the agent's own)."""
        if self.source == SOURCE_MOTHX:
            row = self.query_one(SessionList).selected
            if row is None:
                notify(self, "No session is selected.", severity="warning")
                return
            copy(self, row.id, f"the session id {row.id}")
            return
        from store.agents.native_catalog import resume_command

        agent_row = self._agent_list().selected
        if agent_row is None:
            notify(self, "No session is selected.", severity="warning")
            return
        command = resume_command(agent_row.agent, agent_row.agent_session_id, agent_row.cwd)
        if not command:
            copy(self, agent_row.agent_session_id, f"the session id {agent_row.agent_session_id}")
            return
        copy(self, command, f"'{command}'")

    def action_session_runs(self) -> None:
        row = self.query_one(SessionList).selected
        if row is None or self.sd is None:
            notify(self, "No session is selected.", severity="warning")
            return
        from tui.screens.runs import RunsScreen

        self.app.push_screen(RunsScreen(session_id=row.id))

    # --- session management (tui.screens.session_manage: fenced, previewed repairs) -----------------------------

    def action_delete_sessions(self) -> None:
        session_manage.begin(self, "delete")

    def action_toggle_pin(self) -> None:
        session_manage.begin(self, "pin")

    def action_set_project(self) -> None:
        session_manage.begin(self, "project")

    def action_rename_session(self) -> None:
        session_manage.begin(self, "rename")

    @property
    def _manage_busy(self) -> bool:
        """A session change is being prepared or applied (:attr:`RepairFlow.repair_busy`)."""
        return self.repair_busy

    def action_session_forks(self) -> None:
        if self.source != SOURCE_MOTHX:
            notify(self, "Forks are mothx sessions' (sessions.db): switch the list back with the source key.",
                   severity="warning")
            return
        row = self.query_one(SessionList).selected
        if row is None or self.sd is None:
            notify(self, "No session is selected.", severity="warning")
            return
        from tui.screens.forks import ForksScreen

        self.app.push_screen(ForksScreen(session_id=row.id))

    def action_open_search(self) -> None:
        """Ranked full-text search (the Search screen), starting from the filter's text."""
        from tui.screens.search import SearchScreen

        self.app.push_screen(SearchScreen(self.search.strip()))

    def on_live_changed(self, message: LiveChanged) -> None:
        """Another process changed sessions: re-read the affected rows in place (everything: the windows)."""
        session_list = self.query_one(SessionList)
        if message.everything:
            session_list.reload()
        else:
            session_list.refresh_rows(message.sessions)

    # --- the source switch: mothx sessions, captured Claude Code and Codex sessions ------------------------------

    def _other_sources(self) -> list[str]:
        return other_sources(self.agent_counts)

    def _sources(self) -> list[str]:
        return [SOURCE_MOTHX, *self._other_sources()]

    def _count_sources(self, cycle: bool = False) -> None:
        if self.sd is None or (self._counting and not cycle):
            return
        self._counting = True
        self._count_agents(self.sd, cycle)

    @work(thread=True, exclusive=True, group="sessions-sources", exit_on_error=False, description="Count captured sessions")
    def _count_agents(self, sd: SessionDir, cycle: bool) -> None:
        try:
            from store.agents.native_catalog import agent_session_counts

            counts = agent_session_counts(sd)
        except Exception as exc:  # noqa: BLE001 - captured sessions are optional: the mothx list still works
            self.app.call_from_thread(notify, self, describe_error(exc), title="Cannot count captured sessions",
                                      severity="error")
            counts = {}
        self.post_message(AgentsCounted(counts, cycle))

    @on(AgentsCounted)
    def _agents_counted(self, message: AgentsCounted) -> None:
        self._counting = False
        self.agent_counts = message.counts
        self.refresh_bindings()
        if self.source == SOURCE_MOTHX and self.total is not None:
            self._show_query_state(self.current_query())
        if self.source != SOURCE_MOTHX and self.source not in self._other_sources():
            self._show_source(SOURCE_MOTHX)  # its sessions are gone
        sources = self._sources()
        if message.cycle:
            if len(sources) == 1:
                notify(self, "There are no captured Claude Code or Codex sessions: capture them with "
                            "`sessionscope capture claude-code` (or `codex`).", timeout=5)
                return
            here = sources.index(self.source) if self.source in sources else 0
            self._show_source(sources[(here + 1) % len(sources)])
        elif self._auto_source and self.total == 0 and not self._is_filtered() and len(sources) > 1:
            self._show_source(sources[1])  # nothing in sessions.db: show what was captured
        self._auto_source = False

    def action_cycle_source(self) -> None:
        self._auto_source = False
        self._count_sources(cycle=True)

    def _agent_list(self) -> AgentSessionList:
        from tui.widgets.native_session_list import AgentSessionList

        found = self.query(AgentSessionList)
        if found:
            return found.first()
        widget = AgentSessionList(id="agent-sessions")
        widget.display = False
        self.mount(widget, after=self.query_one(SessionList))
        return widget

    def _active_list(self) -> SessionList | AgentSessionList:
        return self.query_one(SessionList) if self.source == SOURCE_MOTHX else self._agent_list()

    def _show_source(self, source: str) -> None:
        self.source = source
        session_list = self.query_one(SessionList)
        if source == SOURCE_MOTHX:
            for agent_list in self.query("#agent-sessions"):
                agent_list.display = False
            session_list.display = True
            session_list.focus()
            self._show_count()
            self._show_query_state(self.current_query())
        else:
            agent_list = self._agent_list()
            session_list.display = False
            agent_list.display = True
            agent_list.search = self.search.strip()
            agent_list.begin(source)
            self.call_after_refresh(agent_list.focus)  # it may have just been mounted
            self._show_agent_status()
            if self.sd is not None:
                self._read_agent_sessions(self.sd, source)
        self.refresh_bindings()

    def _read_agent_sessions(self, sd: SessionDir, agent: str) -> None:
        """Page the captured sessions of ``agent`` from the store (keyset, one query per page; the list reads in
        its own worker); the count is the source switch's grouped count. A re-read keeps the cursor."""
        counts = self.agent_counts or {}
        self._agent_list().show_agent(sd, agent, total=counts.get(agent), keep_cursor=True)

    @on(RowList.Loaded, "#agent-sessions")
    def _agent_sessions_loaded(self, message: RowList.Loaded) -> None:
        self._show_agent_status()

    @on(RowList.Failed, "#agent-sessions")
    def _agent_sessions_failed(self, message: RowList.Failed) -> None:
        notify(self, message.error, title="Cannot read captured sessions", severity="error")
        self._show_agent_status()

    def _show_agent_status(self) -> None:
        if self.source == SOURCE_MOTHX:
            return
        bar = self.query_one(StatusBar)
        bar.count, bar.query_text = agent_status(self._agent_list(), self.source)

    # --- opening ----------------------------------------------------------------------------------------------

    @on(RowList.Selected, "#sessions")
    def _open_session(self, message: RowList.Selected) -> None:
        app = services(self)
        if app is None:
            raise RuntimeError("the Sessions screen opens transcripts through the Sessionscope app")
        row: SessionSummary = message.row
        app.open_transcript(row.id)

    @on(RowList.Selected, "#agent-sessions")
    def _open_agent_session(self, message: RowList.Selected) -> None:
        row: AgentSessionSummary = message.row
        if self.sd is None:
            return
        if not row.openable:
            notify(self, f"There is no checkpoint to read: {row.problem}.", title="Cannot open", severity="warning")
            return
        from tui.screens.native_transcript import NativeRef, NativeTranscriptScreen

        self.app.push_screen(NativeTranscriptScreen(self.sd, NativeRef(row.agent, row.agent_session_id)))

