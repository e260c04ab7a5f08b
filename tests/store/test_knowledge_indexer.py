"""The deterministic indexer: nodes, edges and evidence a reader can check against the files; reuse."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from store.errors import ReadOnlyStore
from store.knowledge.indexer import index_folder
from store.knowledge.query import query_graph
from store.mothx.db import OpenMode
from store.paths import KNOWLEDGE_DIR

NOW = "2026-11-20T12:00:00Z"

FILES = {
    "pkg/__init__.py": '"""The package."""\n',
    "pkg/pool.py": ('"""Connection pools."""\n\nfrom pkg.retry import backoff\n\n\nclass Pool:\n'
                    '    """A pool of connections."""\n\n    def acquire(self):\n        return self.grow()\n\n'
                    '    def grow(self):\n        return backoff(2)\n'),
    "pkg/retry.py": '"""Retries."""\n\n\ndef backoff(n):\n    """Exponential backoff."""\n    return 2 ** n\n',
    "docs/guide.md": "# Guide\n\nSee [the pool](../pkg/pool.py) and [retries](retry.md#top).\n\n## Deploy 部署流程\n\nnightly\n",
    "docs/retry.md": "# Retry budget\n\nten seconds\n",
    "notes.txt": "not indexed\n",
}


def tree(root: Path, files: dict[str, str] = FILES) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / ".hidden").mkdir(exist_ok=True)
    (root / ".hidden" / "x.py").write_text("secret = 1\n")
    return root


def rows(db: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def ids(db: Path) -> set[str]:
    out: set[str] = set()
    for table in ("knowledge_files", "knowledge_chunks", "knowledge_nodes", "knowledge_edges", "knowledge_evidence",
                  "knowledge_entity_aliases"):
        out |= {str(r[0]) for r in rows(db, f"SELECT id FROM {table}")}
    return out


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    src = tree(tmp_path / "src")
    sd = tmp_path / "sd"
    index_folder(sd, src, "Demo Base", OpenMode.READ_WRITE, now=lambda: NOW)
    return sd, src


def test_nodes_edges_and_evidence_match_the_files(indexed: tuple[Path, Path]) -> None:
    sd, src = indexed
    db = sd / KNOWLEDGE_DIR / "demo-base.db"
    files = {str(r[0]) for r in rows(db, "SELECT relative_path FROM knowledge_files")}
    assert files == {"pkg/__init__.py", "pkg/pool.py", "pkg/retry.py", "docs/guide.md", "docs/retry.md"}
    labels = {(str(r[0]), str(r[1])) for r in rows(db, "SELECT kind, label FROM knowledge_nodes")}
    assert {("module", "pkg.pool"), ("class", "pkg.pool.Pool"), ("function", "pkg.pool.Pool.acquire"),
            ("function", "pkg.retry.backoff"), ("document", "docs/guide.md"), ("heading", "Deploy 部署流程")} <= labels
    edges = {(str(r[0]), str(r[1]), str(r[2])) for r in rows(
        db, "SELECT a.label, e.relation_type, b.label FROM knowledge_edges e JOIN knowledge_nodes a ON a.id = e.from_node_id "
            "JOIN knowledge_nodes b ON b.id = e.to_node_id")}
    assert ("pkg.pool", "imports", "pkg.retry.backoff") in edges
    assert ("pkg.pool.Pool.grow", "calls", "pkg.retry.backoff") in edges
    assert ("pkg.pool.Pool.acquire", "calls", "pkg.pool.Pool.grow") in edges
    assert ("pkg.pool.Pool", "defines", "pkg.pool.Pool.acquire") in edges
    assert ("Guide", "links", "pkg.pool") in edges and ("Guide", "links", "docs/retry.md") in edges
    assert ("docs/guide.md", "declares", "Guide") in edges and ("Guide", "contains", "Deploy 部署流程") in edges
    # every evidence row names lines of its chunk, and those lines hold what the node or edge says
    for path, start, end, c_start, c_end, label in rows(
            db, "SELECT f.relative_path, v.start_line, v.end_line, c.start_line, c.end_line, coalesce(n.label, '') "
                "FROM knowledge_evidence v JOIN knowledge_chunks c ON c.id = v.chunk_id JOIN knowledge_files f "
                "ON f.id = c.file_id LEFT JOIN knowledge_nodes n ON n.id = v.node_id"):
        assert c_start <= start <= end <= c_end  # type: ignore[operator]
        lines = (src / str(path)).read_text().split("\n")
        if str(label).startswith("pkg.") and str(label).count(".") >= 2:
            assert str(label).rsplit(".", 1)[1] in lines[int(start) - 1]  # type: ignore[call-overload]
    for node_id, in rows(db, "SELECT id FROM knowledge_nodes"):
        assert rows(db, "SELECT 1 FROM knowledge_evidence WHERE node_id = ?", node_id)
    for edge_id, in rows(db, "SELECT id FROM knowledge_edges"):
        assert rows(db, "SELECT 1 FROM knowledge_evidence WHERE edge_id = ?", edge_id)
    result = query_graph(sd, "demo-base", "backoff", OpenMode.READ_ONLY)
    assert result.chunks and result.nodes[0].label == "pkg.retry.backoff"
    assert query_graph(sd, "demo-base", "部署", OpenMode.READ_ONLY).chunks[0].relative_path == "docs/guide.md"


def test_reindex_unchanged_reuses_every_file_with_new_ids(indexed: tuple[Path, Path]) -> None:
    sd, src = indexed
    db = sd / KNOWLEDGE_DIR / "demo-base.db"
    before = ids(db)
    shape = sorted(map(repr, rows(db, "SELECT a.label, e.relation_type, b.label FROM knowledge_edges e JOIN knowledge_nodes a "
                                      "ON a.id = e.from_node_id JOIN knowledge_nodes b ON b.id = e.to_node_id")))
    report = index_folder(sd, src, "Demo Base", OpenMode.READ_WRITE, now=lambda: NOW)
    assert report.reused_files == 5 and report.extracted_files == 0 and report.diff.unchanged == 5
    after = ids(db)
    assert before and after and not (before & after)  # no id shared between the snapshots
    assert sorted(map(repr, rows(db, "SELECT a.label, e.relation_type, b.label FROM knowledge_edges e JOIN knowledge_nodes a "
                                     "ON a.id = e.from_node_id JOIN knowledge_nodes b ON b.id = e.to_node_id"))) == shape
    assert len(rows(db, "SELECT id FROM knowledge_index_snapshots")) == 1


def test_a_changed_file_is_read_again_and_cross_file_edges_follow(indexed: tuple[Path, Path]) -> None:
    sd, src = indexed
    (src / "pkg" / "retry.py").write_text('"""Retries."""\n\n\ndef jitter(n):\n    return n\n')
    report = index_folder(sd, src, "Demo Base", OpenMode.READ_WRITE, now=lambda: NOW)
    assert report.extracted_files == 1 and report.reused_files == 4
    assert report.diff.modified_paths == ("pkg/retry.py",)
    db = sd / KNOWLEDGE_DIR / "demo-base.db"
    assert not rows(db, "SELECT 1 FROM knowledge_nodes WHERE label = 'pkg.retry.backoff'")
    assert rows(db, "SELECT 1 FROM knowledge_edges e JOIN knowledge_nodes a ON a.id = e.from_node_id "
                    "JOIN knowledge_nodes b ON b.id = e.to_node_id WHERE a.label = 'pkg.pool' AND b.label = 'pkg.retry'")


def test_two_runs_with_one_clock_write_identical_rows(tmp_path: Path) -> None:
    src = tree(tmp_path / "src")
    dumps = []
    for name in ("a", "b"):
        index_folder(tmp_path / name, src, "kb", OpenMode.READ_WRITE, now=lambda: NOW)
        db = tmp_path / name / KNOWLEDGE_DIR / "kb.db"
        dumps.append([rows(db, f"SELECT * FROM {t} ORDER BY 1") for t in
                      ("knowledge_chunks", "knowledge_nodes", "knowledge_edges", "knowledge_evidence")])
    assert dumps[0] == dumps[1]


def test_read_modes_refuse_and_hostile_names_are_data(tmp_path: Path) -> None:
    src = tree(tmp_path / "src", {"\x1b]0;pwned\x07.md": "# [bold]x[/bold] \u202etxt\n\nbody [/]\n",
                                  "ok.py": "def f():\n    return g()\n"})
    for mode in (OpenMode.READ_ONLY, OpenMode.SNAPSHOT):
        with pytest.raises(ReadOnlyStore):
            index_folder(tmp_path / "sd", src, "kb", mode)
    assert not (tmp_path / "sd").exists()
    report = index_folder(tmp_path / "sd", src, "kb", OpenMode.READ_WRITE)
    assert report.snapshot.file_count == 2
    r = query_graph(tmp_path / "sd", "kb", "bold", OpenMode.READ_ONLY)
    assert r.chunks[0].relative_path == "\x1b]0;pwned\x07.md"


def test_a_name_that_is_not_utf8_is_skipped(tmp_path: Path) -> None:
    import os

    src = tree(tmp_path / "src", {"ok.md": "# fine\n"})
    os.close(os.open(os.path.join(os.fsencode(src), b"bad\xff.md"), os.O_CREAT | os.O_WRONLY, 0o644))
    report = index_folder(tmp_path / "sd", src, "kb", OpenMode.READ_WRITE, now=lambda: NOW)
    assert report.snapshot.file_count == 1
    assert any("not UTF-8" in e.reason for e in report.discovery.skipped_entries)


def test_a_reused_snapshot_holds_the_rows_a_fresh_one_would(tmp_path: Path) -> None:
    """Reuse changes ids only: the labels, relations, evidence lines and chunk texts equal a fresh index's."""
    files = dict(FILES)
    files["pkg/twice.py"] = "from pkg.retry import backoff\n\n\ndef a():\n    x = backoff(1)\n    return x + backoff(2)\n"
    src = tree(tmp_path / "src", files)

    def shape(db: Path) -> list[object]:
        return sorted(map(repr, rows(db, "SELECT coalesce(n.label, a.label || ' ' || e.relation_type || ' ' || b.label), "
                                         "v.start_line, v.end_line, c.ordinal, f.relative_path FROM knowledge_evidence v "
                                         "JOIN knowledge_chunks c ON c.id = v.chunk_id JOIN knowledge_files f ON f.id = c.file_id "
                                         "LEFT JOIN knowledge_nodes n ON n.id = v.node_id LEFT JOIN knowledge_edges e ON "
                                         "e.id = v.edge_id LEFT JOIN knowledge_nodes a ON a.id = e.from_node_id LEFT JOIN "
                                         "knowledge_nodes b ON b.id = e.to_node_id")))

    index_folder(tmp_path / "fresh", src, "kb", OpenMode.READ_WRITE, now=lambda: NOW)
    index_folder(tmp_path / "again", src, "kb", OpenMode.READ_WRITE, now=lambda: NOW)
    report = index_folder(tmp_path / "again", src, "kb", OpenMode.READ_WRITE, now=lambda: NOW)
    assert report.reused_files == report.snapshot.file_count
    assert shape(tmp_path / "again" / KNOWLEDGE_DIR / "kb.db") == shape(tmp_path / "fresh" / KNOWLEDGE_DIR / "kb.db")
