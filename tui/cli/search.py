"""``sessionscope search``: ranked full-text search (a :data:`tui.cli.core.COMMAND_MODULES` module).

    sessionscope [--dir PATH] search QUERY... [--json] [--limit N] [--captured [--index]]

Sessions matching QUERY, best first (FTS5 bm25 over the search index kept in the user cache folder; built or
brought up to date on the way, never writing to the session directory), one row per session: its best hit's
score, session id, entry seq and role, and a snippet with the matched words. ``--captured`` searches captured
Claude Code / Codex records instead (the SESSION column is then the agent session id). Words are ANDed,
``"a b"`` is a phrase, ``abc*`` a prefix; anything else is literal (no FTS syntax error is possible). Where the
index cannot be kept the exact LIKE scan answers, and the last line says so. Read-only by default.

With a PostgreSQL team store (``--store postgresql://…``) captured records are searched in the store's own
full-text index. ``--index`` brings it up to date first (a write to the store: refused with --read-only or
--snapshot); without it a read answers from the index and searches the records captured since it was last
brought up to date exactly (one ranked result; the last line says how many), and with the exact ILIKE scan only
when the store has no index or it was never built, saying why.

Exit status: 0 (also when nothing matches), 1 a failure, 2 bad arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from store.safetext import one_line
from tui.cli import output
from tui.cli.output import Column, json_out, note, out

if TYPE_CHECKING:
    from store.search import SearchHit, SearchResult

AddLocation = Callable[..., None]
COLUMNS = (Column("SCORE", right=True), Column("SESSION"), Column("SEQ", right=True), Column("ROLE"),
           Column("HITS", right=True), Column("SNIPPET", cut=True))
CAPTURED_COLUMNS = (Column("SCORE", right=True), Column("AGENT"), Column("SESSION"), Column("LINE", right=True),
                    Column("HITS", right=True), Column("SNIPPET", cut=True))


def register(subparsers: argparse._SubParsersAction, add_location: AddLocation) -> None:
    """Add ``search`` to the command line."""
    sp = subparsers.add_parser(
        "search", help="ranked full-text search over session entries (or captured records)",
        description="Search the text of every entry (messages, thinking, tool calls and results, titles) and "
                    "list the sessions best first. Words are ANDed; \"a b\" is a phrase; abc* a prefix. "
                    "Put -- before a query that starts with '-'.")
    add_location(sp, nested=True)
    sp.add_argument("query", metavar="QUERY", nargs="+", help="what to look for")
    sp.add_argument("--json", action="store_true", help="print the result as JSON")
    sp.add_argument("--limit", type=int, default=20, metavar="N", help="sessions to show (default 20; 0: all)")
    sp.add_argument("--captured", action="store_true", help="search captured Claude Code / Codex records")
    from tui.cli.store_option import add_store

    add_store(sp)
    sp.add_argument("--index", action="store_true",
                    help="with --captured on a PostgreSQL store: bring the store's search index up to date first "
                         "(writes to the store)")
    sp.set_defaults(handler=cmd_search)


def _score(hit: SearchHit) -> str:
    return "-" if hit.score is None else f"{-hit.score:.2f}"


def snippet_line(hit: SearchHit) -> str:
    """The snippet on one line, safe (escapes shown), matched words between » and «."""
    # Made one safe line as a whole: a piece's own spaces, next to a matched word, stay.
    return one_line("".join(f"»{p}«" if hot else p for p, hot in hit.snippet.parts()))


def hit_json(hit: SearchHit, captured: bool) -> dict[str, object]:
    obj: dict[str, object] = {
        "session_id": hit.session_id, "score": hit.score, "seq": hit.seq, "matches": hit.matches,
        "snippet": hit.snippet.text, "spans": [list(s) for s in hit.snippet.spans],
    }
    if captured:
        obj.update(agent_id=hit.agent_id, file_path=hit.file_path, line_number=hit.line_number)
    else:
        obj.update(entry_id=hit.entry_id, role=hit.role, entry_type=hit.entry_type)
    return obj


def result_json(result: SearchResult) -> dict[str, object]:
    return {"query": result.query, "source": result.source, "reason": result.reason, "total": result.total,
            "has_more": result.has_more, "captured": result.captured, "exact": result.exact,
            "scanned": result.scanned, "unranked": result.unranked,
            "hits": [hit_json(h, result.captured) for h in result.hits]}


def cmd_search(args: argparse.Namespace) -> int:
    from store.search import search
    from tui.cli.capture import open_dir
    from tui.cli.core import UsageError

    if args.limit < 0:
        raise UsageError("--limit takes 0 (all) or more")
    if args.index and not args.captured:
        raise UsageError("--index goes with --captured (the team store's index of captured records)")
    if args.index and (getattr(args, "read_only", False) or getattr(args, "snapshot", False)):
        raise UsageError("--index writes to the store: not with --read-only or --snapshot")
    text = " ".join(args.query)
    with open_dir(args, write=False) as sd:
        result = search(sd, text, limit=args.limit or None, captured=args.captured,
                        index_store=True if args.index else None)
    if args.json:
        json_out(result_json(result))
        return 0
    if not result.hits:
        out(f"Nothing matches '{one_line(text)}'.")
    elif result.captured:
        output.table(CAPTURED_COLUMNS, [(_score(h), h.agent_id, h.session_id, str(h.line_number), str(h.matches),
                                         snippet_line(h)) for h in result.hits])
    else:
        output.table(COLUMNS, [(_score(h), h.session_id, str(h.seq) if h.seq else "-", h.role or h.entry_type or "-",
                                str(h.matches), snippet_line(h) if h.seq else "(session id / cwd / channel)")
                               for h in result.hits])
    shown = len(result.hits)
    what = "agent sessions" if result.captured else "sessions"
    how = result.how()
    note(f"{shown} of {result.total} {what} ({how})")
    return 0
