"""Reading one file for a capture: its records hashed as compacted JSON, the prefix proof, the tail to store.

No line blocks a session. A line a checkpoint cannot hold as it is (not valid JSON, not UTF-8, longer than
8 MiB) is stored as a stand-in record (:func:`store.agents.native_lines.unreadable_record`: its line number,
reason, size, SHA-256, a preview and, when small, its bytes), and every record before and after it is captured.
The stand-in is a function of the line alone, so a later fix of the line changes the file's prefix digest and
re-capture reports the session ``divergent`` as for any rewritten record. A cut-off last line without its
newline is taken to be still in the writing and is left for the next capture (``pending_lines``). Lines are
read in bounded pieces (:func:`read_lines`): an oversized line is hashed as it streams, never held whole.

The common case takes one piece: a tail (the file past its proven prefix) of at most 64 MiB that fits the
session's memory budget is read whole and checked by :func:`bulk_tail` — one UTF-8 decode, one parse per line
that also proves the line compact, one hash of the bytes. Only when a line of it is not plainly a compact
JSON record (or the last line is cut off) is the tail read again line by line as above, so both ways give
the same records, digests and stand-ins (tested side by side).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.agents.agentstate import (
    MAX_LINE_BYTES,
    MAX_RECORDS,
    MAX_RESTORED_BYTES,
    FileShape,
    SessionStateRecord,
    TrustedTail,
    check_json,
    compact,
)
from store.agents.capture_model import (
    STATUS_DIVERGENT,
    STATUS_UNREADABLE,
)
from store.agents.native import AGENT_CODEX
from store.agents.native_drift import DriftCounter
from store.agents.native_lines import Line, parse_line, unreadable_record
from store.safetext import one_line

_READ_CHUNK = 1 << 20
_TRIM = b" \t\r\n"

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
    tail_sizes: list[int] = field(default_factory=list, repr=False)  # the length of each kept record
    tail_bytes: int = 0
    pending_lines: int = 0
    bytes_read: int = 0
    problem: str = ""
    problem_status: str = ""  # divergent | unreadable
    unreadable: list[tuple[int, str]] = field(default_factory=list)  # (line, reason) stored as stand-ins (tail)


@dataclass
class RawLine:
    """One physical line read in bounded pieces."""

    offset: int  # byte offset of the line
    end: int  # byte offset after the line and its newline
    raw: bytes  # the line without its newline; for an oversized line only its first bytes
    complete: bool  # ended with "\n"
    size: int  # bytes of the whole line without its newline
    sha256: str = ""  # of the whole line, for an oversized line

    @property
    def oversized(self) -> bool:
        return self.size > len(self.raw)


_HEAD_BYTES = 64 * 1024


def read_lines(fh: Any, start_offset: int) -> Iterator[RawLine]:
    """The lines of ``fh`` from ``start_offset``, none read whole when longer than :data:`MAX_LINE_BYTES`:
    such a line keeps its first bytes, its size and its SHA-256, hashed piece by piece."""
    offset = start_offset
    limit = MAX_LINE_BYTES + 1
    while True:
        chunk = fh.readline(limit)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield RawLine(offset, offset + len(chunk), chunk[:-1], True, len(chunk) - 1)
            offset += len(chunk)
            continue
        if len(chunk) < limit:  # the file ends without a newline
            yield RawLine(offset, offset + len(chunk), chunk, False, len(chunk))
            offset += len(chunk)
            continue
        h = hashlib.sha256(chunk)
        head = chunk[:_HEAD_BYTES]
        size = len(chunk)
        del chunk
        complete = False
        while True:
            piece = fh.readline(_READ_CHUNK)
            if not piece:
                break
            if piece.endswith(b"\n"):
                h.update(piece[:-1])
                size += len(piece) - 1
                complete = True
                break
            h.update(piece)
            size += len(piece)
        end = offset + size + (1 if complete else 0)
        yield RawLine(offset, end, head, complete, size, h.hexdigest())
        offset = end


def record_bytes(line: RawLine, physical: int) -> tuple[bytes, str]:
    """The record a checkpoint stores for a line: its compacted JSON, or the stand-in of an unreadable line
    with the reason ("" for a readable line)."""
    packed, reason, _ = record_and_value(line, physical)
    return packed, reason


def _parse(text: str) -> tuple[object, str | None]:
    """The JSON value of ``text`` and None, or None and why it is not one JSON value (as :func:`check_json`)."""
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except (ValueError, RecursionError):
        return None, check_json(text) or "not valid JSON"


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def record_and_value(line: RawLine, physical: int) -> tuple[bytes, str, object]:
    """:func:`record_bytes` and the line's parsed JSON value (None for an unreadable line): each line is
    parsed once per capture."""
    if line.oversized:
        reason = f"the line is longer than {MAX_LINE_BYTES} bytes ({line.size} bytes)"
        return unreadable_record(physical, reason, line.raw, line.size, line.sha256), reason, None
    text = line.raw.strip(_TRIM)
    if len(text) > MAX_LINE_BYTES:  # pragma: no cover - read_lines marks these oversized
        reason = f"the line is longer than {MAX_LINE_BYTES} bytes"
        return unreadable_record(physical, reason, line.raw), reason, None
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        reason = "the line is not valid UTF-8"
    else:
        value, why = _parse(decoded)
        if why is None:
            return compact_valid(text), "", value
        reason = parse_line(Line(physical, text, line.complete)).error or f"not valid JSON ({why})"
    return unreadable_record(physical, reason, line.raw), reason, None


@dataclass
class FastDrift(DriftCounter):
    """A :class:`DriftCounter` that also takes the counts of values parsed from marked text (:func:`bulk_tail`)."""

    def merge_marked(self, part: FastDrift) -> None:
        """Add ``part``'s counts, fed with values parsed from marked text (:func:`bulk_tail`: every space
        inside a string read as :data:`MARK`), with the spaces put back in every name; ``part``'s version is
        carried on to the next record."""
        for version, d in part.by_version.items():
            if d.empty and MARK not in version:
                self._at(version if version != "unknown version" else "").records += d.records
                continue
            mine = self._at(_unmark(version) if version != "unknown version" else "")
            mine.records += d.records
            for counts, into in ((d.types, mine.types), (d.fields, mine.fields)):
                for key, n in counts.items():
                    into[_unmark(key)] += n
        self.version = _unmark(part.version)


def compact_valid(raw: bytes) -> bytes:
    """:func:`compact` for a line already parsed as valid JSON, with a fast proof for compact text.

    In valid JSON a tab, CR or LF can only stand outside strings (inside they must be escaped), and a
    backslash only inside them, always starting an escape pair: with the pairs removed by plain replaces,
    splitting on quotes leaves the text outside strings, which holds a space only if the line is not compact.
    """
    if b"\t" in raw or b"\r" in raw or b"\n" in raw:
        return compact(raw)
    if b" " not in raw:
        return raw
    stripped = raw.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in raw else raw
    if b" " not in b"".join(stripped.split(b'"')[0::2]):
        return raw
    return compact(raw)


def feed_drift(drift: DriftCounter, value: object, size: int) -> None:
    """What :meth:`DriftCounter.feed` does with a record, given its value already parsed."""
    if size > 1024 * 1024 or not isinstance(value, dict):
        return
    if drift.agent == AGENT_CODEX:
        drift._codex(value)  # noqa: SLF001 - the counter's own reduction, minus a second json.loads
    else:
        drift._claude(value)  # noqa: SLF001


def pending_line(line: RawLine) -> bool:
    """A last line without its newline that is not yet a whole record: left for the next capture."""
    if line.complete:
        return False
    if line.oversized:
        return True
    return not counts_as_record(line.raw.strip(_TRIM), False)


def iter_lines(fh: Any, start_offset: int) -> Iterator[tuple[int, bytes, bool]]:
    """(byte offset, line without "\\n", ended with "\\n") from ``start_offset``."""
    offset = start_offset
    for line in fh:
        complete = line.endswith(b"\n")
        yield offset, (line[:-1] if complete else line), complete
        offset += len(line)


def counts_as_record(text: bytes, complete: bool) -> bool:
    """A last line without its newline counts only when it is a whole JSON object or array."""
    if complete:
        return True
    if text[:1] not in (b"{", b"["):
        return False
    try:
        return check_json(text.decode("utf-8")) is None
    except UnicodeDecodeError:
        return False


MARK = "\x7f"  # a character JSON allows inside strings and nowhere else
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# The decoder's own scanner (C): one value from an index, and where it ended (StopIteration: no value there).
_SCAN: Callable[[str, int], tuple[object, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_FAST_TAIL_BYTES = 64 * 1024 * 1024  # a tail up to this size is read whole and checked in one piece
_DRIFT_RECORD_BYTES = 1024 * 1024  # as DriftCounter.feed: a longer record is not counted


def _unmark(text: str) -> str:
    return text.replace(MARK, " ") if MARK in text else text


def bulk_tail(data: bytes, drift: FastDrift | None) -> tuple[list[bytes], list[int], FastDrift | None] | None:
    """The records of ``data`` (whole lines) when every one of them is compact, valid JSON and valid UTF-8,
    checked in one piece: (the lines, their sizes, drift of the records); None when any line is not (blank,
    not compact, not JSON, not UTF-8, oversized, or the last line without its newline): the caller reads
    those lines one by one. Then the restored bytes of the records are ``data`` itself, so the file digest
    is one hash of it.

    Compactness is proven with the parse itself: in valid JSON a tab, CR or LF stands only outside strings,
    and :data:`MARK` (DEL) only inside them. With no tab, CR or DEL in the text, every space is replaced by
    DEL before parsing: the marked line parses if and only if the line is valid JSON with no space outside
    its strings, i.e. compact. Strings in the parsed values then hold DEL for space; only the drift counter
    reads them (``drift``, fed with the values), and it gets its spaces back in :meth:`FastDrift.merge_marked`.
    The values are scanned in place in the whole marked text (no list of line strings), each required to end
    right before its line's newline: the scanner passes over a newline between the tokens of an object or
    array, so a value that runs on into the next line ends somewhere else and the tail is refused.
    """
    if not data.endswith(b"\n") or b"\x7f" in data or b"\t" in data or b"\r" in data:
        return None
    lines = data.split(b"\n")
    lines.pop()  # what follows the last newline: nothing
    if b"" in lines:
        return None
    sizes = list(map(len, lines))
    if max(sizes) > MAX_LINE_BYTES:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    marked = text.replace(" ", MARK) if b" " in data else text
    scan = _SCAN
    part = None if drift is None else FastDrift(drift.agent, version=drift.version)
    pos = 0  # the values are scanned in place, each to be followed by its line's newline
    try:
        if part is None:
            for _ in sizes:
                end = scan(marked, pos)[1]
                if marked[end] != "\n":
                    return None
                pos = end + 1
        else:
            feed = part._codex if part.agent == AGENT_CODEX else part._claude  # noqa: SLF001 - its own reduction
            for size in sizes:
                value, end = scan(marked, pos)
                if marked[end] != "\n":
                    return None
                pos = end + 1
                if size <= _DRIFT_RECORD_BYTES and isinstance(value, dict):
                    feed(value)
    except (StopIteration, ValueError, RecursionError, IndexError):
        return None
    if pos != len(marked):
        return None
    return lines, sizes, part


def scan_file(path: Path, rel: str, canonical: FileShape | None, hint_bytes: int = 0, keep_budget: int = 0,
              drift: DriftCounter | None = None) -> FileScan:
    """Hash a file's compacted records, taking the prefix proof at the canonical record count; ``drift``
    (when given) counts the tail's records as they are parsed.

    When ``hint_bytes`` (the canonical file's restored length) is given, the prefix is first hashed in one read:
    if the file is written compactly, its first ``hint_bytes`` bytes *are* the canonical restored bytes and the
    digest matches; otherwise the file is re-read record by record.
    """
    scan = FileScan(rel=rel, path=path)
    try:
        return _scan(scan, path, one_line(rel), canonical, hint_bytes, keep_budget, drift)
    except OSError as exc:
        reason = "permission denied" if isinstance(exc, PermissionError) else one_line(exc.strerror or exc)
        scan.problem, scan.problem_status = f"{one_line(rel)} cannot be read ({reason})", STATUS_UNREADABLE
        scan.tail = []
        return scan


def _scan(scan: FileScan, path: Path, rel: str, canonical: FileShape | None, hint_bytes: int,
          keep_budget: int, drift: DriftCounter | None = None) -> FileScan:
    with path.open("rb") as fh:
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
        if records >= canon_records and keep is not None and _bulk_scan(scan, fh, offset, records, restored, hasher,
                                                                        keep_budget, drift):
            return scan
        for rl in read_lines(fh, offset):
            physical += 1
            if not rl.oversized and not rl.raw.strip(_TRIM):
                continue
            in_prefix = records < canon_records
            if pending_line(rl):
                scan.pending_lines = 1
                break
            packed, reason, value = record_and_value(rl, physical)
            if reason and not in_prefix:
                scan.unreadable.append((physical, reason))
            if drift is not None and not in_prefix:
                if value is None and not reason:
                    pass
                elif reason:
                    drift.feed(packed)  # a stand-in record, as the checkpoint stores it
                else:
                    feed_drift(drift, value, len(packed))
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
                    scan.tail_offset = rl.end
                    if scan.prefix_digest != canonical.digest:  # type: ignore[union-attr]
                        scan.problem, scan.problem_status = (
                            f"{rel} no longer starts with the {canon_records} canonical records", STATUS_DIVERGENT)
                        break
                continue
            if keep is not None:
                if scan.tail_bytes + len(packed) <= keep_budget:
                    keep.append(packed)
                    scan.tail_sizes.append(len(packed))
                    scan.tail_bytes += len(packed)
                else:
                    keep = scan.tail = None
                    scan.tail_sizes = []
        scan.bytes_read = fh.tell()
    scan.records = records
    scan.digest = hasher.hexdigest()
    scan.restored_bytes = restored
    if not scan.problem and canonical is not None and records < canon_records:
        scan.problem, scan.problem_status = (
            f"{rel} has {records} records, fewer than the canonical {canon_records}", STATUS_DIVERGENT)
    return scan


def _bulk_scan(scan: FileScan, fh: Any, offset: int, records: int, restored: int, hasher: Any, keep_budget: int,
               drift: DriftCounter | None) -> bool:
    """The rest of the file from ``offset`` (past any canonical prefix) read and checked in one piece
    (:func:`bulk_tail`); True when that completed ``scan``, False (``fh`` back at ``offset``) when the lines
    must be read one by one."""
    left = os.fstat(fh.fileno()).st_size - offset
    if left <= 0 or left > min(keep_budget, _FAST_TAIL_BYTES):
        return False
    data = fh.read(left)
    fast = drift if isinstance(drift, FastDrift) else None
    found = bulk_tail(data, fast) if (drift is None or fast is not None) else None
    if found is None or records + len(found[0]) > MAX_RECORDS or restored + len(data) > MAX_RESTORED_BYTES:
        fh.seek(offset)
        return False
    lines, sizes, part = found
    hasher.update(data)
    if fast is not None and part is not None:
        fast.merge_marked(part)
    scan.tail, scan.tail_sizes, scan.tail_bytes = lines, sizes, len(data) - len(lines)
    scan.bytes_read = fh.tell()
    scan.records = records + len(lines)
    scan.digest = hasher.hexdigest()
    scan.restored_bytes = restored + len(data)
    return True


def reread_tail(scan: FileScan) -> Iterator[bytes]:
    """The tail records of a scanned file, read again from its tail offset (for tails too big to keep)."""
    wanted = scan.records - scan.tail_from
    if wanted <= 0:
        return
    with scan.path.open("rb") as fh:
        fh.seek(0)
        physical = _lines_before(fh, scan.tail_offset)
        for rl in read_lines(fh, scan.tail_offset):
            physical += 1
            if not rl.oversized and not rl.raw.strip(_TRIM):
                continue
            if pending_line(rl):
                return
            yield record_bytes(rl, physical)[0]
            wanted -= 1
            if wanted == 0:
                return


def _lines_before(fh: Any, offset: int) -> int:
    """The number of newlines in the first ``offset`` bytes of ``fh`` (left positioned at ``offset``)."""
    count = 0
    left = offset
    while left > 0:
        chunk = fh.read(min(_READ_CHUNK, left))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count


def record_stream(scans: Sequence[FileScan]) -> Iterator[SessionStateRecord | TrustedTail]:
    """The tail records of every scanned file, numbered on from each file's canonical record count: a kept
    tail as one :class:`TrustedTail`, a tail too big to keep read again record by record."""
    for scan in scans:
        if scan.tail is not None:
            if scan.tail:
                yield TrustedTail(scan.rel, scan.tail_from + 1, scan.tail, scan.tail_sizes)
            continue
        line = scan.tail_from
        for content in reread_tail(scan):
            line += 1
            yield SessionStateRecord(scan.rel, line, content)
