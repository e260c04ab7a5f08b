"""The session list by keyset (:func:`store.mothx.session_pages.sessions_page`): pages after and before a
session give exactly the list's order in every sort, filtered or searched, one statement per page at any
depth, and a page whose anchor is gone says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import store.mothx.session_pages as session_pages
from store.mothx.db import OpenMode
from store.mothx.session_pages import AnchorGone, sessions_page
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.sessions import SessionFilter, SortKey, _lists, list_sessions
from tests.store.test_sessions import Writer, _forget_indexes, new_dir  # noqa: F401 - the fixture is used

COUNT = 260


@pytest.fixture
def listing(tmp_path: Path) -> Iterator[SessionDir]:
    w = new_dir(tmp_path / "sessions")
    for i in range(COUNT):
        # Ties on purpose: times repeat every 7 sessions, titles every 5, work dirs every 3 (some NULL).
        sid = w.session(f"s{i:04d}", cwd="/w/" + "abc"[i % 3] if i % 11 else "", t=i % 7)
        if i % 4:
            w.user(sid, f"question {i} about retries" if i % 2 else f"question {i}", t=100 + i % 13)
        if i % 5 == 0:
            w.title(sid, f"Title {i % 25}")
    w.conn.execute("UPDATE sessions SET cwd = NULL WHERE id IN ('s0011', 's0022')")
    w.close()
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        yield sd


def _forward(sd: SessionDir, flt: SessionFilter, sort: SortKey, desc: bool, limit: int) -> list[str]:
    page = sessions_page(sd, flt, sort, desc, limit=limit)
    got = [r.id for r in page.rows]
    while page.more:
        page = sessions_page(sd, flt, sort, desc, after=got[-1], limit=limit)
        got += [r.id for r in page.rows]
    return got


def _backward(sd: SessionDir, flt: SessionFilter, sort: SortKey, desc: bool, limit: int) -> list[str]:
    page = sessions_page(sd, flt, sort, desc, last=True, limit=limit)
    got = [r.id for r in page.rows]
    while page.more:
        page = sessions_page(sd, flt, sort, desc, before=got[0], limit=limit)
        got = [r.id for r in page.rows] + got
    return got


@pytest.mark.parametrize("flt", [SessionFilter(), SessionFilter(search="retries"), SessionFilter(cwd="/w/b"),
                                 SessionFilter(messages_only=True)], ids=["all", "search", "cwd", "messages"])
def test_keyset_pages_give_the_list_order_in_every_sort(listing: SessionDir, flt: SessionFilter) -> None:
    for sort in SortKey:
        for desc in (True, False):
            expected = [r.id for r in list_sessions(listing, flt, sort, desc, limit=10_000).rows]
            assert expected, (sort, desc)
            _lists(listing).views.clear()  # the keyset statement itself, not the order list_sessions cached
            _lists(listing).keyset_reads.clear()
            assert _forward(listing, flt, sort, desc, 17) == expected, (sort, desc, "forward")
            assert _backward(listing, flt, sort, desc, 23) == expected, (sort, desc, "backward")


def test_the_keyset_statement_alone_gives_the_same_pages(listing: SessionDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_pages, "ORDER_AFTER", 10**9)  # never switch to the cached order
    for sort in SortKey:
        expected = [r.id for r in list_sessions(listing, SessionFilter(), sort, True, limit=10_000).rows]
        _lists(listing).views.clear()
        assert _forward(listing, SessionFilter(), sort, True, 19) == expected, sort
        assert _backward(listing, SessionFilter(), sort, True, 31) == expected, sort
        assert not _lists(listing).views  # no full order was computed


def _statements(sd: SessionDir) -> list[str]:
    seen: list[str] = []
    _lists(sd).index.conn.set_trace_callback(seen.append)
    return seen


def test_a_deep_page_is_one_statement(listing: SessionDir) -> None:
    order = [r.id for r in list_sessions(listing, limit=10_000).rows]
    _lists(listing).views.clear()
    _lists(listing).keyset_reads.clear()
    anchor = order[200]
    seen = _statements(listing)
    page = sessions_page(listing, after=anchor, limit=25)  # by the keyset statement
    assert [r.id for r in page.rows] == order[201:226]
    assert len(seen) == 1, seen
    assert "LIMIT 26" in seen[0] and "ORDER BY" in seen[0]
    for _ in range(session_pages.ORDER_AFTER):  # paging on: the whole order is computed once ...
        sessions_page(listing, after=anchor, limit=25)
    seen.clear()
    page = sessions_page(listing, before=order[240], limit=25)  # ... and then a page is one read by id
    assert [r.id for r in page.rows] == order[215:240]
    assert len(seen) == 1, seen
    assert "LIMIT 26" not in seen[0]  # the rows read by id, not sorted again


def test_a_page_after_a_session_that_is_gone_says_so(tmp_path: Path) -> None:
    w = new_dir(tmp_path / "sessions")
    for i in range(30):
        w.user(w.session(f"s{i:03d}", t=i), f"hello {i}")
    with open_session_dir(w.root, OpenMode.READ_WRITE) as sd:
        first = sessions_page(sd, limit=10)
        assert first.more
        anchor = first.rows[-1].id
        w.delete_session(anchor)
        with pytest.raises(AnchorGone):
            sessions_page(sd, after=anchor, limit=10)
        last = sessions_page(sd, last=True, limit=10)
        assert not sessions_page(sd, after=last.rows[-1].id, limit=10).rows  # after the last: nothing, no error
    w.conn.close()


def test_a_page_cannot_be_after_and_before_at_once(listing: SessionDir) -> None:
    with pytest.raises(ValueError):
        sessions_page(listing, after="s0001", before="s0002")


def test_a_time_that_is_no_time_sorts_after_every_real_one(tmp_path: Path) -> None:
    w = new_dir(tmp_path / "sessions")
    for i in range(5):
        w.session(f"s{i:03d}", t=i * 60)
    w.session("s-bad")
    w.conn.execute("UPDATE sessions SET timestamp = 'not-a-time' WHERE id = 's-bad'")
    w.close()
    with open_session_dir(w.root, OpenMode.READ_ONLY) as sd:
        flt = SessionFilter()
        for sort in (SortKey.LAST_ACTIVE, SortKey.CREATED):
            order = [r.id for r in list_sessions(sd, flt, sort, True, limit=100).rows]
            assert order[-1] == "s-bad" and order[0] == "s004", (sort, order)
            _lists(sd).views.clear()
            assert _forward(sd, flt, sort, True, 2) == order, sort
            assert _backward(sd, flt, sort, True, 2) == order, sort
