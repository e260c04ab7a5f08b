"""Open modes as a user hits them: settings of a read-write open, read modes that never change a byte,
and one clear error for every kind of broken input."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from store.errors import DatabaseCorrupt, ReadOnlyStore, SchemaIncompatible, StoreError
from store.mothx.db import OpenMode, open_database
from store.mothx.schema import CURRENT_VERSION, MIGRATIONS
from store.mothx.sessiondir import SessionDir, open_session_dir

BASE_ID = "a" * 16
WAL_ID = "b" * 16
LATE_ID = "c" * 16
READ_MODES = (OpenMode.READ_ONLY, OpenMode.SNAPSHOT)


def folder_state(folder: Path) -> dict[str, str]:
    """Every file and folder below ``folder``: relative path -> sha256 (``<dir>`` for folders)."""
    state: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        state[rel] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def insert_session_sql(session_id: str) -> str:
    return (
        "INSERT INTO sessions(id, cwd, timestamp) "
        f"VALUES ('{session_id}', '/work', '2026-11-20T12:00:00Z')"
    )


def session_ids(sd: SessionDir) -> set[str]:
    with sd.db.read() as conn:
        return {r[0] for r in conn.execute("SELECT id FROM sessions")}


def make_session_dir(root: Path) -> Path:
    """A v43 session directory with one session, closed cleanly (a WAL database without companions)."""
    with open_session_dir(root, create=True) as sd:
        with sd.db.write() as conn:
            conn.execute(insert_session_sql(BASE_ID))
            conn.execute(
                "INSERT INTO entries(session_id, id, type, timestamp, data) "
                f"VALUES ('{BASE_ID}', '0000000000000001', 'message', '2026-11-20T12:00:00Z', '{{}}')"
            )
    return root


WRITER_SCRIPT = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA wal_autocheckpoint=0")
print("ready", flush=True)
for line in sys.stdin:
    sql = line.strip()
    if sql == "quit":
        break
    conn.execute(sql)
    print("ok", flush=True)
conn.close()
"""


class LiveWriter:
    """Another process (as mothx would be) holding the database open in WAL mode, never checkpointing."""

    def __init__(self, db_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER_SCRIPT, str(db_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._reply() == "ready"

    def _reply(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def execute(self, sql: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(sql + "\n")
        self.proc.stdin.flush()
        assert self._reply() == "ok", "the writer process failed"

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)


@pytest.fixture
def live_writer_dir(tmp_path: Path) -> Iterator[tuple[Path, LiveWriter]]:
    """A session dir whose writer is live: one row committed only in the -wal, -shm held by the writer."""
    root = make_session_dir(tmp_path / "live")
    writer = LiveWriter(root / "sessions.db")
    try:
        writer.execute(insert_session_sql(WAL_ID))
        yield root, writer
    finally:
        writer.close()


def main_file_ids(db_path: Path) -> set[str]:
    """Session ids stored in the main database file alone (``immutable=1`` ignores the -wal)."""
    conn = sqlite3.connect(f"file:{db_path}?immutable=1", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT id FROM sessions")}
    finally:
        conn.close()


def assert_refuses_writes(sd: SessionDir) -> None:
    with pytest.raises(ReadOnlyStore):
        with sd.db.write() as conn:
            conn.execute(insert_session_sql("d" * 16))
    with pytest.raises(ReadOnlyStore):
        sd.require_writable()
    with pytest.raises(ReadOnlyStore):
        with sd.db.read() as conn:
            conn.execute(insert_session_sql("e" * 16))
    assert not sd.writable


def assert_one_sentence(err: BaseException) -> None:
    text = str(err)
    assert text and "\n" not in text and "Traceback" not in text
    assert text.rstrip().endswith(".")


# --- read-write -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pragmas:
    journal_mode: str
    foreign_keys: int
    busy_timeout: int
    synchronous: int


def pragmas(sd: SessionDir) -> Pragmas:
    conn = sd.db.conn
    return Pragmas(
        journal_mode=conn.execute("PRAGMA journal_mode").fetchone()[0],
        foreign_keys=conn.execute("PRAGMA foreign_keys").fetchone()[0],
        busy_timeout=conn.execute("PRAGMA busy_timeout").fetchone()[0],
        synchronous=conn.execute("PRAGMA synchronous").fetchone()[0],
    )


def test_read_write_create_makes_a_current_v43_database(tmp_path: Path) -> None:
    root = tmp_path / "new" / "sessions"
    with open_session_dir(root, create=True) as sd:
        assert sd.mode is OpenMode.READ_WRITE
        assert sd.schema.status == "current"
        assert sd.schema.version == CURRENT_VERSION == 43
        assert sd.writable and sd.notices == []
        with sd.db.read() as conn:
            rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
            stamps = [r[0] for r in conn.execute("SELECT applied_at FROM schema_migrations")]
        assert rows == list(MIGRATIONS)
        assert all(len(s) == 19 for s in stamps)  # CURRENT_TIMESTAMP: YYYY-MM-DD HH:MM:SS
        # NORMAL is 1; foreign keys stay off for sessions.db on purpose.
        assert pragmas(sd) == Pragmas(journal_mode="wal", foreign_keys=0, busy_timeout=10000, synchronous=1)
    assert (root / "sessions.db").is_file()


def test_synchronous_full_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOTHX_SQLITE_SYNCHRONOUS", "FULL")
    with open_session_dir(tmp_path / "s", create=True) as sd:
        assert pragmas(sd).synchronous == 2  # FULL


def test_read_write_reopen_keeps_the_database(tmp_path: Path) -> None:
    root = make_session_dir(tmp_path / "s")
    with open_session_dir(root) as sd:
        assert session_ids(sd) == {BASE_ID}
        with sd.db.write() as conn:
            conn.execute(insert_session_sql(WAL_ID))
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        assert session_ids(sd) == {BASE_ID, WAL_ID}


def test_knowledge_base_files_open_with_foreign_keys_on(tmp_path: Path) -> None:
    db = open_database(tmp_path / "kb.db", OpenMode.READ_WRITE, create=True, foreign_keys=True)
    try:
        assert db.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        db.close()


def test_a_failed_write_rolls_back(tmp_path: Path) -> None:
    root = make_session_dir(tmp_path / "s")
    with open_session_dir(root) as sd:
        with pytest.raises(StoreError):
            with sd.db.write() as conn:
                conn.execute(insert_session_sql(WAL_ID))
                conn.execute(insert_session_sql(WAL_ID))  # duplicate primary key
        assert session_ids(sd) == {BASE_ID}


# --- read modes never change a byte -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", READ_MODES, ids=lambda m: m.value)
def test_read_mode_on_a_cleanly_closed_wal_database(tmp_path: Path, mode: OpenMode) -> None:
    root = make_session_dir(tmp_path / "s")
    assert sorted(p.name for p in root.iterdir()) == ["sessions.db"]
    before = folder_state(root)
    with open_session_dir(root, mode) as sd:
        assert sd.mode is mode
        assert session_ids(sd) == {BASE_ID}
        assert_refuses_writes(sd)
        assert sd.db.quick_check() == "ok"
        assert folder_state(root) == before
    assert folder_state(root) == before


@pytest.mark.parametrize("mode", READ_MODES, ids=lambda m: m.value)
def test_read_mode_with_a_live_writer_sees_rows_only_in_the_wal(
    live_writer_dir: tuple[Path, LiveWriter], mode: OpenMode
) -> None:
    root, writer = live_writer_dir
    db_path = root / "sessions.db"
    assert {p.name for p in root.iterdir()} == {"sessions.db", "sessions.db-wal", "sessions.db-shm"}
    assert WAL_ID not in main_file_ids(db_path)  # the row really is only in the -wal
    before = folder_state(root)

    sd = open_session_dir(root, mode)
    try:
        assert session_ids(sd) == {BASE_ID, WAL_ID}
        if mode is OpenMode.SNAPSHOT:
            assert sd.db.private_copy is not None  # immutable=1 would have lost the -wal rows
        assert_refuses_writes(sd)
        assert folder_state(root) == before

        # The writer goes on committing while we look; only a live read-only view follows it.
        writer.execute(insert_session_sql(LATE_ID))
        after_writer = folder_state(root)
        seen = session_ids(sd)
        if mode is OpenMode.READ_ONLY:
            assert seen == {BASE_ID, WAL_ID, LATE_ID}
        else:
            assert seen == {BASE_ID, WAL_ID}
        assert folder_state(root) == after_writer
        private = sd.db.private_copy
    finally:
        sd.close()
    assert folder_state(root) == after_writer
    if private is not None:
        assert not private.exists()


def copy_of_live_dir(live: tuple[Path, LiveWriter], target: Path, names: tuple[str, ...]) -> Path:
    root, _writer = live
    target.mkdir()
    for name in names:
        shutil.copy2(root / name, target / name)
    return target


@pytest.mark.parametrize("mode", READ_MODES, ids=lambda m: m.value)
@pytest.mark.parametrize(
    "names",
    [("sessions.db", "sessions.db-wal"), ("sessions.db", "sessions.db-wal", "sessions.db-shm")],
    ids=["wal-without-shm", "wal-and-shm"],
)
def test_read_mode_on_a_copied_folder_with_a_wal(
    live_writer_dir: tuple[Path, LiveWriter], tmp_path: Path, mode: OpenMode, names: tuple[str, ...]
) -> None:
    copy = copy_of_live_dir(live_writer_dir, tmp_path / "copy", names)
    live_writer_dir[1].close()  # the copy has no writer any more
    assert WAL_ID not in main_file_ids(copy / "sessions.db")
    before = folder_state(copy)
    sd = open_session_dir(copy, mode)
    try:
        assert session_ids(sd) == {BASE_ID, WAL_ID}
        if mode is OpenMode.SNAPSHOT:
            assert sd.db.private_copy is not None
        assert_refuses_writes(sd)
        assert folder_state(copy) == before
        private = sd.db.private_copy
    finally:
        sd.close()
    assert folder_state(copy) == before
    if private is not None:
        assert not private.exists()


# --- broken inputs: one clear error, nothing written ------------------------------------------------------

ALL_MODES = tuple(OpenMode)


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_text_file_named_sessions_db(tmp_path: Path, mode: OpenMode) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "sessions.db").write_text("these are my notes, not a database\n" * 20)
    before = folder_state(root)
    with pytest.raises(DatabaseCorrupt) as info:
        open_session_dir(root, mode)
    assert_one_sentence(info.value)
    assert "not a SQLite database" in str(info.value)
    assert folder_state(root) == before


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_truncated_database(tmp_path: Path, mode: OpenMode) -> None:
    source = make_session_dir(tmp_path / "source")
    with open_session_dir(source) as sd:
        with sd.db.write() as conn:
            conn.executemany(
                "INSERT INTO entries(session_id, id, type, timestamp, data) VALUES (?, ?, 'message', 't', ?)",
                [(BASE_ID, f"{n:016x}", "x" * 500) for n in range(2, 400)],
            )
    data = (source / "sessions.db").read_bytes()
    root = tmp_path / "s"
    root.mkdir()
    (root / "sessions.db").write_bytes(data[: len(data) // 2])
    before = folder_state(root)
    with pytest.raises(DatabaseCorrupt) as info:
        open_session_dir(root, mode)
    assert_one_sentence(info.value)
    assert folder_state(root) == before


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_zero_byte_file(tmp_path: Path, mode: OpenMode) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "sessions.db").write_bytes(b"")
    with pytest.raises(StoreError) as info:
        open_session_dir(root, mode)
    assert_one_sentence(info.value)
    assert "not a mothx session database" in str(info.value)
    assert folder_state(root) == {"sessions.db": hashlib.sha256(b"").hexdigest()}


def test_a_zero_byte_file_is_made_a_database_only_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "sessions.db").write_bytes(b"")
    with open_session_dir(root, create=True) as sd:
        assert sd.schema.status == "current"


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_folder_without_sessions_db(tmp_path: Path, mode: OpenMode) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "notes.txt").write_text("hello")
    before = folder_state(root)
    with pytest.raises(StoreError) as info:
        open_session_dir(root, mode)
    assert_one_sentence(info.value)
    assert "no sessions.db" in str(info.value)
    assert folder_state(root) == before


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_missing_folder_is_not_created(tmp_path: Path, mode: OpenMode) -> None:
    root = tmp_path / "nowhere" / "sessions"
    with pytest.raises(StoreError) as info:
        open_session_dir(root, mode)
    assert_one_sentence(info.value)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("mode", ALL_MODES, ids=lambda m: m.value)
def test_a_sqlite_file_that_is_not_a_session_database(tmp_path: Path, mode: OpenMode) -> None:
    root = tmp_path / "s"
    root.mkdir()
    conn = sqlite3.connect(root / "sessions.db")
    conn.execute("CREATE TABLE recipes (name TEXT, steps TEXT)")
    conn.execute("INSERT INTO recipes VALUES ('bread', 'knead')")
    conn.commit()
    conn.close()
    before = folder_state(root)
    with pytest.raises(SchemaIncompatible) as info:
        open_session_dir(root, mode)
    assert_one_sentence(info.value)
    assert "sessions/entries" in str(info.value)
    assert folder_state(root) == before  # not even switched to WAL


def test_a_folder_given_as_the_database(tmp_path: Path) -> None:
    (tmp_path / "sessions.db").mkdir()
    with pytest.raises(StoreError) as info:
        open_database(tmp_path / "sessions.db", OpenMode.READ_ONLY)
    assert_one_sentence(info.value)


# --- a read-write open of a file the user cannot write ----------------------------------------------------


def test_read_write_open_of_an_unwritable_file_falls_back_to_read_only(tmp_path: Path) -> None:
    root = make_session_dir(tmp_path / "s")
    db_path = root / "sessions.db"
    db_path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        if os.access(db_path, os.W_OK):
            pytest.skip("chmod does not stop this user from writing (running as root)")
        before = folder_state(root)
        with open_session_dir(root, OpenMode.READ_WRITE) as sd:
            assert sd.mode is OpenMode.READ_ONLY
            assert any("not writable" in n for n in sd.notices)
            assert session_ids(sd) == {BASE_ID}
            assert_refuses_writes(sd)
        assert folder_state(root) == before
    finally:
        db_path.chmod(stat.S_IRUSR | stat.S_IWUSR)


@pytest.mark.parametrize("denied", ["file", "folder"])
def test_read_write_fallback_when_access_is_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, denied: str
) -> None:
    """The same fallback, with os.access reporting no write permission (works for root too)."""
    root = make_session_dir(tmp_path / "s")
    target = root / "sessions.db" if denied == "file" else root
    real_access = os.access

    def access(path: object, mode: int, *args: object, **kwargs: object) -> bool:
        if mode & os.W_OK and Path(str(path)).absolute() == target.absolute():
            return False
        return real_access(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    before = folder_state(root)
    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        assert sd.mode is OpenMode.READ_ONLY
        assert sd.notices and "not writable" in sd.notices[0]
        assert session_ids(sd) == {BASE_ID}
        assert_refuses_writes(sd)
        assert folder_state(root) == before
    assert folder_state(root) == before


def test_an_open_that_races_a_wal_index_rebuild_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3 as sqlite

    import store.mothx.db as db_mod

    path = tmp_path / "race.db"
    db_mod.open_database(path, db_mod.OpenMode.READ_WRITE, create=True).close()
    real = db_mod._apply_pragmas
    failures = [2]

    def racing(*args: object, **kwargs: object) -> None:
        if failures[0]:
            failures[0] -= 1
            raise sqlite.OperationalError("locking protocol")
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(db_mod, "_apply_pragmas", racing)
    db_mod.open_database(path, db_mod.OpenMode.READ_WRITE).close()        # two races, then it opens
    assert failures == [0]
    failures[0] = db_mod.PROTOCOL_RETRIES + 1
    with pytest.raises(StoreError, match="locking protocol"):           # a race that never ends is one error
        db_mod.open_database(path, db_mod.OpenMode.READ_WRITE)
