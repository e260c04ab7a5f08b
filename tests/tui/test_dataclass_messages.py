"""The app's messages are dataclasses: on this Textual version they still post, bubble, reach their handlers,
carry their sender (``Message.__post_init__`` runs) and match ``@on`` selectors through ``control``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from textual import on
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from tui import messages
from tui.live import LiveChanged
from tui.widgets.row_list import Column, ListSource, RowList

pytestmark = pytest.mark.anyio


def message_classes() -> list[type[Message]]:
    return [v for v in vars(messages).values() if isinstance(v, type) and issubclass(v, Message) and v is not Message]


def test_every_message_of_tui_messages_is_a_dataclass() -> None:
    classes = message_classes()
    assert len(classes) >= 9
    for cls in classes:
        assert dataclasses.is_dataclass(cls), cls.__name__
        assert "__init__" in vars(cls), cls.__name__  # the generated one, not Message's


def test_dataclass_message_runs_message_post_init_and_keeps_fields() -> None:
    msg = messages.ExportFinished(path=__import__("pathlib").Path("/tmp/x.md"), chars=3)
    assert msg.error == ""
    assert msg.chars == 3
    # set by Message.__post_init__
    assert isinstance(msg.time, float)
    assert msg._stop_propagation is False
    assert msg._prevent == set()
    assert msg.bubble is True
    assert LiveChanged(frozenset({"s"})).everything is False


@dataclass
class Quiet(Message, bubble=False):
    """A dataclass message that does not bubble (``bubble`` is a class keyword of ``Message``)."""

    n: int


class Inner(Static):
    pass


class Probe(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.got: list[tuple[str, Message]] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="box"):
            yield Inner(id="inner")
        yield RowList[Any](ListSource(["a", "b"], key=str), columns=[Column("v", "V", str)], id="rows")

    @on(messages.UnfilteredCounted)
    def counted(self, message: messages.UnfilteredCounted) -> None:
        self.got.append(("app", message))

    @on(Quiet)
    def quiet(self, message: Quiet) -> None:
        self.got.append(("app-quiet", message))

    @on(RowList.Selected, "#rows")
    def selected(self, message: RowList.Selected) -> None:
        self.got.append(("selected", message))


async def test_dataclass_message_posts_bubbles_and_is_handled() -> None:
    app = Probe()
    async with app.run_test(size=(60, 12)) as pilot:
        inner = app.query_one("#inner", Inner)
        box = app.query_one("#box", Vertical)
        msg = messages.UnfilteredCounted(42)
        assert msg._sender is not None  # set by Message.__post_init__ (the active message pump)
        inner.post_message(msg)
        # a non-bubbling dataclass message stays on the node it was posted to
        inner.post_message(Quiet(1))
        # set_sender is honoured: a message whose sender is the parent stops there (Textual's loop guard)
        stopped = messages.UnfilteredCounted(7).set_sender(box)
        assert stopped._sender is box
        inner.post_message(stopped)
        await pilot.pause()
        await pilot.pause()
        got = [(where, m) for where, m in app.got if where in ("app", "app-quiet")]
        assert [where for where, _ in got] == ["app"]
        assert got[0][1] is msg
        assert isinstance(msg, messages.UnfilteredCounted) and msg.total == 42

        rows = app.query_one("#rows", RowList)
        for _ in range(50):  # the first page is read in a worker
            if rows.rows:
                break
            await pilot.pause(0.05)
        rows.action_select()  # RowList has no bindings of its own; lists bind ``enter`` to it
        await pilot.pause()
        selected = [m for where, m in app.got if where == "selected"]
        assert len(selected) == 1
        assert isinstance(selected[0], RowList.Selected)
        assert selected[0].control is rows
        assert selected[0].row == "a"


def _tui_message_classes() -> list[type[Message]]:
    import importlib
    import pkgutil

    import tui

    found: list[type[Message]] = []
    for info in pkgutil.walk_packages(tui.__path__, "tui."):
        if info.name.startswith("tui.cli") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Message) and value.__module__ == info.name:
                found.append(value)
    return found


def test_no_message_class_sets_bubble_in_its_body() -> None:
    """``bubble = False`` in a class body is overwritten by ``Message.__init_subclass__`` (the message bubbles
    after all); a message that must not bubble says so as ``class X(Message, bubble=False)``."""
    import inspect
    import re

    classes = _tui_message_classes()
    assert len(classes) >= 12
    in_body = re.compile(r"^\s+bubble\s*[:=]", re.MULTILINE)
    wrong = [cls.__qualname__ for cls in classes if in_body.search(inspect.getsource(cls))]
    assert wrong == []


def test_messages_meant_for_their_target_only_do_not_bubble() -> None:
    from tui.widgets.row_list import PageFailed, PageLoaded, RowsReread

    for cls in (LiveChanged, PageLoaded, PageFailed, RowsReread):
        assert cls.bubble is False, cls.__name__


async def test_live_changed_posted_to_a_screen_does_not_reach_the_app() -> None:
    seen: list[str] = []

    class Host(App[None]):
        def on_live_changed(self, message: LiveChanged) -> None:
            seen.append("app")

    app = Host()
    async with app.run_test() as pilot:
        screen_seen: list[str] = []
        app.screen.on_live_changed = lambda message: screen_seen.append("screen")  # type: ignore[attr-defined]
        app.screen.post_message(LiveChanged(frozenset({"s1"})))
        await pilot.pause()
        await pilot.pause()
    assert seen == []
