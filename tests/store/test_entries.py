"""store.mothx.entries: message parsing, replay rules of reference 7.4/7.5, keyset pages, raw pages, exports."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import SessionNotFound
from store.mothx.db import OpenMode
from store.mothx.entries import (
    END_SEQ,
    Block,
    Message,
    ReplayMessage,
    ToolCall,
    describe_row,
    export_json,
    export_markdown,
    load_rows,
    parse_entry_data,
    replay,
    replay_details,
    replay_page,
    replay_plan,
    row_count,
    rows_page,
    turn_markers,
)
from store.mothx.sessiondir import SessionDir, open_session_dir

SID = "5e55105e55105e55"
_IDS = itertools.count(1)
OTHER = "0123456789abcdef"


class Log:
    """Appends entry rows in the reference JSON format with plain SQL (one helper per test file)."""

    def __init__(self, sd: SessionDir, session_id: str = SID) -> None:
        self.sd = sd
        self.session_id = session_id
        self.n = 0
        with sd.db.write() as conn:
            conn.execute("INSERT OR IGNORE INTO sessions (id, cwd, timestamp) VALUES (?, '/w', '2026-01-01T00:00:00Z')",
                         (session_id,))

    def raw(self, entry_id: str, type_: str, data: str, session_id: str | None = None) -> int:
        self.n += 1
        with self.sd.db.write() as conn:
            cur = conn.execute(
                "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, ?, NULL, ?, ?)",
                (session_id or self.session_id, entry_id, type_, f"2026-01-01T00:00:{self.n % 60:02d}Z", data),
            )
            return int(cur.lastrowid or 0)

    def entry(self, type_: str, entry_id: str | None = None, **fields: Any) -> str:
        self.n += 1
        eid = entry_id or f"{type_[:4]}{next(_IDS):012x}"
        body = {"type": type_, "id": eid, "parentId": None, "timestamp": "2026-01-01T00:00:00Z", **fields}
        self.raw(eid, type_, json.dumps(body))
        return eid

    def msg(self, role: str = "user", text: str = "", entry_id: str | None = None, **fields: Any) -> str:
        return self.entry("message", entry_id, message={"role": role, "content": text, **fields})

    def seq_of(self, entry_id: str) -> int:
        with self.sd.db.read() as conn:
            return int(conn.execute("SELECT seq FROM entries WHERE id = ?", (entry_id,)).fetchone()[0])


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path, OpenMode.READ_WRITE, create=True)
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def log(sd: SessionDir) -> Log:
    return Log(sd)


def texts(items: list[ReplayMessage]) -> list[str]:
    return [m.message.text for m in items]


def all_pages_forward(sd: SessionDir, limit: int, *, verify: bool = False) -> list[ReplayMessage]:
    plan = replay_plan(sd, SID, verify=verify)
    out: list[ReplayMessage] = []
    after: int | None = None
    while True:
        page = replay_page(sd, plan, after_seq=after, limit=limit)
        out += page
        msgs = [m for m in page if m.kind == "message"]
        if not msgs:
            return out
        after = msgs[-1].seq


def all_pages_backward(sd: SessionDir, limit: int, *, verify: bool = False) -> list[ReplayMessage]:
    plan = replay_plan(sd, SID, verify=verify)
    pages: list[list[ReplayMessage]] = []
    before = END_SEQ
    while True:
        page = replay_page(sd, plan, before_seq=before, limit=limit)
        pages.append(page)
        msgs = [m for m in page if m.kind == "message"]
        if not msgs or any(m.kind == "compaction_summary" for m in page):
            break
        before = msgs[0].seq
    return [m for page in reversed(pages) for m in page]


# ------------------------------------------------------------------------------------------ message format


def test_message_joins_content_and_text_blocks() -> None:
    m = Message.from_json({
        "role": "toolResult", "content": "first", "toolCallId": "c1", "toolName": "bash", "toolKind": "function",
        "isError": True, "systemInjected": False,
        "contents": [{"type": "text", "text": "second"}, {"type": "thinking", "thinking": "pondering"},
                     {"type": "text", "text": "third", "cache_control": {"type": "ephemeral"}}],
    })
    assert m.role == "toolResult"
    assert m.text == "first\nsecond\nthird"
    assert [b.type for b in m.blocks] == ["text", "text", "thinking", "text"]
    assert m.thinking == "pondering"
    assert (m.tool_call_id, m.tool_name, m.tool_kind, m.is_error, m.system_injected) == ("c1", "bash", "function", True, False)


def test_tool_call_arguments_are_json_text() -> None:
    m = Message.from_json({"role": "assistant", "contents": [
        {"type": "toolCall", "toolCall": {"id": "c1", "name": "bash", "kind": "function", "arguments": {"cmd": "ls -la"}}},
        {"type": "toolCall", "toolCall": {"id": "c2", "name": "patch", "kind": "custom", "input": "*** Begin Patch"}},
        {"type": "toolCall", "toolCall": {"id": "c3", "name": "edit", "arguments": "{\"a\": 1}"}},
        {"type": "toolCall", "toolCall": {"id": "c4", "name": "noargs"}},
    ]})
    assert m.tool_calls == (
        ToolCall("c1", "bash", "function", '{"cmd":"ls -la"}'),
        ToolCall("c2", "patch", "custom", "*** Begin Patch"),
        ToolCall("c3", "edit", "", '{"a": 1}'),
        ToolCall("c4", "noargs", "", ""),
    )
    assert m.blocks[0] == Block("toolCall", "bash", m.tool_calls[0])
    assert m.text == ""


def test_image_file_and_unknown_blocks_become_one_line_descriptions() -> None:
    m = Message.from_json({"role": "user", "contents": [
        {"type": "image", "image": {"data": "A" * 4000, "mimeType": "image/png", "width": 800, "height": 600}},
        {"type": "file", "file": {"filename": "report.pdf", "mimeType": "application/pdf", "size": 2048}},
        {"type": "hologram", "depth": 3},
        "not a block",
        {"no": "type"},
    ]})
    assert [b.type for b in m.blocks] == ["image", "file", "hologram", "unknown", "unknown"]
    assert m.blocks[0].text == "image image/png 800×600 2.9 KB"
    assert m.blocks[1].text == "file report.pdf (application/pdf, 2.0 KB)"
    assert "hologram" in m.blocks[2].text and "depth" in m.blocks[2].text
    assert "\n" not in "".join(b.text for b in m.blocks)


@pytest.mark.parametrize("obj", [None, "text", 5, [1, 2], {"role": 7, "content": {"x": 1}, "contents": "zzz"},
                                 {"contents": [None, 3, []]}, {"usage": "lots"}])
def test_odd_message_shapes_never_raise(obj: object) -> None:
    m = Message.from_json(obj)
    assert isinstance(m.text, str) and isinstance(m.role, str)
    assert m.raw is (obj if isinstance(obj, dict) else None)


def test_usage_total() -> None:
    assert Message.from_json({"usage": {"totalTokens": 42, "input": 1}}).usage_total == 42
    assert Message.from_json({"usage": {"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 1}}).usage_total == 18
    assert Message.from_json({"usage": {"cost": {"total": 0.1}}}).usage_total is None
    assert Message.from_json({"role": "user"}).usage_total is None


def test_flags_only_when_true() -> None:
    m = Message.from_json({"isError": "yes", "systemInjected": 1})
    assert (m.is_error, m.system_injected) == (False, False)


def test_parse_errors_are_one_line() -> None:
    assert parse_entry_data('{"type": "message", "id": "a"') == (None, "invalid JSON at char 29")
    assert parse_entry_data("[1, 2]") == (None, "not a JSON object")
    assert parse_entry_data("") == (None, "invalid JSON at char 0")
    assert parse_entry_data('{"a": NaN}')[0] is None
    assert parse_entry_data(None) == (None, "no data")
    assert parse_entry_data('{"a": 1}') == ({"a": 1}, None)


# ------------------------------------------------------------------------------------------ replay rules


def test_plain_messages_in_seq_order_and_other_sessions_ignored(sd: SessionDir, log: Log) -> None:
    other = Log(sd, OTHER)
    log.msg("user", "one")
    other.msg("user", "elsewhere")
    log.msg("assistant", "two")
    result = replay(sd, SID)
    assert texts(result) == ["one", "two"]
    assert [m.kind for m in result] == ["message", "message"]
    assert result[0].seq < result[1].seq


def test_override_latest_wins_and_keeps_original(sd: SessionDir, log: Log) -> None:
    target = log.msg("assistant", "original")
    log.entry("content_override", targetEntryId=target, message={"role": "assistant", "content": "first"}, reason="r1")
    log.entry("content_override", targetEntryId=target, message={"role": "assistant", "content": "second"}, reason="r2")
    (m,) = replay(sd, SID)
    assert m.message.text == "second" and m.overridden and m.override_reason == "r2"
    assert m.original is not None and m.original.text == "original"
    assert m.entry_id == target


def test_override_of_a_later_message_applies(sd: SessionDir, log: Log) -> None:
    log.entry("content_override", targetEntryId="later0000000000", message={"role": "user", "content": "replaced"},
              code="provider_refused")
    log.msg("user", "secret", entry_id="later0000000000")
    (m,) = replay(sd, SID)
    assert m.message.text == "replaced" and m.override_reason == "provider_refused"


def test_override_without_message_object_or_of_missing_target_changes_nothing(sd: SessionDir, log: Log) -> None:
    target = log.msg("user", "kept")
    log.entry("content_override", targetEntryId=target, message="not an object")
    log.entry("content_override", targetEntryId="nowhere", message={"role": "user", "content": "x"})
    (m,) = replay(sd, SID)
    assert m.message.text == "kept" and not m.overridden


@pytest.mark.parametrize("first_kept", ["", None, "absent"])
def test_compaction_without_first_kept_keeps_only_the_summary(sd: SessionDir, log: Log, first_kept: str | None) -> None:
    log.msg("user", "a")
    log.msg("assistant", "b")
    fields: dict[str, Any] = {"summary": "S"}
    if first_kept != "absent":
        fields["firstKeptEntryId"] = first_kept
    cid = log.entry("compaction", **fields)
    log.msg("user", "c")
    d = replay_details(load_rows(sd, SID))
    assert texts(d.messages) == ["S", "c"]
    summary = d.messages[0]
    assert summary.kind == "compaction_summary" and summary.entry_id == cid and summary.seq == log.seq_of(cid)
    assert summary.message.role == "user" and summary.message.system_injected
    assert d.compactions[0].applied and d.compactions[0].summarized_count == 2


def test_compaction_not_found_is_skipped(sd: SessionDir, log: Log) -> None:
    log.msg("user", "a", usage={"totalTokens": 3})
    log.entry("compaction", summary="S", firstKeptEntryId="missing00000000")
    d = replay_details(load_rows(sd, SID))
    assert texts(d.messages) == ["a"]
    assert d.messages[0].message.usage_total == 3
    assert not d.compactions[0].applied and d.summary is None


def test_compaction_found_keeps_tail_and_clears_usage(sd: SessionDir, log: Log) -> None:
    log.msg("user", "a", usage={"totalTokens": 1})
    keep = log.msg("assistant", "b", usage={"totalTokens": 2})
    log.msg("user", "c", usage={"totalTokens": 3})
    cid = log.entry("compaction", summary="S", firstKeptEntryId=keep, tokensBefore=1234, summaryVersion=1)
    log.msg("assistant", "d", usage={"totalTokens": 4})
    d = replay_details(load_rows(sd, SID))
    assert texts(d.messages) == ["S", "b", "c", "d"]
    assert [m.message.usage_total for m in d.messages] == [None, None, None, 4]
    assert "usage" not in (d.messages[1].message.raw or {})
    info = d.compactions[0]
    assert (info.entry_id, info.applied, info.summarized_count, info.tokens_before, info.summary_version) == (
        cid, True, 1, 1234, 1)
    assert d.window_start_seq == log.seq_of(keep)


def test_chained_compactions(sd: SessionDir, log: Log) -> None:
    a = log.msg("user", "a")
    b = log.msg("assistant", "b")
    c1 = log.entry("compaction", summary="S1", firstKeptEntryId=b, summaryVersion=1)
    c = log.msg("user", "c")
    log.entry("compaction", summary="S2", firstKeptEntryId=a, summaryVersion=2, previousCompactionId=c1)  # gone
    log.entry("compaction", summary="S3", firstKeptEntryId=c1, summaryVersion=2)  # a summary's plain id is ""
    log.entry("compaction", summary="S4", firstKeptEntryId=c, summaryVersion=2, previousCompactionId=c1)
    log.msg("assistant", "d")
    d = replay_details(load_rows(sd, SID))
    assert texts(d.messages) == ["S4", "c", "d"]
    assert [(x.summary, x.applied, x.summarized_count) for x in d.compactions] == [
        ("S1", True, 1), ("S2", False, 0), ("S3", False, 0), ("S4", True, 2)]


def test_compaction_naming_an_earlier_compaction_is_skipped(sd: SessionDir, log: Log) -> None:
    log.msg("user", "a")
    c1 = log.entry("compaction", summary="S1", firstKeptEntryId="")
    b = log.msg("user", "b")
    c2 = log.entry("compaction", summary="S2", firstKeptEntryId=b)
    log.entry("compaction", summary="S3", firstKeptEntryId=c1)  # the plain state knows summaries as ""
    log.entry("compaction", summary="S4", firstKeptEntryId=c2)
    d = replay_details(load_rows(sd, SID))
    assert texts(d.messages) == ["S2", "b"]
    assert [x.applied for x in d.compactions] == [True, True, False, False]
    assert replay_plan(sd, SID).compactions == tuple(d.compactions)


def test_override_applies_inside_kept_window_and_loses_usage(sd: SessionDir, log: Log) -> None:
    keep = log.msg("user", "a", usage={"totalTokens": 1})
    log.entry("content_override", targetEntryId=keep,
              message={"role": "user", "content": "A", "usage": {"totalTokens": 9}})
    log.entry("compaction", summary="S", firstKeptEntryId=keep)
    result = replay(sd, SID)
    assert texts(result) == ["S", "A"]
    assert result[1].overridden and result[1].message.usage_total is None


def test_junk_rows_skipped_and_counted(sd: SessionDir, log: Log) -> None:
    log.msg("user", "a")
    log.raw("junk000000000001", "message", '{"type": "message", "id": "junk000000000001", "mess')
    log.raw("junk000000000002", "compaction", "[1, 2, 3]")
    log.raw("junk000000000003", "message", '{"type": "message", "message": {"content": NaN}}')
    log.msg("user", "b")
    rows = load_rows(sd, SID)
    assert [r.parse_error for r in rows] == [None, "invalid JSON at char 46", "not a JSON object",
                                             "invalid JSON: NaN is not JSON", None]
    d = replay_details(rows)
    assert texts(d.messages) == ["a", "b"] and d.corrupt_rows == 3
    plan = replay_plan(sd, SID, verify=True)
    assert (plan.corrupt_rows, plan.total_rows, plan.message_rows, plan.counts_verified) == (3, 5, 2, True)
    fast = replay_plan(sd, SID)  # reads no message data: counts the junk message rows, sees one corrupt row
    assert (fast.corrupt_rows, fast.total_rows, fast.message_rows, fast.counts_verified) == (1, 5, 4, False)


def test_not_loaded_and_ignored_types(sd: SessionDir, log: Log) -> None:
    log.entry("session", cwd="/w", channelType="local")
    log.msg("user", "a")
    for t in ("model_change", "mode_change", "thinking_level_change", "additional_directories", "branch_summary",
              "session_info", "turn_start", "turn_end"):
        log.entry(t, summary="not a compaction", firstKeptEntryId="", turnId="t1", name="Title")
    log.entry("label", targetId="x", label="fav")
    log.entry("custom", message={"role": "user", "content": "custom"})
    log.entry("custom_message", message={"role": "user", "content": "custom message"})
    d = replay_details(load_rows(sd, SID))
    assert texts(d.messages) == ["a"]
    assert d.title == "Title"
    assert d.leaf_id.startswith("turn")  # the leaf is the last loaded entry; label/custom rows are not loaded


def test_json_identity_wins_over_columns_and_columns_fill_gaps(sd: SessionDir, log: Log) -> None:
    log.raw("col-a", "message", json.dumps({"type": "message", "message": {"role": "user", "content": "no json id"}}))
    log.raw("col-b", "message", json.dumps({"id": "json-b", "message": {"role": "user", "content": "json id"}}))
    log.raw("col-c", "message", json.dumps({"type": "label", "id": "col-c", "message": {"content": "a label"}}))
    log.entry("content_override", targetEntryId="col-a", message={"role": "user", "content": "A"})
    log.entry("content_override", targetEntryId="json-b", message={"role": "user", "content": "B"})
    result = replay(sd, SID)
    assert [(m.entry_id, m.message.text) for m in result] == [("col-a", "A"), ("json-b", "B")]
    plan = replay_plan(sd, SID, verify=True)
    assert not plan.keyset and plan.mismatched_rows == 2
    assert all_pages_forward(sd, 1, verify=True) == result == all_pages_backward(sd, 1, verify=True)


# ------------------------------------------------------------------------------------------ plan and pages


def build_compacted(log: Log) -> None:
    for i in range(5):
        log.msg("user", f"m{i}", usage={"totalTokens": i})
    log.raw("junkjunkjunkjunk", "message", "{")
    keep = log.msg("assistant", "m5", usage={"totalTokens": 5})
    log.entry("content_override", targetEntryId=keep, message={"role": "assistant", "content": "M5"})
    log.entry("label", targetId=keep, label="x")
    for i in range(6, 9):
        log.msg("user", f"m{i}", usage={"totalTokens": i})
    log.entry("compaction", summary="S", firstKeptEntryId=keep)
    for i in range(9, 14):
        log.msg("assistant", f"m{i}", usage={"totalTokens": i})
    log.raw("junk2junk2junk22", "message", "42")
    log.msg("user", "m14")


def test_plan_facts(sd: SessionDir, log: Log) -> None:
    build_compacted(log)
    plan = replay_plan(sd, SID, verify=True)
    full = replay(sd, SID)
    assert plan.keyset and plan.counts_verified
    assert plan.summary == full[0]
    assert plan.message_rows == len(full) - 1 == 10
    assert plan.corrupt_rows == 2
    assert plan.window_start_seq == full[1].seq
    assert plan.compactions == tuple(replay_details(load_rows(sd, SID)).compactions)
    assert plan.compactions[0].summarized_count == 5
    fast = replay_plan(sd, SID)
    assert (fast.window_start_seq, fast.summary, fast.overrides) == (plan.window_start_seq, plan.summary, plan.overrides)
    # one junk row on each side of the window is counted without reading data
    assert (fast.message_rows, fast.compactions[0].summarized_count, fast.corrupt_rows) == (11, 6, 0)


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 100])
def test_pages_forward_and_backward_equal_replay(sd: SessionDir, log: Log, limit: int) -> None:
    build_compacted(log)
    full = replay(sd, SID)
    assert texts(full)[:3] == ["S", "M5", "m6"]
    assert all_pages_forward(sd, limit) == full
    assert all_pages_backward(sd, limit) == full


def test_first_and_last_pages(sd: SessionDir, log: Log) -> None:
    build_compacted(log)
    plan = replay_plan(sd, SID)
    assert texts(replay_page(sd, plan, limit=2)) == ["S", "M5", "m6"]
    assert texts(replay_page(sd, plan, before_seq=END_SEQ, limit=2)) == ["m13", "m14"]
    m7 = next(m for m in replay(sd, SID) if m.message.text == "m7")
    assert texts(replay_page(sd, plan, after_seq=m7.seq, limit=2)) == ["m8", "m9"]
    assert texts(replay_page(sd, plan, before_seq=m7.seq, limit=5)) == ["S", "M5", "m6"]
    assert [m.message.usage_total for m in replay_page(sd, plan, after_seq=m7.seq, limit=2)] == [None, 9]


def test_plan_reads_no_message_rows_and_pages_read_a_window(sd: SessionDir, log: Log) -> None:
    build_compacted(log)
    statements: list[str] = []
    sd.db.conn.set_trace_callback(statements.append)
    try:
        plan = replay_plan(sd, SID)
        plan_sql = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert not any("json_valid" in s for s in plan_sql)  # no pass over the data
        statements.clear()
        replay_page(sd, plan, limit=3)
        page_sql = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    finally:
        sd.db.conn.set_trace_callback(None)
    for s in plan_sql:
        assert "COUNT(" in s or "type IN ('compaction', 'content_override')" in s or "WHERE id = " in s, s
    assert page_sql and all("type = 'message'" in s and "LIMIT" in s for s in page_sql)
    with sd.db.read() as conn:
        for s in plan_sql + page_sql:
            detail = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + s))
            if "type IN" in s or "type = 'message'" in s and "WHERE id" not in s:
                assert "idx_entries_session_type" in detail, (s, detail)


def test_empty_and_unknown_session(sd: SessionDir) -> None:
    plan = replay_plan(sd, "nosuchsession000")
    assert (plan.total_rows, plan.message_rows, plan.summary) == (0, 0, None)
    assert replay_page(sd, plan) == [] and replay(sd, "nosuchsession000") == []
    with pytest.raises(SessionNotFound):
        export_markdown(sd, "nosuchsession000")


def test_summary_only_session_pages(sd: SessionDir, log: Log) -> None:
    log.msg("user", "gone")
    log.entry("compaction", summary="only", firstKeptEntryId="")
    plan = replay_plan(sd, SID)
    assert texts(replay_page(sd, plan)) == ["only"]
    assert texts(replay_page(sd, plan, before_seq=END_SEQ)) == ["only"]
    assert plan.message_rows == 0 and plan.window_start_seq == plan.summary.seq + 1  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------ raw rows, turns


def test_rows_page_row_count_and_turn_markers(sd: SessionDir, log: Log) -> None:
    other = Log(sd, OTHER)
    log.entry("turn_start", turnId="t1")
    log.msg("user", "a")
    other.msg("user", "x")
    log.entry("label", targetId="a", label="keep")
    log.raw("badbadbadbadbad1", "turn_end", "{")
    log.entry("turn_end", turnId="t1", status="completed")
    log.entry("custom", anything=1)
    rows = rows_page(sd, SID, limit=100)
    assert [r.entry_type for r in rows] == ["turn_start", "message", "label", "turn_end", "turn_end", "custom"]
    assert rows[3].parsed is None and rows[3].parse_error == "invalid JSON at char 1"
    assert rows_page(sd, SID, limit=2) == rows[:2]
    assert rows_page(sd, SID, after_seq=rows[1].seq, limit=2) == rows[2:4]
    assert rows_page(sd, SID, before_seq=rows[4].seq, limit=2) == rows[2:4]
    assert rows_page(sd, SID, before_seq=END_SEQ, limit=3) == rows[3:]
    assert row_count(sd, SID) == 6 and row_count(sd, SID, before_seq=rows[2].seq) == 2
    assert turn_markers(sd, SID) == [(rows[0].seq, "turn_start", "t1"), (rows[4].seq, "turn_end", "t1")]
    assert describe_row(rows[2]) == "label a = keep"
    assert describe_row(rows[3]) == "corrupt row: invalid JSON at char 1"


def _turn_markers_by_python(sd: SessionDir, session_id: str) -> list[tuple[int, str, str]]:
    """The definition: every turn row parsed by parse_entry_data; the JSON type wins over the column."""
    out = []
    with sd.db.read() as conn:
        for seq, type_, data in conn.execute(
            "SELECT seq, CAST(type AS BLOB), CAST(data AS BLOB) FROM entries WHERE session_id = ? "
            "AND type IN ('turn_start', 'turn_end') ORDER BY seq", (session_id,)
        ):
            parsed, _ = parse_entry_data(None if data is None else data.decode("utf-8", "surrogateescape"))
            if parsed is None:
                continue
            kind = parsed["type"] if isinstance(parsed.get("type"), str) else type_.decode("utf-8", "surrogateescape")
            if kind in ("turn_start", "turn_end"):
                out.append((seq, kind, parsed["turnId"] if isinstance(parsed.get("turnId"), str) else ""))
    return out


# Rows SQLite's JSON functions read differently from Python's json, and ordinary ones.
TURN_ROWS: list[tuple[str, str | bytes | None]] = [
    ("turn_start", '{"type":"turn_start","turnId":"t1"}'),
    ("turn_end", '{"type":"turn_end","turnId":"t1","status":"completed"}'),
    ("turn_start", '{"type":"turn_start","turnId":"first","turnId":"last"}'),          # duplicate key
    ("turn_start", '{"type":"message","type":"turn_start","turnId":"dup-type"}'),       # duplicate type
    ("turn_start", '{"type":"turn_start","turn\\u0049d":"escaped-key"}'),             # escaped key
    ("turn_end", '{"type":"turn_end","turnId":"esc\\"aped"}'),                       # escaped value
    ("turn_start", '{"type":"turn_start","turnId":"nul"}\x00{"junk":1}'),             # NUL ends SQLite's read
    ("turn_start", '{"type":"turn_start","turnId":NaN}'),                              # not JSON
    ("turn_start", '{"type":"turn_start","turnId":5}'),                                # not a string
    ("turn_start", '{"turnId":"no-type"}'),                                           # column type used
    ("turn_end", '{"type":"message","turnId":"json-type-wins"}'),                      # skipped
    ("turn_start", '{"type":"","turnId":"empty-type"}'),                               # skipped
    ("turn_start", '["type","turnId"]'),                                               # not an object
    ("turn_start", "{"),
    ("turn_start", '{"type":"turn_start","turnId":"deep","x":' + "[" * 1200 + "]" * 1200 + "}"),  # too deep
    ("turn_start", '{"type":"turn_start","turnId":"long","pad":"' + "x" * 2000 + '"}'),
    ("turn_end", b'{"type":"turn_end","turnId":"bad-\xff-bytes"}'),
    ("turn_start", '{"type":"turn_start","meta":{"turnId":"nested"},"label":"turnId"}'),
    ("turn_end", '{ "type" : "turn_end" , "turnId" : "spaced" }'),
]


def test_turn_markers_read_every_row_as_python_json_does(sd: SessionDir, log: Log) -> None:
    for i, (type_, data) in enumerate(TURN_ROWS):
        with sd.db.write() as conn:
            conn.execute("INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, ?, ?, 't', ?)",
                         (SID, f"turn{i:012d}", type_, data))
        log.msg("user", f"between {i}")
    got = turn_markers(sd, SID)
    assert got == _turn_markers_by_python(sd, SID)
    ids = [turn_id for _, _, turn_id in got]
    assert ids == ["t1", "t1", "last", "dup-type", "escaped-key", 'esc"aped', "", "no-type", "long",
                   "bad-\udcff-bytes", "", "spaced"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(
    st.sampled_from(["turn_start", "turn_end"]),
    st.one_of(
        st.dictionaries(st.sampled_from(["type", "turnId", "status", "x", "turn\\u0049d"]),
                        st.one_of(st.sampled_from(["turn_start", "turn_end", "message", ""]), st.text(max_size=8),
                                  st.integers(), st.none()), max_size=4).map(json.dumps),
        st.text(max_size=30),
        st.builds(lambda k, a, b: f'{{"{k}":{json.dumps(a)},"{k}":{json.dumps(b)}}}',
                  st.sampled_from(["type", "turnId"]), st.sampled_from(["turn_start", "turn_end", "a"]),
                  st.sampled_from(["turn_start", "turn_end", "b"])),
    ),
), max_size=12))
def test_turn_markers_match_python_parsing(tmp_path_factory: pytest.TempPathFactory,
                                          rows: list[tuple[str, str]]) -> None:
    with open_session_dir(tmp_path_factory.mktemp("turns"), OpenMode.READ_WRITE, create=True) as d:
        with d.db.write() as conn:
            conn.execute("INSERT INTO sessions (id, cwd, timestamp) VALUES (?, '/w', 't')", (SID,))
            for i, (type_, data) in enumerate(rows):
                conn.execute("INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, ?, ?, 't', ?)",
                             (SID, f"h{i:015d}", type_, data))
        assert turn_markers(d, SID) == _turn_markers_by_python(d, SID)


def test_undecodable_bytes_do_not_break_reading(sd: SessionDir, log: Log) -> None:
    log.msg("user", "a")
    with sd.db.write() as conn:
        conn.execute(
            "INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, 'bytes00000000001', 'message', 't', "
            "CAST(X'7B2274797065223A226D657373616765222C226D657373616765223A7B22636F6E74656E74223A2261FF227D7D' AS TEXT))",
            (SID,),
        )
    result = replay(sd, SID)
    assert texts(result) == ["a", "a\udcff"]
    assert all_pages_forward(sd, 1) == result


# ------------------------------------------------------------------------------------------ other layouts, modes


def test_older_layout_without_session_type_index_reads_read_only(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "sessions.db")
    conn.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, timestamp TEXT);"
        "CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, id TEXT UNIQUE,"
        " type TEXT NOT NULL, parent_id TEXT, timestamp TEXT NOT NULL, data TEXT NOT NULL);"
    )
    bodies: list[tuple[str, dict[str, object]]] = [
        ("message", {"message": {"role": "user", "content": "a"}}),
        ("message", {"message": {"role": "assistant", "content": "b"}}),
        ("compaction", {"summary": "S", "firstKeptEntryId": "e1"}),
    ]
    for i, (t, body) in enumerate(bodies):
        conn.execute("INSERT INTO entries (session_id, id, type, timestamp, data) VALUES (?, ?, ?, 't', ?)",
                     (SID, f"e{i}", t, json.dumps({"type": t, "id": f"e{i}", **body})))
    conn.commit()
    conn.close()
    with open_session_dir(tmp_path, OpenMode.READ_ONLY) as ro:
        assert ro.schema.status != "current"
        assert texts(replay(ro, SID)) == ["S", "b"]
        plan = replay_plan(ro, SID)
        assert texts(replay_page(ro, plan, limit=5)) == ["S", "b"]


# ------------------------------------------------------------------------------------------ export


def test_export_markdown_is_readable(sd: SessionDir, log: Log) -> None:
    log.entry("session_info", name="Fix the parser", source="manual")
    log.msg("user", "old question")
    log.entry("compaction", summary="Earlier work summarised.", firstKeptEntryId="")
    log.msg("user", "please fix ```this```")
    log.entry("message", message={"role": "assistant", "contents": [
        {"type": "thinking", "thinking": "line one\nline two"},
        {"type": "text", "text": "Running it."},
        {"type": "toolCall", "toolCall": {"id": "call_1", "name": "bash", "arguments": {"cmd": "make test"}}},
    ]})
    log.msg("toolResult", "exit 2", toolCallId="call_1", toolName="bash", isError=True)
    md = export_markdown(sd, SID)
    assert md.startswith("# Fix the parser\n")
    assert "## user · seq" in md and "please fix ```this```" in md
    assert "> line one\n> line two" in md
    assert "**Tool call** `bash` (id `call_1`)" in md and '```json\n{\n  "cmd": "make test"\n}\n```' in md
    assert "result of `bash` · ✗ error" in md and "```\nexit 2\n```" in md
    assert "## Compaction summary · seq" in md and "Earlier work summarised." in md
    assert "old question" not in md  # the summary replaced everything before it
    assert md.index("Compaction summary") < md.index("please fix")


def test_export_json_lists_replay(sd: SessionDir, log: Log) -> None:
    target = log.msg("user", "secret")
    log.entry("content_override", targetEntryId=target, message={"role": "user", "content": "[removed]"}, reason="pii")
    log.entry("message", message={"role": "assistant", "contents": [
        {"type": "toolCall", "toolCall": {"id": "c", "name": "grep", "kind": "function", "arguments": {"q": "x"}}}]})
    doc = json.loads(export_json(sd, SID))
    assert doc["session_id"] == SID
    first, second = doc["messages"]
    assert (first["entry_id"], first["kind"], first["role"], first["text"], first["overridden"]) == (
        target, "message", "user", "[removed]", True)
    assert isinstance(first["seq"], int)
    assert second["tool_calls"] == [{"id": "c", "name": "grep", "kind": "function", "arguments": '{"q":"x"}'}]
