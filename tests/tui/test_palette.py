"""The command palette offers every action of the current screen with its key, and the action table is sound.

The palette reads the one action table (tui.actions) through the scopes the screen and its widgets declare
(``ACTION_SCOPE``): no screen is special-cased, so the Runs, Transcript and Checkpoints screens find their own
actions as the Sessions screen does. These tests ask the palette's provider itself (its discovery and search).
"""

from __future__ import annotations

import importlib
import inspect
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.binding import Binding
from textual.command import CommandPalette
from textual.dom import DOMNode
from textual.pilot import Pilot
from textual.screen import Screen

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tests.tui.runswait import settle_runs
from tests.tui.transcript_support import find_demo_sessions
from tests.tui.transcript_support import settle as settle_transcript
from tui import actions
from tui.app import SessionscopeApp
from tui.context import AppServices, services
from tui.palette import SessionscopeCommands, action_commands, scope_targets

pytestmark = pytest.mark.anyio

SIZE = (120, 36)

def _modules(package: str) -> tuple[str, ...]:
    import pkgutil

    return tuple(sorted(info.name for info in pkgutil.iter_modules(importlib.import_module(package).__path__,
                                                                   f"{package}.")))


# Every screen and widget module (a new screen needs no edit here), and the palette.
SCREEN_MODULES = (*_modules("tui.screens"), "tui.palette")
WIDGET_MODULES = _modules("tui.widgets")


# --- helpers ----------------------------------------------------------------------------------------------------


def key_shown(app: App[Any], spec: actions.ActionSpec) -> str:
    """The key as the key bar draws it: the first default key, through the app's key display."""
    first = spec.key.split(",")[0]
    return app.get_key_display(spec.binding().with_key(first, key_display=spec.key_display))


async def palette_texts(screen: Screen[Any], query: str | None = None) -> list[str]:
    """What the palette's provider offers on ``screen``: its discovery hits, or its search hits for ``query``."""
    provider = SessionscopeCommands(screen)
    if query is None:
        return [hit.text or "" async for hit in provider.discover()]
    return [hit.text or "" async for hit in provider.search(query)]


async def assert_offers_scopes(screen: Screen[Any], scopes: set[str], *, absent: frozenset[str] = frozenset()) -> None:
    """Every palette action of ``scopes`` is offered with its key, except the ids in ``absent`` (disabled here)."""
    app = screen.app
    assert set(scope_targets(screen)) >= scopes | {"app"}, f"scopes found: {sorted(scope_targets(screen))}"
    texts = await palette_texts(screen)
    for spec in actions.ACTIONS:
        if spec.scope not in scopes or not spec.palette:
            continue
        text = f"{spec.description}  [{key_shown(app, spec)}]"
        if spec.id in absent:
            assert text not in texts, f"{spec.id} is disabled on {type(screen).__name__} but offered"
        else:
            assert text in texts, f"{spec.id} missing from the palette of {type(screen).__name__}: {texts}"
    offered = {c.action_id for c in action_commands(screen)}
    assert not {i for i in offered if i and not actions.get(i).palette}, "palette=False actions are not offered"
    foreign = {actions.get(i).scope for i in offered if i} - scopes - {"app"}
    assert not foreign, f"actions of other scopes offered on {type(screen).__name__}: {foreign}"


# --- screens ----------------------------------------------------------------------------------------------------


async def test_sessions_screen_palette(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        # Back has nothing to go back to on the first screen. The source switch is offered even without
        # captured sessions: pressed, it counts them again (a capture made while the app is open) or says why.
        await assert_offers_scopes(screen, {"app", "sessions", "session-list"},
                                   absent=frozenset({"app.back"}))
        texts = await palette_texts(screen)
        for literal in ("Filter  [/]", "Sort  [s]", "Runs  [R]", "Open  [⏎]", "Top  [g]", "Jump  [:]",
                        "Help  [?]", "Open session…"):
            assert literal in texts, f"{literal!r} not in {texts}"
        assert not any(t.startswith("Back  [") for t in texts)
        assert any(t.startswith("Theme: ") for t in texts)
        assert "Sort  [s]" in await palette_texts(screen, "sort")


async def test_transcript_screen_palette(demo_dir: Path) -> None:
    session_id = find_demo_sessions(demo_dir).long
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_transcript(session_id)
        await settle_transcript(pilot)
        screen = app.screen
        assert type(screen).__name__ == "TranscriptScreen"
        await assert_offers_scopes(screen, {"app", "transcript", "transcript-view"})
        texts = await palette_texts(screen)
        for literal in ("Raw  [tab]", "Runs  [R]", "Next turn  [n]", "Next marker  []]", "Copy  [y]", "Export  [e]", "Follow  [F]",
                        "First  [g]", "Last  [G]", "Back  [esc]"):
            assert literal in texts, f"{literal!r} not in {texts}"
        assert "Next turn  [n]" in await palette_texts(screen, "next turn")


async def test_runs_screen_palette(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_section(next(s for s in actions.SECTIONS if s.id == "runs"))
        await settle_runs(pilot)
        screen = app.screen
        assert type(screen).__name__ == "RunsScreen"
        await assert_offers_scopes(screen, {"app", "runs", "run-list", "run-timeline"})
        texts = await palette_texts(screen)
        for literal in ("Recover  [X]", "Release lease  [L]", "Orphaned  [o]", "Transcript  [⏎]", "Top  [g]"):
            assert literal in texts, f"{literal!r} not in {texts}"


async def test_runs_screen_palette_leaves_repairs_out_in_read_only(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_section(next(s for s in actions.SECTIONS if s.id == "runs"))
        await settle_runs(pilot)
        screen = app.screen
        repairs = frozenset(spec.id for spec in actions.in_scope("runs") if spec.writes)
        assert repairs == {"runs.recover", "runs.abandon-tools", "runs.release-lease"}
        await assert_offers_scopes(screen, {"app", "runs", "run-list", "run-timeline"}, absent=repairs)


async def test_checkpoints_screen_palette(demo_dir: Path) -> None:
    from tui.screens.checkpoints import CheckpointsScreen
    from tui.widgets.checkpoint_list import CheckpointList

    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.show_section_screen(CheckpointsScreen)
        await _wait(pilot, lambda: isinstance(app.screen, CheckpointsScreen)
                    and app.screen.query_one(CheckpointList).loaded)
        screen = app.screen
        await assert_offers_scopes(screen, {"app", "checkpoints", "checkpoint-list"})
        texts = await palette_texts(screen)
        for literal in ("Verify  [v]", "Verify all  [V]", "Reset  [^r]", "Repaired copy  [x]", "Open  [⏎]"):
            assert literal in texts, f"{literal!r} not in {texts}"


async def test_native_transcript_palette(real_fixtures: Path, tmp_path: Path) -> None:
    from store.agents.capture import capture_claude_code
    from store.mothx.sessiondir import open_session_dir
    from tui.screens.checkpoints import CheckpointsScreen
    from tui.screens.native_transcript import NativeTranscriptScreen
    from tui.widgets.checkpoint_list import CheckpointList

    root = tmp_path / "sessions"
    root.mkdir()
    source = tmp_path / "claude-code"
    shutil.copytree(real_fixtures / "claude-code", source)
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        capture_claude_code(sd, source)
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.show_section_screen(CheckpointsScreen)
        await _wait(pilot, lambda: isinstance(app.screen, CheckpointsScreen)
                    and app.screen.query_one(CheckpointList).loaded)
        app.screen.query_one(CheckpointList).focus()
        await pilot.press("enter")
        await _wait(pilot, lambda: isinstance(app.screen, NativeTranscriptScreen) and app.screen.loaded
                    and not app.screen.active_view.fetching)
        screen = app.screen
        texts = await palette_texts(screen)
        assert set(scope_targets(screen)) >= {"app", "native-transcript", "native-view"}
        for literal in ("Raw  [tab]", "Follow  [F]", "Copy  [y]", "Export  [e]", "First  [g]", "Last  [G]"):
            assert literal in texts, f"{literal!r} not in {texts}"
        offered = {c.action_id for c in action_commands(screen)}
        assert {actions.get(i).scope for i in offered if i} <= {"app", "native-transcript", "native-view"}


async def test_ctrl_p_lists_the_screens_actions(demo_dir: Path) -> None:
    """Through the real palette: ctrl+p on the Runs screen, type, and the Runs action is the option shown."""
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_section(next(s for s in actions.SECTIONS if s.id == "runs"))
        await settle_runs(pilot)
        runs = app.screen
        await pilot.press("ctrl+p")
        await _wait(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"orphaned")
        from textual.widgets import OptionList

        def shown() -> list[str]:
            options = app.screen.query_one(OptionList)
            return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]

        await _wait(pilot, lambda: any("Orphaned" in p for p in shown()))
        assert any("Orphaned  [o]" in p for p in shown()), shown()
        before = runs.scope.orphaned_only  # type: ignore[attr-defined]
        await pilot.press("enter")
        await _wait(pilot, lambda: app.screen is runs and runs.scope.orphaned_only is not before)  # type: ignore[attr-defined]


async def _wait(pilot: Pilot[Any], ready: Any, deadline_s: float = 20.0) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + deadline_s
    while True:
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if ready():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready: {pilot.app.screen!r}")
        await asyncio.sleep(0.02)


# --- the table --------------------------------------------------------------------------------------------------


def _scope_classes() -> dict[str, list[type[DOMNode]]]:
    """Every class of the app that declares a scope (ACTION_SCOPE), and the app for "app"."""
    found: dict[str, list[type[DOMNode]]] = {"app": [SessionscopeApp]}
    for name in (*SCREEN_MODULES, *WIDGET_MODULES):
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            scope = vars(cls).get("ACTION_SCOPE")
            if cls.__module__ == name and isinstance(scope, str) and issubclass(cls, DOMNode):
                found.setdefault(scope, []).append(cls)
    return found


def test_every_action_has_a_method_on_a_class_of_its_scope() -> None:
    classes = _scope_classes()
    for spec in actions.ACTIONS:
        assert spec.scope in classes, f"{spec.id}: no class declares ACTION_SCOPE = {spec.scope!r}"
        name = spec.action.split("(", 1)[0]
        if name.startswith(("app.", "screen.")):
            name = name.split(".", 1)[1]
        assert any(callable(getattr(cls, f"action_{name}", None)) for cls in classes[spec.scope]), (
            f"{spec.id}: no action_{name} on {[c.__name__ for c in classes[spec.scope]]}")


def test_scopes_are_declared_once_and_titled() -> None:
    classes = _scope_classes()
    assert set(classes) == {spec.scope for spec in actions.ACTIONS}, "a class declares a scope with no actions"
    assert set(classes) <= set(actions.SCOPE_TITLES), "every scope has a title (help, README)"
    for scope, owners in classes.items():
        for cls in owners:
            if scope != "app":
                ids = [b.id if isinstance(b, Binding) else None for b in cls.BINDINGS]
                assert ids == [s.id for s in actions.in_scope(scope)], cls.__name__


def test_action_ids_are_unique_and_keys_do_not_clash_in_a_scope() -> None:
    ids = Counter(spec.id for spec in actions.ACTIONS)
    assert [i for i, n in ids.items() if n > 1] == []
    for scope in actions.SCOPE_TITLES:
        keys = Counter(key.strip() for spec in actions.in_scope(scope) for key in spec.key.split(","))
        assert [k for k, n in keys.items() if n > 1] == [], f"{scope}: two actions share a key"
    for spec in actions.ACTIONS:
        assert spec.id.count(".") == 1 and spec.description and spec.tooltip, spec.id
        assert spec.scope in actions.SCOPE_TITLES, f"{spec.id}: undeclared scope {spec.scope!r}"
    assert [scope.id for scope in actions.SCOPES if not actions.in_scope(scope.id)] == [], "a scope with no action"


def test_sections_name_screens_that_exist() -> None:
    for section in actions.SECTIONS:
        screen = getattr(importlib.import_module(section.module), section.class_name)
        assert issubclass(screen, Screen) and vars(screen).get("ACTION_SCOPE") == section.id


def test_the_app_provides_the_services_screens_use(demo_dir: Path) -> None:
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    assert isinstance(app, AppServices)


async def test_a_host_app_has_no_services() -> None:
    """A bare App (as tests use to host one screen) is not Sessionscope's: services() says so, no silent no-op."""
    host = App[None]()
    async with host.run_test(size=SIZE):
        assert services(host.screen) is None


async def test_the_palette_shows_the_users_key(demo_dir: Path) -> None:
    """A key moved in keymap.toml shows in the palette as it does in the key bar."""
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.user_keymap = {"sessions.sort": "o,F2"}
        app.set_keymap(app.user_keymap)
        texts = await palette_texts(app.screen)
        assert "Sort  [o]" in texts and "Sort  [s]" not in texts
