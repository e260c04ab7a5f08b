"""``sessionscope runs`` and ``sessionscope repair …``: output, exit codes, dry runs, confirmation, read modes."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.demo.model import DEMO_NOW_UNIX

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def demo_master_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from store.demo.build import build_demo

    return build_demo(tmp_path_factory.mktemp("cli-demo") / "sessions")


@pytest.fixture
def demo(demo_master_cli: Path, tmp_path: Path) -> Path:
    target = tmp_path / "sessions"
    shutil.copytree(demo_master_cli, target)
    return target


@pytest.fixture(autouse=True)
def _private_bus_port(monkeypatch: pytest.MonkeyPatch) -> int:
    port = _free_port()
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(port))
    return port


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command in its own process, standard input not a terminal (a file or nothing)."""
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def rows(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path / 'sessions.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def active_runs(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for run_id, expires_at, state, rec in rows(path, """
            SELECT r.id, l.expires_at, l.state, COALESCE(c.state, '') FROM session_runs r
            JOIN session_runtime_leases l ON l.session_id = r.session_id
            LEFT JOIN session_run_recoveries c ON c.run_id = r.id WHERE r.status = 'running'"""):
        if rec == "failed":
            found["failed"] = run_id
        elif state == "active" and expires_at > DEMO_NOW_UNIX:
            found["live"] = run_id
        else:
            found["orphan"] = run_id
    return found


def snapshot_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# --- runs -------------------------------------------------------------------------------------------------------


def test_runs_lists_active_runs_first_with_leases(demo: Path) -> None:
    ids = active_runs(demo)
    result = run_cli("--dir", str(demo), "runs", "--json", "--limit", "5")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert {r["run_id"] for r in listed[:3]} == set(ids.values()) and len(listed) == 8
    by_id = {r["run_id"]: r for r in listed}
    live = by_id[ids["live"]]
    assert live["state"] == "external" and live["lease"]["valid"] is True and live["lease"]["owner_pid"] > 0
    assert by_id[ids["orphan"]]["state"] == "orphaned" and by_id[ids["orphan"]]["lease"]["valid"] is False
    assert by_id[ids["failed"]]["recovery"]["state"] == "failed" and by_id[ids["failed"]]["recovery"]["attempt"] == 2
    assert all(not r["active"] for r in listed[3:])

    text = run_cli("--dir", str(demo), "runs", "--limit", "0")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].split()[:4] == ["RUN", "ID", "SESSION", "STATUS"] and len(lines) == 4
    assert any(ids["orphan"] in line and "orphaned" in line and "expired" in line for line in lines)


def test_runs_orphaned_and_session_filters(demo: Path) -> None:
    ids = active_runs(demo)
    orphaned = json.loads(run_cli("--dir", str(demo), "runs", "--orphaned", "--json").stdout)
    assert {r["run_id"] for r in orphaned} == {ids["orphan"], ids["failed"]}
    session = next(r["session_id"] for r in orphaned if r["run_id"] == ids["orphan"])
    mine = json.loads(run_cli("--dir", str(demo), "--snapshot", "runs", "--session", session[:8], "--json").stdout)
    assert mine and {r["session_id"] for r in mine} == {session} and mine[0]["run_id"] == ids["orphan"]
    assert run_cli("--dir", str(demo), "runs", "--session", "zzzzzzzz").returncode == 2


# --- repairs ----------------------------------------------------------------------------------------------------


def test_dry_run_prints_the_preview_and_leaves_the_file_byte_identical(demo: Path) -> None:
    ids = active_runs(demo)
    before = snapshot_files(demo)
    result = run_cli("--dir", str(demo), "repair", "recover-run", ids["orphan"], "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Recover an orphaned run: run {ids['orphan']}")
    assert f"recovery_{ids['orphan']}_failed" in result.stdout and "Dry run: nothing was changed." in result.stdout
    as_json = run_cli("--dir", str(demo), "repair", "recover-run", ids["orphan"], "--dry-run", "--json")
    preview = json.loads(as_json.stdout)["preview"]
    assert preview["allowed"] is True and preview["counts"]["run_events"] == 2
    assert snapshot_files(demo) == before, "a dry run changes no byte and leaves no -wal/-shm behind"


def test_without_yes_and_without_a_terminal_the_repair_is_refused(demo: Path) -> None:
    ids = active_runs(demo)
    before = snapshot_files(demo)
    result = run_cli("--dir", str(demo), "repair", "recover-run", ids["orphan"])
    assert result.returncode == 3
    assert result.stderr.strip() == "sessionscope: refused: confirmation needed; pass --yes"
    assert snapshot_files(demo)["sessions.db"] == before["sessions.db"]
    assert rows(demo, "SELECT status FROM session_runs WHERE id = ?", (ids["orphan"],)) == [("running",)]


def test_a_terminal_is_asked_and_no_is_the_default(demo: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import core as cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    ids = active_runs(demo)
    for answer in ("\n", "n\n", "nope\n"):
        monkeypatch.setattr(sys, "stdin", Terminal(answer))
        assert cli.main(["--dir", str(demo), "repair", "recover-run", ids["orphan"]]) == 3
        err = capsys.readouterr().err
        assert "Apply this repair? [y/N]" in err and "refused: not confirmed" in err
    assert rows(demo, "SELECT status FROM session_runs WHERE id = ?", (ids["orphan"],)) == [("running",)]
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert cli.main(["--dir", str(demo), "repair", "recover-run", ids["orphan"]]) == 0
    assert f"Run {ids['orphan']} recovered" in capsys.readouterr().out
    assert rows(demo, "SELECT status FROM session_runs WHERE id = ?", (ids["orphan"],)) == [("failed",)]


def test_recover_with_yes_writes_the_reference_rows_and_announces_them(demo: Path, _private_bus_port: int) -> None:
    from store.mothx.bus import BusHint, BusListener

    ids = active_runs(demo)
    run_id = ids["orphan"]
    session, epoch = rows(demo, "SELECT r.session_id, l.epoch FROM session_runs r JOIN session_runtime_leases l "
                                "ON l.session_id = r.session_id WHERE r.id = ?", (run_id,))[0]
    heard: list[BusHint] = []
    with BusListener(heard.append, port=_private_bus_port, own_origin="") as listener:
        assert listener.available
        result = run_cli("--dir", str(demo), "repair", "recover-run", run_id, "--yes", "--json")
        deadline = time.monotonic() + 5
        while len(heard) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["applied"] is True and out["result"]["lease_epoch"] == epoch + 1
    assert rows(demo, "SELECT status, error FROM session_runs WHERE id = ?", (run_id,)) == [
        ("failed", "execution owner lease expired while run was active")]
    assert rows(demo, "SELECT event_type, source FROM session_run_events WHERE id = ?",
                (f"recovery_{run_id}_failed",)) == [("recovered", "agentruntime")]
    assert rows(demo, "SELECT state, attempt, previous_lease_epoch FROM session_run_recoveries WHERE run_id = ?",
                (run_id,)) == [("completed", 1, epoch)]
    assert rows(demo, "SELECT count(*) FROM conversation_turns WHERE session_id = ? AND status = 'open'",
                (session,)) == [(0,)]
    assert rows(demo, "SELECT epoch, state FROM session_runtime_leases WHERE session_id = ?",
                (session,)) == [(epoch + 1, "released")]
    # the bus heard what a runtime would have said, about this session
    kinds = [h.type for h in heard if h.session_id == session]
    assert kinds == ["acquired", "state_changed", "released"], kinds
    # again: the run is no longer active
    again = run_cli("--dir", str(demo), "repair", "recover-run", run_id, "--yes")
    assert again.returncode == 3 and "no longer active" in again.stderr


def test_a_live_lease_refuses_and_names_its_holder(demo: Path) -> None:
    ids = active_runs(demo)
    owner, pid = rows(demo, "SELECT l.owner_instance_id, l.owner_pid FROM session_runs r JOIN session_runtime_leases l "
                            "ON l.session_id = r.session_id WHERE r.id = ?", (ids["live"],))[0]
    result = run_cli("--dir", str(demo), "repair", "recover-run", ids["live"], "--yes")
    assert result.returncode == 3
    assert result.stderr.startswith("sessionscope: refused: ")
    assert owner in result.stderr and f"pid {pid}" in result.stderr
    assert rows(demo, "SELECT status FROM session_runs WHERE id = ?", (ids["live"],)) == [("running",)]


@pytest.mark.parametrize("flag", ["--read-only", "--snapshot"])
def test_read_modes_refuse_every_repair(demo: Path, flag: str) -> None:
    ids = active_runs(demo)
    session = rows(demo, "SELECT session_id FROM session_runs WHERE id = ?", (ids["orphan"],))[0][0]
    (turn,) = rows(demo, "SELECT id FROM conversation_turns WHERE session_id = ? AND status = 'open'", (session,))[0]
    before = snapshot_files(demo)
    for args in (("recover-run", ids["orphan"], "--yes"), ("release-lease", session, "--yes"),
                 ("abandon-tools", session, turn, "--yes")):
        result = run_cli("--dir", str(demo), flag, "repair", *args)
        assert result.returncode == 3, (args, result.stderr)
        assert "read-only" in result.stderr
    dry = run_cli("--dir", str(demo), flag, "repair", "recover-run", ids["orphan"], "--dry-run")
    assert dry.returncode == 3 and "read-only" in dry.stderr and dry.stdout.startswith("Recover an orphaned run")
    assert snapshot_files(demo) == before


def test_unknown_targets_exit_2(demo: Path) -> None:
    assert run_cli("--dir", str(demo), "repair", "recover-run", "run_nope", "--yes").returncode == 2
    assert run_cli("--dir", str(demo), "repair", "release-lease", "ffffffffffffffff", "--yes").returncode == 2
    session = rows(demo, "SELECT id FROM sessions ORDER BY id LIMIT 1")[0][0]
    bogus = run_cli("--dir", str(demo), "repair", "abandon-tools", session, "turn_bogus", "--dry-run")
    assert bogus.returncode == 2 and bogus.stdout == ""
    assert bogus.stderr.startswith(f"sessionscope: no turn turn_bogus in session {session}")
    assert bogus.stderr.count("\n") == 1


def test_abandon_chosen_tool_calls_and_release_an_expired_lease(demo: Path) -> None:
    ids = active_runs(demo)
    run_id = ids["orphan"]
    session = rows(demo, "SELECT session_id FROM session_runs WHERE id = ?", (run_id,))[0][0]
    (turn,) = rows(demo, "SELECT id FROM conversation_turns WHERE session_id = ? AND status = 'open'", (session,))[0]
    busy = run_cli("--dir", str(demo), "repair", "abandon-tools", session, turn, "--yes")
    assert busy.returncode == 3 and f"recover-run {run_id}" in busy.stderr, "an active run is recovered first"
    assert run_cli("--dir", str(demo), "repair", "recover-run", run_id, "--yes").returncode == 0
    conn = sqlite3.connect(demo / "sessions.db")
    with conn:
        for call in ("c1", "c2", "c3"):
            conn.execute(
                "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
                "VALUES (?, 't1', ?, 'p', 'a', ?, 'function', 'shell', 'h', 'running', 1, '2026-11-20T09:00:00Z')",
                (session, f"t1:{call}", call))
    conn.close()
    result = run_cli("--dir", str(demo), "repair", "abandon-tools", session[:8], "t1", "c1", "c3", "--yes")
    assert result.returncode == 0, result.stderr
    assert dict(rows(demo, "SELECT provider_call_id, execution_state FROM tool_execution_records "
                           "WHERE local_turn_id = 't1'")) == {"c1": "abandoned", "c2": "running", "c3": "abandoned"}
    # an idle session whose lease a crashed writer left active: released with a tombstone
    released = run_cli("--dir", str(demo), "repair", "release-lease", session, "--yes")
    assert released.returncode == 3 and "already released" in released.stderr
    conn = sqlite3.connect(demo / "sessions.db")
    with conn:
        conn.execute("UPDATE session_runtime_leases SET state = 'active', expires_at = 1000 WHERE session_id = ?",
                     (session,))
    conn.close()
    (epoch,) = rows(demo, "SELECT epoch FROM session_runtime_leases WHERE session_id = ?", (session,))[0]
    result = run_cli("--dir", str(demo), "repair", "release-lease", session, "--yes")
    assert result.returncode == 0, result.stderr
    assert rows(demo, "SELECT epoch, state FROM session_runtime_leases WHERE session_id = ?",
                (session,)) == [(epoch + 1, "released")]
