"""The Deliveries screen: the delivery outbox's failed, uncertain and waiting operations, and safe retries.

Top: :class:`~tui.widgets.delivery_list.DeliveryList` (every session's, or one session's), grouped by platform
and target. Below: the selected operation's facts (:class:`~tui.widgets.delivery_list.DeliveryFacts`). Nothing
here runs SQL: the list reads :mod:`store.mothx.delivery_listing` in its worker, the retry is the
``retry-delivery`` repair of :mod:`store.mothx.delivery_repairs` — the same one ``sessionscope repair
retry-delivery`` runs.

Retry (``X``; the one write of the screen, on the key of the Runs screen's recover: ``r`` is Refresh on every
screen and must never write): on a retryable row, ``preview()`` in a worker → a
:class:`~tui.widgets.confirm.ConfirmDialog` with the preview's lines (Cancel has the focus; ``y`` applies) →
``apply()`` in a worker → a notification. On any other row one notification says why not (uncertain: it may
have been received and is never re-sent blindly; permanent; failed by a dependency; a worker holds its lease;
not failed). A retried operation is followed by id from then on, so the list shows it go ``retry_wait`` →
``sending`` → ``delivered`` as a worker acts.

Live: a change of the database (the lease bus or the file watcher: :class:`tui.live.LiveChanged`; a delivery
worker's writes are "unexplained" changes, so they arrive as ``everything``) re-reads the list, keeping the
cursor, and marks the rows that changed; ``r`` re-reads at once; a timer re-reads when the earliest shown next
attempt or lease expiry passes. The countdowns follow the app's clock, repainted every second without a read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.screen import Screen

from store.mothx.delivery_listing import DeliveryScope
from tui import actions
from tui.clipboard import copy
from tui.context import services, store
from tui.countdown import ListTimers
from tui.formatting import one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.live import LiveChanged
from tui.repair_flow import FlowWords, Outcome, RepairFlow, ask, key_for
from tui.safe import notify
from tui.widgets.delivery_list import DeliveryFacts, DeliveryList, DeliveryRow
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from store.mothx.delivery_repairs import RetryDelivery
    from store.mothx.repair_kit import RepairResult
    from store.mothx.sessiondir import SessionDir

WAKE_GRACE_S = 0.3
WAKE_HORIZON_S = 3600

WRITE_ACTIONS = frozenset(spec.action for spec in actions.in_scope("deliveries") if spec.writes)


class DeliveriesScreen(RepairFlow, ReportsWorkerFailures, Screen[None]):
    """Failed and uncertain delivery operations by platform and target; a retry after a preview."""

    ACTION_SCOPE: ClassVar[str] = "deliveries"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Deliveries screen"
    AUTO_FOCUS = "DeliveryList"
    REPAIR_GROUP: ClassVar[str] = "delivery-retry"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords(
        done="Retried", refused="Not retried", failed="Retry failed", preview_failed="Not retried",
        busy="A retry is already being prepared or applied.", preview_work="Preview a retry",
        apply_work="Retry a delivery")
    REPAIR_REFUSALS: ClassVar[tuple[str, ...]] = ("RepairRefused", "ReadOnlyStore")  # a retry takes no lease

    DEFAULT_CSS = """
    DeliveriesScreen { layout: vertical; }
    DeliveriesScreen #deliveries { height: 1fr; min-height: 5; }
    DeliveriesScreen #delivery-facts { height: 4; }
    """

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.scope = DeliveryScope(session_id=session_id, waiting=True, grouped=True)
        self.timers = ListTimers(self, lambda: self.delivery_list, lambda: self.query_one(DeliveryFacts),
                                 grace_s=WAKE_GRACE_S, horizon_s=WAKE_HORIZON_S)

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Deliveries")
        yield DeliveryList(id="deliveries")
        yield DeliveryFacts(id="delivery-facts")
        yield StatusBar(id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        sd = store(self)
        self.query_one(StatusBar).count = "Opening the session directory…" if sd is None else "Reading deliveries…"
        self._show_scope()
        if sd is not None:
            self.attach(sd)
        self.timers.start()

    def attach(self, sd: SessionDir) -> None:
        self.sd = sd
        self.delivery_list.show(sd, self.scope)

    @property
    def delivery_list(self) -> DeliveryList:
        return self.query_one(DeliveryList)

    # --- status -----------------------------------------------------------------------------------------------

    def _show_scope(self) -> None:
        parts = ["all sessions" if self.scope.session_id is None else f"session {one_line(self.scope.session_id)}"]
        app = services(self)
        if app is not None and app.live is not None:
            parts.append(app.live.describe())
        self.query_one(StatusBar).query_text = "  ·  ".join(parts)

    def _show_counts(self) -> None:
        lst = self.delivery_list
        if not lst.loaded:
            return
        if lst.error and not lst.rows:
            self.query_one(StatusBar).count = lst.error
            return
        rows = [r.failure for r in lst.rows]
        failed = sum(1 for f in rows if f.status == "failed")
        uncertain = sum(1 for f in rows if f.status == "uncertain")
        retryable = sum(1 for f in rows if f.retryable)
        waiting = sum(1 for f in rows if f.status not in ("failed", "uncertain"))
        more = "+" if lst.has_after else ""
        parts = [f"{failed:,}{more} failed", f"{uncertain:,} uncertain", f"{retryable:,} retryable"]
        if waiting:
            parts.append(f"{waiting:,} waiting or retried")
        self.query_one(StatusBar).count = " · ".join(parts)

    # --- list events ------------------------------------------------------------------------------------------

    @on(RowList.Failed, "#deliveries")
    @on(RowList.Loaded, "#deliveries")
    def _list_changed(self, message: RowList.Loaded | RowList.Failed) -> None:
        self.timers.loaded(isinstance(message, RowList.Loaded) and bool(message.changed))
        self._show_counts()
        self._show_scope()
        self._plan_wake()
        self.query_one(DeliveryFacts).show(self.delivery_list.selected)

    @on(RowList.Highlighted, "#deliveries")
    def _selected(self, message: RowList.Highlighted) -> None:
        self.query_one(DeliveryFacts).show(message.row)

    @on(RowList.Selected, "#deliveries")
    def _opened(self, message: RowList.Selected) -> None:
        app = services(self)
        if app is None:
            raise RuntimeError("the Deliveries screen opens transcripts through the Sessionscope app")
        row: DeliveryRow = message.row
        app.open_transcript(row.session_id)

    def _plan_wake(self) -> None:
        """Re-read when the earliest shown next attempt or lease expiry passes (a worker may act then)."""
        wake = self.delivery_list.next_wake_ms()
        self.timers.plan(None if wake is None else wake / 1000, self.delivery_list.live_refresh)

    def on_live_changed(self, message: LiveChanged) -> None:
        # The view is small and a delivery write names no session: any change re-reads what is shown.
        if self.scope.session_id is None or message.concerns(self.scope.session_id):
            self.delivery_list.live_refresh()

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.check_write_action(action, WRITE_ACTIONS)

    def action_refresh(self) -> None:
        self.delivery_list.reload()

    def action_toggle_scope(self) -> None:
        from dataclasses import replace

        if self.scope.session_id is not None:
            session_id = None
        else:
            row = self.delivery_list.selected
            if row is None:
                notify(self, "No delivery operation is selected.", severity="warning")
                return
            session_id = row.session_id
        self.scope = replace(self.scope, session_id=session_id)
        self._show_scope()
        if self.sd is not None:
            self.delivery_list.show(self.sd, self.scope)

    def action_copy_operation_id(self) -> None:
        row = self.delivery_list.selected
        if row is None:
            notify(self, "No delivery operation is selected.", severity="warning")
            return
        copy(self, row.operation_id, f"the operation id {one_line(row.operation_id)}")

    def action_retry_delivery(self) -> None:
        row = self.delivery_list.selected
        if row is None:
            notify(self, "No delivery operation is selected.", severity="warning")
            return
        if self.refuse_when_busy():
            return
        f = row.failure
        if not f.retryable:  # the row's facts already say no: one line, nothing read or written
            reason = f.refusal if f.status in ("failed", "uncertain") or f.problems else (
                f"operation {one_line(f.operation_id)} is {one_line(f.status)}: nothing to retry.")
            self.last_error = f"Not retried: {reason}"
            notify(self, self.last_error, title="Retry delivery", severity="warning", timeout=10)
            return
        if self.sd is None:
            return
        operation_id = f.operation_id

        def make(sd: SessionDir) -> RetryDelivery:
            from store.mothx.delivery_repairs import RetryDelivery

            return RetryDelivery(sd, operation_id)

        self.start_repair("retry_delivery", make,
                          ask(confirm_label="Retry", opened_by=key_for(self, "deliveries.retry")),
                          done=lambda outcome: self._retried(operation_id, outcome))

    def _retried(self, operation_id: str, outcome: Outcome[RepairResult]) -> None:
        lst = self.delivery_list
        if outcome.result is not None:
            # follow the retried operation and its chain (by the raw ids the list read) through to delivered
            row = next((r for r in lst.rows if r.operation_id == operation_id), None)
            chain = [link.operation_id for link in row.failure.chain] if row is not None else []
            lst.watch_operations([operation_id, *chain])
        elif outcome.stage != "cancelled":
            lst.live_refresh()


__all__ = ["DeliveriesScreen"]
