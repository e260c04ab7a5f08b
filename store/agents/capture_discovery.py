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
from store.safetext import one_line

_TRIM = b" \t\r\n"


def default_claude_code_root() -> Path:
    """``~/.claude/projects``: where Claude Code keeps its project folders."""
    return Path.home() / ".claude" / "projects"


def default_codex_root() -> Path:
    """``~/.codex/sessions``: where Codex keeps its rollouts by day."""
    return Path.home() / ".codex" / "sessions"


# ---------------------------------------------------------------------------------------------- discovery


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix() if path != root else path.name or str(path)
    except ValueError:
        return str(path)


def os_reason(exc: OSError) -> str:
    """Why a file or folder cannot be read, as a short phrase: ``permission denied``, ``no such file``…"""
    if isinstance(exc, PermissionError):
        return "permission denied"
    return one_line(exc.strerror or exc).lower() or "an I/O error"


class _Walk:
    """The files found below a root and the files and folders that could not be read (reported, not skipped)."""

    def __init__(self, rel_base: Path) -> None:
        self.rel_base = rel_base
        self.files: list[SourceFile] = []
        self.problems: list[UnkeyedFile] = []
        self.seen: set[Path] = set()

    def problem(self, path: Path, reason: str) -> None:
        self.problems.append(UnkeyedFile(SourceFile(path, _rel(self.rel_base, path), 0), reason))

    def entries(self, folder: Path, *, missing_ok: bool = False) -> list[os.DirEntry[str]]:
        """The entries of ``folder`` by name; an unreadable folder is reported (a missing one only when asked)."""
        try:
            with os.scandir(folder) as it:
                return sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError) as exc:
            if not missing_ok:
                self.problem(folder, f"the folder cannot be read ({os_reason(exc)})")
            return []
        except OSError as exc:
            self.problem(folder, f"the folder cannot be read ({os_reason(exc)}); nothing in it was captured")
            return []

    def add(self, path: Path) -> None:
        if path in self.seen:
            return
        self.seen.add(path)
        try:
            st = path.stat()
        except OSError as exc:
            self.problem(path, f"the file cannot be read ({os_reason(exc)})")
            return
        self.files.append(SourceFile(path, _rel(self.rel_base, path), st.st_size))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return True  # let add() report why it cannot be read


class _Unreadable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _first_records(path: Path, limit_bytes: int = 4 << 20) -> Iterator[dict[str, Any]]:
    """The JSON objects of a file's first lines (unreadable lines skipped), for keying; :class:`_Unreadable`
    when the file itself cannot be read."""
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
    except OSError as exc:
        raise _Unreadable(f"the file cannot be read ({os_reason(exc)})") from exc


def storable(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate (or an undecodable file name byte) becomes a
    ``\\udXXX`` escape, so a work dir read from a record can always be stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _claude_key(path: Path, size: int) -> tuple[str, str, str]:
    """(session id, cwd, reason when unkeyed) from a Claude Code file's records."""
    if size == 0:
        return "", "", "the file is empty"
    kinds: set[str] = set()
    try:
        for obj in _first_records(path):
            kinds.add(_text(obj.get("type")))
            sid = _text(obj.get("sessionId"))
            if sid.strip():
                cwd = _text(obj.get("cwd"))
                if not cwd:
                    for later in _first_records(path, 1 << 20):
                        cwd = _text(later.get("cwd"))
                        if cwd:
                            break
                return sid, cwd, ""
    except _Unreadable as exc:
        return "", "", exc.reason
    if kinds == {"summary"}:
        return "", "", "the file holds only summary records, and none names a session"
    if not kinds:
        return "", "", "no line of the file is readable JSON"
    return "", "", "no record of the file names a session"


def _codex_key(path: Path, size: int) -> tuple[str, str, str]:
    if size == 0:
        return "", "", "the file is empty"
    seen = False
    try:
        for obj in _first_records(path, 1 << 20):
            seen = True
            payload = obj.get("payload")
            if obj.get("type") == "session_meta" and isinstance(payload, dict):
                sid = _text(payload.get("id"))
                if sid.strip():
                    return sid, _text(payload.get("cwd")), ""
            if "type" not in obj and _text(obj.get("id")) and "timestamp" in obj:
                return _text(obj.get("id")), "", ""
    except _Unreadable as exc:
        return "", "", exc.reason
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
        sessions.append(SessionSource(agent, sid, root, tuple(m for m, _ in members), transcript, storable(cwd)))
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
    """The Claude Code sessions below ``root`` (a projects folder or one project), and the files that cannot be
    keyed: files naming no session, and files and folders that cannot be read, each with its reason."""
    base = Path(root).expanduser().absolute() if root is not None else default_claude_code_root()
    walk = _Walk(claude_code_path_base(base))
    if base.is_dir() or base.exists():
        top = walk.entries(base)
        folders = [base] + [Path(e.path) for e in top if _is_dir(e)]
        for folder in folders:
            listing = top if folder == base else walk.entries(folder)
            for e in listing:
                if e.name.endswith(".jsonl") and _is_file(e):
                    walk.add(Path(e.path))
            for e in listing:
                if _is_dir(e):
                    for sub in walk.entries(Path(e.path) / "subagents", missing_ok=True):
                        if sub.name.endswith(".jsonl") and _is_file(sub):
                            walk.add(Path(sub.path))
    sessions, unkeyed = _group(AGENT_CLAUDE_CODE, walk.rel_base, walk.files, _claude_key)
    return sessions, sorted(unkeyed + walk.problems, key=lambda u: u.file.rel)


def discover_codex(root: str | os.PathLike[str] | None = None) -> tuple[list[SessionSource], list[UnkeyedFile]]:
    """Every ``rollout-*.jsonl`` below ``root`` grouped by session, and the files that cannot be keyed
    (naming no session, or unreadable, like unreadable folders), each with its reason."""
    base = Path(root).expanduser().absolute() if root is not None else default_codex_root()
    walk = _Walk(codex_path_base(base))
    if base.exists():
        stack = [base]
        while stack:
            folder = stack.pop()
            listing = walk.entries(folder)
            for e in listing:
                if e.name.startswith("rollout-") and e.name.endswith(".jsonl") and _is_file(e):
                    walk.add(Path(e.path))
            stack.extend(sorted((Path(e.path) for e in listing if _is_dir(e) and not e.is_symlink()), reverse=True))
    sessions, unkeyed = _group(AGENT_CODEX, walk.rel_base, walk.files, _codex_key)
    return sessions, sorted(unkeyed + walk.problems, key=lambda u: u.file.rel)
