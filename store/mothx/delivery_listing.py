"""The operator view of the delivery outbox (reference 13.8) as a keyset row source: one read per page.

* :func:`list_delivery_failures` is ListDeliveryFailures: failed and uncertain operations joined with their
  intent, ``updated_at DESC``, at most ``limit`` (200) rows, optionally one session's.
* :func:`deliveries_page` is the Deliveries screen's page: the same rows (and, with ``waiting``, the
  operations waiting for a retry; ``watch`` adds operations by id whatever their status — the ones the operator
  just retried), in the order of :class:`DeliveryScope` (``grouped``: platform, target, then newest first), after
  a :class:`DeliveryCursor`. One read transaction: the page query, then one query for the operations of the
  page's intents, from which each row's dependency chain is drawn.

A row that holds damaged cells is listed with its problems and is never retryable. The keyset compares the
sort values as stored (``IFNULL(…, '')`` for text, then the rowid), so a damaged row pages like the others.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.mothx.cells import Cells
from store.mothx.delivery_model import (
    ATTENTION,
    ChainLink,
    DeliveryCursor,
    DeliveryFailure,
    chain_of,
)

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

PAGE = 200
"""Rows per keyset read (and the reference listing's cap)."""

WATCH_CAP = 500
"""Operations followed by id at once."""

_RECENT = (("IFNULL(o.updated_at, '')", "DESC"), ("IFNULL(o.id, '')", "DESC"), ("o.rowid", "DESC"))
_GROUPED = (("IFNULL(i.platform, '')", "ASC"), ("IFNULL(i.target_id, '')", "ASC"), *_RECENT)

_COLUMNS = ("o.id, o.intent_id, i.session_id, i.run_id, i.platform, i.target_id, o.operation_kind, o.status, "
            "o.failure_code, o.attempt_count, o.updated_at, o.sequence, o.depends_on, o.next_attempt_at, "
            "o.lease_owner, o.lease_epoch, o.lease_expires_at, i.status")
_WIDTH = 18


@dataclass(frozen=True)
class DeliveryScope:
    """Which operations the view lists and in which order."""

    session_id: str | None = None  # None: every session
    waiting: bool = False  # also operations in retry_wait after a failed attempt (they have a countdown)
    watch: tuple[str, ...] = ()  # also these operations, whatever their status
    grouped: bool = False  # platform, target, then newest first (else newest first, as the reference)
    only_watch: bool = False  # the watched operations alone


@dataclass(frozen=True)
class DeliveryPage:
    """One keyset read: the rows, the key the next page starts after, and whether more rows follow."""

    rows: tuple[DeliveryFailure, ...]
    after: DeliveryCursor | None
    more: bool


def _order(scope: DeliveryScope) -> tuple[tuple[str, str], ...]:
    return _GROUPED if scope.grouped else _RECENT


def _after(order: Sequence[tuple[str, str]], values: Sequence[object]) -> tuple[str, list[object]]:
    """Rows strictly after ``values`` in ``order`` (a lexicographic keyset over mixed directions)."""
    ors: list[str] = []
    args: list[object] = []
    for n, (expr, direction) in enumerate(order):
        parts = []
        for m in range(n):
            parts.append(f"{order[m][0]} = ?")
            args.append(values[m])
        parts.append(f"{expr} {'<' if direction == 'DESC' else '>'} ?")
        args.append(values[n])
        ors.append("(" + " AND ".join(parts) + ")")
    return "(" + " OR ".join(ors) + ")", args


def _where(scope: DeliveryScope) -> tuple[list[str], list[object]]:
    statuses = list(ATTENTION)
    wanted = "0" if scope.only_watch else f"o.status IN ({','.join('?' * len(statuses))})"
    args: list[object] = [] if scope.only_watch else list(statuses)
    if scope.waiting and not scope.only_watch:
        wanted += " OR (o.status = 'retry_wait' AND o.attempt_count > 0 AND o.failure_code != '')"
    if scope.watch:
        ids = list(scope.watch[:WATCH_CAP])
        wanted += f" OR o.id IN ({','.join('?' * len(ids))})"
        args.extend(ids)
    where = [f"({wanted})"]
    if scope.session_id is not None:
        where.append("i.session_id = ?")
        args.append(scope.session_id)
    return where, args


def deliveries_page(sd: SessionDir, scope: DeliveryScope, *, after: DeliveryCursor | None = None,
                    limit: int = PAGE) -> DeliveryPage:
    """The next ``limit`` rows of ``scope`` after ``after`` (``limit + 1`` read, to know whether more follow),
    each with its dependency chain; one read transaction."""
    if limit <= 0 or not sd.schema.has("delivery_operations") or not sd.schema.has("delivery_intents"):
        return DeliveryPage((), after, False)
    order = _order(scope)
    where, args = _where(scope)
    if after is not None:
        sql, more = _after(order, after.values)
        where.append(sql)
        args.extend(more)
    keys = ", ".join(expr for expr, _ in order)
    with sd.db.read() as conn:
        rows = conn.execute(
            f"SELECT {_COLUMNS}, {keys} FROM delivery_operations o JOIN delivery_intents i ON i.id = o.intent_id "
            f"WHERE {' AND '.join(where)} ORDER BY {', '.join(f'{e} {d}' for e, d in order)} LIMIT ?",
            (*args, limit + 1)).fetchall()
        page = rows[:limit]
        chains = _links(conn, sorted({r[1] for r in page if isinstance(r[1], str)}))
    out = tuple(_failure(r, chains.get(r[1], ()) if isinstance(r[1], str) else (), len(order)) for r in page)
    return DeliveryPage(out, out[-1].key if out else after, len(rows) > limit)


def _links(conn: sqlite3.Connection, intent_ids: list[str]) -> dict[str, list[ChainLink]]:
    out: dict[str, list[ChainLink]] = {}
    for start in range(0, len(intent_ids), 500):
        chunk = intent_ids[start:start + 500]
        for row in conn.execute(
            "SELECT intent_id, id, sequence, operation_kind, status, failure_code, depends_on FROM "
            f"delivery_operations WHERE intent_id IN ({','.join('?' * len(chunk))}) ORDER BY intent_id, sequence",
            chunk,
        ):
            c = Cells("delivery_operations", row)
            out.setdefault(c.text(0, "intent_id"), []).append(ChainLink(
                operation_id=c.text(1, "id"), sequence=c.integer(2, "sequence"),
                operation_kind=c.text(3, "operation_kind"), status=c.text(4, "status"),
                failure_code=c.text(5, "failure_code"), depends_on=c.text_or_none(6, "depends_on") or ""))
    return out


def _failure(row: Sequence[object], links: Sequence[ChainLink], keys: int) -> DeliveryFailure:
    c = Cells("delivery_operations", row[:_WIDTH])
    op_id = c.text(0, "id")
    return DeliveryFailure(
        operation_id=op_id, intent_id=c.text(1, "intent_id"), session_id=c.text(2, "session_id"),
        run_id=c.text(3, "run_id"), platform=c.text(4, "platform"), target_id=c.text(5, "target_id"),
        operation_kind=c.text(6, "operation_kind"), status=c.text(7, "status"),
        failure_code=c.text(8, "failure_code"), attempt_count=c.integer(9, "attempt_count"),
        updated_at=c.text(10, "updated_at"), sequence=c.integer(11, "sequence"),
        depends_on=c.text_or_none(12, "depends_on") or "", next_attempt_at=c.integer_or_none(13, "next_attempt_at"),
        lease_owner=c.text(14, "lease_owner"), lease_epoch=c.integer(15, "lease_epoch"),
        lease_expires_at=c.integer_or_none(16, "lease_expires_at"), intent_status=c.text(17, "intent.status"),
        chain=chain_of(op_id, links), problems=c.problems,
        key=DeliveryCursor(tuple(row[_WIDTH:_WIDTH + keys])),
    )


def list_delivery_failures(sd: SessionDir, session_id: str | None = None, limit: int = PAGE) -> list[DeliveryFailure]:
    """ListDeliveryFailures: failed and uncertain operations, newest first, at most ``limit``."""
    rows: list[DeliveryFailure] = []
    after: DeliveryCursor | None = None
    while len(rows) < limit:
        page = deliveries_page(sd, DeliveryScope(session_id), after=after, limit=min(PAGE, limit - len(rows)))
        rows.extend(page.rows)
        if not page.more:
            break
        after = page.after
    return rows


def get_delivery_failure(sd: SessionDir, operation_id: str) -> DeliveryFailure | None:
    """One operation as a row of the view, whatever its status (``None``: no such operation)."""
    page = deliveries_page(sd, DeliveryScope(watch=(operation_id,), only_watch=True), limit=PAGE)
    return next((r for r in page.rows if r.operation_id == operation_id), None)
