"""What an agent checkpoint is made of: limits, errors and the dataclasses of the checkpoint contract.

The contract is the reference's (``agent-state-checkpoints.md``): a **version** (state header, with per-file
shapes ``{path, records, digest}``) staged under a run, a **publication head** naming the run the checkpoint
is at (``checkpoint`` or ``reset``), and fenced runs. The functions are in :mod:`store.agents.agentstate`
(writes and the public API), :mod:`store.agents.checkpoint_db` (opening), :mod:`store.agents.checkpoint_read`
(loading and listing) and
:mod:`store.agents.checkpoint_records` (compaction, digests and validation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from store.errors import StoreError
from store.safetext import one_line
from store.times import format_rfc3339

SCHEMA_VERSION = 3
PG_SEQUENCE = "agent_state_fencing_token_seq"
"""The PostgreSQL sequence the fencing tokens come from (the reference's ``session_runtime_fencing_token_seq``)."""
STATE_DIR = "sessionscope"
STATE_DB = "agent-state.db"

MAX_FILES = 1024
MAX_RECORDS = 2_000_000
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_RESTORED_BYTES = 512 * 1024 * 1024
MAX_PATH_BYTES = 4096
MAX_AGENT_ID_BYTES = 256
MAX_AGENT_SESSION_ID_BYTES = 1024
MAX_CWD_BYTES = 16384
INSERT_BATCH_RECORDS = 1024
INSERT_BATCH_BYTES = 4 * 1024 * 1024
LOAD_PAGE_ROWS = 4096
LOAD_PAGE_BYTES = 4 * 1024 * 1024

KIND_CHECKPOINT = "checkpoint"
KIND_RESET = "reset"
ACTIVE_RUN_STATUSES = ("running", "waiting_decision")


# --------------------------------------------------------------------------------------------- errors


class SessionStateDivergent(StoreError):
    """The captured files no longer prove the canonical checkpoint's prefix; nothing was written."""


class SessionStateOutOfSync(StoreError):
    """The head names a run with no staged version, or stored data fails validation or its digests."""


class CheckpointDamaged(SessionStateOutOfSync):
    """A row of the checkpoint file holds a value of the wrong type (text in an integer column, a NULL, a
    number out of range): it was not written by Sessionscope, and that checkpoint cannot be trusted."""


def stored_int(value: object, what: str) -> int:
    """An integer read from a row; :class:`CheckpointDamaged` naming ``what`` for anything else (text, NULL,
    a real, a blob)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    shown = one_line(repr(value))
    raise CheckpointDamaged(
        f"Agent session checkpoint is out of sync with canonical history: {what} is not an integer "
        f"({shown[:60]}{'…' if len(shown) > 60 else ''})."
    )


def stored_text(value: object) -> str:
    """A text read from a row: text as it is, NULL as "", anything else as its decimal or repr."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


class StaleFence(StoreError):
    """The run's fencing token is no longer the session's current token: the writer was superseded."""


class InvalidSessionState(StoreError):
    """A header, file shape or record breaks the checkpoint rules (limits, paths, order, JSON, digests)."""


class RuntimeConfigStale(StoreError):
    """The caller's runtime configuration generation is older than the agent's current one."""


class RuntimeConfigResetInProgress(StoreError):
    """An agent-wide reset holds the configuration publication lock; retry later."""


# ------------------------------------------------------------------------------------------ dataclasses


@dataclass(frozen=True)
class FileShape:
    """One JSONL file of a version: its record count and the digest over its compacted records."""

    path: str
    records: int
    digest: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "records": self.records, "digest": self.digest}


@dataclass(frozen=True)
class PersistedSessionStateFile:
    """One captured file plus its optional prefix proof.

    ``prefix_records``/``prefix_digest`` are the capture's running digest at the canonical version's record
    count (0 / "" = no proof: the file is rewritten in full). ``prefix_state`` is that running SHA-256 itself,
    not finalised, so :func:`replace` can continue it over the tail instead of re-reading the prefix; the
    record stream for such a file then starts at ``prefix_records + 1``. ``restored_bytes`` is the file's
    restored JSONL length when the capture knows it (a hint kept for the next capture). Neither is stored.
    """

    path: str
    records: int
    digest: str
    prefix_records: int = 0
    prefix_digest: str = ""
    prefix_state: Any = field(default=None, compare=False, repr=False)
    restored_bytes: int = 0

    @property
    def shape(self) -> FileShape:
        return FileShape(self.path, self.records, self.digest)


@dataclass(frozen=True)
class PersistedSessionState:
    """A checkpoint header: what is needed to restore an agent's native session files."""

    agent_id: str
    agent_session_id: str
    through_run_id: str
    cwd: str
    transcript_path: str
    runtime_fencing_token: int
    file_count: int
    record_count: int
    files: tuple[PersistedSessionStateFile, ...]

    @property
    def shapes(self) -> tuple[FileShape, ...]:
        return tuple(f.shape for f in self.files)


@dataclass(frozen=True)
class SessionStateRecord:
    """One ordered JSONL value of a snapshot. ``content`` is JSON text (``bytes`` must be UTF-8)."""

    file_path: str
    line_number: int
    content: str | bytes


@dataclass(frozen=True)
class TrustedTail:
    """The new records of one file in one piece, as a capture's scan produced them: ``contents[i]`` is line
    ``first_line + i``: its UTF-8 bytes, already compacted, valid JSON, valid UTF-8 and hashed into the file's
    shape digest; ``sizes[i]`` is its length. Staging accepts one only for a file the caller names as trusted, checks
    its order, counts and sizes in bulk and writes it without a Python object per record; loading re-verifies
    every digest, so a wrong tail still fails closed."""

    file_path: str
    first_line: int
    contents: Sequence[bytes]
    sizes: Sequence[int]


@dataclass(frozen=True)
class PublicationHead:
    run_id: str
    kind: str  # KIND_CHECKPOINT | KIND_RESET


@dataclass(frozen=True)
class RunFence:
    """A run of one agent session holding the fencing token it was started with."""

    session_id: str
    agent_id: str
    agent_session_id: str
    run_id: str
    fencing_token: int


@dataclass(frozen=True)
class ReplaceResult:
    records_written: int
    bytes_written: int
    files_trimmed: int


@dataclass(frozen=True)
class RuntimeConfigEpoch:
    agent: int
    session: int


@dataclass(frozen=True)
class CheckpointInfo:
    """One agent session as the Checkpoints screen lists it."""

    session_id: str
    agent_id: str
    agent_session_id: str
    source_root: str
    head: PublicationHead | None
    state: PersistedSessionState | None  # the head's version (None for no head, a reset, or a missing version)
    head_problem: str  # "" or one sentence: the head names a run with no staged version / an invalid header
    versions: int
    updated_at: str


@dataclass(frozen=True)
class LoadedCheckpoint:
    state: PersistedSessionState
    records: tuple[SessionStateRecord, ...]

    def lines(self, path: str) -> list[str]:
        return [str(r.content) for r in self.records if r.file_path == path]


RecordReader = Callable[[], SessionStateRecord | None]
RecordConsumer = Callable[[PersistedSessionState, RecordReader], None]


@dataclass(frozen=True)
class CanonicalShape:
    """The advisory pre-capture read: the head version's shapes and the restored byte length of each file."""

    session_id: str
    run_id: str
    shapes: dict[str, FileShape]
    restored_bytes: dict[str, int]


@dataclass(frozen=True)
class ResetPreview:
    """What :func:`publish_reset` would change, for a confirmation dialog."""

    agent_id: str
    agent_session_id: str
    head: PublicationHead | None
    files: int  # files of the checkpoint that stops being loadable
    records: int
    allowed: bool
    summary: str  # one sentence


def now_text() -> str:
    """The current UTC time as RFC 3339 text with a ``Z`` (what every checkpoint row stores)."""
    return format_rfc3339()
