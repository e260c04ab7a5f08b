"""``sessionscope`` with no command: the terminal UI on the directory the options name.

A machine that only browses a team store (``--store URL``, ``SESSIONSCOPE_STORE`` or ``store`` in config.toml)
may have no session directory at all: the app then opens an empty, private one, read-only, and shows the
store's captured sessions; the folder is removed when the app ends.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from store.mothx.db import OpenMode

if TYPE_CHECKING:
    from tui.app import SessionscopeApp
    from tui.start import Start


def open_ui(args: argparse.Namespace) -> int:
    from store import config
    from tui.cli import core as cli
    from tui.cli.store_option import apply_store

    settings = config.load()
    apply_store(args, settings.text("store"))
    root = cli._session_dir(args)
    mode = cli._mode(args, default=OpenMode(settings.text("open_mode") or OpenMode.READ_WRITE.value))
    from tui.app import SessionscopeApp

    start = _start(args)
    # `start` only when a section was asked for: SessionscopeApp(session_dir, mode) stays the whole call otherwise
    extra: dict[str, Any] = {} if start is None else {"start": start}
    if root is None:
        from store.agents.checkpoint_engine import selected_store

        if selected_store() is not None:
            # A machine that only browses a team store has no session directory: the app opens an empty,
            # private one (read-only) that carries the open mode, and shows the store's captured sessions.
            import tempfile

            from store.mothx.sessiondir import open_session_dir

            empty = Path(tempfile.mkdtemp(prefix="sessionscope-store-"))
            open_session_dir(empty, OpenMode.READ_WRITE, create=True).close()
            store_mode = OpenMode.READ_ONLY if mode is OpenMode.READ_WRITE else mode
            return _run_app(SessionscopeApp(empty, store_mode, **extra), settings.flag("mouse"), remove=empty)
    return _run_app(SessionscopeApp(root, mode, **extra), settings.flag("mouse"))


def _start(args: argparse.Namespace) -> Start | None:
    """The first screen ``--section`` / ``--session`` name (None: Sessions); a usage error for a wrong one."""
    from tui.cli.errors import UsageError
    from tui.start import Start, section_ids

    section, session = getattr(args, "start_section", None), getattr(args, "start_session", None)
    if section is None and session is None:
        return None
    if section not in section_ids():
        names = ", ".join(section_ids())
        raise UsageError(f"there is no section {section!r}: choose one of {names}" if section is not None
                         else "--session goes with --section forks")
    if section != "forks":
        if session is not None:
            raise UsageError("--session goes with --section forks")
        return Start(section)
    if session is None:
        raise UsageError("--section forks needs --session ID (the session whose fork family to show)")
    return Start(section, _resolve_session(args, session))


def _resolve_session(args: argparse.Namespace, text: str) -> str:
    """The session id ``text`` names (an id or a unique prefix), read before the app starts."""
    from store.mothx.sessions import resolve_session_id
    from tui.cli.core import open_as

    sd = open_as(args, OpenMode.READ_ONLY)
    try:
        return resolve_session_id(sd, text)
    finally:
        sd.close()


def _run_app(app: SessionscopeApp, mouse: bool, remove: Path | None = None) -> int:
    """Run the app; ``remove`` is a private folder of ours deleted when it ends."""
    try:
        app.run(mouse=mouse)
    finally:
        if remove is not None:
            import shutil

            shutil.rmtree(remove, ignore_errors=True)
    code = app.return_code
    return code if isinstance(code, int) else 0
