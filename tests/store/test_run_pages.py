"""The Runs list's sequence in the store (``store.mothx.run_listing``): active runs, then keyset pages of the
terminal runs, one query per page at any depth; the orphaned-only scope; the ``runs`` command and the screen
read the same pages."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.mothx import db as dbmod
from store.mothx.leases import LeaseOwner, clock_override
from store.mothx.runs import RunScope, active_runs, is_orphan, list_runs, recent_runs, runs_page
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import RuntimeSimulator, create_session

T0 = 1_900_000_000
SESSIONS = 5
COUNT = 2000
KEYSET = "ORDER BY started_at DESC, id DESC, rowid DESC"


@pytest.fixture
def many(tmp_path: Path) -> Iterator[tuple[SessionDir, list[str], list[LeaseOwner]]]:
    """``SESSIONS`` sessions, each with one active run, among ``COUNT`` terminal runs cycling over the sessions
    (raw SQL); the active runs' start times fall between the terminal runs', deep in the list."""
    sd = open_session_dir(tmp_path / "sessions", create=True)
    sessions = [create_session(sd) for _ in range(SESSIONS)]
    owners = [LeaseOwner() for _ in sessions]
    with clock_override(T0):
        for s, o in zip(sessions, owners, strict=True):
            RuntimeSimulator(sd, s, owner=o).admit()
    conn = sqlite3.connect(sd.root / "sessions.db")
    with conn:
        for i, s in enumerate(sessions):
            conn.execute("UPDATE session_runs SET started_at = ? WHERE session_id = ?",
                         (f"2026-01-01T{1000 + 300 * i:06d}.5", s))
        conn.execute(
            f"WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < {COUNT - 1}), "
            "s(n, id) AS (SELECT row_number() OVER (ORDER BY id) - 1, id FROM sessions) "
            "INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
            "SELECT printf('run_t%06d', i), s.id, 'completed', printf('2026-01-01T%06d', i), 't' "
            "FROM r JOIN s ON s.n = r.i % ?", (SESSIONS,))
    conn.close()
    yield sd, sessions, owners
    sd.close()


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the store runs on a connection it opens from now on."""
    statements: list[str] = []
    real = dbmod._connect

    def connect(target: str, *, uri: bool) -> sqlite3.Connection:
        conn = real(target, uri=uri)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(dbmod, "_connect", connect)
    return statements


def keyset_queries(statements: list[str]) -> list[str]:
    return [s for s in statements if KEYSET in s]


def test_pages_skip_active_runs_and_match_the_whole_list(many: tuple[SessionDir, list[str], list[LeaseOwner]]) -> None:
    sd, sessions, _ = many
    everything = list_runs(sd, limit=COUNT + SESSIONS, now=T0 + 1)
    assert len(everything) == COUNT + SESSIONS
    first = runs_page(sd, RunScope(), limit=80, now=T0 + 1)
    assert first.active is not None and sorted(ls.run.session_id for ls in first.active) == sorted(sessions)
    walked = list(first.recent)
    page = first
    while page.more:
        page = recent_runs(sd, RunScope(), after=page.after, limit=200, now=T0 + 1)
        assert page.active is None
        walked.extend(page.recent)
    assert [ls.run.id for ls in walked] == [ls.run.id for ls in everything if not ls.run.active]
    assert len(walked) == COUNT and not any(ls.run.active for ls in walked)
    end = recent_runs(sd, RunScope(), after=walked[-1].cursor, limit=200, now=T0 + 1)
    assert end.recent == () and not end.more and end.after == walked[-1].cursor
    past = runs_page(sd, RunScope(), after=walked[99].cursor, limit=5, now=T0 + 1, with_active=True)
    assert past.active is not None and len(past.active) == SESSIONS and past.recent == tuple(walked[100:105])
    assert runs_page(sd, RunScope(), limit=5, now=T0 + 1, with_active=False).active is None

    one = runs_page(sd, RunScope(sessions[2]), limit=COUNT, now=T0 + 1)
    assert one.active is not None and [ls.run.session_id for ls in one.active] == [sessions[2]]
    assert {ls.run.session_id for ls in one.recent} == {sessions[2]} and len(one.recent) == COUNT // SESSIONS
    assert not one.more


def test_a_deep_run_page_is_one_query(many: tuple[SessionDir, list[str], list[LeaseOwner]],
                                      traced: list[str]) -> None:
    sd = open_session_dir(many[0].root)  # opened now: its connections are traced
    keys = [ls.cursor for ls in list_runs(sd, terminal_only=True, limit=COUNT, now=T0 + 1)]
    counts = []
    for depth in (0, 99, 500, 1000, 1500, 1799):
        traced.clear()
        page = recent_runs(sd, RunScope(), after=keys[depth], limit=200, now=T0 + 1)
        assert page.recent[0].cursor == keys[depth + 1] and len(page.recent) == 200
        assert len(keyset_queries(traced)) == 1, keyset_queries(traced)
        counts.append(len(traced))
    assert len(set(counts)) == 1, counts  # every statement: the same at any depth
    traced.clear()
    first = runs_page(sd, RunScope(), limit=80, now=T0 + 1)
    assert len(first.recent) == 80 and len(keyset_queries(traced)) == 2  # the active runs, the first page
    sd.close()


def test_orphaned_only_lists_the_orphaned_active_runs_alone(
        many: tuple[SessionDir, list[str], list[LeaseOwner]]) -> None:
    sd, _, owners = many
    owners[1].crash()
    scope = RunScope(orphaned_only=True)
    every = active_runs(sd, RunScope(), now=T0 + 20)
    page = runs_page(sd, scope, limit=200, now=T0 + 20)
    assert page.active is not None and page.active == tuple(ls for ls in every if is_orphan(ls))
    assert page.active and all(ls.execution is not None and ls.execution.state in ("orphaned", "recovery_failed")
                               for ls in page.active)
    assert page.recent == () and not page.more
    assert active_runs(sd, scope, now=T0 + 20) == page.active
    assert runs_page(sd, RunScope(), limit=0, now=T0 + 1).recent == ()
