"""Typed messages that workers post back to the UI thread.

A worker never touches a widget: it calls the store and posts one of these. One ``@on`` handler applies it.
Messages that answer a request carry the ``generation`` of the request, so a handler can drop stale results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from textual.worker import Worker

    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionPage


@dataclass
class WorkerFailed(Message):
    """A worker ended with an exception it did not catch (``reason``: one safe sentence, from
    ``describe_error``). Posted to the node that started the worker; it bubbles up to the app, which notifies
    it. A node on the way may end its "…ing" state for it (and should let it bubble on)."""

    worker: Worker[object]
    reason: str

    @property
    def group(self) -> str:
        return self.worker.group


@dataclass
class StoreOpened(Message):
    """The session directory opened; ``first_page`` is the first window of the default session list, read in
    the same worker so the first screen has its rows as soon as it is composed (``None`` when not read)."""

    sd: SessionDir
    first_page: SessionPage | None = None
    first_read: object | None = None
    """The first page of another first screen (``sessionscope --section runs``), read by the same worker
    (:func:`tui.start.first_read`)."""


@dataclass
class StoreFailed(Message):
    """The session directory could not be opened; ``error`` is one sentence."""

    path: Path | None
    error: str


@dataclass
class DemoReady(Message):
    """The demo directory was built (or found up to date) at ``path``."""

    path: Path


@dataclass
class IntegrityChecked(Message):
    """``PRAGMA quick_check`` finished: ``ok`` and the one-line result."""

    ok: bool
    text: str


@dataclass
class UnfilteredCounted(Message):
    """The number of sessions with no filter (for "N of M (filtered)")."""

    total: int


@dataclass(frozen=True)
class FacetChoice:
    """One entry of the facet picker: show sessions whose ``field`` equals ``value``."""

    field: str  # "cwd" | "project_id" | "channel_type" (a SessionFilter field)
    value: str
    label: str
    count: int | None = None


@dataclass
class FacetsLoaded(Message):
    """The distinct work dirs, projects and channels, for the facet picker."""

    choices: list[FacetChoice]


@dataclass
class SessionResolved(Message):
    """'Open session…' found the session to open (``session_id``) or failed (``error``)."""

    session_id: str
    error: str = ""


@dataclass
class ExportFinished(Message):
    """A transcript export was written (``chars`` long), or failed with ``error``."""

    path: Path
    chars: int
    error: str = ""
    note: str = ""  # e.g. what redaction replaced
