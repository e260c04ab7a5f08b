"""A first capture builds the checkpoint file privately and publishes it whole: nobody sees a half-built file,
another process that publishes first wins and the capture runs again into its store, a bound publishes early,
an interrupted capture keeps what it committed, and builds left by dead processes are removed."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import agentstate, checkpoint_firstbuild
from store.agents import capture as cap
from store.agents.capture_model import CaptureProgress
from store.agents.checkpoint_db import state_db_path
from store.mothx.sessiondir import OpenMode, SessionDir, open_session_dir

AGENT = "claude-code"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def sid(i: int) -> str:
    return f"5b1f0c8e-0000-4000-8000-{i:012d}"


def make_tree(root: Path, sessions: int, lines: int = 5, start: int = 1) -> list[str]:
    ids = []
    for i in range(start, start + sessions):
        s = sid(i)
        path = root / f"-home-u-repo-{i % 3}" / f"{s}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        recs = [json.dumps({"parentUuid": None, "uuid": f"{s[:-4]}{n:04d}", "sessionId": s, "type": "user",
                            "message": {"role": "user", "content": f"prompt {n} of {i}"}}, separators=(",", ":"))
                for n in range(1, lines + 1)]
        path.write_text("".join(r + "\n" for r in recs))
        ids.append(s)
    return ids


def private_files(sd: SessionDir) -> list[str]:
    folder = state_db_path(sd).parent
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) if folder.exists() else []


def assert_all_captured_once(sd: SessionDir, root: Path, ids: list[str], lines: int = 5) -> None:
    with sqlite3.connect(state_db_path(sd)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counts = dict(conn.execute("SELECT s.agent_session_id, count(*) FROM agent_state_lines l "
                                   "JOIN agent_state_sessions s USING (session_id) GROUP BY 1").fetchall())
    assert counts == {s: lines for s in ids}
    for s in ids:
        assert cap.verify(sd, AGENT, s).status == "verified"
    again = cap.capture_claude_code(sd, root)
    assert again.counts["unchanged"] == len(ids)


def test_a_first_capture_is_built_privately_and_published_in_wal_mode(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    ids = make_tree(root, 6)
    seen: list[tuple[bool, list[str]]] = []

    def progress(p: CaptureProgress) -> None:
        if p.files_done:
            seen.append((state_db_path(sd).exists(), private_files(sd)))

    summary = cap.capture_claude_code(sd, root, progress=progress)
    assert summary.counts["new"] == 6
    assert seen and all(not exists for exists, _ in seen)  # nobody could open a half-built store
    assert all(any(n.endswith(".building") for n in names) for _, names in seen)
    assert private_files(sd) == []
    assert_all_captured_once(sd, root, ids)


def test_when_another_process_publishes_first_the_capture_runs_again_into_its_store(
    tmp_path: Path, sd: SessionDir
) -> None:
    root = tmp_path / "projects"
    ids = make_tree(root, 5)
    other_root = tmp_path / "other"
    other = make_tree(other_root, 2, start=100)  # captured by "the other process"
    made: list[bool] = []
    starts: list[int] = []

    def progress(p: CaptureProgress) -> None:
        if p.files_done == 0:
            starts.append(p.files_total)
        if p.files_done == 2 and not made:
            made.append(True)
            with open_session_dir(sd.root) as other_sd:  # another opener of the directory: its own first capture
                assert cap.capture_claude_code(other_sd, other_root).counts["new"] == 2

    summary = cap.capture_claude_code(sd, root, progress=progress)
    assert made and summary.counts["new"] == 5
    assert starts == [5, 5]  # its build was not published: the capture ran again, into the other's store
    assert private_files(sd) == []
    with sqlite3.connect(state_db_path(sd)) as conn:
        stored = {r[0] for r in conn.execute("SELECT agent_session_id FROM agent_state_sessions")}
    assert stored == set(ids) | set(other)
    for s in ids + other:
        assert cap.verify(sd, AGENT, s).status == "verified"
    assert cap.capture_claude_code(sd, root).counts["unchanged"] == 5


def test_a_build_past_its_bound_is_published_and_the_capture_goes_on_in_place(
    tmp_path: Path, sd: SessionDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cap, "FIRST_BUILD_BYTES", 1)
    monkeypatch.setattr(cap, "BATCH_SESSIONS", 2)
    root = tmp_path / "projects"
    ids = make_tree(root, 7)
    seen: list[bool] = []
    summary = cap.capture_claude_code(sd, root, progress=lambda p: seen.append(state_db_path(sd).exists()))
    assert summary.counts["new"] == 7
    assert not seen[1] and seen[-1]  # private at first, in place before the capture ended
    assert private_files(sd) == []
    assert_all_captured_once(sd, root, ids)


def test_an_interrupted_first_capture_keeps_what_it_committed(
    tmp_path: Path, sd: SessionDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cap, "BATCH_SESSIONS", 2)
    root = tmp_path / "projects"
    ids = make_tree(root, 6)

    def progress(p: CaptureProgress) -> None:
        if p.files_done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cap.capture_claude_code(sd, root, progress=progress)
    assert private_files(sd) == []
    with sqlite3.connect(state_db_path(sd)) as conn:
        kept = {r[0] for r in conn.execute("SELECT agent_session_id FROM agent_state_sessions")}
    assert len(kept) == 4 and kept < set(ids)  # two batches of two were written before the interruption
    summary = cap.capture_claude_code(sd, root)
    assert (summary.counts["unchanged"], summary.counts["new"]) == (4, 2)
    assert_all_captured_once(sd, root, ids)


def test_builds_left_by_processes_that_no_longer_run_are_removed(tmp_path: Path, sd: SessionDir) -> None:
    folder = state_db_path(sd).parent
    folder.mkdir(parents=True)
    dead = 2**22 + 12345  # above Linux's pid_max default range for 64-bit: no such process
    while True:
        try:
            os.kill(dead, 0)
        except ProcessLookupError:
            break
        except OSError:
            pass
        dead += 1
    here = checkpoint_firstbuild.host_tag()
    stale = [folder / f".agent-state.db.{dead}.{here}.0a1b2c3d.building",
             folder / f".agent-state.db.{dead}.{here}.0a1b2c3d.building-wal"]
    mine = folder / f".agent-state.db.{os.getpid()}.{here}.ffffffff.building"  # a build of a process that runs
    elsewhere = folder / f".agent-state.db.{dead}.0000ffff.12345678.building"  # another host's, written just now
    abandoned = folder / f".agent-state.db.{dead}.0000ffff.87654321.building"  # another host's, idle for hours
    for p in [*stale, mine, elsewhere, abandoned]:
        p.write_bytes(b"x")
    hours_ago = time.time() - checkpoint_firstbuild.STALE_BUILD_SECONDS - 60
    os.utime(abandoned, (hours_ago, hours_ago))
    unrelated = folder / ".agent-state.db.notes"
    unrelated.write_bytes(b"x")
    root = tmp_path / "projects"
    ids = make_tree(root, 2)
    assert cap.capture_claude_code(sd, root).counts["new"] == 2
    assert not any(p.exists() for p in [*stale, abandoned])
    assert mine.exists() and elsewhere.exists() and unrelated.exists()
    assert_all_captured_once(sd, root, ids)


def test_no_private_build_once_the_store_exists_or_in_a_read_mode(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    make_tree(root, 1)
    cap.capture_claude_code(sd, root)
    assert checkpoint_firstbuild.open_first_build(sd) is None
    open_session_dir(tmp_path / "fresh", create=True).close()
    with open_session_dir(tmp_path / "fresh", OpenMode.READ_ONLY) as ro:
        assert checkpoint_firstbuild.open_first_build(ro) is None
    assert not (tmp_path / "fresh" / "sessionscope").exists()
    assert agentstate.load_checkpoint(sd, AGENT, sid(1)) is not None
