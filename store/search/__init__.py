"""Ranked full-text search over mothx entries and captured records (an FTS5 side index outside the session
directory; the exact LIKE scan where no index may be kept). See :mod:`store.search.engine`. The captured records
of a PostgreSQL team store are searched in the store's own index instead (:mod:`store.search.team`)."""

from store.search.engine import (
    INDEX,
    LIKE,
    SearchHit,
    SearchResult,
    Snippet,
    index_info,
    like_snippet,
    refresh,
    release,
    search,
)
from store.search.index import SearchIndexInfo, index_path_for

__all__ = ["INDEX", "LIKE", "SearchHit", "SearchResult", "Snippet", "SearchIndexInfo", "index_info", "index_path_for",
           "like_snippet", "refresh", "release", "search"]
