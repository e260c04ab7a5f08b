"""Where things live: the session directory, its database and the files beside it."""

from __future__ import annotations

import os
from pathlib import Path

SESSIONS_DB = "sessions.db"
KNOWLEDGE_DIR = "knowledge-bases"
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")


def default_session_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    """``$MOTHX_DIR/sessions`` when ``MOTHX_DIR`` is set, else ``~/.mothx/sessions``."""
    env = os.environ if environ is None else environ
    mothx_dir = env.get("MOTHX_DIR", "").strip()
    if mothx_dir:
        return Path(mothx_dir).expanduser() / "sessions"
    return Path.home() / ".mothx" / "sessions"


def resolve_session_dir(path: str | os.PathLike[str] | None) -> Path:
    """The session directory named by ``path``: the directory itself or its ``sessions.db``."""
    if path is None:
        return default_session_dir()
    p = Path(path).expanduser().absolute()
    if p.name == SESSIONS_DB or (p.suffix == ".db" and p.is_file()):
        p = p.parent
    return Path(os.path.normpath(p))


def sessions_db_path(session_dir: Path) -> Path:
    return session_dir / SESSIONS_DB


def companions(db_path: Path) -> list[Path]:
    """The ``-wal``, ``-shm`` and ``-journal`` files SQLite may keep beside ``db_path``."""
    return [db_path.with_name(db_path.name + suffix) for suffix in COMPANION_SUFFIXES]


def knowledge_dir(session_dir: Path) -> Path:
    return session_dir / KNOWLEDGE_DIR


def knowledge_base_files(session_dir: Path) -> list[Path]:
    """Every ``knowledge-bases/<kbID>.db`` file, sorted by name."""
    folder = knowledge_dir(session_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.db") if p.is_file())


def cache_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    """The user cache directory for Sessionscope (``$XDG_CACHE_HOME/sessionscope``)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "sessionscope"


def default_demo_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    return cache_dir(environ) / "demo" / "sessions"


def config_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME", "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".config"
    return root / "sessionscope"
