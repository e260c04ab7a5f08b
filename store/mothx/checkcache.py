"""Results of whole-database checks, remembered against the database file's identity.

The checks that follow the first paint (``PRAGMA quick_check``, the list cache's count of deleted entries) read
every page or every entry, so they grow with the database. Their result holds for as long as the files are
unchanged: an open of a ``sessions.db`` whose file and ``-wal`` have the same device, inode, size and
modification time (and the database the same change time) as when a check passed does not run it again. The records are small JSON files in the user
cache directory (``<cache>/checks/<sha256 of the real path>.json``), never in the session directory. A record
is written only when the files did not change while the check ran; anything unreadable counts as no record.
"""

from __future__ import annotations

import json
import os
import tempfile
from hashlib import sha256
from pathlib import Path
from typing import Any

from store import paths

Identity = list[list[int] | None]
"""``[stat of sessions.db, stat of sessions.db-wal or None]``, each ``[dev, ino, size, mtime_ns]`` (and the database's ``ctime_ns``)."""


def identity(db_path: Path) -> Identity | None:
    """The identity of the database at ``db_path`` (and of its WAL), or None when it cannot be read."""
    found: Identity = []
    for path in (db_path, Path(f"{db_path}-wal")):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if path == db_path:
                return None
            found.append(None)
            continue
        except OSError:
            return None
        stamp = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
        if path == db_path:
            stamp.append(st.st_ctime_ns)  # (not the WAL's: every open of the database changes its ctime)
        found.append(stamp)
    return found


def record_path(db_path: Path) -> Path:
    key = sha256(os.path.realpath(db_path).encode("utf-8", "surrogateescape")).hexdigest()
    return paths.cache_dir() / "checks" / f"{key}.json"


def _read(db_path: Path) -> dict[str, Any]:
    try:
        data = json.loads(record_path(db_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recall(kind: str, db_path: Path, now: Identity | None) -> Any:
    """The value remembered for check ``kind`` when the database had identity ``now``; None when there is none
    (or ``now`` is None)."""
    if now is None:
        return None
    entry = _read(db_path).get(kind)
    if not isinstance(entry, dict) or entry.get("identity") != now:
        return None
    return entry.get("value")


def remember(kind: str, db_path: Path, before: Identity | None, value: Any) -> bool:
    """Remember ``value`` for check ``kind``, run on the database as it was at ``before``, when the files are
    still as they were (else nothing is written). Never raises: a cache that cannot be written only means the
    check runs again next time. True when written."""
    if before is None or identity(db_path) != before:
        return False
    target = record_path(db_path)
    data = _read(db_path)
    data[kind] = {"identity": before, "value": value}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".check-", suffix=".json", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True


def forget(db_path: Path) -> None:
    """Drop every remembered check of ``db_path`` (a repair or a failed check)."""
    try:
        record_path(db_path).unlink(missing_ok=True)
    except OSError:
        pass
