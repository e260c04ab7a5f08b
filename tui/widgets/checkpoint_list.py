"""The checkpoint list: one line per captured agent session, a :class:`~tui.widgets.row_list.RowList`.

The rows are :class:`~store.agents.checkpoint_read.CheckpointListing` values (a checkpoint with the host that
last captured it) read by keyset a page at a time (:class:`CheckpointSource` over
:func:`store.agents.checkpoint_read.checkpoint_page`, one query per page, both ways: ``G`` reads the last page
directly), so the list holds a few pages however many checkpoints there are. The HOST column drops first when
the terminal is narrow (:func:`host_column`, shared with the captured-session list).
The proof column shows what the last ``v`` found for the row (:class:`Proof`), or "not verified yet"; the proofs
live on the list (:attr:`CheckpointList.proofs`), keyed by the row's ``(agent id, agent session id)``, so they
survive every re-read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tui import actions
from tui.formatting import one_line, shown_path
from tui.widgets.keyset_source import PageAsk, StoredKey, StoredKeySource
from tui.widgets.row_list import Column, Key, RowList

if TYPE_CHECKING:
    from store.agents.agentstate import CheckpointInfo
    from store.agents.checkpoint_read import CheckpointKey, CheckpointListing, CheckpointPage
    from store.mothx.sessiondir import SessionDir


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


class CheckpointSource(StoredKeySource["CheckpointListing"]):
    """The checkpoints (of one agent, or of all) in list order (agent id, agent session id), read by keyset:
    every call is ONE :func:`~store.agents.checkpoint_read.checkpoint_page` query (``G``: its ``last`` page).
    ``total`` is the count the caller read (the agent pane's grouped count), or None when unknown. A row's key
    is its stored ``(agent_id, agent_session_id)`` as the page names it (:class:`StoredKeySource`)."""

    KEY_NAME = "checkpoint"

    def __init__(self, sd: SessionDir, agent_id: str | None = None, *, total: int | None = None,
                 page_rows: int = 100, remember: int = 20_000) -> None:
        super().__init__(remember=remember)
        self.sd = sd
        self.agent_id = agent_id or None
        self._total = total
        self.page_rows = page_rows

    def ident(self, row: CheckpointListing) -> Key:
        return row_key(row)

    def read(self, ask: PageAsk) -> tuple[Sequence[CheckpointListing], Sequence[StoredKey], bool]:
        from store.agents import checkpoint_read

        page = checkpoint_read.checkpoint_page(self.sd, self.agent_id, after=ask.after, before=ask.before,
                                               last=ask.last, limit=ask.limit)
        return page.rows, page.keys, page.more

    def total(self) -> int | None:
        return self._total

    def pages(self, limit: int | None = None) -> Iterator[CheckpointPage]:
        """Every page of the listed checkpoints, from the first (one query each; for a worker that must see
        every listed row, e.g. "verify all", without holding them all)."""
        from store.agents import checkpoint_read

        after: CheckpointKey | None = None
        while True:
            page = checkpoint_read.checkpoint_page(self.sd, self.agent_id, after=after,
                                                   limit=limit or self.page_rows)
            yield page
            if not page.more or page.last_key is None:
                return
            after = page.last_key


HOST_WIDTH = 14
"""The HOST column's width: it takes no share of a wide terminal's extra width (a longer name is cut at its end)."""
HOST_PRIORITY = 9
"""The HOST column drops first when a list is narrow (a higher priority value than every other column's)."""


def host_column() -> Column[Any]:
    """The HOST column of a list of captured sessions: the host that last captured the row's session, as
    stored (a ``str`` cell: the list shows it through the safe-text boundary), "–" when none is recorded."""
    return Column("host", "HOST", lambda r: r.host or "–", min_width=HOST_WIDTH, priority=HOST_PRIORITY,
                  style=lambda r: None if r.host else "dim")


class CheckpointList(RowList["CheckpointListing"]):
    """The checkpoints of the chosen agent(s), one line each with the host that last captured it; ``enter`` on
    the highlighted row posts a ``RowList.Selected`` message."""

    ACTION_SCOPE: ClassVar[str] = "checkpoint-list"
    BINDINGS: ClassVar = actions.bindings(ACTION_SCOPE)
    HELP_TITLE: ClassVar[str] = "Checkpoint list"

    def __init__(self, *, id: str | None = None) -> None:
        self.proofs: dict[tuple[str, str], Proof] = {}
        super().__init__(id=id, empty_text="No checkpoints.", loading_text="Reading checkpoints…")

    def make_columns(self) -> list[Column[CheckpointListing]]:
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
            host_column(),
        ]

    # --- data -------------------------------------------------------------------------------------------------

    def show_checkpoints(self, sd: SessionDir, agent_id: str | None, *, total: int | None,
                         keep_cursor: bool) -> None:
        """Page the checkpoints of ``agent_id`` (None: every agent) from the store; ``keep_cursor``: a re-read of
        the same list keeps the cursor on the same agent session when it is still listed."""
        self.set_source(CheckpointSource(sd, agent_id, total=total, page_rows=self.page_size),
                        keep_cursor=keep_cursor)

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


__all__ = ["NOT_VERIFIED", "CheckpointList", "CheckpointSource", "Proof", "head_label", "host_column", "row_key"]
