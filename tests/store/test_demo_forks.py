"""The demo's fork family, and the issue's "done when" checks run on a copy of the demo."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.demo.forks import SOURCE_TITLE
from store.errors import RepairRefused
from store.mothx.entries import load_rows, replay, replay_state
from store.mothx.fork import ForkSession
from store.mothx.fork_copy import ForkOptions
from store.mothx.fork_family import candidates, family
from store.mothx.session_admin import CHILD_TABLES, DeleteSessions, delete_statements
from store.mothx.session_titles import latest_title
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.store.test_recovery import SimProcess


@pytest.fixture(scope="module")
def demo_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from store.demo.build import build_demo

    return build_demo(tmp_path_factory.mktemp("forks-demo") / "sessions")


@pytest.fixture
def sd(demo_master: Path, tmp_path: Path) -> Iterator[SessionDir]:
    target = tmp_path / "sessions"
    shutil.copytree(demo_master, target)
    d = open_session_dir(target)
    yield d
    d.close()


def _source(sd: SessionDir) -> str:
    with sd.db.read() as conn:
        return str(conn.execute("SELECT session_id FROM entries WHERE type = 'session_info' AND "
                                "json_extract(data, '$.name') = ? ORDER BY seq LIMIT 1", (SOURCE_TITLE,)).fetchone()[0])


def test_demo_has_a_fork_family_with_a_fork_of_a_fork(sd: SessionDir) -> None:
    src = _source(sd)
    fam = family(sd, src)
    kids = [m for m in fam.members if m.parent_session == src]
    assert len(kids) == 2 and {k.fork_kind for k in kids} == {"message", "session"}
    grand = [m for m in fam.members if m.depth == 2]
    assert len(grand) == 1 and grand[0].parent_session in {k.session_id for k in kids}
    for m in fam.members[1:]:
        assert m.seed_length > 0 and m.boundary_seq > 0
        parent_rows = [r for r in load_rows(sd, m.parent_session) if r.seq <= m.boundary_seq]
        assert [x.message.raw for x in replay(sd, m.session_id)] == [x.message.raw for x in replay_state(parent_rows)]
    with sd.db.read() as conn:
        titles = sorted(latest_title(conn, m.session_id) for m in fam.members)
    assert titles == sorted([SOURCE_TITLE, f"{SOURCE_TITLE} (1)", f"{SOURCE_TITLE} (2)", f"{SOURCE_TITLE} (1) (1)"])


def test_demo_fork_at_the_second_turn_and_repeat(sd: SessionDir) -> None:
    src = _source(sd)
    second = [c for c in candidates(sd, src) if c.valid][1]
    repair = ForkSession(sd, ForkOptions(src, "done-when", at_seq=second.at_seq))
    res = repair.apply(repair.preview()).fork
    parent_turns = replay_state([r for r in load_rows(sd, src) if r.seq <= second.boundary_seq])
    assert [m.message.raw for m in replay(sd, res.session_id)] == [m.message.raw for m in parent_turns]
    assert res.title == f"{SOURCE_TITLE} (3)" and res.fork_kind == "message"
    with sd.db.read() as conn:
        row = conn.execute("SELECT parent_session, fork_boundary_seq, seed_length, fork_kind FROM sessions WHERE id = ?",
                           (res.session_id,)).fetchone()
    assert tuple(row) == (src, res.boundary_seq, res.seed_length, "message")
    again = ForkSession(sd, ForkOptions(src, "done-when", at_seq=second.at_seq))
    assert again.apply(again.preview()).fork.session_id == res.session_id


def _counts(sd: SessionDir, sid: str) -> dict[str, int]:
    with sd.db.read() as conn:
        out = {t: int(conn.execute(f"SELECT COUNT(*) FROM {t} WHERE {w}", (sid,) * int(k)).fetchone()[0])
               for t, w, k in delete_statements(conn)}
        out["request_stats"] = int(conn.execute("SELECT COUNT(*) FROM request_stats WHERE session_id = ?",
                                                (sid,)).fetchone()[0])
    return out


def test_demo_delete_table_by_table_and_refused_under_a_runtime(sd: SessionDir) -> None:
    with sd.db.read() as conn:
        sid = str(conn.execute("SELECT session_id FROM request_stats GROUP BY session_id ORDER BY COUNT(*) DESC "
                               "LIMIT 1").fetchone()[0])
    before = _counts(sd, sid)
    assert before["request_stats"] > 0 and before["entries"] > 0
    sim = SimProcess(sd.root, sid, "--runs", "1", "--steps", "10000", "--append-interval", "0.5", "--ttl", "30")
    try:
        sim.wait_for("run_created")
        sim.proc.send_signal(19)  # SIGSTOP: a runtime that holds its lease and writes nothing meanwhile
        held = _counts(sd, sid)
        with pytest.raises(RepairRefused):
            DeleteSessions(sd, sid).apply()
        assert _counts(sd, sid) == held
    finally:
        sim.kill()
    # the killed runtime's run is recovered the ordinary way; then the delete goes through
    from store.mothx.leases import clock_override
    from store.mothx.recovery import RecoverRun

    run_id = str(sim.first("run_created")["run"])
    with clock_override(lambda: 2**40):
        rec = RecoverRun(sd, run_id)
        rec.apply(rec.preview())
    repair = DeleteSessions(sd, sid)
    repair.apply(repair.preview())
    after = _counts(sd, sid)
    for table in [*CHILD_TABLES, "sessions", "session_fork_requests"]:
        assert after.get(table, 0) == 0, table
    assert after["request_stats"] == before["request_stats"]
