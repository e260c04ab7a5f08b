"""The checkpoint list: one line per captured agent session, a :class:`~tui.widgets.row_list.RowList`.

The rows are :class:`~store.agents.agentstate.CheckpointInfo` values the screen read in a worker (the checkpoint file
holds one header per agent session, so the whole list is small next to a transcript) and hands over in a
:class:`~tui.widgets.row_list.ListSource`. The proof column shows what the last ``v`` found for the row
(:class:`Proof`), or "not verified yet"; the proofs live on the list (:attr:`CheckpointList.proofs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tui import actions
from tui.formatting import one_line, shown_path
from tui.widgets.row_list import Column, ListSource, RowList

if TYPE_CHECKING:
    from store.agents.agentstate import CheckpointInfo


NOT_VERIFIED = "not verified yet"
PROOF_WORDS = {
    "verified": "verified",
    "divergent": "divergent",
    "out_of_sync": "out of sync",
    "verifying": "verifying…",
    "failed": "error",
}


@dataclass(frozen=True)
class Proof:
    """What verifying a checkpoint against the files on disk found (``status`` as ``store.agents.capture.verify``
    reports it, or ``verifying`` / ``failed``); ``new_records`` are on disk but not captured yet."""

    status: str
    detail: str = ""
    new_records: int = 0

    @property
    def label(self) -> str:
        word = PROOF_WORDS.get(self.status, one_line(self.status))
        if self.status == "verified" and self.new_records:
            word += f" +{self.new_records:,} new"
        return word


def row_key(info: CheckpointInfo) -> tuple[str, str]:
    return (info.agent_id, info.agent_session_id)


def head_label(info: CheckpointInfo) -> str:
    if info.head is None:
        return "none"
    return one_line(info.head.kind) + (" (!)" if info.head_problem else "")


def head_style(info: CheckpointInfo) -> str | None:
    if info.head is None or info.head_problem:
        return "bad"
    if info.head.kind != "checkpoint":
        return "warn"
    return None


class CheckpointList(RowList["CheckpointInfo"]):
    """The checkpoints of the chosen agent(s); the cursor row is highlighted, ``enter`` posts
    :class:`RowList.Selected`."""

    ACTION_SCOPE: ClassVar[str] = "checkpoint-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Checkpoint list"

    def __init__(self, *, id: str | None = None) -> None:
        self.proofs: dict[tuple[str, str], Proof] = {}
        super().__init__(id=id, empty_text="No checkpoints.", loading_text="Reading checkpoints…")

    def make_columns(self) -> list[Column[CheckpointInfo]]:
        return [
            Column("agent", "AGENT", lambda i: i.agent_id, min_width=11, priority=5),
            Column("id", "SESSION ID", lambda i: i.agent_session_id, min_width=10, max_width=36, grow=2, priority=0),
            Column("cwd", "WORK DIR", lambda i: shown_path(i.state.cwd) if i.state else "", min_width=10, grow=3,
                   priority=2, overflow="start"),
            Column("files", "FILES", lambda i: f"{i.state.file_count:,}" if i.state else "–", min_width=5,
                   align="right", priority=6),
            Column("records", "RECORDS", lambda i: f"{i.state.record_count:,}" if i.state else "–", min_width=7,
                   align="right", priority=3),
            Column("head", "HEAD", head_label, min_width=10, priority=4, style=head_style),
            Column("proof", "PROOF", self.proof_label, min_width=16, priority=1, style=self._proof_style),
        ]

    # --- data -------------------------------------------------------------------------------------------------

    def set_rows(self, rows: Sequence[CheckpointInfo]) -> None:
        """Show ``rows``; the cursor stays on the same agent session when it is still listed."""
        self.set_source(ListSource(rows, key=row_key), keep_cursor=True)

    def set_proof(self, key: tuple[str, str], proof: Proof | None) -> None:
        if proof is None:
            self.proofs.pop(key, None)
        else:
            self.proofs[key] = proof
        self.refresh_cells()

    def proof(self, info: CheckpointInfo) -> Proof | None:
        return self.proofs.get(row_key(info))

    def proof_label(self, info: CheckpointInfo) -> str:
        proof = self.proof(info)
        return proof.label if proof else NOT_VERIFIED

    def _proof_style(self, info: CheckpointInfo) -> str:
        proof = self.proof(info)
        if proof is None or proof.status == "verifying":
            return "dim"
        return "good" if proof.status == "verified" else "bad"


__all__ = ["NOT_VERIFIED", "CheckpointList", "Proof", "head_label", "row_key"]
