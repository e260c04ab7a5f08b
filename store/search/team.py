"""Search over the captured records of a PostgreSQL team store: the same :class:`~store.search.SearchResult` as
the SQLite side index gives, from the store's own full-text index (:mod:`store.search.pg_index`).

Same data, same answer: the text of a record is :func:`~store.search.text.record_text`'s, its words are FTS5's
(:mod:`store.search.tokens`), the query is parsed by :mod:`store.search.query` for both engines, and the snippet
of a hit is made by the very FTS5 ``snippet()`` SQLite uses (the page's record texts in a private in-memory
FTS5 table), so only the scores differ (``ts_rank_cd`` instead of ``bm25``).

The index is brought up to date by a search in a write mode (``may_index``). A read mode never writes: it
answers from the index and searches the records captured since it was last brought up to date exactly (each
cut into the words the index would hold, matched and ranked by PostgreSQL as the index would be), merged into
one ranked result (``SearchResult.exact`` says how many). Past ``pg_index.NEWER_CAP`` such records, they are
searched by the exact ``ILIKE`` scan in the statement that reads the index instead: their hits come after the
ranked ones with no score (``SearchResult.scanned`` / ``unranked``, and ``how()`` says so). With no index (a
version-2 store) or one never built, every record is searched that way: ranked up to the cap (``reason`` says
why there is no index), the exact ``ILIKE`` scan past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from store.agents.checkpoint_engine import has_table
from store.mothx.sessions import like_pattern
from store.safetext import one_line
from store.search import pg_index as cs
from store.search import query as q
from store.search.index import fts_text
from store.search.text import record_text

if TYPE_CHECKING:
    from store.agents.checkpoint_engine import PgStore
    from store.mothx.sessiondir import SessionDir
    from store.search.results import SearchHit, SearchResult, Snippet


def is_team_store() -> bool:
    """True when the checkpoint store in effect is a PostgreSQL database."""
    from store.agents.checkpoint_engine import DIALECT_POSTGRESQL, selected_store, store_kind

    url = selected_store()
    return url is not None and store_kind(url) == DIALECT_POSTGRESQL


def open_team_store(sd: SessionDir, *, write: bool) -> PgStore:
    """The team store, in a write mode when ``write`` (its layout brought to the current version), else in the
    directory's mode."""
    from store.agents.checkpoint_engine import PgStore, selected_store
    from store.agents.checkpoint_schema import ensure_pg
    from store.mothx.db import OpenMode

    url = selected_store()
    assert url is not None
    store = PgStore(url, OpenMode.READ_WRITE if write else sd.mode)
    try:
        ensure_pg(store)
    except BaseException:
        store.close()
        raise
    return store


def may_index(sd: SessionDir, index_store: bool | None) -> bool:
    """Whether a search may write the team store's index: asked (``index_store``), else the directory's mode."""
    return (not sd.mode.is_read) if index_store is None else index_store


def refresh_team(sd: SessionDir) -> cs.RefreshStats:
    """Bring the team store's index up to date now (a write to the store)."""
    store = open_team_store(sd, write=True)
    try:
        return cs.refresh(store)
    finally:
        store.close()


def search_team(sd: SessionDir, text: str, *, limit: int | None, after: tuple[float, str] | None, snippets: bool,
                use_index: bool, index_store: bool | None) -> SearchResult:
    from store.errors import StoreError
    from store.search.results import INDEX, SearchResult, _raw_page

    write = use_index and may_index(sd, index_store)
    store = open_team_store(sd, write=write)
    try:
        reason = "" if use_index else "the LIKE scan was asked for"
        parsed = q.parse(text)
        literal = cs.tsquery(parsed)
        raw: list[cs.RankedRow] = []
        read = _Read()
        if use_index:
            try:
                if write:
                    cs.refresh(store)
                    if literal is not None:
                        raw = cs.ranked(store, literal)
                else:
                    read = _read_ranked(store, text, parsed, literal)
                    reason, raw = read.reason, read.rows
            except StoreError as exc:
                reason = f"the store's search index failed ({one_line(str(exc))[:200]})"
        if reason and not read.ranked:
            return _scan(store, text, limit, after, snippets, reason)
        total = len(raw)
        page, more = _raw_page(raw, limit, after)
        hits = _details(store, text, parsed, page, snippets)
        return SearchResult(text, INDEX, read.reason, tuple(hits), total, more, True, read.exact, read.scanned,
                            read.unranked)
    finally:
        store.close()


@dataclass
class _Read:
    """A read mode's answer: ``rows`` ranked (``ranked``), or ``reason`` why the exact scan answers instead. A
    ``reason`` with ``ranked``: no index could answer, every record was searched exactly and ranked."""

    rows: list[cs.RankedRow] = field(default_factory=list)
    reason: str = ""
    ranked: bool = False
    exact: int = 0          # records newer than the index (or all of them, with no index) searched exactly
    scanned: bool = False   # those were searched by the exact scan, not ranked (more than NEWER_CAP)
    unranked: int = 0       # sessions only that scan found


def _pattern(text: str) -> str | None:
    """The exact scan's ``ILIKE`` pattern of ``text`` (None: no stored UTF-8 record can hold it)."""
    if not text or "\x00" in text:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None   # a lone surrogate is in no stored (UTF-8) record
    return like_pattern(text)


def _read_ranked(store: PgStore, text: str, parsed: q.Query, literal: str | None) -> _Read:
    """A read mode's ranked rows in one read transaction (one snapshot: a record is counted once, from the
    index or from the exact pass). Up to :data:`~store.search.pg_index.NEWER_CAP` records newer than the index
    (or in all, with no index to answer) are cut into its words and ranked as it would rank them, so the answer
    is the fully indexed one; past the cap, the records newer than the index are searched by the exact scan in
    the statement that reads the index, and with no index the exact scan answers alone. Nothing is written:
    every statement is a SELECT (or a SET LOCAL of the planner) in a READ ONLY transaction."""
    extra: list[cs.ExtraHit] = []
    stale: list[tuple[str, str, int]] = []
    newer = 0
    with store.read() as conn:
        reason = cs.unusable(conn)
        if not has_table(conn, "agent_state_lines"):
            return _Read(reason=reason)                 # no store here yet: the exact scan finds nothing
        mark = cs.watermark(conn) if not reason else None
        if cs.backlog(conn, mark, cs.NEWER_CAP) > cs.NEWER_CAP:
            if mark is None:
                return _Read(reason=f"{reason.removesuffix(')')}, and more than {cs.NEWER_CAP:,} records are "
                                    "too many to rank without it)")
            rows, scanned = cs.behind_scan(conn, literal, _pattern(text), mark)
            unranked = sum(1 for r in rows if r[3] is None)
            return _Read(rows, ranked=True, exact=scanned, scanned=True, unranked=unranked)
        for batch in cs.newer_lines(conn, mark):
            texts: list[str] = []
            keys: list[tuple[str, str, int]] = []
            for sid, path, line, content, held in batch:
                body = record_text(content)
                if held:
                    stale.append((sid, path, line))     # the index's row of it is out of date
                if body:
                    texts.append(fts_text(body))
                    keys.append((sid, path, line))
                newer += bool(body) or held
            if literal is None:
                continue
            found = cs.candidates(texts, parsed)
            for k, rank in cs.match_vectors(conn, literal, [cs.tsvector(texts[i]) for i in found]):
                extra.append((*keys[found[k]], rank))
        rows = cs.ranked_in(conn, literal, extra, stale, indexed=mark is not None) if literal is not None else []
    return _Read(rows, reason=reason, ranked=True, exact=newer)


def _details(store: PgStore, text: str, parsed: q.Query, page: list[cs.RankedRow], snippets: bool) -> list[SearchHit]:
    """The page's hits with their snippets: FTS5's for a ranked record, the exact scan's for one only the exact
    scan found (score None)."""
    from store.search.results import SearchHit, Snippet, like_snippet

    texts: dict[tuple[str, str, int], str] = {}
    scanned: set[tuple[str, str, int]] = {(r[8], r[6], r[7]) for r in page if r[3] is None}
    if snippets and page:
        raw = cs.contents(store, [(r[8], r[6], r[7]) for r in page])
        texts = {k: record_text(v) for k, v in raw.items()}
    ranked = {k: v for k, v in texts.items() if k not in scanned}
    marked = fts5_snippets(list(ranked.values()), parsed) if ranked else []
    by_key = dict(zip(ranked.keys(), marked, strict=True))
    by_key.update((k, like_snippet(v, text)) for k, v in texts.items() if k in scanned)
    empty = Snippet("")
    return [SearchHit(asid, score, order, line, matches=n, snippet=by_key.get((sid, path, line_no), empty),
                      agent_id=agent, file_path=path, line_number=line_no)
            for order, asid, line, score, n, agent, path, line_no, sid in page]


def fts5_snippets(texts: list[str], parsed: q.Query) -> list[Snippet]:
    """The FTS5 ``snippet()`` of each text for the query, as the SQLite side index makes it."""
    from store.search.results import SNIPPET_TOKENS, Snippet, _markers, _unmark

    out = [Snippet("") for _ in texts]
    if parsed.empty:
        return out
    safe = [fts_text(t) for t in texts]
    opening, closing = _markers(safe)
    with cs.memory_fts(safe) as conn:
        for rowid, snip in conn.execute(
                f"SELECT rowid, snippet(t, 0, ?, ?, '…', {SNIPPET_TOKENS}) FROM t WHERE t MATCH ?",
                (opening, closing, parsed.fts())):
            out[int(rowid)] = _unmark(str(snip), opening, closing)
    return out


def _scan(store: PgStore, text: str, limit: int | None, after: tuple[float, str] | None, snippets: bool,
          reason: str) -> SearchResult:
    """The exact scan (``ILIKE``, ASCII case-insensitive as SQLite's ``LIKE`` in a ``C`` database)."""
    from store.search.results import LIKE, SearchHit, SearchResult, _page, _with, like_snippet

    pattern = _pattern(text)
    found = cs.scan(store, pattern) if pattern is not None else []
    hits = [SearchHit(asid, None, float(-n), line, matches=n, agent_id=agent, file_path=path, line_number=line)
            for asid, agent, _sid, path, line, n in found]
    keys = {(h.agent_id, h.session_id): sid for (_a, _b, sid, _p, _l, _n), h in zip(found, hits, strict=True)}
    total = len(hits)
    page, more = _page(hits, limit, after)
    if snippets and page:
        raw = cs.contents(store, [(keys[(h.agent_id, h.session_id)], h.file_path, h.line_number) for h in page])
        page = [_with(h, snippet=like_snippet(record_text(raw.get((keys[(h.agent_id, h.session_id)], h.file_path,
                                                                   h.line_number), "")), text)) for h in page]
    return SearchResult(text, LIKE, reason, tuple(page), total, more, True)


__all__ = ["fts5_snippets", "is_team_store", "may_index", "open_team_store", "refresh_team", "search_team"]
