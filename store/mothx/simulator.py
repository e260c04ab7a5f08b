"""A mothx runtime stand-in: admits runs under fenced leases, heartbeats, appends, completes — or dies mid-run.

Run as its own OS process so recovery is tested against a real process that can be killed::

    python -m store.mothx.simulator --dir D --session S [--runs N] [--steps K] [--append-interval 0.2]
                              [--ttl 15] [--heartbeat 3] [--hang-at STEP] [--create]

Every step prints one JSON object per line on stdout (``{"event": ..., ...}``), flushed, so a test can follow
it. ``--hang-at STEP`` stops working after that step of the first run but keeps heartbeating (a live, busy
owner); kill it with SIGKILL to leave an orphan.

Each run: admission lease → one admission transaction (run row ``created``, lease bound to the run as
``execution``, ``turn_start`` entry + open ``conversation_turns`` row, ``run_started`` event) → ``queued`` →
``running`` → steps → one finishing transaction (final message, run ``completed``, terminal event
``run_<runID>_completed``, ``turn_end`` entry, turn row closed) → release (tombstone).

Steps cycle through: user message; assistant message with a ``toolCall`` + a ``running`` tool execution
record; the ``toolResult`` + record ``completed``; an approval request (``approval_resolved`` event with status
``pending``, run ``waiting_for_approval``); the approval (status ``approved``, run ``running``); assistant text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from store.errors import LeaseLost, StoreError
from store.mothx.lease_guard import LeaseGuard, acquire, start_heartbeat
from store.mothx.lease_model import HEARTBEAT_INTERVAL_S, LEASE_TTL_S, LeaseOwner, publish_state_changed
from store.mothx.lease_store import check_fence
from store.mothx.run_events import NewRunEvent, insert_run_event, run_event_id
from store.mothx.run_model import ConversationTurn, new_id
from store.mothx.run_store import NewRun, create_run, fence_run, transition_run
from store.mothx.turns import append_entry, close_turn, open_turn
from store.safetext import one_line
from store.times import format_rfc3339

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

STEP_KINDS = ("user_message", "tool_call", "tool_result", "approval_pending", "approval_granted", "assistant_text")
SIM_PROVIDER = "simulator"
SIM_API = "simulated"


def create_session(sd: SessionDir, session_id: str | None = None, *, cwd: str = "/tmp/simulated",
                   timestamp: str | None = None) -> str:
    """Insert a session row and its ``session`` header entry (a cold write: no lease exists yet)."""
    sd.require_writable()
    sid = session_id or new_id()
    ts = timestamp or format_rfc3339()
    header = {"type": "session", "id": sid, "parentId": None, "timestamp": ts, "version": 3, "cwd": cwd}
    with sd.db.write() as conn:
        check_fence(conn, None, session_id=sid)
        conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, ?, ?, 3)", (sid, cwd, ts))
        conn.execute(
            "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, 'session', NULL, ?, ?)",
            (sid, sid, ts, json.dumps(header, separators=(",", ":"))),
        )
    return sid


def _message(role: str, **fields: object) -> dict[str, object]:
    msg: dict[str, object] = {"role": role}
    msg.update(fields)
    msg["timestamp"] = format_rfc3339()
    return msg


Emit = Callable[..., None]


def _silent(event: str, **fields: object) -> None:
    return None


@dataclass
class RuntimeSimulator:
    """One simulated runtime process working on one session (usable in-process with an explicit owner)."""

    sd: SessionDir
    session_id: str
    owner: LeaseOwner = field(default_factory=LeaseOwner.current)
    ttl: int = LEASE_TTL_S
    heartbeat_interval: float | None = None  # None: no heartbeat thread (callers renew themselves)
    emit: Emit = _silent
    guard: LeaseGuard | None = None
    run_id: str = ""
    turn: ConversationTurn | None = None
    step_no: int = 0
    pending_call: str = ""
    pending_decision: str = ""

    # lifecycle -------------------------------------------------------------------------------------------------
    def admit(self, *, now: int | None = None) -> str:
        """Admission: lease, run row, binding, turn and first event in one transaction; then queued → running."""
        guard = acquire(self.sd, self.session_id, "admission", ttl=self.ttl, owner=self.owner, now=now)
        self.guard = guard
        self.emit("acquired", epoch=guard.lease.epoch, owner=guard.lease.owner_instance_id, pid=guard.lease.owner_pid,
                  purpose="admission", expires_at=guard.lease.expires_at)
        if self.heartbeat_interval is not None:
            start_heartbeat(self.sd, self.owner, self.heartbeat_interval)
        run_id = new_id()
        turn_id = new_id()
        try:
            with self.sd.db.write() as conn:
                create_run(conn, NewRun(id=run_id, session_id=self.session_id, source="simulator",
                                        model="sim-model", mode="default"), guard.lease, now=now)
                guard.bind(conn, run_id, now=now)
                entry = open_turn(conn, self.session_id, turn_id, run_id=run_id, attempt=1)
                insert_run_event(conn, NewRunEvent(id=f"run_{run_id}_started", session_id=self.session_id,
                                                   run_id=run_id, event_type="run_started", source="simulator",
                                                   status="created"))
        except BaseException:
            guard.release(now=now)
            self.guard = None
            raise
        self.run_id = run_id
        self.step_no = 0
        self.turn = ConversationTurn(id=turn_id, session_id=self.session_id, intent_id="", kind="conversation",
                                     status="open", start_seq=entry.seq, end_seq=None, started_at=entry.timestamp,
                                     ended_at=None, run_id=run_id)
        self.emit("run_created", run=run_id, turn=turn_id, epoch=guard.lease.epoch)
        for status in ("queued", "running"):
            self._transition(status, now=now)
        return run_id

    def _transition(self, status: str, *, now: int | None = None, event_data: str = "{}") -> None:
        assert self.guard is not None
        with self.sd.db.write() as conn:
            fence_run(conn, self.guard.lease, self.run_id, now=now)
            transition_run(conn, self.run_id, status, self.guard.lease, now=now)
            insert_run_event(conn, NewRunEvent(id=new_id(), session_id=self.session_id, run_id=self.run_id,
                                               event_type="status", source="simulator", status=status,
                                               data=event_data))
        publish_state_changed(self.guard.lease, status)
        self.emit("status", run=self.run_id, status=status)

    def step(self, *, now: int | None = None) -> str:
        """One unit of work (see the module doc for the cycle); returns the step kind."""
        assert self.guard is not None and self.turn is not None
        kind = STEP_KINDS[self.step_no % len(STEP_KINDS)]
        lease = self.guard.lease
        new_status = ""
        with self.sd.db.write() as conn:
            fence_run(conn, lease, self.run_id, now=now)
            if kind == "user_message":
                append_entry(conn, self.session_id, "message",
                             {"message": _message("user", content=f"Step {self.step_no}: please continue.")})
            elif kind == "tool_call":
                call_id = f"call_{self.run_id}_{self.step_no}"
                args = json.dumps({"cmd": f"echo {self.step_no}"})
                block = {"type": "toolCall", "toolCall": {"id": call_id, "name": "shell", "kind": "function",
                                                          "arguments": args}}
                append_entry(conn, self.session_id, "message",
                             {"message": _message("assistant", contents=[{"type": "text", "text": "Running."}, block])})
                conn.execute(
                    "INSERT INTO tool_execution_records (session_id, local_turn_id, execution_key, provider, api, "
                    "provider_call_id, tool_kind, tool_name, args_hash, execution_state, side_effecting, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, 'function', 'shell', ?, 'running', 1, ?)",
                    (self.session_id, self.turn.id, f"{self.turn.id}:{call_id}", SIM_PROVIDER, SIM_API, call_id,
                     hashlib.sha256(args.encode()).hexdigest(), format_rfc3339()),
                )
                self.pending_call = call_id
            elif kind == "tool_result":
                call_id = self.pending_call
                append_entry(conn, self.session_id, "message",
                             {"message": _message("toolResult", toolCallId=call_id, toolName="shell",
                                                  content=f"{self.step_no - 1}\n")})
                conn.execute(
                    "UPDATE tool_execution_records SET execution_state = 'completed', completed_at = ?, "
                    "result_summary_json = ? WHERE execution_key = ?",
                    (format_rfc3339(), json.dumps({"exitCode": 0}), f"{self.turn.id}:{call_id}"),
                )
                self.pending_call = ""
            elif kind == "approval_pending":
                decision = f"approval{self.step_no}"
                insert_run_event(conn, NewRunEvent(
                    id=new_id(), session_id=self.session_id, run_id=self.run_id, event_type="approval_resolved",
                    source="simulator", status="pending", data=json.dumps({"decisionId": decision, "tool": "shell"})))
                transition_run(conn, self.run_id, "waiting_for_approval", lease, now=now)
                self.pending_decision = decision
                new_status = "waiting_for_approval"
            elif kind == "approval_granted":
                insert_run_event(conn, NewRunEvent(
                    id=new_id(), session_id=self.session_id, run_id=self.run_id, event_type="approval_resolved",
                    source="simulator", status="approved",
                    data=json.dumps({"decisionId": self.pending_decision, "value": "allow_once"})))
                transition_run(conn, self.run_id, "running", lease, now=now)
                self.pending_decision = ""
                new_status = "running"
            else:
                append_entry(conn, self.session_id, "message",
                             {"message": _message("assistant", content=f"Done with step {self.step_no}.")})
            insert_run_event(conn, NewRunEvent(id=new_id(), session_id=self.session_id, run_id=self.run_id,
                                               event_type="progress", source="simulator",
                                               data=json.dumps({"step": self.step_no, "kind": kind})))
        if new_status:
            publish_state_changed(lease, new_status)
        self.step_no += 1
        self.emit("step", run=self.run_id, n=self.step_no, kind=kind, status=new_status or None)
        return kind

    def finish(self, status: str = "completed", *, now: int | None = None) -> None:
        """Final message, terminal run + event, ``turn_end`` and closed turn in one transaction; then release."""
        assert self.guard is not None and self.turn is not None
        lease = self.guard.lease
        with self.sd.db.write() as conn:
            fence_run(conn, lease, self.run_id, now=now)
            append_entry(conn, self.session_id, "message",
                         {"message": _message("assistant", content="All steps finished.")})
            transition_run(conn, self.run_id, status, lease, now=now)
            insert_run_event(conn, NewRunEvent(id=run_event_id(self.run_id, status), session_id=self.session_id,
                                               run_id=self.run_id, event_type="run_finished", source="simulator",
                                               status=status))
            close_turn(conn, self.turn, status, run_id=self.run_id, stop_reason="stop")
        publish_state_changed(lease, status)
        self.emit("run_finished", run=self.run_id, status=status)
        self.release(now=now)

    def release(self, *, now: int | None = None) -> None:
        if self.guard is not None:
            changed = self.guard.release(now=now)
            self.emit("released", epoch=self.guard.lease.epoch, changed=changed)
        self.guard = None
        self.turn = None


# ---------------------------------------------------------------------------------------------------------------
# Command line


def _printer() -> Emit:
    lock = threading.Lock()

    def emit(event: str, **fields: object) -> None:
        obj: dict[str, object] = {"event": event, "pid": os.getpid(), "t": round(time.time(), 3)}
        obj.update({k: v for k, v in fields.items() if v is not None})
        with lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    return emit


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m store.mothx.simulator", description="Simulate a mothx runtime.")
    p.add_argument("--dir", required=True, help="session directory (holds sessions.db)")
    p.add_argument("--session", required=True, help="session id")
    p.add_argument("--runs", type=int, default=1, help="runs to admit one after another")
    p.add_argument("--steps", type=int, default=12, help="steps per run")
    p.add_argument("--append-interval", type=float, default=0.2, help="seconds between steps")
    p.add_argument("--ttl", type=int, default=LEASE_TTL_S, help="lease TTL in seconds")
    p.add_argument("--heartbeat", type=float, default=HEARTBEAT_INTERVAL_S, help="heartbeat interval in seconds")
    p.add_argument("--hang-at", type=int, default=0, help="stop working after this step of the first run (keep heartbeating)")
    p.add_argument("--create", action="store_true", help="create the session when it does not exist")
    p.add_argument("--quiet-bus", action="store_true", help="do not announce anything on the lease bus")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from store.mothx.sessiondir import open_session_dir

    args = _parse(argv)
    emit = _printer()
    if not args.quiet_bus:
        # Announce lease changes and run transitions on the lease bus, as a runtime does.
        from store.mothx.bus import install_publisher

        install_publisher().start_snapshots()
    sd = open_session_dir(args.dir, create=args.create)
    try:
        with sd.db.read() as conn:
            exists = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (args.session,)).fetchone() is not None
        if not exists:
            if not args.create:
                emit("error", message=f"Session {one_line(args.session)} does not exist.")
                return 2
            create_session(sd, args.session)
        sim = RuntimeSimulator(sd, args.session, ttl=args.ttl, heartbeat_interval=args.heartbeat, emit=emit)
        emit("started", session=args.session, owner=sim.owner.instance_id)
        for run_no in range(args.runs):
            sim.admit()
            for _ in range(args.steps):
                time.sleep(args.append_interval)
                sim.step()
                if run_no == 0 and args.hang_at and sim.step_no == args.hang_at:
                    emit("hang", run=sim.run_id, n=sim.step_no)
                    while True:  # keep the heartbeat thread alive until killed
                        if sim.guard is not None and sim.guard.lost.wait(0.2):
                            emit("lost", run=sim.run_id)
                            return 3
            sim.finish()
        emit("done", runs=args.runs)
        return 0
    except LeaseLost as exc:
        emit("lost", message=str(exc))
        return 3
    except StoreError as exc:
        emit("error", message=str(exc))
        return 2
    finally:
        sd.close()


if __name__ == "__main__":
    raise SystemExit(main())
