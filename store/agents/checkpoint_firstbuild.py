"""A first capture into a session directory that has no checkpoint file yet: built in a private file next to
where the file goes, then published whole.

A checkpoint file in WAL mode writes every page twice: once into the ``-wal`` file (as frames that are not
aligned to the file system's pages) and once more into the file at the checkpoint. A brand-new file has nothing
to protect and nobody reading it, so :func:`open_first_build` makes it privately
(``.agent-state.db.<pid>.<host>.<random>.building``) with its rollback journal in memory and no syncs: each page is
written once. :meth:`FirstBuild.publish` switches it to WAL, syncs it, and links it into place only if no
checkpoint file exists there yet (a hard link never replaces a file): when another process made one meanwhile,
the private file is dropped and the capture runs again into that store, so nothing is stored twice and no
head is lost. Nobody sees the store before it is published, so a capture publishes its build once it has
:data:`FIRST_BUILD_BYTES` and writes on in the published file: a process that is killed loses at most that much
work. A build left by a process that no longer runs (on this host), or not written for an hour (by any host:
a live build is written to all the time), is removed by the next first capture.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from store.agents.checkpoint_db import _open_sqlite, state_db_path
from store.agents.checkpoint_engine import selected_store
from store.errors import StoreError
from store.mothx.db import Database
from store.mothx.sessiondir import SessionDir
from store.paths import COMPANION_SUFFIXES, companions, fsync_dir

BUILD_SUFFIX = ".building"
STALE_BUILD_SECONDS = 3600
"""A build no process has written for this long is abandoned, whichever host made it."""
FIRST_BUILD_BYTES = 256 * 1024 * 1024
"""A first capture's private build is published once it holds this many bytes (then it writes on in place)."""


@dataclass
class FirstBuild:
    """The private file of a first capture (:func:`open_first_build`) and where it is to be published."""

    target: Path
    path: Path

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def publish(self, db: Database) -> bool:
        """Close ``db`` (the private store) and put its file in place: True; False when a checkpoint file
        appeared there meanwhile (then the private file is removed and nothing of it is kept)."""
        try:
            try:
                got = str(db.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
                db.conn.execute("PRAGMA synchronous = NORMAL")
            finally:
                db.close()
            if got != "wal":
                raise StoreError(f"The new checkpoint file could not be switched to WAL mode (it is in {got}).")
            wal, _shm, journal = companions(self.path)
            if wal.exists() or journal.exists():
                raise StoreError("The new checkpoint file was not closed cleanly; it is not used.")
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(self.path, self.target)
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links: a rename, unless a file is there by now
                if self.target.exists():
                    return False
                os.replace(self.path, self.target)
            fsync_dir(self.target.parent)
            return True
        finally:
            self.discard()

    def discard(self) -> None:
        """Remove the private file and its companions (the published file, a hard link, stays)."""
        for p in (self.path, *companions(self.path)):
            with contextlib.suppress(OSError):
                p.unlink()


def open_first_build(sd: SessionDir) -> tuple[Database, FirstBuild] | None:
    """A private store for a first capture: (its open store, where it goes) when the checkpoint store is the
    directory's own file and it does not exist yet, else None. Builds left by processes that no longer run
    are removed first."""
    if selected_store() is not None or sd.mode.is_read:
        return None
    target = state_db_path(sd)
    wal, _shm, journal = companions(target)
    if target.exists() or wal.exists() or journal.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_builds(target)
    path = target.with_name(f".{target.name}.{os.getpid()}.{host_tag()}.{os.urandom(4).hex()}{BUILD_SUFFIX}")
    build = FirstBuild(target, path)
    try:
        db = _open_sqlite(path, sd, True)
    except BaseException:
        build.discard()
        raise
    assert db is not None
    try:
        mode = str(db.conn.execute("PRAGMA journal_mode = MEMORY").fetchone()[0]).lower()
        db.conn.execute("PRAGMA synchronous = OFF")  # synced once, before it is published
    except BaseException:
        db.close()
        build.discard()
        raise
    if mode != "memory":
        db.close()
        build.discard()
        return None
    return db, build


def host_tag() -> str:
    """Eight hex digits naming this host in a build's name (a process id means something on its own host only)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "surrogateescape")).hexdigest()[:8]


def remove_stale_builds(target: Path) -> list[Path]:
    """Remove the private builds next to ``target`` that are abandoned: made on this host by a process that no
    longer runs, or not written for :data:`STALE_BUILD_SECONDS`. The files removed."""
    removed: list[Path] = []
    prefix = f".{target.name}."
    try:
        names = [p for p in target.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return removed
    here = host_tag()
    now = time.time()
    for p in names:
        base = p.name
        for suffix in COMPANION_SUFFIXES:
            base = base.removesuffix(suffix)
        if not base.endswith(BUILD_SUFFIX):
            continue
        pid_text, _, rest = base[len(prefix):].partition(".")
        host = rest.partition(".")[0]
        try:
            idle = now - p.stat().st_mtime
        except OSError:
            continue
        dead_here = host == here and pid_text.isdigit() and not _alive(int(pid_text))
        if not dead_here and idle < STALE_BUILD_SECONDS:
            continue
        with contextlib.suppress(OSError):
            p.unlink()
            removed.append(p)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True
