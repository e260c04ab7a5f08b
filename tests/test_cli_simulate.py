"""`sessionscope simulate`: a runtime process that writes runs and entries the reference's way."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tui.cli import main


@pytest.fixture
def session_dir(tmp_path: Path) -> Path:
    with open_session_dir(tmp_path / "sessions", OpenMode.READ_WRITE, create=True):
        pass
    return tmp_path / "sessions"


def test_simulate_runs_a_whole_run_on_a_new_session(session_dir: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", "1")  # nobody listens; announcements are best effort
    code = main(["--dir", str(session_dir), "simulate", "--steps", "4", "--interval", "0"])
    assert code == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0]["event"] == "started" and events[-1]["event"] == "done"
    session = events[0]["session"]
    conn = sqlite3.connect(session_dir / "sessions.db")
    try:
        runs = conn.execute("SELECT status FROM session_runs WHERE session_id = ?", (session,)).fetchall()
        lease = conn.execute("SELECT state FROM session_runtime_leases WHERE session_id = ?", (session,)).fetchone()
        turns = conn.execute("SELECT status FROM conversation_turns WHERE session_id = ?", (session,)).fetchall()
    finally:
        conn.close()
    assert runs == [("completed",)]
    assert lease == ("released",)
    assert turns == [("completed",)]


@pytest.mark.parametrize("flag", ["--read-only", "--snapshot"])
def test_simulate_is_refused_in_a_read_mode(session_dir: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    before = (session_dir / "sessions.db").read_bytes()
    assert main(["--dir", str(session_dir), flag, "simulate"]) == 3
    assert "read-only" in capsys.readouterr().err
    assert (session_dir / "sessions.db").read_bytes() == before
