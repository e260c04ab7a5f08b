"""The operator view of the delivery outbox (reference 13.8) as a keyset row source: one read per page.

* :func:`list_delivery_failures` is ListDeliveryFailures: failed and uncertain operations joined with their
  intent, ``updated_at DESC``, at most ``limit`` (200) rows, optionally one session's.
* :func:`deliveries_page` is the Deliveries screen's page: the same rows (and, with ``waiting``, the
  operations waiting for a retry; ``watch`` adds operations by id whatever their status — the ones the operator
  just retried), in the order of :class:`DeliveryScope` (``grouped``: platform, target, then newest first), after
  a :class:`DeliveryCursor`. One read transaction: the page query, then one query for the operations of the
  page's intents, from which each row's dependency chain is drawn.

A row that holds damaged cells is listed with its problems and is never retryable; so is an operation whose
intent row is missing (its intent's cells read as ``NULL``). The keyset compares the
sort values as stored (``IFNULL(…, '')`` for text, then the rowid), so a damaged row pages like the others.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

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

_RECENT = (("o.updated_at", "DESC"), ("o.id", "DESC"), ("o.rowid", "DESC"))
_GROUPED = (("i.platform", "ASC"), ("i.target_id", "ASC"), *_RECENT)

# The page query reads the reference's columns (and the rowid) alone: the sorter then handles rows as narrow as
# the bare operator view's; the rest of each row (its place in the chain, wait and lease) comes from the query
# over the page's intents, in the same read transaction.
_COLUMNS = ("o.id, o.intent_id, i.session_id, i.run_id, i.platform, i.target_id, o.operation_kind, o.status, "
            "o.failure_code, o.attempt_count, o.updated_at, o.rowid")
_WIDTH = 12
_KEYS = {"i.platform": 4, "i.target_id": 5, "o.updated_at": 10, "o.id": 0, "o.rowid": 11}


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
    """Rows strictly after ``values`` in ``order`` (a lexicographic keyset over mixed directions). SQLite sorts
    ``NULL`` first: a damaged ``NULL`` pages like any value."""
    ors: list[str] = []
    args: list[object] = []
    for n, (expr, direction) in enumerate(order):
        parts = []
        for m in range(n):
            parts.append(f"{order[m][0]} IS ?")
            args.append(values[m])
        value = values[n]
        if direction == "DESC":
            if value is None:
                continue  # nothing sorts below NULL
            parts.append(f"({expr} < ? OR {expr} IS NULL)")
        elif value is None:
            parts.append(f"{expr} IS NOT NULL")
        else:
            parts.append(f"{expr} > ?")
        if value is not None:
            args.append(value)
        ors.append("(" + " AND ".join(parts) + ")")
    return "(" + (" OR ".join(ors) or "0") + ")", args


def _where(scope: DeliveryScope) -> tuple[list[str], list[object]]:
    statuses = [*ATTENTION, "retry_wait"] if scope.waiting else list(ATTENTION)
    wanted = "0" if scope.only_watch else f"o.status IN ({','.join('?' * len(statuses))})"
    args: list[object] = [] if scope.only_watch else list(statuses)
    if scope.waiting and not scope.only_watch:  # a retry after a failed attempt, not a first attempt's wait
        wanted = f"({wanted} AND (o.status != 'retry_wait' OR (o.attempt_count > 0 AND o.failure_code != '')))"
    if scope.watch:
        ids = list(scope.watch[:WATCH_CAP])
        wanted += f" OR o.id IN ({','.join('?' * len(ids))})"
        args.extend(ids)
    where = [f"({wanted})"]
    if scope.session_id is not None:
        where.append("o.intent_id IN (SELECT id FROM delivery_intents WHERE session_id = ?)")
        args.append(scope.session_id)
    return where, args


def deliveries_page(sd: SessionDir, scope: DeliveryScope, *, after: DeliveryCursor | None = None,
                    limit: int = PAGE, chains: bool = True) -> DeliveryPage:
    """The next ``limit`` rows of ``scope`` after ``after`` (``limit + 1`` read, to know whether more follow),
    each with its dependency chain, wait and lease (``chains=False``: the reference's fields alone, one query);
    one read transaction."""
    if limit <= 0 or not sd.schema.has("delivery_operations") or not sd.schema.has("delivery_intents"):
        return DeliveryPage((), after, False)
    order = _order(scope)
    where, args = _where(scope)
    if after is not None:
        sql, more = _after(order, after.values)
        where.append(sql)
        args.extend(more)
    order_by = ", ".join(f"{e} {d}" for e, d in order)
    if scope.grouped:  # the sort needs each candidate's intent (platform, target)
        sql = (f"SELECT {_COLUMNS} FROM delivery_operations o LEFT JOIN delivery_intents i ON i.id = o.intent_id "
               f"WHERE {' AND '.join(where)} ORDER BY {order_by} LIMIT ?")
    else:  # sort the operations alone, then join the page's intents: no intent is read for a row not shown
        sql = (f"SELECT {_COLUMNS} FROM (SELECT o.rowid AS rid FROM delivery_operations o "
               f"WHERE {' AND '.join(where)} ORDER BY {order_by} LIMIT ?) k "
               f"JOIN delivery_operations o ON o.rowid = k.rid LEFT JOIN delivery_intents i ON i.id = o.intent_id "
               f"ORDER BY {order_by}")
    with sd.db.read() as conn:
        rows = conn.execute(sql, (*args, limit + 1)).fetchall()
        page = rows[:limit]
        intents = sorted({r[1] for r in page if isinstance(r[1], str)})
        details, statuses = _details(conn, intents) if chains else ({}, {})
    keys = [_KEYS[expr] for expr, _ in order]
    out = tuple(_failure(r, details, statuses, keys) for r in page)
    return DeliveryPage(out, out[-1].key if out else after, len(rows) > limit)


@dataclass(frozen=True)
class _Detail:
    link: ChainLink
    next_attempt_at: int | None
    lease_owner: str
    lease_epoch: int
    lease_expires_at: int | None
    problems: tuple[str, ...]


_DETAIL_TYPES: tuple[type | tuple[type, ...], ...] = (
    str, str, int, str, str, str, (str, type(None)), (int, type(None)), str, int, (int, type(None)), str)


def _details(conn: sqlite3.Connection, intent_ids: list[str]) -> tuple[
        dict[str, list[_Detail]], dict[str, tuple[str, tuple[str, ...]]]]:
    """Every operation of the given intents in sequence order, with what a row shows besides the reference's
    fields, and each intent's status (one query per 500 intents). A row of the expected cell types is read
    directly; any other goes through :class:`Cells`, which names its damaged cells."""
    out: dict[str, list[_Detail]] = {}
    statuses: dict[str, tuple[str, tuple[str, ...]]] = {}
    for start in range(0, len(intent_ids), 500):
        chunk = intent_ids[start:start + 500]
        for row in conn.execute(
            "SELECT o.intent_id, o.id, o.sequence, o.operation_kind, o.status, o.failure_code, o.depends_on, "
            "o.next_attempt_at, o.lease_owner, o.lease_epoch, o.lease_expires_at, i.status "
            "FROM delivery_operations o JOIN delivery_intents i ON i.id = o.intent_id "
            f"WHERE o.intent_id IN ({','.join('?' * len(chunk))}) ORDER BY o.intent_id, o.sequence",
            chunk,
        ):
            if all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(row, _DETAIL_TYPES, strict=False)):
                intent_id = row[0]
                detail = _Detail(ChainLink(row[1], row[2], row[3], row[4], row[5], row[6] or ""), row[7], row[8],
                                 row[9], row[10], ())
                if intent_id not in statuses:
                    statuses[intent_id] = (row[11], ())
            else:
                c = Cells("delivery_operations", row[:11])
                ci = Cells("delivery_intents", row[11:])
                intent_id = c.text(0, "intent_id")
                link = ChainLink(operation_id=c.text(1, "id"), sequence=c.integer(2, "sequence"),
                                 operation_kind=c.text(3, "operation_kind"), status=c.text(4, "status"),
                                 failure_code=c.text(5, "failure_code"),
                                 depends_on=c.text_or_none(6, "depends_on") or "")
                detail = _Detail(link, c.integer_or_none(7, "next_attempt_at"), c.text(8, "lease_owner"),
                                 c.integer(9, "lease_epoch"), c.integer_or_none(10, "lease_expires_at"), c.problems)
                if intent_id not in statuses:
                    statuses[intent_id] = (ci.text(0, "status"), ci.problems)
            out.setdefault(intent_id, []).append(detail)
    return out, statuses


def _failure(row: Sequence[object], details: dict[str, list[_Detail]],
             statuses: dict[str, tuple[str, tuple[str, ...]]], keys: list[int]) -> DeliveryFailure:
    found: tuple[str, ...] = ()
    attempts_cell, updated_cell = row[9], row[10]
    if (all(type(v) is str for v in row[:9]) and type(attempts_cell) is int
            and isinstance(updated_cell, str)):
        texts = cast("tuple[str, str, str, str, str, str, str, str, str]", row[:9])
        op_id, intent_id, session_id, run_id, platform, target_id, kind, status, code = texts
        attempts, updated_at = attempts_cell, updated_cell
    else:  # a damaged cell: read through Cells, which names it
        c = Cells("delivery_operations", row[:_WIDTH])
        op_id, intent_id = c.text(0, "id"), c.text(1, "intent_id")
        ci = Cells("delivery_intents", row[2:6])
        session_id, run_id, platform, target_id = (ci.text(0, "session_id"), ci.text(1, "run_id"),
                                                   ci.text(2, "platform"), ci.text(3, "target_id"))
        kind, status, code = c.text(6, "operation_kind"), c.text(7, "status"), c.text(8, "failure_code")
        attempts, updated_at = c.integer(9, "attempt_count"), c.text(10, "updated_at")
        found = c.problems + ci.problems
    mine = details.get(intent_id, [])
    detail = next((d for d in mine if d.link.operation_id == op_id), None)
    intent_status, intent_problems = statuses.get(intent_id, ("", ()))
    problems = found + (detail.problems if detail else ()) + intent_problems
    return DeliveryFailure(
        operation_id=op_id, intent_id=intent_id, session_id=session_id, run_id=run_id, platform=platform,
        target_id=target_id, operation_kind=kind, status=status, failure_code=code, attempt_count=attempts,
        updated_at=updated_at, sequence=detail.link.sequence if detail else 0,
        depends_on=detail.link.depends_on if detail else "",
        next_attempt_at=detail.next_attempt_at if detail else None,
        lease_owner=detail.lease_owner if detail else "", lease_epoch=detail.lease_epoch if detail else 0,
        lease_expires_at=detail.lease_expires_at if detail else None, intent_status=intent_status,
        chain=chain_of(op_id, [d.link for d in mine]), problems=tuple(dict.fromkeys(problems)),
        key=DeliveryCursor(tuple(row[k] for k in keys)),
    )


def list_delivery_failures(sd: SessionDir, session_id: str | None = None, limit: int = PAGE, *,
                           chains: bool = True) -> list[DeliveryFailure]:
    """ListDeliveryFailures: failed and uncertain operations, newest first, at most ``limit`` (``chains=False``:
    the reference's fields alone, as the ``deliveries`` command prints them)."""
    rows: list[DeliveryFailure] = []
    after: DeliveryCursor | None = None
    while len(rows) < limit:
        page = deliveries_page(sd, DeliveryScope(session_id), after=after, limit=min(PAGE, limit - len(rows)),
                               chains=chains)
        rows.extend(page.rows)
        if not page.more:
            break
        after = page.after
    return rows


def get_delivery_failure(sd: SessionDir, operation_id: str) -> DeliveryFailure | None:
    """One operation as a row of the view, whatever its status (``None``: no such operation)."""
    page = deliveries_page(sd, DeliveryScope(watch=(operation_id,), only_watch=True), limit=PAGE)
    return next((r for r in page.rows if r.operation_id == operation_id), None)
