"""A session's fork family: its ancestors and descendants through ``sessions.parent_session`` (reference 14.1),
each with its fork kind, boundary seq and seed length; and the turns of a session as candidate boundaries.

A parent chain that loops (foreign rows) stops at the first session seen twice; a parent that is missing is shown
as such (``missing=True``) and ends the chain.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store.errors import SessionNotFound
from store.mothx.cells import as_text
from store.mothx.entry_model import parse_entry_data, row_from_cells
from store.mothx.fork_boundaries import (
    SourceFacts,
    Verdict,
    explain_rows,
    read_source_facts,
    refusal_of,
)
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line


@dataclass(frozen=True)
class FamilyMember:
    """One session of a fork family, in tree order: its parent, depth, fork facts and title."""

    session_id: str
    parent_session: str
    depth: int  # 0 = the family's root
    fork_kind: str
    boundary_seq: int
    seed_length: int
    title: str
    selected: bool = False
    missing: bool = False  # a parent named by a child that has no sessions row

    def to_json(self) -> dict[str, object]:
        return {"sessionId": self.session_id, "parentSessionId": self.parent_session, "depth": self.depth,
                "forkKind": self.fork_kind, "boundarySeq": self.boundary_seq, "seedLength": self.seed_length,
                "title": self.title, "selected": self.selected, "missing": self.missing}


@dataclass(frozen=True)
class Family:
    """The fork family of ``session_id``: every member, root first, each child after its parent."""

    session_id: str
    members: tuple[FamilyMember, ...]  # tree order: root first, each child after its parent (by id)

    @property
    def ancestors(self) -> tuple[FamilyMember, ...]:
        """Root first, down to the selected session's parent."""
        by_id = {m.session_id: m for m in self.members}
        out: list[FamilyMember] = []
        cur = by_id.get(self.session_id)
        while cur is not None and cur.parent_session and cur.parent_session in by_id and len(out) < len(by_id):
            cur = by_id[cur.parent_session]
            out.insert(0, cur)
        return tuple(out)

    @property
    def descendants(self) -> tuple[FamilyMember, ...]:
        sel_i = next(i for i, m in enumerate(self.members) if m.selected)
        depth = self.members[sel_i].depth
        out = []
        for m in self.members[sel_i + 1:]:
            if m.depth <= depth:
                break
            out.append(m)
        return tuple(out)


_COLS = "id, COALESCE(parent_session, ''), fork_kind, fork_boundary_seq, seed_length"


def _row(conn: sqlite3.Connection, sid: str) -> tuple[str, str, str, int, int] | None:
    r = conn.execute(f"SELECT {_COLS} FROM sessions WHERE id = ?", (sid,)).fetchone()
    if r is None:
        return None
    return as_text(r[0]), as_text(r[1]), as_text(r[2]), _int(r[3]), _int(r[4])


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def family_conn(conn: sqlite3.Connection, session_id: str) -> Family:
    me = _row(conn, session_id)
    if me is None:
        raise SessionNotFound(f"no session has the id {one_line(session_id)}.")
    chain = [me]
    seen = {me[0]}
    missing_root = ""
    while chain[0][1]:
        parent = chain[0][1]
        if parent in seen:
            break
        row = _row(conn, parent)
        if row is None:
            missing_root = parent
            break
        seen.add(parent)
        chain.insert(0, row)
    # descendants of the root, level by level (one query per level)
    children: dict[str, list[tuple[str, str, str, int, int]]] = {}
    level = [chain[0][0]]
    known = {chain[0][0]}
    while level:
        marks = ",".join("?" * len(level))
        rows = conn.execute(f"SELECT {_COLS} FROM sessions WHERE parent_session IN ({marks}) ORDER BY id",
                            level).fetchall()
        nxt = []
        for r in rows:
            t = (as_text(r[0]), as_text(r[1]), as_text(r[2]), _int(r[3]), _int(r[4]))
            if t[0] in known:
                continue
            known.add(t[0])
            children.setdefault(t[1], []).append(t)
            nxt.append(t[0])
        level = nxt
    members: list[FamilyMember] = []
    base = 0
    if missing_root:
        members.append(FamilyMember(missing_root, "", 0, "", 0, 0, "", missing=True))
        base = 1

    order: list[tuple[tuple[str, str, str, int, int], int]] = []
    stack: list[tuple[tuple[str, str, str, int, int], int]] = [(chain[0], base)]
    while stack:  # depth first, children by id (a loop, not recursion: a chain may be thousands deep)
        node = stack.pop()
        order.append(node)
        stack.extend((child, node[1] + 1) for child in reversed(children.get(node[0][0], [])))
    titles = titles_conn(conn, [sid for (sid, *_), _ in order])
    for (sid, parent, kind, bseq, seed), depth in order:
        members.append(FamilyMember(sid, parent, depth, kind, bseq, seed, titles.get(sid, ""),
                                    selected=sid == session_id))
    return Family(session_id, tuple(members))


_TITLE_CHUNK = 400
"""Session ids bound in one ``IN (...)`` list at most."""

_TITLE_TRIES = 8
"""The newest ``session_info`` entries of a session looked at for its title (as ``store.mothx.fork``'s
``latest_title``)."""


def titles_conn(conn: sqlite3.Connection, session_ids: list[str]) -> dict[str, str]:
    """Each session's title: the ``name`` of its newest ``session_info`` entry that has a text name (of its
    newest :data:`_TITLE_TRIES`); sessions without one are left out. One indexed query per
    :data:`_TITLE_CHUNK` sessions, not one per session: a family of thousands reads its titles at once."""
    titles: dict[str, str] = {}
    tried: dict[str, int] = {}
    wanted = list(dict.fromkeys(session_ids))
    for i in range(0, len(wanted), _TITLE_CHUNK):
        part = wanted[i:i + _TITLE_CHUNK]
        for sid, data in conn.execute(
            f"SELECT session_id, data FROM entries WHERE session_id IN ({','.join('?' * len(part))}) "
            "AND type = 'session_info' ORDER BY session_id, seq DESC", part,
        ):
            if not isinstance(sid, str) or sid in titles or tried.get(sid, 0) >= _TITLE_TRIES:
                continue
            tried[sid] = tried.get(sid, 0) + 1
            parsed, _ = parse_entry_data(as_text(data) if data is not None else None)  # the JSON only: no row
            name = parsed.get("name") if parsed is not None else None
            if isinstance(name, str):
                titles[sid] = name
    return titles


def family(sd: SessionDir, session_id: str) -> Family:
    """The fork family of ``session_id`` (root first, in tree order)."""
    with sd.db.read() as conn:
        return family_conn(conn, session_id)


@dataclass(frozen=True)
class TurnCandidate:
    """One turn (or legacy run window) as a candidate boundary: its last assistant message and its verdict."""

    index: int  # 1-based, in transcript order
    turn_id: str
    status: str
    start_seq: int
    end_seq: int | None
    at_seq: int  # the candidate entry (the turn's last message; 0 when it has none)
    valid: bool
    reason: str
    boundary_seq: int
    legacy: bool = False

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "turnId": self.turn_id, "status": self.status, "startSeq": self.start_seq,
                "endSeq": self.end_seq, "atSeq": self.at_seq, "valid": self.valid, "reason": self.reason,
                "boundarySeq": self.boundary_seq, "legacy": self.legacy}


def candidates_conn(conn: sqlite3.Connection, session_id: str) -> tuple[SourceFacts, list[TurnCandidate]]:
    facts = read_source_facts(conn, session_id)
    if not facts.exists:
        raise SessionNotFound(f"no session has the id {one_line(session_id)}.")
    rows = [row_from_cells(*r) for r in conn.execute(
        "SELECT seq, id, type, parent_id, timestamp, data FROM entries WHERE session_id = ? AND type = 'message' "
        "ORDER BY seq", (session_id,))]
    verdicts = {v.seq: v for v in explain_rows(conn, facts, rows)}
    out: list[TurnCandidate] = []
    spans: list[tuple[str, str, int, int | None]]
    if facts.legacy:
        spans = [(w.turn_id or f"run {w.run_id}", w.status, w.start_seq, w.end_seq) for w in facts.windows]
    else:
        spans = [(t.id, t.status, t.start_seq, t.end_seq) for t in facts.turns]
    blocked = refusal_of(facts)
    for i, (tid, status, start, end) in enumerate(spans, 1):
        inside = [r.seq for r in rows if r.seq >= start and (end is None or r.seq <= end)]
        at = inside[-1] if inside else 0
        v: Verdict | None = verdicts.get(at)
        if status == "open" or end is None:
            reason = "the turn is open."
            valid = False
        elif v is None:
            reason = "the turn has no message."
            valid = False
        else:
            valid, reason = v.valid, v.reason
        if valid and blocked is not None:
            valid, reason = False, str(blocked)
        out.append(TurnCandidate(i, tid, status, start, end, at, valid, reason, v.boundary_seq if v and valid else 0,
                                 facts.legacy))
    if facts.legacy and facts.legacy_problem:
        out.append(TurnCandidate(0, "", "", 0, None, 0, False,
                                 f"no turn index; run windows are ambiguous: {facts.legacy_problem}", 0, True))
    return facts, out


def candidates(sd: SessionDir, session_id: str) -> list[TurnCandidate]:
    """Every turn of the session as a candidate boundary, valid or with the rule that forbids it."""
    with sd.db.read() as conn:
        return candidates_conn(conn, session_id)[1]


def explain_entry(sd: SessionDir, session_id: str, seq: int) -> Verdict | None:
    """Whether a fork may start at entry ``seq`` and, if not, why (``None``: no such entry in the session)."""
    from store.mothx.fork_boundaries import explain

    with sd.db.read() as conn:
        found = explain(conn, session_id, seq)
    return found[0] if found else None


__all__ = ["FamilyMember", "Family", "family", "family_conn", "TurnCandidate", "candidates", "candidates_conn",
           "explain_entry", "titles_conn"]
