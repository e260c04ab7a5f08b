"""Every command of the command line on a session directory whose data is hostile: terminal escapes (OSC 52
clipboard writes, OSC 0 retitles, OSC 8 links, CSI clears, C1 CSI, BEL), bidi overrides, lone surrogates and
markup in sessions, entries, tool calls, runs, leases, recovery records, work dirs, titles and a captured
Claude Code transcript. No output (stdout or stderr) may hold a raw control, bidi or surrogate character, no
command may crash or print a traceback, brackets are shown literally, and JSON parses back to the data."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tui.cli import core as cli
from tui.cli.output import Column, render_table

REPO = Path(__file__).resolve().parents[1]

CLIP = "\x1b]52;c;aGFja2Vk\x07"
TITLE_OSC = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"
BEL = "\x07"
RLO = "\u202etxt.exe"
SURROGATE = "\ud83d"
MARKUP = ("pid-4242-[/]", "[bold]x[/bold]", "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]",
          "/home/u/[archive]/repo")
DEL = "\x7f"
EVIL = "".join((CLIP, TITLE_OSC, LINK, CLEAR, C1_CSI, BEL, RLO, DEL, *MARKUP))
EVIL_TEXT = EVIL + SURROGATE  # where the data can hold a lone surrogate (JSON text in entries)

OWNER = "pid-4242-[/]\x1b]52;c;aGk=\x07"
CWD = "/home/u/[archive]/repo" + TITLE_OSC + RLO
TITLE = "[bold]title[/bold] " + CLIP + C1_CSI
TOOL = "bash" + TITLE_OSC + "[@click=app.quit]x[/]"
CALL = "call_" + CLEAR + "[/]"
S1 = "5e55104000000001"  # a hostile transcript, an orphaned run under a hostile lease holder
S2 = "5e55104000000002"  # idle, its expired lease left active by a hostile holder
S3 = "host" + TITLE_OSC + "[/]" + RLO  # a hostile session id, a valid lease held by a hostile holder
RUN = "run_h0001"
TURN = "turn_h1"
CC_ID = "8b4c2a1e-5f3d-4e2a-9c1b-0d7e6f5a4b3c"

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def assert_clean(text: str, where: str = "") -> None:
    found = UNSAFE.search(text)
    assert found is None, f"{where}: raw {found.group(0)!r} at {found.start()}: {text[max(0, found.start() - 60):found.start() + 20]!r}"
    assert "Traceback" not in text, where


# --------------------------------------------------------------------------------------------------- building


def _entry(conn: sqlite3.Connection, sid: str, eid: str, etype: str, parent: str | None, ts: str,
           **fields: object) -> None:
    data = {"type": etype, "id": eid, "parentId": parent, "timestamp": ts, **fields}
    # json.dumps escapes the lone surrogate as \ud83d: valid UTF-8 text, a lone surrogate once parsed
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (sid, eid, etype, parent, ts, json.dumps(data)))


def build_session_dir(root: Path, *, surrogates_listed: bool = False) -> Path:
    """The hostile directory. Lone surrogates are in entries the listing does not index (thinking, assistant
    text, tool arguments and results); ``surrogates_listed`` also puts them in a title and the previews."""
    listed = EVIL_TEXT if surrogates_listed else EVIL
    title = TITLE + (SURROGATE if surrogates_listed else "")
    root.mkdir(parents=True)
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for sid in (S1, S2, S3):
        conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, ?, '2026-03-01T09:00:00Z', 3)",
                     (sid, CWD))
    _entry(conn, S1, "e1", "session", None, "2026-03-01T09:00:00Z", version=3, cwd=CWD)
    _entry(conn, S1, "e2", "message", "e1", "2026-03-01T09:00:01Z",
           message={"role": "user", "content": "please " + listed})
    _entry(conn, S1, "e3", "message", "e2", "2026-03-01T09:00:02Z", message={
        "role": "assistant", "contents": [
            {"type": "thinking", "thinking": "hmm " + EVIL_TEXT},
            {"type": "text", "text": "running " + EVIL_TEXT},
            {"type": "toolCall", "toolCall": {"id": CALL, "name": TOOL, "kind": "function",
                                              "arguments": json.dumps({"command": EVIL_TEXT})}}]})
    _entry(conn, S1, "e4", "message", "e3", "2026-03-01T09:00:03Z", message={
        "role": "toolResult", "toolCallId": CALL, "toolName": TOOL, "isError": True, "content": EVIL_TEXT})
    _entry(conn, S1, "e5", "session_info", "e4", "2026-03-01T09:00:04Z", name=title, source="user")
    _entry(conn, S1, "e6", "turn_start", "e5", "2026-03-01T09:00:05Z", turnId=TURN, runId=RUN)
    _entry(conn, S1, "e7", "message", "e6", "2026-03-01T09:00:06Z", message={
        "role": "assistant", "contents": [{"type": "toolCall", "toolCall": {
            "id": CALL + "2", "name": TOOL, "kind": "function", "arguments": "{}"}}]})
    _entry(conn, S2, "f1", "message", None, "2026-03-01T10:00:00Z", message={"role": "user", "content": listed})
    _entry(conn, S3, "g1", "message", None, "2026-03-01T11:00:00Z", message={"role": "user", "content": listed})
    _entry(conn, S3, "g2", "message", "g1", "2026-03-01T11:00:01Z", data_unparsable=True)
    conn.execute("UPDATE entries SET data = ? WHERE id = 'g2'", ("{not json " + EVIL,))

    conn.execute(
        "INSERT INTO session_runs (id, session_id, attempt, work_dir, source, model, mode, status, started_at, "
        "updated_at, error) VALUES (?, ?, 1, ?, ?, ?, 'yolo', 'running', '2026-03-01T09:00:05Z', "
        "'2026-03-01T09:00:06Z', ?)", (RUN, S1, CWD, "cli" + BEL, "model" + TITLE_OSC, "error " + EVIL))
    conn.execute(
        "INSERT INTO session_runs (id, session_id, attempt, work_dir, source, model, mode, status, started_at, "
        "updated_at, finished_at, error) VALUES ('run_h0000', ?, 1, ?, 'cli', ?, 'yolo', 'failed', "
        "'2026-03-01T08:00:00Z', '2026-03-01T08:01:00Z', '2026-03-01T08:01:00Z', ?)",
        (S1, CWD, "m" + RLO, "boom " + EVIL))
    conn.execute(
        "INSERT INTO conversation_turns (id, session_id, intent_id, kind, status, start_seq, started_at) "
        "VALUES (?, ?, '', 'conversation', 'open', 6, '2026-03-01T09:00:05Z')", (TURN, S1))
    conn.execute(
        "INSERT INTO session_run_recoveries (run_id, session_id, state, trigger_source, reason_code, attempt, "
        "previous_lease_epoch, last_error, next_retry_at, started_at, updated_at) "
        "VALUES (?, ?, 'failed', ?, ?, 1, 3, ?, 2000, 1500, 1500)",
        (RUN, S1, "startup" + BEL, "owner_lost" + C1_CSI, "last " + EVIL))
    conn.execute(
        "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
        "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
        "VALUES (?, ?, ?, ?, 'a', ?, 'function', ?, 'h', 'running', 1, '2026-03-01T09:00:06Z')",
        (S1, TURN, TURN + ":" + CALL, "p" + TITLE_OSC, CALL, TOOL))
    lease = ("INSERT INTO session_runtime_leases (session_id, owner_instance_id, owner_pid, owner_kind, "
             "lease_token_hash, epoch, run_id, purpose, state, acquired_at, heartbeat_at, expires_at, updated_at) "
             "VALUES (?, ?, 4242, ?, 'tok', 3, ?, ?, 'active', 900, 950, ?, 950)")
    conn.execute(lease, (S1, OWNER, "process" + BEL, RUN, "execution", 1000))            # expired long ago
    conn.execute(lease, (S2, OWNER, "process", "", "mutation", 1000))
    conn.execute(lease, (S3, OWNER, "process", "", "mutation" + RLO, 4_000_000_000))    # valid for ages
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return root


def build_claude_root(root: Path) -> Path:
    project = root / ("-home-u-" + TITLE_OSC + "[archive]")
    project.mkdir(parents=True)
    base = {"isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": CC_ID, "version": "1.0.51"}
    records = [
        {**base, "parentUuid": None, "type": "user", "uuid": "u-1", "timestamp": "2026-03-01T09:00:00.000Z",
         "message": {"role": "user", "content": "prompt " + EVIL}},
        {**base, "parentUuid": "u-1", "type": "assistant", "uuid": "a-1", "timestamp": "2026-03-01T09:00:01.000Z",
         "message": {"role": "assistant", "id": "msg_1", "model": "m", "content": [
             {"type": "text", "text": "on it " + EVIL},
             {"type": "tool_use", "id": "toolu_" + "01", "name": TOOL, "input": {"command": EVIL}}]}},
    ]
    path = project / f"{CC_ID}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """(the session directory, the captured transcript) — captured once before the read commands run."""
    sdir = build_session_dir(tmp_path / "sessions")
    transcript = build_claude_root(tmp_path / "claude")
    code = cli.main(["--dir", str(sdir), "capture", "claude-code", str(tmp_path / "claude"), "--json"])
    assert code == 0
    return sdir, transcript


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert_clean(out, f"stdout of {argv[2:]}")
    assert_clean(err, f"stderr of {argv[2:]}")
    if err:
        assert all(line.startswith("sessionscope: ") for line in err.splitlines()), err
    return code, out, err


# ------------------------------------------------------------------------------------------------------ tests


def test_every_command_prints_only_safe_text(hostile: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    sdir, transcript = hostile
    capsys.readouterr()
    d = str(sdir)
    before = digest(sdir)
    commands: list[tuple[list[str], set[int]]] = [
        (["list"], {0}), (["list", "--all"], {0}), (["list", "--json", "--all"], {0}),
        (["list", "--search", "pwned"], {0}),
        (["show", S1], {0}), (["show", S1, "--format", "json"], {0}), (["show", S1, "--raw"], {0}),
        (["show", S1, "--raw", "--format", "json"], {0}), (["show", "host"], {0}), (["show", "host", "--raw"], {0}),
        (["show", S3], {0}), (["show", TITLE_OSC + "nope"], {2}),
        (["runs"], {0}), (["runs", "--json"], {0}), (["runs", "--orphaned"], {0}), (["runs", "--session", S1], {0}),
        (["runs", "--session", "[/]" + CLIP], {2}),
        (["repair", "recover-run", RUN, "--dry-run"], {0, 3}),
        (["repair", "recover-run", RUN, "--dry-run", "--json"], {0, 3}),
        (["repair", "release-lease", S2, "--dry-run"], {0, 3}),
        (["repair", "release-lease", S3, "--dry-run"], {3}),
        (["repair", "abandon-tools", S1, TURN, "--dry-run"], {0, 3}),
        (["repair", "abandon-tools", S1, TURN, CALL, "nope" + BEL, "--dry-run", "--json"], {0, 3}),
        (["repair", "abandon-tools", S1, "turn" + TITLE_OSC, "--dry-run"], {2}),
        (["repair", "recover-run", "run" + CLIP, "--dry-run"], {2}),
        (["repair", "recover-run", RUN, "--yes"], {3}),                       # read-only: refused
        (["checkpoints"], {0}), (["checkpoints", "--json"], {0}),
        (["checkpoint", "verify", "claude-code", CC_ID[:8]], {0, 1}),
        (["checkpoint", "verify", "claude-code", CC_ID, "--json"], {0, 1}),
        (["checkpoint", "verify", "claude-code", "[/]" + CLIP], {2}),
        (["checkpoint", "reset", "claude-code", CC_ID, "--dry-run"], {3}),
    ]
    seen: dict[tuple[str, ...], str] = {}
    for argv, codes in commands:
        code, out, err = run(capsys, "--read-only", "--dir", d, *argv)
        assert code in codes, (argv, code, err)
        if code in (2, 3):
            assert err.count("\n") == 1, (argv, err)
        seen[tuple(argv)] = out
    assert digest(sdir) == before, "read-only commands change no byte"

    # Brackets are literal, escapes visible.
    assert "[bold]title[/bold]" in seen[("list",)] and "␛]52;c;aGFja2Vk␇" in seen[("list",)]
    assert "\\x9b31m" in seen[("list",)] and "/home/u/[archive]/repo" in seen[("list",)]
    assert "pid-4242-[/]␛]52;c;aGk=␇" in seen[("runs",)]
    assert "[@click=app.quit]x[/]" in seen[("show", S1)] and "\\u202etxt.exe" in seen[("show", S1)]
    assert "\\ud83d" in seen[("show", S1)]
    assert RUN in seen[("repair", "recover-run", RUN, "--dry-run")]

    # JSON is exactly the data.
    sessions = {s["id"]: s for s in json.loads(seen[("list", "--json", "--all")])}
    assert set(sessions) == {S1, S2, S3}
    assert sessions[S1]["title"] == TITLE and sessions[S1]["cwd"] == CWD
    shown = json.loads(seen[("show", S1, "--format", "json")])
    assert shown["session"]["id"] == S1
    assert any(m["text"] == "please " + EVIL for m in shown["messages"])
    assert any(m["text"] == "running " + EVIL_TEXT for m in shown["messages"])
    runs = {r["run_id"]: r for r in json.loads(seen[("runs", "--json")])}
    assert runs[RUN]["lease"]["owner_instance_id"] == OWNER and runs[RUN]["error"] == "error " + EVIL
    assert runs[RUN]["recovery"]["last_error"] == "last " + EVIL
    preview = json.loads(seen[("repair", "abandon-tools", S1, TURN, CALL, "nope" + BEL, "--dry-run", "--json")])
    assert preview["preview"]["session_id"] == S1
    checkpoints = json.loads(seen[("checkpoints", "--json")])
    assert [(c["agent_session_id"], c["cwd"]) for c in checkpoints] == [(CC_ID, CWD)]
    assert json.loads(seen[("checkpoint", "verify", "claude-code", CC_ID, "--json")])["agent_session_id"] == CC_ID

    # A refusal that names the hostile holder (stderr), on a copy opened read-write.
    copy = tmp_path / "copy"
    shutil.copytree(sdir, copy)
    code, out, err = run(capsys, "--dir", str(copy), "repair", "release-lease", S3, "--yes")
    assert code == 3 and "pid-4242-[/]␛]52;c;aGk=␇" in err and "\\u202e" in err

    # export-repaired: a hostile tool name, a hostile folder name.
    target = tmp_path / "repaired.jsonl"
    code, out, err = run(capsys, "export-repaired", str(transcript), str(target))
    assert code == 0, err
    assert "␛]0;pwned␇" in out
    code, out, err = run(capsys, "export-repaired", str(transcript), str(tmp_path / "again.jsonl"), "--json")
    assert code == 0 and json.loads(out)["closed"][0]["name"] == TOOL
    code, out, err = run(capsys, "export-repaired", str(transcript), str(target))
    assert code == 3 and out == ""


def test_capture_summary_and_progress_are_safe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from store.agents.capture import CaptureProgress
    from tui.cli.capture import _ProgressBar

    sdir = build_session_dir(tmp_path / "sessions")
    build_claude_root(tmp_path / "claude")
    (tmp_path / "claude" / ("x" + CLIP)).mkdir()
    (tmp_path / "claude" / ("x" + CLIP) / ("junk" + TITLE_OSC + ".jsonl")).write_text("not json " + EVIL + "\n")
    code, out, err = run(capsys, "--dir", str(sdir), "capture", "claude-code", str(tmp_path / "claude"))
    assert code == 0, err
    assert "Captured Claude Code transcripts" in out

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    with _ProgressBar("claude-code", stream) as bar:
        bar(CaptureProgress(1, 2, 10, 20, "proj/[/]" + CLIP + TITLE_OSC + RLO + ".jsonl"))
        bar(CaptureProgress(2, 2, 20, 20, "[bold]x[/bold]" + C1_CSI))
    drawn = stream.getvalue()
    for raw in ("\x1b]", "\x07", "\x9b", "\u202e"):
        assert raw not in drawn


def test_tables_on_a_terminal_hold_only_their_own_styles() -> None:
    rows = [(S3, TITLE, OWNER, EVIL_TEXT)]
    columns = (Column("ID"), Column("TITLE", cut=True), Column("HOLDER"), Column("TEXT", cut=True))
    for width in (None, 200, 60):
        lines = render_table(columns, rows, width=width, terminal=width is not None)
        for line in lines:
            assert_clean(re.sub(r"\x1b\[[0-9;]*m", "", line), "table")
        text = "\n".join(lines)
        assert "pid-4242-[/]" in re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_markdown_of_show_in_a_real_process(hostile: tuple[Path, Path]) -> None:
    """Real standard streams: nothing raises UnicodeEncodeError, not even on an ASCII-only stdout."""
    sdir, _ = hostile
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for encoding in ("utf-8", "ascii"):
        for argv in (["show", S1], ["show", S1, "--format", "json"], ["list", "--all"], ["runs"]):
            done = subprocess.run([sys.executable, "-m", "tui.cli", "--read-only", "--dir", str(sdir), *argv],
                                  capture_output=True, env={**env, "PYTHONIOENCODING": encoding}, timeout=60,
                                  cwd=REPO)
            assert done.returncode == 0, done.stderr
            out = done.stdout.decode(encoding)
            assert_clean(out, f"{argv} ({encoding})")
            assert_clean(done.stderr.decode(encoding, "replace"), f"{argv} ({encoding})")
            if "--format" in argv:
                doc = json.loads(out)
                assert any(m["text"] == "running " + EVIL_TEXT for m in doc["messages"])


def test_lone_surrogates_in_titles_and_previews(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A title and first messages holding a lone surrogate (a JSON ``\\ud83d`` escape) list and show safely.

    Needs the store's session index to keep such text (it writes titles and previews into its own SQLite
    cache, whose encoder refuses lone surrogates)."""
    sdir = build_session_dir(tmp_path / "sessions", surrogates_listed=True)
    for argv in (["list", "--all"], ["list", "--json", "--all"], ["show", S1], ["show", S1, "--format", "json"],
                 ["list", "--search", "please"]):
        code, out, err = run(capsys, "--read-only", "--dir", str(sdir), *argv)
        assert code == 0, (argv, err)
        if argv == ["list", "--json", "--all"]:
            titles = {s["id"]: s["title"] for s in json.loads(out)}
            assert titles[S1] == TITLE + SURROGATE
        if argv[0] == "list" and "--json" not in argv:
            assert "\\ud83d" in out
