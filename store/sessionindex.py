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

import hashlib
import json
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store import paths
from store.db import Database, describe_sqlite_error
from store.errors import StoreError
from store.schema import RUN_ACTIVE_STATUSES

if TYPE_CHECKING:
    from store.sessiondir import SessionDir

PREVIEW_CHARS = 60
CACHE_FORMAT = 2
PARALLEL_MIN_ROWS = 200_000     # below this many seq numbers a pass runs on the session's own connection
MAX_SCAN_WORKERS = 4
_IN_CHUNK = 500                 # parameters per IN (...) list
_FAR = 1 << 62


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
# What the aggregates take from entry JSON (one definition, used by every path)


def title_from_data(data: object) -> str:
    """The ``name`` of a ``session_info`` entry's JSON, ``""`` when it does not parse or has none."""
    obj = _loads(data)
    if obj is None:
        return ""
    name = obj.get("name")
    return name if isinstance(name, str) else ""


def preview_from_data(data: object) -> str | None:
    """The preview a ``message`` entry gives, or None when it is not a user message with text.

    A user message's text is its ``content`` string, else its first non-empty ``text`` block (``contents``,
    or ``content`` given as a list). Messages the runtime injected (``systemInjected``) are not the user's
    text and are skipped. Whitespace runs collapse to one space; more than 60 characters end in ``…``.
    """
    obj = _loads(data)
    if obj is None:
        return None
    msg = obj.get("message")
    if not isinstance(msg, dict) or msg.get("role") != "user" or msg.get("systemInjected") is True:
        return None
    text = " ".join((_message_text(msg) or "").split())
    if not text:
        return None
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return text


def _message_text(msg: dict[str, object]) -> str | None:
    content = msg.get("content")
    if isinstance(content, str) and content.strip():
        return content
    for blocks in (msg.get("contents"), content):
        if isinstance(blocks, list):
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "text":
                    text = block.get("text")
                    if isinstance(text, str) and text.strip():
                        return text
    return None


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODE = json.JSONDecoder(parse_constant=_no_constants).decode   # (json.loads with arguments builds one per call)


def _loads(data: object) -> dict[str, object] | None:
    """The entry's JSON object; None when it does not parse (NaN / Infinity are not JSON) or is no object."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if not isinstance(data, str):
        return None
    try:
        obj = _DECODE(data)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def as_int(value: object) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


# ----------------------------------------------------------------------------------------------------------
# The database's layout, as SQL fragments


@dataclass(frozen=True)
class Layout:
    seq: str                        # "seq" (or "rowid" for a layout without the column)
    cols: dict[str, str]            # list column -> SQL over sessions alias "s", as str / int (defaults if missing)
    raw: dict[str, str]             # list column -> the bare column "s.<name>" (or its default): for ORDER BY / WHERE
    has_metadata: bool
    has_projects: bool
    has_pinned: bool
    has_runs: bool
    runs_order: str
    has_sequence: bool
    entries_session_index: str | None

    def session_select(self, src: str, aggs: bool) -> str:
        """SELECT … FROM for list rows (fields of SessionSummary, in order) over schema prefix ``src``.

        With ``aggs`` the aggregates come from the cache's ``agg`` table; otherwise they are NULL / 0
        (the caller fills them in).
        """
        c = self.cols
        if aggs:
            title, preview, msgs = "COALESCE(a.title, '')", "COALESCE(a.preview, '')", "COALESCE(a.message_count, 0)"
            last = f"COALESCE(a.last_ts, {c['timestamp']})"
        else:
            title, preview, msgs, last = "''", "''", "0", c["timestamp"]
        project = project_name = "''"
        pinned = "0"
        joins = " LEFT JOIN agg a ON a.session_id = s.id" if aggs else ""
        if self.has_metadata:
            joins += f" LEFT JOIN {src}session_metadata m ON m.session_id = s.id"
            project = "COALESCE(CAST(m.project_id AS TEXT), '')"
            pinned = "COALESCE(m.pinned, 0) <> 0" if self.has_pinned else "0"
            if self.has_projects:
                joins += f" LEFT JOIN {src}projects p ON p.id = m.project_id"
                project_name = "COALESCE(CAST(p.name AS TEXT), '')"
        run = "''"
        if self.has_runs:
            marks = ",".join(f"'{s}'" for s in RUN_ACTIVE_STATUSES)
            run = (f"COALESCE((SELECT CAST(r.status AS TEXT) FROM {src}session_runs r WHERE r.session_id = s.id "
                   f"AND r.status IN ({marks}){self.runs_order} LIMIT 1), '')")
        fields = [c["id"], title, preview, c["cwd"], c["channel_type"], c["channel_id"], msgs, last, c["timestamp"],
                  c["parent_session"], c["fork_kind"], c["fork_boundary_seq"], c["seed_length"], project,
                  project_name, pinned, run]
        return f"SELECT {', '.join(fields)} FROM {src}sessions s{joins}"


def read_layout(sd: SessionDir) -> Layout:
    has = sd.schema.has
    defaults = (
        ("id", "''"), ("cwd", "''"), ("timestamp", "''"), ("parent_session", "''"), ("channel_type", "'local'"),
        ("channel_id", "''"), ("fork_boundary_seq", "0"), ("seed_length", "0"), ("fork_kind", "''"),
    )
    # Values come out as str / int whatever a foreign writer stored (NULLs, numbers in TEXT columns).
    cols = {
        c: (f"COALESCE(CAST(s.{c} AS {'INTEGER' if d == '0' else 'TEXT'}), {d})" if has("sessions", c) else d)
        for c, d in defaults
    }
    raw = {c: (f"s.{c}" if has("sessions", c) else d) for c, d in defaults}
    with sd.db.read() as conn:
        names = {r[0]: r[1] for r in conn.execute("SELECT name, tbl_name FROM sqlite_master")}
    return Layout(
        seq="seq" if has("entries", "seq") else "rowid",
        cols=cols,
        raw=raw,
        has_metadata=has("session_metadata", "session_id") and has("session_metadata", "project_id"),
        has_projects=has("projects", "id") and has("projects", "name"),
        has_pinned=has("session_metadata", "pinned"),
        has_runs=has("session_runs", "session_id") and has("session_runs", "status"),
        runs_order=" ORDER BY r.started_at DESC" if has("session_runs", "started_at") else "",
        has_sequence="sqlite_sequence" in names,
        entries_session_index="idx_entries_session_id" if names.get("idx_entries_session_id") == "entries" else None,
    )


# ----------------------------------------------------------------------------------------------------------
# Per-session aggregates over a seq range


class Aggregate:
    """Aggregates of one session id's entries within a ``seq`` range."""

    __slots__ = ("entry_count", "max_seq", "last_ts", "message_count", "title_seq", "title", "preview_seq", "preview")

    def __init__(self, entry_count: int = 0, max_seq: int = 0, last_ts: str | None = None, message_count: int = 0,
                 title_seq: int = 0, title: str = "", preview_seq: int = 0, preview: str = "") -> None:
        self.entry_count = entry_count
        self.max_seq = max_seq
        self.last_ts = last_ts          # MAX(entries.timestamp), textual; None when no entries
        self.message_count = message_count
        self.title_seq = title_seq      # seq of the newest session_info entry (0: none)
        self.title = title
        self.preview_seq = preview_seq  # seq of the first user-text message (0: none in the range)
        self.preview = preview

    def as_tuple(self) -> tuple[object, ...]:
        return (self.entry_count, self.max_seq, self.last_ts, self.message_count, self.title_seq, self.title,
                self.preview_seq, self.preview)

    def merge_later(self, later: Aggregate) -> None:
        """Fold in the aggregates of a later seq range of the same session."""
        self.entry_count += later.entry_count
        self.message_count += later.message_count
        self.max_seq = max(self.max_seq, later.max_seq)
        if later.last_ts is not None and (self.last_ts is None or later.last_ts > self.last_ts):
            self.last_ts = later.last_ts
        if later.title_seq > self.title_seq:
            self.title_seq, self.title = later.title_seq, later.title
        if not self.preview_seq and later.preview_seq:
            self.preview_seq, self.preview = later.preview_seq, later.preview


def _group_sql(seq: str, where: str) -> str:
    # Entries without a session id cannot be listed; they are left out of every aggregate and count.
    return (
        f"SELECT session_id, MAX(timestamp), COUNT(*), SUM(type = 'message'), MAX({seq}), "
        f"MAX(CASE WHEN type = 'session_info' THEN {seq} END), MIN(CASE WHEN type = 'message' THEN {seq} END) "
        f"FROM entries WHERE {seq} > ? AND {seq} <= ? AND session_id IS NOT NULL{where} GROUP BY session_id"
    )


def _chunks(items: list, size: int = _IN_CHUNK) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def reader_uri(db: Database) -> str:
    """A URI that reads what ``db``'s own connection reads, never writing to the session directory."""
    def uri(path: Path, params: str) -> str:
        return f"file:{urllib.parse.quote(str(path.absolute()))}?{params}"

    if db.private_copy is not None:
        return uri(db.private_copy / db.path.name, "mode=ro")
    if db.access.startswith("immutable"):
        return uri(db.path, "immutable=1")
    return uri(db.path, "mode=ro")   # "wal" (read-write), "mode=ro", "mode=ro (live)"


class Scanner:
    """Runs range queries over ``entries`` on the session's connection, or split over extra read connections."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.workers = max(1, min(MAX_SCAN_WORKERS, os.cpu_count() or 1))

    def ranged(self, sql: str, params: tuple[object, ...], lo: int, hi: int) -> list[tuple]:
        """Rows of ``sql`` over ``lo < seq <= hi`` (its first two parameters), in ascending range order."""
        span = hi - lo
        if self.workers <= 1 or span < PARALLEL_MIN_ROWS:
            with self.db.read() as conn:
                return conn.execute(sql, (lo, hi, *params)).fetchall()
        from concurrent.futures import ThreadPoolExecutor  # (only big passes need it; it costs ~10 ms to import)

        bounds = [lo + span * i // self.workers for i in range(self.workers)] + [hi]
        target = reader_uri(self.db)

        def run(i: int) -> list[tuple]:
            conn = sqlite3.connect(target, uri=True, isolation_level=None, check_same_thread=False, timeout=10)
            try:
                conn.execute("PRAGMA query_only = ON")
                return conn.execute(sql, (bounds[i], bounds[i + 1], *params)).fetchall()
            finally:
                conn.close()

        try:
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                parts = list(pool.map(run, range(self.workers)))
        except sqlite3.Error as exc:
            raise describe_sqlite_error(self.db.path, exc) from exc
        return [row for part in parts for row in part]


def group_range(sd: SessionDir, layout: Layout, lo: int, hi: int, *, session_ids: Iterable[str] | None = None,
                parallel: bool = True) -> tuple[dict[str, Aggregate], dict[str, int]]:
    """Counts, last timestamp and title seq per session for ``lo < seq <= hi``; and each one's first message seq."""
    seq = layout.seq
    if session_ids is None:
        sql = _group_sql(seq, "")
        if parallel:
            raw = Scanner(sd.db).ranged(sql, (), lo, hi)
        else:
            with sd.db.read() as conn:
                raw = conn.execute(sql, (lo, hi)).fetchall()
    else:
        raw = []
        with sd.db.read() as conn:
            for chunk in _chunks(sorted(set(session_ids))):
                where = f" AND session_id IN ({','.join('?' * len(chunk))})"
                raw.extend(conn.execute(_group_sql(seq, where), (lo, hi, *chunk)).fetchall())
    parts: dict[str, Aggregate] = {}
    first_msg: dict[str, int] = {}
    for sid, last_ts, count, msgs, max_seq, title_seq, msg_seq in raw:   # split ranges arrive in ascending order
        key = as_text(sid)
        part = Aggregate(as_int(count), as_int(max_seq), None if last_ts is None else as_text(last_ts), as_int(msgs),
                         as_int(title_seq))
        if msg_seq is not None and key not in first_msg:
            first_msg[key] = int(msg_seq)
        if key in parts:
            parts[key].merge_later(part)
        else:
            parts[key] = part
    return parts, first_msg


def add_texts(sd: SessionDir, layout: Layout, parts: dict[str, Aggregate], first_msg: dict[str, int], hi: int,
              need_preview: Iterable[str]) -> None:
    """Fill in titles (newest ``session_info``) and, for ``need_preview`` sessions, previews up to ``hi``."""
    seq = layout.seq
    with sd.db.read() as conn:
        titles = _fetch_data(conn, seq, [a.title_seq for a in parts.values() if a.title_seq])
        for agg in parts.values():
            if agg.title_seq:
                agg.title = title_from_data(titles.get(agg.title_seq))
        wanted = {sid: first_msg[sid] for sid in need_preview if sid in first_msg}
        firsts = _fetch_data(conn, seq, list(wanted.values()))
        for sid, msg_seq in wanted.items():
            text = preview_from_data(firsts.get(msg_seq))
            found = msg_seq
            if text is None:
                found, text = _scan_preview(conn, seq, sid, msg_seq, hi)
            if found:
                parts[sid].preview_seq, parts[sid].preview = found, text


def aggregate(sd: SessionDir, layout: Layout, lo: int, hi: int, *, session_ids: Iterable[str] | None = None,
              parallel: bool = True) -> dict[str, Aggregate]:
    """Complete aggregates (with titles and previews) of the entries with ``lo < seq <= hi``."""
    parts, first_msg = group_range(sd, layout, lo, hi, session_ids=session_ids, parallel=parallel)
    add_texts(sd, layout, parts, first_msg, hi, first_msg.keys())
    return parts


def _fetch_data(conn: sqlite3.Connection, seq: str, seqs: list[int]) -> dict[int, object]:
    found: dict[int, object] = {}
    for chunk in _chunks(sorted(set(seqs))):
        sql = f"SELECT {seq}, data FROM entries WHERE {seq} IN ({','.join('?' * len(chunk))})"
        for s, data in conn.execute(sql, chunk):
            found[s] = data
    return found


def _scan_preview(conn: sqlite3.Connection, seq: str, sid: str, after: int, hi: int) -> tuple[int, str]:
    """The first user-text message of ``sid`` with ``after < seq <= hi``: (seq, preview), or (0, "")."""
    cur = conn.execute(
        f"SELECT {seq}, data FROM entries WHERE session_id = ? AND type = 'message' AND {seq} > ? AND {seq} <= ? "
        f"ORDER BY {seq}",
        (sid, after, hi),
    )
    try:
        for s, data in cur:
            text = preview_from_data(data)
            if text is not None:
                return int(s), text
    finally:
        cur.close()
    return 0, ""


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
    key = hashlib.sha256(os.path.realpath(db_path).encode("utf-8", "surrogateescape")).hexdigest()
    return paths.cache_dir() / "index" / f"{key}.db"


def _open_cache(path: Path | None, src_uri: str) -> sqlite3.Connection:
    """The cache connection (``path``, or memory when None) with ``sessions.db`` attached as ``src``."""
    target = f"file:{urllib.parse.quote(str(path))}" if path is not None else "file::memory:"
    conn = sqlite3.connect(target, uri=True, isolation_level=None, check_same_thread=False, timeout=5)
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


@dataclass
class _Checks:
    token: tuple[int, int]
    max_seq: int
    high_water: int
    covered_now: int            # entries with a session id and seq <= the cached max_seq, as the database has them
    sample_conflict: bool


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
            raise StoreError(f"The session list cannot read {self.db_key}: SQLite says '{exc}'.") from exc

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

    def _checks(self, conn: sqlite3.Connection) -> _Checks:
        seq = self.layout.seq
        max_seq = as_int(conn.execute(f"SELECT MAX({seq}) FROM entries").fetchone()[0])
        high_water = max_seq
        if self.layout.has_sequence:
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
            if row is not None:
                high_water = max(high_water, as_int(row[0]))
        covered_now = 0
        conflict = False
        if self.meta is not None:
            base = self.meta.max_seq
            total = as_int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
            newer = as_int(conn.execute(f"SELECT count(*) FROM entries WHERE {seq} > ?", (base,)).fetchone()[0])
            orphans = as_int(conn.execute(
                f"SELECT count(*) FROM entries WHERE session_id IS NULL AND {seq} <= ?", (base,)).fetchone()[0])
            covered_now = total - newer - orphans
            for s, eid in self.meta.samples:
                row = conn.execute(f"SELECT id FROM entries WHERE {seq} = ?", (s,)).fetchone()
                if row is not None and as_text(row[0]) != eid:
                    conflict = True
                    break
        return _Checks(self._token(conn), max_seq, high_water, covered_now, conflict)

    def _sync(self, sd: SessionDir, *, full: bool) -> None:
        # The cache file is the truth (another process may have moved it on since our last sync).
        meta = self.meta = self._read_meta()
        with sd.db.read() as conn:
            checks = self._checks(conn)
        rebuild = full or meta is None or checks.sample_conflict or checks.high_water < meta.high_water
        changed: dict[str, Aggregate] = {}
        removed: set[str] = set()
        kind = "unchanged"
        if not rebuild and meta is not None:
            covered = as_int(self.conn.execute("SELECT COALESCE(SUM(entry_count), 0) FROM agg").fetchone()[0])
            if checks.covered_now != covered:
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
        for chunk in _chunks(sorted(sids)):
            for row in self.conn.execute(
                f"SELECT * FROM agg WHERE session_id IN ({','.join('?' * len(chunk))})", chunk
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
                f"SELECT session_id, count(*) FROM entries{hint} WHERE session_id IS NOT NULL AND {seq} <= ? "
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
                    row = conn.execute(f"SELECT {seq}, id FROM entries WHERE {seq} >= ? ORDER BY {seq} LIMIT 1",
                                       (max_seq * i // 8,)).fetchone()
                    if row is not None and [int(row[0]), as_text(row[1])] not in keep:
                        keep.append([int(row[0]), as_text(row[1])])
            top = conn.execute(f"SELECT {seq}, id FROM entries WHERE {seq} = ?", (max_seq,)).fetchone()
        if top is not None:
            keep = [s for s in keep if s[0] != top[0]][-8:] + [[int(top[0]), as_text(top[1])]]
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
                conn.executemany("DELETE FROM agg WHERE session_id = ?", [(sid,) for sid in removed])
            conn.executemany("INSERT OR REPLACE INTO agg VALUES (?,?,?,?,?,?,?,?,?)",
                             [(sid, *agg.as_tuple()) for sid, agg in changed.items()])
            conn.execute("INSERT OR REPLACE INTO meta (id, body) VALUES (1, ?)", (meta.to_text(),))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.meta = meta
        return True
