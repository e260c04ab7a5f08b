"""Reading real Claude Code and Codex transcripts, and damaged copies of them made in tmp_path."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from store.agents import native
from store.agents.native import (
    K_COMPACT_BOUNDARY,
    K_FILE_SNAPSHOT,
    K_HOOK,
    K_PROGRESS,
    K_SESSION_META,
    K_SUMMARY,
    K_TOOL_RESULT,
    K_UNREADABLE,
    parse_claude_code,
    parse_codex,
    read_claude_code_file,
    read_claude_code_session,
    read_codex_file,
    read_native_file,
)

CC = "claude-code"
REWIND = f"{CC}/-experiments-ideas/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
SAMPLE = f"{CC}/-Users-dain-workspace-claude-code-log-sample/326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl"
SUMMARY_ONLY = f"{CC}/-Users-dain-workspace-claude-code-log-sample/4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"
EMPTY = f"{CC}/-Users-dain-workspace-claude-code-log-sample/4fe49c7c-ff82-4ac7-b3f2-79c22036bd58.jsonl"
OLD_AGENT = f"{CC}/-Users-dain-workspace-JSSoundRecorder/agent-8d27fe83.jsonl"
PARENT = f"{CC}/-src-experiments-claude_p/29ccd257-68b1-427f-ae5f-6524b7cb6f20.jsonl"
SUBAGENT = f"{CC}/-src-experiments-claude_p/29ccd257-68b1-427f-ae5f-6524b7cb6f20/subagents/agent-a2271d1.jsonl"
CODEX_DIR = "codex/sessions/2026/02/23"
INTERRUPTED = f"{CODEX_DIR}/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
ONE_TURN = f"{CODEX_DIR}/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
LONG = f"{CODEX_DIR}/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"

# Lines per file, as the fixture README states them (the empty file has none).
README_LINES = {REWIND: 61, SAMPLE: 54, SUMMARY_ONLY: 1, EMPTY: 0, OLD_AGENT: 1, PARENT: 6, SUBAGENT: 59,
                INTERRUPTED: 19, ONE_TURN: 63, LONG: 417}


@pytest.mark.parametrize("rel", sorted(README_LINES))
def test_every_real_file_renders_with_exact_record_counts(real_fixtures: Path, rel: str) -> None:
    path = real_fixtures / rel
    t = read_native_file(path)
    assert t.records == README_LINES[rel]
    assert len(path.read_bytes().splitlines()) == README_LINES[rel]
    assert [i.line for i in t.items] == list(range(1, README_LINES[rel] + 1))
    assert not t.unreadable
    assert t.agent == ("codex" if rel.startswith("codex") else "claude-code")
    assert len(t.view()) == t.records - sum(b.items for f in t.forks for b in f.branches[:-1])


def test_real_rewind_is_two_branches(real_fixtures: Path) -> None:
    t = read_claude_code_file(real_fixtures / REWIND)
    assert len(t.forks) == 1
    fork = t.forks[0]
    assert fork.parent_line == 16
    assert [b.prompt_line for b in fork.branches] == [18, 38]
    assert fork.branches[0].timestamp < fork.branches[1].timestamp
    assert fork.branches[0].preview.startswith("I very much like this idea")
    assert fork.branches[1].preview.startswith("I actually don't like much this idea")
    latest = [i.line for i in t.view()]
    first = [i.line for i in t.view({fork.parent_uuid: 0})]
    assert 38 in latest and 61 in latest and 18 not in latest and 35 not in latest
    assert 18 in first and 35 in first and 38 not in first and 61 not in first
    assert set(range(1, 17)) <= set(latest) & set(first)
    assert sorted(set(latest) | set(first)) == list(range(1, 62))  # every record is on some branch
    # File-history snapshots follow the prompt they were taken for.
    assert 17 in first and 37 in latest
    kinds = Counter(i.kind for i in t.items)
    assert kinds[K_PROGRESS] == 11 and kinds[K_HOOK] == 7 and kinds[K_FILE_SNAPSHOT] == 9
    assert sum(1 for i in t.items for b in i.blocks if b.kind == "thinking") == 6
    assert [(p.name, p.call_line, p.result_line) for p in t.tool_pairs] == [("Bash", 7, 9), ("Read", 10, 13)]
    assert not t.interrupted


def test_recording_artifacts_are_not_branches(real_fixtures: Path) -> None:
    sub = read_claude_code_file(real_fixtures / SUBAGENT)
    parents = Counter(i.parent_uuid for i in sub.items if i.parent_uuid)
    assert max(parents.values()) >= 2  # parallel tool results share a parent
    assert sub.forks == ()
    rewind = read_claude_code_file(real_fixtures / REWIND)
    shared = Counter(i.parent_uuid for i in rewind.items if i.parent_uuid)
    assert sum(1 for n in shared.values() if n >= 2) > 1  # progress lines beside results, and the real fork
    assert len(rewind.forks) == 1


def test_sample_summaries_dangle_and_tools_pair(real_fixtures: Path) -> None:
    t = read_claude_code_file(real_fixtures / SAMPLE)
    assert [(s.line, s.dangling) for s in t.summaries] == [(1, True), (2, True), (3, True), (4, True)]
    assert all("dangling_leaf" in t.items[n].flags for n in range(4))
    assert Counter(p.name for p in t.tool_pairs) == {"TodoWrite": 4, "Read": 3, "Edit": 3, "Bash": 3, "MultiEdit": 1}
    assert not t.interrupted
    systems = [i for i in t.items if i.kind == "system"]
    assert systems and all("\x1b" not in i.text for i in systems)
    assert any("\\u001b" in i.raw for i in systems)  # the escapes are in the records, not in the text shown
    assert "meta" in t.items[4].flags


def test_summary_only_and_empty_files(real_fixtures: Path) -> None:
    t = read_claude_code_file(real_fixtures / SUMMARY_ONLY)
    assert t.session_id == "" and [i.kind for i in t.items] == [K_SUMMARY]
    assert t.summaries[0].dangling and t.summaries[0].summary == "TUI Cache Handling: Empty State Fix"
    empty = read_claude_code_file(real_fixtures / EMPTY)
    assert empty.items == () and empty.session_id == ""


def test_subagent_under_its_task_call_new_layout(real_fixtures: Path) -> None:
    session = read_claude_code_session(real_fixtures / PARENT.rsplit("/", 1)[0], "29ccd257-68b1-427f-ae5f-6524b7cb6f20")
    assert session.main is not None and session.main.records == 6
    task = session.main.tool_pairs[0]
    assert (task.name, task.call_line, task.result_line, task.subagent_id) == ("Task", 4, 5, "a2271d1")
    assert len(session.subagents) == 1
    link = session.subagents[0]
    assert (link.agent_id, link.layout, link.task_call_id, link.task_line) == ("a2271d1", "subagents", task.call_id, 4)
    assert session.subagent_for_call(task.call_id) is link
    sub = link.transcript
    assert sub.records == 59 and sub.agent_id == "a2271d1"
    assert all("sidechain" in i.flags for i in sub.items)
    assert Counter(p.name for p in sub.tool_pairs) == {"Bash": 12, "Read": 12}
    assert not sub.interrupted


def test_old_layout_subagent_without_parent(real_fixtures: Path) -> None:
    project = real_fixtures / OLD_AGENT.rsplit("/", 1)[0]
    session = read_claude_code_session(project, "7acd37a8-2745-4b58-a8a9-46164b22ad9e")
    assert session.main is None
    assert [(s.agent_id, s.layout, s.task_call_id) for s in session.subagents] == [("8d27fe83", "project_root", "")]


def test_old_layout_subagent_links_by_prompt(real_fixtures: Path, tmp_path: Path) -> None:
    """An old-layout sub-agent file next to a parent whose Task result has no agentId links by its prompt."""
    project = tmp_path / "proj"
    project.mkdir()
    lines = (real_fixtures / PARENT).read_text().splitlines()
    result = json.loads(lines[4])
    del result["toolUseResult"]["agentId"]
    lines[4] = json.dumps(result, separators=(",", ":"))
    (project / "29ccd257-68b1-427f-ae5f-6524b7cb6f20.jsonl").write_text("\n".join(lines) + "\n")
    (project / "agent-a2271d1.jsonl").write_bytes((real_fixtures / SUBAGENT).read_bytes())
    session = read_claude_code_session(project, "29ccd257-68b1-427f-ae5f-6524b7cb6f20")
    assert [(s.agent_id, s.layout, s.task_line) for s in session.subagents] == [("a2271d1", "project_root", 4)]


def test_codex_interrupted_rollout(real_fixtures: Path) -> None:
    t = read_codex_file(real_fixtures / INTERRUPTED)
    assert t.session_id == "019c8a70-dda7-7f33-98ea-f30553347322"
    assert t.items[0].kind == K_SESSION_META and t.version == "0.104.0-alpha.1"
    assert [(p.name, p.call_line, p.interrupted) for p in t.interrupted] == [("exec_command", 18, True)]
    assert "interrupted" in t.items[17].flags
    assert [(x.start_line, x.complete) for x in t.turns] == [(8, False)]
    assert "incomplete_turn" in t.items[7].flags
    reasoning = [b for i in t.items for b in i.blocks if b.kind == "encrypted_reasoning"]
    assert len(reasoning) == 1 and reasoning[0].text.startswith("[encrypted reasoning")
    assert sum(1 for i in t.items if "mirror" in i.flags) == 3


@pytest.mark.parametrize(("rel", "pairs"), [(ONE_TURN, 5), (LONG, 118)])
def test_codex_complete_turns(real_fixtures: Path, rel: str, pairs: int) -> None:
    t = read_codex_file(real_fixtures / rel)
    assert len(t.tool_pairs) == pairs and not t.interrupted
    assert all(p.result_line > p.call_line for p in t.tool_pairs)
    assert len(t.turns) == 1 and t.turns[0].complete and t.turns[0].end_line == t.records


# --------------------------------------------------------------------------------- damaged copies


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def test_cut_off_copy_keeps_everything_before(real_fixtures: Path) -> None:
    lines = _lines(real_fixtures / REWIND)
    data = b"\n".join(lines[:39]) + b"\n" + lines[39][: len(lines[39]) // 2]
    t = parse_claude_code(data)
    assert t.records == 40
    last = t.items[-1]
    assert (last.kind, last.line) == (K_UNREADABLE, 40) and "cut_off" in last.flags and "cut off" in last.error
    assert len(t.forks) == 1


def test_glued_lines_keep_later_records_attached(real_fixtures: Path) -> None:
    lines = _lines(real_fixtures / REWIND)
    glued = lines[:38] + [lines[38] + lines[39]] + lines[40:]  # original lines 39 and 40 on one line
    t = parse_claude_code(b"\n".join(glued) + b"\n")
    assert t.records == 60
    bad = t.items[38]
    assert (bad.kind, bad.line) == (K_UNREADABLE, 39) and "glued" in bad.flags
    after = t.items[39]  # original line 41, whose parent was in original line 40
    assert after.parent_state == "unreadable" and after.parent_line == 39
    view = [i.line for i in t.view()]
    assert 39 in view and 40 in view and view[-1] == 60  # nothing after the damage is detached
    assert len(t.forks) == 1 and t.forks[0].branches[1].prompt_line == 38


def test_malformed_middle_line_is_kept_in_place(real_fixtures: Path) -> None:
    lines = _lines(real_fixtures / INTERRUPTED)
    lines[4] = b'{"timestamp":"2026-02-23T12:19:42.561Z","type":"response_item","payload":{"type":'
    t = parse_codex(b"\n".join(lines) + b"\n")
    assert t.records == 19 and t.items[4].kind == K_UNREADABLE and t.items[4].line == 5
    assert "cut_off" not in t.items[4].flags
    assert [p.call_line for p in t.interrupted] == [18]
    lines = _lines(real_fixtures / SAMPLE)
    lines[9] = b"\xff\xfe not utf-8"
    s = parse_claude_code(b"\n".join(lines) + b"\n")
    assert s.records == 54 and s.items[9].kind == K_UNREADABLE and "UTF-8" in s.items[9].error
    assert s.items[10].parent_state == "missing" and s.items[10] in s.view()


def test_blank_lines_are_not_records(real_fixtures: Path) -> None:
    lines = _lines(real_fixtures / PARENT)
    t = parse_claude_code(b"\n\n".join(lines) + b"\n\n")
    assert t.records == 6 and [i.line for i in t.items] == [1, 3, 5, 7, 9, 11]


# ------------------------------------------------------------------------------------ synthetic shapes


def _cc(uuid: str, parent: str | None, kind: str, text: str, ts: str, **extra: object) -> str:
    rec: dict[str, object] = {"parentUuid": parent, "isSidechain": False, "sessionId": "s1", "type": kind,
                              "uuid": uuid, "timestamp": ts}
    if kind in ("user", "assistant"):
        rec["message"] = {"role": kind, "content": text}
    rec.update(extra)
    return json.dumps(rec)


def test_replayed_prompt_copy_is_not_a_branch() -> None:
    lines = [
        _cc("a", None, "user", "hello", "2026-01-01T00:00:00Z"),
        _cc("b", "a", "assistant", "hi", "2026-01-01T00:00:01Z"),
        _cc("c", "b", "user", "do it", "2026-01-01T00:00:02Z"),
        _cc("c2", "b", "user", "do it", "2026-01-01T00:00:02Z"),  # a replayed copy: same text, same time
        _cc("d", "c", "assistant", "done", "2026-01-01T00:00:03Z"),
        _cc("d", "c", "assistant", "done", "2026-01-01T00:00:03Z"),  # the same uuid written twice
    ]
    t = parse_claude_code(lines)
    assert t.forks == ()
    assert "replay" in t.items[3].flags and "replay" in t.items[5].flags
    assert len(t.view()) == 6


def test_compaction_continues_the_chain_with_token_counts() -> None:
    lines = [
        _cc("a", None, "user", "first", "2026-01-01T00:00:00Z"),
        _cc("b", "a", "assistant", "answer", "2026-01-01T00:00:01Z"),
        _cc("x", None, "system", "", "2026-01-01T00:00:02Z", subtype="compact_boundary", logicalParentUuid="b",
            content="Conversation compacted", compactMetadata={"trigger": "auto", "preTokens": 155000}),
        _cc("y", "x", "user", "This session is being continued...", "2026-01-01T00:00:02Z", isCompactSummary=True),
        _cc("z", "y", "user", "next", "2026-01-01T00:00:09Z"),
        _cc("w", "z", "user", "typed again", "2026-01-01T00:00:20Z"),
        _cc("w2", "z", "user", "typed instead", "2026-01-01T00:00:40Z"),
    ]
    t = parse_claude_code(lines)
    boundary = t.items[2]
    assert boundary.kind == K_COMPACT_BOUNDARY and boundary.tokens == 155000
    assert (boundary.parent_state, boundary.parent_line) == ("ok", 2)  # continues its logical parent
    # The boundary and the summary record after it are one compaction (the summary is its text).
    assert [(c.kind, c.pre_tokens, c.summary) for c in t.compactions] == [
        ("compact_boundary", 155000, "This session is being continued...")]
    # A rewind after the compaction is found through the boundary: the fork's branches sit under the chain.
    assert len(t.forks) == 1 and t.forks[0].parent_line == 5
    assert [b.prompt_line for b in t.forks[0].branches] == [6, 7]
    assert [i.line for i in t.view()] == [1, 2, 3, 4, 5, 7]
    assert [i.line for i in t.view({"z": 0})] == [1, 2, 3, 4, 5, 6]


def test_codex_custom_calls_and_compacted_history() -> None:
    def ri(payload: dict[str, object]) -> str:
        return json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": payload})

    lines = [
        json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "abc", "cwd": "/w"}}),
        json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}}),
        ri({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c1"}),
        ri({"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"}),
        ri({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
        json.dumps({"timestamp": "t", "type": "compacted",
                    "payload": {"message": "summary of the work", "replacement_history": [
                        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
                        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "old"},
                        {"type": "function_call_output", "call_id": "old", "output": "ok"}]}}),
        json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}}),
    ]
    t = parse_codex(lines)
    assert t.session_id == "abc"
    assert [(p.name, p.interrupted, p.result_text) for p in t.tool_pairs] == [("apply_patch", False, "Done"),
                                                                            ("shell", True, "")]
    assert [(c.summary, c.replacement_items) for c in t.compactions] == [("summary of the work", 3)]
    assert [(i.kind, i.text) for i in t.compactions[0].replacement] == [
        ("user", "fix it"), ("tool_call", "shell({})"), ("tool_result", "ok")]
    assert [(x.turn_id, x.complete, x.aborted) for x in t.turns] == [("t1", False, True)]
    assert t.items[3].kind == K_TOOL_RESULT


def test_detect_agent() -> None:
    assert native.detect_agent([json.dumps({"type": "session_meta", "payload": {}})]) == "codex"
    assert native.detect_agent([json.dumps({"type": "summary", "leafUuid": "x"})]) == "claude-code"
    assert native.detect_agent(["{broken", "[]"]) == ""
