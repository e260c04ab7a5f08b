"""Checkpoint records: compaction, file digests, and the validation of headers, paths and record streams.

* the file digest is SHA-256 over the compacted records, each followed by ``"\\n"`` (the restored JSONL bytes);
* :func:`header_problem` / :func:`path_problem` check a header and its paths against reference 4.1–4.3;
* :class:`StreamValidator` checks a record stream against its header (reference 4.4) while hashing it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import uuid
from collections.abc import Iterable
from typing import Any

from store.agents.checkpoint_model import (
    MAX_AGENT_ID_BYTES,
    MAX_AGENT_SESSION_ID_BYTES,
    MAX_CWD_BYTES,
    MAX_FILES,
    MAX_LINE_BYTES,
    MAX_PATH_BYTES,
    MAX_RECORDS,
    MAX_RESTORED_BYTES,
    PersistedSessionState,
    PersistedSessionStateFile,
    SessionStateDivergent,
    SessionStateRecord,
    TrustedTail,
)
from store.errors import StoreError
from store.safetext import one_line

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


def utf8_len(text: str) -> int:
    """The UTF-8 length of ``text`` in bytes (a lone surrogate counts as its three bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def path_problem(path: str) -> str | None:
    """None when ``path`` is a valid relative ``.jsonl`` path (reference 4.1), else the reason."""
    if not path:
        return "the path is empty"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not valid UTF-8 text"
    if path != path.strip():
        return "the path has leading or trailing whitespace"
    if utf8_len(path) > MAX_PATH_BYTES:
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


def is_uuid(value: str) -> bool:
    """True when ``value`` is a UUID in its canonical lowercase form."""
    try:
        return str(uuid.UUID(value)) == value.lower()
    except (ValueError, AttributeError, TypeError):
        return False


def _is_hex64(value: str) -> bool:
    return len(value) == 64 and not value.strip("0123456789abcdef")  # every character stripped: all hex


def bounded_text(value: str, name: str, limit: int) -> str | None:
    """None when ``value`` is non-empty UTF-8 text of at most ``limit`` bytes, else why not (naming ``name``)."""
    if not value.strip():
        return f"{name} is empty"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{name} is not valid UTF-8 text"
    if utf8_len(value.strip()) > limit:
        return f"{name} is longer than {limit} bytes"
    return None


def header_problem(state: PersistedSessionState) -> str | None:
    """None when the header and shapes follow reference 4.2 and 4.3, else the first problem found."""
    for value, name, limit in (
        (state.agent_id, "the agent id", MAX_AGENT_ID_BYTES),
        (state.agent_session_id, "the agent session id", MAX_AGENT_SESSION_ID_BYTES),
        (state.cwd, "the working directory", MAX_CWD_BYTES),
    ):
        problem = bounded_text(value, name, limit)
        if problem:
            return problem
    if not is_uuid(state.through_run_id):
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
            return f"'{one_line(f.path)}': {problem}"
        key = f.path.encode("utf-8", "surrogatepass")
        if previous is not None and key <= previous:
            return "the file shapes are not in strictly increasing path order"
        previous = key
        if not 1 <= f.records <= MAX_RECORDS:
            return f"{one_line(f.path)}: the record count {f.records} is outside 1..{MAX_RECORDS}"
        if not _is_hex64(f.digest):
            return f"{one_line(f.path)}: the digest is not 64 lowercase hex characters"
        if not 0 <= f.prefix_records <= f.records:
            return f"{one_line(f.path)}: the prefix proof covers more records than the file has"
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
                f"Agent session state diverged from the canonical checkpoint: {one_line(rec.file_path)} line "
                f"{rec.line_number} is not valid UTF-8."
            ) from exc
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SessionStateDivergent(
            f"Agent session state diverged from the canonical checkpoint: {one_line(rec.file_path)} line "
            f"{rec.line_number} is not valid UTF-8."
        ) from exc
    return content


class StreamValidator:
    """Reference 4.4: checks a record stream against the header, computing each file's digest as it goes.

    ``skip`` maps a path to the number of leading records already stored (they are hashed, not returned).
    A file whose shape carries a usable ``prefix_state`` may start at ``prefix_records + 1``.

    ``trusted`` names files whose records the caller itself produced as compacted, valid JSON and hashed into
    the shape's digest (a capture's scan): their records are checked for order, counts, sizes and UTF-8, but
    not parsed, compacted or hashed a second time. Loading re-verifies every digest, so a wrong digest still
    fails closed.
    """

    def __init__(self, state: PersistedSessionState, skip: dict[str, int], error: type[StoreError],
                 trusted: frozenset[str] = frozenset()) -> None:
        self.state = state
        self.trusted = trusted
        self.trusting = False
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
            raise self._fail(f"The record stream names '{one_line(rec.file_path)}', which the header does not declare.")
        while self.next_index < len(self.order) and self.order[self.next_index] != f.path:
            skipped = self.by_path[self.order[self.next_index]]
            self._finish_unstreamed(skipped)
            self.next_index += 1
        if self.next_index >= len(self.order):
            raise self._fail(f"The record stream is not in path order at '{one_line(rec.file_path)}'.")
        self.next_index += 1
        self.current = f
        self.trusting = f.path in self.trusted
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
            raise self._fail(f"{one_line(rec.file_path)} starts at line {rec.line_number}, not line 1.")

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
        raise self._fail(f"The record stream has no records for {one_line(f.path)}.")

    def _end_current(self) -> None:
        f = self.current
        if f is None:
            return
        digest = f.digest if self.trusting else self.hasher.hexdigest()
        if self.count != f.records or digest != f.digest:
            raise self._fail(
                f"{one_line(f.path)} ended with {self.count} records and digest {digest[:12]}…, its shape says "
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
            raise self._fail(f"{one_line(rec.file_path)}: line {rec.line_number} follows line {self.count}.")
        assert self.current is not None
        if self.trusting:
            return self._accept_trusted(rec)
        text = _record_text(rec).strip(" \t\r\n")
        raw = text.encode("utf-8")
        if not raw:
            raise self._fail(f"{one_line(rec.file_path)} line {rec.line_number} is empty.")
        if len(raw) > MAX_LINE_BYTES:
            raise self._fail(f"{one_line(rec.file_path)} line {rec.line_number} is longer than {MAX_LINE_BYTES} bytes.")
        problem = check_json(text)
        if problem:
            raise self._fail(f"{one_line(rec.file_path)} line {rec.line_number} is not valid JSON ({problem}).")
        packed = compact(raw)
        self.hasher.update(packed)
        self.hasher.update(b"\n")
        self.count += 1
        self.records_seen += 1
        self.file_bytes += len(packed) + 1
        self.restored_total += len(packed) + 1
        if self.count > self.current.records or self.records_seen > self.state.record_count:
            raise self._fail(f"{one_line(rec.file_path)} has more records than its shape declares.")
        if self.restored_total > MAX_RESTORED_BYTES:
            raise self._fail(f"The snapshot is larger than {MAX_RESTORED_BYTES} restored bytes.")
        text_out = packed.decode("utf-8") if packed is not raw else text
        return text_out, self.count > self.skip.get(rec.file_path, 0)

    def _accept_trusted(self, rec: SessionStateRecord) -> tuple[str, bool]:
        assert self.current is not None
        text = _record_text(rec)
        size = len(rec.content) if isinstance(rec.content, bytes) else len(text.encode("utf-8"))
        if not size:
            raise self._fail(f"{one_line(rec.file_path)} line {rec.line_number} is empty.")
        if size > MAX_LINE_BYTES:
            raise self._fail(f"{one_line(rec.file_path)} line {rec.line_number} is longer than {MAX_LINE_BYTES} bytes.")
        self.count += 1
        self.records_seen += 1
        self.file_bytes += size + 1
        self.restored_total += size + 1
        if self.count > self.current.records or self.records_seen > self.state.record_count:
            raise self._fail(f"{one_line(rec.file_path)} has more records than its shape declares.")
        if self.restored_total > MAX_RESTORED_BYTES:
            raise self._fail(f"The snapshot is larger than {MAX_RESTORED_BYTES} restored bytes.")
        return text, self.count > self.skip.get(rec.file_path, 0)

    def accept_tail(self, tail: TrustedTail) -> int:
        """Validate a trusted file's new records in one piece (what :meth:`accept` does for each of them,
        trusted); returns their restored bytes (Σ size + 1). Every record of the tail must be new."""
        n = len(tail.contents)
        path = tail.file_path
        if path not in self.trusted:
            raise self._fail(f"{one_line(path)} came as a trusted tail but is not a trusted file.")
        if n == 0 or len(tail.sizes) != n:
            raise self._fail(f"The tail of {one_line(path)} holds {n} records and {len(tail.sizes)} sizes.")
        if tail.first_line <= self.skip.get(path, 0):
            raise self._fail(f"The tail of {one_line(path)} starts at line {tail.first_line}, inside its stored prefix.")
        if self.current is None or path != self.current.path:
            self._end_current()
            self._start(SessionStateRecord(path, tail.first_line, ""))
        elif tail.first_line != self.count + 1:
            raise self._fail(f"{one_line(path)}: line {tail.first_line} follows line {self.count}.")
        assert self.current is not None
        if min(tail.sizes) < 1:
            raise self._fail(f"{one_line(path)} has an empty line.")
        if max(tail.sizes) > MAX_LINE_BYTES:
            raise self._fail(f"{one_line(path)} has a line longer than {MAX_LINE_BYTES} bytes.")
        restored = sum(tail.sizes) + n
        self.count += n
        self.records_seen += n
        self.file_bytes += restored
        self.restored_total += restored
        if self.count > self.current.records or self.records_seen > self.state.record_count:
            raise self._fail(f"{one_line(path)} has more records than its shape declares.")
        if self.restored_total > MAX_RESTORED_BYTES:
            raise self._fail(f"The snapshot is larger than {MAX_RESTORED_BYTES} restored bytes.")
        return restored

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
