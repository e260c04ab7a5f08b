"""Where a follower stands and what it does next: the cursor, the replay statuses, the follow update.

A :class:`Cursor` is ``(generation, sequence)``. A replay after a cursor is ``complete``, ``partial`` (events
were dropped in between) or ``unavailable`` (another generation, or a cursor past the end); a following screen
turns that into a :class:`FollowUpdate`: ``append`` the events, ``reload`` (a gap) or ``reset`` (load from
scratch). Shared by the session event log (:mod:`store.agents.sessionlog`) and the native file follower
(:mod:`store.agents.native_follow`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_EVENTS = 512
"""Events a log keeps, and records a follower hands over at once, by default."""

REPLAY_COMPLETE = "complete"
REPLAY_PARTIAL = "partial"
REPLAY_UNAVAILABLE = "unavailable"

ACTION_APPEND = "append"
ACTION_RELOAD = "reload"
ACTION_RESET = "reset"
ACTION_NONE = "none"


@dataclass(frozen=True)
class Cursor:
    generation: str
    sequence: int

    def to_json(self) -> dict[str, object]:
        return {"generation": self.generation, "sequence": self.sequence}

    @classmethod
    def from_json(cls, obj: object) -> Cursor:
        if not isinstance(obj, dict):
            raise ValueError("a cursor is an object")
        gen, seq = obj.get("generation"), obj.get("sequence")
        if not isinstance(gen, str) or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ValueError("a cursor has a text generation and a non-negative integer sequence")
        return cls(gen, seq)



def new_generation() -> str:
    """A fresh generation name (``gen-`` and 32 hex digits): no cursor of another generation compares to it."""
    return "gen-" + secrets.token_hex(16)


@dataclass(frozen=True)
class FollowUpdate:
    """What a following screen does next.

    ``append``: add ``events`` (the replay was complete); ``none``: nothing new; ``reload``: events were
    skipped (partial) — ``events`` is only the newest bounded suffix, reload the view; ``reset``: the cursor
    names another generation (or a rewritten history) — load from scratch. ``cursor`` is where to continue.
    """

    status: str
    action: str
    events: tuple[Any, ...]
    cursor: Cursor


def follow_update(status: str, events: tuple[Any, ...], cursor: Cursor) -> FollowUpdate:
    """The update for a replay ``status``: ``unavailable`` → reset, ``partial`` → reload, else append or none."""
    if status == REPLAY_UNAVAILABLE:
        action = ACTION_RESET
    elif status == REPLAY_PARTIAL:
        action = ACTION_RELOAD
    else:
        action = ACTION_APPEND if events else ACTION_NONE
    return FollowUpdate(status, action, events, cursor)
