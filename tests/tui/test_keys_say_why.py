"""Every key on a key bar either acts or says why it cannot, in one line (issue 9, item 2).

A repair key in ``--read-only`` / ``--snapshot`` stays dimmed and, pressed, names the mode and the repair; the
mothx-only keys on a captured (Claude Code / Codex) list say they are for mothx sessions; ``a`` (the source
switch) is always on the bar, so a capture made while the app is open shows up when it is pressed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store.agents.capture import capture_codex
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.appwait import settle
from tests.tui.runswait import settle_runs, wait_for
from tests.tui.test_native_transcript import captured, copy_fixtures, settle_sessions  # noqa: F401 - a fixture
from tui import actions
from tui.app import SessionscopeApp
from tui.screens.sessions import SessionsScreen
from tui.widgets.keybar import KeyBar

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
MODE_WORDS = {OpenMode.READ_ONLY: "Read-only (--read-only)", OpenMode.SNAPSHOT: "Snapshot (--snapshot)"}


def notices(app: Any) -> list[str]:
    return [str(n.message) for n in app._notifications]


def first_key(action_id: str) -> str:
    return actions.get(action_id).key.split(",")[0]


def dimmed(bar_text: Any, label: str) -> bool:
    start = bar_text.plain.index(label)
    return any(span.start <= start < span.end and getattr(span.style, "dim", False) for span in bar_text.spans)


def test_the_refusal_names_the_mode_and_the_repair() -> None:
    assert actions.write_refusal("recover_run", "read-only") == \
        "Read-only (--read-only): recover is a repair and cannot run here."
    assert actions.write_refusal("reset", "snapshot") == "Snapshot (--snapshot): reset is a repair and cannot run here."


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT])
async def test_runs_repair_keys_say_why_in_the_read_modes(demo_dir: Path, mode: OpenMode) -> None:
    from tui.screens.runs import RunsScreen

    app = SessionscopeApp(demo_dir, mode)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.push_screen(RunsScreen())
        await settle_runs(pilot)
        screen = app.screen
        bar = screen.query_one(KeyBar).render()
        for spec in actions.in_scope("runs"):
            if not spec.writes:
                continue
            assert spec.description in bar.plain and dimmed(bar, spec.description), f"{spec.id} is dimmed"
            before = len(notices(app))
            await pilot.press(first_key(spec.id))
            await pilot.pause()
            said = notices(app)[before:]
            assert said == [f"{MODE_WORDS[mode]}: {spec.description.lower()} is a repair and cannot run here."]
            assert app.screen is screen, "nothing opened"


async def test_checkpoint_reset_says_why_in_read_only(captured: Path) -> None:  # noqa: F811
    from tui.screens.checkpoints import CheckpointsScreen

    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        await app.push_screen(CheckpointsScreen())
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        before = len(notices(app))
        await pilot.press(first_key("checkpoints.reset"))
        await pilot.pause()
        assert notices(app)[before:] == ["Read-only (--read-only): reset is a repair and cannot run here."]
        assert app.screen is screen


async def test_mothx_only_keys_on_a_captured_list_say_why(captured: Path) -> None:  # noqa: F811
    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen) and screen.source == "claude-code"
        for action_id in ("sessions.sort", "sessions.facet", "sessions.runs", "sessions.reverse"):
            spec = actions.get(action_id)
            before = len(notices(app))
            await pilot.press(first_key(action_id))
            await pilot.pause()
            said = notices(app)[before:]
            assert len(said) == 1 and "works on mothx sessions only" in said[0], (action_id, said)
            assert said[0].startswith(spec.description) and "\n" not in said[0]
            assert app.screen is screen and isinstance(screen, SessionsScreen) and screen.source == "claude-code"


async def test_a_capture_made_while_the_app_is_open_shows_when_a_is_pressed(demo_dir: Path,
                                                                            real_fixtures: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen) and screen.agent_counts == {}
        assert "a Source" in screen.query_one(KeyBar).render().plain, "the source key is always on the bar"
        before = len(notices(app))
        await pilot.press("a")
        await settle_sessions(pilot)
        said = notices(app)[before:]
        assert len(said) == 1 and "no captured" in said[0], said
        # another process captures now, while the app is open
        with open_session_dir(demo_dir, OpenMode.READ_WRITE) as sd:
            capture_codex(sd, copy_fixtures(real_fixtures, demo_dir.parent / "sources")[1])
        await pilot.press("a")
        await settle_sessions(pilot)
        await wait_for(pilot, lambda: isinstance(screen, SessionsScreen) and screen.source == "codex",
                       "the codex list after a")


def test_the_first_prompt_column_never_shows_an_assistant_line() -> None:
    import json

    from store.agents.native_catalog import first_prompt

    lines = [json.dumps({"type": "assistant", "uuid": "a1", "parentUuid": None, "sessionId": "s",
                         "timestamp": "2026-01-01T00:00:00Z",
                         "message": {"role": "assistant", "content": [{"type": "text", "text": "I am the assistant"}]}})]
    assert first_prompt("claude-code", lines) == ("", "")
    from store.agents.native_catalog import AgentSessionSummary
    from tui.widgets.native_session_list import title_cell

    row = AgentSessionSummary("claude-code", "s", "", "", "/w", 1, 1, "", "s.jsonl", "/r", True)
    assert title_cell(row) == "(no prompt)", "not '(no messages)': the agent's own lines are messages"


async def test_the_captured_list_filter_is_on_content(captured: Path) -> None:  # noqa: F811
    from store.agents.native_catalog import agent_session_page
    from tui.widgets.native_session_list import AgentSessionList

    with open_session_dir(captured, OpenMode.READ_ONLY) as sd:
        every = agent_session_page(sd, "claude-code").rows
        calling = agent_session_page(sd, "claude-code", needle="BASH").rows
    assert calling, "some captured Claude Code session called Bash"
    assert not any("bash" in f"{r.title} {r.preview} {r.cwd}".lower() for r in calling), \
        "found in the records, not in the shown texts"
    assert {r.agent_session_id for r in calling} <= {r.agent_session_id for r in every}
    app = SessionscopeApp(captured, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle_sessions(pilot)
        screen = app.screen
        agent_list = screen.query_one(AgentSessionList)
        await pilot.press("slash", *"bash", "enter")
        await settle_sessions(pilot)
        assert [r.agent_session_id for r in agent_list.rows] == [r.agent_session_id for r in calling]


async def test_clicking_a_dimmed_repair_on_the_key_bar_says_why(demo_dir: Path) -> None:
    from tui.screens.runs import RunsScreen

    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.push_screen(RunsScreen())
        await settle_runs(pilot)
        bar = app.screen.query_one(KeyBar)
        x = bar.render().plain.index("Recover")
        before = len(notices(app))
        await pilot.click(KeyBar, offset=(x, 0))
        await pilot.pause()
        assert notices(app)[before:] == ["Read-only (--read-only): recover is a repair and cannot run here."]
