"""RowList: the column layout (``fit``), cell text, and the widget over in-memory and keyset sources in a small
App (keys, paging by keyset with counted queries, marks, hostile text, NO_COLOR, errors, stale reads)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import BindingType

from tui import actions
from tui.widgets.row_list import (
    GAP,
    GUTTER,
    ChainSource,
    Column,
    ListSource,
    OffsetSource,
    Page,
    RowList,
    RowSource,
    cell_text,
    fit,
    fit_text,
)

pytestmark = pytest.mark.anyio

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = "\x1b]52;c;aGk=\x07[/][@click=app.quit]"
DEADLINE_S = 10.0


# --- fit --------------------------------------------------------------------------------------------------------


def run_like_columns() -> list[Column[Any]]:
    """Columns shaped like the Runs list: ids and status matter most, SESSION and the ids take the extra width."""
    return [
        Column("session", "SESSION", str, min_width=14, grow=3, priority=2),
        Column("run", "RUN", str, min_width=12, max_width=36, grow=2, priority=0, overflow="start"),
        Column("status", "STATUS", str, min_width=9, priority=1),
        Column("state", "STATE", str, min_width=11, priority=4),
        Column("holder", "LEASE HOLDER", str, min_width=16, max_width=40, grow=1, priority=5),
        Column("epoch", "EP", str, min_width=3, priority=7, align="right"),
        Column("expiry", "LEASE EXPIRY", str, min_width=16, priority=3),
        Column("recovery", "RECOVERY", str, min_width=13, max_width=20, grow=1, priority=6),
    ]


def kept(columns: Sequence[Column[Any]], widths: list[int | None]) -> list[str]:
    return [c.key for c, w in zip(columns, widths, strict=True) if w is not None]


def used(widths: list[int | None]) -> int:
    present = [w for w in widths if w is not None]
    return sum(present) + GAP * (len(present) - 1)


@pytest.mark.parametrize("width", [40, 80, 120, 240])
def test_fit_never_overflows_and_respects_bounds(width: int) -> None:
    cols = run_like_columns()
    widths = fit(cols, width)
    assert used(widths) <= width
    for col, w in zip(cols, widths, strict=True):
        if w is not None:
            assert w >= col.min_width
            assert col.max_width is None or w <= col.max_width
            if col.grow == 0:
                assert w == col.min_width


def test_fit_drops_by_priority_when_narrow() -> None:
    cols = run_like_columns()
    w40 = kept(cols, fit(cols, 40))
    assert w40 == ["session", "run", "status"]  # 14 + 12 + 9 + 2 gaps = 37
    w80 = kept(cols, fit(cols, 80))
    assert w80 == ["session", "run", "status", "state", "expiry"]  # STATUS outlives the often-blank STATE
    w100 = kept(cols, fit(cols, 100))
    assert w100 == ["session", "run", "status", "state", "holder", "expiry", "recovery"]
    assert kept(cols, fit(cols, 120)) == [c.key for c in cols]
    assert kept(cols, fit(cols, 240)) == [c.key for c in cols]


def test_fit_shares_extra_width_by_grow_and_caps_it() -> None:
    cols = run_like_columns()
    widths = dict(zip([c.key for c in cols], fit(cols, 240), strict=True))
    assert widths["run"] == 36  # the id is shown whole when there is room
    assert widths["recovery"] == 20
    assert widths["holder"] == 40
    assert widths["session"] is not None and widths["session"] > 14
    assert used(list(widths.values())) == 240  # SESSION is uncapped: it takes what the capped ones cannot
    # at 120, the 19 extra cells are shared 3:2:1:1 (session, run, holder, recovery)
    w120 = fit(cols, 120)
    extra = 120 - used([c.min_width if w is not None else None for c, w in zip(cols, w120, strict=True)])
    assert extra > 0
    grown = {c.key: w - c.min_width for c, w in zip(cols, w120, strict=True) if w is not None and c.grow}
    assert sum(grown.values()) == extra
    assert grown["session"] >= grown["run"] >= grown["holder"]


def test_fit_exact_small_cases() -> None:
    a = Column[Any]("a", "A", str, min_width=10, grow=1)
    b = Column[Any]("b", "B", str, min_width=5, priority=1)
    c = Column[Any]("c", "C", str, min_width=5, grow=1, max_width=7, priority=2)
    assert fit([a, b, c], 22) == [10, 5, 5]
    assert fit([a, b, c], 30) == [16, 5, 7]  # c capped at 7, a takes the rest
    assert fit([a, b, c], 16) == [10, 5, None]
    assert fit([a, b, c], 12) == [12, None, None]  # b dropped; a grows into its room
    assert fit([a, b, c], 6) == [6, None, None]  # not even the first fits: it gets everything
    assert fit([a, b, c], 0) == [None, None, None]
    assert fit([], 80) == []
    fixed = Column[Any]("f", "F", str, min_width=4)
    assert fit([fixed], 80) == [4]  # nothing grows: the rest stays blank


def test_fit_drops_rightmost_of_equal_priority() -> None:
    cols = [Column[Any](k, k, str, min_width=10, priority=1) for k in "abc"]
    assert fit(cols, 21) == [10, 10, None]


def test_column_checks_its_bounds() -> None:
    with pytest.raises(ValueError):
        Column[Any]("x", "X", str, min_width=0)
    with pytest.raises(ValueError):
        Column[Any]("x", "X", str, min_width=5, max_width=3)


# --- cell text --------------------------------------------------------------------------------------------------


def test_fit_text_cuts_end_or_start_and_aligns() -> None:
    assert fit_text(Text("abcdefgh"), 5).plain == "abcd…"
    assert fit_text(Text("/home/u/project"), 8, overflow="start").plain == "…project"
    assert fit_text(Text("42"), 5, align="right").plain == "   42"
    assert fit_text(Text("ab"), 5).plain == "ab   "
    assert fit_text(Text("abc"), 1, overflow="start").plain == "…"
    assert fit_text(Text("日本語テキスト"), 6).cell_len == 6
    assert fit_text(Text("日本語テキスト"), 7, overflow="start").cell_len == 7
    assert fit_text(Text("x"), 0).plain == ""


def test_cell_text_makes_strings_safe_and_plain() -> None:
    text = cell_text(HOSTILE)
    assert not RAW.search(text.plain)
    assert "[/][@click=app.quit]" in text.plain
    assert text.spans == []
    assert cell_text("a\nb\tc").plain == "a b c"
    trusted = Text.assemble(("ok", "bold"))
    assert cell_text(trusted) is trusted
    rebuilt = cell_text(Text("bad\x1b[2J"))
    assert not RAW.search(rebuilt.plain)


# --- sources used by the App tests --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    n: int
    name: str
    note: str = ""


def item(n: int) -> Item:
    return Item(n, f"item {n:07d}")


class CountingSource(RowSource[Item]):
    """``size`` rows made on demand (nothing stored), by keyset on ``n``; every call is recorded."""

    reversible = True

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls: list[tuple[str, int]] = []

    def key(self, row: Item) -> Hashable:
        return row.n

    def _page(self, start: int, end: int, more: bool) -> Page[Item]:
        return Page(tuple(item(n) for n in range(max(0, start), min(self.size, end))), more)

    def first(self, limit: int) -> Page[Item]:
        self.calls.append(("first", limit))
        return self._page(0, limit, limit < self.size)

    def after(self, key: Hashable, limit: int) -> Page[Item]:
        self.calls.append(("after", limit))
        assert isinstance(key, int)
        return self._page(key + 1, key + 1 + limit, key + 1 + limit < self.size)

    def before(self, key: Hashable, limit: int) -> Page[Item]:
        self.calls.append(("before", limit))
        assert isinstance(key, int)
        return self._page(key - limit, key, key - limit > 0)

    def last(self, limit: int) -> Page[Item]:
        self.calls.append(("last", limit))
        return self._page(self.size - limit, self.size, self.size - limit > 0)


class ForwardSource(CountingSource):
    """The same rows, forward only (like the Runs list's recent runs)."""

    reversible = False


class FailingSource(RowSource[Item]):
    def key(self, row: Item) -> Hashable:
        return row.n

    def first(self, limit: int) -> Page[Item]:
        raise OSError("disk \x1b]0;pwned\x07 on fire")


class GatedSource(CountingSource):
    """Waits for ``gate`` before answering (a slow query)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.gate = threading.Event()

    def first(self, limit: int) -> Page[Item]:
        self.gate.wait(5)
        return Page((Item(-1, "stale"),), False)


class MutableSource(ListSource[Item]):
    """A ListSource whose rows a test replaces; ``reread`` sees the new ones."""

    def set(self, rows: list[Item]) -> None:
        self.rows = tuple(rows)
        self._index = {r.n: i for i, r in enumerate(self.rows)}


class ItemList(RowList[Item]):
    BINDINGS: ClassVar[list[BindingType]] = [*actions.bindings("session-list")]  # the registry's list keys

    def make_columns(self) -> Sequence[Column[Item]]:
        return [
            Column("name", "NAME", lambda r: r.name, min_width=12, grow=2),
            Column("n", "N", lambda r: f"{r.n:,}", min_width=9, align="right", priority=1),
            Column("note", "NOTE", lambda r: r.note, min_width=8, grow=1, priority=2, style=lambda r: "warn"),
        ]

    def row_style(self, row: Item) -> str | None:
        return "damaged" if row.note == "damaged" else None


class ListApp(App[None]):
    def __init__(self, source: RowSource[Item] | None, **kwargs: Any) -> None:
        super().__init__()
        self.source = source
        self.kwargs = kwargs
        self.events: list[Any] = []

    def compose(self) -> ComposeResult:
        yield ItemList(self.source, id="items", **self.kwargs)

    def on_mount(self) -> None:
        self.query_one(ItemList).focus()

    def on_row_list_selected(self, message: RowList.Selected) -> None:
        self.events.append(("selected", message.row))

    def on_row_list_highlighted(self, message: RowList.Highlighted) -> None:
        self.events.append(("highlighted", message.row))

    def on_row_list_failed(self, message: RowList.Failed) -> None:
        self.events.append(("failed", message.error))


async def settle(pilot: Any, lst: RowList[Any]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if lst.loaded and lst._pending is None and not lst._reread_running:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the list did not settle")
        await asyncio.sleep(0.01)


def screen_text(lst: RowList[Any]) -> list[str]:
    return ["".join(seg.text for seg in lst.render_line(y)) for y in range(lst.size.height)]


def all_segments(lst: RowList[Any]) -> list[Any]:
    return [seg for y in range(lst.size.height) for seg in lst.render_line(y)]


def test_chain_source_pages_across_its_parts() -> None:
    active = ListSource([Item(-3, "a3", "active"), Item(-2, "a2", "active")], key=lambda r: r.n)
    recent = CountingSource(10)
    chain = ChainSource([active, recent], part=lambda r: 0 if r.note == "active" else 1)
    assert chain.reversible
    page = chain.first(5)
    assert [r.n for r in page.rows] == [-3, -2] and page.more
    page = chain.after(chain.key(page.rows[-1]), 5)
    assert [r.n for r in page.rows] == [0, 1, 2, 3, 4] and page.more
    assert chain.before(chain.key(page.rows[0]), 5).rows == active.rows
    last = chain.last(4)
    assert [r.n for r in last.rows] == [6, 7, 8, 9] and last.more
    assert chain.ident(last.rows[0]) == 6
    assert chain.total() is None
    assert ChainSource([active, ListSource([], key=lambda r: r.n)], part=lambda r: 0).first(5).rows == active.rows
    only = ChainSource([ListSource([], key=lambda r: r.n), recent], part=lambda r: 1)
    assert [r.n for r in only.last(2).rows] == [8, 9]
    assert only.before((1, 0), 5) == Page((), False)


# --- the widget ---------------------------------------------------------------------------------------------------


async def test_cursor_keys_over_ten_thousand_rows_in_memory() -> None:
    source = ListSource([item(n) for n in range(10_000)], key=lambda r: r.n)
    app = ListApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        lines = screen_text(lst)
        assert "NAME" in lines[0] and "N" in lines[0]
        assert "item 0000000" in lines[1] and lines[1].startswith("▌")
        assert lst.count_text() == "10,000"
        await pilot.press("j", "j", "down")
        assert lst.selected == item(3)
        await pilot.press("k")
        assert lst.selected == item(2)
        await pilot.press("pagedown")
        await settle(pilot, lst)
        assert lst.selected == item(2 + lst._page_rows)
        await pilot.press("pageup")
        assert lst.selected == item(2)
        await pilot.press("G")
        await settle(pilot, lst)
        assert lst.selected == item(9_999)
        assert "item 0009999" in screen_text(lst)[23]
        await pilot.press("up")
        assert lst.selected == item(9_998)
        await pilot.press("g")
        await settle(pilot, lst)
        assert lst.selected == item(0)
        await pilot.press("end")
        await settle(pilot, lst)
        assert lst.selected == item(9_999)
        await pilot.press("home")
        await settle(pilot, lst)
        assert lst.selected == item(0)
        assert len(lst.rows) <= lst.WINDOW_PAGES * lst.page_size
        highlighted = [row for kind, row in app.events if kind == "highlighted"]
        assert highlighted[0] == item(0) and item(9_998) in highlighted


async def test_keyset_source_reads_one_page_per_call_and_jumps_in_constant_reads() -> None:
    source = CountingSource(1_000_000)
    app = ListApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        assert source.calls == [("first", lst.page_size)]
        assert lst.count_text() == f"{lst.page_size} of >{lst.page_size}"  # no total: a lower bound
        source.calls.clear()
        await pilot.press("G")
        await settle(pilot, lst)
        await pilot.press("k")
        await settle(pilot, lst)
        assert lst.selected == item(999_998)
        assert source.calls[0] == ("last", lst.page_size)
        assert len(source.calls) <= 2  # the last page, maybe the one before it
        assert all(limit == lst.page_size for _, limit in source.calls)
        # scrolling down through many pages: one page per read, and the window stays bounded
        source.calls.clear()
        await pilot.press("g")
        await settle(pilot, lst)
        for _ in range(30):
            await pilot.press("pagedown")
            await settle(pilot, lst)
        assert lst.selected == item(30 * lst._page_rows)
        assert all(limit == lst.page_size for _, limit in source.calls)
        assert 1 <= len(source.calls) <= 2 + (30 * lst._page_rows) // lst.page_size + 1
        assert len(lst.rows) <= lst.WINDOW_PAGES * lst.page_size
        assert lst.has_before  # the start of the table was let go
        # and back up: pages before the window are read again
        for _ in range(30):
            await pilot.press("pageup")
            await settle(pilot, lst)
        assert lst.selected == item(0)
        assert not lst.has_before


async def test_enter_and_double_click_post_selected_and_click_moves_cursor() -> None:
    app = ListApp(ListSource([item(n) for n in range(50)], key=lambda r: r.n))
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        await pilot.press("j", "enter")
        await pilot.pause()
        assert ("selected", item(1)) in app.events
        await pilot.click(ItemList, offset=(10, 5))  # line 5 is row 4
        await pilot.pause()
        assert lst.selected == item(4)
        app.events.clear()
        await pilot.click(ItemList, offset=(10, 0))  # the header selects nothing
        assert lst.selected == item(4)
        await pilot.click(ItemList, offset=(10, 5), times=2)
        await pilot.pause()
        assert ("selected", item(4)) in app.events


async def test_mark_changed_styles_a_row_for_one_refresh() -> None:
    app = ListApp(ListSource([item(n) for n in range(20)], key=lambda r: r.n))
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        changed_style = lst._get_styles().changed
        assert changed_style.bgcolor is not None  # the theme's $warning 20%, through the component class
        line = lst.render_line(3)  # row 2
        assert changed_style.bgcolor is None or all(
            seg.style is None or seg.style.bgcolor != changed_style.bgcolor for seg in line)
        lst.mark_changed({2})
        line = lst.render_line(3)
        assert "".join(s.text for s in line)[1] == "•"
        if changed_style.bgcolor is not None:
            style = list(line)[0].style
            assert style is not None and style.bgcolor == changed_style.bgcolor
        assert "".join(s.text for s in lst.render_line(4))[1] == " "  # row 3 is not marked
        lst.mark_changed(set())  # the next refresh: marks are gone
        assert "".join(s.text for s in lst.render_line(3))[1] == " "


async def test_refresh_rows_rereads_in_place_and_marks_what_changed() -> None:
    rows = [item(n) for n in range(30)]
    source = MutableSource(rows, key=lambda r: r.n)
    app = ListApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        await pilot.press("j", "j", "j")
        source.set([*rows[:5], Item(5, "item five, renamed"), *rows[6:]])
        lst.refresh_rows({5, 6, 999})
        await settle(pilot, lst)
        assert lst.changed == frozenset({5})
        assert lst.selected == item(3)
        assert "item five, renamed" in screen_text(lst)[6]
        # a row that is gone: the window is read again, the cursor stays on its row
        source.set([r for r in rows if r.n != 1])
        lst.refresh_rows({1})
        await settle(pilot, lst)
        assert lst.selected == item(3)
        assert [r.n for r in lst.rows[:3]] == [0, 2, 3]


async def test_reload_keeps_the_cursor_on_the_same_row_of_a_keyset_source() -> None:
    source = CountingSource(100_000)
    app = ListApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        for _ in range(20):
            await pilot.press("pagedown")
            await settle(pilot, lst)
        before = lst.selected
        assert before is not None
        line = lst.cursor - int(lst.scroll_offset.y)
        source.calls.clear()
        lst.reload(keep_cursor=True)
        await settle(pilot, lst)
        assert lst.selected == before
        assert lst.cursor - int(lst.scroll_offset.y) == line
        assert all(limit == lst.page_size for _, limit in source.calls)
        assert len(source.calls) <= 3


async def test_forward_only_source_is_capped_and_says_so() -> None:
    class Capped(ItemList):
        DISPLAY_CAP: ClassVar[int] = 300

    class CappedApp(ListApp):
        def compose(self) -> ComposeResult:
            yield Capped(self.source, id="items")

    source = ForwardSource(10_000)
    app = CappedApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(Capped)
        await settle(pilot, lst)
        await pilot.press("G")  # forward only: the last row read so far, no jump
        await settle(pilot, lst)
        for _ in range(20):
            await pilot.press("G")
            await settle(pilot, lst)
        assert len(lst.rows) == 300
        assert lst.capped
        assert lst.count_text() == "300 of >300"
        assert all(kind in ("first", "after") and limit == lst.page_size for kind, limit in source.calls)
        assert lst.selected == item(299)
        assert "300 of >300 rows shown" in screen_text(lst)[23]


async def test_hostile_cell_text_is_drawn_literally_with_no_control_chars() -> None:
    rows = [Item(0, HOSTILE, "[bold]x[/bold]"), Item(1, "\u202etxt.exe", "\ud83d"), Item(2, "\x9b31m", "damaged")]
    app = ListApp(ListSource(rows, key=lambda r: r.n))
    async with app.run_test(size=(120, 10)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        text = "\n".join(screen_text(lst))
        assert not RAW.search(text)
        assert "[/][@click=app.quit]" in text
        assert "[bold]x[/bold]" in text
        assert "␛]52;c;aGk=␇" in text
        assert app.is_running  # the [@click] text did not run anything
        for seg in all_segments(lst):
            assert seg.style is None or seg.style.link is None


async def test_no_color_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = ListApp(ListSource([item(n) for n in range(5)], key=lambda r: r.n))
    async with app.run_test(size=(80, 10)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        lst.mark_changed({1})
        lines = screen_text(lst)
        assert lines[1].startswith("▌") and "item 0000000" in lines[1]
        assert lines[2][1] == "•"
        await pilot.press("j")
        assert lst.selected == item(1)


async def test_failing_source_shows_one_error_line() -> None:
    app = ListApp(FailingSource())
    async with app.run_test(size=(80, 10)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        lines = screen_text(lst)
        assert lines[1].strip().startswith("✗") and "disk" in lines[1]
        assert not RAW.search("\n".join(lines))
        assert "Loading" not in "\n".join(lines)
        assert any(kind == "failed" for kind, _ in app.events)


async def test_loading_then_empty_text() -> None:
    app = ListApp(None, empty_text="No items match.")
    async with app.run_test(size=(80, 10)) as pilot:
        lst = app.query_one(ItemList)
        await pilot.pause()
        assert "Loading…" in screen_text(lst)[1]
        lst.set_source(ListSource([], key=lambda r: r.n))
        await settle(pilot, lst)
        assert "No items match." in screen_text(lst)[1]
        lst.show_message("No session directory is open.")
        assert "No session directory is open." in screen_text(lst)[1]


async def test_stale_page_of_an_older_source_is_dropped() -> None:
    slow = GatedSource(10)
    app = ListApp(slow)
    async with app.run_test(size=(80, 10)) as pilot:
        lst = app.query_one(ItemList)
        await pilot.pause()
        lst.set_source(ListSource([item(n) for n in range(3)], key=lambda r: r.n))
        slow.gate.set()
        await settle(pilot, lst)
        await asyncio.sleep(0.05)
        await pilot.pause()
        assert [r.n for r in lst.rows] == [0, 1, 2]


async def test_layout_keeps_gutter_and_columns_at_narrow_and_wide() -> None:
    app = ListApp(ListSource([item(n) for n in range(5)], key=lambda r: r.n))
    async with app.run_test(size=(240, 10)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        header = screen_text(lst)[0]
        assert header.startswith(" " * GUTTER + "NAME") and "NOTE" in header
        assert len(header) == lst.scrollable_content_region.width
        await pilot.resize_terminal(30, 10)
        await pilot.pause()
        header = screen_text(lst)[0]
        assert "NOTE" not in header and "NAME" in header


async def test_first_page_read_ahead_is_shown_without_a_read() -> None:
    source = CountingSource(1_000)
    app = ListApp(None)
    async with app.run_test(size=(80, 10)) as pilot:
        lst = app.query_one(ItemList)
        await pilot.pause()
        lst.set_source(source, first_page=source.first(lst.page_size), total=1_000)
        assert lst.loaded and lst.selected == item(0)  # at once, in the same call
        await settle(pilot, lst)
        assert source.calls == [("first", lst.page_size)]  # only the read done ahead
        assert lst.count_text() == "1,000"


async def test_mouse_wheel_far_from_the_cursor_keeps_the_window_bounded() -> None:
    source = CountingSource(100_000)
    app = ListApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        for _ in range(12):
            lst.scroll_to(y=lst.max_scroll_y, animate=False, immediate=True)
            await settle(pilot, lst)
        assert len(lst.rows) <= lst.WINDOW_PAGES * lst.page_size
        assert lst.rows[-1].n > 1_000
        assert lst.selected is lst.rows[lst.cursor]  # the cursor moved with the window
        assert all(limit == lst.page_size for _, limit in source.calls)


async def test_theme_change_redraws_with_the_new_styles() -> None:
    app = ListApp(ListSource([item(n) for n in range(5)], key=lambda r: r.n))
    async with app.run_test(size=(80, 10)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        before = list(lst.render_line(1))[0].style
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        after = list(lst.render_line(1))[0].style
        assert before != after  # the cached strip of the cursor row was dropped


def offset_source(size: int, calls: list[tuple[int, int]]) -> OffsetSource[Item]:
    def read(offset: int, limit: int) -> tuple[list[Item], int]:
        calls.append((offset, limit))
        return [item(n) for n in range(offset, min(size, offset + limit))], size

    return OffsetSource(read, ident=lambda r: r.n)


def test_offset_source_pages_by_remembered_positions() -> None:
    calls: list[tuple[int, int]] = []
    src = offset_source(1_000, calls)
    page = src.first(10)
    assert [r.n for r in page.rows] == list(range(10)) and page.more and src.total() == 1_000
    page = src.after(9, 10)
    assert page.rows[0].n == 10
    assert [r.n for r in src.before(10, 5).rows] == [5, 6, 7, 8, 9]
    last = src.last(10)
    assert last.rows[-1].n == 999 and last.more
    end = src.after(999, 10)
    assert end == Page((), False)
    assert all(limit <= 10 for _, limit in calls)
    with pytest.raises(LookupError):
        offset_source(10, []).after(5, 10)  # a position it never served
    ahead = offset_source(100, [])
    first = ahead.adopt([item(n) for n in range(10)], 100)
    assert first.more and ahead.after(9, 5).rows[0] == item(10)  # rows read ahead are known positions


async def test_offset_source_in_the_widget_jumps_and_reloads() -> None:
    calls: list[tuple[int, int]] = []
    app = ListApp(offset_source(50_000, calls))
    async with app.run_test(size=(80, 24)) as pilot:
        lst = app.query_one(ItemList)
        await settle(pilot, lst)
        assert lst.count_text() == "50,000"
        await pilot.press("G", "k")
        await settle(pilot, lst)
        assert lst.selected == item(49_998)
        lst.reload()
        await settle(pilot, lst)
        assert lst.selected == item(49_998)
        assert all(limit <= lst.page_size for _, limit in calls)
        assert len(calls) <= 6
