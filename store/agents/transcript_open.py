"""Opening and following a mothx session's transcript: which store calls, in which order.

:func:`open_transcript` reads the cheap facts a transcript screen starts from: the session's summary (title,
cwd, channel; optional), the follow cursor **before** the replay plan (so rows written in between are seen by
the first follow step, never missed), the plan, and the rows before the replay window.
:func:`follow_transcript` is one follow step: the rows appended after a cursor and, when they only append
messages (no compaction or override that changes the plan's window), the new plan.

It lives beside :func:`store.agents.sessionlog.follow_entries` (whose cursor it reads): ``store.mothx`` does not
import ``store.agents``. The pages themselves are :mod:`store.mothx.transcript_window`. Nothing here writes,
and nothing imports the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.agents.cursors import ACTION_APPEND, Cursor, FollowUpdate
from store.agents.sessionlog import follow_entries
from store.errors import AmbiguousSessionId, SessionNotFound
from store.mothx import entries
from store.mothx.entries import ReplayPlan
from store.mothx.sessiondir import SessionDir

PLAN_CHANGING = ("compaction", "content_override")
"""Entry types whose arrival changes the replay plan's window: following them reloads."""


@dataclass(frozen=True)
class TranscriptOpening:
    """What a transcript screen shows first (the title line and the replay plan) and where following starts."""

    session_id: str  # the full id (a unique prefix opens the session it names)
    title: str
    cwd: str
    channel: str
    message_count: int | None
    plan: ReplayPlan
    rows_before_window: int
    note: str = ""  # why some details are missing ("" when none)
    cursor: Cursor | None = None  # where following continues (read before the plan: nothing is missed)
    parent_session: str = ""  # a fork: the session it was seeded from
    fork_boundary_seq: int = 0  # ... up to this seq of the parent
    seed_length: int = 0  # ... this many entries
    fork_kind: str = ""


@dataclass(frozen=True)
class FollowStep:
    """One follow step: the update, and the new plan when the rows only append messages (else None)."""

    update: FollowUpdate
    plan: ReplayPlan | None


def start_cursor(sd: SessionDir, session_id: str) -> Cursor | None:
    """The follow cursor now; None when it cannot be read (following is optional: the first step resets it)."""
    try:
        return follow_entries(sd, session_id, None, limit=1).cursor
    except Exception:  # noqa: BLE001 - following is optional
        return None


def open_transcript(sd: SessionDir, session_id: str) -> TranscriptOpening:
    """The facts of a session's transcript, in this order: summary, cursor, plan, rows before the window.

    :class:`SessionNotFound` / :class:`AmbiguousSessionId` when the id names no session (or several); a
    summary that cannot be read for another reason is a ``note`` (the replay still shows), unless the session
    has no entry rows either, which is :class:`SessionNotFound`. Other store errors propagate."""
    title, cwd, channel, count, note = "", "", "", None, ""
    parent, boundary, seeded, kind = "", 0, 0, ""
    try:
        from store.mothx.sessions import get_session

        summary = get_session(sd, session_id)
    except (SessionNotFound, AmbiguousSessionId):
        raise
    except Exception as exc:  # noqa: BLE001 - the title is optional; the replay still shows
        note = f"session details unavailable: {exc}"
    else:
        session_id = summary.id
        title, cwd, count = summary.title or summary.preview, summary.cwd, summary.message_count
        channel = summary.channel_type + (f":{summary.channel_id}" if summary.channel_id else "")
        parent, boundary, seeded, kind = (summary.parent_session, summary.fork_boundary_seq, summary.seed_length,
                                          summary.fork_kind)
    cursor = start_cursor(sd, session_id)
    plan = entries.replay_plan(sd, session_id)
    if note and plan.total_rows == 0:
        raise SessionNotFound(f"No session has the id {session_id!r}.")
    before = entries.row_count(sd, session_id, before_seq=plan.window_start_seq) if plan.window_start_seq else 0
    return TranscriptOpening(session_id, title, cwd, channel, count, plan, before, note, cursor,
                             parent, boundary, seeded, kind)


def follow_transcript(sd: SessionDir, session_id: str, cursor: Cursor | None, *, limit: int) -> FollowStep:
    """The rows appended after ``cursor`` (at most ``limit``) and, when they only append, the new plan."""
    update = follow_entries(sd, session_id, cursor, limit=limit)
    plan = None
    if update.action == ACTION_APPEND and not any(
            getattr(r, "entry_type", "") in PLAN_CHANGING for r in update.events):
        plan = entries.replay_plan(sd, session_id)
    return FollowStep(update, plan)


__all__ = ["PLAN_CHANGING", "FollowStep", "TranscriptOpening", "follow_transcript", "open_transcript", "start_cursor"]
