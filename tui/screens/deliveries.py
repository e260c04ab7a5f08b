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

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer

from store.mothx.delivery_listing import DeliveryScope
from tui import actions
from tui.clipboard import copy
from tui.context import services, store
from tui.formatting import describe_error, one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.live import LiveChanged
from tui.messages import WorkerFailed
from tui.safe import notify
from tui.widgets.delivery_list import DeliveryFacts, DeliveryList, DeliveryRow
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from store.mothx.repair_kit import RepairPreview, RepairResult
    from store.mothx.sessiondir import SessionDir

TICK_S = 1.0
MARK_HOLD_S = 2.0
WAKE_GRACE_S = 0.3
WAKE_HORIZON_S = 3600

WRITE_ACTIONS = frozenset(spec.action for spec in actions.in_scope("deliveries") if spec.writes)


@dataclass
class RetryPreviewed(Message):
    operation_id: str
    session_id: str
    preview: RepairPreview | None
    error: str = ""


@dataclass
class RetryFinished(Message):
    operation_id: str
    result: RepairResult | None
    error: str = ""
    refused: bool = False


class DeliveriesScreen(ReportsWorkerFailures, Screen[None]):
    """Failed and uncertain delivery operations by platform and target; a retry after a preview."""

    ACTION_SCOPE: ClassVar[str] = "deliveries"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Deliveries screen"
    AUTO_FOCUS = "DeliveryList"

    DEFAULT_CSS = """
    DeliveriesScreen { layout: vertical; }
    DeliveriesScreen #deliveries { height: 1fr; min-height: 5; }
    DeliveriesScreen #delivery-facts { height: 4; }
    """

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.scope = DeliveryScope(session_id=session_id, waiting=True, grouped=True)
        self._tick: Timer | None = None
        self._wake: Timer | None = None
        self._wake_at: int | None = None
        self._marked_at = 0.0
        self._busy = False
        self.last_result: RepairResult | None = None
        self.last_error = ""

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
        self._tick = self.set_interval(TICK_S, self._on_tick)

    def attach(self, sd: SessionDir) -> None:
        self.sd = sd
        self.delivery_list.show(sd, self.scope)

    @property
    def delivery_list(self) -> DeliveryList:
        return self.query_one(DeliveryList)

    def now(self) -> float:
        app = services(self)
        return float(app.clock()) if app is not None else time.time()

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
        if isinstance(message, RowList.Loaded) and message.changed:
            self._marked_at = time.monotonic()
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

    def _on_tick(self) -> None:
        lst = self.delivery_list
        if lst.changed and time.monotonic() - self._marked_at >= MARK_HOLD_S:
            lst.clear_marks()
        lst.refresh_cells()
        self.query_one(DeliveryFacts).refresh()

    def _plan_wake(self) -> None:
        """Re-read when the earliest shown next attempt or lease expiry passes (a worker may act then)."""
        wake = self.delivery_list.next_wake_ms()
        if wake == self._wake_at and self._wake is not None:
            return
        if self._wake is not None:
            self._wake.stop()
            self._wake = None
        self._wake_at = wake
        if wake is None:
            return
        delay = wake / 1000 - self.now() + WAKE_GRACE_S
        if 0 < delay <= WAKE_HORIZON_S:
            self._wake = self.set_timer(delay, self._woken)

    def _woken(self) -> None:
        self._wake = None
        self._wake_at = None
        self.delivery_list.live_refresh()

    def on_live_changed(self, message: LiveChanged) -> None:
        # The view is small and a delivery write names no session: any change re-reads what is shown.
        if self.scope.session_id is None or message.concerns(self.scope.session_id):
            self.delivery_list.live_refresh()

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action not in WRITE_ACTIONS:
            return True
        sd = self.sd or store(self)
        return actions.check_write(action, sd is not None and sd.writable)

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
        if self._busy:
            notify(self, "A retry is already being prepared or applied.", severity="warning")
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
        self._busy = True
        self._preview(self.sd, f.operation_id, f.session_id)

    def _key_for(self, action_id: str) -> str:
        for key, active in self.active_bindings.items():
            if active.binding.id == action_id:
                return key
        return actions.get(action_id).key.split(",")[0]

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        if message.group == "delivery-retry":
            self._busy = False
            self.last_result = None
            self.last_error = message.reason

    @work(thread=True, exclusive=True, group="delivery-retry", exit_on_error=False, description="Preview a retry")
    def _preview(self, sd: SessionDir, operation_id: str, session_id: str) -> None:
        try:
            from store.mothx.delivery_repairs import RetryDelivery

            preview = RetryDelivery(sd, operation_id).preview()
        except Exception as exc:  # noqa: BLE001 - one sentence, never a traceback
            self.post_message(RetryPreviewed(operation_id, session_id, None, describe_error(exc)))
            return
        self.post_message(RetryPreviewed(operation_id, session_id, preview))

    @on(RetryPreviewed)
    def _previewed(self, message: RetryPreviewed) -> None:
        preview = message.preview
        if preview is None or preview.refusal:
            self._busy = False
            text = message.error if preview is None else f"Refused: {one_line(preview.refusal)}"
            self.last_error = text
            notify(self, text, title="Not retried", severity="error", timeout=12)
            self.delivery_list.live_refresh()
            return
        from tui.widgets.confirm import ConfirmDialog, ConfirmRequest

        request = ConfirmRequest(title=one_line(preview.title), preview="\n".join(preview.lines()),
                                 affected=len(preview.changes), noun="row", confirm_label="Retry",
                                 opened_by=self._key_for("deliveries.retry"))

        def decided(confirmed: bool | None) -> None:
            if confirmed and self.sd is not None:
                self._apply(self.sd, message.operation_id, preview)
            else:
                self._busy = False
                notify(self, "Nothing was changed.", title=preview.title, timeout=3)

        try:
            dialog = ConfirmDialog(request)
        except ValueError as exc:  # the user mapped the action onto the confirm key
            self._busy = False
            notify(self, str(exc), title="Cannot confirm", severity="error")
            return
        self.app.push_screen(dialog, decided)

    @work(thread=True, exclusive=True, group="delivery-retry", exit_on_error=False, description="Retry a delivery")
    def _apply(self, sd: SessionDir, operation_id: str, preview: RepairPreview) -> None:
        from store.errors import ReadOnlyStore, RepairRefused
        from store.mothx.delivery_repairs import RetryDelivery

        try:
            result = RetryDelivery(sd, operation_id).apply(preview)
        except (RepairRefused, ReadOnlyStore) as exc:
            text = describe_error(exc)
            self.post_message(RetryFinished(operation_id, None, text if text.startswith("Refused") else
                                            f"Refused: {text}", refused=True))
            return
        except Exception as exc:  # noqa: BLE001
            self.post_message(RetryFinished(operation_id, None, describe_error(exc)))
            return
        self.post_message(RetryFinished(operation_id, result))

    @on(RetryFinished)
    def _finished(self, message: RetryFinished) -> None:
        self._busy = False
        if message.result is not None:
            self.last_result = message.result
            self.last_error = ""
            notify(self, message.result.message, title="Retried", timeout=8)
            # follow the retried operation and its chain (by the raw ids the list read) through to delivered
            lst = self.delivery_list
            row = next((r for r in lst.rows if r.operation_id == message.operation_id), None)
            chain = [link.operation_id for link in row.failure.chain] if row is not None else []
            lst.watch_operations([message.operation_id, *chain])
        else:
            self.last_result = None
            self.last_error = message.error
            notify(self, message.error, title="Not retried" if message.refused else "Retry failed",
                   severity="error", timeout=12)
            self.delivery_list.live_refresh()


__all__ = ["DeliveriesScreen", "RetryFinished", "RetryPreviewed"]
