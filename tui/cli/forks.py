"""``sessionscope forks`` and the fork and session-management repairs.

    sessionscope [--dir PATH] forks SESSION_ID [--json]
    sessionscope [--dir PATH] repair fork SESSION_ID [--at-seq N] [--request-id ID] [--dry-run] [--yes] [--json]
    sessionscope [--dir PATH] repair delete-session SESSION_ID [SESSION_ID ...] [--dry-run] [--yes] [--json]
    sessionscope [--dir PATH] repair pin SESSION_ID [...] / repair unpin SESSION_ID [...]
    sessionscope [--dir PATH] repair project-set SESSION_ID NAME      (an empty NAME clears the link)
    sessionscope [--dir PATH] repair rename SESSION_ID TITLE

``forks`` is read-only: the session's fork family (ancestors and descendants, each with kind, boundary seq and
seed length) and its turns as candidate boundaries, valid or with the rule that forbids them. Every write is a
repair on the shared ``repair`` path (preview, confirmation, fenced apply, exit codes 0/1/2/3).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from store.mothx.db import OpenMode
from tui.cli import output
from tui.cli.output import Column, json_out, out

if TYPE_CHECKING:
    from store.mothx.repair_kit import Repair
    from store.mothx.sessiondir import SessionDir


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    forks = sub.add_parser(
        "forks", help="show a session's fork family and its turns as fork boundaries",
        description="The fork family of a session (ancestors and descendants through parent_session, with fork "
                    "kind, boundary seq and seed length) and every turn as a candidate boundary, valid or with "
                    "the rule that forbids it. Read-only.")
    add_location(forks, nested=True)
    forks.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix (4+ characters)")
    forks.add_argument("--json", action="store_true", help="print the family and the boundaries as JSON")
    forks.set_defaults(handler=cmd_forks)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive entry seq")
    return value


def register_repairs(kinds: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    fork = kinds.add_parser(
        "fork", help="fork a session at its last completed turn or at an assistant message",
        description="Copy a session's entries up to a boundary into a new child session (new entry ids, every "
                    "reference remapped), under a fork lease on the source. Without --at-seq the boundary is the "
                    "last completed turn; with it, the entry must be the final assistant message of a closed turn.")
    fork.add_argument("session_id", metavar="SESSION_ID", help="the source: a session id or a unique prefix")
    fork.add_argument("--at-seq", metavar="N", type=_positive, default=0,
                      help="fork at this assistant message (an entries.seq) instead of the last completed turn")
    fork.add_argument("--request-id", metavar="ID", default="",
                      help="the idempotency key (at most 256 characters): a repeat returns the same child "
                           "(default: a new key each time)")
    common(fork)
    fork.set_defaults(make_repair=make_fork)

    delete = kinds.add_parser(
        "delete-session", help="delete sessions and every row of their child tables (request_stats are kept)",
        description="Delete each session under a mutation lease, table by table in the mothx order; the preview "
                    "counts the rows per table. Refused while a run is active or another holder's lease is valid.")
    delete.add_argument("session_ids", metavar="SESSION_ID", nargs="+", help="session ids or unique prefixes")
    common(delete)
    delete.set_defaults(make_repair=make_delete)

    for name, pinned in (("pin", True), ("unpin", False)):
        p = kinds.add_parser(name, help=f"{name} sessions (session_metadata.pinned)",
                             description=f"{'Pin' if pinned else 'Unpin'} each session under a mutation lease.")
        p.add_argument("session_ids", metavar="SESSION_ID", nargs="+", help="session ids or unique prefixes")
        common(p)
        p.set_defaults(make_repair=make_pin, pinned=pinned)

    proj = kinds.add_parser("project-set", help="assign a session to a project (created when new; '' clears)",
                            description="Link the session to the project named NAME (the first with exactly that "
                                        "name, else a new one); an empty NAME removes the link.")
    proj.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix")
    proj.add_argument("name", metavar="NAME")
    common(proj)
    proj.set_defaults(make_repair=make_project)

    ren = kinds.add_parser("rename", help="rename a session (a session_info entry, source manual)",
                           description="Append a session_info entry with the new title, as the runtime does.")
    ren.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix")
    ren.add_argument("title", metavar="TITLE")
    common(ren)
    ren.set_defaults(make_repair=make_rename)


# --- repairs --------------------------------------------------------------------------------------------------


def _resolve(sd: SessionDir, ids: list[str]) -> list[str]:
    from store.mothx.sessions import resolve_session_id

    return [resolve_session_id(sd, i) for i in ids]


def make_fork(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.fork import ForkSession
    from store.mothx.fork_boundaries import MAX_REQUEST_ID
    from store.mothx.fork_copy import ForkOptions
    from store.mothx.run_model import new_id
    from tui.cli.core import UsageError

    if len(args.request_id) > MAX_REQUEST_ID:
        raise UsageError(f"--request-id is too long ({len(args.request_id)} characters; at most {MAX_REQUEST_ID}).")
    source = _resolve(sd, [args.session_id])[0]
    request = args.request_id or f"cli-{new_id()}"
    return ForkSession(sd, ForkOptions(source, request, at_seq=args.at_seq))


def make_delete(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.session_admin import DeleteSessions

    return DeleteSessions(sd, _resolve(sd, args.session_ids))


def make_pin(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.session_admin import SetPinned

    return SetPinned(sd, _resolve(sd, args.session_ids), bool(args.pinned))


def make_project(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.session_admin import SetProject

    return SetProject(sd, _resolve(sd, [args.session_id]), args.name)


def make_rename(sd: SessionDir, args: argparse.Namespace) -> Repair:
    from store.mothx.session_admin import RenameSession

    return RenameSession(sd, _resolve(sd, [args.session_id])[0], args.title)


# --- forks ----------------------------------------------------------------------------------------------------

FAMILY_COLUMNS = (Column("SESSION"), Column("KIND"), Column("BOUNDARY", right=True), Column("SEED", right=True),
                  Column("TITLE", cut=True))
TURN_COLUMNS = (Column("#", right=True), Column("TURN"), Column("STATUS"), Column("SEQS"), Column("AT", right=True),
                Column("FORK"), Column("REASON", cut=True))


def cmd_forks(args: argparse.Namespace) -> int:
    from store.mothx.fork_family import candidates, family
    from store.mothx.sessions import resolve_session_id
    from tui.cli.runs import _open

    with _open(args, OpenMode.READ_ONLY) as sd:
        sid = resolve_session_id(sd, args.session_id)
        fam = family(sd, sid)
        turns = candidates(sd, sid)
    if args.json:
        json_out({"sessionId": sid, "family": [m.to_json() for m in fam.members],
                  "ancestors": [m.session_id for m in fam.ancestors],
                  "descendants": [m.session_id for m in fam.descendants],
                  "turns": [c.to_json() for c in turns]})
        return 0
    out(f"Fork family of {sid} ({len(fam.members)} sessions):")
    rows = []
    for m in fam.members:
        mark = "▸ " if m.selected else "  "
        name = ("  " * m.depth) + mark + m.session_id
        rows.append((name, m.fork_kind or ("(missing)" if m.missing else "-"), str(m.boundary_seq or "-"),
                     str(m.seed_length or "-"), m.title or "-"))
    output.table(FAMILY_COLUMNS, rows)
    out("")
    if not turns:
        out("No turns: a fork needs a completed conversation turn.")
        return 0
    out(f"Turns of {sid} as fork boundaries:")
    cells = []
    for c in turns:
        seqs = f"{c.start_seq}..{c.end_seq if c.end_seq is not None else 'open'}" if c.index else "-"
        cells.append((str(c.index or "-"), c.turn_id or "-", c.status or "-", seqs, str(c.at_seq or "-"),
                      f"valid → {c.boundary_seq}" if c.valid else "invalid", c.reason or ""))
    output.table(TURN_COLUMNS, cells)
    return 0


__all__ = ["register", "register_repairs", "cmd_forks"]
