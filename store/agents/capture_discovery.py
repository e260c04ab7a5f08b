"""Finding the Claude Code and Codex files of a capture root and grouping them into sessions.

* Claude Code (default root ``~/.claude/projects``): in each project folder, ``<session>.jsonl``,
  ``<session>/subagents/*.jsonl`` (new sub-agent layout) and ``agent-*.jsonl`` (old layout). Files are grouped
  by the ``sessionId`` of their first record that names one.
* Codex (default root ``~/.codex/sessions``): every ``rollout-*.jsonl`` below the root, keyed by the id of its
  ``session_meta`` record (or the id line of older rollouts).

A file that names no session, and a file or folder that cannot be read (permission denied, an I/O error), is
an :class:`UnkeyedFile` with the reason: it is reported, never skipped silently, and the rest is captured.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from store.agents.capture_model import (
    SessionSource,
    SourceFile,
    UnkeyedFile,
)
from store.agents.native import (
    AGENT_CLAUDE_CODE,
    AGENT_CODEX,
)

_TRIM = b" \t\r\n"


def default_claude_code_root() -> Path:
    return Path.home() / ".claude" / "projects"


def default_codex_root() -> Path:
    return Path.home() / ".codex" / "sessions"


# ---------------------------------------------------------------------------------------------- discovery


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _source(root: Path, path: Path) -> SourceFile | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return SourceFile(path, _rel(root, path), st.st_size)


def _first_records(path: Path, limit_bytes: int = 4 << 20) -> Iterator[dict[str, Any]]:
    """The JSON objects of a file's first lines (unreadable lines skipped), for keying."""
    try:
        with path.open("rb") as fh:
            read = 0
            for line in fh:
                read += len(line)
                text = line.strip(_TRIM)
                if text:
                    try:
                        obj = json.loads(text)
                    except (ValueError, UnicodeDecodeError, RecursionError):
                        obj = None
                    if isinstance(obj, dict):
                        yield obj
                if read >= limit_bytes:
                    return
    except OSError:
        return


def _claude_key(path: Path, size: int) -> tuple[str, str, str]:
    """(session id, cwd, reason when unkeyed) from a Claude Code file's records."""
    if size == 0:
        return "", "", "the file is empty"
    kinds: set[str] = set()
    for obj in _first_records(path):
        kinds.add(str(obj.get("type", "")))
        sid = obj.get("sessionId")
        if isinstance(sid, str) and sid.strip():
            cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else ""
            if not cwd:
                for later in _first_records(path, 1 << 20):
                    if isinstance(later.get("cwd"), str) and later["cwd"]:
                        cwd = later["cwd"]
                        break
            return sid, cwd, ""
    if kinds == {"summary"}:
        return "", "", "the file holds only summary records, and none names a session"
    if not kinds:
        return "", "", "no line of the file is readable JSON"
    return "", "", "no record of the file names a session"


def _codex_key(path: Path, size: int) -> tuple[str, str, str]:
    if size == 0:
        return "", "", "the file is empty"
    seen = False
    for obj in _first_records(path, 1 << 20):
        seen = True
        payload = obj.get("payload")
        if obj.get("type") == "session_meta" and isinstance(payload, dict):
            sid = payload.get("id")
            if isinstance(sid, str) and sid.strip():
                cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else ""
                return sid, cwd, ""
        if "type" not in obj and isinstance(obj.get("id"), str) and "timestamp" in obj:
            return obj["id"], "", ""
    if not seen:
        return "", "", "no line of the file is readable JSON"
    return "", "", "no session_meta record names the session"


def _group(
    agent: str, root: Path, files: list[SourceFile], keyer: Callable[[Path, int], tuple[str, str, str]]
) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    groups: dict[str, list[tuple[SourceFile, str]]] = {}
    unkeyed: list[UnkeyedFile] = []
    for f in files:
        sid, cwd, reason = keyer(f.path, f.size)
        if not sid:
            unkeyed.append(UnkeyedFile(f, reason))
            continue
        groups.setdefault(sid, []).append((f, cwd))
    sessions: list[SessionSource] = []
    for sid, members in groups.items():
        members.sort(key=lambda m: m[0].rel.encode("utf-8", "surrogatepass"))
        rels = [m[0].rel for m in members]
        transcript = _pick_transcript(agent, sid, rels)
        cwd = next((c for m, c in members if m.rel == transcript and c), "") or next((c for _, c in members if c), "")
        if not cwd:
            main = next(m for m, _ in members if m.rel == transcript)
            cwd = str(main.path.parent)
        sessions.append(SessionSource(agent, sid, root, tuple(m for m, _ in members), transcript, cwd))
    sessions.sort(key=lambda s: (s.transcript.encode("utf-8", "surrogatepass"), s.agent_session_id))
    unkeyed.sort(key=lambda u: u.file.rel)
    return sessions, unkeyed


def _pick_transcript(agent: str, sid: str, rels: list[str]) -> str:
    if agent == AGENT_CLAUDE_CODE:
        own = [r for r in rels if r.rsplit("/", 1)[-1] == f"{sid}.jsonl"]
        if own:
            return own[0]
        main = [r for r in rels if "/subagents/" not in f"/{r}" and not r.rsplit("/", 1)[-1].startswith("agent-")]
        if main:
            return main[0]
    return rels[0]


def claude_code_path_base(base: Path) -> Path:
    """The folder file paths are stored relative to: the projects folder, even when ``base`` is one project
    (a folder holding session files itself), so capturing a project alone or the whole tree keys the same."""
    if base.is_dir() and any(p.is_file() for p in base.glob("*.jsonl")):
        return base.parent
    return base


def codex_path_base(base: Path) -> Path:
    """The ``sessions`` folder above a ``YYYY``, ``YYYY/MM`` or ``YYYY/MM/DD`` folder (else ``base`` itself)."""
    two, four = re.compile(r"\d{2}"), re.compile(r"\d{4}")
    names = [base.name, base.parent.name, base.parent.parent.name]
    if two.fullmatch(names[0]) and two.fullmatch(names[1]) and four.fullmatch(names[2]):
        return base.parents[2]
    if two.fullmatch(names[0]) and four.fullmatch(names[1]):
        return base.parents[1]
    if four.fullmatch(names[0]):
        return base.parent
    return base


def discover_claude_code(root: str | os.PathLike[str] | None = None) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    base = Path(root).expanduser().absolute() if root is not None else default_claude_code_root()
    rel_base = claude_code_path_base(base)
    files: list[SourceFile] = []
    if base.is_dir():
        folders = [base] + sorted(p for p in base.iterdir() if p.is_dir())
        seen: set[Path] = set()
        for folder in folders:
            candidates = sorted(folder.glob("*.jsonl")) + sorted(folder.glob("*/subagents/*.jsonl"))
            for path in candidates:
                if path in seen or not path.is_file():
                    continue
                seen.add(path)
                src = _source(rel_base, path)
                if src is not None:
                    files.append(src)
    return _group(AGENT_CLAUDE_CODE, rel_base, files, _claude_key)


def discover_codex(root: str | os.PathLike[str] | None = None) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    base = Path(root).expanduser().absolute() if root is not None else default_codex_root()
    rel_base = codex_path_base(base)
    files: list[SourceFile] = []
    if base.is_dir():
        for path in sorted(base.rglob("rollout-*.jsonl")):
            if path.is_file():
                src = _source(rel_base, path)
                if src is not None:
                    files.append(src)
    return _group(AGENT_CODEX, rel_base, files, _codex_key)
