"""The lists of the Knowledge screen, each a :class:`~tui.widgets.row_list.RowList` over a row source.

:class:`BaseList` shows :func:`store.knowledge.publish.list_bases` (one store call); the result lists show one
:func:`store.knowledge.query.query_graph` result (one store call, held in memory as a
:class:`~tui.widgets.row_sources.ListSource`): :class:`ChunkList` (rank, file, lines, text), :class:`NodeList`
(fact / candidate / dropped, kind, label, confidence, evidence count), :class:`EdgeList` and
:class:`EvidenceList`. Every cell is data drawn as plain text (the list never parses markup).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tui import actions
from tui.formatting import one_line
from tui.widgets.row_list import Column, ListSource, RowList

if TYPE_CHECKING:
    from store.knowledge.model import Chunk, Edge, Evidence, Node
    from store.knowledge.publish import BaseSummary

LIST_SCOPE = "kb-list"


def base_state(b: BaseSummary) -> str:
    if b.problem:
        return "error"
    if b.active is not None:
        return "indexed"
    return f"unindexed ({one_line(b.latest.status)})" if b.latest is not None else "unindexed"


class BaseList(RowList["BaseSummary"]):
    ACTION_SCOPE: ClassVar[str] = LIST_SCOPE
    BINDINGS: ClassVar = actions.bindings(LIST_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge lists"

    def make_columns(self) -> list[Column[BaseSummary]]:
        return [
            Column("id", "BASE", lambda b: b.base_id, min_width=10, grow=2, priority=0),
            Column("state", "STATE", base_state, min_width=9, priority=1,
                   style=lambda b: "bad" if b.problem else (None if b.active else "warn")),
            Column("files", "FILES", lambda b: f"{b.active.file_count:,}" if b.active else "–", min_width=5,
                   align="right", priority=3),
            Column("chunks", "CHUNKS", lambda b: f"{b.active.chunk_count:,}" if b.active else "–", min_width=6,
                   align="right", priority=2),
            Column("nodes", "NODES", lambda b: f"{b.active.node_count:,}" if b.active else "–", min_width=5,
                   align="right", priority=4),
            Column("edges", "EDGES", lambda b: f"{b.active.edge_count:,}" if b.active else "–", min_width=5,
                   align="right", priority=5),
        ]

    def show_bases(self, bases: list[BaseSummary], *, keep_cursor: bool = True) -> None:
        self.set_source(ListSource(bases, key=lambda b: b.base_id), keep_cursor=keep_cursor)


class ChunkList(RowList["Chunk"]):
    ACTION_SCOPE: ClassVar[str] = LIST_SCOPE
    BINDINGS: ClassVar = actions.bindings(LIST_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge lists"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        self.rank: dict[str, int] = {}
        super().__init__(id=id, classes=classes, empty_text="No chunk matches.", loading_text="Type a query and press enter.")

    def make_columns(self) -> list[Column[Chunk]]:
        return [
            Column("rank", "#", lambda c: str(self.rank.get(c.id, 0)), min_width=2, align="right", priority=0),
            Column("file", "FILE", lambda c: c.relative_path, min_width=10, grow=2, priority=0, overflow="start"),
            Column("lines", "LINES", lambda c: f"{c.start_line}-{c.end_line}", min_width=7, priority=1),
            Column("text", "TEXT", lambda c: one_line(c.text), min_width=8, grow=3, priority=2, style=lambda c: "dim"),
        ]

    def show_chunks(self, chunks: tuple[Chunk, ...] | list[Chunk]) -> None:
        self.rank = {c.id: n for n, c in enumerate(chunks, 1)}
        self.set_source(ListSource(chunks, key=lambda c: c.id))


@dataclass(frozen=True)
class NodeRow:
    node: Node
    evidence: int
    dropped: bool = False
    seed: bool = False

    @property
    def status(self) -> str:
        return "dropped" if self.dropped else self.node.status


class NodeList(RowList[NodeRow]):
    ACTION_SCOPE: ClassVar[str] = LIST_SCOPE
    BINDINGS: ClassVar = actions.bindings(LIST_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge lists"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, empty_text="No node.", loading_text="")

    def make_columns(self) -> list[Column[NodeRow]]:
        return [
            Column("status", "STATUS", lambda r: r.status, min_width=9, priority=0,
                   style=lambda r: "bad" if r.dropped else ("warn" if r.node.status == "candidate" else "good")),
            Column("kind", "KIND", lambda r: r.node.kind, min_width=6, max_width=10, priority=3),
            Column("label", "LABEL", lambda r: r.node.label, min_width=10, grow=3, priority=0, overflow="start"),
            Column("conf", "CONF", lambda r: f"{r.node.confidence:.2g}", min_width=4, align="right", priority=2),
            Column("ev", "EV", lambda r: str(r.evidence), min_width=3, align="right", priority=1),
        ]

    def row_style(self, row: NodeRow) -> str | None:
        return "dim" if row.dropped else None

    def show_nodes(self, rows: list[NodeRow]) -> None:
        self.set_source(ListSource(rows, key=lambda r: r.node.id))


@dataclass(frozen=True)
class EdgeRow:
    edge: Edge
    source: str
    target: str
    evidence: int


class EdgeList(RowList[EdgeRow]):
    ACTION_SCOPE: ClassVar[str] = LIST_SCOPE
    BINDINGS: ClassVar = actions.bindings(LIST_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge lists"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, empty_text="No edge.", loading_text="")

    def make_columns(self) -> list[Column[EdgeRow]]:
        return [
            Column("from", "FROM", lambda r: r.source, min_width=8, grow=2, priority=0, overflow="start"),
            Column("rel", "RELATION", lambda r: r.edge.relation_type, min_width=8, max_width=14, priority=0),
            Column("to", "TO", lambda r: r.target, min_width=8, grow=2, priority=0, overflow="start"),
            Column("conf", "CONF", lambda r: f"{r.edge.confidence:.2g}", min_width=4, align="right", priority=1,
                   style=lambda r: "warn" if r.edge.confidence < 0.5 else None),
        ]

    def show_edges(self, rows: list[EdgeRow]) -> None:
        self.set_source(ListSource(rows, key=lambda r: r.edge.id))


@dataclass(frozen=True)
class EvidenceRow:
    evidence: Evidence
    owner: str  # the node's label, or "from relation to" for an edge
    hit: bool  # its chunk is one of the hits


class EvidenceList(RowList[EvidenceRow]):
    ACTION_SCOPE: ClassVar[str] = LIST_SCOPE
    BINDINGS: ClassVar = actions.bindings(LIST_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge lists"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, empty_text="No evidence.", loading_text="")

    def make_columns(self) -> list[Column[EvidenceRow]]:
        return [
            Column("for", "FOR", lambda r: r.owner, min_width=8, grow=2, priority=0, overflow="start"),
            Column("file", "FILE", lambda r: r.evidence.relative_path or r.evidence.chunk_id, min_width=8, grow=2,
                   priority=0, overflow="start"),
            Column("lines", "LINES", lambda r: f"{r.evidence.start_line}-{r.evidence.end_line}", min_width=5,
                   priority=1),
            Column("hit", "", lambda r: "hit" if r.hit else "", min_width=3, priority=2, style=lambda r: "accent"),
        ]

    def show_evidence(self, rows: list[EvidenceRow]) -> None:
        self.set_source(ListSource(rows, key=lambda r: r.evidence.id))


__all__ = ["LIST_SCOPE", "BaseList", "ChunkList", "EdgeList", "EdgeRow", "EvidenceList", "EvidenceRow", "NodeList",
           "NodeRow", "base_state"]
