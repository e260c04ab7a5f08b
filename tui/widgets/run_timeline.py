"""The detail pane of the Runs screen: one run's facts (state, lease, recovery record) and its event timeline.

:class:`RunFacts` draws the facts of the selected :class:`~tui.widgets.run_list.RunRow` (already read with the
list: nothing is read here); the lease countdown follows the app's clock on every paint.

:class:`RunTimeline` is a Line-API ``ScrollView`` over the run's events (``session_run_events``), read by keyset
(``store.mothx.runs.list_run_events(after_seq=...)``) :data:`EVENT_PAGE` at a time while the user scrolls, and
re-read incrementally (only events after the last seq shown) when the run changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from store import times
from store.safetext import json_dumps
from tui import actions
from tui.formatting import describe_error, one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.messages import WorkerFailed
from tui.safe import notify
from tui.widgets.facts_panel import FactsPanel
from tui.widgets.run_list import RunRow, duration_text, expiry_text, fit, lease_applies, lease_valid_at

if TYPE_CHECKING:
    from store.mothx.runs import RunEvent
    from store.mothx.sessiondir import SessionDir

EVENT_PAGE = 500
"""Events per keyset read (the reference's replay page)."""

EVENT_CAP = 20_000
"""Events kept for one run at most."""


def utc_seconds(stamp: str) -> str:
    """``2026-11-20T08:58:40.123Z`` → ``2026-11-20 08:58:40`` in UTC (the text as stored, made safe, when it
    does not parse)."""
    if times.parse_rfc3339(stamp) is None:
        return one_line(stamp or "")[:19]
    return times.show(stamp, times.SECONDS)


def unix_utc(seconds: int | None) -> str:
    """Unix seconds as ``YYYY-MM-DD HH:MM:SS`` UTC (``""`` for ``None``)."""
    return one_line(times.from_unix(seconds, times.SECONDS))


def middle_cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters, cut in the middle (ids keep their start and their end)."""
    if len(text) <= width or width < 5:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[-(width - 1 - head):]


def data_text(ev: RunEvent) -> str:
    """The event's JSON data on one line, without the braces when it is an object."""
    obj = ev.data_obj()
    if not obj:
        return ""
    return one_line(json_dumps(obj, indent=None))[1:-1]


def fact_lines(row: RunRow | None, now: float) -> list[Text]:
    """The facts of one run as four lines of text (the state, the lease and the recovery record in full)."""
    if row is None:
        return [Text("No run selected.", style="italic")]
    ls = row.listing
    run = ls.run
    bold = Style(bold=True)
    dim = Style(dim=True)
    lines: list[Text] = []
    head = Text(no_wrap=True, overflow="ellipsis", end="")
    head.append(one_line(run.id), bold)
    head.append(f"  {one_line(run.status)}")
    head.append(f"  ·  session {one_line(run.session_id)}", dim)
    if row.title:
        head.append(f"  {one_line(row.title)}")
    head.append(f"  ·  started {utc_seconds(run.started_at)}", dim)
    if run.finished_at:
        head.append(f"  ·  finished {utc_seconds(run.finished_at)}", dim)
    lines.append(head)

    state = Text(no_wrap=True, overflow="ellipsis", end="")
    state.append("state     ", dim)
    ex = ls.execution
    if ex is not None:
        bad = ex.state in ("orphaned", "recovery_failed", "inconsistent")
        state.append(one_line(ex.state), Style(bold=True, color="red") if bad else bold)
        if ex.phase:
            state.append(f" · phase {one_line(ex.phase)}")
        if ex.recovery_action != "none":
            state.append(f" · action {one_line(ex.recovery_action)}", Style(bold=True))
        state.append(f"  — {one_line(ex.reason)}", dim)
    else:
        state.append(f"ended {one_line(run.status)}")
        if run.error:
            state.append(f"  — {one_line(run.error)}", dim)
    lines.append(state)

    lease_line = Text(no_wrap=True, overflow="ellipsis", end="")
    lease_line.append("lease     ", dim)
    lease = ls.lease if lease_applies(ls) else None
    if lease is None:
        bound = "none" if ls.lease is None else f"the session's lease is bound to run {one_line(ls.lease.run_id) or '(none)'}"
        lease_line.append(bound, dim)
    else:
        countdown = expiry_text(lease, now)
        valid = lease_valid_at(lease, now)
        lease_line.append(countdown, Style(color="green", bold=True) if valid
                          else Style(color="red", bold=run.active and lease.state == "active"))
        lease_line.append(f" · epoch {lease.epoch} · {one_line(lease.purpose)} · pid {one_line(lease.owner_pid)} · ")
        lease_line.append(one_line(lease.owner_instance_id), bold)
        lease_line.append(f" · {one_line(lease.state)} until {unix_utc(lease.expires_at)} UTC · heartbeat "
                          f"{unix_utc(lease.heartbeat_at)} UTC", dim)
    lines.append(lease_line)

    rec_line = Text(no_wrap=True, overflow="ellipsis", end="")
    rec_line.append("recovery  ", dim)
    rec = ls.recovery
    if rec is None:
        rec_line.append("no recovery record", dim)
    else:
        rec_line.append(one_line(rec.state), Style(bold=True, color="red") if rec.state == "failed" else bold)
        rec_line.append(f" · attempt {rec.attempt} · previous epoch {rec.previous_lease_epoch}")
        rec_line.append(f" · {one_line(rec.trigger_source) or '?'}/{one_line(rec.reason_code) or '?'}")
        if rec.next_retry_at is not None:
            left = rec.next_retry_at - int(now)
            when = f"in {duration_text(left)}" if left > 0 else "due"
            rec_line.append(f" · next retry {when} ({unix_utc(rec.next_retry_at)} UTC)")
        if rec.completed_at is not None:
            rec_line.append(f" · completed {unix_utc(rec.completed_at)} UTC", dim)
        if rec.last_error:
            rec_line.append(f" · last error: {one_line(rec.last_error)}", dim)
    lines.append(rec_line)
    return lines


class RunFacts(FactsPanel[RunRow]):
    """Four lines: the run, its derived state, its lease (with the live countdown), its recovery record."""

    def lines(self) -> list[Text]:
        return fact_lines(self.row, self.now())


@dataclass
class EventsLoaded(Message):
    """A page of one run's events read by the worker (``fresh``: events after the last shown)."""

    run_id: str
    generation: int
    rows: list[RunEvent]
    append: bool
    done: bool


@dataclass
class EventsFailed(Message):
    """A read of one run's events failed: ``error`` is one safe line."""

    run_id: str
    generation: int
    error: str


COLUMNS = (("seq", "SEQ", 6, "right"), ("time", "TIME UTC", 19, "left"), ("type", "TYPE", 18, "left"),
           ("status", "STATUS", 10, "left"), ("source", "SOURCE", 12, "left"), ("id", "EVENT ID", 26, "left"))


class RunTimeline(ReportsWorkerFailures, ScrollView, can_focus=True, inherit_bindings=False):
    """The run's events in ``seq`` order, one line each; the header line stays put."""

    ACTION_SCOPE: ClassVar[str] = "run-timeline"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Run timeline"

    COMPONENT_CLASSES: ClassVar[set[str]] = {"run-timeline--header", "run-timeline--dim", "run-timeline--new",
                                             "run-timeline--recovery"}

    DEFAULT_CSS = """
    RunTimeline {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-gutter: stable;
    }
    RunTimeline > .run-timeline--header { text-style: bold; color: $primary; background: $panel; }
    RunTimeline > .run-timeline--dim { color: $foreground-muted; text-style: italic; }
    RunTimeline > .run-timeline--new { background: $warning 20%; }
    RunTimeline > .run-timeline--recovery { color: $accent; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sd: SessionDir | None = None
        self.run_id: str | None = None
        self.events: list[RunEvent] = []
        self.loaded = False
        self.done = True
        self.error = ""
        self.generation = 0
        self.new_seqs: set[int] = set()
        self._reading = False
        self._again = False
        self._first_read = True

    # --- public -----------------------------------------------------------------------------------------------

    def show(self, sd: SessionDir, run_id: str | None) -> None:
        """Show ``run_id``'s events from the first (another run: the old ones are dropped at once)."""
        self.sd = sd
        self.generation += 1
        self.run_id = run_id
        self.events = []
        self.new_seqs = set()
        self.loaded = run_id is None
        self.done = True
        self.error = ""
        self._reading = False
        self._again = False
        self.scroll_to(y=0, animate=False, immediate=True)
        self._set_total()
        if run_id is not None:
            self._reading = True
            if self._first_read:  # the screen's first frame does not wait for it: read once that frame is drawn
                self._first_read = False
                self.call_after_refresh(self._read_first, sd, run_id, self.generation)
            else:
                self._read(sd, run_id, self.generation, 0, False)
        self.refresh()

    def _read_first(self, sd: SessionDir, run_id: str, generation: int) -> None:
        if generation == self.generation:
            self._read(sd, run_id, generation, 0, False)

    def refresh_events(self) -> None:
        """Read the events after the last one shown (the run changed); coalesced while a read runs."""
        if self.sd is None or self.run_id is None or not self.loaded:
            return
        if self._reading:
            self._again = True
            return
        self._reading = True
        last = self.events[-1].seq if self.events else 0
        self._read(self.sd, self.run_id, self.generation, last, True)

    # --- reading ----------------------------------------------------------------------------------------------

    @work(thread=True, exclusive=False, group="run-timeline-read", exit_on_error=False, description="Read run events")
    def _read(self, sd: SessionDir, run_id: str, generation: int, after_seq: int, fresh: bool) -> None:
        try:
            from store.mothx.runs import list_run_events

            rows = list_run_events(sd, run_id=run_id, after_seq=after_seq, limit=EVENT_PAGE)
        except Exception as exc:  # noqa: BLE001 - one line on screen, never a traceback
            self.post_message(EventsFailed(run_id, generation, describe_error(exc)))
            return
        self.post_message(EventsLoaded(run_id, generation, rows, fresh, len(rows) < EVENT_PAGE))

    @on(EventsLoaded)
    def _loaded(self, message: EventsLoaded) -> None:
        message.stop()
        if message.generation != self.generation or message.run_id != self.run_id:
            return
        self._reading = False
        last = self.events[-1].seq if self.events else 0
        rows = [ev for ev in message.rows if ev.seq > last]
        self.new_seqs = {ev.seq for ev in rows} if message.append else set()
        # follow the tail while the last event is on screen; a reader scrolled back up is not moved
        follow = bool(rows) and int(self.scroll_offset.y) + self._page_rows >= len(self.events)
        if not message.append:
            # the first read: show the newest events when the whole timeline is in (one page); a longer one is
            # read on from its start as the reader scrolls
            follow = message.done and not self.events
        self.events.extend(rows)
        if len(self.events) > EVENT_CAP:
            del self.events[EVENT_CAP:]
            message.done = True
        self.done = message.done
        self.loaded = True
        self._set_total()
        if follow:
            self._show_tail()
            self.call_after_refresh(self._show_tail)  # again once the new virtual size is laid out
        self.refresh()
        if self._again or (message.append and not message.done):
            self._again = False
            self.refresh_events()
        else:
            self.call_after_refresh(self._read_more_if_near_end)

    @on(EventsFailed)
    def _failed(self, message: EventsFailed) -> None:
        message.stop()
        if message.generation != self.generation:
            return
        notify(self, message.error, title="Cannot read the run's events", severity="error")
        self._end_read(message.error)

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        """A read failed outside its own error path (the app notifies it): "Reading events…" ends here too."""
        if message.group == "run-timeline-read":
            self._end_read(message.reason)

    def _end_read(self, error: str) -> None:
        self._reading = False
        self._again = False
        self.loaded = True
        self.error = error
        self.refresh()

    def _read_more_if_near_end(self) -> None:
        if self.done or self._reading or self.sd is None or self.run_id is None:
            return
        if int(self.scroll_offset.y) + 2 * self._page_rows < len(self.events):
            return
        self._reading = True
        last = self.events[-1].seq if self.events else 0
        self._read(self.sd, self.run_id, self.generation, last, False)

    def _show_tail(self) -> None:
        self.scroll_to(y=max(0, len(self.events) - self._page_rows), animate=False, immediate=True)

    # --- geometry ---------------------------------------------------------------------------------------------

    @property
    def _page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _set_total(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        extra = 0 if self.done else 1
        self.virtual_size = Size(width, len(self.events) + 1 + extra)

    def on_resize(self, event: events.Resize) -> None:
        self._set_total()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if round(old) != round(new):
            self._read_more_if_near_end()

    # --- drawing ----------------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            parts = [" "]
            for _key, title, w, align in COLUMNS:
                parts.append(fit(title, w, align) + " ")
            parts.append("DATA")
            header = base + self.get_component_rich_style("run-timeline--header")
            return Strip([Segment(fit("".join(parts), width), header)])
        dim = base + self.get_component_rich_style("run-timeline--dim", partial=True)
        index = int(self.scroll_offset.y) + y - 1
        if not self.loaded:
            return Strip([Segment(fit("  Reading events…", width), dim)]) if y == 1 else Strip.blank(width, base)
        if not self.events:
            if y == 1:
                text = self.error or ("  No run selected." if self.run_id is None else "  This run has no events.")
                return Strip([Segment(fit("  " + text.strip(), width), dim)])
            return Strip.blank(width, base)
        if index >= len(self.events):
            if index == len(self.events) and not self.done:
                return Strip([Segment(fit("  … reading more events", width), dim)])
            return Strip.blank(width, base)
        ev = self.events[index]
        line = base + self.get_component_rich_style("run-timeline--new") if ev.seq in self.new_seqs else base
        accent = line + self.get_component_rich_style("run-timeline--recovery", partial=True)
        special = ev.event_type == "recovered" or ev.id.startswith("recovery_")
        values = {"seq": str(ev.seq), "time": utc_seconds(ev.timestamp), "type": one_line(ev.event_type),
                  "status": one_line(ev.status), "source": one_line(ev.source),
                  "id": middle_cut(one_line(ev.id), COLUMNS[-1][2])}
        segments = [Segment(" ", line)]
        for key, _title, w, align in COLUMNS:
            style = accent if special and key in ("type", "id") else line
            segments.append(Segment(fit(values[key], w, align) + " ", style))
        segments.append(Segment(data_text(ev), line))
        return Strip(segments).crop_extend(0, width, line)


__all__ = ["EVENT_PAGE", "RunFacts", "RunTimeline", "fact_lines", "utc_seconds", "data_text", "unix_utc"]
