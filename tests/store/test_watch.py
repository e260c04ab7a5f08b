"""Watching a session directory for writers that do not announce, and the change probe."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.watch import (
    ChangeProbe,
    FileFollower,
    SessionDirWatcher,
    WatchHint,
    change_probe,
    follow_file,
    hint_from_changes,
    needs_reopen,
)

REPO = Path(__file__).resolve().parents[2]
TS = "2026-11-20T12:00:00Z"


def make_dir(root: Path, sessions: tuple[str, ...] = ("a" * 16, "b" * 16)) -> Path:
    """A v43 session directory with a few sessions and one entry each, closed again (quiet, no -wal/-shm)."""
    with open_session_dir(root, create=True) as sd:
        with sd.db.write() as conn:
            for sid in sessions:
                conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, '/w', ?, 3)", (sid, TS))
                conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
                             "VALUES (?, ?, 'session', NULL, ?, '{}')", (sid, sid, TS))
    return root


def foreign_append(conn: sqlite3.Connection, sid: str, n: int) -> None:
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, 'message', "
                 "NULL, ?, ?)", (sid, f"{sid[:8]}{n:08x}", TS, json.dumps({"type": "message", "n": n})))


def writer(root: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None, timeout=10)
    conn.execute("PRAGMA journal_mode = WAL")
    return conn


_WRITER = """
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("PRAGMA journal_mode = WAL")
for line in sys.stdin:
    sid, n = line.split()
    c.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
              "VALUES (?, ?, 'message', NULL, '2026-11-20T12:00:01Z', ?)",
              (sid, sid[:8] + format(int(n), '08x'), json.dumps({"n": int(n)})))
    print("ok", flush=True)
"""


class ExternalWriter:
    """Another process holding a WAL connection open on sessions.db and appending on request."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(root / "sessions.db")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def append(self, sid: str, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{sid} {n}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def listing(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir()) if p.is_file()}


def drain(hints: queue.Queue[WatchHint], quiet: float = 0.5) -> list[WatchHint]:
    out: list[WatchHint] = []
    while True:
        try:
            out.append(hints.get(timeout=quiet))
        except queue.Empty:
            return out


# ---------------------------------------------------------------------------------------------------------------
# hints


def test_hint_from_changes_keeps_only_the_database_files() -> None:
    raw = {(2, "/d/sessions.db-wal"), (1, "/d/sessions.db-shm"), (2, "/d/notes.txt"), (1, "/d/sessions.db.bak"),
           (2, "/d/knowledge-bases/x.db")}
    hint = hint_from_changes(raw, at=5.0)
    assert hint is not None
    assert (hint.db, hint.wal, hint.shm_created, hint.shm_deleted, hint.journal) == (False, True, True, False, False)
    assert hint.changes == (("added", "sessions.db-shm"), ("modified", "sessions.db-wal"))
    assert hint.writer_started and hint.content_changed and hint.at == 5.0
    assert hint_from_changes({(2, "/d/other.db")}) is None
    gone = hint_from_changes({(3, "/d/sessions.db-shm"), (1, "/d/sessions.db-journal"), (2, "/d/sessions.db")})
    assert gone is not None and gone.writer_stopped and gone.journal and gone.db and not gone.wal


def test_watcher_sees_an_append_by_another_process(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    hints: queue.Queue[WatchHint] = queue.Queue()
    with open_session_dir(root, OpenMode.READ_WRITE) as sd, SessionDirWatcher(root, hints.put) as watcher:
        assert watcher.available and watcher.status == f"watching {root}"
        assert change_probe(sd).first
        drain(hints, 0.3)  # our own open may touch the files
        code = (
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n"
            "c.execute(\"INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES "
            "('aaaaaaaaaaaaaaaa', 'feedfeedfeedfeed', 'message', NULL, '2026-11-20T12:00:01Z', '{}')\")\n"
            "c.close()\n"
        )
        proc = subprocess.run([sys.executable, "-c", code, str(root / "sessions.db")], capture_output=True,
                              text=True, timeout=20)
        assert proc.returncode == 0, proc.stderr
        hint = hints.get(timeout=1.0)  # within a second of the other process's commit
        assert hint.wal or hint.db
        changes = change_probe(sd)
        assert changes.foreign_commit and not changes.own_commit
        assert changes.entry_sessions == {"a" * 16} and changes.sessions == {"a" * 16}
        assert not changes.unexplained and not changes.membership_changed
        assert not change_probe(sd).changed


def test_a_burst_of_100_writes_is_coalesced(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    hints: queue.Queue[WatchHint] = queue.Queue()
    conn = writer(root)
    try:
        with SessionDirWatcher(root, hints.put) as watcher:
            foreign_append(conn, "a" * 16, 0)
            drain(hints, 0.3)
            for n in range(1, 101):
                foreign_append(conn, "b" * 16, n)
            got = drain(hints, 0.5)
            assert 1 <= len(got) < 20, f"{len(got)} hints for 100 commits"
            assert all(h.wal for h in got)
            assert watcher.stats().hints >= len(got)
    finally:
        conn.close()


def test_slow_consumer_gets_later_changes_in_one_call(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    calls: list[WatchHint] = []
    release = threading.Event()
    first = threading.Event()

    def slow(hint: WatchHint) -> None:
        calls.append(hint)
        first.set()
        release.wait(5)

    conn = writer(root)
    try:
        with SessionDirWatcher(root, slow):
            foreign_append(conn, "a" * 16, 1)
            assert first.wait(3)
            for n in range(2, 40):
                foreign_append(conn, "a" * 16, n)
            release.set()
            deadline = time.monotonic() + 3
            while len(calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
            assert 2 <= len(calls) <= 3, "38 commits made during one slow call arrive together"
    finally:
        conn.close()


def test_shm_appearing_means_reopen_read_only_as_live(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    hints: queue.Queue[WatchHint] = queue.Queue()
    ro = open_session_dir(root, OpenMode.READ_ONLY)
    other: ExternalWriter | None = None
    try:
        assert ro.db.access == "immutable" and not needs_reopen(ro)
        assert change_probe(ro).first
        with SessionDirWatcher(root, hints.put):
            other = ExternalWriter(root)
            other.append("a" * 16, 1)
            got = drain(hints, 0.5)
            assert any(h.writer_started for h in got)
        assert needs_reopen(ro)
        stale = change_probe(ro)
        assert stale.reopen_needed and stale.changed
        ro.close()
        ro = open_session_dir(root, OpenMode.READ_ONLY)
        assert ro.db.access == "mode=ro (live)" and not needs_reopen(ro)
        assert change_probe(ro).first
        other.append("b" * 16, 2)
        live = change_probe(ro)
        assert live.foreign_commit and live.entry_sessions == {"b" * 16} and not live.reopen_needed
    finally:
        if other is not None:
            other.close()
        ro.close()


def test_snapshots_never_ask_to_reopen(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    snap = open_session_dir(root, OpenMode.SNAPSHOT)
    conn = writer(root)
    try:
        foreign_append(conn, "a" * 16, 1)
        assert (root / "sessions.db-shm").exists() and not needs_reopen(snap)
    finally:
        conn.close()
        snap.close()


def test_watcher_and_probe_create_and_change_nothing(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    before = listing(root)
    assert set(before) == {"sessions.db"}
    for mode in (OpenMode.READ_ONLY, OpenMode.SNAPSHOT):
        with open_session_dir(root, mode) as sd, SessionDirWatcher(root, lambda h: None):
            for _ in range(3):
                change_probe(sd)
            ChangeProbe(sd).probe()
            time.sleep(0.2)
    assert listing(root) == before
    # beside a live writer (another process), a read-only probe still writes nothing, not even to -shm
    other = ExternalWriter(root)
    try:
        other.append("a" * 16, 1)
        live_before = listing(root)
        assert set(live_before) == {"sessions.db", "sessions.db-wal", "sessions.db-shm"}
        with open_session_dir(root, OpenMode.READ_ONLY) as sd, SessionDirWatcher(root, lambda h: None):
            assert sd.db.access == "mode=ro (live)"
            assert change_probe(sd).first
            other.append("b" * 16, 2)
            live_before = listing(root)
            assert change_probe(sd).entry_sessions == {"b" * 16}
            assert not change_probe(sd).changed
            assert listing(root) == live_before
    finally:
        other.close()


def test_watcher_start_and_stop(tmp_path: Path) -> None:
    missing = SessionDirWatcher(tmp_path / "nope", lambda h: None)
    assert missing.start() is False and missing.status.startswith("file watching unavailable: ")
    root = make_dir(tmp_path / "s")
    w = SessionDirWatcher(root, lambda h: None)
    assert w.start() and w.start()
    thread = w.thread
    w.stop()
    w.stop()
    assert thread is not None and not thread.is_alive()
    assert w.start() is False and not w.available


def test_a_failing_callback_does_not_stop_watching(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    seen: queue.Queue[WatchHint] = queue.Queue()
    calls = [0]

    def flaky(hint: WatchHint) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("consumer bug")
        seen.put(hint)

    conn = writer(root)
    try:
        with SessionDirWatcher(root, flaky) as w:
            foreign_append(conn, "a" * 16, 1)
            deadline = time.monotonic() + 3
            while calls[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            foreign_append(conn, "a" * 16, 2)
            assert seen.get(timeout=3).wal
            assert w.stats().callback_errors == 1
    finally:
        conn.close()


def test_follow_file_sees_create_modify_replace_and_delete(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    (tmp_path / "other.txt").write_text("x")
    seen: queue.Queue[frozenset[str]] = queue.Queue()
    follower = follow_file(target, seen.put, debounce_ms=50, step_ms=10)
    try:
        assert follower.available and follower.thread is not None and follower.thread.daemon
        target.write_text("1")
        assert "added" in seen.get(timeout=3) | _more(seen)
        (tmp_path / "other.txt").write_text("y")  # another file of the folder: not reported
        with target.open("a") as fh:
            fh.write("2")
        assert "modified" in seen.get(timeout=3) | _more(seen)
        tmp = tmp_path / "state.json.tmp"
        tmp.write_text("3")
        os.replace(tmp, target)
        assert seen.get(timeout=3)
        _more(seen)
        target.unlink()
        assert "deleted" in seen.get(timeout=3) | _more(seen)
        assert seen.empty()
    finally:
        follower.stop()
    assert not follower.thread.is_alive()


def _more(seen: queue.Queue[frozenset[str]]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    while True:
        try:
            out |= seen.get(timeout=0.3)
        except queue.Empty:
            return out


def test_follow_file_stops_on_its_stop_event_within_a_second(tmp_path: Path) -> None:
    stop = threading.Event()
    follower = follow_file(tmp_path / "x", lambda kinds: None, stop)
    thread = follower.thread
    assert follower.available and thread is not None and thread.daemon
    t0 = time.monotonic()
    stop.set()
    thread.join(1.0)
    assert not thread.is_alive() and time.monotonic() - t0 < 1.0
    assert FileFollower(tmp_path / "missing", None, lambda c: None).start() is False


def test_watcher_threads_are_daemons_and_stop_within_a_second(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "s")
    watchers = [SessionDirWatcher(root, lambda h: None) for _ in range(3)]
    for w in watchers:
        assert w.start()
    threads = [w.thread for w in watchers]
    assert all(t is not None and t.daemon and t.is_alive() for t in threads)
    t0 = time.monotonic()
    for w in watchers:
        w.stop()
    assert time.monotonic() - t0 < 1.0
    assert not any(t is not None and t.is_alive() for t in threads)


# ---------------------------------------------------------------------------------------------------------------
# change probe


def _session_dir(tmp_path: Path) -> SessionDir:
    return open_session_dir(make_dir(tmp_path / "s"), OpenMode.READ_WRITE)


def test_probe_attributes_changes_to_sessions(tmp_path: Path) -> None:
    a, b = "a" * 16, "b" * 16
    with _session_dir(tmp_path) as sd:
        base = change_probe(sd)
        assert base.first and base.max_entry_seq == 2 and base.session_count == 2
        assert not change_probe(sd).changed
        # our own write: data_version does not move, total_changes does
        with sd.db.write() as conn:
            foreign_append(conn, a, 1)
        own = change_probe(sd)
        assert own.own_commit and not own.foreign_commit and own.entry_sessions == {a} and own.max_entry_seq == 3
        # run events and runs
        other = writer(sd.root)
        try:
            other.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                          "VALUES ('run1', ?, 'running', ?, ?)", (b, TS, TS))
            other.execute("INSERT INTO session_run_events (id, session_id, run_id, event_type, timestamp) "
                          "VALUES ('ev1', ?, 'run1', 'status', ?)", (b, TS))
            c = change_probe(sd)
            assert c.foreign_commit and c.run_sessions == {b} and c.run_event_sessions == {b}
            assert not c.entry_sessions and not c.lease_sessions and c.sessions == {b}
            other.execute("UPDATE session_runs SET status = 'completed', updated_at = '2026-11-20T12:00:09Z'")
            assert change_probe(sd).run_sessions == {b}  # a run that stopped being active
            # leases: a new row, then a change of the row at the same updated_at second
            other.execute("INSERT INTO session_runtime_leases VALUES (?, 'pid-1-x', 1, 'process', 'h', 1, '', "
                          "'mutation', 'active', 100, 100, 115, 100)", (a,))
            assert change_probe(sd).lease_sessions == {a}
            other.execute("UPDATE session_runtime_leases SET state = 'released', expires_at = 100")
            assert change_probe(sd).lease_sessions == {a}
            other.execute("INSERT INTO session_runtime_leases VALUES (?, 'pid-2-y', 2, 'process', 'h', 1, '', "
                          "'mutation', 'active', 90, 90, 105, 90)", (b,))
            late = change_probe(sd)  # a row older than the newest one: nothing attributes it
            assert late.foreign_commit and late.unexplained and not late.sessions
            # membership: a session removed by another connection
            other.execute("DELETE FROM session_runtime_leases WHERE session_id = ?", (b,))
            other.execute("DELETE FROM entries WHERE session_id = ?", (b,))
            other.execute("DELETE FROM sessions WHERE id = ?", (b,))
            gone = change_probe(sd)
            assert gone.membership_changed and gone.session_count == 1 and gone.changed
        finally:
            other.close()
        assert not change_probe(sd).changed


def test_probe_state_is_per_directory_and_dropped_on_close(tmp_path: Path) -> None:
    make_dir(tmp_path / "s")
    sd1 = open_session_dir(tmp_path / "s", OpenMode.READ_WRITE)
    assert change_probe(sd1).first and not change_probe(sd1).first
    sd2 = open_session_dir(tmp_path / "s", OpenMode.READ_ONLY)
    assert change_probe(sd2).first
    sd1.close()
    sd2.close()
    sd3 = open_session_dir(tmp_path / "s", OpenMode.READ_WRITE)
    try:
        assert change_probe(sd3).first
    finally:
        sd3.close()


def test_probe_reads_an_older_layout(tmp_path: Path) -> None:
    root = tmp_path / "old"
    root.mkdir()
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, timestamp TEXT, version INTEGER)")
    conn.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, id TEXT UNIQUE, "
                 "type TEXT NOT NULL, parent_id TEXT, timestamp TEXT NOT NULL, data TEXT NOT NULL)")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("INSERT INTO sessions VALUES ('cccccccccccccccc', '/w', ?, 1)", (TS,))
    conn.close()
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert not sd.schema.has("session_runs")
        assert change_probe(sd).first
        w = writer(root)
        try:
            foreign_append(w, "c" * 16, 1)
        finally:
            w.close()
        # the immutable connection is stale now; once reopened, the append is visible
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        first = change_probe(sd)
        assert first.first and first.max_entry_seq == 1 and first.max_run_event_seq == 0


def test_probe_is_cheap_when_nothing_changed(tmp_path: Path) -> None:
    with _session_dir(tmp_path) as sd:
        change_probe(sd)
        statements: list[str] = []
        sd.db.conn.set_trace_callback(statements.append)
        try:
            assert not change_probe(sd).changed
        finally:
            sd.db.conn.set_trace_callback(None)
        queries = [s for s in statements if s.strip().upper() not in ("BEGIN", "ROLLBACK")]
        assert queries == ["PRAGMA data_version"]
    assert os.path.exists(tmp_path / "s" / "sessions.db")
