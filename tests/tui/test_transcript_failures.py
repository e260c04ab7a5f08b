"""Nothing fails silently on the transcript screens: a worker that fails posts a notification with the reason,
and every "…ing" state it would have ended ends with an error line instead (nothing waits forever)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from store.mothx import entries
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.tui.test_transcript_export import make_session
from tests.tui.test_transcript_hostile import NativeHost, settle_native
from tests.tui.transcript_support import TranscriptHost, settle
from tui.screens.native_transcript import NativeRef
from tui.screens.transcript import TranscriptScreen

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
SID = "5e55fa115e55fa11"


def messages(app: object) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]  # type: ignore[attr-defined]


async def test_turn_markers_and_the_verify_pass_that_fail_say_so(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "sessions"
    make_session(root, SID, "hello")
    real_plan = entries.replay_plan

    def turn_markers(*args: object, **kwargs: object) -> list[tuple[int, str, str]]:
        raise RuntimeError("turns \x1b]0;pwned\x07 [/] broke")

    def replay_plan(sd: object, session_id: str, *, verify: bool = False) -> entries.ReplayPlan:
        if verify:
            raise RuntimeError("verify [bold]broke")
        return real_plan(sd, session_id)  # type: ignore[arg-type]

    monkeypatch.setattr(entries, "turn_markers", turn_markers)
    monkeypatch.setattr(entries, "replay_plan", replay_plan)
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, SID)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            got = messages(app)
            assert any("Turn markers could not be read" in m and "[/] broke" in m and "\x1b" not in m for m in got), got
            assert screen.facts is not None and screen.facts.turns_loaded, "n / p no longer wait for turn markers"
            await pilot.press("n")
            await pilot.pause()
            assert not any("still being read" in m for m in messages(app))
            title = str(screen.query_one("#transcript-title", Static).render())
            assert not screen.facts.plan.counts_verified, "the verify pass was asked for, and failed"
            assert any("verify [bold]broke" in m for m in messages(app)), messages(app)
            assert "counting corrupt rows…" not in title and "corrupt rows not counted" in title


async def test_a_failing_read_of_a_session_ends_opening_with_an_error(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "sessions"
    make_session(root, SID, "hello")

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("plan [@click=app.quit]broke")

    monkeypatch.setattr(entries, "replay_plan", broken)
    with open_session_dir(root, OpenMode.READ_ONLY) as sd:
        app = TranscriptHost(sd, SID)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, TranscriptScreen)
            assert "broke" in screen.error
            title = str(screen.query_one("#transcript-title", Static).render())
            assert "Opening session" not in title and "[@click=app.quit]broke" in title
            assert any("[@click=app.quit]broke" in m for m in messages(app))
            assert app.is_running


async def test_a_native_transcript_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    path = tmp_path / "gone \x1b[2J.jsonl"
    root = tmp_path / "sessions"
    root.mkdir()
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        app = NativeHost(sd, NativeRef("claude-code", path=str(path)))
        async with app.run_test(size=SIZE) as pilot:
            screen = await settle_native(pilot)
            assert screen.error and "cannot be read" in screen.error and "\x1b" not in screen.error
            title = str(screen.query_one("#transcript-title", Static).render())
            assert "Reading" not in title and "cannot be read" in title
            assert any("cannot be read" in m for m in messages(app))
