"""``sessionscope kb index PATH --name NAME``: a deterministic indexer (no language model) for a folder of
Python and Markdown.

It writes ``<session dir>/knowledge-bases/<id>.db`` (the id is NAME made safe for a file name), creating the
base at store version 4 when it does not exist: a write, refused in a read mode. A run:

1. scans PATH in sorted order without following symbolic links: ``.py`` and ``.md`` files up to 1 MiB in
   UTF-8 are indexed; hidden entries and build / cache folders are ignored and other files skipped (the
   discovery summary counts both and keeps a sample of paths);
2. takes the reuse plan of the active snapshot (15.5): a file whose path, hash, size, media type and status
   are unchanged keeps its chunks, nodes, edges and evidence, cloned under new ids (every id derives from the
   new snapshot's id and the row's key, so no id is shared between snapshots); other files are read with
   :mod:`store.knowledge.extract`;
3. resolves the references of every node (imports, calls, links) against the whole tree: an edge per
   reference whose target is a node of the tree, its evidence the line of the reference;
4. gives every node its unambiguous aliases (its short name and its full label when no other node has them);
5. publishes the snapshot (:func:`store.knowledge.publish.store_snapshot`), which prunes the previous one.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from store.errors import ReadOnlyStore, StoreError
from store.knowledge.base import BASE_ID, base_path, create_base, open_for_write, read_base
from store.knowledge.extract import EdgeSpec, FileWork, Key, NodeSpec, extract
from store.knowledge.model import (
    GRAPH_SCHEMA_VERSION,
    Alias,
    Chunk,
    DiffSummary,
    DiscoverySummary,
    Edge,
    Evidence,
    FileGraph,
    GraphSnapshot,
    KFile,
    Node,
    Snapshot,
)
from store.knowledge.publish import diff_files, reuse_plan, store_snapshot
from store.knowledge.query import query_terms
from store.mothx.db import OpenMode
from store.safetext import filename_part
from store.times import format_rfc3339

MAX_FILE_BYTES = 1 << 20
INDEXED_SUFFIXES = (".py", ".md")
IGNORED_FOLDERS = frozenset({"__pycache__", "node_modules", "build", "dist", "venv", "site-packages"})


@dataclass(frozen=True)
class IndexReport:
    base_id: str
    path: Path
    snapshot: Snapshot
    created: bool
    reused_files: int
    extracted_files: int
    seconds: float
    diff: DiffSummary
    discovery: DiscoverySummary

    def to_json(self) -> dict[str, object]:
        return {"base": self.base_id, "path": str(self.path), "created": self.created,
                "snapshot": self.snapshot.to_json(), "reusedFiles": self.reused_files,
                "extractedFiles": self.extracted_files, "seconds": round(self.seconds, 3)}


def base_id_for(name: str) -> str:
    ident = filename_part(name.lower(), fallback="knowledge-base")
    if not BASE_ID.match(ident):
        raise StoreError(f"'{name}' gives no usable knowledge base id.")
    return ident


# ------------------------------------------------------------------------------------------------ scanning


@dataclass(frozen=True)
class Found:
    path: str
    data: bytes
    sha256: str


def scan(root: Path) -> tuple[list[Found], DiscoverySummary]:
    found: list[Found] = []
    summary = DiscoverySummary()

    def walk(folder: Path, prefix: str) -> None:
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            summary.record_skipped(prefix or ".", f"cannot be listed: {exc.strerror or exc}")
            return
        for name in names:
            rel = f"{prefix}{name}"
            full = folder / name
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8, kept by the file system as surrogates
                summary.discovered += 1
                summary.record_skipped(rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                                       "its name is not UTF-8")
                continue
            try:
                st = os.lstat(full)
            except OSError as exc:
                summary.record_skipped(rel, f"cannot be read: {exc.strerror or exc}")
                continue
            summary.discovered += 1
            if stat.S_ISLNK(st.st_mode):
                summary.record_skipped(rel, "a symbolic link (not followed)")
            elif stat.S_ISDIR(st.st_mode):
                if name.startswith(".") or name in IGNORED_FOLDERS or name.endswith(".egg-info"):
                    summary.record_ignored(rel + "/", "a hidden, cache or build folder")
                else:
                    walk(full, rel + "/")
            elif name.startswith("."):
                summary.record_ignored(rel, "a hidden file")
            elif not stat.S_ISREG(st.st_mode):
                summary.record_skipped(rel, "not a regular file")
            elif not name.endswith(INDEXED_SUFFIXES):
                summary.record_skipped(rel, "not Python or Markdown")
            elif st.st_size > MAX_FILE_BYTES:
                summary.record_skipped(rel, "larger than 1 MiB")
            else:
                try:
                    data = full.read_bytes()
                    data.decode("utf-8")
                except OSError as exc:
                    summary.record_skipped(rel, f"cannot be read: {exc.strerror or exc}")
                    continue
                except UnicodeDecodeError:
                    summary.record_skipped(rel, "not UTF-8 text")
                    continue
                found.append(Found(rel, data, hashlib.sha256(data).hexdigest()))

    walk(root, "")
    return found, summary


def _media(path: str) -> str:
    return "text/x-python" if path.endswith(".py") else "text/markdown"


def manifest_of(found: list[Found]) -> list[KFile]:
    return [KFile("", "", f.path, f.sha256, len(f.data), _media(f.path), "", "indexed") for f in found]


# ------------------------------------------------------------------------------------------------ reuse


def work_from_graph(graph: FileGraph) -> FileWork:
    """A reused file subgraph as keyed work (the clone gets new ids when the snapshot is assembled)."""
    f = graph.file
    work = FileWork(path=f.relative_path, sha256=f.content_sha256, size=f.byte_size, media_type=f.media_type,
                    title=f.title, reused=True)
    chunks = sorted(graph.chunks, key=lambda c: c.ordinal)
    ordinal_of = {c.id: i for i, c in enumerate(chunks)}
    work.chunks = [(c.start_line, c.end_line, c.text) for c in chunks]
    keys: dict[str, Key] = {}
    by_owner: dict[str, list[tuple[int, int, int]]] = {}
    for ev in sorted(graph.evidence, key=lambda e: (ordinal_of.get(e.chunk_id, 0), e.start_line, e.end_line, e.id)):
        if ev.chunk_id in ordinal_of:
            by_owner.setdefault(ev.node_id or ev.edge_id, []).append((ordinal_of[ev.chunk_id], ev.start_line, ev.end_line))
    for node in graph.nodes:
        try:
            attributes = json.loads(node.attributes)
        except ValueError:
            attributes = {}
        spec = NodeSpec(node.kind, node.label, node.normalized_label, node.summary,
                        attributes if isinstance(attributes, dict) else {}, by_owner.get(node.id, []))
        keys[node.id] = spec.key
        work.nodes.append(spec)
    for edge in graph.edges:
        if edge.from_node_id in keys and edge.to_node_id in keys:
            work.edges.append(EdgeSpec(keys[edge.from_node_id], keys[edge.to_node_id], edge.relation_type,
                                       by_owner.get(edge.id, []), edge.confidence))
    return work


# ------------------------------------------------------------------------------------------------ assembly


def _id(prefix: str, snapshot_id: str, *key: object) -> str:
    text = "\x00".join([snapshot_id, *(str(k) for k in key)])
    return prefix + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _resolve_refs(works: list[FileWork]) -> None:
    """Step 3: an edge for every reference whose target is a node of the tree (deduplicated)."""
    by_label: dict[str, Key] = {}
    by_path: dict[str, Key] = {}
    for work in works:
        for spec in work.nodes:
            if spec.kind in ("module", "class", "function"):
                by_label.setdefault(spec.label, spec.key)
            if spec.kind in ("module", "document"):
                by_path.setdefault(work.path, spec.key)
    for work in works:
        existing = {(e.source, e.target, e.relation): e for e in work.edges}
        made: set[tuple[Key, Key, str]] = set()  # edges made in this pass (a reused one has its evidence already)
        for spec in work.nodes:
            refs = spec.attributes.get("refs")
            for ref in refs if isinstance(refs, list) else []:
                if not (isinstance(ref, list) and len(ref) == 3 and isinstance(ref[2], int)):
                    continue
                relation, target, line = str(ref[0]), str(ref[1]), ref[2]
                key = by_path.get(target) if relation == "links" else None
                if relation != "links":
                    probe = target
                    while probe and key is None:
                        key = by_label.get(probe)
                        if relation != "imports":
                            break
                        probe = probe.rpartition(".")[0]
                if key is None or key == spec.key:
                    continue
                triple = (spec.key, key, relation)
                known = existing.get(triple)
                if known is not None:
                    if triple in made or not work.reused:  # a second reference on another line: one more row
                        cite = work.cite(line)
                        if cite not in known.evidence:
                            known.evidence.append(cite)
                    continue
                edge = EdgeSpec(spec.key, key, relation, [work.cite(line)])
                existing[triple] = edge
                made.add(triple)
                work.edges.append(edge)


def assemble(snapshot: Snapshot, works: list[FileWork], revision: int) -> GraphSnapshot:
    sid = snapshot.id
    graph = GraphSnapshot(base_config_revision=revision, snapshot=snapshot)
    node_ids: dict[Key, str] = {}
    for work in works:
        for spec in work.nodes:
            node_ids.setdefault(spec.key, _id("kn_", sid, spec.kind, spec.normalized))
    alias_count: dict[str, list[str]] = {}
    placed: set[str] = set()
    for work in works:
        file_id = _id("kf_", sid, work.path)
        graph.files.append(KFile(file_id, sid, work.path, work.sha256, work.size, work.media_type, work.title, "indexed"))
        chunk_ids = [_id("kc_", sid, work.path, n) for n in range(len(work.chunks))]
        for n, (start, end, text) in enumerate(work.chunks):
            graph.chunks.append(Chunk(chunk_ids[n], sid, file_id, work.path, n, text, start, end,
                                      hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()))
        for spec in work.nodes:
            nid = node_ids[spec.key]
            if nid in placed:
                continue
            placed.add(nid)
            graph.nodes.append(Node(nid, sid, spec.kind, spec.label, spec.normalized, spec.summary,
                                    json.dumps(spec.attributes, ensure_ascii=False, sort_keys=True,
                                               separators=(",", ":"))))
            for ordinal, start, end in spec.evidence:
                graph.evidence.append(Evidence(_id("kev_", sid, "n", nid, ordinal, start, end), sid, nid, "",
                                               chunk_ids[ordinal], start, end, 1.0))
            names = {spec.label.lower(), spec.label.rpartition(".")[2].lower()} if spec.kind != "heading" else \
                {spec.label.lower()}
            for name in names:
                if query_terms(name) == [name]:
                    alias_count.setdefault(name, []).append(nid)
        for edge in work.edges:
            if edge.source not in node_ids or edge.target not in node_ids:
                continue
            eid = _id("ke_", sid, edge.source, edge.target, edge.relation)
            graph.edges.append(Edge(eid, sid, node_ids[edge.source], node_ids[edge.target], edge.relation,
                                    edge.confidence))
            for ordinal, start, end in edge.evidence:
                graph.evidence.append(Evidence(_id("kev_", sid, "e", eid, ordinal, start, end), sid, "", eid,
                                               chunk_ids[ordinal], start, end, edge.confidence))
    seen_edges: set[str] = set()
    graph.edges = [e for e in graph.edges if not (e.id in seen_edges or seen_edges.add(e.id))]  # type: ignore[func-returns-value]
    seen_ev: set[str] = set()
    graph.evidence = [e for e in graph.evidence if not (e.id in seen_ev or seen_ev.add(e.id))]  # type: ignore[func-returns-value]
    for name in sorted(alias_count):
        owners = sorted(set(alias_count[name]))
        if len(owners) == 1:
            graph.aliases.append(Alias(_id("ka_", sid, name), sid, name, owners[0]))
    return graph


# ------------------------------------------------------------------------------------------------ the run


def index_folder(session_root: Path, source: Path, name: str, mode: OpenMode, *,
                 now: Callable[[], str] | None = None, base_id: str | None = None,
                 recorded_root: str | None = None) -> IndexReport:
    """Index ``source`` into the base named ``name`` of the session directory ``session_root``.

    ``now`` gives the timestamps (the start, then the finish; the demo passes fixed ones); ``base_id`` replaces
    the id made from ``name``; ``recorded_root`` is the folder written as the base's ``root_dir`` when it is not
    ``source`` itself (the demo indexes its package data under the made-up project's path)."""
    clock = now or format_rfc3339
    if mode.is_read:
        raise ReadOnlyStore(f"Refused: the session directory is open {mode.value}; kb index writes "
                            "knowledge-bases/ (open it read-write).")
    source = Path(os.path.normpath(Path(source).expanduser().absolute()))
    if not source.is_dir():
        raise StoreError(f"{source} is not a folder.")
    base_id = base_id or base_id_for(name)
    if not BASE_ID.match(base_id):
        raise StoreError(f"'{base_id}' is not a knowledge base id (letters, digits, '.', '_', '-').")
    root_text = recorded_root or str(source)
    began = time.perf_counter()
    started = clock()
    created = not base_path(session_root, base_id).exists()
    if created:
        store = create_base(session_root, base_id, name=name, root_dir=root_text, preprocess_profile="mixed",
                            created_at=started)
    else:
        store = open_for_write(session_root, base_id, started)
    with store:
        with store.read() as conn:
            base = read_base(conn, store.layout, base_id, store.path)
            if base.root_dir != root_text:
                raise StoreError(f"knowledge base {base_id} indexes {base.root_dir}, not {root_text}; choose another "
                                 "--name.")
            found, discovery = scan(source)
            manifest = manifest_of(found)
            plan = reuse_plan(conn, store.layout, base, manifest)
            old_files = []
            if plan.source_snapshot_id:
                old_files = [KFile("", "", str(r[0]), str(r[1]), int(r[2]), str(r[3]), "", str(r[4])) for r in conn.execute(
                    "SELECT relative_path, content_sha256, byte_size, media_type, status FROM knowledge_files "
                    "WHERE snapshot_id = ?", (plan.source_snapshot_id,))]
        digest = hashlib.sha256("\n".join(f"{f.path}\t{f.sha256}" for f in found).encode("utf-8", "surrogatepass"))
        snapshot_id = _id("snap_", base_id, started, plan.source_snapshot_id, digest.hexdigest())
        works: list[FileWork] = []
        reused = 0
        for f in found:
            graph = plan.files.get(f.path)
            if graph is not None:
                works.append(work_from_graph(graph))
                reused += 1
            else:
                works.append(extract(f.path, f.data, f.sha256))
        _resolve_refs(works)
        diff = diff_files(old_files, manifest)
        snapshot = Snapshot(id=snapshot_id, knowledge_base_id=base_id, run_id=_id("kbrun_", snapshot_id), status="running",
                            schema_version=GRAPH_SCHEMA_VERSION, file_count=0, chunk_count=0, node_count=0,
                            edge_count=0, started_at=started, finished_at="", error_summary="")
        graph_snapshot = assemble(snapshot, works, base.config_revision)
        graph_snapshot.diff, graph_snapshot.discovery = diff, discovery
        published = store_snapshot(store, graph_snapshot, clock())
    return IndexReport(base_id=base_id, path=store.path, snapshot=published, created=created, reused_files=reused,
                       extracted_files=len(found) - reused, seconds=time.perf_counter() - began, diff=diff,
                       discovery=discovery)
