"""Read modes never write, on any database; a read-write open never switches a rollback-journal database to WAL
unless a write of ours commits, and never destroys a ``-wal`` / ``-journal`` it did not create."""

from __future__ import annotations

import hashlib
import multiprocessing
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store.errors import DatabaseCorrupt, ReadOnlyStore, RepairRefused, StoreError
from store.mothx.db import Database, OpenMode, open_database
from store.mothx.db_errors import describe_sqlite_error, is_busy
from store.mothx.db_files import journal_problem, wal_problem
from store.mothx.schema import create_v43
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.sessions import list_sessions, release
from store.safetext import safe

SESSION_ID = "0123456789abcdef"
OTHER_ID = "fedcba9876543210"
READ_MODES = (OpenMode.READ_ONLY, OpenMode.SNAPSHOT)
COMPANIONS = ("sessions.db-wal", "sessions.db-shm", "sessions.db-journal")


def folder_state(folder: Path) -> dict[str, str]:
    """Every file below ``folder``: relative path -> sha256 (``<dir>`` for folders)."""
    return {
        str(p.relative_to(folder)): "<dir>" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
    }


def build(root: Path, *, journal: str = "delete", steps: tuple[str, ...] = ()) -> Path:
    """A v43 session directory made raw with the reference DDL, in journal mode ``journal``; ``steps`` applied."""
    root.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        assert conn.execute(f"PRAGMA journal_mode = {journal}").fetchone()[0] == journal
        conn.execute("BEGIN")
        create_v43(conn)
        conn.execute("INSERT INTO sessions(id, cwd, timestamp) VALUES (?, '/work', '2026-01-02T03:04:05Z')",
                     (SESSION_ID,))
        conn.executemany(
            "INSERT INTO entries(session_id, id, type, timestamp, data) VALUES (?, ?, 'message', ?, ?)",
            [(SESSION_ID, f"{n:016x}", "2026-01-02T03:04:05Z", '{"role": "user", "content": "hi"}')
             for n in range(1, 40)],
        )
        for step in steps:
            conn.execute(step)
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert sorted(p.name for p in root.iterdir()) == ["sessions.db"]
    return root


NEWER = ("INSERT INTO schema_migrations(version, name) VALUES (47, 'add_something_later')",
         "CREATE TABLE worktrees (id TEXT PRIMARY KEY)")


def older_steps() -> tuple[str, ...]:
    from tests.store.test_schema import v29_steps

    return tuple(v29_steps())


def header_mode(db_file: Path) -> tuple[int, int]:
    head = db_file.read_bytes()[:20]
    return head[18], head[19]


def browse(sd: SessionDir) -> None:
    """What a user does on a directory: the list (through its cache), a session's entries, a quick check."""
    with sd.db.read() as conn:
        assert conn.execute("SELECT id FROM sessions").fetchall() == [(SESSION_ID,)]
        assert conn.execute("SELECT count(*) FROM entries WHERE session_id = ?", (SESSION_ID,)).fetchone()[0] == 39
    page = list_sessions(sd)
    assert [row.id for row in page.rows] == [SESSION_ID]
    assert sd.db.quick_check() == "ok"
    release(sd)


def open_browse_close(root: Path, mode: OpenMode) -> SessionDir:
    sd = open_session_dir(root, mode)
    try:
        browse(sd)
        if mode.is_read:
            with pytest.raises(ReadOnlyStore):
                with sd.db.write():
                    pass
    finally:
        sd.close()
    return sd


# --- read modes: every file byte-identical, no file created --------------------------------------------------


def _delete_journal(root: Path) -> None:
    build(root)


def _wal_empty_shm(root: Path) -> None:
    build(root, journal="wal")
    (root / "sessions.db-shm").write_bytes(b"")


def _wal_garbage_shm(root: Path) -> None:
    build(root, journal="wal")
    (root / "sessions.db-shm").write_bytes(b"\xffgarbage" * 4096)


def _wal_stale_shm(root: Path) -> None:
    """A real -shm of a writer that is gone, its -wal already checkpointed and deleted."""
    build(root, journal="wal")
    conn = sqlite3.connect(root / "sessions.db", isolation_level=None)
    conn.execute("INSERT INTO sessions(id, cwd, timestamp) VALUES ('x', '/x', 't')")
    conn.execute("DELETE FROM sessions WHERE id = 'x'")
    shm = (root / "sessions.db-shm").read_bytes()
    conn.close()
    (root / "sessions.db-shm").write_bytes(shm)
    assert not (root / "sessions.db-wal").exists()


def _delete_stale_shm(root: Path) -> None:
    build(root)
    (root / "sessions.db-shm").write_bytes(b"\x00" * 32768)


def _newer_delete(root: Path) -> None:
    build(root, steps=NEWER)


def _newer_wal(root: Path) -> None:
    build(root, journal="wal", steps=NEWER)


def _older_delete(root: Path) -> None:
    build(root, steps=older_steps())


def _older_wal(root: Path) -> None:
    build(root, journal="wal", steps=older_steps())


CASES: dict[str, Callable[[Path], None]] = {
    "delete-journal": _delete_journal,
    "wal-empty-shm-no-wal": _wal_empty_shm,
    "wal-garbage-shm-no-wal": _wal_garbage_shm,
    "wal-stale-shm-no-wal": _wal_stale_shm,
    "delete-journal-stale-shm": _delete_stale_shm,
    "newer-schema-delete-journal": _newer_delete,
    "newer-schema-wal": _newer_wal,
    "older-schema-delete-journal": _older_delete,
    "older-schema-wal": _older_wal,
}


def _browse_any_layout(sd: SessionDir) -> None:
    with sd.db.read() as conn:
        assert conn.execute("SELECT id FROM sessions").fetchall() == [(SESSION_ID,)]
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 39
    assert [row.id for row in list_sessions(sd).rows] == [SESSION_ID]
    assert sd.db.quick_check() == "ok"
    release(sd)


@pytest.mark.parametrize("mode", READ_MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("case", list(CASES))
def test_read_mode_changes_nothing(tmp_path: Path, case: str, mode: OpenMode) -> None:
    root = tmp_path / "s"
    CASES[case](root)
    before = folder_state(root)
    sd = open_session_dir(root, mode)
    try:
        assert sd.mode is mode and not sd.writable
        _browse_any_layout(sd)
        assert folder_state(root) == before
    finally:
        sd.close()
    assert folder_state(root) == before


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith(("newer", "older"))])
def test_read_write_open_of_a_layout_shown_read_only_changes_nothing(tmp_path: Path, case: str) -> None:
    """A newer or older schema is shown read-only: the connection is read-only at the SQLite level too."""
    root = tmp_path / "s"
    CASES[case](root)
    before = folder_state(root)
    sd = open_session_dir(root, OpenMode.READ_WRITE)
    try:
        assert sd.mode is OpenMode.READ_WRITE and not sd.writable
        assert sd.db.mode.is_read
        _browse_any_layout(sd)
        with pytest.raises(ReadOnlyStore):
            sd.require_writable()
        with pytest.raises(ReadOnlyStore):
            with sd.db.write():
                pass
    finally:
        sd.close()
    assert folder_state(root) == before


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    made: list[Path] = []

    def lock(root: Path) -> None:
        for p in root.iterdir():
            p.chmod(stat.S_IRUSR | stat.S_IRGRP)
        root.chmod(stat.S_IRUSR | stat.S_IXUSR)
        made.append(root)

    yield lock
    for root in made:
        root.chmod(stat.S_IRWXU)
        for p in root.iterdir():
            p.chmod(stat.S_IRUSR | stat.S_IWUSR)


@pytest.mark.parametrize("mode", READ_MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_read_mode_in_a_read_only_folder(tmp_path: Path, read_only_folder: Callable[[Path], None],
                                         mode: OpenMode, journal: str) -> None:
    """(Running as root the permissions do not stop a write: the digests still prove none happened.)"""
    root = build(tmp_path / "s", journal=journal)
    read_only_folder(root)
    before = folder_state(root)
    open_browse_close(root, mode)
    assert folder_state(root) == before


# --- read-write: the file's own journal mode until a write of ours commits ----------------------------------


def test_read_write_open_read_and_rolled_back_write_leave_a_delete_journal_database_alone(tmp_path: Path) -> None:
    root = build(tmp_path / "s")
    db_file = root / "sessions.db"
    before = folder_state(root)
    assert header_mode(db_file) == (1, 1)
    sd = open_session_dir(root, OpenMode.READ_WRITE)
    try:
        assert sd.writable and sd.db.journal_mode == "delete"
        browse(sd)
        with pytest.raises(RuntimeError):
            with sd.db.write():
                raise RuntimeError("changed my mind")
        with pytest.raises(RepairRefused):  # a repair whose fence fails after it started writing
            with sd.db.write() as conn:
                conn.execute("UPDATE sessions SET cwd = '/elsewhere'")
                conn.execute("DELETE FROM entries")
                raise RepairRefused("the fence moved")
        assert sd.db.journal_mode == "delete"
        assert folder_state(root) == before
    finally:
        sd.close()
    assert folder_state(root) == before
    assert header_mode(db_file) == (1, 1)


def test_the_first_committed_write_switches_to_wal(tmp_path: Path) -> None:
    root = build(tmp_path / "s")
    db_file = root / "sessions.db"
    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        with sd.db.write() as conn:
            conn.execute("INSERT INTO sessions(id, cwd, timestamp) VALUES (?, '/w', 't')", (OTHER_ID,))
        assert sd.db.journal_mode == "wal" and sd.db.access == "wal"
        with sd.db.write() as conn:
            conn.execute("UPDATE sessions SET cwd = '/v' WHERE id = ?", (OTHER_ID,))
    assert header_mode(db_file) == (2, 2)
    assert not (root / "sessions.db-journal").exists()
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        with sd.db.read() as conn:
            assert conn.execute("SELECT cwd FROM sessions WHERE id = ?", (OTHER_ID,)).fetchone() == ("/v",)


def test_a_new_database_is_wal_from_the_start(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "new", create=True) as sd:
        assert sd.db.journal_mode == "wal"
    assert header_mode(tmp_path / "new" / "sessions.db") == (2, 2)


# --- read-write never destroys companions it did not create -------------------------------------------------


def garbage_wal(root: Path) -> None:
    (root / "sessions.db-wal").write_bytes(b"this is not a write-ahead log\n" * 10)


def short_wal(root: Path) -> None:
    (root / "sessions.db-wal").write_bytes(b"\x37\x7f\x06\x82")


def foreign_wal(root: Path) -> None:
    """A real WAL, of a database with another page size."""
    other = root.parent / "other"
    other.mkdir()
    conn = sqlite3.connect(other / "o.db", isolation_level=None)
    conn.execute("PRAGMA page_size = 8192")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("INSERT INTO t VALUES (1)")
    shutil.copy2(other / "o.db-wal", root / "sessions.db-wal")
    conn.close()


def garbage_journal(root: Path) -> None:
    (root / "sessions.db-journal").write_bytes(b"notes\n" * 200)


def zeroed_journal(root: Path) -> None:
    (root / "sessions.db-journal").write_bytes(b"\x00" * 4096)


def empty_journal(root: Path) -> None:
    (root / "sessions.db-journal").write_bytes(b"")


BAD_COMPANIONS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "garbage-wal-wal-db": ("wal", garbage_wal),
    "garbage-wal-delete-db": ("delete", garbage_wal),
    "short-wal": ("wal", short_wal),
    "wal-of-another-page-size": ("wal", foreign_wal),
    "garbage-journal-delete-db": ("delete", garbage_journal),
    "garbage-journal-wal-db": ("wal", garbage_journal),
    "zeroed-journal": ("delete", zeroed_journal),
    "empty-journal": ("delete", empty_journal),
}


@pytest.mark.parametrize("case", list(BAD_COMPANIONS))
def test_read_write_open_refuses_a_companion_it_would_destroy(tmp_path: Path, case: str) -> None:
    journal, make = BAD_COMPANIONS[case]
    root = build(tmp_path / "s", journal=journal)
    make(root)
    before = folder_state(root)
    with pytest.raises(StoreError) as info:
        open_session_dir(root, OpenMode.READ_WRITE)
    text = str(info.value)
    companion = next(n for n in COMPANIONS if (root / n).exists())
    assert str(root / companion) in text
    assert "Move it aside" in text and "--read-only" in text and "--snapshot" in text
    assert "\n" not in text
    assert folder_state(root) == before
    # The same files open read-only and as a snapshot (as SQLite reads them: a WAL of another database
    # shows that database), still untouched.
    for mode in READ_MODES:
        try:
            with open_session_dir(root, mode) as sd:
                with sd.db.read() as conn:
                    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except StoreError:
            assert case == "wal-of-another-page-size"
        assert folder_state(root) == before


HOT_JOURNAL_WRITER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE entries SET data = zeroblob(3000)")
print("ready", flush=True)
sys.stdin.readline()
"""


def test_a_hot_journal_is_rolled_back_by_a_read_write_open(tmp_path: Path) -> None:
    """A crashed rollback-journal writer left a hot journal: SQLite's own recovery plays it back."""
    source = build(tmp_path / "source")
    proc = subprocess.Popen([sys.executable, "-c", HOT_JOURNAL_WRITER, str(source / "sessions.db")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        root = tmp_path / "s"
        root.mkdir()
        for name in ("sessions.db", "sessions.db-journal"):
            shutil.copy2(source / name, root / name)  # as a crash leaves them
    finally:
        proc.kill()
        proc.wait(timeout=30)
    page_size = int.from_bytes((root / "sessions.db").read_bytes()[16:18], "big")
    assert journal_problem((root / "sessions.db-journal").read_bytes()[:32], page_size) == ""
    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        with sd.db.read() as conn:
            assert conn.execute("SELECT count(*) FROM entries WHERE data LIKE '{%'").fetchone() == (39,)
    assert not (root / "sessions.db-journal").exists()


def test_a_live_writers_wal_is_valid(tmp_path: Path) -> None:
    root = build(tmp_path / "s", journal="wal")
    writer = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO sessions(id, cwd, timestamp) VALUES (?, '/w', 't')", (OTHER_ID,))
        head = (root / "sessions.db-wal").read_bytes()[:32]
        assert wal_problem(head, 4096) == ""
        assert "page size" in wal_problem(head, 8192)
        assert wal_problem(b"", 4096) == ""
        with open_session_dir(root, OpenMode.READ_WRITE) as sd:
            with sd.db.read() as conn:
                assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)
    finally:
        writer.close()


def test_knowledge_base_open_refuses_a_garbage_wal_too(tmp_path: Path) -> None:
    db = open_database(tmp_path / "kb.db", OpenMode.READ_WRITE, create=True, foreign_keys=True)
    db.close()
    (tmp_path / "kb.db-wal").write_bytes(b"x" * 100)
    with pytest.raises(StoreError, match="kb.db-wal"):
        open_database(tmp_path / "kb.db", OpenMode.READ_WRITE)
    assert (tmp_path / "kb.db-wal").read_bytes() == b"x" * 100


# --- invalid UTF-8 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", tuple(OpenMode), ids=lambda m: m.value)
def test_invalid_utf8_text_reads_losslessly(tmp_path: Path, mode: OpenMode) -> None:
    root = build(tmp_path / "s", journal="wal", steps=(
        f"UPDATE sessions SET cwd = CAST(x'ff41' AS TEXT) WHERE id = '{SESSION_ID}'",
        "UPDATE entries SET id = CAST(x'ff41' AS TEXT) WHERE seq = 1",
    ))
    with open_session_dir(root, mode) as sd:
        with sd.db.read() as conn:
            cwd = conn.execute("SELECT cwd FROM sessions").fetchone()[0]
            ids = [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY seq")]
        assert cwd == "\udcffA"
        assert cwd.encode("utf-8", "surrogateescape") == b"\xffA"
        assert ids[0] == "\udcffA" and len(ids) == 39
        assert safe(cwd) == "\\udcffA"


# --- errors classified by their SQLite name --------------------------------------------------------------


def test_errors_are_classified_by_name_not_by_message(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(corrupt TEXT UNIQUE)")
    conn.execute("INSERT INTO t VALUES ('a')")
    with pytest.raises(sqlite3.IntegrityError) as info:
        conn.execute("INSERT INTO t VALUES ('a')")  # "UNIQUE constraint failed: t.corrupt"
    err = describe_sqlite_error(tmp_path / "x.db", info.value)
    assert "corrupt" in str(info.value) and type(err) is StoreError

    (tmp_path / "bad.db").write_bytes(b"x" * 8192)
    with pytest.raises(sqlite3.DatabaseError) as bad:
        sqlite3.connect(tmp_path / "bad.db").execute("SELECT * FROM sqlite_master")
    assert bad.value.sqlite_errorname == "SQLITE_NOTADB"
    assert isinstance(describe_sqlite_error(tmp_path / "bad.db", bad.value), DatabaseCorrupt)

    ro = sqlite3.connect(f"file:{tmp_path / 'ro.db'}?mode=rwc", uri=True)
    ro.execute("CREATE TABLE t(x)")
    ro.close()
    ro = sqlite3.connect(f"file:{tmp_path / 'ro.db'}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as denied:
        ro.execute("INSERT INTO t VALUES (1)")
    assert isinstance(describe_sqlite_error(tmp_path / "ro.db", denied.value), ReadOnlyStore)

    named = sqlite3.OperationalError("database is locked")
    named.sqlite_errorname = "SQLITE_BUSY"
    assert is_busy(named) and "is busy" in str(describe_sqlite_error(tmp_path / "x.db", named))
    misleading = sqlite3.OperationalError("no such table: locked_busy")
    misleading.sqlite_errorname = "SQLITE_ERROR"
    assert not is_busy(misleading)
    unnamed = sqlite3.ProgrammingError("Cannot operate on a closed database.")
    assert type(describe_sqlite_error(tmp_path / "x.db", unnamed)) is StoreError
    assert is_busy(sqlite3.OperationalError("database is locked"))  # no name: the message decides


def test_a_busy_write_lock_is_reported_as_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.mothx.db as db_module

    monkeypatch.setattr(db_module, "WRITE_RETRY_BUDGET_S", 0.2)
    root = build(tmp_path / "s", journal="wal")
    holder = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with open_session_dir(root, OpenMode.READ_WRITE) as sd:
            sd.db.conn.execute("PRAGMA busy_timeout = 10")
            with pytest.raises(StoreError, match="is busy"):
                with sd.db.write():
                    pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()




def test_a_schema_changed_between_the_probe_and_the_write_open_is_seen(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """mothx migrating the file between the read probe and the read-write open: the new layout is read again."""
    import store.mothx.sessiondir as sessiondir

    root = build(tmp_path / "s", journal="wal")
    real_open = sessiondir.open_database

    def open_after_a_migration(path: Path, mode: OpenMode, **kwargs: bool) -> Database:
        if mode is OpenMode.READ_WRITE:
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("INSERT INTO schema_migrations(version, name) VALUES (47, 'later')")
            conn.close()
        return real_open(path, mode, **kwargs)

    monkeypatch.setattr(sessiondir, "open_database", open_after_a_migration)
    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        assert sd.schema.status == "newer" and not sd.writable


def test_a_read_connection_beside_our_own_rollback_journal_writer_is_not_immutable(tmp_path: Path) -> None:
    root = build(tmp_path / "s")
    with open_session_dir(root, OpenMode.READ_WRITE) as sd:
        aside = open_database(root / "sessions.db", OpenMode.READ_ONLY)
        try:
            assert aside.access == "mode=ro"  # our writes change the file: immutable=1 would read torn pages
            with sd.db.write() as conn:
                conn.execute("INSERT INTO sessions(id, cwd, timestamp) VALUES (?, '/w', 't')", (OTHER_ID,))
            with aside.read() as conn:
                assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (2,)
        finally:
            aside.close()
        assert sd.db.access == "wal"
        aside = open_database(root / "sessions.db", OpenMode.READ_ONLY)
        try:
            assert aside.access == "mode=ro (live)"
        finally:
            aside.close()


def _create_in(root: str, results: multiprocessing.Queue[str]) -> None:
    from store.mothx.sessiondir import open_session_dir as open_dir

    try:
        open_dir(Path(root), OpenMode.READ_WRITE, create=True).close()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        results.put(repr(exc))


def test_processes_creating_one_new_directory_at_once_all_open_it(tmp_path: Path) -> None:
    """Two first captures on a new machine create the same directory at once: every one opens it."""
    ctx = multiprocessing.get_context("fork")
    for n in range(12):
        root = tmp_path / f"new-{n}"
        root.mkdir()
        results: multiprocessing.Queue[str] = ctx.Queue()
        procs = [ctx.Process(target=_create_in, args=(str(root), results)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert sorted(results.get(timeout=10) for _ in procs) == ["ok"] * 4


def test_only_an_empty_or_one_page_database_is_taken_for_one_being_created(tmp_path: Path) -> None:
    from store.mothx.db_files import being_created

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert being_created(empty)
    one_page = tmp_path / "one.db"
    conn = sqlite3.connect(one_page)
    conn.execute("PRAGMA user_version = 7")  # writes the header page only: no table yet
    conn.close()
    assert one_page.stat().st_size <= 65536 and being_created(one_page)
    root = build(tmp_path / "s")  # a v43 directory with rows: never "being created", whatever lies beside it
    assert not being_created(root / "sessions.db")
    empty_journal(root)
    with pytest.raises(StoreError):  # refused at once, as before (no wait: the file is not being created)
        open_session_dir(root, OpenMode.READ_WRITE, create=True)
    assert (root / "sessions.db-journal").read_bytes() == b""
