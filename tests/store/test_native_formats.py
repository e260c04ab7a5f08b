"""Format excerpts of each agent version (tests/fixtures_native/): every record read for what it is."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.native import (
    K_ASSISTANT,
    K_COMPACT_BOUNDARY,
    K_COMPACT_SUMMARY,
    K_CONTEXT,
    K_LAST_PROMPT,
    K_OTHER,
    K_QUEUE,
    K_TOOL_CALL,
    K_TOOL_RESULT,
    K_TURN_ABORTED,
    K_TURN_DURATION,
    K_USER,
    K_WEB_SEARCH,
    link_claude_code_session,
    parse_claude_code,
    parse_codex,
    read_claude_code_file,
    read_codex_file,
    typed_prompt,
)
from store.agents.native_catalog import first_prompt
from store.agents.native_drift import DriftCounter
from store.agents.native_export import native_markdown, session_messages
from store.agents.native_lines import codex_output
from store.mothx.sessiondir import SessionDir, open_session_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures_native"
INLINE = FIXTURES / "claude-code-1.0.98-inline-sidechain.jsonl"
INLINE_ID = "7c2d9a41-3f0e-4b8a-9d61-2e5f0a7b8c13"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


# ------------------------------------------------------------------------------- Claude Code 1.0.x sidechains


def test_inline_sidechain_is_not_the_main_conversation() -> None:
    t = read_claude_code_file(INLINE)
    assert [(i.line, i.kind) for i in t.items] == [(1, K_USER), (2, K_ASSISTANT), (7, K_TOOL_RESULT),
                                                   (8, K_ASSISTANT)]
    assert t.file_records == 8 and len(t.inline_subagents) == 1
    sub = t.inline_subagents[0]
    assert [i.line for i in sub.items] == [3, 4, 5, 6]
    assert all("sidechain" in i.flags for i in sub.items)
    assert sub.agent_id == "inline-a1b2c3d4" and sub.items[0].text.startswith("Find every call")
    assert [p.name for p in sub.tool_pairs] == ["Grep"] and not sub.interrupted
    assert [p.name for p in t.tool_pairs] == ["Task"]


def test_inline_sidechain_is_grouped_under_its_task_call() -> None:
    session = link_claude_code_session(read_claude_code_file(INLINE), [])
    assert len(session.subagents) == 1
    link = session.subagents[0]
    assert (link.layout, link.task_call_id, link.task_line) == ("inline", "toolu_01TaskAAAA", 2)
    assert session.subagent_for_call("toolu_01TaskAAAA") is link
    assert sum(t.records for t in session.transcripts) == 8


def test_inline_sidechain_is_never_the_first_prompt() -> None:
    lines = INLINE.read_text().splitlines()
    title, _ = first_prompt("claude-code", lines)
    assert title == "Where is parse_config used?"
    # Even when the sidechain comes first among the lines read for the title.
    title, _ = first_prompt("claude-code", lines[2:])
    assert title != lines[2] and "Find every call" not in title


def test_inline_sidechain_linked_by_position_when_prompts_differ() -> None:
    data = INLINE.read_bytes().replace(b'"content":"Find every call', b'"content":"Look up every call')
    session = link_claude_code_session(parse_claude_code(data, "x.jsonl"), [])
    assert session.subagents[0].task_call_id == "toolu_01TaskAAAA"


def test_inline_sidechain_through_a_checkpoint(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    (root / "-home-u-proj").mkdir(parents=True)
    shutil.copy(INLINE, root / "-home-u-proj" / f"{INLINE_ID}.jsonl")
    result = cap.capture_claude_code(sd, root).session(INLINE_ID)
    assert result is not None and (result.status, result.records) == ("new", 8)
    session = cap.read_checkpoint_session(sd, "claude-code", INLINE_ID)
    assert session is not None and session.main is not None
    assert [i.line for i in session.main.items] == [1, 2, 7, 8]
    assert [(s.layout, s.task_call_id) for s in session.subagents] == [("inline", "toolu_01TaskAAAA")]


# --------------------------------------------------------------------------------------- Codex 0.40 outputs

CODEX_040 = FIXTURES / "codex-0.40.0-json-outputs.jsonl"


def test_codex_json_string_outputs_give_exit_codes() -> None:
    t = read_codex_file(CODEX_040)
    by_id = {p.call_id: p for p in t.tool_pairs}
    sed, ls, patch = by_id["call_sed01"], by_id["call_ls02"], by_id["call_patch03"]
    assert (sed.exit_code, sed.is_error) == (2, True)
    assert sed.result_text == "sed: can't read build.log: No such file or directory\n"
    assert (ls.exit_code, ls.is_error, ls.result_text) == (0, False, "Makefile\nsrc\n")
    assert (patch.name, patch.exit_code, patch.is_error) == ("apply_patch", 0, False)
    assert not t.interrupted


@pytest.mark.parametrize(("text", "code"), [
    ("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nboom", 1),
    ("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 127\nOutput:\n", 127),
    ("Error: Exit code 2\nls: cannot access 'x'", 2),
    ("Exit code 1", 1),
    ("all fine\nExit code: 3 was not the first line", None),
    ('{"output": 5}', None),
])
def test_exit_codes_stated_in_text(text: str, code: int | None) -> None:
    assert codex_output(text)[1] == code


def test_claude_code_error_result_shows_its_exit_code() -> None:
    call = {"parentUuid": None, "isSidechain": False, "sessionId": "s", "version": "2.1.17", "type": "assistant",
            "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "false"}}]}}
    result = {"parentUuid": "u1", "isSidechain": False, "sessionId": "s", "version": "2.1.17", "type": "user",
              "uuid": "u2", "timestamp": "2026-01-01T00:00:01Z", "message": {"role": "user", "content": [
                  {"type": "tool_result", "content": "Exit code 1", "is_error": True, "tool_use_id": "toolu_1"}]},
              "toolUseResult": "Error: Exit code 1"}
    t = parse_claude_code([json.dumps(call), json.dumps(result)])
    assert [(p.is_error, p.exit_code) for p in t.tool_pairs] == [(True, 1)]


# ------------------------------------------------------------------------------------ context vs prompt

CONTEXT_CC = FIXTURES / "claude-code-2.0.44-context.jsonl"


def test_claude_code_injected_context_is_not_a_prompt() -> None:
    t = read_claude_code_file(CONTEXT_CC)
    kinds = [(i.kind, i.subtype) for i in t.items]
    assert kinds == [(K_CONTEXT, "local command caveat"), (K_CONTEXT, "command"), (K_CONTEXT, "command output"),
                     (K_USER, ""), (K_CONTEXT, "system reminder"), (K_ASSISTANT, "")]
    prompt = t.items[3]
    assert prompt.text == "fix the failing test in test_app.py"
    assert [(b.kind, b.tool_name) for b in prompt.blocks] == [("context", "IDE context"), ("text", "")]
    assert first_prompt("claude-code", CONTEXT_CC.read_text().splitlines())[0] == "fix the failing test in test_app.py"
    assert "Context: IDE context" in native_markdown(t)


def test_codex_injected_context_is_not_a_prompt() -> None:
    t = read_codex_file(CODEX_040)
    by_line = {i.line: i for i in t.items}
    assert (by_line[2].kind, by_line[2].subtype) == (K_CONTEXT, "user instructions (AGENTS.md)")
    assert (by_line[3].kind, by_line[3].subtype) == (K_CONTEXT, "environment context")
    assert (by_line[5].kind, by_line[5].text) == (K_USER, "Why does the build fail?")
    assert [b.kind for b in by_line[5].blocks] == ["context", "text"]
    assert by_line[6].text == "Why does the build fail?"  # the user_message event: the request only
    assert first_prompt("codex", CODEX_040.read_text().splitlines())[0] == "Why does the build fail?"


# ---------------------------------------------------------------------------------------- record types

TYPES_CC = FIXTURES / "claude-code-2.1.152-record-types.jsonl"


def test_claude_code_record_types_are_shown_for_what_they_are() -> None:
    t = read_claude_code_file(TYPES_CC)
    kinds = [i.kind for i in t.items]
    assert kinds == [K_QUEUE, K_USER, K_ASSISTANT, K_TOOL_RESULT, K_QUEUE, K_TURN_DURATION, K_COMPACT_BOUNDARY,
                     K_COMPACT_SUMMARY, K_LAST_PROMPT, K_OTHER]
    by_kind = {i.kind: i for i in t.items}
    assert t.items[0].text == "prompt queued: also run the linter"
    assert t.items[4].text == "queued prompt sent"
    assert by_kind[K_TURN_DURATION].text == "Turn took 60.1 s (60,123 ms)"
    assert by_kind[K_LAST_PROMPT].text.endswith("and the tokenizer too")
    other = by_kind[K_OTHER]
    assert "unknown_type" in other.flags and other.text.startswith("agent-setting: ")
    assert 'agentSetting="default"' in other.text and "flag=true" in other.text
    assert len(t.compactions) == 1  # the boundary and its summary are one compaction
    assert t.compactions[0].pre_tokens == 155000 and t.compactions[0].summary.startswith("This session")


def test_a_task_result_naming_an_absent_subagent() -> None:
    session = link_claude_code_session(read_claude_code_file(TYPES_CC), [])
    link = session.subagent_for_call("toolu_01TaskZZ")
    assert link is not None and (link.agent_id, link.layout, link.transcript.records) == ("a7be2f0", "absent", 0)


def test_codex_record_types_are_shown_for_what_they_are() -> None:
    t = read_codex_file(CODEX_040)
    by_line = {i.line: i for i in t.items}
    assert (by_line[11].kind, by_line[11].text) == (K_WEB_SEARCH, "Web search: make: *** No rule to make target · completed")
    assert (by_line[12].kind, by_line[12].subtype) == (K_TOOL_CALL, "custom_tool_call")
    assert by_line[14].kind == K_TURN_ABORTED
    assert [(x.start_line, x.aborted, x.complete) for x in t.turns] == [(14, True, False)]
    unknown = parse_codex([json.dumps({"timestamp": "t", "type": "response_item",
                                       "payload": {"type": "image_generation_call", "status": "done", "n": 2}})])
    assert unknown.items[0].kind == K_OTHER and unknown.items[0].text == 'image_generation_call: status="done", n=2'


# ----------------------------------------------------------------------------------------- format drift


def test_capture_reports_format_drift_by_version(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    (root / "-home-u-proj").mkdir(parents=True)
    sid = "9d4e5f60-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
    data = TYPES_CC.read_bytes().replace(b'"isCompactSummary":true', b'"isCompactSummary":true,"brandNewField":1')
    (root / "-home-u-proj" / f"{sid}.jsonl").write_bytes(data)
    shutil.copy(INLINE, root / "-home-u-proj" / f"{INLINE_ID}.jsonl")
    summary = cap.capture_claude_code(sd, root)
    report = summary.drift()
    # The 1.0.98 file holds no drift; records that name no version count under their file's version.
    assert report == ["2.1.152 (9 records): types agent-setting ×1; fields user.brandNewField ×1"]
    again = cap.capture_claude_code(sd, root)
    assert again.drift() == []  # nothing new was written


def test_codex_drift_takes_the_version_of_an_appended_file(tmp_path: Path, sd: SessionDir) -> None:
    day = tmp_path / "sessions" / "2025" / "10" / "02"
    day.mkdir(parents=True)
    path = day / "rollout-2025-10-02T09-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
    shutil.copy(CODEX_040, path)
    first = cap.capture_codex(sd, tmp_path / "sessions")
    assert first.drift() == []
    with path.open("a") as fh:
        fh.write(json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "exec_command_end"}}) + "\n")
    assert cap.capture_codex(sd, tmp_path / "sessions").drift() == [
        "0.40.0 (1 records): types event_msg/exec_command_end ×1"]


def test_typed_prompt_skips_sidechains_and_context() -> None:
    assert typed_prompt(read_claude_code_file(INLINE)) == "Where is parse_config used?"
    assert typed_prompt(read_claude_code_file(CONTEXT_CC)) == "fix the failing test in test_app.py"
    assert typed_prompt(read_codex_file(CODEX_040)) == "Why does the build fail?"
    # A file whose first records are all one sidechain (read only that far) has no typed prompt.
    lines = INLINE.read_text().splitlines()[2:6]
    assert typed_prompt(parse_claude_code(lines)) == ""


CODEX_077 = FIXTURES / "codex-0.77.0-text-outputs.jsonl"


def test_codex_text_outputs_state_their_exit_code() -> None:
    t = read_codex_file(CODEX_077)
    assert [(p.name, p.exit_code, p.is_error) for p in t.tool_pairs] == [("shell_command", 2, True)]
    assert t.tool_pairs[0].result_text.startswith("Exit code: 2")  # the text is kept as written
    assert [(x.complete, x.aborted) for x in t.turns] == [(True, False)]
    assert typed_prompt(t) == "run the tests"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_every_excerpt_captures_and_shows_every_record(name: str, tmp_path: Path, sd: SessionDir) -> None:
    """Each format excerpt: captured whole, verified, and read back with every record accounted for."""
    src = FIXTURES / name
    lines = [ln for ln in src.read_bytes().split(b"\n") if ln.strip()]
    if name.startswith("codex-"):
        sid = json.loads(lines[0])["payload"]["id"]
        day = tmp_path / "sessions" / "2026" / "01" / "01"
        day.mkdir(parents=True)
        shutil.copy(src, day / f"rollout-2026-01-01T00-00-00-{sid}.jsonl")
        result = cap.capture_codex(sd, tmp_path / "sessions").session(sid)
        agent = "codex"
    else:
        sid = next(json.loads(ln)["sessionId"] for ln in lines if b'"sessionId"' in ln)
        (tmp_path / "projects" / "p").mkdir(parents=True)
        shutil.copy(src, tmp_path / "projects" / "p" / f"{sid}.jsonl")
        result = cap.capture_claude_code(sd, tmp_path / "projects").session(sid)
        agent = "claude-code"
    assert result is not None and (result.status, result.records) == ("new", len(lines))
    assert cap.verify(sd, agent, sid).status == "verified"
    session = cap.read_checkpoint_session(sd, agent, sid)
    assert session is not None
    assert len(session_messages(session)) == len(lines)
    assert not any(m["kind"] == "unreadable" for m in session_messages(session))


def test_drift_names_unknown_content_blocks() -> None:
    counter = DriftCounter("claude-code")
    counter.feed(json.dumps({"type": "assistant", "version": "2.2.0", "uuid": "u", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "web_fetch_tool_result"}]}}).encode())
    assert counter.report() == ["2.2.0 (1 records): types assistant block web_fetch_tool_result ×1"]


def test_a_codex_user_message_with_no_text_and_no_context_is_a_user_message() -> None:
    """A user message whose content holds neither text nor injected context (an image only, an empty text) is
    still the user's message, not context (a mutation test found the crash this guards against)."""
    import json as _json

    from store.agents.native import parse_codex

    lines = [
        _json.dumps({"timestamp": "2026-02-23T12:19:42Z", "type": "session_meta",
                     "payload": {"id": "019c0000-0000-7000-8000-000000000001", "cwd": "/w", "cli_version": "0.104.0"}}),
        _json.dumps({"timestamp": "2026-02-23T12:19:43Z", "type": "response_item",
                     "payload": {"type": "message", "role": "user", "content": [{"type": "input_image",
                                                                                  "image_url": "data:,"}]}}),
        _json.dumps({"timestamp": "2026-02-23T12:19:44Z", "type": "response_item",
                     "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": " "}]}}),
    ]
    t = parse_codex([line.encode() for line in lines])
    assert [i.kind for i in t.items if i.role == "user"] and all(i.kind != "context" for i in t.items if i.role == "user")
