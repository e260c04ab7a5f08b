"""What the Checkpoints screen shows and hears besides its list: the typed messages its workers post, the
details pane of the selected checkpoint (:func:`details_renderable`: files, records, digests, the last proof)
and the small pure helpers (:func:`proof_from`, :func:`repaired_copy_path`, :func:`short_digest`).

The screen is :mod:`tui.screens.checkpoints`; nothing here reads the store or touches a widget.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.message import Message

from tui.formatting import one_line, plural, shown_path, utc_minutes
from tui.safe import data_line
from tui.widgets.checkpoint_list import NOT_VERIFIED, Proof

if TYPE_CHECKING:
    from store.agents.agentstate import CheckpointInfo, PublicationHead, ResetPreview
    from store.agents.capture import VerifyResult


ALL_AGENTS = ""
AGENT_TITLES = {"claude-code": "Claude Code", "codex": "Codex"}
FILES_SHOWN = 200
"""Files listed in the details pane for one session (a checkpoint may hold up to 1,024); the rest are counted."""
DIGEST_CHARS = 16


# --- messages ---------------------------------------------------------------------------------------------------


class CheckpointsLoaded(Message):
    """The agent pane's counts: how many checkpoints each agent has (one grouped count query)."""

    def __init__(self, generation: int, counts: dict[str, int]) -> None:
        super().__init__()
        self.generation = generation
        self.counts = counts


class CheckpointsFailed(Message):
    def __init__(self, generation: int, error: str) -> None:
        super().__init__()
        self.generation = generation
        self.error = error


class ProofChecked(Message):
    """One checkpoint was verified (``result``) or could not be (``error``)."""

    def __init__(self, key: tuple[str, str], result: VerifyResult | None, error: str = "", *, quiet: bool = False) -> None:
        super().__init__()
        self.key = key
        self.result = result
        self.error = error
        self.quiet = quiet  # part of "verify all": one notification at the end instead


class VerifyQueued(Message):
    """A page of the checkpoints "verify all" is about to verify (they show "verifying…")."""

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys


class VerifyAllFinished(Message):
    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__()
        self.counts = counts


class ResetPreviewed(Message):
    def __init__(self, key: tuple[str, str], preview: ResetPreview | None, error: str = "") -> None:
        super().__init__()
        self.key = key
        self.preview = preview
        self.error = error


class ResetPublished(Message):
    def __init__(self, key: tuple[str, str], head: PublicationHead | None, error: str = "") -> None:
        super().__init__()
        self.key = key
        self.head = head
        self.error = error


class RepairedCopyWritten(Message):
    def __init__(self, text: str, error: bool) -> None:
        super().__init__()
        self.text = text
        self.error = error


def repaired_copy_path(transcript: Path, folder: Path) -> Path:
    """``<folder>/<sanitized name>.repaired.jsonl``, or with ``-1``, ``-2``… so an existing file is never replaced."""
    from store.agents.repair_copy import repaired_copy_name

    n = 0
    candidate = folder / repaired_copy_name(transcript, n)
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = folder / repaired_copy_name(transcript, n)
    return candidate


# --- the details pane -------------------------------------------------------------------------------------------


def short_digest(digest: str) -> str:
    return digest[:DIGEST_CHARS] + "…" if len(digest) > DIGEST_CHARS else digest


def details_renderable(info: CheckpointInfo | None, proof: Proof | None, result: VerifyResult | None) -> Group | Text:
    """The selected session: its files (records, digest, what the last verification found) and its facts.

    Every cell is a ``Text`` of safe text: a Rich table reads a str cell as markup, and a work dir such as
    ``/home/u/[archive]/repo`` must be drawn as it is."""
    if info is None:
        return Text("Select a checkpoint to see its files.", style="dim")
    state = info.state
    title = Text()
    title.append(f"{AGENT_TITLES.get(info.agent_id, one_line(info.agent_id))} ", style="bold")
    title.append(one_line(info.agent_session_id), style="bold")
    parts: list[Text | Table] = [title]
    on_disk = {f.path: f for f in result.files} if result is not None else {}
    if state is not None:
        table = Table(box=None, show_edge=False, pad_edge=False, expand=True, padding=(0, 1), header_style="bold")
        table.add_column("FILE", ratio=1, no_wrap=True, overflow="ellipsis")
        table.add_column("RECORDS", justify="right", no_wrap=True)
        table.add_column("DIGEST (SHA-256)", no_wrap=True)
        table.add_column("ON DISK NOW", no_wrap=True, max_width=44, overflow="ellipsis")
        for shape in state.files[:FILES_SHOWN]:
            check = on_disk.get(shape.path)
            if check is None:
                disk = Text(NOT_VERIFIED if proof is None or proof.status != "verifying" else "verifying…", style="dim")
            elif check.status == "verified":
                extra = check.disk_records - shape.records
                disk = Text(f"✓ {check.disk_records:,} records" + (f" (+{extra:,} new)" if extra > 0 else ""),
                            style="green")
            else:
                disk = Text(f"✗ {one_line(check.detail) or one_line(check.status)}", style="bold red")
            name = data_line(shape.path)
            if shape.path == state.transcript_path:
                name.append("  (transcript)", style="dim")
            table.add_row(name, Text(f"{shape.records:,}"), data_line(short_digest(shape.digest)), disk)
        if len(state.files) > FILES_SHOWN:
            table.add_row(Text(f"… {len(state.files) - FILES_SHOWN:,} more files", style="dim"), "", "", "")
        parts.append(table)
    facts = Table(box=None, show_header=False, show_edge=False, pad_edge=False, padding=(0, 1))
    facts.add_column(style="bold", no_wrap=True)
    facts.add_column(ratio=1, overflow="fold")
    if info.head is None:
        facts.add_row("head", Text("none: nothing is published for this session", style="red"))
    else:
        head = Text(one_line(info.head.kind), style="bold" if info.head.kind == "checkpoint" else "bold yellow")
        head.append(f" · run {one_line(info.head.run_id)}", style="dim")
        head.append(f" · {plural(info.versions, 'staged version')}", style="dim")
        if info.head.kind == "reset":
            head.append("  nothing is loadable until the next capture", style="yellow")
        facts.add_row("head", head)
    if info.head_problem:
        facts.add_row("problem", Text(one_line(info.head_problem), style="bold red"))
    if state is not None:
        facts.add_row("work dir", Text(shown_path(state.cwd)))
        facts.add_row("records", Text(f"{state.record_count:,} in {plural(state.file_count, 'file')}"))
    facts.add_row("source", Text(shown_path(info.source_root) or "–"))
    facts.add_row("captured", Text(utc_minutes(info.updated_at) + " UTC" if info.updated_at else "–"))
    if proof is None:
        facts.add_row("proof", Text(f"{NOT_VERIFIED}: press v to compare with the files on disk", style="dim"))
    else:
        style = "green" if proof.status == "verified" else ("dim" if proof.status == "verifying" else "bold red")
        text = Text(one_line(proof.label), style=style)
        if proof.detail:
            text.append(f"  {one_line(proof.detail)}", style="default")
        facts.add_row("proof", text)
    parts.append(facts)
    return Group(*parts)


def proof_from(result: VerifyResult) -> Proof:
    if result.status == "verified":
        matched = sum(f.stored_records for f in result.files)
        detail = f"{plural(len(result.files), 'file')}, {matched:,} records match the disk"
        if result.new_records:
            detail += f"; {result.new_records:,} more on disk, not captured yet"
        return Proof("verified", detail + ".", result.new_records)
    return Proof(result.status, " ".join(result.details) or result.status)




__all__ = [
    "AGENT_TITLES", "ALL_AGENTS", "DIGEST_CHARS", "FILES_SHOWN", "CheckpointsFailed", "CheckpointsLoaded", "ProofChecked", "RepairedCopyWritten",
    "ResetPreviewed", "ResetPublished", "VerifyAllFinished", "VerifyQueued", "details_renderable", "proof_from",
    "repaired_copy_path", "short_digest",
]
