"""The knowledge-graph query of reference 15.4: FTS5 chunks, seed nodes, a bounded breadth-first graph.

Everything runs in one read transaction against the base's active snapshot, in any open mode. Steps:

1. the base needs an active snapshot with status ``completed`` (else :class:`KnowledgeBaseUnindexed`);
2. :func:`query_terms` / :func:`match_expression`: the terms, each with CJK bigrams, double-quoted, ``OR``-joined;
   a quoted term holds only letters, digits, ``_-./`` and CJK, so FTS syntax a user types (``"``, ``*``,
   ``AND``, ``NEAR(``) is plain text and never an error;
3. the chunks by ``bm25`` then ordinal (:data:`CHUNK_SQL`, default limit 8);
4. seed nodes: those cited by evidence of the chunks, then those with an alias equal to a term;
5. breadth-first over the edges (either endpoint), 2 hops, at most 64 nodes and 96 edges (``truncated``);
   the seeds are never trimmed and every node is returned once;
6. the evidence of every returned node and edge;
7. a ``candidate`` node with evidence stays (a ``candidate_node`` uncertainty); one without is dropped and
   counted (``candidate_excluded``), with the edges that touch it;
8. the uncertainties, and the order: nodes whose label holds a term first, then by evidence count, then label;
   edges by relation weight, evidence count, id.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from store.knowledge.base import Layout, active_snapshot, open_store
from store.knowledge.model import Chunk, Edge, Evidence, Node, QueryResult, Uncertainty, cjk_bigrams
from store.mothx.db import OpenMode
from store.words import plural

DEFAULT_LIMIT = 8
MAX_LIMIT = 500
MAX_HOPS = 2
MAX_NODES = 64
MAX_EDGES = 96
LOW_CONFIDENCE = 0.5
BATCH = 400  # bound parameters per IN (...) list

# Relation weights of step 8: defines / declares highest, co_mentions lowest, every other relation between.
RELATION_WEIGHT = {"defines": 3, "declares": 3, "co_mentions": 0}
OTHER_RELATION_WEIGHT = 1

SPLIT = re.compile(r"[^_\-./a-z0-9\u4e00-\u9fff]+")
WORDLIKE = re.compile(r"[a-z0-9\u4e00-\u9fff]")

CHUNK_SQL = (
    "SELECT c.id, c.snapshot_id, c.file_id, kf.relative_path, c.ordinal, c.text, c.start_line, c.end_line, "
    "c.content_sha256 "
    "FROM knowledge_chunk_fts AS f "
    "JOIN knowledge_chunks AS c ON c.id = f.chunk_id "
    "JOIN knowledge_files AS kf ON kf.id = c.file_id "
    "WHERE f.snapshot_id = ? AND knowledge_chunk_fts MATCH ? "
    "ORDER BY bm25(knowledge_chunk_fts), c.ordinal ASC "
    "LIMIT ?"
)


def query_terms(query: str) -> list[str]:
    """Step 2's terms: lowercase, split on every character but ``_-./``, ASCII letters, digits and CJK;
    punctuation-only terms dropped."""
    return [t for t in SPLIT.split(query.lower()) if t and WORDLIKE.search(t)]


def match_expression(terms: Sequence[str]) -> str:
    """The FTS5 MATCH text: each term with CJK bigrams, in double quotes, joined with `` OR ``."""
    return " OR ".join('"' + " ".join(cjk_bigrams(t).split()) + '"' for t in terms)


def _batches(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(ids), BATCH):
        yield ids[i : i + BATCH]


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _node_sql(layout: Layout) -> str:
    status = "status" if layout.has("knowledge_nodes", "status") else "'fact' AS status"
    confidence = "confidence" if layout.has("knowledge_nodes", "confidence") else "1.0 AS confidence"
    return f"SELECT id, snapshot_id, kind, label, normalized_label, summary, attributes, {status}, {confidence} FROM knowledge_nodes"


def _node(row: Any) -> Node:
    return Node(id=str(row[0]), snapshot_id=str(row[1]), kind=str(row[2]), label=str(row[3]),
                normalized_label=str(row[4]), summary=str(row[5] or ""), attributes=str(row[6] or "{}"),
                status=str(row[7] or "fact"), confidence=float(row[8] if row[8] is not None else 1.0))


def _edge(row: Any) -> Edge:
    return Edge(id=str(row[0]), snapshot_id=str(row[1]), from_node_id=str(row[2]), to_node_id=str(row[3]),
                relation_type=str(row[4]), confidence=float(row[5] if row[5] is not None else 1.0))


def _evidence(row: Any) -> Evidence:
    return Evidence(id=str(row[0]), snapshot_id=str(row[1]), node_id=str(row[2] or ""), edge_id=str(row[3] or ""),
                    chunk_id=str(row[4]), start_line=int(row[5]), end_line=int(row[6]),
                    confidence=float(row[7] if row[7] is not None else 1.0))


def _chunk(row: Any) -> Chunk:
    return Chunk(id=str(row[0]), snapshot_id=str(row[1]), file_id=str(row[2]), relative_path=str(row[3]),
                 ordinal=int(row[4]), text=str(row[5]), start_line=int(row[6]), end_line=int(row[7]),
                 content_sha256=str(row[8]))


EVIDENCE_COLUMNS = "id, snapshot_id, node_id, edge_id, chunk_id, start_line, end_line, confidence"
EDGE_COLUMNS = "id, snapshot_id, from_node_id, to_node_id, relation_type, confidence"


def search_chunks(conn: sqlite3.Connection, snapshot_id: str, match: str, limit: int) -> list[Chunk]:
    if not match:
        return []
    return [_chunk(r) for r in conn.execute(CHUNK_SQL, (snapshot_id, match, limit))]


def _seeds(conn: sqlite3.Connection, layout: Layout, snapshot_id: str, chunks: Sequence[Chunk],
           terms: Sequence[str]) -> list[str]:
    seeds: dict[str, None] = {}
    for chunk in chunks:  # chunk rank order, then the evidence's own order
        for row in conn.execute("SELECT node_id FROM knowledge_evidence WHERE snapshot_id = ? AND chunk_id = ? "
                                "AND node_id <> '' ORDER BY start_line, id", (snapshot_id, chunk.id)):
            seeds.setdefault(str(row[0]), None)
    if layout.has_aliases and terms:
        unique = list(dict.fromkeys(terms))
        for part in _batches(unique):
            for row in conn.execute(f"SELECT node_id FROM knowledge_entity_aliases WHERE snapshot_id = ? AND "
                                    f"normalized_alias IN ({_marks(len(part))}) ORDER BY normalized_alias, id",
                                    (snapshot_id, *part)):
                seeds.setdefault(str(row[0]), None)
    return list(seeds)


def _edges_of(conn: sqlite3.Connection, snapshot_id: str, node_id: str, limit: int,
              among: Sequence[str] = ()) -> list[Edge]:
    """The first ``limit`` edges with ``node_id`` as either endpoint, outgoing first, each side in the order of
    the reference's edge indexes (relation, then row); ``among``: only those whose other endpoint is one of these
    nodes. One indexed read that stops at ``limit``: a node with 10,000 edges costs ``limit`` rows (sorting them
    by id would read all 10,000)."""
    if among:
        marks = _marks(len(among))
        sql = (f"SELECT {EDGE_COLUMNS} FROM knowledge_edges WHERE snapshot_id = ? AND from_node_id = ? AND to_node_id "
               f"IN ({marks}) UNION ALL SELECT {EDGE_COLUMNS} FROM knowledge_edges WHERE snapshot_id = ? AND "
               f"to_node_id = ? AND from_node_id IN ({marks}) LIMIT ?")
        args: tuple[object, ...] = (snapshot_id, node_id, *among, snapshot_id, node_id, *among, limit)
    else:
        sql = (f"SELECT {EDGE_COLUMNS} FROM knowledge_edges WHERE snapshot_id = ? AND from_node_id = ? UNION ALL "
               f"SELECT {EDGE_COLUMNS} FROM knowledge_edges WHERE snapshot_id = ? AND to_node_id = ? LIMIT ?")
        args = (snapshot_id, node_id, snapshot_id, node_id, limit)
    return [_edge(r) for r in conn.execute(sql, args)]


def expand(conn: sqlite3.Connection, snapshot_id: str, seeds: Sequence[str], *, hops: int = MAX_HOPS,
           max_nodes: int = MAX_NODES, max_edges: int = MAX_EDGES) -> tuple[list[str], list[Edge], bool]:
    """Step 5: node ids (seeds first), edges, truncated.

    Hop by hop, each node of the frontier in order, its edges in the order :func:`_edges_of` reads them: an edge whose other end is new adds
    that node while fewer than ``max_nodes`` are held (else the edge is left out and the result is truncated);
    the edges stop at ``max_edges`` (truncated). Once the nodes are full only edges between held nodes can
    still be added, and only those are read."""
    nodes: dict[str, None] = dict.fromkeys(seeds)
    edges: dict[str, Edge] = {}
    truncated = False
    frontier = list(nodes)
    for _hop in range(hops):
        if not frontier or len(edges) >= max_edges:
            break
        following: list[str] = []
        for node_id in frontier:
            if len(edges) >= max_edges:
                truncated = True
                break
            full = len(nodes) >= max_nodes
            among = list(nodes) if full and len(nodes) <= BATCH else []
            limit = max_edges + 1  # at most len(edges) of them were seen already: one more tells "there is more"
            found = _edges_of(conn, snapshot_id, node_id, limit, among)
            if full and not among and found:
                truncated = True
            for edge in found:
                if edge.id in edges:
                    continue
                other = edge.to_node_id if edge.from_node_id == node_id else edge.from_node_id
                if len(edges) >= max_edges:
                    truncated = True
                    break
                if other not in nodes:
                    if len(nodes) >= max_nodes:
                        truncated = True
                        continue
                    nodes[other] = None
                    following.append(other)
                edges[edge.id] = edge
            if full and among and not truncated and len(_edges_of(conn, snapshot_id, node_id, len(found) + 1)) > len(found):
                truncated = True  # an edge to a node that is not held was left out
        frontier = following
    return list(nodes), list(edges.values()), truncated


def _evidence_of(conn: sqlite3.Connection, snapshot_id: str, node_ids: Sequence[str],
                 edge_ids: Sequence[str], indexed: bool = False) -> list[Evidence]:
    """Step 6 in one read per batch. The reference's only evidence index leads with (snapshot, chunk): on a base
    without the helper indexes of :data:`store.knowledge.base.HELPER_INDEXES` this reads the snapshot's
    evidence once."""
    rows: dict[str, Evidence] = {}
    nodes, edges = list(node_ids), list(edge_ids)
    while nodes or edges:
        n_part, nodes = nodes[:BATCH // 2], nodes[BATCH // 2:]
        e_part, edges = edges[:BATCH // 2], edges[BATCH // 2:]
        tests = ([f"node_id IN ({_marks(len(n_part))})"] if n_part else []) + \
                ([f"edge_id IN ({_marks(len(e_part))})"] if e_part else [])
        if indexed:  # one indexed search per column
            sql = " UNION ALL ".join(f"SELECT {EVIDENCE_COLUMNS} FROM knowledge_evidence WHERE snapshot_id = ? AND {t}"
                                     for t in tests)
            args: tuple[object, ...] = ((snapshot_id, *n_part) if n_part else ()) + ((snapshot_id, *e_part) if e_part else ())
        else:  # one pass over the snapshot's evidence
            sql = f"SELECT {EVIDENCE_COLUMNS} FROM knowledge_evidence WHERE snapshot_id = ? AND ({' OR '.join(tests)})"
            args = (snapshot_id, *n_part, *e_part)
        for row in conn.execute(sql, args):
            ev = _evidence(row)
            rows[ev.id] = ev
    return list(rows.values())


def _load_nodes(conn: sqlite3.Connection, layout: Layout, snapshot_id: str, ids: Sequence[str]) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for part in _batches(list(ids)):
        # "+snapshot_id": by primary key (the label index, which leads with snapshot_id, would read every node)
        for row in conn.execute(f"{_node_sql(layout)} WHERE id IN ({_marks(len(part))}) AND +snapshot_id = ?",
                                (*part, snapshot_id)):
            node = _node(row)
            out[node.id] = node
    return out


def _chunks_by_id(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, Chunk]:
    out: dict[str, Chunk] = {}
    for part in _batches(list(ids)):
        for row in conn.execute(
                "SELECT c.id, c.snapshot_id, c.file_id, kf.relative_path, c.ordinal, c.text, c.start_line, c.end_line, "
                f"c.content_sha256 FROM knowledge_chunks c JOIN knowledge_files kf ON kf.id = c.file_id "
                f"WHERE c.id IN ({_marks(len(part))})", tuple(part)):
            chunk = _chunk(row)
            out[chunk.id] = chunk
    return out


def query_graph(root: Path, base_id: str, query: str, mode: OpenMode, limit: int = DEFAULT_LIMIT) -> QueryResult:
    """Run the 15.4 query on base ``base_id`` of the session directory ``root``, opened in ``mode``."""
    with open_store(root, base_id, mode) as store, store.read() as conn:
        return run_query(conn, store.layout, store.base_id, store.path, query, limit)


def run_query(conn: sqlite3.Connection, layout: Layout, base_id: str, path: Path, query: str,
              limit: int = DEFAULT_LIMIT) -> QueryResult:
    from store.knowledge.base import read_base

    base = read_base(conn, layout, base_id, path)
    snap = active_snapshot(conn, layout, base)
    limit = DEFAULT_LIMIT if limit <= 0 else min(limit, MAX_LIMIT)
    terms = query_terms(query)
    match = match_expression(terms)
    chunks = search_chunks(conn, snap.id, match, limit)
    seeds = _seeds(conn, layout, snap.id, chunks, terms)
    node_ids, edges, truncated = expand(conn, snap.id, seeds)
    loaded = _load_nodes(conn, layout, snap.id, node_ids)
    node_ids = [n for n in node_ids if n in loaded]  # an edge to a node that is not there names nothing
    evidence = _evidence_of(conn, snap.id, node_ids, [e.id for e in edges], layout.evidence_indexed)
    node_evidence: dict[str, int] = {}
    edge_evidence: dict[str, int] = {}
    for ev in evidence:
        if ev.node_id:
            node_evidence[ev.node_id] = node_evidence.get(ev.node_id, 0) + 1
        if ev.edge_id:
            edge_evidence[ev.edge_id] = edge_evidence.get(ev.edge_id, 0) + 1
    kept: list[Node] = []
    dropped: list[Node] = []
    for node_id in node_ids:
        node = loaded[node_id]
        if node.status == "candidate" and not node_evidence.get(node_id):
            dropped.append(node)
        else:
            kept.append(node)
    gone = {n.id for n in dropped}
    edges = [e for e in edges if e.from_node_id not in gone and e.to_node_id not in gone
             and e.from_node_id in loaded and e.to_node_id in loaded]
    kept_edges = {e.id for e in edges}
    evidence = [ev for ev in evidence if (ev.node_id and ev.node_id not in gone) or (ev.edge_id in kept_edges)]
    paths = {c.id: c.relative_path for c in chunks}
    missing = sorted({ev.chunk_id for ev in evidence if ev.chunk_id not in paths})
    for part in _batches(missing):
        paths.update((str(r[0]), str(r[1])) for r in conn.execute(
            f"SELECT c.id, kf.relative_path FROM knowledge_chunks c JOIN knowledge_files kf ON kf.id = c.file_id "
            f"WHERE c.id IN ({_marks(len(part))})", tuple(part)))
    evidence = [replace(ev, relative_path=paths.get(ev.chunk_id, "")) for ev in evidence]
    wanted = set(dict.fromkeys(terms))

    def node_order(node: Node) -> tuple[int, int, str, str]:
        label = node.label.lower()
        return (0 if any(t in label for t in wanted) else 1, -node_evidence.get(node.id, 0), node.label, node.id)

    def edge_order(edge: Edge) -> tuple[int, int, str]:
        weight = RELATION_WEIGHT.get(edge.relation_type, OTHER_RELATION_WEIGHT)
        return (-weight, -edge_evidence.get(edge.id, 0), edge.id)

    kept.sort(key=node_order)
    edges.sort(key=edge_order)
    rank = {n.id: i for i, n in enumerate(kept)}
    rank.update({e.id: len(rank) + i for i, e in enumerate(edges)})
    evidence.sort(key=lambda ev: (rank.get(ev.node_id or ev.edge_id, len(rank)), ev.relative_path, ev.start_line, ev.id))
    # evidence cited by a returned chunk that is not among the hits is still shown with its file and lines
    uncertainties: list[Uncertainty] = []
    if truncated:
        uncertainties.append(Uncertainty("truncated", f"the graph around the hits was cut at {MAX_HOPS} hops, "
                                                      f"{MAX_NODES} nodes or {MAX_EDGES} edges"))
    if dropped:
        uncertainties.append(Uncertainty("candidate_excluded", f"{plural(len(dropped), 'candidate node')} without evidence "
                                                               "were left out"))
    for node in kept:
        if node.status == "candidate":
            uncertainties.append(Uncertainty("candidate_node", "a model's candidate, not a verified fact",
                                             node_id=node.id))
    for edge in edges:
        if edge.confidence < LOW_CONFIDENCE:
            uncertainties.append(Uncertainty("low_confidence_edge", f"edge confidence {edge.confidence:g} is below "
                                                                    f"{LOW_CONFIDENCE:g}", edge_id=edge.id))
    return QueryResult(base=base, snapshot=snap, terms=tuple(terms), match=match, chunks=tuple(chunks),
                       nodes=tuple(kept), edges=tuple(edges), evidence=tuple(evidence),
                       uncertainties=tuple(uncertainties), truncated=truncated, seed_ids=frozenset(seeds),
                       dropped=tuple(dropped))


def evidence_chunks(root: Path, base_id: str, chunk_ids: Sequence[str], mode: OpenMode) -> dict[str, Chunk]:
    """The chunks evidence rows cite (with their file), for showing an evidence row's lines."""
    with open_store(root, base_id, mode) as store, store.read() as conn:
        return _chunks_by_id(conn, chunk_ids)
