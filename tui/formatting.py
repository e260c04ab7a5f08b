"""Small text helpers shared by screens: paths with ``~``, absolute UTC times, one-line safe text, errors.

Times go through :mod:`store.times` and text from data through :mod:`store.safetext` (the one boundary):
:func:`one_line` is the boundary's, re-exported here for the screens that import it from this module.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from store import times
from store.safetext import one_line

__all__ = ["describe_error", "list_time", "one_line", "plural", "shown_path", "tildify", "time_title",
           "utc_minutes"]


@functools.lru_cache(maxsize=4)
def _home(home_env: str | None) -> str:
    return str(Path.home()).rstrip("/")


def tildify(path: str | os.PathLike[str], home: str | None = None) -> str:
    """``path`` with the user's home folder shown as ``~`` (the raw text: draw it through :func:`shown_path`)."""
    text = os.fspath(path)
    if not text:
        return ""
    home = _home(os.environ.get("HOME")) if home is None else home.rstrip("/")
    if home and (text == home or text.startswith(home + "/")):
        return "~" + text[len(home) :]
    return text


def shown_path(path: str | os.PathLike[str] | None) -> str:
    """``path`` as drawn: home as ``~``, on one line, every control or bidi character shown as an escape."""
    if path is None:
        return ""
    return one_line(tildify(path))


UNREADABLE_TIME = "(unreadable)"
"""A stored time that is no RFC 3339 time (``not-a-time``): never shown as if it were one."""


def utc_minutes(stamp: str | None) -> str:
    """An RFC 3339 text time as ``YYYY-MM-DD HH:MM`` in UTC; ``""`` when empty; :data:`UNREADABLE_TIME` when it
    does not parse (the stored text is not a time: showing it in a time column reads as one).

    Never relative ("3 minutes ago"): the same database always shows the same text.
    """
    if not stamp:
        return ""
    if times.parse_rfc3339(stamp) is None:
        return UNREADABLE_TIME
    return times.show(stamp, times.MINUTES)


def list_time(stamp: str | None) -> str:
    """An RFC 3339 text time as lists show it: in config.toml's ``time_zone`` with its ``date_format``
    (:func:`store.times.set_display`; UTC ``YYYY-MM-DD HH:MM`` by default), made safe."""
    return one_line(times.listed(stamp))


def time_title(title: str) -> str:
    """A time column's title with the zone its times are in, e.g. ``LAST ACTIVE UTC``."""
    return f"{title} {one_line(times.display_zone())}"


def describe_error(exc: BaseException) -> str:
    """One safe line for an exception a worker caught: the store's own sentence, or the type and message of a
    bug. Control and bidi characters from the data it names are shown as escapes (markup is not escaped: draw
    it as ``Text`` or notify with ``markup=False``)."""
    from store.errors import StoreError

    if isinstance(exc, StoreError):
        return one_line(str(exc))
    text = one_line(str(exc))
    name = one_line(type(exc).__name__)
    return f"Unexpected {name}: {text}" if text else f"Unexpected {name}."


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 record``, ``2,048 records`` (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


NO_MESSAGES = "(no messages)"
"""The one word for a session with neither a title nor any message text: the lists, the transcript's header
and the CLI all say it."""
UNTITLED = "(untitled)"
"""A session with messages but no title, where no message text is shown instead (the transcript's header)."""


def untitled_text(message_count: int | None) -> str:
    """What stands for a missing title: :data:`NO_MESSAGES` when the session has none, else :data:`UNTITLED`."""
    return NO_MESSAGES if message_count == 0 else UNTITLED
