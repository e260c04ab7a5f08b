"""The ``sessionscope`` command line: exit codes, one-line errors, JSON shapes, raw rows, read modes."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tui.cli import core as cli

REPO = Path(__file__).resolve().parents[1]
A = "a1b2c3d4e5f60001"
B = "a1b2ffff00000002"
C = "c0ffee0000000003"


def _session_dir(root: Path) -> Path:
    """Three sessions written as a foreign writer would, one entry of B unparsable."""
    root.mkdir(parents=True, exist_ok=True)
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    n = 0

    def entry(sid: str, type_: str, body: dict[str, object] | None = None, *, data: str | None = None,
              parent: str | None = None) -> str:
        nonlocal n
        n += 1
        eid = f"{n:016x}"
        stamp = f"2026-03-0{1 + n // 50}T10:{n % 60:02d}:00Z"
        if data is None:
            obj: dict[str, object] = {"type": type_, "id": eid, "parentId": parent, "timestamp": stamp}
            obj.update(body or {})
            data = json.dumps(obj)
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                     (sid, eid, type_, parent, stamp, data))
        return eid

    for sid, cwd in ((A, "/work/alpha"), (B, "/work/beta"), (C, "/work/alpha")):
        conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, ?, '2026-03-01T09:00:00Z')", (sid, cwd))
    head = entry(A, "session", {"cwd": "/work/alpha"})
    m1 = entry(A, "message", {"message": {"role": "user", "content": "How do I fix the parser?"}}, parent=head)
    m2 = entry(A, "message", {"message": {"role": "assistant", "contents": [{"type": "text", "text": "Like this."}]}},
               parent=m1)
    entry(A, "session_info", {"name": "Parser fix", "source": "auto"}, parent=m2)
    entry(B, "message", {"message": {"role": "user", "content": "beta question with a needle"}})
    entry(B, "message", data="{this is not json")
    conn.execute("UPDATE sessions SET parent_session = ?, fork_kind = 'session', fork_boundary_seq = 3, "
                 "seed_length = 3 WHERE id = ?", (A, B))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return root


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    return _session_dir(tmp_path / "sessions")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------------------------------------
# list


def test_list_table(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--dir", str(sdir), "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["SESSION", "ID", "LAST", "USED", "MSGS", "WORKDIR", "TITLE"]
    assert [line.split()[0] for line in lines[1:]] == [B, A]          # C has no messages: not listed by default
    assert "Parser fix" in lines[2] and "/work/alpha" in lines[2]
    assert "beta question with a needle" in lines[1]
    code, out, _ = run(capsys, "--dir", str(sdir), "list", "--all")
    assert code == 0 and C in out


def test_list_json_shape_and_options(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list", "--dir", str(sdir), "--json", "--all")   # global option after the command
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert isinstance(doc, list) and [d["id"] for d in doc] == [B, A, C]
    required = {"id", "title", "cwd", "channel_type", "message_count", "last_active_at", "preview",
                "parent_session", "fork_kind"}
    assert all(required <= set(d) for d in doc)
    a = next(d for d in doc if d["id"] == A)
    assert (a["title"], a["message_count"], a["preview"], a["cwd"]) == ("Parser fix", 2, "How do I fix the parser?",
                                                                       "/work/alpha")
    b = next(d for d in doc if d["id"] == B)
    assert (b["parent_session"], b["fork_kind"], b["fork_boundary_seq"]) == (A, "session", 3)

    def ids(*extra: str) -> list[str]:
        code, out, _ = run(capsys, "--dir", str(sdir), "list", "--json", *extra)
        assert code == 0
        return [d["id"] for d in json.loads(out)]

    assert ids("--search", "NEEDLE") == [B]
    assert ids("--search", "a1b2") == [B, A]
    assert ids("--limit", "1") == [B]
    assert ids("--limit", "1", "--offset", "1") == [A]
    assert ids("--cwd", "/work/alpha/") == [A]
    assert ids("--cwd", "/work/alpha", "--all") == [A, C]
    assert ids("--sort", "title") == [B, A]             # "beta question…" < "Parser fix" (case-insensitive)
    assert ids("--sort", "title", "--reverse") == [A, B]
    assert ids("--sort", "messages", "--all") == [B, A, C]   # 2, 2 (B active later), 0
    assert ids("--sort", "created", "--all", "--reverse") == [A, B, C]   # same timestamp: by id
    assert ids("--search", "nothing-like-this") == []


def test_list_errors(sdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list")                     # no default dir in the hermetic HOME
    assert code == 1 and out == ""
    assert err.startswith("sessionscope: no session directory at ") and "--demo" in err
    assert err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(tmp_path / "missing"), "list")       # a bad argument: exit 2
    assert code == 2 and "no such file or folder" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", "", "list")
    assert code == 2 and err == "sessionscope: --dir needs a path\n"
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    code, _, err = run(capsys, "--dir", str(empty), "list")                      # a folder without a database
    assert code == 1 and "no sessions.db" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(sdir), "list", "--limit", "-3")
    assert code == 2 and "negative" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(sdir), "list", "--sort", "colour")
    assert code == 2 and err.count("\n") == 1
    code, _, err = run(capsys, "--read-only", "--dir", str(sdir), "list", "--snapshot")
    assert code == 2 and "--read-only" in err
    code, _, err = run(capsys, "--bogus")
    assert code == 2 and err.startswith("sessionscope: ")
    not_db = tmp_path / "junk"
    not_db.mkdir()
    (not_db / "sessions.db").write_bytes(b"definitely not sqlite" * 50)
    code, _, err = run(capsys, "--dir", str(not_db), "list")
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1


def test_default_dir_from_environment(sdir: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MOTHX_DIR", str(sdir.parent))     # $MOTHX_DIR/sessions
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0 and [d["id"] for d in json.loads(out)] == [B, A]


# ----------------------------------------------------------------------------------------------------------
# show


def test_show_markdown_and_json(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--dir", str(sdir), "show", A)
    assert code == 0 and err == ""
    assert "How do I fix the parser?" in out and "Like this." in out
    code, out, _ = run(capsys, "--dir", str(sdir), "show", "c0ff", "--format", "json")
    assert code == 0 and json.loads(out)["session"]["id"] == C and json.loads(out)["messages"] == []
    code, out, _ = run(capsys, "--dir", str(sdir), "show", A[:6], "--format", "json")
    doc = json.loads(out)
    assert doc["session"]["id"] == A and doc["session"]["title"] == "Parser fix"
    assert [(m["kind"], m["role"], m["text"]) for m in doc["messages"]] == [
        ("message", "user", "How do I fix the parser?"), ("message", "assistant", "Like this.")]
    assert [m["seq"] for m in doc["messages"]] == sorted(m["seq"] for m in doc["messages"])
    assert all({"seq", "entry_id", "kind", "role", "text", "overridden"} <= set(m) for m in doc["messages"])


def test_show_raw_lists_unparsable_rows(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(sdir), "show", B, "--raw", "--format", "json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert [r["type"] for r in rows] == ["message", "message"]
    assert rows[0]["parse_error"] is None
    assert isinstance(rows[1]["parse_error"], str) and rows[1]["parse_error"]
    assert all({"seq", "id", "type", "parent_id", "parse_error"} <= set(r) for r in rows)
    code, out, _ = run(capsys, "--dir", str(sdir), "show", B, "--raw")
    assert code == 0
    table = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| seq")]
    assert len(table) == 2 and table[1].split("|")[-2].strip() != "" and table[0].split("|")[-2].strip() == ""


def test_show_unknown_and_ambiguous(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--dir", str(sdir), "show", "a1b2")
    assert code == 2 and out == "" and "more than one session" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(sdir), "show", "deadbeef")
    assert code == 2 and "deadbeef" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(sdir), "show")
    assert code == 2 and err.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------
# read modes, demo, the UI branch


@pytest.mark.parametrize("flags", [[], ["--read-only"], ["--snapshot"]])
def test_read_commands_change_no_byte(sdir: Path, capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    before = digest(sdir)
    for argv in (["list"], ["list", "--json", "--search", "needle"], ["show", A], ["show", B, "--raw"],
                 ["show", A, "--format", "json"]):
        code, _, err = run(capsys, *flags, "--dir", str(sdir), *argv)
        assert code == 0, err
    assert digest(sdir) == before


def test_demo_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "demo-here"
    code, out, err = run(capsys, "demo", str(target))
    assert code == 0 and err == "" and out.strip() == str(target.absolute())
    assert (target / "sessions.db").is_file()
    code, out, _ = run(capsys, "--dir", str(target), "list", "--json", "--limit", "0")
    assert code == 0 and len(json.loads(out)) > 10
    code, out, _ = run(capsys, "--demo", "list", "--limit", "2", "--json")   # --demo also names the directory
    assert code == 0 and len(json.loads(out)) == 2
    code, _, err = run(capsys, "--demo", "--dir", str(target), "list")
    assert code == 2 and err.count("\n") == 1


def test_ui_branch_passes_directory_and_mode(sdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Path | None, OpenMode]] = []

    class FakeApp:
        return_code = 0

        def __init__(self, session_dir: Path | None, mode: OpenMode) -> None:
            seen.append((session_dir, mode))

        def run(self, *, mouse: bool = True) -> None:
            mice.append(mouse)

    mice: list[bool] = []
    import tui.app

    monkeypatch.setattr(tui.app, "SessionscopeApp", FakeApp)
    assert cli.main([]) == 0                                   # no default directory: the app offers the demo
    assert cli.main(["--dir", str(sdir), "--snapshot"]) == 0
    assert cli.main(["--dir", str(sdir / "sessions.db"), "--read-only"]) == 0
    assert seen == [(None, OpenMode.READ_WRITE), (sdir, OpenMode.SNAPSHOT), (sdir, OpenMode.READ_ONLY)]
    assert mice == [True, True, True]

    # config.toml: the directory opened without --dir, the app's open mode, the mouse
    from store import config

    config.set_value("default_dir", str(sdir))
    config.set_value("open_mode", "read-only")
    config.set_value("mouse", "false")
    seen.clear()
    mice.clear()
    assert cli.main([]) == 0
    assert cli.main(["--snapshot"]) == 0                       # a flag still wins
    assert seen == [(sdir, OpenMode.READ_ONLY), (sdir, OpenMode.SNAPSHOT)]
    assert mice == [False, False]


def test_keyboard_interrupt_is_130(monkeypatch: pytest.MonkeyPatch, sdir: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    import store.mothx.sessions

    monkeypatch.setattr(store.mothx.sessions, "list_sessions", interrupted)
    code, _, err = run(capsys, "--dir", str(sdir), "list")
    assert code == 130 and "Traceback" not in err


def test_when_formats_rfc3339_in_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")   # shown times are UTC whatever the machine's zone (as in the app)
    import time

    time.tzset()
    try:
        assert cli.when("2026-11-20T12:00:00Z") == "2026-11-20 12:00"
        assert cli.when("2026-11-20T12:00:00.123456789Z") == "2026-11-20 12:00"
        assert cli.when("2026-11-20T14:30:00+02:00") == "2026-11-20 12:30"
        assert cli.when("") == "-"
        assert cli.when("yesterday") == "unreadable (yesterday)"  # a stored text that is no time
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


# ----------------------------------------------------------------------------------------------------------
# real processes


def test_console_script_and_module_in_real_processes(sdir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = Path(sys.executable).with_name("sessionscope")
    commands = [[sys.executable, "-m", "tui"]]
    if script.exists():
        commands.append([str(script)])
    before = digest(sdir)
    for base in commands:
        done = subprocess.run([*base, "--dir", str(sdir), "--read-only", "list", "--json"], capture_output=True,
                              text=True, env=env, timeout=60, cwd=REPO)
        assert done.returncode == 0, done.stderr
        assert [d["id"] for d in json.loads(done.stdout)] == [B, A]
        done = subprocess.run([*base, "--dir", str(sdir), "show", "0000"], capture_output=True, text=True, env=env,
                              timeout=60, cwd=REPO)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith("sessionscope: ") and done.stderr.count("\n") == 1
        assert "Traceback" not in done.stderr
    assert digest(sdir) == before


def test_list_does_not_import_textual() -> None:
    code = ("import sys; from tui.cli import core as cli; "
            "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stdout.strip() == "False"


def test_older_layout_lists_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "old"
    root.mkdir()
    conn = sqlite3.connect(root / "sessions.db")
    conn.executescript(
        """
        CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, timestamp TEXT, parent_session TEXT, version INTEGER);
        CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, id TEXT UNIQUE,
                              type TEXT NOT NULL, parent_id TEXT, timestamp TEXT NOT NULL, data TEXT NOT NULL);
        INSERT INTO sessions VALUES ('0123456789abcdef', '/legacy', '2025-01-01T00:00:00Z', NULL, 1);
        INSERT INTO entries (session_id, id, type, timestamp, data) VALUES ('0123456789abcdef', 'e1', 'message',
          '2025-01-02T00:00:00Z', '{"type":"message","message":{"role":"user","content":"legacy hello"}}');
        """
    )
    conn.commit()
    conn.close()
    code, out, err = run(capsys, "--dir", str(root), "list", "--json")
    assert code == 0
    assert [(d["id"], d["channel_type"], d["preview"]) for d in json.loads(out)] == [
        ("0123456789abcdef", "local", "legacy hello")]
    assert err.startswith("sessionscope: note: ") and err.count("\n") == 1


def test_a_command_runs_with_the_collectors_default_thresholds(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Importing the UI holds young collections back until the app's first paint (tui/__init__.py); a command
    that runs no app puts the defaults back before it works (``serve`` and ``capture`` run for long)."""
    import gc

    import tui

    gc.set_threshold(100_000, *tui._DEFAULT_GC[1:])
    try:
        code, _, _ = run(capsys, "list", "--dir", str(sdir))
        assert code == 0
        assert gc.get_threshold() == tui._DEFAULT_GC
    finally:
        tui.end_startup_gc()
