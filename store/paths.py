"""Where things live: the session directory, its database and the files beside it, and the user's own folders."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from store.errors import StoreError

SESSIONS_DB = "sessions.db"
KNOWLEDGE_DIR = "knowledge-bases"
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
APP_NAME = "sessionscope"

Environ = Mapping[str, str]


def default_session_dir(environ: Environ | None = None) -> Path:
    """``$MOTHX_DIR/sessions`` when ``MOTHX_DIR`` is set, else ``~/.mothx/sessions``."""
    env = os.environ if environ is None else environ
    mothx_dir = env.get("MOTHX_DIR", "").strip()
    if mothx_dir:
        return Path(mothx_dir).expanduser() / "sessions"
    return Path.home() / ".mothx" / "sessions"


@dataclass(frozen=True)
class DatabaseLocation:
    """The database file a user named, and the session directory it belongs to."""

    root: Path       # the session directory: knowledge-bases/, agent state, exports live here
    db_file: Path    # exactly the file that is opened (``root/sessions.db``, or e.g. ``/p/backup.db``)

    @property
    def standard(self) -> bool:
        """True when the database is the directory's own ``sessions.db``."""
        return self.db_file == self.root / SESSIONS_DB


def resolve_location(path: str | os.PathLike[str] | None) -> DatabaseLocation:
    """The database file named by ``path`` and its session directory; nothing is opened.

    ``path`` is a session directory (its ``sessions.db`` is the database) or a database file: one named
    ``sessions.db``, any existing file that is not a folder (``/p/backup.db``), or a missing path ending in
    ``.db``. ``None`` is the default session directory. An empty path raises :class:`StoreError`, and so does a
    database path that exists but is not a regular file (see :func:`check_database_file`).
    """
    if path is None:
        root = default_session_dir()
        return DatabaseLocation(root=root, db_file=root / SESSIONS_DB)
    text = os.fspath(path)
    if not text.strip():
        raise StoreError("No session directory was given: the path is empty.")
    p = Path(os.path.normpath(Path(text).expanduser().absolute()))
    if _names_file(p):
        location = DatabaseLocation(root=p.parent, db_file=p)
    else:
        location = DatabaseLocation(root=p, db_file=p / SESSIONS_DB)
    check_database_file(location.db_file)
    return location


def resolve_session_dir(path: str | os.PathLike[str] | None) -> Path:
    """What ``path`` names, as a path :func:`store.mothx.sessiondir.open_session_dir` opens the same file from.

    The session directory when the database is its ``sessions.db``; the database file itself when it has
    another name (``/p/backup.db`` stays ``/p/backup.db``: it is never swapped for ``/p/sessions.db``).
    :func:`sessions_db_path` of the result is the database file. Raises :class:`StoreError` as
    :func:`resolve_location` does.
    """
    location = resolve_location(path)
    return location.root if location.standard else location.db_file


def sessions_db_path(session_dir: Path) -> Path:
    """The database file of ``session_dir`` as :func:`resolve_session_dir` returns it: ``session_dir/sessions.db``
    for a folder, the path itself where it names a database file."""
    return session_dir if _names_file(session_dir) else session_dir / SESSIONS_DB


def _names_file(path: Path) -> bool:
    """True when ``path`` names the database file rather than its folder (see :func:`resolve_location`)."""
    if path.name == SESSIONS_DB:
        return True
    kind = _file_mode(path)
    return path.suffix == ".db" if kind is None else not stat.S_ISDIR(kind)


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _file_mode(path: Path) -> int | None:
    """``st_mode`` of ``path`` (following symbolic links), None when it does not exist; never opens it."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except PermissionError as exc:
        raise StoreError(f"{path} cannot be read: permission denied.") from exc
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}.") from exc


def check_database_file(path: Path) -> bool:
    """True when ``path`` is a regular file, False when it does not exist; :class:`StoreError` for anything else.

    Only ``os.stat`` is used: a FIFO is never opened (opening one for reading waits for a writer forever).
    """
    mode = _file_mode(path)
    if mode is None:
        return False
    if stat.S_ISREG(mode):
        return True
    what = next((label for test, label in _KINDS if test(mode)), "not a regular file")
    raise StoreError(f"{path} is {what}, not a database file.")


def companions(db_path: Path) -> list[Path]:
    """The ``-wal``, ``-shm`` and ``-journal`` files SQLite may keep beside ``db_path``."""
    return [db_path.with_name(db_path.name + suffix) for suffix in COMPANION_SUFFIXES]


def fsync_dir(path: Path) -> None:
    """Sync a folder, so a file created, renamed or linked in it survives a crash (best effort: a file system
    that cannot sync folders is left as it is)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def knowledge_dir(session_dir: Path) -> Path:
    return session_dir / KNOWLEDGE_DIR


def knowledge_base_files(session_dir: Path) -> list[Path]:
    """Every ``knowledge-bases/<kbID>.db`` file, sorted by name."""
    folder = knowledge_dir(session_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.db") if p.is_file())


# The user's own folders. platformdirs decides them (on Linux: the XDG base directories, whose variables it reads
# when they hold an absolute path). ``environ`` computes them for another environment, with the XDG rules.


def _xdg(environ: Environ, variable: str, fallback: str) -> Path:
    base = environ.get(variable, "").strip()
    if base and os.path.isabs(base):
        return Path(base) / APP_NAME
    home = environ.get("HOME", "").strip()
    return (Path(home) if home else Path.home()) / fallback / APP_NAME


def cache_dir(environ: Environ | None = None) -> Path:
    """The user cache directory for Sessionscope (``$XDG_CACHE_HOME/sessionscope``, ``~/.cache/sessionscope``)."""
    if environ is not None:
        return _xdg(environ, "XDG_CACHE_HOME", ".cache")
    import platformdirs  # (costs ~10 ms to import; the command line needs it only once a cache is opened)

    return platformdirs.user_cache_path(APP_NAME, appauthor=False)


def config_dir(environ: Environ | None = None) -> Path:
    """The user configuration directory (``$XDG_CONFIG_HOME/sessionscope``, ``~/.config/sessionscope``)."""
    if environ is not None:
        return _xdg(environ, "XDG_CONFIG_HOME", ".config")
    import platformdirs

    return platformdirs.user_config_path(APP_NAME, appauthor=False)


def data_dir(environ: Environ | None = None) -> Path:
    """The user data directory (``$XDG_DATA_HOME/sessionscope``, ``~/.local/share/sessionscope``)."""
    if environ is not None:
        return _xdg(environ, "XDG_DATA_HOME", ".local/share")
    import platformdirs

    return platformdirs.user_data_path(APP_NAME, appauthor=False)


def default_demo_dir(environ: Environ | None = None) -> Path:
    return cache_dir(environ) / "demo" / "sessions"


CAPTURES_DIR = "captures"


def captures_dir(environ: Environ | None = None) -> Path:
    """Where captured agent sessions go when no ``--dir`` is given and no mothx session directory exists at the
    default place: a session directory of Sessionscope's own, ``<user data dir>/captures``
    (``~/.local/share/sessionscope/captures``). A capture never creates ``~/.mothx/sessions`` (that folder is
    the mothx runtime's)."""
    return data_dir(environ) / CAPTURES_DIR
