"""The Transcript screen for native agent sessions: a captured Claude Code or Codex checkpoint (or a native file).

It shares the Transcript screen's widgets — the Line-API view with its anchor scroll model, the block look, the
raw view, copy and export — over in-memory sources (:mod:`tui.widgets.native_sources`): a native transcript is
read whole by :mod:`store.agents.native`, so every block is known at once. Where a ref is read from (checkpoint,
its files on disk, a native file), which transcript is shown and how its file is followed is
:mod:`store.agents.native_open`.

* a rewind (two typed prompts under one parent) shows one branch at a time under a fork marker; ``b`` shows the
  next branch of the fork nearest the cursor;
* a Task call names its sub-agent; ``enter`` on it opens the sub-agent's transcript in another such screen
  (``esc`` comes back);
* ``R`` / ``tab`` shows the file's numbered lines; ``y`` copies, ``e`` exports Markdown or JSON;
* following (``F``, on by default): the agent's file on disk is checked every :data:`FOLLOW_POLL_S`; what it
  appends is captured again (read-write directories, :func:`store.agents.sessionlog.native_follower`) and the
  transcript is read again. At the bottom the view follows; elsewhere "N new" is shown and nothing moves.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.binding import BindingType
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static

from store.agents.native import NativeSession, NativeTranscript, SubAgentLink
from store.agents.native_open import (
    NativeLoad,
    NativeRef,
    load_native,
    open_follower,
    pick_transcript,
    reload_native,
    subagent_file,
)
from store.safetext import one_line
from store.words import cut
from tui import actions
from tui.formatting import describe_error
from tui.safe import notify
from tui.screens.native_title import native_title
from tui.screens.transcript_base import TranscriptScreenBase, export_text
from tui.widgets.export_dialog import (
    ExportRequest,
)
from tui.widgets.native_sources import (
    ForkMark,
    NativeBlockSource,
    NativeRawSource,
    RawLine,
    RecordView,
    SubAgentNote,
    agent_title,
    build_blocks,
    marker_keys,
    session_links,
)
from tui.widgets.transcript_view import JumpTarget, NativeBlocksView, NativeRawView, WindowedView

if TYPE_CHECKING:
    from store.agents.sessionlog import FollowUpdate, NativeFollower
    from store.mothx.sessiondir import SessionDir
    from store.redact import Redactor
    from tui.widgets.transcript_blocks import ViewItem

FOLLOW_POLL_S = 0.5
"""How often a followed file is looked at (a ``stat``; it is read only when it changed)."""


@dataclass
class NativeLoaded(Message):
    load: NativeLoad


@dataclass
class NativeFailed(Message):
    text: str


@dataclass
class NativeBaselined(Message):
    """The followed file was read once; ``catch_up``: it holds another number of records than is shown."""

    stat: tuple[int, int, int] | None
    catch_up: bool
    error: str = ""


@dataclass
class NativePolled(Message):
    """A follow poll: what the follower said, and the session read again when it changed."""

    update: FollowUpdate | None
    load: NativeLoad | None
    error: str = ""


def _stat_of(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class NativeTranscriptScreen(TranscriptScreenBase):
    """A native agent transcript in the Transcript screen's views: branches, sub-agents, raw lines, follow."""

    ACTION_SCOPE: ClassVar[str] = "native-transcript"
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings(ACTION_SCOPE)]
    HELP_TITLE: ClassVar[str] = "Native transcript screen"

    def __init__(self, sd: SessionDir, ref: NativeRef, *, session: NativeSession | None = None,
                 disk_path: Path | None = None, capture_root: Path | None = None,
                 source_root: Path | None = None) -> None:
        super().__init__(sd)
        self.ref = ref
        self.session: NativeSession | None = None
        self.transcript: NativeTranscript | None = None
        self.link: SubAgentLink | None = None
        self.selection: dict[str, int] = {}
        self.blocks: list[ViewItem] = []
        self.updates = 0  # follow updates applied (for tests and the status line)
        self.disk_path: Path | None = disk_path
        self.capture_root: Path | None = capture_root
        self.source_root: Path | None = source_root
        self.from_disk = False
        self._given = session
        self._follower: NativeFollower | None = None
        self._follow_timer: Timer | None = None
        self._polling = False
        self._stat: tuple[int, int, int] | None = None

    # --- layout -----------------------------------------------------------------------------------------------

    def opening_title(self) -> Text:
        return Text(one_line(f"Reading {agent_title(self.ref.agent)} {self.ref.label}…"))

    def make_views(self) -> tuple[NativeBlocksView, NativeRawView]:
        return NativeBlocksView(id="transcript-view"), NativeRawView(id="raw-view")

    def raw_columns(self) -> str:
        return "  line kind          record"

    def on_mount(self) -> None:
        self.hide_raw()
        if self._given is not None:
            self._show_or_fail(NativeLoad(self._given, self.disk_path, self.capture_root, self.source_root))
        else:
            self._read(self.sd, self.ref)

    def on_unmount(self) -> None:
        self._stop_follow()

    @property
    def block_view(self) -> NativeBlocksView:
        return self.query_one("#transcript-view", NativeBlocksView)

    @property
    def raw_view(self) -> NativeRawView:
        return self.query_one("#raw-view", NativeRawView)

    @property
    def loaded(self) -> bool:
        return self.transcript is not None or bool(self.error)

    # --- reading ----------------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="native-read", exit_on_error=False, description="Read a native transcript")
    def _read(self, sd: SessionDir, ref: NativeRef) -> None:
        try:
            load = load_native(sd, ref)
        except OSError as exc:
            self.post_message(NativeFailed(f"{one_line(ref.path or ref.label)} cannot be read: "
                                           f"{one_line(exc.strerror or exc)}."))
            return
        except Exception as exc:  # noqa: BLE001 - SessionStateOutOfSync, or a bug: one line
            self.post_message(NativeFailed(describe_error(exc)))
            return
        self.post_message(NativeLoaded(load))

    @on(NativeLoaded)
    def _loaded(self, message: NativeLoaded) -> None:
        self._show_or_fail(message.load)

    def _show_or_fail(self, load: NativeLoad) -> None:
        try:
            self._show(load)
        except Exception as exc:  # noqa: BLE001 - a transcript the blocks cannot be built from: one line
            self.show_failure(f"The transcript could not be shown: {describe_error(exc)}")

    def _pick(self, session: NativeSession) -> tuple[NativeTranscript | None, SubAgentLink | None]:
        return pick_transcript(session, self.ref.subagent)

    def _build(self) -> list[ViewItem]:
        assert self.session is not None and self.transcript is not None
        links, unlinked = session_links(self.session)
        if self.link is not None:
            return build_blocks(self.transcript, self.selection, {}, [])
        return build_blocks(self.transcript, self.selection, links, unlinked)

    def _show(self, load: NativeLoad) -> None:
        self.session = load.session
        self.transcript, self.link = self._pick(load.session)
        self.disk_path = load.disk_path
        self.capture_root = load.capture_root
        self.source_root = load.source_root
        self.from_disk = load.from_disk
        self.follow_note = load.note
        if self.transcript is None:
            what = f"sub-agent {one_line(self.ref.subagent)}" if self.ref.subagent else "the session's own transcript"
            self.show_failure(f"The checkpoint does not hold {what}.")
            return
        self.blocks = self._build()
        self.block_view.set_source(NativeBlockSource(self.blocks))
        self.raw_view.set_source(NativeRawSource(self.transcript))
        self._show_title()
        if self.follow:
            self._start_follow()
        self._show_status()

    @on(NativeFailed)
    def _failed(self, message: NativeFailed) -> None:
        self.show_failure(message.text)

    def _follow_label(self) -> str:
        if not self.follow:
            return "follow off"
        if self.disk_path is None:
            return self.follow_note or "not following"
        if self.ref.path:
            return "following the file"
        if self.sd.mode.is_read:
            return "following the file on disk (read-only: not captured)"
        return "following: appended records are captured"

    def _show_title(self) -> None:
        if self.session is None:
            return
        self.query_one("#transcript-title", Static).update(
            native_title(self.session, self.transcript, self.link, self._follow_label()))

    # --- following --------------------------------------------------------------------------------------------

    def _start_follow(self) -> None:
        if self.disk_path is None or self._follow_timer is not None:
            return
        if self._follower is None:
            follower = open_follower(self.sd, self.ref, self.disk_path, self.capture_root)
            self._follower = follower
            self._polling = True
            self._baseline(follower, self.disk_path, self.transcript.records if self.transcript else 0)
        self._follow_timer = self.set_interval(FOLLOW_POLL_S, self._tick)

    def _stop_follow(self) -> None:
        if self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None

    @work(thread=True, exclusive=True, group="native-baseline", exit_on_error=False, description="Read the followed file")
    def _baseline(self, follower: NativeFollower, path: Path, shown: int) -> None:
        """Read the file once without capturing (opening writes nothing); catch up when it already holds more."""
        stat = _stat_of(path)
        recapture, follower.recapture = follower.recapture, None
        catch_up, error = False, ""
        try:
            follower.poll(None)
            catch_up = stat is not None and len(follower.records) != shown
        except Exception as exc:  # noqa: BLE001 - the status says why; the next poll tries again
            stat, error = None, describe_error(exc)
        finally:
            follower.recapture = recapture
        self.post_message(NativeBaselined(stat, catch_up, error))

    @on(NativeBaselined)
    def _baselined(self, message: NativeBaselined) -> None:
        self._polling = False
        self._stat = message.stat
        if message.error:
            self.follow_note = f"follow: {message.error}"
            notify(self, message.error, title="Cannot follow the file", severity="warning")
            self._show_status()
        if message.catch_up:
            self._tick(True)

    def _tick(self, force: bool = False) -> None:
        if self._polling or self._follower is None or not self.follow:
            return
        path = self.disk_path
        if path is None:
            return
        stat = _stat_of(path)
        if stat == self._stat and not force:
            return
        self._stat = stat
        self._polling = True
        self._poll(self.sd, self.ref, self._follower, force)

    @work(thread=True, exclusive=False, group="native-follow", exit_on_error=False, description="Follow a native file")
    def _poll(self, sd: SessionDir, ref: NativeRef, follower: NativeFollower, force: bool) -> None:
        try:
            before = follower.cursor
            update = follower.poll(before)
            if update.action == "none" and not force:
                self.post_message(NativePolled(update, None))
                return
            if force and update.action == "none" and follower.recapture is not None:
                follower.recapture()  # the file held more than the checkpoint when the screen opened
            load = reload_native(sd, ref)
        except Exception as exc:  # noqa: BLE001 - one line in the status; the next change tries again
            self.post_message(NativePolled(None, None, describe_error(exc)))
            return
        self.post_message(NativePolled(update, load))

    @on(NativePolled)
    def _polled(self, message: NativePolled) -> None:
        self._polling = False
        if message.error:
            self.follow_failed(message.error, "Cannot follow the file")
            return
        if message.load is None or not self.follow:
            return
        update = message.update
        if update is not None and update.action == "reload":
            self.follow_note = "partial, reloading"
        elif update is not None and update.action == "reset":
            self.follow_note = "the file was rewritten: read again from scratch"
        else:
            self.follow_note = ""
        try:
            self._apply(message.load, reset=update is not None and update.action == "reset")
        except Exception as exc:  # noqa: BLE001 - what is shown stays; the status says why
            self.follow_note = f"follow: {describe_error(exc)}"
            notify(self, self.follow_note, title="Cannot show the new records", severity="warning")
            self._show_status()

    def _apply(self, load: NativeLoad, *, reset: bool = False) -> None:
        """Show a newer read of the session, keeping the place (at the bottom: follow it)."""
        self.updates += 1
        stick_blocks = self.block_view.at_bottom
        stick_raw = self.raw_view.at_bottom
        self.session = load.session
        self.transcript, self.link = self._pick(load.session)
        self.from_disk = load.from_disk
        if self.transcript is None:
            return
        valid = {f.parent_uuid for f in self.transcript.forks}
        self.selection = {k: v for k, v in self.selection.items() if k in valid}
        self.blocks = self._build()
        if reset:
            self.block_view.set_source(NativeBlockSource(self.blocks), JumpTarget("end" if stick_blocks else "start"))
            self.raw_view.set_source(NativeRawSource(self.transcript), JumpTarget("end" if stick_raw else "start"))
        else:
            self.block_view.replace_all(NativeBlockSource(self.blocks), stick=stick_blocks)
            self.raw_view.replace_all(NativeRawSource(self.transcript), stick=stick_raw)
        self._show_title()
        self._show_status()

    @on(WindowedView.Grew)
    def _grew(self, message: WindowedView.Grew) -> None:
        if message.view is self.active_view and not message.stuck and message.added > 0:
            self.new_count += message.added
        self._show_status()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self._start_follow()
            self._tick(True)
            notify(self, "Following: records the agent appends show up.", timeout=2)
        else:
            self._stop_follow()
            notify(self, "Not following.", timeout=2)
        self._show_title()
        self._show_status()

    # --- status -----------------------------------------------------------------------------------------------

    def _show_status(self) -> None:
        view = self.active_view
        parts = ["native lines" if self.raw_mode else "native records"]
        item = view.cursor_item or view.anchor_item
        if item is not None:
            p = item.payload
            if isinstance(p, (RecordView, RawLine)):
                parts.append(f"cursor line {p.item.line:,}")
            elif isinstance(p, ForkMark):
                parts.append(f"cursor: fork at line {p.fork.parent_line:,}")
        blocks = [it.key for it in view.items if not it.is_rule]  # (every item is in memory: a native file)
        cursor = view.cursor_item
        if blocks and cursor is not None and cursor.key in blocks:
            # the cursor's block among the blocks (rules between turns are not blocks), so G says "N of N"
            parts.append(f"{'line' if self.raw_mode else 'block'} {blocks.index(cursor.key) + 1:,} of {len(blocks):,}")
        parts.append("follow on" if self.follow and self.disk_path is not None else "follow off")
        self.put_status(parts)

    # --- actions ----------------------------------------------------------------------------------------------

    def _cursor_index(self) -> int:
        view = self.block_view
        item = view.cursor_item or view.anchor_item
        if item is None:
            return 0
        keys = [b.key for b in self.blocks]
        return bisect.bisect_left(keys, item.key)

    def action_switch_branch(self) -> None:
        if self.raw_mode:
            self.action_toggle_raw()
        forks = [(i, b) for i, b in enumerate(self.blocks) if isinstance(b.payload, ForkMark)]
        if not forks:
            notify(self, "This transcript has no rewind: there is only one branch.", timeout=3)
            return
        here = self._cursor_index()
        above = [f for f in forks if f[0] <= here]
        below = [f for f in forks if f[0] > here]
        candidates = sorted(forks, key=lambda f: (abs(f[0] - here), f[0] > here))
        _i, mark_item = (above[-1] if above and (not below or here - above[-1][0] <= below[0][0] - here)
                         else candidates[0])
        mark = mark_item.payload
        assert isinstance(mark, ForkMark)
        fork = mark.fork
        new = (mark.chosen + 1) % len(fork.branches)
        self.selection[fork.parent_uuid] = new
        self.blocks = self._build()
        target = next((b.seq for b in self.blocks
                       if isinstance(b.payload, ForkMark) and b.payload.fork.parent_uuid == fork.parent_uuid), 0)
        self.block_view.set_source(NativeBlockSource(self.blocks), JumpTarget("seq", target))
        branch = fork.branches[new]
        notify(self, f"Branch {new + 1} of {len(fork.branches)}: {cut(one_line(branch.preview), 80)}", timeout=3)
        self._show_status()

    def _subagent_under_cursor(self) -> SubAgentLink | None:
        item = self.block_view.cursor_item
        if item is None:
            return None
        p = item.payload
        if isinstance(p, SubAgentNote):
            return p.link
        if isinstance(p, RecordView) and p.subagents:
            return p.subagents[0]
        return None

    def action_open_subagent(self) -> None:
        if self.session is None or self.raw_mode:
            return
        link = self._subagent_under_cursor()
        if link is None:
            notify(self, "Put the cursor on a Task call that ran a sub-agent (↳), then press enter.", timeout=3)
            return
        disk = subagent_file(link, self.source_root)
        ref = NativeRef(self.ref.agent, self.ref.agent_session_id, self.ref.path, link.agent_id)
        self.app.push_screen(NativeTranscriptScreen(self.sd, ref, session=self.session, disk_path=disk,
                                                    capture_root=self.capture_root, source_root=self.source_root))

    def _jump_marker(self, forward: bool) -> None:
        keys = marker_keys(self.blocks)
        if not keys:
            notify(self, "Nothing to jump to: no fork, compaction, summary, unreadable line or interrupted call.",
                        timeout=3)
            return
        view = self.block_view
        item = view.cursor_item or view.anchor_item
        here = item.key if item is not None else (0, -1)
        if forward:
            i = bisect.bisect_right(keys, here)
            target = keys[i] if i < len(keys) else None
        else:
            i = bisect.bisect_left(keys, here)
            target = keys[i - 1] if i > 0 else None
        if target is None:
            notify(self, f"No {'later' if forward else 'earlier'} marker.", timeout=2)
            return
        view.jump_to_seq(target[1])

    def action_next_marker(self) -> None:
        if not self.raw_mode:
            self._jump_marker(True)

    def action_prev_marker(self) -> None:
        if not self.raw_mode:
            self._jump_marker(False)

    def export_name(self) -> str | None:
        if self.transcript is None:
            notify(self, "The transcript is not loaded yet.", severity="warning", timeout=3)
            return None
        return (self.transcript.session_id or Path(self.transcript.path).stem) + (
            f"-{self.link.agent_id}" if self.link is not None else "")  # the dialog sanitizes it

    def start_export(self, request: ExportRequest) -> None:
        if self.transcript is not None:
            self._export(request, self.transcript, dict(self.selection))

    @work(thread=True, exclusive=True, group="native-export", exit_on_error=False, description="Export a transcript")
    def _export(self, request: ExportRequest, t: NativeTranscript, selection: dict[str, int]) -> None:
        from store.agents.native_export import native_json, native_markdown

        def html(red: Redactor | None) -> str:
            from store.export_html import native_html

            return native_html(t, selection, redactor=red)

        self.post_export(request, export_text(request, html, lambda: native_json(t, selection),
                                              lambda: native_markdown(t, selection)))


# NativeRef (store.agents.native_open) names what the screen shows; the Sessions screen imports it from here.
__all__ = ["NativeLoad", "NativeRef", "NativeTranscriptScreen"]
