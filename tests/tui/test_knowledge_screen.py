"""Pilot tests of the Knowledge screen: bases, the query box and its history, the result panes, dropped
candidates, the graph tree, highlighted chunk text, hostile data, and the clear-index repair."""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.command import CommandPalette
from textual.widgets import Static

from store.knowledge.base import open_for_write
from store.knowledge.indexer import index_folder
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.hostile import EVIL
from tests.tui.appwait import settle
from tests.tui.rendered import assert_clean, drawn_text
from tui.app import SessionscopeApp
from tui.screens.knowledge import KnowledgeScreen, QueryInput
from tui.widgets.confirm import ConfirmDialog
from tui.widgets.knowledge_lists import BaseList, ChunkList, EdgeList, EvidenceList, NodeList

pytestmark = pytest.mark.anyio

SIZE = (120, 34)
NOW = "2026-11-20T12:00:00Z"
DEADLINE_S = 20.0

FILES = {
    "pkg/pool.py": '"""Connection pools."""\n\nfrom pkg.retry import backoff\n\n\nclass Pool:\n    def grow(self):\n'
                   '        return backoff(2)\n',
    "pkg/retry.py": '"""Retries."""\n\n\ndef backoff(n):\n    """Exponential backoff."""\n    return 2 ** n\n',
    "guide.md": "# Guide\n\nThe backoff doubles. See [retry](pkg/retry.py).\n\n## 部署流程\n\nnightly\n",
}


def make_dir(tmp_path: Path, files: dict[str, str] = FILES) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    src = tmp_path / "src"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    index_folder(root, src, "code", OpenMode.READ_WRITE, now=lambda: NOW)
    return root


def add_candidates(root: Path) -> None:
    """A grounded candidate and an evidence-free one beside the indexed facts."""
    with open_for_write(root, "code", NOW) as store, store.db.write() as conn:
        snap = conn.execute("SELECT active_snapshot_id FROM knowledge_bases").fetchone()[0]
        chunk = conn.execute("SELECT id FROM knowledge_chunks WHERE text LIKE '%backoff doubles%'").fetchone()[0]
        target = conn.execute("SELECT id FROM knowledge_nodes WHERE label = 'pkg.retry.backoff'").fetchone()[0]
        for nid, label in (("cand-1", "Backoff policy"), ("cand-2", "Backoff ghost")):
            conn.execute("INSERT INTO knowledge_nodes (id,snapshot_id,kind,label,normalized_label,status,confidence) "
                         "VALUES (?,?,?,?,?,'candidate',0.4)", (nid, snap, "concept", label, label.lower()))
            conn.execute("INSERT INTO knowledge_edges (id,snapshot_id,from_node_id,to_node_id,relation_type,confidence) "
                         "VALUES (?,?,?,?,'mentions',0.3)", (f"e-{nid}", snap, nid, target))
        conn.execute("INSERT INTO knowledge_evidence (id,snapshot_id,node_id,edge_id,chunk_id,start_line,end_line) "
                     "VALUES ('ev-c1',?,'cand-1','',?,3,3)", (snap, chunk))


async def settled(pilot) -> KnowledgeScreen:
    app = pilot.app
    deadline = time.monotonic() + DEADLINE_S
    while True:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        if isinstance(screen, KnowledgeScreen) and screen.base_list.loaded and not any(w.is_running for w in app.workers):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"the knowledge screen did not settle: {screen!r}")
        await asyncio.sleep(0.02)


async def open_knowledge(pilot) -> KnowledgeScreen:
    await settle(pilot)
    pilot.app.show_section_screen(KnowledgeScreen)
    return await settled(pilot)


async def ask(pilot, screen: KnowledgeScreen, query: str) -> None:
    await pilot.press("slash")
    box = screen.query_one(QueryInput)
    assert box.has_focus
    box.value = query
    await pilot.press("enter")
    await settled(pilot)


def detail(screen: KnowledgeScreen) -> Text:
    body = screen.query_one("#kb-detail-body", Static).content
    assert isinstance(body, Text)
    return body


async def test_jump_query_panes_graph_and_highlight(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("colon")
        await pilot.pause(0.3)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Knowledge", "enter")
        screen = await settled(pilot)
        assert [b.base_id for b in screen.base_list.rows] == ["code"]
        assert "chunks" in detail(screen).plain  # the sources of the active snapshot
        await ask(pilot, screen, "backoff")
        r = screen.result
        assert r is not None and r.chunks
        assert [c.id for c in screen.chunk_list.rows] == [c.id for c in r.chunks]
        assert screen.node_list.rows[0].node.label == "pkg.retry.backoff"
        assert {row.edge.relation_type for row in screen.edge_list.rows} >= {"imports", "calls"}
        # the first chunk's text, the hit terms highlighted
        text = detail(screen)
        assert "backoff" in text.plain.lower()
        assert any(str(span.style) == "bold reverse" for span in text.spans)
        # the graph pane draws the first node's neighbourhood
        graph = screen.query_one("#kb-graph-body", Static).content
        assert "pkg.retry.backoff" in str(getattr(graph, "label", ""))
        assert "calls" in drawn_text(app) or "imports" in drawn_text(app)
        # the evidence of the selected node, its lines in the detail pane
        evidence = screen.evidence_list
        assert evidence.rows and all(row.evidence.node_id == screen.node_list.rows[0].node.id for row in evidence.rows)
        evidence.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "▶" in detail(screen).plain
        # a CJK query
        await ask(pilot, screen, "部署")
        assert screen.result is not None and screen.result.chunks[0].relative_path == "guide.md"


async def test_query_history_and_fts_syntax(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_knowledge(pilot)
        for query in ('"', "NEAR(", "a AND *", "backoff"):
            await ask(pilot, screen, query)
            assert screen.result is not None, query
        box = screen.query_one(QueryInput)
        box.value = ""
        await pilot.press("up")
        assert box.value == "backoff"
        await pilot.press("up", "up")
        assert box.value == "NEAR("
        await pilot.press("down")
        assert box.value == "a AND *"


async def test_c_shows_dropped_candidates_marked(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    add_candidates(root)
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_knowledge(pilot)
        await ask(pilot, screen, "backoff")
        labels = {row.node.label: row for row in screen.node_list.rows}
        assert "Backoff policy" in labels and labels["Backoff policy"].status == "candidate"
        assert "Backoff ghost" not in labels
        screen.query_one(NodeList).focus()
        await pilot.press("c")
        await settled(pilot)
        rows = {row.node.label: row for row in screen.node_list.rows}
        assert rows["Backoff ghost"].dropped and rows["Backoff ghost"].status == "dropped"
        assert "dropped" in drawn_text(app)
        await pilot.press("c")
        await settled(pilot)
        assert "Backoff ghost" not in {row.node.label for row in screen.node_list.rows}


async def test_unindexed_and_unknown_bases_say_why(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    from store.knowledge.clear import ClearIndexRepair

    ClearIndexRepair(root, OpenMode.READ_WRITE, "code", NOW).apply()
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_knowledge(pilot)
        await ask(pilot, screen, "backoff")
        assert screen.result is None
        assert "unindexed" in drawn_text(app)


async def test_hostile_chunks_and_paths_are_drawn_as_text(tmp_path: Path) -> None:
    root = make_dir(tmp_path, {f"{EVIL[:24]}.md": f"# Title {EVIL}\n\nhostile words {EVIL}\n",
                               "ok.py": f'"""{EVIL}"""\n\n\ndef hostile():\n    return 1\n'})
    app = SessionscopeApp(root, OpenMode.SNAPSHOT)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_knowledge(pilot)
        await ask(pilot, screen, "hostile title")
        assert screen.result is not None and screen.result.chunks
        for lst in (ChunkList, NodeList, EdgeList, EvidenceList):
            screen.query_one(lst).focus()
            await pilot.press("enter")
            await pilot.pause()
            text = assert_clean(app, lst.__name__)
        assert "[bold]b[/bold]" in text or "[/]" in text
        assert app.is_running


async def test_read_modes_write_nothing_and_block_clear(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    kb = root / "knowledge-bases"
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in kb.iterdir()}
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_knowledge(pilot)
        await ask(pilot, screen, "backoff")
        screen.query_one(BaseList).focus()
        assert screen.check_action("clear_index", ()) is None
        await pilot.press("X")
        await settled(pilot)
        assert not isinstance(app.screen, ConfirmDialog)
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in kb.iterdir()} == before


async def test_clear_index_through_the_confirm_dialog(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    app = SessionscopeApp(root, OpenMode.READ_WRITE)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_knowledge(pilot)
        screen.query_one(BaseList).focus()
        await pilot.press("X")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await pilot.pause(0.2)
        screen = await settled(pilot)
        assert screen.base_list.rows[0].active is None
