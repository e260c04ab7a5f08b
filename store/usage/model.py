"""The values of a usage view: groups (:class:`UsageRow`), a view (:class:`UsageReport`) and the usage records
read from captured transcripts (:class:`CapturedUsage`). Frozen dataclasses; keys are raw data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Group = Literal["day", "session", "model", "cwd"]
Source = Literal["mothx", "captured", "all"]
GROUPS: tuple[Group, ...] = ("day", "session", "model", "cwd")
SOURCES: tuple[Source, ...] = ("all", "mothx", "captured")

TOKEN_CAP = 2**32 - 1
"""The largest token count one cell may hold to be believed (more is a damaged cell, counted as 0); it also keeps
``SUM`` far from a 64-bit overflow."""


@dataclass(frozen=True)
class UsageRow:
    """One group of a view (or the totals): the token sums of its requests.

    ``key``: the day (``YYYY-MM-DD``), session id, model or work dir (``""``: unknown — a deleted session, a
    time that does not parse). ``agent``: for a session row, ``""`` for a mothx session, else the agent id of
    the captured session (``claude-code``, ``codex``). ``cwd``: a session row's work dir when known.
    ``cost``: USD of the priced part, None when no request of the group has a price; ``unpriced`` counts the
    tokens of requests whose model has none (with a table configured). ``damaged``: cells read as 0."""

    key: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    total_tokens: int = 0
    first_at: str = ""
    last_at: str = ""
    cost: float | None = None
    unpriced: int = 0
    damaged: int = 0
    agent: str = ""
    cwd: str = ""
    session_exists: bool = True
    sources: tuple[str, ...] = ()

    @property
    def ident(self) -> tuple[str, str]:
        return (self.agent, self.key)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "key": self.key, "requests": self.requests, "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens, "cacheWriteTokens": self.cache_write_tokens,
            "cacheReadTokens": self.cache_read_tokens, "totalTokens": self.total_tokens,
            "firstAt": self.first_at, "lastAt": self.last_at,
            "cost": None if self.cost is None else round(self.cost, 6), "unpricedTokens": self.unpriced,
            "damagedCells": self.damaged, "sources": list(self.sources),
        }
        if self.agent or self.cwd or not self.session_exists:
            out.update({"agent": self.agent, "cwd": self.cwd, "sessionExists": self.session_exists})
        return out


@dataclass(frozen=True)
class UsageReport:
    """A view: its rows (days oldest first; every other view by total tokens, largest first), the totals, and
    one line per problem met (damaged cells, a checkpoint that did not verify, a price entry)."""

    by: Group
    source: Source
    since: str
    rows: tuple[UsageRow, ...]
    totals: UsageRow
    priced: bool
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"by": self.by, "source": self.source, "since": self.since or None, "priced": self.priced,
                "rows": [r.to_json() for r in self.rows], "totals": self.totals.to_json(),
                "problems": list(self.problems)}


@dataclass(frozen=True)
class CapturedUsage:
    """One model response's usage in a captured transcript (timestamps normalised to UTC RFC 3339)."""

    agent: str
    session_id: str
    timestamp: str
    model: str
    cwd: str
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    damaged: int = 0


@dataclass(frozen=True)
class CapturedRecords:
    """Every usage record of every published checkpoint, and one line per checkpoint that could not be read."""

    records: tuple[CapturedUsage, ...] = ()
    problems: tuple[str, ...] = ()
