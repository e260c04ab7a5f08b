"""Per-session aggregates over ``entries``: what the session list shows beside the ``sessions`` columns.

For the entries of a ``seq`` range (or of some sessions): count, message count, ``MAX(timestamp)`` (textual,
as the reference compares), the newest ``session_info`` (title) and the first message's user text, cut to 60 bytes (preview,
reference 5.2). One grouped pass computes the numbers; the title and preview rows are then read by primary key
and parsed here, with one definition shared by every caller. Cells are read whatever a foreign writer stored
(text as BLOBs decoded with ``surrogateescape``: :mod:`store.mothx.cells`). Titles and previews are raw data:
the UI shows them through the safe-text boundary. A big pass is split by ``seq`` range over extra read-only
connections that read the database the way the session's own connection does (``immutable=1``, ``mode=ro``
or its private copy), so nothing is ever written to the session directory.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store.mothx.cells import as_int, as_text, bind, decode
from store.mothx.db import Database
from store.mothx.db_errors import describe_sqlite_error
from store.mothx.jsonvalue import is_json_str, json_str, parse_object
from store.mothx.schema import RUN_ACTIVE_STATUSES

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

PREVIEW_BYTES = 60
"""Reference 5.2: a preview holds at most 60 bytes of the text (then ``...``)."""
PREVIEW_CHARS = PREVIEW_BYTES  # (the old name)
PARALLEL_MIN_ROWS = 200_000     # below this many seq numbers a pass runs on the session's own connection
MAX_SCAN_WORKERS = 4
_IN_CHUNK = 500                 # parameters per IN (...) list

# ----------------------------------------------------------------------------------------------------------
# What the aggregates take from entry JSON (one definition, used by every path)


def title_from_data(data: object) -> str:
    """The ``name`` of a ``session_info`` entry's JSON, ``""`` when it does not parse or has none.

    Raw data: the UI shows it through the safe-text boundary (``one_line``)."""
    obj, _ = parse_object(data)
    if obj is None:
        return ""
    return json_str(obj.get("name"))


def preview_from_data(data: object) -> str | None:
    """The preview the session's first ``message`` entry gives (reference 5.2), or None when it is not a
    ``user`` message with text.

    The text is the message's ``content`` string, else its first non-empty ``text`` block (``contents``, or
    ``content`` given as a list), as the runtime has it (not collapsed: raw data, shown through ``one_line``),
    cut by :func:`cut_preview`.
    """
    obj, _ = parse_object(data)
    if obj is None:
        return None
    msg = obj.get("message")
    if not isinstance(msg, dict) or msg.get("role") != "user":
        return None
    text = _message_text(msg)
    return cut_preview(text) if text else None


def utf8_bytes(text: str) -> bytes:
    """``text`` as the bytes it came from (``\\udcXX`` back to its byte; any other lone surrogate as the
    three bytes a lenient encoder writes)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def cut_preview(text: str, limit: int = PREVIEW_BYTES) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes at a character boundary, then ``...`` (reference 5.2:
    a longer text is at most 63 bytes). Bytes that are not UTF-8 (``\\udcXX``) count as one byte each; the cut
    backs up over continuation bytes as a byte-wise cut does."""
    if len(text) * 4 <= limit:
        return text
    raw = utf8_bytes(text)
    if len(raw) <= limit:
        return text
    cut = limit
    while cut > 0 and (raw[cut] & 0xC0) == 0x80:
        cut -= 1
    return raw[:cut].decode("utf-8", "surrogateescape") + "..."


def _message_text(msg: dict[str, object]) -> str | None:
    content = msg.get("content")
    if is_json_str(content) and content:
        return content
    for blocks in (msg.get("contents"), content):
        if isinstance(blocks, list):
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "text":
                    text = block.get("text")
                    if is_json_str(text) and text:
                        return text
    return None


# ----------------------------------------------------------------------------------------------------------
# The database's layout, as SQL fragments


SESSION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "''"), ("cwd", "''"), ("timestamp", "''"), ("parent_session", "''"), ("channel_type", "'local'"),
    ("channel_id", "''"), ("fork_boundary_seq", "0"), ("seed_length", "0"), ("fork_kind", "''"),
)
"""The ``sessions`` columns a list row reads, with the value a layout without the column gives."""
INT_COLUMNS = frozenset({"fork_boundary_seq", "seed_length"})
NOT_NULL_COLUMNS = frozenset({"id", "channel_type", "channel_id", "fork_boundary_seq", "seed_length", "fork_kind"})


@dataclass(frozen=True)
class Layout:
    seq: str                        # SQL for an entry's seq: "seq", "rowid" without the column, or (in a foreign
    #                                 layout where seq is no rowid alias) an expression that is NULL for a seq
    #                                 that is no integer, so such rows are in no range
    cols: dict[str, str]            # list column -> SQL over sessions alias "s": the cell as a BLOB (or default)
    raw: dict[str, str]             # list column -> the bare column "s.<name>" (or its default): for ORDER BY / WHERE
    has_metadata: bool
    has_projects: bool
    has_pinned: bool
    has_runs: bool
    runs_order: str
    has_sequence: bool
    entries_session_index: str | None
    has_leases: bool = False
    seq_is_rowid: bool = True       # entries.seq is the INTEGER PRIMARY KEY (always an integer)
    types: str = "''"               # SQL: the SQLite types of the SESSION_COLUMNS cells, space-separated

    def session_select(self, src: str, aggs: bool) -> str:
        """SELECT … FROM for list rows over schema prefix ``src``: the fields of SessionSummary in order (text as
        BLOBs, decoded by the reader), then whether a lease is active, then the cells' types (``types``).

        With ``aggs`` the aggregates come from the cache's ``agg`` table; otherwise they are NULL / 0
        (the caller fills them in).
        """
        c = self.cols
        if aggs:
            title, preview = "CAST(COALESCE(a.title, '') AS BLOB)", "CAST(COALESCE(a.preview, '') AS BLOB)"
            msgs = "COALESCE(a.message_count, 0)"
            last = f"CAST(COALESCE(a.last_ts, {self.raw['timestamp']}) AS BLOB)"
        else:
            title, preview, msgs, last = "x''", "x''", "0", c["timestamp"]
        project = project_name = "x''"
        pinned = "0"
        joins = " LEFT JOIN agg a ON a.session_id = s.id" if aggs else ""
        if self.has_metadata:
            joins += f" LEFT JOIN {src}session_metadata m ON m.session_id = s.id"
            project = "CAST(COALESCE(m.project_id, '') AS BLOB)"
            pinned = "COALESCE(m.pinned, 0) <> 0" if self.has_pinned else "0"
            if self.has_projects:
                joins += f" LEFT JOIN {src}projects p ON p.id = m.project_id"
                project_name = "CAST(COALESCE(p.name, '') AS BLOB)"
        run = "x''"
        if self.has_runs:
            marks = ",".join(f"'{s}'" for s in RUN_ACTIVE_STATUSES)
            run = (f"CAST(COALESCE((SELECT r.status FROM {src}session_runs r WHERE r.session_id = s.id "
                   f"AND r.status IN ({marks}){self.runs_order} LIMIT 1), '') AS BLOB)")
        leased = "0"   # an active lease row: its session's run state may be other than "" even without a run
        if self.has_leases:
            leased = (f"EXISTS (SELECT 1 FROM {src}session_runtime_leases l WHERE l.session_id = s.id "
                      "AND l.state = 'active')")
        fields = [c["id"], title, preview, c["cwd"], c["channel_type"], c["channel_id"], msgs, last, c["timestamp"],
                  c["parent_session"], c["fork_kind"], c["fork_boundary_seq"], c["seed_length"], project,
                  project_name, pinned, run, leased, self.types]
        return f"SELECT {', '.join(fields)} FROM {src}sessions s{joins}"


def _entries_seq(sd: SessionDir) -> tuple[str, bool]:
    """(SQL for an entry's seq, whether it is the rowid alias)."""
    if not sd.schema.has("entries", "seq"):
        return "rowid", True
    with sd.db.read() as conn:
        pks, seq_pk = conn.execute(
            "SELECT (SELECT count(*) FROM pragma_table_info('entries') WHERE pk > 0), "
            "(SELECT count(*) FROM pragma_table_info('entries') WHERE name = 'seq' AND pk = 1 "
            "AND upper(type) = 'INTEGER')"
        ).fetchone()
        rowid_table = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'entries' AND type = 'table' "
            "AND upper(sql) NOT LIKE '%WITHOUT%ROWID%'").fetchone()[0]
    if pks == 1 and seq_pk == 1 and rowid_table:
        return "seq", True
    return "(CASE WHEN typeof(seq) = 'integer' THEN seq END)", False


def read_layout(sd: SessionDir) -> Layout:
    has = sd.schema.has
    # Cells come out as BLOBs (decoded by store.mothx.cells, whatever a foreign writer stored) or the default.
    cols = {c: (f"CAST(s.{c} AS BLOB)" if has("sessions", c) else d) for c, d in SESSION_COLUMNS}
    raw = {c: (f"s.{c}" if has("sessions", c) else d) for c, d in SESSION_COLUMNS}
    types = " || ' ' || ".join(f"typeof(s.{c})" if has("sessions", c) else "'default'" for c, _ in SESSION_COLUMNS)
    seq, seq_is_rowid = _entries_seq(sd)
    with sd.db.read() as conn:  # one row, not the whole schema (see store.mothx.schema._read_layout)
        has_sequence, index_table = conn.execute(
            "SELECT (SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'), "
            "(SELECT tbl_name FROM sqlite_master WHERE name = 'idx_entries_session_id')"
        ).fetchone()
    return Layout(
        seq=seq,
        cols=cols,
        raw=raw,
        has_metadata=has("session_metadata", "session_id") and has("session_metadata", "project_id"),
        has_projects=has("projects", "id") and has("projects", "name"),
        has_pinned=has("session_metadata", "pinned"),
        has_runs=has("session_runs", "session_id") and has("session_runs", "status"),
        runs_order=" ORDER BY r.started_at DESC" if has("session_runs", "started_at") else "",
        has_sequence=bool(has_sequence),
        has_leases=has("session_runtime_leases", "session_id") and has("session_runtime_leases", "state"),
        entries_session_index="idx_entries_session_id" if index_table == "entries" else None,
        seq_is_rowid=seq_is_rowid,
        types=types,
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
        self.preview_seq = preview_seq  # seq of the first message (0: none in the range); preview: its text or ""
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
        f"SELECT CAST(session_id AS BLOB), CAST(MAX(timestamp) AS BLOB), COUNT(*), SUM(type = 'message'), MAX({seq}), "
        f"MAX(CASE WHEN type = 'session_info' THEN {seq} END), MIN(CASE WHEN type = 'message' THEN {seq} END) "
        f"FROM entries WHERE {seq} > ? AND {seq} <= ? AND session_id IS NOT NULL{where} GROUP BY session_id"
    )


def chunks(items: list, size: int = _IN_CHUNK) -> Iterator[list]:
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
            conn.text_factory = decode
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
            for chunk in chunks(sorted(set(session_ids))):
                where = f" AND session_id IN ({in_text(len(chunk))})"
                raw.extend(conn.execute(_group_sql(seq, where), (lo, hi, *map(bind, chunk))).fetchall())
    parts: dict[str, Aggregate] = {}
    first_msg: dict[str, int] = {}
    for sid, last_ts, count, msgs, max_seq, title_seq, msg_seq in raw:   # split ranges arrive in ascending order
        key = as_text(sid)
        part = Aggregate(as_int(count), as_int(max_seq), None if last_ts is None else as_text(last_ts), as_int(msgs),
                         as_int(title_seq))
        if msg_seq is not None and key not in first_msg:
            first_msg[key] = as_int(msg_seq)
        if key in parts:
            parts[key].merge_later(part)
        else:
            parts[key] = part
    return parts, first_msg


def add_texts(sd: SessionDir, layout: Layout, parts: dict[str, Aggregate], first_msg: dict[str, int], hi: int,
              need_preview: Iterable[str]) -> None:
    """Fill in titles (newest ``session_info``) and, for ``need_preview`` sessions, the preview of their first
    message (reference 5.2: the first ``message`` entry, whatever its role; ``""`` when it gives none)."""
    seq = layout.seq
    with sd.db.read() as conn:
        titles = _fetch_data(conn, seq, [a.title_seq for a in parts.values() if a.title_seq])
        for agg in parts.values():
            if agg.title_seq:
                agg.title = title_from_data(titles.get(agg.title_seq))
        wanted = {sid: first_msg[sid] for sid in need_preview if sid in first_msg and sid in parts}
        firsts = _fetch_data(conn, seq, list(wanted.values()))
        for sid, msg_seq in wanted.items():
            parts[sid].preview_seq, parts[sid].preview = msg_seq, preview_from_data(firsts.get(msg_seq)) or ""


def aggregate(sd: SessionDir, layout: Layout, lo: int, hi: int, *, session_ids: Iterable[str] | None = None,
              parallel: bool = True) -> dict[str, Aggregate]:
    """Complete aggregates (with titles and previews) of the entries with ``lo < seq <= hi``."""
    parts, first_msg = group_range(sd, layout, lo, hi, session_ids=session_ids, parallel=parallel)
    add_texts(sd, layout, parts, first_msg, hi, first_msg.keys())
    return parts


def session_texts(sd: SessionDir, layout: Layout, session_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """``(title, preview)`` of each session that has entries, as :func:`aggregate` defines them, found through
    the ``(session_id, type)`` index instead of a pass over every entry of the sessions (a screen that shows a
    few sessions' titles should not read 50,000 rows for one of them). Sessions without entries are left out.
    Both texts are raw data (shown through the safe-text boundary).
    """
    seq = layout.seq
    ids = sorted(set(session_ids))
    out: dict[str, tuple[str, str]] = {}
    with sd.db.read() as conn:
        for chunk in chunks(ids):
            values = ", ".join(f"({i}, CAST(? AS TEXT))" for i in range(len(chunk)))
            rows = conn.execute(
                f"WITH j(n, value) AS (VALUES {values}) SELECT j.n,"
                f" (SELECT CAST(data AS BLOB) FROM entries e WHERE e.session_id = j.value AND e.type = 'session_info'"
                f"  ORDER BY e.{seq} DESC LIMIT 1),"
                f" (SELECT {seq} FROM entries e WHERE e.session_id = j.value AND e.type = 'message'"
                f"  ORDER BY e.{seq} LIMIT 1),"
                f" (SELECT CAST(data AS BLOB) FROM entries e WHERE e.session_id = j.value AND e.type = 'message'"
                f"  ORDER BY e.{seq} LIMIT 1)"
                f" FROM j WHERE EXISTS (SELECT 1 FROM entries e WHERE e.session_id = j.value)",
                [bind(sid) for sid in chunk],
            ).fetchall()
            for n, info, msg_seq, first in rows:
                preview = (preview_from_data(first) or "") if msg_seq is not None else ""
                out[chunk[int(n)]] = (title_from_data(info) if info is not None else "", preview)
    return out


def in_text(n: int) -> str:
    """``n`` text parameters for an ``IN (...)`` list (see :func:`store.mothx.cells.bind`)."""
    return ",".join(["CAST(? AS TEXT)"] * n)


def _fetch_data(conn: sqlite3.Connection, seq: str, seqs: list[int]) -> dict[int, object]:
    found: dict[int, object] = {}
    for chunk in chunks(sorted(set(seqs))):
        sql = f"SELECT {seq}, CAST(data AS BLOB) FROM entries WHERE {seq} IN ({','.join('?' * len(chunk))})"
        for s, data in conn.execute(sql, chunk):
            found[as_int(s)] = data
    return found
