"""Reading entry JSON the way every store module does: strict RFC 8259, lossless for any number.

* ``NaN`` / ``Infinity`` are refused (mothx's Go decoder refuses them).
* An integer too long for Python's int-string limit (4,300 digits), or a number whose float would overflow
  to infinity, is kept as its digits in a :class:`BigNumber` instead of failing the whole entry: the entry
  still parses, and the number is shown as it is written.
* Text from the database may hold lone surrogates (``\\udcXX`` from bytes that are not UTF-8, or a ``\\ud83d``
  escape in the JSON): nothing here encodes, so they pass through; the output layer escapes them.

Only the standard library is imported (the session list imports this on its way to a first window).
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard

JsonObject = dict[str, Any]


class BigNumber(str):
    """A JSON number kept as its text (digits, sign, fraction, exponent) because Python cannot hold it as an
    ``int`` (over 4,300 digits) or a finite ``float``.

    It is a ``str`` so that every consumer can show it or ``json.dumps`` it without failing; code that asks
    "is this JSON value a string?" uses :func:`is_json_str`, which says no.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"BigNumber({len(self)} chars)"


def is_json_str(value: object) -> TypeGuard[str]:
    """True for a JSON string (not a :class:`BigNumber`)."""
    return isinstance(value, str) and not isinstance(value, BigNumber)


def json_str(value: object) -> str:
    """``value`` when it is a JSON string, else ``""``."""
    return value if isinstance(value, str) and not isinstance(value, BigNumber) else ""


class RejectedConstant(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity``: not JSON."""


def _reject_constant(name: str) -> object:
    raise RejectedConstant(f"{name} is not JSON")


def _parse_int(text: str) -> int | BigNumber:
    try:
        return int(text)
    except ValueError:          # longer than sys.get_int_max_str_digits()
        return BigNumber(text)


def _parse_float(text: str) -> float | BigNumber:
    value = float(text)
    return value if math.isfinite(value) else BigNumber(text)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_parse_int, parse_float=_parse_float)


def loads(text: str) -> Any:
    """The JSON value of ``text`` (raises ``json.JSONDecodeError``, :class:`RejectedConstant` or
    ``RecursionError``)."""
    return _DECODER.decode(text)


def parse_object(data: object) -> tuple[JsonObject | None, str | None]:
    """``(object, None)`` when ``data`` is the text of a JSON object, else ``(None, one-line reason)``.

    ``bytes`` are read as UTF-8 with ``surrogateescape`` (bytes that are not UTF-8 stay visible as
    ``\\udcXX``); any other non-text value is no JSON.
    """
    if data is None:
        return None, "no data"
    if isinstance(data, bytes):
        data = data.decode("utf-8", "surrogateescape")
    if not isinstance(data, str):
        return None, f"data is {type(data).__name__}, not JSON text"
    try:
        obj = _DECODER.decode(data)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON at char {exc.pos}"
    except RejectedConstant as exc:
        return None, f"invalid JSON: {exc}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as exc:   # (nothing else is expected; a reason is still better than a traceback)
        return None, f"invalid JSON: {type(exc).__name__}"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    return obj, None


def dumps_compact(value: object) -> str:
    """One-line JSON text of a parsed value (never raises: anything odd is shown with ``str``)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def pretty(value: object) -> str:
    """Indented JSON text of a parsed value (never raises)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)
