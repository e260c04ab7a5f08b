"""The session list read by keyset: one page after (or before) a session, one SQL statement per page.

:func:`sessions_page` is the row source of the Sessions screen's list. The order is the list's sort key, the same
``ORDER BY`` as :func:`store.mothx.sessions.list_sessions` (which reads a window by position, for the command
line's ``--offset``); ties are broken by the session id, so every row has one place. A page after session ``X``
is the rows whose key comes after ``X``'s key, with ``X``'s key computed by the same statement from ``X``'s
row (a row-value comparison with a sub-select): nothing is remembered between pages, any depth costs the same
one statement, and rows added or removed above the page do not shift it. ``X`` itself may have moved (its last
activity changed) or gone: the page then starts after its new place, or raises :class:`AnchorGone` (the list
reads its window again).

Scrolling on through a long list, the same full ordering would be computed for every page; so once a query
has been paged by keyset :data:`ORDER_AFTER` times in one database state, its whole order of ids is computed
once (one statement, cached until the database changes, as the command line's views are), and later pages
find their anchor in it and read their rows by id: still one statement per page, with the same result.

A search filter (``SessionFilter.search``) is resolved once per database state to the matching ids, kept in a
temporary table of the cache connection, and joined like any other filter.

Rows are :class:`store.mothx.sessionrows.SessionSummary` values with their run state (read for the sessions
with an active run or lease only, as the list does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.mothx.cells import bind
from store.mothx.sessionrows import SessionSummary, summary_from_row
from store.mothx.sessions import (
    SessionFilter,
    SortKey,
    _lists,
    _order_keys,
    _store_errors,
    _where_sql,
    _with_run_states,
)

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import _Lists


_EVERY_SESSION = SessionFilter()

ORDER_AFTER = 3
"""Keyset pages of one query (in one database state) after which its whole order is computed and kept."""


class AnchorGone(LookupError):
    """The session a page was to start after (or end before) is no longer in the list."""


@dataclass(frozen=True)
class SessionsPage:
    """One keyset page: ``rows`` in list order, and whether more rows lie beyond them in the direction read."""

    rows: tuple[SessionSummary, ...]
    more: bool


def _hits_table(lists: _Lists, sd: SessionDir, query: str) -> int:
    """The number under which the ids matching ``query`` are in ``temp.session_hits`` (filled once per query and
    database state)."""
    conn = lists.index.conn
    tables = lists.hit_tables
    if lists.hits_generation != lists.generation:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS session_hits (q INTEGER NOT NULL, id TEXT NOT NULL, "
                     "PRIMARY KEY (q, id)) WITHOUT ROWID")
        conn.execute("DELETE FROM temp.session_hits")
        tables.clear()
        lists.hits_generation = lists.generation
    number = tables.get(query)
    if number is None:
        number = len(tables)
        hits = lists.search(sd, query)
        conn.executemany("INSERT OR IGNORE INTO temp.session_hits VALUES (?, ?)",
                         ((number, bind(sid)) for sid in hits))
        tables[query] = number
    return number


def _from_order(lists: _Lists, sd: SessionDir, flt: SessionFilter, sort: SortKey, descending: bool,
                anchor: str | None, backwards: bool, limit: int) -> tuple[list[tuple[SessionSummary, bool]], bool] | None:
    """The page from the query's whole order when it is known (or due, see :data:`ORDER_AFTER`); else None."""
    query = (flt, sort, descending)
    view = lists.views.get(query)
    if view is None or not view.complete:
        reads = lists.keyset_reads.get(query, 0) + 1
        lists.keyset_reads[query] = reads
        if reads < ORDER_AFTER:
            return None
        view = lists.view(sd, flt, sort, descending, need=1 << 62)
    positions = view.positions()
    if anchor is None:
        start = max(0, len(view.ids) - limit)
        ids, more = view.ids[start:], start > 0
    else:
        at = positions.get(anchor)
        if at is None:
            raise AnchorGone(f"session {anchor} is no longer listed")
        if backwards:
            start = max(0, at - limit)
            ids, more = view.ids[start:at], start > 0
        else:
            ids, more = view.ids[at + 1:at + 1 + limit], at + 1 + limit < len(view.ids)
    return lists.summaries(ids), more


def sessions_page(
    sd: SessionDir,
    flt: SessionFilter = _EVERY_SESSION,
    sort: SortKey = SortKey.LAST_ACTIVE,
    descending: bool = True,
    *,
    after: str | None = None,
    before: str | None = None,
    last: bool = False,
    limit: int = 100,
) -> SessionsPage:
    """The ``limit`` sessions after ``after`` (or the first ones), before ``before``, or the last ones (``last``),
    in list order. One statement, whatever the depth (see the module's documentation)."""
    if after is not None and before is not None:
        raise ValueError("a page is read after a session or before one, not both")
    limit = max(1, limit)
    sort = SortKey(sort)
    backwards = before is not None or last
    with _store_errors(sd):
        lists = _lists(sd)
        with lists.lock:
            lists.fresh(sd)
            anchor = after if after is not None else before
            if anchor is not None or last:
                cached = _from_order(lists, sd, flt, sort, descending, anchor, backwards, limit)
                if cached is not None:
                    rows, more = cached
                    return SessionsPage(tuple(_with_run_states(sd, rows)), more)
            layout = lists.index.layout
            _joins, where, params = _where_sql(layout, flt)  # session_select already joins session_metadata
            if flt.search:
                where += " AND s.id IN (SELECT id FROM temp.session_hits WHERE q = ?)"
                params = [*params, _hits_table(lists, sd, flt.search)]
            keys = _order_keys(layout, sort)
            ascending = descending if backwards else not descending
            order = ", ".join(f"{k} {'ASC' if ascending else 'DESC'}" for k in keys)
            if anchor is not None:
                row_keys = ", ".join(keys)
                where += (f" AND ({row_keys}) {'>' if ascending else '<'} (SELECT {row_keys} FROM src.sessions s "
                          f"LEFT JOIN agg a ON a.session_id = s.id WHERE s.id = CAST(? AS TEXT))")
                params = [*params, bind(anchor)]
            select = layout.session_select("src.", aggs=True)
            sql = f"{select} WHERE {where} ORDER BY {order} LIMIT {limit + 1}"
            conn = lists.index.conn
            found = [summary_from_row(row) for row in conn.execute(sql, params)]
            # No row: the anchor was the last one, or it is gone (its key, NULL, compares with nothing).
            if not found and anchor is not None and conn.execute(
                    "SELECT 1 FROM src.sessions WHERE id = CAST(? AS TEXT)", (bind(anchor),)).fetchone() is None:
                raise AnchorGone(f"session {anchor} is no longer listed")
    more = len(found) > limit
    found = found[:limit]
    if backwards:
        found.reverse()
    return SessionsPage(tuple(_with_run_states(sd, found)), more)


__all__ = ["AnchorGone", "SessionsPage", "sessions_page"]
