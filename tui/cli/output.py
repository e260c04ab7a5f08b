"""Everything the command line prints goes through here: the CLI side of the one safe-text boundary.

* :func:`out` prints one line on standard output, :func:`out_text` a block (Markdown from ``show``) that keeps
  its newlines and tabs; both show every control, bidi, separator and lone-surrogate character as a visible
  escape (:func:`store.safetext.safe`), so no data string can write the clipboard, retitle the terminal or
  make text read backwards.
* :func:`err` / :func:`note` print one line on standard error (``sessionscope: …``), whitespace collapsed.
* :func:`json_out` prints JSON through :func:`store.safetext.json_dumps`: C1, DEL, bidi and surrogate characters
  are ``\\uXXXX`` escapes, so the text is safe on a terminal and still parses back to exactly the data.
* :func:`csv_out` prints records (the objects ``--json`` prints) as CSV: one column per key, every cell made
  safe, nested values as compact JSON, and a cell that starts like a formula (``=``, ``+``, ``-``, ``@``, tab,
  carriage return) prefixed with ``'`` so a spreadsheet shows it as text instead of running it (CSV injection).
  :func:`add_list_options` / :func:`list_out` give every list command ``--json`` / ``--csv`` / ``--redact``.
* :func:`table` prints a Rich :class:`~rich.table.Table` of plain cells (never parsed as markup, so ``[/]``
  is literal): as wide as the terminal on a terminal, else as wide as its widest row, so piped output is
  never cut.

Writing never raises :exc:`UnicodeEncodeError`: an output stream that cannot encode a character gets a
backslash escape instead (JSON gets ``\\uXXXX``, which any encoding can carry).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from store.exports import FORMULA_START, csv_cell, csv_text
from store.safetext import json_dumps, one_line, safe

PROG = "sessionscope"


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))


def out(line: object = "", *, stream: TextIO | None = None) -> None:
    """One line on standard output: ``line`` made safe (a newline or tab inside it is shown, not kept)."""
    _write(stream or sys.stdout, safe(line) + "\n")


def out_text(text: object, *, stream: TextIO | None = None) -> None:
    """A block of text (Markdown) on standard output: newlines and tabs kept, everything else made safe."""
    shown = safe(text, newlines=True, tabs=True)
    _write(stream or sys.stdout, shown if shown.endswith("\n") else shown + "\n")


def err(message: object, *, stream: TextIO | None = None) -> None:
    """``sessionscope: MESSAGE`` as one safe line on standard error (``str(exc)`` of any error may hold data)."""
    _write(stream or sys.stderr, f"{PROG}: {one_line(message)}\n")


def note(message: object) -> None:
    err(f"note: {one_line(message)}")


def _utf8(stream: TextIO) -> bool:
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
    return encoding in ("utf-8", "utf8", "utf-16", "utf-32")


def json_text(value: object, stream: TextIO | None = None) -> str:
    """The JSON text :func:`json_out` writes (ASCII-only for a stream that is not Unicode)."""
    if stream is not None and not _utf8(stream):
        # ASCII-only: every non-ASCII character (surrogates too) is a \uXXXX escape; DEL is ASCII, json keeps it
        return json.dumps(value, indent=2, ensure_ascii=True).replace("\x7f", "\\u007f")
    return json_dumps(value)


def json_out(value: object, *, stream: TextIO | None = None) -> None:
    """``value`` as indented JSON on standard output, with no raw control, bidi or surrogate character."""
    target = stream or sys.stdout
    _write(target, json_text(value, target) + "\n")


# --------------------------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # numbers
    cut: bool = False  # may be cut with "…" to fit a terminal (a work dir, a title); the others never are


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def render_table(columns: Sequence[Column], rows: Sequence[Sequence[object]], *, width: int | None = None,
                 terminal: bool = False) -> list[str]:
    """The table as lines of text (trailing spaces removed). ``width``: cut to fit it (a terminal), else the
    table is as wide as it needs. ``terminal``: the header in bold."""
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    cells = [[one_line(value) for value in row] for row in rows]
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=False,
                  header_style="bold" if terminal else "", expand=False, highlight=False)
    widths = [max([cell_len(c.header), *(cell_len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    natural = sum(widths) + 2 * (len(columns) - 1)
    if width is not None and natural > width:
        widths = _fit(widths, [c.cut for c in columns], width - (natural - sum(widths)))
    for c, w in zip(columns, widths, strict=True):
        table.add_column(Text(c.header), justify="right" if c.right else "left", no_wrap=True,
                         overflow="ellipsis", width=w)
    for row in cells:
        table.add_row(*(Text(value) for value in row))
    buffer = io.StringIO()
    console = Console(file=buffer, width=max(20, width if width is not None else natural + 1), markup=False,
                      highlight=False, emoji=False, force_terminal=terminal, color_system="standard" if terminal
                      else None, no_color=not terminal, soft_wrap=False, legacy_windows=False)
    console.print(table)
    return [line.rstrip() for line in buffer.getvalue().splitlines()]


def _fit(widths: list[int], cut: list[bool], room: int, least: int = 8) -> list[int]:
    """Column widths that fit ``room``: columns that may not be cut keep theirs; the others share what is left,
    the narrow ones keeping their width and the wide ones an equal part of the rest (at least ``least``)."""
    left = room - sum(w for w, c in zip(widths, cut, strict=True) if not c)
    wanted = sorted((w, i) for i, (w, c) in enumerate(zip(widths, cut, strict=True)) if c)
    fitted = list(widths)
    for n, (w, i) in enumerate(wanted):
        share = max(least, left // (len(wanted) - n))
        fitted[i] = min(w, share)
        left -= fitted[i]
    return fitted


def table(columns: Sequence[Column], rows: Sequence[Sequence[object]], *, stream: TextIO | None = None) -> None:
    """Print ``rows`` under ``columns``: fitted to the terminal on one, never cut when piped."""
    target = stream or sys.stdout
    terminal = _isatty(target)
    width = shutil.get_terminal_size((120, 24)).columns if terminal else None
    lines = render_table(columns, rows, width=width, terminal=terminal)
    # Rich's own styles are the only escapes in a line: every cell was made safe before it was laid out.
    _write(target, "".join(line + "\n" for line in lines))


# ------------------------------------------------------------------------------------------------ CSV / lists

"""A cell starting with one of these is a formula to a spreadsheet: it is written with a leading ``'``."""


def csv_out(records: Sequence[Mapping[str, object]], *, columns: Sequence[str] | None = None,
            stream: TextIO | None = None) -> None:
    """``records`` as CSV on standard output (see :func:`csv_text`)."""
    _write(stream or sys.stdout, csv_text(records, columns))


def add_list_options(parser: argparse.ArgumentParser, json_help: str) -> None:
    """``--json`` / ``--csv`` (one of them) and ``--redact`` for a command that lists things."""
    formats = parser.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true", help=json_help)
    formats.add_argument("--csv", action="store_true",
                         help="print the same objects as CSV, one column per field (cells starting with = + - @ "
                              "are prefixed with ' so a spreadsheet does not run them)")
    parser.add_argument("--redact", action="store_true",
                        help="with --json or --csv: replace values that look like secrets by [REDACTED:kind]")


def list_out(args: argparse.Namespace, records: Sequence[Mapping[str, object]],
             json_doc: object = None) -> bool:
    """Print ``records`` as CSV (``--csv``) or JSON (``--json``: ``json_doc``, default the list itself); False
    when neither was asked (the caller prints its table). With ``--redact`` every string is redacted, JSON
    gets ``redactions`` (an object; a list is wrapped as ``{"items": [...], "redactions": {...}}``) and one
    line on standard error says what was redacted."""
    wanted_csv, wanted_json = bool(getattr(args, "csv", False)), bool(getattr(args, "json", False))
    redact = bool(getattr(args, "redact", False))
    if not (wanted_csv or wanted_json):
        if redact:
            note("--redact applies to --json and --csv output only")
        return False
    red = None
    if redact:
        from store.redact import Redactor

        red = Redactor()
    if wanted_csv:
        rows = [{k: red.value(v) for k, v in r.items()} for r in records] if red is not None else records
        csv_out(rows)
    else:
        doc: object = list(records) if json_doc is None else json_doc
        if red is not None:
            doc = red.value(doc)
            doc = {**doc, "redactions": red.report()} if isinstance(doc, dict) else \
                {"items": doc, "redactions": red.report()}
        json_out(doc)
    if red is not None:
        note(red.summary())
    return True


__all__ = ["Column", "FORMULA_START", "add_list_options", "csv_cell", "csv_out", "csv_text", "err", "json_out",
           "json_text", "list_out", "note", "out", "out_text", "render_table", "table"]
