"""The fork's copy (reference 14): the child session written from a prefix of its source inside one write
transaction, and the request the child answers.

The copy runs in SQLite (one ``INSERT … SELECT`` through temporary id maps, the JSON rewritten with ``json_set``,
so every other byte of an entry — escapes, big numbers — stays as it was). :func:`copy_fork` is that copy without
a lease, for a cold write nobody else sees yet (the demo builder); :class:`store.mothx.fork.ForkSession` runs it
under a fenced ``fork`` lease. The rules, refusals and decisions are described in :mod:`store.mothx.fork`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from store.errors import StoreError
from store.mothx.entry_model import row_from_cells
from store.mothx.fork_boundaries import (
    SUPPORTED_TYPES,
    Boundary,
    ForkSessionNotFound,
    ForkUnsupportedEntry,
    SourceFacts,
    check_request_id,
    read_source_facts,
    refusal_of,
    resolve,
)
from store.mothx.repair_kit import step
from store.mothx.run_model import has_table, new_id
from store.mothx.session_titles import child_title
from store.safetext import one_line
from store.times import format_rfc3339

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


def copy_child(conn: sqlite3.Connection, facts: SourceFacts, boundary: Boundary, options: ForkOptions,
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
    return copy_child(conn, facts, resolve(conn, facts, options.at_seq), options, child, make_id=make_id, now=now)
