"""Opening a database in one of the three open modes, and the transactions every store call runs in.

``read-write``  busy timeout, ``BEGIN IMMEDIATE`` for every write, WAL for every write that commits. A database
                in a rollback-journal mode (a copy, one written by another tool) keeps its own journal mode
                until the first write of ours commits, and is switched to WAL right after it: opening,
                reading and a write that rolls back (a refused repair) leave its bytes as they were. A
                new database is WAL from the start. Beside a ``-wal`` or ``-journal`` that is not a valid
                WAL file / hot journal of this database, a read-write open is refused (SQLite would
                overwrite or delete that file), nothing touched.
``read-only``   never writes, never creates a file: ``mode=ro`` + ``readonly_shm`` where a live writer's
                ``-wal`` and ``-shm`` exist, ``immutable=1`` where a WAL database is quiet, ``mode=ro`` for a
                rollback-journal database, a private copy where a ``-wal`` (without ``-shm``) or a ``-journal``
                is left.
``snapshot``    a copy from another machine: ``immutable=1``, or, where a ``-wal`` or ``-journal`` lies beside
                it, a private copy of the whole file set in a temporary folder (``immutable=1`` silently
                ignores a ``-wal``, so rows committed only there would be lost).

A ``-shm`` without a ``-wal`` is stale (a live WAL connection always keeps its ``-wal``) and is ignored by both
read modes: ``mode=ro`` would read it and create a ``-wal`` beside it.

A read mode is enforced here, in the store: :meth:`Database.write` raises :class:`ReadOnlyStore`, and the
connection itself runs with ``PRAGMA query_only``.

TEXT that is not valid UTF-8 is read losslessly, its bad bytes as lone surrogates (``surrogateescape``), so one
odd value never breaks a query; the safe-text boundary shows them as ``\\udcff`` escapes.
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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.errors import ReadOnlyStore, StoreError
from store.mothx.cells import ERRORS, bind, has_surrogates
from store.mothx.db_errors import describe_sqlite_error, is_busy, is_protocol_race
from store.mothx.db_files import (
    check_companions,
    check_header,
    file_key,
    hold,
    hold_rollback,
    in_use,
    is_wal_file,
    release,
    release_rollback,
)
from store.paths import check_database_file, companions

BUSY_TIMEOUT_MS = 10_000
WRITE_RETRY_BUDGET_S = 10.0


def decode_text(data: bytes) -> str:
    """The connection's ``text_factory``: UTF-8, with what is not UTF-8 kept losslessly as surrogates (see
    :data:`store.mothx.cells.ERRORS`); other connections to the same files use it too."""
    return data.decode("utf-8", ERRORS)


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
    _file_key: tuple[int, int] | None = field(default=None, repr=False)  # held in store.mothx.db_files while open
    # read-write on a rollback-journal database: WAL is set right after the first write that commits.
    _wal_pending: bool = field(default=False, repr=False)

    @property
    def journal_mode(self) -> str:
        """``wal`` once the connection runs in WAL mode; the file's own mode (e.g. ``delete``) before that."""
        with self._lock:
            self._ensure_open()
            return str(self.conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()

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
            with self._rolled_back_on_error() as conn:
                yield conn
            self._rollback()

    @contextmanager
    def write(self, *, budget: float | None = None) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` write transaction; commits on success, rolls back on any error.

        ``budget`` bounds, in seconds, how long starting the transaction may wait for another writer (default
        :data:`WRITE_RETRY_BUDGET_S`; e.g. a failed recovery is persisted with its own 5 s budget). Raises
        :class:`ReadOnlyStore` in a read mode before anything is touched.
        """
        if self.mode.is_read:
            raise ReadOnlyStore(f"{self.path.name} is open {self.mode.value}: nothing may be written.")
        with self._lock:
            self._ensure_open()
            self._begin_immediate(WRITE_RETRY_BUDGET_S if budget is None else budget)
            with self._rolled_back_on_error() as conn:
                yield conn
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise describe_sqlite_error(self.path, exc) from exc
            if self._wal_pending:
                self._enable_wal()

    @contextmanager
    def _rolled_back_on_error(self) -> Iterator[sqlite3.Connection]:
        """The open transaction, rolled back when the block fails (a SQLite failure as a named store error)."""
        try:
            yield self.conn
        except sqlite3.Error as exc:
            self._rollback()
            raise describe_sqlite_error(self.path, exc) from exc
        except BaseException:
            self._rollback()
            raise

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
                if not self.mode.is_read and not self._wal_pending:
                    self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:
                pass
            finally:
                self.conn.close()
                release(self._file_key)
                if self._wal_pending:
                    release_rollback(self._file_key)
                if self.private_copy is not None:
                    shutil.rmtree(self.private_copy, ignore_errors=True)

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path.name} was closed.")

    def _begin_immediate(self, budget: float) -> None:
        deadline = time.monotonic() + budget
        shorter = budget < BUSY_TIMEOUT_MS / 1000
        if shorter:  # SQLite's own busy wait must not outlast the budget either
            self.conn.execute(f"PRAGMA busy_timeout = {max(0, int(budget * 1000))}")
        try:
            while True:
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if is_busy(exc) and time.monotonic() < deadline:
                        time.sleep(0.05)
                        continue
                    raise describe_sqlite_error(self.path, exc) from exc
        finally:
            if shorter:
                self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def _enable_wal(self) -> None:
        """Switch a rollback-journal database to WAL after a committed write (see the module docstring).

        The write itself is committed: a switch that stays busy for the whole retry budget is tried again after
        the next write, never reported as a failed write.
        """
        try:
            _set_wal(self.conn)
        except (sqlite3.Error, StoreError):
            return
        self._wal_pending = False
        self.access = "wal"
        release_rollback(self._file_key)

    def _rollback(self) -> None:
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _marks(sql: str) -> list[int]:
    """Offsets of the ``?`` parameter marks of ``sql`` (outside quoted strings and identifiers)."""
    marks: list[int] = []
    quote = ""
    for i, ch in enumerate(sql):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "[":
            quote = "]"
        elif ch == "?":
            marks.append(i)
    return marks


def rebind(sql: str, parameters: Sequence[object]) -> tuple[str, Sequence[object]]:
    """``sql`` and ``parameters`` with every text parameter that holds surrogates bound as the bytes it was read
    from and compared as ``CAST(? AS TEXT)`` (see :class:`ForeignTextConnection`)."""
    bad = [i for i, p in enumerate(parameters) if isinstance(p, str) and not p.isascii() and has_surrogates(p)]
    if not bad:
        return sql, parameters
    marks = _marks(sql)
    if len(marks) != len(parameters):
        return sql, parameters  # numbered or named marks: leave it to SQLite to say what is wrong
    values = list(parameters)
    for i in reversed(bad):
        values[i] = bind(values[i])  # type: ignore[arg-type]
        sql = sql[: marks[i]] + "CAST(? AS TEXT)" + sql[marks[i] + 1 :]
    return sql, values


class ForeignTextConnection(sqlite3.Connection):
    """A connection whose text parameters may be text read back from a foreign row.

    Text that was not valid UTF-8 reads as ``\\udcXX`` (:func:`decode_text`); ``sqlite3`` refuses to bind such a
    ``str``. :meth:`execute` binds it as the bytes it was read from, compared as ``CAST(? AS TEXT)``, so a damaged
    id still finds its own row, and a repair or a copy writes back exactly the bytes that were there.
    """

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if parameters and not isinstance(parameters, Mapping):
            sql, parameters = rebind(sql, parameters)
        return super().execute(sql, parameters)


def _connect(target: str, *, uri: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000,
                           factory=ForeignTextConnection)
    conn.text_factory = decode_text
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


PROTOCOL_RETRIES = 5
"""Opens retried when SQLite reports SQLITE_PROTOCOL (a WAL-index rebuild raced with this open)."""


def open_database(path: Path, mode: OpenMode, *, create: bool = False, foreign_keys: bool = False) -> Database:
    """Open ``path`` in ``mode``. ``create`` makes a missing file (read-write only).

    ``foreign_keys`` is off for ``sessions.db`` (as the reference demands) and on for knowledge bases. A path
    that is not a regular file (a folder, a FIFO, a device) is refused before anything opens it.
    """
    path = Path(path)
    exists = check_database_file(path)
    if not exists and (mode.is_read or not create):
        raise StoreError(f"There is no database at {path}.")
    head = check_header(path) if exists else b""  # b"" also where this process holds it open already
    # A database this open creates (or an empty file it was asked to make one): WAL from the first page.
    new_file = create and (not exists or (not in_use(path) and path.stat().st_size == 0))
    if exists and mode is OpenMode.READ_WRITE:
        check_companions(path, head, creating=create)
    private: Path | None = None
    try:
        for attempt in range(PROTOCOL_RETRIES + 1):
            if mode is OpenMode.READ_WRITE:
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = _connect(str(path), uri=False)
                access = "wal"
            else:
                conn, access, private = _open_read(path, mode)
            try:
                _apply_pragmas(conn, mode, foreign_keys)
                break
            except BaseException as exc:
                conn.close()
                if private is not None:
                    shutil.rmtree(private, ignore_errors=True)
                    private = None
                # SQLITE_PROTOCOL: another connection was rebuilding the WAL index (after a process was killed
                # holding it); SQLite's own advice is to try again.
                if attempt == PROTOCOL_RETRIES or not (isinstance(exc, sqlite3.Error) and is_protocol_race(exc)):
                    raise
                time.sleep(0.02 * (attempt + 1))
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            wal_pending = False
            if mode is OpenMode.READ_WRITE and str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                if new_file:
                    _set_wal(conn)
                else:
                    wal_pending, access = True, "rollback journal (WAL from the first write)"
        except BaseException:
            conn.close()
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
            raise
    except sqlite3.Error as exc:
        raise describe_sqlite_error(path, exc) from exc
    key = file_key(path) if private is None else None
    hold(key)
    if wal_pending:
        hold_rollback(key)
    return Database(path=path, mode=mode, conn=conn, access=access, private_copy=private, _file_key=key,
                    _wal_pending=wal_pending)


def _open_read(path: Path, mode: OpenMode) -> tuple[sqlite3.Connection, str, Path | None]:
    wal, shm, journal = companions(path)
    if mode is OpenMode.SNAPSHOT:
        if wal.exists() or journal.exists():  # a -shm alone holds nothing (see below)
            return _open_private_copy(path)
        return _connect(_uri(path, immutable="1"), uri=True), "immutable", None
    # read-only
    if wal.exists() and shm.exists() and not journal.exists():
        # readonly_shm: a plain mode=ro reader still writes its read marks into a live writer's -shm.
        try:
            conn = _connect(_uri(path, mode="ro", readonly_shm="1"), uri=True)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, "mode=ro (live)", None
        except sqlite3.Error:
            return _open_private_copy(path)
    if wal.exists() or journal.exists():
        return _open_private_copy(path)
    # No -wal, no -journal: nothing uncommitted exists. A -shm alone is stale (a live WAL connection keeps a
    # -wal), and ignored: empty or garbage, mode=ro would read it and create a -wal beside it.
    if is_wal_file(path):
        # A quiet WAL database: mode=ro would create -wal and -shm files.
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
    else:
        conn.execute("PRAGMA query_only = ON")


def _set_wal(conn: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, retried for up to the busy timeout on SQLITE_BUSY / SQLITE_LOCKED."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            got = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            break
        except sqlite3.OperationalError as exc:
            if time.monotonic() >= deadline or not is_busy(exc):
                raise
            time.sleep(0.05)
    if got is None or str(got[0]).lower() != "wal":
        raise StoreError("SQLite refused WAL journal mode for this database.")
