"""Arguments of the command line: bytes that are not UTF-8, ``--dir`` forms (empty, missing, a database file
under another name), hostile values in argparse's own errors, and the exit status each gets."""

from __future__ import annotations

import json
import os
import shutil
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
B = "b0b0b0b0b0b00002"
UNSAFE = tuple("\x1b\x07\x9b\u202e") + tuple(chr(c) for c in range(0xD800, 0xE000, 0x37))


def make_dir(root: Path, sid: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, '/w', '2026-03-01T09:00:00Z')", (sid,))
    data = {"type": "message", "id": "e" + sid, "parentId": None, "timestamp": "2026-03-01T09:00:01Z",
            "message": {"role": "user", "content": text}}
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (sid, "e" + sid, "message", None, "2026-03-01T09:00:01Z", json.dumps(data)))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return root


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    return make_dir(tmp_path / "sessions", A, "hello")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    for text in (out, err):
        assert not any(ch in text for ch in UNSAFE) and "Traceback" not in text
    return code, out, err


# ------------------------------------------------------------------------------------------------ not UTF-8


@pytest.mark.parametrize(("argv", "label"), [
    (["show", "a1b2\udcff"], "SESSION_ID"),
    (["runs", "--session", "\udcc3("], "--session"),
    (["list", "--search", "caf\udce9"], "--search"),
    (["repair", "recover-run", "run_\udcff", "--dry-run"], "RUN_ID"),
    (["repair", "release-lease", "a1b2\udcff", "--dry-run"], "SESSION_ID"),
    (["repair", "abandon-tools", A, "turn\udcff", "--dry-run"], "TURN_ID"),
    (["repair", "abandon-tools", A, "t1", "c1", "c\udcff2", "--dry-run"], "CALL_ID"),
    (["checkpoint", "verify", "codex", "\udcff\udcfe"], "SESSION_ID"),
])
def test_arguments_that_are_not_utf8_exit_2_naming_the_argument(
        sdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], label: str) -> None:
    code, out, err = run(capsys, "--dir", str(sdir), *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"sessionscope: {label} is not valid UTF-8: ") and err.count("\n") == 1
    assert "\\udc" in err  # the undecodable byte shown as a visible escape


def test_a_dir_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--dir", str(tmp_path) + "/x\udcff", "list")
    assert code == 2 and err.startswith("sessionscope: --dir is not valid UTF-8: ")


def test_real_process_with_raw_bytes_in_argv(sdir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for argv in ([b"show", b"a1b2\xff"], [b"list", b"--search", b"caf\xe9"], [b"runs", b"--session", b"\xc3("]):
        done = subprocess.run([sys.executable.encode(), b"-m", b"tui.cli", b"--dir", os.fsencode(sdir), *argv],
                              capture_output=True, env=env, timeout=60, cwd=REPO)
        assert done.returncode == 2, done.stderr
        assert done.stdout == b""
        err = done.stderr.decode("utf-8")
        assert err.startswith("sessionscope: ") and "is not valid UTF-8" in err and err.count("\n") == 1
        assert "Traceback" not in err and "\x1b" not in err


# -------------------------------------------------------------------------------------------------- --dir


def test_dir_empty_missing_and_folder_without_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--dir", "", "list")
    assert (code, err) == (2, "sessionscope: --dir needs a path\n")
    code, _, err = run(capsys, "list", "--dir", "   ")
    assert code == 2 and "--dir needs a path" in err
    code, _, err = run(capsys, "--dir", str(tmp_path / "nowhere"), "show", A)
    assert code == 2 and "no such file or folder" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(tmp_path / "nowhere" / "backup.db"), "runs")
    assert code == 2 and "no such file or folder" in err
    code, _, err = run(capsys, "--dir", str(tmp_path / "nowhere"), "checkpoints")
    assert code == 2 and "no such file or folder" in err
    code, _, err = run(capsys, "--dir", "\x1b]0;pwned\x07", "list")
    assert code == 2 and "␛]0;pwned␇" in err
    code, _, err = run(capsys, "--dir", "", "--demo", "list")
    assert code == 2 and "--demo" in err


def test_dir_naming_sessions_db_is_its_folder(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(sdir / "sessions.db"), "list", "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)] == [A]


def test_dir_naming_another_database_file_opens_exactly_that_file(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--dir /p/backup.db`` reads backup.db, never the sessions.db beside it (needs the store to open a
    named database file as it is)."""
    folder = make_dir(tmp_path / "p", A, "the live one")
    other = make_dir(tmp_path / "elsewhere", B, "the backup")
    shutil.copyfile(other / "sessions.db", folder / "backup.db")
    before = (folder / "sessions.db").read_bytes()
    code, out, err = run(capsys, "--read-only", "--dir", str(folder / "backup.db"), "list", "--json")
    assert code == 0, err
    assert [s["id"] for s in json.loads(out)] == [B]
    assert (folder / "sessions.db").read_bytes() == before


# ------------------------------------------------------------------------------------------- argparse errors


def test_argparse_errors_quote_hostile_values_safely(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--dir", str(sdir), "list", "--sort", "\x1b]52;c;aGk=\x07")
    assert code == 2 and "\\x1b]52;c;aGk=\\x07" in err and err.count("\n") == 1   # argparse quotes with repr()
    code, _, err = run(capsys, "--dir", str(sdir), "list", "--limit", "\u202e12")
    assert code == 2 and "\\u202e12" in err
    code, _, err = run(capsys, "--dir", str(sdir), "capture", "gemini\x1b]0;x\x07")
    assert code == 2 and err.count("\n") == 1
    code, _, err = run(capsys, "--dir", str(sdir), "list", "--bogus\x9b")
    assert code == 2 and "\\x9b" in err


def test_export_repaired_missing_input_is_a_bad_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "export-repaired", str(tmp_path / "gone\x1b[2J.jsonl"), str(tmp_path / "out.jsonl"))
    assert code == 2 and out == "" and "no such file" in err and "␛[2J" in err
    assert not (tmp_path / "out.jsonl").exists()
