"""store.agents.native_open: where a native transcript is read from (a file, a checkpoint, its files on disk),
which transcript a screen shows, and which file it follows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.native_follow import NativeFollower
from store.agents.native_open import (
    NativeRef,
    load_native,
    open_follower,
    pick_transcript,
    reload_native,
    subagent_file,
)
from store.errors import StoreError
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir

SID = "0d3c5e2a-1111-4222-8333-444455556677"
SUB = "a1b2c3d"


def record(n: int, **extra: object) -> str:
    rec: dict[str, object] = {
        "parentUuid": f"00000000-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
        "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": SID, "cwd": "/home/u/repo", "type": "user",
        "timestamp": f"2026-02-23T12:00:{n:02d}Z", "message": {"role": "user", "content": f"prompt {n}"},
    }
    rec.update(extra)
    return json.dumps(rec)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "projects"
    project = root / "-home-u-repo"
    (project / SID / "subagents").mkdir(parents=True)
    (project / f"{SID}.jsonl").write_text("\n".join(record(n) for n in range(1, 4)) + "\n")
    (project / SID / "subagents" / f"agent-{SUB}.jsonl").write_text(
        "\n".join(record(n, isSidechain=True, agentId=SUB) for n in range(1, 3)) + "\n")
    return root


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def test_a_native_file_and_its_sub_agent(sd: SessionDir, tree: Path) -> None:
    main = tree / "-home-u-repo" / f"{SID}.jsonl"
    load = load_native(sd, NativeRef("claude-code", path=str(main)))
    assert load.disk_path == main and load.capture_root is None and load.session.main is not None
    transcript, link = pick_transcript(load.session)
    assert transcript is load.session.main and link is None
    assert [s.agent_id for s in load.session.subagents] == [SUB]
    sub = load_native(sd, NativeRef("claude-code", path=str(main), subagent=SUB))
    assert sub.disk_path is not None and sub.disk_path.name == f"agent-{SUB}.jsonl"
    transcript, link = pick_transcript(sub.session, SUB)
    assert link is not None and transcript is link.transcript
    assert pick_transcript(sub.session, "nobody") == (None, None)
    assert isinstance(open_follower(sd, NativeRef("claude-code", path=str(main)), main, None), NativeFollower)


def test_a_checkpoint_its_files_on_disk_and_the_capture_folder(sd: SessionDir, tree: Path, tmp_path: Path) -> None:
    cap.capture_claude_code(sd, tree)
    ref = NativeRef("claude-code", SID)
    load = load_native(sd, ref)
    project = (tree / "-home-u-repo").absolute()
    assert load.disk_path == project / f"{SID}.jsonl" and not load.from_disk
    assert load.capture_root == project and load.source_root == tree.absolute() and load.note == ""
    sub = load_native(sd, replace(ref, subagent=SUB))
    assert sub.disk_path == project / SID / "subagents" / f"agent-{SUB}.jsonl"

    with open_session_dir(tmp_path / "sessions", OpenMode.READ_ONLY) as ro:
        on_disk = reload_native(ro, ref)
        assert on_disk.from_disk and on_disk.capture_root is None  # nothing is captured again in a read mode

    (project / f"{SID}.jsonl").unlink()
    gone = load_native(sd, ref)
    assert gone.disk_path is None and "not on disk" in gone.note and gone.session.main is not None
    with pytest.raises(StoreError):
        load_native(sd, NativeRef("claude-code", "no-such-session"))


def test_a_sub_agent_path_that_leaves_its_folder_is_not_followed(sd: SessionDir, tree: Path, tmp_path: Path) -> None:
    main = tree / "-home-u-repo" / f"{SID}.jsonl"
    link = load_native(sd, NativeRef("claude-code", path=str(main))).session.subagents[0]
    outside = tmp_path / "secret.jsonl"
    outside.write_text("{}\n")
    escaping = replace(link, transcript=replace(link.transcript, path="../secret.jsonl"))
    assert subagent_file(escaping, tree) is None
    assert subagent_file(link, None) == Path(link.transcript.path)
