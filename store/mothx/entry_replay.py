"""Replay (reference 7.4/7.5): the pure, exact walk over a session's loaded entries, and what it finds.

:func:`replay_details` is the one definition; the paged reads of :mod:`store.mothx.entry_reads` decide every
compaction the same way. Decisions where the reference is silent are listed in :mod:`store.mothx.entries`.
Message texts in the results are raw data (the UI and the exports apply the safe-text boundary).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from store.mothx.entry_model import NOT_LOADED_TYPES, EntryRow, JsonObject, Message, _int, _json_text, _str
from store.mothx.jsonvalue import is_json_str

__all__ = [
    "ReplayMessage", "CompactionInfo", "ReplayPlan", "ReplayDetails", "summary_message", "replay_details",
    "replay_state",
]

@dataclass(frozen=True)
class ReplayMessage:
    """One message of the sequence-numbered replay (reference 7.5)."""

    seq: int
    entry_id: str  # the compaction entry's id/seq for a summary
    kind: str  # "message" | "compaction_summary" ("content_override" inside ReplayPlan.overrides)
    message: Message
    overridden: bool = False
    original: Message | None = None
    override_reason: str = ""


@dataclass(frozen=True)
class CompactionInfo:
    seq: int
    entry_id: str
    summary: str
    first_kept_entry_id: str
    tokens_before: int | None
    summary_version: int | None
    applied: bool  # False when firstKeptEntryId was not found (skipped)
    summarized_count: int  # messages this compaction removed from the state (a previous summary included)


@dataclass(frozen=True)
class ReplayPlan:
    """Cheap facts that let a screen page through the replay without reading everything."""

    session_id: str
    window_start_seq: int  # replayed `message` rows have seq >= this (0 = from the start)
    summary: ReplayMessage | None
    compactions: tuple[CompactionInfo, ...]
    overrides: dict[str, ReplayMessage]  # target entry id -> the override (latest wins)
    message_rows: int  # `message` rows of the replay window (the summary not counted; see counts_verified)
    corrupt_rows: int  # rows whose JSON does not parse (whole session; see counts_verified)
    total_rows: int  # all entry rows of the session
    usage_cleared_before_seq: int = 0  # kept messages below this seq had their usage cleared by a compaction
    keyset: bool = True  # False: rows disagree with their JSON, so pages are cut from a full replay
    mismatched_rows: int = 0  # rows whose JSON id/type differ from the row's columns (verified plans)
    counts_verified: bool = True  # False: message_rows may include unparseable rows, corrupt_rows is a floor


@dataclass(frozen=True)
class ReplayDetails:
    """Everything one full replay finds (see :func:`replay_details`)."""

    messages: list[ReplayMessage]
    compactions: list[CompactionInfo]
    overrides: dict[str, ReplayMessage]
    corrupt_rows: int
    total_rows: int
    window_start_seq: int
    usage_cleared_before_seq: int
    summary: ReplayMessage | None
    leaf_id: str  # id of the last loaded entry ("" when none)
    title: str  # the newest session_info name ("" when none)


def _override_from(seq: int, entry_id: str, p: JsonObject) -> ReplayMessage | None:
    target, msg = p.get("targetEntryId"), p.get("message")
    if not is_json_str(target) or not isinstance(msg, dict):
        return None
    reason = _str(p.get("reason")) or (_json_text(p.get("code")) if p.get("code") is not None else "")
    return ReplayMessage(seq=seq, entry_id=entry_id, kind="content_override", message=Message.from_json(msg),
                         override_reason=reason)


def _first_kept(p: JsonObject) -> str | None:
    """``""`` for missing/null/empty, the id when a string, None (never found) for other values."""
    value = p.get("firstKeptEntryId")
    if value is None:
        return ""
    return value if is_json_str(value) else None


def summary_message(seq: int, entry_id: str, summary: str) -> ReplayMessage:
    """The system-injected user message a compaction replays as."""
    raw = {"role": "user", "content": summary, "systemInjected": True}
    return ReplayMessage(seq=seq, entry_id=entry_id, kind="compaction_summary", message=Message.from_json(raw))


def _message_for(seq: int, entry_id: str, p: JsonObject, overrides: dict[str, ReplayMessage],
                 clear_before: int) -> ReplayMessage:
    original = Message.from_json(p.get("message"))
    ov = overrides.get(entry_id)
    if ov is None:
        rm = ReplayMessage(seq=seq, entry_id=entry_id, kind="message", message=original)
    else:
        rm = ReplayMessage(seq=seq, entry_id=entry_id, kind="message", message=ov.message, overridden=True,
                           original=original, override_reason=ov.override_reason)
    return _clear_usage(rm) if seq < clear_before else rm


def _clear_usage(rm: ReplayMessage) -> ReplayMessage:
    m = rm.message
    if m.usage_total is None and not (m.raw and "usage" in m.raw):
        return rm
    raw = {k: v for k, v in m.raw.items() if k != "usage"} if m.raw is not None else None
    return replace(rm, message=replace(m, usage_total=None, raw=raw))


def _compaction_info(row: EntryRow, applied: bool, removed: int) -> CompactionInfo:
    p = row.parsed or {}
    fk = p.get("firstKeptEntryId")
    return CompactionInfo(
        seq=row.seq, entry_id=row.entry_id, summary=_str(p.get("summary")),
        first_kept_entry_id=fk if is_json_str(fk) else ("" if fk is None else _json_text(fk)),
        tokens_before=_int(p.get("tokensBefore")), summary_version=_int(p.get("summaryVersion")),
        applied=applied, summarized_count=removed,
    )


def replay_details(rows: Iterable[EntryRow]) -> ReplayDetails:
    """Reference 7.4/7.5 over ``rows`` (any order; sorted by seq here), with what the walk found.

    The walk keeps the *plain* state's entry-id list, in which a summary's id is ``""``, and looks
    ``firstKeptEntryId`` up there; the returned messages are the sequence-numbered variant (a summary carries
    its compaction's id and seq). Both variants therefore make the same decisions: a compaction naming an
    earlier compaction's id as ``firstKeptEntryId`` is not found, and is skipped.
    """
    ordered = sorted(rows, key=lambda r: r.seq)
    loaded: list[EntryRow] = []
    corrupt = 0
    title = ""
    for row in ordered:
        if row.parsed is None:
            corrupt += 1
        elif row.entry_type not in NOT_LOADED_TYPES:
            loaded.append(row)
    overrides: dict[str, ReplayMessage] = {}
    for row in loaded:
        if row.entry_type == "content_override":
            ov = _override_from(row.seq, row.entry_id, row.parsed or {})
            if ov is not None:
                overrides[_str((row.parsed or {}).get("targetEntryId"))] = ov
    state: list[ReplayMessage] = []
    ids: list[str] = []
    compactions: list[CompactionInfo] = []
    window_start = 0
    clear_before = 0
    summary: ReplayMessage | None = None
    for row in loaded:
        p = row.parsed or {}
        t = row.entry_type
        if t == "message":
            state.append(_message_for(row.seq, row.entry_id, p, overrides, 0))
            ids.append(row.entry_id)
        elif t == "compaction":
            fk = _first_kept(p)
            new_summary = summary_message(row.seq, row.entry_id, _str(p.get("summary")))
            if fk == "":
                compactions.append(_compaction_info(row, True, len(state)))
                state, ids = [new_summary], [""]
                window_start, summary = row.seq + 1, new_summary
                continue
            try:
                i = ids.index(fk) if fk is not None else -1
            except ValueError:
                i = -1
            if i < 0:
                compactions.append(_compaction_info(row, False, 0))
                continue
            compactions.append(_compaction_info(row, True, i))
            window_start = state[i].seq
            state = [new_summary] + [_clear_usage(m) for m in state[i:]]
            ids = [""] + ids[i:]
            clear_before, summary = row.seq, new_summary
        elif t == "session_info" and is_json_str(p.get("name")):
            title = p["name"]
    return ReplayDetails(
        messages=state, compactions=compactions, overrides=overrides, corrupt_rows=corrupt,
        total_rows=len(ordered), window_start_seq=window_start, usage_cleared_before_seq=clear_before,
        summary=summary, leaf_id=loaded[-1].entry_id if loaded else "", title=title,
    )


def replay_state(rows: Iterable[EntryRow]) -> list[ReplayMessage]:
    """The sequence-numbered replay of reference 7.5 (pure; see :func:`replay_details`)."""
    return replay_details(rows).messages
