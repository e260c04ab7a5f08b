"""Remote-retainable runs (reference 11.2 step 6, 12.4), built by raw SQL as the runtime writes them.

The runtime writes the session run id into ``response_runs.local_turn_id`` (``local_run_id`` holds the
provider-side run id). Such a ``responses_background`` run is kept alive as ``detached_remote``; the source
alone, or a row that names the run only in ``local_run_id``, keeps nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.mothx import repairs
from store.mothx.leases import clock_override
from store.mothx.recovery import RecoverRun, RecoveryFailed
from store.mothx.repairs import suggest_repairs
from store.mothx.runs import get_recovery, get_run, inspect_execution, list_orphaned, list_run_events, list_runs
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import create_session

T0 = 1_900_000_000
RUN = "a1b2c3d4e5f60718"
TURN = "0f1e2d3c4b5a6978"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    with clock_override(T0):
        yield d
    d.close()


def _background_run(sd: SessionDir, *, link: str | None, response_id: str = "resp_1", provider: str = "openai",
                    api: str = "openai-responses", source: str = "responses_background") -> str:
    """A session with one running run whose owner's lease expired 60 s ago; ``link`` says how ``response_runs``
    names it: ``"turn"`` (local_turn_id = the run id, as the runtime writes it), ``"run"`` (only local_run_id),
    ``"other-session"`` (local_turn_id matches but the row is of another session), or None (no row)."""
    sid = create_session(sd)
    with sd.db.write() as conn:
        conn.execute(
            "INSERT INTO session_runs (id, session_id, source, model, mode, status, started_at, updated_at) "
            "VALUES (?, ?, ?, 'gpt', 'default', 'running', '2030-03-17T17:46:40Z', '2030-03-17T17:46:40Z')",
            (RUN, sid, source),
        )
        conn.execute(
            "INSERT INTO session_runtime_leases (session_id, owner_instance_id, owner_pid, owner_kind, "
            "lease_token_hash, epoch, run_id, purpose, state, acquired_at, heartbeat_at, expires_at, updated_at) "
            "VALUES (?, 'pid-4242-0123456789abcdef0123456789abcdef', 4242, 'process', ?, 3, ?, 'execution', "
            "'active', ?, ?, ?, ?)",
            (sid, "ab" * 32, RUN, T0 - 75, T0 - 75, T0 - 60, T0 - 75),
        )
        conn.execute(
            "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, 'turn_start', NULL, "
            "'2030-03-17T17:46:40Z', ?)",
            (sid, "e" * 16, json.dumps({"type": "turn_start", "id": "e" * 16, "parentId": None,
                                        "timestamp": "2030-03-17T17:46:40Z", "turnId": TURN, "runId": RUN})),
        )
        seq = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
        conn.execute(
            "INSERT INTO conversation_turns (id, session_id, status, start_seq, started_at) VALUES (?, ?, 'open', ?, "
            "'2030-03-17T17:46:40Z')", (TURN, sid, seq))
        if link is not None:
            session = "ffffffffffffffff" if link == "other-session" else sid
            local_run_id, local_turn_id = (RUN, "") if link == "run" else ("run_provider_77", RUN)
            conn.execute(
                "INSERT INTO response_runs (session_id, local_run_id, local_turn_id, response_id, provider, api, "
                "state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'in_progress', '2030-03-17 17:46:40', "
                "'2030-03-17 17:46:40')",
                (session, local_run_id, local_turn_id, response_id, provider, api),
            )
    return sid


def test_a_run_linked_through_local_turn_id_is_detached_remote(sd: SessionDir) -> None:
    sid = _background_run(sd, link="turn")
    state = inspect_execution(sd, sid)
    assert (state.state, state.owner_scope, state.recovery_action, state.can_cancel_remote) == (
        "detached_remote", "remote", "reattach_remote", True)
    (listing,) = list_runs(sd)
    assert listing.state == "detached_remote" and listing.problems == ()
    assert list_orphaned(sd) == [] and suggest_repairs(sd) == []


def test_recovering_a_linked_remote_run_keeps_it_running(sd: SessionDir) -> None:
    sid = _background_run(sd, link="turn")
    repair = RecoverRun(sd, RUN)
    preview = repair.preview()
    assert preview.allowed, preview.refusal
    assert [c.table for c in preview.changes] == ["session_runtime_leases", "session_run_recoveries",
                                                  "session_run_recoveries", "session_runtime_leases"]
    assert any("keep_remote" in n for n in preview.notes)
    result = repair.apply(preview)
    assert "keep_remote" in result.message
    run = get_run(sd, RUN)
    assert run is not None and (run.status, run.finished_at, run.error) == ("running", None, "")
    rec = get_recovery(sd, RUN)
    assert rec is not None and (rec.state, rec.attempt, rec.previous_lease_epoch, rec.completed_at) == (
        "detached_remote", 1, 3, None)
    assert list_run_events(sd, run_id=RUN) == []  # no recovered event, no cancelled decisions
    with sd.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM entries WHERE type = 'turn_end'").fetchone()[0] == 0
        assert conn.execute("SELECT status FROM conversation_turns WHERE id = ?", (TURN,)).fetchone()[0] == "open"
        lease = conn.execute("SELECT state, epoch, purpose, run_id FROM session_runtime_leases").fetchone()
    assert lease == ("released", 4, "recovery", RUN)  # the recovery lease, released (a tombstone)
    assert inspect_execution(sd, sid).state == "detached_remote"


@pytest.mark.parametrize(
    ("link", "fields"),
    [
        (None, {}),
        ("run", {}),  # names the run in local_run_id only: not linked
        ("other-session", {}),
        ("turn", {"response_id": ""}),
        ("turn", {"provider": ""}),
        ("turn", {"api": "openai-chat"}),
        ("turn", {"source": "interactive"}),
    ],
)
def test_without_a_complete_linked_row_the_run_is_orphaned_and_failed(sd: SessionDir, link: str | None,
                                                                       fields: dict[str, str]) -> None:
    sid = _background_run(sd, link=link, **fields)
    state = inspect_execution(sd, sid)
    assert (state.state, state.recovery_action) == ("orphaned", "recover_orphan")
    assert [o.run.id for o in list_orphaned(sd)] == [RUN]
    repair = RecoverRun(sd, RUN)
    assert not any("keep_remote" in n for n in repair.preview().notes)
    repair.apply()
    run = get_run(sd, RUN)
    assert run is not None and (run.status, run.error) == ("failed", "execution owner lease expired while run was active")
    rec = get_recovery(sd, RUN)
    assert rec is not None and rec.state == "completed" and rec.completed_at is not None
    assert [e.id for e in list_run_events(sd, run_id=RUN)] == [f"recovery_{RUN}_failed"]
    with sd.db.read() as conn:
        assert conn.execute("SELECT status FROM conversation_turns WHERE id = ?", (TURN,)).fetchone()[0] == "failed"
    assert inspect_execution(sd, sid).state == "idle"


def test_a_complete_row_among_several_linked_rows_keeps_the_run(sd: SessionDir) -> None:
    sid = _background_run(sd, link="turn")
    with sd.db.write() as conn:  # a newer, incomplete row linked to the same run does not hide the complete one
        conn.execute(
            "INSERT INTO response_runs (session_id, local_run_id, local_turn_id, response_id, provider, api, state, "
            "created_at, updated_at) VALUES (?, 'run_provider_78', ?, NULL, 'openai', 'openai-responses', 'queued', "
            "'x', 'x')", (sid, RUN))
    assert inspect_execution(sd, sid).state == "detached_remote"


def test_a_failed_keep_remote_is_persisted_as_a_failed_recovery(sd: SessionDir) -> None:
    _background_run(sd, link="turn")

    def interfere(name: str) -> None:
        if name == "recover.keep_remote":  # someone else finishes the recovery row first
            with sd.db.write() as conn:
                conn.execute("UPDATE session_run_recoveries SET state = 'completed' WHERE run_id = ?", (RUN,))

    repairs.set_step_hook(interfere)
    try:
        with pytest.raises(RecoveryFailed):
            RecoverRun(sd, RUN).apply()
    finally:
        repairs.set_step_hook(None)
    rec = get_recovery(sd, RUN)
    assert rec is not None and rec.state == "failed" and rec.next_retry_at == T0 + 1 and "no longer" in rec.last_error
    run = get_run(sd, RUN)
    assert run is not None and run.status == "running"
