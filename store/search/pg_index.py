"""Ranked full-text search over the captured records of a PostgreSQL checkpoint store (the team store).

The index lives in the store itself (layout migration 3, :mod:`store.agents.checkpoint_schema`):
``agent_state_search`` holds one ``tsvector`` per captured line with text, with a GIN index. Its text is the
one :func:`store.search.text.record_text` gives the SQLite side index, and its words are the ones SQLite's FTS5
finds (:mod:`store.search.tokens`, written as a ``tsvector`` literal, never parsed by PostgreSQL's own parser,
which splits text otherwise); a query is a ``tsquery`` literal of the same tokens
(:func:`tsquery`), so both engines match the same records for the same data and no typed text is syntax.

**Incremental, on search, not at capture.** Capture stays as it is (its speed matters): every line it writes
gets, through a column default, the id of the transaction that wrote it (``search_xid``). :func:`refresh` —
run by the first search in a write mode, and by every later one — indexes the lines whose ``search_xid`` is
at or above the *watermark* and that are not indexed yet, then moves the watermark to the oldest transaction
still running when it began (``txid_snapshot_xmin``): every line of a transaction below it was visible to the
pass, so nothing committed late is ever skipped, whatever order concurrent captures commit in. A line
deleted or rewritten by a capture takes its index row with it (``ON DELETE CASCADE``); a rewritten line comes
back with a new ``search_xid``. Indexers queue on an advisory lock; each chunk commits, so an interrupted build
resumes where it stopped.

**Read modes never write.** A read mode (one ``READ ONLY`` transaction, one snapshot) answers from the index
for what it holds and searches the lines past the watermark that it does not hold yet (:func:`newer_lines`)
exactly: each one's text is cut into the very ``tsvector`` :func:`refresh` would write, the few an in-memory
FTS5 table finds for the query (:func:`memory_fts`) are matched and ranked by PostgreSQL as literals, and they
join the index's hits in the one grouping statement (:func:`ranked_in`), so the answer is the one a fully
indexed store gives. That costs 20–50 µs a line in Python, so it is bounded: past :data:`NEWER_CAP` lines
(counted with a bounded read, :func:`backlog`) the lines past the watermark are searched by the exact scan
(``ILIKE`` over the raw record) inside the statement that reads the index (:func:`behind_scan`); those hits
come unranked after the ranked ones and the result says so. With no index at all (a version-2 store) or one
never built, every line is the backlog: up to the cap it is ranked the same way (the fully indexed answer
without an index), past it the exact scan (``ILIKE``, as SQLite's ``LIKE`` fallback) answers and says why.
PostgreSQL's own ``to_tsvector`` is not used for either: its parser cuts other words than FTS5's, so it would
find other records than the index (and than SQLite) for the same query.

Ranking is ``ts_rank_cd`` (cover density, normalised by the log of the record's length); a session's rank is
its best record's. Limits of ``tsvector`` (documented): a word longer than 2,046 bytes is not indexed, a
record keeps at most 256 positions per word and positions past 16,383 count as 16,383 (a phrase there may
not be found on PostgreSQL).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from store.agents.checkpoint_engine import PgConnection, PgStore, has_table, pg_sql
from store.search.index import fts_text
from store.search.query import Query
from store.search.text import record_text
from store.search.tokens import tokens

WATERMARK = "search_watermark"
"""``agent_state_meta`` row: lines with ``search_xid`` below it are all indexed (absent: never built)."""
INDEX_LOCK = 0x5E55_5EA0
"""The advisory lock indexers queue on."""
SESSIONS_PER_CHUNK = 64
MAX_LEXEME_BYTES = 2046
MAX_POSITIONS = 256
MAX_POSITION = 16_383
MAX_VECTOR_BYTES = 900_000
NEWER_BATCH = 2_000
"""Lines past the watermark read (and matched) per step of a read mode's exact pass."""
NEWER_CAP = 5_000
"""The most lines past the watermark a read mode cuts into words and ranks itself (20–50 µs each in Python:
at most about a quarter of a second). A longer backlog is searched by the exact scan inside the statement
that reads the index (:func:`behind_scan`): one bounded query, whatever the backlog's size."""


@dataclass(frozen=True)
class RefreshStats:
    kind: str              # "cold" (first build), "incremental", "unchanged"
    lines: int             # lines read
    indexed: int           # rows written (lines with text)
    seconds: float


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


_POSITIONS = [str(min(i, MAX_POSITION)) for i in range(MAX_POSITION + 2)]
_quoted: dict[str, str | None] = {}


def _lexeme(tok: str) -> str | None:
    """The quoted lexeme of a token (None: too long for a tsvector), cached."""
    out = _quoted.get(tok, "")
    if out == "":
        size = len(tok) if tok.isascii() else len(tok.encode("utf-8"))
        out = None if size > MAX_LEXEME_BYTES else (_quote(tok) + ":") if ("'" in tok or "\\" in tok) \
            else "'" + tok + "':"
        if len(_quoted) > 200_000:
            _quoted.clear()
        _quoted[tok] = out
    return out


def tsvector(text: str) -> str:
    """The ``tsvector`` literal of ``text``'s FTS5 tokens with their positions ("" when it has none)."""
    where: dict[str, list[str]] = {}
    last = len(_POSITIONS) - 1
    for pos, tok in enumerate(tokens(fts_text(text)), 1):
        found = where.get(tok)
        if found is None:
            where[tok] = [_POSITIONS[pos if pos < last else last]]
        elif len(found) < MAX_POSITIONS:
            found.append(_POSITIONS[pos if pos < last else last])
    parts = []
    size = 0
    for tok, positions in where.items():
        head = _lexeme(tok)
        if head is None:
            continue
        size += len(head) + 3 * len(positions)
        if size > MAX_VECTOR_BYTES:
            break
        parts.append(head + ",".join(positions))
    return " ".join(parts)


def tsquery(parsed: Query) -> str | None:
    """The ``tsquery`` literal of a parsed query: its terms ANDed, a phrase as ``<->``, a prefix as ``:*``. None
    when it can match nothing (no term, or a term with no FTS5 token, which FTS5 matches nowhere either)."""
    if parsed.empty:
        return None
    out = []
    for term in parsed.terms:
        toks = [t for t in tokens(fts_text(" ".join(term.words)))]
        if not toks or any(len(t.encode("utf-8")) > MAX_LEXEME_BYTES for t in toks):
            return None
        parts = [_quote(t) for t in toks]
        if term.prefix:
            parts[-1] += ":*"
        out.append(parts[0] if len(parts) == 1 else "(" + " <-> ".join(parts) + ")")
    return " & ".join(out)


# ----------------------------------------------------------------------------------------------------------
# State


def index_exists(conn: PgConnection) -> bool:
    return has_table(conn, "agent_state_search")


def watermark(conn: PgConnection) -> int | None:
    row = conn.execute("SELECT value FROM agent_state_meta WHERE name = ?", (WATERMARK,)).fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else None


_PENDING = (
    "SELECT l.session_id, l.file_path, l.line_number, l.search_xid, l.content FROM agent_state_lines l "
    "WHERE {where} AND NOT EXISTS (SELECT 1 FROM agent_state_search s WHERE s.session_id = l.session_id "
    "AND s.file_path = l.file_path AND s.line_number = l.line_number "
    "AND s.line_xid IS NOT DISTINCT FROM l.search_xid)"
)


def unusable(conn: PgConnection) -> str:
    """Why the index cannot answer at all ("" when it can, with the lines past its watermark searched exactly)."""
    if not index_exists(conn):
        return "the store has no search index yet (a read mode does not create it)"
    if watermark(conn) is None:
        return "the store's search index was never built (a read mode does not build it)"
    return ""


_RECENT = ("(SELECT session_id, file_path, line_number, search_xid, content FROM agent_state_lines "
           "WHERE search_xid >= ? OFFSET 0)")
"""The lines past a watermark, read through the BRIN index on their own (``OFFSET 0``: never merged into a
join, where the planner, whose statistics lag behind a bulk capture, would walk the whole key index instead:
25 ms on an up-to-date store of 55,000 lines against 0.3 ms)."""
_NEWER = (
    f"SELECT l.session_id, l.file_path, l.line_number, l.content, s.session_id IS NOT NULL FROM {_RECENT} l "
    "LEFT JOIN agent_state_search s ON s.session_id = l.session_id AND s.file_path = l.file_path "
    "AND s.line_number = l.line_number WHERE s.line_xid IS DISTINCT FROM l.search_xid"
)
_EVERY = "SELECT session_id, file_path, line_number, content, FALSE FROM agent_state_lines"

NewerLine = tuple[str, str, int, str, bool]
"""(store session id, file path, line number, raw content, whether the index holds an older row of it)"""


def newer_lines(conn: PgConnection, mark: int | None) -> Iterator[list[NewerLine]]:
    """The lines at or past the watermark ``mark`` the index does not hold as they are now (not indexed yet, or
    rewritten since), in batches of :data:`NEWER_BATCH` (a server-side cursor: a long backlog is never held at
    once); with ``mark`` None (an index never built, or none at all) every line, none of them held. Read only."""
    cur = conn.raw.cursor(name="sessionscope_newer")
    try:
        if mark is None:
            cur.execute(_EVERY)
        else:
            _recent_only(conn)
            cur.execute(pg_sql(_NEWER), (mark,))
            _planner_defaults(conn)
        while batch := cur.fetchmany(NEWER_BATCH):
            yield [(str(a), str(b), int(c), str(d), bool(e)) for a, b, c, d, e in batch]
    finally:
        cur.close()


def backlog(conn: PgConnection, mark: int | None, cap: int) -> int:
    """How many lines :func:`newer_lines` would give, counted up to ``cap + 1`` at most (a bounded read: past
    the cap a read mode does not rank the backlog itself, whatever its size)."""
    if mark is None:
        sql, params = "SELECT 1 FROM agent_state_lines", []
    else:
        _recent_only(conn)
        sql, params = _NEWER, [mark]
    found = conn.execute(f"SELECT count(*) FROM ({sql} LIMIT {int(cap) + 1}) b", params).fetchone()
    if mark is not None:
        _planner_defaults(conn)
    return int(found[0])


@contextmanager
def memory_fts(texts: Sequence[str]) -> Iterator[sqlite3.Connection]:
    """``texts`` (as :func:`~store.search.index.fts_text` gives them) in a private in-memory FTS5 table ``t``,
    ``rowid`` = their index: the SQLite side index's own matching and snippets, for a few texts."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')")
        conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
        yield conn
    finally:
        conn.close()


def candidates(texts: Sequence[str], parsed: Query) -> list[int]:
    """Which of ``texts`` PostgreSQL could find for ``parsed``: those FTS5 finds (a ``tsvector`` keeps at most
    what FTS5 sees), and every text long enough to have positions the ``tsvector`` caps (where a phrase may be
    found by PostgreSQL alone: 16,384 words take at least 32,767 characters)."""
    if parsed.empty or not texts:
        return []
    with memory_fts(texts) as conn:
        found = {int(r[0]) for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (parsed.fts(),))}
    found.update(i for i, t in enumerate(texts) if len(t) > 2 * MAX_POSITION)
    return sorted(found)


def match_vectors(conn: PgConnection, query: str, vectors: Sequence[str]) -> list[tuple[int, float]]:
    """(position in ``vectors``, ``ts_rank_cd``) of each ``tsvector`` literal the ``tsquery`` literal ``query``
    matches: what the index would answer for them, computed without storing them."""
    if not vectors:
        return []
    rows = conn.execute(
        "SELECT t.i, ts_rank_cd(t.w, q.q, 1) FROM (SELECT u.i, CAST(u.v AS tsvector) AS w FROM "
        "unnest(CAST(? AS text[])) WITH ORDINALITY AS u(v, i)) t, (SELECT CAST(? AS tsquery) AS q) q "
        "WHERE t.w @@ q.q", (list(vectors), query)).fetchall()
    return [(int(i) - 1, float(rank)) for i, rank in rows]


def refresh(store: PgStore) -> RefreshStats:
    """Index every captured line not indexed yet (a write mode only; see the module's documentation)."""
    started = time.perf_counter()
    with store.read() as conn:
        if not index_exists(conn):
            raise RuntimeError("the store's layout has no search index (migration 3 was not applied)")
        mark = watermark(conn)
        horizon = int(conn.execute("SELECT txid_snapshot_xmin(txid_current_snapshot())").fetchone()[0])
        if mark is None:
            where = "TRUE"
            params: list[object] = []
            found = conn.execute("SELECT session_id FROM agent_state_sessions ORDER BY 1").fetchall()
        else:
            where = "l.search_xid >= ?"
            params = [mark]
            _recent_only(conn)
            found = conn.execute("SELECT DISTINCT session_id FROM agent_state_lines WHERE search_xid >= ? ORDER BY 1",
                                 (mark,)).fetchall()
    sessions = [str(r[0]) for r in found]
    lines = indexed = 0
    for i in range(0, len(sessions), SESSIONS_PER_CHUNK):
        chunk = sessions[i:i + SESSIONS_PER_CHUNK]
        n, k = _index_chunk(store, f"{where} AND l.session_id IN ({','.join('?' * len(chunk))})", [*params, *chunk])
        lines, indexed = lines + n, indexed + k
    kind = "cold" if mark is None else ("incremental" if indexed else "unchanged")
    if lines:
        _summarize(store)
    if mark is None or (sessions and horizon > mark):  # (nothing new: the watermark may stay where it is)
        with store.write() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (INDEX_LOCK,))
            conn.execute("INSERT INTO agent_state_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
                         "SET value = excluded.value WHERE CAST(agent_state_meta.value AS BIGINT) < "
                         "CAST(excluded.value AS BIGINT)", (WATERMARK, str(horizon)))
    return RefreshStats(kind, lines, indexed, time.perf_counter() - started)


def _recent_only(conn: PgConnection) -> None:
    """Make this transaction read recent lines through the BRIN index: without fresh statistics (a bulk
    capture) the planner would read the whole table, in parallel, for what is a few pages."""
    conn.execute("SET LOCAL enable_seqscan = off")
    conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")   # (starting workers costs more than the read)


def _planner_defaults(conn: PgConnection) -> None:
    """Undo :func:`_recent_only` for the rest of the transaction."""
    conn.execute("SET LOCAL enable_seqscan TO DEFAULT")
    conn.execute("SET LOCAL max_parallel_workers_per_gather TO DEFAULT")


def _summarize(store: PgStore) -> None:
    """Summarise the BRIN index's new block ranges now (an unsummarised range is read by every refresh until
    autovacuum gets to it); a store user who may not do it only loses that shortcut."""
    from store.errors import StoreError

    try:
        with store.write() as conn:
            conn.execute("SELECT brin_summarize_new_values('agent_state_lines_search_xid_idx')")
    except StoreError:
        pass


def _index_chunk(store: PgStore, where: str, params: list[object]) -> tuple[int, int]:
    """Index the pending lines matching ``where`` in one transaction; (lines read, rows written). A line
    deleted by a capture between the read and the write makes the chunk start over."""
    import psycopg

    for attempt in range(3):
        try:
            with store.write() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(?)", (INDEX_LOCK,))
                if "search_xid" in where:
                    _recent_only(conn)
                rows = conn.execute(_PENDING.format(where=where), params).fetchall()
                values = []
                for sid, path, line, xid, content in rows:
                    vector = tsvector(record_text(content))
                    if vector:
                        values.append((sid, path, line, xid, vector))
                if values:
                    _write(conn, values)
                return len(rows), len(values)
        except Exception as exc:  # noqa: BLE001 - a line deleted under us: read again
            cause = exc.__cause__ or exc
            if attempt == 2 or not isinstance(cause, psycopg.errors.ForeignKeyViolation):
                raise
    return 0, 0  # pragma: no cover


def _write(conn: PgConnection, values: list[tuple[Any, ...]]) -> None:
    # A stale row of a rewritten line (another xid) is replaced; COPY would refuse the duplicate key.
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS search_stage (session_id TEXT, file_path TEXT, line_number BIGINT, "
                 "line_xid BIGINT, words TSVECTOR) ON COMMIT DELETE ROWS")
    conn.copy_rows("search_stage", ("session_id", "file_path", "line_number", "line_xid", "words"), values)
    conn.execute("INSERT INTO agent_state_search (session_id, file_path, line_number, line_xid, words) "
                 "SELECT session_id, file_path, line_number, line_xid, words FROM search_stage "
                 "ON CONFLICT (session_id, file_path, line_number) DO UPDATE SET line_xid = excluded.line_xid, "
                 "words = excluded.words")


# ----------------------------------------------------------------------------------------------------------
# Queries

RankedRow = tuple[float, str, int, float | None, int, str, str, int, str]
"""(order, agent session id, line number, score (None: found by the exact scan only), matches, agent id, file
path, line number, store session id)"""


def ranked(store: PgStore, query: str) -> list[RankedRow]:
    """Every agent session with a record matching the ``tsquery`` literal ``query``, with its best record
    (highest ``ts_rank_cd``; the order key and score are its negation, lower is better, as bm25's)."""
    with store.read() as conn:
        return ranked_in(conn, query)


ExtraHit = tuple[str, str, int, float]
"""A matching line the index does not hold: (store session id, file path, line number, ``ts_rank_cd``)."""


def ranked_in(conn: PgConnection, query: str, extra: Sequence[ExtraHit] = (),
              stale: Sequence[tuple[str, str, int]] = (), *, indexed: bool = True) -> list[RankedRow]:
    """:func:`ranked` in an open transaction, with the index's rows of the ``stale`` lines left out and the
    ``extra`` hits (lines searched exactly) taken as if the index held them: one grouping, one order. Not
    ``indexed``: the ``extra`` hits alone (an index never built, or none: every line was searched exactly)."""
    hits = ("SELECT s.session_id, s.file_path, s.line_number, ts_rank_cd(s.words, q.q, 1) AS rank "
            "FROM agent_state_search s, (SELECT CAST(? AS tsquery) AS q) q WHERE s.words @@ q.q")
    params: list[object] = [query]
    if not indexed:
        if not extra:
            return []
        hits = ("SELECT CAST(NULL AS TEXT) COLLATE \"C\" AS session_id, CAST(NULL AS TEXT) COLLATE \"C\" AS file_path, "
                "CAST(NULL AS BIGINT) AS line_number, CAST(NULL AS REAL) AS rank WHERE FALSE")
        params, stale = [], ()
    if stale:
        hits += (" AND NOT EXISTS (SELECT 1 FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[])) "
                 "AS x(session_id, file_path, line_number) WHERE x.session_id = s.session_id "
                 "AND x.file_path = s.file_path AND x.line_number = s.line_number)")
        params += [list(column) for column in zip(*stale, strict=True)]
    if extra:
        hits += (' UNION ALL SELECT x.session_id COLLATE "C", x.file_path COLLATE "C", x.line_number, x.rank FROM '
                 "unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS real[])) "
                 "AS x(session_id, file_path, line_number, rank)")
        params += [list(column) for column in zip(*extra, strict=True)]
    rows = conn.execute(
        f"WITH h AS MATERIALIZED ({hits}), "
        "b AS (SELECT DISTINCT ON (session_id) session_id, file_path, line_number, rank, "
        "count(*) OVER (PARTITION BY session_id) AS n FROM h "
        "ORDER BY session_id, rank DESC, file_path, line_number) "
        "SELECT b.rank, ss.agent_session_id, b.line_number, b.n, ss.agent_id, b.file_path, b.session_id "
        "FROM b JOIN agent_state_sessions ss ON ss.session_id = b.session_id", params).fetchall()
    return [(-float(r), str(a), int(line), -float(r), int(n), str(agent), str(path), int(line), str(sid))
            for r, a, line, n, agent, path, sid in rows]


EXACT_ONLY = 1e9
"""The order key base of a session only the exact scan of the backlog found (:func:`behind_scan`): after every
ranked one (their keys are ``-ts_rank_cd`` ≤ 0), most matches first (``EXACT_ONLY - matches``)."""


def behind_scan(conn: PgConnection, query: str | None, pattern: str | None, mark: int) -> tuple[list[RankedRow], int]:
    """A read mode's answer when more than :data:`NEWER_CAP` lines are past the watermark ``mark``, in one
    statement: the index ranks what it holds (its rows of lines rewritten since left out), and the lines past
    the mark are searched by the exact scan (``ILIKE`` ``pattern`` over the raw record, as :func:`scan`; None:
    a text no stored record can hold). A session the index ranks keeps its ranked best record and counts its
    exact matches too; a session only the scan found comes after every ranked one with no score (None), most
    matches first. ``query`` None: the typed text has no words the index could hold. Returns the rows and how
    many lines past the mark were scanned."""
    hit = "l.content ILIKE ? ESCAPE '\\'" if pattern is not None else "FALSE"
    params: list[object] = [*([pattern] if pattern is not None else []), mark]
    ranked_part = ""
    if query is not None:
        ranked_part = (
            ", h AS (SELECT s.session_id, s.file_path, s.line_number, ts_rank_cd(s.words, q.q, 1) AS rank "
            "FROM agent_state_search s, (SELECT CAST(? AS tsquery) AS q) q WHERE s.words @@ q.q AND NOT EXISTS "
            "(SELECT 1 FROM n WHERE n.held AND n.session_id = s.session_id AND n.file_path = s.file_path "
            "AND n.line_number = s.line_number)), "
            "b AS (SELECT DISTINCT ON (session_id) session_id, file_path, line_number, rank, "
            "count(*) OVER (PARTITION BY session_id) AS k FROM h ORDER BY session_id, rank DESC, file_path, "
            "line_number)")
        params.append(query)
    union = ("SELECT 0 AS kind, rank, session_id, file_path, line_number, k FROM b UNION ALL "
             if query is not None else "")
    _recent_only(conn)
    rows = conn.execute(
        "WITH n AS MATERIALIZED (SELECT l.session_id, l.file_path, l.line_number, s.session_id IS NOT NULL AS held, "
        f"{hit} AS hit FROM {_RECENT} l LEFT JOIN agent_state_search s ON s.session_id = l.session_id "
        "AND s.file_path = l.file_path AND s.line_number = l.line_number "
        f"WHERE s.line_xid IS DISTINCT FROM l.search_xid){ranked_part}, "
        "e AS (SELECT DISTINCT ON (session_id) session_id, file_path, line_number, "
        "count(*) OVER (PARTITION BY session_id) AS k FROM n WHERE hit ORDER BY session_id, file_path, line_number) "
        "SELECT u.kind, u.rank, ss.agent_session_id, u.line_number, u.k, ss.agent_id, u.file_path, u.session_id "
        f"FROM ({union}SELECT 1 AS kind, CAST(NULL AS REAL) AS rank, session_id, file_path, line_number, k FROM e "
        "UNION ALL SELECT 2, NULL, NULL, NULL, NULL, (SELECT count(*) FROM n)) u "
        "LEFT JOIN agent_state_sessions ss ON ss.session_id = u.session_id", params).fetchall()
    _planner_defaults(conn)
    scanned = 0
    best: dict[str, RankedRow] = {}
    exact: dict[str, tuple[str, str, str, int, int]] = {}
    for kind, rank, asid, line, k, agent, path, sid in rows:
        if kind == 2:
            scanned = int(k)
        elif kind == 0:
            best[str(sid)] = (-float(rank), str(asid), int(line), -float(rank), int(k), str(agent), str(path),
                              int(line), str(sid))
        else:
            exact[str(sid)] = (str(asid), str(agent), str(path), int(line), int(k))
    for sid, (asid, agent, path, line, k) in exact.items():
        found = best.get(sid)
        if found is not None:
            order, a, at, score, n, ag, p, ln, s_id = found
            best[sid] = (order, a, at, score, n + k, ag, p, ln, s_id)
        else:
            best[sid] = (EXACT_ONLY - k, asid, line, None, k, agent, path, line, sid)
    return list(best.values()), scanned


def record_keys(store: PgStore, query: str) -> set[tuple[str, str, str, int]]:
    """Every matching record as (agent id, agent session id, file path, line number) (tests compare engines)."""
    with store.read() as conn:
        return {(str(a), str(b), str(c), int(d)) for a, b, c, d in conn.execute(
            "SELECT ss.agent_id, ss.agent_session_id, s.file_path, s.line_number FROM agent_state_search s "
            "JOIN agent_state_sessions ss ON ss.session_id = s.session_id WHERE s.words @@ CAST(? AS tsquery)",
            (query,))}


def contents(store: PgStore, keys: Iterable[tuple[str, str, int]]) -> dict[tuple[str, str, int], str]:
    """The raw text of the lines ``(store session id, file path, line number)``."""
    wanted = list(keys)
    out: dict[tuple[str, str, int], str] = {}
    with store.read() as conn:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            marks = ",".join("(?, ?, ?)" for _ in chunk)
            for sid, path, line, content in conn.execute(
                    f"SELECT session_id, file_path, line_number, content FROM agent_state_lines "
                    f"WHERE (session_id, file_path, line_number) IN ({marks})", [v for k in chunk for v in k]):
                out[(str(sid), str(path), int(line))] = str(content)
    return out


def scan(store: PgStore, pattern: str) -> list[tuple[str, str, str, str, int, int]]:
    """The exact scan: every agent session with a line whose raw text contains ``pattern`` (an ``ILIKE``
    pattern, ``\\`` escaping): (agent session id, agent id, store session id, file path, first line, matches)."""
    with store.read() as conn:
        if not has_table(conn, "agent_state_lines"):
            return []
        rows = conn.execute(
            "SELECT ss.agent_session_id, ss.agent_id, m.session_id, m.file_path, m.line_number, m.n FROM ("
            "SELECT DISTINCT ON (l.session_id) l.session_id, l.file_path, l.line_number, "
            "count(*) OVER (PARTITION BY l.session_id) AS n FROM agent_state_lines l "
            "WHERE l.content ILIKE ? ESCAPE '\\' ORDER BY l.session_id, l.file_path, l.line_number) m "
            "JOIN agent_state_sessions ss ON ss.session_id = m.session_id", (pattern,)).fetchall()
    return [(str(a), str(b), str(c), str(d), int(e), int(f)) for a, b, c, d, e, f in rows]


__all__ = ["EXACT_ONLY", "ExtraHit", "NEWER_CAP", "NewerLine", "RefreshStats", "backlog", "behind_scan", "candidates", "contents", "index_exists", "match_vectors",
           "memory_fts", "newer_lines", "ranked", "ranked_in", "record_keys", "refresh", "scan", "tsquery",
           "tsvector", "unusable", "watermark"]
