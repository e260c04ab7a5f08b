"""Health checks, the long integrity check (progress, cancel) and ResetDatabase, on small directories and on the
demo (its torn event store and its appended intent with missing bytes)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from store.errors import RepairRefused
from store.eventstore import inspect_event_store
from store.eventstore.repairs import ReconcileEventIntents
from store.health import ERROR, OK, WARN, IntegrityCancelled, ResetDatabase, exit_code, integrity_check, run_checks
from store.health.fixes import repair_for
from store.mothx.db import OpenMode
from store.mothx.lease_guard import acquire
from store.mothx.lease_model import LeaseOwner
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import create_session


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from store.demo.build import build_demo

    return build_demo(tmp_path_factory.mktemp("health-demo") / "sessions")


def test_demo_reports_both_event_stores_precisely(demo: Path, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(demo, root)
    with open_session_dir(root) as sd:
        checks = {c.id: c for c in run_checks(sd)}
        events = {k: c for k, c in checks.items() if k.startswith("events.")}
        assert len(events) == 4
        torn = next(c for c in events.values() if "torn tail" in c.detail)
        missing = next(c for c in events.values() if "bytes are missing" in c.detail)
        assert (torn.status, missing.status) == (WARN, WARN)
        assert sum(1 for c in events.values() if c.status == OK) == 2
        assert exit_code(list(checks.values())) == 1
        for check in (torn, missing):
            repair = repair_for(sd, check)
            repair.apply(repair.preview())
        assert inspect_event_store(sd, torn.session_id).state == "healthy"
        assert inspect_event_store(sd, missing.session_id).state == "blocked"
        after = {c.id: c for c in run_checks(sd)}
        assert after[missing.id].status == ERROR and "recovery_required" in after[missing.id].detail
        assert after[torn.id].status == OK
        assert not ReconcileEventIntents(sd, missing.session_id).preview().allowed


def test_integrity_check_reports_progress_and_can_be_cancelled(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "s", create=True) as sd:
        seen: list[float] = []
        check = integrity_check(sd, lambda f, t: seen.append(f))
        assert check.status == OK and seen and seen[-1] == 1.0 and seen == sorted(seen)
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(IntegrityCancelled):
            integrity_check(sd, None, cancel)
        stop = threading.Event()

        def progress(f: float, t: str) -> None:
            if f > 0.3:
                stop.set()

        with pytest.raises(IntegrityCancelled):
            integrity_check(sd, progress, stop)


def test_checks_write_nothing_and_fail_closed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with open_session_dir(root, create=True) as sd:
        create_session(sd)
    (root / "knowledge-bases").mkdir()
    (root / "knowledge-bases" / "bad.db").write_bytes(b"not a database at all" * 10)
    kb = sqlite3.connect(root / "knowledge-bases" / "kb1.db")
    kb.execute("CREATE TABLE knowledge_store_schema (version INTEGER PRIMARY KEY, applied_at TEXT)")
    kb.execute("INSERT INTO knowledge_store_schema VALUES (9, 'x')")
    kb.commit()
    kb.close()
    (root / "events").mkdir()
    (root / "events" / "stray").mkdir()
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        checks = {c.id: c for c in run_checks(sd, full=True)}
    assert checks["kb.bad.db"].status == ERROR
    assert checks["kb.kb1.db"].status == WARN and "newer" in checks["kb.kb1.db"].detail
    assert checks["events.stray.stray"].status == WARN
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before


def test_reset_refused_with_an_active_lease_and_rolled_back_on_failure(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "s"
    with open_session_dir(root, create=True) as sd:
        sid = create_session(sd)
        guard = acquire(sd, sid, "mutation", owner=LeaseOwner(pid=77))
        preview = ResetDatabase(sd).preview()
        assert not preview.allowed and "still marked active" in preview.refusal
        with pytest.raises(RepairRefused):
            ResetDatabase(sd).apply(preview)
        guard.release()
        (root / "events").mkdir()
        preview = ResetDatabase(sd).preview()
        assert preview.allowed
        real = os.rename
        calls = []

        def failing(src: object, dst: object) -> None:
            calls.append(src)
            if len(calls) == 2:
                raise OSError(13, "Permission denied")
            real(src, dst)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "rename", failing)
        with pytest.raises(OSError):
            ResetDatabase(sd).apply(preview)
        monkeypatch.setattr(os, "rename", real)
        assert (root / "sessions.db").is_file() and (root / "events").is_dir()
        assert not [p for p in root.iterdir() if ".pure-" in p.name]
        with sd.db.read() as conn:  # the directory handle works again, on the old database
            assert conn.execute("SELECT id FROM sessions").fetchall() == [(sid,)]
        result = ResetDatabase(sd).apply(ResetDatabase(sd).preview())
        assert "moved sessions.db" in result.message
        with sd.db.read() as conn:
            assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
