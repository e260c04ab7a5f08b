"""Search over the captured records of a PostgreSQL team store: the same :class:`~store.search.SearchResult` as
the SQLite side index gives, from the store's own full-text index (:mod:`store.search.pg_index`).

Same data, same answer: the text of a record is :func:`~store.search.text.record_text`'s, its words are FTS5's
(:mod:`store.search.tokens`), the query is parsed by :mod:`store.search.query` for both engines, and the snippet
of a hit is made by the very FTS5 ``snippet()`` SQLite uses (the page's record texts in a private in-memory
FTS5 table), so only the scores differ (``ts_rank_cd`` instead of ``bm25``).

The index is brought up to date by a search in a write mode (``may_index``). A read mode never writes: it
answers from the index and searches the records captured since it was last brought up to date exactly (each
cut into the words the index would hold, matched and ranked by PostgreSQL as the index would be), merged into
one ranked result (``SearchResult.exact`` says how many); with no index (a version-2 store) or one never built,
it answers with the exact ``ILIKE`` scan, saying why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        exact = 0
        if use_index:
            try:
                if write:
                    cs.refresh(store)
                else:
                    answer = _read_ranked(store, parsed, literal)
                    if isinstance(answer, str):
                        reason = answer
                    else:
                        raw, exact = answer
            except StoreError as exc:
                reason = f"the store's search index failed ({one_line(str(exc))[:200]})"
        if reason:
            return _scan(store, text, limit, after, snippets, reason)
        if write and literal is not None:
            raw = cs.ranked(store, literal)
        total = len(raw)
        page, more = _raw_page(raw, limit, after)  # type: ignore[arg-type]
        hits = _details(store, parsed, page, snippets)  # type: ignore[arg-type]
        return SearchResult(text, INDEX, "", tuple(hits), total, more, True, exact)
    finally:
        store.close()


def _read_ranked(store: PgStore, parsed: q.Query, literal: str | None) -> tuple[list[cs.RankedRow], int] | str:
    """A read mode's ranked rows and how many records newer than the index were searched exactly, in one read
    transaction (one snapshot: a record is counted once, from the index or from the exact pass); or why the
    exact scan must answer instead. Nothing is written: every statement is a SELECT (or a SET LOCAL of the
    planner) in a READ ONLY transaction."""
    extra: list[cs.ExtraHit] = []
    stale: list[tuple[str, str, int]] = []
    newer = 0
    with store.read() as conn:
        reason = cs.unusable(conn)
        if reason:
            return reason
        mark = cs.watermark(conn)
        assert mark is not None
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
        rows = cs.ranked_in(conn, literal, extra, stale) if literal is not None else []
    return rows, newer


def _details(store: PgStore, parsed: q.Query, page: list[cs.RankedRow], snippets: bool) -> list[SearchHit]:
    from store.search.results import SearchHit, Snippet

    texts: dict[tuple[str, str, int], str] = {}
    if snippets and page:
        raw = cs.contents(store, [(r[8], r[6], r[7]) for r in page])
        texts = {k: record_text(v) for k, v in raw.items()}
    marked = fts5_snippets(list(texts.values()), parsed) if texts else []
    by_key = dict(zip(texts.keys(), marked, strict=True))
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

    usable = bool(text) and "\x00" not in text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        usable = False   # a lone surrogate is in no stored (UTF-8) record
    found = cs.scan(store, like_pattern(text)) if usable else []
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
