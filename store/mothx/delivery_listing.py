"""The operator view of the delivery outbox (reference 13.8) as a keyset row source: one read per page.

* :func:`list_delivery_failures` is ListDeliveryFailures: failed and uncertain operations joined with their
  intent, ``updated_at DESC``, at most ``limit`` (200) rows, optionally one session's.
* :func:`deliveries_page` is the Deliveries screen's page: the same rows (and, with ``waiting``, the
  operations waiting for a retry; ``watch`` adds operations by id whatever their status — the ones the operator
  just retried), in the order of :class:`DeliveryScope` (``grouped``: platform, target, then newest first), after
  a :class:`DeliveryCursor`. One read transaction of two queries: the page query (each row in full: the
  reference's fields, its place in the chain, wait, lease and its intent's status), then the chain links of
  the page's intents (the operations alone, by ``UNIQUE(intent_id, sequence)``), from which each row's
  dependency chain is drawn.

Both orders use the v43 indexes as the reference's listing does: ``idx_delivery_operations_claim`` for the
status, the intents' primary key for the join. Newest first, the operations are sorted alone and only the
page's intents are read. Grouped, every candidate's intent row is read for its platform and target (no v43
index holds them by intent id): on a large outbox that is the grouped page's cost over the reference's listing
(see tests/benchmarks/bench_deliveries.py).

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

# The page query reads each row in full (the reference's columns, the rowid, the row's place in its chain, wait
# and lease, and its intent's status): the bounded sorter keeps at most ``limit + 1`` rows, so wider rows cost
# nothing measurable. The second query reads the chain links of the page's intents, from the operations alone.
_COLUMNS = ("o.id, o.intent_id, i.session_id, i.run_id, i.platform, i.target_id, o.operation_kind, o.status, "
            "o.failure_code, o.attempt_count, o.updated_at, o.rowid, o.sequence, o.depends_on, o.next_attempt_at, "
            "o.lease_owner, o.lease_epoch, o.lease_expires_at, i.status")
_KEYS = {"i.platform": 4, "i.target_id": 5, "o.updated_at": 10, "o.id": 0, "o.rowid": 11}
_S, _I, _N = str, int, type(None)
# The cell types of a healthy row (nullable: depends_on, next_attempt_at, lease_expires_at): such a row is read
# directly, any other through :class:`Cells`, which names its damaged cells.
_ROW_TYPES = frozenset(
    (_S, _S, _S, _S, _S, _S, _S, _S, _S, _I, _S, _I, _I, dep, nxt, _S, _I, exp, _S)
    for dep in (_S, _N) for nxt in (_I, _N) for exp in (_I, _N))
_LINK_TYPES = frozenset(((_S, _S, _I, _S, _S, _S, _S), (_S, _S, _I, _S, _S, _S, _N)))
_CHAIN_SQL = ("SELECT o.intent_id, o.id, o.sequence, o.operation_kind, o.status, o.failure_code, o.depends_on "
              "FROM delivery_operations o WHERE o.intent_id IN ({marks}) ORDER BY o.intent_id, o.sequence")


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
        chains_of = _chains(conn, sorted({r[1] for r in page if isinstance(r[1], str)})) if chains else {}
    keys = [_KEYS[expr] for expr, _ in order]
    out = tuple(_failure(r, chains_of, keys, chains) for r in page)
    return DeliveryPage(out, out[-1].key if out else after, len(rows) > limit)


def _chains(conn: sqlite3.Connection, intent_ids: list[str]) -> dict[str, list[ChainLink]]:
    """Every operation of the given intents as a chain link, in sequence order (one query per 500 intents)."""
    out: dict[str, list[ChainLink]] = {}
    for start in range(0, len(intent_ids), 500):
        chunk = intent_ids[start:start + 500]
        for row in conn.execute(_CHAIN_SQL.format(marks=",".join("?" * len(chunk))), chunk):
            if tuple(map(type, row)) in _LINK_TYPES:
                intent_id = row[0]
                link = ChainLink(row[1], row[2], row[3], row[4], row[5], row[6] or "")
            else:
                c = Cells("delivery_operations", row)
                intent_id = c.text(0, "intent_id")
                link = ChainLink(operation_id=c.text(1, "id"), sequence=c.integer(2, "sequence"),
                                 operation_kind=c.text(3, "operation_kind"), status=c.text(4, "status"),
                                 failure_code=c.text(5, "failure_code"),
                                 depends_on=c.text_or_none(6, "depends_on") or "")
            out.setdefault(intent_id, []).append(link)
    return out


def _failure(row: Sequence[object], chains_of: dict[str, list[ChainLink]], keys: list[int],
             chains: bool) -> DeliveryFailure:
    problems: tuple[str, ...] = ()
    if tuple(map(type, row)) in _ROW_TYPES:
        (op_id, intent_id, session_id, run_id, platform, target_id, kind, status, code, attempts, updated_at, _,
         sequence, depends_on, next_at, lease_owner, lease_epoch, lease_expires, intent_status) = cast(
            "tuple[str, str, str, str, str, str, str, str, str, int, str, int, int, str | None, int | None, str, "
            "int, int | None, str]", tuple(row))
    else:  # a damaged cell, or no intent row (its cells read as NULL): read through Cells, which names it
        c = Cells("delivery_operations", row)
        op_id, intent_id = c.text(0, "id"), c.text(1, "intent_id")
        kind, status, code = c.text(6, "operation_kind"), c.text(7, "status"), c.text(8, "failure_code")
        attempts, updated_at = c.integer(9, "attempt_count"), c.text(10, "updated_at")
        sequence, depends_on = c.integer(12, "sequence"), c.text_or_none(13, "depends_on")
        next_at, lease_owner = c.integer_or_none(14, "next_attempt_at"), c.text(15, "lease_owner")
        lease_epoch, lease_expires = c.integer(16, "lease_epoch"), c.integer_or_none(17, "lease_expires_at")
        ci = Cells("delivery_intents", (*row[2:6], row[18]))
        session_id, run_id, platform, target_id = (ci.text(0, "session_id"), ci.text(1, "run_id"),
                                                   ci.text(2, "platform"), ci.text(3, "target_id"))
        intent_status = ci.text(4, "status") if row[18] is not None else ""
        problems = tuple(dict.fromkeys(c.problems + ci.problems))
    return DeliveryFailure(
        operation_id=op_id, intent_id=intent_id, session_id=session_id, run_id=run_id, platform=platform,
        target_id=target_id, operation_kind=kind, status=status, failure_code=code, attempt_count=attempts,
        updated_at=updated_at, sequence=sequence, depends_on=depends_on or "", next_attempt_at=next_at,
        lease_owner=lease_owner, lease_epoch=lease_epoch, lease_expires_at=lease_expires,
        intent_status=intent_status, chain=chain_of(op_id, chains_of.get(intent_id, ())) if chains else (),
        problems=problems, key=DeliveryCursor(tuple(row[k] for k in keys)),
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
