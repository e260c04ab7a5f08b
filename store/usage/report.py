"""The views: SQL aggregation of ``request_stats`` (one ``GROUP BY`` per view, by the view's key and the model so
each model's part is priced) and of the captured records (in an in-memory table, the same kind of query), folded
into :class:`~store.usage.model.UsageReport` values. Nothing here writes to the session directory."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING

from store.mothx.cells import as_text
from store.safetext import one_line
from store.usage.captured import captured_usage
from store.usage.model import (
    GROUPS,
    SOURCES,
    TOKEN_CAP,
    CapturedRecords,
    CapturedUsage,
    Group,
    Source,
    UsageReport,
    UsageRow,
)
from store.usage.prices import NO_PRICES, PriceTable

if TYPE_CHECKING:
    from store.mothx.schema import SchemaInfo
    from store.mothx.sessiondir import SessionDir


def _valid(column: str) -> str:
    return f"(typeof({column}) = 'integer' AND {column} BETWEEN 0 AND {TOKEN_CAP})"


def _count(column: str) -> str:
    return f"CASE WHEN {_valid(column)} THEN {column} ELSE 0 END"


_DAY = ("CASE WHEN typeof(r.timestamp) = 'text' AND r.timestamp GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*' "
        "THEN date(r.timestamp) END")
"""The UTC day of an RFC 3339 time (an offset is applied); NULL for anything that does not start as a date (SQLite
would read a bare number as a Julian day)."""

_MOTHX_KEYS: dict[Group, str] = {"day": _DAY, "session": "r.session_id", "model": "r.model", "cwd": "s.cwd"}

# Grouped by the view's key and the model (so each model's part is priced); a NULL/BLOB model groups alone.
_MOTHX_SQL = """
SELECT {key} AS k, r.model AS m, count(*) AS n,
       sum({inp}) AS i, sum({out}) AS o, 0 AS cw, 0 AS cr,
       sum(CASE WHEN {valid_total} AND r.total_tokens > 0 THEN r.total_tokens ELSE {inp} + {out} END) AS t,
       min(r.timestamp) AS first_at, max(r.timestamp) AS last_at,
       sum((NOT {valid_in}) + (NOT {valid_out}) + (NOT {valid_total})) AS bad,
       {extra}
FROM {stats} r {join}
{where}
GROUP BY k, m
"""

_STATS_COLUMNS = {"timestamp": "NULL", "session_id": "NULL", "model": "NULL", "input_tokens": "0",
                  "output_tokens": "0", "total_tokens": "0"}
"""The ``request_stats`` columns read, and what stands in for one a foreign layout lacks."""


def _stats_table(schema: SchemaInfo) -> str:
    """``request_stats``, or (a layout missing a column) a subquery with the missing columns as constants."""
    missing = [c for c in _STATS_COLUMNS if not schema.has("request_stats", c)]
    if not missing:
        return "request_stats"
    parts = [f"{_STATS_COLUMNS[c]} AS {c}" if c in missing else c for c in _STATS_COLUMNS]
    return f"(SELECT {', '.join(parts)} FROM request_stats)"


def _sessions_table(schema: SchemaInfo) -> str:
    return "sessions" if schema.has("sessions", "cwd") else "(SELECT id, NULL AS cwd FROM sessions)"

_CAPTURED_KEYS: dict[Group, str] = {"day": "date(timestamp)", "session": "session_id", "model": "model",
                                    "cwd": "cwd"}

_CAPTURED_SQL = """
SELECT {key} AS k, model AS m, count(*) AS n, sum(i), sum(o), sum(cw), sum(cr), sum(i + o + cw + cr),
       min(timestamp), max(timestamp), sum(bad), {extra}
FROM usage_records
{where}
GROUP BY {group}
"""


@dataclass
class _Acc:
    key: str
    agent: str = ""
    cwd: str = ""
    exists: bool = True
    requests: int = 0
    counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])
    first: str = ""
    last: str = ""
    cost: float | None = None
    unpriced: int = 0
    damaged: int = 0
    sources: set[str] = field(default_factory=set)

    def add(self, source: str, model: str, n: int, counts: Sequence[int], first: str, last: str, bad: int,
            prices: PriceTable) -> None:
        self.sources.add(source)
        self.requests += n
        for index, value in enumerate(counts):
            self.counts[index] += value
        if first and (not self.first or first < self.first):
            self.first = first
        if last and last > self.last:
            self.last = last
        self.damaged += bad
        if prices.configured:
            price = prices.find(model)
            if price is None:
                self.unpriced += counts[4]
            else:
                self.cost = (self.cost or 0.0) + price.cost(*counts[:4])

    def row(self) -> UsageRow:
        i, o, cw, cr, t = self.counts
        return UsageRow(self.key, self.requests, i, o, cw, cr, t, self.first, self.last, self.cost, self.unpriced,
                        self.damaged, self.agent, self.cwd, self.exists, tuple(s for s in ("mothx", "captured")
                                                                             if s in self.sources))


def _num(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mothx_groups(sd: SessionDir, by: Group, since: str) -> list[tuple[object, ...]]:
    schema = sd.schema
    if not schema.has("request_stats"):
        return []
    sessions = schema.has("sessions", "id")
    join = f"LEFT JOIN {_sessions_table(schema)} s ON s.id = r.session_id" if sessions and by in ("session", "cwd") \
        else ""
    if by == "cwd" and not join:
        key = "NULL"
    else:
        key = _MOTHX_KEYS[by]
    extra = "max(s.cwd) AS cwd, max(s.id IS NOT NULL) AS present" if join and by == "session" else \
        "NULL AS cwd, 1 AS present"
    where = f"WHERE {_DAY} >= ?" if since else ""
    sql = _MOTHX_SQL.format(key=key, inp=_count("r.input_tokens"), out=_count("r.output_tokens"),
                            valid_total=_valid("r.total_tokens"), valid_in=_valid("r.input_tokens"),
                            valid_out=_valid("r.output_tokens"), extra=extra, join=join, where=where,
                            stats=_stats_table(schema))
    with sd.db.read() as conn:
        return conn.execute(sql, (since,) if since else ()).fetchall()


def _captured_groups(records: Sequence[CapturedUsage], by: Group, since: str) -> list[tuple[object, ...]]:
    if not records:
        return []
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE usage_records (agent TEXT, session_id TEXT, timestamp TEXT, model TEXT, cwd TEXT, "
                     "i INTEGER, o INTEGER, cw INTEGER, cr INTEGER, bad INTEGER)")
        conn.executemany("INSERT INTO usage_records VALUES (?,?,?,?,?,?,?,?,?,?)",
                         [(_bindable(r.agent), _bindable(r.session_id), r.timestamp, _bindable(r.model),
                           _bindable(r.cwd), r.input_tokens, r.output_tokens, r.cache_write_tokens,
                           r.cache_read_tokens, r.damaged) for r in records])
        key = _CAPTURED_KEYS[by]
        group = "agent, k, m" if by == "session" else "k, m"
        extra = "agent, max(cwd), 1" if by == "session" else "'', NULL, 1"
        where = "WHERE date(timestamp) >= ?" if since else ""
        sql = _CAPTURED_SQL.format(key=key, extra=extra, where=where, group=group)
        return conn.execute(sql, (since,) if since else ()).fetchall()
    finally:
        conn.close()


def _bindable(text: str) -> str:
    """``text`` without lone surrogates (which sqlite3 refuses to bind): each shown as its escape."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def check_since(text: str) -> str:
    """``text`` as a ``YYYY-MM-DD`` day, or :class:`ValueError` with one line saying why."""
    try:
        return date.fromisoformat(text.strip()).isoformat() if text.strip() else ""
    except ValueError:
        raise ValueError(f"'{one_line(text)}' is not a date like 2026-11-30") from None


def usage(sd: SessionDir, by: Group = "day", *, source: Source = "all", since: str = "",
          prices: PriceTable = NO_PRICES, captured: CapturedRecords | None = None) -> UsageReport:
    """The view ``by`` of ``source`` since the day ``since`` (``YYYY-MM-DD``, UTC; ``""``: all of it).

    ``captured``: the records :func:`captured_usage` read (read here when not given and the source needs them;
    the screen reads them once and passes them to every view)."""
    if by not in GROUPS:
        raise ValueError(f"unknown grouping {by!r}")
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    since = check_since(since)
    accs: dict[tuple[str, str], _Acc] = {}
    problems: list[str] = list(prices.problems)

    def fold(src: str, rows: Iterable[tuple[object, ...]]) -> None:
        for k, m, n, i, o, cw, cr, t, first, last, bad, agent, cwd, present in rows:
            key = as_text(k)
            agent_text = as_text(agent) if by == "session" else ""
            acc = accs.get((agent_text, key))
            if acc is None:
                acc = accs[(agent_text, key)] = _Acc(key, agent_text)
            if by == "session":
                acc.cwd = acc.cwd or as_text(cwd)
                if src == "mothx":
                    acc.exists = bool(present) and bool(key)
            counts = [_num(i), _num(o), _num(cw), _num(cr), _num(t)]
            acc.add(src, as_text(m), _num(n), counts, as_text(first), as_text(last), _num(bad), prices)

    if source in ("mothx", "all"):
        fold("mothx", [(*row[:11], "", *row[11:]) for row in _mothx_groups(sd, by, since)])
    if source in ("captured", "all"):
        got = captured if captured is not None else captured_usage(sd)
        problems.extend(got.problems)
        fold("captured", _captured_groups(got.records, by, since))
    rows = [acc.row() for acc in accs.values()]
    if by == "day":
        rows.sort(key=lambda r: (r.key == "", r.key))
    else:
        rows.sort(key=lambda r: (-r.total_tokens, r.key, r.agent))
    total = _Acc("total")
    for r in rows:
        total.requests += r.requests
        for index, value in enumerate((r.input_tokens, r.output_tokens, r.cache_write_tokens, r.cache_read_tokens,
                                       r.total_tokens)):
            total.counts[index] += value
        total.first = min(filter(None, (total.first, r.first_at)), default="")
        total.last = max(total.last, r.last_at)
        total.damaged += r.damaged
        total.unpriced += r.unpriced
        total.sources.update(r.sources)
        if r.cost is not None:
            total.cost = (total.cost or 0.0) + r.cost
    if total.damaged:
        problems.append(f"{total.damaged} damaged token cell{'' if total.damaged == 1 else 's'} counted as 0")
    return UsageReport(by, source, since, tuple(rows), total.row(), prices.configured, tuple(problems))


def daily_series(report: UsageReport, *, days: int = 60) -> list[int]:
    """Total tokens per day of a ``day`` report, every day from its first to its last (a day without requests is
    0), at most the last ``days`` days: the data of a sparkline."""
    known = {r.key: r.total_tokens for r in report.rows if r.key}
    if not known:
        return []
    try:
        first, last = date.fromisoformat(min(known)), date.fromisoformat(max(known))
    except ValueError:
        return [known[k] for k in sorted(known)]
    first = max(first, last - timedelta(days=days - 1))
    span = (last - first).days + 1
    return [known.get((first + timedelta(days=n)).isoformat(), 0) for n in range(span)]
