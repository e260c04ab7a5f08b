"""File watching of a session directory, and a cheap probe of what changed in ``sessions.db``.

Writers that do not announce themselves on the lease bus still change ``sessions.db`` and its ``-wal``.
:class:`SessionDirWatcher` watches those files (with ``watchfiles.watch``, its public API: inotify on Linux,
nothing is ever written in the directory) in a daemon thread and calls ``on_change(WatchHint)`` once per burst of
changes. The same machinery is open to other modules: :class:`FileFollower` follows some files of one folder and
:func:`follow_file` one file (``follow_file(path, on_change, stop_event)``).

A hint says only *that* something changed. :func:`change_probe` then tells *what* changed since its previous
call on the same open directory — ``PRAGMA data_version``, the highest ``entries.seq`` and
``session_run_events.seq``, the lease rows' ``updated_at`` and the active runs — so a screen re-reads only the
affected sessions. The probe only reads.

A ``-shm`` file appearing means a writer opened the database. A read-only directory opened ``immutable``
(or as a private copy) while the database was quiet cannot see that writer's commits; :func:`needs_reopen`
says when the application should reopen it read-only again, which then picks the live ``mode=ro`` connection.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.mothx.db import OpenMode
from store.mothx.schema import RUN_ACTIVE_STATUSES
from store.paths import SESSIONS_DB
from store.safetext import one_line

if TYPE_CHECKING:
    import sqlite3

    from store.mothx.sessiondir import SessionDir

DEBOUNCE_MS = 100
STEP_MS = 20
READY_PROBE_MS = 100   # watchfiles' rust_timeout: the first empty yield after it says the watch is in place
START_TIMEOUT_S = 5.0
JOIN_TIMEOUT_S = 1.0
WATCHED_NAMES = (SESSIONS_DB, SESSIONS_DB + "-wal", SESSIONS_DB + "-shm", SESSIONS_DB + "-journal")
STALE_ACCESS = ("immutable", "private copy")

# watchfiles.Change values
_ADDED, _MODIFIED, _DELETED = 1, 2, 3
_CHANGE_NAMES = {_ADDED: "added", _MODIFIED: "modified", _DELETED: "deleted"}


@dataclass(frozen=True)
class WatchHint:
    """One coalesced burst of file changes in a session directory (a hint: re-read, then refresh)."""

    db: bool            # sessions.db itself changed (checkpoint, rollback-journal commit, replaced file)
    wal: bool           # sessions.db-wal changed (a WAL commit)
    shm_created: bool   # sessions.db-shm appeared: a writer opened the database
    shm_deleted: bool   # sessions.db-shm went away: the last connection closed
    journal: bool       # a rollback journal came or went
    changes: tuple[tuple[str, str], ...]  # (added | modified | deleted, file name), sorted
    at: float           # wall time the burst was delivered

    @property
    def writer_started(self) -> bool:
        return self.shm_created

    @property
    def writer_stopped(self) -> bool:
        return self.shm_deleted

    @property
    def content_changed(self) -> bool:
        return self.db or self.wal or self.journal


WatchCallback = Callable[[WatchHint], None]


def hint_from_changes(raw: set[tuple[int, str]], at: float | None = None) -> WatchHint | None:
    """Turn a watchfiles change set into a hint, ignoring every file but sessions.db and its companions."""
    picked: set[tuple[str, str]] = set()
    db = wal = shm_created = shm_deleted = journal = False
    for change, path in raw:
        name = Path(path).name
        if name not in WATCHED_NAMES:
            continue
        kind = _CHANGE_NAMES.get(int(change), "modified")
        picked.add((kind, name))
        if name == SESSIONS_DB:
            db = True
        elif name.endswith("-wal"):
            wal = True
        elif name.endswith("-shm"):
            shm_created |= kind == "added"
            shm_deleted |= kind == "deleted"
        else:
            journal = True
    if not picked:
        return None
    return WatchHint(db=db, wal=wal, shm_created=shm_created, shm_deleted=shm_deleted, journal=journal,
                     changes=tuple(sorted(picked)), at=time.time() if at is None else at)


@dataclass(frozen=True)
class WatcherStats:
    available: bool
    status: str
    bursts: int          # change sets received from the file watcher
    hints: int           # hints delivered (bursts touching the watched files)
    callback_errors: int
    last_change_at: float | None


# ---------------------------------------------------------------------------------------------------------------
# Following files (watchfiles' public API)

FileChanges = set[tuple[int, str]]
"""What one burst holds: ``(watchfiles.Change, path)`` pairs (``Change`` is an ``IntEnum``: 1 added, 2 modified,
3 deleted)."""


class _EitherEvent:
    """``is_set()`` of two events: watchfiles stops when the follower's own event or the caller's one is set."""

    def __init__(self, own: threading.Event, other: threading.Event | None) -> None:
        self.own = own
        self.other = other

    def is_set(self) -> bool:
        return self.own.is_set() or (self.other is not None and self.other.is_set())


class FileFollower:
    """Calls ``on_change(changes)`` once per burst of changes of some files of one folder, in a daemon thread.

    Built on ``watchfiles.watch`` (inotify on Linux; nothing is ever written in the folder), not recursive, only
    the ``names`` given (every file of the folder when ``names`` is None). A burst is delivered when no new change
    came for ``step_ms``, and at the latest ``debounce_ms`` after its first change; changes that happen while
    ``on_change`` runs are delivered in the next call. A failing ``on_change`` is counted, never fatal.

    :meth:`start` returns once the folder is being watched (changes made after it returns are seen), or False
    with :attr:`status` saying why not; it never raises. Watching ends on :meth:`stop` (which joins the thread
    for at most :data:`JOIN_TIMEOUT_S`) or when ``stop_event`` is set.
    """

    def __init__(self, folder: str | Path, names: Collection[str] | None, on_change: Callable[[FileChanges], None],
                 *, stop_event: threading.Event | None = None, debounce_ms: int = DEBOUNCE_MS,
                 step_ms: int = STEP_MS, force_polling: bool | None = None, name: str = "file-follow") -> None:
        self.folder = Path(folder)
        self.names = frozenset(names) if names is not None else None
        self.on_change = on_change
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.force_polling = force_polling
        self.name = name
        self.available = False
        self.status = "file watching not started"
        self.bursts = 0
        self.callback_errors = 0
        self._own_stop = threading.Event()
        self._stop = _EitherEvent(self._own_stop, stop_event)
        self._ready = threading.Event()
        self._error = ""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> bool:
        with self._lock:
            if self._closed or self._stop.is_set():
                self.status = "file watching unavailable: the watcher was stopped"
                return False
            if self._thread is not None:
                return self.available
            if not self.folder.is_dir():
                self.status = f"file watching unavailable: {one_line(self.folder)} is not a folder"
                return False
            thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread = thread
            thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            self.status = "file watching unavailable: the watcher did not start"
            self.stop()
            return False
        if self._error:
            self.status = f"file watching unavailable: {self._error}"
            return False
        self.available = True
        self.status = f"watching {one_line(self.folder)}"
        return True

    def stop(self) -> None:
        """Stop watching and wait (at most a second) for the thread. Safe to call more than once."""
        with self._lock:
            self._closed = True
            self._own_stop.set()
            thread = self._thread
            was = self.available
            self.available = False
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_TIMEOUT_S)
        if was:
            self.status = "file watching stopped"

    def _keep(self, change: object, path: str) -> bool:
        return self.names is None or os.path.basename(path) in self.names

    def _run(self) -> None:
        try:
            import watchfiles

            # yield_on_timeout: the first (empty) yield says the watch is in place; later ones are ignored
            changes_iter = watchfiles.watch(
                self.folder, watch_filter=self._keep, debounce=self.debounce_ms, step=self.step_ms,
                stop_event=self._stop, rust_timeout=READY_PROBE_MS, yield_on_timeout=True, raise_interrupt=False,
                force_polling=self.force_polling, recursive=False)
            for changes in changes_iter:
                self._ready.set()
                if not changes:
                    continue
                self.bursts += 1
                try:
                    self.on_change({(int(kind), path) for kind, path in changes})
                except Exception:  # noqa: BLE001 - a consumer's bug must not stop watching
                    self.callback_errors += 1
        except Exception as exc:  # noqa: BLE001 - watching is optional; e.g. the folder was removed
            self._error = one_line(exc) or type(exc).__name__
            if self._ready.is_set():
                self.available = False
                self.status = f"file watching stopped: {self._error}"
        finally:
            self._ready.set()


def follow_file(path: str | Path, on_change: Callable[[frozenset[str]], None],
                stop_event: threading.Event | None = None, *, debounce_ms: int = DEBOUNCE_MS,
                step_ms: int = STEP_MS) -> FileFollower:
    """Follow one file: ``on_change(kinds)`` after each burst of its changes, ``kinds`` ⊆ {added, modified,
    deleted}.

    The file need not exist yet (its folder must): creating, replacing (``os.replace`` onto it) and deleting it
    are seen. Returns the started :class:`FileFollower` (check ``.available`` / ``.status``); stop it with
    ``.stop()`` or by setting ``stop_event``. The callback runs on the follower's daemon thread::

        follower = follow_file(sd.root / "sessions.db-wal", lambda kinds: app.call_from_thread(refresh))
        ...
        follower.stop()
    """
    target = Path(path)

    def deliver(changes: FileChanges) -> None:
        on_change(frozenset(_CHANGE_NAMES.get(kind, "modified") for kind, _ in changes))

    follower = FileFollower(target.parent, (target.name,), deliver, stop_event=stop_event,
                            debounce_ms=debounce_ms, step_ms=step_ms, name=f"follow-{target.name}")
    follower.start()
    return follower


# ---------------------------------------------------------------------------------------------------------------
# The session directory watcher


class SessionDirWatcher:
    """Watches ``sessions.db``, ``-wal``, ``-shm`` and ``-journal`` in one directory (not recursively).

    A :class:`FileFollower` on those four names: changes are grouped (a burst is delivered when no new change came
    for ``step_ms``, and at the latest ``debounce_ms`` after its first change; changes that happen while
    ``on_change`` runs are delivered in the next call) and turned into one :class:`WatchHint` per burst.
    ``start()`` never raises: it returns False with :attr:`status` explaining why. The thread is a daemon;
    ``stop()`` joins it for at most a second.
    """

    def __init__(self, root: str | Path, on_change: WatchCallback | None = None, *,
                 debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS, force_polling: bool | None = None) -> None:
        self.root = Path(root)
        self.on_change = on_change
        self._follower = FileFollower(self.root, WATCHED_NAMES, self._burst, debounce_ms=debounce_ms,
                                      step_ms=step_ms, force_polling=force_polling, name="sessions-db-watch")
        self._hints = 0
        self._callback_errors = 0
        self._last_change_at: float | None = None

    @property
    def available(self) -> bool:
        return self._follower.available

    @property
    def status(self) -> str:
        return self._follower.status

    @property
    def thread(self) -> threading.Thread | None:
        """The watching thread (a daemon), once started."""
        return self._follower.thread

    def start(self) -> bool:
        """Begin watching (changes made after this returns are seen). False when watching is impossible."""
        return self._follower.start()

    def stop(self) -> None:
        """Stop watching and wait (at most a second) for the thread. Safe to call more than once."""
        self._follower.stop()

    close = stop

    def __enter__(self) -> SessionDirWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _burst(self, raw: FileChanges) -> None:
        hint = hint_from_changes(raw)
        if hint is None:
            return
        self._hints += 1
        self._last_change_at = hint.at
        callback = self.on_change
        if callback is None:
            return
        try:
            callback(hint)
        except Exception:  # noqa: BLE001 - a consumer's bug must not stop watching
            self._callback_errors += 1

    def stats(self) -> WatcherStats:
        f = self._follower
        return WatcherStats(available=f.available, status=f.status, bursts=f.bursts, hints=self._hints,
                            callback_errors=self._callback_errors + f.callback_errors,
                            last_change_at=self._last_change_at)


def needs_reopen(sd: SessionDir) -> bool:
    """True when a read-only directory's connection cannot see a live writer and should be reopened.

    That is the case for an ``immutable`` connection or a private copy once a live writer's ``sessions.db-wal``
    and ``-shm`` both exist (and no rollback journal): reopening read-only then gives the live ``mode=ro``
    connection. A ``-shm`` left alone is read directly and needs nothing. The connection's own mode decides: a
    directory shown read-only because of its schema holds a read-only connection too. Snapshots never reopen.
    """
    if sd.db.mode is not OpenMode.READ_ONLY or sd.db.access not in STALE_ACCESS:
        return False
    db_file = sd.db_path
    wal, shm, journal = (db_file.with_name(db_file.name + suffix) for suffix in ("-wal", "-shm", "-journal"))
    return wal.exists() and shm.exists() and not journal.exists()


# ---------------------------------------------------------------------------------------------------------------
# Change probe


@dataclass(frozen=True)
class ChangeSet:
    """What changed in ``sessions.db`` since the previous probe of the same open directory."""

    first: bool                   # the first probe: a baseline, nothing to compare with
    data_version: int
    foreign_commit: bool          # another connection committed (PRAGMA data_version moved)
    own_commit: bool              # this process's connection changed rows (its total_changes moved)
    entry_sessions: frozenset[str] = frozenset()
    run_event_sessions: frozenset[str] = frozenset()
    run_sessions: frozenset[str] = frozenset()     # active runs created, changed, or no longer active
    lease_sessions: frozenset[str] = frozenset()
    membership_changed: bool = False              # sessions were added or removed
    unexplained: bool = False     # something committed that the tracked tables do not explain: refresh all shown
    reopen_needed: bool = False   # see needs_reopen(): the connection cannot see the writer
    max_entry_seq: int = 0
    max_run_event_seq: int = 0
    max_lease_updated_at: int = 0
    session_count: int = 0

    @property
    def sessions(self) -> frozenset[str]:
        """Every session with a change the probe could attribute."""
        return self.entry_sessions | self.run_event_sessions | self.run_sessions | self.lease_sessions

    @property
    def changed(self) -> bool:
        return bool(self.sessions) or self.membership_changed or self.unexplained or self.reopen_needed


LeaseSig = tuple[str, int, str, int, int, str, str]
RunSig = tuple[str, str, str]


@dataclass
class _ProbeState:
    data_version: int = -1
    total_changes: int = -1
    max_entry_seq: int = 0
    max_run_event_seq: int = 0
    max_lease_updated_at: int = 0
    lease_edge: dict[str, LeaseSig] = field(default_factory=dict)  # rows at max_lease_updated_at
    active_runs: dict[str, RunSig] = field(default_factory=dict)   # run id -> (session, status, updated_at)
    session_count: int = 0


class ChangeProbe:
    """Stateful probe of one open directory (see :func:`change_probe`). Read-only; thread-safe."""

    def __init__(self, sd: SessionDir) -> None:
        self.sd = sd
        self._state: _ProbeState | None = None
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget the baseline (the next probe is a ``first`` one), e.g. after the directory was reopened."""
        with self._lock:
            self._state = None

    def probe(self) -> ChangeSet:
        with self._lock:
            sd = self.sd
            reopen = needs_reopen(sd)
            prev = self._state
            if reopen and prev is not None:
                return ChangeSet(first=False, data_version=prev.data_version, foreign_commit=False,
                                 own_commit=False, reopen_needed=True, max_entry_seq=prev.max_entry_seq,
                                 max_run_event_seq=prev.max_run_event_seq,
                                 max_lease_updated_at=prev.max_lease_updated_at, session_count=prev.session_count)
            try:
                with sd.db.read() as conn:
                    version = int(conn.execute("PRAGMA data_version").fetchone()[0])
                    total = int(conn.total_changes)
                    if prev is not None and version == prev.data_version and total == prev.total_changes:
                        return ChangeSet(first=False, data_version=version, foreign_commit=False, own_commit=False,
                                         reopen_needed=reopen, max_entry_seq=prev.max_entry_seq,
                                         max_run_event_seq=prev.max_run_event_seq,
                                         max_lease_updated_at=prev.max_lease_updated_at,
                                         session_count=prev.session_count)
                    state, found = self._read(conn, prev)
            except StoreError:
                return ChangeSet(first=prev is None, data_version=-1, foreign_commit=False, own_commit=False,
                                 unexplained=True, reopen_needed=reopen)
            state.data_version = version
            state.total_changes = total
            self._state = state
            if prev is None:
                return ChangeSet(first=True, data_version=version, foreign_commit=False, own_commit=False,
                                 reopen_needed=reopen, max_entry_seq=state.max_entry_seq,
                                 max_run_event_seq=state.max_run_event_seq,
                                 max_lease_updated_at=state.max_lease_updated_at, session_count=state.session_count)
            entries, events, runs, leases, unexplained = found
            membership = state.session_count != prev.session_count
            attributed = bool(entries or events or runs or leases or membership)
            return ChangeSet(
                first=False, data_version=version, foreign_commit=version != prev.data_version,
                own_commit=total != prev.total_changes, entry_sessions=entries, run_event_sessions=events,
                run_sessions=runs, lease_sessions=leases, membership_changed=membership,
                unexplained=unexplained or not attributed, reopen_needed=reopen,
                max_entry_seq=state.max_entry_seq, max_run_event_seq=state.max_run_event_seq,
                max_lease_updated_at=state.max_lease_updated_at, session_count=state.session_count,
            )

    def _read(self, conn: sqlite3.Connection, prev: _ProbeState | None) -> tuple[
            _ProbeState, tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str], bool]]:
        schema = self.sd.schema
        state = _ProbeState()
        unexplained = False
        entries: frozenset[str] = frozenset()
        events: frozenset[str] = frozenset()
        runs: frozenset[str] = frozenset()
        leases: frozenset[str] = frozenset()
        if schema.has("sessions"):
            state.session_count = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
        if schema.has("entries", "seq"):
            state.max_entry_seq, entries, lowered = _seq_changes(conn, "entries", prev.max_entry_seq if prev else None)
            unexplained |= lowered
        if schema.has("session_run_events", "seq"):
            state.max_run_event_seq, events, lowered = _seq_changes(
                conn, "session_run_events", prev.max_run_event_seq if prev else None)
            unexplained |= lowered
        if schema.has("session_runtime_leases", "updated_at"):
            leases = self._lease_changes(conn, prev, state)
        if schema.has("session_runs", "status"):
            runs = self._run_changes(conn, prev, state)
        return state, (entries, events, runs, leases, unexplained)

    @staticmethod
    def _lease_changes(conn: sqlite3.Connection, prev: _ProbeState | None, state: _ProbeState) -> frozenset[str]:
        row = conn.execute("SELECT max(updated_at) FROM session_runtime_leases").fetchone()
        top = int(row[0]) if row and row[0] is not None else 0
        state.max_lease_updated_at = top
        since = prev.max_lease_updated_at if prev is not None else top
        changed: set[str] = set()
        rows = conn.execute(
            "SELECT session_id, updated_at, owner_instance_id, epoch, state, expires_at, purpose, run_id "
            "FROM session_runtime_leases WHERE updated_at >= ?", (min(since, top),)).fetchall()
        for sid, updated, owner, epoch, lstate, expires, purpose, run_id in rows:
            sig: LeaseSig = (str(owner), int(epoch), str(lstate), int(expires), int(updated), str(purpose), str(run_id))
            if int(updated) == top:
                state.lease_edge[str(sid)] = sig
            if prev is None:
                continue
            if int(updated) > prev.max_lease_updated_at or prev.lease_edge.get(str(sid)) != sig:
                changed.add(str(sid))
        if prev is not None:
            # a row that was at the old edge and is gone (session deleted) also changed
            present = {str(r[0]) for r in rows}
            changed.update(sid for sid in prev.lease_edge if sid not in present)
        return frozenset(changed)

    @staticmethod
    def _run_changes(conn: sqlite3.Connection, prev: _ProbeState | None, state: _ProbeState) -> frozenset[str]:
        marks = ", ".join("?" for _ in RUN_ACTIVE_STATUSES)
        for rid, sid, status, updated in conn.execute(
                f"SELECT id, session_id, status, updated_at FROM session_runs WHERE status IN ({marks})",
                RUN_ACTIVE_STATUSES):
            state.active_runs[str(rid)] = (str(sid), str(status), str(updated))
        if prev is None:
            return frozenset()
        changed = {sig[0] for rid, sig in state.active_runs.items() if prev.active_runs.get(rid) != sig}
        changed.update(sig[0] for rid, sig in prev.active_runs.items() if rid not in state.active_runs)
        return frozenset(changed)


def _seq_changes(conn: sqlite3.Connection, table: str, since: int | None) -> tuple[int, frozenset[str], bool]:
    """(max seq, sessions with rows after ``since``, whether max went down)."""
    row = conn.execute(f"SELECT max(seq) FROM {table}").fetchone()
    top = int(row[0]) if row and row[0] is not None else 0
    if since is None or top == since:
        return top, frozenset(), False
    if top < since:
        return top, frozenset(), True
    sessions = frozenset(str(r[0]) for r in conn.execute(
        f"SELECT DISTINCT session_id FROM {table} WHERE seq > ? AND session_id IS NOT NULL", (since,)))
    return top, sessions, False


_probes: dict[int, ChangeProbe] = {}
_probes_lock = threading.Lock()


def change_probe(sd: SessionDir) -> ChangeSet:
    """What changed in ``sd``'s database since the previous ``change_probe(sd)`` (the first call is a baseline).

    Cheap when nothing changed (one ``PRAGMA data_version``). Never writes.
    """
    key = id(sd)
    with _probes_lock:
        probe = _probes.get(key)
        if probe is None or probe.sd is not sd:
            probe = ChangeProbe(sd)
            _probes[key] = probe
            sd.on_close(lambda: _forget_probe(key, probe))
    return probe.probe()


def _forget_probe(key: int, probe: ChangeProbe) -> None:
    with _probes_lock:
        if _probes.get(key) is probe:
            del _probes[key]


__all__ = [
    "ChangeProbe", "ChangeSet", "SessionDirWatcher", "WatchHint", "WatcherStats", "change_probe",
    "hint_from_changes", "needs_reopen",
]
