"""No line blocks a session: malformed, cut-off and oversized lines in capture, verify and the native view."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import agentstate, capture_scan
from store.agents import capture as cap
from store.agents.native import K_UNREADABLE, parse_claude_code, parse_codex
from store.agents.native_lines import is_unreadable_record, unreadable_raw
from store.mothx.sessiondir import SessionDir, open_session_dir

SID = "5b1f0c8e-0000-4000-8000-00000000abcd"
REL = f"-home-u-repo/{SID}.jsonl"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def rec(n: int) -> bytes:
    return json.dumps({
        "parentUuid": f"00000000-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
        "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": SID, "cwd": "/home/u/repo", "type": "user",
        "timestamp": f"2026-02-23T12:00:{n:02d}Z", "message": {"role": "user", "content": f"prompt {n}"},
    }, separators=(",", ":")).encode()


def write(root: Path, lines: list[bytes]) -> Path:
    path = root / REL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def captured_items(sd: SessionDir) -> list[tuple[int, str]]:
    session = cap.read_checkpoint_session(sd, "claude-code", SID)
    assert session is not None and session.main is not None
    return [(i.line, i.kind) for i in session.main.items]


BAD_MIDDLE = rec(3)[:120]  # a record cut off in the middle of the file (it has its newline)


def test_a_bad_line_in_the_middle_loses_no_record(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    path = write(root, [rec(1), rec(2), BAD_MIDDLE, rec(4), rec(5)])
    result = cap.capture_claude_code(sd, root).session(SID)
    assert result is not None and (result.status, result.records, result.records_written) == ("new", 5, 5)
    assert "line 3 of" in result.detail and "unreadable record" in result.detail
    checked = cap.verify(sd, "claude-code", SID)
    assert checked.status == "verified" and checked.new_records == 0
    assert any("line 3 is unreadable" in d for d in checked.details)
    assert captured_items(sd) == [(1, "user"), (2, "user"), (3, K_UNREADABLE), (4, "user"), (5, "user")]
    native = parse_claude_code(path.read_bytes(), str(path))
    assert [(i.line, i.kind) for i in native.items] == captured_items(sd)
    # The record after the bad line is still attached to it (its parent uuid is salvaged from the cut text).
    after = native.items[3]
    assert after.parent_state == "unreadable" and after.parent_line == 3
    assert cap.capture_claude_code(sd, root).session(SID).status == "unchanged"  # type: ignore[union-attr]


def test_the_stand_in_record_keeps_the_line(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    write(root, [rec(1), BAD_MIDDLE, rec(3)])
    cap.capture_claude_code(sd, root)
    cp = agentstate.load_checkpoint(sd, "claude-code", SID)
    assert cp is not None
    stored = [json.loads(line) for line in cp.lines(REL)]
    assert is_unreadable_record(stored[1]) and not is_unreadable_record(stored[0])
    assert stored[1]["line"] == 2 and stored[1]["bytes"] == len(BAD_MIDDLE)
    assert stored[1]["sha256"] == hashlib.sha256(BAD_MIDDLE).hexdigest()
    assert unreadable_raw(stored[1]) == BAD_MIDDLE


def test_a_later_fix_of_the_line_is_a_divergence_then_a_reset(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    path = write(root, [rec(1), rec(2), BAD_MIDDLE, rec(4)])
    assert cap.capture_claude_code(sd, root).session(SID).status == "new"  # type: ignore[union-attr]
    write(root, [rec(1), rec(2), rec(3), rec(4)])
    assert cap.verify(sd, "claude-code", SID).status == "divergent"
    again = cap.capture_claude_code(sd, root).session(SID)
    assert again is not None and again.status == "divergent" and again.records_written == 0
    agentstate.publish_reset(sd, "claude-code", SID)
    fresh = cap.capture_claude_code(sd, root).session(SID)
    assert fresh is not None and (fresh.status, fresh.records_written) == ("new", 4)
    assert K_UNREADABLE not in {k for _, k in captured_items(sd)}
    assert path.exists()


def test_a_bad_line_appended_after_a_capture(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    write(root, [rec(1), rec(2)])
    assert cap.capture_claude_code(sd, root).session(SID).status == "new"  # type: ignore[union-attr]
    write(root, [rec(1), rec(2), b'{"type":"user","uuid":"x"}{"type":"user"}', rec(4), rec(5)])
    assert cap.verify(sd, "claude-code", SID).new_records == 3
    second = cap.capture_claude_code(sd, root).session(SID)
    assert second is not None and (second.status, second.records_written) == ("appended", 3)
    assert "glued" in second.detail
    checked = cap.verify(sd, "claude-code", SID)
    assert checked.status == "verified" and checked.new_records == 0
    assert captured_items(sd) == [(1, "user"), (2, "user"), (3, K_UNREADABLE), (4, "user"), (5, "user")]
    third = cap.capture_claude_code(sd, root).session(SID)
    assert third is not None and third.status == "unchanged"


def test_not_utf8_and_not_json_lines(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    write(root, [rec(1), b'{"type":"user","x":"\xff\xfe"}', b"not json at all", b"{\"a\": NaN}", rec(5)])
    result = cap.capture_claude_code(sd, root).session(SID)
    assert result is not None and (result.status, result.records) == ("new", 5)
    assert "UTF-8" in result.detail and "NaN" in result.detail
    assert [k for _, k in captured_items(sd)] == ["user", K_UNREADABLE, K_UNREADABLE, K_UNREADABLE, "user"]
    assert cap.verify(sd, "claude-code", SID).status == "verified"


def test_a_cut_off_last_line_still_waits(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    path = write(root, [rec(1), BAD_MIDDLE, rec(3)])
    with path.open("ab") as fh:
        fh.write(rec(4)[:30])
    result = cap.capture_claude_code(sd, root).session(SID)
    assert result is not None and (result.status, result.records, result.pending_lines) == ("new", 3, 1)
    with path.open("ab") as fh:
        fh.write(rec(4)[30:] + b"\n")
    assert cap.capture_claude_code(sd, root).session(SID).records_written == 1  # type: ignore[union-attr]


def test_read_lines_streams_an_oversized_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture_scan, "MAX_LINE_BYTES", 1000)
    big = b'{"x":"' + b"y" * 500_000 + b'"}'
    data = rec(1) + b"\n" + big + b"\n" + rec(3) + b"\n"
    lines = list(capture_scan.read_lines(io.BytesIO(data), 0))
    assert [ln.complete for ln in lines] == [True, True, True]
    assert lines[1].oversized and lines[1].size == len(big) and len(lines[1].raw) <= 64 * 1024
    assert lines[1].sha256 == hashlib.sha256(big).hexdigest()
    assert lines[2].raw == rec(3) and lines[2].offset == len(rec(1)) + len(big) + 2
    packed, reason = capture_scan.record_bytes(lines[1], 2)
    assert "longer than 1000 bytes" in reason and len(packed) < 10_000 and b"raw_b64" not in packed


def test_an_oversized_line_keeps_every_other_record(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    big = b'{"type":"user","message":{"content":"' + b"z" * (agentstate.MAX_LINE_BYTES + 10) + b'"}}'
    path = write(root, [rec(1), big, rec(3)])
    result = cap.capture_claude_code(sd, root).session(SID)
    assert result is not None and (result.status, result.records_written) == ("new", 3)
    assert "longer than" in result.detail
    assert cap.verify(sd, "claude-code", SID).status == "verified"
    assert captured_items(sd) == [(1, "user"), (2, K_UNREADABLE), (3, "user")]
    native = parse_claude_code(path.read_bytes(), str(path))
    assert [i.kind for i in native.items] == ["user", K_UNREADABLE, "user"]
    assert "longer than" in native.items[1].error


def test_codex_rollout_with_a_bad_line(tmp_path: Path, sd: SessionDir) -> None:
    day = tmp_path / "sessions" / "2026" / "02" / "23"
    day.mkdir(parents=True)
    sid = "019c8a70-0000-7000-8000-000000000001"
    path = day / f"rollout-2026-02-23T13-19-38-{sid}.jsonl"
    meta = {"timestamp": "2026-02-23T13:19:38Z", "type": "session_meta", "payload": {"id": sid, "cwd": "/w"}}
    msg = {"timestamp": "2026-02-23T13:19:39Z", "type": "response_item",
           "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
    path.write_bytes(json.dumps(meta).encode() + b"\n" + b'{"timestamp": "2026-02-2' + b"\n"
                     + json.dumps(msg).encode() + b"\n")
    result = cap.capture_codex(sd, tmp_path / "sessions").session(sid)
    assert result is not None and (result.status, result.records) == ("new", 3)
    session = cap.read_checkpoint_session(sd, "codex", sid)
    assert session is not None and session.main is not None
    assert [i.kind for i in session.main.items] == [i.kind for i in parse_codex(path.read_bytes(), "x").items]
    assert session.main.items[1].kind == K_UNREADABLE
