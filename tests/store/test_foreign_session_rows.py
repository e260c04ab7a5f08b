"""Foreign rows in the session list and the entries: a cell of the wrong type, bytes that are not UTF-8, a huge JSON number or a lone surrogate in
one row never break the session list, a session's summary, its transcript or its exports.

The bad row is shown as damaged (a session's ``problems``, an entry row's ``parse_error``); every other row
works as before. Each test runs twice: with the connection as it is, and with the ``surrogateescape``
text factory the database layer decodes text with.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import StoreError
from store.mothx import cells, entries, sessions
from store.mothx.db import OpenMode
from store.mothx.jsonvalue import BigNumber, parse_object
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.sessions import SessionFilter, SortKey, facets, get_session, list_sessions

RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
GOOD = "600d600d600d600d"
BAD = "baadbaadbaadbaad"
HUGE = "9" * 5000
T = TypeVar("T")


def _stamp(n: int) -> str:
    return f"2026-01-01T00:00:{n:02d}Z"


def _entry(conn: sqlite3.Connection, sid: str, n: int, type_: str, body: dict[str, object],
           data: str | None = None) -> None:
    eid = f"{sid[:4]}{n:012d}"
    obj: dict[str, object] = {"type": type_, "id": eid, "parentId": None, "timestamp": _stamp(n), **body}
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (sid, eid, type_, None, _stamp(n), data if data is not None else json.dumps(obj)))


def build(root: Path, *, foreign_seq: bool = False) -> Path:
    """A v43 session directory with two sessions of a few entries (``foreign_seq``: ``entries.seq`` is a plain
    column, as a foreign layout may have it, so it can hold any type)."""
    root.mkdir(parents=True, exist_ok=True)
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        if foreign_seq:
            conn.executescript(
                "DROP TABLE entries;"
                "CREATE TABLE entries (seq INTEGER, session_id TEXT, id TEXT, type TEXT, parent_id TEXT, "
                "timestamp TEXT, data TEXT);"
                "CREATE INDEX idx_entries_session_id ON entries(session_id);"
                "CREATE INDEX idx_entries_session_type ON entries(session_id, type);")
        for k, sid in enumerate((GOOD, BAD)):
            conn.execute("INSERT INTO sessions (id, cwd, timestamp, channel_type, channel_id) VALUES (?,?,?,?,?)",
                         (sid, f"/w/{k}", _stamp(k), "local", ""))
            base = 10 * k
            _entry(conn, sid, base + 1, "session", {"cwd": f"/w/{k}"})
            _entry(conn, sid, base + 2, "message", {"message": {"role": "user", "content": f"hello {k} é漢😀"}})
            _entry(conn, sid, base + 3, "message", {"message": {"role": "assistant", "contents": [
                {"type": "text", "text": "answer"},
                {"type": "toolCall", "toolCall": {"id": "c1", "name": "sh", "arguments": '{"cmd": "ls"}'}}]}})
            _entry(conn, sid, base + 4, "session_info", {"name": f"title {k}", "source": "manual"})
            _entry(conn, sid, base + 5, "turn_start", {"turnId": "t1"})
        if foreign_seq:
            conn.execute("UPDATE entries SET seq = rowid")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return root


@pytest.fixture(params=["as-is", "surrogateescape"])
def factory(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def opened(root: Path, factory: str) -> SessionDir:
    sd = open_session_dir(root, OpenMode.READ_ONLY)
    if factory == "surrogateescape":
        sd.db.conn.text_factory = cells.decode
    return sd


def corrupt(root: Path, sql: str, params: tuple[object, ...] = ()) -> None:
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        conn.execute(sql, params)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def all_rows(sd: SessionDir) -> list[sessions.SessionSummary]:
    return list_sessions(sd, limit=1000).rows


# ------------------------------------------------------------------------------------------ sessions cells


@pytest.mark.parametrize(("sql", "problem"), [
    (f"UPDATE sessions SET cwd = CAST(x'2f77ff' AS TEXT) WHERE id = '{BAD}'", "cwd is not valid UTF-8"),
    (f"UPDATE sessions SET cwd = x'0102' WHERE id = '{BAD}'", "cwd is a BLOB of 2 bytes, not text"),
    (f"UPDATE sessions SET timestamp = x'00' WHERE id = '{BAD}'", "timestamp is a BLOB of 1 byte, not text"),
    (f"UPDATE sessions SET timestamp = 'yesterday' WHERE id = '{BAD}'", "timestamp 'yesterday' is not an RFC 3339"),
    (f"UPDATE sessions SET fork_boundary_seq = 'abc' WHERE id = '{BAD}'", "fork_boundary_seq is TEXT 'abc'"),
    (f"UPDATE sessions SET seed_length = 1.5 WHERE id = '{BAD}'", "seed_length is REAL 1.5, not an integer"),
    (f"UPDATE sessions SET seed_length = x'01' WHERE id = '{BAD}'", "seed_length is a BLOB of 1 byte"),
    (f"UPDATE sessions SET channel_id = CAST(x'ff' AS TEXT) WHERE id = '{BAD}'", "channel_id is not valid UTF-8"),
    (f"UPDATE sessions SET fork_kind = CAST(x'1b5d30ff07' AS TEXT) WHERE id = '{BAD}'", "fork_kind is not valid"),
])
def test_a_bad_session_cell_damages_its_row_only(tmp_path: Path, factory: str, sql: str, problem: str) -> None:
    root = build(tmp_path / "d")
    corrupt(root, sql)
    with opened(root, factory) as sd:
        rows = {r.id: r for r in all_rows(sd)}
        assert set(rows) == {GOOD, BAD}
        assert rows[GOOD].problems == () and not rows[GOOD].damaged and rows[GOOD].title == "title 0"
        assert rows[BAD].damaged and any(p.startswith(problem) for p in rows[BAD].problems), rows[BAD].problems
        assert rows[BAD].title == "title 1" and rows[BAD].message_count == 2
        assert get_session(sd, BAD) == rows[BAD]
        for p in rows[BAD].problems:
            assert not RAW_CONTROL.search(p)
        for sort in SortKey:
            assert {r.id for r in list_sessions(sd, sort=sort, limit=1000).rows} == {GOOD, BAD}
        assert {r.id for r in list_sessions(sd, SessionFilter(search="hello 1")).rows} == {BAD}
        facets(sd)
        cwd = rows[BAD].cwd
        assert BAD in {r.id for r in list_sessions(sd, SessionFilter(cwd=cwd)).rows}
        json.dumps(rows[BAD].to_json())
    sessions.clear_cache(sd)


def test_an_id_that_is_not_utf8_is_listed_opened_and_exported(tmp_path: Path, factory: str) -> None:
    root = build(tmp_path / "d")
    corrupt(root, f"UPDATE sessions SET id = CAST(x'62aaff' AS TEXT) WHERE id = '{BAD}'")
    corrupt(root, f"UPDATE entries SET session_id = CAST(x'62aaff' AS TEXT) WHERE session_id = '{BAD}'")
    with opened(root, factory) as sd:
        rows = {r.id: r for r in all_rows(sd)}
        bad = "b\udcaa\udcff"
        assert set(rows) == {GOOD, bad}
        assert rows[bad].problems == ("id is not valid UTF-8",) and rows[bad].message_count == 2
        assert rows[bad].preview.startswith("hello 1")
        assert get_session(sd, bad) == rows[bad]
        assert [m.message.text for m in entries.replay(sd, bad)] == ["hello 1 é漢😀", "answer"]
        md = entries.export_markdown(sd, bad)
        assert "\\udcaa\\udcff" in md and not RAW_CONTROL.search(md)
        md.encode("utf-8")
        js = entries.export_json(sd, bad)
        assert json.loads(js)["session_id"] == bad
        plan = entries.replay_plan(sd, bad, verify=True)
        assert len(entries.replay_page(sd, plan)) == 2
        assert len(entries.rows_page(sd, bad)) == 5 and entries.row_count(sd, bad) == 5
        assert entries.turn_markers(sd, bad) == [(10, "turn_start", "t1")]


def test_a_blob_id_and_a_null_cell_in_a_foreign_layout(tmp_path: Path, factory: str) -> None:
    root = build(tmp_path / "d")
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:   # a foreign layout without the NOT NULL constraints
        conn.executescript(
            "ALTER TABLE sessions RENAME TO old_sessions;"
            "CREATE TABLE sessions (id, cwd, timestamp, parent_session, version, channel_type, channel_id, "
            "fork_boundary_seq, seed_length, fork_kind, expert_id);"
            "INSERT INTO sessions SELECT * FROM old_sessions; DROP TABLE old_sessions;")
        conn.execute(f"UPDATE sessions SET channel_type = NULL, fork_boundary_seq = NULL WHERE id = '{GOOD}'")
        conn.execute(f"UPDATE sessions SET id = CAST('{BAD}' AS BLOB), cwd = 42 WHERE id = '{BAD}'")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    with opened(root, factory) as sd:
        rows = {r.id: r for r in all_rows(sd)}
        assert set(rows) == {GOOD, BAD}
        assert set(rows[GOOD].problems) == {"channel_type is NULL", "fork_boundary_seq is NULL"}
        assert rows[GOOD].channel_type == "local" and rows[GOOD].fork_boundary_seq == 0
        assert set(rows[BAD].problems) == {"id is a BLOB of 16 bytes, not text", "cwd is INTEGER 42, not text"}
        assert rows[BAD].cwd == "42"
        assert get_session(sd, BAD).problems == rows[BAD].problems


# ------------------------------------------------------------------------------------------ entries cells


def test_a_huge_integer_in_entry_json_is_kept_and_shown(tmp_path: Path, factory: str) -> None:
    root = build(tmp_path / "d")
    data = ('{"type":"message","id":"huge00000000001","parentId":null,"timestamp":"2026-01-01T00:01:00Z",'
            '"message":{"role":"assistant","usage":{"totalTokens":' + HUGE + '},"contents":[{"type":"toolCall",'
            '"toolCall":{"id":"c2","name":"calc","input":{"n":' + HUGE + '}}}]}}')
    corrupt(root, "INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, 'huge00000000001', "
                  "'message', '2026-01-01T00:01:00Z', ?)", (GOOD, data))
    with opened(root, factory) as sd:
        rows = entries.load_rows(sd, GOOD)
        huge = [r for r in rows if r.id == "huge00000000001"][0]
        assert huge.parse_error is None and huge.parsed is not None
        assert isinstance(huge.parsed["message"]["usage"]["totalTokens"], BigNumber)
        replayed = entries.replay(sd, GOOD)
        assert replayed[-1].message.usage_total is None            # not a number Python can count with
        assert HUGE in replayed[-1].message.tool_calls[0].arguments
        assert entries.describe_row(huge).startswith("assistant: call calc")
        assert HUGE in entries.export_markdown(sd, GOOD)
        assert HUGE in entries.export_json(sd, GOOD)
        assert get_session(sd, GOOD).message_count == 3
    assert parse_object('{"a": 1e999}')[0] == {"a": "1e999"}


def test_a_lone_surrogate_escape_replays_and_exports(tmp_path: Path, factory: str) -> None:
    root = build(tmp_path / "d")
    data = ('{"type":"message","id":"lone00000000001","parentId":null,"timestamp":"2026-01-01T00:01:00Z",'
            '"message":{"role":"user","content":"pile \\ud83d of \\u001b]52;c;aGFja2Vk\\u0007 [/]"}}')
    corrupt(root, "INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, 'lone00000000001', "
                  "'message', '2026-01-01T00:01:00Z', ?)", (GOOD, data))
    corrupt(root, "INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, 'lone00000000002', "
                  "'compaction', '2026-01-01T00:01:00Z', ?)",
            (GOOD, '{"type":"compaction","id":"lone00000000002","summary":"s","firstKeptEntryId":"\\ud83d"}'))
    with opened(root, factory) as sd:
        texts = [m.message.text for m in entries.replay(sd, GOOD)]
        assert "pile \ud83d of \x1b]52;c;aGFja2Vk\x07 [/]" in texts
        plan = entries.replay_plan(sd, GOOD)
        assert [c.applied for c in plan.compactions] == [False]
        md = entries.export_markdown(sd, GOOD)
        md.encode("utf-8")
        assert not RAW_CONTROL.search(md) and "\\ud83d" in md and "␛]52;c;aGFja2Vk␇ [/]" in md
        js = entries.export_json(sd, GOOD)
        js.encode("utf-8")
        assert not RAW_CONTROL.search(js)
        assert "pile \ud83d of \x1b]52;c;aGFja2Vk\x07 [/]" in [m["text"] for m in json.loads(js)["messages"]]


@pytest.mark.parametrize("value", ["'abc'", "1.5", "x'00ff'", "NULL", "CAST(x'ff' AS TEXT)"])
def test_a_seq_that_is_no_integer_damages_its_row_only(tmp_path: Path, factory: str, value: str) -> None:
    root = build(tmp_path / "d", foreign_seq=True)
    corrupt(root, f"UPDATE entries SET seq = {value} WHERE seq = 8")     # BAD's assistant message
    with opened(root, factory) as sd:
        rows = {r.id: r for r in all_rows(sd)}
        assert rows[GOOD].message_count == 2 and rows[GOOD].title == "title 0"
        assert rows[BAD].message_count in (1, 2) and rows[BAD].title == "title 1"
        loaded = entries.load_rows(sd, BAD)
        assert len(loaded) == 5
        damaged = [r for r in loaded if r.parse_error is not None]
        assert len(damaged) == 1 and "not an integer" in (damaged[0].parse_error or "")
        assert entries.describe_row(damaged[0]).startswith("corrupt row: seq is ")
        assert [m.message.text for m in entries.replay(sd, BAD)] == ["hello 1 é漢😀"]
        plan = entries.replay_plan(sd, BAD, verify=True)
        assert [m.message.text for m in entries.replay_page(sd, plan)] == ["hello 1 é漢😀"]
        assert len(entries.rows_page(sd, BAD)) == 4 == entries.row_count(sd, BAD)
        assert entries.turn_markers(sd, BAD) == [(10, "turn_start", "t1")]
        assert "1 corrupt row skipped" in entries.export_markdown(sd, BAD)
        assert [m.message.text for m in entries.replay(sd, GOOD)] == ["hello 0 é漢😀", "answer"]


def test_blob_and_bad_text_in_entry_cells(tmp_path: Path, factory: str) -> None:
    root = build(tmp_path / "d")
    corrupt(root, "UPDATE entries SET data = CAST(data AS BLOB) WHERE seq = 2")
    corrupt(root, "UPDATE entries SET timestamp = CAST(x'ff' AS TEXT), id = CAST(x'fe' AS TEXT) WHERE seq = 3")
    corrupt(root, "UPDATE entries SET data = x'00ff' WHERE seq = 4")
    with opened(root, factory) as sd:
        rows = {r.id: r for r in all_rows(sd)}
        assert rows[GOOD].preview.startswith("hello 0") and rows[GOOD].title == ""
        assert rows[GOOD].last_active_at == "\udcff"            # MAX(timestamp) as SQLite compares it
        loaded = entries.load_rows(sd, GOOD)
        assert [r.parse_error is None for r in loaded] == [True, True, True, False, True]
        assert [m.message.text for m in entries.replay(sd, GOOD)] == ["hello 0 é漢😀", "answer"]
        assert not RAW_CONTROL.search(entries.export_markdown(sd, GOOD))


# ------------------------------------------------------------------------------------------ any cell, any value


_VALUES = st.one_of(
    st.sampled_from(["NULL", "0", "-1", "1.5", "1e300", "'abc'", "''", "x''", "x'00ff'", "CAST(x'ff' AS TEXT)",
                     "CAST(x'c3' AS TEXT)", "CAST(x'1b5d303b70776e6564ff07' AS TEXT)", "'\x1b]0;pwned\x07'",
                     "'\u202etxt.exe'", "'[bold]x[/bold]'", "'2026-13-45T99:99:99Z'", "9223372036854775807"]),
    st.integers(min_value=-3, max_value=40).map(str),
)
_DATA = st.sampled_from([
    '{"type":"message","id":"x","message":{"role":"user","content":"big ' + "1" * 10 + '","n":' + HUGE + '}}',
    '{"type":"message","message":{"role":"user","content":"lone \\ud83d \\u001b[2J \\u009b31m"}}',
    '{"type":"message","message":{"role":"user","content":"' + "é" * 40 + '"}}',
    '{"type":"compaction","summary":"s","firstKeptEntryId":"\\ud83d"}',
    '{"type":"compaction","summary":"\\u001b]52;c;aGFja2Vk\\u0007","firstKeptEntryId":""}',
    '{"type":"content_override","targetEntryId":"600d000000000002","message":{"role":"user","content":1e999}}',
    '{"type":"session_info","name":"\\u001b]0;t\\u0007 [/] \\udcff"}',
    '{"type":"turn_start","turnId":' + HUGE + '}',
    '{"type":"message","message":{"role":"assistant","contents":[{"type":"image","image":{"bytes":' + HUGE
    + ',"width":1e999}}, {"type":"file","file":{"size":-' + HUGE + '}}]}}',
    "[" * 5000,
    '{"a": NaN}',
]).map(lambda text: "'" + text.replace("'", "''") + "'")
_SESSION_COLS = ("id", "cwd", "timestamp", "parent_session", "channel_type", "channel_id", "fork_boundary_seq",
                 "seed_length", "fork_kind")
_ENTRY_COLS = ("seq", "session_id", "id", "type", "parent_id", "timestamp", "data")
_CORRUPTION = st.one_of(
    st.tuples(st.just("sessions"), st.integers(1, 2), st.sampled_from(_SESSION_COLS), _VALUES),
    st.tuples(st.just("entries"), st.integers(1, 15), st.sampled_from(_ENTRY_COLS), st.one_of(_VALUES, _DATA)),
)


def _clean(text: str) -> None:
    assert not RAW_CONTROL.search(text), text
    text.encode("utf-8")


def _exercise(sd: SessionDir) -> None:
    """Every read the list, the transcript and the exports make; only named store errors may come out."""
    def guarded(fn: Callable[..., T], *args: object, **kwargs: object) -> T | None:
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            _clean(str(exc))
            return None

    ids: list[str] = []
    for flt in (SessionFilter(), SessionFilter(messages_only=True), SessionFilter(search="hello"),
                SessionFilter(search="\udcff"), SessionFilter(search="é漢"), SessionFilter(search="%_")):
        for sort in SortKey:
            for descending in (True, False):
                listing = guarded(list_sessions, sd, flt, sort, descending, limit=50)
                if listing is None:
                    continue
                for row in listing.rows:
                    for problem in row.problems:
                        _clean(problem)
                    json.dumps(row.to_json())
                    ids.append(row.id)
    got = guarded(facets, sd)
    if got is not None:
        for value in got.cwds[:2]:
            guarded(list_sessions, sd, SessionFilter(cwd=value.value))
    with sd.db.read() as conn:
        ids += [cells.as_text(r[0]) for r in conn.execute("SELECT CAST(session_id AS BLOB) FROM entries")]
    for sid in dict.fromkeys(ids):
        guarded(get_session, sd, sid)
        for entry_row in guarded(entries.load_rows, sd, sid) or []:
            _clean(entries.describe_row(entry_row))
        guarded(entries.replay, sd, sid)
        for verify in (False, True):
            plan = guarded(entries.replay_plan, sd, sid, verify=verify)
            if plan is None:
                continue
            after = None
            for _ in range(20):
                items = guarded(entries.replay_page, sd, plan, after_seq=after, limit=2) or []
                msgs = [m for m in items if m.kind == "message"]
                if not msgs:
                    break
                after = msgs[-1].seq
            guarded(entries.replay_page, sd, plan, before_seq=entries.END_SEQ, limit=3)
        guarded(entries.rows_page, sd, sid, limit=3)
        guarded(entries.rows_page, sd, sid, before_seq=entries.END_SEQ, limit=3)
        guarded(entries.row_count, sd, sid)
        guarded(entries.turn_markers, sd, sid)
        md = guarded(entries.export_markdown, sd, sid)
        if md is not None:
            _clean(md.replace("\n", "").replace("\t", ""))
        js = guarded(entries.export_json, sd, sid)
        if js is not None:
            _clean(js.replace("\n", ""))
            json.loads(js)


_TEMPLATES: dict[bool, Path] = {}


def _template(foreign_seq: bool) -> Path:
    if foreign_seq not in _TEMPLATES:
        _TEMPLATES[foreign_seq] = build(Path(tempfile.mkdtemp(prefix="foreign-rows-")) / "d", foreign_seq=foreign_seq)
    return _TEMPLATES[foreign_seq]


@pytest.fixture(scope="module", autouse=True)
def _drop_templates() -> Iterator[None]:
    yield
    for path in _TEMPLATES.values():
        shutil.rmtree(path.parent, ignore_errors=True)
    _TEMPLATES.clear()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(foreign_seq=st.booleans(), escape=st.booleans(), corruptions=st.lists(_CORRUPTION, min_size=1, max_size=5))
def test_any_corrupted_cell_leaves_every_read_working(foreign_seq: bool, escape: bool,
                                                      corruptions: list[tuple[str, int, str, str]]) -> None:
    work = Path(tempfile.mkdtemp(prefix="foreign-case-"))
    try:
        root = work / "d"
        shutil.copytree(_template(foreign_seq), root)
        conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
        try:
            for table, rowid, column, value in corruptions:
                try:
                    conn.execute(f"UPDATE {table} SET {column} = {value} WHERE rowid = ?", (rowid,))
                except sqlite3.IntegrityError:
                    pass            # a NOT NULL / unique / rowid column of the real layout refuses it
                except sqlite3.OperationalError:
                    pass
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        with opened(root, "surrogateescape" if escape else "as-is") as sd:
            _exercise(sd)
    finally:
        shutil.rmtree(work, ignore_errors=True)


HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
           "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d", "pid-4242-[/]", "[bold]x[/bold]",
           "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_text_is_safe_in_row_lines_and_exports(tmp_path: Path, value: str) -> None:
    root = build(tmp_path / "d")
    body = {"type": "message", "id": "host00000000001", "message": {
        "role": value + "\n# not a heading", "toolName": value, "toolCallId": value, "content": value,
        "contents": [{"type": "thinking", "thinking": value},
                     {"type": "toolCall", "toolCall": {"id": value, "name": value, "arguments": json.dumps({"a": value})}},
                     {"type": value}]}}
    info = {"type": "session_info", "id": "host00000000002", "name": value + "\nsecond line"}
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        for eid, type_, obj in (("host00000000001", "message", body), ("host00000000002", "session_info", info)):
            conn.execute("INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?,?,?,?,?)",
                         (GOOD, eid, type_, "t", json.dumps(obj)))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    with opened(root, "as-is") as sd:
        for row in entries.load_rows(sd, GOOD):
            line = entries.describe_row(row)
            _clean(line)
            assert "\n" not in line
        md = entries.export_markdown(sd, GOOD)
        _clean(md.replace("\n", ""))
        assert md.splitlines()[0].startswith("# ") and "second line" in md.splitlines()[0]
        assert not any(line.startswith("# not a heading") for line in md.splitlines())
        js = entries.export_json(sd, GOOD)
        _clean(js.replace("\n", ""))
        assert value in [m["text"] for m in json.loads(js)["messages"]]
        assert json.loads(js)["title"] == value + "\nsecond line"
