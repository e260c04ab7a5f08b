"""A read mode over a PostgreSQL team store whose index is behind: the index answers for what it holds, the
records captured since are searched exactly, and the merged answer is the fully indexed one (same records,
counts, order, scores, snippets), the same as SQLite's FTS5 for the same data, without writing a byte.
Against a real PostgreSQL server (tests/pg.py)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.checkpoint_engine import use_store
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.search import INDEX, LIKE, SearchResult, search
from store.search import pg_index as cs
from store.search.query import parse
from store.search.team import refresh_team
from tests.pg import pg_cluster, pg_dump, pg_execute, pg_url  # noqa: F401 - fixtures
from tests.store.test_search_pg import QUERIES, _forget, _tree, _view, both  # noqa: F401 - fixtures

BEHIND_TEXTS = [
    "the parser fails once more, a parser in a new session",
    "walrus walrus walrus walrus walrus",
    "connection pool drained; the pool of connection handles",
    "a capybara grazes by the café",
    "tusks of a walrus on the ice floes, zoology notes",
]
"""New sessions captured after the index was built (they hit QUERIES' words, and outrank older records)."""
WORDS = [*QUERIES, "capybara", "grazes café", '"pool of connection"', "fixed", "late*", '"one more"']


def _append(tree: Path, index: int, text: str) -> None:
    """One more user record at the end of the transcript of ``_tree``'s text number ``index``."""
    sid = str(uuid.UUID(int=1000 + index))
    path = tree / f"-home-u-p{index % 3}" / f"{sid}.jsonl"
    rec = {"parentUuid": None, "isSidechain": False, "type": "user", "sessionId": sid, "cwd": "/home/u/p",
           "uuid": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{sid}/late")), "timestamp": "2026-01-01T00:01:00.000Z",
           "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def _hits(result: SearchResult) -> list[tuple[object, ...]]:
    """Every field of every hit, in the result's order."""
    return [(h.session_id, h.agent_id, h.score, h.order, h.seq, h.matches, h.file_path, h.line_number,
             h.snippet.text, h.snippet.spans) for h in result.hits]


def _behind(both: tuple[Path, Path, str, Path]) -> int:  # noqa: F811
    """Index the team store, then capture more into both stores (the index is left behind); the lines added."""
    lite, team, url, tree = both
    use_store(url)
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "cold"
    before = pg_execute(url, "SELECT count(*) FROM agent_state_lines")[0][0]
    _tree(tree, BEHIND_TEXTS, start=300)
    _append(tree, 0, "late news: the parser is fixed")      # sessions with records on both sides of the mark
    _append(tree, 7, "one more walrus")
    for folder, url_or_none in ((team, url), (lite, None)):
        use_store(url_or_none)
        with open_session_dir(folder, OpenMode.READ_WRITE) as sd:
            cap.capture_claude_code(sd, tree)
    use_store(url)
    return int(pg_execute(url, "SELECT count(*) FROM agent_state_lines")[0][0]) - int(before)  # type: ignore[call-overload]


def test_behind_read_mode_equals_the_full_index_and_sqlite(both: tuple[Path, Path, str, Path],  # noqa: F811
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    lite, team, url, _ = both
    added = _behind(both)
    assert added == 3 * len(BEHIND_TEXTS) + 2
    monkeypatch.setattr(cs, "NEWER_BATCH", 4)    # several batches of the server-side cursor
    dump = pg_dump(url)
    behind: dict[str, SearchResult] = {}
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        for text in WORDS:
            r = search(sd, text, captured=True, limit=None)
            assert (r.source, r.reason, r.exact) == (INDEX, "", added), text
            behind[text] = r
        paged = [search(sd, "walrus", captured=True, limit=2),
                 search(sd, "parser", captured=True, limit=1, after=behind["parser"].hits[0].key)]
    assert pg_dump(url) == dump                  # a read mode wrote nothing
    # SQLite's FTS5 over the same data: the same sessions, match counts and snippets for every query.
    use_store(None)
    with open_session_dir(lite, OpenMode.READ_ONLY) as sd:
        for text in WORDS:
            r = search(sd, text, captured=True, limit=None)
            assert r.total == behind[text].total and _view(r) == _view(behind[text]), text
        best = search(sd, "walrus", captured=True).hits[0]
    assert behind["walrus"].hits[0].session_id == best.session_id == str(uuid.UUID(int=1301))
    assert behind["walrus"].hits[0].line_number == best.line_number
    assert behind["capybara"].total == 1 and behind["parser"].total == 3 and behind["walrus"].total == 4
    assert [h.matches for h in behind["parser"].hits if h.session_id == str(uuid.UUID(int=1000))] == [3]
    # The fully indexed answer, once a write mode has brought the index up to date: the very same hits.
    use_store(url)
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "incremental"
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        for text in WORDS:
            r = search(sd, text, captured=True, limit=None)
            assert (r.source, r.exact) == (INDEX, 0), text
            assert (r.total, _hits(r)) == (behind[text].total, _hits(behind[text])), text
        assert _hits(search(sd, "walrus", captured=True, limit=2)) == _hits(paged[0])
        assert _hits(search(sd, "parser", captured=True, limit=1, after=behind["parser"].hits[0].key)) == \
            _hits(paged[1])
        assert paged[0].has_more and len(paged[1].hits) == 1


def test_rewritten_and_long_records_past_the_mark(both: tuple[Path, Path, str, Path]) -> None:  # noqa: F811
    _, team, url, _ = both
    use_store(url)
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "cold"
    # A line rewritten in place since it was indexed (the index still holds its old words), and a long new
    # record whose positions the tsvector caps (PostgreSQL finds the phrase "x16381 beta" there; FTS5 does not).
    sid, path, line = pg_execute(url, "SELECT session_id, file_path, line_number FROM agent_state_lines "
                                      "WHERE content LIKE '%walrus walrus walrus%' ORDER BY 1, 2, 3 LIMIT 1")[0]
    new = json.dumps({"type": "user", "message": {"role": "user", "content": "no more pinnipeds here"}})
    pg_execute(url, "UPDATE agent_state_lines SET content = ?, content_bytes = ?, search_xid = txid_current() "
                    "WHERE session_id = ? AND file_path = ? AND line_number = ?", (new, len(new), sid, path, line))
    long_text = " ".join(f"x{i}" for i in range(16_383)) + " gamma delta beta"
    long_line = json.dumps({"type": "user", "message": {"role": "user", "content": long_text}})
    pg_execute(url, "INSERT INTO agent_state_lines (session_id, file_path, line_number, content, content_bytes) "
                    "VALUES (?, 'long.jsonl', 1, ?, ?)", (sid, long_line, len(long_line)))
    assert cs.candidates([long_text], parse('"x16381 beta"')) == [0]
    queries = ["walrus", "pinnipeds", '"walrus walrus"', '"x16381 beta"', "gamma", "x5*"]
    dump = pg_dump(url)
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        behind = {text: search(sd, text, captured=True, limit=None) for text in queries}
    assert pg_dump(url) == dump
    assert all((r.source, r.exact) == (INDEX, 2) for r in behind.values())
    assert behind["pinnipeds"].total == 1 and behind['"x16381 beta"'].total == 1
    assert behind['"walrus walrus"'].total == 1     # the rewritten record no longer answers from the index
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "incremental"
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        for text in queries:
            r = search(sd, text, captured=True, limit=None)
            assert r.exact == 0 and (r.total, _hits(r)) == (behind[text].total, _hits(behind[text])), text


def test_a_store_with_no_index_is_ranked_or_scanned_exactly(both: tuple[Path, Path, str, Path],  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A version-2 store (no search table, no search_xid) read in a read mode: small, every record is ranked
    as the index would rank it (the same answer as SQLite's FTS5); past the cap, the ILIKE scan. Nothing is
    written, no index table is created."""
    lite, team, url, _ = both
    for sql in ("DROP TABLE agent_state_search", "ALTER TABLE agent_state_lines DROP COLUMN search_xid",
                "DELETE FROM agent_state_migrations WHERE version = 3",
                "UPDATE agent_state_meta SET value = '2' WHERE name = 'schema_version'"):
        pg_execute(url, sql)
    use_store(url)
    dump = pg_dump(url)
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        ranked = {text: search(sd, text, captured=True, limit=None) for text in WORDS}
        monkeypatch.setattr(cs, "NEWER_CAP", 5)
        r = search(sd, "walrus", captured=True)
    assert (r.source, r.exact, r.total) == (LIKE, 0, 2) and "no search index" in r.reason
    assert r.how().startswith("LIKE scan: the store has no search index") and "too many to rank" in r.how()
    assert pg_dump(url) == dump
    assert pg_execute(url, "SELECT to_regclass('agent_state_search')") == [(None,)]
    walrus = ranked["walrus"]
    assert (walrus.source, walrus.total) == (INDEX, 2) and "no search index" in walrus.reason
    assert walrus.hits[0].score is not None and walrus.hits[0].snippet.spans
    use_store(None)
    with open_session_dir(lite, OpenMode.READ_ONLY) as sd:
        for text in WORDS:
            r = search(sd, text, captured=True, limit=None)
            assert r.total == ranked[text].total and _view(r) == _view(ranked[text]), text


def test_cli_says_how_many_records_were_searched_exactly(both: tuple[Path, Path, str, Path],  # noqa: F811
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import core as cli

    _, team, url, _ = both
    added = _behind(both)
    store = url.replace("postgresql+psycopg://", "postgresql://", 1)
    dump = pg_dump(url)
    try:
        for mode in ([], ["--read-only"], ["--snapshot"]):
            code = cli.main(["--dir", str(team), *mode, "search", "walrus", "--captured", "--store", store])
            out, err = capsys.readouterr()
            assert code == 0 and "»walrus«" in out and "Traceback" not in err
            line = err.strip().splitlines()[-1]
            assert re.fullmatch(rf"sessionscope: note: 4 of 4 agent sessions \(ranked by the search index; {added} records newer than "
                                r"the index were searched exactly \(a read mode does not refresh it\)\)", line), line
        assert cli.main(["--dir", str(team), "search", "walrus", "--captured", "--json", "--store", store]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert (doc["source"], doc["reason"], doc["exact"], doc["total"]) == ("index", "", added, 4)
        assert pg_dump(url) == dump
    finally:
        use_store(None)
