"""The bounded session event log (reference ``sessionlog.md``) and cursors for following a live session.

A log is identified by a :class:`Ref` (workspace id, session id). Appending an event assigns the next cursor
``(generation, sequence)``; the log keeps the last ``max_events`` events (default 512) as a contiguous suffix,
plus a projection of ``chat_stream`` events into messages (one per message id, in the order they started).
:meth:`EventStore.replay` answers ``complete``, ``partial`` or ``unavailable`` exactly as the reference's table;
:meth:`EventStore.reset` starts a new generation that every older cursor replays as ``unavailable``.

Three backends share one state and one JSON document layout (reference 8.3): :class:`MemoryEventLog`,
:class:`FileEventLog` (one file per session, written atomically, validated on load) and :class:`CASEventLog`
(a compare-and-swap blob store; :class:`MemoryBlobStore` is the in-process one).

Choices where the reference is silent: event JSON fields are ``protocol_version``, ``schema_revision``,
``workspace_id``, ``session_id``, ``cursor`` (``{"generation", "sequence"}``), ``kind``, ``payload`` (the JSON
value) and ``extra``; the largest sequence is 2**53 - 1; a ``chat_stream`` payload is an object with a
non-empty ``message_id`` (or ``id``) whose ``role`` sets the role, ``text`` replaces the text, ``delta`` appends
to it and ``status`` (or ``done: true``) sets the status; path segments and CAS key segments are percent-encoded
(bytes outside ``A-Z a-z 0-9 _ -``), with ``~`` + SHA-256 for segments longer than 180 characters.

Following: :func:`follow_entries` gives a screen new mothx entries by ``seq`` after a cursor, answering with a
:class:`~store.agents.cursors.FollowUpdate` (cursors, replay statuses and updates live in
:mod:`store.agents.cursors`). Following a Claude Code or Codex file is :mod:`store.agents.native_follow`;
``NativeFollower`` and ``native_follower`` stay importable from here for older callers. The log's state, its
rules and its stored document are :mod:`store.agents.sessionlog_state`; this module holds the backends.
"""

from __future__ import annotations

import os
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from store.agents.cursors import (
    ACTION_APPEND,
    ACTION_NONE,
    ACTION_RELOAD,
    ACTION_RESET,
    DEFAULT_MAX_EVENTS,
    REPLAY_COMPLETE,
    REPLAY_PARTIAL,
    REPLAY_UNAVAILABLE,
    Cursor,
    FollowUpdate,
    follow_update,
    new_generation,
)

# ------------------------------------------------------------------------------------------------- backends
from store.agents.sessionlog_state import (
    CAS_PREFIX,
    DEFAULT_CAS_RETRIES,
    DEFAULT_GENERATION,
    KIND_CHAT_STREAM,
    MAX_SEQUENCE,
    PROTOCOL_VERSION,
    SCHEMA_REVISION,
    SCHEMA_VERSION,
    CASRetryLimit,
    ChatMessage,
    CorruptEventLog,
    InvalidEventPayload,
    InvalidSessionRef,
    LogState,
    Ref,
    ReplayResult,
    SequenceExhausted,
    SessionCapture,
    SessionEvent,
    append_event,
    compact_json,
    decode_document,
    encode_document,
    path_segment,
    replay_from,
)
from store.errors import StoreError
from store.paths import fsync_dir
from store.safetext import one_line


class EventStore(ABC):
    """The append / replay surface shared by every backend."""

    max_events: int

    @abstractmethod
    def append(self, ref: Ref, kind: str, payload: object, extra: dict[str, Any] | None = None) -> SessionEvent: ...

    @abstractmethod
    def cursor(self, ref: Ref) -> Cursor: ...

    @abstractmethod
    def replay(self, ref: Ref, after: Cursor) -> ReplayResult: ...

    @abstractmethod
    def projection(self, ref: Ref) -> tuple[tuple[ChatMessage, ...], Cursor]: ...

    @abstractmethod
    def capture(self, ref: Ref, after: Cursor | None = None) -> SessionCapture: ...

    @abstractmethod
    def reset(self, ref: Ref) -> Cursor: ...


def _next_generation(make: Callable[[], str], current: str) -> str:
    for _ in range(64):
        gen = make()
        if gen and gen != current:
            return gen
    raise StoreError("The generation source keeps returning the current generation.")


class _LockedLog(EventStore):
    """Shared logic: every operation is a read-modify-commit of one session's state under a lock."""

    def __init__(self, max_events: int, new_gen: Callable[[], str] | None) -> None:
        if max_events <= 0:
            raise ValueError("max_events must be positive")
        self.max_events = max_events
        self._new_gen = new_gen or DEFAULT_GENERATION
        self._lock = threading.RLock()

    # Backends implement: _get(ref) -> LogState (creating + committing the initial generation), _commit(ref, old, new)
    def _get(self, ref: Ref) -> LogState:
        raise NotImplementedError

    def _commit(self, ref: Ref, old: LogState, new: LogState) -> bool:
        raise NotImplementedError

    def _mutate(self, ref: Ref, change: Callable[[LogState], tuple[LogState, Any]]) -> Any:
        ref.validate()
        with self._lock:
            old = self._get(ref)
            new, out = change(old)
            self._commit(ref, old, new)
            return out

    def append(self, ref: Ref, kind: str, payload: object, extra: dict[str, Any] | None = None) -> SessionEvent:
        return self._mutate(ref, lambda s: append_event(s, ref, kind, payload, self.max_events, extra))

    def cursor(self, ref: Ref) -> Cursor:
        ref.validate()
        with self._lock:
            return self._get(ref).cursor

    def replay(self, ref: Ref, after: Cursor) -> ReplayResult:
        ref.validate()
        with self._lock:
            return replay_from(self._get(ref), after)

    def projection(self, ref: Ref) -> tuple[tuple[ChatMessage, ...], Cursor]:
        ref.validate()
        with self._lock:
            state = self._get(ref)
            return tuple(state.messages.values()), state.cursor

    def capture(self, ref: Ref, after: Cursor | None = None) -> SessionCapture:
        ref.validate()
        with self._lock:
            state = self._get(ref)
            return SessionCapture(state.cursor, tuple(state.messages.values()),
                                  replay_from(state, after) if after is not None else None)

    def reset(self, ref: Ref) -> Cursor:
        def change(s: LogState) -> tuple[LogState, Cursor]:
            new = LogState(_next_generation(self._new_gen, s.generation))
            return new, new.cursor

        return self._mutate(ref, change)


class MemoryEventLog(_LockedLog):
    """The bounded in-process log."""

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS, new_generation: Callable[[], str] | None = None) -> None:
        super().__init__(max_events, new_generation)
        self._states: dict[Ref, LogState] = {}

    def _get(self, ref: Ref) -> LogState:
        state = self._states.get(ref)
        if state is None:
            state = self._states[ref] = LogState(self._new_gen())
        return state

    def _commit(self, ref: Ref, old: LogState, new: LogState) -> bool:
        self._states[ref] = new
        return True


class FileEventLog(_LockedLog):
    """One JSON document per session under ``<state_dir>/sessionlog/workspaces/<ws>/<session>.json``.

    A change is written to a temporary file (mode 0600) and renamed over the old one before it is visible; if
    writing fails, the in-memory state stays at the last persisted one. One writing process per directory.
    """

    def __init__(self, state_dir: str | os.PathLike[str], max_events: int = DEFAULT_MAX_EVENTS,
                 new_generation: Callable[[], str] | None = None) -> None:
        super().__init__(max_events, new_generation)
        self.state_dir = Path(state_dir)
        self._cache: dict[Ref, LogState] = {}

    def path_for(self, ref: Ref) -> Path:
        ref.validate()
        return (self.state_dir / "sessionlog" / "workspaces" / path_segment(ref.workspace_id)
                / f"{path_segment(ref.session_id)}.json")

    def _get(self, ref: Ref) -> LogState:
        state = self._cache.get(ref)
        if state is not None:
            return state
        path = self.path_for(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            state = LogState(self._new_gen())
            self._write(ref, state)
        except OSError as exc:
            raise StoreError(f"The session log {one_line(str(path))} cannot be read ({one_line(exc.strerror or exc)}).") from exc
        else:
            state = decode_document(data, ref, self.max_events, str(path))
        self._cache[ref] = state
        return state

    def _write(self, ref: Ref, state: LogState) -> None:
        path = self.path_for(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = encode_document(ref, state)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        fsync_dir(path.parent)

    def _commit(self, ref: Ref, old: LogState, new: LogState) -> bool:
        try:
            self._write(ref, new)
        except OSError as exc:
            self._cache[ref] = old
            raise StoreError(f"The session log could not be written ({one_line(exc.strerror or exc)}).") from exc
        self._cache[ref] = new
        return True


class BlobStore(Protocol):
    """A compare-and-swap blob store."""

    def get(self, key: str) -> bytes | None: ...

    def create(self, key: str, value: bytes) -> bool: ...  # False when the key exists

    def compare_and_swap(self, key: str, expected: bytes, value: bytes) -> bool: ...  # False when it changed


class MemoryBlobStore:
    """An in-process :class:`BlobStore`; ``before_write`` lets a test interleave a competing writer."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.before_write: Callable[[str], None] | None = None
        self.writes = 0
        self.attempts = 0

    def get(self, key: str) -> bytes | None:
        with self.lock:
            return self.blobs.get(key)

    def create(self, key: str, value: bytes) -> bool:
        self.attempts += 1
        if self.before_write:
            self.before_write(key)
        with self.lock:
            if key in self.blobs:
                return False
            self.blobs[key] = value
            self.writes += 1
            return True

    def compare_and_swap(self, key: str, expected: bytes, value: bytes) -> bool:
        self.attempts += 1
        if self.before_write:
            self.before_write(key)
        with self.lock:
            if self.blobs.get(key) != expected:
                return False
            self.blobs[key] = value
            self.writes += 1
            return True


class CASEventLog(EventStore):
    """One complete bounded state per (workspace, session) key in a blob store, updated by compare-and-swap.

    The first write creates the key; every later write swaps the exact old bytes. A lost race re-reads and
    retries, at most ``max_retries`` times, then fails with :class:`CASRetryLimit`.
    """

    def __init__(self, blobs: BlobStore, prefix: str = "", max_events: int = DEFAULT_MAX_EVENTS,
                 max_retries: int = DEFAULT_CAS_RETRIES, new_generation: Callable[[], str] | None = None) -> None:
        if max_events <= 0 or max_retries <= 0:
            raise ValueError("max_events and max_retries must be positive")
        self.blobs = blobs
        self.prefix = (prefix or CAS_PREFIX).rstrip("/")
        self.max_events = max_events
        self.max_retries = max_retries
        self._new_gen = new_generation or DEFAULT_GENERATION

    def key_for(self, ref: Ref) -> str:
        ref.validate()
        return f"{self.prefix}/workspaces/{path_segment(ref.workspace_id)}/sessions/{path_segment(ref.session_id)}"

    def _run(self, ref: Ref, change: Callable[[LogState], tuple[LogState, Any]] | None) -> tuple[LogState, Any]:
        key = self.key_for(ref)
        for _ in range(self.max_retries):
            old_bytes = self.blobs.get(key)
            if old_bytes is None:
                state = LogState(self._new_gen())
                new, out = change(state) if change else (state, None)
                if self.blobs.create(key, encode_document(ref, new)):
                    return new, out
                continue
            state = decode_document(old_bytes, ref, self.max_events, key)
            if change is None:
                return state, None
            new, out = change(state)
            if self.blobs.compare_and_swap(key, old_bytes, encode_document(ref, new)):
                return new, out
        raise CASRetryLimit(f"The session log {one_line(key)} kept changing: {self.max_retries} compare-and-swap attempts failed.")

    def append(self, ref: Ref, kind: str, payload: object, extra: dict[str, Any] | None = None) -> SessionEvent:
        return self._run(ref, lambda s: append_event(s, ref, kind, payload, self.max_events, extra))[1]

    def cursor(self, ref: Ref) -> Cursor:
        return self._run(ref, None)[0].cursor

    def replay(self, ref: Ref, after: Cursor) -> ReplayResult:
        return replay_from(self._run(ref, None)[0], after)

    def projection(self, ref: Ref) -> tuple[tuple[ChatMessage, ...], Cursor]:
        state = self._run(ref, None)[0]
        return tuple(state.messages.values()), state.cursor

    def capture(self, ref: Ref, after: Cursor | None = None) -> SessionCapture:
        state = self._run(ref, None)[0]
        return SessionCapture(state.cursor, tuple(state.messages.values()),
                              replay_from(state, after) if after is not None else None)

    def reset(self, ref: Ref) -> Cursor:
        def change(s: LogState) -> tuple[LogState, Cursor]:
            new = LogState(_next_generation(self._new_gen, s.generation))
            return new, new.cursor

        return self._run(ref, change)[1]


# ------------------------------------------------------------------------------------------------ following

def follow_replay(store: EventStore, ref: Ref, after: Cursor | None) -> FollowUpdate:
    """Follow a session log: the replay after ``after`` as a :class:`FollowUpdate` (None = start)."""
    if after is None:
        cur = store.cursor(ref)
        return follow_update(REPLAY_UNAVAILABLE, (), cur)
    result = store.replay(ref, after)
    return follow_update(result.status, result.events, result.through)


def follow_entries(sd: Any, session_id: str, after: Cursor | None, *, limit: int = DEFAULT_MAX_EVENTS) -> FollowUpdate:
    """New ``entries`` rows of a mothx session after ``after`` (rows as ``store.mothx.entries.EntryRow``).

    The generation is the session id with its creation time; a session that is gone, a cursor of another
    generation, a cursor past the newest row, or a cursor whose row has disappeared (history rewritten) is
    ``unavailable`` → reset. More than ``limit`` new rows is ``partial`` → reload (only the newest ``limit``
    rows are returned). ``after=None`` asks for the starting cursor (reset, no rows).
    """
    from store.mothx.entries import make_row  # the entries module is only needed here

    with sd.db.read() as conn:
        srow = conn.execute("SELECT timestamp FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if srow is None:
            return FollowUpdate(REPLAY_UNAVAILABLE, ACTION_RESET, (), Cursor("", 0))
        generation = f"{session_id}@{srow[0]}"
        top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM entries WHERE session_id = ?", (session_id,)).fetchone()
        current = Cursor(generation, int(top[0]))
        if after is None or after.generation != generation or after.sequence > current.sequence:
            return follow_update(REPLAY_UNAVAILABLE, (), current)
        if after.sequence > 0 and conn.execute(
            "SELECT 1 FROM entries WHERE session_id = ? AND seq = ?", (session_id, after.sequence)
        ).fetchone() is None:
            return follow_update(REPLAY_UNAVAILABLE, (), current)
        if after.sequence == current.sequence:
            return follow_update(REPLAY_COMPLETE, (), current)
        count = conn.execute(
            "SELECT count(*) FROM entries WHERE session_id = ? AND seq > ?", (session_id, after.sequence)
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT seq, id, type, parent_id, timestamp, data FROM entries WHERE session_id = ? AND seq > ? "
            "ORDER BY seq DESC LIMIT ?",
            (session_id, after.sequence, limit),
        ).fetchall()
    events = tuple(make_row(*r) for r in reversed(rows))
    return follow_update(REPLAY_PARTIAL if count > limit else REPLAY_COMPLETE, events, current)


__all__ = [
    "ACTION_APPEND",
    "ACTION_NONE",
    "ACTION_RELOAD",
    "ACTION_RESET",
    "BlobStore",
    "CASEventLog",
    "CASRetryLimit",
    "CAS_PREFIX",
    "ChatMessage",
    "CorruptEventLog",
    "Cursor",
    "DEFAULT_CAS_RETRIES",
    "DEFAULT_GENERATION",
    "DEFAULT_MAX_EVENTS",
    "EventStore",
    "FileEventLog",
    "FollowUpdate",
    "InvalidEventPayload",
    "InvalidSessionRef",
    "KIND_CHAT_STREAM",
    "LogState",
    "MAX_SEQUENCE",
    "MemoryBlobStore",
    "MemoryEventLog",
    "NativeFollower",
    "NativeRecord",
    "PROTOCOL_VERSION",
    "REPLAY_COMPLETE",
    "REPLAY_PARTIAL",
    "REPLAY_UNAVAILABLE",
    "Ref",
    "ReplayResult",
    "SCHEMA_REVISION",
    "SCHEMA_VERSION",
    "SequenceExhausted",
    "SessionCapture",
    "SessionEvent",
    "append_event",
    "compact_json",
    "decode_document",
    "encode_document",
    "follow_entries",
    "follow_replay",
    "follow_update",
    "native_follower",
    "new_generation",
    "path_segment",
    "replay_from",
]

from store.agents.native_follow import NativeFollower, NativeRecord, native_follower  # noqa: E402 - moved there
