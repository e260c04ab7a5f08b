"""Capturing Claude Code and Codex transcripts as agent checkpoints, verifying them, repairing copies.

Discovery:

* Claude Code (default root ``~/.claude/projects``): in each project folder, ``<session>.jsonl``,
  ``<session>/subagents/*.jsonl`` (new sub-agent layout) and ``agent-*.jsonl`` (old layout). Files are grouped
  by the ``sessionId`` of their first record that names one, so a sub-agent file joins its parent session in
  either layout, and a sub-agent file whose parent transcript is gone still forms a session of its own.
* Codex (default root ``~/.codex/sessions``): every ``rollout-*.jsonl`` below the root, keyed by the id of its
  ``session_meta`` record (or the id line of older rollouts).

A file that names no session (an empty file, or one with only ``summary`` records) cannot be keyed: it is
reported as its own ``unreadable`` entry with an empty ``agent_session_id`` and is not stored.

Each session is one checkpoint keyed by (agent, agent session id); its file paths are relative to the projects
folder (Claude Code: ``<project>/<session>.jsonl``) or the sessions folder (Codex: ``YYYY/MM/DD/rollout-….jsonl``),
also when a single project or day folder is given, so a narrower capture finds the same checkpoints. A re-capture reads the canonical shape first and proves each file's canonical prefix by digest, so an
appended file costs one hash of its prefix plus the new tail, and only the tail is written. A file whose
canonical prefix changed (a rewritten, shortened or removed file) makes the session ``divergent``: nothing is
written until a reset is published (:func:`store.agents.agentstate.publish_reset`), after which the next capture
stores the files afresh (reported as ``new``).

A record that is not valid JSON makes its session ``unreadable`` (a checkpoint restores records byte for byte
and cannot hold one), except a cut-off last line without its newline: that is taken to be still in the
writing and is left for the next capture (``pending_lines``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid as uuidlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.agents import agentstate as ast
from store.agents.agentstate import (
    MAX_FILES,
    MAX_LINE_BYTES,
    MAX_RECORDS,
    MAX_RESTORED_BYTES,
    FileShape,
    PersistedSessionState,
    PersistedSessionStateFile,
    SessionStateRecord,
    check_json,
    compact,
)
from store.mothx.db import Database
from store.errors import RepairRefused, SessionNotFound, StoreError
from store.agents.native import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
    K_TOOL_CALL,
    NativeSession,
    NativeTranscript,
    detect_agent,
    link_claude_code_session,
    parse_claude_code,
    parse_codex,
)
from store.mothx.sessiondir import SessionDir

STATUS_NEW = "new"
STATUS_APPENDED = "appended"
STATUS_UNCHANGED = "unchanged"
STATUS_DIVERGENT = "divergent"
STATUS_UNREADABLE = "unreadable"
STATUSES = (STATUS_NEW, STATUS_APPENDED, STATUS_UNCHANGED, STATUS_DIVERGENT, STATUS_UNREADABLE)

VERIFIED = "verified"
DIVERGENT = "divergent"
OUT_OF_SYNC = "out_of_sync"

TAIL_MEMORY_BUDGET = 64 * 1024 * 1024  # compacted tail bytes kept between the scan and the write, per session
_READ_CHUNK = 1 << 20
_TRIM = b" \t\r\n"


def default_claude_code_root() -> Path:
    return Path.home() / ".claude" / "projects"


def default_codex_root() -> Path:
    return Path.home() / ".codex" / "sessions"


# ---------------------------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class CaptureProgress:
    """Reported after each file (and once at the start): enough for a progress bar over files and bytes."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    current: str = ""


ProgressCallback = Callable[[CaptureProgress], None]


@dataclass(frozen=True)
class SessionCaptureResult:
    agent: str
    agent_session_id: str
    status: str
    files: int
    records: int
    records_written: int
    detail: str = ""
    paths: tuple[str, ...] = ()
    pending_lines: int = 0

    def to_json(self) -> dict[str, object]:
        """The command line's ``--json`` object (the six fields, then ``detail`` and ``paths``)."""
        return {
            "agent": self.agent,
            "agent_session_id": self.agent_session_id,
            "status": self.status,
            "files": self.files,
            "records": self.records,
            "records_written": self.records_written,
            "detail": self.detail,
            "paths": list(self.paths),
        }


@dataclass(frozen=True)
class CaptureSummary:
    agent: str
    root: str
    sessions: tuple[SessionCaptureResult, ...]
    files: int
    bytes: int

    def count(self, status: str) -> int:
        return sum(1 for s in self.sessions if s.status == status)

    @property
    def counts(self) -> dict[str, int]:
        return {status: self.count(status) for status in STATUSES}

    @property
    def records_written(self) -> int:
        return sum(s.records_written for s in self.sessions)

    def to_json(self) -> list[dict[str, object]]:
        return [s.to_json() for s in self.sessions]

    def session(self, agent_session_id: str) -> SessionCaptureResult | None:
        return next((s for s in self.sessions if s.agent_session_id == agent_session_id), None)


@dataclass(frozen=True)
class SourceFile:
    path: Path  # absolute
    rel: str  # relative to the capture root, "/"-separated
    size: int


@dataclass(frozen=True)
class SessionSource:
    agent: str
    agent_session_id: str
    root: Path
    files: tuple[SourceFile, ...]  # in byte order of rel
    transcript: str  # rel of the session's own transcript
    cwd: str


@dataclass(frozen=True)
class UnkeyedFile:
    file: SourceFile
    reason: str


@dataclass(frozen=True)
class FileVerification:
    path: str
    status: str  # verified | divergent
    stored_records: int
    stored_digest: str
    disk_records: int  # -1 when the file is missing
    detail: str = ""


@dataclass(frozen=True)
class VerifyResult:
    agent: str
    agent_session_id: str
    status: str  # verified | divergent | out_of_sync
    head_kind: str  # checkpoint | reset | "" (no head)
    details: tuple[str, ...]
    files: tuple[FileVerification, ...] = ()
    new_records: int = 0  # records on disk beyond the checkpoint (not yet captured)


@dataclass(frozen=True)
class ClosedCall:
    call_id: str
    name: str
    line: int  # line of the call in the original file
    inserted_at: int  # line number of the synthetic result in the copy


@dataclass(frozen=True)
class ExportResult:
    source: str
    out_path: str
    agent: str
    closed: tuple[ClosedCall, ...]
    lines_in: int
    lines_out: int


# ---------------------------------------------------------------------------------------------- discovery


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _source(root: Path, path: Path) -> SourceFile | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return SourceFile(path, _rel(root, path), st.st_size)


def _first_records(path: Path, limit_bytes: int = 4 << 20) -> Iterator[dict[str, Any]]:
    """The JSON objects of a file's first lines (unreadable lines skipped), for keying."""
    try:
        with path.open("rb") as fh:
            read = 0
            for line in fh:
                read += len(line)
                text = line.strip(_TRIM)
                if text:
                    try:
                        obj = json.loads(text)
                    except (ValueError, UnicodeDecodeError, RecursionError):
                        obj = None
                    if isinstance(obj, dict):
                        yield obj
                if read >= limit_bytes:
                    return
    except OSError:
        return


def _claude_key(path: Path, size: int) -> tuple[str, str, str]:
    """(session id, cwd, reason when unkeyed) from a Claude Code file's records."""
    if size == 0:
        return "", "", "the file is empty"
    kinds: set[str] = set()
    for obj in _first_records(path):
        kinds.add(str(obj.get("type", "")))
        sid = obj.get("sessionId")
        if isinstance(sid, str) and sid.strip():
            cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else ""
            if not cwd:
                for later in _first_records(path, 1 << 20):
                    if isinstance(later.get("cwd"), str) and later["cwd"]:
                        cwd = later["cwd"]
                        break
            return sid, cwd, ""
    if kinds == {"summary"}:
        return "", "", "the file holds only summary records, and none names a session"
    if not kinds:
        return "", "", "no line of the file is readable JSON"
    return "", "", "no record of the file names a session"


def _codex_key(path: Path, size: int) -> tuple[str, str, str]:
    if size == 0:
        return "", "", "the file is empty"
    seen = False
    for obj in _first_records(path, 1 << 20):
        seen = True
        payload = obj.get("payload")
        if obj.get("type") == "session_meta" and isinstance(payload, dict):
            sid = payload.get("id")
            if isinstance(sid, str) and sid.strip():
                cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else ""
                return sid, cwd, ""
        if "type" not in obj and isinstance(obj.get("id"), str) and "timestamp" in obj:
            return obj["id"], "", ""
    if not seen:
        return "", "", "no line of the file is readable JSON"
    return "", "", "no session_meta record names the session"


def _group(
    agent: str, root: Path, files: list[SourceFile], keyer: Callable[[Path, int], tuple[str, str, str]]
) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    groups: dict[str, list[tuple[SourceFile, str]]] = {}
    unkeyed: list[UnkeyedFile] = []
    for f in files:
        sid, cwd, reason = keyer(f.path, f.size)
        if not sid:
            unkeyed.append(UnkeyedFile(f, reason))
            continue
        groups.setdefault(sid, []).append((f, cwd))
    sessions: list[SessionSource] = []
    for sid, members in groups.items():
        members.sort(key=lambda m: m[0].rel.encode("utf-8", "surrogatepass"))
        rels = [m[0].rel for m in members]
        transcript = _pick_transcript(agent, sid, rels)
        cwd = next((c for m, c in members if m.rel == transcript and c), "") or next((c for _, c in members if c), "")
        if not cwd:
            main = next(m for m, _ in members if m.rel == transcript)
            cwd = str(main.path.parent)
        sessions.append(SessionSource(agent, sid, root, tuple(m for m, _ in members), transcript, cwd))
    sessions.sort(key=lambda s: (s.transcript.encode("utf-8", "surrogatepass"), s.agent_session_id))
    unkeyed.sort(key=lambda u: u.file.rel)
    return sessions, unkeyed


def _pick_transcript(agent: str, sid: str, rels: list[str]) -> str:
    if agent == AGENT_CLAUDE_CODE:
        own = [r for r in rels if r.rsplit("/", 1)[-1] == f"{sid}.jsonl"]
        if own:
            return own[0]
        main = [r for r in rels if "/subagents/" not in f"/{r}" and not r.rsplit("/", 1)[-1].startswith("agent-")]
        if main:
            return main[0]
    return rels[0]


def claude_code_path_base(base: Path) -> Path:
    """The folder file paths are stored relative to: the projects folder, even when ``base`` is one project
    (a folder holding session files itself), so capturing a project alone or the whole tree keys the same."""
    if base.is_dir() and any(p.is_file() for p in base.glob("*.jsonl")):
        return base.parent
    return base


def codex_path_base(base: Path) -> Path:
    """The ``sessions`` folder above a ``YYYY``, ``YYYY/MM`` or ``YYYY/MM/DD`` folder (else ``base`` itself)."""
    two, four = re.compile(r"\d{2}"), re.compile(r"\d{4}")
    names = [base.name, base.parent.name, base.parent.parent.name]
    if two.fullmatch(names[0]) and two.fullmatch(names[1]) and four.fullmatch(names[2]):
        return base.parents[2]
    if two.fullmatch(names[0]) and four.fullmatch(names[1]):
        return base.parents[1]
    if four.fullmatch(names[0]):
        return base.parent
    return base


def discover_claude_code(root: str | os.PathLike[str] | None = None) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    base = Path(root).expanduser().absolute() if root is not None else default_claude_code_root()
    rel_base = claude_code_path_base(base)
    files: list[SourceFile] = []
    if base.is_dir():
        folders = [base] + sorted(p for p in base.iterdir() if p.is_dir())
        seen: set[Path] = set()
        for folder in folders:
            candidates = sorted(folder.glob("*.jsonl")) + sorted(folder.glob("*/subagents/*.jsonl"))
            for path in candidates:
                if path in seen or not path.is_file():
                    continue
                seen.add(path)
                src = _source(rel_base, path)
                if src is not None:
                    files.append(src)
    return _group(AGENT_CLAUDE_CODE, rel_base, files, _claude_key)


def discover_codex(root: str | os.PathLike[str] | None = None) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    base = Path(root).expanduser().absolute() if root is not None else default_codex_root()
    rel_base = codex_path_base(base)
    files: list[SourceFile] = []
    if base.is_dir():
        for path in sorted(base.rglob("rollout-*.jsonl")):
            if path.is_file():
                src = _source(rel_base, path)
                if src is not None:
                    files.append(src)
    return _group(AGENT_CODEX, rel_base, files, _codex_key)


# ------------------------------------------------------------------------------------------------ scanning


@dataclass
class FileScan:
    """One file read for a capture: its shape, prefix proof and the tail to store."""

    rel: str
    path: Path
    records: int = 0
    digest: str = ""
    restored_bytes: int = 0
    prefix_records: int = 0
    prefix_digest: str = ""
    prefix_state: Any = field(default=None, repr=False)
    tail_from: int = 0  # records before the tail
    tail_offset: int = 0  # byte offset of the tail's first line
    tail: list[bytes] | None = field(default_factory=list, repr=False)  # None: re-read from tail_offset
    tail_bytes: int = 0
    pending_lines: int = 0
    bytes_read: int = 0
    problem: str = ""
    problem_status: str = ""  # divergent | unreadable


def _iter_lines(fh: Any, start_offset: int) -> Iterator[tuple[int, bytes, bool]]:
    """(byte offset, line without "\\n", ended with "\\n") from ``start_offset``."""
    offset = start_offset
    for line in fh:
        complete = line.endswith(b"\n")
        yield offset, (line[:-1] if complete else line), complete
        offset += len(line)


def _counts_as_record(text: bytes, complete: bool) -> bool:
    """A last line without its newline counts only when it is a whole JSON object or array."""
    if complete:
        return True
    if text[:1] not in (b"{", b"["):
        return False
    try:
        return check_json(text.decode("utf-8")) is None
    except UnicodeDecodeError:
        return False


def scan_file(path: Path, rel: str, canonical: FileShape | None, hint_bytes: int = 0, keep_budget: int = 0) -> FileScan:
    """Hash a file's compacted records, taking the prefix proof at the canonical record count.

    When ``hint_bytes`` (the canonical file's restored length) is given, the prefix is first hashed in one read:
    if the file is written compactly, its first ``hint_bytes`` bytes *are* the canonical restored bytes and the
    digest matches; otherwise the file is re-read record by record.
    """
    scan = FileScan(rel=rel, path=path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        scan.problem, scan.problem_status = f"{rel} cannot be read ({exc.strerror or exc})", STATUS_UNREADABLE
        return scan
    with fh:
        hasher = hashlib.sha256()
        records = 0
        restored = 0
        offset = 0
        physical = 0
        if canonical is not None and hint_bytes > 0:
            quick = hashlib.sha256()
            left = hint_bytes
            while left > 0:
                chunk = fh.read(min(_READ_CHUNK, left))
                if not chunk:
                    break
                quick.update(chunk)
                left -= len(chunk)
            if left == 0 and quick.hexdigest() == canonical.digest:
                hasher, records, restored = quick, canonical.records, hint_bytes
                offset, physical = hint_bytes, canonical.records
                scan.prefix_records, scan.prefix_digest, scan.prefix_state = records, canonical.digest, quick.copy()
            else:
                fh.seek(0)
        canon_records = canonical.records if canonical is not None else 0
        scan.tail_from = canon_records if canonical is not None else 0
        scan.tail_offset = offset
        keep = scan.tail
        for line_offset, line, complete in _iter_lines(fh, offset):
            physical += 1
            text = line.strip(_TRIM)
            if not text:
                continue
            in_prefix = records < canon_records
            if not complete and not _counts_as_record(text, complete):
                scan.pending_lines = 1
                break
            if not in_prefix:
                if len(text) > MAX_LINE_BYTES:
                    scan.problem, scan.problem_status = (
                        f"{rel} line {physical} is longer than {MAX_LINE_BYTES} bytes", STATUS_UNREADABLE)
                    break
                try:
                    decoded = text.decode("utf-8")
                except UnicodeDecodeError:
                    scan.problem, scan.problem_status = f"{rel} line {physical} is not valid UTF-8", STATUS_DIVERGENT
                    break
                why = check_json(decoded)
                if why:
                    scan.problem, scan.problem_status = (
                        f"{rel} line {physical} is not valid JSON ({why})", STATUS_UNREADABLE)
                    break
            packed = compact(text)
            hasher.update(packed)
            hasher.update(b"\n")
            records += 1
            restored += len(packed) + 1
            if records > MAX_RECORDS or restored > MAX_RESTORED_BYTES:
                scan.problem, scan.problem_status = (
                    f"{rel} is larger than a checkpoint may be ({MAX_RECORDS} records, "
                    f"{MAX_RESTORED_BYTES} bytes)", STATUS_UNREADABLE)
                break
            if in_prefix:
                if records == canon_records:
                    scan.prefix_records, scan.prefix_digest = records, hasher.hexdigest()
                    scan.prefix_state = hasher.copy()
                    scan.tail_offset = line_offset + len(line) + (1 if complete else 0)
                    if scan.prefix_digest != canonical.digest:  # type: ignore[union-attr]
                        scan.problem, scan.problem_status = (
                            f"{rel} no longer starts with the {canon_records} canonical records", STATUS_DIVERGENT)
                        break
                continue
            if keep is not None:
                if scan.tail_bytes + len(packed) <= keep_budget:
                    keep.append(packed)
                    scan.tail_bytes += len(packed)
                else:
                    keep = scan.tail = None
        scan.bytes_read = fh.tell()
    scan.records = records
    scan.digest = hasher.hexdigest()
    scan.restored_bytes = restored
    if not scan.problem and canonical is not None and records < canon_records:
        scan.problem, scan.problem_status = (
            f"{rel} has {records} records, fewer than the canonical {canon_records}", STATUS_DIVERGENT)
    return scan


def _reread_tail(scan: FileScan) -> Iterator[bytes]:
    """The tail records of a scanned file, read again from its tail offset (for tails too big to keep)."""
    wanted = scan.records - scan.tail_from
    if wanted <= 0:
        return
    with scan.path.open("rb") as fh:
        fh.seek(scan.tail_offset)
        for _, line, complete in _iter_lines(fh, scan.tail_offset):
            text = line.strip(_TRIM)
            if not text:
                continue
            if not complete and not _counts_as_record(text, complete):
                return
            yield text
            wanted -= 1
            if wanted == 0:
                return


def _record_stream(scans: Sequence[FileScan]) -> Iterator[SessionStateRecord]:
    for scan in scans:
        tail = scan.tail if scan.tail is not None else _reread_tail(scan)
        line = scan.tail_from
        for content in tail:
            line += 1
            yield SessionStateRecord(scan.rel, line, content)


# ------------------------------------------------------------------------------------------------ capture


def _unkeyed_result(agent: str, u: UnkeyedFile) -> SessionCaptureResult:
    return SessionCaptureResult(agent, "", STATUS_UNREADABLE, 1, 0, 0, f"{u.file.rel}: {u.reason}.", (u.file.rel,))


def capture_session(
    db: Database, source: SessionSource, *, on_file: Callable[[SourceFile], None] | None = None
) -> SessionCaptureResult:
    """Capture one discovered session into an open checkpoint database (read-write)."""
    agent, sid = source.agent, source.agent_session_id
    rels = tuple(f.rel for f in source.files)

    def result(status: str, records: int = 0, written: int = 0, detail: str = "", pending: int = 0) -> SessionCaptureResult:
        return SessionCaptureResult(agent, sid, status, len(source.files), records, written, detail, rels, pending)

    if len(source.files) > MAX_FILES:
        for f in source.files:
            if on_file:
                on_file(f)
        return result(STATUS_UNREADABLE, detail=f"the session has {len(source.files)} files, more than {MAX_FILES}.")
    problem = ast.path_problem(source.transcript)
    if problem or sid != sid.strip() or not sid or len(sid.encode("utf-8", "surrogatepass")) > ast.MAX_AGENT_SESSION_ID_BYTES:
        for f in source.files:
            if on_file:
                on_file(f)
        return result(STATUS_UNREADABLE, detail=f"the session cannot be keyed ({problem or 'its id is unusable'}).")
    canon = ast._canonical(db, agent, sid)
    shapes = canon.shapes if canon else {}
    marks = canon.restored_bytes if canon else {}
    scans: list[FileScan] = []
    budget = TAIL_MEMORY_BUDGET
    stop: FileScan | None = None
    for f in source.files:
        bad = ast.path_problem(f.rel)
        if bad:
            scan = FileScan(rel=f.rel, path=f.path, problem=f"{f.rel}: {bad}", problem_status=STATUS_UNREADABLE)
        else:
            scan = scan_file(f.path, f.rel, shapes.get(f.rel), marks.get(f.rel, 0), budget)
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
    pending_note = f" The last line of {', '.join(s.rel for s in scans if s.pending_lines)} is incomplete and was left for the next capture." if pending else ""
    total = sum(s.records for s in scans)
    live = [s for s in scans if s.records > 0]
    if shapes:
        gone = sorted(set(shapes) - {s.rel for s in live})
        if gone:
            return result(STATUS_DIVERGENT, total, 0, f"the canonical file {gone[0]} is missing or empty.")
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
    why = ast.divergence(shapes, files)
    if why:
        return result(STATUS_DIVERGENT, total, 0, why + ".")
    if shapes and len(live) == len(shapes) and all(
        s.rel in shapes and shapes[s.rel].records == s.records and shapes[s.rel].digest == s.digest for s in live
    ):
        return result(STATUS_UNCHANGED, total, 0, pending_note.strip(), pending)
    if total > MAX_RECORDS or sum(s.restored_bytes for s in live) > MAX_RESTORED_BYTES:
        return result(STATUS_UNREADABLE, total, 0, "the session is larger than a checkpoint may be.")
    fence = ast._begin_run(db, agent, sid, str(source.root))
    state = PersistedSessionState(
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
    try:
        outcome = ast._replace(db, fence, state, _record_stream(live))
    except ast.SessionStateDivergent as exc:
        ast._fail_run(db, fence)
        return result(STATUS_DIVERGENT, total, 0, str(exc))
    except (ast.InvalidSessionState, ast.StaleFence, OSError) as exc:
        ast._fail_run(db, fence)
        return result(STATUS_UNREADABLE, total, 0, f"the capture was not stored: {exc}")
    ast._publish(db, fence, ast.KIND_CHECKPOINT)
    status = STATUS_APPENDED if shapes else STATUS_NEW
    return result(status, total, outcome.records_written, pending_note.strip(), pending)


def capture_sources(
    sd: SessionDir,
    agent: str,
    root: Path,
    sessions: Sequence[SessionSource],
    unkeyed: Sequence[UnkeyedFile],
    progress: ProgressCallback | None = None,
) -> CaptureSummary:
    """Capture discovered sessions (the common part of the two ``capture_*`` functions)."""
    ast.require_state_writable(sd)
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
    results: list[SessionCaptureResult] = []
    db = ast.open_state_db(sd, create=True)
    assert db is not None
    try:
        for source in sessions:
            results.append(capture_session(db, source, on_file=tick))
    finally:
        db.close()
    for u in unkeyed:
        results.append(_unkeyed_result(agent, u))
        tick(u.file)
    return CaptureSummary(agent, str(root), tuple(results), files_total, bytes_total)


def capture_claude_code(
    sd: SessionDir, root: str | os.PathLike[str] | None = None, *, progress: ProgressCallback | None = None
) -> CaptureSummary:
    """Capture every Claude Code session below ``root`` (default ``~/.claude/projects``)."""
    ast.require_state_writable(sd)
    base = Path(root).expanduser().absolute() if root is not None else default_claude_code_root()
    sessions, unkeyed = discover_claude_code(base)
    return capture_sources(sd, AGENT_CLAUDE_CODE, base, sessions, unkeyed, progress)


def capture_codex(
    sd: SessionDir, root: str | os.PathLike[str] | None = None, *, progress: ProgressCallback | None = None
) -> CaptureSummary:
    """Capture every Codex rollout below ``root`` (default ``~/.codex/sessions``)."""
    ast.require_state_writable(sd)
    base = Path(root).expanduser().absolute() if root is not None else default_codex_root()
    sessions, unkeyed = discover_codex(base)
    return capture_sources(sd, AGENT_CODEX, base, sessions, unkeyed, progress)


def capture_paths(sd: SessionDir, agent: str, root: str | os.PathLike[str], paths: Sequence[str | os.PathLike[str]]) -> CaptureSummary:
    """Capture only the sessions the given files belong to (used when following a live file)."""
    ast.require_state_writable(sd)
    base = Path(root).expanduser().absolute()
    sessions, unkeyed = discover_claude_code(base) if agent == AGENT_CLAUDE_CODE else discover_codex(base)
    wanted = {Path(p).expanduser().absolute() for p in paths}
    chosen = [s for s in sessions if any(f.path in wanted for f in s.files)]
    lost = [u for u in unkeyed if u.file.path in wanted]
    return capture_sources(sd, agent, base, chosen, lost)


# ------------------------------------------------------------------------------------------------- verify


def _disk_records(path: Path) -> Iterator[tuple[int, bytes]]:
    """(physical line, compacted record) of a file on disk, stopping before a cut-off last line."""
    with path.open("rb") as fh:
        physical = 0
        for _, line, complete in _iter_lines(fh, 0):
            physical += 1
            text = line.strip(_TRIM)
            if not text:
                continue
            if not complete and not _counts_as_record(text, complete):
                return
            yield physical, compact(text)


def verify(sd: SessionDir, agent: str, agent_session_id: str) -> VerifyResult:
    """Compare the published checkpoint of one agent session with its files on disk now (writes nothing).

    ``verified``: every stored file is still a prefix of the file on disk (records appended since are counted in
    ``new_records``). ``divergent``: a stored file was rewritten, shortened or removed. ``out_of_sync``: there
    is nothing verifiable — no head, a reset head, a head without its version, or stored data that fails its
    own digests.
    """
    info = ast.checkpoint_info(sd, agent, agent_session_id)
    if info is None:
        raise SessionNotFound(f"No checkpoint of {agent} session {agent_session_id} exists.")
    if info.head is None:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, "", ("No checkpoint has been published.",))
    if info.head.kind == ast.KIND_RESET:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, ast.KIND_RESET,
                            ("The head is a reset: nothing is checkpointed until the next capture.",))
    if info.head_problem:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, ast.KIND_CHECKPOINT, (info.head_problem,))
    root = Path(info.source_root)
    checks: list[FileVerification] = []
    new_records = 0
    details: list[str] = []

    def consume(state: PersistedSessionState, read: ast.RecordReader) -> None:
        nonlocal new_records
        rec = read()
        for shape in state.files:
            disk_path = root / shape.path
            status, detail, disk_count = "verified", "", 0
            disk: Iterator[tuple[int, bytes]] | None
            try:
                disk = _disk_records(disk_path) if disk_path.is_file() else None
            except OSError:
                disk = None
            if disk is None:
                status, detail, disk_count = DIVERGENT, f"{shape.path} is missing on disk", -1
            while rec is not None and rec.file_path == shape.path:
                if disk is not None and status == "verified":
                    got = next(disk, None)
                    if got is None:
                        status, detail = DIVERGENT, f"{shape.path} on disk ends after {disk_count} records"
                    else:
                        disk_count += 1
                        if got[1] != str(rec.content).encode("utf-8"):
                            status, detail = DIVERGENT, f"{shape.path} line {got[0]} differs from the checkpoint"
                rec = read()
            if disk is not None and status == "verified":
                extra = sum(1 for _ in disk)
                disk_count += extra
                new_records += extra
                if extra:
                    detail = f"{shape.path} has {extra} records not captured yet"
            checks.append(FileVerification(shape.path, status, shape.records, shape.digest, disk_count, detail))
            if detail:
                details.append(detail + ".")

    try:
        with ast.state_db(sd) as db:
            if db is None or not ast._load(db, agent, agent_session_id, consume):
                return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, info.head.kind, ("Nothing could be loaded.",))
    except ast.SessionStateOutOfSync as exc:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, info.head.kind, (str(exc),))
    status = DIVERGENT if any(c.status == DIVERGENT for c in checks) else VERIFIED
    return VerifyResult(agent, agent_session_id, status, info.head.kind, tuple(details), tuple(checks), new_records)


# ----------------------------------------------------------------------------------------- repaired copies

INTERRUPTED_TEXT = "interrupted"


def _claude_synthetic(call_obj: dict[str, Any], call_id: str, new_uuid: str) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "parentUuid": call_obj.get("uuid"),
        "isSidechain": call_obj.get("isSidechain", False),
        "userType": call_obj.get("userType", "external"),
    }
    for key in ("cwd", "sessionId", "version", "gitBranch", "agentId"):
        if key in call_obj:
            rec[key] = call_obj[key]
    rec.update(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": INTERRUPTED_TEXT, "is_error": True}
                ],
            },
            "uuid": new_uuid,
            "timestamp": call_obj.get("timestamp", ""),
            "toolUseResult": INTERRUPTED_TEXT,
        }
    )
    return rec


def _codex_synthetic(call_obj: dict[str, Any], call_id: str, kind: str) -> dict[str, Any]:
    out_type = "custom_tool_call_output" if kind == "custom_tool_call" else "function_call_output"
    payload = {"type": out_type, "call_id": call_id, "output": INTERRUPTED_TEXT}
    if "payload" not in call_obj:
        return payload
    return {"timestamp": call_obj.get("timestamp", ""), "type": "response_item", "payload": payload}


def _dump(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def export_repaired_copy(path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> ExportResult:
    """Write a copy of a Claude Code or Codex transcript in which every interrupted call (a call with no
    result) is closed by a synthetic ``"interrupted"`` error result placed right after it.

    The original is only read. ``out_path`` must not exist (:class:`RepairRefused` otherwise). Every other line
    is copied byte for byte; in a Claude Code copy the record that continued from the interrupted call is
    re-parented onto the synthetic result (only its ``parentUuid`` text changes), so the chain stays linear.
    """
    src = Path(path)
    dst = Path(out_path)
    if dst.exists() or dst.is_symlink():
        raise RepairRefused(f"Refused: {dst} already exists; the repaired copy must be a new file.")
    try:
        same = dst.absolute() == src.absolute()
    except OSError:
        same = False
    if same:
        raise RepairRefused("Refused: the repaired copy cannot replace the original transcript.")
    data = src.read_bytes()
    agent = detect_agent(data)
    if agent not in (AGENT_CLAUDE_CODE, AGENT_CODEX):
        raise RepairRefused(f"Refused: {src.name} is neither a Claude Code nor a Codex transcript.")
    transcript = parse_claude_code(data) if agent == AGENT_CLAUDE_CODE else parse_codex(data)
    by_line = {item.line: item for item in transcript.items}
    pending: dict[int, list[tuple[str, str]]] = {}  # call line -> [(call id, name)]
    for pair in transcript.interrupted:
        if pair.call_id:
            pending.setdefault(pair.call_line, []).append((pair.call_id, pair.name))
    raw_lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        raw_lines = raw_lines[:-1]
    out: list[bytes] = []
    closed: list[ClosedCall] = []
    reparent: dict[str, str] = {}  # old parent uuid -> synthetic uuid
    for number, raw in enumerate(raw_lines, start=1):
        item = by_line.get(number)
        if agent == AGENT_CLAUDE_CODE and reparent and item is not None and item.parent_uuid in reparent:
            old = item.parent_uuid
            new = reparent[old]
            needle = f'"parentUuid":"{old}"'.encode()
            if raw.count(needle) == 1:
                raw = raw.replace(needle, f'"parentUuid":"{new}"'.encode())
            else:
                obj = json.loads(raw)
                obj["parentUuid"] = new
                raw = _dump(obj)
        out.append(raw)
        calls = pending.get(number, [])
        if not calls:
            continue
        call_obj = json.loads(raw)
        original = str(call_obj.get("uuid") or "")
        for call_id, name in calls:
            if agent == AGENT_CLAUDE_CODE:
                new_uuid = str(uuidlib.uuid4())
                synthetic = _claude_synthetic(call_obj, call_id, new_uuid)
                call_obj = {**call_obj, "uuid": new_uuid}  # a second call of the same record chains after the first
            else:
                kind = item.subtype if item is not None and item.kind == K_TOOL_CALL else "function_call"
                synthetic = _codex_synthetic(call_obj, call_id, kind)
            out.append(_dump(synthetic))
            closed.append(ClosedCall(call_id, name, number, len(out)))
        if agent == AGENT_CLAUDE_CODE and original:
            reparent[original] = str(call_obj["uuid"])
    body = b"\n".join(out) + (b"\n" if ends_with_newline or closed else b"")
    try:
        with dst.open("xb") as fh:
            fh.write(body)
    except FileExistsError as exc:
        raise RepairRefused(f"Refused: {dst} already exists; the repaired copy must be a new file.") from exc
    except OSError as exc:
        raise StoreError(f"The repaired copy could not be written to {dst} ({exc.strerror or exc}).") from exc
    return ExportResult(str(src), str(dst), agent, tuple(closed), len(raw_lines), len(out))


# ------------------------------------------------------------------------------------- reading checkpoints


def read_checkpoint_session(sd: SessionDir, agent: str, agent_session_id: str) -> NativeSession | None:
    """The published checkpoint of an agent session, read like the native files (verified while loading).

    Claude Code: the transcript file is the main transcript; ``<session>/subagents/*.jsonl`` and
    ``agent-*.jsonl`` files become sub-agents linked to their ``Task`` calls. Codex: the transcript file.
    None when nothing is published (or the head is a reset); :class:`SessionStateOutOfSync` when the stored
    data does not verify.
    """
    cp = ast.load_checkpoint(sd, agent, agent_session_id)
    if cp is None:
        return None
    transcript = cp.state.transcript_path
    if agent == AGENT_CODEX:
        return NativeSession(AGENT_CODEX, agent_session_id, parse_codex(cp.lines(transcript), transcript))
    main = None
    subs: list[tuple[NativeTranscript, str]] = []
    for f in cp.state.files:
        lines = cp.lines(f.path)
        name = f.path.rsplit("/", 1)[-1]
        is_sub = "/subagents/" in f"/{f.path}" or name.startswith("agent-")
        if f.path == transcript and not is_sub:
            main = parse_claude_code(lines, f.path)
        else:
            subs.append((parse_claude_code(lines, f.path), "subagents" if "/subagents/" in f"/{f.path}" else "project_root"))
    return link_claude_code_session(main, subs)
