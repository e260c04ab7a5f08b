"""Session management from the Sessions screen: delete, pin / unpin, project, rename — each a fenced, previewed
repair of :mod:`store.mothx.session_admin`, on the same path as every repair of the app.

The targets are the sessions marked with ``space`` (:attr:`SessionList.marked`), or the session under the cursor
when none is marked. Marked sessions the current filter hides are **not** included, and the dialog says how many
there are. Path: the preview in a worker → a refusal is one notification naming the reason → otherwise a
:class:`~tui.widgets.confirm.ConfirmDialog` (Cancel focused; ``y`` confirms; deleting more than one session also
asks for a typed phrase) → ``apply()`` in a worker → a notification; the list is read again and the marks of the
changed sessions are dropped. Rename and project first ask for the text (:class:`~tui.widgets.text_prompt.
TextPrompt`); rename works on one session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui import actions
from tui.formatting import describe_error, one_line
from tui.safe import notify

SessionsScreen = Any
"""The Sessions screen (not imported: it imports this module; it has ``sd``, ``current_query()``,
``action_refresh()``, ``_manage_busy`` and a :class:`SessionList`)."""

if TYPE_CHECKING:
    from store.mothx.repair_kit import Repair, RepairPreview
    from store.mothx.sessiondir import SessionDir
    from tui.widgets.session_list import SessionList


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


def key_for(screen: SessionsScreen, action_id: str) -> str:
    for key, active in screen.active_bindings.items():
        if active.binding.id == action_id:
            return key
    return actions.get(action_id).key.split(",")[0]


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
    if getattr(screen, "_manage_busy", False):
        notify(screen, "A change is already being prepared or applied.", severity="warning")
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
                lambda text: _start(screen, sd, Job("rename", ids, text, opened_by)))
        return
    if kind == "project":
        _prompt(screen, "Assign a project", f"Project name for {_count(len(ids))} (empty: no project):", "", True,
                lambda text: _start(screen, sd, Job("project", ids, text, opened_by)))
        return
    if kind == "pin":
        rows = [_list(screen).row_of(i) for i in ids]
        pinned = all(r is not None and r.pinned for r in rows)
        _start(screen, sd, Job("unpin" if pinned else "pin", ids, "", opened_by))
        return
    _start(screen, sd, Job("delete", ids, "", opened_by))


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


def _start(screen: SessionsScreen, sd: SessionDir, job: Job) -> None:
    screen._manage_busy = True
    query = screen.current_query()

    def work() -> None:
        from store.mothx.sessions import position_of

        try:
            shown = tuple(i for i in job.ids if position_of(sd, i, query.flt, query.sort, query.descending)
                          is not None)
            hidden = len(job.ids) - len(shown)
            if not shown:
                screen.app.call_from_thread(_done, screen, job, None,
                                            f"The filter hides every marked session ({hidden}); nothing was changed.")
                return
            repair = make(sd, job, shown)
            preview = repair.preview()
        except Exception as exc:  # noqa: BLE001 - one sentence, never a traceback
            screen.app.call_from_thread(_done, screen, job, None, describe_error(exc))
            return
        screen.app.call_from_thread(_confirm, screen, sd, job, repair, preview, len(shown), hidden)

    screen.run_worker(work, thread=True, exclusive=True, group="sessions-manage", exit_on_error=False,
                      description="Preview a session change")


def _confirm(screen: SessionsScreen, sd: SessionDir, job: Job, repair: Repair, preview: RepairPreview, count: int,
             hidden: int) -> None:
    if preview.refusal:
        _done(screen, job, None, f"Refused: {one_line(preview.refusal)}")
        return
    from tui.widgets.confirm import ConfirmDialog, ConfirmRequest

    labels = {"delete": "Delete", "pin": "Pin", "unpin": "Unpin", "project": "Assign", "rename": "Rename"}
    request = ConfirmRequest(
        title=one_line(preview.title),
        preview="\n".join(preview.lines()),
        affected=count,
        noun="session",
        hidden_by_filter=hidden,
        confirm_label=labels[job.kind],
        opened_by=job.opened_by,
        phrase=f"delete {count} sessions" if job.kind == "delete" and count > 1 else "",
    )

    def decided(confirmed: bool | None) -> None:
        if not confirmed:
            _done(screen, job, None, "")
            notify(screen, "Nothing was changed.", title=preview.title, timeout=3)
            return

        def apply() -> None:
            try:
                result = repair.apply(preview)
            except Exception as exc:  # noqa: BLE001 - a refusal or a failure, as one sentence
                text = describe_error(exc)
                screen.app.call_from_thread(_done, screen, job, None,
                                            text if text.startswith("Refused") else f"Refused: {text}")
                return
            screen.app.call_from_thread(_done, screen, job, result.message, "", preview.session_id)

        screen.run_worker(apply, thread=True, exclusive=True, group="sessions-manage", exit_on_error=False,
                          description="Apply a session change")

    try:
        dialog = ConfirmDialog(request)
    except ValueError as exc:  # the user mapped the action onto the confirm key
        _done(screen, job, None, str(exc))
        return
    screen.app.push_screen(dialog, decided)


def _done(screen: SessionsScreen, job: Job, message: str | None, error: str, _sid: str = "") -> None:
    screen._manage_busy = False
    screen.manage_last = (message, error)
    if message is not None:
        lst = _list(screen)
        for i in job.ids:
            lst.marked.pop(i, None)
        lst.refresh_cells()
        notify(screen, message, title="Changed", timeout=8)
        screen.action_refresh()  # what was written is shown only after reading it back
    elif error:
        notify(screen, error, title="Not changed", severity="error", timeout=12)


__all__ = ["Job", "begin", "targets", "make"]
