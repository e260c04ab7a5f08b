"""The one registry of the app's actions, and the registry of top-level sections.

Every key the app answers to is declared here once, as an :class:`ActionSpec`: its id (the name users remap in
``keymap.toml``), its default key, a description (footer and help) and a tooltip (footer hover, help, palette).
From this one list come the ``BINDINGS`` of the app, screens and widgets (:func:`bindings`), the user keymap
(:func:`load_keymap`), the help screen and the command palette. Adding an action is one :func:`register` call.

Actions that write (repairs) carry ``writes=True``: in the two read modes :func:`check_write` makes
``check_action()`` return ``None``, so the key is shown dimmed and does nothing. The store refuses the write again
on its own (``SessionDir.require_writable``); the keys are only the first fence.

This module imports nothing from Textual but :class:`textual.binding.Binding` (cheap), so the keymap and the
registry can be read and tested without starting an app.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from textual.binding import Binding, BindingType

Scope = str
"""Where an action's binding lives: "app", "sessions", "session-list", "transcript", … (one per node type)."""

SCOPE_TITLES: dict[str, str] = {
    "app": "Everywhere",
    "sessions": "Sessions screen",
    "session-list": "Session list",
    "welcome": "Welcome screen",
    "help": "Help",
    "confirm": "Confirm dialog",
}


@dataclass(frozen=True)
class ActionSpec:
    """One action of the app: what a key does, under which id users remap it."""

    id: str  # binding id, "<scope>.<name>"; the name users write in keymap.toml
    action: str  # the Textual action string run by the key, e.g. "cursor_down" or "app.quit"
    key: str  # default key(s), Textual key names, comma separated
    description: str  # short: footer and help
    tooltip: str  # one sentence: footer tooltip, help, palette
    scope: Scope
    show: bool = True  # shown in the footer
    writes: bool = False  # a repair: blocked in the read modes
    priority: bool = False
    key_display: str | None = None
    palette: bool = True  # offered in the command palette

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.description,
            show=self.show,
            key_display=self.key_display,
            priority=self.priority,
            tooltip=self.tooltip,
            id=self.id,
        )


_REGISTRY: dict[str, ActionSpec] = {}

ACTION_MODULES: list[str] = [
    "tui.screens.sessions",
    "tui.screens.transcript_actions",
    "tui.screens.transcript",
    "tui.screens.checkpoints",
    "tui.widgets.checkpoint_list",
    "tui.screens.runs",
]
"""Modules that register more actions when imported (screens opened later). The app imports them in the
background after the first paint, then checks the user's keymap against the complete registry."""


def register(spec: ActionSpec) -> ActionSpec:
    """Add ``spec`` to the registry (replacing one with the same id) and return it."""
    _REGISTRY[spec.id] = spec
    return spec


def unregister(action_id: str) -> None:
    _REGISTRY.pop(action_id, None)


def get(action_id: str) -> ActionSpec:
    return _REGISTRY[action_id]


def find(action_id: str | None) -> ActionSpec | None:
    return _REGISTRY.get(action_id) if action_id else None


def all_actions() -> list[ActionSpec]:
    return list(_REGISTRY.values())


def in_scope(scope: str) -> list[ActionSpec]:
    return [spec for spec in _REGISTRY.values() if spec.scope == scope]


def bindings(scope: str) -> list[BindingType]:
    """The ``BINDINGS`` list of the node that owns ``scope``."""
    return [spec.binding() for spec in in_scope(scope)]


def spec_for_action(action: str, scope: str | None = None) -> ActionSpec | None:
    """The registered spec whose action string is ``action`` (``app.`` / ``screen.`` prefixes ignored)."""
    bare = action.split(".", 1)[1] if action.startswith(("app.", "screen.")) else action
    for spec in _REGISTRY.values():
        spec_bare = spec.action.split(".", 1)[1] if spec.action.startswith(("app.", "screen.")) else spec.action
        if spec_bare == bare and (scope is None or spec.scope == scope):
            return spec
    return None


def is_write_action(action: str) -> bool:
    spec = spec_for_action(action)
    return spec is not None and spec.writes


def check_write(action: str, writable: bool) -> bool | None:
    """For ``check_action``: ``None`` (shown dimmed, blocked) for a repair action when writes are not allowed."""
    if not writable and is_write_action(action):
        return None
    return True


# --- the actions -----------------------------------------------------------------------------------------------

A = register

# Everywhere (App.BINDINGS)
A(ActionSpec("app.help", "help", "question_mark,f1", "Help", "Show the keys of the focused widget, this screen and the app.", "app"))
A(ActionSpec("app.palette", "command_palette", "ctrl+p", "Palette", "Open the command palette: every action, themes, open a session.", "app", show=False, priority=True, palette=False))
A(ActionSpec("app.jump", "jump", "colon", "Jump", "Jump to a section (Sessions, …).", "app"))
A(ActionSpec("app.theme-cycle", "cycle_theme", "ctrl+t", "Theme", "Switch to the next theme; the choice is remembered.", "app", show=False))
A(ActionSpec("app.back", "back", "escape", "Back", "Close this screen and go back.", "app", show=False))
A(ActionSpec("app.quit", "quit", "q", "Quit", "Quit Sessionscope.", "app"))
A(ActionSpec("app.force-quit", "quit", "ctrl+q", "Quit", "Quit Sessionscope from anywhere, even while typing.", "app", show=False, priority=True, palette=False))

# Sessions screen
A(ActionSpec("sessions.filter", "filter", "slash", "Filter", "Type to filter sessions by id, work dir, channel or text.", "sessions"))
A(ActionSpec("sessions.clear-filter", "clear_filter", "escape", "Clear", "Clear the filter and facet; close the filter box.", "sessions", show=False))
A(ActionSpec("sessions.sort", "cycle_sort", "s", "Sort", "Sort by the next key: last active, title, messages, work dir, created.", "sessions"))
A(ActionSpec("sessions.reverse", "reverse_sort", "S", "Reverse", "Reverse the sort order.", "sessions", show=False))
A(ActionSpec("sessions.facet", "pick_facet", "f", "Facet", "Show only one work dir, project or channel.", "sessions"))
A(ActionSpec("sessions.refresh", "refresh", "r", "Refresh", "Re-read the list from the database, keeping the cursor.", "sessions"))

# Session list (the focused widget of the Sessions screen)
A(ActionSpec("list.down", "cursor_down", "j,down", "Down", "Move the cursor down one row.", "session-list", show=False, palette=False))
A(ActionSpec("list.up", "cursor_up", "k,up", "Up", "Move the cursor up one row.", "session-list", show=False, palette=False))
A(ActionSpec("list.top", "cursor_top", "g,home", "Top", "Go to the first session.", "session-list", show=False))
A(ActionSpec("list.bottom", "cursor_bottom", "G,end", "Bottom", "Go to the last session.", "session-list", show=False))
A(ActionSpec("list.page-down", "page_down", "pagedown", "Page down", "Move the cursor one page down.", "session-list", show=False, palette=False))
A(ActionSpec("list.page-up", "page_up", "pageup", "Page up", "Move the cursor one page up.", "session-list", show=False, palette=False))
A(ActionSpec("list.open", "open", "enter", "Open", "Open the session under the cursor as a transcript.", "session-list"))

# Welcome screen
A(ActionSpec("welcome.demo", "open_demo", "d", "Open demo", "Build (or reuse) the demo session directory and open it read-write.", "welcome"))

# Help screen
A(ActionSpec("help.close", "close", "escape,question_mark,q", "Close", "Close the help.", "help", palette=False))

# Confirm dialog. An action that opens it must use another key than confirm.apply (see tui.widgets.confirm)
A(ActionSpec("confirm.cancel", "cancel", "escape,n", "Cancel", "Close the dialog without changing anything.", "confirm", palette=False))
A(ActionSpec("confirm.apply", "confirm", "y", "Apply", "Apply the change shown in the dialog.", "confirm", palette=False))

del A


# --- the user keymap -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeymapLoad:
    """What ``keymap.toml`` asked for: the keymap to apply and one line per problem found."""

    keymap: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def _flatten(table: dict[str, object], prefix: str = "") -> Iterable[tuple[str, object]]:
    for name, value in table.items():
        full = f"{prefix}.{name}" if prefix else name
        if isinstance(value, dict):
            yield from _flatten(value, full)
        else:
            yield full, value


def parse_keymap(text: str, source: str = "keymap.toml") -> KeymapLoad:
    """Read ``[keymap] action_id = "key"`` from TOML text.

    Dotted ids may be written bare (``sessions.filter = "F"``, which TOML reads as a nested table) or quoted.
    A value may be a string (``"j,down"``) or a list of keys. Bad values are reported, not fatal. Ids are not
    checked here (screens register their actions when first imported): see :func:`unknown_ids`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return KeymapLoad(problems=(f"{source} is not valid TOML: {exc}.",))
    table = data.get("keymap", {})
    if not isinstance(table, dict):
        return KeymapLoad(problems=(f"{source}: [keymap] must be a table of action ids.",))
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for action_id, value in _flatten(table):
        if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
            keys = ",".join(v.strip() for v in value)
        elif isinstance(value, str) and value.strip():
            keys = ",".join(part.strip() for part in value.split(",") if part.strip())
        else:
            problems.append(f"{source}: the key for '{action_id}' must be a non-empty string.")
            continue
        keymap[action_id] = keys
    return KeymapLoad(keymap=keymap, problems=tuple(problems))


def unknown_ids(keymap: dict[str, str]) -> list[str]:
    """The ids of ``keymap`` that no registered action has (check after :data:`ACTION_MODULES` are imported)."""
    return [action_id for action_id in keymap if action_id not in _REGISTRY]


def import_action_modules() -> list[str]:
    """Import every module of :data:`ACTION_MODULES`; return one line per module that failed to import."""
    import importlib

    failures: list[str] = []
    for name in ACTION_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a missing screen must not stop the app
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
    return failures


def load_keymap(path: Path) -> KeymapLoad:
    """The keymap in ``path``; an empty one when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return KeymapLoad()
    except OSError as exc:
        return KeymapLoad(problems=(f"{path} cannot be read: {exc.strerror or exc}.",))
    return parse_keymap(text, source=str(path))


def keymap_path() -> Path:
    from store.paths import config_dir

    return config_dir() / "keymap.toml"


# --- sections (the ':' jump) -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """A top-level section of the app. ``open`` makes the section's screen current."""

    id: str
    title: str
    description: str
    open: Callable[[object], None]  # called with the App


_SECTIONS: dict[str, Section] = {}


def register_section(section: Section) -> Section:
    _SECTIONS[section.id] = section
    return section


def sections() -> list[Section]:
    return list(_SECTIONS.values())


def _section_screen(module: str, class_name: str) -> Callable[[object], None]:
    """An opener that imports the section's screen module only when the section is first shown."""

    def open_section(app: object) -> None:
        import importlib

        try:
            screen_type = getattr(importlib.import_module(module), class_name)
        except (ImportError, AttributeError) as exc:
            from tui.safe import notify

            notify(app, f"This section is not available: {exc}.", severity="error")  # type: ignore[arg-type]
            return
        getattr(app, "show_section_screen")(screen_type)  # noqa: B009 - the App, typed as object

    return open_section


register_section(Section("sessions", "Sessions", "Every session: filter, sort, open a transcript.",
                         _section_screen("tui.screens.sessions", "SessionsScreen")))
register_section(Section("runs", "Runs", "Active and recent runs, leases, recovery: recover orphans, release leases.",
                         _section_screen("tui.screens.runs", "RunsScreen")))
register_section(Section("checkpoints", "Checkpoints", "External-agent checkpoints: verify, publish a reset.",
                         _section_screen("tui.screens.checkpoints", "CheckpointsScreen")))
