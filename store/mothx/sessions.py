"""Session listing, search, details and filter facets (reference section 5).

``list_sessions`` serves windows of the session list the reference defines (``last_active_at`` =
``COALESCE(MAX(entries.timestamp), sessions.timestamp)``, newest first; title = newest ``session_info`` name;
preview = first user text; message count = ``message`` entries). The per-session aggregates come from
:mod:`store.mothx.sessionindex`, a cache outside the session directory brought up to date incrementally; the list
itself is one SQL join of the live ``sessions`` rows with that cache, sorted and filtered in SQLite. A view's
ids are kept until the database changes, so a window at any offset is a list slice plus a primary-key fetch
of its rows. Search is evaluated exactly against ``sessions.db`` (``LIKE`` over the session columns, or over
any ``entries.data`` of the session) and joined with the list.

A row is a :class:`SessionSummary` (defined with its cell decoding in :mod:`store.mothx.sessionrows`): a cell a
foreign writer left with a wrong type makes that row damaged (``problems``), never the list. Text fields are raw
data; the UI and the command line show them through the safe-text boundary.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from store import paths
from store.errors import AmbiguousSessionId, SessionNotFound, StoreError
from store.mothx.aggregates import (
    PREVIEW_BYTES,
    PREVIEW_CHARS,
    Layout,
    Scanner,
    aggregate,
    cut_preview,
    preview_from_data,
    read_layout,
    title_from_data,
)
from store.mothx.cells import as_int, as_text, bind, has_surrogates
from store.mothx.db import Database
from store.mothx.db_errors import describe_sqlite_error
from store.mothx.session_windows import RememberedWindow, View
from store.mothx.sessionindex import IndexInfo, SessionIndex, cache_path_for
from store.mothx.sessionrows import SessionSummary, ids_where, summary_from_row
from store.safetext import one_line

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

__all__ = [
    "PREVIEW_BYTES", "PREVIEW_CHARS", "cut_preview", "MIN_PREFIX", "SessionSummary", "SortKey", "SessionFilter", "SessionPage", "FacetValue",
    "Facets", "IndexInfo", "list_sessions", "count_sessions", "position_of", "get_session", "resolve_session_id",
    "facets", "refresh", "index_info", "release", "clear_cache", "like_pattern", "title_from_data", "preview_from_data",
    "defer_deletion_check", "verify_list",
]

MIN_PREFIX = 4
MAX_VIEWS = 6                   # sorted/filtered views kept per directory (100k ids are ~7 MB)
MAX_SEARCHES = 8                # search results kept per directory




class SortKey(str, Enum):
    LAST_ACTIVE = "last_active"
    TITLE = "title"
    MESSAGES = "messages"
    CWD = "cwd"
    CREATED = "created"


@dataclass(frozen=True)
class SessionFilter:
    search: str = ""
    cwd: str = ""
    project_id: str = ""
    channel_type: str = ""
    messages_only: bool = False


@dataclass(frozen=True)
class SessionPage:
    rows: list[SessionSummary]
    total: int
    has_more: bool


@dataclass(frozen=True)
class FacetValue:
    value: str       # what a SessionFilter field takes
    label: str       # what a picker shows (project name; the value itself otherwise)
    count: int       # sessions with this value


@dataclass(frozen=True)
class Facets:
    cwds: tuple[FacetValue, ...]
    projects: tuple[FacetValue, ...]
    channel_types: tuple[FacetValue, ...]


def like_pattern(query: str) -> str:
    """``%query%`` with ``\\``, ``%`` and ``_`` escaped for ``LIKE … ESCAPE '\\'``."""
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# ----------------------------------------------------------------------------------------------------------
# Views: the ids of a filtered, sorted list, computed in SQL over the index


FIRST_PART = 1_000   # a view's first rows are sorted with a bounded sort; the rest only when a window needs them
FIRST_WINDOW = 100   # ... and only this many for a screen's first window (a smaller bound sorts faster: ~3 ms of 14)


def _order_keys(layout: Layout, sort: SortKey) -> list[str]:
    """The sort key of ``sort`` as SQL expressions over ``s`` (sessions) and ``a`` (aggregates), most significant
    first, ending with the session id; none is NULL (a NULL would compare with nothing in a keyset page)."""
    r = layout.raw
    last = f"COALESCE(a.last_ts, {r['timestamp']}, '')"
    if sort is SortKey.TITLE:
        # By the text a row shows (title, else preview), case-insensitively; rows with neither at one end.
        shown = "COALESCE(NULLIF(a.title, ''), a.preview, '')"
        keys = [f"({shown} = '')", f"{shown} COLLATE NOCASE", last]
    elif sort is SortKey.MESSAGES:
        keys = ["COALESCE(a.message_count, 0)", last]
    elif sort is SortKey.CWD:
        keys = [f"COALESCE({r['cwd']}, '')", last]
    elif sort is SortKey.CREATED:
        created = f"COALESCE({r['timestamp']}, '')"
        keys = [_readable(created), created]
    else:
        keys = [_readable(last), last]
    return [*keys, f"COALESCE({r['id']}, '')"]


def _readable(time_sql: str) -> str:
    """1 for a time that starts as a date (``YYYY-``), else 0: under "last active ↓" a value that is no time
    (``not-a-time``, a foreign BLOB) sorts after every real one, not first because its text sorts high."""
    return f"(CASE WHEN typeof({time_sql}) = 'text' AND {time_sql} GLOB '[0-9][0-9][0-9][0-9]-*' THEN 1 ELSE 0 END)"


def _order_sql(layout: Layout, sort: SortKey, descending: bool) -> str:
    d = "DESC" if descending else "ASC"
    return ", ".join(f"{k} {d}" for k in _order_keys(layout, sort))


def _where_sql(layout: Layout, flt: SessionFilter) -> tuple[str, str, list[object]]:
    """(joins, where, params) for the non-search parts of ``flt``."""
    r = layout.raw
    joins, where = "", ["1"]
    params: list[object] = []
    for name, value in (("cwd", flt.cwd), ("channel_type", flt.channel_type)):
        if value:   # (a value as the list read it: text, or a foreign writer's BLOB)
            where.append(f"{r[name]} IN (CAST(? AS TEXT), CAST(? AS BLOB))")
            params += [bind(value), bind(value)]
    if flt.project_id:
        if layout.has_metadata:
            joins = " LEFT JOIN src.session_metadata m ON m.session_id = s.id"
            where.append("m.project_id = CAST(? AS TEXT)")
            params.append(bind(flt.project_id))
        else:
            where.append("0")
    if flt.messages_only:
        where.append("a.message_count > 0")
    return joins, " AND ".join(where), params


class _Lists:
    """One directory's index plus the views and searches computed from its current state."""

    def __init__(self, sd: SessionDir) -> None:
        self.index = SessionIndex(sd)
        self.lock = self.index.lock
        self.generation = -1
        self.views: OrderedDict[tuple[SessionFilter, SortKey, bool], View] = OrderedDict()
        self.searches: OrderedDict[str, frozenset[str]] = OrderedDict()
        self.hit_tables: dict[str, int] = {}  # keyset pages: search → its number in temp.session_hits
        self.hits_generation = -1  # the generation temp.session_hits was filled for
        self.keyset_reads: dict[tuple[SessionFilter, SortKey, bool], int] = {}  # keyset pages read per query

    def fresh(self, sd: SessionDir) -> None:
        self.index.ensure(sd)
        if self.generation != self.index.generation:
            self.generation = self.index.generation
            self.views.clear()
            self.searches.clear()
            self.keyset_reads.clear()

    def view(self, sd: SessionDir, flt: SessionFilter, sort: SortKey, descending: bool, need: int) -> View:
        """The list ``flt`` / ``sort`` selects, with at least its first ``need`` ids (cached until a change)."""
        with self.lock:
            self.fresh(sd)
            key = (flt, sort, descending)
            view = self.views.get(key)
            if view is not None and (view.complete or need <= len(view.ids)):
                self.views.move_to_end(key)
                return view
            if flt.search:
                base = self.view(sd, replace(flt, search=""), sort, descending, need=1 << 62)
                hits = self.search(sd, flt.search)
                ids = [i for i in base.ids if i in hits]
                view = View(ids, len(ids), True)
            else:
                layout = self.index.layout
                joins, where, params = _where_sql(layout, flt)
                body = f"FROM src.sessions s LEFT JOIN agg a ON a.session_id = s.id{joins} WHERE {where}"
                sql = f"SELECT {layout.raw['id']} {body} ORDER BY {_order_sql(layout, sort, descending)}"
                conn = self.index.conn
                if need <= FIRST_PART:
                    limit = min(FIRST_WINDOW, FIRST_PART) if need <= FIRST_WINDOW else FIRST_PART
                    kind = f"list-window:{sort.value}:{'desc' if descending else 'asc'}:{limit}"
                    remembered = RememberedWindow(sd, self.index, kind if flt == SessionFilter() else "")
                    view = remembered.recall()
                    if view is None:
                        ids = [as_text(r[0]) for r in conn.execute(f"{sql} LIMIT {limit}", params)]
                        total = len(ids)
                        if total == limit:
                            if not flt.messages_only:  # only that filter needs the aggregates: count without the join
                                body = f"FROM src.sessions s{joins} WHERE {where}"
                            total = int(conn.execute(f"SELECT count(*) {body}", params).fetchone()[0])
                        view = View(ids, total, total == len(ids))
                        remembered.remember(view)
                else:
                    ids = [as_text(r[0]) for r in conn.execute(sql, params)]
                    view = View(ids, len(ids), True)
            self.views[key] = view
            while len(self.views) > MAX_VIEWS:
                self.views.popitem(last=False)
            return view

    def rows(self, sd: SessionDir, ids: list[str]) -> list[SessionSummary]:
        """The summaries of ``ids``, in that order (ids that vanished meanwhile are left out)."""
        return _with_run_states(sd, self.summaries(ids))

    def summaries(self, ids: list[str]) -> list[tuple[SessionSummary, bool]]:
        """The summaries of ``ids`` in that order, each with whether its run state must be read; one statement
        for up to 500 ids."""
        if not ids:
            return []
        with self.lock:
            select = self.index.layout.session_select("src.", aggs=True)
            found: dict[str, tuple[SessionSummary, bool]] = {}
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                for foreign in (False, True):   # text ids first; a foreign BLOB or NULL id only when one is missing
                    sql, params = ids_where(chunk, foreign=foreign)
                    for row in self.index.conn.execute(f"{select} WHERE {sql}", params):
                        summary = summary_from_row(row)
                        found[summary[0].id] = summary
                    chunk = [sid for sid in chunk if sid not in found]
                    if not chunk:
                        break
        return [found[i] for i in ids if i in found]

    def search(self, sd: SessionDir, query: str) -> frozenset[str]:
        hit = self.searches.get(query)
        if hit is None:
            hit = _search_ids(sd, self.index.layout, query)
            self.searches[query] = hit
            while len(self.searches) > MAX_SEARCHES:
                self.searches.popitem(last=False)
        return hit

    def close(self) -> None:
        self.index.close()


def _with_run_states(sd: SessionDir, rows: list[tuple[SessionSummary, bool]]) -> list[SessionSummary]:
    """The summaries, each with its derived execution state.

    Only sessions with an active run or an active lease row can be in a state other than idle; their facts are
    read (one read transaction, the SQLite clock) and classified by :func:`store.mothx.runs.derive_execution_state`.
    :mod:`store.mothx.runs` is imported only then (it costs ~15 ms, on the way to a first window without runs).
    """
    # (an id holding surrogates cannot be bound by the runs module: such a session is shown idle)
    involved = [summary.id for summary, busy in rows if busy and not has_surrogates(summary.id)]
    if not involved:
        return [summary for summary, _ in rows]
    from store.mothx.leases import LeaseOwner
    from store.mothx.runs import derive_execution_state, read_facts_conn

    me = LeaseOwner.current().instance_id
    states: dict[str, tuple[str, int]] = {}
    with sd.db.read() as conn:
        for sid in involved:
            facts = read_facts_conn(conn, sid, schema=sd.schema)
            state = derive_execution_state(facts, me).state
            lease = facts.lease
            expires = lease.expires_at if lease is not None and lease.state == "active" else 0
            states[sid] = ("" if state == "idle" else state, expires)
    out = []
    for summary, busy in rows:
        if busy and summary.id in states:
            state, expires = states[summary.id]
            summary = replace(summary, run_state=state, lease_expires_at=expires)
        out.append(summary)
    return out


def _search_ids(sd: SessionDir, layout: Layout, query: str) -> frozenset[str]:
    """Ids of the sessions matching ``query`` as reference 5.2 defines it (``LIKE``, ASCII case-insensitive).

    The entries part is one sequential pass over ``entries`` (split over read connections by ``seq`` range
    where the machine has the cores), which reads every row once instead of probing session by session.
    """
    pattern = like_pattern(query)
    has = sd.schema.has
    seq = layout.seq
    cols = [c for c in ("id", "cwd", "channel_type", "channel_id") if has("sessions", c)]
    where = " OR ".join(f"{c} LIKE CAST(? AS TEXT) ESCAPE '\\' COLLATE NOCASE" for c in cols)
    bound = bind(pattern)
    with sd.db.read() as conn:
        ids = {as_text(r[0]) for r in conn.execute(f"SELECT CAST(id AS BLOB) FROM sessions WHERE {where}",
                                                    [bound] * len(cols))}
        max_seq = as_int(conn.execute(f"SELECT MAX({seq}) FROM entries").fetchone()[0])
    sql = (f"SELECT DISTINCT CAST(session_id AS BLOB) FROM entries WHERE {seq} > ? AND {seq} <= ? "
           "AND data LIKE CAST(? AS TEXT) ESCAPE '\\' COLLATE NOCASE")
    rows = Scanner(sd.db).ranged(sql, (bound,), 0, max_seq)
    with sd.db.read() as conn:  # rows appended while the pass ran
        rows += conn.execute(sql, (max_seq, 1 << 62, bound)).fetchall()
    ids.update(as_text(r[0]) for r in rows if r[0] is not None)
    return frozenset(ids)


# ----------------------------------------------------------------------------------------------------------
# Registry: one _Lists per open Database (released when the Database is garbage-collected)


_registry: dict[int, tuple[weakref.ref[Database], _Lists]] = {}
_registry_lock = threading.Lock()


def _lists(sd: SessionDir) -> _Lists:
    key = id(sd.db)
    with _registry_lock:
        entry = _registry.get(key)
        if entry is not None and entry[0]() is sd.db:
            return entry[1]
    made = _Lists(sd)
    with _registry_lock:
        entry = _registry.get(key)
        if entry is not None and entry[0]() is sd.db:
            made.close()
            return entry[1]

        def forget(_ref: object, key: int = key) -> None:
            with _registry_lock:
                gone = _registry.pop(key, None)
            if gone is not None:
                gone[1].close()

        _registry[key] = (weakref.ref(sd.db, forget), made)
    sd.on_close(lambda: release(sd))
    return made


@contextmanager
def _store_errors(sd: SessionDir) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise describe_sqlite_error(sd.db.path, exc) from exc


# ----------------------------------------------------------------------------------------------------------
# Public functions


def list_sessions(sd: SessionDir, flt: SessionFilter = SessionFilter(), sort: SortKey = SortKey.LAST_ACTIVE,
                  descending: bool = True, *, offset: int = 0, limit: int = 100) -> SessionPage:
    """The window ``[offset, offset + limit)`` of the filtered, sorted session list."""
    offset, limit = max(0, offset), max(0, limit)
    with _store_errors(sd):
        lists = _lists(sd)
        with lists.lock:
            view = lists.view(sd, flt, SortKey(sort), descending, need=offset + limit)
            window = view.ids[offset:offset + limit]
            rows = lists.rows(sd, window)
    return SessionPage(rows=rows, total=view.total, has_more=offset + len(window) < view.total)


def count_sessions(sd: SessionDir, flt: SessionFilter = SessionFilter()) -> int:
    with _store_errors(sd):
        return _lists(sd).view(sd, flt, SortKey.LAST_ACTIVE, True, need=0).total


def position_of(sd: SessionDir, session_id: str, flt: SessionFilter = SessionFilter(),
                sort: SortKey = SortKey.LAST_ACTIVE, descending: bool = True) -> int | None:
    """The row position of ``session_id`` in the list (to keep a cursor on it across refreshes), or None."""
    with _store_errors(sd):
        ids = _lists(sd).view(sd, flt, SortKey(sort), descending, need=1 << 62).ids
    try:
        return ids.index(session_id)
    except ValueError:
        return None


def refresh(sd: SessionDir, *, full: bool = False) -> IndexInfo:
    """Bring the list up to date now; ``full`` rebuilds the aggregates from scratch."""
    with _store_errors(sd):
        lists = _lists(sd)
        with lists.lock:
            lists.index.sync(sd, full=full)
            lists.fresh(sd)
        return lists.index.info()


def defer_deletion_check(sd: SessionDir) -> None:
    """Let the first list read of ``sd`` skip the list cache's check for deleted entries; :func:`verify_list`
    runs it later.

    Bringing the cache up to date is cheap (entries are append-only, new ones are found by ``seq``), but
    noticing deleted ones means counting every entry: 10-20 ms on a million entries, on the path to the first
    painted window. With this the first window comes from the cache as it stands plus any appended entries
    (entries of a deleted session vanish with its ``sessions`` row anyway); the caller then runs
    :func:`verify_list` and re-reads what it shows when that says something changed. Without a call to this
    function every read checks everything first, as before.
    """
    with _store_errors(sd):
        lists = _lists(sd)
        with lists.lock:
            if lists.index.token is None:       # not synced yet in this process
                lists.index.defer_deletion_check = True


def verify_list(sd: SessionDir) -> bool:
    """Run the check :func:`defer_deletion_check` put off; True when entries had been deleted (the cache is
    repaired then, and lists read from now on show it: re-read what is shown)."""
    with _store_errors(sd):
        lists = _lists(sd)
        with lists.lock:
            changed = lists.index.verify(sd)
            if changed:
                lists.fresh(sd)
        return changed


def index_info(sd: SessionDir) -> IndexInfo:
    """How the list is being served: cache file or memory, last sync kind and duration."""
    with _store_errors(sd):
        lists = _lists(sd)
        with lists.lock:
            lists.fresh(sd)
        return lists.index.info()


def release(sd: SessionDir) -> None:
    """Close this directory's list index now (it is also closed when ``sd.db`` is garbage-collected)."""
    with _registry_lock:
        entry = _registry.pop(id(sd.db), None)
    if entry is not None and entry[0]() is sd.db:
        entry[1].close()


def clear_cache(sd: SessionDir) -> None:
    """Forget the list cache of this directory (the next list call rebuilds it)."""
    with _registry_lock:
        entry = _registry.pop(id(sd.db), None)
    if entry is not None:
        entry[1].close()
    path = cache_path_for(sd.db.path)
    for p in (path, *paths.companions(path)):
        try:
            p.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"The list cache {one_line(p)} cannot be removed: {exc.strerror or exc}.") from exc


def resolve_session_id(sd: SessionDir, session_id_or_prefix: str) -> str:
    """The full id of the session named by an exact id or a unique prefix of at least 4 characters."""
    text = session_id_or_prefix.strip()
    if not text:
        raise SessionNotFound("No session id was given.")
    shown = one_line(text)
    with sd.db.read() as conn:
        if conn.execute("SELECT 1 FROM sessions WHERE id = CAST(? AS TEXT) OR id = CAST(? AS BLOB)",
                        (bind(text), bind(text))).fetchone():
            return text
        if len(text) < MIN_PREFIX:
            raise SessionNotFound(
                f"No session has the id '{shown}' (a prefix needs at least {MIN_PREFIX} characters).")
        found = [as_text(r[0]) for r in conn.execute(
            "SELECT CAST(id AS BLOB) FROM sessions WHERE id >= CAST(? AS TEXT) AND id < CAST(? AS TEXT) "
            "ORDER BY id LIMIT 6", (bind(text), bind(text + "\U0010ffff")))]
    if not found:
        raise SessionNotFound(f"No session id starts with '{shown}'.")
    if len(found) > 1:
        many = ", ".join(one_line(f) for f in found[:5]) + (", …" if len(found) > 5 else "")
        raise AmbiguousSessionId(f"'{shown}' matches more than one session ({many}); give more characters.")
    return found[0]


DIRECT_SUMMARY_ROWS = 2_000
"""A session with fewer entry rows is summarised directly rather than waiting for a busy session list."""
LIST_WAIT_S = 0.25
"""How long :func:`get_session` waits for a busy session list before summarising a big session directly."""


def _listed_summary(sd: SessionDir, sid: str) -> SessionSummary | None:
    """``sid``'s row as the session list has it, when this directory's list is open in this process (None
    otherwise: the caller computes it directly). The list's aggregates are brought up to date first.

    When another thread holds the list (a search, a sync), a small session is computed directly at once;
    for a big one (reading all its entries takes ~1.5 ms per 1,000) the list is waited for, a little.
    """
    with _registry_lock:
        entry = _registry.get(id(sd.db))
    if entry is None or entry[0]() is not sd.db:
        return None
    lists = entry[1]
    if not lists.lock.acquire(blocking=False):
        seq = "seq" if sd.schema.has("entries", "seq") else "rowid"
        with sd.db.read() as conn:   # (counted on an index: a few ms for 50,000 rows)
            rows = as_int(conn.execute(f"SELECT count(*) FROM (SELECT {seq} FROM entries WHERE session_id = "
                                       f"CAST(? AS TEXT) LIMIT {DIRECT_SUMMARY_ROWS})", (bind(sid),)).fetchone()[0])
        if rows < DIRECT_SUMMARY_ROWS or not lists.lock.acquire(timeout=LIST_WAIT_S):
            return None
    try:
        lists.fresh(sd)
        found = lists.rows(sd, [sid])
    finally:
        lists.lock.release()
    return found[0] if found else None


def get_session(sd: SessionDir, session_id_or_prefix: str) -> SessionSummary:
    """One session's summary (exact id or unique prefix ≥ 4 chars).

    When the session list of ``sd`` is open in this process (the app's Sessions screen), the row comes from its
    aggregates: one indexed read, whatever the session's size. Otherwise it is computed directly from
    ``sessions.db``, which reads every entry of the session once (``last_active_at`` is the newest timestamp,
    and ``entries`` has no index on it).
    """
    with _store_errors(sd):
        sid = resolve_session_id(sd, session_id_or_prefix)
        listed = _listed_summary(sd, sid)
        if listed is not None:
            return listed
        layout = read_layout(sd)
        where, params = ids_where([sid])
        with sd.db.read() as conn:
            row = conn.execute(layout.session_select("", aggs=False) + f" WHERE {where}", params).fetchone()
        if row is None:
            raise SessionNotFound(f"Session {one_line(sid)} no longer exists.")
        agg = aggregate(sd, layout, -(1 << 62), 1 << 62, session_ids=[sid], parallel=False).get(sid)
        summary, busy = summary_from_row(row)
        if agg is not None:
            summary = replace(summary, title=agg.title, preview=agg.preview, message_count=agg.message_count,
                              last_active_at=agg.last_ts if agg.last_ts is not None else summary.last_active_at)
        return _with_run_states(sd, [(summary, busy)])[0]


def facets(sd: SessionDir) -> Facets:
    """Distinct working directories, projects and channel types, with session counts, for filter pickers."""
    has = sd.schema.has
    with _store_errors(sd), sd.db.read() as conn:
        cwds: tuple[FacetValue, ...] = ()
        if has("sessions", "cwd"):
            cwds = tuple(FacetValue(as_text(c), as_text(c), int(n)) for c, n in conn.execute(
                "SELECT CAST(cwd AS BLOB), count(*) FROM sessions GROUP BY cwd ORDER BY cwd") if as_text(c))
        if has("sessions", "channel_type"):
            channels = tuple(FacetValue(as_text(c), as_text(c), int(n)) for c, n in conn.execute(
                "SELECT CAST(channel_type AS BLOB), count(*) FROM sessions GROUP BY channel_type "
                "ORDER BY channel_type"))
        else:
            total = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
            channels = (FacetValue("local", "local", total),) if total else ()
        projects: tuple[FacetValue, ...] = ()
        if has("projects", "id") and has("projects", "name"):
            if has("session_metadata", "project_id"):
                sql = ("SELECT CAST(p.id AS BLOB), CAST(p.name AS BLOB), (SELECT count(*) FROM session_metadata m "
                       "JOIN sessions s ON s.id = m.session_id WHERE m.project_id = p.id) FROM projects p "
                       "ORDER BY p.name, p.id")
            else:
                sql = "SELECT CAST(id AS BLOB), CAST(name AS BLOB), 0 FROM projects ORDER BY name, id"
            projects = tuple(FacetValue(as_text(i), as_text(n) or as_text(i), int(c)) for i, n, c in conn.execute(sql))
    return Facets(cwds=cwds, projects=projects, channel_types=channels)
