"""The Forks screen: a session's fork family and its turns as candidate fork boundaries; fork at one.

Top: :class:`~tui.widgets.fork_lists.FamilyList`, the family of the session (ancestors and descendants through
``parent_session``, with fork kind, boundary seq and seed length). Below: :class:`~tui.widgets.fork_lists.
BoundaryList`, the turns of the family member under the family cursor, each valid (the boundary a fork there copies
up to) or invalid with the rule that forbids it. ``tab`` moves between the two lists; ``enter`` opens the
session of the row as a transcript.

``X`` forks the session at the turn under the boundary cursor (a ``message`` fork at the turn's final assistant
message, reference 14) on the one repair path: ``preview()`` in a worker → refused: one notification naming the
rule → otherwise a :class:`~tui.widgets.confirm.ConfirmDialog` with the preview (the entries to copy, the new
title; Cancel focused, ``y`` confirms) → ``apply()`` in a worker → the child's transcript opens. The request id is
``tui:<source>:<seq>``, so forking the same boundary again returns the same child (and says so). ``X`` is
declared ``writes=True``: the read modes show it dimmed and block it.

Opened from Sessions with ``F`` (the session under the cursor), or from ``:`` (the session the Sessions screen
has under its cursor).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from tui import actions
from tui.context import OpensWithStore, opened_store, services
from tui.formatting import one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.repair_flow import FlowWords, Outcome, RepairFlow, key_for
from tui.safe import notify
from tui.widgets.fork_lists import BoundaryList, FamilyList
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from store.mothx.fork import ForkPreview, ForkRepairResult, ForkSession
    from store.mothx.fork_family import FamilyMember, TurnCandidate
    from store.mothx.sessiondir import SessionDir
    from tui.widgets.confirm import ConfirmRequest


WRITE_ACTIONS = frozenset(spec.action for spec in actions.in_scope("forks") if spec.writes)


@dataclass(frozen=True)
class FirstRead:
    """The screen's first read of one session: its family and its turns as boundaries."""

    session_id: str
    members: tuple[FamilyMember, ...]
    turns: tuple[TurnCandidate, ...]


def first_read(sd: SessionDir, session_id: str) -> FirstRead:
    """Both lists of the Forks screen for ``session_id``, read in one read transaction (any thread)."""
    from store.mothx.fork_family import candidates_conn, family_conn

    with sd.db.read() as conn:
        return FirstRead(session_id, family_conn(conn, session_id).members,
                         tuple(candidates_conn(conn, session_id)[1]))


def request_id(source: str, at_seq: int) -> str:
    """The TUI's idempotency key for a fork: one per source and boundary entry."""
    return f"tui:{source}:{at_seq}"


class ForksScreen(OpensWithStore, RepairFlow, ReportsWorkerFailures, Screen[None]):
    """A session's fork family and fork boundaries; ``X`` forks at the selected boundary after a preview."""

    CSS_PATH = Path(__file__).with_name("forks.tcss")
    ACTION_SCOPE: ClassVar[str] = "forks"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Forks screen"
    AUTO_FOCUS = "#boundaries"
    REPAIR_GROUP: ClassVar[str] = "forks-repair"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords(
        done="Forked", refused="Not forked", failed="Fork failed", busy="A fork is already being prepared or applied.",
        preview_work="Preview a fork", apply_work="Fork a session")

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__()
        self.sd: SessionDir | None = None
        self.session_id = session_id  # the session the screen was opened for
        self.shown: str | None = session_id  # the family member whose turns are listed
        self._first: FirstRead | None = None
        self.last_result: ForkRepairResult | None = None

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Forks")
        yield Static(id="family-title")
        yield FamilyList(id="family", empty_text="No session.", loading_text="Reading the fork family…")
        yield Static(id="boundaries-title")
        yield BoundaryList(id="boundaries", empty_text="No turns: a fork needs a completed conversation turn.",
                           loading_text="Reading the turns…")
        yield StatusBar(id="status")
        yield KeyBar()

    async def on_mount(self) -> None:
        if self.session_id is None:
            self.session_id = self._sessions_selection()
            self.shown = self.session_id
        sd, first = await opened_store(self)  # the first screen (--section forks): its first frame has the rows
        if sd is None:
            self.query_one(StatusBar).count = "Opening the session directory…"
            self._titles()
            return
        self.attach(sd, first if isinstance(first, FirstRead) else None)

    def attach_opened(self, sd: SessionDir, first: object | None) -> None:
        self.attach(sd, first if isinstance(first, FirstRead) else None)

    def attach(self, sd: SessionDir, first: FirstRead | None = None) -> None:
        """Show the forks of ``sd`` (called on mount, or once the store opened when this is the first screen);
        ``first`` is :func:`first_read` of this screen's session, done already (e.g. while the app started)."""
        self.sd = sd
        self._first = first
        if self.session_id is None:
            self.query_one(FamilyList).show_message("No session is selected: pick one on the Sessions screen, then F.")
            self.query_one(BoundaryList).show_message("")
            self._titles()
            return
        self._load()

    def _sessions_selection(self) -> str | None:
        """The session under the cursor of the Sessions screen below this one (its session list), if any."""
        from tui.widgets.session_list import SessionList

        for screen in reversed(self.app.screen_stack):
            lists = screen.query(SessionList)
            if lists:
                row = lists.first().selected
                return row.id if row is not None else None
        return None

    def _load(self) -> None:
        if self.sd is None or self.session_id is None:
            return
        first, self._first = self._first, None
        if first is not None and first.session_id != self.session_id:
            first = None
        self.query_one(FamilyList).show_family(self.sd, self.session_id, first.members if first else None)
        self._show_boundaries(self.shown or self.session_id, first.turns if first else None)

    def _show_boundaries(self, session_id: str, rows: tuple[TurnCandidate, ...] | None = None) -> None:
        if self.sd is None:
            return
        self.shown = session_id
        self.query_one(BoundaryList).show_session(self.sd, session_id, rows)
        self._titles()

    def _titles(self) -> None:
        fam = Text("Fork family of ", style="bold")
        fam.append(one_line(self.session_id or "(no session)") + "  ·  ")
        fam.append("tab: turns  ·  enter: open", style="dim")
        self.query_one("#family-title", Static).update(fam)
        bnd = Text("Turns of ", style="bold")
        bnd.append(one_line(self.shown or "(no session)") + " as fork boundaries  ·  ")
        bnd.append("X: fork at the selected turn", style="dim")
        self.query_one("#boundaries-title", Static).update(bnd)

    # --- list events ------------------------------------------------------------------------------------------

    @on(RowList.Highlighted, "#family")
    def _member(self, message: RowList.Highlighted) -> None:
        row = self.query_one(FamilyList).selected
        if row is not None and not row.missing and row.session_id != self.shown:
            self._show_boundaries(row.session_id)

    @on(RowList.Loaded, "#boundaries")
    @on(RowList.Failed, "#boundaries")
    def _boundaries_loaded(self, message: RowList.Loaded | RowList.Failed) -> None:
        lst = self.query_one(BoundaryList)
        valid = sum(1 for r in lst.rows if r.valid)
        self.query_one(StatusBar).count = lst.error or f"{len(lst.rows):,} turns · {valid:,} valid boundaries"

    @on(RowList.Selected, "#family")
    def _open_member(self, message: RowList.Selected) -> None:
        row = self.query_one(FamilyList).selected
        if row is None or row.missing:
            notify(self, "That session does not exist (a child names it as its parent).", severity="warning")
            return
        self._open(row.session_id)

    @on(RowList.Selected, "#boundaries")
    def _open_shown(self, message: RowList.Selected) -> None:
        if self.shown:
            self._open(self.shown)

    def _open(self, session_id: str) -> None:
        app = services(self)
        if app is not None:
            app.open_transcript(session_id)

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.check_write_action(action, WRITE_ACTIONS)

    def action_refresh(self) -> None:
        self._load()

    def action_fork(self) -> None:
        row: TurnCandidate | None = self.query_one(BoundaryList).selected
        if self.sd is None or self.shown is None:
            notify(self, "No session is shown.", severity="warning")
            return
        if self.refuse_when_busy():
            return
        if row is None:
            notify(self, "No turn is selected: a fork starts at a turn.", severity="warning")
            return
        if not row.valid:
            notify(self, f"Cannot fork at turn {row.index}: {one_line(row.reason)}", title="Not a fork boundary",
                   severity="warning")
            return
        source, at_seq, opened_by = self.shown, row.at_seq, key_for(self, "forks.fork")

        def make(sd: SessionDir) -> ForkSession:
            from store.mothx.fork import ForkOptions, ForkSession

            return ForkSession(sd, ForkOptions(source, request_id(source, at_seq), at_seq=at_seq))

        def confirm(preview: ForkPreview) -> ConfirmRequest | None:
            if preview.existing_child:
                notify(self, f"This boundary was forked already: opening {one_line(preview.existing_child)} "
                             f"({one_line(preview.child_title)}).", title="Fork", timeout=6)
                self._open(preview.existing_child)
                return None
            from tui.widgets.confirm import ConfirmRequest

            return ConfirmRequest.of_preview(
                preview, lines=(f"New session '{one_line(preview.child_title)}': {preview.seed_length:,} entries "
                                f"copied (seq <= {preview.boundary_seq}), a {preview.fork_kind} fork.",),
                affected=preview.seed_length + 1, confirm_label="Fork", opened_by=opened_by)

        self.start_repair("fork", make, confirm, done=self._forked)

    def _forked(self, outcome: Outcome[ForkRepairResult]) -> None:
        if outcome.result is None:
            return
        if self.sd is not None and self.session_id is not None:
            self.query_one(FamilyList).show_family(self.sd, self.session_id)
        self._open(outcome.result.fork.session_id)

__all__ = ["ForksScreen", "FirstRead", "first_read", "request_id"]
