"""One meaning per key (issue 9, item 3), and the way back from Runs reached from a transcript (item 8).

The rule for the keys of writes (repairs, ``writes=True``), checked on the whole registry:

1. a write never sits on a key pressed by habit: no lowercase letter (the browsing keys), and none of
   ``r R enter space tab escape`` nor a digit;
2. no action that does not write, in ANY scope, uses a write's key: a key pressed out of habit on one screen
   never writes on another. Writes may share a key across screens when it means the same there: ``X`` is "the
   repair of the selected row, after a preview" on Runs (recover), Deliveries (retry) and Health (fix);
3. the keys the issue found with three meanings have one now: ``R`` is Runs wherever it is bound, ``tab`` is Raw.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import settle_runs, wait_for
from tests.tui.transcript_support import settle as settle_transcript
from tui import actions
from tui.app import SessionscopeApp

pytestmark = pytest.mark.anyio

HABIT = {"r", "R", "enter", "space", "tab", "escape"}


async def open_first_transcript(pilot: object) -> object:
    from tui.screens.transcript import TranscriptScreen

    await pilot.press("enter")  # type: ignore[attr-defined]
    await settle_transcript(pilot)  # type: ignore[arg-type]
    screen = pilot.app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, TranscriptScreen)
    return screen


def keys_of(spec: actions.ActionSpec) -> list[str]:
    return [k.strip() for k in spec.key.split(",") if k.strip()]


def test_writes_sit_on_keys_no_habit_hits() -> None:
    writes = [spec for spec in actions.ACTIONS if spec.writes]
    assert writes, "the registry has repairs"
    for spec in writes:
        for key in keys_of(spec):
            assert key not in HABIT, f"{spec.id}: {key} is pressed by habit"
            assert not (len(key) == 1 and (key.islower() or key.isdigit())), f"{spec.id}: {key} is a browsing key"
            others = [o.id for o in actions.ACTIONS if o is not spec and not o.writes and key in keys_of(o)]
            assert others == [], f"{spec.id} writes on {key}, which {others} use elsewhere"
    in_one_scope = [(a.id, b.id) for a in writes for b in writes
                    if a is not b and a.scope == b.scope and set(keys_of(a)) & set(keys_of(b))]
    assert in_one_scope == [], "two repairs of one screen share a key"


def test_R_means_runs_and_tab_means_raw_on_every_screen() -> None:
    meanings: dict[str, set[str]] = {}
    for spec in actions.ACTIONS:
        for key in keys_of(spec):
            meanings.setdefault(key, set()).add(spec.description)
    assert meanings["R"] == {"Runs"}
    assert meanings["tab"] == {"Raw"}


async def test_R_on_a_transcript_opens_its_runs_and_esc_comes_back(demo_dir: Path) -> None:
    from tui.screens.runs import RunsScreen
    from tui.screens.transcript import TranscriptScreen

    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        transcript = await open_first_transcript(pilot)
        assert isinstance(transcript, TranscriptScreen)
        await pilot.press("R")
        await settle_runs(pilot)
        runs = app.screen
        assert isinstance(runs, RunsScreen) and runs.scope.session_id == transcript.session_id
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is transcript, "the transcript again")


async def test_the_runs_section_jumped_to_from_a_transcript_goes_back_to_it(demo_dir: Path) -> None:
    from tui.screens.runs import RunsScreen

    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        transcript = await open_first_transcript(pilot)
        app.open_section(next(s for s in actions.SECTIONS if s.id == "runs"))
        await settle_runs(pilot)
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is transcript, "the transcript again")
