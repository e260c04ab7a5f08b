"""An opened session directory: its database (``sessions.db``, or the file the user named) in one open mode,
with its detected layout."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from store.errors import ReadOnlyStore, StoreError
from store.mothx.db import Database, OpenMode, open_database
from store.mothx.db_files import being_created, check_companions
from store.mothx.schema import SchemaInfo, create_v43, inspect_schema
from store.paths import DatabaseLocation, resolve_location


@dataclass
class SessionDir:
    """The store's handle on one session directory. Every store function takes one of these."""

    root: Path          # the session directory (knowledge-bases/ and the rest live here)
    mode: OpenMode      # the mode asked for (read-only when the files cannot be written)
    db: Database        # the database connection; read-only at the SQLite level unless it may be written
    schema: SchemaInfo
    notices: list[str] = field(default_factory=list)
    _closers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    @property
    def db_path(self) -> Path:
        """The database file that is open: ``root/sessions.db``, or the file the user named (``/p/backup.db``)."""
        return self.db.path

    @property
    def writable(self) -> bool:
        return not self.mode.is_read and self.schema.writable

    @property
    def read_only_reason(self) -> str:
        if self.mode.is_read:
            return f"the session directory is open {self.mode.value}"
        if not self.schema.writable:
            return self.schema.notice
        return ""

    def require_writable(self) -> None:
        """Raise :class:`ReadOnlyStore` unless repairs may write here. Every repair calls this first."""
        if not self.writable:
            raise ReadOnlyStore(f"Refused: {self.read_only_reason} (read-only).")

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when this directory is closed (e.g. a cache connection attached to sessions.db)."""
        self._closers.append(closer)

    def close(self) -> None:
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception:  # noqa: BLE001 - a failing cache must not keep sessions.db open
                pass
        self.db.close()

    def __enter__(self) -> SessionDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_session_dir(path: str | os.PathLike[str] | None, mode: OpenMode = OpenMode.READ_WRITE, *, create: bool = False) -> SessionDir:
    """Open the session directory at ``path``: the folder (its ``sessions.db``) or a database file, exactly that
    file (see :func:`store.paths.resolve_location`).

    ``create`` makes a new v43 database when none exists (read-write only). A read-write open of a file the
    user cannot write falls back to read-only, with a notice.

    A read-write open looks at the schema first through a read connection that writes nothing, and opens the
    file for writing only when it may be written (a current v43 layout, or an empty file it is asked to
    create). A layout shown read-only (newer, older, incompatible) keeps that read connection: ``mode`` stays
    read-write, ``writable`` is False, and not a byte of the file changes.
    """
    location = resolve_location(path)   # refuses an empty path, a FIFO, a folder where the file should be
    db_file = location.db_file
    notices: list[str] = []
    if not db_file.exists():
        if mode.is_read or not create:
            raise StoreError(_missing(location))
        return _create(location, notices)
    if mode is OpenMode.READ_WRITE and not (os.access(db_file, os.W_OK) and os.access(db_file.parent, os.W_OK)):
        mode = OpenMode.READ_ONLY
        notices.append(f"{db_file} is not writable by you: opened read-only.")
    if mode is OpenMode.READ_WRITE:
        return _open_read_write(location, notices, create)
    db = open_database(db_file, mode)
    try:
        schema = _inspect(db, create=False)
    except BaseException:
        db.close()
        raise
    return _session_dir(location, mode, db, schema, notices)


def _missing(location: DatabaseLocation) -> str:
    if location.standard:
        return f"There is no sessions.db in {location.root}."
    return f"There is no database file at {location.db_file}."


def _inspect(db: Database, *, create: bool) -> SchemaInfo:
    """The layout of ``db``; an empty database is refused unless it is about to be created."""
    with db.read() as conn:
        schema = inspect_schema(conn)
    if schema.status == "empty" and not create:
        if not db.path.stat().st_size:
            raise StoreError(f"{db.path} is empty: it is not a mothx session database yet.")
        raise StoreError(f"{db.path} has no tables: it is not a mothx session database yet.")
    return schema


def _open_read_write(location: DatabaseLocation, notices: list[str], create: bool) -> SessionDir:
    db_file = location.db_file
    check_companions(db_file, creating=create)  # before anything reads them: a -wal SQLite would delete is refused first
    if create and being_created(db_file):
        # Empty or one page long: another process may be creating it right now (two first captures), and a read
        # probe would race with its first write. Its tables, if any, are looked at under the write lock.
        return _create(location, notices)
    probe = open_database(db_file, OpenMode.READ_ONLY)  # writes nothing, creates no file (see db._open_read)
    try:
        schema = _inspect(probe, create=create)
        seen = _fingerprint(probe, schema)
    except BaseException:
        probe.close()
        raise
    if schema.status != "empty" and not schema.writable:
        return _session_dir(location, OpenMode.READ_WRITE, probe, schema, notices)
    probe.close()
    db = open_database(db_file, OpenMode.READ_WRITE, create=create)
    try:
        if _fingerprint(db, schema) != seen:  # changed since the probe (e.g. mothx migrated it): look again
            schema = _inspect(db, create=create)
        if schema.status == "empty":
            with db.write() as conn:
                # Looked at again under the write lock: another process creating the same new directory at
                # this moment (two first captures) may have created the tables since the probe.
                if inspect_schema(conn).status == "empty":
                    create_v43(conn)
                schema = inspect_schema(conn)
    except BaseException:
        db.close()
        raise
    return _session_dir(location, OpenMode.READ_WRITE, db, schema, notices)


def _fingerprint(db: Database, schema: SchemaInfo) -> tuple[int, int]:
    """``PRAGMA schema_version`` (moves with every DDL change) and the number of ``schema_migrations`` rows."""
    with db.read() as conn:
        version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
        rows = 0
        if schema.has("schema_migrations"):
            rows = int(conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0])
    return version, rows


def _create(location: DatabaseLocation, notices: list[str]) -> SessionDir:
    db = open_database(location.db_file, OpenMode.READ_WRITE, create=True)
    try:
        with db.write() as conn:
            if inspect_schema(conn).status == "empty":
                create_v43(conn)
            schema = inspect_schema(conn)
    except BaseException:
        db.close()
        raise
    return _session_dir(location, OpenMode.READ_WRITE, db, schema, notices)


def _session_dir(location: DatabaseLocation, mode: OpenMode, db: Database, schema: SchemaInfo,
                 notices: list[str]) -> SessionDir:
    if schema.notice:
        notices.append(schema.notice)
    return SessionDir(root=location.root, mode=mode, db=db, schema=schema, notices=notices)
