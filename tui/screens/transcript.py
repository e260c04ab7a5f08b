"""The Transcript screen: the replay of one session as message blocks, with its markers, and its raw rows.

Opening reads only cheap facts (``replay_plan``, the session summary, the turn markers and one row count) in
a worker; the views then read keyset windows of what is on screen (see :mod:`tui.widgets.transcript_view`).
Nothing here writes to the session directory in any open mode: ``e`` writes only the export file, which
must lie outside it.

Following (``F``, on by default): the app's live hints (:class:`tui.live.LiveChanged`) that name this session
make the screen ask :func:`store.agents.sessionlog.follow_entries` what was appended after its cursor. New message rows
are read past the window's end without reloading: at the bottom the view follows them, elsewhere "N new" is
shown and nothing moves. A gap (more rows than one follow step reads) says "partial, reloading" and reloads in
place; a cursor of another generation (the session was replaced) reloads from scratch; compactions and
overrides change earlier blocks, so they reload in place too.
"""


from __future__ import annotations

import bisect
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.binding import BindingType
from textual.widgets import Static

from store.agents.sessionlog import Cursor, FollowUpdate
from store.errors import StoreError
from store.mothx import entries
from store.mothx.entries import ReplayPlan
from store.mothx.sessiondir import SessionDir
from store.mothx.transcript_window import SECTION_BODY, SECTION_PREAMBLE, appended_turns, merge_turns
from store.safetext import one_line
from tui import actions
from tui.context import services
from tui.formatting import describe_error
from tui.live import LiveChanged
from tui.safe import notify
from tui.screens.transcript_base import TranscriptScreenBase, export_text
from tui.screens.transcript_facts import (
    FactsFailed,
    FactsLoaded,
    FollowRead,
    PlanVerified,
    SessionFacts,
    TurnsLoaded,
    VerifyFailed,
    position_text,
    title_text,
)
from tui.widgets.export_dialog import ExportRequest
from tui.widgets.transcript_blocks import raw_header
from tui.widgets.transcript_view import (
    GUTTER,
    JumpTarget,
    RawEntriesView,
    RawSource,
    TranscriptSource,
    TranscriptView,
    WindowedView,
)

if TYPE_CHECKING:
    from store.redact import Redactor


class TranscriptScreen(TranscriptScreenBase):
    """One session: the replay as blocks (or every raw row), turn / marker jumps, copy and export."""

    ACTION_SCOPE: ClassVar[str] = "transcript"
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings(ACTION_SCOPE)]
    HELP_TITLE: ClassVar[str] = "Transcript screen"

    FOLLOW_LIMIT: ClassVar[int] = 512
    """New rows one follow step reads at most; more is a gap ("partial, reloading")."""

    def __init__(self, sd: SessionDir, session_id: str, *, at_seq: int | None = None) -> None:
        """``at_seq``: open at the last message at or before that seq (a search hit, a fork's boundary in its
        parent) instead of the start."""
        super().__init__(sd)
        self.session_id = session_id
        self.facts: SessionFacts | None = None
        self._raw_started = False
        self._raw_at_end = False
        self._background_started = False
        self.reloads = 0            # follow reloads (gap, reset, compaction) — for the status line and tests
        self._following = False     # a follow step is being read
        self._follow_again = False  # a hint came while it was
        self._reloading = False     # a follow reload is reading the facts again
        self._reload_target: JumpTarget | None = None
        self._raw_target: JumpTarget | None = None  # where the raw view first opens (a match compacted away)
        self._open_at = at_seq  # open at the last message at or before this seq (a fork's parent), once

    # --- layout -----------------------------------------------------------------------------------------------

    def opening_title(self) -> Text:
        return Text(f"Opening session {one_line(self.session_id)}…")

    def raw_columns_at_start(self) -> Text:
        return Text(raw_header(200))

    def make_views(self) -> tuple[TranscriptView, RawEntriesView]:
        return TranscriptView(id="transcript-view"), RawEntriesView(id="raw-view")

    def raw_columns(self) -> str:
        return raw_header(max(20, self.size.width - GUTTER - 1))

    def on_mount(self) -> None:
        self.hide_raw()
        self._load_facts(self.sd, self.session_id)

    @property
    def transcript_view(self) -> TranscriptView:
        return self.query_one("#transcript-view", TranscriptView)

    @property
    def raw_view(self) -> RawEntriesView:
        return self.query_one("#raw-view", RawEntriesView)

    # --- loading ----------------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="transcript-facts", exit_on_error=False, description="Read the session's replay plan")
    def _load_facts(self, sd: SessionDir, session_id: str) -> None:
        from store.agents.transcript_open import open_transcript

        try:
            o = open_transcript(sd, session_id)
            jump = None
            if self._open_at is not None:
                from store.mothx.entries import last_message_seq

                jump = last_message_seq(sd, o.session_id, at_most=self._open_at)
        except StoreError as exc:
            self.post_message(FactsFailed(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            self.post_message(FactsFailed(f"The session could not be read: {exc}"))
            return
        self.post_message(FactsLoaded(SessionFacts(
            session_id=o.session_id, title=o.title, cwd=o.cwd, channel=o.channel, message_count=o.message_count,
            plan=o.plan, turns=[], rows_before_window=o.rows_before_window, note=o.note, cursor=o.cursor,
            seeded_from=o.parent_session, seeded_to_seq=o.fork_boundary_seq, seed_length=o.seed_length,
            jump_seq=jump,
        )))

    @on(FactsLoaded)
    def _facts_loaded(self, message: FactsLoaded) -> None:
        f = message.facts
        self.facts = f
        self.session_id = f.session_id
        self.query_one("#transcript-title", Static).update(title_text(f))
        opened_at = JumpTarget("seq", f.jump_seq) if f.jump_seq is not None else None
        asked, self._open_at = self._open_at, None  # once: a follow reload keeps its own place
        target, self._reload_target = self._reload_target or opened_at or JumpTarget("start"), None
        if "reloading" in self.follow_note:
            self.follow_note = self.follow_note.replace("reloading", "reloaded")
        if self._reloading:
            self._reloading = False
            if self._follow_again:
                self._follow_again = False
                self.call_after_refresh(self.follow_step)
        self.transcript_view.set_source(TranscriptSource(self.sd, f.plan, f.turns, base_rows=f.rows_before_window),
                                        target)
        self._raw_started = False
        start = f.plan.window_start_seq
        if asked is not None and start and asked < start and all(c.seq != asked for c in f.plan.compactions):
            # The replay does not hold it (a compaction dropped it; an earlier compaction itself is shown above
            # the replay): the raw entries do, at that very row.
            self._raw_target = JumpTarget("seq", asked)
            notify(self, f"Seq {asked:,} is before the session's last compaction, so the replay (from seq "
                         f"{start:,}) does not show it: it is shown among the raw entries. tab: the replay.",
                   title="Compacted away")
            if not self.raw_mode:
                self.action_toggle_raw()     # (starts the raw view there)
        if self.raw_mode:
            self._start_raw()
        self._background_started = False  # turns and the verify pass start once the first page is up

    def _start_background_reads(self) -> None:
        f = self.facts
        if f is None or self._background_started:
            return
        self._background_started = True
        self._load_turns(self.sd, f.session_id)
        if not f.plan.counts_verified:
            self._verify_plan(self.sd, f.session_id)

    @work(thread=True, exclusive=True, group="transcript-turns", exit_on_error=False, description="Read turn markers")
    def _load_turns(self, sd: SessionDir, session_id: str) -> None:
        try:
            turns = entries.turn_markers(sd, session_id)
        except Exception as exc:  # noqa: BLE001 - turns are optional: the replay still shows
            self.post_message(TurnsLoaded([], describe_error(exc)))
            return
        self.post_message(TurnsLoaded(turns))

    @on(TurnsLoaded)
    def _turns_loaded(self, message: TurnsLoaded) -> None:
        f = self.facts
        if message.error:
            notify(self, f"Turn markers could not be read: {message.error}", title="No turn markers",
                   severity="warning")
        if f is None:
            return
        self.facts = f = replace(f, turns=message.turns, turns_loaded=True)
        self.transcript_view.swap_source(TranscriptSource(self.sd, f.plan, f.turns, base_rows=f.rows_before_window))

    @work(thread=True, exclusive=True, group="transcript-verify", exit_on_error=False, description="Count corrupt rows")
    def _verify_plan(self, sd: SessionDir, session_id: str) -> None:
        """One SQL pass over the session's JSON, after the first page is up: exact corrupt / replayed counts."""
        try:
            plan = entries.replay_plan(sd, session_id, verify=True)
        except Exception as exc:  # noqa: BLE001 - the title says why, never a traceback
            self.post_message(VerifyFailed(describe_error(exc)))
            return
        self.post_message(PlanVerified(plan))

    @on(VerifyFailed)
    def _verify_failed(self, message: VerifyFailed) -> None:
        notify(self, message.text, title="Cannot count corrupt rows", severity="warning")
        f = self.facts
        if f is None:
            return
        self.facts = f = replace(f, verify_error=message.text)
        self.query_one("#transcript-title", Static).update(title_text(f))

    @on(PlanVerified)
    def _plan_verified(self, message: PlanVerified) -> None:
        f = self.facts
        if f is None:
            return
        old, plan = f.plan, message.plan
        self.facts = f = replace(f, plan=plan)
        self.query_one("#transcript-title", Static).update(title_text(f))
        if plan.keyset != old.keyset or plan.window_start_seq != old.window_start_seq:
            # pages must now come from the verified plan (rows disagree with their JSON): same place, new source
            view = self.transcript_view
            item = view.anchor_item
            target = JumpTarget("seq", item.seq) if item is not None and item.key[0] == 2 else JumpTarget("start")
            view.set_source(TranscriptSource(self.sd, plan, f.turns, base_rows=f.rows_before_window), target)

    @on(FactsFailed)
    def _facts_failed(self, message: FactsFailed) -> None:
        self._reloading = False
        self.show_failure(message.text)

    @on(WindowedView.Failed)
    def _view_failed(self, message: WindowedView.Failed) -> None:
        notify(self, message.text, title="Cannot read entries", severity="error")
        self._start_background_reads()

    def raw_shown(self) -> None:
        self._start_raw()

    def _start_raw(self) -> None:
        if self._raw_started or self.facts is None:
            return
        self._raw_started = True
        target, self._raw_target = self._raw_target, None
        self.raw_view.set_source(RawSource(self.sd, self.facts.session_id, self.facts.plan.total_rows),
                                 target or (JumpTarget("end") if self.follow and self.new_count == 0 and
                                            self._raw_at_end else JumpTarget("start")))

    # --- status -----------------------------------------------------------------------------------------------

    def view_moved(self, message: WindowedView.Moved) -> None:
        if message.view is self.transcript_view and message.view.items and not self._background_started:
            self.call_after_refresh(self._start_background_reads)  # after the first page is painted

    def _show_status(self) -> None:
        view = self.active_view
        mode = "raw entries" if self.raw_mode else "replay"
        parts = [mode]
        item = view.cursor_item or view.anchor_item
        if item is not None:
            parts.append(f"cursor seq {item.seq:,}" if item.seq else "cursor: summary")
        where = view.cursor_position()
        if where is not None:
            parts.append(position_text("row" if self.raw_mode else "entry row", *where, estimated=not self.raw_mode))
        if view.fetching:
            parts.append("reading…")
        if not self.follow:
            parts.append("follow off")
        elif (app := services(self)) is None or app.live is None:
            parts.append("follow: no live updates")  # a snapshot (nothing writes to a copy), or live updates off
        else:
            parts.append("follow on")
        self.put_status(parts)

    @staticmethod
    def _shows_last(view: WindowedView) -> bool:  # (kept for callers that ask whether the end is on screen)
        shown = view.visible_items()
        return bool(shown) and shown[-1].key == view.items[-1].key

    # --- actions ----------------------------------------------------------------------------------------------

    def action_session_runs(self) -> None:
        """Runs of this session, over this screen: esc comes back here."""
        from tui.screens.runs import RunsScreen

        self.app.push_screen(RunsScreen(session_id=self.session_id))

    def _turn_starts(self) -> list[tuple[int, int]]:
        """Item keys of the turn starts ``n``/``p`` visit. In the replay, a turn that started before the first
        kept entry (its ``turn_start`` is not shown) and is still open there is visited at that entry."""
        if self.facts is None:
            return []
        starts = [seq for seq, kind, _ in self.facts.turns if kind == "turn_start"]
        if self.raw_mode:
            return [(SECTION_BODY, seq) for seq in starts]
        start = self.facts.plan.window_start_seq
        keys = [(SECTION_BODY, seq) for seq in starts if seq >= start]
        earlier = [seq for seq in starts if seq < start]
        if earlier:
            ends = [seq for seq, kind, _ in self.facts.turns if kind == "turn_end" and earlier[-1] < seq < start]
            if not ends:
                keys.insert(0, (SECTION_BODY, start))
        return keys

    def _marker_seqs(self) -> list[tuple[int, int]]:
        """Item keys of the markers ``]``/``[`` visit: in the replay, the earlier compactions shown above the
        window first (their head rows), then the compactions and overrides in it."""
        if self.facts is None:
            return []
        plan = self.facts.plan
        if self.raw_mode:
            seqs = {c.seq for c in plan.compactions} | {ov.seq for ov in plan.overrides.values()}
            return sorted((SECTION_BODY, seq) for seq in seqs)
        start = plan.window_start_seq
        keys = {(SECTION_PREAMBLE, c.seq) for c in plan.compactions if c.seq < start}
        keys |= {(SECTION_BODY, c.seq) for c in plan.compactions if c.seq >= start}
        keys |= {(SECTION_BODY, max(ov.seq, start)) for ov in plan.overrides.values()}
        return sorted(keys)

    def _current_key(self) -> tuple[int, int] | None:
        view = self.active_view
        item = view.cursor_item or view.anchor_item
        if item is None:
            return None
        return (item.key[0], item.key[1])

    def _jump(self, targets: list[tuple[int, int]], forward: bool, what: str) -> None:
        if not targets:
            notify(self, f"This session has no {what}.", severity="warning", timeout=3)
            return
        here = self._current_key()
        if here is None:
            return
        if forward:
            i = bisect.bisect_right(targets, here)
            target = targets[i] if i < len(targets) else None
        else:
            i = bisect.bisect_left(targets, here)
            if i > 0 and targets[i - 1][0] == SECTION_BODY and \
                    self.active_view.first_block_after(targets[i - 1][1]) == here:
                i -= 1  # the cursor already sits on this turn's first block: go to the turn before
            target = targets[i - 1] if i > 0 else None
        if target is None:
            notify(self, f"No {'later' if forward else 'earlier'} {what}.", timeout=2)
            return
        self.active_view.jump_to_key(target)

    def _turns_ready(self) -> bool:
        if self.facts is not None and not self.facts.turns_loaded:
            notify(self, "Turn markers are still being read.", timeout=2)
            return False
        return True

    def action_open_parent(self) -> None:
        """A fork: open the session it was seeded from, at the last entry it copied."""
        f = self.facts
        if f is None:
            notify(self, "The session is still opening.", severity="warning", timeout=3)
            return
        if not f.seeded_from:
            notify(self, "This session is not a fork: it was not seeded from another session.", timeout=3)
            return
        self.app.push_screen(TranscriptScreen(self.sd, f.seeded_from, at_seq=f.seeded_to_seq or None))

    def action_next_turn(self) -> None:
        if self._turns_ready():
            self._jump(self._turn_starts(), True, "turn")

    def action_prev_turn(self) -> None:
        if self._turns_ready():
            self._jump(self._turn_starts(), False, "turn")

    def action_next_marker(self) -> None:
        self._jump(self._marker_seqs(), True, "compaction or override")

    def action_prev_marker(self) -> None:
        self._jump(self._marker_seqs(), False, "compaction or override")

    # --- following --------------------------------------------------------------------------------------------

    def on_live_changed(self, message: LiveChanged) -> None:
        """Another process changed sessions: when it names this one, read what was appended."""
        if self.follow and self.facts is not None and message.concerns(self.facts.session_id):
            self.follow_step()

    def follow_step(self) -> None:
        """Ask for the entries appended after the cursor (one step at a time; a hint meanwhile asks again)."""
        f = self.facts
        if f is None or not self.follow:
            return
        if self._following or self._reloading:
            self._follow_again = True  # asked again once the step (or the reload) is done
            return
        self._following = True
        self._follow_read(self.sd, f.session_id, f.cursor, self.FOLLOW_LIMIT)

    @work(thread=True, exclusive=False, group="transcript-follow", exit_on_error=False, description="Follow the session")
    def _follow_read(self, sd: SessionDir, session_id: str, cursor: Cursor | None, limit: int) -> None:
        from store.agents.transcript_open import follow_transcript

        try:
            step = follow_transcript(sd, session_id, cursor, limit=limit)
        except Exception as exc:  # noqa: BLE001 - one line in the status; the next hint tries again
            self.post_message(FollowRead(None, None, describe_error(exc)))
            return
        self.post_message(FollowRead(step.update, step.plan))

    @on(FollowRead)
    def _follow_applied(self, message: FollowRead) -> None:
        from store.agents.sessionlog import ACTION_APPEND, ACTION_NONE, ACTION_RELOAD

        self._following = False
        again, self._follow_again = self._follow_again, False
        f = self.facts
        update = message.update
        if message.error or update is None or f is None or not self.follow:
            if message.error:
                self.follow_failed(message.error, "Cannot follow the session")
            return
        if update.action == ACTION_NONE or f.cursor is None:
            self.facts = replace(f, cursor=update.cursor)  # no cursor yet: this step only takes one
        elif update.action == ACTION_APPEND and message.plan is not None:
            self._append(update, message.plan)
        elif update.action == ACTION_APPEND or update.action == ACTION_RELOAD:
            self.follow_note = "partial, reloading" if update.action == ACTION_RELOAD else "history changed, reloading"
            self._reload(keep_place=True)
        else:
            self.follow_note = "the session was replaced: reloading from scratch"
            self._reload(keep_place=False)
        self._show_status()
        if again:
            self.follow_step()

    def _append(self, update: FollowUpdate, plan: ReplayPlan) -> None:
        """New rows that only append: read past the end of the views (following them at the bottom)."""
        f = self.facts
        assert f is not None
        turns = merge_turns(f.turns, appended_turns(update.events)) if f.turns_loaded else f.turns
        self.facts = f = replace(f, plan=plan, turns=turns, cursor=update.cursor)
        self.follow_note = ""
        self.query_one("#transcript-title", Static).update(title_text(f))
        stick = self.transcript_view.at_bottom
        self.transcript_view.grow(TranscriptSource(self.sd, plan, turns, base_rows=f.rows_before_window), stick=stick)
        if self._raw_started:
            self.raw_view.grow(RawSource(self.sd, f.session_id, plan.total_rows), stick=self.raw_view.at_bottom)
        added = sum(1 for r in update.events if r.parsed is not None and r.entry_type == "message")
        active_stuck = self.raw_view.at_bottom if self.raw_mode else stick
        if not active_stuck:
            self.new_count += added if not self.raw_mode else len(update.events)

    def _reload(self, *, keep_place: bool) -> None:
        """Read the session's facts again and show it from the same place (or from the start / the end)."""
        self.reloads += 1
        self._reloading = True
        view = self.transcript_view
        self._raw_at_end = self.raw_view.at_bottom
        if view.at_bottom:
            self._reload_target = JumpTarget("end")
            self.new_count = 0
        elif keep_place and view.anchor_item is not None and view.anchor_item.key[0] == 2:
            self._reload_target = JumpTarget("seq", view.anchor_item.seq)
        else:
            self._reload_target = JumpTarget("start")
            self.new_count = 0
        self._load_facts(self.sd, self.session_id)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.follow_note = ""
        if self.follow:
            notify(self, "Following: entries other processes append show up.", timeout=2)
            self.follow_step()  # catch up with what was appended while not following
        else:
            notify(self, "Not following: the view stays as it is.", timeout=2)
        self._show_status()

    def export_name(self) -> str | None:
        if self.facts is None:
            notify(self, "The session is not loaded yet.", severity="warning", timeout=3)
            return None
        return self.facts.session_id

    def start_export(self, request: ExportRequest) -> None:
        self._export(request)

    @work(thread=True, exclusive=True, group="transcript-export", exit_on_error=False, description="Export the transcript")
    def _export(self, request: ExportRequest) -> None:
        sd, session_id = self.sd, self.session_id

        def html(red: Redactor | None) -> str:
            from store.export_html import mothx_html

            return mothx_html(sd, session_id, redactor=red)

        self.post_export(request, export_text(request, html, lambda: entries.export_json(sd, session_id),
                                              lambda: entries.export_markdown(sd, session_id)))


__all__ = ["TranscriptScreen"]
