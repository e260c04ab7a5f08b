"""The database path the user named is the file that opens; anything that is not a database file is refused
before it is opened; the user's own folders come from platformdirs (the XDG variables on Linux)."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import paths
from store.errors import StoreError
from store.mothx.db import OpenMode, open_database
from store.mothx.schema import create_v43
from store.mothx.sessiondir import open_session_dir
from store.paths import (
    DatabaseLocation,
    cache_dir,
    config_dir,
    data_dir,
    default_demo_dir,
    resolve_location,
    resolve_session_dir,
    sessions_db_path,
)

ALL_MODES = tuple(OpenMode)


def make_db(path: Path, session_id: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN")
        create_v43(conn)
        conn.execute("INSERT INTO sessions(id, cwd, timestamp) VALUES (?, '/w', 't')", (session_id,))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path


def ids(path: str | Path, mode: OpenMode) -> tuple[list[str], Path, Path]:
    with open_session_dir(path, mode) as sd:
        with sd.db.read() as conn:
            found = [r[0] for r in conn.execute("SELECT id FROM sessions")]
        return found, sd.db_path, sd.root


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail (instead of waiting forever) if something opens a FIFO."""
    def expired(*_: object) -> None:
        raise AssertionError("the open blocked: a FIFO was opened")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_named_database_file_is_the_one_that_opens(tmp_path: Path, mode: OpenMode) -> None:
    make_db(tmp_path / "sessions.db", "a" * 16)
    backup = make_db(tmp_path / "backup.db", "b" * 16)
    found, db_path, root = ids(backup, mode)
    assert found == ["b" * 16]
    assert db_path == backup and root == tmp_path
    found, db_path, root = ids(tmp_path, mode)
    assert found == ["a" * 16] and db_path == tmp_path / "sessions.db"
    found, db_path, _ = ids(tmp_path / "sessions.db", mode)
    assert found == ["a" * 16] and db_path == tmp_path / "sessions.db"


def test_resolve_keeps_the_named_file(tmp_path: Path) -> None:
    backup = make_db(tmp_path / "backup.db", "b" * 16)
    assert resolve_location(backup) == DatabaseLocation(root=tmp_path, db_file=backup)
    assert resolve_session_dir(backup) == backup and sessions_db_path(backup) == backup
    assert resolve_session_dir(tmp_path / "sessions.db") == tmp_path
    assert sessions_db_path(resolve_session_dir(tmp_path / "sessions.db")) == tmp_path / "sessions.db"
    assert resolve_session_dir(tmp_path) == tmp_path and sessions_db_path(tmp_path) == tmp_path / "sessions.db"
    assert resolve_location(tmp_path / "a" / ".." / "backup.db").db_file == backup
    notes = tmp_path / "notes"  # any file, whatever its name, is the database named
    notes.write_text("hello")
    assert resolve_location(notes).db_file == notes
    assert resolve_location(None).db_file == paths.default_session_dir() / "sessions.db"


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_named_file_that_is_not_a_database(tmp_path: Path, mode: OpenMode) -> None:
    make_db(tmp_path / "sessions.db", "a" * 16)
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n" * 50)
    with pytest.raises(StoreError, match="not a SQLite database"):
        open_session_dir(notes, mode)


@pytest.mark.parametrize("text", ["", " ", "\t\n"])
def test_an_empty_path_is_refused(text: str) -> None:
    with pytest.raises(StoreError, match="empty"):
        resolve_session_dir(text)
    with pytest.raises(StoreError, match="empty"):
        open_session_dir(text, OpenMode.READ_ONLY)


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_missing_named_file_says_so(tmp_path: Path, mode: OpenMode) -> None:
    with pytest.raises(StoreError, match="There is no database file at .*backup.db"):
        open_session_dir(tmp_path / "backup.db", mode)
    with pytest.raises(StoreError, match="There is no sessions.db in"):
        open_session_dir(tmp_path, mode)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path, mode: OpenMode, no_hang: None) -> None:
    os.mkfifo(tmp_path / "sessions.db")
    for target in (tmp_path, tmp_path / "sessions.db"):
        with pytest.raises(StoreError) as info:
            open_session_dir(target, mode)
        assert str(info.value) == f"{tmp_path / 'sessions.db'} is a FIFO, not a database file."
    with pytest.raises(StoreError, match="is a FIFO"):
        resolve_session_dir(tmp_path)
    with pytest.raises(StoreError, match="is a FIFO"):
        open_database(tmp_path / "sessions.db", mode)


def test_a_fifo_named_elsewhere(tmp_path: Path, no_hang: None) -> None:
    os.mkfifo(tmp_path / "pipe.db")
    with pytest.raises(StoreError, match="pipe.db is a FIFO, not a database file"):
        open_session_dir(tmp_path / "pipe.db", OpenMode.READ_ONLY)


def test_a_socket_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a socket path must be short
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("sessions.db")
        with pytest.raises(StoreError, match="sessions.db is a socket, not a database file"):
            open_session_dir(tmp_path, OpenMode.READ_WRITE)
    finally:
        sock.close()


def test_a_device_is_refused(tmp_path: Path) -> None:
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    (tmp_path / "sessions.db").symlink_to("/dev/null")
    with pytest.raises(StoreError, match="sessions.db is a character device, not a database file"):
        open_session_dir(tmp_path, OpenMode.READ_ONLY)


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_folder_where_the_database_should_be(tmp_path: Path, mode: OpenMode) -> None:
    (tmp_path / "sessions.db").mkdir()
    for target in (tmp_path, tmp_path / "sessions.db"):
        with pytest.raises(StoreError) as info:
            open_session_dir(target, mode, create=True)
        assert str(info.value) == f"{tmp_path / 'sessions.db'} is a folder, not a database file."
    assert list((tmp_path / "sessions.db").iterdir()) == []


def test_permission_denied_on_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "locked" / "sessions.db"
    real_stat = os.stat

    def fake_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if Path(str(path)) == target:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", fake_stat)
    with pytest.raises(StoreError, match="permission denied"):
        open_session_dir(tmp_path / "locked", OpenMode.READ_ONLY)


def test_permission_denied_on_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db_file = make_db(tmp_path / "sessions.db", "a" * 16)
    real_open = os.open

    def fake_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if Path(str(path)) == db_file:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", fake_open)
    with pytest.raises(StoreError) as info:
        open_session_dir(tmp_path, OpenMode.READ_ONLY)
    assert str(info.value) == f"{db_file} cannot be read: permission denied."


# --- the user's folders ------------------------------------------------------------------------------------


def test_user_folders_follow_the_xdg_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "g"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "d"))
    assert cache_dir() == tmp_path / "c" / "sessionscope"
    assert config_dir() == tmp_path / "g" / "sessionscope"
    assert data_dir() == tmp_path / "d" / "sessionscope"
    assert default_demo_dir() == tmp_path / "c" / "sessionscope" / "demo" / "sessions"


def test_user_folders_default_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(name, "  ")  # blank: ignored
    assert cache_dir() == tmp_path / ".cache" / "sessionscope"
    assert config_dir() == tmp_path / ".config" / "sessionscope"
    assert data_dir() == tmp_path / ".local" / "share" / "sessionscope"


def test_user_folders_for_another_environment(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "h"), "XDG_CACHE_HOME": str(tmp_path / "c"), "XDG_CONFIG_HOME": "relative/x"}
    assert cache_dir(env) == tmp_path / "c" / "sessionscope"
    assert config_dir(env) == tmp_path / "h" / ".config" / "sessionscope"  # a relative XDG path is ignored
    assert data_dir(env) == tmp_path / "h" / ".local" / "share" / "sessionscope"
    assert default_demo_dir(env) == tmp_path / "c" / "sessionscope" / "demo" / "sessions"
    assert paths.default_session_dir({"MOTHX_DIR": str(tmp_path / "m")}) == tmp_path / "m" / "sessions"
