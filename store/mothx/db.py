"""Opening a database in one of the three open modes, and the transactions every store call runs in.

``read-write``  WAL, busy timeout, ``BEGIN IMMEDIATE`` for every write.
``read-only``   never writes, never creates a file: ``mode=ro`` where a live writer's ``-shm`` exists,
                ``immutable=1`` where the database is quiet, a private copy where only a ``-wal`` is left.
``snapshot``    a copy from another machine: ``immutable=1``, or, where ``-wal``/``-shm``/``-journal`` files
                lie beside it, a private copy of the whole file set in a temporary folder (``immutable=1``
                silently ignores a ``-wal``, so rows committed only there would be lost).

A read mode is enforced here, in the store: :meth:`Database.write` raises :class:`ReadOnlyStore`, and the
connection itself runs with ``PRAGMA query_only``.
"""

from __future__ import annotations

import enum
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from store.errors import DatabaseCorrupt, ReadOnlyStore, StoreError
from store.paths import companions

BUSY_TIMEOUT_MS = 10_000
WRITE_RETRY_BUDGET_S = 10.0
SQLITE_HEADER = b"SQLite format 3\x00"


class OpenMode(str, enum.Enum):
    READ_WRITE = "read-write"
    READ_ONLY = "read-only"
    SNAPSHOT = "snapshot"

    @property
    def is_read(self) -> bool:
        return self is not OpenMode.READ_WRITE

    @property
    def badge(self) -> str:
        return {"read-write": "RW", "read-only": "READ-ONLY", "snapshot": "SNAPSHOT"}[self.value]


def _uri(path: Path, **params: str) -> str:
    quoted = urllib.parse.quote(str(path.absolute()))
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quoted}?{query}"


# Files this process holds open through SQLite, by (device, inode). Closing ANY file descriptor of a file drops
# every POSIX lock the process holds on it, so reading a header with Python's open() while a connection of ours
# is open would silently release that connection's locks: another process then thinks it is the last user of a
# WAL database, checkpoints and deletes the -wal / -shm files, and our connection never sees a later commit
# (and would write into an unlinked WAL). Such files are never opened from Python: their header was checked
# when the first connection opened them.
_IN_USE: dict[tuple[int, int], int] = {}
_IN_USE_LOCK = threading.Lock()


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def in_use(path: Path) -> bool:
    """True when this process holds ``path`` open through a :class:`Database`."""
    key = _file_key(path)
    with _IN_USE_LOCK:
        return key is not None and _IN_USE.get(key, 0) > 0


def _hold(key: tuple[int, int] | None) -> None:
    if key is not None:
        with _IN_USE_LOCK:
            _IN_USE[key] = _IN_USE.get(key, 0) + 1


def _release(key: tuple[int, int] | None) -> None:
    if key is None:
        return
    with _IN_USE_LOCK:
        left = _IN_USE.get(key, 0) - 1
        if left > 0:
            _IN_USE[key] = left
        else:
            _IN_USE.pop(key, None)


def _is_wal_file(path: Path) -> bool:
    """True when the database header says WAL mode (file format bytes 18 and 19 equal 2)."""
    if in_use(path):
        return True  # open here already (see _IN_USE); only WAL databases are kept open in read-write
    try:
        with path.open("rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[18] == 2 and head[19] == 2


def _check_header(path: Path) -> None:
    if in_use(path):
        return  # checked when it was first opened; reading it again would drop our own locks (see _IN_USE)
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except PermissionError as exc:
        raise StoreError(f"{path} cannot be read: permission denied.") from exc
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}.") from exc
    if head and head != SQLITE_HEADER:
        raise DatabaseCorrupt(f"{path} is not a SQLite database (its header is wrong).")


def describe_sqlite_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """One sentence for a SQLite failure, as the matching named store error."""
    text = str(exc)
    low = text.lower()
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return DatabaseCorrupt(f"{path} is damaged: SQLite says '{text}'.")
    if "readonly" in low or "read-only" in low:
        return ReadOnlyStore(f"{path} cannot be written: SQLite says '{text}'.")
    if "locked" in low or "busy" in low:
        return StoreError(f"{path} is busy: another process holds its write lock ({text}).")
    if "unable to open" in low:
        return StoreError(f"{path} cannot be opened: SQLite says '{text}'.")
    return StoreError(f"{path}: SQLite error '{text}'.")


@dataclass
class Database:
    """One connection to one SQLite file, shared by the threads of this process under a lock."""

    path: Path
    mode: OpenMode
    conn: sqlite3.Connection
    access: str
    private_copy: Path | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _closed: bool = False
    _file_key: tuple[int, int] | None = field(default=None, repr=False)  # held in _IN_USE while open

    @property
    def read_only(self) -> bool:
        return self.mode.is_read

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees one consistent state of the database."""
        with self._lock:
            self._ensure_open()
            try:
                self.conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise describe_sqlite_error(self.path, exc) from exc
            try:
                yield self.conn
            except sqlite3.Error as exc:
                self._rollback()
                raise describe_sqlite_error(self.path, exc) from exc
            except BaseException:
                self._rollback()
                raise
            else:
                self._rollback()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` write transaction; commits on success, rolls back on any error.

        Raises :class:`ReadOnlyStore` in a read mode before anything is touched.
        """
        if self.mode.is_read:
            raise ReadOnlyStore(f"{self.path.name} is open {self.mode.value}: nothing may be written.")
        with self._lock:
            self._ensure_open()
            self._begin_immediate()
            try:
                yield self.conn
            except sqlite3.Error as exc:
                self._rollback()
                raise describe_sqlite_error(self.path, exc) from exc
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    raise describe_sqlite_error(self.path, exc) from exc

    def quick_check(self) -> str:
        """``PRAGMA quick_check``: ``'ok'`` or the first problems SQLite reports, joined."""
        with self.read() as conn:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        return "; ".join(str(r[0]) for r in rows) or "ok"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if not self.mode.is_read:
                    self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:
                pass
            finally:
                self.conn.close()
                _release(self._file_key)
                if self.private_copy is not None:
                    shutil.rmtree(self.private_copy, ignore_errors=True)

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path.name} was closed.")

    def _begin_immediate(self) -> None:
        deadline = time.monotonic() + WRITE_RETRY_BUDGET_S
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                low = str(exc).lower()
                if ("locked" in low or "busy" in low) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise describe_sqlite_error(self.path, exc) from exc

    def _rollback(self) -> None:
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _connect(target: str, *, uri: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _private_copy(path: Path) -> tuple[Path, Path]:
    """Copy ``path`` and its companions into a new private folder; return (folder, copied db)."""
    folder = Path(tempfile.mkdtemp(prefix="sessionscope-copy-"))
    target = folder / path.name
    shutil.copy2(path, target)
    for comp in companions(path):
        if comp.exists() and not comp.name.endswith("-shm"):
            shutil.copy2(comp, folder / comp.name)
    return folder, target


def open_database(path: Path, mode: OpenMode, *, create: bool = False, foreign_keys: bool = False) -> Database:
    """Open ``path`` in ``mode``. ``create`` makes a missing file (read-write only).

    ``foreign_keys`` is off for ``sessions.db`` (as the reference demands) and on for knowledge bases.
    """
    path = Path(path)
    exists = path.exists()
    if not exists and (mode.is_read or not create):
        raise StoreError(f"There is no database at {path}.")
    if exists:
        if path.is_dir():
            raise StoreError(f"{path} is a folder, not a database file.")
        _check_header(path)
    private: Path | None = None
    try:
        if mode is OpenMode.READ_WRITE:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = _connect(str(path), uri=False)
            access = "wal"
        else:
            conn, access, private = _open_read(path, mode)
        try:
            _apply_pragmas(conn, mode, foreign_keys)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException:
            conn.close()
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
            raise
    except sqlite3.Error as exc:
        raise describe_sqlite_error(path, exc) from exc
    key = _file_key(path) if private is None else None
    _hold(key)
    return Database(path=path, mode=mode, conn=conn, access=access, private_copy=private, _file_key=key)


def _open_read(path: Path, mode: OpenMode) -> tuple[sqlite3.Connection, str, Path | None]:
    wal, shm, journal = companions(path)
    has_companion = wal.exists() or shm.exists() or journal.exists()
    if mode is OpenMode.SNAPSHOT:
        if has_companion:
            return _open_private_copy(path)
        return _connect(_uri(path, immutable="1"), uri=True), "immutable", None
    # read-only
    if shm.exists() and not journal.exists():
        # readonly_shm: a plain mode=ro reader still writes its read marks into a live writer's -shm.
        try:
            conn = _connect(_uri(path, mode="ro", readonly_shm="1"), uri=True)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, "mode=ro (live)", None
        except sqlite3.Error:
            return _open_private_copy(path)
    if has_companion:
        return _open_private_copy(path)
    if _is_wal_file(path):
        # A quiet WAL database: mode=ro would create -wal and -shm files. Nothing uncommitted exists.
        return _connect(_uri(path, immutable="1"), uri=True), "immutable", None
    return _connect(_uri(path, mode="ro"), uri=True), "mode=ro", None


def _open_private_copy(path: Path) -> tuple[sqlite3.Connection, str, Path]:
    folder, copy = _private_copy(path)
    try:
        conn = _connect(str(copy), uri=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return conn, "private copy", folder


def _apply_pragmas(conn: sqlite3.Connection, mode: OpenMode, foreign_keys: bool) -> None:
    sync = "FULL" if os.environ.get("MOTHX_SQLITE_SYNCHRONOUS", "").upper() == "FULL" else "NORMAL"
    conn.execute(f"PRAGMA foreign_keys = {'ON' if foreign_keys else 'OFF'}")
    if mode is OpenMode.READ_WRITE:
        conn.execute(f"PRAGMA synchronous = {sync}")
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                got = conn.execute("PRAGMA journal_mode = WAL").fetchone()
                break
            except sqlite3.OperationalError as exc:
                if time.monotonic() >= deadline or "lock" not in str(exc).lower():
                    raise
                time.sleep(0.05)
        if got is None or str(got[0]).lower() != "wal":
            raise StoreError("SQLite refused WAL journal mode for this database.")
    else:
        conn.execute("PRAGMA query_only = ON")
