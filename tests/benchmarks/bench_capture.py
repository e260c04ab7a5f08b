"""Capture benchmarks (not part of the default test run).

1. Re-capture after appending one line to a 50 MB Claude Code transcript, divided by its first full capture
   (target: at most 0.05). Both are measured in this run, side by side, on fresh copies.
2. Capture of a tree of 1,000 Claude Code transcripts, in files per second (first capture, then an unchanged
   re-capture), each also divided by the floor measured in the same run: reading every file of the tree and
   ``json.loads``-ing every line (``bench_teamstore`` does the same on a tree twice the size, and PostgreSQL).

Run:  ``.venv/bin/python -m tests.benchmarks.bench_capture [--mb 50] [--files 1000]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from store.agents.capture import capture_claude_code  # noqa: E402
from store.mothx.sessiondir import open_session_dir  # noqa: E402

FIXTURES = ROOT.parent / "shared" / "fixtures" / "real" / "claude-code"
SEED_FILES = [
    FIXTURES / "-experiments-ideas" / "03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl",
    FIXTURES / "-src-experiments-claude_p" / "29ccd257-68b1-427f-ae5f-6524b7cb6f20" / "subagents" / "agent-a2271d1.jsonl",
    FIXTURES / "-Users-dain-workspace-claude-code-log-sample" / "326189cf-5676-4237-8cde-1ce80aae4a9f.jsonl",
]


def _seed_records() -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for f in SEED_FILES:
        for line in f.read_bytes().splitlines():
            obj = json.loads(line)
            if isinstance(obj, dict) and obj.get("uuid"):
                obj.pop("isSidechain", None)
                obj.pop("agentId", None)
                records.append(obj)
    if not records:
        raise SystemExit("The shared fixtures are needed to build realistic transcripts.")
    return records


def write_transcript(path: Path, session_id: str, target_bytes: int, seeds: list[dict[str, object]]) -> int:
    """A chained Claude Code transcript of about ``target_bytes`` made of real record shapes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    parent: str | None = None
    n = 0
    with path.open("wb") as fh:
        while written < target_bytes:
            rec = dict(seeds[n % len(seeds)])
            me = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{session_id}/{n}"))
            rec.update(parentUuid=parent, uuid=me, sessionId=session_id, isSidechain=False)
            line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            fh.write(line)
            written += len(line)
            parent = me
            n += 1
    return n


def append_one(path: Path, session_id: str, n: int) -> None:
    rec = {"parentUuid": None, "isSidechain": False, "type": "user", "sessionId": session_id,
           "message": {"role": "user", "content": f"one more line {n}"},
           "uuid": str(uuid.uuid4()), "timestamp": "2026-11-20T12:00:00.000Z"}
    with path.open("ab") as fh:
        fh.write(json.dumps(rec, separators=(",", ":")).encode() + b"\n")


def bench_append(mb: int, work: Path, seeds: list[dict[str, object]]) -> dict[str, float]:
    sid = "5e5510a0-0000-4000-8000-000000000050"
    master = work / "master" / "-bench-project" / f"{sid}.jsonl"
    records = write_transcript(master, sid, mb * 1024 * 1024, seeds)
    size = master.stat().st_size
    firsts: list[float] = []
    appends: list[float] = []
    for run in range(2):
        root = work / f"run{run}" / "projects"
        shutil.copytree(master.parent.parent, root)
        path = root / "-bench-project" / f"{sid}.jsonl"
        with open_session_dir(work / f"run{run}" / "sessions", create=True) as sd:
            t0 = time.perf_counter()
            first = capture_claude_code(sd, root)
            firsts.append(time.perf_counter() - t0)
            assert first.sessions[0].status == "new" and first.sessions[0].records_written == records
            for k in range(3):
                append_one(path, sid, k)
                t0 = time.perf_counter()
                again = capture_claude_code(sd, root)
                appends.append(time.perf_counter() - t0)
                assert again.sessions[0].status == "appended" and again.sessions[0].records_written == 1
        shutil.rmtree(work / f"run{run}")
    first_s = statistics.median(firsts)
    append_s = statistics.median(appends)
    return {"size_mb": size / 1e6, "records": records, "first_s": first_s, "append_s": append_s,
            "ratio": append_s / first_s}


def floor(root: Path) -> float:
    """Read every file below ``root`` and json.loads every line: the least a capture must do."""
    t0 = time.perf_counter()
    for path in sorted(root.rglob("*.jsonl")):
        with path.open("rb") as fh:
            for line in fh.read().splitlines():
                json.loads(line)
    return time.perf_counter() - t0


def bench_tree(files: int, work: Path, seeds: list[dict[str, object]]) -> dict[str, float]:
    root = work / "tree"
    total = 0
    for i in range(files):
        sid = str(uuid.UUID(int=i + 1))
        project = root / f"-home-user-project-{i % 25:02d}"
        write_transcript(project / f"{sid}.jsonl", sid, 8_000 + (i % 17) * 2_000, seeds)
        total += (project / f"{sid}.jsonl").stat().st_size
    floor(root)  # warm the page cache, as the capture below reads warm files
    floor_s = min(floor(root) for _ in range(3))
    with open_session_dir(work / "tree-sessions", create=True) as sd:
        t0 = time.perf_counter()
        summary = capture_claude_code(sd, root)
        first = time.perf_counter() - t0
        assert summary.counts["new"] == files
        t0 = time.perf_counter()
        again = capture_claude_code(sd, root)
        unchanged = time.perf_counter() - t0
        assert again.counts["unchanged"] == files
    return {"files": files, "mb": total / 1e6, "first_s": first, "first_fps": files / first,
            "unchanged_s": unchanged, "unchanged_fps": files / unchanged, "floor_s": floor_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args(argv)
    seeds = _seed_records()
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        work = Path(tmp)
        a = bench_append(args.mb, work, seeds)
        print(f"append: {a['size_mb']:.1f} MB, {a['records']:.0f} records; first capture {a['first_s']:.3f} s, "
              f"re-capture after one appended line {a['append_s']:.4f} s; ratio {a['ratio']:.4f} (target <= 0.05)")
        t = bench_tree(args.files, work, seeds)
        print(f"tree: {t['files']:.0f} transcripts, {t['mb']:.1f} MB; floor (read + json.loads every line) "
              f"{t['floor_s']:.3f} s; first capture {t['first_s']:.2f} s = {t['first_fps']:.0f} files/s "
              f"= {t['first_s'] / t['floor_s']:.2f}x floor; unchanged re-capture {t['unchanged_s']:.2f} s "
              f"= {t['unchanged_fps']:.0f} files/s = {t['unchanged_s'] / t['floor_s']:.2f}x floor")
    return 0 if a["ratio"] <= 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
