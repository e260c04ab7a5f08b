"""store.mothx.checkcache: the post-paint checks are remembered against the database file's identity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
