"""The usage records of captured Claude Code and Codex transcripts, read through the checkpoint store
(:func:`store.agents.checkpoint_read.load_from`, verified as it streams). Read-only.

* Claude Code: an ``assistant`` record's ``message.usage`` (``input_tokens``, ``output_tokens``,
  ``cache_creation_input_tokens``, ``cache_read_input_tokens``); the records of one message (one per content
  block, each repeating the usage) count once, with the last record's counts.
* Codex: an ``event_msg`` of type ``token_count``: its ``last_token_usage``, with the model and work dir of the
  latest ``turn_context``; a repeated event whose running total did not move counts once; Codex's
  ``input_tokens`` include the cached ones, given here as cache reads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from store import times
from store.mothx.jsonvalue import parse_object
from store.safetext import one_line
from store.usage.model import TOKEN_CAP, CapturedRecords, CapturedUsage

if TYPE_CHECKING:
    from store.agents.checkpoint_db import CheckpointStore
    from store.agents.checkpoint_model import CheckpointInfo, PersistedSessionState, RecordReader
    from store.mothx.sessiondir import SessionDir


class _Counter:
    def __init__(self) -> None:
        self.damaged = 0

    def tokens(self, obj: Mapping[str, object], name: str) -> int:
        value = obj.get(name)
        if value is None:
            return 0
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= TOKEN_CAP:
            return value
        self.damaged += 1
        return 0


def _utc(value: object) -> str:
    moment = times.parse_rfc3339(value)
    return times.format_rfc3339(moment) if moment is not None else ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class _ClaudeUsage:
    """Claude Code: each ``assistant`` record's ``message.usage``; one message split over records counts once
    (its last record's usage, keyed by ``message.id`` and ``requestId``)."""

    def __init__(self, session_id: str, cwd: str) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.by_message: dict[tuple[str, str], CapturedUsage] = {}
        self.anonymous: list[CapturedUsage] = []

    def accept(self, obj: Mapping[str, object]) -> None:
        if obj.get("type") != "assistant":
            return
        msg = obj.get("message")
        if not isinstance(msg, Mapping):
            return
        usage = msg.get("usage")
        model = _text(msg.get("model"))
        if not isinstance(usage, Mapping) or model == "<synthetic>":
            return
        c = _Counter()
        rec = CapturedUsage(
            "claude-code", self.session_id, _utc(obj.get("timestamp")), model, _text(obj.get("cwd")) or self.cwd,
            c.tokens(usage, "input_tokens"), c.tokens(usage, "output_tokens"),
            c.tokens(usage, "cache_creation_input_tokens"), c.tokens(usage, "cache_read_input_tokens"), 0)
        rec = replace(rec, damaged=c.damaged)
        mid = _text(msg.get("id"))
        if mid:
            key = (mid, _text(obj.get("requestId")))
            first = self.by_message.get(key)
            # the first record's time (when the response began), the last record's counts
            self.by_message[key] = rec if first is None else replace(rec, timestamp=first.timestamp or rec.timestamp)
        else:
            self.anonymous.append(rec)

    def records(self) -> list[CapturedUsage]:
        return [*self.by_message.values(), *self.anonymous]


class _CodexUsage:
    """Codex: ``token_count`` events' ``last_token_usage`` with the model and work dir of the latest turn context;
    an event whose running total equals the previous one's is a repeat and counts once."""

    def __init__(self, session_id: str, cwd: str) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.model = ""
        self.last_total: object = None
        self.out: list[CapturedUsage] = []

    def accept(self, obj: Mapping[str, object]) -> None:
        payload = obj.get("payload")
        if not isinstance(payload, Mapping):
            return
        kind = obj.get("type")
        if kind in ("session_meta", "turn_context"):
            self.cwd = _text(payload.get("cwd")) or self.cwd
            self.model = _text(payload.get("model")) or self.model
            return
        if kind != "event_msg" or payload.get("type") != "token_count":
            return
        info = payload.get("info")
        if not isinstance(info, Mapping):
            return
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            return
        self.last_total = total
        last = info.get("last_token_usage")
        if not isinstance(last, Mapping):
            return
        c = _Counter()
        given = c.tokens(last, "input_tokens")
        cached = min(c.tokens(last, "cached_input_tokens"), given)
        self.out.append(CapturedUsage("codex", self.session_id, _utc(obj.get("timestamp")), self.model, self.cwd,
                                      given - cached, c.tokens(last, "output_tokens"), 0, cached, c.damaged))

    def records(self) -> list[CapturedUsage]:
        return self.out


_MARKERS = ('"usage"', '"token_count"', '"turn_context"', '"session_meta"')


def _checkpoint_usage(db: CheckpointStore, info: CheckpointInfo) -> list[CapturedUsage]:
    from store.agents.checkpoint_read import load_from

    cwd = info.state.cwd if info.state is not None else ""
    reader = _CodexUsage(info.agent_session_id, cwd) if info.agent_id == "codex" else \
        _ClaudeUsage(info.agent_session_id, cwd)

    def consume(state: PersistedSessionState, read: RecordReader) -> None:
        while (rec := read()) is not None:
            content = rec.content
            text = content if isinstance(content, str) else content.decode("utf-8", "replace")
            if not any(marker in text for marker in _MARKERS):
                continue
            obj, _ = parse_object(text)
            if obj is not None:
                reader.accept(obj)

    load_from(db, info.agent_id, info.agent_session_id, consume)
    return reader.records()


def captured_usage(sd: SessionDir) -> CapturedRecords:
    """The usage records of every published checkpoint of ``sd`` (read-only; a checkpoint that does not verify
    is skipped and named in ``problems``)."""
    from store.agents.checkpoint_db import has_tables, state_db
    from store.agents.checkpoint_read import read_checkpoint_page
    from store.errors import StoreError

    records: list[CapturedUsage] = []
    problems: list[str] = []
    try:
        with state_db(sd) as db:
            if db is None:
                return CapturedRecords()
            infos: list[CheckpointInfo] = []
            with db.read() as conn:
                if not has_tables(conn):
                    return CapturedRecords()
                after = None
                while True:
                    page = read_checkpoint_page(conn, after=after, limit=1000)
                    infos.extend(page.rows)
                    if not page.more or page.last_key is None:
                        break
                    after = page.last_key
            for info in infos:
                if info.state is None:
                    continue
                try:
                    records.extend(_checkpoint_usage(db, info))
                except (StoreError, sqlite3.Error) as exc:
                    problems.append(f"{one_line(info.agent_id)} {one_line(info.agent_session_id)}: {one_line(exc)}")
    except (StoreError, sqlite3.Error) as exc:
        problems.append(f"the checkpoint file cannot be read: {one_line(exc)}")
    return CapturedRecords(tuple(records), tuple(problems))
