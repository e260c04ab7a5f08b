"""External-agent checkpoints: versions, the shared line set, the publication head, prefix proofs, limits."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.agents import agentstate
from store.agents.agentstate import (
    FileShape,
    InvalidSessionState,
    PersistedSessionState,
    PersistedSessionStateFile,
    SessionStateDivergent,
    SessionStateOutOfSync,
    SessionStateRecord,
    StaleFence,
)
from store.errors import ReadOnlyStore, StoreError
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.pg import pg_cluster, pg_dump, pg_execute, pg_url, store_url  # noqa: F401 - fixtures

AGENT = "claude-code"
SID = "5b0c8f2e-0000-4000-8000-000000000001"


@pytest.fixture
def sd(tmp_path: Path, store_url: str | None) -> Iterator[SessionDir]:  # noqa: F811 - the fixture of tests.pg
    """A session directory whose checkpoint store is the default SQLite file or a fresh PostgreSQL database."""
    agentstate.use_store(store_url)
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()
    agentstate.use_store(None)


def tamper(sd: SessionDir, sql: str, params: tuple[object, ...] = (), *, no_constraints: bool = False) -> None:
    """Change rows behind the store's back, in whichever engine the test runs on."""
    url = agentstate.selected_store()
    if url is not None:
        pg_execute(url, sql, params, no_constraints=no_constraints)
        return
    conn = sqlite3.connect(agentstate.state_db_path(sd))
    if no_constraints:
        conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(sql, params)
    conn.commit()
    conn.close()


def rec(i: int, text: str = "x") -> str:
    return json.dumps({"n": i, "text": text}, separators=(",", ":"))


def digest_of(lines: list[str]) -> str:
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def build(
    fence: agentstate.RunFence,
    files: dict[str, list[str]],
    canonical: dict[str, FileShape] | None = None,
    *,
    continue_prefix: bool = False,
    transcript: str | None = None,
) -> tuple[PersistedSessionState, list[SessionStateRecord]]:
    """A state and its record stream the way a capture makes them (records already compact)."""
    canonical = canonical or {}
    shapes: list[PersistedSessionStateFile] = []
    stream: list[SessionStateRecord] = []
    for path in sorted(files, key=lambda p: p.encode()):
        lines = files[path]
        h = hashlib.sha256()
        proof: tuple[int, str, object] = (0, "", None)
        c = canonical.get(path)
        for n, line in enumerate(lines, start=1):
            h.update(line.encode() + b"\n")
            if c is not None and n == c.records:
                proof = (n, h.hexdigest(), h.copy())
        start = proof[0] + 1 if continue_prefix and proof[0] else 1
        stream += [SessionStateRecord(path, n, lines[n - 1]) for n in range(start, len(lines) + 1)]
        shapes.append(
            PersistedSessionStateFile(path, len(lines), h.hexdigest(), proof[0], proof[1],
                                      proof[2] if continue_prefix else None)
        )
    state = PersistedSessionState(
        agent_id=fence.agent_id,
        agent_session_id=fence.agent_session_id,
        through_run_id=fence.run_id,
        cwd="/work/project",
        transcript_path=transcript or shapes[0].path,
        runtime_fencing_token=fence.fencing_token,
        file_count=len(shapes),
        record_count=sum(s.records for s in shapes),
        files=tuple(shapes),
    )
    return state, stream


def capture(sd: SessionDir, files: dict[str, list[str]], *, publish: bool = True, continue_prefix: bool = False
            ) -> tuple[agentstate.RunFence, agentstate.ReplaceResult]:
    canonical = agentstate.canonical_shape(sd, AGENT, SID)
    fence = agentstate.begin_run(sd, AGENT, SID)
    state, stream = build(fence, files, canonical, continue_prefix=continue_prefix)
    result = agentstate.replace(sd, fence, state, stream)
    if publish:
        agentstate.publish(sd, fence)
    return fence, result


def dump(sd: SessionDir) -> dict[str, list[tuple[object, ...]]]:
    url = agentstate.selected_store()
    if url is not None:
        return pg_dump(url)
    conn = sqlite3.connect(agentstate.state_db_path(sd))
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


def loaded(sd: SessionDir) -> dict[str, list[str]]:
    cp = agentstate.load_checkpoint(sd, AGENT, SID)
    assert cp is not None
    out: dict[str, list[str]] = {}
    for r in cp.records:
        out.setdefault(r.file_path, []).append(str(r.content))
    return out


# ------------------------------------------------------------------------------------------ compaction


def test_compact_removes_whitespace_outside_strings_only() -> None:
    raw = b'{ "a" : 1.50 ,\t"b": [ 1 , 2 ],\r\n "t": "x , y : \\" z \\\\", "a": 2 }'
    assert agentstate.compact(raw) == b'{"a":1.50,"b":[1,2],"t":"x , y : \\" z \\\\","a":2}'
    assert agentstate.compact(b'{"s":"a\\\\"  ,  "u":"\\u0041 b"}') == b'{"s":"a\\\\","u":"\\u0041 b"}'
    already = b'{"k":"with spaces inside","n":[1,2]}'
    assert agentstate.compact(already) is already


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values, indent=st.sampled_from([None, 0, 1, 2]), spaced=st.booleans(), ascii_only=st.booleans())
def test_compact_equals_the_compact_serialisation(value: object, indent: int | None, spaced: bool,
                                                  ascii_only: bool) -> None:
    seps = (", ", ": ") if spaced else (",", ":")
    loose = json.dumps(value, indent=indent, separators=seps, ensure_ascii=ascii_only)
    tight = json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)
    assert agentstate.compact(loose.encode()) == tight.encode()


def test_file_digest_is_sha256_of_restored_jsonl() -> None:
    records = [b'{"a": 1}', b'  {"b":[1, 2]}  ']
    assert agentstate.file_digest(records) == hashlib.sha256(b'{"a":1}\n{"b":[1,2]}\n').hexdigest()


# ----------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "path",
    ["", " a.jsonl", "/abs/a.jsonl", "a/../b.jsonl", "./a.jsonl", "a//b.jsonl", "a\\b.jsonl", "a.json", "a/b/",
     "a\nb.jsonl", ".", "x/./y.jsonl", "a" * 4100 + ".jsonl"],
)
def test_bad_paths_are_refused(path: str) -> None:
    assert agentstate.path_problem(path) is not None


@pytest.mark.parametrize("path", ["a.jsonl", "-proj/s.jsonl", "p/s/subagents/agent-1.jsonl", "2026/02/23/r.jsonl"])
def test_good_paths(path: str) -> None:
    assert agentstate.path_problem(path) is None


def _state(**changes: object) -> PersistedSessionState:
    base = PersistedSessionState(
        AGENT, SID, "0b7f8f3e-3c55-4d5c-9a54-0b4f6f2e7f10", "/w", "a.jsonl", 3, 2, 3,
        (PersistedSessionStateFile("a.jsonl", 2, "0" * 64), PersistedSessionStateFile("b.jsonl", 1, "1" * 64)),
    )
    return PersistedSessionState(**{**base.__dict__, **changes})


def test_header_rules() -> None:
    assert agentstate.header_problem(_state()) is None
    assert "run id" in (agentstate.header_problem(_state(through_run_id="run-1")) or "")
    assert agentstate.header_problem(_state(runtime_fencing_token=0))
    assert agentstate.header_problem(_state(agent_id="  "))
    assert agentstate.header_problem(_state(cwd="x" * 16385))
    assert agentstate.header_problem(_state(record_count=4))
    assert agentstate.header_problem(_state(file_count=3))
    assert agentstate.header_problem(_state(transcript_path="c.jsonl"))
    swapped = _state(files=tuple(reversed(_state().files)))
    assert "increasing" in (agentstate.header_problem(swapped) or "")
    bad_digest = _state(files=(PersistedSessionStateFile("a.jsonl", 2, "ABC"), _state().files[1]))
    assert "digest" in (agentstate.header_problem(bad_digest) or "")
    too_many = _state(file_count=1025, record_count=1025,
                      files=tuple(PersistedSessionStateFile(f"f{i:04}.jsonl", 1, "0" * 64) for i in range(1025)),
                      transcript_path="f0000.jsonl")
    assert "file count" in (agentstate.header_problem(too_many) or "")


def test_sql_layout_is_dialect_clean() -> None:
    sql = "\n".join(line.split("--")[0] for line in agentstate.schema_sql().splitlines()).upper()
    for sqlite_only in ("AUTOINCREMENT", "INSERT OR", "PRAGMA", "WITHOUT ROWID", "STRICT", "GLOB", "IFNULL(",
                        "DATETIME(", "INSTR("):
        assert sqlite_only not in sql


# -------------------------------------------------------------------------------- staging and loading


def test_first_capture_round_trips_and_head_names_the_run(sd: SessionDir) -> None:
    files = {"p/s.jsonl": [rec(i) for i in range(1, 6)], "p/s/subagents/agent-1.jsonl": [rec(9)]}
    fence, result = capture(sd, files)
    assert result.records_written == 6
    assert agentstate.head(sd, AGENT, SID) == agentstate.PublicationHead(fence.run_id, "checkpoint")
    assert loaded(sd) == files
    shape = agentstate.canonical_shape(sd, AGENT, SID)
    assert shape is not None and shape["p/s.jsonl"] == FileShape("p/s.jsonl", 5, digest_of(files["p/s.jsonl"]))
    info = agentstate.checkpoint_info(sd, AGENT, SID)
    assert info is not None and info.state is not None and info.state.record_count == 6 and info.versions == 1


def test_staged_but_unpublished_version_is_never_loaded(sd: SessionDir) -> None:
    capture(sd, {"a.jsonl": [rec(1)]}, publish=False)
    assert agentstate.head(sd, AGENT, SID) is None
    assert agentstate.load_checkpoint(sd, AGENT, SID) is None


def test_head_naming_a_run_without_staged_state_is_out_of_sync(sd: SessionDir) -> None:
    capture(sd, {"a.jsonl": [rec(1)]})
    fence = agentstate.begin_run(sd, AGENT, SID)
    agentstate.publish(sd, fence)  # history moved on, nothing staged for it
    with pytest.raises(SessionStateOutOfSync, match="no staged snapshot"):
        agentstate.load_checkpoint(sd, AGENT, SID)
    info = agentstate.checkpoint_info(sd, AGENT, SID)
    assert info is not None and "no staged snapshot" in info.head_problem


@pytest.mark.parametrize("continue_prefix", [False, True])
def test_append_writes_only_the_tail(sd: SessionDir, continue_prefix: bool) -> None:
    base = [rec(i) for i in range(1, 11)]
    capture(sd, {"a.jsonl": base})
    grown = base + [rec(11), rec(12), rec(13)]
    _, result = capture(sd, {"a.jsonl": grown, "b.jsonl": [rec(1)]}, continue_prefix=continue_prefix)
    assert result.records_written == 4
    assert loaded(sd) == {"a.jsonl": grown, "b.jsonl": [rec(1)]}
    assert len(dump(sd)["agent_state_lines"]) == 14
    # Replace keeps the candidate and the version that was canonical while it ran; older ones are pruned.
    assert len(dump(sd)["agent_state_versions"]) == 2
    capture(sd, {"a.jsonl": grown + [rec(14)], "b.jsonl": [rec(1)]}, continue_prefix=continue_prefix)
    assert len(dump(sd)["agent_state_versions"]) == 2


def test_divergent_capture_touches_nothing(sd: SessionDir) -> None:
    base = [rec(i) for i in range(1, 6)]
    capture(sd, {"a.jsonl": base, "b.jsonl": [rec(7)]})
    before = dump(sd)
    canonical = agentstate.canonical_shape(sd, AGENT, SID)
    rewritten = base[:2] + [rec(3, "changed")] + base[3:] + [rec(6)]
    for files in ({"a.jsonl": rewritten, "b.jsonl": [rec(7)]},  # a line rewritten
                  {"a.jsonl": base[:4], "b.jsonl": [rec(7)]},  # shortened
                  {"a.jsonl": base}):  # a file removed
        fence = agentstate.begin_run(sd, AGENT, SID)
        state, stream = build(fence, files, canonical)
        mid = dump(sd)
        with pytest.raises(SessionStateDivergent):
            agentstate.replace(sd, fence, state, stream)
        assert dump(sd) == mid
    after = dump(sd)
    assert after["agent_state_lines"] == before["agent_state_lines"]
    assert after["agent_state_versions"] == before["agent_state_versions"]
    assert after["agent_state_publications"] == before["agent_state_publications"]
    assert loaded(sd) == {"a.jsonl": base, "b.jsonl": [rec(7)]}


def test_candidate_tails_of_a_crashed_round_are_trimmed(sd: SessionDir) -> None:
    base = [rec(i) for i in range(1, 4)]
    capture(sd, {"a.jsonl": base})
    capture(sd, {"a.jsonl": base + [rec(4, "A"), rec(5, "A")], "z.jsonl": [rec(1)]}, publish=False)  # crash
    assert len(dump(sd)["agent_state_lines"]) == 6
    _, result = capture(sd, {"a.jsonl": base + [rec(4, "B")]})
    assert result.records_written == 1
    assert loaded(sd) == {"a.jsonl": base + [rec(4, "B")]}
    assert sorted(r[1:3] for r in dump(sd)["agent_state_lines"]) == [("a.jsonl", n) for n in range(1, 5)]


def test_stale_fences_are_refused_without_writing(sd: SessionDir) -> None:
    first = agentstate.begin_run(sd, AGENT, SID)
    second = agentstate.begin_run(sd, AGENT, SID)
    assert second.fencing_token > first.fencing_token
    state, stream = build(first, {"a.jsonl": [rec(1)]})
    before = dump(sd)
    with pytest.raises(StaleFence):
        agentstate.replace(sd, first, state, stream)
    assert dump(sd) == before
    with pytest.raises(StaleFence, match="does not match"):
        wrong = PersistedSessionState(**{**state.__dict__, "runtime_fencing_token": second.fencing_token})
        agentstate.replace(sd, first, wrong, stream)
    with pytest.raises(StaleFence):
        agentstate.publish(sd, first)
    state2, stream2 = build(second, {"a.jsonl": [rec(1)]})
    agentstate.replace(sd, second, state2, stream2)
    agentstate.publish(sd, second)
    assert loaded(sd) == {"a.jsonl": [rec(1)]}


def test_a_superseded_capture_is_stale_not_divergent(sd: SessionDir) -> None:
    base = [rec(1), rec(2)]
    capture(sd, {"a.jsonl": base})
    canonical = agentstate.canonical_shape(sd, AGENT, SID)
    slow = agentstate.begin_run(sd, AGENT, SID)
    capture(sd, {"a.jsonl": base + [rec(3)]})  # a newer capture publishes first
    state, stream = build(slow, {"a.jsonl": base + [rec(3)]}, canonical)
    with pytest.raises(StaleFence):
        agentstate.replace(sd, slow, state, stream)


def test_reset_then_full_rewrite(sd: SessionDir) -> None:
    capture(sd, {"a.jsonl": [rec(1), rec(2)], "b.jsonl": [rec(3)]})
    preview = agentstate.preview_reset(sd, AGENT, SID)
    assert (preview.allowed, preview.files, preview.records) == (True, 2, 3)
    assert agentstate.load_checkpoint(sd, AGENT, SID) is not None  # a preview writes nothing
    head = agentstate.publish_reset(sd, AGENT, SID)
    assert head.kind == "reset" and agentstate.head(sd, AGENT, SID) == head
    assert not agentstate.preview_reset(sd, AGENT, SID).allowed
    assert agentstate.load_checkpoint(sd, AGENT, SID) is None
    assert agentstate.canonical_shape(sd, AGENT, SID) is None
    _, result = capture(sd, {"a.jsonl": [rec(1, "new")]})
    assert result.records_written == 1
    assert loaded(sd) == {"a.jsonl": [rec(1, "new")]}
    tables = dump(sd)
    assert len(tables["agent_state_lines"]) == 1 and len(tables["agent_state_versions"]) == 1


def test_stream_rules(sd: SessionDir) -> None:
    fence = agentstate.begin_run(sd, AGENT, SID)
    state, stream = build(fence, {"a.jsonl": [rec(1), rec(2)], "b.jsonl": [rec(3)]})
    cases = [
        [stream[1], stream[0], stream[2]],  # out of order
        [stream[0], stream[2]],  # a record missing
        [stream[2], stream[0], stream[1]],  # files out of path order
        stream + [SessionStateRecord("c.jsonl", 1, rec(4))],  # undeclared file
        [stream[0], SessionStateRecord("a.jsonl", 2, rec(2, "other")), stream[2]],  # digest differs
        [stream[0], SessionStateRecord("a.jsonl", 2, "{not json"), stream[2]],
        [stream[0], SessionStateRecord("a.jsonl", 2, "   "), stream[2]],
    ]
    for records in cases:
        with pytest.raises(InvalidSessionState):
            agentstate.replace(sd, fence, state, records)
        assert agentstate.load_checkpoint(sd, AGENT, SID) is None
    with pytest.raises(SessionStateDivergent, match="UTF-8"):
        agentstate.replace(sd, fence, state, [stream[0], SessionStateRecord("a.jsonl", 2, b'{"a":"\xff"}'), stream[2]])
    with pytest.raises(InvalidSessionState, match="longer than"):
        big = '{"a":"' + "x" * agentstate.MAX_LINE_BYTES + '"}'
        big_state, big_stream = build(fence, {"a.jsonl": [big]})
        agentstate.replace(sd, fence, big_state, big_stream)
    assert dump(sd)["agent_state_lines"] == []
    agentstate.replace(sd, fence, state, stream)  # the same run may still stage correctly


def test_load_verifies_stored_digests(sd: SessionDir) -> None:
    capture(sd, {"a.jsonl": [rec(1), rec(2)], "b.jsonl": [rec(3)]})
    tamper(sd, "UPDATE agent_state_lines SET content = ? WHERE file_path = 'a.jsonl' AND line_number = 2",
           (rec(2, "tampered"),))
    with pytest.raises(SessionStateOutOfSync, match="digest"):
        agentstate.load_checkpoint(sd, AGENT, SID)
    tamper(sd, "DELETE FROM agent_state_lines WHERE file_path = 'a.jsonl' AND line_number = 2")
    with pytest.raises(SessionStateOutOfSync, match="stored records"):
        agentstate.load_checkpoint(sd, AGENT, SID)
    tamper(sd, "UPDATE agent_state_versions SET file_shapes = '[{\"path\":\"a.jsonl\"}]'")
    with pytest.raises(SessionStateOutOfSync, match="header"):
        agentstate.load_checkpoint(sd, AGENT, SID)
    tamper(sd, "UPDATE agent_state_publications SET run_id = 'not-a-uuid'", no_constraints=True)
    with pytest.raises(SessionStateOutOfSync, match="UUID"):
        agentstate.head(sd, AGENT, SID)


def test_load_is_bounded_by_the_head_shapes(sd: SessionDir) -> None:
    base = [rec(1), rec(2)]
    capture(sd, {"a.jsonl": base})
    capture(sd, {"a.jsonl": base + [rec(3)], "b.jsonl": [rec(4)]}, publish=False)
    assert loaded(sd) == {"a.jsonl": base}


def test_consumer_must_read_to_the_end(sd: SessionDir) -> None:
    capture(sd, {"a.jsonl": [rec(1), rec(2)]})
    with pytest.raises(StoreError, match="before reading through"):
        agentstate.load(sd, AGENT, SID, lambda state, read: None)
    got: list[int] = []

    def consume(state: PersistedSessionState, read: agentstate.RecordReader) -> None:
        while (r := read()) is not None:
            got.append(r.line_number)

    assert agentstate.load(sd, AGENT, SID, consume) is True
    assert got == [1, 2]


def test_read_modes_never_create_or_write(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "s", create=True):
        pass
    for mode in (OpenMode.READ_ONLY, OpenMode.SNAPSHOT):
        with open_session_dir(tmp_path / "s", mode) as ro:
            assert agentstate.head(ro, AGENT, SID) is None
            assert agentstate.load_checkpoint(ro, AGENT, SID) is None
            assert agentstate.list_checkpoints(ro) == []
            with pytest.raises(ReadOnlyStore):
                agentstate.begin_run(ro, AGENT, SID)
            with pytest.raises(ReadOnlyStore):
                agentstate.publish_reset(ro, AGENT, SID)
            assert not agentstate.state_db_path(ro).exists()
    with open_session_dir(tmp_path / "s") as rw:
        capture(rw, {"a.jsonl": [rec(1)]})
    before = agentstate.state_db_path(rw).read_bytes()
    with open_session_dir(tmp_path / "s", OpenMode.READ_ONLY) as ro:
        assert loaded(ro) == {"a.jsonl": [rec(1)]}
        with pytest.raises(ReadOnlyStore):
            agentstate.publish_reset(ro, AGENT, SID)
    assert agentstate.state_db_path(rw).read_bytes() == before


def test_runtime_config_guard(sd: SessionDir) -> None:
    with pytest.raises(agentstate.RuntimeConfigStale, match="no agent row"):
        agentstate.guard_runtime_sync(sd, "codex", 0, lambda: 1)
    epoch = agentstate.advance_runtime_config_epoch(sd, "codex")
    assert agentstate.runtime_config_epoch(sd, "codex") == agentstate.RuntimeConfigEpoch(epoch, 0)
    with pytest.raises(agentstate.RuntimeConfigStale, match=f"expected epoch 0, found {epoch}"):
        agentstate.guard_runtime_sync(sd, "codex", 0, lambda: 1)
    assert agentstate.guard_runtime_sync(sd, "codex", epoch, lambda: "ran") == "ran"
    agentstate.set_runtime_reset_lease(sd, "codex", "tok", "2999-01-01T00:00:00Z")
    with pytest.raises(agentstate.RuntimeConfigResetInProgress):
        agentstate.guard_runtime_sync(sd, "codex", epoch, lambda: 1)
    agentstate.set_runtime_reset_lease(sd, "codex", "tok", "2000-01-01T00:00:00Z")  # expired lease
    assert agentstate.guard_runtime_sync(sd, "codex", epoch, lambda: 2) == 2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["a.jsonl", "b.jsonl"]), st.integers(0, 4)), min_size=1, max_size=6))
def test_append_rounds_store_exactly_the_new_records(tmp_path_factory: pytest.TempPathFactory,
                                                     steps: list[tuple[str, int]]) -> None:
    root = tmp_path_factory.mktemp("prop")
    with open_session_dir(root / "s", create=True) as sd:
        files: dict[str, list[str]] = {}
        counter = 0
        for path, n in steps:
            new = [rec(counter + k) for k in range(n)]
            counter += n
            files.setdefault(path, []).extend(new)
            current = {p: lines for p, lines in files.items() if lines}
            if not current:
                continue
            _, result = capture(sd, current, continue_prefix=bool(counter % 2))
            assert result.records_written == n
            assert loaded(sd) == current
        listed = agentstate.list_checkpoints(sd)
        assert len(listed) == (1 if counter else 0)
        assert all(re.fullmatch(r"[0-9a-f]{16}", c.session_id) for c in listed)
