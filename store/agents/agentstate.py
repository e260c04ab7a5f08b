"""External-agent checkpoints: native JSONL session files kept as verified versions in SQLite.

The contract is the reference's (``agent-state-checkpoints.md``) moved into a file of ours inside the session
directory, ``<session dir>/sessionscope/agent-state.db`` (layout: ``store/sql/agentstate_v1.sql``):

* a **version** (state header) is staged under the run it is valid through, with the per-file shapes
  ``{path, records, digest}``; all versions of a session share one **line set**;
* the **publication head** names the run the checkpoint is at, as a ``checkpoint`` or a ``reset``; only a
  checkpoint head makes a version loadable, so a staged version nobody published is never shown;
* the file digest is SHA-256 over the compacted records, each followed by ``"\\n"`` (the restored JSONL bytes);
* :func:`replace` appends only the tails that a **prefix proof** shows to extend the canonical version, trims
  candidate tails left by earlier crashed rounds, and declines a capture that no longer proves the canonical
  prefix with :class:`SessionStateDivergent`, writing nothing; the way forward is :func:`publish_reset`;
* :func:`load` reads the head's version in one transaction, bounded by its shapes, re-verifying every digest.

A "session" here is one agent session: the pair (agent id, agent session id), e.g. ``("claude-code",
<sessionId>)``. Each capture of it is a run with a fencing token drawn from a counter; only the newest run of
a session may stage or publish.

Every function takes the :class:`~store.mothx.sessiondir.SessionDir` first and opens the checkpoint file in the
directory's open mode. In a read mode a missing file simply means "no checkpoints", and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import secrets
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from store.mothx.db import Database, open_database
from store.errors import ReadOnlyStore, SchemaIncompatible, StoreError
from store.mothx.sessiondir import SessionDir

SCHEMA_VERSION = 1
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

T = TypeVar("T")


# --------------------------------------------------------------------------------------------- errors


class SessionStateDivergent(StoreError):
    """The captured files no longer prove the canonical checkpoint's prefix; nothing was written."""


class SessionStateOutOfSync(StoreError):
    """The head names a run with no staged version, or stored data fails validation or its digests."""


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


# ------------------------------------------------------------------------------- compaction and digests

_WS = re.compile(rb"[ \t\r\n]")
_ESCAPE_PAIR = re.compile(rb"\\.", re.S)
_COMPACT = re.compile(rb'("(?:[^"\\]++|\\.)*+")|[ \t\r\n]+', re.S)
_TRIM = b" \t\r\n"


def compact(raw: bytes) -> bytes:
    """The record with insignificant whitespace (space, tab, CR, LF outside strings) removed, nothing else.

    Key order, number text, escapes and duplicate keys stay as they are. Already-compact text (what Claude
    Code and Codex write) is recognised without rewriting it.
    """
    if _WS.search(raw) is None:
        return raw
    stripped = _ESCAPE_PAIR.sub(b"", raw) if b"\\" in raw else raw
    parts = stripped.split(b'"')
    if len(parts) % 2 == 1 and _WS.search(b"".join(parts[0::2])) is None:
        return raw
    return _COMPACT.sub(rb"\1", raw)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def check_json(text: str) -> str | None:
    """None when ``text`` is one valid JSON value, else a short reason."""
    try:
        json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        reason = str(exc).split(":")[0] if isinstance(exc, json.JSONDecodeError) else str(exc)
        return reason or "not valid JSON"
    return None


def file_digest(records: Iterable[bytes]) -> str:
    """SHA-256 (hex) of the compacted records, each followed by ``"\\n"``."""
    h = hashlib.sha256()
    for rec in records:
        h.update(compact(rec.strip(_TRIM)))
        h.update(b"\n")
    return h.hexdigest()


# --------------------------------------------------------------------------------------------- validation


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def path_problem(path: str) -> str | None:
    """None when ``path`` is a valid relative ``.jsonl`` path (reference 4.1), else the reason."""
    if not path:
        return "the path is empty"
    if path != path.strip():
        return "the path has leading or trailing whitespace"
    if _utf8_len(path) > MAX_PATH_BYTES:
        return f"the path is longer than {MAX_PATH_BYTES} bytes"
    if any(ch in path for ch in ("\x00", "\r", "\n", "\\")):
        return "the path contains NUL, CR, LF or a backslash"
    if path.startswith("/"):
        return "the path is absolute"
    if path == "." or posixpath.normpath(path) != path or path.endswith("/"):
        return "the path is not clean"
    if any(part in (".", "..") for part in path.split("/")):
        return "the path has a '.' or '..' component"
    if not path.endswith(".jsonl"):
        return "the path does not end in .jsonl"
    return None


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except (ValueError, AttributeError, TypeError):
        return False


def _is_hex64(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _bounded_text(value: str, name: str, limit: int) -> str | None:
    if not value.strip():
        return f"{name} is empty"
    if _utf8_len(value.strip()) > limit:
        return f"{name} is longer than {limit} bytes"
    return None


def header_problem(state: PersistedSessionState) -> str | None:
    """None when the header and shapes follow reference 4.2 and 4.3, else the first problem found."""
    for value, name, limit in (
        (state.agent_id, "the agent id", MAX_AGENT_ID_BYTES),
        (state.agent_session_id, "the agent session id", MAX_AGENT_SESSION_ID_BYTES),
        (state.cwd, "the working directory", MAX_CWD_BYTES),
    ):
        problem = _bounded_text(value, name, limit)
        if problem:
            return problem
    if not _is_uuid(state.through_run_id):
        return "the run id is not a UUID"
    if state.runtime_fencing_token <= 0:
        return "the runtime fencing token is not positive"
    if not 1 <= state.file_count <= MAX_FILES:
        return f"the file count {state.file_count} is outside 1..{MAX_FILES}"
    if not 1 <= state.record_count <= MAX_RECORDS:
        return f"the record count {state.record_count} is outside 1..{MAX_RECORDS}"
    if state.file_count > state.record_count:
        return "there are more files than records"
    if len(state.files) != state.file_count:
        return f"{len(state.files)} file shapes are given for {state.file_count} files"
    previous: bytes | None = None
    total = 0
    for f in state.files:
        problem = path_problem(f.path)
        if problem:
            return f"{f.path!r}: {problem}"
        key = f.path.encode("utf-8", "surrogatepass")
        if previous is not None and key <= previous:
            return "the file shapes are not in strictly increasing path order"
        previous = key
        if not 1 <= f.records <= MAX_RECORDS:
            return f"{f.path}: the record count {f.records} is outside 1..{MAX_RECORDS}"
        if not _is_hex64(f.digest):
            return f"{f.path}: the digest is not 64 lowercase hex characters"
        if not 0 <= f.prefix_records <= f.records:
            return f"{f.path}: the prefix proof covers more records than the file has"
        total += f.records
    if total != state.record_count:
        return f"the file shapes hold {total} records, the header says {state.record_count}"
    if state.transcript_path not in {f.path for f in state.files}:
        return "the transcript path is not one of the files"
    return None


def _record_text(rec: SessionStateRecord) -> str:
    """The record's JSON text; content that is not valid UTF-8 is a divergence (reference 4.4)."""
    content = rec.content
    if isinstance(content, bytes):
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SessionStateDivergent(
                f"Agent session state diverged from the canonical checkpoint: {rec.file_path} line "
                f"{rec.line_number} is not valid UTF-8."
            ) from exc
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SessionStateDivergent(
            f"Agent session state diverged from the canonical checkpoint: {rec.file_path} line "
            f"{rec.line_number} is not valid UTF-8."
        ) from exc
    return content


class _StreamValidator:
    """Reference 4.4: checks a record stream against the header, computing each file's digest as it goes.

    ``skip`` maps a path to the number of leading records already stored (they are hashed, not returned).
    A file whose shape carries a usable ``prefix_state`` may start at ``prefix_records + 1``.
    """

    def __init__(self, state: PersistedSessionState, skip: dict[str, int], error: type[StoreError]) -> None:
        self.state = state
        self.skip = skip
        self.error = error
        self.by_path = {f.path: f for f in state.files}
        self.order = [f.path for f in state.files]
        self.next_index = 0  # index in self.order of the next file that may start
        self.current: PersistedSessionStateFile | None = None
        self.from_start = False
        self.hasher: Any = None
        self.count = 0
        self.file_bytes = 0
        self.files_done = 0
        self.records_seen = 0
        self.restored_total = 0
        self.transcript_seen = False
        self.restored: dict[str, int] = {}

    def _fail(self, message: str) -> StoreError:
        return self.error(message)

    def _continuable(self, f: PersistedSessionStateFile) -> bool:
        return (
            f.prefix_state is not None
            and f.prefix_records > 0
            and f.prefix_records == self.skip.get(f.path, 0)
            and f.prefix_state.hexdigest() == f.prefix_digest
        )

    def _start(self, rec: SessionStateRecord) -> None:
        f = self.by_path.get(rec.file_path)
        if f is None:
            raise self._fail(f"The record stream names {rec.file_path!r}, which the header does not declare.")
        while self.next_index < len(self.order) and self.order[self.next_index] != f.path:
            skipped = self.by_path[self.order[self.next_index]]
            self._finish_unstreamed(skipped)
            self.next_index += 1
        if self.next_index >= len(self.order):
            raise self._fail(f"The record stream is not in path order at {rec.file_path!r}.")
        self.next_index += 1
        self.current = f
        self.file_bytes = 0
        if rec.line_number == 1:
            self.hasher = hashlib.sha256()
            self.count = 0
            self.from_start = True
        elif self._continuable(f) and rec.line_number == f.prefix_records + 1:
            self.hasher = f.prefix_state.copy()
            self.count = f.prefix_records
            self.from_start = False
            self.records_seen += f.prefix_records
        else:
            raise self._fail(f"{rec.file_path} starts at line {rec.line_number}, not line 1.")

    def _finish_unstreamed(self, f: PersistedSessionStateFile) -> None:
        """A file that sent no record: allowed only when its proven prefix is the whole file."""
        if self._continuable(f) and f.prefix_records == f.records and f.prefix_digest == f.digest:
            self.files_done += 1
            self.records_seen += f.records
            self._count_restored(f.restored_bytes)
            self.transcript_seen = self.transcript_seen or f.path == self.state.transcript_path
            if f.restored_bytes:
                self.restored[f.path] = f.restored_bytes
            return
        raise self._fail(f"The record stream has no records for {f.path}.")

    def _end_current(self) -> None:
        f = self.current
        if f is None:
            return
        digest = self.hasher.hexdigest()
        if self.count != f.records or digest != f.digest:
            raise self._fail(
                f"{f.path} ended with {self.count} records and digest {digest[:12]}…, its shape says "
                f"{f.records} records and {f.digest[:12]}…."
            )
        self.files_done += 1
        self.transcript_seen = self.transcript_seen or f.path == self.state.transcript_path
        if self.from_start:
            self.restored[f.path] = self.file_bytes
        elif f.restored_bytes:
            self.restored[f.path] = f.restored_bytes
            self._count_restored(f.restored_bytes - self.file_bytes)  # the proven prefix, not streamed
        self.current = None

    def _count_restored(self, size: int) -> None:
        self.restored_total += max(size, 0)
        if self.restored_total > MAX_RESTORED_BYTES:
            raise self._fail(f"The snapshot is larger than {MAX_RESTORED_BYTES} restored bytes.")

    def accept(self, rec: SessionStateRecord) -> tuple[str, bool]:
        """Validate one record; return its compacted text and whether it is new (to be stored)."""
        if self.current is None or rec.file_path != self.current.path:
            self._end_current()
            self._start(rec)
        elif rec.line_number != self.count + 1:
            raise self._fail(f"{rec.file_path}: line {rec.line_number} follows line {self.count}.")
        assert self.current is not None
        text = _record_text(rec).strip(" \t\r\n")
        raw = text.encode("utf-8")
        if not raw:
            raise self._fail(f"{rec.file_path} line {rec.line_number} is empty.")
        if len(raw) > MAX_LINE_BYTES:
            raise self._fail(f"{rec.file_path} line {rec.line_number} is longer than {MAX_LINE_BYTES} bytes.")
        problem = check_json(text)
        if problem:
            raise self._fail(f"{rec.file_path} line {rec.line_number} is not valid JSON ({problem}).")
        packed = compact(raw)
        self.hasher.update(packed)
        self.hasher.update(b"\n")
        self.count += 1
        self.records_seen += 1
        self.file_bytes += len(packed) + 1
        self.restored_total += len(packed) + 1
        if self.count > self.current.records or self.records_seen > self.state.record_count:
            raise self._fail(f"{rec.file_path} has more records than its shape declares.")
        if self.restored_total > MAX_RESTORED_BYTES:
            raise self._fail(f"The snapshot is larger than {MAX_RESTORED_BYTES} restored bytes.")
        text_out = packed.decode("utf-8") if packed is not raw else text
        return text_out, self.count > self.skip.get(rec.file_path, 0)

    def finish(self) -> None:
        self._end_current()
        while self.next_index < len(self.order):
            self._finish_unstreamed(self.by_path[self.order[self.next_index]])
            self.next_index += 1
        if self.files_done != self.state.file_count or self.records_seen != self.state.record_count:
            raise self._fail(
                f"The record stream held {self.files_done} files and {self.records_seen} records, the header "
                f"says {self.state.file_count} and {self.state.record_count}."
            )
        if not self.transcript_seen:
            raise self._fail("The record stream never reached the transcript file.")


# ------------------------------------------------------------------------------------------- database


def state_db_path(sd: SessionDir) -> Path:
    return sd.root / STATE_DIR / STATE_DB


def _now() -> str:
    text = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
    return text + "Z"


def _split_statements(script: str) -> list[str]:
    statements: list[str] = []
    buf: list[str] = []
    for line in script.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buf.append(line)
        text = "\n".join(buf)
        if sqlite3.complete_statement(text):
            statements.append(text.strip())
            buf = []
    return statements


def schema_sql() -> str:
    return resources.files("store").joinpath("sql", "agentstate_v1.sql").read_text(encoding="utf-8")


def _ensure_schema(db: Database) -> None:
    with db.read() as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = None
        if "agent_state_meta" in tables:
            row = conn.execute("SELECT value FROM agent_state_meta WHERE name = 'schema_version'").fetchone()
            version = int(row[0]) if row and str(row[0]).isdigit() else None
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaIncompatible(
            f"{db.path} has checkpoint layout version {version}; this Sessionscope reads up to {SCHEMA_VERSION}."
        )
    if version == SCHEMA_VERSION:
        return
    if db.mode.is_read:
        if "agent_state_meta" in tables:
            raise SchemaIncompatible(f"{db.path} has no readable checkpoint layout version.")
        return
    with db.write() as conn:
        for statement in _split_statements(schema_sql()):
            conn.execute(statement)


def open_state_db(sd: SessionDir, *, create: bool = False) -> Database | None:
    """Open the checkpoint file in the directory's mode; None when it does not exist and may not be created."""
    path = state_db_path(sd)
    if not path.exists():
        if sd.mode.is_read or not create:
            return None
    db = open_database(path, sd.mode, create=create and not sd.mode.is_read, foreign_keys=True)
    try:
        _ensure_schema(db)
    except BaseException:
        db.close()
        raise
    return db


@contextmanager
def state_db(sd: SessionDir, *, create: bool = False) -> Iterator[Database | None]:
    db = open_state_db(sd, create=create)
    try:
        yield db
    finally:
        if db is not None:
            db.close()


def require_state_writable(sd: SessionDir) -> None:
    """Checkpoints live in a file of ours, so only the open mode decides: a read mode refuses every write.

    (The ``sessions.db`` layout does not matter here: an older or newer mothx database that Sessionscope will
    not write still lets its user capture agent checkpoints beside it.)
    """
    if sd.mode.is_read:
        raise ReadOnlyStore(f"Refused: the session directory is open {sd.mode.value} (read-only).")


_require_write = require_state_writable


def _has_tables(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'agent_state_publications'"
    ).fetchone()
    return bool(row and row[0])


def _session_row(conn: sqlite3.Connection, agent_id: str, agent_session_id: str) -> sqlite3.Row | None:
    if not _has_tables(conn):
        return None
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(
            "SELECT session_id, agent_id, agent_session_id, source_root, runtime_fencing_token, "
            "runtime_config_epoch, updated_at FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
            (agent_id, agent_session_id),
        ).fetchone()
    finally:
        conn.row_factory = None


def _decode_head(run_id: str, reset: object) -> PublicationHead:
    if not _is_uuid(str(run_id)):
        raise SessionStateOutOfSync(
            "Agent session checkpoint is out of sync with canonical history: the head's run id is not a UUID."
        )
    return PublicationHead(run_id=str(run_id), kind=KIND_RESET if bool(reset) else KIND_CHECKPOINT)


def _head_row(conn: sqlite3.Connection, session_id: str) -> tuple[str, object] | None:
    row = conn.execute(
        "SELECT run_id, checkpoint_reset FROM agent_state_publications WHERE session_id = ?", (session_id,)
    ).fetchone()
    return (row[0], row[1]) if row else None


def _decode_state(row: tuple[Any, ...]) -> PersistedSessionState:
    """A header row → state; any inconsistency is :class:`SessionStateOutOfSync`."""
    (through_run_id, agent_id, agent_session_id, cwd, transcript_path, token, file_count, record_count, shapes) = row
    try:
        raw = json.loads(shapes)
        if not isinstance(raw, list):
            raise ValueError("file_shapes is not an array")
        files = tuple(
            PersistedSessionStateFile(path=str(s["path"]), records=int(s["records"]), digest=str(s["digest"]))
            for s in raw
        )
        state = PersistedSessionState(
            agent_id=str(agent_id),
            agent_session_id=str(agent_session_id),
            through_run_id=str(through_run_id),
            cwd=str(cwd),
            transcript_path=str(transcript_path),
            runtime_fencing_token=int(token),
            file_count=int(file_count),
            record_count=int(record_count),
            files=files,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SessionStateOutOfSync(
            f"Agent session checkpoint is out of sync with canonical history: its header cannot be read ({exc})."
        ) from exc
    problem = header_problem(state)
    if problem:
        raise SessionStateOutOfSync(
            f"Agent session checkpoint is out of sync with canonical history: {problem}."
        )
    return state


_STATE_COLUMNS = (
    "through_run_id, agent_id, agent_session_id, cwd, transcript_path, runtime_fencing_token, "
    "file_count, record_count, file_shapes"
)


def _version_row(conn: sqlite3.Connection, session_id: str, run_id: str) -> tuple[Any, ...] | None:
    return conn.execute(
        f"SELECT {_STATE_COLUMNS} FROM agent_state_versions WHERE session_id = ? AND through_run_id = ?",
        (session_id, run_id),
    ).fetchone()


def _canonical_shapes(conn: sqlite3.Connection, session_id: str) -> dict[str, FileShape]:
    """The shapes of the version a checkpoint head names, by path; empty for no head or a reset."""
    row = conn.execute(
        "SELECT v.file_shapes FROM agent_state_publications p JOIN agent_state_versions v "
        "ON v.session_id = p.session_id AND v.through_run_id = p.run_id "
        "WHERE p.session_id = ? AND p.checkpoint_reset = FALSE",
        (session_id,),
    ).fetchone()
    if row is None:
        return {}
    try:
        return {
            str(s["path"]): FileShape(str(s["path"]), int(s["records"]), str(s["digest"])) for s in json.loads(row[0])
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise SessionStateOutOfSync(
            "Agent session checkpoint is out of sync with canonical history: the canonical shapes cannot be read."
        ) from exc


@dataclass(frozen=True)
class CanonicalShape:
    """The advisory pre-capture read: the head version's shapes and the restored byte length of each file."""

    session_id: str
    run_id: str
    shapes: dict[str, FileShape]
    restored_bytes: dict[str, int]


def _canonical(db: Database, agent_id: str, agent_session_id: str) -> CanonicalShape | None:
    with db.read() as conn:
        sess = _session_row(conn, agent_id, agent_session_id)
        if sess is None:
            return None
        head = _head_row(conn, sess["session_id"])
        if head is None or bool(head[1]):
            return None
        shapes = _canonical_shapes(conn, sess["session_id"])
        if not shapes:
            return None
        marks = {
            str(p): int(n)
            for p, n in conn.execute(
                "SELECT file_path, restored_bytes FROM agent_state_file_marks WHERE session_id = ? AND through_run_id = ?",
                (sess["session_id"], head[0]),
            )
        }
        return CanonicalShape(sess["session_id"], str(head[0]), shapes, marks)


def _ensure_agent(conn: sqlite3.Connection, agent_id: str) -> None:
    conn.execute(
        "INSERT INTO agent_state_agents (agent_id, created_at) VALUES (?, ?) ON CONFLICT (agent_id) DO NOTHING",
        (agent_id, _now()),
    )


def _begin_run(db: Database, agent_id: str, agent_session_id: str, source_root: str | None = None) -> RunFence:
    for value, name, limit in (
        (agent_id, "the agent id", MAX_AGENT_ID_BYTES),
        (agent_session_id, "the agent session id", MAX_AGENT_SESSION_ID_BYTES),
    ):
        problem = _bounded_text(value, name, limit)
        if problem or value != value.strip():
            raise InvalidSessionState(f"Cannot start a capture: {problem or name + ' has surrounding spaces'}.")
    now = _now()
    with db.write() as conn:
        _ensure_agent(conn, agent_id)
        row = conn.execute(
            "SELECT session_id FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
            (agent_id, agent_session_id),
        ).fetchone()
        if row is None:
            session_id = secrets.token_hex(8)
            conn.execute(
                "INSERT INTO agent_state_sessions (session_id, agent_id, agent_session_id, source_root, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, agent_id, agent_session_id, source_root or "", now, now),
            )
        else:
            session_id = str(row[0])
        token = int(
            conn.execute(
                "UPDATE agent_state_counters SET value = value + 1 WHERE name = 'runtime_fencing_token' RETURNING value"
            ).fetchone()[0]
        )
        if source_root is None:
            conn.execute(
                "UPDATE agent_state_sessions SET runtime_fencing_token = ?, updated_at = ? WHERE session_id = ?",
                (token, now, session_id),
            )
        else:
            conn.execute(
                "UPDATE agent_state_sessions SET runtime_fencing_token = ?, source_root = ?, updated_at = ? "
                "WHERE session_id = ?",
                (token, source_root, now, session_id),
            )
        run_id = str(uuid.uuid4())
        conn.execute(
            "INSERT INTO agent_state_runs (session_id, run_id, fencing_token, status, created_at) "
            "VALUES (?, ?, ?, 'running', ?)",
            (session_id, run_id, token, now),
        )
    return RunFence(session_id, agent_id, agent_session_id, run_id, token)


def _divergent(detail: str) -> SessionStateDivergent:
    return SessionStateDivergent(f"Agent session state diverged from the canonical checkpoint: {detail}.")


def divergence(canonical: dict[str, FileShape], files: Iterable[PersistedSessionStateFile]) -> str | None:
    """The divergence gate (reference 7.2): None when every canonical file's prefix is proven, else why not."""
    by_path = {f.path: f for f in files}
    for path, c in sorted(canonical.items()):
        f = by_path.get(path)
        if f is None:
            return f"the canonical file {path} is missing"
        if f.records < c.records:
            return f"{path} has {f.records} records, fewer than the canonical {c.records}"
        if f.prefix_records != c.records or f.prefix_digest != c.digest:
            return f"{path} no longer starts with the canonical {c.records} records"
    return None


def _replace(
    db: Database, fence: RunFence, state: PersistedSessionState, records: Iterable[SessionStateRecord]
) -> ReplaceResult:
    if fence.fencing_token != state.runtime_fencing_token:
        raise StaleFence(
            f"Agent session state runtime fencing token {state.runtime_fencing_token} does not match active "
            f"token {fence.fencing_token}."
        )
    if state.through_run_id != fence.run_id or (state.agent_id, state.agent_session_id) != (
        fence.agent_id,
        fence.agent_session_id,
    ):
        raise StaleFence("The state being staged does not belong to the run that holds the fence.")
    problem = header_problem(state)
    if problem:
        raise InvalidSessionState(f"The checkpoint header is invalid: {problem}.")
    shapes_json = json.dumps([f.shape.to_json() for f in state.files], separators=(",", ":"))
    now = _now()
    with db.write() as conn:
        sess = conn.execute(
            "SELECT session_id FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
            (state.agent_id, state.agent_session_id),
        ).fetchone()
        if sess is None or sess[0] != fence.session_id:
            raise StaleFence("The run's session no longer exists.")
        session_id = fence.session_id
        current = conn.execute(
            "SELECT s.runtime_fencing_token, r.status FROM agent_state_sessions s LEFT JOIN agent_state_runs r "
            "ON r.session_id = s.session_id AND r.run_id = ? WHERE s.session_id = ?",
            (fence.run_id, session_id),
        ).fetchone()
        if current is None or int(current[0]) != fence.fencing_token or current[1] not in ACTIVE_RUN_STATUSES:
            # Checked before the divergence gate so a superseded capture is told so, not told "divergent".
            raise StaleFence(
                f"The run {fence.run_id} no longer holds the session's fence (token {fence.fencing_token}); "
                "another capture superseded it."
            )
        canonical = _canonical_shapes(conn, session_id)
        why = divergence(canonical, state.files)
        if why:
            raise _divergent(why)
        row = conn.execute(
            "INSERT INTO agent_state_versions (session_id, through_run_id, agent_id, agent_session_id, cwd, "
            "transcript_path, runtime_fencing_token, file_count, record_count, file_shapes, created_at, updated_at) "
            "SELECT r.session_id, r.run_id, ?, ?, ?, ?, r.fencing_token, ?, ?, ?, ?, ? "
            "FROM agent_state_runs r JOIN agent_state_sessions s ON s.session_id = r.session_id "
            "WHERE r.session_id = ? AND r.run_id = ? AND r.fencing_token = ? "
            "AND r.fencing_token = s.runtime_fencing_token AND r.status IN ('running', 'waiting_decision') "
            "ON CONFLICT (session_id, through_run_id) DO UPDATE SET agent_id = excluded.agent_id, "
            "agent_session_id = excluded.agent_session_id, cwd = excluded.cwd, "
            "transcript_path = excluded.transcript_path, runtime_fencing_token = excluded.runtime_fencing_token, "
            "file_count = excluded.file_count, record_count = excluded.record_count, "
            "file_shapes = excluded.file_shapes, updated_at = excluded.updated_at "
            "WHERE agent_state_versions.runtime_fencing_token <= excluded.runtime_fencing_token "
            "RETURNING through_run_id, runtime_fencing_token",
            (
                state.agent_id,
                state.agent_session_id,
                state.cwd.strip(),
                state.transcript_path,
                state.file_count,
                state.record_count,
                shapes_json,
                now,
                now,
                session_id,
                state.through_run_id,
                state.runtime_fencing_token,
            ),
        ).fetchone()
        if row is None or (str(row[0]), int(row[1])) != (state.through_run_id, state.runtime_fencing_token):
            raise StaleFence(
                f"The run {state.through_run_id} no longer holds the session's fence (token "
                f"{state.runtime_fencing_token}); another capture superseded it."
            )
        paths = [f.path for f in state.files]
        placeholders = ",".join("?" for _ in paths)
        cur = conn.execute(
            f"DELETE FROM agent_state_lines WHERE session_id = ? AND file_path NOT IN ({placeholders})",
            (session_id, *paths),
        )
        trimmed = max(cur.rowcount, 0)
        skip: dict[str, int] = {}
        for f in state.files:
            base = canonical[f.path].records if f.path in canonical else 0
            skip[f.path] = base
            cur = conn.execute(
                "DELETE FROM agent_state_lines WHERE session_id = ? AND file_path = ? AND line_number > ?",
                (session_id, f.path, base),
            )
            trimmed += max(cur.rowcount, 0)
        validator = _StreamValidator(state, skip, InvalidSessionState)
        batch: list[tuple[str, str, int, str, int]] = []
        batch_bytes = 0
        written = 0
        bytes_written = 0

        def flush() -> None:
            nonlocal written, bytes_written, batch, batch_bytes
            if not batch:
                return
            c = conn.executemany(
                "INSERT INTO agent_state_lines (session_id, file_path, line_number, content, content_bytes) "
                "VALUES (?, ?, ?, ?, ?)",
                batch,
            )
            if c.rowcount != len(batch):
                raise InvalidSessionState(f"A batch of {len(batch)} records wrote {c.rowcount} rows.")
            written += len(batch)
            bytes_written += batch_bytes
            batch = []
            batch_bytes = 0

        for rec in records:
            text, new = validator.accept(rec)
            if not new:
                continue
            size = len(text.encode("utf-8"))
            batch.append((session_id, rec.file_path, rec.line_number, text, size))
            batch_bytes += size + 1
            if len(batch) >= INSERT_BATCH_RECORDS or batch_bytes >= INSERT_BATCH_BYTES:
                flush()
        flush()
        validator.finish()
        expected = sum(f.records - skip[f.path] for f in state.files)
        if written != expected:
            raise InvalidSessionState(f"The capture inserted {written} records where {expected} were expected.")
        conn.execute(
            "DELETE FROM agent_state_file_marks WHERE session_id = ? AND through_run_id = ?",
            (session_id, state.through_run_id),
        )
        marks = [(session_id, state.through_run_id, p, n) for p, n in validator.restored.items() if n > 0]
        if marks:
            conn.executemany(
                "INSERT INTO agent_state_file_marks (session_id, through_run_id, file_path, restored_bytes) "
                "VALUES (?, ?, ?, ?)",
                marks,
            )
        conn.execute(
            "DELETE FROM agent_state_versions WHERE session_id = ? AND through_run_id <> ? AND through_run_id NOT IN "
            "(SELECT run_id FROM agent_state_publications WHERE session_id = ? AND checkpoint_reset = FALSE)",
            (session_id, state.through_run_id, session_id),
        )
    return ReplaceResult(records_written=written, bytes_written=bytes_written, files_trimmed=trimmed)


def _publish(db: Database, fence: RunFence, kind: str) -> PublicationHead:
    if kind not in (KIND_CHECKPOINT, KIND_RESET):
        raise InvalidSessionState(f"Unknown publication kind {kind!r}.")
    now = _now()
    with db.write() as conn:
        row = conn.execute(
            "INSERT INTO agent_state_publications (session_id, run_id, checkpoint_reset, updated_at) "
            "SELECT r.session_id, r.run_id, ?, ? FROM agent_state_runs r JOIN agent_state_sessions s "
            "ON s.session_id = r.session_id WHERE r.session_id = ? AND r.run_id = ? AND r.fencing_token = ? "
            "AND r.fencing_token = s.runtime_fencing_token AND r.status IN ('running', 'waiting_decision') "
            "ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id, "
            "checkpoint_reset = excluded.checkpoint_reset, updated_at = excluded.updated_at RETURNING run_id",
            (kind == KIND_RESET, now, fence.session_id, fence.run_id, fence.fencing_token),
        ).fetchone()
        if row is None:
            raise StaleFence(f"The run {fence.run_id} no longer holds the session's fence; nothing was published.")
        conn.execute(
            "UPDATE agent_state_runs SET status = 'completed', finished_at = ? WHERE session_id = ? AND run_id = ?",
            (now, fence.session_id, fence.run_id),
        )
        _prune_runs(conn, fence.session_id)
    return PublicationHead(run_id=fence.run_id, kind=kind)


def _prune_runs(conn: sqlite3.Connection, session_id: str) -> None:
    conn.execute(
        "DELETE FROM agent_state_runs WHERE session_id = ? AND status IN ('completed', 'failed') "
        "AND run_id NOT IN (SELECT through_run_id FROM agent_state_versions WHERE session_id = ?) "
        "AND run_id NOT IN (SELECT run_id FROM agent_state_publications WHERE session_id = ?)",
        (session_id, session_id, session_id),
    )


def _fail_run(db: Database, fence: RunFence) -> None:
    """Mark a run that staged nothing usable as failed (it keeps no lock; later runs supersede it anyway)."""
    with db.write() as conn:
        conn.execute(
            "UPDATE agent_state_runs SET status = 'failed', finished_at = ? WHERE session_id = ? AND run_id = ? "
            "AND status IN ('running', 'waiting_decision')",
            (_now(), fence.session_id, fence.run_id),
        )
        _prune_runs(conn, fence.session_id)


class _PagedReader:
    """Load's record reader: keyset pages bounded by the head version's shapes, validated as they stream."""

    def __init__(self, conn: sqlite3.Connection, session_id: str, state: PersistedSessionState) -> None:
        self.conn = conn
        self.session_id = session_id
        self.state = state
        self.validator = _StreamValidator(state, {}, SessionStateOutOfSync)
        self.file_index = 0
        self.last_line = 0
        self.page: list[tuple[int, str]] = []
        self.pos = 0
        self.done = False

    def _fetch(self) -> None:
        while self.file_index < len(self.state.files):
            f = self.state.files[self.file_index]
            if self.last_line >= f.records:
                self.file_index += 1
                self.last_line = 0
                continue
            cur = self.conn.execute(
                "SELECT line_number, content FROM agent_state_lines WHERE session_id = ? AND file_path = ? "
                "AND line_number > ? AND line_number <= ? ORDER BY line_number LIMIT ?",
                (self.session_id, f.path, self.last_line, f.records, LOAD_PAGE_ROWS),
            )
            page: list[tuple[int, str]] = []
            size = 0
            for line_number, content in cur:
                page.append((int(line_number), str(content)))
                size += len(content)
                if size >= LOAD_PAGE_BYTES:
                    break
            cur.close()
            if not page:
                raise SessionStateOutOfSync(
                    f"Agent session checkpoint is out of sync with canonical history: {f.path} has "
                    f"{self.last_line} stored records, its shape says {f.records}."
                )
            self.page = page
            self.pos = 0
            return

    def __call__(self) -> SessionStateRecord | None:
        if self.done:
            return None
        if self.pos >= len(self.page):
            self.page = []
            self._fetch()
            if not self.page:
                self.validator.finish()
                self.done = True
                return None
        line_number, content = self.page[self.pos]
        self.pos += 1
        path = self.state.files[self.file_index].path
        if line_number != self.last_line + 1:
            raise SessionStateOutOfSync(
                f"Agent session checkpoint is out of sync with canonical history: {path} skips from line "
                f"{self.last_line} to {line_number}."
            )
        self.last_line = line_number
        rec = SessionStateRecord(path, line_number, content)
        try:
            self.validator.accept(rec)
        except SessionStateDivergent as exc:
            raise SessionStateOutOfSync(
                f"Agent session checkpoint is out of sync with canonical history: {exc}"
            ) from exc
        return rec


def _load(db: Database, agent_id: str, agent_session_id: str, consume: RecordConsumer) -> bool:
    with db.read() as conn:
        sess = _session_row(conn, agent_id, agent_session_id)
        if sess is None:
            return False
        head_row = _head_row(conn, sess["session_id"])
        if head_row is None:
            return False
        head = _decode_head(*head_row)
        if head.kind == KIND_RESET:
            return False
        row = _version_row(conn, sess["session_id"], head.run_id)
        if row is None:
            raise SessionStateOutOfSync(
                f"Agent session checkpoint is out of sync with canonical history: the latest successful run "
                f"{head.run_id} has no staged snapshot."
            )
        state = _decode_state(row)
        if state.through_run_id != head.run_id:
            raise SessionStateOutOfSync("Agent session checkpoint is out of sync: the version names another run.")
        reader = _PagedReader(conn, sess["session_id"], state)
        consume(state, reader)
        if not reader.done:
            raise StoreError("The checkpoint consumer returned before reading through the end of the records.")
    return True


# ------------------------------------------------------------------------------------ public, by SessionDir


def begin_run(sd: SessionDir, agent_id: str, agent_session_id: str, *, source_root: str | None = None) -> RunFence:
    """Start a run for an agent session: draw a new fencing token (superseding any older run) and return it."""
    _require_write(sd)
    db = open_state_db(sd, create=True)
    assert db is not None
    try:
        return _begin_run(db, agent_id, agent_session_id, source_root)
    finally:
        db.close()


def replace(
    sd: SessionDir, fence: RunFence, state: PersistedSessionState, records: Iterable[SessionStateRecord]
) -> ReplaceResult:
    """Stage ``state`` under its run in one fenced transaction, writing only the tails beyond the canonical
    version (reference section 7). Raises :class:`SessionStateDivergent` (nothing written), :class:`StaleFence`
    or :class:`InvalidSessionState` (rolled back)."""
    _require_write(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        return _replace(db, fence, state, records)


def publish(sd: SessionDir, fence: RunFence, kind: str = KIND_CHECKPOINT) -> PublicationHead:
    """Make ``fence``'s run the session's publication head (a ``checkpoint`` or a ``reset``)."""
    _require_write(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        return _publish(db, fence, kind)


def publish_reset(sd: SessionDir, agent_id: str, agent_session_id: str) -> PublicationHead:
    """Publish an explicit reset head: nothing is resumable, and the next capture may rewrite every file."""
    _require_write(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        fence = _begin_run(db, agent_id, agent_session_id)
        return _publish(db, fence, KIND_RESET)


def fail_run(sd: SessionDir, fence: RunFence) -> None:
    _require_write(sd)
    with state_db(sd) as db:
        if db is not None:
            _fail_run(db, fence)


def head(sd: SessionDir, agent_id: str, agent_session_id: str) -> PublicationHead | None:
    """The publication head, or None when the session has none (absence is not a sentinel)."""
    with state_db(sd) as db:
        if db is None:
            return None
        with db.read() as conn:
            sess = _session_row(conn, agent_id, agent_session_id)
            if sess is None:
                return None
            row = _head_row(conn, sess["session_id"])
    return _decode_head(*row) if row else None


def canonical_shape(sd: SessionDir, agent_id: str, agent_session_id: str) -> dict[str, FileShape] | None:
    """The head version's shapes by path (advisory, before a capture); None for no head or a reset."""
    with state_db(sd) as db:
        if db is None:
            return None
        canon = _canonical(db, agent_id, agent_session_id)
    return dict(canon.shapes) if canon else None


def load(sd: SessionDir, agent_id: str, agent_session_id: str, consume: RecordConsumer) -> bool:
    """Stream the published checkpoint to ``consume(state, read)``; ``read()`` returns None at the end.

    False when there is nothing to load (no checkpoint file, no head, or a reset head). Raises
    :class:`SessionStateOutOfSync` when the head names a run with no staged version, or when a stored header,
    count or digest does not verify. ``consume`` must read through the end before it returns.
    """
    with state_db(sd) as db:
        if db is None:
            return False
        return _load(db, agent_id, agent_session_id, consume)


def load_checkpoint(sd: SessionDir, agent_id: str, agent_session_id: str) -> LoadedCheckpoint | None:
    """The published checkpoint with every record, verified (convenience over :func:`load`)."""
    got: list[LoadedCheckpoint] = []

    def consume(state: PersistedSessionState, read: RecordReader) -> None:
        records: list[SessionStateRecord] = []
        while (rec := read()) is not None:
            records.append(rec)
        got.append(LoadedCheckpoint(state, tuple(records)))

    return got[0] if load(sd, agent_id, agent_session_id, consume) else None


def list_checkpoints(sd: SessionDir, agent_id: str | None = None) -> list[CheckpointInfo]:
    """Every agent session with its head and head version, ordered by agent and agent session id."""
    out: list[CheckpointInfo] = []
    with state_db(sd) as db:
        if db is None:
            return out
        with db.read() as conn:
            if not _has_tables(conn):
                return out
            sql = (
                "SELECT s.session_id, s.agent_id, s.agent_session_id, s.source_root, s.updated_at, "
                "p.run_id, p.checkpoint_reset, "
                "(SELECT count(*) FROM agent_state_versions v WHERE v.session_id = s.session_id) "
                "FROM agent_state_sessions s LEFT JOIN agent_state_publications p ON p.session_id = s.session_id"
            )
            params: tuple[str, ...] = ()
            if agent_id is not None:
                sql += " WHERE s.agent_id = ?"
                params = (agent_id,)
            sql += " ORDER BY s.agent_id, s.agent_session_id"
            for sid, agent, asid, root, updated, run_id, reset, versions in conn.execute(sql, params).fetchall():
                head_obj: PublicationHead | None = None
                state: PersistedSessionState | None = None
                problem = ""
                if run_id is not None:
                    try:
                        head_obj = _decode_head(run_id, reset)
                        if head_obj.kind == KIND_CHECKPOINT:
                            row = _version_row(conn, sid, head_obj.run_id)
                            if row is None:
                                problem = f"the latest successful run {run_id} has no staged snapshot"
                            else:
                                state = _decode_state(row)
                    except SessionStateOutOfSync as exc:
                        problem = str(exc)
                out.append(
                    CheckpointInfo(
                        session_id=str(sid),
                        agent_id=str(agent),
                        agent_session_id=str(asid),
                        source_root=str(root),
                        head=head_obj,
                        state=state,
                        head_problem=problem,
                        versions=int(versions),
                        updated_at=str(updated),
                    )
                )
    return out


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


def preview_reset(sd: SessionDir, agent_id: str, agent_session_id: str) -> ResetPreview:
    """Describe a reset without writing anything (``allowed`` is False in a read mode or for a reset head)."""
    info = checkpoint_info(sd, agent_id, agent_session_id)
    head_obj = info.head if info else None
    files = info.state.file_count if info and info.state else 0
    records = info.state.record_count if info and info.state else 0
    if sd.mode.is_read:
        return ResetPreview(agent_id, agent_session_id, head_obj, files, records, False,
                            f"The session directory is open {sd.mode.value}: nothing can be reset.")
    if head_obj is not None and head_obj.kind == KIND_RESET:
        return ResetPreview(agent_id, agent_session_id, head_obj, 0, 0, False, "The head is already a reset.")
    if files:
        text = (f"The head becomes a reset: the checkpoint of {files} files and {records} records stops being "
                "loadable, and the next capture stores the files on disk afresh.")
    else:
        text = "The head becomes a reset; the next capture stores the files on disk afresh."
    return ResetPreview(agent_id, agent_session_id, head_obj, files, records, True, text)


def checkpoint_info(sd: SessionDir, agent_id: str, agent_session_id: str) -> CheckpointInfo | None:
    for info in list_checkpoints(sd, agent_id):
        if info.agent_session_id == agent_session_id:
            return info
    return None


# ------------------------------------------------------------------------------ runtime configuration guard


def runtime_config_epoch(sd: SessionDir, agent_id: str, agent_session_id: str | None = None) -> RuntimeConfigEpoch:
    """The agent's (and optionally the agent session's) runtime configuration generation; 0 when unknown."""
    with state_db(sd) as db:
        if db is None:
            return RuntimeConfigEpoch(0, 0)
        with db.read() as conn:
            if not _has_tables(conn):
                return RuntimeConfigEpoch(0, 0)
            row = conn.execute(
                "SELECT runtime_config_epoch FROM agent_state_agents WHERE agent_id = ?", (agent_id,)
            ).fetchone()
            session = 0
            if agent_session_id is not None:
                srow = conn.execute(
                    "SELECT runtime_config_epoch FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
                    (agent_id, agent_session_id),
                ).fetchone()
                session = int(srow[0]) if srow else 0
    return RuntimeConfigEpoch(int(row[0]) if row else 0, session)


def advance_runtime_config_epoch(sd: SessionDir, agent_id: str) -> int:
    """Start a new configuration generation for an agent (processes created earlier become stale)."""
    _require_write(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        with db.write() as conn:
            _ensure_agent(conn, agent_id)
            return int(
                conn.execute(
                    "UPDATE agent_state_agents SET runtime_config_epoch = runtime_config_epoch + 1 WHERE agent_id = ? "
                    "RETURNING runtime_config_epoch",
                    (agent_id,),
                ).fetchone()[0]
            )


def set_runtime_reset_lease(sd: SessionDir, agent_id: str, token: str | None, expires_at: str | None) -> None:
    """Hold (token and expiry, RFC 3339) or clear (both None) an agent-wide reset lease."""
    if (token is None) != (expires_at is None):
        raise InvalidSessionState("A reset lease needs both a token and an expiry, or neither.")
    _require_write(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        with db.write() as conn:
            _ensure_agent(conn, agent_id)
            conn.execute(
                "UPDATE agent_state_agents SET runtime_reset_token = ?, runtime_reset_expires_at = ? WHERE agent_id = ?",
                (token, expires_at, agent_id),
            )


def guard_runtime_sync(sd: SessionDir, agent_id: str, expected_epoch: int, action: Callable[[], T]) -> T:
    """Run ``action`` while holding the agent's configuration lock, if its epoch is still ``expected_epoch``.

    No agent row → :class:`RuntimeConfigStale`; a live reset lease → :class:`RuntimeConfigResetInProgress`;
    another epoch → :class:`RuntimeConfigStale`.
    """
    _require_write(sd)
    with state_db(sd, create=True) as db:
        assert db is not None
        with db.write() as conn:
            row = conn.execute(
                "SELECT runtime_config_epoch, runtime_reset_token, runtime_reset_expires_at FROM agent_state_agents "
                "WHERE agent_id = ?",
                (agent_id,),
            ).fetchone()
            if row is None:
                raise RuntimeConfigStale(f"The runtime configuration generation of {agent_id} is stale (no agent row).")
            epoch, token, expires = int(row[0]), row[1], row[2]
            if token is not None and str(expires) > _now():
                raise RuntimeConfigResetInProgress(f"An agent runtime reset of {agent_id} is in progress.")
            if epoch != expected_epoch:
                raise RuntimeConfigStale(
                    f"The runtime configuration generation of {agent_id} is stale: expected epoch "
                    f"{expected_epoch}, found {epoch}."
                )
            return action()


def delete_checkpoints(sd: SessionDir, agent_id: str, agent_session_id: str) -> bool:
    """Forget an agent session entirely (versions, lines, head, runs). True when something was deleted."""
    _require_write(sd)
    with state_db(sd) as db:
        if db is None:
            return False
        with db.write() as conn:
            row = conn.execute(
                "SELECT session_id FROM agent_state_sessions WHERE agent_id = ? AND agent_session_id = ?",
                (agent_id, agent_session_id),
            ).fetchone()
            if row is None:
                return False
            for table in (
                "agent_state_file_marks",
                "agent_state_publications",
                "agent_state_versions",
                "agent_state_lines",
                "agent_state_runs",
                "agent_state_sessions",
            ):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (row[0],))
    return True

