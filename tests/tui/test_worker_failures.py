"""Nothing fails silently: a store call that raises inside a worker ends in one notification with the reason,
and the "…ing" line it left on screen ends too, whether the worker caught the error itself or not (the one
handler for every failed worker, :class:`tui.lifecycle.ReportsWorkerFailures`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.demo.model import DEMO_NOW_UNIX
from store.errors import StoreError
from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.rendered import notification_texts
from tests.tui.runswait import settle_runs, wait_for
from tests.tui.test_runs_screen import open_runs
from tui.app import SessionscopeApp
from tui.widgets import run_timeline
from tui.widgets.run_list import RunList
from tui.widgets.run_timeline import RunTimeline
from tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.anyio

SIZE = (120, 36)
REASON = "the disk is on fire [/] \x1b[2J"


def _boom(*_args: object, **_kwargs: object) -> object:
    raise StoreError(REASON)


def _bug(*_args: object, **_kwargs: object) -> object:
    raise RuntimeError(REASON)


def _notified(app: SessionscopeApp, *parts: str) -> bool:
    return any(all(part in text for part in parts) for text in notification_texts(app))


async def test_a_failing_store_call_is_notified_and_reading_runs_ends(
    demo_master: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import store.mothx.run_listing

    monkeypatch.setattr(store.mothx.run_listing, "list_runs", _boom)  # every read of the Runs list goes through it
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        await wait_for(pilot, lambda: _notified(app, "the disk is on fire [/] ␛[2J"), "the notification")
        status = screen.query_one(StatusBar).count
        assert "Reading" not in status and "the disk is on fire" in status, status
        assert "Reading runs" not in screen.query_one(RunList).render_line(1).text


async def test_an_error_no_worker_caught_is_one_notification_and_reading_events_ends(
    demo_master: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own error path is bypassed (its result cannot even be posted): the app's handler
    notifies, and the timeline stops saying "Reading events…"."""
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, clock=lambda: DEMO_NOW_UNIX)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_runs(pilot)
        monkeypatch.setattr(run_timeline, "EventsLoaded", _bug)
        timeline = screen.query_one(RunTimeline)
        lst = screen.query_one(RunList)
        lst.focus()
        await pilot.press("j")
        await settle_runs(pilot)
        await wait_for(pilot, lambda: _notified(app, "Read run events failed", "Unexpected RuntimeError"),
                       "the notification")
        assert sum(1 for text in notification_texts(app) if "Read run events failed" in text) == 1
        assert timeline.loaded and "the disk is on fire" in timeline.error
        assert "Reading events" not in timeline.render_line(1).text
        assert app.return_code is None, "a failed worker never ends the app"


async def test_an_optional_count_that_fails_is_not_silent(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.mothx.sessions

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        monkeypatch.setattr(store.mothx.sessions, "count_sessions", _boom)
        await pilot.press("slash")
        await pilot.press(*"atlas")
        await pilot.press("enter")
        await wait_for(pilot, lambda: _notified(app, "Count sessions failed", "the disk is on fire"),
                       "the notification")
        await settle(pilot)
        assert "(filtered)" in app.screen.query_one(StatusBar).count


async def test_the_integrity_line_ends_when_its_worker_fails(demo_master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.background

    monkeypatch.setattr(tui.background, "IntegrityChecked", _bug)
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: _notified(app, "Integrity check failed", "the disk is on fire"),
                       "the notification")
        await pilot.pause()
        assert app.integrity.startswith("integrity FAILED") and "checking" not in app.integrity
        assert "integrity FAILED" in app.screen.query_one(StatusBar).render().plain


def test_every_class_that_starts_workers_reports_their_failures() -> None:
    """Textual tells only a worker's own node that it failed: each class that starts workers (``run_worker`` or
    ``@work``) must have the mixin that turns the failure into one notification."""
    import importlib
    import inspect
    import pkgutil
    import re

    import tui
    from tui.lifecycle import ReportsWorkerFailures

    starts = re.compile(r"\brun_worker\(|^\s*@work\b", re.MULTILINE)
    checked: list[str] = []
    missing: list[str] = []
    for info in pkgutil.walk_packages(tui.__path__, "tui."):
        if info.name.startswith("tui.cli") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if not isinstance(value, type) or value.__module__ != info.name:
                continue
            if starts.search(inspect.getsource(value)):
                checked.append(value.__qualname__)
                if not issubclass(value, ReportsWorkerFailures):
                    missing.append(f"{info.name}.{value.__qualname__}")
    assert len(checked) >= 8
    assert missing == []
