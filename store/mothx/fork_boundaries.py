"""Fork boundaries (reference 14.3/14.4): the facts a fork depends on, where a fork may start, and why not.

* With a turn index (``conversation_turns`` rows for the session): a ``session`` fork ends at the ``end_seq`` of
  the last turn whose status is not ``open``; a ``message`` fork names an entry (``at_seq``) that must be a
  ``message`` with role ``assistant``, the last message inside a closed turn's ``[start_seq, end_seq]``, with
  non-blank text and no tool call; its boundary is that turn's ``end_seq``.
* Without turns (a legacy session): terminal runs' ``[started_at, finished_at]`` windows are mapped to message
  timestamps; each window is a pseudo-turn ending at its last message. A window that overlaps another, has a
  time that does not parse, or holds no message makes the fork unavailable (ambiguous).
* The boundary is then extended over the directly following metadata entries (:data:`METADATA_TYPES`); the
  first entry of any other type (``turn_start``, a message, …) stops it.
* Refusals (*fork session active*): an active run, an open turn or a pending decision.

Decisions where the reference is silent: the extension absorbs exactly :data:`METADATA_TYPES`; a turn is
"closed" when its status is not ``open`` and it has an ``end_seq``; a legacy window's message belongs to it
when ``started_at <= timestamp <= finished_at``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from store.errors import RepairRefused, SessionNotFound, StoreError
from store.mothx.cells import as_text
from store.mothx.entry_model import ENTRY_TYPES, EntryRow, Message, row_from_cells
from store.mothx.lease_model import LeaseSnapshot
from store.mothx.lease_store import active_run_ids, read_lease
from store.mothx.run_events import pending_from_events
from store.mothx.run_model import (
    EVENT_COLUMNS,
    TURN_COLUMNS,
    ConversationTurn,
    PendingDecision,
    event_from_row,
    has_table,
    turn_from_row,
)
from store.mothx.schema import RUN_ACTIVE_STATUSES
from store.mothx.turns import leaf_id
from store.safetext import one_line
from store.times import parse_rfc3339

KIND_SESSION = "session"
KIND_MESSAGE = "message"
FORK_KINDS = (KIND_SESSION, KIND_MESSAGE)

METADATA_TYPES = frozenset({
    "model_change", "mode_change", "thinking_level_change", "additional_directories", "session_info", "label",
})
"""Entries a boundary absorbs when they directly follow it (reference 14.4: model / mode / title changes …)."""

UNSUPPORTED_TYPES = frozenset({"custom", "custom_message"})
SUPPORTED_TYPES = frozenset(ENTRY_TYPES) - UNSUPPORTED_TYPES

MAX_REQUEST_ID = 256


# ---------------------------------------------------------------------------------------------------------------
# Errors (the seed's Err* fork errors). Refusals are RepairRefused (exit 3); an unknown source is SessionNotFound.


class ForkSessionNotFound(SessionNotFound):
    """source session not found"""


class ForkError(RepairRefused):
    """A fork that may not be made; ``code`` names the rule."""

    code = "fork"


class ForkSessionActive(ForkError):
    code = "session_active"


class ForkNoCompletedTurn(ForkError):
    code = "no_completed_turn"


class ForkInvalidBoundary(ForkError):
    code = "invalid_boundary"


class ForkUnsupportedEntry(ForkError):
    code = "unsupported_entry"


class ForkIdempotencyRequired(ForkError):
    code = "idempotency_required"


class ForkIdempotencyTooLong(ForkError):
    code = "idempotency_too_long"


class ForkIdempotencyConflict(ForkError):
    code = "idempotency_conflict"


# ---------------------------------------------------------------------------------------------------------------
# Facts


@dataclass(frozen=True)
class Window:
    """A closed turn, or (legacy) a terminal run's window mapped to messages."""

    turn_id: str  # the turn's id ('' for a legacy window)
    run_id: str
    status: str
    start_seq: int
    end_seq: int
    legacy: bool = False


@dataclass(frozen=True)
class SourceFacts:
    """What a fork of one source reads (reference 14.3's source fingerprint and the refusal facts)."""

    session_id: str
    exists: bool
    max_seq: int
    leaf: str | None
    turns: tuple[ConversationTurn, ...]
    active_runs: tuple[str, ...]
    pending: tuple[PendingDecision, ...]
    lease: LeaseSnapshot | None
    windows: tuple[Window, ...] = ()
    legacy: bool = False
    legacy_problem: str = ""  # why legacy windows are ambiguous ('' when they are not)
    problems: tuple[str, ...] = field(default=())

    @property
    def open_turns(self) -> tuple[ConversationTurn, ...]:
        return tuple(t for t in self.turns if t.status == "open")

    def fingerprint_facts(self) -> object:
        """Reference 14.3: max seq, leaf, open turns, active runs (and, here, pending decisions)."""
        return {
            "exists": self.exists, "max_seq": self.max_seq, "leaf": self.leaf,
            "open_turns": [t.id for t in self.open_turns], "active": list(self.active_runs),
            "pending": [[p.decision_id, p.last_event_id] for p in self.pending],
        }


def _pending(conn: sqlite3.Connection, session_id: str) -> tuple[PendingDecision, ...]:
    if not has_table(conn, None, "session_run_events"):
        return ()
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM session_run_events WHERE session_id = ? "
        "AND event_type IN ('approval_resolved', 'question_resolved') ORDER BY seq", (session_id,)).fetchall()
    return tuple(pending_from_events([event_from_row(r) for r in rows]))


def _legacy_windows(conn: sqlite3.Connection, session_id: str) -> tuple[tuple[Window, ...], str]:
    """Terminal runs' windows mapped to message timestamps, or ``((), reason)`` when they are ambiguous."""
    if not has_table(conn, None, "session_runs"):
        return (), "the session has no conversation turns and no runs"
    marks = ",".join("?" * len(RUN_ACTIVE_STATUSES))
    runs = conn.execute(
        f"SELECT id, status, started_at, finished_at FROM session_runs WHERE session_id = ? AND status NOT IN ({marks}) "
        "ORDER BY started_at, id", (session_id, *RUN_ACTIVE_STATUSES)).fetchall()
    if not runs:
        return (), "the session has no conversation turns and no finished runs"
    spans = []
    for rid, status, started, finished in runs:
        a, b = parse_rfc3339(as_text(started)), parse_rfc3339(as_text(finished) if finished is not None else "")
        if a is None or b is None or b < a:
            return (), f"run {one_line(as_text(rid))} has no readable [started_at, finished_at] window"
        spans.append((a, b, as_text(rid), as_text(status)))
    spans.sort(key=lambda s: (s[0], s[1]))
    for prev, cur in zip(spans, spans[1:], strict=False):
        if cur[0] <= prev[1]:
            return (), f"the windows of runs {one_line(prev[2])} and {one_line(cur[2])} overlap"
    messages = conn.execute(
        "SELECT seq, timestamp FROM entries WHERE session_id = ? AND type = 'message' ORDER BY seq", (session_id,)
    ).fetchall()
    windows: list[Window] = []
    last_end = 0
    for a, b, rid, status in spans:
        seqs = []
        for seq, ts in messages:
            t = parse_rfc3339(as_text(ts))
            if t is not None and a <= t <= b:
                seqs.append(int(seq))
        if not seqs:
            return (), f"no message lies in the window of run {one_line(rid)}"
        if seqs[0] <= last_end:
            return (), f"the messages of run {one_line(rid)} interleave with an earlier run's"
        windows.append(Window("", rid, status, seqs[0], seqs[-1], legacy=True))
        last_end = seqs[-1]
    return tuple(windows), ""


def _turns(conn: sqlite3.Connection, session_id: str) -> tuple[ConversationTurn, ...]:
    """The session's turn rows in transcript order: id, status and seqs (what a fork decides by; the copy reads
    the other columns in SQL). A row whose cells are not of the expected types is read cell by cell (damage named)."""
    if not has_table(conn, None, "conversation_turns"):
        return ()
    rows = conn.execute("SELECT id, status, start_seq, end_seq, typeof(id) = 'text' AND typeof(status) = 'text' "
                        "AND typeof(start_seq) = 'integer' AND typeof(end_seq) IN ('integer', 'null') "
                        "FROM conversation_turns WHERE session_id = ? ORDER BY start_seq, id", (session_id,)).fetchall()
    out = []
    for tid, status, start, end, plain in rows:
        if plain:
            out.append(ConversationTurn(tid, session_id, "", "conversation", status, start, end, "", None))
        else:
            full = conn.execute(f"SELECT {TURN_COLUMNS} FROM conversation_turns WHERE session_id = ? AND id IS ?",
                                (session_id, tid)).fetchone()
            out.append(turn_from_row(full))
    return tuple(out)


def read_source_facts(conn: sqlite3.Connection, session_id: str) -> SourceFacts:
    """Every fact a fork of ``session_id`` depends on, inside the caller's transaction."""
    exists = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None
    row = conn.execute("SELECT MAX(seq) FROM entries WHERE session_id = ?", (session_id,)).fetchone()
    max_seq = int(row[0]) if row and isinstance(row[0], int) else 0
    turns = _turns(conn, session_id)
    active = tuple(active_run_ids(conn, session_id)) if has_table(conn, None, "session_runs") else ()
    lease = read_lease(conn, session_id)
    problems = tuple(p for t in turns for p in t.problems)
    windows: tuple[Window, ...]
    legacy_problem = ""
    if turns:
        windows = tuple(Window(t.id, t.run_id, t.status, t.start_seq, t.end_seq) for t in turns
                        if t.status != "open" and t.end_seq is not None)
    else:
        windows, legacy_problem = _legacy_windows(conn, session_id)
    return SourceFacts(session_id, exists, max_seq, leaf_id(conn, session_id), turns, active,
                       _pending(conn, session_id), lease, windows, not turns, legacy_problem, problems)


def refusal_of(facts: SourceFacts) -> ForkError | None:
    """The precondition a fork fails (reference 14.3), ``None`` when it may go on."""
    sid = one_line(facts.session_id)
    if facts.problems:
        return ForkError(f"the conversation turns of session {sid} hold damaged values ({'; '.join(facts.problems)}).")
    if facts.active_runs:
        return ForkSessionActive(f"source session {sid} is active: run {one_line(facts.active_runs[0])} is not finished.")
    if facts.open_turns:
        return ForkSessionActive(f"source session {sid} is active: turn {one_line(facts.open_turns[0].id)} is open.")
    if facts.pending:
        return ForkSessionActive(f"source session {sid} is active: decision {one_line(facts.pending[0].decision_id)} "
                                 "is pending.")
    return None


# ---------------------------------------------------------------------------------------------------------------
# Boundaries


def _rows(conn: sqlite3.Connection, session_id: str, lo: int, hi: int, *, messages_only: bool = False) -> list[EntryRow]:
    where = " AND type = 'message'" if messages_only else ""
    cur = conn.execute(f"SELECT seq, id, type, parent_id, timestamp, data FROM entries WHERE session_id = ? "
                       f"AND seq >= ? AND seq <= ?{where} ORDER BY seq", (session_id, lo, hi))
    return [row_from_cells(*r) for r in cur]


def extend(conn: sqlite3.Connection, session_id: str, boundary: int) -> int:
    """``boundary`` extended over the directly following metadata entries (reference 14.4)."""
    while True:
        nxt = conn.execute("SELECT seq, type, data FROM entries WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 32",
                           (session_id, boundary)).fetchall()
        if not nxt:
            return boundary
        for seq, typ, data in nxt:
            row = row_from_cells(seq, "", typ, None, "", data)
            if row.entry_type not in METADATA_TYPES:
                return boundary
            boundary = int(seq)


def message_rule(row: EntryRow, window: Window | None, last_message_seq: int | None) -> str:
    """Why a message fork may not start at ``row`` (``''``: it may), given its closed turn and that turn's last message."""
    if row.parsed is None:
        return f"entry {row.seq} does not parse ({one_line(row.parse_error or '')})."
    if row.entry_type != "message":
        return f"entry {row.seq} is a {one_line(row.entry_type)} entry; a message fork starts at an assistant message."
    msg = Message.from_json(row.parsed.get("message"))
    if msg.role != "assistant":
        return f"entry {row.seq} is a {one_line(msg.role) or 'role-less'} message; a message fork starts at an assistant message."
    if window is None:
        return f"entry {row.seq} lies in no closed turn."
    if last_message_seq != row.seq:
        return f"entry {row.seq} is not the last message of its turn (that is entry {last_message_seq})."
    if msg.tool_calls:
        return f"entry {row.seq} calls a tool; a fork starts after a final answer."
    if not msg.text.strip():
        return f"entry {row.seq} has no text."
    return ""


def _window_of(facts: SourceFacts, seq: int) -> Window | None:
    for w in facts.windows:
        if w.start_seq <= seq <= w.end_seq:
            return w
    return None


def _unavailable(facts: SourceFacts) -> ForkError | None:
    if facts.legacy and facts.legacy_problem:
        return ForkNoCompletedTurn(f"source session {one_line(facts.session_id)} has no turn index and its run windows "
                                   f"are ambiguous: {one_line(facts.legacy_problem)}.")
    if not facts.windows:
        return ForkNoCompletedTurn(f"source session {one_line(facts.session_id)} has no completed conversation turn.")
    return None


@dataclass(frozen=True)
class Boundary:
    """Where a fork of one kind ends: the requested entry, its window's end and the extended boundary seq."""

    kind: str
    at_seq: int  # the requested entry (0 for a session fork)
    turn_seq: int  # the window's end (the turn's end_seq, or a legacy window's last message)
    seq: int  # after the metadata extension: every entry with seq <= this is copied
    window: Window


def resolve(conn: sqlite3.Connection, facts: SourceFacts, at_seq: int = 0) -> Boundary:
    """The boundary of a fork (reference 14.4) or the ForkError naming the rule it breaks."""
    gone = _unavailable(facts)
    if gone is not None:
        raise gone
    if not at_seq:
        w = facts.windows[-1]
        return Boundary(KIND_SESSION, 0, w.end_seq, extend(conn, facts.session_id, w.end_seq), w)
    rows = _rows(conn, facts.session_id, at_seq, at_seq)
    if not rows:
        raise ForkInvalidBoundary(f"session {one_line(facts.session_id)} has no entry {at_seq}.")
    window = _window_of(facts, at_seq)
    last = None
    if window is not None:
        msgs = _rows(conn, facts.session_id, window.start_seq, window.end_seq, messages_only=True)
        last = msgs[-1].seq if msgs else None
    why = message_rule(rows[0], window, last)
    if why:
        raise ForkInvalidBoundary(f"fork boundary is invalid: {why}")
    assert window is not None
    return Boundary(KIND_MESSAGE, at_seq, window.end_seq, extend(conn, facts.session_id, window.end_seq), window)


# ---------------------------------------------------------------------------------------------------------------
# The explainer


@dataclass(frozen=True)
class Verdict:
    """Whether a fork may start at one entry, and which rule forbids it."""

    seq: int
    entry_id: str
    entry_type: str
    role: str
    turn_id: str
    valid: bool
    reason: str  # the rule that forbids it ('' when valid)
    boundary_seq: int = 0  # the boundary a fork there would copy up to (valid entries)


def explain_rows(conn: sqlite3.Connection, facts: SourceFacts, rows: list[EntryRow]) -> list[Verdict]:
    """A verdict for every row (rows of ``facts.session_id`` in seq order)."""
    last_msg: dict[int, int] = {}
    for row in rows:
        if row.entry_type == "message":
            w = _window_of(facts, row.seq)
            if w is not None:
                last_msg[w.end_seq] = row.seq
    blocked = refusal_of(facts) or _unavailable(facts)
    out: list[Verdict] = []
    for row in rows:
        w = _window_of(facts, row.seq)
        role = ""
        if row.parsed is not None and row.entry_type == "message":
            role = Message.from_json(row.parsed.get("message")).role
        why = message_rule(row, w, last_msg.get(w.end_seq) if w is not None else None)
        if not why and blocked is not None:
            why = str(blocked)
        valid = not why
        bseq = extend(conn, facts.session_id, w.end_seq) if valid and w is not None else 0
        out.append(Verdict(row.seq, row.entry_id, row.entry_type, role, w.turn_id if w else "", valid, why, bseq))
    return out


def explain(conn: sqlite3.Connection, session_id: str, seq: int | None = None) -> list[Verdict]:
    """Verdicts for every entry of the session (or only entry ``seq``)."""
    facts = read_source_facts(conn, session_id)
    if not facts.exists:
        raise ForkSessionNotFound(f"source session {one_line(session_id)} not found.")
    verdicts = explain_rows(conn, facts, _rows(conn, session_id, 0, facts.max_seq))
    return verdicts if seq is None else [v for v in verdicts if v.seq == seq]


def check_request_id(request_id: str) -> None:
    if not request_id:
        raise ForkIdempotencyRequired("fork request ID is required.")
    if len(request_id) > MAX_REQUEST_ID:
        raise ForkIdempotencyTooLong(f"fork request ID is too long ({len(request_id)} characters; at most {MAX_REQUEST_ID}).")


__all__ = [
    "KIND_SESSION", "KIND_MESSAGE", "FORK_KINDS", "METADATA_TYPES", "UNSUPPORTED_TYPES", "SUPPORTED_TYPES",
    "ForkError", "ForkSessionNotFound", "ForkSessionActive", "ForkNoCompletedTurn", "ForkInvalidBoundary",
    "ForkUnsupportedEntry", "ForkIdempotencyRequired", "ForkIdempotencyTooLong", "ForkIdempotencyConflict",
    "Window", "SourceFacts", "read_source_facts", "refusal_of", "extend", "message_rule", "Boundary", "resolve",
    "Verdict", "explain_rows", "explain", "check_request_id", "StoreError",
]
