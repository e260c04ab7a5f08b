"""How native record kinds render (tui.widgets.native_blocks): context, exit codes, absent sub-agents, new
record types, unknown types, and the right-aligned line number of muted one-line records."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from store.agents.native import (
    link_claude_code_session,
    parse_codex,
    read_claude_code_file,
    read_codex_file,
)
from tests.hostile import assert_clean
from tui.widgets.block_base import Palette
from tui.widgets.native_blocks import quiet_line, record_lines, turn_rule
from tui.widgets.native_sources import CallResult, RecordView

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures_native"
PAL = Palette.plain()
CONSOLE = Console(width=200, color_system=None)


def text_of(view: RecordView, width: int = 100) -> str:
    return "\n".join(line.plain for line in record_lines(view, width, PAL, CONSOLE))


def test_context_records_and_blocks_are_collapsed() -> None:
    t = read_claude_code_file(FIXTURES / "claude-code-2.0.44-context.jsonl")
    reminder = text_of(RecordView(t.items[4], t.agent))
    assert "▸ context" in reminder and "system reminder" in reminder and "collapsed" in reminder
    assert "Use pytest." not in reminder  # the body stays folded
    prompt = text_of(RecordView(t.items[3], t.agent))
    assert "● user" in prompt and "fix the failing test" in prompt and "▸ IDE context" in prompt


def test_codex_exit_codes_and_errors_are_shown() -> None:
    t = read_codex_file(FIXTURES / "codex-0.40.0-json-outputs.jsonl")
    result = next(i for i in t.items if i.line == 8)
    shown = text_of(RecordView(result, t.agent))
    assert "exit 2" in shown and "✗ error" in shown and "sed: can't read build.log" in shown
    assert '"metadata"' not in shown


def test_new_record_types_have_their_own_look() -> None:
    t = read_claude_code_file(FIXTURES / "claude-code-2.1.152-record-types.jsonl")
    by_line = {i.line: i for i in t.items}
    assert "⏱ turn duration" in text_of(RecordView(by_line[6], t.agent))
    assert "Turn took 60.1 s" in text_of(RecordView(by_line[6], t.agent))
    assert "↺ last prompt" in text_of(RecordView(by_line[9], t.agent))
    unknown = text_of(RecordView(by_line[10], t.agent))
    assert "? agent-setting" in unknown and 'agentSetting="default"' in unknown and "(empty)" not in unknown
    codex = read_codex_file(FIXTURES / "codex-0.40.0-json-outputs.jsonl")
    search = next(i for i in codex.items if i.line == 11)
    assert "⌕ web search" in text_of(RecordView(search, codex.agent))
    aborted = next(i for i in codex.items if i.line == 14)
    rule = turn_rule(aborted, 80, PAL)[0].plain
    assert "turn aborted: interrupted" in rule and "?" not in rule and "Turn aborted" not in rule


def test_a_task_naming_an_absent_subagent_file() -> None:
    session = link_claude_code_session(read_claude_code_file(FIXTURES / "claude-code-2.1.152-record-types.jsonl"), [])
    main = session.main
    assert main is not None
    call_item = next(i for i in main.items if i.line == 3)
    pair = main.tool_pairs[0]
    call = CallResult(pair.call_id, pair.name, pair.arguments, pair.result_line, pair.result_text, pair.is_error,
                      pair.interrupted, session.subagent_for_call(pair.call_id))
    shown = text_of(RecordView(call_item, main.agent, calls=(call,)))
    assert "sub-agent a7be2f0: file not present" in shown and "enter opens it" not in shown


def test_right_aligned_line_numbers_are_never_cut() -> None:
    t = parse_codex(['{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":'
                     '{"total_token_usage":{"total_tokens":123456789}}}}'] * 3)
    for width in range(20, 90):
        row = quiet_line(t.items[2], width, PAL).plain
        assert row.endswith(" line 3"), (width, row)
        assert len(row) <= width


def test_hostile_unknown_record_renders_clean() -> None:
    evil = "\x1b]52;c;aGFja2Vk\x07[bold]x[/bold]\u202e"
    t = parse_codex(['{"timestamp":"t","type":"response_item","payload":{"type":"' + evil.replace("\x1b", "\\u001b")
                     .replace("\x07", "\\u0007") + '","k":"' + "[@click=app.quit]x[/]" + '"}}'])
    shown = text_of(RecordView(t.items[0], t.agent))
    assert_clean(shown)
    assert "[@click=app.quit]x[/]" in shown
