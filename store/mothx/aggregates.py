"""Per-session aggregates over ``entries``: what the session list shows beside the ``sessions`` columns.

For the entries of a ``seq`` range (or of some sessions): count, message count, ``MAX(timestamp)`` (textual,
as the reference compares), the newest ``session_info`` (title) and the first user text (preview). One
grouped pass computes the numbers; the title and preview rows are then read by primary key and parsed here,
with one definition shared by every caller. A big pass is split by ``seq`` range over extra read-only
connections that read the database the way the session's own connection does (``immutable=1``, ``mode=ro``
or its private copy), so nothing is ever written to the session directory.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store.mothx.db import Database, describe_sqlite_error
from store.mothx.schema import RUN_ACTIVE_STATUSES

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

PREVIEW_CHARS = 60
PARALLEL_MIN_ROWS = 200_000     # below this many seq numbers a pass runs on the session's own connection
MAX_SCAN_WORKERS = 4
_IN_CHUNK = 500                 # parameters per IN (...) list

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
    has_leases: bool = False

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
        leased = "0"   # an active lease row: its session's run state may be other than "" even without a run
        if self.has_leases:
            leased = (f"EXISTS (SELECT 1 FROM {src}session_runtime_leases l WHERE l.session_id = s.id "
                      "AND l.state = 'active')")
        fields = [c["id"], title, preview, c["cwd"], c["channel_type"], c["channel_id"], msgs, last, c["timestamp"],
                  c["parent_session"], c["fork_kind"], c["fork_boundary_seq"], c["seed_length"], project,
                  project_name, pinned, run, leased]
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
    with sd.db.read() as conn:  # one row, not the whole schema (see store.mothx.schema._read_layout)
        has_sequence, index_table = conn.execute(
            "SELECT (SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'), "
            "(SELECT tbl_name FROM sqlite_master WHERE name = 'idx_entries_session_id')"
        ).fetchone()
    return Layout(
        seq="seq" if has("entries", "seq") else "rowid",
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


def session_texts(sd: SessionDir, layout: Layout, session_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """``(title, preview)`` of each session that has entries, as :func:`aggregate` defines them, found through
    the ``(session_id, type)`` index instead of a pass over every entry of the sessions (a screen that shows a
    few sessions' titles should not read 50,000 rows for one of them). Sessions without entries are left out.
    """
    seq = layout.seq
    ids = sorted(set(session_ids))
    out: dict[str, tuple[str, str]] = {}
    with sd.db.read() as conn:
        for chunk in chunks(ids):
            rows = conn.execute(
                f"SELECT j.value,"
                f" (SELECT data FROM entries e WHERE e.session_id = j.value AND e.type = 'session_info'"
                f"  ORDER BY e.{seq} DESC LIMIT 1),"
                f" (SELECT {seq} FROM entries e WHERE e.session_id = j.value AND e.type = 'message'"
                f"  ORDER BY e.{seq} LIMIT 1),"
                f" (SELECT data FROM entries e WHERE e.session_id = j.value AND e.type = 'message'"
                f"  ORDER BY e.{seq} LIMIT 1)"
                f" FROM json_each(?) AS j"
                f" WHERE EXISTS (SELECT 1 FROM entries e WHERE e.session_id = j.value)",
                (json.dumps(chunk),),
            ).fetchall()
            for sid, info, msg_seq, first in rows:
                preview = ""
                if msg_seq is not None:
                    found = preview_from_data(first)
                    preview = found if found is not None else _scan_preview(conn, seq, sid, int(msg_seq), 1 << 62)[1]
                out[as_text(sid)] = (title_from_data(info) if info is not None else "", preview)
    return out


def _fetch_data(conn: sqlite3.Connection, seq: str, seqs: list[int]) -> dict[int, object]:
    found: dict[int, object] = {}
    for chunk in chunks(sorted(set(seqs))):
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
