"""The checkpoint list: one line per captured agent session, drawn with the Line API.

The rows are :class:`~store.agents.agentstate.CheckpointInfo` values the screen read in a worker (the checkpoint file
holds one header per agent session, so the whole list is small next to a transcript); only the lines on screen
are drawn, and drawn lines are cached. Row 0 is the column header and never scrolls. The proof column shows
what the last ``v`` found for the row (:class:`Proof`), or "not verified yet".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui import actions
from tui.formatting import one_line, shown_path
from tui.widgets.cursor_rows import CursorRows
from tui.widgets.session_list import Column, fit

if TYPE_CHECKING:
    from store.agents.agentstate import CheckpointInfo


STRIP_CACHE = 400

NOT_VERIFIED = "not verified yet"
PROOF_WORDS = {
    "verified": "verified",
    "divergent": "divergent",
    "out_of_sync": "out of sync",
    "verifying": "verifying…",
    "failed": "error",
}


@dataclass(frozen=True)
class Proof:
    """What verifying a checkpoint against the files on disk found (``status`` as ``store.agents.capture.verify``
    reports it, or ``verifying`` / ``failed``); ``new_records`` are on disk but not captured yet."""

    status: str
    detail: str = ""
    new_records: int = 0

    @property
    def label(self) -> str:
        word = PROOF_WORDS.get(self.status, one_line(self.status))
        if self.status == "verified" and self.new_records:
            word += f" +{self.new_records:,} new"
        return word


def row_key(info: CheckpointInfo) -> tuple[str, str]:
    return (info.agent_id, info.agent_session_id)


def head_label(info: CheckpointInfo) -> str:
    if info.head is None:
        return "none"
    return one_line(info.head.kind) + (" (!)" if info.head_problem else "")


def layout_columns(width: int) -> list[Column]:
    """Columns for ``width`` cells: fixed ones, then session id and work dir sharing the rest."""
    fixed = [
        Column("agent", "AGENT", 11),
        Column("files", "FILES", 5, "right"),
        Column("records", "RECORDS", 7, "right"),
        Column("head", "HEAD", 10),
        Column("proof", "PROOF", 16),
    ]
    drop_order = ["agent", "files", "head"]
    usable = max(0, width - 1)

    def room(cols: list[Column]) -> int:
        return usable - sum(c.width for c in cols) - (len(cols) + 2)

    while drop_order and room(fixed) < 24:
        victim = drop_order.pop(0)
        fixed = [c for c in fixed if c.key != victim]
    left = max(2, room(fixed))
    id_width = min(36, max(10, left // 2))
    cwd_width = max(1, left - id_width)
    agent = [c for c in fixed if c.key == "agent"]
    rest = [c for c in fixed if c.key != "agent"]
    return [*agent, Column("id", "SESSION ID", id_width), Column("cwd", "WORK DIR", cwd_width), *rest]


class CheckpointList(CursorRows, ScrollView, can_focus=True, inherit_bindings=False):
    """The checkpoints of the chosen agent(s); the cursor row is highlighted."""

    ACTION_SCOPE: ClassVar[str] = "checkpoint-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Checkpoint list"

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "checkpoint-list--header",
        "checkpoint-list--cursor",
        "checkpoint-list--cursor-blurred",
        "checkpoint-list--placeholder",
        "checkpoint-list--dim",
        "checkpoint-list--ok",
        "checkpoint-list--bad",
        "checkpoint-list--warn",
    }

    DEFAULT_CSS = """
    CheckpointList {
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-gutter: stable;
    }
    CheckpointList > .checkpoint-list--header { text-style: bold; color: $primary; background: $panel; }
    CheckpointList > .checkpoint-list--cursor { background: $primary 40%; text-style: bold; }
    CheckpointList > .checkpoint-list--cursor-blurred { background: $primary 15%; }
    CheckpointList > .checkpoint-list--placeholder { color: $foreground-muted; }
    CheckpointList > .checkpoint-list--dim { color: $foreground-muted; }
    CheckpointList > .checkpoint-list--ok { color: $success; }
    CheckpointList > .checkpoint-list--bad { color: $error; text-style: bold; }
    CheckpointList > .checkpoint-list--warn { color: $warning; }
    """

    cursor: reactive[int] = reactive(0, always_update=True)

    class Highlighted(Message):
        """The cursor moved to ``info`` (None when the list is empty)."""

        def __init__(self, info: CheckpointInfo | None) -> None:
            super().__init__()
            self.info = info

    class Opened(Message):
        """Enter was pressed on a checkpoint."""

        def __init__(self, info: CheckpointInfo) -> None:
            super().__init__()
            self.info = info

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[CheckpointInfo] = []
        self.proofs: dict[tuple[str, str], Proof] = {}
        self.loaded = False
        self.placeholder = "Reading checkpoints…"
        self.empty_text = "No checkpoints."
        self._strips: OrderedDict[tuple[object, ...], Strip] = OrderedDict()
        self._styles: dict[str, Style] | None = None
        self._columns_cache: tuple[int, list[Column]] | None = None
        self._last_highlight: tuple[str, str] | None = None

    # --- data -------------------------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[CheckpointInfo]) -> None:
        """Show ``rows``; the cursor stays on the same agent session when it is still listed."""
        keep = row_key(self.rows[self.cursor]) if self.rows and self.cursor < len(self.rows) else None
        self.rows = list(rows)
        self.loaded = True
        self._strips.clear()
        self.virtual_size = Size(self.scrollable_content_region.width or self.size.width, len(self.rows) + 1)
        index = 0
        if keep is not None:
            index = next((i for i, r in enumerate(self.rows) if row_key(r) == keep), min(self.cursor, len(self.rows) - 1))
        self._last_highlight = None
        self.cursor = max(0, index)
        self.refresh()

    def set_proof(self, key: tuple[str, str], proof: Proof | None) -> None:
        if proof is None:
            self.proofs.pop(key, None)
        else:
            self.proofs[key] = proof
        self._strips.clear()
        self.refresh()

    def proof(self, info: CheckpointInfo) -> Proof | None:
        return self.proofs.get(row_key(info))

    def proof_label(self, info: CheckpointInfo) -> str:
        proof = self.proof(info)
        return proof.label if proof else NOT_VERIFIED

    @property
    def selected(self) -> CheckpointInfo | None:
        if not self.rows:
            return None
        return self.rows[min(self.cursor, len(self.rows) - 1)]

    def show_message(self, text: str) -> None:
        """Show ``text`` instead of rows (an error, or nothing to show)."""
        self.rows = []
        self.loaded = True
        self.placeholder = text
        self.empty_text = text
        self._strips.clear()
        self.virtual_size = Size(self.size.width, 1)
        self.cursor = 0
        self.refresh()

    # --- cursor -----------------------------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()
        info = self.selected
        key = row_key(info) if info is not None else None
        if key != self._last_highlight or info is None:
            self._last_highlight = key
            self.post_message(self.Highlighted(info))


    def _scroll_cursor_into_view(self) -> None:
        top = int(self.scroll_offset.y)
        rows = self._page_rows
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)


    def on_resize(self, event: events.Resize) -> None:
        self._columns_cache = None
        self._strips.clear()
        self.virtual_size = Size(self.scrollable_content_region.width or self.size.width, len(self.rows) + 1)

    def _forget_styles(self) -> None:
        self._styles = None
        self._strips.clear()

    # --- drawing ----------------------------------------------------------------------------------------------

    def _get_styles(self) -> dict[str, Style]:
        if self._styles is None:
            base = self.rich_style
            part = self.get_component_rich_style
            self._styles = {
                "base": base,
                "header": base + part("checkpoint-list--header"),
                "cursor": base + part("checkpoint-list--cursor" if self.has_focus else "checkpoint-list--cursor-blurred"),
                "placeholder": part("checkpoint-list--placeholder", partial=True),
                "dim": part("checkpoint-list--dim", partial=True),
                "ok": part("checkpoint-list--ok", partial=True),
                "bad": part("checkpoint-list--bad", partial=True),
                "warn": part("checkpoint-list--warn", partial=True),
            }
        return self._styles

    def _columns(self, width: int) -> list[Column]:
        if self._columns_cache is None or self._columns_cache[0] != width:
            self._columns_cache = (width, layout_columns(width))
        return self._columns_cache[1]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        styles = self._get_styles()
        base = styles["base"]
        if y == 0:
            parts = [" "]
            for col in self._columns(width):
                parts.append(fit(col.title, col.width, col.align) + " ")
            return Strip([Segment(fit("".join(parts), width), styles["header"])])
        if not self.rows:
            if y == 1:
                text = self.empty_text if self.loaded else self.placeholder
                return Strip([Segment(fit("  " + text, width), base + styles["placeholder"])])
            return Strip.blank(width, base)
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self.rows):
            return Strip.blank(width, base)
        info = self.rows[index]
        is_cursor = index == self.cursor
        proof = self.proofs.get(row_key(info))
        key = (row_key(info), info.updated_at, head_label(info), proof, is_cursor, width)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._row_strip(info, proof, width, styles["cursor"] if is_cursor else base, is_cursor)
            self._strips[key] = strip
            if len(self._strips) > STRIP_CACHE:
                self._strips.popitem(last=False)
        else:
            self._strips.move_to_end(key)
        return strip

    def _row_strip(self, info: CheckpointInfo, proof: Proof | None, width: int, line: Style, is_cursor: bool) -> Strip:
        styles = self._get_styles()
        state = info.state
        segments: list[Segment] = [Segment("▌" if is_cursor else " ", line)]
        for col in self._columns(width):
            style = line
            if col.key == "agent":
                text = one_line(info.agent_id)
            elif col.key == "id":
                text = one_line(info.agent_session_id)
            elif col.key == "cwd":
                text = shown_path(state.cwd) if state else ""
                if cell_len(text) > col.width:  # keep the end of a long path: it names the project
                    text = "…" + text[-(col.width - 1):]
            elif col.key == "files":
                text = f"{state.file_count:,}" if state else "–"
            elif col.key == "records":
                text = f"{state.record_count:,}" if state else "–"
            elif col.key == "head":
                text = head_label(info)
                if info.head is None or info.head_problem:
                    style = line + styles["bad"]
                elif info.head.kind != "checkpoint":
                    style = line + styles["warn"]
            elif col.key == "proof":
                text = proof.label if proof else NOT_VERIFIED
                if proof is None or proof.status == "verifying":
                    style = line + styles["dim"]
                elif proof.status == "verified":
                    style = line + styles["ok"]
                else:
                    style = line + styles["bad"]
            else:
                text = ""
            segments.append(Segment(fit(text, col.width, col.align), style))
            segments.append(Segment(" ", line))
        return Strip(segments).crop_extend(0, width, line)
