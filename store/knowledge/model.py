"""The rows of a knowledge base (reference section 15) as frozen dataclasses, and their JSON shapes.

The JSON field names follow mothx's own (``relativePath``, ``startLine``, ...), so a ``kb query --json`` reads
like the runtime's ``KnowledgeGraphQuery``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

SUPPORTED_STORE_VERSIONS = (1, 2, 3, 4)
CURRENT_STORE_VERSION = 4
GRAPH_SCHEMA_VERSION = 2  # the knowledge-graph schema a new snapshot records (15.2)
CJK_RUN = re.compile("[\u4e00-\u9fff]+")
PATH_SAMPLE = 50  # path lists of a diff / discovery summary are bounded; the counts cover everything


def cjk_bigrams(text: str) -> str:
    """The FTS text of reference 15.3: runs of CJK characters become overlapping bigrams separated and padded
    by spaces; a single CJK character is kept as is."""

    def split(match: re.Match[str]) -> str:
        run = match.group(0)
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "

    return CJK_RUN.sub(split, text)


@dataclass(frozen=True)
class KnowledgeBase:
    id: str
    name: str
    root_dir: str
    preprocess_profile: str
    provider: str
    model: str
    mode: str
    schedule: str
    enabled: bool
    active_snapshot_id: str
    created_at: str
    updated_at: str
    config_revision: int = 1
    ignore_globs: str = ""
    store_version: int = 1

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "rootDir": self.root_dir, "preprocessProfile": self.preprocess_profile,
                "provider": self.provider, "model": self.model, "mode": self.mode, "schedule": self.schedule,
                "enabled": self.enabled, "activeSnapshotId": self.active_snapshot_id, "createdAt": self.created_at,
                "updatedAt": self.updated_at, "storeVersion": self.store_version}


@dataclass(frozen=True)
class DiffSummary:
    added: int = 0
    modified: int = 0
    removed: int = 0
    unchanged: int = 0
    added_paths: tuple[str, ...] = ()
    modified_paths: tuple[str, ...] = ()
    removed_paths: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"added": self.added, "modified": self.modified, "removed": self.removed, "unchanged": self.unchanged,
                "addedPaths": list(self.added_paths), "modifiedPaths": list(self.modified_paths),
                "removedPaths": list(self.removed_paths)}

    @classmethod
    def from_text(cls, text: str) -> DiffSummary | None:
        data = _json_object(text)
        if data is None:
            return None
        return cls(added=_int(data.get("added")), modified=_int(data.get("modified")), removed=_int(data.get("removed")),
                   unchanged=_int(data.get("unchanged")), added_paths=_strs(data.get("addedPaths")),
                   modified_paths=_strs(data.get("modifiedPaths")), removed_paths=_strs(data.get("removedPaths")))


@dataclass(frozen=True)
class DiscoveryEntry:
    path: str
    reason: str


@dataclass
class DiscoverySummary:
    """What a scan of the source folder found: counted in full, sampled in ``*_entries`` (never file contents)."""

    discovered: int = 0
    ignored: int = 0
    skipped: int = 0
    ignored_entries: list[DiscoveryEntry] = field(default_factory=list)
    skipped_entries: list[DiscoveryEntry] = field(default_factory=list)

    def record_ignored(self, path: str, reason: str) -> None:
        self.ignored += 1
        if len(self.ignored_entries) < PATH_SAMPLE:
            self.ignored_entries.append(DiscoveryEntry(path, reason))

    def record_skipped(self, path: str, reason: str) -> None:
        self.skipped += 1
        if len(self.skipped_entries) < PATH_SAMPLE:
            self.skipped_entries.append(DiscoveryEntry(path, reason))

    def to_json(self) -> dict[str, object]:
        return {"discovered": self.discovered, "ignored": self.ignored, "skipped": self.skipped,
                "ignoredEntries": [{"path": e.path, "reason": e.reason} for e in self.ignored_entries],
                "skippedEntries": [{"path": e.path, "reason": e.reason} for e in self.skipped_entries]}

    @classmethod
    def from_text(cls, text: str) -> DiscoverySummary | None:
        data = _json_object(text)
        if data is None:
            return None

        def entries(value: object) -> list[DiscoveryEntry]:
            items = value if isinstance(value, list) else []
            return [DiscoveryEntry(str(i.get("path", "")), str(i.get("reason", ""))) for i in items if isinstance(i, dict)]

        return cls(discovered=_int(data.get("discovered")), ignored=_int(data.get("ignored")),
                   skipped=_int(data.get("skipped")), ignored_entries=entries(data.get("ignoredEntries")),
                   skipped_entries=entries(data.get("skippedEntries")))


@dataclass(frozen=True)
class Snapshot:
    id: str
    knowledge_base_id: str
    run_id: str
    status: str
    schema_version: int
    file_count: int
    chunk_count: int
    node_count: int
    edge_count: int
    started_at: str
    finished_at: str
    error_summary: str
    diff: DiffSummary | None = None
    discovery: DiscoverySummary | None = None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "id": self.id, "knowledgeBaseId": self.knowledge_base_id, "runId": self.run_id, "status": self.status,
            "schemaVersion": self.schema_version, "fileCount": self.file_count, "chunkCount": self.chunk_count,
            "nodeCount": self.node_count, "edgeCount": self.edge_count, "startedAt": self.started_at,
            "finishedAt": self.finished_at, "errorSummary": self.error_summary}
        if self.diff is not None:
            data["diffSummary"] = self.diff.to_json()
        if self.discovery is not None:
            data["discoverySummary"] = self.discovery.to_json()
        return data


@dataclass(frozen=True)
class KFile:
    id: str
    snapshot_id: str
    relative_path: str
    content_sha256: str
    byte_size: int
    media_type: str = ""
    title: str = ""
    status: str = "indexed"

    @property
    def identity(self) -> tuple[str, str, int, str, str]:
        """What must be identical for a file's subgraph to be reused (15.5)."""
        return (self.relative_path, self.content_sha256, self.byte_size, self.media_type, self.status)


@dataclass(frozen=True)
class Chunk:
    id: str
    snapshot_id: str
    file_id: str
    relative_path: str
    ordinal: int
    text: str
    start_line: int
    end_line: int
    content_sha256: str

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "snapshotId": self.snapshot_id, "fileId": self.file_id,
                "relativePath": self.relative_path, "ordinal": self.ordinal, "text": self.text,
                "startLine": self.start_line, "endLine": self.end_line, "contentSha256": self.content_sha256}


@dataclass(frozen=True)
class Node:
    id: str
    snapshot_id: str
    kind: str
    label: str
    normalized_label: str
    summary: str = ""
    attributes: str = "{}"
    status: str = "fact"
    confidence: float = 1.0

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "snapshotId": self.snapshot_id, "kind": self.kind, "label": self.label,
                "normalizedLabel": self.normalized_label, "summary": self.summary, "status": self.status,
                "confidence": self.confidence}


@dataclass(frozen=True)
class Edge:
    id: str
    snapshot_id: str
    from_node_id: str
    to_node_id: str
    relation_type: str
    confidence: float = 1.0

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "snapshotId": self.snapshot_id, "fromNodeId": self.from_node_id,
                "toNodeId": self.to_node_id, "relationType": self.relation_type, "confidence": self.confidence}


@dataclass(frozen=True)
class Evidence:
    id: str
    snapshot_id: str
    node_id: str
    edge_id: str
    chunk_id: str
    start_line: int
    end_line: int
    confidence: float = 1.0
    relative_path: str = ""  # the file of the chunk (filled in by a query)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"id": self.id, "snapshotId": self.snapshot_id, "chunkId": self.chunk_id,
                                   "startLine": self.start_line, "endLine": self.end_line, "confidence": self.confidence}
        if self.relative_path:
            data["relativePath"] = self.relative_path
        if self.node_id:
            data["nodeId"] = self.node_id
        if self.edge_id:
            data["edgeId"] = self.edge_id
        return data


@dataclass(frozen=True)
class Alias:
    id: str
    snapshot_id: str
    normalized_alias: str
    node_id: str


@dataclass(frozen=True)
class Uncertainty:
    kind: str  # truncated | candidate_excluded | candidate_node | low_confidence_edge
    description: str
    node_id: str = ""
    edge_id: str = ""
    path: str = ""

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"kind": self.kind, "description": self.description}
        for key, value in (("nodeId", self.node_id), ("edgeId", self.edge_id), ("path", self.path)):
            if value:
                data[key] = value
        return data


@dataclass(frozen=True)
class Source:
    """One file of the active snapshot (never its contents)."""

    relative_path: str
    title: str
    media_type: str
    status: str
    byte_size: int
    chunk_count: int
    content_sha256: str

    def to_json(self) -> dict[str, object]:
        return {"relativePath": self.relative_path, "title": self.title, "mediaType": self.media_type,
                "status": self.status, "byteSize": self.byte_size, "chunkCount": self.chunk_count,
                "contentSha256": self.content_sha256}


@dataclass(frozen=True)
class QueryResult:
    base: KnowledgeBase
    snapshot: Snapshot
    terms: tuple[str, ...]
    match: str  # the FTS5 MATCH expression (empty: no term, no chunk)
    chunks: tuple[Chunk, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    evidence: tuple[Evidence, ...]
    uncertainties: tuple[Uncertainty, ...]
    truncated: bool
    seed_ids: frozenset[str] = frozenset()
    dropped: tuple[Node, ...] = ()  # evidence-free candidates, left out of nodes (15.4 step 7)

    def evidence_for(self, *, node_id: str = "", edge_id: str = "") -> list[Evidence]:
        return [e for e in self.evidence if (node_id and e.node_id == node_id) or (edge_id and e.edge_id == edge_id)]

    def to_json(self, *, candidates: bool = False) -> dict[str, object]:
        data: dict[str, object] = {
            "knowledgeBase": self.base.to_json(), "snapshot": self.snapshot.to_json(), "terms": list(self.terms),
            "chunks": [c.to_json() for c in self.chunks], "nodes": [n.to_json() for n in self.nodes],
            "edges": [e.to_json() for e in self.edges], "evidence": [e.to_json() for e in self.evidence],
            "uncertainties": [u.to_json() for u in self.uncertainties], "truncated": self.truncated}
        if candidates:
            data["droppedCandidates"] = [n.to_json() for n in self.dropped]
        return data


@dataclass
class FileGraph:
    """The self-contained, evidence-backed subgraph of one source file."""

    file: KFile
    chunks: list[Chunk] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class GraphSnapshot:
    """The payload :func:`store.knowledge.publish.store_snapshot` commits and activates."""

    base_config_revision: int
    snapshot: Snapshot
    files: list[KFile] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)
    diff: DiffSummary | None = None
    discovery: DiscoverySummary | None = None

    def add(self, graph: FileGraph) -> None:
        self.files.append(graph.file)
        self.chunks.extend(graph.chunks)
        self.nodes.extend(graph.nodes)
        self.edges.extend(graph.edges)
        self.evidence.extend(graph.evidence)


@dataclass(frozen=True)
class ReusePlan:
    base_config_revision: int
    source_snapshot_id: str
    files: dict[str, FileGraph]  # by relative path


def _json_object(text: str) -> dict[str, object] | None:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _strs(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()
