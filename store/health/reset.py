"""ResetDatabase: move ``sessions.db`` (with its companions) and the event store aside, create a fresh v43 database.

Reference 4.7 and the seed's ResetDatabase / ActiveRuntimeLeases / ResetReport:

* refused while any lease row is still marked ``active`` (valid or expired: an expired one is released first
  with ``release-lease``), and in a read mode;
* ``sessions.db`` → ``sessions.db.pure-<YYYYMMDDTHHMMSSZ>[-n].bak``; each companion that exists (``-wal``,
  ``-shm``, ``-journal``, also one that outlived its database) is renamed to the backup's name plus the same
  suffix (``sessions.db.pure-….bak-wal``), so SQLite opens the backup together with its WAL; ``events/`` →
  ``events.pure-<same stamp>[-n].bak``. Nothing is deleted; a failed rename rolls back the ones done;
* a fresh database is created with the v43 template and the migrations recorded;
* the report lists what moved and everything else the directory holds, which a reset leaves behind
  (``knowledge-bases/`` and the rest), with its size.

Another process that holds the old file open keeps writing there and cannot be detected from here; the
lease check is the guard the reference names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from store.errors import RepairRefused
from store.eventstore.segments import EVENTS_DIR, forget_caches
from store.health.model import human_bytes
from store.mothx.db import OpenMode, open_database
from store.mothx.lease_model import LeaseSnapshot
from store.mothx.lease_store import list_leases
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.mothx.schema import create_v43, inspect_schema
from store.mothx.sessiondir import SessionDir
from store.paths import SESSIONS_DB
from store.safetext import one_line
from store.words import plural

COMPANIONS = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class LeftBehind:
    name: str
    directory: bool
    bytes: int


def tree_bytes(path: Path) -> int:
    """Bytes of a file, or of a folder summed recursively; symbolic links are not followed."""
    try:
        st = path.lstat()
    except OSError:
        return 0
    if not path.is_dir() or path.is_symlink():
        return st.st_size
    total = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return total


def active_runtime_leases(sd: SessionDir) -> list[LeaseSnapshot]:
    """Lease rows still marked active (valid or expired). Reads only."""
    return list_leases(sd, active_only=True)


def _stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def _moves(root: Path, stamp: str) -> list[tuple[Path, Path]]:
    """(from, to) for every file and folder a reset moves, with a ``-n`` suffix free for all of them."""
    db = root / SESSIONS_DB
    sources = [p for p in [db, *(root / (SESSIONS_DB + s) for s in COMPANIONS)] if os.path.lexists(p)]
    events = root / EVENTS_DIR
    n = 0
    while True:
        tag = stamp if n == 0 else f"{stamp}-{n}"
        base = root / f"{SESSIONS_DB}.pure-{tag}.bak"
        plan = [(p, Path(str(base) + p.name[len(SESSIONS_DB):])) for p in sources]
        if os.path.lexists(events):
            plan.append((events, root / f"{EVENTS_DIR}.pure-{tag}.bak"))
        if not any(os.path.lexists(to) for _, to in plan):
            return plan
        n += 1


def left_behind(root: Path, moving: list[Path]) -> list[LeftBehind]:
    out = []
    names = {p.name for p in moving} | {SESSIONS_DB, *(SESSIONS_DB + s for s in COMPANIONS), EVENTS_DIR}
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name in names:
            continue
        path = Path(entry.path)
        out.append(LeftBehind(entry.name, entry.is_dir(follow_symlinks=False), tree_bytes(path)))
    return out


class ResetDatabase:
    """Move the database and the event store aside and start a fresh database (see the module docstring)."""

    id = "reset-db"
    title = "Reset the database"

    def __init__(self, sd: SessionDir, *, now: datetime | None = None) -> None:
        self.sd = sd
        self.now = now
        self._last: RepairPreview | None = None

    def _refusal(self, leases: list[LeaseSnapshot]) -> str:
        if self.sd.db_path != self.sd.root / SESSIONS_DB:
            return f"a reset works on a session directory's {SESSIONS_DB}, not on {one_line(str(self.sd.db_path))}."
        if leases:
            held = "; ".join(f"session {one_line(x.session_id)} {x.describe()}" for x in leases[:5])
            more = f" (and {len(leases) - 5} more)" if len(leases) > 5 else ""
            return (f"{plural(len(leases), 'lease')} still marked active: {held}{more}. A reset is refused while any "
                    "process may be running here; release expired leases first (release-lease).")
        return ""

    def _facts(self) -> tuple[list[LeaseSnapshot], list[tuple[Path, Path]], list[LeftBehind], str]:
        leases = active_runtime_leases(self.sd)
        moves = _moves(self.sd.root, _stamp(self.now))
        behind = left_behind(self.sd.root, [to for _, to in moves])
        # companions come and go with the connections (the last close removes -wal and -shm): not a fact here
        fp = fingerprint([[x.session_id, x.epoch, x.state] for x in leases],
                         [f.name for f, _ in moves if f.name in (SESSIONS_DB, EVENTS_DIR)], [b.name for b in behind])
        return leases, moves, behind, fp

    def preview(self) -> RepairPreview:
        leases, moves, behind, fp = self._facts()
        refusal = self._refusal(leases)
        changes = [PlannedChange("file", f.name, to.name, "rename",
                                 f"{'folder' if f.is_dir() else 'file'} of {human_bytes(tree_bytes(f))} moved aside "
                                 "(never deleted)") for f, to in moves]
        changes.append(PlannedChange("file", SESSIONS_DB, "(new)", "create", "a fresh v43 database, migrations recorded"))
        notes = [f"left behind: {one_line(b.name)}{'/' if b.directory else ''} ({human_bytes(b.bytes)})" for b in behind]
        preview = RepairPreview(self.id, self.title, "", f"session directory {one_line(str(self.sd.root))}",
                                tuple(changes), tuple(notes), refusal, fp, fp)
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        self.sd.require_writable()
        expected = expected or self._last or self.preview()
        leases, moves, behind, fp = self._facts()
        refusal = self._refusal(leases)
        if refusal:
            raise RepairRefused(f"Refused: {refusal}")
        if expected.refusal or fp != expected.fingerprint:
            raise RepairRefused("Refused: the session directory changed since the preview; preview it again.")
        step("reset.close")
        from store.mothx.sessions import release

        release(self.sd)  # the session list's cache connection has the old file attached: closed first
        self.sd.db.close()
        moves = _moves(self.sd.root, _stamp(self.now))  # after the close: the files as they are now
        done: list[tuple[Path, Path]] = []
        try:
            for src, dst in moves:
                step(f"reset.rename.{src.name}")
                os.rename(src, dst)
                done.append((src, dst))
            step("reset.create")
            db = open_database(self.sd.root / SESSIONS_DB, OpenMode.READ_WRITE, create=True)
        except BaseException:
            for src, dst in reversed(done):
                try:
                    os.rename(dst, src)
                except OSError:
                    pass
            self.sd.db = open_database(self.sd.root / SESSIONS_DB, OpenMode.READ_WRITE)
            raise
        with db.write() as conn:
            if inspect_schema(conn).status == "empty":
                create_v43(conn)
            self.sd.schema = inspect_schema(conn)
        self.sd.db = db
        forget_caches()
        changes = tuple(PlannedChange("file", f.name, t.name, "rename", "moved aside") for f, t in moves) + (
            PlannedChange("file", SESSIONS_DB, "(new)", "create", "a fresh v43 database"),)
        moved = ", ".join(f"{one_line(f.name)} → {one_line(t.name)}" for f, t in moves) or "nothing"
        stayed = ", ".join(one_line(b.name) for b in behind) or "nothing"
        return RepairResult(self.id, "", expected.target, changes,
                            f"Reset the database: moved {moved}; created a fresh {SESSIONS_DB}; left behind {stayed}.")
