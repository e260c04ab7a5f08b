"""The demo session directory: what a new user sees first, and what every screen's snapshot tests show.

``build_demo`` writes a complete mothx session directory (``sessions.db`` at schema version 43 plus two
knowledge-base files) with realistic, deterministic content: a seeded random generator and timestamps fixed
relative to :data:`DEMO_NOW`, so every build holds the same rows. The directory is built in a temporary folder
beside the target and renamed into place, so a half-built demo never appears. ``ensure_demo`` reuses a demo
whose marker file holds the current :func:`demo_fingerprint` (a digest of the generator's source and data) and
rebuilds it otherwise, so a changed generator never leaves an old demo in use.

What the demo contains (each screen has real rows to show): 40+ sessions in three work directories and two
projects, conversations with thinking, tool calls and tool errors, turns with runs and run events, compactions
(applied, chained, and one whose kept entry does not exist), content overrides, forks of both kinds, one
session of more than 5,000 entries, an orphaned run under an expired lease with a pending approval, a run
under a live lease, a failed recovery, a delivery outbox in every state, and knowledge bases with an active
snapshot, FTS rows (CJK bigrams) and a small graph.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sqlite3
import tempfile
from importlib import resources
from pathlib import Path

from store.demo import text as T
from store.demo.builder import DemoBuilder
from store.demo.model import (
    DEMO_MARKER,
    DEMO_NOW,
    DEMO_NOW_UNIX,
    DEMO_SEED,
    DEMO_VERSION,
    KB_ATLAS,
    KB_HARBOR,
    LIVE_LEASE_EXPIRES_AT,
    MIN,
    DemoEntry,
    at,
    dumps,
    rfc3339,
)
from store.demo.story import tell
from store.errors import DatabaseCorrupt, StoreError
from store.mothx.db import OpenMode, open_database
from store.mothx.schema import split_statements
from store.mothx.sessiondir import open_session_dir
from store.paths import KNOWLEDGE_DIR, SESSIONS_DB, default_demo_dir

__all__ = [
    "DEMO_MARKER",
    "DEMO_NOW",
    "DEMO_NOW_UNIX",
    "DEMO_VERSION",
    "KB_ATLAS",
    "KB_HARBOR",
    "LIVE_LEASE_EXPIRES_AT",
    "build_demo",
    "demo_fingerprint",
    "demo_version_of",
    "ensure_demo",
    "is_current_demo",
]


# ---------------------------------------------------------------------------------------------------------------
# writing the databases
# ---------------------------------------------------------------------------------------------------------------


def _entry_json(e: DemoEntry) -> str:
    if e.type == "session":
        s = e.session
        data: dict[str, object] = {"type": "session", "version": 3, "id": e.id, "timestamp": rfc3339(e.ts), "cwd": s.cwd}
        if s.parent is not None:
            assert s.boundary is not None
            data.update({"parentSession": s.parent.id, "channelType": "local", "forkBoundarySeq": s.boundary.seq,
                         "seedLength": s.seed_length, "forkKind": s.fork_kind})
        elif s.channel_type != "local":
            data.update({"channelType": s.channel_type, "channelId": s.channel_id})
        return dumps(data)
    return dumps({"type": e.type, "id": e.id, "parentId": e.parent_id, "timestamp": rfc3339(e.ts), **e.fields})


def _stat_order(row: tuple[object, ...]) -> tuple[str, str]:
    return (str(row[0]), str(row[1]))


def _write_sessions(demo: DemoBuilder, root: Path) -> None:
    demo.entries.sort(key=lambda e: (e.wtime, e.order))
    for seq, e in enumerate(demo.entries, start=1):
        e.seq = seq
    sessions = sorted(demo.sessions, key=lambda s: (s.created, s.entries[0].order))
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        sd.require_writable()
        with sd.db.write() as conn:
            conn.execute("UPDATE schema_migrations SET applied_at = ?", ("2026-09-28 07:51:09",))
            conn.executemany(
                "INSERT INTO sessions (id,cwd,timestamp,parent_session,version,channel_type,channel_id,fork_boundary_seq,"
                "seed_length,fork_kind,expert_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [(s.id, s.cwd, rfc3339(s.created), s.parent.id if s.parent else "", 3, s.channel_type, s.channel_id,
                  s.boundary.seq if s.boundary else 0, s.seed_length, s.fork_kind, "") for s in sessions])
            conn.executemany(
                "INSERT INTO entries (seq,session_id,id,type,parent_id,timestamp,data) VALUES (?,?,?,?,?,?,?)",
                [(e.seq, e.session.id, e.id, e.type, e.parent_id, rfc3339(e.ts), _entry_json(e)) for e in demo.entries])
            runs = sorted((r for s in sessions for r in s.runs), key=lambda r: (r.started, r.id))
            conn.executemany(
                "INSERT INTO session_runs (id,session_id,intent_id,retry_of,attempt,work_dir,source,model,mode,status,started_at,"
                "updated_at,finished_at,error,error_info_json,progress_json,usage_json,context_usage_json) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(r.id, r.session.id, r.intent_id, r.retry_of, r.attempt, r.session.cwd, r.source, r.model, "yolo", r.status,
                  rfc3339(r.started), rfc3339(r.updated), rfc3339(r.finished) if r.finished is not None else None, r.error,
                  dumps(r.error_info), dumps({} if r.finished is not None else {"phase": "executing_tool"}),
                  dumps(r.usage), dumps(r.context)) for r in runs])
            demo.events.sort(key=lambda x: (x[0], x[1]))
            conn.executemany(
                "INSERT INTO session_run_events (id,session_id,run_id,event_type,source,status,model,mode,timestamp,data) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)", [row for _, _, row in demo.events])
            turns = sorted((tr for s in sessions for tr in s.turns), key=lambda tr: tr.start.seq)
            conn.executemany(
                "INSERT INTO conversation_turns (id,session_id,intent_id,kind,status,start_seq,end_seq,started_at,ended_at) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                [(tr.id, tr.session.id, tr.intent_id, "conversation", tr.status, tr.start.seq, tr.end.seq if tr.end else None,
                  rfc3339(tr.started), rfc3339(tr.ended) if tr.ended is not None else None) for tr in turns])
            conn.executemany(
                "INSERT INTO session_execution_intents (id,session_id,source,model,mode,work_dir,request_fingerprint,request_json,"
                "policy_json,created_at) VALUES (?,?,?,?,?,?,?,?,?,?)", demo.exec_intents)
            conn.executemany(
                "INSERT INTO session_run_recoveries (run_id,session_id,state,trigger_source,reason_code,attempt,previous_lease_epoch,"
                "last_error,next_retry_at,started_at,updated_at,completed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", demo.recoveries)
            leases = []
            for s in sessions:
                if not s.leases:
                    continue
                last = max(s.leases, key=lambda lease: lease.acquired)
                token = hashlib.sha256(f"{s.id}:{len(s.leases)}:{DEMO_SEED}".encode()).hexdigest()
                leases.append((s.id, last.owner[0], last.owner[1], "process", token, len(s.leases), last.run_id, last.purpose,
                               last.state, last.acquired // 1000, last.heartbeat // 1000, last.expires // 1000, last.heartbeat // 1000))
            conn.executemany(
                "INSERT INTO session_runtime_leases (session_id,owner_instance_id,owner_pid,owner_kind,lease_token_hash,epoch,run_id,"
                "purpose,state,acquired_at,heartbeat_at,expires_at,updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", leases)
            conn.executemany(
                "INSERT INTO session_attachments (id,session_id,run_id,origin,kind,filename,media_type,byte_size,sha256,storage_key,"
                "status,created_at,expires_at,metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", demo.attachments)
            conn.executemany(
                "INSERT INTO delivery_intents (id,session_id,run_id,platform,target_id,reply_message_id,transport_context,status,"
                "created_at,updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)", demo.intents)
            conn.executemany(
                "INSERT INTO delivery_operations (id,intent_id,operation_key,artifact_id,operation_kind,sequence,depends_on,"
                "idempotency_key,payload_digest,status,provider_asset_id,provider_message_id,provider_state,attempt_count,"
                "next_attempt_at,failure_code,lease_owner,lease_epoch,lease_expires_at,created_at,updated_at,"
                "retry_window_started_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", demo.operations)
            conn.executemany(
                "INSERT INTO session_fork_requests (request_key_hash,request_fingerprint,source_session_id,child_session_id,created_at) "
                "VALUES (?,?,?,?,?)",
                [(key, f"{src.id}|{at_msg.seq if at_msg else 0}|{mode}", src.id, child.id, rfc3339(at))
                 for at, key, mode, src, child, at_msg in sorted(demo.fork_requests, key=lambda x: x[0])])
            conn.executemany("INSERT INTO projects (id,name,created_at,updated_at) VALUES (?,?,?,?)",
                             [(pid, name, rfc3339(at), rfc3339(at)) for pid, name, at in demo.projects])
            conn.executemany(
                "INSERT INTO session_metadata (session_id,project_id,pinned,updated_at) VALUES (?,?,?,?)",
                [(s.id, s.project, int(s.pinned), rfc3339(s.created + 5 * MIN)) for s in sessions if s.project or s.pinned])
            conn.executemany(
                "INSERT INTO session_capabilities (session_id,mode,display_mode,delegate_mode,multi_agent,workflows,web_search,browser,"
                "a2a_master,updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(s.id, "yolo", "work", 0, 0, 0, int(s.cwd == T.NOTES), 0, 0, rfc3339(s.created)) for s in sessions])
            stats: list[tuple[object, ...]] = sorted(demo.stats, key=_stat_order)
            conn.executemany(
                "INSERT INTO request_stats (timestamp,session_id,provider,model,input_tokens,output_tokens,total_tokens,duration_ms,"
                "protocol) VALUES (?,?,?,?,?,?,?,?,?)", stats)
            conn.executemany(
                "INSERT INTO cron_jobs (id,session_id,name,prompt,schedule,oneshot,mode,work_dir,a2a_target,a2a_token,enabled,"
                "created_at,last_run,next_run,run_count,last_status,last_error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", demo.cron)
            conn.executemany("INSERT INTO session_channel_tools (session_id,tool_name,enabled,updated_at) VALUES (?,?,?,?)",
                             demo.channel_tools)
            conn.executemany("INSERT INTO session_channel_tool_generations (session_id,generation,updated_at) VALUES (?,?,?)",
                             sorted({(row[0], 3, row[3]) for row in demo.channel_tools}))
        result = sd.db.quick_check()
        if result != "ok":
            raise DatabaseCorrupt(f"The demo database failed its integrity check: {result}.")


def _write_knowledge(demo: DemoBuilder, root: Path) -> None:
    """Two bases: ``harbor-docs``, built by the deterministic indexer (:mod:`store.knowledge.indexer`) from the
    made-up Harbor API folder the demo ships (``data/kb/harbor_api``: Markdown and Python), with fixed times;
    and ``atlas-notes``, a store-version-1 base whose only indexing run failed (no active snapshot)."""
    from store.knowledge.indexer import index_folder

    folder = root / KNOWLEDGE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    started = at(11, 19, 17, 2, 10)
    stamps = iter([rfc3339(started), rfc3339(started + 94_310)])
    with resources.as_file(resources.files("store.demo").joinpath("data", "kb", "harbor_api")) as source:
        index_folder(root, Path(source), "Harbor API docs", OpenMode.READ_WRITE, base_id=KB_HARBOR,
                     recorded_root=T.HARBOR, now=lambda: next(stamps))
    ddl = split_statements(resources.files("store").joinpath("sql", "knowledge_base_v1.sql").read_text(encoding="utf-8"))
    created = rfc3339(at(10, 19, 9, 12, 44))
    db = open_database(folder / f"{KB_ATLAS}.db", OpenMode.READ_WRITE, create=True, foreign_keys=True)
    try:
        with db.write() as conn:
            for statement in ddl:
                conn.execute(statement)
            conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (1, ?)", ("2026-10-19 09:12:44",))
            _atlas_kb(demo, conn, created)
        result = db.quick_check()
        if result != "ok":
            raise DatabaseCorrupt(f"The demo knowledge base {KB_ATLAS} failed its integrity check: {result}.")
    finally:
        db.close()
    for kb in (KB_HARBOR, KB_ATLAS):
        path = folder / f"{kb}.db"
        check = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            result = str(check.execute("PRAGMA quick_check").fetchone()[0])
        finally:
            check.close()
        if result != "ok":
            raise DatabaseCorrupt(f"The demo knowledge base {kb} failed its integrity check: {result}.")


def _atlas_kb(demo: DemoBuilder, conn: sqlite3.Connection, created: str) -> None:
    """A base whose only indexing run failed: no active snapshot ("knowledge base unindexed")."""
    conn.execute(
        "INSERT INTO knowledge_bases (id,name,root_dir,preprocess_profile,provider,model,mode,thinking_level,schedule,enabled,"
        "active_snapshot_id,created_at,updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (KB_ATLAS, "Atlas design notes", T.ATLAS + "/docs", "mixed", "openai", "gpt-5.1-codex", "yolo", "", "manual", 1, "",
         created, created))
    started = at(11, 12, 8, 20, 5)
    conn.execute(
        "INSERT INTO knowledge_index_snapshots (id,knowledge_base_id,run_id,status,schema_version,file_count,chunk_count,"
        "node_count,edge_count,started_at,finished_at,error_summary) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (demo.pid("snap_"), KB_ATLAS, demo.pid("kbrun_"), "failed", 1, 0, 0, 0, 0, rfc3339(started), rfc3339(started + 3_870),
         "graph extraction failed: provider returned 401 Unauthorized (invalid API key)"))


# ---------------------------------------------------------------------------------------------------------------
# building, installing, reusing
# ---------------------------------------------------------------------------------------------------------------


def _marker(root: Path) -> Path:
    return root / DEMO_MARKER


_FINGERPRINT: list[str] = []


def demo_fingerprint() -> str:
    """SHA-256 over the source of the whole store (the demo is written by store code: its generator, the fork
    copy, the indexer, the event store, …), the DDL it executes and its data files (computed once per process).
    A demo built by other code is rebuilt."""
    if not _FINGERPRINT:
        digest = hashlib.sha256(f"demo v{DEMO_VERSION}\n".encode())
        root = Path(str(resources.files("store")))
        for item in sorted(root.rglob("*")):
            if "__pycache__" in item.parts or not item.is_file():
                continue
            if item.suffix in (".py", ".sql", ".json", ".md", ".txt", ".toml"):
                name = item.relative_to(root).as_posix()
                digest.update(name.encode() + b"\0" + item.read_bytes() + b"\0")
        _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def _marker_data(target_dir: Path) -> dict[str, object]:
    try:
        data = json.loads(_marker(Path(target_dir)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def demo_version_of(target_dir: Path) -> int | None:
    """The demo version recorded in ``target_dir``'s marker file, or None when it is not a demo directory."""
    version = _marker_data(target_dir).get("demoVersion")
    return version if isinstance(version, int) else None


def is_current_demo(target_dir: Path) -> bool:
    """True when ``target_dir`` holds a demo built by this very generator (same fingerprint)."""
    target = Path(target_dir)
    return _marker_data(target).get("fingerprint") == demo_fingerprint() and (target / SESSIONS_DB).is_file()


# Further parts of the demo live in their own modules of this package. Each has ``add_to_demo(root: Path)``,
# called in this order once the sessions and knowledge bases are written; it adds what its screen needs (rows
# through raw SQL on ``root / SESSIONS_DB``, files under ``root``), deterministically (no clock, no randomness
# but a seeded ``random.Random``). Its source is part of :func:`demo_fingerprint`, like every module here.
DEMO_PARTS: tuple[str, ...] = ("store.demo.tools", "store.demo.events", "store.demo.deliveries", "store.demo.forks")


def _generate(root: Path) -> None:
    demo = DemoBuilder()
    tell(demo)
    _write_sessions(demo, root)
    _write_knowledge(demo, root)
    for name in DEMO_PARTS:
        importlib.import_module(name).add_to_demo(root)
    marker = {"demoVersion": DEMO_VERSION, "demoNow": DEMO_NOW, "seed": DEMO_SEED, "fingerprint": demo_fingerprint()}
    _marker(root).write_text(dumps(marker) + "\n", encoding="utf-8")


def build_demo(target_dir: Path, *, force: bool = False) -> Path:
    """Write the demo session directory at ``target_dir`` and return it.

    An existing non-empty ``target_dir`` is replaced only with ``force`` and only when it is a demo directory
    (it has the marker file): a real session directory is never overwritten.
    """
    return _build(Path(target_dir).expanduser().absolute(), force=force, keep_current=False)


def _build(target: Path, *, force: bool, keep_current: bool) -> Path:
    if target.exists():
        if not target.is_dir():
            raise StoreError(f"{target} exists and is not a folder; the demo cannot be written there.")
        if any(target.iterdir()):
            if not _marker(target).exists():
                raise StoreError(f"{target} is not a Sessionscope demo directory; refusing to replace it.")
            if not force:
                raise StoreError(f"{target} already holds a demo; rebuild it with force.")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
    try:
        _generate(staging)
        if keep_current and is_current_demo(target):
            shutil.rmtree(staging, ignore_errors=True)  # another process installed the same demo meanwhile
            return target
        _install(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _install(staging: Path, target: Path) -> None:
    """Rename the finished ``staging`` folder to ``target``, moving an old demo aside first."""
    old: Path | None = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rmdir(old)
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except OSError:
        if old is not None and not target.exists():
            os.rename(old, target)
            old = None
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def ensure_demo(target_dir: Path | None = None) -> Path:
    """The demo directory, built when missing or outdated and reused (untouched) when current."""
    target = Path(target_dir).expanduser().absolute() if target_dir is not None else default_demo_dir()
    if is_current_demo(target):
        return target
    try:
        return _build(target, force=True, keep_current=True)
    except OSError:
        if is_current_demo(target):  # another process installed the same demo first
            return target
        raise
