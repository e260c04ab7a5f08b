"""What the Knowledge screen draws and the messages its workers post: the pure functions that turn a query
result into the graph tree, a chunk's highlighted text, an evidence row's lines and a base's sources (every data
string through :mod:`tui.safe`, never markup), and the typed messages (:mod:`tui.messages` style)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from rich.tree import Tree
from textual.message import Message

from tui.formatting import one_line, plural
from tui.safe import data_line, data_text
from tui.widgets.knowledge_lists import EvidenceRow

if TYPE_CHECKING:
    from store.knowledge.model import Chunk, KnowledgeBase, QueryResult, Snapshot, Source
    from store.knowledge.publish import BaseSummary

HIT_STYLE = "bold reverse"
TREE_FANOUT = 24  # children drawn per node of the graph pane ("… N more" below)


# --- messages ---------------------------------------------------------------------------------------------------


@dataclass
class BasesLoaded(Message):
    generation: int
    bases: list[BaseSummary]
    error: str = ""


@dataclass
class QueryAnswered(Message):
    generation: int
    base_id: str
    query: str
    result: QueryResult | None
    chunks: dict[str, Chunk]  # every chunk an evidence row cites (for its lines)
    error: str = ""


@dataclass
class SourcesRead(Message):
    base_id: str
    base: KnowledgeBase | None
    snapshot: Snapshot | None
    sources: list[Source]
    error: str = ""


# --- text of the panes (pure functions) -------------------------------------------------------------------------


def chunk_text(chunk: Chunk, terms: Iterable[str], rank: int = 0) -> Text:
    """A chunk's file, lines and text with the hit terms highlighted (safe text: a term never meets markup)."""
    head = Text.assemble(data_line(chunk.relative_path, "bold"), (f"  lines {chunk.start_line}-{chunk.end_line}", "dim"))
    if rank:
        head.append(f"  rank {rank}", style="dim")
    body = data_text(chunk.text)
    words = [t for t in terms if t]
    if words:
        body.highlight_words(words, style=HIT_STYLE, case_sensitive=False)
    return Text("\n").join([head, Text(""), body])


def evidence_text(row: EvidenceRow, chunk: Chunk | None) -> Text:
    ev = row.evidence
    head = Text.assemble(("Evidence for ", "dim"), data_line(row.owner, "bold"), ("\n", ""),
                         data_line(ev.relative_path or ev.chunk_id), (f"  lines {ev.start_line}-{ev.end_line}", "dim"),
                         (f"  confidence {ev.confidence:g}", "dim"))
    if chunk is None:
        return Text.assemble(head, ("\n\n(the chunk is not in this snapshot)", "dim"))
    out = Text.assemble(head, "\n")
    for n, line in enumerate(chunk.text.split("\n"), start=chunk.start_line):
        inside = ev.start_line <= n <= ev.end_line
        out.append(f"\n{'▶' if inside else ' '}{n:>5} ", style="bold" if inside else "dim")
        out.append_text(data_line(line, "bold" if inside else ""))
    return out


def node_label(result: QueryResult, node_id: str) -> str:
    for n in (*result.nodes, *result.dropped):
        if n.id == node_id:
            return n.label
    return node_id


def neighbourhood(result: QueryResult, node_id: str) -> Tree:
    """The selected node and the result's edges around it, two levels deep, as a tree."""
    nodes = {n.id: n for n in (*result.nodes, *result.dropped)}
    around: dict[str, list[tuple[str, str, str, float]]] = {}
    for e in result.edges:
        around.setdefault(e.from_node_id, []).append((e.id, f"→ {e.relation_type}", e.to_node_id, e.confidence))
        around.setdefault(e.to_node_id, []).append((e.id, f"← {e.relation_type}", e.from_node_id, e.confidence))

    def label(nid: str) -> Text:
        node = nodes.get(nid)
        if node is None:
            return data_line(nid, "dim")
        text = data_line(node.label, "bold")
        text.append(f"  {one_line(node.kind)}", style="dim")
        if node.status == "candidate":
            text.append("  candidate", style="yellow")
        return text

    root = Tree(label(node_id), guide_style="dim")
    seen = {node_id}

    def grow(branch: Tree, nid: str, depth: int, parent: str = "") -> None:
        links = [link for link in around.get(nid, []) if link[2] != parent]
        for _eid, relation, other, confidence in links[:TREE_FANOUT]:
            line = Text(f"{relation} ", style="dim" if confidence >= 0.5 else "yellow")
            line.append_text(label(other))
            child = branch.add(line)
            if depth < 2 and other not in seen:
                seen.add(other)
                grow(child, other, depth + 1, nid)
        if len(links) > TREE_FANOUT:
            branch.add(Text(f"… {len(links) - TREE_FANOUT} more", style="dim"))

    grow(root, node_id, 1)
    return root


def sources_text(base: KnowledgeBase, snap: Snapshot, sources: list[Source]) -> Text:
    lines = [Text.assemble(data_line(base.name, "bold"), ("  ", ""), data_line(base.root_dir, "dim")),
             Text(f"snapshot {one_line(snap.id)} · finished {one_line(snap.finished_at)} · store v{base.store_version}",
                  style="dim")]
    if snap.diff is not None:
        d = snap.diff
        lines.append(Text(f"since the previous snapshot: {d.added} added, {d.modified} modified, {d.removed} removed, "
                          f"{d.unchanged} unchanged"))
        for word, paths in (("+", d.added_paths), ("~", d.modified_paths), ("-", d.removed_paths)):
            lines.extend(Text.assemble((f"  {word} ", "dim"), data_line(p)) for p in paths[:10])
    if snap.discovery is not None:
        s = snap.discovery
        lines.append(Text(f"discovery: {s.discovered} entries, {s.ignored} ignored, {s.skipped} skipped", style="dim"))
    lines.append(Text(f"{plural(len(sources), 'file')} indexed:", style="bold"))
    for src in sources:
        lines.append(Text.assemble(data_line(src.relative_path), (f"  {src.chunk_count} chunks, {src.byte_size:,} B", "dim")))
    return Text("\n").join(lines)


__all__ = ["BasesLoaded", "QueryAnswered", "SourcesRead", "chunk_text",
           "evidence_text", "neighbourhood", "node_label", "sources_text"]
