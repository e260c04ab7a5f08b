"""The database file and its companions, read from Python before SQLite opens them: the header, the ``-wal`` and
``-journal`` checks, and the files this process already holds open (whose bytes are never read again).
"""

from __future__ import annotations

import os
import stat
import struct
import threading
import time
from pathlib import Path

from store.errors import DatabaseCorrupt, StoreError
from store.paths import check_database_file, companions

SQLITE_HEADER = b"SQLite format 3\x00"
WAL_MAGICS = (0x377F0682, 0x377F0683)
WAL_VERSION = 3007000
JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")

# Files this process holds open through SQLite, by (device, inode). Closing ANY file descriptor of a file drops
# every POSIX lock the process holds on it, so reading a header with Python's open() while a connection of ours
# is open would silently release that connection's locks: another process then thinks it is the last user of a
# WAL database, checkpoints and deletes the -wal / -shm files, and our connection never sees a later commit
# (and would write into an unlinked WAL). Such files are never opened from Python: their header was checked
# when the first connection opened them.
_IN_USE: dict[tuple[int, int], int] = {}
_IN_USE_LOCK = threading.Lock()
# Of those, the files a read-write Database of ours keeps in a rollback-journal mode (WAL not yet set), with how
# many such Databases: their header cannot be read again either, and a read connection beside them must not be
# ``immutable`` (our own writes change the file).
_ROLLBACK: dict[tuple[int, int], int] = {}


def file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def in_use(path: Path) -> bool:
    """True when this process holds ``path`` open through a :class:`Database`."""
    key = file_key(path)
    with _IN_USE_LOCK:
        return key is not None and _IN_USE.get(key, 0) > 0


def hold(key: tuple[int, int] | None) -> None:
    if key is not None:
        with _IN_USE_LOCK:
            _IN_USE[key] = _IN_USE.get(key, 0) + 1


def release(key: tuple[int, int] | None, table: dict[tuple[int, int], int] = _IN_USE) -> None:
    if key is None:
        return
    with _IN_USE_LOCK:
        left = table.get(key, 0) - 1
        if left > 0:
            table[key] = left
        else:
            table.pop(key, None)


def hold_rollback(key: tuple[int, int] | None) -> None:
    if key is not None:
        with _IN_USE_LOCK:
            _ROLLBACK[key] = _ROLLBACK.get(key, 0) + 1


def read_head(path: Path, size: int = 100) -> bytes:
    """The first ``size`` bytes of the regular file ``path`` (opened non-blocking: never waits on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except PermissionError as exc:
        raise StoreError(f"{path} cannot be read: permission denied.") from exc
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}.") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            check_database_file(path)  # names what it is
            raise StoreError(f"{path} is not a regular file, not a database file.")
        return os.pread(fd, size, 0)
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc.strerror or exc}.") from exc
    finally:
        os.close(fd)


def is_wal_file(path: Path) -> bool:
    """True when the database header says WAL mode (file format bytes 18 and 19 equal 2)."""
    if in_use(path):
        key = file_key(path)  # open here already (see _IN_USE): what our own read-write connection left it in
        with _IN_USE_LOCK:
            return key not in _ROLLBACK
    try:
        head = read_head(path, 20)
    except StoreError:
        return False
    return _header_is_wal(head)


def _header_is_wal(head: bytes) -> bool:
    return len(head) >= 20 and head[18] == 2 and head[19] == 2


def _page_size(head: bytes) -> int | None:
    """The page size a database header records (None for an empty or too short file)."""
    if len(head) < 18:
        return None
    value = int.from_bytes(head[16:18], "big")
    return 65536 if value == 1 else value


def check_header(path: Path) -> bytes:
    """The first 100 bytes of ``path`` (b"" when it is open here already); :class:`DatabaseCorrupt` if they are
    not a SQLite header."""
    if in_use(path):
        return b""  # checked when it was first opened; reading it again would drop our own locks (see _IN_USE)
    head = read_head(path)
    if head and head[:16] != SQLITE_HEADER:
        raise DatabaseCorrupt(f"{path} is not a SQLite database (its header is wrong).")
    return head


def _wal_checksum(data: bytes, big_endian: bool) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    s1 = s2 = 0
    for i in range(0, len(words), 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


def _valid_page_size(value: int) -> bool:
    return 512 <= value <= 65536 and value & (value - 1) == 0


def wal_problem(head: bytes, page_size: int | None) -> str:
    """Why the ``-wal`` file starting with ``head`` is not a WAL file of a database of ``page_size``, or "".

    An empty file is a valid, empty WAL.
    """
    if not head:
        return ""
    if len(head) < 32:
        return "it is too short to be a WAL file"
    magic, version, size = struct.unpack(">III", head[:12])
    if magic not in WAL_MAGICS or version != WAL_VERSION:
        return "it is not a SQLite WAL file"
    if _wal_checksum(head[:24], bool(magic & 1)) != struct.unpack(">II", head[24:32]):
        return "its WAL header checksum is wrong"
    if not _valid_page_size(size) or (page_size is not None and size != page_size):
        return f"its page size ({size}) does not match the database's ({page_size})"
    return ""


def journal_problem(head: bytes, page_size: int | None) -> str:
    """Why the ``-journal`` file starting with ``head`` is not a hot rollback journal of the database, or "".

    SQLite plays a hot journal back into the database (that is its crash recovery), but overwrites and deletes
    any other file of that name the first time it writes.
    """
    if len(head) < 28 or head[:8] != JOURNAL_MAGIC:
        return "it is not a hot rollback journal" if head.strip(b"\x00") else "it is an empty rollback journal"
    size = struct.unpack(">I", head[24:28])[0]
    if not _valid_page_size(size) or (page_size is not None and size != page_size):
        return f"its page size ({size}) does not match the database's ({page_size})"
    return ""


CREATING_WAIT_S = 5.0
"""How long an open that may create the database waits for a companion of a database another process is
creating at that moment (its first write goes through a rollback journal before the file turns to WAL)."""


def being_created(path: Path) -> bool:
    """The database at ``path`` is empty or holds only its first page: another process may be creating it."""
    if in_use(path):
        return False  # ours: not being created by another process (and reading it would drop our locks)
    try:
        head = read_head(path)
        size = path.stat().st_size
    except (OSError, StoreError):
        return False
    if len(head) < 32:
        return True
    # The header's page count, and the file's own size (a header from before SQLite 3.7 may leave the count 0).
    return int.from_bytes(head[28:32], "big") <= 1 and size <= (_page_size(head) or 65536)


def check_companions(path: Path, head: bytes | None = None, *, creating: bool = False) -> None:
    """Refuse (:class:`StoreError`) a read-write open beside a ``-wal`` or ``-journal`` SQLite would destroy.

    ``head``: the database's first bytes, for its page size (read here when None). Only the companions are
    read, never changed. The ``-shm`` is SQLite's scratch index, rebuilt from the ``-wal`` whenever needed.
    ``creating``: the open may create the database; while the file is still empty or one page long, a
    companion that fails the check is taken for the one of another process creating it at this moment, and
    looked at again until it is gone (at most :data:`CREATING_WAIT_S`, then refused as any other).
    """
    deadline = time.monotonic() + CREATING_WAIT_S
    while True:
        try:
            _check_companions(path, head)
            return
        except StoreError:
            if not creating or time.monotonic() >= deadline or not being_created(path):
                raise
        time.sleep(0.01)
        head = None


def _check_companions(path: Path, head: bytes | None) -> None:
    if head is None:
        head = b"" if in_use(path) else read_head(path)
    page_size = _page_size(head) if len(head) >= 100 else None
    wal, _shm, journal = companions(path)
    for companion, judge in ((wal, wal_problem), (journal, journal_problem)):
        try:
            if not companion.exists():
                continue
            check_database_file(companion)
            problem = judge(read_head(companion, 32), page_size)
        except StoreError as exc:
            problem = str(exc).rstrip(".")
        if problem:
            raise StoreError(
                f"{companion} lies beside the database but {problem}: SQLite would overwrite or delete it on a "
                "read-write open. Move it aside, or open with --read-only or --snapshot."
            )


def release_rollback(key: tuple[int, int] | None) -> None:
    """The read-write Database holding ``key`` in a rollback-journal mode switched to WAL, or closed."""
    release(key, _ROLLBACK)
