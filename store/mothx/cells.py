"""Cell values as a foreign writer may have left them, and text handed back to SQLite.

SQLite stores whatever a writer gives it: a ``TEXT`` column may hold a BLOB, NULL, or bytes that are not
UTF-8; an ``INTEGER`` column (other than a rowid alias) may hold text or a REAL. The list, the transcript and
the exports read every cell through these helpers, so one odd cell marks its row as damaged instead of
failing the whole read.

* :func:`decode` reads bytes as UTF-8 with ``surrogateescape`` (what the connections do): bytes that are not
  UTF-8 become ``\\udcXX`` and round-trip back to the same bytes.
* :func:`bind` turns such a string back into what SQLite stored, for a parameter: ``sqlite3`` refuses to bind
  a ``str`` holding surrogates. SQL compares it as ``CAST(? AS TEXT)`` (an index is still used).
* :func:`kind` names a cell's type and value for a reason shown to the user (made safe with ``one_line``).
"""

from __future__ import annotations

from store.safetext import one_line


def decode(raw: bytes) -> str:
    """A ``text_factory``: UTF-8, with bytes that are not UTF-8 kept as ``\\udcXX``."""
    return raw.decode("utf-8", "surrogateescape")


def as_text(value: object) -> str:
    """A cell as text: ``""`` for NULL, bytes decoded as :func:`decode` does, numbers as written."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return decode(value)
    return value if isinstance(value, str) else str(value)


def as_int(value: object) -> int:
    """A cell as an integer; 0 for anything that is not one (NULL, text, a BLOB, a fractional REAL)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip()) if len(value) < 40 else 0
        except ValueError:
            return 0
    return 0


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a surrogate code point (bytes that were not UTF-8, or an escaped lone one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def bind(text: str) -> str | bytes:
    """``text`` as a parameter for ``CAST(? AS TEXT)``: itself, or its bytes when it holds surrogates."""
    if not has_surrogates(text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def not_utf8(value: object) -> bool:
    """True for a cell read as text that held bytes that are not UTF-8 (``\\udc80``-``\\udcff``)."""
    return isinstance(value, str) and any("\udc80" <= ch <= "\udcff" for ch in value) and has_surrogates(value)


def kind(value: object, limit: int = 24) -> str:
    """A cell's SQLite type and (short) value for a reason: ``NULL``, ``a BLOB of 3 bytes``, ``REAL 1.5``,
    ``TEXT 'abc'``. Safe for one line."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"a BLOB of {len(value)} byte{'' if len(value) == 1 else 's'}"
    if isinstance(value, float):
        return f"REAL {value!r}"
    if isinstance(value, int):
        return f"INTEGER {value}"
    text = str(value)
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"TEXT '{one_line(shown)}'"
