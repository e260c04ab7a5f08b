"""Listing bases, the active snapshot's sources, manifest diffs, the reuse plan, and publishing a snapshot.

Publishing (15.2): one write transaction inserts the snapshot, files, chunks with their FTS rows (CJK bigrams),
nodes, edges, evidence and aliases; activates it with a compare-and-swap on ``config_revision``; and deletes
every other snapshot of the base (FTS rows explicitly, the rest by cascade).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from store.errors import RepairRefused, StoreError
from store.knowledge.base import (
    KnowledgeBaseUnindexed,
    KnowledgeStore,
    Layout,
    active_snapshot,
    base_ids,
    latest_snapshot,
    open_for_write,
    open_store,
    read_base,
)
from store.knowledge.model import (
    PATH_SAMPLE,
    Chunk,
    DiffSummary,
    Edge,
    Evidence,
    FileGraph,
    GraphSnapshot,
    KFile,
    KnowledgeBase,
    Node,
    ReusePlan,
    Snapshot,
    Source,
    cjk_bigrams,
)
from store.knowledge.query import EDGE_COLUMNS, EVIDENCE_COLUMNS, _chunk, _edge, _evidence, _node, _node_sql
from store.mothx.db import OpenMode


@dataclass(frozen=True)
class BaseSummary:
    """One row of the bases list: the base, its active (or latest) snapshot, or why it cannot be read."""

    base_id: str
    base: KnowledgeBase | None
    active: Snapshot | None
    latest: Snapshot | None
    problem: str = ""

    def to_json(self) -> dict[str, object]:
        return {"id": self.base_id, "base": self.base.to_json() if self.base else None,
                "activeSnapshot": self.active.to_json() if self.active else None,
                "latestSnapshot": self.latest.to_json() if self.latest else None, "problem": self.problem}


def list_bases(root: Path, mode: OpenMode) -> list[BaseSummary]:
    """Every base of ``root``'s knowledge-bases/, by id; a base that cannot be opened says why."""
    out: list[BaseSummary] = []
    for base_id in base_ids(root):
        try:
            with open_store(root, base_id, mode) as store, store.read() as conn:
                base = store.base(conn)
                try:
                    active: Snapshot | None = active_snapshot(conn, store.layout, base)
                except KnowledgeBaseUnindexed:
                    active = None
                latest = latest_snapshot(conn, store.layout, base.id)
                out.append(BaseSummary(base_id, base, active, latest))
        except StoreError as exc:
            out.append(BaseSummary(base_id, None, None, None, str(exc)))
    return out


def _files(conn: sqlite3.Connection, snapshot_id: str) -> list[KFile]:
    return [KFile(id=str(r[0]), snapshot_id=str(r[1]), relative_path=str(r[2]), content_sha256=str(r[3]),
                  byte_size=int(r[4]), media_type=str(r[5]), title=str(r[6]), status=str(r[7]))
            for r in conn.execute("SELECT id,snapshot_id,relative_path,content_sha256,byte_size,media_type,title,status "
                                  "FROM knowledge_files WHERE snapshot_id = ? ORDER BY relative_path", (snapshot_id,))]


def list_sources(root: Path, base_id: str, mode: OpenMode) -> tuple[KnowledgeBase, Snapshot, list[Source]]:
    """The active snapshot's file manifest with chunk counts (never file contents)."""
    with open_store(root, base_id, mode) as store, store.read() as conn:
        base = store.base(conn)
        snap = active_snapshot(conn, store.layout, base)
        counts = dict(conn.execute("SELECT file_id, count(*) FROM knowledge_chunks WHERE snapshot_id = ? "
                                   "GROUP BY file_id", (snap.id,)).fetchall())
        sources = [Source(f.relative_path, f.title, f.media_type, f.status, f.byte_size, int(counts.get(f.id, 0)),
                          f.content_sha256) for f in _files(conn, snap.id)]
    return base, snap, sources


def diff_files(old: Sequence[KFile], new: Sequence[KFile]) -> DiffSummary:
    before = {f.relative_path: f for f in old}
    after = {f.relative_path: f for f in new}
    added = sorted(p for p in after if p not in before)
    removed = sorted(p for p in before if p not in after)
    modified = sorted(p for p in after if p in before and after[p].identity != before[p].identity)
    unchanged = sum(1 for p in after if p in before and after[p].identity == before[p].identity)
    return DiffSummary(added=len(added), modified=len(modified), removed=len(removed), unchanged=unchanged,
                       added_paths=tuple(added[:PATH_SAMPLE]), modified_paths=tuple(modified[:PATH_SAMPLE]),
                       removed_paths=tuple(removed[:PATH_SAMPLE]))


def diff_manifest(root: Path, base_id: str, manifest: Sequence[KFile], mode: OpenMode) -> DiffSummary:
    """``manifest`` against the active snapshot's files; without an active snapshot every file is added."""
    with open_store(root, base_id, mode) as store, store.read() as conn:
        base = store.base(conn)
        try:
            old = _files(conn, active_snapshot(conn, store.layout, base).id)
        except KnowledgeBaseUnindexed:
            old = []
    return diff_files(old, manifest)


def reuse_plan(conn: sqlite3.Connection, layout: Layout, base: KnowledgeBase, manifest: Sequence[KFile]) -> ReusePlan:
    """The unchanged files' subgraphs of the active snapshot (15.5), all-or-nothing per file: a node with
    evidence outside its file, and an edge with an endpoint or evidence outside it, are left out."""
    try:
        snap = active_snapshot(conn, layout, base)
    except KnowledgeBaseUnindexed:
        return ReusePlan(base.config_revision, "", {})
    wanted = {f.relative_path: f for f in manifest}
    files = {f.id: f for f in _files(conn, snap.id)
             if f.relative_path in wanted and wanted[f.relative_path].identity == f.identity}
    if not files:
        return ReusePlan(base.config_revision, snap.id, {})
    # one pass over the snapshot's rows: which files every node's and edge's evidence lies in
    chunk_file: dict[str, str] = {}
    chunks: dict[str, list[Chunk]] = {fid: [] for fid in files}
    for row in conn.execute("SELECT c.id, c.snapshot_id, c.file_id, '', c.ordinal, c.text, c.start_line, c.end_line, "
                            "c.content_sha256 FROM knowledge_chunks c WHERE c.snapshot_id = ? ORDER BY c.file_id, "
                            "c.ordinal", (snap.id,)):
        chunk_file[str(row[0])] = str(row[2])
        if str(row[2]) in files:
            chunks[str(row[2])].append(replace(_chunk(row), relative_path=files[str(row[2])].relative_path))
    owners: dict[str, set[str]] = {}
    evidence_of: dict[str, list[Evidence]] = {}
    for row in conn.execute(f"SELECT {EVIDENCE_COLUMNS} FROM knowledge_evidence WHERE snapshot_id = ? ORDER BY id",
                            (snap.id,)):
        ev = _evidence(row)
        owner = ev.node_id or ev.edge_id
        owners.setdefault(owner, set()).add(chunk_file.get(ev.chunk_id, ""))
        if ev.node_id and ev.edge_id:
            owners.setdefault(ev.edge_id, set()).add(chunk_file.get(ev.chunk_id, ""))
        evidence_of.setdefault(chunk_file.get(ev.chunk_id, ""), []).append(ev)
    node_file: dict[str, str] = {}
    nodes: dict[str, list[Node]] = {fid: [] for fid in files}
    for row in conn.execute(f"{_node_sql(layout)} WHERE snapshot_id = ? ORDER BY id", (snap.id,)):
        where = owners.get(str(row[0]), set())
        if len(where) == 1:
            (fid,) = where
            if fid in files:
                node_file[str(row[0])] = fid
                nodes[fid].append(_node(row))
    edges: dict[str, list[Edge]] = {fid: [] for fid in files}
    for row in conn.execute(f"SELECT {EDGE_COLUMNS} FROM knowledge_edges WHERE snapshot_id = ? ORDER BY id", (snap.id,)):
        edge = _edge(row)
        where = owners.get(edge.id, set())
        fid = node_file.get(edge.from_node_id, "")
        if fid and node_file.get(edge.to_node_id) == fid and where == {fid}:
            edges[fid].append(edge)
    plan: dict[str, FileGraph] = {}
    for fid, f in files.items():
        own_nodes = {n.id for n in nodes[fid]}
        own_edges = {e.id for e in edges[fid]}
        evidence = [e for e in evidence_of.get(fid, [])
                    if (e.node_id in own_nodes if e.node_id else e.edge_id in own_edges)]
        plan[f.relative_path] = FileGraph(file=f, chunks=chunks[fid], nodes=nodes[fid], edges=edges[fid],
                                          evidence=evidence)
    return ReusePlan(base.config_revision, snap.id, plan)


def prepare_reuse_plan(root: Path, base_id: str, manifest: Sequence[KFile], mode: OpenMode) -> ReusePlan:
    with open_store(root, base_id, mode) as store, store.read() as conn:
        return reuse_plan(conn, store.layout, store.base(conn), manifest)


def _summary_text(value: object) -> str:
    to_json = getattr(value, "to_json", None)
    if to_json is None:
        return ""
    return json.dumps(to_json(), ensure_ascii=True, separators=(",", ":"), sort_keys=True)  # \uXXXX: any path binds


def store_snapshot(store: KnowledgeStore, graph: GraphSnapshot, finished_at: str) -> Snapshot:
    """Commit ``graph`` and activate it under the config-revision check; prune every other snapshot.

    ``store`` is open read-write at store version 4 (:func:`store.knowledge.base.open_for_write`). Raises
    :class:`RepairRefused` when the base's configuration changed since the indexing run read it.
    """
    snap = replace(graph.snapshot, status="completed", file_count=len(graph.files), chunk_count=len(graph.chunks),
                   node_count=len(graph.nodes), edge_count=len(graph.edges), finished_at=finished_at,
                   diff=graph.diff, discovery=graph.discovery)
    with fk_deferred_write(store) as conn:
        base = read_base(conn, store.layout, store.base_id, store.path)
        if base.config_revision != graph.base_config_revision:
            raise RepairRefused(f"Refused: the configuration of knowledge base {base.id} changed while it was indexed "
                                f"(revision {graph.base_config_revision} → {base.config_revision}); index it again.")
        conn.execute(
            "INSERT INTO knowledge_index_snapshots (id,knowledge_base_id,run_id,status,schema_version,file_count,"
            "chunk_count,node_count,edge_count,started_at,finished_at,error_summary,diff_summary,discovery_summary) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (snap.id, base.id, snap.run_id, snap.status, snap.schema_version, snap.file_count, snap.chunk_count,
             snap.node_count, snap.edge_count, snap.started_at, snap.finished_at, snap.error_summary,
             _summary_text(snap.diff), _summary_text(snap.discovery)))
        conn.executemany("INSERT INTO knowledge_files (id,snapshot_id,relative_path,content_sha256,byte_size,media_type,"
                         "title,status) VALUES (?,?,?,?,?,?,?,?)",
                         [(f.id, snap.id, f.relative_path, f.content_sha256, f.byte_size, f.media_type, f.title, f.status)
                          for f in graph.files])
        conn.executemany("INSERT INTO knowledge_chunks (id,snapshot_id,file_id,ordinal,text,start_line,end_line,"
                         "content_sha256) VALUES (?,?,?,?,?,?,?,?)",
                         [(c.id, snap.id, c.file_id, c.ordinal, c.text, c.start_line, c.end_line, c.content_sha256)
                          for c in graph.chunks])
        conn.executemany("INSERT INTO knowledge_chunk_fts (chunk_id,snapshot_id,text) VALUES (?,?,?)",
                         [(c.id, snap.id, cjk_bigrams(c.text)) for c in graph.chunks])
        conn.executemany("INSERT INTO knowledge_nodes (id,snapshot_id,kind,label,normalized_label,summary,attributes,"
                         "status,confidence) VALUES (?,?,?,?,?,?,?,?,?)",
                         [(n.id, snap.id, n.kind, n.label, n.normalized_label, n.summary, n.attributes, n.status,
                           n.confidence) for n in graph.nodes])
        conn.executemany("INSERT INTO knowledge_edges (id,snapshot_id,from_node_id,to_node_id,relation_type,confidence) "
                         "VALUES (?,?,?,?,?,?)", [(e.id, snap.id, e.from_node_id, e.to_node_id, e.relation_type,
                                                   e.confidence) for e in graph.edges])
        conn.executemany("INSERT INTO knowledge_evidence (id,snapshot_id,node_id,edge_id,chunk_id,start_line,end_line,"
                         "confidence) VALUES (?,?,?,?,?,?,?,?)",
                         [(e.id, snap.id, e.node_id, e.edge_id, e.chunk_id, e.start_line, e.end_line, e.confidence)
                          for e in graph.evidence])
        conn.executemany("INSERT INTO knowledge_entity_aliases (id,snapshot_id,normalized_alias,node_id) VALUES (?,?,?,?)",
                         [(a.id, snap.id, a.normalized_alias, a.node_id) for a in graph.aliases])
        swapped = conn.execute("UPDATE knowledge_bases SET active_snapshot_id = ?, updated_at = ? "
                               "WHERE id = ? AND config_revision = ?",
                               (snap.id, finished_at, base.id, graph.base_config_revision)).rowcount
        if swapped != 1:
            raise RepairRefused(f"Refused: knowledge base {base.id} changed while it was indexed; index it again.")
        prune(conn, base.id, keep=snap.id)
    return snap


PRUNED_TABLES = ("knowledge_evidence", "knowledge_entity_aliases", "knowledge_edges", "knowledge_nodes",
                 "knowledge_chunk_fts", "knowledge_chunks", "knowledge_files")


def prune(conn: sqlite3.Connection, base_id: str, keep: str) -> int:
    """Delete every snapshot of the base but ``keep``, with every row of theirs.

    The rows are deleted table by table through the ``snapshot_id`` indexes (what the cascade would delete):
    the reference's indexes all lead with ``snapshot_id``, so a cascade from a node or chunk would scan the
    whole child table once per deleted row. Run it inside :func:`fk_deferred_write`.
    """
    others = [str(r[0]) for r in conn.execute("SELECT id FROM knowledge_index_snapshots WHERE knowledge_base_id = ? "
                                              "AND id <> ?", (base_id, keep))]
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for snapshot_id in others:
        for table in PRUNED_TABLES:
            if table in tables and table != "knowledge_chunk_fts":
                conn.execute(f"DELETE FROM {table} WHERE snapshot_id = ?", (snapshot_id,))
        conn.execute("DELETE FROM knowledge_index_snapshots WHERE id = ?", (snapshot_id,))
    # The FTS mirror's snapshot_id is UNINDEXED: one pass deletes every row but the kept snapshot's (also rows
    # of no snapshot at all).
    conn.execute("DELETE FROM knowledge_chunk_fts WHERE snapshot_id <> ?", (keep,))
    return len(others)


@contextmanager
def fk_deferred_write(store: KnowledgeStore) -> Iterator[sqlite3.Connection]:
    """A write transaction whose foreign keys are checked once, at its end (``PRAGMA foreign_key_check``; any
    violation rolls it back), instead of row by row: see :func:`prune`."""
    store.db.conn.execute("PRAGMA foreign_keys = OFF")
    try:
        with store.db.write() as conn:
            yield conn
            bad = conn.execute("PRAGMA foreign_key_check").fetchmany(3)
            if bad:
                raise StoreError(f"{store.path.name}: the write would leave rows without their parent ({bad}); "
                                 "nothing was written.")
    finally:
        store.db.conn.execute("PRAGMA foreign_keys = ON")


def open_base_for_write(root: Path, base_id: str, applied_at: str) -> KnowledgeStore:
    return open_for_write(root, base_id, applied_at)
