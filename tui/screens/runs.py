"""The Runs screen: active and recent runs with their leases, derived execution state and recovery records.

Top: :class:`~tui.widgets.run_list.RunList` (every session's runs, or one session's). Below: the selected run's
facts and its event timeline (:mod:`tui.widgets.run_timeline`). Nothing here runs SQL: the widgets call
``store.mothx.runs`` in thread workers; the repairs come from ``store.mothx.repairs``.

Repairs (``X`` recover an orphan, ``T`` abandon interrupted tool calls, ``L`` release an expired lease) follow one
path: ``preview()`` in a worker → a refused preview is one notification that names the reason (a live lease names
its holder) → otherwise a :class:`~tui.widgets.confirm.ConfirmDialog` with the preview's lines (Cancel has the
focus; ``y`` confirms, never the key that opened it) → ``apply()`` in a worker → a notification with the result
or the refusal. The actions are declared ``writes=True``: the read modes show them dimmed and block them, and
the store refuses them again on its own.

Time: the lease countdowns follow the app's clock; a one-second timer only repaints them. What the database
says changes on screen only after a re-read: on a live-update hint (:class:`tui.live.LiveChanged`), on ``r``,
after a repair, and when the earliest valid lease shown reaches its expiry (the run may now be orphaned).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import ModalScreen, Screen

from tui import actions
from tui.clipboard import copy
from tui.context import OpensWithStore, opened_store, services
from tui.countdown import ListTimers, clock_now
from tui.formatting import describe_error, one_line, plural
from tui.lifecycle import ReportsWorkerFailures
from tui.live import LiveChanged, LiveReady
from tui.repair_flow import FlowWords, Outcome, RepairFlow, ask, key_for
from tui.safe import data_line, markup_escape, notify
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.run_list import RunList, RunRow, RunScope, RunsPage, is_orphan
from tui.widgets.run_timeline import RunFacts, RunTimeline
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from textual.widgets import Button

    from store.mothx.recovery import InterruptedTools
    from store.mothx.repairs import Repair, RepairResult
    from store.mothx.sessiondir import SessionDir

EXPIRY_GRACE_S = 0.5
"""After the earliest shown lease expires, its session is re-read this much later (the SQLite clock agrees)."""

EXPIRY_HORIZON_S = 6 * 3600
"""Leases expiring later than this are not waited for (a re-read happens on the next hint or refresh)."""

WRITE_ACTIONS = frozenset(spec.action for spec in actions.in_scope("runs") if spec.writes)


# --- messages from the workers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairJob:
    """One repair the user started: which, on what, and the key that started it."""

    repair_id: str
    session_id: str
    kwargs: dict[str, object] = field(default_factory=dict)
    opened_by: str = ""
    label: str = ""


@dataclass
class ToolsListed(Message):
    job: RepairJob
    tools: InterruptedTools | None
    error: str = ""


# --- picking tool calls ------------------------------------------------------------------------------------------


class ToolPickDialog(ModalScreen[list[str] | None]):
    """Choose interrupted tool calls (all chosen at first); ``p`` continues to the preview, ``esc`` cancels."""

    ACTION_SCOPE: ClassVar[str] = "tool-pick"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Pick tool calls"
    AUTO_FOCUS = "#pick-list"

    DEFAULT_CSS = """
    ToolPickDialog { align: center middle; background: $background 60%; }
    ToolPickDialog > #pick-box {
        width: 96; max-width: 96%; height: auto; max-height: 90%;
        border: round $warning; border-title-color: $warning; border-title-style: bold;
        background: $surface; padding: 0 1;
    }
    ToolPickDialog #pick-list { height: auto; max-height: 16; }
    ToolPickDialog #pick-hint { color: $foreground-muted; margin: 1 0 0 0; }
    ToolPickDialog #pick-buttons { height: auto; align-horizontal: right; margin: 1 0 0 0; }
    ToolPickDialog Button { margin-left: 2; }
    """

    def __init__(self, tools: InterruptedTools) -> None:
        super().__init__()
        self.tools = tools

    def compose(self) -> ComposeResult:
        # imported here: the picker is rare, and the Runs screen's first paint should not wait for these
        from textual.containers import Horizontal, Vertical
        from textual.widgets import Button, SelectionList, Static
        from textual.widgets.selection_list import Selection

        tools = self.tools
        with Vertical(id="pick-box") as box:
            # a border title and a str prompt are read as markup: the data is escaped, the prompts are Text
            box.border_title = markup_escape(f"Interrupted tool calls of session {tools.session_id}")
            options = []
            for rec in tools.records:
                side = "side-effecting" if rec.side_effecting else "read-only"
                label = (f"{one_line(rec.tool_name) or '?'}  call {one_line(rec.provider_call_id)}  ·  "
                         f"turn {one_line(rec.local_turn_id)}  ·  {one_line(rec.execution_state)}  ·  {side}")
                options.append(Selection(data_line(label), rec.provider_call_id, True))
            yield SelectionList[str](*options, id="pick-list")
            dangling = len(tools.dangling_calls)
            hint = "space toggles · p preview · esc cancel. Nothing is run again and no tool output is written."
            if dangling:
                hint = (f"{plural(dangling, 'toolCall')} {'has' if dangling == 1 else 'have'} no result and no record: "
                        "they are only reported. " + hint)
            yield Static(hint, id="pick-hint", markup=False)
            with Horizontal(id="pick-buttons"):
                yield Button("Cancel", id="pick-cancel")
                yield Button("Preview (p)", id="pick-preview", variant="warning")

    def action_toggle_all(self) -> None:
        from textual.widgets import SelectionList

        pick = self.query_one("#pick-list", SelectionList)
        if pick.selected:
            pick.deselect_all()
        else:
            pick.select_all()

    def action_preview(self) -> None:
        from textual.widgets import SelectionList, Static

        chosen = list(self.query_one("#pick-list", SelectionList).selected)
        if not chosen:
            self.app.bell()
            self.query_one("#pick-hint", Static).update("Choose at least one call (space), or esc to cancel.")
            return
        self.dismiss([str(c) for c in chosen])

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "pick-cancel":
            self.action_cancel()
        elif event.button.id == "pick-preview":
            self.action_preview()


# --- the screen --------------------------------------------------------------------------------------------------


class RunsScreen(OpensWithStore, RepairFlow, ReportsWorkerFailures, Screen[None]):
    """Runs of every session (or of one), their leases and recovery records; repairs after a preview."""

    CSS_PATH = Path(__file__).with_name("runs.tcss")
    ACTION_SCOPE: ClassVar[str] = "runs"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Runs screen"
    AUTO_FOCUS = "RunList"
    REPAIR_GROUP: ClassVar[str] = "runs-repair"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords(failed_timeout=10)

    def __init__(self, session_id: str | None = None, *, orphaned_only: bool = False) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.scope = RunScope(session_id=session_id, orphaned_only=orphaned_only)
        self.timers = ListTimers(self, lambda: self.run_list, lambda: self.query_one(RunFacts),
                                 grace_s=EXPIRY_GRACE_S, horizon_s=EXPIRY_HORIZON_S)

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Runs")
        yield RunList(id="runs")
        yield RunFacts(id="run-facts")
        yield RunTimeline(id="run-timeline")
        yield StatusBar(id="status")
        yield KeyBar()

    async def on_mount(self) -> None:
        self._show_scope()
        self.timers.start()
        sd, first = await opened_store(self)  # the first screen (--section runs): its first frame has the rows
        self.query_one(StatusBar).count = "Opening the session directory…" if sd is None else "Reading runs…"
        if sd is not None:
            self.attach(sd, first_page=first if isinstance(first, RunsPage) else None)

    def attach_opened(self, sd: SessionDir, first: object | None) -> None:
        self.attach(sd, first_page=first if isinstance(first, RunsPage) else None)

    def attach(self, sd: SessionDir, first_page: RunsPage | None = None) -> None:
        """Show the runs of ``sd``; ``first_page`` is the first read of this screen's scope, when done already."""
        self.sd = sd
        run_list = self.query_one(RunList)
        run_list.show(sd, self.scope, first_page=first_page)
        if first_page is not None and run_list.loaded:
            # The rows are here: the same frame shows the counts and the selected run's facts (the messages
            # saying so arrive after that frame and then change nothing).
            self._show_counts()
            self._show_selected(run_list.selected)

    # --- helpers ----------------------------------------------------------------------------------------------

    @property
    def run_list(self) -> RunList:
        return self.query_one(RunList)

    def _show_scope(self) -> None:
        parts = ["all sessions" if self.scope.session_id is None else f"session {self.scope.session_id}"]
        if self.scope.orphaned_only:
            parts.append("orphaned only")
        app = services(self)
        live = app.live if app is not None else None
        if live is not None:
            parts.append(live.describe())
        self.query_one(StatusBar).query_text = "  ·  ".join(parts)

    def _show_counts(self) -> None:
        lst = self.run_list
        if not lst.loaded:
            return
        if lst.error and not lst.rows:
            self.query_one(StatusBar).count = lst.error
            return
        shown = lst.active_rows
        active = len(shown)
        orphans = sum(1 for row in shown if is_orphan(row.listing))
        parts = [f"{active:,} active"]
        if orphans:
            parts.append(f"{orphans:,} orphaned")
        if not self.scope.orphaned_only:
            recent = len(lst.rows) - active
            more = " of >" + f"{recent:,}" if lst.capped else ("+" if lst.has_more else "")
            parts.append(f"{recent:,}{more} recent")
        self.query_one(StatusBar).count = " · ".join(parts)

    # --- list events ------------------------------------------------------------------------------------------

    @on(RowList.Failed, "#runs")
    @on(RowList.Loaded, "#runs")
    def _list_changed(self, message: RowList.Loaded | RowList.Failed) -> None:
        self.timers.loaded(isinstance(message, RowList.Loaded) and bool(message.changed))
        self._show_counts()
        self._show_scope()
        self._plan_expiry()
        selected = self.run_list.selected
        if selected is None:
            self.query_one(RunFacts).show(None)
            timeline = self.query_one(RunTimeline)
            # no run to show (none, or the runs could not be read): the timeline stops saying "Reading events…"
            if self.sd is not None and (timeline.run_id is not None or not timeline.loaded):
                timeline.show(self.sd, None)

    @on(RowList.Highlighted, "#runs")
    def _selected(self, message: RowList.Highlighted) -> None:
        self._show_selected(message.row)

    def _show_selected(self, row: RunRow | None) -> None:
        facts = self.query_one(RunFacts)
        timeline = self.query_one(RunTimeline)
        old = facts.row
        facts.show(row)
        if self.sd is None:
            return
        if row is None:
            if timeline.run_id is not None:
                timeline.show(self.sd, None)
            return
        if timeline.run_id != row.run_id:
            timeline.show(self.sd, row.run_id)
        elif old is not None and old.facts() != row.facts():
            timeline.refresh_events()

    @on(RowList.Selected, "#runs")
    def _opened(self, message: RowList.Selected) -> None:
        app = services(self)
        if app is None:
            raise RuntimeError("the Runs screen opens transcripts through the Sessionscope app")
        app.open_transcript(message.row.session_id)

    def _plan_expiry(self) -> None:
        """Re-read when the earliest valid lease shown expires: its run may have become orphaned."""
        self.timers.plan(self.run_list.next_expiry(), self._lease_expired)

    def _lease_expired(self) -> None:
        now = clock_now(self)
        lst = self.run_list
        due = {row.session_id for row in lst.active_rows
               if row.listing.lease is not None and row.listing.lease.state == "active"
               and row.listing.lease.expires_at <= int(now)}
        if due:
            lst.refresh_sessions(due)
        else:
            self._plan_expiry()

    # --- live updates -----------------------------------------------------------------------------------------

    def on_live_ready(self, message: LiveReady) -> None:
        self._show_scope()

    def on_live_changed(self, message: LiveChanged) -> None:
        lst = self.run_list
        if message.everything:
            lst.reload()
        else:
            lst.refresh_sessions(message.sessions)
        selected = lst.selected
        if selected is not None and message.concerns(selected.session_id):
            self.query_one(RunTimeline).refresh_events()

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.check_write_action(action, WRITE_ACTIONS)

    def action_refresh(self) -> None:
        self.run_list.reload()
        self.query_one(RunTimeline).refresh_events()

    def action_toggle_orphaned(self) -> None:
        self.scope = RunScope(self.scope.session_id, not self.scope.orphaned_only)
        self._show_scope()
        if self.sd is not None:
            self.run_list.show(self.sd, self.scope)

    def action_toggle_scope(self) -> None:
        if self.scope.session_id is not None:
            session_id = None
        else:
            row = self.run_list.selected
            if row is None:
                notify(self, "No run is selected.", severity="warning")
                return
            session_id = row.session_id
        self.scope = RunScope(session_id, self.scope.orphaned_only)
        self._show_scope()
        if self.sd is not None:
            self.run_list.show(self.sd, self.scope)

    def action_copy_run_id(self) -> None:
        row = self.run_list.selected
        if row is None:
            notify(self, "No run is selected.", severity="warning")
            return
        copy(self, row.run_id, f"the run id {row.run_id}")

    def _target(self) -> RunRow | None:
        row = self.run_list.selected
        if row is None:
            notify(self, "No run is selected.", severity="warning")
        elif self.refuse_when_busy():
            return None
        return row

    def action_recover_run(self) -> None:
        row = self._target()
        if row is None:
            return
        key = key_for(self, "runs.recover")
        self._start_repair("recover_run", RepairJob("recover-run", row.session_id, {"run_id": row.run_id}, key,
                                                    f"run {row.run_id}"))

    def action_release_lease(self) -> None:
        row = self._target()
        if row is None:
            return
        key = key_for(self, "runs.release-lease")
        self._start_repair("release_lease", RepairJob("release-lease", row.session_id, {"session_id": row.session_id},
                                                      key, f"the lease of session {row.session_id}"))

    def action_abandon_tools(self) -> None:
        row = self._target()
        if row is None or self.sd is None:
            return
        self.repair_busy = True
        key = key_for(self, "runs.abandon-tools")
        self._list_tools(self.sd, RepairJob("abandon-tools", row.session_id, {}, key, f"session {row.session_id}"))

    # --- the repair path (tui.repair_flow) --------------------------------------------------------------------

    def _start_repair(self, action: str, job: RepairJob) -> None:
        def make(sd: SessionDir) -> Repair:
            from store.mothx.repairs import make_repair

            return make_repair(sd, job.repair_id, **job.kwargs)

        self.start_repair(action, make, ask(noun="row", opened_by=job.opened_by), done=partial(self._repaired, job),
                          refused_title=f"Not repaired: {job.label}")

    def _repaired(self, job: RepairJob, outcome: Outcome[RepairResult]) -> None:
        if outcome.stage == "cancelled" or (outcome.stage == "preview" and outcome.refused):
            return
        # what was written (or found) is shown only after reading it back
        self.run_list.refresh_sessions({job.session_id})
        self.query_one(RunTimeline).refresh_events()

    # --- tool calls -------------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="runs-repair", exit_on_error=False, description="List interrupted tools")
    def _list_tools(self, sd: SessionDir, job: RepairJob) -> None:
        try:
            from store.mothx.recovery import list_interrupted_tools

            tools = list_interrupted_tools(sd, job.session_id)
        except Exception as exc:  # noqa: BLE001
            self.post_message(ToolsListed(job, None, describe_error(exc)))
            return
        self.post_message(ToolsListed(job, tools))

    @on(ToolsListed)
    def _tools_listed(self, message: ToolsListed) -> None:
        job = message.job
        tools = message.tools
        if tools is None:
            self.repair_busy = False
            notify(self, message.error, title="Cannot list tool calls", severity="error")
            return
        if not tools.records:
            self.repair_busy = False
            note = ""
            if tools.dangling_calls:
                n = len(tools.dangling_calls)
                note = (f" {plural(n, 'toolCall')} {'has' if n == 1 else 'have'} no result but no record either: "
                        "nothing can be written for them.")
            notify(self, f"Session {job.session_id} has no interrupted tool execution record.{note}",
                        title="Abandon tools", timeout=6)
            return

        def picked(call_ids: list[str] | None) -> None:
            if not call_ids:
                self.repair_busy = False
                return
            turns = sorted({r.local_turn_id for r in tools.records if r.provider_call_id in call_ids})
            if len(turns) != 1:
                self.repair_busy = False
                notify(self, "Choose calls of one turn at a time (the repair works on one turn).",
                            title="Abandon tools", severity="warning")
                return
            self.repair_busy = False  # the picker's part ends: the repair's own path starts
            self._start_repair("abandon_tools", RepairJob(
                "abandon-tools", job.session_id, {"session_id": job.session_id, "turn_id": turns[0],
                                                  "call_ids": call_ids},
                job.opened_by, f"turn {turns[0]} of session {job.session_id}"))

        self.app.push_screen(ToolPickDialog(tools), picked)


__all__ = ["RunsScreen", "ToolPickDialog", "RepairJob"]
