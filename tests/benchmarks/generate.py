"""Large, realistic mothx session directories for benchmarks.

``ensure_large_dir(path)`` builds (once) a session directory with 20,000 sessions and 1,000,000 entries of
realistic JSON (200-400 bytes each): one session holds 50,000 entries, one holds 500, the rest share the
remainder. Entries of concurrent sessions interleave in ``seq`` order the way a long-lived database's do.
The directory is reused when its manifest (``generated.json`` beside ``sessions.db``) matches the spec.

Run as a script to build the default directories:  ``python -m tests.benchmarks.generate [--sessions N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from store.mothx.schema import create_v43  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"
MANIFEST = "generated.json"
GENERATOR_VERSION = 2
RARE_TERM = "zanzibarquux"      # appears in the entries of a handful of sessions
COMMON_TERM = "refactor"        # appears in many entries

_WORDS = (
    "the parser config module test function error value build cache request session handler retry "
    "update index query table column branch commit merge review fix add remove rename check output "
    "input file path line token model stream event worker thread lock lease run turn delivery channel "
    "project window layout screen widget style theme key binding export import schema migration"
).split()
_CWDS = tuple(
    f"/home/dev/{area}/{name}"
    for area in ("projects", "work", "src")
    for name in ("atlas", "beacon", "cobalt", "delta", "ember", "fjord", "granite", "harbor", "iris", "juniper",
                 "kestrel", "lumen", "meridian", "nimbus")
)
_TOOLS = ("bash", "read_file", "edit_file", "grep", "list_dir", "web_fetch")


@dataclass(frozen=True)
class LargeDirSpec:
    sessions: int = 20_000
    entries: int = 1_000_000
    big_session_entries: int = 50_000
    medium_session_entries: int = 500
    seed: int = 20261120


@dataclass(frozen=True)
class LargeDirFacts:
    """What a generated directory holds (read back from its manifest)."""

    path: Path
    spec: LargeDirSpec
    big_session_id: str
    medium_session_id: str
    rare_term: str
    common_term: str
    rare_term_sessions: int


def _rfc3339(epoch: float) -> str:
    """Go RFC3339Nano: fraction trimmed of trailing zeros, ``Z``."""
    whole = int(epoch)
    micros = int(round((epoch - whole) * 1_000_000))
    if micros >= 1_000_000:
        whole, micros = whole + 1, 0
    base = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if micros:
        return f"{base}.{f'{micros:06d}'.rstrip('0')}Z"
    return base + "Z"


def _session_sizes(spec: LargeDirSpec, rng: random.Random) -> list[int]:
    rest_sessions = spec.sessions - 2
    rest_entries = spec.entries - spec.big_session_entries - spec.medium_session_entries
    if rest_sessions < 1 or rest_entries < rest_sessions:
        raise ValueError("spec leaves too few entries for the remaining sessions")
    weights = [rng.paretovariate(1.6) for _ in range(rest_sessions)]
    scale = (rest_entries - rest_sessions) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    # About 3% of sessions are a bare header (no messages).
    for i in range(0, rest_sessions, 33):
        sizes[i] = 1
    diff = rest_entries - sum(sizes)
    i = 0
    while diff != 0:
        j = i % rest_sessions
        if diff > 0:
            step = min(diff, 40)
            sizes[j] += step
            diff -= step
        elif sizes[j] > 12:
            step = min(-diff, sizes[j] - 12)
            sizes[j] -= step
            diff += step
        i += 1
    return [spec.big_session_entries, spec.medium_session_entries, *sizes]


def _types_for(size: int, rng: random.Random) -> list[str]:
    """The entry-type sequence of one session of ``size`` entries (header first)."""
    types = ["session"]
    named = False
    while len(types) < size:
        left = size - len(types)
        if left < 6:
            types.extend(["message"] * left)
            break
        turn = ["turn_start", "message"]
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            turn += ["message", "message"]          # assistant tool call + tool result
        turn += ["message", "turn_end"]
        if not named and rng.random() < 0.85:
            turn.append("session_info")
            named = True
        roll = rng.random()
        if roll < 0.03:
            turn.append("model_change")
        elif roll < 0.04 and named:
            turn.append("session_info")
        elif roll < 0.045:
            turn.append("compaction")
        types.extend(turn[:left])
    return types


class _SessionState:
    __slots__ = ("sid", "cwd", "last_id", "turn", "turn_no", "msg_in_turn", "call_id", "call_tool", "first_kept")

    def __init__(self, sid: str, cwd: str) -> None:
        self.sid = sid
        self.cwd = cwd
        self.last_id: str | None = None
        self.turn = ""
        self.turn_no = 0
        self.msg_in_turn = 0
        self.call_id = ""
        self.call_tool = ""
        self.first_kept = ""


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(lo, hi)))


def _entry_data(
    kind: str, st: _SessionState, eid: str, ts: str, rng: random.Random, rare: bool
) -> dict[str, object]:
    base: dict[str, object] = {"type": kind, "id": eid, "parentId": st.last_id, "timestamp": ts}
    if kind == "session":
        base.update(version=3, cwd=st.cwd, parentSession="", channelType="local", channelId="",
                    forkBoundarySeq=0, seedLength=0, forkKind="", expertId="")
    elif kind == "turn_start":
        st.turn_no += 1
        st.turn = f"turn-{st.sid[:6]}-{st.turn_no}"
        st.msg_in_turn = 0
        base.update(turnId=st.turn, intentId=f"intent-{st.turn_no}", runId=f"run-{st.turn_no}", attempt=1)
    elif kind == "turn_end":
        base.update(turnId=st.turn, intentId=f"intent-{st.turn_no}", runId=f"run-{st.turn_no}",
                    status="completed", stopReason="stop")
    elif kind == "session_info":
        base.update(name=_words(rng, 2, 6).capitalize(), source=rng.choice(("auto", "auto", "manual")))
    elif kind == "model_change":
        base.update(provider="anthropic", modelId=rng.choice(("claude-sonnet-4", "claude-opus-4", "gpt-5")))
    elif kind == "compaction":
        base.update(summary="Summary: " + _words(rng, 15, 30), firstKeptEntryId=st.first_kept or "",
                    tokensBefore=rng.randint(20_000, 150_000), summaryVersion=1,
                    previousCompactionId="", lastSummarizedEntryId="")
    else:  # message
        n = st.msg_in_turn
        st.msg_in_turn += 1
        if n == 0:
            text = _words(rng, 6, 26)
            if rare:
                text += f" {RARE_TERM}"
            elif rng.random() < 0.05:
                text = f"please {COMMON_TERM} " + text
            msg: dict[str, object] = {"role": "user", "content": text, "timestamp": ts}
            st.first_kept = eid
        elif st.call_id:
            msg = {"role": "toolResult", "toolCallId": st.call_id, "toolName": st.call_tool,
                   "content": _words(rng, 4, 20), "isError": rng.random() < 0.03, "timestamp": ts}
            st.call_id = ""
        elif rng.random() < 0.55:
            st.call_id = f"call_{rng.getrandbits(48):012x}"
            tool = st.call_tool = rng.choice(_TOOLS)
            msg = {"role": "assistant", "contents": [
                {"type": "text", "text": _words(rng, 2, 8)},
                {"type": "toolCall", "toolCall": {"id": st.call_id, "name": tool, "kind": "function",
                                                  "arguments": json.dumps({"path": rng.choice(_CWDS)})}},
            ], "usage": {"input": rng.randint(500, 9000), "output": rng.randint(20, 900),
                         "totalTokens": rng.randint(600, 9900)}, "timestamp": ts}
        else:
            msg = {"role": "assistant", "contents": [{"type": "text", "text": _words(rng, 6, 26)}],
                   "usage": {"input": rng.randint(500, 9000), "output": rng.randint(20, 900),
                             "totalTokens": rng.randint(600, 9900)}, "timestamp": ts}
        base["message"] = msg
    return base


def build_large_dir(path: Path, spec: LargeDirSpec = LargeDirSpec()) -> LargeDirFacts:
    """Build the directory at ``path`` from scratch (the old one is replaced)."""
    path = Path(path)
    started = time.monotonic()
    rng = random.Random(spec.seed)
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    db_path = tmp / "sessions.db"
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -200000")
    conn.execute("BEGIN")
    create_v43(conn)

    sizes = _session_sizes(spec, rng)
    span_start = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
    span = datetime(2026, 11, 1, tzinfo=UTC).timestamp() - span_start
    sids = [f"{rng.getrandbits(64):016x}" for _ in sizes]
    states: list[_SessionState] = []
    keys: list[tuple[float, int, int]] = []
    types_of: list[list[str]] = []
    rare_sessions = set(rng.sample(range(2, len(sizes)), k=min(40, len(sizes) - 2)))
    session_rows = []
    for i, (sid, size) in enumerate(zip(sids, sizes, strict=True)):
        cwd = rng.choice(_CWDS)
        states.append(_SessionState(sid, cwd))
        types = _types_for(size, rng)
        types_of.append(types)
        if i == 0:
            start, step = span_start + span * 0.2, span * 0.75 / size
        else:
            start, step = span_start + rng.random() * span * 0.98, rng.uniform(4.0, 90.0)
        t = start
        for k in range(size):
            keys.append((t, i, k))
            t += step * rng.uniform(0.3, 1.7)
        channel, channel_id = "local", ""
        roll = rng.random()
        if roll < 0.03:
            channel, channel_id = "wechat", f"wx-{sid[:10]}"
        elif roll < 0.05:
            channel, channel_id = "feishu", f"fs-{sid[:10]}"
        parent, kind, boundary, seed_len = "", "", 0, 0
        if i > 10 and rng.random() < 0.01:
            parent = sids[rng.randrange(2, i)]
            kind = rng.choice(("session", "message"))
            boundary, seed_len = rng.randint(10, 5000), rng.randint(3, 40)
        session_rows.append((sid, cwd, _rfc3339(start), parent, 3, channel, channel_id, boundary, seed_len, kind, ""))
    conn.executemany(
        "INSERT INTO sessions (id,cwd,timestamp,parent_session,version,channel_type,channel_id,fork_boundary_seq,"
        "seed_length,fork_kind,expert_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        session_rows,
    )
    keys.sort()

    rare_done: set[int] = set()
    batch: list[tuple[str, str, str | None, str, str]] = []
    insert = "INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)"
    for t, i, k in keys:
        st = states[i]
        kind = types_of[i][k]
        ts = _rfc3339(t)
        eid = f"{rng.getrandbits(64):016x}"
        rare = i in rare_sessions and i not in rare_done and kind == "message" and st.msg_in_turn == 0
        if rare:
            rare_done.add(i)
        data = _entry_data(kind, st, eid, ts, rng, rare)
        batch.append((st.sid, eid, kind, st.last_id, ts, json.dumps(data, separators=(",", ":"))))
        st.last_id = eid
        if len(batch) >= 50_000:
            conn.executemany(insert, batch)
            batch.clear()
    if batch:
        conn.executemany(insert, batch)

    # Projects, pins, runs.
    now = "2026-11-01T00:00:00Z"
    names = ("Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Fjord")
    projects = [(f"proj{p:02d}", f"Project {name}", now, now) for p, name in enumerate(names)]
    conn.executemany("INSERT INTO projects (id, name, created_at, updated_at) VALUES (?,?,?,?)", projects)
    meta = []
    for sid in sids:
        if rng.random() < 0.3:
            meta.append((sid, rng.choice(projects)[0], 1 if rng.random() < 0.05 else 0, now))
    conn.executemany("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) VALUES (?,?,?,?)", meta)
    runs = []
    for sid in sids:
        if rng.random() < 0.05:
            runs.append((f"run-{sid}-1", sid, "completed", now, now, now))
    for sid in rng.sample(sids, k=min(20, len(sids))):
        status = rng.choice(("running", "queued", "waiting_for_approval"))
        runs.append((f"run-{sid}-active", sid, status, now, now, None))
    conn.executemany(
        "INSERT INTO session_runs (id, session_id, status, started_at, updated_at, finished_at) VALUES (?,?,?,?,?,?)",
        runs,
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for suffix in ("-wal", "-shm"):
        extra = db_path.with_name(db_path.name + suffix)
        if extra.exists():
            extra.unlink()
    facts = LargeDirFacts(
        path=path, spec=spec, big_session_id=sids[0], medium_session_id=sids[1], rare_term=RARE_TERM,
        common_term=COMMON_TERM, rare_term_sessions=len(rare_done),
    )
    manifest = {"generator_version": GENERATOR_VERSION, "spec": asdict(spec), "big_session_id": sids[0],
                "medium_session_id": sids[1], "rare_term": RARE_TERM, "common_term": COMMON_TERM,
                "rare_term_sessions": len(rare_done), "seconds": round(time.monotonic() - started, 1)}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)
    return facts


def read_facts(path: Path) -> LargeDirFacts | None:
    """The facts of a generated directory, or None when it is missing or was made by another version."""
    try:
        manifest = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("generator_version") != GENERATOR_VERSION or not (Path(path) / "sessions.db").is_file():
        return None
    return LargeDirFacts(
        path=Path(path), spec=LargeDirSpec(**manifest["spec"]), big_session_id=manifest["big_session_id"],
        medium_session_id=manifest["medium_session_id"], rare_term=manifest["rare_term"],
        common_term=manifest["common_term"], rare_term_sessions=manifest["rare_term_sessions"],
    )


def default_path(spec: LargeDirSpec = LargeDirSpec()) -> Path:
    return DATA_DIR / f"sessions-{spec.sessions // 1000}k-{spec.entries // 1000}k"


def ensure_large_dir(path: Path | None = None, spec: LargeDirSpec | None = None) -> Path:
    """The generated directory at ``path`` (default ``tests/benchmarks/data/...``), built when missing or stale.

    A ``path`` given without a ``spec`` (a benchmark's ``--dir``) is taken as it was generated, whatever its
    size; it is built (with the default spec) only when it holds no generated directory."""
    target = Path(path) if path is not None else default_path(spec or LargeDirSpec())
    facts = read_facts(target)
    if facts is None or (spec is None and path is None and facts.spec != LargeDirSpec()) \
            or (spec is not None and facts.spec != spec):
        build_large_dir(target, spec or LargeDirSpec())
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=LargeDirSpec.sessions)
    parser.add_argument("--entries", type=int, default=LargeDirSpec.entries)
    parser.add_argument("--path", type=Path, default=None)
    args = parser.parse_args(argv)
    spec = LargeDirSpec(sessions=args.sessions, entries=args.entries)
    started = time.monotonic()
    target = ensure_large_dir(args.path, spec)
    print(f"{target} ready in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
