"""``sessionscope deliveries``, ``simulate-deliveries`` and ``repair retry-delivery``: the delivery outbox.

    sessionscope [--dir PATH] deliveries [--json|--csv] [--redact] [--session ID] [--limit N]
    sessionscope [--dir PATH] simulate-deliveries [--outcome ok|transient|permanent|unknown] [--script K=O,…]…
                                                  [--exit-when-idle] [--max-seconds S] [--max-retries N] …
    sessionscope [--dir PATH] repair retry-delivery OPERATION_ID [--dry-run] [--yes] [--json]

``deliveries`` lists the operations that need an operator (status ``failed`` or ``uncertain``), newest first, at
most ``--limit`` (default 200, the reference's cap): the reference's DeliveryFailure fields plus ``retryable``
(only ``failed`` with ``transport_error`` or ``delivery_retries_exhausted``). ``--json`` prints the management
interface's object ``{"deliveries": [{operationId, intentId, sessionId, runId, platform, targetId,
operationKind, status, failureCode, attemptCount, updatedAt, retryable}], "count": N}``. Read-only; opaque
transport context and provider state are never printed.

``simulate-deliveries`` runs a delivery worker in this process against a fake provider (see
:mod:`store.mothx.delivery_worker`); one JSON line per step.

``retry-delivery`` reopens a failed operation (and its dependents failed by it) for another attempt, through the
shared repair command: a preview, ``--dry-run``, confirmation, the exit codes 0 / 1 / 2 (unknown operation) /
3 (refused: uncertain, permanent, failed by a dependency, leased by a worker, changed facts, a read mode).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from store import times
from store.errors import ReadOnlyStore, SessionNotFound
from store.mothx.db import OpenMode
from tui.cli import arguments, output
from tui.cli.output import Column, out

if TYPE_CHECKING:
    from store.mothx.delivery_model import DeliveryFailure
    from store.mothx.repair_kit import Repair
    from store.mothx.sessiondir import SessionDir

DEFAULT_LIMIT = 200


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    from store.mothx import delivery_worker

    dl = arguments.command(
        sub, add_location, "deliveries",
        help="list failed and uncertain delivery operations (the outbox's operator view)",
        description="List delivery operations that need attention (failed or uncertain), newest first: session, "
                    "run, intent, platform, target, operation kind, status, failure code, attempts and whether "
                    "a retry is allowed. Read-only.")
    output.add_list_options(dl, "print {deliveries: [...], count} as JSON")
    arguments.add_session_limit(dl, session_help="only this session's (id or unique prefix)", default=DEFAULT_LIMIT,
                                limit_help=f"at most N operations (default {DEFAULT_LIMIT})", handler=cmd_deliveries)

    sim = arguments.command(
        sub, add_location, "simulate-deliveries",
        help="run a delivery worker against a fake provider (for trying retries)",
        description="A delivery worker: claims due operations under a lease, executes them against a fake "
                    "provider that succeeds, fails transiently or permanently, or times out with an unknown "
                    "outcome, and writes the fenced results. One JSON line per step.")
    delivery_worker.add_arguments(sim)
    sim.set_defaults(handler=cmd_simulate_deliveries)


def register_repairs(kinds: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = kinds.add_parser(
        "retry-delivery", help="retry a failed delivery operation (a transport failure) after a preview",
        description="Reopen a delivery operation that failed on transport (transport_error or "
                    "delivery_retries_exhausted): it is due again at once with a new 10-minute retry window, and "
                    "the operations that failed only because of it wait for it again. Uncertain operations (the "
                    "provider may have received them) and permanent failures are refused.")
    p.add_argument("operation_id", metavar="OPERATION_ID")
    common(p)
    p.set_defaults(make_repair=make_repair)


def make_repair(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.delivery_repairs import RetryDelivery
    from store.mothx.delivery_store import get_operation

    if not sd.schema.has("delivery_operations") or get_operation(sd, args.operation_id) is None:
        raise SessionNotFound(f"no delivery operation has the id {args.operation_id}.")
    return RetryDelivery(sd, args.operation_id)


def cmd_deliveries(args: argparse.Namespace) -> int:
    from store.mothx.delivery_listing import list_delivery_failures
    from tui.cli import core as cli

    with cli.open_as(args, OpenMode.READ_ONLY) as sd:
        session_id = arguments.session_of(sd, args)
        rows = list_delivery_failures(sd, session_id, limit=args.limit, chains=False) if args.limit else []
    records = [r.to_json() for r in rows]
    if output.list_out(args, records, {"deliveries": records, "count": len(rows)}):
        return 0
    print_deliveries(rows)
    return 0


COLUMNS = (Column("OPERATION"), Column("SESSION"), Column("RUN"), Column("PLATFORM"), Column("TARGET", cut=True),
           Column("KIND"), Column("STATUS"), Column("FAILURE CODE"), Column("CLASS"),
           Column("ATTEMPTS", right=True), Column("UPDATED"), Column("RETRY"))


def print_deliveries(rows: list[DeliveryFailure]) -> None:
    if not rows:
        out("No failed or uncertain deliveries.")
        return
    output.table(COLUMNS, [
        (r.operation_id, r.session_id, r.run_id, r.platform, r.target_id, r.operation_kind, r.status, r.failure_code or "-", r.label or "-", str(r.attempt_count),
         times.show(r.updated_at, times.SECONDS), "yes" if r.retryable else "no")
        for r in rows
    ])


def cmd_simulate_deliveries(args: argparse.Namespace) -> int:
    from store.mothx import delivery_worker
    from tui.cli import core as cli

    if cli._mode(args, default=OpenMode.READ_WRITE).is_read:
        raise ReadOnlyStore("Refused: the delivery worker writes like a runtime; it cannot run in a read mode "
                            "(read-only).")
    try:
        delivery_worker._script(args.script)
    except argparse.ArgumentTypeError as exc:
        from tui.cli.core import UsageError

        raise UsageError(str(exc)) from None
    with cli.open_as(args, OpenMode.READ_WRITE) as sd:
        return delivery_worker.run(sd, args)


__all__ = ["register", "register_repairs", "cmd_deliveries", "make_repair"]
