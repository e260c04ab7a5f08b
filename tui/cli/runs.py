"""``sessionscope runs`` and ``sessionscope repair …``: runs, leases and recovery from the command line.

    sessionscope [--dir PATH] runs [--json|--csv] [--redact] [--orphaned] [--session ID] [--limit N]
    sessionscope [--dir PATH] repair recover-run RUN_ID [--user-stop] [--dry-run] [--yes] [--json]
    sessionscope [--dir PATH] repair release-lease SESSION_ID [--dry-run] [--yes] [--json]
    sessionscope [--dir PATH] repair abandon-tools SESSION_ID TURN_ID [CALL_ID ...] [--dry-run] [--yes] [--json]

``runs`` opens the directory read-only (unless ``--snapshot``). A repair opens it read-write by default and:

* prints its preview (what exactly will change; ``--json``: the preview object);
* ``--dry-run``: stops there, having changed nothing (it opens the directory read-only: no byte changes);
* without ``--yes`` asks ``Apply this repair? [y/N]`` on a terminal (default No) and refuses when standard input
  is not a terminal ("refused: confirmation needed; pass --yes");
* applies it under a fenced lease (announcing it on the lease bus as a runtime would) and prints the result.

Exit status: 0 applied (or previewed with ``--dry-run``); 3 refused — a live lease held by another process (the
reason names the holder), the facts changed, the run is no longer active, not confirmed, or a read mode
(``--read-only`` / ``--snapshot``: every repair is refused with "read-only"; ``--dry-run`` still prints the
preview); 2 an unknown session, run or turn (a turn is known by its conversation turn row or its interrupted
tool execution records); 1 any other failure (e.g. a recovery that began but failed: its record
says when to retry).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from store import times
from store.errors import ReadOnlyStore, RepairRefused, SessionNotFound, StoreError
from store.mothx.db import OpenMode
from tui.cli import arguments, output
from tui.cli.output import Column, json_out, out

if TYPE_CHECKING:
    from store.mothx.leases import LeaseSnapshot
    from store.mothx.repairs import Repair, RepairPreview
    from store.mothx.runs import RecoveryRecord, RunListing
    from store.mothx.sessiondir import SessionDir

DEFAULT_RECENT = 20

# Further repairs live in their own modules. Each has ``register_repairs(kinds, common)``: it adds its parsers to
# ``kinds`` (the ``repair`` subcommand's subparsers), calls ``common(parser)`` on each (location, --dry-run,
# --yes, --json and the shared handler) and then sets ``make_repair=<function(sd, args) -> Repair>`` on it with
# ``set_defaults``. The shared handler :func:`cmd_repair` previews, asks, applies and reports every repair alike.
REPAIR_MODULES: tuple[str, ...] = (
    "tui.cli.doctor",
    "tui.cli.deliveries",
    "tui.cli.forks",
    "tui.cli.knowledge",
)


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    runs = arguments.command(
        sub, add_location, "runs", help="list active and recent runs with their leases and recovery records",
        description="List active runs (every one) and the newest recent runs: status, derived execution state, "
                    "lease holder, epoch, expiry and recovery record. Read-only.")
    output.add_list_options(runs, "print a JSON list of run objects")
    runs.add_argument("--orphaned", action="store_true",
                      help="only orphaned runs and runs whose recovery failed (active runs whose owner is gone)")
    arguments.add_session_limit(
        runs, session_help="only this session's runs (id or unique prefix)", default=DEFAULT_RECENT,
        limit_help=f"recent (finished) runs to show besides the active ones (default {DEFAULT_RECENT}; 0 none)",
        handler=cmd_runs)

    sim = arguments.command(
        sub, add_location, "simulate",
        help="run a simulated mothx runtime on a session (for trying repairs; kill it to orphan a run)",
        description="A separate runtime process: admits runs under an execution lease, heartbeats it, appends "
                    "entries and run events, announces on the lease bus, and prints one JSON line per step. "
                    "Kill it (kill -9) mid-run to leave an orphaned run behind.")
    sim.add_argument("--session", metavar="ID", default="", help="the session to work on (default: a new one)")
    sim.add_argument("--runs", type=arguments.count, default=1, help="runs to admit one after another (default 1)")
    sim.add_argument("--steps", type=arguments.count, default=60, help="steps per run (default 60)")
    sim.add_argument("--interval", type=float, default=0.5, help="seconds between steps (default 0.5)")
    sim.add_argument("--ttl", type=arguments.count, default=15, help="lease TTL in seconds (default 15, as mothx)")
    sim.add_argument("--hang-at", type=arguments.count, default=0, help="stop working after this step, keep heartbeating")
    sim.set_defaults(handler=cmd_simulate)

    repair = sub.add_parser(
        "repair", help="repair a run, a lease or interrupted tool calls (after a preview)",
        description="Fenced repairs, applied the way the runtime would. Each prints its preview first; --dry-run "
                    "stops there. Refused repairs exit with status 3 and say why on stderr.")
    add_location(repair, nested=True)
    kinds = repair.add_subparsers(dest="repair_kind", metavar="REPAIR",
                                 parser_class=getattr(sub, "_parser_class", argparse.ArgumentParser))
    kinds.required = True

    def common(p: argparse.ArgumentParser) -> None:
        add_location(p, nested=True)
        p.add_argument("--dry-run", action="store_true", help="print the preview and change nothing")
        p.add_argument("--yes", action="store_true", help="apply without asking")
        p.add_argument("--json", action="store_true", help="print the preview (and result) as JSON")
        p.set_defaults(handler=cmd_repair)

    rec = kinds.add_parser("recover-run", help="recover an orphaned run (its lease expired, its owner is gone)",
                           description="Take a recovery lease, cancel pending approvals and questions, mark the run "
                                       "failed with a 'recovered' event, close its open turns and complete its "
                                       "recovery record.")
    rec.add_argument("run_id", metavar="RUN_ID")
    rec.add_argument("--user-stop", action="store_true",
                     help="recover as a user stop: the run becomes cancelled (cancelled_by_user_after_owner_loss)")
    common(rec)

    rel = kinds.add_parser("release-lease", help="release a session's expired lease (leave a tombstone row)",
                           description="Take over an expired lease of an idle session and release it.")
    rel.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix (4+ characters)")
    common(rel)

    ab = kinds.add_parser("abandon-tools", help="mark interrupted tool executions of a turn abandoned",
                          description="Mark interrupted tool execution records of one turn 'abandoned' (all of them, "
                                      "or the given calls). No tool is run again and no tool output is written.")
    ab.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix (4+ characters)")
    ab.add_argument("turn_id", metavar="TURN_ID")
    ab.add_argument("call_ids", metavar="CALL_ID", nargs="*", help="only these tool calls (default: all interrupted)")
    common(ab)
    for name in REPAIR_MODULES:
        importlib.import_module(name).register_repairs(kinds, common)


# --- opening --------------------------------------------------------------------------------------------------


def _open(args: argparse.Namespace, default: OpenMode) -> SessionDir:
    from tui.cli import core as cli

    return cli.open_as(args, default)


def _open_mode(args: argparse.Namespace, mode: OpenMode) -> SessionDir:
    from tui.cli import core as cli

    return cli.open_location(args, mode)


# --- runs -----------------------------------------------------------------------------------------------------




def lease_json(lease: LeaseSnapshot | None) -> dict[str, object] | None:
    if lease is None:
        return None
    return {
        "owner_instance_id": lease.owner_instance_id, "owner_pid": lease.owner_pid, "owner_kind": lease.owner_kind,
        "purpose": lease.purpose, "epoch": lease.epoch, "run_id": lease.run_id, "state": lease.state,
        "acquired_at": lease.acquired_at, "heartbeat_at": lease.heartbeat_at, "expires_at": lease.expires_at,
        "expires_at_utc": times.from_unix(lease.expires_at), "seconds_left": lease.expires_at - lease.now,
        "valid": lease.valid,
    }


def recovery_json(rec: RecoveryRecord | None) -> dict[str, object] | None:
    if rec is None:
        return None
    return {
        "state": rec.state, "trigger_source": rec.trigger_source, "reason_code": rec.reason_code,
        "attempt": rec.attempt, "previous_lease_epoch": rec.previous_lease_epoch, "last_error": rec.last_error,
        "next_retry_at": rec.next_retry_at, "started_at": rec.started_at, "updated_at": rec.updated_at,
        "completed_at": rec.completed_at,
    }


def run_json(listing: RunListing) -> dict[str, object]:
    run = listing.run
    ex = listing.execution
    lease = listing.lease if (listing.lease is not None and (run.active or listing.lease.run_id == run.id)) else None
    return {
        "run_id": run.id, "session_id": run.session_id, "status": run.status, "active": run.active,
        "state": ex.state if ex else "", "phase": ex.phase if ex else "",
        "recovery_action": ex.recovery_action if ex else "", "reason": ex.reason if ex else "",
        "source": run.source, "model": run.model, "attempt": run.attempt, "started_at": run.started_at,
        "updated_at": run.updated_at, "finished_at": run.finished_at, "error": run.error,
        "lease": lease_json(lease), "recovery": recovery_json(listing.recovery),
    }


def cmd_simulate(args: argparse.Namespace) -> int:
    from store.mothx import simulator
    from tui.cli import core as cli

    if cli._mode(args, default=OpenMode.READ_WRITE).is_read:
        raise ReadOnlyStore("Refused: the simulator writes like a runtime; it cannot run in a read mode (read-only).")
    root = cli._session_dir(args)
    if root is None:
        from store.paths import default_session_dir

        raise StoreError(f"no session directory at {default_session_dir()}; pass --dir or run `{cli.PROG} --demo`")
    session = args.session
    if not session:
        with _open_mode(args, OpenMode.READ_WRITE) as sd:
            session = simulator.create_session(sd, cwd=str(root))
    argv = ["--dir", str(root), "--session", session, "--runs", str(args.runs), "--steps", str(args.steps),
            "--append-interval", str(args.interval), "--ttl", str(args.ttl)]
    if args.hang_at:
        argv += ["--hang-at", str(args.hang_at)]
    return simulator.main(argv)


def cmd_runs(args: argparse.Namespace) -> int:
    from store.mothx.leases import LeaseOwner
    from store.mothx.runs import RunScope, runs_page

    me = LeaseOwner.current().instance_id
    with _open(args, OpenMode.READ_ONLY) as sd:
        session_id = arguments.session_of(sd, args)
        # The Runs screen's first page: the active (or orphaned) runs, then the newest ``--limit`` terminal runs.
        page = runs_page(sd, RunScope(session_id, orphaned_only=args.orphaned), limit=args.limit,
                         local_instance_id=me)
    rows = list(page.rows)
    if output.list_out(args, [run_json(ls) for ls in rows]):
        return 0
    print_runs(rows, orphaned=args.orphaned)
    return 0


RUN_COLUMNS = (Column("RUN ID"), Column("SESSION"), Column("STATUS"), Column("STATE"), Column("HOLDER", cut=True),
               Column("PID", right=True), Column("PURPOSE"), Column("EPOCH", right=True), Column("LEASE"),
               Column("RECOVERY", cut=True))


def print_runs(rows: list[RunListing], *, orphaned: bool) -> None:
    if not rows:
        out("No orphaned runs." if orphaned else "No runs.")
        return
    now = int(time.time())
    cells = []
    for ls in rows:
        run = ls.run
        lease = ls.lease if (ls.lease is not None and (run.active or ls.lease.run_id == run.id)) else None
        lease_text = ""
        if lease is not None:
            if lease.state != "active":
                lease_text = "released"
            else:
                left = lease.expires_at - lease.now
                lease_text = (f"expires {times.time_left(left, lease.expires_at)}" if left > 0 else f"expired {times.duration(-left)} ago")
        rec = ls.recovery
        rec_text = ""
        if rec is not None:
            rec_text = f"{rec.state} #{rec.attempt}"
            if rec.state == "failed" and rec.next_retry_at is not None:
                rec_text += f", retry {'due' if rec.next_retry_at <= now else 'at ' + times.from_unix(rec.next_retry_at)}"
        cells.append((
            run.id, run.session_id, run.status, ls.execution.state if ls.execution else "-",
            lease.owner_instance_id if lease else "-", str(lease.owner_pid) if lease else "-",
            lease.purpose if lease else "-", str(lease.epoch) if lease else "-", lease_text or "-", rec_text or "-",
        ))
    output.table(RUN_COLUMNS, cells)


# --- repairs --------------------------------------------------------------------------------------------------


def _make(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.repairs import make_repair

    made = getattr(args, "make_repair", None)  # a repair of a REPAIR_MODULES module
    if made is not None:
        repair: Repair = made(sd, args)
        return repair
    kind = args.repair_kind
    if kind == "recover-run":
        from store.mothx.runs import get_run

        if get_run(sd, args.run_id) is None:  # an unknown id exits 2, like an unknown session
            raise SessionNotFound(f"no run has the id {args.run_id}.")
        return make_repair(sd, "recover-run", run_id=args.run_id, user_stop=bool(args.user_stop))
    from store.mothx.sessions import resolve_session_id

    session_id = resolve_session_id(sd, args.session_id)
    if kind == "release-lease":
        return make_repair(sd, "release-lease", session_id=session_id)
    if not turn_known(sd, session_id, args.turn_id):  # an unknown turn exits 2, before any record is looked for
        raise SessionNotFound(f"no turn {args.turn_id} in session {session_id} (no conversation turn and no "
                              "interrupted tool execution record has that id).")
    return make_repair(sd, "abandon-tools", session_id=session_id, turn_id=args.turn_id,
                       call_ids=tuple(args.call_ids) or None)


def turn_known(sd: SessionDir, session_id: str, turn_id: str) -> bool:
    """True when ``turn_id`` is a conversation turn of the session or names one of its interrupted tool
    execution records (``local_turn_id``; the records abandon-tools changes)."""
    from store.mothx.recovery import list_interrupted_tools
    from store.mothx.runs import list_turns

    if any(t.id == turn_id for t in list_turns(sd, session_id)):
        return True
    return bool(list_interrupted_tools(sd, session_id, turn_id).records)


def ask(prompt: str, stdin: TextIO, stderr: TextIO) -> bool | None:
    """Ask ``prompt`` on a terminal: True for y/yes, False otherwise (default No); None when not a terminal."""
    try:
        interactive = stdin.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive:
        return None
    stderr.write(prompt)
    stderr.flush()
    try:
        answer = stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_repair(args: argparse.Namespace) -> int:
    from tui.cli import core as cli

    asked = cli._mode(args, default=OpenMode.READ_WRITE)
    # A dry run only reads: it opens the directory read-only, so not one byte (nor a -wal/-shm) changes.
    mode = OpenMode.READ_ONLY if args.dry_run and not asked.is_read else asked
    with _open_mode(args, mode) as sd:
        repair = _make(sd, args)
        if asked.is_read and not args.dry_run:
            raise ReadOnlyStore(f"refused: read-only: {sd.read_only_reason}; repairs are disabled.")
        preview = repair.preview()
        print_preview(preview, args)
        if asked.is_read:
            raise ReadOnlyStore(f"refused: read-only: {sd.read_only_reason}; this repair cannot be applied here.")
        if not sd.schema.writable:
            raise ReadOnlyStore(f"refused: read-only: {sd.schema.notice}")
        if preview.refusal:
            raise RepairRefused(f"refused: {preview.refusal}")
        if args.dry_run:
            if not args.json:
                out("Dry run: nothing was changed.")
            return 0
        if not args.yes:
            answer = ask("Apply this repair? [y/N] ", sys.stdin, sys.stderr)
            if answer is None:
                raise RepairRefused("refused: confirmation needed; pass --yes")
            if not answer:
                raise RepairRefused("refused: not confirmed; nothing was changed")
        from store.mothx.bus import install_publisher, uninstall_publisher

        install_publisher()  # a running mothx learns of the repair from the bus, as from a runtime's own change
        try:
            result = repair.apply(preview)
        finally:
            uninstall_publisher()
    if args.json:
        json_out({"preview": preview.to_json(), "applied": True, "result": result.to_json()})
    else:
        out(result.message)
    return 0


def print_preview(preview: RepairPreview, args: argparse.Namespace) -> None:
    """The preview on standard output (``--json``: as an object, when it is all that will be printed)."""
    if args.json:
        if args.dry_run or preview.refusal:
            json_out({"preview": preview.to_json(), "applied": False})
        return
    for line in preview.lines():
        out(line)  # each line made safe: a note or a key may quote data (a tool name, a lease holder)
    sys.stdout.flush()


__all__ = ["register", "cmd_runs", "cmd_repair", "run_json", "ask"]
