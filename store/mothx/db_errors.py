"""SQLite failures as named store errors: which result codes mean busy, damaged, read-only or unreadable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store.errors import DatabaseCorrupt, ReadOnlyStore, StoreError


def _errorname(exc: sqlite3.Error) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


def _is(name: str, *codes: str) -> bool:
    """True when ``name`` (e.g. ``SQLITE_BUSY_SNAPSHOT``) is one of the primary result ``codes`` or extends one."""
    return any(name == code or name.startswith(code + "_") for code in codes)


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED (by the error's name; by its message where SQLite gave no name)."""
    name = _errorname(exc)
    if name:
        return _is(name, "SQLITE_BUSY", "SQLITE_LOCKED")
    low = str(exc).lower()
    return "locked" in low or "busy" in low


def describe_sqlite_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """One sentence for a SQLite failure, as the matching named store error.

    Classified by the result code's name (``exc.sqlite_errorname``); by the message only where there is none
    (errors of the sqlite3 module itself, e.g. a closed connection).
    """
    text = str(exc)
    name = _errorname(exc)
    if name:
        if _is(name, "SQLITE_CORRUPT", "SQLITE_NOTADB"):
            return DatabaseCorrupt(f"{path} is damaged: SQLite says '{text}'.")
        if _is(name, "SQLITE_READONLY"):
            return ReadOnlyStore(f"{path} cannot be written: SQLite says '{text}'.")
        if _is(name, "SQLITE_BUSY", "SQLITE_LOCKED"):
            return StoreError(f"{path} is busy: another process holds its write lock ({text}).")
        if _is(name, "SQLITE_CANTOPEN"):
            return StoreError(f"{path} cannot be opened: SQLite says '{text}'.")
        if _is(name, "SQLITE_PERM", "SQLITE_AUTH"):
            return StoreError(f"{path} cannot be used: permission denied (SQLite says '{text}').")
        if _is(name, "SQLITE_FULL"):
            return StoreError(f"{path} cannot be written: the disk is full (SQLite says '{text}').")
        if _is(name, "SQLITE_IOERR"):
            return StoreError(f"{path} cannot be read or written: I/O error (SQLite says '{text}').")
        return StoreError(f"{path}: SQLite error '{text}'.")
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


def is_protocol_race(exc: sqlite3.Error) -> bool:
    """SQLITE_PROTOCOL ("locking protocol"): another connection was rebuilding the WAL index; worth a retry."""
    name = _errorname(exc)
    return _is(name, "SQLITE_PROTOCOL") if name else "locking protocol" in str(exc).lower()
