"""Runs, run events, turns, execution facts and the derived execution state (reference 8, 9, 12)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest

from store.errors import LeaseLost, SessionNotFound, StoreError
from store.mothx.db import OpenMode
from store.mothx.leases import LeaseOwner, LeaseSnapshot, acquire_lease, clock_override
from store.mothx.runs import (
    NON_TERMINAL_STATUSES,
    TERMINAL_STATUSES,
    ExecutionFacts,
    InvalidRunTransition,
    NewRun,
    NewRunEvent,
    RecoveryRecord,
    ResponseRun,
    Run,
    SessionModified,
    append_entry,
    append_run_event,
    create_run,
    derive_execution_state,
    get_run,
    inspect_execution,
    is_terminal,
    latest_run_event_seq,
    leaf_id,
    list_orphaned,
    list_run_events,
    list_runs,
    list_turns,
    open_turn,
    open_turns_of_run,
    pending_decisions_conn,
    read_execution_facts,
    transition_run,
)
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import RuntimeSimulator, create_session
from store.times import format_rfc3339

T0 = 1_900_000_000

# The reference's table 8.2, transcribed independently of the module under test.
REFERENCE_ALLOWED = {
    "created": {"created"},
    "queued": {"created", "queued"},
    "running": {"created", "queued", "running", "waiting_for_approval", "waiting_for_question"},
    "waiting_for_approval": {"running", "waiting_for_approval"},
    "waiting_for_question": {"running", "waiting_for_question"},
    "cancelling": {"created", "queued", "running", "waiting_for_approval", "waiting_for_question", "cancelling"},
    "terminalizing": {"created", "queued", "running", "waiting_for_approval", "waiting_for_question", "cancelling",
                      "terminalizing"},
}
NON_TERMINAL = ["created", "queued", "running", "waiting_for_approval", "waiting_for_question", "cancelling",
                "terminalizing"]
TERMINAL = ["completed", "incomplete", "expired", "failed", "cancelled", "canceled", "timed_out"]


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


@pytest.fixture
def sid(sd: SessionDir) -> str:
    return create_session(sd)


def test_status_classes_match_the_reference() -> None:
    assert list(NON_TERMINAL_STATUSES) == NON_TERMINAL
    assert sorted(TERMINAL_STATUSES) == sorted(TERMINAL)
    assert all(is_terminal(s) for s in TERMINAL) and not any(is_terminal(s) for s in NON_TERMINAL)


def test_every_transition_follows_table_8_2(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        create_run(conn, NewRun(id="r", session_id=sid), None)
    checked = 0
    for current in NON_TERMINAL + TERMINAL:
        for target in NON_TERMINAL + TERMINAL:
            with sd.db.write() as conn:
                conn.execute("UPDATE session_runs SET status = ?, finished_at = NULL WHERE id = 'r'", (current,))
            allowed = REFERENCE_ALLOWED.get(target, set(NON_TERMINAL) | {target})
            if current in allowed:
                with sd.db.write() as conn:
                    changed = transition_run(conn, "r", target, None)
                assert changed is not (current == target and target in TERMINAL), (current, target)
                run = get_run(sd, "r")
                assert run is not None and run.status == target
                assert (run.finished_at is not None) == (target in TERMINAL and current != target)
            else:
                with pytest.raises(InvalidRunTransition) as info, sd.db.write() as conn:
                    transition_run(conn, "r", target, None)
                assert str(info.value) == f'invalid session run transition "{current}" -> "{target}"'
                assert get_run(sd, "r").status == current  # type: ignore[union-attr]
            checked += 1
    assert checked == 14 * 14


def test_terminal_transition_to_itself_is_an_idempotent_no_op(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        create_run(conn, NewRun(id="r", session_id=sid), None)
        transition_run(conn, "r", "failed", None, error="first", timestamp="2026-01-01T00:00:00Z")
    with sd.db.write() as conn:
        assert transition_run(conn, "r", "failed", None, error="second") is False
    run = get_run(sd, "r")
    assert run is not None and (run.finished_at, run.error) == ("2026-01-01T00:00:00Z", "first")


def test_transition_is_fenced(sd: SessionDir, sid: str) -> None:
    with clock_override(T0):
        owner = LeaseOwner()
        lease = acquire_lease(sd, sid, "admission", owner=owner)
        with sd.db.write() as conn:
            create_run(conn, NewRun(id="r", session_id=sid), lease)
    with clock_override(T0 + 30):
        acquire_lease(sd, sid, "recovery", expected_run_id="r", owner=LeaseOwner())
        with pytest.raises(LeaseLost), sd.db.write() as conn:
            transition_run(conn, "r", "running", lease)
    assert get_run(sd, "r").status == "created"  # type: ignore[union-attr]


def test_one_active_run_per_session(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        create_run(conn, NewRun(id="a", session_id=sid), None)
    with pytest.raises(StoreError), sd.db.write() as conn:
        create_run(conn, NewRun(id="b", session_id=sid), None)
    with sd.db.write() as conn:
        transition_run(conn, "a", "completed", None)
        create_run(conn, NewRun(id="b", session_id=sid), None)


def test_rfc3339_format() -> None:
    from datetime import datetime

    assert format_rfc3339(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
    assert format_rfc3339(datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)) == "2026-01-02T03:04:05.12Z"


# --- run events -----------------------------------------------------------------------------------------------------


def test_run_events_keyset_pages_and_normalise(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        create_run(conn, NewRun(id="r", session_id=sid), None)
        for i in range(7):
            append_run_event(conn, NewRunEvent(id=f"e{i}", session_id=sid, run_id="r", event_type="progress",
                                               data="{bad json" if i == 3 else json.dumps({"i": i})), None)
    first = list_run_events(sd, run_id="r", limit=3)
    second = list_run_events(sd, run_id="r", after_seq=first[-1].seq, limit=3)
    rest = list_run_events(sd, run_id="r", after_seq=second[-1].seq)
    assert [e.id for e in first + second + rest] == [f"e{i}" for i in range(7)]
    assert second[0].data == "{}" and second[0].data_obj() == {}
    assert latest_run_event_seq(sd, "r") == rest[-1].seq
    assert list_run_events(sd, session_id="nope") == []


def test_deterministic_event_ids_are_idempotent(sd: SessionDir, sid: str) -> None:
    ev = NewRunEvent(id="recovery_r_failed", session_id=sid, run_id="r", event_type="recovered")
    with sd.db.write() as conn:
        assert append_run_event(conn, ev, None) is True
        assert append_run_event(conn, ev, None) is False
    assert len(list_run_events(sd, run_id="r")) == 1


def test_pending_decisions_follow_the_last_event(sd: SessionDir, sid: str) -> None:
    def ev(i: int, kind: str, status: str, did: str) -> NewRunEvent:
        return NewRunEvent(id=f"d{i}", session_id=sid, run_id="r", event_type=kind, status=status,
                           data=json.dumps({"decisionId": did}))

    with sd.db.write() as conn:
        for e in (ev(1, "approval_resolved", "pending", "a1"), ev(2, "approval_resolved", "approved", "a1"),
                  ev(3, "question_resolved", "pending", "q1"), ev(4, "approval_resolved", "pending", "a2"),
                  ev(5, "approval_resolved", "approved", "a3"), ev(6, "approval_resolved", "pending", "a3")):
            append_run_event(conn, e, None)
        pending = pending_decisions_conn(conn, "r")
    assert [(p.decision_id, p.event_type, p.last_event_id) for p in pending] == [
        ("q1", "question_resolved", "d3"), ("a2", "approval_resolved", "d4"), ("a3", "approval_resolved", "d6")]


# --- entries and turns ----------------------------------------------------------------------------------------------


def test_append_sets_parent_to_leaf_and_checks_it(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        assert leaf_id(conn, sid) is None  # the header does not count
        a = append_entry(conn, sid, "message", {"message": {"role": "user", "content": "hi"}})
        b = append_entry(conn, sid, "message", {"message": {"role": "assistant", "content": "yo"}},
                         expected_parent=a.id)
    assert (a.parent_id, b.parent_id) == (None, a.id)
    with pytest.raises(SessionModified), sd.db.write() as conn:
        append_entry(conn, sid, "message", {}, expected_parent=a.id)
    with sd.db.read() as conn:
        data = json.loads(conn.execute("SELECT data FROM entries WHERE id = ?", (b.id,)).fetchone()[0])
    assert data["parentId"] == a.id and data["type"] == "message" and data["id"] == b.id


def test_turns_open_and_attribution(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        create_run(conn, NewRun(id="r1", session_id=sid, intent_id="i1"), None)
        open_turn(conn, sid, "t1", run_id="r1")
    with sd.db.write() as conn:
        conn.execute("INSERT INTO conversation_turns (id, session_id, intent_id, status, start_seq, started_at) "
                     "VALUES ('t2', ?, 'i1', 'open', 99, 'x'), ('t3', ?, 'other', 'open', 100, 'x')", (sid, sid))
        run = Run("r1", sid, "i1", "", 1, "", "", "", "", "running", "", "", None, "")
        owned = [t.id for t in open_turns_of_run(conn, run)]
    assert owned == ["t1", "t2"]  # t1 names the run; t2 shares its intent; t3 belongs elsewhere
    turns = list_turns(sd, sid)
    assert [(t.id, t.run_id, t.status) for t in turns] == [("t1", "r1", "open"), ("t2", "", "open"),
                                                          ("t3", "", "open")]


# --- derived execution state ----------------------------------------------------------------------------------------


def _run(rid: str = "r1", status: str = "running", source: str = "") -> Run:
    return Run(rid, "s", "", "", 1, "", source, "", "", status, "2026", "2026", None, "")


def _lease(purpose: str = "execution", *, run_id: str = "r1", valid: bool = True, owner: str = "pid-1-x",
           state: str = "active") -> LeaseSnapshot:
    return LeaseSnapshot("s", owner, 1, "process", "tok", 3, run_id, purpose, state, 0, 0, 100 if valid else 50, 0, 60)


def _facts(runs: tuple[Run, ...] = (), lease: LeaseSnapshot | None = None, recovery: RecoveryRecord | None = None,
           response: ResponseRun | None = None, exists: bool = True) -> ExecutionFacts:
    return ExecutionFacts("s", 60, exists, runs, lease, recovery, response)


def _rec(state: str) -> RecoveryRecord:
    return RecoveryRecord("r1", "s", state, "periodic", "owner_lost", 1, 2, "boom", 70, 0, 0, None)


REMOTE = ResponseRun(1, "s", "prov_run_1", "r1", "resp_1", "openai", "openai-responses", "in_progress")


@pytest.mark.parametrize(
    ("facts", "state", "action", "scope", "linkage"),
    [
        (_facts(), "idle", "none", "none", "none"),
        (_facts(lease=_lease("mutation", run_id="")), "reserved", "none", "external", "none"),
        (_facts(lease=_lease("admission", run_id="", valid=False)), "idle", "none", "none", "none"),
        (_facts((_run("a"), _run("b"))), "inconsistent", "none", "unknown", "none"),
        (_facts((_run(),)), "orphaned", "recover_orphan", "none", "none"),
        (_facts((_run(),), _lease(valid=False)), "orphaned", "recover_orphan", "none", "none"),
        (_facts((_run(),), _lease(state="released")), "orphaned", "recover_orphan", "none", "none"),
        (_facts((_run(),), recovery=_rec("failed")), "recovery_failed", "retry_recovery", "none", "none"),
        (_facts((_run(source="responses_background"),), response=REMOTE), "detached_remote", "reattach_remote",
         "remote", "none"),
        (_facts((_run(source="responses_background"),), response=ResponseRun(
            1, "s", "prov_run_1", "r1", "resp_1", "openai", "openai-responses", "completed")), "detached_remote",
         "finalize_remote", "remote", "none"),
        (_facts((_run(source="responses_background"),), response=ResponseRun(
            1, "s", "prov_run_1", "r1", "", "openai", "openai-responses", "x")), "orphaned", "recover_orphan", "none", "none"),
        (_facts((_run(),), _lease("recovery")), "reserved", "none", "external", "bound"),
        (_facts((_run(),), _lease("mutation", run_id="")), "inconsistent", "none", "unknown", "legacy_unbound"),
        (_facts((_run(),), _lease("admission", run_id="")), "inconsistent", "none", "unknown", "legacy_unbound"),
        (_facts((_run(),), _lease("execution", run_id="r2")), "inconsistent", "none", "unknown", "mismatched"),
        (_facts((_run(),), _lease("execution")), "external", "none", "external", "bound"),
        (_facts((_run(),), _lease("run", run_id="")), "external", "none", "external", "legacy_unbound"),
        (_facts(exists=False), "unknown", "none", "unknown", "none"),
    ],
)
def test_derived_state_table(facts: ExecutionFacts, state: str, action: str, scope: str, linkage: str) -> None:
    got = derive_execution_state(facts)
    assert (got.state, got.recovery_action, got.owner_scope, got.linkage_state) == (state, action, scope, linkage)
    assert got.can_submit == (state == "idle")
    assert got.reason


def test_local_state_when_the_lease_is_this_process() -> None:
    facts = _facts((_run(),), _lease("execution", owner="pid-9-me"))
    got = derive_execution_state(facts, local_instance_id="pid-9-me")
    assert (got.state, got.owner_scope, got.phase, got.can_cancel_local) == ("local", "local", "executing", True)
    releasing = derive_execution_state(_facts((_run(status="cancelling"),), _lease("execution", owner="pid-9-me")),
                                       local_instance_id="pid-9-me")
    assert releasing.phase == "releasing"


def test_local_means_the_lease_is_registered_in_this_process(sd: SessionDir, sid: str) -> None:
    owner = LeaseOwner()
    with clock_override(T0):
        RuntimeSimulator(sd, sid, owner=owner).admit()
        facts = read_execution_facts(sd, sid)
        assert derive_execution_state(facts, owner).state == "local"
        assert derive_execution_state(facts, LeaseOwner()).state == "external"
        assert facts.lease is not None
        forgotten = LeaseOwner(instance_id=facts.lease.owner_instance_id)  # same instance id, lease not registered
        assert derive_execution_state(facts, forgotten).state == "external"
        assert derive_execution_state(facts, owner.instance_id).state == "local"  # by instance id only


def test_facts_and_inspection_from_the_database(sd: SessionDir, sid: str) -> None:
    owner = LeaseOwner()
    with clock_override(T0):
        sim = RuntimeSimulator(sd, sid, owner=owner)
        sim.admit()
        facts = read_execution_facts(sd, sid)
        assert [r.id for r in facts.active_runs] == [sim.run_id] and facts.lease_valid and facts.now == T0
        assert inspect_execution(sd, sid, local_instance_id=owner.instance_id).state == "local"
        assert inspect_execution(sd, sid).state == "external"
    with clock_override(T0 + 15):
        assert inspect_execution(sd, sid).state == "orphaned"
    with pytest.raises(SessionNotFound):
        inspect_execution(sd, "ffffffffffffffff")


# --- listing ----------------------------------------------------------------------------------------------------------


def test_list_runs_pages_filters_and_derives(sd: SessionDir) -> None:
    sessions = [create_session(sd) for _ in range(3)]
    owners = [LeaseOwner() for _ in sessions]
    with clock_override(T0):
        for i, (s, o) in enumerate(zip(sessions, owners, strict=True)):
            for _ in range(2):
                sim = RuntimeSimulator(sd, s, owner=o)
                sim.admit()
                sim.finish()
            if i < 2:
                RuntimeSimulator(sd, s, owner=o).admit()  # leave one active run in sessions 0 and 1
        owners[1].crash()
    everything = list_runs(sd, limit=100, now=T0 + 1)
    assert len(everything) == 8
    pages, after = [], None
    while True:
        page = list_runs(sd, limit=3, after=after, now=T0 + 1)
        if not page:
            break
        pages.extend(page)
        after = page[-1].cursor
    assert [p.run.id for p in pages] == [p.run.id for p in everything]
    assert [(p.run.started_at, p.run.id) for p in everything] == sorted(
        ((p.run.started_at, p.run.id) for p in everything), reverse=True)
    active = list_runs(sd, active_only=True, now=T0 + 1)
    assert sorted(a.run.session_id for a in active) == sorted(sessions[:2])
    assert {a.state for a in active} == {"external"}
    assert all(a.epoch == 3 and a.holder and a.expires_at == T0 + 15 for a in active)
    only = list_runs(sd, session_id=sessions[2], now=T0 + 1)
    assert len(only) == 2 and all(o.execution is None and o.state == "completed" for o in only)
    orphans = list_orphaned(sd, now=T0 + 20)
    assert sorted(o.run.session_id for o in orphans) == sorted(sessions[:2])
    assert all(o.execution is not None and o.execution.recovery_action == "recover_orphan" for o in orphans)


def test_older_layout_reads_with_defaults(tmp_path: Path) -> None:
    root = tmp_path / "old"
    root.mkdir()
    conn = sqlite3.connect(root / "sessions.db")
    conn.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, timestamp TEXT, parent_session TEXT, version INTEGER);"
        "CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, id TEXT UNIQUE, type TEXT NOT "
        "NULL, parent_id TEXT, timestamp TEXT NOT NULL, data TEXT NOT NULL);"
        "CREATE TABLE session_runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, status TEXT NOT NULL, "
        "started_at TEXT NOT NULL, updated_at TEXT NOT NULL, finished_at TEXT, error TEXT NOT NULL DEFAULT '');"
        "INSERT INTO sessions (id) VALUES ('s1');"
        "INSERT INTO session_runs (id, session_id, status, started_at, updated_at) VALUES ('r1', 's1', 'running', "
        "'2025', '2025');"
    )
    conn.commit()
    conn.close()
    sd = open_session_dir(root, OpenMode.READ_ONLY)
    try:
        rows = list_runs(sd)
        assert [(r.run.id, r.run.attempt, r.run.intent_id, r.lease, r.state) for r in rows] == [
            ("r1", 1, "", None, "orphaned")]
        assert read_execution_facts(sd, "s1").lease is None
        assert list_turns(sd, "s1") == [] and list_run_events(sd) == []
    finally:
        sd.close()
