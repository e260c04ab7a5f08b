"""The full-text side index: an FTS5 file of our own, outside the session directory, kept up to date cheaply.

It lives beside the session list's aggregate cache (:mod:`store.mothx.sessionindex`), as its own file:
``paths.cache_dir()/index/<sha256 of the database's real path>.search.db``. Two FTS5 tables:

* ``entry_fts``: one row per mothx entry that has searchable text (:func:`store.search.text.entry_text`),
  ``rowid`` = ``entries.seq``, with the session id, entry id, role and entry type beside the text;
* ``record_fts``: one row per captured record (a line of a Claude Code / Codex transcript in the checkpoint file
  ``sessionscope/agent-state.db``) with text, ``rowid`` = the line's rowid, with agent, agent session id, file and
  line number.

Both are refreshed incrementally, each from its own monotonic key: entries are append-only with an
AUTOINCREMENT ``seq``, so only ``seq`` above the indexed maximum is read; captured lines are only ever added
(a new rowid, above the indexed maximum). Each side is rebuilt when its source is not the one the index
describes: the AUTOINCREMENT high-water mark went down, a sampled key now holds another row, or the number of
rows at or below the indexed maximum changed (rows were deleted) — the same identity checks as the list cache.
A build commits in chunks, each one re-checking under the write lock that the index is where it left it, so an
interrupted build resumes and two processes building at once never index a row twice.

Everything is read through the session directory's own connections (``sd.db.read()``, the checkpoint file
opened in the directory's mode), so a read mode builds the index without writing a byte to the directory. When
the cache folder cannot be written the index is not available (``SearchIndex.open`` returns None) and search
answers with the exact LIKE scan instead.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from store import paths
from store.mothx.aggregates import read_layout
from store.mothx.cells import as_int, as_text, bind
from store.search.text import entry_text, record_text

try:
    from _sha256 import sha256
except ImportError:  # pragma: no cover - other interpreters
    from hashlib import sha256

if TYPE_CHECKING:
    from store.mothx.db import Database
    from store.mothx.sessiondir import SessionDir

FORMAT = 5
"""Bumped whenever what the index holds changes meaning; an index of another format is emptied and rebuilt
(format 5: the file is laid out in :data:`PAGE_SIZE` pages)."""
PAGE_SIZE = 32_768
"""The index file's page size (SQLite's default is 4 KiB). Ranking every hit of a common word looks up each hit's
document length (``bm25``) in a fresh connection's empty page cache; bigger pages make those B-trees shallower
and the reads fewer: about a fifth off the ranking statement of the search benchmark."""
CHUNK = 20_000
"""Keys (seq numbers, line rowids) read and committed per step of a build."""
MAX_SAMPLES = 16

_DDL = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS entry_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS entry_sessions (sno INTEGER PRIMARY KEY, session_id NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS entry_meta (seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL, entry_id TEXT NOT NULL, "
    "role TEXT NOT NULL, entry_type TEXT NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS record_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS record_meta (line_key INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, "
    "agent_session_id TEXT NOT NULL, file_path TEXT NOT NULL, line_number INTEGER NOT NULL)",
)
"""The text lives in FTS5 tables, the facts beside it in plain tables, so ranking all hits reads no stored text
(an FTS5 row's columns come back only with its whole text). An entry's FTS rowid is ``sno << SEQ_BITS | seq``
(``sno`` its session's number in ``entry_sessions``), so the hits group by session with no lookup per hit."""
SEQ_BITS = 40
SEQ_MASK = (1 << SEQ_BITS) - 1
MAX_SNO = (1 << (63 - SEQ_BITS)) - 1


def index_path_for(db_path: Path) -> Path:
    """Where the search index of the database at ``db_path`` lives (never inside its directory)."""
    key = sha256(os.path.realpath(db_path).encode("utf-8", "surrogateescape")).hexdigest()
    return paths.cache_dir() / "index" / f"{key}.search.db"


def fts_text(text: str) -> str:
    """``text`` as SQLite can store it: a lone surrogate (bytes that were not UTF-8) becomes U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


@dataclass
class SideMeta:
    """What one side of the index covers (``entries`` or ``records``), kept as JSON in ``meta``."""

    source: str = ""            # the real path of the database the side describes
    high_water: int = 0         # entries: the AUTOINCREMENT mark (or max seq); records: max rowid
    max_key: int = 0            # rows with key <= max_key are indexed
    covered: int = 0            # rows with key <= max_key in the source when they were indexed
    samples: list[list[object]] = field(default_factory=list)   # [key, identity] pairs
    generation: str = ""
    format: int = FORMAT

    def to_text(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_text(cls, text: str | None) -> SideMeta | None:
        if text is None:
            return None
        try:
            obj = json.loads(text)
            meta = cls(source=str(obj["source"]), high_water=int(obj["high_water"]), max_key=int(obj["max_key"]),
                       covered=int(obj["covered"]), samples=[[int(k), str(i)] for k, i in obj["samples"]],
                       generation=str(obj["generation"]), format=int(obj["format"]))
        except (ValueError, KeyError, TypeError):
            return None
        return meta if meta.format == FORMAT else None


@dataclass(frozen=True)
class SearchIndexInfo:
    path: Path
    last_sync: str              # "cold" | "rebuild" | "incremental" | "unchanged" | ""
    last_sync_seconds: float
    entries: int                # entries indexed (with text)
    records: int                # captured records indexed (with text)
    max_seq: int


class SearchIndex:
    """The FTS side index of one open ``SessionDir``. ``conn`` (guarded by ``lock``) reads the FTS tables."""

    def __init__(self, path: Path, conn: sqlite3.Connection, sd: SessionDir) -> None:
        self.path = path
        self.conn = conn
        self.lock = threading.RLock()
        self.db_key = os.path.realpath(sd.db.path)
        self.seq = read_layout(sd).seq
        self.token: tuple[int, int, int] | None = None
        self.last_sync = ""
        self.last_sync_seconds = 0.0

    @classmethod
    def open(cls, sd: SessionDir, path: Path | None = None) -> SearchIndex | None:
        """The index of ``sd`` (created when missing); None when the cache folder cannot be written."""
        path = path or index_path_for(sd.db.path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
                return None
            try:
                conn = _connect(path)
            except sqlite3.DatabaseError:
                for p in (path, *paths.companions(path)):   # a damaged index is rebuilt
                    p.unlink(missing_ok=True)
                conn = _connect(path)
        except (OSError, sqlite3.Error):
            return None
        return cls(path, conn, sd)

    def close(self) -> None:
        with self.lock:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass

    # -- meta -------------------------------------------------------------------------------------------

    def meta(self, side: str) -> SideMeta | None:
        row = self.conn.execute("SELECT body FROM meta WHERE name = ?", (side,)).fetchone()
        return SideMeta.from_text(row[0] if row else None)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def info(self) -> SearchIndexInfo:
        with self.lock:
            entries = as_int(self.conn.execute("SELECT count(*) FROM entry_meta").fetchone()[0])
            records = as_int(self.conn.execute("SELECT count(*) FROM record_meta").fetchone()[0])
            meta = self.meta("entries")
            return SearchIndexInfo(self.path, self.last_sync, self.last_sync_seconds, entries, records,
                                   meta.max_key if meta else 0)

    # -- sync -------------------------------------------------------------------------------------------

    def ensure(self, sd: SessionDir, *, captured: bool = True) -> None:
        """Bring the index up to date when the database (or the checkpoint file) changed since the last sync."""
        with self.lock:
            token = _token(sd, captured)
            if token is not None and token == self.token:
                return
            self.sync(sd, captured=captured)
            self.token = token

    def sync(self, sd: SessionDir, *, full: bool = False, captured: bool = True) -> None:
        with self.lock:
            started = time.perf_counter()
            kinds = [self._sync_entries(sd, full)]
            if captured:
                kinds.append(self._sync_records(sd, full))
            order = ("rebuild", "cold", "incremental", "unchanged")
            self.last_sync = min(kinds, key=order.index)
            self.last_sync_seconds = time.perf_counter() - started

    def _sync_entries(self, sd: SessionDir, full: bool) -> str:
        from store.mothx import checkcache

        seq = self.seq
        meta = self.meta("entries")
        # The identity checks passed on these very files before (same inode, size, times): they hold still.
        before = checkcache.identity(sd.db.path) if sd.db.private_copy is None else None
        mark = [meta.max_key, meta.generation, str(self.path)] if meta is not None else None
        if not full and mark is not None and checkcache.recall("search-index", sd.db.path, before) == mark:
            return "unchanged"
        with sd.db.read() as conn:
            max_seq = as_int(conn.execute(f"SELECT MAX({seq}) FROM entries").fetchone()[0])
            high_water = max_seq
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
                row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
                if row is not None:
                    high_water = max(high_water, as_int(row[0]))
            stale = full or meta is None or meta.source != self.db_key or high_water < meta.high_water
            if not stale and meta is not None:
                # (count(*) of the whole table runs on its smallest index; a seq range would read every row)
                covered = as_int(conn.execute("SELECT count(*) FROM entries").fetchone()[0]) - as_int(conn.execute(
                    f"SELECT count(*) FROM entries WHERE {seq} > ?", (meta.max_key,)).fetchone()[0])
                stale = covered != meta.covered or any(
                    _entry_identity(conn, seq, as_int(k)) != ident for k, ident in meta.samples)
        kind = "unchanged"
        if stale:
            kind = "cold" if meta is None and not full else "rebuild"
            meta = self._reset("entries", "entry_fts")
        assert meta is not None
        if max_seq > meta.max_key and kind == "unchanged":
            kind = "incremental"
        while meta is not None and meta.max_key < max_seq:
            meta = self._step_entries(sd, meta, min(meta.max_key + CHUNK, max_seq), high_water)
        if meta is not None and meta.max_key == max_seq:
            checkcache.remember("search-index", sd.db.path, before, [meta.max_key, meta.generation, str(self.path)])
        return kind

    def _reset(self, side: str, table: str, source: str | None = None) -> SideMeta:
        meta = SideMeta(source=self.db_key if source is None else source, generation=os.urandom(8).hex())
        with self._write() as conn:
            conn.execute(f"DELETE FROM {table}")
            conn.execute(f"DELETE FROM {table.replace('_fts', '_meta')}")
            if table == "entry_fts":
                conn.execute("DELETE FROM entry_sessions")
            conn.execute("INSERT OR REPLACE INTO meta (name, body) VALUES (?, ?)", (side, meta.to_text()))
        return meta

    def _step_entries(self, sd: SessionDir, meta: SideMeta, hi: int, high_water: int) -> SideMeta | None:
        """Index the entries ``meta.max_key < seq <= hi``; the meta as written (None: another process moved the
        index somewhere else; the next sync starts over from what it wrote)."""
        seq = self.seq
        lo = meta.max_key
        with sd.db.read() as conn:
            rows = conn.execute(
                f"SELECT {seq}, CAST(session_id AS BLOB), CAST(id AS BLOB), CAST(type AS BLOB), data FROM entries "
                f"WHERE {seq} > ? AND {seq} <= ? ORDER BY {seq}", (lo, hi)).fetchall()
        values = []
        for s, sid, eid, etype, data in rows:
            if sid is None:
                continue
            kind = as_text(etype)
            text, role = entry_text(kind, data)
            if text and 0 < as_int(s) <= SEQ_MASK:  # (a seq past 2**40 has no row: the LIKE fallback finds it)
                values.append((as_int(s), fts_text(text), bind(as_text(sid)), bind(as_text(eid)), bind(role),
                               bind(kind)))
        with self._write() as conn:
            current = self.meta("entries")
            if current is None or current.generation != meta.generation or current.max_key != lo:
                return None if current is None or current.generation != meta.generation else current
            numbers = _session_numbers(conn, {v[2] for v in values})
            conn.executemany("INSERT INTO entry_fts (rowid, text) VALUES (?, ?)",
                             [(numbers[v[2]] << SEQ_BITS | v[0], v[1]) for v in values])
            conn.executemany("INSERT INTO entry_meta (seq, session_id, entry_id, role, entry_type) "
                             "VALUES (?, ?, ?, ?, ?)", [(v[0], *v[2:]) for v in values])
            samples = list(meta.samples)
            if rows:
                samples.append([as_int(rows[-1][0]), as_text(rows[-1][2])])
            new = SideMeta(source=meta.source, high_water=max(high_water, hi), max_key=hi,
                           covered=meta.covered + len(rows), samples=_thin(samples), generation=meta.generation)
            conn.execute("UPDATE meta SET body = ? WHERE name = 'entries'", (new.to_text(),))
        return new

    def _sync_records(self, sd: SessionDir, full: bool) -> str:
        db = _state_db(sd)
        meta = self.meta("records")
        if db is None:
            if meta is None or meta.source or meta.max_key:
                self._reset("records", "record_fts", source="")
                return "cold" if meta is None else "rebuild"
            return "unchanged"
        try:
            source = os.path.realpath(db.path)
            with db.read() as conn:
                if not _has_lines(conn):
                    max_key = 0
                else:
                    max_key = as_int(conn.execute("SELECT MAX(rowid) FROM agent_state_lines").fetchone()[0])
                stale = full or meta is None or meta.source != source or max_key < meta.max_key
                if not stale and meta is not None and meta.max_key:
                    covered = as_int(conn.execute("SELECT count(*) FROM agent_state_lines WHERE rowid <= ?",
                                                  (meta.max_key,)).fetchone()[0])
                    stale = covered != meta.covered or any(
                        _line_identity(conn, as_int(k)) != ident for k, ident in meta.samples)
            kind = "unchanged"
            if stale:
                kind = "cold" if meta is None and not full else "rebuild"
                meta = self._reset("records", "record_fts", source=source)
            assert meta is not None
            if max_key > meta.max_key and kind == "unchanged":
                kind = "incremental"
            while meta is not None and meta.max_key < max_key:
                meta = self._step_records(db, meta, min(meta.max_key + CHUNK, max_key))
            return kind
        finally:
            db.close()

    def _step_records(self, db: Database, meta: SideMeta, hi: int) -> SideMeta | None:
        lo = meta.max_key
        with db.read() as conn:
            rows = conn.execute(
                "SELECT l.rowid, CAST(s.agent_id AS BLOB), CAST(s.agent_session_id AS BLOB), "
                "CAST(l.file_path AS BLOB), l.line_number, l.content, CAST(l.session_id AS BLOB) "
                "FROM agent_state_lines l LEFT JOIN agent_state_sessions s ON s.session_id = l.session_id "
                "WHERE l.rowid > ? AND l.rowid <= ? ORDER BY l.rowid", (lo, hi)).fetchall()
        values = []
        for rowid, agent, asid, fpath, line, content, _sid in rows:
            text = record_text(content)
            if text:
                values.append((rowid, fts_text(text), bind(as_text(agent)), bind(as_text(asid)),
                               bind(as_text(fpath)), as_int(line)))
        with self._write() as conn:
            current = self.meta("records")
            if current is None or current.generation != meta.generation or current.max_key != lo:
                return None if current is None or current.generation != meta.generation else current
            conn.executemany("INSERT INTO record_fts (rowid, text) VALUES (?, ?)", [v[:2] for v in values])
            conn.executemany("INSERT INTO record_meta (line_key, agent_id, agent_session_id, file_path, line_number) "
                             "VALUES (?, ?, ?, ?, ?)",
                             [(v[0], *v[2:]) for v in values])
            samples = list(meta.samples)
            if rows:
                last = rows[-1]
                samples.append([as_int(last[0]), _line_key(last[6], last[3], last[4])])
            new = SideMeta(source=meta.source, high_water=hi, max_key=hi, covered=meta.covered + len(rows),
                           samples=_thin(samples), generation=meta.generation)
            conn.execute("UPDATE meta SET body = ? WHERE name = 'records'", (new.to_text(),))
        return new


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=10)
    # Text comes back as str (C-decoded: every stored text is UTF-8); an id that is not UTF-8 is stored as the
    # BLOB of its bytes (``store.mothx.cells.bind``) and comes back as bytes (``as_text`` decodes it).
    try:
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")     # (takes effect in a new file only)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute(_DDL[0])
        bodies = [r[0] for r in conn.execute("SELECT body FROM meta")]
        if any(SideMeta.from_text(b) is None for b in bodies):     # another format: start over
            for table in ("entry_fts", "entry_meta", "entry_sessions", "record_fts", "record_meta"):
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute("DELETE FROM meta")
            _repage(conn)
        for ddl in _DDL[1:]:
            conn.execute(ddl)
    except BaseException:
        conn.close()
        raise
    return conn


def _repage(conn: sqlite3.Connection) -> None:
    """Lay an emptied index out in :data:`PAGE_SIZE` pages (and give its space back). Another process holding the
    file open keeps it as it is: the index works in any page size."""
    if int(conn.execute("PRAGMA page_size").fetchone()[0]) == PAGE_SIZE:
        return
    try:
        if str(conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower() == "delete":
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            conn.execute("VACUUM")
    except sqlite3.OperationalError:
        pass
    finally:
        conn.execute("PRAGMA journal_mode = WAL")


def _session_numbers(conn: sqlite3.Connection, sids: set[str | bytes]) -> dict[str | bytes, int]:
    """The numbers of ``sids`` in ``entry_sessions`` (new ones added)."""
    found: dict[str | bytes, int] = {}
    ordered = list(sids)
    for i in range(0, len(ordered), 500):
        chunk = ordered[i:i + 500]
        marks = ",".join("?" * len(chunk))
        conn.executemany("INSERT OR IGNORE INTO entry_sessions (session_id) VALUES (?)", [(x,) for x in chunk])
        for sno, sid in conn.execute(f"SELECT sno, session_id FROM entry_sessions WHERE session_id IN ({marks})", chunk):
            found[sid] = sno
    if any(n > MAX_SNO for n in found.values()):
        raise sqlite3.DataError("too many sessions for the search index")
    return found


def _thin(samples: list[list[object]]) -> list[list[object]]:
    """At most :data:`MAX_SAMPLES` samples spread over the keys (every other one dropped, the newest kept)."""
    while len(samples) > MAX_SAMPLES:
        samples = samples[-2::-2][::-1] + [samples[-1]]
    return samples


def _entry_identity(conn: sqlite3.Connection, seq: str, key: int) -> str:
    row = conn.execute(f"SELECT CAST(id AS BLOB) FROM entries WHERE {seq} = ?", (key,)).fetchone()
    return as_text(row[0]) if row is not None else "\0gone"


def _line_key(sid: object, fpath: object, line: object) -> str:
    return f"{as_text(sid)}\0{as_text(fpath)}\0{as_int(line)}"


def _line_identity(conn: sqlite3.Connection, key: int) -> str:
    row = conn.execute("SELECT CAST(session_id AS BLOB), CAST(file_path AS BLOB), line_number "
                       "FROM agent_state_lines WHERE rowid = ?", (key,)).fetchone()
    return _line_key(*row) if row is not None else "\0gone"


def _has_lines(conn: sqlite3.Connection) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_state_lines'")
                .fetchone()) and bool(conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agent_state_sessions'").fetchone())


def _state_db(sd: SessionDir) -> Database | None:
    """The checkpoint file opened in the directory's mode (None when there is none)."""
    from store.agents.checkpoint_db import open_state_db
    from store.errors import StoreError
    from store.mothx.db import Database

    try:
        db = open_state_db(sd)
    except (StoreError, sqlite3.Error, OSError):
        return None
    # A PostgreSQL team store is not indexed here: it keeps its own index (store.search.team); no rows here.
    if isinstance(db, Database) or db is None:
        return db
    db.close()
    return None


def _token(sd: SessionDir, captured: bool) -> tuple[int, int, int] | None:
    """What changes when ``sessions.db`` (or the checkpoint file) changes, as far as this process can tell."""
    with sd.db.read() as conn:
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        changes = conn.total_changes
    state = 0
    if captured:
        from store.agents.checkpoint_db import state_db_path

        try:
            st = state_db_path(sd).stat()
            state = st.st_mtime_ns ^ st.st_size ^ st.st_ino
            wal = Path(f"{state_db_path(sd)}-wal")
            if wal.exists():
                ws = wal.stat()
                state ^= (ws.st_mtime_ns * 3) ^ ws.st_size
        except OSError:
            state = -1
    return (version, changes, state)
