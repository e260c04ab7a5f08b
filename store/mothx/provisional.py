"""A provisional first window of the session list, for the first open of a directory (no list cache yet).

Building the list cache reads every entry (seconds at 100,000 sessions); the first screen should not wait for
it. :func:`provisional_page` reads the newest sessions by ``sessions.timestamp`` straight from ``sessions.db``
(one indexed-or-sorted pass over the sessions table, no entries): titles, previews and message counts are not
known yet (empty / 0) and the order is by creation, not by last activity. The caller shows these rows as
provisional and builds the cache in the background (any ``list_sessions`` call builds it), then re-reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionPage


def list_cache_missing(sd: SessionDir) -> bool:
    """True when no built list cache exists for ``sd``'s database (its first open here, the cache was removed,
    or its first build was interrupted: the build writes its state in one transaction at the end), so the
    first list read would build it from every entry."""
    import sqlite3
    import urllib.parse

    from store.mothx.sessionindex import cache_path_for

    try:
        path = cache_path_for(sd.db.path)
        if not path.exists():
            return True
        conn = sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM meta").fetchone()[0] == 0
        finally:
            conn.close()
    except (OSError, sqlite3.Error):
        return False  # a cache that cannot be looked at: the list read decides (and rebuilds it if needed)


def provisional_page(sd: SessionDir, limit: int) -> SessionPage:
    """The ``limit`` newest sessions by ``sessions.timestamp``, without aggregates, and how many there are."""
    from store.mothx.aggregates import read_layout
    from store.mothx.sessionrows import summary_from_row
    from store.mothx.sessions import SessionPage, _store_errors, _with_run_states

    with _store_errors(sd):
        layout = read_layout(sd)
        select = layout.session_select("", aggs=False)
        with sd.db.read() as conn:
            rows = [summary_from_row(row) for row in conn.execute(
                f"{select} ORDER BY {layout.raw['timestamp']} DESC, {layout.raw['id']} DESC LIMIT ?",
                (max(0, limit),))]
            total = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
        summaries = _with_run_states(sd, rows)
    return SessionPage(rows=summaries, total=total, has_more=len(summaries) < total)
