"""Writing export files where the user said, and nowhere else.

Every export (a transcript as Markdown or JSON, a repaired copy of an agent transcript) is written through
:func:`write_file`:

* the default name comes from :func:`default_name`: an id sanitized to letters, digits, ``-``, ``_`` and ``.``
  (no separators, no ``..``, bounded length), so an id like ``../../etc/x`` cannot leave the chosen folder;
* a symbolic link at the target is refused (never followed, never written through), dangling or not;
* a new file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``; replacing an existing regular file (only when
  the caller says so) writes a new file beside it and renames it over, so a link swapped in meanwhile is
  replaced, not followed;
* text is encoded as UTF-8; anything that cannot be encoded (a lone surrogate) is written as a ``\\udXXX``
  escape, never dropped and never a silent failure.
"""

from __future__ import annotations

import csv
import io
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from store.errors import StoreError
from store.safetext import filename_part, json_dumps, one_line, safe

MAX_NAME_CHARS = 64


class ExportRefused(StoreError):
    """The export target is not a place an export may be written (a link, a folder, an existing file)."""


def default_name(item_id: str, extension: str) -> str:
    """``<sanitized id><extension>``: one file name that stays inside the folder it is joined to."""
    return filename_part(item_id, limit=MAX_NAME_CHARS, fallback="export") + extension


def encode_text(text: str) -> bytes:
    """UTF-8 bytes of ``text``; characters UTF-8 cannot hold (lone surrogates) become ``\\udXXX`` escapes."""
    return text.encode("utf-8", "backslashreplace")


def describe_target(path: Path) -> str:
    """Where ``path`` really points, for a prompt: the path itself, or ``path → target`` for a link."""
    try:
        if path.is_symlink():
            return f"{path} → {os.readlink(path)}"
    except OSError:
        pass
    return str(path)


def check_target(path: Path, *, replace: bool = False) -> None:
    """Raise :class:`ExportRefused` unless an export may be written at ``path``."""
    shown = one_line(str(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise ExportRefused(f"The folder {one_line(str(path.parent))} does not exist.") from None
        return
    except OSError as exc:
        raise ExportRefused(f"{shown} cannot be checked: {exc.strerror or exc}.") from exc
    if stat.S_ISLNK(st.st_mode):
        raise ExportRefused(
            f"{one_line(describe_target(path))} is a symbolic link: exports never write through a link."
        )
    if stat.S_ISDIR(st.st_mode):
        raise ExportRefused(f"{shown} is a folder: add a file name.")
    if not stat.S_ISREG(st.st_mode):
        raise ExportRefused(f"{shown} is not a regular file: exports only write regular files.")
    if not replace:
        raise ExportRefused(f"{shown} already exists: exports never replace a file unless asked to.")


def write_file(path: str | os.PathLike[str], data: str | bytes, *, replace: bool = False) -> int:
    """Write ``data`` to ``path`` as described in the module docstring; return the number of bytes written."""
    target = Path(path)
    body = encode_text(data) if isinstance(data, str) else data
    check_target(target, replace=replace)
    if not replace or not os.path.lexists(target):
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except FileExistsError:
            raise ExportRefused(f"{one_line(str(target))} already exists: exports never replace a file unless asked to.") from None
        except OSError as exc:
            raise StoreError(f"{one_line(str(target))} could not be written: {exc.strerror or exc}.") from exc
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        return len(body)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name[:40]}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        os.replace(temp, target)
    except OSError as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise StoreError(f"{one_line(str(target))} could not be written: {exc.strerror or exc}.") from exc
    return len(body)


# --- CSV (every list's --csv, and a list exported from the app) ----------------------------------------------

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """One CSV cell: ``None`` empty, booleans ``true`` / ``false``, numbers as they are, lists and objects as
    compact JSON; text made safe (newlines and tabs kept, every other control shown as an escape) and, when
    it starts like a formula, prefixed with ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (Mapping, list, tuple)):
        text = json_dumps(value, indent=None)
    else:
        text = safe(value, newlines=True, tabs=True)
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_text(records: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None) -> str:
    """``records`` as CSV text (a header row, then one row per record, ``\\n`` line ends: no raw carriage return).
    ``columns``: the keys to write, in order (default: every key, in the order first seen)."""
    if columns is None:
        seen: dict[str, None] = {}
        for r in records:
            seen.update(dict.fromkeys(r))
        columns = list(seen)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    for r in records:
        writer.writerow([csv_cell(r.get(c)) for c in columns])
    return buffer.getvalue()
