"""The Checkpoints screen: captured Claude Code and Codex sessions, their files and digests, proofs and resets.

Agents (left) → their sessions (the list) → the selected session's files, records and digests (below). ``v``
verifies the selected checkpoint against the files on disk now, ``V`` every listed one; the proof column then
says verified / divergent / out of sync (it says "not verified yet" until then: nothing is read from the disk
before the user asks). ``R`` publishes a reset after showing its preview in the confirm dialog; it is a write
action, so it is dimmed and blocked in the read modes, and the store refuses it there too. ``enter`` opens the
published checkpoint in the Transcript screen's native view
(:class:`tui.screens.native_transcript.NativeTranscriptScreen`).

The list pages the store by keyset (:class:`tui.widgets.checkpoint_list.CheckpointSource`, one query per page);
the agent pane's counts are one grouped count query. Nothing holds every checkpoint: ``V`` pages through the
listed checkpoints in its worker. Every store call runs in a thread worker that only posts a typed message; one
handler applies it. Errors become one line on screen and a notification.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui import actions
from tui.context import store
from tui.formatting import describe_error, one_line, plural, tildify
from tui.lifecycle import ReportsWorkerFailures
from tui.messages import WorkerFailed
from tui.safe import data_line, notify
from tui.screens.checkpoint_details import (
    AGENT_TITLES,
    ALL_AGENTS,
    CheckpointsFailed,
    CheckpointsLoaded,
    ProofChecked,
    RepairedCopyWritten,
    ResetPreviewed,
    ResetPublished,
    VerifyAllFinished,
    VerifyQueued,
    details_renderable,
    proof_from,
    repaired_copy_path,
)
from tui.widgets.checkpoint_list import CheckpointList, CheckpointSource, Proof, row_key
from tui.widgets.header import AppHeader
from tui.widgets.keybar import KeyBar
from tui.widgets.row_list import RowList
from tui.widgets.statusbar import StatusBar

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from store.agents.agentstate import CheckpointInfo
    from store.agents.capture import VerifyResult
    from store.mothx.sessiondir import SessionDir


# --- the screen -------------------------------------------------------------------------------------------------


_Key = tuple[str, str]  # a row's (agent id, agent session id)
_PROOFS: dict[str, tuple[tuple[int, ...], dict[_Key, Proof], dict[_Key, VerifyResult]]] = {}
"""The proofs and verify results per session directory (by path), kept across visits of the screen (the dicts
are shared with the screen that shows them), with the identity of the checkpoint file they were made on."""


def _state_identity(sd: SessionDir) -> tuple[int, ...]:
    """The checkpoint file's identity (device, inode, size, mtime of the file and its WAL): any capture or reset
    changes it, and then no earlier proof is shown as current."""
    from store.agents.checkpoint_db import state_db_path

    path = state_db_path(sd)
    out: list[int] = []
    for part in (path, path.with_name(path.name + "-wal")):
        try:
            st = part.stat()
        except OSError:
            out.extend((0, 0, 0, 0))
            continue
        out.extend((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def remembered_proofs(sd: SessionDir) -> tuple[dict[_Key, Proof], dict[_Key, VerifyResult]]:
    """The proofs (and results) kept for ``sd``: the same dicts on every visit while the checkpoint file is
    unchanged (a proof still being made when the screen was left is dropped), fresh ones otherwise."""
    identity = _state_identity(sd)
    where = str(sd.root)
    kept = _PROOFS.get(where)
    if kept is None or kept[0] != identity:
        kept = (identity, {}, {})
        _PROOFS[where] = kept
    _, proofs, results = kept
    for key in [k for k, proof in proofs.items() if proof.status == "verifying"]:
        proofs.pop(key, None)
        results.pop(key, None)
    return proofs, results


class CheckpointsScreen(ReportsWorkerFailures, Screen[None]):
    """Agents, their captured sessions, and the selected session's files; verify and reset."""

    CSS_PATH = "checkpoints.tcss"
    ACTION_SCOPE: ClassVar[str] = "checkpoints"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Checkpoints screen"
    AUTO_FOCUS = "#checkpoints"

    def __init__(self, sd: SessionDir | None = None) -> None:
        super().__init__()
        self.sd = sd
        self.counts: dict[str, int] = {}  # checkpoints per agent (the agent pane)
        self.counted = False  # the counts of this generation arrived
        self.agent = ALL_AGENTS
        self.generation = 0
        self.results: dict[tuple[str, str], VerifyResult] = {}
        self.error = ""
        self.busy: set[str] = set()  # "reset" while a reset is previewed / confirmed / published

    # --- layout -----------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield AppHeader(section="Checkpoints")
        with Horizontal(id="checkpoint-panes"):
            with Vertical(id="agent-pane"):
                yield Static("AGENTS", id="agent-title")
                yield OptionList(id="agents")
            yield CheckpointList(id="checkpoints")
        with VerticalScroll(id="checkpoint-details"):
            yield Static(Text("Reading checkpoints…", style="dim"), id="details-body")
        yield StatusBar(id="checkpoint-status")
        yield KeyBar()

    def on_mount(self) -> None:
        if self.sd is None:
            self.sd = store(self)
        if self.sd is not None:  # the proofs of an earlier visit, while the checkpoint file is unchanged
            self.checkpoint_list.proofs, self.results = remembered_proofs(self.sd)
        self.query_one(CheckpointList).empty_text = (
            "No checkpoints yet. Capture some: sessionscope capture claude-code (or codex), then press r.")
        self._name_store()
        self._load()

    def _name_store(self) -> None:
        """A store named by --store / SESSIONSCOPE_STORE is shown under the agents (the default file is not)."""
        from store.agents.agentstate import selected_store, store_brief

        if self.sd is None or selected_store() is None:
            return
        title = Text("AGENTS\n", style="bold")
        title.append(one_line(store_brief(self.sd)), style="dim")
        widget = self.query_one("#agent-title", Static)
        widget.styles.height = 2
        widget.update(title)

    @property
    def checkpoint_list(self) -> CheckpointList:
        return self.query_one(CheckpointList)

    # --- loading ----------------------------------------------------------------------------------------------

    def _load(self) -> None:
        if self.sd is None:
            self.checkpoint_list.show_message("No session directory is open.")
            return
        self.generation += 1
        self._read_checkpoints(self.sd, self.generation)

    @work(thread=True, exclusive=True, group="checkpoints-list", exit_on_error=False, description="Count checkpoints")
    def _read_checkpoints(self, sd: SessionDir, generation: int) -> None:
        try:
            # One grouped count over the checkpoint sessions (the catalog's count is the same table's).
            from store.agents.native_catalog import agent_session_counts

            counts = agent_session_counts(sd)
        except Exception as exc:  # noqa: BLE001 - one line on screen, never a traceback
            self.post_message(CheckpointsFailed(generation, describe_error(exc)))
            return
        self.post_message(CheckpointsLoaded(generation, counts))

    @on(CheckpointsLoaded)
    def _loaded(self, message: CheckpointsLoaded) -> None:
        if message.generation != self.generation:
            return
        self.error = ""
        self.counts = dict(message.counts)
        self.counted = True
        self._fill_agents()
        self._show_rows(keep_cursor=True)

    @property
    def total(self) -> int:
        """How many checkpoints there are (every agent)."""
        return sum(self.counts.values())

    @property
    def listed_total(self) -> int:
        """How many checkpoints the list shows (the chosen agent's, or all)."""
        return self.total if self.agent == ALL_AGENTS else self.counts.get(self.agent, 0)

    @on(CheckpointsFailed)
    def _failed(self, message: CheckpointsFailed) -> None:
        if message.generation != self.generation:
            return
        self.error = message.error
        self.checkpoint_list.show_message(f"✗ {message.error}")
        self.query_one("#details-body", Static).update(data_line(f"✗ {message.error}", style="bold red"))
        self.query_one(StatusBar).count = "checkpoints unavailable"
        notify(self, message.error, title="Cannot read checkpoints", severity="error")

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        """A worker failed outside its own error path (the app notifies it): what it left "…ing" ends here."""
        group = message.group
        if group == "checkpoints-list":
            self.error = message.reason
            self.checkpoint_list.show_message(f"✗ {message.reason}")
            self.query_one(StatusBar).count = "checkpoints unavailable"
        elif group in ("checkpoints-verify", "checkpoints-verify-all"):
            for key, proof in list(self.checkpoint_list.proofs.items()):
                if proof.status == "verifying":
                    self.checkpoint_list.set_proof(key, Proof("failed", message.reason))
            self._show_details()
            self._show_status()
        elif group == "checkpoints-reset":
            self.busy.discard("reset")

    def _agent_counts(self) -> list[tuple[str, int]]:
        return sorted((a, n) for a, n in self.counts.items() if n)

    def _fill_agents(self) -> None:
        options = self.query_one("#agents", OptionList)
        agents = self._agent_counts()
        if self.agent not in {a for a, _ in agents}:
            self.agent = ALL_AGENTS
        wanted = [Option(self._agent_label("All agents", self.total), id="agent:")]
        wanted += [Option(self._agent_label(AGENT_TITLES.get(a, one_line(a)), n), id=f"agent:{a}") for a, n in agents]
        with options.prevent(OptionList.OptionHighlighted):
            options.clear_options()
            options.add_options(wanted)
            options.highlighted = next(
                (i for i, o in enumerate(wanted) if o.id == f"agent:{self.agent}"), 0)

    @staticmethod
    def _agent_label(title: str, count: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{title:<14}")
        text.append(f"{count:>5,}", style="dim")
        return text

    @on(OptionList.OptionHighlighted, "#agents")
    def _agent_chosen(self, event: OptionList.OptionHighlighted) -> None:
        agent = (event.option.id or "agent:").split(":", 1)[1]
        if agent != self.agent:
            self.agent = agent
            self._show_rows()

    @on(OptionList.OptionSelected, "#agents")
    def _agent_selected(self, event: OptionList.OptionSelected) -> None:
        self.checkpoint_list.focus()

    def listed_source(self) -> CheckpointSource | None:
        """A fresh keyset source over the listed checkpoints (the chosen agent's, or all)."""
        if self.sd is None:
            return None
        return CheckpointSource(self.sd, self.agent or None, total=self.listed_total,
                                page_rows=self.checkpoint_list.page_size)

    def _show_rows(self, keep_cursor: bool = False) -> None:
        if self.sd is not None:
            self.checkpoint_list.show_checkpoints(self.sd, self.agent or None, total=self.listed_total,
                                                  keep_cursor=keep_cursor)
        self._show_details()
        self._show_status()

    @on(RowList.Loaded, "#checkpoints")
    def _rows_loaded(self, message: RowList.Loaded) -> None:
        self._show_details()

    @on(RowList.Failed, "#checkpoints")
    def _rows_failed(self, message: RowList.Failed) -> None:
        """A page could not be read: the list shows the line; say it once."""
        notify(self, message.error, title="Cannot read checkpoints", severity="error")

    # --- details and status -----------------------------------------------------------------------------------

    @on(RowList.Highlighted, "#checkpoints")
    def _highlighted(self, message: RowList.Highlighted) -> None:
        self._show_details()

    def _show_details(self) -> None:
        info = self.checkpoint_list.selected
        body = self.query_one("#details-body", Static)
        if info is None:
            if self.error:
                return
            body.update(Text("No checkpoint is selected." if self.total else
                             "Capture transcripts with `sessionscope capture claude-code` or `capture codex`; "
                             "each session becomes a verified checkpoint listed here.", style="dim"))
            return
        key = row_key(info)
        body.update(details_renderable(info, self.checkpoint_list.proofs.get(key), self.results.get(key)))

    def _show_status(self) -> None:
        bar = self.query_one(StatusBar)
        total = self.total
        listed = self.listed_total
        noun = "checkpoint" if total == 1 else "checkpoints"
        if not self.counted:
            bar.count = "Counting checkpoints…"
        elif self.agent == ALL_AGENTS:
            bar.count = f"{total:,} {noun}"
        else:
            bar.count = f"{listed:,} of {total:,} {noun}"
        # The proofs are held per row key (only the verified ones): the rest of the listed rows are "not verified".
        tally: dict[str, int] = {}
        for key, proof in self.checkpoint_list.proofs.items():
            if self.agent != ALL_AGENTS and key[0] != self.agent:
                continue
            label = proof.label.split(" +")[0]
            tally[label] = tally.get(label, 0) + 1
        unverified = listed - sum(tally.values())
        if unverified > 0:
            tally["not verified"] = unverified
        order = ["verified", "divergent", "out of sync", "verifying…", "error", "not verified"]
        parts = [f"{tally[k]:,} {k}" for k in order if tally.get(k)]
        agent = f"agent: {AGENT_TITLES.get(self.agent, self.agent)}" if self.agent else "agent: all"
        bar.query_text = "  ·  ".join([agent, *parts])

    # --- verify -----------------------------------------------------------------------------------------------

    def action_verify(self) -> None:
        info = self.checkpoint_list.selected
        if info is None or self.sd is None:
            notify(self, "There is no checkpoint to verify.", severity="warning", timeout=3)
            return
        key = row_key(info)
        self.checkpoint_list.set_proof(key, Proof("verifying"))
        self._show_details()
        self._show_status()
        self._verify_one(self.sd, key)

    def action_verify_all(self) -> None:
        source = self.listed_source()
        if source is None or not self.listed_total:
            notify(self, "There is no checkpoint to verify.", severity="warning", timeout=3)
            return
        self._verify_many(source)

    @work(thread=True, group="checkpoints-verify", exit_on_error=False, description="Verify a checkpoint")
    def _verify_one(self, sd: SessionDir, key: tuple[str, str]) -> None:
        self.post_message(self._verify_key(sd, key, quiet=False))

    @work(thread=True, exclusive=True, group="checkpoints-verify-all", exit_on_error=False,
          description="Verify every listed checkpoint")
    def _verify_many(self, source: CheckpointSource) -> None:
        """Verify every listed checkpoint, paging through the store (one query per page; only a page of rows is
        held at a time)."""
        from textual.worker import get_current_worker

        worker = get_current_worker()
        counts: dict[str, int] = {}
        try:
            for page in source.pages():
                keys = [row_key(info) for info in page.rows]
                if worker.is_cancelled:  # a newer "verify all" replaced this one
                    return
                self.post_message(VerifyQueued(keys))
                for key in keys:
                    if worker.is_cancelled:
                        return
                    message = self._verify_key(source.sd, key, quiet=True)
                    status = message.result.status if message.result is not None else "failed"
                    counts[status] = counts.get(status, 0) + 1
                    self.post_message(message)
        except Exception as exc:  # noqa: BLE001 - a page could not be read: one notification, never a traceback
            self.app.call_from_thread(notify, self, describe_error(exc), title="Cannot list the checkpoints",
                                      severity="error")
        self.post_message(VerifyAllFinished(counts))

    @on(VerifyQueued)
    def _verify_queued(self, message: VerifyQueued) -> None:
        proofs = self.checkpoint_list.proofs
        for key in message.keys:
            proofs[key] = Proof("verifying")
        self.checkpoint_list.refresh_cells()
        selected = self.checkpoint_list.selected
        if selected is not None and row_key(selected) in message.keys:
            self._show_details()
        self._show_status()

    @staticmethod
    def _verify_key(sd: SessionDir, key: tuple[str, str], *, quiet: bool) -> ProofChecked:
        try:
            from store.agents.capture import verify

            result = verify(sd, key[0], key[1])
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            return ProofChecked(key, None, describe_error(exc), quiet=quiet)
        return ProofChecked(key, result, quiet=quiet)

    @on(ProofChecked)
    def _proof_checked(self, message: ProofChecked) -> None:
        key = message.key
        who = one_line(f"{key[0]} {key[1][:13]}")
        if message.result is None:
            self.results.pop(key, None)
            self.checkpoint_list.set_proof(key, Proof("failed", message.error))
            if not message.quiet:
                notify(self, message.error, title=f"Cannot verify {who}", severity="error")
        else:
            result = message.result
            self.results[key] = result
            proof = proof_from(result)
            self.checkpoint_list.set_proof(key, proof)
            if not message.quiet:
                severity: SeverityLevel = "information" if result.status == "verified" else "warning"
                notify(self, f"{who}: {proof.label}. {proof.detail}", title="Verify", severity=severity)
        selected = self.checkpoint_list.selected
        if selected is not None and row_key(selected) == key:
            self._show_details()
        self._show_status()

    @on(VerifyAllFinished)
    def _verify_all_finished(self, message: VerifyAllFinished) -> None:
        counts = message.counts
        total = sum(counts.values())
        words = [("verified", "verified"), ("divergent", "divergent"), ("out_of_sync", "out of sync"),
                 ("failed", "could not be verified")]
        parts = [f"{counts[k]:,} {w}" for k, w in words if counts.get(k)]
        bad = total - counts.get("verified", 0)
        notify(self, f"Verified {plural(total, 'checkpoint')}: {', '.join(parts)}.", title="Verify all",
                    severity="warning" if bad else "information")

    # --- reset ------------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        sd = self.sd if self.sd is not None else store(self)
        # Checkpoints live in a file of ours: only the open mode decides (store.agents.agentstate.require_state_writable).
        return actions.check_write(action, sd is not None and not sd.mode.is_read)

    def action_reset(self) -> None:
        info = self.checkpoint_list.selected
        if info is None or self.sd is None:
            notify(self, "There is no checkpoint to reset.", severity="warning", timeout=3)
            return
        if "reset" in self.busy:
            return
        self.busy.add("reset")
        self._preview_reset(self.sd, row_key(info))

    @work(thread=True, exclusive=True, group="checkpoints-reset", exit_on_error=False, description="Preview a reset")
    def _preview_reset(self, sd: SessionDir, key: tuple[str, str]) -> None:
        try:
            from store.agents.agentstate import preview_reset

            preview = preview_reset(sd, key[0], key[1])
        except Exception as exc:  # noqa: BLE001
            self.post_message(ResetPreviewed(key, None, describe_error(exc)))
            return
        self.post_message(ResetPreviewed(key, preview))

    @on(ResetPreviewed)
    def _reset_previewed(self, message: ResetPreviewed) -> None:
        preview = message.preview
        if preview is None:
            self.busy.discard("reset")
            notify(self, message.error, title="Cannot preview the reset", severity="error")
            return
        if not preview.allowed:
            self.busy.discard("reset")
            notify(self, one_line(preview.summary), title="Reset not possible", severity="warning")
            return
        from tui.widgets.confirm import ConfirmDialog, ConfirmRequest

        head = f"{one_line(preview.head.kind)} (run {one_line(preview.head.run_id)})" if preview.head else "none"
        text = (
            f"Agent session: {one_line(preview.agent_id)} {one_line(preview.agent_session_id)}\n"
            f"Head now: {head}\n"
            f"Head after: reset\n\n"
            f"{one_line(preview.summary)}\n\n"
            "No record is deleted; the checkpoint's lines stay until a later capture replaces them."
        )
        request = ConfirmRequest(
            title="Publish a reset", preview=text, affected=1, noun="checkpoint head", confirm_label="Publish reset",
            opened_by="R",
        )
        key = message.key

        def done(confirmed: bool | None) -> None:
            if confirmed and self.sd is not None:
                self._publish_reset(self.sd, key)
            else:
                self.busy.discard("reset")

        self.app.push_screen(ConfirmDialog(request), done)

    @work(thread=True, exclusive=True, group="checkpoints-reset", exit_on_error=False, description="Publish a reset")
    def _publish_reset(self, sd: SessionDir, key: tuple[str, str]) -> None:
        try:
            from store.agents.agentstate import publish_reset

            head = publish_reset(sd, key[0], key[1])
        except Exception as exc:  # noqa: BLE001 - ReadOnlyStore / StaleFence / a bug: one line
            self.post_message(ResetPublished(key, None, describe_error(exc)))
            return
        self.post_message(ResetPublished(key, head))

    @on(ResetPublished)
    def _reset_published(self, message: ResetPublished) -> None:
        self.busy.discard("reset")
        if message.head is None:
            notify(self, message.error, title="Reset refused", severity="error")
            return
        self.results.pop(message.key, None)
        self.checkpoint_list.set_proof(message.key, None)
        notify(self, f"{message.key[0]} {message.key[1][:13]}: the head is now a reset; the next capture stores "
                    "its files afresh.", title="Reset published")
        self._load()

    # --- other actions ----------------------------------------------------------------------------------------

    def action_refresh(self) -> None:
        self._load()

    def action_export_repaired(self) -> None:
        info = self.checkpoint_list.selected
        if info is None or info.state is None:
            notify(self, "The selected checkpoint has no captured transcript to copy.", severity="warning", timeout=3)
            return
        source = Path(info.source_root) / info.state.transcript_path
        self._write_repaired_copy(source, repaired_copy_path(source, Path.home()))

    @work(thread=True, exclusive=True, group="checkpoints-export", exit_on_error=False,
          description="Write a repaired copy")
    def _write_repaired_copy(self, source: Path, out: Path) -> None:
        from store.agents.capture import export_repaired_copy
        from store.errors import StoreError

        try:
            result = export_repaired_copy(source, out)
        except (StoreError, OSError) as exc:
            self.post_message(RepairedCopyWritten(describe_error(exc), error=True))
            return
        closed = len(result.closed)
        self.post_message(RepairedCopyWritten(
            f"Wrote {tildify(result.out_path)}: {closed} interrupted call{'s' if closed != 1 else ''} closed "
            f"({result.lines_in} lines in, {result.lines_out} out); {tildify(str(source))} is unchanged.",
            error=False))

    @on(RepairedCopyWritten)
    def _repaired_copy_written(self, message: RepairedCopyWritten) -> None:
        notify(self, message.text, title="Repaired copy", severity="error" if message.error else "information")

    @on(RowList.Selected, "#checkpoints")
    def _open(self, message: RowList.Selected) -> None:
        if self.sd is None:
            return
        info: CheckpointInfo = message.row
        if info.head is None or info.head.kind != "checkpoint" or info.state is None:
            why = "its head is a reset" if info.head is not None and info.head.kind == "reset" else (
                one_line(info.head_problem) or "nothing is published")
            notify(self, f"There is no checkpoint to read: {why}.", title="Cannot open", severity="warning")
            return
        from tui.screens.native_transcript import NativeRef, NativeTranscriptScreen

        self.app.push_screen(NativeTranscriptScreen(self.sd, NativeRef(info.agent_id, info.agent_session_id)))


__all__ = [
    "CheckpointsScreen",
    "details_renderable",
    "proof_from",
]
