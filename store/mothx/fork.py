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

The copy (:mod:`store.mothx.fork_copy`) runs in SQLite (one ``INSERT … SELECT`` through temporary id maps, the JSON rewritten with ``json_set``,
so every other byte of an entry — escapes, big numbers — stays as it was): 50,000 entries fork in 2.5–3.4× the
time of copying the same rows unchanged (``tests/benchmarks/bench_fork.py``; the spread is the load of the machine). Entry identities follow
:mod:`store.mothx.entries`: the JSON ``id`` / ``type`` when they are strings, else the columns. Known limit: a row
whose JSON repeats a top-level key (no writer produces one) is read as SQLite reads it (the first value).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from store.errors import RepairRefused, StoreError
from store.mothx import repair_kit as kit
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
    check_request_id,
    read_source_facts,
    refusal_of,
    resolve,
)
from store.mothx.fork_copy import (
    ForkOptions,
    ForkResult,
    copy_child,
    request_fingerprint,
    request_key_hash,
    unsupported_in,
)
from store.mothx.lease_model import LEASE_TTL_S, LeaseOwner
from store.mothx.lease_store import check_fence
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.mothx.run_model import has_table, new_id
from store.mothx.session_titles import child_title, latest_title
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line
from store.words import plural


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


class ForkSession(kit.LeasedRepair):
    """Fork a session at its last completed turn, or at an assistant message (reference 14)."""

    id = "fork"
    title = "Fork a session"

    def __init__(self, sd: SessionDir, options: ForkOptions, *, owner: LeaseOwner | None = None,
                 ttl: int = LEASE_TTL_S) -> None:
        super().__init__(sd, owner=owner, ttl=ttl)
        self.options = options

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
        control = fingerprint(content, kit.lease_fact(facts.lease))
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
        foreign = kit.refuse_foreign(sid, facts.lease) if refusal is None else ""
        if refusal is not None or foreign or boundary is None:
            return self._mk(changes=(), notes=(), refusal=str(refusal) if refusal else foreign,
                               fingerprint=control, content_fingerprint=content,
                               refusal_code=refusal.code if refusal else "lease_held")
        seed = sum(int(v) for v in counts.values())
        title = child_title(conn, sid)
        turns = sum(1 for t in facts.turns if t.status != "open" and t.end_seq is not None and t.end_seq <= boundary.seq)
        what = ", ".join(f"{n} {one_line(str(t))}" for t, n in sorted(counts.items()))
        lease = kit.lease_changes(sid, facts.lease, "fork")
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
        expected = self.expected_preview(expected)
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
        kit.refuse_if_moved("", expected, now.fingerprint, f"the facts of session {one_line(o.source_session_id)}")
        step("fork.acquire")
        # every acquisition failure is the fork's refusal: busy, gone, an active run (SessionRunActive), the mode
        guard = self.acquire_lease(o.source_session_id, "fork", f"session {one_line(o.source_session_id)}",
                                   expected_epoch=now.lease_epoch, refused=(StoreError,))
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
                result = copy_child(conn, facts, boundary, o, child)
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


def fork_session(sd: SessionDir, options: ForkOptions, *, owner: LeaseOwner | None = None) -> ForkResult:
    """ForkSession of the seed: preview and apply in one call; the ForkResult of the child (or the original one)."""
    repair = ForkSession(sd, options, owner=owner)
    return repair.apply(repair.preview()).fork


def default_kind(at_seq: int) -> str:
    return KIND_MESSAGE if at_seq else KIND_SESSION


# ForkOptions and ForkResult (store.mothx.fork_copy) are the repair's own argument and result; tui.screens.forks
# imports ForkOptions from here.
__all__ = ["ForkOptions", "ForkResult", "ForkSession", "ForkPreview", "ForkRepairResult", "fork_session",
           "default_kind"]
