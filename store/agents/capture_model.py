"""What a capture, a verification and a repaired copy report: statuses and result dataclasses.

Statuses of a captured session: ``new``, ``appended``, ``unchanged``, ``divergent``, ``unreadable``; of a
verified checkpoint: ``verified``, ``divergent``, ``out_of_sync``. The work is done in
:mod:`store.agents.capture` (capturing), :mod:`store.agents.capture_discovery` (finding the files),
:mod:`store.agents.capture_scan` (reading them), :mod:`store.agents.capture_verify` (verifying, reading back)
and :mod:`store.agents.repair_copy` (repaired copies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from store.agents.native_drift import DriftCounter

STATUS_NEW = "new"
STATUS_APPENDED = "appended"
STATUS_UNCHANGED = "unchanged"
STATUS_DIVERGENT = "divergent"
STATUS_UNREADABLE = "unreadable"
STATUSES = (STATUS_NEW, STATUS_APPENDED, STATUS_UNCHANGED, STATUS_DIVERGENT, STATUS_UNREADABLE)

VERIFIED = "verified"
DIVERGENT = "divergent"
OUT_OF_SYNC = "out_of_sync"


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
    drift: DriftCounter | None = field(default=None, compare=False, repr=False)  # of the records written

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

    def drift(self) -> list[str]:
        """The format-drift report of the records written: record types and fields the readers do not know,
        one line per agent version ([] when every record was recognised)."""
        total = DriftCounter(self.agent)
        for s in self.sessions:
            if s.drift is not None:
                total.merge(s.drift)
        return total.report()


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
