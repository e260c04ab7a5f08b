"""store.mothx.sessions: the session list of reference 5.2, its aggregate cache, search, details and facets.

The central property: whatever happens to ``sessions.db`` between opens (appends, deleted entries, deleted or
new sessions, renames, a different database at the same path), the cached list equals a direct evaluation
of the reference SQL.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import store.mothx.aggregates as aggregates
import store.mothx.runs as runs_mod
import store.mothx.sessionindex as sessionindex
import store.mothx.sessions as sessions_mod
from store import paths
from store.errors import AmbiguousSessionId, SessionNotFound, StoreError
from store.mothx.db import OpenMode
from store.mothx.leases import LeaseOwner
from store.mothx.schema import RUN_ACTIVE_STATUSES
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.sessions import (
    FacetValue,
    SessionFilter,
    SessionSummary,
    SortKey,
    count_sessions,
    cut_preview,
    facets,
    get_session,
    index_info,
    like_pattern,
    list_sessions,
    position_of,
    preview_from_data,
    refresh,
    title_from_data,
)

# ----------------------------------------------------------------------------------------------------------
# A foreign writer: plain sqlite3, reference JSON


def ts(n: int) -> str:
    """An RFC 3339 time n seconds after a fixed start, with a trimmed fraction like Go writes it."""
    base = 1_767_225_600 + n  # 2026-01-01T00:00:00Z
    h, rem = divmod(base % 86_400, 3_600)
    m, s = divmod(rem, 60)
    day = 1 + (base - 1_767_225_600) // 86_400
    frac = "" if n % 3 == 0 else f".{(n * 7919) % 1000:03d}".rstrip("0").rstrip(".")
    return f"2026-01-{day:02d}T{h:02d}:{m:02d}:{s:02d}{frac}Z"


class Writer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "sessions.db"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.n = 0

    def close(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()

    def session(self, sid: str, *, cwd: str = "/w", t: int = 0, channel: str = "local", channel_id: str = "",
                parent: str = "", fork_kind: str = "", boundary: int = 0, seed: int = 0) -> str:
        self.conn.execute(
            "INSERT INTO sessions (id, cwd, timestamp, parent_session, version, channel_type, channel_id, "
            "fork_boundary_seq, seed_length, fork_kind) VALUES (?,?,?,?,3,?,?,?,?,?)",
            (sid, cwd, ts(t), parent, channel, channel_id, boundary, seed, fork_kind),
        )
        return sid

    def entry(self, sid: str | None, type_: str, body: dict[str, object] | None = None, *, t: int | None = None,
              data: str | None = None) -> int:
        self.n += 1
        digest = int(hashlib.sha256(f"{self.root}-{self.n}-{sid}".encode()).hexdigest(), 16)
        eid = f"e{digest % 10**15:015d}"  # digits only: a search for letters never matches an entry id by chance
        stamp = ts(self.n if t is None else t)
        if data is None:
            obj: dict[str, object] = {"type": type_, "id": eid, "parentId": None, "timestamp": stamp}
            obj.update(body or {})
            data = json.dumps(obj)
        cur = self.conn.execute(
            "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
            (sid, eid, type_, None, stamp, data),
        )
        return int(cur.lastrowid or 0)

    def user(self, sid: str, text: str, **kw: object) -> int:
        msg = {"role": "user", "content": text}
        return self.entry(sid, "message", {"message": msg}, **kw)  # type: ignore[arg-type]

    def assistant(self, sid: str, text: str, **kw: object) -> int:
        msg = {"role": "assistant", "contents": [{"type": "text", "text": text}]}
        return self.entry(sid, "message", {"message": msg}, **kw)  # type: ignore[arg-type]

    def title(self, sid: str, name: str, **kw: object) -> int:
        return self.entry(sid, "session_info", {"name": name, "source": "manual"}, **kw)  # type: ignore[arg-type]

    def delete_session(self, sid: str) -> None:
        self.conn.execute("DELETE FROM entries WHERE session_id = ?", (sid,))
        self.conn.execute("DELETE FROM session_metadata WHERE session_id = ?", (sid,))
        self.conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))


def new_dir(root: Path) -> Writer:
    root.mkdir(parents=True, exist_ok=True)
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    return Writer(root)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    w = new_dir(tmp_path / "sessions")
    yield w
    w.conn.close()


@pytest.fixture(autouse=True)
def _forget_indexes() -> Iterator[None]:
    yield
    # Indexes are per Database object; tests open many. Drop them so no connection outlives its test.
    with sessions_mod._registry_lock:
        entries = list(sessions_mod._registry.values())
        sessions_mod._registry.clear()
    for _, lists in entries:
        lists.close()


# ----------------------------------------------------------------------------------------------------------
# The oracle: reference 5.2 evaluated directly (correlated subqueries), title/preview from the rows


def _read(db_path: Path) -> sqlite3.Connection:
    """A plain read connection that creates no file (mode=ro would add -wal/-shm to a quiet WAL database)."""
    live = db_path.with_name(db_path.name + "-shm").exists()
    return sqlite3.connect(f"file:{db_path}?{'mode=ro' if live else 'immutable=1'}", uri=True)


def reference_rows(db_path: Path) -> list[SessionSummary]:
    conn = _read(db_path)
    try:
        rows = conn.execute(
            """
            SELECT s.id, COALESCE(s.cwd, ''), COALESCE(s.timestamp, ''), s.channel_type, s.channel_id,
                   COALESCE(s.parent_session, ''), s.fork_kind, s.fork_boundary_seq, s.seed_length,
                   COALESCE((SELECT MAX(e.timestamp) FROM entries e WHERE e.session_id = s.id), s.timestamp, ''),
                   (SELECT COUNT(*) FROM entries e WHERE e.session_id = s.id AND e.type = 'message'),
                   (SELECT e.data FROM entries e WHERE e.session_id = s.id AND e.type = 'session_info'
                    ORDER BY e.seq DESC LIMIT 1),
                   COALESCE(m.project_id, ''), COALESCE(p.name, ''), COALESCE(m.pinned, 0),
                   COALESCE((SELECT r.status FROM session_runs r WHERE r.session_id = s.id AND r.status IN
                             ('created','queued','running','waiting_for_approval','waiting_for_question',
                              'cancelling','terminalizing') LIMIT 1), '')
            FROM sessions s
            LEFT JOIN session_metadata m ON m.session_id = s.id
            LEFT JOIN projects p ON p.id = m.project_id
            """
        ).fetchall()
        out = []
        for (sid, cwd, created, channel, channel_id, parent, kind, boundary, seed, last, msgs, info, pid, pname,
             pinned, run) in rows:
            first = conn.execute(   # 5.2: the message entry with MIN(seq), whatever its role
                "SELECT data FROM entries WHERE session_id = ? AND type = 'message' ORDER BY seq LIMIT 1", (sid,)
            ).fetchone()
            preview = (preview_from_data(first[0]) or "") if first is not None else ""
            title = title_from_data(info) if info is not None else ""
            state = reference_run_state(conn, sid)
            out.append(SessionSummary(sid, title, preview, cwd, channel, channel_id, msgs, last, created, parent,
                                      kind, boundary, seed, pid, pname, bool(pinned), run, *state))
        return out
    finally:
        conn.close()


def reference_run_state(conn: sqlite3.Connection, sid: str) -> tuple[str, int]:
    """(run_state, lease_expires_at) as the Runs screen derives it, for every session (idle: "")."""
    facts = runs_mod.read_facts_conn(conn, sid)
    state = runs_mod.derive_execution_state(facts, LeaseOwner.current().instance_id).state
    lease = facts.lease
    expires = lease.expires_at if lease is not None and lease.state == "active" else 0
    return ("" if state == "idle" else state), expires


def reference_search(db_path: Path, query: str) -> set[str]:
    conn = _read(db_path)
    try:
        pattern = like_pattern(query)
        return {r[0] for r in conn.execute(
            """SELECT s.id FROM sessions s WHERE s.id LIKE :q ESCAPE '\\' OR s.cwd LIKE :q ESCAPE '\\'
               OR s.channel_type LIKE :q ESCAPE '\\' OR s.channel_id LIKE :q ESCAPE '\\'
               OR EXISTS (SELECT 1 FROM entries e WHERE e.session_id = s.id AND e.data LIKE :q ESCAPE '\\')""",
            {"q": pattern})}
    finally:
        conn.close()


def reference_order(rows: list[SessionSummary]) -> list[str]:
    return [r.id for r in sorted(rows, key=lambda r: (r.last_active_at, r.id), reverse=True)]


def listed(sd: SessionDir, flt: SessionFilter | None = None, sort: SortKey = SortKey.LAST_ACTIVE,
           descending: bool = True, window: int = 7) -> list[SessionSummary]:
    """The whole list, read window by window as a screen does."""
    flt = flt if flt is not None else SessionFilter()
    out: list[SessionSummary] = []
    offset = 0
    while True:
        page = list_sessions(sd, flt, sort, descending, offset=offset, limit=window)
        out.extend(page.rows)
        assert page.total >= len(out)
        if not page.has_more:
            assert len(out) == page.total
            return out
        offset += window


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


# ----------------------------------------------------------------------------------------------------------
# Extraction rules


def test_title_and_preview_rules() -> None:
    assert title_from_data('{"type":"session_info","name":"Fix the parser"}') == "Fix the parser"
    assert title_from_data('{"type":"session_info","name":null}') == ""
    assert title_from_data("{not json") == ""
    assert title_from_data('{"type":"session_info","name":"x","n":NaN}') == ""    # NaN is not JSON
    user = {"type": "message", "message": {"role": "user", "content": "  hello\n\n  world  "}}
    assert preview_from_data(json.dumps(user)) == "  hello\n\n  world  "        # the text as it is (raw data)
    blocks = {"message": {"role": "user", "contents": [{"type": "image"}, {"type": "text", "text": "from block"}]}}
    assert preview_from_data(json.dumps(blocks)) == "from block"
    listed_content = {"message": {"role": "user", "content": [{"type": "text", "text": "list content"}]}}
    assert preview_from_data(json.dumps(listed_content)) == "list content"
    assert preview_from_data(json.dumps({"message": {"role": "assistant", "content": "no"}})) is None
    injected = {"message": {"role": "user", "content": "context", "systemInjected": True}}
    assert preview_from_data(json.dumps(injected)) == "context"      # 5.2 asks only for the role
    assert preview_from_data(json.dumps({"message": {"role": "user", "content": ""}})) is None
    long = "x" * 61
    assert preview_from_data(json.dumps({"message": {"role": "user", "content": long}})) == "x" * 60 + "..."
    assert preview_from_data(json.dumps({"message": {"role": "user", "content": "y" * 60}})) == "y" * 60
    assert preview_from_data("[1, 2]") is None
    huge = '{"message": {"role": "user", "content": "big", "n": ' + "9" * 5000 + "}}"
    assert preview_from_data(huge) == "big"
    assert title_from_data('{"type":"session_info","name":"big","n":' + "9" * 5000 + "}") == "big"


@pytest.mark.parametrize(("text", "want"), [
    ("a" * 60, "a" * 60),                                   # exactly 60 bytes: not cut
    ("a" * 61, "a" * 60 + "..."),
    ("a" * 59 + "é", "a" * 59 + "..."),              # é is 2 bytes: 61 in all, cut before it
    ("a" * 58 + "é", "a" * 58 + "é"),                       # 60 bytes exactly
    ("a" * 58 + "é" + "b", "a" * 58 + "é" + "..."),
    ("a" * 58 + "漢", "a" * 58 + "..."),                     # 漢 is 3 bytes: 61
    ("a" * 57 + "漢", "a" * 57 + "漢"),
    ("a" * 57 + "漢b", "a" * 57 + "漢..."),
    ("a" * 57 + "😀", "a" * 57 + "..."),                     # 4 bytes: 61
    ("a" * 56 + "😀", "a" * 56 + "😀"),
    ("a" * 56 + "😀!", "a" * 56 + "😀..."),
    ("漢" * 21, "漢" * 20 + "..."),                          # 63 bytes: 60 kept
    ("é" * 31, "é" * 30 + "..."),
    ("😀" * 16, "😀" * 15 + "..."),
    ("a\udcff" * 31, "a\udcff" * 30 + "..."),             # a byte that is not UTF-8 counts as one byte
    ("", ""),
])
def test_preview_is_cut_at_60_bytes_on_a_character_boundary(text: str, want: str) -> None:
    got = cut_preview(text)
    assert got == want
    raw = got.encode("utf-8", "surrogateescape")
    assert len(raw) <= 63 and (len(raw) <= 60 or got.endswith("..."))
    body = got[:-3] if got.endswith("...") and got != text else got
    assert text.startswith(body)
    msg = json.dumps({"type": "message", "message": {"role": "user", "content": text}}) if text else None
    if msg is not None and "\udcff" not in text:
        assert preview_from_data(msg) == want


def test_like_pattern_escapes_wildcards() -> None:
    assert like_pattern("50%_a\\b") == "%50\\%\\_a\\\\b%"


# ----------------------------------------------------------------------------------------------------------
# The list


def test_list_fields_and_order(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000001", cwd="/p/a", t=1)
    b = w.session("bbbb000000000002", cwd="/p/b", t=2, channel="wechat", channel_id="wx-1",
                  parent=a, fork_kind="message", boundary=7, seed=5)
    c = w.session("cccc000000000003", cwd="/p/a", t=3)          # no entries: last_active falls back to timestamp
    w.entry(a, "session")
    w.entry(a, "message", {"message": {"role": "user", "content": "ctx", "systemInjected": True}})
    w.assistant(a, "hi")
    w.user(a, "first real question " + "z" * 80)
    w.user(a, "second question")
    w.title(a, "Old title")
    w.title(a, "New title")
    w.entry(a, "turn_end", {"turnId": "t1"}, t=500)        # the newest timestamp of a is not a message
    w.user(b, "question for b", t=100)
    w.conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES ('p1', 'Atlas', 'x', 'x')")
    w.conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) VALUES (?, 'p1', 1, 'x')",
                   (b,))
    w.conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) VALUES "
                   "('r1', ?, 'completed', 'x', 'x'), ('r2', ?, 'waiting_for_approval', 'y', 'y')", (b, b))
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        rows = listed(sd)
        assert [r.id for r in rows] == [a, b, c]
        ra, rb, rc = rows
        assert ra.title == "New title"
        assert ra.preview == "ctx"         # 5.2: the first message entry (this one is injected by the runtime)
        assert ra.message_count == 4
        assert ra.last_active_at == ts(500)
        assert rb.channel_type == "wechat" and rb.channel_id == "wx-1"
        assert (rb.parent_session, rb.fork_kind, rb.fork_boundary_seq, rb.seed_length) == (a, "message", 7, 5)
        assert (rb.project_id, rb.project_name, rb.pinned) == ("p1", "Atlas", True)
        assert rb.run_status == "waiting_for_approval"
        assert rc.last_active_at == rc.timestamp == ts(3) and rc.message_count == 0 and rc.preview == ""
        assert rows == sorted(reference_rows(w.path), key=lambda r: [a, b, c].index(r.id))
        assert get_session(sd, a) == ra and get_session(sd, b) == rb and get_session(sd, c) == rc
        js = rb.to_json()
        assert js["id"] == b and js["pinned"] is True and js["fork_kind"] == "message"
        assert set(js) == {f for f in SessionSummary.__dataclass_fields__}


def test_filters_sorts_and_windows(writer: Writer) -> None:
    w = writer
    ids = [w.session(f"{i:04x}000000000000", cwd=f"/p/{i % 3}", t=i, channel="feishu" if i % 4 == 0 else "local")
           for i in range(1, 40)]
    for i, sid in enumerate(ids):
        for k in range(i % 5):
            w.user(sid, f"msg {i} {k}", t=1000 + i * 10 + k)
        if i % 2:
            w.title(sid, f"Title {(i * 7) % 13:02d}", t=1000 + i * 10 + 9)
    w.conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES ('p1', 'P', 'x', 'x')")
    for sid in ids[:5]:
        w.conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) "
                       "VALUES (?, 'p1', 0, 'x')", (sid,))
    ref = {r.id: r for r in reference_rows(w.path)}
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        everything = listed(sd)
        assert [r.id for r in everything] == reference_order(list(ref.values()))
        cases = {
            SessionFilter(cwd="/p/1"): lambda r: r.cwd == "/p/1",
            SessionFilter(channel_type="feishu"): lambda r: r.channel_type == "feishu",
            SessionFilter(project_id="p1"): lambda r: r.project_id == "p1",
            SessionFilter(messages_only=True): lambda r: r.message_count > 0,
            SessionFilter(cwd="/p/2", messages_only=True): lambda r: r.cwd == "/p/2" and r.message_count > 0,
            SessionFilter(project_id="nope"): lambda r: False,
        }
        for flt, keep in cases.items():
            want = [r.id for r in everything if keep(r)]
            assert [r.id for r in listed(sd, flt)] == want, flt
            assert count_sessions(sd, flt) == len(want)
        keys = {
            SortKey.LAST_ACTIVE: lambda r: (r.last_active_at, r.id),
            SortKey.MESSAGES: lambda r: (r.message_count, r.last_active_at, r.id),
            SortKey.CWD: lambda r: (r.cwd, r.last_active_at, r.id),
            SortKey.CREATED: lambda r: (r.timestamp, r.id),
            SortKey.TITLE: lambda r: ((r.title or r.preview) == "", (r.title or r.preview).lower(), r.last_active_at,
                                      r.id),
        }
        for sort, key in keys.items():
            for desc in (True, False):
                want = [r.id for r in sorted(ref.values(), key=key, reverse=desc)]
                assert [r.id for r in listed(sd, sort=sort, descending=desc, window=11)] == want, (sort, desc)
        page = list_sessions(sd, offset=35, limit=10)
        assert [r.id for r in page.rows] == [r.id for r in everything[35:]] and page.total == 39 and not page.has_more
        page = list_sessions(sd, offset=100, limit=10)
        assert page.rows == [] and page.total == 39 and not page.has_more
        assert list_sessions(sd, limit=0).rows == []
        assert position_of(sd, everything[20].id) == 20
        assert position_of(sd, "not-a-session") is None


def test_partial_first_part_then_full_order(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions_mod, "FIRST_PART", 5)
    w = writer
    for i in range(23):
        sid = w.session(f"{i:016x}", t=i)
        w.user(sid, f"m{i}", t=100 + (i * 37) % 23)
    want = reference_order(reference_rows(w.path))
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        first = list_sessions(sd, offset=0, limit=3)
        assert first.total == 23 and first.has_more and [r.id for r in first.rows] == want[:3]
        deep = list_sessions(sd, offset=18, limit=10)
        assert [r.id for r in deep.rows] == want[18:] and deep.total == 23 and not deep.has_more


def test_search_is_exact_and_escaped(writer: Writer) -> None:
    w = writer
    a = w.session("abcd000000000001", cwd="/home/me/alpha")
    b = w.session("abce000000000002", cwd="/x", channel="feishu", channel_id="fs-chan")
    c = w.session("ffff000000000003", cwd="/y")
    d = w.session("eeee000000000004", cwd="/z")
    w.user(c, "the Needle is here")
    w.user(d, "100% sure_thing")
    w.user(d, "plain")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        for query, want in {
            "needle": {c}, "NEEDLE": {c}, "alpha": {a}, "FS-CHAN": {b}, "feishu": {b}, "abc": {a, b},
            "100%": {d}, "0% s": {d}, "%": {d}, "_": {d}, "sure_": {d}, "sureX": set(), "\\": set(),
        }.items():
            got = {r.id for r in listed(sd, SessionFilter(search=query))}
            assert got == want == reference_search(w.path, query), query


def test_search_with_parallel_scan_matches(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aggregates, "PARALLEL_MIN_ROWS", 1)
    monkeypatch.setattr(aggregates.Scanner, "__init__", _two_workers)
    w = writer
    for i in range(12):
        sid = w.session(f"{i:016x}")
        for k in range(i):
            w.user(sid, f"word{k}")
    w.close()
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        for q in ("word3", "word10", "word", "zzz"):
            assert {r.id for r in listed(sd, SessionFilter(search=q))} == reference_search(w.path, q)
        assert listed(sd) == sorted(reference_rows(w.path), key=lambda r: reference_order(
            reference_rows(w.path)).index(r.id))


def _two_workers(self: aggregates.Scanner, db: object) -> None:
    self.db = db  # type: ignore[assignment]
    self.workers = 2


# ----------------------------------------------------------------------------------------------------------
# The cache: incremental, repaired, rebuilt, outside the directory, in every mode


def test_cache_lives_outside_and_read_modes_change_no_byte(writer: Writer) -> None:
    w = writer
    for i in range(6):
        sid = w.session(f"{i:016x}", t=i)
        w.user(sid, f"hello {i}")
        w.title(sid, f"t{i}")
    w.close()
    before = tree_digest(w.root)
    for mode in (OpenMode.READ_ONLY, OpenMode.SNAPSHOT):
        with open_session_dir(w.root, mode) as sd:
            rows = listed(sd)
            assert [r.id for r in rows] == reference_order(reference_rows(w.path))
            info = index_info(sd)
            assert info.persistent and info.cache_path is not None
            assert paths.cache_dir() in info.cache_path.parents
            assert w.root not in info.cache_path.parents
            list_sessions(sd, SessionFilter(search="hello 3"))
            assert get_session(sd, "0000000000000002").title == "t2"
            facets(sd)
        assert tree_digest(w.root) == before, mode


def test_a_cache_of_an_older_format_is_rebuilt_with_todays_previews(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000000")
    w.user(a, "漢" * 30)
    want = "漢" * 20 + "..."
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert [r.preview for r in listed(sd)] == [want]
        cache = index_info(sd).cache_path
    assert cache is not None

    def rewrite(fmt: int, preview: str) -> None:
        conn = sqlite3.connect(cache, isolation_level=None)
        try:
            meta = json.loads(conn.execute("SELECT body FROM meta").fetchone()[0])
            conn.execute("UPDATE meta SET body = ?", (json.dumps({**meta, "format": fmt}),))
            conn.execute("UPDATE agg SET preview = ?", (preview,))
        finally:
            conn.close()

    rewrite(sessionindex.CACHE_FORMAT, "kept")       # today's format: the cache is trusted as it is
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert [r.preview for r in listed(sd)] == ["kept"]
        assert index_info(sd).last_sync == "unchanged"
    rewrite(2, "漢" * 59 + "…")                      # a preview cut the old way, in a format-2 cache
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert [r.preview for r in listed(sd)] == [want]
        assert index_info(sd).last_sync == "cold"


def test_incremental_after_appends_and_reuse_across_opens(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000000")
    b = w.session("bbbb000000000000")
    w.user(a, "one")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        listed(sd)
        assert index_info(sd).last_sync == "cold"
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        listed(sd)
        assert index_info(sd).last_sync == "unchanged"
    w.user(b, "two")
    w.title(a, "named later")
    w.assistant(a, "reply")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        rows = listed(sd)
        assert index_info(sd).last_sync == "incremental"
        assert sorted(rows, key=lambda r: r.id) == sorted(reference_rows(w.path), key=lambda r: r.id)
        assert {r.id: r.preview for r in rows} == {a: "one", b: "two"}


def test_live_changes_seen_without_reopening(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000000")
    w.user(a, "one")
    with open_session_dir(w.root, OpenMode.READ_WRITE) as sd:
        assert [r.message_count for r in listed(sd)] == [1]
        w.user(a, "two")                                  # another connection commits
        assert [r.message_count for r in listed(sd)] == [2]
        with sd.db.write() as conn:                       # our own connection writes
            conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES ('bbbb000000000000', '/b', ?)", (ts(9999),))
        rows = listed(sd)
        assert [r.id for r in rows] == ["bbbb000000000000", a]
        assert rows == sorted(reference_rows(w.path), key=lambda r: [x.id for x in rows].index(r.id))


def test_deleted_entries_and_sessions_are_repaired(writer: Writer) -> None:
    w = writer
    ids = [w.session(f"{i:016x}", t=i) for i in range(8)]
    seqs = {sid: [w.user(sid, f"m{sid[-1]}-{k}") for k in range(3)] for sid in ids}
    w.title(ids[0], "title zero")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        listed(sd)
    w.delete_session(ids[3])
    w.conn.execute("DELETE FROM entries WHERE seq = ?", (seqs[ids[5]][0],))     # the preview row of 5
    w.conn.execute("DELETE FROM entries WHERE type = 'session_info'")             # the title of 0
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        rows = listed(sd)
        assert index_info(sd).last_sync == "repair"
        assert sorted(rows, key=lambda r: r.id) == sorted(reference_rows(w.path), key=lambda r: r.id)
        by_id = {r.id: r for r in rows}
        assert ids[3] not in by_id and by_id[ids[5]].preview == "m5-1" and by_id[ids[0]].title == ""


def test_deferred_deletion_check_serves_the_cache_then_repairs(writer: Writer) -> None:
    w = writer
    ids = [w.session(f"{i:016x}", t=i) for i in range(6)]
    seqs = {sid: [w.user(sid, f"m{sid[-1]}-{k}") for k in range(3)] for sid in ids}
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        listed(sd)
    w.conn.execute("DELETE FROM entries WHERE seq = ?", (seqs[ids[2]][0],))     # an entry of a session that stays
    w.delete_session(ids[4])
    w.user(ids[1], "appended")                                                   # and one appended
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        sessions_mod.defer_deletion_check(sd)
        before = {r.id: r for r in listed(sd)}
        assert index_info(sd).last_sync == "incremental"
        assert ids[4] not in before                       # a deleted session goes with its sessions row
        assert before[ids[1]].message_count == 4          # appended entries are counted at once
        assert before[ids[2]].message_count == 3 and before[ids[2]].preview == "m2-0"   # not checked yet
        assert sessions_mod.verify_list(sd) is True
        after = listed(sd)
        assert sorted(after, key=lambda r: r.id) == sorted(reference_rows(w.path), key=lambda r: r.id)
        assert {r.id: r for r in after}[ids[2]].preview == "m2-1"
        assert sessions_mod.verify_list(sd) is False      # once only
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:  # nothing deleted since: verify finds nothing
        sessions_mod.defer_deletion_check(sd)
        listed(sd)
        assert index_info(sd).last_sync == "unchanged"
        assert sessions_mod.verify_list(sd) is False
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:  # without deferring, nothing is pending
        assert sessions_mod.verify_list(sd) is False


def test_another_database_at_the_same_path_is_rebuilt(tmp_path: Path) -> None:
    w = new_dir(tmp_path / "s")
    for i in range(5):
        w.user(w.session(f"{i:016x}"), f"first db {i}")
    w.close()
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        listed(sd)
    shutil.rmtree(w.root)
    w2 = new_dir(tmp_path / "s")
    for i in range(7):                                   # more rows, same seq numbers, other ids
        sid = w2.session(f"{i + 100:016x}")
        w2.user(sid, f"second db {i}")
        w2.user(sid, "again")
    w2.close()
    with open_session_dir(w2.root, OpenMode.READ_ONLY) as sd:
        rows = listed(sd)
        assert index_info(sd).last_sync == "rebuild"
        assert sorted(rows, key=lambda r: r.id) == sorted(reference_rows(w2.path), key=lambda r: r.id)


def test_damaged_cache_file_is_replaced(writer: Writer) -> None:
    w = writer
    w.user(w.session("aaaa000000000000"), "x")
    w.close()
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        listed(sd)
        path = index_info(sd).cache_path
    assert path is not None
    sessions_mod._registry.clear()
    for p in (path, *paths.companions(path)):
        p.unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert [r.preview for r in listed(sd)] == ["x"]
        assert index_info(sd).persistent


def test_unwritable_cache_dir_falls_back_to_memory(writer: Writer, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    w = writer
    for i in range(4):
        w.user(w.session(f"{i:016x}"), f"q{i}")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        rows = listed(sd)
        info = index_info(sd)
        assert not info.persistent and info.cache_path is None
        assert sorted(rows, key=lambda r: r.id) == sorted(reference_rows(w.path), key=lambda r: r.id)
        w.user("0000000000000001", "more")
        assert {r.id: r.message_count for r in listed(sd)}["0000000000000001"] == 2


def test_release_closes_the_index_and_a_later_call_reopens_it(writer: Writer) -> None:
    w = writer
    w.user(w.session("aaaa000000000000"), "x")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        lists = sessions_mod._lists(sd)
        listed(sd)
        sessions_mod.release(sd)
        with pytest.raises(sqlite3.ProgrammingError):
            lists.index.conn.execute("SELECT 1")
        assert [r.preview for r in listed(sd)] == ["x"]
        assert index_info(sd).last_sync == "unchanged"


def test_two_open_directories_share_one_cache(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000000")
    w.user(a, "one")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as one, open_session_dir(w.root, OpenMode.READ_WRITE) as two:
        assert [r.message_count for r in listed(one)] == [1]
        assert [r.message_count for r in listed(two)] == [1]
        w.user(a, "two")
        assert [r.message_count for r in listed(two)] == [2]     # two moves the shared cache on
        w.user(a, "three")
        assert [r.message_count for r in listed(one)] == [3]     # one finds it moved and catches up
        assert [r.message_count for r in listed(two)] == [3]


def test_refresh_full_rebuilds(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000000")
    seq = w.user(a, "original")
    with open_session_dir(w.root, OpenMode.READ_WRITE) as sd:
        assert listed(sd)[0].preview == "original"
        # An in-place edit is invisible to the cheap checks; refresh(full=True) is the way to pick it up.
        w.conn.execute("UPDATE entries SET data = ? WHERE seq = ?",
                       (json.dumps({"type": "message", "message": {"role": "user", "content": "edited"}}), seq))
        info = refresh(sd, full=True)
        assert info.last_sync == "rebuild" and info.entries == 1
        assert listed(sd)[0].preview == "edited"


# ----------------------------------------------------------------------------------------------------------
# The central property


@dataclass
class Model:
    sessions: list[str] = field(default_factory=list)
    counter: int = 0


OPS = st.lists(
    st.tuples(
        st.sampled_from(["new", "user", "assistant", "title", "other", "corrupt", "del_session", "del_entry",
                         "injected", "orphan", "blocks", "reopen", "project", "run"]),
        st.integers(0, 1_000),
        st.integers(0, 60),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, parallel=st.booleans(), first_part=st.sampled_from([2, 1_000]))
def test_cached_list_equals_reference_sql(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]],
                                         parallel: bool, first_part: int) -> None:
    root = tmp_path_factory.mktemp("prop") / "sessions"
    w = new_dir(root)
    model = Model()
    old_min, old_first, old_init = aggregates.PARALLEL_MIN_ROWS, sessions_mod.FIRST_PART, aggregates.Scanner.__init__
    aggregates.PARALLEL_MIN_ROWS = 1 if parallel else old_min
    sessions_mod.FIRST_PART = first_part
    if parallel:
        aggregates.Scanner.__init__ = _two_workers  # type: ignore[method-assign]
    try:
        w.conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES ('p1', 'One', 'x', 'x')")
        for op, pick, t in ops:
            sid = model.sessions[pick % len(model.sessions)] if model.sessions else None
            if op == "new" or sid is None:
                model.counter += 1
                model.sessions.append(w.session(f"{model.counter:04x}{pick:012x}", cwd=f"/c/{pick % 3}", t=t))
            elif op == "user":
                w.user(sid, f"user {pick} " + "w" * (pick % 90), t=t)
            elif op == "assistant":
                w.assistant(sid, f"assistant {pick}", t=t)
            elif op == "title":
                w.title(sid, f"Title {pick}", t=t)
            elif op == "other":
                w.entry(sid, "turn_start", {"turnId": str(pick)}, t=t)
            elif op == "corrupt":
                w.entry(sid, "message" if pick % 2 else "session_info", data="{broken " + str(pick), t=t)
            elif op == "injected":
                w.entry(sid, "message", {"message": {"role": "user", "content": "ctx", "systemInjected": True}}, t=t)
            elif op == "blocks":
                blocks = [{"type": "text", "text": f"b{pick}"}]
                w.entry(sid, "message", {"message": {"role": "user", "contents": blocks}}, t=t)
            elif op == "orphan":
                w.entry(None if pick % 2 else "no-such-session", "message",
                        {"message": {"role": "user", "content": "orphan"}}, t=t)
            elif op == "del_session":
                w.delete_session(sid)
                model.sessions.remove(sid)
            elif op == "del_entry":
                w.conn.execute("DELETE FROM entries WHERE seq = (SELECT seq FROM entries WHERE session_id = ? "
                               "ORDER BY seq LIMIT 1 OFFSET ?)", (sid, pick % 3))
            elif op == "project":
                w.conn.execute("INSERT OR REPLACE INTO session_metadata (session_id, project_id, pinned, updated_at) "
                               "VALUES (?, 'p1', ?, 'x')", (sid, pick % 2))
            elif op == "run":
                w.conn.execute("DELETE FROM session_runs WHERE session_id = ?", (sid,))
                status = RUN_ACTIVE_STATUSES[pick % len(RUN_ACTIVE_STATUSES)] if pick % 3 else "completed"
                w.conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                               "VALUES (?, ?, ?, 'x', 'x')", (f"run-{sid}", sid, status))
            if op == "reopen" or pick % 4 == 0:
                _check(w, pick)
        _check(w, 0)
    finally:
        aggregates.PARALLEL_MIN_ROWS, sessions_mod.FIRST_PART = old_min, old_first
        aggregates.Scanner.__init__ = old_init  # type: ignore[method-assign]
        with sessions_mod._registry_lock:
            entries = list(sessions_mod._registry.values())
            sessions_mod._registry.clear()
        for _, lists in entries:
            lists.close()
        w.conn.close()


def _check(w: Writer, pick: int) -> None:
    mode = (OpenMode.READ_ONLY, OpenMode.SNAPSHOT, OpenMode.READ_WRITE)[pick % 3]
    ref = reference_rows(w.path)
    with open_session_dir(w.root, mode) as sd:
        rows = listed(sd, window=3)
        assert [r.id for r in rows] == reference_order(ref)
        assert sorted(rows, key=lambda r: r.id) == sorted(ref, key=lambda r: r.id)
        for query in ("user 1", "Title", "%", "orphan"):
            got = {r.id for r in listed(sd, SessionFilter(search=query), window=50)}
            assert got == reference_search(w.path, query), query
        for r in ref[:3]:
            assert get_session(sd, r.id) == r


# ----------------------------------------------------------------------------------------------------------
# Details, facets, older layouts


def test_get_session_by_prefix(writer: Writer) -> None:
    w = writer
    w.session("abcd111100000000")
    w.session("abcd222200000000")
    w.session("ef01000000000000")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert get_session(sd, "ef01").id == "ef01000000000000"
        assert get_session(sd, "abcd1").id == "abcd111100000000"
        assert get_session(sd, "abcd222200000000").id == "abcd222200000000"
        with pytest.raises(AmbiguousSessionId, match="abcd"):
            get_session(sd, "abcd")
        with pytest.raises(SessionNotFound, match="at least 4"):
            get_session(sd, "ef0")
        with pytest.raises(SessionNotFound):
            get_session(sd, "9999")
        with pytest.raises(SessionNotFound):
            get_session(sd, "  ")
        assert isinstance(SessionNotFound("x"), StoreError)


def test_get_session_from_the_open_list_equals_the_direct_computation(writer: Writer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    w = writer
    a = w.session("aaaa000000000000", cwd="/one", t=5)
    b = w.session("bbbb000000000000", cwd="/two", channel="wechat", channel_id="w1", t=7)
    c = w.session("cccc000000000000", t=9)                         # no entries
    w.user(a, "first question")
    w.title(a, "named")
    w.assistant(a, "reply", t=10_000)                                # the newest timestamp is not the last row
    w.user(a, "again", t=50)
    w.user(b, "other")
    w.conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                   "VALUES ('run_1', ?, 'running', 't', 't')", (b,))
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        direct = {sid: get_session(sd, sid) for sid in (a, b, c)}   # no list open yet: computed directly
        rows = {r.id: r for r in listed(sd)}
        assert direct == rows
        real_aggregate = sessions_mod.aggregate
        scans: list[object] = []

        def counting(*args: object, **kwargs: object) -> object:
            scans.append(args)
            return real_aggregate(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(sessions_mod, "aggregate", counting)
        assert {sid: get_session(sd, sid) for sid in (a, b, c)} == direct   # now from the list: no entry scan
        assert scans == []
        w.assistant(b, "later", t=20_000)                            # another process appends
        assert get_session(sd, b).message_count == 2 and get_session(sd, b).last_active_at == ts(20_000)
        assert scans == []
        held, release = threading.Event(), threading.Event()

        def hold() -> None:                                          # a long search holds the list
            with sessions_mod._lists(sd).lock:
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            held.wait(10)
            assert get_session(sd, a) == direct[a] and len(scans) == 1   # small: computed directly, no waiting
            monkeypatch.setattr(sessions_mod, "DIRECT_SUMMARY_ROWS", 3)  # a "big" session waits for the list
            threading.Timer(0.05, release.set).start()
            assert get_session(sd, a) == direct[a] and len(scans) == 1
        finally:
            release.set()
            holder.join()


def test_run_state_is_derived_for_the_window_only_where_a_run_or_lease_is_involved(writer: Writer) -> None:
    w = writer
    now = int(w.conn.execute("SELECT CAST(strftime('%s','now') AS INTEGER)").fetchone()[0])
    me = LeaseOwner.current().instance_id

    def session(sid: str, t: int, *, run: str = "", lease: tuple[str, str, int, str] | None = None,
                recovery: str = "") -> str:
        w.session(sid, t=t)
        w.user(sid, f"hello {sid[:4]}")
        if run:
            w.conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                           "VALUES (?, ?, ?, 't', 't')", (f"run_{sid}", sid, run))
        if lease is not None:
            owner, purpose, expires, state = lease
            w.conn.execute(
                "INSERT INTO session_runtime_leases (session_id, owner_instance_id, owner_pid, owner_kind, "
                "lease_token_hash, epoch, run_id, purpose, state, acquired_at, heartbeat_at, expires_at, updated_at) "
                "VALUES (?, ?, 4242, 'process', 'h', 3, ?, ?, ?, ?, ?, ?, ?)",
                (sid, owner, f"run_{sid}" if run and purpose == "execution" else "", purpose, state, now - 60,
                 now - 5, expires, now - 5))
        if recovery:
            w.conn.execute("INSERT INTO session_run_recoveries (run_id, session_id, state, attempt, last_error, "
                           "started_at, updated_at) VALUES (?, ?, ?, 1, 'database is locked', ?, ?)",
                           (f"run_{sid}", sid, recovery, now, now))
        return sid

    other = "pid-4242-" + "ab" * 16
    want = {
        session("a000000000000001", 1, run="running", lease=(other, "execution", now + 600, "active")): "external",
        session("a000000000000002", 2, run="running", lease=(other, "execution", now - 600, "active")): "orphaned",
        session("a000000000000003", 3, run="queued"): "orphaned",
        session("a000000000000004", 4, lease=(other, "mutation", now + 600, "active")): "reserved",
        session("a000000000000005", 5, run="running", lease=(other, "execution", now - 600, "active"),
                recovery="failed"): "recovery_failed",
        session("a000000000000006", 6, lease=(other, "execution", now + 600, "released")): "",
        session("a000000000000007", 7, lease=(other, "execution", now - 600, "active")): "",
        session("a000000000000008", 8, run="running", lease=(me, "execution", now + 600, "active")): "local",
        session("a000000000000009", 9): "",
    }
    expires = {"a000000000000001": now + 600, "a000000000000004": now + 600, "a000000000000008": now + 600,
               "a000000000000002": now - 600, "a000000000000005": now - 600, "a000000000000007": now - 600}
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        direct = {sid: get_session(sd, sid) for sid in want}            # computed directly
        rows = {r.id: r for r in listed(sd)}
        assert {sid: r.run_state for sid, r in rows.items()} == want
        assert {sid: r.lease_expires_at for sid, r in rows.items() if r.lease_expires_at} == expires
        assert direct == rows == {sid: get_session(sd, sid) for sid in want}   # (now from the open list)
        assert rows["a000000000000002"].to_json()["run_state"] == "orphaned"
        assert rows["a000000000000002"].run_status == "running"          # the raw status is still there


def test_session_texts_by_index_equal_the_aggregates(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000001")
    w.assistant(a, "not a preview")                                   # the first message is not a user text
    w.entry(a, "message", {"message": {"role": "user", "content": "injected", "systemInjected": True}})
    w.entry(a, "message", {"message": {"role": "user", "contents": [
        {"type": "image"}, {"type": "text", "text": "  the\n question  "}]}})
    w.title(a, "old title")
    w.title(a, "new title")
    b = w.session("bbbb000000000002")
    w.user(b, "only a preview")
    w.entry(b, "session_info", {"source": "manual"})                  # the newest session_info has no name
    c = w.session("cccc000000000003")
    w.title(c, "no messages")
    d = w.session("dddd000000000004")                                 # no entries at all
    e = w.session("eeee000000000005")
    w.entry(e, "message", {"message": {"role": "user", "contents": [
        {"type": "image"}, {"type": "text", "text": "  the\n question  "}]}})
    w.user(e, "second")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        layout = aggregates.read_layout(sd)
        texts = aggregates.session_texts(sd, layout, [a, b, c, d, e, "not-a-session"])
        full = aggregates.aggregate(sd, layout, -(1 << 62), 1 << 62, session_ids=[a, b, c, d, e], parallel=False)
    assert texts == {sid: (agg.title, agg.preview) for sid, agg in full.items()}
    assert texts == {a: ("new title", ""), b: ("", "only a preview"), c: ("no messages", ""),   # a: 5.2's first
                     e: ("", "  the\n question  ")}                                          # message is no user's


def test_facets(writer: Writer) -> None:
    w = writer
    a = w.session("aaaa000000000000", cwd="/one")
    w.session("bbbb000000000000", cwd="/one", channel="wechat", channel_id="w")
    w.session("cccc000000000000", cwd="/two")
    w.conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES ('p2', 'Zeta', 'x', 'x'), "
                   "('p1', 'Alpha', 'x', 'x')")
    w.conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) VALUES (?, 'p2', 0, 'x')",
                   (a,))
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        f = facets(sd)
    assert f.cwds == (FacetValue("/one", "/one", 2), FacetValue("/two", "/two", 1))
    assert f.projects == (FacetValue("p1", "Alpha", 0), FacetValue("p2", "Zeta", 1))
    assert f.channel_types == (FacetValue("local", "local", 2), FacetValue("wechat", "wechat", 1))


def test_older_layout_without_channel_columns_or_metadata(tmp_path: Path) -> None:
    root = tmp_path / "old"
    root.mkdir()
    conn = sqlite3.connect(root / "sessions.db")
    conn.executescript(
        """
        CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, timestamp TEXT, parent_session TEXT, version INTEGER);
        CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, id TEXT UNIQUE,
                              type TEXT NOT NULL, parent_id TEXT, timestamp TEXT NOT NULL, data TEXT NOT NULL);
        CREATE INDEX idx_entries_session_id ON entries(session_id);
        INSERT INTO sessions VALUES ('0123456789abcdef', '/legacy', '2025-01-01T00:00:00Z', NULL, 1);
        INSERT INTO sessions VALUES ('fedcba9876543210', NULL, NULL, NULL, 1);
        INSERT INTO entries (session_id, id, type, timestamp, data) VALUES
          ('0123456789abcdef', 'e1', 'message', '2025-01-02T00:00:00Z',
           '{"type":"message","message":{"role":"user","content":"legacy hello"}}');
        """
    )
    conn.commit()
    conn.close()
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert sd.schema.status != "current"
        rows = listed(sd)
        assert [(r.id, r.channel_type, r.preview, r.last_active_at, r.cwd) for r in rows] == [
            ("0123456789abcdef", "local", "legacy hello", "2025-01-02T00:00:00Z", "/legacy"),
            ("fedcba9876543210", "local", "", "", ""),
        ]
        assert {r.id for r in listed(sd, SessionFilter(search="legacy"))} == {"0123456789abcdef"}
        assert listed(sd, SessionFilter(project_id="p1")) == []
        f = facets(sd)
        assert f.projects == () and f.channel_types == (FacetValue("local", "local", 2),)
        assert get_session(sd, "0123").preview == "legacy hello"


def test_list_module_does_not_import_textual_or_sqlmodel() -> None:
    import subprocess
    import sys

    code = ("import sys, store.mothx.sessions, store.mothx.sessionindex; "
            "print(any(m.startswith(('textual', 'sqlmodel', 'sqlalchemy')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ})
    assert out.stdout.strip() == "False"
