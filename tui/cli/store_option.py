"""``--store URL``: the checkpoint store a command (or the app) uses, chosen on the command line, by
``$SESSIONSCOPE_STORE`` or by ``store`` in config.toml (in that order)."""

from __future__ import annotations

import argparse
import os

from tui.cli.errors import UsageError


def add_store(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` (given at any level of a nested command; the innermost one given wins)."""
    parser.add_argument("--store", metavar="URL", default=argparse.SUPPRESS,
                        help="the checkpoint store: postgresql://user@host/db (a team store) or sqlite:///path "
                             "(default $SESSIONSCOPE_STORE, else the session directory's own file)")


def apply_store(args: argparse.Namespace, configured: str = "") -> None:
    """Make ``--store`` the process's checkpoint store (else ``$SESSIONSCOPE_STORE``, else ``configured``, the
    ``store`` of config.toml); a URL of no known engine is a bad argument (exit 2)."""
    from store.agents.checkpoint_engine import StoreUnavailable, use_store

    url = getattr(args, "store", None)
    if url is None and configured and not os.environ.get("SESSIONSCOPE_STORE", "").strip():
        url = configured
    if url is None:
        return
    try:
        use_store(url)
    except StoreUnavailable as exc:
        raise UsageError(str(exc)) from exc


__all__ = ["add_store", "apply_store"]
