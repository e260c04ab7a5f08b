"""Command-line commands for knowledge bases (a :data:`tui.cli.core.COMMAND_MODULES` module).

    sessionscope [--dir PATH] kb list [--json]
    sessionscope [--dir PATH] kb query BASE_ID QUERY [--json] [--limit N] [--candidates]
    sessionscope [--dir PATH] kb sources BASE_ID [--json]
    sessionscope [--dir PATH] kb index PATH --name NAME [--json]
    sessionscope [--dir PATH] repair kb-clear-index BASE_ID [--dry-run] [--yes] [--json]

``list``, ``query`` and ``sources`` only read (read-only by default, like ``list``; ``--snapshot`` works too).
``index`` writes ``<session dir>/knowledge-bases/<id>.db`` (the id is NAME made safe for a file name): it opens
the directory read-write and is refused in a read mode (exit 3). Exit status: 0 success, 1 a failure (an
unindexed base), 2 bad arguments or an unknown base id, 3 a refused write.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import ReadOnlyStore
from store.knowledge.base import KnowledgeBaseNotFound, mode_of
from store.mothx.db import OpenMode
from store.safetext import one_line
from store.times import format_rfc3339
from tui.cli.output import Column, err, json_out, out, table

if TYPE_CHECKING:
    from store.knowledge.clear import ClearIndexRepair
    from store.knowledge.model import QueryResult
    from store.mothx.sessiondir import SessionDir

AddLocation = Callable[..., None]
EXIT_UNKNOWN = 2


def register(subparsers: argparse._SubParsersAction, add_location: AddLocation) -> None:
    from tui.cli.core import _Parser as parser_class

    kb = subparsers.add_parser("kb", help="list, query and index knowledge bases",
                               description="Knowledge bases of the session directory (knowledge-bases/<id>.db).")
    add_location(kb, nested=True)
    acts = kb.add_subparsers(dest="kb_command", metavar="ACTION", parser_class=parser_class)
    acts.required = True
    ls = acts.add_parser("list", help="every base with its active snapshot and counts (read-only)",
                         description="List the knowledge bases with their active snapshot and counts (read-only).")
    add_location(ls, nested=True)
    ls.add_argument("--json", action="store_true", help="print a JSON list of base objects")
    ls.set_defaults(handler=cmd_list)

    q = acts.add_parser("query", help="search a base's active snapshot and show the graph around the hits",
                        description="Full-text search of the active snapshot's chunks (bm25 order), the nodes they "
                                    "are evidence for, the edges up to two hops around them and the evidence of "
                                    "each. Read-only.")
    add_location(q, nested=True)
    q.add_argument("base_id", metavar="BASE_ID")
    q.add_argument("query", metavar="QUERY", help="words to search for (FTS syntax is taken as plain text)")
    q.add_argument("--json", action="store_true", help="print the result as JSON")
    q.add_argument("--limit", metavar="N", type=_limit, default=8, help="chunks to return (default 8)")
    q.add_argument("--candidates", action="store_true",
                   help="also show the candidate nodes left out because they have no evidence")
    q.set_defaults(handler=cmd_query)

    src = acts.add_parser("sources", help="the files the active snapshot indexed, and what changed",
                          description="The active snapshot's files (never their contents), with its diff and "
                                      "discovery summaries. Read-only.")
    add_location(src, nested=True)
    src.add_argument("base_id", metavar="BASE_ID")
    src.add_argument("--json", action="store_true", help="print the sources as JSON")
    src.set_defaults(handler=cmd_sources)

    idx = acts.add_parser("index", help="build or refresh a base from a folder of Python and Markdown",
                          description="Index PATH (Python and Markdown) into knowledge-bases/<id>.db of the session "
                                      "directory, deterministically and without a model. Unchanged files reuse their "
                                      "previous subgraph. A write: refused in a read mode.")
    add_location(idx, nested=True)
    idx.add_argument("path", metavar="PATH", type=Path, help="the folder to index")
    idx.add_argument("--name", required=True, help="the base's name (its id is the name made file-safe)")
    idx.add_argument("--json", action="store_true", help="print the report as JSON")
    idx.set_defaults(handler=cmd_index)


def register_repairs(kinds: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    clear = kinds.add_parser("kb-clear-index", help="clear a knowledge base's index (its configuration stays)",
                             description="Remove the active snapshot and every graph row of a knowledge base; its "
                                         "configuration and source folder stay. Nothing to clear succeeds too.")
    clear.add_argument("base_id", metavar="BASE_ID")
    common(clear)
    clear.set_defaults(make_repair=make_clear_repair)


def make_clear_repair(sd: SessionDir, args: argparse.Namespace) -> ClearIndexRepair:
    from store.knowledge.clear import ClearIndexRepair

    return ClearIndexRepair(sd.root, mode_of(sd.mode, sd.writable), str(args.base_id), format_rfc3339())


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if not 1 <= value <= 500:
        raise argparse.ArgumentTypeError(f"'{text}' is not between 1 and 500")
    return value


def _open(args: argparse.Namespace, mode: OpenMode) -> SessionDir:
    from tui.cli import core as cli

    return cli.open_location(args, cli._mode(args, default=mode))  # noqa: SLF001 - one rule for the modes


def _unknown(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except KnowledgeBaseNotFound as exc:
            err(exc)
            return EXIT_UNKNOWN
    return run


# ------------------------------------------------------------------------------------------------ commands


@_unknown
def cmd_list(args: argparse.Namespace) -> int:
    from store.knowledge.publish import list_bases

    with _open(args, OpenMode.READ_ONLY) as sd:
        bases = list_bases(sd.root, mode_of(sd.mode, sd.writable))
    if args.json:
        json_out([b.to_json() for b in bases])
        return 0
    if not bases:
        out(f"No knowledge bases in {sd.root / 'knowledge-bases'}.")
        return 0
    rows = []
    for b in bases:
        snap = b.active
        state = "error" if b.problem else ("indexed" if snap else (f"unindexed ({b.latest.status})" if b.latest else
                                                                   "unindexed"))
        rows.append([b.base_id, b.base.name if b.base else b.problem, state, snap.id if snap else "",
                     snap.file_count if snap else "", snap.chunk_count if snap else "", snap.node_count if snap else "",
                     snap.edge_count if snap else "", snap.finished_at if snap else "",
                     b.base.store_version if b.base else ""])
    table([Column("ID"), Column("NAME", cut=True), Column("STATE"), Column("SNAPSHOT"), Column("FILES", True),
           Column("CHUNKS", True), Column("NODES", True), Column("EDGES", True), Column("FINISHED"),
           Column("STORE", True)], rows)
    for b in bases:
        if b.latest is not None and b.latest.error_summary and b.active is None:
            out(f"{b.base_id}: last run {b.latest.status}: {one_line(b.latest.error_summary)}")
    return 0


@_unknown
def cmd_query(args: argparse.Namespace) -> int:
    from store.knowledge.query import query_graph

    with _open(args, OpenMode.READ_ONLY) as sd:
        result = query_graph(sd.root, args.base_id, args.query, mode_of(sd.mode, sd.writable), args.limit)
    if args.json:
        json_out(result.to_json(candidates=args.candidates))
        return 0
    print_result(result, candidates=args.candidates)
    return 0


def print_result(r: QueryResult, *, candidates: bool) -> None:
    out(f"{r.base.id} · snapshot {r.snapshot.id} · terms: {', '.join(r.terms) or '(none)'}"
        + (" · truncated" if r.truncated else ""))
    labels = {n.id: n.label for n in (*r.nodes, *r.dropped)}
    chunk_of = {c.id: c for c in r.chunks}
    out()
    out(f"Chunks ({len(r.chunks)})")
    table([Column("#", True), Column("FILE", cut=True), Column("LINES"), Column("TEXT", cut=True)],
          [[n, c.relative_path, f"{c.start_line}-{c.end_line}", one_line(c.text)[:100]]
           for n, c in enumerate(r.chunks, 1)])
    out()
    out(f"Nodes ({len(r.nodes)})")
    counts = {n.id: len(r.evidence_for(node_id=n.id)) for n in r.nodes}
    rows = [[n.status, n.kind, n.label, f"{n.confidence:g}", counts[n.id], "seed" if n.id in r.seed_ids else ""]
            for n in r.nodes]
    if candidates:
        rows += [["dropped", n.kind, n.label, f"{n.confidence:g}", 0, "no evidence"] for n in r.dropped]
    table([Column("STATUS"), Column("KIND"), Column("LABEL", cut=True), Column("CONF", True), Column("EVIDENCE", True),
           Column("")], rows)
    out()
    out(f"Edges ({len(r.edges)})")
    table([Column("FROM", cut=True), Column("RELATION"), Column("TO", cut=True), Column("CONF", True)],
          [[labels.get(e.from_node_id, e.from_node_id), e.relation_type, labels.get(e.to_node_id, e.to_node_id),
            f"{e.confidence:g}"] for e in r.edges])
    out()
    out(f"Evidence ({len(r.evidence)})")
    edge_names = {e.id: f"{labels.get(e.from_node_id, '?')} {e.relation_type} {labels.get(e.to_node_id, '?')}"
                  for e in r.edges}
    table([Column("FOR", cut=True), Column("FILE", cut=True), Column("LINES"), Column("CONF", True), Column("")],
          [[labels.get(ev.node_id, "") if ev.node_id else edge_names.get(ev.edge_id, ev.edge_id),
            ev.relative_path or ev.chunk_id, f"{ev.start_line}-{ev.end_line}", f"{ev.confidence:g}",
            "hit" if ev.chunk_id in chunk_of else ""] for ev in r.evidence])
    if r.uncertainties:
        out()
        out("Uncertainties")
        for u in r.uncertainties:
            target = labels.get(u.node_id, u.node_id) or u.edge_id or u.path
            out(f"  {u.kind}: {u.description}" + (f" ({target})" if target else ""))


@_unknown
def cmd_sources(args: argparse.Namespace) -> int:
    from store.knowledge.publish import list_sources

    with _open(args, OpenMode.READ_ONLY) as sd:
        base, snap, sources = list_sources(sd.root, args.base_id, mode_of(sd.mode, sd.writable))
    if args.json:
        json_out({"knowledgeBase": base.to_json(), "snapshot": snap.to_json(), "sources": [s.to_json() for s in sources]})
        return 0
    out(f"{base.id} · snapshot {snap.id} · {len(sources)} files · finished {snap.finished_at}")
    table([Column("FILE", cut=True), Column("TITLE", cut=True), Column("TYPE"), Column("STATUS"), Column("BYTES", True),
           Column("CHUNKS", True)],
          [[s.relative_path, s.title, s.media_type, s.status, s.byte_size, s.chunk_count] for s in sources])
    if snap.diff is not None:
        d = snap.diff
        out(f"Since the previous snapshot: {d.added} added, {d.modified} modified, {d.removed} removed, "
            f"{d.unchanged} unchanged")
        for label, paths in (("added", d.added_paths), ("modified", d.modified_paths), ("removed", d.removed_paths)):
            for p in paths:
                out(f"  {label}: {p}")
    if snap.discovery is not None:
        s = snap.discovery
        out(f"Discovery: {s.discovered} entries, {s.ignored} ignored, {s.skipped} skipped")
        for e in s.ignored_entries + s.skipped_entries:
            out(f"  {e.path}: {e.reason}")
    return 0


@_unknown
def cmd_index(args: argparse.Namespace) -> int:
    from store.knowledge.indexer import index_folder

    with _open(args, OpenMode.READ_WRITE) as sd:
        if not sd.writable:
            raise ReadOnlyStore(f"refused: read-only: {sd.read_only_reason}; kb index writes knowledge-bases/.")
        report = index_folder(sd.root, args.path, args.name, mode_of(sd.mode, sd.writable))
    if args.json:
        json_out(report.to_json())
        return 0
    snap = report.snapshot
    out(f"{'Created' if report.created else 'Updated'} knowledge base {report.base_id} ({report.path})")
    out(f"snapshot {snap.id}: {snap.file_count} files ({report.reused_files} reused, {report.extracted_files} read), "
        f"{snap.chunk_count} chunks, {snap.node_count} nodes, {snap.edge_count} edges in {report.seconds:.2f} s")
    d = report.diff
    out(f"since the previous snapshot: {d.added} added, {d.modified} modified, {d.removed} removed, "
        f"{d.unchanged} unchanged; {report.discovery.ignored} ignored, {report.discovery.skipped} skipped")
    return 0
