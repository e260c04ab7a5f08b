"""The physical event store of one session: append-only segment files, their classification, the manifest.

:class:`EventStore` is not an ownership mechanism: its callers hold the session's fenced lease, and SQLite
intents decide which of its batches are canonical (see :mod:`store.eventstore.protocol`). ``inspect()`` never
writes; ``scan()`` may cut a torn tail and write the manifest, so only a lease holder calls it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from store.eventstore.records import (
    EventBatch,
    EventLine,
    EventRecord,
    FooterLine,
    LineError,
    decode_line,
    digest_event_batch,
    encode_batch,
)
from store.mothx.repair_kit import step
from store.paths import fsync_dir
from store.times import format_rfc3339

EVENTS_DIR = "events"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
SEGMENT_MAX_BYTES = 8 * 1024 * 1024
SEGMENT_RE = re.compile(r"^seg-(\d{8})\.jsonl$")
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
TAIL_CHUNK = 4096

ScanStatus = Literal["clean", "torn", "corrupt"]


# ---------------------------------------------------------------------------------------------------------------
# Stats (process-local, advisory)


@dataclass
class EventStoreStats:
    append_batches: int = 0
    append_events: int = 0
    append_bytes: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    full_scans: int = 0  # whole-log reads; the steady-state append path must not grow this


_STATS = EventStoreStats()
_STATS_LOCK = threading.Lock()


def write_stats() -> EventStoreStats:
    """A copy of this process's counters."""
    with _STATS_LOCK:
        return EventStoreStats(**vars(_STATS))


def _count(**deltas: int) -> None:
    with _STATS_LOCK:
        for key, value in deltas.items():
            setattr(_STATS, key, getattr(_STATS, key) + value)


# tail cache: store path -> (segment, size, mtime_ns, Tail)
_TAILS: dict[str, tuple[str, int, int, Tail]] = {}
_TAILS_LOCK = threading.Lock()


def forget_caches(root: Path | None = None) -> None:
    """Drop the cached tails (after a reset or a move); they are hints, never authority."""
    with _TAILS_LOCK:
        if root is None:
            _TAILS.clear()
        else:
            prefix = str(root)
            for key in [k for k in _TAILS if k.startswith(prefix)]:
                del _TAILS[key]


# ---------------------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Tail:
    """What the end of the log says, read without scanning it."""

    clean: bool             # the last byte of the log ends a footer line (or the log is empty)
    next_seq: int           # after the last footer (meaningful when clean)
    last_batch_id: str      # '' when the log is empty
    segment: str            # the last segment ('' when none)
    size: int               # its size


@dataclass(frozen=True)
class ScanResult:
    """Every physically complete batch and how the log ends."""

    status: ScanStatus
    batches: tuple[EventBatch, ...]
    reason: str = ""
    where: str = ""          # segment:offset of the corruption, or of the torn tail's first byte
    torn_segment: str = ""
    torn_offset: int = 0
    torn_bytes: int = 0
    segments: tuple[str, ...] = ()
    total_bytes: int = 0
    manifest_problem: str = ""

    @property
    def next_seq(self) -> int:
        return self.batches[-1].seq_to + 1 if self.batches else 1

    def batch(self, batch_id: str) -> EventBatch | None:
        for b in self.batches:
            if b.batch_id == batch_id:
                return b
        return None


@dataclass
class _Cursor:
    expected: int = 1
    batches: list[EventBatch] = field(default_factory=list)


def classify(segments: list[tuple[str, bytes]]) -> ScanResult:
    """Classify a log given as (segment name, bytes) in order. Pure: the same bytes give the same answer.

    A line is complete only when its ``\\n`` is there. Only the last segment may end in a torn tail: complete
    event lines of one batch (valid, in sequence) with no footer yet, then at most one partial line. Any
    complete line that fails to decode or to agree with its batch, anywhere, is corruption.
    """
    cur = _Cursor()
    names = tuple(n for n, _ in segments)
    total = sum(len(d) for _, d in segments)

    def corrupt(name: str, offset: int, reason: str) -> ScanResult:
        return ScanResult("corrupt", tuple(cur.batches), reason, f"{name}:{offset}", segments=names, total_bytes=total)

    for index, (name, data) in enumerate(segments):
        last = index == len(segments) - 1
        pos = 0
        pending: list[EventLine] = []
        start = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                if not last:
                    return corrupt(name, pos, "a sealed segment ends inside a line")
                tail_at = start if pending else pos
                return ScanResult("torn", tuple(cur.batches), "the last batch is incomplete (no footer)",
                                  f"{name}:{tail_at}", name, tail_at, len(data) - tail_at, names, total)
            try:
                line = decode_line(data[pos:nl])
            except LineError as exc:
                return corrupt(name, pos, str(exc))
            if isinstance(line, EventLine):
                if pending and line.batch_id != pending[0].batch_id:
                    return corrupt(name, pos, "a batch starts before the previous one has its footer")
                if line.seq != cur.expected + len(pending):
                    return corrupt(name, pos, f"event seq {line.seq} where {cur.expected + len(pending)} is due")
                if not pending:
                    start = pos
                pending.append(line)
            else:
                problem = _footer_problem(line, pending, cur.expected)
                if problem:
                    return corrupt(name, pos, problem)
                records = tuple(p.record for p in pending)
                cur.batches.append(EventBatch(line.batch_id, line.seq_from, line.seq_to, records, line.digest,
                                              name, start, nl + 1 - start))
                cur.expected = line.seq_to + 1
                pending = []
            pos = nl + 1
        if pending:
            if not last:
                return corrupt(name, start, "a sealed segment ends inside a batch")
            return ScanResult("torn", tuple(cur.batches), "the last batch is incomplete (no footer)",
                              f"{name}:{start}", name, start, len(data) - start, names, total)
    return ScanResult("clean", tuple(cur.batches), segments=names, total_bytes=total)


def _footer_problem(footer: FooterLine, pending: list[EventLine], expected: int) -> str:
    if not pending:
        return "a footer closes no event lines"
    if footer.batch_id != pending[0].batch_id:
        return "the footer names another batch than its event lines"
    if footer.seq_from != expected or footer.seq_from != pending[0].seq:
        return f"the footer's seqFrom {footer.seq_from} is not {pending[0].seq}"
    if footer.count != len(pending) or footer.seq_to != footer.seq_from + footer.count - 1:
        return f"the footer counts {footer.count} events ({footer.seq_from}..{footer.seq_to}), the batch has {len(pending)}"
    if footer.digest != digest_event_batch([p.record for p in pending]):
        return "the batch digest does not match its events"
    return ""


# ---------------------------------------------------------------------------------------------------------------
# The store


def store_dir_name(session_id: str) -> str:
    """The folder of a session under ``events/``: the id itself when it is plain, else ``sid-<sha256 prefix>``."""
    if _SAFE_ID.match(session_id):
        return session_id
    raw = session_id.encode("utf-8", "surrogatepass")
    return "sid-" + hashlib.sha256(raw).hexdigest()[:32]


class EventStore:
    """One session's append-only content store under ``<sessionDir>/events/<session>/``."""

    def __init__(self, session_root: Path, session_id: str) -> None:
        self.session_root = Path(session_root)
        self.session_id = session_id
        self.path = self.session_root / EVENTS_DIR / store_dir_name(session_id)

    # reading --------------------------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.is_dir()

    def segment_names(self) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(n for n in os.listdir(self.path) if SEGMENT_RE.match(n))

    def size_bytes(self) -> int:
        total = 0
        if self.path.is_dir():
            for entry in os.scandir(self.path):
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
        return total

    def read_manifest(self) -> tuple[dict[str, object] | None, str]:
        """(manifest, problem). A missing manifest is no problem: it is rebuilt from the segments."""
        p = self.path / MANIFEST
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            return None, ""
        except OSError as exc:
            return None, f"the manifest cannot be read ({exc.strerror})"
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None, "the manifest is not JSON (it is rebuilt by a scan)"
        if (not isinstance(value, dict) or value.get("schemaVersion") != MANIFEST_VERSION
                or not isinstance(value.get("active"), list)):
            return None, "the manifest has an unknown shape (it is rebuilt by a scan)"
        return value, ""

    def _read_all(self) -> list[tuple[str, bytes]]:
        _count(full_scans=1)
        out = []
        for name in self.segment_names():
            with open(self.path / name, "rb") as fh:
                out.append((name, fh.read()))
        return out

    def inspect(self) -> ScanResult:
        """Every physically complete batch, read-only: no truncation, no manifest, no folder created."""
        result = classify(self._read_all())
        manifest, problem = self.read_manifest()
        if manifest is not None and result.status != "corrupt":
            names = set(result.segments)
            listed = manifest["active"]
            missing = [str(n) for n in listed if str(n) not in names] if isinstance(listed, list) else []
            if missing:
                return ScanResult("corrupt", result.batches, f"sealed segment {missing[0]} named by the manifest is missing",
                                  missing[0], segments=result.segments, total_bytes=result.total_bytes)
        if problem:
            result = ScanResult(result.status, result.batches, result.reason, result.where, result.torn_segment,
                                result.torn_offset, result.torn_bytes, result.segments, result.total_bytes, problem)
        return result

    def scan(self) -> ScanResult:
        """:meth:`inspect`, then cut a torn tail and rewrite the manifest. Only under the writer's lease.

        Corruption is never repaired: the result says where it is and nothing is written.
        """
        result = self.inspect()
        if result.status == "corrupt":
            return result
        if result.status == "torn":
            seg = self.path / result.torn_segment
            fd = os.open(seg, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.ftruncate(fd, result.torn_offset)
                os.fsync(fd)
            finally:
                os.close(fd)
            forget_caches(self.path)
            result = ScanResult("clean", result.batches, segments=result.segments,
                                total_bytes=result.total_bytes - result.torn_bytes)
        if self.path.is_dir():
            self.write_manifest(result.segments[:-1], result.next_seq)
        return result

    def tail(self) -> Tail:
        """How the log ends, from its last bytes only (cached by segment size and mtime)."""
        names = self.segment_names()
        while names:
            name = names[-1]
            st = os.stat(self.path / name, follow_symlinks=False)
            if st.st_size == 0:
                names.pop()
                continue
            key = str(self.path)
            with _TAILS_LOCK:
                hit = _TAILS.get(key)
            if hit is not None and hit[:3] == (name, st.st_size, st.st_mtime_ns):
                _count(cache_hits=1)
                return hit[3]
            _count(cache_misses=1)
            tail = self._read_tail(name, st.st_size)
            with _TAILS_LOCK:
                _TAILS[key] = (name, st.st_size, st.st_mtime_ns, tail)
            return tail
        return Tail(True, 1, "", "", 0)

    def _read_tail(self, name: str, size: int) -> Tail:
        with open(self.path / name, "rb") as fh:
            want = min(size, TAIL_CHUNK)
            while True:
                fh.seek(size - want)
                chunk = fh.read(want)
                if not chunk.endswith(b"\n"):
                    return Tail(False, 0, "", name, size)
                cut = chunk.rfind(b"\n", 0, len(chunk) - 1)
                if cut >= 0 or want == size:
                    break
                want = min(size, want * 4)
        line = chunk[cut + 1:-1]
        try:
            decoded = decode_line(line)
        except LineError:
            return Tail(False, 0, "", name, size)
        if not isinstance(decoded, FooterLine):
            return Tail(False, 0, "", name, size)
        return Tail(True, decoded.seq_to + 1, decoded.batch_id, name, size)

    # writing --------------------------------------------------------------------------------------------------
    def _ensure_dir(self) -> None:
        if self.path.is_dir():
            return
        created = []
        for d in (self.session_root / EVENTS_DIR, self.path):
            if not d.is_dir():
                d.mkdir(mode=0o700)
                created.append(d)
        for d in created:
            fsync_dir(d.parent)

    def write_manifest(self, sealed: tuple[str, ...] | list[str], next_seq: int) -> None:
        body = json.dumps({"schemaVersion": MANIFEST_VERSION, "active": list(sealed), "nextSeq": next_seq,
                           "updatedAt": format_rfc3339()}, sort_keys=True).encode("ascii") + b"\n"
        tmp = self.path / (MANIFEST + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path / MANIFEST)
        fsync_dir(self.path)

    def append(self, batch_id: str, seq_from: int, events: tuple[EventRecord, ...] | list[EventRecord]) -> EventBatch:
        """Append one batch: every event line, then the footer, then fsync. The caller checked the tail."""
        if not events:
            raise ValueError("an event batch holds at least one event")
        self._ensure_dir()
        names = self.segment_names()
        name = names[-1] if names else "seg-00000001.jsonl"
        if names and (self.path / name).stat().st_size >= SEGMENT_MAX_BYTES:
            name = f"seg-{int(SEGMENT_RE.match(name).group(1)) + 1:08d}.jsonl"  # type: ignore[union-attr]
            self.write_manifest(names, seq_from)  # every earlier segment is sealed now
        lines, footer, digest = encode_batch(batch_id, seq_from, events)
        path = self.path / name
        new = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            offset = os.fstat(fd).st_size
            _write_all(fd, lines)
            step("append.events_written")
            _write_all(fd, footer)
            step("append.footer_written")
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if new:
            fsync_dir(self.path)
        batch = EventBatch(batch_id, seq_from, seq_from + len(events) - 1, tuple(events), digest, name, offset,
                           len(lines) + len(footer))
        tail = Tail(True, batch.seq_to + 1, batch_id, name, st.st_size)
        with _TAILS_LOCK:
            _TAILS[str(self.path)] = (name, st.st_size, st.st_mtime_ns, tail)
        _count(append_batches=1, append_events=len(events), append_bytes=len(lines) + len(footer))
        return batch


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
