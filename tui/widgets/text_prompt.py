"""A one-line text prompt (a new title, a project name): ``push_screen(TextPrompt(...), callback)`` calls back with
the text typed (``enter``) or ``None`` (``escape``). The text is data: it is never read as markup, and what is
shown of the current value goes through the safe-text boundary."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tui import actions
from tui.safe import data_line, markup_escape


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line of text; ``enter`` returns it, ``escape`` returns ``None``."""

    ACTION_SCOPE: ClassVar[str] = "prompt"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Text prompt"
    AUTO_FOCUS = "#prompt-input"

    DEFAULT_CSS = """
    TextPrompt {
        align: center middle;
        background: $background 60%;
    }
    TextPrompt > #prompt-box {
        width: 80;
        max-width: 96%;
        height: auto;
        border: round $accent;
        border-title-color: $accent;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    TextPrompt #prompt-hint {
        color: $foreground-muted;
        margin: 1 0 0 0;
    }
    """

    def __init__(self, title: str, label: str, value: str = "", *, allow_empty: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.label = label
        self.value = value
        self.allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box") as box:
            box.border_title = markup_escape(self.title_text)  # a border title is read as markup
            yield Static(data_line(self.label), markup=False)
            yield Input(value=self.value, id="prompt-input")
            hint = "enter: apply after a preview · esc: cancel"
            if self.allow_empty:
                hint += " · empty: remove"
            yield Static(data_line(hint), id="prompt-hint", markup=False)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted, "#prompt-input")
    def _submitted(self, event: Input.Submitted) -> None:
        value = event.value
        if not value.strip() and not self.allow_empty:
            self.app.bell()
            return
        self.dismiss(value)


__all__ = ["TextPrompt"]
