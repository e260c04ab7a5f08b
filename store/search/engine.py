"""Ranked search over a session directory: the FTS side index when it may be kept, the exact LIKE scan otherwise.

:func:`search` returns sessions ranked by their best hit (FTS5 ``bm25``: lower is better), each with the
matching entry (id, seq, role, type), how many of its entries match, and a snippet of the best one whose
matched words are given as spans over the snippet text (never markup: the UI styles the spans of safe text).
With ``captured=True`` the same is done over captured records (Claude Code / Codex lines), grouped by agent
session. Sessions whose own columns (id, cwd, channel) contain the typed text but no entry matches come after the
ranked ones, as the session list's search (reference 5.2) finds them too.

Where the index cannot be kept (the cache folder is not writable) the answer is the LIKE scan the session list
uses (ASCII case-insensitive substring of the session columns or of any ``entries.data``), exactly: the same
sessions, ordered by how many entries match; ``SearchResult.source`` says which one answered.

The captured records of a PostgreSQL team store are searched in the store's own ``tsvector`` index
(:mod:`store.search.team`, :mod:`store.search.pg_index`), with the same results for the same data.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from typing import TYPE_CHECKING

from store.mothx.aggregates import Scanner, read_layout
from store.mothx.cells import as_int, as_text, bind
from store.mothx.sessions import like_pattern
from store.safetext import one_line
from store.search import query as q
from store.search.index import SEQ_BITS, SEQ_MASK, SearchIndex, SearchIndexInfo
from store.search.results import (
    INDEX,
    LIKE,
    SESSION_ONLY,
    SNIPPET_TOKENS,
    Raw,
    SearchHit,
    SearchResult,
    Snippet,
    _markers,
    _page,
    _raw_page,
    _unmark,
    _with,
    like_snippet,
)
from store.search.text import entry_text, record_text

if TYPE_CHECKING:
    from store.mothx.db import Database
    from store.mothx.sessiondir import SessionDir

# ----------------------------------------------------------------------------------------------------------
# One index per open database (closed with it)


_registry: dict[int, tuple[weakref.ref[Database], SearchIndex | None, str]] = {}
_registry_lock = threading.Lock()


def _index(sd: SessionDir) -> tuple[SearchIndex | None, str]:
    key = id(sd.db)
    with _registry_lock:
        found = _registry.get(key)
        if found is not None and found[0]() is sd.db:
            return found[1], found[2]
    made = SearchIndex.open(sd)
    reason = "" if made is not None else "the search index cannot be kept (the cache folder is not writable)"
    with _registry_lock:
        found = _registry.get(key)
        if found is not None and found[0]() is sd.db:
            if made is not None:
                made.close()
            return found[1], found[2]

        def forget(_ref: object, key: int = key) -> None:
            with _registry_lock:
                gone = _registry.pop(key, None)
            if gone is not None and gone[1] is not None:
                gone[1].close()

        _registry[key] = (weakref.ref(sd.db, forget), made, reason)
    sd.on_close(lambda: release(sd))
    return made, reason


def release(sd: SessionDir) -> None:
    """Close the search index of ``sd`` now (it is also closed with the directory)."""
    with _registry_lock:
        gone = _registry.pop(id(sd.db), None)
    if gone is not None and gone[1] is not None:
        gone[1].close()


def refresh(sd: SessionDir, *, full: bool = False, captured: bool = True) -> SearchIndexInfo | None:
    """Bring the index up to date now (``full``: rebuild it); None when no index may be kept."""
    index, _ = _index(sd)
    if index is None:
        return None
    with index.lock:
        index.sync(sd, full=full, captured=captured)
        index.token = None
        return index.info()


def index_info(sd: SessionDir) -> SearchIndexInfo | None:
    index, _ = _index(sd)
    return index.info() if index is not None else None


# ----------------------------------------------------------------------------------------------------------
# Search


def search(sd: SessionDir, query: str, *, limit: int | None = 50, after: tuple[float, str] | None = None,
           captured: bool = False, snippets: bool = True, use_index: bool = True,
           index_store: bool | None = None) -> SearchResult:
    """Sessions matching ``query`` (what a user typed; never an FTS syntax error), best first.

    ``limit`` hits (None: all) after the hit whose ``key`` is ``after``. ``captured`` searches captured records
    instead of mothx entries. ``snippets=False`` is ranking only: each hit's session, score, seq and match count,
    with no snippet and (from the index) no entry id, role or type. ``use_index=False`` answers with the LIKE scan.

    Captured records of a PostgreSQL team store are searched in the store's own full-text index
    (:mod:`store.search.team`): ``index_store`` says whether this search may bring that index up to date (a
    write to the store); None: when the directory is open read-write.
    """
    if captured:
        from store.search.team import is_team_store, search_team

        if is_team_store():
            return search_team(sd, query, limit=limit, after=after, snippets=snippets, use_index=use_index,
                               index_store=index_store)
    index, reason = _index(sd) if use_index else (None, "the LIKE scan was asked for")
    if index is not None:
        try:
            with index.lock:
                index.ensure(sd, captured=captured)
                return _ranked(sd, index, query, limit, after, captured, snippets)
        except sqlite3.Error as exc:   # the index file failed (disk full, damaged): answer exactly instead
            reason = f"the search index failed ({one_line(exc)})"
    return _like(sd, query, limit, after, captured, snippets, reason)


def _ranked(sd: SessionDir, index: SearchIndex, text: str, limit: int | None, after: tuple[float, str] | None,
            captured: bool, snippets: bool) -> SearchResult:
    parsed = q.parse(text)
    raw: list[Raw] = []
    conn = index.conn
    if not parsed.empty:
        match = parsed.fts()
        if captured:
            rows = conn.execute(
                "WITH h AS MATERIALIZED (SELECT rowid AS k, bm25(record_fts) AS score FROM record_fts "
                "WHERE record_fts MATCH ?) SELECT MIN(h.score), m.agent_session_id, h.k, h.score, count(*), "
                "m.agent_id, m.file_path, m.line_number FROM h CROSS JOIN record_meta m ON m.line_key = h.k "
                "GROUP BY m.agent_id, m.agent_session_id", (match,)).fetchall()
            raw = [(*r, None) for r in rows]
        else:   # (order, session id, seq, score, matches, FTS rowid), in the order of the result
            raw = conn.execute(
                f"WITH h AS MATERIALIZED (SELECT rowid AS k, bm25(entry_fts) AS score FROM entry_fts "
                f"WHERE entry_fts MATCH ?), g AS MATERIALIZED (SELECT MIN(score) AS best, k, count(*) AS n "
                f"FROM h GROUP BY k >> {SEQ_BITS}) SELECT g.best, s.session_id, g.k & {SEQ_MASK}, g.best, g.n, g.k "
                f"FROM g CROSS JOIN entry_sessions s ON s.sno = g.k >> {SEQ_BITS} ORDER BY 1, 2",
                (match,)).fetchall()       # (MIN() makes the bare k the best hit's)
    # SQLite orders text ids as Python does (UTF-8 bytes in code point order); an id read as bytes (not UTF-8)
    # sorts after every text one there, so a result holding one is sorted again here.
    ordered = not captured and not any(type(r[1]) is bytes for r in raw)
    if not captured and text.strip():
        columns = _column_matches(sd, text)
        if columns:
            found = {r[1] for r in raw}
            raw += [(SESSION_ONLY, sid, 0, None, 0, None) for sid in sorted(columns) if sid not in found]
    total = len(raw)
    page, more = _raw_page(raw, limit, after, ordered=ordered)
    hits = _details(index, parsed, page, captured, snippets) if page else []
    return SearchResult(text, INDEX, "", tuple(hits), total, more, captured)


def _details(index: SearchIndex, parsed: q.Query, page: list[Raw], captured: bool,
             snippets: bool) -> list[SearchHit]:
    """The page's hits; with ``snippets``, each with its entry's facts and a snippet (three statements per 500
    hits). Without, ranking only: session, score, seq and matches."""
    conn = index.conn
    table = "record_fts" if captured else "entry_fts"
    marked: dict[int, Snippet] = {}
    facts: dict[int, tuple[object, ...]] = {}
    if snippets and not parsed.empty:
        rowids = [r[2] if captured else r[5] for r in page if r[2]]
        for i in range(0, len(rowids), 500):
            chunk = rowids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            if not captured:
                seqs = [int(k) & SEQ_MASK for k in chunk]
                for row in conn.execute(f"SELECT seq, entry_id, role, entry_type FROM entry_meta WHERE seq IN "
                                        f"({marks})", seqs):
                    facts[row[0]] = row[1:]
            texts = [as_text(r[0]) for r in conn.execute(f"SELECT text FROM {table} WHERE rowid IN ({marks})", chunk)]
            opening, closing = _markers(texts)
            for rowid, snip in conn.execute(
                    f"SELECT rowid, snippet({table}, 0, ?, ?, '…', {SNIPPET_TOKENS}) FROM {table} "
                    f"WHERE {table} MATCH ? AND rowid IN ({marks})", (opening, closing, parsed.fts(), *chunk)):
                marked[rowid if captured else rowid & SEQ_MASK] = _unmark(as_text(snip), opening, closing)
    empty = Snippet("")
    if not captured and not facts:    # ranking only: every hit of a common word, so built as plain tuples
        new = tuple.__new__
        return [new(SearchHit, (sid if type(sid) is str else as_text(sid), score, order, k, "", "", "", n, empty,
                                "", "", 0)) for order, sid, k, score, n, _rowid in page]
    if captured:
        return [SearchHit(as_text(sid), score, order, k, matches=n, agent_id=as_text(a), file_path=as_text(f),
                          line_number=as_int(line), snippet=marked.get(k, empty))
                for order, sid, k, score, n, a, f, line, _ in page]
    out = []
    nothing: tuple[object, ...] = ("", "", "")
    for order, sid, k, score, n, _rowid in page:
        eid, role, etype = facts.get(k, nothing)
        out.append(SearchHit(sid if type(sid) is str else as_text(sid), score, order, k,
                             eid if type(eid) is str else as_text(eid), role if type(role) is str else as_text(role),
                             etype if type(etype) is str else as_text(etype), n, marked.get(k, empty)))
    return out


def _column_matches(sd: SessionDir, text: str) -> list[str]:
    """Sessions whose own columns contain ``text`` (reference 5.2's LIKE over id, cwd, channel type and id)."""
    has = sd.schema.has
    cols = [c for c in ("id", "cwd", "channel_type", "channel_id") if has("sessions", c)]
    if not cols:
        return []
    where = " OR ".join(f"{c} LIKE CAST(? AS TEXT) ESCAPE '\\' COLLATE NOCASE" for c in cols)
    bound = bind(like_pattern(text))
    with sd.db.read() as conn:
        return [as_text(r[0]) for r in conn.execute(f"SELECT CAST(id AS BLOB) FROM sessions WHERE {where}",
                                                     [bound] * len(cols))]


# ----------------------------------------------------------------------------------------------------------
# The exact LIKE scan (no index)


def _like(sd: SessionDir, text: str, limit: int | None, after: tuple[float, str] | None, captured: bool,
          snippets: bool, reason: str) -> SearchResult:
    if not text or "\x00" in text:  # (a NUL would end SQLite's LIKE pattern early: it would match everything)
        return SearchResult(text, LIKE, reason, (), 0, False, captured)
    bound = bind(like_pattern(text))
    found: dict[str, list[int]] = {}        # session -> [first matching seq, matches]
    agents: dict[str, str] = {}
    if captured:
        db = _state(sd)
        if db is not None:
            try:
                with db.read() as conn:
                    if _has_lines(conn):
                        for sid, agent, first, n in conn.execute(
                                "SELECT CAST(s.agent_session_id AS BLOB), CAST(s.agent_id AS BLOB), MIN(l.rowid), "
                                "count(*) FROM agent_state_lines l JOIN agent_state_sessions s "
                                "ON s.session_id = l.session_id WHERE l.content LIKE CAST(? AS TEXT) ESCAPE '\\' "
                                "COLLATE NOCASE GROUP BY s.session_id", (bound,)):
                            found[as_text(sid)] = [as_int(first), as_int(n)]
                            agents[as_text(sid)] = as_text(agent)
                rows = _record_rows(db, [v[0] for v in found.values()]) if snippets else {}
            finally:
                db.close()
    else:
        seq = read_layout(sd).seq
        with sd.db.read() as conn:
            max_seq = as_int(conn.execute(f"SELECT MAX({seq}) FROM entries").fetchone()[0])
        sql = (f"SELECT CAST(session_id AS BLOB), MIN({seq}), count(*) FROM entries WHERE {seq} > ? AND {seq} <= ? "
               "AND session_id IS NOT NULL AND data LIKE CAST(? AS TEXT) ESCAPE '\\' COLLATE NOCASE GROUP BY session_id")
        parts = Scanner(sd.db).ranged(sql, (bound,), 0, max_seq)
        with sd.db.read() as conn:   # rows appended while the pass ran
            parts += conn.execute(sql, (max_seq, 1 << 62, bound)).fetchall()
        for sid, first, n in parts:
            key = as_text(sid)
            have = found.get(key)
            if have is None:
                found[key] = [as_int(first), as_int(n)]
            else:
                have[0], have[1] = min(have[0], as_int(first)), have[1] + as_int(n)
    hits = [SearchHit(sid, None, float(-n), first, matches=n, agent_id=agents.get(sid, ""))
            for sid, (first, n) in found.items()]
    if not captured:
        hits += [SearchHit(sid, None, SESSION_ONLY, 0) for sid in _column_matches(sd, text) if sid not in found]
    total = len(hits)
    page, more = _page(hits, limit, after)
    if snippets and page:
        page = _like_details(sd, text, page, captured, rows if captured else None)
    return SearchResult(text, LIKE, reason, tuple(page), total, more, captured)


def _state(sd: SessionDir) -> Database | None:
    from store.search.index import _state_db

    return _state_db(sd)


def _has_lines(conn: sqlite3.Connection) -> bool:
    from store.search.index import _has_lines as has

    return has(conn)


def _record_rows(db: Database, rowids: list[int]) -> dict[int, tuple[object, ...]]:
    out: dict[int, tuple[object, ...]] = {}
    with db.read() as conn:
        for i in range(0, len(rowids), 500):
            chunk = rowids[i:i + 500]
            for row in conn.execute(
                    f"SELECT rowid, CAST(file_path AS BLOB), line_number, content FROM agent_state_lines "
                    f"WHERE rowid IN ({','.join('?' * len(chunk))})", chunk):
                out[as_int(row[0])] = row[1:]
    return out


def _like_details(sd: SessionDir, text: str, page: list[SearchHit], captured: bool,
                  records: dict[int, tuple[object, ...]] | None) -> list[SearchHit]:
    out = []
    if captured:
        assert records is not None
        for h in page:
            row = records.get(h.seq)
            if row is None:
                out.append(h)
                continue
            out.append(_with(h, file_path=as_text(row[0]), line_number=as_int(row[1]),
                             snippet=like_snippet(record_text(row[2]), text)))
        return out
    seq = read_layout(sd).seq
    wanted = [h.seq for h in page if h.seq]
    facts: dict[int, tuple[object, ...]] = {}
    with sd.db.read() as conn:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            for row in conn.execute(f"SELECT {seq}, CAST(id AS BLOB), CAST(type AS BLOB), data FROM entries "
                                    f"WHERE {seq} IN ({','.join('?' * len(chunk))})", chunk):
                facts[as_int(row[0])] = row[1:]
    for h in page:
        f = facts.get(h.seq)
        if f is None:
            out.append(h)
            continue
        kind = as_text(f[1])
        body, role = entry_text(kind, f[2])
        out.append(_with(h, entry_id=as_text(f[0]), role=role, entry_type=kind,
                         snippet=like_snippet(body or as_text(f[2]), text)))
    return out


__all__ = ["Snippet", "SearchHit", "SearchResult", "search", "refresh", "release", "index_info", "like_snippet",
           "INDEX", "LIKE"]
