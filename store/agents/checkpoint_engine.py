"""Where the checkpoint store lives: the SQLite file of a session directory (the default) or a PostgreSQL
database named by a URL, and the one connection surface the checkpoint code runs its SQL through.

Choosing the store: :func:`use_store` (the ``--store URL`` option) wins over the ``SESSIONSCOPE_STORE``
environment variable; neither set means today's file ``<session dir>/sessionscope/agent-state.db``. A URL is
``postgresql://user[:password]@host[:port]/database`` (also ``postgres://`` and ``postgresql+psycopg://``; a
unix socket folder as ``?host=/path``), or ``sqlite:///path/to/agent-state.db`` for a checkpoint file
somewhere else.

The checkpoint SQL is written once (``?`` placeholders, ``ON CONFLICT`` upserts, ``RETURNING``, row values):
the SQLite store hands out the session directory's own :class:`~store.mothx.db.Database` connection (its read
modes and busy handling unchanged), :class:`PgStore` hands out a :class:`PgConnection` of a pooled
SQLAlchemy engine (driver psycopg 3) that translates the placeholders. What differs between the two engines
is kept here: :func:`has_table`, the lock suffix (``FOR UPDATE`` on PostgreSQL, where writers run
concurrently; SQLite's ``BEGIN IMMEDIATE`` already serialises them), and the fencing token source (a
sequence on PostgreSQL, a counter row on SQLite).

PostgreSQL transactions: a write is READ COMMITTED with explicit row locks on the session it changes; a read
is REPEATABLE READ, READ ONLY, so a load sees one state from its first page to its last. A store opened in a
read mode refuses every write before it reaches the server.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from store.errors import ReadOnlyStore, StoreError
from store.mothx.db import OpenMode
from store.safetext import one_line

STORE_ENV = "SESSIONSCOPE_STORE"
DIALECT_SQLITE = "sqlite"
DIALECT_POSTGRESQL = "postgresql"

_selected: str | None = None
_engines: dict[str, Any] = {}
_engines_lock = threading.Lock()


class StoreUnavailable(StoreError):
    """The checkpoint store named by a URL cannot be reached or the URL cannot be used."""


def use_store(url: str | None) -> None:
    """Make ``url`` the checkpoint store of this process (None: back to ``SESSIONSCOPE_STORE`` / the file)."""
    global _selected
    if url is not None:
        store_kind(url)  # refuses a URL that names no engine of ours
    _selected = url or None


def selected_store() -> str | None:
    """The store URL in effect: :func:`use_store`'s, else ``$SESSIONSCOPE_STORE``, else None (the file)."""
    if _selected:
        return _selected
    env = os.environ.get(STORE_ENV, "").strip()
    return env or None


def store_kind(url: str) -> str:
    """``"postgresql"`` or ``"sqlite"`` for a store URL; :class:`StoreUnavailable` for anything else."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return DIALECT_POSTGRESQL
    if scheme == "sqlite" and url.lower().startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return DIALECT_SQLITE
    raise StoreUnavailable(
        f"The store {shown_url(url)} is not a postgresql://… or sqlite:///… URL."
    )


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///path`` URL (``sqlite:////abs`` and ``sqlite:///rel`` as SQLAlchemy reads them)."""
    return url[len("sqlite:///"):]


def shown_url(url: str) -> str:
    """The URL as it may be shown: any password replaced by ``***``, made one safe line."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            netloc = parts.netloc
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            url = parts._replace(netloc=f"{user}:***@{hostport}").geturl()
    except ValueError:
        url = re.sub(r"//([^:/@]*):[^@]*@", r"//\1:***@", url)
    return one_line(url)


def engine_url(url: str) -> str:
    """The SQLAlchemy URL of a PostgreSQL store URL (driver psycopg 3)."""
    scheme, rest = url.split(":", 1)
    if scheme.lower() in ("postgresql", "postgres"):
        return "postgresql+psycopg:" + rest
    return url


def _engine(url: str) -> Any:
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            try:
                from sqlalchemy import create_engine
                from sqlalchemy.pool import QueuePool
            except ImportError as exc:  # pragma: no cover - a dependency of the package
                raise StoreUnavailable("SQLAlchemy is not installed: a PostgreSQL store cannot be opened.") from exc
            try:
                engine = create_engine(engine_url(url), poolclass=QueuePool, pool_size=2, max_overflow=4,
                                       pool_pre_ping=True)
            except Exception as exc:  # noqa: BLE001 - a bad URL or a missing driver, told in one sentence
                raise StoreUnavailable(
                    f"The store {shown_url(url)} cannot be used: {one_line(type(exc).__name__)}: "
                    f"{one_line(str(exc))[:200]}"
                ) from exc
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    """Close every pooled PostgreSQL connection of this process (tests; before a fork)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


_PLACEHOLDERS: dict[str, str] = {}


def pg_sql(sql: str) -> str:
    """``?`` placeholders → ``%s`` (and a literal ``%`` doubled) for psycopg; cached per statement."""
    out = _PLACEHOLDERS.get(sql)
    if out is None:
        out = sql.replace("%", "%%").replace("?", "%s")
        if len(_PLACEHOLDERS) < 4096:
            _PLACEHOLDERS[sql] = out
    return out


class PgConnection:
    """One PostgreSQL connection inside a transaction, answering the ``execute``/``executemany`` calls the
    checkpoint code makes of a ``sqlite3.Connection`` (cursors with ``fetchone``, ``fetchall``, iteration
    and ``rowcount``)."""

    dialect = DIALECT_POSTGRESQL

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        cur = self.raw.cursor()
        cur.execute(pg_sql(sql), tuple(params) if params else None)
        return cur

    def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(pg_sql(sql), rows)
        return cur

    def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> int:
        """Write ``rows`` with one ``COPY … FROM STDIN`` (the bulk path of a capture); the number written."""
        with self.raw.cursor() as cur:
            with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return int(cur.rowcount)


def _describe(url: str, exc: BaseException) -> StoreError:
    text = one_line(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    return StoreUnavailable(f"The store {shown_url(url)} failed: {text[:300]}")


class PgStore:
    """A checkpoint store in a PostgreSQL database (the team store)."""

    dialect = DIALECT_POSTGRESQL

    def __init__(self, url: str, mode: OpenMode) -> None:
        self.url = url
        self.mode = mode
        self.path = shown_url(url)  # what messages name, as a file path is named for SQLite
        self._engine = _engine(url)
        self._closed = False
        self._pooled: Any = None  # the connection this store holds while open (one per store, like a file's)
        self._lock = threading.RLock()

    @property
    def read_only(self) -> bool:
        return self.mode.is_read

    def _connect(self) -> Any:
        try:
            return self._engine.raw_connection()
        except Exception as exc:  # noqa: BLE001 - the server is down, refuses us, or the URL is wrong
            raise _describe(self.url, exc) from exc

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[PgConnection]:
        with self._lock:
            if self._closed:
                raise StoreError(f"The store {self.path} is closed.")
            if self._pooled is None:
                self._pooled = self._connect()
            pooled = self._pooled
            raw = pooled.driver_connection
            ok = False
            try:
                try:
                    if raw.info.transaction_status != 0:  # a connection left inside a transaction
                        raw.rollback()
                    raw.execute("BEGIN ISOLATION LEVEL READ COMMITTED" if write
                                else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                except Exception as exc:  # noqa: BLE001
                    raise _describe(self.url, exc) from exc
                try:
                    yield PgConnection(raw)
                except StoreError:
                    raise
                except Exception as exc:
                    if _is_driver_error(exc):
                        raise _describe(self.url, exc) from exc
                    raise
                try:
                    if write:
                        raw.commit()
                    else:
                        raw.rollback()
                except Exception as exc:  # noqa: BLE001
                    raise _describe(self.url, exc) from exc
                ok = True
            finally:
                if not ok:
                    try:
                        raw.rollback()
                    except Exception:  # noqa: BLE001 - a broken connection is dropped, the next use reconnects
                        pooled.invalidate()
                        self._pooled = None
                        pooled.close()

    @contextmanager
    def read(self) -> Iterator[PgConnection]:
        """A read transaction (REPEATABLE READ, READ ONLY): one consistent state for every statement."""
        with self._transaction(write=False) as conn:
            yield conn

    @contextmanager
    def write(self, *, budget: float | None = None) -> Iterator[PgConnection]:
        """A write transaction; commits on success, rolls back on any error. :class:`ReadOnlyStore` in a
        read mode before anything is sent."""
        if self.mode.is_read:
            raise ReadOnlyStore(f"The store {self.path} is open {self.mode.value}: nothing may be written.")
        with self._transaction(write=True) as conn:
            yield conn

    def close(self) -> None:
        """Give the connection back to the pool (kept for the next open of the same URL)."""
        with self._lock:
            self._closed = True
            if self._pooled is not None:
                pooled, self._pooled = self._pooled, None
                pooled.close()


def _is_driver_error(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, psycopg.Error)


def dialect_of(obj: object) -> str:
    """``"postgresql"`` for a :class:`PgStore` or :class:`PgConnection`, else ``"sqlite"``."""
    return DIALECT_POSTGRESQL if isinstance(obj, (PgStore, PgConnection)) else DIALECT_SQLITE


def lock_suffix(conn: object) -> str:
    """`` FOR UPDATE`` on PostgreSQL (concurrent writers lock the rows they are about to change), "" on SQLite
    (a write transaction already holds the file's write lock)."""
    return " FOR UPDATE" if isinstance(conn, PgConnection) else ""


def has_table(conn: Any, name: str) -> bool:
    """True when the table ``name`` exists in the store ``conn`` is connected to."""
    if isinstance(conn, PgConnection):
        row = conn.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()
    else:
        row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return bool(row and row[0])


__all__ = [
    "DIALECT_POSTGRESQL",
    "DIALECT_SQLITE",
    "PgConnection",
    "PgStore",
    "STORE_ENV",
    "StoreUnavailable",
    "dialect_of",
    "dispose_engines",
    "engine_url",
    "has_table",
    "lock_suffix",
    "pg_sql",
    "selected_store",
    "shown_url",
    "sqlite_path",
    "store_kind",
    "use_store",
]
