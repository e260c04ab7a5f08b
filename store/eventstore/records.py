"""EventRecord, EventBatch and the line format of a segment file (see EVENTSTORE.md).

Every line is canonical JSON: keys sorted, no spaces, ASCII only (every non-ASCII character, a lone surrogate
included, is a ``\\uXXXX`` escape), terminated by one ``\\n``. The same canonical bytes feed the digest, so a
record reads back exactly as it was written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

DIGEST_PREFIX = "sha256:"
RECORD_KEYS = frozenset({"eventId", "sessionId", "runId", "turnId", "kind", "parentSeq", "payload", "createdAt"})
EVENT_KEYS = frozenset({"batchId", "seq", "event"})
FOOTER_FIELDS = frozenset({"batchId", "seqFrom", "seqTo", "count", "digest"})


class LineError(ValueError):
    """A complete line that is not a valid event line or footer (corruption when it is not the torn tail)."""


def canonical(value: object) -> bytes:
    """The canonical JSON bytes of ``value`` (sorted keys, compact, ASCII)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


@dataclass(frozen=True)
class EventRecord:
    """One front-end-neutral content event. ``payload`` is any JSON value; its schema is the runtime's."""

    event_id: str
    session_id: str
    kind: str
    payload: Any
    created_at: str
    run_id: str = ""
    turn_id: str = ""
    parent_seq: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "eventId": self.event_id, "sessionId": self.session_id, "runId": self.run_id, "turnId": self.turn_id,
            "kind": self.kind, "parentSeq": self.parent_seq, "payload": self.payload, "createdAt": self.created_at,
        }

    @classmethod
    def from_json(cls, value: object) -> EventRecord:
        if not isinstance(value, dict) or set(value) != RECORD_KEYS:
            raise LineError("an event record must have exactly the fields " + ", ".join(sorted(RECORD_KEYS)))
        for key in ("eventId", "sessionId", "runId", "turnId", "kind", "createdAt"):
            if not isinstance(value[key], str):
                raise LineError(f"event field {key} is not a string")
        parent = value["parentSeq"]
        if not isinstance(parent, int) or isinstance(parent, bool) or parent < 0:
            raise LineError("event field parentSeq is not a non-negative integer")
        return cls(value["eventId"], value["sessionId"], value["kind"], value["payload"], value["createdAt"],
                   value["runId"], value["turnId"], parent)


@dataclass(frozen=True)
class EventBatch:
    """A physically complete batch: every event line and its footer. Not canonical until its intent commits."""

    batch_id: str
    seq_from: int
    seq_to: int
    events: tuple[EventRecord, ...]
    digest: str
    segment: str = ""   # the segment file holding it
    offset: int = 0     # byte offset of its first line in that file
    length: int = 0     # bytes of its lines, footer included

    @property
    def count(self) -> int:
        return len(self.events)


def digest_event_batch(events: tuple[EventRecord, ...] | list[EventRecord]) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of every record, each followed by ``\\n``, in order."""
    h = hashlib.sha256()
    for record in events:
        h.update(canonical(record.to_json()))
        h.update(b"\n")
    return DIGEST_PREFIX + h.hexdigest()


def encode_batch(batch_id: str, seq_from: int, events: tuple[EventRecord, ...] | list[EventRecord]) -> tuple[bytes, bytes, str]:
    """(event lines, footer line, digest) of one batch."""
    lines = b"".join(
        canonical({"batchId": batch_id, "seq": seq_from + i, "event": e.to_json()}) + b"\n" for i, e in enumerate(events)
    )
    digest = digest_event_batch(events)
    footer = canonical({"footer": {"batchId": batch_id, "seqFrom": seq_from, "seqTo": seq_from + len(events) - 1,
                                   "count": len(events), "digest": digest}}) + b"\n"
    return lines, footer, digest


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LineError(f"{what} is not a positive integer")
    return value


@dataclass(frozen=True)
class EventLine:
    batch_id: str
    seq: int
    record: EventRecord


@dataclass(frozen=True)
class FooterLine:
    batch_id: str
    seq_from: int
    seq_to: int
    count: int
    digest: str


def decode_line(raw: bytes) -> EventLine | FooterLine:
    """Parse one complete line (without its ``\\n``). Raises :class:`LineError`."""
    try:
        text = raw.decode("ascii")
        value = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise LineError(f"not a JSON line ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise LineError("a line is not a JSON object")
    if canonical(value) != raw:
        raise LineError("a line is not in canonical form")
    if set(value) == {"footer"}:
        f = value["footer"]
        if not isinstance(f, dict) or set(f) != FOOTER_FIELDS:
            raise LineError("a footer must have exactly the fields " + ", ".join(sorted(FOOTER_FIELDS)))
        if not isinstance(f["batchId"], str) or not f["batchId"]:
            raise LineError("footer batchId is not a non-empty string")
        if not isinstance(f["digest"], str) or not f["digest"].startswith(DIGEST_PREFIX):
            raise LineError("footer digest is not a sha256 digest")
        return FooterLine(f["batchId"], _int(f["seqFrom"], "footer seqFrom"), _int(f["seqTo"], "footer seqTo"),
                          _int(f["count"], "footer count"), f["digest"])
    if set(value) != EVENT_KEYS:
        raise LineError("an event line must have exactly the fields batchId, event, seq")
    if not isinstance(value["batchId"], str) or not value["batchId"]:
        raise LineError("event line batchId is not a non-empty string")
    return EventLine(value["batchId"], _int(value["seq"], "event line seq"), EventRecord.from_json(value["event"]))


# ---------------------------------------------------------------------------------------------------------------
# Legacy entries <-> records (lossless: the row's cells are kept as they are, ``data`` as its original text)

ENTRY_COLUMNS = ("seq", "session_id", "id", "type", "parent_id", "timestamp", "data")


def record_from_entry(row: dict[str, Any], *, run_id: str = "", turn_id: str = "") -> EventRecord:
    """One ``entries`` row as an EventRecord whose payload is ``{"entry": {column: cell}}``."""
    entry = {c: row.get(c) for c in ENTRY_COLUMNS}
    for key, cell in entry.items():
        if isinstance(cell, bytes):  # a BLOB cell (no runtime writes one) keeps its bytes as hex
            entry[key] = {"blob": cell.hex()}
    return EventRecord(
        event_id=str(row.get("id") if row.get("id") is not None else f"seq-{row.get('seq')}"),
        session_id=str(row.get("session_id") or ""), kind=str(row.get("type") or ""),
        payload={"entry": entry}, created_at=str(row.get("timestamp") or ""), run_id=run_id, turn_id=turn_id,
    )


def entry_from_record(record: EventRecord) -> dict[str, Any]:
    """The ``entries`` row a migrated record came from (reverses :func:`record_from_entry`)."""
    payload = record.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("entry"), dict):
        raise LineError(f"event {record.event_id!r} carries no entry envelope")
    out: dict[str, Any] = {}
    for key in ENTRY_COLUMNS:
        cell = payload["entry"].get(key)
        if isinstance(cell, dict) and set(cell) == {"blob"}:
            cell = bytes.fromhex(str(cell["blob"]))
        out[key] = cell
    return out
