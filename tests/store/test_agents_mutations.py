"""Random mutations of real Claude Code and Codex lines go through parse, export, capture, verify and read-back
without an exception other than a named StoreError, and nothing they report holds a raw control character."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.agents import capture as cap
from store.agents.native import parse_claude_code, parse_codex
from store.agents.native_catalog import list_agent_sessions
from store.agents.native_export import native_json, native_markdown
from store.errors import SessionNotFound
from store.mothx.sessiondir import open_session_dir

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
FIXTURES = {
    "claude-code": "claude-code/-Users-dain-workspace-claude-code-log-sample/326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl",
    "codex": "codex/sessions/2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
}
ODD_VALUES = st.sampled_from([
    None, 0, -1, 10**40, 1.5, True, "", "\ud83d", "\x1b]0;pwned\x07", "\u202etxt", "[/]", [], {}, [1, None, "x"],
    {"type": 5}, {"type": "text", "text": 7}, {"type": "tool_use", "id": None, "input": [1]},
])


@pytest.fixture
def fixture_lines(real_fixtures: Path) -> dict[str, list[bytes]]:
    return {agent: (real_fixtures / rel).read_bytes().splitlines()[:30] for agent, rel in FIXTURES.items()}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:4]):
            out += _paths(v, prefix + (i,))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: object) -> Any:
    if not path:
        return value
    obj = json.loads(json.dumps(obj))
    cur = obj
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return obj


@st.composite
def mutation(draw: st.DrawFn, lines: list[bytes]) -> bytes:
    """``lines`` with one or two of them mutated: a field set to an odd value, bytes cut or spliced in."""
    out = list(lines)
    for _ in range(draw(st.integers(1, 2))):
        n = draw(st.integers(0, len(out) - 1))
        how = draw(st.sampled_from(["field", "field", "field", "cut", "bytes", "glue"]))
        if how == "field":
            try:
                obj = json.loads(out[n])
            except ValueError:
                continue
            path = draw(st.sampled_from(_paths(obj)))
            mutated = _set(obj, path, draw(ODD_VALUES))
            out[n] = json.dumps(mutated, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
        elif how == "cut":
            out[n] = out[n][: draw(st.integers(0, len(out[n])))]
        elif how == "bytes":
            at = draw(st.integers(0, len(out[n])))
            out[n] = out[n][:at] + draw(st.binary(min_size=1, max_size=4)) + out[n][at:]
        else:
            out[n] = out[n] + out[(n + 1) % len(out)]
    return b"\n".join(out) + (b"\n" if draw(st.booleans()) else b"")


def _no_raw(text: str) -> None:
    assert not RAW.search(text), repr(text)


def _round_trip(agent: str, data: bytes) -> None:
    t = (parse_codex if agent == "codex" else parse_claude_code)(data, "mutated.jsonl")
    assert t.records == sum(1 for line in data.split(b"\n") if line.strip(b" \t\r\n"))
    for item in t.items:
        if item.kind == "unreadable":
            assert item.error
    native_markdown(t).encode("utf-8")
    native_json(t).encode("utf-8")
    with tempfile.TemporaryDirectory() as td:
        base = Path(td) / "src"
        folder = base / ("2026/02/23" if agent == "codex" else "proj")
        folder.mkdir(parents=True)
        name = Path(FIXTURES[agent]).name
        (folder / name).write_bytes(data)
        sd = open_session_dir(Path(td) / "sd", create=True)
        try:
            summary = cap.capture_codex(sd, base) if agent == "codex" else cap.capture_claude_code(sd, base)
            assert summary.sessions
            for s in summary.sessions:
                _no_raw(s.detail)
                if not s.agent_session_id:
                    continue
                try:
                    result = cap.verify(sd, agent, s.agent_session_id)
                except SessionNotFound:
                    assert s.status in ("unreadable", "divergent")
                    continue
                for detail in result.details:
                    _no_raw(detail)
                if s.status == "new":
                    assert result.status == "verified"
                    assert cap.read_checkpoint_session(sd, agent, s.agent_session_id) is not None
            for row in list_agent_sessions(sd, agent):
                for text in (row.title, row.preview, row.cwd, row.problem):
                    _no_raw(text)
            out = Path(td) / "repaired.jsonl"
            try:
                cap.export_repaired_copy(folder / name, out)
            except cap.RepairCopyRefused:
                pass
        finally:
            sd.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_claude_code_lines(fixture_lines: dict[str, list[bytes]], data: st.DataObject) -> None:
    _round_trip("claude-code", data.draw(mutation(fixture_lines["claude-code"])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_codex_lines(fixture_lines: dict[str, list[bytes]], data: st.DataObject) -> None:
    _round_trip("codex", data.draw(mutation(fixture_lines["codex"])))
