"""The captured agent sessions as a list: one row per Claude Code or Codex checkpoint, for the Sessions screen.

:func:`agent_session_page` reads a page of the captured sessions of one agent in ONE query, by keyset on the
list's sort key (the time of the transcript's last timestamped record, newest first, then the agent session
id): each row's listing (:func:`store.agents.checkpoint_read.info_of`), and only a few stored records of its
transcript file by primary key: the first ones (for the title, the first prompt the user typed) and the last
few (for the time of the last record, computed in the query so that it can be the page's key). A session
whose head is a reset or names no staged version is listed too, with why it cannot be opened. Each row
carries the host that last captured the session. The statement is SQLite's or PostgreSQL's (a team store):
the same rows in the same order on both (see the PostgreSQL part below for how it reads records without
casting them). :func:`list_agent_sessions` is every page.

Nothing here writes, and nothing imports Textual.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.agents import agentstate
from store.agents.checkpoint_db import StoreConn
from store.agents.checkpoint_engine import DIALECT_POSTGRESQL, dialect_of
from store.agents.checkpoint_read import (
    INFO_NAMES,
    INFO_WIDTH,
    KeyedPage,
    every_page,
    info_columns,
    info_from,
    info_of,
    listing_read,
)
from store.agents.native import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
    K_SUMMARY,
    K_USER,
    parse_claude_code,
    parse_codex,
    typed_prompt,
)
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line

TITLE_RECORDS = 60
"""Records of a transcript read, at most, to find its first typed prompt."""
TITLE_BYTES = 512 * 1024
"""…and at most this many bytes of them (a first record can be a large pasted file)."""
LAST_RECORDS = 8
"""Records read back from the end, at most, to find the last one with a timestamp."""
AGENT_TITLES = {AGENT_CLAUDE_CODE: "Claude Code", AGENT_CODEX: "Codex"}


@dataclass(frozen=True)
class AgentSessionSummary:
    """One captured agent session as the Sessions screen lists it (``title``, ``preview``, ``cwd`` and
    ``problem`` are one safe line each: :func:`store.safetext.one_line`)."""

    agent: str
    agent_session_id: str
    title: str  # the first prompt the user typed ("" when none was found)
    preview: str  # the first text of any message (for a session without a typed prompt)
    cwd: str
    records: int  # records of every file of the checkpoint
    files: int
    last_record_at: str  # RFC 3339 time of the transcript's last timestamped record ("" when none)
    transcript_path: str  # relative to source_root
    source_root: str
    openable: bool  # a published checkpoint exists (the head is not a reset and its version is staged)
    problem: str = ""  # why it cannot be opened ("" when it can)
    host: str = ""  # the host that last captured it, as stored ("" when none is recorded): data, shown safe

    def to_json(self) -> dict[str, object]:
        return {
            "agent": self.agent, "agent_session_id": self.agent_session_id, "title": self.title, "preview": self.preview, "cwd": self.cwd,
            "records": self.records, "files": self.files, "last_record_at": self.last_record_at,
            "transcript_path": self.transcript_path, "openable": self.openable, "problem": self.problem,
            "host": self.host,
        }


def resume_command(agent: str, agent_session_id: str, cwd: str = "") -> str:
    """The agent's own command that resumes a captured session, run in its work dir: ``cd DIR && claude --resume
    ID`` (Claude Code) or ``cd DIR && codex resume ID`` (Codex); every argument shell-quoted, so a hostile id or
    work dir stays one argument. ``""`` for an agent with no known resume command."""
    import shlex

    if agent == "claude-code":
        command = f"claude --resume {shlex.quote(agent_session_id)}"
    elif agent == "codex":
        command = f"codex resume {shlex.quote(agent_session_id)}"
    else:
        return ""
    return f"cd {shlex.quote(cwd)} && {command}" if cwd else command


def agent_session_counts(sd: SessionDir) -> dict[str, int]:
    """How many captured sessions each agent has (agents without any are absent); one query."""
    with listing_read(sd) as read:
        if read is None:
            return {}
        rows = read[0].execute("SELECT agent_id, count(*) FROM agent_state_sessions GROUP BY agent_id").fetchall()
    return {str(agent): int(n) for agent, n in rows if isinstance(agent, str)}


def first_prompt(agent: str, lines: list[str]) -> tuple[str, str]:
    """``(prompt, preview)``: the first prompt a user typed among the first records of a transcript, and the
    first text of a user message or a summary (either "" when there is none; an assistant's text is neither)."""
    t = parse_codex(lines) if agent == AGENT_CODEX else parse_claude_code(lines)
    typed = typed_prompt(t)
    # the FIRST PROMPT column shows it when no typed prompt was found: never an assistant's line
    preview = next((i.text for i in t.items if i.kind in (K_USER, K_SUMMARY) and i.text.strip()), "")
    return typed, preview


def _timestamp(content: str) -> str:
    try:
        obj = json.loads(content)
    except (ValueError, RecursionError):
        return ""
    stamp = obj.get("timestamp") if isinstance(obj, dict) else None
    return stamp if isinstance(stamp, str) else ""


AGENT_SESSION_PAGE_ROWS = 100
"""Rows of a page of captured sessions when the caller names no limit."""

AgentSessionKey = tuple[object, object]
"""A captured session's place in its list: ``(sort time, agent session id)`` as stored, the list newest first."""


class AgentSessionPage(KeyedPage[AgentSessionSummary]):
    """One page of :func:`agent_session_page`, in list order (newest last record first)."""


# --- SQLite --------------------------------------------------------------------------------------------------
# The index (in file_shapes) of the transcript's shape: the shape of transcript_path, else the first one; NULL
# unless the head is a checkpoint with a staged version whose shapes are a JSON array. Every JSON function is
# guarded by a CASE so that a foreign value (not JSON, a BLOB) reads as NULL, never as an SQL error.
_SHAPE_INDEX = (
    "CASE WHEN p.checkpoint_reset = 0 AND v.session_id IS NOT NULL AND typeof(v.file_shapes) = 'text' THEN "
    "CASE WHEN json_valid(v.file_shapes) THEN CASE WHEN json_type(v.file_shapes) = 'array' THEN "
    "coalesce((SELECT min(j.key) FROM json_each(v.file_shapes) j "
    "WHERE CASE WHEN j.type = 'object' THEN json_extract(j.value, '$.path') END = v.transcript_path), "
    "(SELECT min(j.key) FROM json_each(v.file_shapes) j WHERE j.type = 'object')) "
    "END END END"
)
_TIMESTAMP_OK = (
    "CASE WHEN typeof(l.content) <> 'text' THEN 0 WHEN json_valid(l.content) THEN "
    "CASE WHEN json_type(l.content) = 'object' THEN "
    "coalesce(json_type(l.content, '$.timestamp') = 'text' AND trim(json_extract(l.content, '$.timestamp')) <> '', 0) "
    "ELSE 0 END ELSE 0 END"
)
_SQLITE_NEEDLE = (
    "(instr(lower(asid), ?) > 0 OR EXISTS (SELECT 1 FROM agent_state_lines l WHERE l.session_id = sid "
    "AND typeof(l.content) = 'text' AND instr(lower(l.content), ?) > 0))"
)
"""A page's filter on content: the agent session id or any stored record of the session holds the needle."""


def _sqlite_page_sql(direction: str, where: str, hosts: bool) -> str:
    """The one statement of a page on SQLite: the page's sessions (part 0, every listing column plus the
    transcript's path, record count and last timestamp) and, after each, its first transcript records (part 1)."""
    width = INFO_WIDTH + 4  # the listing, tpath, trec, last_ts, sort_at
    shaped = f"SELECT {info_columns(hosts)}, {_SHAPE_INDEX} AS tidx {info_from(hosts)} WHERE s.agent_id = ?"
    located = (
        "SELECT b.*, CASE WHEN b.tidx IS NOT NULL THEN json_extract(b.v_file_shapes, '$[' || b.tidx || '].path') END "
        "AS tpath, CASE WHEN b.tidx IS NOT NULL THEN json_extract(b.v_file_shapes, '$[' || b.tidx || '].records') "
        "END AS trec FROM shaped b"
    )
    stamped = (
        "SELECT c.*, (SELECT json_extract(l.content, '$.timestamp') FROM agent_state_lines l "
        "WHERE l.session_id = c.sid AND l.file_path = c.tpath AND typeof(c.trec) = 'integer' "
        f"AND l.line_number > max(0, c.trec - {LAST_RECORDS}) AND l.line_number <= c.trec AND {_TIMESTAMP_OK} "
        "ORDER BY l.line_number DESC LIMIT 1) AS last_ts FROM located c"
    )
    keyed = "SELECT d.*, coalesce(d.last_ts, d.updated) AS sort_at FROM stamped d"
    cols = ", ".join((*INFO_NAMES, "tpath", "trec", "last_ts", "sort_at"))
    nulls = ", ".join(["NULL"] * (width - 2))
    return (
        f"WITH shaped AS ({shaped}), located AS ({located}), stamped AS ({stamped}), keyed AS ({keyed}), "
        f"page AS (SELECT * FROM keyed{where} ORDER BY sort_at {direction}, asid {direction} LIMIT ?) "
        f"SELECT 0 AS part, pg.sort_at AS k1, pg.asid AS k2, NULL AS line, NULL AS content, {cols} FROM page pg "
        "UNION ALL "
        "SELECT 1, pg.sort_at, pg.asid, l.line_number, l.content, pg.sid, NULL, "
        f"{nulls} FROM page pg JOIN agent_state_lines l ON l.session_id = pg.sid AND l.file_path = pg.tpath "
        f"AND typeof(pg.trec) = 'integer' AND l.line_number >= 1 AND l.line_number <= min(pg.trec, {TITLE_RECORDS}) "
        f"ORDER BY 2 {direction}, 3 {direction}, 1, 4"
    )


# --- PostgreSQL ----------------------------------------------------------------------------------------------
# PostgreSQL 15 has no JSON test that cannot fail (json_valid, IS JSON): a cast of text that is not JSON, or an
# operator on JSON holding \u0000 or a lone surrogate escape (both are valid JSON, and both occur in captured
# transcripts), is an SQL error for the whole page. So nothing here casts a stored record: the last timestamp is
# found by the regular expressions below, which read compact JSON as SQLite's json_extract does, and the file
# shapes (written by a capture: a flat array of flat objects) are cast only when a regular expression proves
# them such an array, without those escapes. (No "?" in this SQL: it is a placeholder for psycopg.)
_PG_STR = r'"([^"\\[:cntrl:]]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
_PG_VALUE = rf"({_PG_STR}|-{{0,1}}[0-9]+(\.[0-9]+){{0,1}}([eE][-+]{{0,1}}[0-9]+){{0,1}}|true|false|null)"
_PG_OBJECT = rf"\{{({_PG_STR}:{_PG_VALUE}(,{_PG_STR}:{_PG_VALUE})*){{0,1}}\}}"
_PG_SHAPES_RE = rf"^\[({_PG_OBJECT}(,{_PG_OBJECT})*){{0,1}}\]$"
_PG_BAD_ESCAPE = r"\\u(0000|[dD][89a-fA-F])"
# Every string of a record becomes K; a top-level-or-not "timestamp" key with a string value becomes K"value"
# (the alternatives of one scan from the left, longest first, so strings are read as JSON reads them).
_PG_MARKED = r"""regexp_replace(l.content, '"timestamp":("([^"\\]|\\.)*")|"([^"\\]|\\.)*"', 'K\1', 'g')"""
_PG_BALANCE = "(length(r.rest) - length(translate(r.rest, '{[', '')) - length(r.rest) + length(translate(r.rest, '}]', '')))"
# The raw value of the first "timestamp" key at depth 1 (the record's own, not a nested object's).
_PG_RAW_TS = (
    "(SELECT x.v FROM (SELECT k.o, substring(k.part from '^(([^\"\\\\]|\\\\.)*)\"') AS v, "
    f"coalesce(sum({_PG_BALANCE}) OVER (ORDER BY k.o ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS depth "
    f"FROM unnest(string_to_array({_PG_MARKED}, 'K\"')) WITH ORDINALITY k(part, o) "
    "CROSS JOIN LATERAL (SELECT CASE WHEN k.o = 1 THEN k.part "
    "ELSE regexp_replace(k.part, '^([^\"\\\\]|\\\\.)*\"', '') END AS rest) r) x "
    "WHERE x.o > 1 AND x.depth = 1 ORDER BY x.o LIMIT 1)"
)
# Decoded as json_extract decodes it (a value with escapes through PostgreSQL's own JSON reader), unless it
# holds an escape that reader refuses (\u0000, a lone surrogate): that value is kept with its escapes as they
# are (shown the same as SQLite shows the decoded one, ordered the same but for what follows such an escape).
_PG_TS = (
    f"(SELECT CASE WHEN t.raw IS NULL THEN NULL WHEN strpos(t.raw, chr(92)) = 0 THEN t.raw "
    f"WHEN t.raw ~ '{_PG_BAD_ESCAPE}' THEN t.raw ELSE ('\"' || t.raw || '\"')::json #>> '{{}}' END "
    f"FROM (SELECT {_PG_RAW_TS} AS raw) t)"
)
_PG_NEEDLE = (
    "(strpos(lower(asid), ?) > 0 OR EXISTS (SELECT 1 FROM agent_state_lines l WHERE l.session_id = sid "
    "AND strpos(lower(l.content), ?) > 0))"
)


def _pg_page_sql(direction: str, where: str, hosts: bool) -> str:
    """The one statement of a page on PostgreSQL: the page's sessions, each with its transcript's path,
    record count, last timestamp and (an array) its first transcript records."""
    base = f"SELECT {info_columns(hosts)} {info_from(hosts)} WHERE s.agent_id = ?"
    shapes_json = (
        f"CASE WHEN NOT b.head_reset AND b.staged AND b.v_file_shapes ~ '{_PG_SHAPES_RE}' "
        f"AND b.v_file_shapes !~ '{_PG_BAD_ESCAPE}' THEN b.v_file_shapes::json END"
    )
    located = (
        "SELECT b.*, sh.tpath, sh.trec FROM base b LEFT JOIN LATERAL (SELECT e.val ->> 'path' AS tpath, "
        "CASE WHEN json_typeof(e.val -> 'records') = 'number' AND (e.val ->> 'records') ~ '^[0-9]{1,15}$' "
        "THEN (e.val ->> 'records')::bigint END AS trec "
        f"FROM json_array_elements({shapes_json}) WITH ORDINALITY e(val, ord) "
        "ORDER BY coalesce(json_typeof(e.val -> 'path') = 'string' AND e.val ->> 'path' = b.v_transcript_path, "
        "false) DESC, e.ord LIMIT 1) sh ON true"
    )
    stamped = (
        "SELECT c.*, (SELECT t.ts FROM (SELECT l.line_number AS n, "
        f"CASE WHEN l.content LIKE '{{%' THEN {_PG_TS} END AS ts FROM agent_state_lines l "
        "WHERE l.session_id = c.sid AND l.file_path = c.tpath "
        f"AND l.line_number > greatest(0, c.trec - {LAST_RECORDS}) AND l.line_number <= c.trec) t "
        "WHERE t.ts IS NOT NULL AND trim(t.ts) <> '' ORDER BY t.n DESC LIMIT 1) AS last_ts FROM located c"
    )
    keyed = 'SELECT d.*, coalesce(d.last_ts, d.updated) COLLATE "C" AS sort_at FROM stamped d'
    cols = ", ".join(f"pg.{c}" for c in (*INFO_NAMES, "tpath", "trec", "last_ts", "sort_at"))
    return (
        f"WITH base AS ({base}), located AS ({located}), stamped AS ({stamped}), keyed AS ({keyed}), "
        f'page AS (SELECT * FROM keyed{where} ORDER BY sort_at {direction}, asid COLLATE "C" {direction} LIMIT ?) '
        f"SELECT {cols}, (SELECT array_agg(l.content ORDER BY l.line_number) FROM agent_state_lines l "
        "WHERE l.session_id = pg.sid AND l.file_path = pg.tpath AND l.line_number >= 1 "
        f'AND l.line_number <= least(pg.trec, {TITLE_RECORDS})) AS first_lines FROM page pg '
        f'ORDER BY pg.sort_at {direction}, pg.asid COLLATE "C" {direction}'
    )


def _summary(agent: str, row: Sequence[Any], lines: Sequence[object]) -> AgentSessionSummary:
    listing = tuple(row[:INFO_WIDTH])
    last_ts = row[INFO_WIDTH + 2]
    info = info_of(listing)
    state = info.state
    if state is None:
        if info.head is not None and info.head.kind == agentstate.KIND_RESET:
            why = "its head is a reset: nothing is loadable until the next capture"
        else:
            why = one_line(info.head_problem) or "nothing is published for it"
        return AgentSessionSummary(agent, info.agent_session_id, "", "", "", 0, 0, info.updated_at, "",
                                   info.source_root, False, why, host=info.host)
    texts: list[str] = []
    size = 0
    for content in lines:
        if not isinstance(content, str):
            continue  # a foreign row: loading the checkpoint reports it
        texts.append(content)
        size += len(content)
        if size >= TITLE_BYTES:
            break
    title, preview = first_prompt(agent, texts)
    last = one_line(last_ts) if isinstance(last_ts, str) else ""
    return AgentSessionSummary(
        agent=agent, agent_session_id=info.agent_session_id, title=one_line(title), preview=one_line(preview)[:300],
        cwd=one_line(state.cwd), records=state.record_count, files=state.file_count,
        last_record_at=last or info.updated_at, transcript_path=state.transcript_path,
        source_root=info.source_root, openable=True, host=info.host,
    )


@dataclass(frozen=True)
class PageRequest:
    """Which page of captured sessions to read: after a key, before one, or (``last``) the oldest rows; with
    a ``needle``, only the sessions whose id or any stored record holds it."""

    after: AgentSessionKey | None = None
    before: AgentSessionKey | None = None
    last: bool = False
    limit: int = AGENT_SESSION_PAGE_ROWS
    needle: str = ""


def read_agent_session_page(conn: StoreConn, agent: str, request: PageRequest, *, hosts: bool) -> AgentSessionPage:
    """:func:`agent_session_page` on an open read connection whose checkpoint tables exist, on either engine:
    ONE query (``hosts``: whether the store has its host table, :func:`~store.agents.checkpoint_read.store_tables`)."""
    after, before = request.after, request.before
    if sum((after is not None, before is not None, request.last)) > 1:
        raise ValueError("A page of captured sessions is read after a key, before one or at the end, not two.")
    pg = dialect_of(conn) == DIALECT_POSTGRESQL
    limit = max(1, int(request.limit))
    params: list[object] = [agent]
    conditions: list[str] = []
    if after is not None:  # the list runs newest first: "after" is older
        conditions.append("(sort_at, asid) < (?, ?)")
        params.extend(after)
    elif before is not None:
        conditions.append("(sort_at, asid) > (?, ?)")
        params.extend(before)
    needle = request.needle.strip().lower()
    if needle:
        conditions.append(_PG_NEEDLE if pg else _SQLITE_NEEDLE)
        params.extend([needle, needle])
    where = (" WHERE " + " AND ".join(conditions)) if conditions else ""
    backwards = before is not None or request.last
    direction = "ASC" if backwards else "DESC"
    params.append(limit + 1)
    heads: list[Sequence[Any]] = []
    lines: dict[object, list[object]] = {}
    if pg:
        for row in conn.execute(_pg_page_sql(direction, where, hosts), params):
            heads.append(row[:-1])
            lines[row[0]] = list(row[-1] or ())
    else:
        for part, _k1, _k2, _line, content, *rest in conn.execute(_sqlite_page_sql(direction, where, hosts), params):
            if part == 0:
                heads.append(tuple(rest))
            else:
                lines.setdefault(rest[0], []).append(content)
    more = len(heads) > limit
    heads = heads[:limit]
    if backwards:
        heads.reverse()
    rows = tuple(_summary(agent, h, lines.get(h[0], [])) for h in heads)
    keys = tuple((h[INFO_WIDTH + 3], h[2]) for h in heads)
    return AgentSessionPage(rows, keys, more)


def agent_session_page(
    sd: SessionDir,
    agent: str,
    *,
    after: AgentSessionKey | None = None,
    before: AgentSessionKey | None = None,
    last: bool = False,
    limit: int = AGENT_SESSION_PAGE_ROWS,
    needle: str = "",
) -> AgentSessionPage:
    """A page of the captured sessions of ``agent`` (most recent last record first) read by keyset in one
    query, from the SQLite file or a PostgreSQL team store: the first ``limit`` rows, the rows after the key
    ``after``, the rows just before the key ``before`` or (``last``) the oldest rows (still in list order). With
    a ``needle``, only the sessions whose id or any stored record of any of their files contains it
    (case-insensitive for ASCII letters): a filter on content, as the mothx list's. Empty without a checkpoint
    file or its tables."""
    request = PageRequest(after=after, before=before, last=last, limit=limit, needle=needle)
    with listing_read(sd) as read:
        if read is None:
            return AgentSessionPage((), (), False)
        return read_agent_session_page(read[0], agent, request, hosts=read[1])


def list_agent_sessions(sd: SessionDir, agent: str) -> list[AgentSessionSummary]:
    """Every captured session of ``agent``, the most recent last record first (every
    :func:`agent_session_page`, in one read transaction)."""
    with listing_read(sd) as read:
        if read is None:
            return []
        conn, hosts = read
        return every_page(lambda after: read_agent_session_page(conn, agent, PageRequest(after=after, limit=500),
                                                                hosts=hosts))


__all__ = [
    "AGENT_SESSION_PAGE_ROWS",
    "AGENT_TITLES",
    "AgentSessionKey",
    "AgentSessionPage",
    "AgentSessionSummary",
    "PageRequest",
    "agent_session_counts",
    "agent_session_page",
    "first_prompt",
    "list_agent_sessions",
    "read_agent_session_page",
]
