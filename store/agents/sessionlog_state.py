"""The state of a bounded session event log and its stored document (reference ``sessionlog.md``).

:class:`LogState` is one log: its generation, the last sequence, the retained events (a contiguous suffix) and
the ``chat_stream`` projection. :func:`append_event` and :func:`replay_from` are the reference's rules;
:func:`encode_document` / :func:`decode_document` the JSON layout every backend stores (reference 8.3, 8.4).
The backends are in :mod:`store.agents.sessionlog`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from store.agents.cursors import (
    REPLAY_COMPLETE,
    REPLAY_PARTIAL,
    REPLAY_UNAVAILABLE,
    Cursor,
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
        return cls(ws, sess, Cursor.from_json(obj.get("cursor")), kind, compact_json(obj["payload"]), extra or None, pv, sr)


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


def compact_json(value: object) -> str:
    """Compact JSON text of ``value`` (no NaN): how payloads are kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _payload_text(payload: str | bytes | object) -> tuple[str, Any]:
    try:
        if isinstance(payload, (bytes, bytearray)):
            payload = bytes(payload).decode("utf-8")
        if isinstance(payload, str):
            value = json.loads(payload, parse_constant=_reject)
        else:
            value = payload
        return compact_json(value), value
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidEventPayload(f"The event payload is not valid JSON ({one_line(str(exc))[:200]}).") from exc


def _reject(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


DEFAULT_GENERATION = new_generation
"""How a log names a new generation unless it is given its own maker."""


@dataclass
class LogState:
    generation: str
    sequence: int = 0
    events: list[SessionEvent] = field(default_factory=list)
    messages: dict[str, ChatMessage] = field(default_factory=dict)

    def clone(self) -> LogState:
        return LogState(self.generation, self.sequence, list(self.events), dict(self.messages))

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.generation, self.sequence)


def _reduce(state: LogState, seq: int, value: Any, max_events: int) -> None:
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


def append_event(state: LogState, ref: Ref, kind: str, payload: object, max_events: int, extra: dict[str, Any] | None = None
            ) -> tuple[LogState, SessionEvent]:
    """The state after appending one event, and the event (reference section 5): the next sequence,
    the bounded suffix, and the ``chat_stream`` projection."""
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


def replay_from(state: LogState, after: Cursor) -> ReplayResult:
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


def _document(ref: Ref, state: LogState) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "workspace_id": ref.workspace_id,
        "session_id": ref.session_id,
        "generation": state.generation,
        "sequence": state.sequence,
        "events": [e.to_json() for e in state.events],
        "messages": [m.to_json() for m in state.messages.values()],
    }


def encode_document(ref: Ref, state: LogState) -> bytes:
    """The stored JSON document of a log (reference 8.3)."""
    return (json.dumps(_document(ref, state), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def decode_document(data: bytes, ref: Ref, max_events: int, where: str = "") -> LogState:
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
    return LogState(generation, sequence, events, {m.id: m for m in messages})


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
