"""``sessionscope doctor``: every health check of the session directory, with an exit code; and the repairs
``reconcile-events``, ``rebuild-projection`` and ``reset-db`` of ``sessionscope repair``.

``doctor`` only reads (the directory is opened read-only unless ``--snapshot`` is given): exit 0 when every
check is ok, 1 when one warns, 2 when one is an error. ``--full`` adds the long integrity check.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from store.mothx.db import OpenMode
from tui.cli import output
from tui.cli.output import Column, out, table

if TYPE_CHECKING:
    from store.mothx.repair_kit import Repair
    from store.mothx.sessiondir import SessionDir

DOCTOR_COLUMNS = (Column("STATUS"), Column("CHECK"), Column("DETAIL", cut=True), Column("REPAIR"))


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    doctor = sub.add_parser(
        "doctor", help="check the session directory's health (exit 0 ok, 1 warnings, 2 errors)",
        description="Check the database (quick check; --full: integrity check), schema, WAL and database sizes, "
                    "leases, orphaned runs, failed recoveries and deliveries, every session's event store, the "
                    "knowledge-base stores, what a reset would leave behind and where the space goes. Read-only. "
                    "Exit status 0 when healthy, 1 with warnings, 2 with errors.")
    add_location(doctor, nested=True)
    output.add_list_options(doctor, "print the checks as JSON")
    doctor.add_argument("--full", action="store_true", help="also run the long integrity check (reads every page)")
    doctor.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from store.health import exit_code, run_checks, summarize
    from tui.cli import core as cli

    mode = cli._mode(args, default=OpenMode.READ_ONLY)
    with cli.open_location(args, mode) as sd:
        progress = _progress if args.full and not (args.json or args.csv) and _tty(sys.stderr) else None
        checks = run_checks(sd, full=bool(args.full), progress=progress)
        if progress is not None:
            sys.stderr.write("\r\x1b[K")
    code = exit_code(checks)
    records = [c.to_json() for c in checks]
    if output.list_out(args, records, {"status": ("ok", "warn", "error")[code], "exit": code,
                                       "counts": summarize(checks), "checks": records}):
        return code
    table(DOCTOR_COLUMNS, [(c.status.upper(), c.id, c.detail + (f" — {c.advice}" if c.advice else ""),
                            c.repair or "-") for c in checks])
    counts = summarize(checks)
    out(f"{counts['ok']} ok, {counts['warn']} warnings, {counts['error']} errors")
    fixes = sorted({c.repair for c in checks if c.repair and c.status != "ok"})
    for fix in fixes:
        out(f"  repair: sessionscope repair {fix}")
    return code


def _tty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def _progress(fraction: float, table_name: str) -> None:
    from store.safetext import one_line

    sys.stderr.write(f"\r\x1b[Kintegrity check {fraction * 100:3.0f}% {one_line(table_name)[:40]}")
    sys.stderr.flush()


# --- repairs ----------------------------------------------------------------------------------------------------


def register_repairs(kinds: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    rec = kinds.add_parser(
        "reconcile-events", help="settle a session's event intents with its event log",
        description="Under the session's lease: cut a torn tail; adopt complete bytes of a prepared or appended "
                    "intent (committed); abort a prepared intent with no bytes; mark an appended intent whose "
                    "bytes are missing recovery_required. Corruption is never repaired.")
    rec.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix (4+ characters)")
    common(rec)
    rec.set_defaults(make_repair=_reconcile)

    reb = kinds.add_parser(
        "rebuild-projection", help="rebuild a session's event projection from its committed batches",
        description="Under the session's lease: recompute the projection row (next sequence, batches, events, "
                    "bytes, kinds) from the committed batches of a readable event store.")
    reb.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix (4+ characters)")
    common(reb)
    reb.set_defaults(make_repair=_rebuild)

    reset = kinds.add_parser(
        "reset-db", help="move sessions.db and the event stores aside and create a fresh database",
        description="Rename sessions.db (and -wal, -shm, -journal) to sessions.db.pure-<UTC>.bak and events/ to "
                    "events.pure-<UTC>.bak (never deleted), create a fresh v43 database, and report what moved "
                    "and what stayed. Refused while any lease is still marked active.")
    common(reset)
    reset.set_defaults(make_repair=_reset)


def _session(sd: SessionDir, args: argparse.Namespace) -> str:
    from store.mothx.sessions import resolve_session_id

    return resolve_session_id(sd, args.session_id)


def _reconcile(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.eventstore.repairs import ReconcileEventIntents

    return ReconcileEventIntents(sd, _session(sd, args))


def _rebuild(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.eventstore.repairs import RebuildEventProjection

    return RebuildEventProjection(sd, _session(sd, args))


def _reset(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.health.reset import ResetDatabase

    return ResetDatabase(sd)


__all__ = ["register", "register_repairs", "cmd_doctor"]
