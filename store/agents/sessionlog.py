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
``NativeFollower`` and ``native_follower`` stay importable from here for older callers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
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
from store.errors import EventStoreCorrupt, StoreError
from store.safetext import one_line

DEFAULT_CAS_RETRIES = 32
MAX_SEQUENCE = 2**53 - 1
SCHEMA_VERSION = 1
PROTOCOL_VERSION = 1
SCHEMA_REVISION = 1
CAS_PREFIX = "agent-harness/sessionlog/v1"
KIND_CHAT_STREAM = "chat_stream"



class InvalidSessionRef(StoreError):
    """A session log reference lacks its workspace id or session id."""


class SequenceExhausted(StoreError):
    """The next sequence would pass the JSON-safe maximum."""


class CASRetryLimit(StoreError):
    """Every compare-and-swap attempt lost its race."""


class CorruptEventLog(EventStoreCorrupt):
    """A stored session log document fails validation."""


class InvalidEventPayload(StoreError):
    """An event payload is not valid JSON (or a chat_stream payload names no message)."""


# ---------------------------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class Ref:
    workspace_id: str
    session_id: str

    def validate(self) -> Ref:
        if not isinstance(self.workspace_id, str) or not isinstance(self.session_id, str) or not (
            self.workspace_id and self.session_id
        ):
            raise InvalidSessionRef("A session log reference needs a workspace id and a session id.")
        return self


@dataclass(frozen=True)
class SessionEvent:
    workspace_id: str
    session_id: str
    cursor: Cursor
    kind: str
    payload: str  # compact JSON text
    extra: dict[str, Any] | None = None
    protocol_version: int = PROTOCOL_VERSION
    schema_revision: int = SCHEMA_REVISION

    def to_json(self) -> dict[str, object]:
        return {
            "protocol_version": self.protocol_version,
            "schema_revision": self.schema_revision,
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "cursor": self.cursor.to_json(),
            "kind": self.kind,
            "payload": json.loads(self.payload),
            "extra": self.extra or {},
        }

    @classmethod
    def from_json(cls, obj: object) -> SessionEvent:
        if not isinstance(obj, dict):
            raise ValueError("an event is an object")
        kind, ws, sess = obj.get("kind"), obj.get("workspace_id"), obj.get("session_id")
        if not isinstance(kind, str) or not isinstance(ws, str) or not isinstance(sess, str) or "payload" not in obj:
            raise ValueError("an event needs kind, workspace_id, session_id and payload")
        extra = obj.get("extra")
        if extra is not None and not isinstance(extra, dict):
            raise ValueError("an event's extra is an object")
        pv, sr = obj.get("protocol_version", PROTOCOL_VERSION), obj.get("schema_revision", SCHEMA_REVISION)
        if not isinstance(pv, int) or not isinstance(sr, int):
            raise ValueError("versions are integers")
        return cls(ws, sess, Cursor.from_json(obj.get("cursor")), kind, _compact(obj["payload"]), extra or None, pv, sr)


@dataclass(frozen=True)
class ChatMessage:
    id: str
    role: str = ""
    text: str = ""
    status: str = "streaming"
    started_at: int = 0  # sequence of the event that started it

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "role": self.role, "text": self.text, "status": self.status,
                "started_at": self.started_at}

    @classmethod
    def from_json(cls, obj: object) -> ChatMessage:
        if not isinstance(obj, dict):
            raise ValueError("a message is an object")
        mid = obj.get("id")
        if not isinstance(mid, str) or not mid:
            raise ValueError("a message has a non-empty id")
        started = obj.get("started_at", 0)
        return cls(mid, str(obj.get("role", "")), str(obj.get("text", "")), str(obj.get("status", "streaming")),
                   started if isinstance(started, int) else 0)


@dataclass(frozen=True)
class ReplayResult:
    status: str  # complete | partial | unavailable
    events: tuple[SessionEvent, ...]
    through: Cursor  # always the current cursor


@dataclass(frozen=True)
class SessionCapture:
    cursor: Cursor
    messages: tuple[ChatMessage, ...]
    replay: ReplayResult | None


# ------------------------------------------------------------------------------------------------- the state


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _payload_text(payload: str | bytes | object) -> tuple[str, Any]:
    try:
        if isinstance(payload, (bytes, bytearray)):
            payload = bytes(payload).decode("utf-8")
        if isinstance(payload, str):
            value = json.loads(payload, parse_constant=_reject)
        else:
            value = payload
        return _compact(value), value
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidEventPayload(f"The event payload is not valid JSON ({one_line(str(exc))[:200]}).") from exc


def _reject(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DEFAULT_GENERATION = new_generation


@dataclass
class _State:
    generation: str
    sequence: int = 0
    events: list[SessionEvent] = field(default_factory=list)
    messages: dict[str, ChatMessage] = field(default_factory=dict)

    def clone(self) -> _State:
        return _State(self.generation, self.sequence, list(self.events), dict(self.messages))

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.generation, self.sequence)


def _reduce(state: _State, seq: int, value: Any, max_events: int) -> None:
    if not isinstance(value, dict):
        raise InvalidEventPayload("A chat_stream payload must be a JSON object.")
    mid = value.get("message_id", value.get("id"))
    if not isinstance(mid, str) or not mid:
        raise InvalidEventPayload("A chat_stream payload must name its message (message_id).")
    msg = state.messages.get(mid) or ChatMessage(mid, started_at=seq)
    role = value.get("role")
    text = value.get("text")
    delta = value.get("delta")
    status = value.get("status")
    new_text = text if isinstance(text, str) else msg.text
    if isinstance(delta, str):
        new_text += delta
    new_status = status if isinstance(status, str) and status else ("done" if value.get("done") is True else msg.status)
    state.messages[mid] = ChatMessage(mid, role if isinstance(role, str) and role else msg.role, new_text, new_status,
                                      msg.started_at)
    while len(state.messages) > max_events:
        del state.messages[next(iter(state.messages))]


def _append(state: _State, ref: Ref, kind: str, payload: object, max_events: int, extra: dict[str, Any] | None = None
            ) -> tuple[_State, SessionEvent]:
    if not isinstance(kind, str) or not kind:
        raise InvalidEventPayload("An event needs a kind.")
    text, value = _payload_text(payload)
    if state.sequence >= MAX_SEQUENCE:
        raise SequenceExhausted(f"The session log's sequence would pass {MAX_SEQUENCE}.")
    new = state.clone()
    new.sequence += 1
    event = SessionEvent(ref.workspace_id, ref.session_id, Cursor(new.generation, new.sequence), kind, text,
                         dict(extra) if extra else None)
    if kind == KIND_CHAT_STREAM:
        _reduce(new, new.sequence, value, max_events)
    new.events.append(event)
    if len(new.events) > max_events:
        del new.events[: len(new.events) - max_events]
    return new, event


def replay_from(state: _State, after: Cursor) -> ReplayResult:
    """Reference section 6, rules in order (generation first)."""
    current = state.cursor
    if after.generation != state.generation or after.sequence > state.sequence:
        return ReplayResult(REPLAY_UNAVAILABLE, (), current)
    if after.sequence == state.sequence:
        return ReplayResult(REPLAY_COMPLETE, (), current)
    first = state.events[0].cursor.sequence if state.events else state.sequence + 1
    events = tuple(e for e in state.events if e.cursor.sequence > after.sequence)
    status = REPLAY_PARTIAL if after.sequence + 1 < first else REPLAY_COMPLETE
    return ReplayResult(status, events, current)


def _document(ref: Ref, state: _State) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "workspace_id": ref.workspace_id,
        "session_id": ref.session_id,
        "generation": state.generation,
        "sequence": state.sequence,
        "events": [e.to_json() for e in state.events],
        "messages": [m.to_json() for m in state.messages.values()],
    }


def encode_document(ref: Ref, state: _State) -> bytes:
    return (json.dumps(_document(ref, state), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def decode_document(data: bytes, ref: Ref, max_events: int, where: str = "") -> _State:
    """Parse and validate a stored document (reference 8.4); any failure is :class:`CorruptEventLog`."""

    def bad(why: str) -> CorruptEventLog:
        return CorruptEventLog(f"The session log {one_line(where or ref.session_id)} is corrupt: {one_line(why)}.")

    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad("it is not JSON") from exc
    if not isinstance(doc, dict):
        raise bad("it is not a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION or isinstance(doc.get("schema_version"), bool):
        raise bad(f"schema_version is {doc.get('schema_version')!r}, not {SCHEMA_VERSION}")
    if doc.get("workspace_id") != ref.workspace_id or doc.get("session_id") != ref.session_id:
        raise bad("it belongs to another workspace or session")
    generation, sequence = doc.get("generation"), doc.get("sequence")
    if not isinstance(generation, str) or not generation:
        raise bad("the generation is empty")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or not 0 <= sequence <= MAX_SEQUENCE:
        raise bad("the sequence is not a JSON-safe unsigned integer")
    raw_events, raw_messages = doc.get("events"), doc.get("messages")
    if not isinstance(raw_events, list) or not isinstance(raw_messages, list):
        raise bad("events and messages must be arrays")
    if len(raw_events) > max_events:
        raise bad(f"it holds {len(raw_events)} events, more than {max_events}")
    if sequence > 0 and not raw_events:
        raise bad("a nonzero sequence has no retained event")
    try:
        events = [SessionEvent.from_json(e) for e in raw_events]
        messages = [ChatMessage.from_json(m) for m in raw_messages]
    except ValueError as exc:
        raise bad(str(exc)) from exc
    first = sequence - len(events) + 1
    for offset, e in enumerate(events):
        if e.cursor.sequence != first + offset:
            raise bad("the retained events are not contiguous up to the sequence")
        if e.cursor.generation != generation or (e.workspace_id, e.session_id) != (ref.workspace_id, ref.session_id):
            raise bad("an event belongs to another generation or session")
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids):
        raise bad("two messages share an id")
    return _State(generation, sequence, events, {m.id: m for m in messages})


def path_segment(value: str) -> str:
    """A path-safe, injective encoding of an id as one path segment."""
    out = []
    for byte in value.encode("utf-8", "surrogatepass"):
        ch = chr(byte)
        out.append(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else f"%{byte:02X}")
    text = "".join(out)
    if len(text) > 180:
        return "~" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return text


# ------------------------------------------------------------------------------------------------- backends


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
        self._new_gen = new_gen or _DEFAULT_GENERATION
        self._lock = threading.RLock()

    # Backends implement: _get(ref) -> _State (creating + committing the initial generation), _commit(ref, old, new)
    def _get(self, ref: Ref) -> _State:
        raise NotImplementedError

    def _commit(self, ref: Ref, old: _State, new: _State) -> bool:
        raise NotImplementedError

    def _mutate(self, ref: Ref, change: Callable[[_State], tuple[_State, Any]]) -> Any:
        ref.validate()
        with self._lock:
            old = self._get(ref)
            new, out = change(old)
            self._commit(ref, old, new)
            return out

    def append(self, ref: Ref, kind: str, payload: object, extra: dict[str, Any] | None = None) -> SessionEvent:
        return self._mutate(ref, lambda s: _append(s, ref, kind, payload, self.max_events, extra))

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
        def change(s: _State) -> tuple[_State, Cursor]:
            new = _State(_next_generation(self._new_gen, s.generation))
            return new, new.cursor

        return self._mutate(ref, change)


class MemoryEventLog(_LockedLog):
    """The bounded in-process log."""

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS, new_generation: Callable[[], str] | None = None) -> None:
        super().__init__(max_events, new_generation)
        self._states: dict[Ref, _State] = {}

    def _get(self, ref: Ref) -> _State:
        state = self._states.get(ref)
        if state is None:
            state = self._states[ref] = _State(self._new_gen())
        return state

    def _commit(self, ref: Ref, old: _State, new: _State) -> bool:
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
        self._cache: dict[Ref, _State] = {}

    def path_for(self, ref: Ref) -> Path:
        ref.validate()
        return (self.state_dir / "sessionlog" / "workspaces" / path_segment(ref.workspace_id)
                / f"{path_segment(ref.session_id)}.json")

    def _get(self, ref: Ref) -> _State:
        state = self._cache.get(ref)
        if state is not None:
            return state
        path = self.path_for(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            state = _State(self._new_gen())
            self._write(ref, state)
        except OSError as exc:
            raise StoreError(f"The session log {one_line(str(path))} cannot be read ({one_line(exc.strerror or exc)}).") from exc
        else:
            state = decode_document(data, ref, self.max_events, str(path))
        self._cache[ref] = state
        return state

    def _write(self, ref: Ref, state: _State) -> None:
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
        try:
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            pass

    def _commit(self, ref: Ref, old: _State, new: _State) -> bool:
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
        self._new_gen = new_generation or _DEFAULT_GENERATION

    def key_for(self, ref: Ref) -> str:
        ref.validate()
        return f"{self.prefix}/workspaces/{path_segment(ref.workspace_id)}/sessions/{path_segment(ref.session_id)}"

    def _run(self, ref: Ref, change: Callable[[_State], tuple[_State, Any]] | None) -> tuple[_State, Any]:
        key = self.key_for(ref)
        for _ in range(self.max_retries):
            old_bytes = self.blobs.get(key)
            if old_bytes is None:
                state = _State(self._new_gen())
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
        return self._run(ref, lambda s: _append(s, ref, kind, payload, self.max_events, extra))[1]

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
        def change(s: _State) -> tuple[_State, Cursor]:
            new = _State(_next_generation(self._new_gen, s.generation))
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
    "ACTION_APPEND", "ACTION_NONE", "ACTION_RELOAD", "ACTION_RESET", "CAS_PREFIX", "DEFAULT_CAS_RETRIES",
    "DEFAULT_MAX_EVENTS", "KIND_CHAT_STREAM", "MAX_SEQUENCE", "PROTOCOL_VERSION", "REPLAY_COMPLETE", "REPLAY_PARTIAL",
    "REPLAY_UNAVAILABLE", "SCHEMA_REVISION", "SCHEMA_VERSION", "BlobStore", "CASEventLog", "CASRetryLimit",
    "ChatMessage", "CorruptEventLog", "Cursor", "EventStore", "FileEventLog", "FollowUpdate", "InvalidEventPayload",
    "InvalidSessionRef", "MemoryBlobStore", "MemoryEventLog", "NativeFollower", "NativeRecord", "Ref", "ReplayResult",
    "SequenceExhausted", "SessionCapture", "SessionEvent", "decode_document", "encode_document", "follow_entries",
    "follow_replay", "follow_update", "native_follower", "new_generation", "path_segment", "replay_from",
]

from store.agents.native_follow import NativeFollower, NativeRecord, native_follower  # noqa: E402 - moved there
