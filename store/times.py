"""Times as the reference stores them, read and shown one way everywhere.

* RFC 3339 text (Go's ``RFC3339Nano``: zone ``Z`` or ``±hh:mm``, 0–9 fraction digits) is parsed with
  :func:`datetime.fromisoformat` (Python 3.11 reads ``Z`` and long fractions; digits past microseconds are cut
  first, since it keeps at most six).
* Unix seconds (leases, recoveries) and Unix milliseconds (deliveries) are integers from the SQLite clock.

Shown times are absolute and UTC unless a caller asks for local time: the same database always shows the same
text. A value that does not parse is shown as itself (made safe by the caller), never guessed at.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_FRACTION = re.compile(r"(\.\d{6})\d+")

MINUTES = "%Y-%m-%d %H:%M"
SECONDS = "%Y-%m-%d %H:%M:%S"


def parse_rfc3339(text: object) -> datetime | None:
    """The instant ``text`` names (an aware datetime; a time without a zone is taken as UTC), or ``None``."""
    if not isinstance(text, str):
        return None
    stamp = text.strip()
    if len(stamp) < 10 or not stamp[:4].isdigit():
        return None
    stamp = _FRACTION.sub(r"\1", stamp)
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def format_rfc3339(moment: datetime | None = None) -> str:
    """Go's RFC3339Nano in UTC: fraction with trailing zeros trimmed (none when zero), zone ``Z``."""
    dt = (moment or datetime.now(UTC)).astimezone(UTC)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        text += "." + f"{dt.microsecond:06d}".rstrip("0")
    return text + "Z"


def show(text: object, fmt: str = MINUTES, *, local: bool = False, unset: str = "") -> str:
    """An RFC 3339 time as ``fmt`` in UTC (``local``: the machine's zone); ``unset`` for ``''``/``None``; the
    text itself (cut to 19 characters) when it does not parse."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return unset
    moment = parse_rfc3339(text)
    if moment is None:
        return str(text)[:19]
    return (moment.astimezone() if local else moment.astimezone(UTC)).strftime(fmt)


# --- how lists show times (config.toml's time_zone and date_format) ----------------------------------------------

_display: dict[str, object] = {"zone": "UTC", "tz": UTC, "format": MINUTES}


def set_display(zone: str = "UTC", fmt: str = MINUTES) -> None:
    """Show list times in ``zone`` ("UTC", "local" or an IANA name) with ``fmt`` (a strftime format)."""
    tz: object = UTC
    if zone == "local":
        tz = None
    elif zone != "UTC":
        from zoneinfo import ZoneInfo

        tz = ZoneInfo(zone)
    _display.update(zone=zone, tz=tz, format=fmt or MINUTES)


def display_zone() -> str:
    """The zone list times are shown in, as a column title says it: ``UTC``, the local zone's abbreviation, or
    the IANA name."""
    zone = str(_display["zone"])
    if zone == "local":
        return datetime.now().astimezone().tzname() or "local"
    return zone


def display_width() -> int:
    """The width of a list time in the current format (for a column)."""
    return len(datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC).strftime(str(_display["format"])))


def listed(text: object) -> str:
    """An RFC 3339 time as lists show it (:func:`set_display`); ``""`` when empty; the text itself (cut to 16
    characters) when it does not parse. Never relative: the same database always shows the same text."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return ""
    moment = parse_rfc3339(text)
    if moment is None:
        return str(text)[:16]
    tz = _display["tz"]
    shown = moment.astimezone() if tz is None else moment.astimezone(tz)  # type: ignore[arg-type]
    return shown.strftime(str(_display["format"]))


def from_unix(seconds: object, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    """Unix seconds as UTC text (``fmt``); ``""`` for ``None``; the value itself when it is no plausible time."""
    if seconds is None:
        return ""
    try:
        return datetime.fromtimestamp(int(seconds), tz=UTC).strftime(fmt)  # type: ignore[call-overload]
    except (OverflowError, OSError, ValueError, TypeError):
        return str(seconds)


def from_unix_ms(millis: object, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    """Unix milliseconds as UTC text (see :func:`from_unix`)."""
    if millis is None:
        return ""
    try:
        return from_unix(int(millis) // 1000, fmt)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return str(millis)


def duration(seconds: int) -> str:
    """A whole-second span in its largest sensible unit: ``9 s``, ``4 min``, ``3 h``, ``12 d``, ``2 y``."""
    s = abs(int(seconds))
    if s < 120:
        return f"{s} s"
    if s < 2 * 3600:
        return f"{s // 60} min"
    if s < 2 * 86400:
        return f"{s // 3600} h"
    if s < 2 * 365 * 86400:
        return f"{s // 86400:,} d"
    return f"{s // (365 * 86400):,} y"


FAR_FUTURE_S = 10 * 365 * 86400
"""A span longer than this (ten years) is no countdown a user can use: it is said as "far in the future"."""


def time_left(seconds: int, at_unix: object = None) -> str:
    """``in 9 s``, ``in 3 h`` (:func:`duration`); a span past :data:`FAR_FUTURE_S` (no countdown anyone can use):
    its date when ``at_unix`` (the moment, Unix seconds) is given, ``on 2100-01-01``, else ``far in the future``."""
    if int(seconds) > FAR_FUTURE_S:
        date = from_unix(at_unix, "%Y-%m-%d") if at_unix is not None else ""
        return f"on {date}" if date and date[:1].isdigit() else "far in the future"
    return f"in {duration(seconds)}"
