"""Capturing Claude Code and Codex transcripts as agent checkpoints.

Each session is one checkpoint keyed by (agent, agent session id); its file paths are relative to the projects
folder (Claude Code: ``<project>/<session>.jsonl``) or the sessions folder (Codex: ``YYYY/MM/DD/rollout-….jsonl``),
also when a single project or day folder is given, so a narrower capture finds the same checkpoints. A
re-capture reads the canonical shape first and proves each file's canonical prefix by digest, so an appended
file costs one hash of its prefix plus the new tail, and only the tail is written. A file whose canonical
prefix changed (a rewritten, shortened or removed file) makes the session ``divergent``: nothing is written
until a reset is published (:func:`store.agents.agentstate.publish_reset`), after which the next capture stores
the files afresh (reported as ``new``).

A line that cannot be read (not JSON, not UTF-8, longer than 8 MiB) never blocks its session: it is stored
as an unreadable stand-in record and reported in the detail (:mod:`store.agents.capture_scan`). A file that
names no session, and a file or folder of the root that cannot be read, is reported as its own
``unreadable`` entry (with an empty ``agent_session_id`` and the reason, e.g. "permission denied"), and the rest
is captured. The parts: :mod:`store.agents.capture_discovery` (finding and keying files),
:mod:`store.agents.capture_scan` (reading one file), :mod:`store.agents.capture_verify` (verifying and reading
back) and :mod:`store.agents.repair_copy` (repaired copies); every public name of those is importable from here.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, replace
from pathlib import Path

from store.agents import agentstate
from store.agents.agentstate import (
    MAX_FILES,
    MAX_RECORDS,
    MAX_RESTORED_BYTES,
    PersistedSessionState,
    PersistedSessionStateFile,
)
from store.agents.capture_discovery import (
    claude_code_path_base,
    codex_path_base,
    default_claude_code_root,
    default_codex_root,
    discover_claude_code,
    discover_codex,
    os_reason,
    storable,
)
from store.agents.capture_model import (
    DIVERGENT,
    OUT_OF_SYNC,
    STATUS_APPENDED,
    STATUS_DIVERGENT,
    STATUS_NEW,
    STATUS_UNCHANGED,
    STATUS_UNREADABLE,
    STATUSES,
    VERIFIED,
    CaptureProgress,
    CaptureSummary,
    ClosedCall,
    ExportResult,
    FileVerification,
    ProgressCallback,
    SessionCaptureResult,
    SessionSource,
    SourceFile,
    UnkeyedFile,
    VerifyResult,
)
from store.agents.capture_scan import (
    FastDrift,
    FileScan,
    counts_as_record,
    iter_lines,
    record_stream,
    reread_tail,
    scan_file,
)
from store.agents.capture_verify import (
    read_checkpoint_session,
    verify,
)
from store.agents.checkpoint_db import CheckpointStore, checkpointed_sessions
from store.agents.checkpoint_firstbuild import FIRST_BUILD_BYTES, FirstBuild, open_first_build
from store.agents.native import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
)
from store.agents.repair_copy import (
    INTERRUPTED_TEXT,
    RepairCopyRefused,
    export_repaired_copy,
    repaired_copy_name,
)
from store.mothx.db import Database
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line

TAIL_MEMORY_BUDGET = 64 * 1024 * 1024  # compacted tail bytes kept between the scan and the write, per session

# ------------------------------------------------------------------------------------------------ capture


def _unkeyed_result(agent: str, u: UnkeyedFile) -> SessionCaptureResult:
    return SessionCaptureResult(agent, "", STATUS_UNREADABLE, 1, 0, 0, f"{one_line(u.file.rel)}: {one_line(u.reason)}.", (u.file.rel,))


def _id_problem(sid: str) -> str:
    """Why an agent session id cannot key a checkpoint ("" when it can)."""
    if not sid or sid != sid.strip():
        return "its id is empty or has surrounding spaces"
    try:
        size = len(sid.encode("utf-8"))
    except UnicodeEncodeError:
        return "its id is not valid UTF-8 text"
    if size > agentstate.MAX_AGENT_SESSION_ID_BYTES:
        return f"its id is longer than {agentstate.MAX_AGENT_SESSION_ID_BYTES} bytes"
    return ""


def unreadable_note(scans: Sequence[FileScan], shown: int = 3) -> str:
    """" Line 500 of p/x.jsonl is unreadable (reason); it is kept as an unreadable record." for the new
    unreadable lines of a capture ("" when there are none), naming at most ``shown`` of them."""
    found = [(s.rel, line, reason) for s in scans for line, reason in s.unreadable]
    if not found:
        return ""
    parts = [f"line {line} of {one_line(rel)} ({one_line(reason)})" for rel, line, reason in found[:shown]]
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    verb = "is" if len(found) == 1 else "are"
    noun = "an unreadable record" if len(found) == 1 else "unreadable records"
    return f" Unreadable: {'; '.join(parts)}{more} {verb} kept as {noun}; every other record was captured."


SUPERSEDED_RETRIES = 8
# Sessions written per transaction by a capture of many, and the kept tail bytes of such a batch. A batch is
# written on the capture's writer thread while the next one is scanned (:class:`_BatchWriter`), so two batches'
# tails may be in memory at once. Every commit writes again the pages of the lines' key index that the batch
# touched (its keys start with random session ids, so a batch touches pages all over it): 16 MiB batches are
# the balance, four transactions for the 55 MB of the capture benchmark, the first overlapping the scan early.
BATCH_SESSIONS = 1024
BATCH_BYTES = 16 * 1024 * 1024


class _Superseded(Exception):
    """Another capture of the same session (another process or host) took its fence or published first."""


def capture_session(
    db: CheckpointStore, source: SessionSource, *, on_file: Callable[[SourceFile], None] | None = None
) -> SessionCaptureResult:
    """Capture one discovered session into an open checkpoint store (read-write).

    Captures of one session from many processes or hosts are fenced: each draws a fencing token, and staging
    and publishing happen in one transaction that holds the session's row, so only the newest run writes. A
    capture that finds itself superseded (its fence taken, or the head moved since its advisory read) reads
    the canonical shape again and tries once more; usually the other capture stored the same records and this
    one ends ``unchanged``. The lines are keyed by (session, file, line), so no record is ever stored twice."""
    for attempt in range(SUPERSEDED_RETRIES):
        try:
            return _capture_once(db, source, on_file if attempt == 0 else None)
        except _Superseded:
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
    rels = tuple(f.rel for f in source.files)
    return SessionCaptureResult(source.agent, source.agent_session_id, STATUS_UNREADABLE, len(source.files), 0, 0,
                                f"other captures of the session kept superseding this one ({SUPERSEDED_RETRIES} "
                                "attempts); capture it again.", rels)


def _prepare(
    db: CheckpointStore, source: SessionSource, on_file: Callable[[SourceFile], None] | None,
    headed: frozenset[str] | None = None,
) -> SessionCaptureResult | _Pending:
    """Scan one session: its final result when nothing is to be written, else what to write. ``headed``
    (when given) holds the sessions with a checkpoint head (:func:`checkpointed_sessions`): any other one
    has no canonical shape, and is not asked for it."""
    agent, sid = source.agent, source.agent_session_id
    rels = tuple(f.rel for f in source.files)

    def result(status: str, records: int = 0, written: int = 0, detail: str = "", pending: int = 0) -> SessionCaptureResult:
        return SessionCaptureResult(agent, sid, status, len(source.files), records, written, detail, rels, pending)

    if len(source.files) > MAX_FILES:
        for f in source.files:
            if on_file:
                on_file(f)
        return result(STATUS_UNREADABLE, detail=f"the session has {len(source.files)} files, more than {MAX_FILES}.")
    problem = agentstate.path_problem(source.transcript)
    if not problem:
        problem = _id_problem(sid)
    if problem:
        for f in source.files:
            if on_file:
                on_file(f)
        return result(STATUS_UNREADABLE, detail=f"the session cannot be keyed ({one_line(problem)}).")
    try:
        canon = agentstate.read_canonical(db, agent, sid) if headed is None or sid in headed else None
    except agentstate.SessionStateOutOfSync as exc:
        for f in source.files:
            if on_file:
                on_file(f)
        return result(STATUS_DIVERGENT, detail=f"{one_line(str(exc))} Publish a reset to capture it afresh.")
    shapes = canon.shapes if canon else {}
    marks = canon.restored_bytes if canon else {}
    scans: list[FileScan] = []
    budget = TAIL_MEMORY_BUDGET
    stop: FileScan | None = None
    drift = FastDrift(agent)  # fed while scanning: every line is parsed once
    for f in source.files:
        bad = agentstate.path_problem(f.rel)
        if bad:
            scan = FileScan(rel=f.rel, path=f.path, problem=f"{one_line(f.rel)}: {bad}", problem_status=STATUS_UNREADABLE)
        else:
            drift.start_file()
            canonical = shapes.get(f.rel)
            if agent == AGENT_CODEX and canonical is not None and canonical.records > 0:
                first = _first_line(f.path)  # the version of an appended rollout is in its session_meta
                if first:
                    drift.feed_version(first)
            scan = scan_file(f.path, f.rel, canonical, marks.get(f.rel, 0), budget, drift)
        if scan.tail is not None:
            budget -= scan.tail_bytes
        scans.append(scan)
        if on_file:
            on_file(f)
        if scan.problem:
            stop = scan
            break
    if stop is not None:
        for f in source.files[len(scans):]:
            if on_file:
                on_file(f)
        return result(stop.problem_status, sum(s.records for s in scans), 0, stop.problem + ".")
    pending = sum(s.pending_lines for s in scans)
    pending_note = f" The last line of {', '.join(one_line(s.rel) for s in scans if s.pending_lines)} is incomplete and was left for the next capture." if pending else ""
    pending_note = unreadable_note(scans) + pending_note
    total = sum(s.records for s in scans)
    live = [s for s in scans if s.records > 0]
    if shapes:
        gone = sorted(set(shapes) - {s.rel for s in live})
        if gone:
            return result(STATUS_DIVERGENT, total, 0, f"the canonical file {one_line(gone[0])} is missing or empty.")
    if not live:
        return result(STATUS_UNREADABLE, 0, 0, "no file of the session holds a record." + pending_note, pending)
    if not any(s.rel == source.transcript for s in live):
        transcript = live[0].rel
    else:
        transcript = source.transcript
    files = tuple(
        PersistedSessionStateFile(s.rel, s.records, s.digest, s.prefix_records, s.prefix_digest, s.prefix_state,
                                  s.restored_bytes)
        for s in live
    )
    why = agentstate.divergence(shapes, files)
    if why:
        return result(STATUS_DIVERGENT, total, 0, one_line(why) + ".")
    if shapes and len(live) == len(shapes) and all(
        s.rel in shapes and shapes[s.rel].records == s.records and shapes[s.rel].digest == s.digest for s in live
    ):
        return result(STATUS_UNCHANGED, total, 0, pending_note.strip(), pending)
    if total > MAX_RECORDS or sum(s.restored_bytes for s in live) > MAX_RESTORED_BYTES:
        return result(STATUS_UNREADABLE, total, 0, "the session is larger than a checkpoint may be.")
    def make_state(fence: agentstate.RunFence) -> PersistedSessionState:
        return PersistedSessionState(
            agent_id=agent,
            agent_session_id=sid,
            through_run_id=fence.run_id,
            cwd=source.cwd,
            transcript_path=transcript,
            runtime_fencing_token=fence.fencing_token,
            file_count=len(files),
            record_count=total,
            files=files,
        )

    trusted = frozenset(s.rel for s in live if s.tail is not None)  # kept bytes: compacted and hashed once
    kept = sum(s.tail_bytes for s in live if s.tail is not None)
    return _Pending(source, canon, live, make_state, trusted, kept,
                    STATUS_APPENDED if shapes else STATUS_NEW, total, pending_note.strip(), pending, drift)


@dataclass
class _Pending:
    """A scanned session whose version is still to be written."""

    source: SessionSource
    canon: agentstate.CanonicalShape | None
    live: list[FileScan]
    make_state: Callable[[agentstate.RunFence], PersistedSessionState]
    trusted: frozenset[str]
    kept_bytes: int
    status: str
    total: int
    note: str
    pending: int
    drift: FastDrift

    def item(self) -> agentstate.CaptureItem:
        s = self.source
        return agentstate.CaptureItem(s.agent, s.agent_session_id, str(s.root), self.make_state,
                                      record_stream(self.live), self.trusted)

    def result(self, status: str, written: int = 0, detail: str = "") -> SessionCaptureResult:
        s = self.source
        return SessionCaptureResult(s.agent, s.agent_session_id, status, len(s.files), self.total, written, detail,
                                    tuple(f.rel for f in s.files), self.pending)

    def finish(self, db: CheckpointStore, outcome: object) -> SessionCaptureResult:
        """The session's result from what its write gave: a ReplaceResult or the error it raised."""
        if isinstance(outcome, agentstate.StaleFence):
            raise _Superseded() from outcome
        if isinstance(outcome, agentstate.SessionStateDivergent):
            if _head_moved(db, self.source.agent, self.source.agent_session_id, self.canon):
                raise _Superseded() from outcome
            return self.result(STATUS_DIVERGENT, 0, one_line(str(outcome)))
        if isinstance(outcome, BaseException):
            return self.result(STATUS_UNREADABLE, 0, f"the capture was not stored: {one_line(str(outcome))}")
        assert isinstance(outcome, agentstate.ReplaceResult)
        return replace(self.result(self.status, outcome.records_written, self.note), drift=self.drift)


def _capture_once(
    db: CheckpointStore, source: SessionSource, on_file: Callable[[SourceFile], None] | None
) -> SessionCaptureResult:
    prepared = _prepare(db, source, on_file)
    if isinstance(prepared, SessionCaptureResult):
        return prepared
    return prepared.finish(db, agentstate.capture_batch(db, [prepared.item()])[0])


def _head_moved(db: CheckpointStore, agent: str, sid: str, canon: agentstate.CanonicalShape | None) -> bool:
    """True when the session's head is no longer the one the capture's advisory read saw."""
    try:
        now = agentstate.read_canonical(db, agent, sid)
    except agentstate.SessionStateOutOfSync:
        return False
    return (now.run_id if now else None) != (canon.run_id if canon else None)


def _first_line(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.readline(1024 * 1024)
    except OSError:
        return b""


def capture_sources(
    sd: SessionDir,
    agent: str,
    root: Path,
    sessions: Sequence[SessionSource],
    unkeyed: Sequence[UnkeyedFile],
    progress: ProgressCallback | None = None,
) -> CaptureSummary:
    """Capture discovered sessions (the common part of the two ``capture_*`` functions). A first capture into a
    directory without a checkpoint file builds it privately and publishes it (:mod:`checkpoint_firstbuild`);
    when another process published one first, the capture runs again into that one."""
    agentstate.require_state_writable(sd)
    while True:
        try:
            return _capture_sources(sd, agent, root, sessions, unkeyed, progress)
        except _StoreAppeared:
            continue


class _StoreAppeared(Exception):
    """A first capture's private build could not be published: another process made the checkpoint file."""


def _capture_sources(
    sd: SessionDir,
    agent: str,
    root: Path,
    sessions: Sequence[SessionSource],
    unkeyed: Sequence[UnkeyedFile],
    progress: ProgressCallback | None,
) -> CaptureSummary:
    all_files = [f for s in sessions for f in s.files] + [u.file for u in unkeyed]
    files_total = len(all_files)
    bytes_total = sum(f.size for f in all_files)
    done_files = 0
    done_bytes = 0

    def tick(f: SourceFile) -> None:
        nonlocal done_files, done_bytes
        done_files += 1
        done_bytes += f.size
        if progress:
            progress(CaptureProgress(done_files, files_total, done_bytes, bytes_total, f.rel))

    if progress:
        progress(CaptureProgress(0, files_total, 0, bytes_total, ""))
    first = open_first_build(sd)
    build: FirstBuild | None = None
    db: CheckpointStore
    if first is not None:
        db, build = first
    else:
        opened = agentstate.open_state_db(sd, create=True)
        assert opened is not None
        db = opened
    results: list[SessionCaptureResult | None] = []
    batch: list[tuple[int, _Pending]] = []
    batch_bytes = 0
    writer = _BatchWriter()

    def publish() -> None:
        """The private build put in place, and the capture goes on in the published file (no write in flight)."""
        nonlocal db, build
        assert build is not None and isinstance(db, Database)
        done, build = build, None
        if not done.publish(db):
            raise _StoreAppeared()
        reopened = agentstate.open_state_db(sd, create=True)
        assert reopened is not None
        db = reopened

    def write_batch() -> None:
        nonlocal batch, batch_bytes
        if not batch:
            return
        todo, batch, batch_bytes = batch, [], 0
        writer.wait()
        if build is not None and build.size() >= FIRST_BUILD_BYTES:
            publish()
        store = db

        def write() -> None:
            outcomes = agentstate.capture_batch(store, [p.item() for _, p in todo])
            for (index, p), outcome in zip(todo, outcomes, strict=True):
                try:
                    results[index] = p.finish(store, outcome)
                except _Superseded:  # another process or host wrote it meanwhile: this session alone, again
                    results[index] = capture_session(store, p.source)

        writer.submit(write)

    try:
        headed = checkpointed_sessions(db, agent)  # one query instead of one per session
        for source in sessions:
            if source.agent_session_id in headed:
                writer.wait()  # its canonical shape is read: the store is used by one thread at a time
            prepared = _prepare(db, source, tick, headed)
            if isinstance(prepared, SessionCaptureResult):
                results.append(prepared)
                continue
            results.append(None)
            if any(s.tail is None for s in prepared.live):
                write_batch()  # a tail too big to keep is re-read while it is written: on its own
                writer.wait()
                results[-1] = _capture_pending(db, prepared)
                continue
            batch.append((len(results) - 1, prepared))
            batch_bytes += prepared.kept_bytes
            if len(batch) >= BATCH_SESSIONS or batch_bytes >= BATCH_BYTES:
                write_batch()
        write_batch()
        writer.wait()
        if build is not None:
            publish()
    except BaseException as exc:
        writer.wait(reraise=False)  # the store is closed below: its writer is done first
        if build is not None and isinstance(db, Database) and not isinstance(exc, _StoreAppeared):
            kept, build = build, None
            with contextlib.suppress(Exception):  # what was committed is kept, as it is in place
                kept.publish(db)
        raise
    finally:
        writer.shutdown()
        if build is not None:
            db.close()
            build.discard()
        db.close()
    done = [r for r in results if r is not None]
    for u in unkeyed:
        done.append(_unkeyed_result(agent, u))
        tick(u.file)
    return CaptureSummary(agent, str(root), tuple(done), files_total, bytes_total)


class _BatchWriter:
    """Writes a capture's batches on one background thread while the capture scans the next batch: at most one
    batch in flight, so at most two batches' kept tails are in memory. The thread spends most of a batch in
    SQLite or the PostgreSQL driver, which let go of Python's lock (the lines go in multi-row statements:
    :class:`~store.agents.checkpoint_fresh.LineInserts`), so on two cores the scan's parsing and the store's
    writing overlap. The store itself is only ever used by one thread at a time: the capture waits
    (:meth:`wait`) before it reads from the store or writes on its own."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._inflight: Future[None] | None = None

    def submit(self, write: Callable[[], None]) -> None:
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessionscope-capture-writer")
        self._inflight = self._pool.submit(write)

    def wait(self, *, reraise: bool = True) -> None:
        """Until the batch in flight is written; its error raised here (``reraise``) or dropped."""
        inflight, self._inflight = self._inflight, None
        if inflight is None:
            return
        if reraise:
            inflight.result()
        else:
            futures_wait([inflight])

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _capture_pending(db: CheckpointStore, prepared: _Pending) -> SessionCaptureResult:
    try:
        return prepared.finish(db, agentstate.capture_batch(db, [prepared.item()])[0])
    except _Superseded:
        return capture_session(db, prepared.source)


def capture_claude_code(
    sd: SessionDir, root: str | os.PathLike[str] | None = None, *, progress: ProgressCallback | None = None
) -> CaptureSummary:
    """Capture every Claude Code session below ``root`` (default ``~/.claude/projects``)."""
    agentstate.require_state_writable(sd)
    base = Path(root).expanduser().absolute() if root is not None else default_claude_code_root()
    sessions, unkeyed = discover_claude_code(base)
    return capture_sources(sd, AGENT_CLAUDE_CODE, base, sessions, unkeyed, progress)


def capture_codex(
    sd: SessionDir, root: str | os.PathLike[str] | None = None, *, progress: ProgressCallback | None = None
) -> CaptureSummary:
    """Capture every Codex rollout below ``root`` (default ``~/.codex/sessions``)."""
    agentstate.require_state_writable(sd)
    base = Path(root).expanduser().absolute() if root is not None else default_codex_root()
    sessions, unkeyed = discover_codex(base)
    return capture_sources(sd, AGENT_CODEX, base, sessions, unkeyed, progress)


def capture_paths(sd: SessionDir, agent: str, root: str | os.PathLike[str], paths: Sequence[str | os.PathLike[str]]) -> CaptureSummary:
    """Capture only the sessions the given files belong to (used when following a live file)."""
    agentstate.require_state_writable(sd)
    base = Path(root).expanduser().absolute()
    sessions, unkeyed = discover_claude_code(base) if agent == AGENT_CLAUDE_CODE else discover_codex(base)
    wanted = {Path(p).expanduser().absolute() for p in paths}
    chosen = [s for s in sessions if any(f.path in wanted for f in s.files)]
    lost = [u for u in unkeyed if u.file.path in wanted]
    return capture_sources(sd, agent, base, chosen, lost)


__all__ = [
    "CaptureProgress",
    "CaptureSummary",
    "ClosedCall",
    "DIVERGENT",
    "ExportResult",
    "FileScan",
    "FileVerification",
    "INTERRUPTED_TEXT",
    "OUT_OF_SYNC",
    "ProgressCallback",
    "RepairCopyRefused",
    "STATUSES",
    "STATUS_APPENDED",
    "STATUS_DIVERGENT",
    "STATUS_NEW",
    "STATUS_UNCHANGED",
    "STATUS_UNREADABLE",
    "SessionCaptureResult",
    "SessionSource",
    "SourceFile",
    "TAIL_MEMORY_BUDGET",
    "UnkeyedFile",
    "VERIFIED",
    "VerifyResult",
    "capture_claude_code",
    "capture_codex",
    "capture_paths",
    "capture_session",
    "capture_sources",
    "claude_code_path_base",
    "codex_path_base",
    "counts_as_record",
    "default_claude_code_root",
    "default_codex_root",
    "discover_claude_code",
    "discover_codex",
    "export_repaired_copy",
    "iter_lines",
    "os_reason",
    "read_checkpoint_session",
    "record_stream",
    "repaired_copy_name",
    "reread_tail",
    "scan_file",
    "storable",
    "verify",
]
