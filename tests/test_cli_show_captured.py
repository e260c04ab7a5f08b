"""``sessionscope show`` for captured Claude Code and Codex sessions: Markdown, JSON, raw, prefixes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.hostile import assert_clean
from tui.cli import core as cli

FIXTURES = Path(__file__).resolve().parent / "fixtures_native"
INLINE_ID = "7c2d9a41-3f0e-4b8a-9d61-2e5f0a7b8c13"
TYPES_ID = "9d4e5f60-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
CODEX_ID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def captured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    sdir = tmp_path / "sessions"
    sdir.mkdir()
    open_session_dir(sdir, OpenMode.READ_WRITE, create=True).close()
    projects = tmp_path / "projects" / "-home-u-proj"
    projects.mkdir(parents=True)
    shutil.copy(FIXTURES / "claude-code-1.0.98-inline-sidechain.jsonl", projects / f"{INLINE_ID}.jsonl")
    lines = (FIXTURES / "claude-code-2.1.152-record-types.jsonl").read_bytes().splitlines(keepends=True)
    (projects / f"{TYPES_ID}.jsonl").write_bytes(b"".join(lines[:3]) + b'{"type":"user","cut\n' + b"".join(lines[3:]))
    day = tmp_path / "codex" / "2025" / "10" / "02"
    day.mkdir(parents=True)
    shutil.copy(FIXTURES / "codex-0.40.0-json-outputs.jsonl", day / f"rollout-2025-10-02T09-00-00-{CODEX_ID}.jsonl")
    assert run(capsys, "--dir", str(sdir), "capture", "claude-code", str(tmp_path / "projects"))[0] == 0
    assert run(capsys, "--dir", str(sdir), "capture", "codex", str(tmp_path / "codex"))[0] == 0
    return sdir


def show_json(capsys: pytest.CaptureFixture[str], sdir: Path, sid: str, *extra: str) -> dict[str, object]:
    code, out, err = run(capsys, "--dir", str(sdir), "show", sid, "--format", "json", *extra)
    assert code == 0, err
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


def test_show_json_of_an_inline_sidechain_session(captured: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = show_json(capsys, captured, INLINE_ID[:8])  # a prefix
    session, messages = doc["session"], doc["messages"]
    assert isinstance(session, dict) and isinstance(messages, list)
    assert session["agent"] == "claude-code" and session["agent_session_id"] == INLINE_ID
    assert [m["line"] for m in messages] == list(range(1, 9))
    assert [m["sidechain"] for m in messages] == [False, False, True, True, True, True, False, False]
    assert {m["agent_id"] for m in messages if m["sidechain"]} == {"inline-a1b2c3d4"}
    assert all(m["agent_id"] is None for m in messages if not m["sidechain"])
    for key in ("line", "kind", "role", "text", "sidechain", "agent_id", "is_error", "exit_code", "interrupted"):
        assert all(key in m for m in messages), key
    assert session["subagents"] == [{"agent_id": "inline-a1b2c3d4", "layout": "inline",
                                     "task_call_id": "toolu_01TaskAAAA", "task_line": 2, "records": 4}]


def test_show_json_keeps_an_unreadable_line_in_order(captured: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = show_json(capsys, captured, TYPES_ID)
    messages = doc["messages"]
    assert isinstance(messages, list) and len(messages) == 11
    bad = messages[3]
    assert bad["line"] == 4 and bad["kind"] == "unreadable" and "cut off" not in str(bad["reason"])
    assert "not valid JSON" in str(bad["reason"])
    assert [m["kind"] for m in messages[4:6]] == ["tool_result", "queue"]


def test_show_json_of_codex_exit_codes(captured: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = show_json(capsys, captured, CODEX_ID)
    messages = doc["messages"]
    assert isinstance(messages, list) and len(messages) == 14
    results = [(m["line"], m["is_error"], m["exit_code"]) for m in messages if m["kind"] == "tool_result"]
    assert results == [(8, True, 2), (10, False, 0), (13, False, 0)]
    calls = [m for m in messages if m["kind"] == "tool_call"]
    assert all(m["interrupted"] is False for m in calls)
    assert [m["kind"] for m in messages[1:3]] == ["context", "context"]


def test_show_markdown_and_raw(captured: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(captured), "show", INLINE_ID)
    assert code == 0 and "Where is parse_config used?" in out
    assert "Sub-agent inline-a1b2c3d4 (inline layout; Task call `toolu_01TaskAAAA` at line 2)" in out
    code, out, _ = run(capsys, "--dir", str(captured), "show", TYPES_ID)
    assert code == 0 and "sub-agent a7be2f0: file not present" in out and "Unreadable line 4" in out
    code, out, _ = run(capsys, "--dir", str(captured), "show", CODEX_ID, "--raw")
    assert code == 0 and len(out.splitlines()) == 14
    doc = show_json(capsys, captured, CODEX_ID, "--raw")
    rows = doc["rows"]
    assert isinstance(rows, list) and len(rows) == 14 and rows[0]["line"] == 1


def test_show_of_an_unknown_id_still_fails(captured: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--dir", str(captured), "show", "ffffffff")
    assert code != 0 and "ffffffff" in err


def test_show_of_a_hostile_captured_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sdir = tmp_path / "sessions"
    sdir.mkdir()
    open_session_dir(sdir, OpenMode.READ_WRITE, create=True).close()
    project = tmp_path / "projects" / "p"
    project.mkdir(parents=True)
    sid = "e1e1e1e1-0000-4000-8000-000000000001"
    evil = "\x1b]52;c;aGFja2Vk\x07 \x1b[2J \x9b31m \u202etxt [bold]x[/bold] [@click=app.quit]x[/] pid-4242-[/]"
    rec = {"parentUuid": None, "isSidechain": False, "sessionId": sid, "type": "user", "uuid": "u1",
           "timestamp": "2026-01-01T00:00:00Z", "version": evil, "message": {"role": "user", "content": evil},
           evil: evil}
    (project / f"{sid}.jsonl").write_text(json.dumps(rec) + "\n" + "{\x1b]0;pwned\x07 broken\n", encoding="utf-8")
    assert run(capsys, "--dir", str(sdir), "capture", "claude-code", str(tmp_path / "projects"))[0] == 0
    for extra in ((), ("--format", "json"), ("--raw",), ("--raw", "--format", "json")):
        code, out, err = run(capsys, "--dir", str(sdir), "show", sid[:6], *extra)
        assert code == 0, err
        assert_clean(out)
        assert_clean(err)
        shown = json.dumps(json.loads(out), ensure_ascii=False) if "json" in extra else out
        assert "[bold]x[/bold]" in shown  # bracketed text is shown literally


REAL_SESSIONS = {  # agent session id -> records, from the fixture README's line counts
    "03eb5929-52b3-4b13-ada3-b93ae35806b8": 61,
    "326189cf-5676-4237-8cde-1ce80aae4a9f": 54,
    "7acd37a8-2745-4b58-a8a9-46164b22ad9e": 1,
    "29ccd257-68b1-427f-ae5f-6524b7cb6f20": 6 + 59,
    "019c8a4d-8f45-7010-8b5d-7fad920aa6f9": 417,
    "019c8a70-dda7-7f33-98ea-f30553347322": 19,
    "019c8bfe-ec25-79e0-97d7-bda6a9c575ff": 63,
}


def test_show_json_of_the_real_fixtures(real_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    sdir = tmp_path / "sessions"
    sdir.mkdir()
    open_session_dir(sdir, OpenMode.READ_WRITE, create=True).close()
    assert run(capsys, "--dir", str(sdir), "capture", "claude-code", str(real_fixtures / "claude-code"))[0] == 0
    assert run(capsys, "--dir", str(sdir), "capture", "codex", str(real_fixtures / "codex" / "sessions"))[0] == 0
    for sid, records in REAL_SESSIONS.items():
        doc = show_json(capsys, sdir, sid)
        messages = doc["messages"]
        assert isinstance(messages, list) and len(messages) == records, sid
        assert not any(m["kind"] == "unreadable" for m in messages)
    sub = show_json(capsys, sdir, "29ccd257")["messages"]
    assert isinstance(sub, list)
    assert sum(1 for m in sub if m["sidechain"]) == 59 and {m["agent_id"] for m in sub if m["sidechain"]} == {"a2271d1"}
    interrupted = show_json(capsys, sdir, "019c8a70")["messages"]
    assert isinstance(interrupted, list) and sum(1 for m in interrupted if m["interrupted"]) == 1
