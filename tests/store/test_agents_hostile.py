"""External-agent data is hostile: exports write only where asked, capture roots report what they cannot read,
malformed records and foreign checkpoint rows never crash, and data never reaches a message raw."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store.agents import agentstate
from store.agents import capture as cap
from store.agents.native import K_UNREADABLE, parse_claude_code, parse_codex
from store.agents.native_catalog import list_agent_sessions
from store.agents.native_export import export_file_name, native_json, native_markdown, write_native_export
from store.errors import RepairRefused, StoreError
from store.exports import ExportRefused
from store.mothx.sessiondir import SessionDir, open_session_dir

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d",
           "pid-4242-[/]", "[bold]x[/bold]", "[@click=app.quit]x[/]"]
SID = "0d3c5e2a-1111-4222-8333-444455556666"


def no_raw(text: str) -> None:
    assert not RAW.search(text), repr(text)


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def claude_record(n: int, sid: str = SID, **extra: object) -> dict[str, object]:
    rec: dict[str, object] = {
        "parentUuid": f"00000000-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
        "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": sid, "cwd": "/home/u/repo", "type": "user",
        "timestamp": f"2026-02-23T12:00:{n:02d}Z", "message": {"role": "user", "content": f"prompt {n}"},
    }
    rec.update(extra)
    return rec


def interrupted_call(n: int, sid: str = SID, **extra: object) -> dict[str, object]:
    fields: dict[str, object] = {"type": "assistant", "message": {
        "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"c": "ls"}}]}}
    fields.update(extra)
    return claude_record(n, sid, **fields)


def jsonl(records: list[dict[str, object]], *, ascii_only: bool = True) -> bytes:
    return ("\n".join(json.dumps(r, ensure_ascii=ascii_only) for r in records) + "\n").encode("utf-8")


def claude_tree(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "projects"
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


# ------------------------------------------------------------------------------------------------ exports


def test_default_export_names_stay_in_their_folder(tmp_path: Path) -> None:
    t = parse_claude_code(jsonl([claude_record(1, sid="../../../../etc/x")]))
    assert t.session_id == "../../../../etc/x"
    for fmt in ("markdown", "json"):
        name = export_file_name(t, fmt)
        assert "/" not in name and not name.startswith(".") and ".." not in name
        assert (tmp_path / name).resolve().parent == tmp_path.resolve()
    assert export_file_name(t, "json", agent_id="\x1b]0;x\x07").endswith(".json")
    name = cap.repaired_copy_name("/x/../../etc/\x1b]0;t\x07passwd.jsonl")
    no_raw(name)
    assert "/" not in name and name.endswith(".repaired.jsonl")
    assert cap.repaired_copy_name("a/b/../../../etc/x.jsonl", 2).endswith(".repaired-2.jsonl")


@pytest.mark.parametrize("dangling", [False, True])
def test_native_export_refuses_a_link_and_leaves_its_target_alone(tmp_path: Path, dangling: bool) -> None:
    t = parse_claude_code(jsonl([claude_record(1)]))
    target = tmp_path / "victim.txt"
    if not dangling:
        target.write_text("keep me")
    link = tmp_path / "export.md"
    link.symlink_to(target)
    with pytest.raises(ExportRefused) as err:
        write_native_export(t, link, "markdown")
    assert "symbolic link" in str(err.value) and str(target) in str(err.value)
    assert link.is_symlink()
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "keep me"


def test_native_export_never_replaces_unless_asked(tmp_path: Path) -> None:
    t = parse_claude_code(jsonl([claude_record(1)]))
    out = tmp_path / "x.json"
    out.write_text("old")
    with pytest.raises(ExportRefused):
        write_native_export(t, out, "json")
    assert out.read_text() == "old"
    write_native_export(t, out, "json", replace=True)
    assert json.loads(out.read_text())["session_id"] == SID


def test_a_lone_surrogate_is_exported_as_an_escape(tmp_path: Path) -> None:
    # Claude Code before 2.1.132 wrote lone surrogates (as JSON escapes) when it cut an emoji in half.
    rec = claude_record(1, message={"role": "user", "content": "half an emoji \ud83d here"}, cwd="/home/\ud83d")
    t = parse_claude_code(jsonl([rec, interrupted_call(2)]))
    assert "\ud83d" in t.items[0].text
    md = native_markdown(t)
    assert "half an emoji \\ud83d here" in md
    no_raw(md.replace("\n", "").replace("\t", ""))
    js = native_json(t)
    assert json.loads(js)["records"][0]["text"] == "half an emoji \ud83d here"  # the same data, escaped
    no_raw(js.replace("\n", ""))
    for fmt in ("markdown", "json"):
        out = tmp_path / f"e.{fmt}"
        written = write_native_export(t, out, fmt)
        assert written > 0 and out.stat().st_size == written
        out.read_bytes().decode("utf-8")


def test_hostile_text_in_a_markdown_export_is_shown_escaped() -> None:
    records = [claude_record(1, message={"role": "user", "content": "\n".join(HOSTILE)}, cwd=HOSTILE[1]),
               interrupted_call(2, message={"role": "assistant", "content": [
                   {"type": "tool_use", "id": HOSTILE[0], "name": HOSTILE[1], "input": {"c": HOSTILE[2]}}]})]
    md = native_markdown(parse_claude_code(jsonl(records)))
    no_raw(md.replace("\n", "").replace("\t", ""))
    assert "[bold]x[/bold]" in md and "␛]0;pwned␇" in md


@pytest.mark.parametrize("dangling", [False, True])
def test_repaired_copy_refuses_a_link(tmp_path: Path, dangling: bool) -> None:
    src = tmp_path / "t.jsonl"
    src.write_bytes(jsonl([claude_record(1), interrupted_call(2)]))
    target = tmp_path / "victim.jsonl"
    if not dangling:
        target.write_text("keep me")
    link = tmp_path / "copy.jsonl"
    link.symlink_to(target)
    with pytest.raises(RepairRefused) as err:
        cap.export_repaired_copy(src, link)
    assert isinstance(err.value, ExportRefused)
    assert "symbolic link" in str(err.value) and str(target) in str(err.value)
    assert link.is_symlink() and (not target.exists() if dangling else target.read_text() == "keep me")


def test_repaired_copy_refuses_an_existing_file_and_the_original(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_bytes(jsonl([claude_record(1), interrupted_call(2)]))
    before = src.read_bytes()
    with pytest.raises(RepairRefused, match="original"):
        cap.export_repaired_copy(src, src)
    other = tmp_path / "exists.jsonl"
    other.write_text("x")
    with pytest.raises(RepairRefused, match="already exists"):
        cap.export_repaired_copy(src, other)
    with pytest.raises(RepairRefused, match="does not exist"):
        cap.export_repaired_copy(src, tmp_path / "no-such-folder" / "x.jsonl")
    assert src.read_bytes() == before and other.read_text() == "x"


def test_repaired_copy_of_a_record_with_a_lone_surrogate(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_bytes(jsonl([claude_record(1), interrupted_call(2, cwd="/home/\ud83d"), claude_record(3)]))
    out = tmp_path / "copy.jsonl"
    result = cap.export_repaired_copy(src, out)
    assert len(result.closed) == 1 and out.stat().st_size > 0
    lines = out.read_bytes().decode("utf-8").splitlines()
    synthetic = json.loads(lines[2])
    assert synthetic["cwd"] == "/home/\ud83d" and "\\ud83d" in lines[2]
    assert json.loads(lines[3])["parentUuid"] == synthetic["parentUuid"]  # the original line is unchanged


def test_repaired_copy_with_an_unreadable_child_line(tmp_path: Path) -> None:
    child = json.dumps(claude_record(3))[:-5]  # cut off: still names its parent
    src = tmp_path / "t.jsonl"
    src.write_bytes(jsonl([claude_record(1), interrupted_call(2)]) + child.encode() + b"\n")
    result = cap.export_repaired_copy(src, tmp_path / "copy.jsonl")
    assert len(result.closed) == 1 and result.lines_out == 4


# ------------------------------------------------------------------------------------------- capture roots


def deny_open(monkeypatch: pytest.MonkeyPatch, locked: Path) -> None:
    """``Path.open`` of ``locked`` fails as it would for a file the user may not read (tests run as root)."""
    real_open = Path.open

    def guarded(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded)


def deny_scandir(monkeypatch: pytest.MonkeyPatch, locked: Path) -> None:
    """``os.scandir`` of ``locked`` fails as it would for a folder the user may not list."""
    real_scandir = os.scandir

    def guarded(path: Any = ".") -> Any:
        if Path(str(path)) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", guarded)


def _good_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = claude_tree(tmp_path, {
        "proj-a/aaaa.jsonl": jsonl([claude_record(1, sid="aaaa")]),
        "proj-a/bbbb.jsonl": jsonl([claude_record(1, sid="bbbb")]),
        "proj-b/cccc.jsonl": jsonl([claude_record(1, sid="cccc")]),
    })
    return root, root / "proj-a" / "bbbb.jsonl", root / "proj-b"


def test_an_unreadable_file_is_reported_and_the_rest_captured(tmp_path: Path, sd: SessionDir,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root, locked, _ = _good_tree(tmp_path)
    deny_open(monkeypatch, locked)
    summary = cap.capture_claude_code(sd, root)
    by_id = {s.agent_session_id: s for s in summary.sessions}
    assert by_id["aaaa"].status == "new" and by_id["cccc"].status == "new"
    bad = by_id[""]
    assert bad.status == "unreadable" and "permission denied" in bad.detail and "proj-a/bbbb.jsonl" in bad.detail
    assert "no readable JSON" not in bad.detail
    assert bad.paths == ("proj-a/bbbb.jsonl",)


def test_an_unreadable_folder_is_reported_not_skipped(tmp_path: Path, sd: SessionDir,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, _, locked = _good_tree(tmp_path)
    deny_scandir(monkeypatch, locked)
    summary = cap.capture_claude_code(sd, root)
    by_id = {s.agent_session_id: s for s in summary.sessions}
    assert by_id["aaaa"].status == "new" and by_id["bbbb"].status == "new" and "cccc" not in by_id
    bad = by_id[""]
    assert "proj-b" in bad.detail and "folder" in bad.detail and "permission denied" in bad.detail


def test_unreadable_codex_folders_and_files_are_reported(real_fixtures: Path, tmp_path: Path, sd: SessionDir,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "codex" / "sessions"
    shutil.copytree(real_fixtures / "codex" / "sessions", root)
    day = root / "2026" / "02" / "23"
    extra = root / "2026" / "03"
    extra.mkdir()
    deny_scandir(monkeypatch, extra)
    summary = cap.capture_codex(sd, root)
    assert summary.count("new") == 3
    bad = [s for s in summary.sessions if not s.agent_session_id]
    assert len(bad) == 1 and "2026/03" in bad[0].detail and "permission denied" in bad[0].detail
    assert day.is_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="chmod does not stop root from reading")
def test_unreadable_by_chmod(tmp_path: Path, sd: SessionDir) -> None:  # pragma: no cover - runs as non-root only
    root, locked, folder = _good_tree(tmp_path)
    locked.chmod(0)
    folder.chmod(0)
    try:
        summary = cap.capture_claude_code(sd, root)
    finally:
        locked.chmod(0o644)
        folder.chmod(0o755)
    details = " ".join(s.detail for s in summary.sessions if not s.agent_session_id)
    assert details.count("permission denied") == 2
    assert summary.session("aaaa") is not None


def test_verify_reports_a_file_that_became_unreadable(tmp_path: Path, sd: SessionDir,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, locked, _ = _good_tree(tmp_path)
    cap.capture_claude_code(sd, root)
    deny_open(monkeypatch, locked)
    result = cap.verify(sd, "claude-code", "bbbb")
    assert result.status == "divergent" and "permission denied" in " ".join(result.details)
    assert cap.verify(sd, "claude-code", "aaaa").status == "verified"


# ------------------------------------------------------------------------------------------ hostile records


HOSTILE_LINES: list[bytes] = [
    b"[1, 2, 3]", b'"just text"', b"42", b"null", b"true",
    json.dumps({"type": "user", "uuid": 5, "parentUuid": ["x"], "sessionId": {"a": 1}, "message": "not a dict"}).encode(),
    json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": 7, "name": None,
                                                              "input": 10**40}], "usage": {"in_tokens": "x"}}}).encode(),
    json.dumps({"type": "system", "subtype": "compact_boundary", "compactMetadata": [], "content": 3}).encode(),
    json.dumps({"type": "system", "subtype": "stop_hook_summary", "hookInfos": "x", "hookErrors": 5}).encode(),
    json.dumps({"type": "summary", "summary": ["x"], "leafUuid": 1}).encode(),
    json.dumps({"type": "progress", "data": "x"}).encode(),
    b'{"type": "user", "x": ' + b"9" * 5000 + b"}",
    b"[" * 50000,
    b'{"type": "user", "message": {"content": "bad \xff\xfe bytes"}}',
    b'{"type": "user", "message": {"content": "\\ud83d lone"}, "cwd": "\\udc00"}',
    json.dumps({"type": "user", "message": {"content": "\x1b]0;pwned\x07 \u202e"}}).encode(),
]
CODEX_HOSTILE: list[bytes] = [
    json.dumps({"type": "session_meta", "payload": {"id": 5, "cwd": []}}).encode(),
    json.dumps({"type": "response_item", "payload": {"type": "reasoning", "summary": 5, "content": "x"}}).encode(),
    json.dumps({"type": "response_item", "payload": {"type": "function_call", "name": 3, "arguments": {}}}).encode(),
    json.dumps({"type": "response_item", "payload": {"type": "function_call_output", "output": [1, {"a": 2}]}}).encode(),
    json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": 5}}}).encode(),
    json.dumps({"type": "compacted", "payload": {"replacement_history": {"a": 1}}}).encode(),
    json.dumps({"type": "event_msg", "payload": "x"}).encode(),
]


def test_native_readers_survive_hostile_records() -> None:
    data = b"\n".join(HOSTILE_LINES + CODEX_HOSTILE) + b"\n"
    for parse in (parse_claude_code, parse_codex):
        t = parse(data, "x")
        assert t.records == len(HOSTILE_LINES) + len(CODEX_HOSTILE)
        unreadable = {i.line: i.error for i in t.items if i.kind == K_UNREADABLE}
        assert "more digits" in unreadable[12] and "nested too deeply" in unreadable[13]
        assert "UTF-8" in unreadable[14]
        for line, kind in ((1, "an array"), (2, "a string"), (3, "a number"), (4, "null"), (5, "true")):
            assert unreadable[line] == f"the line is JSON but not a record: {kind} where an object belongs"
        assert set(unreadable) == {1, 2, 3, 4, 5, 12, 13, 14}
        native_markdown(t).encode("utf-8")
        native_json(t).encode("utf-8")


def test_capture_and_verify_survive_hostile_records(tmp_path: Path, sd: SessionDir) -> None:
    good = jsonl([claude_record(1, sid="good")])
    files = {"p/good.jsonl": good}
    for n, line in enumerate(HOSTILE_LINES):
        files[f"p/h{n:02d}.jsonl"] = jsonl([claude_record(1, sid=f"h{n:02d}")]) + line + b"\n"
    files["p/\x1b]0;pwned\x07name.jsonl"] = jsonl([claude_record(1, sid="named")])
    files["p/surrogate-id.jsonl"] = jsonl([claude_record(1, sid="\ud83d")])
    files["p/hostile-id.jsonl"] = jsonl([claude_record(1, sid="\x1b]52;c;aGFja2Vk\x07")])
    root = claude_tree(tmp_path, files)
    summary = cap.capture_claude_code(sd, root)
    by_id = {s.agent_session_id: s for s in summary.sessions}
    assert by_id["good"].status == "new" and by_id["named"].status == "new"
    assert by_id["\ud83d"].status == "unreadable" and "UTF-8" in by_id["\ud83d"].detail
    # Valid JSON of any shape is kept byte for byte (a checkpoint restores records, it does not read them);
    # what cannot be read back as JSON is named.
    for n in range(len(HOSTILE_LINES)):
        expected = "new"  # an unreadable line is kept as an unreadable record: no session is blocked
        assert by_id[f"h{n:02d}"].status == expected, (n, by_id[f"h{n:02d}"].detail)
    assert "digits" in by_id["h11"].detail and "UTF-8" in by_id["h13"].detail
    for s in summary.sessions:
        no_raw(s.detail)
        if s.agent_session_id and s.status == "new":
            assert cap.verify(sd, "claude-code", s.agent_session_id).status == "verified"
            assert cap.read_checkpoint_session(sd, "claude-code", s.agent_session_id) is not None
    for row in list_agent_sessions(sd, "claude-code"):
        for text in (row.title, row.preview, row.cwd, row.problem):
            no_raw(text)


def test_capture_details_show_hostile_file_names_escaped(tmp_path: Path, sd: SessionDir) -> None:
    root = claude_tree(tmp_path, {
        "p/\x1b]0;pwned\x07.jsonl": b'{"type": "summary"}\n',
        "p/\u202eevil.jsonl": b"not json\n",
        "p/a\rb.jsonl": jsonl([claude_record(1, sid="crlf")]),
    })
    summary = cap.capture_claude_code(sd, root)
    assert len(summary.sessions) == 3
    for s in summary.sessions:
        assert s.status == "unreadable"
        no_raw(s.detail)
    assert any("␛]0;pwned␇" in s.detail for s in summary.sessions)


# ----------------------------------------------------------------------------------- foreign checkpoint rows


def _captured(tmp_path: Path, sd: SessionDir) -> Path:
    root = claude_tree(tmp_path, {"p/aaaa.jsonl": jsonl([claude_record(1, sid="aaaa"), claude_record(2, sid="aaaa")])})
    assert cap.capture_claude_code(sd, root).count("new") == 1
    return root


def _loosen(path: Path, table: str) -> sqlite3.Connection:
    """Rebuild ``table`` without its constraints, as a foreign writer might have left it."""
    conn = sqlite3.connect(path)
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    conn.executescript(
        f"PRAGMA foreign_keys = OFF; ALTER TABLE {table} RENAME TO old_{table}; "
        f"CREATE TABLE {table} ({', '.join(cols)}); INSERT INTO {table} SELECT * FROM old_{table}; "
        f"DROP TABLE old_{table};"
    )
    return conn


@pytest.mark.parametrize("change", [
    ("agent_state_lines", "UPDATE agent_state_lines SET line_number = 'one' WHERE line_number = 1"),
    ("agent_state_lines", "UPDATE agent_state_lines SET content = NULL"),
    ("agent_state_lines", "UPDATE agent_state_lines SET content = x'ff00'"),
    ("agent_state_versions", "UPDATE agent_state_versions SET record_count = 'many'"),
    ("agent_state_versions", "UPDATE agent_state_versions SET file_count = NULL"),
    ("agent_state_versions", "UPDATE agent_state_versions SET file_shapes = NULL"),
    ("agent_state_versions", "UPDATE agent_state_versions SET file_shapes = '[1, 2]'"),
    ("agent_state_versions", "UPDATE agent_state_versions SET cwd = NULL"),
    ("agent_state_publications", "UPDATE agent_state_publications SET checkpoint_reset = 'maybe'"),
    ("agent_state_publications", "UPDATE agent_state_publications SET run_id = 12"),
    ("agent_state_sessions", "UPDATE agent_state_sessions SET updated_at = NULL, source_root = 5"),
    ("agent_state_file_marks", "UPDATE agent_state_file_marks SET restored_bytes = 'lots'"),
])
def test_foreign_rows_are_a_named_error_or_a_damaged_row(tmp_path: Path, sd: SessionDir,
                                                         change: tuple[str, str]) -> None:
    root = _captured(tmp_path, sd)
    table, sql = change
    conn = _loosen(agentstate.state_db_path(sd), table)
    conn.execute(sql)
    conn.commit()
    conn.close()
    infos = agentstate.list_checkpoints(sd)
    assert len(infos) == 1
    if table in ("agent_state_versions", "agent_state_publications"):
        assert infos[0].state is None and infos[0].head_problem  # listed, marked damaged
        no_raw(infos[0].head_problem)
    if table == "agent_state_lines":
        with pytest.raises(agentstate.SessionStateOutOfSync):
            agentstate.load_checkpoint(sd, "claude-code", "aaaa")
    for step in (
        lambda: agentstate.load_checkpoint(sd, "claude-code", "aaaa"),
        lambda: cap.verify(sd, "claude-code", "aaaa"),
        lambda: cap.read_checkpoint_session(sd, "claude-code", "aaaa"),
        lambda: list_agent_sessions(sd, "claude-code"),
        lambda: cap.capture_claude_code(sd, root),
        lambda: agentstate.preview_reset(sd, "claude-code", "aaaa"),
    ):
        try:
            step()
        except StoreError as exc:
            no_raw(str(exc))


def test_foreign_runtime_rows_are_a_named_error(tmp_path: Path, sd: SessionDir) -> None:
    agentstate.advance_runtime_config_epoch(sd, "claude-code")
    conn = _loosen(agentstate.state_db_path(sd), "agent_state_agents")
    conn.execute("UPDATE agent_state_agents SET runtime_config_epoch = 'seven'")
    conn.commit()
    conn.close()
    with pytest.raises(agentstate.CheckpointDamaged, match="configuration epoch"):
        agentstate.runtime_config_epoch(sd, "claude-code")
    with pytest.raises(agentstate.CheckpointDamaged):
        agentstate.guard_runtime_sync(sd, "claude-code", 1, lambda: None)


def test_hostile_agent_ids_in_runtime_messages(sd: SessionDir) -> None:
    with pytest.raises(agentstate.RuntimeConfigStale) as err:
        agentstate.guard_runtime_sync(sd, "\x1b]0;pwned\x07", 0, lambda: None)
    no_raw(str(err.value))
