"""The Knowledge screen: knowledge bases, a query box, and why the answer is what it is.

Top: the bases of the session directory (:class:`~tui.widgets.knowledge_lists.BaseList`: active snapshot and
counts) and the query box (``/``; ``enter`` runs the query; ``up`` / ``down`` walk this session's queries).
Below, the result of :func:`store.knowledge.query.query_graph` (reference 15.4, the same function and the same
result as ``sessionscope kb query``): the matching chunks by rank, the nodes (fact / candidate, confidence,
evidence count), the edges around them, the evidence of the selected node or edge, a graph pane drawing the
selected node's neighbourhood (two levels) as a tree, and a detail pane: the selected chunk's text with the hit
terms highlighted, an evidence row's lines, or, for a base, the files its active snapshot indexed with what
changed since the previous one. ``c`` also lists the candidates left out for want of evidence, marked
``dropped``. ``X`` clears the selected base's index after a preview (a write: blocked in the read modes).

Every store call runs in a thread worker that posts one typed message; one handler applies it. Every data
string is drawn as safe text (:mod:`tui.safe`), never as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from tui import actions
from tui.context import store
from tui.formatting import describe_error, one_line, plural
from tui.lifecycle import ReportsWorkerFailures
from tui.messages import WorkerFailed
from tui.repair_flow import NO_REFUSALS, FlowWords, Outcome, RepairFlow
from tui.safe import data_line, data_text, notify
from tui.screens.knowledge_panes import (
    BasesLoaded,
    QueryAnswered,
    SourcesRead,
    chunk_text,
    evidence_text,
    neighbourhood,
    node_label,
    sources_text,
)
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.knowledge_lists import (
    BaseList,
    ChunkList,
    EdgeList,
    EdgeRow,
    EvidenceList,
    EvidenceRow,
    NodeList,
    NodeRow,
)
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from store.knowledge.clear import ClearIndexRepair
    from store.knowledge.model import Chunk, QueryResult
    from store.knowledge.publish import BaseSummary
    from store.mothx.repair_kit import RepairPreview, RepairResult
    from store.mothx.sessiondir import SessionDir
    from tui.widgets.confirm import ConfirmRequest

HISTORY_CAP = 100


# --- the query box ----------------------------------------------------------------------------------------------


class QueryInput(Input):
    """The query box: ``enter`` runs the query, ``up`` / ``down`` walk the queries of this session."""

    ACTION_SCOPE: ClassVar[str] = "kb-query"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge query box"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="Query: words to search for (press / to type, enter to run)", id=id)
        self.history: list[str] = []
        self.position = 0

    def remember(self, query: str) -> None:
        if query and (not self.history or self.history[-1] != query):
            self.history.append(query)
            del self.history[:-HISTORY_CAP]
        self.position = len(self.history)

    def action_history(self, step: int) -> None:
        if not self.history:
            notify(self, "No earlier query in this session.", timeout=2)
            return
        self.position = max(0, min(len(self.history), self.position + step))
        self.value = self.history[self.position] if self.position < len(self.history) else ""
        self.cursor_position = len(self.value)


# --- the screen -------------------------------------------------------------------------------------------------


class ClearAtApply:
    """The clear of one base's index (:class:`store.knowledge.clear.ClearIndexRepair`), stamped with the time it
    is applied, not the time it was previewed."""

    def __init__(self, sd: SessionDir, base_id: str) -> None:
        self.sd = sd
        self.base_id = base_id

    def _repair(self) -> ClearIndexRepair:
        from store.knowledge.base import mode_of
        from store.knowledge.clear import ClearIndexRepair
        from store.times import format_rfc3339

        sd = self.sd
        return ClearIndexRepair(sd.root, mode_of(sd.mode, sd.writable), self.base_id, format_rfc3339())

    def preview(self) -> RepairPreview:
        return self._repair().preview()

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        return self._repair().apply(expected)


class KnowledgeScreen(RepairFlow, ReportsWorkerFailures, Screen[None]):
    """Knowledge bases, a query, and the chunks, graph and evidence of its answer."""

    ACTION_SCOPE: ClassVar[str] = "knowledge"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Knowledge screen"
    AUTO_FOCUS = "#kb-bases"
    REPAIR_GROUP: ClassVar[str] = "kb-clear"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords(
        done="Index cleared", refused="Clear refused", failed="Clear refused", preview_failed="Cannot preview the clear",
        done_timeout=None, refused_timeout=None, failed_timeout=None, say_cancelled=False,
        preview_work="Preview clearing an index", apply_work="Clear an index")
    REPAIR_REFUSALS: ClassVar[tuple[str, ...]] = NO_REFUSALS

    DEFAULT_CSS = """
    KnowledgeScreen #kb-top { height: 7; }
    KnowledgeScreen #kb-bases { width: 3fr; border: round $panel; }
    KnowledgeScreen #kb-side { width: 2fr; }
    KnowledgeScreen #kb-query { margin: 0 0; }
    KnowledgeScreen #kb-summary { height: 1fr; padding: 0 1; color: $foreground-muted; }
    KnowledgeScreen .kb-row { height: 1fr; }
    KnowledgeScreen .kb-pane { width: 1fr; border: round $panel; }
    KnowledgeScreen .kb-pane:focus-within { border: round $primary; }
    KnowledgeScreen #kb-bases:focus { border: round $primary; }
    KnowledgeScreen .kb-text { width: 1fr; border: round $panel; padding: 0 1; }
    """

    def __init__(self, sd: SessionDir | None = None) -> None:
        super().__init__()
        self.sd = sd
        self.generation = 0
        self.bases: list[BaseSummary] = []
        self.base_id = ""
        self.query_text = ""
        self.result: QueryResult | None = None
        self.cited: dict[str, Chunk] = {}
        self.show_dropped = False

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Knowledge")
        with Horizontal(id="kb-top"):
            yield BaseList(id="kb-bases", empty_text="No knowledge bases. Build one: sessionscope kb index PATH "
                                                     "--name NAME, then press r.",
                           loading_text="Reading knowledge bases…")
            with Vertical(id="kb-side"):
                yield QueryInput(id="kb-query")
                yield Static(Text("Pick a base, press / and type a query.", style="dim"), id="kb-summary")
        with Horizontal(classes="kb-row"):
            yield ChunkList(id="kb-chunks", classes="kb-pane")
            yield NodeList(id="kb-nodes", classes="kb-pane")
            yield EdgeList(id="kb-edges", classes="kb-pane")
        with Horizontal(classes="kb-row"):
            yield EvidenceList(id="kb-evidence", classes="kb-pane")
            with VerticalScroll(id="kb-graph", classes="kb-text"):
                yield Static(Text("The graph around the selected node.", style="dim"), id="kb-graph-body")
            with VerticalScroll(id="kb-detail", classes="kb-text"):
                yield Static(Text("The selected chunk's text.", style="dim"), id="kb-detail-body")
        yield StatusBar(id="kb-status")
        yield KeyBar()

    def on_mount(self) -> None:
        if self.sd is None:
            self.sd = store(self)
        for selector, title in (("#kb-bases", "Bases"), ("#kb-chunks", "Chunks"), ("#kb-nodes", "Nodes"),
                                ("#kb-edges", "Edges"), ("#kb-evidence", "Evidence"), ("#kb-graph", "Graph"),
                                ("#kb-detail", "Text")):
            self.query_one(selector).border_title = title
        self._load_bases()

    # --- widgets ----------------------------------------------------------------------------------------------

    @property
    def base_list(self) -> BaseList:
        return self.query_one(BaseList)

    @property
    def chunk_list(self) -> ChunkList:
        return self.query_one(ChunkList)

    @property
    def node_list(self) -> NodeList:
        return self.query_one(NodeList)

    @property
    def edge_list(self) -> EdgeList:
        return self.query_one(EdgeList)

    @property
    def evidence_list(self) -> EvidenceList:
        return self.query_one(EvidenceList)

    def _detail(self, renderable: RenderableType) -> None:
        self.query_one("#kb-detail-body", Static).update(renderable)
        self.query_one("#kb-detail", VerticalScroll).scroll_home(animate=False)

    def _graph(self, renderable: RenderableType) -> None:
        self.query_one("#kb-graph-body", Static).update(renderable)

    def _summary(self, text: Text) -> None:
        self.query_one("#kb-summary", Static).update(text)

    # --- bases ------------------------------------------------------------------------------------------------

    def _load_bases(self) -> None:
        if self.sd is None:
            self.base_list.show_message("No session directory is open.")
            return
        self.generation += 1
        self._read_bases(self.sd, self.generation)

    @work(thread=True, exclusive=True, group="kb-bases", exit_on_error=False, description="Read knowledge bases")
    def _read_bases(self, sd: SessionDir, generation: int) -> None:
        try:
            from store.knowledge.base import mode_of
            from store.knowledge.publish import list_bases

            bases = list_bases(sd.root, mode_of(sd.mode, sd.writable))
        except Exception as exc:  # noqa: BLE001 - one line on screen, never a traceback
            self.post_message(BasesLoaded(generation, [], describe_error(exc)))
            return
        self.post_message(BasesLoaded(generation, bases))

    @on(BasesLoaded)
    def _bases_loaded(self, message: BasesLoaded) -> None:
        if message.generation != self.generation:
            return
        if message.error:
            self.base_list.show_message(f"✗ {message.error}")
            notify(self, message.error, title="Cannot read knowledge bases", severity="error")
            return
        self.bases = message.bases
        self.base_list.show_bases(message.bases)
        indexed = sum(1 for b in message.bases if b.active is not None)
        self.query_one(StatusBar).count = f"{plural(len(message.bases), 'base')}, {indexed} indexed"
        if self.query_text and self.base_id:
            self._run_query()

    @on(RowList.Highlighted, "#kb-bases")
    def _base_highlighted(self, message: RowList.Highlighted) -> None:
        row: BaseSummary | None = message.row
        if row is None or row.base_id == self.base_id:
            return
        self.base_id = row.base_id
        if row.problem:
            self._detail(data_text(f"✗ {row.problem}", "red"))
        elif row.active is None:
            why = f"last run {row.latest.status}: {row.latest.error_summary}" if row.latest else "never indexed"
            self._detail(Text.assemble(data_line(row.base_id, "bold"), "\nunindexed: ", data_line(why)))
        elif self.sd is not None:
            self._read_sources(self.sd, row.base_id)
        if self.query_text:
            self._run_query()

    @on(RowList.Selected, "#kb-bases")
    def _base_selected(self, message: RowList.Selected) -> None:
        self.query_one(QueryInput).focus()

    @work(thread=True, exclusive=True, group="kb-sources", exit_on_error=False, description="Read sources")
    def _read_sources(self, sd: SessionDir | None, base_id: str) -> None:
        if sd is None:
            return
        try:
            from store.knowledge.base import mode_of
            from store.knowledge.publish import list_sources

            base, snap, sources = list_sources(sd.root, base_id, mode_of(sd.mode, sd.writable))
        except Exception as exc:  # noqa: BLE001
            self.post_message(SourcesRead(base_id, None, None, [], describe_error(exc)))
            return
        self.post_message(SourcesRead(base_id, base, snap, sources))

    @on(SourcesRead)
    def _sources_read(self, message: SourcesRead) -> None:
        if message.base_id != self.base_id or self.result is not None:
            return
        if message.base is None or message.snapshot is None:
            self._detail(data_text(f"✗ {message.error}", "red"))
            return
        self._detail(sources_text(message.base, message.snapshot, message.sources))

    # --- the query --------------------------------------------------------------------------------------------

    def action_focus_query(self) -> None:
        self.query_one(QueryInput).focus()

    @on(Input.Submitted, "#kb-query")
    def _submitted(self, message: Input.Submitted) -> None:
        box = self.query_one(QueryInput)
        box.remember(message.value)
        self.query_text = message.value
        if not self.base_id:
            notify(self, "There is no knowledge base to query.", severity="warning", timeout=3)
            return
        self._run_query()

    def _run_query(self) -> None:
        if self.sd is None:
            return
        self.generation += 1
        self.chunk_list.show_message("Searching…")
        self._query(self.sd, self.generation, self.base_id, self.query_text)

    @work(thread=True, exclusive=True, group="kb-query", exit_on_error=False, description="Query a knowledge base")
    def _query(self, sd: SessionDir, generation: int, base_id: str, query: str) -> None:
        try:
            from store.knowledge.base import mode_of
            from store.knowledge.query import evidence_chunks, query_graph

            mode = mode_of(sd.mode, sd.writable)
            result = query_graph(sd.root, base_id, query, mode)
            cited = {c.id: c for c in result.chunks}
            missing = sorted({e.chunk_id for e in result.evidence} - set(cited))
            cited.update(evidence_chunks(sd.root, base_id, missing, mode))
        except Exception as exc:  # noqa: BLE001
            self.post_message(QueryAnswered(generation, base_id, query, None, {}, describe_error(exc)))
            return
        self.post_message(QueryAnswered(generation, base_id, query, result, cited))

    @on(QueryAnswered)
    def _answered(self, message: QueryAnswered) -> None:
        if message.generation != self.generation:
            return
        self.result = message.result
        self.cited = message.chunks
        r = message.result
        if r is None:
            for lst in (self.chunk_list, self.node_list, self.edge_list, self.evidence_list):
                lst.show_message("")
            self.chunk_list.show_message(f"✗ {message.error}")
            self._graph(Text(""))
            self._detail(data_text(message.error, "red"))
            self._summary(data_text(f"✗ {message.error}", "red"))
            return
        self.chunk_list.show_chunks(r.chunks)
        self._fill_nodes()
        counts: dict[str, int] = {}
        for ev in r.evidence:
            if ev.edge_id:
                counts[ev.edge_id] = counts.get(ev.edge_id, 0) + 1
        self.edge_list.show_edges([EdgeRow(e, node_label(r, e.from_node_id), node_label(r, e.to_node_id),
                                           counts.get(e.id, 0)) for e in r.edges])
        summary = Text.assemble(
            (f"{plural(len(r.chunks), 'chunk')} · {plural(len(r.nodes), 'node')} · {plural(len(r.edges), 'edge')} · "
             f"{plural(len(r.evidence), 'evidence row')}", ""),
            (" · truncated" if r.truncated else "", "yellow"), "\nterms: ", data_line(", ".join(r.terms) or "(none)"))
        for u in r.uncertainties[:3]:
            summary.append("\n")
            summary.append_text(data_line(f"{u.kind}: {u.description}", "yellow"))
        if len(r.uncertainties) > 3:
            summary.append(f"\n… {len(r.uncertainties) - 3} more uncertainties", style="dim")
        self._summary(summary)
        if r.chunks:
            self._detail(chunk_text(r.chunks[0], r.terms, 1))
        else:
            self._detail(Text("No chunk matches these terms.", style="dim"))
        if not r.nodes:
            self._graph(Text("No node.", style="dim"))
            self.evidence_list.show_evidence([])

    def _fill_nodes(self) -> None:
        r = self.result
        if r is None:
            return
        counts: dict[str, int] = {}
        for ev in r.evidence:
            if ev.node_id:
                counts[ev.node_id] = counts.get(ev.node_id, 0) + 1
        rows = [NodeRow(n, counts.get(n.id, 0), seed=n.id in r.seed_ids) for n in r.nodes]
        if self.show_dropped:
            rows += [NodeRow(n, 0, dropped=True, seed=n.id in r.seed_ids) for n in r.dropped]
        self.node_list.show_nodes(rows)

    def action_toggle_candidates(self) -> None:
        self.show_dropped = not self.show_dropped
        r = self.result
        if r is None:
            notify(self, "Run a query first: dropped candidates belong to a result.", timeout=3)
            return
        self._fill_nodes()
        shown = "shown" if self.show_dropped else "hidden"
        notify(self, f"{plural(len(r.dropped), 'dropped candidate')} {shown}.", timeout=3)

    def action_refresh(self) -> None:
        self._load_bases()

    # --- selection in the result panes ------------------------------------------------------------------------

    @on(RowList.Highlighted, "#kb-chunks")
    def _chunk_highlighted(self, message: RowList.Highlighted) -> None:
        if message.row is None or self.result is None or not message.control.has_focus:
            return
        self._detail(chunk_text(message.row, self.result.terms, self.chunk_list.rank.get(message.row.id, 0)))

    @on(RowList.Highlighted, "#kb-nodes")
    def _node_highlighted(self, message: RowList.Highlighted) -> None:
        r = self.result
        row: NodeRow | None = message.row
        if row is None or r is None:
            return
        self._graph(neighbourhood(r, row.node.id))
        self._show_evidence(node_id=row.node.id)
        if message.control.has_focus:
            self._detail(self._node_text(row))

    @on(RowList.Highlighted, "#kb-edges")
    def _edge_highlighted(self, message: RowList.Highlighted) -> None:
        row: EdgeRow | None = message.row
        if row is None or not message.control.has_focus:
            return
        self._show_evidence(edge_id=row.edge.id)
        self._detail(Text.assemble(data_line(row.source, "bold"), (f"  {one_line(row.edge.relation_type)}  ", "dim"),
                                   data_line(row.target, "bold"), (f"\nconfidence {row.edge.confidence:g} · "
                                                                   f"{plural(row.evidence, 'evidence row')}", "dim")))

    @on(RowList.Highlighted, "#kb-evidence")
    def _evidence_highlighted(self, message: RowList.Highlighted) -> None:
        row: EvidenceRow | None = message.row
        if row is None or not message.control.has_focus:
            return
        self._detail(evidence_text(row, self.cited.get(row.evidence.chunk_id)))

    @on(RowList.Selected)
    def _selected(self, message: RowList.Selected) -> None:
        """``enter`` on a result row shows it in the detail pane, whatever had the focus before."""
        control = message.control
        if control is self.base_list or message.row is None:
            return
        if isinstance(control, ChunkList) and self.result is not None:
            self._detail(chunk_text(message.row, self.result.terms, control.rank.get(message.row.id, 0)))
        elif isinstance(control, NodeList):
            self._detail(self._node_text(message.row))
        elif isinstance(control, EvidenceList):
            self._detail(evidence_text(message.row, self.cited.get(message.row.evidence.chunk_id)))
        elif isinstance(control, EdgeList):
            self._show_evidence(edge_id=message.row.edge.id)

    def _node_text(self, row: NodeRow) -> Text:
        node = row.node
        text = Text.assemble(data_line(node.label, "bold"), (f"  {one_line(node.kind)}", "dim"))
        status = "dropped: a candidate without evidence" if row.dropped else (
            "candidate: a model's claim, not a verified fact" if node.status == "candidate" else "fact")
        text.append(f"\n{status} · confidence {node.confidence:g} · {plural(row.evidence, 'evidence row')}"
                    + (" · seed" if row.seed else ""), style="yellow" if node.status == "candidate" else "dim")
        if node.summary:
            text.append("\n\n")
            text.append_text(data_text(node.summary))
        return text

    def _show_evidence(self, *, node_id: str = "", edge_id: str = "") -> None:
        r = self.result
        if r is None:
            return
        hits = {c.id for c in r.chunks}
        labels = {e.id: f"{node_label(r, e.from_node_id)} {e.relation_type} {node_label(r, e.to_node_id)}"
                  for e in r.edges}
        rows = [EvidenceRow(ev, node_label(r, ev.node_id) if ev.node_id else labels.get(ev.edge_id, ev.edge_id),
                            ev.chunk_id in hits) for ev in r.evidence_for(node_id=node_id, edge_id=edge_id)]
        self.evidence_list.show_evidence(rows)
        self.query_one("#kb-evidence").border_title = "Evidence of the node" if node_id else "Evidence of the edge"

    # --- clearing the index (a write) -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        sd = self.sd
        return actions.check_write(action, sd is not None and sd.writable)

    def action_clear_index(self) -> None:
        if self.sd is None or not self.base_id:
            notify(self, "There is no knowledge base to clear.", severity="warning", timeout=3)
            return
        if self.repair_busy:
            notify(self, "A clear is being previewed already.", timeout=2)
            return
        base_id = self.base_id

        def confirm(preview: RepairPreview) -> ConfirmRequest | None:
            if not preview.changes:
                notify(self, f"Knowledge base {one_line(base_id)} is unindexed already: nothing to clear.", timeout=3)
                return None
            from tui.widgets.confirm import ConfirmRequest

            return ConfirmRequest.of_preview(preview, title=preview.title, noun="row group", confirm_label="Clear",
                                             opened_by="X")

        self.start_repair("clear_index", lambda sd: ClearAtApply(sd, base_id), confirm, done=self._cleared)

    def _cleared(self, outcome: Outcome[RepairResult]) -> None:
        if outcome.stage == "apply":
            self.result = None
            self._load_bases()

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        if message.group == "kb-query":
            self.chunk_list.show_message(f"✗ {message.reason}")


__all__ = ["ClearAtApply", "KnowledgeScreen", "QueryInput"]
