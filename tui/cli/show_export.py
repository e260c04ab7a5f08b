"""Where ``show`` puts an export: standard output, or a file (``--output PATH``); optional ``--redact``.

* :func:`add_export_options` adds ``--output PATH``, ``--replace`` and ``--redact`` to a parser.
* :func:`redactor` is the :class:`store.redact.Redactor` of a command (``None`` without ``--redact``).
* :func:`emit_text` prints a Markdown or HTML export, or writes it through :func:`store.exports.write_file`
  (never through a symbolic link, never over a file without ``--replace``) and prints the path written.
* :func:`emit_json` does the same for a JSON document; with ``--redact`` every string in it is redacted and
  the counts per kind are added as ``"redactions": {kind: n}``.

With ``--redact`` one line on standard error says what was redacted (``sessionscope: note: redacted 2 values:
1 api-key, 1 jwt``), also when nothing was.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from store.exports import write_file
from store.redact import Redactor
from store.safetext import json_dumps, safe
from tui.cli.output import json_out, note, out, out_text


def add_export_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", "-o", metavar="PATH", type=Path, default=None,
                        help="write the export to PATH instead of standard output (never through a link)")
    parser.add_argument("--replace", action="store_true", help="with --output: replace an existing file")
    parser.add_argument("--redact", action="store_true",
                        help="replace values that look like secrets (API keys, tokens, private keys, passwords in "
                             "URLs) by [REDACTED:kind] and report how many of each")


def redactor(args: argparse.Namespace) -> Redactor | None:
    return Redactor() if getattr(args, "redact", False) else None


def _report(red: Redactor | None) -> None:
    if red is not None:
        note(red.summary())


def _write(args: argparse.Namespace, text: str) -> None:
    path: Path = args.output.expanduser()
    size = write_file(path, text, replace=bool(getattr(args, "replace", False)))
    out(f"wrote {path.absolute()} ({size:,} bytes)")


def emit_text(args: argparse.Namespace, text: str, red: Redactor | None, *, redacted: bool = False) -> None:
    """A Markdown or HTML export to ``--output`` or standard output. ``redacted``: ``text`` was built with
    ``red`` already (the HTML page redacts each data string); else it is redacted here."""
    if red is not None and not redacted:
        text = red.text(text)
    text = safe(text, newlines=True, tabs=True)
    if getattr(args, "output", None) is not None:
        _write(args, text)
    else:
        out_text(text)
    _report(red)


def emit_json(args: argparse.Namespace, doc: dict[str, object], red: Redactor | None) -> None:
    """A JSON export to ``--output`` or standard output (``redactions`` added with ``--redact``)."""
    if red is not None:
        redacted = red.value(doc)
        assert isinstance(redacted, dict)
        doc = {**redacted, "redactions": red.report()}
    if getattr(args, "output", None) is not None:
        _write(args, json_dumps(doc) + "\n")
    else:
        json_out(doc)
    _report(red)


__all__ = ["add_export_options", "emit_json", "emit_text", "redactor"]
