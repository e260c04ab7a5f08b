"""Reading one file for a capture: its records hashed as compacted JSON, the prefix proof, the tail to store.

A record that is not valid JSON makes its file unreadable (a checkpoint restores records byte for byte and
cannot hold one), except a cut-off last line without its newline: that is taken to be still in the writing
and is left for the next capture (``pending_lines``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.agents.agentstate import (
    MAX_LINE_BYTES,
    MAX_RECORDS,
    MAX_RESTORED_BYTES,
    FileShape,
    SessionStateRecord,
    check_json,
    compact,
)
from store.agents.capture_model import (
    STATUS_DIVERGENT,
    STATUS_UNREADABLE,
)
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
    tail_bytes: int = 0
    pending_lines: int = 0
    bytes_read: int = 0
    problem: str = ""
    problem_status: str = ""  # divergent | unreadable


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


def scan_file(path: Path, rel: str, canonical: FileShape | None, hint_bytes: int = 0, keep_budget: int = 0) -> FileScan:
    """Hash a file's compacted records, taking the prefix proof at the canonical record count.

    When ``hint_bytes`` (the canonical file's restored length) is given, the prefix is first hashed in one read:
    if the file is written compactly, its first ``hint_bytes`` bytes *are* the canonical restored bytes and the
    digest matches; otherwise the file is re-read record by record.
    """
    scan = FileScan(rel=rel, path=path)
    try:
        return _scan(scan, path, one_line(rel), canonical, hint_bytes, keep_budget)
    except OSError as exc:
        reason = "permission denied" if isinstance(exc, PermissionError) else one_line(exc.strerror or exc)
        scan.problem, scan.problem_status = f"{one_line(rel)} cannot be read ({reason})", STATUS_UNREADABLE
        scan.tail = []
        return scan


def _scan(scan: FileScan, path: Path, rel: str, canonical: FileShape | None, hint_bytes: int,
          keep_budget: int) -> FileScan:
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
        for line_offset, line, complete in iter_lines(fh, offset):
            physical += 1
            text = line.strip(_TRIM)
            if not text:
                continue
            in_prefix = records < canon_records
            if not complete and not counts_as_record(text, complete):
                scan.pending_lines = 1
                break
            if not in_prefix:
                if len(text) > MAX_LINE_BYTES:
                    scan.problem, scan.problem_status = (
                        f"{rel} line {physical} is longer than {MAX_LINE_BYTES} bytes", STATUS_UNREADABLE)
                    break
                try:
                    decoded = text.decode("utf-8")
                except UnicodeDecodeError:
                    scan.problem, scan.problem_status = f"{rel} line {physical} is not valid UTF-8", STATUS_DIVERGENT
                    break
                why = check_json(decoded)
                if why:
                    scan.problem, scan.problem_status = (
                        f"{rel} line {physical} is not valid JSON ({why})", STATUS_UNREADABLE)
                    break
            packed = compact(text)
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
                    scan.tail_offset = line_offset + len(line) + (1 if complete else 0)
                    if scan.prefix_digest != canonical.digest:  # type: ignore[union-attr]
                        scan.problem, scan.problem_status = (
                            f"{rel} no longer starts with the {canon_records} canonical records", STATUS_DIVERGENT)
                        break
                continue
            if keep is not None:
                if scan.tail_bytes + len(packed) <= keep_budget:
                    keep.append(packed)
                    scan.tail_bytes += len(packed)
                else:
                    keep = scan.tail = None
        scan.bytes_read = fh.tell()
    scan.records = records
    scan.digest = hasher.hexdigest()
    scan.restored_bytes = restored
    if not scan.problem and canonical is not None and records < canon_records:
        scan.problem, scan.problem_status = (
            f"{rel} has {records} records, fewer than the canonical {canon_records}", STATUS_DIVERGENT)
    return scan


def reread_tail(scan: FileScan) -> Iterator[bytes]:
    """The tail records of a scanned file, read again from its tail offset (for tails too big to keep)."""
    wanted = scan.records - scan.tail_from
    if wanted <= 0:
        return
    with scan.path.open("rb") as fh:
        fh.seek(scan.tail_offset)
        for _, line, complete in iter_lines(fh, scan.tail_offset):
            text = line.strip(_TRIM)
            if not text:
                continue
            if not complete and not counts_as_record(text, complete):
                return
            yield text
            wanted -= 1
            if wanted == 0:
                return


def record_stream(scans: Sequence[FileScan]) -> Iterator[SessionStateRecord]:
    """The tail records of every scanned file, numbered on from each file's canonical record count."""
    for scan in scans:
        tail = scan.tail if scan.tail is not None else reread_tail(scan)
        line = scan.tail_from
        for content in tail:
            line += 1
            yield SessionStateRecord(scan.rel, line, content)
