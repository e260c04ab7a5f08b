"""The bulk paths of a capture: a tail checked in one piece gives exactly what reading it line by line gives,
trusted tails are written in bounded batches, the writer thread's errors surface, new files get 16 KiB pages."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import agentstate, capture_scan, checkpoint_fresh
from store.agents import capture as cap
from store.agents.checkpoint_db import PAGE_SIZE
from store.agents.checkpoint_records import StreamValidator
from store.mothx.sessiondir import SessionDir, open_session_dir

SID = "5b1f0c8e-0000-4000-8000-00000000b01c"
REL = f"-home-u-repo/{SID}.jsonl"


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()


def rec(n: int, text: str = "", extra: dict[str, object] | None = None) -> bytes:
    obj: dict[str, object] = {
        "parentUuid": None, "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": SID, "type": "user",
        "version": "2.1.0", "message": {"role": "user", "content": text or f"prompt {n}, with spaces: {{ }} [ ]"},
    }
    obj.update(extra or {})
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


CASES: dict[str, list[bytes]] = {
    "compact": [rec(1), rec(2, "héllo wörld ✓"), rec(3, '"quoted" \\ back\\slash')],
    "space outside a string": [rec(1), b'{"type": "user", "uuid": "x"}', rec(3)],
    "space before a colon": [rec(1), b'{"type" :"user"}', rec(3)],
    "array with spaces": [rec(1), b"[1, 2, 3]", rec(3)],
    "leading space": [rec(1), b' {"type":"user"}', rec(3)],
    "trailing space": [rec(1), b'{"type":"user"} ', rec(3)],
    "a tab": [rec(1), b'{"type":\t"user"}', rec(3)],
    "a CR": [rec(1), b'{"type":"user"}\r', rec(3)],
    "DEL inside a string": [rec(1), rec(2, "del \x7f here"), rec(3)],
    "a blank line": [rec(1), b"", rec(3)],
    "a blank line of spaces": [rec(1), b"   ", rec(3)],
    "not JSON": [rec(1), b"not json at all", rec(3)],
    "NaN": [rec(1), b'{"a": NaN}', b'{"a":NaN}', rec(3)],
    "two values": [rec(1), b'{"a":1}{"b":2}', rec(3)],
    "not UTF-8": [rec(1), b'{"type":"user","x":"\xff"}', rec(3)],
    "a lone surrogate escape": [rec(1), b'{"type":"user","x":"\\ud83d"}', rec(3)],
    "an unknown type with a space": [rec(1), b'{"type":"new kind","version":"2.1 beta"}', rec(3)],
    "an unknown field with a space": [rec(1), rec(2, extra={"new field": 1}), rec(3)],
    "an unknown block with a space": [rec(1), json.dumps({"type": "assistant", "message": {
        "content": [{"type": "odd block", "text": "a b"}]}}, separators=(",", ":")).encode(), rec(3)],
    "a scalar record": [rec(1), b'"just a string"', b"42", rec(3)],
    "a record across two lines": [rec(1), b'{"type":"user",', b'"uuid":"x"}', rec(3)],
    "an array across two lines": [rec(1), b"[1,", b"2]", rec(3)],
    "a value followed by another on its line": [rec(1), b'{"a":1}"b"', b"1 2", rec(3)],
    "drift of every kind between plain records, versions changing": [
        rec(1), rec(2, extra={"version": "2.2.0"}), rec(3, extra={"type": "brand-new"}),
        rec(4, extra={"version": None}), rec(5, extra={"type": ["not", "a", "name"]}), rec(6, extra={"type": 7}),
        rec(7, extra={"newField": 1, "version": "2.3 rc"}), rec(8, extra={"version": ""}),
        json.dumps({"type": "assistant", "version": "2.4.0", "message": {"content": [
            {"type": "text", "text": "a"}, {"type": "new_block"}, "bare", {"type": 3}]}}, separators=(",", ":")).encode(),
        rec(9), b'{"message":{"content":[{"type":"text"}]}}', b'{"type":"queue-operation","message":"x"}', rec(10)],
}


def _scan(path: Path, bulk: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[capture_scan.FileScan, list[str]]:
    with monkeypatch.context() as mp:
        if not bulk:
            mp.setattr(capture_scan, "_FAST_TAIL_BYTES", 0)
        drift = capture_scan.FastDrift("claude-code")
        scan = capture_scan.scan_file(path, REL, None, 0, 64 * 1024 * 1024, drift)
    return scan, drift.report()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_bulk_tail_equals_the_line_by_line_scan(case: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / REL
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(line + b"\n" for line in CASES[case]))
    fast, fast_drift = _scan(path, True, monkeypatch)
    slow, slow_drift = _scan(path, False, monkeypatch)
    for name in ("records", "digest", "restored_bytes", "tail", "tail_sizes", "tail_bytes", "pending_lines",
                 "unreadable", "problem", "bytes_read"):
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast_drift == slow_drift
    assert fast.tail is not None
    assert fast.tail_sizes == [len(t) for t in fast.tail]
    if case == "compact":
        assert capture_scan.bulk_tail(path.read_bytes(), None) is not None  # really the bulk path
    if "with a space" in case:
        assert any(" " in line for line in fast_drift) and not any("\x7f" in line for line in fast_drift)


def test_bulk_drift_of_real_records_equals_the_counter_fed_line_by_line(real_fixtures: Path) -> None:
    """The bulk loop tallies plain Claude Code records itself: on the real transcripts (compacted), its counts
    are those of :class:`DriftCounter` fed each record, file by file."""
    from store.agents.native_drift import DriftCounter

    files = sorted((real_fixtures / "claude-code").rglob("*.jsonl"))
    bulk = capture_scan.FastDrift("claude-code")
    plain = DriftCounter("claude-code")
    for path in files:
        lines = [json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
                 for raw in path.read_bytes().splitlines() if raw.strip()]
        if not lines:
            continue
        bulk.start_file()
        plain.start_file()
        found = capture_scan.bulk_tail(b"".join(line + b"\n" for line in lines), bulk)
        assert found is not None, path.name
        bulk.merge_marked(found[2])  # type: ignore[arg-type]
        for line in lines:
            plain.feed(line)
    assert bulk.by_version == plain.by_version and bulk.report() == plain.report()
    assert sum(d.records for d in bulk.by_version.values()) > 150


def test_bulk_tail_refuses_what_it_cannot_prove() -> None:
    assert capture_scan.bulk_tail(rec(1) + b"\n" + rec(2), None) is None  # the last line has no newline yet
    assert capture_scan.bulk_tail(b'{"a": 1}\n', None) is None
    assert capture_scan.bulk_tail(b'{"a":"x y"}\n', None) == ([b'{"a":"x y"}'], [11], None)
    # each value is scanned in place in the whole text: one that runs on past its line's newline is refused
    assert capture_scan.bulk_tail(b'{"a":1,\n"b":2}\n', None) is None
    assert capture_scan.bulk_tail(b'{"a":1,\n"b":2}\n', capture_scan.FastDrift("claude-code")) is None
    assert capture_scan.bulk_tail(b'[1,\n2]\n{"a":1}\n', None) is None
    assert capture_scan.bulk_tail(b'1\n2\n', None) == ([b"1", b"2"], [1, 1], None)


def test_an_appended_compact_tail_after_a_capture(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    path = root / REL
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(rec(n) + b"\n" for n in range(1, 4)))
    assert cap.capture_claude_code(sd, root).session(SID).status == "new"  # type: ignore[union-attr]
    with path.open("ab") as fh:
        fh.write(b"".join(rec(n) + b"\n" for n in range(4, 9)))
    again = cap.capture_claude_code(sd, root).session(SID)
    assert again is not None and (again.status, again.records_written) == ("appended", 5)
    assert cap.verify(sd, "claude-code", SID).status == "verified"
    cp = agentstate.load_checkpoint(sd, "claude-code", SID)
    assert cp is not None and [line.encode() for line in cp.lines(REL)] == [rec(n) for n in range(1, 9)]


def test_trusted_tails_are_written_in_bounded_batches(tmp_path: Path, sd: SessionDir,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """On SQLite a first capture's lines go in multi-row statements, each bounded by rows and bytes."""
    monkeypatch.setattr(checkpoint_fresh, "LINE_ROWS_PER_STATEMENT", 7)
    monkeypatch.setattr(checkpoint_fresh, "INSERT_BATCH_BYTES", 2000)
    sizes: list[int] = []
    original = checkpoint_fresh.LineInserts.flush

    def spy(self: checkpoint_fresh.LineInserts) -> int:
        if self.rows:
            sizes.append(len(self.rows))
            assert self.raw and len(self.rows) <= 7 and (self.size < 2000 + 400 or len(self.rows) == 1)
        return original(self)

    monkeypatch.setattr(checkpoint_fresh.LineInserts, "flush", spy)
    root = tmp_path / "projects"
    path = root / REL
    path.parent.mkdir(parents=True)
    lines = [rec(n, "x" * (n * 17 % 300)) for n in range(1, 60)]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    result = cap.capture_claude_code(sd, root).session(SID)
    assert result is not None and (result.status, result.records_written) == ("new", 59)
    assert sum(sizes) == 59 and len(sizes) > 59 // 7
    cp = agentstate.load_checkpoint(sd, "claude-code", SID)
    assert cp is not None and [line.encode() for line in cp.lines(REL)] == lines


def test_the_validator_takes_a_trusted_tail_only_for_a_trusted_new_file() -> None:
    tail = agentstate.TrustedTail("a.jsonl", 1, [b'{"a":1}'], [7])
    files = (agentstate.PersistedSessionStateFile("a.jsonl", 1, "0" * 64),)
    state = agentstate.PersistedSessionState("claude-code", "s", "00000000-0000-4000-8000-000000000001", "/w",
                                             "a.jsonl", 1, 1, 1, files)
    with pytest.raises(agentstate.InvalidSessionState, match="not a trusted file"):
        StreamValidator(state, {}, agentstate.InvalidSessionState).accept_tail(tail)
    with pytest.raises(agentstate.InvalidSessionState, match="inside its stored prefix"):
        StreamValidator(state, {"a.jsonl": 1}, agentstate.InvalidSessionState, frozenset({"a.jsonl"})).accept_tail(tail)
    with pytest.raises(agentstate.InvalidSessionState, match="more records"):
        StreamValidator(state, {}, agentstate.InvalidSessionState, frozenset({"a.jsonl"})).accept_tail(
            agentstate.TrustedTail("a.jsonl", 1, [b'{"a":1}', b'{"b":2}'], [7, 7]))
    v = StreamValidator(state, {}, agentstate.InvalidSessionState, frozenset({"a.jsonl"}))
    assert v.accept_tail(tail) == 8
    v.finish()


def test_an_error_of_the_writer_thread_surfaces(tmp_path: Path, sd: SessionDir,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "projects"
    (root / REL).parent.mkdir(parents=True)
    (root / REL).write_bytes(rec(1) + b"\n")

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("the writer broke")

    monkeypatch.setattr(agentstate, "capture_batch", broken)
    with pytest.raises(RuntimeError, match="the writer broke"):
        cap.capture_claude_code(sd, root)
    monkeypatch.undo()
    assert cap.capture_claude_code(sd, root).session(SID).status == "new"  # type: ignore[union-attr]


def test_the_next_batch_is_scanned_while_one_is_written_and_one_at_most_is_in_flight(
    tmp_path: Path, sd: SessionDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cap, "BATCH_SESSIONS", 1)
    root = tmp_path / "projects"
    ids = [f"5b1f0c8e-0000-4000-8000-0000000001{i:02d}" for i in range(4)]
    for s in ids:
        (root / "-home-u-repo").mkdir(parents=True, exist_ok=True)
        (root / "-home-u-repo" / f"{s}.jsonl").write_bytes(rec(1).replace(SID.encode(), s.encode()) + b"\n")
    prepared: list[str] = []
    scanned_meanwhile: list[bool] = []
    in_flight = [0, 0]  # now, most
    original_prepare, original_batch = cap._prepare, agentstate.capture_batch
    lock = threading.Lock()

    def prepare(db: object, source: cap.SessionSource, *args: object) -> object:
        prepared.append(source.agent_session_id)
        return original_prepare(db, source, *args)  # type: ignore[arg-type]

    def batch(db: object, items: list[agentstate.CaptureItem]) -> object:
        assert threading.current_thread() is not threading.main_thread()
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
        mine = prepared.index(items[0].agent_session_id)
        last = mine == len(ids) - 1
        deadline = time.monotonic() + 10
        while len(prepared) <= mine + 1 and not last and time.monotonic() < deadline:
            time.sleep(0.005)  # the capture scans the next session while this batch is being written
        scanned_meanwhile.append(len(prepared) > mine + 1 or last)
        try:
            return original_batch(db, items)  # type: ignore[arg-type]
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(cap, "_prepare", prepare)
    monkeypatch.setattr(agentstate, "capture_batch", batch)
    summary = cap.capture_claude_code(sd, root)
    assert summary.counts["new"] == 4 and all(scanned_meanwhile) and len(scanned_meanwhile) == 4
    assert in_flight[1] == 1


def test_a_new_checkpoint_file_has_16_kib_pages(tmp_path: Path, sd: SessionDir) -> None:
    root = tmp_path / "projects"
    (root / REL).parent.mkdir(parents=True)
    (root / REL).write_bytes(rec(1) + b"\n")
    cap.capture_claude_code(sd, root)
    conn = sqlite3.connect(f"file:{agentstate.state_db_path(sd)}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


@pytest.mark.parametrize("digest, ok", [("ab" * 32, True), ("AB" * 32, False), ("ab" * 31 + "a", False),
                                        ("ab" * 31 + "ag", False), ("g" + "a" * 63, False), ("ab" * 32 + "a", False),
                                        (" " + "a" * 63, False), ("", False)])
def test_a_file_digest_must_be_64_lowercase_hex_characters(digest: str, ok: bool) -> None:
    from store.agents.checkpoint_records import header_problem

    state = agentstate.PersistedSessionState(
        agent_id="claude-code", agent_session_id=SID, through_run_id="00000000-0000-4000-8000-000000000001",
        cwd="/w", transcript_path=REL, runtime_fencing_token=1, file_count=1, record_count=2,
        files=(agentstate.PersistedSessionStateFile(REL, 2, digest),))
    problem = header_problem(state)
    assert (problem is None) == ok, problem
    if not ok:
        assert problem is not None and "64 lowercase hex" in problem
