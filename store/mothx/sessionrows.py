"""A session-list row: :class:`SessionSummary`, and how it is read from the cells of a ``sessions`` row.

The cells come as BLOBs (``Layout.session_select``) with their SQLite types, so a cell a foreign writer left
with a wrong type (a BLOB, a NULL, text in an integer column, bytes that are not UTF-8, a timestamp that is no
RFC 3339 time) becomes a default value and a line in the row's ``problems``: the row is shown as damaged and
every other row is unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from store import times
from store.mothx.aggregates import INT_COLUMNS, NOT_NULL_COLUMNS, SESSION_COLUMNS
from store.mothx.cells import as_int, as_text, bind, kind
from store.safetext import one_line

__all__ = ["SessionSummary", "ids_where", "summary_from_row"]


@dataclass(frozen=True)
class SessionSummary:
    id: str
    title: str
    preview: str
    cwd: str
    channel_type: str
    channel_id: str
    message_count: int
    last_active_at: str
    timestamp: str
    parent_session: str
    fork_kind: str
    fork_boundary_seq: int
    seed_length: int
    project_id: str
    project_name: str
    pinned: bool
    run_status: str          # status of the session's active (non-terminal) run, "" when none
    run_state: str = ""      # derived execution state (store.mothx.runs.derive_execution_state) when a run or a lease
    #                          is involved: "orphaned", "external", "local", "reserved", "recovery_failed",
    #                          "detached_remote", "inconsistent"; "" when idle. Read with the SQLite clock.
    lease_expires_at: int = 0  # Unix seconds when the session's active lease expires (0: none); at that moment
    #                            run_state may change without anything being written (e.g. external → orphaned)
    problems: tuple[str, ...] = ()  # why the row is damaged: cells a foreign writer left with a wrong type, bytes
    #                                 that are not UTF-8, a timestamp that is no RFC 3339 time ("" : none). Safe text.

    # Every text field is raw data (titles, previews, ids, paths may hold escapes or \udcXX): the UI and the
    # command line show them through the safe-text boundary (store.safetext / tui.safe).

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    @property
    def display_title(self) -> str:
        """The title, else the preview, else the id (raw data)."""
        return self.title or self.preview or self.id

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "preview": self.preview,
            "cwd": self.cwd,
            "channel_type": self.channel_type,
            "channel_id": self.channel_id,
            "message_count": self.message_count,
            "last_active_at": self.last_active_at,
            "timestamp": self.timestamp,
            "parent_session": self.parent_session,
            "fork_kind": self.fork_kind,
            "fork_boundary_seq": self.fork_boundary_seq,
            "seed_length": self.seed_length,
            "project_id": self.project_id,
            "project_name": self.project_name,
            "pinned": self.pinned,
            "run_status": self.run_status,
            "run_state": self.run_state,
            "lease_expires_at": self.lease_expires_at,
            "problems": list(self.problems),
        }


def ids_where(ids: list[str], *, foreign: bool = True) -> tuple[str, list[object]]:
    """SQL matching ``s.id`` against ``ids`` as the list read them: text (bytes that are not UTF-8 included)
    and, with ``foreign``, also a BLOB id of a foreign writer and a NULL id (read as ``""``)."""
    params: list[object] = []
    if not foreign:
        return "s.id IN (" + ", ".join(["CAST(? AS TEXT)"] * len(ids)) + ")", [bind(sid) for sid in ids]
    for sid in ids:
        b = bind(sid)
        params += [b, b]
    sql = "s.id IN (" + ", ".join(["CAST(? AS TEXT), CAST(? AS BLOB)"] * len(ids)) + ")"
    if "" in ids:
        sql = f"({sql} OR s.id IS NULL)"
    return sql, params


_DEFAULTS = {"channel_type": "local"}
_POSITIONS = {"id": 0, "cwd": 3, "channel_type": 4, "channel_id": 5, "timestamp": 8, "parent_session": 9,
              "fork_kind": 10, "fork_boundary_seq": 11, "seed_length": 12}


def _cell(name: str, value: object, sql_type: str, problems: list[str]) -> object:
    """One ``sessions`` cell (read as a BLOB) as the summary's value, noting in ``problems`` what is wrong."""
    if sql_type == "default":           # the layout has no such column
        return value if not isinstance(value, bytes) else as_text(value)
    if value is None or sql_type == "null":
        if name in NOT_NULL_COLUMNS:
            problems.append(f"{name} is NULL")
        return 0 if name in INT_COLUMNS else _DEFAULTS.get(name, "")
    raw = value if isinstance(value, bytes) else as_text(value).encode("utf-8", "surrogateescape")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "surrogateescape")
        if sql_type == "text":
            problems.append(f"{name} is not valid UTF-8")
    if name in INT_COLUMNS:
        if sql_type == "integer":
            return as_int(text)
        cell: object = raw if sql_type == "blob" else (_real(text) if sql_type == "real" else text)
        problems.append(f"{name} is {kind(cell)}, not an integer")
        return as_int(text) if sql_type != "blob" else 0
    if sql_type == "blob":
        problems.append(f"{name} is {kind(raw)}, not text")
    elif sql_type in ("integer", "real"):
        problems.append(f"{name} is {sql_type.upper()} {one_line(text)}, not text")
    elif name == "timestamp" and not _is_time(text):
        problems.append(f"timestamp {kind(text)[5:]} is not an RFC 3339 time")
    return text


def _real(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return text


def _clean_types() -> frozenset[str]:
    out = {""}
    for name, _ in SESSION_COLUMNS:
        declared = "integer" if name in INT_COLUMNS else "text"
        choices = [declared] if name in NOT_NULL_COLUMNS else [declared, "null"]
        out = {f"{prefix} {c}".lstrip() for prefix in out for c in choices}
    return frozenset(out)


_CLEAN = _clean_types()
"""The cell types of a row as the runtime writes it: every column present with its declared type (the columns
that may be NULL, NULL or not)."""


def _clean_summary(row: tuple) -> tuple[SessionSummary, bool] | None:
    """The summary of a row whose cells all have their declared types (the common case, read without the
    per-cell checks); None when a text cell is not UTF-8 (the caller then reads it cell by cell)."""
    try:
        created = row[8].decode() if row[8] is not None else ""
        summary = SessionSummary(
            row[0].decode(), row[1].decode(), row[2].decode(), row[3].decode() if row[3] is not None else "",
            row[4].decode(), row[5].decode(), row[6], row[7].decode() if row[7] is not None else "", created,
            row[9].decode() if row[9] is not None else "", row[10].decode(), int(row[11]), int(row[12]),
            row[13].decode(), row[14].decode(), bool(row[15]), row[16].decode())
    except (UnicodeDecodeError, AttributeError, TypeError, ValueError):
        return None
    if created and not _is_time(created):
        summary = replace(summary, problems=(f"timestamp {kind(created)[5:]} is not an RFC 3339 time",))
    return summary, bool(summary.run_status) or bool(row[17])


@lru_cache(maxsize=4096)
def _is_time(text: str) -> bool:
    """True when ``text`` is blank or an RFC 3339 time (cached: a list re-reads the same rows as it scrolls)."""
    return not text.strip() or times.parse_rfc3339(text) is not None


def summary_from_row(row: tuple) -> tuple[SessionSummary, bool]:
    """A list row (``Layout.session_select``) as a summary without its run state, and whether the session has an
    active run or an active lease row (then :func:`_with_run_states` derives the state). Cells of the wrong
    type become defaults, and the row's ``problems`` say which."""
    if row[18] in _CLEAN:
        fast = _clean_summary(row)
        if fast is not None:
            return fast
    types = as_text(row[18]).split(" ")
    problems: list[str] = []
    cells: dict[str, object] = {}
    for (name, _default), sql_type in zip(SESSION_COLUMNS, types, strict=False):
        cells[name] = _cell(name, row[_POSITIONS[name]], sql_type, problems)
    summary = SessionSummary(
        id=str(cells["id"]), title=as_text(row[1]), preview=as_text(row[2]), cwd=str(cells["cwd"]),
        channel_type=str(cells["channel_type"]), channel_id=str(cells["channel_id"]), message_count=as_int(row[6]),
        last_active_at=as_text(row[7]), timestamp=str(cells["timestamp"]), parent_session=str(cells["parent_session"]),
        fork_kind=str(cells["fork_kind"]), fork_boundary_seq=as_int(cells["fork_boundary_seq"]),
        seed_length=as_int(cells["seed_length"]), project_id=as_text(row[13]), project_name=as_text(row[14]),
        pinned=bool(row[15]), run_status=as_text(row[16]), problems=tuple(problems),
    )
    return summary, bool(summary.run_status) or bool(row[17])
