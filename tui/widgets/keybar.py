"""A one-line key bar: the shown bindings of the current screen, drawn as one line of text.

Textual's ``Footer`` mounts a widget per key and recomposes them all on every binding change; on our start path
that cost more than the whole Sessions list. This bar draws the same facts (key, description, dimmed when
``check_action`` says so, the palette key on the right) as one ``Text``; hovering a key shows its tooltip and
clicking it runs the action.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widget import Widget

from store.safetext import safe

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen


class _Span:
    """One key of the bar: its cells and what a click runs (a plain class: cheaper to define than a dataclass)."""

    __slots__ = ("start", "end", "node", "action", "tooltip", "enabled")

    def __init__(self, start: int, end: int, node: DOMNode, action: str, tooltip: str, enabled: bool) -> None:
        self.start = start
        self.end = end
        self.node = node
        self.action = action
        self.tooltip = tooltip
        self.enabled = enabled


class KeyBar(Widget):
    """The keys of the screen it sits on, with descriptions; disabled ones dimmed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description", "keybar--disabled"}

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    KeyBar > .keybar--key { color: $footer-key-foreground; text-style: bold; }
    KeyBar > .keybar--description { color: $foreground; }
    KeyBar > .keybar--disabled { color: $foreground-muted; text-style: dim; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._spans: list[_Span] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def render(self) -> Text:
        app = self.app
        key_style = self.get_component_rich_style("keybar--key", partial=True)
        text_style = self.get_component_rich_style("keybar--description", partial=True)
        off_style = self.get_component_rich_style("keybar--disabled", partial=True)
        line = Text(no_wrap=True, overflow="ellipsis")
        spans: list[_Span] = []
        seen: set[str] = set()
        palette: tuple[str, _Span] | None = None
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if not binding.show:
                if binding.action in ("command_palette", "app.command_palette") and palette is None:
                    label = safe(app.get_key_display(binding.with_key(key)))
                    palette = (label, _Span(0, 0, active.node, binding.action, binding.tooltip, active.enabled))
                continue
            ident = f"{id(active.node)}:{binding.action}"
            if ident in seen:
                continue
            seen.add(ident)
            label = safe(app.get_key_display(binding))  # keys may come from the user's keymap file
            start = cell_len(line.plain)
            line.append(" ")
            line.append(label, style=key_style if active.enabled else off_style)
            line.append(" ")
            line.append(safe(binding.description), style=text_style if active.enabled else off_style)
            line.append(" ")
            spans.append(_Span(start, cell_len(line.plain), active.node, binding.action, active.tooltip, active.enabled))
        if palette is not None:
            label, span = palette
            right = f" {label} Palette "
            room = self.size.width - cell_len(line.plain) - cell_len(right)
            if room >= 1:
                line.append(" " * room)
                start = cell_len(line.plain)
                line.append(f" {label}", style=key_style)
                line.append(" Palette ", style=text_style)
                spans.append(_Span(start, cell_len(line.plain), span.node, span.action, span.tooltip, span.enabled))
        self._spans = spans
        return line

    def _span_at(self, x: int) -> _Span | None:
        for span in self._spans:
            if span.start <= x < span.end:
                return span
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        span = self._span_at(event.x)
        self.tooltip = span.tooltip if span is not None and span.tooltip else None

    async def on_click(self, event: events.Click) -> None:
        span = self._span_at(event.x)
        if span is not None:  # a dimmed key clicked says why, as when it is pressed (SessionscopeApp.run_action)
            await self.app.run_action(span.action, span.node)
