"""The bounded session log: replay rules (property tests), backends, validation, following live sessions."""

from __future__ import annotations

import itertools
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.agents import native_follow
from store.agents import sessionlog as sl
from store.agents.checkpoint_engine import use_store
from store.agents.sessionlog import (
    CASEventLog,
    CASRetryLimit,
    CorruptEventLog,
    Cursor,
    EventStore,
    FileEventLog,
    MemoryBlobStore,
    MemoryEventLog,
    Ref,
)
from store.agents.sessionlog_sql import SqlEventLog, sql_event_log
from store.errors import ReadOnlyStore, StoreError
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.pg import pg_cluster, pg_url, store_url  # noqa: F401 - fixtures

REF = Ref("ws-1", "session/1")


def counter_generations() -> Callable[[], str]:
    n = itertools.count(1)
    return lambda: f"gen-{next(n)}"


def backends(tmp: Path, max_events: int) -> list[EventStore]:
    return [
        MemoryEventLog(max_events, counter_generations()),
        FileEventLog(tmp, max_events, counter_generations()),
        CASEventLog(MemoryBlobStore(), max_events=max_events, new_generation=counter_generations()),
    ]


class Model:
    """The reference's rules, kept as plainly as possible: every event ever appended, per generation."""

    def __init__(self, max_events: int, generation: str) -> None:
        self.max_events = max_events
        self.generation = generation
        self.sequence = 0

    def replay(self, after: Cursor) -> tuple[str, list[int]]:
        if after.generation != self.generation or after.sequence > self.sequence:
            return "unavailable", []
        if after.sequence == self.sequence:
            return "complete", []
        retained = list(range(max(1, self.sequence - self.max_events + 1), self.sequence + 1))
        events = [s for s in retained if s > after.sequence]
        return ("partial" if after.sequence + 1 < retained[0] else "complete"), events


ops = st.lists(st.one_of(st.just(("reset",)), st.tuples(st.just("append"), st.integers(1, 9))), max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_events=st.integers(1, 6), steps=ops,
       queries=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 40)), min_size=1, max_size=12))
def test_replay_follows_the_reference_table(tmp_path_factory: pytest.TempPathFactory, max_events: int,
                                            steps: list[tuple[object, ...]], queries: list[tuple[int, int]]) -> None:
    logs = backends(tmp_path_factory.mktemp("log"), max_events)
    start = [log.cursor(REF) for log in logs]
    assert len({c.generation for c in start}) == 1 and start[0].sequence == 0
    model = Model(max_events, start[0].generation)
    generations = [model.generation]
    for step in steps:
        if step[0] == "reset":
            cursors = [log.reset(REF) for log in logs]
            assert len(set(cursors)) == 1 and cursors[0].sequence == 0
            assert cursors[0].generation != model.generation
            model = Model(max_events, cursors[0].generation)
            generations.append(model.generation)
        else:
            for n in range(int(str(step[1]))):
                events = [log.append(REF, "note", {"n": n}) for log in logs]
                model.sequence += 1
                assert {e.cursor for e in events} == {Cursor(model.generation, model.sequence)}
    for gen_index, seq in queries:
        generation = generations[gen_index] if gen_index < len(generations) else "gen-unknown"
        after = Cursor(generation, seq)
        want_status, want_seqs = model.replay(after)
        for log in logs:
            got = log.replay(REF, after)
            assert got.through == Cursor(model.generation, model.sequence)
            assert got.status == want_status
            assert [e.cursor.sequence for e in got.events] == want_seqs
            assert all(e.cursor.generation == model.generation for e in got.events)


@settings(max_examples=40, deadline=None)
@given(max_events=st.integers(1, 5),
       messages=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]), st.text(max_size=3)), max_size=20))
def test_projection_keeps_start_order_and_bound(max_events: int, messages: list[tuple[str, str]]) -> None:
    log = MemoryEventLog(max_events)
    order: list[str] = []
    texts: dict[str, str] = {}
    for mid, delta in messages:
        log.append(REF, sl.KIND_CHAT_STREAM, {"message_id": mid, "role": "assistant", "delta": delta})
        if mid not in order:
            order.append(mid)
        texts[mid] = texts.get(mid, "") + delta
        while len(order) > max_events:
            texts.pop(order.pop(0))
    projection, cursor = log.projection(REF)
    assert [m.id for m in projection] == order
    assert [m.text for m in projection] == [texts[m] for m in order]
    assert cursor.sequence == len(messages)


def test_projection_reduction_fields() -> None:
    log = MemoryEventLog()
    log.append(REF, "chat_stream", {"message_id": "m", "role": "assistant", "text": "Hel"})
    log.append(REF, "chat_stream", {"message_id": "m", "delta": "lo"})
    log.append(REF, "other", {"message_id": "ignored"})
    log.append(REF, "chat_stream", '{"message_id":"m","done":true}')
    (msg,), _ = log.projection(REF)
    assert (msg.role, msg.text, msg.status, msg.started_at) == ("assistant", "Hello", "done", 1)
    with pytest.raises(sl.InvalidEventPayload):
        log.append(REF, "chat_stream", {"text": "no id"})
    with pytest.raises(sl.InvalidEventPayload):
        log.append(REF, "note", "{not json")
    with pytest.raises(sl.InvalidEventPayload):
        log.append(REF, "note", "NaN")
    assert log.cursor(REF).sequence == 4  # refused appends took no sequence


def test_capture_is_one_consistent_boundary() -> None:
    log = MemoryEventLog(3)
    start = log.cursor(REF)
    for n in range(5):
        log.append(REF, "chat_stream", {"message_id": f"m{n}", "text": str(n)})
    capture = log.capture(REF, start)
    assert capture.cursor.sequence == 5 and capture.replay is not None
    assert capture.replay.status == "partial" and capture.replay.through == capture.cursor
    assert [m.id for m in capture.messages] == ["m2", "m3", "m4"]
    assert log.capture(REF).replay is None


def test_refs_and_reset_generations() -> None:
    with pytest.raises(sl.InvalidSessionRef):
        MemoryEventLog().cursor(Ref("", "s"))
    stuck = iter(["gen-a", "gen-a", "gen-a", "gen-b"])
    log = MemoryEventLog(new_generation=lambda: next(stuck))
    assert log.cursor(REF).generation == "gen-a"
    log.append(REF, "x", {})
    assert log.reset(REF) == Cursor("gen-b", 0)
    assert log.replay(REF, Cursor("gen-a", 1)).status == "unavailable"


# -------------------------------------------------------------------------------------------- file backend


def test_file_layout_and_restart(tmp_path: Path) -> None:
    log = FileEventLog(tmp_path, 4)
    first = log.cursor(REF)
    path = log.path_for(REF)
    assert path.parent.parent == tmp_path / "sessionlog" / "workspaces"
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600  # the initial generation is persisted
    for n in range(6):
        log.append(REF, "chat_stream", {"message_id": f"m{n % 2}", "delta": "x"})
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "schema_version": 1,\n  "workspace_id": "ws-1"')
    doc = json.loads(text)
    assert list(doc) == ["schema_version", "workspace_id", "session_id", "generation", "sequence", "events",
                         "messages"]
    assert doc["sequence"] == 6 and [e["cursor"]["sequence"] for e in doc["events"]] == [3, 4, 5, 6]
    reopened = FileEventLog(tmp_path, 4)
    assert reopened.cursor(REF) == Cursor(first.generation, 6)
    assert reopened.replay(REF, Cursor(first.generation, 2)) == log.replay(REF, Cursor(first.generation, 2))
    assert reopened.projection(REF) == log.projection(REF)


def test_path_segments_are_injective_and_safe() -> None:
    ids = ["a", "A", "a/b", "a%2Fb", "..", ".", "ä", "a b", "x" * 300, "x" * 301, "~x"]
    segments = [sl.path_segment(i) for i in ids]
    assert len(set(segments)) == len(ids)
    assert all("/" not in s and s not in (".", "..") and len(s) <= 180 for s in segments)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(schema_version=2),
        lambda d: d.update(workspace_id="other"),
        lambda d: d.update(generation=""),
        lambda d: d.update(sequence=9),
        lambda d: d.update(events=[]),
        lambda d: d["events"].pop(),  # no longer ends at the sequence
        lambda d: d["events"].append(d["events"][-1]),
        lambda d: d["events"][0]["cursor"].update(generation="gen-other"),
        lambda d: d.update(messages=[{"id": "m"}, {"id": "m"}]),
        lambda d: d.update(messages=[{"id": ""}]),
        lambda d: d.update(events="nope"),
    ],
)
def test_corrupt_documents_are_refused(tmp_path: Path, change: Callable[[dict[str, object]], None]) -> None:
    log = FileEventLog(tmp_path, 3)
    for n in range(3):
        log.append(REF, "note", {"n": n})
    path = log.path_for(REF)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptEventLog):
        FileEventLog(tmp_path, 3).cursor(REF)


def test_more_events_than_the_bound_is_corrupt(tmp_path: Path) -> None:
    log = FileEventLog(tmp_path, 5)
    for n in range(5):
        log.append(REF, "note", {"n": n})
    with pytest.raises(CorruptEventLog, match="more than 3"):
        FileEventLog(tmp_path, 3).cursor(REF)
    log.path_for(REF).write_bytes(b"not json")
    with pytest.raises(CorruptEventLog):
        FileEventLog(tmp_path, 5).cursor(REF)


def test_failed_write_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = FileEventLog(tmp_path)
    log.append(REF, "note", {"n": 1})
    before = log.cursor(REF)

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(StoreError, match="could not be written"):
        log.append(REF, "note", {"n": 2})
    with pytest.raises(StoreError):
        log.reset(REF)
    monkeypatch.undo()
    assert log.cursor(REF) == before
    assert FileEventLog(tmp_path).cursor(REF) == before
    assert not [p for p in log.path_for(REF).parent.iterdir() if p.name.startswith(".tmp-")]


def test_sequence_exhausted(tmp_path: Path) -> None:
    log = FileEventLog(tmp_path)
    log.append(REF, "note", {})
    path = log.path_for(REF)
    doc = json.loads(path.read_text())
    doc["sequence"] = sl.MAX_SEQUENCE
    doc["events"][0]["cursor"]["sequence"] = sl.MAX_SEQUENCE
    path.write_text(json.dumps(doc))
    with pytest.raises(sl.SequenceExhausted):
        FileEventLog(tmp_path).append(REF, "note", {})


# --------------------------------------------------------------------------------------------- CAS backend


def test_cas_create_then_swap_and_retry() -> None:
    blobs = MemoryBlobStore()
    log = CASEventLog(blobs, prefix="custom/prefix")
    log.append(REF, "note", {"n": 1})
    key = log.key_for(REF)
    assert key.startswith("custom/prefix/workspaces/ws-1/sessions/") and blobs.writes == 1
    rival = CASEventLog(blobs, prefix="custom/prefix")
    raced = {"done": False}

    def interleave(k: str) -> None:
        if not raced["done"]:
            raced["done"] = True
            blobs.before_write = None
            rival.append(REF, "note", {"rival": True})
            blobs.before_write = interleave

    blobs.before_write = interleave
    event = log.append(REF, "note", {"n": 2})
    blobs.before_write = None
    assert event.cursor.sequence == 3  # lost the race once, re-read, and took the next sequence
    assert [json.loads(e.payload) for e in log.replay(REF, Cursor(event.cursor.generation, 0)).events] == [
        {"n": 1}, {"rival": True}, {"n": 2}]


def test_cas_retry_limit() -> None:
    blobs = MemoryBlobStore()
    log = CASEventLog(blobs)
    log.cursor(REF)
    attempts_before = blobs.attempts

    def always_lose(k: str) -> None:
        current = blobs.blobs[k]
        blobs.blobs[k] = current + b" "  # someone else always wrote first

    blobs.before_write = always_lose
    with pytest.raises(CASRetryLimit, match="32"):
        log.append(REF, "note", {})
    assert blobs.attempts - attempts_before == sl.DEFAULT_CAS_RETRIES


# ----------------------------------------------------------------------------------------------- following


def test_follow_replay_actions() -> None:
    log = MemoryEventLog(2)
    start = sl.follow_replay(log, REF, None)
    assert (start.action, start.cursor.sequence) == ("reset", 0)
    assert sl.follow_replay(log, REF, start.cursor).action == "none"
    log.append(REF, "note", {})
    step = sl.follow_replay(log, REF, start.cursor)
    assert (step.action, len(step.events)) == ("append", 1)
    for _ in range(3):
        log.append(REF, "note", {})
    gap = sl.follow_replay(log, REF, step.cursor)
    assert (gap.status, gap.action, [e.cursor.sequence for e in gap.events]) == ("partial", "reload", [3, 4])
    log.reset(REF)
    assert sl.follow_replay(log, REF, gap.cursor).action == "reset"


def _insert(conn: object, session: str, n: int, start: int = 0) -> None:
    for k in range(start, start + n):
        conn.execute(  # type: ignore[attr-defined]
            "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?, ?, 'message', NULL, "
            "'2026-01-01T00:00:00Z', ?)",
            (session, f"{session[:8]}{k:08x}", json.dumps({"role": "user", "content": f"m{k}"})),
        )


def test_follow_entries(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "s", create=True) as sd:
        with sd.db.write() as conn:
            for sid in ("aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"):
                conn.execute("INSERT INTO sessions (id, cwd, timestamp, version) VALUES (?, '/w', "
                             "'2026-01-01T00:00:00Z', 3)", (sid,))
            _insert(conn, "aaaaaaaaaaaaaaaa", 3)
            _insert(conn, "bbbbbbbbbbbbbbbb", 2)
        first = sl.follow_entries(sd, "aaaaaaaaaaaaaaaa", None)
        assert first.action == "reset" and first.events == ()
        with sd.db.write() as conn:
            _insert(conn, "bbbbbbbbbbbbbbbb", 1, 2)
            _insert(conn, "aaaaaaaaaaaaaaaa", 2, 3)
        step = sl.follow_entries(sd, "aaaaaaaaaaaaaaaa", first.cursor)
        assert step.action == "append"
        assert [json.loads(r.data)["content"] for r in step.events] == ["m3", "m4"]
        assert sl.follow_entries(sd, "aaaaaaaaaaaaaaaa", step.cursor).action == "none"
        with sd.db.write() as conn:
            _insert(conn, "aaaaaaaaaaaaaaaa", 5, 5)
        gap = sl.follow_entries(sd, "aaaaaaaaaaaaaaaa", step.cursor, limit=3)
        assert (gap.status, gap.action, len(gap.events)) == ("partial", "reload", 3)
        assert gap.events[-1].seq == gap.cursor.sequence
        with sd.db.write() as conn:  # history rewritten: the cursor's row is gone
            conn.execute("DELETE FROM entries WHERE session_id = 'aaaaaaaaaaaaaaaa'")
            _insert(conn, "aaaaaaaaaaaaaaaa", 12, 20)
        assert sl.follow_entries(sd, "aaaaaaaaaaaaaaaa", gap.cursor).action == "reset"
        assert sl.follow_entries(sd, "cccccccccccccccc", gap.cursor).action == "reset"
        assert sl.follow_entries(sd, "aaaaaaaaaaaaaaaa", Cursor("other", 1)).action == "reset"


def test_native_follower(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n')
    runs: list[int] = []
    f = native_follow.NativeFollower(path, limit=3, recapture=lambda: runs.append(1))
    start = f.poll(None)
    assert start.action == "reset" and start.cursor.sequence == 2 and f.lines() == ['{"a":1}', '{"a":2}']
    with path.open("ab") as fh:
        fh.write(b'{"a":3}\n{"a":')  # the second line is still being written
    step = f.poll(start.cursor)
    assert (step.action, [r.line for r in step.events]) == ("append", [3])
    with path.open("ab") as fh:
        fh.write(b'4}\n')
    step = f.poll(step.cursor)
    assert [r.text for r in step.events] == ['{"a":4}'] and step.cursor.sequence == 4
    assert f.poll(step.cursor).action == "none"
    with path.open("ab") as fh:
        fh.write(b"".join(b'{"b":%d}\n' % n for n in range(5)))
    gap = f.poll(step.cursor)
    assert (gap.action, len(gap.events)) == ("reload", 3)
    path.write_bytes(b'{"a":1}\n{"changed":true}\n' + b'{"b":0}\n' * 7)  # same size class, rewritten
    rewritten = f.poll(gap.cursor)
    assert rewritten.action == "reset" and rewritten.cursor.generation != gap.cursor.generation
    assert len(runs) == 5  # the start, three growths and the rewrite


def test_native_follower_recaptures_the_session(real_fixtures: Path, tmp_path: Path) -> None:
    from store.agents import agentstate
    from store.agents.capture import capture_codex

    root = tmp_path / "codex"
    src = real_fixtures / "codex" / "sessions" / "2026" / "02" / "23"
    target = root / "2026" / "02" / "23"
    target.mkdir(parents=True)
    name = "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
    (target / name).write_bytes((src / name).read_bytes())
    with open_session_dir(tmp_path / "s", create=True) as sd:
        capture_codex(sd, root)
        follower = native_follow.native_follower(sd, "codex", root, target / name)
        cursor = follower.poll(None).cursor
        with (target / name).open("ab") as fh:
            fh.write(b'{"timestamp":"t","type":"event_msg","payload":{"type":"task_complete"}}\n')
        update = follower.poll(cursor)
        assert update.action == "append" and len(update.events) == 1
        cp = agentstate.load_checkpoint(sd, "codex", "019c8a70-dda7-7f33-98ea-f30553347322")
        assert cp is not None and cp.state.record_count == 20


# ------------------------------------------------------------------- the CAS backend in the checkpoint store


@pytest.fixture
def store_sd(tmp_path: Path, store_url: str | None) -> Iterator[SessionDir]:  # noqa: F811 - the fixture of tests.pg
    use_store(store_url)
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()
    use_store(None)


def test_sql_cas_log_resumes_from_a_cursor_on_another_machine(store_sd: SessionDir) -> None:
    here = sql_event_log(store_sd, new_generation=counter_generations(), max_events=4)
    there = sql_event_log(store_sd, max_events=4)  # another process: its own connection to the store
    try:
        first = here.append(REF, "chat_stream", {"message_id": "m1", "role": "user", "text": "hi"})
        assert first.cursor == Cursor("gen-1", 1)
        followed = there.replay(REF, Cursor("gen-1", 0))
        assert followed.status == "complete" and [e.cursor.sequence for e in followed.events] == [1]
        for n in range(2, 7):
            there.append(REF, "note", {"n": n})
        resumed = here.replay(REF, first.cursor)
        assert resumed.status == "partial" and [e.cursor.sequence for e in resumed.events] == [3, 4, 5, 6]
        assert here.replay(REF, Cursor("gen-1", 2)).status == "complete"
        messages, cursor = there.projection(REF)
        assert [m.text for m in messages] == ["hi"] and cursor == Cursor("gen-1", 6)
        new_cursor = here.reset(REF)
        assert new_cursor.generation != "gen-1" and there.cursor(REF) == new_cursor
        assert there.replay(REF, Cursor("gen-1", 6)).status == "unavailable"
    finally:
        here.close()
        there.close()


def test_sql_cas_log_concurrent_appenders_never_share_a_cursor(store_sd: SessionDir) -> None:
    logs = [sql_event_log(store_sd, max_events=512, max_retries=400) for _ in range(4)]
    got: list[int] = []
    lock = threading.Lock()

    def work(log: SqlEventLog, k: int) -> None:
        for n in range(15):
            event = log.append(REF, "note", {"writer": k, "n": n})
            with lock:
                got.append(event.cursor.sequence)

    threads = [threading.Thread(target=work, args=(log, k)) for k, log in enumerate(logs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert sorted(got) == list(range(1, 61))
        events = logs[0].replay(REF, Cursor(logs[0].cursor(REF).generation, 0)).events
        assert [e.cursor.sequence for e in events] == list(range(1, 61))
        per_writer: dict[int, list[int]] = {}
        for e in events:
            body = json.loads(e.payload)
            per_writer.setdefault(body["writer"], []).append(body["n"])
        assert per_writer == {k: list(range(15)) for k in range(4)}  # none lost, none twice, each in order
    finally:
        for log in logs:
            log.close()


def test_sql_cas_log_refuses_to_write_in_a_read_mode(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "s", create=True) as rw:
        log = sql_event_log(rw)
        log.append(REF, "note", {})
        log.close()
    with open_session_dir(tmp_path / "s", OpenMode.READ_ONLY) as ro:
        reader = sql_event_log(ro)
        assert reader.cursor(REF).sequence == 1
        with pytest.raises(ReadOnlyStore):
            reader.append(REF, "note", {})
        reader.close()
