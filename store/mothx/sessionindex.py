"""The aggregate index behind the session list: per-session facts from ``entries``, kept up to date cheaply.

The list the reference defines (section 5.2) is expensive to compute: ``last_active_at`` is
``MAX(entries.timestamp)`` per session and ``entries`` has no index on ``timestamp``; message counts, titles
and previews need the entries too. A million-entry database takes about a second to aggregate, and we may
not add an index or write anything into the user's directory.

So the per-session aggregates live in a small SQLite file of our own, outside the session directory
(``paths.cache_dir()/index/<sha256 of the database's real path>.db``), brought up to date incrementally:
``entries.seq`` is AUTOINCREMENT and entries are append-only, so only rows above the cached maximum ``seq``
are read. Deleted entries show up as a count that no longer adds up (``count(*)`` uses the smallest index);
the sessions whose counts changed are recomputed. A database that is not the one the cache describes (its
AUTOINCREMENT high-water mark went down, or a sampled ``seq`` now holds another entry id) is rebuilt. A
rebuild is one grouped pass over ``entries``, split by ``seq`` range over extra read connections when the
machine has the cores.

The cache connection ATTACHes ``sessions.db`` read-only, in the same way the session's own connection reads
it (``immutable=1``, ``mode=ro`` or the private copy), so listing, sorting and filtering are one SQL join of
the live ``sessions`` rows with the aggregates: no per-session Python objects are built to open a list. When
the cache directory cannot be written, the cache is an in-memory database fed by the same queries.
Nothing here writes to the session directory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store import paths
from store.errors import StoreError
from store.mothx.aggregates import (
    Aggregate,
    add_texts,
    aggregate,
    chunks,
    group_range,
    in_text,
    read_layout,
    reader_uri,
)
from store.mothx.cells import as_int, as_text, bind, decode
from store.mothx.db_errors import describe_sqlite_error
from store.safetext import one_line

try:  # CPython's own SHA-256: importing hashlib first loads OpenSSL (~1 ms on the path to the first window)
    from _sha256 import sha256
except ImportError:  # pragma: no cover - other interpreters
    from hashlib import sha256

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

CACHE_FORMAT = 3
"""Bumped whenever what the cache holds changes meaning; a cache of another format is emptied and rebuilt.
3: previews are reference 5.2's (the first message, 60 bytes, ``...``); text cells kept byte for byte."""


@dataclass(frozen=True)
class IndexInfo:
    """How the list of one open session directory is being served (for the Health screen and benchmarks)."""

    persistent: bool            # aggregates are kept in a cache file (False: in memory only)
    cache_path: Path | None
    last_sync: str              # "cold" | "rebuild" | "repair" | "incremental" | "unchanged" | ""
    last_sync_seconds: float
    sessions: int               # aggregate rows (session ids that have entries)
    entries: int                # entries the aggregates cover
    max_seq: int


# ----------------------------------------------------------------------------------------------------------
# The cache database


@dataclass
class _Meta:
    db_key: str
    high_water: int             # sqlite_sequence for entries (or max seq) when last synced
    max_seq: int                # aggregates cover entries with seq <= max_seq
    samples: list[list[object]] # [seq, entry id] pairs: a different id at a sampled seq means another database
    generation: str = ""
    format: int = CACHE_FORMAT

    def to_text(self) -> str:
        return json.dumps({"format": self.format, "db_key": self.db_key, "high_water": self.high_water,
                           "max_seq": self.max_seq, "samples": self.samples, "generation": self.generation})

    @classmethod
    def from_text(cls, text: str) -> _Meta | None:
        try:
            obj = json.loads(text)
            return cls(db_key=str(obj["db_key"]), high_water=int(obj["high_water"]), max_seq=int(obj["max_seq"]),
                       samples=[[int(s), str(i)] for s, i in obj["samples"]], generation=str(obj["generation"]),
                       format=int(obj["format"]))
        except (ValueError, KeyError, TypeError):
            return None


_CACHE_DDL = (
    "CREATE TABLE IF NOT EXISTS main.meta (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS main.agg (session_id TEXT PRIMARY KEY, entry_count INTEGER NOT NULL, "
    "max_seq INTEGER NOT NULL, last_ts TEXT, message_count INTEGER NOT NULL, title_seq INTEGER NOT NULL, "
    "title TEXT NOT NULL, preview_seq INTEGER NOT NULL, preview TEXT NOT NULL) WITHOUT ROWID",
)


def cache_path_for(db_path: Path) -> Path:
    """Where the aggregate cache of the database at ``db_path`` lives (never inside its directory)."""
    key = sha256(os.path.realpath(db_path).encode("utf-8", "surrogateescape")).hexdigest()
    return paths.cache_dir() / "index" / f"{key}.db"


def _open_cache(path: Path | None, src_uri: str) -> sqlite3.Connection:
    """The cache connection (``path``, or memory when None) with ``sessions.db`` attached as ``src``."""
    target = f"file:{urllib.parse.quote(str(path))}" if path is not None else "file::memory:"
    conn = sqlite3.connect(target, uri=True, isolation_level=None, check_same_thread=False, timeout=5)
    conn.text_factory = decode     # (sessions.db text that is not UTF-8 reads as \udcXX, never fails a list)
    try:
        if path is not None:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
        for ddl in _CACHE_DDL:
            conn.execute(ddl)
        row = conn.execute("SELECT body FROM meta WHERE id = 1").fetchone()
        meta = _Meta.from_text(row[0]) if row else None
        if row is not None and (meta is None or meta.format != CACHE_FORMAT):
            conn.execute("DELETE FROM meta")
            conn.execute("DELETE FROM agg")
        conn.execute("ATTACH DATABASE ? AS src", (src_uri,))
        conn.execute("SELECT count(*) FROM src.sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


# ----------------------------------------------------------------------------------------------------------
# The index of one open session directory


class _Checks:
    """What a sync found in the database (a plain class: a dataclass costs time to define at import)."""

    __slots__ = ("token", "max_seq", "high_water", "covered_now", "sample_conflict")

    def __init__(self, token: tuple[int, int], max_seq: int, high_water: int, covered_now: int,
                 sample_conflict: bool) -> None:
        self.token = token
        self.max_seq = max_seq
        self.high_water = high_water
        self.covered_now = covered_now  # entries with a session id and seq <= the cached max_seq (-1: not counted)
        self.sample_conflict = sample_conflict


class SessionIndex:
    """The aggregates of one open ``SessionDir`` and a connection that joins them with its sessions.

    ``conn`` (guarded by ``lock``) reads ``agg`` (main) and the session tables (``src.``); use
    ``Layout.session_select("src.", aggs=True)`` for list rows.
    """

    def __init__(self, sd: SessionDir) -> None:
        self.lock = threading.RLock()
        self.layout = read_layout(sd)
        self.db_key = os.path.realpath(sd.db.path)
        self.src_uri = reader_uri(sd.db)
        self.cache_path: Path | None = cache_path_for(sd.db.path)
        self.conn = self._connect()
        self.meta: _Meta | None = self._read_meta()
        self.token: tuple[int, int] | None = None
        self.generation = 0          # bumped by every sync that may have changed what a list shows
        self.last_sync = ""
        self.last_sync_seconds = 0.0
        self.defer_deletion_check = False   # the next sync leaves out the deletion check (see verify())
        self.deletion_check_pending = False

    # -- connection --------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        path = self.cache_path
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if os.access(path.parent, os.W_OK):
                    try:
                        return _open_cache(path, self.src_uri)
                    except sqlite3.DatabaseError:
                        for p in (path, *paths.companions(path)):   # a damaged cache is rebuilt
                            p.unlink(missing_ok=True)
                        return _open_cache(path, self.src_uri)
            except (OSError, sqlite3.Error):
                pass
        self.cache_path = None
        try:
            return _open_cache(None, self.src_uri)
        except sqlite3.Error as exc:
            raise StoreError(f"The session list cannot read {one_line(self.db_key)}: SQLite says '{one_line(exc)}'.") from exc

    def _to_memory(self) -> None:
        """The cache file failed (disk full, damaged, locked): carry on with an in-memory cache."""
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        self.cache_path = None
        self.conn = _open_cache(None, self.src_uri)
        self.meta = None

    def _read_meta(self) -> _Meta | None:
        row = self.conn.execute("SELECT body FROM meta WHERE id = 1").fetchone()
        meta = _Meta.from_text(row[0]) if row else None
        if meta is None or meta.db_key != self.db_key or meta.format != CACHE_FORMAT:
            return None
        return meta

    # -- public ------------------------------------------------------------------------------------------

    @staticmethod
    def _token(conn: sqlite3.Connection) -> tuple[int, int]:
        return (int(conn.execute("PRAGMA data_version").fetchone()[0]), conn.total_changes)

    def ensure(self, sd: SessionDir) -> bool:
        """Sync when the database changed since the last sync; True when a sync ran."""
        with self.lock:
            if self.token is not None:
                with sd.db.read() as conn:
                    if self._token(conn) == self.token:
                        return False
            self.sync(sd)
            return True

    def sync(self, sd: SessionDir, *, full: bool = False) -> None:
        with self.lock:
            started = time.perf_counter()
            try:
                self._sync(sd, full=full)
            except sqlite3.Error:
                # sessions.db errors arrive as StoreError; a raw sqlite3.Error comes from the cache file.
                if self.cache_path is None:
                    raise
                self._to_memory()
                self._sync(sd, full=True)
            self.last_sync_seconds = time.perf_counter() - started
            self.generation += 1

    def verify(self, sd: SessionDir) -> bool:
        """Run the deletion check that a deferred sync left out (see ``defer_deletion_check``).

        True when it found entries deleted since the cache was written: the aggregates were then repaired
        and ``generation`` moved on, so what a list shows may have changed. The count runs on a read
        connection of its own, holding neither this index nor ``sd.db``, so lists and other reads go on.
        """
        from store.mothx import checkcache

        with self.lock:
            meta = self.meta
            if not self.deletion_check_pending or meta is None:
                self.deletion_check_pending = False
                return False
        # The count passed on these very files before (same identity, same cache state): nothing was deleted.
        db_path = sd.db.path
        before = checkcache.identity(db_path)
        mark = [meta.max_seq, str(self.cache_path or "")]
        if sd.db.private_copy is None and checkcache.recall("deletions", db_path, before) == mark:
            with self.lock:
                if self.meta is meta:
                    self.deletion_check_pending = False
            return False
        conn = sqlite3.connect(self.src_uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10)
        conn.text_factory = decode
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("BEGIN")
            covered_now = self._covered_now(conn, meta.max_seq)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(sd.db.path, exc) from exc
        finally:
            conn.close()
        with self.lock:
            if not self.deletion_check_pending or self.meta is not meta:
                return False        # a sync ran meanwhile: it checked for deleted entries itself
            self.deletion_check_pending = False
            if covered_now == self._covered():
                if sd.db.private_copy is None:
                    checkcache.remember("deletions", db_path, before, mark)
                return False
            syncing = checkcache.identity(db_path)
            self.sync(sd)  # a full sync: it counts deleted entries itself
            if sd.db.private_copy is None and self.meta is not None:
                checkcache.remember("deletions", db_path, syncing, [self.meta.max_seq, str(self.cache_path or "")])
            return self.last_sync != "unchanged"

    def info(self) -> IndexInfo:
        with self.lock:
            sessions, entries = self.conn.execute("SELECT count(*), COALESCE(SUM(entry_count), 0) FROM agg").fetchone()
            return IndexInfo(
                persistent=self.cache_path is not None, cache_path=self.cache_path, last_sync=self.last_sync,
                last_sync_seconds=self.last_sync_seconds, sessions=int(sessions), entries=int(entries),
                max_seq=self.meta.max_seq if self.meta else 0,
            )

    def close(self) -> None:
        with self.lock:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass

    # -- sync ----------------------------------------------------------------------------------------------

    def _covered(self) -> int:
        return as_int(self.conn.execute("SELECT COALESCE(SUM(entry_count), 0) FROM agg").fetchone()[0])

    def _covered_now(self, conn: sqlite3.Connection, base: int) -> int:
        """Entries with a session id and ``seq <= base``, as the database has them now (a pass over an index)."""
        seq = self.layout.seq
        total = as_int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
        newer = as_int(conn.execute(f"SELECT count(*) FROM entries WHERE {seq} > ?", (base,)).fetchone()[0])
        orphans = as_int(conn.execute(
            f"SELECT count(*) FROM entries WHERE session_id IS NULL AND {seq} <= ?", (base,)).fetchone()[0])
        if not self.layout.seq_is_rowid:    # a foreign layout: rows whose seq is no integer are in no range
            orphans += as_int(conn.execute(f"SELECT count(*) FROM entries WHERE {seq} IS NULL").fetchone()[0])
        return total - newer - orphans

    def _checks(self, conn: sqlite3.Connection, *, deletions: bool) -> _Checks:
        """What changed since ``self.meta``. Without ``deletions`` the counts that detect deleted entries (a
        pass over an index of every entry) are left out: ``covered_now`` is then -1."""
        seq = self.layout.seq
        max_seq = as_int(conn.execute(f"SELECT MAX({seq}) FROM entries").fetchone()[0])
        high_water = max_seq
        if self.layout.has_sequence:
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
            if row is not None:
                high_water = max(high_water, as_int(row[0]))
        covered_now = 0 if deletions else -1
        conflict = False
        if self.meta is not None:
            base = self.meta.max_seq
            if deletions:
                covered_now = self._covered_now(conn, base)
            for s, eid in self.meta.samples:
                row = conn.execute(f"SELECT CAST(id AS BLOB) FROM entries WHERE {seq} = ?", (s,)).fetchone()
                if row is not None and as_text(row[0]) != eid:
                    conflict = True
                    break
        return _Checks(self._token(conn), max_seq, high_water, covered_now, conflict)

    def _sync(self, sd: SessionDir, *, full: bool) -> None:
        # The cache file is the truth (another process may have moved it on since our last sync).
        meta = self.meta = self._read_meta()
        deletions = full or not self.defer_deletion_check
        self.defer_deletion_check = False
        with sd.db.read() as conn:
            checks = self._checks(conn, deletions=deletions)
        rebuild = full or meta is None or checks.sample_conflict or checks.high_water < meta.high_water
        self.deletion_check_pending = not deletions and not rebuild
        changed: dict[str, Aggregate] = {}
        removed: set[str] = set()
        kind = "unchanged"
        if not rebuild and meta is not None and deletions:
            if checks.covered_now != self._covered():
                kind = "repair"
                rebuild = not self._repair(sd, meta.max_seq, changed, removed)
        if rebuild:
            kind = "cold" if meta is None and not full else "rebuild"
            changed, removed = aggregate(sd, self.layout, 0, checks.max_seq), set()
        elif meta is not None and checks.max_seq > meta.max_seq:
            kind = "incremental" if kind == "unchanged" else kind
            self._delta(sd, meta.max_seq, checks.max_seq, changed, removed)
        max_seq = checks.max_seq if rebuild or meta is None else max(meta.max_seq, checks.max_seq)
        if rebuild or meta is None or changed or removed or max_seq != meta.max_seq \
                or checks.high_water != meta.high_water:
            new_meta = _Meta(db_key=self.db_key, high_water=checks.high_water, max_seq=max_seq,
                             samples=self._samples(sd, [] if rebuild or meta is None else meta.samples, max_seq),
                             generation=os.urandom(8).hex())
            if not self._save(new_meta, changed, removed, full=rebuild, expected=meta.generation if meta else None):
                self.last_sync = "raced"
                self.token = None     # another process wrote first: take its state, then catch up next call
                return
        self.last_sync = kind
        with sd.db.read() as conn:
            # If the database moved on while we synced, leave the token unset: the next call syncs again.
            self.token = checks.token if self._token(conn) == checks.token else None

    def _existing(self, sids: Iterable[str]) -> dict[str, Aggregate]:
        found: dict[str, Aggregate] = {}
        for chunk in chunks(sorted(sids)):
            for row in self.conn.execute(
                f"SELECT * FROM agg WHERE session_id IN ({in_text(len(chunk))})", [bind(sid) for sid in chunk]
            ):
                found[row[0]] = Aggregate(*row[1:])
        return found

    def _delta(self, sd: SessionDir, base: int, max_seq: int, changed: dict[str, Aggregate],
               removed: set[str]) -> None:
        """Fold the entries ``base < seq <= max_seq`` into the aggregates (over a repair's pending result)."""
        parts, first_msg = group_range(sd, self.layout, base, max_seq)
        existing = self._existing(parts.keys() - changed.keys() - removed)
        existing.update((sid, changed[sid]) for sid in parts.keys() & changed.keys())
        need = [sid for sid in first_msg if sid not in existing or not existing[sid].preview_seq]
        add_texts(sd, self.layout, parts, first_msg, max_seq, need)
        for sid, part in parts.items():
            agg = existing.get(sid)
            if agg is None:
                agg = part
            else:
                agg.merge_later(part)
            changed[sid] = agg
            removed.discard(sid)

    def _repair(self, sd: SessionDir, base: int, changed: dict[str, Aggregate], removed: set[str]) -> bool:
        """Entries at or below ``base`` were deleted: recompute the sessions whose counts changed.

        False when so much changed that a full rebuild is cheaper.
        """
        seq = self.layout.seq
        hint = f" INDEXED BY {self.layout.entries_session_index}" if self.layout.entries_session_index else ""
        with sd.db.read() as conn:
            counts = {as_text(sid): as_int(n) for sid, n in conn.execute(
                f"SELECT CAST(session_id AS BLOB), count(*) FROM entries{hint} WHERE session_id IS NOT NULL AND {seq} <= ? "
                "GROUP BY session_id", (base,))}
        cached = dict(self.conn.execute("SELECT session_id, entry_count FROM agg").fetchall())
        affected = {sid for sid, n in cached.items() if counts.get(sid, 0) != n} | (counts.keys() - cached.keys())
        if len(affected) > max(2_000, len(cached) // 4):
            return False
        fresh = aggregate(sd, self.layout, 0, base, session_ids=affected) if affected else {}
        for sid in affected:
            if sid in fresh:
                changed[sid] = fresh[sid]
            else:
                removed.add(sid)
        return True

    def _samples(self, sd: SessionDir, previous: list[list[object]], max_seq: int) -> list[list[object]]:
        """(seq, entry id) pairs spread over the table; a different id at one of them means another database."""
        seq = self.layout.seq
        keep = [s for s in previous if as_int(s[0]) <= max_seq]
        with sd.db.read() as conn:
            if len(keep) < 4:
                keep = []
                for i in range(8):
                    row = conn.execute(f"SELECT {seq}, CAST(id AS BLOB) FROM entries WHERE {seq} >= ? "
                                       f"ORDER BY {seq} LIMIT 1", (max_seq * i // 8,)).fetchone()
                    if row is not None and [as_int(row[0]), as_text(row[1])] not in keep:
                        keep.append([as_int(row[0]), as_text(row[1])])
            top = conn.execute(f"SELECT {seq}, CAST(id AS BLOB) FROM entries WHERE {seq} = ?", (max_seq,)).fetchone()
        if top is not None:
            keep = [s for s in keep if s[0] != top[0]][-8:] + [[as_int(top[0]), as_text(top[1])]]
        return keep

    def _save(self, meta: _Meta, changed: dict[str, Aggregate], removed: set[str], *, full: bool,
              expected: str | None) -> bool:
        """Write a sync's result; False (nothing written) when another process changed the cache first."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = self._read_meta()
            if not full and (current.generation if current else None) != expected:
                conn.execute("ROLLBACK")
                self.meta = current
                return False
            if full:
                conn.execute("DELETE FROM agg")
            else:
                conn.executemany("DELETE FROM agg WHERE session_id = CAST(? AS TEXT)", [(bind(sid),) for sid in removed])
            conn.executemany(
                "INSERT OR REPLACE INTO agg VALUES (CAST(? AS TEXT),?,?,CAST(? AS TEXT),?,?,CAST(? AS TEXT),?,"
                "CAST(? AS TEXT))", [_agg_row(sid, agg) for sid, agg in changed.items()])
            conn.execute("INSERT OR REPLACE INTO meta (id, body) VALUES (1, ?)", (meta.to_text(),))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.meta = meta
        return True


def _agg_row(sid: str, agg: Aggregate) -> tuple[object, ...]:
    """An ``agg`` row's parameters, text bound as the bytes it was read from (see ``store.mothx.cells.bind``)."""
    return (bind(sid), agg.entry_count, agg.max_seq, None if agg.last_ts is None else bind(agg.last_ts),
            agg.message_count, agg.title_seq, bind(agg.title), agg.preview_seq, bind(agg.preview))
