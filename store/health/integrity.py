"""The long check: ``PRAGMA integrity_check`` per table (with its indexes), cancellable, with progress.

It runs on a connection of its own (read-only, or a private snapshot copy in snapshot mode), so the screens'
reads are not held up. ``PRAGMA quick_check`` (the quick row) covers the page-level structure; this adds what
only the full check verifies (index contents against their tables, UNIQUE constraints).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from store.errors import StoreError
from store.health.model import ERROR, OK, HealthCheck
from store.mothx.db import OpenMode, open_database
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line

Progress = Callable[[float, str], None]
MAX_PROBLEMS = 20


class IntegrityCancelled(StoreError):
    """The integrity check was cancelled; nothing was concluded."""


def integrity_check(sd: SessionDir, progress: Progress | None = None,
                    cancel: threading.Event | None = None) -> HealthCheck:
    """Run the full integrity check; ``progress(fraction, table)`` after each table; ``cancel`` stops it."""
    mode = OpenMode.SNAPSHOT if sd.mode is OpenMode.SNAPSHOT else OpenMode.READ_ONLY
    db = open_database(sd.db_path, mode)
    problems: list[str] = []
    try:
        with db.read() as conn:
            tables = [str(r[0]) for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
            if cancel is not None:
                conn.set_progress_handler(lambda: 1 if cancel.is_set() else 0, 2000)
            try:
                for i, table in enumerate(tables):
                    if cancel is not None and cancel.is_set():
                        raise IntegrityCancelled("The integrity check was cancelled.")
                    quoted = '"' + table.replace('"', '""') + '"'
                    try:
                        rows = conn.execute(f"PRAGMA integrity_check({quoted})").fetchall()
                    except sqlite3.OperationalError as exc:
                        if cancel is not None and cancel.is_set():
                            raise IntegrityCancelled("The integrity check was cancelled.") from exc
                        raise
                    problems.extend(str(r[0]) for r in rows if str(r[0]) != "ok")
                    if progress is not None:
                        progress((i + 1) / max(1, len(tables)), table)
            finally:
                conn.set_progress_handler(None, 0)
    finally:
        db.close()
    if problems:
        shown = "; ".join(one_line(p) for p in problems[:MAX_PROBLEMS])
        more = f" (and {len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else ""
        return HealthCheck("db.integrity_check", "Integrity check", ERROR, f"{shown}{more}",
                           advice="restore sessions.db from a backup, or reset the database (reset-db)")
    return HealthCheck("db.integrity_check", "Integrity check", OK,
                       f"ok: {len(tables)} tables and their indexes checked")
