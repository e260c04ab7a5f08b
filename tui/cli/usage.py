"""``sessionscope usage``: token usage (and cost where a price table is configured) at a glance.

    sessionscope [--dir PATH] usage [--by day|session|model|cwd] [--since DATE] [--source mothx|captured|all]
                                    [--prices FILE] [--json]

Groups the requests of ``request_stats`` (mothx) and the usage records of the captured Claude Code and Codex
transcripts (captured) by UTC day, session, model or work dir: requests, input, output, cache write, cache read
and total tokens, a bar of each group's share of the largest, and cost when ``prices.toml`` (beside
``config.toml``, or ``--prices``) names the model. A totals line ends the table; damaged cells and checkpoints
that did not verify are notes on standard error. ``--json`` prints ``{by, source, since, priced, rows: [...],
totals, problems}``. Read-only (opens the directory read-only unless told otherwise; writes nothing).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from store.mothx.db import OpenMode
from tui.cli import output
from tui.cli.output import Column, json_out, note

if TYPE_CHECKING:
    from store.usage import UsageReport, UsageRow

BAR_WIDTH = 16


def _since(text: str) -> str:
    from store.usage import check_since

    try:
        return check_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    p = sub.add_parser(
        "usage", help="token usage (and cost) per day, session, model or work dir",
        description="Token usage from request_stats (mothx) and from the usage records of captured Claude Code "
                    "and Codex transcripts: requests, input, output, cache and total tokens per UTC day, session, "
                    "model or work dir, with cost where prices.toml (beside config.toml) names the model. "
                    "Read-only.")
    add_location(p, nested=True)
    p.add_argument("--by", choices=("day", "session", "model", "cwd"), default="day",
                   help="group by UTC day (default), session, model or work dir")
    p.add_argument("--since", metavar="DATE", type=_since, default="",
                   help="only requests on or after this UTC day (YYYY-MM-DD)")
    p.add_argument("--source", choices=("mothx", "captured", "all"), default="all",
                   help="request_stats (mothx), captured transcripts (captured) or both (default)")
    p.add_argument("--prices", metavar="FILE", type=Path, default=None,
                   help="a price table (default: prices.toml beside config.toml, when present)")
    p.add_argument("--json", action="store_true", help="print {by, source, rows, totals, ...} as JSON")
    p.set_defaults(handler=cmd_usage)


def cmd_usage(args: argparse.Namespace) -> int:
    from store.usage import load_prices, usage
    from tui.cli import core as cli

    prices = load_prices(args.prices)
    with cli.open_location(args, cli._mode(args, default=OpenMode.READ_ONLY)) as sd:
        report = usage(sd, args.by, source=args.source, since=args.since, prices=prices)
    if args.json:
        json_out(report.to_json())
        return 0
    print_usage(report)
    for problem in report.problems:
        note(problem)
    return 0


def print_usage(report: UsageReport) -> None:
    from tui import usage_text as ut

    if not report.rows:
        since = f" since {report.since}" if report.since else ""
        output.out(f"No usage recorded{since} ({report.source}).")
        return
    session = report.by == "session"
    columns = [Column(ut.KEY_TITLES[report.by], cut=True)]
    if session:
        columns += [Column("AGENT"), Column("WORK DIR", cut=True)]
    columns += [Column("REQUESTS", right=True), Column("INPUT", right=True), Column("OUTPUT", right=True),
                Column("CACHE WRITE", right=True), Column("CACHE READ", right=True), Column("TOTAL", right=True)]
    if report.priced:
        columns.append(Column("COST", right=True))
    columns.append(Column("SHARE"))
    largest = max(r.total_tokens for r in report.rows)

    def line(name: str, r: UsageRow, *, bar: bool) -> list[object]:
        cells: list[object] = [name]
        if session:
            cells += ([ut.agent_label(r), r.cwd or ("(deleted)" if not r.session_exists else "")] if bar else ["", ""])
        cells += [ut.tokens(r.requests), ut.tokens(r.input_tokens), ut.tokens(r.output_tokens),
                  ut.tokens(r.cache_write_tokens), ut.tokens(r.cache_read_tokens), ut.tokens(r.total_tokens)]
        if report.priced:
            cells.append(ut.cost(r.cost, partial=r.unpriced > 0))
        cells.append(ut.bar(r.total_tokens, largest, BAR_WIDTH) if bar else "")
        return cells

    rows = [line(ut.label(report.by, r), r, bar=True) for r in report.rows]
    rows.append(line("TOTAL", report.totals, bar=False))
    output.table(columns, rows)


__all__ = ["cmd_usage", "print_usage", "register"]
