"""The in-memory model the demo is generated into (its rows as dataclasses), its fixed clock and value helpers.

:class:`store.demo.builder.DemoBuilder` appends to it, :mod:`store.demo.story` says what happens and
:mod:`store.demo.build` writes it to SQLite. The builder follows the reference's rules as it goes: entries chain their ``parentId`` to the session's leaf, a turn opens
a run and closes both together, every lease acquisition is recorded so the final lease row carries the right
epoch, forks copy and remap entries as reference section 14 describes, and delivery intents get the status
their operations aggregate to (reference 13.3).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import re
import time
from dataclasses import dataclass, field

DEMO_NOW = "2026-11-20T12:00:00Z"
DEMO_NOW_UNIX = calendar.timegm(time.strptime(DEMO_NOW, "%Y-%m-%dT%H:%M:%SZ"))
DEMO_VERSION = 1
DEMO_MARKER = "sessionscope-demo.json"
DEMO_SEED = 20261120
LIVE_LEASE_EXPIRES_AT = 4102444800  # 2100-01-01: the demo's live lease stays valid whenever it is opened
KB_HARBOR = "harbor-docs"
KB_ATLAS = "atlas-notes"

NOW_MS = DEMO_NOW_UNIX * 1000
SEC = 1000
MIN = 60 * SEC
HOUR = 60 * MIN
DAY = 24 * HOUR

MODELS: dict[str, tuple[str, str, int, tuple[float, float, float, float]]] = {
    # key: (provider, model id, context window, $ per million tokens: input, output, cache read, cache write)
    "sonnet": ("anthropic", "claude-sonnet-4-5", 200_000, (3.0, 15.0, 0.3, 3.75)),
    "codex": ("openai", "gpt-5.1-codex", 272_000, (1.25, 10.0, 0.125, 0.0)),
    "deepseek": ("deepseek", "deepseek-chat", 128_000, (0.27, 1.1, 0.07, 0.0)),
}
PROTOCOLS = {"anthropic": "anthropic-messages", "openai": "openai-responses", "deepseek": "openai-completions"}


def rfc3339(ms: int) -> str:
    """RFC 3339 in Go's RFC3339Nano layout: trailing zeros of the fraction dropped, ``Z`` zone."""
    sec, frac = divmod(ms, 1000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    if frac:
        text += "." + f"{frac:03d}".rstrip("0")
    return text + "Z"


def at(month: int, day: int, hour: int, minute: int, second: int = 0) -> int:
    return calendar.timegm((2026, month, day, hour, minute, second, 0, 0, 0)) * 1000


def dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tokens(text: str) -> int:
    return len(text) // 3 + 1


def cjk_bigrams(text: str) -> str:
    """The FTS text of reference 15.3: runs of CJK characters become overlapping bigrams, space separated."""

    def split(match: re.Match[str]) -> str:
        run = match.group(0)
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "

    return CJK_RUN.sub(split, text)


CJK_RUN = re.compile("[\u4e00-\u9fff]+")


# ---------------------------------------------------------------------------------------------------------------
# the in-memory model of the demo
# ---------------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class DemoEntry:
    session: DemoSession
    id: str
    type: str
    parent_id: str | None
    ts: int
    fields: dict[str, object]
    wtime: int  # when the row was written (orders the global seq)
    order: int
    seq: int = 0


@dataclass(slots=True)
class DemoRun:
    id: str
    session: DemoSession
    intent_id: str
    attempt: int
    retry_of: str
    started: int
    model: str
    source: str
    status: str = "running"
    updated: int = 0
    finished: int | None = None
    error: str = ""
    error_info: dict[str, object] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    context: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class DemoTurn:
    id: str
    session: DemoSession
    intent_id: str
    run_id: str
    start: DemoEntry
    started: int
    status: str = "open"
    end: DemoEntry | None = None
    ended: int | None = None


@dataclass(slots=True)
class DemoLease:
    owner: tuple[str, int]
    purpose: str
    run_id: str
    acquired: int  # ms
    heartbeat: int
    expires: int
    state: str


@dataclass
class DemoSession:
    id: str
    cwd: str
    created: int
    model_key: str
    channel_type: str = "local"
    channel_id: str = ""
    parent: DemoSession | None = None
    fork_kind: str = ""
    boundary: DemoEntry | None = None
    seed_length: int = 0
    source: str = "cli"
    entries: list[DemoEntry] = field(default_factory=list)
    leaf: str | None = None
    title: str = ""
    ctx: int = 0
    new_tokens: int = 0
    turns: list[DemoTurn] = field(default_factory=list)
    runs: list[DemoRun] = field(default_factory=list)
    leases: list[DemoLease] = field(default_factory=list)
    project: str | None = None
    pinned: bool = False
    legacy: bool = False


@dataclass(frozen=True)
class DeliveryOp:
    kind: str
    key: str
    status: str
    failure: str = ""
    attempts: int = 1
    depends: int | None = None  # index of an earlier operation of the same intent
    artifact: str | None = None
    next_attempt_ms: int | None = None
    retry_window_ms: int | None = None
    delay_ms: int = 1200


class Subst:
    """Fills ``{file}``-style placeholders of follow-up scripts; leaves every other brace alone."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def __call__(self, text: str) -> str:
        for key, value in self.values.items():
            text = text.replace("{" + key + "}", value)
        return text


def aggregate_intent_status(statuses: list[str]) -> str:
    """Reference 13.3: an intent's status from its operations' statuses."""
    success = {"uploaded", "delivered", "unsupported"}
    resolved = success | {"failed", "uncertain"}
    if all(st in success for st in statuses):
        return "delivered"
    if all(st in resolved for st in statuses):
        if "failed" in statuses:
            return "failed"
        if "uncertain" in statuses:
            return "uncertain"
    return "pending"
