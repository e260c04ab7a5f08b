"""Following a Claude Code or Codex transcript file as it grows, re-capturing its session on each change.

:class:`NativeFollower` reads only what was appended since its cursor (after proving, by hash, that the part
already read is unchanged); a rewritten or truncated file starts a new generation. It answers with a
:class:`~store.agents.cursors.FollowUpdate`, like the session event log's followers.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.agents.cursors import (
    DEFAULT_MAX_EVENTS,
    REPLAY_COMPLETE,
    REPLAY_PARTIAL,
    REPLAY_UNAVAILABLE,
    Cursor,
    FollowUpdate,
    follow_update,
    new_generation,
)


@dataclass(frozen=True)
class NativeRecord:
    line: int  # physical line number in the file
    text: str  # the line as written (without its newline)


class NativeFollower:
    """Follow a Claude Code or Codex file as it grows.

    :meth:`poll` reads only what was appended since the cursor (after proving, by hash, that the part already
    read is unchanged); a rewritten or truncated file starts a new generation (reset). A cut-off last line is
    left until its newline arrives. When ``recapture`` is given it runs after every change (e.g. to capture
    the session's checkpoint again; see :func:`native_follower`).
    """

    def __init__(self, path: str | os.PathLike[str], *, limit: int = DEFAULT_MAX_EVENTS,
                 recapture: Callable[[], object] | None = None) -> None:
        self.path = Path(path)
        self.limit = limit
        self.recapture = recapture
        self.generation = ""
        self.offset = 0
        self.physical = 0
        self.records: list[NativeRecord] = []
        self._hash = hashlib.sha256()
        self._identity: tuple[int, int] | None = None

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.generation, len(self.records))

    def _restart(self) -> None:
        self.generation = new_generation()
        self.offset = 0
        self.physical = 0
        self.records = []
        self._hash = hashlib.sha256()

    def _read_new(self, fh: Any) -> list[NativeRecord]:
        fh.seek(self.offset)
        data = fh.read()
        end = data.rfind(b"\n")
        if end < 0:
            return []
        chunk = data[: end + 1]
        self._hash.update(chunk)
        self.offset += len(chunk)
        new: list[NativeRecord] = []
        for raw in chunk.split(b"\n")[:-1]:
            self.physical += 1
            if raw.strip(b" \t\r\n"):
                new.append(NativeRecord(self.physical, raw.decode("utf-8", "replace")))
        self.records.extend(new)
        return new

    def _prefix_intact(self, fh: Any) -> bool:
        h = hashlib.sha256()
        left = self.offset
        fh.seek(0)
        while left > 0:
            chunk = fh.read(min(1 << 20, left))
            if not chunk:
                return False
            h.update(chunk)
            left -= len(chunk)
        return h.digest() == self._hash.digest()

    def poll(self, after: Cursor | None = None) -> FollowUpdate:
        try:
            st = self.path.stat()
            fh = self.path.open("rb")
        except OSError:
            self._restart()
            self._identity = None
            return follow_update(REPLAY_UNAVAILABLE, (), self.cursor)
        with fh:
            identity = (st.st_dev, st.st_ino)
            rewritten = (
                not self.generation
                or identity != self._identity
                or st.st_size < self.offset
                or not self._prefix_intact(fh)
            )
            if rewritten:
                self._restart()
                self._identity = identity
                self._read_new(fh)
                self._changed()
                return follow_update(REPLAY_UNAVAILABLE, (), self.cursor)
            new = self._read_new(fh) if st.st_size > self.offset else []
        if new:
            self._changed()
        if after is None or after.generation != self.generation or after.sequence > len(self.records):
            return follow_update(REPLAY_UNAVAILABLE, (), self.cursor)
        pending = tuple(self.records[after.sequence:])
        if len(pending) > self.limit:
            return follow_update(REPLAY_PARTIAL, pending[-self.limit:], self.cursor)
        return follow_update(REPLAY_COMPLETE, pending, self.cursor)

    def _changed(self) -> None:
        if self.recapture is not None:
            self.recapture()

    def lines(self) -> list[str]:
        return [r.text for r in self.records]


def native_follower(sd: Any, agent: str, root: str | os.PathLike[str], path: str | os.PathLike[str],
                    *, limit: int = DEFAULT_MAX_EVENTS) -> NativeFollower:
    """A follower that re-captures the file's session into the checkpoint store on every change (read-write
    session directories only; in a read mode it just follows the file)."""
    recapture: Callable[[], object] | None = None
    if not sd.mode.is_read:
        from store.agents.capture import capture_paths

        def recapture() -> object:
            return capture_paths(sd, agent, root, [path])

    return NativeFollower(path, limit=limit, recapture=recapture)
