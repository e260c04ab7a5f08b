"""The command palette (ctrl+p): every registered action, "Theme: <name>" entries, and "Open session…".

Imported only when the palette opens, so the start path does not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from store.safetext import safe
from tui import actions
from tui.safe import data_line, markup_escape

if TYPE_CHECKING:
    from textual.dom import DOMNode


class SessionscopeCommands(Provider):
    """Commands of the action registry that apply to the current screen, plus themes and 'Open session…'."""

    def _targets(self) -> dict[str, DOMNode]:
        """Which node runs the actions of each scope, for the screen the palette was opened from."""
        from tui.widgets.session_list import SessionList

        screen = self.screen
        targets: dict[str, DOMNode] = {"app": self.app}
        scope = getattr(type(screen), "ACTION_SCOPE", None)
        from tui.screens.sessions import SessionsScreen

        if isinstance(screen, SessionsScreen):
            targets["sessions"] = screen
            lists = screen.query(SessionList)
            if lists:
                targets["session-list"] = lists.first()
        elif scope:
            targets[str(scope)] = screen
        return targets

    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        targets = self._targets()
        writable = bool(getattr(self.app, "sd", None) and self.app.sd.writable)  # type: ignore[attr-defined]
        for spec in actions.all_actions():
            if not spec.palette or spec.scope not in targets:
                continue
            if spec.writes and not writable:
                continue
            node = targets[spec.scope]
            if not node.check_action(spec.action, ()):
                continue  # disabled or hidden here (e.g. "Back" on the first screen)
            key = self.app.get_key_display(spec.binding().with_key(spec.key.split(",")[0], key_display=spec.key_display))
            yield (
                f"{spec.description}  [{key}]",
                partial(self.app.call_later, self.app.run_action, spec.action, node),
                spec.tooltip,
            )
        yield ("Open session…", lambda: self.app.call_later(self.app.run_action, "open_session_prompt"), "Open a session by id or id prefix.")
        names = getattr(self.app, "ordered_theme_names", None)
        for name in names() if names else sorted(self.app.available_themes):
            yield (f"Theme: {name}", partial(setattr, self.app, "theme", name),
                   "Switch to this theme; the choice is remembered.")

    # The palette reads a str prompt or help text as markup: names hold "[/]" and theme names or paths may hold
    # brackets or control characters, so prompts are passed as Text / Content of safe text and help text is
    # made safe and escaped. ``[@click=app.quit]`` in a name is only characters.

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            shown = safe(name)
            yield DiscoveryHit(Text(shown), callback, text=shown, help=markup_escape(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            shown = safe(name)
            score = matcher.match(shown)
            if score > 0:
                yield Hit(score, matcher.highlight(escape(shown)), callback, text=shown,
                          help=markup_escape(help_text))


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
        resolve = getattr(self.app, "resolve_and_open", None)
        if resolve is not None:
            resolve(event.value)

    def show_error(self, error: str) -> None:
        self.query_one("#open-error", Static).update(data_line(error))
