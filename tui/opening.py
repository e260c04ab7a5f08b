"""Opening a session directory, off the UI thread: :func:`open_and_read` (the store and the first window of the
list, or one sentence of error, as :class:`Opened`), the provisional first open's messages and status line
(:class:`ListBuilt`, :data:`LIST_BUILDING`), the deferred deletion check's (:class:`ListVerified`), and the
integrity check on a connection of its own (:func:`quick_check_aside`, :func:`integrity_line`).
:class:`tui.app.SessionscopeApp` runs them in its workers; nothing here imports it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from store.mothx.db import OpenMode
from store.words import cut
from tui.formatting import describe_error
from tui.lifecycle import Interrupts

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionPage


def quick_check_aside(sd: SessionDir, interrupts: Interrupts | None = None) -> str:
    """``quick_check`` on a read connection of its own, so the list can still read while it runs (it takes
    about a second per 500 MB and ``sd.db`` serialises its users). Where a second connection would need a
    private copy of the files (``sd.db`` already reads one), the check runs on ``sd.db`` itself. The aside
    connection is in ``interrupts`` while the check runs (a quit stops it).

    A passed check is remembered against the database file's identity (:mod:`store.mothx.checkcache`): an
    open of an unchanged file answers ``ok`` without reading it again."""
    from store.mothx import checkcache

    if sd.db.private_copy is not None:
        return sd.db.quick_check()  # a snapshot's copy is new each time: nothing to remember it by
    before = checkcache.identity(sd.db.path)
    if checkcache.recall("quick_check", sd.db.path, before) == "ok":
        return "ok"
    result = _quick_check_now(sd, interrupts)
    if result.strip().lower() == "ok":
        checkcache.remember("quick_check", sd.db.path, before, "ok")
    return result


def _quick_check_now(sd: SessionDir, interrupts: Interrupts | None) -> str:
    from store.mothx.db import open_database

    mode = OpenMode.READ_ONLY if sd.mode is OpenMode.READ_WRITE else sd.mode
    try:
        aside = open_database(sd.db.path, mode)
    except Exception:  # noqa: BLE001 - fall back to the shared connection
        return sd.db.quick_check()
    if interrupts is not None:
        interrupts.add(aside.conn)
    try:
        return aside.quick_check()
    finally:
        if interrupts is not None:
            interrupts.discard(aside.conn)
        aside.close()


INTEGRITY_PROBLEM_CHARS = 48
"""The first problem of a failed check is cut to this many characters in the status line (the full report is in
the notification)."""


def integrity_line(report: str) -> str:
    """One status-line text for a failed ``quick_check``: the first problem and how many more there are."""
    problems = [
        line.strip()
        for part in report.split(";")
        for line in part.splitlines()
        if line.strip() and not line.strip().startswith("***")
    ]
    if not problems:
        return "integrity FAILED"
    more = f" (+{len(problems) - 1:,} more)" if len(problems) > 1 else ""
    first = cut(problems[0], INTEGRITY_PROBLEM_CHARS)  # at a word boundary
    return f"integrity FAILED: {first}{more}"


@dataclass
class Opened:
    """What opening a session directory gave: the store and the first window of the default list, or an error."""

    sd: SessionDir | None = None
    first_page: SessionPage | None = None
    error: str = ""
    provisional: bool = False
    """``first_page`` is provisional (no list cache yet: newest sessions by creation, no counts); the caller
    builds the cache in the background."""
    first_read: object | None = None
    """The first page of another first screen than Sessions (``reader``'s result)."""


def open_and_read(
    path: Path, mode: OpenMode, *, prefetch: bool = True, interrupts: Interrupts | None = None,
    reader: Callable[[SessionDir], object | None] | None = None,
) -> Opened:
    """Open ``path`` in ``mode`` and (``prefetch``) read the first window of the default session list, or, with
    ``reader`` (the first screen is another section's), what ``reader`` reads instead.

    The store's connection is in ``interrupts`` from the moment it is open (the first read may build the list
    cache, which a quit must be able to stop). Never raises: a failure is returned as one sentence (a
    StoreError's own, or the type of a bug)."""
    from store.mothx.sessiondir import open_session_dir

    try:
        sd = open_session_dir(path, mode)
    except OSError as exc:
        return Opened(error=f"{path} cannot be read: {exc.strerror or exc}.")
    except Exception as exc:  # noqa: BLE001 - StoreError (or a bug) becomes one line on an error screen
        return Opened(error=describe_error(exc))
    if interrupts is not None:
        interrupts.add(sd.db.conn)
    first_page = None
    if prefetch and reader is not None:
        return Opened(sd=sd, first_read=reader(sd))
    if prefetch:
        try:
            from store.mothx.provisional import list_cache_missing, provisional_page
            from store.mothx.sessions import defer_deletion_check, list_sessions
            from tui.widgets.session_list import WINDOW, default_query

            if list_cache_missing(sd):  # a first open: draw before the cache is built (SessionscopeApp._build_list)
                return Opened(sd=sd, first_page=provisional_page(sd, WINDOW), provisional=True)
            query = default_query()
            defer_deletion_check(sd)  # checked after the first paint (SessionscopeApp.start_integrity_check)
            first_page = list_sessions(sd, query.flt, query.sort, query.descending, offset=0, limit=WINDOW)
        except Exception:  # noqa: BLE001 - the list reads (and reports) it again itself
            first_page = None
    return Opened(sd=sd, first_page=first_page)


class ListVerified(Message):
    """The list cache's deferred deletion check repaired it: what the lists show may have changed."""

    def __init__(self, sd: SessionDir) -> None:
        super().__init__()
        self.sd = sd


class ListBuilt(Message):
    """The list cache of a first open was built (``error`` when it failed): the provisional rows can go."""

    def __init__(self, sd: SessionDir, error: str = "") -> None:
        super().__init__()
        self.sd = sd
        self.error = error


LIST_BUILDING = "building the session list… (rows provisional: newest by creation, no counts yet)"
"""The status line while the first open of a directory builds its list cache."""
