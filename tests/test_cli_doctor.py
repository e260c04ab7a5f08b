"""``sessionscope doctor`` and the repairs reconcile-events, rebuild-projection, reset-db: exit codes, JSON,
hostile values in the output, and read modes that write nothing."""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
from pathlib import Path

import pytest

from store.eventstore import EventRecord, append_event_batch, event_store
from store.eventstore.intents import PROJECTION_TABLE
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import create_session
from tests.hostile import OWNER, assert_clean, build_hostile, evil
from tui.cli import core as cli

SID = "abcd000011112222"


@pytest.fixture(autouse=True)
def _private_bus_port(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(s.getsockname()[1]))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def digest(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _quiesce(root: Path) -> None:
    conn = sqlite3.connect(root / "sessions.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def make_dir(root: Path, *, torn: bool = False, sid: str = SID) -> Path:
    with open_session_dir(root, create=True) as sd:
        sid = create_session(sd, sid)
        append_event_batch(sd, sid, [EventRecord("e1", sid, "message", {"text": "hi"}, "2026-01-01T00:00:00Z")], None)
        if torn:
            seg = event_store(sd, sid).path / "seg-00000001.jsonl"
            with open(seg, "ab") as fh:
                fh.write(b'{"batchId":"x","ev')
    _quiesce(root)
    return root


def test_healthy_directory_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path / "s")
    code, out, _ = run(capsys, "--dir", str(root), "doctor")
    assert code == 0, out
    assert "0 warnings, 0 errors" in out
    code, out, _ = run(capsys, "--dir", str(root), "doctor", "--json", "--full")
    data = json.loads(out)
    assert code == 0 and data["exit"] == 0 and data["status"] == "ok"
    ids = {c["id"]: c for c in data["checks"]}
    assert ids["db.integrity_check"]["detail"].startswith("ok:")
    assert ids[f"events.{SID}"]["status"] == "ok"
    assert {"db.quick_check", "schema.version", "schema.columns", "db.size", "leases.active", "runs.orphaned",
            "recoveries.failed", "deliveries.failed", "reset", "space.total", "space.sessions",
            "space.entry_types"} <= set(ids)


def test_torn_tail_warns_and_reconcile_mends_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path / "s", torn=True)
    code, out, _ = run(capsys, "--dir", str(root), "doctor")
    assert code == 1
    assert f"repair: sessionscope repair reconcile-events {SID}" in out
    assert "torn tail of 18 bytes" in out
    code, out, err = run(capsys, "--dir", str(root), "repair", "reconcile-events", SID[:6], "--dry-run")
    assert code == 0 and "truncate" in out and "Dry run" in out, err
    assert run(capsys, "--dir", str(root), "doctor")[0] == 1  # the dry run changed nothing
    code, out, err = run(capsys, "--dir", str(root), "repair", "reconcile-events", SID, "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["applied"] is True
    assert run(capsys, "--dir", str(root), "doctor")[0] == 0
    code, out, err = run(capsys, "--dir", str(root), "repair", "reconcile-events", SID, "--yes")
    assert code == 3 and "nothing to reconcile" in err


def test_corruption_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path / "s")
    seg = root / "events" / SID / "seg-00000001.jsonl"
    data = bytearray(seg.read_bytes())
    data[20] ^= 0x01
    seg.write_bytes(bytes(data))
    code, out, _ = run(capsys, "--dir", str(root), "doctor", "--json")
    assert code == 2
    row = next(c for c in json.loads(out)["checks"] if c["id"] == f"events.{SID}")
    assert row["status"] == "error" and "corrupt" in row["detail"] and row["repair"] == ""
    code, _, err = run(capsys, "--dir", str(root), "repair", "reconcile-events", SID, "--yes")
    assert code == 3 and "never repaired" in err


def test_rebuild_projection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path / "s")
    with sqlite3.connect(root / "sessions.db") as conn:
        conn.execute(f"DELETE FROM {PROJECTION_TABLE}")
    code, out, _ = run(capsys, "--dir", str(root), "doctor")
    assert code == 1 and f"rebuild-projection {SID}" in out
    code, out, err = run(capsys, "--dir", str(root), "repair", "rebuild-projection", SID, "--yes")
    assert code == 0 and "Rebuilt the projection" in out, err
    assert run(capsys, "--dir", str(root), "doctor")[0] == 0


def test_unknown_session_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path / "s")
    assert run(capsys, "--dir", str(root), "repair", "reconcile-events", "ffffffffffff", "--yes")[0] == 2
    assert run(capsys, "--dir", str(root), "repair", "rebuild-projection", "\x1b]0;x\x07zz", "--yes")[0] == 2


def test_reset_db_moves_aside_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_dir(tmp_path / "s")
    (root / "knowledge-bases").mkdir()
    code, out, err = run(capsys, "--dir", str(root), "repair", "reset-db", "--yes")
    assert code == 0, err
    assert "left behind knowledge-bases" in out
    names = sorted(p.name for p in root.iterdir())
    assert any(n.startswith("sessions.db.pure-") and n.endswith(".bak") for n in names)
    assert any(n.startswith("events.pure-") for n in names) and "events" not in names
    code, out, _ = run(capsys, "--dir", str(root), "doctor", "--json")
    assert code == 0, out
    backup = next(p for p in root.iterdir() if p.name.startswith("sessions.db.pure-") and p.name.endswith(".bak"))
    with sqlite3.connect(backup) as conn:  # the old sessions stay readable
        assert conn.execute("SELECT id FROM sessions").fetchall() == [(SID,)]


def test_reset_db_is_refused_while_a_lease_is_active(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from store.mothx.lease_guard import acquire
    from store.mothx.lease_model import LeaseOwner

    root = make_dir(tmp_path / "s")
    with open_session_dir(root) as sd:
        acquire(sd, SID, "mutation", owner=LeaseOwner(pid=4242))
    _quiesce(root)
    before = digest(root)
    code, out, err = run(capsys, "--dir", str(root), "repair", "reset-db", "--yes")
    assert code == 3 and "still marked active" in err
    assert "sessions.db" in {p.name for p in root.iterdir()}
    _quiesce(root)
    assert {k for k in digest(root)} == set(before)


def test_hostile_values_are_shown_safely(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = build_hostile(tmp_path / "h")
    root = hostile.sessions
    bad = evil("sid")
    with open_session_dir(root) as sd:
        sid = create_session(sd, bad)
        append_event_batch(sd, sid, [EventRecord(evil("e"), sid, evil("k"), {"t": evil("p")}, "t")], None)
        seg = event_store(sd, sid).path / "seg-00000001.jsonl"
        with open(seg, "ab") as fh:
            fh.write(b'{"ba')
        with sd.db.write() as conn:  # an expired lease whose owner is hostile
            conn.execute("UPDATE session_runtime_leases SET owner_instance_id = ?, state = 'active', expires_at = 1",
                         (OWNER,))
    for argv in (["doctor"], ["doctor", "--full"], ["doctor", "--json"]):
        code, out, err = run(capsys, "--dir", str(root), *argv)
        assert code in (1, 2), (argv, out, err)
        assert_clean(out, f"{argv} stdout")
        assert_clean(err, f"{argv} stderr")
        if "--json" in argv:
            data = json.loads(out)
            assert any(c["session_id"] == bad for c in data["checks"])
        else:
            assert "pid-4242-[/]" in out  # bracketed text is literal
            assert "reconciling" in out
    code, out, err = run(capsys, "--dir", str(root), "repair", "reconcile-events", bad, "--dry-run")
    assert_clean(out)
    assert_clean(err)


@pytest.mark.parametrize("mode", [[], ["--read-only"], ["--snapshot"]])
def test_read_modes_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: list[str]) -> None:
    root = make_dir(tmp_path / "s", torn=True)
    before = digest(root)
    code, _, _ = run(capsys, "--dir", str(root), *mode, "doctor", "--full")
    assert code == 1
    run(capsys, "--dir", str(root), *mode, "doctor", "--json")
    run(capsys, "--dir", str(root), *mode, "repair", "reconcile-events", SID, "--dry-run")
    run(capsys, "--dir", str(root), *mode, "repair", "reset-db", "--dry-run")
    assert digest(root) == before
    code, _, err = run(capsys, "--dir", str(root), "--read-only", "repair", "reset-db", "--yes")
    assert code == 3
    assert digest(root) == before
