"""What the app's own keys do, and the screen changes they and the screens ask for.

The keys of every screen (back, help, the ``:`` section jump, the theme, opening a session by id, a list to a
file), the screens a section or a transcript opens, and the one line a dimmed key says instead of nothing. A
mixin of :class:`tui.app.SessionscopeApp` (its state lives there); the worker's message is handled by the naming
convention (Textual's ``@on`` collects handlers of message pump classes only).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from textual import work

from tui import actions
from tui.formatting import describe_error
from tui.lifecycle import ReportsWorkerFailures
from tui.messages import SessionResolved
from tui.safe import markup_escape, notify

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from store.mothx.db import OpenMode
    from store.mothx.sessiondir import SessionDir

    _Base = App[object]
else:
    _Base = object

BASE_SCREENS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tui.screens.sessions", ("SessionsScreen",)),
    ("tui.screens.welcome", ("WelcomeScreen", "OpenFailedScreen")),
)
"""Screens that ``back`` does not leave (module, class names)."""

DETAIL_SCREENS = frozenset({"TranscriptScreen", "NativeTranscriptScreen"})
"""Screens a section jump opens over (esc comes back to them) instead of leaving them."""


class AppKeys(ReportsWorkerFailures, _Base):
    """The app's actions and screen changes (mixed into the app)."""

    if TYPE_CHECKING:  # the app's state these read
        sd: SessionDir | None
        mode: OpenMode
        theme_names: list[str]

    # --- screens ----------------------------------------------------------------------------------------------

    def open_transcript(self, session_id: str) -> None:
        """Push the transcript of ``session_id`` (the transcript screen is imported on first use)."""
        if self.sd is None:
            return
        try:
            from tui.screens.transcript import TranscriptScreen
        except ImportError as exc:
            notify(self, f"The transcript screen is not available: {exc}.", title="Cannot open", severity="error")
            return
        self.push_screen(TranscriptScreen(self.sd, session_id))

    def show_section_screen(self, screen_type: type[Screen[Any]]) -> None:
        """Make a screen of ``screen_type`` current: pop back to it, or push a new one over the first screen (over
        the current one when that is a transcript, :data:`DETAIL_SCREENS`: esc goes back to it)."""
        stack = self.screen_stack
        for index in range(len(stack) - 1, -1, -1):
            if isinstance(stack[index], screen_type):
                while self.screen is not stack[index]:
                    self.pop_screen()
                return
        if self.sd is None:
            self.notify("No session directory is open.", severity="warning")
            return
        if type(self.screen).__name__ not in DETAIL_SCREENS:
            while len(self.screen_stack) > 1:
                self.pop_screen()
        self.push_screen(screen_type())  # over a transcript: esc goes back to it

    # --- actions ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back" and self._on_base_screen():
            return False  # nothing to go back to: hidden from the key bar and the palette
        sd = self.sd
        return actions.check_write(action, sd is not None and sd.writable)

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """:meth:`App.run_action`; a key whose action is dimmed (``check_action`` is None) says why in one line
        instead of nothing (see :func:`say_why_dimmed`)."""
        if await super().run_action(action, default_namespace, namespaces):
            return True
        return self.say_why_dimmed(action, default_namespace, namespaces)

    def say_why_dimmed(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """When ``action`` is dimmed on its node: notify the node's reason (its ``why_disabled(action)``, else
        the read mode's refusal of a repair, else a generic line) and return True (the key was answered)."""
        from textual.actions import parse

        try:
            destination, name, params = action if isinstance(action, tuple) else parse(action)
        except Exception:  # noqa: BLE001 - a malformed action string is Textual's to report
            return False
        target = (namespaces or {}).get(destination) if destination else None
        if target is None:
            target = {"app": self, "screen": self.screen, "focused": self.focused}.get(destination) \
                if destination else (default_namespace or self)
        if target is None or target.check_action(name, params) is not None:
            return False  # enabled (it ran) or hidden (False): nothing to explain
        why = getattr(target, "why_disabled", None)
        reason = why(name) if callable(why) else ""
        if not reason and actions.is_write_action(name):
            sd = self.sd
            reason = actions.write_refusal(name, self.mode.value if sd is None else sd.mode.value,
                                           "" if sd is None else sd.read_only_reason)
        notify(self, reason or actions.dimmed_reason(name), severity="warning", timeout=4)
        return True

    def _on_base_screen(self) -> bool:
        if len(self.screen_stack) <= 1:
            return True
        # A screen class whose module was never imported has no instance on the stack: look the classes up
        # in sys.modules instead of importing screens from check_action (it runs for every binding drawn).
        screen = self.screen
        for module, names in BASE_SCREENS:
            loaded = sys.modules.get(module)
            if loaded is not None and isinstance(screen, tuple(getattr(loaded, name) for name in names)):
                return True
        return False

    def action_export_list(self, fmt: str) -> None:
        """``E`` / ``J``: this screen's list to a CSV or JSON file (:mod:`tui.list_export`)."""
        from tui.list_export import export_list

        export_list(self, "json" if fmt == "json" else "csv")

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen, collect_help, screen_about

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        self.push_screen(HelpScreen(collect_help(self.screen), str(actions.keymap_path()), screen_about(self.screen)))

    def action_jump(self) -> None:
        from textual.command import SimpleCommand

        commands = [
            SimpleCommand(markup_escape(section.title), lambda s=section: self.open_section(s),
                          markup_escape(section.description))
            for section in actions.SECTIONS
        ]
        self.search_commands(commands, placeholder="Jump to a section…")

    def open_section(self, section: actions.Section) -> None:
        """Show ``section``'s screen, importing its module the first time (the action table names it by string)."""
        import importlib

        try:
            screen_type = getattr(importlib.import_module(section.module), section.class_name)
        except (ImportError, AttributeError) as exc:
            notify(self, f"This section is not available: {exc}.", severity="error")
            return
        self.show_section_screen(screen_type)

    def action_cycle_theme(self) -> None:
        names = self.theme_names or sorted(self.available_themes)
        if self.theme in names:
            name = names[(names.index(self.theme) + 1) % len(names)]
        else:
            name = names[0]
        self.theme = name
        notify(self, f"Theme: {name}", timeout=2)

    async def action_back(self) -> None:
        if not self._on_base_screen():
            self.pop_screen()

    def action_open_session_prompt(self) -> None:
        from tui.palette import OpenSessionDialog

        if self.sd is None:
            self.notify("No session directory is open.", severity="warning")
            return
        self.push_screen(OpenSessionDialog())

    def resolve_and_open(self, text: str) -> None:
        if self.sd is not None and text.strip():
            self._resolve_session(self.sd, text.strip())

    @work(thread=True, exclusive=True, group="resolve-session", exit_on_error=False, description="Find a session")
    def _resolve_session(self, sd: SessionDir, text: str) -> None:
        try:
            from store.mothx.sessions import get_session

            summary = get_session(sd, text)
        except Exception as exc:  # noqa: BLE001 - SessionNotFound / AmbiguousSessionId, or a bug: one line
            self.post_message(SessionResolved("", describe_error(exc)))
            return
        self.post_message(SessionResolved(summary.id))

    def on_session_resolved(self, message: SessionResolved) -> None:
        from tui.palette import OpenSessionDialog

        if isinstance(self.screen, OpenSessionDialog):
            if message.error:
                self.screen.show_error(message.error)
                return
            self.screen.dismiss(None)
        if message.error:
            notify(self, message.error, title="Cannot open", severity="error")
            return
        self.open_transcript(message.session_id)
