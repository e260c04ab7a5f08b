"""The facts panel under the Runs and Deliveries lists: four no-wrap lines, the subclass's, by the given clock."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from tui.widgets.delivery_list import DeliveryFacts
from tui.widgets.facts_panel import FactsPanel
from tui.widgets.run_timeline import RunFacts

pytestmark = pytest.mark.anyio


class _Lines(FactsPanel[str]):
    def lines(self) -> list[Text]:
        return [Text(f"row {self.row} at {self.now():.0f}"), Text("[b]literal[/b]")]


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield _Lines(clock=lambda: 42.0, id="lines")
        yield RunFacts(id="run-facts")
        yield DeliveryFacts(id="delivery-facts")


async def test_the_panel_draws_its_lines_four_high_in_every_subclass() -> None:
    app = _Host()
    async with app.run_test(size=(80, 20)):
        panel = app.query_one(_Lines)
        panel.show("r1")
        assert panel.render().plain == "row r1 at 42\n[b]literal[/b]"
        for widget in (panel, app.query_one(RunFacts), app.query_one(DeliveryFacts)):
            assert widget.size.height == 4 and widget.styles.text_wrap == "nowrap"
        assert "No delivery operation selected." in app.query_one(DeliveryFacts).render().plain
