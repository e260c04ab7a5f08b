"""Small text helpers shared by screens: paths with ``~``, absolute UTC times, ellipsis."""

from __future__ import annotations

import functools
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

_RFC3339 = re.compile(
    r"^\s*(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(Z|z|[+-]\d{2}:?\d{2})?\s*$"
)


@functools.lru_cache(maxsize=4)
def _home(home_env: str | None) -> str:
    return str(Path.home()).rstrip("/")


def tildify(path: str | os.PathLike[str], home: str | None = None) -> str:
    """``path`` with the user's home folder shown as ``~``."""
    text = os.fspath(path)
    if not text:
        return ""
    home = _home(os.environ.get("HOME")) if home is None else home.rstrip("/")
    if home and (text == home or text.startswith(home + "/")):
        return "~" + text[len(home) :]
    return text


def utc_minutes(stamp: str) -> str:
    """An RFC 3339 text time as ``YYYY-MM-DD HH:MM`` in UTC; ``""`` when empty; the text itself when unparseable.

    Never relative ("3 minutes ago"): the same database always shows the same text.
    """
    if not stamp:
        return ""
    m = _RFC3339.match(stamp)
    if not m:
        return stamp[:16]
    year, month, day, hour, minute = (int(m.group(i)) for i in range(1, 6))
    zone = m.group(7)
    try:
        when = datetime(year, month, day, hour, minute, tzinfo=timezone.utc)
    except ValueError:
        return stamp[:16]
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
        when = when - sign * offset
    return when.strftime("%Y-%m-%d %H:%M")


def one_line(text: str) -> str:
    """Whitespace (newlines, tabs) collapsed to single spaces."""
    return " ".join(text.split())


def describe_error(exc: BaseException) -> str:
    """One line for an exception a worker caught: the store's own sentence, or the type and message of a bug."""
    from store.errors import StoreError

    if isinstance(exc, StoreError):
        return one_line(str(exc))
    text = one_line(str(exc))
    return f"Unexpected {type(exc).__name__}: {text}" if text else f"Unexpected {type(exc).__name__}."


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 record``, ``2,048 records`` (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
