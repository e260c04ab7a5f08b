"""store.mothx.checkcache: the post-paint checks are remembered against the database file's identity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import store.mothx.session_windows as session_windows
import store.mothx.sessionindex as sessionindex
import store.mothx.sessions as sessions_mod
from store import paths
from store.mothx import checkcache
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.store.test_sessions import Writer, listed, new_dir


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    w = new_dir(tmp_path / "sessions")
    yield w
    w.conn.close()


@pytest.fixture(autouse=True)
def _forget_indexes() -> Iterator[None]:
    yield
    with sessions_mod._registry_lock:
        entries = list(sessions_mod._registry.values())
        sessions_mod._registry.clear()
    for _, lists in entries:
        lists.close()


def test_a_record_holds_only_for_the_same_files(writer: Writer) -> None:
    w = writer
    w.user(w.session("a" * 16), "one")
    db = w.root / "sessions.db"
    now = checkcache.identity(db)
    assert now is not None
    assert checkcache.remember("quick_check", db, now, "ok")
    assert checkcache.recall("quick_check", db, checkcache.identity(db)) == "ok"
    assert checkcache.record_path(db).is_relative_to(paths.cache_dir())        # never in the session directory
    assert not any(p.suffix == ".json" for p in w.root.iterdir())
    w.user("a" * 16, "two")                                                     # the WAL grows
    assert checkcache.recall("quick_check", db, checkcache.identity(db)) is None
    assert not checkcache.remember("quick_check", db, now, "ok")                # changed since: not written
    assert checkcache.recall("quick_check", db, None) is None
    checkcache.record_path(db).write_text("{not json", encoding="utf-8")        # a damaged record is no record
    assert checkcache.recall("quick_check", db, checkcache.identity(db)) is None
    assert checkcache.identity(w.root / "missing.db") is None


def test_quick_check_runs_once_per_unchanged_file(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.opening as app_module  # quick_check_aside and _quick_check_now live there

    w = writer
    w.user(w.session("b" * 16), "one")
    w.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    runs: list[int] = []
    real = app_module._quick_check_now

    def counted(sd: object, interrupts: object) -> str:
        runs.append(1)
        return real(sd, interrupts)  # type: ignore[arg-type]

    monkeypatch.setattr(app_module, "_quick_check_now", counted)
    for _ in range(3):
        with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
            assert app_module.quick_check_aside(sd) == "ok"
    assert len(runs) == 1
    w.user("b" * 16, "two")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert app_module.quick_check_aside(sd) == "ok"
    assert len(runs) == 2


def test_a_failed_quick_check_is_not_remembered(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.opening as app_module  # quick_check_aside and _quick_check_now live there

    w = writer
    w.user(w.session("c" * 16), "one")
    monkeypatch.setattr(app_module, "_quick_check_now", lambda sd, interrupts: "*** in database main ***; bad")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        assert app_module.quick_check_aside(sd) != "ok"
        assert app_module.quick_check_aside(sd) != "ok"
    assert checkcache.recall("quick_check", w.root / "sessions.db", checkcache.identity(w.root / "sessions.db")) is None


def test_the_deletion_count_runs_once_per_unchanged_file(writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    w = writer
    ids = [w.session(f"{i:016x}", t=i) for i in range(4)]
    seqs = [w.user(sid, f"m{k}") for sid in ids for k in range(3)]
    w.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    counts: list[int] = []
    cls = sessionindex.SessionIndex
    real = cls._covered_now

    def counted(self: object, conn: object, base: int) -> int:
        counts.append(1)
        return real(self, conn, base)  # type: ignore[arg-type]

    monkeypatch.setattr(cls, "_covered_now", counted)
    for _ in range(3):
        with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
            sessions_mod.defer_deletion_check(sd)
            listed(sd)
            assert sessions_mod.verify_list(sd) is False
    assert len(counts) <= 2           # the first open builds the cache (its own full sync), then one count at most
    before = len(counts)
    w.conn.execute("DELETE FROM entries WHERE seq = ?", (seqs[0],))            # a foreign tool deletes an entry
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        sessions_mod.defer_deletion_check(sd)
        listed(sd)
        assert sessions_mod.verify_list(sd) is True                             # found: the identity changed
    assert len(counts) > before                  # counted (and the repairing sync counts again)
    repaired = len(counts)
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        sessions_mod.defer_deletion_check(sd)
        listed(sd)
        assert sessions_mod.verify_list(sd) is False
        assert {r.id: r.message_count for r in listed(sd)}[ids[0]] == 2
    assert len(counts) == repaired               # unchanged since the repair: not counted again


def _first_ids(root: Path, mode: OpenMode = OpenMode.READ_ONLY) -> tuple[list[str], int]:
    with open_session_dir(root, mode) as sd:
        page = sessions_mod.list_sessions(sd, offset=0, limit=5)
        ids, total = [row.id for row in page.rows], page.total
    with sessions_mod._registry_lock:   # a fresh process each time: the in-memory views go
        entries = list(sessions_mod._registry.values())
        sessions_mod._registry.clear()
    for _, lists in entries:
        lists.close()
    return ids, total


def test_the_first_window_is_remembered_only_while_the_files_are_unchanged(
        writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    w = writer
    for n, sid in enumerate(("a" * 16, "b" * 16, "c" * 16)):
        w.user(w.session(sid, t=n), f"hello {n}", t=10 + n)
    w.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    first = _first_ids(w.root)
    assert first == (["c" * 16, "b" * 16, "a" * 16], 3)
    db = w.root / "sessions.db"
    kinds = [k for k in checkcache._read(db) if k.startswith("list-window:")]
    assert kinds, "the first window was not remembered"

    sorted_sql: list[str] = []

    real_recall = session_windows.RememberedWindow.recall

    def recall(self: session_windows.RememberedWindow) -> session_windows.View | None:
        found = real_recall(self)
        sorted_sql.append("hit" if found is not None else "miss")
        return found

    monkeypatch.setattr(session_windows.RememberedWindow, "recall", recall)
    assert _first_ids(w.root) == first                  # unchanged files: the remembered window, same rows
    assert sorted_sql == ["hit"]

    w.user("a" * 16, "newest now", t=99)                # a change moves "a" to the top
    assert _first_ids(w.root) == (["a" * 16, "c" * 16, "b" * 16], 3)
    assert sorted_sql == ["hit", "miss"]
    w.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    w.session("d" * 16, t=200)                          # a new session without entries (sorted by its creation)
    ids, total = _first_ids(w.root)
    assert total == 4 and ids[0] == "d" * 16
    assert sorted_sql[-1] == "miss"


def test_a_filtered_list_is_never_remembered(writer: Writer) -> None:
    w = writer
    w.user(w.session("e" * 16, cwd="/x"), "one")
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        page = sessions_mod.list_sessions(sd, sessions_mod.SessionFilter(cwd="/x"), offset=0, limit=5)
        assert [r.id for r in page.rows] == ["e" * 16]
    assert not [k for k in checkcache._read(w.root / "sessions.db") if k.startswith("list-window:")]
