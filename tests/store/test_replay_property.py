"""Property: replay() equals a literal reading of reference 7.4/7.5, and keyset pages put together equal replay().

Random sessions mix messages (some with odd shapes, some without a JSON id or type), content overrides (of
earlier, later, missing and compaction ids), compactions (firstKeptEntryId: an earlier message, a missing id,
"", null, absent, a compaction's id, a later message, a number), junk rows, label/custom rows, turn markers
and rows of another session interleaved. Rows whose JSON id/type disagree with the row's columns appear in a
fifth of the examples (the plan then falls back to a full replay, which pages must match too).
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from store.mothx.db import OpenMode
from store.mothx.entries import (
    END_SEQ,
    ReplayMessage,
    ReplayPlan,
    load_rows,
    replay,
    replay_details,
    replay_page,
    replay_plan,
)
from store.mothx.sessiondir import SessionDir, open_session_dir

SID = "feedfacefeedface"
OTHER = "0000111122223333"
NOT_LOADED = ("label", "custom", "custom_message")


# ------------------------------------------------------------------------------------------ the reference, literally


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class Ref:
    plain_id: str  # the plain replay state's entry id ("" for a summary)
    entry_id: str  # the sequence-numbered variant's id (the compaction's id for a summary)
    seq: int
    kind: str
    message: object
    overridden: bool


def _without_usage(m: Ref) -> Ref:
    if isinstance(m.message, dict) and "usage" in m.message:
        return Ref(m.plain_id, m.entry_id, m.seq, m.kind, {k: v for k, v in m.message.items() if k != "usage"},
                   m.overridden)
    return m


def reference_load(rows: list[tuple[int, str, str, str]]) -> tuple[list[tuple[int, str, str, dict[str, Any]]], int]:
    """7.4: read ORDER BY seq; skip (and count) rows whose data is not a JSON object; drop label/custom rows.
    An entry's id/type are its JSON id/type when strings, else the row's columns."""
    loaded: list[tuple[int, str, str, dict[str, Any]]] = []
    corrupt = 0
    for seq, col_id, col_type, data in sorted(rows):
        try:
            obj = json.loads(data, parse_constant=_no_constants)
        except ValueError:
            corrupt += 1
            continue
        if not isinstance(obj, dict):
            corrupt += 1
            continue
        etype = obj["type"] if isinstance(obj.get("type"), str) else col_type
        eid = obj["id"] if isinstance(obj.get("id"), str) else col_id
        if etype in NOT_LOADED:
            continue
        loaded.append((seq, eid, etype, obj))
    return loaded, corrupt


def reference_replay(rows: list[tuple[int, str, str, str]]) -> list[Ref]:
    """7.5, step by step."""
    loaded, _ = reference_load(rows)
    # 1. Collect content overrides first: targetEntryId -> message, a later override of the same target wins.
    overrides: dict[str, object] = {}
    for _seq, _eid, etype, obj in loaded:
        if etype == "content_override" and isinstance(obj.get("targetEntryId"), str) and isinstance(obj.get("message"), dict):
            overrides[obj["targetEntryId"]] = obj["message"]
    # 2. Walk in seq order with a message list and a parallel entry-id list.
    messages: list[Ref] = []
    for seq, eid, etype, obj in loaded:
        if etype == "message":
            if eid in overrides:
                messages.append(Ref(eid, eid, seq, "message", overrides[eid], True))
            else:
                m = obj.get("message")
                messages.append(Ref(eid, eid, seq, "message", m if isinstance(m, dict) else None, False))
        elif etype == "compaction":
            text = obj.get("summary") if isinstance(obj.get("summary"), str) else ""
            summary = Ref("", eid, seq, "compaction_summary", {"role": "user", "content": text, "systemInjected": True},
                          False)
            first_kept = obj.get("firstKeptEntryId")
            if first_kept is None or first_kept == "":
                messages = [summary]
                continue
            ids = [m.plain_id for m in messages]
            if first_kept not in ids:
                continue  # not found: the compaction is skipped
            i = ids.index(first_kept)
            messages = [summary] + [_without_usage(m) for m in messages[i:]]
        # every other type is ignored
    return messages


# ------------------------------------------------------------------------------------------ random sessions

MSG_VARIANTS = ["plain"] * 5 + ["usage"] * 3 + ["no_json_id", "no_json_type", "odd_message", "no_message", "blocks",
                                                  "mismatch_id", "mismatch_type"]
JUNK = ["{", '{"type": "message", "id": "x", "message": {"role"', "[1, 2]", "42", '"text"', "", "null",
        '{"type": "message", "message": {"content": NaN}}', '{"type": "message"}\x00trailing', "  ", "{}}"]
OTHER_TYPES = ["label", "custom", "custom_message", "turn_start", "turn_end", "session_info", "model_change",
               "branch_summary", "session", "thinking_level_change"]
FIRST_KEPT = ["earlier"] * 4 + ["empty", "compaction"] * 2 + ["missing", "absent", "null", "later", "number"]
TARGETS = ["earlier"] * 3 + ["later", "later", "missing", "compaction"]

op_strategy = st.one_of(
    st.tuples(st.just("msg"), st.sampled_from(["user", "assistant", "toolResult"]), st.sampled_from(MSG_VARIANTS),
              st.integers(0, 99)),
    st.tuples(st.just("override"), st.sampled_from(TARGETS), st.sampled_from(["dict", "dict", "dict", "string"]),
              st.integers(0, 99)),
    st.tuples(st.just("compaction"), st.sampled_from(FIRST_KEPT), st.booleans(), st.integers(0, 99)),
    st.tuples(st.just("junk"), st.sampled_from(JUNK), st.sampled_from(["message", "compaction", "content_override",
                                                                      "label", "turn_end"]), st.integers(0, 99)),
    st.tuples(st.just("other"), st.sampled_from(OTHER_TYPES), st.booleans(), st.integers(0, 99)),
)


@dataclass
class Built:
    rows: list[tuple[str, str, str, str]]  # (session_id, id column, type column, data)


def materialise(ops: list[tuple[str, str, Any, int]], allow_mismatch: bool, interleave: list[bool]) -> Built:
    ids = [f"{i + 1:016x}" for i in range(len(ops))]
    message_ids = [ids[i] for i, op in enumerate(ops) if op[0] == "msg"]
    compaction_ids = [ids[i] for i, op in enumerate(ops) if op[0] == "compaction"]
    rows: list[tuple[str, str, str, str]] = []
    other_n = itertools.count(1)
    for i, (kind, a, b, k) in enumerate(ops):
        eid = ids[i]
        earlier = [x for x in message_ids if x < eid]
        later = [x for x in message_ids if x > eid]
        earlier_compactions = [x for x in compaction_ids if x < eid]

        def pick(choice: str, earlier: list[str] = earlier, later: list[str] = later,
                 earlier_compactions: list[str] = earlier_compactions, k: int = k) -> str:
            pool = {"earlier": earlier, "later": later, "compaction": compaction_ids,
                    "earlier_compaction": earlier_compactions}.get(choice, [])
            return pool[k % len(pool)] if pool else "ffffffffffffffff"

        if interleave[i % len(interleave)]:
            n = next(other_n)
            rows.append((OTHER, f"o{n:015x}", "message",
                         json.dumps({"type": "message", "id": f"o{n:015x}", "message": {"role": "user", "content": "o"}})))
        body: dict[str, Any] = {"type": kind if kind in ("compaction",) else "message", "id": eid, "parentId": None,
                                "timestamp": "2026-11-20T12:00:00Z"}
        col_id, col_type = eid, body["type"]
        if kind == "msg":
            variant = a if allow_mismatch or not a.startswith("mismatch") else "plain"
            message: object = {"role": a if variant != "odd_message" else 3, "content": f"text {eid}"}
            if variant == "usage" and isinstance(message, dict):
                message["usage"] = {"input": k, "output": 1, "totalTokens": k + 1}
            if variant == "blocks":
                message = {"role": "assistant", "contents": [
                    {"type": "thinking", "thinking": "hm"}, {"type": "text", "text": f"t {eid}"},
                    {"type": "toolCall", "toolCall": {"id": f"c{k}", "name": "bash", "arguments": {"k": k}}},
                    {"type": "mystery"}], "usage": {"totalTokens": k}}
            if variant == "odd_message":
                message = [f"text {eid}"] if k % 2 else f"text {eid}"
            body["message"] = message
            if variant == "no_message":
                del body["message"]
            if variant == "no_json_id":
                del body["id"]
            if variant == "no_json_type":
                del body["type"]
            if variant == "mismatch_id":
                body["id"] = eid + "j"
            if variant == "mismatch_type":
                body["type"] = "label" if k % 2 else "compaction"
        elif kind == "override":
            body["type"] = col_type = "content_override"
            body["targetEntryId"] = pick(a)
            body["message"] = {"role": "user", "content": f"override {eid}", "usage": {"totalTokens": 7}} \
                if b == "dict" else "not an object"
            if k % 3:
                body["reason"] = f"reason {k}"
        elif kind == "compaction":
            body["summary"] = f"summary {eid}"
            body["summaryVersion"] = k
            if b:
                body["tokensBefore"] = k * 100
            fk: object = {"earlier": pick("earlier"), "missing": "ffffffffffffffff", "empty": "", "null": None,
                          "compaction": pick("earlier_compaction"), "later": pick("later"), "number": k}.get(a)
            if a != "absent":
                body["firstKeptEntryId"] = fk
        elif kind == "junk":
            rows.append((SID, eid, b, a))
            continue
        else:
            body["type"] = col_type = a
            body.update({"turnId": f"t{k}", "targetId": pick("earlier"), "label": "x", "name": f"title {k}",
                         "summary": "branch", "firstKeptEntryId": ""})
            if b:
                body["message"] = {"role": "user", "content": f"not replayed {eid}"}
        rows.append((SID, col_id, col_type, json.dumps(body)))
    return Built(rows)


def write_db(root: Path, built: Built) -> list[tuple[int, str, str, str]]:
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd, sd.db.write() as conn:
        conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, '/w', '2026-11-20T12:00:00Z')", (SID,))
        out = []
        for session_id, col_id, col_type, data in built.rows:
            cur = conn.execute(
                "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, NULL, ?, ?)",
                (session_id, col_id, col_type, "2026-11-20T12:00:00Z", data))
            if session_id == SID:
                out.append((int(cur.lastrowid or 0), col_id, col_type, data))
        return out


# ------------------------------------------------------------------------------------------ paging drivers


def forward(sd: SessionDir, plan: ReplayPlan, limits: list[int]) -> list[ReplayMessage]:
    out: list[ReplayMessage] = []
    after: int | None = None
    for limit in itertools.cycle(limits):
        page = replay_page(sd, plan, after_seq=after, limit=limit)
        out += page
        msgs = [m for m in page if m.kind == "message"]
        assert len(msgs) <= limit
        if not msgs:
            return out
        after = msgs[-1].seq
    raise AssertionError("unreachable")


def backward(sd: SessionDir, plan: ReplayPlan, limits: list[int]) -> list[ReplayMessage]:
    pages: list[list[ReplayMessage]] = []
    before = END_SEQ
    for limit in itertools.cycle(limits):
        page = replay_page(sd, plan, before_seq=before, limit=limit)
        pages.append(page)
        msgs = [m for m in page if m.kind == "message"]
        assert len(msgs) <= limit
        if not msgs or any(m.kind == "compaction_summary" for m in page):
            break
        before = msgs[0].seq
    return [m for page in reversed(pages) for m in page]


def as_refs(items: list[ReplayMessage]) -> list[tuple[int, str, str, object, bool]]:
    return [(m.seq, m.entry_id, m.kind, m.message.raw, m.overridden) for m in items]


# ------------------------------------------------------------------------------------------ the property


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    ops=st.lists(op_strategy, min_size=4, max_size=40),
    allow_mismatch=st.sampled_from([False, False, False, False, True]),
    interleave=st.lists(st.booleans(), min_size=1, max_size=5),
    limits=st.lists(st.integers(1, 6), min_size=1, max_size=4),
)
def test_replay_matches_reference_and_pages_match_replay(ops: list[tuple[str, str, Any, int]], allow_mismatch: bool,
                                                         interleave: list[bool], limits: list[int]) -> None:
    built = materialise(ops, allow_mismatch, interleave)
    root = Path(tempfile.mkdtemp(prefix="replay-prop-"))
    try:
        rows = write_db(root, built)
        with open_session_dir(root, OpenMode.READ_ONLY) as sd:
            full = replay(sd, SID)
            expected = reference_replay(rows)
            assert as_refs(full) == [(r.seq, r.entry_id, r.kind, r.message, r.overridden) for r in expected]
            for m in full:
                if m.message.raw is None or "usage" not in m.message.raw:
                    assert m.message.usage_total is None
                if m.overridden:
                    assert m.original is not None and m.kind == "message"

            loaded, corrupt = reference_load(rows)
            mismatched = any(
                isinstance(obj.get(key), str) and obj[key] != col
                for _, col_id, col_type, data in rows
                if (obj := _try_object(data)) is not None
                for key, col in (("id", col_id), ("type", col_type))
            )
            details = replay_details(load_rows(sd, SID))

            # the verified plan: exact counts; a full-replay fallback when columns disagree with the JSON
            plan = replay_plan(sd, SID, verify=True)
            assert plan.counts_verified and plan.keyset is not mismatched
            assert forward(sd, plan, limits) == full
            assert backward(sd, plan, limits) == full
            assert plan.summary == (full[0] if full and full[0].kind == "compaction_summary" else None)
            assert plan.message_rows == sum(1 for m in full if m.kind == "message")
            assert {m.seq for m in full if m.kind == "message"} == {
                seq for seq, _eid, etype, _obj in loaded if etype == "message" and seq >= plan.window_start_seq}
            assert (plan.corrupt_rows, plan.total_rows) == (corrupt, len(rows))
            assert plan.compactions == tuple(details.compactions)
            assert plan.overrides == details.overrides
            applied = [c for c in plan.compactions if c.applied]
            assert (plan.summary is None) == (not applied)
            if applied:
                assert plan.summary is not None and plan.summary.entry_id == applied[-1].entry_id

            # the fast plan reads no message data; with columns that copy the JSON (the reference's rule)
            # its decisions and pages are the same, and its counts include the window's junk message rows
            fast = replay_plan(sd, SID)
            assert not fast.counts_verified and fast.total_rows == len(rows)
            if not mismatched:
                assert (fast.window_start_seq, fast.summary, fast.overrides, fast.usage_cleared_before_seq) == (
                    plan.window_start_seq, plan.summary, plan.overrides, plan.usage_cleared_before_seq)
                assert [(c.seq, c.applied) for c in fast.compactions] == [(c.seq, c.applied) for c in plan.compactions]
                junk_in_window = sum(1 for seq, _i, col_type, data in rows
                                     if col_type == "message" and _try_object(data) is None
                                     and seq >= plan.window_start_seq)
                assert fast.message_rows == plan.message_rows + junk_in_window
                assert fast.corrupt_rows <= plan.corrupt_rows
                assert forward(sd, fast, limits) == full
                assert backward(sd, fast, limits) == full

            event("keyset plan" if plan.keyset else "fallback plan")
            event(f"compactions applied/skipped: {min(len(applied), 2)}/{min(len(plan.compactions) - len(applied), 2)}")
            event(f"overridden messages: {min(sum(m.overridden for m in full), 2)}")
            event(f"corrupt rows: {min(plan.corrupt_rows, 2)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _try_object(data: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(data, parse_constant=_no_constants)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
