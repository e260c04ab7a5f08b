"""The ``sessionscope`` command: opens the terminal UI, or lists and shows sessions without it.

    sessionscope [--dir PATH] [--read-only | --snapshot] [--demo]          open the UI
    sessionscope [...] list [--json|--csv] [--redact] [--search Q] [--limit N] [--cwd DIR] [--sort KEY]
    sessionscope [...] show SESSION_ID [--format md|json|html] [--raw] [--output PATH [--replace]] [--redact]
                                                            (a mothx session, or a captured Claude Code /
                                                            Codex session by its agent session id)
    sessionscope demo [PATH]                                               write the demo directory

Textual is imported only on the branch that opens the UI, so ``list`` and ``show`` start fast. ``list`` and
``show`` open the directory read-only unless ``--snapshot`` is given (the reference's listing is read-only).

``--dir PATH`` names a session folder, its ``sessions.db``, or any other database file (opened as it is, never
the ``sessions.db`` beside it); ``--dir ''`` and a path that does not exist are bad arguments. An argument
that is not valid UTF-8 is refused before anything is opened, naming the argument.

Everything printed goes through :mod:`tui.cli.output`: data is made safe (:mod:`store.safetext`), JSON has no
raw control, bidi or surrogate character, tables are Rich tables of plain cells.

Exit status: 0 success, 2 bad arguments or an unknown / ambiguous session (or run, turn, checkpoint), 3 a
refused repair (read-only, fence, lease held by someone else), 1 any other failure, 130 on Ctrl-C. Failures
print one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import AmbiguousSessionId, LeaseBusy, ReadOnlyStore, RepairRefused, SessionNotFound, StoreError
from store.mothx.db import OpenMode
from store.paths import SESSIONS_DB, sessions_db_path
from store.safetext import one_line, safe
from tui import end_startup_gc
from tui.cli import arguments, output
from tui.cli.errors import UsageError
from tui.cli.output import Column, err, note, out

if TYPE_CHECKING:
    from store.mothx.entries import EntryRow
    from store.mothx.sessiondir import SessionDir
    from store.mothx.sessions import SessionSummary

PROG = "sessionscope"
DEFAULT_LIMIT = 20
SORT_KEYS = ("last_active", "title", "messages", "cwd", "created")
ASCENDING_BY_DEFAULT = frozenset({"title", "cwd"})
EXIT_REFUSED = 3

# Further commands live in their own modules. Each has ``register(subparsers, add_location)`` that adds its
# parsers and sets ``handler=<function(args) -> int>`` on them; keep their imports of store/ inside handlers.
COMMAND_MODULES: tuple[str, ...] = (
    "tui.cli.capture",
    "tui.cli.runs",
    "tui.cli.config",
    "tui.cli.doctor",
    "tui.cli.deliveries",
    "tui.cli.forks",
    "tui.cli.knowledge",
    "tui.cli.serve",
    "tui.cli.search",
    "tui.cli.usage",
)
# The commands each module registers, so that a run of one command builds that command's parser alone (a command
# missing here still works: its run builds every parser). tests/test_cli_lazy_parser.py keeps this complete.
COMMAND_NAMES: dict[str, str] = {
    "capture": "tui.cli.capture", "checkpoints": "tui.cli.capture", "checkpoint": "tui.cli.capture",
    "export-repaired": "tui.cli.capture",
    "runs": "tui.cli.runs", "simulate": "tui.cli.runs", "repair": "tui.cli.runs",
    "config": "tui.cli.config",
    "doctor": "tui.cli.doctor",
    "deliveries": "tui.cli.deliveries", "simulate-deliveries": "tui.cli.deliveries",
    "forks": "tui.cli.forks",
    "kb": "tui.cli.knowledge",
    "serve": "tui.cli.serve",
    "search": "tui.cli.search",
    "usage": "tui.cli.usage",
}
BUILT_IN = ("list", "show", "demo")


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line and exit status 2 (through :class:`SystemExit`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # The message may quote an argument: it is printed as one safe line.
        self.exit(2, f"{PROG}: {one_line(message)} (see `{PROG} --help`)\n")


class _Unparsed(Exception):
    """A parser of one command could not parse the arguments: the full parser parses (and reports) them."""


class _OneCommandParser(_Parser):
    """The parser of one command's run: prints nothing and exits nowhere, it hands over to the full parser."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Unparsed(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise _Unparsed(message or "")


def _add_location(parser: argparse.ArgumentParser, *, nested: bool) -> None:
    """--dir / --read-only / --snapshot / --demo, accepted before and after the subcommand.

    After the subcommand the defaults are suppressed, so a value given before it is not overwritten.
    """
    unset = argparse.SUPPRESS if nested else None
    parser.add_argument("--dir", metavar="PATH", default=unset,
                        help="the session directory (or its sessions.db); default $MOTHX_DIR/sessions or "
                             "~/.mothx/sessions")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS if nested else False,
                       help="never write anything (repairs are disabled)")
    modes.add_argument("--snapshot", action="store_true", default=argparse.SUPPRESS if nested else False,
                       help="treat the directory as a copy from another machine: no locks, no -wal/-shm files")
    parser.add_argument("--demo", action="store_true", default=argparse.SUPPRESS if nested else False,
                        help="use the demo directory (built on first use)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``only`` (a name of :data:`COMMAND_NAMES` or :data:`BUILT_IN`), the
    parser of that command's run: the top-level options and that module's commands alone, raising
    :class:`_Unparsed` instead of printing (help, usage and every error come from the full parser)."""
    cls = _Parser if only is None else _OneCommandParser
    parser = cls(
        prog=PROG,
        description="Browse and repair mothx agent session directories. Without a command, opens the terminal UI.",
    )
    _add_location(parser, nested=False)
    from tui.cli.store_option import add_store  # --store URL: the checkpoint store of the app and every command

    add_store(parser)
    # (dest names of their own: a command's own --session, e.g. `runs --session ID`, is another option)
    parser.add_argument("--section", metavar="NAME", dest="start_section", default=None,
                        help="open the app on this section instead of Sessions: runs, deliveries, checkpoints, "
                             "health, forks (with --session), knowledge, search, usage")
    parser.add_argument("--session", metavar="ID", dest="start_session", default=None,
                        help="with --section forks: the session (id or unique prefix) whose fork family to show")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=cls)
    if only is not None and only not in BUILT_IN:
        importlib.import_module(COMMAND_NAMES[only]).register(sub, _add_location)
        return parser

    ls = sub.add_parser("list", help="list sessions, most recently active first",
                        description="List sessions (read-only): SESSION ID, LAST USED, MSGS, WORKDIR, TITLE.")
    _add_location(ls, nested=True)
    output.add_list_options(ls, "print a JSON list of session objects")
    ls.add_argument("--search", metavar="Q", default="",
                    help="only sessions whose id, work dir, channel or any entry contains Q (case-insensitive)")
    ls.add_argument("--limit", metavar="N", type=arguments.count, default=DEFAULT_LIMIT,
                    help=f"at most N sessions (default {DEFAULT_LIMIT}; 0 for all)")
    ls.add_argument("--offset", metavar="N", type=arguments.count, default=0, help="skip the first N sessions")
    ls.add_argument("--cwd", metavar="DIR", default="", help="only sessions of this working directory")
    ls.add_argument("--project", metavar="ID", default="", help="only sessions of this project id")
    ls.add_argument("--channel", metavar="TYPE", default="", help="only sessions of this channel type")
    ls.add_argument("--sort", metavar="KEY", choices=SORT_KEYS, default="last_active",
                    help=f"order by one of {', '.join(SORT_KEYS)} (default last_active)")
    ls.add_argument("--reverse", action="store_true", help="reverse the order")
    ls.add_argument("--all", action="store_true", help="include sessions without messages")

    show = sub.add_parser("show", help="print one session's transcript",
                          description="Print one session: its replay as Markdown (default) or JSON, or its raw rows.")
    _add_location(show, nested=True)
    show.add_argument("session_id", metavar="SESSION_ID", help="a session id or a unique prefix (4+ characters)")
    show.add_argument("--format", choices=("md", "json", "html"), default="md",
                      help="md (default), json, or html (one self-contained page)")
    show.add_argument("--raw", action="store_true", help="list every entry row instead of the replay")
    from tui.cli import show_export  # imported by the commands that use it: a run of one command starts fast

    show_export.add_export_options(show)

    demo = sub.add_parser("demo", help="write the demo session directory and print its path",
                          description="Write the demo session directory (reused when current) and print its path.")
    demo.add_argument("path", metavar="PATH", nargs="?", type=Path, default=None,
                      help="where to write it (default: the cache folder)")
    demo.add_argument("--force", action="store_true", help="rebuild it even when it is current")
    if only is None:
        for name in COMMAND_MODULES:
            importlib.import_module(name).register(sub, _add_location)
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when a parser of that command alone can parse it: the first word that is not an
    option nor an option's value, if it is a name of :data:`COMMAND_NAMES` or :data:`BUILT_IN`; ``None`` for no
    command, an unknown one, or any ``-h`` / ``--help`` (the help lists every command)."""
    valued = ("--dir", "--store", "--section", "--session")  # the top-level options that take a value (also as an unambiguous prefix)
    words = iter(argv)
    for word in words:
        if word == "--":
            word = next(words, "")
            return word if word in COMMAND_NAMES or word in BUILT_IN else None
        if word.startswith("-"):
            if word == "-h" or (len(word) > 2 and "--help".startswith(word.split("=", 1)[0])):
                return None
            if "=" not in word and len(word) > 2 and any(v.startswith(word) for v in valued):
                next(words, None)
            continue
        if word in COMMAND_NAMES or word in BUILT_IN:
            return None if any(w == "-h" or (len(w) > 2 and "--help".startswith(w.split("=", 1)[0]))
                               for w in argv) else word
        return None
    return None


def parse(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """Parse ``argv`` with the parser of its command alone (:func:`command_of`), else with every parser (which
    prints help, usage and errors exactly as ever: :class:`SystemExit`)."""
    name = command_of(argv)
    if name is not None:
        parser = build_parser(only=name)
        try:
            args = parser.parse_args(list(argv))
        except _Unparsed:
            pass
        else:
            if args.command == name:
                return parser, args
    parser = build_parser()
    return parser, parser.parse_args(list(argv))


# ----------------------------------------------------------------------------------------------------------
# Entry point


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser, args = parse(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        _require_utf8(args, parser)
        return _dispatch(args)
    except UsageError as exc:
        err(exc)
        return 2
    except (SessionNotFound, AmbiguousSessionId) as exc:
        err(exc)
        return 2
    except (RepairRefused, ReadOnlyStore, LeaseBusy) as exc:
        err(exc)
        return EXIT_REFUSED
    except StoreError as exc:
        err(exc)
        return 1
    except sqlite3.Error as exc:
        err(f"SQLite error: {exc}.")
        return 1
    except KeyboardInterrupt:
        err("interrupted.")
        return 130
    except BrokenPipeError:
        # The reader went away (`sessionscope list | head`): stop quietly.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaced so interpreter exit does not fail again
        except OSError:
            pass
        return 0
    except OSError as exc:
        where = f" ({os.fsdecode(exc.filename)})" if exc.filename else ""
        err(f"{exc.strerror or exc}{where}.")
        return 1
    except Exception as exc:  # noqa: BLE001 - errors are one line on stderr, never a traceback
        err(f"unexpected error ({type(exc).__name__}): {exc}")
        return 1


# ----------------------------------------------------------------------------------------------------------
# Arguments


def _labels(parser: argparse.ArgumentParser) -> dict[str, str]:
    """How the help names each argument's destination: ``--dir``, ``SESSION_ID``, ``CALL_ID`` …"""
    found: dict[str, str] = {}
    pending = [parser]
    while pending:
        current = pending.pop(0)
        for action in current._actions:  # noqa: SLF001 - argparse keeps its actions here
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                pending.extend(action.choices.values())
                continue
            if action.option_strings:
                label = max(action.option_strings, key=len)
            else:
                label = str(action.metavar or action.dest.upper())
            found.setdefault(action.dest, label)
    return found


def _undecodable(value: object) -> bool:
    """True when ``value`` (an argument) holds bytes that are not UTF-8 (Python keeps them as surrogates)."""
    if isinstance(value, (list, tuple)):
        return any(_undecodable(v) for v in value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return isinstance(value, str) and any("\ud800" <= ch <= "\udfff" for ch in value)


def _require_utf8(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Refuse (exit 2) an argument that is not valid UTF-8, naming it: no store call ever sees one."""
    labels: dict[str, str] | None = None
    for dest, value in vars(args).items():
        if _undecodable(value):
            labels = labels if labels is not None else _labels(parser)
            raise UsageError(f"{labels.get(dest, dest)} is not valid UTF-8: {safe(_as_text(value))}")


def _as_text(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_as_text(v) for v in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def named_location(args: argparse.Namespace, *, may_create: bool = False) -> Path | None:
    """The path ``--dir`` names, ``None`` without ``--dir``: a folder, or a database file opened as it is.

    ``--dir ''`` and a path that does not exist are bad arguments (exit 2), unless ``may_create`` (a capture
    creates a new session directory). A file named ``sessions.db`` is its folder (the same directory); any
    other file is passed through, so exactly that file is opened.
    """
    text = getattr(args, "dir", None)
    if text is None:
        return None
    if not str(text).strip():
        raise UsageError("--dir needs a path")
    path = Path(os.path.normpath(Path(text).expanduser().absolute()))
    if not path.exists():
        if may_create:
            return path
        raise UsageError(f"--dir {text}: no such file or folder")
    if not path.is_dir() and path.name == SESSIONS_DB:
        return path.parent
    return path


def check_opened(sd: SessionDir, named: Path) -> None:
    """Refuse to go on when the store opened another file than the database file the user named."""
    if named.is_dir():
        return
    opened = sd.db_path
    try:
        same = opened.exists() and os.path.samefile(opened, named)
    except OSError:
        same = False
    if not same:
        sd.close()
        raise StoreError(f"--dir {named} names a database file, but {opened} was opened instead; nothing was "
                         "read from it.")


# ----------------------------------------------------------------------------------------------------------
# Opening


def _dispatch(args: argparse.Namespace) -> int:
    if getattr(args, "read_only", False) and getattr(args, "snapshot", False):
        raise UsageError("choose one of --read-only and --snapshot")
    if args.command is not None and (args.start_section is not None or args.start_session is not None):
        raise UsageError("--section and --session choose the app's first screen: give them without a command")
    if args.command == "demo":
        return _cmd_demo(args)
    if args.command is None:
        import importlib

        return int(importlib.import_module("tui.cli.launch").open_ui(args))  # by name, as COMMAND_MODULES
    end_startup_gc()  # the other commands run no app: the collector's defaults now (see tui/__init__.py)
    if args.command == "list":
        return _cmd_list(args)
    if args.command == "show":
        return _cmd_show(args)
    handler = getattr(args, "handler", None)
    if handler is not None:
        return int(handler(args))
    raise UsageError(f"unknown command {args.command!r}")


def _mode(args: argparse.Namespace, *, default: OpenMode) -> OpenMode:
    if getattr(args, "snapshot", False):
        return OpenMode.SNAPSHOT
    if getattr(args, "read_only", False):
        return OpenMode.READ_ONLY
    return default


def _session_dir(args: argparse.Namespace) -> Path | None:
    """The directory (or database file) the command names: --demo, --dir, else the default one; without a
    database there, the store of captures (:func:`store.paths.captures_dir`) when it has one; else None."""
    if getattr(args, "demo", False):
        if getattr(args, "dir", None) is not None:
            raise UsageError("give either --dir or --demo, not both")
        from store.demo.build import ensure_demo

        return ensure_demo()
    named = named_location(args)
    if named is not None:
        if named.is_dir() and not sessions_db_path(named).is_file():
            raise StoreError(f"There is no sessions.db in {named}.")
        return named
    root = default_root()
    if sessions_db_path(root).is_file():
        return root
    from store.paths import captures_dir

    captures = captures_dir()  # no mothx sessions here: the store of captures, when something was captured
    return captures if sessions_db_path(captures).is_file() else None


def default_root() -> Path:
    from store.config import default_root as configured

    return configured()


def open_location(args: argparse.Namespace, mode: OpenMode) -> SessionDir:
    """Open what the command names in ``mode``, print the store's notices, and return it."""
    from store.mothx.sessiondir import open_session_dir

    root = _session_dir(args)
    if root is None:
        raise StoreError(f"no session directory at {default_root()}; pass --dir or run `{PROG} --demo`")
    sd = open_session_dir(root, mode)
    check_opened(sd, root)
    for notice in sd.notices:  # e.g. an older or newer schema: shown as far as it goes
        note(notice)
    return sd


def open_as(args: argparse.Namespace, default: OpenMode) -> SessionDir:
    """Open what the command names in its mode: ``--snapshot``, ``--read-only``, else ``default``."""
    return open_location(args, _mode(args, default=default))


def _open(args: argparse.Namespace) -> SessionDir:
    return open_as(args, OpenMode.READ_ONLY)


# ----------------------------------------------------------------------------------------------------------
# Commands


def _cmd_demo(args: argparse.Namespace) -> int:
    from store.demo.build import build_demo, ensure_demo

    target: Path | None = args.path
    if args.force:
        from store.paths import default_demo_dir

        path = build_demo(target or default_demo_dir(), force=True)
    else:
        path = ensure_demo(target)
    out(path)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from store.mothx.sessions import SessionFilter, SortKey, list_sessions

    flt = SessionFilter(
        search=args.search,
        cwd=_normal_dir(args.cwd) if args.cwd else "",
        project_id=args.project,
        channel_type=args.channel,
        messages_only=not args.all,
    )
    descending = args.sort not in ASCENDING_BY_DEFAULT
    if args.reverse:
        descending = not descending
    with _open(args) as sd:
        limit = args.limit if args.limit else 1 << 62
        page = list_sessions(sd, flt, SortKey(args.sort), descending, offset=args.offset, limit=limit)
    if output.list_out(args, [s.to_json() for s in page.rows]):
        return 0
    if not page.rows:
        out("No sessions match." if page.total == 0 else f"No sessions past row {args.offset}.")
        return 0
    print_sessions(page.rows)
    shown = args.offset + len(page.rows)
    if page.has_more:
        out(f"… {page.total - shown:,} more of {page.total:,} (--limit N, --offset N or --limit 0 for all)")
    return 0


def _normal_dir(text: str) -> str:
    """A --cwd value as sessions store it: absolute, ``~`` expanded, no trailing slash."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(text)))


def _cmd_show(args: argparse.Namespace) -> int:
    from store.mothx.sessions import get_session
    from tui.cli import show_export

    if args.raw and args.format == "html":
        raise UsageError("--raw lists the stored rows as md or json; --format html is the replay")
    red = show_export.redactor(args)
    with _open(args) as sd:
        try:
            summary = get_session(sd, args.session_id)
        except SessionNotFound:
            from tui.cli.native_show import show_captured

            if show_captured(sd, args):  # a captured Claude Code or Codex session of that id (or prefix)
                return 0
            raise
        if args.raw:
            from store.mothx.entries import load_rows

            rows = load_rows(sd, summary.id)
            if args.format == "json":
                show_export.emit_json(args, {
                    "session": summary.to_json(),
                    "rows": [{"seq": r.seq, "id": r.id, "type": r.type, "parent_id": r.parent_id,
                              "timestamp": r.timestamp, "parse_error": r.parse_error} for r in rows],
                }, red)
            else:
                show_export.emit_text(args, "".join(line + "\n" for line in raw_markdown(summary, rows)), red)
            return 0
        if args.format == "json":
            from store.mothx.entries import export_json

            doc = json.loads(export_json(sd, summary.id))
            show_export.emit_json(args, {"session": summary.to_json(), "messages": doc.get("messages", []),
                                         "compactions": doc.get("compactions", []),
                                         "corrupt_rows": doc.get("corrupt_rows", 0)}, red)
            return 0
        if args.format == "html":
            from store.export_html import mothx_html

            show_export.emit_text(args, mothx_html(sd, summary.id, redactor=red), red, redacted=True)
            return 0
        from store.mothx.entries import export_markdown

        text = export_markdown(sd, summary.id)
    show_export.emit_text(args, text, red)  # made safe there too (safe() is idempotent): the transcript is data
    return 0


# ----------------------------------------------------------------------------------------------------------
# Output


def when(stamp: str) -> str:
    """An RFC 3339 time as ``YYYY-MM-DD HH:MM`` in UTC (``-`` when unset; ``unreadable (<text>)`` when it does
    not parse: the stored text is no time), as the app shows it."""
    from store import times

    if stamp and times.parse_rfc3339(stamp) is None:
        return f"unreadable ({one_line(stamp[:19])})"
    return times.show(stamp, times.MINUTES, unset="-")


def tilde(path: str) -> str:
    from tui.formatting import tildify

    return tildify(path)


SESSION_COLUMNS = (Column("SESSION ID"), Column("LAST USED"), Column("MSGS", right=True),
                   Column("WORKDIR", cut=True), Column("TITLE", cut=True))


def print_sessions(rows: Sequence[SessionSummary]) -> None:
    from tui.formatting import NO_MESSAGES

    output.table(SESSION_COLUMNS, [
        (s.id, when(s.last_active_at), str(s.message_count), one_line(tilde(s.cwd)) or "-",
         one_line(s.title or s.preview) or NO_MESSAGES)
        for s in rows
    ])


def raw_markdown(summary: SessionSummary, rows: Sequence[EntryRow]) -> Iterator[str]:
    """``show --raw`` as Markdown lines: one table row per entry row, every cell one safe line."""
    from store.words import plural

    def cell(text: object) -> str:
        return one_line(text).replace("|", "\\|")

    yield f"# Raw entries of {cell(summary.id)}"
    yield ""
    yield f"{plural(len(rows), 'row')}; {sum(1 for r in rows if r.parse_error):,} do not parse."
    yield ""
    yield "| seq | id | type | parent | timestamp | problem |"
    yield "|---:|---|---|---|---|---|"
    for r in rows:
        yield (f"| {r.seq} | {cell(r.id)} | {cell(r.type)} | {cell(r.parent_id) or '-'} | {cell(r.timestamp)} | "
               f"{cell(r.parse_error)} |")


if __name__ == "__main__":
    raise SystemExit(main())
