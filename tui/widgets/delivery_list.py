"""The list of the Deliveries screen: a :class:`~tui.widgets.row_list.RowList` over the outbox's operator view.

Rows come from :func:`store.mothx.delivery_listing.deliveries_page` (one read per keyset page, frozen rows):
the failed and uncertain operations, those waiting for a retry after a failed attempt, and the ones the
operator retried from this screen (followed by id until they are delivered, whatever their status), ordered by
platform and target, then newest first — so the rows of one chat target stand together; the first row of each
group names the platform and target, the others leave the column blank.

Each row: the platform · target (at its group's first row), the session, run and intent, the operation kind and
sequence, its dependency chain drawn as a chain (``upload_file ✗ → [send_file ✗]``: ✓ done, ✗ failed, ? uncertain,
↻ waiting, … in flight, · pending),
the attempts, the failure code and its class (transient / permanent / dependency / uncertain), and the next
attempt's countdown where it waits (``in 4 s``, ``due``) or the worker's lease (``leased 12 s``). Times come
from the app's clock (``app.clock``); the screen's one-second timer only repaints the countdowns.

:class:`DeliveryFacts` shows the selected row in full under the list: ids, the chain with each link's status,
and whether ``X`` can retry it, or the one-line reason it cannot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on

from store.mothx.delivery_listing import DeliveryScope, deliveries_page
from store.mothx.delivery_model import SUCCESS_TERMINAL, ChainLink, DeliveryCursor, DeliveryFailure
from store.times import SECONDS, show
from tui import actions
from tui.context import services
from tui.formatting import one_line
from tui.safe import notify
from tui.widgets.facts_panel import FactsPanel
from tui.widgets.row_list import Column, Key, Page, RowList, RowSource

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

FIRST_PAGE = 100
DISPLAY_CAP = 2000

LABEL_STYLE = {"transient": "warn", "permanent": "bad", "dependency": "muted", "uncertain": "accent"}
STATUS_STYLE = {"failed": "bad", "uncertain": "accent", "retry_wait": "warn", "delivered": "good",
                "uploaded": "good", "unsupported": "muted", "sending": "good", "uploading": "good"}


def link_mark(status: str) -> str:
    """One character for a chain link's status."""
    if status in SUCCESS_TERMINAL:
        return "✓"
    if status == "failed":
        return "✗"
    if status == "uncertain":
        return "?"
    if status == "retry_wait":
        return "↻"
    if status in ("uploading", "sending"):
        return "…"
    return "·"


def chain_text(row: DeliveryFailure) -> str:
    """``upload_file ✓ → [send_file ✗] → send_text ✗``: the row's chain in sequence order (what it depends on,
    itself in brackets, what depends on it), each link with its status mark."""
    links = row.chain or (ChainLink(row.operation_id, row.sequence, row.operation_kind, row.status,
                                    row.failure_code, row.depends_on),)
    parts = []
    for link in links:
        text = f"{one_line(link.operation_kind)} {link_mark(link.status)}"
        parts.append(f"[{text}]" if link.operation_id == row.operation_id else text)
    return " → ".join(parts)


def wait_text(row: DeliveryFailure, now_ms: int) -> str:
    """The countdown: ``in 4 s`` / ``due`` for a waiting retry, ``leased 12 s`` under a worker, else ``""``."""
    from store import times

    if row.lease_owner and row.lease_expires_at is not None and row.lease_expires_at > now_ms:
        return f"leased {times.duration(-(-(row.lease_expires_at - now_ms) // 1000))}"
    if row.status == "retry_wait":
        if row.next_attempt_at is None or row.next_attempt_at <= now_ms:
            return "due"
        return f"in {times.duration(-(-(row.next_attempt_at - now_ms) // 1000))}"
    return ""


@dataclass(frozen=True)
class DeliveryRow:
    """One line: the store's row and whether it starts its platform · target group."""

    failure: DeliveryFailure
    group_start: bool = True

    @property
    def operation_id(self) -> str:
        return self.failure.operation_id

    @property
    def session_id(self) -> str:
        return self.failure.session_id

    def facts(self) -> tuple[object, ...]:
        f = self.failure
        return (f.status, f.failure_code, f.attempt_count, f.next_attempt_at, f.lease_owner, f.lease_epoch,
                f.intent_status, tuple((link.status, link.failure_code) for link in f.chain))


def _group(values: tuple[object, ...] | None) -> tuple[object, ...] | None:
    return values[:2] if values is not None else None


class DeliverySource(RowSource[DeliveryRow]):
    """The operator view by keyset (forward only): each page one store read. Key: the row's sort position;
    ident: the operation id."""

    def __init__(self, sd: SessionDir, scope: DeliveryScope) -> None:
        self.sd = sd
        self.scope = scope

    def key(self, row: DeliveryRow) -> Key:
        return row.failure.key

    def ident(self, row: DeliveryRow) -> Key:
        return row.operation_id

    def _page(self, after: DeliveryCursor | None, limit: int) -> Page[DeliveryRow]:
        read = deliveries_page(self.sd, self.scope, after=after, limit=limit)
        previous = _group(after.values) if after is not None else None
        rows = []
        for failure in read.rows:
            group = _group(failure.key.values) if failure.key is not None else None
            rows.append(DeliveryRow(failure, group != previous))
            previous = group
        return Page(tuple(rows), read.more)

    def first(self, limit: int) -> Page[DeliveryRow]:
        return self._page(None, limit)

    def after(self, key: Key, limit: int) -> Page[DeliveryRow]:
        return self._page(key if isinstance(key, DeliveryCursor) else None, limit)


class DeliveryList(RowList[DeliveryRow]):
    """Failed, uncertain and waiting delivery operations grouped by platform and target. ``enter`` posts
    :class:`RowList.Selected`; the cursor's row is :class:`RowList.Highlighted`."""

    ACTION_SCOPE: ClassVar[str] = "delivery-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Delivery list"
    DISPLAY_CAP: ClassVar[int] = DISPLAY_CAP

    def __init__(self, *, clock: Callable[[], float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id, empty_text="No failed or uncertain deliveries.", loading_text="Reading deliveries…",
                         page_size=FIRST_PAGE)
        self.clock = clock
        self.sd: SessionDir | None = None
        self.scope = DeliveryScope(waiting=True, grouped=True)
        self._before: dict[Key, tuple[object, ...]] | None = None
        self._again = False

    def make_columns(self) -> list[Column[DeliveryRow]]:
        return [
            Column("target", "PLATFORM · TARGET", self._target_cell, min_width=18, max_width=34, grow=1,
                   priority=0, style=lambda r: "accent"),
            Column("session", "SESSION", lambda r: r.failure.session_id, min_width=8, max_width=16, priority=6),
            Column("run", "RUN", lambda r: r.failure.run_id, min_width=10, max_width=24, grow=1, priority=7),
            Column("intent", "INTENT", lambda r: r.failure.intent_id, min_width=10, max_width=24, grow=1,
                   priority=9),
            Column("kind", "KIND", lambda r: r.failure.operation_kind, min_width=12, priority=1),
            Column("seq", "SEQ", lambda r: str(r.failure.sequence), min_width=3, align="right", priority=8),
            Column("chain", "CHAIN", lambda r: chain_text(r.failure), min_width=30, grow=4, priority=3),
            Column("status", "STATUS", lambda r: r.failure.status, min_width=10, priority=2,
                   style=lambda r: STATUS_STYLE.get(r.failure.status)),
            Column("tries", "TRIES", lambda r: str(r.failure.attempt_count), min_width=5, align="right",
                   priority=5),
            Column("code", "FAILURE", self._code_cell, min_width=22, max_width=40, grow=1, priority=2,
                   style=lambda r: LABEL_STYLE.get(r.failure.label)),
            Column("next", "NEXT", lambda r: wait_text(r.failure, self.now_ms()), min_width=9, priority=4,
                   style=lambda r: "warn"),
        ]

    @staticmethod
    def _target_cell(row: DeliveryRow) -> str:
        if not row.group_start:
            return ""
        f = row.failure
        return f"{f.platform} · {f.target_id}" if f.target_id else f.platform

    @staticmethod
    def _code_cell(row: DeliveryRow) -> str:
        f = row.failure
        if not f.failure_code:
            return f.label
        if not f.label or f.label == "dependency":
            return f.failure_code
        return f"{f.label} · {f.failure_code}"

    def row_style(self, row: DeliveryRow) -> str | None:
        return "damaged" if row.failure.problems else None

    # --- public -----------------------------------------------------------------------------------------------

    def now(self) -> float:
        app = services(self)
        clock = self.clock or (app.clock if app is not None else None)
        return float(clock()) if clock is not None else time.time()

    def now_ms(self) -> int:
        return int(self.now() * 1000)

    def show(self, sd: SessionDir, scope: DeliveryScope | None = None, *, keep_position: bool = False) -> None:
        self.sd = sd
        if scope is not None:
            self.scope = scope
        self._before = None
        self.empty_text = ("No failed or uncertain deliveries." if self.scope.session_id is None
                           else "This session has no failed or uncertain deliveries.")
        self.set_source(DeliverySource(sd, self.scope), keep_cursor=keep_position)

    def watch_operations(self, operation_ids: list[str]) -> None:
        """Follow these operations whatever their status (the operator retried them: show them through to
        delivered), then re-read what is shown and mark what changed."""
        new = tuple(dict.fromkeys(i for i in operation_ids if i not in self.scope.watch))
        if new:
            self.scope = replace(self.scope, watch=(*self.scope.watch, *new))
        if self.sd is None:
            return
        if self.loaded and self.rows:
            self._before = {row.operation_id: row.facts() for row in self.rows}
        self.set_source(DeliverySource(self.sd, self.scope), keep_cursor=True)

    def live_refresh(self) -> None:
        """Re-read what is shown (cursor kept); rows whose facts changed are marked. One re-read at a time."""
        if self.source is None or not self.loaded:
            return
        if self._before is not None and self.busy:
            self._again = True
            return
        self._before = {row.operation_id: row.facts() for row in self.rows}
        self.reload(keep_cursor=True)

    @on(RowList.Loaded)
    def _mark_after_live(self, message: RowList.Loaded) -> None:
        before = self._before
        if before is None:
            return
        self._before = None
        changed = frozenset(row.operation_id for row in self.rows if before.get(row.operation_id) != row.facts())
        if changed:
            self.mark_changed(changed)
            message.changed = changed
        if self._again:
            self._again = False
            self.live_refresh()

    @on(RowList.Failed)
    def _notify_failure(self, message: RowList.Failed) -> None:
        self._before = None
        self._again = False
        notify(self, message.error, title="Cannot read deliveries", severity="error")

    def next_wake_ms(self) -> int | None:
        """The earliest future next-attempt or lease expiry shown (to re-read when a worker may have acted)."""
        now = self.now_ms()
        times = [t for row in self.rows for t in (row.failure.next_attempt_at, row.failure.lease_expires_at)
                 if t is not None and t > now]
        return min(times) if times else None


def fact_lines(row: DeliveryRow | None, now_ms: int) -> list[Text]:
    """The selected operation in full: what and where; its chain link by link; the retry rule's answer."""
    if row is None:
        return [Text("No delivery operation selected.", style="italic")]
    f = row.failure
    bold, dim = Style(bold=True), Style(dim=True)
    head = Text(no_wrap=True, overflow="ellipsis", end="")
    head.append(one_line(f.operation_id), bold)
    head.append(f"  seq {f.sequence} {one_line(f.operation_kind)}  {one_line(f.status)}")
    if f.failure_code:
        head.append(f"  {one_line(f.failure_code)}")
    if f.label:
        head.append(f" ({f.label})", dim)
    head.append(f"  ·  {f.attempt_count} attempt{'s' if f.attempt_count != 1 else ''}", dim)
    head.append(f"  ·  updated {show(f.updated_at, SECONDS)}", dim)
    wait = wait_text(f, now_ms)
    if wait:
        head.append(f"  ·  {wait}", Style(bold=True))
    where = Text(no_wrap=True, overflow="ellipsis", end="")
    where.append("where     ", dim)
    where.append(f"{one_line(f.platform)} · {one_line(f.target_id)}")
    where.append(f"  ·  session {one_line(f.session_id)}  ·  run {one_line(f.run_id)}  ·  intent "
                 f"{one_line(f.intent_id)} ({one_line(f.intent_status)})", dim)
    chain = Text(no_wrap=True, overflow="ellipsis", end="")
    chain.append("chain     ", dim)
    links = f.chain or ()
    for n, link in enumerate(links):
        if n:
            chain.append(" → ", dim)
        label = f"{link.sequence} {one_line(link.operation_kind)} {one_line(link.status)}"
        if link.failure_code and link.status in ("failed", "uncertain", "retry_wait"):
            label += f" ({one_line(link.failure_code)})"
        chain.append(label, bold if link.operation_id == f.operation_id else Style())
    if not links:
        chain.append("(no other operation in its intent)", dim)
    dependents = f.dependents
    if dependents:
        chain.append(f"   {len(dependents)} wait{'s' if len(dependents) == 1 else ''} for it", dim)
    rule = Text(no_wrap=True, overflow="ellipsis", end="")
    rule.append("retry     ", dim)
    if f.retryable:
        rule.append("X retries it after a preview", Style(bold=True))
        more = [d for d in dependents if d.status == "failed" and d.failure_code == "dependency_failed"]
        if more:
            rule.append(f" (and reopens {len(more)} operation{'s' if len(more) != 1 else ''} failed by it)")
    elif f.status in ("failed", "uncertain"):
        rule.append(one_line(f.refusal), Style(italic=True))
    else:
        rule.append(f"{one_line(f.status)}: nothing to retry", dim)
    return [head, where, chain, rule]


class DeliveryFacts(FactsPanel[DeliveryRow]):
    """Four lines under the list: the selected operation, where it goes, its chain, and the retry rule."""

    def lines(self) -> list[Text]:
        return fact_lines(self.row, int(self.now() * 1000))


__all__ = ["DeliveryFacts", "DeliveryList", "DeliveryRow", "DeliverySource", "chain_text", "fact_lines",
           "link_mark", "wait_text"]
