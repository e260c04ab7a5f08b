"""Helpers shared by the Transcript screen's Pilot and snapshot tests: find demo sessions by what they hold,
host the screen in a small app, and wait until every read has landed."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from tui.screens.transcript import TranscriptScreen


@dataclass(frozen=True)
class DemoSessions:
    """Demo sessions picked by content (not by hard-coded id), so a rebuilt demo still finds them."""

    long: str              # the session with the most entry rows
    override: str          # a session with a content override
    skipped: str           # a session with a compaction whose first kept entry is missing
    tool_error: str        # a small session without markers whose replay has a tool result with isError
    all_ids: tuple[str, ...]


def _referenced_elsewhere(db: Path, sid: str) -> bool:
    """True when another session's entries mention ``sid`` (then a filter by id would list it too)."""
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        row = conn.execute(
            "SELECT 1 FROM entries WHERE session_id <> ? AND instr(data, ?) > 0 LIMIT 1", (sid, sid)
        ).fetchone()
        return row is not None
    finally:
        conn.close()


def find_demo_sessions(demo: Path) -> DemoSessions:
    with open_session_dir(demo, OpenMode.SNAPSHOT) as sd:
        db = sd.db_path
        with sd.db.read() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]
        plans = {sid: entries.replay_plan(sd, sid) for sid in ids}
        usable = [sid for sid in ids if not _referenced_elsewhere(db, sid)]
        long = max(ids, key=lambda sid: plans[sid].total_rows)
        override = next(sid for sid in usable if plans[sid].overrides)
        skipped = next(sid for sid in usable if any(not c.applied for c in plans[sid].compactions))
        tool_error = next(
            sid for sid in usable
            if any(m.message.is_error for m in entries.replay(sd, sid)) and plans[sid].total_rows < 60
            and not plans[sid].compactions and not plans[sid].overrides
        )
    return DemoSessions(long=long, override=override, skipped=skipped, tool_error=tool_error, all_ids=tuple(ids))


class TranscriptHost(App[None]):
    """A bare app that shows one TranscriptScreen (for Pilot tests that need no Sessions screen)."""

    def __init__(self, sd: SessionDir, session_id: str) -> None:
        super().__init__()
        self.sd = sd
        self.session_id = session_id

    def on_mount(self) -> None:
        self.push_screen(TranscriptScreen(self.sd, self.session_id))


async def settle(pilot: Pilot[Any], rounds: int = 400) -> None:
    """Wait until no worker runs and the transcript screen (when shown) has no read in flight."""
    app = pilot.app
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if any(w.is_running for w in app.workers):
            continue
        screen = app.screen
        if isinstance(screen, TranscriptScreen):
            if (screen.facts is None and not screen.error) or screen.active_view.fetching:
                continue
        await pilot.pause()
        return
    raise AssertionError("the app did not settle: a read is still in flight")


def screen_text(app: App[Any]) -> str:
    """The transcript screen's active view as plain text, one line per row."""
    screen = app.screen
    assert isinstance(screen, TranscriptScreen)
    view = screen.active_view
    return "\n".join(view.render_line(y).text for y in range(view.size.height))


async def open_from_sessions_list(pilot: Pilot[Any], session_id: str) -> None:
    """Type the session id into the Sessions screen's filter, then open the single row with enter."""
    from tests.tui.appwait import settle as settle_sessions

    await settle_sessions(pilot)
    await pilot.press("slash", *session_id, "enter")
    await settle_sessions(pilot)
    await pilot.press("enter")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, TranscriptScreen), f"expected the transcript, got {type(screen).__name__}"
    assert screen.session_id == session_id
