"""Fork a session (reference 14): copy a prefix of a source session into a new child session, as a repair.

:class:`ForkSession` is a :class:`~store.mothx.repair_kit.Repair`: ``preview()`` reads the source, resolves the
boundary (:mod:`store.mothx.fork_boundaries`) and lists what the fork writes; ``apply(preview)`` takes a ``fork``
lease on the source (which refuses an active run), re-reads the source fingerprint (max seq, leaf, open turns,
active runs, pending decisions) inside its write transaction, fenced by that lease, and writes the child in that
one transaction: the ``sessions`` row, a new header, every entry with ``seq <= boundary`` with a new id and every
reference remapped, the closed turns inside the boundary, ``session_capabilities``, the ``session_metadata``
project link, a ``session_info`` entry "<title> (n)" and the ``session_fork_requests`` row.

Idempotency (14.2): the request id (≤ 256 characters) is stored as ``hex(sha256(id))`` with the fingerprint
``"<source>|<atSeq>|<titleMode>"``; a repeat returns the original child (and writes nothing), the same id with
another fingerprint is refused (*fork idempotency conflict*).

Decisions where the reference is silent: the title mode written is ``auto``; ``atSeq`` in the fingerprint is the
requested entry (0 for a session fork); ``seed_length`` counts the source entries copied (the source header,
rewritten as the child's header, included; the appended title entry not); the title is the source's newest
``session_info`` name, else its first user message (one line, 60 characters), else ``Session <id>``; "the first
free n" is the smallest n ≥ 1 no child of the source carries as its title; a ``parentId`` that names no copied
entry becomes ``null``; an entry whose JSON does not parse (or is no object) aborts the fork like an unsupported
type — the preview checks the ``type`` column, the copy every row's JSON.

The copy runs in SQLite (one ``INSERT … SELECT`` through temporary id maps, the JSON rewritten with ``json_set``,
so every other byte of an entry — escapes, big numbers — stays as it was): 50,000 entries fork in 2.5–3.4× the
time of copying the same rows unchanged (``tests/benchmarks/bench_fork.py``; the spread is the load of the machine). Entry identities follow
:mod:`store.mothx.entries`: the JSON ``id`` / ``type`` when they are strings, else the columns. Known limit: a row
whose JSON repeats a top-level key (no writer produces one) is read as SQLite reads it (the first value).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from store.errors import LeaseBusy, RepairRefused, SessionNotFound, StoreError
from store.mothx.entry_model import Message, row_from_cells
from store.mothx.fork_boundaries import (
    KIND_MESSAGE,
    KIND_SESSION,
    SUPPORTED_TYPES,
    Boundary,
    ForkError,
    ForkIdempotencyConflict,
    ForkIdempotencyRequired,
    ForkIdempotencyTooLong,
    ForkInvalidBoundary,
    ForkNoCompletedTurn,
    ForkSessionActive,
    ForkSessionNotFound,
    ForkUnsupportedEntry,
    SourceFacts,
    check_request_id,
    read_source_facts,
    refusal_of,
    resolve,
)
from store.mothx.lease_guard import acquire
from store.mothx.lease_model import LEASE_TTL_S, LeaseOwner
from store.mothx.lease_store import check_fence
from store.mothx.repair_kit import (
    PlannedChange,
    RepairPreview,
    RepairResult,
    fingerprint,
    lease_changes,
    lease_fact,
    map_acquire_error,
    refuse_foreign,
    step,
)
from store.mothx.run_model import has_table, new_id
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line
from store.times import format_rfc3339
from store.words import plural

TITLE_MODE = "auto"

REFERENCE_FIELDS: dict[str, tuple[str, ...]] = {
    "compaction": ("firstKeptEntryId", "previousCompactionId", "lastSummarizedEntryId"),
    "content_override": ("targetEntryId",),
    "branch_summary": ("fromId",),
    "label": ("targetId",),
}
TURN_TYPES = ("turn_start", "turn_end")


@dataclass(frozen=True)
class ForkOptions:
    source_session_id: str
    request_id: str
    at_seq: int = 0  # 0: a session fork at the last completed turn; else a message fork at this entry
    title_mode: str = TITLE_MODE
    expert_id: str | None = None  # an expert override for the child (None: the source's)


@dataclass(frozen=True)
class ForkResult:
    session_id: str
    parent_session_id: str
    fork_kind: str
    boundary_seq: int
    seed_length: int
    title: str = ""
    reused: bool = False  # a repeated request: the original child

    def to_json(self) -> dict[str, object]:
        return {"sessionId": self.session_id, "parentSessionId": self.parent_session_id, "forkKind": self.fork_kind,
                "boundarySeq": self.boundary_seq, "seedLength": self.seed_length}


def request_key_hash(request_id: str) -> str:
    return hashlib.sha256(request_id.encode("utf-8", "surrogatepass")).hexdigest()


def request_fingerprint(options: ForkOptions) -> str:
    return f"{options.source_session_id}|{options.at_seq}|{options.title_mode}"


def _prior_request(conn: sqlite3.Connection, options: ForkOptions) -> tuple[str, str] | None:
    """``(fingerprint, child id)`` of an earlier request with this id on this source."""
    if not has_table(conn, None, "session_fork_requests"):
        return None
    row = conn.execute("SELECT request_fingerprint, child_session_id FROM session_fork_requests "
                       "WHERE request_key_hash = ? AND source_session_id = ?",
                       (request_key_hash(options.request_id), options.source_session_id)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def _stored_result(conn: sqlite3.Connection, source: str, child: str) -> ForkResult:
    row = conn.execute("SELECT fork_kind, fork_boundary_seq, seed_length FROM sessions WHERE id = ?",
                       (child,)).fetchone()
    kind, bseq, seed = (str(row[0]), int(row[1]), int(row[2])) if row else ("", 0, 0)
    return ForkResult(child, source, kind, bseq, seed, latest_title(conn, child), reused=True)


# ---------------------------------------------------------------------------------------------------------------
# Titles


def latest_title(conn: sqlite3.Connection, session_id: str) -> str:
    """The newest ``session_info`` name of a session ('' when none)."""
    for (data,) in conn.execute("SELECT data FROM entries WHERE session_id = ? AND type = 'session_info' "
                                "ORDER BY seq DESC LIMIT 8", (session_id,)):
        row = row_from_cells(0, "", "session_info", None, "", data)
        name = row.parsed.get("name") if row.parsed is not None else None
        if isinstance(name, str):
            return name
    return ""


def base_title(conn: sqlite3.Connection, session_id: str) -> str:
    title = latest_title(conn, session_id)
    if title:
        return title
    for (data,) in conn.execute("SELECT data FROM entries WHERE session_id = ? AND type = 'message' ORDER BY seq LIMIT 4",
                                (session_id,)):
        row = row_from_cells(0, "", "message", None, "", data)
        if row.parsed is not None:
            msg = Message.from_json(row.parsed.get("message"))
            text = " ".join(msg.text.split())
            if msg.role == "user" and text:
                return text[:60]
    return f"Session {session_id}"


def child_title(conn: sqlite3.Connection, source: str) -> str:
    """"<title> (n)" with the first n no child of ``source`` carries."""
    base = base_title(conn, source)
    taken = {latest_title(conn, str(c)) for (c,) in
             conn.execute("SELECT id FROM sessions WHERE parent_session = ?", (source,))}
    n = 1
    while f"{base} ({n})" in taken:
        n += 1
    return f"{base} ({n})"


# ---------------------------------------------------------------------------------------------------------------
# The copy


def _dump(obj: object) -> str:
    """Compact JSON text; a lone surrogate in the data (an escape in the source's JSON) stays an escape."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, default=str)
    return text


_TYPE = "CASE WHEN json_type(e.data, '$.type') = 'text' THEN json_extract(e.data, '$.type') ELSE e.type END"
_ID = "CASE WHEN json_type(e.data, '$.id') = 'text' THEN json_extract(e.data, '$.id') ELSE e.id END"


def check_rows(conn: sqlite3.Connection, session_id: str, boundary: int) -> None:
    """Abort on a row a fork cannot copy (reference 14.5): JSON that is not an object, a type outside the known,
    copyable ones, or (ambiguous to any reader) a repeated top-level key. SQLite reads the rows (one pass)."""
    marks = ",".join("?" * len(SUPPORTED_TYPES))
    bad = conn.execute(
        "SELECT e.seq, CASE WHEN NOT json_valid(e.data) THEN 'invalid JSON' "
        "WHEN json_type(e.data) != 'object' THEN 'not a JSON object' "
        f"WHEN ({_TYPE}) NOT IN ({marks}) THEN 'type ' || ({_TYPE}) "
        "ELSE 'a repeated top-level key' END "
        "FROM entries e WHERE e.session_id = ? AND e.seq <= ? AND (NOT json_valid(e.data) "
        f"OR json_type(e.data) != 'object' OR ({_TYPE}) NOT IN ({marks}) "
        "OR (SELECT COUNT(*) - COUNT(DISTINCT key) FROM json_each(e.data)) > 0) ORDER BY e.seq LIMIT 1",
        (*sorted(SUPPORTED_TYPES), session_id, boundary, *sorted(SUPPORTED_TYPES))).fetchone()
    if bad is not None:
        raise ForkUnsupportedEntry(f"fork contains unsupported entry: entry {bad[0]} has {one_line(str(bad[1]))}.")
    if not _SQLITE_JSON_STRICT:  # JSON5 is valid for this SQLite, not for Python's json: check those rows in Python
        for seq, data in conn.execute("SELECT seq, data FROM entries WHERE session_id = ? AND seq <= ?",
                                      (session_id, boundary)):
            row = row_from_cells(seq, "", "", None, "", data)
            if row.parsed is None:
                raise ForkUnsupportedEntry(f"fork contains unsupported entry: entry {seq} does not parse "
                                           f"({one_line(row.parse_error or '')}).")


_SQLITE_JSON_STRICT = not ((3, 42, 0) <= sqlite3.sqlite_version_info < (3, 45, 0))


def unsupported_in(conn: sqlite3.Connection, session_id: str, boundary: int) -> str:
    """The first entry up to the boundary whose type column a fork cannot copy ('' when none; cheap check)."""
    marks = ",".join("?" * len(SUPPORTED_TYPES))
    row = conn.execute(f"SELECT seq, type FROM entries WHERE session_id = ? AND seq <= ? AND type NOT IN ({marks}) "
                       "ORDER BY seq LIMIT 1", (session_id, boundary, *sorted(SUPPORTED_TYPES))).fetchone()
    return "" if row is None else f"fork contains unsupported entry: entry {row[0]} has type {one_line(str(row[1]))}."


_RANDOM_ID = "lower(hex(randomblob(8)))"


def _copy(conn: sqlite3.Connection, facts: SourceFacts, boundary: Boundary, options: ForkOptions,
          child: str, *, make_id: Callable[[], str] | None = None, now: str | None = None) -> ForkResult:
    """Write the whole child inside the caller's (fenced) write transaction.

    The rows are copied by SQLite in one ``INSERT … SELECT`` through a temporary id map (old entry id → new id,
    ``lower(hex(randomblob(8)))``: the reference's 16-hex id format), the JSON rewritten with ``json_set``
    (so every other byte of an entry stays as it was); then the few entries that carry references are updated.
    ``make_id`` and ``now`` (the demo passes seeded, fixed ones) replace the random ids and the clock."""
    source = facts.session_id
    now = now or format_rfc3339()
    step("fork.map")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fork_map (seq INTEGER PRIMARY KEY, old TEXT, typ TEXT, "
                 "parent_old TEXT, top TEXT, new TEXT, a TEXT)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fork_ids (old TEXT PRIMARY KEY, new TEXT)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fork_turns (n INTEGER PRIMARY KEY, old TEXT UNIQUE, new TEXT)")
    try:
        _build_map(conn, source, boundary.seq, child)
        conn.execute(f"INSERT OR IGNORE INTO temp.fork_turns (old, new) SELECT json_extract(e.data, '$.turnId'), "
                     f"{_RANDOM_ID} FROM temp.fork_map m JOIN entries e ON e.seq = m.seq "
                     "WHERE m.typ IN ('turn_start', 'turn_end') AND json_type(e.data, '$.turnId') = 'text' "
                     "ORDER BY m.seq")
        conn.executemany(f"INSERT OR IGNORE INTO temp.fork_turns (old, new) VALUES (?, {_RANDOM_ID})",
                         [(t.id,) for t in facts.turns if t.status != "open" and t.end_seq is not None
                          and t.end_seq <= boundary.seq])
        if make_id is not None:
            conn.executemany("UPDATE temp.fork_map SET new = ? WHERE seq = ? AND new != ?",
                             [(make_id(), s, child) for (s,) in conn.execute("SELECT seq FROM temp.fork_map ORDER BY seq")
                              .fetchall()])
            conn.executemany("UPDATE temp.fork_turns SET new = ? WHERE n = ?",
                             [(make_id(), n) for (n,) in conn.execute("SELECT n FROM temp.fork_turns ORDER BY n")
                              .fetchall()])
        # the id map: a repeated old id maps as a reader sees it, the later entry winning
        conn.execute("INSERT OR REPLACE INTO temp.fork_ids (old, new) SELECT old, new FROM temp.fork_map ORDER BY seq")
        return _write_child(conn, facts, boundary, options, child, now, make_id or new_id)
    finally:
        for table in ("fork_map", "fork_ids", "fork_turns"):
            conn.execute(f"DELETE FROM temp.{table}")


def _build_map(conn: sqlite3.Connection, source: str, boundary: int, child: str) -> None:
    """Fill ``temp.fork_map`` (one JSON parse per row) and abort on a row a fork cannot copy (reference 14.5)."""
    try:
        # The row's columns are copies of its JSON id / type / parentId (reference 7.1): the map takes them, then
        # one pass compares them with the JSON; where they differ (foreign rows) the JSON's string values win.
        conn.execute(f"INSERT INTO temp.fork_map (seq, old, typ, parent_old, top, new) SELECT seq, id, type, parent_id, "
                     f"'{{', {_RANDOM_ID} FROM entries WHERE session_id = ? AND seq <= ? ORDER BY seq", (source, boundary))
        odd = conn.execute(
            "SELECT seq, json_extract(data, '$.id', '$.type', '$.parentId'), "
            "substr(ltrim(data, ' ' || char(9, 10, 13)), 1, 1) FROM entries WHERE session_id = ? AND seq <= ? "
            "AND (json_extract(data, '$.id', '$.type', '$.parentId') IS NOT json_array(id, type, parent_id) "
            "OR substr(ltrim(data, ' ' || char(9, 10, 13)), 1, 1) IS NOT '{')", (source, boundary)).fetchall()
        conn.executemany(
            "UPDATE temp.fork_map SET a = ?2, top = ?3 WHERE seq = ?1", odd)
        conn.execute(
            "UPDATE temp.fork_map SET old = CASE WHEN json_type(a, '$[0]') = 'text' THEN json_extract(a, '$[0]') "
            "ELSE old END, typ = CASE WHEN json_type(a, '$[1]') = 'text' THEN json_extract(a, '$[1]') ELSE typ END, "
            "parent_old = CASE WHEN json_type(a, '$[2]') = 'text' THEN json_extract(a, '$[2]') END WHERE a IS NOT NULL")
    except sqlite3.OperationalError as exc:
        if "JSON" not in str(exc):
            raise
        check_rows(conn, source, boundary)  # names the row that does not parse
        raise
    marks = ",".join("?" * len(SUPPORTED_TYPES))
    bad = conn.execute(f"SELECT seq, top, typ FROM temp.fork_map WHERE top IS NOT '{{' OR typ NOT IN ({marks}) "
                       "ORDER BY seq LIMIT 1", sorted(SUPPORTED_TYPES)).fetchone()
    if bad is not None:
        what = "JSON that is not an object" if bad[1] != "{" else f"type {one_line(str(bad[2]))}"
        raise ForkUnsupportedEntry(f"fork contains unsupported entry: entry {bad[0]} has {what}.")
    if not _SQLITE_JSON_STRICT:
        check_rows(conn, source, boundary)
    conn.execute("UPDATE temp.fork_map SET new = ? WHERE seq = (SELECT MIN(seq) FROM temp.fork_map "
                 "WHERE typ = 'session')", (child,))


def _write_child(conn: sqlite3.Connection, facts: SourceFacts, boundary: Boundary, options: ForkOptions, child: str,
                 now: str, make_id: Callable[[], str]) -> ForkResult:
    source = facts.session_id
    seed = int(conn.execute("SELECT COUNT(*) FROM temp.fork_map").fetchone()[0])
    step("fork.session_row")
    cur = conn.execute(
        "INSERT INTO sessions (id,cwd,timestamp,parent_session,version,channel_type,channel_id,fork_boundary_seq,"
        "seed_length,fork_kind,expert_id) SELECT ?,cwd,timestamp,?,version,'local','',?,?,?,"
        + ("?" if options.expert_id is not None else "expert_id") + " FROM sessions WHERE id = ?",
        (child, source, boundary.seq, seed, boundary.kind,
         *((options.expert_id,) if options.expert_id is not None else ()), source))
    if cur.rowcount != 1:
        raise StoreError(f"source session {one_line(source)} vanished during the fork.")
    step("fork.entries")
    conn.execute(
        "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) "
        "SELECT ?, m.new, m.typ, p.new, e.timestamp, CASE WHEN t.new IS NULL "
        "THEN json_set(e.data, '$.id', m.new, '$.parentId', p.new) "
        "ELSE json_set(e.data, '$.id', m.new, '$.parentId', p.new, '$.turnId', t.new) END "
        "FROM temp.fork_map m JOIN entries e ON e.seq = m.seq LEFT JOIN temp.fork_ids p ON p.old = m.parent_old "
        "LEFT JOIN temp.fork_turns t ON m.typ IN ('turn_start', 'turn_end') AND json_type(e.data, '$.turnId') = 'text' "
        "AND t.old = json_extract(e.data, '$.turnId') ORDER BY m.seq", (child,))
    for typ, fields in REFERENCE_FIELDS.items():
        for key in fields:
            path = f"$.{key}"
            conn.execute(
                "UPDATE entries SET data = json_set(data, ?, (SELECT i.new FROM temp.fork_ids i WHERE i.old = "
                "json_extract(entries.data, ?))) WHERE session_id = ? AND type = ? AND json_type(data, ?) = 'text' "
                "AND EXISTS (SELECT 1 FROM temp.fork_ids i WHERE i.old = json_extract(entries.data, ?))",
                (path, path, child, typ, path, path))
    header = conn.execute("SELECT data FROM entries WHERE session_id = ? AND id = ?", (child, child)).fetchone()
    if header is None:
        hdr: dict[str, object] = {"type": "session", "id": child, "parentId": None, "timestamp": now}
        conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, ?, ?, ?)",
                     (child, child, "session", None, now, _dump(_header(hdr, source, boundary, seed, options))))
    else:
        extra: list[object] = ["$.parentSession", source, "$.channelType", "local", "$.channelId", "",
                               "$.forkBoundarySeq", boundary.seq, "$.seedLength", seed, "$.forkKind", boundary.kind]
        if options.expert_id is not None:
            extra += ["$.expertId", options.expert_id]
        conn.execute(f"UPDATE entries SET data = json_set(data, {', '.join('?' * len(extra))}) WHERE id = ?",
                     (*extra, child))
    step("fork.turns")
    conn.execute(
        "INSERT INTO conversation_turns (id, session_id, intent_id, kind, status, start_seq, end_seq, started_at, "
        "ended_at) SELECT ft.new, ?, t.intent_id, t.kind, t.status, "
        "(SELECT c.seq FROM temp.fork_map m JOIN entries c ON c.id = m.new WHERE m.seq >= t.start_seq "
        " ORDER BY m.seq LIMIT 1), "
        "(SELECT c.seq FROM temp.fork_map m JOIN entries c ON c.id = m.new WHERE m.seq <= t.end_seq "
        " ORDER BY m.seq DESC LIMIT 1), t.started_at, t.ended_at "
        "FROM conversation_turns t JOIN temp.fork_turns ft ON ft.old = t.id WHERE t.session_id = ? "
        "AND t.status != 'open' AND t.end_seq IS NOT NULL AND t.end_seq <= ? ORDER BY t.start_seq",
        (child, source, boundary.seq))
    step("fork.capabilities")
    _copy_capabilities(conn, source, child, now)
    if has_table(conn, None, "session_metadata"):
        conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) "
                     "SELECT ?, project_id, 0, ? FROM session_metadata WHERE session_id = ? AND project_id IS NOT NULL",
                     (child, now, source))
    title = child_title(conn, source)
    step("fork.title")
    last = conn.execute("SELECT id FROM entries WHERE session_id = ? AND type != 'session' ORDER BY seq DESC LIMIT 1",
                        (child,)).fetchone()
    last_id = None if last is None else str(last[0])
    info_id = make_id()
    info = {"type": "session_info", "id": info_id, "parentId": last_id, "timestamp": now, "name": title,
            "source": "auto"}
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, ?, ?, ?)",
                 (child, info_id, "session_info", last_id, now, _dump(info)))
    conn.execute("INSERT INTO session_fork_requests (request_key_hash, request_fingerprint, source_session_id, "
                 "child_session_id, created_at) VALUES (?, ?, ?, ?, ?)",
                 (request_key_hash(options.request_id), request_fingerprint(options), source, child, now))
    return ForkResult(child, source, boundary.kind, boundary.seq, seed, title)


def _header(obj: dict[str, object], source: str, boundary: Boundary, seed: int,
            options: ForkOptions) -> dict[str, object]:
    out = dict(obj)
    out.update({"parentSession": source, "channelType": "local", "channelId": "", "forkBoundarySeq": boundary.seq,
                "seedLength": seed, "forkKind": boundary.kind})
    if options.expert_id is not None:
        out["expertId"] = options.expert_id
    return out


def _copy_capabilities(conn: sqlite3.Connection, source: str, child: str, now: str) -> None:
    if not has_table(conn, None, "session_capabilities"):
        return
    cols = [str(r[1]) for r in conn.execute("PRAGMA table_info(session_capabilities)")]
    picks = ["?" if c == "session_id" else ("?" if c == "updated_at" else c) for c in cols]
    args: list[object] = []
    for c in cols:
        if c == "session_id":
            args.append(child)
        elif c == "updated_at":
            args.append(now)
    conn.execute(f"INSERT INTO session_capabilities ({', '.join(cols)}) SELECT {', '.join(picks)} "
                 "FROM session_capabilities WHERE session_id = ?", (*args, source))


# ---------------------------------------------------------------------------------------------------------------
# The repair


@dataclass(frozen=True)
class ForkPreview(RepairPreview):
    """A repair preview that also says what the child will be."""

    fork_kind: str = ""
    boundary_seq: int = 0
    seed_length: int = 0
    child_title: str = ""
    existing_child: str = ""  # a repeated request: the child it returns
    refusal_code: str = ""
    lease_epoch: int = 0  # the source's lease epoch read (the fork lease is fenced on it)

    @property
    def entries(self) -> int:
        return self.seed_length + 1 if self.seed_length and not self.existing_child else 0

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["fork"] = {"forkKind": self.fork_kind, "boundarySeq": self.boundary_seq, "seedLength": self.seed_length,
                       "title": self.child_title, "existingChild": self.existing_child,
                       "refusalCode": self.refusal_code}
        return out


@dataclass(frozen=True)
class ForkRepairResult(RepairResult):
    fork: ForkResult = field(default_factory=lambda: ForkResult("", "", "", 0, 0))

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out.update(self.fork.to_json())
        out.update({"title": self.fork.title, "reused": self.fork.reused})
        return out


class ForkSession:
    """Fork a session at its last completed turn, or at an assistant message (reference 14)."""

    id = "fork"
    title = "Fork a session"

    def __init__(self, sd: SessionDir, options: ForkOptions, *, owner: LeaseOwner | None = None,
                 ttl: int = LEASE_TTL_S) -> None:
        self.sd = sd
        self.options = options
        self.owner = owner
        self.ttl = ttl
        self._last: ForkPreview | None = None

    @property
    def _target(self) -> str:
        o = self.options
        at = f" at entry {o.at_seq}" if o.at_seq else " at its last completed turn"
        return f"session {one_line(o.source_session_id)}{at}"

    def _read(self, conn: sqlite3.Connection) -> ForkPreview:
        o = self.options
        sid = o.source_session_id
        try:
            check_request_id(o.request_id)
        except ForkError as exc:
            return self._mk(changes=(), notes=(), refusal=str(exc), fingerprint="",
                               refusal_code=exc.code)
        prior = _prior_request(conn, o)
        if prior is not None:
            fp, child = prior
            if fp != request_fingerprint(o):
                exc2 = ForkIdempotencyConflict(f"fork idempotency request conflicts: request {one_line(o.request_id)} "
                                               f"was made for {one_line(fp)}, not {one_line(request_fingerprint(o))}.")
                return self._mk(changes=(), notes=(), refusal=str(exc2),
                                   fingerprint=fingerprint("conflict", fp), refusal_code=exc2.code)
            done = _stored_result(conn, sid, child)
            return self._mk(changes=(), notes=(f"request {one_line(o.request_id)} was already made: it "
                                                          f"returns child {one_line(child)}; nothing is written.",),
                               refusal="", fingerprint=fingerprint("repeat", child), fork_kind=done.fork_kind,
                               boundary_seq=done.boundary_seq, seed_length=done.seed_length, child_title=done.title,
                               existing_child=child)
        facts = read_source_facts(conn, sid)
        if not facts.exists:
            raise ForkSessionNotFound(f"source session {one_line(sid)} not found.")
        epoch = facts.lease.epoch if facts.lease is not None else 0
        content = fingerprint(facts.fingerprint_facts())
        control = fingerprint(content, lease_fact(facts.lease))
        refusal: ForkError | None = refusal_of(facts)
        boundary: Boundary | None = None
        if refusal is None:
            try:
                boundary = resolve(conn, facts, o.at_seq)
            except ForkError as exc:
                refusal = exc
        counts: dict[str, int] = {}
        if refusal is None and boundary is not None:
            counts = {str(t): int(n) for t, n in conn.execute(
                "SELECT type, COUNT(*) FROM entries WHERE session_id = ? AND seq <= ? GROUP BY type",
                (sid, boundary.seq))}
            if any(t not in SUPPORTED_TYPES for t in counts):
                refusal = ForkUnsupportedEntry(unsupported_in(conn, sid, boundary.seq))
        foreign = refuse_foreign(sid, facts.lease) if refusal is None else ""
        if refusal is not None or foreign or boundary is None:
            return self._mk(changes=(), notes=(), refusal=str(refusal) if refusal else foreign,
                               fingerprint=control, content_fingerprint=content,
                               refusal_code=refusal.code if refusal else "lease_held")
        seed = sum(int(v) for v in counts.values())
        title = child_title(conn, sid)
        turns = sum(1 for t in facts.turns if t.status != "open" and t.end_seq is not None and t.end_seq <= boundary.seq)
        what = ", ".join(f"{n} {one_line(str(t))}" for t, n in sorted(counts.items()))
        lease = lease_changes(sid, facts.lease, "fork")
        changes = [
            lease[0],
            PlannedChange("row", "sessions", "(new id)", "insert",
                          f"child of {one_line(sid)}: fork_kind {boundary.kind}, fork_boundary_seq {boundary.seq}, "
                          f"seed_length {seed}, channel local"),
            PlannedChange("entry", "entries", "(new ids)", "insert",
                          f"copy {seed} entries with seq <= {boundary.seq} ({what}) with new ids, references remapped"),
            PlannedChange("row", "conversation_turns", "(new ids)", "insert", f"copy {plural(turns, 'closed turn')}"),
            PlannedChange("row", "session_capabilities", "(new id)", "insert", "copy the source's capabilities, if any"),
            PlannedChange("row", "session_metadata", "(new id)", "insert", "copy the source's project link, if any"),
            PlannedChange("entry", "entries", "(new id)", "append", f"session_info '{one_line(title)}' (source auto)"),
            PlannedChange("row", "session_fork_requests", "(new)", "insert",
                          f"request {one_line(o.request_id)} → the child ({request_fingerprint(o)})"),
            lease[1],
        ]
        notes = []
        if boundary.seq != boundary.turn_seq:
            notes.append(f"the boundary absorbs the metadata entries after seq {boundary.turn_seq} (up to {boundary.seq}).")
        if facts.legacy:
            notes.append("the source has no turn index: its boundary comes from its finished runs' time windows.")
        return self._mk(changes=tuple(changes), notes=tuple(notes), refusal="",
                           fingerprint=fingerprint(control, boundary.seq, seed), content_fingerprint=content,
                           fork_kind=boundary.kind, boundary_seq=boundary.seq, seed_length=seed, child_title=title,
                           lease_epoch=epoch)

    def _mk(self, **kw: Any) -> ForkPreview:
        return ForkPreview(repair_id=self.id, title=self.title, session_id=self.options.source_session_id,
                           target=self._target, **kw)

    def preview(self) -> ForkPreview:
        with self.sd.db.read() as conn:
            preview = self._read(conn)
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> ForkRepairResult:
        self.sd.require_writable()
        expected = expected or self._last or self.preview()
        o = self.options
        check_request_id(o.request_id)
        step("fork.check")
        # The preview given is not read again: the write transaction re-checks every fact it rests on (the source
        # fingerprint, the request row, the refusals, the boundary) and the lease is fenced on its epoch.
        now = expected if (isinstance(expected, ForkPreview) and expected.repair_id == self.id
                           and expected.target == self._target) else self.preview()
        if now.refusal:
            raise _refusal(now)
        if now.existing_child:
            done = ForkResult(now.existing_child, o.source_session_id, now.fork_kind, now.boundary_seq,
                              now.seed_length, now.child_title, reused=True)
            return self._result(done, [], 0)
        if expected.refusal or now.fingerprint != expected.fingerprint:
            raise RepairRefused(f"Refused: the facts of session {one_line(o.source_session_id)} changed since the "
                                "preview; preview it again.")
        step("fork.acquire")
        try:
            guard = acquire(self.sd, o.source_session_id, "fork", expected_epoch=now.lease_epoch,
                            ttl=self.ttl, owner=self.owner)
        except (LeaseBusy, SessionNotFound) as exc:
            raise map_acquire_error(exc, f"session {one_line(o.source_session_id)}") from exc
        except StoreError as exc:  # an active run (SessionRunActive) and other mode refusals
            raise map_acquire_error(exc, f"session {one_line(o.source_session_id)}") from exc
        try:
            step("fork.begin")
            with self.sd.db.write() as conn:
                check_fence(conn, guard.lease, purpose="fork")
                facts = read_source_facts(conn, o.source_session_id)
                if fingerprint(facts.fingerprint_facts()) != now.content_fingerprint:
                    raise RepairRefused(f"Refused: source session {one_line(o.source_session_id)} changed since the "
                                        "preview (its entries, turns or runs); preview it again.")
                if _prior_request(conn, o) is not None:
                    raise RepairRefused(f"Refused: request {one_line(o.request_id)} was made meanwhile; preview it again.")
                blocked = refusal_of(facts)
                if blocked is not None:
                    raise blocked
                boundary = resolve(conn, facts, o.at_seq)
                child = new_id()
                while conn.execute("SELECT 1 FROM sessions WHERE id = ?", (child,)).fetchone() is not None:
                    child = new_id()
                result = _copy(conn, facts, boundary, o, child)
                step("fork.commit")
            epoch = guard.lease.epoch
        finally:
            step("fork.release")
            guard.release()
        return self._result(result, list(now.changes), epoch)

    def _result(self, done: ForkResult, changes: list[PlannedChange], epoch: int) -> ForkRepairResult:
        if done.reused:
            msg = f"Request already made: child {one_line(done.session_id)} ({one_line(done.title)}) returned; nothing written."
        else:
            msg = (f"Forked session {one_line(done.parent_session_id)} into {one_line(done.session_id)} "
                   f"({done.fork_kind} fork at seq {done.boundary_seq}, {done.seed_length} entries seeded, "
                   f"title '{one_line(done.title)}').")
        return ForkRepairResult(self.id, done.parent_session_id, self._target, tuple(changes), msg, epoch, fork=done)


_BY_CODE: dict[str, type[ForkError]] = {cls.code: cls for cls in (
    ForkSessionActive, ForkNoCompletedTurn, ForkInvalidBoundary, ForkUnsupportedEntry, ForkIdempotencyRequired,
    ForkIdempotencyTooLong, ForkIdempotencyConflict)}


def _refusal(preview: ForkPreview) -> RepairRefused:
    """The preview's refusal as the seed's error class (a ForkError; a held lease is a plain RepairRefused)."""
    cls = _BY_CODE.get(preview.refusal_code)
    return cls(f"Refused: {preview.refusal}") if cls else RepairRefused(f"Refused: {preview.refusal}")


def copy_fork(conn: sqlite3.Connection, options: ForkOptions, child: str, *, make_id: Callable[[], str] | None = None,
              now: str | None = None) -> ForkResult:
    """The fork's copy inside the caller's write transaction, without a lease: for a cold write nobody else sees
    yet (the demo builder). Same rules, refusals and remapping as :class:`ForkSession`."""
    check_request_id(options.request_id)
    facts = read_source_facts(conn, options.source_session_id)
    if not facts.exists:
        raise ForkSessionNotFound(f"source session {one_line(options.source_session_id)} not found.")
    blocked = refusal_of(facts)
    if blocked is not None:
        raise blocked
    return _copy(conn, facts, resolve(conn, facts, options.at_seq), options, child, make_id=make_id, now=now)


def fork_session(sd: SessionDir, options: ForkOptions, *, owner: LeaseOwner | None = None) -> ForkResult:
    """ForkSession of the seed: preview and apply in one call; the ForkResult of the child (or the original one)."""
    repair = ForkSession(sd, options, owner=owner)
    return repair.apply(repair.preview()).fork


def default_kind(at_seq: int) -> str:
    return KIND_MESSAGE if at_seq else KIND_SESSION


__all__ = ["ForkOptions", "ForkResult", "ForkSession", "copy_fork", "ForkPreview", "ForkRepairResult", "fork_session",
           "request_key_hash", "request_fingerprint", "child_title", "latest_title", "default_kind", "TITLE_MODE"]
