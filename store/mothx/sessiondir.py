"""An opened session directory: ``sessions.db`` in one open mode, with its detected layout."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from store.mothx.db import Database, OpenMode, _is_wal_file, open_database
from store.errors import ReadOnlyStore, StoreError
from store.paths import resolve_session_dir, sessions_db_path
from store.mothx.schema import SchemaInfo, create_v43, inspect_schema


@dataclass
class SessionDir:
    """The store's handle on one session directory. Every store function takes one of these."""

    root: Path
    mode: OpenMode
    db: Database
    schema: SchemaInfo
    notices: list[str] = field(default_factory=list)
    _closers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    @property
    def db_path(self) -> Path:
        return sessions_db_path(self.root)

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
    """Open the session directory at ``path`` (the folder or its ``sessions.db``).

    ``create`` makes a new v43 database when none exists (read-write only). A read-write open of a file
    the user cannot write falls back to read-only, with a notice.
    """
    root = resolve_session_dir(path)
    db_file = sessions_db_path(root)
    notices: list[str] = []
    if not db_file.exists():
        if mode.is_read or not create:
            raise StoreError(f"There is no sessions.db in {root}.")
    elif mode is OpenMode.READ_WRITE and not os.access(db_file, os.W_OK) or (
        mode is OpenMode.READ_WRITE and db_file.exists() and not os.access(root, os.W_OK)
    ):
        mode = OpenMode.READ_ONLY
        notices.append(f"{db_file} is not writable by you: opened read-only.")
    if mode is OpenMode.READ_WRITE and db_file.exists() and not _is_wal_file(db_file):
        _probe_before_write(db_file, create)
    db = open_database(db_file, mode, create=create)
    try:
        with db.read() as conn:
            schema = inspect_schema(conn)
        if schema.status == "empty":
            if mode.is_read or not create:
                raise StoreError(f"{db_file} has no tables: it is not a mothx session database yet.")
            with db.write() as conn:
                create_v43(conn)
                schema = inspect_schema(conn)
    except BaseException:
        db.close()
        raise
    if schema.notice:
        notices.append(schema.notice)
    return SessionDir(root=root, mode=mode, db=db, schema=schema, notices=notices)


def _probe_before_write(db_file: Path, create: bool) -> None:
    """Look at a file that is not (yet) in WAL mode before a read-write open switches it to WAL.

    An empty file nobody asked to create, or a SQLite file that is not a mothx session database, is refused
    without a byte of it changed.
    """
    if db_file.stat().st_size == 0:
        if not create:
            raise StoreError(f"{db_file} is empty: it is not a mothx session database yet.")
        return
    probe = open_database(db_file, OpenMode.READ_ONLY)
    try:
        with probe.read() as conn:
            schema = inspect_schema(conn)
    finally:
        probe.close()
    if schema.status == "empty" and not create:
        raise StoreError(f"{db_file} has no tables: it is not a mothx session database yet.")
