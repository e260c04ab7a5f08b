"""Argument pieces the commands share: the whole-number type, a command's parser with the location options, the
``--session`` / ``--limit`` pair of a listing and the session it names.

Light on purpose (argparse alone at import): every command's parser is built from here, also when it is the only
one a run builds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir


def count(text: str) -> int:
    """A whole number ≥ 0 (argparse type): ``'x' is not a whole number``, ``'-1' is negative``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is negative")
    return value


def command(sub: argparse._SubParsersAction, add_location: Callable[..., None], name: str, *, help: str,  # noqa: A002
            description: str) -> argparse.ArgumentParser:
    """The parser of command ``name``, with ``--dir`` and the open modes accepted after the command too."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    add_location(parser, nested=True)
    return parser


def add_session_limit(parser: argparse.ArgumentParser, *, session_help: str, default: int, limit_help: str,
                      handler: Callable[[argparse.Namespace], int]) -> None:
    """A listing's ``--session ID`` and ``--limit N`` (default ``default``), and its handler."""
    parser.add_argument("--session", metavar="ID", default="", help=session_help)
    parser.add_argument("--limit", metavar="N", type=count, default=default, help=limit_help)
    parser.set_defaults(handler=handler)


def session_of(sd: SessionDir, args: argparse.Namespace) -> str | None:
    """The session ``--session`` names (an id or a unique prefix), ``None`` without it."""
    if not args.session:
        return None
    from store.mothx.sessions import resolve_session_id

    return resolve_session_id(sd, args.session)
