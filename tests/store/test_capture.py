"""Capturing the real Claude Code and Codex trees, re-capturing tails, divergence, verify, repaired copies."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import agentstate
from store.agents import capture as cap
from store.agents.native import parse_claude_code, parse_codex, read_claude_code_file, read_codex_file
from store.errors import ReadOnlyStore, RepairRefused, SessionNotFound
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir

REWIND_ID = "03eb5929-52b3-4b13-ada3-b93ae35806b8"
SAMPLE_ID = "326189cf-5676-4237-8cde-1ce80aae4a9f"
PARENT_ID = "29ccd257-68b1-427f-ae5f-6524b7cb6f20"
ORPHAN_ID = "7acd37a8-2745-4b58-a8a9-46164b22ad9e"
INTERRUPTED_ID = "019c8a70-dda7-7f33-98ea-f30553347322"
REWIND = f"-experiments-ideas/{REWIND_ID}.jsonl"
PARENT = f"-src-experiments-claude_p/{PARENT_ID}.jsonl"
SUBAGENT = f"-src-experiments-claude_p/{PARENT_ID}/subagents/agent-a2271d1.jsonl"
INTERRUPTED = "2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"

# (status, files, records) per keyed session, from the fixture README's line counts.
CLAUDE_EXPECTED = {
    REWIND_ID: ("new", 1, 61),
    SAMPLE_ID: ("new", 1, 54),
    PARENT_ID: ("new", 2, 6 + 59),
    ORPHAN_ID: ("new", 1, 1),
}
CODEX_EXPECTED = {
    "019c8a4d-8f45-7010-8b5d-7fad920aa6f9": ("new", 1, 417),
    INTERRUPTED_ID: ("new", 1, 19),
    "019c8bfe-ec25-79e0-97d7-bda6a9c575ff": ("new", 1, 63),
}


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


@pytest.fixture
def claude_tree(real_fixtures: Path, tmp_path: Path) -> Path:
    root = tmp_path / "claude-projects"
    shutil.copytree(real_fixtures / "claude-code", root)
    for f in root.rglob("*.jsonl"):
        f.chmod(0o644)
    return root


def dump(sd: SessionDir) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(agentstate.state_db_path(sd))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}
    finally:
        conn.close()


def append_lines(path: Path, count: int) -> list[str]:
    """Append ``count`` copies of the file's last record with fresh uuids (what the agent would do)."""
    last = json.loads(path.read_bytes().splitlines()[-1])
    new = []
    for n in range(count):
        last = {**last, "parentUuid": last.get("uuid"), "uuid": f"00000000-0000-4000-8000-{n:012d}"}
        new.append(json.dumps(last, separators=(",", ":")))
    with path.open("ab") as fh:
        fh.write(("\n".join(new) + "\n").encode())
    return new


# ---------------------------------------------------------------------------------------- real trees


def test_capture_claude_code_tree(real_fixtures: Path, sd: SessionDir) -> None:
    seen: list[cap.CaptureProgress] = []
    summary = cap.capture_claude_code(sd, real_fixtures / "claude-code", progress=seen.append)
    keyed = {s.agent_session_id: (s.status, s.files, s.records) for s in summary.sessions if s.agent_session_id}
    assert keyed == CLAUDE_EXPECTED
    assert all(s.records_written == s.records for s in summary.sessions)
    unkeyed = sorted((s.paths[0].rsplit("/", 1)[-1][:8], s.status, s.detail) for s in summary.sessions
                     if not s.agent_session_id)
    assert [(n, st) for n, st, _ in unkeyed] == [("4e27c414", "unreadable"), ("4fe49c7c", "unreadable")]
    assert "only summary records" in unkeyed[0][2] and "empty" in unkeyed[1][2]
    assert summary.counts == {"new": 4, "appended": 0, "unchanged": 0, "divergent": 0, "unreadable": 2}
    files = list((real_fixtures / "claude-code").rglob("*.jsonl"))
    assert seen[0].files_done == 0 and seen[-1].files_done == seen[-1].files_total == len(files) == summary.files
    assert seen[-1].bytes_done == seen[-1].bytes_total == sum(f.stat().st_size for f in files)
    assert [p.files_done for p in seen] == sorted(p.files_done for p in seen)
    first = summary.to_json()[0]
    assert list(first)[:6] == ["agent", "agent_session_id", "status", "files", "records", "records_written"]

    again = cap.capture_claude_code(sd, real_fixtures / "claude-code")
    assert {s.agent_session_id: s.status for s in again.sessions if s.agent_session_id} == {
        k: "unchanged" for k in CLAUDE_EXPECTED}
    assert again.records_written == 0

    for sid in CLAUDE_EXPECTED:
        result = cap.verify(sd, "claude-code", sid)
        assert (result.status, result.head_kind, result.new_records) == ("verified", "checkpoint", 0)
    info = agentstate.checkpoint_info(sd, "claude-code", PARENT_ID)
    assert info is not None and info.state is not None
    assert info.state.transcript_path == PARENT
    assert [f.path for f in info.state.files] == [PARENT, SUBAGENT]
    assert info.state.cwd == "/src/experiments/claude_p"
    for f in info.state.files:  # the files are written compactly, so the digest is the file's own SHA-256
        assert f.digest == hashlib.sha256((real_fixtures / "claude-code" / f.path).read_bytes()).hexdigest()
    orphan = agentstate.checkpoint_info(sd, "claude-code", ORPHAN_ID)
    assert orphan is not None and orphan.state is not None
    assert orphan.state.transcript_path == "-Users-dain-workspace-JSSoundRecorder/agent-8d27fe83.jsonl"


def test_captured_checkpoints_render_like_the_files(real_fixtures: Path, sd: SessionDir) -> None:
    cap.capture_claude_code(sd, real_fixtures / "claude-code")
    cp = agentstate.load_checkpoint(sd, "claude-code", REWIND_ID)
    assert cp is not None
    from_checkpoint = parse_claude_code(cp.lines(REWIND))
    from_file = read_claude_code_file(real_fixtures / "claude-code" / REWIND)
    assert from_checkpoint.records == from_file.records == 61
    assert [b.prompt_line for b in from_checkpoint.forks[0].branches] == [18, 38]
    session = cap.read_checkpoint_session(sd, "claude-code", PARENT_ID)
    assert session is not None and session.main is not None and session.main.records == 6
    task = session.main.tool_pairs[0]
    link = session.subagent_for_call(task.call_id)
    assert link is not None and (link.agent_id, link.layout, link.task_line) == ("a2271d1", "subagents", 4)
    assert link.transcript.records == 59
    orphan = cap.read_checkpoint_session(sd, "claude-code", ORPHAN_ID)
    assert orphan is not None and orphan.main is None
    assert [(s.agent_id, s.layout) for s in orphan.subagents] == [("8d27fe83", "project_root")]
    assert cap.read_checkpoint_session(sd, "claude-code", "not-captured") is None


def test_capture_codex_tree(real_fixtures: Path, sd: SessionDir) -> None:
    summary = cap.capture_codex(sd, real_fixtures / "codex" / "sessions")
    assert {s.agent_session_id: (s.status, s.files, s.records) for s in summary.sessions} == CODEX_EXPECTED
    for sid in CODEX_EXPECTED:
        assert cap.verify(sd, "codex", sid).status == "verified"
    cp = agentstate.load_checkpoint(sd, "codex", INTERRUPTED_ID)
    assert cp is not None and cp.state.transcript_path == INTERRUPTED
    t = parse_codex(cp.lines(INTERRUPTED))
    assert [p.call_line for p in t.interrupted] == [18]
    session = cap.read_checkpoint_session(sd, "codex", INTERRUPTED_ID)
    assert session is not None and session.main is not None and session.main.records == 19
    assert cp.state.cwd == "/redacted/path/da0ba47443"


def test_capture_refuses_read_modes(real_fixtures: Path, tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "s", create=True):
        pass
    with open_session_dir(tmp_path / "s", OpenMode.READ_ONLY) as ro:
        with pytest.raises(ReadOnlyStore):
            cap.capture_codex(ro, real_fixtures / "codex" / "sessions")
        assert not agentstate.state_db_path(ro).exists()


def test_capture_beside_a_sessions_db_sessionscope_will_not_write(real_fixtures: Path, tmp_path: Path) -> None:
    """The checkpoint file is ours: an older mothx layout (shown read-only) does not stop a capture."""
    folder = tmp_path / "old"
    folder.mkdir()
    conn = sqlite3.connect(folder / "sessions.db")
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, timestamp TEXT)")
    conn.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, session_id TEXT, id TEXT, type TEXT, data TEXT)")
    conn.close()
    with open_session_dir(folder) as old:
        assert old.mode is OpenMode.READ_WRITE and not old.writable
        summary = cap.capture_codex(old, real_fixtures / "codex" / "sessions")
        assert summary.counts["new"] == 3


# ----------------------------------------------------------------------------------------- re-capture


def test_appending_captures_only_the_tail(claude_tree: Path, sd: SessionDir) -> None:
    cap.capture_claude_code(sd, claude_tree)
    added = append_lines(claude_tree / REWIND, 3)
    sub_new = claude_tree / f"-src-experiments-claude_p/{PARENT_ID}/subagents/agent-b000001.jsonl"
    sub_new.write_bytes(b"".join((claude_tree / SUBAGENT).read_bytes().splitlines(keepends=True)[:4]))
    before = len(dump(sd)["agent_state_lines"])
    summary = cap.capture_claude_code(sd, claude_tree)
    rewind = summary.session(REWIND_ID)
    parent = summary.session(PARENT_ID)
    assert rewind is not None and (rewind.status, rewind.records, rewind.records_written) == ("appended", 64, 3)
    assert parent is not None and (parent.status, parent.files, parent.records_written) == ("appended", 3, 4)
    assert summary.session(SAMPLE_ID).status == "unchanged"  # type: ignore[union-attr]
    assert len(dump(sd)["agent_state_lines"]) == before + 7
    cp = agentstate.load_checkpoint(sd, "claude-code", REWIND_ID)
    assert cp is not None and cp.lines(REWIND)[-3:] == added
    assert cap.verify(sd, "claude-code", REWIND_ID).status == "verified"
    append_lines(claude_tree / REWIND, 2)
    pending = cap.verify(sd, "claude-code", REWIND_ID)
    assert (pending.status, pending.new_records) == ("verified", 2)


def test_rewritten_line_is_divergent_and_untouched_until_reset(claude_tree: Path, sd: SessionDir) -> None:
    cap.capture_claude_code(sd, claude_tree)
    path = claude_tree / REWIND
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b'"type":"assistant"', b'"type":"assistant","edited":true')
    path.write_bytes(b"\n".join(lines))
    append_lines(path, 1)
    before = dump(sd)
    summary = cap.capture_claude_code(sd, claude_tree)
    rewind = summary.session(REWIND_ID)
    assert rewind is not None and rewind.status == "divergent" and rewind.records_written == 0
    assert "no longer starts with the 61 canonical records" in rewind.detail
    assert dump(sd) == before
    check = cap.verify(sd, "claude-code", REWIND_ID)
    assert check.status == "divergent" and "line 5 differs" in check.details[0]
    assert agentstate.load_checkpoint(sd, "claude-code", REWIND_ID) is not None  # the canonical version still loads
    agentstate.publish_reset(sd, "claude-code", REWIND_ID)
    assert cap.verify(sd, "claude-code", REWIND_ID).status == "out_of_sync"
    again = cap.capture_claude_code(sd, claude_tree).session(REWIND_ID)
    assert again is not None and (again.status, again.records, again.records_written) == ("new", 62, 62)
    assert cap.verify(sd, "claude-code", REWIND_ID).status == "verified"


def test_shortened_or_removed_files_are_divergent(claude_tree: Path, sd: SessionDir) -> None:
    cap.capture_claude_code(sd, claude_tree)
    before = dump(sd)
    (claude_tree / SUBAGENT).unlink()
    short = claude_tree / REWIND
    short.write_bytes(b"".join(short.read_bytes().splitlines(keepends=True)[:50]))
    summary = cap.capture_claude_code(sd, claude_tree)
    assert summary.session(PARENT_ID).status == "divergent"  # type: ignore[union-attr]
    assert summary.session(REWIND_ID).status == "divergent"  # type: ignore[union-attr]
    assert dump(sd) == before
    gone = cap.verify(sd, "claude-code", PARENT_ID)
    assert gone.status == "divergent" and any("missing" in d for d in gone.details)
    assert "ends after 50 records" in cap.verify(sd, "claude-code", REWIND_ID).details[0]


def test_cut_off_last_line_waits_for_its_newline(claude_tree: Path, sd: SessionDir) -> None:
    path = claude_tree / REWIND
    full = path.read_bytes()
    lines = full.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:60]) + lines[60][:100])
    first = cap.capture_claude_code(sd, claude_tree).session(REWIND_ID)
    assert first is not None and (first.status, first.records, first.pending_lines) == ("new", 60, 1)
    assert "incomplete" in first.detail
    path.write_bytes(full)
    second = cap.capture_claude_code(sd, claude_tree).session(REWIND_ID)
    assert second is not None and (second.status, second.records_written) == ("appended", 1)


def test_glued_lines_are_kept_as_one_unreadable_record(claude_tree: Path, sd: SessionDir) -> None:
    path = claude_tree / REWIND
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:19] + [lines[19] + lines[20]] + lines[21:]))
    summary = cap.capture_claude_code(sd, claude_tree)
    rewind = summary.session(REWIND_ID)
    assert rewind is not None and (rewind.status, rewind.records, rewind.records_written) == ("new", 60, 60)
    assert "line 20 of" in rewind.detail and "glued" in rewind.detail and "unreadable record" in rewind.detail
    assert cap.verify(sd, "claude-code", REWIND_ID).status == "verified"
    session = cap.read_checkpoint_session(sd, "claude-code", REWIND_ID)
    assert session is not None and session.main is not None and session.main.records == 60
    bad = session.main.unreadable
    assert [(i.line, "glued" in i.error) for i in bad] == [(20, True)]
    assert summary.session(SAMPLE_ID).status == "new"  # type: ignore[union-attr]


def test_non_compact_files_capture_and_append(tmp_path: Path, sd: SessionDir) -> None:
    """Files written with spaces after separators take the record-by-record path; appends still write tails."""
    root = tmp_path / "sessions-root" / "2026" / "01" / "01"
    root.mkdir(parents=True)
    path = root / "rollout-2026-01-01T00-00-00-abc.jsonl"
    meta = {"timestamp": "t", "type": "session_meta", "payload": {"id": "abc", "cwd": "/w"}}
    path.write_text(json.dumps(meta) + "\n" + json.dumps({"type": "event_msg", "payload": {"type": "x"}}) + "\n")
    first = cap.capture_codex(sd, tmp_path / "sessions-root").session("abc")
    assert first is not None and (first.status, first.records) == ("new", 2)
    shape = agentstate.canonical_shape(sd, "codex", "abc")
    assert shape is not None
    compact = (json.dumps(meta, separators=(",", ":")) + "\n" + '{"type":"event_msg","payload":{"type":"x"}}\n')
    assert next(iter(shape.values())).digest == hashlib.sha256(compact.encode()).hexdigest()
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "event_msg", "payload": {"type": "y"}}) + "\n")
    second = cap.capture_codex(sd, tmp_path / "sessions-root").session("abc")
    assert second is not None and (second.status, second.records_written) == ("appended", 1)
    assert cap.verify(sd, "codex", "abc").status == "verified"


def test_verify_unknown_session(sd: SessionDir) -> None:
    with pytest.raises(SessionNotFound):
        cap.verify(sd, "codex", "nope")


# ------------------------------------------------------------------------------------- repaired copies


def test_export_repaired_codex_copy(real_fixtures: Path, tmp_path: Path) -> None:
    src = real_fixtures / "codex" / "sessions" / INTERRUPTED
    original = src.read_bytes()
    out = tmp_path / "repaired.jsonl"
    result = cap.export_repaired_copy(src, out)
    assert src.read_bytes() == original
    assert [(c.name, c.line, c.inserted_at) for c in result.closed] == [("exec_command", 18, 19)]
    assert (result.lines_in, result.lines_out) == (19, 20)
    repaired = read_codex_file(out)
    assert repaired.records == 20 and not repaired.interrupted
    pair = repaired.tool_pairs[0]
    assert (pair.call_line, pair.result_line, pair.result_text) == (18, 19, "interrupted")
    copied = out.read_bytes().split(b"\n")
    kept = original.split(b"\n")
    assert copied[:18] == kept[:18] and copied[19:] == kept[18:]
    with pytest.raises(RepairRefused):
        cap.export_repaired_copy(src, out)
    with pytest.raises(RepairRefused):
        cap.export_repaired_copy(out, out)


def without(copy: bytes, inserted: list[int]) -> bytes:
    """``copy`` minus the lines at the 1-based positions ``inserted``."""
    lines = copy.split(b"\n")
    return b"\n".join(line for n, line in enumerate(lines, start=1) if n not in set(inserted))


def test_export_repaired_claude_copy_changes_no_original_line(real_fixtures: Path, tmp_path: Path) -> None:
    lines = (real_fixtures / "claude-code" / PARENT).read_bytes().split(b"\n")[:-1]
    call = json.loads(lines[3])
    follow = {"parentUuid": call["uuid"], "isSidechain": False, "type": "user", "sessionId": PARENT_ID,
              "message": {"role": "user", "content": "[Request interrupted by user for tool use]"},
              "uuid": "11111111-2222-4333-8444-555555555555", "timestamp": "2026-01-23T17:35:00.000Z"}
    src = tmp_path / "interrupted.jsonl"
    src.write_bytes(b"\n".join(lines[:4] + [json.dumps(follow, separators=(",", ":")).encode()]) + b"\n")
    before = parse_claude_code(src.read_bytes())
    assert [p.name for p in before.interrupted] == ["Task"]
    out = tmp_path / "fixed.jsonl"
    result = cap.export_repaired_copy(src, out)
    assert [(c.name, c.line, c.inserted_at) for c in result.closed] == [("Task", 4, 5)]
    after = parse_claude_code(out.read_bytes())
    assert after.records == 6 and not after.interrupted and not after.forks
    synthetic, follower = after.items[4], after.items[5]
    assert synthetic.parent_uuid == call["uuid"] and synthetic.kind == "tool_result"
    assert follower.parent_uuid == call["uuid"]  # the original line is not touched
    assert without(out.read_bytes(), [5]) == src.read_bytes()


def test_export_repaired_parallel_calls_put_results_after_the_group(tmp_path: Path) -> None:
    sid = "5a5a5a5a-0000-4000-8000-000000000000"
    u = [f"5a5a5a5a-0000-4000-8000-{n:012d}" for n in range(6)]
    env = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": sid, "version": "2.1.17"}
    records = [{**env, "parentUuid": None, "type": "user", "uuid": u[1], "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "look at three files"}}]
    for n, name in ((2, "a.py"), (3, "b.py"), (4, "c.py")):
        records.append({**env, "parentUuid": u[n - 1], "type": "assistant", "uuid": u[n],
                        "timestamp": f"2026-01-01T00:00:0{n}Z", "requestId": "req_1",
                        "message": {"id": "msg_01PARALLEL", "role": "assistant", "content": [
                            {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"file_path": name}}]}})
    records.append({**env, "parentUuid": u[4], "type": "user", "uuid": u[5], "timestamp": "2026-01-01T00:00:09Z",
                    "message": {"role": "user", "content": "[Request interrupted by user for tool use]"}})
    src = tmp_path / "parallel.jsonl"
    original = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)
    src.write_bytes(original)
    out = tmp_path / "repaired.jsonl"
    result = cap.export_repaired_copy(src, out)
    assert [(c.call_id, c.line, c.inserted_at) for c in result.closed] == [
        ("toolu_2", 2, 5), ("toolu_3", 3, 6), ("toolu_4", 4, 7)]
    copy = out.read_bytes()
    assert without(copy, [5, 6, 7]) == original
    synthetic = [json.loads(line) for line in copy.split(b"\n")[4:7]]
    assert [s["parentUuid"] for s in synthetic] == [u[4], synthetic[0]["uuid"], synthetic[1]["uuid"]]
    assert not parse_claude_code(copy).interrupted


def test_export_repaired_codex_parallel_calls(tmp_path: Path) -> None:
    meta = {"timestamp": "t", "type": "session_meta", "payload": {"id": "p", "cwd": "/w", "cli_version": "0.104.0"}}
    calls = [{"timestamp": "t", "type": "response_item", "payload": {
        "type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": f"call_{n}"}} for n in range(3)]
    done = {"timestamp": "t", "type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "call_1", "output": "ok"}}
    aborted = {"timestamp": "t", "type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}}
    src = tmp_path / "rollout.jsonl"
    original = b"".join(json.dumps(r).encode() + b"\n" for r in [meta, *calls, done, aborted])
    src.write_bytes(original)
    out = tmp_path / "repaired.jsonl"
    result = cap.export_repaired_copy(src, out)
    assert [(c.call_id, c.inserted_at) for c in result.closed] == [("call_0", 5), ("call_2", 6)]
    assert without(out.read_bytes(), [5, 6]) == original
    assert not read_codex_file(out).interrupted


def test_tails_too_big_to_keep_are_read_again(claude_tree: Path, sd: SessionDir, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    monkeypatch.setattr(cap, "TAIL_MEMORY_BUDGET", 0)
    summary = cap.capture_claude_code(sd, claude_tree)
    assert {s.agent_session_id: (s.status, s.records_written) for s in summary.sessions if s.agent_session_id} == {
        sid: ("new", records) for sid, (_, _, records) in CLAUDE_EXPECTED.items()}
    append_lines(claude_tree / REWIND, 2)
    again = cap.capture_claude_code(sd, claude_tree).session(REWIND_ID)
    assert again is not None and (again.status, again.records_written) == ("appended", 2)
    assert cap.verify(sd, "claude-code", REWIND_ID).status == "verified"


def test_capture_paths_takes_only_the_sessions_of_those_files(claude_tree: Path, sd: SessionDir) -> None:
    summary = cap.capture_paths(sd, "claude-code", claude_tree, [claude_tree / SUBAGENT])
    assert [(s.agent_session_id, s.status, s.files) for s in summary.sessions] == [(PARENT_ID, "new", 2)]
    assert [c.agent_session_id for c in agentstate.list_checkpoints(sd)] == [PARENT_ID]


def test_capturing_one_project_or_day_keys_like_the_whole_tree(real_fixtures: Path, sd: SessionDir) -> None:
    cap.capture_claude_code(sd, real_fixtures / "claude-code")
    cap.capture_codex(sd, real_fixtures / "codex" / "sessions")
    project = cap.capture_claude_code(sd, real_fixtures / "claude-code" / "-src-experiments-claude_p")
    assert [(s.agent_session_id, s.status, s.paths) for s in project.sessions] == [
        (PARENT_ID, "unchanged", (PARENT, SUBAGENT))]
    day = cap.capture_codex(sd, real_fixtures / "codex" / "sessions" / "2026" / "02" / "23")
    assert day.counts["unchanged"] == 3 and INTERRUPTED in {p for s in day.sessions for p in s.paths}
