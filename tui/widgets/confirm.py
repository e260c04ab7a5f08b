"""The confirm dialog every repair goes through: a preview of what changes, the counts, and a safe default.

Rules (k9s / lazygit / Posting): **Cancel has the focus** when the dialog opens, so a stray Enter changes
nothing; the confirming key (``confirm.apply``, default ``y``) must differ from the key that opened the action,
so a double press cannot confirm; the dialog says how many items change and how many more are hidden by the
filter (and are *not* included); an irreversible bulk action may require a typed phrase.

``push_screen(ConfirmDialog(request), callback)`` calls back with ``True`` only when the user confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from tui import actions
from tui.formatting import one_line
from tui.safe import data_line, data_text, markup_escape

if TYPE_CHECKING:
    from store.mothx.repair_kit import RepairPreview


@dataclass(frozen=True)
class ConfirmRequest:
    """What a dialog asks. ``preview`` is the repair's own preview text (what exactly will change)."""

    title: str
    preview: str
    affected: int
    noun: str = "item"
    hidden_by_filter: int = 0
    confirm_label: str = "Apply"
    opened_by: str = ""  # the key that opened the action
    phrase: str = ""  # when set, the user must type it before the dialog confirms

    @classmethod
    def of_preview(cls, preview: RepairPreview, *, noun: str = "row", confirm_label: str = "Apply",
                   opened_by: str = "", title: str | None = None, lines: tuple[str, ...] = (),
                   affected: int | None = None, hidden_by_filter: int = 0, phrase: str = "") -> ConfirmRequest:
        """The request for a repair's preview: its title on one line, ``lines`` then the preview's own lines,
        and (unless said) as many affected items as planned changes."""
        return cls(title=one_line(preview.title) if title is None else title,
                   preview="\n".join([*lines, *preview.lines()]),
                   affected=len(preview.changes) if affected is None else affected, noun=noun,
                   hidden_by_filter=hidden_by_filter, confirm_label=confirm_label, opened_by=opened_by,
                   phrase=phrase)


def confirm_keys() -> list[str]:
    return [k.strip() for k in actions.get("confirm.apply").key.split(",") if k.strip()]


def counts_text(request: ConfirmRequest) -> str:
    noun = request.noun if request.affected == 1 else request.noun + "s"
    text = f"{request.affected:,} {noun} will change."
    if request.hidden_by_filter:
        hidden_noun = request.noun if request.hidden_by_filter == 1 else request.noun + "s"
        text += f" {request.hidden_by_filter:,} more {hidden_noun} hidden by the filter are not included."
    return text


class ConfirmDialog(ModalScreen[bool]):
    """Preview, counts, Cancel (focused) and Apply. Dismisses with ``True`` only on an explicit confirm."""

    ACTION_SCOPE: ClassVar[str] = "confirm"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Confirm dialog"
    AUTO_FOCUS = "#confirm-cancel"

    DEFAULT_CSS = """
    ConfirmDialog {
        align: center middle;
        background: $background 60%;
    }
    ConfirmDialog > #confirm-box {
        width: 90;
        max-width: 96%;
        height: auto;
        max-height: 90%;
        border: round $warning;
        border-title-color: $warning;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    ConfirmDialog #confirm-preview {
        height: auto;
        max-height: 20;
        border-top: solid $panel;
        border-bottom: solid $panel;
        padding: 0 1;
    }
    ConfirmDialog #confirm-counts {
        margin: 1 0 0 0;
        text-style: bold;
    }
    ConfirmDialog #confirm-phrase {
        margin: 1 0 0 0;
    }
    ConfirmDialog #confirm-hint {
        color: $foreground-muted;
        margin: 1 0 0 0;
    }
    ConfirmDialog #confirm-buttons {
        height: auto;
        align-horizontal: right;
        margin: 1 0 0 0;
    }
    ConfirmDialog Button {
        margin-left: 2;
    }
    """

    def __init__(self, request: ConfirmRequest) -> None:
        keys = confirm_keys()
        if request.opened_by and request.opened_by in keys:
            raise ValueError(
                f"The key '{request.opened_by}' opens this action, so it cannot also confirm it; "
                "bind the action to another key."
            )
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        request = self.request
        key = self.app.get_key_display(actions.get("confirm.apply").binding())
        with Vertical(id="confirm-box") as box:
            box.border_title = markup_escape(request.title)  # a border title is read as markup
            with VerticalScroll(id="confirm-preview"):
                # the preview names data (owner ids, tool names, paths): a Text, never markup
                yield Static(data_text(request.preview or "(nothing to show)"), markup=False)
            yield Static(data_line(counts_text(request)), id="confirm-counts", markup=False)
            if request.phrase:
                yield Input(placeholder=f"type {data_line(request.phrase).plain!r} to confirm", id="confirm-phrase")
            hint = f"{key} {request.confirm_label.lower()} · esc / n cancel"
            if request.phrase:
                hint = f"type the phrase, then {key} or enter · esc cancel"
            yield Static(data_line(hint), id="confirm-hint", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="confirm-cancel", variant="default")
                yield Button(data_line(f"{request.confirm_label} ({key})"), id="confirm-apply", variant="warning")

    @property
    def phrase_ok(self) -> bool:
        if not self.request.phrase:
            return True
        return self.query_one("#confirm-phrase", Input).value.strip() == self.request.phrase

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_confirm(self) -> None:
        if not self.phrase_ok:
            self.app.bell()
            self.query_one("#confirm-hint", Static).update(data_line(f"Type {self.request.phrase!r} exactly to confirm."))
            self.query_one("#confirm-phrase", Input).focus()
            return
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    @on(Button.Pressed, "#confirm-apply")
    def _apply_pressed(self) -> None:
        self.action_confirm()

    @on(Input.Submitted, "#confirm-phrase")
    def _phrase_submitted(self) -> None:
        self.action_confirm()
