"""``sessionscope forks`` and the fork / session-management repairs: output, JSON, exit codes, hostile titles."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.mothx.lease_guard import acquire
from store.mothx.lease_model import LeaseOwner
from store.mothx.sessiondir import open_session_dir
from tests.store.fork_support import Built, build
from tui.cli import core

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
           "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d", "pid-4242-[/]", "[bold]x[/bold]",
           "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def built(root: Path) -> Iterator[Built]:
    sd = open_session_dir(root, create=True)
    try:
        yield build(sd, 3, title="Plan")
    finally:
        sd.close()


@pytest.fixture(autouse=True)
def _private_bus_port(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(s.getsockname()[1]))


def cli(*args: str) -> tuple[int, str, str]:
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        code = core.main(list(args))
    return code, o.getvalue(), e.getvalue()


def q(root: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{root / 'sessions.db'}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def test_fork_json_carries_the_fork_result_and_repeats_return_the_same_child(root: Path, built: Built) -> None:
    code, stdout, stderr = cli("--dir", str(root), "repair", "fork", built.session_id, "--at-seq",
                               str(built.final_seqs[1]), "--request-id", "k1", "--yes", "--json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    res = doc["result"]
    assert res["parentSessionId"] == built.session_id and res["forkKind"] == "message"
    assert res["seedLength"] > 0 and res["boundarySeq"] >= built.final_seqs[1] and res["title"] == "Plan (1)"
    assert doc["preview"]["fork"]["seedLength"] == res["seedLength"]
    code, stdout, _ = cli("--dir", str(root), "repair", "fork", built.session_id, "--at-seq", str(built.final_seqs[1]),
                          "--request-id", "k1", "--yes", "--json")
    assert code == 0 and json.loads(stdout)["result"]["sessionId"] == res["sessionId"]
    assert json.loads(stdout)["result"]["reused"] is True
    assert len(q(root, "SELECT id FROM sessions")) == 2
    code, _, stderr = cli("--dir", str(root), "repair", "fork", built.session_id, "--request-id", "k1", "--yes")
    assert code == 3 and "conflicts" in stderr


def test_fork_dry_run_changes_nothing_and_text_output(root: Path, built: Built) -> None:
    before = (root / "sessions.db").read_bytes()
    code, stdout, _ = cli("--dir", str(root), "repair", "fork", built.session_id, "--dry-run")
    assert code == 0 and "Fork a session" in stdout and "Dry run" in stdout and "Plan (1)" in stdout
    assert (root / "sessions.db").read_bytes() == before
    code, stdout, _ = cli("--dir", str(root), "repair", "fork", built.session_id, "--yes")
    assert code == 0 and "Forked session" in stdout


@pytest.mark.parametrize(("args", "code", "words"), [
    (["--at-seq", "1"], 3, "fork boundary is invalid"),
    (["--at-seq", "0"], 2, "not a positive"),
    (["--request-id", "x" * 257], 2, "too long"),
])
def test_fork_bad_arguments_and_refusals(root: Path, built: Built, args: list[str], code: int, words: str) -> None:
    got, _, stderr = cli("--dir", str(root), "repair", "fork", built.session_id, *args, "--yes")
    assert got == code and words in stderr


def test_unknown_session_exits_2(root: Path, built: Built) -> None:
    for args in (["repair", "fork", "ffffffffffffffff", "--yes"], ["repair", "delete-session", "ffffffffffffffff"],
                 ["forks", "ffffffffffffffff"]):
        assert cli("--dir", str(root), *args)[0] == 2


def test_not_confirmed_without_a_terminal(root: Path, built: Built) -> None:
    code, _, stderr = cli("--dir", str(root), "repair", "delete-session", built.session_id)
    assert code == 3 and "confirmation needed" in stderr
    assert q(root, "SELECT COUNT(*) FROM sessions") == [(1,)]


def test_forks_command_text_and_json(root: Path, built: Built) -> None:
    assert cli("--dir", str(root), "repair", "fork", built.session_id, "--yes", "--request-id", "a")[0] == 0
    code, stdout, _ = cli("--dir", str(root), "forks", built.session_id, "--json")
    assert code == 0
    doc = json.loads(stdout)
    assert len(doc["family"]) == 2 and doc["family"][0]["selected"] and len(doc["descendants"]) == 1
    assert [t["valid"] for t in doc["turns"]] == [True, True, True]
    child = doc["descendants"][0]
    code, stdout, _ = cli("--dir", str(root), "forks", child)
    assert code == 0 and "Fork family" in stdout and "valid →" in stdout and "session" in stdout


def test_delete_pin_project_rename(root: Path, built: Built) -> None:
    sid = built.session_id
    assert cli("--dir", str(root), "repair", "pin", sid, "--yes")[0] == 0
    assert q(root, "SELECT pinned FROM session_metadata") == [(1,)]
    assert cli("--dir", str(root), "repair", "pin", sid, "--yes")[0] == 3  # already pinned
    assert cli("--dir", str(root), "repair", "unpin", sid, "--yes")[0] == 0
    assert cli("--dir", str(root), "repair", "project-set", sid, "Research", "--yes")[0] == 0
    assert q(root, "SELECT name FROM projects") == [("Research",)]
    code, stdout, _ = cli("--dir", str(root), "repair", "rename", sid, "Renamed", "--yes", "--json")
    assert code == 0 and json.loads(stdout)["applied"]
    code, stdout, _ = cli("--dir", str(root), "repair", "delete-session", sid, "--dry-run")
    assert code == 0 and "delete  entries" in stdout and "request_stats rows are kept" in stdout
    assert cli("--dir", str(root), "repair", "delete-session", sid, "--yes")[0] == 0
    assert q(root, "SELECT COUNT(*) FROM sessions") == [(0,)] and q(root, "SELECT COUNT(*) FROM entries") == [(0,)]


def test_delete_refused_under_another_lease(root: Path, built: Built) -> None:
    sd = open_session_dir(root)
    guard = acquire(sd, built.session_id, "mutation", owner=LeaseOwner(), ttl=600)
    try:
        before = (root / "sessions.db").read_bytes()
        code, _, stderr = cli("--dir", str(root), "repair", "delete-session", built.session_id, "--yes")
        assert code == 3 and "another owner's valid lease" in stderr
        assert q(root, "SELECT COUNT(*) FROM sessions") == [(1,)]
        del before
    finally:
        guard.release()
        sd.close()


@pytest.mark.parametrize("title", HOSTILE)
def test_hostile_titles_are_shown_safely(root: Path, built: Built, title: str) -> None:
    code, stdout, stderr = cli("--dir", str(root), "repair", "rename", built.session_id, title, "--yes")
    assert not RAW.search(stdout + stderr)
    if title == "\ud83d":  # not a valid argument (exit 2); written into the data as a JSON escape instead
        assert code == 2
        conn = sqlite3.connect(root / "sessions.db")
        with conn:
            conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES "
                         "(?, 'info-x', 'session_info', NULL, 'x', ?)",
                         (built.session_id, '{"type":"session_info","id":"info-x","name":"\\ud83d","source":"manual"}'))
        conn.close()
    else:
        assert code == 0, stderr
    runs = [["repair", "fork", built.session_id, "--dry-run"], ["forks", built.session_id]]
    if title != "\ud83d":
        runs.append(["repair", "project-set", built.session_id, title, "--dry-run"])
    for args in runs:
        code, stdout, stderr = cli("--dir", str(root), *args)
        assert code == 0, stderr
        assert not RAW.search(stdout + stderr)
        if "[" in title and not RAW.search(title) and "fork" in args[1]:
            assert title.split("]")[0] in stdout  # bracketed text shown literally
    code, stdout, _ = cli("--dir", str(root), "repair", "fork", built.session_id, "--yes", "--json")
    assert code == 0 and not RAW.search(stdout)
    assert json.loads(stdout)["result"]["title"].endswith(" (1)")
