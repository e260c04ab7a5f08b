"""What the two transcript screens share: the layout, the raw toggle, the failure line, the status line's tail,
following's error line, copy and export.

:class:`tui.screens.transcript.TranscriptScreen` (a mothx session) and
:class:`tui.screens.native_transcript.NativeTranscriptScreen` (a native agent transcript) are both a title, an
optional raw-columns line, a block view (``#transcript-view``) and a raw view (``#raw-view``) of the same look, a
status line and the key bar; what each reads, and how it follows its source, is its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from store.safetext import one_line
from tui.clipboard import copy
from tui.lifecycle import ReportsWorkerFailures
from tui.messages import ExportFinished
from tui.safe import notify
from tui.widgets.export_dialog import (
    ExportDialog,
    ExportRequest,
    notify_export,
    redacting,
    safe_json,
    safe_markdown,
    write_export,
)
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.transcript_blocks import ViewItem, item_copy_text
from tui.widgets.transcript_view import GUTTER, WindowedView

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir
    from store.redact import Redactor

ExportText = Callable[["Redactor | None"], str]
"""The text of an export, made with the request's redactor (None: not redacted)."""


def export_text(request: ExportRequest, html: ExportText, as_json: Callable[[], str],
                as_markdown: Callable[[], str]) -> ExportText:
    """The export's text in the request's format: ``html(redactor)``, or the JSON / Markdown export made safe and
    then redacted when the request asks (every maker runs later, in the export's worker)."""

    def text(red: Redactor | None) -> str:
        from store.redact import redact_export

        if request.format == "html":
            return html(red)
        made = safe_json(as_json()) if request.format == "json" else safe_markdown(as_markdown())
        return made if red is None else redact_export(made, request.format, red)

    return text


def copy_item(screen: Screen[None], item: ViewItem | None) -> None:
    """``y`` on both transcript screens: put the text of ``item`` on the clipboard and say where
    (:func:`tui.clipboard.copy`: the system clipboard, else OSC 52; the text made safe first)."""
    if item is None:
        notify(screen, "Nothing under the cursor to copy.", severity="warning", timeout=3)
        return
    raw, what = item_copy_text(item)
    copy(screen, raw, what)


class TranscriptScreenBase(ReportsWorkerFailures, Screen[None]):
    """The layout and the keys both transcript screens share (see the module docstring)."""

    CSS_PATH = "transcript.tcss"
    AUTO_FOCUS = "#transcript-view"

    def __init__(self, sd: SessionDir) -> None:
        super().__init__()
        self.sd = sd
        self.error = ""
        self.raw_mode = False
        self.follow = True
        self.follow_note = ""
        self.new_count = 0  # blocks (rows in raw mode) appended below the view since it was last at the bottom

    # --- what each screen gives ---------------------------------------------------------------------------------

    def opening_title(self) -> Text:
        """The title line while the transcript is read."""
        raise NotImplementedError

    def raw_columns_at_start(self) -> Text:
        return Text("")

    def make_views(self) -> Iterable[WindowedView]:
        """The block view (id ``transcript-view``), then the raw view (id ``raw-view``)."""
        raise NotImplementedError

    def raw_columns(self) -> str:
        """The column heads above the raw view (after the gutter)."""
        raise NotImplementedError

    def raw_shown(self) -> None:
        """The raw view was just shown (a screen that reads it lazily starts it here)."""

    def view_moved(self, message: WindowedView.Moved) -> None:
        """A view moved, before the status line is updated."""

    def _show_status(self) -> None:
        raise NotImplementedError

    def export_name(self) -> str | None:
        """The export dialog's default name; None: nothing is loaded yet (the screen said so)."""
        raise NotImplementedError

    def start_export(self, request: ExportRequest) -> None:
        raise NotImplementedError

    # --- layout -----------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Transcript")
        yield Static(self.opening_title(), id="transcript-title", markup=False)
        yield Static(self.raw_columns_at_start(), id="raw-columns", markup=False)
        yield from self.make_views()
        yield Static(Text(""), id="transcript-status", markup=False)
        yield KeyBar()  # the one key bar of every screen (no separator glyph before the palette key)

    def hide_raw(self) -> None:
        self.query_one("#raw-view").display = False
        self.query_one("#raw-columns").display = False

    def view_of(self, raw: bool) -> WindowedView:
        """The raw view, or the block view."""
        return self.query_one("#raw-view" if raw else "#transcript-view", WindowedView)

    @property
    def active_view(self) -> WindowedView:
        return self.view_of(self.raw_mode)

    def show_failure(self, text: str) -> None:
        """The transcript cannot be shown: the title, both views and a notification say why."""
        self.error = text
        self.query_one("#transcript-title", Static).update(Text(f"✗ {one_line(text)}", style=Style(bold=True, color="red")))
        self.view_of(False).show_text(f"✗ {text}")
        self.view_of(True).show_text(f"✗ {text}")
        notify(self, text, title="Cannot show the transcript", severity="error")

    # --- status -----------------------------------------------------------------------------------------------

    @on(WindowedView.Moved)
    def _moved(self, message: WindowedView.Moved) -> None:
        self.view_moved(message)
        if message.view is self.active_view:
            if self.new_count and message.view.at_bottom:
                self.new_count = 0
            self._show_status()

    def put_status(self, parts: list[str]) -> None:
        """The status line: ``parts``, then the new rows below and the follow note."""
        if self.new_count:
            parts.append(f"▼ {self.new_count:,} new — G to see them")
        if self.follow_note:
            parts.append(self.follow_note)
        self.query_one("#transcript-status", Static).update(Text(one_line("  ·  ".join(parts))))

    def follow_failed(self, error: str, title: str) -> None:
        """A follow step failed: said once in a notification, then in the status line until it works again."""
        if not self.follow_note.startswith("follow: "):  # said once, not at every hint
            notify(self, error, title=title, severity="warning")
        self.follow_note = f"follow: {error}"
        self._show_status()

    # --- actions ----------------------------------------------------------------------------------------------

    def action_toggle_raw(self) -> None:
        self.raw_mode = not self.raw_mode
        self.view_of(False).display = not self.raw_mode
        self.view_of(True).display = self.raw_mode
        columns = self.query_one("#raw-columns", Static)
        columns.display = self.raw_mode
        if self.raw_mode:
            columns.update(Text(" " * GUTTER + self.raw_columns()))
            self.raw_shown()
        self.call_after_refresh(self.active_view.focus)
        self._show_status()

    def action_copy(self) -> None:
        copy_item(self, self.active_view.cursor_item)

    def action_export(self) -> None:
        name = self.export_name()
        if name is not None:
            self.app.push_screen(ExportDialog(name, self.sd.root), self._export_chosen)

    def _export_chosen(self, request: ExportRequest | None) -> None:
        if request is not None:
            self.start_export(request)

    def post_export(self, request: ExportRequest, text: ExportText) -> None:
        """In the export's worker: make the text (redacted when asked) and write it; the result is posted."""
        make, red = redacting(request, text)
        self.post_message(write_export(request.path, self.sd.root, make, replace=request.replace, redactor=red))

    @on(ExportFinished)
    def _export_finished(self, message: ExportFinished) -> None:
        notify_export(self, message)


__all__ = ["ExportText", "TranscriptScreenBase", "copy_item", "export_text"]
