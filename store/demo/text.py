"""The prose of the demo session directory: conversation scripts about three small projects.

The prose itself is data, in ``store/demo/data/prose.json``; this module gives it its types. Every script is one
conversation turn: the user's request, the assistant's private reasoning, the tool calls it made with their
results, and its closing answer. In the JSON a script is ``{"script": {...}}`` and a call ``{"call": {...}}``;
every other list is a tuple here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, cast

ATLAS = "/home/demo/src/atlas"
HARBOR = "/home/demo/src/harbor-api"
NOTES = "/home/demo/notes"


@dataclass(frozen=True)
class Call:
    """One tool call and its result. ``say`` is the assistant's text before the call."""

    tool: str
    args: dict[str, object]
    result: str
    error: bool = False
    say: str = ""
    parallel: bool = False  # issued in the same assistant message as the previous call


@dataclass(frozen=True)
class Script:
    """One conversation turn."""

    title: str
    user: str
    think: str
    calls: tuple[Call, ...]
    answer: str
    followups: tuple[str, ...] = field(default_factory=tuple)  # keys of FOLLOWUPS that fit after this turn


def read(path: str, text: str, **kw: object) -> Call:
    return Call("read_file", {"path": path}, text, **kw)  # type: ignore[arg-type]


def sh(command: str, text: str, **kw: object) -> Call:
    return Call("bash", {"command": command, "timeout": 120}, text, **kw)  # type: ignore[arg-type]


def edit(path: str, old: str, new: str, text: str = "", **kw: object) -> Call:
    added = new.count("\n") + 1
    removed = old.count("\n") + 1
    result = text or f"Applied 1 edit to {path} (+{added} -{removed})."
    return Call("edit", {"path": path, "old_string": old, "new_string": new}, result, **kw)  # type: ignore[arg-type]


def grep(pattern: str, path: str, text: str, **kw: object) -> Call:
    return Call("grep", {"pattern": pattern, "path": path}, text, **kw)  # type: ignore[arg-type]


def write(path: str, content: str, **kw: object) -> Call:
    lines = content.count("\n") + 1
    return Call("write_file", {"path": path, "content": content}, f"Wrote {path} ({lines} lines).", **kw)  # type: ignore[arg-type]


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"script"}:
            s = value["script"]
            return Script(s["title"], s["user"], s["think"], tuple(_decode(c) for c in s["calls"]), s["answer"],
                          tuple(s.get("followups", ())))
        if set(value) == {"call"}:
            c = value["call"]
            return Call(c["tool"], dict(c["args"]), c["result"], c.get("error", False), c.get("say", ""),
                        c.get("parallel", False))
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


_PROSE: dict[str, Any] = {
    name: _decode(value)
    for name, value in json.loads(resources.files("store.demo").joinpath("data", "prose.json").read_text("utf-8")).items()
}

ATLAS_SCRIPTS = cast("tuple[Script, ...]", _PROSE["ATLAS_SCRIPTS"])
HARBOR_SCRIPTS = cast("tuple[Script, ...]", _PROSE["HARBOR_SCRIPTS"])
NOTES_SCRIPTS = cast("tuple[Script, ...]", _PROSE["NOTES_SCRIPTS"])
FOLLOWUPS = cast("dict[str, tuple[Script, ...]]", _PROSE["FOLLOWUPS"])
SCRIPT_FILES = cast("dict[str, tuple[str, str, str]]", _PROSE["SCRIPT_FILES"])
"""What the follow-up placeholders become, per first script (by title): (file, test file, commit subject)."""
RETITLES = cast("dict[str, str]", _PROSE["RETITLES"])
"""Titles the user typed later (session_info source manual), by original title."""
CHANNEL_SCRIPTS = cast("dict[str, tuple[Script, ...]]", _PROSE["CHANNEL_SCRIPTS"])
ORPHAN_TURN = cast(Script, _PROSE["ORPHAN_TURN"])
LIVE_TURN = cast(Script, _PROSE["LIVE_TURN"])
STUCK_TURN = cast(Script, _PROSE["STUCK_TURN"])
LONG_TITLE = cast(str, _PROSE["LONG_TITLE"])
LONG_RETITLE = cast(str, _PROSE["LONG_RETITLE"])
LONG_PACKAGES = cast("tuple[tuple[str, str, tuple[str, ...]], ...]", _PROSE["LONG_PACKAGES"])
LONG_USER_PROMPTS = cast("dict[str, tuple[str, ...]]", _PROSE["LONG_USER_PROMPTS"])
LONG_ANSWERS = cast("dict[str, tuple[str, ...]]", _PROSE["LONG_ANSWERS"])
KB_DOCS = cast("tuple[tuple[str, str, str], ...]", _PROSE["KB_DOCS"])
KB_NODES = cast("tuple[tuple[str, str, str, tuple[tuple[str, int], ...]], ...]", _PROSE["KB_NODES"])
"""Knowledge graph: (kind, label, summary, ((doc path, line), ...))."""
KB_EDGES = cast("tuple[tuple[str, str, str, float, str, int], ...]", _PROSE["KB_EDGES"])
"""(from label, relation, to label, confidence, doc path, line)."""
REFUSED_TURN = cast(Script, _PROSE["REFUSED_TURN"])
REFUSED_OVERRIDE_TEXT = cast(str, _PROSE["REFUSED_OVERRIDE_TEXT"])
RACE_LOG_HEAD = cast(str, _PROSE["RACE_LOG_HEAD"])
RACE_LOG_FRAME = cast(str, _PROSE["RACE_LOG_FRAME"])
PASTE_TURN = cast(Script, _PROSE["PASTE_TURN"])
PASTE_OVERRIDE_TRIMMED = cast(str, _PROSE["PASTE_OVERRIDE_TRIMMED"])
PASTE_OVERRIDE_REDACTED = cast(str, _PROSE["PASTE_OVERRIDE_REDACTED"])
CANCELLED_TURN = cast(Script, _PROSE["CANCELLED_TURN"])
RERUN_TURN = cast(Script, _PROSE["RERUN_TURN"])
INTERRUPTED_TURN = cast(Script, _PROSE["INTERRUPTED_TURN"])
QA_SCRIPTS = cast("tuple[tuple[str, Script], ...]", _PROSE["QA_SCRIPTS"])
FORK_SCRIPTS = cast("tuple[Script, ...]", _PROSE["FORK_SCRIPTS"])
