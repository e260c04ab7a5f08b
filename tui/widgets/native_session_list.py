"""The list of captured Claude Code or Codex sessions on the Sessions screen (its "a" source switch).

One Line-API row per session (:class:`store.agents.native_catalog.AgentSessionSummary`): the first prompt the user typed,
the agent session id, the work dir, records, files and the time of the last record (UTC, never relative). The
rows of one agent are read at once (a checkpoint list is thousands of rows at most, each a few primary-key
reads); a filter narrows them in memory. The keys are the session list's (``list.*`` ids), so ``j``/``k``,
``g``/``G``, pages and ``enter`` work the same on either source.
"""

from __future__ import annotations

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
from tui.formatting import one_line, shown_path, utc_minutes
from tui.widgets.cursor_rows import CursorRows
from tui.widgets.session_list import GUTTER, Column, fit

if TYPE_CHECKING:
    from store.agents.native_catalog import AgentSessionSummary


def agent_columns(width: int) -> list[Column]:
    """Columns that fit ``width``: title and work dir share what the fixed ones leave (title 60 %)."""
    fixed = [Column("id", "ID", 8), Column("records", "RECORDS", 7, "right"), Column("files", "FILES", 5, "right"),
             Column("last", "LAST RECORD UTC", 16)]
    drop = ["files", "records", "id", "last"]
    usable = max(0, width - GUTTER)

    def room(cols: list[Column], with_cwd: bool) -> int:
        return usable - sum(c.width for c in cols) - (len(cols) + 1 + (1 if with_cwd else 0))

    cols = list(fixed)
    while drop and room(cols, True) < 26:
        victim = drop.pop(0)
        cols = [c for c in cols if c.key != victim]
    flexible = room(cols, True)
    if flexible >= 26:
        title_w = (flexible * 6) // 10
        middle = [Column("cwd", "WORK DIR", flexible - title_w)]
    else:
        title_w = max(1, room(cols, False))
        middle = []
    ids = [c for c in cols if c.key == "id"]
    return [Column("title", "FIRST PROMPT", title_w), *ids, *middle, *[c for c in cols if c.key != "id"]]


@dataclass(frozen=True)
class _Styles:
    base: Style
    header: Style
    cursor: Style
    dim: Style
    warn: Style


class AgentSessionList(CursorRows, ScrollView, can_focus=True, inherit_bindings=False):
    """Captured sessions of one agent, one line each (all rows in memory)."""

    ACTION_SCOPE: ClassVar[str] = "session-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Captured session list"
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "agent-list--header", "agent-list--cursor", "agent-list--cursor-blurred", "agent-list--dim",
        "agent-list--warn",
    }
    DEFAULT_CSS = """
    AgentSessionList {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
        background: $surface;
        scrollbar-gutter: stable;
    }
    AgentSessionList > .agent-list--header { text-style: bold; color: $primary; background: $panel; }
    AgentSessionList > .agent-list--cursor { background: $primary 40%; text-style: bold; }
    AgentSessionList > .agent-list--cursor-blurred { background: $primary 15%; }
    AgentSessionList > .agent-list--dim { color: $foreground-muted; text-style: italic; }
    AgentSessionList > .agent-list--warn { color: $warning; }
    """

    cursor: reactive[int] = reactive(0, always_update=True)

    class Opened(Message):
        """Enter was pressed on a captured session."""

        def __init__(self, row: AgentSessionSummary) -> None:
            super().__init__()
            self.row = row

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.agent = ""
        self.all_rows: list[AgentSessionSummary] = []
        self.rows: list[AgentSessionSummary] = []
        self.search = ""
        self.loaded = False
        self.message = "Reading captured sessions…"
        self._styles: _Styles | None = None

    # --- data -------------------------------------------------------------------------------------------------

    def begin(self, agent: str) -> None:
        self.agent = agent
        self.loaded = False
        self.all_rows = []
        self.rows = []
        self.message = "Reading captured sessions…"
        self._resize()

    def show_rows(self, agent: str, rows: list[AgentSessionSummary]) -> None:
        keep = self.selected.agent_session_id if self.selected is not None and agent == self.agent else ""
        self.agent = agent
        self.all_rows = rows
        self.loaded = True
        self._filter(keep)

    def show_message(self, text: str) -> None:
        self.loaded = True
        self.all_rows = []
        self.rows = []
        self.message = text
        self._resize()

    def set_search(self, text: str) -> None:
        self.search = text.strip()
        self._filter("")

    def _filter(self, keep: str) -> None:
        needle = self.search.lower()
        self.rows = [r for r in self.all_rows if not needle or needle in
                     f"{r.title} {r.preview} {r.agent_session_id} {r.cwd}".lower()]
        self.message = "No captured session matches the filter." if needle else "No captured sessions."
        index = next((i for i, r in enumerate(self.rows) if r.agent_session_id == keep), 0) if keep else 0
        self._resize()
        self.cursor = index

    @property
    def selected(self) -> AgentSessionSummary | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def _resize(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        self.virtual_size = Size(width, len(self.rows) + 1)
        self.refresh()

    # --- cursor -----------------------------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def watch_cursor(self, old: int, new: int) -> None:
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + self._page_rows:
            self.scroll_to(y=new - self._page_rows + 1, animate=False, immediate=True)
        self.refresh()


    def on_resize(self, event: events.Resize) -> None:
        self._resize()


    # --- drawing ----------------------------------------------------------------------------------------------

    def _get_styles(self) -> _Styles:
        if self._styles is None:
            base = self.rich_style
            part = self.get_component_rich_style
            self._styles = _Styles(
                base=base, header=base + part("agent-list--header"),
                cursor=base + part("agent-list--cursor" if self.has_focus else "agent-list--cursor-blurred"),
                dim=part("agent-list--dim", partial=True), warn=part("agent-list--warn", partial=True),
            )
        return self._styles

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        st = self._get_styles()
        cols = agent_columns(width)
        if y == 0:
            head = " " * GUTTER + "".join(fit(c.title, c.width, c.align) + " " for c in cols)
            return Strip([Segment(fit(head, width), st.header)])
        index = int(self.scroll_offset.y) + y - 1
        if not self.rows:
            if y == 1:
                return Strip([Segment(fit("  " + self.message, width), st.base + st.dim)])
            return Strip.blank(width, st.base)
        if index >= len(self.rows):
            return Strip.blank(width, st.base)
        row = self.rows[index]
        is_cursor = index == self.cursor
        line = st.cursor if is_cursor else st.base
        segments = [Segment("▌" if is_cursor else " ", line), Segment(" ", line)]
        for col in cols:
            style = line
            if col.key == "title":
                if not row.openable:
                    text, style = f"⚠ {one_line(row.problem)}", line + st.warn
                elif row.title:
                    text = one_line(row.title)
                else:
                    text, style = one_line(row.preview) or "(no messages)", line + st.dim
            elif col.key == "id":
                text = one_line(row.agent_session_id[:8])
            elif col.key == "cwd":
                text = shown_path(row.cwd)
                if cell_len(text) > col.width:
                    text = "…" + text[-(col.width - 1):]
            elif col.key == "records":
                text = f"{row.records:,}" if row.openable else ""
            elif col.key == "files":
                text = str(row.files) if row.openable else ""
            elif col.key == "last":
                text = utc_minutes(row.last_record_at)
            else:
                text = ""
            segments.append(Segment(fit(text, col.width, col.align), style))
            segments.append(Segment(" ", line))
        return Strip(segments).crop_extend(0, width, line)


__all__ = ["AgentSessionList", "agent_columns"]
