"""Knowledge bases (reference 15): store versions, open modes, the 15.4 query, publishing, clearing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from store.errors import ReadOnlyStore, RepairRefused, SchemaIncompatible
from store.knowledge.base import KnowledgeBaseUnindexed, create_base, open_for_write, open_store
from store.knowledge.clear import ClearIndexRepair
from store.knowledge.model import Chunk, Edge, Evidence, GraphSnapshot, KFile, Node, Snapshot, cjk_bigrams
from store.knowledge.publish import diff_manifest, list_bases, list_sources, store_snapshot
from store.knowledge.query import match_expression, query_graph, query_terms
from store.mothx.db import OpenMode
from store.mothx.schema import split_statements
from store.paths import KNOWLEDGE_DIR

NOW = "2026-11-20T12:00:00Z"
V1_DDL = (Path(__file__).parents[2] / "store" / "sql" / "knowledge_base_v1.sql").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ builders


def graph(snapshot_id: str, docs: list[tuple[str, str]], nodes: list[tuple[str, str, str, str, list[int]]],
          edges: list[tuple[str, str, str, float, int | None]], revision: int = 1) -> GraphSnapshot:
    """docs: (path, text) with one chunk per line; nodes: (id, kind, label, status, [chunk numbers]);
    edges: (from, to, relation, confidence, chunk number or None)."""
    g = GraphSnapshot(base_config_revision=revision, snapshot=Snapshot(
        id=snapshot_id, knowledge_base_id="kb", run_id="run", status="completed", schema_version=2, file_count=0,
        chunk_count=0, node_count=0, edge_count=0, started_at=NOW, finished_at="", error_summary=""))
    n = 0
    for fi, (path, text) in enumerate(docs):
        fid = f"{snapshot_id}-f{fi}"
        g.files.append(KFile(fid, snapshot_id, path, f"sha-{path}-{len(text)}", len(text), "text/markdown", path))
        for li, line in enumerate(text.split("\n")):
            g.chunks.append(Chunk(f"{snapshot_id}-c{n}", snapshot_id, fid, path, li, line, li + 1, li + 1, "x"))
            n += 1
    for nid, kind, label, status, cites in nodes:
        g.nodes.append(Node(f"{snapshot_id}-{nid}", snapshot_id, kind, label, label.lower(), status=status,
                            confidence=0.4 if status == "candidate" else 1.0))
        for c in cites:
            g.evidence.append(Evidence(f"{snapshot_id}-ev-{nid}-{c}", snapshot_id, f"{snapshot_id}-{nid}", "",
                                       f"{snapshot_id}-c{c}", c + 1, c + 1))
    for i, (a, b, rel, conf, cite) in enumerate(edges):
        eid = f"{snapshot_id}-e{i:04d}"
        g.edges.append(Edge(eid, snapshot_id, f"{snapshot_id}-{a}", f"{snapshot_id}-{b}", rel, conf))
        if cite is not None:
            g.evidence.append(Evidence(f"{snapshot_id}-eev{i}", snapshot_id, "", eid, f"{snapshot_id}-c{cite}",
                                       cite + 1, cite + 1, conf))
    return g


def make_v4(root: Path, g: GraphSnapshot, base_id: str = "kb") -> None:
    with create_base(root, base_id, name="Base", root_dir="/src", created_at=NOW) as store:
        store_snapshot(store, g, NOW)


DOCS = [("guide.md", "pgx pool settings\nthe deploy flow 部署流程 runs nightly\nAND NEAR( quoting * works"),
        ("code.py", "def connect(): pgx\nretry budget is ten seconds")]
NODES = [("pool", "concept", "Connection pool", "fact", [0]),
         ("deploy", "concept", "Deploy flow", "fact", [1]),
         ("cand", "concept", "Pgx candidate", "candidate", [0]),
         ("ghost", "concept", "Ghost candidate", "candidate", []),
         ("retry", "concept", "Retry budget", "fact", [4])]
EDGES = [("pool", "deploy", "co_mentions", 0.3, 1), ("pool", "retry", "defines", 1.0, 4),
         ("pool", "ghost", "mentions", 1.0, None), ("deploy", "retry", "uses", 0.9, 1)]


@pytest.fixture
def v4(tmp_path: Path) -> Path:
    make_v4(tmp_path, graph("s1", DOCS, NODES, EDGES))
    return tmp_path


def make_v1(root: Path) -> Path:
    folder = root / KNOWLEDGE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "old.db"
    conn = sqlite3.connect(path)
    for statement in split_statements(V1_DDL):
        conn.execute(statement)
    conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (1, 'x')")
    conn.execute("INSERT INTO knowledge_bases (id,name,root_dir,preprocess_profile,active_snapshot_id,created_at,"
                 "updated_at) VALUES ('old','Old','/src','documents','s1',?,?)", (NOW, NOW))
    conn.execute("INSERT INTO knowledge_index_snapshots (id,knowledge_base_id,status,schema_version,started_at) "
                 "VALUES ('s1','old','completed',1,?)", (NOW,))
    conn.execute("INSERT INTO knowledge_files (id,snapshot_id,relative_path,content_sha256,byte_size) "
                 "VALUES ('f1','s1','a.md','h',10)")
    conn.execute("INSERT INTO knowledge_chunks VALUES ('c1','s1','f1',0,'legacy pgx text',1,1,'h')")
    conn.execute("INSERT INTO knowledge_chunk_fts VALUES ('c1','s1','legacy pgx text')")
    conn.execute("INSERT INTO knowledge_nodes (id,snapshot_id,kind,label,normalized_label) VALUES "
                 "('n1','s1','concept','Legacy','legacy')")
    conn.execute("INSERT INTO knowledge_evidence VALUES ('e1','s1','n1','','c1',1,1,1)")
    conn.commit()
    conn.close()
    return path


def files_state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------------------------------------ terms


def test_terms_lowercase_split_drop_punctuation_and_quote() -> None:
    assert query_terms('Foo.Bar "x" * AND NEAR( ... -- _') == ["foo.bar", "x", "and", "near"]
    assert query_terms("部署流程 api部署") == ["部署流程", "api部署"]
    assert match_expression(["部署流程", "a"]) == '"部署 署流 流程" OR "a"'
    assert match_expression(["部"]) == '"部"'
    assert query_terms("!!! ... ---") == []
    assert cjk_bigrams("x部署y") == "x 部署 y"


@pytest.mark.parametrize("query", ['"', '""', "*", "pgx*", "AND", "a AND b", "NEAR(", "NEAR(a b)", "OR", "^x",
                                   "col:pgx", "(((", "-pgx", "'", "\x1b]0;x\x07", "\ud83d", "", "   ", "…", "-.-/"])
def test_fts_syntax_never_raises(v4: Path, query: str) -> None:
    result = query_graph(v4, "kb", query, OpenMode.READ_ONLY)
    assert isinstance(result.chunks, tuple)


def test_punctuation_only_query_finds_nothing(v4: Path) -> None:
    result = query_graph(v4, "kb", "... --- ///", OpenMode.READ_ONLY)
    assert result.terms == () and result.chunks == () and result.nodes == ()


# ------------------------------------------------------------------------------------------------ query


def test_query_chunks_seeds_graph_evidence_and_candidates(v4: Path) -> None:
    r = query_graph(v4, "kb", "pgx", OpenMode.READ_ONLY)
    assert {c.relative_path for c in r.chunks} == {"guide.md", "code.py"}
    labels = [n.label for n in r.nodes]
    # seeds: pool and cand (cited by chunk 0); pool's neighbours one hop out; ghost is dropped (no evidence)
    assert "Connection pool" in labels and "Pgx candidate" in labels and "Ghost candidate" not in labels
    assert labels[0] == "Pgx candidate"  # its label holds the term
    assert [n.label for n in r.dropped] == ["Ghost candidate"]
    kinds = [u.kind for u in r.uncertainties]
    assert kinds.count("candidate_excluded") == 1 and kinds.count("candidate_node") == 1
    assert "low_confidence_edge" in kinds and not r.truncated
    assert all(e.to_node_id != "s1-ghost" for e in r.edges)
    assert [e.relation_type for e in r.edges][0] == "defines" and r.edges[-1].relation_type == "co_mentions"
    ev_nodes = {e.node_id for e in r.evidence if e.node_id}
    assert ev_nodes == {n.id for n in r.nodes}
    data = r.to_json(candidates=True)
    assert set(data) >= {"chunks", "nodes", "edges", "evidence", "truncated", "uncertainties", "droppedCandidates"}


def test_cjk_query_matches_bigrams(v4: Path) -> None:
    r = query_graph(v4, "kb", "部署", OpenMode.READ_ONLY)
    assert [c.text for c in r.chunks] == ["the deploy flow 部署流程 runs nightly"]
    assert "s1-deploy" in r.seed_ids and "Deploy flow" in [n.label for n in r.nodes]
    assert query_graph(v4, "kb", "署流程", OpenMode.READ_ONLY).chunks


def test_limit_default_is_eight_and_bm25_order(tmp_path: Path) -> None:
    docs = [("a.md", "\n".join(["pgx " * (i % 5 + 1) + f"line {i}" for i in range(20)]))]
    make_v4(tmp_path, graph("s1", docs, [], []))
    r = query_graph(tmp_path, "kb", "pgx", OpenMode.READ_ONLY)
    assert len(r.chunks) == 8
    assert len(query_graph(tmp_path, "kb", "pgx", OpenMode.READ_ONLY, limit=3).chunks) == 3
    assert r.chunks[0].text.count("pgx") == 5


def test_hop_limit_is_two(tmp_path: Path) -> None:
    nodes = [(f"n{i}", "c", f"N{i}", "fact", [0] if i == 0 else []) for i in range(6)]
    edges: list[tuple[str, str, str, float, int | None]] = [(f"n{i}", f"n{i + 1}", "uses", 1.0, None) for i in range(5)]
    make_v4(tmp_path, graph("s1", [("a.md", "start here")], nodes, edges))
    r = query_graph(tmp_path, "kb", "start", OpenMode.READ_ONLY)
    assert sorted(n.label for n in r.nodes) == ["N0", "N1", "N2"] and len(r.edges) == 2 and not r.truncated


def test_node_and_edge_caps_and_seeds_never_trimmed(tmp_path: Path) -> None:
    nodes = [("hub", "c", "Hub", "fact", [0])] + [(f"x{i}", "c", f"X{i:03d}", "fact", []) for i in range(200)]
    edges: list[tuple[str, str, str, float, int | None]] = [("hub", f"x{i}", "uses", 1.0, None) for i in range(200)]
    make_v4(tmp_path, graph("s1", [("a.md", "hub text")], nodes, edges))
    r = query_graph(tmp_path, "kb", "hub", OpenMode.READ_ONLY)
    assert r.truncated and len(r.nodes) == 64 and len(r.edges) == 63
    assert r.uncertainties[0].kind == "truncated"
    # edges cap: 97 edges among a complete set of seeds
    seeds = [(f"s{i}", "c", f"S{i:03d}", "fact", [0]) for i in range(100)]
    many: list[tuple[str, str, str, float, int | None]] = [("s0", f"s{i}", "uses", 1.0, None) for i in range(1, 100)]
    other = tmp_path / "two"
    make_v4(other, graph("s1", [("a.md", "seed text")], seeds, many))
    r2 = query_graph(other, "kb", "seed", OpenMode.READ_ONLY)
    assert len(r2.nodes) == 100  # the seeds alone exceed 64 and are all kept
    assert len(r2.edges) == 96 and r2.truncated
    assert len({n.id for n in r2.nodes}) == len(r2.nodes)


def test_alias_seeds(tmp_path: Path) -> None:
    g = graph("s1", [("a.md", "nothing relevant")], [("n", "c", "PostgreSQL", "fact", [0])], [])
    from store.knowledge.model import Alias

    g.aliases.append(Alias("a1", "s1", "postgres", "s1-n"))
    make_v4(tmp_path, g)
    r = query_graph(tmp_path, "kb", "Postgres", OpenMode.READ_ONLY)
    assert r.chunks == () and [n.label for n in r.nodes] == ["PostgreSQL"]


# ------------------------------------------------------------------------------------------------ versions, modes


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT, OpenMode.READ_WRITE])
def test_v1_reads_as_it_stands_and_read_modes_write_nothing(tmp_path: Path, mode: OpenMode) -> None:
    make_v1(tmp_path)
    folder = tmp_path / KNOWLEDGE_DIR
    before = files_state(folder)
    r = query_graph(tmp_path, "old", "pgx", mode)
    assert [c.text for c in r.chunks] == ["legacy pgx text"] and r.nodes[0].status == "fact"
    assert r.base.store_version == 1 and r.base.config_revision == 1
    list_bases(tmp_path, mode)
    list_sources(tmp_path, "old", mode)
    assert files_state(folder) == before  # no byte changed, no -wal / -shm / -journal appeared


def test_v4_read_modes_write_nothing(v4: Path) -> None:
    folder = v4 / KNOWLEDGE_DIR
    before = files_state(folder)
    for mode in (OpenMode.READ_ONLY, OpenMode.SNAPSHOT):
        query_graph(v4, "kb", "pgx 部署", mode)
        list_bases(v4, mode)
        ClearIndexRepair(v4, mode, "kb", NOW).preview()
    assert files_state(folder) == before and sorted(before) == ["kb.db"]


def test_newer_store_version_is_refused(tmp_path: Path) -> None:
    path = make_v1(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO knowledge_store_schema (version, applied_at) VALUES (5, 'x')")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaIncompatible, match="version 5, newer"):
        open_store(tmp_path, "old", OpenMode.READ_ONLY)
    [summary] = list_bases(tmp_path, OpenMode.READ_ONLY)
    assert "newer" in summary.problem


def test_migrating_v1_to_v4_only_on_write(tmp_path: Path) -> None:
    make_v1(tmp_path)
    with open_for_write(tmp_path, "old", NOW) as store:
        assert store.layout.version == 4 and store.layout.has_aliases
    r = query_graph(tmp_path, "old", "pgx", OpenMode.READ_ONLY)
    assert r.base.store_version == 4 and r.chunks


def test_unindexed_base(tmp_path: Path) -> None:
    create_base(tmp_path, "kb", name="Empty", root_dir="/src", created_at=NOW).close()
    with pytest.raises(KnowledgeBaseUnindexed, match="unindexed"):
        query_graph(tmp_path, "kb", "x", OpenMode.READ_ONLY)


# ------------------------------------------------------------------------------------------------ publish, clear


def test_publish_prunes_others_and_checks_revision(v4: Path) -> None:
    with open_for_write(v4, "kb", NOW) as store:
        store_snapshot(store, graph("s2", DOCS[:1], NODES[:2], EDGES[:1]), NOW)
        with pytest.raises(RepairRefused, match="configuration"):
            store_snapshot(store, graph("s3", DOCS, NODES, EDGES, revision=7), NOW)
    conn = sqlite3.connect(v4 / KNOWLEDGE_DIR / "kb.db")
    assert conn.execute("SELECT id FROM knowledge_index_snapshots").fetchall() == [("s2",)]
    assert {r[0] for r in conn.execute("SELECT DISTINCT snapshot_id FROM knowledge_chunk_fts")} == {"s2"}
    assert conn.execute("SELECT count(*) FROM knowledge_chunks WHERE snapshot_id = 's1'").fetchone()[0] == 0
    conn.close()
    _, snap, sources = list_sources(v4, "kb", OpenMode.READ_ONLY)
    assert snap.id == "s2" and [s.relative_path for s in sources] == ["guide.md"] and sources[0].chunk_count == 3
    manifest = [KFile("x", "", "guide.md", "changed", 1), KFile("y", "", "new.md", "h", 1)]
    diff = diff_manifest(v4, "kb", manifest, OpenMode.READ_ONLY)
    assert (diff.added, diff.modified, diff.removed, diff.unchanged) == (1, 1, 0, 0)


def test_clear_index_is_fenced_and_idempotent(v4: Path) -> None:
    with pytest.raises(ReadOnlyStore):
        ClearIndexRepair(v4, OpenMode.READ_ONLY, "kb", NOW).apply()
    repair = ClearIndexRepair(v4, OpenMode.READ_WRITE, "kb", NOW)
    preview = repair.preview()
    assert preview.allowed and preview.rows >= 2
    with open_for_write(v4, "kb", NOW) as store:  # the facts change after the preview
        store_snapshot(store, graph("s2", DOCS, NODES, EDGES), NOW)
    with pytest.raises(RepairRefused):
        repair.apply(preview)
    result = repair.apply(repair.preview())
    assert "cleared" in result.message
    with pytest.raises(KnowledgeBaseUnindexed):
        query_graph(v4, "kb", "pgx", OpenMode.READ_ONLY)
    again = repair.preview()
    assert again.changes == () and "nothing" in repair.apply(again).message
    conn = sqlite3.connect(v4 / KNOWLEDGE_DIR / "kb.db")
    assert conn.execute("SELECT count(*) FROM knowledge_chunk_fts").fetchone()[0] == 0
    assert conn.execute("SELECT name FROM knowledge_bases").fetchone()[0] == "Base"
    conn.close()
