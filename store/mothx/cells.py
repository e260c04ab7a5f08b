"""Cell values as a foreign writer may have left them: read without raising, named when odd, and text handed back
to SQLite.

SQLite keeps whatever a writer stored: a ``TEXT`` in an ``INTEGER`` column (``epoch = 'abc'``), a ``BLOB``
anywhere, a ``NULL`` in a column the DDL declares ``NOT NULL`` (a foreign layout), a ``REAL`` where an integer
belongs, bytes that are not UTF-8 in a ``TEXT`` column. A row that holds such a cell is still shown; it is marked
damaged with one problem per cell (``session_runtime_leases.epoch holds TEXT 'abc'``), and its value reads as the
column's default. Nothing that reads a row here raises for what the row holds.

* :func:`decode` reads bytes as UTF-8 with ``surrogateescape`` (what the connections do): bytes that are not
  UTF-8 become ``\\udcXX`` and round-trip back to the same bytes.
* :func:`bind` turns such a string back into what SQLite stored, for a parameter: ``sqlite3`` refuses to bind
  a ``str`` holding surrogates. SQL compares it as ``CAST(? AS TEXT)`` (an index is still used).
* :func:`kind` names a cell's type and value for a reason shown to the user (made safe with ``one_line``).
* A :class:`Cells` reads one row: ``c.text(i, "status")``, ``c.integer(i, "epoch")``; ``c.problems`` is the tuple
  to put on the row's dataclass.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from store.safetext import one_line

ERRORS = "sessionscope-text"
"""The codec error handler text cells are read and bound with (registered on import):

* decoding: an encoded surrogate (``ED A0–BF 80–BF``, how a lone ``\\ud83d`` from a JSON escape is stored) reads
  as that surrogate; any other byte that is not UTF-8 reads as ``\\udc80``–``\\udcff`` (``surrogateescape``);
* encoding: the reverse, so every string read from a cell binds back to exactly the bytes it came from, and a
  lone surrogate from parsed JSON is stored losslessly too."""


def _decode_error(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, i = exc.object, exc.start
    if data[i] == 0xED and i + 2 < len(data) and 0xA0 <= data[i + 1] <= 0xBF and 0x80 <= data[i + 2] <= 0xBF:
        return chr(0xD000 | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)), i + 3
    return chr(0xDC00 + data[i]), i + 1


def _encode_error(exc: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = bytearray()
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(code - 0xDC00)
        elif 0xD800 <= code <= 0xDFFF:
            out += ch.encode("utf-8", "surrogatepass")
        else:
            raise exc
    return bytes(out), exc.end


def _handler(exc: UnicodeError) -> tuple[str | bytes, int]:
    return _decode_error(exc) if isinstance(exc, UnicodeDecodeError) else _encode_error(exc)


codecs.register_error(ERRORS, _handler)


def decode(raw: bytes) -> str:
    """A ``text_factory``: UTF-8; what is not UTF-8 kept losslessly as surrogates (see :data:`ERRORS`)."""
    return raw.decode("utf-8", ERRORS)


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
    """``text`` as a parameter for ``CAST(? AS TEXT)``: itself, or, when it holds surrogates, the bytes it was read
    from (see :data:`ERRORS`)."""
    if not has_surrogates(text):
        return text
    return text.encode("utf-8", ERRORS)


def not_utf8(value: object) -> bool:
    """True for a cell read as text that held bytes that are not UTF-8 (``\\udc80``-``\\udcff``)."""
    return isinstance(value, str) and any("\udc80" <= ch <= "\udcff" for ch in value) and has_surrogates(value)


def kind(value: object, limit: int = 40) -> str:
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


INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class Cells:
    """One row of ``table``; every read records a problem instead of raising."""

    def __init__(self, table: str, row: Sequence[object]) -> None:
        self.table = table
        self.row = row
        self._problems: list[str] = []

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(self._problems)

    def problem(self, column: str, what: str) -> None:
        self._problems.append(f"{self.table}.{column} holds {what}")

    def _get(self, index: int) -> object:
        return self.row[index] if index < len(self.row) else None

    def text(self, index: int, column: str, default: str = "") -> str:
        """A ``TEXT NOT NULL`` cell (``NULL``, ``BLOB`` or a number is a problem; it reads as text anyway)."""
        value = self._get(index)
        if isinstance(value, str):
            return value
        self.problem(column, kind(value))
        return as_text(value) if value is not None else default

    def text_or_none(self, index: int, column: str) -> str | None:
        """A nullable ``TEXT`` cell."""
        value = self._get(index)
        if value is None or isinstance(value, str):
            return value
        self.problem(column, kind(value))
        return as_text(value)

    def loose_text(self, index: int, column: str, *, nullable: bool = False) -> str | None:
        """A cell whose encoding is not specified (``DATETIME`` columns): text or a number is fine, a ``BLOB``
        (or a ``NULL`` where ``nullable`` is false) is a problem."""
        value = self._get(index)
        if value is None:
            if not nullable:
                self.problem(column, "NULL")
                return ""
            return None
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        self.problem(column, kind(value))
        return as_text(value)

    def integer(self, index: int, column: str, default: int = 0, *, upper: int = INT64_MAX) -> int:
        """An ``INTEGER NOT NULL`` cell; ``upper`` is the largest value the caller can still use."""
        value = self._get(index)
        if isinstance(value, int) and not isinstance(value, bool):
            if value > upper or value < INT64_MIN:
                self.problem(column, f"{kind(value)}, out of range")
                return default
            return value
        self.problem(column, kind(value))
        return default

    def integer_or_none(self, index: int, column: str, *, upper: int = INT64_MAX) -> int | None:
        """A nullable ``INTEGER`` cell."""
        if self._get(index) is None:
            return None
        return self.integer(index, column, 0, upper=upper)

    def boolean(self, index: int, column: str) -> bool:
        """A ``BOOLEAN NOT NULL`` cell (0 / 1; SQLite's numeric affinity keeps ``TRUE``/``FALSE`` as 1 / 0)."""
        value = self._get(index)
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            return bool(value)
        self.problem(column, kind(value))
        return False


def joined(problems: Sequence[str]) -> str:
    """Problems as one clause (``''`` when there are none)."""
    return "; ".join(problems)
