"""store.search: ranked full-text search over mothx entries and captured records (FTS5 side index, LIKE fallback)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import store.mothx.sessions as sessions_mod
import store.search.engine as engine
import store.search.index as index_mod
from store.agents import capture as cap
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.safetext import one_line
from store.search import INDEX, LIKE, index_path_for, refresh, search
from store.search.query import parse
from tests.store.test_sessions import Writer, new_dir

HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe", "pid-4242-[/]",
           "[bold]x[/bold]", "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]"]
FTS_SYNTAX = ['"', '""', '"""', "AND", "OR", "NOT", "NEAR(", "NEAR(a b", "*", "-", "-x", "^", "a:b", "col:",
              "(", ")", "a OR", "AND AND", "{a b}", "a + b", "'", "\\", "%", "_", "\x00", "\ud83d", "a*b*",
              '"a" "', "NEAR(\"a\" \"b\", 2)", "x" * 300, "*" * 50, ":", "\u202e", "AND\x1b[2J"]


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    w = new_dir(tmp_path / "sessions")
    yield w
    w.conn.close()


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    with engine._registry_lock:
        found = list(engine._registry.values())
        engine._registry.clear()
    for _, index, _ in found:
        if index is not None:
            index.close()
    with sessions_mod._registry_lock:
        lists = list(sessions_mod._registry.values())
        sessions_mod._registry.clear()
    for _, item in lists:
        item.close()


def corpus(w: Writer) -> None:
    w.session("s-many", cwd="/w/a", t=1)
    w.session("s-once", cwd="/w/b", t=2)
    w.session("s-none", cwd="/w/c", t=3)
    w.session("s-phrase", cwd="/w/d", t=4)
    for i in range(5):
        w.user("s-many", f"the parser fails again {i}: parser parser")
    w.user("s-once", "a long message that talks about many things and mentions the parser once in passing among words")
    w.user("s-none", "nothing to see here")
    w.user("s-phrase", "connection pool exhausted")
    w.assistant("s-none", "the pool of connection handles")
    w.entry("s-once", "message", {"message": {"role": "assistant", "contents": [
        {"type": "thinking", "thinking": "pondering zeppelins"},
        {"type": "toolCall", "toolCall": {"id": "c1", "name": "grep_tool", "arguments": {"pattern": "walrus"}}}]}})
    w.entry("s-once", "message", {"message": {"role": "toolResult", "toolCallId": "c1", "toolName": "grep_tool",
                                              "content": "found narwhal in file"}})
    w.title("s-phrase", "Refactoring session")


def ids(result: engine.SearchResult) -> list[str]:
    return [h.session_id for h in result.hits]


def test_ranking_phrase_prefix(writer: Writer) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        r = search(sd, "parser")
        assert r.source == INDEX and r.reason == ""
        assert ids(r) == ["s-many", "s-once"]                 # five dense hits beat one diluted one
        assert r.hits[0].score is not None and r.hits[0].score < r.hits[1].score  # type: ignore[operator]
        assert r.hits[0].matches == 5 and r.hits[0].role == "user" and r.hits[0].entry_type == "message"
        snip = r.hits[0].snippet
        assert snip.spans and all(snip.text[a:b].lower() == "parser" for a, b in snip.spans)
        # Phrase: words next to each other, in order.
        assert ids(search(sd, '"connection pool"')) == ["s-phrase"]
        assert set(ids(search(sd, "connection pool"))) == {"s-phrase", "s-none"}
        assert ids(search(sd, '"pool connection"')) == []
        # Prefix.
        assert set(ids(search(sd, "pars*"))) == {"s-many", "s-once"}
        assert ids(search(sd, "refactor*")) == ["s-phrase"]    # the title (session_info)
        assert ids(search(sd, "refactor")) == []
        # Thinking, tool names, arguments and results are searchable.
        for word in ("zeppelins", "grep_tool", "walrus", "narwhal"):
            assert ids(search(sd, word)) == ["s-once"], word
        # Session columns (reference 5.2) come after the ranked hits.
        r = search(sd, "/w/b")
        assert ids(r) == ["s-once"] and r.hits[0].seq == 0 and r.hits[0].score is None


def test_paging_after_key(writer: Writer) -> None:
    writer.session("a", t=1)
    for i in range(30):
        sid = f"p{i:02d}"
        writer.session(sid, t=i)
        writer.user(sid, " ".join(["common"] * (1 + i % 5) + ["filler"] * 10))
    for sid in ("p05x", b"p05\xff"):     # ties with p05 (the same text): ordered by id, one of them not UTF-8
        writer.conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (CAST(? AS TEXT), '/w', 't', 3)",
                            (sid,))
        writer.conn.execute("INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (CAST(? AS TEXT), "
                            "?, 'message', 't', ?)", (sid, f"tie{len(sid)}{type(sid).__name__}", json.dumps(
                                {"message": {"role": "user", "content": " ".join(["common"] + ["filler"] * 10)}})))
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        whole = search(sd, "common", limit=None)
        assert whole.total == 32 and not whole.has_more
        keys = [h.key for h in whole.hits]
        assert keys == sorted(keys) and len(set(keys)) == 32
        ties = [h.session_id for h in whole.hits if h.order == whole.hits[ids(whole).index("p05")].order]
        assert ties == sorted(ties) and {"p00", "p05", "p05x", "p05\udcff"} <= set(ties)
        pages: list[str] = []
        after = None
        while True:
            page = search(sd, "common", limit=7, after=after)
            pages += ids(page)
            if not page.has_more:
                break
            after = page.hits[-1].key
        assert pages == ids(whole)


@pytest.mark.parametrize("text", FTS_SYNTAX + HOSTILE)
def test_fts_syntax_never_raises(writer: Writer, text: str) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        for captured in (False, True):
            r = search(sd, text, captured=captured)
            assert r.source == INDEX
            assert search(sd, text, captured=captured, use_index=False).source == LIKE
    assert parse(text).fts().count('"') % 2 == 0


def test_query_parse() -> None:
    assert parse("a b").fts() == '"a" AND "b"'
    assert parse('"a b" c*').fts() == '"a b" AND "c"*'
    assert parse('say "hi').fts() == '"say" AND "hi"'
    assert parse('AND OR NEAR(').fts() == '"AND" AND "OR" AND "NEAR("'
    assert parse('- * " ^').empty
    assert parse('x"y').fts() == '"x" AND "y"'
    assert parse('a""b').fts() == '"a" AND "b"'


def _fts_rows(sd: SessionDir) -> list[tuple[object, ...]]:
    path = index_path_for(sd.db.path)
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT m.seq, f.text, m.session_id, m.entry_id, m.role, m.entry_type FROM entry_fts f "
                            "JOIN entry_meta m ON m.seq = f.rowid & ? ORDER BY m.seq", (index_mod.SEQ_MASK,)).fetchall()
    finally:
        conn.close()


def test_incremental_refresh_equals_full_build(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_mod, "CHUNK", 3)           # many chunks: resumable steps are exercised
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
    for i in range(12):
        writer.user("s-none", f"appended parser note {i}")
    writer.title("s-none", "Late title")
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        r = search(sd, "parser")
        assert "s-none" in ids(r)
        info = engine.index_info(sd)
        assert info is not None and info.last_sync == "incremental"
        incremental = _fts_rows(sd)
        refresh(sd, full=True)
        assert engine.index_info(sd).last_sync == "rebuild"  # type: ignore[union-attr]
        assert _fts_rows(sd) == incremental
        assert search(sd, "parser") == r


def test_appends_seen_by_an_open_directory(writer: Writer) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "quokka")) == []
        writer.user("s-none", "a quokka appears")
        assert ids(search(sd, "quokka")) == ["s-none"]


def test_replaced_database_rebuilds(writer: Writer, tmp_path: Path) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
    writer.close()
    other = new_dir(tmp_path / "other")
    other.session("x-new", t=1)
    for i in range(20):     # more entries than before: the high-water mark alone would not notice
        other.user("x-new", f"fresh content {i} kiwi")
    other.close()
    os.replace(other.path, writer.path)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == []
        assert ids(search(sd, "kiwi")) == ["x-new"]
        assert engine.index_info(sd).last_sync == "rebuild"  # type: ignore[union-attr]
    writer.conn = sqlite3.connect(writer.path)


def test_deleted_entries_rebuild(writer: Writer) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert "s-once" in ids(search(sd, "parser"))
    writer.conn.execute("DELETE FROM entries WHERE session_id = 's-once'")
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many"]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT])
def test_read_modes_write_nothing_in_the_directory(writer: Writer, tmp_path: Path, mode: OpenMode) -> None:
    corpus(writer)
    _capture_small(tmp_path, writer.root)
    writer.close()
    before = _snapshot(writer.root)
    listing = sorted(os.listdir(writer.root))
    with open_session_dir(writer.root, mode) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
        assert search(sd, "walrus", captured=True).hits
        assert index_path_for(sd.db.path).is_file()
    assert sorted(os.listdir(writer.root)) == listing
    assert _snapshot(writer.root) == before
    writer.conn = sqlite3.connect(writer.path)


@pytest.mark.parametrize("text", ["parser", "PARSER", "pool", "/w/b", "s-", "%", "_", "\\", "zeppelins",
                                  "grep_tool", '"role"', "nothing here", "a", *HOSTILE])
def test_fallback_equals_like_semantics(writer: Writer, text: str) -> None:
    corpus(writer)
    writer.user("s-none", "hostile " + " ".join(HOSTILE))
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        r = search(sd, text, limit=None, use_index=False)
        assert r.source == LIKE and r.reason
        layout = sessions_mod.read_layout(sd)
        assert set(ids(r)) == set(sessions_mod._search_ids(sd, layout, text))
        assert len(ids(r)) == r.total


def test_unwritable_cache_answers_with_like(writer: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus(writer)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))    # the cache folder cannot be made
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        r = search(sd, "parser")
        assert r.source == LIKE and "cache" in r.reason
        assert set(ids(r)) == {"s-many", "s-once"}
        assert r.hits[0].session_id == "s-many"           # most matching entries first
        assert any(r.hits[0].snippet.spans)


def test_hostile_text_in_snippets_stays_literal(writer: Writer) -> None:
    writer.session("h", t=1)
    for bad in HOSTILE:
        writer.user("h", f"before {bad} marker after")
    writer.user("h", "private \ue000 use \ue001 chars marker")
    writer.entry("h", "message", data='{"type":"message","id":"sur","message":{"role":"us\\ud83der",'
                 '"content":"lone \\ud83d surrogate marker"}}')
    writer.conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (CAST(? AS TEXT), '/w', 't', 3)",
                        (b"bad\xffid",))
    writer.conn.execute("INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (CAST(? AS TEXT), "
                        "CAST(? AS TEXT), 'message', 't', CAST(? AS TEXT))",
                        (b"bad\xffid", b"e\xfe", b'{"message":{"role":"user","content":"bytes \xff marker"}}'))
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        for use_index in (True, False):
            r = search(sd, "marker", use_index=use_index)
            assert set(ids(r)) == {"h", "bad\udcffid"}
            odd = next(h for h in r.hits if h.session_id != "h")
            assert odd.entry_id == "e\udcfe" and odd.seq
            snip = next(h for h in r.hits if h.session_id == "h").snippet
            for a, b in snip.spans:
                assert snip.text[a:b].lower() == "marker"
            shown = "".join(one_line(piece) for piece, _ in snip.parts())
            assert not any(0 <= ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or 0x202A <= ord(c) <= 0x202E for c in shown)
        all_hits = search(sd, "before", limit=None)
        assert all_hits.hits[0].matches == len(HOSTILE)
        assert ids(search(sd, "surrogate")) == ["h"]
        # the markers snippet() used are never taken from the data
        priv = search(sd, "private")
        assert "\ue000" in priv.hits[0].snippet.text and priv.hits[0].snippet.spans


def _capture_small(tmp_path: Path, root: Path) -> None:
    tree = tmp_path / "codex-root" / "2026" / "01" / "01"
    tree.mkdir(parents=True)
    path = tree / "rollout-2026-01-01T00-00-00-abc.jsonl"
    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "abc", "cwd": "/w"}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user",
                                                                 "content": [{"type": "input_text",
                                                                              "text": "find the walrus please"}]}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                                                 "arguments": "{\"cmd\": \"grep walrus\"}",
                                                                 "call_id": "walrus-id"}},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        cap.capture_codex(sd, tmp_path / "codex-root")


def test_captured_records(writer: Writer, tmp_path: Path) -> None:
    corpus(writer)
    _capture_small(tmp_path, writer.root)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        r = search(sd, "walrus", captured=True)
        assert r.source == INDEX and ids(r) == ["abc"] and r.captured
        hit = r.hits[0]
        assert hit.agent_id == "codex" and hit.matches == 2 and hit.line_number in (2, 3)
        assert hit.file_path.endswith(".jsonl") and hit.snippet.spans
        assert ids(search(sd, "walrus-id", captured=True)) == []      # ids are not text
        like = search(sd, "walrus", captured=True, use_index=False)
        assert like.source == LIKE and ids(like) == ["abc"]
    # An appended line is indexed incrementally.
    path = next((tmp_path / "codex-root").rglob("*.jsonl"))
    with path.open("a") as fh:
        fh.write(json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "agent_message",
                                                                                  "message": "a capybara"}}) + "\n")
    with open_session_dir(writer.root, OpenMode.READ_WRITE) as sd:
        cap.capture_codex(sd, tmp_path / "codex-root")
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "capybara", captured=True)) == ["abc"]
        info = engine.index_info(sd)
        assert info is not None and info.records == 3   # the header line has no text


def test_damaged_index_file_is_rebuilt(writer: Writer) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        search(sd, "parser")
        path = index_path_for(sd.db.path)
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    path.write_bytes(b"garbage" * 100)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
    shutil.rmtree(path.parent)


def test_an_index_of_the_previous_format_is_rebuilt_in_larger_pages(writer: Writer) -> None:
    corpus(writer)
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
        path = index_path_for(sd.db.path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == index_mod.PAGE_SIZE
    # What an older version left: 4 KiB pages, format 4.
    conn.execute("UPDATE meta SET body = json_set(body, '$.format', 4)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode = WAL")
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    conn.close()
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
        info = engine.index_info(sd)
        assert info is not None and info.last_sync == "cold"
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == index_mod.PAGE_SIZE
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Held open elsewhere, an emptied index keeps its pages (and works): the switch needs the file to itself.
    conn.execute("UPDATE meta SET body = json_set(body, '$.format', 4)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("SELECT count(*) FROM meta").fetchone()
    with open_session_dir(writer.root, OpenMode.READ_ONLY) as sd:
        assert ids(search(sd, "parser")) == ["s-many", "s-once"]
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    conn.close()
