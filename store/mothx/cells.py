"""Reading the cells of a row whose layout is declared but whose values may be foreign.

SQLite keeps whatever a writer stored: a ``TEXT`` in an ``INTEGER`` column (``epoch = 'abc'``), a ``BLOB``
anywhere, a ``NULL`` in a column the DDL declares ``NOT NULL`` (a foreign layout), a ``REAL`` where an integer
belongs. A row that holds such a cell is still shown; it is marked damaged with one problem per cell
(``session_runtime_leases.epoch holds TEXT 'abc'``), and its value reads as the column's default. Nothing that
reads a row here raises for what the row holds.

A :class:`Cells` reads one row: ``c.text(i, "status")``, ``c.integer(i, "epoch")``; ``c.problems`` is the tuple
to put on the row's dataclass.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.safetext import one_line

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
_PREVIEW = 40


def describe_value(value: object) -> str:
    """The stored value in words, safe for one line: ``TEXT 'abc'``, ``BLOB of 3 bytes``, ``NULL``, ``REAL 1.5``."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"BLOB of {len(bytes(value))} bytes"
    if isinstance(value, bool):
        return f"INTEGER {int(value)}"
    if isinstance(value, int):
        return f"INTEGER {value}"
    if isinstance(value, float):
        return f"REAL {value!r}"
    text = one_line(value)
    if len(text) > _PREVIEW:
        text = text[:_PREVIEW] + "…"
    return f"TEXT '{text}'"


def as_text(value: object) -> str:
    """A stored value as text for display (a BLOB decoded leniently, a number written out)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


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
        self.problem(column, describe_value(value))
        return as_text(value) if value is not None else default

    def text_or_none(self, index: int, column: str) -> str | None:
        """A nullable ``TEXT`` cell."""
        value = self._get(index)
        if value is None or isinstance(value, str):
            return value
        self.problem(column, describe_value(value))
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
        self.problem(column, describe_value(value))
        return as_text(value)

    def integer(self, index: int, column: str, default: int = 0, *, upper: int = INT64_MAX) -> int:
        """An ``INTEGER NOT NULL`` cell; ``upper`` is the largest value the caller can still use."""
        value = self._get(index)
        if isinstance(value, int) and not isinstance(value, bool):
            if value > upper or value < INT64_MIN:
                self.problem(column, f"{describe_value(value)}, out of range")
                return default
            return value
        self.problem(column, describe_value(value))
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
        self.problem(column, describe_value(value))
        return False


def joined(problems: Sequence[str]) -> str:
    """Problems as one clause (``''`` when there are none)."""
    return "; ".join(problems)
