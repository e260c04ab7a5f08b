"""What the Transcript screen knows of its session, the messages its workers post, and its title and position
lines (:mod:`tui.screens.transcript`)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.message import Message

from store.agents.sessionlog import Cursor, FollowUpdate
from store.mothx.entries import ReplayPlan
from store.safetext import one_line
from tui.formatting import plural, tildify, untitled_text


@dataclass(frozen=True)
class SessionFacts:
    """What the title line shows, read once when the screen opens."""

    session_id: str
    title: str
    cwd: str
    channel: str
    message_count: int | None
    plan: ReplayPlan
    turns: list[tuple[int, str, str]]
    rows_before_window: int
    note: str = ""          # why some details are missing ("" when none)
    turns_loaded: bool = False  # turn markers are read after the first page (16k turns take ~0.2 s)
    verify_error: str = ""  # why the corrupt rows could not be counted ("" when they were, or are being)
    cursor: Cursor | None = None  # where following continues (read before the plan: nothing is missed)
    seeded_from: str = ""  # a fork: the parent session it was seeded from ("" when it is no fork)
    seeded_to_seq: int = 0  # ... up to this seq of the parent
    seed_length: int = 0
    jump_seq: int | None = None  # where the screen opens (None: the start)


@dataclass
class FactsLoaded(Message):
    facts: SessionFacts


@dataclass
class TurnsLoaded(Message):
    """The turn markers were read (``error``: they could not be; ``turns`` is then empty)."""

    turns: list[tuple[int, str, str]]
    error: str = ""


@dataclass
class PlanVerified(Message):
    """The verify pass counted corrupt and replayed rows exactly (and checked row columns against JSON)."""

    plan: ReplayPlan


@dataclass
class VerifyFailed(Message):
    """The verify pass could not count corrupt rows: ``text`` ends "counting corrupt rows…"."""

    text: str


@dataclass
class FactsFailed(Message):
    text: str


@dataclass
class FollowRead(Message):
    """What a follow step found: the update, and the new plan when the rows only append messages."""

    update: FollowUpdate | None
    plan: ReplayPlan | None
    error: str = ""


def title_text(f: SessionFacts) -> Text:
    """The two title lines: who the session is, and what its replay holds."""
    plan = f.plan
    t = Text(no_wrap=True, overflow="ellipsis", end="")
    t.append(one_line(f.title) or untitled_text(f.message_count), Style(bold=True))
    t.append(f"  ·  {one_line(f.session_id)}", Style(dim=True))
    if f.cwd:
        t.append(f"  ·  {one_line(tildify(f.cwd))}")
    if f.channel:
        t.append(f"  ·  {one_line(f.channel)}")
    if f.message_count is not None:
        t.append(f"  ·  {plural(f.message_count, 'message')}")
    if f.seeded_from:
        t.append(f"  ·  ⑂ seeded from {one_line(f.seeded_from)} up to seq {f.seeded_to_seq:,} "
                 f"({plural(f.seed_length, 'entry', 'entries')}; o opens it there)", Style(color="magenta"))
    t.append("\n")
    replayed = plan.message_rows + (1 if plan.summary is not None else 0)
    start = f"from seq {plan.window_start_seq:,}" if plan.window_start_seq else "from the start"
    t.append(f"replay: {'' if plan.counts_verified else '≤'}{plural(replayed, 'message')} {start}")
    if plan.compactions:
        skipped = sum(1 for c in plan.compactions if not c.applied)
        t.append(f"  ·  {plural(len(plan.compactions), 'compaction')}")
        if skipped:
            t.append(f" ({skipped:,} skipped)", Style(bold=True, color="yellow"))
    if plan.overrides:
        t.append(f"  ·  {plural(len(plan.overrides), 'override')}")
    t.append(f"  ·  {plural(plan.total_rows, 'entry row')}", Style(dim=True))
    if plan.corrupt_rows > 0:
        more = "" if plan.counts_verified else "≥"
        t.append(f"  ·  ✗ {more}{plural(plan.corrupt_rows, 'corrupt row')}", Style(bold=True, color="red"))
    if not plan.counts_verified and f.verify_error:
        t.append(f"  ·  ✗ corrupt rows not counted: {one_line(f.verify_error)}", Style(bold=True, color="red"))
    elif not plan.counts_verified:
        t.append("  ·  counting corrupt rows…", Style(dim=True))
    if f.note:
        t.append(f"  ·  {one_line(f.note)}", Style(dim=True))
    return t


def position_text(noun: str, row: int, total: int, last: bool, *, estimated: bool = False) -> str:
    """The cursor's place for a status line: ``entry row ~70 of 149 (46%)``; ``row 5,204 of 5,204 (100%)`` on
    the last row only; ``entry row ~141 of 149 (end)`` on the last block when rows after it are not shown (the
    replay counts entry rows, the header messages); ``row 1 of 12 (8%)`` on the first; a head item (above the
    body) says so. ``estimated``: the row is interpolated between exact page ends (``~``; never on the first
    row)."""
    if row <= 0:
        return f"above {noun} 1 of {total:,}"
    approx = "~" if estimated and row > 1 and not (last and row == total) else ""
    if last:  # the last block: 100% when it is the last row, else the rows after it are not shown here
        return f"{noun} {approx}{row:,} of {total:,} ({'100%' if row == total else 'end'})"
    return f"{noun} {approx}{row:,} of {total:,} ({min(99, int(100 * row / max(1, total)))}%)"
