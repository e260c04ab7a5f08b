"""The help screen: the keys that work right now, the focused widget's first, then the screen's and the app's.

The list is read from the screen's live bindings (after the user's keymap is applied), so it is always the truth;
descriptions and tooltips come from the one action registry (:mod:`tui.actions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui import actions
from tui.formatting import shown_path
from tui.safe import data_line, markup_escape

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode
    from textual.screen import Screen


@dataclass
class HelpRow:
    keys: list[str]
    description: str
    tooltip: str
    enabled: bool
    action_id: str


@dataclass
class HelpGroup:
    title: str
    rows: list[HelpRow] = field(default_factory=list)


def _node_title(node: DOMNode, focused: DOMNode | None, app: App[object]) -> str:
    if node is app:
        return actions.SCOPE_TITLES["app"]
    title = getattr(type(node), "HELP_TITLE", None) or type(node).__name__
    if node is focused:
        return f"{title} (focused)"
    return title


def collect_help(screen: Screen[object]) -> list[HelpGroup]:
    """The active bindings of ``screen``, grouped by the node that defines them, focused widget first."""
    app = screen.app
    focused = screen.focused
    groups: dict[int, HelpGroup] = {}
    rows_by_binding: dict[tuple[int, str], HelpRow] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if binding.system:
            continue
        node = active.node
        group = groups.get(id(node))
        if group is None:
            group = groups[id(node)] = HelpGroup(_node_title(node, focused, app))
        ident = binding.id or f"{binding.action}:{binding.description}"
        display = app.get_key_display(binding.with_key(key, key_display=binding.key_display if binding.key == key else None))
        existing = rows_by_binding.get((id(node), ident))
        if existing is not None:
            if display not in existing.keys:
                existing.keys.append(display)
            continue
        spec = actions.find(binding.id)
        row = HelpRow(
            keys=[display],
            description=(spec.description if spec else binding.description) or binding.action,
            tooltip=(spec.tooltip if spec else binding.tooltip) or "",
            enabled=active.enabled,
            action_id=binding.id or "",
        )
        rows_by_binding[(id(node), ident)] = row
        group.rows.append(row)
    out = [g for g in groups.values() if g.rows]
    legend: tuple[tuple[str, str, str], ...] = getattr(type(screen), "HELP_LEGEND", ())
    if legend:  # the marks a screen's rows carry: (mark, name, meaning)
        out.append(HelpGroup("Marks in the list", [HelpRow(keys=[mark], description=name, tooltip=meaning, enabled=True,
                                                           action_id="") for mark, name, meaning in legend]))
    return out


def screen_about(screen: Screen[object]) -> str:
    """One sentence on what ``screen`` is for: its section's description (the ``:`` list), else the screen's
    ``HELP_ABOUT``; empty when it has neither."""
    scope = vars(type(screen)).get("ACTION_SCOPE")
    for section in actions.SECTIONS:
        if section.id == scope:
            return f"{section.title}: {section.description}"
    about = getattr(type(screen), "HELP_ABOUT", "")
    return about if isinstance(about, str) else ""


def render_help(groups: list[HelpGroup]) -> Group:
    """One heading and one table per group: keys, description, tooltip, action id (the name to remap)."""
    parts: list[Text | Table] = []
    for index, group in enumerate(groups):
        heading = data_line(group.title, style="bold underline")
        if index:
            heading = Text("\n") + heading
        parts.append(heading)
        table = Table.grid(padding=(0, 2), expand=True)
        table.add_column("keys", no_wrap=True, width=11)
        table.add_column("what", no_wrap=True, overflow="ellipsis", width=18)
        table.add_column("tooltip", ratio=1)
        table.add_column("id", no_wrap=True, style="dim", width=22)
        for row in group.rows:
            style = "" if row.enabled else "dim strike"
            note = row.tooltip if row.enabled else f"{row.tooltip} (disabled: read-only)"
            table.add_row(  # Text cells: a Rich table reads a str cell as markup
                data_line(" ".join(row.keys), style="bold " + style if style else "bold"),
                data_line(row.description, style=style),
                data_line(note, style="dim" if not row.enabled else ""),
                data_line(row.action_id),
            )
        parts.append(table)
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """Every key that works on the screen below, grouped: focused widget, screen, app."""

    ACTION_SCOPE: ClassVar[str] = "help"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Help"

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
        background: $background 60%;
    }
    HelpScreen > #help-box {
        width: 110;
        max-width: 96%;
        height: 90%;
        border: round $primary;
        border-title-color: $primary;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen #help-body {
        height: 1fr;
    }
    HelpScreen #help-about {
        height: auto;
        color: $foreground-muted;
        border-bottom: solid $panel;
    }
    HelpScreen #help-foot {
        height: auto;
        color: $foreground-muted;
        border-top: solid $panel;
    }
    """

    def __init__(self, groups: list[HelpGroup], keymap_file: str = "", about: str = "") -> None:
        super().__init__()
        self.groups = groups
        self.keymap_file = keymap_file
        self.about = about

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = markup_escape("Keys")
            if self.about:
                yield Static(data_line(self.about, style="italic"), id="help-about", markup=False)
            with VerticalScroll(id="help-body"):
                yield Static(render_help(self.groups), id="help-table")
            where = shown_path(self.keymap_file) if self.keymap_file else "config.toml"
            yield Static(
                data_line(f"Remap a key in {where}, e.g.  [keymap] sessions.filter = \"F\""),
                id="help-foot",
                markup=False,
            )

    def action_close(self) -> None:
        self.dismiss(None)
