"""Search over captured records on a PostgreSQL team store (its own tsvector/GIN index) gives the same results
as the SQLite store's FTS5 side index for the same data. Against a real PostgreSQL server (tests/pg.py)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import store.search.engine as engine
from store.agents import capture as cap
from store.agents.agentstate import delete_checkpoints
from store.agents.checkpoint_engine import dispose_engines, use_store
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.search import INDEX, LIKE, search
from store.search import pg_index as cs
from store.search import tokens as tok
from store.search.query import parse
from store.search.team import refresh_team
from tests.pg import pg_cluster, pg_dump, pg_execute, pg_url  # noqa: F401 - fixtures
from tests.store.test_search import FTS_SYNTAX, HOSTILE, _forget  # noqa: F401 - the registry reset

TEXTS = [
    "the parser fails again: parser parser parser",
    "a long message that talks about many things and mentions the parser once in passing among many other words "
    "like configuration, deployment, logging, monitoring, and a connection pool",
    "connection pool exhausted while the pool of connection handles grew",
    "Café crème at the CAFÉ; naïve façade, Ærø and ſtraße",
    "see https://example.com/path/to_file.txt and /home/u/[archive]/repo/read_file.py",
    "foo-bar baz-qux v1.2.3 3.14 e-mail a@b.example",
    "日本語テキスト and Ελληνικά κείμενο and кириллица текст",
    "walrus walrus walrus",
    "a walrus appears once in this much longer message about zoology, oceans, ice floes and tusks of animals",
    'quotes "unbalanced and NEAR( and a OR b * AND NOT col:x ^start',
    "emoji 🦭 seal 🦭 and private \ue000 use and x² ½ Ⅻ",
    *HOSTILE,
]
QUERIES = [
    "parser", "Parser", "parser fails", '"connection pool"', '"pool connection"', "conn*", '"pool exh*"', "pool*",
    "cafe", "CAFÉ", "naive", "strasse", "straße", "example", "example.com", "to_file", "read_file", "foo-bar",
    "bar", "v1.2.3", "3.14", "日本語テキスト", "ελληνικά", "кириллица", "walrus", '"walrus walrus"', "seal",
    "🦭", "x²", "ⅻ", "pwned", "bold", "passwd", "txt.exe", "zoology oceans", '"ice floes"', "tusk*",
    '"unbalanced', "NEAR(", "a OR", "*", "AND", "", " ", *FTS_SYNTAX,
]


def _tree(root: Path, texts: list[str], start: int = 0) -> None:
    """A Claude Code tree: three transcripts per text group, one record per text (user and assistant lines)."""
    for i, text in enumerate(texts, start):
        sid = str(uuid.UUID(int=1000 + i))
        path = root / f"-home-u-p{i % 3}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        parent = None
        lines = []
        for n, (kind, body) in enumerate([("user", text), ("assistant", f"reply {i}: {text}"), ("user", "ok")]):
            me = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{sid}/{n}"))
            lines.append({"parentUuid": parent, "isSidechain": False, "type": kind, "sessionId": sid,
                          "cwd": "/home/u/p", "uuid": me, "timestamp": f"2026-01-01T00:00:0{n}.000Z",
                          "message": {"role": kind, "content": [{"type": "text", "text": body}]}})
            parent = me
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")


@pytest.fixture
def both(tmp_path: Path, pg_url: str) -> Iterator[tuple[Path, Path, str, Path]]:  # noqa: F811
    """The same tree captured into a SQLite store and into PostgreSQL: (sqlite dir, pg dir, url, tree)."""
    tree = tmp_path / "projects"
    _tree(tree, TEXTS)
    lite, team = tmp_path / "lite", tmp_path / "team"
    with open_session_dir(lite, OpenMode.READ_WRITE, create=True) as sd:
        cap.capture_claude_code(sd, tree)
    use_store(pg_url)
    try:
        with open_session_dir(team, OpenMode.READ_WRITE, create=True) as sd:
            cap.capture_claude_code(sd, tree)
        use_store(None)
        yield lite, team, pg_url, tree
    finally:
        use_store(None)
        dispose_engines()


def _sqlite_keys(sd: SessionDir, text: str) -> set[tuple[str, str, str, int]]:
    index, _ = engine._index(sd)
    assert index is not None
    parsed = parse(text)
    if parsed.empty:
        return set()
    search(sd, "x", captured=True)  # brings the index up to date
    with index.lock:
        return {(str(a), str(b), str(c), int(d)) for a, b, c, d in index.conn.execute(
            "SELECT m.agent_id, m.agent_session_id, m.file_path, m.line_number FROM record_fts f "
            "JOIN record_meta m ON m.line_key = f.rowid WHERE record_fts MATCH ?", (parsed.fts(),))}


def _pg_keys(url: str, text: str) -> set[tuple[str, str, str, int]]:
    from store.agents.checkpoint_engine import PgStore

    literal = cs.tsquery(parse(text))
    if literal is None:
        return set()
    store = PgStore(url, OpenMode.READ_ONLY)
    try:
        return cs.record_keys(store, literal)
    finally:
        store.close()


def _view(result: engine.SearchResult) -> list[tuple[str, str, int, str, tuple[tuple[int, int], ...]]]:
    return sorted((h.agent_id, h.session_id, h.matches, h.snippet.text, h.snippet.spans) for h in result.hits)


def test_same_records_and_snippets_on_both_engines(both: tuple[Path, Path, str, Path]) -> None:
    lite, team, url, _ = both
    with open_session_dir(lite, OpenMode.READ_WRITE) as a:
        use_store(url)
        with open_session_dir(team, OpenMode.READ_WRITE) as b:
            first = search(b, "parser", captured=True, limit=None)
            assert first.source == INDEX and first.total == 2
            for text in QUERIES:
                use_store(None)
                ra, keys_a = search(a, text, captured=True, limit=None), _sqlite_keys(a, text)
                use_store(url)
                rb, keys_b = search(b, text, captured=True, limit=None), _pg_keys(url, text)
                assert (ra.source, rb.source) == (INDEX, INDEX), text
                assert keys_a == keys_b, text
                assert ra.total == rb.total and _view(ra) == _view(rb), text
        use_store(None)
    # at least these found something (the comparison above is not of empty sets only)
    for text in ("parser", '"connection pool"', "conn*", '"pool exh*"', "cafe", "CAFÉ", "naive", "example",
                 "to_file", "foo-bar", "日本語テキスト", "🦭" and "seal", '"unbalanced', "NEAR(", "a OR", "x²", "pwned"):
        assert _pg_keys(url, text), text
    assert not _pg_keys(url, '"pool connection"') and not _pg_keys(url, "*")


def test_best_match_is_the_same(both: tuple[Path, Path, str, Path]) -> None:
    lite, team, url, _ = both
    with open_session_dir(lite, OpenMode.READ_ONLY) as a:
        best_a = search(a, "walrus", captured=True).hits[0]
    use_store(url)
    with open_session_dir(team, OpenMode.READ_WRITE) as b:
        r = search(b, "walrus", captured=True)
    best_b = r.hits[0]
    assert r.total == 2 and r.hits[0].score is not None and r.hits[0].score < r.hits[1].score  # type: ignore[operator]
    assert (best_a.session_id, best_a.line_number) == (best_b.session_id, best_b.line_number)
    assert "walrus walrus walrus" in best_b.snippet.text and len(best_b.snippet.spans) >= 3


def test_read_mode_never_writes_and_falls_back(both: tuple[Path, Path, str, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    lite, team, url, tree = both
    use_store(url)
    before = pg_execute(url, "SELECT count(*) FROM agent_state_search")
    lines = pg_execute(url, "SELECT count(*) FROM agent_state_lines")[0][0]
    dump = pg_dump(url)
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        # An index never built, a small store: every record cut into the index's words and ranked by PostgreSQL.
        unbuilt = {text: search(sd, text, captured=True, limit=None) for text in QUERIES}
        r = unbuilt["walrus"]
        assert (r.source, r.exact, r.total) == (INDEX, lines, 2) and "never built" in r.reason
        assert r.how().startswith("ranked without the search index") and r.hits[0].score is not None
        # More records than a read mode ranks itself: the exact scan, saying why.
        monkeypatch.setattr(cs, "NEWER_CAP", 10)
        r = search(sd, "walrus", captured=True)
        assert r.source == LIKE and "never built" in r.reason and "too many to rank" in r.reason and r.total == 2
        assert r.hits[0].snippet.spans and r.hits[0].file_path.endswith(".jsonl")
        monkeypatch.undo()
    assert pg_dump(url) == dump
    assert pg_execute(url, "SELECT count(*) FROM agent_state_search") == before == [(0,)]
    assert pg_execute(url, "SELECT count(*) FROM agent_state_meta WHERE name = 'search_watermark'") == [(0,)]
    use_store(None)
    with open_session_dir(lite, OpenMode.READ_ONLY) as sd:   # SQLite's FTS5 over the same data
        for text in QUERIES:
            r = search(sd, text, captured=True, limit=None)
            assert r.total == unbuilt[text].total and _view(r) == _view(unbuilt[text]), text
    use_store(url)
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        assert refresh_team(sd).kind == "cold"           # asked for (the CLI's --index): a write to the store
        for text in QUERIES:                             # the built index answers exactly as the read mode did
            r = search(sd, text, captured=True, limit=None)
            assert (r.source, r.reason, r.exact) == (INDEX, "", 0), text
            assert [h[:9] for h in r.hits] == [h[:9] for h in unbuilt[text].hits], text
    # A build interrupted before its watermark (rows kept, no watermark): a read mode ignores the rows and ranks
    # every record itself, with the same answer.
    pg_execute(url, "DELETE FROM agent_state_search WHERE line_number = 1")
    pg_execute(url, "DELETE FROM agent_state_meta WHERE name = 'search_watermark'")
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        for text in QUERIES:
            r = search(sd, text, captured=True, limit=None)
            assert (r.source, r.exact) == (INDEX, lines) and "never built" in r.reason, text
            assert [h[:9] for h in r.hits] == [h[:9] for h in unbuilt[text].hits], text
        assert refresh_team(sd).kind == "cold"
    # New records captured since: a read mode searches them exactly beside the index, and says how many.
    _tree(tree, ["a capybara grazes"], start=500)
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        cap.capture_claude_code(sd, tree)
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        r = search(sd, "capybara", captured=True)
        assert (r.source, r.reason, r.exact, r.total) == (INDEX, "", 3, 1) and "3 records newer" in r.how()
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        r = search(sd, "capybara", captured=True)
        assert r.source == INDEX and r.total == 1
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        assert search(sd, "capybara", captured=True).source == INDEX


def test_like_scan_equals_sqlite_like(both: tuple[Path, Path, str, Path]) -> None:
    lite, team, url, _ = both
    for text in ("walrus", "PARSER", "to_file", "100%", "[/]", "\x1b]0;", '"unbalanced', "\ud83d", "\x00", "é"):
        with open_session_dir(lite, OpenMode.READ_ONLY) as a:
            ra = search(a, text, captured=True, use_index=False, limit=None)
        use_store(url)
        with open_session_dir(team, OpenMode.READ_ONLY) as b:
            rb = search(b, text, captured=True, use_index=False, limit=None)
        use_store(None)
        assert rb.source == LIKE
        assert sorted((h.session_id, h.matches) for h in ra.hits) == sorted((h.session_id, h.matches)
                                                                              for h in rb.hits), text


def test_late_commit_is_not_skipped_and_deletes_cascade(both: tuple[Path, Path, str, Path]) -> None:
    import psycopg

    from tests.pg import libpq_url

    _, team, url, _ = both
    use_store(url)
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "cold"
        sid = pg_execute(url, "SELECT session_id FROM agent_state_sessions ORDER BY 1 LIMIT 1")[0][0]
        line = json.dumps({"type": "user", "message": {"role": "user", "content": "an okapi arrives late"}})
        # A capture's transaction that began before an indexing pass and commits after it.
        with psycopg.connect(libpq_url(url)) as slow:
            slow.execute("INSERT INTO agent_state_lines (session_id, file_path, line_number, content, content_bytes) "
                         "VALUES (%s, 'late.jsonl', 1, %s, %s)", (sid, line, len(line)))
            assert refresh_team(sd).kind == "unchanged"
            slow.commit()
        assert refresh_team(sd).kind == "incremental"
        assert search(sd, "okapi", captured=True).total == 1
        assert refresh_team(sd).kind == "unchanged"
        # A removed session takes its index rows with it.
        agent, asid = pg_execute(url, "SELECT agent_id, agent_session_id FROM agent_state_sessions "
                                      "WHERE session_id = ?", (sid,))[0]
        assert delete_checkpoints(sd, str(agent), str(asid))
        assert pg_execute(url, "SELECT count(*) FROM agent_state_search WHERE session_id = ?", (sid,)) == [(0,)]
        assert search(sd, "okapi", captured=True).total == 0


def test_migration_3_upgrades_a_version_2_store(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    from store.agents import checkpoint_schema as schema
    from store.agents.checkpoint_engine import PgStore

    store = PgStore(pg_url, OpenMode.READ_WRITE)
    try:
        import re

        from store.mothx.schema import split_statements

        v1 = (Path(__file__).resolve().parents[2] / "store" / "sql" / "agentstate_v1.sql").read_text(encoding="utf-8")
        with store.write() as conn:  # the version-1 layout as the first release made it on PostgreSQL, then 2
            for statement in split_statements(v1):
                conn.execute(re.sub(r"^(\s+\w+\s+)TEXT\b", r'\1TEXT COLLATE "C"', statement, flags=re.M))
            conn.execute(f"CREATE SEQUENCE IF NOT EXISTS {schema.PG_SEQUENCE} MINVALUE 1")
            schema.upgrade(conn, 1, "postgresql", target=2)
        assert schema.ensure_pg(store) == 3
        with store.read() as conn:
            assert schema.stored_version(conn) == 3
            assert [m.version for m in schema.migrations(conn)] == [1, 2, 3]
            assert cs.index_exists(conn)
    finally:
        store.close()
        dispose_engines()


def test_tokens_are_fts5_tokens() -> None:
    """The Python tokenizer finds exactly FTS5's tokens (BMP; the table is read from FTS5 by store.search.tokens)."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    docs = [f"q{chr(cp)}q x{chr(cp)}" for cp in range(1, 0x10000) if not 0xD800 <= cp <= 0xDFFF]
    docs += TEXTS + ["a \u0301 b", "İstanbul ǅemal ﬁne", "x" * 3000]
    conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(docs, 1))
    found: dict[int, list[str]] = {}
    for doc, term in conn.execute('SELECT doc, term FROM v ORDER BY doc, "offset"'):
        found.setdefault(int(doc), []).append(str(term))
    bad = [d for i, d in enumerate(docs, 1) if tok.tokens(d) != found.get(i, [])]
    assert bad == []


def test_tsvector_and_tsquery_literals() -> None:
    v = cs.tsvector("it's it's")
    assert v == "'it':1,3 's':2,4"
    assert cs.tsquery(parse('"connection pool" conn* a')) == "('connection' <-> 'pool') & 'conn':* & 'a'"
    assert cs.tsquery(parse("read_file")) == "('read' <-> 'file')"
    assert cs.tsquery(parse("*")) is None and cs.tsquery(parse('"')) is None
    assert cs.tsquery(parse("o'neil")) == "('o' <-> 'neil')"
    assert cs.tsvector("x" * 3000) == "" and cs.tsvector("") == ""
    many = cs.tsvector("w " * 300)
    assert many.count(",") == cs.MAX_POSITIONS - 1


def test_cli_search_on_the_team_store(both: tuple[Path, Path, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from tui.cli import core as cli

    unsafe = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
    _, team, url, _ = both
    store = url.replace("postgresql+psycopg://", "postgresql://", 1)

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        for text in (out, err):
            assert unsafe.search(text) is None and "Traceback" not in text, text
        return code, out, err

    try:
        code, out, err = run("--dir", str(team), "search", "walrus", "--captured", "--store", store)
        assert code == 0 and "claude-code" in out and "ranked without the search index" in err and "never built" in err
        code, out, err = run("--dir", str(team), "search", "walrus", "--captured", "--index", "--store", store)
        assert code == 0 and "ranked by the search index" in err and "»walrus«" in out
        code, out, _ = run("--dir", str(team), "search", "walrus", "--captured", "--json", "--store", store)
        doc = json.loads(out)
        assert doc["source"] == "index" and doc["total"] == 2 and doc["hits"][0]["spans"]
        for bad in (*HOSTILE, '"unbalanced', "NEAR(", "a OR", "*"):
            assert run("--dir", str(team), "search", "--captured", "--store", store, "--", bad)[0] == 0
        assert run("--dir", str(team), "search", "x", "--index", "--store", store)[0] == 2
        assert run("--dir", str(team), "--read-only", "search", "x", "--captured", "--index", "--store", store)[0] == 2
    finally:
        use_store(None)


def test_incremental_equals_a_full_build_and_indexers_run_at_once(both: tuple[Path, Path, str, Path]) -> None:
    import threading

    _, team, url, tree = both
    use_store(url)
    rows = "SELECT session_id, file_path, line_number, CAST(words AS TEXT) FROM agent_state_search ORDER BY 1, 2, 3"
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        errors: list[BaseException] = []

        def index() -> None:
            try:
                refresh_team(sd)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=index) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        _tree(tree, ["more text about a capybara", "and a quokka"], start=700)
        cap.capture_claude_code(sd, tree)
        assert refresh_team(sd).kind == "incremental"
        incremental = pg_execute(url, rows)
        pg_execute(url, "DELETE FROM agent_state_search")
        pg_execute(url, "DELETE FROM agent_state_meta WHERE name = 'search_watermark'")
        assert refresh_team(sd).kind == "cold"
        assert pg_execute(url, rows) == incremental and len(incremental) > 40
