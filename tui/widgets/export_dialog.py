"""The export dialog: pick Markdown or JSON and a file path; the Transcript screen writes the file.

``push_screen(ExportDialog(session_id, session_root), callback)`` calls back with an :class:`ExportRequest`, or
``None`` when cancelled. The default path is ``~/<name>`` with the name from :func:`store.exports.default_name`
(an id like ``../../../../etc/x`` becomes ``etc-x.md``, inside the home folder). The dialog refuses a path
inside the session directory (an export never writes there, whatever the open mode), a missing folder, an
existing folder and a symbolic link (dangling or not: one line says where it points); an existing regular file
is replaced only after a second press of Export, and then the request says ``replace=True``.

:func:`write_export` writes through :func:`store.exports.write_file` (never through a link, ``O_EXCL`` unless
replacing, lone surrogates written as escapes), so whatever happened, one :class:`ExportFinished` says it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from store import exports
from store.safetext import json_dumps, one_line, safe
from tui.formatting import describe_error, plural, tildify
from tui.messages import ExportFinished
from tui.safe import notify

if TYPE_CHECKING:
    from store.redact import Redactor

ExportFormat = Literal["markdown", "json", "html"]
EXTENSIONS: dict[str, str] = {"markdown": ".md", "json": ".json", "html": ".html"}
_FORMAT_IDS: dict[str, ExportFormat] = {"export-markdown": "markdown", "export-json": "json", "export-html": "html"}


@dataclass(frozen=True)
class ExportRequest:
    """What to export where. ``path`` is expanded (``~``) and absolute."""

    format: ExportFormat
    path: Path
    replace: bool = False  # the file exists and the user pressed Export twice to replace it
    redact: bool = False  # values that look like secrets are replaced (store.redact)


def default_export_path(session_id: str, fmt: ExportFormat = "markdown") -> str:
    """``~/<sanitized id>.md`` (or ``.json``), as typed text: always one file name inside the home folder."""
    return "~/" + exports.default_name(session_id, EXTENSIONS[fmt])


def inside(path: Path, folder: Path) -> bool:
    """True when ``path`` is ``folder`` or lies under it (symlinks resolved where they exist)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def write_export(path: Path, session_root: Path, make: Callable[[], str], *, replace: bool = False,
                 redactor: Redactor | None = None) -> ExportFinished:
    """Write the text ``make()`` returns to ``path`` (never inside the session directory, never through a link;
    an existing file only with ``replace``), in a worker. The returned message says what happened, a failure of
    any kind included, and is posted by the caller."""
    from store.errors import StoreError

    try:
        if inside(path, session_root):
            raise exports.ExportRefused("Exports are never written inside the session directory.")
        exports.check_target(path, replace=replace)  # refused before the (maybe long) export is made
        text = make()
        exports.write_file(path, text, replace=replace)
    except StoreError as exc:
        return ExportFinished(path, 0, one_line(str(exc)))
    except OSError as exc:
        return ExportFinished(path, 0, f"{one_line(str(path))} could not be written: {one_line(exc.strerror or exc)}.")
    except Exception as exc:  # noqa: BLE001 - a bug in an exporter: one line, never a silent failure
        return ExportFinished(path, 0, f"The export could not be made: {describe_error(exc)}")
    return ExportFinished(path, len(text), note=redactor.summary() if redactor is not None else "")


def safe_markdown(text: str) -> str:
    """Exported Markdown with every control, bidi, separator and surrogate character as a visible escape."""
    return safe(text, newlines=True, tabs=True)


def safe_json(text: str) -> str:
    """Exported JSON re-written by :func:`store.safetext.json_dumps` (the same data, no raw unsafe character;
    a final newline kept when there was one)."""
    import json

    return json_dumps(json.loads(text)) + ("\n" if text.endswith("\n") else "")


def notify_export(widget: Widget, message: ExportFinished) -> None:
    """One line: where the export went (its path is copied too) and what redaction found; or why it failed."""
    if message.error:
        notify(widget, message.error, title="Export failed", severity="error")
        return
    from tui.clipboard import copy_quietly

    via = copy_quietly(widget, str(message.path))
    copied = f"; the path is on the {via}" if via else ""
    redacted = f"; {message.note}" if message.note else ""
    notify(widget, f"Exported to {tildify(message.path)} ({plural(message.chars, 'character')}{redacted}{copied}).",
           title="Export")


def redacting(request: ExportRequest, make: Callable[[Redactor | None], str]) -> tuple[Callable[[], str],
                                                                                     Redactor | None]:
    """``make(redactor)`` as the text maker of :func:`write_export`, with a redactor when the request asks."""
    from store.redact import Redactor

    red = Redactor() if request.redact else None
    return (lambda: make(red)), red


def check_export_path(text: str, session_root: Path | None) -> tuple[Path | None, str]:
    """``(path, problem)``: the expanded absolute path, or None and one sentence saying why not."""
    text = text.strip()
    if not text:
        return None, "Type a file path."
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~user that does not exist
        return None, f"{one_line(text)}: no such home folder."
    if not path.is_absolute():
        path = Path.cwd() / path
    if session_root is not None and inside(path, session_root):
        return None, "Exports are never written inside the session directory: choose another folder."
    try:
        exports.check_target(path, replace=True)  # links (dangling or not), folders, missing folders, devices
    except (exports.ExportRefused, ValueError) as exc:  # ValueError: a NUL in the typed path
        return None, one_line(str(exc))
    return path, ""


class ExportDialog(ModalScreen["ExportRequest | None"]):
    """Format (Markdown / JSON), file path, Export / Cancel."""

    HELP_TITLE: ClassVar[str] = "Export dialog"
    AUTO_FOCUS = "#export-path"
    BINDINGS: ClassVar = [
        Binding("escape", "cancel", "Cancel", id="export.cancel", tooltip="Close the dialog without writing a file."),
    ]

    DEFAULT_CSS = """
    ExportDialog {
        align: center middle;
        background: $background 60%;
    }
    ExportDialog > #export-box {
        width: 84;
        max-width: 96%;
        height: auto;
        border: round $primary;
        border-title-color: $primary;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    ExportDialog #export-format {
        width: 100%;
        height: auto;
        layout: horizontal;
        border: none;
        padding: 0;
        margin: 1 0 0 0;
        background: $surface;
    }
    ExportDialog #export-format > RadioButton {
        width: auto;
        margin-right: 3;
    }
    ExportDialog #export-label {
        margin: 1 0 0 0;
        color: $foreground-muted;
    }
    ExportDialog #export-path {
        margin: 0;
    }
    ExportDialog #export-note {
        height: auto;
        min-height: 1;
        color: $foreground-muted;
    }
    ExportDialog #export-note.-problem {
        color: $error;
        text-style: bold;
    }
    ExportDialog #export-note.-warning {
        color: $warning;
        text-style: bold;
    }
    ExportDialog #export-buttons {
        height: auto;
        align-horizontal: right;
        margin: 1 0 0 0;
    }
    ExportDialog Button {
        margin-left: 2;
    }
    """

    def __init__(self, session_id: str, session_root: Path | None = None, fmt: ExportFormat = "markdown") -> None:
        super().__init__()
        self.session_id = session_id
        self.session_root = session_root
        self.format: ExportFormat = fmt
        self._armed_overwrite: Path | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box") as box:
            box.border_title = "Export transcript"
            with RadioSet(id="export-format"):
                yield RadioButton("Markdown (.md)", value=self.format == "markdown", id="export-markdown")
                yield RadioButton("JSON (.json)", value=self.format == "json", id="export-json")
                yield RadioButton("HTML page (.html, readable offline)", value=self.format == "html",
                                  id="export-html")
            yield Static("File (outside the session directory):", id="export-label", markup=False)
            yield Input(default_export_path(self.session_id, self.format), id="export-path")
            yield Static(Text("enter or Export writes the file · esc cancels"), id="export-note", markup=False)
            yield Checkbox("Redact secrets (API keys, tokens, private keys, passwords in URLs)", id="export-redact")
            # tab goes format → path → redact → Export → Cancel (the focus order is the order composed)
            with Horizontal(id="export-buttons"):
                yield Button("Export", id="export-ok", variant="primary")
                yield Button("Cancel", id="export-cancel")

    def _note(self, text: str, kind: str = "") -> None:
        note = self.query_one("#export-note", Static)
        note.update(Text(one_line(text)))
        note.set_class(kind == "problem", "-problem")
        note.set_class(kind == "warning", "-warning")

    @on(RadioSet.Changed, "#export-format")
    def _format_changed(self, event: RadioSet.Changed) -> None:
        new: ExportFormat = _FORMAT_IDS.get(event.pressed.id or "", "markdown")
        if new == self.format:
            return
        old_ext, new_ext = EXTENSIONS[self.format], EXTENSIONS[new]
        self.format = new
        field = self.query_one("#export-path", Input)
        if field.value.endswith(old_ext):
            field.value = field.value[: -len(old_ext)] + new_ext
        self._armed_overwrite = None
        field.focus()  # so enter exports next

    @on(Input.Changed, "#export-path")
    def _path_changed(self) -> None:
        self._armed_overwrite = None
        self._note("enter or Export writes the file · esc cancels")

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-ok")
    def _submit(self) -> None:
        path, problem = check_export_path(self.query_one("#export-path", Input).value, self.session_root)
        if path is None:
            self._note(problem, "problem")
            return
        exists = os.path.lexists(path)
        if exists and self._armed_overwrite != path:
            self._armed_overwrite = path
            self._note(f"{one_line(path.name)} exists: press Export again to replace it.", "warning")
            return
        redact = self.query_one("#export-redact", Checkbox).value
        self.dismiss(ExportRequest(self.format, path, replace=exists, redact=redact))

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        notify(self.app, "Export cancelled: no file was written.", timeout=3)
        self.dismiss(None)
