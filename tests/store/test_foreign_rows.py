"""Foreign rows: a cell no runtime writes (TEXT in an integer column, a BLOB, a NULL where NOT NULL is declared,
a huge integer, hostile text) marks that row damaged; every other row keeps working, and a repair on a damaged
row is refused with one sentence, before anything is written."""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import RepairRefused
from store.mothx.cells import INT64_MAX, has_surrogates
from store.mothx.leases import clock_override, list_leases
from store.mothx.recovery import (
    AbandonToolExecutions,
    RecoverRun,
    ReleaseExpiredLease,
    RequestToolRecovery,
    list_interrupted_tools,
    recovery_backoff,
)
from store.mothx.repairs import Repair, suggest_repairs
from store.mothx.runs import (
    inspect_execution,
    list_orphaned,
    list_run_events,
    list_runs,
    list_turns,
    read_execution_facts,
)
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.store.foreign_rows import BAD_UTF8, HOSTILE, T0, TABLES, build_template, corrupt, dump, place

NOW = T0 + 100
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_template(tmp_path_factory.mktemp("foreign"))


@pytest.fixture
def copy(template: Path, tmp_path: Path) -> Path:
    return place(template, tmp_path / "sessions")


@pytest.fixture
def clock() -> Iterator[None]:
    with clock_override(NOW):
        yield


def _open(db: Path) -> SessionDir:
    return open_session_dir(db.parent)


def _ids(db: Path, sql: str) -> list[str]:
    """The text ids ``sql`` selects (a corrupted text cell may hold bytes that are not UTF-8: left out, not
    raised; a blob is left out as before)."""
    conn = sqlite3.connect(db)
    conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    out: list[str] = []
    try:
        for (value, *_rest) in conn.execute(sql):
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:  # it held bytes that are not UTF-8
                    continue
                out.append(value)
        return out
    finally:
        conn.close()


def _raw(db: Path, sql: str, args: tuple[object, ...] = ()) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(sql, args)
    finally:
        conn.close()


def _assert_refused(repair: Repair, db: Path, *words: str) -> str:
    preview = repair.preview()
    assert not preview.allowed
    before = dump(db)
    with pytest.raises(RepairRefused) as info:
        repair.apply(preview)
    message = str(info.value)
    assert message.startswith("Refused: ") and "\n" not in message and not UNSAFE.search(message)
    assert all(w in message for w in words), message
    assert dump(db) == before  # not a byte written, not even the lease
    return message


# --- one damaged row among sound ones ---------------------------------------------------------------------------


def test_text_epoch_marks_one_lease_damaged_and_the_rest_work(copy: Path, clock: None) -> None:
    sessions = _ids(copy, "SELECT session_id FROM session_runtime_leases ORDER BY session_id")
    _raw(copy, "UPDATE session_runtime_leases SET epoch = 'abc' WHERE session_id = ?", (sessions[2],))
    with _open(copy) as sd:
        leases = list_leases(sd)
        assert [lease.session_id for lease in leases] == sessions
        damaged = [lease for lease in leases if lease.problems]
        assert [d.session_id for d in damaged] == [sessions[2]]
        assert damaged[0].problems == ("session_runtime_leases.epoch holds TEXT 'abc'",)
        assert "damaged" in damaged[0].describe()
        assert inspect_execution(sd, sessions[2]).state == "unknown"
        assert {inspect_execution(sd, s).state for s in sessions if s != sessions[2]} <= {
            "idle", "orphaned", "external", "detached_remote"}
        assert len(list_runs(sd)) == 7
        _assert_refused(ReleaseExpiredLease(sd, sessions[2]), copy, "damaged", "epoch holds TEXT 'abc'")


def test_text_expires_at_refuses_the_lease_release(copy: Path, clock: None) -> None:
    with _open(copy) as sd:
        idle = next(s.targets[0][1] for s in suggest_repairs(sd) if s.repair_id == "release-lease")
    _raw(copy, "UPDATE session_runtime_leases SET expires_at = 'soon' WHERE session_id = ?", (idle,))
    with _open(copy) as sd:
        assert not [s for s in suggest_repairs(sd) if s.repair_id == "release-lease"]
        _assert_refused(ReleaseExpiredLease(sd, idle), copy, "expires_at holds TEXT 'soon'")


def test_text_attempt_shows_the_run_damaged_and_refuses_its_recovery(copy: Path, clock: None) -> None:
    with _open(copy) as sd:
        orphan = list_orphaned(sd)[0].run
    _raw(copy, "UPDATE session_runs SET attempt = 'first' WHERE id = ?", (orphan.id,))
    with _open(copy) as sd:
        rows = list_runs(sd)
        assert len(rows) == 7
        (bad,) = [r for r in rows if r.problems]
        assert bad.run.id == orphan.id and bad.state == "unknown"
        assert bad.damaged == "session_runs.attempt holds TEXT 'first'"
        assert bad.execution is not None and "damaged" in bad.execution.reason
        assert orphan.id not in {o.run.id for o in list_orphaned(sd)}
        assert all(not r.problems for r in rows if r.run.id != orphan.id)
        _assert_refused(RecoverRun(sd, orphan.id), copy, orphan.id, "attempt holds TEXT 'first'")


@pytest.mark.parametrize(
    ("column", "value", "what"),
    [
        ("epoch", INT64_MAX, f"INTEGER {INT64_MAX}, out of range"),
        ("epoch", b"\x01\x02", "a BLOB of 2 bytes"),
        ("epoch", None, "NULL"),
        ("expires_at", 1.5, "REAL 1.5"),
        ("owner_pid", "99999999999999999999", "REAL 1e+20"),
        ("state", "zombie", "TEXT 'zombie', not a lease state"),
    ],
)
def test_any_foreign_lease_cell_refuses_recovery(copy: Path, clock: None, column: str, value: object,
                                                 what: str) -> None:
    with _open(copy) as sd:
        orphan = list_orphaned(sd)[0].run
    _raw(copy, f"UPDATE session_runtime_leases SET {column} = ? WHERE session_id = ?", (value, orphan.session_id))
    with _open(copy) as sd:
        (lease,) = [lease for lease in list_leases(sd) if lease.session_id == orphan.session_id]
        assert lease.problems == (f"session_runtime_leases.{column} holds {what}",)
        _assert_refused(RecoverRun(sd, orphan.id), copy, what)


def test_a_damaged_tool_record_refuses_the_tool_repairs(copy: Path, clock: None) -> None:
    with _open(copy) as sd:
        orphan = list_orphaned(sd)[0].run
        RecoverRun(sd, orphan.id).apply()  # the session is idle now; its tool records stay interrupted
        tools = list_interrupted_tools(sd, orphan.session_id)
        turn = tools.records[0].local_turn_id
        calls = [r.provider_call_id for r in tools.records]
    _raw(copy, "UPDATE tool_execution_records SET side_effecting = 'maybe' WHERE provider_call_id = ?", (calls[0],))
    with _open(copy) as sd:
        records = list_interrupted_tools(sd, orphan.session_id, turn).records
        assert [r.problems for r in records] == [("tool_execution_records.side_effecting holds TEXT 'maybe'",), ()]
        _assert_refused(AbandonToolExecutions(sd, orphan.session_id, turn), copy, "side_effecting")
        _assert_refused(RequestToolRecovery(sd, orphan.session_id, turn, calls[:1]), copy, "side_effecting")
        result = AbandonToolExecutions(sd, orphan.session_id, turn, calls[1:]).apply()  # the sound one still works
        assert len(result.changes) == 1


def test_a_huge_recovery_attempt_is_read_and_backs_off_at_the_cap(copy: Path, clock: None) -> None:
    assert recovery_backoff(2**62) == 60 and recovery_backoff(INT64_MAX) == 60
    with _open(copy) as sd:
        orphan = list_orphaned(sd)[0].run
    _raw(copy, "INSERT INTO session_run_recoveries (run_id, session_id, state, attempt, started_at, updated_at, "
               "next_retry_at, last_error) VALUES (?, ?, 'failed', ?, 0, 0, ?, 'boom')",
         (orphan.id, orphan.session_id, INT64_MAX, INT64_MAX))
    with _open(copy) as sd:
        started = time.monotonic()
        state = inspect_execution(sd, orphan.session_id)
        preview = RecoverRun(sd, orphan.id).preview()
        assert time.monotonic() - started < 5
    assert state.state == "recovery_failed" and preview.allowed


def test_blob_and_null_keys_page_like_the_rest(copy: Path, clock: None) -> None:
    ids = _ids(copy, "SELECT id FROM session_runs ORDER BY rowid")
    _raw(copy, "UPDATE session_runs SET started_at = NULL WHERE id = ?", (ids[0],))
    _raw(copy, "UPDATE session_runs SET started_at = X'00ff' WHERE id = ?", (ids[1],))
    _raw(copy, "UPDATE session_runs SET id = NULL WHERE id = ?", (ids[2],))
    _raw(copy, "UPDATE session_runs SET id = X'4142' WHERE id = ?", (ids[3],))
    with _open(copy) as sd:
        everything = list_runs(sd, limit=100)
        assert len(everything) == 7
        paged, after = [], None
        while True:
            page = list_runs(sd, limit=2, after=after)
            if not page:
                break
            paged.extend(page)
            after = page[-1].cursor
        assert [p.cursor.rowid for p in paged] == [p.cursor.rowid for p in everything]
        assert sum(1 for p in everything if p.problems) == 4


def test_hostile_text_in_ids_reaches_no_message_raw(copy: Path, clock: None) -> None:
    with _open(copy) as sd:
        orphan = list_orphaned(sd)[0].run
    for i, value in enumerate(HOSTILE[:4]):
        _raw(copy, f"UPDATE session_runtime_leases SET owner_instance_id = ? WHERE rowid = {i + 1}", (value,))
    _raw(copy, "UPDATE session_runtime_leases SET owner_instance_id = ?, expires_at = ? WHERE session_id = ?",
         ("\x1b]0;pwned\x07[/]", NOW + 100, orphan.session_id))
    with _open(copy) as sd:
        for lease in list_leases(sd):
            assert not UNSAFE.search(lease.describe())
        repair = RecoverRun(sd, orphan.id)
        preview = repair.preview()
        assert "another owner's valid lease" in preview.refusal and not UNSAFE.search(preview.refusal)
        assert not any(UNSAFE.search(line) for line in preview.lines())
        with pytest.raises(RepairRefused) as info:
            repair.apply(preview)
        assert not UNSAFE.search(str(info.value)) and "␛]0;pwned␇[/]" in str(info.value)


# --- any cell, any value ------------------------------------------------------------------------------------------

_INTERESTING = st.sampled_from([
    None, "", "abc", "1", "-1", "99999999999999999999", "1e400", b"", b"\x00\xff", 0, -1, INT64_MAX, -(2**63), 2**62,
    1.5, float("inf"), -0.0, "active", "released", "running", "failed", "completed", "recovery", "execution",
    "responses_background", "openai-responses", "{not json", '{"decisionId": 7}', "[1,2]", BAD_UTF8, *HOSTILE,
])
_VALUES = st.one_of(_INTERESTING, st.text(max_size=12), st.integers(min_value=-(2**63), max_value=2**63 - 1),
                    st.binary(max_size=6), st.floats(allow_nan=False))
_CELLS = st.sampled_from([(t, c) for t, cols in TABLES.items() for c in cols])
_CHANGES = st.lists(st.tuples(_CELLS, st.integers(0, 40), _VALUES), min_size=1, max_size=6)


def _previews(sd: SessionDir, db: Path) -> list[Repair]:
    runs = _ids(db, "SELECT id FROM session_runs")
    sessions = _ids(db, "SELECT id FROM sessions")
    repairs: list[Repair] = []
    repairs += [RecoverRun(sd, r) for r in runs] + [RecoverRun(sd, r, user_stop=True) for r in runs[:2]]
    repairs += [ReleaseExpiredLease(sd, s) for s in sessions]
    conn = sqlite3.connect(db)
    conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")  # a corrupted cell: not UTF-8
    try:
        rows = conn.execute("SELECT session_id, local_turn_id, provider_call_id FROM tool_execution_records").fetchall()
    finally:
        conn.close()
    for sid, turn, call in rows:
        if isinstance(sid, str) and isinstance(turn, str) and not has_surrogates(sid + turn):
            repairs.append(AbandonToolExecutions(sd, sid, turn))
            if isinstance(call, str) and call and not has_surrogates(call):
                repairs.append(RequestToolRecovery(sd, sid, turn, [call]))
    return repairs


def _exercise(db: Path) -> None:
    """Everything a listing or a preview reads: nothing may raise (invalid UTF-8 decodes losslessly)."""
    sd = _open(db)
    try:
        for call in (
            lambda: list_runs(sd), lambda: list_runs(sd, active_only=True), lambda: list_orphaned(sd),
            lambda: list_leases(sd), lambda: list_leases(sd, active_only=True), lambda: suggest_repairs(sd),
            lambda: list_run_events(sd),
        ):
            call()
        paged, after = 0, None
        for _ in range(20):
            page = list_runs(sd, limit=3, after=after)
            if not page:
                break
            paged += len(page)
            after = page[-1].cursor
        listings = list_runs(sd, limit=1000)
        assert paged == len(listings)
        for listing in listings:
            texts = [listing.damaged, listing.execution.reason if listing.execution else ""]
            texts += [listing.lease.describe()] if listing.lease is not None else []
            assert not any(UNSAFE.search(x) for x in texts), texts
        for sid in _ids(db, "SELECT id FROM sessions"):
            readers: tuple[Callable[[SessionDir, str], object], ...] = (
                read_execution_facts, inspect_execution, list_turns, list_interrupted_tools)
            for reader in readers:
                reader(sd, sid)
        for repair in _previews(sd, db):
            preview = repair.preview()
            for line in preview.lines():
                assert not UNSAFE.search(line), line
            preview.to_json()
    finally:
        sd.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(changes=_CHANGES)
def test_corrupting_any_cells_never_breaks_listing_or_previews(template: Path, changes: list[tuple[
        tuple[str, str], int, object]]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="foreign-rows-"))
    try:
        db = place(template, folder / "sessions")
        corrupt(db, [(t, c, k, v) for (t, c), k, v in changes])
        with clock_override(NOW):
            _exercise(db)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
