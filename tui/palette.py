"""The command palette (ctrl+p): the current screen's actions with their keys, "Open session…" and "Theme: <name>".

The actions come from the one action table (:mod:`tui.actions`): the app's scope, the scope the current screen
declares (``ACTION_SCOPE``) and the scopes its widgets declare. Disabled actions, and repairs in the read modes,
are left out.

Imported only when the palette opens, so the start path does not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Static

from store.safetext import safe
from tui import actions
from tui.context import services
from tui.safe import data_line, markup_escape

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen


def scope_of(node: object) -> str | None:
    """The action scope ``node``'s class declares (``ACTION_SCOPE``), or ``None``."""
    scope = getattr(type(node), "ACTION_SCOPE", None)
    return scope if isinstance(scope, str) else None


def _shown(node: DOMNode) -> bool:
    return all(n.display for n in node.ancestors_with_self if isinstance(n, Widget))


def scope_targets(screen: Screen[object]) -> dict[str, DOMNode]:
    """Which node runs the actions of each scope on ``screen``: the app for "app", the screen for its own scope,
    and for a widget scope the screen's widget that declares it (the focused one if several do, else the first
    shown one). The same rule for every screen: nothing here knows a screen by name."""
    targets: dict[str, DOMNode] = {"app": screen.app}
    own = scope_of(screen)
    if own is not None:
        targets[own] = screen
    candidates: dict[str, list[Widget]] = {}
    for widget in screen.walk_children(Widget):
        scope = scope_of(widget)
        if scope is not None and scope not in targets:
            candidates.setdefault(scope, []).append(widget)
    focused = screen.focused
    for scope, widgets in candidates.items():
        if focused in widgets:
            targets[scope] = focused
        else:
            targets[scope] = next((w for w in widgets if _shown(w)), widgets[0])
    return targets


@dataclass(frozen=True)
class PaletteCommand:
    """One entry of the palette: its text (our own strings), what it runs, its help line."""

    name: str
    run: Callable[[], object]
    help: str
    action_id: str | None = None
    key: str | None = None


def action_commands(screen: Screen[object]) -> list[PaletteCommand]:
    """The palette's actions for ``screen``: every palette action of the app's scope, the screen's scope and the
    scopes its widgets declare, each with its key as the key bar draws it (the user's keymap applied).

    An action its node disables (``check_action`` False or None) is not offered: "Back" on the first screen, and
    every repair (``writes=True``) in the read modes, which the key bar shows dimmed. The palette leaves such
    actions out rather than listing entries that would do nothing.
    """
    app = screen.app
    targets = scope_targets(screen)
    services_ = services(screen)
    keymap = services_.user_keymap if services_ is not None else {}
    commands: list[PaletteCommand] = []
    for spec in actions.all_actions():
        node = targets.get(spec.scope)
        if node is None or not spec.palette:
            continue
        if not node.check_action(_action_name(spec.action), ()):
            continue
        keys = keymap.get(spec.id, spec.key)
        first = keys.split(",")[0].strip()
        key = app.get_key_display(spec.binding().with_key(first, key_display=spec.key_display if keys == spec.key else None))
        commands.append(PaletteCommand(
            f"{spec.description}  [{key}]",
            partial(app.call_later, app.run_action, spec.action, node),
            spec.tooltip,
            action_id=spec.id,
            key=key,
        ))
    return commands


def _action_name(action: str) -> str:
    """The method part of an action string: ``check_action`` gets ``cursor`` for ``cursor(1)``."""
    return action.split("(", 1)[0].split(".")[-1]


class SessionscopeCommands(Provider):
    """The actions of the current screen and its widgets (see :func:`action_commands`), 'Open session…' and the
    themes."""

    def _commands(self) -> Iterator[PaletteCommand]:
        yield from action_commands(self.screen)
        app = self.app
        yield PaletteCommand("Open session…", lambda: app.call_later(app.run_action, "open_session_prompt"),
                             "Open a session by id or id prefix.")
        services_ = services(self.screen)
        names = services_.ordered_theme_names() if services_ is not None else sorted(app.available_themes)
        for name in names:
            yield PaletteCommand(f"Theme: {name}", partial(setattr, app, "theme", name),
                                 "Switch to this theme; the choice is remembered.")

    # The palette reads a str prompt or help text as markup: names hold "[/]" and theme names or paths may hold
    # brackets or control characters, so prompts are passed as Text / Content of safe text and help text is
    # made safe and escaped. ``[@click=app.quit]`` in a name is only characters.

    async def discover(self) -> Hits:
        for command in self._commands():
            shown = safe(command.name)
            yield DiscoveryHit(Text(shown), command.run, text=shown, help=markup_escape(command.help))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._commands():
            shown = safe(command.name)
            score = matcher.match(shown)
            if score > 0:
                yield Hit(score, matcher.highlight(escape(shown)), command.run, text=shown,
                          help=markup_escape(command.help))


class OpenSessionDialog(ModalScreen[None]):
    """Ask for a session id (or a unique prefix of one) and open its transcript."""

    BINDINGS: ClassVar = [actions.get("confirm.cancel").binding()]
    HELP_TITLE: ClassVar[str] = "Open session"

    DEFAULT_CSS = """
    OpenSessionDialog {
        align: center top;
        background: $background 50%;
    }
    OpenSessionDialog > #open-box {
        width: 70;
        max-width: 96%;
        height: auto;
        margin-top: 3;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
        padding: 0 1;
    }
    OpenSessionDialog #open-error {
        color: $error;
        height: auto;
    }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box") as box:
            box.border_title = "Open session"
            yield Input(placeholder="session id or a unique prefix (e.g. 3f9a)", id="open-id")
            yield Static("", id="open-error", markup=False)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted, "#open-id")
    def _submitted(self, event: Input.Submitted) -> None:
        self.query_one("#open-error", Static).update("Looking…")
        app = services(self)
        if app is None:
            raise RuntimeError("sessions are opened through the Sessionscope app")
        app.resolve_and_open(event.value)

    def show_error(self, error: str) -> None:
        self.query_one("#open-error", Static).update(data_line(error))
