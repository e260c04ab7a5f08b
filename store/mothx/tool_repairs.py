"""Interrupted tool executions: list them, and the two record repairs (abandon, request recovery).

The repairs only ever change ``tool_execution_records.execution_state`` (to ``abandoned`` or
``retry_requested``) of records that are not ``completed``/``failed``/``abandoned``. ``completed_at`` is left as
it is (its encoding is not specified), no tool is run and nothing is appended to the transcript: a ``toolCall``
without a ``toolResult`` stays so, and is only reported. A damaged record (or lease row) refuses the repair.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from store.errors import RepairRefused, StoreError
from store.mothx import repair_kit as kit
from store.mothx.cells import Cells, as_text, joined
from store.mothx.execution import ExecutionFacts, read_facts_conn
from store.mothx.lease_model import LEASE_TTL_S, LeaseOwner
from store.mothx.lease_store import check_fence
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.mothx.run_model import ConversationTurn
from store.mothx.sessiondir import SessionDir
from store.mothx.turns import turns_conn
from store.safetext import one_line
from store.words import plural

TOOL_DONE_STATES = ("completed", "failed", "abandoned")


@dataclass(frozen=True)
class ToolExecution:
    """One ``tool_execution_records`` row."""

    id: int
    session_id: str
    local_turn_id: str
    execution_key: str
    provider: str
    api: str
    provider_call_id: str
    tool_kind: str
    tool_name: str
    execution_state: str
    side_effecting: bool
    created_at: str
    completed_at: str | None
    problems: tuple[str, ...] = ()  # one per damaged cell

    @property
    def damaged(self) -> str:
        return joined(self.problems)


@dataclass(frozen=True)
class DanglingToolCall:
    """A ``toolCall`` block of the turn with no ``toolResult`` answering it."""

    entry_id: str
    entry_seq: int
    call_id: str
    tool_name: str


@dataclass(frozen=True)
class InterruptedTools:
    session_id: str
    turn_id: str  # the turn the transcript was scanned in ('' = none found)
    records: tuple[ToolExecution, ...]  # interrupted records (of turn_id, or of the whole session)
    dangling_calls: tuple[DanglingToolCall, ...]


_TOOL_COLUMNS = (
    "id, session_id, local_turn_id, execution_key, provider, api, provider_call_id, tool_kind, tool_name, "
    "execution_state, side_effecting, created_at, completed_at"
)


def tool_from_row(row: Sequence[object]) -> ToolExecution:
    c = Cells("tool_execution_records", row)
    rec = ToolExecution(
        id=c.integer(0, "id"), session_id=c.text(1, "session_id"), local_turn_id=c.text(2, "local_turn_id"),
        execution_key=c.text(3, "execution_key"), provider=c.text(4, "provider"), api=c.text(5, "api"),
        provider_call_id=c.text_or_none(6, "provider_call_id") or "", tool_kind=c.text(7, "tool_kind"),
        tool_name=c.text(8, "tool_name"), execution_state=c.text(9, "execution_state"),
        side_effecting=c.boolean(10, "side_effecting"), created_at=c.loose_text(11, "created_at") or "",
        completed_at=c.loose_text(12, "completed_at", nullable=True),
    )
    return ToolExecution(**{**rec.__dict__, "problems": c.problems}) if c.problems else rec


def _interrupted_records(conn: sqlite3.Connection, session_id: str, turn_id: str | None) -> list[ToolExecution]:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='tool_execution_records'").fetchone() is None:
        return []
    where = "session_id = ? AND execution_state NOT IN (?, ?, ?)"
    args: list[object] = [session_id, *TOOL_DONE_STATES]
    if turn_id is not None:
        where += " AND local_turn_id = ?"
        args.append(turn_id)
    return [tool_from_row(r) for r in conn.execute(
        f"SELECT {_TOOL_COLUMNS} FROM tool_execution_records WHERE {where} ORDER BY id", args).fetchall()]


def _scan_turn(conn: sqlite3.Connection, session_id: str, turn_id: str | None) -> tuple[str, list[DanglingToolCall]]:
    turns = turns_conn(conn, session_id)
    turn: ConversationTurn | None = None
    if turn_id is not None:
        turn = next((t for t in turns if t.id == turn_id), None)
    else:
        open_ = [t for t in turns if t.status == "open"]
        turn = open_[-1] if open_ else (turns[-1] if turns else None)
    if turn is None:
        return (turn_id or ""), []
    sql = "SELECT seq, id, data FROM entries WHERE session_id = ? AND type = 'message' AND seq >= ?"
    args: list[object] = [session_id, turn.start_seq]
    if turn.end_seq is not None:
        sql += " AND seq <= ?"
        args.append(turn.end_seq)
    calls: dict[str, DanglingToolCall] = {}
    for seq, eid, data in conn.execute(sql + " ORDER BY seq", args):
        try:
            msg = json.loads(data).get("message")
        except (ValueError, TypeError, AttributeError, RecursionError):
            continue
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "toolResult" and isinstance(msg.get("toolCallId"), str):
            calls.pop(msg["toolCallId"], None)
            continue
        blocks = msg.get("contents")
        if not isinstance(blocks, list):
            continue
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("toolCall"), dict):
                call = block["toolCall"]
                if isinstance(call.get("id"), str) and call["id"]:
                    calls[call["id"]] = DanglingToolCall(as_text(eid), seq if isinstance(seq, int) else 0, call["id"],
                                                         as_text(call.get("name") or ""))
    return turn.id, list(calls.values())


def list_interrupted_tools(sd: SessionDir, session_id: str, turn_id: str | None = None) -> InterruptedTools:
    """Interrupted tool execution records (not completed/failed/abandoned) and unanswered ``toolCall`` blocks.

    With ``turn_id`` both are read for that turn; without it the records of the whole session are listed and
    the transcript of the open turn (else the last turn) is scanned.
    """
    with sd.db.read() as conn:
        records = _interrupted_records(conn, session_id, turn_id)
        scanned, dangling = _scan_turn(conn, session_id, turn_id)
    return InterruptedTools(session_id, scanned, tuple(records), tuple(dangling))


class _ToolRecordRepair(kit.SessionRepair):
    """Shared preview/apply of the two record repairs: set ``execution_state`` of chosen interrupted records."""

    new_state = ""

    def __init__(self, sd: SessionDir, session_id: str, turn_id: str, call_ids: Sequence[str] | None = None, *,
                 owner: LeaseOwner | None = None, ttl: int = LEASE_TTL_S) -> None:
        super().__init__(sd, session_id, owner=owner, ttl=ttl)
        self.turn_id = turn_id
        self.call_ids = tuple(call_ids) if call_ids else ()

    def _select(self, records: list[ToolExecution]) -> list[ToolExecution]:
        chosen = [r for r in records if r.execution_state != self.new_state]
        if self.call_ids:
            chosen = [r for r in chosen if r.provider_call_id in self.call_ids]
        return chosen

    def _read(self) -> tuple[ExecutionFacts, list[ToolExecution], list[DanglingToolCall]]:
        with self.sd.db.read() as conn:
            facts = read_facts_conn(conn, self.session_id)
            records = self._select(_interrupted_records(conn, self.session_id, self.turn_id))
            _, dangling = _scan_turn(conn, self.session_id, self.turn_id)
        return facts, records, dangling

    def _refusal(self, facts: ExecutionFacts, records: list[ToolExecution]) -> str:
        sid = one_line(self.session_id)
        if not facts.session_exists:
            return f"session {sid} does not exist."
        foreign = kit.refuse_foreign(self.session_id, facts.lease)
        if foreign:
            return foreign
        if facts.active_runs:
            run = facts.active_runs[0]
            rid = one_line(run.id)
            return f"session {sid} has an active run {rid} ({one_line(run.status)}); recover it first (recover-run {rid})."
        damage = kit.damage_refusal(f"turn {one_line(self.turn_id)} of session {sid}",
                                [p for r in records for p in r.problems])
        if damage:
            return damage
        if not records:
            which = f" among {one_line(', '.join(self.call_ids))}" if self.call_ids else ""
            return (f"turn {one_line(self.turn_id)} of session {sid} has no interrupted tool execution "
                    f"record{which} to change.")
        return ""

    @staticmethod
    def _facts(facts: ExecutionFacts, records: list[ToolExecution]) -> object:
        return [kit.lease_fact(facts.lease), [r.id for r in facts.active_runs], [[r.id, r.execution_state] for r in records]]

    def preview(self) -> RepairPreview:
        facts, records, dangling = self._read()
        refusal = self._refusal(facts, records)
        changes: list[PlannedChange] = []
        notes: list[str] = []
        if not refusal:
            planned = kit.lease_changes(self.session_id, facts.lease, "mutation")
            changes.append(planned[0])
            for r in records:
                side = "side-effecting" if r.side_effecting else "read-only"
                changes.append(PlannedChange(
                    "row", "tool_execution_records", str(r.id), "update",
                    f"{one_line(r.tool_name)} call {one_line(r.provider_call_id)} ({side}): execution_state "
                    f"{one_line(r.execution_state)} → {self.new_state}"))
            changes.append(planned[1])
        found = {r.provider_call_id for r in records}
        for call_id in self.call_ids:
            if call_id not in found:
                notes.append(f"call {one_line(call_id)} has no interrupted record in turn {one_line(self.turn_id)}: "
                             "not changed.")
        for call in dangling:
            if call.call_id not in found:
                notes.append(f"toolCall {one_line(call.call_id)} ({one_line(call.tool_name)}) has no toolResult and no record to change: "
                             "nothing is written for it.")
        notes.append("no tool is run and no tool output is written to the transcript.")
        fp = fingerprint(self._facts(facts, records))
        preview = RepairPreview(self.id, self.title, self.session_id,
                                f"turn {one_line(self.turn_id)} of session {one_line(self.session_id)}", tuple(changes),
                                tuple(notes),
                                refusal, fp, fp)
        self._last = preview
        return preview

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        expected = self.expected_preview(expected)
        step("tools.check")
        facts, records, _ = self._read()
        kit.refuse_if_moved(self._refusal(facts, records), expected, fingerprint(self._facts(facts, records)),
                            f"the tool records of turn {one_line(self.turn_id)}")
        old_epoch = facts.lease.epoch if facts.lease is not None else 0
        step("tools.acquire")
        guard = self.acquire_lease(self.session_id, "mutation", f"turn {one_line(self.turn_id)}",
                                   expected_epoch=old_epoch)
        done: list[PlannedChange] = []
        try:
            step("tools.write")
            with self.sd.db.write() as conn:
                check_fence(conn, guard.lease, purpose="mutation")
                again = self._select(_interrupted_records(conn, self.session_id, self.turn_id))
                if [[r.id, r.execution_state] for r in again] != [[r.id, r.execution_state] for r in records]:
                    raise RepairRefused(f"Refused: the tool records of turn {one_line(self.turn_id)} changed since "
                                        "the preview; preview it again.")
                for r in records:
                    cur = conn.execute(
                        "UPDATE tool_execution_records SET execution_state = ? WHERE id = ? AND execution_state = ?",
                        (self.new_state, r.id, r.execution_state),
                    )
                    if cur.rowcount != 1:
                        raise RepairRefused(f"Refused: tool record {r.id} changed while it was being updated.")
                    done.append(PlannedChange("row", "tool_execution_records", str(r.id), "update",
                                              f"{one_line(r.execution_state)} → {self.new_state}"))
                    step("tools.row")
                step("tools.commit")
        finally:
            step("tools.release")
            guard.release()
        return RepairResult(self.id, self.session_id,
                            f"turn {one_line(self.turn_id)} of session {one_line(self.session_id)}",
                            tuple(done), f"{plural(len(done), 'tool execution record')} of turn {one_line(self.turn_id)} marked "
                            f"{self.new_state}.", guard.lease.epoch)


class AbandonToolExecutions(_ToolRecordRepair):
    """Mark interrupted records ``abandoned`` (all of the turn, or the chosen calls)."""

    id = "abandon-tools"
    title = "Abandon interrupted tool executions"
    new_state = "abandoned"


class RequestToolRecovery(_ToolRecordRepair):
    """Mark chosen interrupted records ``retry_requested`` (the user's explicit confirmation; nothing runs)."""

    id = "request-tool-recovery"
    title = "Request recovery of interrupted tool calls"
    new_state = "retry_requested"

    def __init__(self, sd: SessionDir, session_id: str, turn_id: str, call_ids: Sequence[str] | None = None,
                 **kw: object) -> None:
        if not call_ids:
            raise StoreError("Requesting tool recovery needs the ids of the chosen calls.")
        super().__init__(sd, session_id, turn_id, call_ids, **kw)  # type: ignore[arg-type]
