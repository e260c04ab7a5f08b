"""Fork (reference 14): boundaries, copying and remapping, idempotency, refusals, fork of a fork, the family."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import RepairRefused, SessionNotFound
from store.mothx.entries import load_rows, replay, replay_state
from store.mothx.fork import ForkSession, fork_session
from store.mothx.fork_boundaries import (
    ForkIdempotencyConflict,
    ForkIdempotencyRequired,
    ForkIdempotencyTooLong,
    ForkInvalidBoundary,
    ForkNoCompletedTurn,
    ForkSessionActive,
    ForkUnsupportedEntry,
)
from store.mothx.fork_copy import ForkOptions, request_key_hash
from store.mothx.fork_family import candidates, explain_entry, family
from store.mothx.lease_guard import acquire
from store.mothx.lease_model import LeaseOwner
from store.mothx.repair_kit import Repair
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import create_session
from tests.store.fork_support import add_entry, add_turn, build, entry_ids, message


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def _replay_view(msgs: list) -> list[tuple[object, ...]]:
    return [(m.kind, m.message.role, m.message.text, json.dumps(m.message.raw, sort_keys=True) if m.kind == "message"
             else "", m.overridden) for m in msgs]


def _source_prefix(sd: SessionDir, sid: str, boundary: int) -> list[tuple[object, ...]]:
    return _replay_view(replay_state([r for r in load_rows(sd, sid) if r.seq <= boundary]))


def _count(sd: SessionDir, sql: str, *args: object) -> int:
    with sd.db.read() as conn:
        return int(conn.execute(sql, args).fetchone()[0])


# --- forks ------------------------------------------------------------------------------------------------------


def test_session_fork_copies_up_to_the_last_turn(sd: SessionDir) -> None:
    b = build(sd, 3, title="Plan")
    repair = ForkSession(sd, ForkOptions(b.session_id, "req-1"))
    assert isinstance(repair, Repair)
    pv = repair.preview()
    assert pv.allowed and pv.fork_kind == "session"
    res = repair.apply(pv).fork
    src_turns = {t.id: t for t in __import__("store.mothx.turns", fromlist=["list_turns"]).list_turns(sd, b.session_id)}
    last_end = max(t.end_seq or 0 for t in src_turns.values())
    assert (res.fork_kind, res.boundary_seq, res.parent_session_id) == ("session", last_end, b.session_id)
    assert res.boundary_seq == pv.boundary_seq and res.seed_length == pv.seed_length
    assert res.seed_length == _count(sd, "SELECT COUNT(*) FROM entries WHERE session_id = ? AND seq <= ?",
                                     b.session_id, last_end)
    assert res.title == "Plan (1)"
    with sd.db.read() as conn:
        row = conn.execute("SELECT parent_session, fork_boundary_seq, seed_length, fork_kind, channel_type, channel_id "
                           "FROM sessions WHERE id = ?", (res.session_id,)).fetchone()
        assert tuple(row) == (b.session_id, last_end, res.seed_length, "session", "local", "")
        header = json.loads(conn.execute("SELECT data FROM entries WHERE session_id = ? ORDER BY seq LIMIT 1",
                                         (res.session_id,)).fetchone()[0])
        turns = conn.execute("SELECT id, status, start_seq, end_seq FROM conversation_turns WHERE session_id = ? "
                             "ORDER BY start_seq", (res.session_id,)).fetchall()
        reqs = conn.execute("SELECT request_key_hash, request_fingerprint, child_session_id FROM session_fork_requests"
                            ).fetchall()
    assert header["id"] == res.session_id and header["parentSession"] == b.session_id
    assert header["forkBoundarySeq"] == last_end and header["forkKind"] == "session"
    assert header["seedLength"] == res.seed_length and header["channelType"] == "local"
    assert _replay_view(replay(sd, res.session_id)) == _source_prefix(sd, b.session_id, last_end)
    assert not entry_ids(sd, b.session_id) & entry_ids(sd, res.session_id)
    # closed turns copied with new ids; their seqs name the child's turn_start / turn_end entries
    assert len(turns) == 3 and not {t[0] for t in turns} & set(src_turns)
    rows = {r.seq: r for r in load_rows(sd, res.session_id)}
    for tid, status, start, end in turns:
        assert status == "completed"
        assert rows[start].type == "turn_start" and (rows[start].parsed or {})["turnId"] == tid
        assert rows[end].type == "turn_end" and (rows[end].parsed or {})["turnId"] == tid
    # parentId chain remapped: every parent is an entry of the child
    child_ids = {r.entry_id for r in rows.values()}
    assert all(r.parent_id is None or r.parent_id in child_ids for r in rows.values())
    last = rows[max(rows)]
    assert last.type == "session_info" and (last.parsed or {})["name"] == "Plan (1)" and (last.parsed or {})["source"] == "auto"
    assert reqs == [(request_key_hash("req-1"), f"{b.session_id}|0|auto", res.session_id)]


def test_message_fork_absorbs_following_metadata_and_titles_count_up(sd: SessionDir) -> None:
    b = build(sd, 3, title="Plan")
    first = fork_session(sd, ForkOptions(b.session_id, "a"))
    res = fork_session(sd, ForkOptions(b.session_id, "b", at_seq=b.final_seqs[0]))
    rows = load_rows(sd, b.session_id)
    turn_end = next(r.seq for r in rows if r.type == "turn_end")
    meta = next(r.seq for r in rows if r.type == "model_change")
    assert meta == turn_end + 1
    assert (res.fork_kind, res.boundary_seq) == ("message", meta)
    assert first.title == "Plan (1)" and res.title == "Plan (2)"
    assert _replay_view(replay(sd, res.session_id)) == _source_prefix(sd, b.session_id, meta)
    assert [m.message.text for m in replay(sd, res.session_id)] == ["question 1", "answer 1"]


def test_references_are_remapped(sd: SessionDir) -> None:
    sid = create_session(sd)
    with sd.db.write() as conn:
        _, u1 = add_turn(conn, sid, "one", "first answer")
        ids = [r[0] for r in conn.execute("SELECT id FROM entries WHERE session_id = ? AND type = 'message' ORDER BY seq",
                                          (sid,))]
        add_entry(conn, sid, "content_override", {"targetEntryId": ids[0], "message": message("user", "redacted")})
        add_entry(conn, sid, "label", {"targetId": ids[1], "label": "keep"})
        add_entry(conn, sid, "branch_summary", {"summary": "s", "fromId": ids[0]})
        tid, _ = add_turn(conn, sid, "two", "second answer")
        add_entry(conn, sid, "compaction", {"summary": "so far", "firstKeptEntryId": ids[1], "summaryVersion": 1,
                                            "previousCompactionId": "", "lastSummarizedEntryId": ids[0]})
        add_turn(conn, sid, "three", "third answer")
    res = fork_session(sd, ForkOptions(sid, "r"))
    rows = load_rows(sd, res.session_id)
    child_ids = {r.entry_id for r in rows}
    by_type = {r.type: r.parsed or {} for r in rows}
    assert by_type["content_override"]["targetEntryId"] in child_ids
    assert by_type["label"]["targetId"] in child_ids
    assert by_type["branch_summary"]["fromId"] in child_ids
    comp = by_type["compaction"]
    assert comp["firstKeptEntryId"] in child_ids and comp["lastSummarizedEntryId"] in child_ids
    assert comp["previousCompactionId"] == ""
    assert _replay_view(replay(sd, res.session_id)) == _source_prefix(sd, sid, res.boundary_seq)
    assert replay(sd, res.session_id)[0].kind == "compaction_summary"


def test_capabilities_and_project_link_are_copied(sd: SessionDir) -> None:
    b = build(sd, 1)
    with sd.db.write() as conn:
        conn.execute("INSERT INTO session_capabilities (session_id, mode, web_search, updated_at) "
                     "VALUES (?, 'plan', 1, 'x')", (b.session_id,))
        conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES ('p1', 'Proj', 'x', 'x')")
        conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) VALUES (?, 'p1', 1, 'x')",
                     (b.session_id,))
    res = fork_session(sd, ForkOptions(b.session_id, "r"))
    with sd.db.read() as conn:
        cap = conn.execute("SELECT mode, web_search FROM session_capabilities WHERE session_id = ?",
                           (res.session_id,)).fetchone()
        meta = conn.execute("SELECT project_id, pinned FROM session_metadata WHERE session_id = ?",
                            (res.session_id,)).fetchone()
    assert tuple(cap) == ("plan", 1) and tuple(meta) == ("p1", 0)


def test_fork_of_a_fork_and_the_family(sd: SessionDir) -> None:
    b = build(sd, 3, title="Root")
    child = fork_session(sd, ForkOptions(b.session_id, "c1", at_seq=b.final_seqs[1]))
    other = fork_session(sd, ForkOptions(b.session_id, "c2"))
    cand = [c for c in candidates(sd, child.session_id) if c.valid]
    assert len(cand) == 2
    grand = fork_session(sd, ForkOptions(child.session_id, "g1", at_seq=cand[0].at_seq))
    assert grand.parent_session_id == child.session_id and grand.title == "Root (1) (1)"
    assert [m.message.text for m in replay(sd, grand.session_id)] == ["question 1", "answer 1"]
    assert not entry_ids(sd, grand.session_id) & (entry_ids(sd, child.session_id) | entry_ids(sd, b.session_id))
    fam = family(sd, grand.session_id)
    assert [m.session_id for m in fam.ancestors] == [b.session_id, child.session_id]
    assert {m.session_id for m in fam.members} == {b.session_id, child.session_id, other.session_id, grand.session_id}
    me = next(m for m in fam.members if m.selected)
    assert (me.depth, me.fork_kind, me.boundary_seq, me.seed_length) == (2, "message", grand.boundary_seq,
                                                                         grand.seed_length)
    root_fam = family(sd, b.session_id)
    assert [m.depth for m in root_fam.members][0] == 0
    assert {m.session_id for m in root_fam.descendants} == {child.session_id, other.session_id, grand.session_id}


# --- idempotency ------------------------------------------------------------------------------------------------


def test_repeat_returns_the_same_child_and_a_different_fingerprint_is_refused(sd: SessionDir) -> None:
    b = build(sd, 2)
    first = fork_session(sd, ForkOptions(b.session_id, "same"))
    n = _count(sd, "SELECT COUNT(*) FROM sessions")
    again = ForkSession(sd, ForkOptions(b.session_id, "same"))
    pv = again.preview()
    assert pv.existing_child == first.session_id and pv.allowed and not pv.changes
    second = again.apply(pv).fork
    assert second.session_id == first.session_id and second.reused
    assert (second.boundary_seq, second.seed_length, second.fork_kind) == (first.boundary_seq, first.seed_length,
                                                                           first.fork_kind)
    assert _count(sd, "SELECT COUNT(*) FROM sessions") == n
    conflict = ForkSession(sd, ForkOptions(b.session_id, "same", at_seq=b.final_seqs[0]))
    assert "conflicts" in conflict.preview().refusal
    with pytest.raises(ForkIdempotencyConflict):
        conflict.apply()
    assert _count(sd, "SELECT COUNT(*) FROM sessions") == n
    # the same request id on another source is another request
    c = build(sd, 1)
    assert fork_session(sd, ForkOptions(c.session_id, "same")).parent_session_id == c.session_id


@pytest.mark.parametrize(("request_id", "error"), [("", ForkIdempotencyRequired), ("x" * 257, ForkIdempotencyTooLong)])
def test_request_id_rules(sd: SessionDir, request_id: str, error: type[Exception]) -> None:
    b = build(sd, 1)
    with pytest.raises(error):
        fork_session(sd, ForkOptions(b.session_id, request_id))
    assert fork_session(sd, ForkOptions(b.session_id, "y" * 256)).seed_length > 0


# --- refusals ---------------------------------------------------------------------------------------------------


def _unchanged(sd: SessionDir) -> tuple[int, int, int]:
    return (_count(sd, "SELECT COUNT(*) FROM sessions"), _count(sd, "SELECT COUNT(*) FROM entries"),
            _count(sd, "SELECT COUNT(*) FROM session_fork_requests"))


def _refused(sd: SessionDir, options: ForkOptions, error: type[Exception], words: str) -> None:
    before = _unchanged(sd)
    repair = ForkSession(sd, options)
    pv = repair.preview()
    assert words in pv.refusal and not pv.changes
    with pytest.raises(error):
        repair.apply(pv)
    assert _unchanged(sd) == before


def test_refused_while_a_run_is_active(sd: SessionDir) -> None:
    b = build(sd, 2)
    with sd.db.write() as conn:
        conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at) "
                     "VALUES ('run1', ?, 'running', 'x', 'x')", (b.session_id,))
    _refused(sd, ForkOptions(b.session_id, "r"), ForkSessionActive, "run run1")


def test_refused_while_a_turn_is_open(sd: SessionDir) -> None:
    b = build(sd, 2)
    with sd.db.write() as conn:
        add_turn(conn, b.session_id, "q", "a", close=False)
    _refused(sd, ForkOptions(b.session_id, "r"), ForkSessionActive, "is open")


def test_refused_while_a_decision_is_pending(sd: SessionDir) -> None:
    b = build(sd, 2)
    with sd.db.write() as conn:
        conn.execute("INSERT INTO session_run_events (id, session_id, run_id, event_type, status, timestamp, data) "
                     "VALUES ('e1', ?, 'run1', 'approval_resolved', 'pending', 'x', '{\"decisionId\":\"d1\"}')",
                     (b.session_id,))
    _refused(sd, ForkOptions(b.session_id, "r"), ForkSessionActive, "decision d1 is pending")


def test_refused_without_a_completed_turn(sd: SessionDir) -> None:
    sid = create_session(sd)
    with sd.db.write() as conn:
        add_entry(conn, sid, "message", {"message": message("user", "hi")})
    _refused(sd, ForkOptions(sid, "r"), ForkNoCompletedTurn, "no finished runs")


def test_invalid_boundaries(sd: SessionDir) -> None:
    sid = create_session(sd)
    with sd.db.write() as conn:
        add_turn(conn, sid, "q1", "a1", tool=True)
        tool_turn_rows = conn.execute("SELECT seq, data FROM entries WHERE session_id = ? AND type = 'message' "
                                      "ORDER BY seq", (sid,)).fetchall()
        _, blank = add_turn(conn, sid, "q2", " ")
        conn.execute("UPDATE entries SET data = json_set(data, '$.message.content', json('[]')) WHERE seq = ?", (blank,))
        add_entry(conn, sid, "message", {"message": message("assistant", "outside any turn")})
        outside = conn.execute("SELECT MAX(seq) FROM entries").fetchone()[0]
        _, good = add_turn(conn, sid, "q3", "a3")
    user_seq, tool_seq, result_seq, final_seq = (r[0] for r in tool_turn_rows)
    cases = [(user_seq, "user message"), (tool_seq, "not the last message"), (result_seq, "toolResult message"),
             (blank, "has no text"), (outside, "no closed turn"), (999_999, "has no entry")]
    for seq, words in cases:
        _refused(sd, ForkOptions(sid, f"r{seq}", at_seq=seq), ForkInvalidBoundary, words)
        if seq != 999_999:
            v = explain_entry(sd, sid, seq)
            assert v is not None and not v.valid and words in v.reason
    first_turn_start = user_seq - 1
    v = explain_entry(sd, sid, first_turn_start)
    assert v is not None and "turn_start entry" in v.reason
    with sd.db.write() as conn:  # a final answer that also calls a tool
        _, tooly = add_turn(conn, sid, "q4", "")
        conn.execute("UPDATE entries SET data = json_set(data, '$.message.content', json(?)) WHERE seq = ?",
                     (json.dumps(message("assistant", "done", tool=True)["content"]), tooly))
    _refused(sd, ForkOptions(sid, "tool", at_seq=tooly), ForkInvalidBoundary, "calls a tool")
    assert explain_entry(sd, sid, good).valid  # type: ignore[union-attr]
    assert explain_entry(sd, sid, final_seq).valid  # type: ignore[union-attr]
    assert fork_session(sd, ForkOptions(sid, "ok", at_seq=final_seq)).fork_kind == "message"


@pytest.mark.parametrize("entry_type", ["custom", "custom_message", "future_type"])
def test_unsupported_entries_abort(sd: SessionDir, entry_type: str) -> None:
    b = build(sd, 1)
    with sd.db.write() as conn:
        add_entry(conn, b.session_id, entry_type, {"x": 1})
        add_turn(conn, b.session_id, "q", "a")
    _refused(sd, ForkOptions(b.session_id, "r"), ForkUnsupportedEntry, entry_type)
    # a fork whose boundary lies before the entry is fine
    assert fork_session(sd, ForkOptions(b.session_id, "early", at_seq=b.final_seqs[0])).seed_length > 0


def test_refused_under_another_holders_lease(sd: SessionDir) -> None:
    b = build(sd, 1)
    other = acquire(sd, b.session_id, "mutation", owner=LeaseOwner(), ttl=600)
    try:
        _refused(sd, ForkOptions(b.session_id, "r"), RepairRefused, "another owner's valid lease")
    finally:
        other.release()
    assert fork_session(sd, ForkOptions(b.session_id, "r")).seed_length > 0


def test_source_fingerprint_rechecked(sd: SessionDir) -> None:
    b = build(sd, 2)
    repair = ForkSession(sd, ForkOptions(b.session_id, "r"))
    pv = repair.preview()
    with sd.db.write() as conn:
        add_entry(conn, b.session_id, "message", {"message": message("user", "more")})
    before = _unchanged(sd)
    with pytest.raises(RepairRefused, match="changed since the preview"):
        repair.apply(pv)
    assert _unchanged(sd) == before


def test_fingerprint_rechecked_inside_the_write_transaction(sd: SessionDir) -> None:
    from store.mothx import repair_kit

    b = build(sd, 2)
    repair = ForkSession(sd, ForkOptions(b.session_id, "r"))
    pv = repair.preview()

    def sneak(name: str) -> None:
        if name == "fork.begin":
            with sd.db.write() as conn:
                add_entry(conn, b.session_id, "message", {"message": message("user", "sneaked in")})

    repair_kit.set_step_hook(sneak)
    try:
        with pytest.raises(RepairRefused, match="changed since the preview"):
            repair.apply(pv)
    finally:
        repair_kit.set_step_hook(None)
    assert _count(sd, "SELECT COUNT(*) FROM sessions") == 1
    with sd.db.read() as conn:
        state = conn.execute("SELECT purpose, state FROM session_runtime_leases").fetchone()
    assert tuple(state) == ("fork", "released")


def test_unknown_source(sd: SessionDir) -> None:
    with pytest.raises(SessionNotFound):
        ForkSession(sd, ForkOptions("nosuchsession0000", "r")).preview()


# --- legacy sessions (no turn index) ----------------------------------------------------------------------------


def _legacy(sd: SessionDir, windows: list[tuple[str, str]]) -> tuple[str, list[int]]:
    sid = create_session(sd)
    finals = []
    with sd.db.write() as conn:
        for i, (start, end) in enumerate(windows):
            conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at, finished_at) "
                         "VALUES (?, ?, 'completed', ?, ?, ?)", (f"run{i}", sid, start, end, end))
        for i, (start, _end) in enumerate(windows):
            ts = start.replace(":00Z", ":01Z")
            append = __import__("store.mothx.turns", fromlist=["append_entry"]).append_entry
            append(conn, sid, "message", {"message": message("user", f"q{i}")}, timestamp=ts)
            e = append(conn, sid, "message", {"message": message("assistant", f"a{i}")},
                       timestamp=ts.replace(":01Z", ":02Z"))
            finals.append(e.seq)
    return sid, finals


def test_legacy_session_uses_run_windows(sd: SessionDir) -> None:
    sid, finals = _legacy(sd, [("2026-01-01T10:00:00Z", "2026-01-01T10:05:00Z"),
                               ("2026-01-01T11:00:00Z", "2026-01-01T11:05:00Z")])
    res = fork_session(sd, ForkOptions(sid, "r"))
    assert res.boundary_seq == finals[1]
    res2 = fork_session(sd, ForkOptions(sid, "m", at_seq=finals[0]))
    assert [m.message.text for m in replay(sd, res2.session_id)] == ["q0", "a0"]
    assert all(c.legacy for c in candidates(sd, sid))


def test_legacy_overlapping_windows_make_the_fork_unavailable(sd: SessionDir) -> None:
    sid, _ = _legacy(sd, [("2026-01-01T10:00:00Z", "2026-01-01T11:30:00Z"),
                          ("2026-01-01T11:00:00Z", "2026-01-01T12:05:00Z")])
    _refused(sd, ForkOptions(sid, "r"), ForkNoCompletedTurn, "overlap")


# --- the property -----------------------------------------------------------------------------------------------

TURN = st.fixed_dictionaries({
    "tool": st.booleans(), "meta": st.integers(0, 2), "status": st.sampled_from(["completed", "failed", "cancelled"]),
    "override": st.booleans(), "compact": st.booleans(), "label": st.booleans(),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(turns=st.lists(TURN, min_size=1, max_size=5), pick=st.integers(0, 10), kind=st.sampled_from(["session", "message"]))
def test_property_fork_replays_the_source_prefix(tmp_path_factory: pytest.TempPathFactory, turns: list[dict[str, object]],
                                                 pick: int, kind: str) -> None:
    sd = open_session_dir(tmp_path_factory.mktemp("prop") / "s", create=True)
    try:
        sid = create_session(sd)
        msg_ids: list[str] = []
        with sd.db.write() as conn:
            for i, t in enumerate(turns):
                add_turn(conn, sid, f"q{i}", f"a{i}", tool=bool(t["tool"]), status=str(t["status"]),
                         meta_after=int(t["meta"]))  # type: ignore[call-overload]
                msg_ids = [r[0] for r in conn.execute("SELECT id FROM entries WHERE session_id = ? AND type = 'message' "
                                                      "ORDER BY seq", (sid,))]
                if t["override"]:
                    add_entry(conn, sid, "content_override", {"targetEntryId": msg_ids[pick % len(msg_ids)],
                                                              "message": message("user", f"override {i}")})
                if t["label"]:
                    add_entry(conn, sid, "label", {"targetId": msg_ids[-1], "label": f"l{i}"})
                if t["compact"] and len(msg_ids) > 2:
                    kept = msg_ids[len(msg_ids) // 2]
                    add_entry(conn, sid, "compaction", {"summary": f"summary {i}", "firstKeptEntryId": kept,
                                                        "summaryVersion": i, "previousCompactionId": "",
                                                        "lastSummarizedEntryId": msg_ids[0]})
        cands = [c for c in candidates(sd, sid) if c.valid]
        at = cands[pick % len(cands)].at_seq if kind == "message" and cands else 0
        res = fork_session(sd, ForkOptions(sid, "p", at_seq=at))
        assert _replay_view(replay(sd, res.session_id)) == _source_prefix(sd, sid, res.boundary_seq)
        assert not entry_ids(sd, sid) & entry_ids(sd, res.session_id)
        assert res.seed_length == _count(sd, "SELECT COUNT(*) FROM entries WHERE session_id = ? AND seq <= ?", sid,
                                         res.boundary_seq)
    finally:
        sd.close()


def test_a_row_that_does_not_parse_aborts(sd: SessionDir) -> None:
    b = build(sd, 1)
    with sd.db.write() as conn:
        seq, _ = add_entry(conn, b.session_id, "message", {"message": message("user", "x")})
        conn.execute("UPDATE entries SET data = '{\"type\": \"message\", broken' WHERE seq = ?", (seq,))
        add_turn(conn, b.session_id, "q", "a")
    before = _unchanged(sd)
    repair = ForkSession(sd, ForkOptions(b.session_id, "r"))
    pv = repair.preview()  # the preview reads the type column only; the copy reads every row's JSON
    with pytest.raises(ForkUnsupportedEntry, match=f"entry {seq} has invalid JSON"):
        repair.apply(pv)
    assert _unchanged(sd) == before


def test_columns_that_disagree_with_the_json_follow_the_json(sd: SessionDir) -> None:
    b = build(sd, 2)
    with sd.db.write() as conn:  # foreign rows: id, type and parent_id columns that are not copies of the JSON
        rows = conn.execute("SELECT seq FROM entries WHERE session_id = ? AND type = 'message' ORDER BY seq",
                            (b.session_id,)).fetchall()
        conn.execute("UPDATE entries SET id = 'column-id', parent_id = 'nowhere' WHERE seq = ?", (rows[0][0],))
        conn.execute("UPDATE entries SET type = 'model_change' WHERE seq = ?", (rows[1][0],))
        conn.execute("UPDATE entries SET data = ' ' || char(10) || data WHERE seq = ?", (rows[2][0],))
    res = fork_session(sd, ForkOptions(b.session_id, "r"))
    assert _replay_view(replay(sd, res.session_id)) == _source_prefix(sd, b.session_id, res.boundary_seq)
    assert not entry_ids(sd, b.session_id) & entry_ids(sd, res.session_id)
    child = load_rows(sd, res.session_id)
    assert all(r.id == r.entry_id and r.type == r.entry_type for r in child)


def test_lone_surrogate_and_big_numbers_are_kept(sd: SessionDir) -> None:
    b = build(sd, 1)
    with sd.db.write() as conn:
        seq = conn.execute("SELECT MIN(seq) FROM entries WHERE session_id = ? AND type = 'message'",
                           (b.session_id,)).fetchone()[0]
        conn.execute("UPDATE entries SET data = json_set(data, '$.n', json('123456789012345678901234567890')) "
                     "WHERE seq = ?", (seq,))
        conn.execute("UPDATE entries SET data = replace(data, 'question 1', 'q \\ud83d 1') WHERE seq = ?", (seq,))
    res = fork_session(sd, ForkOptions(b.session_id, "r"))
    src = next(r for r in load_rows(sd, b.session_id) if r.seq == seq)
    kid = next(r for r in load_rows(sd, res.session_id) if r.type == "message")
    assert "\\ud83d" in kid.data and "123456789012345678901234567890" in kid.data
    assert (kid.parsed or {})["message"] == (src.parsed or {})["message"]


def test_a_deep_chain_of_forks_is_one_family(sd: SessionDir) -> None:
    b = build(sd, 1)
    with sd.db.write() as conn:  # a chain 1,500 deep, written as rows (what matters is parent_session)
        parent = b.session_id
        for i in range(1500):
            sid = f"chain{i:011d}"
            conn.execute("INSERT INTO sessions (id, cwd, timestamp, parent_session, fork_kind, fork_boundary_seq, "
                         "seed_length) VALUES (?, '/w', 'x', ?, 'session', 1, 1)", (sid, parent))
            parent = sid
    fam = family(sd, parent)
    assert len(fam.members) == 1501 and len(fam.ancestors) == 1500 and fam.members[-1].depth == 1500
    assert len(family(sd, b.session_id).descendants) == 1500
