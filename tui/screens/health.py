"""The Health screen: every health check of the session directory as a row, and the repairs that mend them.

Top: :class:`~tui.widgets.health_list.HealthList` (status, check, detail, repair). Below: the selected check in
full (its detail, what to do, its repair), the integrity check's progress bar while it runs, the status line.
Nothing here runs SQL: the list's source calls :func:`store.health.run_checks` in the list's worker; the long
integrity check (:func:`store.health.integrity_check`) runs in a worker of its own, on its own connection.

Keys (the registry's ``health`` scope): ``X`` runs the repair of the selected row, after its preview in a
:class:`~tui.widgets.confirm.ConfirmDialog` (Cancel focused; ``reset-db`` also asks for the word ``reset``);
``i`` starts the integrity check (a progress bar; ``escape`` cancels it, and goes back when nothing runs);
``r`` checks again; ``c`` copies the repair command. A row that no repair fixes says so, and what to do.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from store.health.model import HealthCheck
from tui import actions
from tui.clipboard import copy
from tui.context import store
from tui.formatting import describe_error, one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.messages import WorkerFailed
from tui.repair_flow import NO_REFUSALS, FlowWords, Outcome, RepairFlow, key_for
from tui.safe import data_text, notify
from tui.widgets.header import AppHeader
from tui.widgets.health_list import STATUS_STYLE, HealthList
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from store.mothx.repair_kit import Repair, RepairPreview, RepairResult
    from store.mothx.sessiondir import SessionDir
    from tui.widgets.confirm import ConfirmRequest

WRITE_ACTIONS = frozenset(spec.action for spec in actions.in_scope("health") if spec.writes)
RESET_PHRASE = "reset"


@dataclass
class IntegrityProgress(Message):
    fraction: float
    table: str


@dataclass
class IntegrityDone(Message):
    check: HealthCheck | None
    error: str = ""
    cancelled: bool = False


def detail_text(check: HealthCheck | None) -> Text:
    """The selected check in full: every data string drawn as plain text (never markup)."""
    if check is None:
        return Text("No check is selected.", style="dim")
    out = Text()
    out.append(check.status.upper(), style={"ok": "green", "warn": "yellow", "error": "bold red"}[check.status])
    out.append("  ")
    out.append_text(data_text(check.id, "bold"))
    out.append("\n")
    out.append_text(data_text(check.detail))
    if check.advice:
        out.append("\nWhat to do: ", style="dim")
        out.append_text(data_text(check.advice))
    out.append("\nRepair: ", style="dim")
    if check.repair:
        out.append_text(data_text(f"sessionscope repair {check.repair}", "bold"))
        out.append("  (x: preview and apply)", style="dim")
    else:
        out.append("none", style="dim")
    return out


class HealthScreen(RepairFlow, ReportsWorkerFailures, Screen[None]):
    """Every check as a row; repairs after a preview; the long integrity check on request."""

    ACTION_SCOPE: ClassVar[str] = "health"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Health screen"
    AUTO_FOCUS = "HealthList"
    REPAIR_GROUP: ClassVar[str] = "health-fix"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords()
    REPAIR_REFUSALS: ClassVar[tuple[str, ...]] = NO_REFUSALS  # a refusal is a line that says "Refused"

    DEFAULT_CSS = """
    HealthScreen { layout: vertical; }
    HealthScreen #health { height: 1fr; min-height: 5; }
    HealthScreen #health-detail { height: 6; padding: 0 1; background: $surface; border-top: solid $panel; }
    HealthScreen #integrity-progress { height: 1; padding: 0 1; display: none; }
    HealthScreen #integrity-progress.running { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.overrides: dict[str, HealthCheck] = {}
        self._cancel: threading.Event | None = None

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Health")
        yield HealthList(id="health")
        yield Static(detail_text(None), id="health-detail")
        yield ProgressBar(total=100, show_eta=False, id="integrity-progress")
        yield StatusBar(id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        sd = store(self)
        self.query_one(StatusBar).count = "Opening the session directory…" if sd is None else "Checking…"
        if sd is not None:
            self.attach(sd)

    def attach(self, sd: SessionDir) -> None:
        self.sd = sd
        self.health_list.show(sd, lambda: dict(self.overrides))

    @property
    def health_list(self) -> HealthList:
        return self.query_one(HealthList)

    @property
    def integrity_running(self) -> bool:
        return self._cancel is not None

    # --- list events ------------------------------------------------------------------------------------------

    @on(RowList.Loaded, "#health")
    @on(RowList.Failed, "#health")
    def _loaded(self, message: RowList.Loaded | RowList.Failed) -> None:
        lst = self.health_list
        counts = {s: sum(1 for c in lst.rows if c.status == s) for s in STATUS_STYLE}
        bar = self.query_one(StatusBar)
        if lst.error and not lst.rows:
            bar.count = lst.error
        else:
            bar.count = f"{counts['ok']} ok · {counts['warn']} warnings · {counts['error']} errors"
        bar.query_text = "integrity check running (esc cancels)" if self.integrity_running else ""
        self.query_one("#health-detail", Static).update(detail_text(lst.selected))

    @on(RowList.Highlighted, "#health")
    def _highlighted(self, message: RowList.Highlighted) -> None:
        self.query_one("#health-detail", Static).update(detail_text(message.row))

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        if message.group == "health-integrity":
            self._integrity_stopped()

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.check_write_action(action, WRITE_ACTIONS)

    def action_refresh(self) -> None:
        if self.sd is not None:
            self.health_list.reload()

    def action_copy_repair(self) -> None:
        check = self.health_list.selected
        if check is None or not check.repair:
            notify(self, "The selected check has no repair to copy.", severity="warning")
            return
        copy(self, f"sessionscope repair {check.repair}", f"the command 'sessionscope repair {check.repair}'")

    # integrity ------------------------------------------------------------------------------------------------
    def action_integrity_check(self) -> None:
        if self.sd is None:
            notify(self, "No session directory is open.", severity="warning")
            return
        if self.integrity_running:
            notify(self, "The integrity check is running already (esc cancels it).", severity="warning")
            return
        self._cancel = threading.Event()
        bar = self.query_one(ProgressBar)
        bar.update(progress=0)
        bar.add_class("running")
        self.query_one(StatusBar).query_text = "integrity check running (esc cancels)"
        self._integrity(self.sd, self._cancel)

    async def action_cancel_check(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            notify(self, "Cancelling the integrity check…", timeout=2)
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    @work(thread=True, exclusive=True, group="health-integrity", exit_on_error=False, description="Integrity check")
    def _integrity(self, sd: SessionDir, cancel: threading.Event) -> None:
        from store.health import IntegrityCancelled, integrity_check

        def progress(fraction: float, table: str) -> None:
            self.post_message(IntegrityProgress(fraction, table))

        try:
            check = integrity_check(sd, progress, cancel)
        except IntegrityCancelled:
            self.post_message(IntegrityDone(None, cancelled=True))
            return
        except Exception as exc:  # noqa: BLE001 - one sentence, never a traceback
            self.post_message(IntegrityDone(None, describe_error(exc)))
            return
        self.post_message(IntegrityDone(check))

    @on(IntegrityProgress)
    def _integrity_progress(self, message: IntegrityProgress) -> None:
        self.query_one(ProgressBar).update(progress=message.fraction * 100)
        self.query_one(StatusBar).query_text = f"integrity check: {one_line(message.table)} (esc cancels)"

    @on(IntegrityDone)
    def _integrity_done(self, message: IntegrityDone) -> None:
        self._integrity_stopped()
        if message.cancelled:
            notify(self, "The integrity check was cancelled; nothing was concluded.", timeout=4)
            return
        if message.check is None:
            notify(self, message.error, title="Integrity check failed", severity="error", timeout=10)
            return
        self.overrides[message.check.id] = message.check
        notify(self, message.check.detail, title="Integrity check",
               severity="information" if message.check.status == "ok" else "error", timeout=6)
        self.health_list.reload()

    def _integrity_stopped(self) -> None:
        self._cancel = None
        self.query_one(ProgressBar).remove_class("running")
        self.query_one(StatusBar).query_text = ""

    # fix ------------------------------------------------------------------------------------------------------
    def action_fix_selected(self) -> None:
        check = self.health_list.selected
        if check is None or self.sd is None:
            notify(self, "No check is selected.", severity="warning")
            return
        if not check.repair_kind:
            why = f": {check.advice}" if check.advice else " (it is ok)" if check.status == "ok" else "."
            notify(self, f"No repair fixes {check.id}{why}", severity="warning", timeout=6)
            return
        if self.refuse_when_busy():
            return
        if self.integrity_running:
            notify(self, "Wait for the integrity check to finish (or cancel it with esc).", severity="warning")
            return

        def make(sd: SessionDir) -> Repair:
            from store.health.fixes import repair_for

            return repair_for(sd, check)

        def confirm(preview: RepairPreview) -> ConfirmRequest:
            from tui.widgets.confirm import ConfirmRequest

            return ConfirmRequest.of_preview(preview, noun="item", opened_by=key_for(self, "health.fix"),
                                             phrase=RESET_PHRASE if preview.repair_id == "reset-db" else "")

        self.start_repair("fix_selected", make, confirm, done=self._fixed)

    def _fixed(self, outcome: Outcome[RepairResult]) -> None:
        if outcome.stage == "apply":
            self.overrides.pop("db.integrity_check", None)  # the database may be another one now (reset)
            self.health_list.reload()


__all__ = ["HealthScreen", "detail_text"]
