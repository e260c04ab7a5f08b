"""Every rule of the runtime lease engine (reference section 10), on a real sessions.db."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.errors import LeaseBusy, LeaseLost, ReadOnlyStore, SessionNotFound
from store.mothx import leases
from store.mothx.db import OpenMode
from store.mothx.leases import (
    LeaseEpochChanged,
    LeaseOwner,
    LeaseRunMismatch,
    RecoveryNotNeeded,
    SessionRecoveryRequired,
    SessionRunActive,
    acquire,
    acquire_lease,
    bind_run,
    check_fence,
    clock_override,
    get_lease,
    list_leases,
    lock_key,
    release_lease,
    renew_all,
    renew_lease,
    start_heartbeat,
)
from store.mothx.runs import NewRun, create_run
from store.mothx.sessiondir import SessionDir, open_session_dir
from store.mothx.simulator import RuntimeSimulator, create_session
from store.times import from_unix

T0 = 1_900_000_000


class Clock:
    """A test clock the lease engine reads through ``clock_override``."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: int) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Iterator[Clock]:
    c = Clock()
    with clock_override(c):
        yield c


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


@pytest.fixture
def sid(sd: SessionDir) -> str:
    return create_session(sd)


def row(sd: SessionDir, sid: str) -> leases.LeaseSnapshot:
    snap = get_lease(sd, sid)
    assert snap is not None
    return snap


# --- identity -----------------------------------------------------------------------------------------------------


def test_owner_instance_id_format_and_once_per_process() -> None:
    owner = LeaseOwner.current()
    assert re.fullmatch(r"pid-\d+-[0-9a-f]{32}", owner.instance_id)
    assert owner.instance_id.startswith(f"pid-{owner.pid}-")
    assert LeaseOwner.current() is owner
    assert LeaseOwner().instance_id != owner.instance_id


def test_token_hash_is_random_sha256_hex() -> None:
    a, b = leases.new_token_hash(), leases.new_token_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", a) and a != b


def test_lock_key_is_canonical_dir_nul_session(tmp_path: Path) -> None:
    assert lock_key(tmp_path / "x" / ".." / "x", "s") == str((tmp_path / "x").resolve()) + "\x00s"


# --- acquire ------------------------------------------------------------------------------------------------------


def test_first_acquire_inserts_epoch_1_with_sqlite_times(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner)
    r = row(sd, sid)
    assert (r.epoch, r.state, r.purpose, r.run_id, r.owner_kind) == (1, "active", "mutation", "", "process")
    assert (r.owner_instance_id, r.owner_pid, r.token_hash) == (owner.instance_id, owner.pid, lease.token_hash)
    assert r.acquired_at == r.heartbeat_at == r.updated_at == T0
    assert r.expires_at == T0 + 15
    assert r.valid and owner.holds(r)


def test_acquire_uses_the_sqlite_clock_without_override(sd: SessionDir, sid: str) -> None:
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    with sd.db.read() as conn:
        sql_now = conn.execute("SELECT CAST(strftime('%s','now') AS INTEGER)").fetchone()[0]
    assert abs(lease.acquired_at - sql_now) <= 1
    assert lease.expires_at == lease.acquired_at + leases.LEASE_TTL_S


def test_missing_session_is_not_found(sd: SessionDir) -> None:
    with pytest.raises(SessionNotFound):
        acquire_lease(sd, "0000000000000000", "mutation", owner=LeaseOwner())


def test_missing_session_frees_the_local_lock(sd: SessionDir, sid: str) -> None:
    owner = LeaseOwner()
    with pytest.raises(SessionNotFound):
        acquire_lease(sd, "0000000000000000", "mutation", owner=owner)
    assert not owner.is_locked(lock_key(sd.root, "0000000000000000"))


def test_process_local_lock_refuses_a_second_acquire_in_the_same_process(sd: SessionDir, sid: str) -> None:
    owner = LeaseOwner()
    acquire_lease(sd, sid, "mutation", owner=owner)
    with pytest.raises(LeaseBusy, match="already held by this process"):
        acquire_lease(sd, sid, "mutation", owner=owner)


def test_valid_foreign_lease_is_busy_and_names_the_holder(sd: SessionDir, sid: str, clock: Clock) -> None:
    holder = LeaseOwner(pid=4242)
    acquire_lease(sd, sid, "mutation", owner=holder)
    with pytest.raises(LeaseBusy) as info:
        acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    text = str(info.value)
    assert holder.instance_id in text and "pid 4242" in text and "purpose mutation" in text
    assert from_unix(T0 + 15) in text
    assert row(sd, sid).owner_instance_id == holder.instance_id  # nothing changed


def test_expired_lease_is_taken_over_and_epoch_bumped(sd: SessionDir, sid: str, clock: Clock) -> None:
    old = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    clock.advance(15)  # expires_at <= now
    new_owner = LeaseOwner()
    new = acquire_lease(sd, sid, "fork", owner=new_owner)
    r = row(sd, sid)
    assert (new.epoch, r.epoch, r.purpose, r.owner_instance_id) == (2, 2, "fork", new_owner.instance_id)
    assert r.token_hash != old.token_hash and r.acquired_at == T0 + 15 and r.expires_at == T0 + 30


def test_lease_one_second_before_expiry_is_still_busy(sd: SessionDir, sid: str, clock: Clock) -> None:
    acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    clock.advance(14)
    with pytest.raises(LeaseBusy):
        acquire_lease(sd, sid, "mutation", owner=LeaseOwner())


def test_released_lease_is_taken_over_and_epoch_bumped(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    release_lease(sd, acquire_lease(sd, sid, "mutation", owner=owner), owner=owner)
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    assert lease.epoch == row(sd, sid).epoch == 2


def test_same_owner_reclaim_when_identity_no_longer_registered(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    first = acquire_lease(sd, sid, "mutation", owner=owner)
    owner.forget(first)  # the process lost track of it (e.g. a restart of its registry)
    owner.unlock(first.lock_key)
    second = acquire_lease(sd, sid, "mutation", owner=owner)
    assert second.epoch == 2 and row(sd, sid).token_hash == second.token_hash


def test_expected_epoch_fences_acquisition(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    release_lease(sd, acquire_lease(sd, sid, "mutation", owner=owner), owner=owner)
    with pytest.raises(LeaseEpochChanged):
        acquire_lease(sd, sid, "mutation", owner=owner, expected_epoch=0)
    assert not owner.is_locked(lock_key(sd.root, sid))
    assert acquire_lease(sd, sid, "mutation", owner=owner, expected_epoch=1).epoch == 2


def _start_run(sd: SessionDir, sid: str, owner: LeaseOwner) -> RuntimeSimulator:
    sim = RuntimeSimulator(sd, sid, owner=owner)
    sim.admit()
    return sim


@pytest.mark.parametrize(
    ("purpose", "error"),
    [("admission", SessionRecoveryRequired), ("mutation", SessionRunActive), ("fork", SessionRunActive)],
)
def test_idle_only_purposes_refuse_an_active_run(sd: SessionDir, sid: str, clock: Clock, purpose: str,
                                                 error: type[Exception]) -> None:
    _start_run(sd, sid, LeaseOwner())
    clock.advance(60)  # the runtime's lease expired: only the mode check stands in the way
    with pytest.raises(error):
        acquire_lease(sd, sid, purpose, owner=LeaseOwner())


def test_recovery_needs_an_active_run(sd: SessionDir, sid: str) -> None:
    with pytest.raises(RecoveryNotNeeded):
        acquire_lease(sd, sid, "recovery", expected_run_id="r1", owner=LeaseOwner())


def test_recovery_needs_the_expected_run(sd: SessionDir, sid: str, clock: Clock) -> None:
    _start_run(sd, sid, LeaseOwner())
    clock.advance(60)
    with pytest.raises(LeaseRunMismatch):
        acquire_lease(sd, sid, "recovery", expected_run_id="not-the-run", owner=LeaseOwner())


def test_recovery_takes_over_and_binds_the_expected_run(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim = _start_run(sd, sid, LeaseOwner())
    clock.advance(60)
    lease = acquire_lease(sd, sid, "recovery", expected_run_id=sim.run_id, owner=LeaseOwner())
    r = row(sd, sid)
    assert (r.purpose, r.run_id, r.epoch, lease.epoch) == ("recovery", sim.run_id, 2, 2)


def test_recovery_is_busy_while_the_runtime_lease_is_valid(sd: SessionDir, sid: str, clock: Clock) -> None:
    sim = _start_run(sd, sid, LeaseOwner())
    with pytest.raises(LeaseBusy, match="purpose execution"):
        acquire_lease(sd, sid, "recovery", expected_run_id=sim.run_id, owner=LeaseOwner())


def test_read_only_mode_refuses_to_acquire(sd: SessionDir, sid: str) -> None:
    ro = open_session_dir(sd.root, OpenMode.READ_ONLY)
    try:
        with pytest.raises(ReadOnlyStore):
            acquire_lease(ro, sid, "mutation", owner=LeaseOwner())
    finally:
        ro.close()


def test_unknown_purpose_is_refused(sd: SessionDir, sid: str) -> None:
    with pytest.raises(Exception, match="Unknown lease purpose"):
        acquire_lease(sd, sid, "party", owner=LeaseOwner())


# --- renew ----------------------------------------------------------------------------------------------------------


def test_renew_extends_expiry_from_now(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner)
    clock.advance(3)
    renew_lease(sd, lease, owner=owner)
    r = row(sd, sid)
    assert (r.heartbeat_at, r.expires_at, r.updated_at, r.acquired_at) == (T0 + 3, T0 + 18, T0 + 3, T0)
    assert lease.expires_at == T0 + 18


def test_expired_lease_nobody_took_over_is_still_renewable(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner)
    clock.advance(100)
    renew_lease(sd, lease, owner=owner)
    assert row(sd, sid).valid


def test_renew_after_takeover_is_lost(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner)
    clock.advance(20)
    acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    with pytest.raises(LeaseLost):
        renew_lease(sd, lease, owner=owner)
    assert lease.status == "lost" and lease.lost_signal.is_set()
    assert owner.held_leases() == []
    with pytest.raises(LeaseLost):  # a lost lease is forgotten: renewing again fails at once
        renew_lease(sd, lease, owner=owner)


def test_renew_all_renews_every_lease_in_one_go_and_reports_lost(sd: SessionDir, clock: Clock) -> None:
    s1, s2 = create_session(sd), create_session(sd)
    owner = LeaseOwner()
    a = acquire_lease(sd, s1, "mutation", owner=owner)
    b = acquire_lease(sd, s2, "mutation", owner=owner)
    clock.advance(20)
    acquire_lease(sd, s2, "mutation", owner=LeaseOwner())  # b is taken over
    lost = renew_all(sd, owner)
    assert lost == [b] and b.status == "lost"
    assert row(sd, s1).expires_at == T0 + 35 and a.held


# --- release --------------------------------------------------------------------------------------------------------


def test_release_keeps_a_tombstone_and_is_safe_twice(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    guard = acquire(sd, sid, "mutation", owner=owner)
    clock.advance(2)
    assert guard.release() is True
    assert guard.release() is False
    r = row(sd, sid)
    assert (r.state, r.expires_at, r.heartbeat_at, r.updated_at, r.epoch) == ("released", T0 + 2, T0 + 2, T0 + 2, 1)
    assert not r.valid and not owner.is_locked(lock_key(sd.root, sid))


def test_release_after_takeover_leaves_the_new_holder_alone(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner)
    clock.advance(20)
    other = LeaseOwner()
    acquire_lease(sd, sid, "mutation", owner=other)
    assert release_lease(sd, lease, owner=owner) is False
    r = row(sd, sid)
    assert (r.state, r.owner_instance_id, r.epoch) == ("active", other.instance_id, 2)


def test_guard_context_manager_releases(sd: SessionDir, sid: str) -> None:
    owner = LeaseOwner()
    with acquire(sd, sid, "mutation", owner=owner) as guard:
        assert row(sd, sid).state == "active" and guard.epoch == 1
    assert row(sd, sid).state == "released"
    assert acquire(sd, sid, "mutation", owner=owner).epoch == 2  # the local lock was freed too


def test_release_on_a_closed_store_still_frees_the_lock(tmp_path: Path) -> None:
    d = open_session_dir(tmp_path / "s", create=True)
    sid = create_session(d)
    owner = LeaseOwner()
    guard = acquire(d, sid, "mutation", owner=owner)
    d.close()
    assert guard.release() is False
    assert not owner.is_locked(lock_key(d.root, sid))


# --- bind -----------------------------------------------------------------------------------------------------------


def test_bind_promotes_admission_to_execution(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "admission", owner=owner)
    with sd.db.write() as conn:
        create_run(conn, NewRun(id="run1", session_id=sid), lease)
        bind_run(conn, lease, "run1")
    r = row(sd, sid)
    assert (r.purpose, r.run_id, lease.purpose, lease.run_id) == ("execution", "run1", "execution", "run1")


def test_bind_refuses_an_expired_lease(sd: SessionDir, sid: str, clock: Clock) -> None:
    lease = acquire_lease(sd, sid, "admission", owner=LeaseOwner())
    clock.advance(15)
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        bind_run(conn, lease, "run1")
    assert row(sd, sid).run_id == ""


def test_bind_refuses_a_mutation_lease(sd: SessionDir, sid: str, clock: Clock) -> None:
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        bind_run(conn, lease, "run1")


def test_bind_refuses_a_lease_bound_to_another_run(sd: SessionDir, sid: str, clock: Clock) -> None:
    lease = acquire_lease(sd, sid, "admission", owner=LeaseOwner())
    with sd.db.write() as conn:
        bind_run(conn, lease, "run1")
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        bind_run(conn, lease, "run2")


# --- fence ----------------------------------------------------------------------------------------------------------


def test_fence_allows_cold_writes_when_no_row_exists(sd: SessionDir, sid: str) -> None:
    with sd.db.write() as conn:
        assert check_fence(conn, None, session_id=sid) is None


def test_fence_refuses_a_write_without_lease_once_a_row_exists(sd: SessionDir, sid: str) -> None:
    owner = LeaseOwner()
    release_lease(sd, acquire_lease(sd, sid, "mutation", owner=owner), owner=owner)
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        check_fence(conn, None, session_id=sid)


def test_fence_accepts_the_exact_holder(sd: SessionDir, sid: str, clock: Clock) -> None:
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    with sd.db.write() as conn:
        snap = check_fence(conn, lease, purpose="mutation", run_id="")
    assert snap is not None and snap.epoch == 1


@pytest.mark.parametrize("field", ["epoch", "token_hash", "owner_instance_id"])
def test_fence_refuses_a_different_identity(sd: SessionDir, sid: str, clock: Clock, field: str) -> None:
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    forged = leases.Lease(**{**lease.__dict__, field: (lease.epoch + 1 if field == "epoch" else "x")})
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        check_fence(conn, forged)


def test_fence_refuses_an_expired_or_released_lease(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner)
    clock.advance(15)
    with pytest.raises(LeaseLost, match="expired"), sd.db.write() as conn:
        check_fence(conn, lease)
    clock.advance(-15)
    release_lease(sd, lease, owner=owner)
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        check_fence(conn, lease)


def test_fence_binding_checks_purpose_and_run(sd: SessionDir, sid: str, clock: Clock) -> None:
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    with pytest.raises(LeaseLost, match="purpose"), sd.db.write() as conn:
        check_fence(conn, lease, purpose="recovery")
    with pytest.raises(LeaseLost, match="bound"), sd.db.write() as conn:
        check_fence(conn, lease, run_id="r9")


def test_fence_rolls_back_the_callers_transaction(sd: SessionDir, sid: str, clock: Clock) -> None:
    lease = acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    clock.advance(20)
    acquire_lease(sd, sid, "mutation", owner=LeaseOwner())
    with pytest.raises(LeaseLost), sd.db.write() as conn:
        conn.execute("UPDATE sessions SET cwd = 'changed' WHERE id = ?", (sid,))
        check_fence(conn, lease)
    with sd.db.read() as conn:
        assert conn.execute("SELECT cwd FROM sessions WHERE id = ?", (sid,)).fetchone()[0] != "changed"


# --- heartbeat thread, notifications, listing -----------------------------------------------------------------------


def _wait_for(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_heartbeat_thread_renews_and_detects_loss(sd: SessionDir, sid: str, clock: Clock) -> None:
    owner = LeaseOwner()
    lease = acquire_lease(sd, sid, "mutation", owner=owner, ttl=5)
    clock.advance(100)  # expired but not taken over: the next heartbeat renews it
    start_heartbeat(sd, owner, interval=0.02)
    assert _wait_for(lambda: row(sd, sid).expires_at == T0 + 105)
    clock.advance(10)
    taker = LeaseOwner()
    # Wait until the next renewal extends it again, then take over once it lapses.
    assert _wait_for(lambda: row(sd, sid).expires_at == T0 + 115)
    clock.advance(10)
    with sd.db.write() as conn:  # a foreign takeover committed directly
        conn.execute("UPDATE session_runtime_leases SET epoch = epoch + 1, owner_instance_id = ? WHERE session_id = ?",
                     (taker.instance_id, sid))
    assert _wait_for(lease.lost_signal.is_set)
    assert lease.status == "lost"


def test_publisher_sees_acquired_released_and_lost(sd: SessionDir, sid: str, clock: Clock) -> None:
    seen: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def capture(kind: str, notice: leases.LeaseNotice) -> None:
        with lock:
            seen.append((kind, notice.epoch, notice.origin))
        assert notice.database_identity.endswith("sessions.db") and notice.session_id == sid

    leases.set_publisher(capture)
    try:
        owner = LeaseOwner()
        lease = acquire_lease(sd, sid, "mutation", owner=owner)
        release_lease(sd, lease, owner=owner)
        release_lease(sd, lease, owner=owner)  # a second release publishes nothing
        lost = acquire_lease(sd, sid, "fork", owner=owner)
        clock.advance(20)
        acquire_lease(sd, sid, "fork", owner=LeaseOwner())
        with pytest.raises(LeaseLost):
            renew_lease(sd, lost, owner=owner)
    finally:
        leases.set_publisher(None)
    kinds = [k for k, _, _ in seen]
    assert kinds == ["acquired", "released", "acquired", "acquired", "lost"]
    assert seen[-1] == ("lost", 2, "fork")


def test_a_failing_publisher_never_breaks_a_lease(sd: SessionDir, sid: str) -> None:
    def boom(kind: str, notice: leases.LeaseNotice) -> None:
        raise RuntimeError("bus down")

    leases.set_publisher(boom)
    try:
        with acquire(sd, sid, "mutation", owner=LeaseOwner()):
            pass
    finally:
        leases.set_publisher(None)
    assert row(sd, sid).state == "released"


def test_list_leases_and_describe(sd: SessionDir, clock: Clock) -> None:
    s1, s2 = sorted((create_session(sd), create_session(sd)))
    owner = LeaseOwner(pid=77)
    acquire_lease(sd, s1, "mutation", owner=owner)
    release_lease(sd, acquire_lease(sd, s2, "fork", owner=owner), owner=owner)
    all_rows = list_leases(sd)
    assert [r.session_id for r in all_rows] == [s1, s2]
    assert [r.session_id for r in list_leases(sd, active_only=True)] == [s1]
    assert "valid until" in all_rows[0].describe() and "pid 77" in all_rows[0].describe()
    assert all_rows[1].describe().startswith("released by")
    clock.advance(15)
    assert "expired at" in list_leases(sd)[0].describe()


def test_mutation_group_sorted_all_or_none_and_reverse_release(sd: SessionDir, clock: Clock) -> None:
    a, b, c = sorted(create_session(sd) for _ in range(3))
    owner = LeaseOwner()
    released: list[str] = []
    leases.set_publisher(lambda kind, n: released.append(n.session_id) if kind == "released" else None)
    try:
        with leases.acquire_mutations(sd, [c, a, b, a], owner=owner) as group:
            assert [g.session_id for g in group.guards] == [a, b, c]
            assert group.guard(b).lease.purpose == "mutation"
        assert released == [c, b, a]
    finally:
        leases.set_publisher(None)
    holder = LeaseOwner()
    acquire_lease(sd, b, "mutation", owner=holder)
    with pytest.raises(LeaseBusy):
        leases.acquire_mutations(sd, [a, b, c], owner=owner)
    assert row(sd, a).state == "released" and row(sd, c).epoch == 1  # a was released again, c never taken
    assert not owner.is_locked(lock_key(sd.root, a))
