"""Reading a native transcript for display: a captured checkpoint, its files on disk, or a native file.

:func:`load_native` decides where a :class:`NativeRef` is read from — a native file named directly (a Claude
Code session file with its sub-agents beside it, a sub-agent file, or a Codex rollout), or a checkpoint, from
the store or (``prefer_disk``, following in a read mode) from its files on disk when they are still there —
and returns a :class:`NativeLoad`: the session and, for following, the shown transcript's file on disk (a
sub-agent's own file when the ref names one; never a path in the data that leaves the folder it was captured
from) and the narrowest folder that captures it again. :func:`pick_transcript` is which transcript of the
session a screen shows, :func:`open_follower` how its file is followed.

Runs in a worker thread; nothing here imports the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store.agents.native import AGENT_CODEX, NativeSession, NativeTranscript, SubAgentLink
from store.errors import StoreError

if TYPE_CHECKING:
    from store.agents.native_follow import NativeFollower
    from store.mothx.sessiondir import SessionDir


@dataclass(frozen=True)
class NativeRef:
    """Which native transcript a screen shows: a checkpoint (agent + agent session id) or a file, and
    optionally one of its sub-agents instead of the main transcript."""

    agent: str
    agent_session_id: str = ""
    path: str = ""  # a native file read directly (no checkpoint)
    subagent: str = ""  # the sub-agent's agent id

    @property
    def label(self) -> str:
        base = self.agent_session_id or Path(self.path).name
        return f"{base} / sub-agent {self.subagent}" if self.subagent else base


@dataclass(frozen=True)
class NativeLoad:
    """What a read found: the session, the disk file to follow and where it is captured from."""

    session: NativeSession
    disk_path: Path | None = None  # the shown transcript's file on disk ("" when unknown or gone)
    capture_root: Path | None = None  # narrowest folder that captures it again (checkpoints, read-write only)
    source_root: Path | None = None  # the folder a checkpoint's file paths are relative to
    note: str = ""
    from_disk: bool = False  # read from the file on disk instead of the checkpoint


def read_file_session(path: Path) -> NativeSession:
    """A native file read directly: a Claude Code session file with its sub-agents beside it, a sub-agent file,
    or a Codex rollout."""
    from store.agents.native import (
        detect_agent,
        link_claude_code_session,
        parse_claude_code,
        parse_codex,
        read_claude_code_session,
    )

    data = path.read_bytes()
    if detect_agent(data) == AGENT_CODEX:
        t = parse_codex(data, str(path))
        return NativeSession(AGENT_CODEX, t.session_id, t)
    t = parse_claude_code(data, str(path))
    if t.session_id and path.name == f"{t.session_id}.jsonl":
        return read_claude_code_session(path.parent, t.session_id)
    return link_claude_code_session(t, [])


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def subagent_file(link: SubAgentLink, root: Path | None) -> Path | None:
    """The sub-agent's file on disk (to follow), or None. A checkpoint's relative path is taken only when it
    stays inside ``root`` (a path like ``../../etc/passwd`` in the data is not followed)."""
    if root is not None and link.transcript.path and not Path(link.transcript.path).is_absolute():
        candidate = root / link.transcript.path
        if not _inside(candidate, root):
            return None
        return candidate if candidate.is_file() else None
    path = Path(link.transcript.path)
    return path if path.is_absolute() and path.is_file() else None


def load_native(sd: SessionDir, ref: NativeRef, *, prefer_disk: bool = False) -> NativeLoad:
    """Read what ``ref`` names (in a worker). ``prefer_disk``: read a checkpoint's files from disk instead
    (following in a read mode, where nothing can be captured)."""
    disk: Path | None
    if ref.path:
        path = Path(ref.path)
        file_session = read_file_session(path)
        disk = path
        if ref.subagent:
            found = next((s for s in file_session.subagents if s.agent_id == ref.subagent), None)
            disk = Path(found.transcript.path) if found is not None else None
        return NativeLoad(file_session, disk)
    from store.agents.agentstate import checkpoint_info
    from store.agents.capture import read_checkpoint_session

    info = checkpoint_info(sd, ref.agent, ref.agent_session_id)
    root = Path(info.source_root) if info is not None and info.source_root else None
    rel = info.state.transcript_path if info is not None and info.state is not None else ""
    disk_main = root / rel if root is not None and rel else None
    if disk_main is not None and (not disk_main.is_file() or root is None or not _inside(disk_main, root)):
        disk_main = None  # gone, or a path in the data that leaves the folder it was captured from
    session: NativeSession | None = None
    from_disk = False
    if prefer_disk and disk_main is not None:
        session = _disk_session(ref.agent, disk_main, root)
        from_disk = session is not None
    if session is None:
        session = read_checkpoint_session(sd, ref.agent, ref.agent_session_id)
    if session is None:
        raise StoreError("Nothing is published for this session: it has no checkpoint head, or its head is a reset.")
    disk = disk_main
    if ref.subagent:
        link = next((s for s in session.subagents if s.agent_id == ref.subagent), None)
        disk = subagent_file(link, root) if link is not None else None
    capture_root = None
    if disk is not None and root is not None and not sd.mode.is_read:
        capture_root = disk.parent if ref.agent == AGENT_CODEX else root / rel.split("/", 1)[0]
    note = "" if disk is not None else "its file is not on disk here: not following"
    return NativeLoad(session, disk, capture_root, root, note, from_disk)


def _disk_session(agent: str, disk_main: Path, root: Path | None) -> NativeSession | None:
    try:
        if agent == AGENT_CODEX:
            from store.agents.native import read_codex_file

            t = read_codex_file(disk_main)
            return NativeSession(AGENT_CODEX, t.session_id, t)
        from store.agents.native import read_claude_code_session

        return read_claude_code_session(disk_main.parent, disk_main.stem)
    except OSError:
        return None


def pick_transcript(session: NativeSession, subagent: str = "") -> tuple[NativeTranscript | None, SubAgentLink | None]:
    """The transcript a screen shows of ``session`` and the sub-agent link it comes from: the sub-agent named
    ``subagent`` (None, None when the session has no such sub-agent), else the session's own transcript, or
    its only sub-agent's when the session holds nothing else."""
    if subagent:
        link = next((s for s in session.subagents if s.agent_id == subagent), None)
        return (link.transcript if link else None), link
    if session.main is None and len(session.subagents) == 1:
        link = session.subagents[0]
        return link.transcript, link
    return session.main, None


def open_follower(sd: SessionDir, ref: NativeRef, disk_path: Path, capture_root: Path | None) -> NativeFollower:
    """How ``disk_path`` is followed: captured again into the checkpoint store from ``capture_root`` on every
    change (a checkpoint in a read-write directory), else only read."""
    from store.agents.native_follow import NativeFollower, native_follower

    if capture_root is not None and not ref.path:
        return native_follower(sd, ref.agent, capture_root, disk_path)
    return NativeFollower(disk_path)


def reload_native(sd: SessionDir, ref: NativeRef) -> NativeLoad:
    """:func:`load_native` for a follow step: a checkpoint in a read mode (where nothing is captured again) is
    read from its files on disk."""
    return load_native(sd, ref, prefer_disk=sd.mode.is_read and not ref.path)


__all__ = [
    "NativeLoad",
    "NativeRef",
    "load_native",
    "open_follower",
    "pick_transcript",
    "read_file_session",
    "reload_native",
    "subagent_file",
]
