"""Session management from the Sessions screen: delete, pin / unpin, project, rename — each a fenced, previewed
repair of :mod:`store.mothx.session_admin`, on the same path as every repair of the app.

The targets are the sessions marked with ``space`` (:attr:`SessionList.marked`), or the session under the cursor
when none is marked. Marked sessions the current filter hides are **not** included, and the dialog says how many
there are. Path: the preview in a worker → a refusal is one notification naming the reason → otherwise a
:class:`~tui.widgets.confirm.ConfirmDialog` (Cancel focused; ``y`` confirms; deleting more than one session also
asks for a typed phrase) → ``apply()`` in a worker → a notification; the list is read again and the marks of the
changed sessions are dropped. Rename and project first ask for the text (:class:`~tui.widgets.text_prompt.
TextPrompt`); rename works on one session. The path itself is :class:`tui.repair_flow.RepairFlow`'s (the Sessions
screen has it, with :data:`WORDS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from store.errors import StoreError
from tui.repair_flow import FlowWords, Outcome, key_for
from tui.safe import notify

SessionsScreen = Any
"""The Sessions screen (not imported: it imports this module; it has ``sd``, ``current_query()``,
``action_refresh()``, :class:`~tui.repair_flow.RepairFlow` and a :class:`SessionList`)."""

if TYPE_CHECKING:
    from store.mothx.repair_kit import Repair, RepairPreview, RepairResult
    from store.mothx.sessiondir import SessionDir
    from tui.widgets.confirm import ConfirmRequest
    from tui.widgets.session_list import SessionList

WORDS = FlowWords(done="Changed", refused="Not changed", failed="Not changed", cannot_confirm="Not changed",
                  confirm_timeout=12, busy="A change is already being prepared or applied.",
                  preview_work="Preview a session change", apply_work="Apply a session change")
"""The words of the Sessions screen's writes."""

LABELS = {"delete": "Delete", "pin": "Pin", "unpin": "Unpin", "project": "Assign", "rename": "Rename"}
ACTIONS = {"delete": "delete_sessions", "pin": "toggle_pin", "unpin": "toggle_pin", "project": "set_project",
           "rename": "rename_session"}


class FilterHidesAll(StoreError):
    """Every target is hidden by the filter: nothing is previewed."""


@dataclass(frozen=True)
class Job:
    kind: str  # "delete" | "pin" | "unpin" | "project" | "rename"
    ids: tuple[str, ...]  # the targets, before the filter check
    text: str = ""  # the project name or the new title
    opened_by: str = ""


def _list(screen: SessionsScreen) -> SessionList:
    from tui.widgets.session_list import SessionList

    return screen.query_one(SessionList)


def targets(screen: SessionsScreen) -> tuple[str, ...]:
    """The marked sessions (in marking order), or the session under the cursor."""
    lst = _list(screen)
    if lst.marked:
        return tuple(lst.marked)
    row = lst.selected
    return (row.id,) if row is not None else ()


def begin(screen: SessionsScreen, kind: str) -> None:
    """The key of ``kind`` was pressed on the Sessions screen."""
    sd = screen.sd
    ids = targets(screen)
    if sd is None:
        notify(screen, "No session directory is open.", severity="warning")
        return
    if not ids:
        notify(screen, "No session is selected.", severity="warning")
        return
    if screen.refuse_when_busy():
        return
    action_id = {"delete": "sessions.delete", "pin": "sessions.pin", "project": "sessions.project",
                 "rename": "sessions.rename"}[kind]
    opened_by = key_for(screen, action_id)
    if kind == "rename":
        if len(ids) != 1:
            notify(screen, f"Rename works on one session; {len(ids)} are marked (space unmarks).", severity="warning")
            return
        row = _list(screen).row_of(ids[0])
        current = row.title if row is not None else ""
        _prompt(screen, "Rename a session", f"New title for session {ids[0]}:", current, False,
                lambda text: _start(screen, Job("rename", ids, text, opened_by)))
        return
    if kind == "project":
        _prompt(screen, "Assign a project", f"Project name for {_count(len(ids))} (empty: no project):", "", True,
                lambda text: _start(screen, Job("project", ids, text, opened_by)))
        return
    if kind == "pin":
        rows = [_list(screen).row_of(i) for i in ids]
        pinned = all(r is not None and r.pinned for r in rows)
        _start(screen, Job("unpin" if pinned else "pin", ids, "", opened_by))
        return
    _start(screen, Job("delete", ids, "", opened_by))


def _count(n: int) -> str:
    return "1 session" if n == 1 else f"{n:,} sessions"


def _prompt(screen: SessionsScreen, title: str, label: str, value: str, allow_empty: bool,
            then: Callable[[str], None]) -> None:
    from tui.widgets.text_prompt import TextPrompt

    def answered(text: str | None) -> None:
        if text is None:
            notify(screen, "Nothing was changed.", timeout=3)
            return
        then(text)

    screen.app.push_screen(TextPrompt(title, label, value, allow_empty=allow_empty), answered)


def make(sd: SessionDir, job: Job, ids: tuple[str, ...]) -> Repair:
    from store.mothx import session_admin as admin

    if job.kind == "delete":
        return admin.DeleteSessions(sd, ids)
    if job.kind in ("pin", "unpin"):
        return admin.SetPinned(sd, ids, job.kind == "pin")
    if job.kind == "project":
        return admin.SetProject(sd, ids, job.text)
    return admin.RenameSession(sd, ids[0], job.text)


@dataclass
class _Shown:
    """How many targets the filter shows and hides (counted in the preview's worker, read after it)."""

    count: int = 0
    hidden: int = 0


def _start(screen: SessionsScreen, job: Job) -> None:
    query = screen.current_query()
    shown = _Shown()

    def build(sd: SessionDir) -> Repair:
        from store.mothx.sessions import position_of

        ids = tuple(i for i in job.ids if position_of(sd, i, query.flt, query.sort, query.descending) is not None)
        shown.count, shown.hidden = len(ids), len(job.ids) - len(ids)
        if not ids:
            raise FilterHidesAll(f"The filter hides every marked session ({shown.hidden}); nothing was changed.")
        return make(sd, job, ids)

    def confirm(preview: RepairPreview) -> ConfirmRequest:
        from tui.widgets.confirm import ConfirmRequest

        count = shown.count
        return ConfirmRequest.of_preview(
            preview, affected=count, noun="session", hidden_by_filter=shown.hidden, confirm_label=LABELS[job.kind],
            opened_by=job.opened_by, phrase=f"delete {count} sessions" if job.kind == "delete" and count > 1 else "")

    def done(outcome: Outcome[RepairResult]) -> None:
        if outcome.result is None:
            return
        lst = _list(screen)
        for i in job.ids:
            lst.marked.pop(i, None)
        lst.refresh_cells()
        screen.action_refresh()  # what was written is shown only after reading it back

    screen.start_repair(ACTIONS[job.kind], build, confirm, done=done)


__all__ = ["WORDS", "FilterHidesAll", "Job", "begin", "targets", "make"]
