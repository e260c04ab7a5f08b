"""Command-line commands for external-agent checkpoints (a :data:`tui.cli.COMMAND_MODULES` module).

    sessionscope [--dir PATH] capture claude-code [ROOT] [--json]      default ROOT ~/.claude/projects
    sessionscope [--dir PATH] capture codex [ROOT] [--json]            default ROOT ~/.codex/sessions
    sessionscope [--dir PATH] checkpoints [--json|--csv] [--redact] [--agent AGENT] [--host NAME]
    sessionscope [--dir PATH] checkpoint verify AGENT SESSION_ID [--json]
    sessionscope [--dir PATH] checkpoint reset AGENT SESSION_ID [--dry-run] [--yes]
    sessionscope export-repaired PATH OUT [--json]

Every checkpoint command takes ``--store URL``: the checkpoint store to use instead of the session
directory's own file, ``postgresql://user[:password]@host[:port]/database`` (a team store many machines capture
into) or ``sqlite:///path``. Without it ``$SESSIONSCOPE_STORE`` is used when set. The session directory still
gives the open mode (a read mode never writes to the store either); a read command with a store URL needs no
local session directory. ``checkpoints`` names the store it read on stderr; each row names the host that last
captured the session (HOST; ``host`` in ``--json`` / ``--csv``), and ``--host NAME`` lists only that host's.

``capture`` opens the session directory read-write and writes ``<dir>/sessionscope/agent-state.db``. Without
``--dir`` that is the default mothx session directory when it has a ``sessions.db``, else a store of our own
for captures (:func:`store.paths.captures_dir`, ``~/.local/share/sessionscope/captures``, created by the first
capture: a capture never creates ``~/.mothx/sessions``; ``sessionscope`` opens that store while no mothx
directory exists). It prints a summary of new /
appended / unchanged / divergent / unreadable sessions; a read mode is refused (exit 3). On a terminal a
progress bar over files and bytes is drawn on stderr. ``checkpoints`` and ``checkpoint verify`` only read
(read-only by default, like ``list``). ``checkpoint reset`` publishes a reset head after showing its preview;
it asks on a terminal and needs ``--yes`` otherwise. ``export-repaired`` writes a new file and never touches
the original. A SESSION_ID may be a unique prefix (4+ characters) of an agent session id.

Exit status as the rest of the command line: 0 success; 1 a failure, a divergent or out-of-sync verification;
2 bad arguments (a missing ROOT or PATH) or an unknown / ambiguous session (an ambiguous prefix lists the ids
it matches); 3 a refused write (read-only, not confirmed, the target exists).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from store.errors import AmbiguousSessionId, ReadOnlyStore, RepairRefused, SessionNotFound, StoreError
from store.mothx.db import OpenMode
from store.safetext import one_line
from tui.cli import output
from tui.cli.native_show import checkpoint_json
from tui.cli.output import Column, json_out, note, out
from tui.cli.store_option import add_store, apply_store
from tui.formatting import plural

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from store.agents.agentstate import CheckpointInfo, ResetPreview
    from store.agents.capture import CaptureProgress, CaptureSummary, ExportResult, VerifyResult
    from store.agents.checkpoint_read import CheckpointListing
    from store.mothx.sessiondir import SessionDir

AGENTS = ("claude-code", "codex")
AGENT_TITLES = {"claude-code": "Claude Code", "codex": "Codex"}
MIN_PREFIX = 4
SHOWN_MATCHES = 8  # ids an "ambiguous prefix" error lists
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 3

AddLocation = Callable[..., None]


# ----------------------------------------------------------------------------------------------------- parsers


def register(subparsers: argparse._SubParsersAction, add_location: AddLocation) -> None:
    """Add ``capture``, ``checkpoints``, ``checkpoint`` and ``export-repaired`` to the command line."""
    from tui.cli.core import _Parser as parser_class  # one-line errors, exit status 2

    cap = subparsers.add_parser(
        "capture", help="capture Claude Code or Codex transcripts as verified checkpoints",
        description="Capture every Claude Code or Codex session below ROOT as a checkpoint in the session "
                    "directory (only new tails are written on a re-capture).")
    add_location(cap, nested=True)
    add_store(cap)
    agents = cap.add_subparsers(dest="agent", metavar="AGENT", parser_class=parser_class)
    agents.required = True
    for agent, default in (("claude-code", "~/.claude/projects"), ("codex", "~/.codex/sessions")):
        one = agents.add_parser(agent, help=f"capture {AGENT_TITLES[agent]} transcripts (default ROOT {default})",
                                description=f"Capture every {AGENT_TITLES[agent]} session below ROOT "
                                            f"(default {default}).")
        add_location(one, nested=True)
        add_store(one)
        one.add_argument("root", metavar="ROOT", nargs="?", default=None, help=f"where to look (default {default})")
        one.add_argument("--json", action="store_true",
                         help="print the summary as JSON: one object per session")
        one.set_defaults(handler=cmd_capture)

    ls = subparsers.add_parser("checkpoints", help="list the captured agent checkpoints",
                               description="List the external-agent checkpoints of the session directory "
                                           "(read-only).")
    add_location(ls, nested=True)
    add_store(ls)
    output.add_list_options(ls, "print a JSON list of checkpoint objects")
    ls.add_argument("--agent", choices=AGENTS, default=None, help="only this agent's checkpoints")
    ls.add_argument("--host", metavar="NAME", default=None,
                    help="only the sessions this host captured last (as $SESSIONSCOPE_HOST or the host name named it)")
    ls.set_defaults(handler=cmd_checkpoints)

    cp = subparsers.add_parser("checkpoint", help="verify a checkpoint, or publish a reset",
                               description="Verify one checkpoint against its files on disk, or publish a reset.")
    add_location(cp, nested=True)
    add_store(cp)
    acts = cp.add_subparsers(dest="checkpoint_command", metavar="ACTION", parser_class=parser_class)
    acts.required = True
    verify = acts.add_parser("verify", help="compare a checkpoint with its files on disk now (writes nothing)",
                             description="Compare the published checkpoint with the files on disk now. Exit "
                                         "status 0 when verified, 1 when divergent or out of sync.")
    add_location(verify, nested=True)
    add_store(verify)
    verify.add_argument("agent", metavar="AGENT", choices=AGENTS, help="claude-code or codex")
    verify.add_argument("session_id", metavar="SESSION_ID", help="the agent session id or a unique prefix")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")
    verify.set_defaults(handler=cmd_verify)
    reset = acts.add_parser("reset", help="publish a reset head (the next capture stores the files afresh)",
                            description="Publish a reset head for an agent session: its checkpoint stops being "
                                        "loadable and the next capture stores the files on disk afresh. Shows "
                                        "the preview first; asks on a terminal, needs --yes otherwise.")
    add_location(reset, nested=True)
    add_store(reset)
    reset.add_argument("agent", metavar="AGENT", choices=AGENTS, help="claude-code or codex")
    reset.add_argument("session_id", metavar="SESSION_ID", help="the agent session id or a unique prefix")
    reset.add_argument("--dry-run", action="store_true", help="show the preview and change nothing")
    reset.add_argument("--yes", action="store_true", help="publish without asking")
    reset.set_defaults(handler=cmd_reset)

    exp = subparsers.add_parser(
        "export-repaired", help="write a copy of a transcript with its interrupted calls closed",
        description="Write a copy of a Claude Code or Codex transcript in which every interrupted tool call is "
                    "closed by a synthetic 'interrupted' result. OUT must not exist; PATH is only read.")
    exp.add_argument("path", metavar="PATH", type=Path, help="the transcript (.jsonl) to repair a copy of")
    exp.add_argument("out", metavar="OUT", type=Path, help="the new file to write")
    exp.add_argument("--json", action="store_true", help="print what was closed as JSON")
    exp.set_defaults(handler=cmd_export_repaired)


# ---------------------------------------------------------------------------------------------- session dir


def _mode(args: argparse.Namespace, default: OpenMode) -> OpenMode:
    from tui.cli import core as cli

    return cli._mode(args, default=default)  # noqa: SLF001 - one rule for --read-only / --snapshot


def _target_dir(args: argparse.Namespace, *, write: bool) -> Path:
    """The directory (or database file) named by --demo / --dir; else the default mothx session directory when
    it has a ``sessions.db`` (captures sit beside its sessions); else the store of captures of our own
    (:func:`store.paths.captures_dir`, it may not exist yet). A --dir path that does not exist is a bad argument
    (exit 2) unless the command writes (a capture)."""
    from store.paths import captures_dir, default_session_dir, sessions_db_path
    from tui.cli import core as cli

    if getattr(args, "demo", False):
        if getattr(args, "dir", None) is not None:
            raise cli.UsageError("give either --dir or --demo, not both")
        from store.demo.build import ensure_demo

        return ensure_demo()
    named = cli.named_location(args, may_create=write)
    if named is not None:
        return named
    mothx = default_session_dir()
    return mothx if sessions_db_path(mothx).is_file() else captures_dir()


@contextmanager
def open_dir(args: argparse.Namespace, *, write: bool) -> Iterator[SessionDir]:
    """Open the session directory for a checkpoint command.

    ``write``: read-write unless --read-only / --snapshot; a missing ``sessions.db`` is created when the folder
    is new or empty, or is the store of captures (a first capture is how a new user starts; the default mothx
    session directory is never created). Otherwise read-only.
    """
    from store import config
    from store.agents.checkpoint_engine import selected_store
    from store.mothx.sessiondir import open_session_dir
    from store.paths import captures_dir, sessions_db_path
    from tui.cli import core as cli
    from tui.formatting import tildify

    apply_store(args, config.load().text("store"))
    root = _target_dir(args, write=write)
    mode = _mode(args, OpenMode.READ_WRITE if write else OpenMode.READ_ONLY)
    create = False
    no_dir = (root.is_dir() or not root.exists()) and not sessions_db_path(root).is_file()
    if no_dir and not write and selected_store() is not None and getattr(args, "dir", None) is None:
        with _store_only_dir(mode) as sd:  # a team store read from a machine with no session directory
            yield sd
        return
    if no_dir:
        if write and mode.is_read:
            raise ReadOnlyStore(f"Refused: the session directory is open {mode.value} (read-only).")
        fresh = not root.exists() or (root.is_dir() and not any(root.iterdir()))
        if not write or not (fresh or root == captures_dir()):
            raise StoreError(f"There is no sessions.db in {root}.")
        root.mkdir(parents=True, exist_ok=True)
        create = True
    sd = open_session_dir(root, mode, create=create)
    cli.check_opened(sd, root)
    try:
        if create and root == captures_dir():
            note(f"created the store for captured sessions at {tildify(root)} (no --dir was given and there is no "
                 f"mothx session directory; `sessionscope` opens this store while there is none)")
        elif create:
            note(f"created a new session directory at {root}")
        for notice in sd.notices:
            note(notice)
        yield sd
    finally:
        sd.close()


@contextmanager
def _store_only_dir(mode: OpenMode) -> Iterator[SessionDir]:
    """An empty, private session directory that only carries the open mode for a store named by URL."""
    import tempfile

    from store.mothx.sessiondir import open_session_dir

    with tempfile.TemporaryDirectory(prefix="sessionscope-store-") as tmp:
        with open_session_dir(Path(tmp), OpenMode.READ_WRITE, create=True):
            pass
        with open_session_dir(Path(tmp), OpenMode.READ_ONLY if mode is OpenMode.READ_WRITE else mode) as sd:
            yield sd


def resolve_agent_session(sd: SessionDir, agent: str, text: str) -> CheckpointInfo:
    """The checkpoint of ``agent`` whose agent session id is ``text`` or starts with it (4+ characters)."""
    from store.agents.agentstate import list_checkpoints

    wanted = text.strip()
    infos = list_checkpoints(sd, agent)
    exact = [i for i in infos if i.agent_session_id == wanted]
    if exact:
        return exact[0]
    if len(wanted) >= MIN_PREFIX:
        found = [i for i in infos if i.agent_session_id.startswith(wanted)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            ids = [i.agent_session_id for i in found]
            listed = ", ".join(ids[:SHOWN_MATCHES]) + (", …" if len(ids) > SHOWN_MATCHES else "")
            raise AmbiguousSessionId(
                f"ambiguous prefix {wanted}: matches {len(found)} {agent} checkpoints: {listed}")
    hint = "" if len(wanted) >= MIN_PREFIX else f" (a prefix needs at least {MIN_PREFIX} characters)"
    raise SessionNotFound(f"No {agent} checkpoint has the session id {wanted}{hint}.")


# ------------------------------------------------------------------------------------------------- capture


class _ProgressBar:
    """A rich progress bar over bytes (with a files counter) on stderr; nothing when stderr is not a terminal."""

    def __init__(self, agent: str, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.agent = agent
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> _ProgressBar:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("capture {task.fields[agent]}", style="bold", markup=False),
                BarColumn(),
                TextColumn("{task.fields[files]} files", markup=False),
                DownloadColumn(),
                TimeRemainingColumn(),
                # the file being read is data: shown as plain, safe text (a name may hold "[/]" or ESC)
                TextColumn("{task.fields[current]}", style="dim", markup=False),
                console=Console(file=self.stream, markup=False, highlight=False, emoji=False),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("capture", total=None, agent=self.agent, files="0/0", current="")
        return self

    def __call__(self, p: CaptureProgress) -> None:
        if self._progress is None or self._task is None:
            return
        name = one_line(p.current)
        current = name if len(name) <= 40 else "…" + name[-39:]
        self._progress.update(self._task, total=max(p.bytes_total, 1), completed=p.bytes_done,
                              files=f"{p.files_done:,}/{p.files_total:,}", current=current)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def cmd_capture(args: argparse.Namespace) -> int:
    from store.agents import capture
    from tui.cli import core as cli

    root = Path(os.path.abspath(Path(args.root).expanduser())) if args.root else None  # "a/../b" stored as "b"
    if root is not None and not root.is_dir():  # a bad argument: exit 2
        raise cli.UsageError(f"ROOT {root}: no such folder" if not root.exists() else f"ROOT {root} is not a folder.")
    with open_dir(args, write=True) as sd:
        fn = capture.capture_claude_code if args.agent == "claude-code" else capture.capture_codex
        with _ProgressBar(args.agent, sys.stderr) as bar:
            summary = fn(sd, root, progress=bar)
        where = sd.root
        _name_store(sd)
    if args.json:
        json_out(summary.to_json())
        return EXIT_OK
    print_capture_summary(summary, where)
    return EXIT_OK


def print_capture_summary(summary: CaptureSummary, where: Path, stream: TextIO | None = None) -> None:
    from store.agents.capture import STATUS_DIVERGENT, STATUS_UNREADABLE, STATUSES
    from tui.formatting import tildify

    def say(line: str) -> None:
        out(line, stream=stream)

    title = one_line(AGENT_TITLES.get(summary.agent, summary.agent))
    say(f"Captured {title} transcripts from {one_line(tildify(summary.root))} into {one_line(tildify(where))}:")
    counts = summary.counts
    records = sum(s.records for s in summary.sessions)
    say("  " + " · ".join(f"{status} {counts[status]:,}" for status in STATUSES)
        + f"   ({plural(summary.files, 'file')}, {plural(records, 'record')}, {summary.records_written:,} written)")
    drift = summary.drift()
    if drift:
        say(f"Format drift (record types and fields not recognised, by {title} version):")
        for line in drift:
            say(f"  {one_line(line)}")
    elif summary.records_written:
        say("Format drift: none (every record type and field written was recognised).")
    for status, heading, hint in (
        (STATUS_DIVERGENT, "Divergent (nothing was written; publish a reset to capture afresh):",
         "sessionscope checkpoint reset {agent} {sid}"),
        (STATUS_UNREADABLE, "Unreadable (not stored):", ""),
    ):
        listed = [s for s in summary.sessions if s.status == status]
        if not listed:
            continue
        say(heading)
        for s in listed:
            who = one_line(s.agent_session_id) or "(no session id)"
            reason = one_line(s.detail or "no reason was given.")
            say(f"  {who}  {reason}")
            if hint and s.agent_session_id:
                say(f"    → {hint.format(agent=one_line(s.agent), sid=one_line(s.agent_session_id))}")
    pending = [s for s in summary.sessions if s.pending_lines]
    if pending:
        say(f"{plural(len(pending), 'session')} end in an incomplete line, left for the next capture.")


# ---------------------------------------------------------------------------------------------- checkpoints


def _name_store(sd: SessionDir) -> None:
    """On stderr, the store read or written when it is named by a URL (the default file goes unsaid)."""
    from store.agents.agentstate import selected_store, store_label

    if selected_store() is not None:
        note(f"store: {store_label(sd)}")


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from store.agents.agentstate import list_checkpoints

    host = getattr(args, "host", None)
    with open_dir(args, write=False) as sd:
        infos = list_checkpoints(sd, args.agent, host=host)
        _name_store(sd)
    if output.list_out(args, [{**checkpoint_json(i), "host": i.host} for i in infos]):
        return EXIT_OK
    if not infos:
        if host is not None:
            out(f"No checkpoints captured last by the host {one_line(host)}.")
        else:
            out("No checkpoints. Capture some with `sessionscope capture claude-code` or `capture codex`.")
        return EXIT_OK
    print_checkpoints(infos)
    return EXIT_OK


CHECKPOINT_COLUMNS = (Column("AGENT"), Column("SESSION ID"), Column("HEAD"), Column("FILES", right=True),
                      Column("RECORDS", right=True), Column("CAPTURED"), Column("HOST"), Column("CWD", cut=True))


def print_checkpoints(infos: Sequence[CheckpointListing]) -> None:
    from tui.cli import core as cli

    cells = []
    for i in infos:
        state = i.state
        head = (i.head.kind if i.head else "none") + (" (!)" if i.head_problem else "")
        cells.append((i.agent_id, i.agent_session_id, head, str(state.file_count) if state else "-",
                      str(state.record_count) if state else "-", cli.when(i.updated_at), i.host or "-",
                      (cli.tilde(state.cwd) or "-") if state else "-"))
    output.table(CHECKPOINT_COLUMNS, cells)
    for i in infos:
        if i.head_problem:
            out(f"(!) {one_line(i.agent_id)} {one_line(i.agent_session_id)}: {one_line(i.head_problem)}")


def verify_json(result: VerifyResult) -> dict[str, object]:
    return {
        "agent": result.agent,
        "agent_session_id": result.agent_session_id,
        "status": result.status,
        "head_kind": result.head_kind,
        "new_records": result.new_records,
        "details": list(result.details),
        "files": [
            {"path": f.path, "status": f.status, "stored_records": f.stored_records,
             "stored_digest": f.stored_digest, "disk_records": f.disk_records, "detail": f.detail}
            for f in result.files
        ],
    }


STATUS_WORDS = {"verified": "verified", "divergent": "divergent", "out_of_sync": "out of sync"}


def cmd_verify(args: argparse.Namespace) -> int:
    from store.agents.capture import VERIFIED, verify

    with open_dir(args, write=False) as sd:
        info = resolve_agent_session(sd, args.agent, args.session_id)
        result = verify(sd, info.agent_id, info.agent_session_id)
    if args.json:
        json_out(verify_json(result))
    else:
        word = STATUS_WORDS.get(result.status, result.status)
        out(f"{one_line(word)}: {one_line(result.agent)} {one_line(result.agent_session_id)}")
        for f in result.files:
            on_disk = "missing" if f.disk_records < 0 else f"{f.disk_records:,} on disk"
            out(f"  {one_line(f.status):<10} {one_line(f.path)}  ({f.stored_records:,} stored, {on_disk}; "
                f"digest {one_line(f.stored_digest[:12])}…)")
        for detail in result.details:
            out(f"  {one_line(detail)}")
        if result.status == VERIFIED and result.new_records:
            out(f"  Capture again to store the {plural(result.new_records, 'new record')}.")
    return EXIT_OK if result.status == VERIFIED else EXIT_FAILED


def _confirm(question: str) -> bool:
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise RepairRefused("Refused: not confirmed; pass --yes to publish the reset without a terminal to ask on.")
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, EOFError):
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def print_reset_preview(preview: ResetPreview, stream: TextIO | None = None) -> None:
    head = f"{one_line(preview.head.kind)} (run {one_line(preview.head.run_id)})" if preview.head else "none"
    out(f"Reset {one_line(preview.agent_id)} {one_line(preview.agent_session_id)}", stream=stream)
    out(f"  head now: {head}", stream=stream)
    out(f"  {one_line(preview.summary)}", stream=stream)


def cmd_reset(args: argparse.Namespace) -> int:
    from store.agents.agentstate import preview_reset, publish_reset

    with open_dir(args, write=True) as sd:
        info = resolve_agent_session(sd, args.agent, args.session_id)
        preview = preview_reset(sd, info.agent_id, info.agent_session_id)
        print_reset_preview(preview)
        if not preview.allowed:
            if sd.mode.is_read:
                raise ReadOnlyStore(f"Refused: the session directory is open {sd.mode.value} (read-only).")
            raise RepairRefused(f"Refused: {preview.summary}")
        if args.dry_run:
            out("Dry run: nothing was changed.")
            return EXIT_OK
        sys.stdout.flush()
        if not args.yes and not _confirm("Publish this reset?"):
            raise RepairRefused("Refused: the reset was not confirmed; nothing was changed.")
        head = publish_reset(sd, info.agent_id, info.agent_session_id)
    out(f"Published a reset head (run {one_line(head.run_id)}). The next capture stores the files on disk afresh.")
    return EXIT_OK


# ------------------------------------------------------------------------------------------- export-repaired


def export_json(result: ExportResult) -> dict[str, object]:
    return {
        "source": result.source,
        "out_path": result.out_path,
        "agent": result.agent,
        "lines_in": result.lines_in,
        "lines_out": result.lines_out,
        "closed": [{"call_id": c.call_id, "name": c.name, "line": c.line, "inserted_at": c.inserted_at}
                   for c in result.closed],
    }


def cmd_export_repaired(args: argparse.Namespace) -> int:
    from store.agents.capture import export_repaired_copy
    from tui.cli import core as cli

    src: Path = args.path.expanduser()
    if not src.exists():
        raise cli.UsageError(f"{src}: no such file")  # a bad argument: exit 2
    if not src.is_file():
        raise cli.UsageError(f"{src} is not a file.")
    result = export_repaired_copy(src, args.out.expanduser())
    if args.json:
        json_out(export_json(result))
        return EXIT_OK
    title = one_line(AGENT_TITLES.get(result.agent, result.agent))
    out(f"Wrote {one_line(result.out_path)}: a repaired copy of the {title} transcript {one_line(result.source)} "
        f"({result.lines_in:,} lines in, {result.lines_out:,} out).")
    if not result.closed:
        out("  No call was interrupted: the copy equals the original.")
    for c in result.closed:
        out(f"  closed {one_line(c.name) or 'a call'} {one_line(c.call_id)} (line {c.line}) with an 'interrupted' "
            f"result at line {c.inserted_at}")
    return EXIT_OK
