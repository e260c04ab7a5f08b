"""Verifying a published checkpoint against the files on disk, and reading a checkpoint back as a session.

Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from store.agents import agentstate
from store.agents.agentstate import (
    PersistedSessionState,
)
from store.agents.capture_discovery import os_reason
from store.agents.capture_model import (
    DIVERGENT,
    OUT_OF_SYNC,
    VERIFIED,
    FileVerification,
    VerifyResult,
)
from store.agents.capture_scan import (
    pending_line,
    read_lines,
    record_bytes,
)
from store.agents.native import (
    AGENT_CODEX,
    NativeSession,
    NativeTranscript,
    link_claude_code_session,
    parse_claude_code,
    parse_codex,
)
from store.errors import (
    SessionNotFound,
)
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line
from store.words import plural

_TRIM = b" \t\r\n"

# ------------------------------------------------------------------------------------------------- verify


def _disk_records(path: Path, unreadable: list[tuple[int, str]]) -> Iterator[tuple[int, bytes]]:
    """(physical line, stored record) of a file on disk, stopping before a cut-off last line; an unreadable line
    gives the same stand-in record a capture stores, and is noted in ``unreadable``."""
    with path.open("rb") as fh:
        physical = 0
        for rl in read_lines(fh, 0):
            physical += 1
            if not rl.oversized and not rl.raw.strip(_TRIM):
                continue
            if pending_line(rl):
                return
            packed, reason = record_bytes(rl, physical)
            if reason:
                unreadable.append((physical, reason))
            yield physical, packed


class _DiskFile:
    """The records of a file on disk, read lazily; ``error`` says why it cannot be read ("" while it can)."""

    def __init__(self, path: Path) -> None:
        self.error = ""
        self.unreadable: list[tuple[int, str]] = []
        self._records: Iterator[tuple[int, bytes]] = iter(())
        try:
            if not path.is_file():
                self.error = "is missing on disk"
                return
        except OSError as exc:
            self.error = f"cannot be read on disk ({os_reason(exc)})"
            return
        self._records = _disk_records(path, self.unreadable)

    def next(self) -> tuple[int, bytes] | None:
        try:
            return next(self._records, None)
        except OSError as exc:
            self.error = f"cannot be read on disk ({os_reason(exc)})"
            return None

    def count_rest(self) -> int:
        n = 0
        while self.next() is not None:
            n += 1
        return n


def verify(sd: SessionDir, agent: str, agent_session_id: str) -> VerifyResult:
    """Compare the published checkpoint of one agent session with its files on disk now (writes nothing).

    ``verified``: every stored file is still a prefix of the file on disk (records appended since are counted in
    ``new_records``). ``divergent``: a stored file was rewritten, shortened or removed. ``out_of_sync``: there
    is nothing verifiable — no head, a reset head, a head without its version, or stored data that fails its
    own digests.
    """
    info = agentstate.checkpoint_info(sd, agent, agent_session_id)
    if info is None:
        raise SessionNotFound(f"No checkpoint of {one_line(agent)} session {one_line(agent_session_id)} exists.")
    if info.head is None:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, "", ("No checkpoint has been published.",))
    if info.head.kind == agentstate.KIND_RESET:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, agentstate.KIND_RESET,
                            ("The head is a reset: nothing is checkpointed until the next capture.",))
    if info.head_problem:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, agentstate.KIND_CHECKPOINT, (one_line(info.head_problem),))
    root = Path(info.source_root)
    checks: list[FileVerification] = []
    new_records = 0
    details: list[str] = []

    def consume(state: PersistedSessionState, read: agentstate.RecordReader) -> None:
        nonlocal new_records
        rec = read()
        for shape in state.files:
            shown = one_line(shape.path)
            disk = _DiskFile(root / shape.path)
            status, detail, disk_count = VERIFIED, "", 0
            if disk.error:
                status, detail, disk_count = DIVERGENT, f"{shown} {disk.error}", -1
            while rec is not None and rec.file_path == shape.path:
                if status == VERIFIED:
                    got = disk.next()
                    if disk.error:
                        status, detail, disk_count = DIVERGENT, f"{shown} {disk.error}", -1
                    elif got is None:
                        status, detail = DIVERGENT, f"{shown} on disk ends after {plural(disk_count, 'record')}"
                    else:
                        disk_count += 1
                        if got[1] != str(rec.content).encode("utf-8", "surrogatepass"):
                            status, detail = DIVERGENT, f"{shown} line {got[0]} differs from the checkpoint"
                rec = read()
            if status == DIVERGENT and disk_count > 0:  # a line differs: still say how many lines the file has
                rest = disk.count_rest()
                if not disk.error:
                    disk_count += rest
            if status == VERIFIED:
                extra = disk.count_rest()
                if disk.error:
                    status, detail, disk_count = DIVERGENT, f"{shown} {disk.error}", -1
                else:
                    disk_count += extra
                    new_records += extra
                    if extra:
                        detail = f"{shown} has {plural(extra, 'record')} not captured yet"
            checks.append(FileVerification(shape.path, status, shape.records, shape.digest, disk_count, detail))
            if detail:
                details.append(detail + ".")
            if disk.unreadable and status == VERIFIED:
                first, why = disk.unreadable[0]
                more = f" and {len(disk.unreadable) - 1} more" if len(disk.unreadable) > 1 else ""
                details.append(f"{shown} line {first} is unreadable ({one_line(why)}){more}; kept as an "
                               "unreadable record.")

    try:
        with agentstate.state_db(sd) as db:
            if db is None or not agentstate.load_from(db, agent, agent_session_id, consume):
                return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, info.head.kind, ("Nothing could be loaded.",))
    except agentstate.SessionStateOutOfSync as exc:
        return VerifyResult(agent, agent_session_id, OUT_OF_SYNC, info.head.kind, (one_line(str(exc)),))
    status = DIVERGENT if any(c.status == DIVERGENT for c in checks) else VERIFIED
    return VerifyResult(agent, agent_session_id, status, info.head.kind, tuple(details), tuple(checks), new_records)


# ------------------------------------------------------------------------------------- reading checkpoints


def read_checkpoint_session(sd: SessionDir, agent: str, agent_session_id: str) -> NativeSession | None:
    """The published checkpoint of an agent session, read like the native files (verified while loading).

    Claude Code: the transcript file is the main transcript; ``<session>/subagents/*.jsonl`` and
    ``agent-*.jsonl`` files become sub-agents linked to their ``Task`` calls. Codex: the transcript file.
    None when nothing is published (or the head is a reset); :class:`SessionStateOutOfSync` when the stored
    data does not verify.
    """
    cp = agentstate.load_checkpoint(sd, agent, agent_session_id)
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
