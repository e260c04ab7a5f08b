"""store.mothx.transcript_window and store.agents.transcript_open: the pages a transcript view draws, read
without the UI, and the order of the calls that open and follow a transcript."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store.agents import transcript_open
from store.agents.cursors import ACTION_APPEND
from store.errors import SessionNotFound
from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.transcript_window import (
    SECTION_BODY,
    RawWindow,
    ReplayWindow,
    TurnMarker,
    WindowItem,
    appended_turns,
    merge_turns,
)

SID = "7a11c0de7a11c0de"
_IDS = itertools.count(1)


class Log:
    """Appends entry rows in the reference JSON format with plain SQL."""

    def __init__(self, sd: SessionDir) -> None:
        self.sd = sd
        with sd.db.write() as conn:
            conn.execute("INSERT OR IGNORE INTO sessions (id, cwd, timestamp) VALUES (?, '/w', '2026-01-01T00:00:00Z')",
                         (SID,))

    def entry(self, type_: str, **fields: Any) -> int:
        eid = f"{type_[:4]}{next(_IDS):012x}"
        body = {"type": type_, "id": eid, "parentId": None, "timestamp": "2026-01-01T00:00:00Z", **fields}
        with self.sd.db.write() as conn:
            cur = conn.execute(
                "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, NULL, ?, ?)",
                (SID, eid, type_, "2026-01-01T00:00:00Z", json.dumps(body)))
            return int(cur.lastrowid or 0)

    def msg(self, text: str, role: str = "user") -> int:
        return self.entry("message", message={"role": role, "content": text})


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path, OpenMode.READ_WRITE, create=True)
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def log(sd: SessionDir) -> Log:
    return Log(sd)


def walk_forward(window: ReplayWindow | RawWindow) -> list[WindowItem]:
    out: list[WindowItem] = []
    page = window.after(None)
    out += page.items
    while page.hi is not None:
        page = window.after(page.hi)
        out += page.items
    return out


def walk_backward(window: ReplayWindow | RawWindow) -> list[WindowItem]:
    pages = []
    page = window.before(None)
    pages.append(page.items)
    while page.lo is not None:
        page = window.before(page.lo)
        pages.append(page.items)
    return [it for items in reversed(pages) for it in items]


def test_replay_pages_merge_turn_markers_and_join_both_ways(sd: SessionDir, log: Log) -> None:
    turns = []
    for t in range(12):
        log.entry("turn_start", turnId=f"t{t}")
        for i in range(5):
            log.msg(f"m{t}.{i}", "user" if i % 2 == 0 else "assistant")
        log.entry("turn_end", turnId=f"t{t}")
    turns = entries.turn_markers(sd, SID)
    plan = entries.replay_plan(sd, SID)
    window = ReplayWindow(sd, plan, turns, page=7)
    forward = walk_forward(window)
    assert [it.kind for it in forward].count("message") == 60
    assert [it.kind for it in forward].count("turn_start") == 12 == [it.kind for it in forward].count("turn_end")
    assert [it.key for it in forward] == sorted(it.key for it in forward)
    assert len({it.key for it in forward}) == len(forward)  # no item twice where pages meet
    assert walk_backward(window) == forward
    marks = [it.payload for it in forward if it.kind == "turn_start"]
    assert all(isinstance(m, TurnMarker) for m in marks) and marks[0] == TurnMarker(turns[0][0], "turn_start", "t0")
    ranks = [it.rank for it in forward if it.section == SECTION_BODY]
    assert ranks == sorted(ranks) and ranks[0] == 0 and ranks[-1] == plan.total_rows - 1
    middle = forward[30]
    around = window.around(middle.seq)
    assert middle in around.items
    assert window.seq_at_rank(window.rank_of_seq(middle.seq)) == middle.seq


def test_raw_pages_are_every_row_once(sd: SessionDir, log: Log) -> None:
    for i in range(45):
        log.msg(f"m{i}") if i % 3 else log.entry("label", label=f"l{i}")
    window = RawWindow(sd, SID, 45, page=10)
    forward = walk_forward(window)
    assert [it.rank for it in forward] == [float(i) for i in range(45)]
    assert walk_backward(window) == forward
    assert {it.kind for it in forward} == {"row"}


def test_open_reads_the_cursor_before_the_plan(sd: SessionDir, log: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(4):
        log.msg(f"m{i}")
    calls: list[str] = []
    real_follow, real_plan = transcript_open.follow_entries, entries.replay_plan

    def follow(*args: Any, **kwargs: Any) -> Any:
        calls.append("cursor")
        return real_follow(*args, **kwargs)

    def plan(*args: Any, **kwargs: Any) -> Any:
        calls.append("plan")
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(transcript_open, "follow_entries", follow)
    monkeypatch.setattr(entries, "replay_plan", plan)
    opened = transcript_open.open_transcript(sd, SID[:8])
    assert calls == ["cursor", "plan"]
    assert opened.session_id == SID and opened.cwd == "/w" and opened.cursor is not None
    assert opened.plan.message_rows == 4 and opened.rows_before_window == 0

    calls.clear()
    log.msg("new")
    log.entry("turn_start", turnId="tx")
    step = transcript_open.follow_transcript(sd, SID, opened.cursor, limit=50)
    assert step.update.action == ACTION_APPEND and step.plan is not None and step.plan.message_rows == 5
    assert [t[1:] for t in appended_turns(step.update.events)] == [("turn_start", "tx")]
    assert merge_turns([(1, "turn_start", "a")], [(1, "turn_start", "a"), (0, "turn_end", "")]) == [
        (0, "turn_end", ""), (1, "turn_start", "a")]

    log.entry("compaction", summary="s", firstKeptEntryId=None, tokensBefore=1)
    step = transcript_open.follow_transcript(sd, SID, step.update.cursor, limit=50)
    assert step.update.action == ACTION_APPEND and step.plan is None  # the window changes: the screen reloads


def test_open_an_unknown_session(sd: SessionDir) -> None:
    with pytest.raises(SessionNotFound):
        transcript_open.open_transcript(sd, "f" * 16)
