"""Pilot tests of the app shell: open modes, welcome and error screens, keymap, themes, help, read-only guard."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import ClassVar

import pytest
from textual.widgets import Input, Static

from store.mothx.db import OpenMode
from tests.tui.appwait import settle
from tui import actions
from tui.app import SessionscopeApp
from tui.screens.help import HelpScreen
from tui.screens.sessions import SessionsScreen
from tui.screens.welcome import OpenFailedScreen, WelcomeScreen
from tui.widgets.confirm import ConfirmDialog, ConfirmRequest
from tui.widgets.header import AppHeader
from tui.widgets.session_list import SessionList
from tui.widgets.statusbar import StatusBar

pytestmark = pytest.mark.anyio  # async tests run on asyncio through the anyio plugin (anyio comes with watchfiles)

SIZE = (120, 36)


def _fingerprint(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


def _static_text(widget: Static) -> str:
    return str(widget.render())


# --- open modes -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [OpenMode.READ_WRITE, OpenMode.READ_ONLY, OpenMode.SNAPSHOT])
async def test_opens_demo_in_each_mode_with_its_badge(demo_dir: Path, mode: OpenMode) -> None:
    before = _fingerprint(demo_dir)
    app = SessionscopeApp(demo_dir, mode)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        assert app.sd is not None and app.sd.mode is mode
        header = app.screen.query_one(AppHeader)
        assert header.badge == mode.badge
        assert f" {mode.badge} " in header.render().plain
        session_list = app.screen.query_one(SessionList)
        assert session_list.total and session_list.total > 0
        assert session_list.visible_rows(), "the list shows rows"
        # A long path (a long TMPDIR) is cut at its start with "…": its end is always shown.
        assert header.location.endswith("sessions") and header.location[-40:] in header.render().plain
        from tui.widgets.keybar import KeyBar

        assert header.region.y == 0
        assert app.screen.query_one(StatusBar).region.y == SIZE[1] - 2, "status line just above the key bar"
        assert app.screen.query_one(KeyBar).region.y == SIZE[1] - 1
        assert app.integrity == "integrity ok"
    if mode.is_read:
        assert _fingerprint(demo_dir) == before, "a read mode changed a file"


async def test_header_shows_home_as_tilde(demo_master: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(demo_master.parent))
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.query_one(AppHeader).location == "~/" + demo_master.name


async def test_older_schema_is_read_only_with_a_notice(demo_dir: Path) -> None:
    conn = sqlite3.connect(demo_dir / "sessions.db")
    with conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = 43")
    conn.close()
    app = SessionscopeApp(demo_dir, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.sd is not None and not app.sd.writable
        assert app.screen.query_one(AppHeader).badge == "READ-ONLY"
        notice = app.screen.query_one("#notice", Static)
        assert notice.display
        assert "older" in _static_text(notice)


# --- welcome and errors ---------------------------------------------------------------------------------------


async def test_welcome_screen_when_no_session_dir() -> None:
    from store.paths import default_session_dir
    from tui.formatting import tildify

    app = SessionscopeApp(None, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, WelcomeScreen)
        title = _static_text(app.screen.query_one("#welcome-title", Static))
        assert title == f"No mothx session directory at {tildify(default_session_dir())}"
        await pilot.press("q")
    assert app.return_code == 0


async def test_welcome_d_opens_the_demo_read_write(demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.demo.build

    calls: list[object] = []

    def fake_ensure_demo(target_dir: Path | None = None) -> Path:
        calls.append(target_dir)
        return demo_dir

    monkeypatch.setattr(store.demo.build, "ensure_demo", fake_ensure_demo)
    app = SessionscopeApp(None, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await settle(pilot)
        assert calls == [None]
        assert isinstance(app.screen, SessionsScreen)
        assert app.sd is not None and app.sd.root == demo_dir and app.sd.mode is OpenMode.READ_WRITE
        assert app.screen.query_one(AppHeader).badge == "RW"
        assert app.screen.query_one(SessionList).visible_rows()


async def test_corrupt_sessions_db_shows_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "sessions.db").write_bytes(b"this is not a database at all\n" * 100)
    app = SessionscopeApp(folder, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OpenFailedScreen)
        error = _static_text(app.screen.query_one("#welcome-error", Static))
        assert "sessions.db" in error and "not a SQLite database" in error
        assert "Traceback" not in error and "\n" not in error
        assert any("not a SQLite database" in str(n.message) for n in app._notifications)
    assert app._exception is None


def _smash_index_page(db: Path, index: str) -> None:
    """Overwrite the cell pointers of one index's root page: the file still opens, quick_check fails."""
    conn = sqlite3.connect(db)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)).fetchone()[0]
    finally:
        conn.close()
    with db.open("r+b") as fh:
        fh.seek((root - 1) * page_size + 8)
        fh.write(b"\xff" * 64)


async def test_a_failed_integrity_check_is_one_clear_line(demo_dir: Path) -> None:
    _smash_index_page(demo_dir / "sessions.db", "idx_sessions_cwd")
    app = SessionscopeApp(demo_dir, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        assert app.integrity.startswith("integrity FAILED: ")
        assert "\n" not in app.integrity and "***" not in app.integrity
        status = app.screen.query_one(StatusBar)
        assert status.integrity == app.integrity and status.integrity_bad
        assert status.render().plain.rstrip().endswith(app.integrity)
        assert any(n.title == "Integrity check failed" for n in app._notifications)


def test_integrity_line_counts_the_problems() -> None:
    from tui.app import integrity_line

    report = "*** in database main ***\nOn tree page 9 cell 2: bad\nOn tree page 9 cell 1: bad; row 3 missing from index x"
    assert integrity_line(report) == "integrity FAILED: On tree page 9 cell 2: bad (+2 more)"


async def test_from_the_error_screen_d_opens_the_demo(tmp_path: Path, demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.demo.build

    monkeypatch.setattr(store.demo.build, "ensure_demo", lambda target_dir=None: demo_dir)
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "sessions.db").write_bytes(b"garbage" * 100)
    app = SessionscopeApp(folder, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OpenFailedScreen)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen) and len(app.screen_stack) == 1
        assert app.sd is not None and app.sd.root == demo_dir and app.sd.mode is OpenMode.READ_WRITE
        assert app.screen.query_one(AppHeader).badge == "RW"
        assert app.screen.query_one(SessionList).visible_rows()
        assert app.integrity == "integrity ok"


async def test_missing_directory_shows_a_clear_error(tmp_path: Path) -> None:
    app = SessionscopeApp(tmp_path / "nowhere", OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OpenFailedScreen)
        assert "no sessions.db" in _static_text(app.screen.query_one("#welcome-error", Static))


# --- keymap, help, themes -------------------------------------------------------------------------------------


async def test_user_keymap_overrides_a_key(demo_master: Path) -> None:
    from store.paths import config_dir

    config = config_dir()
    config.mkdir(parents=True, exist_ok=True)
    (config / "keymap.toml").write_text('[keymap]\nsessions.filter = "F"\n"list.down" = ["n", "down"]\n', encoding="utf-8")
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session_list = app.screen.query_one(SessionList)
        await pilot.press("slash")
        assert not app.screen.filter_visible, "the old key no longer opens the filter"
        await pilot.press("n")
        assert session_list.cursor == 1
        await pilot.press("j")
        assert session_list.cursor == 1, "j was replaced by n"
        await pilot.press("F")
        await pilot.pause()
        assert app.screen.filter_visible
        assert isinstance(app.focused, Input)


async def test_keymap_with_unknown_id_is_reported_not_fatal(demo_master: Path) -> None:
    from store.paths import config_dir

    config = config_dir()
    config.mkdir(parents=True, exist_ok=True)
    (config / "keymap.toml").write_text('[keymap]\nno.such-action = "x"\n', encoding="utf-8")
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        assert any("no.such-action" in str(n.message) for n in app._notifications)
        assert isinstance(app.screen, SessionsScreen)


async def test_help_lists_the_focused_widgets_bindings_first(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        groups = app.screen.groups
        assert groups[0].title == "Session list (focused)"
        ids = {row.action_id: row for row in groups[0].rows}
        assert {"list.down", "list.up", "list.open", "list.top", "list.bottom"} <= set(ids)
        assert ids["list.down"].keys == ["j", "↓"]
        assert ids["list.down"].description == "Down"
        titles = [g.title for g in groups]
        assert titles.index("Sessions screen") < titles.index("Everywhere")
        screen_ids = {row.action_id for g in groups if g.title == "Sessions screen" for row in g.rows}
        assert {"sessions.filter", "sessions.sort", "sessions.refresh"} <= screen_ids
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)


async def test_help_from_the_filter_box_lists_the_input_first(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.groups[0].title == "Input (focused)"


async def test_theme_cycles_and_is_remembered(demo_master: Path) -> None:
    from store import config
    from tui.theming import DEFAULT_THEME

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == DEFAULT_THEME
        names = app.theme_names
        assert len(names) >= 2 and DEFAULT_THEME in names
        await pilot.press("ctrl+t")
        await pilot.pause()
        expected = names[(names.index(DEFAULT_THEME) + 1) % len(names)]
        assert app.theme == expected
    assert config.load().get("theme") == expected
    assert f'theme = "{expected}"' in config.config_path().read_text(encoding="utf-8")
    again = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert again.theme == expected


async def test_palette_lists_actions_themes_and_open_session(demo_master: Path) -> None:
    from tui.palette import SessionscopeCommands

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        provider = SessionscopeCommands(app.screen)
        text = [hit.text or "" for hit in [h async for h in provider.discover()]]
        assert "Filter  [/]" in text
        assert any(t.startswith("Sort") for t in text)
        assert "Open session…" in text
        assert "Theme: sessionscope-light" in text
        hits = [h async for h in provider.search("sessionscope-light")]
        assert hits and hits[0].text == "Theme: sessionscope-light"
        hits[0].command()
        await pilot.pause()
        assert app.theme == "sessionscope-light"


async def test_palette_opens_and_runs_a_command(demo_master: Path) -> None:
    from textual.command import CommandPalette

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Filter")
        await pilot.pause(0.5)
        await pilot.press("down", "enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, SessionsScreen)
        assert app.screen.filter_visible
        await pilot.press("escape", "ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"contrast")
        await pilot.pause(0.5)
        await pilot.press("down", "enter")
        await pilot.pause(0.3)
        assert app.theme == "sessionscope-contrast"
    assert app._exception is None


# --- read-only guard --------------------------------------------------------------------------------------------

DUMMY = actions.ActionSpec(
    "test.dummy-repair", "dummy_repair", "x", "Dummy repair", "A repair that only counts calls.", "sessions", writes=True
)


class DummyRepairScreen(SessionsScreen):
    """The Sessions screen plus one write action, to test the read-mode guard."""

    BINDINGS: ClassVar = [*SessionsScreen.BINDINGS, DUMMY.binding()]

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def action_dummy_repair(self) -> None:
        self.calls += 1


@pytest.fixture
def dummy_repair() -> object:
    actions.register(DUMMY)
    yield DUMMY
    actions.unregister(DUMMY.id)


@pytest.mark.parametrize(
    ("mode", "allowed"), [(OpenMode.READ_WRITE, True), (OpenMode.READ_ONLY, False), (OpenMode.SNAPSHOT, False)]
)
async def test_read_modes_block_repair_actions(demo_dir: Path, dummy_repair: object, mode: OpenMode, allowed: bool) -> None:
    from store.errors import ReadOnlyStore

    app = SessionscopeApp(demo_dir, mode)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = DummyRepairScreen()
        await app.push_screen(screen)
        await settle(pilot)
        assert screen.active_bindings["x"].enabled is allowed
        from tui.widgets.keybar import KeyBar

        bar = screen.query_one(KeyBar).render()
        start = bar.plain.index("Dummy repair")
        dimmed = any(
            span.start <= start < span.end and getattr(span.style, "dim", False) for span in bar.spans
        )
        assert dimmed is (not allowed), "the key bar dims a repair exactly when it is blocked"
        await pilot.press("x")
        assert screen.calls == (1 if allowed else 0)
        assert app.sd is not None
        if not allowed:
            with pytest.raises(ReadOnlyStore):
                app.sd.require_writable()


def test_check_write_only_blocks_registered_write_actions(dummy_repair: object) -> None:
    assert actions.check_write("dummy_repair", writable=False) is None
    assert actions.check_write("dummy_repair", writable=True) is True
    assert actions.check_write("cycle_sort", writable=False) is True


# --- confirm dialog ---------------------------------------------------------------------------------------------


async def test_confirm_dialog_defaults_to_cancel(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    results: list[bool | None] = []
    request = ConfirmRequest("Recover 2 runs", "run a → interrupted\nrun b → interrupted", affected=2, noun="run", hidden_by_filter=3, opened_by="R")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.push_screen(ConfirmDialog(request), results.append)
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "confirm-cancel"
        counts = _static_text(app.screen.query_one("#confirm-counts", Static))
        assert counts == "2 runs will change. 3 more runs hidden by the filter are not included."
        await pilot.press("enter")
        await pilot.pause()
        assert results == [False]
        app.push_screen(ConfirmDialog(request), results.append)
        await pilot.pause()
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog), "the opening key does not confirm"
        await pilot.press("y")
        await pilot.pause()
        assert results == [False, True]


async def test_confirm_dialog_with_a_phrase_needs_the_phrase(demo_master: Path) -> None:
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    results: list[bool | None] = []
    request = ConfirmRequest("Delete 40 sessions", "40 sessions", affected=40, noun="session", phrase="delete 40")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.push_screen(ConfirmDialog(request), results.append)
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert results == [] and isinstance(app.screen, ConfirmDialog)
        phrase = app.screen.query_one("#confirm-phrase", Input)
        assert app.focused is phrase, "a refused confirm puts the cursor in the phrase box"
        await pilot.press(*"delete 4", "enter")
        await pilot.pause()
        assert results == [], "a wrong phrase does not confirm"
        await pilot.press("0", "enter")
        await pilot.pause()
        assert results == [True]


def test_confirm_key_must_differ_from_the_opening_key() -> None:
    with pytest.raises(ValueError, match="cannot also confirm"):
        ConfirmDialog(ConfirmRequest("x", "y", affected=1, opened_by="y"))


# --- keymap parsing (no app) ------------------------------------------------------------------------------------


def test_parse_keymap_accepts_dotted_and_quoted_ids() -> None:
    loaded = actions.parse_keymap('[keymap]\nsessions.filter = "F"\n"list.down" = ["n", "down"]\nbogus = "x"\nlist.up = 3\n')
    assert loaded.keymap == {"sessions.filter": "F", "list.down": "n,down", "bogus": "x"}
    assert loaded.problems == ("config.toml: the key for 'list.up' must be a non-empty string.",)
    assert actions.unknown_ids(loaded.keymap) == ["bogus"]
    assert actions.parse_keymap("[keymap\n").problems[0].startswith("config.toml is not valid TOML")


def test_every_binding_has_an_id_and_a_tooltip() -> None:
    for owner in (SessionscopeApp, SessionsScreen, SessionList, WelcomeScreen, OpenFailedScreen, HelpScreen, ConfirmDialog):
        for binding in owner.BINDINGS:
            assert binding.id, f"{owner.__name__}: {binding.key} has no id"
            assert binding.tooltip, f"{owner.__name__}: {binding.id} has no tooltip"
            assert actions.find(binding.id) is not None


# --- start-up -------------------------------------------------------------------------------------------------


async def test_one_opening_worker_posts_store_opened_and_the_rows_are_drawn(
        demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker opens the store (started when the app loads); its StoreOpened attaches the Sessions screen."""
    import tui.app as app_module

    workers: list[object] = []
    real_open = app_module.SessionscopeApp._open_store

    def counted(self: SessionscopeApp, *a: object, **k: object) -> object:
        workers.append(a)
        return real_open(self, *a, **k)

    monkeypatch.setattr(app_module.SessionscopeApp, "_open_store", counted)
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.sd is not None and app.screen.query_one(SessionList).visible_rows()
        assert app.first_page is None                 # the first window was taken once
    assert workers == [(demo_dir, OpenMode.READ_ONLY)]  # exactly one opening


def test_start_up_uses_no_private_textual_module() -> None:
    import inspect

    import tui.app as app_module

    source = inspect.getsource(app_module)
    for private in ("textual._", "_refresh_truecolor_filter", "set_reactive", "threading.Thread(target=self._run"):
        assert private not in source, private


async def test_a_slow_opening_shows_opening_first_then_the_rows(demo_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import tui.app as app_module

    real = app_module.open_and_read

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(1.0)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(app_module, "open_and_read", slow)
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(12):         # the first screen awaits the opening for FIRST_PAINT_HOLD_S, then says so
            await pilot.pause(0.05)
            if "Opening" in app.screen.query_one(StatusBar).count:
                break
        assert app.sd is None and "Opening" in app.screen.query_one(StatusBar).count
        for _ in range(100):
            await pilot.pause(0.05)
            if app.sd is not None and app.screen.query_one(SessionList).visible_rows():
                break
        assert app.sd is not None and app.screen.query_one(SessionList).visible_rows()


async def test_a_quit_while_opening_closes_the_store_the_worker_opens(demo_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    import tui.app as app_module

    real = app_module.open_and_read
    release = threading.Event()
    opened: list[object] = []

    def held(*args: object, **kwargs: object) -> object:
        release.wait(5)
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(result.sd)
        return result

    monkeypatch.setattr(app_module, "open_and_read", held)
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.05)
    release.set()
    for _ in range(100):
        if opened:
            break
        time.sleep(0.05)
    time.sleep(0.1)
    assert opened and opened[0] is not None
    with pytest.raises(sqlite3.ProgrammingError):     # closed by the worker itself: the app had quit
        opened[0].db.conn.execute("SELECT 1")  # type: ignore[attr-defined]


async def test_entries_deleted_since_the_list_cache_was_written_are_shown_after_the_first_paint(
        demo_dir: Path) -> None:
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.sessions import list_sessions

    with open_session_dir(demo_dir, OpenMode.READ_ONLY) as sd:      # the list cache is written
        row = next(r for r in list_sessions(sd, limit=12).rows if r.message_count > 3)   # on the first screen
    conn = sqlite3.connect(demo_dir / "sessions.db")
    with conn:                                                    # a foreign tool deletes some of its messages
        conn.execute("DELETE FROM entries WHERE seq IN (SELECT seq FROM entries WHERE session_id = ? "
                     "AND type = 'message' ORDER BY seq DESC LIMIT 2)", (row.id,))
    conn.close()
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        shown = {}
        for _ in range(100):
            lst = app.screen.query_one(SessionList)
            shown = {r.id: r.message_count for r in lst.visible_rows()}
            if shown.get(row.id) == row.message_count - 2:
                break
            await pilot.pause(0.05)
        assert shown.get(row.id) == row.message_count - 2


async def test_a_first_open_draws_provisional_rows_then_builds_the_list_cache(
        demo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import tui.app as app_module
    from store.mothx.sessiondir import open_session_dir
    from store.mothx.sessionindex import cache_path_for
    from store.mothx.sessions import list_sessions

    cache = cache_path_for(demo_dir / "sessions.db")
    for path in (cache, Path(f"{cache}-wal"), Path(f"{cache}-shm")):
        path.unlink(missing_ok=True)
    release = threading.Event()
    real_build = app_module.SessionscopeApp._build_list.__wrapped__  # type: ignore[attr-defined]
    held: list[bool] = []

    def build(self: SessionscopeApp, sd: object) -> None:
        held.append(release.wait(10))
        real_build(self, sd)

    from textual import work

    monkeypatch.setattr(app_module.SessionscopeApp, "_build_list",
                        work(thread=True, exclusive=True, group="list-build", exit_on_error=False)(build))
    app = SessionscopeApp(demo_dir, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if app.sd is not None and app.screen.query_one(SessionList).visible_rows():
                break
        first = app.screen.query_one(SessionList).visible_rows()
        assert first and all(row.message_count == 0 for row in first)         # provisional: no counts yet
        assert app.integrity == app_module.LIST_BUILDING
        assert not app._integrity_started                                     # the checks wait for the cache
        release.set()
        for _ in range(200):
            await pilot.pause(0.05)
            if app.integrity.startswith("integrity"):
                break
        assert app.integrity == "integrity ok"
        with open_session_dir(demo_dir, OpenMode.READ_ONLY) as sd:
            want = list_sessions(sd, limit=len(app.screen.query_one(SessionList).visible_rows())).rows
        shown = app.screen.query_one(SessionList).visible_rows()
        assert [r.id for r in shown] == [r.id for r in want]                  # the real order and counts
        assert [r.message_count for r in shown] == [r.message_count for r in want]
    assert held == [True]


async def test_a_bad_config_is_one_line_per_problem_and_the_app_starts(demo_master: Path) -> None:
    from store import config
    from tests.tui.rendered import notification_texts

    path = config.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('thme = "x"\nmouse = "yes"\n[keymap]\n"app.nope" = "x"\n"app.quit" = "x"\n', encoding="utf-8")
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        texts = notification_texts(app)
        assert any("unknown setting 'thme'" in t for t in texts), texts
        assert any("mouse must be true or false" in t for t in texts), texts
        assert any("unknown action id 'app.nope'" in t for t in texts), texts
        assert app.user_keymap == {"app.nope": "x", "app.quit": "x"}
        assert app.return_code is None
        await pilot.press("x")  # the remapped quit
        for _ in range(20):
            await pilot.pause(0.05)
            if app.return_code is not None:
                break
        assert app.return_code == 0, "x quits: the keymap of config.toml applied"


async def test_lists_show_times_in_the_configured_zone_and_format(demo_master: Path) -> None:
    from store import config, times
    from store.mothx.sessions import get_session
    from tui.widgets.session_list import SessionList

    config.set_value("time_zone", "Asia/Tokyo")
    config.set_value("date_format", "%d.%m.%Y %H:%M")
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    try:
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            session_list = app.screen.query_one(SessionList)
            header = session_list.render_line(0).text
            assert "LAST ACTIVE Asia/Tokyo" in header, header
            row = session_list.rows[0]
            assert app.sd is not None
            stamp = get_session(app.sd, row.id).last_active_at
            moment = times.parse_rfc3339(stamp)
            assert moment is not None
            from zoneinfo import ZoneInfo

            expected = moment.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%d.%m.%Y %H:%M")
            assert expected in session_list.render_line(1).text
    finally:
        times.set_display()  # the process-wide default again for the other tests


async def test_the_ansi_theme_uses_the_terminals_palette_and_an_unknown_theme_falls_back(
        demo_master: Path, tmp_path: Path) -> None:
    from store import config
    from tests.tui.rendered import notification_texts
    from tui.theming import DEFAULT_THEME, load_themes

    ansi = next(t for t in load_themes().themes if t.name == "sessionscope-ansi")
    assert ansi.ansi and ansi.primary == "ansi_blue"
    config.set_value("theme", "sessionscope-ansi")
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "sessionscope-ansi"
    config.set_value("theme", "no-such-theme")
    broken = tmp_path / "themes"
    broken.mkdir()
    (broken / "bad.toml").write_text("name = \n", encoding="utf-8")
    for theme in load_themes().themes:
        (broken / f"{theme.name}.toml").write_text(
            (Path(__file__).resolve().parents[2] / "themes" / f"{theme.name}.toml").read_text(encoding="utf-8"))
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT, themes_dir=broken)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == DEFAULT_THEME
        texts = notification_texts(app)
        assert any("there is no theme 'no-such-theme'" in t for t in texts), texts
        assert any("bad.toml is not valid TOML" in t for t in texts), texts


async def test_the_first_run_shows_where_the_keys_are_once(demo_master: Path) -> None:
    from tui.app import first_run_marker
    from tui.widgets.statusbar import FIRST_RUN_HINT, StatusBar

    first_run_marker().unlink()
    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(StatusBar)
        assert FIRST_RUN_HINT in bar.render().plain
    assert first_run_marker().exists()
    again = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with again.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        assert "new here?" not in again.screen.query_one(StatusBar).render().plain


async def test_help_says_what_the_screen_is_for(demo_master: Path) -> None:
    from textual.widgets import Static

    from tui.screens.help import HelpScreen

    app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        about = str(app.screen.query_one("#help-about", Static).render())
        assert about.startswith("Sessions: Every session"), about


async def test_the_theme_chosen_at_start_styles_the_first_screen_and_the_collector_is_restored(
        demo_master: Path) -> None:
    """The theme set in ``__init__`` is applied without a second parse (``refresh_css`` before the first screen
    only sets the variables): the first screen's colours are the chosen theme's, for the default and for a
    remembered light theme. After the first paint the garbage collector's thresholds are the defaults again."""
    import gc

    from textual.color import Color

    import tui
    from store import config

    for name in ("sessionscope-dark", "sessionscope-light"):
        config.set_value("theme", name)
        app = SessionscopeApp(demo_master, OpenMode.SNAPSHOT)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            theme = app.get_theme(name)
            assert app.theme == name and theme is not None
            assert app.screen.styles.background == Color.parse(theme.background or "")
            assert gc.get_threshold() == tui._DEFAULT_GC
            await pilot.press("ctrl+t")  # a theme change after start still re-styles the screen
            await pilot.pause()
            other = app.get_theme(app.theme)
            assert other is not None and app.theme != name
            assert app.screen.styles.background == Color.parse(other.background or "")
