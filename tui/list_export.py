"""Any list of the app to a CSV or JSON file: ``E`` (CSV) and ``J`` (JSON) on every screen that shows a list.

The list is the focused :class:`~tui.widgets.row_list.RowList`, else the screen's first one. Every row of its
source is read (by keyset pages, in a thread worker; at most :data:`MAX_ROWS`), one record per row with a field
per column, its value the text the cell shows (made safe: :func:`tui.widgets.row_columns.cell_text`). The file
goes to the home folder under a name made from the screen and the list (``~/sessions-sessions.csv``; an
existing file is never replaced: ``-2``, ``-3`` … are tried) through :func:`store.exports.write_file`, never
into the session directory and never through a link. One line says where it went, and the path is copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from store import exports
from store.safetext import json_dumps, one_line
from tui.formatting import describe_error, plural, tildify
from tui.safe import notify
from tui.widgets.row_columns import cell_text
from tui.widgets.row_list import RowList

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

    from tui.widgets.row_sources import RowSource

Format = Literal["csv", "json"]
MAX_ROWS = 100_000
PAGE = 500


def target_list(screen: Screen[Any]) -> RowList[Any] | None:
    """The focused list, else the screen's first list (None when the screen shows none)."""
    focused = screen.focused
    if isinstance(focused, RowList):
        return focused
    lists = list(screen.query(RowList))
    return lists[0] if lists else None


def all_rows(source: RowSource[Any], limit: int = MAX_ROWS) -> Iterator[Any]:
    """Every row of ``source`` in list order, page by page (at most ``limit``)."""
    page = source.first(PAGE)
    count = 0
    while True:
        for row in page.rows:
            yield row
            count += 1
            if count >= limit:
                return
        if not page.more or not page.rows:
            return
        page = source.after(source.key(page.rows[-1]), PAGE)


def free_path(folder: Path, stem: str, extension: str) -> Path:
    """``folder/<stem><extension>``, or ``<stem>-2`` … when it exists."""
    name = exports.default_name(stem, extension)
    path = folder / name
    n = 2
    while path.exists() or path.is_symlink():
        path = folder / exports.default_name(f"{stem}-{n}", extension)
        n += 1
    return path


def export_list(app: App[Any], fmt: Format) -> None:
    """Start exporting the current screen's list to a file (see the module's documentation)."""
    screen = app.screen
    lst = target_list(screen)
    if lst is None or lst.source is None:
        notify(app, "This screen shows no list to export.", severity="warning", timeout=3)
        return
    source = lst.source
    columns = list(lst.columns)
    stem = f"{type(screen).__name__.removesuffix('Screen').lower()}-{lst.id or 'list'}"

    def work() -> None:
        try:
            records = [{(c.title or c.key): cell_text(_cell(c, row)).plain for c in columns}
                       for row in all_rows(source)]
            if fmt == "csv":
                text = exports.csv_text(records)
            else:
                text = json_dumps(records) + "\n"
            path = free_path(Path.home(), stem, f".{fmt}")
            exports.write_file(path, text)
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            app.call_from_thread(notify, app, f"The list could not be exported: {describe_error(exc)}",
                                 title="Export failed", severity="error")
            return
        app.call_from_thread(_done, app, path, len(records))

    app.run_worker(work, thread=True, exclusive=True, group="list-export", exit_on_error=False,
                   description="Export a list")


def _cell(column: Any, row: Any) -> Any:
    try:
        return column.cell(row)
    except Exception as exc:  # noqa: BLE001 - a bad cell is written as its reason, as the list draws it
        return f"⚠ {one_line(describe_error(exc))}"


def _done(app: App[Any], path: Path, rows: int) -> None:
    from tui.clipboard import copy_quietly

    via = copy_quietly(app, str(path))
    copied = f"; the path is on the {via}" if via else ""
    notify(app, f"Exported {plural(rows, 'row')} to {tildify(path)}{copied}.", title="Export")


__all__ = ["MAX_ROWS", "all_rows", "export_list", "free_path", "target_list"]
