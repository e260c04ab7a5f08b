"""Reading a session's entries from ``sessions.db``: every row, the replay plan, keyset pages, turn markers.

See :mod:`store.mothx.entries` for the three ways to read a session. Cells are read whatever their type
(:mod:`store.mothx.cells`): text as UTF-8 with ``surrogateescape``, a ``seq`` that is not an integer makes
its row damaged, and ids holding surrogates are bound as the bytes SQLite stored (``CAST(? AS TEXT)``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from store.errors import SchemaIncompatible
from store.mothx.cells import as_text, bind
from store.mothx.entry_model import END_SEQ, EntryRow, _str, parse_entry_data, row_from_cells
from store.mothx.entry_replay import (
    CompactionInfo,
    ReplayDetails,
    ReplayMessage,
    ReplayPlan,
    _compaction_info,
    _first_kept,
    _message_for,
    _override_from,
    replay_details,
    replay_state,
    summary_message,
)
from store.mothx.jsonvalue import is_json_str

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

__all__ = ["load_rows", "replay", "replay_plan", "replay_page", "rows_page", "row_count", "turn_markers",
           "require_entries"]

_BATCH_MIN = 64
_SID = "session_id = CAST(? AS TEXT)"
_KEYED = "AND typeof(seq) = 'integer'"
"""Raw pages are keyed by seq: a row of a foreign layout whose seq is no integer cannot be paged to (it is
counted as corrupt by the replay and shown by :func:`load_rows`)."""

# seq comes as itself (an integer in every real layout) with its type; text cells as bytes, decoded here.
_COLS = ("CASE typeof(seq) WHEN 'text' THEN CAST(seq AS BLOB) ELSE seq END, typeof(seq), CAST(id AS BLOB), CAST(type AS BLOB), CAST(parent_id AS BLOB), CAST(timestamp AS BLOB), "
         "CAST(data AS BLOB)")
# One SQL pass classifies each row like parse_entry_data does: 0 = not a JSON object (a NUL byte included,
# since SQLite's JSON reader stops at one), 1 = an object, 2 = an object whose string id/type differ from the
# row's columns. Each JSON function runs once per row (SQLite caches the parse between them).
_ROW_STATUS = (
    "(CASE WHEN json_valid(CAST(data AS TEXT)) THEN"
    " CASE WHEN json_type(CAST(data AS TEXT)) <> 'object' OR instr(CAST(data AS BLOB), x'00') > 0 THEN 0"
    " WHEN (CASE WHEN json_type(CAST(data AS TEXT), '$.type') = 'text'"
    " THEN json_extract(CAST(data AS TEXT), '$.type') ELSE type END) IS NOT type"
    " OR (CASE WHEN json_type(CAST(data AS TEXT), '$.id') = 'text'"
    " THEN json_extract(CAST(data AS TEXT), '$.id') ELSE id END) IS NOT id THEN 2"
    " ELSE 1 END"
    " ELSE 0 END)"
)


def _verify_pass(conn: sqlite3.Connection, session_id: str, bounds: list[int]) -> tuple[int, int, int, list[int]]:
    """``(total rows, corrupt rows, mismatched rows, parseable message rows per bucket)`` in one scan; bucket
    ``i`` holds message rows with ``bounds[i-1] <= seq < bounds[i]`` (``bounds`` ascending)."""
    bucket = "CASE WHEN type <> 'message' THEN -1 " + "".join(
        f"WHEN seq < {int(b)} THEN {i} " for i, b in enumerate(bounds)) + f"ELSE {len(bounds)} END"
    total = corrupt = mismatched = 0
    per_bucket = [0] * (len(bounds) + 1)
    for status, b, n in conn.execute(
        f"SELECT status, bucket, COUNT(*) FROM (SELECT {_ROW_STATUS} AS status, {bucket} AS bucket "
        f"FROM entries WHERE {_SID}) GROUP BY status, bucket",
        (bind(session_id),),
    ):
        total += n
        if status == 0:
            corrupt += n
        elif status == 2:
            mismatched += n
        if status != 0 and b >= 0:
            per_bucket[b] += n
    return total, corrupt, mismatched, per_bucket


def _txt(value: object) -> str | None:
    return None if value is None else as_text(value)


def _row(r: Sequence[object]) -> EntryRow:
    seq = as_text(r[0]) if r[1] == "text" else r[0]
    return row_from_cells(seq, r[2], r[3], r[4], r[5], r[6])


def require_entries(sd: SessionDir) -> None:
    if not sd.schema.has("entries"):
        raise SchemaIncompatible("This database has no entries table, so there are no transcripts to read.")


def load_rows(sd: SessionDir, session_id: str) -> list[EntryRow]:
    """Every row of the session (label/custom rows included), in seq order."""
    require_entries(sd)
    with sd.db.read() as conn:
        cur = conn.execute(f"SELECT {_COLS} FROM entries WHERE {_SID} ORDER BY seq", (bind(session_id),))
        return [_row(r) for r in cur]


def replay(sd: SessionDir, session_id: str) -> list[ReplayMessage]:
    """The whole replay of one session (reads every row)."""
    return replay_state(load_rows(sd, session_id))


def _plan_from_details(session_id: str, d: ReplayDetails, *, keyset: bool, mismatched: int) -> ReplayPlan:
    return ReplayPlan(
        session_id=session_id, window_start_seq=d.window_start_seq, summary=d.summary,
        compactions=tuple(d.compactions), overrides=dict(d.overrides),
        message_rows=sum(1 for m in d.messages if m.kind == "message"), corrupt_rows=d.corrupt_rows,
        total_rows=d.total_rows, usage_cleared_before_seq=d.usage_cleared_before_seq, keyset=keyset,
        mismatched_rows=mismatched, counts_verified=True,
    )


def replay_plan(sd: SessionDir, session_id: str, *, verify: bool = False) -> ReplayPlan:
    """The facts :func:`replay_page` needs, read without loading the session's messages.

    Reads the ``compaction`` and ``content_override`` rows (``type IN (...)`` on index
    ``(session_id, type)``), looks each ``firstKeptEntryId`` up by the unique ``id`` column (one row read
    and parsed per compaction), and counts rows from the indexes alone. Each compaction is decided
    exactly as :func:`replay_details` decides it, so the window, summary and overrides are exact: the replay
    is the summary plus every parseable ``message`` row with seq >= ``window_start_seq``.

    Without ``verify`` no message data is read, so two numbers are not exact (``counts_verified`` False):
    ``message_rows`` (and ``summarized_count``) also count unparseable ``message`` rows of the window, which
    pages skip; ``corrupt_rows`` counts only the corrupt rows the plan read. Paging also trusts the reference
    rule that a row's ``id``/``type`` columns copy its JSON ``id``/``type``.

    ``verify=True`` adds one SQL pass over the session's data (SQLite checks each row's JSON: 0.3 s for
    50,000 rows of 15 MB, 0.7 s for 115 MB here; run it in a worker once the first page is shown): the counts
    become exact, and if any row's JSON ``id``/``type`` differs from its columns, the plan is built from a
    full replay with ``keyset`` False, and :func:`replay_page` then cuts pages from a full replay so they
    stay exact. Known limits of SQLite's JSON check (counts only): a duplicated key's first value is read
    where Python reads the last, and SQLite 3.42-3.44 accept JSON5.
    """
    require_entries(sd)
    with sd.db.read() as conn:
        total = conn.execute(f"SELECT COUNT(*) FROM entries WHERE {_SID}", (bind(session_id),)).fetchone()[0]
        # No ORDER BY: with one, SQLite prefers the (session_id) index for its rowid order and reads every row.
        special = sorted((_row(r) for r in conn.execute(
            f"SELECT {_COLS} FROM entries WHERE {_SID} AND type IN ('compaction', 'content_override')",
            (bind(session_id),),
        )), key=lambda r: r.seq)
        overrides: dict[str, ReplayMessage] = {}
        for row in special:
            if row.parsed is not None and row.entry_type == "content_override":
                ov = _override_from(row.seq, row.entry_id, row.parsed)
                if ov is not None:
                    overrides[_str(row.parsed.get("targetEntryId"))] = ov

        def find_kept(target: str, lo: int, hi: int) -> int | None:
            for seq, data in conn.execute(
                f"SELECT seq, CAST(data AS BLOB) FROM entries WHERE id = CAST(? AS TEXT) AND {_SID} AND type = 'message' "
                "AND seq >= ? AND seq < ? ORDER BY seq",
                (bind(target), bind(session_id), lo, hi),
            ):
                parsed, _ = parse_entry_data(_txt(data))
                if parsed is not None:
                    return int(seq)
            return None

        # Decide each compaction; a removed range is [window start, end) of the messages it drops.
        window_start, clear_before = 0, 0
        summary: ReplayMessage | None = None
        decided: list[tuple[EntryRow, bool, int, int, int]] = []  # row, applied, previous summary?, lo, hi
        for row in special:
            if row.parsed is None or row.entry_type != "compaction":
                continue
            fk = _first_kept(row.parsed)
            new_summary = summary_message(row.seq, row.entry_id, _str(row.parsed.get("summary")))
            had_summary = 1 if summary is not None else 0
            if fk == "":
                decided.append((row, True, had_summary, window_start, row.seq))
                window_start, summary = row.seq + 1, new_summary
                continue
            kept = find_kept(fk, window_start, row.seq) if fk is not None else None
            if kept is None:
                decided.append((row, False, 0, 0, 0))
                continue
            decided.append((row, True, had_summary, window_start, kept))
            window_start, clear_before, summary = kept, row.seq, new_summary

        bounds = [hi for _row_, applied, _s, _lo, hi in decided if applied]
        if verify:
            total, corrupt, mismatched, per_bucket = _verify_pass(conn, session_id, bounds)
            if mismatched:
                rows = [_row(r) for r in conn.execute(
                    f"SELECT {_COLS} FROM entries WHERE {_SID} ORDER BY seq", (bind(session_id),))]
                return _plan_from_details(session_id, replay_details(rows), keyset=False, mismatched=mismatched)
        else:
            corrupt = sum(1 for r in special if r.parsed is None)
            edges = [0, *bounds, END_SEQ]
            per_bucket = [int(conn.execute(
                f"SELECT COUNT(*) FROM entries WHERE {_SID} AND type = 'message' AND seq >= ? AND seq < ?",
                (bind(session_id), edges[i], edges[i + 1]),
            ).fetchone()[0]) for i in range(len(edges) - 1)]
        compactions: list[CompactionInfo] = []
        j = 0
        for row, applied, had_summary, _lo, _hi in decided:
            if applied:
                # the messages it removed: the window's messages below its first kept one (bucket j), and
                # a previous summary. Message rows between the bounds all belong to that window.
                compactions.append(_compaction_info(row, True, had_summary + per_bucket[j]))
                j += 1
            else:
                compactions.append(_compaction_info(row, False, 0))
        message_rows = per_bucket[len(bounds)]
    return ReplayPlan(
        session_id=session_id, window_start_seq=window_start, summary=summary, compactions=tuple(compactions),
        overrides=overrides, message_rows=message_rows, corrupt_rows=int(corrupt), total_rows=int(total),
        usage_cleared_before_seq=clear_before, keyset=True, mismatched_rows=0, counts_verified=verify,
    )


def _summary_in_range(plan: ReplayPlan, after_seq: int | None, before_seq: int | None) -> bool:
    """The summary sits just before the window's first message (between window_start-1 and window_start)."""
    if plan.summary is None:
        return False
    ws = plan.window_start_seq
    return (after_seq is None or after_seq < ws) and (before_seq is None or before_seq >= ws)


def _page_of_list(items: list[ReplayMessage], plan: ReplayPlan, after_seq: int | None, before_seq: int | None,
                  limit: int) -> list[ReplayMessage]:
    msgs = [m for m in items if m.kind == "message" and (after_seq is None or m.seq > after_seq)
            and (before_seq is None or m.seq < before_seq)]
    head = [m for m in items if m.kind == "compaction_summary"][:1]
    if before_seq is None:
        page = msgs[:limit]
        return (head if _summary_in_range(plan, after_seq, before_seq) else []) + page
    page = msgs[-limit:]
    reached_start = len(msgs) <= limit
    return (head if reached_start and _summary_in_range(plan, after_seq, before_seq) else []) + page


def replay_page(sd: SessionDir, plan: ReplayPlan, *, after_seq: int | None = None,
                before_seq: int | None = None, limit: int = 100) -> list[ReplayMessage]:
    """A keyset page of the replay, ascending by seq.

    Forward (``before_seq`` None): up to ``limit`` messages with seq > ``after_seq``; the compaction summary
    comes first when the page starts at or before the window (``after_seq`` None or below
    ``plan.window_start_seq``). Backward (``before_seq`` given, :data:`END_SEQ` for the newest page): the
    ``limit`` messages just below ``before_seq`` (and above ``after_seq`` if given), returned ascending,
    headed by the summary when no earlier message remains. The summary does not count against ``limit``.
    To continue, pass the seq of the last (forward) or first (backward) item of kind ``"message"``; stop
    on a page without messages (or, backward, on one that holds the summary). Unparseable rows are skipped
    (pages are filled past them), overrides and usage clearing are applied from ``plan``.
    """
    require_entries(sd)
    limit = max(1, int(limit))
    if not plan.keyset:
        return _page_of_list(replay(sd, plan.session_id), plan, after_seq, before_seq, limit)
    lo = plan.window_start_seq - 1
    if after_seq is not None:
        lo = max(lo, after_seq)
    hi = END_SEQ if before_seq is None else before_seq
    backward = before_seq is not None
    want = limit + 1 if backward else limit
    found: list[ReplayMessage] = []
    with sd.db.read() as conn:
        cursor_lo: float = lo
        cursor_hi: float = hi
        while len(found) < want and cursor_lo < cursor_hi - 1:
            batch = max(_BATCH_MIN, want - len(found))
            order = "DESC" if backward else "ASC"
            rows = conn.execute(
                f"SELECT {_COLS} FROM entries WHERE {_SID} AND type = 'message' AND seq > ? AND seq < ? "
                f"ORDER BY seq {order} LIMIT ?",
                (bind(plan.session_id), cursor_lo, cursor_hi, batch),
            ).fetchall()
            for r in rows:
                row = _row(r)
                at = r[0] if isinstance(r[0], (int, float)) else row.seq   # (a foreign REAL seq keeps its place)
                if backward:
                    cursor_hi = at
                else:
                    cursor_lo = at
                if row.parsed is None or row.entry_type != "message":
                    continue
                found.append(_message_for(row.seq, row.entry_id, row.parsed, plan.overrides,
                                          plan.usage_cleared_before_seq))
                if len(found) >= want:
                    break
            if len(rows) < batch:
                break
    if not backward:
        head = [plan.summary] if plan.summary is not None and _summary_in_range(plan, after_seq, None) else []
        return head + found
    reached_start = len(found) <= limit
    page = list(reversed(found[:limit]))
    if reached_start and plan.summary is not None and _summary_in_range(plan, after_seq, before_seq):
        return [plan.summary] + page
    return page


def rows_page(sd: SessionDir, session_id: str, *, after_seq: int | None = None,
              before_seq: int | None = None, limit: int = 100) -> list[EntryRow]:
    """Raw rows of every type by keyset on seq, ascending: after ``after_seq``, or the last ``limit`` rows
    below ``before_seq`` (and above ``after_seq`` if given)."""
    require_entries(sd)
    limit = max(1, int(limit))
    lo = -1 if after_seq is None else after_seq
    hi = END_SEQ if before_seq is None else before_seq
    order = "ASC" if before_seq is None else "DESC"
    with sd.db.read() as conn:
        rows = [_row(r) for r in conn.execute(
            f"SELECT {_COLS} FROM entries WHERE {_SID} AND seq > ? AND seq < ? {_KEYED} ORDER BY seq {order} LIMIT ?",
            (bind(session_id), lo, hi, limit),
        )]
    return rows if before_seq is None else rows[::-1]


def row_count(sd: SessionDir, session_id: str, *, before_seq: int | None = None) -> int:
    """Rows of the session (with seq < ``before_seq`` when given): a raw row's position for a scrollbar."""
    require_entries(sd)
    with sd.db.read() as conn:
        return int(conn.execute(
            f"SELECT COUNT(*) FROM entries WHERE {_SID} AND seq < ? {_KEYED}",
            (bind(session_id), END_SEQ if before_seq is None else before_seq),
        ).fetchone()[0])


def last_message_seq(sd: SessionDir, session_id: str, *, at_most: int) -> int | None:
    """The seq of the session's last ``message`` row at or before ``at_most`` (where a fork's copied part ends,
    as a transcript shows it), or None when there is none."""
    require_entries(sd)
    with sd.db.read() as conn:
        found = conn.execute(
            f"SELECT MAX(seq) FROM entries WHERE {_SID} AND seq <= ? AND type = 'message' {_KEYED}",
            (bind(session_id), at_most),
        ).fetchone()[0]
    return found if isinstance(found, int) else None


_TURN_TYPES = ("turn_start", "turn_end")

# SQLite 3.42-3.44 accept JSON5 in json_valid(); Python's json does not: there every turn row is parsed in Python.
_SQLITE_JSON_STRICT = not ((3, 42, 0) <= sqlite3.sqlite_version_info < (3, 45, 0))

# SQLite reads each turn row's JSON (json_valid / json_type / json_extract, off the GIL); the data comes along
# so that Python can tell which rows SQLite reads exactly as Python's json does (see _sqlite_reads_as_python).
_TURN_SQL = (
    "SELECT CASE typeof(seq) WHEN 'integer' THEN seq END, CAST(type AS BLOB), CAST(data AS BLOB),"
    " CASE WHEN json_valid(data) THEN json_type(data) END,"
    " CASE WHEN json_valid(data) AND json_type(data, '$.type') = 'text'"
    " THEN CAST(json_extract(data, '$.type') AS BLOB) END,"
    " CASE WHEN json_valid(data) AND json_type(data, '$.turnId') = 'text'"
    " THEN CAST(json_extract(data, '$.turnId') AS BLOB) END"
    f" FROM entries WHERE {_SID} AND type IN ('turn_start', 'turn_end')"
)


def _sqlite_reads_as_python(data: bytes, top: object) -> bool:
    """True when SQLite's reading of ``data`` (a JSON object to it: ``top``) is Python's: no NUL byte (SQLite
    stops at one), no backslash (so no escaped key, which SQLite's paths do not match), no second ``"type"`` or
    ``"turnId"`` (a duplicated key: SQLite takes the first value, Python the last), under 1,000 bytes (so less
    deeply nested than Python's recursion limit)."""
    return (top == "object" and _SQLITE_JSON_STRICT and len(data) < 1000 and b"\\" not in data
            and b"\x00" not in data and data.count(b'"type"') <= 1 and data.count(b'"turnId"') <= 1)


def turn_markers(sd: SessionDir, session_id: str) -> list[tuple[int, str, str]]:
    """``(seq, "turn_start" | "turn_end", turnId)`` of the session's turn entries, in seq order (corrupt
    rows skipped; a missing turnId is "").

    SQLite extracts each row's type and turnId (16,000 turns: ~60 ms in SQLite, beside the UI, and ~20 ms of
    Python, instead of ~200 ms of Python); a row it might read differently from Python's json is parsed in
    Python, as :func:`parse_entry_data` does.
    """
    require_entries(sd)
    with sd.db.read() as conn:
        rows = conn.execute(_TURN_SQL, (bind(session_id),)).fetchall()
    out: list[tuple[int, str, str]] = []
    for seq, ctype, data, top, jtype, jturn in rows:
        if seq is None:     # a foreign layout's seq that is no integer: the row has no place
            continue
        if data is not None and _sqlite_reads_as_python(data, top):
            kind = as_text(jtype if jtype is not None else ctype)
            turn_id = as_text(jturn) if jturn is not None else ""
        else:
            parsed, _ = parse_entry_data(_txt(data))
            if parsed is None:
                continue
            declared = parsed.get("type")
            kind = declared if is_json_str(declared) else (_txt(ctype) or "")
            turn_id = _str(parsed.get("turnId"))
        if kind in _TURN_TYPES:
            out.append((int(seq), kind, turn_id))
    out.sort(key=lambda m: m[0])
    return out
